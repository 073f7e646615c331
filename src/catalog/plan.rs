//! Serving layouts: every way one replica of a catalog model could be laid out over the
//! catalog's instance types (instance type x nodes per replica x tensor parallel x pipeline
//! parallel), each judged feasible, with its memory per GPU, the KV cache it holds and its
//! price, or infeasible, with every reason. `hyperforge plan` prints it; the arithmetic is
//! [`super::memory`]'s.
//!
//! The layouts vLLM serves: tensor parallelism inside one node (over NVLink), and across
//! nodes pipeline parallelism, one stage per node, each node at full tensor parallelism (the
//! multi-node recipe: TP 8 x PP 2 on two 8-GPU nodes). Tensor parallelism across nodes would
//! put every layer's all-reduce on the network and is not offered. Weights split evenly over
//! the `TP x PP` ranks; each pipeline stage keeps the KV cache of its own layers.
//!
//! A replica must hold, beside its weights, the KV cache of one sequence of the context asked
//! for (default: the model's longest), the "KV policy": a layout whose headroom cannot is
//! refused even though its weights fit.

use super::instances::InstanceType;
use super::memory::{gib, MemoryPlan};
use super::models::Model;

/// The most nodes one replica may span.
pub const MAX_NODES_PER_REPLICA: u32 = 16;

/// The most replicas a plan prices.
pub const MAX_REPLICAS: u32 = 1024;

/// The most instances a reservation given to a plan holds that matter: every replica at the
/// most nodes.
pub const MAX_RESERVED_INSTANCES: u32 = MAX_NODES_PER_REPLICA * MAX_REPLICAS;

/// The KV cache element size, bytes (BF16/FP16; vLLM's default cache dtype).
const KV_DTYPE_BYTES: u32 = 2;

/// What a plan is asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanRequest<'a> {
    /// The model.
    pub model: &'a Model,
    /// The region the replicas run in (availability and prices).
    pub region: &'a str,
    /// The context one sequence must fit (default: the model's longest).
    pub context_tokens: Option<u64>,
    /// Replicas to price (at least 1).
    pub replicas: u32,
    /// The fraction of GPU memory vLLM may use.
    pub gpu_memory_utilization: f64,
    /// The most nodes per replica considered.
    pub max_nodes: u32,
    /// A reservation the replicas must fit in: its instance type and count.
    pub reservation: Option<(&'a str, u32)>,
}

impl<'a> PlanRequest<'a> {
    /// A request for `model` in `region`: one replica, the model's longest context, 0.90 of
    /// GPU memory, up to 4 nodes per replica, any capacity.
    pub fn new(model: &'a Model, region: &'a str) -> Self {
        PlanRequest {
            model,
            region,
            context_tokens: None,
            replicas: 1,
            gpu_memory_utilization: 0.90,
            max_nodes: 4,
            reservation: None,
        }
    }

    /// The context the KV policy asks room for: `context_tokens`, else the model's longest.
    pub fn policy_context(&self) -> u64 {
        self.context_tokens
            .unwrap_or(self.model.max_context_tokens)
            .max(1)
    }
}

/// One replica's layout: a typed value a workload can be given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    /// The instance type's EC2 name.
    pub instance_type: &'static str,
    /// Nodes one replica spans.
    pub nodes_per_replica: u32,
    /// Tensor parallel size (inside a node).
    pub tensor_parallel: u32,
    /// Pipeline parallel size (one stage per node).
    pub pipeline_parallel: u32,
}

impl Layout {
    /// GPUs one replica uses.
    pub fn gpus_per_replica(&self) -> u32 {
        self.tensor_parallel * self.pipeline_parallel
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gpus = self.gpus_per_replica();
        write!(
            f,
            "{} x {} (TP {} x PP {}, {gpus} GPU{})",
            self.nodes_per_replica,
            self.instance_type,
            self.tensor_parallel,
            self.pipeline_parallel,
            if gpus == 1 { "" } else { "s" }
        )
    }
}

/// A layout and what it gives, or why it cannot serve.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The layout.
    pub layout: Layout,
    /// Weights per GPU, GiB.
    pub weights_gib_per_gpu: f64,
    /// What vLLM may use of one GPU, GiB.
    pub usable_gib_per_gpu: f64,
    /// Usable less weights, GiB (negative: the shortfall).
    pub headroom_gib_per_gpu: f64,
    /// Tokens of KV cache one replica holds in its headroom (`None`: the model keeps none).
    pub kv_tokens: Option<u64>,
    /// Sequences of the policy's context it holds at once.
    pub sequences_at_context: Option<u64>,
    /// On-demand price of every replica in the region, USD per hour (`None`: unpriced there).
    pub usd_per_hour: Option<f64>,
    /// Why it cannot serve; empty when it can.
    pub problems: Vec<String>,
}

