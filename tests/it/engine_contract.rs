//! The serving engine's contract: options, variables, fabric settings and KV connectors checked
//! against the image's vLLM release at synthesis (HF0520-HF0525), each published breakage
//! reproduced as a refusal and passing once fixed; the references' every option in the table;
//! the start-up check each serving pod runs.

use crate::fixtures::{add_hyperpod_stages, training_plan_group};
use hyperforge::app::Stack;
use hyperforge::catalog::engines;
use hyperforge::constructs::{InferenceEndpoint, KubernetesManifest, Network, VllmServer};
use hyperforge::{App, Code, Diagnostics, SynthOptions};
use serde_json::json;

const RELEASE: &str = "vllm/vllm-openai:v0.27.0";
const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn k3(image: &str) -> VllmServer {
    VllmServer::new("moonshotai/Kimi-K3", image)
        .image_digest(DIGEST)
        .trust_remote_code(true)
}

fn app(server: VllmServer) -> App {
    let mut stack = Stack::new("test", "us-west-2");
    add_hyperpod_stages(
        &mut stack,
        Network::new("Network").hyperpod_subnet("usw2-az2"),
        "test",
        training_plan_group(),
    );
    let inference = stack.kubernetes_stage("inference");
    stack.add(
        inference,
        InferenceEndpoint::new("Model", server, "ml.p6-b300.48xlarge").name("model"),
    );
    App::new().stack(stack)
}

fn check(server: VllmServer) -> Diagnostics {
    app(server).validate()
}

/// `server` in an EKS Deployment on a p6-b300 Capacity Block, its pod requesting the
/// instance's EFA devices when `efa`.
fn check_on_eks(server: VllmServer, efa: bool) -> Diagnostics {
    let stack = crate::fixtures::capacity_block_serving_stack_with(
        "eks",
        hyperforge::constructs::NodeCapacity::capacity_block("cr-0123456789abcdef0", "usw2-az2"),
        server,
        |d, _| d.efa(efa),
    );
    App::new().stack(stack).validate()
}

