//! Open-weight models: what deployment sizing needs to know about them. Each model is data:
//! parameter groups by storage precision (so mixed-precision checkpoints are sized right),
//! attention layers by kind (for the KV cache), attention heads, experts, context length and
//! the published checkpoint size when known.
//!
//! The catalog is a starting point, not a closed list: a [`Model`] built with [`Model::new`]
//! and its setters can be handed to [`crate::constructs::VllmServer::model_spec`] for any model the
//! catalog does not know.
//!
//! Sources (copied here; nothing is read at run time):
//! - Kimi K3: Hugging Face `moonshotai/Kimi-K3` `config.json` and its shard statistics as
//!   reproduced by public model reports; NVIDIA TensorRT-LLM deployment guide (93 layers, KDA
//!   with every 4th layer MLA, 16 of 896 experts, MXFP4 group 32, BF16 elsewhere). The published
//!   checkpoint is 1,560,936,091,448 bytes in 96 safetensors shards.
//! - Kimi K2: `moonshotai/Kimi-K2-Instruct` `config.json` (FP8 block-quantized, 128 x 128 blocks).
//! - DeepSeek-V3: `deepseek-ai/DeepSeek-V3` `inference/configs/config_671B.json` (FP8 block).
//! - Llama 3.1 70B / 405B: `meta-llama/Llama-3.1-70B-Instruct` and `-405B-Instruct`
//!   `config.json`; the BF16 checkpoints' `model.safetensors.index.json` `total_size`
//!   (141,107,412,992 and 811,706,777,600 bytes, i.e. 2 bytes per parameter).

use std::borrow::Cow;
use std::sync::OnceLock;

/// How a group of parameters is stored in the checkpoint and in GPU memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Precision {
    /// bfloat16: 2 bytes per parameter.
    Bf16,
    /// FP8 (E4M3) with one FP32 scale per 128 x 128 block: 1 + 4/16384 bytes per parameter.
    Fp8Block128,
    /// MXFP4: two E2M1 codes per byte plus one E8M0 scale byte per 32 values, i.e. 4.25 bits
    /// = 0.53125 bytes per parameter.
    Mxfp4,
}

impl Precision {
    /// Bytes per parameter, scales included.
    pub fn bytes_per_parameter(self) -> f64 {
        match self {
            Precision::Bf16 => 2.0,
            Precision::Fp8Block128 => 1.0 + 4.0 / 16384.0,
            Precision::Mxfp4 => 0.53125,
        }
    }

    /// A short name (`BF16`, `FP8`, `MXFP4`).
    pub fn name(self) -> &'static str {
        match self {
            Precision::Bf16 => "BF16",
            Precision::Fp8Block128 => "FP8",
            Precision::Mxfp4 => "MXFP4",
        }
    }
}

/// Parameters stored at one precision (`routed experts`, MXFP4, 2.72 T).
#[derive(Clone, Debug, PartialEq)]
pub struct ParameterGroup {
    /// What the parameters are.
    pub name: Cow<'static, str>,
    /// How many.
    pub parameters: u64,
    /// How they are stored.
    pub precision: Precision,
}

impl ParameterGroup {
    /// Bytes the group occupies.
    pub fn bytes(&self) -> f64 {
        self.parameters as f64 * self.precision.bytes_per_parameter()
    }
}

/// The attention mechanism of a set of layers; it decides what the KV cache holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionKind {
    /// Multi-head latent attention (DeepSeek, Kimi): one compressed latent of
    /// `kv_lora_rank + qk_rope_head_dim` elements per token and layer, shared by all heads.
    Mla {
        /// The latent's rank (`kv_lora_rank`).
        kv_lora_rank: u32,
        /// The decoupled rotary part (`qk_rope_head_dim`).
        qk_rope_head_dim: u32,
    },
    /// Grouped-query attention: keys and values of `kv_heads` heads per token and layer.
    Gqa {
        /// Key/value heads.
        kv_heads: u32,
        /// Dimension of one head.
        head_dim: u32,
    },
    /// Kimi Delta Attention (linear attention): a fixed-size state per sequence, no per-token
    /// cache.
    Kda {
        /// Heads.
        heads: u32,
        /// Dimension of one head (the state is `head_dim x head_dim` per head).
        head_dim: u32,
    },
}

/// `layers` layers of one attention kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionLayers {
    /// Number of layers.
    pub layers: u32,
    /// Their attention.
    pub kind: AttentionKind,
}

/// The mixture-of-experts layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Experts {
    /// Routed experts per MoE layer.
    pub routed: u32,
    /// Routed experts active per token.
    pub active_per_token: u32,
    /// Shared experts per MoE layer.
    pub shared: u32,
    /// Intermediate size of one expert (`moe_intermediate_size`); tensor parallelism splits it.
    pub moe_intermediate_size: u32,
}

