//! The SageMaker HyperPod cluster (EKS-orchestrated): its execution role, the cluster with
//! `NodeRecovery: Automatic`, and instance groups whose capacity is a typed choice: a Flexible
//! Training Plan (ARN and availability zone id) or on-demand.

use super::lifecycle::{ContainerStorage, LifecycleScriptsHandle};
use super::nodes::ReservationWindow;
use super::stack_file::Ints;
use super::{CapacityClaim, CapacitySource, Construct, Context, Facts, Launcher, PodStorage};
use crate::app::text::{Pseudo, Text};
use crate::app::{kind, AttrRef, Ref, Stack, StageKind};
use crate::catalog::{self, regions::AzId};
use crate::diagnostics::{Code, Diagnostics};
use crate::resources::iam::{service_trust, PolicyDocument, Statement};
use crate::resources::{
    self, ClusterInstanceGroup, LifecycleConfig, Role, Scope, StackInput, StackOutput,
};
use std::collections::{BTreeMap, BTreeSet};

/// What HyperPod does when a node fails its health checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum NodeRecovery {
    /// Replace or reboot faulty nodes automatically.
    #[default]
    Automatic,
    /// Leave faulty nodes for an operator.
    None,
}

stack_file_names!(NodeRecovery { Automatic => "automatic", None => "none" });

impl NodeRecovery {
    /// The API value.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeRecovery::Automatic => "Automatic",
            NodeRecovery::None => "None",
        }
    }
}

/// Deep health checks run when a node starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DeepHealthCheck {
    /// GPU and accelerator stress test.
    InstanceStress,
    /// EFA and NCCL connectivity test.
    InstanceConnectivity,
}

stack_file_names!(DeepHealthCheck {
    InstanceStress => "instance_stress",
    InstanceConnectivity => "instance_connectivity",
});

impl DeepHealthCheck {
    /// The API value.
    pub fn as_str(self) -> &'static str {
        match self {
            DeepHealthCheck::InstanceStress => "InstanceStress",
            DeepHealthCheck::InstanceConnectivity => "InstanceConnectivity",
        }
    }
}

/// A Flexible Training Plan feeding an instance group.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainingPlan {
    /// The plan's ARN.
    pub arn: String,
    /// The zone id of the plan's reserved capacity (the group's subnet must be there).
    pub availability_zone_id: Option<String>,
    /// Instances the plan reserves, when known (`aws sagemaker describe-training-plan`
    /// reports it as `TotalInstanceCount`); the group may not ask for more.
    pub reserved_instance_count: Option<i64>,
    /// When the plan holds its instances, when given: its timeline (serving, drain) is
    /// derived from it and the warning before its end reads its end.
    pub window: Option<ReservationWindow>,
    /// What the plan cost, paid up front, USD, when given: `hyperforge cost` shows the
    /// window's cost and the part paid while not serving.
    pub upfront_fee_usd: Option<f64>,
}

/// Where an instance group's instances come from.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Capacity {
    /// On-demand capacity.
    #[default]
    OnDemand,
    /// A Flexible Training Plan bought in advance.
    TrainingPlan(TrainingPlan),
}

impl Capacity {
    /// Capacity from training plan `arn`, whose reserved capacity is in zone `az_id`.
    pub fn training_plan(arn: impl Into<String>, az_id: impl Into<String>) -> Self {
        Capacity::TrainingPlan(TrainingPlan {
            arn: arn.into(),
            availability_zone_id: Some(az_id.into()),
            reserved_instance_count: None,
            window: None,
            upfront_fee_usd: None,
        })
    }

    /// Capacity from a training plan whose zone is not stated (reported as an error: the zone
    /// decides where the group's subnet must be).
    pub fn training_plan_without_zone(arn: impl Into<String>) -> Self {
        Capacity::TrainingPlan(TrainingPlan {
            arn: arn.into(),
            availability_zone_id: None,
            reserved_instance_count: None,
            window: None,
            upfront_fee_usd: None,
        })
    }

    /// States how many instances the training plan reserves, so the group's count is checked
    /// against it (no effect on on-demand capacity).
    pub fn reserved_instances(self, count: i64) -> Self {
        match self {
            Capacity::TrainingPlan(plan) => Capacity::TrainingPlan(TrainingPlan {
                reserved_instance_count: Some(count),
                ..plan
            }),
            other => other,
        }
    }

    /// When the training plan holds its instances (RFC 3339 in UTC, `StartTime` and `EndTime`
    /// of `aws sagemaker describe-training-plan`): its timeline is derived from it (no effect on
    /// on-demand capacity).
    pub fn during(self, start: impl Into<String>, end: impl Into<String>) -> Self {
        self.within(ReservationWindow::new(start, end))
    }

    /// The plan's window (see [`Capacity::during`]), drained at a time of its own (see
    /// [`ReservationWindow::drained_by`]).
    pub fn within(self, window: ReservationWindow) -> Self {
        match self {
            Capacity::TrainingPlan(plan) => Capacity::TrainingPlan(TrainingPlan {
                window: Some(window),
                ..plan
            }),
            other => other,
        }
    }

    /// What the plan cost, paid up front (its offering's `UpfrontFee`), USD (no effect on
    /// on-demand capacity).
    pub fn upfront_fee_usd(self, usd: f64) -> Self {
        match self {
            Capacity::TrainingPlan(plan) => Capacity::TrainingPlan(TrainingPlan {
                upfront_fee_usd: Some(usd),
                ..plan
            }),
            other => other,
        }
    }
}

/// Taint effects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaintEffect {
    /// `NoSchedule`.
    NoSchedule,
    /// `PreferNoSchedule`.
    PreferNoSchedule,
    /// `NoExecute`.
    NoExecute,
}

