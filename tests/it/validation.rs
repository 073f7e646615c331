//! Model-aware validation end to end: memory fit, parallelism, model source, reserved
//! capacity, regions and warnings-as-errors, each rule with a passing and a failing
//! description, and a description with several faults reported in one run.

use crate::fixtures::{
    add_hyperpod_stages, add_hyperpod_stages_with, training_plan_group, TRAINING_PLAN,
};
use hyperforge::app::Stack;
use hyperforge::catalog::{AttentionKind, Experts, Model, Precision};
use hyperforge::constructs::{
    Capacity, ContainerStorage, InferenceEndpoint, InstanceGroup, LifecycleScripts, Network,
    VllmServer,
};
use hyperforge::{App, Code, Diagnostics, SynthOptions};

const ENDPOINT: &str = "test/Model";
const GROUP: &str = "test/HyperPod/gpu";

fn k3() -> VllmServer {
    VllmServer::new("moonshotai/Kimi-K3", "vllm/vllm-openai:kimi-k3").trust_remote_code(true)
}

fn llama_70b() -> VllmServer {
    VllmServer::new(
        "meta-llama/Llama-3.1-70B-Instruct",
        "vllm/vllm-openai:v0.11.0",
    )
    .served_model_name("llama-70b")
}

/// A HyperPod stack in `region` with instance group `group` and endpoints `endpoints` (id,
/// server, instance type).
fn app_with(region: &str, group: InstanceGroup, endpoints: Vec<(&str, VllmServer, &str)>) -> App {
    let mut stack = Stack::new("test", region);
    let zone = if region == "us-west-2" {
        "usw2-az2"
    } else {
        "use1-az2"
    };
    let network = Network::new("Network").hyperpod_subnet(zone);
    add_hyperpod_stages(&mut stack, network, "test", group);
    let inference = stack.kubernetes_stage("inference");
    for (id, server, instance) in endpoints {
        let name = id.to_lowercase();
        stack.add(
            inference,
            InferenceEndpoint::new(id, server, instance).name(name),
        );
    }
    App::new().stack(stack)
}

fn serve(server: VllmServer, instance: &str) -> Diagnostics {
    app_with(
        "us-west-2",
        training_plan_group(),
        vec![("Model", server, instance)],
    )
    .validate()
}

/// The number after `prefix` in the message of the first `code` diagnostic.
fn number_after(ds: &Diagnostics, code: Code, prefix: &str) -> f64 {
    let d = ds
        .with_code(code)
        .next()
        .unwrap_or_else(|| panic!("no {code} in:\n{ds}"));
    let rest = d
        .message
        .split_once(prefix)
        .unwrap_or_else(|| panic!("`{prefix}` not in `{}`", d.message))
        .1;
    let number: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    number
        .parse()
        .unwrap_or_else(|_| panic!("no number in `{rest}`"))
}

// HF0501: the model must fit.

#[test]
fn kimi_k3_fits_p6_b300_at_tp8() {
    let ds = serve(k3(), "ml.p6-b300.48xlarge");
    assert!(!ds.has_errors(), "{ds}");
    assert_eq!(ds.with_code(Code::ModelDoesNotFit).count(), 0);
    assert_eq!(ds.with_code(Code::OversizedInstance).count(), 0);
}

#[test]
fn kimi_k3_is_refused_on_p6_b200_with_the_shortfall() {
    let ds = serve(k3(), "ml.p6-b200.48xlarge");
    assert!(ds.contains(Code::ModelDoesNotFit, ENDPOINT), "{ds}");
    // 181.7 GiB of weights per GPU vs 161.2 GiB usable (179.1 GiB x 0.90): 20.6 GiB short.
    let short = number_after(&ds, Code::ModelDoesNotFit, "short by ");
    assert!((short - 20.6).abs() <= 0.15, "{short}");
    let usable = number_after(&ds, Code::ModelDoesNotFit, "of weights per GPU, ");
    assert!((usable - 161.2).abs() <= 0.15, "{usable}");
    let d = ds.with_code(Code::ModelDoesNotFit).next().unwrap();
    assert!(d.message.contains("181.7 GiB of weights per GPU"), "{d}");
    // The help names what would work, with its headroom (60.0 GiB per GPU at 0.90).
    assert!(
        d.help.contains("ml.p6-b300.48xlarge (TP 8, +60.0 GiB"),
        "{}",
        d.help
    );
    assert!(
        d.to_string()
            .contains("= note: Kimi K3 weights: 1453.7 GiB (published checkpoint)"),
        "{d}"
    );
}

