//! Declarative stack files: the committed reference files synthesize byte-identical output to
//! the reference stacks written in Rust; every fault is reported with its code and
//! `file:line:column`; the committed JSON Schema is fresh; nothing panics on any input.

use hyperforge::constructs::stack_file::{KindVisitor, Shape, StackFileConstruct, Ty};
use hyperforge::constructs::{visit_kind, Construct, KINDS, STACK_FILE_SHAPES};
use hyperforge::stackfile::{json_schema, load_file, load_str};
use hyperforge::{App, Code, Diagnostics};
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn assert_same_output(from_file: &App, from_rust: &App) {
    assert_eq!(from_file.tags(), from_rust.tags(), "app tags");
    let a = from_file.synth().unwrap_or_else(|d| panic!("{d}"));
    let b = from_rust.synth().unwrap_or_else(|d| panic!("{d}"));
    let names_a: Vec<&String> = a.files().keys().collect();
    let names_b: Vec<&String> = b.files().keys().collect();
    assert_eq!(names_a, names_b, "the assemblies hold different files");
    for (name, bytes) in b.files() {
        assert!(
            a.files()[name] == *bytes,
            "{name} differs between the stack file and the Rust reference"
        );
    }
    assert_eq!(a.manifest(), b.manifest());
    assert_eq!(a.warnings(), b.warnings());
}

#[test]
fn hyperpod_stack_file_matches_the_rust_reference() {
    let app = load_file(&repo("stacks/kimi-k3-hyperpod.yaml")).unwrap_or_else(|d| panic!("{d}"));
    assert_same_output(&app, &crate::reference::kimi_k3_hyperpod());
}

#[test]
fn eks_stack_file_matches_the_rust_reference() {
    let app = load_file(&repo("stacks/kimi-k3-eks.yaml")).unwrap_or_else(|d| panic!("{d}"));
    assert_same_output(&app, &crate::reference::kimi_k3_eks());
}

#[test]
fn karpenter_variant_stack_file_matches_the_rust_reference() {
    let app =
        load_file(&repo("stacks/kimi-k3-eks-karpenter.yaml")).unwrap_or_else(|d| panic!("{d}"));
    assert_same_output(&app, &crate::reference::kimi_k3_eks_karpenter());
}

#[test]
fn stack_files_point_at_the_committed_schema() {
    for file in [
        "stacks/kimi-k3-hyperpod.yaml",
        "stacks/kimi-k3-eks.yaml",
        "stacks/kimi-k3-eks-karpenter.yaml",
    ] {
        assert!(
            read(file)
                .starts_with("# yaml-language-server: $schema=../docs/stack-file.schema.json\n"),
            "{file}"
        );
    }
}

#[test]
fn schema_is_up_to_date() {
    let path = repo("docs/stack-file.schema.json");
    let expected = serde_json::to_string_pretty(&json_schema()).unwrap() + "\n";
    if std::env::var_os("HYPERFORGE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &expected).expect("write docs/stack-file.schema.json");
        return;
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "docs/stack-file.schema.json is stale: run `HYPERFORGE_BLESS=1 cargo test --test it stackfile::schema_is_up_to_date`"
    );
}

#[test]
fn schema_accepts_the_reference_files_shape() {
    // The schema's top level names exactly the fields the loader accepts.
    let schema = json_schema();
    let props = schema["properties"].as_object().unwrap();
    for key in [
        "stack",
        "region",
        "description",
        "tags",
        "app_tags",
        "stages",
    ] {
        assert!(props.contains_key(key), "{key}");
    }
    assert_eq!(schema["additionalProperties"], false);
    let constructs = schema["$defs"]["Construct"]["oneOf"].as_array().unwrap();
    // One shape per registered construct.
    assert_eq!(constructs.len(), hyperforge::constructs::KINDS.len());
}

/// Returns the kind and shape of the construct type the registry hands over.
struct Probe;

