//! Cost-allocation tags reach every taggable resource of the reference stacks, in both
//! formats: the resources' own tags, what EC2 launches from launch templates (instances,
//! volumes, network interfaces), the admin host's volume, what Karpenter launches
//! (`EC2NodeClass.spec.tags`) and what the Load Balancer Controller creates (`defaultTags`). "Taggable" comes from the vendored schemas (a CloudFormation
//! type with a `Tags` property, a Terraform type with a `tags` argument), not from a list kept
//! here, so a new resource type is checked the day it is emitted. And the tag rules:
//! reserved keys (`HF0385`), EC2's 50 tags per resource (`HF0386`).

use crate::reference;
use hyperforge::app::{App, Tags};
use hyperforge::constructs::{KarpenterHandle, KarpenterNodePool, ReservationSelector};
use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The app tag the test adds, and the app and stack tags every reference stack carries.
const EXPECTED: [(&str, &str); 3] = [
    ("cost-center", "gpu-42"),
    ("managed-by", "hyperforge"),
    ("workload", "kimi-k3"),
];

/// Every reference app with one more app tag.
fn tagged_apps() -> Vec<App> {
    reference::all()
        .into_iter()
        .chain(reference::variants())
        .map(|app| app.tag("cost-center", "gpu-42"))
        .collect()
}

/// The expected tags of a resource of stack `stack`.
fn expected(stack: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = EXPECTED
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    out.push(("hyperforge:stack".to_owned(), stack.to_owned()));
    out
}

/// CloudFormation resource types whose registry schema has a `Tags` property.
fn cloudformation_taggable() -> (BTreeSet<String>, BTreeSet<String>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("codegen/schemas/cloudformation");
    let mut known = BTreeSet::new();
    let mut taggable = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).expect("vendored schemas") {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let schema: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let name = schema["typeName"].as_str().expect("typeName").to_owned();
        if schema["properties"].get("Tags").is_some() {
            taggable.insert(name.clone());
        }
        known.insert(name);
    }
    assert!(taggable.contains("AWS::EC2::Instance"), "{taggable:?}");
    (known, taggable)
}

/// Terraform resource types whose committed provider schema has a `tags` argument.
fn terraform_taggable() -> BTreeSet<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/terraform");
    let mut out = BTreeSet::new();
    for file in ["aws-6.66.0.schema.json", "awscc-1.106.0.schema.json"] {
        let schema: Value =
            serde_json::from_slice(&std::fs::read(dir.join(file)).unwrap()).unwrap();
        for (ty, args) in schema["resources"].as_object().expect("resources") {
            if args.get("tags").is_some() {
                out.insert(ty.clone());
            }
        }
    }
    assert!(out.contains("aws_instance") && out.contains("awscc_sagemaker_cluster"));
    out
}

/// Tags as a key-to-value map, from a map or a `[{Key, Value}]` (CloudFormation) or
/// `[{key, value}]` (awscc) list.
fn cfn_tags(tags: &Value) -> BTreeMap<String, Value> {
    match tags {
        Value::Array(list) => list
            .iter()
            .filter_map(|t| {
                let key = t.get("Key").or_else(|| t.get("key"))?.as_str()?;
                let value = t.get("Value").or_else(|| t.get("value"))?;
                Some((key.to_owned(), value.clone()))
            })
            .collect(),
        Value::Object(map) => map.clone().into_iter().collect(),
        _ => BTreeMap::new(),
    }
}

fn assert_has(tags: &BTreeMap<String, Value>, stack: &str, what: &str) {
    for (k, v) in expected(stack) {
        assert_eq!(
            tags.get(&k).and_then(Value::as_str),
            Some(v.as_str()),
            "{what} lacks tag {k}={v}: {tags:?}"
        );
    }
}

/// The stack a file of the assembly belongs to (its first path segment).
fn stack_of(path: &str) -> &str {
    path.split('/').next().unwrap_or_default()
}

