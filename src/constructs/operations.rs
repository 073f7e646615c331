//! Operating a deployment: where notifications go, and the warning before reserved capacity
//! ends.
//!
//! [`AlarmTopic`] is an SNS topic encrypted with a customer managed KMS key, for alarms and
//! events. CloudWatch alarms and EventBridge publish to an encrypted topic only when the key's
//! policy lets their service principals use it (`kms:Decrypt`, `kms:GenerateDataKey*`), which
//! the AWS managed key `alias/aws/sns` cannot grant: its policy is AWS's. The topic's policy lets
//! `cloudwatch.amazonaws.com` and `events.amazonaws.com` publish for this account only
//! (`aws:SourceAccount`), and `aps.amazonaws.com` (the alert manager of an Amazon Managed
//! Service for Prometheus workspace) publish and read the topic's attributes for a workspace
//! of this account and region (`aws:SourceArn`), and denies publishing without TLS; the key
//! lets all three use it. Nobody is subscribed by the
//! deployment: an email subscription needs its recipient's confirmation, so operators
//! subscribe themselves to the topic whose ARN the stage's output `<Id>TopicArn` names.
//!
//! [`CapacityEndWarning`] tells the topic before a Capacity Block or a training plan ends:
//!
//! * a scheduled EventBridge rule (`cron(M H D Mon ? YYYY)`, UTC, once) `lead_hours` before the
//!   end time given in the description, publishing a fixed message (synthesis has no clock and
//!   no AWS call, so the end time is the description's, checked for syntax and range only);
//! * for a Capacity Block, a rule on the event EC2 sends 40 minutes before the block ends
//!   (source `aws.ec2`, detail type `Capacity Block Expiration Warning`, documented in the
//!   Amazon EC2 User Guide, "Monitor Capacity Blocks using EventBridge",
//!   `capacity-blocks-monitor`, and listed in the EventBridge events reference for EC2,
//!   `events-ref-ec2`; earlier versions of the user guide spell it `Capacity Block Reservation
//!   Expiration Warning`, so both are matched), filtered on the reservation id
//!   (`detail.capacity-reservation-id`), the message built from the event;
//! * an alarm on the rules' `FailedInvocations` (namespace `AWS/Events`): a one-time message
//!   that cannot be delivered would otherwise be lost silently.
//!
//! SageMaker documents no EventBridge event before a training plan ends (the EventBridge
//! events reference for SageMaker lists training job, endpoint, HyperPod cluster and node
//! events, none for training plans), so a training plan gets the scheduled rule only.

use super::stack_file::Ints;
use super::{CapacityEndFacts, Construct, Context, Facts};
use crate::app::text::{Pseudo, Text};
use crate::app::{kind, AttrRef, Ref};
pub use crate::catalog::time::{cron_at, parse_utc_minutes, END_YEARS};
use crate::diagnostics::{Code, Diagnostics};
use crate::resources::iam::{account_key_policy, PrincipalKind, Statement};
use crate::resources::plan::Step;
use crate::resources::{
    AlarmMetric, Comparison, EventRule, EventTarget, KmsKey, MetricAlarm, MetricStat, MissingData,
    RawValue, RuleTrigger, Scope, SnsTopic, SnsTopicPolicy, StackOutput, Statistic, TargetInput,
};
use serde_json::json;

/// The service principals that publish alarms and events to the topic: CloudWatch alarms,
/// EventBridge rules, and the alert manager of Amazon Managed Service for Prometheus
/// workspaces ([`PrometheusMonitoring`](super::PrometheusMonitoring)).
pub const PUBLISHERS: [&str; 3] = [
    "cloudwatch.amazonaws.com",
    "events.amazonaws.com",
    "aps.amazonaws.com",
];

/// The detail types of the event EC2 sends 40 minutes before a Capacity Block ends: the
/// current spelling and the one of earlier documentation.
pub const CAPACITY_BLOCK_EXPIRY_DETAIL_TYPES: [&str; 2] = [
    "Capacity Block Expiration Warning",
    "Capacity Block Reservation Expiration Warning",
];

/// The hours before the end at which the scheduled warning is sent: at least one, at most 30
/// days.
pub const LEAD_HOURS: Ints = Ints::new(1, 720);

