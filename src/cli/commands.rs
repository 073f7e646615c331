//! One function per subcommand. Each returns the process exit code; messages go to stderr,
//! results to stdout.

use super::output::{self, Color};
use super::{CatalogKind, Exit, FillArgs, Global, StackArgs, SynthArgs, ValidateArgs};
use hyperforge::policy::PolicyPack;
use hyperforge::{App, Assembly, Code, Diagnostics, Formats, SynthOptions};
use std::path::PathBuf;

/// The stack files of `dir`: every `*.yaml`, sorted by name.
fn stack_files(dir: &std::path::Path) -> Result<Vec<PathBuf>, Exit> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        eprintln!(
            "error: cannot read stacks directory `{}`: {e}",
            dir.display()
        );
        Exit::Usage
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| {
            eprintln!(
                "error: cannot read stacks directory `{}`: {e}",
                dir.display()
            );
            Exit::Usage
        })?;
        let path = entry.path();
        if path.is_file() && path.extension().is_some_and(|x| x == "yaml") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Loads every stack file and keeps the stacks named in `select` (all when empty), as one app.
/// Each stack keeps the tags of the app its file described.
fn load(global: &Global, select: &[String]) -> Result<App, Exit> {
    load_as(global, select, false)
}

/// [`load`], printing the stack files' diagnostics as a JSON array on stdout when `json`.
fn load_as(global: &Global, select: &[String], json: bool) -> Result<App, Exit> {
    let files = stack_files(&global.stacks)?;
    if files.is_empty() {
        eprintln!(
            "error: no stack files (`*.yaml`) in `{}`",
            global.stacks.display()
        );
        return Err(Exit::Usage);
    }
    let mut app = App::new();
    let mut diagnostics = Diagnostics::new();
    for file in &files {
        if let Err(e) = std::fs::File::open(file) {
            eprintln!("error: cannot read stack file `{}`: {e}", file.display());
            return Err(Exit::Usage);
        }
        match hyperforge::stackfile::load_file(file) {
            Ok(loaded) => {
                for stack in loaded.stacks() {
                    let mut stack = stack.clone();
                    for (key, value) in loaded.tags() {
                        if !stack.tags().contains_key(key) {
                            stack = stack.tag(key.clone(), value.clone());
                        }
                    }
                    app.add_stack(stack);
                }
            }
            Err(ds) => diagnostics.extend(ds),
        }
    }
    if diagnostics.has_errors() {
        if json {
            outln!("{}", diagnostics.to_json());
        } else {
            eprintln!("{diagnostics}");
        }
        return Err(Exit::Failed);
    }
    if select.is_empty() {
        return Ok(app);
    }
    let known: Vec<&str> = app.stacks().iter().map(|s| s.name()).collect();
    let unknown: Vec<&String> = select
        .iter()
        .filter(|s| !known.contains(&s.as_str()))
        .collect();
    if !unknown.is_empty() {
        let names: Vec<&str> = unknown.iter().map(|s| s.as_str()).collect();
        eprintln!(
            "error: unknown stack(s): {}\nknown stacks in `{}`: {}",
            names.join(", "),
            global.stacks.display(),
            known.join(", ")
        );
        return Err(Exit::Usage);
    }
    let mut selected = App::new();
    for stack in app.stacks() {
        if select.iter().any(|s| s == stack.name()) {
            selected.add_stack(stack.clone());
        }
    }
    Ok(selected)
}

/// Synthesizes `app`, printing diagnostics; `None` (exit 1) on errors.
fn synthesize(app: &App, options: &SynthOptions) -> Result<Assembly, Exit> {
    match app.synth_with(options) {
        Ok(assembly) => {
            for warning in assembly.warnings() {
                eprintln!("{warning}\n");
            }
            Ok(assembly)
        }
        Err(diagnostics) => {
            eprintln!("{diagnostics}");
            Err(Exit::Failed)
        }
    }
}

/// [`synthesize`], with the time of each phase.
fn synthesize_timed(
    app: &App,
    options: &SynthOptions,
) -> Result<(Assembly, hyperforge::synth::SynthTimings), Exit> {
    match hyperforge::synth::synthesize_timed(app, options) {
        Ok((assembly, timings)) => {
            for warning in assembly.warnings() {
                eprintln!("{warning}\n");
            }
            Ok((assembly, timings))
        }
        Err(diagnostics) => {
            eprintln!("{diagnostics}");
            Err(Exit::Failed)
        }
    }
}

