//! A small, deterministic mutation fuzzer for stack files, on stable Rust.
//!
//! Shared by the long campaign (`examples/fuzz_stackfile.rs`, release mode, with a counting
//! allocator) and the bounded regression pass of the test suite (`tests/it/fuzz.rs`). Inputs
//! are the seed corpus (`stacks/*.yaml` and `tests/fuzz/corpus/`) and mutations of it; input
//! `i` of a run is a pure function of the seed and `i`, so any finding is reproduced by its
//! number (`--seed S --only I`).
//!
//! Four targets: for stack files, the loader alone (`hyperforge::stackfile::load_str`) and the
//! whole in-memory pipeline (load, validate, `App::synth`); fleet files through their loader
//! (`stackfile::fleet::load_file`, the matrix checked and its members listed), with the
//! reference fleet's stack file beside them; and Guard policy files evaluated over a template
//! (`policy::check_templates`). The invariants checked on every input: no panic, every failure
//! carries at least one error diagnostic with a code, a location and a message, every artifact
//! path stays inside the output directory, nothing is written to the working directory, and
//! the time stays under a budget per MiB of input.

#![allow(dead_code)]

use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The largest input the mutator builds: just over the loader's 1 MiB limit, so the refusal
/// of larger files is exercised too.
pub const MAX_INPUT: usize = 1024 * 1024 + 64;

/// A seeded PRNG (SplitMix64): small, fast and the same everywhere.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Which part of the pipeline an input goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `stackfile::load_str`: parsing, the structural check, building, validation.
    Load,
    /// Loading, then `App::synth` in memory.
    Synth,
    /// A fleet file through `stackfile::fleet::load_file`, its matrix and members.
    Fleet,
    /// A Guard rule file through `policy::check_templates`.
    Policy,
}

impl Target {
    /// The stack-file targets.
    pub const ALL: [Target; 2] = [Target::Load, Target::Synth];
    /// Every target.
    pub const EVERY: [Target; 4] = [Target::Load, Target::Synth, Target::Fleet, Target::Policy];

    pub fn name(self) -> &'static str {
        match self {
            Target::Load => "load",
            Target::Synth => "synth",
            Target::Fleet => "fleet",
            Target::Policy => "policy",
        }
    }
}

/// One seed of the corpus.
#[derive(Clone, Debug)]
pub struct Seed {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// The seed corpus: the reference stack files, the fixture that sets every declared field, and
/// `tests/fuzz/corpus/`, in name order.
pub fn corpus(repo: &Path) -> Vec<Seed> {
    let mut seeds = Vec::new();
    let every = "tests/it/stackfile_every_field.yaml";
    seeds.push(Seed {
        name: every.to_owned(),
        bytes: std::fs::read(repo.join(every)).unwrap_or_else(|e| panic!("{every}: {e}")),
    });
    for dir in ["stacks", "tests/fuzz/corpus"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(repo.join(dir))
            .unwrap_or_else(|e| panic!("reading {dir}: {e}"))
            .map(|e| e.expect("directory entry").path())
            .filter(|p| p.is_file())
            .collect();
        paths.sort();
        for p in paths {
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let name = format!("{dir}/{}", p.file_name().unwrap().to_string_lossy());
            seeds.push(Seed { name, bytes });
        }
    }
    assert!(!seeds.is_empty(), "the fuzz corpus is empty");
    seeds
}

/// The seed corpus of `target`: stack files for the stack-file targets, the repository's fleet
/// files for `Fleet`, the vendored Guard rule files for `Policy`.
pub fn corpus_for(repo: &Path, target: Target) -> Vec<Seed> {
    let files = |dir: &str, keep: &dyn Fn(&Path, &[u8]) -> bool| -> Vec<Seed> {
        let mut todo = vec![repo.join(dir)];
        let mut paths = Vec::new();
        while let Some(d) = todo.pop() {
            for entry in
                std::fs::read_dir(&d).unwrap_or_else(|e| panic!("reading {}: {e}", d.display()))
            {
                let p = entry.expect("directory entry").path();
                if p.is_dir() {
                    todo.push(p);
                } else {
                    paths.push(p);
                }
            }
        }
        paths.sort();
        paths
            .into_iter()
            .filter_map(|p| {
                let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                keep(&p, &bytes).then(|| Seed {
                    name: p.strip_prefix(repo).unwrap_or(&p).display().to_string(),
                    bytes,
                })
            })
            .collect()
    };
    let seeds = match target {
        Target::Load | Target::Synth => corpus(repo),
        Target::Fleet => files("stacks/fleets", &|_, b| {
            b.starts_with(b"fleet:") || b.windows(7).any(|w| w == b"\nfleet:")
        }),
        Target::Policy => files("policy/registry", &|p, _| {
            p.extension().is_some_and(|e| e == "guard")
        }),
    };
    assert!(!seeds.is_empty(), "the {} corpus is empty", target.name());
    seeds
}

/// The directory the `Fleet` target writes its input into, beside a copy of the reference
/// fleet's stack file (never the working directory, which must stay empty).
fn fleet_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir =
            std::env::temp_dir().join(format!("hyperforge-fuzz-fleet-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("creating the fleet target's directory");
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        for entry in std::fs::read_dir(repo.join("stacks/fleets")).expect("stacks/fleets") {
            let p = entry.expect("directory entry").path();
            std::fs::copy(&p, dir.join(p.file_name().expect("a file name")))
                .expect("copying a fleet's stack file");
        }
        dir
    })
}

