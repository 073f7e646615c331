//! checkov's Kubernetes policies on every synthesized manifest: no failed check without a
//! suppression annotation that states its reason.

use crate::common::*;

#[test]
fn kubernetes_manifests_pass_checkov() {
    let checkov = tool("checkov");
    let python = tool("python");
    let gate = script("checkov_gate.py");
    let mut scanned = 0;
    for app in crate::reference::all()
        .into_iter()
        .chain(crate::reference::variants())
    {
        let dir = tempfile::tempdir().expect("temp dir");
        app.synth()
            .unwrap_or_else(|d| panic!("reference app fails:\n{d}"))
            .write_to(dir.path())
            .expect("write assembly");
        let manifest: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("manifest.json")).expect("manifest"),
        )
        .expect("manifest is JSON");
        let mut files = Vec::new();
        for stack in manifest["stacks"].as_array().into_iter().flatten() {
            for stage in stack["stages"].as_array().into_iter().flatten() {
                for a in stage["artifacts"].as_array().into_iter().flatten() {
                    if a["format"] == "kubernetes" {
                        files.push(dir.path().join(a["path"].as_str().unwrap_or_default()));
                    }
                }
            }
        }
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            // Custom resources alone (the HyperPod endpoint) give checkov nothing to scan.
            if !text.contains("kind: Deployment") {
                continue;
            }
            let report = dir.path().join("checkov.json");
            let out = std::process::Command::new(&checkov)
                .args([
                    "--framework",
                    "kubernetes",
                    "--skip-download",
                    "-o",
                    "json",
                    "-f",
                ])
                .arg(&file)
                .output()
                .expect("run checkov");
            std::fs::write(&report, &out.stdout).expect("write report");
            let gate_run = std::process::Command::new(&python)
                .arg(&gate)
                .arg(&report)
                .output()
                .expect("run gate");
            assert!(
                gate_run.status.success(),
                "checkov found problems in {}:\n{}{}",
                file.display(),
                String::from_utf8_lossy(&gate_run.stdout),
                String::from_utf8_lossy(&gate_run.stderr)
            );
            scanned += 1;
        }
    }
    assert!(scanned >= 1, "no Kubernetes workload was scanned");
}
