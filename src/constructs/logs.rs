//! Container logs to CloudWatch Logs: [`LogShipping`] creates what Fluent Bit writes into, and
//! [`crate::constructs::HelmRelease::aws_for_fluent_bit`] installs the shipper.
//!
//! `LogShipping` creates, for one EKS cluster:
//!
//! * a customer managed KMS key (rotation on) whose policy lets CloudWatch Logs
//!   (`logs.<region>.amazonaws.com`) use it for these log groups only, through the
//!   `kms:EncryptionContext:aws:logs:arn` condition, as the CloudWatch Logs User Guide
//!   ("Encrypt log data in CloudWatch Logs using AWS KMS") requires;
//! * two log groups encrypted with it, with one retention: `/hyperforge/<cluster>/workloads`
//!   (every namespace but the system ones: vLLM servers, the weights staging Jobs)
//!   and `/hyperforge/<cluster>/system` (`kube-system` and the inference operator's
//!   `hyperpod-inference-system`: [`SYSTEM_NAMESPACES`]). Two groups, not one per namespace:
//!   the groups exist before Fluent Bit runs (it may not create groups), so their names must be
//!   known when the stack is written, and the split keeps the serving logs apart from the
//!   noisier cluster components, each searchable and readable by its own audience;
//! * a role for Fluent Bit's service account (EKS Pod Identity) that may create streams in and
//!   write to those two groups, and nothing else (no `logs:CreateLogGroup`), with its
//!   association.
//!
//! The group names are a function of the cluster name ([`log_group_names`]), so the Helm
//! stage names them literally: no stage output to pass, and the values file says where the
//! logs go.

use super::eks::EksClusterHandle;
use super::network::{LOG_RETENTION_DAYS, LOG_RETENTION_RANGE};
use super::{Construct, Context};
use crate::app::text::{Pseudo, Text};
use crate::app::{kind, AttrRef, Ref, StageKind};
use crate::diagnostics::{Code, Diagnostics};
use crate::resources::iam::{
    account_key_policy, pod_identity_trust, PolicyDocument, PrincipalKind, Statement,
};
use crate::resources::{KmsKey, LogGroup, PodIdentityAssociation, Role, Rule, Scope};

/// The namespace Fluent Bit runs in.
pub const FLUENT_BIT_NAMESPACE: &str = "kube-system";

/// Fluent Bit's service account (the chart creates it under this name).
pub const FLUENT_BIT_SERVICE_ACCOUNT: &str = "aws-for-fluent-bit";

/// The namespaces whose logs go to the system group; every other namespace's go to the
/// workloads group.
pub const SYSTEM_NAMESPACES: [&str; 2] = ["kube-system", "hyperpod-inference-system"];

/// The retention when none is given, days.
pub const DEFAULT_RETENTION_DAYS: u32 = 90;

/// The two log groups of a cluster's container logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogGroupNames {
    /// Every namespace but [`SYSTEM_NAMESPACES`].
    pub workloads: String,
    /// [`SYSTEM_NAMESPACES`].
    pub system: String,
}

/// The log groups of cluster `cluster_name`: `/hyperforge/<cluster>/workloads` and
/// `/hyperforge/<cluster>/system`.
pub fn log_group_names(cluster_name: &str) -> LogGroupNames {
    LogGroupNames {
        workloads: format!("/hyperforge/{cluster_name}/workloads"),
        system: format!("/hyperforge/{cluster_name}/system"),
    }
}

/// The KMS key, log groups and Fluent Bit's role for one EKS cluster's container logs.
#[derive(Clone, Debug)]
pub struct LogShipping {
    id: String,
    cluster: Ref<kind::EksCluster>,
    cluster_name: String,
    retention_days: u32,
}

