//! Fleets: the reference fleet's StackSet templates (their shape, cfn-lint, checkov), each
//! member equal to its own synthesis, every matrix and member mistake reported at once and
//! named, bounds checked before any member is built, a stage that differs across members
//! deployed per member with the reason, determinism across thread counts, and a failed write
//! that leaves the previous output as it was.

use crate::common::{run, tool};
use crate::external_validators::{cdk_nag, checkov_cloudformation};
use crate::reference;
use hyperforge::assembly::fleet::{
    Amount, OperationPreferences, PermissionModel, RegionConcurrency,
};
use hyperforge::constructs::Network;
use hyperforge::fleet::{Fleet, FleetMember, FleetOptions, FleetRegion, FleetWriteError};
use hyperforge::{App, Code, Stack};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn synth(fleet: &Fleet) -> (BTreeMap<String, Vec<u8>>, hyperforge::fleet::FleetOutput) {
    fleet
        .synth(&FleetOptions::default())
        .unwrap_or_else(|ds| panic!("fleet fails:\n{ds}"))
}

fn json(files: &BTreeMap<String, Vec<u8>>, path: &str) -> serde_json::Value {
    serde_json::from_slice(files.get(path).unwrap_or_else(|| panic!("{path} missing")))
        .expect("JSON")
}

