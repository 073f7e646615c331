//! Deploy-time inputs: each is declared once per stack in `manifest.json` and is what every
//! artifact that uses it refers to (a CloudFormation parameter, a Terraform variable, a listed
//! Kubernetes placeholder); its value appears nowhere else, so a deployer who changes it
//! changes it everywhere. The reference fleet's StackSets take the members' values as those
//! same inputs.

use hyperforge::assembly::manifest::{StackManifest, StageManifest, ValueSource};
use serde_json::Value;
use std::collections::BTreeSet;

/// Terraform variables that are the Terraform path's own settings, not deploy-time inputs of
/// the description: where the kubeconfig is, where a git chart was checked out.
fn terraform_setting(name: &str) -> bool {
    name == "kubeconfig" || name.ends_with("_chart_path")
}

/// Problems of `stack` in `assembly`: a parameter, variable or placeholder that is not a
/// declared input; an input used by a stage it does not list, or listed by one that does not
/// use it; an input's default written anywhere but its declarations and placeholders.
fn input_problems(text_of: &dyn Fn(&str) -> Option<String>, stack: &StackManifest) -> Vec<String> {
    let mut problems = Vec::new();
    let input = |name: &str| stack.inputs.iter().find(|i| i.name == name);
    for stage in &stack.stages {
        let mut used: BTreeSet<String> = BTreeSet::new();
        match stage {
            StageManifest::CloudFormation { parameters, .. } => {
                let path = &stage.artifacts()[0].path;
                let template: Value =
                    serde_json::from_str(&text_of(path).expect("template")).unwrap();
                let declared = template["Parameters"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default();
                for (name, p) in &declared {
                    used.insert(name.clone());
                    match input(name) {
                        None => problems.push(format!("{path}: parameter {name} is no input")),
                        Some(i) => {
                            if p.get("Default").and_then(Value::as_str) != i.default.as_deref() {
                                problems.push(format!("{path}: {name}'s default differs"));
                            }
                        }
                    }
                }
                let listed: BTreeSet<String> = parameters.iter().map(|p| p.name.clone()).collect();
                if listed != used {
                    problems.push(format!(
                        "{path}: the manifest lists {listed:?}, the template declares {used:?}"
                    ));
                }
            }
            StageManifest::Kubernetes { values, .. } => {
                for v in values {
                    if let ValueSource::Input(name) = &v.from {
                        used.insert(name.clone());
                        if input(name).and_then(|i| i.default.as_deref()) != Some(&v.placeholder) {
                            problems.push(format!(
                                "stage {}: placeholder `{}` is not {name}'s default",
                                stage.name(),
                                v.placeholder
                            ));
                        }
                    }
                }
            }
            _ => {}
        }
        for i in &stack.inputs {
            let listed = i.stages.iter().any(|s| s == stage.name());
            if listed != used.contains(&i.name)
                && matches!(
                    stage,
                    StageManifest::CloudFormation { .. } | StageManifest::Kubernetes { .. }
                )
            {
                problems.push(format!(
                    "input {} lists stage {}: {listed}, the stage uses it: {}",
                    i.name,
                    stage.name(),
                    !listed
                ));
            }
        }
    }
    // Terraform: every variable is an input (or a setting of the path), defaults alike.
    for a in stack.terraform.iter().flat_map(|t| t.artifacts.iter()) {
        if !a.path.ends_with("/main.tf.json") {
            continue;
        }
        let module: Value = serde_json::from_str(&text_of(&a.path).unwrap()).unwrap();
        for (name, v) in module["variable"].as_object().cloned().unwrap_or_default() {
            if terraform_setting(&name) {
                continue;
            }
            match stack
                .inputs
                .iter()
                .find(|i| i.variable.to_ascii_lowercase() == name)
            {
                None => problems.push(format!("{}: variable {name} is no input", a.path)),
                Some(i) => {
                    if v.get("default").and_then(Value::as_str) != i.default.as_deref() {
                        problems.push(format!("{}: {name}'s default differs", a.path));
                    }
                }
            }
        }
    }
    // An input's default (a reservation id, a zone id, a plan's ARN) is written only where it
    // is declared or is a listed placeholder.
    for i in &stack.inputs {
        let Some(default) = i.default.as_deref() else {
            continue;
        };
        for stage in &stack.stages {
            for a in stage.artifacts() {
                let Some(text) = text_of(&a.path) else {
                    continue;
                };
                let allowed = match stage {
                    StageManifest::CloudFormation { .. } => {
                        text.matches(default).count().saturating_sub(
                            text.matches(&format!("\"Default\": \"{default}\"")).count(),
                        )
                    }
                    StageManifest::Kubernetes { values, .. }
                        if values.iter().any(|v| v.placeholder == default) =>
                    {
                        0
                    }
                    _ => text.matches(default).count(),
                };
                if allowed > 0 {
                    problems.push(format!(
                        "{}: input {}'s value `{default}` is written {allowed} time(s) outside its declaration",
                        a.path, i.name
                    ));
                }
            }
        }
        for a in stack.terraform.iter().flat_map(|t| t.artifacts.iter()) {
            let text = text_of(&a.path).unwrap_or_default();
            let outside = text
                .matches(default)
                .count()
                .saturating_sub(text.matches(&format!("\"default\": \"{default}\"")).count());
            if outside > 0 {
                problems.push(format!(
                    "{}: input {}'s value `{default}` is written outside its variable",
                    a.path, i.name
                ));
            }
        }
    }
    problems
}

#[test]
fn every_deploy_time_value_is_one_declared_input() {
    let mut inputs = 0;
    for app in crate::reference::all()
        .into_iter()
        .chain(crate::reference::variants())
    {
        let assembly = app.synth().unwrap_or_else(|e| panic!("{e}"));
        let text_of = |path: &str| assembly.text(path).map(str::to_owned);
        for stack in &assembly.manifest().stacks {
            let problems = input_problems(&text_of, stack);
            assert!(
                problems.is_empty(),
                "{}:\n{}",
                stack.name,
                problems.join("\n")
            );
            inputs += stack.inputs.len();
        }
    }
    assert!(
        inputs >= 6,
        "the references declare their zones, blocks and plans"
    );

    // The check sees a second form of the reservation id.
    let assembly = crate::reference::kimi_k3_eks().synth().unwrap();
    let stack = &assembly.manifest().stacks[0];
    let path = crate::common::stage_file(&assembly, "kimi-k3-eks", "operations", "template.json");
    let mutated = assembly.text(&path).unwrap().replacen(
        "\"Ref\": \"GpuNodesCapacityReservationId\"",
        "\"Fn::Sub\": \"cr-0123456789abcdef0\"",
        1,
    );
    assert!(mutated != assembly.text(&path).unwrap());
    let text_of = |p: &str| {
        if p == path {
            Some(mutated.clone())
        } else {
            assembly.text(p).map(str::to_owned)
        }
    };
    let problems = input_problems(&text_of, stack);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("outside its declaration")),
        "{problems:?}"
    );
}

