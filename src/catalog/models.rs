//! Open-weight models: what deployment sizing needs to know about them.
//!
//! Kimi K3: 2.8 T parameters (896 routed experts, 16 active), routed experts in MXFP4 and the
//! rest BF16; the published checkpoint is 1,560,936,091,448 bytes in 96 safetensors shards
//! (Hugging Face `moonshotai/Kimi-K3`, as reproduced by public model reports).

/// One model.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// The Hugging Face id (`moonshotai/Kimi-K3`).
    pub hf_id: &'static str,
    /// A short display name.
    pub display_name: &'static str,
    /// Total parameters.
    pub total_parameters: u64,
    /// Attention heads (tensor parallel size must divide it).
    pub attention_heads: u32,
    /// Maximum context length in tokens.
    pub max_context_tokens: u64,
    /// Size of the published checkpoint in bytes, when known.
    pub checkpoint_bytes: Option<u64>,
}

static MODELS: &[Model] = &[Model {
    hf_id: "moonshotai/Kimi-K3",
    display_name: "Kimi K3",
    total_parameters: 2_800_000_000_000,
    attention_heads: 96,
    max_context_tokens: 1_048_576,
    checkpoint_bytes: Some(1_560_936_091_448),
}];

/// Every model in the catalog.
pub fn models() -> &'static [Model] {
    MODELS
}

/// Looks a model up by its Hugging Face id (case-insensitive).
pub fn model(hf_id: &str) -> Option<&'static Model> {
    MODELS.iter().find(|m| m.hf_id.eq_ignore_ascii_case(hf_id))
}

#[cfg(test)]
mod tests {
    #[test]
    fn kimi_k3_checkpoint_size() {
        let k3 = super::model("moonshotai/Kimi-K3").unwrap();
        assert_eq!(k3.checkpoint_bytes, Some(1_560_936_091_448));
        assert_eq!(k3.attention_heads % 8, 0);
    }
}
