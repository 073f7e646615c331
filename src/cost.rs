//! Cost estimate: for each stack, the hourly and 30-day cost of its instances from the
//! catalog's published on-demand prices.
//!
//! What the figures are, and are not:
//! - Prices are EC2 on-demand prices of the stack's own region. The catalog holds the AWS Price
//!   List for **us-east-1** only (generated 2026-07-20): a stack elsewhere is not priced, and its
//!   lines say so and give the us-east-1 price for reference, never as the stack's cost.
//! - HyperPod bills `ml.` instances at SageMaker prices, which the catalog does not hold; a
//!   HyperPod instance group is shown at its EC2 on-demand equivalent, labelled as such.
//! - Capacity Block and training-plan prices are set at purchase (paid up front, changing with
//!   supply and demand) and are not in the catalog: capacity from a training plan is shown as
//!   its on-demand equivalent, never as what the plan costs.
//! - Not included: NAT gateway and EKS control-plane hourly fees (no sourced figures in the
//!   catalog), EBS volumes, data transfer, S3, CloudWatch and KMS.
//!
//! Priced: HyperPod instance groups, EKS managed node groups (at their desired size) and
//! Karpenter Capacity Block pools (at their largest size). Inference endpoints and Deployments
//! run on those, so they add nothing of their own.

use crate::app::App;
use crate::catalog;
use crate::constructs::{CapacityClaim, CapacitySource, Launcher, Placements};
use std::fmt;

/// Region of the catalog's prices (the only one it prices; see
/// [`catalog::PRICED_REGIONS`]).
pub const PRICE_REGION: &str = "us-east-1";

/// Date the price list was generated.
pub const PRICE_DATE: &str = "2026-07-20";

/// Hours in the 30-day figure.
pub const HOURS_PER_30_DAYS: f64 = 720.0;

/// How a line is priced.
#[derive(Clone, Debug, PartialEq)]
pub enum Pricing {
    /// The EC2 on-demand price of the instances, standing in for a price the catalog does not
    /// hold (`basis` says which: HyperPod `ml.` pricing, a training plan).
    OnDemandEquivalent {
        /// USD per hour for all of the line's instances.
        usd_per_hour: f64,
        /// What the real price depends on.
        basis: String,
    },
    /// No price: the catalog has no on-demand price for the type.
    NotPriced {
        /// Why.
        reason: String,
    },
}

/// One group of instances.
#[derive(Clone, Debug, PartialEq)]
pub struct CostLine {
    /// The construct path (`kimi-k3-hyperpod/HyperPod/p6-b300`).
    pub path: String,
    /// The instance type as deployed (`ml.p6-b300.48xlarge`).
    pub instance_type: String,
    /// Instances.
    pub count: i64,
    /// The price.
    pub pricing: Pricing,
}

impl CostLine {
    /// USD per hour, when priced.
    pub fn usd_per_hour(&self) -> Option<f64> {
        match &self.pricing {
            Pricing::OnDemandEquivalent { usd_per_hour, .. } => Some(*usd_per_hour),
            Pricing::NotPriced { .. } => None,
        }
    }
}

/// The estimate of one stack.
#[derive(Clone, Debug, PartialEq)]
pub struct StackCost {
    /// The stack's name.
    pub stack: String,
    /// The region it deploys to.
    pub region: String,
    /// Its instance groups.
    pub lines: Vec<CostLine>,
    /// Where each served model's weights come from, and how long a cold start takes.
    pub served: Vec<ServedWeights>,
    /// The copies of weights its staging Jobs keep in S3.
    pub staged: Vec<StagedCopy>,
    /// Its reservations with a window: what the window cost and what of it serves nothing.
    pub reservations: Vec<ReservationCost>,
}

