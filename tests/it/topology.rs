//! How the pieces of a stack fit around its workloads (HF0370-HF0375): capacity of the
//! workload's instance type on its launcher, `replicas` within what that capacity can ever
//! hold, Capacity Blocks used whole, the NVIDIA device plugin before GPU pods on EKS, the load
//! balancer controller's role, cluster and region; an unknown instance type reported once,
//! without GPU-count rules after it; help lines that speak of the user's own values. Each rule
//! has a failing case and the reference stacks as the passing one.

use crate::reference::{
    self, kimi_k3_server, CAPACITY_BLOCK_AZ_ID, CAPACITY_BLOCK_RESERVATION_ID, REGION,
};
use hyperforge::constructs::*;
use hyperforge::{App, Code, Diagnostics, Severity, Stack};

const OURS: [Code; 6] = [
    Code::WorkloadWithoutCapacity,
    Code::ReplicasAboveCapacity,
    Code::CapacityBlockPartlyIdle,
    Code::GpuWorkloadWithoutDevicePlugin,
    Code::LoadBalancerControllerWithoutRole,
    Code::LoadBalancerControllerWrongCluster,
];

/// Where the NVIDIA device plugin's Helm stage goes.
#[derive(Clone, Copy, PartialEq)]
enum Plugin {
    BeforeWorkload,
    AfterWorkload,
    Absent,
}

/// An EKS stack serving Kimi K3 from a Capacity Block node group; every field is one knob a
/// test turns.
#[derive(Clone)]
struct Eks {
    region: &'static str,
    az: &'static str,
    /// The GPU node group's type, or a Karpenter pool's when `karpenter`.
    nodes_type: &'static str,
    karpenter: bool,
    /// The Capacity Block's instances and the group's (desired, max).
    block: u32,
    /// The block is bought by the stack (Terraform) rather than named by its reservation id.
    bought: bool,
    sizes: (i64, i64),
    workload_type: &'static str,
    server: VllmServer,
    replicas: i32,
    /// GPUs per replica, when not the whole node.
    gpus: Option<u32>,
    plugin: Plugin,
    /// The LoadBalancerController role: in the foundation stage, after the release, or absent.
    lbc_role: Option<bool>,
    /// Overrides of the controller release's cluster name and region.
    lbc_cluster: Option<&'static str>,
    lbc_region: Option<&'static str>,
}

impl Default for Eks {
    fn default() -> Self {
        Eks {
            region: REGION,
            az: CAPACITY_BLOCK_AZ_ID,
            nodes_type: "p6-b300.48xlarge",
            karpenter: false,
            block: 1,
            bought: false,
            sizes: (1, 1),
            workload_type: "p6-b300.48xlarge",
            server: kimi_k3_server(),
            replicas: 1,
            gpus: None,
            plugin: Plugin::BeforeWorkload,
            lbc_role: Some(true),
            lbc_cluster: None,
            lbc_region: None,
        }
    }
}

