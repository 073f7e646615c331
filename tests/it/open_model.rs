//! The construct model as a team uses it from its own crate: constructs of its own, raw
//! resources in each format, imports of what exists, acknowledged warnings, and diagnostics
//! that point at the line of the describing program. The `examples/team-deepseek` crate is
//! compiled here from its source (as a user's crate would be, against this library) and its
//! output goes through every validator.

#[path = "../../examples/team-deepseek/src/lib.rs"]
#[allow(dead_code)]
mod team;

use crate::common::{artifacts_with_format, written};
use crate::external_validators::{
    assert_cloudformation_passes, assert_terraform_passes, kubernetes_validate,
};
use hyperforge::app::Stack;
use hyperforge::constructs::*;
use hyperforge::diagnostics::Diagnostics;
use hyperforge::resources::{RawValue, Scope};
use hyperforge::serde_json::{json, Value};
use hyperforge::{App, Code, SynthOptions};

fn template(assembly: &hyperforge::Assembly, path: &str) -> Value {
    hyperforge::serde_json::from_str(assembly.text(path).expect(path)).expect("template JSON")
}

#[test]
fn the_team_crate_synthesizes_and_passes_every_validator() {
    let app = team::app();
    let assembly = app
        .synth_with(&SynthOptions {
            deny_warnings: true,
            ..SynthOptions::default()
        })
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = written(&app);
    assert_cloudformation_passes(dir.path());
    assert_terraform_passes(dir.path());
    let yaml = artifacts_with_format(dir.path(), "kubernetes");
    assert!(!yaml.is_empty());
    if let Err(findings) = kubernetes_validate(&yaml) {
        panic!("{findings}");
    }

    // Imports create nothing and are read as the values given, in both formats.
    let foundation = template(&assembly, "team-deepseek/01-foundation.template.json");
    let types: Vec<&str> = foundation["Resources"]
        .as_object()
        .unwrap()
        .values()
        .map(|r| r["Type"].as_str().unwrap())
        .collect();
    assert!(!types
        .iter()
        .any(|t| t.starts_with("AWS::EC2::VPC") || *t == "AWS::EKS::Cluster"));
    let nodes = assembly
        .text("team-deepseek/02-nodes.template.json")
        .unwrap();
    assert!(nodes.contains("\"subnet-0a1b2c3d4e5f60713\""), "{nodes}");
    assert!(
        nodes.contains("\"ClusterName\": \"ml-platform\""),
        "{nodes}"
    );
    let tf = assembly
        .files()
        .iter()
        .filter(|(p, _)| p.ends_with(".tf.json"))
        .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
        .collect::<String>();
    assert!(!tf.contains("\"aws_vpc\"") && !tf.contains("\"aws_eks_cluster\""));
    assert!(tf.contains("subnet-0a1b2c3d4e5f60713"));

    // The raw resource in both formats, its reference lowered per format.
    let parameter = &foundation["Resources"]["AlarmTopicParameterResource"];
    assert_eq!(parameter["Type"], "AWS::SSM::Parameter");
    assert_eq!(
        parameter["Properties"]["Value"],
        json!({"Ref": "AlarmsTopic"})
    );
    assert!(tf.contains("\"aws_ssm_parameter\""));
    assert!(
        tf.contains("\"value\": \"${aws_sns_topic.alarms_topic.arn}\""),
        "{tf}"
    );

    // The raw Kubernetes object and the team's construct, in the workload's YAML.
    let workload = assembly.text("team-deepseek/05-workload.yaml").unwrap();
    assert!(workload.contains("kind: PriorityClass"));
    assert!(
        workload.contains("priorityClassName: serving"),
        "{workload}"
    );
    assert!(
        workload.contains("requests.nvidia.com/gpu: '16'"),
        "{workload}"
    );
}

/// A construct of the describing program's own: it claims capacity (so cost sees it) and
/// checks its own rule.
#[derive(Clone, Debug)]
struct BatchPool {
    id: String,
    instances: i64,
}

impl Construct for BatchPool {
    type Handle = ();
    const KIND: &'static str = "batch_pool";
    fn id(&self) -> &str {
        &self.id
    }
    fn handle(&self, _stack: &str) {}
    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        if self.instances < 1 {
            ds.report(
                Code::UserConstruct,
                cx.path,
                "a batch pool needs an instance",
                "give it 1 or more",
            );
        }
    }
    fn facts(&self, cx: &Context<'_>) -> Facts<'_> {
        Facts {
            capacity: vec![CapacityClaim {
                path: cx.path.to_owned(),
                instance_type: "p5en.48xlarge".to_owned(),
                service_instance_type: "p5en.48xlarge".to_owned(),
                launcher: Launcher::Ec2,
                source: CapacitySource::OnDemand,
                count: self.instances,
                max_count: self.instances,
                provisioned_on_demand: false,
                node_labels: Default::default(),
                subnets: Vec::new(),
                pod_storage: None,
                efa_interfaces: false,
            }],
            ..Facts::default()
        }
    }
    fn expand(&self, scope: &mut Scope<'_>) {
        scope.add(
            "Queue",
            hyperforge::resources::RawResource {
                cloudformation: Some((
                    "AWS::SQS::Queue".to_owned(),
                    RawValue::from(json!({"SqsManagedSseEnabled": true})),
                )),
                terraform: Some((
                    "aws_sqs_queue".to_owned(),
                    RawValue::from(json!({"sqs_managed_sse_enabled": true})),
                )),
                cloudformation_tags: hyperforge::resources::RawTags::KeyValueList,
                handle: None,
            },
        );
    }
}