/// `--timings`: one line, in milliseconds (fractions: the phases are short).
fn timings_line(
    loading: std::time::Duration,
    t: &hyperforge::synth::SynthTimings,
    (last, took): (&str, std::time::Duration),
    total: std::time::Duration,
) -> String {
    let ms = |d: std::time::Duration| format!("{:.2}", d.as_secs_f64() * 1e3);
    format!(
        "timings: loading {} ms; synthesis of {} stack(s), summed over them: validation {} ms, expansion {} ms, lowering {} ms, serialization {} ms, runbook {} ms; {last} {} ms; total {} ms",
        ms(loading),
        t.stacks,
        ms(t.validation),
        ms(t.expansion),
        ms(t.lowering),
        ms(t.serialization),
        ms(t.runbook),
        ms(took),
        ms(total)
    )
}

fn run(result: Result<Exit, Exit>) -> Exit {
    result.unwrap_or_else(|e| e)
}

/// Compares `assembly` with `--out`.
fn compare(global: &Global, assembly: &Assembly, color: Color) -> Result<output::DirDiff, Exit> {
    let on_disk = output::read_tree(global.out()).map_err(|e| {
        eprintln!(
            "error: cannot read output directory `{}`: {e}",
            global.out().display()
        );
        Exit::Usage
    })?;
    Ok(output::diff_trees(&on_disk, assembly.files(), color))
}

/// `hyperforge synth`.
pub fn synth(global: &Global, color: Color, args: &SynthArgs) -> Exit {
    if args.format.is_empty()
        || args
            .format
            .iter()
            .any(|f| hyperforge::Format::from(*f) == hyperforge::Format::Runbook)
    {
        hyperforge::runbook::prepare();
    }
    run((|| {
        let formats = if args.format.is_empty() {
            Formats::all()
        } else {
            args.format
                .iter()
                .map(|f| hyperforge::Format::from(*f))
                .collect()
        };
        let options = SynthOptions {
            deny_warnings: args.deny_warnings,
            formats,
        };
        if let (Some(file), None) = (&args.fleet, &args.member) {
            return Ok(super::fleet::synth(
                global,
                color,
                file,
                options,
                args.threads,
                args.check,
                args.timings,
            ));
        }
        // Guard rules read CloudFormation templates: with none written, none would be
        // checked and the option would do nothing.
        if !args.policy.is_empty() && !formats.contains(hyperforge::Format::CloudFormation) {
            eprintln!(
                "error: --policy evaluates Guard rules over the CloudFormation templates, and --format writes none\n  = help: add `cloudformation` to --format, or check the rules with `hyperforge validate --policy ...`"
            );
            return Err(Exit::Usage);
        }
        let start = std::time::Instant::now();
        let packs = load_packs(&args.policy, false)?;
        let app = match (&args.fleet, &args.member) {
            (Some(file), Some(member)) => super::fleet::member_app(global, file, member)?,
            _ => load(global, &args.select.names)?,
        };
        let loading = start.elapsed();
        let (assembly, timings) = synthesize_timed(&app, &options)?;
        let report = |what: &str, took: std::time::Duration| {
            if args.timings {
                eprintln!(
                    "{}",
                    timings_line(loading, &timings, (what, took), start.elapsed())
                );
            }
        };
        // The policies gate the output as synthesis's own rules do: nothing is written (or
        // compared) when a rule fails.
        let findings = policy_findings(&assembly, &packs, false);
        if !findings.is_empty() {
            eprintln!("{findings}");
        }
        if findings.has_errors() || (args.deny_warnings && findings.has_warnings()) {
            eprintln!(
                "error: the policy checks failed; `{}` was left as it was",
                global.out().display()
            );
            return Err(Exit::Failed);
        }
        let written = start.elapsed();
        if args.check {
            let diff = compare(global, &assembly, color)?;
            report("comparing", start.elapsed() - written);
            if diff.is_empty() {
                outln!(
                    "{} is up to date ({} files)",
                    global.out().display(),
                    assembly.files().len()
                );
                return Ok(Exit::Ok);
            }
            out!("{}", diff.text);
            eprintln!(
                "error: `{}` differs from what `hyperforge synth` generates: {}; run `hyperforge synth` and commit the result",
                global.out().display(),
                diff.summary()
            );
            return Ok(Exit::Failed);
        }
        assembly.write_to(global.out()).map_err(|e| {
            eprintln!("error: {e}");
            Exit::Io
        })?;
        report("writing", start.elapsed() - written);
        outln!(
            "wrote {} files to {}",
            assembly.files().len(),
            global.out().display()
        );
        Ok(Exit::Ok)
    })())
}

