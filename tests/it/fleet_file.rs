//! Fleet files: loading, `${fleet.<name>}` substitution, every error class at its
//! `file:line:col`, the reference fleet file against the Rust reference fleet, the schema, and
//! `hyperforge synth --fleet` / `validate --fleet` end to end.

use hyperforge::fleet::FleetOptions;
use hyperforge::stackfile::fleet::{json_schema, load_file, load_file_in};
use hyperforge::stackfile::load_str;
use hyperforge::{Code, Diagnostics};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A small valid stack file using placeholders (no GPUs: quick to build).
const STACK: &str = "\
stack: ${fleet.stack}
region: ${fleet.region}
tags:
  tier: ${fleet.tier}
  owner: team-${fleet.account}
stages:
  - name: foundation
    kind: cloudformation
    constructs:
      - network: Network
";

const FLEET: &str = "\
fleet: demo
stack_file: stack.yaml
accounts: [\"111122223333\"]
regions:
  - region: us-west-2
    values: { tier: gold }
  - region: us-east-1
    values: { tier: silver }
";

/// A directory holding `fleet.yaml` and `stack.yaml`.
fn project(fleet: &str, stack: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("temp dir");
    std::fs::write(tmp.path().join("fleet.yaml"), fleet).unwrap();
    std::fs::write(tmp.path().join("stack.yaml"), stack).unwrap();
    let path = tmp.path().join("fleet.yaml");
    (tmp, path)
}

fn load_err(fleet: &str, stack: &str) -> Diagnostics {
    let (_tmp, path) = project(fleet, stack);
    match load_file(&path) {
        Ok(_) => panic!("loaded:\n{fleet}"),
        Err(ds) => ds,
    }
}

/// The one diagnostic of `code`, asserting it is at `file:line:col`.
fn at(ds: &Diagnostics, code: Code, file: &str, line: usize, col: usize) -> String {
    let found: Vec<_> = ds.iter().filter(|d| d.code == code).collect();
    assert_eq!(found.len(), 1, "{code:?} once in:\n{ds}");
    let d = found[0];
    assert!(
        d.path.ends_with(&format!("{file}:{line}:{col}")),
        "{code:?} at {file}:{line}:{col}, found {}:\n{ds}",
        d.path
    );
    format!("{} {}", d.message, d.help)
}

#[test]
fn members_get_their_values() {
    let (_tmp, path) = project(FLEET, STACK);
    let fleet = load_file(&path).unwrap_or_else(|d| panic!("{d}"));
    let members = fleet.members();
    assert_eq!(members.len(), 2);
    for (member, tier) in members.iter().zip(["gold", "silver"]) {
        let app = fleet.describe(member).unwrap_or_else(|d| panic!("{d}"));
        let stack = &app.stacks()[0];
        assert_eq!(stack.name(), member.stack());
        assert_eq!(stack.name(), "demo");
        assert_eq!(stack.region(), member.region());
        assert_eq!(stack.tags()["tier"], tier);
        assert_eq!(stack.tags()["owner"], "team-111122223333");
    }
    assert_eq!(members[0].name(), "demo-us-west-2");
    let (files, output) = fleet
        .synth(&FleetOptions::default())
        .unwrap_or_else(|d| panic!("{d}"));
    assert!(files.contains_key("fleet.json"));
    assert_eq!(output.manifest.members.len(), 2);
}

#[test]
fn the_reference_fleet_file_matches_the_rust_reference_fleet() {
    let from_file =
        load_file(&repo("stacks/fleets/kimi-k3-eks-fleet.yaml")).unwrap_or_else(|d| panic!("{d}"));
    let options = FleetOptions::default();
    let (files, output) = from_file.synth(&options).unwrap_or_else(|d| panic!("{d}"));
    let (expected, _) = crate::reference::kimi_k3_eks_fleet()
        .synth(&options)
        .unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(output.manifest.members.len(), 3);
    let names: Vec<&String> = files.keys().collect();
    let expected_names: Vec<&String> = expected.keys().collect();
    assert_eq!(names, expected_names, "the same files");
    for (path, bytes) in &expected {
        assert!(
            files[path] == *bytes,
            "{path} differs between the fleet file and the Rust reference fleet"
        );
    }
}

#[test]
fn fleet_file_schema_is_up_to_date() {
    let path = repo("docs/fleet-file.schema.json");
    let expected = serde_json::to_string_pretty(&json_schema()).unwrap() + "\n";
    if std::env::var_os("HYPERFORGE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &expected).expect("write docs/fleet-file.schema.json");
        return;
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "docs/fleet-file.schema.json is stale: run `HYPERFORGE_BLESS=1 cargo test --test it fleet_file::fleet_file_schema_is_up_to_date`"
    );
    for (file, schema) in [
        ("stacks/fleets/kimi-k3-eks-fleet.yaml", "fleet-file"),
        ("stacks/fleets/kimi-k3-eks.yaml", "stack-file"),
    ] {
        let text = std::fs::read_to_string(repo(file)).unwrap();
        assert!(
            text.starts_with(&format!(
                "# yaml-language-server: $schema=../../docs/{schema}.schema.json\n"
            )),
            "{file}"
        );
    }
    let schema = json_schema();
    assert_eq!(
        schema["required"],
        serde_json::json!(["fleet", "stack_file", "regions"])
    );
    assert!(schema["$defs"]["FleetRegion"]["properties"]["capacity_block"].is_object());
}

#[test]
fn an_unknown_field_is_reported_at_its_key() {
    let ds = load_err(&FLEET.replace("regions:", "regionz: 1\nregions:"), STACK);
    let text = at(&ds, Code::StackFileUnknownField, "fleet.yaml", 4, 1);
    assert!(text.contains("did you mean `regions`?"), "{text}");
}

#[test]
fn a_bad_region_and_a_bad_account_are_reported_at_their_values() {
    let fleet = FLEET
        .replace("\"111122223333\"", "\"12345\"")
        .replace("region: us-east-1", "region: us-east-9");
    let ds = load_err(&fleet, STACK);
    let found: Vec<_> = ds.iter().filter(|d| d.code == Code::InvalidFleet).collect();
    assert_eq!(found.len(), 2, "{ds}");
    assert!(
        found
            .iter()
            .any(|d| d.path.ends_with("fleet.yaml:3:12") && d.message.contains("`12345`")),
        "{ds}"
    );
    assert!(
        found
            .iter()
            .any(|d| d.path.ends_with("fleet.yaml:7:13") && d.message.contains("us-east-9")),
        "{ds}"
    );
}

/// An account listed twice would make two members of one name, one directory and two
/// instances of every StackSet in one account and region: one HF1103 at the repetition,
/// before any member is built.
#[test]
fn a_target_listed_twice_is_one_error_at_the_repetition() {
    let fleet = FLEET.replace(
        "accounts: [\"111122223333\"]",
        "accounts:\n  - \"111122223333\"\n  - \"444455556666\"\n  - \"111122223333\"",
    );
    let ds = load_err(&fleet, STACK);
    let said = at(&ds, Code::InvalidFleetMember, "fleet.yaml", 6, 5);
    assert!(said.contains("`111122223333` is listed twice"), "{said}");
    assert_eq!(ds.len(), 1, "{ds}");
}

/// A fleet name that makes member names too long for a stack name is one HF1103 at the fleet
/// name, not one error per member.
#[test]
fn an_overlong_member_name_is_one_error_at_the_fleet_name() {
    let long = format!("f{}", "x".repeat(95));
    let fleet = FLEET.replace("fleet: demo", &format!("fleet: {long}"));
    let ds = load_err(&fleet, STACK);
    let said = at(&ds, Code::InvalidFleetMember, "fleet.yaml", 1, 8);
    assert!(said.contains("2 member name(s)"), "{said}");
    assert_eq!(ds.len(), 1, "{ds}");
}

#[test]
fn a_bad_value_name_and_a_bad_zone_are_reported_at_their_places() {
    let fleet = FLEET
        .replace("values: { tier: silver }", "values: { Tier: silver }")
        .replace(
            "  - region: us-west-2\n",
            "  - region: us-west-2\n    capacity_block: { reservation_id: cr-0123456789abcdef0, zone_id: use1-az4 }\n",
        );
    let ds = load_err(&fleet, STACK);
    let found: Vec<_> = ds
        .iter()
        .filter(|d| d.code == Code::InvalidFleetMember)
        .collect();
    assert_eq!(found.len(), 2, "{ds}");
    assert!(
        found
            .iter()
            .any(|d| d.path.ends_with("fleet.yaml:9:15") && d.message.contains("`Tier`")),
        "{ds}"
    );
    assert!(
        found
            .iter()
            .any(|d| d.path.ends_with("fleet.yaml:6:70") && d.message.contains("use1-az4")),
        "{ds}"
    );
}

#[test]
fn every_problem_of_the_fleet_file_is_reported_at_once() {
    let fleet = "\
fleet: demo
stack_file: stack.yaml
accounts: [\"111122223333\"]
organizational_units: [ou-ab12-cd34ef56]
delegated_admin: true
preferences: { max_concurrent: { count: 1, percentage: 5 }, failure_tolerance: {} }
regions:
  - region: 7
    capacity_block: { reservation_id: cr-0123456789abcdef0, zone_id: usw2-az2 }
    training_plan: { arn: x, zone_id: usw2-az2 }
    colour: red
";
    let ds = load_err(fleet, STACK);
    assert!(ds.len() >= 5, "{ds}");
    at(&ds, Code::StackFileUnknownField, "fleet.yaml", 11, 5);
    let conflicts: Vec<_> = ds
        .iter()
        .filter(|d| d.code == Code::FleetFileConflict)
        .collect();
    // accounts/units, delegated_admin, count/percentage, an empty amount, block/plan.
    assert_eq!(conflicts.len(), 5, "{ds}");
    for d in ds.iter() {
        assert!(d.path.contains("fleet.yaml:"), "{d}");
    }
}

#[test]
fn a_missing_stack_file_is_reported_at_its_path() {
    let ds = load_err(&FLEET.replace("stack.yaml", "nowhere.yaml"), STACK);
    let text = at(&ds, Code::StackFileUnreadable, "fleet.yaml", 2, 13);
    assert!(text.contains("nowhere.yaml"), "{text}");
}

#[test]
fn a_stack_file_outside_the_fleet_directory_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let inner = tmp.path().join("fleets");
    std::fs::create_dir_all(&inner).unwrap();
    std::fs::write(tmp.path().join("stack.yaml"), STACK).unwrap();
    let path = inner.join("fleet.yaml");
    for rel in ["../stack.yaml", "/etc/passwd", "sub/../../stack.yaml"] {
        std::fs::write(&path, FLEET.replace("stack.yaml", rel)).unwrap();
        let ds = load_file(&path).expect_err(rel);
        let text = at(&ds, Code::FleetStackFilePath, "fleet.yaml", 2, 13);
        assert!(text.contains(rel), "{text}");
    }
    // The stacks directory given as a root is allowed.
    std::fs::write(&path, FLEET.replace("stack.yaml", "../stack.yaml")).unwrap();
    load_file_in(&path, &[tmp.path()]).unwrap_or_else(|d| panic!("{d}"));
}

#[test]
fn placeholder_errors_are_reported_in_the_stack_file() {
    // Unknown name, with a suggestion, at the placeholder's column.
    let ds = load_err(FLEET, &STACK.replace("${fleet.tier}", "${fleet.tirr}"));
    let text = at(&ds, Code::FleetPlaceholderUnknown, "stack.yaml", 4, 9);
    assert!(text.contains("did you mean `${fleet.tier}`?"), "{text}");
    // Malformed: not closed; a quoted scalar counts its quote.
    let ds = load_err(
        FLEET,
        &STACK.replace("team-${fleet.account}", "\"team-${fleet.account\""),
    );
    at(&ds, Code::FleetPlaceholderMalformed, "stack.yaml", 5, 16);
    // A value no member has: the fleet lists no models.
    let ds = load_err(FLEET, &STACK.replace("${fleet.tier}", "${fleet.model}"));
    let text = at(&ds, Code::FleetPlaceholderNoValue, "stack.yaml", 4, 9);
    assert!(text.contains("member `demo-us-west-2`"), "{text}");
    // A value only one region declares.
    let fleet = FLEET.replace("    values: { tier: silver }\n", "");
    let ds = load_err(&fleet, STACK);
    let text = at(&ds, Code::FleetPlaceholderNoValue, "stack.yaml", 4, 9);
    assert!(
        text.contains("member `demo-us-east-1`") && text.contains("1 of 2"),
        "{text}"
    );
}

#[test]
fn a_stack_not_named_as_its_member_is_reported_at_its_line() {
    let (_tmp, path) = project(
        FLEET,
        &STACK.replace("stack: ${fleet.stack}", "stack: ${fleet.region}"),
    );
    let fleet = load_file(&path).unwrap_or_else(|d| panic!("{d}"));
    let member = &fleet.members()[1];
    let ds = fleet
        .describe(member)
        .expect_err("a stack named `us-east-1`");
    let text = at(&ds, Code::FleetMemberMismatch, "stack.yaml", 1, 8);
    assert!(
        text.contains("demo-us-east-1") && text.contains("${fleet.stack}"),
        "{text}"
    );
}

/// A stack file whose region is written out, not `${fleet.region}`: the member in another
/// region is refused at the line, and the member in that region is not, although nothing of
/// the stack file reads the region (its check does, so members do not share the verdict).
#[test]
fn a_stack_in_a_written_out_region_refuses_only_the_members_elsewhere() {
    let (_tmp, path) = project(
        FLEET,
        &STACK
            .replace("region: ${fleet.region}", "region: us-west-2")
            .replace(
                "tags:\n  tier: ${fleet.tier}\n  owner: team-${fleet.account}\n",
                "",
            ),
    );
    let fleet = load_file(&path).unwrap_or_else(|d| panic!("{d}"));
    let ds = fleet.synth(&FleetOptions::default()).unwrap_err();
    let text = at(&ds, Code::FleetMemberMismatch, "stack.yaml", 2, 9);
    assert!(text.contains("[member demo-us-east-1]"), "{text}");
    assert!(
        !ds.iter().any(|d| d.message.contains("demo-us-west-2")),
        "{ds}"
    );
}

/// A stack file that names its stack after the member, as fleet files did before members were
/// one stack, is still valid: each member is its own stack, whose names carry the member's, so
/// each stage is deployed per member and the note says where the members differ.
#[test]
fn a_stack_named_after_its_member_is_still_a_fleet() {
    let (_tmp, path) = project(
        FLEET,
        &STACK
            .replace("stack: ${fleet.stack}", "stack: ${fleet.member}")
            .replace("  tier: ${fleet.tier}\n", ""),
    );
    let fleet = load_file(&path).unwrap_or_else(|d| panic!("{d}"));
    let (files, output) = fleet
        .synth(&FleetOptions::default())
        .unwrap_or_else(|d| panic!("{d}"));
    let m = &output.manifest;
    assert_eq!(m.members[0].stack, "demo-us-west-2");
    assert!(
        files.contains_key("assemblies/demo-us-west-2/demo-us-west-2/01-foundation.template.json")
    );
    assert!(m.stack_sets.is_empty());
    let reason = &m.per_member_stages[0].reason;
    assert!(reason.contains("demo-us-west-2"), "{reason}");
    assert!(output
        .warnings
        .iter()
        .any(|d| d.code == Code::FleetStageNotUniform && d.help.contains("member.stack")));
}

/// A fleet of 10,000 members (10 regions x 1,000 accounts) loads, checks its placeholders
/// once and builds any member from the one parsed stack file quickly.
#[test]
fn a_fleet_of_ten_thousand_members_loads_quickly() {
    let accounts: Vec<String> = (0..1_000)
        .map(|i| format!("\"{:012}\"", 100_000_000_000u64 + i))
        .collect();
    let regions = [
        "us-west-2",
        "us-east-1",
        "us-east-2",
        "us-west-1",
        "eu-west-1",
        "eu-west-2",
        "eu-central-1",
        "ap-northeast-1",
        "ap-southeast-2",
        "ca-central-1",
    ];
    let mut fleet = format!(
        "fleet: big\nstack_file: stack.yaml\naccounts: [{}]\nregions:\n",
        accounts.join(", ")
    );
    for r in regions {
        fleet.push_str(&format!("  - region: {r}\n    values: {{ tier: gold }}\n"));
    }
    let (_tmp, path) = project(&fleet, STACK);
    let start = std::time::Instant::now();
    let loaded = load_file(&path).unwrap_or_else(|d| panic!("{d}"));
    let members = loaded.members();
    assert_eq!(members.len(), 10_000);
    for member in members.iter().step_by(500) {
        let app = loaded.describe(member).unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(app.stacks()[0].name(), member.stack());
    }
    let elapsed = start.elapsed();
    // Generous for a debug build on a loaded machine.
    assert!(elapsed < std::time::Duration::from_secs(20), "{elapsed:?}");
}

#[test]
fn a_service_managed_fleet_targets_organizational_units() {
    let fleet = FLEET.replace(
        "accounts: [\"111122223333\"]",
        "organizational_units: [ou-ab12-cd34ef56, ou-ab12-cd34ef57]\npermission_model: service-managed\ndelegated_admin: true",
    );
    // `${fleet.account}` has no value for a unit.
    let ds = load_err(&fleet, STACK);
    let text = at(&ds, Code::FleetPlaceholderNoValue, "stack.yaml", 5, 15);
    assert!(
        text.contains("member `demo-us-west-2-ou-ab12-cd34ef56`"),
        "{text}"
    );
    let stack = STACK.replace("${fleet.account}", "${fleet.organizational_unit}");
    let (_tmp, path) = project(&fleet, &stack);
    let loaded = load_file(&path).unwrap_or_else(|d| panic!("{d}"));
    let members = loaded.members();
    assert_eq!(members.len(), 4);
    let app = loaded
        .describe(&members[3])
        .unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(app.stacks()[0].tags()["owner"], "team-ou-ab12-cd34ef57");
}

#[test]
fn a_stack_file_with_placeholders_needs_a_fleet() {
    let ds = load_str("stacks/x.yaml", STACK).expect_err("placeholders without a fleet");
    let found: Vec<_> = ds
        .iter()
        .filter(|d| d.code == Code::FleetPlaceholderWithoutFleet)
        .collect();
    assert_eq!(found.len(), 4, "{ds}");
    assert!(found[0].path == "stacks/x.yaml:1:8", "{ds}");
}

#[test]
fn a_member_where_the_instance_type_is_not_offered_is_named() {
    let fleet = std::fs::read_to_string(repo("stacks/fleets/kimi-k3-eks-fleet.yaml"))
        .unwrap()
        .replace(
            "  - region: eu-west-2\n    capacity_block: { reservation_id: cr-0fedcba9876543210, zone_id: euw2-az2 }",
            "  - region: eu-central-1\n    capacity_block: { reservation_id: cr-0fedcba9876543210, zone_id: euc1-az2 }",
        );
    assert!(fleet.contains("eu-central-1"));
    let stack = std::fs::read_to_string(repo("stacks/fleets/kimi-k3-eks.yaml")).unwrap();
    let (_tmp, path) = project(&fleet, "");
    std::fs::write(path.with_file_name("kimi-k3-eks.yaml"), &stack).unwrap();
    let loaded = load_file(&path).unwrap_or_else(|d| panic!("{d}"));
    let member = loaded
        .members()
        .into_iter()
        .find(|m| m.region() == "eu-central-1")
        .unwrap();
    let ds = loaded
        .describe(&member)
        .expect_err("p6-b300 is not offered in eu-central-1");
    let d = ds
        .iter()
        .find(|d| d.message.contains("eu-central-1") && d.message.contains("p6-b300"))
        .unwrap_or_else(|| panic!("{ds}"));
    assert!(d.message.contains("kimi-k3-eks-fleet-eu-central-1"), "{d}");
    assert!(d.path.contains("kimi-k3-eks.yaml:"), "{d}");
    // The whole fleet fails the same way.
    assert!(loaded.synth(&FleetOptions::default()).is_err());
}

// --- the command line ------------------------------------------------------------------------

fn hyperforge(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hyperforge"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("the binary runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A project with `stacks/` as the repository has it (the fleet directory included).
fn cli_project() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let mut dirs = vec![PathBuf::from("stacks")];
    while let Some(d) = dirs.pop() {
        std::fs::create_dir_all(tmp.path().join(&d)).unwrap();
        for e in std::fs::read_dir(repo(d.to_str().unwrap())).unwrap() {
            let p = e.unwrap().path();
            let rel = d.join(p.file_name().unwrap());
            if p.is_dir() {
                dirs.push(rel);
            } else {
                std::fs::copy(&p, tmp.path().join(rel)).unwrap();
            }
        }
    }
    tmp
}

#[test]
fn cli_synth_validate_and_check_a_fleet() {
    let tmp = cli_project();
    let dir = tmp.path();
    let file = "stacks/fleets/kimi-k3-eks-fleet.yaml";
    let o = hyperforge(dir, &["validate", "--fleet", file]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("3 member(s) valid"), "{}", text(&o));
    let o = hyperforge(
        dir,
        &["synth", "--fleet", file, "--threads", "2", "--timings"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = text(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("timings: time summed over the 3 distinct assemblies synthesized:")
            && stderr.contains("writing included"),
        "{stderr}"
    );
    assert!(out.contains("fleet kimi-k3-eks-fleet: 3 members,"), "{out}");
    assert!(out.contains("StackSet kimi-k3-eks-fleet-"), "{out}");
    assert!(dir.join("hyperforge.fleet/fleet.json").is_file());
    assert!(dir
        .join("hyperforge.fleet/assemblies/kimi-k3-eks-fleet-us-east-1/manifest.json")
        .is_file());
    let o = hyperforge(dir, &["synth", "--fleet", file, "--check", "--timings"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("is up to date"), "{}", text(&o));
    assert!(text(&o).contains("comparing included"), "{}", text(&o));
    // One member alone: its whole assembly, the fleet's shared one byte for byte.
    let member = "kimi-k3-eks-fleet-us-east-1";
    let o = hyperforge(
        dir,
        &[
            "synth",
            "--fleet",
            file,
            "--member",
            member,
            "--out",
            "member.out",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let shared = dir.join(format!("hyperforge.fleet/assemblies/{member}"));
    let alone = crate::common::tree(&dir.join("member.out"));
    let of = |root: &std::path::Path, files: Vec<(std::path::PathBuf, Vec<u8>)>| {
        files
            .into_iter()
            .map(|(p, bytes)| (p.strip_prefix(root).unwrap().to_path_buf(), bytes))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        of(&dir.join("member.out"), alone),
        of(&shared, crate::common::tree(&shared))
    );
    let o = hyperforge(dir, &["synth", "--fleet", file, "--member", "nobody"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("has no member `nobody`"), "{}", text(&o));
    let o = hyperforge(dir, &["validate", "--fleet", file, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("a JSON array");
    assert!(json.is_array(), "{json}");
    std::fs::write(dir.join("hyperforge.fleet/FLEET.md"), "stale\n").unwrap();
    let o = hyperforge(dir, &["synth", "--fleet", file, "--check"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // The stacks directory's own stacks are unaffected by the fleet directory in it.
    let o = hyperforge(dir, &["validate"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn cli_reports_a_broken_fleet_at_its_lines() {
    let tmp = cli_project();
    let dir = tmp.path();
    let file = dir.join("stacks/fleets/kimi-k3-eks-fleet.yaml");
    let original = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        original.replace("region: us-east-1", "region: us-east-9"),
    )
    .unwrap();
    for command in ["validate", "synth"] {
        let o = hyperforge(
            dir,
            &[command, "--fleet", "stacks/fleets/kimi-k3-eks-fleet.yaml"],
        );
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(
            text(&o).contains("stacks/fleets/kimi-k3-eks-fleet.yaml:")
                && text(&o).contains("HF1101"),
            "{}",
            text(&o)
        );
    }
    assert!(!dir.join("hyperforge.fleet").exists());
    let o = hyperforge(dir, &["synth", "--fleet", "nowhere.yaml"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = hyperforge(dir, &["synth", "kimi-k3-eks", "--fleet", "x.yaml"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// Mutations of the reference fleet file (each line dropped, truncated, or given a hostile
/// value) and of its stack file's placeholders load or fail with located diagnostics, never
/// panic.
#[test]
fn mutated_fleet_files_never_panic() {
    let fleet = std::fs::read_to_string(repo("stacks/fleets/kimi-k3-eks-fleet.yaml")).unwrap();
    let stack = std::fs::read_to_string(repo("stacks/fleets/kimi-k3-eks.yaml")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("kimi-k3-eks-fleet.yaml");
    std::fs::write(tmp.path().join("kimi-k3-eks.yaml"), &stack).unwrap();
    let lines: Vec<&str> = fleet.lines().collect();
    let hostile = [
        "",
        "[",
        "{",
        "- x",
        ": :",
        "~",
        "${fleet.",
        "\"\u{0}\"",
        "-1",
        "99999999999999999999",
        "../../x",
        "/etc/passwd",
        "[ou-ab12-cd34ef56]",
        "{count: 0}",
        "{percentage: 101}",
    ];
    let mut cases = 0;
    for i in 0..lines.len() {
        let mut variants = vec![
            lines
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, l)| *l)
                .collect::<Vec<_>>()
                .join("\n"),
            lines[..=i].join("\n")
                + &lines[i]
                    .chars()
                    .take(lines[i].len() / 2)
                    .collect::<String>(),
        ];
        if let Some((key, _)) = lines[i].split_once(": ") {
            for h in hostile {
                let mut changed = lines.clone();
                let line = format!("{key}: {h}");
                changed[i] = &line;
                variants.push(changed.join("\n"));
            }
        }
        for text in variants {
            std::fs::write(&path, &text).unwrap();
            cases += 1;
            if let Err(ds) = load_file(&path) {
                assert!(ds.has_errors(), "{text}");
                for d in ds.iter() {
                    assert!(d.path.contains(".yaml:"), "unlocated: {d}\n{text}");
                }
            }
        }
    }
    assert!(cases > 200, "{cases}");
    // The stack file's placeholders, each broken.
    std::fs::write(&path, &fleet).unwrap();
    for (i, _) in stack.match_indices("${fleet.") {
        for cut in [2, 7, 8, 10] {
            let mut text = stack.clone();
            text.replace_range(i + cut..i + cut + 1, "}");
            std::fs::write(tmp.path().join("kimi-k3-eks.yaml"), &text).unwrap();
            if let Err(ds) = load_file(&path) {
                assert!(
                    ds.iter().all(|d| d.path.contains("kimi-k3-eks.yaml:")),
                    "{ds}"
                );
            }
        }
    }
}

/// A zone id wrong for its region is reported at that region's entry, even when another
/// region rightly holds the same zone id further down.
#[test]
fn a_wrong_zone_is_reported_in_its_own_region_not_at_an_equal_value_elsewhere() {
    let fleet = "\
fleet: demo
stack_file: stack.yaml
accounts: [\"111122223333\"]
regions:
  - region: us-west-2
    capacity_block: { reservation_id: cr-0123456789abcdef0, zone_id: use1-az4 }
  - region: us-east-1
    capacity_block: { reservation_id: cr-0a1b2c3d4e5f60718, zone_id: use1-az4 }
";
    let ds = load_err(fleet, STACK);
    let said = at(&ds, Code::InvalidFleetMember, "fleet.yaml", 6, 70);
    assert!(said.contains("not a zone of us-west-2"), "{said}");
}

/// Each region's Capacity Block has a window of its own (a region's `values`, read in the
/// stack file's `window`): every member is scheduled by its own block, and a stage whose
/// schedule differs is deployed per member, with the difference as the reason.
#[test]
fn each_regions_block_is_scheduled_by_its_own_window() {
    let stack = std::fs::read_to_string(repo("stacks/fleets/kimi-k3-eks.yaml"))
        .unwrap()
        .replace(
            "start: \"2027-01-08T04:55:00Z\"",
            "start: ${fleet.block_start}",
        )
        .replace(
            "            end: \"2027-01-15T11:30:00Z\"",
            "            end: ${fleet.block_end}",
        );
    assert!(stack.contains("${fleet.block_start}") && stack.contains("${fleet.block_end}"));
    let fleet = "\
fleet: kimi-k3-eks-fleet
stack_file: stack.yaml
accounts: [\"111122223333\"]
regions:
  - region: us-west-2
    capacity_block: { reservation_id: cr-0123456789abcdef0, zone_id: usw2-az2 }
    values: { block_start: \"2027-01-08T04:55:00Z\", block_end: \"2027-01-15T11:30:00Z\" }
  - region: us-east-1
    capacity_block: { reservation_id: cr-0a1b2c3d4e5f60718, zone_id: use1-az4 }
    values: { block_start: \"2027-02-01T11:30:00Z\", block_end: \"2027-02-15T11:30:00Z\" }
";
    let (_tmp, path) = project(fleet, &stack);
    let fleet = load_file(&path).unwrap_or_else(|d| panic!("{d}"));
    let (files, output) = fleet
        .synth(&FleetOptions::default())
        .unwrap_or_else(|d| panic!("{d}"));
    for (member, cron) in [
        ("kimi-k3-eks-fleet-us-west-2", "cron(55 4 8 1 ? 2027)"),
        ("kimi-k3-eks-fleet-us-east-1", "cron(30 11 1 2 ? 2027)"),
    ] {
        let nodes = files
            .get(&format!(
                "assemblies/{member}/kimi-k3-eks-fleet/02-nodes.template.json"
            ))
            .unwrap_or_else(|| panic!("{member}: {:?}", files.keys().collect::<Vec<_>>()));
        let nodes: serde_json::Value = serde_json::from_slice(nodes).unwrap();
        assert_eq!(
            nodes["Resources"]["GpuNodesScaleUp"]["Properties"]["ScheduleExpression"], cron,
            "{member}"
        );
    }
    let nodes = output
        .manifest
        .per_member_stages
        .iter()
        .find(|s| s.stage == "nodes")
        .expect("the nodes stage is per member");
    assert!(
        nodes.reason.contains("ScheduleExpression"),
        "{}",
        nodes.reason
    );
}
