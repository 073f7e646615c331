//! The construct model end to end: logical ids and their collisions, references across stages,
//! tags, raw overrides, and builder mistakes reported all at once with their paths.

use crate::fixtures::{add_hyperpod_stages, training_plan_group, TRAINING_PLAN};
use hyperforge::app::Stack;
use hyperforge::constructs::{
    Capacity, ClusterSecurityGroup, EksCluster, HyperPodCluster, InstanceGroup, LifecycleScripts,
    Network,
};
use hyperforge::{App, Code};
use serde_json::{json, Value};

fn template(app: &App, path: &str) -> Value {
    let assembly = app
        .synth()
        .unwrap_or_else(|d| panic!("synthesis failed:\n{d}"));
    serde_json::from_str(assembly.text(path).expect("artifact exists")).expect("valid JSON")
}

/// A small but complete HyperPod stack with knobs for the tests.
fn hyperpod_stack(
    network: Network,
    eks_name: &str,
    group: InstanceGroup,
    tweak: impl FnOnce(&mut Stack),
) -> App {
    let mut stack = Stack::new("test", "us-west-2").tag("team", "ml-platform");
    add_hyperpod_stages(&mut stack, network, eks_name, group);
    tweak(&mut stack);
    App::new().tag("owner", "platform").stack(stack)
}

fn good() -> App {
    hyperpod_stack(
        Network::new("Network").hyperpod_subnet("usw2-az2"),
        "test",
        training_plan_group(),
        |_| {},
    )
}

#[test]
fn logical_ids_are_derived_from_paths() {
    let t = template(&good(), "test/01-foundation.template.json");
    let resources = t["Resources"].as_object().unwrap();
    for id in [
        "NetworkVpc",
        "NetworkPrivateSubnet1",
        "NetworkHyperPodSubnet",
        "SgGroup",
        "EksCluster",
        "LifecycleBucket",
    ] {
        assert!(resources.contains_key(id), "missing {id}");
    }
    assert_eq!(
        resources["NetworkVpc"]["Metadata"]["hyperforge:path"],
        "test/Network/Vpc"
    );
}

#[test]
fn colliding_logical_ids_are_an_error() {
    // `NetworkFlowLog/Group` and `Network/FlowLogGroup` both derive `NetworkFlowLogGroup`.
    let mut stack = Stack::new("test", "us-west-2");
    let s = stack.cloudformation_stage("foundation");
    let net = stack.add(s, Network::new("Network"));
    stack.add(s, ClusterSecurityGroup::new("NetworkFlowLog", &net.vpc));
    let err = App::new().stack(stack).synth().unwrap_err();
    assert!(
        err.contains(Code::LogicalIdCollision, "test/NetworkFlowLog/Group"),
        "{err}"
    );
}

#[test]
fn references_lower_to_ref_getatt_and_imports_across_stages() {
    let app = good();
    let foundation = template(&app, "test/01-foundation.template.json");
    let cluster = template(&app, "test/04-cluster.template.json");
    // Same stage: Ref and Fn::GetAtt.
    assert_eq!(
        foundation["Resources"]["EksCluster"]["Properties"]["ResourcesVpcConfig"]["SubnetIds"][0],
        json!({"Ref": "NetworkPrivateSubnet1"})
    );
    assert_eq!(
        foundation["Resources"]["EksCluster"]["Properties"]["RoleArn"],
        json!({"Fn::GetAtt": ["EksClusterRole", "Arn"]})
    );
    // Across stages: an automatic export in the producer, Fn::ImportValue in the consumer.
    assert_eq!(
        foundation["Outputs"]["ExportEksClusterArn"]["Export"]["Name"],
        "test-foundation:EksCluster:Arn"
    );
    assert_eq!(
        cluster["Resources"]["HyperPodCluster"]["Properties"]["Orchestrator"]["Eks"]["ClusterArn"],
        json!({"Fn::ImportValue": "test-foundation:EksCluster:Arn"})
    );
    assert_eq!(
        cluster["Resources"]["HyperPodCluster"]["Properties"]["VpcConfig"]["Subnets"][0],
        json!({"Fn::ImportValue": "test-foundation:NetworkHyperPodSubnet:Id"})
    );
}

#[test]
fn a_reference_to_a_later_stage_is_an_error() {
    let mut stack = Stack::new("test", "us-west-2");
    let first = stack.cloudformation_stage("first");
    let second = stack.cloudformation_stage("second");
    let net = stack.add(second, Network::new("Network"));
    stack.add(first, ClusterSecurityGroup::new("Sg", &net.vpc));
    let err = App::new().stack(stack).synth().unwrap_err();
    assert!(
        err.contains(Code::ReferenceToLaterStage, "test/Sg"),
        "{err}"
    );
}

