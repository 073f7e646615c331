//! The constructs: typed, format-neutral descriptions of the network, the EKS and HyperPod
//! clusters, their capacity, the inference operator and the vLLM workload. Builders never fail
//! when called; every constraint is checked when the app is synthesized, so all problems are
//! reported at once with their construct paths.
//!
//! Every construct implements one trait, [`Construct`]: hyperforge's own, listed once in the
//! registry at the bottom of this file (`constructs!`, which gives them their stack-file
//! forms), and a user's own, which expand into the same resource kinds and report the same
//! [`Facts`], so cost, the runbook and the cross-construct rules treat them alike. Layers
//! above read [`Facts`] (capacity claimed, models served, clusters created) instead of
//! matching on construct types.

/// The names stack files (and their JSON Schema) use for an enum's values, from one table:
/// `NAMES`, `from_name` and `name`. A variant missing from the table is a compile error.
macro_rules! stack_file_names {
    ($ty:ident { $($variant:ident => $name:literal),* $(,)? }) => {
        impl $ty {
            /// The names stack files use for the values, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// The value a stack file names.
            pub fn from_name(name: &str) -> Option<$ty> {
                $( if name == $name { return Some($ty::$variant); } )*
                None
            }

            /// The name stack files use for this value.
            pub fn name(self) -> &'static str {
                match self { $( $ty::$variant => $name, )* }
            }
        }
    };
}

#[macro_use]
pub mod stack_file;
pub mod cidr;
pub mod dashboard;
/// Text with references, now part of the core model ([`crate::app::text`]).
pub use crate::app::text;
/// IAM policy documents, now part of the resource layer ([`crate::resources::iam`]).
pub use crate::resources::iam;
pub mod controllers;
pub mod drain;
pub mod ecr;
pub mod eks;
pub mod existing;
pub mod fsx_lustre;
pub mod helm;
pub mod hyperpod;
pub mod inference_operator;
pub mod karpenter;
pub mod lifecycle;
pub mod logs;
pub mod monitoring;
pub mod network;
pub mod nodes;
pub mod operations;
pub mod raw;
pub mod security_group;
pub mod vllm;
pub mod weights;

pub use cidr::Ipv4Cidr;
pub use controllers::{
    KedaOperatorRole, KedaOperatorRoleHandle, LoadBalancerController, LoadBalancerControllerHandle,
};
pub use dashboard::{ServingDashboard, ServingDashboardHandle};
pub use ecr::{EcrPullThroughCache, EcrPullThroughCacheHandle};
pub use eks::{AccessEntry, AccessPolicy, EksAddon, EksCluster, EksClusterHandle, EndpointAccess};
pub use existing::{
    ClusterAddOn, ExistingBucket, ExistingEksCluster, ExistingKmsKey, ExistingNetwork,
    ExistingSubnet, SubnetRole,
};
pub use fsx_lustre::{
    DataRepository, FsxLustre, FsxLustreHandle, LustreCompression, LustreDeployment,
};
pub use helm::{ChartSource, HelmRelease, Upload, UploadFile};
pub use hyperpod::{
    Capacity, DeepHealthCheck, HyperPodCluster, HyperPodHandle, InstanceGroup, NodeRecovery, Taint,
    TaintEffect, TrainingPlan,
};
pub use inference_operator::{InferenceOperator, InferenceOperatorHandle};
pub use karpenter::{Karpenter, KarpenterHandle, KarpenterNodePool, ReservationSelector};
pub use lifecycle::{ContainerStorage, LifecycleScripts, LifecycleScriptsHandle};
pub use logs::{LogShipping, LogShippingHandle};
pub use monitoring::{AlertFacts, PrometheusMonitoring, PrometheusMonitoringHandle};
pub use network::{NatGateways, Network, NetworkHandle};
pub use nodes::{
    AmiType, CapacityBlock, CapacityBlockPurchase, ManagedNodeGroup, NodeCapacity, NodeGroupHandle,
    OnDemandCapacityReservation, ReservationWindow,
};
pub use operations::{
    AlarmTopic, AlarmTopicHandle, CapacityEndWarning, CapacityEndWarningHandle, EndingCapacity,
};
pub use raw::{KubernetesManifest, RawResource, RawResourceHandle};
pub use security_group::{ClusterSecurityGroup, ClusterSecurityGroupHandle};
pub use text::{Part, Pseudo, Text};
pub use vllm::{
    Autoscaling, Exposure, InferenceEndpoint, InferenceEndpointHandle, SecretKeyRef, StartupBudget,
    StorageThroughput, VllmDeployment, VllmDeploymentHandle, VllmServer,
};
pub use weights::{BucketName, ModelStore, ModelStoreHandle, WeightsStaging, WeightsStagingHandle};

