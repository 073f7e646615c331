//! The kinds that operate a deployment: an SNS topic for notifications and its resource
//! policy, CloudWatch metric alarms and dashboards, EventBridge rules (on an event pattern or a
//! schedule) with their targets; an Amazon Managed Service for Prometheus workspace with its
//! alert manager definition, its rule groups and a managed collector.

use super::iam::PolicyDocument;
use super::kinds::{RawValue, ResourceFacts};
use crate::app::text::{StackInput, Text};
use crate::app::{AttrRef, Kind};

/// An SNS topic whose messages are encrypted at rest with a customer managed KMS key (CloudWatch
/// alarms and EventBridge can publish to a topic encrypted with such a key when its policy lets
/// them use it, never to one encrypted with the AWS managed `alias/aws/sns` key).
#[derive(Clone, Debug, PartialEq)]
pub struct SnsTopic {
    /// The display name (the sender name of email notifications), 100 characters at most.
    pub display_name: String,
    /// The ARN of the key encrypting the topic.
    pub kms_key: AttrRef,
}

impl ResourceFacts for SnsTopic {
    const HANDLE: Option<Kind> = Some(Kind::SnsTopic);

    fn references(&self) -> Vec<AttrRef> {
        vec![self.kms_key.clone()]
    }
}

/// The resource policy of an SNS topic.
#[derive(Clone, Debug, PartialEq)]
pub struct SnsTopicPolicy {
    /// The topic's ARN.
    pub topic: AttrRef,
    /// The policy.
    pub document: PolicyDocument,
}

impl ResourceFacts for SnsTopicPolicy {
    fn references(&self) -> Vec<AttrRef> {
        let mut out = vec![self.topic.clone()];
        out.extend(self.document.references());
        out
    }
}

/// How the datapoints of a period are summarised.
#[derive(Clone, Debug, PartialEq)]
pub enum Statistic {
    /// `Average`.
    Average,
    /// `Sum`.
    Sum,
    /// `Minimum`.
    Minimum,
    /// `Maximum`.
    Maximum,
    /// `SampleCount`.
    SampleCount,
    /// A percentile (`p99` for 99): CloudWatch's extended statistic.
    Percentile(f64),
}

impl Statistic {
    /// The statistic as CloudWatch spells it (`Sum`, `p99`, `p99.9`).
    pub fn as_string(&self) -> String {
        match self {
            Statistic::Average => "Average".to_owned(),
            Statistic::Sum => "Sum".to_owned(),
            Statistic::Minimum => "Minimum".to_owned(),
            Statistic::Maximum => "Maximum".to_owned(),
            Statistic::SampleCount => "SampleCount".to_owned(),
            Statistic::Percentile(p) => format!("p{p}"),
        }
    }

    /// Whether it is an extended statistic (a percentile), set apart from the standard ones
    /// in an alarm on a single metric.
    pub fn is_extended(&self) -> bool {
        matches!(self, Statistic::Percentile(_))
    }
}

/// One metric, summarised over a period.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricStat {
    /// The namespace (`AWS/Events`).
    pub namespace: String,
    /// The metric (`FailedInvocations`).
    pub metric_name: String,
    /// The dimensions, by name, in order; a value may name a resource of the stack.
    pub dimensions: Vec<(String, Text)>,
    /// The statistic.
    pub statistic: Statistic,
    /// The period in seconds (10, 20, 30 or a multiple of 60).
    pub period_seconds: u32,
}

impl MetricStat {
    fn references(&self) -> impl Iterator<Item = AttrRef> + '_ {
        self.dimensions
            .iter()
            .flat_map(|(_, v)| v.references().cloned())
    }
}

/// What an alarm watches.
#[derive(Clone, Debug, PartialEq)]
pub enum AlarmMetric {
    /// One metric.
    Metric(MetricStat),
    /// A metric math expression over metrics, each with its id (`m1`) in the expression.
    Math {
        /// The expression (`m1 + m2`), CloudWatch metric math.
        expression: String,
        /// The label of the expression's series.
        label: String,
        /// The metrics the expression reads, by id.
        metrics: Vec<(String, MetricStat)>,
    },
}