#[test]
fn app_and_stack_tags_reach_every_taggable_resource() {
    let app = good();
    for path in [
        "test/01-foundation.template.json",
        "test/04-cluster.template.json",
    ] {
        let t = template(&app, path);
        let mut tagged = 0;
        for (id, r) in t["Resources"].as_object().unwrap() {
            let Some(tags) = r["Properties"].get("Tags") else {
                continue;
            };
            let has = |k: &str, v: &str| {
                tags.as_array()
                    .unwrap()
                    .iter()
                    .any(|t| t["Key"] == k && t["Value"] == v)
            };
            assert!(has("owner", "platform"), "{id} lacks the app tag");
            assert!(has("team", "ml-platform"), "{id} lacks the stack tag");
            assert!(
                has("hyperforge:stack", "test"),
                "{id} lacks the stack id tag"
            );
            tagged += 1;
        }
        assert!(tagged >= 2, "{path}: only {tagged} tagged resources");
    }
    // Resource-specific tags survive the merge.
    let t = template(&app, "test/01-foundation.template.json");
    let tags = t["Resources"]["NetworkVpc"]["Properties"]["Tags"]
        .as_array()
        .unwrap()
        .clone();
    assert!(tags.contains(&json!({"Key": "Name", "Value": "test-vpc"})));
    // Types that take no tags get none.
    assert!(t["Resources"]["SgSelfIngress"]["Properties"]
        .get("Tags")
        .is_none());
}

#[test]
fn raw_overrides_change_the_emitted_resource() {
    let app = hyperpod_stack(
        Network::new("Network").hyperpod_subnet("usw2-az2"),
        "test",
        training_plan_group(),
        |s| {
            s.override_property("Network/Vpc", "EnableDnsHostnames", json!(false));
            s.override_property(
                "Eks/Cluster",
                "ResourcesVpcConfig.SubnetIds.1",
                json!("subnet-0123456789abcdef0"),
            );
            s.remove_property("Eks/Cluster", "Logging");
        },
    );
    let t = template(&app, "test/01-foundation.template.json");
    assert_eq!(
        t["Resources"]["NetworkVpc"]["Properties"]["EnableDnsHostnames"],
        json!(false)
    );
    assert_eq!(
        t["Resources"]["EksCluster"]["Properties"]["ResourcesVpcConfig"]["SubnetIds"][1],
        json!("subnet-0123456789abcdef0")
    );
    assert!(t["Resources"]["EksCluster"]["Properties"]
        .get("Logging")
        .is_none());
}

#[test]
fn an_override_of_an_unknown_resource_is_an_error() {
    let app = hyperpod_stack(
        Network::new("Network").hyperpod_subnet("usw2-az2"),
        "test",
        training_plan_group(),
        |s| {
            s.override_property("Network/Vcp", "EnableDnsHostnames", json!(false));
        },
    );
    let err = app.synth().unwrap_err();
    assert!(
        err.contains(Code::UnknownOverrideTarget, "test/Network/Vcp"),
        "{err}"
    );
}

#[test]
fn every_builder_mistake_is_reported_in_one_run() {
    let group = InstanceGroup::new("gpu", "ml.p9-x900.48xlarge").capacity(
        Capacity::training_plan_without_zone("arn:aws:sagemaker:us-west-2:123:plan/x"),
    );
    let app = hyperpod_stack(
        Network::new("Network")
            .cidr("10.192.0.0/33")
            .hyperpod_subnet("usw2-az2"),
        &"k".repeat(101),
        group,
        |_| {},
    );
    let err = app.synth().unwrap_err();
    let expected = [
        (Code::InvalidCidr, "test/Network"),
        (Code::InvalidName, "test/Eks"),
        (Code::UnknownInstanceType, "test/HyperPod/gpu"),
        (Code::MalformedTrainingPlanArn, "test/HyperPod/gpu"),
        (
            Code::TrainingPlanWithoutAvailabilityZone,
            "test/HyperPod/gpu",
        ),
    ];
    for (code, path) in expected {
        assert!(
            err.contains(code, path),
            "missing {code} at {path} in:\n{err}"
        );
    }
    for d in &err {
        assert!(!d.help.is_empty(), "{} has no help", d.code);
    }
    assert!(err.len() >= expected.len());
}

