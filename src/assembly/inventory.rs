//! What a stack runs, as `manifest.json` records it for the people operating it: its clusters,
//! its GPU capacity and where that comes from, the endpoints it serves, the Jobs staging
//! weights, the warnings before reserved capacity ends, its node pools, dashboards and alerts.
//! Synthesis derives it from the description once; the runbook and `hyperforge list` read it
//! from here, never from the description.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a stack runs (`stacks[].inventory` in `manifest.json`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Inventory {
    /// The stack's description, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The EKS cluster's Kubernetes version, when the stack has a cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// The HyperPod cluster the stack creates, and its stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hyperpod_cluster: Option<InStage>,
    /// Every group or pool of instances, in the description's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity: Vec<CapacityEntry>,
    /// The served model endpoints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<EndpointEntry>,
    /// The Jobs copying model weights into a store.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stagings: Vec<StagingEntry>,
    /// The warnings scheduled before reserved capacity ends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_ends: Vec<CapacityEndEntry>,
    /// The Karpenter NodePools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_pools: Vec<InStage>,
    /// The Grafana dashboards (their ConfigMaps in `kube-system`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dashboards: Vec<InStage>,
    /// The Prometheus alerting rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alerts: Vec<AlertEntry>,
    /// The existing EKS cluster the stack deploys onto, when it imports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported_cluster: Option<ImportedCluster>,
}

/// An existing EKS cluster a stack deploys onto, and what it is stated to run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ImportedCluster {
    /// Its name.
    pub name: String,
    /// The add-ons the description states it runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<AddOn>,
}

/// An add-on an imported cluster runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AddOn {
    /// The EKS Pod Identity agent add-on.
    PodIdentityAgent,
    /// The AWS Load Balancer Controller.
    LoadBalancerController,
    /// The NVIDIA device plugin.
    NvidiaDevicePlugin,
}

/// A named object and the stage that creates it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InStage {
    /// Its name.
    pub name: String,
    /// The stage creating it.
    pub stage: String,
}

/// Which service launches a group's instances.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LaunchedBy {
    /// Amazon EC2 (an EKS managed node group or Karpenter).
    Ec2,
    /// SageMaker HyperPod.
    #[serde(rename = "hyperpod")]
    HyperPod,
}

/// Where a group's instances come from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CapacitySourceEntry {
    /// On-demand instances.
    OnDemand,
    /// An EC2 On-Demand Capacity Reservation.
    CapacityReservation {
        /// The reservation id the description was synthesized with (`cr-...`).
        reservation: String,
        /// The stack input holding the id at deploy time.
        input: String,
        /// The reservation's zone id, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        zone_id: Option<String>,
        /// The instances the reservation holds, when given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reserved_count: Option<i64>,
    },
    /// An EC2 Capacity Block.
    CapacityBlock {
        /// The reservation id the description was synthesized with (`cr-...`), or how a
        /// Karpenter pool selects blocks (`tag key=value`).
        reservation: String,
        /// The stack input holding the id at deploy time, when it is one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<String>,
        /// The reservation's zone id, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        zone_id: Option<String>,
        /// The instances the block reserves, when given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reserved_count: Option<i64>,
        /// The block's window and what happens in it, when the window was given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeline: Option<Timeline>,
    },
    /// A SageMaker training plan.
    TrainingPlan {
        /// The plan's ARN the description was synthesized with.
        arn: String,
        /// The stack input holding the ARN at deploy time, when it is one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<String>,
        /// The reserved capacity's zone id, when given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        zone_id: Option<String>,
        /// The instances the plan reserves, when given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reserved_count: Option<i64>,
        /// The plan's window and what happens in it, when the window was given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeline: Option<Timeline>,
    },
}

/// A group (or Karpenter pool) of instances.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CapacityEntry {
    /// The construct path of the group or pool (`stack/Gpu`).
    pub path: String,
    /// The stage creating it.
    pub stage: String,
    /// The EC2 instance type (`p6-b300.48xlarge`).
    pub instance_type: String,
    /// The type as the service names it (`ml.p6-b300.48xlarge` on HyperPod).
    pub service_instance_type: String,
    /// The service launching the instances.
    pub launched_by: LaunchedBy,
    /// Whether it is a Karpenter pool: nodes appear when pods ask, up to `max_count`.
    pub pool: bool,
    /// Instances running once deployed (the desired size).
    pub count: i64,
    /// The most it grows to.
    pub max_count: i64,
    /// Where the instances come from.
    pub source: CapacitySourceEntry,
}

/// A reservation's window and what happens in it, derived at synthesis from its start and end,
/// the served model's cold start and the services' published lead times. Times are RFC 3339 in
/// UTC to the minute (`2026-12-10T04:55Z`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Timeline {
    /// The reservation opens: its instances can launch, and its group is scaled up.
    pub start: String,
    /// The endpoint serves: the start plus the model's cold start on this instance type, when
    /// the stack serves a model there and its cold start is estimated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving_from: Option<String>,
    /// Traffic must stop and the group scale to zero: before the service's own scale-down,
    /// less the time a server is given to finish its requests.
    pub drain_by: String,
    /// The CronJob (`namespace/name`) that drains the group at `drain_by`: cordons its nodes
    /// and evicts their pods, on HyperPod, which drains nothing itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_job: Option<String>,
    /// EKS scales a managed node group on the block to zero (Karpenter drains its nodes).
    pub scale_down_at: String,
    /// EC2 begins terminating the block's instances.
    pub terminations_from: String,
    /// The reservation ends.
    pub end: String,
    /// The duration it was bought for, days.
    pub days: i64,
    /// The cold start counted, minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_start_minutes: Option<i64>,
    /// Minutes paid for but not serving: the cold start and the time from `drain_by` to the
    /// end, when the cold start is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_minutes: Option<i64>,
}

