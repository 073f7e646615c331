//! Memory rules: the weights must fit the GPUs at the tensor parallel size (`HF0501`), a
//! sequence at `max_model_len` must fit the model's context (`HF0508`) and the KV cache
//! headroom (`HF0509`), and an instance far larger than needed is reported when a cheaper
//! catalog type would do (`HF0505`). The arithmetic is `catalog::memory`; figures are GiB
//! (2^30 bytes).

use crate::catalog::memory::{gib, instances_that_fit, MemoryPlan};
use crate::catalog::{self, InstanceType, Model};
use crate::constructs::ServingShape;
use crate::diagnostics::{Code, Diagnostic, Diagnostics};

/// KV cache element size assumed for the checks: BF16 (`--kv-cache-dtype auto` on BF16
/// models).
pub const KV_DTYPE_BYTES: u32 = 2;

/// A smaller instance is only suggested when it keeps at least this fraction of its usable
/// memory free after the weights (room for activations, CUDA graphs and a useful KV cache).
pub const SUGGESTION_MIN_HEADROOM_FRACTION: f64 = 0.10;

fn price(i: &InstanceType) -> String {
    i.on_demand_usd_per_hour_us_east_1.map_or_else(
        || "no published on-demand price".to_owned(),
        |p| format!("${p:.2}/h on demand in us-east-1"),
    )
}

fn weights_note(model: &Model, plan: &MemoryPlan) -> String {
    let source = if model.checkpoint_bytes.is_some() {
        "published checkpoint"
    } else {
        "estimated from parameter groups"
    };
    let groups: Vec<String> = model
        .parameter_groups
        .iter()
        .map(|g| {
            format!(
                "{} {:.1} B {} = {:.1} GiB",
                g.name,
                g.parameters as f64 / 1e9,
                g.precision.name(),
                gib(g.bytes())
            )
        })
        .collect();
    format!(
        "{} weights: {:.1} GiB ({source}); {}",
        model.display_name,
        gib(plan.weight_bytes as f64),
        groups.join("; ")
    )
}

/// Where a served model runs: the stack's region, the server's construct path, and whether
/// HyperPod launches its instances (messages then name `ml.` types, else EC2 types).
#[derive(Clone, Copy, Debug)]
pub struct Placement<'a> {
    /// The stack's region.
    pub region: &'a str,
    /// The server's construct path.
    pub path: &'a str,
    /// Served through the HyperPod inference operator.
    pub hyperpod: bool,
}

