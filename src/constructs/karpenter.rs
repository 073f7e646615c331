//! Karpenter on EKS: the controller's IAM role (EKS Pod Identity) and its nodes' role and access
//! entry, and GPU node pools that launch into Capacity Blocks through the EC2NodeClass's
//! `capacityReservationSelectorTerms` (Karpenter 1.6 or later; Capacity Blocks are selected like
//! targeted On-Demand Capacity Reservations, never by open matching).

use super::nodes::{GPU_PRESENT_LABEL, GPU_TAINT};
use super::{CapacityClaim, CapacitySource, Construct, Context, Facts, Launcher, PodStorage};
use crate::app::text::Text;
use crate::app::{is_reserved_tag_key, kind, AttrRef, Ref, Tags};
use crate::catalog;
use crate::diagnostics::{Code, Diagnostics};
use crate::resources::iam::{pod_identity_trust, service_trust};
use crate::resources::kubernetes::crd::ec2_node_class::{
    EC2NodeClass, EC2NodeClassAmiSelectorTerms, EC2NodeClassBlockDeviceMappings,
    EC2NodeClassBlockDeviceMappingsEbs, EC2NodeClassCapacityReservationSelectorTerms,
    EC2NodeClassMetadataOptions, EC2NodeClassSecurityGroupSelectorTerms, EC2NodeClassSpec,
    EC2NodeClassSubnetSelectorTerms,
};
use crate::resources::kubernetes::crd::node_pool::{
    NodePool, NodePoolDisruption, NodePoolDisruptionBudgets, NodePoolSpec, NodePoolTemplate,
    NodePoolTemplateMetadata, NodePoolTemplateSpec, NodePoolTemplateSpecNodeClassRef,
    NodePoolTemplateSpecRequirements, NodePoolTemplateSpecTaints,
};
use crate::resources::{Access, AccessEntry, KubeObject, PodIdentityAssociation, Role, Scope};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

/// The EKS-optimized Amazon Linux 2023 AMI release GPU pools run by default
/// (`amiSelectorTerms: [{alias: al2023@<version>}]`): release v20260714 of awslabs/amazon-eks-ami
/// (its CHANGELOG lists `amazon-eks-node-al2023-x86_64-nvidia-1.33-v20260714`, NVIDIA driver
/// 580). A pinned release never drifts by itself; `al2023@latest` would mark every node drifted
/// at each AMI release. To move on, pick a newer release from that CHANGELOG, set it with
/// [`KarpenterNodePool::ami_version`] (stack files: `ami_version`), synthesize and apply the
/// pool's stage again, and replace the node when it is idle (drift replacement is off, see
/// [`KarpenterNodePool::node_pool`]).
pub const DEFAULT_AL2023_AMI_VERSION: &str = "v20260714";

/// Karpenter's namespace and service account.
pub const KARPENTER_NAMESPACE: &str = "kube-system";
/// Karpenter's service account.
pub const KARPENTER_SERVICE_ACCOUNT: &str = "karpenter";

/// Karpenter's AWS side: controller role, node role, node access entry.
#[derive(Clone, Debug)]
pub struct Karpenter {
    id: String,
    cluster: Ref<kind::EksCluster>,
    cluster_name: String,
}

/// Handles to Karpenter's roles.
#[derive(Clone, Debug)]
pub struct KarpenterHandle {
    /// The controller's role.
    pub controller_role: Ref<kind::Role>,
    /// The nodes' role.
    pub node_role: Ref<kind::Role>,
    /// The nodes' role name (fixed, so EC2NodeClass objects can name it).
    pub node_role_name: String,
    /// The cluster's name.
    pub cluster_name: String,
}

impl Karpenter {
    /// Karpenter for `cluster` (the handle's name is used for the node role's name).
    pub fn new(id: impl Into<String>, cluster: &super::EksClusterHandle) -> Self {
        Karpenter {
            id: id.into(),
            cluster: cluster.cluster.clone(),
            cluster_name: cluster.name.clone(),
        }
    }

    /// The cluster.
    pub fn cluster(&self) -> &Ref<kind::EksCluster> {
        &self.cluster
    }