stack_file_names!(TaintEffect {
    NoSchedule => "NoSchedule",
    PreferNoSchedule => "PreferNoSchedule",
    NoExecute => "NoExecute",
});

impl TaintEffect {
    /// The Kubernetes value.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// A Kubernetes taint on a group's nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taint {
    /// Key.
    pub key: String,
    /// Value (may be empty).
    pub value: String,
    /// Effect.
    pub effect: TaintEffect,
}

/// One instance group.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceGroup {
    name: String,
    instance_type: String,
    count: i64,
    threads_per_core: i64,
    ebs_volume_gb: i64,
    deep_health_checks: Vec<DeepHealthCheck>,
    capacity: Capacity,
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
}

impl InstanceGroup {
    /// A group `name` of one `instance_type` instance (EC2 or `ml.` name), on-demand, one
    /// thread per core, a 500 GB EBS volume and both deep health checks.
    pub fn new(name: impl Into<String>, instance_type: impl Into<String>) -> Self {
        InstanceGroup {
            name: name.into(),
            instance_type: instance_type.into(),
            count: 1,
            threads_per_core: 1,
            ebs_volume_gb: 500,
            deep_health_checks: vec![
                DeepHealthCheck::InstanceStress,
                DeepHealthCheck::InstanceConnectivity,
            ],
            capacity: Capacity::OnDemand,
            labels: BTreeMap::new(),
            taints: Vec::new(),
        }
    }

    /// Number of instances.
    pub fn count(mut self, count: i64) -> Self {
        self.count = count;
        self
    }

    /// Threads per core (1 or 2).
    pub fn threads_per_core(mut self, threads: i64) -> Self {
        self.threads_per_core = threads;
        self
    }

    /// Size of the EBS volume mounted at `/opt/sagemaker`, in GB. It holds container images and
    /// pod volumes (the downloaded weights) when the lifecycle scripts choose
    /// [`ContainerStorage::EbsVolume`].
    pub fn ebs_volume_gb(mut self, gb: i64) -> Self {
        self.ebs_volume_gb = gb;
        self
    }

    /// The deep health checks run on node start (empty: none).
    pub fn deep_health_checks(mut self, checks: impl IntoIterator<Item = DeepHealthCheck>) -> Self {
        self.deep_health_checks = checks.into_iter().collect();
        self
    }

    /// Where the instances come from.
    pub fn capacity(mut self, capacity: Capacity) -> Self {
        self.capacity = capacity;
        self
    }

    /// Adds a Kubernetes label to the group's nodes.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Adds a Kubernetes taint to the group's nodes.
    pub fn taint(
        mut self,
        key: impl Into<String>,
        value: impl Into<String>,
        effect: TaintEffect,
    ) -> Self {
        self.taints.push(Taint {
            key: key.into(),
            value: value.into(),
            effect,
        });
        self
    }

    /// The group's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The instance type as given (EC2 or `ml.` name).
    pub fn instance_type(&self) -> &str {
        &self.instance_type
    }

    /// The HyperPod instance type (`ml.` name), whatever form was given.
    pub fn ml_instance_type(&self) -> String {
        if self.instance_type.starts_with("ml.") {
            self.instance_type.clone()
        } else {
            format!("ml.{}", self.instance_type)
        }
    }

    /// Instance count.
    pub fn instance_count(&self) -> i64 {
        self.count
    }

    /// Threads per core.
    pub fn threads(&self) -> i64 {
        self.threads_per_core
    }

    /// EBS volume size in GB.
    pub fn volume_gb(&self) -> i64 {
        self.ebs_volume_gb
    }

    /// The deep health checks.
    pub fn health_checks(&self) -> &[DeepHealthCheck] {
        &self.deep_health_checks
    }

    /// The capacity source.
    pub fn capacity_source(&self) -> &Capacity {
        &self.capacity
    }

    /// Node labels.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.labels
    }

    /// Node taints.
    pub fn taints(&self) -> &[Taint] {
        &self.taints
    }
}

/// The HyperPod cluster builder.
#[derive(Clone, Debug)]
pub struct HyperPodCluster {
    id: String,
    name: String,
    eks: Ref<kind::EksCluster>,
    subnets: Vec<Ref<kind::Subnet>>,
    security_groups: Vec<Ref<kind::SecurityGroup>>,
    lifecycle: LifecycleScriptsHandle,
    node_recovery: NodeRecovery,
    groups: Vec<InstanceGroup>,
}

/// Handle to the cluster.
#[derive(Clone, Debug)]
pub struct HyperPodHandle {
    /// The cluster.
    pub cluster: Ref<kind::HyperPodCluster>,
    /// Its execution role.
    pub execution_role: Ref<kind::Role>,
    /// The cluster's name.
    pub name: String,
}

/// Valid HyperPod cluster and instance group names: `[a-zA-Z0-9](-*[a-zA-Z0-9])*`, 1-63.
pub fn is_valid_hyperpod_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// The window given for training plan `arn` on an instance group of a HyperPod cluster of
/// `stack`, in the order the stack holds them.
pub fn window_of(stack: &Stack, arn: &str) -> Option<ReservationWindow> {
    stack.nodes().iter().find_map(|n| {
        let cluster = n.construct.as_any().downcast_ref::<HyperPodCluster>()?;
        cluster
            .groups()
            .iter()
            .find_map(|g| match g.capacity_source() {
                Capacity::TrainingPlan(plan) if plan.arn == arn => plan.window.clone(),
                _ => None,
            })
    })
}

/// The pattern a training plan ARN parameter or variable must match (CloudFormation's own).
pub const TRAINING_PLAN_ARN_PATTERN: &str =
    "^arn:aws[a-z\\-]*:sagemaker:[a-z0-9\\-]*:[0-9]{12}:training-plan/.*$";

