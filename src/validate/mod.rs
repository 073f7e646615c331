//! Model-aware validation: the rules that need the catalog's facts about models and instances,
//! run by [`crate::synth::validate`] after the structural checks of each construct.
//!
//! This module owns:
//! - [`parallelism`]: attention heads, decode context parallelism and MXFP4 shard granularity
//!   against the tensor parallel size (`HF0502`-`HF0504`);
//! - [`memory`]: whether the weights fit the GPUs, what a sequence at `max_model_len` needs,
//!   and oversized instances (`HF0501`, `HF0505`, `HF0507`-`HF0509`);
//! - [`engine`]: the serving engine's contract: options, variables, fabric settings and KV
//!   connectors against the image's engine release (`HF0520`-`HF0525`);
//! - [`model_source`]: where the workers get the weights from (`HF0506`);
//! - [`autoscaling`]: an autoscaled server's most replicas against the GPUs its capacity can
//!   ever provide and the nodes provisioned now (`HF0360`, `HF0361`);
//! - [`capacity`]: training plan and Capacity Block instance counts (`HF0314`, `HF0315`);
//! - [`storage`]: whether the serving nodes' own storage holds the downloaded weights
//!   (`HF0510`);
//! - [`topology`]: how the pieces fit around each workload: capacity of its instance type,
//!   `replicas` within it, the NVIDIA device plugin before it, Capacity Blocks used whole, the
//!   load balancer controller's role, cluster and region (`HF0370`-`HF0375`);
//! - [`limits`]: CloudFormation service limits checked on rendered templates (`HF06xx`),
//!   called by synthesis after lowering.
//!
//! Structural checks (names, ids, CIDRs, ARNs, regions, zones, stage order) stay with the
//! constructs in `constructs/` and `app/`.

pub mod autoscaling;
pub mod capacity;
pub mod engine;
pub mod limits;
pub mod memory;
pub mod model_source;
pub mod parallelism;
pub mod region;
pub mod storage;
pub mod topology;

use crate::app::{App, Stack};
use crate::catalog;
use crate::constructs::{Placements, ServedModel};
use crate::diagnostics::{Code, Diagnostics};

/// Runs every cross-construct and model-aware rule over `app`, reading each construct's
/// facts: every capacity claim gets the region and reservation rules, every served model the
/// fit, parallelism, context and weight-source rules, whichever path (HyperPod, EKS node group,
/// Karpenter pool) provides it.
pub(crate) fn app(app: &App, ds: &mut Diagnostics) {
    for stack in app.stacks() {
        let placements = Placements::new(stack);
        let mut claims = Vec::new();
        for placed in placements.all() {
            let facts = placed.facts();
            for claim in &facts.capacity {
                region::claim(stack.region(), claim, ds);
                capacity::claim(claim, ds);
            }
            for served in &facts.served_models {
                served_model(stack, served, placed.cx.path, ds);
            }
            claims.extend(facts.capacity);
        }
        // Storage spans constructs: every claim that can run a served model. Staged weights
        // span them too: a server reading a store needs an earlier Job staging its revision.
        let mut stagings = Vec::new();
        let clusters = topology::Clusters::of(&placements);
        for placed in placements.all() {
            let facts = placed.facts();
            for served in &facts.served_models {
                storage::check(served, placed.cx.path, &claims, ds);
                autoscaling::check(served, placed.cx.path, &claims, ds);
                topology::workload(
                    stack,
                    &clusters,
                    served,
                    placed.cx.path,
                    placed.node.stage,
                    &claims,
                    ds,
                );
                model_source::staged(served, placed.node.stage, placed.cx.path, &stagings, ds);
            }
            stagings.extend(
                facts
                    .weight_stagings
                    .into_iter()
                    .map(|s| (placed.node.stage, s)),
            );
        }
        topology::reservations(stack, &claims, ds);
        topology::load_balancer_controller(stack, &placements, ds);
    }
}

fn served_model(stack: &Stack, served: &ServedModel<'_>, path: &str, ds: &mut Diagnostics) {
    model_source::check(served, path, ds);
    // An unknown instance type is reported by the construct's own checks.
    let Some(instance) = catalog::instance(served.instance_type) else {
        return;
    };
    // The model-aware rules read the engine-neutral shape, never the server.
    let shape = &served.shape;
    engine::check(shape, instance, served.efa_devices, path, ds);
    let Some(model) = &shape.model else {
        ds.report_field(
            Code::ModelNotInCatalog,
            path,
            "model",
            format!(
                "model `{}` is not in the catalog: memory fit and parallelism were not checked",
                shape.model_id
            ),
            "describe it with `VllmServer::model_spec(Model::new(..).parameters(..).attention(..).attention_heads(..))`",
        );
        return;
    };
    if served.gpus.min(instance.gpu_count) == 0 || shape.tensor_parallel == 0 {
        return; // reported by the construct (HF0401 and friends)
    }
    parallelism::check(model, shape, path, ds);
    if shape.tensor_parallel <= instance.gpu_count {
        let at = memory::Placement {
            region: stack.region(),
            path,
            hyperpod: served.hyperpod,
        };
        memory::check(model, shape, instance, at, ds);
    }
}