    /// The fixed name of the nodes' role (at most 64 characters).
    pub fn node_role_name(&self) -> String {
        node_role_name(&self.cluster_name)
    }

    pub(crate) fn references(&self) -> Vec<AttrRef> {
        vec![self.cluster.name(), self.cluster.arn()]
    }
}

fn node_role_name(cluster: &str) -> String {
    // IAM role names: at most 64 characters, unique in the account (all regions).
    crate::app::fit_name(&format!("KarpenterNodeRole-{cluster}"), 64)
}

impl Construct for Karpenter {
    type Handle = KarpenterHandle;
    const KIND: &'static str = "karpenter";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> KarpenterHandle {
        KarpenterHandle {
            controller_role: Ref::new(stack, format!("{}/ControllerRole", self.id)),
            node_role: Ref::new(stack, format!("{}/NodeRole", self.id)),
            node_role_name: self.node_role_name(),
            cluster_name: self.cluster_name.clone(),
        }
    }

    fn references(&self) -> Vec<AttrRef> {
        Karpenter::references(self)
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        let handle = self.handle(scope.stack().name());
        scope.add(
            "NodeRole",
            Role {
                description: "Nodes launched by Karpenter".to_owned(),
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
                name: Some(handle.node_role_name.clone()),
            },
        );
        scope.add(
            "NodeAccessEntry",
            AccessEntry {
                cluster: self.cluster.name(),
                principal: Text::attr(handle.node_role.arn()),
                access: Access::LinuxNodes,
            },
        );
        scope.add(
            "ControllerRole",
            Role {
                description: "Karpenter controller (EKS Pod Identity)".to_owned(),
                trust: pod_identity_trust(),
                managed: Vec::new(),
                inline: vec![(
                    "karpenter-controller".to_owned(),
                    controller_policy(
                        &self.cluster_name,
                        self.cluster.arn(),
                        handle.node_role.arn(),
                    ),
                )],
                name: None,
            },
        );
        scope.add(
            "PodIdentityAssociation",
            PodIdentityAssociation {
                cluster: self.cluster.name(),
                namespace: KARPENTER_NAMESPACE.to_owned(),
                service_account: KARPENTER_SERVICE_ACCOUNT.to_owned(),
                role: handle.controller_role.arn(),
            },
        );
    }
}

/// The root volume of a pool's nodes, GiB.
const ROOT_VOLUME_GIB: i64 = 200;

/// How an EC2NodeClass finds its Capacity Block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReservationSelector {
    /// By reservation id.
    Id(String),
    /// By tags on the reservation (e.g. `ai-on-eks: "true"`).
    Tags(BTreeMap<String, String>),
}

/// A GPU node pool fed by a Capacity Block: an EC2NodeClass and a NodePool allowing only
/// `karpenter.sh/capacity-type: reserved`.
#[derive(Clone, Debug)]
pub struct KarpenterNodePool {
    id: String,
    name: String,
    karpenter: KarpenterHandle,
    instance_type: String,
    reservation: ReservationSelector,
    max_nodes: u32,
    ami_version: String,
    window: Option<super::nodes::ReservationWindow>,
    upfront_fee_usd: Option<f64>,
}

impl KarpenterNodePool {
    /// A pool `name` of `instance_type` nodes from the Capacity Block chosen by `reservation`.
    pub fn capacity_block(
        id: impl Into<String>,
        name: impl Into<String>,
        karpenter: &KarpenterHandle,
        instance_type: impl Into<String>,
        reservation: ReservationSelector,
    ) -> Self {
        KarpenterNodePool {
            id: id.into(),
            name: name.into(),
            karpenter: karpenter.clone(),
            instance_type: instance_type.into(),
            reservation,
            max_nodes: 1,
            ami_version: DEFAULT_AL2023_AMI_VERSION.to_owned(),
            window: None,
            upfront_fee_usd: None,
        }
    }

    /// When the Capacity Block holds its instances (RFC 3339 in UTC): its timeline is derived
    /// from it, as for a node group's block.
    pub fn during(mut self, start: impl Into<String>, end: impl Into<String>) -> Self {
        self.window = Some(super::nodes::ReservationWindow::new(start, end));
        self
    }