use crate::app::{kind, AnyConstruct, AttrRef, Node, Ref, Stack, StageId, Tags};
use crate::catalog::capacity::Reservation;
use crate::diagnostics::Diagnostics;
use crate::resources::{ResourceGraph, Scope};
use std::any::Any;
use std::fmt;

/// A construct: a builder that can be placed in a stack's stage.
///
/// Implemented by every hyperforge construct, and open to users: a team's own construct
/// (a composite of resources, a resource hyperforge has no builder for) implements it, is
/// added with [`Stack::add`] like any other, expands into the [`crate::resources`] kinds
/// every backend lowers, and may report [`Facts`] (capacity it claims, models it serves) so
/// that cost, the runbook and the cross-construct rules see it. A construct is data (`Send +
/// Sync`): the stacks of an app are synthesized on several threads.
///
/// ```
/// use hyperforge::app::{kind, Ref, Stack};
/// use hyperforge::constructs::{Construct, Context, Facts};
/// use hyperforge::diagnostics::{Code, Diagnostics};
/// use hyperforge::resources::{iam::account_key_policy, KmsKey, Scope};
///
/// /// A KMS key for a team's own data, with the account's root as its only administrator.
/// #[derive(Clone, Debug)]
/// struct TeamKey { id: String, team: String }
///
/// impl Construct for TeamKey {
///     type Handle = Ref<kind::KmsKey>;
///     const KIND: &'static str = "team_key";
///     fn id(&self) -> &str { &self.id }
///     fn handle(&self, stack: &str) -> Self::Handle { Ref::new(stack, format!("{}/Key", self.id)) }
///     fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
///         if self.team.is_empty() {
///             ds.report(Code::UserConstruct, cx.path, "the team name is empty", "name the team owning the key");
///         }
///     }
///     fn expand(&self, scope: &mut Scope<'_>) {
///         scope.add("Key", KmsKey {
///             description: format!("data of team {}", self.team),
///             policy: account_key_policy(None),
///         });
///     }
/// }
///
/// let mut stack = Stack::new("demo", "us-west-2");
/// let data = stack.cloudformation_stage("data");
/// let key = stack.add(data, TeamKey { id: "TeamKey".into(), team: "research".into() });
/// assert_eq!(key.path(), "TeamKey/Key");
/// ```
pub trait Construct: Clone + fmt::Debug + Send + Sync + 'static {
    /// Typed references to the construct's resources, returned by `Stack::add`.
    type Handle;
    /// The construct's kind as stack files and messages name it (`network`, `eks_cluster`).
    const KIND: &'static str;
    /// The construct's id (first segment of its paths).
    fn id(&self) -> &str;
    /// The handle for this construct in stack `stack`.
    fn handle(&self, stack: &str) -> Self::Handle;
    /// Every reference the construct makes to other resources.
    fn references(&self) -> Vec<AttrRef> {
        Vec::new()
    }
    /// Checks the construct's own rules (structure, names, ranges, the catalog facts of its
    /// own fields). Rules that span constructs read [`Facts`] in `crate::validate`. A user
    /// construct reports its own problems with [`Code::UserConstruct`](crate::Code) (or any
    /// code that fits).
    fn validate(&self, _cx: &Context<'_>, _ds: &mut Diagnostics) {}
    /// The neutral facts the layers above read: capacity, served models, clusters.
    fn facts(&self, _cx: &Context<'_>) -> Facts<'_> {
        Facts::default()
    }
    /// Adds the construct's resources to `scope`, in the order they are emitted: the one
    /// decomposition every backend lowers.
    fn expand(&self, scope: &mut Scope<'_>);
}

/// The object-safe form of [`Construct`] a stack stores: what every layer above the core
/// model calls on a placed construct, whatever its type.
pub trait DynConstruct: fmt::Debug + Send + Sync {
    /// See [`Construct::id`].
    fn id(&self) -> &str;
    /// See [`Construct::KIND`].
    fn kind(&self) -> &'static str;
    /// See [`Construct::references`].
    fn references(&self) -> Vec<AttrRef>;
    /// See [`Construct::validate`].
    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics);
    /// See [`Construct::facts`].
    fn facts(&self, cx: &Context<'_>) -> Facts<'_>;
    /// See [`Construct::expand`].
    fn expand(&self, scope: &mut Scope<'_>);
    /// The construct as `Any`, for code that needs its own type back.
    fn as_any(&self) -> &dyn Any;
    /// A boxed copy.
    fn clone_dyn(&self) -> Box<dyn DynConstruct>;
}

impl<C: Construct> DynConstruct for C {
    fn id(&self) -> &str {
        Construct::id(self)
    }
    fn kind(&self) -> &'static str {
        C::KIND
    }
    fn references(&self) -> Vec<AttrRef> {
        Construct::references(self)
    }
    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        Construct::validate(self, cx, ds)
    }
    fn facts(&self, cx: &Context<'_>) -> Facts<'_> {
        Construct::facts(self, cx)
    }
    fn expand(&self, scope: &mut Scope<'_>) {
        Construct::expand(self, scope)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn clone_dyn(&self) -> Box<dyn DynConstruct> {
        Box::new(self.clone())
    }
}

/// How a stack stores a construct: the core model's type-erased view ([`AnyConstruct`]) over
/// the object-safe construct this layer dispatches to.
#[derive(Debug)]
struct Stored(Box<dyn DynConstruct>);

impl AnyConstruct for Stored {
    fn id(&self) -> &str {
        self.0.id()
    }
    fn kind(&self) -> &'static str {
        self.0.kind()
    }
    fn references(&self) -> Vec<AttrRef> {
        self.0.references()
    }
    fn as_any(&self) -> &dyn Any {
        self.0.as_any()
    }
    fn as_stored(&self) -> &dyn Any {
        self
    }
    fn clone_box(&self) -> Box<dyn AnyConstruct> {
        Box::new(Stored(self.0.clone_dyn()))
    }
}

/// The help line for an instance type the catalog does not know: the catalog's GPU types, by
/// their `ml.` names for HyperPod (`ml`) or their EC2 names.
pub(crate) fn known_gpu_types_help(ml: bool) -> String {
    let names: Vec<String> = crate::catalog::instances()
        .iter()
        .filter(|i| i.gpu_count > 0)
        .map(|i| if ml { i.ml_name() } else { i.name.to_owned() })
        .collect();
    format!("use a GPU type the catalog knows: {}", names.join(", "))
}

/// Expands every construct of `stack` into the resource layer, once; `tags` are the stack's
/// effective tags ([`Stack::effective_tags`]).
pub fn expand(stack: &Stack, tags: &Tags) -> ResourceGraph {
    expand_where(stack, tags, |_| true)
}

/// [`expand`], of the constructs `keep` accepts only (references to the others dangle).
pub fn expand_where(stack: &Stack, tags: &Tags, keep: impl Fn(&Node) -> bool) -> ResourceGraph {
    let mut graph = ResourceGraph::default();
    for node in stack.nodes().iter().filter(|n| keep(n)) {
        let Some(construct) = ConstructRef::of(node.construct.as_ref()) else {
            continue;
        };
        graph.expand_node(stack, tags, node, |scope| construct.expand(scope));
    }
    graph.order_after_nodes();
    graph
}

/// Where a construct sits while it is checked or described: its stack and display path.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The stack holding the construct.
    pub stack: &'a Stack,
    /// The construct's display path (`stack/Network`).
    pub path: &'a str,
}

/// What a construct contributes that other parts (cost, the runbook, cross-construct rules,
/// the manifest) need to know, without knowing the construct's type.
#[derive(Clone, Debug, Default)]
pub struct Facts<'a> {
    /// The EKS cluster the construct creates.
    pub eks_cluster: Option<EksClusterFacts>,
    /// The name of the HyperPod cluster the construct creates.
    pub hyperpod_cluster: Option<String>,
    /// Instances the construct runs (or may run), one claim per group or pool.
    pub capacity: Vec<CapacityClaim>,
    /// Models the construct serves.
    pub served_models: Vec<ServedModel<'a>>,
    /// Kubernetes objects that provision nodes (Karpenter NodePool names).
    pub node_pools: Vec<String>,
    /// Jobs staging model weights into a store, waited for before later stages.
    pub weight_stagings: Vec<WeightsStagingFacts>,
    /// Warnings scheduled before reserved capacity ends.
    pub capacity_ends: Vec<CapacityEndFacts>,
    /// Prometheus alerting rules the construct deploys: name, expression, threshold, `for`.
    pub alerts: Vec<AlertFacts>,
    /// Grafana dashboards the construct ships (their ConfigMaps' names).
    pub dashboards: Vec<String>,
    /// The security groups of the nodes the construct launches beyond the EKS cluster's own
    /// (HyperPod's): whatever reaches the pods on them (a metrics collector) must be in one.
    pub node_security_groups: Vec<AttrRef>,
}

