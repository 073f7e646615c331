//! Synthesis benchmark: times in-process synthesis of every reference stack (validation,
//! lowering and serialization of every artifact, no disk I/O), then a fleet of many stacks to
//! show growth is linear. Run it in release mode:
//!
//! ```sh
//! cargo run --release --example bench_synth
//! ```

mod reference;

use std::time::{Duration, Instant};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn main() {
    let iterations = 500;
    for app in reference::all().into_iter().chain(reference::variants()) {
        let name = app.stacks().first().map_or("?", |s| s.name()).to_owned();
        for _ in 0..20 {
            std::hint::black_box(app.synth().expect("reference app synthesizes"));
        }
        let mut times = Vec::with_capacity(iterations);
        let mut bytes = 0;
        let mut split = hyperforge::synth::SynthTimings::default();
        let options = hyperforge::SynthOptions::default();
        for _ in 0..iterations {
            let start = Instant::now();
            let (assembly, timings) = std::hint::black_box(
                hyperforge::synth::synthesize_timed(&app, &options)
                    .expect("reference app synthesizes"),
            );
            times.push(start.elapsed());
            split.add(&timings);
            bytes = assembly.files().values().map(Vec::len).sum::<usize>();
        }
        times.sort();
        let per = |d: Duration| d / iterations as u32;
        println!(
            "{name}: {} artifacts, {bytes} bytes; synthesis median {:?}, p90 {:?}, min {:?} ({iterations} runs)\n  \
             mean split: validation {:?}, expansion {:?}, lowering {:?}, serialization {:?}, runbook {:?}",
            app.synth().map(|a| a.files().len()).unwrap_or(0),
            percentile(&times, 0.5),
            percentile(&times, 0.9),
            times[0],
            per(split.validation),
            per(split.expansion),
            per(split.lowering),
            per(split.serialization),
            per(split.runbook),
        );
    }
    // A fleet: both reference stacks N times under different names, in one app.
    for n in [5usize, 50, 500] {
        let mut fleet = hyperforge::App::new();
        for i in 0..n {
            fleet.add_stack(reference::kimi_k3_hyperpod_stack(&format!(
                "kimi-k3-hyperpod-{i}"
            )));
            fleet.add_stack(reference::kimi_k3_eks_stack(&format!("kimi-k3-eks-{i}")));
        }
        let start = Instant::now();
        let assembly = fleet.synth().expect("fleet synthesizes");
        let elapsed = start.elapsed();
        println!(
            "fleet of {} stacks: {} artifacts in {elapsed:?} ({:?} per stack)",
            2 * n,
            assembly.files().len(),
            elapsed / (2 * n) as u32
        );
    }
    if let Some(rss) = peak_rss_mib() {
        println!("peak resident memory: {rss:.1} MiB");
    }
}
