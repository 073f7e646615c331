//! Autoscaling within what is reserved (`HF0360`, `HF0361`): the most replicas an autoscaled
//! server may ask for must fit the GPUs its capacity can ever provide, and a warning says when
//! they need more nodes than are provisioned when the stack is deployed.
//!
//! The capacity serving a model is every claim of its stack that can run it: the same instance
//! type and the same launcher (HyperPod instance groups for operator endpoints, EC2 node groups
//! and Karpenter pools for Deployments), as for the storage rule. A replica takes `gpus` GPUs of
//! one node and never spans nodes, so a node holds `node GPUs / gpus` replicas, rounded down.
//!
//! - Ever: a claim on a Capacity Block or training plan with a stated size provides at most the
//!   instances reserved (and no more than the group's maximum size); any other claim, its
//!   maximum size (a node group's `max_size`, a Karpenter pool's node limit, a HyperPod group's
//!   count).
//! - Now: a node group's desired size and a HyperPod group's count; a Karpenter pool on a
//!   reservation launches nodes into capacity that exists, up to its limit.

use crate::catalog;
use crate::constructs::{CapacityClaim, CapacitySource, Launcher, ServedModel};
use crate::diagnostics::{Code, Diagnostic, Diagnostics};

/// Checks the autoscaling of `served` (at `path`) against the claims of its stack.
pub fn check(served: &ServedModel<'_>, path: &str, claims: &[CapacityClaim], ds: &mut Diagnostics) {
    let Some(autoscaling) = served.autoscaling else {
        return;
    };
    let max = i64::from(autoscaling.max());
    if max < 1 || served.gpus == 0 {
        return; // reported by the construct (HF0363, HF0401 and friends)
    }
    let ec2_name = |t: &'_ str| t.strip_prefix("ml.").unwrap_or(t).to_owned();
    let served_type = ec2_name(served.instance_type);
    let Some(instance) = catalog::instance(&served_type) else {
        return; // HF0303
    };
    let per_node = i64::from(instance.gpu_count / served.gpus);
    let matching: Vec<&CapacityClaim> = claims
        .iter()
        .filter(|c| {
            (c.launcher == Launcher::HyperPod) == served.hyperpod
                && ec2_name(&c.instance_type) == served_type
        })
        .collect();
    if matching.is_empty() || per_node == 0 {
        return; // no capacity in this stack to compare with; a replica too large is HF0401
    }
    // A replica over several nodes takes that many whole nodes.
    let nodes_per_replica = i64::from(served.shape.nodes_per_replica.max(1));
    let replicas_in = |nodes: i64| {
        if nodes_per_replica > 1 {
            nodes / nodes_per_replica
        } else {
            nodes.saturating_mul(per_node)
        }
    };
    let gpus = i64::from(served.gpus).saturating_mul(nodes_per_replica);
    let node_gpus = i64::from(instance.gpu_count);
    let ever_nodes: i64 = matching.iter().map(|c| ever(c)).sum();
    let now_nodes: i64 = matching.iter().map(|c| now(c)).sum();
    let claims_named = matching
        .iter()
        .map(|c| c.path.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let needed_gpus = max.saturating_mul(gpus);
    let ever_replicas = replicas_in(ever_nodes);
    if max > ever_replicas {
        ds.push(
            Diagnostic::new(
                Code::AutoscalingAboveCapacity,
                path,
                format!(
                    "autoscaling may ask for {max} replicas of {gpus} GPUs, {needed_gpus} GPUs; the capacity serving `{}` can ever provide {} GPUs ({ever_nodes} {} nodes of {node_gpus} GPUs), room for {ever_replicas} replicas",
                    served.object_name,
                    ever_nodes.saturating_mul(node_gpus),
                    instance.name,
                ),
                format!(
                    "set `max_replicas` to {} or less, or reserve more instances",
                    ever_replicas.max(1)
                ),
            )
            .at_field("autoscaling.max_replicas")
            .note(format!("capacity: {claims_named}")),
        );
        return;
    }
    let now_replicas = replicas_in(now_nodes);
    if max > now_replicas {
        let nodes_needed = if nodes_per_replica > 1 {
            max.saturating_mul(nodes_per_replica)
        } else {
            (max + per_node - 1) / per_node
        };
        ds.push(
            Diagnostic::new(
                Code::AutoscalingWaitsForCapacity,
                path,
                format!(
                    "autoscaling may ask for {max} replicas, which need {nodes_needed} {} nodes; {now_nodes} are provisioned when the stack is deployed (room for {now_replicas} replicas), so scaling up would wait for nodes that do not exist yet",
                    instance.name,
                ),
                format!(
                    "raise the desired size of the node groups to {nodes_needed} nodes, or set `max_replicas` to {}",
                    now_replicas.max(1)
                ),
            )
            .at_field("autoscaling.max_replicas")
            .note(format!("capacity: {claims_named}")),
        );
    }
}

/// The most nodes a claim can ever provide (shared with the `replicas` bound, `HF0371`).
pub(crate) fn ever(claim: &CapacityClaim) -> i64 {
    let reserved = match &claim.source {
        CapacitySource::TrainingPlan {
            reserved_instance_count,
            ..
        }
        | CapacitySource::CapacityBlock {
            reserved_instance_count,
            ..
        }
        | CapacitySource::CapacityReservation {
            reserved_instance_count,
            ..
        } => *reserved_instance_count,
        CapacitySource::OnDemand => None,
    };
    let max = claim.max_count.max(0);
    reserved.map_or(max, |r| r.clamp(0, max))
}

/// The nodes a claim provides when the stack is deployed (a Karpenter pool on a reservation:
/// what it may launch into capacity that exists).
fn now(claim: &CapacityClaim) -> i64 {
    let reserved_pool =
        claim.provisioned_on_demand && !matches!(claim.source, CapacitySource::OnDemand);
    if reserved_pool {
        ever(claim)
    } else {
        claim.count.clamp(0, ever(claim))
    }
}
