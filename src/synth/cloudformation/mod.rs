//! The CloudFormation backend: L1 types generated from the registry schemas, intrinsics, and the
//! lowering of a stack's resource graph, one template per CloudFormation stage.

pub mod expr;
// Generated from schemas; items without a schema description carry no doc comment. Documented
// as `crate::generated::cloudformation`, so the generated types stay out of this module's page.
#[allow(missing_docs)]
#[doc(hidden)]
pub mod l1;
pub mod l1_support;
mod lower;
mod nag;
mod resources;
mod template;

use super::shape::TypeShapes;
use super::{Backend, BackendInput, BackendOutput};
use crate::app::{Stack, StageId, StageKind, Tags};
use crate::assembly::manifest::{Artifact, ArtifactFormat, Parameter, StageManifest};
use crate::diagnostics::Diagnostics;
use crate::resources::ResourceGraph;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::OnceLock;

pub use expr::{Expr, Val};

/// The property shapes of every vendored resource type, parsed once from the table
/// `hyperforge-codegen` generates from the registry schemas (`shapes.txt`).
fn shapes() -> &'static [TypeShapes] {
    static SHAPES: OnceLock<Vec<TypeShapes>> = OnceLock::new();
    SHAPES.get_or_init(|| super::shape::parse_table(include_str!("shapes.txt")))
}

/// The templates of every CloudFormation stage of `stack`, keyed by stage.
pub fn templates(
    stack: &Stack,
    graph: &ResourceGraph,
    tags: &Tags,
) -> Result<BTreeMap<StageId, Value>, Diagnostics> {
    templates_reporting(stack, graph, tags, &mut Diagnostics::new())
}

/// [`templates`], with the warnings of property overrides going to `ds`.
pub fn templates_reporting(
    stack: &Stack,
    graph: &ResourceGraph,
    tags: &Tags,
    ds: &mut Diagnostics,
) -> Result<BTreeMap<StageId, Value>, Diagnostics> {
    let mut cx = template::StackTemplates::new(stack, tags);
    cx.existing = graph.existing();
    let stage_of: BTreeMap<&str, StageId> = graph
        .resources
        .iter()
        .map(|r| (r.path.as_str(), r.stage))
        .collect();
    // Resources of Kubernetes stages (their objects) have no template.
    for r in graph.resources.iter() {
        if cx.templates.contains_key(&r.stage) {
            resources::lower(&mut cx, r, &stage_of);
        }
    }
    for stage in stack.stages() {
        if let crate::app::StageKind::Helm(release) = &stage.kind {
            for (_, r) in &release.set_from_outputs {
                cx.plain_output(r);
            }
        }
    }
    // Values Kubernetes stages carry as placeholders are outputs of their stages.
    for r in &graph.resources {
        if let crate::resources::ResourceKind::DeployValue(crate::resources::DeployValue {
            value: crate::resources::DeployedValue::Output(value),
            ..
        }) = &r.kind
        {
            cx.plain_output(value);
        }
    }
    cx.finish(shapes(), ds)
}

/// The CloudFormation backend: one template per CloudFormation stage.
#[derive(Clone, Copy, Debug)]
pub struct CloudFormation;

impl Backend for CloudFormation {
    fn synth_stack(
        &self,
        input: &BackendInput<'_>,
        ds: &mut Diagnostics,
    ) -> Result<BackendOutput, Diagnostics> {
        let stack = input.stack;
        let mut templates = templates_reporting(stack, input.graph, input.tags, ds)?;
        let mut out = BackendOutput::default();
        for (index, stage) in stack.stages().iter().enumerate() {
            let id = StageId::from_index(index);
            let base = input.stage_base(index);
            let name = stage.name.clone();
            let entry = match &stage.kind {
                StageKind::CloudFormation => {
                    let template = templates.remove(&id).unwrap_or(Value::Null);
                    let path = format!("{base}.template.json");
                    // Named IAM resources need the stronger acknowledgement.
                    let named_iam = template
                        .get("Resources")
                        .and_then(Value::as_object)
                        .is_some_and(|resources| {
                            resources.values().any(|r| {
                                r["Type"]
                                    .as_str()
                                    .is_some_and(|t| t.starts_with("AWS::IAM::"))
                                    && r["Properties"].get("RoleName").is_some()
                            })
                        });
                    let capability = if named_iam {
                        "CAPABILITY_NAMED_IAM"
                    } else {
                        "CAPABILITY_IAM"
                    };
                    // Every parameter is of type String, so a default is a string.
                    let parameters: Vec<Parameter> = template
                        .get("Parameters")
                        .and_then(Value::as_object)
                        .map(|p| {
                            p.iter()
                                .map(|(name, spec)| Parameter {
                                    name: name.clone(),
                                    default: spec
                                        .get("Default")
                                        .and_then(Value::as_str)
                                        .map(str::to_owned),
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    let outputs: Vec<String> = template
                        .get("Outputs")
                        .and_then(Value::as_object)
                        .map(|o| o.keys().cloned().collect())
                        .unwrap_or_default();
                    let mut text = crate::synth::serializing(|| {
                        serde_json::to_string_pretty(&template).unwrap_or_default()
                    });
                    text.push('\n');
                    crate::validate::limits::check_template(&template, text.len(), &path, ds);
                    let deploy_from_s3 =
                        text.len() > crate::validate::limits::INLINE_TEMPLATE_BYTES;
                    out.files.push((path.clone(), text.into_bytes()));
                    StageManifest::CloudFormation {
                        name,
                        stack_name: stack.stage_stack_name(id),
                        capabilities: vec![capability.to_owned()],
                        parameters,
                        outputs,
                        deploy_from_s3,
                        steps: Vec::new(),
                        artifacts: vec![Artifact::new(ArtifactFormat::CloudFormation, path)],
                    }
                }
                StageKind::Helm(_) | StageKind::Upload(_) | StageKind::Kubernetes => continue,
            };
            out.stages.insert(id, entry);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::shape::{find, Dialect};

    /// Every vendored schema has shapes, and every resource the reference deployments emit
    /// passes its type's shapes: the checks of overrides refuse nothing hyperforge itself writes.
    #[test]
    fn emitted_resources_match_their_shapes() {
        let schemas = std::fs::read_dir(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/codegen/schemas/cloudformation"
        ))
        .unwrap()
        .count();
        assert_eq!(shapes().len(), schemas);
        let mut checked = 0;
        for app in crate::reference::all()
            .into_iter()
            .chain(crate::reference::variants())
        {
            for stack in app.stacks() {
                let tags = stack.effective_tags(app.tags());
                let graph = crate::constructs::expand(stack, &tags);
                let templates = templates(stack, &graph, &tags).unwrap();
                for t in templates.values() {
                    for (id, r) in t["Resources"].as_object().unwrap() {
                        let ty = r["Type"].as_str().unwrap();
                        let shapes = find(shapes(), ty).unwrap_or_else(|| panic!("{ty}"));
                        let problems = shapes.check_body(
                            Dialect::CloudFormation,
                            &r["Properties"],
                            "property",
                        );
                        assert!(problems.is_empty(), "{id} ({ty}): {problems:?}");
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 100, "{checked}");
    }
}
