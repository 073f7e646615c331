//! The vLLM workload: a typed description of one vLLM OpenAI-compatible server (model, image,
//! parallelism, parsers, caching, environment) and where it runs. The HyperPod path lowers it
//! to an `InferenceEndpointConfig`; the same description can lower to a plain Deployment.

pub mod autoscaling;
pub mod gang;
pub mod objects;

pub use autoscaling::Autoscaling;

use super::network::{subnet_facts, ZoneKey};
use super::stack_file::{Floats, Ints};
use super::weights::ModelStoreHandle;
use super::{Construct, Context, Facts, ServedModel};
use crate::app::{kind, AttrRef, Ref, Stack};
use crate::catalog::loading::{self, ColdStart, WeightSource};
use crate::catalog::{self, Model};
use crate::diagnostics::{Code, Diagnostics};
use crate::resources::plan::{SecretSource, Step};
use crate::resources::{KubeObject, Scope};

/// Adds the checks a deployment runs before the construct's objects use what they pin: the
/// model's Hub `revision` exists and the `image` pinned by digest resolves.
pub(crate) fn verify_pins(
    scope: &mut Scope<'_>,
    model_id: &str,
    revision: Option<&str>,
    image: Option<String>,
) {
    if let Some(revision) = revision {
        scope.step(
            "VerifyRevision",
            Step::VerifyModelRevision {
                model_id: model_id.to_owned(),
                revision: revision.to_owned(),
            },
        );
    }
    if let Some(image) = image {
        scope.step("VerifyImage", Step::VerifyImage { image });
    }
}

/// The operator's environment variable a Hugging Face token Secret is created from.
pub const HF_TOKEN_VARIABLE: &str = "HF_TOKEN";

/// Random bytes in a generated API key (hex-encoded: 64 characters).
pub const API_KEY_BYTES: u32 = 32;

/// A key of a Kubernetes Secret (the Hugging Face token is only ever read from one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretKeyRef {
    /// The Secret's name.
    pub name: String,
    /// The key inside it.
    pub key: String,
}

impl SecretKeyRef {
    /// Declares that this Secret, in `namespace`, is created from the operator's `HF_TOKEN`
    /// (a step of the construct's stage).
    pub(crate) fn declare_hf_token_source(&self, scope: &mut Scope<'_>, namespace: &str) {
        scope.step(
            "HfTokenSource",
            Step::SecretSource {
                name: self.name.clone(),
                namespace: namespace.to_owned(),
                source: SecretSource::Environment {
                    variable: HF_TOKEN_VARIABLE.to_owned(),
                },
            },
        );
    }

    /// Reports a Secret name that is not a DNS subdomain or a key that is not a Secret data key
    /// ([`Code::InvalidKubernetesName`]) at `field` of the construct at `path`.
    pub(crate) fn validate(&self, path: &str, field: &str, ds: &mut Diagnostics) {
        if !is_dns_subdomain(&self.name) || !is_secret_key(&self.key) {
            ds.report_field(
                Code::InvalidKubernetesName,
                path,
                field,
                format!(
                    "Secret `{}` key `{}` is not a valid Secret name and key",
                    self.name, self.key
                ),
                "Secret names are lowercase DNS names (`my-model-api-key`); keys are letters, digits, `-`, `_` and `.`",
            );
        }
    }
}

/// How fast weights reach the GPUs, for the startup budget.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StorageThroughput {
    /// Download rate from the model source to the node, bytes per second.
    pub download_bytes_per_sec: f64,
    /// Load rate from local storage into GPU memory, bytes per second.
    pub load_bytes_per_sec: f64,
    /// Engine warm-up after loading (kernel compilation, CUDA graph capture), seconds.
    pub warmup_secs: f64,
}

/// The download and load rates a description may state, bytes per second (1 KB/s to 1 TB/s).
pub const THROUGHPUT_RANGE: std::ops::RangeInclusive<f64> = 1e3..=1e12;

/// The largest checkpoint a description may state, bytes (1 PiB).
pub const MAX_WEIGHT_BYTES: u64 = 1 << 50;

/// The longest warm-up a description may state, seconds (one day).
pub const MAX_WARMUP_SECS: f64 = 86_400.0;

/// The declared range of the download and load rates: [`THROUGHPUT_RANGE`].
pub const THROUGHPUT: Floats = Floats::new(*THROUGHPUT_RANGE.start(), *THROUGHPUT_RANGE.end());

/// Warm-up, seconds: none to [`MAX_WARMUP_SECS`].
pub const WARMUP_SECS: Floats = Floats::new(0.0, MAX_WARMUP_SECS);

/// The weights' size, bytes: 1 to [`MAX_WEIGHT_BYTES`].
pub const WEIGHT_BYTES: Ints = Ints::new(1, MAX_WEIGHT_BYTES as i64);

/// Any GPU count a server states (tensor and decode context parallel sizes, GPUs per
/// replica): 1 to the most GPUs of any catalog instance; the instance's own count is checked
/// too.
pub const GPU_COUNT: Ints = Ints::new(1, crate::catalog::instances::MAX_GPUS_PER_INSTANCE as i64);

/// The fraction of GPU memory vLLM may use: above 0, up to 1.
pub const GPU_MEMORY_UTILIZATION: Floats = Floats::above(0.0, 1.0);

/// `max_model_len`, tokens: 1 to 16 Mi, above the longest context window published (10 M
/// tokens); a catalog model's own window is checked too (`HF0508`).
pub const MODEL_LEN: Ints = Ints::new(1, 1 << 24);

/// Replicas: at least one, at most what a Kubernetes `replicas` (int32) holds.
pub const REPLICAS: Ints = Ints::new(1, i32::MAX as i64);
/// Nodes one replica may span: one pipeline stage per node, and vLLM's own launch.
pub const NODES_PER_REPLICA: Ints = Ints::new(1, 16);

/// A pod's part in a replica over several nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeRole {
    /// Node rank 0: the API server and pipeline stage 0.
    Leader,
    /// A further pipeline stage, with no API server of its own.
    Worker,
}

/// The words of vLLM's own multi-node launch (releases 0.11.2 and later, multiprocessing
/// backend; vLLM's "Parallelism and Scaling" page, "Running vLLM with MultiProcessing") for a
/// replica of `nodes` pipeline stages, one per node: each pod names the group's size, its
/// rank and the leader's address, which LeaderWorkerSet gives every container as
/// `LWS_LEADER_ADDRESS` (the leader pod's DNS name, published before it is ready) and
/// `LWS_WORKER_INDEX` (0 for the leader); Kubernetes expands `$(...)` from the container's
/// environment. Workers run headless (no API server). The master port is vLLM's default,
/// 29501.
pub fn multi_node_args(nodes: u32, role: NodeRole) -> Vec<String> {
    let mut args = vec![
        "--pipeline-parallel-size".to_owned(),
        nodes.to_string(),
        "--nnodes".to_owned(),
        nodes.to_string(),
        "--master-addr".to_owned(),
        "$(LWS_LEADER_ADDRESS)".to_owned(),
        "--node-rank".to_owned(),
    ];
    match role {
        NodeRole::Leader => args.push("0".to_owned()),
        NodeRole::Worker => {
            args.push("$(LWS_WORKER_INDEX)".to_owned());
            args.push("--headless".to_owned());
        }
    }
    args
}

impl Default for StorageThroughput {
    /// 500 MB/s from the Hugging Face Hub, 2 GB/s from local NVMe into the GPUs, 15 minutes of
    /// warm-up: conservative figures for one node.
    fn default() -> Self {
        StorageThroughput {
            download_bytes_per_sec: 500e6,
            load_bytes_per_sec: 2e9,
            warmup_secs: 900.0,
        }
    }
}

/// The time a server needs from scheduling to serving, with a safety factor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StartupBudget {
    /// Seconds to download the weights.
    pub download_secs: u64,
    /// Seconds to load them into GPU memory.
    pub load_secs: u64,
    /// Seconds of warm-up.
    pub warmup_secs: u64,
    /// The budget: 1.5 x the sum, rounded up to whole minutes.
    pub total_secs: u64,
}

/// The startup probe's allowance when the weights' size is unknown (one hour), seconds.
pub const DEFAULT_STARTUP_SECS: u64 = 3600;

/// What a Deployment's progress deadline allows beyond the startup probe, seconds: scheduling
/// and pulling the image (about 20 GB for `vllm/vllm-openai`) happen before the probe starts
/// counting.
pub const ROLLOUT_MARGIN_SECS: u64 = 900;

/// The period of the startup probe, seconds.
pub const STARTUP_PROBE_PERIOD_SECS: u64 = 10;

impl StartupBudget {
    /// The budget for a cold start the catalog estimated: its steps, and 1.5 x their sum
    /// rounded up to whole minutes.
    pub fn from_cold_start(cold: &ColdStart) -> Self {
        let raw = cold.total_secs as f64 * 1.5;
        StartupBudget {
            download_secs: cold.transfer_secs,
            load_secs: cold.load_secs,
            warmup_secs: cold.warmup_secs,
            total_secs: ((raw / 60.0).ceil() as u64).saturating_mul(60),
        }
    }

    /// The budget for `weight_bytes` at `throughput`.
    pub fn compute(weight_bytes: u64, throughput: StorageThroughput) -> Self {
        let secs = |bytes: u64, rate: f64| -> u64 {
            if rate > 0.0 {
                (bytes as f64 / rate).ceil() as u64
            } else {
                0
            }
        };
        // Float-to-integer casts saturate and the sums saturate too: rates outside the
        // declared ranges are reported by validation (HF0410), never overflow here.
        let download = secs(weight_bytes, throughput.download_bytes_per_sec);
        let load = secs(weight_bytes, throughput.load_bytes_per_sec);
        let warmup = throughput.warmup_secs.max(0.0).ceil() as u64;
        let raw = download.saturating_add(load).saturating_add(warmup) as f64 * 1.5;
        let total = ((raw / 60.0).ceil() as u64).saturating_mul(60);
        StartupBudget {
            download_secs: download,
            load_secs: load,
            warmup_secs: warmup,
            total_secs: total,
        }
    }
}

/// One vLLM server.
#[derive(Clone, Debug, PartialEq)]
pub struct VllmServer {
    model_id: String,
    image: String,
    image_digest: Option<String>,
    served_model_name: String,
    tensor_parallel_size: Option<u32>,
    decode_context_parallel_size: Option<u32>,
    gpu_memory_utilization: f64,
    max_model_len: Option<u64>,
    load_format: Option<String>,
    trust_remote_code: bool,
    revision: Option<String>,
    tool_call_parser: Option<String>,
    reasoning_parser: Option<String>,
    prefix_caching: bool,
    moe_backend: Option<String>,
    env: Vec<(String, String)>,
    extra_args: Vec<String>,
    hf_token: Option<SecretKeyRef>,
    api_key: Option<SecretKeyRef>,
    weight_bytes: Option<u64>,
    model_spec: Option<Model>,
    throughput: Option<StorageThroughput>,
    staged: Option<ModelStoreHandle>,
}

/// The load format streaming staged weights from S3: the Run:ai model streamer, each tensor
/// parallel rank reading its own share.
const STREAMER_ARGS: [&str; 4] = [
    "--load-format",
    "runai_streamer",
    "--model-loader-extra-config",
    r#"{"distributed":true}"#,
];

/// Arguments set from typed fields; `extra_args` may not repeat them.
const OWNED_ARGS: &[&str] = &[
    "--model",
    "--served-model-name",
    "--tensor-parallel-size",
    "--decode-context-parallel-size",
    "-dcp",
    "--gpu-memory-utilization",
    "--max-model-len",
    "--load-format",
    "--model-loader-extra-config",
    "--trust-remote-code",
    "--revision",
    "--code-revision",
    "--tool-call-parser",
    "--reasoning-parser",
    "--enable-auto-tool-choice",
    "--enable-prefix-caching",
    "--moe-backend",
    "--port",
    "--api-key",
];

/// The long form of a command-line flag as vLLM's parser reads it: the value after `=` dropped,
/// `_` read as `-` (vLLM accepts both), the `--no-` negation of a boolean flag read as the flag,
/// and the short aliases of owned flags (`-tp`) expanded. `None` for a value, not a flag.
fn canonical_flag(arg: &str) -> Option<String> {
    let flag = arg.split('=').next().unwrap_or(arg).trim();
    let long = match flag {
        "-tp" => return Some("--tensor-parallel-size".to_owned()),
        "-dcp" => return Some("--decode-context-parallel-size".to_owned()),
        _ => flag.strip_prefix("--")?,
    };
    let long = long.replace('_', "-");
    let long = long.strip_prefix("no-").unwrap_or(&long);
    Some(format!("--{long}"))
}

/// The port vLLM serves on (OpenAI API, `/health`, `/metrics`).
pub const VLLM_PORT: i32 = 8000;

impl VllmServer {
    /// A server for Hugging Face model `model_id` from `image`; the served name defaults to the
    /// part after the `/`.
    pub fn new(model_id: impl Into<String>, image: impl Into<String>) -> Self {
        let model_id = model_id.into();
        let served = model_id.rsplit('/').next().unwrap_or(&model_id).to_owned();
        VllmServer {
            model_id,
            image: image.into(),
            image_digest: None,
            served_model_name: served,
            tensor_parallel_size: None,
            decode_context_parallel_size: None,
            gpu_memory_utilization: 0.90,
            max_model_len: None,
            load_format: None,
            trust_remote_code: false,
            revision: None,
            tool_call_parser: None,
            reasoning_parser: None,
            prefix_caching: false,
            moe_backend: None,
            env: Vec::new(),
            extra_args: Vec::new(),
            hf_token: None,
            api_key: None,
            weight_bytes: None,
            model_spec: None,
            throughput: None,
            staged: None,
        }
    }

    /// The name clients pass as `model` (`Kimi-K3`).
    pub fn served_model_name(mut self, name: impl Into<String>) -> Self {
        self.served_model_name = name.into();
        self
    }

