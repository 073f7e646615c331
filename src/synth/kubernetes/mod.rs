//! The Kubernetes backend: the [`KubeObject`](crate::resources::KubeObject)s of a Kubernetes
//! stage as multi-document YAML, in the order their constructs added them. Constructs build the
//! objects from k8s-openapi and the generated CRD types when they expand.

/// The generated custom resource types, now part of the resource layer
/// ([`crate::resources::kubernetes::crd`]).
#[doc(hidden)]
pub use crate::resources::kubernetes::crd;

mod patch;

use super::{yaml_error, Backend, BackendInput, BackendOutput};
use crate::app::ObjectPatch;
use crate::app::Stack;
use crate::app::{StageId, StageKind};
use crate::assembly::manifest::{
    Artifact, ArtifactFormat, PlaceholderValue, SecretSource, SecretStep, StageManifest,
    StageOutput, Step, ValueSource,
};
use crate::diagnostics::{suggest, Code, Diagnostics};
use crate::resources::{DeployedValue, Resource, ResourceGraph, ResourceKind};
use serde_json::Value;
use std::collections::BTreeMap;

/// The multi-document YAML of Kubernetes stage `stage`: its objects in the order their
/// constructs were added (each construct's in the order it adds them), each written by
/// hyperforge's YAML emitter (the text `serde_norway` writes; writing it does not fail).
pub fn stage_yaml(graph: &ResourceGraph, stage: StageId) -> Result<String, serde_yaml::Error> {
    stage_yaml_patched(graph, stage, &BTreeMap::new())
}

/// [`stage_yaml`] with the objects of `patched` (by construct path) in place of the graph's.
fn stage_yaml_patched(
    graph: &ResourceGraph,
    stage: StageId,
    patched: &BTreeMap<String, Value>,
) -> Result<String, serde_yaml::Error> {
    let mut out = String::new();
    for r in graph.resources.iter().filter(|r| r.stage == stage) {
        if let Some(object) = patched.get(&r.path).or_else(|| object(r)) {
            out.push_str("---\n");
            let object = acknowledged(object, r);
            crate::synth::serializing(|| crate::yaml::push(&mut out, &object));
        }
    }
    Ok(out)
}

