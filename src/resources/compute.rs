//! Compute: SageMaker HyperPod clusters, and EKS managed node groups with their launch
//! templates and Capacity Block purchases. Values chosen at deploy time (a training plan, a
//! reservation) are [`StackInput`]s, which each format declares its own way.

use super::ResourceFacts;
use super::StackInput;
use crate::app::text::Text;
use crate::app::AttrRef;
use crate::app::Kind;
use crate::app::Tags;
use std::collections::BTreeMap;

/// A Kubernetes taint on a group's nodes, with the effect spelled as the service wants it
/// (`NoSchedule` for HyperPod, `NO_SCHEDULE` for EKS).
#[derive(Clone, Debug, PartialEq)]
pub struct Taint {
    /// Key.
    pub key: String,
    /// Value; `None` states none.
    pub value: Option<String>,
    /// Effect.
    pub effect: String,
}

/// A SageMaker HyperPod cluster orchestrated by EKS. It can be created only once the
/// lifecycle scripts are uploaded, the HyperPod dependencies chart is installed and its
/// execution role holds its policies.
#[derive(Clone, Debug, PartialEq)]
pub struct HyperPodCluster {
    /// The cluster's name.
    pub name: String,
    /// The orchestrating EKS cluster's ARN.
    pub eks_cluster: AttrRef,
    /// Security groups of the nodes.
    pub security_groups: Vec<AttrRef>,
    /// Subnets of the nodes.
    pub subnets: Vec<AttrRef>,
    /// What happens to faulty nodes (`Automatic`, `None`).
    pub node_recovery: String,
    /// The instance groups.
    pub instance_groups: Vec<ClusterInstanceGroup>,
}

/// One instance group of a [`HyperPodCluster`].
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterInstanceGroup {
    /// The group's name.
    pub name: String,
    /// The `ml.` instance type.
    pub instance_type: String,
    /// Instances.
    pub count: i64,
    /// Threads per core.
    pub threads_per_core: i64,
    /// The instances' role (its ARN).
    pub execution_role: AttrRef,
    /// Size of the EBS volume of each instance, in GB.
    pub ebs_volume_gb: i64,
    /// The lifecycle scripts run when a node is created.
    pub lifecycle: LifecycleConfig,
    /// Deep health checks run on node start (`InstanceStress`, ...); empty: none.
    pub deep_health_checks: Vec<String>,
    /// The training plan feeding the group (its ARN); on-demand when `None`.
    pub training_plan: Option<StackInput>,
    /// Kubernetes labels of the nodes.
    pub labels: BTreeMap<String, String>,
    /// Kubernetes taints of the nodes.
    pub taints: Vec<Taint>,
}

/// Where a HyperPod node's lifecycle scripts are and which one runs on creation.
#[derive(Clone, Debug, PartialEq)]
pub struct LifecycleConfig {
    /// The S3 URI of the scripts' prefix.
    pub source_s3_uri: Text,
    /// The script run on creation (`on_create.sh`).
    pub on_create: String,
}

/// Buying an EC2 Capacity Block from an offering. Charged in full at purchase, never refunded;
/// removing the resource does not cancel the block. Only Terraform can buy one: CloudFormation
/// has no resource type for it, so there the reservation stays an [`StackInput`] of the launch
/// template.
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityBlockPurchase {
    /// The offering (`cb-0123456789abcdef0`).
    pub offering_id: String,
    /// The platform of the instances (`Linux/UNIX`).
    pub instance_platform: String,
    /// The `Name` tag.
    pub name_tag: String,
}

/// An EC2 launch template for the nodes of a managed node group.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchTemplate {
    /// The instance type.
    pub instance_type: String,
    /// The capacity reservation the instances launch into: a Capacity Block (market type
    /// `capacity-block`) or an On-Demand Capacity Reservation.
    pub reservation: Option<ReservationTarget>,
    /// The instance metadata service settings.
    pub metadata: MetadataOptions,
    /// The root volume.
    pub root_volume: RootVolume,
    /// Security groups of the primary interface when no interfaces are listed.
    pub security_groups: Vec<AttrRef>,
    /// The network interfaces, each with its security groups; EC2's default when empty.
    pub network_interfaces: Vec<NetworkInterface>,
    /// User data (plain text; base64-encoded by each format).
    pub user_data: Option<String>,
    /// Resource types created with the instance that receive [`LaunchTemplate::tags_with`]
    /// (`instance`, `volume`, `network-interface`).
    pub tagged: Vec<String>,
    /// Tags of those resources beyond the stack's effective tags, which every format adds to
    /// them ([`LaunchTemplate::tags_with`]); a key here wins.
    pub tags: Vec<(String, String)>,
}

impl LaunchTemplate {
    /// The tags of every [`LaunchTemplate::tagged`] resource type: the stack's effective tags
    /// (`stack_tags`), then this template's own, sorted by key. EC2 copies them onto what it
    /// launches from the template, the only place where the instances, their volumes and their
    /// network interfaces of an EKS node group get their tags: neither the node group's nor
    /// the template's own tags reach them.
    pub fn tags_with(&self, stack_tags: &Tags) -> Tags {
        let mut out = stack_tags.clone();
        out.extend(self.tags.iter().cloned());
        out
    }
}

/// The capacity reservation a launch template targets.
#[derive(Clone, Debug, PartialEq)]
pub struct ReservationTarget {
    /// The reservation id as chosen at deploy time (no default when the block is bought).
    pub reservation: StackInput,
    /// The path of the [`CapacityBlockPurchase`] buying the block, where the format can buy it
    /// (its reservation is targeted instead of [`ReservationTarget::reservation`]).
    pub purchase: Option<String>,
    /// What the reservation is: its instances' market differs.
    pub market: ReservedMarket,
}