    /// Tensor parallel size; by default every GPU of the instance.
    pub fn tensor_parallel_size(mut self, size: u32) -> Self {
        self.tensor_parallel_size = Some(size);
        self
    }

    /// Decode context parallel size (`--decode-context-parallel-size`): shards the MLA KV
    /// cache over this many of the tensor parallel ranks instead of replicating it; tensor
    /// parallel size must be a multiple of it.
    pub fn decode_context_parallel_size(mut self, size: u32) -> Self {
        self.decode_context_parallel_size = Some(size);
        self
    }

    /// Fraction of GPU memory vLLM may use (default 0.90, set explicitly because vLLM's own
    /// default has changed between releases).
    pub fn gpu_memory_utilization(mut self, fraction: f64) -> Self {
        self.gpu_memory_utilization = fraction;
        self
    }

    /// Maximum context length.
    pub fn max_model_len(mut self, tokens: u64) -> Self {
        self.max_model_len = Some(tokens);
        self
    }

    /// The weight loader (`fastsafetensors`, `runai_streamer`, ...).
    pub fn load_format(mut self, format: impl Into<String>) -> Self {
        self.load_format = Some(format.into());
        self
    }

    /// Runs the model repository's own code (needed by Kimi models).
    pub fn trust_remote_code(mut self, trust: bool) -> Self {
        self.trust_remote_code = trust;
        self
    }

    /// Pins the image to `digest` (`sha256:` and 64 lowercase hex digits): the container runs
    /// `<image>@<digest>`, whatever the tag points at later; the tag stays for readers.
    /// `docker buildx imagetools inspect <image>` prints a tag's current digest. An image
    /// pinned by tag only is reported (`HF0417`).
    pub fn image_digest(mut self, digest: impl Into<String>) -> Self {
        self.image_digest = Some(digest.into());
        self
    }

    /// Pins the model repository to commit `sha`: 40 lowercase hexadecimal digits, the `sha`
    /// of `https://huggingface.co/api/models/<model>/revision/main` at the commit you reviewed.
    /// Weights, configuration and the code `trust_remote_code` runs all come from that commit:
    /// on EKS through vLLM's `--revision` and `--code-revision` (the tokenizer follows
    /// `--revision`), on HyperPod through the operator's `huggingFaceModel.commitSHA`.
    ///
    /// Branches and tags are refused (`HF0414`): a branch moves with every push and a tag can
    /// be re-pointed, so neither pins what runs, and `commitSHA` accepts only a commit.
    pub fn revision(mut self, sha: impl Into<String>) -> Self {
        self.revision = Some(sha.into());
        self
    }

    /// Tool-call parser; setting one also enables automatic tool choice.
    pub fn tool_call_parser(mut self, parser: impl Into<String>) -> Self {
        self.tool_call_parser = Some(parser.into());
        self
    }

    /// Reasoning parser.
    pub fn reasoning_parser(mut self, parser: impl Into<String>) -> Self {
        self.reasoning_parser = Some(parser.into());
        self
    }

    /// Automatic prefix caching.
    pub fn prefix_caching(mut self, enabled: bool) -> Self {
        self.prefix_caching = enabled;
        self
    }

    /// The MoE kernel backend (`auto`).
    pub fn moe_backend(mut self, backend: impl Into<String>) -> Self {
        self.moe_backend = Some(backend.into());
        self
    }

    /// Adds an environment variable (never a secret: see `hf_token_secret`).
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Adds an argument the typed fields do not cover.
    pub fn extra_arg(mut self, arg: impl Into<String>) -> Self {
        self.extra_args.push(arg.into());
        self
    }