/// A model no single node holds: the help names the planner's smallest multi-node layouts,
/// from the same arithmetic `hyperforge plan` prints.
#[test]
fn a_model_no_node_holds_is_pointed_at_the_planners_layouts() {
    // Twice Kimi K3's weights: 2,907 GiB, more than 8 x B300 hold at 0.90.
    let ds = serve(k3().weight_bytes(3_121_872_182_896), "ml.p6-b300.48xlarge");
    let d = ds
        .with_code(Code::ModelDoesNotFit)
        .next()
        .unwrap_or_else(|| panic!("{ds}"));
    assert!(
        d.help.contains(
            "no single catalog instance holds Kimi K3 at 0.90: it needs several nodes per replica"
        ),
        "{}",
        d.help
    );
    assert!(
        d.help
            .contains("`hyperforge plan moonshotai/Kimi-K3 --region "),
        "{}",
        d.help
    );
    assert!(
        d.help.contains(
            "the smallest multi-node layouts: 2 x p6-b300.48xlarge (TP 8 x PP 2, 16 GPUs)"
        ),
        "{}",
        d.help
    );
}

#[test]
fn kimi_k3_is_refused_on_p5en_with_the_shortfall() {
    let ds = serve(k3(), "ml.p5en.48xlarge");
    assert!(ds.contains(Code::ModelDoesNotFit, ENDPOINT), "{ds}");
    let short = number_after(&ds, Code::ModelDoesNotFit, "short by ");
    assert!((short - 54.8).abs() <= 0.15, "{short}");
}

// HF0401: tensor parallelism within one node.

#[test]
fn tensor_parallel_size_is_bounded_by_the_node() {
    assert!(!serve(k3().tensor_parallel_size(8), "ml.p6-b300.48xlarge")
        .contains(Code::InvalidTensorParallelSize, ENDPOINT));
    let ds = serve(k3().tensor_parallel_size(16), "ml.p6-b300.48xlarge");
    assert!(
        ds.contains(Code::InvalidTensorParallelSize, ENDPOINT),
        "{ds}"
    );
}

// HF0502: attention heads divisible by TP.

fn odd_heads_model(heads: u32) -> Model {
    Model::new("acme/odd-7b", "Odd 7B")
        .parameters("all", 7_000_000_000, Precision::Bf16)
        .attention(
            32,
            AttentionKind::Gqa {
                kv_heads: 4,
                head_dim: 128,
            },
        )
        .attention_heads(heads)
        .max_context_tokens(32_768)
}

#[test]
fn attention_heads_must_divide_by_tensor_parallel_size() {
    let server = |heads| {
        VllmServer::new("acme/odd-7b", "vllm/vllm-openai:v0.11.0")
            .model_spec(odd_heads_model(heads))
    };
    let ok = serve(server(32), "ml.p5.48xlarge");
    assert!(
        !ok.contains(Code::AttentionHeadsNotDivisible, ENDPOINT),
        "{ok}"
    );
    let ds = serve(server(12), "ml.p5.48xlarge");
    assert!(
        ds.contains(Code::AttentionHeadsNotDivisible, ENDPOINT),
        "{ds}"
    );
    let d = ds
        .with_code(Code::AttentionHeadsNotDivisible)
        .next()
        .unwrap();
    assert!(
        d.message.contains("12 attention heads") && d.message.contains("size 8"),
        "{d}"
    );
    assert!(d.help.contains("1, 2, 4"), "{}", d.help);
}

// HF0503: TP a multiple of DCP.

#[test]
fn tensor_parallel_size_must_be_a_multiple_of_dcp() {
    let ok = serve(k3().decode_context_parallel_size(8), "ml.p6-b300.48xlarge");
    assert!(!ok.has_errors(), "{ok}");
    let ds = serve(k3().decode_context_parallel_size(3), "ml.p6-b300.48xlarge");
    assert!(
        ds.contains(Code::InvalidDecodeContextParallelSize, ENDPOINT),
        "{ds}"
    );
    let args = k3()
        .decode_context_parallel_size(8)
        .args("/opt/ml/model", 8)
        .join(" ");
    assert!(args.contains("--decode-context-parallel-size 8"), "{args}");
}