/// `--kv-transfer-config` of NIXL with `backends`, when given.
fn nixl(backends: Option<&str>) -> [String; 2] {
    let extra = backends.map_or_else(String::new, |b| {
        format!(r#","kv_connector_extra_config":{{"backends":["{b}"]}}"#)
    });
    [
        "--kv-transfer-config".to_owned(),
        format!(r#"{{"kv_connector":"NixlConnector","kv_role":"kv_both"{extra}}}"#),
    ]
}

/// The engine-contract diagnostics, as (code, field, message, help).
fn contract(ds: &Diagnostics) -> Vec<(Code, String, String, String)> {
    ds.iter()
        .filter(|d| {
            matches!(
                d.code,
                Code::EngineOptionNotAccepted
                    | Code::EngineVersionUnchecked
                    | Code::EngineVariableNotRead
                    | Code::EngineOptionDeprecated
                    | Code::FabricSettingNotForEfa
                    | Code::KvConnectorConstraint
            )
        })
        .map(|d| {
            (
                d.code,
                d.field.clone().unwrap_or_default(),
                d.message.clone(),
                d.help.clone(),
            )
        })
        .collect()
}

/// Each published breakage, refused with its code, and the same server with the fix applied.
#[test]
fn published_breakages_are_refused_and_their_fixes_pass() {
    struct Case {
        name: &'static str,
        broken: VllmServer,
        fixed: VllmServer,
        code: Code,
        field: &'static str,
        says: &'static str,
    }
    let cases = [
        Case {
            // kserve/kserve#6037, ai-dynamo/dynamo#8693.
            name: "--disable-log-requests after its removal",
            broken: k3(RELEASE).extra_arg("--disable-log-requests"),
            fixed: k3(RELEASE),
            code: Code::EngineOptionNotAccepted,
            field: "extra_args",
            says: "--enable-log-requests",
        },
        Case {
            // defilantech/LLMKube#1030: no vLLM has it.
            name: "--enable-metrics",
            broken: k3(RELEASE).extra_arg("--enable-metrics"),
            fixed: k3(RELEASE),
            code: Code::EngineOptionNotAccepted,
            field: "extra_args",
            says: "/metrics",
        },
        Case {
            // vllm-project/recipes Kimi-K3 `pd_cluster`.
            name: "UCX_TLS=rc on p6-b300",
            broken: k3(RELEASE).env("UCX_TLS", "rc,cuda_copy"),
            fixed: k3(RELEASE),
            code: Code::FabricSettingNotForEfa,
            field: "env",
            says: "InfiniBand",
        },
        Case {
            // llm-d wide-EP.
            name: "NVSHMEM_REMOTE_TRANSPORT=ibgda on p6-b300",
            broken: k3(RELEASE).env("NVSHMEM_REMOTE_TRANSPORT", "ibgda"),
            fixed: k3(RELEASE).env("NVSHMEM_REMOTE_TRANSPORT", "libfabric"),
            code: Code::FabricSettingNotForEfa,
            field: "env",
            says: "IBGDA",
        },
        Case {
            name: "NCCL_IB_HCA on p6-b300",
            broken: k3(RELEASE).env("NCCL_IB_HCA", "ibp"),
            fixed: k3(RELEASE),
            code: Code::FabricSettingNotForEfa,
            field: "env",
            says: "NCCL_IB_HCA=ibp",
        },
        Case {
            // AWS's day-0 instructions; no release reads it.
            name: "a day-0 variable",
            broken: k3(RELEASE).env("VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION", "1"),
            fixed: k3(RELEASE),
            code: Code::EngineVariableNotRead,
            field: "env",
            says: "Unknown vLLM environment variable detected",
        },
        Case {
            name: "an option the release does not have yet",
            broken: k3("vllm/vllm-openai:v0.12.0").moe_backend("auto"),
            fixed: k3(RELEASE).moe_backend("auto"),
            code: Code::EngineOptionNotAccepted,
            field: "image",
            says: "--moe-backend",
        },
    ];
    for case in cases {
        let ds = check(case.broken);
        let found = contract(&ds);
        assert_eq!(found.len(), 1, "{}: {found:#?}", case.name);
        let (code, field, message, help) = &found[0];
        assert_eq!(
            (*code, field.as_str()),
            (case.code, case.field),
            "{}",
            case.name
        );
        assert!(
            message.contains(case.says) || help.contains(case.says),
            "{}: `{}` in neither `{message}` nor `{help}`",
            case.name,
            case.says
        );
        let fixed = check(case.fixed);
        assert_eq!(contract(&fixed), Vec::new(), "{}: fixed", case.name);
        assert!(!fixed.has_errors(), "{}: fixed:\n{fixed}", case.name);
    }
}

/// The KV connector's constraints: NixlConnector refuses pipeline parallelism
/// (vllm-project/vllm#52913); on EFA, NIXL needs its LIBFABRIC backend (UCX lands on TCP speed)
/// and EFA devices in the pod. Each refused, and passing once fixed.
#[test]
fn kv_connectors_are_held_to_their_constraints() {
    let only = |ds: &Diagnostics| -> Vec<String> {
        contract(ds)
            .into_iter()
            .map(|(code, field, message, _)| {
                assert_eq!(
                    (code, field.as_str()),
                    (Code::KvConnectorConstraint, "extra_args")
                );
                message
            })
            .collect()
    };
    let pipelined = k3(RELEASE)
        .extra_args(["--pipeline-parallel-size", "2"])
        .extra_args(nixl(Some("LIBFABRIC")));
    let found = only(&check_on_eks(pipelined, true));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains("pipeline parallel size 2"),
        "{}",
        found[0]
    );
    let found = only(&check_on_eks(k3(RELEASE).extra_args(nixl(None)), true));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].contains("default (UCX)"), "{}", found[0]);
    let found = only(&check_on_eks(
        k3(RELEASE).extra_args(nixl(Some("UCX"))),
        true,
    ));
    assert!(
        found[0].contains("backend UCX") || found[0].contains("UCX backend"),
        "{}",
        found[0]
    );
    let found = only(&check_on_eks(
        k3(RELEASE).extra_args(nixl(Some("LIBFABRIC"))),
        false,
    ));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains("requests none of p6-b300.48xlarge's 16 EFA devices"),
        "{}",
        found[0]
    );
    // On HyperPod, whose worker cannot request EFA devices, the same.
    let found = only(&check(k3(RELEASE).extra_args(nixl(Some("LIBFABRIC")))));
    assert_eq!(found.len(), 1, "{found:#?}");
    // Fixed: LIBFABRIC, EFA devices, no pipeline parallelism.
    let fixed = check_on_eks(k3(RELEASE).extra_args(nixl(Some("LIBFABRIC"))), true);
    assert_eq!(contract(&fixed), Vec::new());
    assert!(!fixed.has_errors(), "{fixed}");
}

