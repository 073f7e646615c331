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

use crate::app::{Stack, StageId, StageKind, Tags};
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
    let helm = lower::eks_cluster_of(&cx).map(|cluster| {
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