impl KindVisitor for Probe {
    type Out = (&'static str, &'static Shape);

    fn visit<C: StackFileConstruct>(self) -> Self::Out
    where
        C::Handle: 'static,
    {
        (<C as Construct>::KIND, C::SHAPE)
    }
}

#[test]
fn every_registered_construct_kind_has_a_shape_and_a_builder() {
    assert_eq!(STACK_FILE_SHAPES.len(), KINDS.len());
    for (kind, listed) in KINDS.iter().zip(STACK_FILE_SHAPES) {
        // The registry dispatches the kind to a construct type with a stack-file builder.
        let (visited, shape) = visit_kind(kind, Probe).unwrap_or_else(|| panic!("{kind}"));
        assert_eq!(visited, *kind);
        assert!(std::ptr::eq(shape, *listed), "{kind}: the listed shape");
        // The key naming the kind holds the id: the shape's first, required field.
        assert_eq!(shape.name, *kind);
        let id = shape.fields.first().unwrap_or_else(|| panic!("{kind}"));
        assert_eq!(
            (id.name, id.required),
            (*kind, true),
            "{kind}: the id field"
        );
        let mut names: Vec<&str> = shape.fields.iter().map(|f| f.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), shape.fields.len(), "{kind}: duplicate fields");
    }
    assert!(visit_kind("no_such_kind", Probe).is_none());
}

/// Marks the fields of `shape` that `value` sets, recursively.
fn mark_fields(
    value: &serde_yaml::Value,
    shape: &'static Shape,
    seen: &mut BTreeSet<(&'static str, &'static str)>,
) {
    let Some(map) = value.as_mapping() else {
        return;
    };
    for (key, v) in map {
        let field = key
            .as_str()
            .and_then(|k| shape.field(k))
            .unwrap_or_else(|| panic!("{key:?} is not a field of {}", shape.name));
        seen.insert((shape.name, field.name));
        match field.ty {
            Ty::Obj(s) => mark_fields(v, s, seen),
            Ty::List(s) => {
                for item in v.as_sequence().into_iter().flatten() {
                    mark_fields(item, s, seen);
                }
            }
            _ => {}
        }
    }
}

/// Every field of `shape` and of the objects below it.
fn declared_fields(shape: &'static Shape, out: &mut BTreeSet<(&'static str, &'static str)>) {
    for f in shape.fields {
        if out.insert((shape.name, f.name)) {
            if let Ty::Obj(s) | Ty::List(s) = f.ty {
                declared_fields(s, out);
            }
        }
    }
}

/// The shape of a stack file's construct: the first key naming a kind holds the id.
fn construct_shape(c: &serde_yaml::Value) -> &'static Shape {
    c.as_mapping()
        .into_iter()
        .flatten()
        .find_map(|(k, _)| {
            STACK_FILE_SHAPES
                .iter()
                .copied()
                .find(|s| k.as_str() == Some(s.name))
        })
        .unwrap_or_else(|| panic!("no kind in {c:?}"))
}

#[test]
fn every_declared_field_is_built() {
    // The fixture sets every declared field of every construct at least once ...
    const FILE: &str = "tests/it/stackfile_every_field.yaml";
    let text = read(FILE);
    let tree: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let mut seen = BTreeSet::new();
    for stage in tree["stages"].as_sequence().unwrap() {
        for c in stage["constructs"].as_sequence().unwrap() {
            mark_fields(c, construct_shape(c), &mut seen);
        }
    }
    let mut declared = BTreeSet::new();
    for shape in STACK_FILE_SHAPES {
        declared_fields(shape, &mut declared);
    }
    let missing: Vec<_> = declared.difference(&seen).collect();
    assert!(missing.is_empty(), "{FILE} does not set {missing:?}");
    // ... and loading it builds every construct: a builder that returns without reading a
    // field the (structurally valid) file sets is an internal error (HF0902). Builders' own
    // rules may still refuse the fixture's values; nothing else may.
    if let Err(ds) = load_str(FILE, &text) {
        for d in &ds {
            assert!(
                !format!("{:?}", d.code).starts_with("StackFile") && d.code != Code::InternalError,
                "the fixture is not a valid stack file, or a builder left a field unread: {d}"
            );
        }
    }
}

