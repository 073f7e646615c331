//! Metrics in Amazon Managed Service for Prometheus: a stack with an EKS cluster, the alarm
//! topic and `PrometheusMonitoring`, synthesized to CloudFormation and Terraform. The topic and
//! its key let AMP publish, the workspace's alert manager routes every alert to the topic, the rules
//! carry their expressions, thresholds and `for`, the collector scrapes the vLLM servers and the
//! DCGM exporters of the cluster; both formats pass their checks (cfn-lint, checkov, the
//! provider schemas); the builder's rules and the stack file agree.

use crate::external_validators;
use hyperforge::constructs::monitoring::{
    ALERTS, GPU_NODE_SILENT, GPU_XID_ERRORS, POD_RESTARTING, QUEUE_BACKLOG, SERVER_ERRORS,
    SLOW_FIRST_TOKEN,
};
use hyperforge::constructs::{AlarmTopic, Construct, EksCluster, Network, PrometheusMonitoring};
use hyperforge::stackfile::load_str;
use hyperforge::{App, Code, Stack};
use serde_json::{json, Value};

const STACK_FILE: &str = "\
stack: mon
region: us-west-2
stages:
  - name: foundation
    kind: cloudformation
    constructs:
      - network: Network
        cidr: 10.20.0.0/16
        availability_zones: 2
      - eks_cluster: Eks
        name: mon
        subnets: Network.private_subnets
        vpc: Network
      - alarm_topic: Alarms
  - name: monitoring
    kind: cloudformation
    constructs:
      - prometheus_monitoring: Metrics
        cluster: Eks
        topic: Alarms
        subnets: Network.private_subnets
        ttft_p99_seconds: 8
        queue_depth: 64
";

fn app() -> App {
    load_str("mon.yaml", STACK_FILE).unwrap_or_else(|d| panic!("{d}"))
}

fn json_file(assembly: &hyperforge::Assembly, suffix: &str) -> Value {
    let (_, bytes) = assembly
        .files()
        .iter()
        .find(|(p, _)| p.ends_with(suffix))
        .unwrap_or_else(|| panic!("no {suffix}"));
    serde_json::from_slice(bytes).unwrap()
}

fn statement<'a>(doc: &'a Value, sid: &str) -> &'a Value {
    doc["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["Sid"] == sid)
        .unwrap_or_else(|| panic!("no statement {sid} in {doc}"))
}

/// The CloudFormation template of the monitoring stage.
fn monitoring_template() -> Value {
    let assembly = app().synth().unwrap_or_else(|d| panic!("{d}"));
    json_file(&assembly, "monitoring.template.json")
}

/// The alert rules as the rule groups namespace holds them.
fn rules(data: &str) -> Vec<Value> {
    let doc: Value = serde_yaml::from_str(data).unwrap();
    doc["groups"][0]["rules"].as_array().unwrap().clone()
}

fn rule<'a>(rules: &'a [Value], name: &str) -> &'a Value {
    rules
        .iter()
        .find(|r| r["alert"] == name)
        .unwrap_or_else(|| panic!("no rule {name}"))
}

