//! CloudFormation lowering of the operations kinds: the topic and its policy, alarms,
//! dashboards, rules with their targets inline; the Prometheus workspace with its alert manager
//! definition inline, its rule groups, the managed collector (its configuration base64-encoded
//! by `Fn::Base64`).

use super::{e, s, Cx};
use crate::app::StageId;
use crate::resources::{
    AlarmMetric, Dashboard, EventRule, MetricAlarm, MetricStat, PrometheusRuleGroups,
    PrometheusScraper, PrometheusWorkspace, Resource, RuleTrigger, Schedule, SnsTopic,
    SnsTopicPolicy, TargetInput,
};
use crate::synth::cloudformation::expr::Expr;
use crate::synth::cloudformation::expr::Val;
use crate::synth::cloudformation::l1::*;

pub(super) fn topic(cx: Cx, r: &Resource, t: &SnsTopic) {
    let key = cx.attr(r.stage, &t.kms_key);
    cx.add(
        r.stage,
        &r.path,
        &sns_topic::Topic {
            display_name: Some(s(&t.display_name)),
            kms_master_key_id: Some(e(key)),
            ..Default::default()
        },
    );
}

pub(super) fn topic_policy(cx: Cx, r: &Resource, p: &SnsTopicPolicy) {
    let topic = cx.attr(r.stage, &p.topic);
    let document = cx.policy(r.stage, &p.document);
    cx.add(
        r.stage,
        &r.path,
        &sns_topic_policy::TopicPolicy {
            policy_document: document,
            topics: vec![e(topic)],
        },
    );
}

fn dimensions(cx: Cx, stage: StageId, m: &MetricStat) -> Option<Vec<cloudwatch_alarm::Dimension>> {
    (!m.dimensions.is_empty()).then(|| {
        m.dimensions
            .iter()
            .map(|(name, value)| cloudwatch_alarm::Dimension {
                name: s(name),
                value: e(cx.text(stage, value)),
            })
            .collect()
    })
}

pub(super) fn alarm(cx: Cx, r: &Resource, a: &MetricAlarm) {
    let topics = |cx: Cx, refs: &[crate::app::AttrRef]| -> Option<Vec<Val<String>>> {
        (!refs.is_empty()).then(|| refs.iter().map(|t| e(cx.attr(r.stage, t))).collect())
    };
    let alarm_actions = topics(cx, &a.alarm_actions);
    let ok_actions = topics(cx, &a.ok_actions);
    let mut alarm = cloudwatch_alarm::Alarm {
        alarm_name: Some(s(&a.name)),
        alarm_description: Some(s(&a.description)),
        actions_enabled: Some(true.into()),
        alarm_actions,
        ok_actions,
        comparison_operator: Some(s(a.comparison.as_str())),
        evaluation_periods: Some(i64::from(a.evaluation_periods).into()),
        datapoints_to_alarm: Some(i64::from(a.datapoints_to_alarm).into()),
        threshold: Some(a.threshold.into()),
        treat_missing_data: Some(s(a.missing_data.as_str())),
        ..Default::default()
    };
    match &a.metric {
        AlarmMetric::Metric(m) => {
            alarm.namespace = Some(s(&m.namespace));
            alarm.metric_name = Some(s(&m.metric_name));
            alarm.dimensions = dimensions(cx, r.stage, m);
            alarm.period = Some(i64::from(m.period_seconds).into());
            if m.statistic.is_extended() {
                alarm.extended_statistic = Some(s(m.statistic.as_string()));
            } else {
                alarm.statistic = Some(s(m.statistic.as_string()));
            }
        }
        AlarmMetric::Math {
            expression,
            label,
            metrics,
        } => {
            let mut queries = vec![cloudwatch_alarm::MetricDataQuery {
                id: s("expression"),
                expression: Some(s(expression)),
                label: Some(s(label)),
                return_data: Some(true.into()),
                ..Default::default()
            }];
            for (id, m) in metrics {
                queries.push(cloudwatch_alarm::MetricDataQuery {
                    id: s(id),
                    metric_stat: Some(cloudwatch_alarm::MetricStat {
                        metric: cloudwatch_alarm::Metric {
                            namespace: Some(s(&m.namespace)),
                            metric_name: Some(s(&m.metric_name)),
                            dimensions: dimensions(cx, r.stage, m),
                        },
                        period: i64::from(m.period_seconds).into(),
                        stat: s(m.statistic.as_string()),
                        unit: None,
                    }),
                    return_data: Some(false.into()),
                    ..Default::default()
                });
            }
            alarm.metrics = Some(queries);
        }
    }
    cx.add(r.stage, &r.path, &alarm);
}