/// Removes what the targets wrote outside the working directory.
pub fn cleanup() {
    let dir = std::env::temp_dir().join(format!("hyperforge-fuzz-fleet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(dir);
}

/// The template the `Policy` target's rules are evaluated over: a few resources of the kinds
/// the vendored rules read.
const POLICY_TEMPLATE: &str = r#"{"AWSTemplateFormatVersion": "2010-09-09", "Resources": {
  "Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "b", "VersioningConfiguration": {"Status": "Enabled"}},
    "Metadata": {"hyperforge:path": "fuzz/Bucket"}},
  "Key": {"Type": "AWS::KMS::Key", "Properties": {"EnableKeyRotation": true, "KeyPolicy": {"Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "kms:*", "Resource": "*"}]}}},
  "Cluster": {"Type": "AWS::EKS::Cluster", "Properties": {"RoleArn": "arn:aws:iam::111122223333:role/r", "ResourcesVpcConfig": {"SubnetIds": ["s"], "EndpointPublicAccess": false}}}
}}"#;

/// Text the mutator inserts or substitutes: YAML syntax, numbers at the edges of every type,
/// names that would become paths, and words of the format.
const TOKENS: &[&str] = &[
    ":",
    ": ",
    "- ",
    "-",
    "\n",
    "\n  ",
    "\n    - ",
    " ",
    "\t",
    "\r\n",
    "#",
    "'",
    "\"",
    "{",
    "}",
    "[",
    "]",
    ",",
    "&a ",
    "*a",
    "<<: *a",
    "!!str ",
    "!!int ",
    "!!binary ",
    "!tag ",
    "? ",
    "|\n  ",
    ">-\n  ",
    "---\n",
    "${fleet.member}",
    "${fleet.",
    "${",
    "...\n",
    "%YAML 1.2\n",
    "~",
    "null",
    "true",
    "false",
    "yes",
    "0",
    "-0",
    "1",
    "-1",
    "2",
    "7",
    "8",
    "9",
    "64",
    "450",
    "451",
    "1200",
    "2400",
    "65535",
    "2147483647",
    "2147483648",
    "-2147483649",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "0x10",
    "0o17",
    "1_000",
    "1e3",
    "1e308",
    "1e309",
    "-1e308",
    "1e-300",
    "5e-324",
    ".inf",
    "-.inf",
    ".nan",
    "NaN",
    "0.0",
    "0.5",
    "1.0",
    "1.5",
    "00012",
    "../",
    "../../../../tmp/x",
    "/etc/passwd",
    "..",
    ".",
    "a/b",
    "\u{feff}",
    "\u{0}",
    "\u{7f}",
    "\u{202e}",
    "é",
    "\u{1f600}",
    "stages:",
    "constructs:",
    "kind: cloudformation",
    "kind: kubernetes",
    "kind: helm",
    "kind: upload",
    "stack: s",
    "region: us-west-2",
    "region: ",
    "network: N",
    "eks_cluster: E",
    "Network",
    "Network.private_subnets",
    "Network.gpu_subnet",
    "Eks",
    "HyperPod",
    "Lifecycle",
];

/// Splices a corpus seed, mutates it a few times, and returns the input for iteration `i`.
pub fn input(seeds: &[Seed], seed: u64, i: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed ^ i.wrapping_mul(0xd1b5_4a32_d192_ed03));
    let mut data = rng.pick(seeds).bytes.clone();
    // Half the inputs are one mutation away from a seed (they get furthest), the rest more.
    let rounds = match rng.below(4) {
        0 | 1 => 1,
        2 => 2 + rng.below(3),
        _ => 2 + rng.below(15),
    };
    for _ in 0..rounds {
        mutate(&mut rng, &mut data, seeds);
    }
    data.truncate(MAX_INPUT);
    data
}

fn span(rng: &mut Rng, len: usize) -> (usize, usize) {
    if len == 0 {
        return (0, 0);
    }
    let start = rng.below(len);
    let max = (len - start).min(if rng.chance(8) { 4096 } else { 64 });
    (start, start + 1 + rng.below(max))
}

/// Line starts of `data`.
fn lines(data: &[u8]) -> Vec<usize> {
    let mut starts = vec![0];
    starts.extend(
        data.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i + 1),
    );
    starts
}

