//! GPU memory arithmetic for serving a model with vLLM: the weights' size (mixed precision),
//! each GPU's share at a tensor parallel size, the memory vLLM may use at a
//! `gpu_memory_utilization`, the headroom left after the weights, the KV cache per token and
//! the context the headroom buys.
//!
//! Units: bytes in the API; every figure shown to people is in GiB (2^30 bytes), and GPU
//! memory comes from the catalog in MiB (2^20 bytes) as EC2 reports it.
//!
//! Model of the split (vLLM): tensor parallelism divides the weights evenly over the ranks.
//! The MLA latent cache is replicated on every rank unless decode context parallelism (DCP)
//! shards it; the GQA cache is split by KV heads (replicated once TP exceeds the KV heads).
//! The headroom must also hold activations, CUDA graphs, NCCL buffers and linear-attention
//! state, so the context it buys is an upper bound.

use super::instances::InstanceType;
use super::models::{AttentionKind, Model};

/// Bytes in a GiB.
pub const GIB: f64 = 1_073_741_824.0;

/// Bytes in a MiB.
pub const MIB: u64 = 1_048_576;

/// Bytes to GiB.
pub fn gib(bytes: f64) -> f64 {
    bytes / GIB
}

/// Room beyond the weights a serving node's pod storage keeps for container images, logs and
/// partial downloads (the EKS Deployment's ephemeral-storage limit adds the same).
pub const POD_STORAGE_EXTRA_BYTES: u64 = 100 * (1 << 30);

/// The node-local storage a node serving `weight_bytes` of weights needs for its pod volumes
/// and images: the weights plus a tenth (a download's temporary files), plus
/// [`POD_STORAGE_EXTRA_BYTES`].
pub fn pod_storage_needed(weight_bytes: u64) -> u64 {
    weight_bytes
        .saturating_add(weight_bytes / 10)
        .saturating_add(POD_STORAGE_EXTRA_BYTES)
}

/// The memory picture of one model on one instance.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryPlan {
    /// The instance type's EC2 name.
    pub instance: &'static str,
    /// Tensor parallel size.
    pub tensor_parallel: u32,
    /// Pipeline parallel size (1: one stage; each stage holds its share of the layers and
    /// their KV cache).
    pub pipeline_parallel: u32,
    /// Decode context parallel size (1: off).
    pub decode_context_parallel: u32,
    /// The fraction of GPU memory vLLM may use.
    pub gpu_memory_utilization: f64,
    /// The whole model's weights, bytes.
    pub weight_bytes: u64,
    /// One GPU's share of the weights, bytes.
    pub weight_bytes_per_gpu: u64,
    /// One GPU's memory, bytes.
    pub gpu_memory_bytes: u64,
    /// What vLLM may use of it, bytes.
    pub usable_bytes_per_gpu: u64,
    /// Usable minus weights, bytes (negative: the weights do not fit).
    pub headroom_bytes_per_gpu: i64,
    /// KV cache bytes per token on one GPU (0: the model has no per-token cache).
    pub kv_bytes_per_token_per_gpu: u64,
}

impl MemoryPlan {
    /// The plan for `model` on `instance` at tensor parallel size `tp` (at least 1), decode
    /// context parallel size `dcp` (at least 1), `gpu_memory_utilization` and a KV cache of
    /// `kv_dtype_bytes` per element.
    pub fn new(
        model: &Model,
        instance: &'static InstanceType,
        tp: u32,
        dcp: u32,
        gpu_memory_utilization: f64,
        kv_dtype_bytes: u32,
    ) -> Self {
        Self::pipelined(
            model,
            instance,
            tp,
            1,
            dcp,
            gpu_memory_utilization,
            kv_dtype_bytes,
        )
    }