#[test]
fn the_reference_fleet_shares_every_cloudformation_stage_through_stacksets() {
    let fleet = reference::kimi_k3_eks_fleet();
    let (files, output) = synth(&fleet);
    let m = &output.manifest;
    let members: Vec<&str> = m.members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        members,
        [
            "kimi-k3-eks-fleet-us-west-2",
            "kimi-k3-eks-fleet-us-east-1",
            "kimi-k3-eks-fleet-eu-west-2"
        ]
    );
    // CloudFormation refuses a StackSet whose parameter without a default has no value of
    // its own (`Parameters: [X] must have values`): each has the first member's, on every
    // path (the manifest `deploy --fleet` reads, FLEET.md, the StackSets template).
    let stack_sets_template = json(&files, m.stack_sets_template.as_deref().unwrap());
    let runbook = String::from_utf8(files["FLEET.md"].clone()).unwrap();
    for set in &m.stack_sets {
        let template = json(&files, &set.template);
        let first = &set.instances[0].parameter_overrides;
        for (name, parameter) in template["Parameters"].as_object().into_iter().flatten() {
            if parameter.get("Default").is_some() {
                continue;
            }
            let own = set.parameters.iter().find(|p| &p.name == name);
            assert_eq!(
                own.map(|p| &p.value),
                first.get(name),
                "{} {name}",
                set.name
            );
            assert!(
                runbook.contains(&format!(
                    "ParameterKey={name},ParameterValue={}",
                    first[name]
                )),
                "{name}"
            );
        }
        let resource = stack_sets_template["Resources"]
            .as_object()
            .unwrap()
            .values()
            .find(|r| r["Properties"]["StackSetName"] == set.name.as_str())
            .unwrap();
        assert_eq!(
            resource["Properties"]["Parameters"]
                .as_array()
                .map_or(0, Vec::len),
            set.parameters.len(),
            "{}",
            set.name
        );
    }
    let sets: Vec<(&str, &str)> = m
        .stack_sets
        .iter()
        .map(|s| (s.name.as_str(), s.template.as_str()))
        .collect();
    assert_eq!(
        sets,
        [
            (
                "kimi-k3-eks-fleet-foundation",
                "stacksets/01-foundation.template.json"
            ),
            (
                "kimi-k3-eks-fleet-nodes",
                "stacksets/02-nodes.template.json"
            ),
            (
                "kimi-k3-eks-fleet-operations",
                "stacksets/05-operations.template.json"
            ),
        ]
    );
    assert!(m.per_member_stages.is_empty(), "{:?}", m.per_member_stages);
    // Each instance carries its member's values: the Capacity Block id and zone (template
    // parameters whose defaults were the member's), and nothing else.
    let nodes = &m.stack_sets[1];
    let east = nodes
        .instances
        .iter()
        .find(|i| i.region == "us-east-1")
        .expect("an instance in us-east-1");
    assert_eq!(east.member, "kimi-k3-eks-fleet-us-east-1");
    assert_eq!(
        east.parameter_overrides.keys().collect::<Vec<_>>(),
        ["GpuNodesCapacityReservationId"]
    );
    assert_eq!(
        east.parameter_overrides["GpuNodesCapacityReservationId"],
        "cr-0a1b2c3d4e5f60718"
    );
    let foundation = &m.stack_sets[0];
    let euw2 = &foundation.instances[2];
    assert_eq!(euw2.parameter_overrides["NetworkGpuSubnetAzId"], "euw2-az2");
    // The templates hold no member's name, region or account anywhere: every member is the
    // same stack, and the bucket's name is the account's and region's it is deployed to.
    for set in &m.stack_sets {
        let text = String::from_utf8(files[&set.template].clone()).unwrap();
        for value in members.iter().copied().chain([
            "us-west-2",
            "us-east-1",
            "eu-west-2",
            reference::ACCOUNT_ID,
        ]) {
            assert!(!text.contains(value), "{value} left in {}", set.template);
        }
        assert!(
            !text.contains("Fleet"),
            "a fleet parameter in {}",
            set.template
        );
    }
    let template = json(&files, "stacksets/01-foundation.template.json");
    assert!(template["Parameters"]["NetworkGpuSubnetAzId"]
        .get("Default")
        .is_none());
    assert_eq!(
        template["Resources"]["WeightsBucket"]["Properties"]["BucketName"],
        serde_json::json!({"Fn::Sub": "kimi-k3-eks-fleet-weights-${AWS::AccountId}-${AWS::Region}"})
    );
    // A later stage imports the earlier one's exports by the stack's name, the same in every
    // member's account and region.
    let nodes_template = files["stacksets/02-nodes.template.json"].clone();
    assert!(String::from_utf8(nodes_template)
        .unwrap()
        .contains("\"kimi-k3-eks-fleet-foundation:EksCluster:Name\""));
    // The StackSets template: one StackSet per stage, in order, each instance a group.
    let sets_template = json(
        &files,
        "stacksets/kimi-k3-eks-fleet.stacksets.template.json",
    );
    let resources = sets_template["Resources"].as_object().unwrap();
    assert_eq!(
        resources.keys().collect::<Vec<_>>(),
        ["Foundation", "Nodes", "Operations"]
    );
    let nodes_set = &resources["Nodes"];
    assert_eq!(nodes_set["DependsOn"], "Foundation");
    assert_eq!(nodes_set["Properties"]["PermissionModel"], "SELF_MANAGED");
    assert_eq!(
        nodes_set["Properties"]["StackInstancesGroup"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        nodes_set["Properties"]["OperationPreferences"],
        serde_json::json!({"RegionConcurrencyType": "SEQUENTIAL", "MaxConcurrentCount": 1, "FailureToleranceCount": 0})
    );
    // fleet.json round-trips.
    let text = std::str::from_utf8(&files["fleet.json"]).unwrap();
    assert_eq!(
        &hyperforge::assembly::fleet::FleetManifest::from_json(text).unwrap(),
        m
    );
    assert!(files.contains_key("FLEET.md"));
    // A note every member reports alike is shown once, for the first member, with a count.
    let large: Vec<_> = output
        .warnings
        .with_code(Code::TemplateNeedsS3Upload)
        .collect();
    assert_eq!(large.len(), 1, "{}", output.warnings);
    assert!(large[0].path.starts_with("kimi-k3-eks-fleet/"));
    assert_eq!(large[0].notes, ["2 other members report the same"]);
}