/// The stack's one deploy-time input for training plan `arn`, whatever refers to it (the
/// instance group it feeds, the warning before it ends): named after the first construct and
/// instance group, in the order they were added, the plan feeds (`owner` when none does), with
/// `arn` as its default.
pub fn training_plan_input(stack: &Stack, arn: &str, owner: &str) -> StackInput {
    let placements = super::Placements::new(stack);
    let claimer = placements.all().find_map(|p| {
        p.facts().capacity.iter().find_map(|c| match &c.source {
            CapacitySource::TrainingPlan { arn: a, .. } if a == arn => Some((
                p.node.id.clone(),
                c.path.rsplit('/').next().unwrap_or_default().to_owned(),
            )),
            _ => None,
        })
    });
    let (name, description) = match claimer {
        Some((construct, group)) => (
            format!(
                "{}{}TrainingPlanArn",
                crate::app::logical_id(&construct),
                crate::app::pascal_id(&group)
            ),
            format!("ARN of the training plan feeding instance group {group}"),
        ),
        None => (
            format!("{}TrainingPlanArn", crate::app::logical_id(owner)),
            format!("ARN of the training plan {owner} warns about"),
        ),
    };
    StackInput {
        name,
        description,
        default: Some(arn.to_owned()),
        pattern: Some(TRAINING_PLAN_ARN_PATTERN.to_owned()),
        expected: "a SageMaker training plan ARN".to_owned(),
    }
}

/// Whether `arn` is a training plan ARN, every part checked ([`crate::app::arn`]).
pub fn is_training_plan_arn(arn: &str) -> bool {
    crate::app::arn::is_training_plan_arn(arn)
}

/// Why the nodes' network-interface statements name every interface of the account.
const ENI_REASON: &str = "HyperPod creates the nodes' network interfaces at run time, so their \
    ids are unknown when the policy is written; creating one is limited to the cluster's own \
    subnets and security groups, which the statement names.";