    /// Adds arguments the typed fields do not cover, in order.
    pub fn extra_args(mut self, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.extra_args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Reads the Hugging Face token from Secret `name`, key `key`.
    pub fn hf_token_secret(mut self, name: impl Into<String>, key: impl Into<String>) -> Self {
        self.hf_token = Some(SecretKeyRef {
            name: name.into(),
            key: key.into(),
        });
        self
    }

    /// Requires clients to send `Authorization: Bearer <key>` on the OpenAI routes, the key
    /// read from Secret `name`, key `key` into `VLLM_API_KEY` (vLLM reads it when
    /// `--api-key` is not given: `vllm/entrypoints/openai/api_server.py`, `build_app`). The
    /// key never appears in the assembly; the runbook creates the Secret. vLLM checks the key
    /// only on paths under `/v1`, so `/health` (probes, load balancer health checks) and
    /// `/metrics` stay open.
    pub fn api_key_secret(mut self, name: impl Into<String>, key: impl Into<String>) -> Self {
        self.api_key = Some(SecretKeyRef {
            name: name.into(),
            key: key.into(),
        });
        self
    }

    /// The weights' size in bytes, when the model is not in the catalog (overrides the
    /// model's own size for the startup budget and the memory checks).
    pub fn weight_bytes(mut self, bytes: u64) -> Self {
        self.weight_bytes = Some(bytes);
        self
    }

    /// Describes the model served, for models the catalog does not know (or to override the
    /// catalog's entry): its parameters by precision, attention layers, heads and experts feed
    /// the memory and parallelism checks. The catalog's models are listed in
    /// [`catalog::models()`](fn@crate::catalog::models) (and by `hyperforge catalog models`); read
    /// the figures of another from its `config.json` on the Hugging Face Hub.
    ///
    /// ```
    /// use hyperforge::catalog::{AttentionKind, Model, Precision};
    /// use hyperforge::constructs::VllmServer;
    ///
    /// let model = Model::new("acme/acme-70b", "Acme 70B")
    ///     // Weights by precision (a mixed checkpoint lists each part).
    ///     .parameters("all", 70_000_000_000, Precision::Bf16)
    ///     // `num_hidden_layers`, `num_key_value_heads`, `head_dim` of config.json.
    ///     .attention(80, AttentionKind::Gqa { kv_heads: 8, head_dim: 128 })
    ///     .attention_heads(64)
    ///     .max_context_tokens(131_072);
    /// let server = VllmServer::new("acme/acme-70b", "vllm/vllm-openai:v0.11.0")
    ///     .model_spec(model)
    ///     .tensor_parallel_size(8);
    /// # let _ = server;
    /// ```
    pub fn model_spec(mut self, model: Model) -> Self {
        self.model_spec = Some(model);
        self
    }

    /// Storage throughput assumptions for the startup budget, replacing the catalog's
    /// figures for the server's weight source (`hyperforge::catalog::loading`).
    pub fn storage_throughput(mut self, throughput: StorageThroughput) -> Self {
        self.throughput = Some(throughput);
        self
    }

    /// Serves the copy of the model at its pinned revision that a [`WeightsStaging`] Job put
    /// into `store`, instead of downloading it from the Hugging Face Hub: on EKS vLLM streams it
    /// from S3 into GPU memory (`--load-format runai_streamer`); on HyperPod the inference
    /// operator fetches it from S3 into the model volume (`modelSourceType: s3`).
    ///
    /// [`WeightsStaging`]: super::WeightsStaging
    pub fn weights_from(mut self, store: &ModelStoreHandle) -> Self {
        self.staged = Some(store.clone());
        self
    }

    /// The store the server reads its weights from, if any.
    pub fn staged_weights(&self) -> Option<&ModelStoreHandle> {
        self.staged.as_ref()
    }

    /// Records the staged copy's bucket name in `scope` (the construct writing the server's
    /// objects) when the objects hold it as a placeholder
    /// ([`ModelStoreHandle::record_bucket_name`]).
    pub fn record_staged_bucket(&self, scope: &mut Scope<'_>) {
        if let (Some(store), Some(_)) = (&self.staged, &self.revision) {
            store.record_bucket_name(scope);
        }
    }

    /// The `s3://` URL of the staged copy the server reads (the revision's prefix), when it
    /// reads one and its revision is pinned.
    pub fn staged_url(&self) -> Option<String> {
        let store = self.staged.as_ref()?;
        Some(store.url(&self.model_id, self.revision.as_deref()?))
    }

    /// The Hugging Face model id.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// The API key's Secret, if any.
    pub fn api_key(&self) -> Option<&SecretKeyRef> {
        self.api_key.as_ref()
    }

    /// The environment variable vLLM reads its API key from.
    pub const API_KEY_ENV: &'static str = "VLLM_API_KEY";

    /// The pinned model revision (a commit SHA), if any.
    pub fn model_revision(&self) -> Option<&str> {
        self.revision.as_deref()
    }

    /// Whether the server runs the model repository's own code.
    pub fn runs_remote_code(&self) -> bool {
        self.trust_remote_code
    }

    /// The container image as given.
    pub fn image(&self) -> &str {
        &self.image
    }

    /// The digest the image is pinned to (given with `image_digest` or in the image
    /// reference), if any.
    pub fn pinned_digest(&self) -> Option<&str> {
        self.image_digest
            .as_deref()
            .or_else(|| self.image.split_once('@').map(|(_, d)| d))
    }

    /// The image reference the container runs: the image, and `@<digest>` when pinned with
    /// `image_digest`.
    pub fn image_reference(&self) -> String {
        match &self.image_digest {
            Some(d) => format!("{}@{d}", self.image),
            None => self.image.clone(),
        }
    }

    /// The steps a deployment runs before applying this server's objects in `namespace`: the
    /// pinned revision and image exist, and where its Secrets come from (the Hub token from
    /// `HF_TOKEN`, the API key made where the step runs).
    pub fn steps(&self, scope: &mut Scope<'_>, namespace: &str) {
        verify_pins(
            scope,
            &self.model_id,
            self.model_revision(),
            self.pinned_digest().map(|_| self.image_reference()),
        );
        if let Some(token) = &self.hf_token {
            token.declare_hf_token_source(scope, namespace);
        }
        if let Some(key) = &self.api_key {
            scope.step(
                "ApiKeySource",
                Step::SecretSource {
                    name: key.name.clone(),
                    namespace: namespace.to_owned(),
                    source: SecretSource::Generated {
                        bytes: API_KEY_BYTES,
                    },
                },
            );
        }
    }

    /// The served model name.
    pub fn served_name(&self) -> &str {
        &self.served_model_name
    }

    /// The environment variables in order.
    pub fn environment(&self) -> &[(String, String)] {
        &self.env
    }

    /// The Hugging Face token's Secret, if any.
    pub fn hf_token(&self) -> Option<&SecretKeyRef> {
        self.hf_token.as_ref()
    }

    /// The model served: the one given with [`VllmServer::model_spec`], else the catalog's
    /// entry for the model id.
    pub fn model(&self) -> Option<&Model> {
        self.model_spec
            .as_ref()
            .or_else(|| catalog::model(&self.model_id))
    }

    /// The weights' size: given, else the model's (published checkpoint, or estimated from
    /// its parameter groups).
    pub fn weights(&self) -> Option<u64> {
        self.weight_bytes
            .or_else(|| self.model().map(Model::weight_bytes))
    }

    /// The fraction of GPU memory vLLM may use.
    pub fn memory_utilization(&self) -> f64 {
        self.gpu_memory_utilization
    }

    /// The decode context parallel size (1 when unset).
    pub fn decode_context_parallel(&self) -> u32 {
        self.decode_context_parallel_size.unwrap_or(1)
    }

    /// The maximum context length, when set.
    pub fn context_length(&self) -> Option<u64> {
        self.max_model_len
    }

    /// The load format given with [`VllmServer::load_format`], if any.
    pub fn load_format_given(&self) -> Option<&str> {
        self.load_format.as_deref()
    }

    /// Storage throughput given with [`VllmServer::storage_throughput`], if any.
    pub fn throughput_override(&self) -> Option<StorageThroughput> {
        self.throughput
    }

    /// Where the weights come from when the server starts on HyperPod (`hyperpod`) or EKS:
    /// the Hub through the NAT gateway, or the staged copy in S3 (streamed into GPU memory on
    /// EKS, fetched into the model volume first by the HyperPod operator).
    pub fn weight_source(&self, hyperpod: bool) -> WeightSource {
        match (&self.staged, hyperpod) {
            (None, _) => WeightSource::HubViaNat,
            (Some(_), false) => WeightSource::S3Streamed,
            (Some(_), true) => WeightSource::S3Prefetched,
        }
    }

    /// The time from node ready to serving on `instance_type`, from the catalog's published
    /// rates for the server's weight source, when the weights' size and the instance are
    /// known (without the budget's safety factor).
    pub fn cold_start(&self, instance_type: &str, hyperpod: bool) -> Option<ColdStart> {
        let instance = catalog::instance(instance_type)?;
        Some(loading::cold_start(
            self.weights()?,
            &self.weight_source(hyperpod),
            instance,
        ))
    }

    /// The startup budget on `instance_type` (HyperPod or EKS), when the weights' size is
    /// known: from [`VllmServer::storage_throughput`] when given, else from the catalog's
    /// rates for the server's weight source on that instance.
    pub fn startup_budget(&self, instance_type: &str, hyperpod: bool) -> Option<StartupBudget> {
        let bytes = self.weights()?;
        Some(
            match (self.throughput, self.cold_start(instance_type, hyperpod)) {
                (None, Some(cold)) => StartupBudget::from_cold_start(&cold),
                (t, _) => StartupBudget::compute(bytes, t.unwrap_or_default()),
            },
        )
    }

    /// How long the startup probe of a pod that fetches the weights itself waits: the
    /// startup budget, or [`DEFAULT_STARTUP_SECS`] when the weights' size is unknown, rounded
    /// up to whole probe periods.
    pub fn startup_probe_secs(&self, instance_type: &str, hyperpod: bool) -> u64 {
        self.startup_budget(instance_type, hyperpod)
            .map_or(DEFAULT_STARTUP_SECS, |b| b.total_secs)
            .div_ceil(STARTUP_PROBE_PERIOD_SECS)
            .max(1)
            .saturating_mul(STARTUP_PROBE_PERIOD_SECS)
    }

    /// The progress deadline of a Deployment running this server, seconds: the startup probe's
    /// allowance plus [`ROLLOUT_MARGIN_SECS`]. Kubernetes marks a Deployment that makes no
    /// progress for this long `ProgressDeadlineExceeded` (the default is 600 s), and
    /// `kubectl rollout status` fails on that at once whatever its `--timeout`; derived from
    /// the same budget as the startup probe, the deadline always outlasts it.
    pub fn rollout_deadline_secs(&self, instance_type: &str, hyperpod: bool) -> u64 {
        self.startup_probe_secs(instance_type, hyperpod)
            .saturating_add(ROLLOUT_MARGIN_SECS)
    }

    /// The tensor parallel size on an instance with `gpus` GPUs.
    pub fn tensor_parallel(&self, gpus: u32) -> u32 {
        self.tensor_parallel_size.unwrap_or(gpus)
    }

    /// The engine version the image's tag names (`v0.11.2`), when it names one (a digest
    /// after the tag, `@sha256:…`, is not part of it).
    pub fn engine_version(&self) -> Option<&str> {
        let name = self.image.split('@').next().unwrap_or(&self.image);
        let tag = name.rsplit_once(':')?.1;
        catalog::engines::parse_version(tag).map(|_| tag)
    }

    /// The engine release the image's tag names, as the engine reports its version (`0.27.0`
    /// of `v0.27.0`): what the pod's start-up check expects.
    pub fn engine_release(&self) -> Option<String> {
        let (a, b, c) = crate::catalog::engines::parse_version(self.engine_version()?)?;
        Some(format!("{a}.{b}.{c}"))
    }

    /// The server as the model-aware rules read it, on `gpus` GPUs of one node (one node per
    /// replica, one pipeline stage: what this server runs).
    pub fn shape(&self, gpus: u32) -> super::ServingShape {
        let model = self.model().map(|m| {
            let mut model = m.clone();
            if let Some(bytes) = self.weight_bytes {
                model.checkpoint_bytes = Some(bytes);
            }
            model
        });
        // Every launch form's words: the Hub's revision pin, the streamer's load format.
        let mut args = self.own_args(&self.model_id, gpus);
        args.extend(self.revision_args());
        args.extend(STREAMER_ARGS.iter().map(|a| (*a).to_owned()));
        let mut env: Vec<(String, Option<String>)> = self
            .env
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect();
        if self.api_key.is_some() {
            env.push((Self::API_KEY_ENV.to_owned(), None));
        }
        super::ServingShape {
            engine: super::Engine::Vllm,
            engine_version: self.engine_version().map(str::to_owned),
            image: self.image_reference(),
            args,
            extra_args: self.extra_args.clone(),
            env,
            model_id: self.model_id.clone(),
            model,
            tensor_parallel: self.tensor_parallel(gpus),
            pipeline_parallel: 1,
            nodes_per_replica: 1,
            decode_context_parallel: self.decode_context_parallel(),
            max_model_len: self.max_model_len,
            gpu_memory_utilization: self.gpu_memory_utilization,
        }
    }

    /// The server's command-line arguments when vLLM downloads the model itself (the EKS
    /// path): the model id, pinned to the revision when one is set (`--revision` for weights,
    /// configuration and tokenizer, `--code-revision` for the code `--trust-remote-code` runs).
    pub fn hub_args(&self, gpus: u32) -> Vec<String> {
        let mut args = self.args(&self.model_id, gpus);
        // After `--model` and its value, so the pin reads next to the model.
        let at = 2.min(args.len());
        args.splice(at..at, self.revision_args());
        args
    }

    /// `--revision` and `--code-revision` of the pinned revision, if one is.
    fn revision_args(&self) -> Vec<String> {
        match &self.revision {
            Some(sha) => vec![
                "--revision".to_owned(),
                sha.clone(),
                "--code-revision".to_owned(),
                sha.clone(),
            ],
            None => Vec::new(),
        }
    }

    /// The server's command-line arguments when vLLM streams the staged copy at `url`
    /// (`s3://<bucket>/<model>/<revision>/`) into GPU memory: the Run:ai model streamer
    /// (`--load-format runai_streamer`), each tensor parallel rank reading its own share
    /// (`{"distributed":true}`), as AWS's ai-on-eks Kimi K3 recipe runs the same image. vLLM
    /// copies the configuration, tokenizer and code files from the prefix first.
    pub fn streamed_args(&self, url: &str, gpus: u32) -> Vec<String> {
        let mut args = self.args(url, gpus);
        if let Some(at) = args.iter().position(|a| a == "--load-format") {
            args.drain(at..(at + 2).min(args.len()));
        }
        args.extend(STREAMER_ARGS.iter().map(|a| (*a).to_owned()));
        args
    }

    /// The server's command-line arguments, serving a local copy of the weights at
    /// `model_path` (the revision was pinned where the copy was made).
    pub fn args(&self, model_path: &str, gpus: u32) -> Vec<String> {
        let mut args = self.own_args(model_path, gpus);
        args.extend(self.extra_args.iter().cloned());
        args
    }

    /// The arguments the typed fields set, the user's own not included.
    fn own_args(&self, model_path: &str, gpus: u32) -> Vec<String> {
        let mut args = vec![
            "--model".to_owned(),
            model_path.to_owned(),
            "--served-model-name".to_owned(),
            self.served_model_name.clone(),
            "--port".to_owned(),
            VLLM_PORT.to_string(),
            "--tensor-parallel-size".to_owned(),
            self.tensor_parallel(gpus).to_string(),
            "--gpu-memory-utilization".to_owned(),
            format!("{:.2}", self.gpu_memory_utilization),
        ];
        if let Some(dcp) = self.decode_context_parallel_size {
            args.extend(["--decode-context-parallel-size".to_owned(), dcp.to_string()]);
        }
        if let Some(len) = self.max_model_len {
            args.extend(["--max-model-len".to_owned(), len.to_string()]);
        }
        if self.trust_remote_code {
            args.push("--trust-remote-code".to_owned());
        }
        if let Some(format) = &self.load_format {
            args.extend(["--load-format".to_owned(), format.clone()]);
        }
        if self.prefix_caching {
            args.push("--enable-prefix-caching".to_owned());
        }
        if let Some(parser) = &self.tool_call_parser {
            args.extend([
                "--enable-auto-tool-choice".to_owned(),
                "--tool-call-parser".to_owned(),
                parser.clone(),
            ]);
        }
        if let Some(parser) = &self.reasoning_parser {
            args.extend(["--reasoning-parser".to_owned(), parser.clone()]);
        }
        if let Some(backend) = &self.moe_backend {
            args.extend(["--moe-backend".to_owned(), backend.clone()]);
        }
        args
    }

    pub(crate) fn validate(&self, gpus: Option<u32>, path: &str, ds: &mut Diagnostics) {
        if !is_hf_model_id(&self.model_id) {
            ds.report_field(
                Code::InvalidModelId,
                path,
                "model",
                format!("`{}` is not a Hugging Face model id", self.model_id),
                "model ids are `organization/name` as on the Hugging Face Hub, each part letters, digits, `_`, `.` and `-`",
            );
        }
        if !is_model_name(&self.served_model_name) {
            ds.report_field(
                Code::InvalidServedModelName,
                path,
                "served_model_name",
                format!(
                    "served model name `{}` is not valid",
                    self.served_model_name
                ),
                "use 1-63 letters and digits with single hyphens between them (`My-Model-7B`)",
            );
        }
        match &self.revision {
            Some(sha) if !is_commit_sha(sha) => ds.report_field(
                Code::InvalidModelRevision,
                path,
                "revision",
                format!("model revision `{sha}` is not a commit SHA"),
                format!("give the 40-hex-digit commit, e.g. the `sha` of https://huggingface.co/api/models/{}/revision/main; branches and tags move", self.model_id),
            ),
            Some(_) => {}
            None if self.staged.is_some() => ds.report_field(
                Code::StagedWeightsNeedRevision,
                path,
                "revision",
                format!("`{}` reads a staged copy but pins no revision", self.model_id),
                format!("pin the commit the staging Job copies: `.revision(\"<sha>\")` (stack files: `revision`); `curl -s https://huggingface.co/api/models/{}/revision/main` prints the current one as `sha`", self.model_id),
            ),
            None if self.trust_remote_code => ds.report_field(
                Code::UnpinnedRemoteCode,
                path,
                "trust_remote_code",
                format!(
                    "`{}` runs the repository's own code from its main branch at every start",
                    self.model_id
                ),
                format!("pin the commit you reviewed: `.revision(\"<sha>\")` (stack files: `revision`); `curl -s https://huggingface.co/api/models/{}/revision/main` prints the current one as `sha`", self.model_id),
            ),
            None => {}
        }
        let (name, inline_digest) = match self.image.split_once('@') {
            Some((n, d)) => (n, Some(d)),
            None => (self.image.as_str(), None),
        };
        if !is_image_name(name) {
            ds.report_field(
                Code::InvalidImageReference,
                path,
                "image",
                format!("`{}` is not a container image reference", self.image),
                "write it like `vllm/vllm-openai:v0.11.0` or `123456789012.dkr.ecr.us-west-2.amazonaws.com/docker-hub/vllm/vllm-openai:<tag>`",
            );
        }
        let digests: Vec<&str> = inline_digest
            .into_iter()
            .chain(self.image_digest.as_deref())
            .collect();
        if digests.len() > 1 || digests.iter().any(|d| !is_image_digest(d)) {
            ds.report_field(
                Code::InvalidImageDigest,
                path,
                if self.image_digest.is_some() {
                    "image_digest"
                } else {
                    "image"
                },
                format!(
                    "image `{}` has a malformed digest or two of them",
                    self.image_reference()
                ),
                "give one digest, `sha256:` and 64 lowercase hex digits, in the image or with `image_digest`",
            );
        }
        let tag = name.rsplit_once(':').map(|(_, t)| t);
        let tagged = matches!(tag, Some(t) if !t.contains('/') && t != "latest");
        if digests.is_empty() && !tagged {
            ds.report_field(
                Code::UnpinnedImage,
                path,
                "image",
                format!("image `{}` has no tag or is tagged latest", self.image),
                format!(
                    "pin a digest (`image_digest`), or at least a tag: `{}:<version>`",
                    name.rsplit_once(':')
                        .filter(|(_, t)| !t.contains('/'))
                        .map_or(name, |(n, _)| n)
                ),
            );
        } else if digests.is_empty() {
            ds.report_field(
                Code::ImageNotPinnedByDigest,
                path,
                "image",
                format!("image `{}` is pinned by a tag the registry can move", self.image),
                format!("pin the digest the tag points at now: `.image_digest(\"sha256:...\")` (stack files: `image_digest`); `docker buildx imagetools inspect {}` prints it", self.image),
            );
        }
        if let Some(gpus) = gpus {
            let tp = self.tensor_parallel(gpus);
            if !GPU_COUNT.contains(i64::from(tp)) || !tp.is_power_of_two() || tp > gpus {
                ds.report_field(
                    Code::InvalidTensorParallelSize,
                    path,
                    "tensor_parallel_size",
                    format!("tensor parallel size {tp} does not fit an instance with {gpus} GPUs"),
                    format!("use a power of two up to {gpus}, or leave it unset to use every GPU"),
                );
            }
        }
        if !GPU_MEMORY_UTILIZATION.contains(self.gpu_memory_utilization) {
            ds.report_field(
                Code::InvalidGpuMemoryUtilization,
                path,
                "gpu_memory_utilization",
                format!(
                    "GPU memory utilization {} is outside (0, 1]",
                    self.gpu_memory_utilization
                ),
                "use a fraction such as 0.90",
            );
        }
        for arg in &self.extra_args {
            if canonical_flag(arg).is_some_and(|flag| OWNED_ARGS.contains(&flag.as_str())) {
                ds.report_field(
                    Code::ArgumentOwnedByBuilder,
                    path,
                    "extra_args",
                    format!("extra argument `{arg}` repeats one set from a typed field"),
                    "use the typed setter on VllmServer instead",
                );
            }
        }
        for (name, value) in &self.env {
            if !crate::resources::plan::is_variable_name(name) {
                ds.report_field(
                    Code::InvalidEnvironmentName,
                    path,
                    "env",
                    format!("`{name}` is not a valid environment variable name"),
                    "use letters, digits and `_`, not starting with a digit",
                );
            }
            let upper = name.to_ascii_uppercase();
            let secret_name = upper == "HF_TOKEN"
                || upper == "HUGGING_FACE_HUB_TOKEN"
                || upper.ends_with("_SECRET")
                || upper.contains("SECRET_ACCESS_KEY")
                || upper.ends_with("SESSION_TOKEN")
                || upper.ends_with("_PASSWORD")
                || upper.ends_with("_API_KEY");
            // Literal credentials end up in the manifests and the repository: refused by name
            // and by the shape of well-known tokens (Hugging Face `hf_`, AWS access key ids).
            let secret_value = value.starts_with("hf_") && value.len() >= 30
                || (value.len() == 20
                    && (value.starts_with("AKIA") || value.starts_with("ASIA"))
                    && value
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()));
            if secret_name || secret_value {
                ds.report_field(
                    Code::SecretLiteralInEnvironment,
                    path,
                    "env",
                    format!("`{name}` holds a credential as a literal environment value"),
                    "read credentials from a Secret (`.hf_token_secret(\"hf-token\", \"token\")`), and give pods AWS access through a role (Pod Identity), never keys",
                );
            }
        }
        for (field, secret) in [
            ("hf_token_secret", &self.hf_token),
            ("api_key_secret", &self.api_key),
        ] {
            if let Some(secret) = secret {
                secret.validate(path, field, ds);
            }
        }
        if let Some(len) = self.max_model_len {
            if !MODEL_LEN.contains_u64(len) {
                ds.report_field(
                    Code::InvalidContextLength,
                    path,
                    "max_model_len",
                    format!("max model length {len} is out of range"),
                    format!(
                        "use {} tokens, or leave it unset for the model's own context length",
                        MODEL_LEN.describe()
                    ),
                );
            }
        }
        if let Some(bytes) = self.weight_bytes {
            if !WEIGHT_BYTES.contains_u64(bytes) {
                ds.report_field(
                    Code::InvalidWeightBytes,
                    path,
                    "weight_bytes",
                    format!("weights of {bytes} bytes are out of range"),
                    "give the checkpoint's size in bytes, from 1 to 1 PiB (2^50)",
                );
            }
        }
        let t = self.throughput.unwrap_or_default();
        if !(THROUGHPUT.contains(t.download_bytes_per_sec)
            && THROUGHPUT.contains(t.load_bytes_per_sec)
            && WARMUP_SECS.contains(t.warmup_secs))
        {
            ds.report_field(
                Code::InvalidThroughput,
                path,
                "storage_throughput",
                format!(
                    "storage throughput is out of range: download {} B/s, load {} B/s, warm-up {} s",
                    t.download_bytes_per_sec, t.load_bytes_per_sec, t.warmup_secs
                ),
                "give download and load rates from 1e3 to 1e12 bytes per second (e.g. 500e6) and a warm-up of 0 to 86400 seconds",
            );
        }
    }
}