#[test]
fn every_member_is_its_own_synthesis() {
    let fleet = reference::kimi_k3_eks_fleet();
    let (files, output) = synth(&fleet);
    for (member, values) in fleet.members().iter().zip(&output.manifest.members) {
        let alone = fleet
            .describe(member)
            .and_then(|app| app.synth())
            .unwrap_or_else(|ds| panic!("{ds}"));
        for (path, bytes) in alone.files() {
            let at = format!("{}/{path}", values.assembly);
            assert_eq!(files.get(&at), Some(bytes), "{at}");
        }
        let count = files
            .keys()
            .filter(|p| p.starts_with(&format!("{}/", values.assembly)))
            .count();
        assert_eq!(count, alone.files().len());
    }
}

#[test]
fn stackset_templates_pass_cfn_lint_and_checkov() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fleet");
    reference::kimi_k3_eks_fleet()
        .write_to(&out, &FleetOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut templates: Vec<_> = std::fs::read_dir(out.join("stacksets"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    templates.sort();
    assert_eq!(templates.len(), 4, "{templates:?}");
    // Every region the fleet deploys to.
    let mut args: Vec<String> = [
        "--format",
        "parseable",
        "--regions",
        "us-west-2",
        "us-east-1",
        "eu-west-2",
        "--",
    ]
    .map(String::from)
    .to_vec();
    args.extend(templates.iter().map(|p| p.display().to_string()));
    let lint = run(&tool("cfn-lint"), &args, None);
    assert!(
        lint.success() && lint.lines().next().is_none(),
        "cfn-lint findings:\n{lint}"
    );
    if let Err(findings) = checkov_cloudformation(&templates) {
        panic!("{findings}");
    }
    if let Err(findings) = cdk_nag(&templates) {
        panic!("{findings}");
    }
}

fn small_stack(m: &FleetMember, extra: bool) -> Stack {
    let mut stack = Stack::new(m.stack(), m.region());
    let foundation = stack.cloudformation_stage("foundation");
    let network = stack.add(foundation, Network::new("Network"));
    if extra {
        stack.add(
            foundation,
            hyperforge::constructs::ClusterSecurityGroup::new("Extra", &network.vpc),
        );
    }
    stack
}

#[test]
fn a_stage_that_differs_across_members_is_deployed_per_member_with_the_reason() {
    let fleet = Fleet::new("demo", |m| small_stack(m, m.region() == "us-east-1"))
        .account("111122223333")
        .region(FleetRegion::new("us-west-2"))
        .region(FleetRegion::new("us-east-1"));
    let (files, output) = synth(&fleet);
    assert!(output.manifest.stack_sets.is_empty());
    let stage = &output.manifest.per_member_stages[0];
    assert_eq!(stage.stage, "foundation");
    assert!(
        stage.reason.contains("demo-us-west-2") && stage.reason.contains("demo-us-east-1"),
        "{}",
        stage.reason
    );
    assert!(output
        .warnings
        .contains(Code::FleetStageNotUniform, "fleet/demo/foundation"));
    assert!(!files.keys().any(|p| p.starts_with("stacksets/")));
    // Uniform again without the extra construct.
    let fleet = Fleet::new("demo", |m| small_stack(m, false))
        .account("111122223333")
        .region(FleetRegion::new("us-west-2"))
        .region(FleetRegion::new("us-east-1"));
    let (_, output) = synth(&fleet);
    assert_eq!(output.manifest.stack_sets.len(), 1);
}

#[test]
fn a_member_in_a_region_without_the_instance_type_is_refused_and_named() {
    let fleet = reference::kimi_k3_eks_fleet().region(
        FleetRegion::new("ca-central-1").capacity_block("cr-0123456789abcdef1", "cac1-az1"),
    );
    let ds = fleet.synth(&FleetOptions::default()).unwrap_err();
    let offer: Vec<_> = ds.with_code(Code::InstanceTypeNotInRegion).collect();
    assert!(!offer.is_empty(), "{ds}");
    // Every member's stack has the same name: the message names the member.
    assert!(
        offer
            .iter()
            .all(|d| d.path.starts_with("kimi-k3-eks-fleet/")
                && d.message
                    .starts_with("[member kimi-k3-eks-fleet-ca-central-1] ")),
        "{ds}"
    );
    // The other members are fine: nothing else is reported.
    assert!(
        ds.errors()
            .all(|d| d.message.contains("kimi-k3-eks-fleet-ca-central-1")),
        "{ds}"
    );
}

#[test]
fn every_matrix_mistake_is_reported_at_once_before_any_member_is_built() {
    let built = Arc::new(AtomicUsize::new(0));
    let counter = built.clone();
    let fleet = Fleet::new("1bad name", move |m| {
        counter.fetch_add(1, Ordering::Relaxed);
        small_stack(m, false)
    })
    .account("12345")
    .organizational_unit("ou-ab12-cd34ef56")
    .region(FleetRegion::new("us-west-2").capacity_block("cr-xyz", "use1-az4"))
    .region(FleetRegion::new("us-west-2"))
    .region(
        FleetRegion::new("mars-north-1")
            .value("Bad Key", "v")
            .value("tier", "gold; rm -rf ~"),
    )
    .model("Kimi/K3")
    .preferences(OperationPreferences {
        region_concurrency: RegionConcurrency::Parallel,
        max_concurrent: Amount::Percentage(150),
        failure_tolerance: Amount::Count(0),
        region_order: vec!["eu-west-1".into()],
    });
    let ds = fleet.synth(&FleetOptions::default()).unwrap_err();
    let messages: Vec<String> = ds
        .iter()
        .map(|d| format!("{} {}", d.code.id(), d.message))
        .collect();
    let expect = [
        "not a valid fleet name",
        "`12345` is not an AWS account id",
        "a self-managed fleet targets organizational units",
        "`cr-xyz` (region us-west-2) is not a valid capacity id",
        "zone id `use1-az4` is not a zone of us-west-2",
        "region `us-west-2` is listed twice",
        "`mars-north-1` is not an AWS region",
        "`Bad Key` cannot name a member value",
        "value `tier` of region mars-north-1 is not a plain value",
        "model `Kimi/K3` cannot be part of a member's name",
        "the maximum concurrency is 150 percent",
        "the region order names `eu-west-1`",
    ];
    for e in expect {
        assert!(messages.iter().any(|m| m.contains(e)), "no `{e}` in:\n{ds}");
    }
    assert!(ds.iter().all(|d| d.path == "fleet/1bad name"));
    assert_eq!(built.load(Ordering::Relaxed), 0, "no member was built");
    // Counts: at most one more account at once than may fail; 4 billion is refused.
    let fleet = Fleet::new("demo", |m| small_stack(m, false))
        .account("111122223333")
        .region(FleetRegion::new("us-west-2"))
        .preferences(OperationPreferences {
            region_concurrency: RegionConcurrency::Parallel,
            max_concurrent: Amount::Count(u32::MAX),
            failure_tolerance: Amount::Count(2),
            region_order: Vec::new(),
        });
    let ds = fleet.synth(&FleetOptions::default()).unwrap_err();
    assert!(
        ds.iter()
            .any(|d| d.message.contains("at most one more than the tolerance")),
        "{ds}"
    );
}

#[test]
fn counts_are_bounded_before_anything_is_built() {
    let built = Arc::new(AtomicUsize::new(0));
    let counter = built.clone();
    let mut fleet = Fleet::new("big", move |m| {
        counter.fetch_add(1, Ordering::Relaxed);
        small_stack(m, false)
    });
    for region in ["us-west-2", "us-east-1", "eu-west-2"] {
        fleet = fleet.region(FleetRegion::new(region));
    }
    for a in 0..4_000u64 {
        fleet = fleet.account(format!("{:012}", 100_000_000_000 + a));
    }
    assert_eq!(fleet.member_count(), None);
    assert!(fleet.members().is_empty());
    let ds = fleet.synth(&FleetOptions::default()).unwrap_err();
    assert!(ds.contains(Code::FleetTooLarge, "fleet/big"), "{ds}");
    assert_eq!(built.load(Ordering::Relaxed), 0);
}

#[test]
fn a_description_of_another_stack_is_refused() {
    let fleet = Fleet::new("demo", |m| Stack::new("elsewhere", m.region()))
        .account("111122223333")
        .region(FleetRegion::new("us-west-2"));
    let ds = fleet.synth(&FleetOptions::default()).unwrap_err();
    assert!(
        ds.contains(Code::FleetMemberMismatch, "demo-us-west-2"),
        "{ds}"
    );
    let fleet = Fleet::from_apps("demo", |_| Ok(App::new()))
        .account("111122223333")
        .region(FleetRegion::new("us-west-2"));
    let ds = fleet.synth(&FleetOptions::default()).unwrap_err();
    assert!(ds.iter().any(|d| d.message.contains("no stack")), "{ds}");
}

#[test]
fn many_failed_members_are_counted_not_all_shown() {
    let mut fleet = Fleet::new("demo", |m| Stack::new(m.stack(), m.region()))
        .region(FleetRegion::new("us-west-2"));
    for a in 0..30u64 {
        fleet = fleet.account(format!("{:012}", 100_000_000_000 + a));
    }
    let ds = fleet.synth(&FleetOptions::default()).unwrap_err();
    let summary = ds
        .with_code(Code::FleetTooManyProblems)
        .next()
        .expect("a count");
    assert!(
        summary.message.starts_with("30 members failed"),
        "{}",
        summary.message
    );
    // The first members' own diagnostics, in the fleet's order.
    let first = ds.iter().next().unwrap();
    assert!(
        first
            .message
            .starts_with("[member demo-us-west-2-100000000000] "),
        "{ds}"
    );
}

#[test]
fn output_is_the_same_on_one_thread_and_on_several() {
    let fleet = reference::kimi_k3_eks_fleet();
    let one = fleet
        .synth(&FleetOptions {
            threads: 1,
            ..FleetOptions::default()
        })
        .unwrap();
    let four = fleet
        .synth(&FleetOptions {
            threads: 4,
            ..FleetOptions::default()
        })
        .unwrap();
    assert_eq!(one.0, four.0);
}

#[test]
fn a_failed_write_leaves_the_previous_output_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fleet");
    let good = Fleet::new("demo", |m| small_stack(m, false))
        .account("111122223333")
        .region(FleetRegion::new("us-west-2"));
    good.write_to(&out, &FleetOptions::default()).unwrap();
    let before = std::fs::read(out.join("fleet.json")).unwrap();
    // Members fail after others were written to the staging directory.
    let bad = Fleet::new("demo", |m| {
        if m.region() == "us-east-1" {
            Stack::new(m.stack(), m.region())
        } else {
            small_stack(m, false)
        }
    })
    .account("111122223333")
    .region(FleetRegion::new("us-west-2"))
    .region(FleetRegion::new("us-east-1"));
    let err = bad.write_to(&out, &FleetOptions::default()).unwrap_err();
    assert!(matches!(err, FleetWriteError::Diagnostics(_)), "{err}");
    assert_eq!(std::fs::read(out.join("fleet.json")).unwrap(), before);
    assert!(!out.join("assemblies/demo-us-east-1").exists());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, ["fleet"], "no staging directory is left");
    // A directory of other files is never replaced.
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("notes.txt"), "keep").unwrap();
    assert!(good.write_to(&project, &FleetOptions::default()).is_err());
    assert!(project.join("notes.txt").exists());
}

