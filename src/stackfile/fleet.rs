//! Fleet files: a YAML description of a [`Fleet`] (its matrix of regions, targets and models,
//! its StackSet settings) naming the stack file every member is built from.
//!
//! The stack file names a member's values as `${fleet.<name>}` inside any string value
//! (`stack: ${fleet.stack}`, `region: ${fleet.region}`). It is parsed once per fleet; each
//! member substitutes its values into the parsed tree, whose nodes keep their positions, and
//! the tree is then checked and built as any stack file is, so every diagnostic still points
//! at the stack file's `file:line:col` (and names the member). Placeholders are checked once,
//! before any member is built: a malformed one (HF1120), an unknown name (HF1121), a name some
//! member has no value for (HF1123). A stack file loaded on its own refuses them (HF1122).

use super::schema::{self, opt, opt_default, req, Shape, Ty};
use super::yaml::{Node, Pos, Value};
use super::{entries, items, parse_bool, parse_text, parse_whole, str_map, text, Cx};
use crate::assembly::fleet::{
    Amount, OperationPreferences, PermissionModel, RegionConcurrency, Target,
};
use crate::constructs::stack_file::Ints;
use crate::diagnostics::{suggest, Code, Diagnostic, Diagnostics};
use crate::fleet::{Fleet, FleetMember, FleetRegion, MAX_MODELS, MAX_REGIONS, MAX_TARGETS};
use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

pub use crate::fleet::MEMBER_VALUES;

static AMOUNT: Shape = Shape {
    name: "Amount",
    doc: "A number of accounts or a percentage of them: exactly one of `count` and `percentage`.",
    fields: &[
        &opt(
            "count",
            Ty::U32(Ints::new(0, MAX_TARGETS as i64)),
            "A number of accounts.",
        ),
        &opt(
            "percentage",
            Ty::U32(Ints::new(0, 100)),
            "A percentage of the accounts.",
        ),
    ],
};

static PREFERENCES: Shape = Shape {
    name: "Preferences",
    doc: "How StackSet operations roll out (`OperationPreferences`).",
    fields: &[
        &opt_default(
            "region_concurrency",
            Ty::Enum(&["sequential", "parallel"]),
            "sequential",
            "One region after another or all at once.",
        ),
        &opt(
            "max_concurrent",
            Ty::Obj(&AMOUNT),
            "How many accounts one region's operation reaches at once (default `count: 1`).",
        ),
        &opt(
            "failure_tolerance",
            Ty::Obj(&AMOUNT),
            "How many accounts may fail in a region before the operation stops there (default `count: 0`).",
        ),
        &opt(
            "region_order",
            Ty::StrList,
            "These regions first, in this order; the others follow in the fleet's order.",
        ),
    ],
};

static CAPACITY_BLOCK: Shape = Shape {
    name: "CapacityBlock",
    doc: "An EC2 Capacity Block (or capacity reservation) the region's members use.",
    fields: &[
        &req(
            "reservation_id",
            Ty::Str,
            "The reservation id, `cr-` and 8 or 17 hexadecimal digits (`${fleet.capacity_id}`).",
        ),
        &req(
            "zone_id",
            Ty::Str,
            "The reservation's zone id, e.g. `usw2-az2` (`${fleet.zone_id}`).",
        ),
    ],
};

static TRAINING_PLAN: Shape = Shape {
    name: "TrainingPlan",
    doc: "A SageMaker training plan the region's members use.",
    fields: &[
        &req(
            "arn",
            Ty::Str,
            "The plan's ARN, in the region (`${fleet.capacity_id}`).",
        ),
        &req(
            "zone_id",
            Ty::Str,
            "The plan's zone id (`${fleet.zone_id}`).",
        ),
    ],
};

