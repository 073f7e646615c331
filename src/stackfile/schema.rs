//! The format as data: every object's fields, their types and docs. The same tables drive the
//! structural check of a file (unknown fields, wrong types, missing fields) and the JSON
//! Schema, so the two cannot drift apart. The file and stage shapes are here; each construct's
//! shape is declared in its own module beside its builder and listed by the registry
//! ([`crate::constructs::STACK_FILE_SHAPES`]).

pub use crate::constructs::stack_file::{Field, Shape, Ty, Want};
use serde_json::{json, Map, Value};

pub(super) const fn req(name: &'static str, ty: Ty, doc: &'static str) -> Field {
    Field {
        name,
        ty,
        required: true,
        default: None,
        doc,
    }
}

pub(super) const fn opt(name: &'static str, ty: Ty, doc: &'static str) -> Field {
    Field {
        name,
        ty,
        required: false,
        default: None,
        doc,
    }
}

/// An optional field whose absence stands for `default` (as the file would write it).
pub(super) const fn opt_default(
    name: &'static str,
    ty: Ty,
    default: &'static str,
    doc: &'static str,
) -> Field {
    Field {
        name,
        ty,
        required: false,
        default: Some(default),
        doc,
    }
}

/// The names of the Helm presets (the builder functions of `constructs::helm`).
pub const HELM_PRESETS: &[&str] = &[
    "hyperpod-dependencies",
    "nvidia-device-plugin",
    "efa-device-plugin",
    "lws",
    "kueue",
    "aws-load-balancer-controller",
    "karpenter",
    "aws-for-fluent-bit",
    "dcgm-exporter",
    "kube-state-metrics",
    "keda",
];

/// The top level of a stack file.
pub static FILE: Shape = Shape {
    name: "StackFile",
    doc: "One hyperforge stack: its name, region, tags and ordered deployment stages.",
    fields: &[
        &req(
            "stack",
            Ty::Str,
            "The stack's name; it prefixes the CloudFormation stack names of its stages.",
        ),
        &req("region", Ty::Str, "The AWS region, e.g. `us-west-2`."),
        &opt(
            "description",
            Ty::Str,
            "A human description, written into every template.",
        ),
        &opt(
            "tags",
            Ty::StrMap,
            "Tags on every taggable resource of this stack.",
        ),
        &opt(
            "app_tags",
            Ty::StrMap,
            "App-level tags (shared by every stack of the app; a stack tag of the same key wins).",
        ),
        &req("stages", Ty::Stages, "The deployment stages, in order."),
        &opt(
            "acknowledge",
            Ty::List(&ACKNOWLEDGEMENT),
            "Warnings (or notes) accepted at a construct path, each with its reason: left out of the report and listed in the manifest.",
        ),
    ],
};

/// A warning accepted at a construct path (`Stack::acknowledge`).
pub static ACKNOWLEDGEMENT: Shape = Shape {
    name: "Acknowledgement",
    doc: "A warning or note a reviewer accepted at one construct path (and below), with the reason.",
    fields: &[
        &req(
            "path",
            Ty::Str,
            "The construct path inside the stack (`GpuNodes`, `Workload/Deployment`); empty for the whole stack.",
        ),
        &req("code", Ty::Str, "The diagnostic code, e.g. `HF0506`."),
        &req("reason", Ty::Str, "Why it is acceptable here."),
    ],
};

/// A CloudFormation or Kubernetes stage.
pub static CONSTRUCT_STAGE: Shape = Shape {
    name: "ConstructStage",
    doc: "A stage built from constructs: one CloudFormation template, or one multi-document Kubernetes YAML file.",
    fields: &[
        &req("name", Ty::Str, "The stage's name, unique in the stack."),
        &req("kind", Ty::Enum(&["cloudformation", "kubernetes"]), "`cloudformation` or `kubernetes`."),
        &req("constructs", Ty::Constructs, "The constructs placed in the stage, in order."),
    ],
};