impl Eks {
    fn app(&self) -> App {
        let mut stack = Stack::new("topo", self.region);
        let f = stack.cloudformation_stage("foundation");
        let network = stack.add(f, Network::new("Network").gpu_subnet(self.az));
        let eks = stack.add(
            f,
            EksCluster::new("Eks", "topo")
                .subnets(&network.private_subnets)
                .vpc(&network.vpc),
        );
        if self.lbc_role == Some(true) {
            stack.add(
                f,
                LoadBalancerController::new("LoadBalancerController", &eks.cluster),
            );
        }
        let nodes = stack.cloudformation_stage("nodes");
        stack.add(
            nodes,
            ManagedNodeGroup::system("SystemNodes", &eks.cluster, &network.private_subnets),
        );
        let karpenter = self
            .karpenter
            .then(|| stack.add(nodes, Karpenter::new("Karpenter", &eks)));
        if !self.karpenter {
            stack.add(
                nodes,
                ManagedNodeGroup::gpu(
                    "GpuNodes",
                    &eks.cluster,
                    self.nodes_type,
                    network.gpu_subnet.iter(),
                )
                .capacity(if self.bought {
                    NodeCapacity::buy_capacity_block(
                        CapacityBlockPurchase::new("cb-0123456789abcdef0").non_refundable(),
                        self.az,
                        self.block,
                    )
                } else {
                    NodeCapacity::capacity_block_of(
                        CAPACITY_BLOCK_RESERVATION_ID,
                        self.az,
                        self.block,
                    )
                })
                .scaling(0, self.sizes.0, self.sizes.1),
            );
        }
        if self.plugin == Plugin::BeforeWorkload {
            stack.helm_stage("nvidia-device-plugin", HelmRelease::nvidia_device_plugin());
        }
        let release = HelmRelease::aws_load_balancer_controller(
            self.lbc_cluster.unwrap_or(&eks.name),
            self.lbc_region.unwrap_or(self.region),
            &network.vpc,
        );
        stack.helm_stage("aws-load-balancer-controller", release);
        if self.lbc_role == Some(false) {
            let late = stack.cloudformation_stage("late-role");
            stack.add(
                late,
                LoadBalancerController::new("LoadBalancerController", &eks.cluster),
            );
        }
        if let Some(karpenter) = &karpenter {
            let capacity = stack.kubernetes_stage("gpu-capacity");
            stack.add(
                capacity,
                KarpenterNodePool::capacity_block(
                    "GpuPool",
                    "gpu",
                    karpenter,
                    self.nodes_type,
                    ReservationSelector::Id(CAPACITY_BLOCK_RESERVATION_ID.to_owned()),
                ),
            );
        }
        let workload = stack.kubernetes_stage("workload");
        let mut deployment = VllmDeployment::new("Server", self.server.clone(), self.workload_type)
            .name("server")
            .replicas(self.replicas);
        if let Some(gpus) = self.gpus {
            deployment = deployment.gpus(gpus);
        }
        stack.add(workload, deployment);
        if self.plugin == Plugin::AfterWorkload {
            stack.helm_stage("nvidia-device-plugin", HelmRelease::nvidia_device_plugin());
        }
        App::new().stack(stack)
    }

    fn validate(&self) -> Diagnostics {
        self.app().validate()
    }
}

/// The HyperPod reference with one more endpoint.
fn hyperpod_with(endpoint: InferenceEndpoint) -> Diagnostics {
    let mut stack = reference::kimi_k3_hyperpod_stack("topo-hyperpod");
    let stage = stack.kubernetes_stage("more");
    stack.add(stage, endpoint);
    App::new().stack(stack).validate()
}

fn found(ds: &Diagnostics, code: Code) -> Vec<String> {
    ds.iter()
        .filter(|d| d.code == code)
        .map(|d| {
            format!(
                "{} @ {} | {} | {}",
                d.message,
                d.path,
                d.help,
                d.notes.join("; ")
            )
        })
        .collect()
}

#[test]
fn the_reference_stacks_raise_none_of_these_rules() {
    for app in reference::all().into_iter().chain(reference::variants()) {
        let ds = app.validate();
        for code in OURS {
            assert!(found(&ds, code).is_empty(), "{code:?}: {ds}");
        }
    }
    let ds = Eks::default().validate();
    assert!(!ds.has_errors() && !ds.has_warnings(), "{ds}");
    let ds = Eks {
        karpenter: true,
        ..Eks::default()
    }
    .validate();
    assert!(!ds.has_errors() && !ds.has_warnings(), "{ds}");
}

#[test]
fn a_deployment_on_a_type_no_node_group_provides_is_refused() {
    let ds = Eks {
        workload_type: "p6-b200.48xlarge",
        ..Eks::default()
    }
    .validate();
    let hits = found(&ds, Code::WorkloadWithoutCapacity);
    assert_eq!(hits.len(), 1, "{ds}");
    assert!(hits[0].contains("topo/Server"), "{hits:?}");
    assert!(hits[0].contains("p6-b200.48xlarge"), "{hits:?}");
    assert!(
        hits[0].contains("p6-b300.48xlarge (topo/GpuNodes)"),
        "the help names what the stack provides: {hits:?}"
    );
    // The fit rule names EC2 types on the EKS path, not HyperPod's `ml.` names.
    let fit = found(&ds, Code::ModelDoesNotFit);
    assert!(
        fit.len() == 1
            && fit[0].contains("does not fit p6-b200.48xlarge at TP 8")
            && fit[0].contains("p6-b300.48xlarge (TP 8")
            && !fit[0].contains("ml."),
        "{fit:?}"
    );
    // The same on a Karpenter pool.
    let ds = Eks {
        workload_type: "p6-b200.48xlarge",
        karpenter: true,
        ..Eks::default()
    }
    .validate();
    assert!(
        ds.contains(Code::WorkloadWithoutCapacity, "topo/Server"),
        "{ds}"
    );
}