impl Candidate {
    /// Whether it serves the model.
    pub fn feasible(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Every candidate layout of a request, in catalog order.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The candidates.
    pub candidates: Vec<Candidate>,
    /// The context the KV policy asked room for, tokens.
    pub policy_context: u64,
}

impl Plan {
    /// The feasible candidates, fewest nodes first, then cheapest (unpriced last), then the
    /// most headroom.
    pub fn feasible(&self) -> Vec<&Candidate> {
        let mut out: Vec<&Candidate> = self.candidates.iter().filter(|c| c.feasible()).collect();
        out.sort_by(|a, b| {
            a.layout
                .nodes_per_replica
                .cmp(&b.layout.nodes_per_replica)
                .then(
                    a.usd_per_hour
                        .unwrap_or(f64::INFINITY)
                        .total_cmp(&b.usd_per_hour.unwrap_or(f64::INFINITY)),
                )
                .then(b.headroom_gib_per_gpu.total_cmp(&a.headroom_gib_per_gpu))
                .then(a.layout.instance_type.cmp(b.layout.instance_type))
        });
        out
    }

    /// The layout to choose: the first of [`Plan::feasible`].
    pub fn best(&self) -> Option<&Candidate> {
        self.feasible().into_iter().next()
    }

    /// Whether some layout serves on one node (then no multi-node layout is worth its
    /// cross-node traffic and gang scheduling).
    pub fn single_node_serves(&self) -> bool {
        self.candidates
            .iter()
            .any(|c| c.feasible() && c.layout.nodes_per_replica == 1)
    }

