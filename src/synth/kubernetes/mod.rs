//! The Kubernetes backend: the [`KubeObject`](crate::resources::KubeObject)s of a Kubernetes
//! stage as multi-document YAML, in the order their constructs added them. Constructs build the
//! objects from k8s-openapi and the generated CRD types when they expand.

/// The generated custom resource types, now part of the resource layer
/// ([`crate::resources::kubernetes::crd`]).
#[doc(hidden)]
pub use crate::resources::kubernetes::crd;

use super::{yaml_error, Backend, BackendInput, BackendOutput};
use crate::app::Stack;
use crate::app::{StageId, StageKind};
use crate::assembly::manifest::{Artifact, ArtifactFormat, JobWait, SetFromOutput, StageManifest};
use crate::diagnostics::Diagnostics;
use crate::resources::{Resource, ResourceGraph, ResourceKind};

/// The multi-document YAML of Kubernetes stage `stage`: its objects in the order their
/// constructs were added (each construct's in the order it adds them).
pub fn stage_yaml(graph: &ResourceGraph, stage: StageId) -> Result<String, serde_yaml::Error> {
    let mut out = String::new();
    for r in graph.resources.iter().filter(|r| r.stage == stage) {
        if let Some(object) = object(r) {
            out.push_str("---\n");
            out.push_str(&serde_yaml::to_string(&acknowledged(object, r))?);
        }
    }
    Ok(out)
}

/// The deploy-time values Kubernetes stage `stage` carries as placeholders: each with the
/// CloudFormation stage and output that hold it, in the order the objects named them.
pub fn deploy_values(stack: &Stack, graph: &ResourceGraph, stage: StageId) -> Vec<SetFromOutput> {
    let mut out: Vec<SetFromOutput> = Vec::new();
    for r in graph.resources.iter().filter(|r| r.stage == stage) {
        if let ResourceKind::DeployValue(d) = &r.kind {
            let key = d.placeholder.clone();
            if out.iter().any(|v| v.key == key) {
                continue;
            }
            out.push(SetFromOutput {
                key,
                stage: stack
                    .stage_of(d.value.construct_id())
                    .and_then(|s| stack.stage(s))
                    .map(|s| s.name.clone()),
                output: d.value.output_key(),
            });
        }
    }
    out
}

/// What a Job's wait allows beyond its own deadline: scheduling and the image pull, seconds.
pub const JOB_WAIT_MARGIN_SECS: u64 = 600;

/// The Jobs of Kubernetes stage `stage`, each to be waited for after the stage is applied.
pub fn jobs(graph: &ResourceGraph, stage: StageId) -> Vec<JobWait> {
    graph
        .resources
        .iter()
        .filter(|r| r.stage == stage)
        .filter_map(|r| match &r.kind {
            ResourceKind::KubeObject(o) if o.kind() == "Job" && o.api_version() == "batch/v1" => {
                let deadline = o
                    .object()
                    .pointer("/spec/activeDeadlineSeconds")
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(24 * 3600);
                Some(JobWait {
                    name: o.name().to_owned(),
                    namespace: o.namespace().unwrap_or("default").to_owned(),
                    timeout_seconds: deadline.saturating_add(JOB_WAIT_MARGIN_SECS),
                })
            }
            _ => None,
        })
        .collect()
}

/// The Kubernetes object a resource is, if any (AWS resources are deployed by the
/// CloudFormation stages and the Terraform module).
fn object(r: &Resource) -> Option<&serde_json::Value> {
    match &r.kind {
        ResourceKind::KubeObject(o) => Some(o.object()),
        _ => None,
    }
}

