//! The CloudFormation backend: L1 types generated from the registry schemas, intrinsics, and the
//! lowering of a stack's resource graph, one template per CloudFormation stage.

pub mod expr;
// Generated from schemas; items without a schema description carry no doc comment.
#[allow(missing_docs)]
pub mod l1;
pub mod l1_support;
mod lower;
mod resources;
mod template;

use crate::app::{Stack, StageId, Tags};
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
    // Resources of Kubernetes stages (their objects) have no template.
    for r in graph.resources.iter() {
        if cx.templates.contains_key(&r.stage) {
            resources::lower(&mut cx, r);
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
