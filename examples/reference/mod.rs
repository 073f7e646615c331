//! The reference deployments, written with the typed builders: example code, shared by the
//! examples (which write them to disk and time them), the integration tests (which check every
//! artifact) and the library's unit tests, each of which includes this file as a module of its
//! own. `stacks/` holds the same deployments as stack files.
//!
//! Kimi K3 (2.8 T-parameter MoE, MXFP4 experts, 1.42 TiB (1.56 TB) of weights) on one
//! `ml.p6-b300.48xlarge` (8 x B300) with tensor parallelism 8.

#![allow(dead_code)]

use hyperforge::app::{App, Stack};
use hyperforge::constructs::vllm::Autoscaling;
use hyperforge::constructs::{
    AlarmTopic, BucketName, Capacity, CapacityBlock, CapacityEndWarning, ClusterSecurityGroup,
    EksCluster, HelmRelease, HyperPodCluster, InferenceEndpoint, InferenceOperator, InstanceGroup,
    Karpenter, KarpenterNodePool, KedaOperatorRole, LifecycleScripts, LoadBalancerController,
    LogShipping, ManagedNodeGroup, ModelStore, Network, PrometheusMonitoring, ReservationSelector,
    ServingDashboard, VllmDeployment, VllmServer, WeightsStaging,
};
use hyperforge::constructs::{
    ClusterSecurityGroupHandle, EksClusterHandle, ModelStoreHandle, NetworkHandle,
};
use hyperforge::fleet::{Fleet, FleetMember, FleetRegion};

/// The region of the reference stacks (p6-b300 is offered for HyperPod in us-east-1 and
/// us-west-2).
pub const REGION: &str = "us-west-2";

/// The zone id of the reference training plan's capacity. Replace it (and the ARN) with your
/// plan's: `aws sagemaker describe-training-plan --training-plan-name <name>`.
pub const TRAINING_PLAN_AZ_ID: &str = "usw2-az2";

/// A placeholder training plan ARN in the documentation account; the synthesized template takes
/// the real one as a parameter.
pub const TRAINING_PLAN_ARN: &str =
    "arn:aws:sagemaker:us-west-2:111122223333:training-plan/kimi-k3-p6-b300";

/// A placeholder for the end of the reference training plan (`EndTime` of `aws sagemaker
/// describe-training-plan`): the warning before it is scheduled from it, so replace it with your
/// plan's.
pub const TRAINING_PLAN_END: &str = "2027-01-15T11:30:00Z";

/// A placeholder for the start of the reference training plan (`StartTime`), here a 7-day
/// plan: its timeline (when the model serves, when to drain) is derived from it and its end;
/// replace both with your plan's.
pub const TRAINING_PLAN_START: &str = "2027-01-08T11:30:00Z";

/// A placeholder for the commit of `moonshotai/Kimi-K3` the deployment serves: replace it with
/// the commit you reviewed (the runbook's workload stage shows how to look it up and check it).
/// Kimi K3 runs its repository's own code (`trust_remote_code`), so the reference pins one
/// commit for weights and code rather than following `main`; this value is not a real commit
/// and the download fails until it is replaced.
pub const MODEL_REVISION: &str = "0123456789abcdef0123456789abcdef01234567";

/// The vLLM image the references run: release 0.27.0, the first that serves Kimi K3
/// (vllm-project/recipes `models/moonshotai/Kimi-K3.yaml`: `min_vllm_version: "0.27.0"`).
/// A release tag rather than AWS's day-0 `kimi-k3` tag, whose release no tag names: the server's
/// options and variables are checked against 0.27.0's (the engine table), and the pod checks
/// at start-up that the image runs 0.27.0.
pub const VLLM_IMAGE: &str = "vllm/vllm-openai:v0.27.0";

/// A placeholder for the digest of [`VLLM_IMAGE`] the deployment runs: replace it with the
/// digest you tested (the runbook's workload stage shows how to look it up and check it). A tag
/// can be moved, so the reference pins a digest; this value is not a real digest and the image
/// pull fails until it is replaced.
pub const IMAGE_DIGEST: &str =
    "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// The Secret holding the API key clients send (`Authorization: Bearer ...`), created by the
/// operator in the runbook's workload stage; the key itself is never in the assembly.
pub const API_KEY_SECRET: &str = "kimi-k3-api-key";