/// A warning before reserved capacity ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapacityEndFacts {
    /// The Capacity Block's reservation id, if it is one.
    pub reservation_id: Option<String>,
    /// The training plan's ARN, if it is one.
    pub training_plan_arn: Option<String>,
    /// When the capacity ends (RFC 3339, UTC).
    pub end_time: String,
    /// Hours before the end the scheduled warning is sent.
    pub lead_hours: u32,
}

/// A Job copying a model at one revision into a model store.
#[derive(Clone, Debug, PartialEq)]
pub struct WeightsStagingFacts {
    /// The store's construct id.
    pub store: String,
    /// The store's bucket name, as templates spell it.
    pub bucket: crate::app::text::Text,
    /// The store's output holding the bucket's name.
    pub bucket_output: crate::app::AttrRef,
    /// The model staged.
    pub model_id: String,
    /// Its revision.
    pub revision: String,
    /// The Job's name.
    pub job: String,
    /// Its namespace.
    pub namespace: String,
    /// The checkpoint's size, when known.
    pub weight_bytes: Option<u64>,
    /// The node labels the Job runs on (empty: any node).
    pub node_selector: std::collections::BTreeMap<String, String>,
    /// The Secret holding the Hub token the Job reads, if any.
    pub hf_token: Option<SecretKeyRef>,
    /// The image the Job runs.
    pub image: String,
}

