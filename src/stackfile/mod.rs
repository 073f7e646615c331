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
//!
//! A fleet file ([`fleet`]) names a stack file whose string values may read a fleet member's
//! values as `${fleet.<name>}`; the stack file is parsed once and each member substitutes its
//! values into the parsed tree before the same checks run, so diagnostics keep its lines.

pub mod fleet;
mod schema;
mod yaml;

use crate::app::App;
use crate::app::{kind, Ref, Stack, StageId};
use crate::constructs::stack_file::Ints;
use crate::constructs::stack_file::{
    FieldReader, Invalid, KindVisitor, Resolved, StackFileConstruct,
};
use crate::constructs::{
    self, AlarmTopic, AlarmTopicHandle, ClusterSecurityGroup, ClusterSecurityGroupHandle,
    Construct, EksCluster, EksClusterHandle, HelmRelease, HyperPodCluster, HyperPodHandle,
    Karpenter, KarpenterHandle, LifecycleScripts, LifecycleScriptsHandle, ManagedNodeGroup,
    ModelStore, ModelStoreHandle, Network, NetworkHandle, NodeGroupHandle,
};
use crate::diagnostics::{suggest, Code, Diagnostic, Diagnostics};
use schema::{Field, Shape, Ty, Want};
use std::any::Any;
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;
use yaml::{Node, Pos, Value};

/// Files larger than this are refused before parsing.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Reads and loads the stack file at `path` (see [`load_str`]).
pub fn load_file(path: &Path) -> Result<App, Diagnostics> {
    let origin = path.display().to_string();
    let text = read_text(path, &origin)?;
    load_str(&origin, &text)
}