#[test]
fn an_endpoint_on_a_type_no_instance_group_provides_says_so() {
    let ds = hyperpod_with(
        InferenceEndpoint::new("Other", kimi_k3_server(), "ml.p6-b200.48xlarge").name("other"),
    );
    let hits = found(&ds, Code::WorkloadWithoutCapacity);
    assert_eq!(hits.len(), 1, "{ds}");
    assert!(
        hits[0].contains("no HyperPod instance group of this stack provides ml.p6-b200.48xlarge"),
        "{hits:?}"
    );
    assert!(hits[0].contains("topo-hyperpod/Other"), "{hits:?}");
    // A Deployment does not run on the HyperPod group of its type: said in a note.
    let mut stack = reference::kimi_k3_hyperpod_stack("topo-hyperpod");
    let stage = stack.kubernetes_stage("more");
    stack.add(
        stage,
        VllmDeployment::new("Deploy", kimi_k3_server(), "p6-b300.48xlarge").cluster_ip_service(),
    );
    let ds = App::new().stack(stack).validate();
    let hits = found(&ds, Code::WorkloadWithoutCapacity);
    assert_eq!(hits.len(), 1, "{ds}");
    assert!(
        hits[0].contains("as HyperPod nodes, which a VllmDeployment does not run on"),
        "{hits:?}"
    );
}

#[test]
fn replicas_beyond_what_the_capacity_can_ever_hold_are_refused() {
    let ds = Eks {
        replicas: 2,
        ..Eks::default()
    }
    .validate();
    let hits = found(&ds, Code::ReplicasAboveCapacity);
    assert_eq!(hits.len(), 1, "{ds}");
    assert!(
        hits[0].contains("asks for 2 replicas of 8 GPUs, 16 GPUs")
            && hits[0].contains(
                "can ever provide 8 GPUs (1 p6-b300.48xlarge nodes of 8 GPUs), room for 1 replicas"
            ),
        "{hits:?}"
    );
    // Two replicas of four GPUs share the one node (Kimi K3 does not fit four GPUs, HF0501;
    // only this rule matters here).
    let ds = Eks {
        replicas: 2,
        gpus: Some(4),
        server: kimi_k3_server().tensor_parallel_size(4),
        ..Eks::default()
    }
    .validate();
    assert!(found(&ds, Code::ReplicasAboveCapacity).is_empty(), "{ds}");
    // Three of them do not.
    let ds = Eks {
        replicas: 3,
        gpus: Some(4),
        server: kimi_k3_server().tensor_parallel_size(4),
        ..Eks::default()
    }
    .validate();
    let hits = found(&ds, Code::ReplicasAboveCapacity);
    assert!(
        hits.len() == 1
            && hits[0].contains("3 replicas of 4 GPUs, 12 GPUs")
            && hits[0].contains("room for 2 replicas"),
        "{ds}"
    );
    // A block of 2 held by a group of max 2: room for 2.
    let ds = Eks {
        replicas: 2,
        block: 2,
        sizes: (2, 2),
        ..Eks::default()
    }
    .validate();
    assert!(found(&ds, Code::ReplicasAboveCapacity).is_empty(), "{ds}");
}

#[test]
fn endpoint_replicas_beyond_the_instance_groups_are_refused() {
    let ds = hyperpod_with(
        InferenceEndpoint::new("Twice", kimi_k3_server(), "ml.p6-b300.48xlarge")
            .name("twice")
            .replicas(2),
    );
    let hits = found(&ds, Code::ReplicasAboveCapacity);
    assert_eq!(hits.len(), 1, "{ds}");
    assert!(hits[0].contains("topo-hyperpod/Twice"), "{hits:?}");
    assert!(
        hits[0].contains("topo-hyperpod/HyperPod/p6-b300"),
        "{hits:?}"
    );
}