/// The Secret the staging Job reads the Hugging Face token from, if it exists (the runbook
/// creates it from `$HF_TOKEN` when that is set).
pub const HF_TOKEN_SECRET: &str = "hf-token";

/// The key inside [`HF_TOKEN_SECRET`].
pub const HF_TOKEN_SECRET_KEY: &str = "token";

/// The key inside [`API_KEY_SECRET`].
pub const API_KEY_SECRET_KEY: &str = "api-key";

/// A placeholder for the AWS account the reference stacks deploy to (the documentation
/// account): it names the model store's bucket, whose name must be globally unique.
pub const ACCOUNT_ID: &str = "111122223333";

/// The model store's bucket name of stack `stack`: `<stack>-weights-<account>-<region>`.
pub fn weights_bucket(stack: &str) -> String {
    format!("{stack}-weights-{ACCOUNT_ID}-{REGION}")
}

/// The system nodes of the EKS references (`ManagedNodeGroup::system`), for the releases that
/// run there.
fn system_nodes() -> Vec<(String, String)> {
    vec![("hyperforge.io/node-role".to_owned(), "system".to_owned())]
}

/// The vLLM server for Kimi K3, as the reference deployments run it (each reads the copy its
/// stack stages: `weights_from`).
pub fn kimi_k3_server() -> VllmServer {
    VllmServer::new("moonshotai/Kimi-K3", VLLM_IMAGE)
        .image_digest(IMAGE_DIGEST)
        .served_model_name("Kimi-K3")
        .trust_remote_code(true)
        .revision(MODEL_REVISION)
        .api_key_secret(API_KEY_SECRET, API_KEY_SECRET_KEY)
        .prefix_caching(true)
        .tool_call_parser("kimi_k3")
        .reasoning_parser("kimi_k3")
        .moe_backend("auto")
        // AWS's day-0 instructions also set `VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION=1`, which no
        // release reads: 0.27.0 fuses the latent MoE tail itself on Blackwell GPUs (HF0522).
        .extra_arg("--no-enable-flashinfer-autotune")
}

/// Kimi K3 on SageMaker HyperPod (EKS-orchestrated), fed by a Flexible Training Plan, served by
/// the HyperPod Inference Operator.
///
/// Stages: `foundation` (network, cluster security group, EKS, lifecycle bucket) ->
/// `lifecycle-scripts` (upload) -> `hyperpod-dependencies` (Helm) -> `cluster` (HyperPod
/// cluster, inference operator) -> `operations` (alarm topic, training plan end, metrics,
/// logs) -> `aws-for-fluent-bit`, `dcgm-exporter`, `kube-state-metrics` (Helm) -> `weights`
/// -> `inference` (the `InferenceEndpointConfig`, autoscaled on the metrics).
pub fn kimi_k3_hyperpod() -> App {
    App::new()
        .tag("managed-by", "hyperforge")
        .stack(kimi_k3_hyperpod_stack("kimi-k3-hyperpod"))
}

