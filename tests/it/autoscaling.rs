//! Autoscaling within what is reserved: the KEDA ScaledObject and TriggerAuthentication of an
//! autoscaled `VllmDeployment` (and a Deployment that leaves `replicas` to them), the
//! `autoScalingSpec` of an autoscaled `InferenceEndpoint`, the KEDA operator's role and Helm
//! preset, and the rules HF0360-HF0364, each with a passing and a failing case. The objects
//! are checked against KEDA's and the inference operator's CRDs (strict), kubernetes-validate
//! (strict) and the role's template with cfn-lint and checkov.

use crate::external_validators;
use crate::reference::{
    self, kimi_k3_server, CAPACITY_BLOCK_AZ_ID, CAPACITY_BLOCK_RESERVATION_ID, REGION,
};
use hyperforge::constructs::vllm::objects::trigger_authentication_name;
use hyperforge::constructs::*;
use hyperforge::{App, Assembly, Code, Diagnostics, Severity, Stack};
use serde::Deserialize;
use serde_json::Value;
use std::path::PathBuf;

const AMP: &str = "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-4567-89ef-0123-456789abcdef";

/// How the EKS test stack gets its p6-b300 nodes.
struct Gpus {
    /// A node group on a Capacity Block of `block` instances, desired size `desired`.
    block: i64,
    desired: i64,
    /// An extra on-demand node group: (desired, max).
    on_demand: Option<(i64, i64)>,
}

const ONE_BLOCK_NODE: Gpus = Gpus {
    block: 1,
    desired: 1,
    on_demand: None,
};

/// Kimi K3 on EKS (as the reference) with `autoscaling` on its Deployment, the KEDA operator's
/// role and the KEDA chart.
fn eks(gpus: Gpus, autoscaling: Option<Autoscaling>) -> App {
    let name = "scaled-eks";
    let mut stack = Stack::new(name, REGION);
    let foundation = stack.cloudformation_stage("foundation");
    let network = stack.add(
        foundation,
        Network::new("Network").gpu_subnet(CAPACITY_BLOCK_AZ_ID),
    );
    let sg = stack.add(
        foundation,
        ClusterSecurityGroup::new("ClusterSecurityGroup", &network.vpc),
    );
    let eks = stack.add(
        foundation,
        EksCluster::new("Eks", "scaled-eks")
            .subnets(&network.private_subnets)
            .vpc(&network.vpc)
            .security_group(&sg.group),
    );
    stack.add(
        foundation,
        LoadBalancerController::new("LoadBalancerController", &eks.cluster),
    );
    stack.add(
        foundation,
        KedaOperatorRole::new("KedaOperator", &eks.cluster),
    );
    let nodes = stack.cloudformation_stage("nodes");
    stack.add(
        nodes,
        ManagedNodeGroup::system("SystemNodes", &eks.cluster, &network.private_subnets),
    );
    stack.add(
        nodes,
        ManagedNodeGroup::gpu(
            "GpuNodes",
            &eks.cluster,
            "p6-b300.48xlarge",
            network.gpu_subnet.iter(),
        )
        .capacity(NodeCapacity::capacity_block_of(
            CAPACITY_BLOCK_RESERVATION_ID,
            CAPACITY_BLOCK_AZ_ID,
            u32::try_from(gpus.block).unwrap(),
        ))
        .scaling(0, gpus.desired, gpus.block)
        .security_group(&sg.group),
    );
    if let Some((desired, max)) = gpus.on_demand {
        stack.add(
            nodes,
            ManagedNodeGroup::gpu(
                "OnDemandGpuNodes",
                &eks.cluster,
                "p6-b300.48xlarge",
                network.gpu_subnet.iter(),
            )
            .scaling(0, desired, max)
            .security_group(&sg.group),
        );
    }
    stack.helm_stage("nvidia-device-plugin", HelmRelease::nvidia_device_plugin());
    stack.helm_stage(
        "aws-load-balancer-controller",
        HelmRelease::aws_load_balancer_controller(&eks.name, REGION, &network.vpc),
    );
    stack.helm_stage("keda", HelmRelease::keda(&eks.name));
    let workload = stack.kubernetes_stage("workload");
    let mut deployment = VllmDeployment::new("KimiK3", kimi_k3_server(), "p6-b300.48xlarge")
        .name("kimi-k3")
        .load_balancer_subnets(&network.private_subnets);
    if let Some(a) = autoscaling {
        deployment = deployment.autoscaling(a);
    }
    stack.add(workload, deployment);
    App::new().stack(stack)
}