#[test]
fn tags_reach_every_taggable_cloudformation_resource_and_what_ec2_launches() {
    let (known, taggable) = cloudformation_taggable();
    let mut launch_templates = 0;
    let mut instances = 0;
    let mut tagged = 0;
    for app in tagged_apps() {
        let assembly = app.synth().expect("synthesizes");
        for (path, bytes) in assembly.files() {
            if !path.ends_with(".template.json") {
                continue;
            }
            let stack = stack_of(path);
            let template: Value = serde_json::from_slice(bytes).unwrap();
            for (id, r) in template["Resources"].as_object().unwrap() {
                let ty = r["Type"].as_str().unwrap();
                assert!(known.contains(ty), "{path}: {ty} has no vendored schema");
                let props = &r["Properties"];
                let what = format!("{path}: {id} ({ty})");
                if taggable.contains(ty) {
                    assert_has(&cfn_tags(&props["Tags"]), stack, &what);
                    tagged += 1;
                }
                if ty == "AWS::EC2::LaunchTemplate" {
                    launch_templates += 1;
                    let specs = props["LaunchTemplateData"]["TagSpecifications"]
                        .as_array()
                        .unwrap_or_else(|| panic!("{what} has no tag specifications"));
                    let types: BTreeSet<&str> = specs
                        .iter()
                        .map(|s| s["ResourceType"].as_str().unwrap())
                        .collect();
                    assert_eq!(
                        types,
                        BTreeSet::from(["instance", "volume", "network-interface"]),
                        "{what}"
                    );
                    for spec in specs {
                        let t = cfn_tags(&spec["Tags"]);
                        assert_has(&t, stack, &format!("{what} {}", spec["ResourceType"]));
                        assert!(t.contains_key("Name"), "{what}");
                    }
                    let own = &props["TagSpecifications"][0];
                    assert_eq!(own["ResourceType"], "launch-template", "{what}");
                    assert_has(&cfn_tags(&own["Tags"]), stack, &what);
                }
                if ty == "AWS::EC2::Instance" {
                    instances += 1;
                    assert_eq!(props["PropagateTagsToVolumeOnCreation"], true, "{what}");
                }
            }
        }
    }
    // The EKS references' system groups and the managed GPU groups (the plain and the
    // multi-node reference's); every cluster's admin host.
    assert_eq!(launch_templates, 5);
    assert_eq!(instances, 4);
    assert!(tagged > 100, "{tagged}");
}

#[test]
fn tags_reach_every_taggable_terraform_resource_and_what_ec2_launches() {
    let taggable = terraform_taggable();
    let mut launch_templates = 0;
    let mut instances = 0;
    for app in tagged_apps() {
        let assembly = app.synth().expect("synthesizes");
        // One root module per phase: its files together.
        let mut modules: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for (path, bytes) in assembly.files() {
            if path.contains("/terraform/") && path.ends_with(".tf.json") {
                let dir = path.rsplit_once('/').unwrap().0.to_owned();
                modules
                    .entry(dir)
                    .or_default()
                    .push(serde_json::from_slice(bytes).unwrap());
            }
        }
        assert!(!modules.is_empty());
        for (dir, files) in &modules {
            let stack = stack_of(dir);
            let provider_tags = files
                .iter()
                .find_map(|f| f["provider"]["aws"].get("default_tags"))
                .map(|d| cfn_tags(&d["tags"]));
            for file in files {
                let Some(resources) = file["resource"].as_object() else {
                    continue;
                };
                for (ty, by_name) in resources {
                    for (name, body) in by_name.as_object().unwrap() {
                        let what = format!("{dir}: {ty}.{name}");
                        if taggable.contains(ty) {
                            if ty.starts_with("aws_") {
                                // hashicorp/aws: the provider's default tags.
                                let tags = provider_tags
                                    .as_ref()
                                    .unwrap_or_else(|| panic!("{what}: no default tags"));
                                assert_has(tags, stack, &what);
                            } else {
                                // awscc has no default tags: on the resource.
                                assert_has(&cfn_tags(&body["tags"]), stack, &what);
                            }
                        }
                        if ty == "aws_launch_template" {
                            launch_templates += 1;
                            let specs = body["tag_specifications"].as_array().unwrap();
                            let types: BTreeSet<&str> = specs
                                .iter()
                                .map(|s| s["resource_type"].as_str().unwrap())
                                .collect();
                            assert_eq!(
                                types,
                                BTreeSet::from(["instance", "volume", "network-interface"]),
                                "{what}"
                            );
                            for spec in specs {
                                assert_has(&cfn_tags(&spec["tags"]), stack, &what);
                            }
                        }
                        if ty == "aws_instance" {
                            instances += 1;
                            assert_has(&cfn_tags(&body["volume_tags"]), stack, &what);
                        }
                    }
                }
            }
        }
    }
    assert_eq!(launch_templates, 5);
    assert_eq!(instances, 4);
}