/// One model.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// The Hugging Face id (`moonshotai/Kimi-K3`).
    pub hf_id: Cow<'static, str>,
    /// A short display name.
    pub display_name: Cow<'static, str>,
    /// Parameters by precision; their sum is the model's size.
    pub parameter_groups: Vec<ParameterGroup>,
    /// Layers by attention kind.
    pub attention_layers: Vec<AttentionLayers>,
    /// Query attention heads (tensor parallel size must divide it).
    pub attention_heads: u32,
    /// The MoE layout, for mixture-of-experts models.
    pub experts: Option<Experts>,
    /// Maximum context length in tokens.
    pub max_context_tokens: u64,
    /// Size of the published checkpoint in bytes, when known.
    pub checkpoint_bytes: Option<u64>,
}

impl Model {
    /// A model with no parameters or layers yet; add them with the setters.
    pub fn new(
        hf_id: impl Into<Cow<'static, str>>,
        display_name: impl Into<Cow<'static, str>>,
    ) -> Self {
        Model {
            hf_id: hf_id.into(),
            display_name: display_name.into(),
            parameter_groups: Vec::new(),
            attention_layers: Vec::new(),
            attention_heads: 0,
            experts: None,
            max_context_tokens: 0,
            checkpoint_bytes: None,
        }
    }

    /// Adds `parameters` parameters named `name` stored at `precision`.
    pub fn parameters(
        mut self,
        name: impl Into<Cow<'static, str>>,
        parameters: u64,
        precision: Precision,
    ) -> Self {
        self.parameter_groups.push(ParameterGroup {
            name: name.into(),
            parameters,
            precision,
        });
        self
    }

    /// Adds `layers` layers of attention `kind`.
    pub fn attention(mut self, layers: u32, kind: AttentionKind) -> Self {
        self.attention_layers.push(AttentionLayers { layers, kind });
        self
    }

    /// Query attention heads.
    pub fn attention_heads(mut self, heads: u32) -> Self {
        self.attention_heads = heads;
        self
    }

    /// The MoE layout.
    pub fn experts(mut self, experts: Experts) -> Self {
        self.experts = Some(experts);
        self
    }

    /// Maximum context length in tokens.
    pub fn max_context_tokens(mut self, tokens: u64) -> Self {
        self.max_context_tokens = tokens;
        self
    }

    /// The published checkpoint size in bytes.
    pub fn checkpoint_bytes(mut self, bytes: u64) -> Self {
        self.checkpoint_bytes = Some(bytes);
        self
    }

    /// Total parameters over every group.
    pub fn total_parameters(&self) -> u64 {
        self.parameter_groups.iter().map(|g| g.parameters).sum()
    }

    /// The weights' size estimated from the parameter groups, in bytes (rounded up).
    pub fn estimated_weight_bytes(&self) -> u64 {
        self.parameter_groups
            .iter()
            .map(ParameterGroup::bytes)
            .sum::<f64>()
            .ceil() as u64
    }

    /// The weights' size: the published checkpoint when known, else the estimate.
    pub fn weight_bytes(&self) -> u64 {
        self.checkpoint_bytes
            .unwrap_or_else(|| self.estimated_weight_bytes())
    }

    /// Whether any parameters are stored at `precision`.
    pub fn uses(&self, precision: Precision) -> bool {
        self.parameter_groups
            .iter()
            .any(|g| g.precision == precision && g.parameters > 0)
    }
}

/// Kimi K3: routed experts = 92 MoE layers x 896 experts x 3 matrices x 3584 x 3072 (latent
/// MoE, `routed_expert_hidden_size` 3584, `moe_intermediate_size` 3072) in MXFP4; everything
/// else BF16: about 56.7 B text parameters (24 MLA and 69 KDA attention layers, the dense
/// layer, shared experts, routers, latent projections, embeddings and LM head) and the
/// multimodal tower and projector, whose count is the remainder to the published checkpoint
/// (0.54 B, rounded to 10 M).
fn kimi_k3() -> Model {
    Model::new("moonshotai/Kimi-K3", "Kimi K3")
        .parameters(
            "routed experts",
            92 * 896 * 3 * 3584 * 3072,
            Precision::Mxfp4,
        )
        .parameters(
            "attention, dense layer, shared experts, routers, embeddings, LM head",
            56_700_000_000,
            Precision::Bf16,
        )
        .parameters("vision tower and projector", 540_000_000, Precision::Bf16)
        .attention(
            24,
            AttentionKind::Mla {
                kv_lora_rank: 512,
                qk_rope_head_dim: 64,
            },
        )
        .attention(
            69,
            AttentionKind::Kda {
                heads: 96,
                head_dim: 128,
            },
        )
        .attention_heads(96)
        .experts(Experts {
            routed: 896,
            active_per_token: 16,
            shared: 2,
            moe_intermediate_size: 3072,
        })
        .max_context_tokens(1_048_576)
        .checkpoint_bytes(1_560_936_091_448)
}