pub(super) fn dashboard(cx: Cx, r: &Resource, d: &Dashboard) {
    let body = cx.text(r.stage, &d.body);
    cx.add(
        r.stage,
        &r.path,
        &cloudwatch_dashboard::Dashboard {
            dashboard_name: Some(s(&d.name)),
            dashboard_body: e(body),
            tags: None,
        },
    );
}

pub(super) fn prometheus_workspace(cx: Cx, r: &Resource, w: &PrometheusWorkspace) {
    let key = w.kms_key.as_ref().map(|k| e(cx.attr(r.stage, k)));
    let alert_manager = w.alert_manager.as_ref().map(|am| e(cx.text(r.stage, am)));
    cx.add(
        r.stage,
        &r.path,
        &aps_workspace::Workspace {
            alias: Some(s(&w.alias)),
            kms_key_arn: key,
            alert_manager_definition: alert_manager,
            ..Default::default()
        },
    );
}

pub(super) fn prometheus_rule_groups(cx: Cx, r: &Resource, g: &PrometheusRuleGroups) {
    let workspace = cx.attr(r.stage, &g.workspace_arn);
    cx.add(
        r.stage,
        &r.path,
        &aps_rule_groups_namespace::RuleGroupsNamespace {
            name: s(&g.name),
            workspace: e(workspace),
            data: s(&g.data),
            tags: None,
        },
    );
}

pub(super) fn prometheus_scraper(cx: Cx, r: &Resource, p: &PrometheusScraper) {
    let cluster = cx.attr(r.stage, &p.cluster_arn);
    let subnets = p.subnets.iter().map(|x| e(cx.attr(r.stage, x))).collect();
    let groups: Vec<Val<String>> = p
        .security_groups
        .iter()
        .map(|x| e(cx.attr(r.stage, x)))
        .collect();
    let workspace = cx.attr(r.stage, &p.workspace_arn);
    cx.add(
        r.stage,
        &r.path,
        &aps_scraper::Scraper {
            alias: Some(s(&p.alias)),
            source: aps_scraper::Source {
                eks_configuration: Some(aps_scraper::EksConfiguration {
                    cluster_arn: e(cluster),
                    security_group_ids: (!groups.is_empty()).then_some(groups),
                    subnet_ids: subnets,
                }),
                vpc_configuration: None,
            },
            destination: aps_scraper::Destination {
                amp_configuration: Some(aps_scraper::AmpConfiguration {
                    workspace_arn: e(workspace),
                }),
                cloud_watch_configuration: None,
            },
            scrape_configuration: aps_scraper::ScrapeConfiguration {
                configuration_blob: Some(e(Expr::Base64(Box::new(Expr::str(
                    p.configuration.clone(),
                ))))),
            },
            ..Default::default()
        },
    );
}