/// The HyperPod reference stack under another name (fleets, tests).
pub fn kimi_k3_hyperpod_stack(name: &str) -> Stack {
    let mut stack = Stack::new(name, REGION)
        .description("Kimi K3 on SageMaker HyperPod (p6-b300, training plan, inference operator).")
        .tag("workload", "kimi-k3");

    let foundation = stack.cloudformation_stage("foundation");
    let network = stack.add(
        foundation,
        Network::new("Network").hyperpod_subnet(TRAINING_PLAN_AZ_ID),
    );
    let sg = stack.add(
        foundation,
        ClusterSecurityGroup::new("ClusterSecurityGroup", &network.vpc),
    );
    let eks = stack.add(
        foundation,
        EksCluster::new("Eks", "kimi-k3")
            .subnets(&network.private_subnets)
            .vpc(&network.vpc)
            .security_group(&sg.group),
    );
    let lifecycle = stack.add(foundation, LifecycleScripts::new("Lifecycle"));
    let store = stack.add(
        foundation,
        ModelStore::new("Weights", weights_bucket(name), &eks),
    );

    stack.upload_stage("lifecycle-scripts", lifecycle.upload());
    stack.helm_stage(
        "hyperpod-dependencies",
        HelmRelease::hyperpod_dependencies(),
    );

    let cluster = stack.cloudformation_stage("cluster");
    let hyperpod_subnet = network.hyperpod_subnet.clone();
    let mut hyperpod = HyperPodCluster::new("HyperPod", "kimi-k3", &eks.cluster, &lifecycle)
        .security_group(&sg.group)
        .instance_group(
            InstanceGroup::new("p6-b300", "ml.p6-b300.48xlarge")
                .count(1)
                .capacity(
                    Capacity::training_plan(TRAINING_PLAN_ARN, TRAINING_PLAN_AZ_ID)
                        .during(TRAINING_PLAN_START, TRAINING_PLAN_END),
                ),
        );
    if let Some(subnet) = &hyperpod_subnet {
        hyperpod = hyperpod.subnet(subnet);
    }
    let hyperpod = stack.add(cluster, hyperpod);
    stack.add(
        cluster,
        InferenceOperator::new("InferenceOperator", &eks, &hyperpod, &network.vpc),
    );

    // Notifications: the encrypted topic operators subscribe to, and warnings before the
    // training plan ends.
    let operations = stack.cloudformation_stage("operations");
    let alarms = stack.add(operations, AlarmTopic::new("Alarms"));
    stack.add(
        operations,
        // Ends with the plan's window, given once on the instance group.
        CapacityEndWarning::for_training_plan("TrainingPlanEnd", &alarms, TRAINING_PLAN_ARN),
    );
    // Serving and GPU metrics in Amazon Managed Service for Prometheus, with alert rules to
    // the topic: the collector finds the operator's model pods, the DCGM exporter on the
    // HyperPod GPU nodes and kube-state-metrics.
    let metrics = stack.add(
        operations,
        PrometheusMonitoring::new("Metrics", &eks, &alarms, network.private_subnets.clone()),
    );
    // Container logs to CloudWatch Logs (KMS-encrypted groups, a retention), by Fluent Bit.
    stack.add(operations, LogShipping::new("Logs", &eks));
    stack.helm_stage(
        "aws-for-fluent-bit",
        HelmRelease::aws_for_fluent_bit(&eks.name, REGION),
    );
    stack.helm_stage("dcgm-exporter", HelmRelease::dcgm_exporter());
    // No system nodes on HyperPod: the HyperPod nodes are the cluster's only nodes.
    stack.helm_stage("kube-state-metrics", HelmRelease::kube_state_metrics(&[]));

    // The HyperPod nodes are the cluster's only nodes: the Job runs there once they join.
    let weights = stack.kubernetes_stage("weights");
    stack.add(
        weights,
        WeightsStaging::new("StageKimiK3", &store, "moonshotai/Kimi-K3", MODEL_REVISION)
            .hf_token_secret(HF_TOKEN_SECRET, HF_TOKEN_SECRET_KEY),
    );

    let inference = stack.kubernetes_stage("inference");
    stack.add(
        inference,
        InferenceEndpoint::new(
            "KimiK3",
            kimi_k3_server()
                .load_format("fastsafetensors")
                .weights_from(&store),
            "ml.p6-b300.48xlarge",
        )
        .name("kimik3")
        // The training plan holds one p6-b300, so one replica: the operator's KEDA scales
        // within it on the workspace's metrics.
        .autoscaling(Autoscaling::on_workspace(1, 1, &metrics.workspace)),
    );
    // The dashboard an on-call engineer opens first, for Grafana.
    stack.add(
        inference,
        ServingDashboard::new("Dashboard", format!("serving-{}", stack.name())),
    );

    stack
}

/// A placeholder for the end of the reference Capacity Block (`EndDate` of `aws ec2
/// describe-capacity-reservations`): the warnings before it are scheduled from it, so replace it
/// with your block's.
pub const CAPACITY_BLOCK_END: &str = "2027-01-15T11:30:00Z";

/// A placeholder for the start of the reference Capacity Block (`StartDate`): a block bought to
/// start at once opens at any minute and still ends at 11:30 UTC, here a 7-day block. The
/// block's timeline (when its node comes, when the model serves, when to drain) is derived from
/// it and its end; replace both with your block's.
pub const CAPACITY_BLOCK_START: &str = "2027-01-08T04:55:00Z";

/// The zone id of the reference Capacity Block. Replace it (and the reservation id) with your
/// block's: `aws ec2 describe-capacity-reservations --capacity-reservation-ids <id>`.
pub const CAPACITY_BLOCK_AZ_ID: &str = "usw2-az2";