/// The packs `--policy` names. One that cannot be loaded (unknown, unreadable, not a file,
/// too large) is an HF1002 error, printed as JSON with `json`; nothing is synthesized then.
fn load_packs(names: &[String], json: bool) -> Result<Vec<PolicyPack>, Exit> {
    let mut packs = Vec::new();
    let mut refused = Diagnostics::new();
    for name in names {
        match PolicyPack::load(name) {
            Ok(pack) => packs.push(pack),
            Err(e) => refused.push(hyperforge::diagnostics::Diagnostic::new(
                Code::PolicyRuleInvalid,
                name.as_str(),
                format!("--policy: {e}"),
                format!(
                    "name a vendored pack ({}) or a readable .guard file or directory of them, at most {} MiB of rules",
                    PolicyPack::BUILTIN.join(", "),
                    hyperforge::policy::MAX_RULE_BYTES >> 20
                ),
            )),
        }
    }
    if refused.is_empty() {
        return Ok(packs);
    }
    if json {
        outln!("{}", refused.to_json());
    } else {
        eprintln!("{refused}");
    }
    Err(Exit::Usage)
}

/// Every pack's findings over `assembly`, with one summary line per pack on standard error
/// unless `quiet`.
fn policy_findings(assembly: &Assembly, packs: &[PolicyPack], quiet: bool) -> Diagnostics {
    let mut diagnostics = Diagnostics::new();
    for pack in packs {
        let report = assembly.check_policies(pack);
        if !quiet {
            let ms: Vec<String> = report
                .stacks
                .iter()
                .map(|s| format!("{} {} ms", s.stack, s.elapsed.as_millis()))
                .collect();
            eprintln!(
                "policy {}: {} rule files over {} template(s) ({}), {} finding(s)",
                pack.name,
                report.rule_files,
                report.templates(),
                ms.join(", "),
                report.diagnostics.len()
            );
        }
        diagnostics.extend(report.diagnostics);
    }
    diagnostics
}

/// `hyperforge validate`.
pub fn validate(global: &Global, args: &ValidateArgs) -> Exit {
    if let Some(file) = &args.fleet {
        return super::fleet::validate(global, file, args.json, args.deny_warnings);
    }
    run((|| {
        let packs = load_packs(&args.policy, args.json)?;
        let app = load_as(global, &args.select.names, args.json)?;
        // Synthesis in memory runs every rule, including the limits of rendered templates;
        // the runbook, which no rule reads, is not rendered.
        let diagnostics = match app.synth_with(&SynthOptions {
            deny_warnings: false,
            formats: hyperforge::Formats::checked(),
        }) {
            Ok(assembly) => {
                let mut diagnostics = assembly.warnings().clone();
                diagnostics.extend(policy_findings(&assembly, &packs, args.json));
                diagnostics
            }
            Err(ds) => ds,
        };
        let failed = diagnostics.has_errors() || (args.deny_warnings && diagnostics.has_warnings());
        if args.json {
            outln!("{}", diagnostics.to_json());
        } else if diagnostics.is_empty() {
            outln!("{} stack(s) valid: no diagnostics", app.stacks().len());
        } else {
            eprintln!("{diagnostics}");
        }
        Ok(if failed { Exit::Failed } else { Exit::Ok })
    })())
}

/// `hyperforge diff`.
pub fn diff(global: &Global, color: Color, args: &StackArgs) -> Exit {
    run((|| {
        let app = load(global, &args.names)?;
        let assembly = synthesize(&app, &SynthOptions::default())?;
        let diff = compare(global, &assembly, color)?;
        if diff.is_empty() {
            outln!("no changes");
            return Ok(Exit::Ok);
        }
        out!("{}", diff.text);
        outln!("{}", diff.summary());
        Ok(Exit::Failed)
    })())
}

