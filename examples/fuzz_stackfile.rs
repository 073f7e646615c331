//! The long fuzz campaign over stack files, fleet files and Guard policy files (the test suite
//! runs a short one, `tests/it/fuzz.rs`):
//!
//! ```text
//! cargo run --release --example fuzz_stackfile -- --iterations 1000000 [--seed N] [--target load|synth|both|fleet|policy|all]
//! cargo run --release --example fuzz_stackfile -- --seed N --only I   # replay input I
//! cargo run --release --example fuzz_stackfile -- --from I --trace      # inputs I.., each named first
//! ```
//!
//! `--trace` names each input on standard error before running it, so that an input that
//! aborts the process (a stack overflow) is the last one named.
//!
//! Every input goes through the chosen targets, in turn (`both`: even inputs the loader, odd
//! inputs the whole in-memory pipeline; `all` adds the fleet and policy targets), each
//! mutating its own corpus. Besides the harness's invariants
//! (`tests/fuzz/harness.rs`), this binary counts allocations, so each input's peak memory is
//! checked against `--max-mib` (default 256), and its time against `--ms-per-mib` (default
//! 1000 per MiB of input, at least a tenth of that). Findings are written to `target/fuzz-findings/` and the binary exits
//! non-zero.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[path = "../tests/fuzz/harness.rs"]
mod harness;

use harness::{Outcome, Target};

/// The system allocator, counting live bytes and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(size: usize) {
    let now = LIVE.fetch_add(size, Ordering::Relaxed) + size;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

struct Args {
    iterations: u64,
    seed: u64,
    targets: Vec<Target>,
    only: Option<u64>,
    from: u64,
    trace: bool,
    max_mib: usize,
    per_mib: Duration,
    save: bool,
}

