//! The EKS path: Capacity Block node groups, the vLLM Deployment and its Service, and the
//! mistakes that would otherwise surface only at apply time.

use crate::reference::{kimi_k3_server, CAPACITY_BLOCK_AZ_ID, CAPACITY_BLOCK_RESERVATION_ID};
use hyperforge::app::Stack;
use hyperforge::constructs::*;
use hyperforge::{App, Code};
use serde_json::{json, Value};

fn eks_app(
    gpu_group: impl FnOnce(&NetworkHandle, &EksClusterHandle) -> ManagedNodeGroup,
    deployment: VllmDeployment,
) -> App {
    let mut stack = Stack::new("eks", "us-west-2");
    let f = stack.cloudformation_stage("foundation");
    let net = stack.add(f, Network::new("Network").gpu_subnet(CAPACITY_BLOCK_AZ_ID));
    let eks = stack.add(
        f,
        EksCluster::new("Eks", "eks")
            .subnets(&net.private_subnets)
            .vpc(&net.vpc),
    );
    let group = gpu_group(&net, &eks);
    stack.add(f, group);
    stack.helm_stage("nvidia-device-plugin", HelmRelease::nvidia_device_plugin());
    let w = stack.kubernetes_stage("workload");
    // The load balancer goes where its scheme needs it: private or public subnets.
    let deployment = match deployment.exposure() {
        Exposure::ClusterIp => deployment,
        Exposure::InternetFacingLoadBalancer => {
            deployment.load_balancer_subnets(&net.public_subnets)
        }
        Exposure::InternalLoadBalancer => deployment.load_balancer_subnets(&net.private_subnets),
    };
    stack.add(w, deployment);
    App::new().stack(stack)
}

fn block() -> NodeCapacity {
    NodeCapacity::capacity_block_of(CAPACITY_BLOCK_RESERVATION_ID, CAPACITY_BLOCK_AZ_ID, 1)
}

fn deployment() -> VllmDeployment {
    VllmDeployment::new("KimiK3", kimi_k3_server(), "p6-b300.48xlarge")
}

#[test]
fn capacity_block_group_lowers_to_launch_template_and_node_group() {
    let app = eks_app(
        |net, eks| {
            ManagedNodeGroup::gpu(
                "Gpu",
                &eks.cluster,
                "p6-b300.48xlarge",
                net.gpu_subnet.iter(),
            )
            .capacity(block())
        },
        deployment(),
    );
    let assembly = app.synth().unwrap_or_else(|d| panic!("{d}"));
    let t: Value =
        serde_json::from_str(assembly.text("eks/01-foundation.template.json").unwrap()).unwrap();
    let lt = &t["Resources"]["GpuLaunchTemplate"]["Properties"]["LaunchTemplateData"];
    assert_eq!(lt["InstanceMarketOptions"]["MarketType"], "capacity-block");
    assert_eq!(
        lt["CapacityReservationSpecification"]["CapacityReservationTarget"]
            ["CapacityReservationId"],
        json!({"Ref": "GpuCapacityReservationId"})
    );
    assert_eq!(lt["InstanceType"], "p6-b300.48xlarge");
    assert_eq!(lt["MetadataOptions"]["HttpTokens"], "required");
    let ng = &t["Resources"]["GpuNodeGroup"]["Properties"];
    assert_eq!(ng["CapacityType"], "CAPACITY_BLOCK");
    assert_eq!(ng["AmiType"], "AL2023_x86_64_NVIDIA");
    assert_eq!(ng["Subnets"], json!([{"Ref": "NetworkGpuSubnet"}]));
    assert!(
        ng.get("InstanceTypes").is_none(),
        "instance type belongs in the launch template only"
    );
    assert_eq!(ng["Taints"][0]["Key"], "nvidia.com/gpu");
}

#[test]
fn capacity_block_group_with_a_subnet_in_another_zone_is_refused() {
    let app = eks_app(
        |net, eks| {
            ManagedNodeGroup::gpu(
                "Gpu",
                &eks.cluster,
                "p6-b300.48xlarge",
                net.private_subnets.iter(),
            )
            .capacity(block())
        },
        deployment(),
    );
    let err = app.synth().unwrap_err();
    assert!(
        err.contains(Code::CapacityBlockSubnetZone, "eks/Gpu"),
        "{err}"
    );
}

