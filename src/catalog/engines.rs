//! The serving engines' contracts, release by release.
//!
//! This module owns:
//! - the releases hyperforge knows ([`VLLM`], generated into `engine_releases.rs` from
//!   `codegen/schemas/engines/vllm/`, which `codegen/tools/vllm_contract.py` reads from each
//!   release's source on PyPI): the options its server accepts, those it marks deprecated, and
//!   the `VLLM_` variables it reads;
//! - how vLLM's parser reads one command-line word ([`option_of`]);
//! - the options no release accepts any more, or never did, with what to write instead
//!   ([`RETIRED`]), each with its source;
//! - the multi-node launch form a release supports ([`MultiNodeLaunch`]), derived from its
//!   options;
//! - the fabric rules: settings that work only on InfiniBand or RoCE, refused on EFA
//!   ([`INFINIBAND_ONLY`]), and the KV connectors' constraints ([`KvTransfer`]).
//!
//! The rules that report against these facts are in `validate::engine`.

pub use super::engine_releases::VLLM;

/// One engine release's contract, as read from its source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineRelease {
    /// `(major, minor, patch)`.
    pub version: (u32, u32, u32),
    /// Where it was read: the source distribution and its sha256.
    pub source: &'static str,
    /// Every option the server accepts (long `--` forms, their `--no-` negations, short
    /// aliases), sorted.
    pub flags: &'static [&'static str],
    /// The options it marks deprecated (still accepted, with a warning), sorted.
    pub deprecated: &'static [&'static str],
    /// The `VLLM_` environment variables it reads, sorted; it warns of any other and ignores
    /// it.
    pub env: &'static [&'static str],
}

/// How a release runs one replica over several nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MultiNodeLaunch {
    /// `vllm serve` on every node: `--nnodes`, `--node-rank`, `--master-addr`, the workers
    /// `--headless`.
    Native,
    /// A Ray cluster the leader's `vllm serve` spans (`--distributed-executor-backend ray`).
    Ray,
}

impl EngineRelease {
    /// `0.27.0`.
    pub fn version_text(&self) -> String {
        let (a, b, c) = self.version;
        format!("{a}.{b}.{c}")
    }

    /// Whether the server accepts `option` (as [`option_of`] reads it).
    pub fn accepts(&self, option: &str) -> bool {
        self.flags.binary_search(&option).is_ok()
    }

    /// Whether the release marks `option` deprecated.
    pub fn deprecates(&self, option: &str) -> bool {
        self.deprecated.binary_search(&option).is_ok()
    }

    /// Whether the release reads the environment variable `name`.
    pub fn reads(&self, name: &str) -> bool {
        self.env.binary_search(&name).is_ok()
    }

    /// The accepted option nearest to `option`, if one is near.
    pub fn nearest(&self, option: &str) -> Option<&'static str> {
        crate::diagnostics::suggest(option, self.flags.iter().copied())
    }

    /// The options `option` abbreviates (argparse accepts a unique prefix).
    pub fn abbreviated_by(&self, option: &str) -> Vec<&'static str> {
        if !option.starts_with("--") {
            return Vec::new();
        }
        self.flags
            .iter()
            .copied()
            .filter(|f| f.starts_with(option) && *f != option)
            .collect()
    }

    /// How the release runs a replica over several nodes: natively where it has the options
    /// for it, else through Ray.
    pub fn multi_node_launch(&self) -> MultiNodeLaunch {
        if ["--nnodes", "--node-rank", "--master-addr", "--headless"]
            .iter()
            .all(|o| self.accepts(o))
        {
            MultiNodeLaunch::Native
        } else {
            MultiNodeLaunch::Ray
        }
    }
}

/// `0.27.0` or `v0.27.0` as numbers.
pub fn parse_version(text: &str) -> Option<(u32, u32, u32)> {
    let text = text.strip_prefix('v').unwrap_or(text);
    let mut parts = text.split('.');
    let mut next = || -> Option<u32> {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 9 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        p.parse().ok()
    };
    let version = (next()?, next()?, next()?);
    parts.next().is_none().then_some(version)
}