// HF0504: MXFP4 slices of whole 32-value groups.

fn mxfp4_moe(moe_intermediate_size: u32) -> Model {
    Model::new("acme/mxfp4-moe", "MXFP4 MoE")
        .parameters("experts", 110_000_000_000, Precision::Mxfp4)
        .parameters("rest", 5_000_000_000, Precision::Bf16)
        .attention(
            36,
            AttentionKind::Gqa {
                kv_heads: 8,
                head_dim: 64,
            },
        )
        .attention_heads(64)
        .experts(Experts {
            routed: 128,
            active_per_token: 4,
            shared: 0,
            moe_intermediate_size,
        })
        .max_context_tokens(131_072)
}

#[test]
fn mxfp4_experts_need_whole_scale_groups_per_rank() {
    assert_eq!(3072 / 8 % 32, 0, "Kimi K3 at TP 8");
    let server = |inter| {
        VllmServer::new("acme/mxfp4-moe", "vllm/vllm-openai:v0.11.0").model_spec(mxfp4_moe(inter))
    };
    let ok = serve(server(3072), "ml.p5.48xlarge");
    assert!(!ok.contains(Code::Mxfp4ShardGranularity, ENDPOINT), "{ok}");
    // 2880 / 8 = 360 values per rank, 360 % 32 = 8.
    let ds = serve(server(2880), "ml.p5.48xlarge");
    assert!(ds.contains(Code::Mxfp4ShardGranularity, ENDPOINT), "{ds}");
    assert!(!serve(k3(), "ml.p6-b300.48xlarge").contains(Code::Mxfp4ShardGranularity, ENDPOINT));
}

// HF0505: oversized instance (warning).

#[test]
fn a_much_smaller_instance_is_suggested() {
    let ds = serve(llama_70b(), "ml.p6-b300.48xlarge");
    assert!(!ds.has_errors(), "{ds}");
    assert!(ds.contains(Code::OversizedInstance, ENDPOINT), "{ds}");
    let d = ds.with_code(Code::OversizedInstance).next().unwrap();
    // The cheapest catalog type offered for HyperPod in us-west-2 that keeps 10 % free:
    // 8 x A100 40 GB, 16.4 GiB of weights per GPU, 19.6 GiB free.
    assert!(d.help.contains("ml.p4d.24xlarge ($21.96/h"), "{}", d.help);
    assert!(
        d.help.contains("ml.p6-b300.48xlarge ($142.42/h"),
        "{}",
        d.help
    );
    let fitting = serve(llama_70b(), "ml.p4d.24xlarge");
    assert!(
        !fitting.contains(Code::OversizedInstance, ENDPOINT),
        "{fitting}"
    );
}

// HF0506: weights downloaded by every new pod (warning).

#[test]
fn hub_downloads_of_large_checkpoints_are_reported() {
    let ds = serve(k3(), "ml.p6-b300.48xlarge");
    assert!(ds.contains(Code::WeightsDownloadedPerPod, ENDPOINT), "{ds}");
    let d = ds.with_code(Code::WeightsDownloadedPerPod).next().unwrap();
    assert!(
        d.message.contains("1453.7 GiB") && d.message.contains("about 53 min"),
        "{d}"
    );
    // 141 GB at 500 MB/s is under five minutes: not reported.
    let small = serve(llama_70b(), "ml.p4d.24xlarge");
    assert!(
        !small.contains(Code::WeightsDownloadedPerPod, ENDPOINT),
        "{small}"
    );
}

// HF0507: model not in the catalog (warning).

#[test]
fn models_outside_the_catalog_are_reported_until_described() {
    let unknown = VllmServer::new("acme/odd-7b", "vllm/vllm-openai:v0.11.0");
    let ds = serve(unknown.clone(), "ml.p5.48xlarge");
    assert!(ds.contains(Code::ModelNotInCatalog, ENDPOINT), "{ds}");
    let described = serve(unknown.model_spec(odd_heads_model(32)), "ml.p5.48xlarge");
    assert!(
        !described.contains(Code::ModelNotInCatalog, ENDPOINT),
        "{described}"
    );
}

// HF0508 and HF0509: context length.