/// Options are read as vLLM's parser reads them: `_` for `-`, `=value`, `--no-` negations,
/// short aliases; a prefix argparse would accept is refused, a typo gets the nearest option.
#[test]
fn options_are_read_as_the_engines_parser_reads_them() {
    let accepted = k3(RELEASE).extra_args([
        "--max_num_seqs=64",
        "--no-enable-flashinfer-autotune",
        "-pp",
        "1",
        "--compilation-config.mode",
        "3",
        "-O3",
    ]);
    assert_eq!(contract(&check(accepted)), Vec::new());
    let found = contract(&check(k3(RELEASE).extra_args(["--max-num-seq", "64"])));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].2.contains("only the start of `--max-num-seqs`"),
        "{}",
        found[0].2
    );
    let found = contract(&check(k3(RELEASE).extra_arg("--enable-prefix-cachng")));
    assert!(
        found[0]
            .3
            .contains("did you mean `--enable-prefix-caching`"),
        "{}",
        found[0].3
    );
}

/// A deprecated option is a warning naming what replaces it; the release after refuses it.
#[test]
fn a_deprecated_option_warns_before_it_goes() {
    let found = contract(&check(
        k3("vllm/vllm-openai:v0.12.0").extra_arg("--disable-log-requests"),
    ));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].0, Code::EngineOptionDeprecated);
    assert!(
        found[0].3.contains("--enable-log-requests"),
        "{}",
        found[0].3
    );
}

/// Without a release the options cannot be checked: a warning that says so (an error under
/// `--deny-warnings`), with the command that adds a release to the table.
#[test]
fn an_unknown_release_is_a_warning_that_says_what_is_not_checked() {
    let found = contract(&check(k3("vllm/vllm-openai:kimi-k3")));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(
        (found[0].0, found[0].1.as_str()),
        (Code::EngineVersionUnchecked, "image")
    );
    assert!(
        found[0].2.contains("names no vLLM release"),
        "{}",
        found[0].2
    );
    assert!(found[0].3.contains("vllm/vllm-openai:v"), "{}", found[0].3);
    let found = contract(&check(k3("vllm/vllm-openai:v0.11.0")));
    assert!(
        found[0]
            .2
            .contains("vLLM v0.11.0 is not in the engine table"),
        "{}",
        found[0].2
    );
    assert!(
        found[0]
            .3
            .contains("python3 codegen/tools/vllm_contract.py 0.11.0"),
        "{}",
        found[0].3
    );
    // Options are not checked then: nothing is claimed about them.
    let found = contract(&check(
        k3("vllm/vllm-openai:kimi-k3").extra_arg("--enable-metrics"),
    ));
    assert_eq!(found.len(), 1, "{found:#?}");
    let denied = app(k3("vllm/vllm-openai:kimi-k3"))
        .synth_with(&SynthOptions {
            deny_warnings: true,
            ..SynthOptions::default()
        })
        .unwrap_err();
    assert!(denied
        .with_code(Code::EngineVersionUnchecked)
        .next()
        .is_some());
}