/// A Hugging Face model id, `organization/name`: each part 1-96 letters, digits, `_`, `.` and
/// `-`, not starting or ending with `.` or `-` and without `..` or `--` (the Hub's own rules),
/// so an id is never a path segment such as `..` where it names an S3 prefix or a URL.
pub(crate) fn is_hf_model_id(id: &str) -> bool {
    let ok = |s: &str| {
        (1..=96).contains(&s.len())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
            && !s.starts_with(['.', '-'])
            && !s.ends_with(['.', '-'])
            && !s.contains("..")
            && !s.contains("--")
    };
    matches!(id.split_once('/'), Some((org, name)) if ok(org) && ok(name))
}

/// `[registry[:port]/]repository[:tag]` without a digest: the registry a host name (or
/// `localhost`) with an optional port, the repository `/`-separated lowercase parts of letters,
/// digits and inner `.`, `_`, `-`, the tag 1-128 of `[A-Za-z0-9_.-]` not starting with `.` or
/// `-`; 255 characters at most.
pub fn is_image_name(image: &str) -> bool {
    if image.is_empty() || image.len() > 255 {
        return false;
    }
    let (repository, tag) = match image.rsplit_once(':') {
        Some((r, t)) if !t.contains('/') => (r, Some(t)),
        _ => (image, None),
    };
    let tag_ok = tag.is_none_or(|t| {
        (1..=128).contains(&t.len())
            && t.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
    });
    let mut parts: Vec<&str> = repository.split('/').collect();
    let first = parts[0];
    let registry =
        parts.len() > 1 && (first.contains('.') || first.contains(':') || first == "localhost");
    if registry {
        let (host, port) = match first.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (first, None),
        };
        let host_ok = host.split('.').all(|l| {
            (1..=63).contains(&l.len())
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
        let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
        if !host_ok || !port_ok {
            return false;
        }
        parts.remove(0);
    }
    let part_ok = |p: &str| {
        let edge =
            |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        edge(p.chars().next())
            && edge(p.chars().last())
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
    };
    tag_ok && !parts.is_empty() && parts.iter().all(|p| part_ok(p))
}

/// An image digest: `sha256:` and 64 lowercase hexadecimal digits.
pub fn is_image_digest(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// A full Git commit id as the Hugging Face Hub and HyperPod's `commitSHA` write it: 40
/// lowercase hexadecimal digits.
pub fn is_commit_sha(revision: &str) -> bool {
    revision.len() == 40
        && revision
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn is_model_name(name: &str) -> bool {
    super::hyperpod::is_valid_hyperpod_name(name) && !name.contains("--")
}

/// DNS-1123 subdomain (a Secret's name): 1-253 characters, dot-separated DNS labels.
pub(crate) fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns_label)
}

/// A Secret's data key: 1-253 letters, digits, `-`, `_` and `.`.
fn is_secret_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// A label value: at most 63 letters, digits, `-`, `_` and `.`, alphanumeric at both ends.
pub(crate) fn is_label_value(value: &str) -> bool {
    value.is_empty()
        || (value.len() <= 63
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric())
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name as a label value.
pub(crate) fn is_label_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    prefix.is_none_or(is_dns_subdomain) && !name.is_empty() && is_label_value(name)
}

/// DNS-1123 label: 1-63 lowercase letters, digits and hyphens, alphanumeric at both ends.
pub fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// A vLLM server deployed as an inference endpoint on instances of one type.
#[derive(Clone, Debug)]
pub struct InferenceEndpoint {
    id: String,
    name: String,
    namespace: String,
    server: VllmServer,
    instance_type: String,
    replicas: i32,
    autoscaling: Option<Autoscaling>,
}

/// Handle to the endpoint.
#[derive(Clone, Debug)]
pub struct InferenceEndpointHandle {
    /// The Kubernetes object name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
}

impl InferenceEndpoint {
    /// Serves `server` on `instance_type` (EC2 or `ml.` name); the object is named after the
    /// served model in lowercase.
    pub fn new(
        id: impl Into<String>,
        server: VllmServer,
        instance_type: impl Into<String>,
    ) -> Self {
        InferenceEndpoint {
            id: id.into(),
            name: server.served_name().to_ascii_lowercase(),
            namespace: "default".to_owned(),
            server,
            instance_type: instance_type.into(),
            replicas: 1,
            autoscaling: None,
        }
    }

    /// Scales the endpoint's replicas on a Prometheus query (the `autoScalingSpec` of its
    /// `InferenceEndpointConfig`); `replicas` stays the count the operator starts with.
    pub fn autoscaling(mut self, autoscaling: Autoscaling) -> Self {
        self.autoscaling = Some(autoscaling);
        self
    }

    /// How the replicas scale, when they do.
    pub fn autoscaling_config(&self) -> Option<&Autoscaling> {
        self.autoscaling.as_ref()
    }

    /// The Kubernetes object name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The namespace (default `default`).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// Number of replicas.
    pub fn replicas(mut self, replicas: i32) -> Self {
        self.replicas = replicas;
        self
    }

    /// The server.
    pub fn server(&self) -> &VllmServer {
        &self.server
    }

    /// The object name.
    pub fn object_name(&self) -> &str {
        &self.name
    }

    /// The namespace.
    pub fn object_namespace(&self) -> &str {
        &self.namespace
    }

    /// The instance type as given.
    pub fn instance_type(&self) -> &str {
        &self.instance_type
    }

    /// Replicas.
    pub fn replica_count(&self) -> i32 {
        self.replicas
    }

    /// GPUs of the instance type, from the catalog.
    pub fn gpus(&self) -> Option<u32> {
        catalog::instance(&self.instance_type).map(|i| i.gpu_count)
    }

    pub(crate) fn validate(&self, path: &str, ds: &mut Diagnostics) {
        if !is_dns_label(&self.name) {
            ds.report_field(
                Code::InvalidKubernetesName,
                path,
                "name",
                format!("`{}` is not a valid Kubernetes object name", self.name),
                "use 1-63 lowercase letters, digits and hyphens",
            );
        }
        if !is_dns_label(&self.namespace) {
            ds.report_field(
                Code::InvalidKubernetesName,
                path,
                "namespace",
                format!("`{}` is not a valid namespace", self.namespace),
                "use 1-63 lowercase letters, digits and hyphens",
            );
        }
        if catalog::instance(&self.instance_type).is_none() {
            ds.report_field(
                Code::UnknownInstanceType,
                path,
                "instance_type",
                format!(
                    "instance type `{}` is not in the catalog",
                    self.instance_type
                ),
                super::known_gpu_types_help(true),
            );
        }
        if !REPLICAS.contains(i64::from(self.replicas)) {
            ds.report_field(
                Code::InvalidInstanceCount,
                path,
                "replicas",
                format!("{} replicas requested", self.replicas),
                "use at least one replica",
            );
        }
        if let Some(a) = &self.autoscaling {
            a.validate(path, ds);
        }
        self.server.validate(self.gpus(), path, ds);
    }
}

impl InferenceEndpoint {
    /// The drains of the windowed training-plan groups this endpoint's instance type runs on,
    /// when it is the stack's first endpoint on that type (one drain per group).
    fn expand_drains(&self, scope: &mut Scope<'_>) {
        let stack = scope.stack();
        let mut namespace_added = false;
        for drain in super::drain::drains(stack) {
            if drain.endpoint != self.id {
                continue;
            }
            let group = drain.group.as_str();
            let o = super::drain::objects(stack.name(), group, &drain.schedule);
            // One set per group: its children are named after it (`GpuDrainCronJob`).
            let id = |kind: &str| format!("{}Drain{kind}", crate::app::pascal_id(group));
            if !namespace_added {
                // The drain runs a week or more after this stage is applied: its pinned image
                // is checked now, not found missing at the drain.
                scope.step(
                    "VerifyDrainImage",
                    Step::VerifyImage {
                        image: super::drain::image(),
                    },
                );
                scope.add("DrainNamespace", KubeObject::new(&o.namespace));
                namespace_added = true;
            }
            scope.add(&id("ServiceAccount"), KubeObject::new(&o.account));
            scope.add(&id("ClusterRole"), KubeObject::new(&o.cluster_role));
            scope.add(
                &id("ClusterRoleBinding"),
                KubeObject::new(&o.cluster_binding),
            );
            scope.add(&id("Role"), KubeObject::new(&o.role));
            scope.add(&id("RoleBinding"), KubeObject::new(&o.binding));
            scope.add(&id("ConfigMap"), KubeObject::new(&o.config));
            scope
                .add(&id("CronJob"), KubeObject::new(&o.cron_job))
                .acknowledge(
                    crate::resources::acknowledge::Rule::K8S_SERVICE_ACCOUNT_TOKEN,
                    "the drain calls the Kubernetes API with its service account's token: it cordons the group's nodes and evicts their pods",
                );
        }
    }

    /// This endpoint with its autoscaling's workspace address resolved to the placeholder of
    /// the workspace id (recorded in `scope` as a deploy-time value).
    fn with_workspace_address(&self, scope: &mut Scope<'_>) -> InferenceEndpoint {
        let mut this = self.clone();
        this.autoscaling = resolve_workspace(self.autoscaling.as_ref(), scope);
        this
    }
}

/// `autoscaling` with the query endpoint of its workspace, when it has one: the workspace id is
/// a deploy-time value (`ws-` prefixed, as the operator's CRD pattern wants).
fn resolve_workspace(
    autoscaling: Option<&Autoscaling>,
    scope: &mut Scope<'_>,
) -> Option<Autoscaling> {
    let a = autoscaling?;
    let Some(workspace) = a.workspace() else {
        return Some(a.clone());
    };
    let id = scope.deploy_value("PrometheusWorkspaceId", workspace.id(), "ws-");
    let region = scope.stack().region().to_owned();
    Some(
        a.clone()
            .with_address(Autoscaling::workspace_address(&region, &id)),
    )
}

impl Construct for InferenceEndpoint {
    type Handle = InferenceEndpointHandle;
    const KIND: &'static str = "inference_endpoint";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, _stack: &str) -> InferenceEndpointHandle {
        InferenceEndpointHandle {
            name: self.name.clone(),
            namespace: self.namespace.clone(),
        }
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        InferenceEndpoint::validate(self, cx.path, ds);
    }

    /// The `InferenceEndpointConfig` the HyperPod Inference Operator serves it from; and the
    /// drain of each instance group of its instance type whose training plan has a window
    /// (by the first endpoint on that type: see [`super::drain`]).
    fn expand(&self, scope: &mut Scope<'_>) {
        let resolved = self.with_workspace_address(scope);
        let config = objects::inference_endpoint_config(scope.stack(), &resolved);
        self.server().steps(scope, self.object_namespace());
        self.server().record_staged_bucket(scope);
        scope.add_object(KubeObject::new(&config));
        self.expand_drains(scope);
    }

    fn facts(&self, _cx: &Context<'_>) -> Facts<'_> {
        let gpus = catalog::instance(self.instance_type()).map_or(0, |i| i.gpu_count);
        Facts {
            served_models: vec![ServedModel {
                shape: self.server().shape(gpus),
                object_name: self.object_name(),
                namespace: self.object_namespace(),
                server: self.server(),
                instance_type: self.instance_type(),
                gpus,
                replicas: i64::from(self.replica_count()),
                efa_devices: 0,
                hyperpod: true,
                autoscaling: self.autoscaling.as_ref(),
                exposure: Exposure::InternalLoadBalancer,
            }],
            ..Facts::default()
        }
    }
}

// --- Stack-file form -------------------------------------------------------------------------

stack_file_shape! {
    pub mod secret_key_ref_fields = "SecretKeyRef", "A key of a Kubernetes Secret." {
        NAME: req "name", Ty::Str, "The Secret's name.";
        KEY: req "key", Ty::Str, "The key.";
    }
}

stack_file_shape! {
    pub mod storage_throughput_fields = "StorageThroughput", "Storage throughput assumptions for the startup budget." {
        DOWNLOAD_BYTES_PER_SEC: req "download_bytes_per_sec", Ty::F64(super::THROUGHPUT), "Download rate, bytes per second.";
        LOAD_BYTES_PER_SEC: req "load_bytes_per_sec", Ty::F64(super::THROUGHPUT), "Load rate into GPU memory, bytes per second.";
        WARMUP_SECS: req "warmup_secs", Ty::F64(super::WARMUP_SECS), "Warm-up time, seconds.";
    }
}

stack_file_shape! {
    pub mod server_fields = "VllmServer", "The vLLM server: the model, the image and the engine's arguments." {
        MODEL: req "model", Ty::Str, "The Hugging Face model id (`organization/name`).";
        IMAGE: req "image", Ty::Str, "The container image, pinned.";
        IMAGE_DIGEST: opt "image_digest", Ty::Str, "The image's digest (`sha256:...`): the container runs `<image>@<digest>`.";
        SERVED_MODEL_NAME: opt "served_model_name", Ty::Str, "The name clients pass as `model`.";
        TENSOR_PARALLEL_SIZE: opt "tensor_parallel_size", Ty::U32(super::GPU_COUNT), "Tensor parallel size (default: every GPU of the instance).";
        DECODE_CONTEXT_PARALLEL_SIZE: opt "decode_context_parallel_size", Ty::U32(super::GPU_COUNT), "Decode context parallel size.";
        GPU_MEMORY_UTILIZATION: opt "gpu_memory_utilization", Ty::F64(super::GPU_MEMORY_UTILIZATION), default "0.90", "Fraction of GPU memory vLLM may use.";
        MAX_MODEL_LEN: opt "max_model_len", Ty::U64(super::MODEL_LEN), "Maximum context length.";
        LOAD_FORMAT: opt "load_format", Ty::Str, "The weight loader (`fastsafetensors`, ...).";
        TRUST_REMOTE_CODE: opt "trust_remote_code", Ty::Bool, "Run the model repository's own code.";
        REVISION: opt "revision", Ty::Str, "The model repository's commit to serve: 40 lowercase hex digits (branches and tags move, so they are refused).";
        TOOL_CALL_PARSER: opt "tool_call_parser", Ty::Str, "Tool-call parser (enables automatic tool choice).";
        REASONING_PARSER: opt "reasoning_parser", Ty::Str, "Reasoning parser.";
        PREFIX_CACHING: opt "prefix_caching", Ty::Bool, "Automatic prefix caching.";
        MOE_BACKEND: opt "moe_backend", Ty::Str, "The MoE kernel backend.";
        ENV: opt "env", Ty::StrMap, "Environment variables, in order (never secrets).";
        EXTRA_ARGS: opt "extra_args", Ty::StrList, "Arguments the typed fields do not cover.";
        HF_TOKEN_SECRET: opt "hf_token_secret", Ty::Obj(&secret_key_ref_fields::SHAPE), "The Secret holding the Hugging Face token.";
        API_KEY_SECRET: opt "api_key_secret", Ty::Obj(&secret_key_ref_fields::SHAPE), "The Secret holding the API key clients send as a bearer token (read into VLLM_API_KEY).";
        WEIGHT_BYTES: opt "weight_bytes", Ty::U64(super::WEIGHT_BYTES), "The weights' size, for models not in the catalog.";
        STORAGE_THROUGHPUT: opt "storage_throughput", Ty::Obj(&storage_throughput_fields::SHAPE), "Storage throughput for the startup budget (default: the catalog's rates for the weight source).";
        WEIGHTS_STORE: opt "weights_store", Ty::Ref(Want::ModelStore), "Serve the staged copy of the model at `revision` in this model store (a `weights_staging` Job copies it) instead of downloading from the Hub.";
    }
}

stack_file_shape! {
    pub mod autoscaling_fields = "Autoscaling", "Autoscaling within the reserved capacity, on a Prometheus query (default: vLLM's queue depth per replica). Scale to zero is not offered." {
        MIN_REPLICAS: req "min_replicas", Ty::I64(super::autoscaling::AUTOSCALING_REPLICAS), "The fewest replicas, at least 1 (a cold start is 20-80 minutes).";
        MAX_REPLICAS: req "max_replicas", Ty::I64(super::autoscaling::AUTOSCALING_REPLICAS), "The most replicas; times the GPUs per replica, within what the capacity provides.";
        SERVER_ADDRESS: opt "server_address", Ty::Str, "The Prometheus query endpoint: `https://aps-workspaces.<region>.amazonaws.com/workspaces/<workspace id>` for AMP (or `workspace`).";
        WORKSPACE: opt "workspace", Ty::Ref(Want::PrometheusMonitoring), "The `prometheus_monitoring` whose workspace is queried (its id is filled in when the stage is applied); instead of `server_address`.";
        QUERY: opt "query", Ty::Str, "A PromQL query returning one value (default: `sum(vllm:num_requests_waiting{model_name=\"<served name>\"})`).";
        TARGET_VALUE: opt "target_value", Ty::F64(super::autoscaling::AUTOSCALING_TARGET), default "4", "The query's target value per replica.";
        POLLING_INTERVAL_SECS: opt "polling_interval_secs", Ty::U32(super::autoscaling::AUTOSCALING_SECS), default "30", "How often the query runs, seconds.";
        COOLDOWN_SECS: opt "cooldown_secs", Ty::U32(super::autoscaling::AUTOSCALING_SECS), default "600", "Cooldown, seconds.";
        SCALE_UP_STABILIZATION_SECS: opt "scale_up_stabilization_secs", Ty::U32(super::autoscaling::AUTOSCALING_SECS), default "0", "Scale-up stabilization window, seconds.";
        SCALE_DOWN_STABILIZATION_SECS: opt "scale_down_stabilization_secs", Ty::U32(super::autoscaling::AUTOSCALING_SECS), default "1800", "Scale-down stabilization window, seconds.";
    }
}

stack_file_shape! {
    pub mod endpoint_fields = <InferenceEndpoint as Construct>::KIND, "An `InferenceEndpointConfig` served by the HyperPod inference operator." {
        ID: req "inference_endpoint", Ty::Str, "The construct id.";
        SERVER: req "server", Ty::Obj(&server_fields::SHAPE), "The vLLM server.";
        INSTANCE_TYPE: req "instance_type", Ty::Str, "The instance type (EC2 or `ml.` name).";
        NAME: opt "name", Ty::Str, "The object name (default: the served model name in lowercase).";
        NAMESPACE: opt "namespace", Ty::Str, default "default", "The namespace.";
        REPLICAS: opt "replicas", Ty::I64(super::REPLICAS), default "1", "Replicas; with autoscaling, the count the operator starts with.";
        AUTOSCALING: opt "autoscaling", Ty::Obj(&autoscaling_fields::SHAPE), "Autoscaling (the endpoint's `autoScalingSpec`).";
    }
}

stack_file_shape! {
    pub mod client_fields = "Client", "Pods allowed to reach the server directly." {
        NAMESPACE: req "namespace", Ty::Str, "The clients' namespace.";
        POD_LABELS: opt "pod_labels", Ty::StrMap, "Labels the client pods carry (default: every pod of the namespace).";
    }
}

stack_file_shape! {
    pub mod deployment_fields = <VllmDeployment as Construct>::KIND, "A vLLM Deployment and its Service on EKS GPU nodes." {
        ID: req "vllm_deployment", Ty::Str, "The construct id.";
        SERVER: req "server", Ty::Obj(&server_fields::SHAPE), "The vLLM server.";
        INSTANCE_TYPE: req "instance_type", Ty::Str, "The EC2 instance type of the nodes.";
        NAME: opt "name", Ty::Str, "The object name (default: the served model name in lowercase).";
        NAMESPACE: opt "namespace", Ty::Str, "The namespace (default: the object name).";
        REPLICAS: opt "replicas", Ty::I64(super::REPLICAS), default "1", "Replicas.";
        GPUS: opt "gpus", Ty::U32(super::GPU_COUNT), "GPUs per replica (default: every GPU of the instance).";
        EXPOSURE: opt "exposure", Ty::Enum(Exposure::NAMES), default "internal_load_balancer", "How the Service is exposed.";
        SERVICE_ANNOTATIONS: opt "service_annotations", Ty::StrMap, "Annotations on the Service.";
        EFA: opt "efa", Ty::Bool, "Request the instance's EFA interfaces (always, with `nodes_per_replica` above 1).";
        NODES_PER_REPLICA: opt "nodes_per_replica", Ty::U32(super::NODES_PER_REPLICA), default "1", "Nodes each replica spans, one pipeline stage of all a node's GPUs on each: above 1, a LeaderWorkerSet group over EFA.";
        LOAD_BALANCER_SUBNETS: opt "load_balancer_subnets", Ty::Refs(Want::Subnets), "The load balancer's subnets, one per zone (default for an internal load balancer: the serving nodes' subnets; `Network.public_subnets` when internet-facing); the NetworkPolicy admits their blocks.";
        CLIENTS: opt "clients", Ty::List(&client_fields::SHAPE), "Pods allowed to reach the server directly.";
        ALWAYS_PULL_IMAGE: opt "always_pull_image", Ty::Bool, default "false", "Ask the registry for the image at every start (`imagePullPolicy: Always` rather than `IfNotPresent`).";
        AUTOSCALING: opt "autoscaling", Ty::Obj(&autoscaling_fields::SHAPE), "Autoscaling (a KEDA ScaledObject; `replicas` is then left to it).";
    }
}

/// The vLLM server of the nested object `field`.
fn server(
    r: &mut dyn super::stack_file::FieldReader,
    field: &'static super::stack_file::Field,
) -> Option<VllmServer> {
    super::stack_file::object(r, field, |r| {
        use server_fields as f;
        let mut s = VllmServer::new(r.text(&f::MODEL)?, r.text(&f::IMAGE)?);
        if let Some(v) = r.text(&f::IMAGE_DIGEST) {
            s = s.image_digest(v);
        }
        if let Some(v) = r.text(&f::SERVED_MODEL_NAME) {
            s = s.served_model_name(v);
        }
        if let Some(v) = r.u32(&f::TENSOR_PARALLEL_SIZE) {
            s = s.tensor_parallel_size(v);
        }
        if let Some(v) = r.u32(&f::DECODE_CONTEXT_PARALLEL_SIZE) {
            s = s.decode_context_parallel_size(v);
        }
        if let Some(v) = r.f64(&f::GPU_MEMORY_UTILIZATION) {
            s = s.gpu_memory_utilization(v);
        }
        if let Some(v) = r.u64(&f::MAX_MODEL_LEN) {
            s = s.max_model_len(v);
        }
        if let Some(v) = r.bool(&f::TRUST_REMOTE_CODE) {
            s = s.trust_remote_code(v);
        }
        if let Some(v) = r.text(&f::REVISION) {
            s = s.revision(v);
        }
        if let Some(v) = r.text(&f::LOAD_FORMAT) {
            s = s.load_format(v);
        }
        if let Some(v) = r.bool(&f::PREFIX_CACHING) {
            s = s.prefix_caching(v);
        }
        if let Some(v) = r.text(&f::TOOL_CALL_PARSER) {
            s = s.tool_call_parser(v);
        }
        if let Some(v) = r.text(&f::REASONING_PARSER) {
            s = s.reasoning_parser(v);
        }
        if let Some(v) = r.text(&f::MOE_BACKEND) {
            s = s.moe_backend(v);
        }
        for (k, v) in r.str_map(&f::ENV) {
            s = s.env(k, v);
        }
        for a in r.str_list(&f::EXTRA_ARGS).unwrap_or_default() {
            s = s.extra_arg(a);
        }
        let secret = super::stack_file::object(r, &f::HF_TOKEN_SECRET, |h| {
            let name = h.text(&secret_key_ref_fields::NAME);
            let key = h.text(&secret_key_ref_fields::KEY);
            Some((name?, key?))
        });
        if let Some((n, k)) = secret.flatten() {
            s = s.hf_token_secret(n, k);
        }
        let api_key = super::stack_file::object(r, &f::API_KEY_SECRET, |h| {
            let name = h.text(&secret_key_ref_fields::NAME);
            let key = h.text(&secret_key_ref_fields::KEY);
            Some((name?, key?))
        });
        if let Some((n, k)) = api_key.flatten() {
            s = s.api_key_secret(n, k);
        }
        if let Some(v) = r.u64(&f::WEIGHT_BYTES) {
            s = s.weight_bytes(v);
        }
        let throughput = super::stack_file::object(r, &f::STORAGE_THROUGHPUT, |t| {
            use storage_throughput_fields as t_;
            let download = t.f64(&t_::DOWNLOAD_BYTES_PER_SEC);
            let load = t.f64(&t_::LOAD_BYTES_PER_SEC);
            let warmup = t.f64(&t_::WARMUP_SECS);
            Some(StorageThroughput {
                download_bytes_per_sec: download?,
                load_bytes_per_sec: load?,
                warmup_secs: warmup?,
            })
        });
        if let Some(t) = throughput.flatten() {
            s = s.storage_throughput(t);
        }
        if let Some(store) = r.model_store(&f::WEIGHTS_STORE).ok()? {
            s = s.weights_from(&store);
        }
        Some(s)
    })
    .flatten()
}

/// The autoscaling of the nested object `field`.
fn autoscaling(
    r: &mut dyn super::stack_file::FieldReader,
    field: &'static super::stack_file::Field,
) -> Option<Autoscaling> {
    super::stack_file::object(r, field, |r| {
        use autoscaling_fields as f;
        let min = r.i64(&f::MIN_REPLICAS);
        let max = r.i64(&f::MAX_REPLICAS);
        let address = r.text(&f::SERVER_ADDRESS);
        let workspace = r.prometheus_monitoring(&f::WORKSPACE).ok()?;
        let (min, max) = (clamp_i32(min?), clamp_i32(max?));
        let mut a = match (workspace, address) {
            (Some(w), None) => Autoscaling::on_workspace(min, max, &w.workspace),
            (None, Some(address)) => Autoscaling::new(min, max, address),
            (w, _) => {
                let both = w.is_some();
                r.report(
                    Code::InvalidAutoscaling,
                    Some(&f::SERVER_ADDRESS),
                    if both {
                        "autoscaling names both a `workspace` and a `server_address`"
                    } else {
                        "autoscaling names no Prometheus endpoint"
                    },
                    "give `workspace: <prometheus_monitoring id>`, or a `server_address`",
                );
                return None;
            }
        };
        if let Some(v) = r.text(&f::QUERY) {
            a = a.query(v);
        }
        if let Some(v) = r.f64(&f::TARGET_VALUE) {
            a = a.target_value(v);
        }
        if let Some(v) = r.u32(&f::POLLING_INTERVAL_SECS) {
            a = a.polling_interval_secs(v);
        }
        if let Some(v) = r.u32(&f::COOLDOWN_SECS) {
            a = a.cooldown_secs(v);
        }
        if let Some(v) = r.u32(&f::SCALE_UP_STABILIZATION_SECS) {
            a = a.scale_up_stabilization_secs(v);
        }
        if let Some(v) = r.u32(&f::SCALE_DOWN_STABILIZATION_SECS) {
            a = a.scale_down_stabilization_secs(v);
        }
        Some(a)
    })
    .flatten()
}

/// A replica count as the builders take it (out-of-range values saturate; validation
/// reports them).
fn clamp_i32(v: i64) -> i32 {
    i32::try_from(v).unwrap_or(if v < 0 { i32::MIN } else { i32::MAX })
}

impl super::stack_file::StackFileConstruct for InferenceEndpoint {
    const SHAPE: &'static super::stack_file::Shape = &endpoint_fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        use endpoint_fields as f;
        let server = server(r, &f::SERVER)?;
        let mut c = InferenceEndpoint::new(id, server, r.text(&f::INSTANCE_TYPE)?);
        if let Some(v) = r.text(&f::NAME) {
            c = c.name(v);
        }
        if let Some(v) = r.text(&f::NAMESPACE) {
            c = c.namespace(v);
        }
        if let Some(v) = r.i64(&f::REPLICAS) {
            c = c.replicas(clamp_i32(v));
        }
        if let Some(a) = autoscaling(r, &f::AUTOSCALING) {
            c = c.autoscaling(a);
        }
        Some(c)
    }
}