/// `hyperforge fill`: the stage's file with its placeholders replaced, on standard output.
pub fn fill(global: &Global, args: &FillArgs) -> Exit {
    use hyperforge::assembly::manifest::{Manifest, StageManifest};
    run((|| {
        let root = global.out();
        let usage = |message: String| {
            eprintln!("error: {message}");
            Exit::Usage
        };
        let path = root.join("manifest.json");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| usage(format!("cannot read `{}`: {e}", path.display())))?;
        let manifest: Manifest = serde_json::from_str(&text)
            .map_err(|e| usage(format!("`{}` is not a manifest: {e}", path.display())))?;
        if manifest.version != Manifest::VERSION {
            return Err(usage(format!(
                "`{}` is manifest version {}; this hyperforge reads version {} (synthesize again)",
                path.display(),
                manifest.version,
                Manifest::VERSION
            )));
        }
        let stack = manifest
            .stacks
            .iter()
            .find(|s| s.name == args.stack)
            .ok_or_else(|| {
                let names: Vec<&str> = manifest.stacks.iter().map(|s| s.name.as_str()).collect();
                usage(format!(
                    "no stack `{}` in `{}` (stacks: {})",
                    args.stack,
                    path.display(),
                    names.join(", ")
                ))
            })?;
        let stage = stack
            .stages
            .iter()
            .find(|s| s.name() == args.stage)
            .ok_or_else(|| {
                let names: Vec<&str> = stack.stages.iter().map(StageManifest::name).collect();
                usage(format!(
                    "stack `{}` has no stage `{}` (stages: {})",
                    stack.name,
                    args.stage,
                    names.join(", ")
                ))
            })?;
        let StageManifest::Kubernetes {
            values, artifacts, ..
        } = stage
        else {
            return Err(usage(format!(
                "stage `{}` is a {} stage; only Kubernetes stages carry placeholders",
                args.stage,
                stage.kind()
            )));
        };
        let file = artifacts
            .first()
            .map(|a| a.path.as_str())
            .filter(|p| {
                let p = std::path::Path::new(p);
                p.is_relative()
                    && p.components()
                        .all(|c| matches!(c, std::path::Component::Normal(_)))
            })
            .ok_or_else(|| {
                usage(format!(
                    "stage `{}` lists no file inside the assembly",
                    args.stage
                ))
            })?;
        let mut given = Vec::new();
        for value in &args.values {
            let Some((name, v)) = value.split_once('=') else {
                return Err(usage(format!("--value `{value}` is not VARIABLE=VALUE")));
            };
            given.push((name.to_owned(), v.to_owned()));
        }
        let objects = std::fs::read_to_string(root.join(file))
            .map_err(|e| usage(format!("cannot read `{}`: {e}", root.join(file).display())))?;
        match hyperforge::assembly::fill::fill(&stack.inputs, values, &objects, &given) {
            Ok(filled) => {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                out.write_all(filled.as_bytes())
                    .and_then(|()| out.flush())
                    .map_err(|e| {
                        eprintln!("error: cannot write the filled objects: {e}");
                        Exit::Io
                    })?;
                Ok(Exit::Ok)
            }
            Err(problems) => {
                for p in &problems {
                    eprintln!("error: {file}: {p}\n  help: {}", p.help());
                }
                Err(Exit::Failed)
            }
        }
    })())
}

/// Where each endpoint's weights come from and what each staged copy costs, as the manifest's
/// inventory records them (S3 Standard storage priced for `region`).
fn weights_lines(
    inventory: &hyperforge::assembly::inventory::Inventory,
    region: &str,
) -> Vec<String> {
    let minutes = |secs: u64| secs.div_ceil(60);
    let served = inventory.endpoints.iter().map(|e| {
        let cold = e.cold_start_secs.map_or(String::new(), |s| {
            format!(": about {} min from node ready to serving", minutes(s))
        });
        format!(
            "{}/{} serves {} from {}{cold}",
            e.namespace, e.name, e.model_id, e.weights_source
        )
    });
    let staged = inventory.stagings.iter().map(|st| {
        let size = st
            .size_gib()
            .map_or(String::new(), |gib| format!(" ({gib:.1} GiB)"));
        let time = st.estimate_secs.map_or(String::new(), |s| {
            format!(", about {} min once", minutes(s))
        });
        let price = match st.storage_usd_per_month(region) {
            Some(usd) => format!(", ${usd:.2}/month in S3 Standard"),
            None => ", storage not priced in this region".to_owned(),
        };
        format!(
            "{}/{} stages {}@{} into s3://{}/{}{size} from the Hub{time}{price}",
            st.namespace, st.job, st.model_id, st.revision, st.bucket, st.prefix
        )
    });
    served.chain(staged).collect()
}

