//! End-to-end tests of the `hyperforge` binary: every subcommand, exit codes, `synth --check`,
//! and that a failed run leaves the previous output untouched.

use crate::common::tree;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn hyperforge(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hyperforge"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("the binary runs")
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A temporary project with a copy of the repository's stack files (`stacks/*.yaml`; the
/// fleet directory is `fleet_file`'s).
fn project() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let stacks = tmp.path().join("stacks");
    std::fs::create_dir_all(&stacks).unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("stacks");
    for entry in std::fs::read_dir(repo).unwrap() {
        let path = entry.unwrap().path();
        if !path.is_file() {
            continue;
        }
        std::fs::copy(&path, stacks.join(path.file_name().unwrap())).unwrap();
    }
    let root = tmp.path().to_path_buf();
    (tmp, root)
}

#[test]
fn synth_writes_the_reference_output_and_check_passes() {
    let (_tmp, root) = project();
    let o = hyperforge(&root, &["synth"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = root.join("hyperforge.out");
    // Same bytes as the reference apps synthesized by the library.
    for app in [
        crate::reference::kimi_k3_hyperpod(),
        crate::reference::kimi_k3_eks(),
    ] {
        let assembly = app.synth().unwrap();
        for (path, bytes) in assembly.files() {
            if path == "manifest.json" {
                continue;
            }
            assert_eq!(&std::fs::read(out.join(path)).unwrap(), bytes, "{path}");
        }
    }
    assert!(out.join("kimi-k3-hyperpod/RUNBOOK.md").is_file());

    let o = hyperforge(&root, &["synth", "--check"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("up to date"));
    let o = hyperforge(&root, &["diff"]);
    assert_eq!(code(&o), 0);
    assert!(stdout(&o).contains("no changes"));

    // One field changed in a written template: check and diff fail with a unified diff.
    let template = out.join("kimi-k3-eks/02-nodes.template.json");
    let text = std::fs::read_to_string(&template).unwrap();
    std::fs::write(
        &template,
        text.replacen("cr-0123456789abcdef0", "cr-0fffffffffffffff0", 1),
    )
    .unwrap();
    let o = hyperforge(&root, &["synth", "--check"]);
    assert_eq!(code(&o), 1);
    let diff = stdout(&o);
    assert!(
        diff.contains("--- a/kimi-k3-eks/02-nodes.template.json"),
        "{diff}"
    );
    assert!(diff.contains("-") && diff.contains("cr-0fffffffffffffff0"));
    assert!(!diff.contains("\u{1b}["), "NO_COLOR output has no escapes");
    let o = hyperforge(&root, &["diff"]);
    assert_eq!(code(&o), 1);
    assert!(stdout(&o).contains("+++ b/kimi-k3-eks/02-nodes.template.json"));
    let o = hyperforge(&root, &["--color", "always", "diff"]);
    assert!(stdout(&o).contains("\u{1b}[32m"), "green additions");

    // An extra file is a difference too.
    std::fs::write(&template, text).unwrap();
    std::fs::write(out.join("stray.txt"), "x").unwrap();
    let o = hyperforge(&root, &["synth", "--check"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("1 extra"), "{}", stderr(&o));
}

#[test]
fn synth_filters_formats_and_stacks() {
    let (_tmp, root) = project();
    let o = hyperforge(
        &root,
        &[
            "synth",
            "kimi-k3-eks",
            "--format",
            "kubernetes,runbook",
            "--out",
            "k8s",
        ],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let files: Vec<String> = tree(&root.join("k8s"))
        .into_iter()
        .map(|(p, _)| {
            p.strip_prefix(root.join("k8s"))
                .unwrap()
                .display()
                .to_string()
        })
        .collect();
    // Stage files by stage name (`NN-<stage>.yaml`, NN the stage's place in the stack).
    let by_stage: Vec<String> = files
        .iter()
        .map(|f| match f.split_once('/') {
            Some((stack, file)) => match file.split_once('-') {
                Some((n, rest)) if n.chars().all(|c| c.is_ascii_digit()) => {
                    format!("{stack}/NN-{rest}")
                }
                _ => f.clone(),
            },
            None => f.clone(),
        })
        .collect();
    assert_eq!(
        by_stage,
        [
            "kimi-k3-eks/NN-weights.yaml",
            "kimi-k3-eks/NN-workload.yaml",
            "kimi-k3-eks/RUNBOOK.md",
            "manifest.json"
        ]
    );
    let manifest = std::fs::read_to_string(root.join("k8s/manifest.json")).unwrap();
    assert!(manifest.contains("kimi-k3-eks-foundation"), "stages stay");
    assert!(!manifest.contains("template.json") && !manifest.contains("terraform"));
    // `--timings` splits the run by phase, on standard error, writing or comparing.
    for (args, last) in [
        (
            &["synth", "kimi-k3-eks", "--timings", "--out", "timed"][..],
            "writing",
        ),
        (
            &[
                "synth",
                "kimi-k3-eks",
                "--timings",
                "--out",
                "timed",
                "--check",
            ][..],
            "comparing",
        ),
    ] {
        let o = hyperforge(&root, args);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let line = stderr(&o)
            .lines()
            .find(|l| l.starts_with("timings: "))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no timings: {}", stderr(&o)));
        for phase in [
            "loading",
            "synthesis of 1 stack(s)",
            "validation",
            "expansion",
            "lowering",
            "serialization",
            "runbook",
            last,
            "total",
        ] {
            assert!(line.contains(phase), "{phase}: {line}");
        }
        assert!(!stdout(&o).contains("timings"), "{}", stdout(&o));
    }
}

#[test]
fn failed_synth_leaves_previous_output_untouched() {
    let (_tmp, root) = project();
    assert_eq!(code(&hyperforge(&root, &["synth"])), 0);
    let before = tree(&root.join("hyperforge.out"));
    std::fs::write(
        root.join("stacks/broken.yaml"),
        "# not a stack this loader knows\n",
    )
    .unwrap();
    let o = hyperforge(&root, &["synth"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("error[HF"), "{}", stderr(&o));
    assert_eq!(tree(&root.join("hyperforge.out")), before);
    let leftovers: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "no staging directories left behind");
}

#[test]
fn write_errors_exit_3() {
    let (_tmp, root) = project();
    // The output's parent is a file: the directory cannot be created.
    std::fs::write(root.join("blocker"), "").unwrap();
    let o = hyperforge(&root, &["synth", "--out", "blocker/out"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("error: cannot create"),
        "{}",
        stderr(&o)
    );
    // An output path that holds something else (a mistyped `--out` naming the project
    // itself) is refused, and nothing in it changes.
    let o = hyperforge(&root, &["synth", "--out", "stacks"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(stderr(&o).contains("refusing to replace"), "{}", stderr(&o));
    assert!(root.join("stacks/kimi-k3-eks.yaml").exists());
    assert!(!root.join("stacks/manifest.json").exists());
}

#[test]
fn usage_and_input_errors_exit_2() {
    let (_tmp, root) = project();
    let o = hyperforge(&root, &["synth", "no-such-stack"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("unknown stack(s): no-such-stack"));
    assert!(stderr(&o).contains("kimi-k3-hyperpod"));
    let o = hyperforge(&root, &["--stacks", "missing", "list"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("cannot read stacks directory"));
    let o = hyperforge(&root, &["synth", "--format", "pdf"]);
    assert_eq!(code(&o), 2);
    let o = hyperforge(&root, &["explain", "HF9999"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("HF0501"), "lists the known codes");
}

#[test]
fn validate_reports_diagnostics() {
    let (_tmp, root) = project();
    // The references serve staged weights: no warning, so warnings can be denied.
    let o = hyperforge(&root, &["validate", "--deny-warnings"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(!stderr(&o).contains("warning["), "{}", stderr(&o));
    // Served from the Hub instead, the HyperPod endpoint downloads per pod: a warning.
    let file = root.join("stacks/kimi-k3-hyperpod.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let from_hub = text.replace("          weights_store: Weights", "");
    assert_ne!(text, from_hub, "the reference serves from its store");
    std::fs::write(&file, from_hub).unwrap();
    let o = hyperforge(&root, &["validate"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stderr(&o).contains("warning[HF0506]"));
    let o = hyperforge(&root, &["validate", "--deny-warnings"]);
    assert_eq!(code(&o), 1);
    let o = hyperforge(&root, &["validate", "kimi-k3-eks", "--json"]);
    assert_eq!(code(&o), 0);
    let json: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON array");
    assert!(json.is_array());
    std::fs::write(root.join("stacks/broken.yaml"), "# invalid\n").unwrap();
    let o = hyperforge(&root, &["validate"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("error[HF"), "{}", stderr(&o));
    let o = hyperforge(&root, &["validate", "--json"]);
    assert_eq!(code(&o), 1);
    let json: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON array");
    assert_eq!(json[0]["severity"], "error");
    assert!(json[0]["code"].as_str().unwrap().starts_with("HF"));
}

#[test]
fn validate_with_policy_packs() {
    let (_tmp, root) = project();
    let o = hyperforge(
        &root,
        &[
            "validate",
            "--policy",
            "wa-security-pillar",
            "--policy",
            "eks-kms",
        ],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("policy wa-security-pillar: 66 rule files"),
        "{}",
        stderr(&o)
    );
    // A user's rule file that every stack fails, and one Guard cannot parse.
    std::fs::write(
        root.join("no-vpc.guard"),
        "rule NO_VPC {\n  Resources.*[ Type == 'AWS::EC2::VPC' ] empty\n  <<\n    Violation: no VPCs here.\n    Fix: Use the shared VPC.\n  >>\n}\n",
    )
    .unwrap();
    let o = hyperforge(
        &root,
        &[
            "validate",
            "kimi-k3-eks",
            "--policy",
            "no-vpc.guard",
            "--json",
        ],
    );
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON array");
    let finding = json
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == "HF1001")
        .expect("a policy finding");
    assert_eq!(finding["path"], "kimi-k3-eks/Network/Vpc");
    assert_eq!(finding["help"], "Use the shared VPC.");
    std::fs::write(
        root.join("broken.guard"),
        "rule BROKEN { Resources.*[ Type == ] }\n",
    )
    .unwrap();
    let o = hyperforge(
        &root,
        &["validate", "kimi-k3-eks", "--policy", "broken.guard"],
    );
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("error[HF1002]"), "{}", stderr(&o));
    let o = hyperforge(&root, &["validate", "--policy", "no-such-pack"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("wa-security-pillar"), "{}", stderr(&o));
}

/// `synth --policy` gates the output exactly as `validate --policy` reports: a failing rule,
/// a rule file Guard cannot read, an unknown pack and rules nested past the bound all fail
/// with a code and leave the output directory as it was; clean packs write it.
#[test]
fn synth_applies_its_policies_like_validate() {
    let (_tmp, root) = project();
    let out = root.join("cdk.out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("manifest.json"), "previous\n").unwrap();
    std::fs::write(
        root.join("no-vpc.guard"),
        "rule NO_VPC {\n  Resources.*[ Type == 'AWS::EC2::VPC' ] empty\n  <<\n    Violation: no VPCs here.\n    Fix: Use the shared VPC.\n  >>\n}\n",
    )
    .unwrap();
    std::fs::write(
        root.join("broken.guard"),
        "rule BROKEN { Resources.*[ Type == ] }\n",
    )
    .unwrap();
    // Ten thousand nested lists in 20 KB (on short lines): refused before Guard's recursive
    // parser.
    std::fs::write(
        root.join("deep.guard"),
        format!(
            "rule DEEP {{ Resources.*.Type in\n{}{}}}\n",
            format!("{}\n", "[".repeat(100)).repeat(100),
            format!("{}\n", "]".repeat(100)).repeat(100)
        ),
    )
    .unwrap();
    let out_arg = out.to_str().unwrap();
    for (policy, expected_code, text) in [
        ("no-vpc.guard", 1, "error[HF1001]"),
        ("broken.guard", 1, "error[HF1002]"),
        ("deep.guard", 1, "levels deep; at most 64 are read"),
        ("no-such-pack", 2, "error[HF1002]"),
        ("/dev/zero", 2, "error[HF1002]"),
    ] {
        for command in ["validate", "synth"] {
            let o = hyperforge(
                &root,
                &[command, "kimi-k3-eks", "--policy", policy, "--out", out_arg],
            );
            assert_eq!(
                code(&o),
                expected_code,
                "{command} --policy {policy}: {}",
                stderr(&o)
            );
            assert!(
                stderr(&o).contains(text),
                "{command} --policy {policy}: {}",
                stderr(&o)
            );
            assert_eq!(
                std::fs::read_to_string(out.join("manifest.json")).unwrap(),
                "previous\n",
                "{command} --policy {policy} touched the output"
            );
        }
    }
    // Guard rules read CloudFormation templates: asked for without any, the option would
    // do nothing, so the command refuses it.
    let o = hyperforge(
        &root,
        &[
            "synth",
            "kimi-k3-eks",
            "--format",
            "terraform",
            "--policy",
            "no-vpc.guard",
            "--out",
            out_arg,
        ],
    );
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--format writes none"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read_to_string(out.join("manifest.json")).unwrap(),
        "previous\n"
    );
    std::fs::remove_dir_all(&out).unwrap();
    let o = hyperforge(
        &root,
        &[
            "synth",
            "kimi-k3-eks",
            "--policy",
            "wa-security-pillar",
            "--out",
            out_arg,
        ],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("policy wa-security-pillar: 66 rule files"),
        "{}",
        stderr(&o)
    );
    assert!(out.join("manifest.json").exists());
}

#[test]
fn list_catalog_explain_cost_completions() {
    let (_tmp, root) = project();
    let o = hyperforge(&root, &["list"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("kimi-k3-hyperpod (us-west-2)"));
    assert!(text.contains("kimi-k3-hyperpod-cluster"));
    assert!(text
        .lines()
        .any(|l| l.contains("kimi-k3-hyperpod/") && l.contains("-inference.yaml")));
    assert!(text.contains("kimi-k3-eks/RUNBOOK.md"));
    // The weights lines come from the manifest's inventory, as the runbook's do.
    assert!(
        text.contains("kimi-k3/kimi-k3 serves moonshotai/Kimi-K3 from S3")
            && text.contains("from node ready to serving")
            && text.contains("stages moonshotai/Kimi-K3@")
            && text.contains("into s3://kimi-k3-eks-weights-")
            && text.contains("/month in S3 Standard"),
        "{text}"
    );
    // Each stack's capacity end and when it is warned of.
    assert!(text.contains("capacity ends:"));
    assert!(text.contains(
        "Capacity Block cr-0123456789abcdef0 ends 2027-01-15T11:30:00Z: warned 24 h before, and EC2's own warning 40 min before"
    ));

    let o = hyperforge(&root, &["catalog", "instances"]);
    assert_eq!(code(&o), 0);
    let text = stdout(&o);
    assert!(text.contains("p6-b300.48xlarge") && text.contains("142.42"));
    assert!(text.lines().next().unwrap().starts_with("instance"));
    let o = hyperforge(&root, &["catalog", "models"]);
    assert_eq!(code(&o), 0);
    assert!(stdout(&o).contains("moonshotai/Kimi-K3"));

    let o = hyperforge(&root, &["explain", "hf0501"]);
    assert_eq!(code(&o), 0);
    assert!(stdout(&o).starts_with("## HF0501"));

    let o = hyperforge(&root, &["cost", "kimi-k3-hyperpod"]);
    assert_eq!(code(&o), 0);
    let text = stdout(&o);
    assert!(text.contains("us-east-1") && text.contains("set at purchase"));
    assert!(text.contains("142.42"));

    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let o = hyperforge(&root, &["completions", shell]);
        assert_eq!(code(&o), 0, "{shell}");
        assert!(stdout(&o).contains("hyperforge"), "{shell}");
    }
}

/// `plan` lists every layout of one replica with its reasons, says when one node suffices and
/// exits 0 when a layout serves, 1 when none does, 2 on a bad argument.
#[test]
fn plan_lists_layouts_and_why_the_others_fail() {
    let (_tmp, root) = project();
    let o = hyperforge(
        &root,
        &["plan", "moonshotai/Kimi-K3", "--region", "us-east-1"],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = stdout(&o);
    let line = |start: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(start))
            .unwrap_or_else(|| panic!("no line `{start}`:\n{text}"))
            .to_owned()
    };
    let best = line("1 x p6-b300.48xlarge (TP 8 x PP 1, 8 GPUs)");
    assert!(
        best.contains("181.7") && best.contains("+60.0") && best.ends_with("$142.416"),
        "{best}"
    );
    assert!(line("1 x p6-b200.48xlarge (TP 8 x PP 1, 8 GPUs):")
        .contains("181.7 GiB of weights per GPU, 161.2 GiB usable"));
    assert!(line("2 x p5.48xlarge (TP 8 x PP 2, 16 GPUs):")
        .contains("90.9 GiB of weights per GPU, 72.0 GiB usable"));
    assert!(text
        .contains("Not multi-node: 1 x p6-b300.48xlarge (TP 8 x PP 1, 8 GPUs) serves on one node"));
    assert!(text.contains("KV policy: room for one sequence of 1048576 tokens"));
    // The smallest layouts elsewhere: 16 B200, 24 H100.
    assert!(text.contains("  2 x p6-b200.48xlarge (TP 8 x PP 2, 16 GPUs)\n"));
    assert!(text.contains("  3 x p5.48xlarge (TP 8 x PP 3, 24 GPUs)\n"));

    // A reservation too small for every layout: nothing serves.
    let o = hyperforge(
        &root,
        &[
            "plan",
            "moonshotai/Kimi-K3",
            "--region",
            "us-east-1",
            "--reservation",
            "p6-b200.48xlarge:1",
        ],
    );
    assert_eq!(code(&o), 1);
    assert!(stdout(&o).contains("No layout serves it"));
    assert!(stdout(&o).contains("2 instances needed, the reservation holds 1"));
    // Outside us-east-1 the catalog holds no price: unpriced, never $0.
    let o = hyperforge(
        &root,
        &["plan", "moonshotai/Kimi-K3", "--region", "us-west-2"],
    );
    assert_eq!(code(&o), 0);
    assert!(stdout(&o).contains("unpriced") && !stdout(&o).contains("$0.000"));

    for (args, message) in [
        (
            vec!["plan", "acme/NoSuchModel", "--region", "us-east-1"],
            "is not in the catalog",
        ),
        (
            vec!["plan", "moonshotai/Kimi-K3", "--region", "mars-1"],
            "not a region",
        ),
        (
            vec![
                "plan",
                "moonshotai/Kimi-K3",
                "--region",
                "us-east-1",
                "--reservation",
                "p6-b300.48xlarge",
            ],
            "TYPE:COUNT",
        ),
        (
            vec![
                "plan",
                "moonshotai/Kimi-K3",
                "--region",
                "us-east-1",
                "--reservation",
                "x9.big:2",
            ],
            "not in the catalog",
        ),
        (
            vec![
                "plan",
                "moonshotai/Kimi-K3",
                "--region",
                "us-east-1",
                "--reservation",
                "p6-b300.48xlarge:0",
            ],
            "count of instances",
        ),
        (
            vec![
                "plan",
                "moonshotai/Kimi-K3",
                "--region",
                "us-east-1",
                "--gpu-memory-utilization",
                "9",
            ],
            "fraction",
        ),
        (
            vec![
                "plan",
                "moonshotai/Kimi-K3",
                "--region",
                "us-east-1",
                "--max-nodes",
                "99",
            ],
            "99",
        ),
    ] {
        let o = hyperforge(&root, &args);
        assert_eq!(code(&o), 2, "{args:?}");
        assert!(stderr(&o).contains(message), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn version_is_the_line_clap_prints() {
    let (_tmp, root) = project();
    let expected = format!("hyperforge {}\n", env!("CARGO_PKG_VERSION"));
    for flag in ["--version", "-V"] {
        let o = hyperforge(&root, &[flag]);
        assert_eq!(code(&o), 0, "{flag}");
        assert_eq!(stdout(&o), expected, "{flag}");
    }
    // With anything else on the line, clap answers (the same line for `--version`).
    let o = hyperforge(&root, &["--color", "never", "--version"]);
    assert_eq!(code(&o), 0);
    assert_eq!(stdout(&o), expected);
}

#[test]
fn help_shows_examples_and_exit_codes() {
    let (_tmp, root) = project();
    let o = hyperforge(&root, &["--help"]);
    assert_eq!(code(&o), 0);
    assert!(stdout(&o).contains("Exit codes:"));
    for sub in [
        "synth",
        "validate",
        "diff",
        "list",
        "catalog",
        "explain",
        "cost",
        "plan",
        "completions",
    ] {
        let o = hyperforge(&root, &[sub, "--help"]);
        assert_eq!(code(&o), 0, "{sub}");
        assert!(
            stdout(&o).contains("hyperforge "),
            "{sub} --help has an example"
        );
    }
}

#[test]
fn diff_deployed_takes_exactly_one_stack() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hyperforge"))
        .args(["diff", "--deployed", "a", "b"])
        .output()
        .expect("run hyperforge");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("exactly one stack"));
}

/// The default build carries no AWS SDK: the deploy commands say how to get them.
#[cfg(not(feature = "deploy"))]
#[test]
fn deploy_commands_explain_the_missing_feature() {
    for args in [
        &["deploy", "kimi-k3-eks"][..],
        &["destroy", "kimi-k3-eks"],
        &["diff", "--deployed", "kimi-k3-eks"],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hyperforge"))
            .args(args)
            .output()
            .expect("run hyperforge");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--features deploy"),
            "{args:?}"
        );
    }
}

/// `hyperforge fill` prints a Kubernetes stage's file with its values in place, inputs
/// defaulting to the values the description was synthesized with, and leaves the file as it
/// is; every problem of the call is reported at once, nothing printed on stdout.
#[test]
fn fill_puts_deployed_values_in_place_and_reports_every_problem() {
    let (_tmp, root) = project();
    let o = hyperforge(&root, &["synth", "kimi-k3-eks-karpenter"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = root.join("hyperforge.out");
    let file = out.join("kimi-k3-eks-karpenter/06-gpu-capacity.yaml");
    let before = std::fs::read(&file).unwrap();
    let fill = |args: &[&str]| {
        let mut all = vec!["fill", "--out", "hyperforge.out", "kimi-k3-eks-karpenter"];
        all.extend_from_slice(args);
        hyperforge(&root, &all)
    };

    // The input's default, then a value given by its variable.
    let o = fill(&["gpu-capacity"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o).as_bytes(), before.as_slice());
    let o = fill(&[
        "gpu-capacity",
        "--value",
        "GPU_POOL_CAPACITY_RESERVATION_ID=cr-0fedcba9876543210",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let filled = stdout(&o);
    assert!(filled.contains("id: cr-0fedcba9876543210"), "{filled}");
    assert!(!filled.contains("cr-0123456789abcdef0"), "{filled}");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        before,
        "the file is left as it is"
    );

    // An output must be given; a stray variable and a value that is not an identifier are
    // reported with it.
    let o = fill(&[
        "workload",
        "--value",
        "METRICS_WORKSPACE=ws-1",
        "--value",
        "GPU_POOL_CAPACITY_RESERVATION_ID=cr-1",
    ]);
    assert_eq!(code(&o), 1);
    assert!(stdout(&o).is_empty());
    let err = stderr(&o);
    assert!(err.contains("no value for METRICS_WORKSPACE_ID"), "{err}");
    assert!(err.contains("reads no value METRICS_WORKSPACE "), "{err}");
    assert!(
        err.contains("reads no value GPU_POOL_CAPACITY_RESERVATION_ID"),
        "{err}"
    );
    assert_eq!(err.matches("  help: ").count(), 3, "{err}");
    let o = fill(&["workload", "--value", "METRICS_WORKSPACE_ID=ws-1; rm -rf ~"]);
    assert_eq!(code(&o), 1);
    assert!(
        stderr(&o).contains("is not an identifier or URL"),
        "{}",
        stderr(&o)
    );
    let o = fill(&["workload", "--value", "METRICS_WORKSPACE_ID=ws-0123abcd"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("/workspaces/ws-0123abcd"));

    // Usage errors: an unknown stage, a stage of another kind, no manifest.
    let o = fill(&["workloads"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("has no stage `workloads`"),
        "{}",
        stderr(&o)
    );
    let o = fill(&["foundation"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("only Kubernetes stages"),
        "{}",
        stderr(&o)
    );
    let o = hyperforge(&root, &["fill", "--out", "nowhere", "s", "x"]);
    assert_eq!(code(&o), 2);
}

/// `plan --emit` prints the smallest layout as a stack file's construct, whose every field is a
/// declared one with the layout's values, or as the Rust builder call.
#[test]
fn plan_emits_the_chosen_layout_for_a_description() {
    use hyperforge::constructs::stack_file::Ty;
    use hyperforge::constructs::STACK_FILE_SHAPES;
    let (_tmp, root) = project();
    let o = hyperforge(
        &root,
        &[
            "plan",
            "moonshotai/Kimi-K3",
            "--region",
            "us-west-2",
            "--reservation",
            "p6-b200.48xlarge:2",
            "--emit",
            "stack-file",
        ],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = stdout(&o);
    let fragment: String = text
        .lines()
        .skip_while(|l| !l.starts_with("      - vllm_deployment:"))
        .take_while(|l| !l.is_empty())
        .map(|l| format!("{}\n", l.strip_prefix("      ").unwrap_or(l)))
        .collect();
    let constructs: serde_yaml::Value = serde_yaml::from_str(&fragment).unwrap();
    let deployment = &constructs[0];
    assert_eq!(deployment["instance_type"], "p6-b200.48xlarge");
    assert_eq!(deployment["nodes_per_replica"], 2);
    assert_eq!(deployment["server"]["tensor_parallel_size"], 8);
    assert_eq!(deployment["server"]["model"], "moonshotai/Kimi-K3");
    // What a multi-node layout needs besides its own fields: every Helm preset HF0429 asks for.
    for preset in ["`efa-device-plugin`", "`lws`", "`kueue`"] {
        assert!(text.contains(preset), "{preset} in:\n{text}");
    }
    let shape = STACK_FILE_SHAPES
        .iter()
        .find(|s| s.name == "vllm_deployment")
        .unwrap();
    for (key, value) in deployment.as_mapping().unwrap() {
        let key = key.as_str().unwrap();
        let field = shape
            .fields
            .iter()
            .find(|f| f.name == key)
            .unwrap_or_else(|| panic!("`{key}` is not a vllm_deployment field"));
        if let (Ty::Obj(inner), Some(map)) = (field.ty, value.as_mapping()) {
            for (k, _) in map {
                let k = k.as_str().unwrap();
                assert!(
                    inner.fields.iter().any(|f| f.name == k),
                    "server field `{k}`"
                );
            }
        }
    }
    assert!(text.contains("`efa: true`"), "{text}");
    let o = hyperforge(
        &root,
        &[
            "plan",
            "moonshotai/Kimi-K3",
            "--region",
            "us-west-2",
            "--emit",
            "rust",
        ],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("VllmDeployment::for_layout(\"Server\", VllmServer::new(\"moonshotai/Kimi-K3\", \"vllm/vllm-openai:v"));
    let o = hyperforge(
        &root,
        &[
            "plan",
            "moonshotai/Kimi-K3",
            "--region",
            "us-west-2",
            "--emit",
            "yaml",
        ],
    );
    assert_eq!(code(&o), 2);
}