#[test]
fn service_managed_fleets_target_units_and_deploy_automatically() {
    let fleet = Fleet::new("org", |m| small_stack(m, false))
        .permission_model(PermissionModel::ServiceManaged {
            delegated_admin: true,
        })
        .organizational_unit("ou-ab12-cd34ef56")
        .region(FleetRegion::new("us-west-2"));
    let (files, output) = synth(&fleet);
    assert_eq!(output.manifest.members[0].name, "org-us-west-2");
    let t = json(&files, "stacksets/org.stacksets.template.json");
    let p = &t["Resources"]["Foundation"]["Properties"];
    assert_eq!(p["PermissionModel"], "SERVICE_MANAGED");
    assert_eq!(p["CallAs"], "DELEGATED_ADMIN");
    assert_eq!(p["AutoDeployment"]["Enabled"], true);
    assert_eq!(
        p["StackInstancesGroup"][0]["DeploymentTargets"],
        serde_json::json!({"OrganizationalUnitIds": ["ou-ab12-cd34ef56"]})
    );
    let runbook = String::from_utf8(files["FLEET.md"].clone()).unwrap();
    assert!(runbook.contains("--call-as DELEGATED_ADMIN"), "{runbook}");
    assert!(runbook.contains("activate-organizations-access"));
}

