//! Operations: the encrypted alarm topic and the capacity-end warnings in both backends (rule
//! patterns, the one-time cron expressions, the key and topic policies, the delivery alarm),
//! their rules' diagnostics, the stack file giving the same bytes, the artifacts passing
//! cfn-lint, checkov and the provider schemas; and KEDA's ScaledObject through its generated
//! types, validated against the vendored CRD.

use crate::external_validators;
use hyperforge::constructs::{AlarmTopic, CapacityEndWarning};
use hyperforge::stackfile::load_str;
use hyperforge::{App, Code, Stack};
use serde_json::{json, Value};

const RESERVATION: &str = "cr-0123456789abcdef0";
const PLAN: &str = "arn:aws:sagemaker:us-west-2:111122223333:training-plan/kimi-serving";

fn app_with(block: CapacityEndWarning, plan: Option<CapacityEndWarning>) -> App {
    let mut stack = Stack::new("ops", "us-west-2").tag("workload", "operations");
    let s = stack.cloudformation_stage("operations");
    stack.add(s, AlarmTopic::new("Alarms"));
    stack.add(s, block);
    if let Some(plan) = plan {
        stack.add(s, plan);
    }
    App::new().tag("managed-by", "hyperforge").stack(stack)
}

fn topic() -> hyperforge::constructs::AlarmTopicHandle {
    use hyperforge::constructs::Construct;
    AlarmTopic::new("Alarms").handle("ops")
}

/// A Capacity Block ending 30 minutes into 2027, warned an hour before (the cron rolls back
/// over the day, the month and the year), and a training plan ending on 1 March 2028, warned a
/// day before (the leap day).
fn app() -> App {
    let mut stack = Stack::new("ops", "us-west-2").tag("workload", "operations");
    let s = stack.cloudformation_stage("operations");
    let topic = stack.add(s, AlarmTopic::new("Alarms"));
    stack.add(
        s,
        CapacityEndWarning::capacity_block("BlockEnd", &topic, RESERVATION, "2027-01-01T00:30:00Z")
            .lead_hours(1),
    );
    stack.add(
        s,
        CapacityEndWarning::training_plan("PlanEnd", &topic, PLAN, "2028-03-01T11:30:45.250Z"),
    );
    App::new().tag("managed-by", "hyperforge").stack(stack)
}

const STACK_FILE: &str = "\
stack: ops
region: us-west-2
app_tags:
  managed-by: hyperforge
tags:
  workload: operations
stages:
  - name: operations
    kind: cloudformation
    constructs:
      - alarm_topic: Alarms
      - capacity_end_warning: BlockEnd
        topic: Alarms
        reservation_id: cr-0123456789abcdef0
        end_time: \"2027-01-01T00:30:00Z\"
        lead_hours: 1
      - capacity_end_warning: PlanEnd
        topic: Alarms
        training_plan_arn: arn:aws:sagemaker:us-west-2:111122223333:training-plan/kimi-serving
        end_time: \"2028-03-01T11:30:45.250Z\"
";

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