/// The vLLM release of `version` (`0.27.0`, `v0.27.0`), if the table holds it.
pub fn vllm(version: &str) -> Option<&'static EngineRelease> {
    let version = parse_version(version)?;
    VLLM.iter().find(|r| r.version == version)
}

/// The vLLM versions the table holds, for messages (`0.10.2, 0.11.2, ...`).
pub fn vllm_versions() -> String {
    VLLM.iter()
        .map(EngineRelease::version_text)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The option vLLM's parser reads in one command-line word, or `None` for a value: `_` read as
/// `-` in a long option's name, a value after `=` dropped, a JSON argument's `.key` path and
/// `+` dropped (`--compilation-config.mode` is `--compilation-config`), `-O3` read as
/// `--optimization-level` (vLLM's `FlexibleArgumentParser` does all of these). A word
/// starting with `-` and a digit is a value (`-1`).
pub fn option_of(word: &str) -> Option<String> {
    if let Some(long) = word.strip_prefix("--") {
        let name = long.split('=').next().unwrap_or(long);
        let name = name.split('.').next().unwrap_or(name);
        let name = name.strip_suffix('+').unwrap_or(name);
        return Some(format!("--{}", name.replace('_', "-")));
    }
    let short = word.strip_prefix('-')?;
    if short.is_empty() || short.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return None;
    }
    if short.starts_with('O') {
        return Some("--optimization-level".to_owned());
    }
    Some(format!("-{}", short.split('=').next().unwrap_or(short)))
}

/// An option that releases no longer accept, or never did, with what to write instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retired {
    /// The option.
    pub option: &'static str,
    /// What to write instead, completing "…: ".
    pub instead: &'static str,
    /// Where this is shown.
    pub source: &'static str,
}

/// Options known to have gone, or never to have existed, each with its source.
pub const RETIRED: &[Retired] = &[
    Retired {
        option: "--disable-log-requests",
        instead: "request logging is off by default; leave the option out (`--enable-log-requests` turns it on)",
        source: "deprecated in vLLM 0.10.2-0.12.0 (`deprecated=True`), absent from 0.27.0 (the engine table); kserve/kserve#6037, ai-dynamo/dynamo#8693",
    },
    Retired {
        option: "--no-disable-log-requests",
        instead: "request logging is off by default; `--enable-log-requests` turns it on",
        source: "deprecated in vLLM 0.10.2-0.12.0, absent from 0.27.0 (the engine table)",
    },
    Retired {
        option: "--enable-metrics",
        instead: "vLLM serves Prometheus metrics at /metrics without an option; leave it out",
        source: "no vLLM release in the engine table has it; defilantech/LLMKube#1030 (\"taking down every vLLM pod\")",
    },
];

/// What the table knows of `option` having gone.
pub fn retired(option: &str) -> Option<&'static Retired> {
    RETIRED.iter().find(|r| r.option == option)
}

/// A setting that works only on InfiniBand or RoCE: on EFA it selects a transport that does
/// not exist there, and the traffic silently falls back to TCP, or fails.
#[derive(Clone, Copy, Debug)]
pub struct FabricRule {
    /// The environment variable.
    pub variable: &'static str,
    /// Whether a value of it is InfiniBand-only.
    pub refuses: fn(&str) -> bool,
    /// Why, completing "… on EFA: ".
    pub why: &'static str,
    /// What to do instead.
    pub instead: &'static str,
    /// Where this is shown.
    pub source: &'static str,
}

/// UCX transports that are InfiniBand verbs (`rc`, `dc`, `ud` and their `_v`, `_x`, `_mlx5`
/// variants, `ib`).
fn ucx_verbs(value: &str) -> bool {
    value.split(',').any(|t| {
        let t = t.trim().trim_start_matches('^');
        ["rc", "dc", "ud", "ib"]
            .iter()
            .any(|v| t == *v || t.starts_with(&format!("{v}_")))
    })
}

