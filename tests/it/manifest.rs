//! `manifest.json` and its types: every reference assembly's manifest reads back into
//! `Manifest` and serializes to the same bytes, and `docs/manifest.schema.json` is the schema
//! of those types (`HYPERFORGE_BLESS=1` rewrites it).

use crate::reference;
use hyperforge::assembly::manifest::{Manifest, StageManifest};
use hyperforge::{Format, Formats, SynthOptions};
use std::path::Path;

fn reads_back(text: &str, what: &str) -> Manifest {
    let manifest = Manifest::from_json(text).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        manifest.to_json() == text,
        "{what}: the manifest does not serialize back to the same bytes"
    );
    manifest
}

#[test]
fn every_reference_manifest_reads_back_byte_for_byte() {
    let mut formats: Vec<Formats> = vec![Formats::all(), Formats::none()];
    formats.extend(Format::ALL.map(|f| Formats::none().with(f)));
    for app in reference::all().into_iter().chain(reference::variants()) {
        for &formats in &formats {
            let options = SynthOptions {
                formats,
                ..SynthOptions::default()
            };
            let assembly = app.synth_with(&options).unwrap_or_else(|d| panic!("{d}"));
            let text = assembly.manifest_json();
            let names: Vec<&str> = assembly
                .manifest()
                .stacks
                .iter()
                .map(|s| s.name.as_str())
                .collect();
            let what = format!("{} ({formats:?})", names.join("+"));
            assert_eq!(&reads_back(text, &what), assembly.manifest(), "{what}");
            assert_eq!(assembly.manifest().version, Manifest::VERSION);
            // Every artifact the manifest lists is in the assembly.
            for stack in &assembly.manifest().stacks {
                let stage_artifacts = stack.stages.iter().flat_map(StageManifest::artifacts);
                let stack_artifacts = [&stack.terraform, &stack.runbook]
                    .into_iter()
                    .flatten()
                    .flat_map(|l| &l.artifacts);
                for a in stage_artifacts.chain(stack_artifacts) {
                    assert!(
                        assembly.file(&a.path).is_some(),
                        "{what}: `{}` listed, not written",
                        a.path
                    );
                }
            }
        }
    }
}

#[test]
fn committed_manifest_snapshots_read_back_byte_for_byte() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("snapshots/") {
        let path = entry.expect("snapshot entry").path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if !name.ends_with("manifest.json.snap") {
            continue;
        }
        let snap = std::fs::read_to_string(&path).expect("read snapshot");
        // An insta snapshot: a `---` delimited header, then the file's text.
        let body = snap
            .splitn(3, "---\n")
            .nth(2)
            .unwrap_or_else(|| panic!("{name}: no snapshot header"));
        reads_back(body, &name);
        seen += 1;
    }
    let apps = reference::all().len() + reference::variants().len();
    assert_eq!(seen, apps, "one manifest snapshot per app");
}

#[test]
fn schema_is_up_to_date() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/manifest.schema.json");
    let expected = serde_json::to_string_pretty(&Manifest::json_schema()).unwrap() + "\n";
    if std::env::var_os("HYPERFORGE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &expected).expect("write docs/manifest.schema.json");
        return;
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "docs/manifest.schema.json is stale: run `HYPERFORGE_BLESS=1 cargo test --test it manifest::`"
    );
}

#[test]
fn fleet_schema_is_up_to_date_and_accepts_the_reference_fleet() {
    use hyperforge::assembly::fleet::FleetManifest;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/fleet.schema.json");
    let schema = FleetManifest::json_schema();
    let expected = serde_json::to_string_pretty(&schema).unwrap() + "\n";
    if std::env::var_os("HYPERFORGE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &expected).expect("write docs/fleet.schema.json");
    } else {
        let actual = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            actual == expected,
            "docs/fleet.schema.json is stale: run `HYPERFORGE_BLESS=1 cargo test --test it manifest::`"
        );
    }
    assert_eq!(
        schema["required"],
        serde_json::json!([
            "version",
            "generator",
            "name",
            "permission_model",
            "preferences",
            "members",
            "stack_sets"
        ])
    );
    let (_, output) = reference::kimi_k3_eks_fleet()
        .synth(&hyperforge::fleet::FleetOptions::default())
        .expect("the reference fleet synthesizes");
    let value = serde_json::to_value(&output.manifest).unwrap();
    for key in value.as_object().unwrap().keys() {
        assert!(
            schema["properties"].get(key).is_some(),
            "{key} is not in the schema"
        );
    }
}

#[test]
fn schema_names_every_stage_kind_and_artifact_format() {
    let schema = Manifest::json_schema();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(
        schema["required"],
        serde_json::json!(["version", "generator", "stacks"])
    );
    let consts = |def: &str, tag: Option<&str>| -> Vec<String> {
        schema["$defs"][def]["oneOf"]
            .as_array()
            .unwrap_or_else(|| panic!("{def} is a oneOf"))
            .iter()
            .map(|v| match tag {
                Some(tag) => &v["properties"][tag]["const"],
                None => &v["const"],
            })
            .map(|c| c.as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(
        consts("StageManifest", Some("kind")),
        ["cloudformation", "helm", "s3-upload", "kubernetes"]
    );
    assert_eq!(
        consts("ArtifactFormat", None),
        [
            "cloudformation",
            "helm-values",
            "script",
            "terraform",
            "kubernetes",
            "runbook"
        ]
    );
}
