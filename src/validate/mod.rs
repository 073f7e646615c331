//! Model-aware validation: the rules that need the catalog's facts about models and instances,
//! run by [`crate::synth::validate`] after the structural checks of each construct.
//!
//! This module owns:
//! - [`parallelism`]: attention heads, decode context parallelism and MXFP4 shard granularity
//!   against the tensor parallel size (`HF0502`-`HF0504`);
//! - [`memory`]: whether the weights fit the GPUs, what a sequence at `max_model_len` needs,
//!   and oversized instances (`HF0501`, `HF0505`, `HF0507`-`HF0509`);
//! - [`model_source`]: where the workers get the weights from (`HF0506`);
//! - [`capacity`]: training plan and Capacity Block instance counts (`HF0314`, `HF0315`);
//! - [`limits`]: CloudFormation service limits checked on rendered templates (`HF06xx`),
//!   called by synthesis after lowering.
//!
//! Structural checks (names, ids, CIDRs, ARNs, regions, zones, stage order) stay with the
//! constructs in `spec/` and `app/`.

pub mod capacity;
pub mod limits;
pub mod memory;
pub mod model_source;
pub mod parallelism;

use crate::app::{App, Stack};
use crate::catalog;
use crate::diagnostics::{Code, Diagnostics};
use crate::spec::{ConstructKind, InferenceEndpoint};

/// Runs every model-aware rule over `app`.
pub(crate) fn app(app: &App, ds: &mut Diagnostics) {
    for stack in app.stacks() {
        for node in stack.nodes() {
            let path = stack.display_path(&node.id);
            match &node.construct {
                ConstructKind::InferenceEndpoint(ep) => endpoint(stack, ep, &path, ds),
                ConstructKind::HyperPod(cluster) => capacity::hyperpod(cluster, &path, ds),
                _ => {}
            }
        }
    }
}

fn endpoint(stack: &Stack, ep: &InferenceEndpoint, path: &str, ds: &mut Diagnostics) {
    model_source::check(ep, path, ds);
    // An unknown instance type is reported by the endpoint's own checks.
    let Some(instance) = catalog::instance(ep.instance_type()) else {
        return;
    };
    let server = ep.server();
    let Some(model) = server.model() else {
        ds.report(
            Code::ModelNotInCatalog,
            path,
            format!(
                "model `{}` is not in the catalog: memory fit and parallelism were not checked",
                server.model_id()
            ),
            "describe it with `VllmServer::model_spec(Model::new(..).parameters(..).attention(..).attention_heads(..))`",
        );
        return;
    };
    let mut model = model.clone();
    if let Some(bytes) = server.weights() {
        // An explicit `weight_bytes` on the server overrides the model's own size.
        model.checkpoint_bytes = Some(bytes);
    }
    let tp = server.tensor_parallel(instance.gpu_count);
    if tp == 0 {
        return; // reported as HF0401
    }
    parallelism::check(&model, server, tp, path, ds);
    if tp <= instance.gpu_count {
        memory::check(&model, server, instance, tp, stack.region(), path, ds);
    }
}
