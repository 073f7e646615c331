//! `synth --fleet` and `validate --fleet`: a fleet file's members, synthesized to a directory,
//! compared with one (`--check`), or only checked.

use super::output::{self, Color};
use super::{Exit, Global};
use hyperforge::fleet::{Fleet, FleetOptions, FleetOutput, FleetSink, FleetWriteError};
use hyperforge::synth::SynthTimings;
use hyperforge::{Diagnostics, SynthOptions};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Loads the fleet file (its stack file may be in the fleet file's directory or `--stacks`),
/// printing its diagnostics.
fn load(global: &Global, file: &Path, json: bool) -> Result<Fleet, Exit> {
    if let Err(e) = std::fs::File::open(file) {
        eprintln!("error: cannot read fleet file `{}`: {e}", file.display());
        return Err(Exit::Usage);
    }
    hyperforge::stackfile::fleet::load_file_in(file, &[global.stacks.as_path()]).map_err(|ds| {
        print_diagnostics(&ds, json);
        Exit::Failed
    })
}

fn print_diagnostics(ds: &Diagnostics, json: bool) {
    if json {
        outln!("{}", ds.to_json());
    } else {
        eprintln!("{ds}");
    }
}

/// What the summary says after synthesis.
fn summary(fleet: &Fleet, output: &FleetOutput, elapsed: Duration) -> String {
    let m = &output.manifest;
    let t = &output.timings;
    let mut text = format!(
        "fleet {}: {} members, {} StackSets, {} per-member stages; {} files ({} bytes) in {:.2} s",
        fleet.name(),
        m.members.len(),
        m.stack_sets.len(),
        m.per_member_stages.len(),
        output.files,
        output.bytes,
        elapsed.as_secs_f64()
    );
    text.push_str(&format!("\n  {}", phases(t)));
    for s in &m.stack_sets {
        text.push_str(&format!(
            "\n  StackSet {} (stage {}): {} instances",
            s.name,
            s.stage,
            s.instances.len()
        ));
    }
    for s in &m.per_member_stages {
        text.push_str(&format!("\n  per member: {} ({})", s.stage, s.reason));
    }
    text
}

/// The synthesis time by phase, summed over the distinct assemblies (each synthesized once
/// for all the members that share it).
fn phases(t: &SynthTimings) -> String {
    format!(
        "time summed over the {} distinct assemblies synthesized: validation {} ms, expansion {} ms, lowering {} ms, serialization {} ms, runbook {} ms",
        t.stacks,
        t.validation.as_millis(),
        t.expansion.as_millis(),
        t.lowering.as_millis(),
        t.serialization.as_millis(),
        t.runbook.as_millis()
    )
}

fn options(synth: SynthOptions, threads: Option<usize>) -> FleetOptions {
    FleetOptions {
        synth,
        threads: threads.unwrap_or(0),
    }
}

/// `hyperforge synth --fleet FILE`.
pub fn synth(
    global: &Global,
    color: Color,
    file: &Path,
    synth: SynthOptions,
    threads: Option<usize>,
    check: bool,
    timings: bool,
) -> Exit {
    let fleet = match load(global, file, false) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let out = global.fleet_out();
    let options = options(synth, threads);
    let start = Instant::now();
    if check {
        let (files, output) = match fleet.synth(&options) {
            Ok(done) => done,
            Err(ds) => {
                eprintln!("{ds}");
                return Exit::Failed;
            }
        };
        let on_disk = match output::read_tree(out) {
            Ok(t) => t,
            Err(e) => {
                eprintln!(
                    "error: cannot read output directory `{}`: {e}",
                    out.display()
                );
                return Exit::Usage;
            }
        };
        for warning in &output.warnings {
            eprintln!("{warning}\n");
        }
        let diff = output::diff_trees(&on_disk, &files, color);
        if timings {
            eprintln!(
                "timings: {}; comparing included, total {} ms",
                phases(&output.timings),
                start.elapsed().as_millis()
            );
        }
        if diff.is_empty() {
            outln!("{} is up to date ({} files)", out.display(), files.len());
            return Exit::Ok;
        }
        out!("{}", diff.text);
        eprintln!(
            "error: `{}` differs from what `hyperforge synth --fleet` generates: {}; run it and commit the result",
            out.display(),
            diff.summary()
        );
        return Exit::Failed;
    }
    match fleet.write_to(out, &options) {
        Ok(output) => {
            for warning in &output.warnings {
                eprintln!("{warning}\n");
            }
            if timings {
                eprintln!(
                    "timings: {}; writing included, total {} ms",
                    phases(&output.timings),
                    start.elapsed().as_millis()
                );
            }
            outln!("{}", summary(&fleet, &output, start.elapsed()));
            outln!("wrote {} files to {}", output.files, out.display());
            Exit::Ok
        }
        Err(FleetWriteError::Diagnostics(ds)) => {
            eprintln!("{ds}");
            Exit::Failed
        }
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Io
        }
    }
}

/// `hyperforge synth --fleet FILE --member MEMBER`: that member's description, synthesized
/// as a stack alone is.
pub fn member_app(global: &Global, file: &Path, member: &str) -> Result<hyperforge::App, Exit> {
    let fleet = load(global, file, false)?;
    let ds = fleet.validate_matrix();
    if ds.has_errors() {
        eprintln!("{ds}");
        return Err(Exit::Failed);
    }
    let members = fleet.members();
    let Some(found) = members.iter().find(|m| m.name() == member) else {
        let names: Vec<&str> = members.iter().take(5).map(|m| m.name()).collect();
        eprintln!(
            "error: fleet `{}` has no member `{member}`\n  = help: its members are named <fleet>-<region>[-<target>][-<model>], such as {}{}",
            fleet.name(),
            names.join(", "),
            if members.len() > names.len() { ", ..." } else { "" }
        );
        return Err(Exit::Usage);
    };
    fleet.describe(found).map_err(|ds| {
        eprintln!("{ds}");
        Exit::Failed
    })
}

/// Counts what synthesis would write, and keeps none of it.
struct Discard {
    files: AtomicUsize,
    bytes: AtomicU64,
}

impl FleetSink for Discard {
    fn file(&self, _path: &str, bytes: &[u8]) -> Result<(), String> {
        self.files.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

/// `hyperforge validate --fleet FILE`.
pub fn validate(global: &Global, file: &Path, json: bool, deny_warnings: bool) -> Exit {
    let fleet = match load(global, file, json) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let sink = Discard {
        files: AtomicUsize::new(0),
        bytes: AtomicU64::new(0),
    };
    let options = options(
        SynthOptions {
            deny_warnings,
            formats: hyperforge::Formats::checked(),
        },
        None,
    );
    let start = Instant::now();
    let (diagnostics, members) = match fleet.synth_into(&options, &sink) {
        Ok(output) => (output.warnings, output.manifest.members.len()),
        Err(ds) => (ds, 0),
    };
    let failed = diagnostics.has_errors() || (deny_warnings && diagnostics.has_warnings());
    if json {
        outln!("{}", diagnostics.to_json());
    } else {
        if !diagnostics.is_empty() {
            eprintln!("{diagnostics}");
        }
        if !failed {
            outln!(
                "fleet {}: {members} member(s) valid in {:.2} s",
                fleet.name(),
                start.elapsed().as_secs_f64()
            );
        }
    }
    if failed {
        Exit::Failed
    } else {
        Exit::Ok
    }
}