/// The lead time when none is given.
pub const DEFAULT_LEAD_HOURS: u32 = 24;

// --- AlarmTopic ------------------------------------------------------------------------------

/// The encrypted notification topic.
#[derive(Clone, Debug)]
pub struct AlarmTopic {
    id: String,
    display_name: Option<String>,
}

/// Handle to the topic.
#[derive(Clone, Debug)]
pub struct AlarmTopicHandle {
    /// The topic.
    pub topic: Ref<kind::SnsTopic>,
    /// The key encrypting it.
    pub key: Ref<kind::KmsKey>,
}

impl AlarmTopic {
    /// A topic with its key and policy.
    pub fn new(id: impl Into<String>) -> Self {
        AlarmTopic {
            id: id.into(),
            display_name: None,
        }
    }

    /// The sender name of its email notifications (100 characters at most; the default is
    /// `<stack> alarms`).
    pub fn display_name(mut self, name: impl Into<String>) -> Self {
        self.display_name = Some(name.into());
        self
    }
}

impl Construct for AlarmTopic {
    type Handle = AlarmTopicHandle;
    const KIND: &'static str = "alarm_topic";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> AlarmTopicHandle {
        AlarmTopicHandle {
            topic: Ref::new(stack, format!("{}/Topic", self.id)),
            key: Ref::new(stack, format!("{}/Key", self.id)),
        }
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        if let Some(name) = &self.display_name {
            if name.is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
                ds.report_field(
                    Code::InvalidName,
                    cx.path,
                    "display_name",
                    format!("`{name}` is not an SNS display name"),
                    "give 1 to 100 characters without control characters",
                );
            }
        }
    }

    /// The key (its policy lets the publishers use it), the topic, its policy and the output
    /// naming the topic's ARN.
    fn expand(&self, scope: &mut Scope<'_>) {
        let stack = scope.stack().name().to_owned();
        let handle = self.handle(&stack);
        let account = || Text::default().push_pseudo(Pseudo::AccountId);
        let mut key_policy = account_key_policy(None);
        for (sid, service) in [
            ("AlarmsUseKey", PUBLISHERS[0]),
            ("EventsUseKey", PUBLISHERS[1]),
            ("PrometheusUseKey", PUBLISHERS[2]),
        ] {
            key_policy = key_policy.statement(
                Statement::allow(["kms:Decrypt", "kms:GenerateDataKey*"])
                    .sid(sid)
                    .principal(PrincipalKind::Service, service)
                    .resource("*"),
            );
        }
        scope.add(
            "Key",
            KmsKey {
                description: format!(
                    "Encrypts the notification topic {}/{}/Topic",
                    stack, self.id
                ),
                policy: key_policy,
            },
        );
        scope.add(
            "Topic",
            SnsTopic {
                display_name: self
                    .display_name
                    .clone()
                    .unwrap_or_else(|| format!("{stack} alarms")),
                kms_key: handle.key.arn(),
            },
        );
        let topic_arn = Text::attr(handle.topic.arn());
        let mut document = crate::resources::iam::PolicyDocument::new();
        for (sid, service) in [
            ("AlarmsPublish", PUBLISHERS[0]),
            ("EventsPublish", PUBLISHERS[1]),
        ] {
            document = document.statement(
                Statement::allow(["sns:Publish"])
                    .sid(sid)
                    .principal(PrincipalKind::Service, service)
                    .resource(topic_arn.clone())
                    .condition("StringEquals", "aws:SourceAccount", vec![account()]),
            );
        }
        // The alert manager of any Prometheus workspace of this account and region (the
        // workspace comes later, so it is named by pattern): AMP's user guide ("Giving Amazon
        // Managed Service for Prometheus permission to send messages to your Amazon SNS
        // topic") grants `sns:Publish` and `sns:GetTopicAttributes` on these two conditions.
        document = document.statement(
            Statement::allow(["sns:Publish", "sns:GetTopicAttributes"])
                .sid("PrometheusPublish")
                .principal(PrincipalKind::Service, PUBLISHERS[2])
                .resource(topic_arn.clone())
                .condition("StringEquals", "aws:SourceAccount", vec![account()])
                .condition(
                    "ArnLike",
                    "aws:SourceArn",
                    vec![Text::lit("arn:")
                        .push_pseudo(Pseudo::Partition)
                        .push_lit(":aps:")
                        .push_pseudo(Pseudo::Region)
                        .push_lit(":")
                        .push_pseudo(Pseudo::AccountId)
                        .push_lit(":workspace/*")],
                ),
        );
        document = document.statement(
            Statement::deny(["sns:Publish"])
                .sid("DenyInsecureTransport")
                .principal(PrincipalKind::Aws, "*")
                .resource(topic_arn)
                .condition("Bool", "aws:SecureTransport", vec![Text::lit("false")]),
        );
        scope.add(
            "Policy",
            SnsTopicPolicy {
                topic: handle.topic.arn(),
                document,
            },
        );
        scope.add(
            "Output",
            StackOutput {
                description: "The notification topic: subscribe to it (aws sns subscribe --protocol email ...) to receive alarms and capacity warnings".to_owned(),
                value: handle.topic.arn(),
            },
        );
        scope.step(
            "Subscribe",
            Step::SubscribeTopic {
                topic: handle.topic.arn(),
            },
        );
    }
}