/// An EKS cluster a construct creates or imports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EksClusterFacts {
    /// The cluster name.
    pub name: String,
    /// The construct path of the cluster resource handles name (`Eks/Cluster`).
    pub resource_path: String,
    /// Whether the cluster exists already (an import): its nodes and add-ons are not all in
    /// the description.
    pub imported: bool,
    /// The Kubernetes version.
    pub kubernetes_version: String,
    /// The `Name` tag of the admin host reaching the private endpoint, if one is created.
    pub admin_host: Option<String>,
    /// What an imported cluster is stated to run already (empty for a created cluster, whose
    /// add-ons are the stack's own).
    pub runs: Vec<ClusterAddOn>,
}

/// Which service launches the instances of a claim (the region offer differs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Launcher {
    /// Amazon EC2 (EKS managed node groups, Karpenter).
    Ec2,
    /// SageMaker HyperPod (`ml.` instance types).
    HyperPod,
}

/// Where a claim's instances come from.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CapacitySource {
    /// On-demand instances.
    OnDemand,
    /// A SageMaker training plan.
    TrainingPlan {
        /// The plan's ARN.
        arn: String,
        /// The zone id of the reserved capacity, when given.
        availability_zone_id: Option<String>,
        /// The instances the plan reserves, when given.
        reserved_instance_count: Option<i64>,
        /// When the plan holds its instances (UTC minutes since 1970: start, end), when given
        /// and valid.
        window: Option<(i64, i64)>,
        /// When the endpoint stops taking requests (UTC minutes), when given and it parses.
        drain_by: Option<i64>,
        /// What it cost, paid up front, USD, when given and valid.
        upfront_fee_usd: Option<f64>,
    },
    /// An EC2 On-Demand Capacity Reservation.
    CapacityReservation {
        /// The reservation id (`cr-...`).
        reservation: String,
        /// The zone id of the reservation, when known.
        availability_zone_id: Option<String>,
        /// The instances the reservation holds, when given.
        reserved_instance_count: Option<i64>,
    },
    /// An EC2 Capacity Block.
    CapacityBlock {
        /// The reservation id (`cr-...`), or a description of the selector.
        reservation: String,
        /// The zone id of the reservation, when known.
        availability_zone_id: Option<String>,
        /// The instances the block reserves, when given.
        reserved_instance_count: Option<i64>,
        /// When the block holds its instances (UTC minutes since 1970: start, end), when
        /// given and valid.
        window: Option<(i64, i64)>,
        /// When the endpoint stops taking requests (UTC minutes), when given and it parses.
        drain_by: Option<i64>,
        /// What it cost, paid up front, USD, when given and valid.
        upfront_fee_usd: Option<f64>,
    },
}