/// Handle to the log groups, their key and the shipper's role.
#[derive(Clone, Debug)]
pub struct LogShippingHandle {
    /// The key encrypting both groups.
    pub key: Ref<kind::KmsKey>,
    /// The workloads group.
    pub workloads: Ref<kind::LogGroup>,
    /// The system group.
    pub system: Ref<kind::LogGroup>,
    /// Fluent Bit's role.
    pub role: Ref<kind::Role>,
    /// The groups' names.
    pub names: LogGroupNames,
}

impl LogShipping {
    /// Log groups for the containers of `cluster`, kept [`DEFAULT_RETENTION_DAYS`].
    pub fn new(id: impl Into<String>, cluster: &EksClusterHandle) -> Self {
        LogShipping {
            id: id.into(),
            cluster: cluster.cluster.clone(),
            cluster_name: cluster.name.clone(),
            retention_days: DEFAULT_RETENTION_DAYS,
        }
    }

    /// How long log events are kept: one of CloudWatch Logs' retention periods
    /// ([`LOG_RETENTION_DAYS`]).
    pub fn retention_days(mut self, days: u32) -> Self {
        self.retention_days = days;
        self
    }

    /// The cluster's name.
    pub fn cluster_name(&self) -> &str {
        &self.cluster_name
    }
}