/// The fleet's StackSets take each member's values as the members' own declared inputs, and
/// nothing else: the stages lower the reservation and its zone to the same parameters in
/// every StackSet, and each instance's overrides are that member's input values.
#[test]
fn fleet_stack_sets_bind_the_members_inputs() {
    let fleet = crate::reference::kimi_k3_eks_fleet();
    let (files, output) = fleet
        .synth(&hyperforge::fleet::FleetOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let manifest = &output.manifest;
    let members: Vec<(String, StackManifest)> = manifest
        .members
        .iter()
        .map(|m| {
            let path = format!("{}/manifest.json", m.assembly);
            let text = String::from_utf8(files[&path].clone()).unwrap();
            let parsed: hyperforge::assembly::manifest::Manifest =
                serde_json::from_str(&text).unwrap();
            (m.name.clone(), parsed.stacks[0].clone())
        })
        .collect();
    assert_eq!(members.len(), 3);
    for set in &manifest.stack_sets {
        for p in &set.parameters {
            for instance in &set.instances {
                let member = members
                    .iter()
                    .find(|(name, _)| instance.member == *name)
                    .map(|(_, m)| m)
                    .expect("each instance is a member's");
                let input = member
                    .inputs
                    .iter()
                    .find(|i| i.name == p.name)
                    .unwrap_or_else(|| {
                        panic!("{}: {} is no input of the member", set.name, p.name)
                    });
                assert_eq!(
                    instance.parameter_overrides.get(&p.name),
                    input.default.as_ref(),
                    "{}: {}",
                    set.name,
                    p.name
                );
            }
        }
    }
}