/// Instances a construct runs or may run.
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityClaim {
    /// The display path of the group or pool (`stack/HyperPod/gpu`).
    pub path: String,
    /// The instance type's catalog (EC2) name (`p6-b300.48xlarge`).
    pub instance_type: String,
    /// The name the service uses (`ml.p6-b300.48xlarge` on HyperPod).
    pub service_instance_type: String,
    /// Who launches the instances.
    pub launcher: Launcher,
    /// Where they come from.
    pub source: CapacitySource,
    /// How many instances run when the construct is deployed (desired size).
    pub count: i64,
    /// The most the claim can grow to (maximum size).
    pub max_count: i64,
    /// Whether the claim is a Karpenter pool (nodes appear on demand up to `max_count`).
    pub provisioned_on_demand: bool,
    /// The Kubernetes labels its nodes carry (what a node selector matches).
    pub node_labels: std::collections::BTreeMap<String, String>,
    /// The subnets its instances launch in, when the description names them (a node group's;
    /// the GPU subnets a Karpenter pool selects by tag); empty when the service places them
    /// (HyperPod).
    pub subnets: Vec<Ref<kind::Subnet>>,
    /// The node-local storage holding each node's container images and pod volumes (where a
    /// served model's weights are downloaded to), when known.
    pub pod_storage: Option<PodStorage>,
    /// Whether its instances launch with EFA interfaces (a node group's `efa`): what a replica
    /// spanning several nodes needs between them.
    pub efa_interfaces: bool,
}

/// The node-local storage of a claim's nodes that holds container images and pod volumes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodStorage {
    /// Its size in bytes, per node.
    pub bytes: u64,
    /// What it is, for messages (`the local NVMe at /opt/dlami/nvme`).
    pub what: String,
    /// The field of the claim's construct that chose it (for diagnostics).
    pub field: &'static str,
    /// How to get more, for the help line.
    pub remedy: String,
}

impl PodStorage {
    /// EC2 nodes (EKS node groups, Karpenter pools): the local NVMe as one RAID 0 volume when
    /// `raid0` and the type has any (nodeadm puts containerd and kubelet there), else the root
    /// volume of `root_gib` GiB.
    pub fn ec2(instance_type: &str, raid0: bool, root_gib: i64) -> Option<PodStorage> {
        let instance = crate::catalog::instance(instance_type)?;
        if raid0 && instance.local_nvme_gb > 0 {
            return Some(PodStorage {
                bytes: instance.local_nvme_gb.saturating_mul(1_000_000_000),
                what: format!("the local NVMe as RAID 0 ({} GB)", instance.local_nvme_gb),
                field: "instance_type",
                remedy: "use an instance type with more local NVMe".to_owned(),
            });
        }
        let gib = u64::try_from(root_gib).ok()?;
        Some(PodStorage {
            bytes: gib.saturating_mul(1 << 30),
            what: format!("the {gib} GiB root volume"),
            field: "root_volume_gb",
            remedy: "raise the root volume, or use an instance type with local NVMe".to_owned(),
        })
    }
}

