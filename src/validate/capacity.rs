//! Capacity rules: a HyperPod instance group on a training plan may not ask for more
//! instances than the plan reserves (`HF0314`), and reserved quantities are 1, 2, 4, ..., 64
//! instances (`HF0315`, checked by [`check_block_count`] from `crate::catalog::capacity`, which
//! every path that consumes reserved capacity shares). Runs over every construct's
//! capacity claims.
//!
//! Source: SageMaker training plans and EC2 Capacity Blocks are sold in quantities of 1, 2, 4,
//! 8, 16, 32 or 64 instances (AWS "Reserve capacity with training plans" and "Capacity
//! Blocks for ML" user guides).

use crate::constructs::{CapacityClaim, CapacitySource};
use crate::diagnostics::{Code, Diagnostics};

pub use crate::catalog::capacity::check_block_count;

/// Checks a capacity claim against the reservation behind it: a training plan's reserved
/// count must be purchasable, and a group may not ask for more than it reserves.
pub fn claim(claim: &CapacityClaim, ds: &mut Diagnostics) {
    let CapacitySource::TrainingPlan {
        reserved_instance_count: Some(reserved),
        ..
    } = claim.source
    else {
        return;
    };
    check_block_count(reserved, &claim.path, ds);
    if claim.max_count > reserved {
        let group = claim.path.rsplit('/').next().unwrap_or_default();
        ds.report_field(
            Code::InstanceCountAboveReserved,
            &claim.path,
            "count",
            format!(
                "instance group `{group}` asks for {} instances, its training plan reserves {reserved}",
                claim.max_count
            ),
            format!("set `.count({reserved})` or less, or buy a plan with more instances"),
        );
    }
}