/// The text of the file at `path` (`origin` in diagnostics), refused past [`MAX_FILE_BYTES`] or
/// when it is not UTF-8.
fn read_text(path: &Path, origin: &str) -> Result<String, Diagnostics> {
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
        return too_large(origin, size);
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
        return too_large(origin, bytes.len() as u64);
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(e) => {
            let offset = e.utf8_error().valid_up_to();
            let valid = std::str::from_utf8(&e.as_bytes()[..offset]).unwrap_or_default();
            let Pos { line, col } = pos_at(valid, valid.len());
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

/// The line and column (from 1, in characters) of byte `offset` of `text`.
fn pos_at(text: &str, offset: usize) -> Pos {
    let before = &text[..offset];
    Pos {
        line: before.matches('\n').count() + 1,
        col: before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1,
    }
}

fn too_large<T>(origin: &str, size: u64) -> Result<T, Diagnostics> {
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
    let root = parse_root(origin, text, "a stack description")?;
    // Without a fleet, `${fleet.<name>}` has no value.
    let mut cx = Cx::new(origin);
    fleet::refuse_templates(&mut cx, &root);
    if cx.diags.has_errors() {
        return Err(cx.into_diags());
    }
    load_root(origin, &root)
}

/// Parses a stack or fleet file's text (`what` it should hold, for messages) into its tree:
/// the root mapping, or the diagnostics of why it is not one.
fn parse_root(origin: &str, text: &str, what: &str) -> Result<Node, Diagnostics> {
    let mut cx = Cx::new(origin);
    if text.len() as u64 > MAX_FILE_BYTES {
        return too_large(origin, text.len() as u64);
    }
    // A UTF-8 byte-order mark is allowed; a NUL byte is not text (the YAML parser would stop
    // there and silently drop the rest).
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if let Some(at) = text.find('\0') {
        let line = text[..at].matches('\n').count() + 1;
        let col = text[..at]
            .rsplit('\n')
            .next()
            .map_or(0, |l| l.chars().count())
            + 1;
        cx.report(
            Code::StackFileNotYaml,
            Pos { line, col },
            "",
            format!("`{origin}` holds a NUL byte, so it is not a text file"),
            "save the stack file as UTF-8 text",
        );
        return Err(cx.into_diags());
    }
    let root = match yaml::parse(text) {
        Ok(Some(root)) if !root.is_null() => root,
        Ok(_) => {
            cx.report(
                Code::StackFileEmpty,
                Pos { line: 1, col: 1 },
                "",
                format!("`{origin}` holds no {}", what.trim_start_matches("a ")),
                "start with `stack: <name>`, `region: <region>` and `stages:`; see docs/stack-files.md",
            );
            return Err(cx.into_diags());
        }
        Err(e) => {
            cx.report(
                Code::StackFileNotYaml,
                e.pos,
                "",
                format!("`{origin}` is not valid YAML: {}", e.message),
                "fix the syntax at this position; see docs/stack-files.md for the format",
            );
            return Err(cx.into_diags());
        }
    };
    if !matches!(root.value, Value::Map(_)) {
        cx.report(
            Code::StackFileNotYaml,
            root.pos,
            "",
            format!(
                "`{origin}` is {} where {what} (a mapping) was expected",
                root.type_name()
            ),
            "start with `stack: <name>`, `region: <region>` and `stages:` (a fleet file with `fleet: <name>`); see docs/stack-files.md",
        );
        return Err(cx.into_diags());
    }
    Ok(root)
}

/// Checks and builds a parsed stack file: its structure, references, the builders' rules.
fn load_root(origin: &str, root: &Node) -> Result<App, Diagnostics> {
    let mut cx = Cx::new(origin);
    cx.check_obj(root, &schema::FILE, "");
    let mut b = Builder::new(cx, root);
    let app = b.build(root);
    let Builder { cx, index, .. } = b;
    if cx.diags.has_errors() {
        return Err(cx.into_diags());
    }
    let Some(app) = app else {
        return Err(cx.into_diags());
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
    /// Problems found beyond [`MAX_REPORTED`], counted but not described.
    suppressed: usize,
}

/// The most problems one file reports. Past them a file is usually one mistake repeated (a
/// pasted block, a wrong indentation); describing each would let a hostile file make reporting
/// cost far more than parsing (tens of thousands of messages with suggestions). The rest are
/// counted in one last diagnostic (HF0712).
const MAX_REPORTED: usize = 100;

fn joined(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The declared range of a whole-number field.
fn int_range(field: &Field) -> Option<Ints> {
    match field.ty {
        Ty::U32(r) | Ty::U64(r) | Ty::I64(r) => Some(r),
        _ => None,
    }
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

/// A whole number of any size, as written (`+`, `_` allowed): beyond `i128` it saturates, so a
/// huge number is reported as out of range, not as text.
fn parse_whole(node: &Node) -> Option<i128> {
    let Value::Scalar(s, true) = &node.value else {
        return None;
    };
    let s = s.replace('_', "");
    let (negative, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(&s)),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(match digits.parse::<i128>() {
        Ok(v) if negative => -v,
        Ok(v) => v,
        Err(_) if negative => i128::MIN,
        Err(_) => i128::MAX,
    })
}

/// A number as written, not NaN; a literal too large for `f64` reads as infinite, so it is
/// reported as out of range.
fn parse_number(node: &Node) -> Option<f64> {
    match &node.value {
        Value::Scalar(s, true) => s
            .replace('_', "")
            .parse::<f64>()
            .ok()
            .filter(|f| !f.is_nan()),
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
            suppressed: 0,
        }
    }

    /// Whether further problems are only counted.
    fn full(&self) -> bool {
        self.diags.len() >= MAX_REPORTED
    }

    /// Counts a problem without describing it when the report is full (so the caller skips
    /// the work of describing it: suggestions, lists of allowed values).
    fn counted(&mut self) -> bool {
        let full = self.full();
        if full {
            self.suppressed += 1;
        }
        full
    }

    /// The diagnostics, with the count of those not described.
    fn into_diags(self) -> Diagnostics {
        let mut diags = self.diags;
        if self.suppressed > 0 {
            diags.push(Diagnostic::new(
                Code::StackFileTooManyProblems,
                format!("{}:1:1", self.origin),
                format!(
                    "{} more problems in `{}` are not shown (the first {MAX_REPORTED} are)",
                    self.suppressed, self.origin
                ),
                "fix the problems shown and load the file again; many problems of one kind are often one mistake repeated",
            ));
        }
        diags
    }

    fn report(
        &mut self,
        code: Code,
        pos: Pos,
        context: &str,
        message: impl Into<String>,
        help: impl Into<String>,
    ) {
        if self.full() {
            self.suppressed += 1;
            return;
        }
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

    fn out_of_range(&mut self, node: &Node, context: &str, range: &str) {
        let value = node.as_str().unwrap_or_default();
        self.report(
            Code::StackFileOutOfRange,
            node.pos,
            context,
            format!("`{value}` is outside the range of this field: {range}"),
            format!("use a value from {range}"),
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
                None if self.counted() => {}
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
            _ if self.counted() => {}
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
            Ty::U32(range) | Ty::U64(range) | Ty::I64(range) => match parse_whole(node) {
                None => self.wrong_type(node, context, "a whole number"),
                Some(v) if !range.contains_wide(v) => {
                    self.out_of_range(node, context, &range.describe());
                }
                Some(_) => {}
            },
            Ty::F64(range) => match parse_number(node) {
                None => self.wrong_type(node, context, "a number"),
                Some(v) if !range.contains(v) => {
                    self.out_of_range(node, context, &range.describe())
                }
                Some(_) => {}
            },
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
                        None if self.counted() => {}
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

/// A construct defined earlier in the file, as references see it: its kind, and its typed
/// handle (any construct's `Handle` type), or none when its own fields had errors (already
/// reported).
#[derive(Clone)]
struct Handle {
    kind: &'static str,
    value: Option<Rc<dyn Any>>,
}

impl Handle {
    fn kind(&self) -> &'static str {
        self.kind
    }

    /// The typed handle, when the construct is of the type `H` belongs to.
    fn get<H: 'static>(&self) -> Option<&H> {
        self.value.as_ref()?.downcast_ref::<H>()
    }

    /// Whether the construct failed to build and is of kind `kind`.
    fn failed(&self, kind: &str) -> bool {
        self.value.is_none() && self.kind == kind
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
    /// Each display path's last entry in `places`, so locating a diagnostic costs a few
    /// lookups, not a scan of every construct of the file.
    by_path: BTreeMap<String, usize>,
    /// The acknowledgements' values by `acknowledge[i].<key>` (and `acknowledge[i]` itself):
    /// where a diagnostic about an acknowledgement points.
    acknowledgements: BTreeMap<String, Pos>,
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
        self.by_path.insert(path.clone(), self.places.len());
        self.places.push((path, pos, values));
    }

    fn locate(&self, d: &Diagnostic) -> Pos {
        // A diagnostic about an acknowledgement points at it, not at the construct it names.
        if let Some(field) = d.field.as_deref().filter(|f| f.starts_with("acknowledge[")) {
            let whole = field.split('.').next().unwrap_or(field);
            if let Some(pos) = self
                .acknowledgements
                .get(field)
                .or_else(|| self.acknowledgements.get(whole))
            {
                return *pos;
            }
        }
        // The longest placed path that is the diagnostic's path or an ancestor of it.
        let mut path = d.path.as_str();
        let best = loop {
            if let Some(&i) = self.by_path.get(path) {
                break self.places.get(i);
            }
            match path.rfind('/') {
                Some(at) => path = &path[..at],
                None => break None,
            }
        };
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

    /// The builders' diagnostics at their places in the file; past [`MAX_REPORTED`] they are
    /// counted, as the file's own problems are.
    fn map(&self, found: Diagnostics, origin: &str) -> Diagnostics {
        let mut cx = Cx::new(origin);
        for mut d in found {
            if cx.full() {
                cx.suppressed += 1;
                continue;
            }
            let pos = self.locate(&d);
            d.message = format!("[{}] {}", d.path, d.message);
            d.path = format!("{origin}:{}:{}", pos.line, pos.col);
            cx.diags.push(d);
        }
        cx.into_diags()
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

fn str_map(node: &Node, key: &str) -> Vec<(String, String)> {
    node.get(key)
        .map(entries)
        .unwrap_or_default()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.as_str()?.to_owned())))
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
        for (i, ack) in root
            .get("acknowledge")
            .map(items)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let (Some(path), Some(code), Some(reason)) =
                (text(ack, "path"), text(ack, "code"), text(ack, "reason"))
            else {
                continue;
            };
            // Diagnostics name an acknowledgement by its place among the stack's (the loader
            // adds them in the file's order).
            let at = stack.acknowledgements().len();
            let key = format!("acknowledge[{at}]");
            self.index.acknowledgements.insert(key.clone(), ack.pos);
            for field in ["path", "code", "reason"] {
                if let Some(n) = ack.get(field) {
                    self.index
                        .acknowledgements
                        .insert(format!("{key}.{field}"), n.pos);
                }
            }
            match Code::from_id(&code) {
                Some(code) => {
                    stack.acknowledge(path, code, reason);
                }
                None => {
                    let pos = ack.get("code").map_or(ack.pos, |n| n.pos);
                    self.cx.report(
                        Code::StackFileInvalidValue,
                        pos,
                        &format!("acknowledge[{i}].code"),
                        format!("`{code}` is not a diagnostic code"),
                        "codes are `HF` and four digits, as diagnostics print them; docs/diagnostics.md lists them",
                    );
                }
            }
        }
        // The constructs were added by this loader: their places are the file's, not Rust's.
        stack.forget_locations();
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
            "lws" => Some(HelmRelease::leader_worker_set()),
            "kueue" => Some(HelmRelease::kueue()),
            "dcgm-exporter" => Some(HelmRelease::dcgm_exporter()),
            "kube-state-metrics" => Some(HelmRelease::kube_state_metrics(&str_map(
                node,
                "node_selector",
            ))),
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
            "aws-for-fluent-bit" => {
                let cluster = match needs("cluster") {
                    Some(n) => self.eks(n, &child(context, "cluster")),
                    None => {
                        missing(&mut self.cx, "cluster", "the EKS cluster");
                        None
                    }
                };
                let region = self.region.clone();
                Some(HelmRelease::aws_for_fluent_bit(&cluster?.name, &region))
            }
            "keda" => {
                let cluster = match needs("cluster") {
                    Some(n) => self.eks(n, &child(context, "cluster")),
                    None => {
                        missing(&mut self.cx, "cluster", "the EKS cluster");
                        None
                    }
                };
                Some(HelmRelease::keda(&cluster?.name))
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
            Some((pos, kind)) if *pos < node.pos => {
                return Some((Handle { kind, value: None }, attr))
            }
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
        let (h, attr) = self.lookup(node, context)?;
        match (h.get::<NetworkHandle>(), attr.as_deref()) {
            (Some(n), None | Some("vpc")) => Some(n.vpc.clone()),
            _ if h.failed(Network::KIND) => None,
            _ => {
                let found = describe(&h, attr.as_deref());
                self.wrong_kind(node, context, &found, Want::Vpc);
                None
            }
        }
    }

    fn subnets_one(&mut self, node: &Node, context: &str) -> Option<Vec<Ref<kind::Subnet>>> {
        let (h, attr) = self.lookup(node, context)?;
        if h.failed(Network::KIND) {
            return None;
        }
        let Some(n) = h.get::<NetworkHandle>() else {
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

    /// Each item of a list field (or the one value given instead of a list), resolved by
    /// `one` with its own context (`field[2]`); `None` when any item failed (each reported).
    fn each_item<T>(
        &mut self,
        node: &Node,
        context: &str,
        mut one: impl FnMut(&mut Self, &Node, &str) -> Option<T>,
    ) -> Option<Vec<T>> {
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
            out = match (out, one(self, item, &ctx)) {
                (Some(mut acc), Some(x)) => {
                    acc.push(x);
                    Some(acc)
                }
                _ => None,
            };
        }
        out
    }

    fn security_groups(
        &mut self,
        node: &Node,
        context: &str,
    ) -> Option<Vec<Ref<kind::SecurityGroup>>> {
        self.each_item(node, context, |b, item, ctx| {
            b.resolve_as::<ClusterSecurityGroupHandle>(
                item,
                ctx,
                Want::SecurityGroup,
                ClusterSecurityGroup::KIND,
                &["group"],
            )
            .map(|g| g.group)
        })
    }

    /// Node roles: each item names a managed node group or Karpenter.
    fn node_roles(&mut self, node: &Node, context: &str) -> Option<Vec<Ref<kind::Role>>> {
        self.each_item(node, context, |b, item, ctx| {
            let (h, attr) = b.lookup(item, ctx)?;
            match (
                &attr,
                h.get::<NodeGroupHandle>(),
                h.get::<KarpenterHandle>(),
            ) {
                (None, Some(g), _) => Some(g.role.clone()),
                (None, _, Some(k)) => Some(k.node_role.clone()),
                (None, _, _) if h.failed(ManagedNodeGroup::KIND) || h.failed(Karpenter::KIND) => {
                    None
                }
                _ => {
                    let found = describe(&h, attr.as_deref());
                    b.wrong_kind(item, ctx, &found, Want::NodeRole);
                    None
                }
            }
        })
    }

    fn eks(&mut self, node: &Node, context: &str) -> Option<EksClusterHandle> {
        self.resolve_as(node, context, Want::Eks, EksCluster::KIND, &["cluster"])
    }

    fn lifecycle(&mut self, node: &Node, context: &str) -> Option<LifecycleScriptsHandle> {
        self.resolve_as(node, context, Want::Lifecycle, LifecycleScripts::KIND, &[])
    }

    fn hyperpod(&mut self, node: &Node, context: &str) -> Option<HyperPodHandle> {
        self.resolve_as(node, context, Want::HyperPod, HyperPodCluster::KIND, &[])
    }

    fn karpenter(&mut self, node: &Node, context: &str) -> Option<KarpenterHandle> {
        self.resolve_as(node, context, Want::Karpenter, Karpenter::KIND, &[])
    }

    fn model_store(&mut self, node: &Node, context: &str) -> Option<ModelStoreHandle> {
        self.resolve_as(node, context, Want::ModelStore, ModelStore::KIND, &[])
    }

    fn alarm_topic(&mut self, node: &Node, context: &str) -> Option<AlarmTopicHandle> {
        self.resolve_as(node, context, Want::AlarmTopic, AlarmTopic::KIND, &[])
    }

    fn prometheus_monitoring(
        &mut self,
        node: &Node,
        context: &str,
    ) -> Option<constructs::PrometheusMonitoringHandle> {
        self.resolve_as(
            node,
            context,
            Want::PrometheusMonitoring,
            constructs::PrometheusMonitoring::KIND,
            &[],
        )
    }

    /// The handle of a construct of type `H` (kind `kind`) that `node` names, as `Id` or as
    /// `Id.<attr>` for one of `attrs`; a construct of another kind is reported as the wrong
    /// kind for `want`, one that failed to build (already reported) gives `None` quietly.
    fn resolve_as<H: Clone + 'static>(
        &mut self,
        node: &Node,
        context: &str,
        want: Want,
        kind: &str,
        attrs: &[&str],
    ) -> Option<H> {
        let (h, attr) = self.lookup(node, context)?;
        match (h.get::<H>(), attr.as_deref()) {
            (Some(x), None) => Some(x.clone()),
            (Some(x), Some(a)) if attrs.contains(&a) => Some(x.clone()),
            _ if h.failed(kind) => None,
            _ => {
                let found = describe(&h, attr.as_deref());
                self.wrong_kind(node, context, &found, want);
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
        self.resolve_as::<LifecycleScriptsHandle>(
            node,
            context,
            Want::Bucket,
            LifecycleScripts::KIND,
            &["bucket"],
        )
        .map(|h| h.bucket)
    }

    // --- constructs -------------------------------------------------------------------------

    fn construct(&mut self, stack: &mut Stack, stage: StageId, node: &Node, context: &str) {
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
        // Every shape comes from the registry, so its kind always names a construct type.
        let handle = constructs::visit_kind(
            shape.name,
            Place {
                b: self,
                stack,
                stage,
                node,
                id: &id,
                context: &context,
                path: &path,
            },
        )
        .flatten();
        if let Some(h) = handle {
            self.handles.entry(id).or_insert(h);
        }
    }
}

/// Builds one construct of the type the registry hands over, places it in the stage and
/// returns its handle.
struct Place<'a> {
    b: &'a mut Builder,
    stack: &'a mut Stack,
    stage: StageId,
    node: &'a Node,
    id: &'a str,
    context: &'a str,
    path: &'a str,
}

impl KindVisitor for Place<'_> {
    type Out = Option<Handle>;

    fn visit<C: StackFileConstruct>(self) -> Option<Handle>
    where
        C::Handle: 'static,
    {
        let mut r = Reader {
            b: self.b,
            node: self.node,
            shape: C::SHAPE,
            context: self.context.to_owned(),
            report_context: self.context.to_owned(),
            path: self.path,
            read: vec![C::KIND],
        };
        let construct = C::build(self.id, &mut r)?;
        r.finish();
        let handle = self.stack.add(self.stage, construct);
        Some(Handle {
            kind: C::KIND,
            value: Some(Rc::new(handle)),
        })
    }
}

/// Reads one object of the file for a construct's builder, through the fields its shape
/// declares.
struct Reader<'a> {
    b: &'a mut Builder,
    node: &'a Node,
    shape: &'static Shape,
    /// Where values below this object are (`... (Id).data_repository`), for references.
    context: String,
    /// The construct's own context, for problems the builder reports.
    report_context: String,
    /// The construct's display path.
    path: &'a str,
    /// The keys read so far.
    read: Vec<&'static str>,
}

impl<'a> Reader<'a> {
    /// The value of `field`, which must be declared by the shape being read.
    fn get(&mut self, field: &'static Field) -> Option<&'a Node> {
        if !self.shape.declares(field) {
            let message = format!(
                "the builder of {} reads `{}`, which its shape does not declare",
                self.shape.name, field.name
            );
            self.internal_error(&message);
            return None;
        }
        if !self.read.contains(&field.name) {
            self.read.push(field.name);
        }
        self.node.get(field.name)
    }

    /// Checks that the builder read every field the (valid) file sets: a declared field that
    /// no builder reads would otherwise be silently dropped.
    fn finish(&mut self) {
        if self.b.cx.diags.has_errors() {
            return;
        }
        let unread: Vec<String> = entries(self.node)
            .iter()
            .filter_map(|(k, _)| k.as_str())
            .filter(|k| !self.read.contains(k))
            .map(str::to_owned)
            .collect();
        for key in unread {
            let message = format!(
                "the builder of {} never read the field `{key}` the file sets",
                self.shape.name
            );
            self.internal_error(&message);
        }
    }

    /// Reports a fault of hyperforge's own stack-file support (never of the file) as an error,
    /// rather than building a stack that silently differs from the file.
    fn internal_error(&mut self, message: &str) {
        let pos = self.node.pos;
        self.b.cx.report(
            Code::InternalError,
            pos,
            &self.report_context,
            message,
            "this is a bug in hyperforge; please report it with the stack file",
        );
    }

    fn nested(&mut self, node: &'a Node, shape: &'static Shape, context: String) -> Reader<'_> {
        Reader {
            b: &mut *self.b,
            node,
            shape,
            context,
            report_context: self.report_context.clone(),
            path: self.path,
            read: Vec::new(),
        }
    }

    fn resolve<T>(
        &mut self,
        field: &'static Field,
        want: Want,
        f: fn(&mut Builder, &Node, &str) -> Option<T>,
    ) -> Resolved<T> {
        if !matches!(field.ty, Ty::Ref(w) | Ty::Refs(w) if w == want) {
            let message = format!(
                "`{}` of {} is not declared as a reference to {want:?}",
                field.name, self.shape.name
            );
            self.internal_error(&message);
            return Err(Invalid);
        }
        match self.get(field) {
            None => Ok(None),
            Some(n) => f(self.b, n, &child(&self.context, field.name))
                .map(Some)
                .ok_or(Invalid),
        }
    }
}

impl FieldReader for Reader<'_> {
    fn text(&mut self, field: &'static Field) -> Option<String> {
        self.get(field).and_then(parse_text).map(str::to_owned)
    }

    fn u32(&mut self, field: &'static Field) -> Option<u32> {
        self.u64(field).and_then(|v| u32::try_from(v).ok())
    }

    fn u64(&mut self, field: &'static Field) -> Option<u64> {
        let range = int_range(field);
        self.get(field)
            .and_then(parse_uint)
            .filter(|v| range.is_none_or(|r| r.contains_u64(*v)))
    }

    fn i64(&mut self, field: &'static Field) -> Option<i64> {
        let range = int_range(field);
        self.get(field)
            .and_then(parse_int)
            .filter(|v| range.is_none_or(|r| r.contains(*v)))
    }

    fn f64(&mut self, field: &'static Field) -> Option<f64> {
        let range = match field.ty {
            Ty::F64(r) => Some(r),
            _ => None,
        };
        self.get(field)
            .and_then(parse_float)
            .filter(|v| range.is_none_or(|r| r.contains(*v)))
    }

    fn bool(&mut self, field: &'static Field) -> Option<bool> {
        self.get(field).and_then(parse_bool)
    }

    fn str_map(&mut self, field: &'static Field) -> Vec<(String, String)> {
        self.get(field)
            .map(entries)
            .unwrap_or_default()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.as_str()?.to_owned())))
            .collect()
    }

    fn str_list(&mut self, field: &'static Field) -> Option<Vec<String>> {
        let node = self.get(field)?;
        Some(
            items(node)
                .iter()
                .filter_map(|v| parse_text(v).map(str::to_owned))
                .collect(),
        )
    }

    fn has(&mut self, field: &'static Field) -> bool {
        self.get(field).is_some()
    }

    fn vpc(&mut self, field: &'static Field) -> Resolved<Ref<kind::Vpc>> {
        self.resolve(field, Want::Vpc, Builder::vpc)
    }

    fn subnets(&mut self, field: &'static Field) -> Resolved<Vec<Ref<kind::Subnet>>> {
        self.resolve(field, Want::Subnets, Builder::subnets)
    }

    fn subnet(&mut self, field: &'static Field) -> Resolved<Ref<kind::Subnet>> {
        self.resolve(field, Want::Subnet, Builder::subnet)
    }

    fn security_groups(
        &mut self,
        field: &'static Field,
    ) -> Resolved<Vec<Ref<kind::SecurityGroup>>> {
        self.resolve(field, Want::SecurityGroup, Builder::security_groups)
    }

    fn eks(&mut self, field: &'static Field) -> Resolved<EksClusterHandle> {
        self.resolve(field, Want::Eks, Builder::eks)
    }

    fn lifecycle(&mut self, field: &'static Field) -> Resolved<LifecycleScriptsHandle> {
        self.resolve(field, Want::Lifecycle, Builder::lifecycle)
    }

    fn hyperpod(&mut self, field: &'static Field) -> Resolved<HyperPodHandle> {
        self.resolve(field, Want::HyperPod, Builder::hyperpod)
    }

    fn karpenter(&mut self, field: &'static Field) -> Resolved<KarpenterHandle> {
        self.resolve(field, Want::Karpenter, Builder::karpenter)
    }

    fn model_store(&mut self, field: &'static Field) -> Resolved<ModelStoreHandle> {
        self.resolve(field, Want::ModelStore, Builder::model_store)
    }

    fn bucket(&mut self, field: &'static Field) -> Resolved<Ref<kind::Bucket>> {
        self.resolve(field, Want::Bucket, Builder::bucket)
    }

    fn node_roles(&mut self, field: &'static Field) -> Resolved<Vec<Ref<kind::Role>>> {
        self.resolve(field, Want::NodeRole, Builder::node_roles)
    }

    fn alarm_topic(&mut self, field: &'static Field) -> Resolved<AlarmTopicHandle> {
        self.resolve(field, Want::AlarmTopic, Builder::alarm_topic)
    }

    fn prometheus_monitoring(
        &mut self,
        field: &'static Field,
    ) -> Resolved<constructs::PrometheusMonitoringHandle> {
        self.resolve(
            field,
            Want::PrometheusMonitoring,
            Builder::prometheus_monitoring,
        )
    }

    fn object(&mut self, field: &'static Field, body: &mut dyn FnMut(&mut dyn FieldReader)) {
        let Ty::Obj(shape) = field.ty else {
            let message = format!("`{}` of {} is not an object", field.name, self.shape.name);
            self.internal_error(&message);
            return;
        };
        let Some(node) = self.get(field) else {
            return;
        };
        let context = child(&self.context, field.name);
        let mut r = self.nested(node, shape, context);
        body(&mut r);
        r.finish();
    }

    fn each(&mut self, field: &'static Field, body: &mut dyn FnMut(&mut dyn FieldReader)) {
        let Ty::List(shape) = field.ty else {
            let message = format!(
                "`{}` of {} is not a list of objects",
                field.name, self.shape.name
            );
            self.internal_error(&message);
            return;
        };
        let Some(node) = self.get(field) else {
            return;
        };
        for (i, item) in items(node).iter().enumerate() {
            let context = format!("{}[{i}]", child(&self.context, field.name));
            let mut r = self.nested(item, shape, context);
            body(&mut r);
            r.finish();
        }
    }

    fn part(&mut self, name: &str, field: &'static Field) {
        let pos = self.get(field).map_or(self.node.pos, |n| n.pos);
        let path = format!("{}/{name}", self.path);
        self.b.index.place(path, pos, Some(self.node));
    }

    fn report(&mut self, code: Code, field: Option<&'static Field>, message: &str, help: &str) {
        let pos = field
            .and_then(|f| self.get(f))
            .map_or(self.node.pos, |n| n.pos);
        self.b
            .cx
            .report(code, pos, &self.report_context, message, help);
    }
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
    }

    /// Runs `f` on a reader of `text` with `shape`; returns what it reported.
    fn with_reader(
        text: &str,
        shape: &'static Shape,
        f: impl FnOnce(&mut Reader<'_>),
    ) -> Diagnostics {
        let root = yaml::parse(text).unwrap().unwrap();
        let mut b = Builder::new(Cx::new("t.yaml"), &root);
        let mut r = Reader {
            b: &mut b,
            node: &root,
            shape,
            context: String::new(),
            report_context: String::new(),
            path: "t/Id",
            read: Vec::new(),
        };
        f(&mut r);
        b.cx.diags
    }

    #[test]
    fn declared_fields_are_read() {
        use crate::constructs::network::network_fields as f;
        with_reader("network: N\ncidr: 10.0.0.0/16\n", &f::SHAPE, |r| {
            assert_eq!(r.text(&f::CIDR).as_deref(), Some("10.0.0.0/16"));
            assert_eq!(r.u32(&f::AVAILABILITY_ZONES), None);
        });
    }

    fn internal(ds: &Diagnostics, text: &str) -> bool {
        ds.iter()
            .any(|d| d.code == Code::InternalError && d.message.contains(text))
    }

    #[test]
    fn reading_an_undeclared_field_is_an_internal_error() {
        use crate::constructs::network::network_fields as f;
        let ds = with_reader("network: N\nname: x\n", &f::SHAPE, |r| {
            assert_eq!(r.text(&crate::constructs::eks::fields::NAME), None);
        });
        assert!(
            internal(&ds, "reads `name`, which its shape does not declare"),
            "{ds}"
        );
    }

    #[test]
    fn a_field_left_unread_is_an_internal_error() {
        use crate::constructs::network::network_fields as f;
        let ds = with_reader("network: N\ncidr: 10.0.0.0/16\n", &f::SHAPE, |r| {
            r.read.push(f::ID.name);
            r.finish();
        });
        assert!(internal(&ds, "never read the field `cidr`"), "{ds}");
    }
}