/// A Capacity Block or training plan with a window: its schedule and, when its upfront fee is
/// given, what the window and its minutes that serve nothing cost.
#[derive(Clone, Debug, PartialEq)]
pub struct ReservationCost {
    /// The group or pool it feeds.
    pub path: String,
    /// What it is.
    pub kind: catalog::capacity::Reservation,
    /// Its reservation id or training plan ARN.
    pub reservation: String,
    /// Its window, the cold start and the drain, in UTC minutes.
    pub schedule: catalog::capacity::BlockSchedule,
    /// What it cost, paid up front, USD, when given.
    pub upfront_fee_usd: Option<f64>,
}

impl ReservationCost {
    /// The window's length, minutes.
    pub fn window_minutes(&self) -> i64 {
        self.schedule.end - self.schedule.start
    }

    /// The share of the fee paid for the minutes that serve nothing, USD, when the fee and the
    /// cold start are known.
    pub fn idle_usd(&self) -> Option<f64> {
        let fee = self.upfront_fee_usd?;
        let idle = self.schedule.idle_minutes?;
        let window = self.window_minutes();
        (window > 0).then(|| fee * idle.min(window) as f64 / window as f64)
    }

    /// The line `hyperforge cost` prints for it, indented by two spaces.
    pub fn lines(&self) -> Vec<String> {
        use catalog::time::format_utc;
        let s = &self.schedule;
        let what = match self.kind {
            catalog::capacity::Reservation::CapacityBlock => "Capacity Block",
            catalog::capacity::Reservation::TrainingPlan => "training plan",
        };
        let mut out = vec![format!(
            "  {what} {} ({}): {}-day window {} to {}",
            self.reservation,
            self.path,
            s.days,
            format_utc(s.start),
            format_utc(s.end)
        )];
        let idle = s.idle_minutes.map(|m| {
            format!("{m} min of it serve nothing (cold start, then the drain before the end)")
        });
        out.push(match (self.upfront_fee_usd, self.idle_usd(), idle) {
            (Some(fee), Some(idle_usd), Some(idle)) => {
                format!("    ${fee:.2} paid up front; {idle}: ${idle_usd:.2}")
            }
            (Some(fee), _, _) => format!(
                "    ${fee:.2} paid up front; the minutes serving nothing are not known (no model with an estimated cold start runs there)"
            ),
            (None, _, Some(idle)) => format!(
                "    unpriced: a {what}'s price is set at purchase (give `upfront_fee_usd`); {idle}"
            ),
            (None, _, None) => format!(
                "    unpriced: a {what}'s price is set at purchase (give `upfront_fee_usd`)"
            ),
        });
        out
    }
}

/// Where a served model's weights come from at pod start.
#[derive(Clone, Debug, PartialEq)]
pub struct ServedWeights {
    /// The serving construct's path.
    pub path: String,
    /// The model.
    pub model: String,
    /// Its weight source, for people (`S3, streamed into GPU memory`).
    pub source: &'static str,
    /// The catalog's estimate from node ready to serving, seconds, when the weights' size and
    /// the instance type are known.
    pub cold_start_secs: Option<u64>,
}

/// A copy of a model's weights in a model store.
#[derive(Clone, Debug, PartialEq)]
pub struct StagedCopy {
    /// The staging Job's construct path.
    pub path: String,
    /// The model.
    pub model: String,
    /// Its revision.
    pub revision: String,
    /// The checkpoint's size, bytes, when known.
    pub bytes: Option<u64>,
    /// The catalog's estimate of the copy from the Hub, seconds, when the size is known.
    pub staging_secs: Option<u64>,
    /// S3 Standard storage per month in the stack's region, USD, when priced.
    pub usd_per_month: Option<f64>,
}

impl StackCost {
    /// The storage of the staged copies, USD per month (unpriced copies left out).
    pub fn staged_usd_per_month(&self) -> f64 {
        self.staged
            .iter()
            .filter_map(|c| c.usd_per_month)
            .sum::<f64>()
            + 0.0
    }