/// Checks `model` served as `shape` on `instance` (its tensor parallel size 1 to the
/// instance's GPU count) where `at` says.
pub fn check(
    model: &Model,
    shape: &ServingShape,
    instance: &'static InstanceType,
    at: Placement<'_>,
    ds: &mut Diagnostics,
) {
    let tp = shape.tensor_parallel.max(1);
    let Placement { path, hyperpod, .. } = at;
    let name = |i: &InstanceType| {
        if hyperpod {
            i.ml_name()
        } else {
            i.name.to_owned()
        }
    };
    let util = shape.gpu_memory_utilization;
    if !crate::constructs::vllm::GPU_MEMORY_UTILIZATION.contains(util) {
        return; // reported as HF0411
    }
    let dcp = shape.decode_context_parallel.max(1);
    let plan = MemoryPlan::pipelined(
        model,
        instance,
        tp,
        shape.pipeline_parallel,
        dcp,
        util,
        KV_DTYPE_BYTES,
    );
    let context = shape.max_model_len;
    if let Some(len) = context {
        if model.max_context_tokens > 0 && len > model.max_context_tokens {
            ds.report_field(
                Code::ContextLengthExceedsModel,
                path,
                "max_model_len",
                format!(
                    "max model length {len} exceeds {}'s context length of {} tokens",
                    model.display_name, model.max_context_tokens
                ),
                format!("set `.max_model_len({})` or less", model.max_context_tokens),
            );
        }
    }
    if !plan.fits() {
        let fitting = instances_that_fit(model, util);
        let help = if fitting.is_empty() {
            // The planner's smallest layouts: the same arithmetic across nodes.
            let mut request = crate::catalog::plan::PlanRequest::new(model, at.region);
            request.gpu_memory_utilization = util;
            request.context_tokens = context;
            let plan = crate::catalog::plan::plan(&request);
            let smallest: Vec<String> = plan
                .minimum_per_instance_type()
                .iter()
                .take(3)
                .map(|c| c.layout.to_string())
                .collect();
            let layouts = if smallest.is_empty() {
                "none of up to 4 nodes per replica does either".to_owned()
            } else {
                format!("the smallest multi-node layouts: {}", smallest.join("; "))
            };
            format!(
                "no single catalog instance holds {} at {util:.2}: it needs several nodes per replica, or a smaller quantization; `hyperforge plan {} --region {}` lists every layout ({layouts})",
                model.display_name, model.hf_id, at.region
            )
        } else {
            let list: Vec<String> = fitting
                .iter()
                .filter_map(|p| catalog::instance(p.instance).map(|i| (i, p)))
                .map(|(i, p)| {
                    let regions = if !hyperpod {
                        if i.ec2_regions.is_empty() {
                            "EC2 regions not listed".to_owned()
                        } else {
                            format!("EC2 in {}", i.ec2_regions.join(", "))
                        }
                    } else if i.hyperpod_regions.is_empty() {
                        "no HyperPod region listed".to_owned()
                    } else {
                        format!("HyperPod in {}", i.hyperpod_regions.join(", "))
                    };
                    format!(
                        "{} (TP {}, {:+.1} GiB headroom per GPU; {regions})",
                        name(i),
                        p.tensor_parallel,
                        p.headroom_gib()
                    )
                })
                .collect();
            format!(
                "instances that hold it on one node at {util:.2}: {} (`hyperforge plan {} --region {}` lists every layout)",
                list.join("; "),
                model.hf_id,
                at.region
            )
        };
        ds.push(
            Diagnostic::new(
                Code::ModelDoesNotFit,
                path,
                format!(
                    "{} does not fit {} at {}: {:.1} GiB of weights per GPU, {:.1} GiB usable ({:.1} GiB x {util:.2}), short by {:.1} GiB per GPU",
                    model.display_name,
                    name(instance),
                    plan.layout(),
                    gib(plan.weight_bytes_per_gpu as f64),
                    gib(plan.usable_bytes_per_gpu as f64),
                    gib(plan.gpu_memory_bytes as f64),
                    -plan.headroom_gib(),
                ),
                help,
            )
            .at_field("instance_type")
            .note(weights_note(model, &plan))
            .note("GiB = 2^30 bytes; GPU memory as EC2 reports it (MiB); weights split evenly over the tensor parallel ranks"),
        );
        return;
    }
    if let Some(len) =
        context.filter(|&len| model.max_context_tokens == 0 || len <= model.max_context_tokens)
    {
        if let Some(sequences) = plan.concurrent_sequences(len) {
            if sequences == 0 {
                let needed = plan.kv_bytes_per_token_per_gpu as f64 * len as f64;
                ds.push(
                    Diagnostic::new(
                        Code::ContextDoesNotFitKvCache,
                        path,
                        format!(
                            "one sequence of {len} tokens needs {:.1} GiB of KV cache per GPU, the headroom after the weights is {:.1} GiB",
                            gib(needed),
                            plan.headroom_gib()
                        ),
                        format!(
                            "lower `.max_model_len(..)` to at most {} tokens, set a decode context parallel size, or use a larger instance",
                            plan.kv_tokens_in_headroom().unwrap_or(0)
                        ),
                    )
                    .at_field("max_model_len")
                    .note(plan.summary())
                    .note(format!(
                        "KV cache {} bytes per token per GPU (BF16)",
                        plan.kv_bytes_per_token_per_gpu
                    )),
                );
            }
        }
    }
    oversized(model, shape, instance, &plan, at, ds);
}

