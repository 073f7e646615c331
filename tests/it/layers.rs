//! The one-way rule: a top-level module of the library imports only modules below it in
//! [`LAYERS`] (ARCHITECTURE.md, "Layers"). Read from the source, so a new `use crate::...`
//! that points upwards fails here with the file and line.

use std::path::{Path, PathBuf};

/// Top-level modules from the bottom up. A module may use itself and anything listed before it.
const LAYERS: &[&str] = &[
    "yaml",
    "diagnostics",
    "catalog",
    "app",
    "resources",
    "constructs",
    "validate",
    "cost",
    "assembly",
    "policy",
    "runbook",
    "synth",
    "fleet",
    "stackfile",
    "deploy",
    "cli",
    "bin",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a source file belongs to (`src/synth/mod.rs` -> `synth`).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    Some(first.trim_end_matches(".rs").to_owned())
}

/// Every `crate::<module>` the code of `text` names, with its line; comments, the test
/// module (last in a file, after `#[cfg(test)]`) and files of test code (`#![cfg(test)]`) are
/// skipped.
fn crate_uses(text: &str) -> Vec<(usize, String)> {
    let mut uses = Vec::new();
    let mut in_group = false;
    for (number, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        // A test module, last in its file, or a file that is test code whole.
        if (line.starts_with("#[cfg(test)]") || line.starts_with("#![cfg(test)]"))
            && !line.starts_with(' ')
        {
            break;
        }
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                in_group = !group.contains('}');
                uses.extend(group_items(group).map(|m| (number + 1, m)));
            } else {
                uses.push((number + 1, ident(rest)));
            }
        }
        if in_group && !code.contains("crate::") {
            uses.extend(group_items(code).map(|m| (number + 1, m)));
            in_group = !code.contains('}');
        }
    }
    uses.retain(|(_, m)| !m.is_empty());
    uses
}

/// The first identifier of each item of a `use crate::{...}` group line (nested groups
/// contribute their root only).
fn group_items(text: &str) -> impl Iterator<Item = String> + '_ {
    let mut depth = 0usize;
    let mut items = Vec::new();
    let mut start = true;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => start = true,
            c if start && (c.is_ascii_alphabetic() || c == '_') => {
                items.push(ident(&text[i..]));
                start = false;
            }
            _ => {}
        }
    }
    items.into_iter()
}

fn ident(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

#[test]
fn no_module_imports_one_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut violations = Vec::new();
    for file in &files {
        let Some(module) = module_of(&src, file) else {
            continue;
        };
        if module == "lib" {
            continue; // the crate root declares and re-exports every module
        }
        let Some(own) = rank(&module) else {
            violations.push(format!(
                "{}: module `{module}` is not in LAYERS",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("read source");
        for (line, used) in crate_uses(&text) {
            match rank(&used) {
                Some(r) if r > own => violations.push(format!(
                    "{}:{line}: `{module}` uses `crate::{used}`, a layer above it",
                    file.display()
                )),
                Some(_) => {}
                // Crate-root items (`crate::App`, re-exports) are allowed only to the top.
                None if own < LAYERS.len() - 3 => violations.push(format!(
                    "{}:{line}: `{module}` uses `crate::{used}` from the crate root; name the module",
                    file.display()
                )),
                None => {}
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn the_rule_catches_an_upward_use() {
    let uses = crate_uses(
        "use crate::app::Stack;\nuse crate::{synth::x, catalog};\n// crate::deploy in a comment\n#[cfg(test)]\nmod tests { use crate::cli; }\n",
    );
    let names: Vec<_> = uses.iter().map(|(_, m)| m.as_str()).collect();
    assert_eq!(names, ["app", "synth", "catalog"]);
}

#[test]
fn backends_know_no_construct() {
    // The backends lower the resource layer only; the pipeline (`synth/mod.rs`) may read
    // construct facts, the backends under it may not.
    let synth = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/synth");
    let mut files = Vec::new();
    for backend in ["cloudformation", "terraform", "kubernetes"] {
        rust_files(&synth.join(backend), &mut files);
    }
    files.push(synth.join("stages.rs"));
    let mut violations = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read source");
        for (line, used) in crate_uses(&text) {
            if used == "constructs" {
                violations.push(format!("{}:{line}", file.display()));
            }
        }
    }
    assert!(files.len() > 10, "backend sources found: {}", files.len());
    assert!(
        violations.is_empty(),
        "backends use constructs:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_runbook_reads_only_the_assembly() {
    // Everything after synthesis reads the plan: the runbook knows the manifest's types, the
    // catalog (prices, instance sizes) and Terraform's output naming, never the description.
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/runbook"),
        &mut files,
    );
    let mut violations = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read source");
        let lines: Vec<&str> = text.lines().collect();
        for (line, used) in crate_uses(&text) {
            let naming = used == "app" && lines[line - 1].contains("app::snake_case");
            if !naming && !["assembly", "catalog", "runbook"].contains(&used.as_str()) {
                violations.push(format!("{}:{line}: {used}", file.display()));
            }
        }
    }
    assert!(!files.is_empty());
    assert!(
        violations.is_empty(),
        "the runbook reads more than the assembly:\n{}",
        violations.join("\n")
    );
}