#[test]
fn a_user_construct_expands_reports_facts_and_is_located() {
    let mut stack = Stack::new("user", "us-east-2");
    let s = stack.cloudformation_stage("batch");
    stack.add(
        s,
        BatchPool {
            id: "Batch".into(),
            instances: 3,
        },
    );
    let app = App::new().stack(stack);
    let assembly = app.synth().unwrap_or_else(|e| panic!("{e}"));
    let t = template(&assembly, "user/01-batch.template.json");
    assert_eq!(t["Resources"]["BatchQueue"]["Type"], "AWS::SQS::Queue");
    assert_eq!(
        t["Resources"]["BatchQueue"]["Properties"]["Tags"],
        json!([{"Key": "hyperforge:stack", "Value": "user"}])
    );
    let cost = hyperforge::cost::estimate(&app);
    let line = &cost.stacks[0].lines[0];
    assert_eq!((line.path.as_str(), line.count), ("user/Batch", 3));

    let mut stack = Stack::new("user", "us-east-2");
    let s = stack.cloudformation_stage("batch");
    let line = line!() + 1;
    stack.add(
        s,
        BatchPool {
            id: "Batch".into(),
            instances: 0,
        },
    );
    let errors = App::new().stack(stack).synth().unwrap_err();
    assert!(errors.contains(Code::UserConstruct, "user/Batch"));
    let text = errors.to_string();
    assert!(
        text.contains(&format!("--> user/Batch at tests/it/open_model.rs:{line}:")),
        "{text}"
    );
}

#[test]
fn raw_resources_are_checked_and_placed_by_kind() {
    let mut stack = Stack::new("raw", "us-west-2");
    let s = stack.cloudformation_stage("foundation");
    let k = stack.kubernetes_stage("objects");
    stack.add(s, RawResource::new("Nothing"));
    stack.add(
        s,
        RawResource::new("BadType").cloudformation("SQS Queue", json!({})),
    );
    stack.add(
        s,
        RawResource::new("NotObject").terraform("aws_sqs_queue", json!([1])),
    );
    stack.add(
        k,
        KubernetesManifest::new("Nameless", json!({"apiVersion": "v1", "kind": "ConfigMap"})),
    );
    stack.add(
        k,
        KubernetesManifest::new(
            "BadPointer",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
        )
        .value_from(
            "/metadata/name",
            hyperforge::app::Ref::<hyperforge::app::kind::Bucket>::new("raw", "X/Bucket").name(),
        ),
    );
    // An AWS resource in a Kubernetes stage.
    stack.add(
        k,
        RawResource::new("Misplaced")
            .cloudformation("AWS::SQS::Queue", json!({}))
            .terraform("aws_sqs_queue", json!({})),
    );
    let errors = App::new().stack(stack).synth().unwrap_err();
    for path in [
        "raw/Nothing",
        "raw/BadType",
        "raw/NotObject",
        "raw/Nameless",
        "raw/BadPointer",
    ] {
        assert!(
            errors.contains(Code::InvalidRawResource, path),
            "{path}: {errors}"
        );
    }
    // One form only: the other format would lack it.
    assert!(
        errors.contains(Code::RawResourceLacksFormat, "raw/BadType"),
        "{errors}"
    );
}

/// A custom resource of a group whose controller hyperforge pins must name a kind and version
/// that controller serves (the vendored CRDs): Karpenter's v1beta1 API and its removed
/// `Provisioner` are refused at the object, with the version to use; other groups are free.
#[test]
fn custom_resources_name_what_the_pinned_controller_serves() {
    let mut stack = Stack::new("crs", "us-west-2");
    let k = stack.kubernetes_stage("objects");
    let object = |api: &str, kind: &str| json!({"apiVersion": api, "kind": kind, "metadata": {"name": "x"}, "spec": {}});
    stack.add(
        k,
        KubernetesManifest::new("OldPool", object("karpenter.sh/v1beta1", "NodePool")),
    );
    stack.add(
        k,
        KubernetesManifest::new("Removed", object("karpenter.sh/v1", "Provisioner")),
    );
    stack.add(
        k,
        KubernetesManifest::new("Current", object("keda.sh/v1alpha1", "ScaledObject")),
    );
    stack.add(
        k,
        KubernetesManifest::new("Other", object("example.com/v9", "Widget")),
    );
    let errors = App::new().stack(stack).synth().unwrap_err();
    let found: Vec<(String, String)> = errors
        .with_code(Code::CustomResourceNotServed)
        .map(|d| (d.path.clone(), d.help.clone()))
        .collect();
    assert_eq!(found.len(), 2, "{errors}");
    assert_eq!(found[0].0, "crs/OldPool");
    assert!(
        found[0]
            .1
            .starts_with("use `apiVersion: karpenter.sh/v1` (it serves v1;"),
        "{}",
        found[0].1
    );
    assert!(found[0].1.contains("tag: v1.8.1"), "{}", found[0].1);
    assert_eq!(found[1].0, "crs/Removed");
    assert!(
        found[1].1.starts_with("its kinds are NodePool"),
        "{}",
        found[1].1
    );
}

