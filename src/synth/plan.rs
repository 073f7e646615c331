//! The plan backend: lowers a stack's operational steps into its stages' manifest entries.
//! Constructs contribute steps as resources ([`crate::resources::plan::Step`]); the Kubernetes
//! backend adds the ones its objects imply (the Secrets they read, the Jobs they run). This
//! pass merges them into each stage's `steps`, in the order a deployment carries them out:
//! checks of what the stage pins, the Secrets (with the sources constructs declared), then
//! the stage's own after-apply steps (Jobs first), then what runs before its deletion.

use crate::app::{AttrRef, Stack, StageId};
use crate::assembly::manifest::{InputManifest, SecretSource, StageManifest, StageOutput, Step};
use crate::assembly::plan::variable_of;
use crate::resources::plan::Step as ConstructStep;
use crate::resources::{ResourceGraph, ResourceKind};
use std::collections::BTreeMap;

/// Sets the steps of every stage entry of `stack` (`entries` by stage), from `graph` and the
/// steps the backends put there. `cluster` is the stack's EKS cluster, the one its node
/// groups join.
pub fn lower_steps(
    stack: &Stack,
    graph: &ResourceGraph,
    cluster: Option<&str>,
    entries: &mut BTreeMap<StageId, StageManifest>,
) {
    let stage_of: BTreeMap<&str, StageId> = graph
        .resources
        .iter()
        .map(|r| (r.path.as_str(), r.stage))
        .collect();
    let output = |attr: &AttrRef| StageOutput {
        stage: stage_of
            .get(attr.path.as_str())
            .and_then(|id| stack.stage(*id))
            .map(|s| s.name.clone()),
        output: attr.output_key(),
    };
    // A check runs once, before the first stage that needs it.
    let mut checked: Vec<Step> = Vec::new();
    for (id, entry) in entries.iter_mut() {
        let declared: Vec<&ConstructStep> = graph
            .resources
            .iter()
            .filter(|r| r.stage == *id)
            .filter_map(|r| match &r.kind {
                ResourceKind::Step(s) => Some(s),
                _ => None,
            })
            .collect();
        let implied = std::mem::take(entry.steps_mut());
        let mut steps = Vec::new();
        for s in &declared {
            let check = match s {
                ConstructStep::VerifyModelRevision { model_id, revision } => {
                    Step::VerifyModelRevision {
                        model_id: model_id.clone(),
                        revision: revision.clone(),
                    }
                }
                ConstructStep::VerifyImage { image } => Step::VerifyImage {
                    image: image.clone(),
                },
                ConstructStep::ScaleCapacityBlockNodeGroup { .. }
                | ConstructStep::EmptyVersionedBucket { .. }
                | ConstructStep::SubscribeTopic { .. }
                | ConstructStep::SecretSource { .. } => continue,
            };
            if !checked.contains(&check) {
                checked.push(check.clone());
                steps.push(check);
            }
        }
        let (secrets, waits): (Vec<Step>, Vec<Step>) = implied
            .into_iter()
            .partition(|s| matches!(s, Step::Secret(_)));
        for mut secret in secrets {
            if let Step::Secret(secret) = &mut secret {
                // The source its construct declared; none: the operator creates it.
                secret.source = declared
                    .iter()
                    .find_map(|s| {
                        let ConstructStep::SecretSource {
                            name,
                            namespace,
                            source,
                        } = s
                        else {
                            return None;
                        };
                        (*name == secret.name && *namespace == secret.namespace)
                            .then(|| source.clone())
                    })
                    .unwrap_or(SecretSource::Operator);
            }
            steps.push(secret);
        }
        steps.extend(waits);
        for s in &declared {
            match s {
                ConstructStep::ScaleCapacityBlockNodeGroup {
                    node_group,
                    sizes,
                    scale_up_at,
                } => steps.push(Step::ScaleCapacityBlockNodeGroup {
                    cluster: cluster.unwrap_or_default().to_owned(),
                    node_group: node_group.clone(),
                    min: sizes.0,
                    desired: sizes.1,
                    max: sizes.2,
                    scheduled_at: scale_up_at.map(crate::catalog::time::format_utc),
                }),
                ConstructStep::SubscribeTopic { topic } => steps.push(Step::SubscribeTopic {
                    topic: output(topic),
                }),
                ConstructStep::EmptyVersionedBucket { bucket, holds } => {
                    steps.push(Step::EmptyVersionedBucket {
                        bucket: output(bucket),
                        holds: holds.clone(),
                    })
                }
                ConstructStep::VerifyModelRevision { .. }
                | ConstructStep::VerifyImage { .. }
                | ConstructStep::SecretSource { .. } => {}
            }
        }
        *entry.steps_mut() = steps;
    }
}

/// The deploy-time inputs `stack`'s resources use, each declared once, in the order the
/// resources first use them, with the stages that use them. Two resources naming one input
/// with different declarations are a bug of the constructs that made them; the first wins.
pub fn lower_inputs(stack: &Stack, graph: &ResourceGraph) -> Vec<InputManifest> {
    let mut out: Vec<InputManifest> = Vec::new();
    for r in &graph.resources {
        for input in r.kind.inputs() {
            let stage = stack.stage(r.stage).map(|s| s.name.clone());
            let entry = match out.iter().position(|i| i.name == input.name) {
                Some(at) => &mut out[at],
                None => {
                    debug_assert!(!input.name.is_empty());
                    out.push(InputManifest {
                        variable: variable_of(&input.name),
                        name: input.name,
                        description: input.description,
                        default: input.default,
                        pattern: input.pattern,
                        expected: input.expected,
                        stages: Vec::new(),
                    });
                    let last = out.len() - 1;
                    &mut out[last]
                }
            };
            if let Some(stage) = stage {
                if !entry.stages.contains(&stage) {
                    entry.stages.push(stage);
                }
            }
        }
    }
    // Stages in deployment order.
    let order: Vec<&str> = stack.stages().iter().map(|s| s.name.as_str()).collect();
    for input in &mut out {
        input
            .stages
            .sort_by_key(|s| order.iter().position(|o| o == s).unwrap_or(usize::MAX));
    }
    out
}