#[test]
fn every_alert_has_its_expression_threshold_and_for() {
    let t = monitoring_template();
    let data = t["Resources"]["MetricsRules"]["Properties"]["Data"]
        .as_str()
        .unwrap()
        .to_owned();
    let rules = rules(&data);
    assert_eq!(rules.len(), ALERTS.len());
    let expect = [
        (
            SERVER_ERRORS.name,
            r#"sum by (namespace) (rate(http_requests_total{job="vllm",status="5xx"}[5m])) / sum by (namespace) (rate(http_requests_total{job="vllm"}[5m])) > 0.05"#,
            Some("5m"),
            "critical",
        ),
        (
            SLOW_FIRST_TOKEN.name,
            r#"histogram_quantile(0.99, sum by (le, namespace, model_name) (rate(vllm:time_to_first_token_seconds_bucket{job="vllm"}[5m]))) > 8"#,
            Some("10m"),
            "warning",
        ),
        (
            QUEUE_BACKLOG.name,
            r#"sum by (namespace, pod) (vllm:num_requests_waiting{job="vllm"}) > 64"#,
            Some("5m"),
            "warning",
        ),
        (
            GPU_XID_ERRORS.name,
            r#"max by (node, gpu) (DCGM_FI_DEV_XID_ERRORS{job="dcgm"}) > 0"#,
            None,
            "critical",
        ),
        (
            GPU_NODE_SILENT.name,
            r#"up{job="dcgm"} == 0 or absent(up{job="dcgm"})"#,
            Some("5m"),
            "critical",
        ),
        (
            POD_RESTARTING.name,
            r#"sum by (namespace, pod, container) (increase(kube_pod_container_status_restarts_total{job="kube-state-metrics",namespace!="kube-system"}[15m])) > 0"#,
            None,
            "warning",
        ),
    ];
    for (name, expr, for_, severity) in expect {
        let r = rule(&rules, name);
        assert_eq!(r["expr"], expr, "{name}");
        assert_eq!(r["for"].as_str(), for_, "{name}");
        assert_eq!(r["labels"]["severity"], severity, "{name}");
        assert!(r["annotations"]["summary"].is_string(), "{name}");
        assert!(r["annotations"]["action"].is_string(), "{name}");
    }
    assert_eq!(
        t["Resources"]["MetricsRules"]["Properties"]["Workspace"],
        json!({"Fn::GetAtt": ["MetricsWorkspace", "Arn"]})
    );

    // The same rules, as facts (what the runbook and `hyperforge list` read).
    let app = app();
    let stack = &app.stacks()[0];
    let placements = hyperforge::constructs::Placements::new(stack);
    let facts: Vec<_> = placements.all().flat_map(|p| p.facts().alerts).collect();
    assert_eq!(facts.len(), ALERTS.len());
    let ttft = facts
        .iter()
        .find(|a| a.name == SLOW_FIRST_TOKEN.name)
        .unwrap();
    assert_eq!(ttft.threshold, 8.0);
    assert_eq!(ttft.for_duration, "10m");
    let queue = facts.iter().find(|a| a.name == QUEUE_BACKLOG.name).unwrap();
    assert_eq!(queue.threshold, 64.0);
    let restarts = facts
        .iter()
        .find(|a| a.name == POD_RESTARTING.name)
        .unwrap();
    assert_eq!(restarts.threshold, 0.0);
    assert_eq!(restarts.for_duration, "");
    assert_eq!(restarts.severity, "warning");
    assert!(
        restarts.action.contains("--previous"),
        "{}",
        restarts.action
    );
    assert!(rules
        .iter()
        .zip(&facts)
        .all(|(r, f)| r["alert"] == f.name && r["expr"] == f.expression));
}

