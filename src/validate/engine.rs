//! The serving engine's contract, checked at synthesis (`HF0520`-`HF0525`): every option
//! hyperforge gives the engine and every option the user adds against the options the image's
//! engine release accepts; every `VLLM_` variable against those it reads; on EFA instance
//! types, the settings that work only on InfiniBand or RoCE; and the KV connector's
//! constraints. The facts are `catalog::engines`; the rules read the engine-neutral
//! [`ServingShape`].

use crate::catalog::engines::{self, EngineRelease, KvTransfer};
use crate::catalog::InstanceType as Instance;
use crate::constructs::{Engine, ServingShape};
use crate::diagnostics::{Code, Diagnostics};

/// The release `shape`'s image runs, when the engine table holds it.
pub fn release(shape: &ServingShape) -> Option<&'static EngineRelease> {
    match shape.engine {
        Engine::Vllm => engines::vllm(shape.engine_version.as_deref()?),
    }
}

/// Checks `shape` served on `instance` by pods requesting `efa_devices` EFA devices each.
pub fn check(
    shape: &ServingShape,
    instance: &Instance,
    efa_devices: u32,
    path: &str,
    ds: &mut Diagnostics,
) {
    fabric(shape, instance, efa_devices, path, ds);
    let Some(release) = release(shape) else {
        let (what, help) = match &shape.engine_version {
            None => (
                format!("`{}` names no vLLM release: the server's options and environment variables are not checked, and no start-up check confirms the release", shape.image),
                format!(
                    "use a release tag, pinned with its digest (`vllm/vllm-openai:v{}@sha256:…`); the engine table holds vLLM {}",
                    engines::VLLM.last().map_or_else(String::new, |r| r.version_text()),
                    engines::vllm_versions()
                ),
            ),
            Some(v) => (
                format!("vLLM {v} is not in the engine table (it holds {}): the server's options and environment variables are not checked (the pod still checks at start-up that it runs {v})", engines::vllm_versions()),
                format!(
                    "use a release the table holds, or add this one: `python3 codegen/tools/vllm_contract.py {}` then `cargo run -p hyperforge-codegen`",
                    v.trim_start_matches('v')
                ),
            ),
        };
        ds.report_field(Code::EngineVersionUnchecked, path, "image", what, help);
        return;
    };
    let version = release.version_text();
    let words = shape
        .args
        .iter()
        .map(|w| (w, false))
        .chain(shape.extra_args.iter().map(|w| (w, true)));
    let mut seen = std::collections::BTreeSet::new();
    for (word, users) in words {
        let Some(option) = engines::option_of(word) else {
            continue;
        };
        // A pasted blob is reported by its start.
        let option = clip(&option);
        if !seen.insert((option.clone(), users)) {
            continue;
        }
        let field = if users { "extra_args" } else { "image" };
        if release.accepts(&option) {
            if release.deprecates(&option) {
                ds.report_field(
                    Code::EngineOptionDeprecated,
                    path,
                    field,
                    format!(
                        "vLLM {version} marks `{option}` deprecated: a later release refuses it"
                    ),
                    engines::retired(&option).map_or_else(
                        || format!("replace `{option}` as `vllm serve --help` of {version} says"),
                        |r| format!("{} ({})", r.instead, r.source),
                    ),
                );
            }
            continue;
        }
        let abbreviates = release.abbreviated_by(&option);
        let (message, help) = if !abbreviates.is_empty() {
            (
                format!(
                    "`{option}` is not a vLLM {version} option, only the start of {}",
                    quoted(&abbreviates)
                ),
                "write the option whole: a later release's new option makes a prefix ambiguous"
                    .to_owned(),
            )
        } else if let Some(r) = engines::retired(&option) {
            (
                format!("vLLM {version} has no `{option}`"),
                format!("{} ({})", r.instead, r.source),
            )
        } else {
            let having: Vec<String> = engines::VLLM
                .iter()
                .filter(|r| r.accepts(&option))
                .map(EngineRelease::version_text)
                .collect();
            let help = match (users, release.nearest(&option)) {
                (true, Some(near)) => {
                    format!("did you mean `{near}`? It is a vLLM {version} option")
                }
                _ if !having.is_empty() => format!(
                    "vLLM {} {} it: use such a release, or leave out what sets it",
                    having.join(", "),
                    if having.len() == 1 {
                        "accepts"
                    } else {
                        "accept"
                    }
                ),
                _ => format!(
                    "no release in the engine table has it; see `vllm serve --help` of {version}"
                ),
            };
            (
                if users {
                    format!("vLLM {version} has no `{option}`")
                } else {
                    format!("vLLM {version} has no `{option}`, which hyperforge gives the server for its settings")
                },
                help,
            )
        };
        ds.report_field(Code::EngineOptionNotAccepted, path, field, message, help);
    }
    for (name, _) in &shape.env {
        if name.starts_with("VLLM_") && !release.reads(name) {
            let reading: Vec<String> = engines::VLLM
                .iter()
                .filter(|r| r.reads(name))
                .map(EngineRelease::version_text)
                .collect();
            ds.report_field(
                Code::EngineVariableNotRead,
                path,
                "env",
                format!("vLLM {version} reads no `{name}`: it warns \"Unknown vLLM environment variable detected\" and ignores it"),
                if reading.is_empty() {
                    "remove it: no release in the engine table reads it".to_owned()
                } else {
                    format!("remove it, or use a release that reads it: vLLM {}", reading.join(", "))
                },
            );
        }
    }
}