/// Adds each optional field `value` (an object of `shape`) leaves out that declares a default,
/// with that default, in the objects and lists of objects it holds too; returns how many.
fn add_defaults(value: &mut serde_yaml::Value, shape: &Shape) -> usize {
    let Some(map) = value.as_mapping_mut() else {
        return 0;
    };
    let mut added = 0;
    for f in shape.fields {
        match (map.get_mut(f.name), f.ty, f.default) {
            (Some(v), Ty::Obj(inner), _) => added += add_defaults(v, inner),
            (Some(v), Ty::List(inner), _) => {
                for item in v.as_sequence_mut().into_iter().flatten() {
                    added += add_defaults(item, inner);
                }
            }
            (None, ty, Some(default)) => {
                let written = match ty {
                    Ty::Str | Ty::Enum(_) => serde_yaml::Value::String(default.to_owned()),
                    _ => serde_yaml::from_str(default).unwrap(),
                };
                map.insert(f.name.into(), written);
                added += 1;
            }
            _ => {}
        }
    }
    added
}

/// A default the schema states is the one the builder uses: in every reference stack file,
/// writing out every default the file leaves implicit (in each construct and the objects it
/// holds) synthesizes the same assembly, byte for byte.
#[test]
fn writing_out_a_fields_default_changes_nothing() {
    let mut added = 0;
    for path in [
        "stacks/kimi-k3-hyperpod.yaml",
        "stacks/kimi-k3-eks.yaml",
        "stacks/kimi-k3-eks-karpenter.yaml",
    ] {
        let text = read(path);
        let mut tree: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        for stage in tree["stages"].as_sequence_mut().unwrap() {
            for c in stage
                .get_mut("constructs")
                .and_then(serde_yaml::Value::as_sequence_mut)
                .into_iter()
                .flatten()
            {
                let shape = construct_shape(c);
                added += add_defaults(c, shape);
            }
        }
        let explicit = serde_yaml::to_string(&tree).unwrap();
        let a = load_str(path, &text).unwrap_or_else(|d| panic!("{d}"));
        let b = load_str(path, &explicit)
            .unwrap_or_else(|d| panic!("{path} with its defaults written out:\n{d}"));
        let a = a.synth().unwrap_or_else(|d| panic!("{d}"));
        let b = b.synth().unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(
            a.files().keys().collect::<Vec<_>>(),
            b.files().keys().collect::<Vec<_>>(),
            "{path}"
        );
        for (name, bytes) in a.files() {
            assert!(
                b.files()[name] == *bytes,
                "{path}: {name} changes when the defaults are written out"
            );
        }
        assert_eq!(a.warnings(), b.warnings(), "{path}");
    }
    assert!(added >= 20, "only {added} defaults written out");
}

// ---------------------------------------------------------------------------------------------
// Faults.

const ORIGIN: &str = "stacks/test.yaml";

fn load_err(text: &str) -> Diagnostics {
    match load_str(ORIGIN, text) {
        Ok(_) => panic!("expected diagnostics for:\n{text}"),
        Err(d) => d,
    }
}

fn has(ds: &Diagnostics, code: Code, line: usize, col: usize) -> bool {
    let path = format!("{ORIGIN}:{line}:{col}");
    ds.iter().any(|d| d.code == code && d.path == path)
}

fn assert_has(ds: &Diagnostics, code: Code, line: usize, col: usize) {
    assert!(
        has(ds, code, line, col),
        "expected {code} at {ORIGIN}:{line}:{col}, got:\n{ds}"
    );
}

const MINIMAL: &str = "\
stack: demo
region: us-west-2
stages:
  - name: foundation
    kind: cloudformation
    constructs:
      - network: Network
        cidr: 10.0.0.0/16
