//! The book (`docs/book/`): its reference pages are generated from the code and fail here when
//! stale (`HYPERFORGE_BLESS=1` rewrites them): the stack-file and fleet-file fields from their
//! JSON Schemas, the instance catalog, the command's help. Every relative link of every page
//! resolves. `mdbook build` runs in `tests/tools/test-all.sh`.

use crate::common::{generated_file, repo_root};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::Path;

const BLESS: &str = "cargo test --test it book::";

/// The summary of one JSON Schema type, for a field table.
fn type_of(schema: &Value) -> String {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or(r);
        return format!("[{name}](#{})", name.to_ascii_lowercase());
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let shown: Vec<String> = values
            .iter()
            .map(|v| {
                format!(
                    "`{}`",
                    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
                )
            })
            .collect();
        return format!("one of {}", shown.join(", "));
    }
    if let Some(c) = schema.get("const") {
        return format!(
            "`{}`",
            c.as_str().map_or_else(|| c.to_string(), str::to_owned)
        );
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            let shown: Vec<String> = options.iter().map(type_of).collect();
            return shown.join(" or ");
        }
    }
    let base = match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        // Scalars a stack file may write unquoted.
        Some(Value::Array(_)) => "text".to_owned(),
        _ => "any".to_owned(),
    };
    let mut out = match base.as_str() {
        "array" => format!(
            "list of {}",
            schema
                .get("items")
                .map_or_else(|| "any".to_owned(), type_of)
        ),
        "object" => match schema.get("additionalProperties") {
            Some(Value::Object(_)) => format!(
                "map of text to {}",
                schema
                    .get("additionalProperties")
                    .map_or_else(|| "any".to_owned(), type_of)
            ),
            _ => "object".to_owned(),
        },
        other => other.to_owned(),
    };
    match (
        schema.get("minimum"),
        schema.get("exclusiveMinimum"),
        schema.get("maximum"),
    ) {
        (Some(min), _, Some(max)) => write!(out, ", {min} to {max}").unwrap(),
        (_, Some(min), Some(max)) => write!(out, ", over {min} to {max}").unwrap(),
        (Some(min), _, None) => write!(out, ", at least {min}").unwrap(),
        _ => {}
    }
    if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
        write!(out, ", matching `{p}`").unwrap();
    }
    out
}

/// One table row's cell: no line breaks, no bare `|`.
fn cell(text: &str) -> String {
    text.replace('\n', " ").replace('|', "\\|")
}

/// The fields of an object schema as a table.
fn fields(out: &mut String, object: &Value) {
    let required: Vec<&str> = object
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = object.get("properties").and_then(Value::as_object) else {
        return;
    };
    out.push_str("| field | type | required | default | what it is |\n|---|---|---|---|---|\n");
    for (name, schema) in properties {
        let description = schema
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("");
        let default = match schema.get("default") {
            Some(Value::String(s)) => format!("`{s}`"),
            Some(v) => format!("`{v}`"),
            None => String::new(),
        };
        writeln!(
            out,
            "| `{name}` | {} | {} | {} | {} |",
            cell(&type_of(schema)),
            if required.contains(&name.as_str()) {
                "yes"
            } else {
                ""
            },
            cell(&default),
            cell(description)
        )
        .unwrap();
    }
    out.push('\n');
}

/// A page of a file format: the top-level fields, then each definition.
fn schema_page(title: &str, intro: &str, schema: &Value) -> String {
    let mut out = format!(
        "<!-- Generated from the code by `{BLESS}` with HYPERFORGE_BLESS=1; do not edit. -->\n\n# {title}\n\n{intro}\n\n"
    );
    if let Some(d) = schema.get("description").and_then(Value::as_str) {
        writeln!(out, "{d}\n").unwrap();
    }
    out.push_str("## Top level\n\n");
    fields(&mut out, schema);
    if let Some(defs) = schema.get("$defs").and_then(Value::as_object) {
        for (name, def) in defs {
            writeln!(out, "## {name}\n").unwrap();
            if let Some(d) = def.get("description").and_then(Value::as_str) {
                writeln!(out, "{d}\n").unwrap();
            }
            if def.get("properties").is_some() {
                fields(&mut out, def);
            } else {
                writeln!(out, "{}\n", type_of(def)).unwrap();
            }
        }
    }
    out
}