#[test]
fn cloudformation_has_the_rules_schedules_and_policies() {
    let assembly = app().synth().unwrap_or_else(|d| panic!("{d}"));
    let t = json_file(&assembly, ".template.json");
    let r = &t["Resources"];

    // The key lets the publishers use it; the topic is encrypted with it.
    let key = &r["AlarmsKey"]["Properties"];
    assert_eq!(key["EnableKeyRotation"], true);
    for (sid, service) in [
        ("AlarmsUseKey", "cloudwatch.amazonaws.com"),
        ("EventsUseKey", "events.amazonaws.com"),
        ("PrometheusUseKey", "aps.amazonaws.com"),
    ] {
        let st = statement(&key["KeyPolicy"], sid);
        assert_eq!(st["Effect"], "Allow");
        assert_eq!(st["Principal"], json!({"Service": service}));
        assert_eq!(st["Action"], json!(["kms:Decrypt", "kms:GenerateDataKey*"]));
    }
    assert_eq!(
        r["AlarmsTopic"]["Properties"]["KmsMasterKeyId"],
        json!({"Fn::GetAtt": ["AlarmsKey", "Arn"]})
    );

    // Publishing: the two services for this account only, and never without TLS.
    let policy = &r["AlarmsPolicy"]["Properties"];
    assert_eq!(policy["Topics"], json!([{"Ref": "AlarmsTopic"}]));
    for (sid, service) in [
        ("AlarmsPublish", "cloudwatch.amazonaws.com"),
        ("EventsPublish", "events.amazonaws.com"),
    ] {
        let st = statement(&policy["PolicyDocument"], sid);
        assert_eq!(st["Effect"], "Allow");
        assert_eq!(st["Principal"], json!({"Service": service}));
        assert_eq!(st["Action"], "sns:Publish");
        assert_eq!(st["Resource"], json!({"Ref": "AlarmsTopic"}));
        assert_eq!(
            st["Condition"],
            json!({"StringEquals": {"aws:SourceAccount": {"Fn::Sub": "${AWS::AccountId}"}}})
        );
    }
    // The alert manager of a Prometheus workspace of this account and region.
    let st = statement(&policy["PolicyDocument"], "PrometheusPublish");
    assert_eq!(st["Principal"], json!({"Service": "aps.amazonaws.com"}));
    assert_eq!(
        st["Action"],
        json!(["sns:Publish", "sns:GetTopicAttributes"])
    );
    assert_eq!(
        st["Condition"]["ArnLike"]["aws:SourceArn"],
        json!({"Fn::Sub": "arn:${AWS::Partition}:aps:${AWS::Region}:${AWS::AccountId}:workspace/*"})
    );
    let deny = statement(&policy["PolicyDocument"], "DenyInsecureTransport");
    assert_eq!(deny["Effect"], "Deny");
    assert_eq!(deny["Principal"], json!({"AWS": "*"}));
    assert_eq!(
        deny["Condition"],
        json!({"Bool": {"aws:SecureTransport": false}})
    );
    assert_eq!(
        t["Outputs"]["AlarmsTopicArn"]["Value"],
        json!({"Ref": "AlarmsTopic"})
    );

    // EC2's warning 40 minutes before the block ends, for this reservation only.
    let expiry = &r["BlockEndExpiryRule"]["Properties"];
    assert_eq!(
        expiry["EventPattern"],
        json!({
            "source": ["aws.ec2"],
            "detail-type": [
                "Capacity Block Expiration Warning",
                "Capacity Block Reservation Expiration Warning"
            ],
            "detail": {"capacity-reservation-id": [{"Ref": "BlockEndCapacityReservationId"}]}
        })
    );
    // The block is a deploy-time input of the stage, the id given its default.
    assert_eq!(
        t["Parameters"]["BlockEndCapacityReservationId"]["Default"],
        RESERVATION
    );
    let target = &expiry["Targets"][0];
    assert_eq!(target["Arn"], json!({"Ref": "AlarmsTopic"}));
    assert_eq!(
        target["InputTransformer"]["InputPathsMap"]["reservation"],
        "$.detail.capacity-reservation-id"
    );
    let template = target["InputTransformer"]["InputTemplate"]
        .as_str()
        .unwrap();
    assert!(
        template.starts_with("\"Capacity Block <reservation> "),
        "{template}"
    );
    assert!(template.ends_with('"'), "{template}");

    // The scheduled warnings: an hour before 2027-01-01T00:30Z is 23:30 on 31 December 2026;
    // a day before 2028-03-01T11:30:45Z is 11:30 on 29 February 2028.
    let scheduled = &r["BlockEndScheduledRule"]["Properties"];
    assert_eq!(scheduled["ScheduleExpression"], "cron(30 23 31 12 ? 2026)");
    assert_eq!(scheduled["State"], "ENABLED");
    // The message names the block by the id deployed (`Fn::Sub` of the input), JSON-quoted.
    let sub = scheduled["Targets"][0]["Input"]["Fn::Sub"]
        .as_str()
        .unwrap();
    let message: String = serde_json::from_str(sub).unwrap();
    assert!(
        message.contains("${BlockEndCapacityReservationId}") && !message.contains(RESERVATION),
        "{message}"
    );
    assert!(message.contains("2027-01-01T00:30:00Z"), "{message}");
    assert_eq!(
        r["PlanEndScheduledRule"]["Properties"]["ScheduleExpression"],
        "cron(30 11 29 2 ? 2028)"
    );
    // A training plan has no EventBridge warning of its own.
    assert!(r.get("PlanEndExpiryRule").is_none());

    // Failed deliveries alarm: both rules of the block, the one of the plan.
    let alarm = &r["BlockEndDeliveryAlarm"]["Properties"];
    assert_eq!(alarm["AlarmActions"], json!([{"Ref": "AlarmsTopic"}]));
    assert_eq!(
        alarm["Metrics"][0]["Expression"],
        "FILL(m1, 0) + FILL(m2, 0)"
    );
    assert_eq!(
        alarm["Metrics"][1]["MetricStat"]["Metric"]["Dimensions"],
        json!([{"Name": "RuleName", "Value": {"Ref": "BlockEndExpiryRule"}}])
    );
    let alarm = &r["PlanEndDeliveryAlarm"]["Properties"];
    assert_eq!(alarm["MetricName"], "FailedInvocations");
    assert_eq!(alarm["Statistic"], "Sum");
    assert_eq!(
        alarm["Dimensions"],
        json!([{"Name": "RuleName", "Value": {"Ref": "PlanEndScheduledRule"}}])
    );
}