impl Construct for LogShipping {
    type Handle = LogShippingHandle;
    const KIND: &'static str = "log_shipping";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> LogShippingHandle {
        LogShippingHandle {
            key: Ref::new(stack, format!("{}/Key", self.id)),
            workloads: Ref::new(stack, format!("{}/WorkloadsLogGroup", self.id)),
            system: Ref::new(stack, format!("{}/SystemLogGroup", self.id)),
            role: Ref::new(stack, format!("{}/FluentBitRole", self.id)),
            names: log_group_names(&self.cluster_name),
        }
    }

    fn references(&self) -> Vec<AttrRef> {
        vec![self.cluster.name()]
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        if !LOG_RETENTION_DAYS.contains(&self.retention_days) {
            ds.report_field(
                Code::InvalidLogRetention,
                cx.path,
                "retention_days",
                format!(
                    "log retention of {} days is not a CloudWatch Logs retention period",
                    self.retention_days
                ),
                "use one of 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653",
            );
        }
        let stack = cx.stack;
        // The first log shipping of this cluster creates the groups; a later one would again.
        let first = stack.nodes().iter().find(|n| {
            n.construct
                .as_any()
                .downcast_ref::<LogShipping>()
                .is_some_and(|o| o.cluster_name == self.cluster_name)
        });
        if let Some(first) = first.filter(|n| n.id != self.id) {
            ds.report_field(
                Code::DuplicateLogShipping,
                cx.path,
                "cluster",
                format!(
                    "`{}` already creates the log groups of cluster `{}`",
                    first.id, self.cluster_name
                ),
                "keep one log_shipping per EKS cluster",
            );
        }
        let Some(own) = stack.stage_of(&self.id) else {
            return;
        };
        let workloads = log_group_names(&self.cluster_name).workloads;
        let early = stack.stages()[..own.index().min(stack.stages().len())]
            .iter()
            .find(|s| matches!(&s.kind, StageKind::Helm(r) if r.ships_logs_to(&workloads)));
        if let Some(stage) = early {
            ds.report(
                Code::FluentBitBeforeLogGroups,
                cx.path,
                format!(
                    "Helm stage `{}` installs Fluent Bit for cluster `{}` before its log groups and role exist",
                    stage.name, self.cluster_name
                ),
                "move the aws-for-fluent-bit Helm stage after this construct's stage",
            );
        }
    }

    /// The key, the two groups, Fluent Bit's role and its Pod Identity association.
    fn expand(&self, scope: &mut Scope<'_>) {
        let handle = self.handle(scope.stack().name());
        let names = &handle.names;
        let group_arn =
            |name: &str| Text::arn("logs", true, true, Text::lit(format!("log-group:{name}")));
        let groups = [group_arn(&names.workloads), group_arn(&names.system)];
        let logs_service = Text::lit("logs.")
            .push_pseudo(Pseudo::Region)
            .push_lit(".amazonaws.com");
        scope.add(
            "Key",
            KmsKey {
                description: format!(
                    "Encrypts the container logs of EKS cluster {}",
                    self.cluster_name
                ),
                policy: account_key_policy(Some(
                    Statement::allow([
                        "kms:Encrypt*",
                        "kms:Decrypt*",
                        "kms:ReEncrypt*",
                        "kms:GenerateDataKey*",
                        "kms:Describe*",
                    ])
                    .sid("CloudWatchLogsUse")
                    .principal(PrincipalKind::Service, logs_service)
                    .resource("*")
                    .condition(
                        "ArnLike",
                        "kms:EncryptionContext:aws:logs:arn",
                        groups.to_vec(),
                    ),
                )),
            },
        );
        for (child, name) in [
            ("WorkloadsLogGroup", &names.workloads),
            ("SystemLogGroup", &names.system),
        ] {
            let group = scope.add(
                child,
                LogGroup {
                    name: name.clone(),
                    key: handle.key.arn(),
                    retention_days: self.retention_days,
                },
            );
            if self.retention_days < 365 {
                group.acknowledge(
                    Rule::LOG_RETENTION_UNDER_A_YEAR,
                    format!(
                        "Container logs (vLLM, staging Jobs, cluster components) for troubleshooting, not an audit record; they are kept the {} days the description sets (LogShipping::retention_days), which a longer period replaces.",
                        self.retention_days
                    ),
                );
            }
        }
        let mut write = Statement::allow([
            "logs:CreateLogStream",
            "logs:PutLogEvents",
            "logs:DescribeLogStreams",
        ])
        .wildcards_because(crate::resources::iam::LOG_STREAMS_REASON);
        for arn in &groups {
            write = write
                .resource(arn.clone())
                .resource(arn.clone().push_lit(":*"));
        }
        scope.add(
            "FluentBitRole",
            Role {
                description: format!(
                    "Fluent Bit writes the container logs of {} (EKS Pod Identity)",
                    self.cluster_name
                ),
                trust: pod_identity_trust(),
                managed: Vec::new(),
                inline: vec![(
                    "write-container-logs".to_owned(),
                    PolicyDocument::new().statement(write),
                )],
                name: None,
            },
        );
        scope.add(
            "PodIdentityAssociation",
            PodIdentityAssociation {
                cluster: self.cluster.name(),
                namespace: FLUENT_BIT_NAMESPACE.to_owned(),
                service_account: FLUENT_BIT_SERVICE_ACCOUNT.to_owned(),
                role: handle.role.arn(),
            },
        );
    }
}

// --- Stack-file form -------------------------------------------------------------------------

stack_file_shape! {
    pub mod fields = <LogShipping as Construct>::KIND, "Container logs to CloudWatch Logs: a KMS key, the log groups `/hyperforge/<cluster>/workloads` and `/hyperforge/<cluster>/system`, and Fluent Bit's role (EKS Pod Identity); install Fluent Bit with the Helm preset `aws-for-fluent-bit`." {
        ID: req "log_shipping", Ty::Str, "The construct id.";
        CLUSTER: req "cluster", Ty::Ref(Want::Eks), "The EKS cluster whose container logs are shipped.";
        RETENTION_DAYS: opt "retention_days", Ty::U32(super::LOG_RETENTION_RANGE), default "90", "How long log events are kept, a CloudWatch Logs retention period in days.";
    }
}

impl super::stack_file::StackFileConstruct for LogShipping {
    const SHAPE: &'static super::stack_file::Shape = &fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        let eks = super::stack_file::required(r.eks(&fields::CLUSTER));
        let retention = r.u32(&fields::RETENTION_DAYS);
        let mut c = LogShipping::new(id, &eks?);
        if let Some(days) = retention {
            c = c.retention_days(days);
        }
        Some(c)
    }
}
