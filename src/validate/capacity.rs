//! Capacity rules: a HyperPod instance group on a training plan may not ask for more
//! instances than the plan reserves (`HF0314`), and reserved quantities are 1, 2, 4, ..., 64
//! instances (`HF0315`). [`check_block_count`] is shared with every path that consumes
//! reserved capacity (training plans now, EC2 Capacity Blocks on the EKS path).
//!
//! Source: SageMaker training plans and EC2 Capacity Blocks are sold in quantities of 1, 2, 4,
//! 8, 16, 32 or 64 instances (AWS "Reserve capacity with training plans" and "Capacity
//! Blocks for ML" user guides).

use crate::diagnostics::{Code, Diagnostics};
use crate::spec::{Capacity, HyperPodCluster};

/// Instance counts a training plan or a Capacity Block can have.
pub const RESERVABLE_COUNTS: [i64; 7] = [1, 2, 4, 8, 16, 32, 64];

/// Reports `HF0315` at `path` unless `count` is a purchasable reservation size.
pub fn check_block_count(count: i64, path: &str, ds: &mut Diagnostics) {
    if !RESERVABLE_COUNTS.contains(&count) {
        let next = RESERVABLE_COUNTS.iter().find(|&&c| c >= count);
        ds.report(
            Code::InvalidReservedInstanceCount,
            path,
            format!("a reservation of {count} instances cannot be bought: training plans and Capacity Blocks come in 1, 2, 4, 8, 16, 32 or 64 instances"),
            match next {
                Some(next) if count > 0 => format!("check the reservation's instance count; the nearest size that covers {count} is {next}"),
                _ => "check the reservation's instance count (1 to 64, a power of two)".to_owned(),
            },
        );
    }
}

/// Checks the instance groups of `cluster` (path `path`) against their reserved capacity.
pub fn hyperpod(cluster: &HyperPodCluster, path: &str, ds: &mut Diagnostics) {
    for group in cluster.groups() {
        let Capacity::TrainingPlan(plan) = group.capacity_source() else {
            continue;
        };
        let Some(reserved) = plan.reserved_instance_count else {
            continue;
        };
        let gpath = format!("{path}/{}", group.name());
        check_block_count(reserved, &gpath, ds);
        if group.instance_count() > reserved {
            ds.report(
                Code::InstanceCountAboveReserved,
                &gpath,
                format!(
                    "instance group `{}` asks for {} instances, its training plan reserves {reserved}",
                    group.name(),
                    group.instance_count()
                ),
                format!("set `.count({reserved})` or less, or buy a plan with more instances"),
            );
        }
    }
}