/// Every custom resource hyperforge emits is typed from a vendored CRD, at a version that CRD
/// serves: the table and the types come from the same files.
#[test]
fn every_typed_custom_resource_is_served_by_its_vendored_crd() {
    use hyperforge::resources::kubernetes::crd::{self, SERVED};
    use k8s_openapi::Resource;
    fn served<K: Resource>() -> bool {
        SERVED
            .iter()
            .any(|c| c.group == K::GROUP && c.kind == K::KIND && c.versions.contains(&K::VERSION))
    }
    assert!(served::<crd::node_pool::NodePool>());
    assert!(served::<crd::ec2_node_class::EC2NodeClass>());
    assert!(served::<
        crd::inference_endpoint_config::InferenceEndpointConfig,
    >());
    assert!(served::<crd::scaled_object::ScaledObject>());
    assert!(served::<crd::trigger_authentication::TriggerAuthentication>());
    assert!(served::<crd::resource_flavor::ResourceFlavor>());
    assert!(served::<crd::cluster_queue::ClusterQueue>());
    assert!(served::<crd::local_queue::LocalQueue>());
    assert_eq!(SERVED.len(), 11, "one entry per vendored CRD file");
    // The controllers the presets install are the releases the CRDs were vendored from.
    use hyperforge::app::stage::{ChartSource, HelmRelease};
    for (release, group) in [
        (HelmRelease::karpenter("c"), "karpenter.sh"),
        (HelmRelease::karpenter("c"), "karpenter.k8s.aws"),
        (HelmRelease::keda("c"), "keda.sh"),
        (HelmRelease::kueue(), "kueue.x-k8s.io"),
    ] {
        let ChartSource::Repository { version, .. } = &release.chart else {
            panic!("{} is not a repository chart", release.release);
        };
        for crd in SERVED.iter().filter(|c| c.group == group) {
            assert!(
                crd.source.contains(&format!("tag: v{version} ")),
                "{group} {}: chart {version}, CRD from {}",
                crd.kind,
                crd.source
            );
        }
    }
}

#[test]
fn a_kubernetes_manifest_takes_deployed_values() {
    let mut stack = Stack::new("raw", "us-west-2");
    let s = stack.cloudformation_stage("foundation");
    let topic = stack.add(s, AlarmTopic::new("Alarms"));
    let k = stack.kubernetes_stage("objects");
    stack.add(
        k,
        KubernetesManifest::new(
            "OnCall",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "on-call", "namespace": "default"}, "data": {}}),
        )
        .value_from("/data/topic", topic.topic.arn()),
    );
    let assembly = App::new()
        .stack(stack)
        .synth()
        .unwrap_or_else(|e| panic!("{e}"));
    let yaml = assembly.text("raw/02-objects.yaml").unwrap();
    assert!(
        yaml.contains("topic: hyperforge-output-AlarmsTopicArn"),
        "{yaml}"
    );
    let manifest: Value = hyperforge::serde_json::from_str(assembly.manifest_json()).unwrap();
    let stage = &manifest["stacks"][0]["stages"][1];
    assert_eq!(
        stage["values"][0],
        json!({"placeholder": "hyperforge-output-AlarmsTopicArn", "output": {"stage": "foundation", "output": "AlarmsTopicArn"}}),
        "{stage}"
    );
}

fn network_with(subnets: &[(&str, &str, &str, SubnetRole)]) -> ExistingNetwork {
    subnets.iter().fold(
        ExistingNetwork::new("Network", "vpc-0a1b2c3d4e5f60718"),
        |n, (id, az, cidr, role)| n.subnet(*role, *id, *az, *cidr),
    )
}