impl super::stack_file::StackFileConstruct for VllmDeployment {
    const SHAPE: &'static super::stack_file::Shape = &deployment_fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        use deployment_fields as f;
        let server = server(r, &f::SERVER)?;
        let mut c = VllmDeployment::new(id, server, r.text(&f::INSTANCE_TYPE)?);
        if let Some(v) = r.text(&f::NAME) {
            c = c.name(v);
        }
        if let Some(v) = r.text(&f::NAMESPACE) {
            c = c.namespace(v);
        }
        if let Some(v) = r.i64(&f::REPLICAS) {
            c = c.replicas(clamp_i32(v));
        }
        if let Some(v) = r.u32(&f::GPUS) {
            c = c.gpus(v);
        }
        match r.text(&f::EXPOSURE).and_then(|n| Exposure::from_name(&n)) {
            Some(Exposure::ClusterIp) => c = c.cluster_ip_service(),
            Some(Exposure::InternetFacingLoadBalancer) => c = c.internet_facing_load_balancer(),
            Some(Exposure::InternalLoadBalancer) | None => {}
        }
        for (k, v) in r.str_map(&f::SERVICE_ANNOTATIONS) {
            c = c.service_annotation(k, v);
        }
        if let Some(v) = r.bool(&f::EFA) {
            c = c.efa(v);
        }
        if let Some(v) = r.u32(&f::NODES_PER_REPLICA) {
            c = c.nodes_per_replica(v);
        }
        if let Some(v) = r.bool(&f::ALWAYS_PULL_IMAGE) {
            c = c.always_pull_image(v);
        }
        if let Some(subnets) = r.subnets(&f::LOAD_BALANCER_SUBNETS).ok()? {
            c = c.load_balancer_subnets(&subnets);
        }
        for (namespace, labels) in super::stack_file::list(r, &f::CLIENTS, |o| {
            let namespace = o.text(&client_fields::NAMESPACE);
            let labels = o.str_map(&client_fields::POD_LABELS);
            Some((namespace?, labels))
        }) {
            c = c.allow_pods(namespace, labels);
        }
        if let Some(a) = autoscaling(r, &f::AUTOSCALING) {
            c = c.autoscaling(a);
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape the rules read: the engine's version from the image tag, the model with an
    /// explicit weight size, one node and one pipeline stage.
    #[test]
    fn a_servers_shape_is_what_the_rules_read() {
        let server = VllmServer::new("moonshotai/Kimi-K3", "vllm/vllm-openai:v0.11.2")
            .weight_bytes(1_000)
            .max_model_len(65_536);
        let shape = server.shape(8);
        assert_eq!(shape.engine, super::super::Engine::Vllm);
        assert_eq!(shape.engine_version.as_deref(), Some("v0.11.2"));
        assert_eq!(shape.model.unwrap().weight_bytes(), 1_000);
        assert_eq!(
            (
                shape.tensor_parallel,
                shape.pipeline_parallel,
                shape.nodes_per_replica
            ),
            (8, 1, 1)
        );
        assert_eq!(shape.max_model_len, Some(65_536));
        for (image, version) in [
            ("vllm/vllm-openai:latest", None),
            ("vllm/vllm-openai:v0.11", None),
            ("registry:5000/vllm", None),
            ("vllm/vllm-openai:0.12.0", Some("0.12.0")),
            (
                "vllm/vllm-openai:v0.11.2@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                Some("v0.11.2"),
            ),
            ("registry:5000/vllm@sha256:0123", None),
        ] {
            assert_eq!(
                VllmServer::new("a/b", image).engine_version(),
                version,
                "{image}"
            );
        }
    }

    #[test]
    fn model_ids_follow_the_hub_rules() {
        for ok in [
            "moonshotai/Kimi-K3",
            "a/b",
            "deepseek-ai/DeepSeek-V3.1",
            "org_1/m.v2",
        ] {
            assert!(is_hf_model_id(ok), "{ok}");
        }
        for bad in [
            "a/..",
            "../b",
            "a/.b",
            "a/b-",
            "a/b..c",
            "a/b--c",
            "a",
            "a/b/c",
            "",
            &format!("a/{}", "x".repeat(97)),
        ] {
            assert!(!is_hf_model_id(bad), "{bad}");
        }
    }

    #[test]
    fn image_names() {
        for ok in [
            "vllm/vllm-openai:kimi-k3",
            "vllm/vllm-openai",
            "ubuntu",
            "localhost:5000/a/b:1.0",
            "123456789012.dkr.ecr.us-west-2.amazonaws.com/docker-hub/vllm/vllm-openai:v0.11.0",
            "public.ecr.aws/x/y_z:tag_1",
        ] {
            assert!(is_image_name(ok), "{ok}");
        }
        for bad in [
            "",
            "vllm/vllm-openai:kimi-k3$(id)",
            "vllm/vllm-openai:kimi k3",
            "vllm/VLLM:1",
            "a//b",
            "registry:99999/a",
            "x/y:",
            "x/y:.tag",
            "'x'",
            "x/y:t`id`",
            &format!("x:{}", "t".repeat(129)),
        ] {
            assert!(!is_image_name(bad), "{bad}");
        }
    }

    #[test]
    fn weights_beyond_a_pebibyte_are_refused() {
        for (bytes, refused) in [
            (0, true),
            (1, false),
            (MAX_WEIGHT_BYTES, false),
            (u64::MAX, true),
        ] {
            let mut ds = Diagnostics::new();
            VllmServer::new("example/unknown-model", "vllm/vllm-openai:v1")
                .weight_bytes(bytes)
                .validate(Some(8), "s/E", &mut ds);
            assert_eq!(
                ds.contains(Code::InvalidWeightBytes, "s/E"),
                refused,
                "{bytes}: {ds}"
            );
        }
    }

    #[test]
    fn literal_credentials_in_the_environment_are_refused() {
        for (name, value) in [
            (
                "AWS_SECRET_ACCESS_KEY",
                "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            ),
            ("AWS_SESSION_TOKEN", "x"),
            ("SOME_ID", "AKIAIOSFODNN7EXAMPLE"),
            ("TOKEN", "hf_abcdefghijklmnopqrstuvwxyz0123"),
            ("HF_TOKEN", "x"),
        ] {
            let mut ds = Diagnostics::new();
            VllmServer::new("moonshotai/Kimi-K3", "vllm/vllm-openai:v1")
                .env(name, value)
                .validate(Some(8), "s/E", &mut ds);
            assert!(
                ds.contains(Code::SecretLiteralInEnvironment, "s/E"),
                "{name}: {ds}"
            );
        }
        let mut ds = Diagnostics::new();
        VllmServer::new("moonshotai/Kimi-K3", "vllm/vllm-openai:v1")
            .env("VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION", "1")
            .validate(Some(8), "s/E", &mut ds);
        assert!(
            !ds.contains(Code::SecretLiteralInEnvironment, "s/E"),
            "{ds}"
        );
    }

    #[test]
    fn managed_settings_cannot_be_restated_in_another_spelling() {
        for arg in [
            "--tensor-parallel-size=4",
            "-tp",
            "--max_model_len=1000",
            "--max-model-len",
            "--no-enable-prefix-caching",
            "--gpu_memory_utilization=0.5",
        ] {
            let mut ds = Diagnostics::new();
            VllmServer::new("moonshotai/Kimi-K3", "vllm/vllm-openai:v1")
                .extra_arg(arg)
                .validate(Some(8), "s/E", &mut ds);
            assert!(
                ds.contains(Code::ArgumentOwnedByBuilder, "s/E"),
                "{arg}: {ds}"
            );
        }
        for arg in [
            "--no-enable-flashinfer-autotune",
            "4",
            "--enable-expert-parallel",
        ] {
            let mut ds = Diagnostics::new();
            VllmServer::new("moonshotai/Kimi-K3", "vllm/vllm-openai:v1")
                .extra_arg(arg)
                .validate(Some(8), "s/E", &mut ds);
            assert!(
                !ds.contains(Code::ArgumentOwnedByBuilder, "s/E"),
                "{arg}: {ds}"
            );
        }
    }

    #[test]
    fn extreme_throughputs_saturate_and_are_refused() {
        for t in [
            StorageThroughput {
                download_bytes_per_sec: 1e-300,
                load_bytes_per_sec: 1e-300,
                warmup_secs: 1e300,
            },
            StorageThroughput {
                download_bytes_per_sec: 1e300,
                load_bytes_per_sec: 1e300,
                warmup_secs: 0.0,
            },
            StorageThroughput {
                download_bytes_per_sec: f64::NAN,
                load_bytes_per_sec: 2e9,
                warmup_secs: -1.0,
            },
        ] {
            let budget = StartupBudget::compute(u64::MAX, t);
            // No overflow, and the budget still covers its parts.
            let parts = budget
                .download_secs
                .saturating_add(budget.load_secs)
                .saturating_add(budget.warmup_secs);
            assert!(budget.total_secs >= parts, "{budget:?}");
            let mut ds = Diagnostics::new();
            VllmServer::new("moonshotai/Kimi-K3", "vllm/vllm-openai:v1")
                .storage_throughput(t)
                .validate(Some(8), "s/E", &mut ds);
            assert!(ds.contains(Code::InvalidThroughput, "s/E"), "{t:?}: {ds}");
        }
        let mut ds = Diagnostics::new();
        VllmServer::new("moonshotai/Kimi-K3", "vllm/vllm-openai:v1")
            .storage_throughput(StorageThroughput::default())
            .validate(Some(8), "s/E", &mut ds);
        assert!(!ds.contains(Code::InvalidThroughput, "s/E"), "{ds}");
    }

    #[test]
    fn startup_budget_for_kimi_k3() {
        let b = StartupBudget::compute(1_560_936_091_448, StorageThroughput::default());
        assert_eq!(b.download_secs, 3122);
        assert_eq!(b.load_secs, 781);
        assert_eq!(b.warmup_secs, 900);
        // (3122 + 781 + 900) * 1.5 = 7204.5 s, rounded up to whole minutes.
        assert_eq!(b.total_secs, 7260);
    }

    #[test]
    fn args_are_derived_from_typed_fields() {
        let s = VllmServer::new("moonshotai/Kimi-K3", "vllm/vllm-openai:kimi-k3")
            .tool_call_parser("kimi_k3")
            .trust_remote_code(true);
        let args = s.args("/opt/ml/model", 8);
        let joined = args.join(" ");
        assert!(joined.starts_with("--model /opt/ml/model --served-model-name Kimi-K3 --port 8000 --tensor-parallel-size 8"));
        assert!(joined.contains("--enable-auto-tool-choice --tool-call-parser kimi_k3"));
    }

    #[test]
    fn the_revision_pins_the_hub_download_but_not_a_local_copy() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let s = VllmServer::new("moonshotai/Kimi-K3", "vllm/vllm-openai:kimi-k3")
            .trust_remote_code(true)
            .revision(sha);
        let hub = s.hub_args(8).join(" ");
        assert!(hub.starts_with(&format!(
            "--model moonshotai/Kimi-K3 --revision {sha} --code-revision {sha} "
        )));
        assert!(!s.args("/opt/ml/model", 8).join(" ").contains("revision"));
        assert!(is_commit_sha(sha));
        for bad in [
            "main",
            "v1",
            &sha.to_ascii_uppercase(),
            &sha[..39],
            &format!("{sha}0"),
        ] {
            assert!(!is_commit_sha(bad), "{bad}");
        }
    }

    #[test]
    fn names() {
        assert!(is_hf_model_id("moonshotai/Kimi-K3"));
        assert!(!is_hf_model_id("Kimi-K3"));
        assert!(is_dns_label("kimik3"));
        assert!(!is_dns_label("Kimi"));
    }
}

/// How the model Service is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Exposure {
    /// An internal Network Load Balancer (reachable from the VPC and its peers).
    #[default]
    InternalLoadBalancer,
    /// An internet-facing Network Load Balancer: asked for by name only.
    InternetFacingLoadBalancer,
    /// A ClusterIP Service (reach it with `kubectl port-forward`).
    ClusterIp,
}