/// MLA attention parameters of one DeepSeek-V3-style layer with `heads` heads: q_a (7168 x
/// 1536), q_b (1536 x heads x 192), kv_a (7168 x 576), kv_b (512 x heads x 256), o (heads x 128
/// x 7168).
const fn mla_layer_parameters(heads: u64) -> u64 {
    7168 * 1536 + 1536 * heads * 192 + 7168 * 576 + 512 * heads * 256 + heads * 128 * 7168
}

/// Kimi K2: 61 layers (first dense), 384 routed experts of intermediate size 2048, one shared
/// expert, 64 MLA heads, vocabulary 163,840. Linear layers FP8 block-quantized; embeddings, LM
/// head and routers BF16. No byte-exact published size was available (about 1 TB).
fn kimi_k2() -> Model {
    let moe_layers = 60;
    Model::new("moonshotai/Kimi-K2-Instruct", "Kimi K2")
        .parameters(
            "routed experts",
            moe_layers * 384 * 3 * 7168 * 2048,
            Precision::Fp8Block128,
        )
        .parameters(
            "attention, dense layer, shared experts",
            61 * mla_layer_parameters(64) + 3 * 7168 * 18_432 + moe_layers * 3 * 7168 * 2048,
            Precision::Fp8Block128,
        )
        .parameters(
            "embeddings, LM head, routers",
            2 * 163_840 * 7168 + moe_layers * 384 * 7168,
            Precision::Bf16,
        )
        .attention(
            61,
            AttentionKind::Mla {
                kv_lora_rank: 512,
                qk_rope_head_dim: 64,
            },
        )
        .attention_heads(64)
        .experts(Experts {
            routed: 384,
            active_per_token: 8,
            shared: 1,
            moe_intermediate_size: 2048,
        })
        .max_context_tokens(131_072)
}

/// DeepSeek-V3 (671 B): 61 layers (3 dense), 256 routed experts of intermediate size 2048, one
/// shared expert, 128 MLA heads, vocabulary 129,280. FP8 block-quantized linear layers; BF16
/// embeddings, LM head and routers. The multi-token-prediction module (14 B, loaded only for
/// speculative decoding) is not counted. No byte-exact published size (about 690 GB).
fn deepseek_v3() -> Model {
    let moe_layers = 58;
    Model::new("deepseek-ai/DeepSeek-V3", "DeepSeek-V3")
        .parameters(
            "routed experts",
            moe_layers * 256 * 3 * 7168 * 2048,
            Precision::Fp8Block128,
        )
        .parameters(
            "attention, dense layers, shared experts",
            61 * mla_layer_parameters(128) + 3 * 3 * 7168 * 18_432 + moe_layers * 3 * 7168 * 2048,
            Precision::Fp8Block128,
        )
        .parameters(
            "embeddings, LM head, routers",
            2 * 129_280 * 7168 + moe_layers * 256 * 7168,
            Precision::Bf16,
        )
        .attention(
            61,
            AttentionKind::Mla {
                kv_lora_rank: 512,
                qk_rope_head_dim: 64,
            },
        )
        .attention_heads(128)
        .experts(Experts {
            routed: 256,
            active_per_token: 8,
            shared: 1,
            moe_intermediate_size: 2048,
        })
        .max_context_tokens(131_072)
}

/// A dense Llama 3.1 model in BF16: per layer q and o (`hidden^2` each), k and v (`hidden x
/// kv_heads x 128` each), the SwiGLU MLP (3 x `hidden x intermediate`) and two norms; untied
/// embeddings and LM head over a 128,256-token vocabulary; a final norm.
fn llama_3_1(
    hf_id: &'static str,
    display_name: &'static str,
    layers: u32,
    hidden: u64,
    intermediate: u64,
    heads: u32,
    checkpoint_bytes: u64,
) -> Model {
    let kv_heads: u64 = 8;
    let per_layer =
        2 * hidden * hidden + 2 * hidden * kv_heads * 128 + 3 * hidden * intermediate + 2 * hidden;
    Model::new(hf_id, display_name)
        .parameters(
            "transformer layers",
            u64::from(layers) * per_layer + hidden,
            Precision::Bf16,
        )
        .parameters(
            "embeddings and LM head",
            2 * 128_256 * hidden,
            Precision::Bf16,
        )
        .attention(
            layers,
            AttentionKind::Gqa {
                kv_heads: 8,
                head_dim: 128,
            },
        )
        .attention_heads(heads)
        .max_context_tokens(131_072)
        .checkpoint_bytes(checkpoint_bytes)
}