/// A Helm stage.
pub static HELM_STAGE: Shape = Shape {
    name: "HelmStage",
    doc: "A stage installing one Helm release with pinned chart and values.",
    fields: &[
        &req("name", Ty::Str, "The stage's name, unique in the stack."),
        &req("kind", Ty::Enum(&["helm"]), "`helm`."),
        &req(
            "preset",
            Ty::Enum(HELM_PRESETS),
            "The release: one of the presets of `hyperforge::constructs::HelmRelease`.",
        ),
        &opt(
            "cluster",
            Ty::Ref(Want::Eks),
            "The EKS cluster (for `aws-load-balancer-controller`, `karpenter` and `aws-for-fluent-bit`).",
        ),
        &opt(
            "vpc",
            Ty::Ref(Want::Vpc),
            "The VPC (for `aws-load-balancer-controller`).",
        ),
        &opt(
            "node_selector",
            Ty::StrMap,
            "Node labels the release's pods must match (for `kube-state-metrics`: `hyperforge.io/node-role: system` where the stack has system nodes).",
        ),
    ],
};

/// An upload stage.
pub static UPLOAD_STAGE: Shape = Shape {
    name: "UploadStage",
    doc: "A stage copying a construct's files to the bucket it created in an earlier stage.",
    fields: &[
        &req("name", Ty::Str, "The stage's name, unique in the stack."),
        &req("kind", Ty::Enum(&["upload"]), "`upload`."),
        &req(
            "source",
            Ty::Ref(Want::Lifecycle),
            "The construct whose files are uploaded (a `lifecycle_scripts` construct).",
        ),
    ],
};

/// Every stage shape, by kind.
pub const STAGE_KINDS: &[(&str, &Shape)] = &[
    ("cloudformation", &CONSTRUCT_STAGE),
    ("kubernetes", &CONSTRUCT_STAGE),
    ("helm", &HELM_STAGE),
    ("upload", &UPLOAD_STAGE),
];

/// Every construct shape, in registry order; the construct's kind is the key holding its id.
/// Each is declared in its construct's module, beside the builder.
pub const CONSTRUCTS: &[&Shape] = crate::constructs::STACK_FILE_SHAPES;

/// Every shape reachable from the top, for `$defs`.
fn collect(shape: &'static Shape, out: &mut Vec<&'static Shape>) {
    if out.iter().any(|s| std::ptr::eq(*s, shape)) {
        return;
    }
    out.push(shape);
    for f in shape.fields {
        match f.ty {
            Ty::Obj(s) | Ty::List(s) => collect(s, out),
            _ => {}
        }
    }
}