/// A placeholder Capacity Block reservation id; the synthesized template takes the real one as
/// a parameter.
pub const CAPACITY_BLOCK_RESERVATION_ID: &str = "cr-0123456789abcdef0";

/// Kimi K3 on a plain EKS cluster whose p6-b300 node comes from an EC2 Capacity Block, served by
/// a vLLM Deployment behind an internal Network Load Balancer on port 8000.
///
/// Stages: `foundation` (network with the GPU subnet in the block's zone, cluster security
/// group, EKS, the load balancer controller's role) -> `nodes` (the system and GPU node groups)
/// -> `nvidia-device-plugin` (Helm) -> `aws-load-balancer-controller` (Helm) -> `workload`
/// (vLLM).
pub fn kimi_k3_eks() -> App {
    App::new()
        .tag("managed-by", "hyperforge")
        .stack(kimi_k3_eks_stack("kimi-k3-eks"))
}

/// The EKS reference stack under another name (tests, benchmarks).
pub fn kimi_k3_eks_stack(name: &str) -> Stack {
    kimi_k3_eks_stack_at(
        name,
        &Placement {
            region: REGION.to_owned(),
            cluster_name: "kimi-k3-eks".to_owned(),
            reservation_id: CAPACITY_BLOCK_RESERVATION_ID.to_owned(),
            zone_id: CAPACITY_BLOCK_AZ_ID.to_owned(),
            bucket_name: weights_bucket(name).into(),
            dashboard: format!("serving-{name}"),
        },
    )
}

/// Where an EKS reference stack is deployed: its region, its cluster's name, and the Capacity
/// Block its GPU node comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The region.
    pub region: String,
    /// The EKS cluster's name.
    pub cluster_name: String,
    /// The Capacity Block's reservation id.
    pub reservation_id: String,
    /// The Capacity Block's zone id.
    pub zone_id: String,
    /// The model store's bucket name (globally unique).
    pub bucket_name: BucketName,
    /// The Grafana dashboard's name (at most 40 characters).
    pub dashboard: String,
}

/// The foundation stage every EKS reference starts with: the network (its GPU subnet in the
/// capacity's zone), the cluster security group, the cluster, the load balancer controller's
/// role and the model store.
struct EksFoundation {
    network: NetworkHandle,
    sg: ClusterSecurityGroupHandle,
    eks: EksClusterHandle,
    store: ModelStoreHandle,
}

fn eks_foundation(
    stack: &mut Stack,
    cluster_name: &str,
    zone_id: &str,
    bucket: BucketName,
) -> EksFoundation {
    let foundation = stack.cloudformation_stage("foundation");
    let network = stack.add(foundation, Network::new("Network").gpu_subnet(zone_id));
    let sg = stack.add(
        foundation,
        ClusterSecurityGroup::new("ClusterSecurityGroup", &network.vpc),
    );
    let eks = stack.add(
        foundation,
        EksCluster::new("Eks", cluster_name)
            .subnets(&network.private_subnets)
            .vpc(&network.vpc)
            .security_group(&sg.group),
    );
    stack.add(
        foundation,
        LoadBalancerController::new("LoadBalancerController", &eks.cluster),
    );
    let store = stack.add(foundation, ModelStore::new("Weights", bucket, &eks));
    EksFoundation {
        network,
        sg,
        eks,
        store,
    }
}

/// The EKS reference stack named `name` at `at`.
pub fn kimi_k3_eks_stack_at(name: &str, at: &Placement) -> Stack {
    let region = at.region.as_str();
    let mut stack = Stack::new(name, region)
        .description("Kimi K3 on EKS (p6-b300 from an EC2 Capacity Block, vLLM).")
        .tag("workload", "kimi-k3");

    let EksFoundation {
        network,
        sg,
        eks,
        store,
    } = eks_foundation(
        &mut stack,
        &at.cluster_name,
        &at.zone_id,
        at.bucket_name.clone(),
    );

    let nodes = stack.cloudformation_stage("nodes");
    stack.add(
        nodes,
        ManagedNodeGroup::system("SystemNodes", &eks.cluster, &network.private_subnets),
    );
    stack.add(
        nodes,
        ManagedNodeGroup::gpu(
            "GpuNodes",
            &eks.cluster,
            "p6-b300.48xlarge",
            network.gpu_subnet.iter(),
        )
        .capacity(
            CapacityBlock::held(at.reservation_id.as_str(), at.zone_id.as_str(), 1)
                .during(CAPACITY_BLOCK_START, CAPACITY_BLOCK_END),
        )
        .security_group(&sg.group),
    );

    stack.helm_stage("nvidia-device-plugin", HelmRelease::nvidia_device_plugin());
    stack.helm_stage(
        "aws-load-balancer-controller",
        HelmRelease::aws_load_balancer_controller(&eks.name, region, &network.vpc),
    );

    eks_operations_and_workload(&mut stack, &eks, &network, &store, at);
    stack
}