/// How the value compares with the threshold when the alarm fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    /// `>=`.
    GreaterThanOrEqualToThreshold,
    /// `>`.
    GreaterThanThreshold,
    /// `<`.
    LessThanThreshold,
    /// `<=`.
    LessThanOrEqualToThreshold,
}

impl Comparison {
    /// CloudWatch's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Comparison::GreaterThanOrEqualToThreshold => "GreaterThanOrEqualToThreshold",
            Comparison::GreaterThanThreshold => "GreaterThanThreshold",
            Comparison::LessThanThreshold => "LessThanThreshold",
            Comparison::LessThanOrEqualToThreshold => "LessThanOrEqualToThreshold",
        }
    }
}

/// How periods without data count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissingData {
    /// As breaching the threshold.
    Breaching,
    /// As within the threshold.
    NotBreaching,
    /// Not at all: the alarm keeps its state.
    Ignore,
    /// As missing: the alarm goes to `INSUFFICIENT_DATA` when all are missing.
    Missing,
}

impl MissingData {
    /// CloudWatch's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            MissingData::Breaching => "breaching",
            MissingData::NotBreaching => "notBreaching",
            MissingData::Ignore => "ignore",
            MissingData::Missing => "missing",
        }
    }
}

/// A CloudWatch metric alarm notifying SNS topics.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricAlarm {
    /// The alarm's name, unique in the account and region (255 characters at most).
    pub name: String,
    /// What the alarm means and what to do, shown in every notification.
    pub description: String,
    /// What it watches.
    pub metric: AlarmMetric,
    /// The number of most recent periods evaluated.
    pub evaluation_periods: u32,
    /// How many of them must breach (at most `evaluation_periods`).
    pub datapoints_to_alarm: u32,
    /// The threshold.
    pub threshold: f64,
    /// The comparison.
    pub comparison: Comparison,
    /// How missing data counts.
    pub missing_data: MissingData,
    /// Topic ARNs notified when the alarm fires.
    pub alarm_actions: Vec<AttrRef>,
    /// Topic ARNs notified when it returns to OK.
    pub ok_actions: Vec<AttrRef>,
}

impl ResourceFacts for MetricAlarm {
    fn references(&self) -> Vec<AttrRef> {
        let mut out: Vec<AttrRef> = match &self.metric {
            AlarmMetric::Metric(m) => m.references().collect(),
            AlarmMetric::Math { metrics, .. } => {
                metrics.iter().flat_map(|(_, m)| m.references()).collect()
            }
        };
        out.extend(self.alarm_actions.iter().cloned());
        out.extend(self.ok_actions.iter().cloned());
        out
    }
}

/// A CloudWatch dashboard.
#[derive(Clone, Debug, PartialEq)]
pub struct Dashboard {
    /// The dashboard's name, unique in the account (letters, digits, `-` and `_`).
    pub name: String,
    /// The dashboard body: a JSON document (`{"widgets": [...]}`), whose strings may name
    /// resources of the stack.
    pub body: Text,
}

impl Dashboard {
    /// A dashboard whose body is the JSON document `body`, rendered compactly in its own key
    /// order (deterministic with `serde_json`'s `preserve_order`).
    pub fn from_json(name: impl Into<String>, body: &serde_json::Value) -> Dashboard {
        Dashboard {
            name: name.into(),
            body: Text::lit(body.to_string()),
        }
    }
}

impl ResourceFacts for Dashboard {
    fn references(&self) -> Vec<AttrRef> {
        self.body.references().cloned().collect()
    }
}

/// What starts an EventBridge rule.
#[derive(Clone, Debug, PartialEq)]
pub enum RuleTrigger {
    /// Events on the default bus matching this event pattern (its texts may hold deploy-time
    /// inputs: a reservation id).
    Pattern(RawValue),
    /// A schedule expression, `rate(...)` or `cron(...)` (UTC).
    Schedule(String),
}