/// The HyperPod reference stack (one instance on a training plan) with a second endpoint that
/// autoscales.
fn hyperpod(autoscaling: Autoscaling) -> App {
    let mut stack = reference::kimi_k3_hyperpod_stack("scaled-hyperpod");
    let stage = stack.kubernetes_stage("scaled");
    stack.add(
        stage,
        InferenceEndpoint::new("Scaled", kimi_k3_server(), "ml.p6-b300.48xlarge")
            .name("kimik3-scaled")
            .autoscaling(autoscaling),
    );
    App::new().stack(stack)
}

fn with(ds: &Diagnostics, code: Code) -> Vec<String> {
    ds.iter()
        .filter(|d| d.code == code)
        .map(|d| format!("{} {}", d.message, d.notes.join("; ")))
        .collect()
}

fn errors(ds: &Diagnostics) -> Vec<String> {
    ds.iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| d.to_string())
        .collect()
}

fn objects(assembly: &Assembly, path: &str) -> Vec<Value> {
    let text = assembly.text(path).unwrap_or_else(|| panic!("no {path}"));
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .collect()
}

fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Option<&'a Value> {
    objects.iter().find(|o| o["kind"] == kind)
}

/// The Kubernetes artifact of the stage named `stage`.
fn stage_file(assembly: &Assembly, stage: &str) -> String {
    assembly
        .files()
        .keys()
        .find(|p| p.ends_with(&format!("-{stage}.yaml")))
        .unwrap_or_else(|| panic!("no stage {stage}"))
        .clone()
}

// --- EKS objects ------------------------------------------------------------------------------

#[test]
fn without_autoscaling_the_deployment_keeps_its_replicas_and_no_keda_object_appears() {
    let assembly = eks(ONE_BLOCK_NODE, None).synth().unwrap();
    let path = stage_file(&assembly, "workload");
    let objects = objects(&assembly, &path);
    let deployment = of_kind(&objects, "Deployment").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert!(of_kind(&objects, "ScaledObject").is_none());
    assert!(of_kind(&objects, "TriggerAuthentication").is_none());
}

#[test]
fn an_autoscaled_deployment_gets_a_scaled_object_on_vllms_queue() {
    let a = Autoscaling::new(1, 1, AMP);
    let assembly = eks(ONE_BLOCK_NODE, Some(a)).synth().unwrap();
    let path = stage_file(&assembly, "workload");
    let objects = objects(&assembly, &path);
    let deployment = of_kind(&objects, "Deployment").unwrap();
    assert!(
        deployment["spec"].get("replicas").is_none(),
        "KEDA owns the count: {deployment}"
    );
    let so = of_kind(&objects, "ScaledObject").unwrap();
    assert_eq!(so["apiVersion"], "keda.sh/v1alpha1");
    assert_eq!(so["metadata"]["namespace"], "kimi-k3");
    let spec = &so["spec"];
    assert_eq!(spec["scaleTargetRef"]["kind"], "Deployment");
    assert_eq!(spec["scaleTargetRef"]["name"], "kimi-k3");
    assert_eq!(spec["minReplicaCount"], 1);
    assert_eq!(spec["maxReplicaCount"], 1);
    assert_eq!(spec["pollingInterval"], 30);
    assert_eq!(spec["cooldownPeriod"], 600);
    let behavior = &spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"];
    assert_eq!(behavior["scaleUp"]["stabilizationWindowSeconds"], 0);
    assert_eq!(behavior["scaleDown"]["stabilizationWindowSeconds"], 1800);
    let trigger = &spec["triggers"][0];
    assert_eq!(trigger["type"], "prometheus");
    assert_eq!(trigger["metricType"], "AverageValue");
    let served = kimi_k3_server().served_name().to_owned();
    assert_eq!(
        trigger["metadata"]["query"],
        format!("sum(vllm:num_requests_waiting{{model_name=\"{served}\"}})")
    );
    assert_eq!(trigger["metadata"]["serverAddress"], AMP);
    assert_eq!(trigger["metadata"]["threshold"], "4");
    assert_eq!(trigger["metadata"]["awsRegion"], REGION);
    assert_eq!(trigger["metadata"]["ignoreNullValues"], "false");
    assert_eq!(
        trigger["authenticationRef"]["kind"],
        "TriggerAuthentication"
    );
    let auth_name = trigger_authentication_name("kimi-k3");
    assert_eq!(trigger["authenticationRef"]["name"], auth_name.as_str());
    let ta = of_kind(&objects, "TriggerAuthentication").unwrap();
    assert_eq!(ta["metadata"]["name"], auth_name.as_str());
    assert_eq!(ta["metadata"]["namespace"], "kimi-k3");
    assert_eq!(ta["spec"]["podIdentity"]["provider"], "aws");
    assert_eq!(ta["spec"]["podIdentity"]["identityOwner"], "keda");
    // The TriggerAuthentication is applied before the ScaledObject that names it.
    let at = |kind: &str| objects.iter().position(|o| o["kind"] == kind).unwrap();
    assert!(at("TriggerAuthentication") < at("ScaledObject"));
}

