//! EKS managed node groups: a small CPU system group for add-ons and controllers, and GPU
//! groups whose capacity is a typed choice: an EC2 Capacity Block (a custom launch template
//! with market type `capacity-block` targeting the reservation, node group capacity type
//! `CAPACITY_BLOCK`, subnets only in the block's zone) or on-demand. Optional EFA interfaces laid
//! out over the instance's network cards.

use super::stack_file::Ints;
use super::{CapacityClaim, CapacitySource, Construct, Context, Facts, Launcher, PodStorage};
use crate::app::text::{Pseudo, Text};
use crate::app::{kind, AttrRef, Ref, Stack};
use crate::catalog::{self, capacity::Reservation, regions::AzId};
use crate::diagnostics::{Code, Diagnostics};
use crate::resources::iam::service_trust;
use crate::resources::plan::Step;
use crate::resources::{
    self, LaunchTemplate, MetadataOptions, NetworkInterface, NodeGroup, ReservationTarget,
    ReservedMarket, Role, RootVolume, Scope, StackInput,
};
use std::collections::BTreeMap;

/// The most nodes one EKS managed node group holds (the EKS service quota "Nodes per managed
/// node group").
pub const MAX_NODES_PER_GROUP: i64 = 450;

/// A group's minimum and desired sizes: 0 to [`MAX_NODES_PER_GROUP`].
pub const GROUP_SIZE: Ints = Ints::new(0, MAX_NODES_PER_GROUP);

/// A group's maximum size: 1 to [`MAX_NODES_PER_GROUP`].
pub const GROUP_MAX_SIZE: Ints = Ints::new(1, MAX_NODES_PER_GROUP);

/// A node's root volume, GiB: gp3 volumes are 1 GiB to 16 TiB; the node's images and
/// containerd data live here, so below 20 GiB the node cannot start.
pub const ROOT_VOLUME_GIB: Ints = Ints::new(20, 16384);

/// The instance counts a training plan or a Capacity Block can have, from the smallest to the
/// largest of [`RESERVABLE_COUNTS`](crate::catalog::capacity::RESERVABLE_COUNTS).
pub const RESERVABLE_COUNT_RANGE: Ints = {
    use crate::catalog::capacity::RESERVABLE_COUNTS as C;
    Ints::new(C[0], C[C.len() - 1])
};

/// An EC2 Capacity Block for ML, bought in advance (it cannot be cancelled or refunded).
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityBlock {
    /// The reservation id (`cr-0123456789abcdef0`).
    pub reservation_id: String,
    /// The zone id of the block (its instances launch only there).
    pub availability_zone_id: String,
    /// Instances in the block, when known (caps the group's size).
    pub instance_count: Option<u32>,
    /// Buy the block from this offering (Terraform only), when asked for.
    pub purchase: Option<CapacityBlockPurchase>,
    /// When the block holds its instances, when given: its timeline (nodes, serving, drain)
    /// is derived from it.
    pub window: Option<ReservationWindow>,
    /// What the block cost, paid up front, USD, when given: `hyperforge cost` shows the
    /// window's cost and the part paid while not serving.
    pub upfront_fee_usd: Option<f64>,
}

impl CapacityBlock {
    /// The block `reservation_id` in zone `az_id`, of `instances` instances.
    pub fn held(
        reservation_id: impl Into<String>,
        az_id: impl Into<String>,
        instances: u32,
    ) -> Self {
        CapacityBlock {
            reservation_id: reservation_id.into(),
            availability_zone_id: az_id.into(),
            instance_count: Some(instances),
            purchase: None,
            window: None,
            upfront_fee_usd: None,
        }
    }

    /// When the block holds its instances (RFC 3339 in UTC, `StartDate` and `EndDate` of
    /// `aws ec2 describe-capacity-reservations`): the reservation's timeline is derived from it.
    pub fn during(mut self, start: impl Into<String>, end: impl Into<String>) -> Self {
        self.window = Some(ReservationWindow::new(start, end));
        self
    }

    /// The block's window (see [`CapacityBlock::during`]), drained at a time of its own (see
    /// [`ReservationWindow::drained_by`]): the endpoint stops there and the group's schedule
    /// scales it to zero.
    pub fn within(mut self, window: ReservationWindow) -> Self {
        self.window = Some(window);
        self
    }

    /// What the block cost, paid up front (the `UpfrontFee` of its offering), USD.
    pub fn upfront_fee_usd(mut self, usd: f64) -> Self {
        self.upfront_fee_usd = Some(usd);
        self
    }
}

impl From<CapacityBlock> for NodeCapacity {
    fn from(block: CapacityBlock) -> Self {
        NodeCapacity::CapacityBlock(block)
    }
}

/// An EC2 On-Demand Capacity Reservation (`targeted`): on-demand instances of one type in one
/// zone, held for the account and billed at the on-demand rate whether instances run in it or
/// not, until it is cancelled or reaches its end date. Instances outlive it: when it ends they
/// keep running as plain on-demand instances (EC2 User Guide, "On-Demand Capacity
/// Reservations"), so nothing is drained.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OnDemandCapacityReservation {
    /// The reservation id (`cr-0123456789abcdef0`).
    pub reservation_id: String,
    /// The zone id of the reservation (its instances launch only there).
    pub availability_zone_id: String,
    /// Instances the reservation holds, when known (caps the group's size).
    pub instance_count: Option<u32>,
}

impl OnDemandCapacityReservation {
    /// The reservation `reservation_id` in zone `az_id`, of `instances` instances.
    pub fn held(
        reservation_id: impl Into<String>,
        az_id: impl Into<String>,
        instances: u32,
    ) -> Self {
        OnDemandCapacityReservation {
            reservation_id: reservation_id.into(),
            availability_zone_id: az_id.into(),
            instance_count: Some(instances),
        }
    }
}

impl From<OnDemandCapacityReservation> for NodeCapacity {
    fn from(reservation: OnDemandCapacityReservation) -> Self {
        NodeCapacity::CapacityReservation(reservation)
    }
}

/// The most instances an On-Demand Capacity Reservation holds as hyperforge checks it: a node
/// group's own maximum, since the group targets one reservation.
pub const ODCR_INSTANCES: Ints = Ints::new(1, MAX_NODES_PER_GROUP);

/// When a reservation holds its instances: RFC 3339 times in UTC, as
/// `aws ec2 describe-capacity-reservations` shows a block's `StartDate` and `EndDate`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReservationWindow {
    /// The start (`2026-12-10T04:55:00Z`).
    pub start: String,
    /// The end (`2026-12-17T11:30:00Z`).
    pub end: String,
    /// When the endpoint stops taking requests and its nodes are scaled to zero; `None`: as
    /// late as the service's termination lead and the servers' grace allow.
    pub drain_by: Option<String>,
}

impl ReservationWindow {
    /// The window from `start` to `end`.
    pub fn new(start: impl Into<String>, end: impl Into<String>) -> Self {
        ReservationWindow {
            start: start.into(),
            end: end.into(),
            drain_by: None,
        }
    }

    /// The window drained at `at` (RFC 3339 in UTC) rather than as late as it may be: no later
    /// than the servers' grace before EKS's scale-down (`HF0335`).
    pub fn drained_by(mut self, at: impl Into<String>) -> Self {
        self.drain_by = Some(at.into());
        self
    }

    /// The drain time given, in UTC minutes since 1970, when it parses.
    pub fn drain_by_minutes(&self) -> Option<i64> {
        crate::catalog::time::parse_utc_minutes(self.drain_by.as_deref()?).ok()
    }

    /// Start and end in UTC minutes since 1970, when both parse and the end is later.
    pub fn minutes(&self) -> Option<(i64, i64)> {
        let start = crate::catalog::time::parse_utc_minutes(&self.start).ok()?;
        let end = crate::catalog::time::parse_utc_minutes(&self.end).ok()?;
        (end > start).then_some((start, end))
    }

    /// Every problem of the window of a Capacity Block (`HF0331`, `HF0332`, `HF0333`,
    /// `HF0335`), at `field` (`capacity_block.window`) of `path`.
    pub fn check_capacity_block(&self, path: &str, field: &str, ds: &mut Diagnostics) {
        self.check(Reservation::CapacityBlock, path, field, ds)
    }

