//! What reserved capacity can be bought: SageMaker training plans and EC2 Capacity Blocks
//! are sold in quantities of 1, 2, 4, 8, 16, 32 or 64 instances (AWS "Reserve capacity with
//! training plans" and "Capacity Blocks for ML" user guides). Every path that consumes reserved
//! capacity checks its counts here.

use crate::diagnostics::{Code, Diagnostics};

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