// --- CapacityEndWarning ----------------------------------------------------------------------

/// Reserved capacity that ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndingCapacity {
    /// A Capacity Block, by reservation id (`cr-...`).
    CapacityBlock(String),
    /// A SageMaker training plan, by ARN.
    TrainingPlan(String),
}

/// Warnings before reserved capacity ends.
#[derive(Clone, Debug)]
pub struct CapacityEndWarning {
    id: String,
    topic: Ref<kind::SnsTopic>,
    capacity: EndingCapacity,
    /// The end as given; `None`: the end of the window a node group or pool gives the block.
    end_time: Option<String>,
    lead_hours: u32,
}

/// Handle to the warning's rules.
#[derive(Clone, Debug)]
pub struct CapacityEndWarningHandle {
    /// The scheduled rule.
    pub scheduled_rule: Ref<kind::EventRule>,
    /// The rule on EC2's expiration warning (Capacity Blocks only).
    pub expiry_rule: Option<Ref<kind::EventRule>>,
}

impl CapacityEndWarning {
    /// Warnings to `topic` before the Capacity Block `reservation_id` ends at `end_time`
    /// (RFC 3339 in UTC, `2027-01-31T11:30:00Z`; `aws ec2 describe-capacity-reservations`
    /// shows it as `EndDate`).
    pub fn capacity_block(
        id: impl Into<String>,
        topic: &AlarmTopicHandle,
        reservation_id: impl Into<String>,
        end_time: impl Into<String>,
    ) -> Self {
        CapacityEndWarning::new(
            id,
            topic,
            EndingCapacity::CapacityBlock(reservation_id.into()),
            end_time,
        )
    }

    /// Warnings to `topic` before the Capacity Block `reservation_id` ends, at the end of the
    /// window its node group gives (`CapacityBlock::during`): the end is written once.
    pub fn for_capacity_block(
        id: impl Into<String>,
        topic: &AlarmTopicHandle,
        reservation_id: impl Into<String>,
    ) -> Self {
        CapacityEndWarning::ending(
            id,
            topic,
            EndingCapacity::CapacityBlock(reservation_id.into()),
            None,
        )
    }

    /// Warnings to `topic` before the training plan `arn` ends at `end_time` (RFC 3339 in
    /// UTC; `aws sagemaker describe-training-plan` shows it as `EndTime`).
    pub fn training_plan(
        id: impl Into<String>,
        topic: &AlarmTopicHandle,
        arn: impl Into<String>,
        end_time: impl Into<String>,
    ) -> Self {
        CapacityEndWarning::new(
            id,
            topic,
            EndingCapacity::TrainingPlan(arn.into()),
            end_time,
        )
    }

    /// Warnings to `topic` before the training plan `arn` ends, at the end of the window its
    /// instance group gives (`Capacity::during`): the end is written once.
    pub fn for_training_plan(
        id: impl Into<String>,
        topic: &AlarmTopicHandle,
        arn: impl Into<String>,
    ) -> Self {
        CapacityEndWarning::ending(id, topic, EndingCapacity::TrainingPlan(arn.into()), None)
    }