#[test]
fn max_model_len_must_fit_the_model_and_the_kv_cache() {
    let ok = serve(k3().max_model_len(1_048_576), "ml.p6-b300.48xlarge");
    assert!(!ok.has_errors(), "{ok}");
    let ds = serve(k3().max_model_len(2_000_000), "ml.p6-b300.48xlarge");
    assert!(
        ds.contains(Code::ContextLengthExceedsModel, ENDPOINT),
        "{ds}"
    );
    // At 0.77 the headroom is 25.1 GiB; one 1 M-token sequence needs 27.0 GiB (27,648 bytes
    // per token, replicated on each rank).
    let tight = serve(
        k3().gpu_memory_utilization(0.77).max_model_len(1_048_576),
        "ml.p6-b300.48xlarge",
    );
    assert!(
        tight.contains(Code::ContextDoesNotFitKvCache, ENDPOINT),
        "{tight}"
    );
    let needed = number_after(&tight, Code::ContextDoesNotFitKvCache, "tokens needs ");
    assert!((needed - 27.0).abs() <= 0.1, "{needed}");
    // Decode context parallelism shards the cache: 3.4 GiB per GPU.
    let sharded = serve(
        k3().gpu_memory_utilization(0.77)
            .max_model_len(1_048_576)
            .decode_context_parallel_size(8),
        "ml.p6-b300.48xlarge",
    );
    assert!(!sharded.has_errors(), "{sharded}");
}

// HF0411: utilization in (0, 1].

#[test]
fn gpu_memory_utilization_is_a_fraction() {
    let ds = serve(k3().gpu_memory_utilization(1.5), "ml.p6-b300.48xlarge");
    assert!(
        ds.contains(Code::InvalidGpuMemoryUtilization, ENDPOINT),
        "{ds}"
    );
    assert!(
        !ds.contains(Code::InvalidTensorParallelSize, ENDPOINT),
        "{ds}"
    );
}

// HF0314 and HF0315: reserved capacity.

#[test]
fn instance_count_may_not_exceed_the_reserved_count() {
    let ok = app_with(
        "us-west-2",
        training_plan_group()
            .count(2)
            .capacity(Capacity::training_plan(TRAINING_PLAN, "usw2-az2").reserved_instances(2)),
        vec![],
    )
    .validate();
    assert!(!ok.has_errors(), "{ok}");
    let ds = app_with(
        "us-west-2",
        training_plan_group()
            .count(3)
            .capacity(Capacity::training_plan(TRAINING_PLAN, "usw2-az2").reserved_instances(2)),
        vec![],
    )
    .validate();
    assert!(ds.contains(Code::InstanceCountAboveReserved, GROUP), "{ds}");
}

#[test]
fn reserved_counts_are_powers_of_two_up_to_64() {
    let with_reserved = |n| {
        app_with(
            "us-west-2",
            training_plan_group()
                .capacity(Capacity::training_plan(TRAINING_PLAN, "usw2-az2").reserved_instances(n)),
            vec![],
        )
        .validate()
    };
    assert!(!with_reserved(4).contains(Code::InvalidReservedInstanceCount, GROUP));
    let ds = with_reserved(3);
    assert!(
        ds.contains(Code::InvalidReservedInstanceCount, GROUP),
        "{ds}"
    );
    // The shared check for Capacity Blocks.
    for (count, valid) in [(1, true), (64, true), (0, false), (48, false), (128, false)] {
        let mut ds = Diagnostics::new();
        hyperforge::catalog::capacity::check_block_count(count, "test/Block", &mut ds);
        assert_eq!(ds.is_empty(), valid, "{count}");
    }
}

// HF0304: HyperPod regions, as in cfn-lint's pricing-derived data.

#[test]
fn p6_b300_hyperpod_only_in_us_east_1_and_us_west_2() {
    let east1 = app_with(
        "us-east-1",
        InstanceGroup::new("gpu", "ml.p6-b300.48xlarge"),
        vec![],
    );
    assert!(!east1
        .validate()
        .contains(Code::InstanceTypeNotInRegion, GROUP));
    let west2 = app_with("us-west-2", training_plan_group(), vec![]);
    assert!(!west2
        .validate()
        .contains(Code::InstanceTypeNotInRegion, GROUP));
    let east2 = app_with(
        "us-east-2",
        InstanceGroup::new("gpu", "ml.p6-b300.48xlarge"),
        vec![],
    );
    assert!(east2
        .validate()
        .contains(Code::InstanceTypeNotInRegion, GROUP));
}

// Warnings deny on request.

