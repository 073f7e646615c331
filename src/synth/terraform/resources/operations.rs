//! Terraform lowering of the operations kinds: `aws_sns_topic` and `aws_sns_topic_policy`,
//! `aws_cloudwatch_metric_alarm`, `aws_cloudwatch_dashboard`, and a rule as
//! `aws_cloudwatch_event_rule` plus one `aws_cloudwatch_event_target` per target (named
//! `<rule path>/<target id>`); `aws_prometheus_workspace` with its
//! `aws_prometheus_alert_manager_definition` (named `<workspace path>/AlertManager`),
//! `aws_prometheus_rule_group_namespace` and `aws_prometheus_scraper`.

use super::Cx;
use crate::app::logical_id;
use crate::resources::{
    AlarmMetric, Dashboard, EventRule, MetricAlarm, MetricStat, PrometheusRuleGroups,
    PrometheusScraper, PrometheusWorkspace, Resource, RuleTrigger, Schedule, SnsTopic,
    SnsTopicPolicy, TargetInput,
};
use crate::synth::terraform::module::{escape_template, snake};
use serde_json::{json, Map, Value};

pub(super) fn topic(cx: Cx, r: &Resource, t: &SnsTopic) {
    let key = cx.attr(&t.kms_key);
    cx.add(
        "aws_sns_topic",
        &r.path,
        json!({"display_name": t.display_name, "kms_master_key_id": key}),
    );
}

pub(super) fn topic_policy(cx: Cx, r: &Resource, p: &SnsTopicPolicy) {
    let policy = cx.policy(&snake(&logical_id(&r.path)), &p.document);
    let topic = cx.attr(&p.topic);
    cx.add(
        "aws_sns_topic_policy",
        &r.path,
        json!({"arn": topic, "policy": policy}),
    );
}

fn dimensions(cx: Cx, m: &MetricStat) -> Option<Value> {
    (!m.dimensions.is_empty()).then(|| {
        let map: Map<String, Value> = m
            .dimensions
            .iter()
            .map(|(name, value)| (name.clone(), cx.text(value)))
            .collect();
        Value::Object(map)
    })
}

pub(super) fn alarm(cx: Cx, r: &Resource, a: &MetricAlarm) {
    let mut body = Map::new();
    body.insert("alarm_name".into(), json!(escape_template(&a.name)));
    body.insert(
        "alarm_description".into(),
        json!(escape_template(&a.description)),
    );
    body.insert("actions_enabled".into(), json!(true));
    if !a.alarm_actions.is_empty() {
        let topics: Vec<Value> = a.alarm_actions.iter().map(|t| cx.attr(t)).collect();
        body.insert("alarm_actions".into(), json!(topics));
    }
    if !a.ok_actions.is_empty() {
        let topics: Vec<Value> = a.ok_actions.iter().map(|t| cx.attr(t)).collect();
        body.insert("ok_actions".into(), json!(topics));
    }
    body.insert("comparison_operator".into(), json!(a.comparison.as_str()));
    body.insert("evaluation_periods".into(), json!(a.evaluation_periods));
    body.insert("datapoints_to_alarm".into(), json!(a.datapoints_to_alarm));
    body.insert("threshold".into(), json!(a.threshold));
    body.insert("treat_missing_data".into(), json!(a.missing_data.as_str()));
    match &a.metric {
        AlarmMetric::Metric(m) => {
            body.insert("namespace".into(), json!(m.namespace));
            body.insert("metric_name".into(), json!(m.metric_name));
            if let Some(d) = dimensions(cx, m) {
                body.insert("dimensions".into(), d);
            }
            body.insert("period".into(), json!(m.period_seconds));
            let key = if m.statistic.is_extended() {
                "extended_statistic"
            } else {
                "statistic"
            };
            body.insert(key.into(), json!(m.statistic.as_string()));
        }
        AlarmMetric::Math {
            expression,
            label,
            metrics,
        } => {
            let mut queries = vec![json!({
                "id": "expression",
                "expression": escape_template(expression),
                "label": escape_template(label),
                "return_data": true,
            })];
            for (id, m) in metrics {
                let mut metric = Map::new();
                metric.insert("namespace".into(), json!(m.namespace));
                metric.insert("metric_name".into(), json!(m.metric_name));
                if let Some(d) = dimensions(cx, m) {
                    metric.insert("dimensions".into(), d);
                }
                metric.insert("period".into(), json!(m.period_seconds));
                metric.insert("stat".into(), json!(m.statistic.as_string()));
                queries.push(json!({"id": id, "metric": metric, "return_data": false}));
            }
            body.insert("metric_query".into(), json!(queries));
        }
    }
    cx.add("aws_cloudwatch_metric_alarm", &r.path, Value::Object(body));
}

pub(super) fn dashboard(cx: Cx, r: &Resource, d: &Dashboard) {
    let body = cx.text(&d.body);
    cx.add(
        "aws_cloudwatch_dashboard",
        &r.path,
        json!({"dashboard_name": d.name, "dashboard_body": body}),
    );
}

pub(super) fn prometheus_workspace(cx: Cx, r: &Resource, w: &PrometheusWorkspace) {
    let mut body = Map::new();
    body.insert("alias".into(), json!(escape_template(&w.alias)));
    if let Some(key) = &w.kms_key {
        body.insert("kms_key_arn".into(), cx.attr(key));
    }
    let addr = cx.add("aws_prometheus_workspace", &r.path, Value::Object(body));
    if let Some(am) = &w.alert_manager {
        let definition = cx.text(am);
        cx.add_named(
            "aws_prometheus_alert_manager_definition",
            snake(&logical_id(&format!("{}/AlertManager", r.path))),
            &r.path,
            json!({"workspace_id": addr.interp("id"), "definition": definition}),
        );
    }
}