#[test]
fn capacity_block_on_an_unknown_instance_type_is_refused() {
    let app = eks_app(
        |net, eks| {
            ManagedNodeGroup::gpu(
                "Gpu",
                &eks.cluster,
                "p9-z900.48xlarge",
                net.gpu_subnet.iter(),
            )
            .capacity(block())
        },
        deployment(),
    );
    let err = app.synth().unwrap_err();
    assert!(err.contains(Code::UnknownInstanceType, "eks/Gpu"), "{err}");
}

#[test]
fn a_deployment_cannot_ask_for_more_gpus_than_the_instance_has() {
    let app = eks_app(
        |net, eks| {
            ManagedNodeGroup::gpu(
                "Gpu",
                &eks.cluster,
                "p6-b300.48xlarge",
                net.gpu_subnet.iter(),
            )
        },
        deployment().gpus(16),
    );
    let err = app.synth().unwrap_err();
    assert!(
        err.contains(Code::GpuRequestExceedsInstance, "eks/KimiK3"),
        "{err}"
    );
}

#[test]
fn a_public_service_needs_the_explicit_opt_in() {
    let app = eks_app(
        |net, eks| {
            ManagedNodeGroup::gpu(
                "Gpu",
                &eks.cluster,
                "p6-b300.48xlarge",
                net.gpu_subnet.iter(),
            )
        },
        deployment().service_annotation(
            "service.beta.kubernetes.io/aws-load-balancer-scheme",
            "internet-facing",
        ),
    );
    let err = app.synth().unwrap_err();
    assert!(
        err.contains(Code::PublicServiceWithoutOptIn, "eks/KimiK3"),
        "{err}"
    );

    let app = eks_app(
        |net, eks| {
            ManagedNodeGroup::gpu(
                "Gpu",
                &eks.cluster,
                "p6-b300.48xlarge",
                net.gpu_subnet.iter(),
            )
        },
        deployment().internet_facing_load_balancer(),
    );
    let yaml = app
        .synth()
        .unwrap_or_else(|d| panic!("{d}"))
        .text("eks/03-workload.yaml")
        .unwrap()
        .to_owned();
    assert!(yaml.contains("service.beta.kubernetes.io/aws-load-balancer-scheme: internet-facing"));
}

#[test]
fn the_deployment_is_internal_with_gpus_shm_probes_and_a_secret_token() {
    let app = eks_app(
        |net, eks| {
            ManagedNodeGroup::gpu(
                "Gpu",
                &eks.cluster,
                "p6-b300.48xlarge",
                net.gpu_subnet.iter(),
            )
        },
        VllmDeployment::new(
            "KimiK3",
            kimi_k3_server().hf_token_secret("hf-token", "token"),
            "p6-b300.48xlarge",
        ),
    );
    let assembly = app.synth().unwrap_or_else(|d| panic!("{d}"));
    let yaml = assembly.text("eks/03-workload.yaml").unwrap();
    let docs: Vec<serde_json::Value> = yaml
        .split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_yaml::from_str(d).unwrap())
        .collect();
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "ServiceAccount",
            "Deployment",
            "Service",
            "PodDisruptionBudget",
            "NetworkPolicy"
        ]
    );
    let pod = &docs[2]["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], "8");
    assert_eq!(c["resources"]["requests"]["nvidia.com/gpu"], "8");
    assert_eq!(pod["volumes"][0]["emptyDir"]["medium"], "Memory");
    assert_eq!(pod["volumes"][0]["emptyDir"]["sizeLimit"], "64Gi");
    assert_eq!(
        pod["nodeSelector"]["node.kubernetes.io/instance-type"],
        "p6-b300.48xlarge"
    );
    assert_eq!(pod["tolerations"][0]["key"], "nvidia.com/gpu");
    assert_eq!(c["startupProbe"]["httpGet"]["path"], "/health");
    // 7,260 s startup budget for 1.56 TB at 500 MB/s plus load and warm-up, in 10 s periods.
    assert_eq!(c["startupProbe"]["failureThreshold"], 726);
    let token = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "HF_TOKEN")
        .unwrap();
    assert_eq!(token["valueFrom"]["secretKeyRef"]["name"], "hf-token");
    assert!(token.get("value").is_none());
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(docs[3]["spec"]["ports"][0]["port"], 8000);
    assert_eq!(
        docs[3]["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-scheme"],
        "internal"
    );
}

