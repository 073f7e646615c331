//! Hostile values in every field of every reference stack file and fleet file: each is either
//! refused with a diagnostic or reaches the generated scripts (RUNBOOK.md, FLEET.md, the
//! uploaded lifecycle scripts) inert.
//!
//! For each scalar of the file, the value is replaced by text that would run a command if a
//! renderer wrote it unquoted (`$(…)`, backticks, a quote that closes the surrounding one, `;`,
//! a newline) and, for size and paths, by 10,000 characters and `../`. When the file still
//! loads and synthesizes, every ```sh block of every generated document must parse
//! (`bash -n`), and wherever the marker command appears, a shell reading the block must see it
//! as text: inside single quotes, double quotes (outside a command substitution), a comment on
//! its own line or a quoted here-document. No artifact path may leave the output directory.

use crate::runbook_script::{sh_blocks, substitute_placeholders};
use hyperforge::fleet::FleetOptions;
use serde_yaml::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The command a hostile value tries to run.
const MARKER: &str = "touch /tmp/hyperforge-pwned";

fn variants() -> Vec<String> {
    vec![
        format!("x$({MARKER})"),
        format!("x`{MARKER}`"),
        format!("x'; {MARKER}; '"),
        format!("x\"; {MARKER}; \""),
        format!("x\n{MARKER}\n"),
        format!("x; {MARKER} #"),
        // A value in prose that would open a code block of its own.
        format!("x\n```sh\n{MARKER}\n```\n"),
        "a".repeat(10_000),
        "../../../../tmp/hyperforge-escape".to_owned(),
    ]
}

/// Where a shell reading `script` is at each byte: `true` where text is inert (a quoted
/// string outside any command substitution, a comment, a quoted here-document's body).
fn inert_map(script: &str) -> Vec<bool> {
    #[derive(Clone, Copy, PartialEq)]
    enum S {
        Code,
        Single,
        Double,
        Comment,
        Subst,
        Backtick,
        HereQuoted,
        HereOpen,
    }
    let bytes = script.as_bytes();
    let mut inert = vec![false; bytes.len()];
    let mut stack = vec![S::Code];
    // Here-documents whose bodies start after the current line: (delimiter, quoted).
    let mut pending: Vec<(String, bool)> = Vec::new();
    let mut i = 0;
    let mut word_start = true;
    while i < bytes.len() {
        let top = *stack.last().unwrap_or(&S::Code);
        let c = bytes[i];
        inert[i] = matches!(
            top,
            S::Single | S::Double | S::Comment | S::HereQuoted | S::HereOpen
        );
        match top {
            S::Single => {
                if c == b'\'' {
                    stack.pop();
                }
            }
            S::Double | S::HereOpen => {
                if c == b'\\' {
                    i += 1;
                    if i < bytes.len() {
                        inert[i] = true;
                    }
                } else if c == b'"' && top == S::Double {
                    stack.pop();
                } else if c == b'`' {
                    stack.push(S::Backtick);
                } else if c == b'$' && bytes.get(i + 1) == Some(&b'(') {
                    stack.push(S::Subst);
                    i += 1;
                }
            }
            S::HereQuoted => {}
            S::Comment => {
                if c == b'\n' {
                    stack.pop();
                    inert[i] = false;
                }
            }
            S::Code | S::Subst | S::Backtick => match c {
                b'\\' => {
                    i += 1;
                }
                b'\'' => stack.push(S::Single),
                b'"' => stack.push(S::Double),
                b'#' if word_start => stack.push(S::Comment),
                b'`' if top == S::Backtick => {
                    stack.pop();
                }
                b'`' => stack.push(S::Backtick),
                b'$' if bytes.get(i + 1) == Some(&b'(') => {
                    stack.push(S::Subst);
                    i += 1;
                }
                b')' if top == S::Subst => {
                    stack.pop();
                }
                b'<' if bytes.get(i + 1) == Some(&b'<') && bytes.get(i + 2) != Some(&b'<') => {
                    let rest = &script[i + 2..];
                    let rest = rest.strip_prefix('-').unwrap_or(rest).trim_start();
                    let quoted = rest.starts_with('\'') || rest.starts_with('"');
                    let word: String = rest
                        .trim_start_matches(['\'', '"'])
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !word.is_empty() {
                        pending.push((word, quoted));
                    }
                    i += 1;
                }
                _ => {}
            },
        }
        if c == b'\n'
            && matches!(
                *stack.last().unwrap_or(&S::Code),
                S::Code | S::HereQuoted | S::HereOpen
            )
        {
            // A line ends: a pending here-document starts, or the current one may end.
            if let Some(S::HereQuoted | S::HereOpen) = stack.last() {
                let line_end = script[i + 1..]
                    .find('\n')
                    .map_or(script.len(), |e| i + 1 + e);
                let line = &script[i + 1..line_end];
                if pending
                    .first()
                    .is_some_and(|(d, _)| line.trim_start_matches('\t') == d)
                {
                    pending.remove(0);
                    stack.pop();
                    i = line_end;
                    continue;
                }
            } else if let Some((_, quoted)) = pending.first() {
                stack.push(if *quoted { S::HereQuoted } else { S::HereOpen });
            }
        }
        word_start = c.is_ascii_whitespace() || b";&|(".contains(&c);
        i += 1;
    }
    inert
}