/// `hyperforge list`.
pub fn list(global: &Global) -> Exit {
    run((|| {
        let app = load(global, &[])?;
        let assembly = synthesize(&app, &SynthOptions::default())?;
        let mut out = String::new();
        for stack in &assembly.manifest().stacks {
            out.push_str(&format!("{} ({})\n", stack.name, stack.region));
            let stages = &stack.stages;
            let rows: Vec<Vec<String>> = stages
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    vec![
                        format!("  {}.", i + 1),
                        s.name().to_owned(),
                        s.kind().to_owned(),
                        s.stack_name().unwrap_or_default().to_owned(),
                    ]
                })
                .collect();
            let table = output::table(
                &["  #", "stage", "kind", "CloudFormation stack"],
                &rows,
                &[true, false, false, false],
            );
            for (line, stage) in table
                .lines()
                .zip(std::iter::once(None).chain(stages.iter().map(Some)))
            {
                out.push_str(line);
                out.push('\n');
                if let Some(stage) = stage {
                    for a in stage.artifacts() {
                        out.push_str(&format!("        {}\n", a.path));
                    }
                }
            }
            let inventory = &stack.inventory;
            let weights = weights_lines(inventory, &stack.region);
            if !weights.is_empty() {
                out.push_str("  weights:\n");
                for line in weights {
                    out.push_str(&format!("    {line}\n"));
                }
            }
            if !inventory.alerts.is_empty() {
                out.push_str("  alerts:\n");
                for a in &inventory.alerts {
                    let after = if a.for_duration.is_empty() {
                        "at once".to_owned()
                    } else {
                        format!("after {}", a.for_duration)
                    };
                    out.push_str(&format!(
                        "        {} ({}, {after}): {}\n",
                        a.name, a.severity, a.expression
                    ));
                }
            }
            let timelines: Vec<_> = inventory
                .capacity
                .iter()
                .filter_map(|c| match &c.source {
                    hyperforge::assembly::inventory::CapacitySourceEntry::CapacityBlock {
                        reservation,
                        timeline: Some(t),
                        ..
                    } => Some((c, format!("Capacity Block {reservation}"), t)),
                    hyperforge::assembly::inventory::CapacitySourceEntry::TrainingPlan {
                        arn,
                        timeline: Some(t),
                        ..
                    } => Some((c, format!("training plan {arn}"), t)),
                    _ => None,
                })
                .collect();
            if !timelines.is_empty() {
                out.push_str("  reservation timelines (UTC):\n");
                for (c, reservation, t) in timelines {
                    out.push_str(&format!(
                        "        {} on {reservation} ({} days)\n",
                        c.path, t.days
                    ));
                    let hyperpod =
                        c.launched_by == hyperforge::assembly::inventory::LaunchedBy::HyperPod;
                    let serving = t.serving_from.as_deref().map(|at| {
                        format!(
                            "serving {at} (cold start {} min)",
                            t.cold_start_minutes.unwrap_or_default()
                        )
                    });
                    let steps = [
                        Some(format!("opens {}", t.start)),
                        serving,
                        Some(format!("drain by {}", t.drain_by)),
                        if hyperpod {
                            None
                        } else if c.pool {
                            Some(format!("Karpenter drains {}", t.scale_down_at))
                        } else {
                            Some(format!("EKS scales to zero {}", t.scale_down_at))
                        },
                        Some(if hyperpod {
                            format!("SageMaker terminates from {}", t.terminations_from)
                        } else {
                            format!("EC2 terminates from {}", t.terminations_from)
                        }),
                        Some(format!("ends {}", t.end)),
                    ];
                    for step in steps.into_iter().flatten() {
                        out.push_str(&format!("          {step}\n"));
                    }
                    if let Some(idle) = t.idle_minutes {
                        out.push_str(&format!("          {idle} min paid without serving\n"));
                    }
                }
            }
            if !inventory.capacity_ends.is_empty() {
                out.push_str("  capacity ends:\n");
                for e in &inventory.capacity_ends {
                    let (what, ec2) = match (&e.reservation_id, &e.training_plan_arn) {
                        (Some(id), _) => (
                            format!("Capacity Block {id}"),
                            ", and EC2's own warning 40 min before",
                        ),
                        (None, Some(arn)) => (format!("training plan {arn}"), ""),
                        (None, None) => (String::new(), ""),
                    };
                    out.push_str(&format!(
                        "        {what} ends {}: warned {} h before{ec2}\n",
                        e.end_time, e.lead_hours
                    ));
                }
            }
            for (key, entry) in [("terraform", &stack.terraform), ("runbook", &stack.runbook)] {
                if let Some(entry) = entry {
                    out.push_str(&format!("  {key}:\n"));
                    for a in &entry.artifacts {
                        out.push_str(&format!("        {}\n", a.path));
                    }
                }
            }
            out.push('\n');
        }
        out!("{}", out.trim_end_matches('\n'));
        outln!();
        Ok(Exit::Ok)
    })())
}