/// `object` with the resource's checkov acknowledgements as the annotations checkov reads
/// (`checkov.io/skipN: ID=reason`, numbered from 1), first in its metadata.
fn acknowledged(object: &serde_json::Value, r: &Resource) -> serde_json::Value {
    let skips: Vec<(String, serde_json::Value)> = r
        .acknowledgements()
        .iter()
        .flat_map(|a| a.rule.checkov.iter().map(move |id| (*id, a.reason.clone())))
        .enumerate()
        .map(|(i, (id, reason))| {
            (
                format!("checkov.io/skip{}", i + 1),
                serde_json::Value::String(format!("{id}={reason}")),
            )
        })
        .collect();
    let mut object = object.clone();
    if skips.is_empty() {
        return object;
    }
    if let Some(serde_json::Value::Object(meta)) = object.get_mut("metadata") {
        let mut annotations = match meta.remove("annotations") {
            Some(serde_json::Value::Object(a)) => a,
            _ => serde_json::Map::new(),
        };
        annotations.extend(skips);
        let mut rebuilt = serde_json::Map::new();
        rebuilt.insert("annotations".into(), serde_json::Value::Object(annotations));
        rebuilt.extend(std::mem::take(meta));
        *meta = rebuilt;
    }
    object
}

/// The Kubernetes backend: one multi-document YAML file per Kubernetes stage.
#[derive(Clone, Copy, Debug)]
pub struct Kubernetes;

impl Backend for Kubernetes {
    fn synth_stack(
        &self,
        input: &BackendInput<'_>,
        _ds: &mut Diagnostics,
    ) -> Result<BackendOutput, Diagnostics> {
        let mut out = BackendOutput::default();
        for (index, stage) in input.stack.stages().iter().enumerate() {
            let StageKind::Kubernetes = stage.kind else {
                continue;
            };
            let id = StageId::from_index(index);
            let path = format!("{}.yaml", input.stage_base(index));
            let text = stage_yaml(input.graph, id).map_err(yaml_error(input.stack))?;
            out.files.push((path.clone(), text.into_bytes()));
            out.stages.insert(
                id,
                StageManifest::Kubernetes {
                    name: stage.name.clone(),
                    jobs: jobs(input.graph, id),
                    values_from_outputs: deploy_values(input.stack, input.graph, id),
                    artifacts: vec![Artifact::new(ArtifactFormat::Kubernetes, path)],
                },
            );
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::{kind, Ref, Tags};
    use crate::constructs::LifecycleScripts;
    use crate::resources::{DeployValue, Resource};

    /// A value of a CloudFormation stage carried by a Kubernetes stage: the producing template
    /// outputs it, the Terraform phase that creates it outputs it in snake case, and the
    /// stage's manifest entry names the placeholder with its stage and output.
    #[test]
    fn deploy_values_are_outputs_of_their_stages() {
        let mut stack = Stack::new("s", "us-west-2");
        let foundation = stack.cloudformation_stage("foundation");
        stack.add(foundation, LifecycleScripts::new("Lifecycle"));
        let workload = stack.kubernetes_stage("workload");
        let mut graph = crate::constructs::expand(&stack);
        let bucket: Ref<kind::Bucket> = Ref::new("s", "Lifecycle/Bucket");
        graph.resources.push(Resource {
            path: "Lifecycle/BucketValue".to_owned(),
            stage: workload,
            kind: DeployValue {
                placeholder: crate::resources::deploy_placeholder(&bucket.name()),
                value: bucket.name(),
            }
            .into(),
            depends_on: Vec::new(),
            acknowledged: Vec::new(),
        });
        assert_eq!(
            deploy_values(&stack, &graph, workload),
            [SetFromOutput {
                key: "hyperforge-output-LifecycleBucketName".to_owned(),
                stage: Some("foundation".to_owned()),
                output: "LifecycleBucketName".to_owned(),
            }]
        );
        let templates =
            crate::synth::cloudformation::templates(&stack, &graph, &Tags::new()).unwrap();
        assert!(templates[&foundation]["Outputs"]["LifecycleBucketName"].is_object());
        let modules =
            crate::synth::terraform::root_modules(&stack, &graph, &Tags::new(), |_| String::new())
                .unwrap();
        let (_, files) = &modules[0];
        let main = &files.iter().find(|(n, _)| *n == "main.tf.json").unwrap().1;
        assert!(
            main["output"]["lifecycle_bucket_name"].is_object(),
            "{}",
            main["output"]
        );
    }
}