fn build_catalog() -> Vec<Model> {
    vec![
        kimi_k3(),
        kimi_k2(),
        deepseek_v3(),
        llama_3_1(
            "meta-llama/Llama-3.1-70B-Instruct",
            "Llama 3.1 70B",
            80,
            8192,
            28_672,
            64,
            141_107_412_992,
        ),
        llama_3_1(
            "meta-llama/Llama-3.1-405B-Instruct",
            "Llama 3.1 405B",
            126,
            16_384,
            53_248,
            128,
            811_706_777_600,
        ),
    ]
}

/// Every model in the catalog, by Hugging Face id (what `VllmServer::new` and
/// `catalog::model` take). A model outside it is described with
/// [`VllmServer::model_spec`](crate::constructs::VllmServer::model_spec).
///
#[doc = include_str!("../../docs/models.md")]
pub fn models() -> &'static [Model] {
    static MODELS: OnceLock<Vec<Model>> = OnceLock::new();
    MODELS.get_or_init(build_catalog)
}

/// Looks a model up by its Hugging Face id (case-insensitive).
pub fn model(hf_id: &str) -> Option<&'static Model> {
    models()
        .iter()
        .find(|m| m.hf_id.eq_ignore_ascii_case(hf_id))
}

/// The catalog as a Markdown table (`docs/models.md`, in the rustdoc of [`models`]).
pub fn models_markdown() -> String {
    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
    let mut out = String::from(
        "| Hugging Face id | name | parameters | experts (active/routed) | weights GiB | context |\n|---|---|---|---|---|---|\n",
    );
    for m in models() {
        let params = m.total_parameters() as f64;
        let params = if params >= 1e12 {
            format!("{:.2} T", params / 1e12)
        } else {
            format!("{:.1} B", params / 1e9)
        };
        let experts = m.experts.as_ref().map_or_else(
            || "-".to_owned(),
            |e| format!("{}/{}", e.active_per_token, e.routed),
        );
        out.push_str(&format!(
            "| `{}` | {} | {params} | {experts} | {:.1} | {} |\n",
            m.hf_id,
            m.display_name,
            m.weight_bytes() as f64 / GIB,
            m.max_context_tokens
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relative_error(estimate: u64, published: u64) -> f64 {
        (estimate as f64 - published as f64).abs() / published as f64
    }

    #[test]
    fn kimi_k3_weight_estimate_matches_the_published_checkpoint() {
        let k3 = model("moonshotai/Kimi-K3").unwrap();
        assert_eq!(k3.checkpoint_bytes, Some(1_560_936_091_448));
        let routed = &k3.parameter_groups[0];
        assert_eq!(routed.parameters, 2_722_740_830_208);
        assert_eq!(routed.precision, Precision::Mxfp4);
        let estimate = k3.estimated_weight_bytes();
        assert!(
            relative_error(estimate, 1_560_936_091_448) < 0.01,
            "estimate {estimate} bytes"
        );
        // 2.78 T parameters (the "2.8 T" of the model card).
        assert!((2.77e12..2.79e12).contains(&(k3.total_parameters() as f64)));
    }

    #[test]
    fn every_published_size_is_reproduced_within_one_percent() {
        for m in models() {
            if let Some(published) = m.checkpoint_bytes {
                let error = relative_error(m.estimated_weight_bytes(), published);
                assert!(error < 0.01, "{}: {:.3} %", m.hf_id, error * 100.0);
            }
        }
    }

    #[test]
    fn parameter_counts_match_the_model_cards() {
        let count = |id: &str| model(id).unwrap().total_parameters();
        assert_eq!(count("meta-llama/Llama-3.1-70B-Instruct"), 70_553_706_496);
        assert_eq!(count("meta-llama/Llama-3.1-405B-Instruct"), 405_853_388_800);
        let v3 = count("deepseek-ai/DeepSeek-V3") as f64;
        assert!((670e9..672e9).contains(&v3), "{v3}");
        let k2 = count("moonshotai/Kimi-K2-Instruct") as f64;
        assert!((1.02e12..1.04e12).contains(&k2), "{k2}");
    }

    #[test]
    fn catalog_ids_are_unique() {
        let mut ids: Vec<_> = models().iter().map(|m| m.hf_id.to_lowercase()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), models().len());
        assert!(model("MOONSHOTAI/kimi-k3").is_some());
    }
}