stack_file_names!(Exposure {
    InternalLoadBalancer => "internal_load_balancer",
    InternetFacingLoadBalancer => "internet_facing_load_balancer",
    ClusterIp => "cluster_ip",
});

/// Pods allowed to reach the server directly (in-cluster clients): every pod of a namespace, or
/// the pods of a namespace carrying all the given labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Client {
    /// The clients' namespace.
    pub namespace: String,
    /// The labels the client pods carry; empty for every pod of the namespace.
    pub pod_labels: std::collections::BTreeMap<String, String>,
}

/// A vLLM server deployed as a Kubernetes Deployment behind a Service on port 8000, on nodes of
/// one instance type (the EKS path).
///
/// # Examples
///
/// Kimi K3 at tensor parallel 8 on a p6-b300, behind an internal Network Load Balancer in the
/// private subnets; the objects are named after the served model, in a namespace of the same
/// name (the crate root shows the whole stack around it):
///
/// ```
/// use hyperforge::app::Stack;
/// use hyperforge::constructs::*;
///
/// let mut stack = Stack::new("demo", "us-west-2");
/// let foundation = stack.cloudformation_stage("foundation");
/// let network = stack.add(foundation, Network::new("Network"));
/// let server = VllmServer::new("moonshotai/Kimi-K3", "vllm/vllm-openai:kimi-k3")
///     .trust_remote_code(true)
///     .revision("0123456789abcdef0123456789abcdef01234567")
///     .tensor_parallel_size(8)
///     .api_key_secret("kimi-k3-api-key", "api-key");
/// let workload = stack.kubernetes_stage("workload");
/// let handle = stack.add(
///     workload,
///     VllmDeployment::new("KimiK3", server, "p6-b300.48xlarge")
///         .load_balancer_subnets(&network.private_subnets),
/// );
/// assert_eq!((handle.name.as_str(), handle.namespace.as_str()), ("kimi-k3", "kimi-k3"));
/// ```
#[derive(Clone, Debug)]
pub struct VllmDeployment {
    id: String,
    name: String,
    namespace: String,
    server: VllmServer,
    instance_type: String,
    replicas: i32,
    gpus: Option<u32>,
    exposure: Exposure,
    service_annotations: std::collections::BTreeMap<String, String>,
    efa: bool,
    nodes: u32,
    load_balancer_subnets: Vec<Ref<kind::Subnet>>,
    clients: Vec<Client>,
    always_pull: bool,
    autoscaling: Option<Autoscaling>,
}