static REGION: Shape = Shape {
    name: "FleetRegion",
    doc: "One region of the fleet: a member per target (and model) there.",
    fields: &[
        &req("region", Ty::Str, "The region code, e.g. `us-west-2`."),
        &opt(
            "capacity_block",
            Ty::Obj(&CAPACITY_BLOCK),
            "The Capacity Block the members here use.",
        ),
        &opt(
            "training_plan",
            Ty::Obj(&TRAINING_PLAN),
            "The training plan the members here use.",
        ),
        &opt(
            "accounts",
            Ty::StrList,
            "Deploy this region to these accounts instead of the fleet's targets (a Capacity Block belongs to one account).",
        ),
        &opt(
            "organizational_units",
            Ty::StrList,
            "Deploy this region to these organizational units instead of the fleet's targets.",
        ),
        &opt(
            "values",
            Ty::StrMap,
            "The members' own values here, read in the stack file as `${fleet.<name>}`.",
        ),
    ],
};

/// The top level of a fleet file.
pub static FLEET_FILE: Shape = Shape {
    name: "FleetFile",
    doc: "One hyperforge fleet: a stack file expanded over regions, targets and models, deployed through StackSets.",
    fields: &[
        &req(
            "fleet",
            Ty::Str,
            "The fleet's name: it prefixes the members' names and names the StackSets.",
        ),
        &req(
            "stack_file",
            Ty::Str,
            "The stack file of every member, relative to this file and inside its directory; it reads the member's values as `${fleet.<name>}`.",
        ),
        &opt(
            "accounts",
            Ty::StrList,
            "The target accounts (12-digit ids; self-managed permissions).",
        ),
        &opt(
            "organizational_units",
            Ty::StrList,
            "The target organizational units (`ou-...`; service-managed permissions).",
        ),
        &opt(
            "models",
            Ty::StrList,
            "Models the members vary over (catalog ids); each member is told its model as `${fleet.model}`.",
        ),
        &req(
            "regions",
            Ty::List(&REGION),
            "The regions, in order: members are named `<fleet>-<region>[-<target>][-<model>]`.",
        ),
        &opt_default(
            "permission_model",
            Ty::Enum(&["self-managed", "service-managed"]),
            "self-managed",
            "The StackSets' permission model.",
        ),
        &opt(
            "administration_role_arn",
            Ty::Str,
            "Self-managed: the administration role (default: the account's `AWSCloudFormationStackSetAdministrationRole`).",
        ),
        &opt_default(
            "execution_role_name",
            Ty::Str,
            "AWSCloudFormationStackSetExecutionRole",
            "Self-managed: the execution role's name in each target account.",
        ),
        &opt(
            "delegated_admin",
            Ty::Bool,
            "Service-managed: deploy as a delegated administrator rather than the management account.",
        ),
        &opt(
            "preferences",
            Ty::Obj(&PREFERENCES),
            "How operations roll out (default: one region after another, one account at a time, no failure tolerated).",
        ),
    ],
};

/// The JSON Schema (draft 2020-12) of the fleet file format; `docs/fleet-file.schema.json` is
/// generated from it.
pub fn json_schema() -> serde_json::Value {
    schema::document_schema(
        &FLEET_FILE,
        "https://hyperforge.dev/fleet-file.schema.json",
        "hyperforge fleet file",
    )
}

/// Reads the fleet file at `path` and the stack file it names (see [`load_file_in`]).
pub fn load_file(path: &Path) -> Result<Fleet, Diagnostics> {
    load_file_in(path, &[])
}