    /// The block's window with a drain time of its own (see
    /// [`ReservationWindow::drained_by`](super::nodes::ReservationWindow::drained_by)):
    /// Karpenter still drains its nodes itself 40 minutes before the end; the drain time is
    /// when requests stop.
    pub fn within(mut self, window: super::nodes::ReservationWindow) -> Self {
        self.window = Some(window);
        self
    }

    /// What the block cost, paid up front (its offering's `UpfrontFee`), USD.
    pub fn upfront_fee_usd(mut self, usd: f64) -> Self {
        self.upfront_fee_usd = Some(usd);
        self
    }

    /// The window given for the block, if any.
    pub fn window(&self) -> Option<&super::nodes::ReservationWindow> {
        self.window.as_ref()
    }

    /// The EKS-optimized AL2023 AMI release the nodes run (`v20260714`; default
    /// [`DEFAULT_AL2023_AMI_VERSION`]). `latest` follows every release, and each release then
    /// marks the nodes drifted.
    pub fn ami_version(mut self, version: impl Into<String>) -> Self {
        self.ami_version = version.into();
        self
    }

    /// The AMI alias the EC2NodeClass selects (`al2023@v20260714`).
    pub fn ami_alias(&self) -> String {
        format!("al2023@{}", self.ami_version)
    }

    /// At most this many nodes (the block's size).
    pub fn max_nodes(mut self, nodes: u32) -> Self {
        self.max_nodes = nodes;
        self
    }

    /// The EC2 instance type of the pool's nodes.
    pub fn instance_type(&self) -> &str {
        &self.instance_type
    }

    /// How the pool finds its Capacity Block.
    pub fn reservation(&self) -> &ReservationSelector {
        &self.reservation
    }

    /// The most nodes the pool launches.
    pub fn max_node_count(&self) -> u32 {
        self.max_nodes
    }

    /// The pool's Kubernetes name.
    pub fn object_name(&self) -> &str {
        &self.name
    }