";

#[test]
fn a_minimal_file_loads() {
    let app = load_str(ORIGIN, MINIMAL).unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(app.stacks()[0].name(), "demo");
}

#[test]
fn unknown_field_suggests_the_closest_name() {
    let ds = load_err(&MINIMAL.replace("cidr:", "cdir:"));
    assert_has(&ds, Code::StackFileUnknownField, 8, 9);
    let d = ds.with_code(Code::StackFileUnknownField).next().unwrap();
    assert!(d.help.contains("did you mean `cidr`?"), "{d}");
    assert!(d.message.contains("stages[0]"), "{d}");
}

#[test]
fn wrong_type_is_reported_at_the_value() {
    let text = MINIMAL.replace("cidr: 10.0.0.0/16", "availability_zones: two");
    let ds = load_err(&text);
    assert_has(&ds, Code::StackFileWrongType, 8, 29);
    let d = ds.iter().next().unwrap();
    assert!(
        d.message.contains("whole number") && d.message.contains("`two`"),
        "{d}"
    );
}

#[test]
fn missing_required_field_is_reported_at_the_object() {
    let ds = load_err(&MINIMAL.replace("region: us-west-2\n", ""));
    assert_has(&ds, Code::StackFileMissingField, 1, 1);
    assert!(ds.iter().next().unwrap().message.contains("`region`"));
}

#[test]
fn builder_rule_points_at_the_line_that_set_the_value() {
    let ds = load_err(&MINIMAL.replace("10.0.0.0/16", "10.0.0.0/33"));
    assert_has(&ds, Code::InvalidCidr, 8, 15);
    let d = ds.with_code(Code::InvalidCidr).next().unwrap();
    assert!(d.message.starts_with("[demo/Network] "), "{d}");
}

#[test]
fn model_rule_on_the_eks_path_points_at_the_field_it_is_about() {
    // The message does not quote the value; the diagnostic names its field.
    let text = read("stacks/kimi-k3-eks.yaml").replace(
        "          served_model_name: Kimi-K3\n",
        "          served_model_name: Kimi-K3\n          max_model_len: 9000000\n",
    );
    let line = text
        .lines()
        .position(|l| l.contains("max_model_len: 9000000"))
        .expect("inserted")
        + 1;
    let ds = match load_str(ORIGIN, &text) {
        Ok(_) => panic!("a context beyond the model's is refused"),
        Err(d) => d,
    };
    assert_has(&ds, Code::ContextLengthExceedsModel, line, 26);
}

#[test]
fn a_nul_byte_is_refused_and_a_byte_order_mark_accepted() {
    let ds = load_err(&MINIMAL.replace("region: us-west-2", "region: us-we\0st-2"));
    assert_has(&ds, Code::StackFileNotYaml, 2, 14);
    let app = load_str(ORIGIN, &format!("\u{feff}{MINIMAL}")).unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(app.stacks()[0].region(), "us-west-2");
}

#[test]
fn a_stack_without_stages_is_refused() {
    let ds = load_err("stack: demo\nregion: us-west-2\nstages: []\n");
    assert!(ds.iter().any(|d| d.code == Code::NoStages), "{ds}");
}

#[test]
fn stack_level_rule_points_at_the_region() {
    let ds = load_err(&MINIMAL.replace("us-west-2", "us-middle-9"));
    assert_has(&ds, Code::InvalidRegion, 2, 9);
    assert!(ds.iter().next().unwrap().message.starts_with("[demo] "));
}