    /// Warnings to `topic` before `capacity` ends at `end_time`.
    pub fn new(
        id: impl Into<String>,
        topic: &AlarmTopicHandle,
        capacity: EndingCapacity,
        end_time: impl Into<String>,
    ) -> Self {
        CapacityEndWarning::ending(id, topic, capacity, Some(end_time.into()))
    }

    /// Warnings before `capacity` ends at `end_time`, or (`None`) at the end of its window.
    fn ending(
        id: impl Into<String>,
        topic: &AlarmTopicHandle,
        capacity: EndingCapacity,
        end_time: Option<String>,
    ) -> Self {
        CapacityEndWarning {
            id: id.into(),
            topic: topic.topic.clone(),
            capacity,
            end_time,
            lead_hours: DEFAULT_LEAD_HOURS,
        }
    }

    /// How many hours before the end the scheduled warning is sent ([`LEAD_HOURS`]; 24 by
    /// default).
    pub fn lead_hours(mut self, hours: u32) -> Self {
        self.lead_hours = hours;
        self
    }

    /// The end time (RFC 3339): the one given, or the end of the window `stack` gives the
    /// Capacity Block; `None` when neither is.
    pub fn end_time(&self, stack: &crate::app::Stack) -> Option<String> {
        self.end_time.clone().or_else(|| self.window_end(stack))
    }

    /// The end of the window a node group or pool of `stack` gives the Capacity Block, or an
    /// instance group the training plan.
    fn window_end(&self, stack: &crate::app::Stack) -> Option<String> {
        match &self.capacity {
            EndingCapacity::CapacityBlock(id) => super::nodes::window_of(stack, id).map(|w| w.end),
            EndingCapacity::TrainingPlan(arn) => {
                super::hyperpod::window_of(stack, arn).map(|w| w.end)
            }
        }
    }

    /// The schedule expression of the scheduled warning, when the end time and lead are valid.
    pub fn schedule_expression(&self, stack: &crate::app::Stack) -> Option<String> {
        let end = parse_utc_minutes(&self.end_time(stack)?).ok()?;
        let at = end.checked_sub(i64::from(self.lead_hours).checked_mul(60)?)?;
        cron_at(at)
    }

    /// What ends, for descriptions: a Capacity Block by the stack's input holding its id (the
    /// id is chosen when the stack is deployed), a training plan by its ARN.
    fn what(&self, stack: &crate::app::Stack) -> String {
        match &self.capacity {
            EndingCapacity::CapacityBlock(id) => format!(
                "the Capacity Block given as {}",
                super::nodes::reservation_input(stack, id, &self.id).name
            ),
            EndingCapacity::TrainingPlan(arn) => format!(
                "the training plan given as {}",
                super::hyperpod::training_plan_input(stack, arn, &self.id).name
            ),
        }
    }
}