    /// The lines describing the weights, indented by two spaces (shared by `hyperforge cost`
    /// and `hyperforge list`).
    pub fn weights_lines(&self) -> Vec<String> {
        let minutes = |secs: u64| secs.div_ceil(60);
        let mut out = Vec::new();
        for w in &self.served {
            out.push(match w.cold_start_secs {
                Some(secs) => format!(
                    "  {} serves {} from {}: about {} min from node ready to serving",
                    w.path,
                    w.model,
                    w.source,
                    minutes(secs)
                ),
                None => format!("  {} serves {} from {}", w.path, w.model, w.source),
            });
        }
        for c in &self.staged {
            let size = c.bytes.map_or(String::new(), |b| {
                format!(" ({:.1} GiB)", catalog::memory::gib(b as f64))
            });
            let time = c.staging_secs.map_or(String::new(), |s| {
                format!(", about {} min once", minutes(s))
            });
            let price = match c.usd_per_month {
                Some(usd) => format!(", ${usd:.2}/month in S3 Standard"),
                None => ", storage not priced in this region".to_owned(),
            };
            out.push(format!(
                "  {} stages {}@{}{size} from the Hub{time}{price}",
                c.path, c.model, c.revision
            ));
        }
        out
    }
}

impl StackCost {
    /// Sum of the priced lines, USD per hour (unpriced lines are left out and listed).
    pub fn usd_per_hour(&self) -> f64 {
        // `+ 0.0`: an empty float sum is -0.0, printed as `$-0.00`.
        self.lines
            .iter()
            .filter_map(CostLine::usd_per_hour)
            .sum::<f64>()
            + 0.0
    }

    /// The hourly figure over 30 days (720 hours).
    pub fn usd_per_30_days(&self) -> f64 {
        self.usd_per_hour() * HOURS_PER_30_DAYS
    }

    /// Whether any line has no price.
    pub fn has_unpriced(&self) -> bool {
        self.lines.iter().any(|l| l.usd_per_hour().is_none())
    }
}

/// The estimate of an app.
#[derive(Clone, Debug, PartialEq)]
pub struct CostReport {
    /// Region of the prices used ([`PRICE_REGION`]).
    pub price_region: &'static str,
    /// Date of the price list ([`PRICE_DATE`]).
    pub price_date: &'static str,
    /// One entry per stack, in the app's order.
    pub stacks: Vec<StackCost>,
    /// What the estimate leaves out.
    pub excluded: Vec<&'static str>,
}

/// A line for `count` instances of catalog type `instance_type` in `region`, shown as
/// `shown`, priced at the catalog's EC2 on-demand price there with `basis`, or unpriced for
/// `unpriced` (or because the catalog has no price in `region`).
fn priced_line(
    path: String,
    instance_type: &str,
    region: &str,
    shown: String,
    count: i64,
    basis: String,
    unpriced: String,
) -> CostLine {
    let count = count.max(0);
    let entry = catalog::instance(instance_type);
    let pricing = match entry.and_then(|i| i.on_demand_usd_per_hour(region)) {
        Some(price) => Pricing::OnDemandEquivalent {
            usd_per_hour: price * count as f64,
            basis,
        },
        None => match entry.and_then(|i| i.on_demand_usd_per_hour_us_east_1) {
            Some(reference) => Pricing::NotPriced {
                reason: format!(
                    "the catalog has no on-demand price for {instance_type} in {region}: it holds {PRICE_REGION} prices only (${:.2}/h there, for reference)",
                    reference * count as f64
                ),
            },
            None => Pricing::NotPriced { reason: unpriced },
        },
    };
    CostLine {
        path,
        instance_type: shown,
        count,
        pricing,
    }
}