#[test]
fn a_custom_query_target_and_times_reach_the_scaled_object() {
    let a = Autoscaling::new(1, 1, AMP)
        .query("sum(rate(vllm:request_success_total[2m]))")
        .target_value(2.5)
        .polling_interval_secs(15)
        .cooldown_secs(900)
        .scale_up_stabilization_secs(60)
        .scale_down_stabilization_secs(3600);
    let assembly = eks(ONE_BLOCK_NODE, Some(a)).synth().unwrap();
    let objects = objects(&assembly, &stage_file(&assembly, "workload"));
    let spec = &of_kind(&objects, "ScaledObject").unwrap()["spec"];
    assert_eq!(
        spec["triggers"][0]["metadata"]["query"],
        "sum(rate(vllm:request_success_total[2m]))"
    );
    assert_eq!(spec["triggers"][0]["metadata"]["threshold"], "2.5");
    assert_eq!(spec["pollingInterval"], 15);
    assert_eq!(spec["cooldownPeriod"], 900);
    let behavior = &spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"];
    assert_eq!(behavior["scaleUp"]["stabilizationWindowSeconds"], 60);
    assert_eq!(behavior["scaleDown"]["stabilizationWindowSeconds"], 3600);
}

/// The EKS objects pass kubernetes-validate (strict) and the KEDA objects their CRDs (strict:
/// no unknown field), with negative controls.
#[test]
fn the_eks_objects_pass_kubernetes_validate_and_the_keda_crds() {
    let assembly = eks(ONE_BLOCK_NODE, Some(Autoscaling::new(1, 1, AMP)))
        .synth()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    assembly.write_to(dir.path()).unwrap();
    let file = dir.path().join(stage_file(&assembly, "workload"));
    if let Err(findings) = external_validators::kubernetes_validate(std::slice::from_ref(&file)) {
        panic!("{findings}");
    }
    for crd in [
        crate::common::keda_scaled_object_crd(),
        crate::common::keda_trigger_authentication_crd(),
    ] {
        if let Err(findings) = external_validators::validate_against_crd_version(
            &crd,
            "v1alpha1",
            std::slice::from_ref(&file),
        ) {
            panic!("{}: {findings}", crd.display());
        }
    }
    // A misspelt field is refused.
    let text = std::fs::read_to_string(&file).unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, text.replace("identityOwner", "identityOwnr")).unwrap();
    assert!(external_validators::validate_against_crd_version(
        &crate::common::keda_trigger_authentication_crd(),
        "v1alpha1",
        &[bad],
    )
    .is_err());
}

/// The KEDA operator's role: `aps:QueryMetrics` on the account's workspaces in the region,
/// assumed through EKS Pod Identity by `keda/keda-operator`; every template of the stack passes
/// cfn-lint and checkov.
#[test]
fn the_keda_operator_role_queries_amp_and_passes_cfn_lint_and_checkov() {
    let assembly = eks(ONE_BLOCK_NODE, Some(Autoscaling::new(1, 1, AMP)))
        .synth()
        .unwrap();
    let template_path = assembly
        .files()
        .keys()
        .find(|p| p.contains("foundation") && p.ends_with(".json"))
        .unwrap()
        .clone();
    let template: Value = serde_json::from_str(assembly.text(&template_path).unwrap()).unwrap();
    let resources = template["Resources"].as_object().unwrap();
    let role = &resources["KedaOperatorRole"];
    assert_eq!(role["Type"], "AWS::IAM::Role");
    let text = role.to_string();
    assert!(text.contains("pods.eks.amazonaws.com"), "{text}");
    let statement = &role["Properties"]["Policies"][0]["PolicyDocument"]["Statement"][0];
    assert_eq!(statement["Action"], "aps:QueryMetrics");
    let resource = statement["Resource"].to_string();
    assert!(
        resource.contains(":aps:${AWS::Region}:${AWS::AccountId}:workspace/*"),
        "{resource}"
    );
    let association = &resources["KedaOperatorPodIdentityAssociation"]["Properties"];
    assert_eq!(association["Namespace"], "keda");
    assert_eq!(association["ServiceAccount"], "keda-operator");

    let dir = tempfile::tempdir().unwrap();
    assembly.write_to(dir.path()).unwrap();
    external_validators::assert_cloudformation_passes(dir.path());
}