#[test]
fn a_member_reads_its_own_values() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let fleet = Fleet::new("demo", move |m| {
        log.lock().unwrap().push((
            m.name().to_owned(),
            m.value("capacity_id").map(str::to_owned),
            m.value("tier").map(str::to_owned),
        ));
        small_stack(m, false)
    })
    .account("111122223333")
    .region(
        FleetRegion::new("us-west-2")
            .capacity_block("cr-0123456789abcdef0", "usw2-az2")
            .value("tier", "gold"),
    );
    synth(&fleet);
    assert_eq!(
        seen.lock().unwrap().as_slice(),
        [(
            "demo-us-west-2".to_owned(),
            Some("cr-0123456789abcdef0".to_owned()),
            Some("gold".to_owned())
        )]
    );
}

/// A member's values reach its CloudFormation templates only as the defaults of its declared
/// inputs: its name and account nowhere, its capacity id and zone only as a parameter's
/// `Default`, its region nowhere (the account and region a name needs are `AWS::AccountId`
/// and `AWS::Region`). Nothing is searched for: the members' templates are the same stack.
#[test]
fn a_members_values_reach_its_templates_only_as_its_declared_inputs() {
    let fleet = reference::kimi_k3_eks_fleet();
    let (files, output) = synth(&fleet);
    for member in &output.manifest.members {
        let templates: Vec<(&String, String)> = files
            .iter()
            .filter(|(p, _)| {
                p.starts_with(&format!("{}/", member.assembly)) && p.ends_with(".template.json")
            })
            .map(|(p, b)| (p, String::from_utf8(b.clone()).unwrap()))
            .collect();
        assert_eq!(templates.len(), 3, "{}", member.name);
        for (path, text) in &templates {
            for key in ["member", "account", "region"] {
                let value = &member.values[key];
                assert!(
                    !text.contains(value.as_str()),
                    "{path} holds its {key} {value}"
                );
            }
            for key in ["capacity_id", "zone_id"] {
                let value = &member.values[key];
                let anywhere = text.matches(&format!("\"{value}\"")).count();
                let as_default = text.matches(&format!("\"Default\": \"{value}\"")).count();
                assert_eq!(anywhere, as_default, "{path}: its {key} outside a default");
            }
        }
    }
}