#[test]
fn builder_rule_in_an_instance_group_points_at_its_field() {
    // Two instances where the training plan reserves one: in the declared range of `count`,
    // refused by the capacity rule.
    let text = read("stacks/kimi-k3-hyperpod.yaml")
        .replace("count: 1", "count: 2")
        .replace(
            "az_id: usw2-az2\n              window:",
            "az_id: usw2-az2\n              reserved_instances: 1\n              window:",
        );
    let ds = load_err(&text);
    let d = ds
        .with_code(Code::InstanceCountAboveReserved)
        .next()
        .expect("HF0314");
    assert!(
        d.message
            .starts_with("[kimi-k3-hyperpod/HyperPod/p6-b300] "),
        "{d}"
    );
    let line = text.lines().position(|l| l.contains("count: 2")).unwrap() + 1;
    assert_eq!(d.path, format!("{ORIGIN}:{line}:20"));
}

#[test]
fn references_are_checked_by_id_and_kind() {
    let text = read("stacks/kimi-k3-eks.yaml")
        .replace("        vpc: Network\n", "        vpc: Netwrk\n")
        .replace("  - name: aws-load-balancer-controller\n    kind: helm\n    preset: aws-load-balancer-controller\n    cluster: Eks\n", "  - name: aws-load-balancer-controller\n    kind: helm\n    preset: aws-load-balancer-controller\n    cluster: Network\n");
    let ds = load_err(&text);
    let unknown = ds
        .with_code(Code::StackFileUnknownReference)
        .next()
        .expect("HF0707");
    assert!(
        unknown.help.contains("did you mean `Network`?"),
        "{unknown}"
    );
    let kind = ds
        .with_code(Code::StackFileWrongReferenceKind)
        .next()
        .expect("HF0708");
    assert!(kind.message.contains("EKS cluster"), "{kind}");
}

#[test]
fn empty_file_is_refused() {
    for text in ["", "\n\n", "# only a comment\n", "~\n"] {
        let ds = load_err(text);
        assert_has(&ds, Code::StackFileEmpty, 1, 1);
    }
}

#[test]
fn non_yaml_file_is_refused() {
    let ds = load_err("stack: demo\nregion: [us-west-2\nstages: {\n");
    assert_eq!(ds.len(), 1, "{ds}");
    assert_eq!(ds.iter().next().unwrap().code, Code::StackFileNotYaml);
    assert!(ds
        .iter()
        .next()
        .unwrap()
        .path
        .starts_with(&format!("{ORIGIN}:")));
    let ds = load_err("just some words, not a stack\n");
    assert_has(&ds, Code::StackFileNotYaml, 1, 1);

    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("binary.yaml");
    std::fs::write(&binary, b"stack: demo\nregion: \xff\xfe\n").unwrap();
    let ds = load_file(&binary).unwrap_err();
    let d = ds.iter().next().unwrap();
    assert_eq!(d.code, Code::StackFileNotYaml);
    assert!(d.path.ends_with("binary.yaml:2:9"), "{d}");
}

#[test]
fn ten_megabyte_file_is_refused_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.yaml");
    let line = "# padding padding padding padding padding padding padding padding\n";
    let text = line.repeat(10 * 1024 * 1024 / line.len() + 1);
    std::fs::write(&path, &text).unwrap();
    let start = Instant::now();
    let ds = load_file(&path).unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    let d = ds.iter().next().unwrap();
    assert_eq!(d.code, Code::StackFileTooLarge);
    assert!(d.path.ends_with("huge.yaml:1:1"), "{d}");
    assert!(d.message.contains("at most 1048576 bytes"), "{d}");
    // The text API refuses it too, before parsing.
    let start = Instant::now();
    let ds = load_str(ORIGIN, &text).unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(1));
    assert_has(&ds, Code::StackFileTooLarge, 1, 1);
}

#[test]
fn missing_file_is_a_diagnostic() {
    let ds = load_file(Path::new("/nonexistent/stack.yaml")).unwrap_err();
    assert_eq!(ds.iter().next().unwrap().code, Code::StackFileUnreadable);
}