/// The engine serving a model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// vLLM's OpenAI-compatible server (`vllm serve`).
    Vllm,
}

/// A served model as the model-aware rules read it (weights and KV cache against GPU memory,
/// attention heads and expert slices against the parallel sizes), whatever engine serves it and
/// however many nodes one replica spans: the seam between a server's own settings and the
/// rules, so a multi-node layout or a second engine is checked by the same rules.
#[derive(Clone, Debug, PartialEq)]
pub struct ServingShape {
    /// The engine.
    pub engine: Engine,
    /// Its version, when the image names one (`v0.11.2` of `vllm/vllm-openai:v0.11.2`).
    pub engine_version: Option<String>,
    /// The image the engine runs, as the container names it.
    pub image: String,
    /// Every command-line word hyperforge starts the engine with, over all the ways the
    /// construct launches it (the model's path or id, a revision pin, a load format), the
    /// user's own arguments excluded.
    pub args: Vec<String>,
    /// The user's own arguments, in order.
    pub extra_args: Vec<String>,
    /// The engine's environment: each variable's name and its literal value (`None` for a
    /// value read from a Secret).
    pub env: Vec<(String, Option<String>)>,
    /// The model's Hugging Face id.
    pub model_id: String,
    /// The model's facts (the catalog's or the description's own), with an explicit weight
    /// size in place of the model's; `None` for a model the catalog does not hold.
    pub model: Option<crate::catalog::Model>,
    /// Tensor parallel size (0: invalid, reported by the server's construct).
    pub tensor_parallel: u32,
    /// Pipeline parallel size (1: one stage).
    pub pipeline_parallel: u32,
    /// Nodes one replica spans.
    pub nodes_per_replica: u32,
    /// Decode context parallel size (1: off).
    pub decode_context_parallel: u32,
    /// The longest sequence the engine accepts, tokens, when set.
    pub max_model_len: Option<u64>,
    /// The fraction of GPU memory the engine may use.
    pub gpu_memory_utilization: f64,
}

/// A model served by a construct, with the hardware each replica gets.
#[derive(Clone, Debug)]
pub struct ServedModel<'a> {
    /// What the model-aware rules read.
    pub shape: ServingShape,
    /// The Kubernetes object's name.
    pub object_name: &'a str,
    /// Its namespace.
    pub namespace: &'a str,
    /// The vLLM server.
    pub server: &'a VllmServer,
    /// The instance type every replica runs on (catalog name).
    pub instance_type: &'a str,
    /// GPUs per replica.
    pub gpus: u32,
    /// Replicas.
    pub replicas: i64,
    /// The EFA devices each replica's pod requests (0: none; a HyperPod endpoint's worker
    /// cannot request them).
    pub efa_devices: u32,
    /// Served through the HyperPod inference operator (`InferenceEndpointConfig`).
    pub hyperpod: bool,
    /// How the replicas scale, when they do.
    pub autoscaling: Option<&'a Autoscaling>,
    /// How the model is exposed.
    pub exposure: Exposure,
}

impl ServedModel<'_> {
    /// The catalog's cold start of the server on its instance type (node ready to serving),
    /// seconds, when estimated.
    pub fn cold_start_secs(&self) -> Option<u64> {
        self.server
            .cold_start(self.instance_type, self.hyperpod)
            .map(|c| c.total_secs)
    }
}

impl CapacitySource {
    /// The reserved window, when given and valid: its kind, its start and end and the drain
    /// time given (UTC minutes).
    pub fn window(&self) -> Option<(Reservation, (i64, i64), Option<i64>)> {
        match self {
            CapacitySource::OnDemand | CapacitySource::CapacityReservation { .. } => None,
            CapacitySource::TrainingPlan {
                window, drain_by, ..
            } => Some((Reservation::TrainingPlan, (*window)?, *drain_by)),
            CapacitySource::CapacityBlock {
                window, drain_by, ..
            } => Some((Reservation::CapacityBlock, (*window)?, *drain_by)),
        }
    }

