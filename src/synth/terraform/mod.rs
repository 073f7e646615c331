//! The Terraform backend: Terraform JSON root modules for every CloudFormation, upload and
//! Helm stage of a stack, one per phase (`<stack>/terraform/<NN>-<first stage>/`:
//! `versions.tf.json` and `main.tf.json`), with stage order inside a phase kept by references
//! and `depends_on`. A phase never mixes AWS-API and Kubernetes-API stages, so every
//! `terraform apply` runs from outside the VPC: the Kubernetes-API phases through the admin
//! host's tunnel, which an earlier phase creates.
//!
//! Resources are named after construct paths (`Network/Vpc` -> `aws_vpc.network_vpc`), so the
//! two formats correspond one to one where they agree. References are `${type.name.attr}`
//! interpolations of typed [`AttrRef`]s; IAM documents are locals encoded
//! with `jsonencode`; pseudo values come from the `aws_partition`, `aws_region` and
//! `aws_caller_identity` data sources. The HyperPod cluster is `awscc_sagemaker_cluster`
//! (hashicorp/aws has none); the HyperPod dependencies chart is a `helm_release` of a local
//! checkout. Kubernetes stages stay `kubectl apply` steps after `terraform apply`.
//! CloudFormation property overrides (`Stack::override_property`) do not apply here; their
//! twins, `Stack::override_terraform`, are applied to the blocks of the resources lowered at
//! their construct paths and checked against the provider schemas compiled in from
//! `schemas/` (copies of the committed test data). A CloudFormation override without a twin
//! warns when the Terraform format is written.

mod lower;
mod module;
mod resources;

pub use module::{
    escape_template, snake, AWSCC_PROVIDER, AWS_PROVIDER, HELM_PROVIDER, REQUIRED_VERSION,
};

use super::shape::{apply_path, find, parse_provider_schema, touches, Dialect, TypeShapes};
use super::{Backend, BackendInput, BackendOutput};
use crate::app::{AttrRef, Stack, StageId, StageKind, Tags};
use crate::assembly::manifest::{Artifact, ArtifactFormat};
use crate::diagnostics::{suggest, Code, Diagnostics};
use crate::resources::{ResourceGraph, ResourceKind};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The resource types of the committed provider schemas (`schemas/`), parsed once.
pub(super) fn provider_shapes() -> &'static [TypeShapes] {
    static SHAPES: OnceLock<Vec<TypeShapes>> = OnceLock::new();
    SHAPES.get_or_init(|| {
        let mut all = Vec::new();
        for text in [
            include_str!("schemas/aws-6.66.0.schema.json"),
            include_str!("schemas/awscc-1.106.0.schema.json"),
            include_str!("schemas/helm-3.1.1.schema.json"),
        ] {
            all.extend(parse_provider_schema(text));
        }
        all.sort_by(|a, b| a.type_name.cmp(b.type_name));
        all
    })
}