impl Construct for CapacityEndWarning {
    type Handle = CapacityEndWarningHandle;
    const KIND: &'static str = "capacity_end_warning";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> CapacityEndWarningHandle {
        CapacityEndWarningHandle {
            scheduled_rule: Ref::new(stack, format!("{}/ScheduledRule", self.id)),
            expiry_rule: matches!(self.capacity, EndingCapacity::CapacityBlock(_))
                .then(|| Ref::new(stack, format!("{}/ExpiryRule", self.id))),
        }
    }

    fn references(&self) -> Vec<AttrRef> {
        vec![self.topic.arn()]
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        match &self.capacity {
            EndingCapacity::CapacityBlock(id) => {
                if !super::nodes::is_reservation_id(id) {
                    ds.report_field(
                        Code::MalformedCapacityReservationId,
                        cx.path,
                        "reservation_id",
                        format!("`{id}` is not a capacity reservation id"),
                        "a Capacity Block's reservation id is `cr-` followed by 17 hexadecimal digits (aws ec2 describe-capacity-reservations)",
                    );
                }
            }
            EndingCapacity::TrainingPlan(arn) => {
                if !super::hyperpod::is_training_plan_arn(arn) {
                    ds.report_field(
                        Code::MalformedTrainingPlanArn,
                        cx.path,
                        "training_plan_arn",
                        format!("`{arn}` is not a training plan ARN"),
                        "arn:aws:sagemaker:<region>:<account>:training-plan/<name> (aws sagemaker list-training-plans)",
                    );
                }
            }
        }
        let window_end = self.window_end(cx.stack);
        // The end checked here: the one given, or the window's (whose own mistakes, HF0331,
        // are the window's to report).
        let end = match (&self.end_time, &window_end) {
            (None, None) => {
                ds.report_field(
                    Code::InvalidCapacityEndTime,
                    cx.path,
                    "end_time",
                    match self.capacity {
                        EndingCapacity::CapacityBlock(_) => "no end time: none is given, and no node group gives the block's window",
                        EndingCapacity::TrainingPlan(_) => "no end time: none is given, and no instance group gives the plan's window",
                    }
                    .to_owned(),
                    match self.capacity {
                        EndingCapacity::CapacityBlock(_) => "give the block's window on the node group it feeds (`CapacityBlock::during`, `capacity_block.window`), or `end_time`",
                        EndingCapacity::TrainingPlan(_) => "give the plan's window on the instance group it feeds (`Capacity::during`, `training_plan.window`), or `end_time` (aws sagemaker describe-training-plan shows `EndTime`)",
                    },
                );
                None
            }
            (None, Some(window)) => parse_utc_minutes(window).ok().map(|_| window.clone()),
            (Some(given), _) => match parse_utc_minutes(given) {
                Ok(_) => Some(given.clone()),
                Err(problem) => {
                    ds.report_field(
                        Code::InvalidCapacityEndTime,
                        cx.path,
                        "end_time",
                        format!("end time `{given}` {problem}"),
                        format!(
                            "give the capacity's end as RFC 3339 in UTC between {} and {}, such as `2027-01-31T11:30:00Z`",
                            END_YEARS.0, END_YEARS.1
                        ),
                    );
                    None
                }
            },
        };
        if let Some(end_time) = end {
            let contradicted = window_end.filter(|w| {
                self.end_time.is_some()
                    && parse_utc_minutes(w).ok() != parse_utc_minutes(&end_time).ok()
            });
            if self.schedule_expression(cx.stack).is_none() {
                ds.report_field(
                    Code::InvalidCapacityEndTime,
                    cx.path,
                    "end_time",
                    format!(
                        "{} before `{end_time}` is before {}",
                        hours(self.lead_hours),
                        END_YEARS.0
                    ),
                    "give a later end time or a shorter lead",
                );
            } else if let Some(window_end) = contradicted {
                ds.report_field(
                    Code::InvalidCapacityEndTime,
                    cx.path,
                    "end_time",
                    format!(
                        "end time `{end_time}` is not the end of the reservation's window, `{window_end}`"
                    ),
                    "leave `end_time` out: the warning takes the end from the reservation's window",
                );
            }
        }
        if !LEAD_HOURS.contains(i64::from(self.lead_hours)) {
            ds.report_field(
                Code::InvalidCapacityWarningLead,
                cx.path,
                "lead_hours",
                format!(
                    "a lead of {} hours is outside {}",
                    self.lead_hours,
                    LEAD_HOURS.describe()
                ),
                "warn between 1 hour and 30 days before the end",
            );
        }
    }

    /// The rule on EC2's expiration warning (Capacity Blocks), the scheduled rule, and the
    /// alarm on their failed deliveries.
    fn facts(&self, cx: &Context<'_>) -> Facts<'_> {
        let (reservation_id, training_plan_arn) = match &self.capacity {
            EndingCapacity::CapacityBlock(id) => (Some(id.clone()), None),
            EndingCapacity::TrainingPlan(arn) => (None, Some(arn.clone())),
        };
        Facts {
            capacity_ends: vec![CapacityEndFacts {
                reservation_id,
                training_plan_arn,
                end_time: self.end_time(cx.stack).unwrap_or_default(),
                lead_hours: self.lead_hours,
            }],
            ..Facts::default()
        }
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        let stack = scope.stack().name().to_owned();
        let handle = self.handle(&stack);
        let what = self.what(scope.stack());
        let mut rules = Vec::new();
        if let (EndingCapacity::CapacityBlock(id), Some(rule)) =
            (&self.capacity, &handle.expiry_rule)
        {
            let reservation = super::nodes::reservation_input(scope.stack(), id, &self.id);
            scope.add(
                "ExpiryRule",
                EventRule {
                    description: format!(
                        "EC2's warning 40 minutes before {what} ends, to the notification topic"
                    ),
                    trigger: RuleTrigger::Pattern(RawValue::object([
                        ("source", RawValue::Json(json!(["aws.ec2"]))),
                        (
                            "detail-type",
                            RawValue::Json(json!(CAPACITY_BLOCK_EXPIRY_DETAIL_TYPES)),
                        ),
                        (
                            "detail",
                            RawValue::object([(
                                "capacity-reservation-id",
                                RawValue::list([RawValue::Text(Text::input(reservation))]),
                            )]),
                        ),
                    ])),
                    enabled: true,
                    targets: vec![EventTarget {
                        id: "Topic".to_owned(),
                        topic: self.topic.arn(),
                        input: TargetInput::Transformer {
                            paths: vec![
                                ("reservation".to_owned(), "$.detail.capacity-reservation-id".to_owned()),
                                ("end".to_owned(), "$.detail.end-date".to_owned()),
                                ("account".to_owned(), "$.account".to_owned()),
                                ("region".to_owned(), "$.region".to_owned()),
                            ],
                            template: "Capacity Block <reservation> (account <account>, <region>) ends at <end>. EC2 starts terminating its instances in 10 minutes; the serving endpoint goes down with them.".to_owned(),
                        },
                    }],
                },
            );
            rules.push(rule.name());
        }
        let end_time = self.end_time(scope.stack()).unwrap_or_default();
        let schedule = self.schedule_expression(scope.stack()).unwrap_or_default();
        // The message names the block by the id the stack was deployed with.
        let message = match &self.capacity {
            EndingCapacity::CapacityBlock(id) => {
                let reservation = super::nodes::reservation_input(scope.stack(), id, &self.id);
                Text::lit("The Capacity Block ")
                    .push_input(reservation.clone())
                    .push_lit(format!(
                        " in stack {stack} ends at {} ({} from this message); its instances are then terminated and the endpoint stops serving. To keep it, extend the block (aws ec2 describe-capacity-block-extension-offerings --capacity-reservation-id ",
                        end_time,
                        hours(self.lead_hours)
                    ))
                    .push_input(reservation)
                    .push_lit(" --capacity-block-extension-duration-hours <hours>, then aws ec2 purchase-capacity-block-extension) or buy a new one and move the workload.")
            }
            EndingCapacity::TrainingPlan(arn) => Text::lit("The training plan ")
                .push_input(super::hyperpod::training_plan_input(scope.stack(), arn, &self.id))
                .push_lit(format!(
                    " in stack {stack} ends at {} ({} from this message); its instances are then terminated and the endpoint stops serving. To keep serving, extend the plan or reserve new capacity and move the workload before it ends.",
                    end_time,
                    hours(self.lead_hours)
                )),
        };
        scope.add(
            "ScheduledRule",
            EventRule {
                description: format!(
                    "{} before {what} ends ({}), to the notification topic",
                    hours(self.lead_hours),
                    end_time
                ),
                trigger: RuleTrigger::Schedule(schedule),
                enabled: true,
                targets: vec![EventTarget {
                    id: "Topic".to_owned(),
                    topic: self.topic.arn(),
                    input: TargetInput::Text(message),
                }],
            },
        );
        rules.push(handle.scheduled_rule.name());
        let failed = |rule: AttrRef| MetricStat {
            namespace: "AWS/Events".to_owned(),
            metric_name: "FailedInvocations".to_owned(),
            dimensions: vec![("RuleName".to_owned(), Text::attr(rule))],
            statistic: Statistic::Sum,
            period_seconds: 300,
        };
        let metric = if rules.len() == 1 {
            AlarmMetric::Metric(failed(rules.remove(0)))
        } else {
            let metrics: Vec<(String, MetricStat)> = rules
                .into_iter()
                .enumerate()
                .map(|(i, r)| (format!("m{}", i + 1), failed(r)))
                .collect();
            let expression = metrics
                .iter()
                .map(|(id, _)| format!("FILL({id}, 0)"))
                .collect::<Vec<_>>()
                .join(" + ");
            AlarmMetric::Math {
                expression,
                label: "Failed capacity-end notifications".to_owned(),
                metrics,
            }
        };
        scope.add(
            "DeliveryAlarm",
            MetricAlarm {
                name: format!("{stack}-{}-capacity-end-delivery", self.id),
                description: format!(
                    "EventBridge could not deliver a warning that {} ends at {} to the notification topic. Check the topic's policy and its key's policy, and the capacity's end yourself.",
                    if what.starts_with("the ") { what.clone() } else { format!("the {what}") },
                    end_time
                ),
                metric,
                evaluation_periods: 1,
                datapoints_to_alarm: 1,
                threshold: 1.0,
                comparison: Comparison::GreaterThanOrEqualToThreshold,
                missing_data: MissingData::NotBreaching,
                alarm_actions: vec![self.topic.arn()],
                ok_actions: Vec::new(),
            },
        );
    }
}