#[test]
fn the_keda_preset_pins_the_chart_of_the_crds() {
    let keda = HelmRelease::keda("c");
    assert_eq!(keda.namespace, "keda");
    match &keda.chart {
        hyperforge::constructs::helm::ChartSource::Repository {
            repo,
            chart,
            version,
        } => {
            assert_eq!(repo, "https://kedacore.github.io/charts");
            assert_eq!(chart, "keda");
            assert_eq!(version, "2.17.1");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        keda.values["serviceAccount"]["operator"]["name"],
        "keda-operator"
    );
}

/// The `keda` namespace does not exist before the chart: the runbook's command and the
/// Terraform release create it (kube-system releases do not ask).
#[test]
fn the_keda_release_creates_its_namespace() {
    let app = eks(ONE_BLOCK_NODE, Some(Autoscaling::new(1, 1, AMP)));
    let assembly = app.synth().unwrap();
    let runbook = assembly
        .files()
        .keys()
        .find(|p| p.ends_with("RUNBOOK.md"))
        .map(|p| assembly.text(p).unwrap().to_owned())
        .unwrap();
    assert!(
        runbook.contains("--namespace keda --create-namespace -f"),
        "{runbook}"
    );
    assert!(!runbook.contains("--namespace kube-system --create-namespace"));
    let tf: Vec<Value> = assembly
        .files()
        .iter()
        .filter(|(p, _)| p.ends_with(".tf.json"))
        .map(|(_, b)| serde_json::from_slice(b).unwrap())
        .collect();
    let releases: Vec<&Value> = tf
        .iter()
        .filter_map(|m| m["resource"]["helm_release"].as_object())
        .flat_map(|r| r.values())
        .collect();
    assert!(!releases.is_empty(), "no helm_release");
    // Every module, the KEDA role's and release's included, against the provider schemas.
    let schema = crate::common::tf_schema::Schema::committed();
    for module in &tf {
        let problems = schema.check(module);
        assert!(problems.is_empty(), "{problems:?}");
    }
    for r in releases {
        let created = r.get("create_namespace") == Some(&Value::Bool(true));
        assert_eq!(created, r["namespace"] != "kube-system", "{r}");
    }
}

// --- HyperPod ---------------------------------------------------------------------------------

#[test]
fn an_autoscaled_endpoint_fills_auto_scaling_spec_and_passes_the_operator_crd() {
    let a = Autoscaling::new(1, 1, AMP);
    let app = hyperpod(a);
    let ds = app.validate();
    assert!(errors(&ds).is_empty(), "{ds}");
    let assembly = app.synth().unwrap();
    let path = stage_file(&assembly, "scaled");
    let objects = objects(&assembly, &path);
    let iec = of_kind(&objects, "InferenceEndpointConfig").unwrap();
    let spec = &iec["spec"]["autoScalingSpec"];
    assert_eq!(spec["minReplicaCount"], 1);
    assert_eq!(spec["maxReplicaCount"], 1);
    assert_eq!(spec["pollingInterval"], 30);
    assert_eq!(spec["cooldownPeriod"], 600);
    assert_eq!(spec["scaleUpStabilizationTime"], 0);
    assert_eq!(spec["scaleDownStabilizationTime"], 1800);
    let trigger = &spec["prometheusTrigger"];
    assert_eq!(trigger["serverAddress"], AMP);
    assert_eq!(trigger["metricType"], "Average");
    assert_eq!(trigger["targetValue"], 4.0);
    assert!(trigger["query"]
        .as_str()
        .unwrap()
        .starts_with("sum(vllm:num_requests_waiting{model_name="));
    // The reference endpoint scales on its stack's workspace, whose id the stage fills in.
    let reference = objects_of(&assembly, "inference");
    let reference_spec = &reference[0]["spec"]["autoScalingSpec"];
    assert_eq!(reference_spec["maxReplicaCount"], 1);
    assert!(reference_spec["prometheusTrigger"]["serverAddress"]
        .as_str()
        .unwrap()
        .ends_with("/workspaces/ws-hyperforge-output-MetricsWorkspaceId"));

    let dir = tempfile::tempdir().unwrap();
    assembly.write_to(dir.path()).unwrap();
    let file: PathBuf = dir.path().join(&path);
    if let Err(findings) = external_validators::validate_against_crd_version(
        &crate::common::inference_endpoint_config_crd(),
        "v1",
        std::slice::from_ref(&file),
    ) {
        panic!("{findings}");
    }
    // The operator's pattern for the AMP address is enforced.
    let text = std::fs::read_to_string(&file).unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, text.replace("/workspaces/ws-", "/workspace/ws-")).unwrap();
    assert!(external_validators::validate_against_crd_version(
        &crate::common::inference_endpoint_config_crd(),
        "v1",
        &[bad],
    )
    .is_err());
}