/// One mutation, chosen at random.
pub fn mutate(rng: &mut Rng, data: &mut Vec<u8>, seeds: &[Seed]) {
    let len = data.len();
    match rng.below(14) {
        // Flip a bit.
        0 if len > 0 => {
            let at = rng.below(len);
            data[at] ^= 1 << rng.below(8);
        }
        // Replace a byte with a random or a syntactically interesting one.
        1 if len > 0 => {
            let at = rng.below(len);
            data[at] = if rng.chance(2) {
                rng.next_u64() as u8
            } else {
                *rng.pick(b":-#'\"{}[],&*!|>?%@` \t\n\r0123456789.")
            };
        }
        // Insert a token.
        2 => {
            let at = rng.below(len + 1);
            let t = rng.pick(TOKENS).as_bytes();
            data.splice(at..at, t.iter().copied());
        }
        // Delete a span.
        3 if len > 0 => {
            let (a, b) = span(rng, len);
            data.drain(a..b);
        }
        // Copy a span elsewhere.
        4 if len > 0 => {
            let (a, b) = span(rng, len);
            let chunk = data[a..b].to_vec();
            let at = rng.below(len + 1);
            data.splice(at..at, chunk);
        }
        // Replace the value after a `key:` with a token (reaches the typed fields).
        5..=7 => {
            let starts = lines(data);
            let line = *rng.pick(&starts);
            let end = data[line..]
                .iter()
                .position(|b| *b == b'\n')
                .map_or(len, |p| line + p);
            if let Some(colon) = data[line..end].iter().position(|b| *b == b':') {
                let at = (line + colon + 1).min(end);
                let t = format!(" {}", rng.pick(TOKENS));
                data.splice(at..end, t.bytes());
            }
        }
        // Replace a run of digits with an edge number.
        8 => {
            let digits: Vec<usize> = (0..len)
                .filter(|&i| data[i].is_ascii_digit() && (i == 0 || !data[i - 1].is_ascii_digit()))
                .collect();
            if !digits.is_empty() {
                let a = *rng.pick(&digits);
                let b = a + data[a..].iter().take_while(|c| c.is_ascii_digit()).count();
                let numbers: Vec<&&str> = TOKENS
                    .iter()
                    .filter(|t| t.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '.'))
                    .collect();
                let n = rng.pick(&numbers).as_bytes();
                data.splice(a..b, n.iter().copied());
            }
        }
        // Duplicate or drop a line.
        9 => {
            let starts = lines(data);
            let i = rng.below(starts.len());
            let a = starts[i];
            let b = starts.get(i + 1).copied().unwrap_or(len);
            if rng.chance(2) {
                let line = data[a..b].to_vec();
                data.splice(a..a, line);
            } else {
                data.drain(a..b);
            }
        }
        // Swap two lines.
        10 => {
            let starts = lines(data);
            if starts.len() > 2 {
                let i = rng.below(starts.len() - 1);
                let j = rng.below(starts.len() - 1);
                let (i, j) = (i.min(j), i.max(j));
                if i != j {
                    let (a, b) = (starts[i], starts[i + 1]);
                    let (c, d) = (starts[j], starts[j + 1]);
                    let mut out = data[..a].to_vec();
                    out.extend_from_slice(&data[c..d]);
                    out.extend_from_slice(&data[b..c]);
                    out.extend_from_slice(&data[a..b]);
                    out.extend_from_slice(&data[d..]);
                    *data = out;
                }
            }
        }
        // Splice in part of another seed.
        11 => {
            let other = &rng.pick(seeds).bytes;
            if !other.is_empty() {
                let (a, b) = span(rng, other.len());
                let at = rng.below(len + 1);
                data.splice(at..at, other[a..b].iter().copied());
            }
        }
        // Change the indentation of a line.
        12 => {
            let starts = lines(data);
            let at = *rng.pick(&starts);
            if rng.chance(2) {
                data.splice(at..at, b"  ".iter().copied());
            } else if data.get(at) == Some(&b' ') {
                data.remove(at);
            }
        }
        // Grow: repeat a span many times (large files, many keys, deep nesting).
        _ if len > 0 && rng.chance(8) => {
            let (a, b) = span(rng, len);
            let chunk = data[a..b].to_vec();
            let times = 1 + rng.below(MAX_INPUT / chunk.len().max(1)).min(100_000);
            let mut grown = Vec::with_capacity(chunk.len() * times);
            for _ in 0..times {
                grown.extend_from_slice(&chunk);
                if grown.len() > MAX_INPUT {
                    break;
                }
            }
            data.splice(b..b, grown);
        }
        _ => {}
    }
}