/// Reads the fleet file at `path` and the stack file it names, which must be inside the fleet
/// file's directory or one of `roots` (the stacks directory). Returns the fleet, whose members
/// are built from the stack file with their values substituted, or every problem of the two
/// files at once, each at its `file:line:col`.
pub fn load_file_in(path: &Path, roots: &[&Path]) -> Result<Fleet, Diagnostics> {
    let origin = path.display().to_string();
    let source = super::read_text(path, &origin)?;
    let root = super::parse_root(&origin, &source, "a fleet description")?;
    let mut cx = Cx::new(&origin);
    cx.check_obj(&root, &FLEET_FILE, "");
    check_semantics(&mut cx, &root);
    let stack_path = stack_file_path(&mut cx, &root, path, roots);
    if cx.diags.has_errors() {
        return Err(cx.into_diags());
    }
    let name = text(&root, "fleet").unwrap_or_default();
    let matrix = configure(
        Fleet::from_apps(name.clone(), |_| Err(Diagnostics::new())),
        &root,
    );
    let mut ds = locate_matrix(&root, matrix.validate_matrix(), &origin);
    let Some(stack_path) = stack_path else {
        ds.extend(cx.into_diags());
        return Err(ds);
    };
    // The stack file, parsed once for every member.
    let stack_origin = stack_path.display().to_string();
    let stack_root = match super::read_text(&stack_path, &stack_origin)
        .and_then(|t| super::parse_root(&stack_origin, &t, "a stack description"))
    {
        Ok(root) => root,
        Err(found) => {
            ds.extend(found);
            return Err(ds);
        }
    };
    let mut scx = Cx::new(&stack_origin);
    let used = placeholders(&mut scx, &stack_root);
    if !ds.has_errors() {
        check_placeholders(&mut scx, &used, &root, &matrix.members());
    }
    ds.extend(scx.into_diags());
    if ds.has_errors() {
        return Err(ds);
    }
    let at = |key: &str| stack_root.get(key).map_or(stack_root.pos, |n| n.pos);
    let (stack_pos, region_pos) = (at("stack"), at("region"));
    let template = Arc::new(stack_root);
    let origin: Arc<str> = stack_origin.into();
    Ok(configure(
        Fleet::from_apps(name, move |member: &FleetMember| {
            let node = substitute(&template, member);
            let app = super::load_root(&origin, &node)?;
            check_member_stack(&app, member, &origin, stack_pos, region_pos)?;
            Ok(app)
        }),
        &root,
    ))
}

/// A member's stack is named as the fleet's members' stack (`stack: ${fleet.stack}`; or after
/// the member, `${fleet.member}`, as fleets named them before) and in the member's region
/// (`region: ${fleet.region}`), reported at the stack file's lines (`Fleet::describe` would
/// say so too, without them).
fn check_member_stack(
    app: &crate::app::App,
    member: &FleetMember,
    origin: &str,
    stack_pos: Pos,
    region_pos: Pos,
) -> Result<(), Diagnostics> {
    let Some(stack) = app.stacks().first() else {
        return Ok(());
    };
    let mut ds = Diagnostics::new();
    let mut wrong = |pos: Pos, key: &str, message: String, placeholder: &str| {
        ds.push(Diagnostic::new(
            Code::FleetMemberMismatch,
            format!("{origin}:{}:{}", pos.line, pos.col),
            format!("[member {}] {message}", member.name()),
            format!("write `{key}: {placeholder}`"),
        ));
    };
    // Through the accessors, in this order: the description reads the member's name only
    // when its stack is not the fleet's (its result is a function of what it read).
    if stack.name() != member.stack() && stack.name() != member.name() {
        wrong(
            stack_pos,
            "stack",
            format!(
                "the stack is named `{}`, not the fleet's stack name `{}`",
                stack.name(),
                member.stack()
            ),
            "${fleet.stack}",
        );
    }
    if stack.region() != member.region() {
        wrong(
            region_pos,
            "region",
            format!(
                "the stack's region is `{}`, not the member's `{}`",
                stack.region(),
                member.region()
            ),
            "${fleet.region}",
        );
    }
    if ds.is_empty() {
        Ok(())
    } else {
        Err(ds)
    }
}

/// The list under `key`, as text.
fn str_list(node: &Node, key: &str) -> Vec<String> {
    node.get(key)
        .map(items)
        .unwrap_or_default()
        .iter()
        .filter_map(parse_text)
        .map(str::to_owned)
        .collect()
}

fn targets(node: &Node) -> Vec<Target> {
    str_list(node, "accounts")
        .into_iter()
        .map(Target::Account)
        .chain(
            str_list(node, "organizational_units")
                .into_iter()
                .map(Target::OrganizationalUnit),
        )
        .collect()
}

fn amount(node: Option<&Node>) -> Option<Amount> {
    let node = node?;
    let whole = |key: &str| {
        node.get(key)
            .and_then(parse_whole)
            .and_then(|v| u32::try_from(v).ok())
    };
    whole("count")
        .map(Amount::Count)
        .or_else(|| whole("percentage").map(Amount::Percentage))
}