#[test]
fn a_capacity_block_larger_than_its_groups_warns_with_the_idle_instances() {
    let ds = Eks {
        block: 4,
        sizes: (2, 2),
        ..Eks::default()
    }
    .validate();
    let hits = found(&ds, Code::CapacityBlockPartlyIdle);
    assert_eq!(hits.len(), 1, "{ds}");
    assert!(
        hits[0].contains("reserves 4 p6-b300.48xlarge instances")
            && hits[0].contains("desired 2, at most 2: 2 paid instances stay idle")
            && hits[0].contains("topo/GpuNodes"),
        "{hits:?}"
    );
    assert!(
        hits[0].contains("no price for p6-b300.48xlarge in us-west-2"),
        "{hits:?}"
    );
    assert!(ds
        .iter()
        .filter(|d| d.code == Code::CapacityBlockPartlyIdle)
        .all(|d| d.severity == Severity::Warning));
    // Desired below the block, maximum at it: still idle until someone scales up.
    let ds = Eks {
        block: 2,
        sizes: (1, 2),
        ..Eks::default()
    }
    .validate();
    let hits = found(&ds, Code::CapacityBlockPartlyIdle);
    assert_eq!(hits.len(), 1, "{ds}");
    assert!(
        hits[0].contains("run desired 1: 1 paid instances"),
        "{hits:?}"
    );
    // A block the stack buys is named by the group buying it.
    let ds = Eks {
        block: 2,
        bought: true,
        sizes: (1, 1),
        ..Eks::default()
    }
    .validate();
    let hits = found(&ds, Code::CapacityBlockPartlyIdle);
    assert_eq!(hits.len(), 1, "{ds}");
    assert!(
        hits[0].starts_with("the Capacity Block topo/GpuNodes buys reserves 2"),
        "{hits:?}"
    );
    // A block used whole raises nothing.
    let ds = Eks {
        block: 2,
        sizes: (2, 2),
        ..Eks::default()
    }
    .validate();
    assert!(found(&ds, Code::CapacityBlockPartlyIdle).is_empty(), "{ds}");
}

#[test]
fn the_idle_part_of_a_block_is_priced_where_the_catalog_prices_the_region() {
    let ds = Eks {
        region: "us-east-1",
        az: "use1-az6",
        nodes_type: "p5.48xlarge",
        workload_type: "p5.48xlarge",
        server: VllmServer::new("deepseek-ai/DeepSeek-V3", "vllm/vllm-openai:v0.11.0"),
        block: 2,
        sizes: (1, 1),
        ..Eks::default()
    }
    .validate();
    let hits = found(&ds, Code::CapacityBlockPartlyIdle);
    assert_eq!(hits.len(), 1, "{ds}");
    let price = hyperforge::catalog::instance("p5.48xlarge")
        .and_then(|i| i.on_demand_usd_per_hour("us-east-1"))
        .expect("p5.48xlarge is priced in us-east-1");
    assert!(
        hits[0].contains(&format!("about ${price:.2}/h")),
        "{hits:?}"
    );
}

#[test]
fn gpu_pods_without_the_nvidia_device_plugin_before_them_are_refused() {
    for karpenter in [false, true] {
        let ds = Eks {
            plugin: Plugin::Absent,
            karpenter,
            ..Eks::default()
        }
        .validate();
        let hits = found(&ds, Code::GpuWorkloadWithoutDevicePlugin);
        assert_eq!(hits.len(), 1, "{ds}");
        assert!(hits[0].contains("no Helm stage installs"), "{hits:?}");
        let ds = Eks {
            plugin: Plugin::AfterWorkload,
            karpenter,
            ..Eks::default()
        }
        .validate();
        let hits = found(&ds, Code::GpuWorkloadWithoutDevicePlugin);
        assert_eq!(hits.len(), 1, "{ds}");
        assert!(
            hits[0].contains("only later (Helm stage `nvidia-device-plugin`)"),
            "{hits:?}"
        );
    }
}