fn objects_of(assembly: &Assembly, stage: &str) -> Vec<Value> {
    objects(assembly, &stage_file(assembly, stage))
        .into_iter()
        .filter(|o| o["kind"] == "InferenceEndpointConfig")
        .collect()
}

// --- Rules ------------------------------------------------------------------------------------

/// HF0360: the maximum fits what is reserved (passing), and one replica more does not
/// (failing), on both paths, naming both GPU counts.
#[test]
fn max_replicas_beyond_the_reserved_gpus_is_refused() {
    let ds = eks(ONE_BLOCK_NODE, Some(Autoscaling::new(1, 1, AMP))).validate();
    assert!(with(&ds, Code::AutoscalingAboveCapacity).is_empty(), "{ds}");
    assert!(errors(&ds).is_empty(), "{ds}");

    let ds = eks(ONE_BLOCK_NODE, Some(Autoscaling::new(1, 2, AMP))).validate();
    let found = with(&ds, Code::AutoscalingAboveCapacity);
    assert_eq!(found.len(), 1, "{ds}");
    assert!(
        found[0].contains("16 GPUs") && found[0].contains("can ever provide 8 GPUs"),
        "{found:?}"
    );
    let d = ds
        .iter()
        .find(|d| d.code == Code::AutoscalingAboveCapacity)
        .unwrap();
    assert_eq!(d.path, "scaled-eks/KimiK3");
    assert_eq!(d.field.as_deref(), Some("autoscaling.max_replicas"));

    // A node group's maximum size counts as what it can ever provide.
    let gpus = Gpus {
        block: 1,
        desired: 1,
        on_demand: Some((1, 2)),
    };
    let ds = eks(gpus, Some(Autoscaling::new(1, 4, AMP))).validate();
    assert_eq!(with(&ds, Code::AutoscalingAboveCapacity).len(), 1, "{ds}");

    // HyperPod: one instance on the training plan.
    let ds = hyperpod(Autoscaling::new(1, 1, AMP)).validate();
    assert!(with(&ds, Code::AutoscalingAboveCapacity).is_empty(), "{ds}");
    let ds = hyperpod(Autoscaling::new(1, 3, AMP)).validate();
    let found = with(&ds, Code::AutoscalingAboveCapacity);
    assert_eq!(found.len(), 1, "{ds}");
    assert!(found[0].contains("24 GPUs"), "{found:?}");
}

/// HF0361: capacity that can grow but is not provisioned now warns; provisioned does not.
#[test]
fn scaling_beyond_the_provisioned_nodes_warns() {
    let grow = |desired| Gpus {
        block: 1,
        desired: 1,
        on_demand: Some((desired, 2)),
    };
    let ds = eks(grow(1), Some(Autoscaling::new(1, 2, AMP))).validate();
    assert!(
        with(&ds, Code::AutoscalingWaitsForCapacity).is_empty(),
        "{ds}"
    );
    assert!(errors(&ds).is_empty(), "{ds}");

    let ds = eks(grow(0), Some(Autoscaling::new(1, 2, AMP))).validate();
    let found = with(&ds, Code::AutoscalingWaitsForCapacity);
    assert_eq!(found.len(), 1, "{ds}");
    assert!(
        found[0].contains("need 2") && found[0].contains("1 are provisioned"),
        "{found:?}"
    );
    assert!(errors(&ds).is_empty(), "a warning only: {ds}");
    assert_eq!(
        Code::AutoscalingWaitsForCapacity.severity(),
        Severity::Warning
    );
}