#[test]
fn imports_are_checked_like_created_resources() {
    let mut stack = Stack::new("imp", "us-west-2");
    let s = stack.cloudformation_stage("foundation");
    stack.add(
        s,
        network_with(&[
            ("subnet-123", "usw2-az1", "10.0.0.0/19", SubnetRole::Private),
            (
                "subnet-0a1b2c3d",
                "use1-az1",
                "10.0.32.0/19",
                SubnetRole::Private,
            ),
            (
                "subnet-0a1b2c3d",
                "usw2-az2",
                "10.0.64.0/33",
                SubnetRole::Gpu,
            ),
        ]),
    );
    stack.add(
        s,
        ExistingEksCluster::new("Eks", "bad name").oidc_issuer_url("https://example.com"),
    );
    stack.add(s, ExistingBucket::new("Bucket", "Not_A_Bucket"));
    stack.add(
        s,
        ExistingKmsKey::new("Key", "arn:aws:kms:us-west-2:111122223333:alias/x"),
    );
    let errors = App::new().stack(stack).synth().unwrap_err();
    for (code, path) in [
        (Code::InvalidExistingResource, "imp/Network/PrivateSubnet1"),
        (
            Code::AvailabilityZoneIdWrongRegion,
            "imp/Network/PrivateSubnet2",
        ),
        (Code::ExistingResourceIncomplete, "imp/Network/GpuSubnet"),
        (Code::InvalidCidr, "imp/Network/GpuSubnet"),
        (Code::InvalidExistingResource, "imp/Eks"),
        (Code::InvalidExistingResource, "imp/Bucket"),
        (Code::InvalidExistingResource, "imp/Key"),
    ] {
        assert!(errors.contains(code, path), "{code:?} at {path}: {errors}");
    }
    // One private zone only (the second private subnet's zone is in another region, but
    // the import still counts two zones: the zone rule reports that one).
    let mut stack = Stack::new("imp", "us-west-2");
    let s = stack.cloudformation_stage("foundation");
    stack.add(
        s,
        network_with(&[(
            "subnet-0a1b2c3d",
            "usw2-az1",
            "10.0.0.0/19",
            SubnetRole::Private,
        )]),
    );
    let errors = App::new().stack(stack).synth().unwrap_err();
    assert!(
        errors.contains(Code::ExistingResourceIncomplete, "imp/Network"),
        "{errors}"
    );
}

#[test]
fn an_imported_gpu_subnet_in_another_zone_than_the_block_is_refused() {
    let mut stack = Stack::new("imp", "us-east-2");
    let s = stack.cloudformation_stage("foundation");
    let network = stack.add(
        s,
        network_with(&[
            (
                "subnet-0a1b2c3d",
                "use2-az1",
                "10.0.0.0/19",
                SubnetRole::Private,
            ),
            (
                "subnet-0a1b2c3e",
                "use2-az2",
                "10.0.32.0/19",
                SubnetRole::Private,
            ),
            (
                "subnet-0a1b2c3f",
                "use2-az1",
                "10.0.64.0/19",
                SubnetRole::Gpu,
            ),
        ]),
    );
    let eks = stack.add(s, ExistingEksCluster::new("Eks", "platform"));
    stack.add(
        s,
        ManagedNodeGroup::gpu(
            "GpuNodes",
            &eks.cluster,
            "p5en.48xlarge",
            network.gpu_subnet.iter(),
        )
        .capacity(NodeCapacity::capacity_block_of(
            "cr-0a1b2c3d4e5f60718",
            "use2-az2",
            1,
        )),
    );
    let errors = App::new().stack(stack).synth().unwrap_err();
    assert!(
        errors.contains(Code::CapacityBlockSubnetZone, "imp/GpuNodes"),
        "{errors}"
    );
    // The help names the way an imported network is changed, not a created network's builder.
    let zone = errors
        .with_code(Code::CapacityBlockSubnetZone)
        .next()
        .unwrap();
    assert!(
        zone.help.contains("ExistingNetwork::gpu_subnet(")
            && !zone.help.contains("Network::gpu_subnet(\"use2"),
        "{zone}"
    );
}

#[test]
fn reading_a_value_an_import_does_not_give_is_an_error() {
    let mut stack = Stack::new("imp", "us-west-2");
    let s = stack.cloudformation_stage("foundation");
    let eks = stack.add(s, ExistingEksCluster::new("Eks", "platform"));
    stack.add(
        s,
        RawResource::new("Provider")
            .cloudformation(
                "AWS::SSM::Parameter",
                RawValue::object([
                    ("Type", RawValue::from("String")),
                    ("Value", RawValue::from(eks.oidc_provider.arn())),
                ]),
            )
            .terraform(
                "aws_ssm_parameter",
                RawValue::object([
                    ("name", RawValue::from("/p")),
                    ("type", RawValue::from("String")),
                    ("value", RawValue::from(eks.oidc_provider.arn())),
                ]),
            ),
    );
    let errors = App::new().stack(stack).synth().unwrap_err();
    assert!(
        errors.contains(Code::ExistingResourceIncomplete, "imp/Provider/Resource"),
        "{errors}"
    );
    // Given, it is read as the provider's ARN in the account.
    let mut stack = Stack::new("imp", "us-west-2");
    let s = stack.cloudformation_stage("foundation");
    let eks = stack.add(
        s,
        ExistingEksCluster::new("Eks", "platform").oidc_issuer_url(
            "https://oidc.eks.us-west-2.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF",
        ),
    );
    stack.add(
        s,
        RawResource::new("Provider").cloudformation(
            "AWS::SSM::Parameter",
            RawValue::object([
                ("Type", RawValue::from("String")),
                ("Value", RawValue::from(eks.oidc_provider.arn())),
            ]),
        ),
    );
    stack.acknowledge(
        "Provider",
        Code::RawResourceLacksFormat,
        "CloudFormation only",
    );
    let assembly = App::new()
        .stack(stack)
        .synth()
        .unwrap_or_else(|e| panic!("{e}"));
    let t = template(&assembly, "imp/01-foundation.template.json");
    assert_eq!(
        t["Resources"]["ProviderResource"]["Properties"]["Value"],
        json!({"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF"})
    );
}