#[test]
fn a_literal_token_in_the_environment_is_refused() {
    let app = eks_app(
        |net, eks| {
            ManagedNodeGroup::gpu(
                "Gpu",
                &eks.cluster,
                "p6-b300.48xlarge",
                net.gpu_subnet.iter(),
            )
        },
        VllmDeployment::new(
            "KimiK3",
            kimi_k3_server().env("HF_TOKEN", "hf_abc"),
            "p6-b300.48xlarge",
        ),
    );
    let err = app.synth().unwrap_err();
    assert!(
        err.contains(Code::SecretLiteralInEnvironment, "eks/KimiK3"),
        "{err}"
    );
}

fn purchase_app(purchase: CapacityBlockPurchase) -> App {
    eks_app(
        |net, eks| {
            ManagedNodeGroup::gpu(
                "Gpu",
                &eks.cluster,
                "p6-b300.48xlarge",
                net.gpu_subnet.iter(),
            )
            .capacity(NodeCapacity::buy_capacity_block(
                purchase,
                CAPACITY_BLOCK_AZ_ID,
                1,
            ))
        },
        deployment(),
    )
}

#[test]
fn buying_a_capacity_block_needs_the_non_refundable_acknowledgement() {
    let err = purchase_app(CapacityBlockPurchase::new("cb-0123456789abcdef0"))
        .synth()
        .unwrap_err();
    assert!(
        err.contains(Code::CapacityBlockPurchaseWithoutOptIn, "eks/Gpu"),
        "{err}"
    );
    assert!(err.to_string().contains("cannot be cancelled or refunded"));
}

#[test]
fn an_acknowledged_purchase_becomes_a_terraform_reservation_the_launch_template_targets() {
    let assembly =
        purchase_app(CapacityBlockPurchase::new("cb-0123456789abcdef0").non_refundable())
            .synth()
            .unwrap_or_else(|d| panic!("{d}"));
    let tf: Value = serde_json::from_str(
        assembly
            .text("eks/terraform/01-foundation/main.tf.json")
            .unwrap(),
    )
    .unwrap();
    let reservation = &tf["resource"]["aws_ec2_capacity_block_reservation"]["gpu_capacity_block"];
    assert_eq!(
        reservation["capacity_block_offering_id"],
        "cb-0123456789abcdef0"
    );
    assert_eq!(reservation["instance_platform"], "Linux/UNIX");
    assert_eq!(
        tf["resource"]["aws_launch_template"]["gpu_launch_template"]
            ["capacity_reservation_specification"]["capacity_reservation_target"]
            ["capacity_reservation_id"],
        "${aws_ec2_capacity_block_reservation.gpu_capacity_block.id}"
    );
    // CloudFormation cannot buy one: the reservation id stays a parameter, with no default.
    let cfn: Value =
        serde_json::from_str(assembly.text("eks/01-foundation.template.json").unwrap()).unwrap();
    assert!(cfn["Parameters"]["GpuCapacityReservationId"]
        .get("Default")
        .is_none());
}

/// The objects of the Karpenter reference's GPU capacity stage.
fn karpenter_objects(app: &App) -> Vec<Value> {
    let assembly = app.synth().unwrap_or_else(|d| panic!("{d}"));
    let text = assembly
        .text("kimi-k3-eks-karpenter/06-gpu-capacity.yaml")
        .expect("the capacity stage");
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("YAML"))
        .collect()
}

