//! Declarative stack files: a YAML description of one stack, read into the same typed builders
//! a Rust program would call, with every diagnostic pointing at `file:line:column`.
//!
//! A file names the stack, its region, tags and ordered stages; stages hold constructs (the
//! key naming the construct's kind holds its id: `network: Network`), a Helm preset, or an
//! upload. Constructs refer to each other by id (`vpc: Network`,
//! `subnets: Network.private_subnets`); references resolve to the typed handles that
//! [`Stack::add`] returned. The format is documented in `docs/stack-files.md`; its JSON Schema is
//! [`json_schema`].
//!
//! Loading checks the file's structure (unknown fields with a suggestion, wrong types, missing
//! fields, references), reporting every problem at once, then builds the [`App`] and runs
//! [`App::validate`]; builder diagnostics are mapped back to the line that set the value.

mod schema;
mod yaml;

use crate::app::App;
use crate::app::{kind, Ref, Stack};
use crate::constructs::*;
use crate::diagnostics::{Code, Diagnostic, Diagnostics};
use schema::{Shape, Ty, Want};
use std::collections::BTreeMap;
use std::path::Path;
use yaml::{Node, Pos, Value};

/// Files larger than this are refused before parsing.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Reads and loads the stack file at `path` (see [`load_str`]).
pub fn load_file(path: &Path) -> Result<App, Diagnostics> {
    let origin = path.display().to_string();
    let fail = |code: Code, message: String, help: &str| {
        let mut ds = Diagnostics::new();
        ds.push(Diagnostic::new(
            code,
            format!("{origin}:1:1"),
            message,
            help,
        ));
        Err(ds)
    };
    let size = match std::fs::metadata(path) {
        Ok(m) => m.len(),
        Err(e) => {
            return fail(
                Code::StackFileUnreadable,
                format!("cannot read `{origin}`: {e}"),
                "check the path and its permissions",
            )
        }
    };
    if size > MAX_FILE_BYTES {
        return too_large(&origin, size);
    }
    let mut bytes = Vec::new();
    let read = std::fs::File::open(path).and_then(|f| {
        use std::io::Read;
        f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)
    });
    if let Err(e) = read {
        return fail(
            Code::StackFileUnreadable,
            format!("cannot read `{origin}`: {e}"),
            "check the path and its permissions",
        );
    }
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return too_large(&origin, bytes.len() as u64);
    }
    match String::from_utf8(bytes) {
        Ok(text) => load_str(&origin, &text),
        Err(e) => {
            let offset = e.utf8_error().valid_up_to();
            let valid = std::str::from_utf8(&e.as_bytes()[..offset]).unwrap_or_default();
            let line = valid.matches('\n').count() + 1;
            let col = valid.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            let mut ds = Diagnostics::new();
            ds.push(Diagnostic::new(
                Code::StackFileNotYaml,
                format!("{origin}:{line}:{col}"),
                format!("`{origin}` is not UTF-8 text (invalid byte at offset {offset})"),
                "stack files are UTF-8 YAML; check that this is the file you meant",
            ));
            Err(ds)
        }
    }
}

fn too_large(origin: &str, size: u64) -> Result<App, Diagnostics> {
    let mut ds = Diagnostics::new();
    ds.push(Diagnostic::new(
        Code::StackFileTooLarge,
        format!("{origin}:1:1"),
        format!("`{origin}` is {size} bytes; stack files may be at most {MAX_FILE_BYTES} bytes (1 MiB)"),
        "a stack file describes one stack in a few hundred lines; check that this is the file you meant",
    ));
    Err(ds)
}

/// Loads a stack file's text. `origin` is the file name shown in diagnostics. Returns the app,
/// or every diagnostic (structural problems of the file, or the builders' errors mapped back
/// to the file's lines). Warnings do not fail loading; synthesis reports them.
pub fn load_str(origin: &str, text: &str) -> Result<App, Diagnostics> {
    let mut cx = Cx::new(origin);
    if text.len() as u64 > MAX_FILE_BYTES {
        return too_large(origin, text.len() as u64);
    }
    let root = match yaml::parse(text) {
        Ok(Some(root)) if !root.is_null() => root,
        Ok(_) => {
            cx.report(
                Code::StackFileEmpty,
                Pos { line: 1, col: 1 },
                "",
                format!("`{origin}` holds no stack description"),
                "start with `stack: <name>`, `region: <region>` and `stages:`; see docs/stack-files.md",
            );
            return Err(cx.diags);
        }
        Err(e) => {
            cx.report(
                Code::StackFileNotYaml,
                e.pos,
                "",
                format!("`{origin}` is not valid YAML: {}", e.message),
                "fix the syntax at this position; see docs/stack-files.md for the format",
            );
            return Err(cx.diags);
        }
    };
    if !matches!(root.value, Value::Map(_)) {
        cx.report(
            Code::StackFileNotYaml,
            root.pos,
            "",
            format!(
                "`{origin}` is {} where a stack description (a mapping) was expected",
                root.type_name()
            ),
            "start with `stack: <name>`, `region: <region>` and `stages:`; see docs/stack-files.md",
        );
        return Err(cx.diags);
    }
    cx.check_obj(&root, &schema::FILE, "");
    let mut b = Builder::new(cx, &root);
    let app = b.build(&root);
    let Builder { cx, index, .. } = b;
    if cx.diags.has_errors() {
        return Err(cx.diags);
    }
    let Some(app) = app else {
        return Err(cx.diags);
    };
    let found = app.validate();
    if found.has_errors() {
        return Err(index.map(found, origin));
    }
    Ok(app)
}

/// The JSON Schema (draft 2020-12) of the stack file format; `docs/stack-file.schema.json` is
/// generated from it.
pub fn json_schema() -> serde_json::Value {
    schema::json_schema()
}

// ---------------------------------------------------------------------------------------------
// Diagnostics of the file itself.

struct Cx {
    origin: String,
    diags: Diagnostics,
}

