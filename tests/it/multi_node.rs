//! A replica over several nodes (`VllmDeployment::nodes_per_replica`): one LeaderWorkerSet
//! group per replica, leader and workers alike but for their part in vLLM's multi-node launch,
//! each pod on a node of its own with all its GPUs and EFA devices, Guaranteed, and stopped by
//! NCCL when the EFA network is not there; and what the description must give for it, refused
//! with its code otherwise.

use crate::reference::{self, kimi_k3_server, CAPACITY_BLOCK_AZ_ID};
use hyperforge::app::Stack;
use hyperforge::constructs::*;
use hyperforge::{App, Assembly, Code};
use serde::Deserialize;
use serde_json::Value;

/// The Kubernetes objects of an assembly.
fn objects(assembly: &Assembly) -> Vec<Value> {
    let mut out = Vec::new();
    for (path, bytes) in assembly.files() {
        if !path.ends_with(".yaml") || path.ends_with(".values.yaml") {
            continue;
        }
        for doc in serde_yaml::Deserializer::from_str(&String::from_utf8_lossy(bytes)) {
            let value = Value::deserialize(doc).unwrap();
            if value.get("kind").is_some() {
                out.push(value);
            }
        }
    }
    out
}

fn group(assembly: &Assembly) -> Value {
    let groups: Vec<Value> = objects(assembly)
        .into_iter()
        .filter(|o| o["kind"] == "LeaderWorkerSet")
        .collect();
    assert_eq!(groups.len(), 1, "one LeaderWorkerSet");
    groups.into_iter().next().unwrap()
}

/// A stack serving Kimi K3 on `nodes` nodes of `instance_type` per replica, from one Capacity
/// Block of that many instances, with `tweak` applied to the node group and the deployment.
/// Where the stack installs the LeaderWorkerSet controller and the EFA device plugin.
#[derive(Clone, Copy, PartialEq)]
enum Controllers {
    Before,
    After,
    Nowhere,
}
use Controllers::{After, Before, Nowhere};

fn stack_on(
    instance_type: &str,
    nodes: u32,
    controllers: Controllers,
    node_group: impl FnOnce(ManagedNodeGroup) -> ManagedNodeGroup,
    deployment: impl FnOnce(VllmDeployment) -> VllmDeployment,
) -> App {
    // Capacity Blocks come in 1, 2, 4, 8, ... instances; the group uses `nodes` of them.
    let block = nodes.next_power_of_two();
    let mut stack = Stack::new("multi", "us-west-2");
    let f = stack.cloudformation_stage("foundation");
    let net = stack.add(f, Network::new("Network").gpu_subnet(CAPACITY_BLOCK_AZ_ID));
    let sg = stack.add(f, ClusterSecurityGroup::new("Sg", &net.vpc));
    let eks = stack.add(
        f,
        EksCluster::new("Eks", "multi")
            .subnets(&net.private_subnets)
            .vpc(&net.vpc)
            .security_group(&sg.group),
    );
    let n = stack.cloudformation_stage("nodes");
    stack.add(
        n,
        node_group(
            ManagedNodeGroup::gpu("Gpu", &eks.cluster, instance_type, net.gpu_subnet.iter())
                .capacity(CapacityBlock::held(
                    "cr-0123456789abcdef0",
                    CAPACITY_BLOCK_AZ_ID,
                    block,
                ))
                .scaling(i64::from(block), i64::from(block), i64::from(block))
                .security_group(&sg.group),
        ),
    );
    stack.helm_stage("nvidia-device-plugin", HelmRelease::nvidia_device_plugin());
    let install = |stack: &mut Stack| {
        stack.helm_stage("efa-device-plugin", HelmRelease::efa_device_plugin());
        stack.helm_stage("lws", HelmRelease::leader_worker_set());
        stack.helm_stage("kueue", HelmRelease::kueue());
    };
    if controllers == Before {
        install(&mut stack);
    }
    let w = stack.kubernetes_stage("workload");
    stack.add(
        w,
        deployment(
            VllmDeployment::new("KimiK3", kimi_k3_server(), instance_type)
                .cluster_ip_service()
                .nodes_per_replica(nodes),
        ),
    );
    if controllers == After {
        install(&mut stack);
    }
    App::new().stack(stack)
}