/// The references: the release they run is in the table (this test fails when a reference
/// moves to a release the table lacks), and every option each of their serving containers is
/// given is one that release accepts.
#[test]
fn every_option_the_references_emit_is_in_their_releases_table() {
    let version = crate::reference::VLLM_IMAGE
        .rsplit_once(":v")
        .map(|(_, v)| v)
        .expect("the reference image is a release tag");
    let release = engines::vllm(version).expect("the references' release is in the engine table");
    assert!(release
        .source
        .contains(&format!("vllm-{version}.tar.gz, sha256 ")));
    let mut checked = 0;
    for app in &[
        crate::reference::kimi_k3_hyperpod(),
        crate::reference::kimi_k3_eks(),
        crate::reference::kimi_k3_eks_karpenter(),
    ] {
        for (path, value) in yaml_documents(app) {
            let args = match value["kind"].as_str() {
                Some("Deployment") => &value["spec"]["template"]["spec"]["containers"][0]["args"],
                Some("InferenceEndpointConfig") => &value["spec"]["worker"]["args"],
                _ => continue,
            };
            for word in args
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str())
            {
                if let Some(option) = engines::option_of(word) {
                    assert!(
                        release.accepts(&option),
                        "{path}: {option} not in vLLM {version}"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 30, "only {checked} options checked");
}

/// Each serving pod checks at start-up that its image runs the release it was checked
/// against: the first init container of the EKS Deployment and of the HyperPod endpoint, in
/// the server's own image, running the start-up check program.
#[test]
fn serving_pods_check_their_engine_release_at_start_up() {
    let program = include_str!("../../src/constructs/assets/check_engine_release.py");
    let image = format!(
        "{}@{}",
        crate::reference::VLLM_IMAGE,
        crate::reference::IMAGE_DIGEST
    );
    for &(ref app, kind) in &[
        (crate::reference::kimi_k3_eks(), "Deployment"),
        (
            crate::reference::kimi_k3_hyperpod(),
            "InferenceEndpointConfig",
        ),
    ] {
        let mut found = 0;
        for (path, value) in yaml_documents(app) {
            if value["kind"] != kind {
                continue;
            }
            let init = match kind {
                "Deployment" => &value["spec"]["template"]["spec"]["initContainers"][0],
                _ => &value["spec"]["kubernetes"]["initContainers"][0],
            };
            assert_eq!(init["name"], "engine-release", "{path}");
            assert_eq!(init["image"], json!(image), "{path}");
            assert_eq!(
                init["command"],
                json!(["python3", "-B", "-c", program, "vllm", "0.27.0", image]),
                "{path}"
            );
            assert_eq!(init["securityContext"]["runAsNonRoot"], true);
            found += 1;
        }
        assert_eq!(found, 1, "{kind}");
    }
    // A tag naming no release gets no check (and HF0521 says so).
    let configs: Vec<serde_json::Value> = yaml_documents(&app(k3("vllm/vllm-openai:kimi-k3")))
        .into_iter()
        .map(|(_, v)| v)
        .filter(|v| v["kind"] == "InferenceEndpointConfig")
        .collect();
    assert_eq!(configs.len(), 1);
    assert_eq!(configs[0]["spec"]["kubernetes"], serde_json::Value::Null);
}

/// Every YAML document `app` synthesizes (Kubernetes objects and Helm values), by file.
fn yaml_documents(app: &App) -> Vec<(String, serde_json::Value)> {
    let assembly = app.synth().expect("the description synthesizes");
    let mut out = Vec::new();
    for (path, bytes) in assembly.files() {
        if !path.ends_with(".yaml") {
            continue;
        }
        for doc in serde_yaml::Deserializer::from_str(&String::from_utf8_lossy(bytes)) {
            let value = serde::Deserialize::deserialize(doc).expect("valid YAML");
            out.push((path.clone(), value));
        }
    }
    out
}

/// The start-up program's own tests (run as the pod runs it).
#[test]
fn the_start_up_check_program_passes_its_tests() {
    crate::weights_stager::run_python_tests("test_check_engine_release.py", 6);
}

/// llm-d/llm-d#1633: a DisaggregatedSet of `v1alpha1` against the LeaderWorkerSet release whose
/// CRDs are vendored (v0.10.0 serves only `v1`) is refused; `v1` passes.
#[test]
fn a_custom_resource_version_the_pinned_controller_no_longer_serves_is_refused() {
    let object = |api: &str| json!({"apiVersion": api, "kind": "DisaggregatedSet", "metadata": {"name": "pd"}, "spec": {}});
    let with = |api: &str| {
        let mut stack = Stack::new("crs", "us-west-2");
        let k = stack.kubernetes_stage("objects");
        stack.add(k, KubernetesManifest::new("Pd", object(api)));
        App::new().stack(stack).synth()
    };
    let errors = with("disaggregatedset.x-k8s.io/v1alpha1").unwrap_err();
    let d = errors
        .with_code(Code::CustomResourceNotServed)
        .next()
        .unwrap_or_else(|| panic!("no HF0033 in:\n{errors}"));
    assert!(
        d.help.contains("disaggregatedset.x-k8s.io/v1"),
        "{}",
        d.help
    );
    assert!(d.help.contains("tag: v0.10.0"), "{}", d.help);
    assert!(with("disaggregatedset.x-k8s.io/v1").is_ok());
}

/// The tool that reads a release's contract from its source, on a small package in vLLM's
/// shapes (the table itself is checked fresh by `codegen/tests/fresh.rs`).
#[test]
fn the_contract_reader_passes_its_tests() {
    crate::weights_stager::run_python_tests("test_vllm_contract.py", 3);
}