/// Edit distance, for "did you mean" suggestions.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The closest of `candidates` to `word`, if close enough to be a likely typo.
fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let word_l = word.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (distance(&word_l, &c.to_ascii_lowercase()), c))
        .filter(|(d, c)| *d <= (c.len().max(word.len()) / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn joined(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn parse_uint(node: &Node) -> Option<u64> {
    match &node.value {
        Value::Scalar(s, true) => {
            let s = s.strip_prefix('+').unwrap_or(s).replace('_', "");
            s.parse::<u64>().ok()
        }
        _ => None,
    }
}

fn parse_int(node: &Node) -> Option<i64> {
    match &node.value {
        Value::Scalar(s, true) => {
            let s = s.strip_prefix('+').unwrap_or(s).replace('_', "");
            s.parse::<i64>().ok()
        }
        _ => None,
    }
}

fn parse_float(node: &Node) -> Option<f64> {
    match &node.value {
        Value::Scalar(s, true) => s
            .replace('_', "")
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite()),
        _ => None,
    }
}

fn parse_bool(node: &Node) -> Option<bool> {
    match &node.value {
        Value::Scalar(s, true) => match s.as_str() {
            "true" | "True" | "TRUE" => Some(true),
            "false" | "False" | "FALSE" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// A scalar's text, unless it is null or a collection.
fn parse_text(node: &Node) -> Option<&str> {
    if node.is_null() {
        None
    } else {
        node.as_str()
    }
}

fn entries(node: &Node) -> &[(Node, Node)] {
    match &node.value {
        Value::Map(e) => e,
        _ => &[],
    }
}

fn items(node: &Node) -> &[Node] {
    match &node.value {
        Value::Seq(i) => i,
        _ => &[],
    }
}

fn child(context: &str, key: &str) -> String {
    if context.is_empty() {
        key.to_owned()
    } else {
        format!("{context}.{key}")
    }
}

/// The kind of construct a mapping describes: the first of its keys that names a kind.
fn construct_shape(node: &Node) -> Option<&'static Shape> {
    entries(node).iter().find_map(|(k, _)| {
        schema::CONSTRUCTS
            .iter()
            .copied()
            .find(|s| Some(s.name) == k.as_str())
    })
}

impl Cx {
    fn new(origin: &str) -> Cx {
        Cx {
            origin: origin.to_owned(),
            diags: Diagnostics::new(),
        }
    }

    fn report(
        &mut self,
        code: Code,
        pos: Pos,
        context: &str,
        message: impl Into<String>,
        help: impl Into<String>,
    ) {
        let message = message.into();
        let message = if context.is_empty() {
            message
        } else {
            format!("[{context}] {message}")
        };
        self.diags.push(Diagnostic::new(
            code,
            format!("{}:{}:{}", self.origin, pos.line, pos.col),
            message,
            help,
        ));
    }

    fn wrong_type(&mut self, node: &Node, context: &str, expected: &str) {
        let found = match &node.value {
            Value::Scalar(s, _) if !node.is_null() => format!("{} `{s}`", node.type_name()),
            _ => node.type_name().to_owned(),
        };
        self.report(
            Code::StackFileWrongType,
            node.pos,
            context,
            format!("expected {expected}, found {found}"),
            format!("write {expected} here; see docs/stack-files.md"),
        );
    }

    fn check_obj(&mut self, node: &Node, shape: &'static Shape, context: &str) {
        let Value::Map(entries) = &node.value else {
            self.wrong_type(node, context, &format!("a mapping ({})", shape.doc));
            return;
        };
        for (key, value) in entries {
            let name = key.as_str().unwrap_or_default();
            match shape.field(name) {
                Some(f) => self.check_ty(value, f.ty, &child(context, name)),
                None => {
                    let allowed: Vec<&str> = shape.fields.iter().map(|f| f.name).collect();
                    let help = match suggest(name, allowed.iter().copied()) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None => format!("allowed fields: {}", joined(&allowed)),
                    };
                    self.report(
                        Code::StackFileUnknownField,
                        key.pos,
                        context,
                        format!("unknown field `{name}` in {}", shape.name),
                        help,
                    );
                }
            }
        }
        for f in shape.fields.iter().filter(|f| f.required) {
            if !entries.iter().any(|(k, _)| k.as_str() == Some(f.name)) {
                self.report(
                    Code::StackFileMissingField,
                    node.pos,
                    context,
                    format!("{} is missing required field `{}`", shape.name, f.name),
                    format!("add `{}:` ({})", f.name, f.doc),
                );
            }
        }
    }

    fn check_enum(&mut self, node: &Node, values: &[&str], context: &str) {
        match parse_text(node) {
            Some(v) if values.contains(&v) => {}
            Some(v) if matches!(node.value, Value::Scalar(..)) => {
                let help = match suggest(v, values.iter().copied()) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => format!("use one of: {}", joined(values)),
                };
                self.report(
                    Code::StackFileInvalidValue,
                    node.pos,
                    context,
                    format!("`{v}` is not one of {}", joined(values)),
                    help,
                );
            }
            _ => self.wrong_type(node, context, &format!("one of {}", joined(values))),
        }
    }

    fn check_ty(&mut self, node: &Node, ty: Ty, context: &str) {
        match ty {
            Ty::Str | Ty::Ref(_) => {
                if parse_text(node).is_none() {
                    self.wrong_type(node, context, "a string");
                }
            }
            Ty::U32 => {
                if parse_uint(node)
                    .and_then(|v| u32::try_from(v).ok())
                    .is_none()
                {
                    self.wrong_type(node, context, "a whole number from 0 to 4294967295");
                }
            }
            Ty::U64 => {
                if parse_uint(node).is_none() {
                    self.wrong_type(node, context, "a non-negative whole number");
                }
            }
            Ty::I64 => {
                if parse_int(node).is_none() {
                    self.wrong_type(node, context, "a whole number");
                }
            }
            Ty::F64 => {
                if parse_float(node).is_none() {
                    self.wrong_type(node, context, "a number");
                }
            }
            Ty::Bool => {
                if parse_bool(node).is_none() {
                    self.wrong_type(node, context, "`true` or `false`");
                }
            }
            Ty::Enum(values) => self.check_enum(node, values, context),
            Ty::StrMap => {
                if !matches!(node.value, Value::Map(_)) {
                    self.wrong_type(node, context, "a mapping of names to values");
                    return;
                }
                for (k, v) in entries(node) {
                    if !matches!(v.value, Value::Scalar(..)) {
                        let ctx = child(context, k.as_str().unwrap_or_default());
                        self.wrong_type(v, &ctx, "a string");
                    }
                }
            }
            Ty::StrList | Ty::EnumList(_) => {
                if !matches!(node.value, Value::Seq(_)) {
                    self.wrong_type(node, context, "a list");
                    return;
                }
                for (i, item) in items(node).iter().enumerate() {
                    let ctx = format!("{context}[{i}]");
                    match ty {
                        Ty::EnumList(values) => self.check_enum(item, values, &ctx),
                        _ if parse_text(item).is_none() => self.wrong_type(item, &ctx, "a string"),
                        _ => {}
                    }
                }
            }
            Ty::Refs(_) => match &node.value {
                Value::Seq(list) => {
                    for (i, item) in list.iter().enumerate() {
                        if parse_text(item).is_none() {
                            self.wrong_type(item, &format!("{context}[{i}]"), "a reference");
                        }
                    }
                }
                _ if parse_text(node).is_some() => {}
                _ => self.wrong_type(node, context, "a reference or a list of references"),
            },
            Ty::Obj(shape) => self.check_obj(node, shape, context),
            Ty::List(shape) => {
                if !matches!(node.value, Value::Seq(_)) {
                    self.wrong_type(node, context, &format!("a list of {}", shape.name));
                    return;
                }
                for (i, item) in items(node).iter().enumerate() {
                    self.check_obj(item, shape, &format!("{context}[{i}]"));
                }
            }
            Ty::Constructs => {
                if !matches!(node.value, Value::Seq(_)) {
                    self.wrong_type(node, context, "a list of constructs");
                    return;
                }
                for (i, item) in items(node).iter().enumerate() {
                    let id = construct_shape(item)
                        .and_then(|s| item.get(s.name))
                        .and_then(parse_text);
                    let ctx = match id {
                        Some(id) => format!("{context}[{i}] ({id})"),
                        None => format!("{context}[{i}]"),
                    };
                    if !matches!(item.value, Value::Map(_)) {
                        self.wrong_type(item, &ctx, "a construct (a mapping)");
                        continue;
                    }
                    match construct_shape(item) {
                        Some(shape) => self.check_obj(item, shape, &ctx),
                        None => {
                            let kinds: Vec<&str> =
                                schema::CONSTRUCTS.iter().map(|s| s.name).collect();
                            let first = entries(item).first().and_then(|(k, _)| k.as_str());
                            let help = match first.and_then(|f| suggest(f, kinds.iter().copied())) {
                                Some(s) => format!("did you mean `{s}`?"),
                                None => {
                                    format!("start the construct with one of: {}", joined(&kinds))
                                }
                            };
                            self.report(
                                Code::StackFileMissingField,
                                item.pos,
                                &ctx,
                                "construct does not say its kind (a key such as `network: <id>`)",
                                help,
                            );
                        }
                    }
                }
            }
            Ty::Stages => {
                if !matches!(node.value, Value::Seq(_)) {
                    self.wrong_type(node, context, "a list of stages");
                    return;
                }
                for (i, item) in items(node).iter().enumerate() {
                    let ctx = match item.get("name").and_then(parse_text) {
                        Some(name) => format!("{context}[{i}] ({name})"),
                        None => format!("{context}[{i}]"),
                    };
                    if !matches!(item.value, Value::Map(_)) {
                        self.wrong_type(item, &ctx, "a stage (a mapping)");
                        continue;
                    }
                    let kinds: Vec<&str> = schema::STAGE_KINDS.iter().map(|(k, _)| *k).collect();
                    match item.get("kind") {
                        None => self.report(
                            Code::StackFileMissingField,
                            item.pos,
                            &ctx,
                            "stage is missing required field `kind`",
                            format!("add `kind:` (one of {})", joined(&kinds)),
                        ),
                        Some(k) => match schema::STAGE_KINDS
                            .iter()
                            .find(|(name, _)| Some(*name) == parse_text(k))
                        {
                            Some((_, shape)) => self.check_obj(item, shape, &ctx),
                            None => self.check_enum(k, &kinds, &child(&ctx, "kind")),
                        },
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Building the app.

#[derive(Clone)]
enum Handle {
    Network(NetworkHandle),
    SecurityGroup(ClusterSecurityGroupHandle),
    Eks(EksClusterHandle),
    Lifecycle(LifecycleScriptsHandle),
    HyperPod(HyperPodHandle),
    Karpenter(KarpenterHandle),
    Other(&'static str),
    /// A construct defined earlier whose own fields had errors (already reported).
    Failed(&'static str),
}

impl Handle {
    fn kind(&self) -> &'static str {
        match self {
            Handle::Network(_) => "network",
            Handle::SecurityGroup(_) => "cluster_security_group",
            Handle::Eks(_) => "eks_cluster",
            Handle::Lifecycle(_) => "lifecycle_scripts",
            Handle::HyperPod(_) => "hyperpod_cluster",
            Handle::Karpenter(_) => "karpenter",
            Handle::Other(kind) | Handle::Failed(kind) => kind,
        }
    }
}

/// A value under a construct: its dotted key (`hyperpod_subnet.az_id`), its text (empty for
/// collections) and where it starts.
type Placed = (String, String, Pos);

/// Where each construct (and each value under it) was written, to map builder diagnostics back.
#[derive(Default)]
struct Index {
    stack: String,
    stack_pos: Pos,
    /// Display path (`stack/Id`, `stack/stage`, `stack/HyperPod/group`) -> position and the
    /// scalar values below it (dotted key, text, position).
    places: Vec<(String, Pos, Vec<Placed>)>,
}

/// Fields a diagnostic code is about, for the diagnostics that do not name their field
/// (rules whose field depends on which value is at fault: the network's CIDR blocks and zones,
/// stack-level names and tags), tried before the value match.
fn fields_for(code: Code) -> &'static [&'static str] {
    match code {
        Code::InvalidCidr | Code::CidrOutOfRange | Code::CidrOverlap => {
            &["cidr", "hyperpod_subnet.cidr", "gpu_subnet.cidr"]
        }
        Code::InvalidRegion => &["region"],
        Code::InvalidStackName => &["stack", "name"],
        Code::InvalidTag => &["tags", "app_tags"],
        Code::InvalidAvailabilityZoneId | Code::AvailabilityZoneIdWrongRegion => {
            &["hyperpod_subnet.az_id", "gpu_subnet.az_id"]
        }
        Code::InvalidReservedInstanceCount => &[
            "training_plan.reserved_instances",
            "capacity_block.instances",
        ],
        Code::InvalidKubernetesName => &["name", "namespace"],
        Code::InvalidFsxStorageCapacity => &["storage_gib"],
        Code::InvalidFsxThroughput => &["throughput_per_tib"],
        Code::InvalidFsxFileSystemPath => &["data_repository.file_system_path"],
        Code::InvalidFsxS3Prefix => &["data_repository.prefix"],
        _ => &[],
    }
}

impl Index {
    fn place(&mut self, path: String, pos: Pos, node: Option<&Node>) {
        let mut values = Vec::new();
        let mut todo: Vec<(String, &Node)> = node.map(|n| (String::new(), n)).into_iter().collect();
        while let Some((prefix, n)) = todo.pop() {
            match &n.value {
                Value::Scalar(s, _) => values.push((prefix, s.clone(), n.pos)),
                Value::Map(e) => {
                    for (k, v) in e.iter().rev() {
                        let key = k.as_str().unwrap_or_default();
                        values.push((child(&prefix, key), String::new(), v.pos));
                        todo.push((child(&prefix, key), v));
                    }
                }
                Value::Seq(list) => {
                    for v in list.iter().rev() {
                        todo.push((prefix.clone(), v));
                    }
                }
            }
        }
        self.places.push((path, pos, values));
    }

    fn locate(&self, d: &Diagnostic) -> Pos {
        let best = self
            .places
            .iter()
            .filter(|(p, _, _)| d.path == *p || d.path.starts_with(&format!("{p}/")))
            .max_by_key(|(p, _, _)| p.len());
        let Some((_, pos, values)) = best else {
            return self.stack_pos;
        };
        // The field the builder names, below the construct (or the nested object the path
        // reaches, e.g. `HyperPod/gpu` for an instance group): `server.max_model_len` is
        // `max_model_len` of the server object.
        if let Some(field) = &d.field {
            let dotted = format!(".{field}");
            let found = values
                .iter()
                .find(|(k, _, _)| k == field)
                .or_else(|| values.iter().find(|(k, _, _)| k.ends_with(&dotted)));
            if let Some((_, _, p)) = found {
                return *p;
            }
        }
        // A value quoted in the message, under one of the code's fields.
        let quoted = |text: &str| !text.is_empty() && d.message.contains(&format!("`{text}`"));
        for field in fields_for(d.code) {
            if let Some((_, _, p)) = values.iter().find(|(k, t, _)| k == field && quoted(t)) {
                return *p;
            }
        }
        // Any value quoted in the message (longest first).
        if let Some((_, _, p)) = values
            .iter()
            .filter(|(_, t, _)| t.len() > 1 && quoted(t))
            .max_by_key(|(_, t, _)| t.len())
        {
            return *p;
        }
        for field in fields_for(d.code) {
            if let Some((_, _, p)) = values.iter().find(|(k, _, _)| k == field) {
                return *p;
            }
        }
        *pos
    }

    fn map(&self, found: Diagnostics, origin: &str) -> Diagnostics {
        let mut out = Diagnostics::new();
        for mut d in found {
            let pos = self.locate(&d);
            d.message = format!("[{}] {}", d.path, d.message);
            d.path = format!("{origin}:{}:{}", pos.line, pos.col);
            out.push(d);
        }
        out
    }
}

struct Builder {
    cx: Cx,
    index: Index,
    stack_name: String,
    region: String,
    handles: BTreeMap<String, Handle>,
    /// Every construct id in the file, with where it is defined and its kind.
    all_ids: BTreeMap<String, (Pos, &'static str)>,
}

fn text(node: &Node, key: &str) -> Option<String> {
    node.get(key).and_then(parse_text).map(str::to_owned)
}

fn uint(node: &Node, key: &str) -> Option<u64> {
    node.get(key).and_then(parse_uint)
}

fn u32_of(node: &Node, key: &str) -> Option<u32> {
    uint(node, key).and_then(|v| u32::try_from(v).ok())
}

fn int(node: &Node, key: &str) -> Option<i64> {
    node.get(key).and_then(parse_int)
}

fn float(node: &Node, key: &str) -> Option<f64> {
    node.get(key).and_then(parse_float)
}

fn boolean(node: &Node, key: &str) -> Option<bool> {
    node.get(key).and_then(parse_bool)
}

fn str_map(node: &Node, key: &str) -> Vec<(String, String)> {
    node.get(key)
        .map(entries)
        .unwrap_or_default()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.as_str()?.to_owned())))
        .collect()
}

fn str_list(node: &Node, key: &str) -> Vec<String> {
    node.get(key)
        .map(items)
        .unwrap_or_default()
        .iter()
        .filter_map(|v| parse_text(v).map(str::to_owned))
        .collect()
}

impl Builder {
    fn new(cx: Cx, root: &Node) -> Builder {
        let mut all_ids = BTreeMap::new();
        for stage in root.get("stages").map(items).unwrap_or_default() {
            for c in stage.get("constructs").map(items).unwrap_or_default() {
                if let Some(shape) = construct_shape(c) {
                    if let Some(id) = c.get(shape.name) {
                        if let Some(s) = parse_text(id) {
                            all_ids.entry(s.to_owned()).or_insert((id.pos, shape.name));
                        }
                    }
                }
            }
        }
        Builder {
            cx,
            index: Index::default(),
            stack_name: String::new(),
            region: String::new(),
            handles: BTreeMap::new(),
            all_ids,
        }
    }

    fn build(&mut self, root: &Node) -> Option<App> {
        let name = text(root, "stack")?;
        let region = text(root, "region")?;
        self.stack_name = name.clone();
        self.region = region.clone();
        self.index.stack = name.clone();
        self.index.stack_pos = root.get("stack").map_or(root.pos, |n| n.pos);
        // The stack's own values (name, region, tags), without its stages.
        let own = Node {
            pos: root.pos,
            value: Value::Map(
                entries(root)
                    .iter()
                    .filter(|(k, _)| k.as_str() != Some("stages"))
                    .cloned()
                    .collect(),
            ),
        };
        self.index
            .place(name.clone(), self.index.stack_pos, Some(&own));
        let mut stack = Stack::new(name, region);
        if let Some(d) = text(root, "description") {
            stack = stack.description(d);
        }
        for (k, v) in str_map(root, "tags") {
            stack = stack.tag(k, v);
        }
        let mut app = App::new();
        for (k, v) in str_map(root, "app_tags") {
            app = app.tag(k, v);
        }
        for (i, stage) in root
            .get("stages")
            .map(items)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            self.stage(&mut stack, stage, &format!("stages[{i}]"));
        }
        Some(app.stack(stack))
    }

    fn stage(&mut self, stack: &mut Stack, node: &Node, context: &str) {
        let (Some(name), Some(kind)) = (text(node, "name"), text(node, "kind")) else {
            return;
        };
        let name_pos = node.get("name").map_or(node.pos, |n| n.pos);
        self.index.place(
            format!("{}/{}", self.stack_name, name),
            name_pos,
            Some(node).filter(|_| !matches!(kind.as_str(), "cloudformation" | "kubernetes")),
        );
        let context = format!("{context} ({name})");
        match kind.as_str() {
            "cloudformation" | "kubernetes" => {
                let id = if kind == "cloudformation" {
                    stack.cloudformation_stage(name)
                } else {
                    stack.kubernetes_stage(name)
                };
                for (i, c) in node
                    .get("constructs")
                    .map(items)
                    .unwrap_or_default()
                    .iter()
                    .enumerate()
                {
                    self.construct(stack, id, c, &format!("{context}.constructs[{i}]"));
                }
            }
            "helm" => {
                if let Some(release) = self.helm(node, &context) {
                    stack.helm_stage(name, release);
                }
            }
            "upload" => {
                if let Some(source) = node.get("source") {
                    let ctx = child(&context, "source");
                    if let Some(h) = self.lifecycle(source, &ctx) {
                        stack.upload_stage(name, h.upload());
                    }
                }
            }
            _ => {}
        }
    }

    fn helm(&mut self, node: &Node, context: &str) -> Option<HelmRelease> {
        let preset = text(node, "preset")?;
        let needs = |key: &str| -> Option<&Node> { node.get(key) };
        let missing = |cx: &mut Cx, key: &str, what: &str| {
            cx.report(
                Code::StackFileMissingField,
                node.pos,
                context,
                format!("the `{preset}` preset needs `{key}:` ({what})"),
                format!("add `{key}: <id>`"),
            );
        };
        match preset.as_str() {
            "hyperpod-dependencies" => Some(HelmRelease::hyperpod_dependencies()),
            "nvidia-device-plugin" => Some(HelmRelease::nvidia_device_plugin()),
            "efa-device-plugin" => Some(HelmRelease::efa_device_plugin()),
            "aws-load-balancer-controller" => {
                let cluster = match needs("cluster") {
                    Some(n) => self.eks(n, &child(context, "cluster")),
                    None => {
                        missing(&mut self.cx, "cluster", "the EKS cluster");
                        None
                    }
                };
                let vpc = match needs("vpc") {
                    Some(n) => self.vpc(n, &child(context, "vpc")),
                    None => {
                        missing(&mut self.cx, "vpc", "the VPC");
                        None
                    }
                };
                let region = self.region.clone();
                Some(HelmRelease::aws_load_balancer_controller(
                    &cluster?.name,
                    &region,
                    &vpc?,
                ))
            }
            "karpenter" => {
                let cluster = match needs("cluster") {
                    Some(n) => self.eks(n, &child(context, "cluster")),
                    None => {
                        missing(&mut self.cx, "cluster", "the EKS cluster");
                        None
                    }
                };
                Some(HelmRelease::karpenter(&cluster?.name))
            }
            _ => None,
        }
    }

    // --- references -----------------------------------------------------------------------

    /// Looks up `Id` or `Id.attr`; reports unknown ids.
    fn lookup(&mut self, node: &Node, context: &str) -> Option<(Handle, Option<String>)> {
        let text = parse_text(node)?;
        let (id, attr) = match text.split_once('.') {
            Some((id, attr)) => (id, Some(attr.to_owned())),
            None => (text, None),
        };
        if let Some(h) = self.handles.get(id) {
            return Some((h.clone(), attr));
        }
        let (message, help) = match self.all_ids.get(id) {
            Some((pos, kind)) if *pos < node.pos => return Some((Handle::Failed(kind), attr)),
            Some((pos, _)) => (
                format!("`{id}` is used before it is defined (line {})", pos.line),
                "define a construct before the constructs and stages that refer to it".to_owned(),
            ),
            None => {
                let known: Vec<&str> = self.handles.keys().map(String::as_str).collect();
                (
                    format!("no construct has id `{id}`"),
                    match suggest(id, known.iter().copied()) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None if known.is_empty() => "define the construct first".to_owned(),
                        None => format!("defined so far: {}", joined(&known)),
                    },
                )
            }
        };
        self.cx.report(
            Code::StackFileUnknownReference,
            node.pos,
            context,
            message,
            help,
        );
        None
    }

    fn wrong_kind(&mut self, node: &Node, context: &str, found: &str, want: Want) {
        let text = parse_text(node).unwrap_or_default().to_owned();
        self.cx.report(
            Code::StackFileWrongReferenceKind,
            node.pos,
            context,
            format!(
                "`{text}` is {found}, but this field wants {}",
                want.describe()
            ),
            "refer to a construct of the kind the field takes",
        );
    }

    fn vpc(&mut self, node: &Node, context: &str) -> Option<Ref<kind::Vpc>> {
        match self.lookup(node, context)? {
            (Handle::Network(n), None) => Some(n.vpc),
            (Handle::Network(n), Some(a)) if a == "vpc" => Some(n.vpc),
            (Handle::Failed("network"), _) => None,
            (h, attr) => {
                let found = describe(&h, attr.as_deref());
                self.wrong_kind(node, context, &found, Want::Vpc);
                None
            }
        }
    }

    fn subnets_one(&mut self, node: &Node, context: &str) -> Option<Vec<Ref<kind::Subnet>>> {
        let (h, attr) = self.lookup(node, context)?;
        if matches!(h, Handle::Failed("network")) {
            return None;
        }
        let Handle::Network(n) = &h else {
            let found = describe(&h, attr.as_deref());
            self.wrong_kind(node, context, &found, Want::Subnets);
            return None;
        };
        let zonal = |s: &Option<Ref<kind::Subnet>>, key: &str| s.clone().ok_or(key.to_owned());
        let result = match attr.as_deref() {
            Some("private_subnets") => Ok(n.private_subnets.clone()),
            Some("public_subnets") => Ok(n.public_subnets.clone()),
            Some("hyperpod_subnet") => {
                zonal(&n.hyperpod_subnet, "hyperpod_subnet").map(|s| vec![s])
            }
            Some("gpu_subnet") => zonal(&n.gpu_subnet, "gpu_subnet").map(|s| vec![s]),
            _ => {
                let found = describe(&h, attr.as_deref());
                self.wrong_kind(node, context, &found, Want::Subnets);
                return None;
            }
        };
        match result {
            Ok(v) => Some(v),
            Err(key) => {
                let text = parse_text(node).unwrap_or_default().to_owned();
                self.cx.report(
                    Code::StackFileWrongReferenceKind,
                    node.pos,
                    context,
                    format!("`{text}`: the network has no `{key}`"),
                    format!("add `{key}: {{az_id: <zone id>}}` to the network"),
                );
                None
            }
        }
    }

    fn subnets(&mut self, node: &Node, context: &str) -> Option<Vec<Ref<kind::Subnet>>> {
        match &node.value {
            Value::Seq(list) => {
                let mut out = Some(Vec::new());
                for (i, item) in list.iter().enumerate() {
                    let got = self.subnets_one(item, &format!("{context}[{i}]"));
                    out = match (out, got) {
                        (Some(mut acc), Some(v)) => {
                            acc.extend(v);
                            Some(acc)
                        }
                        _ => None,
                    };
                }
                out
            }
            _ => self.subnets_one(node, context),
        }
    }

    fn security_groups(
        &mut self,
        node: &Node,
        context: &str,
    ) -> Option<Vec<Ref<kind::SecurityGroup>>> {
        let list: Vec<&Node> = match &node.value {
            Value::Seq(list) => list.iter().collect(),
            _ => vec![node],
        };
        let mut out = Some(Vec::new());
        for (i, item) in list.into_iter().enumerate() {
            let ctx = if matches!(node.value, Value::Seq(_)) {
                format!("{context}[{i}]")
            } else {
                context.to_owned()
            };
            let got = match self.lookup(item, &ctx) {
                Some((Handle::SecurityGroup(g), None)) => Some(g.group),
                Some((Handle::SecurityGroup(g), Some(a))) if a == "group" => Some(g.group),
                Some((Handle::Failed("cluster_security_group"), _)) => None,
                Some((h, attr)) => {
                    let found = describe(&h, attr.as_deref());
                    self.wrong_kind(item, &ctx, &found, Want::SecurityGroup);
                    None
                }
                None => None,
            };
            out = match (out, got) {
                (Some(mut acc), Some(g)) => {
                    acc.push(g);
                    Some(acc)
                }
                _ => None,
            };
        }
        out
    }

    fn eks(&mut self, node: &Node, context: &str) -> Option<EksClusterHandle> {
        match self.lookup(node, context)? {
            (Handle::Eks(h), None) => Some(h),
            (Handle::Eks(h), Some(a)) if a == "cluster" => Some(h),
            (Handle::Failed("eks_cluster"), _) => None,
            (h, attr) => {
                let found = describe(&h, attr.as_deref());
                self.wrong_kind(node, context, &found, Want::Eks);
                None
            }
        }
    }

    fn lifecycle(&mut self, node: &Node, context: &str) -> Option<LifecycleScriptsHandle> {
        match self.lookup(node, context)? {
            (Handle::Lifecycle(h), None) => Some(h),
            (Handle::Failed("lifecycle_scripts"), _) => None,
            (h, attr) => {
                let found = describe(&h, attr.as_deref());
                self.wrong_kind(node, context, &found, Want::Lifecycle);
                None
            }
        }
    }

    fn hyperpod(&mut self, node: &Node, context: &str) -> Option<HyperPodHandle> {
        match self.lookup(node, context)? {
            (Handle::HyperPod(h), None) => Some(h),
            (Handle::Failed("hyperpod_cluster"), _) => None,
            (h, attr) => {
                let found = describe(&h, attr.as_deref());
                self.wrong_kind(node, context, &found, Want::HyperPod);
                None
            }
        }
    }

    fn karpenter(&mut self, node: &Node, context: &str) -> Option<KarpenterHandle> {
        match self.lookup(node, context)? {
            (Handle::Karpenter(h), None) => Some(h),
            (Handle::Failed("karpenter"), _) => None,
            (h, attr) => {
                let found = describe(&h, attr.as_deref());
                self.wrong_kind(node, context, &found, Want::Karpenter);
                None
            }
        }
    }

    /// One subnet: a reference naming exactly one.
    fn subnet(&mut self, node: &Node, context: &str) -> Option<Ref<kind::Subnet>> {
        let mut subnets = self.subnets_one(node, context)?;
        if subnets.len() == 1 {
            return subnets.pop();
        }
        let text = parse_text(node).unwrap_or_default().to_owned();
        self.cx.report(
            Code::StackFileWrongReferenceKind,
            node.pos,
            context,
            format!(
                "`{text}` names {} subnets, but this field wants {}",
                subnets.len(),
                Want::Subnet.describe()
            ),
            "refer to a zonal subnet of the network, such as `<network>.gpu_subnet`",
        );
        None
    }

    fn bucket(&mut self, node: &Node, context: &str) -> Option<Ref<kind::Bucket>> {
        match self.lookup(node, context)? {
            (Handle::Lifecycle(h), None) => Some(h.bucket),
            (Handle::Lifecycle(h), Some(a)) if a == "bucket" => Some(h.bucket),
            (Handle::Failed("lifecycle_scripts"), _) => None,
            (h, attr) => {
                let found = describe(&h, attr.as_deref());
                self.wrong_kind(node, context, &found, Want::Bucket);
                None
            }
        }
    }

    /// Resolves the optional reference field `key` with `f`; `Err` when present but invalid.
    fn opt_ref<T>(
        &mut self,
        node: &Node,
        key: &str,
        context: &str,
        f: fn(&mut Self, &Node, &str) -> Option<T>,
    ) -> Result<Option<T>, ()> {
        match node.get(key) {
            None => Ok(None),
            Some(n) => f(self, n, &child(context, key)).map(Some).ok_or(()),
        }
    }

    // --- constructs -------------------------------------------------------------------------

    fn construct(
        &mut self,
        stack: &mut Stack,
        stage: crate::app::StageId,
        node: &Node,
        context: &str,
    ) {
        let Some(shape) = construct_shape(node) else {
            return;
        };
        let Some(id_node) = node.get(shape.name) else {
            return;
        };
        let Some(id) = parse_text(id_node).map(str::to_owned) else {
            return;
        };
        let context = format!("{context} ({id})");
        let path = format!("{}/{}", self.stack_name, id);
        self.index.place(path.clone(), id_node.pos, Some(node));
        let handle = match shape.name {
            "network" => self
                .network(node, &id)
                .map(|c| Handle::Network(stack.add(stage, c))),
            "cluster_security_group" => self
                .security_group(node, &id, &context)
                .map(|c| Handle::SecurityGroup(stack.add(stage, c))),
            "eks_cluster" => self
                .eks_cluster(node, &id, &context)
                .map(|c| Handle::Eks(stack.add(stage, c))),
            "lifecycle_scripts" => Some(Handle::Lifecycle(
                stack.add(stage, self.lifecycle_scripts(node, &id)),
            )),
            "hyperpod_cluster" => self
                .hyperpod_cluster(node, &id, &context, &path)
                .map(|c| Handle::HyperPod(stack.add(stage, c))),
            "inference_operator" => self.inference_operator(node, &id, &context).map(|c| {
                stack.add(stage, c);
                Handle::Other("inference_operator")
            }),
            "inference_endpoint" => node.get("server").and_then(|s| {
                let server = self.server(s)?;
                let mut c =
                    InferenceEndpoint::new(id.clone(), server, text(node, "instance_type")?);
                if let Some(v) = text(node, "name") {
                    c = c.name(v);
                }
                if let Some(v) = text(node, "namespace") {
                    c = c.namespace(v);
                }
                if let Some(v) = int(node, "replicas") {
                    c = c.replicas(clamp_i32(v));
                }
                stack.add(stage, c);
                Some(Handle::Other("inference_endpoint"))
            }),
            "vllm_deployment" => self.vllm_deployment(node, &id).map(|c| {
                stack.add(stage, c);
                Handle::Other("vllm_deployment")
            }),
            "managed_node_group" => self.node_group(node, &id, &context).map(|c| {
                stack.add(stage, c);
                Handle::Other("managed_node_group")
            }),
            "load_balancer_controller" => node
                .get("cluster")
                .and_then(|n| self.eks(n, &child(&context, "cluster")))
                .map(|eks| {
                    stack.add(stage, LoadBalancerController::new(id.clone(), &eks.cluster));
                    Handle::Other("load_balancer_controller")
                }),
            "karpenter" => node
                .get("cluster")
                .and_then(|n| self.eks(n, &child(&context, "cluster")))
                .map(|eks| Handle::Karpenter(stack.add(stage, Karpenter::new(id.clone(), &eks)))),
            "karpenter_node_pool" => self.node_pool(node, &id, &context).map(|c| {
                stack.add(stage, c);
                Handle::Other("karpenter_node_pool")
            }),
            "fsx_lustre" => self.fsx_lustre(node, &id, &context).map(|c| {
                stack.add(stage, c);
                Handle::Other("fsx_lustre")
            }),
            _ => None,
        };
        if let Some(h) = handle {
            self.handles.entry(id).or_insert(h);
        }
    }

    fn network(&mut self, node: &Node, id: &str) -> Option<Network> {
        let mut c = Network::new(id);
        if let Some(v) = text(node, "cidr") {
            c = c.cidr(v);
        }
        if let Some(v) = u32_of(node, "availability_zones") {
            c = c.availability_zones(v);
        }
        if let Some(v) = text(node, "nat_gateways").and_then(|n| NatGateways::from_name(&n)) {
            c = c.nat_gateways(v);
        }
        if let Some(z) = node.get("hyperpod_subnet") {
            if let Some(az) = text(z, "az_id") {
                c = match text(z, "cidr") {
                    Some(cidr) => c.hyperpod_subnet_with_cidr(az, cidr),
                    None => c.hyperpod_subnet(az),
                };
            }
        }
        if let Some(z) = node.get("gpu_subnet") {
            if let Some(az) = text(z, "az_id") {
                c = match text(z, "cidr") {
                    Some(cidr) => c.gpu_subnet_with_cidr(az, cidr),
                    None => c.gpu_subnet(az),
                };
            }
        }
        if let Some(v) = u32_of(node, "flow_log_retention_days") {
            c = c.flow_log_retention_days(v);
        }
        Some(c)
    }

    fn security_group(
        &mut self,
        node: &Node,
        id: &str,
        context: &str,
    ) -> Option<ClusterSecurityGroup> {
        let vpc = self.vpc(node.get("vpc")?, &child(context, "vpc"))?;
        let mut c = ClusterSecurityGroup::new(id, &vpc);
        if boolean(node, "fsx_lustre_ports") == Some(false) {
            c = c.without_fsx_lustre_ports();
        }
        Some(c)
    }

    fn eks_cluster(&mut self, node: &Node, id: &str, context: &str) -> Option<EksCluster> {
        let subnets = self.opt_ref(node, "subnets", context, Self::subnets);
        let sgs = self.opt_ref(node, "security_groups", context, Self::security_groups);
        let mut c = EksCluster::new(id, text(node, "name")?);
        if let Some(v) = text(node, "version") {
            c = c.version(v);
        }
        if let Some(s) = subnets.ok()? {
            c = c.subnets(&s);
        }
        for g in sgs.ok()?.unwrap_or_default() {
            c = c.security_group(&g);
        }
        if node.get("public_access_cidrs").is_some() {
            c = c.endpoint_access(EndpointAccess::public_and_private(str_list(
                node,
                "public_access_cidrs",
            )));
        }
        for e in node.get("access_entries").map(items).unwrap_or_default() {
            let Some(policy) = text(e, "policy").and_then(|n| AccessPolicy::from_name(&n)) else {
                continue;
            };
            if let Some(arn) = text(e, "principal_arn") {
                c = c.access_entry(arn, policy);
            }
        }
        for a in node.get("addons").map(items).unwrap_or_default() {
            if let Some(name) = text(a, "name") {
                c = c.addon(name, text(a, "version"));
            }
        }
        Some(c)
    }

    fn lifecycle_scripts(&mut self, node: &Node, id: &str) -> LifecycleScripts {
        let mut c = LifecycleScripts::new(id);
        if let Some(v) = text(node, "on_create_script") {
            c = c.on_create_script(v);
        }
        for f in node.get("files").map(items).unwrap_or_default() {
            if let (Some(name), Some(content)) = (text(f, "name"), text(f, "content")) {
                c = c.file(name, content);
            }
        }
        c
    }

    fn hyperpod_cluster(
        &mut self,
        node: &Node,
        id: &str,
        context: &str,
        path: &str,
    ) -> Option<HyperPodCluster> {
        let eks = node
            .get("eks")
            .and_then(|n| self.eks(n, &child(context, "eks")));
        let lifecycle = node
            .get("lifecycle")
            .and_then(|n| self.lifecycle(n, &child(context, "lifecycle")));
        let subnets = self.opt_ref(node, "subnets", context, Self::subnets);
        let sgs = self.opt_ref(node, "security_groups", context, Self::security_groups);
        let mut c = HyperPodCluster::new(id, text(node, "name")?, &eks?.cluster, &lifecycle?);
        for s in subnets.ok()?.unwrap_or_default() {
            c = c.subnet(&s);
        }
        for g in sgs.ok()?.unwrap_or_default() {
            c = c.security_group(&g);
        }
        if let Some(v) = text(node, "node_recovery").and_then(|n| NodeRecovery::from_name(&n)) {
            c = c.node_recovery(v);
        }
        for g in node.get("instance_groups").map(items).unwrap_or_default() {
            let (Some(name), Some(instance_type)) = (text(g, "name"), text(g, "instance_type"))
            else {
                continue;
            };
            let pos = g.get("name").map_or(g.pos, |n| n.pos);
            self.index.place(format!("{path}/{name}"), pos, Some(g));
            let mut group = InstanceGroup::new(name, instance_type);
            if let Some(v) = int(g, "count") {
                group = group.count(v);
            }
            if let Some(v) = int(g, "threads_per_core") {
                group = group.threads_per_core(v);
            }
            if let Some(v) = int(g, "ebs_volume_gb") {
                group = group.ebs_volume_gb(v);
            }
            if g.get("deep_health_checks").is_some() {
                let checks = str_list(g, "deep_health_checks")
                    .iter()
                    .filter_map(|c| DeepHealthCheck::from_name(c))
                    .collect::<Vec<_>>();
                group = group.deep_health_checks(checks);
            }
            if let Some(plan) = g.get("training_plan") {
                if let Some(arn) = text(plan, "arn") {
                    let mut cap = match text(plan, "az_id") {
                        Some(az) => Capacity::training_plan(arn, az),
                        None => Capacity::training_plan_without_zone(arn),
                    };
                    if let Some(n) = int(plan, "reserved_instances") {
                        cap = cap.reserved_instances(n);
                    }
                    group = group.capacity(cap);
                }
            }
            for (k, v) in str_map(g, "labels") {
                group = group.label(k, v);
            }
            for t in g.get("taints").map(items).unwrap_or_default() {
                let Some(effect) = text(t, "effect").and_then(|n| TaintEffect::from_name(&n))
                else {
                    continue;
                };
                if let (Some(k), Some(v)) = (text(t, "key"), text(t, "value")) {
                    group = group.taint(k, v, effect);
                }
            }
            c = c.instance_group(group);
        }
        Some(c)
    }

    fn inference_operator(
        &mut self,
        node: &Node,
        id: &str,
        context: &str,
    ) -> Option<InferenceOperator> {
        let eks = node
            .get("eks")
            .and_then(|n| self.eks(n, &child(context, "eks")));
        let hyperpod = node
            .get("hyperpod")
            .and_then(|n| self.hyperpod(n, &child(context, "hyperpod")));
        let vpc = node
            .get("vpc")
            .and_then(|n| self.vpc(n, &child(context, "vpc")));
        let mut c = InferenceOperator::new(id, &eks?, &hyperpod?, &vpc?);
        for b in str_list(node, "model_buckets") {
            c = c.model_bucket(b);
        }
        Some(c)
    }

    fn server(&mut self, node: &Node) -> Option<VllmServer> {
        let mut s = VllmServer::new(text(node, "model")?, text(node, "image")?);
        if let Some(v) = text(node, "served_model_name") {
            s = s.served_model_name(v);
        }
        if let Some(v) = u32_of(node, "tensor_parallel_size") {
            s = s.tensor_parallel_size(v);
        }
        if let Some(v) = u32_of(node, "decode_context_parallel_size") {
            s = s.decode_context_parallel_size(v);
        }
        if let Some(v) = float(node, "gpu_memory_utilization") {
            s = s.gpu_memory_utilization(v);
        }
        if let Some(v) = uint(node, "max_model_len") {
            s = s.max_model_len(v);
        }
        if let Some(v) = boolean(node, "trust_remote_code") {
            s = s.trust_remote_code(v);
        }
        if let Some(v) = text(node, "load_format") {
            s = s.load_format(v);
        }
        if let Some(v) = boolean(node, "prefix_caching") {
            s = s.prefix_caching(v);
        }
        if let Some(v) = text(node, "tool_call_parser") {
            s = s.tool_call_parser(v);
        }
        if let Some(v) = text(node, "reasoning_parser") {
            s = s.reasoning_parser(v);
        }
        if let Some(v) = text(node, "moe_backend") {
            s = s.moe_backend(v);
        }
        for (k, v) in str_map(node, "env") {
            s = s.env(k, v);
        }
        for a in str_list(node, "extra_args") {
            s = s.extra_arg(a);
        }
        if let Some(h) = node.get("hf_token_secret") {
            if let (Some(n), Some(k)) = (text(h, "name"), text(h, "key")) {
                s = s.hf_token_secret(n, k);
            }
        }
        if let Some(v) = uint(node, "weight_bytes") {
            s = s.weight_bytes(v);
        }
        if let Some(t) = node.get("storage_throughput") {
            if let (Some(d), Some(l), Some(w)) = (
                float(t, "download_bytes_per_sec"),
                float(t, "load_bytes_per_sec"),
                float(t, "warmup_secs"),
            ) {
                s = s.storage_throughput(StorageThroughput {
                    download_bytes_per_sec: d,
                    load_bytes_per_sec: l,
                    warmup_secs: w,
                });
            }
        }
        Some(s)
    }

    fn vllm_deployment(&mut self, node: &Node, id: &str) -> Option<VllmDeployment> {
        let server = self.server(node.get("server")?)?;
        let mut c = VllmDeployment::new(id, server, text(node, "instance_type")?);
        if let Some(v) = text(node, "name") {
            c = c.name(v);
        }
        if let Some(v) = text(node, "namespace") {
            c = c.namespace(v);
        }
        if let Some(v) = int(node, "replicas") {
            c = c.replicas(clamp_i32(v));
        }
        if let Some(v) = u32_of(node, "gpus") {
            c = c.gpus(v);
        }
        match text(node, "exposure").and_then(|n| Exposure::from_name(&n)) {
            Some(Exposure::ClusterIp) => c = c.cluster_ip_service(),
            Some(Exposure::InternetFacingLoadBalancer) => c = c.internet_facing_load_balancer(),
            Some(Exposure::InternalLoadBalancer) | None => {}
        }
        for (k, v) in str_map(node, "service_annotations") {
            c = c.service_annotation(k, v);
        }
        if let Some(v) = boolean(node, "efa") {
            c = c.efa(v);
        }
        Some(c)
    }

    fn node_group(&mut self, node: &Node, id: &str, context: &str) -> Option<ManagedNodeGroup> {
        let eks = node
            .get("cluster")
            .and_then(|n| self.eks(n, &child(context, "cluster")));
        let subnets = node
            .get("subnets")
            .and_then(|n| self.subnets(n, &child(context, "subnets")));
        let sgs = self.opt_ref(node, "security_groups", context, Self::security_groups);
        let preset = text(node, "preset")?;
        let instance_type = text(node, "instance_type");
        let (eks, subnets) = (eks?, subnets?);
        let mut c = match (preset.as_str(), instance_type) {
            ("system", None) => ManagedNodeGroup::system(id, &eks.cluster, &subnets),
            ("gpu", Some(t)) => ManagedNodeGroup::gpu(id, &eks.cluster, t, &subnets),
            ("system", Some(_)) => {
                let pos = node.get("instance_type").map_or(node.pos, |n| n.pos);
                self.cx.report(
                    Code::StackFileInvalidValue,
                    pos,
                    context,
                    "the `system` preset fixes its instance type (m7i.xlarge)",
                    "remove `instance_type`, or use `preset: gpu`",
                );
                return None;
            }
            ("gpu", None) => {
                self.cx.report(
                    Code::StackFileMissingField,
                    node.pos,
                    context,
                    "a `gpu` node group is missing required field `instance_type`",
                    "add `instance_type: <EC2 type>` (e.g. `p6-b300.48xlarge`)",
                );
                return None;
            }
            _ => return None,
        };
        if let Some(b) = node.get("capacity_block") {
            let purchase = b.get("purchase").and_then(|p| {
                let offering = text(p, "offering_id")?;
                let purchase = crate::constructs::CapacityBlockPurchase::new(offering);
                Some(if boolean(p, "acknowledge_non_refundable") == Some(true) {
                    purchase.non_refundable()
                } else {
                    purchase
                })
            });
            match (purchase, text(b, "reservation_id"), text(b, "az_id")) {
                (Some(purchase), _, Some(az)) => {
                    let n = u32_of(b, "instances").unwrap_or(1);
                    c = c.capacity(NodeCapacity::buy_capacity_block(purchase, az, n));
                }
                (None, Some(r), Some(az)) => {
                    c = c.capacity(match u32_of(b, "instances") {
                        Some(n) => NodeCapacity::capacity_block_of(r, az, n),
                        None => NodeCapacity::capacity_block(r, az),
                    });
                }
                (None, None, Some(_)) => {
                    self.cx.report(
                        Code::StackFileMissingField,
                        b.pos,
                        context,
                        "a `capacity_block` needs `reservation_id` (a block bought already) or `purchase`",
                        "add `reservation_id: cr-...`, or `purchase: {offering_id: cb-..., acknowledge_non_refundable: true}`",
                    );
                    return None;
                }
                _ => {}
            }
        }
        if let Some(s) = node.get("scaling") {
            if let (Some(min), Some(desired), Some(max)) =
                (int(s, "min"), int(s, "desired"), int(s, "max"))
            {
                c = c.scaling(min, desired, max);
            }
        }
        for g in sgs.ok()?.unwrap_or_default() {
            c = c.security_group(&g);
        }
        if let Some(v) = int(node, "root_volume_gb") {
            c = c.root_volume_gb(v);
        }
        for (k, v) in str_map(node, "labels") {
            c = c.label(k, v);
        }
        if let Some(v) = boolean(node, "efa") {
            c = c.efa(v);
        }
        Some(c)
    }

    fn node_pool(&mut self, node: &Node, id: &str, context: &str) -> Option<KarpenterNodePool> {
        let karpenter = node
            .get("karpenter")
            .and_then(|n| self.karpenter(n, &child(context, "karpenter")));
        let reservation = match (node.get("reservation_id"), node.get("reservation_tags")) {
            (Some(_), None) => ReservationSelector::Id(text(node, "reservation_id")?),
            (None, Some(_)) => {
                ReservationSelector::Tags(str_map(node, "reservation_tags").into_iter().collect())
            }
            (a, b) => {
                let both = a.is_some() && b.is_some();
                self.cx.report(
                    if both {
                        Code::StackFileInvalidValue
                    } else {
                        Code::StackFileMissingField
                    },
                    a.map_or(node.pos, |n| n.pos),
                    context,
                    if both {
                        "give either `reservation_id` or `reservation_tags`, not both"
                    } else {
                        "karpenter_node_pool needs `reservation_id` or `reservation_tags`"
                    },
                    "select the Capacity Block by its id or by its tags",
                );
                return None;
            }
        };
        let mut c = KarpenterNodePool::capacity_block(
            id,
            text(node, "name")?,
            &karpenter?,
            text(node, "instance_type")?,
            reservation,
        );
        if let Some(v) = u32_of(node, "max_nodes") {
            c = c.max_nodes(v);
        }
        Some(c)
    }
}

impl Builder {
    fn fsx_lustre(&mut self, node: &Node, id: &str, context: &str) -> Option<FsxLustre> {
        let subnet = node
            .get("subnet")
            .and_then(|n| self.subnet(n, &child(context, "subnet")));
        let group = node
            .get("security_group")
            .and_then(|n| self.security_groups(n, &child(context, "security_group")))
            .and_then(|mut g| g.pop());
        let repo = match node.get("data_repository") {
            None => Ok(None),
            Some(r) => {
                let ctx = child(context, "data_repository");
                match r
                    .get("bucket")
                    .and_then(|b| self.bucket(b, &child(&ctx, "bucket")))
                {
                    Some(bucket) => Ok(Some((bucket, r))),
                    None => Err(()),
                }
            }
        };
        let mut c = FsxLustre::new(id, &subnet?, &group?);
        if let Some(v) = u32_of(node, "storage_gib") {
            c = c.storage_gib(v);
        }
        if let Some(v) = u32_of(node, "throughput_per_tib") {
            c = c.throughput_per_tib(v);
        }
        if text(node, "deployment_type").as_deref() == Some("PERSISTENT_2") {
            c = c.deployment(LustreDeployment::Persistent2);
        }
        match text(node, "compression").as_deref() {
            Some("none") => c = c.compression(LustreCompression::None),
            Some("lz4") => c = c.compression(LustreCompression::Lz4),
            _ => {}
        }
        if let Some((bucket, r)) = repo.ok()? {
            c = c.data_repository(&bucket, text(r, "prefix")?, text(r, "file_system_path")?);
        }
        Some(c)
    }
}

fn clamp_i32(v: i64) -> i32 {
    i32::try_from(v).unwrap_or(if v < 0 { i32::MIN } else { i32::MAX })
}

fn describe(h: &Handle, attr: Option<&str>) -> String {
    match attr {
        Some(a) => format!("attribute `{a}` of a `{}`", h.kind()),
        None => format!("a `{}`", h.kind()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_are_close_names() {
        assert_eq!(
            suggest("cdir", ["cidr", "availability_zones"]),
            Some("cidr")
        );
        assert_eq!(
            suggest("availabilty_zones", ["cidr", "availability_zones"]),
            Some("availability_zones")
        );
        assert_eq!(suggest("zzzz", ["cidr", "nat_gateways"]), None);
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}
