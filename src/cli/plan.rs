//! `hyperforge plan`: the serving layouts of a catalog model, from `catalog::plan`.

use super::output;
use super::{EmitForm, Exit, PlanArgs};
use hyperforge::catalog::plan::{plan, Candidate, Layout, PlanRequest, MAX_RESERVED_INSTANCES};
use hyperforge::constructs::vllm::GPU_MEMORY_UTILIZATION;

/// `hyperforge plan`.
pub fn run(args: &PlanArgs) -> Exit {
    let Some(model) = hyperforge::catalog::model(&args.model) else {
        let known: Vec<String> = hyperforge::catalog::models()
            .iter()
            .map(|m| format!("  {}", m.hf_id))
            .collect();
        eprintln!(
            "error: model `{}` is not in the catalog\n\nthe catalog's models (hyperforge catalog models):\n{}",
            args.model,
            known.join("\n")
        );
        return Exit::Usage;
    };
    if !hyperforge::catalog::regions::is_known_region(&args.region) {
        eprintln!(
            "error: `{}` is not a region hyperforge knows (e.g. us-east-1)",
            args.region
        );
        return Exit::Usage;
    }
    // The range a server's `gpu_memory_utilization` takes (HF0411).
    if !GPU_MEMORY_UTILIZATION.contains(args.gpu_memory_utilization) {
        eprintln!(
            "error: --gpu-memory-utilization {} is not a fraction of GPU memory; use {}, e.g. 0.90",
            args.gpu_memory_utilization,
            GPU_MEMORY_UTILIZATION.describe()
        );
        return Exit::Usage;
    }
    let reservation = match args.reservation.as_deref().map(parse_reservation) {
        None => None,
        Some(Ok(r)) => Some(r),
        Some(Err(message)) => {
            eprintln!("error: --reservation: {message}");
            return Exit::Usage;
        }
    };
    let request = PlanRequest {
        model,
        region: &args.region,
        context_tokens: args.context,
        replicas: args.replicas,
        gpu_memory_utilization: args.gpu_memory_utilization,
        max_nodes: args.max_nodes,
        reservation,
    };
    let plan = plan(&request);
    let mut out = format!(
        "{} ({}): {:.1} GiB of weights; KV policy: room for one sequence of {} tokens; {:.2} of GPU memory; {}; {} replica{}\n",
        model.display_name,
        model.hf_id,
        hyperforge::catalog::memory::gib(model.weight_bytes() as f64),
        plan.policy_context,
        args.gpu_memory_utilization,
        args.region,
        args.replicas,
        if args.replicas == 1 { "" } else { "s" }
    );
    if let Some((t, n)) = reservation {
        out.push_str(&format!("Within a reservation of {n} x {t}.\n"));
    }
    let feasible = plan.feasible();
    out.push('\n');
    if feasible.is_empty() {
        out.push_str("No layout serves it (every candidate and why below).\n");
    } else {
        out.push_str("Feasible layouts (fewest nodes, then cheapest):\n");
        let rows: Vec<Vec<String>> = feasible.iter().map(|c| row(c)).collect();
        out.push_str(&output::table(
            &[
                "layout",
                "weights/GPU GiB",
                "headroom/GPU GiB",
                "KV tokens",
                "sequences",
                "$/h",
            ],
            &rows,
            &[false, true, true, true, true, true],
        ));
        out.push('\n');
        if let Some(best) = plan.best() {
            if plan.single_node_serves() {
                out.push_str(&format!(
                    "Not multi-node: {} serves on one node; more nodes per replica add cross-node traffic over EFA and gang scheduling for nothing.\n",
                    best.layout
                ));
            } else {
                out.push_str(&format!(
                    "Multi-node: no single instance holds the model here; the smallest layout is {}.\n",
                    best.layout
                ));
            }
        }
        out.push_str("The smallest layout on each instance type that serves it:\n");
        for c in plan.minimum_per_instance_type() {
            out.push_str(&format!("  {}\n", c.layout));
        }
    }
    out.push_str("\nLayouts that cannot serve it, and why:\n");
    for c in plan.candidates.iter().filter(|c| !c.feasible()) {
        out.push_str(&format!("  {}: {}\n", c.layout, c.problems.join("; ")));
    }
    if let (Some(form), Some(best)) = (args.emit, plan.best()) {
        out.push('\n');
        out.push_str(&emit(form, &model.hf_id, &best.layout));
    }
    out.push_str(
        "\nKV tokens: what one replica's headroom holds (activations and CUDA graphs come out of it too, so an upper bound); sequences: how many of the policy's length fit at once. Availability: checked in the regions the catalog records for a type. Prices: EC2 on-demand in the region, where the catalog holds them (\"unpriced\" elsewhere); Capacity Blocks and training plans are priced at purchase.\n",
    );
    out!("{}", out);
    if feasible.is_empty() {
        Exit::Failed
    } else {
        Exit::Ok
    }
}