fn def_name(shape: &Shape) -> String {
    // Construct kinds are snake_case; give them PascalCase definitions.
    shape
        .name
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn reference_schema(want: Want) -> Value {
    json!({
        "type": "string",
        "pattern": "^[A-Za-z][A-Za-z0-9]*(\\.[a-z_]+)?$",
        "description": format!("A reference by construct id to {}.", want.describe()),
    })
}

fn ty_schema(ty: Ty) -> Value {
    match ty {
        Ty::Str => json!({"type": ["string", "number", "boolean"]}),
        Ty::U32(r) | Ty::U64(r) | Ty::I64(r) => {
            json!({"type": "integer", "minimum": r.min, "maximum": r.max})
        }
        Ty::F64(r) if r.min_exclusive => {
            json!({"type": "number", "exclusiveMinimum": r.min, "maximum": r.max})
        }
        Ty::F64(r) => json!({"type": "number", "minimum": r.min, "maximum": r.max}),
        Ty::Bool => json!({"type": "boolean"}),
        Ty::Enum(values) => json!({"enum": values}),
        Ty::StrMap => json!({
            "type": "object",
            "additionalProperties": {"type": ["string", "number", "boolean"]}
        }),
        Ty::StrList => json!({"type": "array", "items": {"type": ["string", "number", "boolean"]}}),
        Ty::EnumList(values) => json!({"type": "array", "items": {"enum": values}}),
        Ty::Ref(want) => reference_schema(want),
        Ty::Refs(want) => json!({
            "anyOf": [reference_schema(want), {"type": "array", "items": reference_schema(want)}]
        }),
        Ty::Obj(s) => json!({"$ref": format!("#/$defs/{}", def_name(s))}),
        Ty::List(s) => {
            json!({"type": "array", "items": {"$ref": format!("#/$defs/{}", def_name(s))}})
        }
        Ty::Constructs => json!({"type": "array", "items": {"$ref": "#/$defs/Construct"}}),
        Ty::Stages => json!({"type": "array", "items": {"$ref": "#/$defs/Stage"}}),
    }
}

/// A field's default as the JSON value its type takes (`365` a number, `true` a boolean,
/// `per_az` a string); `None` when the text is not a value of the type, which
/// `tests::every_default_is_a_value_of_its_field` refuses.
fn typed_default(ty: Ty, text: &str) -> Option<Value> {
    match ty {
        Ty::U32(r) | Ty::U64(r) | Ty::I64(r) => {
            let n: i64 = text.parse().ok()?;
            (r.min <= n && n <= r.max).then(|| json!(n))
        }
        Ty::F64(r) => {
            let x: f64 = text.parse().ok()?;
            let above = if r.min_exclusive {
                x > r.min
            } else {
                x >= r.min
            };
            (above && x <= r.max).then(|| json!(x))
        }
        Ty::Bool => text.parse::<bool>().ok().map(Value::Bool),
        Ty::Enum(values) => values.contains(&text).then(|| json!(text)),
        Ty::Str => Some(json!(text)),
        Ty::StrMap
        | Ty::StrList
        | Ty::EnumList(_)
        | Ty::Ref(_)
        | Ty::Refs(_)
        | Ty::Obj(_)
        | Ty::List(_)
        | Ty::Constructs
        | Ty::Stages => None,
    }
}

fn object_schema(shape: &Shape, kind_const: Option<&str>) -> Value {
    let mut props = Map::new();
    for f in shape.fields {
        let mut s = ty_schema(f.ty);
        if let (Some(k), "kind") = (kind_const, f.name) {
            s = json!({"const": k});
        }
        if let Value::Object(m) = &mut s {
            m.entry("description")
                .or_insert_with(|| Value::String(f.doc.to_owned()));
            if let Some(default) = f.default.and_then(|d| typed_default(f.ty, d)) {
                m.insert("default".to_owned(), default);
            }
        }
        props.insert(f.name.to_owned(), s);
    }
    let required: Vec<&str> = shape
        .fields
        .iter()
        .filter(|f| f.required)
        .map(|f| f.name)
        .collect();
    json!({
        "type": "object",
        "description": shape.doc,
        "properties": props,
        "required": required,
        "additionalProperties": false,
    })
}

/// Every shape of a stack file: the constructs', the stages' and the top level's, with every
/// shape they reach, each once.
fn stack_file_shapes() -> Vec<&'static Shape> {
    let mut shapes = Vec::new();
    for s in CONSTRUCTS {
        collect(s, &mut shapes);
    }
    for (_, s) in STAGE_KINDS {
        collect(s, &mut shapes);
    }
    collect(&FILE, &mut shapes);
    shapes
}