/// The fleet the file describes, on `fleet`'s description.
fn configure(mut fleet: Fleet, root: &Node) -> Fleet {
    for target in targets(root) {
        fleet = match target {
            Target::Account(id) => fleet.account(id),
            Target::OrganizationalUnit(id) => fleet.organizational_unit(id),
        };
    }
    for model in str_list(root, "models") {
        fleet = fleet.model(model);
    }
    for r in root.get("regions").map(items).unwrap_or_default() {
        let mut region = FleetRegion::new(text(r, "region").unwrap_or_default());
        if let Some(cb) = r.get("capacity_block") {
            region = region.capacity_block(
                text(cb, "reservation_id").unwrap_or_default(),
                text(cb, "zone_id").unwrap_or_default(),
            );
        } else if let Some(tp) = r.get("training_plan") {
            region = region.training_plan(
                text(tp, "arn").unwrap_or_default(),
                text(tp, "zone_id").unwrap_or_default(),
            );
        }
        let own = targets(r);
        if !own.is_empty() {
            region = region.targets(own);
        }
        for (k, v) in str_map(r, "values") {
            region = region.value(k, v);
        }
        fleet = fleet.region(region);
    }
    let permission_model = match text(root, "permission_model").as_deref() {
        Some("service-managed") => PermissionModel::ServiceManaged {
            delegated_admin: root
                .get("delegated_admin")
                .and_then(parse_bool)
                .unwrap_or(false),
        },
        _ => PermissionModel::SelfManaged {
            administration_role_arn: text(root, "administration_role_arn"),
            execution_role_name: text(root, "execution_role_name"),
        },
    };
    let p = root.get("preferences");
    let preferences = OperationPreferences {
        region_concurrency: match p.and_then(|p| text(p, "region_concurrency")).as_deref() {
            Some("parallel") => RegionConcurrency::Parallel,
            _ => RegionConcurrency::Sequential,
        },
        max_concurrent: amount(p.and_then(|p| p.get("max_concurrent"))).unwrap_or(Amount::Count(1)),
        failure_tolerance: amount(p.and_then(|p| p.get("failure_tolerance")))
            .unwrap_or(Amount::Count(0)),
        region_order: p.map(|p| str_list(p, "region_order")).unwrap_or_default(),
    };
    fleet
        .permission_model(permission_model)
        .preferences(preferences)
}

/// The bounds of the file's lists and the settings that exclude each other.
fn check_semantics(cx: &mut Cx, root: &Node) {
    let bound = |cx: &mut Cx, node: Option<&Node>, max: usize, what: &str, context: &str| {
        if let Some(n) = node {
            let len = items(n).len();
            if len > max {
                cx.report(
                    Code::FleetTooLarge,
                    n.pos,
                    context,
                    format!("the fleet lists {len} {what}; at most {max}"),
                    "split the fleet, or target organizational units instead of accounts",
                );
            }
        }
    };
    bound(cx, root.get("regions"), MAX_REGIONS, "regions", "regions");
    bound(
        cx,
        root.get("accounts"),
        MAX_TARGETS,
        "accounts",
        "accounts",
    );
    bound(
        cx,
        root.get("organizational_units"),
        MAX_TARGETS,
        "organizational units",
        "organizational_units",
    );
    bound(cx, root.get("models"), MAX_MODELS, "models", "models");
    let both = |cx: &mut Cx, node: &Node, a: &str, b: &str, context: &str, help: &str| {
        if let (Some(_), Some(second)) = (node.get(a), node.get(b)) {
            let at = entries(node)
                .iter()
                .find(|(k, _)| k.as_str() == Some(b))
                .map_or(second.pos, |(k, _)| k.pos);
            cx.report(
                Code::FleetFileConflict,
                at,
                context,
                format!("`{a}` and `{b}` exclude each other"),
                help,
            );
        }
    };
    const TARGETS_HELP: &str = "target accounts (self-managed permissions) or organizational units (service-managed), not both";
    both(
        cx,
        root,
        "accounts",
        "organizational_units",
        "",
        TARGETS_HELP,
    );
    for (i, r) in root
        .get("regions")
        .map(items)
        .unwrap_or_default()
        .iter()
        .enumerate()
        .take(MAX_REGIONS + 1)
    {
        let context = format!("regions[{i}]");
        both(
            cx,
            r,
            "accounts",
            "organizational_units",
            &context,
            TARGETS_HELP,
        );
        both(
            cx,
            r,
            "capacity_block",
            "training_plan",
            &context,
            "a region's members use one Capacity Block or one training plan",
        );
    }
    if let Some(p) = root.get("preferences") {
        for key in ["max_concurrent", "failure_tolerance"] {
            let Some(a) = p.get(key) else { continue };
            if !matches!(a.value, Value::Map(_)) {
                continue;
            }
            let context = format!("preferences.{key}");
            both(
                cx,
                a,
                "count",
                "percentage",
                &context,
                "give a count of accounts or a percentage of them",
            );
            if a.get("count").is_none() && a.get("percentage").is_none() {
                cx.report(
                    Code::FleetFileConflict,
                    a.pos,
                    &context,
                    "an amount needs `count` or `percentage`",
                    "write `{count: 1}` or `{percentage: 10}`",
                );
            }
        }
    }
    let service = text(root, "permission_model").as_deref() == Some("service-managed");
    let misplaced: &[&str] = if service {
        &["administration_role_arn", "execution_role_name"]
    } else {
        &["delegated_admin"]
    };
    for (k, _) in entries(root) {
        if let Some(key) = k.as_str().filter(|key| misplaced.contains(key)) {
            cx.report(
                Code::FleetFileConflict,
                k.pos,
                "",
                format!(
                    "`{key}` is a setting of {} permissions",
                    if service {
                        "self-managed"
                    } else {
                        "service-managed"
                    }
                ),
                if service {
                    "service-managed StackSets use the roles AWS Organizations creates: remove it"
                } else {
                    "set `permission_model: service-managed` to use it, or remove it"
                },
            );
        }
    }
}