/// The InfiniBand- and RoCE-only settings hyperforge refuses on EFA instance types.
pub const INFINIBAND_ONLY: &[FabricRule] = &[
    FabricRule {
        variable: "UCX_TLS",
        refuses: ucx_verbs,
        why: "UCX's `rc`, `dc` and `ud` transports are InfiniBand verbs, which EFA does not offer; UCX lands on TCP at about 1-3 GB/s without an error (98 s instead of 1 s to the first token in Dynamo's measurement)",
        instead: "on EFA, move KV caches with NIXL's LIBFABRIC backend (`kv_connector_extra_config.backends: [\"LIBFABRIC\"]`) and leave UCX_TLS unset",
        source: "NVIDIA Dynamo, EFA (RDMA over AWS Fabric) on EKS; vllm-project/recipes models/moonshotai/Kimi-K3.yaml `pd_cluster` sets `UCX_TLS: rc,cuda_copy`",
    },
    FabricRule {
        variable: "NVSHMEM_REMOTE_TRANSPORT",
        refuses: |v| v.trim().eq_ignore_ascii_case("ibgda"),
        why: "IBGDA is GPU-initiated InfiniBand verbs; NVSHMEM over IBGDA (stock DeepEP) does not run on EFA",
        instead: "use NVSHMEM's libfabric transport (`NVSHMEM_REMOTE_TRANSPORT=libfabric`) or an all-to-all backend that runs on EFA",
        source: "awslabs/awsome-distributed-ai 3.test_cases/megatron/megatron-bridge/kimi-k2/README.md; llm-d/llm-d guides/wide-ep-lws decode.yaml sets it for InfiniBand",
    },
    FabricRule {
        variable: "NVSHMEM_IB_ENABLE_IBGDA",
        refuses: |v| matches!(v.trim(), "1" | "true" | "TRUE" | "True"),
        why: "IBGDA is GPU-initiated InfiniBand verbs, which EFA does not offer",
        instead: "leave it unset on EFA",
        source: "awslabs/awsome-distributed-ai 3.test_cases/megatron/megatron-bridge/kimi-k2/README.md",
    },
    FabricRule {
        variable: "NCCL_IB_HCA",
        refuses: |_| true,
        why: "it picks NCCL's InfiniBand devices; EFA instances have none, and NCCL reaches EFA only through the aws-ofi-nccl (libfabric) plugin, falling back to sockets without an error when it does not",
        instead: "leave it unset on EFA",
        source: "llm-d/llm-d guides/wide-ep-lws decode.yaml (`NCCL_IB_HCA=ibp`, InfiniBand); NVIDIA-NeMo/RL#1973 (NCCL's silent fallback to sockets)",
    },
    FabricRule {
        variable: "NCCL_NET",
        refuses: |v| {
            let v = v.trim().trim_matches('"');
            v.eq_ignore_ascii_case("ib") || v.eq_ignore_ascii_case("socket")
        },
        why: "`IB` asks NCCL for InfiniBand, which EFA does not offer, and `Socket` forces TCP",
        instead: "leave NCCL_NET unset (NCCL then loads the aws-ofi-nccl plugin) or set it to `AWS Libfabric`",
        source: "NCCL environment variables (NCCL_NET); aws-ofi-nccl",
    },
];

/// The rule refusing `name=value` on EFA, if one does.
pub fn infiniband_only(name: &str, value: &str) -> Option<&'static FabricRule> {
    INFINIBAND_ONLY
        .iter()
        .find(|r| r.variable == name && (r.refuses)(value))
}

/// A KV connector, as `--kv-transfer-config` configures it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvTransfer {
    /// `kv_connector` (`NixlConnector`).
    pub connector: String,
    /// `kv_connector_extra_config.backends`, when given.
    pub backends: Option<Vec<String>>,
}