#[test]
fn several_faults_are_reported_in_one_run() {
    let text = "\
stack: demo
region: us-west-2
colour: blue
stages:
  - name: foundation
    kind: cloudformation
    constructs:
      - network: Network
        availability_zones: lots
        nat_gateway: one
      - cluster_security_group: Sg
        vpc: Nope
      - eks_cluster: Eks
        subnets: Sg
  - name: charts
    kind: helm
    preset: nvidia-plugin
  - name: later
    kind: terraform
";
    let ds = load_err(text);
    assert_has(&ds, Code::StackFileUnknownField, 3, 1);
    assert_has(&ds, Code::StackFileWrongType, 9, 29);
    assert_has(&ds, Code::StackFileUnknownField, 10, 9);
    assert_has(&ds, Code::StackFileUnknownReference, 12, 14);
    assert_has(&ds, Code::StackFileMissingField, 13, 9); // eks_cluster without `name`
    assert_has(&ds, Code::StackFileWrongReferenceKind, 14, 18);
    assert_has(&ds, Code::StackFileInvalidValue, 17, 13);
    assert_has(&ds, Code::StackFileInvalidValue, 19, 11);
    let help = ds
        .iter()
        .find(|d| d.path == format!("{ORIGIN}:10:9"))
        .unwrap()
        .help
        .clone();
    assert!(help.contains("`nat_gateways`"), "{help}");
    assert_eq!(ds.len(), 8, "{ds}");
}

#[test]
fn several_builder_faults_are_reported_in_one_run() {
    let text = read("stacks/kimi-k3-eks.yaml")
        .replace(
            "        gpu_subnet:\n",
            "        cidr: 10.0.0.0/33\n        flow_log_retention_days: 2\n        gpu_subnet:\n",
        )
        .replace(
            "reservation_id: cr-0123456789abcdef0",
            "reservation_id: cr-nope",
        );
    let ds = load_err(&text);
    let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    assert_has(&ds, Code::InvalidCidr, line_of("cidr: 10.0.0.0/33"), 15);
    assert_has(
        &ds,
        Code::InvalidLogRetention,
        line_of("flow_log_retention_days: 2"),
        34,
    );
    assert_has(
        &ds,
        Code::MalformedCapacityReservationId,
        line_of("cr-nope"),
        27,
    );
    for d in &ds {
        assert!(d.path.starts_with(ORIGIN), "{d}");
        assert!(d.message.starts_with("[kimi-k3-eks/"), "{d}");
    }
}

// ---------------------------------------------------------------------------------------------
// No input panics.

fn no_panic(text: &str) {
    // A panic fails the test; either outcome is fine.
    let _ = load_str(ORIGIN, text);
}

fn arb_yaml() -> impl Strategy<Value = serde_yaml::Value> {
    let leaf = prop_oneof![
        Just(serde_yaml::Value::Null),
        any::<bool>().prop_map(serde_yaml::Value::Bool),
        any::<i64>().prop_map(|n| serde_yaml::Value::Number(n.into())),
        any::<f64>().prop_map(|n| serde_yaml::Value::Number(n.into())),
        "[a-z_.]{0,12}".prop_map(serde_yaml::Value::String),
        prop::sample::select(vec![
            "stack",
            "region",
            "stages",
            "name",
            "kind",
            "cloudformation",
            "helm",
            "upload",
            "kubernetes",
            "constructs",
            "network",
            "Network",
            "Network.vpc",
            "eks_cluster",
            "Eks",
            "cidr",
            "10.0.0.0/16",
            "preset",
            "karpenter",
            "server",
            "model",
        ])
        .prop_map(|s| serde_yaml::Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_yaml::Value::Sequence),
            prop::collection::vec(("[a-z_]{1,10}", inner), 0..6).prop_map(|entries| {
                serde_yaml::Value::Mapping(
                    entries
                        .into_iter()
                        .map(|(k, v)| (serde_yaml::Value::String(k), v))
                        .collect(),
                )
            }),
        ]
    })
}

#[derive(Clone, Debug)]
enum Mutation {
    Delete(usize),
    Duplicate(usize),
    Replace(usize, String),
}