fn efa_group(instance_type: &str, nodes: u32) -> App {
    stack_on(instance_type, nodes, Before, |g| g.efa(true), |d| d)
}

fn quantity<'a>(resources: &'a Value, side: &str, name: &str) -> &'a Value {
    &resources[side][name]
}

/// The pod's QoS class as the kubelet computes it (Kubernetes, "Pod Quality of Service
/// Classes"): Guaranteed when every container, init containers included, has CPU and memory
/// limits and requests equal to them (a request left out defaults to its limit).
fn qos_class(pod: &Value) -> &'static str {
    let containers: Vec<&Value> = pod["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(pod["initContainers"].as_array().into_iter().flatten())
        .collect();
    let mut any = false;
    let mut guaranteed = true;
    for c in containers {
        for resource in ["cpu", "memory"] {
            let limit = quantity(&c["resources"], "limits", resource);
            let request = quantity(&c["resources"], "requests", resource);
            any |= !limit.is_null() || !request.is_null();
            let request = if request.is_null() { limit } else { request };
            guaranteed &= !limit.is_null() && request == limit;
        }
    }
    match (any, guaranteed) {
        (_, true) => "Guaranteed",
        (true, false) => "Burstable",
        (false, false) => "BestEffort",
    }
}

/// The LeaderWorkerSet admission webhook's rules for a new object (kubernetes-sigs/lws v0.10.0,
/// `pkg/webhooks/leaderworkerset_webhook.go`, `ValidateCreate`): the vendored CRD carries no
/// CEL rules (`x-kubernetes-validations`), so these are what the API server adds to its schema.
fn admission_problems(lws: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let spec = &lws["spec"];
    let replicas = spec["replicas"].as_i64().unwrap_or(1);
    if !(0..=1_000_000).contains(&replicas) {
        out.push(format!("replicas {replicas}: must be 0 to 1000000"));
    }
    let size = spec["leaderWorkerTemplate"]["size"].as_i64().unwrap_or(1);
    if size < 1 {
        out.push(format!("size {size}: must be equal or greater than 1"));
    }
    if replicas.saturating_mul(size) > i64::from(i32::MAX) {
        out.push("the product of replicas and size exceeds MaxInt32".to_owned());
    }
    let rolling = &spec["rolloutStrategy"]["rollingUpdateConfiguration"];
    let as_count = |v: &Value| {
        v.as_i64().or_else(|| {
            v.as_str()
                .and_then(|s| s.trim_end_matches('%').parse().ok())
        })
    };
    let unavailable = as_count(&rolling["maxUnavailable"]).unwrap_or(1);
    let surge = as_count(&rolling["maxSurge"]).unwrap_or(0);
    if unavailable < 0 || surge < 0 {
        out.push("maxUnavailable and maxSurge must not be negative".to_owned());
    }
    if unavailable == 0 && surge == 0 {
        out.push("maxUnavailable must not be 0 when maxSurge is 0".to_owned());
    }
    if let Some(sub) = spec["leaderWorkerTemplate"]["subGroupPolicy"]["subGroupSize"].as_i64() {
        if sub < 1 || sub > size || (size % sub != 0 && (size - 1) % sub != 0) {
            out.push(format!(
                "subGroupSize {sub} does not divide size {size} or size - 1"
            ));
        }
    }
    out
}