    /// Every problem of the window of a training plan (`HF0331`, `HF0336`, `HF0335`), at
    /// `field` (`training_plan.window`) of `path`.
    pub fn check_training_plan(&self, path: &str, field: &str, ds: &mut Diagnostics) {
        self.check(Reservation::TrainingPlan, path, field, ds)
    }

    /// Every problem of the window of a reservation of kind `kind`.
    fn check(&self, kind: Reservation, path: &str, field: &str, ds: &mut Diagnostics) {
        use crate::catalog::capacity::{block_days, CAPACITY_BLOCK_END_MINUTE};
        use crate::catalog::time::{format_utc, parse_utc_minutes, END_YEARS};
        let shown_by = match kind {
            Reservation::CapacityBlock => "aws ec2 describe-capacity-reservations",
            Reservation::TrainingPlan => "aws sagemaker describe-training-plan",
        };
        let mut parsed = |which: &str, text: &str| match parse_utc_minutes(text) {
            Ok(m) => Some(m),
            Err(problem) => {
                ds.report_field(
                    Code::InvalidReservationWindow,
                    path,
                    &format!("{field}.{which}"),
                    format!("{which} `{text}` {problem}"),
                    format!(
                        "give RFC 3339 in UTC between {} and {}, as `{shown_by}` shows it (`2026-12-17T11:30:00Z`)",
                        END_YEARS.0, END_YEARS.1
                    ),
                );
                None
            }
        };
        let (start, end) = (parsed("start", &self.start), parsed("end", &self.end));
        let drain_by = self.drain_by.as_deref().map(|t| (t, parsed("drain_by", t)));
        if let (Reservation::CapacityBlock, Some(end)) = (kind, end) {
            if end.rem_euclid(1440) != CAPACITY_BLOCK_END_MINUTE {
                ds.report_field(
                    Code::CapacityBlockEndTime,
                    path,
                    &format!("{field}.end"),
                    format!("the block ends at `{}`, not at 11:30 UTC", self.end),
                    "every Capacity Block ends at 11:30 UTC: copy `EndDate` from aws ec2 describe-capacity-reservations",
                );
            }
        }
        let (Some(start), Some(end)) = (start, end) else {
            return;
        };
        let (what, duration_code, durations) = match kind {
            Reservation::CapacityBlock => (
                "block",
                Code::CapacityBlockDuration,
                "Capacity Blocks last 1 to 14 days, or a multiple of 7 days up to 182: check the dates",
            ),
            Reservation::TrainingPlan => (
                "plan",
                Code::TrainingPlanDuration,
                "training plans last 1 to 182 whole days: copy `StartTime` and `EndTime` from aws sagemaker describe-training-plan",
            ),
        };
        if end <= start {
            ds.report_field(
                Code::InvalidReservationWindow,
                path,
                field,
                format!(
                    "the window ends (`{}`) before it starts (`{}`)",
                    self.end, self.start
                ),
                format!("give the {what}'s start and end as {shown_by} shows them"),
            );
        } else if !kind.is_duration(block_days(start, end)) {
            ds.report_field(
                duration_code,
                path,
                field,
                format!(
                    "the window from `{}` to `{}` lasts about {} days",
                    self.start,
                    self.end,
                    block_days(start, end)
                ),
                durations,
            );
        }
        let Some((text, Some(at))) = drain_by else {
            return;
        };
        let grace = super::vllm::objects::drain_minutes();
        let latest =
            crate::catalog::capacity::reservation_schedule(kind, start, end, None, grace).drain_by;
        let scale_down = match kind {
            Reservation::CapacityBlock => "EKS scales the block's nodes to zero",
            Reservation::TrainingPlan => "SageMaker begins terminating the plan's instances",
        };
        let problem = if at > latest {
            Some(format!(
                "drain by `{text}` is after {}: {scale_down} at {} ({} minutes before the end), and the servers need {grace} minute(s) before that to finish their requests",
                format_utc(latest),
                format_utc(latest + grace),
                kind.scale_down_lead_minutes(),
            ))
        } else if at <= start {
            Some(format!(
                "drain by `{text}` is not after the {what} opens (`{}`)",
                self.start
            ))
        } else {
            None
        };
        if let Some(problem) = problem {
            ds.report_field(
                Code::DrainAfterScaleDown,
                path,
                &format!("{field}.drain_by"),
                problem,
                format!(
                    "drain between the start and {}, or leave `drain_by` out to drain as late as that",
                    format_utc(latest)
                ),
            );
        }
    }
}

/// A `window` object of a stack file (`start`, `end`, `drain_by`); `None` when it is absent or
/// lacks its start or end (reported).
pub(crate) fn reservation_window(
    r: &mut dyn super::stack_file::FieldReader,
    field: &'static super::stack_file::Field,
) -> Option<ReservationWindow> {
    super::stack_file::object(r, field, |w| {
        use reservation_window_fields as w_;
        let drain_by = w.text(&w_::DRAIN_BY);
        let window = ReservationWindow::new(w.text(&w_::START)?, w.text(&w_::END)?);
        Some(match drain_by {
            Some(at) => window.drained_by(at),
            None => window,
        })
    })
    .flatten()
}

/// Buying a Capacity Block from an offering (`aws ec2 describe-capacity-block-offerings`).
/// The whole price is charged at purchase; a block cannot be cancelled or refunded, and
/// destroying the Terraform resource only removes it from state. CloudFormation has no resource
/// type for the purchase: there the reservation id stays a parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapacityBlockPurchase {
    /// The offering id (`cb-0123456789abcdef0`).
    pub offering_id: String,
    /// The explicit acknowledgement that the purchase is final.
    pub acknowledged_non_refundable: bool,
}

impl CapacityBlockPurchase {
    /// A purchase of offering `offering_id`, not yet acknowledged (refused until
    /// [`CapacityBlockPurchase::non_refundable`] is called).
    pub fn new(offering_id: impl Into<String>) -> Self {
        CapacityBlockPurchase {
            offering_id: offering_id.into(),
            acknowledged_non_refundable: false,
        }
    }

    /// Acknowledges that the block is paid up front and cannot be cancelled or refunded.
    pub fn non_refundable(mut self) -> Self {
        self.acknowledged_non_refundable = true;
        self
    }
}

/// Where a node group's instances come from.
///
/// # Examples
///
/// ```
/// use hyperforge::constructs::{CapacityBlockPurchase, NodeCapacity};
///
/// // A block you hold: its reservation id, its zone id and (for the checks) its size.
/// let held = NodeCapacity::capacity_block_of("cr-0123456789abcdef0", "usw2-az2", 1);
/// let NodeCapacity::CapacityBlock(block) = &held else { unreachable!() };
/// assert_eq!(block.instance_count, Some(1));
/// // A block the Terraform module buys from an offering: charged in full, never refunded,
/// // so refused unless acknowledged.
/// let bought = NodeCapacity::buy_capacity_block(
///     CapacityBlockPurchase::new("cb-0123456789abcdef0").non_refundable(),
///     "usw2-az2",
///     1,
/// );
/// assert_ne!(bought, held);
/// assert_eq!(NodeCapacity::default(), NodeCapacity::OnDemand);
/// ```
#[derive(Clone, Debug, PartialEq, Default)]
pub enum NodeCapacity {
    /// On-demand instances.
    #[default]
    OnDemand,
    /// A Capacity Block.
    CapacityBlock(CapacityBlock),
    /// An On-Demand Capacity Reservation.
    CapacityReservation(OnDemandCapacityReservation),
}

impl NodeCapacity {
    /// Capacity Block `reservation_id` in zone `az_id`.
    pub fn capacity_block(reservation_id: impl Into<String>, az_id: impl Into<String>) -> Self {
        NodeCapacity::CapacityBlock(CapacityBlock {
            reservation_id: reservation_id.into(),
            availability_zone_id: az_id.into(),
            instance_count: None,
            purchase: None,
            window: None,
            upfront_fee_usd: None,
        })
    }

    /// Capacity Block with its instance count known.
    pub fn capacity_block_of(
        reservation_id: impl Into<String>,
        az_id: impl Into<String>,
        instances: u32,
    ) -> Self {
        CapacityBlock::held(reservation_id, az_id, instances).into()
    }