/// How an endpoint is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReachedThrough {
    /// An internal Network Load Balancer.
    InternalLoadBalancer,
    /// An internet-facing Network Load Balancer.
    InternetFacingLoadBalancer,
    /// A ClusterIP Service (`kubectl port-forward`).
    ClusterIp,
}

/// A Secret key an object reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretKeyEntry {
    /// The Secret's name.
    pub name: String,
    /// The key inside it.
    pub key: String,
}

/// A served model endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EndpointEntry {
    /// The Kubernetes object's name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// The stage applying it.
    pub stage: String,
    /// The Hugging Face model id.
    pub model_id: String,
    /// The name requests give as `model`.
    pub served_model_name: String,
    /// The pinned commit of the model repository, when pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Whether the server runs code from the model repository.
    pub remote_code: bool,
    /// The image reference the container runs.
    pub image: String,
    /// The image as the description gives it (its tag), when `image` pins it by digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_as_given: Option<String>,
    /// The digest the image is pinned to, when pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_digest: Option<String>,
    /// The engine release the image's tag names (`0.27.0`): the one the server's options were
    /// checked against and its pod checks at start-up (init container `engine-release`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_release: Option<String>,
    /// The Secret key holding the Hugging Face token, when the server reads one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hf_token: Option<SecretKeyEntry>,
    /// The Secret key holding the API key, when the endpoint requires one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<SecretKeyEntry>,
    /// GPUs per replica (per pod, one node's, when a replica spans several nodes).
    pub gpus: u32,
    /// Nodes each replica spans: above 1, a LeaderWorkerSet group of one pod per node.
    #[serde(default = "one_node", skip_serializing_if = "is_one_node")]
    pub nodes_per_replica: u32,
    /// For a replica over several nodes: the NCCL all-reduce bus bandwidth, MB/s, each pod's
    /// `fabric-check` init container requires before the server starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric_check_floor_mb_per_s: Option<u64>,
    /// The shared memory a Deployment's pod mounts for that many GPUs, GiB.
    pub shm_gib: u64,
    /// The port the server listens on.
    pub port: u16,
    /// Served through the HyperPod inference operator rather than a Deployment.
    pub operator: bool,
    /// How clients reach it.
    pub reached_through: ReachedThrough,
    /// The startup allowance, seconds (download, load and warm-up, with margin).
    pub startup_secs: u64,
    /// The catalog's cold-start estimate from node ready to serving, seconds, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_start_secs: Option<u64>,
    /// How long a Deployment's rollout may take: its progress deadline, seconds.
    pub rollout_deadline_secs: u64,
    /// Whether the server reads a staged copy of the weights rather than the Hub.
    pub staged: bool,
    /// Where the weights come from, for people.
    pub weights_source: String,
}

fn one_node() -> u32 {
    1
}

fn is_one_node(nodes: &u32) -> bool {
    *nodes == 1
}

/// A Job copying a model at one revision into a store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StagingEntry {
    /// The stage running it.
    pub stage: String,
    /// The model.
    pub model_id: String,
    /// Its revision.
    pub revision: String,
    /// The store's bucket: its name, or, when the deployment resolves the name, its form
    /// with `<account-id>` in the place of the account deployed to.
    pub bucket: String,
    /// The output of the store's stage holding the bucket's name, when the deployment
    /// resolves the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket_output: Option<String>,
    /// The key prefix of the copy (`<model>/<revision>/`).
    pub prefix: String,
    /// The Job's name.
    pub job: String,
    /// Its namespace.
    pub namespace: String,
    /// The image it runs.
    pub image: String,
    /// The checkpoint's size, bytes, when the catalog knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_bytes: Option<u64>,
    /// The copy's estimated duration, seconds, when the size is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate_secs: Option<u64>,
    /// What sets that duration (`the Hub's 500 MB/s`), when estimated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<String>,
    /// The Secret key holding the Hub token the Job reads, when it reads one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hf_token: Option<SecretKeyEntry>,
}

impl StagingEntry {
    /// The copy's size, GiB, when known.
    pub fn size_gib(&self) -> Option<f64> {
        self.weight_bytes
            .map(|b| crate::catalog::memory::gib(b as f64))
    }

    /// What keeping the copy costs a month in S3 Standard in `region`, USD, when its size and
    /// the region's price are known.
    pub fn storage_usd_per_month(&self, region: &str) -> Option<f64> {
        self.weight_bytes.and_then(|b| {
            crate::catalog::storage_usd_per_month(b, crate::catalog::StoreKind::S3Standard, region)
        })
    }
}

/// A warning scheduled before reserved capacity ends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CapacityEndEntry {
    /// The stage scheduling it.
    pub stage: String,
    /// The Capacity Block's reservation id the description was synthesized with, if it is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_id: Option<String>,
    /// The stack input holding that id at deploy time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_input: Option<String>,
    /// The training plan's ARN the description was synthesized with, if it is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training_plan_arn: Option<String>,
    /// The stack input holding that ARN at deploy time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training_plan_input: Option<String>,
    /// When the capacity ends (RFC 3339, UTC).
    pub end_time: String,
    /// Hours before the end the warning is sent.
    pub lead_hours: u32,
}

/// A Prometheus alerting rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AlertEntry {
    /// The alert's name.
    pub name: String,
    /// `critical` or `warning`.
    pub severity: String,
    /// The PromQL expression, threshold in place.
    pub expression: String,
    /// How long it must hold (`5m`); empty: it fires at once.
    pub for_duration: String,
    /// What it means.
    pub summary: String,
    /// What to do.
    pub action: String,
}