fn mutate(text: &str, mutations: &[Mutation]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for m in mutations {
        if lines.is_empty() {
            break;
        }
        match m {
            Mutation::Delete(i) => {
                lines.remove(i % lines.len());
            }
            Mutation::Duplicate(i) => {
                let i = i % lines.len();
                let l = lines[i].clone();
                lines.insert(i, l);
            }
            Mutation::Replace(i, scalar) => {
                let i = i % lines.len();
                if let Some(colon) = lines[i].find(": ") {
                    lines[i] = format!("{}: {scalar}", &lines[i][..colon]);
                } else if let Some(dash) = lines[i].find("- ") {
                    lines[i] = format!("{}- {scalar}", &lines[i][..dash]);
                }
            }
        }
    }
    lines.join("\n")
}

fn arb_mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Delete),
        any::<usize>().prop_map(Mutation::Duplicate),
        (
            any::<usize>(),
            prop_oneof![
                Just("".to_owned()),
                Just("~".to_owned()),
                Just("[]".to_owned()),
                Just("{}".to_owned()),
                Just("-1".to_owned()),
                Just("99999999999999999999".to_owned()),
                Just("Network".to_owned()),
                Just("Eks".to_owned()),
                Just("Network.gpu_subnet".to_owned()),
                Just("true".to_owned()),
                "[ -~]{0,16}",
            ]
        )
            .prop_map(|(i, s)| Mutation::Replace(i, s)),
    ]
}

/// Cases per property; three properties plus the mutation one run 2,000 cases in all.
const CASES: u32 = 500;

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_strings_never_panic(text in "\\PC{0,300}") {
        no_panic(&text);
    }

    #[test]
    fn yaml_ish_strings_never_panic(text in "([a-z_:\\-\\[\\]{},'\"&*!#|>%@ ]|\n  ?){0,200}") {
        no_panic(&text);
    }

    #[test]
    fn arbitrary_yaml_values_never_panic(value in arb_yaml()) {
        if let Ok(text) = serde_yaml::to_string(&value) {
            no_panic(&text);
        }
    }

    #[test]
    fn mutated_reference_files_never_panic(
        eks in any::<bool>(),
        mutations in prop::collection::vec(arb_mutation(), 1..4),
    ) {
        let file = if eks { EKS_FILE } else { HYPERPOD_FILE };
        no_panic(&mutate(file, &mutations));
    }
}

const EKS_FILE: &str = include_str!("../../stacks/kimi-k3-eks.yaml");
const HYPERPOD_FILE: &str = include_str!("../../stacks/kimi-k3-hyperpod.yaml");

#[test]
fn deep_nesting_does_not_overflow() {
    no_panic(&"[".repeat(200_000));
    no_panic(&"- ".repeat(200_000));
    no_panic(&format!("stack: {}", "{a: ".repeat(100_000)));
    let mut nested = String::new();
    for depth in 0..1_000 {
        nested.push_str(&" ".repeat(depth));
        nested.push_str("a:\n");
    }
    no_panic(&nested);
}

const PURCHASE: &str = "\
stack: buy
region: us-west-2
stages:
  - name: foundation
    kind: cloudformation
    constructs:
      - network: Network
        gpu_subnet: { az_id: usw2-az2 }
      - eks_cluster: Eks
        name: buy
        subnets: Network.private_subnets
        vpc: Network
      - managed_node_group: Gpu
        preset: gpu
        cluster: Eks
        instance_type: p6-b300.48xlarge
        subnets: Network.gpu_subnet
        capacity_block:
          az_id: usw2-az2
          instances: 1
          purchase:
            offering_id: cb-0123456789abcdef0
";