#[test]
fn tags_reach_what_karpenter_launches() {
    let mut classes = 0;
    for app in tagged_apps() {
        let assembly = app.synth().expect("synthesizes");
        for (path, bytes) in assembly.files() {
            if !path.ends_with(".yaml") || path.ends_with(".values.yaml") {
                continue;
            }
            let text = String::from_utf8(bytes.clone()).unwrap();
            for doc in serde_yaml::Deserializer::from_str(&text) {
                let object = Value::deserialize(doc).unwrap();
                if object["kind"] != "EC2NodeClass" {
                    continue;
                }
                classes += 1;
                assert_has(&cfn_tags(&object["spec"]["tags"]), stack_of(path), path);
            }
        }
    }
    assert_eq!(classes, 1);
}

/// The Load Balancer Controller puts the stack's tags (`defaultTags`) on the load balancers,
/// target groups and security groups it creates; no other release carries them.
#[test]
fn tags_reach_what_the_load_balancer_controller_creates() {
    let mut releases = 0;
    for app in tagged_apps() {
        let assembly = app.synth().expect("synthesizes");
        for (path, bytes) in assembly.files() {
            if !path.ends_with(".values.yaml") {
                continue;
            }
            let values: Value = serde_yaml::from_slice(bytes).unwrap();
            if path.ends_with("aws-load-balancer-controller.values.yaml") {
                releases += 1;
                assert_has(&cfn_tags(&values["defaultTags"]), stack_of(path), path);
            } else {
                assert!(values.get("defaultTags").is_none(), "{path}");
            }
        }
    }
    // The three EKS references (plain, Karpenter, multi-node).
    assert_eq!(releases, 3);
}

/// Keys Karpenter's CRD refuses in `spec.tags` never reach it, even when a caller passes
/// them (synthesis refuses them first, `HF0385`).
#[test]
fn the_node_class_leaves_karpenters_own_keys_to_it() {
    let pool = KarpenterNodePool::capacity_block(
        "P",
        "p",
        &KarpenterHandle {
            controller_role: hyperforge::app::Ref::new("s", "K/ControllerRole"),
            node_role: hyperforge::app::Ref::new("s", "K/NodeRole"),
            node_role_name: "KarpenterNodeRole-s".to_owned(),
            cluster_name: "s".to_owned(),
        },
        "p6-b300.48xlarge",
        ReservationSelector::Id(reference::CAPACITY_BLOCK_RESERVATION_ID.to_owned()),
    );
    let tags: Tags = [
        ("team", "a"),
        ("karpenter.sh/nodepool", "x"),
        ("kubernetes.io/cluster/s", "owned"),
        ("eks:eks-cluster-name", "s"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let class = pool.ec2_node_class("s", &tags);
    let got = class.spec.tags.unwrap();
    assert_eq!(got.keys().collect::<Vec<_>>(), ["team"]);
}

fn codes(app: App) -> Vec<String> {
    match app.synth() {
        Ok(_) => Vec::new(),
        Err(ds) => ds.iter().map(|d| d.code.id().to_owned()).collect(),
    }
}

#[test]
fn reserved_tag_keys_are_refused() {
    for key in [
        "kubernetes.io/cluster/kimi-k3-eks",
        "karpenter.sh/nodeclaim",
        "eks:eks-cluster-name",
        "elbv2.k8s.aws/cluster",
        "service.k8s.aws/stack",
    ] {
        let got = codes(reference::kimi_k3_eks().tag(key, "x"));
        assert_eq!(got, ["HF0385"], "{key}");
    }
    // Prefixes of other projects stay the user's.
    assert!(codes(reference::kimi_k3_eks().tag("karpenter.sh/team", "x")).is_empty());
}

#[test]
fn tags_beyond_what_an_instance_can_carry_are_refused() {
    // The references carry `managed-by`, `workload` and `hyperforge:stack`: 41 more make 44,
    // which with `Name` and Karpenter's five is EC2's 50.
    let with = |n: usize| {
        (0..n).fold(reference::kimi_k3_eks(), |app, i| {
            app.tag(format!("k{i:02}"), "v")
        })
    };
    assert!(codes(with(41)).is_empty());
    assert_eq!(codes(with(42)), ["HF0386"]);
}