/// `1 hour`, `24 hours`.
fn hours(n: u32) -> String {
    if n == 1 {
        "1 hour".to_owned()
    } else {
        format!("{n} hours")
    }
}

// --- Stack-file form -------------------------------------------------------------------------

stack_file_shape! {
    pub mod alarm_topic_fields = <AlarmTopic as Construct>::KIND, "An SNS topic for alarms and capacity warnings, encrypted with its own KMS key; subscribe to the ARN its stage outputs." {
        ID: req "alarm_topic", Ty::Str, "The construct id.";
        DISPLAY_NAME: opt "display_name", Ty::Str, "The sender name of email notifications (`<stack> alarms` by default).";
    }
}

impl super::stack_file::StackFileConstruct for AlarmTopic {
    const SHAPE: &'static super::stack_file::Shape = &alarm_topic_fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        let mut c = AlarmTopic::new(id);
        if let Some(name) = r.text(&alarm_topic_fields::DISPLAY_NAME) {
            c = c.display_name(name);
        }
        Some(c)
    }
}

stack_file_shape! {
    pub mod capacity_end_warning_fields = <CapacityEndWarning as Construct>::KIND, "Notifications before a Capacity Block or a training plan ends: a scheduled message `lead_hours` before `end_time` and, for a Capacity Block, EC2's own warning 40 minutes before the end." {
        ID: req "capacity_end_warning", Ty::Str, "The construct id.";
        TOPIC: req "topic", Ty::Ref(Want::AlarmTopic), "The notification topic (an `alarm_topic` construct).";
        RESERVATION_ID: opt "reservation_id", Ty::Str, "The Capacity Block's reservation id (`cr-...`); or `training_plan_arn`.";
        TRAINING_PLAN_ARN: opt "training_plan_arn", Ty::Str, "The training plan's ARN; or `reservation_id`.";
        END_TIME: opt "end_time", Ty::Str, "When the capacity ends, RFC 3339 in UTC (`2027-01-31T11:30:00Z`); for a Capacity Block whose node group (or a training plan whose instance group) gives its window, leave it out: the window's end is taken.";
        LEAD_HOURS: opt "lead_hours", Ty::U32(super::LEAD_HOURS), "Hours before the end for the scheduled message (24 by default).";
    }
}