impl HyperPodCluster {
    /// A cluster `name` orchestrated by `eks`, its nodes in `subnets` with `security_group`,
    /// running `lifecycle`'s scripts on creation.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        eks: &Ref<kind::EksCluster>,
        lifecycle: &LifecycleScriptsHandle,
    ) -> Self {
        HyperPodCluster {
            id: id.into(),
            name: name.into(),
            eks: eks.clone(),
            subnets: Vec::new(),
            security_groups: Vec::new(),
            lifecycle: lifecycle.clone(),
            node_recovery: NodeRecovery::Automatic,
            groups: Vec::new(),
        }
    }

    /// Adds a subnet for the cluster's nodes (the HyperPod subnet).
    pub fn subnet(mut self, subnet: &Ref<kind::Subnet>) -> Self {
        self.subnets.push(subnet.clone());
        self
    }

    /// Adds a security group to the nodes.
    pub fn security_group(mut self, group: &Ref<kind::SecurityGroup>) -> Self {
        self.security_groups.push(group.clone());
        self
    }

    /// Node recovery (default automatic).
    pub fn node_recovery(mut self, recovery: NodeRecovery) -> Self {
        self.node_recovery = recovery;
        self
    }

    /// Adds an instance group.
    pub fn instance_group(mut self, group: InstanceGroup) -> Self {
        self.groups.push(group);
        self
    }

    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The orchestrating EKS cluster.
    pub fn eks(&self) -> &Ref<kind::EksCluster> {
        &self.eks
    }

    /// Node subnets.
    pub fn subnet_refs(&self) -> &[Ref<kind::Subnet>] {
        &self.subnets
    }

    /// Node security groups.
    pub fn security_group_refs(&self) -> &[Ref<kind::SecurityGroup>] {
        &self.security_groups
    }

    /// The lifecycle scripts.
    pub fn lifecycle(&self) -> &LifecycleScriptsHandle {
        &self.lifecycle
    }

    /// Node recovery.
    pub fn recovery(&self) -> NodeRecovery {
        self.node_recovery
    }

    /// The instance groups.
    pub fn groups(&self) -> &[InstanceGroup] {
        &self.groups
    }

    /// The nodes' inline permissions beyond the managed policies HyperPod requires: network
    /// interfaces only in the cluster's subnets and security groups, image pulls, Pod Identity
    /// on this cluster, alarms, and read access to the lifecycle scripts.
    pub fn execution_role_policy(&self) -> PolicyDocument {
        let lifecycle_bucket = &self.lifecycle.bucket;
        let mut eni_resources: Vec<Text> = self
            .subnet_refs()
            .iter()
            .map(|r| arn_of_ref(&r.id(), "ec2", "subnet/"))
            .collect();
        eni_resources.extend(
            self.security_group_refs()
                .iter()
                .map(|r| arn_of_ref(&r.id(), "ec2", "security-group/")),
        );
        let eni_arn = Text::arn("ec2", true, true, Text::lit("network-interface/*"));
        eni_resources.push(eni_arn.clone());
        PolicyDocument::new()
            .statement({
                let mut st = Statement::allow([
                    "ec2:AssignPrivateIpAddresses",
                    "ec2:CreateNetworkInterface",
                    "ec2:CreateNetworkInterfacePermission",
                    "ec2:DeleteNetworkInterface",
                    "ec2:DeleteNetworkInterfacePermission",
                    "ec2:DetachNetworkInterface",
                    "ec2:ModifyNetworkInterfaceAttribute",
                    "ec2:UnassignPrivateIpAddresses",
                ])
                .sid("ManageClusterNetworkInterfaces")
                .wildcards_because(ENI_REASON);
                st.resources = eni_resources;
                st
            })
            .statement(
                Statement::allow(["ec2:CreateTags"])
                    .sid("TagNetworkInterfaces")
                    .resource(eni_arn)
                    .wildcards_because(ENI_REASON),
            )
            .statement(
                Statement::allow([
                    "ec2:DescribeDhcpOptions",
                    "ec2:DescribeInstances",
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeSecurityGroups",
                    "ec2:DescribeSubnets",
                    "ec2:DescribeTags",
                    "ec2:DescribeVpcs",
                    "ecr:GetAuthorizationToken",
                ])
                .sid("DescribeNetworkAndAuthenticateToRegistries")
                .resource("*")
                .wildcards_because(crate::resources::iam::NO_RESOURCE_LEVEL_PERMISSIONS),
            )
            .statement(
                Statement::allow([
                    "ecr:BatchCheckLayerAvailability",
                    "ecr:BatchGetImage",
                    "ecr:GetDownloadUrlForLayer",
                ])
                .sid("PullImages")
                .resource(
                    Text::lit("arn:")
                        .push_pseudo(Pseudo::Partition)
                        .push_lit(":ecr:*:*:repository/*"),
                )
                .wildcards_because(
                    "Nodes pull the images their pods name, from whichever registry account \
                     and region the workload uses; AWS's HyperPod execution-role template \
                     (sagemaker-iam-role-stack.yaml) grants the same, and the actions only read.",
                ),
            )
            .statement(
                Statement::allow(["eks-auth:AssumeRoleForPodIdentity"])
                    .sid("PodIdentity")
                    .resource(Text::attr(self.eks().arn())),
            )
            .statement(
                Statement::allow(["cloudwatch:DescribeAlarms"])
                    .sid("ReadAlarms")
                    .resource(Text::arn("cloudwatch", true, true, Text::lit("alarm:*")))
                    .wildcards_because(
                        "AWS's HyperPod execution-role template (sagemaker-iam-role-stack.yaml) \
                         grants it on every alarm, names none, and documents no narrower \
                         scope; scoped here to the stack's account and region, and it only \
                         reads.",
                    ),
            )
            .statement(
                Statement::allow(["s3:ListBucket"])
                    .sid("ListLifecycleScripts")
                    .resource(Text::attr(lifecycle_bucket.arn())),
            )
            .statement(
                Statement::allow(["s3:GetObject"])
                    .sid("ReadLifecycleScripts")
                    .resource(Text::attr(lifecycle_bucket.arn()).push_lit("/*"))
                    .wildcards_because(
                        "The objects of the lifecycle bucket, which holds only this cluster's \
                         lifecycle scripts; the action only reads.",
                    ),
            )
    }

    pub(crate) fn references(&self) -> Vec<AttrRef> {
        let mut refs = vec![self.eks.arn(), self.lifecycle.bucket.name()];
        refs.extend(self.subnets.iter().map(|s| s.id()));
        refs.extend(self.security_groups.iter().map(|g| g.id()));
        refs
    }

    pub(crate) fn validate(&self, stack: &Stack, path: &str, ds: &mut Diagnostics) {
        if !is_valid_hyperpod_name(&self.name) {
            ds.report_field(
                Code::InvalidName,
                path,
                "name",
                format!("HyperPod cluster name `{}` is not valid", self.name),
                "use 1-63 letters and digits, with single hyphens between them",
            );
        }
        if self.groups.is_empty() {
            ds.report_field(
                Code::NoInstanceGroups,
                path,
                "instance_groups",
                format!("HyperPod cluster `{}` has no instance groups", self.name),
                "add one with `.instance_group(InstanceGroup::new(\"<group name>\", \"ml.<instance type>\"))`",
            );
        }
        if self.subnets.is_empty() || self.security_groups.is_empty() {
            ds.report(
                Code::UnknownReference,
                path,
                "the cluster needs at least one subnet and one security group for its nodes",
                "pass the network's HyperPod subnet with `.subnet(..)` and the cluster security group with `.security_group(..)`",
            );
        }
        let subnet_zone = self.subnet_zone(stack);
        let imported_subnet = self
            .subnets
            .first()
            .is_some_and(|s| super::network::is_imported_subnet(stack, s));
        let mut names = BTreeSet::new();
        for group in &self.groups {
            let gpath = format!("{path}/{}", group.name);
            if !names.insert(group.name.as_str()) {
                ds.report(
                    Code::DuplicateInstanceGroup,
                    &gpath,
                    format!("instance group `{}` is defined twice", group.name),
                    "give each instance group its own name",
                );
            }
            validate_group(
                group,
                stack.region(),
                subnet_zone.as_ref().map(|z| (z, imported_subnet)),
                &gpath,
                ds,
            );
        }
        self.validate_ordering(stack, path, ds);
    }

    /// Where a group's nodes keep container images and pod volumes, per the lifecycle scripts'
    /// choice; `None` when the script was replaced or the type is unknown. (An instance store
    /// on a type without one is 0 bytes: the script would fail the node's creation.)
    pub fn pod_storage(&self, group: &InstanceGroup) -> Option<PodStorage> {
        let instance = catalog::instance(&group.instance_type)?;
        match self.lifecycle.container_storage? {
            ContainerStorage::InstanceStore => Some(PodStorage {
                bytes: instance.local_nvme_gb.saturating_mul(1_000_000_000),
                what: format!(
                    "the local NVMe at {} ({} GB)",
                    ContainerStorage::InstanceStore.mount_point(),
                    instance.local_nvme_gb
                ),
                field: "instance_type",
                remedy: "use an instance type with more local NVMe, or put container data on the group's EBS volume (`ContainerStorage::EbsVolume`) and size `ebs_volume_gb` for it".to_owned(),
            }),
            ContainerStorage::EbsVolume => {
                let gb = u64::try_from(group.ebs_volume_gb).ok()?;
                Some(PodStorage {
                    bytes: gb.saturating_mul(1_000_000_000),
                    what: format!(
                        "the {gb} GB EBS volume at {}",
                        ContainerStorage::EbsVolume.mount_point()
                    ),
                    field: "ebs_volume_gb",
                    remedy: format!(
                        "put container data on the local NVMe (`LifecycleScripts::container_storage(ContainerStorage::InstanceStore)`, {} GB on {}) or raise `ebs_volume_gb`",
                        instance.local_nvme_gb, instance.name
                    ),
                })
            }
        }
    }

    /// The zone id of the first node subnet, when it is a network's HyperPod subnet.
    fn subnet_zone(&self, stack: &Stack) -> Option<AzId> {
        let subnet = self.subnets.first()?;
        super::network::zone_of_subnet(stack, subnet).and_then(AzId::parse)
    }

    fn validate_ordering(&self, stack: &Stack, path: &str, ds: &mut Diagnostics) {
        let Some(own) = stack.stage_of(&self.id) else {
            return;
        };
        let stages = &stack.stages()[..own.index().min(stack.stages().len())];
        let has_dependencies = stages
            .iter()
            .any(|s| matches!(&s.kind, StageKind::Helm(r) if r.is_hyperpod_dependencies()));
        if !has_dependencies {
            ds.report(
                Code::HyperPodBeforeDependencies,
                path,
                format!("HyperPod cluster `{}` is created before the hyperpod-dependencies chart is installed", self.name),
                "add `stack.helm_stage(\"hyperpod-dependencies\", HelmRelease::hyperpod_dependencies())` before the cluster's stage",
            );
        }
        let uploaded = stages
            .iter()
            .any(|s| matches!(&s.kind, StageKind::Upload(u) if u.bucket == self.lifecycle.bucket));
        if !uploaded {
            ds.report(
                Code::LifecycleScriptsInSameStage,
                path,
                "the lifecycle scripts are not uploaded before the cluster is created",
                "add `stack.upload_stage(\"lifecycle-scripts\", lifecycle.upload())` between the stage creating the bucket and the cluster's stage",
            );
        }
    }
}