/// KV connectors that refuse pipeline parallelism, with the source.
pub const CONNECTORS_WITHOUT_PIPELINE_PARALLELISM: &[(&str, &str)] = &[(
    "NixlConnector",
    "vllm-project/vllm#52913 (NixlConnector rejects pipeline parallel sizes above 1); only the push connector accepts pipeline-parallel prefill with non-pipelined decode (vllm-project/vllm#45880)",
)];

/// The connectors that move KV caches with NIXL, whose default backend (UCX) reaches EFA only
/// at TCP speed.
pub const NIXL_CONNECTORS: &[&str] = &["NixlConnector"];

impl KvTransfer {
    /// The KV connector `args` configure: `--kv-transfer-config <json>` (or `=<json>`), and
    /// the dotted forms (`--kv-transfer-config.kv_connector NixlConnector`). `None` when no
    /// connector is set or the JSON cannot be read.
    pub fn of(args: &[String]) -> Option<KvTransfer> {
        let mut config = serde_json::Map::new();
        let mut i = 0;
        while i < args.len() {
            let word = &args[i];
            let (name, inline) = match word.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (word.as_str(), None),
            };
            let normal = name.replace('_', "-");
            if let Some(rest) = normal.strip_prefix("--kv-transfer-config") {
                let value = match inline {
                    Some(v) => v,
                    None => {
                        i += 1;
                        args.get(i).cloned().unwrap_or_default()
                    }
                };
                if rest.is_empty() {
                    if let Ok(serde_json::Value::Object(m)) = serde_json::from_str(&value) {
                        config.extend(m);
                    }
                } else if rest.starts_with('.') {
                    // The keys as written (`kv_connector`), one level or two.
                    let keys: Vec<String> = name
                        .split('.')
                        .skip(1)
                        .map(|k| k.trim_end_matches('+').to_owned())
                        .collect();
                    let parsed = serde_json::from_str(&value)
                        .unwrap_or(serde_json::Value::String(value.clone()));
                    match keys.as_slice() {
                        [k] => {
                            config.insert(k.clone(), parsed);
                        }
                        [k, j] => {
                            let entry = config
                                .entry(k.clone())
                                .or_insert_with(|| serde_json::Value::Object(Default::default()));
                            if let serde_json::Value::Object(m) = entry {
                                m.insert(j.clone(), parsed);
                            }
                        }
                        _ => {}
                    }
                }
            }
            i += 1;
        }
        let connector = config.get("kv_connector")?.as_str()?.to_owned();
        let backends = config
            .get("kv_connector_extra_config")
            .and_then(|e| e.get("backends"))
            .map(|b| match b {
                serde_json::Value::Array(items) => items
                    .iter()
                    .filter_map(|i| i.as_str().map(str::to_owned))
                    .collect(),
                serde_json::Value::String(s) => s.split(',').map(str::to_owned).collect(),
                _ => Vec::new(),
            });
        Some(KvTransfer {
            connector,
            backends,
        })
    }

    /// Whether the connector moves KV caches with NIXL.
    pub fn uses_nixl(&self) -> bool {
        NIXL_CONNECTORS.contains(&self.connector.as_str())
    }

    /// Why the connector refuses pipeline parallelism, if it does.
    pub fn refuses_pipeline_parallelism(&self) -> Option<&'static str> {
        CONNECTORS_WITHOUT_PIPELINE_PARALLELISM
            .iter()
            .find(|(c, _)| *c == self.connector)
            .map(|(_, source)| *source)
    }

    /// Whether NIXL is told to use LIBFABRIC, the only backend that reaches EFA's line rate.
    pub fn uses_libfabric(&self) -> bool {
        self.backends
            .as_ref()
            .is_some_and(|b| !b.is_empty() && b.iter().all(|b| b.eq_ignore_ascii_case("LIBFABRIC")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_each_release_is_read_from_its_source() {
        assert!(!VLLM.is_empty());
        for pair in VLLM.windows(2) {
            assert!(pair[0].version < pair[1].version);
        }
        for r in VLLM {
            assert!(r.source.starts_with("PyPI vllm-"), "{}", r.source);
            assert!(r.flags.windows(2).all(|w| w[0] < w[1]));
            assert!(r.env.windows(2).all(|w| w[0] < w[1]));
            assert!(r.accepts("--model") && r.accepts("--tensor-parallel-size"));
            assert!(r.reads("VLLM_API_KEY") || r.version < (0, 5, 0));
        }
    }

    #[test]
    fn words_read_as_vllms_parser_reads_them() {
        for (word, option) in [
            ("--max_model_len=4096", Some("--max-model-len")),
            ("--compilation-config.mode", Some("--compilation-config")),
            (
                "--kv_transfer_config.kv_connector",
                Some("--kv-transfer-config"),
            ),
            ("--speculative-config.x+", Some("--speculative-config")),
            ("-tp", Some("-tp")),
            ("-O3", Some("--optimization-level")),
            ("-q=fp8", Some("-q")),
            ("-1", None),
            ("-.5", None),
            ("8", None),
            ("-", None),
        ] {
            assert_eq!(option_of(word).as_deref(), option, "{word}");
        }
        assert_eq!(parse_version("v0.27.0"), Some((0, 27, 0)));
        assert_eq!(parse_version("0.27"), None);
        assert_eq!(parse_version("0.27.0.1"), None);
        assert_eq!(parse_version("kimi-k3"), None);
    }

    #[test]
    fn the_launch_form_follows_the_releases_options() {
        let old = vllm("0.10.2").expect("0.10.2 in the table");
        assert_eq!(old.multi_node_launch(), MultiNodeLaunch::Ray);
        let new = vllm("0.27.0").expect("0.27.0 in the table");
        assert_eq!(new.multi_node_launch(), MultiNodeLaunch::Native);
    }

    #[test]
    fn kv_transfer_reads_every_spelling() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let k = KvTransfer::of(&args(&[
            "--kv-transfer-config",
            r#"{"kv_connector":"NixlConnector","kv_role":"kv_both"}"#,
        ]))
        .unwrap();
        assert!(k.uses_nixl() && !k.uses_libfabric());
        assert!(k.refuses_pipeline_parallelism().is_some());
        let k = KvTransfer::of(&args(&[
            r#"--kv_transfer_config={"kv_connector":"NixlConnector","kv_connector_extra_config":{"backends":["LIBFABRIC"]}}"#,
        ]))
        .unwrap();
        assert!(k.uses_libfabric());
        let k = KvTransfer::of(&args(&[
            "--kv-transfer-config.kv_connector",
            "NixlConnector",
            "--kv-transfer-config.kv_connector_extra_config",
            r#"{"backends":["UCX"]}"#,
        ]))
        .unwrap();
        assert_eq!(k.backends, Some(vec!["UCX".to_owned()]));
        assert!(KvTransfer::of(&args(&["--kv-transfer-config", "{"])).is_none());
        assert!(KvTransfer::of(&args(&["--model", "x"])).is_none());
    }

    #[test]
    fn infiniband_settings_are_told_from_efa_ones() {
        assert!(infiniband_only("UCX_TLS", "rc,cuda_copy").is_some());
        assert!(infiniband_only("UCX_TLS", "rc_x").is_some());
        assert!(infiniband_only("UCX_TLS", "tcp,cuda_copy").is_none());
        assert!(infiniband_only("NVSHMEM_REMOTE_TRANSPORT", "ibgda").is_some());
        assert!(infiniband_only("NVSHMEM_REMOTE_TRANSPORT", "libfabric").is_none());
        assert!(infiniband_only("NCCL_IB_HCA", "ibp").is_some());
        assert!(infiniband_only("NCCL_NET", "Socket").is_some());
        assert!(infiniband_only("NCCL_NET", "AWS Libfabric").is_none());
        assert!(infiniband_only("FI_PROVIDER", "efa").is_none());
    }
}