#[test]
fn the_alert_manager_routes_every_alert_to_the_topic() {
    let t = monitoring_template();
    let workspace = &t["Resources"]["MetricsWorkspace"]["Properties"];
    // The topic's ARN comes from the foundation stage, the region from the stack.
    let sub = workspace["AlertManagerDefinition"]["Fn::Sub"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", workspace["AlertManagerDefinition"]));
    assert_eq!(
        sub[1],
        json!({"AlarmsTopicArn": {"Fn::ImportValue": "mon-foundation:AlarmsTopic:Arn"}})
    );
    let text = sub[0]
        .as_str()
        .unwrap()
        .replace("${AlarmsTopicArn}", "TOPIC")
        .replace("${AWS::Region}", "REGION");
    let doc: Value = serde_yaml::from_str(&text).unwrap();
    let config: Value = serde_yaml::from_str(doc["alertmanager_config"].as_str().unwrap()).unwrap();
    assert_eq!(config["route"]["receiver"], "notification-topic");
    assert!(
        config["route"].get("routes").is_none(),
        "one route: every alert"
    );
    let receivers = config["receivers"].as_array().unwrap();
    assert_eq!(receivers.len(), 1);
    let sns = &receivers[0]["sns_configs"][0];
    assert_eq!(receivers[0]["name"], "notification-topic");
    assert_eq!(sns["topic_arn"], "TOPIC");
    assert_eq!(sns["sigv4"]["region"], "REGION");
    for forbidden in ["api_url", "http_config"] {
        assert!(sns.get(forbidden).is_none(), "AMP refuses {forbidden}");
    }
}

#[test]
fn the_collector_scrapes_the_servers_and_gpus_of_the_cluster() {
    let t = monitoring_template();
    let p = &t["Resources"]["MetricsScraper"]["Properties"];
    let eks = &p["Source"]["EksConfiguration"];
    assert!(eks["ClusterArn"]["Fn::ImportValue"].is_string(), "{eks}");
    assert_eq!(eks["SubnetIds"].as_array().unwrap().len(), 2);
    assert_eq!(eks["SecurityGroupIds"].as_array().unwrap().len(), 1);
    assert_eq!(
        p["Destination"]["AmpConfiguration"]["WorkspaceArn"],
        json!({"Fn::GetAtt": ["MetricsWorkspace", "Arn"]})
    );
    let yaml = p["ScrapeConfiguration"]["ConfigurationBlob"]["Fn::Base64"]
        .as_str()
        .expect("the configuration is base64-encoded by CloudFormation");
    let config: Value = serde_yaml::from_str(yaml).unwrap();
    assert_eq!(config["global"]["scrape_interval"], "30s");
    assert_eq!(config["global"]["external_labels"]["cluster"], "mon");
    let jobs = config["scrape_configs"].as_array().unwrap();
    let job = |name: &str| jobs.iter().find(|j| j["job_name"] == name).unwrap();
    let keeps = |j: &Value| -> Vec<(Value, Value)> {
        j["relabel_configs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["action"] == "keep")
            .map(|r| (r["source_labels"][0].clone(), r["regex"].clone()))
            .collect()
    };
    assert_eq!(
        keeps(job("vllm")),
        [
            (
                json!("__meta_kubernetes_pod_label_app_kubernetes_io_component"),
                json!("model-server")
            ),
            (
                json!("__meta_kubernetes_pod_container_port_name"),
                json!("http")
            ),
        ]
    );
    assert_eq!(
        keeps(job("dcgm")),
        [
            (
                json!("__meta_kubernetes_pod_label_app_kubernetes_io_name"),
                json!("dcgm-exporter")
            ),
            (
                json!("__meta_kubernetes_pod_container_port_number"),
                json!("9400")
            ),
        ]
    );
    // The HyperPod inference operator's model pods: label `app` (the endpoint's name), port
    // `http` 8000; VllmDeployment pods are left to `vllm`; their series are job `vllm`.
    let hyperpod = job("hyperpod-inference");
    let relabel = hyperpod["relabel_configs"].as_array().unwrap();
    assert_eq!(
        relabel[0],
        json!({
            "source_labels": [
                "__meta_kubernetes_pod_label_app",
                "__meta_kubernetes_pod_container_port_name",
                "__meta_kubernetes_pod_container_port_number",
            ],
            "regex": ".+;http;8000",
            "action": "keep",
        })
    );
    assert_eq!(
        relabel[1],
        json!({"source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_component"], "regex": "model-server", "action": "drop"})
    );
    assert_eq!(
        relabel[2],
        json!({"target_label": "job", "replacement": "vllm"})
    );
    // kube-state-metrics: its pods on port 8080, the labels of the objects its series describe
    // kept as scraped, none of its own pod added.
    let ksm = job("kube-state-metrics");
    assert_eq!(ksm["honor_labels"], true);
    assert_eq!(
        ksm["relabel_configs"],
        json!([
            {"source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_name"], "regex": "kube-state-metrics", "action": "keep"},
            {"source_labels": ["__meta_kubernetes_pod_container_port_number"], "regex": "8080", "action": "keep"},
        ])
    );
    assert_eq!(jobs.len(), 4);
    for j in jobs {
        assert_eq!(j["metrics_path"], "/metrics");
        assert_eq!(j["kubernetes_sd_configs"], json!([{"role": "pod"}]));
        if j["job_name"] == "kube-state-metrics" {
            continue;
        }
        let targets: Vec<&Value> = j["relabel_configs"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r.get("target_label"))
            .filter(|t| *t != "job")
            .collect();
        assert_eq!(
            targets,
            [&json!("namespace"), &json!("pod"), &json!("node")]
        );
    }
}