#[test]
fn acknowledged_warnings_leave_the_report_and_enter_the_manifest() {
    let build = |ack: Option<(&str, Code, &str)>| {
        let mut stack = Stack::new("ack", "us-west-2");
        let s = stack.cloudformation_stage("foundation");
        stack.add(
            s,
            RawResource::new("Queue")
                .cloudformation("AWS::SQS::Queue", json!({"SqsManagedSseEnabled": true})),
        );
        if let Some((path, code, reason)) = ack {
            stack.acknowledge(path, code, reason);
        }
        App::new().stack(stack)
    };
    let deny = SynthOptions {
        deny_warnings: true,
        ..SynthOptions::default()
    };
    let errors = build(None).synth_with(&deny).unwrap_err();
    assert!(errors.contains(Code::RawResourceLacksFormat, "ack/Queue"));

    let assembly = build(Some((
        "Queue",
        Code::RawResourceLacksFormat,
        "the team deploys with CloudFormation only",
    )))
    .synth_with(&deny)
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(assembly.warnings().is_empty());
    let manifest: Value = hyperforge::serde_json::from_str(assembly.manifest_json()).unwrap();
    assert_eq!(
        manifest["stacks"][0]["acknowledged"],
        json!([{"code": "HF0031", "path": "Queue", "reason": "the team deploys with CloudFormation only", "diagnostics": 1}])
    );

    let errors = build(Some(("Queue", Code::InvalidCidr, "no")))
        .synth()
        .unwrap_err();
    assert!(
        errors.contains(Code::AcknowledgedError, "ack/Queue"),
        "{errors}"
    );
    let errors = build(Some(("Queue", Code::RawResourceLacksFormat, " ")))
        .synth()
        .unwrap_err();
    assert!(
        errors.contains(Code::AcknowledgedError, "ack/Queue"),
        "{errors}"
    );
    let assembly = build(Some(("Elsewhere", Code::RawResourceLacksFormat, "stale")))
        .synth()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(assembly
        .warnings()
        .contains(Code::UnusedAcknowledgement, "ack/Elsewhere"));
    assert!(assembly
        .warnings()
        .contains(Code::RawResourceLacksFormat, "ack/Queue"));
}

