//! Every numeric input a description can carry, at any value a caller can pass (zero,
//! negative, huge, not finite): validation and synthesis return diagnostics or an assembly and
//! never panic (tests build with overflow checks, so an overflow is a panic here) or abort on
//! an allocation sized by the input.

use crate::reference::{kimi_k3_server, CAPACITY_BLOCK_AZ_ID, CAPACITY_BLOCK_RESERVATION_ID};
use hyperforge::app::Stack;
use hyperforge::constructs::*;
use hyperforge::App;
use proptest::prelude::*;

/// Whole numbers at the edges and in between.
fn edge_i64() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(i64::MIN),
        Just(-1),
        Just(0),
        Just(1),
        Just(2),
        Just(64),
        Just(i64::from(u32::MAX)),
        Just(i64::MAX),
        any::<i64>(),
    ]
}

fn edge_u32() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0),
        Just(1),
        Just(2),
        Just(6),
        Just(7),
        Just(u32::MAX),
        any::<u32>()
    ]
}

fn edge_u64() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0), Just(1), Just(u64::MAX), any::<u64>()]
}

fn edge_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(-1.0),
        Just(1e-300),
        Just(1e300),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        any::<f64>(),
    ]
}

#[derive(Debug, Clone)]
struct Numbers {
    zones: u32,
    retention: u32,
    scaling: (i64, i64, i64),
    root: i64,
    block: u32,
    tp: u32,
    dcp: u32,
    util: f64,
    len: u64,
    weights: u64,
    rates: (f64, f64, f64),
    replicas: i64,
    gpus: u32,
}

fn numbers() -> impl Strategy<Value = Numbers> {
    (
        (
            edge_u32(),
            edge_u32(),
            (edge_i64(), edge_i64(), edge_i64()),
            edge_i64(),
            edge_u32(),
        ),
        (edge_u32(), edge_u32(), edge_f64(), edge_u64(), edge_u64()),
        ((edge_f64(), edge_f64(), edge_f64()), edge_i64(), edge_u32()),
    )
        .prop_map(
            |(
                (zones, retention, scaling, root, block),
                (tp, dcp, util, len, weights),
                (rates, replicas, gpus),
            )| {
                Numbers {
                    zones,
                    retention,
                    scaling,
                    root,
                    block,
                    tp,
                    dcp,
                    util,
                    len,
                    weights,
                    rates,
                    replicas,
                    gpus,
                }
            },
        )
}

/// The EKS path with every number replaced.
fn app(n: &Numbers) -> App {
    let mut stack = Stack::new("numbers", "us-west-2");
    let f = stack.cloudformation_stage("foundation");
    let net = stack.add(
        f,
        Network::new("Network")
            .availability_zones(n.zones)
            .flow_log_retention_days(n.retention)
            .gpu_subnet(CAPACITY_BLOCK_AZ_ID),
    );
    let eks = stack.add(
        f,
        EksCluster::new("Eks", "numbers")
            .subnets(&net.private_subnets)
            .vpc(&net.vpc),
    );
    stack.add(
        f,
        ManagedNodeGroup::gpu(
            "Gpu",
            &eks.cluster,
            "p6-b300.48xlarge",
            net.gpu_subnet.iter(),
        )
        .capacity(NodeCapacity::capacity_block_of(
            CAPACITY_BLOCK_RESERVATION_ID,
            CAPACITY_BLOCK_AZ_ID,
            n.block,
        ))
        .scaling(n.scaling.0, n.scaling.1, n.scaling.2)
        .root_volume_gb(n.root),
    );
    let server = kimi_k3_server()
        .tensor_parallel_size(n.tp)
        .decode_context_parallel_size(n.dcp)
        .gpu_memory_utilization(n.util)
        .max_model_len(n.len)
        .weight_bytes(n.weights)
        .storage_throughput(StorageThroughput {
            download_bytes_per_sec: n.rates.0,
            load_bytes_per_sec: n.rates.1,
            warmup_secs: n.rates.2,
        });
    let w = stack.kubernetes_stage("workload");
    stack.add(
        w,
        VllmDeployment::new("KimiK3", server, "p6-b300.48xlarge")
            .replicas(i32::try_from(n.replicas).unwrap_or(i32::MAX))
            .gpus(n.gpus)
            .load_balancer_subnets(&net.private_subnets),
    );
    App::new().stack(stack)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_number_gives_diagnostics_or_an_assembly(n in numbers()) {
        let app = app(&n);
        let _ = app.validate();
        match app.synth() {
            Ok(assembly) => prop_assert!(!assembly.files().is_empty()),
            Err(ds) => prop_assert!(ds.has_errors() || ds.has_warnings()),
        }
    }
}

/// The HyperPod path with every instance-group number replaced.
fn hyperpod_app(count: i64, threads: i64, ebs: i64, reserved: i64, replicas: i32) -> App {
    use crate::reference::{TRAINING_PLAN_ARN, TRAINING_PLAN_AZ_ID};
    let mut stack = Stack::new("numbers", "us-west-2");
    let f = stack.cloudformation_stage("foundation");
    let net = stack.add(
        f,
        Network::new("Network").hyperpod_subnet(TRAINING_PLAN_AZ_ID),
    );
    let sg = stack.add(f, ClusterSecurityGroup::new("Sg", &net.vpc));
    let eks = stack.add(
        f,
        EksCluster::new("Eks", "numbers")
            .subnets(&net.private_subnets)
            .vpc(&net.vpc)
            .security_group(&sg.group),
    );
    let lifecycle = stack.add(f, LifecycleScripts::new("Lifecycle"));
    stack.upload_stage("scripts", lifecycle.upload());
    stack.helm_stage("deps", HelmRelease::hyperpod_dependencies());
    let c = stack.cloudformation_stage("cluster");
    let mut cluster = HyperPodCluster::new("HyperPod", "numbers", &eks.cluster, &lifecycle)
        .security_group(&sg.group)
        .instance_group(
            InstanceGroup::new("gpu", "ml.p6-b300.48xlarge")
                .count(count)
                .threads_per_core(threads)
                .ebs_volume_gb(ebs)
                .capacity(
                    Capacity::training_plan(TRAINING_PLAN_ARN, TRAINING_PLAN_AZ_ID)
                        .reserved_instances(reserved),
                ),
        );
    if let Some(subnet) = &net.hyperpod_subnet {
        cluster = cluster.subnet(subnet);
    }
    stack.add(c, cluster);
    let i = stack.kubernetes_stage("inference");
    stack.add(
        i,
        InferenceEndpoint::new("KimiK3", kimi_k3_server(), "ml.p6-b300.48xlarge")
            .replicas(replicas),
    );
    App::new().stack(stack)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_instance_group_number_gives_diagnostics_or_an_assembly(
        count in edge_i64(),
        threads in edge_i64(),
        ebs in edge_i64(),
        reserved in edge_i64(),
        replicas in any::<i32>(),
    ) {
        let app = hyperpod_app(count, threads, ebs, reserved, replicas);
        match app.synth() {
            Ok(assembly) => prop_assert!(!assembly.files().is_empty()),
            Err(ds) => prop_assert!(ds.has_errors() || ds.has_warnings()),
        }
    }
}