#[test]
fn the_load_balancer_controller_needs_its_role_first() {
    let ds = Eks {
        lbc_role: None,
        ..Eks::default()
    }
    .validate();
    let hits = found(&ds, Code::LoadBalancerControllerWithoutRole);
    assert_eq!(hits.len(), 1, "{ds}");
    assert!(
        hits[0].contains("topo/aws-load-balancer-controller") && hits[0].contains("no IAM role"),
        "{hits:?}"
    );
    let ds = Eks {
        lbc_role: Some(false),
        ..Eks::default()
    }
    .validate();
    let hits = found(&ds, Code::LoadBalancerControllerWithoutRole);
    assert_eq!(hits.len(), 1, "{ds}");
    assert!(
        hits[0].contains("stage `late-role`, after this one"),
        "{hits:?}"
    );
}

#[test]
fn the_load_balancer_controller_values_name_the_stacks_cluster_and_region() {
    let ds = Eks {
        lbc_cluster: Some("someone-elses"),
        ..Eks::default()
    }
    .validate();
    let hits = found(&ds, Code::LoadBalancerControllerWrongCluster);
    assert_eq!(hits.len(), 1, "{ds}");
    assert!(
        hits[0].contains("name cluster `someone-elses`; this stack's EKS cluster is `topo`"),
        "{hits:?}"
    );
    let ds = Eks {
        lbc_region: Some("eu-west-1"),
        ..Eks::default()
    }
    .validate();
    let hits = found(&ds, Code::LoadBalancerControllerWrongCluster);
    assert_eq!(hits.len(), 1, "{ds}");
    assert!(
        hits[0].contains("region `eu-west-1`; the stack deploys to `us-west-2`"),
        "{hits:?}"
    );
}

#[test]
fn an_unknown_instance_type_is_reported_once_without_gpu_count_rules() {
    let ds = Eks {
        workload_type: "p9.96xlarge",
        server: kimi_k3_server().tensor_parallel_size(8),
        ..Eks::default()
    }
    .validate();
    let codes: Vec<Code> = ds.errors().map(|d| d.code).collect();
    assert_eq!(codes, vec![Code::UnknownInstanceType], "{ds}");
    // The same for an endpoint.
    let ds = hyperpod_with(
        InferenceEndpoint::new(
            "Odd",
            kimi_k3_server().tensor_parallel_size(8),
            "ml.p9.96xlarge",
        )
        .name("odd"),
    );
    let codes: Vec<Code> = ds.errors().map(|d| d.code).collect();
    assert_eq!(codes, vec![Code::UnknownInstanceType], "{ds}");
}

#[test]
fn help_lines_speak_of_the_users_values_not_the_reference() {
    // A DeepSeek server with an untagged image, a bad model id and served name, on an
    // unknown type, with no instance groups: every help line must stay clear of Kimi K3.
    let server = VllmServer::new("deepseek-ai/DeepSeek-V3", "deepseek/vllm")
        .served_model_name("DeepSeek V3!");
    let ds = Eks {
        server: server.clone(),
        workload_type: "x9.large",
        ..Eks::default()
    }
    .validate();
    let bad = VllmServer::new("not a model id", "deepseek/vllm:latest");
    let more = Eks {
        server: bad,
        ..Eks::default()
    }
    .validate();
    let mut stack = Stack::new("empty-hyperpod", REGION);
    let f = stack.cloudformation_stage("foundation");
    let network = stack.add(f, Network::new("Network"));
    let eks = stack.add(
        f,
        EksCluster::new("Eks", "deepseek")
            .subnets(&network.private_subnets)
            .vpc(&network.vpc),
    );
    let lifecycle = stack.add(f, LifecycleScripts::new("Lifecycle"));
    stack.add(
        f,
        HyperPodCluster::new("HyperPod", "deepseek", &eks.cluster, &lifecycle),
    );
    let hyperpod = App::new().stack(stack).validate();
    let all: Vec<&hyperforge::Diagnostic> = ds.iter().chain(&more).chain(&hyperpod).collect();
    for code in [
        Code::UnpinnedImage,
        Code::UnknownInstanceType,
        Code::InvalidModelId,
        Code::NoInstanceGroups,
    ] {
        assert!(all.iter().any(|d| d.code == code), "{code:?} not reported");
    }
    for d in &all {
        let help = d.help.to_ascii_lowercase();
        for leak in [
            "kimi",
            "k3",
            "p6-b300.48xlarge`",
            "e.g. p6-b300",
            "moonshot",
        ] {
            assert!(
                !help.contains(leak),
                "{:?} help leaks `{leak}`: {}",
                d.code,
                d.help
            );
        }
    }
    let unpinned = all
        .iter()
        .find(|d| d.code == Code::UnpinnedImage)
        .map(|d| d.help.clone())
        .unwrap_or_default();
    assert!(unpinned.contains("`deepseek/vllm:<version>`"), "{unpinned}");
}

