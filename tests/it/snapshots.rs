//! Every artifact of every reference stack, as exact text, under `snapshots/`. A change to
//! emitted infrastructure shows up here for review (`cargo insta review`).

use crate::reference;

#[test]
fn reference_artifacts_match_snapshots() {
    let mut expected = std::collections::BTreeSet::new();
    for app in reference::all().into_iter().chain(reference::variants()) {
        let assembly = app
            .synth()
            .unwrap_or_else(|d| panic!("reference app fails:\n{d}"));
        for (path, bytes) in assembly.files() {
            let text = String::from_utf8(bytes.clone()).expect("artifacts are UTF-8");
            // Artifacts live under their stack's folder; the manifest is per app.
            let name = if path == "manifest.json" {
                let stacks: Vec<&str> = app.stacks().iter().map(|s| s.name()).collect();
                format!("{}__manifest.json", stacks.join("+"))
            } else {
                path.replace('/', "__")
            };
            expected.insert(format!("{name}.snap"));
            insta::with_settings!({
                snapshot_path => "../../snapshots",
                prepend_module_to_snapshot => false,
                omit_expression => true,
                description => format!("artifact {path}"),
            }, {
                insta::assert_snapshot!(name, text);
            });
        }
    }
    // The reference fleet's own files and its first member's Terraform root modules (its
    // assemblies are the EKS reference under other names, checked against their own synthesis
    // in `fleet`; the other members' root modules are the first's, in `fleet` too).
    let (files, output) = reference::kimi_k3_eks_fleet()
        .synth(&hyperforge::fleet::FleetOptions::default())
        .unwrap_or_else(|d| panic!("reference fleet fails:\n{d}"));
    let first = format!("members/{}/", output.manifest.members[0].name);
    for (path, bytes) in files.iter().filter(|(p, _)| {
        !p.starts_with("assemblies/") && (!p.starts_with("members/") || p.starts_with(&first))
    }) {
        let text = String::from_utf8(bytes.clone()).expect("artifacts are UTF-8");
        let name = format!("{}__{}", reference::FLEET_NAME, path.replace('/', "__"));
        expected.insert(format!("{name}.snap"));
        insta::with_settings!({
            snapshot_path => "../../snapshots",
            prepend_module_to_snapshot => false,
            omit_expression => true,
            description => format!("fleet artifact {path}"),
        }, {
            insta::assert_snapshot!(name, text);
        });
    }
    // No stale snapshot may linger after an artifact is renamed or removed.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots");
    let on_disk: std::collections::BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("snapshots/ exists")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".snap"))
        .collect();
    let stale: Vec<_> = on_disk.difference(&expected).collect();
    assert!(
        stale.is_empty(),
        "snapshots without an artifact (delete them): {stale:?}"
    );
}

#[test]
fn synthesis_is_deterministic_and_free_of_local_state() {
    for app in reference::all().into_iter().chain(reference::variants()) {
        let first = app.synth().expect("synthesizes");
        let second = app.synth().expect("synthesizes");
        assert_eq!(first.files(), second.files(), "two runs differ");
        let cwd = std::env::current_dir().unwrap();
        let repo = env!("CARGO_MANIFEST_DIR");
        for (path, bytes) in first.files() {
            let text = String::from_utf8_lossy(bytes);
            assert!(
                !text.contains(cwd.to_str().unwrap()),
                "{path} contains the working directory"
            );
            assert!(!text.contains(repo), "{path} contains the repository path");
            // No timestamps: nothing that looks like an ISO date of this century, except the
            // reservation times the descriptions give (the warnings are scheduled from them)
            // and the timeline's times on those days, derived from them.
            let text = text
                .replace(reference::CAPACITY_BLOCK_END, "")
                .replace(reference::TRAINING_PLAN_END, "")
                .replace(reference::CAPACITY_BLOCK_START, "")
                .replace(&reference::CAPACITY_BLOCK_START[..11], "")
                .replace(&reference::CAPACITY_BLOCK_END[..11], "");
            assert!(
                !text.contains("T00:") && !regexless_has_date(&text),
                "{path} contains something like a timestamp"
            );
        }
    }
}

/// `20YY-MM-DD` anywhere in the text, other than the fixed format versions of CloudFormation
/// (`2010-09-09`) and IAM policies (`2012-10-17`).
fn regexless_has_date(text: &str) -> bool {
    let text = text.replace("2010-09-09", "").replace("2012-10-17", "");
    let b = text.as_bytes();
    b.windows(10).any(|w| {
        w[0] == b'2'
            && w[1] == b'0'
            && w[2..4].iter().all(u8::is_ascii_digit)
            && w[4] == b'-'
            && w[5..7].iter().all(u8::is_ascii_digit)
            && w[7] == b'-'
            && w[8..10].iter().all(u8::is_ascii_digit)
    })
}