/// What one input did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Refused, with diagnostics.
    Refused,
    /// Loaded (and for `Target::Synth`, synthesized).
    Accepted,
}

/// A broken invariant.
#[derive(Clone, Debug)]
pub struct Finding {
    pub target: Target,
    pub what: String,
}

/// The time an input may take: `per_mib` per MiB of input, and at least a tenth of it (the
/// fixed cost of synthesizing a whole stack from a small file).
pub fn budget(len: usize, per_mib: Duration) -> Duration {
    per_mib
        .mul_f64(len as f64 / (1024.0 * 1024.0))
        .max(per_mib / 10)
}

/// Runs one input through `target` and checks the invariants (except time and memory, which
/// the caller measures). `workdir`, when given, is the process's current directory (the
/// campaign enters an empty one), which must stay empty.
pub fn run(target: Target, bytes: &[u8], workdir: Option<&Path>) -> Result<Outcome, Finding> {
    let fail = |what: String| Finding { target, what };
    let text = String::from_utf8_lossy(bytes);
    let result = panic::catch_unwind(AssertUnwindSafe(|| -> Result<Outcome, String> {
        match target {
            Target::Fleet => return run_fleet(bytes),
            Target::Policy => return run_policy(&text),
            Target::Load | Target::Synth => {}
        }
        let loaded = hyperforge::stackfile::load_str("fuzz.yaml", &text);
        let app = match loaded {
            Err(ds) => {
                check_diagnostics(&ds)?;
                return Ok(Outcome::Refused);
            }
            Ok(app) => app,
        };
        if target == Target::Load {
            return Ok(Outcome::Accepted);
        }
        match app.synth() {
            Err(ds) => {
                check_diagnostics(&ds)?;
                Ok(Outcome::Refused)
            }
            Ok(assembly) => {
                if assembly.files().is_empty() {
                    return Err("synthesis succeeded with no files".to_owned());
                }
                for path in assembly.files().keys() {
                    if !hyperforge::assembly::is_contained(path) {
                        return Err(format!(
                            "artifact path `{path}` leaves the output directory"
                        ));
                    }
                }
                Ok(Outcome::Accepted)
            }
        }
    }));
    let outcome = match result {
        Ok(Ok(o)) => o,
        Ok(Err(what)) => return Err(fail(what)),
        Err(payload) => {
            let msg = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "a panic".to_owned());
            return Err(fail(format!("panic: {msg}")));
        }
    };
    if let Some(workdir) = workdir {
        if std::fs::read_dir(workdir).map_or(true, |mut d| d.next().is_some()) {
            return Err(fail(format!("a file was written in {}", workdir.display())));
        }
    }
    Ok(outcome)
}

