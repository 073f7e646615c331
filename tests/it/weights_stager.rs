//! The weights stager (`src/constructs/assets/stage_weights.py`, the program the staging Job
//! runs): its Python unit and end-to-end tests (`tests/python/test_stage_weights.py`, against
//! a fake Hub and moto's S3 server) pass under the validators' virtualenv; the script
//! compiles; and it imports nothing but the standard library and boto3/botocore, the only
//! things its image has.
//!
//! The virtualenv (with moto) comes from `tests/tools/install-validators.sh`; a missing one
//! fails these tests, they are never skipped.

use crate::common::{repo_root, run, tool, truncate, MAX_LINE};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

const SCRIPT: &str = "src/constructs/assets/stage_weights.py";

/// Third-party modules the image installs (from stage_weights.requirements.txt) and the
/// script may import.
const ALLOWED_THIRD_PARTY: &[&str] = &["boto3", "botocore"];

fn script() -> PathBuf {
    let path = repo_root().join(SCRIPT);
    assert!(path.is_file(), "missing {}", path.display());
    path
}

/// Runs the unittest file `file` of `tests/python` under the validators' virtualenv: it must
/// pass, run at least `at_least` tests and skip none.
pub(crate) fn run_python_tests(file: &str, at_least: u32) {
    let python = tool("python");
    let output = Command::new(&python)
        .args([
            "-m",
            "unittest",
            "discover",
            "-s",
            "tests/python",
            "-p",
            file,
            "-v",
        ])
        .current_dir(repo_root())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let shown: String = stdout
        .lines()
        .chain(stderr.lines())
        .map(|l| truncate(l, MAX_LINE) + "\n")
        .collect();
    assert!(
        output.status.success(),
        "{file} failed ({}):\n{shown}",
        output.status
    );
    // unittest's summary is on stderr: "Ran N tests", then "OK".
    let ran = stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("Ran ")?
                .split(' ')
                .next()?
                .parse::<u32>()
                .ok()
        })
        .unwrap_or_else(|| panic!("no `Ran N tests` line:\n{shown}"));
    assert!(ran >= at_least, "only {ran} Python tests ran:\n{shown}");
    assert!(
        !stderr.contains("skipped"),
        "a Python test was skipped:\n{shown}"
    );
}

#[test]
fn python_tests_pass() {
    run_python_tests("test_stage_weights.py", 20);
}

#[test]
fn script_compiles() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = run(
        &tool("python"),
        [
            "-c".as_ref(),
            "import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)"
                .as_ref(),
            script().as_os_str(),
            dir.path().join("stage_weights.pyc").as_os_str(),
        ],
        None,
    );
    assert!(out.success(), "py_compile failed:\n{out}");
}

/// The top-level module of every `import` and `from ... import` statement in `source`, with
/// its line number. A relative import (`from . import x`) is reported as `.`.
pub(crate) fn imported_modules(source: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (i, line) in source.lines().enumerate() {
        let line = line.trim_start();
        let top = |name: &str| -> String {
            let name = name.trim();
            if name.starts_with('.') {
                ".".to_string()
            } else {
                name.split('.').next().unwrap_or("").to_string()
            }
        };
        if let Some(rest) = line.strip_prefix("import ") {
            let rest = rest.split('#').next().unwrap_or("");
            for item in rest.split(',') {
                let module = item.split_whitespace().next().unwrap_or("");
                found.push((i + 1, top(module)));
            }
        } else if let Some(rest) = line.strip_prefix("from ") {
            let module = rest.split_whitespace().next().unwrap_or("");
            if rest.contains(" import") {
                found.push((i + 1, top(module)));
            }
        }
    }
    found
}

/// The venv's Python's list of standard library modules (`sys.stdlib_module_names`).
pub(crate) fn stdlib_modules() -> BTreeSet<String> {
    let out = run(
        &tool("python"),
        [
            "-c",
            "import sys; print('\\n'.join(sorted(sys.stdlib_module_names)))",
        ],
        None,
    );
    assert!(out.success(), "cannot list the standard library:\n{out}");
    let names: BTreeSet<String> = out.stdout.lines().map(str::to_string).collect();
    assert!(
        names.contains("hashlib") && names.contains("http") && !names.contains("boto3"),
        "an unexpected standard library list:\n{out}"
    );
    names
}

#[test]
fn script_imports_only_the_standard_library_and_boto3() {
    let source = std::fs::read_to_string(script()).expect("read the stager");
    let stdlib = stdlib_modules();
    let imports = imported_modules(&source);
    let modules: BTreeSet<&str> = imports.iter().map(|(_, m)| m.as_str()).collect();
    // The parser sees what is there (a control against a parser that finds nothing).
    for expected in ["boto3", "botocore", "hashlib", "http", "argparse"] {
        assert!(
            modules.contains(expected),
            "no import of {expected} found in {SCRIPT}: {modules:?}"
        );
    }
    let foreign: Vec<String> = imports
        .iter()
        .filter(|(_, m)| {
            m != "__future__"
                && !stdlib.contains(m.as_str())
                && !ALLOWED_THIRD_PARTY.contains(&m.as_str())
        })
        .map(|(line, m)| format!("{SCRIPT}:{line}: {m}"))
        .collect();
    assert!(
        foreign.is_empty(),
        "the stager imports what its image does not have:\n{}",
        foreign.join("\n")
    );
    // Nor does it import by other means.
    for dynamic in ["__import__", "importlib", "exec(", "eval("] {
        assert!(
            !source.contains(dynamic),
            "{SCRIPT} uses {dynamic}: imports must be plain statements"
        );
    }
}

#[test]
fn import_parser_catches_a_third_party_import() {
    let sample = "import os, json as j\nfrom urllib.parse import quote\n    import requests  # x\nfrom . import sibling\nfrom yaml import (\n    safe_load,\n)\n";
    let modules: Vec<String> = imported_modules(sample)
        .into_iter()
        .map(|(_, m)| m)
        .collect();
    assert_eq!(
        modules,
        ["os", "json", "urllib", "requests", ".", "yaml"].map(String::from)
    );
}