/// Handle to the deployment.
#[derive(Clone, Debug)]
pub struct VllmDeploymentHandle {
    /// Object name (Deployment, Service, ServiceAccount).
    pub name: String,
    /// Namespace.
    pub namespace: String,
}

/// The Service annotation that selects an internet-facing load balancer.
pub const LB_SCHEME_ANNOTATION: &str = "service.beta.kubernetes.io/aws-load-balancer-scheme";

/// The Service annotation placing the load balancer in named subnets.
pub const LB_SUBNETS_ANNOTATION: &str = "service.beta.kubernetes.io/aws-load-balancer-subnets";

impl VllmDeployment {
    /// Serves `server` on nodes of `instance_type` (EC2 name); objects are named after the
    /// served model in lowercase, in a namespace of the same name.
    pub fn new(
        id: impl Into<String>,
        server: VllmServer,
        instance_type: impl Into<String>,
    ) -> Self {
        let name = server.served_name().to_ascii_lowercase();
        VllmDeployment {
            id: id.into(),
            namespace: name.clone(),
            name,
            server,
            instance_type: instance_type.into(),
            replicas: 1,
            gpus: None,
            exposure: Exposure::InternalLoadBalancer,
            service_annotations: std::collections::BTreeMap::new(),
            efa: false,
            nodes: 1,
            load_balancer_subnets: Vec::new(),
            clients: Vec::new(),
            always_pull: false,
            autoscaling: None,
        }
    }

    /// Serves `server` in `layout`, a layout `hyperforge plan` (`catalog::plan::plan`) found:
    /// its instance type, its tensor parallel size, and its nodes per replica (one pipeline
    /// stage per node). A single-node layout that uses part of a node's GPUs asks for that many.
    /// The nodes of a multi-node layout must launch with EFA interfaces (`HF0427`).
    pub fn for_layout(
        id: impl Into<String>,
        server: VllmServer,
        layout: &crate::catalog::plan::Layout,
    ) -> Self {
        let deployment = VllmDeployment::new(
            id,
            server.tensor_parallel_size(layout.tensor_parallel),
            layout.instance_type,
        )
        .nodes_per_replica(layout.nodes_per_replica);
        let whole_node = catalog::instance(layout.instance_type)
            .is_some_and(|i| i.gpu_count == layout.tensor_parallel);
        if layout.nodes_per_replica == 1 && !whole_node {
            deployment.gpus(layout.tensor_parallel)
        } else {
            deployment
        }
    }

    /// Spreads each replica over `nodes` nodes of the instance type, one pipeline stage of all
    /// the node's GPUs on each (tensor parallel inside a node, pipeline parallel across them),
    /// for a model no single node holds (`hyperforge plan` says when). The replica is then a
    /// LeaderWorkerSet group started by vLLM's own multi-node launch, over EFA.
    pub fn nodes_per_replica(mut self, nodes: u32) -> Self {
        self.nodes = nodes;
        self
    }

    /// Scales the Deployment on a Prometheus query with a KEDA `ScaledObject` (and a
    /// `TriggerAuthentication` through the KEDA operator's EKS Pod Identity). The Deployment
    /// then states no `replicas`: KEDA's HorizontalPodAutoscaler owns the count, and a
    /// re-applied manifest would otherwise reset it.
    pub fn autoscaling(mut self, autoscaling: Autoscaling) -> Self {
        self.autoscaling = Some(autoscaling);
        self
    }

    /// How the replicas scale, when they do.
    pub fn autoscaling_config(&self) -> Option<&Autoscaling> {
        self.autoscaling.as_ref()
    }

    /// Whether the kubelet asks the registry for the image at every container start
    /// (`imagePullPolicy: Always`) instead of using the node's copy (`IfNotPresent`, the
    /// default). With a digest the two run the same image; `Always` only costs a registry
    /// round trip per start, and a start fails while the registry is unreachable.
    pub fn always_pull_image(mut self, always: bool) -> Self {
        self.always_pull = always;
        self
    }

    /// The subnets the load balancer is placed in, one per availability zone. An internal load
    /// balancer (the default) is otherwise placed in the subnets of the nodes serving the
    /// model (the node group or Karpenter pool of its instance type): a Network Load Balancer
    /// sends traffic only to targets in its own zones, so these always include the pod's, and
    /// a warning (`HF0426`) says when given subnets may not. An internet-facing one needs the
    /// network's public subnets given. The Service names them (`aws-load-balancer-subnets`, by
    /// `Name` tag), and the NetworkPolicy admits port 8000 from their blocks only: a Network
    /// Load Balancer with `ip` targets and client IP preservation off (the default for TCP)
    /// connects to the pod from its own addresses in these subnets, for traffic and health
    /// checks alike (Load Balancer Controller v2.13.2 docs/guide/service/nlb.md, "Worker node
    /// security groups rules").
    pub fn load_balancer_subnets<'a, I>(mut self, subnets: I) -> Self
    where
        I: IntoIterator<Item = &'a Ref<kind::Subnet>>,
    {
        self.load_balancer_subnets
            .extend(subnets.into_iter().cloned());
        self
    }