    /// [`MemoryPlan::new`] over `pp` pipeline stages (at least 1) of `tp` ranks each: the
    /// weights split evenly over the `tp x pp` ranks, and each stage keeps the KV cache of its
    /// own layers.
    pub fn pipelined(
        model: &Model,
        instance: &'static InstanceType,
        tp: u32,
        pp: u32,
        dcp: u32,
        gpu_memory_utilization: f64,
        kv_dtype_bytes: u32,
    ) -> Self {
        let tp = tp.max(1);
        let pp = pp.max(1);
        let dcp = dcp.max(1);
        let weight_bytes = model.weight_bytes();
        let weight_bytes_per_gpu = weight_bytes.div_ceil(u64::from(tp) * u64::from(pp));
        let gpu_memory_bytes = instance.gpu_memory_mib * MIB;
        let usable =
            (gpu_memory_bytes as f64 * gpu_memory_utilization.clamp(0.0, 1.0)).floor() as u64;
        let headroom = i64::try_from(usable).unwrap_or(i64::MAX)
            - i64::try_from(weight_bytes_per_gpu).unwrap_or(i64::MAX);
        MemoryPlan {
            instance: instance.name,
            tensor_parallel: tp,
            pipeline_parallel: pp,
            decode_context_parallel: dcp,
            gpu_memory_utilization,
            weight_bytes,
            weight_bytes_per_gpu,
            gpu_memory_bytes,
            usable_bytes_per_gpu: usable,
            headroom_bytes_per_gpu: headroom,
            kv_bytes_per_token_per_gpu: kv_cache_bytes_per_token_per_gpu(
                model,
                tp,
                dcp,
                kv_dtype_bytes,
            )
            .div_ceil(u64::from(pp)),
        }
    }

    /// Whether the weights fit in the usable memory.
    pub fn fits(&self) -> bool {
        self.headroom_bytes_per_gpu > 0
    }

    /// Headroom per GPU in GiB (negative: the shortfall).
    pub fn headroom_gib(&self) -> f64 {
        gib(self.headroom_bytes_per_gpu as f64)
    }

    /// Tokens of KV cache the headroom holds on each GPU (an upper bound: activations and
    /// buffers come out of the same headroom). `None` when the model keeps no per-token cache.
    pub fn kv_tokens_in_headroom(&self) -> Option<u64> {
        if self.kv_bytes_per_token_per_gpu == 0 {
            return None;
        }
        let headroom = u64::try_from(self.headroom_bytes_per_gpu.max(0)).unwrap_or(0);
        Some(headroom / self.kv_bytes_per_token_per_gpu)
    }

    /// Full-length sequences of `context_tokens` the headroom holds at once (upper bound).
    pub fn concurrent_sequences(&self, context_tokens: u64) -> Option<u64> {
        let per_sequence = self
            .kv_bytes_per_token_per_gpu
            .checked_mul(context_tokens)?;
        if per_sequence == 0 {
            return None;
        }
        let headroom = u64::try_from(self.headroom_bytes_per_gpu.max(0)).unwrap_or(0);
        Some(headroom / per_sequence)
    }

    /// The parallel layout, as messages name it: `TP 8`, or `TP 8 x PP 2` over pipeline
    /// stages.
    pub fn layout(&self) -> String {
        if self.pipeline_parallel > 1 {
            format!(
                "TP {} x PP {}",
                self.tensor_parallel, self.pipeline_parallel
            )
        } else {
            format!("TP {}", self.tensor_parallel)
        }
    }

    /// One line with the numbers: weights per GPU, usable memory, headroom, all in GiB.
    pub fn summary(&self) -> String {
        let layout = self.layout();
        format!(
            "{:.1} GiB of weights per GPU at {layout} vs {:.1} GiB usable ({:.1} GiB x {:.2}); headroom {:+.1} GiB per GPU",
            gib(self.weight_bytes_per_gpu as f64),
            gib(self.usable_bytes_per_gpu as f64),
            gib(self.gpu_memory_bytes as f64),
            self.gpu_memory_utilization,
            self.headroom_gib(),
        )
    }
}

/// KV cache bytes per token held by one GPU.
///
/// MLA: `(kv_lora_rank + qk_rope_head_dim) x layers x dtype bytes`, replicated on every TP rank
/// and divided by the DCP size. GQA: `2 x layers x kv_heads x head_dim x dtype bytes`, divided
/// by TP (each rank holds `ceil(kv_heads / TP)` heads). KDA layers keep a per-sequence state
/// instead and add nothing per token.
pub fn kv_cache_bytes_per_token_per_gpu(model: &Model, tp: u32, dcp: u32, dtype_bytes: u32) -> u64 {
    let tp = u64::from(tp.max(1));
    let dcp = u64::from(dcp.max(1));
    let bytes = u64::from(dtype_bytes);
    model
        .attention_layers
        .iter()
        .map(|l| {
            let layers = u64::from(l.layers);
            match l.kind {
                AttentionKind::Mla {
                    kv_lora_rank,
                    qk_rope_head_dim,
                } => ((u64::from(kv_lora_rank) + u64::from(qk_rope_head_dim)) * layers * bytes)
                    .div_ceil(dcp),
                AttentionKind::Gqa { kv_heads, head_dim } => {
                    2 * layers * u64::from(kv_heads).div_ceil(tp) * u64::from(head_dim) * bytes
                }
                AttentionKind::Kda { .. } => 0,
            }
        })
        .sum()
}