    /// What the reservation cost up front, USD, when given.
    pub fn upfront_fee_usd(&self) -> Option<f64> {
        match self {
            CapacitySource::OnDemand | CapacitySource::CapacityReservation { .. } => None,
            CapacitySource::TrainingPlan {
                upfront_fee_usd, ..
            }
            | CapacitySource::CapacityBlock {
                upfront_fee_usd, ..
            } => *upfront_fee_usd,
        }
    }
}

/// The schedule of `claim`'s Capacity Block or training plan, when its window is given: its
/// nodes serve after the cold start of the model served on its instance type (`cold_starts`:
/// EC2 instance type, seconds), and each server is given its termination grace to drain.
pub fn reservation_schedule(
    claim: &CapacityClaim,
    cold_starts: &[(String, Option<u64>)],
) -> Option<crate::catalog::capacity::BlockSchedule> {
    use crate::catalog::capacity::minutes_from_secs;
    let (kind, (start, end), drain_by) = claim.source.window()?;
    let ec2_type = claim
        .instance_type
        .strip_prefix("ml.")
        .unwrap_or(&claim.instance_type);
    // HyperPod's served models name the `ml.` type.
    let cold = cold_starts
        .iter()
        .find(|(t, _)| t.strip_prefix("ml.").unwrap_or(t) == ec2_type)
        .and_then(|(_, secs)| *secs)
        .map(minutes_from_secs);
    Some(window_schedule(kind, start, end, drain_by, cold))
}

/// The schedule of a reservation of kind `kind` open from `start` to `end` (UTC minutes) whose
/// nodes serve after `cold_start_minutes`: drained at `drain_by` when given (and valid), else
/// the servers' termination grace before the service's scale-down. The one derivation the node
/// group's schedules, the inventory's timeline and `hyperforge cost` share.
pub fn window_schedule(
    kind: Reservation,
    start: i64,
    end: i64,
    drain_by: Option<i64>,
    cold_start_minutes: Option<i64>,
) -> crate::catalog::capacity::BlockSchedule {
    crate::catalog::capacity::reservation_schedule(
        kind,
        start,
        end,
        cold_start_minutes,
        vllm::objects::drain_minutes(),
    )
    .drained_by(drain_by)
}

impl Stack {
    /// Places `construct` in `stage` and returns its handle (typed references to its resources).
    /// The caller's source location is kept: diagnostics about the construct point at it.
    #[track_caller]
    pub fn add<C: Construct>(&mut self, stage: StageId, construct: C) -> C::Handle {
        let handle = construct.handle(self.name());
        self.push_node(
            stage,
            Box::new(Stored(Box::new(construct))),
            Some(std::panic::Location::caller()),
        );
        handle
    }
}

/// The typed view of a stored construct: what the layers above call on it, whatever its type.
#[derive(Clone, Copy, Debug)]
pub struct ConstructRef<'a>(&'a dyn DynConstruct);

impl<'a> ConstructRef<'a> {
    /// The view of `construct` (`None` for a value no `Stack::add` stored).
    pub fn of(construct: &'a dyn AnyConstruct) -> Option<ConstructRef<'a>> {
        let stored = construct.as_stored().downcast_ref::<Stored>()?;
        Some(ConstructRef(stored.0.as_ref()))
    }

    /// The construct's kind (`network`, ...).
    pub fn kind(self) -> &'static str {
        self.0.kind()
    }

    /// Runs the construct's own rules.
    pub fn validate(self, cx: &Context<'_>, ds: &mut Diagnostics) {
        self.0.validate(cx, ds)
    }

    /// The construct's facts.
    pub fn facts(self, cx: &Context<'_>) -> Facts<'a> {
        self.0.facts(cx)
    }

    /// Expands the construct into `scope`.
    pub fn expand(self, scope: &mut Scope<'_>) {
        self.0.expand(scope)
    }

    /// The construct as its own type, when it is a `T`.
    pub fn downcast<T: Construct>(self) -> Option<&'a T> {
        self.0.as_any().downcast_ref::<T>()
    }

    /// Whether the construct is one of hyperforge's own (listed in the registry).
    pub fn is_builtin(self) -> bool {
        KINDS.contains(&self.kind())
    }
}

