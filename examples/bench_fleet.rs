//! Fleet synthesis benchmark: the reference fleet (the EKS reference stack in its three
//! regions, each with its own Capacity Block) widened to N members (default 9,999: the three
//! regions times 3,333 accounts), synthesized to every format on every core. Reports the wall
//! time, the time per member, the distinct assemblies synthesized and their per-phase split
//! (validation, expansion, lowering, serialization, runbook), the files and bytes produced and
//! the peak resident memory. Run it in release mode:
//!
//! ```sh
//! cargo run --release --example bench_fleet                 # 9,999 members, written to a temporary directory
//! cargo run --release --example bench_fleet -- 999          # 999 members
//! cargo run --release --example bench_fleet -- 999 memory   # kept in memory, not written (small fleets only)
//! cargo run --release --example bench_fleet -- 9999 discard # synthesized and dropped: no disk
//! ```

mod reference;

use hyperforge::fleet::{Fleet, FleetOptions, FleetOutput, FleetSink};
use std::collections::BTreeSet;
use std::time::Instant;

/// The reference fleet over `ceil(members / 3)` accounts.
fn fleet(members: usize) -> Fleet {
    let accounts = members.div_ceil(3).max(1);
    reference::kimi_k3_eks_fleet_to(
        (0..accounts).map(|a| format!("{:012}", 100_000_000_000u64 + a as u64)),
    )
}

struct Discard;

impl FleetSink for Discard {
    fn file(&self, _path: &str, _bytes: &[u8]) -> Result<(), String> {
        Ok(())
    }
}

fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let members: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let mode = args.next().unwrap_or_else(|| "disk".to_owned());
    let fleet = fleet(members);
    let options = FleetOptions::default();
    let dir = std::env::temp_dir().join(format!("hyperforge-bench-fleet-{}", std::process::id()));
    let start = Instant::now();
    let output: FleetOutput = match mode.as_str() {
        "memory" => fleet
            .synth(&options)
            .map(|(_, o)| o)
            .unwrap_or_else(|ds| panic!("{ds}")),
        "discard" => fleet
            .synth_into(&options, &Discard)
            .unwrap_or_else(|ds| panic!("{ds}")),
        _ => fleet.write_to(&dir, &options).unwrap_or_else(|e| match e {
            hyperforge::fleet::FleetWriteError::Diagnostics(ds) => panic!("{ds}"),
            e => panic!("{e}"),
        }),
    };
    let wall = start.elapsed();
    if let Ok(meta) = std::fs::metadata(dir.join("fleet.json")) {
        println!("fleet.json: {} KiB", meta.len() >> 10);
    }
    // Removing what was written is not part of the measurement.
    let _ = std::fs::remove_dir_all(&dir);
    let n = output.manifest.members.len() as u32;
    let assemblies = output
        .manifest
        .members
        .iter()
        .map(|m| m.assembly.as_str())
        .collect::<BTreeSet<_>>()
        .len() as u32;
    let t = output.timings;
    let per = |d: std::time::Duration| d / assemblies.max(1);
    println!(
        "fleet of {n} members ({mode}): {:?} wall on {} threads, {:?} per member; {assemblies} distinct assemblies; {} files, {} MiB",
        wall,
        std::thread::available_parallelism().map_or(1, |p| p.get()),
        wall / n.max(1),
        output.files,
        output.bytes >> 20
    );
    println!(
        "per distinct assembly (CPU): validation {:?}, expansion {:?}, lowering {:?}, serialization {:?}, runbook {:?}; synthesis total {:?}",
        per(t.validation),
        per(t.expansion),
        per(t.lowering),
        per(t.serialization),
        per(t.runbook),
        per(t.total()),
    );
    println!(
        "StackSets: {}; stages per member: {}",
        output.manifest.stack_sets.len(),
        output.manifest.per_member_stages.len()
    );
    if let Some(rss) = peak_rss_mib() {
        println!("peak resident memory: {rss:.1} MiB");
    }
}