#[test]
fn terraform_has_the_same_rules_and_policies() {
    let assembly = app().synth().unwrap_or_else(|d| panic!("{d}"));
    let m = json_file(&assembly, "main.tf.json");
    let res = &m["resource"];
    assert_eq!(
        res["aws_sns_topic"]["alarms_topic"]["kms_master_key_id"],
        "${aws_kms_key.alarms_key.arn}"
    );
    assert_eq!(
        res["aws_sns_topic_policy"]["alarms_policy"]["arn"],
        "${aws_sns_topic.alarms_topic.arn}"
    );
    let policy = &m["locals"]["alarms_policy"];
    let st = statement(policy, "EventsPublish");
    assert_eq!(st["Principal"], json!({"Service": "events.amazonaws.com"}));
    assert_eq!(
        st["Condition"]["StringEquals"]["aws:SourceAccount"],
        "${data.aws_caller_identity.current.account_id}"
    );
    let key = &m["locals"]["alarms_key_policy"];
    let st = statement(key, "AlarmsUseKey");
    assert_eq!(
        st["Principal"],
        json!({"Service": "cloudwatch.amazonaws.com"})
    );
    let st = statement(key, "PrometheusUseKey");
    assert_eq!(st["Principal"], json!({"Service": "aps.amazonaws.com"}));
    assert_eq!(st["Action"], json!(["kms:Decrypt", "kms:GenerateDataKey*"]));
    let st = statement(policy, "PrometheusPublish");
    assert_eq!(
        st["Condition"]["ArnLike"]["aws:SourceArn"],
        "arn:${data.aws_partition.current.partition}:aps:${data.aws_region.current.region}:${data.aws_caller_identity.current.account_id}:workspace/*"
    );
    assert_eq!(
        st["Condition"]["StringEquals"]["aws:SourceAccount"],
        "${data.aws_caller_identity.current.account_id}"
    );

    let rules = &res["aws_cloudwatch_event_rule"];
    let pattern: Value = serde_json::from_str(
        rules["block_end_expiry_rule"]["event_pattern"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        pattern["detail"]["capacity-reservation-id"],
        json!(["${var.block_end_capacity_reservation_id}"])
    );
    assert_eq!(
        m["variable"]["block_end_capacity_reservation_id"]["default"],
        RESERVATION
    );
    assert_eq!(
        rules["block_end_scheduled_rule"]["schedule_expression"],
        "cron(30 23 31 12 ? 2026)"
    );
    assert_eq!(
        rules["plan_end_scheduled_rule"]["schedule_expression"],
        "cron(30 11 29 2 ? 2028)"
    );
    let targets = &res["aws_cloudwatch_event_target"];
    let expiry = &targets["block_end_expiry_rule_topic"];
    assert_eq!(
        expiry["rule"],
        "${aws_cloudwatch_event_rule.block_end_expiry_rule.name}"
    );
    assert_eq!(expiry["arn"], "${aws_sns_topic.alarms_topic.arn}");
    assert_eq!(
        expiry["input_transformer"]["input_paths"]["end"],
        "$.detail.end-date"
    );
    assert!(targets["plan_end_scheduled_rule_topic"]["input"]
        .as_str()
        .unwrap()
        .contains("training plan"));
    let alarms = &res["aws_cloudwatch_metric_alarm"];
    assert_eq!(
        alarms["plan_end_delivery_alarm"]["dimensions"]["RuleName"],
        "${aws_cloudwatch_event_rule.plan_end_scheduled_rule.name}"
    );
    assert_eq!(
        alarms["block_end_delivery_alarm"]["metric_query"][1]["metric"]["dimensions"]["RuleName"],
        "${aws_cloudwatch_event_rule.block_end_expiry_rule.name}"
    );
    assert_eq!(
        m["output"]["alarms_topic_arn"]["value"],
        "${aws_sns_topic.alarms_topic.arn}"
    );
}

#[test]
fn the_stack_file_gives_the_same_bytes() {
    let from_file = load_str("stacks/ops.yaml", STACK_FILE).unwrap_or_else(|d| panic!("{d}"));
    let a = from_file.synth().unwrap_or_else(|d| panic!("{d}"));
    let b = app().synth().unwrap_or_else(|d| panic!("{d}"));
    assert!(
        a.files() == b.files(),
        "the stack file and the builders differ"
    );
}

#[test]
fn every_rule_has_a_passing_and_a_failing_case() {
    let codes = |block: CapacityEndWarning| -> Vec<Code> {
        match app_with(block, None).synth() {
            Ok(_) => Vec::new(),
            Err(ds) => ds.iter().map(|d| d.code).collect(),
        }
    };
    let t = topic();
    let block = |end: &str| CapacityEndWarning::capacity_block("W", &t, RESERVATION, end);
    assert!(codes(block("2027-01-31T11:30:00Z")).is_empty());
    assert!(codes(block("2024-01-02T00:00:00+00:00").lead_hours(24)).is_empty());
    assert!(codes(block("2027-01-31T11:30:00Z").lead_hours(720)).is_empty());
    for bad in [
        "2027-01-31",
        "2027-01-31T11:30:00+02:00",
        "2027-02-30T00:00:00Z",
        "2023-11-30T11:30:00Z",
        "31/01/2027 11:30",
    ] {
        assert_eq!(codes(block(bad)), [Code::InvalidCapacityEndTime], "{bad}");
    }
    // The lead reaches before the years an end can fall in.
    assert_eq!(
        codes(block("2024-01-01T10:00:00Z").lead_hours(24)),
        [Code::InvalidCapacityEndTime]
    );
    for lead in [0, 721] {
        assert_eq!(
            codes(block("2027-01-31T11:30:00Z").lead_hours(lead)),
            [Code::InvalidCapacityWarningLead],
            "{lead}"
        );
    }
    assert_eq!(
        codes(CapacityEndWarning::capacity_block(
            "W",
            &t,
            "cr-xyz",
            "2027-01-31T11:30:00Z"
        )),
        [Code::MalformedCapacityReservationId]
    );
    assert_eq!(
        codes(CapacityEndWarning::training_plan(
            "W",
            &t,
            "arn:aws:sagemaker:us-west-2:111122223333:plan/x",
            "2027-01-31T11:30:00Z"
        )),
        [Code::MalformedTrainingPlanArn]
    );
    assert_eq!(
        codes(block("2027-01-31T11:30:00Z").lead_hours(0)).len(),
        1,
        "one problem, one diagnostic"
    );
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

/// The vendored Guard rule packs (the alarm has actions, the topic a KMS key, the key no
/// wildcard principal and rotation on) find nothing.
#[test]
fn the_vendored_policy_packs_find_nothing() {
    let assembly = app().synth().unwrap_or_else(|d| panic!("{d}"));
    let report = assembly.check_policies(&hyperforge::policy::PolicyPack::all_builtin());
    assert!(
        report.stacks.iter().map(|s| s.templates).sum::<usize>() > 0,
        "no template checked"
    );
    let findings: Vec<String> = report.diagnostics.iter().map(|d| d.to_string()).collect();
    assert!(findings.is_empty(), "{}", findings.join("\n"));
}

/// A ScaledObject for a vLLM Deployment on a Prometheus query, through the generated types:
/// serialized, read back unchanged, and valid against KEDA's CRD (strict: no unknown field).
#[test]
fn scaled_object_round_trips_and_passes_the_crd_schema() {
    use hyperforge::synth::kubernetes::crd::scaled_object::*;
    use std::collections::BTreeMap;

    let mut metadata = BTreeMap::new();
    metadata.insert(
        "serverAddress".to_owned(),
        "http://prometheus.monitoring:9090".to_owned(),
    );
    metadata.insert(
        "query".to_owned(),
        "sum(vllm:num_requests_waiting{namespace=\"serving\"})".to_owned(),
    );
    metadata.insert("threshold".to_owned(), "8".to_owned());
    let spec = ScaledObjectSpec {
        scale_target_ref: ScaledObjectScaleTargetRef {
            api_version: Some("apps/v1".to_owned()),
            kind: Some("Deployment".to_owned()),
            name: "vllm".to_owned(),
            ..Default::default()
        },
        min_replica_count: Some(1),
        max_replica_count: Some(2),
        cooldown_period: Some(600),
        triggers: vec![ScaledObjectTriggers {
            r#type: "prometheus".to_owned(),
            metric_type: Some("AverageValue".to_owned()),
            metadata,
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut object = ScaledObject::new("vllm", spec);
    object.metadata.namespace = Some("serving".to_owned());
    let yaml = serde_yaml::to_string(&object).unwrap();
    let back: ScaledObject = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(back.spec, object.spec);
    assert_eq!(back.metadata.namespace.as_deref(), Some("serving"));
    let value = serde_json::to_value(&object).unwrap();
    assert_eq!(value["apiVersion"], "keda.sh/v1alpha1");
    assert_eq!(value["kind"], "ScaledObject");
    assert_eq!(value["spec"]["triggers"][0]["type"], "prometheus");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scaled-object.yaml");
    std::fs::write(&path, &yaml).unwrap();
    if let Err(findings) = external_validators::validate_against_crd_version(
        &crate::common::keda_scaled_object_crd(),
        "v1alpha1",
        std::slice::from_ref(&path),
    ) {
        panic!("{findings}");
    }
    // And the validator does reject a misspelt field there.
    let bad = yaml.replace("minReplicaCount", "minReplicas");
    assert_ne!(bad, yaml);
    std::fs::write(&path, bad).unwrap();
    assert!(external_validators::validate_against_crd_version(
        &crate::common::keda_scaled_object_crd(),
        "v1alpha1",
        &[path],
    )
    .is_err());
}