/// The registry: every construct of hyperforge's own, once. Generates [`KINDS`], their
/// stack-file shapes and the stack-file kind dispatch.
macro_rules! constructs {
    ($($variant:ident($ty:ty)),* $(,)?) => {
        /// Every registered kind, in registry order.
        pub const KINDS: &[&str] = &[$( <$ty as Construct>::KIND ),*];

        /// Every registered construct's stack-file shape, in registry order (a registered
        /// construct without a stack-file form is a compile error).
        pub const STACK_FILE_SHAPES: &[&stack_file::Shape] =
            &[$( <$ty as stack_file::StackFileConstruct>::SHAPE ),*];

        /// Visits the registered construct type whose kind is `kind`.
        pub fn visit_kind<V: stack_file::KindVisitor>(kind: &str, visitor: V) -> Option<V::Out> {
            $( if kind == <$ty as Construct>::KIND {
                return Some(visitor.visit::<$ty>());
            } )*
            None
        }
    };
}

constructs! {
    Network(Network),
    SecurityGroup(ClusterSecurityGroup),
    Eks(EksCluster),
    Lifecycle(LifecycleScripts),
    HyperPod(HyperPodCluster),
    InferenceOperator(InferenceOperator),
    InferenceEndpoint(InferenceEndpoint),
    VllmDeployment(VllmDeployment),
    NodeGroup(ManagedNodeGroup),
    LoadBalancerController(LoadBalancerController),
    KedaOperatorRole(KedaOperatorRole),
    Karpenter(Karpenter),
    KarpenterNodePool(KarpenterNodePool),
    FsxLustre(FsxLustre),
    EcrPullThroughCache(EcrPullThroughCache),
    ModelStore(ModelStore),
    WeightsStaging(WeightsStaging),
    AlarmTopic(AlarmTopic),
    CapacityEndWarning(CapacityEndWarning),
    LogShipping(LogShipping),
    PrometheusMonitoring(PrometheusMonitoring),
    ServingDashboard(ServingDashboard),
}

/// A stored construct with its typed view, stack and display path.
#[derive(Clone, Copy, Debug)]
pub struct Placed<'a> {
    /// The node as the stack stores it.
    pub node: &'a Node,
    /// The typed view.
    pub construct: ConstructRef<'a>,
    /// Where it sits.
    pub cx: Context<'a>,
}

impl<'a> Placed<'a> {
    /// The construct's facts.
    pub fn facts(&self) -> Facts<'a> {
        self.construct.facts(&self.cx)
    }
}

/// The constructs of `nodes` (a stack's nodes, or a stage's) with their typed views.
fn placed<'a>(
    stack: &'a Stack,
    paths: &'a [String],
    nodes: impl Iterator<Item = (usize, &'a Node)> + 'a,
) -> impl Iterator<Item = Placed<'a>> + 'a {
    nodes.filter_map(move |(index, node)| {
        Some(Placed {
            node,
            construct: ConstructRef::of(node.construct.as_ref())?,
            cx: Context {
                stack,
                path: &paths[index],
            },
        })
    })
}

/// Every construct of a stack in the order added, with display paths computed once.
#[derive(Debug)]
pub struct Placements<'a> {
    stack: &'a Stack,
    paths: Vec<String>,
}

impl<'a> Placements<'a> {
    /// The constructs of `stack`.
    pub fn new(stack: &'a Stack) -> Self {
        Placements {
            stack,
            paths: stack
                .nodes()
                .iter()
                .map(|n| stack.display_path(&n.id))
                .collect(),
        }
    }

    /// Every construct.
    pub fn all(&self) -> impl Iterator<Item = Placed<'_>> + '_ {
        placed(
            self.stack,
            &self.paths,
            self.stack.nodes().iter().enumerate(),
        )
    }

    /// The constructs of `stage`.
    pub fn in_stage(&self, stage: StageId) -> impl Iterator<Item = Placed<'_>> + '_ {
        placed(
            self.stack,
            &self.paths,
            self.stack
                .nodes()
                .iter()
                .enumerate()
                .filter(move |(_, n)| n.stage == stage),
        )
    }
}