/// An instance group's instance count (SageMaker's `InstanceCount`).
pub const INSTANCE_COUNT: Ints = Ints::new(1, 6758);

/// Threads per core: 1 (multithreading off) or 2.
pub const THREADS_PER_CORE: Ints = Ints::new(1, 2);

/// An instance group's EBS volume, GB (SageMaker's `VolumeSizeInGB`).
pub const EBS_VOLUME_GB: Ints = Ints::new(1, 16384);

/// The most Kubernetes labels, and taints, HyperPod applies to an instance group's nodes
/// ("up to 50 labels and 50 taints" per instance group, SageMaker HyperPod custom labels and
/// taints, `KubernetesConfig`).
pub const MAX_LABELS_OR_TAINTS: usize = 50;

/// `HF0387`: the group's labels and taints are what HyperPod takes, leaving room and the key
/// for the drain's label.
fn validate_labels_and_taints(group: &InstanceGroup, path: &str, ds: &mut Diagnostics) {
    use super::vllm::{is_label_key, is_label_value};
    let own = super::drain::INSTANCE_GROUP_LABEL;
    let mut problems: Vec<(&str, String)> = Vec::new();
    if group.labels.len() >= MAX_LABELS_OR_TAINTS {
        problems.push(("labels", format!(
            "{} labels, at most {} of its own (HyperPod takes {MAX_LABELS_OR_TAINTS}; one is kept for `{own}`)",
            group.labels.len(),
            MAX_LABELS_OR_TAINTS - 1
        )));
    }
    if group.taints.len() > MAX_LABELS_OR_TAINTS {
        problems.push((
            "taints",
            format!(
                "{} taints, at most {MAX_LABELS_OR_TAINTS}",
                group.taints.len()
            ),
        ));
    }
    for (key, value) in group.labels.iter().take(MAX_LABELS_OR_TAINTS + 1) {
        if key == own {
            problems.push(("labels", format!("the label `{own}` is hyperforge's own")));
        } else if !is_label_key(key) || !is_label_value(value) {
            problems.push((
                "labels",
                format!("`{key}={value}` is not a Kubernetes label"),
            ));
        }
    }
    for t in group.taints.iter().take(MAX_LABELS_OR_TAINTS + 1) {
        if !is_label_key(&t.key) || !is_label_value(&t.value) {
            problems.push((
                "taints",
                format!("`{}={}` is not a Kubernetes taint", t.key, t.value),
            ));
        }
    }
    for (field, problem) in problems {
        ds.report_field(
            Code::InvalidNodeLabelsOrTaints,
            path,
            field,
            format!("instance group `{}`: {problem}", group.name),
            "label and taint keys are `[prefix/]name`, names and values at most 63 letters, digits, `-`, `_` and `.`; at most 49 labels and 50 taints a group",
        );
    }
}