/// Kimi K3 on EKS with the Capacity Block consumed through Karpenter instead of a managed node
/// group: the EC2NodeClass selects the reservation by id, the NodePool allows only
/// `karpenter.sh/capacity-type: reserved`.
pub fn kimi_k3_eks_karpenter() -> App {
    let name = "kimi-k3-eks-karpenter";
    let mut stack = Stack::new(name, REGION)
        .description("Kimi K3 on EKS (p6-b300 from an EC2 Capacity Block through Karpenter, vLLM).")
        .tag("workload", "kimi-k3");
    let EksFoundation {
        network,
        sg: _,
        eks,
        store,
    } = eks_foundation(
        &mut stack,
        name,
        CAPACITY_BLOCK_AZ_ID,
        weights_bucket(name).into(),
    );
    let nodes = stack.cloudformation_stage("nodes");
    stack.add(
        nodes,
        ManagedNodeGroup::system("SystemNodes", &eks.cluster, &network.private_subnets),
    );
    let karpenter = stack.add(nodes, Karpenter::new("Karpenter", &eks));

    stack.helm_stage("karpenter", HelmRelease::karpenter(&eks.name));
    stack.helm_stage("nvidia-device-plugin", HelmRelease::nvidia_device_plugin());
    stack.helm_stage(
        "aws-load-balancer-controller",
        HelmRelease::aws_load_balancer_controller(&eks.name, REGION, &network.vpc),
    );
    let capacity = stack.kubernetes_stage("gpu-capacity");
    stack.add(
        capacity,
        KarpenterNodePool::capacity_block(
            "GpuPool",
            "p6-b300-capacity-block",
            &karpenter,
            "p6-b300.48xlarge",
            ReservationSelector::Id(CAPACITY_BLOCK_RESERVATION_ID.to_owned()),
        )
        .during(CAPACITY_BLOCK_START, CAPACITY_BLOCK_END),
    );
    let at = Placement {
        region: REGION.to_owned(),
        cluster_name: name.to_owned(),
        reservation_id: CAPACITY_BLOCK_RESERVATION_ID.to_owned(),
        zone_id: CAPACITY_BLOCK_AZ_ID.to_owned(),
        bucket_name: weights_bucket(name).into(),
        dashboard: format!("serving-{name}"),
    };
    eks_operations_and_workload(&mut stack, &eks, &network, &store, &at);
    App::new().tag("managed-by", "hyperforge").stack(stack)
}