/// The market of a reservation's instances.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReservedMarket {
    /// A Capacity Block: instances launch with market type `capacity-block`.
    CapacityBlock,
    /// An On-Demand Capacity Reservation: on-demand instances, targeted at the reservation.
    OnDemand,
}

/// Instance metadata service settings.
#[derive(Clone, Debug, PartialEq)]
pub struct MetadataOptions {
    /// Whether the endpoint is enabled.
    pub endpoint_enabled: bool,
    /// Whether session tokens are required (IMDSv2 only).
    pub tokens_required: bool,
    /// The PUT response hop limit (1: not reachable from containers with their own network).
    pub hop_limit: i64,
}

/// The root EBS volume of an instance.
#[derive(Clone, Debug, PartialEq)]
pub struct RootVolume {
    /// The device name (`/dev/xvda`).
    pub device_name: String,
    /// Size in GiB.
    pub size_gb: i64,
    /// Volume type (`gp3`).
    pub volume_type: String,
    /// Whether it is encrypted.
    pub encrypted: bool,
    /// Whether it is deleted with the instance.
    pub delete_on_termination: bool,
}

/// An IAM instance profile carrying one role, for an [`Instance`].
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceProfile {
    /// The role's name.
    pub role: AttrRef,
}

/// One EC2 instance launched from an AMI named by a public SSM parameter, in a private subnet
/// without a public address (reached through Session Manager, never inbound).
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    /// The instance type (`t3.micro`).
    pub instance_type: String,
    /// The public SSM parameter holding the AMI id
    /// (`/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64`).
    pub image_parameter: String,
    /// Its subnet.
    pub subnet: AttrRef,
    /// Its security groups.
    pub security_groups: Vec<AttrRef>,
    /// Its instance profile's name.
    pub instance_profile: AttrRef,
    /// The instance metadata service settings.
    pub metadata: MetadataOptions,
    /// The root volume.
    pub root_volume: RootVolume,
    /// The `Name` tag (how people and the runbook find the instance).
    pub name_tag: String,
}

/// A network interface of a launch template.
#[derive(Clone, Debug, PartialEq)]
pub struct NetworkInterface {
    /// The network card.
    pub network_card_index: i64,
    /// The device index on the card.
    pub device_index: i64,
    /// `interface` (ENA) or `efa-only`.
    pub interface_type: String,
    /// Its security groups.
    pub security_groups: Vec<AttrRef>,
    /// Whether it is deleted with the instance.
    pub delete_on_termination: bool,
}

/// An EKS managed node group launched from a [`LaunchTemplate`] of the same construct. Its
/// nodes need their role's policies to join the cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeGroup {
    /// The group's name; the service chooses one when `None`.
    pub name: Option<String>,
    /// The cluster's name.
    pub cluster: AttrRef,
    /// The nodes' role (its ARN).
    pub node_role: AttrRef,
    /// Subnets.
    pub subnets: Vec<AttrRef>,
    /// The AMI family (`AL2023_x86_64_NVIDIA`).
    pub ami_type: String,
    /// `ON_DEMAND` or `CAPACITY_BLOCK`.
    pub capacity_type: String,
    /// The path of the launch template (its latest version is used).
    pub launch_template: String,
    /// Minimum size.
    pub min_size: i64,
    /// Desired size at creation.
    pub desired_size: i64,
    /// Whether the desired size is changed outside the deployment after creation (a Capacity
    /// Block group is scaled up once its block is active): Terraform then ignores it, and a
    /// CloudFormation update leaves it as long as the template's value stays the same.
    pub desired_size_set_later: bool,
    /// Maximum size.
    pub max_size: i64,
    /// Kubernetes labels of the nodes.
    pub labels: BTreeMap<String, String>,
    /// Kubernetes taints of the nodes.
    pub taints: Vec<Taint>,
}

impl ResourceFacts for HyperPodCluster {
    const HANDLE: Option<Kind> = Some(Kind::HyperPodCluster);

    fn references(&self) -> Vec<AttrRef> {
        let mut out = vec![self.eks_cluster.clone()];
        out.extend(self.security_groups.iter().cloned());
        out.extend(self.subnets.iter().cloned());
        for g in &self.instance_groups {
            out.push(g.execution_role.clone());
            out.extend(g.lifecycle.source_s3_uri.references().cloned());
        }
        out
    }
    fn inputs(&self) -> Vec<StackInput> {
        self.instance_groups
            .iter()
            .filter_map(|g| g.training_plan.clone())
            .collect()
    }
}

impl ResourceFacts for CapacityBlockPurchase {}

impl ResourceFacts for InstanceProfile {
    const HANDLE: Option<Kind> = Some(Kind::InstanceProfile);

    fn references(&self) -> Vec<AttrRef> {
        vec![self.role.clone()]
    }
}

impl ResourceFacts for Instance {
    fn references(&self) -> Vec<AttrRef> {
        let mut out = vec![self.subnet.clone(), self.instance_profile.clone()];
        out.extend(self.security_groups.iter().cloned());
        out
    }
}

impl ResourceFacts for LaunchTemplate {
    fn references(&self) -> Vec<AttrRef> {
        let mut out = self.security_groups.clone();
        for i in &self.network_interfaces {
            out.extend(i.security_groups.iter().cloned());
        }
        out
    }
    fn inputs(&self) -> Vec<StackInput> {
        self.reservation
            .iter()
            .map(|b| b.reservation.clone())
            .collect()
    }
}

impl ResourceFacts for NodeGroup {
    const HANDLE: Option<Kind> = Some(Kind::NodeGroup);

    fn references(&self) -> Vec<AttrRef> {
        let mut out = vec![self.cluster.clone(), self.node_role.clone()];
        out.extend(self.subnets.iter().cloned());
        out
    }
}