/// Catalog instances on which `model` fits on one node with tensor parallelism over all of its
/// GPUs at `gpu_memory_utilization`, cheapest first (unpriced last), with their plans.
pub fn instances_that_fit(model: &Model, gpu_memory_utilization: f64) -> Vec<MemoryPlan> {
    let mut fitting: Vec<(&'static InstanceType, MemoryPlan)> = super::instances()
        .iter()
        .filter(|i| model.attention_heads == 0 || model.attention_heads.is_multiple_of(i.gpu_count))
        .map(|i| {
            (
                i,
                MemoryPlan::new(model, i, i.gpu_count, 1, gpu_memory_utilization, 2),
            )
        })
        .filter(|(_, p)| p.fits())
        .collect();
    fitting.sort_by(|(a, _), (b, _)| {
        let price = |i: &InstanceType| i.on_demand_usd_per_hour_us_east_1.unwrap_or(f64::INFINITY);
        price(a)
            .total_cmp(&price(b))
            .then_with(|| a.name.cmp(b.name))
    });
    fitting.into_iter().map(|(_, p)| p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{instance, model};

    fn k3_on(name: &str) -> MemoryPlan {
        let k3 = model("moonshotai/Kimi-K3").unwrap();
        MemoryPlan::new(k3, instance(name).unwrap(), 8, 1, 0.90, 2)
    }

    #[test]
    fn kimi_k3_per_gpu_share_at_tp8() {
        let p = k3_on("p6-b300.48xlarge");
        // 1,560,936,091,448 / 8 bytes = 181.7 GiB.
        assert!((gib(p.weight_bytes_per_gpu as f64) - 181.72).abs() < 0.01);
        // 275,040 MiB x 0.90 = 241.7 GiB usable; headroom 60.0 GiB.
        assert!((gib(p.usable_bytes_per_gpu as f64) - 241.73).abs() < 0.01);
        assert!(
            (p.headroom_gib() - 60.0).abs() < 0.1,
            "{}",
            p.headroom_gib()
        );
        assert!(p.fits());
    }

    #[test]
    fn kimi_k3_does_not_fit_b200_or_h200() {
        let b200 = k3_on("p6-b200.48xlarge");
        assert!(!b200.fits());
        assert!(
            (b200.headroom_gib() + 20.6).abs() < 0.1,
            "{}",
            b200.headroom_gib()
        );
        let p5en = k3_on("p5en.48xlarge");
        assert!(
            (p5en.headroom_gib() + 54.8).abs() < 0.1,
            "{}",
            p5en.headroom_gib()
        );
    }

    #[test]
    fn kv_cache_per_token() {
        let k3 = model("moonshotai/Kimi-K3").unwrap();
        // 24 MLA layers x 576 x 2 bytes, replicated on every rank.
        assert_eq!(kv_cache_bytes_per_token_per_gpu(k3, 8, 1, 2), 27_648);
        assert_eq!(kv_cache_bytes_per_token_per_gpu(k3, 8, 8, 2), 3_456);
        let v3 = model("deepseek-ai/DeepSeek-V3").unwrap();
        assert_eq!(kv_cache_bytes_per_token_per_gpu(v3, 8, 1, 2), 70_272);
        let llama = model("meta-llama/Llama-3.1-70B-Instruct").unwrap();
        // 2 x 80 x 8 x 128 x 2 = 327,680 bytes, split over 8 ranks.
        assert_eq!(kv_cache_bytes_per_token_per_gpu(llama, 1, 1, 2), 327_680);
        assert_eq!(kv_cache_bytes_per_token_per_gpu(llama, 8, 1, 2), 40_960);
        // 60 GiB of headroom holds about 2.33 M tokens of K3 cache per GPU.
        let tokens = k3_on("p6-b300.48xlarge").kv_tokens_in_headroom().unwrap();
        assert!((2_300_000..2_360_000).contains(&tokens), "{tokens}");
    }

    #[test]
    fn only_b300_fits_kimi_k3_on_one_node() {
        let k3 = model("moonshotai/Kimi-K3").unwrap();
        let fits: Vec<_> = instances_that_fit(k3, 0.90)
            .iter()
            .map(|p| p.instance)
            .collect();
        assert_eq!(fits, ["p6-b300.48xlarge"]);
    }
}
