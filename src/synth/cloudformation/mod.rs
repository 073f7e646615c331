//! The CloudFormation backend: L1 types generated from the registry schemas, intrinsics, and the
//! lowering of each CloudFormation stage of a stack to one template.

pub mod expr;
// Generated from schemas; items without a schema description carry no doc comment.
#[allow(missing_docs)]
pub mod l1;
pub mod l1_support;
mod lower;
mod resources;
mod template;

use crate::app::{Stack, StageId, Tags};
use crate::constructs::ConstructRef;
use crate::diagnostics::Diagnostics;
use crate::resources::ResourceGraph;
use serde_json::Value;
use std::collections::BTreeMap;

pub use expr::{Expr, Val};

/// The templates of every CloudFormation stage of `stack`, keyed by stage.
pub fn templates(
    stack: &Stack,
    graph: &ResourceGraph,
    tags: &Tags,
) -> Result<BTreeMap<StageId, Value>, Diagnostics> {
    let mut cx = template::StackTemplates::new(stack);
    for (index, node) in stack.nodes().iter().enumerate() {
        if !cx.templates.contains_key(&node.stage) {
            continue;
        }
        if let Some(expanded) = graph.of_node(index) {
            for r in expanded {
                resources::lower(&mut cx, r);
            }
        } else if let Some(construct) = ConstructRef::of(node.construct.as_ref()) {
            lower::lower(&mut cx, node.stage, &node.id, construct);
        }
    }
    for stage in stack.stages() {
        if let crate::app::StageKind::Helm(release) = &stage.kind {
            for (_, r) in &release.set_from_outputs {
                cx.plain_output(r);
            }
        }
    }
    cx.finish(tags)
}
