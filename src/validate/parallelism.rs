//! Parallelism rules that depend on the model: attention heads divisible by the tensor
//! parallel size (`HF0502`), tensor parallel size a multiple of the decode context parallel
//! size (`HF0503`), and MXFP4 expert slices made of whole 32-value scale groups (`HF0504`).
//! The instance-side rule (TP a power of two no larger than the node's GPUs, `HF0401`) is
//! checked with the server in `constructs::vllm`.

use crate::catalog::{Model, Precision};
use crate::constructs::ServingShape;
use crate::diagnostics::{Code, Diagnostics};

/// The MXFP4 scale group: one E8M0 scale per 32 values.
pub const MXFP4_GROUP: u32 = 32;

/// Tensor parallel sizes (powers of two up to `max`) that divide `heads`.
fn dividing_sizes(heads: u32, max: u32) -> Vec<String> {
    (0..=max.max(1).ilog2())
        .map(|k| 1u32 << k)
        .filter(|tp| heads.is_multiple_of(*tp))
        .map(|tp| tp.to_string())
        .collect()
}

/// Checks `model` served as `shape` (its tensor parallel size at least 1).
pub fn check(model: &Model, shape: &ServingShape, path: &str, ds: &mut Diagnostics) {
    let tp = shape.tensor_parallel.max(1);
    let heads = model.attention_heads;
    if heads > 0 && !heads.is_multiple_of(tp) {
        ds.report_field(
            Code::AttentionHeadsNotDivisible,
            path,
            "tensor_parallel_size",
            format!(
                "{} has {heads} attention heads, not divisible by tensor parallel size {tp} ({heads} / {tp} = {:.2})",
                model.display_name,
                f64::from(heads) / f64::from(tp)
            ),
            format!(
                "use a tensor parallel size that divides {heads}: {}",
                dividing_sizes(heads, 64).join(", ")
            ),
        );
    }
    let dcp = shape.decode_context_parallel;
    if !crate::constructs::vllm::GPU_COUNT.contains(i64::from(dcp)) || !tp.is_multiple_of(dcp) {
        ds.report_field(
            Code::InvalidDecodeContextParallelSize,
            path,
            "decode_context_parallel_size",
            format!(
                "tensor parallel size {tp} is not a multiple of decode context parallel size {dcp}"
            ),
            format!("use a decode context parallel size that divides {tp} (1 turns it off)"),
        );
    }
    if let Some(experts) = model.experts {
        let inter = experts.moe_intermediate_size;
        if model.uses(Precision::Mxfp4)
            && (!inter.is_multiple_of(tp) || !(inter / tp).is_multiple_of(MXFP4_GROUP))
        {
            let fitting: Vec<String> = (0..=6)
                .map(|k| 1u32 << k)
                .filter(|t| inter.is_multiple_of(*t) && (inter / t).is_multiple_of(MXFP4_GROUP))
                .map(|t| t.to_string())
                .collect();
            ds.report_field(
                Code::Mxfp4ShardGranularity,
                path,
                "tensor_parallel_size",
                format!(
                    "{}'s MXFP4 experts (moe_intermediate_size {inter}) split over TP {tp} give {:.1} values per rank, not a multiple of the {MXFP4_GROUP}-value scale group",
                    model.display_name,
                    f64::from(inter) / f64::from(tp)
                ),
                format!("use a tensor parallel size of {}", fitting.join(", ")),
            );
        }
    }
}