/// The fabric rules: InfiniBand-only settings on EFA, and the KV connector's constraints.
fn fabric(
    shape: &ServingShape,
    instance: &Instance,
    efa_devices: u32,
    path: &str,
    ds: &mut Diagnostics,
) {
    let efa = instance.efa_max > 0;
    if efa {
        for (name, value) in &shape.env {
            let Some(rule) = value
                .as_deref()
                .and_then(|v| engines::infiniband_only(name, v))
            else {
                continue;
            };
            ds.report_field(
                Code::FabricSettingNotForEfa,
                path,
                "env",
                format!(
                    "`{name}={}` works only on InfiniBand or RoCE, and {} has EFA: {}",
                    clip(value.as_deref().unwrap_or_default()),
                    instance.name,
                    rule.why
                ),
                format!("{} (source: {})", rule.instead, rule.source),
            );
        }
    }
    let all: Vec<String> = shape
        .args
        .iter()
        .chain(&shape.extra_args)
        .cloned()
        .collect();
    let Some(kv) = KvTransfer::of(&all) else {
        return;
    };
    let pipeline = pipeline_parallel(&all).max(shape.pipeline_parallel);
    if let (true, Some(source)) = (pipeline > 1, kv.refuses_pipeline_parallelism()) {
        ds.report_field(
            Code::KvConnectorConstraint,
            path,
            "extra_args",
            format!("`{}` cannot run with pipeline parallel size {pipeline}", kv.connector),
            format!("serve without pipeline parallelism, or use a connector that allows it (source: {source})"),
        );
    }
    if efa && kv.uses_nixl() && !kv.uses_libfabric() {
        ds.report_field(
            Code::KvConnectorConstraint,
            path,
            "extra_args",
            format!(
                "`{}` moves KV caches with NIXL's {} backend on {}, an EFA instance type: it lands on TCP speed without an error",
                kv.connector,
                kv.backends.as_ref().map_or_else(|| "default (UCX)".to_owned(), |b| b.join(", ")),
                instance.name
            ),
            "set `kv_connector_extra_config.backends` to `[\"LIBFABRIC\"]` (source: NVIDIA Dynamo, EFA (RDMA over AWS Fabric) on EKS)",
        );
    }
    if efa && kv.uses_nixl() && kv.uses_libfabric() && efa_devices == 0 {
        ds.report_field(
            Code::KvConnectorConstraint,
            path,
            "extra_args",
            format!(
                "`{}` moves KV caches over EFA with NIXL's LIBFABRIC backend, and the pod requests none of {}'s {} EFA devices",
                kv.connector, instance.name, instance.efa_max
            ),
            "request them: `VllmDeployment::efa(true)` (`efa: true` in a stack file) adds the instance's EFA devices and the 2 MiB hugepages libfabric registers memory with; a HyperPod endpoint's worker cannot request EFA devices (source: NVIDIA Dynamo, EFA (RDMA over AWS Fabric) on EKS)",
        );
    }
}

/// The pipeline parallel size `args` set (`--pipeline-parallel-size`, `-pp`), 1 when none.
fn pipeline_parallel(args: &[String]) -> u32 {
    let mut size = 1;
    for (i, word) in args.iter().enumerate() {
        let option = engines::option_of(word);
        if matches!(option.as_deref(), Some("--pipeline-parallel-size" | "-pp")) {
            let value = match word.split_once('=') {
                Some((_, v)) => Some(v.to_owned()),
                None => args.get(i + 1).cloned(),
            };
            if let Some(n) = value.and_then(|v| v.parse::<u32>().ok()) {
                size = n;
            }
        }
    }
    size
}

/// `text`, or its first 60 characters and `…` when it is longer than 64.
fn clip(text: &str) -> String {
    if text.chars().count() <= 64 {
        text.to_owned()
    } else {
        format!("{}…", text.chars().take(60).collect::<String>())
    }
}

fn quoted(options: &[&str]) -> String {
    let shown: Vec<String> = options.iter().take(4).map(|o| format!("`{o}`")).collect();
    let more = options.len().saturating_sub(4);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}