#[test]
fn warnings_stop_synthesis_only_when_denied() {
    let app = app_with(
        "us-west-2",
        training_plan_group(),
        vec![("Model", k3(), "ml.p6-b300.48xlarge")],
    );
    let assembly = app.synth().unwrap_or_else(|d| panic!("{d}"));
    assert!(assembly
        .warnings()
        .contains(Code::WeightsDownloadedPerPod, ENDPOINT));
    let denied = app
        .synth_with(&SynthOptions {
            deny_warnings: true,
            ..Default::default()
        })
        .unwrap_err();
    assert!(!denied.has_errors());
    assert!(
        denied.contains(Code::WeightsDownloadedPerPod, ENDPOINT),
        "{denied}"
    );
}

// Everything at once.

#[test]
fn every_model_level_fault_is_reported_in_one_run() {
    let group = InstanceGroup::new("gpu", "ml.p6-b300.48xlarge")
        .count(4)
        .capacity(Capacity::training_plan(TRAINING_PLAN, "usw2-az1").reserved_instances(3));
    let app = app_with(
        "us-west-2",
        group,
        vec![
            (
                "Model",
                k3().decode_context_parallel_size(3)
                    .max_model_len(2_000_000),
                "ml.p6-b200.48xlarge",
            ),
            (
                "Odd",
                VllmServer::new("acme/odd-7b", "vllm/vllm-openai:v0.11.0")
                    .model_spec(odd_heads_model(12)),
                "ml.p5.48xlarge",
            ),
            (
                "Unknown",
                VllmServer::new("acme/unknown", "vllm/vllm-openai:v0.11.0"),
                "ml.p5.48xlarge",
            ),
        ],
    );
    let err = app.synth().unwrap_err();
    let expected = [
        (Code::ModelDoesNotFit, ENDPOINT),
        (Code::InvalidDecodeContextParallelSize, ENDPOINT),
        (Code::ContextLengthExceedsModel, ENDPOINT),
        (Code::WeightsDownloadedPerPod, ENDPOINT),
        (Code::AttentionHeadsNotDivisible, "test/Odd"),
        (Code::ModelNotInCatalog, "test/Unknown"),
        (Code::TrainingPlanZoneMismatch, GROUP),
        (Code::InvalidReservedInstanceCount, GROUP),
        (Code::InstanceCountAboveReserved, GROUP),
    ];
    for (code, path) in expected {
        assert!(
            err.contains(code, path),
            "missing {code} at {path} in:\n{err}"
        );
    }
    let json: serde_json::Value = serde_json::from_str(&err.to_json()).unwrap();
    assert!(json
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["code"] == "HF0501" && d["notes"].as_array().is_some_and(|n| !n.is_empty())));
}

// The reference stack.

#[test]
fn reference_stacks_have_no_warnings_but_the_s3_deployed_template() {
    for app in crate::reference::all()
        .into_iter()
        .chain(crate::reference::variants())
    {
        let assembly = app.synth().unwrap_or_else(|d| panic!("{d}"));
        // Both paths serve the staged copy, so no Hub download warning (HF0506). A foundation
        // template over the inline limit is deployed from S3 (the manifest says so; the
        // runbook and `hyperforge deploy` upload it): its warning is the only one.
        let codes: Vec<Code> = assembly
            .warnings()
            .iter()
            .map(|d| d.code)
            .filter(|c| *c != Code::TemplateNeedsS3Upload)
            .collect();
        assert_eq!(codes, [], "{}", assembly.warnings());
    }
}

// HF0510: the serving node's own storage holds the downloaded weights.

/// Kimi K3 on HyperPod with `lifecycle` and the reference group with an EBS volume of
/// `ebs_gb`.
fn k3_on_hyperpod_storage(lifecycle: LifecycleScripts, ebs_gb: i64) -> Diagnostics {
    let mut stack = Stack::new("test", "us-west-2");
    add_hyperpod_stages_with(
        &mut stack,
        Network::new("Network").hyperpod_subnet("usw2-az2"),
        "test",
        lifecycle,
        training_plan_group().ebs_volume_gb(ebs_gb),
    );
    let inference = stack.kubernetes_stage("inference");
    stack.add(
        inference,
        InferenceEndpoint::new("Model", k3(), "ml.p6-b300.48xlarge").name("model"),
    );
    App::new().stack(stack).validate()
}