/// What a rule sends to its target.
#[derive(Clone, Debug, PartialEq)]
pub enum TargetInput {
    /// The matched event, unchanged.
    Event,
    /// This text, as the message (a JSON string).
    Text(Text),
    /// A message built from the event: `template` with `<name>` replaced by the value at the
    /// JSON path `paths[name]` of the event (EventBridge's input transformer), as a JSON string.
    Transformer {
        /// Names and the JSON paths they read (`$.detail.end-date`), in order.
        paths: Vec<(String, String)>,
        /// The message text with `<name>` placeholders.
        template: String,
    },
}

/// A target of a rule: an SNS topic.
#[derive(Clone, Debug, PartialEq)]
pub struct EventTarget {
    /// The target's id, unique in the rule (letters, digits, `.`, `_` and `-`).
    pub id: String,
    /// The topic's ARN.
    pub topic: AttrRef,
    /// What the topic receives.
    pub input: TargetInput,
}

/// An EventBridge rule on the account's default event bus.
#[derive(Clone, Debug, PartialEq)]
pub struct EventRule {
    /// What the rule is for (512 characters at most).
    pub description: String,
    /// The event pattern or schedule.
    pub trigger: RuleTrigger,
    /// Whether the rule is enabled.
    pub enabled: bool,
    /// Its targets.
    pub targets: Vec<EventTarget>,
}

impl ResourceFacts for EventRule {
    const HANDLE: Option<Kind> = Some(Kind::EventRule);

    fn references(&self) -> Vec<AttrRef> {
        self.targets.iter().map(|t| t.topic.clone()).collect()
    }
    fn inputs(&self) -> Vec<StackInput> {
        let mut out = match &self.trigger {
            RuleTrigger::Pattern(p) => p.inputs(),
            RuleTrigger::Schedule(_) => Vec::new(),
        };
        for t in &self.targets {
            if let TargetInput::Text(text) = &t.input {
                out.extend(text.inputs().cloned());
            }
        }
        out
    }
}

/// An AWS API call an EventBridge Scheduler schedule makes (a universal target,
/// `arn:<partition>:scheduler:::aws-sdk:<service>:<action>`), with its typed request.
#[derive(Clone, Debug, PartialEq)]
pub enum ScheduledCall {
    /// EKS `UpdateNodegroupConfig`: set a managed node group's sizes.
    UpdateNodegroupConfig {
        /// The cluster's name.
        cluster: AttrRef,
        /// The node group's name.
        node_group: String,
        /// The node group's ARN (what the role may act on; also orders the schedule after the
        /// group).
        node_group_arn: AttrRef,
        /// (min, desired, max).
        sizes: (i64, i64, i64),
    },
}

impl ScheduledCall {
    /// The service and action of the universal target (`eks:updateNodegroupConfig`).
    pub fn action(&self) -> &'static str {
        match self {
            ScheduledCall::UpdateNodegroupConfig { .. } => "eks:updateNodegroupConfig",
        }
    }

    /// The IAM action the schedule's role needs (`eks:UpdateNodegroupConfig`).
    pub fn iam_action(&self) -> &'static str {
        match self {
            ScheduledCall::UpdateNodegroupConfig { .. } => "eks:UpdateNodegroupConfig",
        }
    }

    /// Every resource the call names.
    pub fn references(&self) -> Vec<AttrRef> {
        match self {
            ScheduledCall::UpdateNodegroupConfig {
                cluster,
                node_group_arn,
                ..
            } => vec![cluster.clone(), node_group_arn.clone()],
        }
    }

    /// The resource the role acts on.
    pub fn resource(&self) -> &AttrRef {
        match self {
            ScheduledCall::UpdateNodegroupConfig { node_group_arn, .. } => node_group_arn,
        }
    }

    /// The request as JSON text (the schedule's `Input`): the API's request members by their
    /// names in the service model, which universal targets take as the SDKs do.
    pub fn input(&self) -> Text {
        match self {
            ScheduledCall::UpdateNodegroupConfig {
                cluster,
                node_group,
                sizes: (min, desired, max),
                ..
            } => Text::lit("{\"ClusterName\":")
                .push_text(Text::default().push_ref(cluster.clone()).json_quoted())
                .push_lit(",\"NodegroupName\":")
                .push_text(Text::lit(node_group.as_str()).json_quoted())
                .push_lit(format!(
                    ",\"ScalingConfig\":{{\"MinSize\":{min},\"DesiredSize\":{desired},\"MaxSize\":{max}}}}}"
                )),
        }
    }
}