    /// Lets every pod of namespace `namespace` reach the server on port 8000.
    pub fn allow_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.clients.push(Client {
            namespace: namespace.into(),
            pod_labels: std::collections::BTreeMap::new(),
        });
        self
    }

    /// Lets the pods of namespace `namespace` carrying all of `labels` reach the server on
    /// port 8000.
    pub fn allow_pods<I, K, V>(mut self, namespace: impl Into<String>, labels: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.clients.push(Client {
            namespace: namespace.into(),
            pod_labels: labels
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        });
        self
    }

    /// Object name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Namespace.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// Replicas (each takes a whole node's GPUs).
    pub fn replicas(mut self, replicas: i32) -> Self {
        self.replicas = replicas;
        self
    }

    /// GPUs per replica (default: every GPU of the instance).
    pub fn gpus(mut self, gpus: u32) -> Self {
        self.gpus = Some(gpus);
        self
    }

    /// A ClusterIP Service instead of a load balancer.
    pub fn cluster_ip_service(mut self) -> Self {
        self.exposure = Exposure::ClusterIp;
        self
    }

    /// An internet-facing Network Load Balancer, placed in the public subnets given with
    /// [`VllmDeployment::load_balancer_subnets`]. Give the server an API key
    /// ([`VllmServer::api_key_secret`]); the key travels in clear over the load balancer's TCP
    /// listener, so put a TLS-terminating proxy or API gateway in front for real traffic.
    pub fn internet_facing_load_balancer(mut self) -> Self {
        self.exposure = Exposure::InternetFacingLoadBalancer;
        self
    }

    /// Adds an annotation to the Service.
    pub fn service_annotation(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.service_annotations.insert(key.into(), value.into());
        self
    }

    /// Requests the instance's EFA interfaces and the hugepages EFA needs (multi-node serving).
    pub fn efa(mut self, enabled: bool) -> Self {
        self.efa = enabled;
        self
    }

    /// The server.
    pub fn server(&self) -> &VllmServer {
        &self.server
    }

    /// Object name.
    pub fn object_name(&self) -> &str {
        &self.name
    }

    /// Namespace.
    pub fn object_namespace(&self) -> &str {
        &self.namespace
    }

    /// Instance type (EC2 name).
    pub fn instance_type(&self) -> &str {
        self.instance_type
            .strip_prefix("ml.")
            .unwrap_or(&self.instance_type)
    }

    /// Replicas.
    pub fn replica_count(&self) -> i32 {
        self.replicas
    }

    /// GPUs per replica.
    pub fn gpu_count(&self) -> u32 {
        self.gpus
            .or_else(|| catalog::instance(self.instance_type()).map(|i| i.gpu_count))
            .unwrap_or(1)
    }

    /// The exposure.
    pub fn exposure(&self) -> Exposure {
        self.exposure
    }

    /// Extra Service annotations.
    pub fn service_annotations(&self) -> &std::collections::BTreeMap<String, String> {
        &self.service_annotations
    }

    /// Whether the pods request the instance's EFA devices: when asked, and always for a
    /// replica over several nodes.
    pub fn efa_enabled(&self) -> bool {
        self.efa || self.nodes > 1
    }

    /// Nodes each replica spans (1: a Deployment's pod on one node).
    pub fn nodes(&self) -> u32 {
        self.nodes
    }

    /// What the engine runs per replica with `gpus` GPUs per node: the server's shape, over
    /// [`VllmDeployment::nodes`] pipeline stages when it spans several, with the words of the
    /// multi-node launch among hyperforge's own (checked against the release like the rest).
    pub fn shape(&self, gpus: u32) -> super::ServingShape {
        let mut shape = self.server.shape(gpus);
        if self.nodes > 1 {
            shape.pipeline_parallel = self.nodes;
            shape.nodes_per_replica = self.nodes;
            shape
                .args
                .extend(multi_node_args(self.nodes, NodeRole::Leader));
            shape
                .args
                .extend(multi_node_args(self.nodes, NodeRole::Worker));
            shape.env.extend(
                objects::MULTI_NODE_FABRIC_ENV
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), Some((*v).to_owned()))),
            );
        }
        shape
    }

    /// The image pull policy (`IfNotPresent`, or `Always` when asked).
    pub fn image_pull_policy(&self) -> &'static str {
        if self.always_pull {
            "Always"
        } else {
            "IfNotPresent"
        }
    }

    /// The load balancer's subnets as given ([`VllmDeployment::load_balancer_subnets`]).
    pub fn lb_subnets(&self) -> &[Ref<kind::Subnet>] {
        &self.load_balancer_subnets
    }

    /// The subnets the nodes serving the model launch in: those of the EC2 capacity of its
    /// instance type in `stack` (node groups, Karpenter pools), in the order they were added.
    pub fn serving_subnets(&self, stack: &Stack) -> Vec<Ref<kind::Subnet>> {
        let mut out: Vec<Ref<kind::Subnet>> = Vec::new();
        for placed in super::Placements::new(stack).all() {
            for claim in placed.facts().capacity {
                if claim.launcher == super::Launcher::Ec2
                    && claim.instance_type == self.instance_type
                {
                    for s in claim.subnets {
                        if !out.contains(&s) {
                            out.push(s);
                        }
                    }
                }
            }
        }
        out
    }

    /// The load balancer's subnets: the ones given, or else, for an internal load balancer,
    /// the serving nodes' subnets (so its zones are theirs); none for a ClusterIP Service.
    pub fn effective_lb_subnets(&self, stack: &Stack) -> Vec<Ref<kind::Subnet>> {
        match self.exposure {
            Exposure::ClusterIp => Vec::new(),
            _ if !self.load_balancer_subnets.is_empty() => self.load_balancer_subnets.clone(),
            Exposure::InternalLoadBalancer => self.serving_subnets(stack),
            Exposure::InternetFacingLoadBalancer => Vec::new(),
        }
    }

    /// The in-cluster clients allowed to reach the server.
    pub fn clients(&self) -> &[Client] {
        &self.clients
    }

    /// `HF0426`: a subnet the serving nodes launch in whose zone no given load balancer subnet
    /// is known to share.
    fn check_serving_zones(&self, stack: &Stack, path: &str, ds: &mut Diagnostics) {
        let lb_zones: Vec<ZoneKey> = self
            .load_balancer_subnets
            .iter()
            .filter_map(|s| subnet_facts(stack, s))
            .map(|f| f.zone)
            .collect();
        for serving in self.serving_subnets(stack) {
            let Some(facts) = subnet_facts(stack, &serving) else {
                continue;
            };
            if lb_zones.contains(&facts.zone) {
                continue;
            }
            let fix = if self.exposure == Exposure::InternetFacingLoadBalancer {
                "give a public subnet in that zone too"
            } else {
                "leave `load_balancer_subnets` out: an internal load balancer is then placed in the serving nodes' subnets, and the NetworkPolicy admits exactly their blocks"
            };
            ds.report_field(
                Code::LoadBalancerMissesServingZone,
                path,
                "load_balancer_subnets",
                format!(
                    "the load balancer's subnets may leave out the zone of `{}`, where the nodes serving the model run ({}); when the zones given differ, the pod receives no traffic",
                    facts.name,
                    match &facts.zone {
                        ZoneKey::Input(input) => format!("the zone id given as {input}"),
                        ZoneKey::Given(z) => format!("zone {z}"),
                    }
                ),
                fix,
            );
        }
    }

    /// `HF0427`-`HF0430`: what a replica over several nodes needs (see
    /// [`VllmDeployment::nodes_per_replica`]).
    fn check_multi_node(&self, stack: &Stack, path: &str, ds: &mut Diagnostics) {
        if self.name.len() > gang::GANG_NAME_MAX {
            ds.report_field(
                Code::MultiNodeNameTooLong,
                path,
                "name",
                format!(
                    "`{}` has {} characters; Kueue admits a LeaderWorkerSet of at most {}",
                    self.name,
                    self.name.len(),
                    gang::GANG_NAME_MAX
                ),
                "shorten the deployment's name",
            );
        }
        let unsupported = |ds: &mut Diagnostics, field: &str, message: String, help: &str| {
            ds.report_field(
                Code::MultiNodeReplicaUnsupported,
                path,
                field,
                message,
                help,
            );
        };
        if !NODES_PER_REPLICA.contains(i64::from(self.nodes)) {
            unsupported(
                ds,
                "nodes_per_replica",
                format!("{} nodes per replica", self.nodes),
                "use 1 to 16 nodes per replica (`hyperforge plan` lists the layouts that hold the model)",
            );
            return;
        }
        let Some(instance) = catalog::instance(self.instance_type()) else {
            return; // HF0303, from `validate` above
        };
        if self.gpu_count() != instance.gpu_count {
            unsupported(
                ds,
                "gpus",
                format!(
                    "each node of a multi-node replica is one pipeline stage of all its GPUs; {} of {}'s {} are asked for",
                    self.gpu_count(),
                    self.instance_type(),
                    instance.gpu_count
                ),
                "leave `gpus` out",
            );
        }
        if let Some(release) = self
            .server
            .engine_version()
            .and_then(crate::catalog::engines::vllm)
        {
            if release.multi_node_launch() != crate::catalog::engines::MultiNodeLaunch::Native {
                unsupported(
                    ds,
                    "server.image",
                    format!(
                        "vLLM {} starts a replica over several nodes through Ray only; hyperforge emits vLLM's own launch (`--nnodes`, `--node-rank`, `--master-addr`, `--headless`)",
                        release.version_text()
                    ),
                    "serve with vLLM 0.11.2 or later",
                );
            }
        }
        if instance.efa_max == 0 {
            ds.report_field(
                Code::MultiNodeWithoutEfa,
                path,
                "instance_type",
                format!("{} has no EFA interfaces", self.instance_type()),
                "spread replicas over nodes of an instance type with EFA (`hyperforge catalog instances`)",
            );
        } else {
            let claims: Vec<super::CapacityClaim> = super::Placements::new(stack)
                .all()
                .flat_map(|p| p.facts().capacity)
                .filter(|c| c.instance_type == self.instance_type())
                .collect();
            if let Some(without) = claims.iter().find(|c| !c.efa_interfaces) {
                ds.report_field(
                    Code::MultiNodeWithoutEfa,
                    path,
                    "nodes_per_replica",
                    format!(
                        "the replica spans {} nodes of {}, but `{}` launches them without EFA interfaces: NCCL would fall back to TCP between the nodes",
                        self.nodes,
                        self.instance_type(),
                        without.path
                    ),
                    "launch the nodes from a managed node group with `efa(true)` (stack files: `efa: true`)",
                );
            }
        }
        // Only a stage applied before this deployment's can have installed what it needs.
        let own = stack
            .stage_of(&self.id)
            .map_or(stack.stages().len(), |s| s.index());
        let (mut lws, mut kueue, mut efa) = (false, false, false);
        for stage in &stack.stages()[..own.min(stack.stages().len())] {
            if let crate::app::StageKind::Helm(r) = &stage.kind {
                lws |= r.is_leader_worker_set();
                kueue |= r.is_kueue();
                efa |= r.is_efa_device_plugin();
            }
        }
        let mut missing = Vec::new();
        if !lws {
            missing.push("`lws` (the LeaderWorkerSet controller)");
        }
        if !kueue {
            missing.push("`kueue` (the gang admission of each group)");
        }
        if !efa {
            missing.push("`efa-device-plugin`");
        }
        if !missing.is_empty() {
            ds.report_field(
                Code::MultiNodeControllerMissing,
                path,
                "nodes_per_replica",
                format!(
                    "no stage before this deployment's installs {}: the LeaderWorkerSet or its queue is refused, or its pods stay Pending",
                    missing.join(" or ")
                ),
                "add the missing Helm stages before this deployment's stage",
            );
        }
    }

    pub(crate) fn validate(&self, stack: &Stack, path: &str, ds: &mut Diagnostics) {
        let load_balanced = self.exposure != Exposure::ClusterIp;
        let lb_subnets = self.effective_lb_subnets(stack);
        // Without capacity of its type in a stack that creates the cluster, or with a type the
        // catalog does not know, HF0370 or HF0303 already says what is missing (checked only
        // when no subnet was found: it reads every construct's facts).
        let capacity_reported = || {
            self.exposure == Exposure::InternalLoadBalancer
                && (crate::catalog::instance(&self.instance_type).is_none()
                    || (super::Placements::new(stack)
                        .all()
                        .any(|p| p.facts().eks_cluster.is_some())
                        && !super::Placements::new(stack).all().any(|p| {
                            p.facts()
                                .capacity
                                .iter()
                                .any(|c| c.instance_type == self.instance_type)
                        })))
        };
        if load_balanced && lb_subnets.is_empty() && !capacity_reported() {
            let (message, help) = if self.exposure == Exposure::InternetFacingLoadBalancer {
                (
                    "the internet-facing load balancer's subnets are not given",
                    "pass the network's public subnets: `.load_balancer_subnets(&network.public_subnets)`, or use `.cluster_ip_service()`",
                )
            } else {
                (
                    "the load balancer's subnets are not given, and no node group or Karpenter pool of the stack names the subnets its instance type runs in",
                    "pass the subnets: `.load_balancer_subnets(&network.private_subnets)`, or use `.cluster_ip_service()`",
                )
            };
            ds.report_field(
                Code::LoadBalancerSubnets,
                path,
                "load_balancer_subnets",
                message,
                help,
            );
        }
        if load_balanced && !self.load_balancer_subnets.is_empty() {
            self.check_serving_zones(stack, path, ds);
        }
        if self.nodes != 1 {
            self.check_multi_node(stack, path, ds);
        }
        for subnet in &lb_subnets {
            match subnet_facts(stack, subnet) {
                None => ds.report_field(
                    Code::LoadBalancerSubnets,
                    path,
                    "load_balancer_subnets",
                    format!("`{}` is not a subnet of a network in this stack", subnet.path()),
                    "pass subnets from the handle of a `Network` in the same stack",
                ),
                Some(f) if self.exposure == Exposure::InternetFacingLoadBalancer && !f.public => ds.report_field(
                    Code::LoadBalancerSubnets,
                    path,
                    "load_balancer_subnets",
                    format!("the internet-facing load balancer is placed in `{}`, which has no route to the internet", f.name),
                    "place an internet-facing load balancer in the network's public subnets",
                ),
                Some(_) => {}
            }
        }
        if !load_balanced && !self.load_balancer_subnets.is_empty() {
            ds.report_field(
                Code::LoadBalancerSubnets,
                path,
                "load_balancer_subnets",
                "load balancer subnets are given for a ClusterIP Service, which has no load balancer",
                "remove them, or expose the Service through a load balancer",
            );
        }
        for client in &self.clients {
            let labels_ok = client
                .pod_labels
                .iter()
                .all(|(k, v)| is_label_key(k) && is_label_value(v));
            if !is_dns_label(&client.namespace) || !labels_ok {
                ds.report_field(
                    Code::InvalidKubernetesName,
                    path,
                    "clients",
                    format!(
                        "client namespace `{}` or its pod labels are not valid Kubernetes names",
                        client.namespace
                    ),
                    "namespaces are DNS labels; label keys are `[prefix/]name`, values at most 63 letters, digits, `-`, `_` and `.`",
                );
            }
        }
        for (what, value) in [("object name", &self.name), ("namespace", &self.namespace)] {
            if !is_dns_label(value) {
                ds.report(
                    Code::InvalidKubernetesName,
                    path,
                    format!("`{value}` is not a valid Kubernetes {what}"),
                    "use 1-63 lowercase letters, digits and hyphens",
                );
            }
        }
        let instance = catalog::instance(self.instance_type());
        match instance {
            None => ds.report_field(
                Code::UnknownInstanceType,
                path,
                "instance_type",
                format!(
                    "instance type `{}` is not in the catalog",
                    self.instance_type
                ),
                super::known_gpu_types_help(false),
            ),
            Some(it) => {
                if let Some(gpus) = self.gpus {
                    if gpus > it.gpu_count || !GPU_COUNT.contains(i64::from(gpus)) {
                        ds.report_field(
                            Code::GpuRequestExceedsInstance,
                            path,
                            "gpus",
                            format!(
                                "the Deployment asks for {gpus} GPUs; {} has {}",
                                it.name, it.gpu_count
                            ),
                            format!("request 1 to {} GPUs per replica", it.gpu_count),
                        );
                    }
                }
            }
        }
        if !REPLICAS.contains(i64::from(self.replicas)) {
            ds.report_field(
                Code::InvalidInstanceCount,
                path,
                "replicas",
                format!("{} replicas requested", self.replicas),
                "use at least one replica",
            );
        }
        if let Some(a) = &self.autoscaling {
            a.validate(path, ds);
        }
        let raw_public = self
            .service_annotations
            .get(LB_SCHEME_ANNOTATION)
            .is_some_and(|v| v == "internet-facing");
        if raw_public && self.exposure != Exposure::InternetFacingLoadBalancer {
            ds.report_field(
                Code::PublicServiceWithoutOptIn,
                path,
                "service_annotations",
                format!("the Service annotation `{LB_SCHEME_ANNOTATION}: internet-facing` exposes the model to the internet"),
                "remove the annotation, or ask for it by name with `.internet_facing_load_balancer()`",
            );
        }
        // An unknown instance type (HF0303 above) has no GPU count: the GPU-count rules are
        // skipped rather than run against a guessed one, unless `gpus` states it.
        let gpus = self.gpus.or_else(|| instance.map(|i| i.gpu_count));
        self.server.validate(gpus, path, ds);
    }
}

impl VllmDeployment {
    /// This deployment with its autoscaling's workspace address resolved (see
    /// [`resolve_workspace`]).
    fn with_workspace_address(&self, scope: &mut Scope<'_>) -> VllmDeployment {
        let mut this = self.clone();
        this.autoscaling = resolve_workspace(self.autoscaling.as_ref(), scope);
        this
    }
}

impl Construct for VllmDeployment {
    type Handle = VllmDeploymentHandle;
    const KIND: &'static str = "vllm_deployment";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, _stack: &str) -> VllmDeploymentHandle {
        VllmDeploymentHandle {
            name: self.name.clone(),
            namespace: self.namespace.clone(),
        }
    }

    fn references(&self) -> Vec<AttrRef> {
        self.load_balancer_subnets.iter().map(|s| s.id()).collect()
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        VllmDeployment::validate(self, cx.stack, cx.path, ds);
    }

    /// The Namespace, ServiceAccount, Deployment, Service, PodDisruptionBudget and
    /// NetworkPolicy, in apply order; with autoscaling, KEDA's TriggerAuthentication and
    /// ScaledObject after them.
    fn expand(&self, scope: &mut Scope<'_>) {
        let resolved = self.with_workspace_address(scope);
        let o = objects::deployment(scope.stack(), scope.tags(), &resolved);
        self.server().steps(scope, self.object_namespace());
        self.server().record_staged_bucket(scope);
        scope.add_object(KubeObject::new(&o.namespace));
        scope.add_object(KubeObject::new(&o.service_account));
        if let Some(g) = &o.gang {
            scope.add_object(KubeObject::new(&g.flavor));
            scope.add_object(KubeObject::new(&g.cluster_queue));
            scope.add_object(KubeObject::new(&g.local_queue));
        }
        let workload = match &o.workload {
            objects::Workload::Deployment(deployment) => {
                scope.add_object(KubeObject::new(deployment.as_ref()))
            }
            objects::Workload::Group(group) => scope.add_object(KubeObject::new(group.as_ref())),
        };
        for (rule, reason) in &o.deployment_acknowledgements {
            workload.acknowledge(*rule, *reason);
        }
        scope.add_object(KubeObject::new(&o.service));
        scope.add_object(KubeObject::new(&o.disruption_budget));
        scope.add_object(KubeObject::new(&o.network_policy));
        if let Some(a) = &o.autoscaling {
            scope.add_object(KubeObject::new(&a.trigger_authentication));
            scope.add_object(KubeObject::new(&a.scaled_object));
        }
    }

    fn facts(&self, _cx: &Context<'_>) -> Facts<'_> {
        // Tensor parallelism spans the node's GPUs at most (more is reported as HF0401).
        let on_node = catalog::instance(self.instance_type())
            .map_or(self.gpu_count(), |i| self.gpu_count().min(i.gpu_count));
        Facts {
            served_models: vec![ServedModel {
                shape: self.shape(on_node),
                object_name: self.object_name(),
                namespace: self.object_namespace(),
                server: self.server(),
                instance_type: self.instance_type(),
                gpus: self.gpu_count(),
                replicas: i64::from(self.replica_count()),
                efa_devices: if self.efa_enabled() {
                    catalog::instance(self.instance_type()).map_or(0, |i| i.efa_max)
                } else {
                    0
                },
                hyperpod: false,
                autoscaling: self.autoscaling.as_ref(),
                exposure: self.exposure(),
            }],
            ..Facts::default()
        }
    }
}
