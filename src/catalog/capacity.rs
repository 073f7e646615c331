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

/// The minute of the day (UTC) every Capacity Block ends at: "All Capacity Blocks end at
/// 11:30AM UTC" (EC2 User Guide, "Find and purchase Capacity Blocks"); it may start at any
/// time ("if a Capacity Block starts at 04:55 and ends at 11:30", EC2 API Reference,
/// `CapacityBlockOffering`).
pub const CAPACITY_BLOCK_END_MINUTE: i64 = 11 * 60 + 30;

/// Minutes before a Capacity Block's end at which EC2 begins terminating its instances ("With
/// 30 minutes (for instance types) ... left in your Capacity Block reservation, we begin
/// terminating any instances", EC2 User Guide, "How Capacity Blocks work").
pub const EC2_TERMINATION_LEAD_MINUTES: i64 = 30;

/// Minutes before a Capacity Block's end at which EKS scales a managed node group on it to zero
/// ("Amazon EKS will setup a scheduled scale down on the node group 40 minutes prior to their
/// reservation end", EKS User Guide, "Create a managed node group with Capacity Blocks for
/// ML"); Karpenter drains its nodes at the same time (its Capacity Block design: "10 minutes
/// before EC2 begins reclaiming the capacity").
pub const EKS_SCALE_DOWN_LEAD_MINUTES: i64 = 40;

/// The longest Capacity Block, days ("1-day increments up to 14 days, and in 7-day increments
/// up to 182 days", EC2 User Guide, "Find and purchase Capacity Blocks").
pub const MAX_BLOCK_DAYS: i64 = 182;

/// The duration a Capacity Block from `start` to `end` (UTC minutes) was bought for, in days:
/// the nearest whole number, since a block that starts at another time than 11:30 has a first
/// day of its own length.
pub fn block_days(start: i64, end: i64) -> i64 {
    (end - start + 720).div_euclid(1440)
}

/// Whether `days` is a duration Capacity Blocks are sold in: 1 to 14 days, then multiples of 7
/// up to 182.
pub fn is_block_duration(days: i64) -> bool {
    (1..=14).contains(&days) || (days % 7 == 0 && (14..=MAX_BLOCK_DAYS).contains(&days))
}

/// Minutes before a training plan's end at which SageMaker begins terminating its instances
/// ("You have full access to all reserved instances until 30 minutes before the Reserved
/// Capacity end time. When there are 30 minutes remaining in your Reserved Capacity, SageMaker
/// training plans begin the process of terminating any running instances", SageMaker AI
/// Developer Guide, "Training plans utilization for SageMaker training jobs"). HyperPod
/// publishes no earlier scale-down of its own.
pub const TRAINING_PLAN_TERMINATION_LEAD_MINUTES: i64 = 30;

/// The longest training plan, days ("Reservation durations are available in 1-day increments
/// from 1 to 182 days", SageMaker AI Developer Guide, "Search training plan offerings").
pub const MAX_PLAN_DAYS: i64 = 182;

/// What a reserved window is: its duration rules and its service's lead times differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reservation {
    /// An EC2 Capacity Block, on an EKS managed node group or a Karpenter pool.
    CapacityBlock,
    /// A SageMaker training plan feeding a HyperPod instance group.
    TrainingPlan,
}

impl Reservation {
    /// Minutes before the end at which the service scales the nodes down: EKS's (and
    /// Karpenter's) 40 minutes on a Capacity Block; on a training plan, SageMaker's
    /// terminations themselves.
    pub fn scale_down_lead_minutes(self) -> i64 {
        match self {
            Reservation::CapacityBlock => EKS_SCALE_DOWN_LEAD_MINUTES,
            Reservation::TrainingPlan => TRAINING_PLAN_TERMINATION_LEAD_MINUTES,
        }
    }

    /// Minutes before the end at which the instances are terminated.
    pub fn termination_lead_minutes(self) -> i64 {
        match self {
            Reservation::CapacityBlock => EC2_TERMINATION_LEAD_MINUTES,
            Reservation::TrainingPlan => TRAINING_PLAN_TERMINATION_LEAD_MINUTES,
        }
    }

    /// Whether `days` is a duration this kind of reservation is sold in.
    pub fn is_duration(self, days: i64) -> bool {
        match self {
            Reservation::CapacityBlock => is_block_duration(days),
            Reservation::TrainingPlan => (1..=MAX_PLAN_DAYS).contains(&days),
        }
    }
}

/// Whole minutes covering `secs` (a part of a minute counts whole).
pub fn minutes_from_secs(secs: u64) -> i64 {
    i64::try_from(secs.div_ceil(60)).unwrap_or(i64::MAX)
}

