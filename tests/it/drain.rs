//! The drain of a HyperPod instance group at its training plan's drain time
//! (`hyperforge::constructs::drain`): the CronJob is derived from the plan's window wherever a
//! HyperPod endpoint serves on the group's instance type, fires before the drain time and
//! stops at SageMaker's terminations, never runs on the group it drains, suspends its own
//! CronJob once it has run (nothing fires after the drain), and its program
//! (`src/constructs/assets/drain_instance_group.py`) passes its Python tests against a fake
//! API server and imports only the standard library its image has.
//!
//! The virtualenv comes from `tests/tools/install-validators.sh`; a missing one fails these
//! tests, they are never skipped.

use crate::common::repo_root;
use crate::reference::{TRAINING_PLAN_END, TRAINING_PLAN_START};
use crate::weights_stager::{imported_modules, stdlib_modules};
use hyperforge::catalog::time::{format_utc, parse_utc_minutes};
use hyperforge::constructs::drain::START_LEAD_MINUTES;
use serde_json::Value;

const SCRIPT: &str = "src/constructs/assets/drain_instance_group.py";

/// The documents of the HyperPod reference's inference stage, synthesized from `text` (its
/// stack file, perhaps edited).
fn inference_objects(text: &str) -> (Vec<Value>, hyperforge::assembly::Assembly) {
    let app = hyperforge::stackfile::load_str("kimi-k3-hyperpod.yaml", text)
        .unwrap_or_else(|e| panic!("{e}"));
    let assembly = app.synth().unwrap_or_else(|e| panic!("{e}"));
    let path = assembly
        .files()
        .keys()
        .find(|p| p.ends_with("-inference.yaml"))
        .expect("the inference stage")
        .clone();
    let yaml = assembly.text(&path).expect("the inference stage");
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(yaml)
        .map(|d| serde::Deserialize::deserialize(d).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    (docs, assembly)
}

fn reference_text() -> String {
    std::fs::read_to_string(repo_root().join("stacks/kimi-k3-hyperpod.yaml")).unwrap()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn env(container: &Value, name: &str) -> Option<String> {
    container["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)?
        .get("value")?
        .as_str()
        .map(str::to_owned)
}

#[test]
fn the_plans_window_drives_a_cron_job_that_drains_the_group_before_sagemakers_terminations() {
    let (docs, assembly) = inference_objects(&reference_text());
    let jobs = of_kind(&docs, "CronJob");
    assert_eq!(jobs.len(), 1, "{docs:#?}");
    let job = jobs[0];
    let minutes = |t: &str| parse_utc_minutes(t).unwrap();
    let (start, end) = (minutes(TRAINING_PLAN_START), minutes(TRAINING_PLAN_END));
    assert!(start < end);
    let drain_by = end - 31;
    // Fires ahead of the drain time (the pod's start-up), in UTC, once a year at most.
    let fires = drain_by - START_LEAD_MINUTES;
    // The plan ends 2027-01-15T11:30Z: drained by 10:59, fired at 10:54.
    assert_eq!(format_utc(fires), "2027-01-15T10:54Z");
    assert_eq!(job["spec"]["schedule"], "54 10 15 1 *");
    assert_eq!(job["spec"]["timeZone"], "Etc/UTC");
    assert_eq!(job["spec"]["concurrencyPolicy"], "Forbid");
    // Applying the stage again resumes a CronJob its run suspended; the run may suspend only
    // its own CronJob.
    assert_eq!(job["spec"]["suspend"], false);
    let role = of_kind(&docs, "Role")[0];
    assert_eq!(
        role["rules"],
        serde_json::json!([{
            "apiGroups": ["batch"],
            "resourceNames": ["drain-p6-b300"],
            "resources": ["cronjobs"],
            "verbs": ["patch"]
        }])
    );
    assert_eq!(
        of_kind(&docs, "RoleBinding")[0]["roleRef"]["name"],
        "drain-p6-b300"
    );
    let job_spec = &job["spec"]["jobTemplate"]["spec"];
    // Runs at most until SageMaker's terminations, plus its own start.
    let deadline = job_spec["activeDeadlineSeconds"].as_i64().unwrap();
    assert_eq!(deadline, ((end - 30) - fires) * 60 + 300);
    let pod = &job_spec["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(env(container, "INSTANCE_GROUP").as_deref(), Some("p6-b300"));
    assert_eq!(env(container, "CRON_JOB").as_deref(), Some("drain-p6-b300"));
    assert_eq!(env(container, "DRAIN_AT"), Some(format_utc(drain_by)));
    assert_eq!(env(container, "TERMINATE_AT"), Some(format_utc(end - 30)));
    // Never on the group it drains.
    let term = &pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"][0]["matchExpressions"][0];
    assert_eq!(term["key"], "hyperforge.io/instance-group");
    assert_eq!(term["operator"], "NotIn");
    assert_eq!(term["values"][0], "p6-b300");
    // Pinned by digest, locked down, and allowed exactly what a drain does.
    assert!(container["image"].as_str().unwrap().contains("@sha256:"));
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    let role = of_kind(&docs, "ClusterRole")[0];
    let rules: Vec<(String, String)> = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| {
            let resources = r["resources"].as_array().unwrap().clone();
            let verbs = r["verbs"].as_array().unwrap().clone();
            resources.into_iter().flat_map(move |res| {
                verbs.clone().into_iter().map(move |v| {
                    (
                        res.as_str().unwrap().to_owned(),
                        v.as_str().unwrap().to_owned(),
                    )
                })
            })
        })
        .collect();
    let granted: Vec<(&str, &str)> = rules
        .iter()
        .map(|(r, v)| (r.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        granted,
        [
            ("nodes", "list"),
            ("nodes", "patch"),
            ("pods", "list"),
            ("pods/eviction", "create")
        ]
    );
    // The program the ConfigMap holds is the one tested here.
    let config = of_kind(&docs, "ConfigMap")
        .into_iter()
        .find(|c| c["metadata"]["name"] == "drain-p6-b300")
        .expect("the drain's ConfigMap");
    let script = std::fs::read_to_string(repo_root().join(SCRIPT)).unwrap();
    assert_eq!(config["data"]["drain_instance_group.py"], script.as_str());
    // The group carries the label the drain selects its nodes by, in both formats, and the
    // program selects by the same label.
    let cluster = assembly
        .text("kimi-k3-hyperpod/04-cluster.template.json")
        .unwrap();
    assert!(
        cluster.contains("\"hyperforge.io/instance-group\": \"p6-b300\""),
        "{cluster}"
    );
    let terraform = assembly
        .text("kimi-k3-hyperpod/terraform/04-cluster/main.tf.json")
        .unwrap();
    assert!(terraform.contains("\"hyperforge.io/instance-group\": \"p6-b300\""));
    assert!(script.contains(&format!(
        "GROUP_LABEL = \"{}\"",
        hyperforge::constructs::drain::INSTANCE_GROUP_LABEL
    )));
    // Its pinned image is checked when the stack deploys, no later than the drain's stage
    // (once: the stager's stage checks the same image first).
    let stages = &assembly.manifest().stacks[0].stages;
    let inference = stages
        .iter()
        .position(|s| s.name() == "inference")
        .expect("the inference stage");
    let image = hyperforge::constructs::drain::image();
    assert!(stages[..=inference].iter().any(|s| s
        .steps()
        .iter()
        .any(|step| matches!(step, hyperforge::assembly::plan::Step::VerifyImage { image: i } if *i == image))));
    // The manifest and the runbook name it at the drain time.
    let runbook = assembly.text("kimi-k3-hyperpod/RUNBOOK.md").unwrap();
    assert!(runbook.contains(&format!(
        "| {} | drain by: the CronJob `capacity-drain/drain-p6-b300` cordons",
        format_utc(drain_by)
    )));
}

/// Without a staging Job checking the same image first, the drain's own stage checks it.
#[test]
fn the_drains_image_is_checked_in_its_stage_when_nothing_checks_it_earlier() {
    let text = reference_text();
    let lines: Vec<&str> = text.lines().collect();
    let from = lines
        .iter()
        .position(|l| *l == "  - name: weights")
        .unwrap();
    let to = lines
        .iter()
        .position(|l| *l == "  - name: inference")
        .unwrap();
    let unstaged: String = lines[..from]
        .iter()
        .chain(&lines[to..])
        .filter(|l| !l.trim_start().starts_with("weights_store:"))
        .map(|l| format!("{l}\n"))
        .collect();
    let (_, assembly) = inference_objects(&unstaged);
    let stages = &assembly.manifest().stacks[0].stages;
    let image = hyperforge::constructs::drain::image();
    let checked_in: Vec<&str> = stages
        .iter()
        .filter(|s| {
            s.steps().iter().any(|step| {
                matches!(step, hyperforge::assembly::plan::Step::VerifyImage { image: i } if *i == image)
            })
        })
        .map(|s| s.name())
        .collect();
    assert_eq!(checked_in, ["inference"]);
}

#[test]
fn an_earlier_drain_moves_the_cron_job_and_a_plan_without_a_window_has_none() {
    let text = reference_text();
    let early = text.replace(
        "end: \"2027-01-15T11:30:00Z\"",
        "end: \"2027-01-15T11:30:00Z\"\n                drain_by: \"2027-01-15T06:00:00Z\"",
    );
    assert_ne!(early, text);
    let (docs, _) = inference_objects(&early);
    let job = of_kind(&docs, "CronJob")[0];
    assert_eq!(job["spec"]["schedule"], "55 5 15 1 *");
    let container = &job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        env(container, "DRAIN_AT").as_deref(),
        Some("2027-01-15T06:00Z")
    );
    assert_eq!(
        env(container, "TERMINATE_AT").as_deref(),
        Some("2027-01-15T11:00Z")
    );

    let mut lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.trim_start().starts_with("window:"))
        .unwrap();
    lines.drain(at..at + 3);
    // The warning before the end needs the end given elsewhere, then.
    let without = lines.join("\n").replace(
        "        # Ends with the plan's window, given once on the p6-b300 instance group.",
        "        end_time: \"2027-01-15T11:30:00Z\"",
    );
    let (docs, assembly) = inference_objects(&without);
    for kind in [
        "CronJob",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Namespace",
    ] {
        assert!(of_kind(&docs, kind).is_empty(), "{kind} without a window");
    }
    let runbook = assembly.text("kimi-k3-hyperpod/RUNBOOK.md").unwrap();
    assert!(!runbook.contains("capacity-drain"));
}

#[test]
fn python_tests_pass() {
    crate::weights_stager::run_python_tests("test_drain_instance_group.py", 8);
}

#[test]
fn the_program_imports_only_the_standard_library() {
    let source = std::fs::read_to_string(repo_root().join(SCRIPT)).unwrap();
    let stdlib = stdlib_modules();
    let imports = imported_modules(&source);
    assert!(imports.iter().any(|(_, m)| m == "urllib"), "{imports:?}");
    let foreign: Vec<String> = imports
        .iter()
        .filter(|(_, m)| m != "__future__" && !stdlib.contains(m.as_str()))
        .map(|(line, m)| format!("{SCRIPT}:{line}: {m}"))
        .collect();
    assert!(foreign.is_empty(), "{}", foreign.join("\n"));
    for dynamic in ["__import__", "importlib", "exec(", "eval("] {
        assert!(!source.contains(dynamic), "{SCRIPT} uses {dynamic}");
    }
}

/// A group's labels and taints are what HyperPod takes, with room and the key kept for the
/// drain's label (`HF0387`, at the field).
#[test]
fn a_groups_labels_leave_the_drains_label_to_hyperforge() {
    use hyperforge::constructs::*;
    use hyperforge::Code;
    let codes = |group: InstanceGroup| -> Vec<(Code, Option<String>)> {
        let mut stack = hyperforge::app::Stack::new("labels", "us-west-2");
        crate::fixtures::add_hyperpod_stages(
            &mut stack,
            Network::new("Network").hyperpod_subnet("usw2-az2"),
            "labels",
            group,
        );
        hyperforge::App::new()
            .stack(stack)
            .validate()
            .iter()
            .filter(|d| d.code == Code::InvalidNodeLabelsOrTaints)
            .map(|d| (d.code, d.field.clone()))
            .collect()
    };
    let group = || InstanceGroup::new("gpu", "ml.p6-b300.48xlarge");
    assert!(codes(group().label("team", "research")).is_empty());
    let field = |f: &str| vec![(Code::InvalidNodeLabelsOrTaints, Some(f.to_owned()))];
    assert_eq!(
        codes(group().label("hyperforge.io/instance-group", "gpu")),
        field("labels")
    );
    assert_eq!(codes(group().label("bad key!", "x")), field("labels"));
    assert_eq!(
        codes(group().taint("dedicated", "gpu nodes", TaintEffect::NoSchedule)),
        field("taints")
    );
    let many = (0..50).fold(group(), |g, i| g.label(format!("k{i}"), "v"));
    assert_eq!(codes(many), field("labels"));
    let enough = (0..49).fold(group(), |g, i| g.label(format!("k{i}"), "v"));
    assert!(codes(enough).is_empty());
}