/// An EventBridge Scheduler schedule (in the default schedule group) making one AWS API call
/// once, at a minute fixed at synthesis, as a role. Its expression is a cron pinned to that
/// minute and year rather than a one-time `at()`: an `at()` already past is refused when the
/// schedule is created, so a stage deployed after that minute would fail, while a pinned cron
/// has no later occurrence and never runs (what comes after the minute is the plan's step).
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// What it does (512 characters at most).
    pub description: String,
    /// When, in minutes since 1970-01-01T00:00Z (UTC).
    pub at: i64,
    /// The call.
    pub call: ScheduledCall,
    /// The ARN of the role the call is made as.
    pub role: AttrRef,
    /// How long a call that fails is retried, seconds; Scheduler keeps an event 60 to 86400
    /// seconds ([`Schedule::event_age_seconds`] bounds it).
    pub retry_for_seconds: u32,
}

impl Schedule {
    /// How many times a failed call is retried (with exponential backoff, within
    /// [`Schedule::retry_for_seconds`]).
    pub const RETRY_ATTEMPTS: u32 = 10;

    /// The retry window as Scheduler takes it (`MaximumEventAgeInSeconds`: 60 to 86400).
    pub fn event_age_seconds(&self) -> u32 {
        self.retry_for_seconds.clamp(60, 86_400)
    }

    /// The schedule expression (`cron(55 4 8 1 ? 2027)`), in the `UTC` time zone.
    pub fn expression(&self) -> String {
        crate::catalog::time::cron_once(self.at)
    }

    /// The universal target's ARN (`arn:aws:scheduler:::aws-sdk:eks:updateNodegroupConfig`).
    pub fn target_arn(&self) -> Text {
        Text::lit("arn:")
            .push_pseudo(crate::app::text::Pseudo::Partition)
            .push_lit(format!(":scheduler:::aws-sdk:{}", self.call.action()))
    }
}

impl ResourceFacts for Schedule {
    fn references(&self) -> Vec<AttrRef> {
        let mut out = vec![self.role.clone()];
        out.extend(self.call.references());
        out
    }
}

/// An Amazon Managed Service for Prometheus workspace, with its alert manager definition
/// (CloudFormation states the definition as a property of the workspace, Terraform as a
/// resource of its own). Its data is encrypted at rest, with an AWS owned key unless a customer
/// managed key is named (a workspace so encrypted cannot receive metrics from an AWS managed
/// collector, AMP user guide, "Encryption at rest").
#[derive(Clone, Debug, PartialEq)]
pub struct PrometheusWorkspace {
    /// The alias (100 characters at most; not unique).
    pub alias: String,
    /// The ARN of a customer managed key encrypting the workspace's data (set once, at
    /// creation); `None`: an AWS owned key.
    pub kms_key: Option<AttrRef>,
    /// The alert manager definition: the YAML document AMP reads (`alertmanager_config: |`
    /// holding Alertmanager's configuration), whose strings may name resources of the stack.
    pub alert_manager: Option<Text>,
}

impl ResourceFacts for PrometheusWorkspace {
    const HANDLE: Option<Kind> = Some(Kind::PrometheusWorkspace);

    fn references(&self) -> Vec<AttrRef> {
        let mut out: Vec<AttrRef> = self.kms_key.iter().cloned().collect();
        if let Some(am) = &self.alert_manager {
            out.extend(am.references().cloned());
        }
        out
    }
}

