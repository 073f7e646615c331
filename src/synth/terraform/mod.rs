//! The Terraform backend: one Terraform JSON root module per stack (`<stack>/terraform/`:
//! `versions.tf.json` and `main.tf.json`)
//! holding every CloudFormation, upload and Helm stage of the stack, with stage order kept by
//! references and `depends_on`.
//!
//! Resources are named after construct paths (`Network/Vpc` -> `aws_vpc.network_vpc`), so the
//! two formats correspond one to one where they agree. References are `${type.name.attr}`
//! interpolations of typed [`AttrRef`](crate::app::AttrRef)s; IAM documents are locals encoded
//! with `jsonencode`; pseudo values come from the `aws_partition`, `aws_region` and
//! `aws_caller_identity` data sources. The HyperPod cluster is `awscc_sagemaker_cluster`
//! (hashicorp/aws has none); the HyperPod dependencies chart is a `helm_release` of a local
//! checkout. Kubernetes stages stay `kubectl apply` steps after `terraform apply`.
//! CloudFormation property overrides (`Stack::override_property`) do not apply here.

mod lower;
mod module;
mod resources;

pub use module::{
    escape_template, snake, AWSCC_PROVIDER, AWS_PROVIDER, HELM_PROVIDER, REQUIRED_VERSION,
};

use super::{Backend, BackendInput, BackendOutput};
use crate::app::{Stack, StageId, StageKind, Tags};
use crate::assembly::manifest::{Artifact, ArtifactFormat};
use crate::diagnostics::Diagnostics;
use crate::resources::ResourceGraph;
use serde_json::{json, Value};

/// The files of the root module of `stack` (name and content), none when the stack has no
/// infrastructure stage.
/// `stage_file(index)` is the artifact path of stage `index` relative to the stack's folder
/// (`02-lifecycle-scripts`, `03-hyperpod-dependencies.values.yaml`), which the module reads
/// through `${path.module}/../`.
pub fn root_module(
    stack: &Stack,
    graph: &ResourceGraph,
    tags: &Tags,
    stage_file: impl Fn(usize) -> String,
) -> Result<Vec<(&'static str, Value)>, Diagnostics> {
    if !stack
        .stages()
        .iter()
        .any(|s| matches!(s.kind, StageKind::CloudFormation))
    {
        return Ok(Vec::new());
    }
    let mut cx = module::RootModule::new(stack, tags);
    for (index, stage) in stack.stages().iter().enumerate() {
        let id = StageId::from_index(index);
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
    let helm = cx.eks_cluster().map(|cluster| {
        json!({"kubernetes": {
            "host": cluster.interp("endpoint"),
            "cluster_ca_certificate": format!("${{base64decode({}.certificate_authority[0].data)}}", cluster.address()),
            "exec": {
                "api_version": "client.authentication.k8s.io/v1beta1",
                "command": "aws",
                "args": ["eks", "get-token", "--cluster-name", cluster.interp("name"), "--region", stack.region()],
            },
        }})
    });
    cx.finish(helm)
}

/// The Terraform backend: one root module per stack (`<stack>/terraform/`), which reads the
/// Helm values and uploaded files of the stages it deploys from next to it.
#[derive(Clone, Copy, Debug)]
pub struct Terraform;

impl Backend for Terraform {
    fn synth_stack(
        &self,
        input: &BackendInput<'_>,
        _ds: &mut Diagnostics,
    ) -> Result<BackendOutput, Diagnostics> {
        let stack = input.stack;
        let module = root_module(stack, input.graph, input.tags, |index| {
            let Some(stage) = stack.stages().get(index) else {
                return String::new();
            };
            let base = format!("{:02}-{}", index + 1, stage.name);
            match stage.kind {
                StageKind::Helm(_) => format!("{base}.values.yaml"),
                _ => base,
            }
        })?;
        let mut out = BackendOutput::default();
        for (name, content) in module {
            let path = format!("{}/terraform/{name}", stack.name());
            let mut text = serde_json::to_string_pretty(&content).unwrap_or_default();
            text.push('\n');
            out.files.push((path.clone(), text.into_bytes()));
            out.stack_artifacts
                .push(Artifact::new(ArtifactFormat::Terraform, path));
        }
        Ok(out)
    }
}