    /// The smallest feasible layout (fewest GPUs, then fewest nodes) on each instance type
    /// that has one, in catalog order.
    pub fn minimum_per_instance_type(&self) -> Vec<&Candidate> {
        let mut out: Vec<&Candidate> = Vec::new();
        for c in self.candidates.iter().filter(|c| c.feasible()) {
            match out
                .iter_mut()
                .find(|o| o.layout.instance_type == c.layout.instance_type)
            {
                Some(o) => {
                    let key =
                        |c: &Candidate| (c.layout.gpus_per_replica(), c.layout.nodes_per_replica);
                    if key(c) < key(o) {
                        *o = c;
                    }
                }
                None => out.push(c),
            }
        }
        out
    }
}

/// The layouts of one instance type: TP over the powers of two dividing its GPU count on one
/// node, then 2.. `max_nodes` nodes at full TP with one pipeline stage each.
fn layouts(instance: &'static InstanceType, max_nodes: u32) -> Vec<Layout> {
    let gpus = instance.gpu_count;
    let mut out = Vec::new();
    let mut tp = 1;
    while tp <= gpus {
        if gpus.is_multiple_of(tp) {
            out.push(Layout {
                instance_type: instance.name,
                nodes_per_replica: 1,
                tensor_parallel: tp,
                pipeline_parallel: 1,
            });
        }
        tp *= 2;
    }
    for nodes in 2..=max_nodes.min(MAX_NODES_PER_REPLICA) {
        out.push(Layout {
            instance_type: instance.name,
            nodes_per_replica: nodes,
            tensor_parallel: gpus,
            pipeline_parallel: nodes,
        });
    }
    out
}

/// Judges `layout` for `request`.
fn judge(request: &PlanRequest<'_>, instance: &'static InstanceType, layout: Layout) -> Candidate {
    let model = request.model;
    let (tp, pp) = (layout.tensor_parallel, layout.pipeline_parallel);
    let memory = MemoryPlan::pipelined(
        model,
        instance,
        tp,
        pp,
        1,
        request.gpu_memory_utilization,
        KV_DTYPE_BYTES,
    );
    let weights_per_gpu = memory.weight_bytes_per_gpu;
    let usable = memory.usable_bytes_per_gpu;
    let headroom = memory.headroom_bytes_per_gpu;
    let kv_per_token = memory.kv_bytes_per_token_per_gpu;
    let kv_tokens = memory.kv_tokens_in_headroom();
    let context = request.policy_context();
    let sequences_at_context = kv_tokens.map(|t| t / context);
    let replicas = request.replicas.max(1);
    let usd_per_hour = instance
        .on_demand_usd_per_hour(request.region)
        .map(|p| p * f64::from(layout.nodes_per_replica) * f64::from(replicas));

    let mut problems = Vec::new();
    if !instance.ec2_regions.is_empty() && !instance.ec2_regions.contains(&request.region) {
        problems.push(format!(
            "not offered in {} (EC2 offers it in {})",
            request.region,
            instance.ec2_regions.join(", ")
        ));
    }
    if model.attention_heads > 0 && !model.attention_heads.is_multiple_of(tp) {
        problems.push(format!(
            "TP {tp} does not divide the model's {} attention heads",
            model.attention_heads
        ));
    }
    if layout.nodes_per_replica > 1 && instance.efa_max == 0 {
        problems.push(format!(
            "{} nodes per replica need EFA between them; {} has none",
            layout.nodes_per_replica, instance.name
        ));
    }
    if headroom <= 0 {
        problems.push(format!(
            "{:.1} GiB of weights per GPU, {:.1} GiB usable at {:.2}",
            gib(weights_per_gpu as f64),
            gib(usable as f64),
            request.gpu_memory_utilization
        ));
    } else if sequences_at_context == Some(0) {
        problems.push(format!(
            "the KV cache of one {context}-token sequence needs {:.1} GiB per GPU, {:.1} GiB left after the weights",
            gib((kv_per_token.saturating_mul(context)) as f64),
            gib(headroom as f64)
        ));
    }
    if let Some((reserved_type, count)) = request.reservation {
        let needed = u64::from(layout.nodes_per_replica) * u64::from(replicas);
        if reserved_type != instance.name {
            problems.push(format!("the reservation holds {reserved_type}"));
        } else if needed > u64::from(count) {
            problems.push(format!(
                "{needed} instances needed, the reservation holds {count}"
            ));
        }
    }
    Candidate {
        layout,
        weights_gib_per_gpu: gib(weights_per_gpu as f64),
        usable_gib_per_gpu: gib(usable as f64),
        headroom_gib_per_gpu: gib(headroom as f64),
        kv_tokens,
        sequences_at_context,
        usd_per_hour,
        problems,
    }
}

/// Every candidate layout of `request` over the catalog's GPU instance types.
pub fn plan(request: &PlanRequest<'_>) -> Plan {
    let candidates = super::instances()
        .iter()
        .filter(|i| i.gpu_count > 0)
        .flat_map(|i| {
            layouts(i, request.max_nodes.max(1))
                .into_iter()
                .map(move |l| judge(request, i, l))
        })
        .collect();
    Plan {
        candidates,
        policy_context: request.policy_context(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::model;

    fn k3(region: &str) -> Plan {
        plan(&PlanRequest::new(
            model("moonshotai/Kimi-K3").unwrap(),
            region,
        ))
    }

    fn find<'a>(p: &'a Plan, instance: &str, nodes: u32, tp: u32) -> &'a Candidate {
        p.candidates
            .iter()
            .find(|c| {
                c.layout.instance_type == instance
                    && c.layout.nodes_per_replica == nodes
                    && c.layout.tensor_parallel == tp
            })
            .unwrap()
    }

    #[test]
    fn kimi_k3_serves_on_one_p6_b300_at_tp_8() {
        let p = k3("us-east-1");
        let c = find(&p, "p6-b300.48xlarge", 1, 8);
        assert!(c.feasible(), "{:?}", c.problems);
        assert!((c.weights_gib_per_gpu - 181.7).abs() / 181.7 < 0.01);
        assert!(c.headroom_gib_per_gpu >= 60.0 - 0.1);
        assert_eq!(c.usd_per_hour, Some(142.416));
        assert!(p.single_node_serves());
        assert_eq!(p.best().unwrap().layout, c.layout);
    }

    #[test]
    fn b200_needs_sixteen_gpus_and_h100_its_own_minimum() {
        let p = k3("us-east-1");
        let b200 = find(&p, "p6-b200.48xlarge", 1, 8);
        assert!(!b200.feasible());
        assert!(
            b200.problems[0].contains("GiB of weights per GPU"),
            "{:?}",
            b200.problems
        );
        let minimum = p.minimum_per_instance_type();
        let of = |t: &str| {
            minimum
                .iter()
                .find(|c| c.layout.instance_type == t)
                .copied()
        };
        assert_eq!(
            of("p6-b200.48xlarge").unwrap().layout.gpus_per_replica(),
            16
        );
        // 16 x H100 cannot hold the weights; 24 can, with room for a 1 M-token sequence.
        assert!(!find(&p, "p5.48xlarge", 2, 8).feasible());
        let h100 = of("p5.48xlarge").unwrap();
        assert_eq!(h100.layout.gpus_per_replica(), 24);
        assert_eq!(h100.layout.pipeline_parallel, 3);
        assert!(h100.sequences_at_context.unwrap() >= 1);
    }

    #[test]
    fn the_kv_policy_refuses_a_layout_whose_weights_fit() {
        let k3 = model("moonshotai/Kimi-K3").unwrap();
        let mut request = PlanRequest::new(k3, "us-east-1");
        request.context_tokens = Some(10_000_000);
        let p = plan(&request);
        let c = find(&p, "p5.48xlarge", 3, 8);
        assert!(c.headroom_gib_per_gpu > 0.0);
        assert!(!c.feasible());
        assert!(c.problems[0].contains("KV cache of one 10000000-token sequence"));
    }

    #[test]
    fn a_reservation_and_the_region_bound_the_layouts() {
        let kimi = model("moonshotai/Kimi-K3").unwrap();
        let mut request = PlanRequest::new(kimi, "us-east-1");
        request.reservation = Some(("p6-b300.48xlarge", 1));
        request.replicas = 2;
        let p = plan(&request);
        let c = find(&p, "p6-b300.48xlarge", 1, 8);
        assert_eq!(c.problems, ["2 instances needed, the reservation holds 1"]);
        assert!(p.feasible().is_empty());
        // Unpriced outside the regions the catalog holds prices for, never $0.
        let west = k3("us-west-2");
        assert_eq!(find(&west, "p6-b300.48xlarge", 1, 8).usd_per_hour, None);
    }
}