#[test]
fn a_capacity_block_purchase_needs_the_acknowledgement_in_the_file_too() {
    let ds = load_err(PURCHASE);
    let d = ds
        .iter()
        .find(|d| d.code == Code::CapacityBlockPurchaseWithoutOptIn)
        .unwrap_or_else(|| panic!("no HF0327 in:\n{ds}"));
    assert!(d.path.starts_with("stacks/test.yaml:"), "{d}");
    let text = PURCHASE.to_owned() + "            acknowledge_non_refundable: true\n";
    let app = load_str(ORIGIN, &text).unwrap_or_else(|d| panic!("{d}"));
    let assembly = app.synth().unwrap_or_else(|d| panic!("{d}"));
    assert!(assembly
        .text("buy/terraform/01-foundation/main.tf.json")
        .unwrap()
        .contains("aws_ec2_capacity_block_reservation"));
}

// ---------------------------------------------------------------------------------------------
// Many faults: described up to a bound, counted beyond it, in time linear in the file.

/// `count` copies of `construct` in one stage.
fn many_constructs(construct: &str, count: usize) -> String {
    let mut text = String::from(
        "stack: many\nregion: us-west-2\nstages:\n  - name: a\n    kind: cloudformation\n    constructs:\n",
    );
    for _ in 0..count {
        text.push_str(construct);
    }
    assert!(text.len() < 1024 * 1024, "{} bytes", text.len());
    text
}

fn assert_bounded_report(ds: &Diagnostics, took: Duration) {
    // Generous for a debug build on a loaded machine: describing every fault (a suggestion
    // each) or locating each builder fault by scanning every construct took seconds in release.
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(ds.len(), 101, "{ds}");
    let last = ds.iter().last().unwrap();
    assert_eq!(last.code, Code::StackFileTooManyProblems, "{last}");
    assert!(last.message.contains("more problems"), "{last}");
}

#[test]
fn a_file_of_many_unknown_constructs_reports_the_first_hundred_quickly() {
    let text = many_constructs("      - netwrk: N\n", 45_000);
    let start = Instant::now();
    let ds = load_err(&text);
    assert_bounded_report(&ds, start.elapsed());
    assert!(ds
        .iter()
        .next()
        .unwrap()
        .help
        .contains("did you mean `network`?"));
}

#[test]
fn many_constructs_with_builder_faults_are_located_quickly() {
    // Every construct builds and is then refused by validation (the same id 20,000 times).
    let text = many_constructs("      - network: N\n", 20_000);
    let start = Instant::now();
    let ds = load_err(&text);
    assert_bounded_report(&ds, start.elapsed());
}

#[test]
fn a_huge_wrong_value_is_refused_quickly() {
    // No suggestion is computed for a value far longer than every allowed one (the edit
    // distance to each took its length times theirs: most of a second in release).
    let value = "nvidia-device".repeat(60_000);
    let text = format!(
        "stack: s\nregion: us-west-2\nstages:\n  - name: a\n    kind: helm\n    preset: {value}\n"
    );
    let start = Instant::now();
    let ds = load_err(&text);
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert_has(&ds, Code::StackFileInvalidValue, 6, 13);
}

/// A diagnostic about an acknowledgement points at the acknowledgement: an empty reason at
/// its `reason`, an error code at its `code`, one that covers nothing at its `path`; all at once.
#[test]
fn acknowledgement_faults_point_at_the_acknowledgement() {
    let text = format!(
        "{MINIMAL}acknowledge:\n  - path: Network\n    code: HF0506\n    reason: \"\"\n  - path: Network\n    code: HF0201\n    reason: it is fine\n  - path: Nowhere\n    code: HF0506\n    reason: it is fine\n"
    );
    let ds = match load_str(ORIGIN, &text).map(|app| app.synth()) {
        Err(ds) | Ok(Err(ds)) => ds,
        Ok(Ok(_)) => panic!("synthesized"),
    };
    assert_has(&ds, Code::AcknowledgedError, 12, 13);
    assert_has(&ds, Code::AcknowledgedError, 14, 11);
    assert_has(&ds, Code::UnusedAcknowledgement, 16, 11);
}