fn args() -> Args {
    let mut a = Args {
        iterations: 100_000,
        seed: 1,
        targets: Target::ALL.to_vec(),
        only: None,
        from: 0,
        trace: false,
        max_mib: 256,
        per_mib: Duration::from_millis(1000),
        save: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--iterations" => a.iterations = value().parse().expect("--iterations N"),
            "--seed" => a.seed = value().parse().expect("--seed N"),
            "--only" => a.only = Some(value().parse().expect("--only I")),
            "--save" => a.save = true,
            "--from" => a.from = value().parse().expect("--from I"),
            "--trace" => a.trace = true,
            "--max-mib" => a.max_mib = value().parse().expect("--max-mib N"),
            "--ms-per-mib" => {
                a.per_mib = Duration::from_millis(value().parse().expect("--ms-per-mib N"))
            }
            "--target" => {
                a.targets = match value().as_str() {
                    "load" => vec![Target::Load],
                    "synth" => vec![Target::Synth],
                    "both" => Target::ALL.to_vec(),
                    "fleet" => vec![Target::Fleet],
                    "policy" => vec![Target::Policy],
                    "all" => Target::EVERY.to_vec(),
                    other => {
                        panic!("unknown target {other}: load, synth, both, fleet, policy or all")
                    }
                }
            }
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

#[derive(Default)]
struct Stats {
    runs: u64,
    accepted: u64,
    time: Duration,
    slowest: Duration,
    slowest_len: usize,
    slowest_input: String,
    peak: usize,
    largest: usize,
}

fn main() {
    let a = args();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let corpora: Vec<Vec<harness::Seed>> = a
        .targets
        .iter()
        .map(|t| harness::corpus_for(repo, *t))
        .collect();
    let findings_dir = repo.join("target/fuzz-findings");
    let workdir = std::env::temp_dir().join(format!("hyperforge-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&workdir).expect("creating the working directory");
    std::env::set_current_dir(&workdir).expect("entering the working directory");
    // Panics are findings, reported below with their input; keep the default output quiet.
    std::panic::set_hook(Box::new(|_| {}));

    let start = Instant::now();
    let mut stats: Vec<Stats> = a.targets.iter().map(|_| Stats::default()).collect();
    let mut findings = 0u64;
    // The seeds themselves through every target, then mutation `i` through target `i % n`
    // (with `--only`, just that mutation).
    let seed_runs = corpora.iter().enumerate().flat_map(|(k, seeds)| {
        seeds
            .iter()
            .enumerate()
            .map(move |(s, seed)| (k, format!("seed {}", seed.name), Some(s)))
    });
    let mutation_runs = match a.only {
        Some(i) => i..i + 1,
        None => a.from..a.from.saturating_add(a.iterations),
    }
    .map(|i| ((i % a.targets.len() as u64) as usize, i.to_string(), None));
    let runs: Box<dyn Iterator<Item = (usize, String, Option<usize>)>> = if a.only.is_some() {
        Box::new(mutation_runs)
    } else {
        Box::new(seed_runs.chain(mutation_runs))
    };
    for (n, (k, label, seed_index)) in runs.enumerate() {
        let target = a.targets[k];
        let seeds = &corpora[k];
        let bytes = match seed_index {
            Some(s) => seeds[s].bytes.clone(),
            None => harness::input(seeds, a.seed, label.parse().expect("input number")),
        };
        if a.trace {
            eprintln!("running [{}] input {label}", target.name());
        }
        // Saved before it runs: an input that aborts the process is kept too.
        if a.save {
            let path = harness::save_finding(&findings_dir, target, a.seed, &label, &bytes);
            eprintln!("input {label} saved to {}", path.display());
        }
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let t = Instant::now();
        let result = harness::run(target, &bytes, Some(&workdir));
        let took = t.elapsed();
        let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
        let s = &mut stats[k];
        s.runs += 1;
        s.time += took;
        if took > s.slowest {
            s.slowest = took;
            s.slowest_len = bytes.len();
            s.slowest_input = label.clone();
        }
        s.peak = s.peak.max(peak);
        s.largest = s.largest.max(bytes.len());
        let problem = match result {
            Err(f) => Some(f.what),
            Ok(_) if took > harness::budget(bytes.len(), a.per_mib) => Some(format!(
                "took {took:?} for {} bytes (budget {:?})",
                bytes.len(),
                harness::budget(bytes.len(), a.per_mib)
            )),
            Ok(_) if peak > a.max_mib << 20 => Some(format!(
                "peak allocation {} MiB for {} bytes",
                peak >> 20,
                bytes.len()
            )),
            Ok(Outcome::Accepted) => {
                s.accepted += 1;
                None
            }
            Ok(Outcome::Refused) => None,
        };
        if let Some(what) = problem {
            findings += 1;
            let path = harness::save_finding(&findings_dir, target, a.seed, &label, &bytes);
            eprintln!(
                "FINDING [{}] input {label} (seed {}): {what}\n  saved to {}",
                target.name(),
                a.seed,
                path.display()
            );
        }
        if n > 0 && n % 100_000 == 0 {
            eprintln!("{n} inputs, {:.0?}", start.elapsed());
        }
    }
    let _ = std::fs::remove_dir(&workdir);
    harness::cleanup();
    println!(
        "seed {}, {} seeds, wall time {:.1?}",
        a.seed,
        corpora.iter().map(Vec::len).sum::<usize>(),
        start.elapsed()
    );
    for (t, s) in a.targets.iter().zip(&stats) {
        println!(
            "{:5}: {} executions ({} accepted), {:.1?} total, slowest {:.1?} (input {}, {} bytes), peak allocation {:.1} MiB, largest input {} bytes",
            t.name(),
            s.runs,
            s.accepted,
            s.time,
            s.slowest,
            s.slowest_input,
            s.slowest_len,
            s.peak as f64 / 1048576.0,
            s.largest
        );
    }
    println!("findings: {findings}");
    if findings > 0 {
        std::process::exit(1);
    }
}