/// The line of one capacity claim: EC2 claims at the catalog's on-demand price (a Karpenter
/// pool at its largest size), HyperPod groups at the EC2 on-demand equivalent of their type.
fn claim_line(claim: CapacityClaim, region: &str) -> CostLine {
    let ec2_unpriced = format!(
        "no on-demand price for {} in the catalog (it lists GPU instance types)",
        claim.instance_type
    );
    let (count, basis, unpriced) = match claim.launcher {
        Launcher::Ec2 if claim.provisioned_on_demand => (
            claim.max_count,
            "EC2 on-demand equivalent of the pool's largest size; Capacity Block capacity: its price was set at purchase and is not in the catalog".to_owned(),
            ec2_unpriced,
        ),
        Launcher::Ec2 => match claim.source {
            // Billed for every instance it holds, used or not.
            CapacitySource::CapacityReservation {
                reserved_instance_count: Some(held),
                ..
            } => (
                held.max(claim.count),
                "EC2 on-demand, for every instance the On-Demand Capacity Reservation holds, used or not".to_owned(),
                ec2_unpriced,
            ),
            CapacitySource::CapacityReservation { .. } => (
                claim.count,
                "EC2 on-demand; an On-Demand Capacity Reservation is billed for every instance it holds, used or not (give its instance count)".to_owned(),
                ec2_unpriced,
            ),
            CapacitySource::CapacityBlock { .. } => (
                claim.count,
                "EC2 on-demand equivalent; Capacity Block capacity: its price was set at purchase and is not in the catalog".to_owned(),
                ec2_unpriced,
            ),
            CapacitySource::OnDemand | CapacitySource::TrainingPlan { .. } => {
                (claim.count, "EC2 on-demand".to_owned(), ec2_unpriced)
            }
        },
        Launcher::HyperPod => {
            let capacity = match claim.source {
                CapacitySource::TrainingPlan { .. } | CapacitySource::CapacityBlock { .. } => {
                    "training plan capacity: its price was set at purchase and is not in the catalog"
                }
                CapacitySource::OnDemand | CapacitySource::CapacityReservation { .. } => {
                    "HyperPod on demand: SageMaker ml. prices are not in the catalog"
                }
            };
            (
                claim.count,
                format!("EC2 on-demand equivalent; {capacity}"),
                format!(
                    "no EC2 on-demand price for {} in {PRICE_REGION}; {capacity}",
                    claim.instance_type
                ),
            )
        }
    };
    priced_line(
        claim.path,
        &claim.instance_type,
        region,
        claim.service_instance_type,
        count,
        basis,
        unpriced,
    )
}

/// The reservations with a window among `claims`, each with the cold start of a model served
/// on its instance type (`served_types`).
fn reservations(
    claims: &[CapacityClaim],
    served_types: &[(String, Option<u64>)],
) -> Vec<ReservationCost> {
    claims
        .iter()
        .filter_map(|claim| {
            let reservation = match &claim.source {
                CapacitySource::OnDemand | CapacitySource::CapacityReservation { .. } => {
                    return None
                }
                CapacitySource::CapacityBlock { reservation, .. } => reservation,
                CapacitySource::TrainingPlan { arn, .. } => arn,
            };
            let (kind, _, _) = claim.source.window()?;
            Some(ReservationCost {
                path: claim.path.clone(),
                kind,
                reservation: reservation.clone(),
                schedule: crate::constructs::reservation_schedule(claim, served_types)?,
                upfront_fee_usd: claim.source.upfront_fee_usd(),
            })
        })
        .collect()
}