#[test]
fn karpenter_pins_the_ami_and_never_replaces_a_drifted_capacity_block_node() {
    let objects = karpenter_objects(&crate::reference::kimi_k3_eks_karpenter());
    let class = objects
        .iter()
        .find(|o| o["kind"] == "EC2NodeClass")
        .unwrap();
    let alias = class["spec"]["amiSelectorTerms"][0]["alias"]
        .as_str()
        .unwrap();
    assert_eq!(
        alias,
        format!("al2023@{}", karpenter::DEFAULT_AL2023_AMI_VERSION)
    );
    assert!(
        !alias.ends_with("@latest"),
        "a floating alias drifts every node at each release"
    );
    let pool = objects.iter().find(|o| o["kind"] == "NodePool").unwrap();
    let budgets = pool["spec"]["disruption"]["budgets"].as_array().unwrap();
    assert!(
        budgets
            .iter()
            .any(|b| b["nodes"] == "0" && b["reasons"] == json!(["Drifted"])),
        "{budgets:?}"
    );
    // Empty nodes are still consolidated: no budget blocks every reason.
    assert!(budgets.iter().all(|b| b.get("reasons").is_some()));

    // The release is a builder option.
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
        ReservationSelector::Id(CAPACITY_BLOCK_RESERVATION_ID.to_owned()),
    )
    .ami_version("v20990101");
    let class = pool.ec2_node_class("s", &Default::default());
    assert_eq!(
        class.spec.ami_selector_terms[0].alias.as_deref(),
        Some("al2023@v20990101")
    );
}

/// A Capacity Block group is created at size 0 in both formats (EKS: non-zero before the
/// block is active only produces launch errors), Terraform leaves the size to the runbook,
/// and the runbook checks the block's state before scaling the named group.
#[test]
fn a_capacity_block_group_starts_at_zero_and_the_runbook_scales_it_once_active() {
    let assembly = crate::reference::kimi_k3_eks()
        .synth()
        .unwrap_or_else(|d| panic!("{d}"));
    let t: Value =
        serde_json::from_str(assembly.text("kimi-k3-eks/02-nodes.template.json").unwrap()).unwrap();
    let ng = &t["Resources"]["GpuNodesNodeGroup"]["Properties"];
    assert_eq!(ng["ScalingConfig"]["DesiredSize"], 0);
    assert_eq!(ng["ScalingConfig"]["MaxSize"], 1);
    let name = ng["NodegroupName"].as_str().expect("a named group");
    // The system group keeps its size and a generated name.
    let system = &t["Resources"]["SystemNodesNodeGroup"]["Properties"];
    assert_eq!(system["ScalingConfig"]["DesiredSize"], 2);
    assert!(system.get("NodegroupName").is_none());

    let tf: Value = serde_json::from_str(
        assembly
            .text("kimi-k3-eks/terraform/01-foundation/main.tf.json")
            .unwrap(),
    )
    .unwrap();
    let group = &tf["resource"]["aws_eks_node_group"]["gpu_nodes_node_group"];
    assert_eq!(group["scaling_config"]["desired_size"], 0);
    assert_eq!(group["node_group_name"], name);
    assert_eq!(
        group["lifecycle"]["ignore_changes"],
        json!(["scaling_config[0].desired_size"])
    );

    // The scaling is a step of the nodes stage, which every path carries out (the runbook
    // section 2 and its Terraform path; `tests/it/runbook_script.rs` checks that they all do).
    let nodes = assembly.manifest().stacks[0]
        .stage("nodes")
        .unwrap()
        .steps()
        .to_vec();
    assert_eq!(
        nodes,
        [
            hyperforge::assembly::manifest::Step::ScaleCapacityBlockNodeGroup {
                cluster: "kimi-k3-eks".into(),
                node_group: name.to_owned(),
                min: 0,
                desired: 1,
                max: 1,
                // The reference block's documented placeholder start, which the stage's
                // schedule scales the group up at.
                scheduled_at: Some("2027-01-08T04:55Z".into()),
            }
        ]
    );
    let script = nodes[0].script("us-west-2");
    // The block is read from the group's deployed launch template (the same on every path),
    // and the group is scaled only once it is active.
    let read = script
        .find("CapacityReservationTarget.CapacityReservationId")
        .unwrap();
    let check = script
        .find("--query 'CapacityReservations[0].State' --output text")
        .expect("the step reads the block's state");
    let active = script.find("if [ \"$current\" != active ]; then").unwrap();
    let scale = script
        .find("--scaling-config minSize=0,maxSize=1,desiredSize=1")
        .expect("the step scales the group");
    assert!(read < check && check < active && active < scale, "{script}");
    let runbook = assembly.text("kimi-k3-eks/RUNBOOK.md").unwrap();
    let at = runbook.find(&script).expect("the runbook carries the step");
    let workload = runbook
        .find("hyperforge fill --out . kimi-k3-eks workload ")
        .unwrap();
    assert!(at < workload);
}