/// Names fit at the fleet's bounds, by construction: a fleet name as long as member names
/// allow, several accounts (so member names hold them), the longest regions' names. Every
/// member synthesizes (the weights bucket's name within S3's 63 characters, node group and role
/// names within theirs), and the members' templates are one StackSet per stage.
#[test]
fn names_fit_at_the_fleets_bounds() {
    // The stack's stages make `<fleet>-aws-load-balancer-controller` a stack name (at most
    // 100 characters); a member's name is `<fleet>-<region>-<account>` (at most 100 too).
    let name = format!(
        "k{}",
        "3".repeat(100 - "-aws-load-balancer-controller".len() - 1)
    );
    let fleet = Fleet::from_apps(name.clone(), |m: &FleetMember| {
        let at = reference::Placement {
            region: m.region().to_owned(),
            cluster_name: m.stack().to_owned(),
            reservation_id: m.value("capacity_id").unwrap_or_default().to_owned(),
            zone_id: m.value("zone_id").unwrap_or_default().to_owned(),
            bucket_name: hyperforge::constructs::BucketName::PerAccountAndRegion,
            dashboard: "serving-kimi-k3".to_owned(),
        };
        Ok(App::new().stack(reference::kimi_k3_eks_stack_at(m.stack(), &at)))
    })
    .account("111122223333")
    .account("999988887777")
    .region(FleetRegion::new("ap-southeast-3").capacity_block("cr-0123456789abcdef0", "apse3-az1"))
    .region(FleetRegion::new("us-west-2").capacity_block("cr-0fedcba9876543210", "usw2-az2"));
    let members = fleet.members();
    assert_eq!(members.len(), 4);
    assert!(members.iter().any(|m| m.name().len() >= 99), "{members:?}");
    let (files, output) = synth(&fleet);
    assert!(
        output.manifest.per_member_stages.is_empty(),
        "{:?}",
        output.manifest.per_member_stages
    );
    assert_eq!(output.manifest.stack_sets.len(), 3);
    let foundation = json(&files, "stacksets/01-foundation.template.json");
    let bucket = foundation["Resources"]["WeightsBucket"]["Properties"]["BucketName"]["Fn::Sub"]
        .as_str()
        .expect("a deploy-time name");
    let longest = bucket
        .replace("${AWS::AccountId}", "111122223333")
        .replace("${AWS::Region}", "ap-southeast-3");
    assert!(longest.len() <= 63, "{longest}");
}