/// `HF0505`: a cheaper catalog instance offered in `region` (by HyperPod for an endpoint, by EC2
/// where the catalog records its regions otherwise) holds the model on
/// one node with at least [`SUGGESTION_MIN_HEADROOM_FRACTION`] of its usable memory free (and
/// one sequence at `max_model_len`, when set).
fn oversized(
    model: &Model,
    shape: &ServingShape,
    instance: &'static InstanceType,
    plan: &MemoryPlan,
    at: Placement<'_>,
    ds: &mut Diagnostics,
) {
    let Placement {
        region,
        path,
        hyperpod,
    } = at;
    let name = |i: &InstanceType| {
        if hyperpod {
            i.ml_name()
        } else {
            i.name.to_owned()
        }
    };
    let Some(current_price) = instance.on_demand_usd_per_hour_us_east_1 else {
        return;
    };
    let util = shape.gpu_memory_utilization;
    let candidate = instances_that_fit(model, util).into_iter().find(|p| {
        let Some(i) = catalog::instance(p.instance) else {
            return false;
        };
        let cheaper = i
            .on_demand_usd_per_hour_us_east_1
            .is_some_and(|price| price < current_price);
        let roomy = p.headroom_bytes_per_gpu as f64
            >= SUGGESTION_MIN_HEADROOM_FRACTION * p.usable_bytes_per_gpu as f64;
        let holds_context = match (shape.max_model_len, p.concurrent_sequences(1)) {
            (Some(len), Some(_)) => p.concurrent_sequences(len).unwrap_or(0) >= 1,
            _ => true,
        };
        cheaper
            && roomy
            && holds_context
            && i.total_gpu_memory_mib() < instance.total_gpu_memory_mib()
            && if hyperpod {
                i.hyperpod_offered_in(region)
            } else {
                i.ec2_regions.is_empty() || i.ec2_regions.contains(&region)
            }
    });
    let Some(smaller) = candidate else {
        return;
    };
    let Some(small) = catalog::instance(smaller.instance) else {
        return;
    };
    ds.push(
        Diagnostic::new(
            Code::OversizedInstance,
            path,
            format!(
                "{} leaves {:.1} GiB per GPU free on {} at {}; {} holds it at {} with {:.1} GiB free per GPU",
                model.display_name,
                plan.headroom_gib(),
                name(instance),
                plan.layout(),
                name(small),
                smaller.layout(),
                smaller.headroom_gib(),
            ),
            format!(
                "consider {} ({}) instead of {} ({})",
                name(small),
                price(small),
                name(instance),
                price(instance)
            ),
        )
        .at_field("instance_type")
        .note(plan.summary()),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constructs::{Engine, ServingShape};

    fn k3_shape(tp: u32, pp: u32) -> ServingShape {
        let model = catalog::model("moonshotai/Kimi-K3").unwrap().clone();
        ServingShape {
            engine: Engine::Vllm,
            engine_version: None,
            image: "vllm/vllm-openai:v0.27.0".to_owned(),
            args: Vec::new(),
            extra_args: Vec::new(),
            env: Vec::new(),
            model_id: model.hf_id.to_string(),
            model: Some(model),
            tensor_parallel: tp,
            pipeline_parallel: pp,
            nodes_per_replica: pp,
            decode_context_parallel: 1,
            max_model_len: None,
            gpu_memory_utilization: 0.90,
        }
    }

    fn fit_codes(shape: &ServingShape, instance: &str) -> Vec<Code> {
        let mut ds = Diagnostics::new();
        let at = Placement {
            region: "us-east-1",
            path: "s/Server",
            hyperpod: false,
        };
        let model = shape.model.clone().unwrap();
        check(
            &model,
            shape,
            catalog::instance(instance).unwrap(),
            at,
            &mut ds,
        );
        ds.iter().map(|d| d.code).collect()
    }

    /// The rules read the shape, whatever spans it: K3 refused on one 8 x B200 node at TP 8,
    /// held by two of them at TP 8 x PP 2 (the planner's layout), with the same arithmetic.
    #[test]
    fn a_pipelined_shape_is_checked_by_the_same_rule() {
        assert_eq!(
            fit_codes(&k3_shape(8, 1), "p6-b200.48xlarge"),
            [Code::ModelDoesNotFit]
        );
        assert!(fit_codes(&k3_shape(8, 2), "p6-b200.48xlarge").is_empty());
        let request = crate::catalog::plan::PlanRequest::new(
            catalog::model("moonshotai/Kimi-K3").unwrap(),
            "us-east-1",
        );
        let planned = crate::catalog::plan::plan(&request);
        let two = planned
            .candidates
            .iter()
            .find(|c| {
                c.layout.instance_type == "p6-b200.48xlarge" && c.layout.pipeline_parallel == 2
            })
            .unwrap();
        assert!(two.feasible());
    }
}