    /// A Capacity Block bought by the Terraform module from `purchase` (in zone `az_id`, of
    /// `instances` instances). Refused unless the purchase is acknowledged as non-refundable.
    pub fn buy_capacity_block(
        purchase: CapacityBlockPurchase,
        az_id: impl Into<String>,
        instances: u32,
    ) -> Self {
        NodeCapacity::CapacityBlock(CapacityBlock {
            reservation_id: String::new(),
            availability_zone_id: az_id.into(),
            instance_count: Some(instances),
            purchase: Some(purchase),
            window: None,
            upfront_fee_usd: None,
        })
    }
}

/// The EKS-optimized AMI family of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AmiType {
    /// Amazon Linux 2023, x86-64.
    Al2023Standard,
    /// Amazon Linux 2023 with the NVIDIA driver and container toolkit.
    Al2023Nvidia,
}

impl AmiType {
    /// The EKS API value.
    pub fn as_str(self) -> &'static str {
        match self {
            AmiType::Al2023Standard => "AL2023_x86_64_STANDARD",
            AmiType::Al2023Nvidia => "AL2023_x86_64_NVIDIA",
        }
    }
}

/// A node taint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeTaint {
    /// Key.
    pub key: String,
    /// Value.
    pub value: String,
}

/// Label every GPU node carries (the device plugin's node selector).
pub const GPU_PRESENT_LABEL: &str = "nvidia.com/gpu.present";
/// Taint every GPU node carries (effect NoSchedule), so only GPU workloads land there.
pub const GPU_TAINT: &str = "nvidia.com/gpu";

/// nodeadm configuration (MIME user data) that assembles the instance's local NVMe disks into
/// RAID 0 and puts kubelet and containerd storage there: tens of TB on GPU instances, for
/// container images and model caches. Both backends emit it verbatim.
pub const RAID0_NODE_CONFIG: &str = "MIME-Version: 1.0
Content-Type: multipart/mixed; boundary=\"HYPERFORGE\"

--HYPERFORGE
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  instance:
    localStorage:
      strategy: RAID0

--HYPERFORGE--
";

/// One managed node group.
#[derive(Clone, Debug)]
pub struct ManagedNodeGroup {
    id: String,
    cluster: Ref<kind::EksCluster>,
    instance_type: String,
    subnets: Vec<Ref<kind::Subnet>>,
    security_groups: Vec<Ref<kind::SecurityGroup>>,
    capacity: NodeCapacity,
    ami: AmiType,
    min: i64,
    desired: i64,
    max: i64,
    root_volume_gb: i64,
    labels: BTreeMap<String, String>,
    taints: Vec<NodeTaint>,
    efa: bool,
    local_nvme_raid0: bool,
}

/// Handles to a group's resources.
#[derive(Clone, Debug)]
pub struct NodeGroupHandle {
    /// The nodes' IAM role.
    pub role: Ref<kind::Role>,
    /// The instance type.
    pub instance_type: String,
}