/// The stack file's path: relative to the fleet file, inside its directory or one of `roots`.
fn stack_file_path(
    cx: &mut Cx,
    root: &Node,
    fleet_path: &Path,
    roots: &[&Path],
) -> Option<PathBuf> {
    let node = root.get("stack_file")?;
    let rel = parse_text(node)?;
    let path = Path::new(rel);
    let refuse = |cx: &mut Cx, message: String| {
        cx.report(
            Code::FleetStackFilePath,
            node.pos,
            "stack_file",
            message,
            "name the stack file relative to the fleet file, inside its directory (`kimi-k3-eks.yaml`, `stacks/kimi-k3-eks.yaml`)",
        );
        None
    };
    if rel.is_empty()
        || path.is_absolute()
        || path.has_root()
        || path
            .components()
            .any(|c| matches!(c, Component::Prefix(_) | Component::RootDir))
    {
        return refuse(cx, format!("`{rel}` is not a relative path"));
    }
    // A `..` that climbs out of the fleet file's directory, before touching the file system.
    let mut depth = 0i64;
    let mut climbs_out = false;
    for c in path.components() {
        match c {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            _ => {}
        }
        climbs_out |= depth < 0;
    }
    if climbs_out && roots.is_empty() {
        return refuse(
            cx,
            format!("`{rel}` leads outside the fleet file's directory"),
        );
    }
    let base = match fleet_path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let joined = if base == Path::new(".") {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    if !joined.is_file() {
        cx.report(
            Code::StackFileUnreadable,
            node.pos,
            "stack_file",
            format!(
                "stack file `{}` does not exist or is not a file",
                joined.display()
            ),
            "the path is relative to the fleet file's directory",
        );
        return None;
    }
    let canonical = joined.canonicalize().ok();
    let inside = canonical.as_ref().is_some_and(|c| {
        std::iter::once(base.as_path())
            .chain(roots.iter().copied())
            .filter_map(|r| r.canonicalize().ok())
            .any(|r| c.starts_with(r))
    });
    if !inside {
        return refuse(
            cx,
            format!("`{rel}` leads outside the fleet file's directory"),
        );
    }
    Some(joined)
}

/// The position of byte `offset` of a scalar's `text`: exact on the scalar's first line.
fn pos_in(node: &Node, text: &str, offset: usize) -> Pos {
    let before = &text[..offset.min(text.len())];
    if before.contains('\n') {
        return node.pos;
    }
    let quoted = matches!(node.value, Value::Scalar(_, false));
    Pos {
        line: node.pos.line,
        col: node.pos.col + usize::from(quoted) + before.chars().count(),
    }
}

/// A piece of a scalar with placeholders.
enum Piece<'a> {
    Text(&'a str),
    /// A placeholder's name and its byte offset.
    Name(&'a str, usize),
}

/// A malformed placeholder: where, and what is wrong.
struct Malformed {
    at: usize,
    message: String,
}

/// The pieces of `s`: text and `${fleet.<name>}` placeholders. Other `${...}` is text.
fn scan(s: &str) -> Result<Vec<Piece<'_>>, Malformed> {
    let mut out = Vec::new();
    let (mut from, mut i) = (0, 0);
    while let Some(found) = s[i..].find("${") {
        let at = i + found;
        let after = &s[at + 2..];
        if !after.trim_start().starts_with("fleet") {
            i = at + 2;
            continue;
        }
        let bad = |message: String| Err(Malformed { at, message });
        if after.len() != after.trim_start().len() {
            return bad("a placeholder has no spaces: `${fleet.<name>}`".to_owned());
        }
        let Some(body) = after.strip_prefix("fleet.") else {
            return bad(
                "`${fleet` is followed by `.` and a value's name: `${fleet.<name>}`".to_owned(),
            );
        };
        let Some(end) = body.find('}') else {
            return bad("`${fleet.` is not closed by `}`".to_owned());
        };
        let name = &body[..end];
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            let shown: String = name.chars().take(40).collect();
            return bad(format!(
                "`{shown}` is not a value's name (lower-case letters, digits and underscores)"
            ));
        }
        if at > from {
            out.push(Piece::Text(&s[from..at]));
        }
        out.push(Piece::Name(name, at));
        i = at + 2 + "fleet.".len() + end + 1;
        from = i;
    }
    if from < s.len() {
        out.push(Piece::Text(&s[from..]));
    }
    Ok(out)
}