/// The message text as EventBridge passes it to SNS: a JSON string.
pub(crate) fn json_string(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

pub(super) fn rule(cx: Cx, r: &Resource, rule: &EventRule) {
    let targets = rule
        .targets
        .iter()
        .map(|t| {
            let arn = cx.attr(r.stage, &t.topic);
            let mut target = events_rule::Target {
                id: s(&t.id),
                arn: e(arn),
                ..Default::default()
            };
            match &t.input {
                TargetInput::Event => {}
                TargetInput::Text(text) => {
                    target.input = Some(e(cx.text(r.stage, &text.json_quoted())));
                }
                TargetInput::Transformer { paths, template } => {
                    target.input_transformer = Some(events_rule::InputTransformer {
                        input_paths_map: Some(
                            paths.iter().map(|(k, v)| (k.clone(), s(v))).collect(),
                        ),
                        input_template: s(json_string(template)),
                    });
                }
            }
            target
        })
        .collect();
    let (event_pattern, schedule_expression) = match &rule.trigger {
        RuleTrigger::Pattern(p) => (Some(super::raw_value(cx, r.stage, p)), None),
        RuleTrigger::Schedule(x) => (None, Some(s(x))),
    };
    cx.add(
        r.stage,
        &r.path,
        &events_rule::Rule {
            description: Some(s(&rule.description)),
            event_pattern,
            schedule_expression,
            state: Some(s(if rule.enabled { "ENABLED" } else { "DISABLED" })),
            targets: Some(targets),
            ..Default::default()
        },
    );
}

pub(super) fn schedule(cx: Cx, r: &Resource, x: &Schedule) {
    let role = cx.attr(r.stage, &x.role);
    let arn = cx.text(r.stage, &x.target_arn());
    let input = cx.text(r.stage, &x.call.input());
    cx.add(
        r.stage,
        &r.path,
        &scheduler_schedule::Schedule {
            description: Some(s(&x.description)),
            flexible_time_window: scheduler_schedule::FlexibleTimeWindow {
                mode: s("OFF"),
                ..Default::default()
            },
            schedule_expression: s(x.expression()),
            schedule_expression_timezone: Some(s("UTC")),
            state: Some(s("ENABLED")),
            target: scheduler_schedule::Target {
                arn: e(arn),
                role_arn: e(role),
                input: Some(e(input)),
                retry_policy: Some(scheduler_schedule::RetryPolicy {
                    maximum_event_age_in_seconds: Some(Val::Lit(f64::from(x.event_age_seconds()))),
                    maximum_retry_attempts: Some(Val::Lit(f64::from(Schedule::RETRY_ATTEMPTS))),
                }),
                ..Default::default()
            },
            ..Default::default()
        },
    );
}

#[cfg(test)]
mod tests {
    use crate::app::{Stack, Tags};
    use crate::synth::cloudformation::template::StackTemplates;
    use serde_json::json;

    /// The kinds no construct uses yet: a dashboard whose body names the region, and an alarm
    /// on a percentile (an extended statistic).
    #[test]
    fn dashboards_and_percentile_alarms() {
        let mut stack = Stack::new("ops", "us-west-2");
        let stage = stack.cloudformation_stage("operations");
        let resources =
            crate::resources::operations::sample_dashboard_and_percentile_alarm(stage, 99.0);
        let tags = Tags::new();
        let mut cx = StackTemplates::new(&stack, &tags);
        for r in &resources {
            super::super::lower(&mut cx, r, &Default::default());
        }
        let templates = cx
            .finish(&[], &mut crate::diagnostics::Diagnostics::new())
            .unwrap();
        let t = &templates[&stage];
        let board = &t["Resources"]["OpsBoard"]["Properties"];
        assert_eq!(board["DashboardName"], "ops-serving");
        let sub = board["DashboardBody"]["Fn::Sub"].as_str().unwrap();
        assert!(sub.contains(r#""region":"${AWS::Region}""#), "{sub}");
        let alarm = &t["Resources"]["OpsLatency"]["Properties"];
        assert_eq!(alarm["ExtendedStatistic"], "p99");
        assert!(alarm.get("Statistic").is_none());
        assert_eq!(alarm["OKActions"], json!([{"Ref": "AlarmsTopic"}]));
        assert_eq!(alarm["TreatMissingData"], "missing");
    }
}