/// The stages both EKS references share after their controllers: `operations` (the alarm
/// topic, the warning before the Capacity Block ends, Prometheus monitoring, KEDA's role, log
/// shipping), the Fluent Bit, DCGM exporter, kube-state-metrics and KEDA releases, `weights`
/// (the staging Job) and `workload` (the autoscaled vLLM Deployment and its dashboard).
fn eks_operations_and_workload(
    stack: &mut Stack,
    eks: &EksClusterHandle,
    network: &NetworkHandle,
    store: &ModelStoreHandle,
    at: &Placement,
) {
    // Notifications: the encrypted topic operators subscribe to, and warnings before the
    // Capacity Block ends.
    let operations = stack.cloudformation_stage("operations");
    let alarms = stack.add(operations, AlarmTopic::new("Alarms"));
    // The end is the block's window's, given once on the node group or pool.
    stack.add(
        operations,
        CapacityEndWarning::for_capacity_block(
            "CapacityBlockEnd",
            &alarms,
            at.reservation_id.as_str(),
        ),
    );
    // Serving and GPU metrics in Amazon Managed Service for Prometheus, with alert rules to
    // the topic; the DCGM exporter publishes the GPU metrics.
    let metrics = stack.add(
        operations,
        PrometheusMonitoring::new("Metrics", eks, &alarms, network.private_subnets.clone()),
    );
    // KEDA scales the server on those metrics, within what the Capacity Block holds.
    stack.add(
        operations,
        KedaOperatorRole::new("KedaOperator", &eks.cluster),
    );
    // Container logs to CloudWatch Logs (KMS-encrypted groups, a retention), by Fluent Bit.
    stack.add(operations, LogShipping::new("Logs", eks));
    stack.helm_stage(
        "aws-for-fluent-bit",
        HelmRelease::aws_for_fluent_bit(&eks.name, at.region.as_str()),
    );
    stack.helm_stage("dcgm-exporter", HelmRelease::dcgm_exporter());
    stack.helm_stage(
        "kube-state-metrics",
        HelmRelease::kube_state_metrics(&system_nodes()),
    );
    stack.helm_stage("keda", HelmRelease::keda(&eks.name));

    // On a system node, before (and without) the Capacity Block's GPU node.
    let weights = stack.kubernetes_stage("weights");
    stack.add(
        weights,
        WeightsStaging::new("StageKimiK3", store, "moonshotai/Kimi-K3", MODEL_REVISION)
            .hf_token_secret(HF_TOKEN_SECRET, HF_TOKEN_SECRET_KEY)
            .node_selector("hyperforge.io/node-role", "system"),
    );
    let workload = stack.kubernetes_stage("workload");
    stack.add(
        workload,
        VllmDeployment::new(
            "KimiK3",
            kimi_k3_server().weights_from(store),
            "p6-b300.48xlarge",
        )
        .name("kimi-k3")
        // The internal load balancer goes in the serving nodes' subnet (the block's zone).
        // The block holds one p6-b300, so one replica of 8 GPUs: raise the maximum with
        // the reservation (HF0360 refuses more than it can hold).
        .autoscaling(Autoscaling::on_workspace(1, 1, &metrics.workspace)),
    );
    // The dashboard an on-call engineer opens first, for Grafana.
    stack.add(
        workload,
        ServingDashboard::new("Dashboard", at.dashboard.as_str()),
    );
}

/// The reference fleet: the EKS reference stack in three regions where EC2 offers p6-b300
/// (us-west-2, us-east-1, eu-west-2), each member on its own region's Capacity Block, deployed
/// to one account through self-managed StackSets. Each member's cluster is named as the member.
/// The reservation ids are placeholders, as the reference stack's is.
pub fn kimi_k3_eks_fleet() -> Fleet {
    kimi_k3_eks_fleet_to([ACCOUNT_ID.to_owned()])
}

/// The reference fleet deployed to `accounts` (each with each region's Capacity Block, as the
/// reference fleet's one account): the benchmarks widen it to 3,333 accounts.
#[allow(dead_code)]
pub fn kimi_k3_eks_fleet_to(accounts: impl IntoIterator<Item = String>) -> Fleet {
    let fleet = Fleet::from_apps(FLEET_NAME, |member: &FleetMember| {
        // Every member is the same stack in its own account and region: names come from
        // `member.stack`, and the bucket's from the account and region it is deployed to.
        let at = Placement {
            region: member.region().to_owned(),
            cluster_name: member.stack().to_owned(),
            reservation_id: member.value("capacity_id").unwrap_or_default().to_owned(),
            zone_id: member.value("zone_id").unwrap_or_default().to_owned(),
            bucket_name: BucketName::PerAccountAndRegion,
            dashboard: format!("serving-{}", member.stack()),
        };
        Ok(App::new()
            .tag("managed-by", "hyperforge")
            .stack(kimi_k3_eks_stack_at(member.stack(), &at)))
    });
    accounts
        .into_iter()
        .fold(fleet, |fleet, account| fleet.account(account))
        .region(
            FleetRegion::new("us-west-2")
                .capacity_block(CAPACITY_BLOCK_RESERVATION_ID, CAPACITY_BLOCK_AZ_ID),
        )
        .region(FleetRegion::new("us-east-1").capacity_block("cr-0a1b2c3d4e5f60718", "use1-az4"))
        .region(FleetRegion::new("eu-west-2").capacity_block("cr-0fedcba9876543210", "euw2-az2"))
}