#[test]
fn the_stack_file_reference_is_up_to_date() {
    let page = schema_page(
        "Stack-file fields",
        "Every field a stack file may hold, from the stack-file schema (`docs/stack-file.schema.json`). A construct is a mapping whose first key names its kind and its id.",
        &hyperforge::stackfile::json_schema(),
    );
    generated_file("docs/book/src/reference/stack-file.md", &page, BLESS);
}

#[test]
fn the_fleet_file_reference_is_up_to_date() {
    let page = schema_page(
        "Fleet-file fields",
        "Every field a fleet file may hold, from the fleet-file schema (`docs/fleet-file.schema.json`).",
        &hyperforge::stackfile::fleet::json_schema(),
    );
    generated_file("docs/book/src/reference/fleet-file.md", &page, BLESS);
}

#[test]
fn the_instance_catalog_reference_is_up_to_date() {
    let mut page = format!(
        "<!-- Generated from the code by `{BLESS}` with HYPERFORGE_BLESS=1; do not edit. -->\n\n# Instance catalog\n\nThe GPU instance types hyperforge knows (`hyperforge::catalog::instances()`), with the facts its rules and the planner read.\n\n| instance type | GPUs | GPU memory (MiB each) | vCPUs | memory (MiB) | local NVMe (GB) | network (Gbps) | EFA interfaces | NVLink | HyperPod regions |\n|---|---|---|---|---|---|---|---|---|---|\n"
    );
    for i in hyperforge::catalog::instances() {
        writeln!(
            page,
            "| `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            i.name,
            i.gpu_count,
            i.gpu_memory_mib,
            i.vcpus,
            i.memory_mib,
            i.local_nvme_gb,
            i.network_gbps,
            i.efa_max,
            if i.nvlink { "yes" } else { "no" },
            if i.hyperpod_regions.is_empty() {
                "none".to_owned()
            } else {
                i.hyperpod_regions.join(", ")
            }
        )
        .unwrap();
    }
    generated_file("docs/book/src/reference/instances.md", &page, BLESS);
}

#[test]
fn the_command_reference_is_up_to_date() {
    let help = |args: &[&str]| -> String {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hyperforge"))
            .args(args)
            .env("NO_COLOR", "1")
            .env("COLUMNS", "100")
            .output()
            .expect("hyperforge runs");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let top = help(&["--help"]);
    let mut page = format!(
        "<!-- Generated from the code by `{BLESS}` with HYPERFORGE_BLESS=1; do not edit. -->\n\n# The `hyperforge` command\n\nEach command's own `--help`, as the command prints it.\n\n```text\n{top}```\n"
    );
    // The commands, as the top-level help lists them.
    let commands: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() >= 5, "{top}");
    for command in commands {
        let text = help(&[&command, "--help"]);
        write!(page, "\n## `hyperforge {command}`\n\n```text\n{text}```\n").unwrap();
    }
    generated_file("docs/book/src/reference/cli.md", &page, BLESS);
}

/// The targets of a page's Markdown links (`[text](target)`), code spans and blocks left out.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        // Drop code spans.
        let mut plain = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            out.push(after[..end].to_owned());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_of_the_book_resolves() {
    let src = repo_root().join("docs/book/src");
    let mut pages = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("docs/book/src exists") {
            let path = entry.expect("readable").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    assert!(pages.len() > 10, "{} pages", pages.len());
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("UTF-8 page");
        for target in links(&text) {
            if target.starts_with("http://")
                || target.starts_with("https://")
                || target.starts_with('#')
                || target.starts_with("mailto:")
            {
                continue;
            }
            let file = target.split('#').next().unwrap_or(&target);
            let resolved = page.parent().unwrap_or(Path::new(".")).join(file);
            checked += 1;
            if !resolved.exists() {
                broken.push(format!(
                    "{}: {target}",
                    page.strip_prefix(&src).unwrap_or(page).display()
                ));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked > 20, "only {checked} links checked");
    // Every page is in the summary.
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).expect("SUMMARY.md");
    for page in &pages {
        let rel = page
            .strip_prefix(&src)
            .unwrap_or(page)
            .to_string_lossy()
            .replace('\\', "/");
        if rel != "SUMMARY.md" {
            assert!(
                summary.contains(&format!("]({rel})")),
                "{rel} is not in SUMMARY.md"
            );
        }
    }
}
