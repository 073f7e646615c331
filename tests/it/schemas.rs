//! Every published JSON Schema (`docs/*.schema.json`) passes the draft 2020-12 meta-schema with
//! every `$ref` resolving, and every document it describes in the repository (the stack files
//! under `stacks/`, the fleet files, the reference assembly's `manifest.json`, the reference
//! fleet's `fleet.json`) validates against it, with the `jsonschema` package of the validators'
//! virtualenv (`tests/tools/check_schemas.py`).

use crate::common::run_script;
use crate::reference;
use std::path::{Path, PathBuf};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn check(schema: &Path, documents: &[PathBuf]) -> Result<String, String> {
    let mut args = vec![schema.as_os_str().to_owned()];
    args.extend(documents.iter().map(|d| d.as_os_str().to_owned()));
    let out = run_script("check_schemas.py", args, None);
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(format!("{}\n{}", out.stdout, out.stderr))
    }
}

/// The YAML files of `dir`, split into fleet files (a `fleet:` key) and stack files.
fn yaml_files(dir: &Path, stacks: &mut Vec<PathBuf>, fleets: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            yaml_files(&path, stacks, fleets);
        } else if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            if text.lines().any(|l| l.starts_with("fleet:")) {
                fleets.push(path);
            } else {
                stacks.push(path);
            }
        }
    }
}

#[test]
fn every_schema_is_valid_and_every_document_validates() {
    let (mut stacks, mut fleets) = (Vec::new(), Vec::new());
    yaml_files(&repo("stacks"), &mut stacks, &mut fleets);
    yaml_files(&repo("examples"), &mut stacks, &mut fleets);
    stacks.push(repo("tests/it/stackfile_every_field.yaml"));
    assert!(
        stacks.len() >= 4 && !fleets.is_empty(),
        "{stacks:?} {fleets:?}"
    );

    let out = tempfile::tempdir().unwrap();
    let assembly_dir = out.path().join("assembly");
    let mut app = hyperforge::App::new();
    for reference in reference::all() {
        for stack in reference.stacks() {
            app.add_stack(stack.clone());
        }
    }
    app.synth().unwrap().write_to(&assembly_dir).unwrap();
    let fleet_dir = out.path().join("fleet");
    reference::kimi_k3_eks_fleet()
        .write_to(&fleet_dir, &hyperforge::fleet::FleetOptions::default())
        .unwrap();

    let mut problems = Vec::new();
    for (schema, documents) in [
        ("docs/stack-file.schema.json", stacks),
        ("docs/fleet-file.schema.json", fleets),
        (
            "docs/manifest.schema.json",
            vec![assembly_dir.join("manifest.json")],
        ),
        ("docs/fleet.schema.json", vec![fleet_dir.join("fleet.json")]),
    ] {
        if let Err(e) = check(&repo(schema), &documents) {
            problems.push(e);
        }
    }
    // Every published schema is listed above.
    let published: Vec<String> = std::fs::read_dir(repo("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".schema.json"))
        .collect();
    assert_eq!(published.len(), 4, "{published:?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_check_catches_a_dangling_reference_and_an_invalid_document() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("s.schema.json");
    std::fs::write(
        &schema,
        r##"{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
            "properties": {"a": {"$ref": "#/$defs/Missing"}, "n": {"type": "integer"}}}"##,
    )
    .unwrap();
    let document = dir.path().join("d.yaml");
    std::fs::write(&document, "n: not-a-number\n").unwrap();
    let e = check(&schema, &[document]).unwrap_err();
    assert!(e.contains("#/$defs/Missing resolves to nothing"), "{e}");
    assert!(e.contains("d.yaml: at /n"), "{e}");
}