/// The Capacity Block of the multi-node variant: two p6-b200.48xlarge in us-west-2 (a
/// placeholder id, as the other references' are).
pub const MULTI_NODE_RESERVATION_ID: &str = "cr-0b200b200b200b200";

/// Kimi K3 where no single node holds it: on 2 x p6-b200.48xlarge (8 x B200 each, 180 GB per
/// GPU) from one Capacity Block, tensor parallel 8 inside each node and pipeline parallel 2
/// across them (`hyperforge plan moonshotai/Kimi-K3 --region us-west-2` lists it as the
/// smallest B200 layout; 8 x B200 cannot hold the 1,452.8 GiB of weights). The replica is one
/// LeaderWorkerSet group over EFA: the GPU node group launches with EFA interfaces, the EFA
/// device plugin and the LeaderWorkerSet controller are Helm stages, and NCCL must use the EFA
/// network or stop (`NCCL_NET=Libfabric`). The image must carry libfabric and aws-ofi-nccl:
/// this one is a placeholder for an image built with the EFA installer.
pub fn kimi_k3_eks_multi_node() -> App {
    let name = "kimi-k3-eks-multi-node";
    let mut stack = Stack::new(name, REGION)
        .description("Kimi K3 on EKS over two p6-b200 nodes (TP 8 x PP 2, LeaderWorkerSet, EFA).")
        .tag("workload", "kimi-k3");
    let EksFoundation {
        network,
        sg,
        eks,
        store,
    } = eks_foundation(
        &mut stack,
        name,
        CAPACITY_BLOCK_AZ_ID,
        weights_bucket(name).into(),
    );

    let nodes = stack.cloudformation_stage("nodes");
    stack.add(
        nodes,
        ManagedNodeGroup::system("SystemNodes", &eks.cluster, &network.private_subnets),
    );
    stack.add(
        nodes,
        ManagedNodeGroup::gpu(
            "GpuNodes",
            &eks.cluster,
            "p6-b200.48xlarge",
            network.gpu_subnet.iter(),
        )
        .capacity(
            CapacityBlock::held(MULTI_NODE_RESERVATION_ID, CAPACITY_BLOCK_AZ_ID, 2)
                .during(CAPACITY_BLOCK_START, CAPACITY_BLOCK_END),
        )
        // Both instances of the block: one replica's two pipeline stages.
        .scaling(2, 2, 2)
        // EFA-only interfaces on every network card (card 0 keeps its ENA primary), in the
        // cluster security group, which admits every protocol between its members.
        .efa(true)
        .security_group(&sg.group),
    );

    stack.helm_stage("nvidia-device-plugin", HelmRelease::nvidia_device_plugin());
    stack.helm_stage("efa-device-plugin", HelmRelease::efa_device_plugin());
    stack.helm_stage("lws", HelmRelease::leader_worker_set());
    stack.helm_stage("kueue", HelmRelease::kueue());
    stack.helm_stage(
        "aws-load-balancer-controller",
        HelmRelease::aws_load_balancer_controller(&eks.name, REGION, &network.vpc),
    );

    let weights = stack.kubernetes_stage("weights");
    stack.add(
        weights,
        WeightsStaging::new("StageKimiK3", &store, "moonshotai/Kimi-K3", MODEL_REVISION)
            .hf_token_secret(HF_TOKEN_SECRET, HF_TOKEN_SECRET_KEY)
            .node_selector("hyperforge.io/node-role", "system"),
    );
    let workload = stack.kubernetes_stage("workload");
    stack.add(
        workload,
        VllmDeployment::new(
            "KimiK3",
            kimi_k3_server().weights_from(&store),
            "p6-b200.48xlarge",
        )
        .name("kimi-k3")
        .nodes_per_replica(2),
    );
    App::new().tag("managed-by", "hyperforge").stack(stack)
}

/// The reference fleet's name.
pub const FLEET_NAME: &str = "kimi-k3-eks-fleet";

/// Every reference app: the two reference deployments.
pub fn all() -> Vec<App> {
    vec![kimi_k3_hyperpod(), kimi_k3_eks()]
}

/// Variants of the reference deployments (other capacity wiring), checked by the same tests.
pub fn variants() -> Vec<App> {
    vec![kimi_k3_eks_karpenter(), kimi_k3_eks_multi_node()]
}