#[test]
fn weights_land_on_the_local_nvme_by_default() {
    let ds = k3_on_hyperpod_storage(LifecycleScripts::new("Lifecycle"), 500);
    assert!(
        !ds.contains(Code::PodStorageTooSmallForWeights, GROUP),
        "{ds}"
    );
    assert!(!ds.has_errors(), "{ds}");
}

#[test]
fn an_ebs_volume_smaller_than_the_weights_is_refused() {
    let ebs = LifecycleScripts::new("Lifecycle").container_storage(ContainerStorage::EbsVolume);
    let ds = k3_on_hyperpod_storage(ebs.clone(), 500);
    let d = ds
        .with_code(Code::PodStorageTooSmallForWeights)
        .next()
        .unwrap_or_else(|| panic!("no HF0510 in:\n{ds}"));
    assert_eq!(d.path, GROUP);
    assert_eq!(d.field.as_deref(), Some("ebs_volume_gb"));
    assert!(d.message.contains("/opt/sagemaker") && d.message.contains("1453.7 GiB"));
    assert!(d.notes.iter().any(|n| n.contains(ENDPOINT)), "{d}");
    // 1,453.7 GiB + a tenth + 100 GiB = 1,699.1 GiB = 1,824.4 GB: 1,800 GB is short, 1,900
    // GB holds it.
    assert!(k3_on_hyperpod_storage(ebs.clone(), 1_800)
        .contains(Code::PodStorageTooSmallForWeights, GROUP));
    let ds = k3_on_hyperpod_storage(ebs, 1_900);
    assert!(
        !ds.contains(Code::PodStorageTooSmallForWeights, GROUP),
        "{ds}"
    );
}

#[test]
fn a_replaced_lifecycle_script_is_not_judged() {
    let custom = LifecycleScripts::new("Lifecycle").on_create_script("#!/bin/bash\n");
    let ds = k3_on_hyperpod_storage(custom, 500);
    assert!(
        !ds.contains(Code::PodStorageTooSmallForWeights, GROUP),
        "{ds}"
    );
}

#[test]
fn weights_larger_than_an_eks_nodes_nvme_are_refused() {
    // 40 TB of weights exceed the p6-b300's 30.4 TB RAID 0 (and its GPUs: HF0501 as well).
    let app = crate::reference::kimi_k3_eks();
    let mut stack = app.stacks()[0].clone();
    let huge = crate::reference::kimi_k3_server().weight_bytes(40_000_000_000_000);
    let w = stack.kubernetes_stage("more");
    stack.add(
        w,
        hyperforge::constructs::VllmDeployment::new("Huge", huge, "p6-b300.48xlarge").name("huge"),
    );
    let ds = App::new().stack(stack).validate();
    let d = ds
        .with_code(Code::PodStorageTooSmallForWeights)
        .next()
        .unwrap_or_else(|| panic!("no HF0510 in:\n{ds}"));
    assert_eq!(d.path, "kimi-k3-eks/GpuNodes");
    assert!(d.message.contains("RAID 0"), "{d}");
    assert_eq!(
        ds.with_code(Code::PodStorageTooSmallForWeights).count(),
        1,
        "{ds}"
    );
}

#[test]
fn cost_covers_node_groups_and_karpenter_pools() {
    let report = hyperforge::cost::estimate(&crate::reference::kimi_k3_eks());
    let eks = &report.stacks[0];
    let gpu = eks
        .lines
        .iter()
        .find(|l| l.instance_type == "p6-b300.48xlarge")
        .expect("the GPU node group is priced");
    assert_eq!(gpu.count, 1);
    // us-west-2 has no price in the catalog (it holds us-east-1's): said, not borrowed.
    assert!(gpu.usd_per_hour().is_none());
    let hyperforge::cost::Pricing::NotPriced { reason } = &gpu.pricing else {
        unreachable!()
    };
    assert!(reason.contains("in us-west-2") && reason.contains("$142.42/h there, for reference"));
    // The system nodes' type has no catalog price: listed, not silently dropped.
    assert!(eks
        .lines
        .iter()
        .any(|l| l.instance_type == "m7i.xlarge" && l.usd_per_hour().is_none()));
    assert!(eks.has_unpriced());
    let karpenter = hyperforge::cost::estimate(&crate::reference::kimi_k3_eks_karpenter());
    assert!(karpenter.stacks[0]
        .lines
        .iter()
        .any(|l| l.path.ends_with("/GpuPool") && l.count == 1));
}