/// The identity of an object: what others refer to it by.
fn identity(object: &Value) -> [(&'static str, Option<&Value>); 4] {
    [
        ("apiVersion", object.get("apiVersion")),
        ("kind", object.get("kind")),
        ("metadata.name", object.pointer("/metadata/name")),
        ("metadata.namespace", object.pointer("/metadata/namespace")),
    ]
}

/// The objects `stack`'s patches change (`Stack::patch_object`), patched in the order given, by
/// construct path; every problem goes to `ds` (all of them, not only the first).
pub(crate) fn patched_objects(
    stack: &Stack,
    graph: &ResourceGraph,
    ds: &mut Diagnostics,
) -> BTreeMap<String, Value> {
    let mut patched: BTreeMap<String, Value> = BTreeMap::new();
    let is_kube_stage = |r: &Resource| {
        matches!(
            stack.stage(r.stage).map(|s| &s.kind),
            Some(StageKind::Kubernetes)
        )
    };
    for (n, p) in stack.patches().iter().enumerate() {
        let at = stack.display_path(&p.path);
        let found = graph
            .resources
            .iter()
            .filter(|r| is_kube_stage(r))
            .find(|r| r.path == p.path)
            .and_then(|r| object(r).map(|o| (r, o)));
        let Some((_, original)) = found else {
            let paths: Vec<&str> = graph
                .resources
                .iter()
                .filter(|r| is_kube_stage(r) && object(r).is_some())
                .map(|r| r.path.as_str())
                .collect();
            let help = match suggest(&p.path, paths.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None if paths.is_empty() => "the stack has no Kubernetes object".to_owned(),
                None => format!(
                    "the objects are: {}",
                    paths
                        .iter()
                        .map(|p| format!("`{p}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            ds.report(
                Code::UnknownPatchTarget,
                at,
                format!("no Kubernetes object has the construct path `{}`", p.path),
                help,
            );
            continue;
        };
        let mut object = patched
            .get(&p.path)
            .cloned()
            .unwrap_or_else(|| original.clone());
        let before = object.clone();
        match &p.patch {
            ObjectPatch::Merge(m) => {
                if !m.is_object() {
                    ds.report(
                        Code::PatchFailed,
                        at,
                        format!(
                            "patch {} of `{}`: a merge patch of an object must be a JSON object",
                            n + 1,
                            p.path
                        ),
                        "write the members to change as an object; `null` removes one",
                    );
                    continue;
                }
                patch::merge_patch(&mut object, m);
            }
            ObjectPatch::Json(ops) => {
                if let Err((i, e)) = patch::json_patch(&mut object, ops) {
                    let op = ops.get(i).map(Value::to_string).unwrap_or_default();
                    ds.report(
                        Code::PatchFailed,
                        at,
                        format!("patch {} of `{}`: operation {i} {op} does not apply: {e}", n + 1, p.path),
                        "paths are JSON Pointers into the object as written (`/spec/replicas`); `-` appends to a list",
                    );
                    continue;
                }
            }
        }
        let changed: Vec<&str> = identity(&before)
            .iter()
            .zip(identity(&object))
            .filter(|(a, b)| a.1 != b.1)
            .map(|(a, _)| a.0)
            .collect();
        if !changed.is_empty() {
            ds.report(
                Code::PatchChangesIdentity,
                at,
                format!(
                    "patch {} of `{}` changes {}, which name the object",
                    n + 1,
                    p.path,
                    changed
                        .iter()
                        .map(|c| format!("`{c}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "change the construct instead (its name and namespace settings)",
            );
            continue;
        }
        patched.insert(p.path.clone(), object);
    }
    patched
}

/// The deploy-time values Kubernetes stage `stage` carries as placeholders: each with the
/// The values Kubernetes stage `stage`'s objects carry as placeholders, in the order the
/// objects' constructs declared them, each once.
pub fn deploy_values(
    stack: &Stack,
    graph: &ResourceGraph,
    stage: StageId,
) -> Vec<PlaceholderValue> {
    let mut out: Vec<PlaceholderValue> = Vec::new();
    for r in graph.resources.iter().filter(|r| r.stage == stage) {
        if let ResourceKind::DeployValue(d) = &r.kind {
            if out.iter().any(|v| v.placeholder == d.placeholder) {
                continue;
            }
            let from = match &d.value {
                DeployedValue::Output(value) => ValueSource::Output(StageOutput {
                    stage: stack
                        .stage_of(value.construct_id())
                        .and_then(|s| stack.stage(s))
                        .map(|s| s.name.clone()),
                    output: value.output_key(),
                }),
                DeployedValue::Input(input) => ValueSource::Input(input.name.clone()),
            };
            out.push(PlaceholderValue {
                placeholder: d.placeholder.clone(),
                from,
            });
        }
    }
    out
}

/// What a Job's wait allows beyond its own deadline: scheduling and the image pull, seconds.
pub const JOB_WAIT_MARGIN_SECS: u64 = 600;

/// The Jobs of Kubernetes stage `stage`, each to be waited for after the stage is applied.
pub fn jobs(graph: &ResourceGraph, stage: StageId) -> Vec<Step> {
    jobs_patched(graph, stage, &BTreeMap::new())
}

/// [`jobs`], reading each Job's deadline from its patched object when `patched` has one.
fn jobs_patched(
    graph: &ResourceGraph,
    stage: StageId,
    patched: &BTreeMap<String, Value>,
) -> Vec<Step> {
    graph
        .resources
        .iter()
        .filter(|r| r.stage == stage)
        .filter_map(|r| match &r.kind {
            ResourceKind::KubeObject(o) if o.kind() == "Job" && o.api_version() == "batch/v1" => {
                let deadline = patched
                    .get(&r.path)
                    .unwrap_or(o.object())
                    .pointer("/spec/activeDeadlineSeconds")
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(24 * 3600);
                Some(Step::WaitJob {
                    name: o.name().to_owned(),
                    namespace: o.namespace().unwrap_or("default").to_owned(),
                    timeout_seconds: deadline.saturating_add(JOB_WAIT_MARGIN_SECS),
                })
            }
            _ => None,
        })
        .collect()
}

/// The Secrets the objects of Kubernetes stage `stage` read (`secretKeyRef` in a container's
/// environment, the inference operator's `tokenSecretRef`), merged by name and namespace, in
/// the order the objects name them: no artifact creates them, so they must exist before the
/// stage is applied. A Secret is required when any reference to it is not `optional`. Each
/// is a [`Step::Secret`] the operator creates until the plan pass gives it its source.
pub fn secrets(graph: &ResourceGraph, stage: StageId) -> Vec<Step> {
    let mut out: Vec<SecretStep> = Vec::new();
    for r in graph.resources.iter().filter(|r| r.stage == stage) {
        let ResourceKind::KubeObject(o) = &r.kind else {
            continue;
        };
        let namespace = o.namespace().unwrap_or("default");
        let reader = format!("{}/{}", o.kind(), o.name());
        let mut refs = Vec::new();
        secret_refs(o.object(), &mut refs);
        for (name, key, optional) in refs {
            let found = out
                .iter()
                .position(|s| s.name == name && s.namespace == namespace);
            let secret = match found {
                Some(i) => &mut out[i],
                None => {
                    out.push(SecretStep {
                        name,
                        namespace: namespace.to_owned(),
                        keys: Vec::new(),
                        required: false,
                        used_by: Vec::new(),
                        source: SecretSource::Operator,
                    });
                    let last = out.len() - 1;
                    &mut out[last]
                }
            };
            if !secret.keys.contains(&key) {
                secret.keys.push(key);
            }
            secret.required |= !optional;
            if !secret.used_by.contains(&reader) {
                secret.used_by.push(reader.clone());
            }
        }
    }
    out.into_iter().map(Step::Secret).collect()
}

/// Every `secretKeyRef` and `tokenSecretRef` below `value`: (name, key, optional).
fn secret_refs(value: &serde_json::Value, out: &mut Vec<(String, String, bool)>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                if k == "secretKeyRef" || k == "tokenSecretRef" {
                    if let (Some(name), Some(key)) = (
                        v.get("name").and_then(serde_json::Value::as_str),
                        v.get("key").and_then(serde_json::Value::as_str),
                    ) {
                        let optional = v
                            .get("optional")
                            .and_then(serde_json::Value::as_bool)
                            .unwrap_or(false);
                        out.push((name.to_owned(), key.to_owned(), optional));
                        continue;
                    }
                }
                secret_refs(v, out);
            }
        }
        serde_json::Value::Array(items) => {
            for v in items {
                secret_refs(v, out);
            }
        }
        _ => {}
    }
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
        let mut problems = Diagnostics::new();
        let patched = patched_objects(input.stack, input.graph, &mut problems);
        if problems.has_errors() {
            return Err(problems);
        }
        for (index, stage) in input.stack.stages().iter().enumerate() {
            let StageKind::Kubernetes = stage.kind else {
                continue;
            };
            let id = StageId::from_index(index);
            let path = format!("{}.yaml", input.stage_base(index));
            let text =
                stage_yaml_patched(input.graph, id, &patched).map_err(yaml_error(input.stack))?;
            out.files.push((path.clone(), text.into_bytes()));
            out.stages.insert(
                id,
                StageManifest::Kubernetes {
                    name: stage.name.clone(),
                    values: deploy_values(input.stack, input.graph, id),
                    // The steps the objects imply; the plan pass adds the constructs' own.
                    steps: secrets(input.graph, id)
                        .into_iter()
                        .chain(jobs_patched(input.graph, id, &patched))
                        .collect(),
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
        let mut graph = crate::constructs::expand(&stack, &Tags::new());
        let bucket: Ref<kind::Bucket> = Ref::new("s", "Lifecycle/Bucket");
        graph.resources.push(Resource {
            path: "Lifecycle/BucketValue".to_owned(),
            stage: workload,
            kind: DeployValue {
                placeholder: crate::resources::deploy_placeholder(&bucket.name()),
                value: crate::resources::DeployedValue::Output(bucket.name()),
            }
            .into(),
            depends_on: Vec::new(),
            acknowledged: Vec::new(),
        });
        assert_eq!(
            deploy_values(&stack, &graph, workload),
            [PlaceholderValue {
                placeholder: "hyperforge-output-LifecycleBucketName".to_owned(),
                from: ValueSource::Output(StageOutput {
                    stage: Some("foundation".to_owned()),
                    output: "LifecycleBucketName".to_owned(),
                }),
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