#[cfg(test)]
mod tests {
    use crate::app::{App, Stack};
    use crate::constructs::*;
    use crate::diagnostics::{Code, Diagnostics};
    use crate::reference::{kimi_k3_server, CAPACITY_BLOCK_AZ_ID, CAPACITY_BLOCK_RESERVATION_ID};

    /// How the EKS stack gets its GPU nodes.
    #[derive(Clone, Copy)]
    enum Nodes {
        ManagedNodeGroup,
        KarpenterPool,
    }

    /// Kimi K3 served by a vLLM Deployment on EKS, on `instance_type` nodes in `region`.
    fn eks(region: &str, instance_type: &str, nodes: Nodes, server: VllmServer) -> Diagnostics {
        let mut stack = Stack::new("eks", region);
        let f = stack.cloudformation_stage("foundation");
        let net = stack.add(f, Network::new("Network").gpu_subnet(CAPACITY_BLOCK_AZ_ID));
        let eks = stack.add(
            f,
            EksCluster::new("Eks", "eks")
                .subnets(&net.private_subnets)
                .vpc(&net.vpc),
        );
        let block =
            NodeCapacity::capacity_block_of(CAPACITY_BLOCK_RESERVATION_ID, CAPACITY_BLOCK_AZ_ID, 1);
        let capacity = stack.kubernetes_stage("capacity");
        match nodes {
            Nodes::ManagedNodeGroup => {
                stack.add(
                    f,
                    ManagedNodeGroup::gpu(
                        "Gpu",
                        &eks.cluster,
                        instance_type,
                        net.gpu_subnet.iter(),
                    )
                    .capacity(block),
                );
            }
            Nodes::KarpenterPool => {
                let karpenter = stack.add(f, Karpenter::new("Karpenter", &eks));
                stack.add(
                    capacity,
                    KarpenterNodePool::capacity_block(
                        "GpuPool",
                        "gpu",
                        &karpenter,
                        instance_type,
                        ReservationSelector::Id(CAPACITY_BLOCK_RESERVATION_ID.to_owned()),
                    ),
                );
            }
        }
        stack.helm_stage("nvidia-device-plugin", HelmRelease::nvidia_device_plugin());
        let w = stack.kubernetes_stage("workload");
        stack.add(
            w,
            VllmDeployment::new("KimiK3", server, instance_type)
                .load_balancer_subnets(&net.private_subnets),
        );
        App::new().stack(stack).validate()
    }

    fn has(ds: &Diagnostics, code: Code, path: &str) -> bool {
        ds.iter().any(|d| d.code == code && d.path == path)
    }

    #[test]
    fn the_eks_reference_shape_passes_the_model_rules() {
        for nodes in [Nodes::ManagedNodeGroup, Nodes::KarpenterPool] {
            let ds = eks("us-west-2", "p6-b300.48xlarge", nodes, kimi_k3_server());
            assert!(!ds.has_errors(), "{ds}");
        }
    }

    #[test]
    fn kimi_k3_on_smaller_gpus_is_refused_on_every_eks_path() {
        for instance in ["p5en.48xlarge", "p6-b200.48xlarge"] {
            for nodes in [Nodes::ManagedNodeGroup, Nodes::KarpenterPool] {
                let ds = eks("us-west-2", instance, nodes, kimi_k3_server());
                assert!(
                    has(&ds, Code::ModelDoesNotFit, "eks/KimiK3"),
                    "{instance}: {ds}"
                );
                let fit = ds
                    .iter()
                    .find(|d| d.code == Code::ModelDoesNotFit)
                    .map(|d| format!("{}{:?}", d.message, d.notes))
                    .unwrap_or_default();
                assert!(fit.contains("GiB"), "the per-GPU numbers are given: {fit}");
            }
        }
    }

    #[test]
    fn max_model_len_above_the_context_is_refused_on_eks() {
        let server = kimi_k3_server().max_model_len(10_000_000);
        let ds = eks(
            "us-west-2",
            "p6-b300.48xlarge",
            Nodes::ManagedNodeGroup,
            server,
        );
        assert!(
            has(&ds, Code::ContextLengthExceedsModel, "eks/KimiK3"),
            "{ds}"
        );
    }

    #[test]
    fn a_node_group_in_a_region_without_the_instance_type_is_refused() {
        let ds = eks(
            "eu-central-1",
            "p6-b300.48xlarge",
            Nodes::ManagedNodeGroup,
            kimi_k3_server(),
        );
        assert!(has(&ds, Code::InstanceTypeNotInRegion, "eks/Gpu"), "{ds}");
        let ds = eks(
            "eu-central-1",
            "p6-b300.48xlarge",
            Nodes::KarpenterPool,
            kimi_k3_server(),
        );
        assert!(
            has(&ds, Code::InstanceTypeNotInRegion, "eks/GpuPool"),
            "{ds}"
        );
    }
}