#[test]
fn the_keys_let_prometheus_in_and_the_topic_lets_it_publish() {
    let assembly = app().synth().unwrap_or_else(|d| panic!("{d}"));
    let foundation = json_file(&assembly, "foundation.template.json");
    let r = &foundation["Resources"];
    let use_key = statement(
        &r["AlarmsKey"]["Properties"]["KeyPolicy"],
        "PrometheusUseKey",
    );
    assert_eq!(
        use_key["Principal"],
        json!({"Service": "aps.amazonaws.com"})
    );
    assert_eq!(
        use_key["Action"],
        json!(["kms:Decrypt", "kms:GenerateDataKey*"])
    );
    let publish = statement(
        &r["AlarmsPolicy"]["Properties"]["PolicyDocument"],
        "PrometheusPublish",
    );
    assert_eq!(
        publish["Principal"],
        json!({"Service": "aps.amazonaws.com"})
    );
    assert_eq!(
        publish["Action"],
        json!(["sns:Publish", "sns:GetTopicAttributes"])
    );
    assert_eq!(publish["Resource"], json!({"Ref": "AlarmsTopic"}));
    assert_eq!(
        publish["Condition"],
        json!({
            "StringEquals": {"aws:SourceAccount": {"Fn::Sub": "${AWS::AccountId}"}},
            "ArnLike": {"aws:SourceArn": {"Fn::Sub": "arn:${AWS::Partition}:aps:${AWS::Region}:${AWS::AccountId}:workspace/*"}}
        })
    );

    // The workspace is encrypted with an AWS owned key: a customer managed one would shut out
    // the managed collector.
    let monitoring = json_file(&assembly, "monitoring.template.json");
    let workspace = &monitoring["Resources"]["MetricsWorkspace"]["Properties"];
    assert!(workspace.get("KmsKeyArn").is_none(), "{workspace}");
    assert!(monitoring["Resources"].get("MetricsKey").is_none());
}

