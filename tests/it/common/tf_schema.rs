//! A checker of Terraform JSON (`*.tf.json`) against the provider argument schemas in
//! `tests/data/terraform/` (an offline stand-in for `terraform validate`, which needs provider
//! plugins). It walks `resource.<type>.<name>` and `data.<type>.<name>`, treats a string holding
//! `${` as a value of any type, ignores meta-arguments, and reports unknown arguments and
//! blocks, missing required ones, wrong types and blocks given as scalars.

use serde_json::{Map, Value};
use std::path::Path;

/// Arguments Terraform itself defines on every resource and data block.
const META: &[&str] = &[
    "count",
    "for_each",
    "provider",
    "depends_on",
    "lifecycle",
    "connection",
    "provisioner",
    "//",
];

/// Resource and data-source schemas of every provider, merged.
pub struct Schema {
    resources: Map<String, Value>,
    data: Map<String, Value>,
}

impl Schema {
    /// The schemas committed in `tests/data/terraform/*.schema.json`.
    pub fn committed() -> Schema {
        let dir = super::repo_root().join("tests/data/terraform");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.to_string_lossy().ends_with(".schema.json"))
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no schema in {}", dir.display());
        let mut schema = Schema {
            resources: Map::new(),
            data: Map::new(),
        };
        for f in files {
            let v = read_json(&f);
            for (kind, into) in [
                ("resources", &mut schema.resources),
                ("data", &mut schema.data),
            ] {
                if let Some(Value::Object(m)) = v.get(kind) {
                    into.extend(m.clone());
                }
            }
        }
        schema
    }

    /// Every finding in the Terraform JSON document `doc`.
    pub fn check(&self, doc: &Value) -> Vec<String> {
        let mut findings = Vec::new();
        for (section, schemas) in [("resource", &self.resources), ("data", &self.data)] {
            let Some(by_type) = doc.get(section) else {
                continue;
            };
            let Some(by_type) = by_type.as_object() else {
                findings.push(format!("{section}: not an object"));
                continue;
            };
            for (ty, instances) in by_type {
                let Some(Value::Object(schema)) = schemas.get(ty) else {
                    findings.push(format!("{section}.{ty}: unknown {section} type"));
                    continue;
                };
                let Some(instances) = instances.as_object() else {
                    findings.push(format!("{section}.{ty}: not an object of named blocks"));
                    continue;
                };
                for (name, body) in instances {
                    let at = format!("{section}.{ty}.{name}");
                    match body {
                        Value::Object(body) => check_body(&at, body, schema, true, &mut findings),
                        _ => findings.push(format!("{at}: not an object")),
                    }
                }
            }
        }
        findings
    }
}

/// Reads a JSON file, panicking with its path on error.
pub fn read_json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn is_interpolation(v: &Value) -> bool {
    matches!(v, Value::String(s) if s.contains("${"))
}

fn is_block_like(v: &Value) -> bool {
    match v {
        Value::Object(_) => true,
        Value::Array(items) => !items.is_empty() && items.iter().all(Value::is_object),
        _ => false,
    }
}

fn check_body(
    at: &str,
    body: &Map<String, Value>,
    schema: &Map<String, Value>,
    top_level: bool,
    findings: &mut Vec<String>,
) {
    for (key, value) in body {
        if key == "//" || (top_level && META.contains(&key.as_str())) {
            continue;
        }
        let Some(spec) = schema.get(key) else {
            let what = if is_block_like(value) {
                "block"
            } else {
                "argument"
            };
            findings.push(format!("{at}: unknown {what} `{key}`"));
            continue;
        };
        let path = format!("{at}.{key}");
        if let Some(Value::Object(block)) = spec.get("block") {
            check_block(&path, value, block, spec, findings);
        } else {
            check_type(&path, value, spec, findings);
        }
    }
    for (key, spec) in schema {
        let required = spec.get("required").and_then(Value::as_bool) == Some(true);
        if required && !body.contains_key(key) {
            let what = if spec.get("block").is_some() {
                "block"
            } else {
                "argument"
            };
            findings.push(format!("{at}: missing required {what} `{key}`"));
        }
    }
}

fn check_block(
    path: &str,
    value: &Value,
    block: &Map<String, Value>,
    spec: &Value,
    findings: &mut Vec<String>,
) {
    if is_interpolation(value) {
        return;
    }
    let repeats = spec.get("list").and_then(Value::as_bool) == Some(true);
    match value {
        Value::Object(body) => check_body(path, body, block, false, findings),
        Value::Array(items) if items.iter().all(Value::is_object) => {
            if !repeats && items.len() > 1 {
                findings.push(format!(
                    "{path}: block does not repeat, {} given",
                    items.len()
                ));
            }
            for (i, item) in items.iter().enumerate() {
                if let Value::Object(body) = item {
                    check_body(&format!("{path}[{i}]"), body, block, false, findings);
                }
            }
        }
        other => findings.push(format!(
            "{path}: a block, given as the scalar {}",
            short(other)
        )),
    }
}

fn check_type(path: &str, value: &Value, spec: &Value, findings: &mut Vec<String>) {
    if is_interpolation(value) {
        return;
    }
    let ty = spec.get("type").and_then(Value::as_str).unwrap_or("any");
    let elem = spec.get("elem").and_then(Value::as_str);
    let ok = match (ty, value) {
        ("any", _) => true,
        ("string", Value::String(_)) => true,
        ("number", Value::Number(_)) => true,
        ("bool", Value::Bool(_)) => true,
        ("list", Value::Array(items)) => {
            if let Some(elem) = elem {
                for (i, item) in items.iter().enumerate() {
                    check_type(
                        &format!("{path}[{i}]"),
                        item,
                        &serde_json::json!({ "type": elem }),
                        findings,
                    );
                }
            }
            true
        }
        ("map", Value::Object(m)) => {
            if let Some(elem) = elem {
                for (k, item) in m {
                    check_type(
                        &format!("{path}.{k}"),
                        item,
                        &serde_json::json!({ "type": elem }),
                        findings,
                    );
                }
            }
            true
        }
        _ => false,
    };
    if !ok {
        findings.push(format!("{path}: expected {ty}, got {}", short(value)));
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 60 {
        format!(
            "{}...",
            &s[..s.char_indices().nth(57).map_or(s.len(), |(i, _)| i)]
        )
    } else {
        s
    }
}