fn validate_group(
    group: &InstanceGroup,
    region: &str,
    subnet_zone: Option<(&AzId, bool)>,
    path: &str,
    ds: &mut Diagnostics,
) {
    if !is_valid_hyperpod_name(&group.name) {
        ds.report_field(
            Code::InvalidName,
            path,
            "name",
            format!("instance group name `{}` is not valid", group.name),
            "use 1-63 letters and digits, with single hyphens between them",
        );
    }
    validate_labels_and_taints(group, path, ds);
    // The region offer is checked over every capacity claim (`validate::region`).
    if catalog::instance(&group.instance_type).is_none() {
        ds.report_field(
            Code::UnknownInstanceType,
            path,
            "instance_type",
            format!(
                "instance type `{}` is not in the catalog",
                group.instance_type
            ),
            format!(
                "known types: {}",
                catalog::instances()
                    .iter()
                    .map(|i| i.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    if !INSTANCE_COUNT.contains(group.count) {
        ds.report_field(
            Code::InvalidInstanceCount,
            path,
            "count",
            format!("instance count {} is out of range", group.count),
            format!("use {} instances", INSTANCE_COUNT.describe()),
        );
    }
    if !THREADS_PER_CORE.contains(group.threads_per_core) {
        ds.report_field(
            Code::InvalidThreadsPerCore,
            path,
            "threads_per_core",
            format!("threads per core is {}", group.threads_per_core),
            "use 1 (multithreading off) or 2",
        );
    }
    if !EBS_VOLUME_GB.contains(group.ebs_volume_gb) {
        ds.report_field(
            Code::InvalidVolumeSize,
            path,
            "ebs_volume_gb",
            format!("EBS volume of {} GB is out of range", group.ebs_volume_gb),
            format!(
                "use {} GB; 500 GB holds several inference images",
                EBS_VOLUME_GB.describe()
            ),
        );
    }
    if let Capacity::TrainingPlan(plan) = &group.capacity {
        if let Some(window) = &plan.window {
            window.check_training_plan(path, "training_plan.window", ds);
        }
        if let Some(fee) = plan.upfront_fee_usd {
            super::nodes::check_upfront_fee(fee, path, "training_plan.upfront_fee_usd", ds);
        }
        if !is_training_plan_arn(&plan.arn) {
            ds.report_field(
                Code::MalformedTrainingPlanArn,
                path,
                "training_plan.arn",
                format!("`{}` is not a training plan ARN", plan.arn),
                "training plan ARNs look like arn:aws:sagemaker:us-west-2:111122223333:training-plan/<name> (50-2048 characters)",
            );
        } else if plan.arn.split(':').nth(3) != Some(region) {
            ds.report_field(
                Code::TrainingPlanRegionMismatch,
                path,
                "training_plan.arn",
                format!(
                    "training plan `{}` is in {}, the stack deploys to {region}",
                    plan.arn,
                    plan.arn.split(':').nth(3).unwrap_or("?")
                ),
                "use a plan bought in the stack's region, or deploy the stack there",
            );
        }
        match &plan.availability_zone_id {
            None => ds.report_field(
                Code::TrainingPlanWithoutAvailabilityZone,
                path,
                "training_plan",
                format!("training plan `{}` is given without its availability zone id", plan.arn),
                "pass the zone id of the plan's reserved capacity: `Capacity::training_plan(arn, \"usw2-az2\")` (aws sagemaker describe-training-plan lists it)",
            ),
            Some(az) => match AzId::parse(az) {
                None => ds.report_field(
                    Code::InvalidAvailabilityZoneId,
                    path,
                    "training_plan.az_id",
                    format!("`{az}` is not an availability zone id"),
                    "zone ids look like `usw2-az2`",
                ),
                Some(az) => {
                    if let Some((subnet_zone, imported)) = subnet_zone {
                        if &az != subnet_zone {
                            ds.report_field(
                                Code::TrainingPlanZoneMismatch,
                                path,
                                "training_plan.az_id",
                                format!("the training plan's capacity is in {az}, but the cluster's subnet is in {subnet_zone}"),
                                if imported {
                                    format!("pass an imported subnet in {az}: `ExistingNetwork::hyperpod_subnet(\"subnet-...\", \"{az}\", cidr)`")
                                } else {
                                    format!("place the HyperPod subnet in {az}: `Network::hyperpod_subnet(\"{az}\")`")
                                },
                            );
                        }
                    }
                }
            },
        }
    }
}

impl Construct for HyperPodCluster {
    type Handle = HyperPodHandle;
    const KIND: &'static str = "hyperpod_cluster";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> HyperPodHandle {
        HyperPodHandle {
            cluster: Ref::new(stack, format!("{}/Cluster", self.id)),
            execution_role: Ref::new(stack, format!("{}/ExecutionRole", self.id)),
            name: self.name.clone(),
        }
    }

    fn references(&self) -> Vec<AttrRef> {
        HyperPodCluster::references(self)
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        HyperPodCluster::validate(self, cx.stack, cx.path, ds);
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        let handle = self.handle(scope.stack().name());
        scope.add(
            "ExecutionRole",
            Role {
                description: format!("Instance role of HyperPod cluster {}", self.name),
                trust: service_trust("sagemaker.amazonaws.com"),
                managed: vec![
                    "AmazonSageMakerClusterInstanceRolePolicy".to_owned(),
                    "AmazonEKS_CNI_Policy".to_owned(),
                ],
                inline: vec![("hyperpod-nodes".to_owned(), self.execution_role_policy())],
                name: None,
            },
        );
        let lifecycle = LifecycleConfig {
            source_s3_uri: Text::lit("s3://")
                .push_ref(self.lifecycle.bucket.name())
                .push_lit(format!("/{}", self.lifecycle.prefix)),
            on_create: self.lifecycle.on_create.clone(),
        };
        // The groups a drain cordons carry the label it selects them by (HyperPod keeps an
        // instance group's `KubernetesConfig` labels on every node it launches).
        let drained: Vec<String> = super::drain::drains(scope.stack())
            .into_iter()
            .map(|d| d.group)
            .collect();
        let instance_groups = self
            .groups
            .iter()
            .map(|g| ClusterInstanceGroup {
                name: g.name.clone(),
                instance_type: g.ml_instance_type(),
                count: g.count,
                threads_per_core: g.threads_per_core,
                execution_role: handle.execution_role.arn(),
                ebs_volume_gb: g.ebs_volume_gb,
                lifecycle: lifecycle.clone(),
                deep_health_checks: g
                    .deep_health_checks
                    .iter()
                    .map(|c| c.as_str().to_owned())
                    .collect(),
                training_plan: match &g.capacity {
                    Capacity::OnDemand => None,
                    Capacity::TrainingPlan(plan) => {
                        Some(training_plan_input(scope.stack(), &plan.arn, &self.id))
                    }
                },
                labels: {
                    let mut labels = g.labels.clone();
                    if drained.contains(&g.name) {
                        labels.insert(
                            super::drain::INSTANCE_GROUP_LABEL.to_owned(),
                            g.name.clone(),
                        );
                    }
                    labels
                },
                taints: g
                    .taints
                    .iter()
                    .map(|t| resources::Taint {
                        key: t.key.clone(),
                        value: (!t.value.is_empty()).then(|| t.value.clone()),
                        effect: t.effect.as_str().to_owned(),
                    })
                    .collect(),
            })
            .collect();
        scope.add(
            "Cluster",
            resources::HyperPodCluster {
                name: self.name.clone(),
                eks_cluster: self.eks.arn(),
                security_groups: self.security_groups.iter().map(|g| g.id()).collect(),
                subnets: self.subnets.iter().map(|s| s.id()).collect(),
                node_recovery: self.node_recovery.as_str().to_owned(),
                instance_groups,
            },
        );
        scope.add(
            "ClusterArnOutput",
            StackOutput {
                description: "HyperPod cluster ARN".to_owned(),
                value: handle.cluster.arn(),
            },
        );
    }

    fn facts(&self, cx: &Context<'_>) -> Facts<'_> {
        let capacity = self
            .groups()
            .iter()
            .map(|g| CapacityClaim {
                path: format!("{}/{}", cx.path, g.name()),
                instance_type: g.instance_type().to_owned(),
                service_instance_type: g.ml_instance_type(),
                launcher: Launcher::HyperPod,
                source: match g.capacity_source() {
                    Capacity::TrainingPlan(p) => CapacitySource::TrainingPlan {
                        arn: p.arn.clone(),
                        availability_zone_id: p.availability_zone_id.clone(),
                        reserved_instance_count: p.reserved_instance_count,
                        window: p.window.as_ref().and_then(ReservationWindow::minutes),
                        drain_by: p
                            .window
                            .as_ref()
                            .and_then(ReservationWindow::drain_by_minutes),
                        upfront_fee_usd: p
                            .upfront_fee_usd
                            .filter(|f| super::nodes::UPFRONT_FEE_USD.contains(*f)),
                    },
                    Capacity::OnDemand => CapacitySource::OnDemand,
                },
                count: g.instance_count(),
                max_count: g.instance_count(),
                provisioned_on_demand: false,
                node_labels: g.labels().clone(),
                subnets: Vec::new(),
                pod_storage: self.pod_storage(g),
                // HyperPod attaches the instance type's EFA interfaces itself.
                efa_interfaces: crate::catalog::instance(g.instance_type())
                    .is_some_and(|i| i.efa_max > 0),
            })
            .collect();
        Facts {
            hyperpod_cluster: Some(self.name().to_owned()),
            capacity,
            node_security_groups: self.security_groups.iter().map(|g| g.id()).collect(),
            ..Facts::default()
        }
    }
}

fn arn_of_ref(r: &AttrRef, service: &str, resource_prefix: &str) -> Text {
    Text::arn(
        service,
        true,
        true,
        Text::lit(resource_prefix).push_ref(r.clone()),
    )
}

// --- Stack-file form -------------------------------------------------------------------------

stack_file_shape! {
    pub mod training_plan_fields = "TrainingPlan", "A SageMaker Flexible Training Plan feeding the group (absent: on-demand)." {
        ARN: req "arn", Ty::Str, "The plan's ARN.";
        AZ_ID: opt "az_id", Ty::Str, "The zone id of the plan's capacity.";
        RESERVED_INSTANCES: opt "reserved_instances", Ty::I64(super::super::nodes::RESERVABLE_COUNT_RANGE), "How many instances the plan reserves.";
        WINDOW: opt "window", Ty::Obj(&super::super::nodes::reservation_window_fields::SHAPE), "When the plan holds its instances (`StartTime` and `EndTime` of aws sagemaker describe-training-plan): its timeline (serving, drain) is derived from it.";
        UPFRONT_FEE_USD: opt "upfront_fee_usd", Ty::F64(super::super::nodes::UPFRONT_FEE_USD), "What the plan cost, paid up front (its offering's `UpfrontFee`), USD: `hyperforge cost` shows the window's cost and the part paid while not serving.";
    }
}

stack_file_shape! {
    pub mod taint_fields = "Taint", "A Kubernetes taint." {
        KEY: req "key", Ty::Str, "The key.";
        VALUE: req "value", Ty::Str, "The value.";
        EFFECT: req "effect", Ty::Enum(TaintEffect::NAMES), "The effect.";
    }
}

stack_file_shape! {
    pub mod instance_group_fields = "InstanceGroup", "A HyperPod instance group." {
        NAME: req "name", Ty::Str, "The group's name.";
        INSTANCE_TYPE: req "instance_type", Ty::Str, "The `ml.` instance type.";
        COUNT: opt "count", Ty::I64(super::INSTANCE_COUNT), default "1", "Instances.";
        THREADS_PER_CORE: opt "threads_per_core", Ty::I64(super::THREADS_PER_CORE), "1 or 2.";
        EBS_VOLUME_GB: opt "ebs_volume_gb", Ty::I64(super::EBS_VOLUME_GB), "Instance storage volume in GB.";
        DEEP_HEALTH_CHECKS: opt "deep_health_checks", Ty::EnumList(DeepHealthCheck::NAMES), "Deep health checks on creation.";
        TRAINING_PLAN: opt "training_plan", Ty::Obj(&training_plan_fields::SHAPE), "The training plan feeding the group (absent: on-demand).";
        LABELS: opt "labels", Ty::StrMap, "Kubernetes node labels.";
        TAINTS: opt "taints", Ty::List(&taint_fields::SHAPE), "Kubernetes node taints.";
    }
}

stack_file_shape! {
    pub mod fields = <HyperPodCluster as Construct>::KIND, "A SageMaker HyperPod cluster orchestrated by an EKS cluster." {
        ID: req "hyperpod_cluster", Ty::Str, "The construct id.";
        NAME: req "name", Ty::Str, "The cluster's name.";
        EKS: req "eks", Ty::Ref(Want::Eks), "The orchestrating EKS cluster.";
        LIFECYCLE: req "lifecycle", Ty::Ref(Want::Lifecycle), "The lifecycle scripts run on node creation.";
        SUBNETS: opt "subnets", Ty::Refs(Want::Subnets), "The nodes' subnets (the HyperPod subnet).";
        SECURITY_GROUPS: opt "security_groups", Ty::Refs(Want::SecurityGroup), "The nodes' security groups.";
        NODE_RECOVERY: opt "node_recovery", Ty::Enum(NodeRecovery::NAMES), default "automatic", "Node recovery.";
        INSTANCE_GROUPS: req "instance_groups", Ty::List(&instance_group_fields::SHAPE), "The instance groups.";
    }
}

/// An instance group from its stack-file object.
fn instance_group(g: &mut dyn super::stack_file::FieldReader) -> Option<InstanceGroup> {
    use instance_group_fields as f;
    let (Some(name), Some(instance_type)) = (g.text(&f::NAME), g.text(&f::INSTANCE_TYPE)) else {
        return None;
    };
    g.part(&name, &f::NAME);
    let mut group = InstanceGroup::new(name, instance_type);
    if let Some(v) = g.i64(&f::COUNT) {
        group = group.count(v);
    }
    if let Some(v) = g.i64(&f::THREADS_PER_CORE) {
        group = group.threads_per_core(v);
    }
    if let Some(v) = g.i64(&f::EBS_VOLUME_GB) {
        group = group.ebs_volume_gb(v);
    }
    if let Some(checks) = g.str_list(&f::DEEP_HEALTH_CHECKS) {
        group = group.deep_health_checks(
            checks
                .iter()
                .filter_map(|c| DeepHealthCheck::from_name(c))
                .collect::<Vec<_>>(),
        );
    }
    let plan = super::stack_file::object(g, &f::TRAINING_PLAN, |plan| {
        use training_plan_fields as p;
        let arn = plan.text(&p::ARN);
        let az = plan.text(&p::AZ_ID);
        let reserved = plan.i64(&p::RESERVED_INSTANCES);
        let window = super::nodes::reservation_window(plan, &p::WINDOW);
        let fee = plan.f64(&p::UPFRONT_FEE_USD);
        let mut cap = match az {
            Some(az) => Capacity::training_plan(arn?, az),
            None => Capacity::training_plan_without_zone(arn?),
        };
        if let Some(n) = reserved {
            cap = cap.reserved_instances(n);
        }
        if let Some(window) = window {
            cap = cap.within(window);
        }
        if let Some(fee) = fee {
            cap = cap.upfront_fee_usd(fee);
        }
        Some(cap)
    });
    if let Some(cap) = plan.flatten() {
        group = group.capacity(cap);
    }
    for (k, v) in g.str_map(&f::LABELS) {
        group = group.label(k, v);
    }
    for (k, v, effect) in super::stack_file::list(g, &f::TAINTS, |t| {
        use taint_fields as t_;
        let effect = t.text(&t_::EFFECT).and_then(|n| TaintEffect::from_name(&n));
        let key = t.text(&t_::KEY);
        let value = t.text(&t_::VALUE);
        Some((key?, value?, effect?))
    }) {
        group = group.taint(k, v, effect);
    }
    Some(group)
}

impl super::stack_file::StackFileConstruct for HyperPodCluster {
    const SHAPE: &'static super::stack_file::Shape = &fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        use super::stack_file::required;
        let eks = required(r.eks(&fields::EKS));
        let lifecycle = required(r.lifecycle(&fields::LIFECYCLE));
        let subnets = r.subnets(&fields::SUBNETS);
        let sgs = r.security_groups(&fields::SECURITY_GROUPS);
        let mut c = HyperPodCluster::new(id, r.text(&fields::NAME)?, &eks?.cluster, &lifecycle?);
        for s in subnets.ok()?.unwrap_or_default() {
            c = c.subnet(&s);
        }
        for g in sgs.ok()?.unwrap_or_default() {
            c = c.security_group(&g);
        }
        if let Some(v) = r
            .text(&fields::NODE_RECOVERY)
            .and_then(|n| NodeRecovery::from_name(&n))
        {
            c = c.node_recovery(v);
        }
        for group in super::stack_file::list(r, &fields::INSTANCE_GROUPS, instance_group) {
            c = c.instance_group(group);
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn training_plan_arns() {
        assert!(is_training_plan_arn(
            "arn:aws:sagemaker:us-west-2:111122223333:training-plan/kimi-k3-p6-b300"
        ));
        assert!(!is_training_plan_arn(
            "arn:aws:sagemaker:us-east-1:123:plan/x"
        ));
        assert!(!is_training_plan_arn(
            "arn:aws:sagemaker:us-west-2:111122223333:notebook-instance/kimi-k3-p6-b300"
        ));
    }

    #[test]
    fn hyperpod_names() {
        assert!(is_valid_hyperpod_name("kimi-k3"));
        assert!(is_valid_hyperpod_name("p6-b300"));
        assert!(!is_valid_hyperpod_name("-x"));
        assert!(!is_valid_hyperpod_name("a_b"));
        assert!(!is_valid_hyperpod_name(&"a".repeat(64)));
    }
}
