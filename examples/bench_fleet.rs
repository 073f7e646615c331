//! Fleet synthesis benchmark: the reference EKS stack over a fleet of N members (default
//! 10,000: five regions where EC2 offers p6-b300, each with its own Capacity Block, times
//! N / 5 accounts), synthesized to every format on every core. Reports the wall time, the
//! time per member, the per-phase split summed over members (validation, expansion, lowering,
//! serialization, runbook), the bytes produced and the peak resident memory. Run it in release
//! mode:
//!
//! ```sh
//! cargo run --release --example bench_fleet                 # 10,000 members, written to a temporary directory
//! cargo run --release --example bench_fleet -- 1000         # 1,000 members
//! cargo run --release --example bench_fleet -- 1000 memory  # kept in memory, not written (small fleets only)
//! cargo run --release --example bench_fleet -- 1000 discard # synthesized and dropped: no disk, flat memory
//! ```

mod reference;

use hyperforge::constructs::BucketName;
use hyperforge::fleet::{Fleet, FleetMember, FleetOptions, FleetOutput, FleetRegion, FleetSink};
use hyperforge::App;
use reference::{kimi_k3_eks_stack_at, Placement};
use std::time::Instant;

const REGIONS: [(&str, &str, &str); 5] = [
    ("us-west-2", "cr-0123456789abcdef0", "usw2-az2"),
    ("us-east-1", "cr-0a1b2c3d4e5f60718", "use1-az4"),
    ("eu-west-2", "cr-0fedcba9876543210", "euw2-az2"),
    ("ap-northeast-2", "cr-00112233445566778", "apne2-az1"),
    ("sa-east-1", "cr-08877665544332211", "sae1-az1"),
];

fn fleet(members: usize) -> Fleet {
    let accounts = members.div_ceil(REGIONS.len()).max(1);
    let mut fleet = Fleet::from_apps("bench", |m: &FleetMember| {
        let at = Placement {
            region: m.region.clone(),
            cluster_name: m.stack.clone(),
            reservation_id: m.value("capacity_id").unwrap_or_default().to_owned(),
            zone_id: m.value("zone_id").unwrap_or_default().to_owned(),
            // Unique in every account and region, and the same template in all of them.
            bucket_name: BucketName::PerAccountAndRegion,
            dashboard: "serving-kimi-k3".to_owned(),
        };
        Ok(App::new().stack(kimi_k3_eks_stack_at(&m.stack, &at)))
    });
    for (region, id, zone) in REGIONS {
        fleet = fleet.region(FleetRegion::new(region).capacity_block(id, zone));
    }
    for a in 0..accounts {
        fleet = fleet.account(format!("{:012}", 100_000_000_000u64 + a as u64));
    }
    fleet
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
    // Removing what was written is not part of the measurement.
    let _ = std::fs::remove_dir_all(&dir);
    let n = output.manifest.members.len() as u32;
    let t = output.timings;
    let per = |d: std::time::Duration| d / n.max(1);
    println!(
        "fleet of {n} members ({mode}): {:?} wall on {} threads, {:?} per member; {} files, {} MiB",
        wall,
        std::thread::available_parallelism().map_or(1, |p| p.get()),
        wall / n.max(1),
        output.files,
        output.bytes >> 20
    );
    println!(
        "per member (CPU, summed over threads): validation {:?}, expansion {:?}, lowering {:?}, serialization {:?}, runbook {:?}; synthesis total {:?}",
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