impl super::stack_file::StackFileConstruct for CapacityEndWarning {
    const SHAPE: &'static super::stack_file::Shape = &capacity_end_warning_fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        use capacity_end_warning_fields as f;
        let topic = r.alarm_topic(&f::TOPIC);
        let reservation = r.text(&f::RESERVATION_ID);
        let plan = r.text(&f::TRAINING_PLAN_ARN);
        let end = r.text(&f::END_TIME);
        let lead = r.u32(&f::LEAD_HOURS);
        let capacity = match (reservation, plan) {
            (Some(id), None) => EndingCapacity::CapacityBlock(id),
            (None, Some(arn)) => EndingCapacity::TrainingPlan(arn),
            (given, _) => {
                let both = given.is_some();
                r.report(
                    if both {
                        Code::StackFileInvalidValue
                    } else {
                        Code::StackFileMissingField
                    },
                    Some(&f::RESERVATION_ID),
                    if both {
                        "give either `reservation_id` or `training_plan_arn`, not both"
                    } else {
                        "capacity_end_warning needs `reservation_id` or `training_plan_arn`"
                    },
                    "name the Capacity Block or the training plan whose end is warned of",
                );
                return None;
            }
        };
        let mut c = CapacityEndWarning::ending(id, &topic.ok()??, capacity, end);
        if let Some(hours) = lead {
            c = c.lead_hours(hours);
        }
        Some(c)
    }
}
