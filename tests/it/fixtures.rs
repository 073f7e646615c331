//! Small stacks shared by the builder-level tests (`construct_model`, `validation`,
//! `reservations`, `zones`).

use hyperforge::app::Stack;
use hyperforge::constructs::{
    Capacity, ClusterSecurityGroup, EksCluster, HelmRelease, HyperPodCluster, InstanceGroup,
    LifecycleScripts, ManagedNodeGroup, Network, NetworkHandle, NodeCapacity, VllmDeployment,
};

/// A training plan for p6-b300 in us-west-2 (zone `usw2-az2`).
pub const TRAINING_PLAN: &str =
    "arn:aws:sagemaker:us-west-2:111122223333:training-plan/test-plan-p6-b300";

/// One p6-b300 instance group on [`TRAINING_PLAN`] in `usw2-az2`.
pub fn training_plan_group() -> InstanceGroup {
    InstanceGroup::new("gpu", "ml.p6-b300.48xlarge")
        .capacity(Capacity::training_plan(TRAINING_PLAN, "usw2-az2"))
}

/// The stages of a small but complete HyperPod stack: `foundation` (`network`, security group
/// `Sg`, EKS cluster `Eks` named `eks_name`, lifecycle scripts), the scripts upload, the
/// HyperPod dependencies chart, and `cluster` (HyperPod cluster `test` with `group`, in the
/// network's HyperPod subnet when it has one).
pub fn add_hyperpod_stages(
    stack: &mut Stack,
    network: Network,
    eks_name: &str,
    group: InstanceGroup,
) {
    add_hyperpod_stages_with(
        stack,
        network,
        eks_name,
        LifecycleScripts::new("Lifecycle"),
        group,
    );
}

/// [`add_hyperpod_stages`] with the given lifecycle scripts.
pub fn add_hyperpod_stages_with(
    stack: &mut Stack,
    network: Network,
    eks_name: &str,
    lifecycle: LifecycleScripts,
    group: InstanceGroup,
) {
    let foundation = stack.cloudformation_stage("foundation");
    let net = stack.add(foundation, network);
    let sg = stack.add(foundation, ClusterSecurityGroup::new("Sg", &net.vpc));
    let eks = stack.add(
        foundation,
        EksCluster::new("Eks", eks_name)
            .subnets(&net.private_subnets)
            .vpc(&net.vpc)
            .security_group(&sg.group),
    );
    let lifecycle = stack.add(foundation, lifecycle);
    stack.upload_stage("scripts", lifecycle.upload());
    stack.helm_stage("deps", HelmRelease::hyperpod_dependencies());
    let cluster = stack.cloudformation_stage("cluster");
    let mut hp = HyperPodCluster::new("HyperPod", "test", &eks.cluster, &lifecycle)
        .security_group(&sg.group)
        .instance_group(group);
    if let Some(subnet) = &net.hyperpod_subnet {
        hp = hp.subnet(subnet);
    }
    stack.add(cluster, hp);
}

/// An EKS stack serving Kimi K3 from a p6-b300 on `capacity` in the GPU subnet (zone
/// `usw2-az2`): network, cluster, GPU node group, device plugin, and the vLLM Deployment
/// (`deployment` may change it, say its load balancer's subnets). Returns the stack and its
/// network.
pub fn capacity_block_serving_stack(
    name: &str,
    capacity: NodeCapacity,
    deployment: impl FnOnce(VllmDeployment, &NetworkHandle) -> VllmDeployment,
) -> Stack {
    capacity_block_serving_stack_with(
        name,
        capacity,
        crate::reference::kimi_k3_server(),
        deployment,
    )
}

/// [`capacity_block_serving_stack`] serving `server`.
pub fn capacity_block_serving_stack_with(
    name: &str,
    capacity: NodeCapacity,
    server: hyperforge::constructs::VllmServer,
    deployment: impl FnOnce(VllmDeployment, &NetworkHandle) -> VllmDeployment,
) -> Stack {
    let mut stack = Stack::new(name, "us-west-2");
    let f = stack.cloudformation_stage("foundation");
    let net = stack.add(f, Network::new("Network").gpu_subnet("usw2-az2"));
    let eks = stack.add(
        f,
        EksCluster::new("Eks", name)
            .subnets(&net.private_subnets)
            .vpc(&net.vpc),
    );
    let nodes = stack.cloudformation_stage("nodes");
    stack.add(
        nodes,
        ManagedNodeGroup::gpu(
            "Gpu",
            &eks.cluster,
            "p6-b300.48xlarge",
            net.gpu_subnet.iter(),
        )
        .capacity(capacity),
    );
    stack.helm_stage("nvidia-device-plugin", HelmRelease::nvidia_device_plugin());
    let w = stack.kubernetes_stage("workload");
    let server = VllmDeployment::new("KimiK3", server, "p6-b300.48xlarge");
    stack.add(w, deployment(server, &net));
    stack
}