/// `hyperforge catalog`.
pub fn catalog(which: CatalogKind) -> Exit {
    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
    let table = match which {
        CatalogKind::Instances => {
            let rows: Vec<Vec<String>> = hyperforge::catalog::instances()
                .iter()
                .map(|i| {
                    vec![
                        i.name.to_owned(),
                        i.accelerator.to_owned(),
                        i.gpu_count.to_string(),
                        format!("{:.1}", i.gpu_memory_mib as f64 / 1024.0),
                        i.vcpus.to_string(),
                        (i.memory_mib / 1024).to_string(),
                        i.efa_max.to_string(),
                        i.on_demand_usd_per_hour_us_east_1
                            .map_or_else(|| "-".to_owned(), |p| format!("{p:.2}")),
                        if i.hyperpod_regions.is_empty() {
                            "-".to_owned()
                        } else {
                            i.hyperpod_regions.join(",")
                        },
                    ]
                })
                .collect();
            let mut t = output::table(
                &[
                    "instance",
                    "accelerator",
                    "GPUs",
                    "GiB/GPU",
                    "vCPU",
                    "memory GiB",
                    "EFA",
                    "$/h us-east-1",
                    "HyperPod regions",
                ],
                &rows,
                &[false, false, true, true, true, true, true, true, false],
            );
            t.push_str(&format!(
                "\nPrices: EC2 on-demand, {}, AWS Price List of {}. HyperPod ml. prices, training plans and Capacity Blocks are priced separately.\n",
                hyperforge::cost::PRICE_REGION,
                hyperforge::cost::PRICE_DATE
            ));
            t
        }
        CatalogKind::Models => {
            let rows: Vec<Vec<String>> = hyperforge::catalog::models()
                .iter()
                .map(|m| {
                    let params = m.total_parameters() as f64;
                    let params = if params >= 1e12 {
                        format!("{:.2} T", params / 1e12)
                    } else {
                        format!("{:.1} B", params / 1e9)
                    };
                    vec![
                        m.hf_id.to_string(),
                        params,
                        format!("{:.1}", m.weight_bytes() as f64 / GIB),
                        m.attention_heads.to_string(),
                        m.max_context_tokens.to_string(),
                    ]
                })
                .collect();
            output::table(
                &["model", "parameters", "weights GiB", "heads", "context"],
                &rows,
                &[false, true, true, true, true],
            )
        }
    };
    out!("{table}");
    Exit::Ok
}

/// `hyperforge explain`.
pub fn explain(code: &str) -> Exit {
    match Code::from_id(code.trim()) {
        Some(code) => {
            out!("{}", code.explain_markdown());
            Exit::Ok
        }
        None => {
            let known: Vec<String> = Code::ALL
                .iter()
                .map(|c| format!("  {}  {}", c.id(), c.summary()))
                .collect();
            eprintln!(
                "error: unknown diagnostic code `{code}`\n\nknown codes:\n{}",
                known.join("\n")
            );
            Exit::Usage
        }
    }
}

/// `hyperforge cost`.
pub fn cost(global: &Global, args: &StackArgs) -> Exit {
    run((|| {
        let app = load(global, &args.names)?;
        let report = hyperforge::cost::estimate(&app);
        outln!("{report}");
        for stack in report.stacks.iter().filter(|s| s.lines.is_empty()) {
            outln!(
                "\nnote: {} has no instances of its own (no HyperPod instance group, node group or Karpenter pool)",
                stack.stack
            );
        }
        outln!(
            "\nCapacity Block and training plan prices are set at purchase (paid up front) and are not part of the hourly estimate; a Capacity Block's window is priced from its `upfront_fee_usd` when given."
        );
        Ok(Exit::Ok)
    })())
}