/// HF0362 and HF0363: scale to zero is refused with its reason, and the bounds are ordered.
#[test]
fn scale_to_zero_and_unordered_bounds_are_refused() {
    let ds = eks(ONE_BLOCK_NODE, Some(Autoscaling::new(0, 1, AMP))).validate();
    let d = ds
        .iter()
        .find(|d| d.code == Code::ScaleToZeroRefused)
        .unwrap_or_else(|| panic!("{ds}"));
    assert!(d.help.contains("cold start"), "{}", d.help);
    assert_eq!(d.field.as_deref(), Some("autoscaling.min_replicas"));
    assert!(Code::ScaleToZeroRefused
        .explanation()
        .contains("20 to 80 minutes"));

    let ds = eks(ONE_BLOCK_NODE, Some(Autoscaling::new(1, 1, AMP))).validate();
    assert!(with(&ds, Code::ScaleToZeroRefused).is_empty());
    assert!(with(&ds, Code::AutoscalingReplicasNotOrdered).is_empty());

    let ds = eks(ONE_BLOCK_NODE, Some(Autoscaling::new(2, 1, AMP))).validate();
    assert_eq!(
        with(&ds, Code::AutoscalingReplicasNotOrdered).len(),
        1,
        "{ds}"
    );
    let ds = hyperpod(Autoscaling::new(0, 1, AMP)).validate();
    assert_eq!(with(&ds, Code::ScaleToZeroRefused).len(), 1, "{ds}");
}

/// HF0364: the address, query, target and polling interval.
#[test]
fn malformed_settings_are_refused_at_their_fields() {
    let ds = eks(ONE_BLOCK_NODE, Some(Autoscaling::new(1, 1, AMP))).validate();
    assert!(with(&ds, Code::InvalidAutoscaling).is_empty(), "{ds}");
    for (a, field) in [
        (
            Autoscaling::new(1, 1, "http://prometheus:9090"),
            "autoscaling.server_address",
        ),
        (Autoscaling::new(1, 1, AMP).query(" "), "autoscaling.query"),
        (
            Autoscaling::new(1, 1, AMP).target_value(0.0),
            "autoscaling.target_value",
        ),
        (
            Autoscaling::new(1, 1, AMP).polling_interval_secs(0),
            "autoscaling.polling_interval_secs",
        ),
        (
            Autoscaling::new(1, 1, AMP).cooldown_secs(100_000),
            "autoscaling.cooldown_secs",
        ),
    ] {
        let ds = eks(ONE_BLOCK_NODE, Some(a)).validate();
        let d = ds
            .iter()
            .find(|d| d.code == Code::InvalidAutoscaling)
            .unwrap_or_else(|| panic!("{field}: {ds}"));
        assert_eq!(d.field.as_deref(), Some(field));
    }
}

/// The stack-file form: `autoscaling` on a Deployment, scale to zero refused at its line.
#[test]
fn stack_files_declare_autoscaling() {
    let file = |min: i64| {
        format!(
            r#"stack: scaled
region: us-west-2
stages:
  - name: workload
    kind: kubernetes
    constructs:
      - vllm_deployment: KimiK3
        server:
          model: moonshotai/Kimi-K3
          image: vllm/vllm-openai:v0.11.0
        instance_type: p6-b300.48xlarge
        exposure: cluster_ip
        autoscaling:
          min_replicas: {min}
          max_replicas: 2
          server_address: {AMP}
          target_value: 8
"#
        )
    };
    let app = hyperforge::stackfile::load_str("scaled.yaml", &file(1)).unwrap();
    let assembly = app.synth().unwrap();
    let objects = objects(&assembly, &stage_file(&assembly, "workload"));
    let so = of_kind(&objects, "ScaledObject").unwrap();
    assert_eq!(so["spec"]["maxReplicaCount"], 2);
    assert_eq!(so["spec"]["triggers"][0]["metadata"]["threshold"], "8");

    let err = match hyperforge::stackfile::load_str("scaled.yaml", &file(0)) {
        Ok(app) => app.validate().to_string(),
        Err(ds) => ds.to_string(),
    };
    assert!(err.contains("HF0362"), "{err}");
    assert!(err.contains("scaled.yaml:"), "located: {err}");
}