/// The minutes (UTC, since 1970) that matter in a reservation's window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockSchedule {
    /// The block opens.
    pub start: i64,
    /// The endpoint serves: the start plus the cold start, when known.
    pub serving_from: Option<i64>,
    /// Traffic stops and the group scales to zero: EKS's scale-down less the server's drain.
    pub drain_by: i64,
    /// EKS scales a managed node group to zero (Karpenter drains); on a training plan, when
    /// SageMaker begins terminating.
    pub scale_down_at: i64,
    /// The service begins terminating instances.
    pub terminations_from: i64,
    /// The block ends.
    pub end: i64,
    /// The duration it was bought for, days.
    pub days: i64,
    /// Minutes paid for but not serving (cold start and drain), when the cold start is known.
    pub idle_minutes: Option<i64>,
}

/// The schedule of a Capacity Block from `start` to `end` whose nodes serve after
/// `cold_start_minutes` and whose servers need `drain_minutes` to finish their requests.
pub fn block_schedule(
    start: i64,
    end: i64,
    cold_start_minutes: Option<i64>,
    drain_minutes: i64,
) -> BlockSchedule {
    reservation_schedule(
        Reservation::CapacityBlock,
        start,
        end,
        cold_start_minutes,
        drain_minutes,
    )
}

/// The schedule of a reservation of kind `kind` from `start` to `end` (UTC minutes) whose
/// nodes serve after `cold_start_minutes` and whose servers need `drain_minutes`: drained that
/// long before the service's scale-down.
pub fn reservation_schedule(
    kind: Reservation,
    start: i64,
    end: i64,
    cold_start_minutes: Option<i64>,
    drain_minutes: i64,
) -> BlockSchedule {
    let scale_down_at = end - kind.scale_down_lead_minutes();
    let drain_by = scale_down_at - drain_minutes;
    BlockSchedule {
        start,
        serving_from: cold_start_minutes.map(|m| start.saturating_add(m)),
        drain_by,
        scale_down_at,
        terminations_from: end - kind.termination_lead_minutes(),
        end,
        days: block_days(start, end),
        idle_minutes: cold_start_minutes.map(|m| m.saturating_add(end - drain_by)),
    }
}

impl BlockSchedule {
    /// The schedule drained at `at` (UTC minutes) instead, when that is no later than the
    /// latest drain (checked at the window: `HF0335`).
    pub fn drained_by(self, at: Option<i64>) -> Self {
        match at {
            Some(at) if at <= self.drain_by => BlockSchedule {
                drain_by: at,
                idle_minutes: self
                    .serving_from
                    .map(|serving| (serving - self.start).saturating_add(self.end - at)),
                ..self
            },
            _ => self,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_durations_are_whole_days_then_weeks() {
        let day = 1440;
        let start = 10 * day + 4 * 60 + 55;
        let end = 17 * day + CAPACITY_BLOCK_END_MINUTE;
        assert_eq!(block_days(start, end), 7);
        assert_eq!(block_days(0, day - 30), 1);
        assert!([1, 7, 14, 21, 182].iter().all(|d| is_block_duration(*d)));
        assert!([0, 15, 20, 189, -7].iter().all(|d| !is_block_duration(*d)));
        let plan = Reservation::TrainingPlan;
        assert!([1, 15, 20, 182].iter().all(|d| plan.is_duration(*d)));
        assert!([0, 183, -1].iter().all(|d| !plan.is_duration(*d)));
    }

    #[test]
    fn a_training_plan_drains_before_sagemakers_terminations() {
        let (start, end) = (10 * 1440, 17 * 1440);
        let s = reservation_schedule(Reservation::TrainingPlan, start, end, Some(95), 1);
        assert_eq!(s.terminations_from, end - 30);
        assert_eq!(s.scale_down_at, end - 30);
        assert_eq!(s.drain_by, end - 31);
        assert_eq!(s.idle_minutes, Some(95 + 31));
    }

    #[test]
    fn an_earlier_drain_moves_the_drain_and_the_idle_minutes_only() {
        let (start, end) = (10 * 1440 + 295, 17 * 1440 + CAPACITY_BLOCK_END_MINUTE);
        let latest = block_schedule(start, end, Some(95), 1);
        assert_eq!(latest.drain_by, end - 41);
        assert_eq!(latest.idle_minutes, Some(95 + 41));
        let early = latest.drained_by(Some(end - 120));
        assert_eq!(early.drain_by, end - 120);
        assert_eq!(early.idle_minutes, Some(95 + 120));
        assert_eq!(early.scale_down_at, latest.scale_down_at);
        // A later one is refused at the window (HF0335) and never moves the schedule.
        assert_eq!(latest.drained_by(Some(end - 10)), latest);
        assert_eq!(latest.drained_by(None), latest);
    }
}