/// Every scalar of the tree with whether it is a mapping key, without recursion.
fn scalars(root: &Node, mut f: impl FnMut(&Node, &str, bool)) {
    let mut todo = vec![root];
    while let Some(n) = todo.pop() {
        match &n.value {
            Value::Scalar(s, _) => f(n, s, false),
            Value::Seq(list) => todo.extend(list.iter().rev()),
            Value::Map(e) => {
                for (k, v) in e.iter().rev() {
                    todo.push(v);
                    if let Value::Scalar(s, _) = &k.value {
                        f(k, s, true);
                    }
                }
            }
        }
    }
}

/// A placeholder of the stack file: its name and position.
struct Used {
    name: String,
    pos: Pos,
}

/// The stack file's placeholders, reporting malformed ones and those in keys.
fn placeholders(cx: &mut Cx, root: &Node) -> Vec<Used> {
    let mut used = Vec::new();
    scalars(root, |node, s, key| {
        if !s.contains("${") {
            return;
        }
        match scan(s) {
            Err(m) => cx.report(
                Code::FleetPlaceholderMalformed,
                pos_in(node, s, m.at),
                "",
                m.message,
                "write `${fleet.<name>}`, e.g. `${fleet.region}`",
            ),
            Ok(pieces) => {
                for p in pieces {
                    if let Piece::Name(name, at) = p {
                        if key {
                            cx.report(
                                Code::FleetPlaceholderMalformed,
                                pos_in(node, s, at),
                                "",
                                format!("`${{fleet.{name}}}` is in a key; placeholders are replaced in values only"),
                                "name keys literally; put the member's value in the value",
                            );
                        } else {
                            used.push(Used {
                                name: name.to_owned(),
                                pos: pos_in(node, s, at),
                            });
                        }
                    }
                }
            }
        }
    });
    used
}