/// The JSON Schema (draft 2020-12) of the format.
pub fn json_schema() -> Value {
    // Every shape the top level reaches (its acknowledgements), the top level itself aside.
    let shapes = stack_file_shapes();
    let mut defs = Map::new();
    for s in &shapes {
        if STAGE_KINDS.iter().any(|(_, k)| std::ptr::eq(*k, *s)) || std::ptr::eq(*s, &FILE) {
            continue;
        }
        defs.insert(def_name(s), object_schema(s, None));
    }
    let stages: Vec<Value> = [
        ("cloudformation", &CONSTRUCT_STAGE),
        ("kubernetes", &CONSTRUCT_STAGE),
        ("helm", &HELM_STAGE),
        ("upload", &UPLOAD_STAGE),
    ]
    .iter()
    .map(|(kind, s)| object_schema(s, Some(kind)))
    .collect();
    defs.insert(
        "Stage".to_owned(),
        json!({"description": "A deployment stage; `kind` says which tool deploys it.", "oneOf": stages}),
    );
    let constructs: Vec<Value> = CONSTRUCTS
        .iter()
        .map(|s| json!({"$ref": format!("#/$defs/{}", def_name(s))}))
        .collect();
    defs.insert(
        "Construct".to_owned(),
        json!({"description": "A construct: the key naming its kind holds its id (`network: Network`).", "oneOf": constructs}),
    );
    let mut top = object_schema(&FILE, None);
    if let Value::Object(m) = &mut top {
        let mut head = Map::new();
        head.insert(
            "$schema".to_owned(),
            json!("https://json-schema.org/draft/2020-12/schema"),
        );
        head.insert(
            "$id".to_owned(),
            json!("https://hyperforge.dev/stack-file.schema.json"),
        );
        head.insert("title".to_owned(), json!("hyperforge stack file"));
        head.extend(std::mem::take(m));
        head.insert("$defs".to_owned(), Value::Object(defs));
        *m = head;
    }
    top
}

/// The JSON Schema (draft 2020-12) of a document whose top level is `top`, every object shape
/// it reaches in `$defs` (the fleet file's).
pub(super) fn document_schema(top: &'static Shape, id: &str, title: &str) -> Value {
    let mut shapes = Vec::new();
    collect(top, &mut shapes);
    let mut defs = Map::new();
    for s in shapes.iter().skip(1) {
        defs.insert(def_name(s), object_schema(s, None));
    }
    let mut head = Map::new();
    head.insert(
        "$schema".to_owned(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    head.insert("$id".to_owned(), json!(id));
    head.insert("title".to_owned(), json!(title));
    if let Value::Object(m) = object_schema(top, None) {
        head.extend(m);
    }
    head.insert("$defs".to_owned(), Value::Object(defs));
    Value::Object(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every declared whole-number range fits the type its reader returns, so a value inside
    /// the range is never read as absent.
    #[test]
    fn declared_ranges_fit_their_types() {
        let mut shapes = Vec::new();
        for s in CONSTRUCTS {
            collect(s, &mut shapes);
        }
        let mut numeric = 0;
        for shape in shapes {
            for f in shape.fields {
                let ok = match f.ty {
                    Ty::U32(r) => r.min >= 0 && r.max <= i64::from(u32::MAX),
                    Ty::U64(r) | Ty::I64(r) => r.min >= 0 || matches!(f.ty, Ty::I64(_)),
                    Ty::F64(r) => r.min.is_finite() && r.max.is_finite() && r.min <= r.max,
                    _ => continue,
                };
                numeric += 1;
                assert!(ok, "{}.{}: {:?}", shape.name, f.name, f.ty);
            }
        }
        assert!(numeric >= 20, "{numeric} numeric fields");
    }

    /// A default is a value its field accepts (a number in range, one of an enum's values),
    /// given only to optional fields, so the schema's `default` is one a file could write.
    #[test]
    fn every_default_is_a_value_of_its_field() {
        let mut shapes = stack_file_shapes();
        collect(&super::super::fleet::FLEET_FILE, &mut shapes);
        let mut defaults = 0;
        for shape in shapes {
            for f in shape.fields {
                let Some(default) = f.default else { continue };
                defaults += 1;
                assert!(
                    !f.required,
                    "{}.{} is required and has a default",
                    shape.name, f.name
                );
                assert!(
                    typed_default(f.ty, default).is_some(),
                    "{}.{}: `{default}` is not a value of {:?}",
                    shape.name,
                    f.name,
                    f.ty
                );
            }
        }
        assert!(defaults >= 30, "{defaults} defaults");
    }
}