/// The estimate for every stack of `app`.
pub fn estimate(app: &App) -> CostReport {
    let stacks = app
        .stacks()
        .iter()
        .map(|stack| {
            let mut lines = Vec::new();
            let mut served = Vec::new();
            let mut staged = Vec::new();
            // Each construct's facts, once.
            let placements = Placements::new(stack);
            let all: Vec<_> = placements.all().map(|p| (p.facts(), p)).collect();
            let claims: Vec<CapacityClaim> = all
                .iter()
                .flat_map(|(facts, _)| facts.capacity.iter().cloned())
                .collect();
            let mut served_types: Vec<(String, Option<u64>)> = Vec::new();
            for (facts, placed) in all {
                for claim in facts.capacity {
                    lines.push(claim_line(claim, stack.region()));
                }
                for m in &facts.served_models {
                    served_types.push((m.instance_type.to_owned(), m.cold_start_secs()));
                    served.push(ServedWeights {
                        path: placed.cx.path.to_owned(),
                        model: m.server.model_id().to_owned(),
                        source: m.server.weight_source(m.hyperpod).label(),
                        cold_start_secs: m.cold_start_secs(),
                    });
                }
                for st in facts.weight_stagings {
                    staged.push(StagedCopy {
                        path: placed.cx.path.to_owned(),
                        staging_secs: st.weight_bytes.and_then(|b| {
                            crate::constructs::weights::staging_estimate(
                                b,
                                &st.node_selector,
                                &claims,
                            )
                            .map(|(secs, _)| secs)
                        }),
                        usd_per_month: st.weight_bytes.and_then(|b| {
                            catalog::storage_usd_per_month(
                                b,
                                catalog::StoreKind::S3Standard,
                                stack.region(),
                            )
                        }),
                        bytes: st.weight_bytes,
                        model: st.model_id,
                        revision: st.revision,
                    });
                }
            }
            let reservations = reservations(&claims, &served_types);
            StackCost {
                stack: stack.name().to_owned(),
                region: stack.region().to_owned(),
                lines,
                served,
                staged,
                reservations,
            }
        })
        .collect();
    CostReport {
        price_region: PRICE_REGION,
        price_date: PRICE_DATE,
        stacks,
        excluded: vec![
            "NAT gateway and EKS control-plane hourly fees (no sourced price in the catalog)",
            "EBS volumes, data transfer, S3 beyond the staged weights, CloudWatch Logs and KMS",
            "Capacity Block and training-plan purchase prices (set at purchase), but for a block's upfront fee when given",
        ],
    }
}