/// Refuses placeholders in a stack file loaded without a fleet.
pub(super) fn refuse_templates(cx: &mut Cx, root: &Node) {
    for u in placeholders(cx, root) {
        cx.report(
            Code::FleetPlaceholderWithoutFleet,
            u.pos,
            "",
            format!("`${{fleet.{}}}` has no value: this stack file is not loaded by a fleet", u.name),
            "synthesize it through its fleet file (`hyperforge synth --fleet FILE`), or write the value",
        );
    }
}

/// Unknown placeholder names, and names some member has no value for.
fn check_placeholders(cx: &mut Cx, used: &[Used], root: &Node, members: &[FleetMember]) {
    let mut known: BTreeSet<String> = MEMBER_VALUES.iter().map(|s| (*s).to_owned()).collect();
    for r in root.get("regions").map(items).unwrap_or_default() {
        for (k, _) in str_map(r, "values") {
            known.insert(k);
        }
    }
    let mut checked = BTreeSet::new();
    for u in used {
        if !known.contains(&u.name) {
            let help = match suggest(&u.name, known.iter().map(String::as_str)) {
                Some(s) => format!("did you mean `${{fleet.{s}}}`?"),
                None => format!(
                    "a member's values: {}",
                    known
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            cx.report(
                Code::FleetPlaceholderUnknown,
                u.pos,
                "",
                format!("`${{fleet.{}}}` names no member value", u.name),
                help,
            );
            continue;
        }
        if !checked.insert(u.name.as_str()) {
            continue;
        }
        let lacking: Vec<&FleetMember> = members
            .iter()
            .filter(|m| m.value(&u.name).is_none())
            .collect();
        if let Some(first) = lacking.first() {
            let help = match u.name.as_str() {
                "model" => "list the fleet's `models`".to_owned(),
                "account" => "target accounts (`accounts:`), or use `${fleet.organizational_unit}`"
                    .to_owned(),
                "organizational_unit" => {
                    "target organizational units, or use `${fleet.account}`".to_owned()
                }
                "capacity_id" | "zone_id" => {
                    "give every region a `capacity_block` or a `training_plan`".to_owned()
                }
                name => format!("declare `{name}` under `values:` of every region"),
            };
            cx.report(
                Code::FleetPlaceholderNoValue,
                u.pos,
                "",
                format!(
                    "member `{}` (region {}) has no `{}` value ({} of {} members lack it)",
                    first.name,
                    first.region,
                    u.name,
                    lacking.len(),
                    members.len()
                ),
                help,
            );
        }
    }
}

/// `node` with each placeholder replaced by the member's value.
fn substitute(node: &Node, member: &FleetMember) -> Node {
    let value = match &node.value {
        Value::Scalar(s, plain) if s.contains("${") => match scan(s) {
            Ok(pieces) => Value::Scalar(
                pieces
                    .iter()
                    .map(|p| match p {
                        Piece::Text(t) => *t,
                        Piece::Name(n, _) => member.value(n).unwrap_or_default(),
                    })
                    .collect(),
                *plain,
            ),
            Err(_) => node.value.clone(),
        },
        Value::Scalar(..) => node.value.clone(),
        Value::Seq(list) => Value::Seq(list.iter().map(|n| substitute(n, member)).collect()),
        Value::Map(e) => Value::Map(
            e.iter()
                .map(|(k, v)| (k.clone(), substitute(v, member)))
                .collect(),
        ),
    };
    Node {
        pos: node.pos,
        value,
    }
}

/// The fleet's own diagnostics (`Fleet::validate_matrix`) at their places in the fleet file.
fn locate_matrix(root: &Node, found: Diagnostics, origin: &str) -> Diagnostics {
    if found.is_empty() {
        return found;
    }
    // Every value of the file: its dotted key (lists add nothing), its text, its position.
    let mut values: Vec<(String, String, Pos)> = Vec::new();
    let mut todo: Vec<(String, &Node)> = vec![(String::new(), root)];
    while let Some((prefix, n)) = todo.pop() {
        match &n.value {
            Value::Scalar(s, _) => values.push((prefix, s.clone(), n.pos)),
            Value::Seq(list) => todo.extend(list.iter().rev().map(|v| (prefix.clone(), v))),
            Value::Map(e) => {
                for (k, v) in e.iter().rev() {
                    let name = k.as_str().unwrap_or_default();
                    let key = super::child(&prefix, name);
                    values.push((key.clone(), String::new(), v.pos));
                    // A key the fleet quotes (a region's value name).
                    if prefix.ends_with("values") {
                        values.push((key.clone(), name.to_owned(), k.pos));
                    }
                    todo.push((key, v));
                }
            }
        }
    }
    values.sort_by_key(|(_, _, p)| *p);
    const BY_WORDS: &[(&str, &str)] = &[
        ("maximum concurrency", "preferences.max_concurrent"),
        ("failure tolerance", "preferences.failure_tolerance"),
        ("administration role", "administration_role_arn"),
        ("execution role", "execution_role_name"),
        ("self-managed fleet targets", "organizational_units"),
        ("service-managed fleet targets", "accounts"),
        ("region order", "preferences.region_order"),
        ("members", "regions"),
        ("fleet name", "fleet"),
    ];
    let fallback = root.get("fleet").map_or(root.pos, |n| n.pos);
    // The positions inside region entry `i` of the file (a diagnostic naming `regions[i]`
    // points there, never at another region's equal value).
    let region_span = |i: usize| -> Option<(Pos, Pos)> {
        let regions = match &root.get("regions")?.value {
            Value::Seq(list) => list,
            _ => return None,
        };
        let start = regions.get(i)?.pos;
        let end = regions.get(i + 1).map_or(
            Pos {
                line: usize::MAX,
                col: usize::MAX,
            },
            |n| n.pos,
        );
        Some((start, end))
    };
    let mut out = Diagnostics::new();
    for mut d in found {
        let span = d
            .field
            .as_deref()
            .and_then(|f| f.strip_prefix("regions["))
            .and_then(|f| f.strip_suffix(']'))
            .and_then(|i| i.parse::<usize>().ok())
            .and_then(region_span);
        let in_span = |p: &Pos| span.is_none_or(|(start, end)| *p >= start && *p < end);
        let quoted = values
            .iter()
            .filter(|(_, _, p)| in_span(p))
            .filter(|(_, t, _)| !t.is_empty() && d.message.contains(&format!("`{t}`")))
            .max_by_key(|(_, t, p)| (t.len(), *p))
            .map(|(_, _, p)| *p);
        let by_words = || {
            BY_WORDS
                .iter()
                .filter(|(words, _)| d.message.contains(words))
                .find_map(|(_, key)| values.iter().find(|(k, _, _)| k.as_str() == *key))
                .map(|(_, _, p)| *p)
        };
        let pos = quoted
            .or_else(by_words)
            .or(span.map(|(start, _)| start))
            .unwrap_or(fallback);
        d.message = format!("[{}] {}", d.path, d.message);
        d.path = format!("{origin}:{}:{}", pos.line, pos.col);
        out.push(d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(s: &str) -> Vec<String> {
        scan(s)
            .ok()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|p| match p {
                Piece::Name(n, _) => Some(n.to_owned()),
                Piece::Text(_) => None,
            })
            .collect()
    }

    #[test]
    fn placeholders_are_found_and_others_left() {
        assert_eq!(
            names("${fleet.member}-weights-${fleet.region}"),
            ["member", "region"]
        );
        assert!(names("echo ${HOME} $x {y}").is_empty());
        for bad in [
            "${fleet.Region}",
            "${fleet.region",
            "${fleet}",
            "${ fleet.x}",
            "${fleet.}",
        ] {
            assert!(scan(bad).is_err(), "{bad}");
        }
        let member =
            crate::fleet::Fleet::new("f", |m| crate::app::Stack::new(m.stack(), m.region()))
                .region(crate::fleet::FleetRegion::new("us-east-1"))
                .account("111122223333")
                .members()
                .remove(0);
        let node = Node {
            pos: Pos { line: 3, col: 9 },
            value: Value::Scalar("a-${fleet.region}-b ${X}".into(), true),
        };
        assert_eq!(
            substitute(&node, &member).value,
            Value::Scalar("a-us-east-1-b ${X}".into(), true)
        );
        assert_eq!(
            pos_in(&node, "a-${fleet.region}", 2),
            Pos { line: 3, col: 11 }
        );
    }
}