/// Problems of one generated document: blocks that do not parse, markers a shell would run.
/// A Markdown document's scripts are its ```sh blocks; a shell script is one block.
fn document_problems(name: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let blocks = if name.ends_with(".sh") {
        vec![text.to_owned()]
    } else {
        sh_blocks(text)
    };
    for block in &blocks {
        let inert = inert_map(block);
        for (at, _) in block.match_indices(MARKER) {
            if !inert[at] {
                let line = block[..at].lines().count();
                problems.push(format!(
                    "{name}: the marker runs (block line {line}):\n{}",
                    block
                        .lines()
                        .take(line + 2)
                        .skip(line.saturating_sub(3))
                        .collect::<Vec<_>>()
                        .join("\n")
                ));
            }
        }
    }
    // One `bash -n` over every block, each the body of a function of its own.
    let script: String = blocks
        .iter()
        .enumerate()
        .map(|(n, b)| format!("block_{n}() {{\n{}\n:\n}}\n", substitute_placeholders(b)))
        .collect();
    let mut child = std::process::Command::new("bash")
        .arg("-n")
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("bash runs");
    {
        use std::io::Write;
        let _ = child
            .stdin
            .take()
            .map(|mut s| s.write_all(script.as_bytes()));
    }
    let out = child.wait_with_output().expect("bash ends");
    if !out.status.success() {
        problems.push(format!(
            "{name}: bash -n fails: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .unwrap_or_default()
        ));
    }
    problems
}

/// Every scalar leaf of `value`, as a path of keys and indexes.
fn leaves(value: &Value, path: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    match value {
        Value::Mapping(m) => {
            for (k, v) in m {
                path.push(k.clone());
                leaves(v, path, out);
                path.pop();
            }
        }
        Value::Sequence(s) => {
            for (i, v) in s.iter().enumerate() {
                path.push(Value::from(i as u64));
                leaves(v, path, out);
                path.pop();
            }
        }
        Value::Tagged(t) => leaves(&t.value, path, out),
        _ => out.push(path.clone()),
    }
}

fn get<'a>(value: &'a Value, path: &[Value]) -> Option<&'a Value> {
    let Some((first, rest)) = path.split_first() else {
        return Some(value);
    };
    let next = match (value, first) {
        (Value::Mapping(m), k) => m.get(k),
        (Value::Sequence(s), Value::Number(n)) => n.as_u64().and_then(|i| s.get(i as usize)),
        _ => None,
    }?;
    get(next, rest)
}

/// The hostile values for the leaf at `path`: each alone, and each after the leaf's own text
/// (so that a value a grammar checks only by its prefix is tried too).
fn variants_of(root: &Value, path: &[Value]) -> Vec<String> {
    let own = match get(root, path) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        _ => String::new(),
    };
    let mut out = variants();
    if !own.is_empty() {
        out.extend(variants().into_iter().take(7).map(|v| format!("{own}{v}")));
    }
    out
}