pub(super) fn prometheus_rule_groups(cx: Cx, r: &Resource, g: &PrometheusRuleGroups) {
    let workspace = cx.attr(&g.workspace_id);
    cx.add(
        "aws_prometheus_rule_group_namespace",
        &r.path,
        json!({"name": g.name, "workspace_id": workspace, "data": escape_template(&g.data)}),
    );
}

pub(super) fn prometheus_scraper(cx: Cx, r: &Resource, p: &PrometheusScraper) {
    let cluster = cx.attr(&p.cluster_arn);
    let subnets: Vec<Value> = p.subnets.iter().map(|x| cx.attr(x)).collect();
    let groups: Vec<Value> = p.security_groups.iter().map(|x| cx.attr(x)).collect();
    let workspace = cx.attr(&p.workspace_arn);
    let mut eks = Map::new();
    eks.insert("cluster_arn".into(), cluster);
    eks.insert("subnet_ids".into(), json!(subnets));
    if !groups.is_empty() {
        eks.insert("security_group_ids".into(), json!(groups));
    }
    cx.add(
        "aws_prometheus_scraper",
        &r.path,
        json!({
            "alias": escape_template(&p.alias),
            "source": [{"eks": [Value::Object(eks)]}],
            "destination": [{"amp": [{"workspace_arn": workspace}]}],
            "scrape_configuration": escape_template(&p.configuration),
        }),
    );
}

/// The message text as EventBridge passes it to SNS (a JSON string), escaped for a Terraform
/// string template.
fn json_string(text: &str) -> String {
    escape_template(&Value::String(text.to_owned()).to_string())
}

pub(super) fn rule(cx: Cx, r: &Resource, rule: &EventRule) {
    let mut body = Map::new();
    body.insert(
        "description".into(),
        json!(escape_template(&rule.description)),
    );
    match &rule.trigger {
        RuleTrigger::Pattern(p) => {
            body.insert("event_pattern".into(), cx.text(&p.json_text()));
        }
        RuleTrigger::Schedule(x) => {
            body.insert("schedule_expression".into(), json!(x));
        }
    }
    body.insert(
        "state".into(),
        json!(if rule.enabled { "ENABLED" } else { "DISABLED" }),
    );
    let addr = cx.add("aws_cloudwatch_event_rule", &r.path, Value::Object(body));
    for t in &rule.targets {
        let mut target = Map::new();
        target.insert("rule".into(), json!(addr.interp("name")));
        target.insert("target_id".into(), json!(t.id));
        target.insert("arn".into(), cx.attr(&t.topic));
        match &t.input {
            TargetInput::Event => {}
            TargetInput::Text(text) => {
                target.insert("input".into(), cx.text(&text.json_quoted()));
            }
            TargetInput::Transformer { paths, template } => {
                let paths: Map<String, Value> = paths
                    .iter()
                    .map(|(k, v)| (k.clone(), json!(escape_template(v))))
                    .collect();
                target.insert(
                    "input_transformer".into(),
                    json!({"input_paths": paths, "input_template": json_string(template)}),
                );
            }
        }
        cx.add_named(
            "aws_cloudwatch_event_target",
            snake(&logical_id(&format!("{}/{}", r.path, t.id))),
            &r.path,
            Value::Object(target),
        );
    }
}

pub(super) fn schedule(cx: Cx, r: &Resource, x: &Schedule) {
    let target = json!({
        "arn": cx.text(&x.target_arn()),
        "role_arn": cx.attr(&x.role),
        "input": cx.text(&x.call.input()),
        "retry_policy": {
            "maximum_event_age_in_seconds": x.event_age_seconds(),
            "maximum_retry_attempts": Schedule::RETRY_ATTEMPTS,
        },
    });
    cx.add(
        "aws_scheduler_schedule",
        &r.path,
        json!({
            "description": escape_template(&x.description),
            "flexible_time_window": {"mode": "OFF"},
            "schedule_expression": x.expression(),
            "schedule_expression_timezone": "UTC",
            "state": "ENABLED",
            "target": target,
        }),
    );
}

#[cfg(test)]
mod tests {
    use crate::app::{Stack, Tags};
    use crate::synth::terraform::module::{RootModule, MAIN_FILE};

    /// The kinds no construct uses yet: a dashboard whose body names the region, and an alarm
    /// on a percentile (an extended statistic).
    #[test]
    fn dashboards_and_percentile_alarms() {
        let mut stack = Stack::new("ops", "us-west-2");
        let stage = stack.cloudformation_stage("operations");
        let tags = Tags::new();
        let resources =
            crate::resources::operations::sample_dashboard_and_percentile_alarm(stage, 99.9);
        let mut cx = RootModule::new(&stack, &tags);
        for r in &resources {
            super::super::lower(&mut cx, r);
        }
        let files = cx.finish(None).unwrap();
        let (_, main) = files.iter().find(|(f, _)| *f == MAIN_FILE).unwrap();
        let board = &main["resource"]["aws_cloudwatch_dashboard"]["ops_board"];
        assert_eq!(board["dashboard_name"], "ops-serving");
        let body = board["dashboard_body"].as_str().unwrap();
        assert!(
            body.contains(r#""region":"${data.aws_region.current.region}""#),
            "{body}"
        );
        let alarm = &main["resource"]["aws_cloudwatch_metric_alarm"]["ops_latency"];
        assert_eq!(alarm["extended_statistic"], "p99.9");
        assert!(alarm.get("statistic").is_none());
        assert_eq!(alarm["dimensions"]["LoadBalancer"], "app/x/1");
        assert_eq!(alarm["ok_actions"][0], "${aws_sns_topic.alarms_topic.arn}");
    }
}
