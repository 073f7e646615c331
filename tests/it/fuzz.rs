//! The bounded fuzz regression pass (the long campaign is `examples/fuzz_stackfile.rs`): every
//! seed of the corpus (`stacks/*.yaml`, `tests/fuzz/corpus/`) and a fixed number of fresh
//! mutations go through the loader and through loading and synthesis in memory, checking the
//! harness's invariants (`tests/fuzz/harness.rs`): no panic, every failure an error diagnostic
//! with a code and a location, artifact paths inside the output directory, nothing written to
//! the working directory, and time within a budget. Memory is bounded here by the input size
//! (the mutator stops just past the loader's 1 MiB limit); the campaign also counts allocations.
//!
//! `HYPERFORGE_FUZZ_ITERATIONS` and `HYPERFORGE_FUZZ_SEED` change the pass (default: 5,000
//! mutations of seed 1).

#[path = "../fuzz/harness.rs"]
mod harness;

use harness::Target;
use std::path::Path;
use std::time::{Duration, Instant};

/// The time one input may take per MiB: ten times the campaign's release-mode budget,
/// for a debug build on a shared machine.
const PER_MIB: Duration = Duration::from_secs(10);

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v} is not a number"))
        })
        .unwrap_or(default)
}

/// Runs `bytes` through `target`: its outcome, or `None` after noting in `findings` a broken
/// invariant or an input slower than its budget.
fn run_noting(
    target: Target,
    name: &str,
    bytes: &[u8],
    findings: &mut Vec<String>,
) -> Option<harness::Outcome> {
    let start = Instant::now();
    let result = harness::run(target, bytes, None);
    let took = start.elapsed();
    match result {
        Err(f) => findings.push(format!("{name} [{}]: {}", target.name(), f.what)),
        Ok(_) if took > harness::budget(bytes.len(), PER_MIB) => findings.push(format!(
            "{name} [{}]: {took:?} for {} bytes",
            target.name(),
            bytes.len()
        )),
        Ok(outcome) => return Some(outcome),
    }
    None
}

#[test]
fn corpus_and_fresh_mutations_keep_the_invariants() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let seeds = harness::corpus(repo);
    let iterations = env_u64("HYPERFORGE_FUZZ_ITERATIONS", 5_000);
    let seed = env_u64("HYPERFORGE_FUZZ_SEED", 1);
    // Tests share the process's working directory, so this pass cannot watch it for writes;
    // the campaign (`examples/fuzz_stackfile.rs`) runs in an empty directory of its own and
    // does. The pipeline is given no path at all.
    let mut findings = Vec::new();
    let mut synthesized = 0;
    // Each seed through both targets; mutation `i` through target `i % 2`, as the campaign
    // runs it.
    let seeds_both = seeds
        .iter()
        .flat_map(|s| Target::ALL.map(|t| (t, s.name.clone(), s.bytes.clone())));
    let mutations = (0..iterations).map(|i| {
        let target = Target::ALL[(i % 2) as usize];
        (
            target,
            format!("input {i}"),
            harness::input(&seeds, seed, i),
        )
    });
    for (target, name, bytes) in seeds_both.chain(mutations) {
        let outcome = run_noting(target, &name, &bytes, &mut findings);
        if target == Target::Synth && outcome == Some(harness::Outcome::Accepted) {
            synthesized += 1;
        }
    }
    // The synthesis target must reach synthesis: a pipeline refusing every input would pass
    // the other checks vacuously.
    assert!(synthesized > 0, "no input was synthesized");
    assert!(
        findings.is_empty(),
        "replay with `cargo run --release --example fuzz_stackfile -- --seed {seed} --only <i>` (`--target both`, the default):\n{}",
        findings.join("\n")
    );
}

/// The fleet-file and policy-file targets: their corpora and fresh mutations keep the same
/// invariants (`HYPERFORGE_FUZZ_ITERATIONS` mutations each, default 1,000).
#[test]
fn fleet_and_policy_files_keep_the_invariants() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let iterations = env_u64("HYPERFORGE_FUZZ_ITERATIONS", 1_000);
    let seed = env_u64("HYPERFORGE_FUZZ_SEED", 1);
    let mut findings = Vec::new();
    for target in [Target::Fleet, Target::Policy] {
        let seeds = harness::corpus_for(repo, target);
        let (mut accepted, mut refused) = (0, 0);
        let inputs = seeds
            .iter()
            .map(|s| (s.name.clone(), s.bytes.clone()))
            .chain(
                (0..iterations).map(|i| (format!("input {i}"), harness::input(&seeds, seed, i))),
            );
        for (name, bytes) in inputs {
            match run_noting(target, &name, &bytes, &mut findings) {
                Some(harness::Outcome::Accepted) => accepted += 1,
                Some(harness::Outcome::Refused) => refused += 1,
                None => {}
            }
        }
        // Both outcomes occur: a target refusing (or accepting) everything would pass vacuously.
        assert!(
            accepted > 0 && refused > 0,
            "{}: {accepted} accepted, {refused} refused",
            target.name()
        );
    }
    harness::cleanup();
    assert!(
        findings.is_empty(),
        "replay with `cargo run --release --example fuzz_stackfile -- --target <fleet|policy> --seed {seed} --only <i>`:\n{}",
        findings.join("\n")
    );
}