/// Applies `stack`'s Terraform overrides to the modules' resource blocks. Errors and warnings
/// go to `ds`.
fn apply_overrides(
    stack: &Stack,
    graph: &ResourceGraph,
    modules: &mut [(String, module::RootModule<'_>)],
    ds: &mut Diagnostics,
) {
    for o in stack.terraform_overrides() {
        let at = stack.display_path(&o.path);
        let mut at_path: Vec<(usize, String)> = Vec::new();
        for (i, (_, cx)) in modules.iter().enumerate() {
            for (address, path) in cx.addresses() {
                if *path == o.path {
                    at_path.push((i, address.clone()));
                }
            }
        }
        if at_path.is_empty() {
            let mut paths: Vec<&str> = modules
                .iter()
                .flat_map(|(_, cx)| cx.paths().map(String::as_str))
                .collect();
            paths.sort_unstable();
            paths.dedup();
            let help = match suggest(&o.path, paths.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None => {
                    "use the construct path of a resource the Terraform module declares".to_owned()
                }
            };
            ds.report(
                Code::UnknownTerraformOverrideTarget,
                at,
                format!(
                    "no Terraform resource is lowered from the path `{}`",
                    o.path
                ),
                help,
            );
            continue;
        }
        let candidates: Vec<&(usize, String)> = at_path
            .iter()
            .filter(|(_, a)| {
                o.resource_type
                    .as_deref()
                    .is_none_or(|t| a.split_once('.').is_some_and(|(ty, _)| ty == t))
            })
            .collect();
        let listed = at_path
            .iter()
            .map(|(_, a)| format!("`{a}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let (module, address) = match candidates.as_slice() {
            [one] => (one.0, one.1.clone()),
            [] => {
                ds.report(
                    Code::UnknownTerraformOverrideTarget,
                    at,
                    format!(
                        "`{}` lowers to no Terraform resource of type `{}`; it lowers to {listed}",
                        o.path,
                        o.resource_type.as_deref().unwrap_or_default()
                    ),
                    "name one of those types",
                );
                continue;
            }
            _ => {
                ds.report(
                    Code::UnknownTerraformOverrideTarget,
                    at,
                    format!(
                        "`{}` lowers to several Terraform resources: {listed}",
                        o.path
                    ),
                    "name the type with `Stack::override_terraform_type`",
                );
                continue;
            }
        };
        let ty = address.split_once('.').map_or("", |(t, _)| t);
        if let Some(shapes) = find(provider_shapes(), ty) {
            let problems = shapes.check(
                Dialect::Terraform,
                &o.attribute,
                o.value.as_ref(),
                "attribute",
            );
            if !problems.is_empty() {
                for p in problems {
                    ds.report(
                        p.code,
                        at.clone(),
                        format!(
                            "cannot override `{}` of `{address}`: {}",
                            o.attribute, p.message
                        ),
                        p.help,
                    );
                }
                continue;
            }
        }
        let checked = graph
            .resources
            .iter()
            .find(|r| r.path == o.path)
            .map_or(&[][..], |r| r.kind.checked())
            .iter()
            .map(|c| resources::checked_attribute(*c))
            .collect::<Vec<_>>();
        if let Some(v) = checked.iter().find(|v| touches(&o.attribute, v)) {
            ds.report(
                Code::OverrideOfValidatedProperty,
                at.clone(),
                format!(
                    "the override of `{}` changes `{v}` of `{address}`, which hyperforge's rules checked; the value it writes is not checked",
                    o.attribute
                ),
                "set it through the construct's builder, so the rules see it; keep the override only to bypass them",
            );
        }
        let Some(body) = modules[module].1.body_mut(&address) else {
            continue;
        };
        if let Err(msg) = apply_path(body, &o.attribute, o.value.clone()) {
            ds.report(
                Code::UnknownTerraformOverrideTarget,
                at,
                format!("cannot override `{}` of `{address}`: {msg}", o.attribute),
                "numeric segments index existing list items and blocks, `-` appends to a list; other segments name keys",
            );
        }
    }
}

/// Warns for each construct path with a CloudFormation override and no Terraform one.
fn warn_cloudformation_only(stack: &Stack, ds: &mut Diagnostics) {
    let mut seen: Vec<&str> = Vec::new();
    for o in stack.overrides() {
        if seen.contains(&o.path.as_str())
            || stack.terraform_overrides().iter().any(|t| t.path == o.path)
        {
            continue;
        }
        seen.push(&o.path);
        ds.report(
            Code::OverrideCloudFormationOnly,
            stack.display_path(&o.path),
            format!(
                "the override of `{}` applies to CloudFormation only; the Terraform module differs",
                o.property
            ),
            "make the same change with `Stack::override_terraform` (in Terraform's attribute names), or write only the CloudFormation format",
        );
    }
}

/// A root module's directory and its files (name and content).
pub type ModuleFiles = (String, Vec<(&'static str, Value)>);

/// One root module of a stack: a run of consecutive stages that one `terraform apply` can
/// deploy from outside the VPC.
struct Phase {
    /// Its directory under `<stack>/terraform/` (`01-foundation`: the first stage's file
    /// prefix).
    dir: String,
    /// Its stages.
    stages: Vec<StageId>,
}

/// Splits the stages into phases. A phase holds either stages that talk only to AWS APIs
/// (CloudFormation and upload stages) or stages that talk to the Kubernetes API (Helm), never
/// both: Kubernetes-API stages need the tunnel through the admin host, which an earlier phase
/// creates. A Kubernetes (kubectl) stage, which Terraform does not deploy, also ends a phase,
/// since what follows may need its objects.
fn phases(stack: &Stack) -> Vec<Phase> {
    let mut phases: Vec<Phase> = Vec::new();
    let mut open: Option<bool> = None;
    for (index, stage) in stack.stages().iter().enumerate() {
        let kube = match stage.kind {
            StageKind::CloudFormation | StageKind::Upload(_) => false,
            StageKind::Helm(_) => true,
            StageKind::Kubernetes => {
                open = None;
                continue;
            }
        };
        let id = StageId::from_index(index);
        match (open, phases.last_mut()) {
            (Some(k), Some(phase)) if k == kube => phase.stages.push(id),
            _ => phases.push(Phase {
                dir: format!("{:02}-{}", index + 1, stage.name),
                stages: vec![id],
            }),
        }
        open = Some(kube);
    }
    phases
}

/// The root modules of `stack`, one per phase: each module's directory and files (name and
/// content); none when the stack has no infrastructure stage.
/// `stage_file(index)` is the artifact path of stage `index` relative to the stack's folder
/// (`02-lifecycle-scripts`, `03-hyperpod-dependencies.values.yaml`), which the modules read
/// through `${path.module}/../../`.
///
/// A reference to a resource of an earlier phase reads that phase's output through a
/// `terraform_remote_state` data source (local backend, the state file next to its module);
/// the earlier phase declares the output. Helm phases configure the Helm provider from the
/// kubeconfig (by default `~/.kube/config`), which the runbook points at the admin tunnel.
pub fn root_modules(
    stack: &Stack,
    graph: &ResourceGraph,
    tags: &Tags,
    stage_file: impl Fn(usize) -> String,
) -> Result<Vec<ModuleFiles>, Diagnostics> {
    root_modules_reporting(stack, graph, tags, stage_file, &mut Diagnostics::new())
}

/// [`root_modules`], with the warnings of attribute overrides going to `warnings`.
pub fn root_modules_reporting(
    stack: &Stack,
    graph: &ResourceGraph,
    tags: &Tags,
    stage_file: impl Fn(usize) -> String,
    warnings: &mut Diagnostics,
) -> Result<Vec<ModuleFiles>, Diagnostics> {
    if !stack
        .stages()
        .iter()
        .any(|s| matches!(s.kind, StageKind::CloudFormation))
    {
        return Ok(Vec::new());
    }
    let mut modules: Vec<(String, module::RootModule<'_>)> = Vec::new();
    let mut earlier: BTreeMap<String, String> = BTreeMap::new();
    for phase in phases(stack) {
        let mut cx = module::RootModule::new(stack, tags)
            .with_earlier(earlier.clone())
            .with_existing(graph.existing());
        for &id in &phase.stages {
            let index = id.index();
            let Some(stage) = stack.stages().get(index) else {
                continue;
            };
            match &stage.kind {
                StageKind::CloudFormation => {
                    for r in graph.resources.iter().filter(|r| r.stage == id) {
                        resources::lower(&mut cx, r);
                    }
                }
                StageKind::Upload(upload) => lower::upload(&mut cx, id, &stage_file(index), upload),
                StageKind::Helm(release) => {
                    lower::helm(&mut cx, id, &stage.name, &stage_file(index), release)
                }
                StageKind::Kubernetes => {}
            }
        }
        for path in cx.paths() {
            earlier.insert(path.clone(), phase.dir.clone());
        }
        // Every resource of the phase's stages, lowered or not (a part a format states
        // separately is named after its owner), belongs to it.
        for r in graph
            .resources
            .iter()
            .filter(|r| phase.stages.contains(&r.stage))
        {
            earlier.insert(r.path.clone(), phase.dir.clone());
        }
        modules.push((phase.dir, cx));
    }
    // Each phase outputs what later phases read of it.
    let mut reads: Vec<(String, AttrRef)> = Vec::new();
    for (_, cx) in &modules {
        for (phase, attrs) in cx.remote_reads() {
            reads.extend(attrs.into_iter().map(|a| (phase.clone(), a)));
        }
    }
    // Values Kubernetes stages carry as placeholders: their producing phases output them.
    for r in &graph.resources {
        if let ResourceKind::DeployValue(crate::resources::DeployValue {
            value: crate::resources::DeployedValue::Output(value),
            ..
        }) = &r.kind
        {
            if let Some(phase) = earlier.get(&value.path) {
                if !reads.iter().any(|(p, a)| p == phase && a == value) {
                    reads.push((phase.clone(), value.clone()));
                }
            }
        }
    }
    for (phase, attr) in reads {
        if let Some((_, cx)) = modules.iter_mut().find(|(dir, _)| *dir == phase) {
            let value = cx.attr(&attr);
            cx.output(
                &module::RootModule::output_name(&attr),
                &format!("{} of {}, for a later phase", attr.attr.as_str(), attr.path),
                value,
            );
        }
    }
    let mut ds = Diagnostics::new();
    apply_overrides(stack, graph, &mut modules, &mut ds);
    let mut out = Vec::new();
    for (dir, cx) in modules {
        let helm = json!({"kubernetes": {
            "config_path": "${pathexpand(var.kubeconfig)}",
        }});
        let mut cx = cx;
        if cx.has_helm_release() {
            cx.variable(
                "kubeconfig",
                module::Variable {
                    description: "The kubeconfig whose current context reaches the cluster (through the admin host's tunnel: see the runbook).".to_owned(),
                    default: Some("~/.kube/config".to_owned()),
                    pattern: None,
                    error_message: String::new(),
                },
            );
        }
        match cx.finish(Some(helm)) {
            Ok(files) => out.push((dir, files)),
            Err(e) => ds.extend(e),
        }
    }
    if ds.has_errors() {
        return Err(ds);
    }
    warnings.extend(ds);
    Ok(out)
}

/// The Terraform backend: one root module per phase of a stack
/// (`<stack>/terraform/<NN>-<first stage>/`), each reading the Helm values and uploaded files of
/// the stages it deploys from the stack's folder.
#[derive(Clone, Copy, Debug)]
pub struct Terraform;

impl Backend for Terraform {
    fn synth_stack(
        &self,
        input: &BackendInput<'_>,
        ds: &mut Diagnostics,
    ) -> Result<BackendOutput, Diagnostics> {
        let stack = input.stack;
        let mut warnings = Diagnostics::new();
        let modules = root_modules_reporting(
            stack,
            input.graph,
            input.tags,
            |index| {
                let Some(stage) = stack.stages().get(index) else {
                    return String::new();
                };
                let base = format!("{:02}-{}", index + 1, stage.name);
                match stage.kind {
                    StageKind::Helm(_) => format!("{base}.values.yaml"),
                    _ => base,
                }
            },
            &mut warnings,
        )?;
        if input.formats.contains(crate::synth::Format::Terraform) && !modules.is_empty() {
            ds.extend(warnings);
            warn_cloudformation_only(stack, ds);
        }
        let mut out = BackendOutput::default();
        for (dir, files) in modules {
            for (name, content) in files {
                let path = format!("{}/terraform/{dir}/{name}", stack.name());
                let mut text = crate::synth::serializing(|| {
                    serde_json::to_string_pretty(&content).unwrap_or_default()
                });
                text.push('\n');
                out.files.push((path.clone(), text.into_bytes()));
                out.stack_artifacts
                    .push(Artifact::new(ArtifactFormat::Terraform, path));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every resource the reference deployments declare passes its type's shapes from the
    /// compiled-in provider schemas: the checks of overrides refuse nothing hyperforge writes.
    #[test]
    fn emitted_resources_match_the_provider_shapes() {
        let mut checked = 0;
        for app in crate::reference::all()
            .into_iter()
            .chain(crate::reference::variants())
        {
            for stack in app.stacks() {
                let tags = stack.effective_tags(app.tags());
                let graph = crate::constructs::expand(stack, &tags);
                let modules = root_modules(stack, &graph, &tags, |_| String::new()).unwrap();
                for (_, files) in modules {
                    for (_, doc) in files {
                        let Some(resources) = doc.get("resource").and_then(Value::as_object) else {
                            continue;
                        };
                        for (ty, by_name) in resources {
                            let shapes =
                                find(provider_shapes(), ty).unwrap_or_else(|| panic!("{ty}"));
                            for (name, body) in by_name.as_object().unwrap() {
                                let problems =
                                    shapes.check_body(Dialect::Terraform, body, "attribute");
                                assert!(problems.is_empty(), "{ty}.{name}: {problems:?}");
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(checked > 100, "{checked}");
    }
}