#[test]
fn a_stack_file_gets_the_rules_at_its_lines() {
    use hyperforge::stackfile::load_str;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/stacks/kimi-k3-eks.yaml");
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace(
            "  - name: nvidia-device-plugin\n    kind: helm\n    preset: nvidia-device-plugin\n\n",
            "",
        )
        .replace(
            "      - load_balancer_controller: LoadBalancerController\n        cluster: Eks\n",
            "",
        )
        .replace(
            "        instance_type: p6-b300.48xlarge\n        autoscaling",
            "        instance_type: p6-b200.48xlarge\n        autoscaling",
        );
    let ds = match load_str("stacks/test.yaml", &text) {
        Ok(_) => panic!("expected diagnostics"),
        Err(ds) => ds,
    };
    let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let at = |code: Code| {
        ds.with_code(code)
            .next()
            .unwrap_or_else(|| panic!("{code:?} missing: {ds}"))
            .path
            .clone()
    };
    // At the Deployment (its object name, quoted in the message).
    let line = |path: String| -> usize {
        path.split(':')
            .nth(1)
            .and_then(|l| l.parse().ok())
            .unwrap_or(0)
    };
    let plugin = line(at(Code::GpuWorkloadWithoutDevicePlugin));
    assert!(
        (line_of("vllm_deployment: KimiK3")..line_of("instance_type: p6-b200")).contains(&plugin),
        "{ds}"
    );
    assert!(
        at(Code::WorkloadWithoutCapacity).starts_with(&format!(
            "stacks/test.yaml:{}:",
            line_of("instance_type: p6-b200")
        )),
        "{ds}"
    );
    assert!(
        at(Code::LoadBalancerControllerWithoutRole).starts_with(&format!(
            "stacks/test.yaml:{}:",
            line_of("- name: aws-load-balancer-controller")
        )),
        "{ds}"
    );
}

#[test]
fn a_workload_onto_a_cluster_described_elsewhere_is_not_checked_against_this_stack() {
    // Only the workload: its cluster, nodes and add-ons are another stack's.
    let mut stack = Stack::new("workload-only", REGION);
    let w = stack.kubernetes_stage("workload");
    stack.add(
        w,
        VllmDeployment::new("Server", kimi_k3_server(), "p6-b300.48xlarge")
            .name("server")
            .replicas(4)
            .cluster_ip_service(),
    );
    let ds = App::new().stack(stack).validate();
    for code in OURS {
        assert!(found(&ds, code).is_empty(), "{code:?}: {ds}");
    }
    // An endpoint in a stack with an EKS cluster but no HyperPod cluster: the same.
    let mut stack = Stack::new("endpoint-only", REGION);
    let f = stack.cloudformation_stage("foundation");
    let network = stack.add(f, Network::new("Network"));
    stack.add(
        f,
        EksCluster::new("Eks", "shared")
            .subnets(&network.private_subnets)
            .vpc(&network.vpc),
    );
    let w = stack.kubernetes_stage("workload");
    stack.add(
        w,
        InferenceEndpoint::new("Endpoint", kimi_k3_server(), "ml.p6-b300.48xlarge").name("ep"),
    );
    let ds = App::new().stack(stack).validate();
    assert!(found(&ds, Code::WorkloadWithoutCapacity).is_empty(), "{ds}");
}