#[test]
fn the_multi_node_reference_is_one_group_of_identical_guaranteed_pods() {
    let assembly = reference::kimi_k3_eks_multi_node()
        .synth()
        .unwrap_or_else(|d| panic!("{d}"));
    let objects = objects(&assembly);
    assert!(
        !objects.iter().any(|o| o["kind"] == "Deployment"),
        "a group replaces the Deployment"
    );
    let lws = group(&assembly);
    assert_eq!(lws["apiVersion"], "leaderworkerset.x-k8s.io/v1");
    let t = &lws["spec"]["leaderWorkerTemplate"];
    assert_eq!(t["size"], 2);
    assert_eq!(t["restartPolicy"], "RecreateGroupOnPodRestart");
    assert_eq!(lws["spec"]["startupPolicy"], "LeaderCreated");
    assert!(
        admission_problems(&lws).is_empty(),
        "{:?}",
        admission_problems(&lws)
    );

    let leader = &t["leaderTemplate"]["spec"];
    let worker = &t["workerTemplate"]["spec"];
    for (role, pod) in [("leader", leader), ("worker", worker)] {
        assert_eq!(qos_class(pod), "Guaranteed", "{role}");
        let c = &pod["containers"][0];
        // The instance's every GPU and EFA device, and the hugepages EFA uses.
        assert_eq!(
            quantity(&c["resources"], "requests", "nvidia.com/gpu"),
            "8",
            "{role}"
        );
        assert_eq!(
            quantity(&c["resources"], "requests", "vpc.amazonaws.com/efa"),
            "8",
            "{role}"
        );
        assert_eq!(
            quantity(&c["resources"], "limits", "hugepages-2Mi"),
            "5120Mi",
            "{role}"
        );
        // The fabric assertion: NCCL uses the EFA plugin or stops.
        let env = c["env"].as_array().unwrap();
        for (name, value) in [("NCCL_NET", "Libfabric"), ("FI_PROVIDER", "efa")] {
            assert!(
                env.iter().any(|e| e["name"] == name && e["value"] == value),
                "{role}: {name}={value}"
            );
        }
        // Shared memory sized for the node's GPUs.
        let dshm = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "dshm")
            .unwrap();
        assert_eq!(dshm["emptyDir"]["medium"], "Memory");
        assert_eq!(dshm["emptyDir"]["sizeLimit"], "64Gi");
    }
    // Leader and workers request the same resources and run the same image.
    assert_eq!(
        leader["containers"][0]["resources"],
        worker["containers"][0]["resources"]
    );
    // Every pod checks its release, then the group's fabric, on the server's own resources.
    for pod in [leader, worker] {
        let init: Vec<&str> = pod["initContainers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(init, ["engine-release", "fabric-check"]);
        let gate = &pod["initContainers"][1];
        assert_eq!(gate["resources"], pod["containers"][0]["resources"]);
        assert_eq!(gate["image"], pod["containers"][0]["image"]);
        let command: Vec<&str> = gate["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        // GPUs per node, the floor for p6-b200 (3,200 Gbps / 8 / 10), the rendezvous port.
        assert_eq!(command[command.len() - 3..], ["8", "40.0", "29502"]);
        assert!(gate["env"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "NCCL_NET" && e["value"] == "Libfabric"));
    }
    assert_eq!(
        leader["containers"][0]["image"],
        worker["containers"][0]["image"]
    );
    assert_eq!(leader["initContainers"], worker["initContainers"]);

    // vLLM's own launch: rank 0 serves the API, the worker's rank is its index, headless.
    let args = |pod: &Value| -> Vec<String> {
        pod["containers"][0]["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect()
    };
    let after = |args: &[String], flag: &str| -> String {
        let i = args
            .iter()
            .position(|a| a == flag)
            .unwrap_or_else(|| panic!("{flag}"));
        args[i + 1].clone()
    };
    let (l, w) = (args(leader), args(worker));
    for a in [&l, &w] {
        assert_eq!(after(a, "--tensor-parallel-size"), "8");
        assert_eq!(after(a, "--pipeline-parallel-size"), "2");
        assert_eq!(after(a, "--nnodes"), "2");
        assert_eq!(after(a, "--master-addr"), "$(LWS_LEADER_ADDRESS)");
    }
    assert_eq!(after(&l, "--node-rank"), "0");
    assert!(!l.contains(&"--headless".to_owned()));
    assert_eq!(after(&w, "--node-rank"), "$(LWS_WORKER_INDEX)");
    assert!(w.contains(&"--headless".to_owned()));
    // Workers serve no HTTP: no port, no probes.
    for key in ["ports", "startupProbe", "readinessProbe", "livenessProbe"] {
        assert!(worker["containers"][0].get(key).is_none(), "worker {key}");
        assert!(leader["containers"][0].get(key).is_some(), "leader {key}");
    }

    // The Service reaches the leaders only; the group's pods reach each other.
    let service = objects.iter().find(|o| o["kind"] == "Service").unwrap();
    assert_eq!(
        service["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"],
        "0"
    );
    // The runbook waits for the group and says how the fabric assertion shows.
    let runbook = assembly.text("kimi-k3-eks-multi-node/RUNBOOK.md").unwrap();
    assert!(runbook
        .contains("kubectl wait leaderworkerset/kimi-k3 -n kimi-k3 --for=condition=Available"));
    assert!(runbook.contains("NCCL_NET=Libfabric"));
    assert!(runbook.contains(
        "helm upgrade --install lws oci://registry.k8s.io/lws/charts/lws --version 0.10.0"
    ));
    // The manifest records the group.
    let manifest: Value = serde_json::from_str(assembly.text("manifest.json").unwrap()).unwrap();
    let endpoint = &manifest["stacks"][0]["inventory"]["endpoints"][0];
    assert_eq!(endpoint["nodes_per_replica"], 2, "{endpoint}");
    assert_eq!(endpoint["fabric_check_floor_mb_per_s"], 40000, "{endpoint}");
    assert!(runbook.contains("unless NCCL's bus bandwidth reaches 40.0 GB/s"));
}

/// The bandwidth gate's program: its arithmetic, and the whole program against a fake torch.
#[test]
fn the_bandwidth_gates_program_passes_its_tests() {
    crate::weights_stager::run_python_tests("test_check_fabric.py", 8);
}

/// The EFA devices each pod requests are the instance type's, from the catalog, as EC2
/// publishes them (`EfaInfo.MaximumEfaInterfaces`): 16 on p6-b300 and p5en, 32 on p5, 8 on
/// p6-b200; and every group's bandwidth gate has a floor above zero, a tenth of the instance's
/// network bandwidth (6,400 Gbps on p6-b300, 3,200 on the others).
#[test]
fn each_pod_requests_its_instance_types_efa_devices() {
    for (instance_type, nodes, efa, floor) in [
        ("p6-b300.48xlarge", 2, "16", "80.0"),
        ("p6-b200.48xlarge", 2, "8", "40.0"),
        ("p5en.48xlarge", 2, "16", "40.0"),
        ("p5.48xlarge", 3, "32", "40.0"),
    ] {
        let assembly = efa_group(instance_type, nodes)
            .synth()
            .unwrap_or_else(|d| panic!("{instance_type}: {d}"));
        let lws = group(&assembly);
        let t = &lws["spec"]["leaderWorkerTemplate"];
        assert_eq!(t["size"], nodes, "{instance_type}");
        for template in ["leaderTemplate", "workerTemplate"] {
            let pod = &t[template]["spec"];
            let r = &pod["containers"][0]["resources"];
            assert_eq!(
                quantity(r, "requests", "vpc.amazonaws.com/efa"),
                efa,
                "{instance_type}"
            );
            assert_eq!(
                quantity(r, "limits", "vpc.amazonaws.com/efa"),
                efa,
                "{instance_type}"
            );
            assert_eq!(qos_class(pod), "Guaranteed", "{instance_type} {template}");
            let gate = pod["initContainers"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == "fabric-check")
                .unwrap_or_else(|| panic!("{instance_type}: no bandwidth gate"));
            let command = gate["command"].as_array().unwrap();
            assert_eq!(command[command.len() - 2], floor, "{instance_type}");
        }
        assert!(admission_problems(&lws).is_empty());
    }
}

#[test]
fn the_admission_rules_refuse_what_the_webhook_refuses() {
    let ok = serde_json::json!({"spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2}}});
    assert!(admission_problems(&ok).is_empty());
    for bad in [
        serde_json::json!({"spec": {"replicas": -1, "leaderWorkerTemplate": {"size": 2}}}),
        serde_json::json!({"spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 0}}}),
        serde_json::json!({"spec": {"replicas": 1_000_000, "leaderWorkerTemplate": {"size": 4096}}}),
        serde_json::json!({"spec": {"leaderWorkerTemplate": {"size": 5, "subGroupPolicy": {"subGroupSize": 3}}}}),
        serde_json::json!({"spec": {"leaderWorkerTemplate": {"size": 2}, "rolloutStrategy": {"rollingUpdateConfiguration": {"maxUnavailable": 0, "maxSurge": 0}}}}),
    ] {
        assert!(!admission_problems(&bad).is_empty(), "{bad}");
    }
}

/// The model-aware rules read the group's pipeline stages: Kimi K3 fits 2 x p6-b200 at TP 8 x
/// PP 2 and not one p6-b200.
#[test]
fn the_memory_rules_count_every_stage_of_the_group() {
    let ds = efa_group("p6-b200.48xlarge", 2).validate();
    assert!(!ds.has_errors(), "{ds}");
    let ds = stack_on("p6-b200.48xlarge", 1, Before, |g| g.efa(true), |d| d).validate();
    assert!(ds.iter().any(|d| d.code == Code::ModelDoesNotFit), "{ds}");
}

#[test]
fn a_group_without_efa_interfaces_is_refused_at_the_field() {
    let ds = stack_on("p6-b200.48xlarge", 2, Before, |g| g, |d| d).validate();
    let d = ds
        .iter()
        .find(|d| d.code == Code::MultiNodeWithoutEfa)
        .unwrap_or_else(|| panic!("{ds}"));
    assert_eq!(d.field.as_deref(), Some("nodes_per_replica"));
    assert!(d.message.contains("multi/Gpu"), "{}", d.message);
}

#[test]
fn what_a_group_cannot_carry_out_is_refused_with_its_reason() {
    type Tweak = Box<dyn Fn(VllmDeployment) -> VllmDeployment>;
    let cases: [(&str, Tweak); 5] = [
        ("nodes_per_replica", Box::new(|d| d.nodes_per_replica(17))),
        ("nodes_per_replica", Box::new(|d| d.nodes_per_replica(0))),
        (
            "nodes_per_replica",
            Box::new(|d| d.nodes_per_replica(u32::MAX)),
        ),
        ("gpus", Box::new(|d| d.gpus(4))),
        (
            "server.image",
            Box::new(|_| {
                VllmDeployment::new(
                    "KimiK3",
                    VllmServer::new("moonshotai/Kimi-K3", "vllm/vllm-openai:v0.10.2")
                        .trust_remote_code(true),
                    "p6-b200.48xlarge",
                )
                .cluster_ip_service()
                .nodes_per_replica(2)
            }),
        ),
    ];
    for (field, tweak) in cases {
        let ds = stack_on("p6-b200.48xlarge", 2, Before, |g| g.efa(true), tweak).validate();
        assert!(
            ds.iter()
                .any(|d| d.code == Code::MultiNodeReplicaUnsupported
                    && d.field.as_deref() == Some(field)),
            "{field}: {ds}"
        );
    }
}

#[test]
fn a_stack_without_the_controller_or_the_efa_plugin_is_warned() {
    let ds = stack_on("p6-b200.48xlarge", 2, Nowhere, |g| g.efa(true), |d| d).validate();
    let d = ds
        .iter()
        .find(|d| d.code == Code::MultiNodeControllerMissing)
        .unwrap_or_else(|| panic!("{ds}"));
    assert!(
        d.message.contains("`lws`")
            && d.message.contains("`kueue`")
            && d.message.contains("`efa-device-plugin`"),
        "{d:?}"
    );
    // Installed only after the deployment's stage is as good as not installed.
    let ds = stack_on("p6-b200.48xlarge", 2, After, |g| g.efa(true), |d| d).validate();
    assert!(
        ds.iter()
            .any(|d| d.code == Code::MultiNodeControllerMissing),
        "{ds}"
    );
    let ds = efa_group("p6-b200.48xlarge", 2).validate();
    assert!(
        !ds.iter()
            .any(|d| d.code == Code::MultiNodeControllerMissing),
        "{ds}"
    );
}

/// Every option of the launch is checked against the release like hyperforge's others: the
/// reference's release (0.27.0) accepts them all.
#[test]
fn the_launch_options_are_in_the_releases_table() {
    let ds = reference::kimi_k3_eks_multi_node().validate();
    assert!(
        !ds.iter().any(|d| d.code == Code::EngineOptionNotAccepted),
        "{ds}"
    );
}

/// A layout `plan` finds is a value a description takes: the smallest B200 layout for Kimi K3
/// in us-west-2 becomes a deployment over two nodes that validates as the reference does.
#[test]
fn a_planned_layout_is_a_deployment() {
    use hyperforge::catalog::plan::{plan, PlanRequest};
    let model = hyperforge::catalog::model("moonshotai/Kimi-K3").unwrap();
    let found = plan(&PlanRequest {
        model,
        region: "us-west-2",
        context_tokens: None,
        replicas: 1,
        gpu_memory_utilization: 0.90,
        max_nodes: 4,
        reservation: Some(("p6-b200.48xlarge", 2)),
    });
    let layout = found.best().expect("a layout serves").layout;
    assert_eq!(layout.nodes_per_replica, 2);
    let app = stack_on(
        layout.instance_type,
        layout.nodes_per_replica,
        Before,
        |g| g.efa(true),
        |_| VllmDeployment::for_layout("KimiK3", kimi_k3_server(), &layout).cluster_ip_service(),
    );
    let ds = app.validate();
    assert!(!ds.has_errors(), "{ds}");
    let lws = group(&app.synth().unwrap_or_else(|d| panic!("{d}")));
    assert_eq!(lws["spec"]["leaderWorkerTemplate"]["size"], 2);
}

/// Autoscaling scales groups: the ScaledObject targets the LeaderWorkerSet, which then states
/// no replica count of its own, and the capacity bound counts whole nodes per replica (two
/// replicas of two nodes need four; a block of two holds one).
#[test]
fn autoscaling_scales_groups_within_whole_nodes() {
    const WORKSPACE: &str =
        "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-4567-89ef-0123-456789abcdef";
    let scaled = |max| {
        move |d: VllmDeployment| {
            d.autoscaling(hyperforge::constructs::vllm::Autoscaling::new(
                1, max, WORKSPACE,
            ))
        }
    };
    let app = stack_on("p6-b200.48xlarge", 2, Before, |g| g.efa(true), scaled(1));
    let assembly = app.synth().unwrap_or_else(|d| panic!("{d}"));
    let lws = group(&assembly);
    assert!(
        lws["spec"].get("replicas").is_none(),
        "KEDA's HPA owns the count"
    );
    let scaled_object = objects(&assembly)
        .into_iter()
        .find(|o| o["kind"] == "ScaledObject")
        .unwrap();
    let target = &scaled_object["spec"]["scaleTargetRef"];
    assert_eq!(target["apiVersion"], "leaderworkerset.x-k8s.io/v1");
    assert_eq!(target["kind"], "LeaderWorkerSet");
    assert_eq!(target["name"], lws["metadata"]["name"]);

    let ds = stack_on("p6-b200.48xlarge", 2, Before, |g| g.efa(true), scaled(2)).validate();
    let d = ds
        .iter()
        .find(|d| d.code == Code::AutoscalingAboveCapacity)
        .unwrap_or_else(|| panic!("{ds}"));
    assert!(d.message.contains("2 replicas of 16 GPUs"), "{}", d.message);
    assert!(d.message.contains("room for 1 replicas"), "{}", d.message);
}

/// What a pod of `template` requests, by resource, in thousandths: the containers' sum or the
/// largest init container's, each container's limit standing for a request it leaves out (as
/// the scheduler counts). Written here from the Kubernetes rules, apart from hyperforge's own.
fn pod_request(template: &Value) -> std::collections::BTreeMap<String, u128> {
    use hyperforge::constructs::vllm::gang::milli;
    let each = |c: &Value| {
        let mut out = std::collections::BTreeMap::new();
        for side in ["limits", "requests"] {
            for (k, v) in c["resources"][side].as_object().into_iter().flatten() {
                let q = v
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| v.to_string());
                out.insert(k.clone(), milli(&q).unwrap());
            }
        }
        out
    };
    let mut total = std::collections::BTreeMap::new();
    for c in template["spec"]["containers"].as_array().unwrap() {
        for (k, v) in each(c) {
            *total.entry(k).or_insert(0u128) += v;
        }
    }
    for c in template["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for (k, v) in each(c) {
            let t = total.entry(k).or_insert(0u128);
            *t = (*t).max(v);
        }
    }
    total
}

/// Each group is admitted whole by Kueue: the LeaderWorkerSet names a LocalQueue of its
/// namespace, whose ClusterQueue admits that namespace only, on a flavor of the nodes the pods
/// select, with a quota of exactly the groups the deployment may run (every resource a pod
/// requests, times its pods, times its groups), and the queue objects come before the group.
#[test]
fn each_group_is_admitted_whole_by_kueue() {
    use hyperforge::constructs::vllm::gang::milli;
    let check = |app: App, groups: u128| {
        let assembly = app.synth().unwrap_or_else(|d| panic!("{d}"));
        let all = objects(&assembly);
        let lws = group(&assembly);
        let of = |kind: &str| {
            let found: Vec<&Value> = all.iter().filter(|o| o["kind"] == kind).collect();
            assert_eq!(found.len(), 1, "one {kind}");
            found[0].clone()
        };
        let (local, cluster, flavor) = (of("LocalQueue"), of("ClusterQueue"), of("ResourceFlavor"));
        for o in [&local, &cluster, &flavor] {
            assert_eq!(o["apiVersion"], "kueue.x-k8s.io/v1beta2");
        }
        let position = |kind: &str| all.iter().position(|o| o["kind"] == kind).unwrap();
        assert!(position("ResourceFlavor") < position("ClusterQueue"));
        assert!(position("ClusterQueue") < position("LocalQueue"));
        assert!(position("LocalQueue") < position("LeaderWorkerSet"));
        let ns = lws["metadata"]["namespace"].as_str().unwrap();
        assert_eq!(
            lws["metadata"]["labels"]["kueue.x-k8s.io/queue-name"],
            local["metadata"]["name"]
        );
        assert_eq!(local["metadata"]["namespace"], ns);
        assert_eq!(local["spec"]["clusterQueue"], cluster["metadata"]["name"]);
        assert_eq!(
            cluster["spec"]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
            ns
        );
        let template = &lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"];
        assert_eq!(
            flavor["spec"]["nodeLabels"], template["spec"]["nodeSelector"],
            "the flavor is the nodes the pods select"
        );
        let size = lws["spec"]["leaderWorkerTemplate"]["size"]
            .as_u64()
            .unwrap() as u128;
        let want = pod_request(template);
        let worker = pod_request(&lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]);
        assert_eq!(want, worker, "leader and workers request the same");
        let group = &cluster["spec"]["resourceGroups"][0];
        let covered: Vec<&str> = group["coveredResources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(covered, want.keys().map(String::as_str).collect::<Vec<_>>());
        let f = &group["flavors"][0];
        assert_eq!(f["name"], flavor["metadata"]["name"]);
        for (i, (resource, per_pod)) in want.iter().enumerate() {
            let quota = &f["resources"][i];
            assert_eq!(quota["name"], resource.as_str());
            assert_eq!(
                milli(quota["nominalQuota"].as_str().unwrap()),
                Some(per_pod * size * groups),
                "{resource}"
            );
        }
        want
    };
    // The reference: one group of two p6-b200 nodes, each pod all 8 GPUs and 8 EFA devices.
    let want = check(reference::kimi_k3_eks_multi_node(), 1);
    assert_eq!(want["nvidia.com/gpu"], 8_000);
    assert_eq!(want["vpc.amazonaws.com/efa"], 8_000);
    // Autoscaled, the quota is the maximum's groups.
    const WORKSPACE: &str =
        "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-4567-89ef-0123-456789abcdef";
    // Room for 3 groups: a block of 8 instances.
    let eight = |g: ManagedNodeGroup| {
        g.efa(true)
            .capacity(CapacityBlock::held(
                "cr-0123456789abcdef0",
                CAPACITY_BLOCK_AZ_ID,
                8,
            ))
            .scaling(8, 8, 8)
    };
    let scaled = stack_on("p6-b200.48xlarge", 2, Before, eight, |d| {
        d.autoscaling(hyperforge::constructs::vllm::Autoscaling::new(
            1, 3, WORKSPACE,
        ))
    });
    check(scaled, 3);
    // A single-node deployment has no queue.
    let single = reference::kimi_k3_eks().synth().unwrap();
    assert!(!objects(&single).iter().any(|o| o["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .starts_with("kueue.x-k8s.io")));
}

/// Kueue admits a LeaderWorkerSet of at most 39 characters (its pods' group label holds the
/// name and a suffix): a longer name is refused at the field.
#[test]
fn a_group_name_kueue_cannot_label_is_refused() {
    let long = "k".repeat(40);
    let ds = stack_on(
        "p6-b200.48xlarge",
        2,
        Before,
        |g| g.efa(true),
        |d| d.name(&long),
    )
    .validate();
    assert!(
        ds.iter()
            .any(|d| d.code == Code::MultiNodeNameTooLong && d.field.as_deref() == Some("name")),
        "{ds}"
    );
    let ok = "k".repeat(39);
    let ds = stack_on(
        "p6-b200.48xlarge",
        2,
        Before,
        |g| g.efa(true),
        |d| d.name(&ok),
    )
    .validate();
    assert!(
        !ds.iter().any(|d| d.code == Code::MultiNodeNameTooLong),
        "{ds}"
    );
}