impl fmt::Display for CostReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Cost estimate from EC2 on-demand prices of each stack's region; the catalog holds {} (AWS Price List, generated {})",
            self.price_region, self.price_date
        )?;
        for stack in &self.stacks {
            writeln!(f, "\nstack {} ({})", stack.stack, stack.region)?;
            for line in &stack.lines {
                match &line.pricing {
                    Pricing::OnDemandEquivalent {
                        usd_per_hour,
                        basis,
                    } => writeln!(
                        f,
                        "  {} x {} at {}: ${usd_per_hour:.2}/h ({basis})",
                        line.count, line.instance_type, line.path
                    )?,
                    Pricing::NotPriced { reason } => writeln!(
                        f,
                        "  {} x {} at {}: not priced ({reason})",
                        line.count, line.instance_type, line.path
                    )?,
                }
            }
            writeln!(
                f,
                "  total, on-demand equivalent: ${:.2}/h, ${:.2} per 30 days{}",
                stack.usd_per_hour(),
                stack.usd_per_30_days(),
                if stack.has_unpriced() {
                    " (unpriced lines left out)"
                } else {
                    ""
                }
            )?;
            if !stack.reservations.is_empty() {
                writeln!(f, "  reservations (UTC):")?;
                for line in stack.reservations.iter().flat_map(ReservationCost::lines) {
                    writeln!(f, "  {line}")?;
                }
            }
            if !stack.served.is_empty() || !stack.staged.is_empty() {
                writeln!(f, "  weights:")?;
                for line in stack.weights_lines() {
                    writeln!(f, "  {line}")?;
                }
            }
        }
        write!(f, "\nnot included: {}", self.excluded.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixture block: 2026-12-10 04:55 to 2026-12-17 11:30 UTC, a 95-minute cold start,
    /// paid $100,000 up front.
    #[test]
    fn a_windows_cost_and_its_idle_minutes_come_from_the_upfront_fee() {
        let start = catalog::time::parse_utc_minutes("2026-12-10T04:55:00Z").unwrap();
        let end = catalog::time::parse_utc_minutes("2026-12-17T11:30:00Z").unwrap();
        let mut r = ReservationCost {
            path: "s/Gpu".into(),
            kind: catalog::capacity::Reservation::CapacityBlock,
            reservation: "cr-0123456789abcdef0".into(),
            schedule: catalog::capacity::block_schedule(start, end, Some(95), 1),
            upfront_fee_usd: Some(100_000.0),
        };
        assert_eq!(r.window_minutes(), 7 * 1440 + 6 * 60 + 35);
        assert_eq!(r.schedule.idle_minutes, Some(95 + 41));
        let idle = r.idle_usd().unwrap();
        assert!((idle - 100_000.0 * 136.0 / 10_475.0).abs() < 1e-6, "{idle}");
        assert_eq!(
            r.lines(),
            [
                "  Capacity Block cr-0123456789abcdef0 (s/Gpu): 7-day window 2026-12-10T04:55Z to 2026-12-17T11:30Z",
                "    $100000.00 paid up front; 136 min of it serve nothing (cold start, then the drain before the end): $1298.33",
            ]
        );
        // Without a fee the window is unpriced, never $0.00.
        r.upfront_fee_usd = None;
        assert!(
            r.lines()[1].starts_with("    unpriced: "),
            "{:?}",
            r.lines()
        );
        assert!(!r.lines().concat().contains("$0.00"));
    }

    #[test]
    fn a_stack_outside_the_priced_region_is_not_priced() {
        let report = estimate(&crate::reference::kimi_k3_hyperpod());
        let line = &report.stacks[0].lines[0];
        assert_eq!(report.stacks[0].region, "us-west-2");
        let Pricing::NotPriced { reason } = &line.pricing else {
            panic!("us-west-2 priced from us-east-1: {line:?}");
        };
        assert!(reason.contains("us-west-2") && reason.contains("$142.42/h there, for reference"));
        assert_eq!(report.stacks[0].usd_per_hour(), 0.0);
        assert!(report.stacks[0].has_unpriced());
    }

    #[test]
    fn reference_stack_costs_one_p6_b300() {
        use crate::constructs::{
            Capacity, EksCluster, HyperPodCluster, InstanceGroup, LifecycleScripts,
        };
        // The HyperPod reference's capacity, in the region the catalog prices.
        let mut stack = crate::app::Stack::new("east", "us-east-1");
        let f = stack.cloudformation_stage("foundation");
        let eks = stack.add(f, EksCluster::new("Eks", "east"));
        let lifecycle = stack.add(f, LifecycleScripts::new("Lifecycle"));
        stack.add(
            f,
            HyperPodCluster::new("HyperPod", "east", &eks.cluster, &lifecycle).instance_group(
                InstanceGroup::new("p6-b300", "ml.p6-b300.48xlarge").capacity(
                    Capacity::training_plan(
                        "arn:aws:sagemaker:us-east-1:111122223333:training-plan/east",
                        "use1-az2",
                    ),
                ),
            ),
        );
        let report = estimate(&crate::app::App::new().stack(stack));
        assert_eq!(report.stacks.len(), 1);
        let stack = &report.stacks[0];
        assert_eq!(stack.lines.len(), 1);
        assert_eq!(stack.lines[0].instance_type, "ml.p6-b300.48xlarge");
        assert!((stack.usd_per_hour() - 142.416).abs() < 1e-9);
        assert!((stack.usd_per_30_days() - 102_539.52).abs() < 1e-6);
        let text = report.to_string();
        assert!(text.contains("us-east-1") && text.contains("2026-07-20"));
        assert!(text.contains("on-demand equivalent"));
        assert!(text.contains("set at purchase"));
        assert!(text.contains("NAT gateway"));
    }
}