/// A rule groups namespace of a Prometheus workspace: recording and alerting rules, a
/// Prometheus rules file.
#[derive(Clone, Debug, PartialEq)]
pub struct PrometheusRuleGroups {
    /// The namespace's name (64 characters at most).
    pub name: String,
    /// The workspace's ARN (CloudFormation names the workspace by ARN).
    pub workspace_arn: AttrRef,
    /// The workspace's id (Terraform names it by id).
    pub workspace_id: AttrRef,
    /// The rules file (YAML, `groups:`).
    pub data: String,
}

impl ResourceFacts for PrometheusRuleGroups {
    fn references(&self) -> Vec<AttrRef> {
        vec![self.workspace_arn.clone(), self.workspace_id.clone()]
    }
}

/// An AWS managed Prometheus collector: a scraper in the VPC of an EKS cluster, discovering
/// targets through the cluster's API and writing to a workspace.
#[derive(Clone, Debug, PartialEq)]
pub struct PrometheusScraper {
    /// The alias (100 characters at most).
    pub alias: String,
    /// The EKS cluster's ARN.
    pub cluster_arn: AttrRef,
    /// Subnet ids for the scraper's network interfaces (in at least two zones).
    pub subnets: Vec<AttrRef>,
    /// Security group ids of the scraper's network interfaces.
    pub security_groups: Vec<AttrRef>,
    /// The destination workspace's ARN.
    pub workspace_arn: AttrRef,
    /// The scrape configuration (Prometheus's configuration file, YAML; CloudFormation takes it
    /// base64-encoded, Terraform as text).
    pub configuration: String,
}

impl ResourceFacts for PrometheusScraper {
    fn references(&self) -> Vec<AttrRef> {
        let mut out = vec![self.cluster_arn.clone()];
        out.extend(self.subnets.iter().cloned());
        out.extend(self.security_groups.iter().cloned());
        out.push(self.workspace_arn.clone());
        out
    }
}

/// Resources no construct emits yet, for the backends' unit tests: a dashboard whose body
/// names the region and an alarm on the `percentile` of a load balancer's response time.
#[cfg(test)]
pub(crate) fn sample_dashboard_and_percentile_alarm(
    stage: crate::app::StageId,
    percentile: f64,
) -> [super::Resource; 2] {
    use super::Resource;
    use crate::app::text::{Pseudo, Text};
    use crate::app::{kind, Ref};
    let topic: Ref<kind::SnsTopic> = Ref::new("ops", "Alarms/Topic");
    let body = Text::lit(r#"{"widgets":[{"type":"metric","properties":{"region":""#)
        .push_pseudo(Pseudo::Region)
        .push_lit(r#"","metrics":[["AWS/Events","FailedInvocations"]]}}]}"#);
    [
        Resource {
            path: "Ops/Board".to_owned(),
            stage,
            kind: Dashboard {
                name: "ops-serving".to_owned(),
                body,
            }
            .into(),
            depends_on: Vec::new(),
            acknowledged: Vec::new(),
        },
        Resource {
            path: "Ops/Latency".to_owned(),
            stage,
            kind: MetricAlarm {
                name: "ops-latency".to_owned(),
                description: "p99 latency".to_owned(),
                metric: AlarmMetric::Metric(MetricStat {
                    namespace: "AWS/ApplicationELB".to_owned(),
                    metric_name: "TargetResponseTime".to_owned(),
                    dimensions: vec![("LoadBalancer".to_owned(), Text::lit("app/x/1"))],
                    statistic: Statistic::Percentile(percentile),
                    period_seconds: 60,
                }),
                evaluation_periods: 5,
                datapoints_to_alarm: 3,
                threshold: 2.5,
                comparison: Comparison::GreaterThanThreshold,
                missing_data: MissingData::Missing,
                alarm_actions: vec![topic.arn()],
                ok_actions: vec![topic.arn()],
            }
            .into(),
            depends_on: Vec::new(),
            acknowledged: Vec::new(),
        },
    ]
}