impl ManagedNodeGroup {
    /// The system group: two `m7i.xlarge` on-demand nodes for cluster add-ons and controllers.
    pub fn system<'a>(
        id: impl Into<String>,
        cluster: &Ref<kind::EksCluster>,
        subnets: impl IntoIterator<Item = &'a Ref<kind::Subnet>>,
    ) -> Self {
        ManagedNodeGroup {
            id: id.into(),
            cluster: cluster.clone(),
            instance_type: "m7i.xlarge".to_owned(),
            subnets: subnets.into_iter().cloned().collect(),
            security_groups: Vec::new(),
            capacity: NodeCapacity::OnDemand,
            ami: AmiType::Al2023Standard,
            min: 2,
            desired: 2,
            max: 4,
            root_volume_gb: 100,
            labels: BTreeMap::from([("hyperforge.io/node-role".to_owned(), "system".to_owned())]),
            taints: Vec::new(),
            efa: false,
            local_nvme_raid0: false,
        }
    }

    /// A GPU group of `instance_type` (EC2 name): NVIDIA AMI, the GPU label and taint, local
    /// NVMe as RAID 0 for container images and model caches, one node, on-demand.
    ///
    /// # Examples
    ///
    /// One p6-b300 from a Capacity Block, in the block's zone (the network's GPU subnet). The
    /// group is created at size 0 and named, so the runbook can scale it once the block is
    /// active:
    ///
    /// ```
    /// use hyperforge::app::Stack;
    /// use hyperforge::constructs::*;
    ///
    /// let mut stack = Stack::new("demo", "us-west-2");
    /// let foundation = stack.cloudformation_stage("foundation");
    /// let network = stack.add(foundation, Network::new("Network").gpu_subnet("usw2-az2"));
    /// let eks = stack.add(
    ///     foundation,
    ///     EksCluster::new("Eks", "demo").subnets(&network.private_subnets).vpc(&network.vpc),
    /// );
    /// let group = ManagedNodeGroup::gpu("GpuNodes", &eks.cluster, "p6-b300.48xlarge", network.gpu_subnet.iter())
    ///     .capacity(NodeCapacity::capacity_block_of("cr-0123456789abcdef0", "usw2-az2", 1));
    /// assert_eq!(group.ami(), AmiType::Al2023Nvidia);
    /// assert_eq!(group.node_group_name("demo"), "demo-gpunodes");
    /// let nodes = stack.cloudformation_stage("nodes");
    /// let handle = stack.add(nodes, group);
    /// assert_eq!(handle.instance_type, "p6-b300.48xlarge");
    /// ```
    pub fn gpu<'a>(
        id: impl Into<String>,
        cluster: &Ref<kind::EksCluster>,
        instance_type: impl Into<String>,
        subnets: impl IntoIterator<Item = &'a Ref<kind::Subnet>>,
    ) -> Self {
        ManagedNodeGroup {
            id: id.into(),
            cluster: cluster.clone(),
            instance_type: instance_type.into(),
            subnets: subnets.into_iter().cloned().collect(),
            security_groups: Vec::new(),
            capacity: NodeCapacity::OnDemand,
            ami: AmiType::Al2023Nvidia,
            min: 0,
            desired: 1,
            max: 1,
            root_volume_gb: 200,
            labels: BTreeMap::from([(GPU_PRESENT_LABEL.to_owned(), "true".to_owned())]),
            taints: vec![NodeTaint {
                key: GPU_TAINT.to_owned(),
                value: "true".to_owned(),
            }],
            efa: false,
            local_nvme_raid0: true,
        }
    }

    /// Where the instances come from.
    pub fn capacity(mut self, capacity: impl Into<NodeCapacity>) -> Self {
        self.capacity = capacity.into();
        self
    }

    /// Scaling sizes. A Capacity Block group may sit at 0 until the block is active.
    pub fn scaling(mut self, min: i64, desired: i64, max: i64) -> Self {
        self.min = min;
        self.desired = desired;
        self.max = max;
        self
    }

    /// Adds a security group to the nodes (besides the cluster's own).
    pub fn security_group(mut self, group: &Ref<kind::SecurityGroup>) -> Self {
        self.security_groups.push(group.clone());
        self
    }

    /// Root volume size in GiB.
    pub fn root_volume_gb(mut self, gb: i64) -> Self {
        self.root_volume_gb = gb;
        self
    }

    /// Adds a node label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// EFA interfaces on every EFA-capable network card (multi-node tensor or expert
    /// parallelism; single-node TP 8 does not need them). Off by default.
    pub fn efa(mut self, enabled: bool) -> Self {
        self.efa = enabled;
        self
    }

    /// The cluster.
    pub fn cluster(&self) -> &Ref<kind::EksCluster> {
        &self.cluster
    }

    /// The instance type (EC2 name).
    pub fn instance_type(&self) -> &str {
        self.instance_type
            .strip_prefix("ml.")
            .unwrap_or(&self.instance_type)
    }

    /// Subnets.
    pub fn subnet_refs(&self) -> &[Ref<kind::Subnet>] {
        &self.subnets
    }

    /// Extra security groups.
    pub fn security_group_refs(&self) -> &[Ref<kind::SecurityGroup>] {
        &self.security_groups
    }

    /// Capacity source.
    pub fn capacity_source(&self) -> &NodeCapacity {
        &self.capacity
    }

    /// AMI family.
    pub fn ami(&self) -> AmiType {
        self.ami
    }

    /// The EKS name of the group in stack `stack` (`kimi-k3-eks-gpunodes`), set on Capacity
    /// Block groups so the runbook can scale them once the block is active. (A named group
    /// cannot be replaced in place by CloudFormation: a change that replaces it, such as its
    /// subnets, needs the stack's group deleted first.)
    pub fn node_group_name(&self, stack: &str) -> String {
        let mut name: String = format!("{stack}-{}", self.id.to_ascii_lowercase())
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        // EKS node group names: at most 63 characters.
        name = crate::app::fit_name(&name, 63);
        name
    }

    /// The template parameter (Terraform: the snake_case variable) holding the Capacity
    /// Block's reservation id.
    pub fn reservation_input_name(&self) -> String {
        format!("{}CapacityReservationId", crate::app::logical_id(&self.id))
    }

    /// Whether the group's instances come from a Capacity Block (created at size 0, scaled
    /// once the block is active).
    pub fn is_capacity_block(&self) -> bool {
        matches!(self.capacity, NodeCapacity::CapacityBlock(_))
    }

    /// (min, desired, max); a Capacity Block group is created at 0 and scaled to `desired`
    /// once its block is active.
    pub fn sizes(&self) -> (i64, i64, i64) {
        (self.min, self.desired, self.max)
    }

    /// Root volume GiB.
    pub fn root_volume(&self) -> i64 {
        self.root_volume_gb
    }

    /// Labels.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.labels
    }

    /// Taints (effect NoSchedule).
    pub fn taints(&self) -> &[NodeTaint] {
        &self.taints
    }

    /// Whether EFA interfaces are attached.
    pub fn efa_enabled(&self) -> bool {
        self.efa
    }

    /// Whether local NVMe is assembled into RAID 0 for kubelet and containerd.
    pub fn local_nvme_raid0(&self) -> bool {
        self.local_nvme_raid0
            && catalog::instance(self.instance_type()).is_some_and(|i| i.local_nvme_gb > 0)
    }

    /// The EFA interface layout: (network card index, device index, interface type), per the
    /// EC2 rule: the primary ENA interface on card 0 device 0; EFA-only interfaces on the other
    /// cards at device 0; on card 0 too (device 1) when every card carries an EFA.
    pub fn efa_layout(&self) -> Vec<(i64, i64, &'static str)> {
        let Some(it) = catalog::instance(self.instance_type()) else {
            return Vec::new();
        };
        let mut layout = vec![(0, 0, "interface")];
        if !self.efa || it.efa_max == 0 {
            return layout;
        }
        let card0_has_efa = it.efa_max >= it.network_cards;
        if card0_has_efa {
            layout.push((0, 1, "efa-only"));
        }
        let others = if card0_has_efa {
            it.efa_max - 1
        } else {
            it.efa_max
        };
        for card in 1..=i64::from(others.min(it.network_cards.saturating_sub(1))) {
            layout.push((card, 0, "efa-only"));
        }
        layout
    }

    pub(crate) fn references(&self) -> Vec<AttrRef> {
        let mut refs = vec![self.cluster.name()];
        refs.extend(self.subnets.iter().map(|s| s.id()));
        refs.extend(self.security_groups.iter().map(|g| g.id()));
        refs
    }

    pub(crate) fn validate(&self, stack: &Stack, path: &str, ds: &mut Diagnostics) {
        if !ROOT_VOLUME_GIB.contains(self.root_volume_gb) {
            ds.report_field(
                Code::InvalidVolumeSize,
                path,
                "root_volume_gb",
                format!("root volume of {} GiB is out of range", self.root_volume_gb),
                format!("use {} GiB; 100 GiB for system nodes and 200 GiB for GPU nodes are the defaults", ROOT_VOLUME_GIB.describe()),
            );
        }
        let instance = catalog::instance(self.instance_type());
        let gpus = instance.map_or(0, |i| i.gpu_count);
        if instance.is_none()
            && (self.ami == AmiType::Al2023Nvidia
                || !matches!(self.capacity, NodeCapacity::OnDemand))
        {
            ds.report_field(
                Code::UnknownInstanceType,
                path,
                "instance_type",
                format!(
                    "instance type `{}` is not in the catalog",
                    self.instance_type
                ),
                format!(
                    "GPU and Capacity Block groups need a catalog type; known: {}",
                    catalog::instances()
                        .iter()
                        .map(|i| i.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
        if gpus > 0 && self.ami != AmiType::Al2023Nvidia {
            ds.report(
                Code::GpuAmiRequired,
                path,
                format!(
                    "{} has {gpus} GPUs but the group uses {}",
                    self.instance_type,
                    self.ami.as_str()
                ),
                "use `ManagedNodeGroup::gpu`, which selects AL2023_x86_64_NVIDIA",
            );
        }
        if !(GROUP_SIZE.contains(self.min)
            && GROUP_SIZE.contains(self.desired)
            && GROUP_MAX_SIZE.contains(self.max)
            && self.min <= self.desired
            && self.desired <= self.max)
        {
            ds.report_field(
                Code::InvalidScaling,
                path,
                "scaling",
                format!("scaling min {} / desired {} / max {} is not ordered or above {MAX_NODES_PER_GROUP}", self.min, self.desired, self.max),
                format!("use 0 <= min <= desired <= max, 1 <= max <= {MAX_NODES_PER_GROUP} (EKS's nodes per managed node group); desired 0 is fine until a Capacity Block is active"),
            );
        }
        if self.subnets.is_empty() {
            ds.report(
                Code::UnknownReference,
                path,
                "the node group has no subnets",
                "pass the network's private subnets, or its GPU subnet for a Capacity Block",
            );
        }
        if self.efa && instance.is_some_and(|i| i.efa_max == 0) {
            ds.report_field(
                Code::EfaUnsupported,
                path,
                "efa",
                format!("{} has no EFA interfaces", self.instance_type),
                "turn EFA off or choose an EFA-capable type",
            );
        }
        if let NodeCapacity::CapacityReservation(odcr) = &self.capacity {
            self.check_capacity_reservation(stack, odcr, path, ds);
        }
        if let NodeCapacity::CapacityBlock(block) = &self.capacity {
            if let Some(purchase) = &block.purchase {
                if !purchase.acknowledged_non_refundable {
                    ds.report_field(
                        Code::CapacityBlockPurchaseWithoutOptIn,
                        path,
                        "capacity_block.purchase",
                        format!(
                            "buying Capacity Block offering `{}` is not acknowledged as non-refundable",
                            purchase.offering_id
                        ),
                        "a Capacity Block is charged in full at purchase and cannot be cancelled or refunded; call `CapacityBlockPurchase::non_refundable()` to buy it, or pass an existing reservation id",
                    );
                }
                if !purchase.offering_id.starts_with("cb-") || purchase.offering_id.len() < 5 {
                    ds.report_field(
                        Code::MalformedCapacityReservationId,
                        path,
                        "capacity_block.purchase.offering_id",
                        format!("`{}` is not a Capacity Block offering id", purchase.offering_id),
                        "offering ids look like cb-0123456789abcdef0 (aws ec2 describe-capacity-block-offerings)",
                    );
                }
            } else if !is_reservation_id(&block.reservation_id) {
                ds.report_field(
                    Code::MalformedCapacityReservationId,
                    path,
                    "capacity_block.reservation_id",
                    format!("`{}` is not a capacity reservation id", block.reservation_id),
                    "Capacity Block reservation ids look like cr-0123456789abcdef0 (aws ec2 describe-capacity-reservations)",
                );
            }
            match AzId::parse(&block.availability_zone_id) {
                None => ds.report_field(
                    Code::InvalidAvailabilityZoneId,
                    path,
                    "capacity_block.az_id",
                    format!(
                        "`{}` is not an availability zone id",
                        block.availability_zone_id
                    ),
                    "zone ids look like `usw2-az2`",
                ),
                Some(zone) => self.check_subnet_zones(stack, "Capacity Block", &zone, path, ds),
            }
            if let Some(window) = &block.window {
                window.check_capacity_block(path, "capacity_block.window", ds);
            }
            if let Some(fee) = block.upfront_fee_usd {
                check_upfront_fee(fee, path, "capacity_block.upfront_fee_usd", ds);
            }
            if let Some(count) = block.instance_count {
                crate::catalog::capacity::check_block_count(i64::from(count), path, ds);
                if self.max > i64::from(count) {
                    ds.report_field(
                        Code::GroupLargerThanReservation,
                        path,
                        "scaling.max",
                        format!(
                            "the group may grow to {} nodes but the block holds {count}",
                            self.max
                        ),
                        format!(
                            "set max to at most {count}; extra launches fail until the block ends"
                        ),
                    );
                }
            }
        }
    }

    /// Every subnet of the group outside `zone`, the zone of `what` (`Capacity Block`) feeding
    /// it (`HF0321`).
    fn check_subnet_zones(
        &self,
        stack: &Stack,
        what: &str,
        zone: &AzId,
        path: &str,
        ds: &mut Diagnostics,
    ) {
        for subnet in &self.subnets {
            let subnet_zone = super::network::zone_of_subnet(stack, subnet);
            // The way to a subnet in the zone depends on how the network was declared.
            let fix = if super::network::is_imported_subnet(stack, subnet) {
                format!("pass only an imported subnet in {zone}: `ExistingNetwork::gpu_subnet(\"subnet-...\", \"{zone}\", cidr)`, or one of its private subnets there")
            } else {
                format!("use only a subnet in {zone}: `Network::gpu_subnet(\"{zone}\")`")
            };
            match subnet_zone {
                Some(z) if z == zone.as_str() => {}
                Some(z) => ds.report_field(
                    Code::CapacityBlockSubnetZone,
                    path,
                    "subnets",
                    format!("subnet `{}` is in {z}, the {what} is in {zone}", subnet.path()),
                    fix,
                ),
                None => ds.report_field(
                    Code::CapacityBlockSubnetZone,
                    path,
                    "subnets",
                    format!(
                        "subnet `{}` is not pinned to the {what}'s zone {zone}; EC2 rejects launches outside it (\"The following supplied instance types do not exist\")",
                        subnet.path()
                    ),
                    format!("use only the network's GPU subnet: `Network::gpu_subnet(\"{zone}\")` and `network.gpu_subnet`"),
                ),
            }
        }
    }
}

/// The window given for Capacity Block `reservation_id` on a node group or Karpenter pool of
/// `stack`, if any.
pub fn window_of(stack: &Stack, reservation_id: &str) -> Option<ReservationWindow> {
    stack.nodes().iter().find_map(|n| {
        let any = n.construct.as_any();
        if let Some(pool) = any.downcast_ref::<super::KarpenterNodePool>() {
            return match pool.reservation() {
                super::ReservationSelector::Id(id) if id == reservation_id => {
                    pool.window().cloned()
                }
                _ => None,
            };
        }
        let group = any.downcast_ref::<ManagedNodeGroup>()?;
        match &group.capacity {
            NodeCapacity::CapacityBlock(b) if b.reservation_id == reservation_id => {
                b.window.clone()
            }
            _ => None,
        }
    })
}

/// Reports `HF0334` at `field` of `path` unless `fee` is a price in [`UPFRONT_FEE_USD`].
pub(crate) fn check_upfront_fee(fee: f64, path: &str, field: &str, ds: &mut Diagnostics) {
    if !UPFRONT_FEE_USD.contains(fee) {
        ds.report_field(
            Code::InvalidUpfrontFee,
            path,
            field,
            format!("an upfront fee of {fee} USD is outside {}", UPFRONT_FEE_USD.describe()),
            "give the `UpfrontFee` of the block's offering (aws ec2 describe-capacity-block-offerings), in USD",
        );
    }
}

/// The upfront fees a Capacity Block may be given with, USD: 64 instances for 182 days at the
/// highest on-demand rates stay well under a billion.
pub const UPFRONT_FEE_USD: super::stack_file::Floats = super::stack_file::Floats::new(0.0, 1e9);

/// The pattern a reservation id parameter or variable must match (see [`is_reservation_id`]).
pub const RESERVATION_ID_PATTERN: &str = "^cr-([0-9a-f]{8}|[0-9a-f]{17})$";

/// The stack's one deploy-time input for Capacity Block reservation `id`, whatever refers to
/// it (the node group or Karpenter pool launching into it, the warning before it ends): named
/// after the first construct, in the order they were added, whose capacity the reservation
/// feeds (`owner` when none claims it), with `id` as its default. An empty `id` (a block the
/// Terraform module buys) gives an input without default.
pub fn reservation_input(stack: &Stack, id: &str, owner: &str) -> StackInput {
    let placements = super::Placements::new(stack);
    // The first claimer, and whether it holds an On-Demand Capacity Reservation.
    let claimer = (!id.is_empty())
        .then(|| {
            placements.all().find_map(|p| {
                p.facts().capacity.iter().find_map(|c| match &c.source {
                    CapacitySource::CapacityBlock { reservation, .. } if reservation == id => {
                        Some((p.node.id.clone(), false))
                    }
                    CapacitySource::CapacityReservation { reservation, .. }
                        if reservation == id =>
                    {
                        Some((p.node.id.clone(), true))
                    }
                    _ => None,
                })
            })
        })
        .flatten();
    let (claimer, on_demand) = claimer.unwrap_or_else(|| (owner.to_owned(), false));
    let what = if on_demand {
        "On-Demand Capacity Reservation"
    } else {
        "Capacity Block reservation"
    };
    StackInput {
        name: format!("{}CapacityReservationId", crate::app::logical_id(&claimer)),
        description: format!("{what} feeding {claimer} (aws ec2 describe-capacity-reservations)"),
        default: (!id.is_empty()).then(|| id.to_owned()),
        pattern: Some(RESERVATION_ID_PATTERN.to_owned()),
        expected: "a capacity reservation id: cr- and 8 or 17 hexadecimal digits".to_owned(),
    }
}

/// `cr-` followed by 8 or 17 hex digits.
pub fn is_reservation_id(id: &str) -> bool {
    id.strip_prefix("cr-").is_some_and(|hex| {
        (hex.len() == 8 || hex.len() == 17)
            && hex
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    })
}

impl ManagedNodeGroup {
    /// Every problem of the On-Demand Capacity Reservation `odcr` feeding the group: its id,
    /// its zone (the group's subnets must be there) and its size (the group may not outgrow
    /// it: a launch targeted at a full reservation fails).
    fn check_capacity_reservation(
        &self,
        stack: &Stack,
        odcr: &OnDemandCapacityReservation,
        path: &str,
        ds: &mut Diagnostics,
    ) {
        if !is_reservation_id(&odcr.reservation_id) {
            ds.report_field(
                Code::MalformedCapacityReservationId,
                path,
                "capacity_reservation.reservation_id",
                format!("`{}` is not a capacity reservation id", odcr.reservation_id),
                "On-Demand Capacity Reservation ids look like cr-0123456789abcdef0 (aws ec2 describe-capacity-reservations)",
            );
        }
        match AzId::parse(&odcr.availability_zone_id) {
            None => ds.report_field(
                Code::InvalidAvailabilityZoneId,
                path,
                "capacity_reservation.az_id",
                format!(
                    "`{}` is not an availability zone id",
                    odcr.availability_zone_id
                ),
                "zone ids look like `usw2-az2`",
            ),
            Some(zone) => {
                self.check_subnet_zones(stack, "On-Demand Capacity Reservation", &zone, path, ds)
            }
        }
        let Some(count) = odcr.instance_count else {
            return;
        };
        if !ODCR_INSTANCES.contains(i64::from(count)) {
            ds.report_field(
                Code::InvalidReservedInstanceCount,
                path,
                "capacity_reservation.instance_count",
                format!("a reservation of {count} instances feeds one node group"),
                format!(
                    "give the reservation's instance count, {} (aws ec2 describe-capacity-reservations shows `TotalInstanceCount`)",
                    ODCR_INSTANCES.describe()
                ),
            );
        } else if self.max > i64::from(count) {
            ds.report_field(
                Code::GroupLargerThanReservation,
                path,
                "scaling.max",
                format!(
                    "the group may grow to {} nodes but the reservation holds {count}",
                    self.max
                ),
                format!("set max to at most {count}; launches beyond the reservation fail"),
            );
        }
    }

    /// The schedules a Capacity Block's window drives (EventBridge Scheduler calling EKS
    /// `UpdateNodegroupConfig` as a role of their own): the group scaled to its sizes when the
    /// block opens, and to zero at the drain time, the servers' termination grace before EKS's
    /// own scale-down 40 minutes before the end, so no request is cut by it and nothing runs
    /// when EC2 reclaims the instances. Returns when the group is scaled up, if scheduled.
    fn scheduled_scaling(&self, scope: &mut Scope<'_>) -> Option<i64> {
        use crate::resources::acknowledge::Rule;
        use crate::resources::iam::{PolicyDocument, PrincipalKind, Statement};
        use crate::resources::{Schedule, ScheduledCall};
        let NodeCapacity::CapacityBlock(block) = &self.capacity else {
            return None;
        };
        let window = block.window.as_ref()?;
        let (start, end) = window.minutes()?;
        let timeline = super::window_schedule(
            Reservation::CapacityBlock,
            start,
            end,
            window.drain_by_minutes(),
            None,
        );
        let stack = scope.stack().name().to_owned();
        let node_group = self.node_group_name(&stack);
        let group_arn = Ref::<kind::NodeGroup>::new(&stack, format!("{}/NodeGroup", self.id)).arn();
        let role: Ref<kind::Role> = Ref::new(&stack, format!("{}/ScheduleRole", self.id));
        scope.add(
            "ScheduleRole",
            Role {
                description: format!(
                    "Scales EKS node group {node_group} on its Capacity Block's schedule"
                ),
                trust: PolicyDocument::new().statement(
                    Statement::allow(["sts:AssumeRole"])
                        .principal(PrincipalKind::Service, "scheduler.amazonaws.com")
                        .condition(
                            "StringEquals",
                            "aws:SourceAccount",
                            vec![Text::default().push_pseudo(Pseudo::AccountId)],
                        ),
                ),
                managed: Vec::new(),
                inline: vec![(
                    "scale-node-group".to_owned(),
                    PolicyDocument::new().statement(
                        Statement::allow(["eks:UpdateNodegroupConfig"])
                            .resource(Text::default().push_ref(group_arn.clone())),
                    ),
                )],
                name: None,
            },
        );
        let call = |sizes| ScheduledCall::UpdateNodegroupConfig {
            cluster: self.cluster.name(),
            node_group: node_group.clone(),
            node_group_arn: group_arn.clone(),
            sizes,
        };
        let (_, desired, max) = self.sizes();
        let plain_input = "The schedule's input is the cluster's and node group's names and the group's sizes, nothing secret; EventBridge Scheduler encrypts it with an AWS owned key, and a key of its own would add a key policy to keep and a cost for nothing to protect.";
        scope
            .add(
                "ScaleUp",
                Schedule {
                    description: format!(
                        "Scales node group {node_group} to {desired} when its Capacity Block opens"
                    ),
                    at: start,
                    call: call(self.sizes()),
                    role: role.arn(),
                    // A failed call (throttled, the group still updating) is retried for an hour.
                    retry_for_seconds: 3600,
                },
            )
            .acknowledge(Rule::SCHEDULE_WITHOUT_CMK, plain_input);
        scope.add(
            "ScaleToZero",
            Schedule {
                description: format!(
                    "Scales node group {node_group} to zero before EKS and EC2 reclaim its Capacity Block"
                ),
                at: timeline.drain_by,
                call: call((0, 0, max)),
                role: role.arn(),
                // Retried until EKS's own scale-down, which makes it moot (within the day
                // Scheduler keeps an event, for a drain earlier than that).
                retry_for_seconds: u32::try_from((timeline.scale_down_at - timeline.drain_by) * 60)
                    .unwrap_or(u32::MAX),
            },
        )
        .acknowledge(Rule::SCHEDULE_WITHOUT_CMK, plain_input);
        Some(start)
    }
}

impl Construct for ManagedNodeGroup {
    type Handle = NodeGroupHandle;
    const KIND: &'static str = "managed_node_group";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> NodeGroupHandle {
        NodeGroupHandle {
            role: Ref::new(stack, format!("{}/NodeRole", self.id)),
            instance_type: self.instance_type().to_owned(),
        }
    }

    fn references(&self) -> Vec<AttrRef> {
        ManagedNodeGroup::references(self)
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        ManagedNodeGroup::validate(self, cx.stack, cx.path, ds);
    }

    /// The node role, the Capacity Block purchase (when the block is bought), the launch
    /// template (IMDSv2 only, an encrypted gp3 root volume, EFA interfaces, local NVMe as
    /// RAID 0, the Capacity Block) and the node group.
    fn expand(&self, scope: &mut Scope<'_>) {
        let id = self.id.as_str();
        let role = self.handle(scope.stack().name()).role;
        scope.add(
            "NodeRole",
            Role {
                description: format!("Nodes of EKS node group {id}"),
                trust: service_trust("ec2.amazonaws.com"),
                managed: [
                    "AmazonEKSWorkerNodePolicy",
                    "AmazonEC2ContainerRegistryPullOnly",
                    "AmazonEKS_CNI_Policy",
                    "AmazonSSMManagedInstanceCore",
                ]
                .map(str::to_owned)
                .to_vec(),
                inline: Vec::new(),
                name: None,
            },
        );
        let stack_name = scope.stack().name().to_owned();
        let name_tag = format!("{stack_name}-{}", id.to_ascii_lowercase());
        let reservation = match &self.capacity {
            NodeCapacity::OnDemand => None,
            NodeCapacity::CapacityReservation(odcr) => Some(ReservationTarget {
                reservation: reservation_input(scope.stack(), &odcr.reservation_id, id),
                purchase: None,
                market: ReservedMarket::OnDemand,
            }),
            NodeCapacity::CapacityBlock(block) => {
                let purchase = block.purchase.as_ref().map(|purchase| {
                    scope.add(
                        "CapacityBlock",
                        resources::CapacityBlockPurchase {
                            offering_id: purchase.offering_id.clone(),
                            instance_platform: "Linux/UNIX".to_owned(),
                            name_tag: name_tag.clone(),
                        },
                    );
                    scope.path("CapacityBlock")
                });
                Some(ReservationTarget {
                    reservation: reservation_input(scope.stack(), &block.reservation_id, id),
                    purchase,
                    market: ReservedMarket::CapacityBlock,
                })
            }
        };
        let mut groups: Vec<AttrRef> = self.security_groups.iter().map(|g| g.id()).collect();
        if !groups.is_empty() {
            // Security groups set in a launch template replace the ones EKS would attach, so
            // the cluster's own group (control plane and other nodes) is added explicitly.
            groups.push(self.cluster.cluster_security_group_id());
        }
        let layout = self.efa_layout();
        let network_interfaces = if self.efa && layout.len() > 1 {
            // Interfaces carry the groups themselves.
            let groups = std::mem::take(&mut groups);
            layout
                .into_iter()
                .map(|(card, device, kind)| NetworkInterface {
                    network_card_index: card,
                    device_index: device,
                    interface_type: kind.to_owned(),
                    security_groups: groups.clone(),
                    delete_on_termination: true,
                })
                .collect()
        } else {
            Vec::new()
        };
        scope.add(
            "LaunchTemplate",
            LaunchTemplate {
                instance_type: self.instance_type().to_owned(),
                reservation,
                metadata: MetadataOptions {
                    endpoint_enabled: true,
                    tokens_required: true,
                    hop_limit: 1,
                },
                root_volume: RootVolume {
                    device_name: "/dev/xvda".to_owned(),
                    size_gb: self.root_volume_gb,
                    volume_type: "gp3".to_owned(),
                    encrypted: true,
                    delete_on_termination: true,
                },
                security_groups: groups,
                network_interfaces,
                user_data: self
                    .local_nvme_raid0()
                    .then(|| RAID0_NODE_CONFIG.to_owned()),
                tagged: ["instance", "volume", "network-interface"]
                    .map(str::to_owned)
                    .to_vec(),
                tags: vec![("Name".to_owned(), name_tag)],
            },
        );
        let block = matches!(self.capacity, NodeCapacity::CapacityBlock(_));
        scope.add(
            "NodeGroup",
            NodeGroup {
                // Named, so the runbook can scale it once the block is active.
                name: block.then(|| self.node_group_name(scope.stack().name())),
                cluster: self.cluster.name(),
                node_role: role.arn(),
                subnets: self.subnets.iter().map(|s| s.id()).collect(),
                ami_type: self.ami.as_str().to_owned(),
                capacity_type: match self.capacity {
                    NodeCapacity::OnDemand | NodeCapacity::CapacityReservation(_) => "ON_DEMAND",
                    NodeCapacity::CapacityBlock(_) => "CAPACITY_BLOCK",
                }
                .to_owned(),
                launch_template: scope.path("LaunchTemplate"),
                min_size: self.min,
                // EKS: create a Capacity Block group at 0 until the block is `active` (a
                // non-zero size before that loops on launch errors); its step scales it.
                desired_size: if block { 0 } else { self.desired },
                desired_size_set_later: block,
                max_size: self.max,
                labels: self.labels.clone(),
                taints: self
                    .taints
                    .iter()
                    .map(|t| resources::Taint {
                        key: t.key.clone(),
                        value: Some(t.value.clone()),
                        effect: "NO_SCHEDULE".to_owned(),
                    })
                    .collect(),
            },
        );
        let scale_up_at = self.scheduled_scaling(scope);
        if block {
            scope.step(
                "ScaleWhenActive",
                Step::ScaleCapacityBlockNodeGroup {
                    node_group: self.node_group_name(scope.stack().name()),
                    sizes: self.sizes(),
                    scale_up_at,
                },
            );
        }
    }

    fn facts(&self, cx: &Context<'_>) -> Facts<'_> {
        let (_, desired, max) = self.sizes();
        let source = match self.capacity_source() {
            NodeCapacity::OnDemand => CapacitySource::OnDemand,
            NodeCapacity::CapacityReservation(r) => CapacitySource::CapacityReservation {
                reservation: r.reservation_id.clone(),
                availability_zone_id: Some(r.availability_zone_id.clone()),
                reserved_instance_count: r.instance_count.map(i64::from),
            },
            NodeCapacity::CapacityBlock(b) => CapacitySource::CapacityBlock {
                reservation: b.reservation_id.clone(),
                availability_zone_id: Some(b.availability_zone_id.clone()),
                reserved_instance_count: b.instance_count.map(i64::from),
                window: b.window.as_ref().and_then(ReservationWindow::minutes),
                drain_by: b
                    .window
                    .as_ref()
                    .and_then(ReservationWindow::drain_by_minutes),
                upfront_fee_usd: b.upfront_fee_usd.filter(|f| UPFRONT_FEE_USD.contains(*f)),
            },
        };
        Facts {
            capacity: vec![CapacityClaim {
                path: cx.path.to_owned(),
                instance_type: self.instance_type().to_owned(),
                service_instance_type: self.instance_type().to_owned(),
                launcher: Launcher::Ec2,
                source,
                count: desired,
                max_count: max,
                provisioned_on_demand: false,
                node_labels: self.labels.clone(),
                subnets: self.subnets.clone(),
                pod_storage: PodStorage::ec2(
                    self.instance_type(),
                    self.local_nvme_raid0(),
                    self.root_volume_gb,
                ),
                // The layout always holds the primary ENA interface; EFA adds the rest.
                efa_interfaces: self.efa && self.efa_layout().len() > 1,
            }],
            ..Facts::default()
        }
    }
}

// --- Stack-file form -------------------------------------------------------------------------

stack_file_shape! {
    pub mod scaling_fields = "Scaling", "Node group sizes." {
        MIN: req "min", Ty::I64(super::GROUP_SIZE), "Minimum size.";
        DESIRED: req "desired", Ty::I64(super::GROUP_SIZE), "Desired size.";
        MAX: req "max", Ty::I64(super::GROUP_MAX_SIZE), "Maximum size.";
    }
}

stack_file_shape! {
    pub mod capacity_block_fields = "CapacityBlock", "An EC2 Capacity Block feeding the group (absent: on-demand): an existing reservation, or one the Terraform module buys." {
        RESERVATION_ID: opt "reservation_id", Ty::Str, "The reservation id (`cr-...`) of a block bought already (required without `purchase`).";
        AZ_ID: req "az_id", Ty::Str, "The block's zone id.";
        INSTANCES: opt "instances", Ty::U32(super::RESERVABLE_COUNT_RANGE), "The block's instance count.";
        PURCHASE: opt "purchase", Ty::Obj(&capacity_block_purchase_fields::SHAPE), "Buy the block from an offering (Terraform only; charged in full, never refunded).";
        WINDOW: opt "window", Ty::Obj(&reservation_window_fields::SHAPE), "When the block holds its instances: its timeline (scale-up, serving, drain) is derived from it.";
        UPFRONT_FEE_USD: opt "upfront_fee_usd", Ty::F64(super::UPFRONT_FEE_USD), "What the block cost, paid up front (its offering's `UpfrontFee`), USD: `hyperforge cost` shows the window's cost and the part paid while not serving.";
    }
}

stack_file_shape! {
    pub mod capacity_reservation_fields = "CapacityReservation", "An EC2 On-Demand Capacity Reservation (`targeted`) feeding the group: on-demand instances, billed for every instance it holds, used or not." {
        RESERVATION_ID: req "reservation_id", Ty::Str, "The reservation id (`cr-...`, aws ec2 describe-capacity-reservations).";
        AZ_ID: req "az_id", Ty::Str, "The reservation's zone id.";
        INSTANCE_COUNT: opt "instance_count", Ty::U32(super::ODCR_INSTANCES), "The instances it holds (`TotalInstanceCount`): caps the group's size.";
    }
}

stack_file_shape! {
    pub mod reservation_window_fields = "ReservationWindow", "When a reservation holds its instances, as `aws ec2 describe-capacity-reservations` shows `StartDate` and `EndDate`." {
        START: req "start", Ty::Str, "The start, RFC 3339 in UTC (`2026-12-10T04:55:00Z`).";
        END: req "end", Ty::Str, "The end, RFC 3339 in UTC; a Capacity Block ends at 11:30 (`2026-12-17T11:30:00Z`).";
        DRAIN_BY: opt "drain_by", Ty::Str, "When the endpoint stops taking requests and the nodes are scaled to zero, RFC 3339 in UTC (absent: the servers' termination grace before EKS's scale-down, 40 minutes before the end).";
    }
}

stack_file_shape! {
    pub mod capacity_block_purchase_fields = "CapacityBlockPurchase", "Buying a Capacity Block: the whole price is charged at purchase; it cannot be cancelled or refunded." {
        OFFERING_ID: req "offering_id", Ty::Str, "The offering id (`cb-...`, aws ec2 describe-capacity-block-offerings).";
        ACKNOWLEDGE_NON_REFUNDABLE: opt "acknowledge_non_refundable", Ty::Bool, "Must be `true`: the purchase is final and not refundable.";
    }
}

stack_file_shape! {
    pub mod fields = <ManagedNodeGroup as Construct>::KIND, "An EKS managed node group: the `system` preset (m7i.xlarge for add-ons) or a `gpu` group." {
        ID: req "managed_node_group", Ty::Str, "The construct id.";
        PRESET: req "preset", Ty::Enum(&["system", "gpu"]), "`system` or `gpu`.";
        CLUSTER: req "cluster", Ty::Ref(Want::Eks), "The EKS cluster.";
        SUBNETS: req "subnets", Ty::Refs(Want::Subnets), "The nodes' subnets.";
        INSTANCE_TYPE: opt "instance_type", Ty::Str, "The EC2 instance type (required for `gpu`).";
        CAPACITY_BLOCK: opt "capacity_block", Ty::Obj(&capacity_block_fields::SHAPE), "The Capacity Block feeding the group (absent: on-demand).";
        CAPACITY_RESERVATION: opt "capacity_reservation", Ty::Obj(&capacity_reservation_fields::SHAPE), "The On-Demand Capacity Reservation feeding the group (absent: on-demand); not with `capacity_block`.";
        SCALING: opt "scaling", Ty::Obj(&scaling_fields::SHAPE), "Sizes.";
        SECURITY_GROUPS: opt "security_groups", Ty::Refs(Want::SecurityGroup), "Security groups besides the cluster's own.";
        ROOT_VOLUME_GB: opt "root_volume_gb", Ty::I64(super::ROOT_VOLUME_GIB), "Root volume size in GiB.";
        LABELS: opt "labels", Ty::StrMap, "More node labels.";
        EFA: opt "efa", Ty::Bool, "EFA interfaces on every EFA-capable network card.";
    }
}

/// The capacity of a `capacity_block` object: `Err` when it names neither a reservation nor
/// a purchase (reported).
fn capacity_block(
    b: &mut dyn super::stack_file::FieldReader,
) -> Result<Option<NodeCapacity>, super::stack_file::Invalid> {
    use capacity_block_fields as f;
    let purchase = super::stack_file::object(b, &f::PURCHASE, |p| {
        use capacity_block_purchase_fields as p_;
        let offering = p.text(&p_::OFFERING_ID);
        let acknowledged = p.bool(&p_::ACKNOWLEDGE_NON_REFUNDABLE) == Some(true);
        let purchase = CapacityBlockPurchase::new(offering?);
        Some(if acknowledged {
            purchase.non_refundable()
        } else {
            purchase
        })
    })
    .flatten();
    let instances = b.u32(&f::INSTANCES);
    let window = reservation_window(b, &f::WINDOW);
    let fee = b.f64(&f::UPFRONT_FEE_USD);
    let with_window = |capacity: NodeCapacity| match capacity {
        NodeCapacity::CapacityBlock(block) => NodeCapacity::CapacityBlock(CapacityBlock {
            window: window.clone(),
            upfront_fee_usd: fee,
            ..block
        }),
        on_demand => on_demand,
    };
    match (purchase, b.text(&f::RESERVATION_ID), b.text(&f::AZ_ID)) {
        (Some(purchase), _, Some(az)) => Ok(Some(with_window(NodeCapacity::buy_capacity_block(
            purchase,
            az,
            instances.unwrap_or(1),
        )))),
        (None, Some(r), Some(az)) => Ok(Some(with_window(match instances {
            Some(n) => NodeCapacity::capacity_block_of(r, az, n),
            None => NodeCapacity::capacity_block(r, az),
        }))),
        (None, None, Some(_)) => {
            b.report(
                Code::StackFileMissingField,
                None,
                "a `capacity_block` needs `reservation_id` (a block bought already) or `purchase`",
                "add `reservation_id: cr-...`, or `purchase: {offering_id: cb-..., acknowledge_non_refundable: true}`",
            );
            Err(super::stack_file::Invalid)
        }
        _ => Ok(None),
    }
}

impl super::stack_file::StackFileConstruct for ManagedNodeGroup {
    const SHAPE: &'static super::stack_file::Shape = &fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        use super::stack_file::{object, required};
        let eks = required(r.eks(&fields::CLUSTER));
        let subnets = required(r.subnets(&fields::SUBNETS));
        let sgs = r.security_groups(&fields::SECURITY_GROUPS);
        let preset = r.text(&fields::PRESET)?;
        let instance_type = r.text(&fields::INSTANCE_TYPE);
        let (eks, subnets) = (eks?, subnets?);
        let mut c = match (preset.as_str(), instance_type) {
            ("system", None) => ManagedNodeGroup::system(id, &eks.cluster, &subnets),
            ("gpu", Some(t)) => ManagedNodeGroup::gpu(id, &eks.cluster, t, &subnets),
            ("system", Some(_)) => {
                r.report(
                    Code::StackFileInvalidValue,
                    Some(&fields::INSTANCE_TYPE),
                    "the `system` preset fixes its instance type (m7i.xlarge)",
                    "remove `instance_type`, or use `preset: gpu`",
                );
                return None;
            }
            ("gpu", None) => {
                r.report(
                    Code::StackFileMissingField,
                    None,
                    "a `gpu` node group is missing required field `instance_type`",
                    "add `instance_type: <EC2 type>` (a GPU type of the catalog: `hyperforge catalog instances` lists them)",
                );
                return None;
            }
            _ => return None,
        };
        let block = object(r, &fields::CAPACITY_BLOCK, capacity_block)
            .transpose()
            .ok()?
            .flatten();
        let odcr = object(r, &fields::CAPACITY_RESERVATION, |o| {
            use capacity_reservation_fields as o_;
            let (id, az) = (o.text(&o_::RESERVATION_ID), o.text(&o_::AZ_ID));
            let instances = o.u32(&o_::INSTANCE_COUNT);
            Some(OnDemandCapacityReservation {
                reservation_id: id?,
                availability_zone_id: az?,
                instance_count: instances,
            })
        })
        .flatten();
        match (block, odcr) {
            (Some(_), Some(_)) => {
                r.report(
                    Code::StackFileInvalidValue,
                    Some(&fields::CAPACITY_RESERVATION),
                    "give either `capacity_block` or `capacity_reservation`, not both",
                    "a node group's instances come from one reservation",
                );
                return None;
            }
            (Some(capacity), None) => c = c.capacity(capacity),
            (None, Some(odcr)) => c = c.capacity(odcr),
            (None, None) => {}
        }
        let scaling = object(r, &fields::SCALING, |s| {
            use scaling_fields as s_;
            let min = s.i64(&s_::MIN);
            let desired = s.i64(&s_::DESIRED);
            let max = s.i64(&s_::MAX);
            Some((min?, desired?, max?))
        });
        if let Some((min, desired, max)) = scaling.flatten() {
            c = c.scaling(min, desired, max);
        }
        for g in sgs.ok()?.unwrap_or_default() {
            c = c.security_group(&g);
        }
        if let Some(v) = r.i64(&fields::ROOT_VOLUME_GB) {
            c = c.root_volume_gb(v);
        }
        for (k, v) in r.str_map(&fields::LABELS) {
            c = c.label(k, v);
        }
        if let Some(v) = r.bool(&fields::EFA) {
            c = c.efa(v);
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_volume_out_of_range_is_refused() {
        for (gb, refused) in [
            (-5, true),
            (0, true),
            (19, true),
            (20, false),
            (16384, false),
            (16385, true),
        ] {
            let mut stack = Stack::new("demo", "us-west-2");
            let f = stack.cloudformation_stage("foundation");
            let net = stack.add(f, crate::constructs::Network::new("Network"));
            let eks = stack.add(
                f,
                crate::constructs::EksCluster::new("Eks", "demo")
                    .subnets(&net.private_subnets)
                    .vpc(&net.vpc),
            );
            stack.add(
                f,
                ManagedNodeGroup::system("System", &eks.cluster, &net.private_subnets)
                    .root_volume_gb(gb),
            );
            let ds = crate::app::App::new().stack(stack).validate();
            assert_eq!(
                ds.contains(Code::InvalidVolumeSize, "demo/System"),
                refused,
                "{gb}: {ds}"
            );
        }
    }

    #[test]
    fn a_group_above_the_eks_node_quota_is_refused() {
        for (max, refused) in [
            (MAX_NODES_PER_GROUP, false),
            (MAX_NODES_PER_GROUP + 1, true),
            (i64::MAX, true),
        ] {
            let mut stack = Stack::new("demo", "us-west-2");
            let f = stack.cloudformation_stage("foundation");
            let net = stack.add(f, crate::constructs::Network::new("Network"));
            let eks = stack.add(
                f,
                crate::constructs::EksCluster::new("Eks", "demo")
                    .subnets(&net.private_subnets)
                    .vpc(&net.vpc),
            );
            stack.add(
                f,
                ManagedNodeGroup::system("System", &eks.cluster, &net.private_subnets)
                    .scaling(1, max, max),
            );
            let ds = crate::app::App::new().stack(stack).validate();
            assert_eq!(
                ds.contains(Code::InvalidScaling, "demo/System"),
                refused,
                "{max}: {ds}"
            );
        }
    }

    #[test]
    fn reservation_ids() {
        assert!(is_reservation_id("cr-0123456789abcdef0"));
        assert!(is_reservation_id("cr-01234567"));
        assert!(!is_reservation_id("cr-0123456789ABCDEF0"));
        assert!(!is_reservation_id("r-0123456789abcdef0"));
    }

    #[test]
    fn efa_layout_on_p6_b300_skips_card_zero() {
        let cluster = Ref::new("s", "Eks/Cluster");
        let g = ManagedNodeGroup::gpu("Gpu", &cluster, "p6-b300.48xlarge", []).efa(true);
        let layout = g.efa_layout();
        assert_eq!(layout[0], (0, 0, "interface"));
        assert_eq!(layout.len(), 17);
        assert!(layout[1..]
            .iter()
            .all(|(card, dev, t)| *card >= 1 && *dev == 0 && *t == "efa-only"));
        // p5 has an EFA on every card: card 0 gets an EFA-only interface at device 1.
        let g = ManagedNodeGroup::gpu("Gpu", &cluster, "p5.48xlarge", []).efa(true);
        let layout = g.efa_layout();
        assert_eq!(layout[1], (0, 1, "efa-only"));
        assert_eq!(layout.len(), 33);
    }
}