fn run_fleet(bytes: &[u8]) -> Result<Outcome, String> {
    let path = fleet_dir().join("fuzz-fleet.yaml");
    std::fs::write(&path, bytes).map_err(|e| format!("writing the input: {e}"))?;
    match hyperforge::stackfile::fleet::load_file(&path) {
        Err(ds) => {
            check_diagnostics(&ds)?;
            Ok(Outcome::Refused)
        }
        Ok(fleet) => {
            let matrix = fleet.validate_matrix();
            if matrix.has_errors() {
                return Err(format!("a loaded fleet's matrix has errors:\n{matrix}"));
            }
            let members = fleet.members();
            if members.is_empty() || members.len() > hyperforge::fleet::MAX_MEMBERS {
                return Err(format!("a loaded fleet has {} members", members.len()));
            }
            let mut names = std::collections::BTreeSet::new();
            if let Some(twice) = members.iter().find(|m| !names.insert(m.name())) {
                return Err(format!("two members are named `{}`", twice.name()));
            }
            Ok(Outcome::Accepted)
        }
    }
}

fn run_policy(text: &str) -> Result<Outcome, String> {
    use hyperforge::policy::{check_templates, PolicyPack, RuleFile};
    let pack = PolicyPack {
        name: "fuzz".to_owned(),
        rules: vec![RuleFile {
            origin: "fuzz.guard".to_owned(),
            text: text.to_owned(),
        }],
    };
    let ds = check_templates(&[("fuzz.template.json", POLICY_TEMPLATE)], &pack);
    let mut invalid = false;
    for d in ds.iter() {
        use hyperforge::Code;
        if !matches!(d.code, Code::PolicyViolation | Code::PolicyRuleInvalid) {
            return Err(format!("a policy run reported {}", d.code));
        }
        invalid |= d.code == Code::PolicyRuleInvalid;
        if d.message.trim().is_empty() || d.path.trim().is_empty() {
            return Err(format!("a diagnostic without a message or location: {d:?}"));
        }
    }
    Ok(if invalid {
        Outcome::Refused
    } else {
        Outcome::Accepted
    })
}

fn check_diagnostics(ds: &hyperforge::diagnostics::Diagnostics) -> Result<(), String> {
    if !ds.has_errors() {
        return Err(format!(
            "refused without an error diagnostic ({} diagnostics)",
            ds.len()
        ));
    }
    for d in ds.iter() {
        if d.message.trim().is_empty() || d.path.trim().is_empty() || d.code.id().is_empty() {
            return Err(format!(
                "a diagnostic without a message, location or code: {d:?}"
            ));
        }
    }
    Ok(())
}

/// Writes `bytes` to `dir/<target>-<seed>-<label>.yaml` for reproduction.
pub fn save_finding(dir: &Path, target: Target, seed: u64, label: &str, bytes: &[u8]) -> PathBuf {
    std::fs::create_dir_all(dir).expect("creating the findings directory");
    let label: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("{}-{seed}-{label}.yaml", target.name()));
    std::fs::write(&path, bytes).expect("writing a finding");
    path
}