/// A member's description is a function of what it reads of the member: members that agree on
/// all of it are described and synthesized once, and each still gets exactly its own
/// synthesis. A description that reads the account is one per member.
#[test]
fn members_that_agree_on_what_their_description_reads_share_one_assembly() {
    let described = Arc::new(AtomicUsize::new(0));
    let count = described.clone();
    let mut fleet = Fleet::new("demo", move |m| {
        count.fetch_add(1, Ordering::Relaxed);
        small_stack(m, false)
    })
    .region(FleetRegion::new("us-west-2"))
    .region(FleetRegion::new("us-east-1"));
    for a in 0..5u64 {
        fleet = fleet.account(format!("{:012}", 100_000_000_000 + a));
    }
    let (files, output) = synth(&fleet);
    assert_eq!(described.load(Ordering::Relaxed), 2);
    let members = &output.manifest.members;
    assert_eq!(members.len(), 10);
    let assemblies: std::collections::BTreeSet<&str> =
        members.iter().map(|m| m.assembly.as_str()).collect();
    assert_eq!(
        assemblies.into_iter().collect::<Vec<_>>(),
        [
            "assemblies/demo-us-east-1-100000000000",
            "assemblies/demo-us-west-2-100000000000"
        ]
    );
    // Each member's assembly is what its description alone gives, and nothing else is
    // written for it but its Terraform root modules.
    for (member, entry) in fleet.members().iter().zip(members) {
        let alone = fleet
            .describe(member)
            .and_then(|app| app.synth())
            .unwrap_or_else(|ds| panic!("{ds}"));
        for (path, bytes) in alone.files() {
            assert_eq!(
                files.get(&format!("{}/{path}", entry.assembly)),
                Some(bytes),
                "{path}"
            );
        }
        let own: Vec<&String> = files
            .keys()
            .filter(|p| p.starts_with(&format!("members/{}/", entry.name)))
            .collect();
        assert!(!own.is_empty());
        assert!(own.iter().all(|p| p.ends_with("/main.tf.json")), "{own:?}");
    }
    // The account read: a description per member.
    let described = Arc::new(AtomicUsize::new(0));
    let count = described.clone();
    let fleet = Fleet::new("demo", move |m| {
        count.fetch_add(1, Ordering::Relaxed);
        small_stack(m, false).tag("owner", m.account().unwrap_or_default())
    })
    .region(FleetRegion::new("us-west-2"))
    .account("111122223333")
    .account("444455556666");
    let (_, output) = synth(&fleet);
    assert_eq!(described.load(Ordering::Relaxed), 2);
    assert_ne!(
        output.manifest.members[0].assembly,
        output.manifest.members[1].assembly
    );
}