    /// The objects' labels.
    fn labels(stack: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (
                "app.kubernetes.io/managed-by".to_owned(),
                "hyperforge".to_owned(),
            ),
            ("app.kubernetes.io/part-of".to_owned(), stack.to_owned()),
        ])
    }

    /// The EC2NodeClass. Subnets are found by the GPU subnet's tags, security groups by the
    /// cluster security group's `Name` tag and EKS's own cluster tag. `tags` (the stack's
    /// effective tags) go to `spec.tags`, which Karpenter puts on the instances, volumes,
    /// network interfaces and launch templates it creates, beside its own; the keys it sets
    /// itself, which its CRD refuses there, are left to it.
    pub fn ec2_node_class(&self, stack: &str, tags: &Tags) -> EC2NodeClass {
        let spec_tags: BTreeMap<String, String> = tags
            .iter()
            .filter(|(k, _)| !k.is_empty() && !is_reserved_tag_key(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let tags = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<BTreeMap<_, _>>(),
            )
        };
        let reservation = match &self.reservation {
            ReservationSelector::Id(id) => EC2NodeClassCapacityReservationSelectorTerms {
                id: Some(id.clone()),
                ..Default::default()
            },
            ReservationSelector::Tags(tags) => EC2NodeClassCapacityReservationSelectorTerms {
                tags: Some(tags.clone()),
                ..Default::default()
            },
        };
        let mut object = EC2NodeClass::new(
            &self.name,
            EC2NodeClassSpec {
                role: Some(self.karpenter.node_role_name.clone()),
                ami_selector_terms: vec![EC2NodeClassAmiSelectorTerms {
                    alias: Some(self.ami_alias()),
                    ..Default::default()
                }],
                subnet_selector_terms: vec![EC2NodeClassSubnetSelectorTerms {
                    tags: tags(&[("hyperforge:stack", stack), ("hyperforge:subnet", "gpu")]),
                    ..Default::default()
                }],
                security_group_selector_terms: vec![
                    EC2NodeClassSecurityGroupSelectorTerms {
                        tags: tags(&[("Name", &format!("{stack}-cluster"))]),
                        ..Default::default()
                    },
                    EC2NodeClassSecurityGroupSelectorTerms {
                        tags: tags(&[("aws:eks:cluster-name", &self.karpenter.cluster_name)]),
                        ..Default::default()
                    },
                ],
                capacity_reservation_selector_terms: Some(vec![reservation]),
                instance_store_policy: Some("RAID0".to_owned()),
                tags: (!spec_tags.is_empty()).then_some(spec_tags),
                metadata_options: Some(EC2NodeClassMetadataOptions {
                    http_endpoint: Some("enabled".to_owned()),
                    http_tokens: Some("required".to_owned()),
                    http_put_response_hop_limit: Some(1),
                    ..Default::default()
                }),
                block_device_mappings: Some(vec![EC2NodeClassBlockDeviceMappings {
                    device_name: Some("/dev/xvda".to_owned()),
                    ebs: Some(EC2NodeClassBlockDeviceMappingsEbs {
                        volume_size: Some(format!("{ROOT_VOLUME_GIB}Gi")),
                        volume_type: Some("gp3".to_owned()),
                        encrypted: Some(true),
                        delete_on_termination: Some(true),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            },
        );
        object.metadata.labels = Some(Self::labels(stack));
        object
    }

    /// The NodePool: only reserved capacity of the pool's instance type, on GPU-tainted nodes,
    /// at most `max_nodes` nodes' worth of GPUs. A disruption budget of zero nodes for
    /// `Drifted` keeps Karpenter from replacing a drifted node (a changed EC2NodeClass or AMI):
    /// its replacement could not launch while the node holds the whole Capacity Block, and a
    /// replacement means reloading the weights for hours. Empty nodes are still consolidated.
    pub fn node_pool(&self, stack: &str) -> NodePool {
        let gpus = catalog::instance(&self.instance_type).map_or(0, |i| i.gpu_count);
        let requirement = |key: &str, value: &str| NodePoolTemplateSpecRequirements {
            key: key.to_owned(),
            operator: "In".to_owned(),
            values: Some(vec![value.to_owned()]),
            ..Default::default()
        };
        let gpu_limit = i64::from(gpus) * i64::from(self.max_nodes);
        let mut object = NodePool::new(
            &self.name,
            NodePoolSpec {
                template: NodePoolTemplate {
                    metadata: Some(NodePoolTemplateMetadata {
                        labels: Some(BTreeMap::from([(
                            GPU_PRESENT_LABEL.to_owned(),
                            "true".to_owned(),
                        )])),
                        ..Default::default()
                    }),
                    spec: NodePoolTemplateSpec {
                        node_class_ref: NodePoolTemplateSpecNodeClassRef {
                            group: "karpenter.k8s.aws".to_owned(),
                            kind: "EC2NodeClass".to_owned(),
                            name: self.name.clone(),
                        },
                        requirements: vec![
                            requirement("node.kubernetes.io/instance-type", &self.instance_type),
                            requirement("karpenter.sh/capacity-type", "reserved"),
                        ],
                        taints: Some(vec![NodePoolTemplateSpecTaints {
                            key: GPU_TAINT.to_owned(),
                            value: Some("true".to_owned()),
                            effect: "NoSchedule".to_owned(),
                            ..Default::default()
                        }]),
                        expire_after: Some("Never".to_owned()),
                        ..Default::default()
                    },
                },
                limits: Some(BTreeMap::from([(
                    "nvidia.com/gpu".to_owned(),
                    IntOrString::Int(i32::try_from(gpu_limit).unwrap_or(i32::MAX)),
                )])),
                disruption: Some(NodePoolDisruption {
                    consolidation_policy: Some("WhenEmpty".to_owned()),
                    consolidate_after: "10m".to_owned(),
                    budgets: Some(vec![NodePoolDisruptionBudgets {
                        nodes: "0".to_owned(),
                        reasons: Some(vec!["Drifted".to_owned()]),
                        ..Default::default()
                    }]),
                }),
                ..Default::default()
            },
        );
        object.metadata.labels = Some(Self::labels(stack));
        object
    }

    pub(crate) fn validate(&self, path: &str, ds: &mut Diagnostics) {
        if catalog::instance(&self.instance_type).is_none() {
            ds.report_field(
                Code::UnknownInstanceType,
                path,
                "instance_type",
                format!(
                    "instance type `{}` is not in the catalog",
                    self.instance_type
                ),
                super::known_gpu_types_help(false),
            );
        }
        if !super::vllm::is_dns_label(&self.name) {
            ds.report_field(
                Code::InvalidKubernetesName,
                path,
                "name",
                format!("`{}` is not a valid Kubernetes object name", self.name),
                "use 1-63 lowercase letters, digits and hyphens",
            );
        }
        if let Some(window) = &self.window {
            window.check_capacity_block(path, "window", ds);
        }
        if let Some(fee) = self.upfront_fee_usd {
            super::nodes::check_upfront_fee(fee, path, "upfront_fee_usd", ds);
        }
        if let ReservationSelector::Id(id) = &self.reservation {
            if !super::nodes::is_reservation_id(id) {
                ds.report_field(
                    Code::MalformedCapacityReservationId,
                    path,
                    "reservation_id",
                    format!("`{id}` is not a capacity reservation id"),
                    "Capacity Block reservation ids look like cr-0123456789abcdef0",
                );
            }
        }
        if !is_ami_release(&self.ami_version) {
            ds.report_field(
                Code::InvalidAmiVersion,
                path,
                "ami_version",
                format!("`{}` is not an EKS-optimized AMI release", self.ami_version),
                "write the release as `v` and its date, e.g. `v20260714` (amazon-eks-ami CHANGELOG)",
            );
        }
        crate::catalog::capacity::check_block_count(i64::from(self.max_nodes), path, ds);
    }
}

/// `v` and a date `yyyymmdd` (`v20260714`): an EKS-optimized AMI release.
fn is_ami_release(version: &str) -> bool {
    let Some(date) = version.strip_prefix('v') else {
        return false;
    };
    if date.len() != 8 || !date.chars().all(|c| c.is_ascii_digit()) {
        return false;
    }
    let part = |r: std::ops::Range<usize>| date[r].parse::<u32>().unwrap_or(0);
    (2018..=2099).contains(&part(0..4))
        && (1..=12).contains(&part(4..6))
        && (1..=31).contains(&part(6..8))
}

impl Construct for KarpenterNodePool {
    type Handle = String;
    const KIND: &'static str = "karpenter_node_pool";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, _stack: &str) -> String {
        self.name.clone()
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        KarpenterNodePool::validate(self, cx.path, ds);
    }

    /// The EC2NodeClass and the NodePool, each a child named after its kind.
    fn expand(&self, scope: &mut Scope<'_>) {
        let stack = scope.stack().name().to_owned();
        let class = self.ec2_node_class(&stack, scope.tags());
        if let ReservationSelector::Id(id) = &self.reservation {
            // The class names the block by the id given, which is the input's default and so
            // the placeholder the stage's apply replaces with the deployed value.
            let input = super::nodes::reservation_input(scope.stack(), id, &self.id);
            scope.deploy_input("CapacityReservationIdValue", input);
        }
        scope.add_object(KubeObject::new(&class));
        scope.add_object(KubeObject::new(&self.node_pool(&stack)));
    }

    fn facts(&self, cx: &Context<'_>) -> Facts<'_> {
        let reservation = match self.reservation() {
            ReservationSelector::Id(id) => id.clone(),
            ReservationSelector::Tags(tags) => tags
                .iter()
                .map(|(k, v)| format!("tag {k}={v}"))
                .collect::<Vec<_>>()
                .join(", "),
        };
        let max = i64::from(self.max_node_count());
        Facts {
            capacity: vec![CapacityClaim {
                path: cx.path.to_owned(),
                instance_type: self.instance_type().to_owned(),
                service_instance_type: self.instance_type().to_owned(),
                launcher: Launcher::Ec2,
                source: CapacitySource::CapacityBlock {
                    reservation,
                    availability_zone_id: None,
                    reserved_instance_count: None,
                    window: self
                        .window
                        .as_ref()
                        .and_then(super::nodes::ReservationWindow::minutes),
                    drain_by: self
                        .window
                        .as_ref()
                        .and_then(super::nodes::ReservationWindow::drain_by_minutes),
                    upfront_fee_usd: self
                        .upfront_fee_usd
                        .filter(|f| super::nodes::UPFRONT_FEE_USD.contains(*f)),
                },
                count: 0,
                max_count: max,
                provisioned_on_demand: true,
                node_labels: BTreeMap::from([(GPU_PRESENT_LABEL.to_owned(), "true".to_owned())]),
                // The EC2NodeClass selects the stack's subnets tagged `hyperforge:subnet: gpu`.
                subnets: super::network::zonal_subnets_tagged(cx.stack, "gpu"),
                // `instanceStorePolicy: RAID0`.
                pod_storage: PodStorage::ec2(self.instance_type(), true, ROOT_VOLUME_GIB),
                // The EC2NodeClass asks for no EFA interfaces.
                efa_interfaces: false,
            }],
            node_pools: vec![self.object_name().to_owned()],
            ..Facts::default()
        }
    }
}

/// The Karpenter controller's permissions, covering its published policy (the getting-started
/// CloudFormation template of the release the pinned chart runs; checked statement by statement
/// by `tests/it/conformance.rs`): launch and tag instances, fleets and launch templates owned by
/// this cluster (including into capacity reservations), read what it needs, manage and list
/// instance profiles for the node role, pass only the node role. No interruption queue is
/// configured (`settings.interruptionQueue` unset), so no SQS permission.
pub fn controller_policy(
    cluster_name: &str,
    cluster_arn: AttrRef,
    node_role_arn: AttrRef,
) -> super::iam::PolicyDocument {
    use crate::app::text::Text;
    use crate::resources::iam::{PolicyDocument, Statement};
    let arn = |resource: &str| Text::arn("ec2", true, true, Text::lit(resource));
    let public = |resource: &str| Text::arn("ec2", true, false, Text::lit(resource));
    let owned = format!("aws:ResourceTag/kubernetes.io/cluster/{cluster_name}");
    let request_owned = format!("aws:RequestTag/kubernetes.io/cluster/{cluster_name}");
    let owned_value = || vec![Text::lit("owned")];
    let region = || Text::lit("").push_pseudo(crate::app::text::Pseudo::Region);
    let profiles = || Text::arn("iam", false, true, Text::lit("instance-profile/*"));
    // The tags Karpenter gives a profile it creates, required on the request...
    let requested = |s: Statement| {
        s.condition("StringEquals", request_owned.as_str(), owned_value())
            .condition(
                "StringEquals",
                "aws:RequestTag/eks:eks-cluster-name",
                vec![Text::lit(cluster_name)],
            )
            .condition(
                "StringEquals",
                "aws:RequestTag/topology.kubernetes.io/region",
                vec![region()],
            )
            .condition(
                "StringLike",
                "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass",
                vec![Text::lit("*")],
            )
    };
    // ...and on the profile acted on.
    let existing = |s: Statement| {
        s.condition("StringEquals", owned.as_str(), owned_value())
            .condition(
                "StringEquals",
                "aws:ResourceTag/topology.kubernetes.io/region",
                vec![region()],
            )
            .condition(
                "StringLike",
                "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass",
                vec![Text::lit("*")],
            )
    };
    let launch_targets = [
        "fleet/*",
        "instance/*",
        "volume/*",
        "network-interface/*",
        "launch-template/*",
        "spot-instances-request/*",
    ];
    // Launching into a reservation names it in the tagged request too.
    let reservation = "capacity-reservation/*";
    let mut tagged_create = Statement::allow([
        "ec2:CreateFleet",
        "ec2:CreateLaunchTemplate",
        "ec2:RunInstances",
    ])
    .sid("CreateOwnedInstances")
    .condition("StringEquals", request_owned.as_str(), owned_value());
    let mut tag_on_create = Statement::allow(["ec2:CreateTags"])
        .sid("TagOnCreate")
        .condition("StringEquals", request_owned.as_str(), owned_value())
        .condition(
            "StringEquals",
            "ec2:CreateAction",
            vec![
                Text::lit("RunInstances"),
                Text::lit("CreateFleet"),
                Text::lit("CreateLaunchTemplate"),
            ],
        );
    for target in launch_targets {
        tagged_create = tagged_create.resource(arn(target));
        tag_on_create = tag_on_create.resource(arn(target));
    }
    tagged_create = tagged_create.resource(arn(reservation));
    PolicyDocument::new()
        .statement(
            Statement::allow(["ec2:CreateFleet", "ec2:RunInstances"])
                .sid("LaunchFromSharedResources")
                .resource(public("image/*"))
                .resource(public("snapshot/*"))
                .resource(arn("security-group/*"))
                .resource(arn("subnet/*"))
                .resource(arn("capacity-reservation/*")),
        )
        .statement(
            Statement::allow(["ec2:CreateFleet", "ec2:RunInstances"])
                .sid("LaunchWithOwnedTemplates")
                .resource(arn("launch-template/*"))
                .condition("StringEquals", owned.as_str(), owned_value()),
        )
        .statement(tagged_create)
        .statement(tag_on_create)
        .statement(
            Statement::allow([
                "ec2:CreateTags",
                "ec2:DeleteLaunchTemplate",
                "ec2:TerminateInstances",
            ])
            .sid("ManageOwnedInstances")
            .resource(arn("instance/*"))
            .resource(arn("launch-template/*"))
            .condition("StringEquals", owned.as_str(), owned_value()),
        )
        .statement(
            Statement::allow([
                "ec2:DescribeAvailabilityZones",
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeImages",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeInstances",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeSubnets",
                "pricing:GetProducts",
            ])
            .sid("Discover")
            .resource("*"),
        )
        .statement(
            Statement::allow(["ssm:GetParameter"])
                .sid("ReadAmiParameters")
                .resource(Text::arn(
                    "ssm",
                    true,
                    false,
                    Text::lit("parameter/aws/service/*"),
                )),
        )
        .statement(
            Statement::allow(["iam:PassRole"])
                .sid("PassNodeRole")
                .resource(Text::attr(node_role_arn))
                .condition(
                    "StringEquals",
                    "iam:PassedToService",
                    vec![
                        Text::lit("ec2.amazonaws.com"),
                        Text::lit("ec2.amazonaws.com.cn"),
                    ],
                ),
        )
        // Instance profiles: created only with the tags Karpenter puts on its own, and changed
        // or deleted only when they carry them (upstream's scoping), so the controller cannot
        // touch another workload's profiles.
        .statement(requested(
            Statement::allow(["iam:CreateInstanceProfile"])
                .sid("CreateOwnedInstanceProfiles")
                .resource(profiles()),
        ))
        .statement(requested(existing(
            Statement::allow(["iam:TagInstanceProfile"])
                .sid("TagOwnedInstanceProfiles")
                .resource(profiles()),
        )))
        .statement(existing(
            Statement::allow([
                "iam:AddRoleToInstanceProfile",
                "iam:DeleteInstanceProfile",
                "iam:RemoveRoleFromInstanceProfile",
            ])
            .sid("ManageOwnedInstanceProfiles")
            .resource(profiles()),
        ))
        .statement(
            Statement::allow(["iam:GetInstanceProfile"])
                .sid("ReadInstanceProfiles")
                .resource(profiles()),
        )
        // Since 1.7 the EC2NodeClass finalizer and the instance-profile garbage collector list
        // the profiles; without this, deleting an EC2NodeClass never finishes. The action
        // has no resource-level scope.
        .statement(
            Statement::allow(["iam:ListInstanceProfiles"])
                .sid("ListInstanceProfiles")
                .resource("*"),
        )
        .statement(
            Statement::allow(["eks:DescribeCluster"])
                .sid("DiscoverApiEndpoint")
                .resource(Text::attr(cluster_arn)),
        )
        .wildcards_because(
            "Karpenter's published controller policy (its CloudFormation reference, statement by \
             statement): it launches instances from images, snapshots, subnets, security groups \
             and reservations it discovers at run time and manages the instances, launch \
             templates and instance profiles it creates, whose ids are unknown when the policy is \
             written; changes are limited to resources tagged for this cluster, and actions \
             without resource-level permissions take `*`.",
        )
}

// --- Stack-file form -------------------------------------------------------------------------

stack_file_shape! {
    pub mod fields = <Karpenter as Construct>::KIND, "Karpenter's controller and node roles." {
        ID: req "karpenter", Ty::Str, "The construct id.";
        CLUSTER: req "cluster", Ty::Ref(Want::Eks), "The EKS cluster.";
    }
}

stack_file_shape! {
    pub mod node_pool_fields = <KarpenterNodePool as Construct>::KIND, "A Karpenter EC2NodeClass and NodePool fed by a Capacity Block." {
        ID: req "karpenter_node_pool", Ty::Str, "The construct id.";
        NAME: req "name", Ty::Str, "The pool's Kubernetes name.";
        KARPENTER: req "karpenter", Ty::Ref(Want::Karpenter), "The Karpenter construct.";
        INSTANCE_TYPE: req "instance_type", Ty::Str, "The EC2 instance type.";
        RESERVATION_ID: opt "reservation_id", Ty::Str, "Select the Capacity Block by id.";
        RESERVATION_TAGS: opt "reservation_tags", Ty::StrMap, "Select the Capacity Block by tags.";
        MAX_NODES: opt "max_nodes", Ty::U32(super::super::nodes::RESERVABLE_COUNT_RANGE), default "1", "At most this many nodes.";
        AMI_VERSION: opt "ami_version", Ty::Str, default super::DEFAULT_AL2023_AMI_VERSION, "The EKS-optimized AL2023 AMI release (the version in `al2023@<version>`).";
        WINDOW: opt "window", Ty::Obj(&super::super::nodes::reservation_window_fields::SHAPE), "When the Capacity Block holds its instances: its timeline (nodes, serving, drain) is derived from it.";
        UPFRONT_FEE_USD: opt "upfront_fee_usd", Ty::F64(super::super::nodes::UPFRONT_FEE_USD), "What the block cost, paid up front (its offering's `UpfrontFee`), USD.";
    }
}

impl super::stack_file::StackFileConstruct for Karpenter {
    const SHAPE: &'static super::stack_file::Shape = &fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        let eks = super::stack_file::required(r.eks(&fields::CLUSTER))?;
        Some(Karpenter::new(id, &eks))
    }
}

impl super::stack_file::StackFileConstruct for KarpenterNodePool {
    const SHAPE: &'static super::stack_file::Shape = &node_pool_fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        use node_pool_fields as f;
        let karpenter = super::stack_file::required(r.karpenter(&f::KARPENTER));
        let reservation = match (r.has(&f::RESERVATION_ID), r.has(&f::RESERVATION_TAGS)) {
            (true, false) => ReservationSelector::Id(r.text(&f::RESERVATION_ID)?),
            (false, true) => {
                ReservationSelector::Tags(r.str_map(&f::RESERVATION_TAGS).into_iter().collect())
            }
            (id_given, tags_given) => {
                let both = id_given && tags_given;
                r.report(
                    if both {
                        Code::StackFileInvalidValue
                    } else {
                        Code::StackFileMissingField
                    },
                    Some(&f::RESERVATION_ID),
                    if both {
                        "give either `reservation_id` or `reservation_tags`, not both"
                    } else {
                        "karpenter_node_pool needs `reservation_id` or `reservation_tags`"
                    },
                    "select the Capacity Block by its id or by its tags",
                );
                return None;
            }
        };
        let mut c = KarpenterNodePool::capacity_block(
            id,
            r.text(&f::NAME)?,
            &karpenter?,
            r.text(&f::INSTANCE_TYPE)?,
            reservation,
        );
        if let Some(v) = r.u32(&f::MAX_NODES) {
            c = c.max_nodes(v);
        }
        if let Some(v) = r.text(&f::AMI_VERSION) {
            c = c.ami_version(v);
        }
        let window = super::nodes::reservation_window(r, &f::WINDOW);
        if let Some(window) = window {
            c = c.within(window);
        }
        if let Some(v) = r.f64(&f::UPFRONT_FEE_USD) {
            c = c.upfront_fee_usd(v);
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ami_releases_are_dated_names() {
        for ok in ["v20260714", DEFAULT_AL2023_AMI_VERSION] {
            assert!(is_ami_release(ok), "{ok}");
        }
        for bad in [
            "latest",
            "",
            "v2026071",
            "v2026-07-14",
            "20260714",
            "v20260714; rm",
            "v99999999",
            "v20261301",
            "v20260700",
        ] {
            assert!(!is_ami_release(bad), "{bad}");
        }
    }
}