/// The layout `layout` of `model` as a stack file's fields or the Rust builder calls.
fn emit(form: EmitForm, model: &str, layout: &Layout) -> String {
    let multi = layout.nodes_per_replica > 1;
    // vLLM's upstream image at the newest release the engine table holds (the options are
    // checked against it); pin the one you test by digest.
    let image = hyperforge::catalog::engines::VLLM.last().map_or_else(
        || "vllm/vllm-openai".to_owned(),
        |r| format!("vllm/vllm-openai:v{}", r.version_text()),
    );
    let efa = if multi {
        "Its nodes launch with EFA interfaces (a node group with `efa: true`), and the stack installs the `efa-device-plugin`, `lws` and `kueue` Helm presets before it (`HF0429`).\n"
    } else {
        ""
    };
    match form {
        EmitForm::StackFile => {
            let mut fields = format!(
                "      - vllm_deployment: Server\n        instance_type: {}\n",
                layout.instance_type
            );
            if multi {
                fields.push_str(&format!(
                    "        nodes_per_replica: {}\n",
                    layout.nodes_per_replica
                ));
            } else if hyperforge::catalog::instance(layout.instance_type)
                .is_some_and(|i| i.gpu_count != layout.tensor_parallel)
            {
                fields.push_str(&format!("        gpus: {}\n", layout.tensor_parallel));
            }
            fields.push_str(&format!(
                "        server:\n          model: {model}\n          image: {image}\n          tensor_parallel_size: {}\n",
                layout.tensor_parallel
            ));
            format!("{layout} as a stack file's construct (a `kubernetes` stage's `constructs`):\n\n{fields}\n{efa}")
        }
        EmitForm::Rust => format!(
            "{layout} in Rust (`layout` is `hyperforge::catalog::plan::plan(&request).best()`'s):\n\n    VllmDeployment::for_layout(\"Server\", VllmServer::new({model:?}, {image:?}), &layout)\n\n{efa}"
        ),
    }
}

fn row(c: &Candidate) -> Vec<String> {
    vec![
        c.layout.to_string(),
        format!("{:.1}", c.weights_gib_per_gpu),
        format!("{:+.1}", c.headroom_gib_per_gpu),
        c.kv_tokens
            .map_or_else(|| "-".to_owned(), |t| t.to_string()),
        c.sequences_at_context
            .map_or_else(|| "-".to_owned(), |s| s.to_string()),
        c.usd_per_hour
            .map_or_else(|| "unpriced".to_owned(), |p| format!("${p:.3}")),
    ]
}

/// `TYPE:COUNT`, the type in the catalog and the count 1 to [`MAX_RESERVED_INSTANCES`].
fn parse_reservation(text: &str) -> Result<(&'static str, u32), String> {
    let (name, count) = text
        .split_once(':')
        .ok_or_else(|| format!("`{text}` is not TYPE:COUNT, e.g. p6-b300.48xlarge:2"))?;
    let instance = hyperforge::catalog::instance(name.strip_prefix("ml.").unwrap_or(name))
        .ok_or_else(|| {
            format!("instance type `{name}` is not in the catalog (hyperforge catalog instances)")
        })?;
    let most = MAX_RESERVED_INSTANCES;
    let count: u32 = count
        .parse()
        .ok()
        .filter(|c| (1..=most).contains(c))
        .ok_or_else(|| format!("`{count}` is not a count of instances from 1 to {most}"))?;
    Ok((instance.name, count))
}