#[test]
fn an_imported_cluster_is_not_held_to_the_nodes_the_description_shows() {
    // The platform's cluster already runs GPU nodes: a workload on it with no node group in
    // this stack is not refused (HF0370 is for created clusters), while what the workload
    // relies on the cluster for (the device plugin, a load balancer controller) is stated or
    // refused, and the model-aware rules still apply.
    let stack = |cluster: ExistingEksCluster| {
        let mut stack = Stack::new("imp", "us-east-2");
        let s = stack.cloudformation_stage("foundation");
        stack.add(s, cluster);
        let k = stack.kubernetes_stage("workload");
        stack.add(
            k,
            VllmDeployment::new(
                "Llama",
                VllmServer::new(
                    "meta-llama/Llama-3.1-70B-Instruct",
                    "vllm/vllm-openai:v0.11.0",
                )
                .image_digest(
                    "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                )
                .revision("0123456789abcdef0123456789abcdef01234567")
                .served_model_name("Llama-70B")
                .tensor_parallel_size(8),
                "p5en.48xlarge",
            )
            .name("llama-70b"),
        );
        stack
    };
    let unstated = App::new()
        .stack(stack(ExistingEksCluster::new("Eks", "platform")))
        .validate();
    assert_eq!(
        unstated.with_code(Code::WorkloadWithoutCapacity).count(),
        0,
        "{unstated}"
    );
    let plugin = unstated
        .with_code(Code::GpuWorkloadWithoutDevicePlugin)
        .next()
        .unwrap_or_else(|| panic!("{unstated}"));
    assert!(
        plugin
            .help
            .contains("ExistingEksCluster::runs(ClusterAddOn::NvidiaDevicePlugin)"),
        "{plugin}"
    );
    let controller = unstated
        .with_code(Code::ImportedClusterPrerequisite)
        .next()
        .unwrap_or_else(|| panic!("{unstated}"));
    assert!(
        controller
            .message
            .contains("the AWS Load Balancer Controller of the imported cluster `platform`"),
        "{controller}"
    );
    let stated = App::new()
        .stack(stack(
            ExistingEksCluster::new("Eks", "platform")
                .runs(ClusterAddOn::NvidiaDevicePlugin)
                .runs(ClusterAddOn::LoadBalancerController),
        ))
        .validate();
    for code in [
        Code::WorkloadWithoutCapacity,
        Code::GpuWorkloadWithoutDevicePlugin,
        Code::ImportedClusterPrerequisite,
    ] {
        assert_eq!(stated.with_code(code).count(), 0, "{code:?}: {stated}");
    }
    // The cluster's own controller knows none of the company's tags: the Service asks for them.
    let assembly = App::new()
        .tag("cost-center", "ml-42")
        .stack(stack(
            ExistingEksCluster::new("Eks", "platform")
                .runs(ClusterAddOn::NvidiaDevicePlugin)
                .runs(ClusterAddOn::LoadBalancerController),
        ))
        .synth()
        .unwrap_or_else(|e| panic!("{e}"));
    let objects: String = assembly
        .files()
        .iter()
        .filter(|(path, _)| path.ends_with(".yaml"))
        .map(|(_, bytes)| String::from_utf8_lossy(bytes).into_owned())
        .collect();
    assert!(
        objects.contains(
            "service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags: cost-center=ml-42,hyperforge:stack=imp"
        ),
        "{objects}"
    );
}

/// What an imported cluster is stated to run is listed in the runbook's prerequisites, and a
/// Pod Identity association on a cluster not stated to run the agent is refused.
#[test]
fn an_imported_clusters_prerequisites_are_stated_checked_and_listed() {
    let ds = match App::new()
        .stack(shared_cluster_stack_with("team-a", None, &[]))
        .synth()
    {
        Ok(_) => panic!("synthesized"),
        Err(ds) => ds,
    };
    assert!(
        ds.iter()
            .any(|d| d.code == Code::ImportedClusterPrerequisite
                && d.path.starts_with("team-a/Weights")
                && d.message.contains("model-weights/weights-stager")
                && d.help
                    .contains("ExistingEksCluster::runs(ClusterAddOn::PodIdentityAgent)")),
        "{ds}"
    );
    let assembly = App::new()
        .stack(shared_cluster_stack("team-a", None))
        .synth()
        .unwrap_or_else(|e| panic!("{e}"));
    let runbook = assembly.text("team-a/RUNBOOK.md").unwrap();
    for line in [
        "The stack deploys onto the existing EKS cluster `ml-prod`, which it does not create.",
        "- the EKS Pod Identity agent add-on (the stack's roles reach their pods through it): `aws eks describe-addon --region us-east-2 --cluster-name ml-prod --addon-name eks-pod-identity-agent --query addon.status`",
    ] {
        assert!(runbook.contains(line), "{line}\n{runbook}");
    }
    let manifest = &assembly.manifest().stacks[0].inventory;
    let imported = manifest.imported_cluster.as_ref().unwrap();
    assert_eq!(imported.name, "ml-prod");
    assert_eq!(
        imported.runs,
        [hyperforge::assembly::inventory::AddOn::PodIdentityAgent]
    );
}

#[test]
fn stack_files_acknowledge_warnings_too() {
    let file = |code: &str| {
        format!(
            "stack: sf\nregion: us-west-2\nstages:\n  - name: infra\n    kind: cloudformation\n    constructs:\n      - alarm_topic: Alarms\nacknowledge:\n  - path: Alarms\n    code: {code}\n    reason: nothing reports it here, on purpose\n"
        )
    };
    // A code that reports nothing at the path: the stale acknowledgement warns, located in
    // the file rather than in hyperforge's source.
    let app = hyperforge::stackfile::load_str("sf.yaml", &file("HF0601"))
        .unwrap_or_else(|e| panic!("{e}"));
    let assembly = app.synth().unwrap_or_else(|e| panic!("{e}"));
    let stale: Vec<_> = assembly
        .warnings()
        .with_code(Code::UnusedAcknowledgement)
        .collect();
    assert_eq!(stale.len(), 1, "{}", assembly.warnings());
    assert_eq!(stale[0].location, None);
    // A code that is not one.
    let errors = hyperforge::stackfile::load_str("sf.yaml", &file("HF9")).unwrap_err();
    assert!(
        errors.contains(Code::StackFileInvalidValue, "sf.yaml:10:11"),
        "{errors}"
    );
}

/// Raw resources refer to each other through typed handles once they declare their kind: the
/// team crate's own construct `EscalationTopic` encrypts its raw topic with its raw key and
/// publishes to it from its raw alarm, in both formats, lowered as hyperforge's own references
/// are.
#[test]
fn raw_resources_refer_to_each_other_through_typed_handles() {
    let assembly = team::app().synth().unwrap_or_else(|e| panic!("{e}"));
    let t = template(&assembly, "team-deepseek/01-foundation.template.json");
    let resources = &t["Resources"];
    assert_eq!(
        resources["EscalationTopic"]["Properties"]["KmsMasterKeyId"],
        json!({"Fn::GetAtt": ["EscalationKey", "Arn"]})
    );
    assert_eq!(
        resources["EscalationAlarm"]["Properties"]["AlarmActions"],
        json!([{"Ref": "EscalationTopic"}])
    );
    let tf: Value = hyperforge::serde_json::from_str(
        assembly
            .text("team-deepseek/terraform/01-foundation/main.tf.json")
            .expect("the foundation module"),
    )
    .unwrap();
    let tf = &tf["resource"];
    assert!(tf["aws_kms_key"]["escalation_key"].is_object(), "{tf}");
    assert_eq!(
        tf["aws_sns_topic"]["escalation_topic"]["kms_master_key_id"],
        "${aws_kms_key.escalation_key.arn}"
    );
    assert_eq!(
        tf["aws_cloudwatch_metric_alarm"]["escalation_alarm"]["alarm_actions"],
        json!(["${aws_sns_topic.escalation_topic.arn}"])
    );

    // A reference to a raw resource that declares no kind, or another kind, is the user's
    // mistake at the referring resource, not an internal error.
    let mut stack = Stack::new("raw", "us-west-2");
    let s = stack.cloudformation_stage("foundation");
    let queue = stack.add(
        s,
        RawResource::new("Queue")
            .cloudformation("AWS::SQS::Queue", json!({"SqsManagedSseEnabled": true}))
            .terraform("aws_sqs_queue", json!({"sqs_managed_sse_enabled": true})),
    );
    let topic = queue.as_kind::<hyperforge::app::kind::SnsTopic>();
    stack.add(
        s,
        RawResource::new("Alarm")
            .cloudformation(
                "AWS::CloudWatch::Alarm",
                RawValue::object([("AlarmActions", RawValue::List(vec![topic.arn().into()]))]),
            )
            .terraform(
                "aws_cloudwatch_metric_alarm",
                RawValue::object([("alarm_actions", RawValue::List(vec![topic.arn().into()]))]),
            ),
    );
    let synth_errors = |stack: Stack| match App::new().stack(stack).synth() {
        Ok(_) => panic!("synthesized"),
        Err(ds) => ds,
    };
    let ds = synth_errors(stack);
    assert!(!ds.iter().any(|d| d.code == Code::InternalError), "{ds}");
    assert!(
        ds.iter().any(|d| d.code == Code::InvalidRawResource
            && d.path.contains("raw/Alarm")
            && d.message.contains("refers to the raw resource `Queue/Resource` as a SnsTopic, but it is declared as no kind")),
        "{ds}"
    );
    let mut stack = Stack::new("raw", "us-west-2");
    let s = stack.cloudformation_stage("foundation");
    stack.add(
        s,
        RawResource::new("Mislabelled")
            .referable_as(hyperforge::app::Kind::KmsKey)
            .cloudformation("AWS::SNS::Topic", json!({}))
            .terraform("aws_sns_topic", json!({})),
    );
    let ds = synth_errors(stack);
    assert!(
        ds.iter().any(|d| d.code == Code::InvalidRawResource
            && d.path.contains("raw/Mislabelled")
            && d.field.as_deref() == Some("cloudformation")
            && d.message.contains("`AWS::KMS::Key`")),
        "{ds}"
    );
}

/// A raw resource of a vendored type is checked as an override is, in each format: a misspelt
/// property with a suggestion, a value of the wrong type, a required property left out.
#[test]
fn raw_resource_properties_are_checked_against_the_vendored_schemas() {
    let mut stack = Stack::new("raw", "us-west-2");
    let s = stack.cloudformation_stage("foundation");
    stack.add(
        s,
        RawResource::new("Topic")
            .cloudformation(
                "AWS::SNS::Topic",
                json!({"DisplayNme": "typo", "FifoTopic": "maybe"}),
            )
            .terraform("aws_sns_topic", json!({"display_nme": "typo"})),
    );
    stack.add(
        s,
        RawResource::new("Policy")
            .cloudformation("AWS::SNS::TopicPolicy", json!({"Topics": []}))
            .terraform("aws_sns_topic_policy", json!({"arn": "x"})),
    );
    let ds = match App::new().stack(stack).synth() {
        Ok(_) => panic!("synthesized"),
        Err(ds) => ds,
    };
    let has = |code: Code, path: &str, message: &str, help: &str| {
        ds.iter().any(|d| {
            d.code == code
                && d.path.contains(path)
                && d.message.contains(message)
                && d.help.contains(help)
        })
    };
    assert!(
        has(
            Code::OverrideUnknownProperty,
            "raw/Topic",
            "raw resource `AWS::SNS::Topic`: AWS::SNS::Topic has no property `DisplayNme`",
            "did you mean `DisplayName`?"
        ),
        "{ds}"
    );
    assert!(
        has(
            Code::OverrideUnknownProperty,
            "raw/Topic",
            "aws_sns_topic has no attribute `display_nme`",
            "did you mean `display_name`?"
        ),
        "{ds}"
    );
    assert!(
        has(
            Code::OverrideWrongType,
            "raw/Topic",
            "`FifoTopic` takes a boolean",
            ""
        ),
        "{ds}"
    );
    assert!(
        has(
            Code::MissingRequiredProperty,
            "raw/Policy",
            "AWS::SNS::TopicPolicy requires the property `PolicyDocument`",
            "give `PolicyDocument`"
        ),
        "{ds}"
    );
    assert!(
        has(
            Code::MissingRequiredProperty,
            "raw/Policy",
            "aws_sns_topic_policy requires the attribute `policy`",
            ""
        ),
        "{ds}"
    );
}

/// A team's stack on the shared cluster `ml-prod` (stated to run the Pod Identity agent): its
/// own bucket, staging one model; the stager's namespace and service account when given.
fn shared_cluster_stack(name: &str, stager: Option<(&str, &str)>) -> Stack {
    shared_cluster_stack_with(name, stager, &[ClusterAddOn::PodIdentityAgent])
}

/// [`shared_cluster_stack`] with the cluster stated to run `runs`.
fn shared_cluster_stack_with(
    name: &str,
    stager: Option<(&str, &str)>,
    runs: &[ClusterAddOn],
) -> Stack {
    let mut stack = Stack::new(name, "us-east-2");
    let s = stack.cloudformation_stage("foundation");
    let mut cluster = ExistingEksCluster::new("Eks", "ml-prod").oidc_issuer_url(
        "https://oidc.eks.us-east-2.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF",
    );
    for add_on in runs {
        cluster = cluster.runs(*add_on);
    }
    let eks = stack.add(s, cluster);
    let store = ModelStore::new(
        "Weights",
        format!("{name}-weights-111122223333-us-east-2"),
        &eks,
    );
    let store = stack.add(
        s,
        match stager {
            Some((namespace, account)) => store.stager(namespace, account),
            None => store,
        },
    );
    let k = stack.kubernetes_stage("weights");
    stack.add(
        k,
        WeightsStaging::new(
            "Stage",
            &store,
            "Qwen/Qwen3-235B-A22B",
            "0123456789abcdef0123456789abcdef01234567",
        ),
    );
    stack
}

/// Two stacks on one imported cluster that would create the same Pod Identity association and
/// staging objects get a diagnostic naming both; with a stager of its own, the second does not.
#[test]
fn two_stacks_on_one_shared_cluster_do_not_collide_silently() {
    let ds = match App::new()
        .stack(shared_cluster_stack("team-a", None))
        .stack(shared_cluster_stack("team-b", None))
        .synth()
    {
        Ok(_) => panic!("synthesized"),
        Err(ds) => ds,
    };
    let shared: Vec<_> = ds
        .iter()
        .filter(|d| d.code == Code::SharedClusterObject)
        .collect();
    assert!(
        shared.iter().any(|d| d.path.starts_with("team-b/Weights")
            && d.message.contains("the EKS Pod Identity association of service account model-weights/weights-stager in cluster `ml-prod` (us-east-2)")
            && d.message.contains("`team-a/Weights/")),
        "{ds}"
    );
    assert!(
        shared
            .iter()
            .any(|d| d.path.starts_with("team-b/Stage")
                && d.message.contains("the Job `model-weights/")),
        "{ds}"
    );
    let app = App::new()
        .stack(shared_cluster_stack("team-a", None))
        .stack(shared_cluster_stack(
            "team-b",
            Some(("team-b-weights", "team-b-stager")),
        ));
    let assembly = app.synth().unwrap_or_else(|e| panic!("{e}"));
    let foundation = template(&assembly, "team-b/01-foundation.template.json");
    assert!(
        foundation["Resources"]
            .as_object()
            .unwrap()
            .values()
            .any(|r| r["Type"] == "AWS::EKS::PodIdentityAssociation"
                && r["Properties"]["Namespace"] == "team-b-weights"
                && r["Properties"]["ServiceAccount"] == "team-b-stager"),
        "{foundation}"
    );
    // A name that is no Kubernetes name is refused at its field.
    let ds = App::new()
        .stack(shared_cluster_stack("team-c", Some(("Team_C", "stager"))))
        .validate();
    assert!(
        ds.iter()
            .any(|d| d.code == Code::InvalidModelStore
                && d.field.as_deref() == Some("stager.namespace")),
        "{ds}"
    );
}

/// Two stacks each creating a cluster of one name describe two clusters, not one shared: their
/// objects are not compared (as in a synthetic app of many copies of a reference).
#[test]
fn stacks_creating_their_own_clusters_are_not_compared() {
    App::new()
        .stack(crate::reference::kimi_k3_hyperpod_stack("copy-a"))
        .stack(crate::reference::kimi_k3_hyperpod_stack("copy-b"))
        .synth()
        .unwrap_or_else(|e| panic!("{e}"));
}