/// Members that share an assembly share its Terraform modules but never their state: each
/// member's root module of each phase calls the shared module with the member's values (every
/// variable, with its default), passes every output on, and a later phase reads the earlier
/// one's state from the member's own directory (`path.root`).
#[test]
fn each_member_keeps_its_own_terraform_state() {
    let fleet = reference::kimi_k3_eks_fleet_to(["111122223333".into(), "444455556666".into()]);
    let (files, output) = synth(&fleet);
    let schema = crate::common::tf_schema::Schema::committed();
    let mut root_dirs = std::collections::BTreeSet::new();
    for member in &output.manifest.members {
        assert!(!member.terraform.is_empty(), "{}", member.name);
        for dir in &member.terraform {
            assert!(root_dirs.insert(dir.clone()), "{dir} twice");
            let root = json(&files, &format!("{dir}/main.tf.json"));
            let findings = schema.check(&root);
            assert!(findings.is_empty(), "{dir}: {findings:?}");
            let call = &root["module"]["stack"];
            // The source, resolved from the root's directory, is the shared module's.
            let mut at: Vec<&str> = dir.split('/').collect();
            for part in call["source"].as_str().unwrap().split('/') {
                match part {
                    ".." => {
                        at.pop().expect("inside the fleet's directory");
                    }
                    part => at.push(part),
                }
            }
            let module_dir = at.join("/");
            let phase = dir.rsplit('/').next().unwrap();
            assert!(
                module_dir.starts_with(&member.assembly) && module_dir.ends_with(phase),
                "{module_dir}"
            );
            let module = json(&files, &format!("{module_dir}/main.tf.json"));
            let names = |v: &serde_json::Value| {
                v.as_object()
                    .map(|o| o.keys().cloned().collect::<Vec<_>>())
                    .unwrap_or_default()
            };
            assert_eq!(
                names(&root["variable"]),
                names(&module["variable"]),
                "{dir}"
            );
            assert_eq!(names(&root["output"]), names(&module["output"]), "{dir}");
            for (name, variable) in module["variable"].as_object().into_iter().flatten() {
                assert_eq!(root["variable"][name]["default"], variable["default"]);
                assert_eq!(call[name], format!("${{var.{name}}}"));
            }
            for (name, _) in module["output"].as_object().into_iter().flatten() {
                assert_eq!(
                    root["output"][name]["value"],
                    format!("${{module.stack.{name}}}")
                );
            }
            for (_, state) in module["data"]["terraform_remote_state"]
                .as_object()
                .into_iter()
                .flatten()
            {
                let path = state["config"]["path"].as_str().unwrap();
                assert!(path.starts_with("${path.root}/../"), "{path}");
            }
        }
    }
    // Every phase with a module has a root for every member.
    let phases = files
        .keys()
        .filter(|p| {
            p.starts_with(&output.manifest.members[0].assembly) && p.ends_with("/main.tf.json")
        })
        .count();
    assert_eq!(root_dirs.len(), phases * output.manifest.members.len());
}