fn set(value: &mut Value, path: &[Value], new: &str) {
    let Some((first, rest)) = path.split_first() else {
        *value = Value::from(new);
        return;
    };
    let next = match (value, first) {
        (Value::Mapping(m), k) => m.get_mut(k),
        (Value::Sequence(s), Value::Number(n)) => n.as_u64().and_then(|i| s.get_mut(i as usize)),
        _ => None,
    };
    if let Some(next) = next {
        set(next, rest, new);
    }
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn path_problems(files: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    files
        .keys()
        .filter(|p| p.starts_with('/') || p.split('/').any(|part| part == ".." || part.is_empty()))
        .map(|p| format!("artifact path `{p}` leaves the output directory"))
        .collect()
}

/// The problems of every generated script in `files` (paths leaving the output, scripts that
/// do not parse, markers a shell would run), each prefixed by `case`; and whether the marker
/// reached a script at all.
fn generated_problems(files: &BTreeMap<String, Vec<u8>>, case: &str) -> (Vec<String>, bool) {
    let mut problems = path_problems(files);
    let mut reached = false;
    for (name, bytes) in files {
        if name.ends_with(".md") || name.ends_with(".sh") {
            let text = String::from_utf8_lossy(bytes);
            reached |= text.contains(MARKER);
            problems.extend(
                document_problems(name, &text)
                    .into_iter()
                    .map(|p| format!("{case}: {p}")),
            );
        }
    }
    (problems, reached)
}

/// Fails with the first problems found.
fn assert_no_problems(mut problems: Vec<String>, cases: usize) {
    problems.sort();
    problems.dedup();
    assert!(
        problems.is_empty(),
        "{} problem(s) in {cases} cases:\n{}",
        problems.len(),
        problems
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n\n")
    );
}

#[test]
fn hostile_values_in_stack_files_are_refused_or_inert() {
    let mut problems = Vec::new();
    let (mut cases, mut refused, mut reaching) = (0usize, 0usize, 0usize);
    for file in [
        "stacks/kimi-k3-eks.yaml",
        "stacks/kimi-k3-hyperpod.yaml",
        "stacks/kimi-k3-eks-karpenter.yaml",
    ] {
        let text = std::fs::read_to_string(repo(file)).unwrap();
        let original: Value = serde_yaml::from_str(&text).unwrap();
        let mut paths = Vec::new();
        leaves(&original, &mut Vec::new(), &mut paths);
        // The file as re-serialized still loads: a refusal below is the value's.
        let again = serde_yaml::to_string(&original).unwrap();
        if let Err(ds) =
            hyperforge::stackfile::load_str(file, &again).and_then(|a| a.synth().map(|_| ()))
        {
            panic!("{file} does not survive re-serializing:\n{ds}");
        }
        for path in &paths {
            for variant in variants_of(&original, path) {
                let mut value = original.clone();
                set(&mut value, path, &variant);
                let yaml = serde_yaml::to_string(&value).unwrap();
                cases += 1;
                let Ok(app) = hyperforge::stackfile::load_str(file, &yaml) else {
                    refused += 1;
                    continue;
                };
                let Ok(assembly) = app.synth() else {
                    refused += 1;
                    continue;
                };
                let (found, reached) =
                    generated_problems(assembly.files(), &format!("{file} {path:?}"));
                problems.extend(found);
                reaching += usize::from(reached);
                if reached && std::env::var_os("HOSTILE_VERBOSE").is_some() {
                    eprintln!("reached: {file} {path:?} {variant:?}");
                }
            }
        }
    }
    assert!(cases > 500, "{cases} cases");
    eprintln!("{cases} cases, {refused} refused, {reaching} reach a generated document");
    assert_no_problems(problems, cases);
}

#[test]
fn hostile_values_in_fleet_files_are_refused_or_inert() {
    let dir = tempfile::tempdir().unwrap();
    let stack = std::fs::read_to_string(repo("stacks/fleets/kimi-k3-eks.yaml")).unwrap();
    std::fs::write(dir.path().join("kimi-k3-eks.yaml"), &stack).unwrap();
    let text = std::fs::read_to_string(repo("stacks/fleets/kimi-k3-eks-fleet.yaml")).unwrap();
    let original: Value = serde_yaml::from_str(&text).unwrap();
    let mut paths = Vec::new();
    leaves(&original, &mut Vec::new(), &mut paths);
    let mut problems = Vec::new();
    let mut cases = 0;
    for path in &paths {
        for variant in variants_of(&original, path) {
            let mut value = original.clone();
            set(&mut value, path, &variant);
            let file = dir.path().join("fleet.yaml");
            std::fs::write(&file, serde_yaml::to_string(&value).unwrap()).unwrap();
            cases += 1;
            let Ok(fleet) = hyperforge::stackfile::fleet::load_file(&file) else {
                continue;
            };
            let Ok((files, _)) = fleet.synth(&FleetOptions::default()) else {
                continue;
            };
            problems.extend(generated_problems(&files, &format!("{path:?}")).0);
        }
    }
    assert!(cases > 50, "{cases} cases");
    assert_no_problems(problems, cases);
}

#[test]
fn the_scanner_tells_inert_text_from_commands() {
    let runs = |script: &str| {
        let inert = inert_map(script);
        script.match_indices(MARKER).any(|(at, _)| !inert[at])
    };
    assert!(runs(&format!("echo x$({MARKER})\n")));
    assert!(runs(&format!("echo \"x$({MARKER})\"\n")));
    assert!(runs(&format!("echo x`{MARKER}`\n")));
    assert!(runs(&format!("echo 'x'; {MARKER}; ''\n")));
    assert!(runs(&format!("# x\n{MARKER}\n")));
    assert!(runs(&format!("cat <<EOF\n$({MARKER})\nEOF\n")));
    assert!(!runs(&format!("echo 'x$({MARKER})'\n")));
    assert!(!runs(&format!("echo \"x; {MARKER}\"\n")));
    assert!(!runs(&format!("# x; {MARKER}\necho\n")));
    assert!(!runs(&format!("cat <<'EOF'\n$({MARKER})\nEOF\necho\n")));
    // A code block a value opened in prose is a block of its own: caught.
    let document = format!("# Runbook\n\nx\n```sh\n{MARKER}\n```\n");
    assert_eq!(document_problems("RUNBOOK.md", &document).len(), 1);
    assert!(!runs(&format!("echo 'x'\\''; {MARKER}; '\\'''\n")));
}