#[test]
fn hyperpod_needs_its_dependencies_chart_and_scripts_first() {
    let mut stack = Stack::new("test", "us-west-2");
    let s = stack.cloudformation_stage("all");
    let net = stack.add(s, Network::new("Network").hyperpod_subnet("usw2-az2"));
    let sg = stack.add(s, ClusterSecurityGroup::new("Sg", &net.vpc));
    let eks = stack.add(
        s,
        EksCluster::new("Eks", "x")
            .subnets(&net.private_subnets)
            .vpc(&net.vpc),
    );
    let lc = stack.add(s, LifecycleScripts::new("Lifecycle"));
    stack.add(
        s,
        HyperPodCluster::new("HyperPod", "x", &eks.cluster, &lc)
            .subnet(net.hyperpod_subnet.as_ref().unwrap())
            .security_group(&sg.group)
            .instance_group(training_plan_group()),
    );
    let err = App::new().stack(stack).synth().unwrap_err();
    assert!(
        err.contains(Code::HyperPodBeforeDependencies, "test/HyperPod"),
        "{err}"
    );
    assert!(
        err.contains(Code::LifecycleScriptsInSameStage, "test/HyperPod"),
        "{err}"
    );
}

#[test]
fn training_plan_zone_must_match_the_subnet_zone() {
    let group = InstanceGroup::new("gpu", "ml.p6-b300.48xlarge")
        .capacity(Capacity::training_plan(TRAINING_PLAN, "usw2-az1"));
    let app = hyperpod_stack(
        Network::new("Network").hyperpod_subnet("usw2-az2"),
        "test",
        group,
        |_| {},
    );
    let err = app.synth().unwrap_err();
    assert!(
        err.contains(Code::TrainingPlanZoneMismatch, "test/HyperPod/gpu"),
        "{err}"
    );
}

#[test]
fn instance_type_must_be_offered_for_hyperpod_in_the_region() {
    let group = InstanceGroup::new("gpu", "ml.p6-b300.48xlarge");
    let app = {
        let mut stack = Stack::new("test", "eu-west-1");
        let s = stack.cloudformation_stage("f");
        let lc = stack.add(s, LifecycleScripts::new("Lifecycle"));
        let net = stack.add(s, Network::new("Network"));
        let eks = stack.add(
            s,
            EksCluster::new("Eks", "x")
                .subnets(&net.private_subnets)
                .vpc(&net.vpc),
        );
        stack.add(
            s,
            HyperPodCluster::new("HyperPod", "x", &eks.cluster, &lc).instance_group(group),
        );
        App::new().stack(stack)
    };
    let err = app.validate();
    assert!(
        err.contains(Code::InstanceTypeNotInRegion, "test/HyperPod/gpu"),
        "{err}"
    );
}

/// A construct in a stage that cannot deploy what it creates, or in a stage of another stack,
/// is an error at the construct, never silently left out of every artifact.
#[test]
fn a_construct_in_the_wrong_kind_of_stage_is_an_error() {
    use hyperforge::constructs::{HelmRelease, Network, ServingDashboard};
    let codes = |stack: Stack| -> Vec<(Code, String)> {
        match App::new().stack(stack).synth() {
            Ok(_) => Vec::new(),
            Err(ds) => ds.iter().map(|d| (d.code, d.path.clone())).collect(),
        }
    };
    let wrong = (Code::ConstructInWrongStage, "s/Network".to_owned());

    // AWS resources in a Kubernetes stage.
    let mut stack = Stack::new("s", "us-west-2");
    let k8s = stack.kubernetes_stage("objects");
    stack.add(k8s, Network::new("Network"));
    assert!(codes(stack).contains(&wrong));

    // Kubernetes objects in a CloudFormation stage.
    let mut stack = Stack::new("s", "us-west-2");
    let cfn = stack.cloudformation_stage("infra");
    stack.add(cfn, Network::new("Network"));
    stack.add(cfn, ServingDashboard::new("Dashboard", "serving-s"));
    assert!(codes(stack).contains(&(Code::ConstructInWrongStage, "s/Dashboard".to_owned())));

    // A Helm stage holds no constructs.
    let mut stack = Stack::new("s", "us-west-2");
    stack.cloudformation_stage("infra");
    let helm = stack.helm_stage("plugin", HelmRelease::nvidia_device_plugin());
    stack.add(helm, Network::new("Network"));
    assert!(codes(stack).contains(&wrong));

    // A stage id of another stack.
    let mut other = Stack::new("other", "us-west-2");
    other.cloudformation_stage("a");
    other.cloudformation_stage("b");
    let elsewhere = other.cloudformation_stage("c");
    let mut stack = Stack::new("s", "us-west-2");
    stack.cloudformation_stage("infra");
    stack.add(elsewhere, Network::new("Network"));
    assert!(codes(stack).contains(&wrong));
}