#[test]
fn terraform_states_the_same_resources() {
    let assembly = app().synth().unwrap_or_else(|d| panic!("{d}"));
    let (_, bytes) = assembly
        .files()
        .iter()
        .filter(|(p, _)| p.ends_with(".tf.json"))
        .find(|(_, b)| String::from_utf8_lossy(b).contains("aws_prometheus_workspace"))
        .expect("a root module with the workspace");
    let m: Value = serde_json::from_slice(bytes).unwrap();
    let r = &m["resource"];
    assert!(r["aws_prometheus_workspace"]["metrics_workspace"]
        .get("kms_key_arn")
        .is_none());
    let am = &r["aws_prometheus_alert_manager_definition"]["metrics_workspace_alert_manager"];
    assert_eq!(
        am["workspace_id"],
        "${aws_prometheus_workspace.metrics_workspace.id}"
    );
    let definition = am["definition"].as_str().unwrap();
    assert!(definition.contains("sns_configs:"), "{definition}");
    assert!(definition.contains("aws_sns_topic"), "{definition}");
    let ns = &r["aws_prometheus_rule_group_namespace"]["metrics_rules"];
    assert_eq!(
        ns["workspace_id"],
        "${aws_prometheus_workspace.metrics_workspace.id}"
    );
    assert_eq!(rules(ns["data"].as_str().unwrap()).len(), ALERTS.len());
    let s = &r["aws_prometheus_scraper"]["metrics_scraper"];
    assert_eq!(
        s["destination"][0]["amp"][0]["workspace_arn"],
        "${aws_prometheus_workspace.metrics_workspace.arn}"
    );
    assert_eq!(
        s["source"][0]["eks"][0]["subnet_ids"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let config: Value = serde_yaml::from_str(s["scrape_configuration"].as_str().unwrap()).unwrap();
    assert_eq!(config["scrape_configs"].as_array().unwrap().len(), 4);
}

#[test]
fn the_builder_and_the_stack_file_agree() {
    let mut stack = Stack::new("mon", "us-west-2");
    let f = stack.cloudformation_stage("foundation");
    let network = stack.add(
        f,
        Network::new("Network")
            .cidr("10.20.0.0/16")
            .availability_zones(2),
    );
    let eks = stack.add(
        f,
        EksCluster::new("Eks", "mon")
            .subnets(&network.private_subnets)
            .vpc(&network.vpc),
    );
    let topic = stack.add(f, AlarmTopic::new("Alarms"));
    let m = stack.cloudformation_stage("monitoring");
    stack.add(
        m,
        PrometheusMonitoring::new("Metrics", &eks, &topic, network.private_subnets.clone())
            .ttft_p99_seconds(8.0)
            .queue_depth(64),
    );
    let ours = App::new()
        .stack(stack)
        .synth()
        .unwrap_or_else(|d| panic!("{d}"));
    let theirs = app().synth().unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(ours.files(), theirs.files());
}

#[test]
fn thresholds_and_subnets_are_checked() {
    let codes = |edit: &dyn Fn(&str) -> String| -> Vec<Code> {
        match load_str("mon.yaml", &edit(STACK_FILE)).map(|a| a.synth()) {
            Ok(Ok(_)) => Vec::new(),
            Ok(Err(d)) | Err(d) => d.iter().map(|d| d.code).collect(),
        }
    };
    assert!(codes(&|s| s.to_owned()).is_empty());
    // Out of the declared ranges: the loader's HF0711, once each.
    assert_eq!(
        codes(&|s| s.replace("ttft_p99_seconds: 8", "ttft_p99_seconds: 0")),
        [Code::StackFileOutOfRange]
    );
    assert_eq!(
        codes(&|s| s.replace("queue_depth: 64", "queue_depth: 0")),
        [Code::StackFileOutOfRange]
    );
    // The builder's own checks, through the Rust API.
    let handle = |id: &str| {
        let eks = EksCluster::new("Eks", "mon").handle("mon");
        let topic = AlarmTopic::new("Alarms").handle("mon");
        PrometheusMonitoring::new(id, &eks, &topic, Vec::new())
    };
    let check = |c: PrometheusMonitoring| -> Vec<Code> {
        let mut stack = Stack::new("mon", "us-west-2");
        let s = stack.cloudformation_stage("monitoring");
        stack.add(s, c);
        match App::new().stack(stack).synth() {
            Ok(_) => Vec::new(),
            Err(d) => d
                .iter()
                .map(|d| d.code)
                .filter(|c| *c != Code::UnknownReference)
                .collect(),
        }
    };
    assert_eq!(check(handle("Metrics")), [Code::MonitoringWithoutSubnets]);
    assert!(check(handle("Metrics").ttft_p99_seconds(-1.0)).contains(&Code::InvalidAlertThreshold));
    assert!(check(handle("Metrics").queue_depth(0)).contains(&Code::InvalidAlertThreshold));
}

fn synthesized() -> tempfile::TempDir {
    crate::common::written(&app())
}

#[test]
fn terraform_matches_the_provider_schemas_and_passes_checkov() {
    external_validators::assert_terraform_passes(synthesized().path());
}

#[test]
fn cloudformation_passes_cfn_lint_and_checkov() {
    external_validators::assert_cloudformation_passes(synthesized().path());
}

/// The runbook lists every alert with its severity, `for`, expression and what to do.
#[test]
fn the_runbook_lists_the_alerts() {
    let assembly = app().synth().unwrap_or_else(|d| panic!("{d}"));
    let (_, runbook) = assembly
        .files()
        .iter()
        .find(|(p, _)| p.ends_with("RUNBOOK.md"))
        .expect("a runbook");
    let text = String::from_utf8_lossy(runbook);
    assert!(text.contains("### Alerts"), "{text}");
    assert!(
        text.contains(
            "- **VllmQueueBacklog** (warning, after 5m): `sum by (namespace, pod) (vllm:num_requests_waiting{job=\"vllm\"}) > 64`."
        ),
        "{text}"
    );
    assert!(
        text.contains("- **GpuXidError** (critical, at once):"),
        "{text}"
    );
    for rule in ALERTS {
        assert!(text.contains(rule.action), "{}", rule.name);
    }
}

/// `hyperforge list` shows each alert with its severity, `for` and expression.
#[test]
fn list_shows_the_alerts() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let stacks = tmp.path().join("stacks");
    std::fs::create_dir_all(&stacks).unwrap();
    std::fs::write(stacks.join("mon.yaml"), STACK_FILE).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_hyperforge"))
        .arg("list")
        .current_dir(tmp.path())
        .env("NO_COLOR", "1")
        .output()
        .expect("the binary runs");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("  alerts:\n"), "{text}");
    assert!(
        text.contains(
            "        VllmSlowFirstToken (warning, after 10m): histogram_quantile(0.99, sum by (le, namespace, model_name) (rate(vllm:time_to_first_token_seconds_bucket{job=\"vllm\"}[5m]))) > 8\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("        GpuXidError (critical, at once): "),
        "{text}"
    );
}

/// The HyperPod reference monitors as the EKS ones do: the collector in two private subnets,
/// the DCGM exporter and kube-state-metrics installed after Fluent Bit, and the endpoint's
/// worker port what the `hyperpod-inference` job keeps (`http`, 8000, the metrics port too).
#[test]
fn the_hyperpod_reference_is_monitored() {
    let assembly = crate::reference::kimi_k3_hyperpod()
        .synth()
        .unwrap_or_else(|d| panic!("{d}"));
    let operations = json_file(&assembly, "-operations.template.json");
    let scraper = &operations["Resources"]["MetricsScraper"]["Properties"];
    let subnets = scraper["Source"]["EksConfiguration"]["SubnetIds"]
        .as_array()
        .unwrap();
    assert_eq!(
        subnets,
        &[
            json!({"Fn::ImportValue": "kimi-k3-hyperpod-foundation:NetworkPrivateSubnet1:Id"}),
            json!({"Fn::ImportValue": "kimi-k3-hyperpod-foundation:NetworkPrivateSubnet2:Id"}),
        ]
    );
    let stages: Vec<&str> = assembly.manifest().stacks[0]
        .stages
        .iter()
        .map(|s| s.name())
        .collect();
    let at = |name: &str| stages.iter().position(|s| *s == name).unwrap();
    assert!(at("operations") < at("aws-for-fluent-bit"));
    assert_eq!(at("dcgm-exporter"), at("aws-for-fluent-bit") + 1);
    assert_eq!(at("kube-state-metrics"), at("dcgm-exporter") + 1);
    assert!(at("kube-state-metrics") < at("inference"));

    let path = crate::common::stage_file(&assembly, "kimi-k3-hyperpod", "inference", "yaml");
    let iec: Value = serde_yaml::Deserializer::from_str(assembly.text(&path).unwrap())
        .map(|d| <Value as serde::Deserialize>::deserialize(d).unwrap())
        .find(|o| o["kind"] == "InferenceEndpointConfig")
        .unwrap();
    let port = &iec["spec"]["worker"]["modelInvocationPort"];
    assert_eq!(port, &json!({"containerPort": 8000, "name": "http"}));
    assert_eq!(iec["spec"]["metrics"]["modelMetrics"]["port"], 8000);
    assert_eq!(iec["spec"]["metrics"]["enabled"], true);
    assert_eq!(iec["spec"]["autoScalingSpec"]["maxReplicaCount"], 1);
}
