//! Metrics of what is served, in Amazon Managed Service for Prometheus (AMP).
//!
//! [`PrometheusMonitoring`] creates, in a CloudFormation stage after the EKS cluster and the
//! [`AlarmTopic`](super::AlarmTopic):
//!
//! * an AMP workspace, its data encrypted at rest with an AWS owned key: AMP's user guide
//!   ("Encryption at rest") says that "workspaces created with customer managed keys cannot use
//!   AWS managed collectors for ingestion", and the collector below is what fills the workspace
//!   (see docs/decisions/0027-metrics-in-amazon-managed-prometheus.md);
//! * the workspace's alert manager definition, routing every alert to the notification topic
//!   through an SNS receiver (`sns_configs` with `sigv4.region`: AMP's user guide, "Configure
//!   alert manager to send messages to your Amazon SNS topic", requires the region and allows
//!   neither `api_url` nor `http_config`); the topic's and its key's policies let
//!   `aps.amazonaws.com` publish ([`AlarmTopic`](super::AlarmTopic));
//! * a rule groups namespace holding the alerting rules ([`ALERTS`], and for each Capacity
//!   Block or training plan of the stack whose window and served model's cold start are known,
//!   [`CAPACITY_BLOCK_NOT_SERVING`] or [`TRAINING_PLAN_NOT_SERVING`]: open, paid for, and no
//!   server reporting);
//! * an AWS managed collector (`AWS::APS::Scraper`) in the cluster's VPC, scraping every 30
//!   seconds (the collector's minimum), keeping each target's namespace, pod and node as labels:
//!   the vLLM servers (`/metrics` on their port named `http`): on EKS the pods of a
//!   `VllmDeployment` (label `app.kubernetes.io/component=model-server`), on HyperPod the
//!   inference operator's model pods (job [`HYPERPOD_VLLM_JOB`], their series relabelled to job
//!   `vllm` so the same rules and autoscaling queries hold on both paths); NVIDIA's DCGM
//!   exporter (port 9400, [`HelmRelease::dcgm_exporter`](super::HelmRelease::dcgm_exporter));
//!   and kube-state-metrics (port 8080,
//!   [`HelmRelease::kube_state_metrics`](super::HelmRelease::kube_state_metrics)), whose own
//!   `namespace`, `pod` and `container` labels (the object described) are kept
//!   (`honor_labels`).
//!
//! **HyperPod model pods.** The inference operator labels the pods it creates for an
//! `InferenceEndpointConfig` `app: <its metadata.name>`: the SageMaker HyperPod CLI and SDK
//! find an endpoint's pods by that label (`aws/sagemaker-hyperpod-cli` at
//! `011ca927123e02b35a399935bbb3ab1905fe33c7`, `src/sagemaker/hyperpod/inference/hp_endpoint.py`,
//! `list_pods`: `item.metadata.labels.get("app")` compared with the endpoints' names). The
//! worker container's port is the `modelInvocationPort` hyperforge writes (`http`, 8000, the
//! port `metrics.modelMetrics` names too), so the job keeps pods that carry an `app` label and
//! a container port `http` numbered 8000, and drops `VllmDeployment` pods (scraped by `vllm`).
//!
//! **Cluster access.** The collector reads the Kubernetes API (service discovery) and the
//! pods' metrics as the scraper's service-linked role. Every EKS cluster hyperforge creates
//! authenticates with `API_AND_CONFIG_MAP`, and for such a cluster AMP creates the scraper's
//! access entry and its access policy itself when the scraper is created (AMP user guide,
//! "Configuring your Amazon EKS cluster", "Configure Amazon EKS for scraper access with access
//! entries"). An access entry of ours for the same role would be a second entry for one
//! principal, which EKS refuses; and the `aps-collector-role` ClusterRole and its binding to
//! the user `aps-collector-user` are the user guide's *manual* alternative, for clusters that
//! authenticate through the `aws-auth` ConfigMap only, which hyperforge never creates. So this
//! construct creates neither.
//!
//! **Reach.** The collector reaches only what the network lets it: the vLLM NetworkPolicy must
//! admit the collector's subnets on the server port for the `vllm` job to have targets.

use super::stack_file::{Floats, Ints};
use super::{AlarmTopicHandle, Construct, Context, EksClusterHandle, Facts};
use crate::app::text::{Pseudo, Text};
use crate::app::{kind, AttrRef, Ref};
use crate::diagnostics::{Code, Diagnostics};
use crate::resources::{
    PrometheusRuleGroups, PrometheusScraper, PrometheusWorkspace, Scope, StackOutput,
};
use serde_json::json;

/// The scrape job of the vLLM servers (the `job` label of their series).
pub const VLLM_JOB: &str = "vllm";
/// The scrape job of the DCGM exporters.
pub const DCGM_JOB: &str = "dcgm";
/// The scrape job of the HyperPod inference operator's model pods; their series are relabelled
/// to job [`VLLM_JOB`].
pub const HYPERPOD_VLLM_JOB: &str = "hyperpod-inference";
/// The pod label the HyperPod inference operator sets on an endpoint's model pods (its value
/// is the `InferenceEndpointConfig`'s name).
pub const HYPERPOD_MODEL_POD_LABEL: &str = "app";
/// The HyperPod model pods' metrics port (the worker's `modelInvocationPort`).
pub const HYPERPOD_MODEL_PORT: u16 = 8000;
/// The scrape job of kube-state-metrics.
pub const KUBE_STATE_METRICS_JOB: &str = "kube-state-metrics";
/// The pod label of the kube-state-metrics chart's pods (its `selectorLabels`), and its value.
pub const KUBE_STATE_METRICS_POD_LABEL: (&str, &str) =
    ("app.kubernetes.io/name", "kube-state-metrics");
/// kube-state-metrics' metrics port (the chart's `service.port`).
pub const KUBE_STATE_METRICS_PORT: u16 = 8080;
/// The pod label selecting vLLM servers, and its value (`vllm/objects.rs`).
pub const VLLM_POD_LABEL: (&str, &str) = ("app.kubernetes.io/component", "model-server");
/// The name of the vLLM container's port serving `/metrics`.
pub const VLLM_PORT_NAME: &str = "http";
/// The pod label of the DCGM exporter chart's pods (its `selectorLabels`), and its value.
pub const DCGM_POD_LABEL: (&str, &str) = ("app.kubernetes.io/name", "dcgm-exporter");
/// The DCGM exporter's metrics port.
pub const DCGM_PORT: u16 = 9400;
/// The scrape interval: the managed collector's minimum (AMP user guide, "Scraper
/// configuration": no interval under 30 seconds).
pub const SCRAPE_INTERVAL: &str = "30s";
/// The name of the rule groups namespace.
pub const RULES_NAMESPACE: &str = "serving-alerts";

/// The p99 time to first token alerted on, seconds: above 0, at most 10 minutes.
pub const TTFT_SECONDS: Floats = Floats::above(0.0, 600.0);
/// The p99 time to first token alerted on when none is given.
pub const DEFAULT_TTFT_SECONDS: f64 = 10.0;
/// The queue depth alerted on: waiting requests per server.
pub const QUEUE_DEPTH: Ints = Ints::new(1, 100_000);
/// The queue depth alerted on when none is given.
pub const DEFAULT_QUEUE_DEPTH: u32 = 50;

/// How serious an alert is (its `severity` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// Someone must act now: users get errors or no answer.
    Critical,
    /// Service degrades: act within the hour.
    Warning,
}

impl Severity {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Warning => "warning",
        }
    }
}

/// An alerting rule: a PromQL expression with `{threshold}` where its threshold goes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AlertRule {
    /// The alert's name.
    pub name: &'static str,
    /// The expression; `{threshold}` is replaced by the threshold.
    pub expression: &'static str,
    /// How long the expression must hold before the alert fires (`5m`; empty: at once).
    pub for_duration: &'static str,
    /// Its severity.
    pub severity: Severity,
    /// What it means.
    pub summary: &'static str,
    /// What to do.
    pub action: &'static str,
}

/// More than 5% of the vLLM servers' HTTP responses are 5xx, over 5 minutes, per namespace
/// (`http_requests_total` of prometheus-fastapi-instrumentator, whose status label groups
/// codes as `5xx`). Users are getting errors: read the servers' logs
/// (`kubectl logs -n <namespace> -l app.kubernetes.io/component=model-server` on EKS,
/// `-l app=<endpoint name>` on HyperPod) for engine errors, out-of-memory or NCCL failures;
/// restart a failed pod, roll back a recent change.
pub const SERVER_ERRORS: AlertRule = AlertRule {
    name: "VllmServerErrors",
    expression: r#"sum by (namespace) (rate(http_requests_total{job="vllm",status="5xx"}[5m])) / sum by (namespace) (rate(http_requests_total{job="vllm"}[5m])) > {threshold}"#,
    for_duration: "5m",
    severity: Severity::Critical,
    summary: "More than 5% of the vLLM responses in {{ $labels.namespace }} are server errors.",
    action: "Read the model servers' logs (kubectl logs -n {{ $labels.namespace }} -l app.kubernetes.io/component=model-server on EKS, -l app=<endpoint name> on HyperPod) for engine, memory or NCCL errors; restart a failed pod or roll back the last change.",
};

/// The 99th percentile of the time to first token, over 5 minutes, is above the threshold for
/// 10 minutes, per namespace and model (`vllm:time_to_first_token_seconds`). Requests queue or
/// prefill is slow: check the queue depth and KV cache use (`vllm:kv_cache_usage_perc`); add
/// replicas, or lower the context length or the batch size.
pub const SLOW_FIRST_TOKEN: AlertRule = AlertRule {
    name: "VllmSlowFirstToken",
    expression: r#"histogram_quantile(0.99, sum by (le, namespace, model_name) (rate(vllm:time_to_first_token_seconds_bucket{job="vllm"}[5m]))) > {threshold}"#,
    for_duration: "10m",
    severity: Severity::Warning,
    summary: "The p99 time to first token of {{ $labels.model_name }} in {{ $labels.namespace }} is {{ $value | humanizeDuration }}.",
    action: "Check the waiting requests (vllm:num_requests_waiting) and KV cache use (vllm:kv_cache_usage_perc); add replicas or capacity, or lower the context length or batch size.",
};

/// More requests than the threshold wait in one server's queue for 5 minutes
/// (`vllm:num_requests_waiting`). The server is saturated: add replicas (the autoscaler's
/// maximum may be reached) or capacity, or shed load upstream.
pub const QUEUE_BACKLOG: AlertRule = AlertRule {
    name: "VllmQueueBacklog",
    expression: r#"sum by (namespace, pod) (vllm:num_requests_waiting{job="vllm"}) > {threshold}"#,
    for_duration: "5m",
    severity: Severity::Warning,
    summary: "{{ $value }} requests wait in the queue of {{ $labels.namespace }}/{{ $labels.pod }}.",
    action: "The server is saturated: add replicas (check the autoscaler's maximum) or GPU capacity, or shed load upstream.",
};

/// A GPU reported an XID error (`DCGM_FI_DEV_XID_ERRORS`, the last XID the driver raised, is
/// not 0). XIDs 48, 63, 64, 74, 79, 94, 95 and others mean failed memory, a fallen-off bus or
/// NVLink errors: drain the node and replace it (HyperPod: `kubectl label node <node>
/// sagemaker.amazonaws.com/node-health-status=UnschedulablePendingReplacement`).
pub const GPU_XID_ERRORS: AlertRule = AlertRule {
    name: "GpuXidError",
    expression: r#"max by (node, gpu) (DCGM_FI_DEV_XID_ERRORS{job="dcgm"}) > {threshold}"#,
    for_duration: "",
    severity: Severity::Critical,
    summary: "GPU {{ $labels.gpu }} on {{ $labels.node }} reported XID {{ $value }}.",
    action: "Look the XID up in NVIDIA's XID catalog; for memory, bus or NVLink errors drain the node (kubectl drain) and replace the instance (on HyperPod, label it sagemaker.amazonaws.com/node-health-status=UnschedulablePendingReplacement).",
};

/// A DCGM exporter cannot be scraped, or none reports at all, for 5 minutes: GPU metrics (and
/// the XID alert) are blind for that node. When every GPU node comes from a reserved window,
/// it holds only inside the windows ([`gpu_silence_within`]). Check the exporter's pods
/// (`kubectl get pods -A -l app.kubernetes.io/name=dcgm-exporter -o wide`) and the node.
pub const GPU_NODE_SILENT: AlertRule = AlertRule {
    name: "GpuNodeNotReporting",
    expression: r#"up{job="dcgm"} == {threshold} or absent(up{job="dcgm"})"#,
    for_duration: "5m",
    severity: Severity::Critical,
    summary: "The DCGM exporter on {{ $labels.node }} is not reporting (or none is).",
    action: "Check the exporter pods (kubectl get pods -A -l app.kubernetes.io/name=dcgm-exporter -o wide) and their node; a node that lost its GPUs or its driver must be drained and replaced.",
};

/// A container outside `kube-system` restarted in the last 15 minutes
/// (`kube_pod_container_status_restarts_total` of kube-state-metrics), per namespace, pod and
/// container. A restarted vLLM server lost its requests and reloads its weights for minutes;
/// repeated restarts are a crash loop. It fires at once: a restart is an event, and the
/// 15-minute window keeps it firing for 15 minutes after the last one (the alert manager
/// groups by alert and namespace and repeats every 4 hours). Read the previous container's log
/// (`kubectl logs -n <namespace> <pod> -c <container> --previous`) and the pod's last state
/// (`kubectl describe pod`: `OOMKilled`, a failed probe, exit codes); fix the cause (memory,
/// context length, a bad image or argument) or roll back.
pub const POD_RESTARTING: AlertRule = AlertRule {
    name: "PodRestarting",
    expression: r#"sum by (namespace, pod, container) (increase(kube_pod_container_status_restarts_total{job="kube-state-metrics",namespace!="kube-system"}[15m])) > {threshold}"#,
    for_duration: "",
    severity: Severity::Warning,
    summary: "Container {{ $labels.container }} of {{ $labels.namespace }}/{{ $labels.pod }} restarted in the last 15 minutes.",
    action: "Read the previous container's log (kubectl logs -n {{ $labels.namespace }} {{ $labels.pod }} -c {{ $labels.container }} --previous) and its last state (kubectl describe pod: OOMKilled, failed probes, exit code); fix the cause or roll back the last change.",
};

/// The name of the alert on a Capacity Block that is open but serves nothing: no vLLM server
/// reports from the block's "serving from" time (its start plus the served model's cold
/// start) plus [`SERVING_SLACK_MINUTES`] until its drain time. The cold start may have taken
/// longer (a slow weight load, a failed pull), the nodes may not have come (the scale-up
/// failed, the block is `delayed`), or the server crashes: read the scale-up schedule's and
/// the node group's state, then the pods' events and logs.
pub const CAPACITY_BLOCK_NOT_SERVING: &str = "CapacityBlockNotServing";

/// Minutes after a Capacity Block's "serving from" before an endpoint that does not serve is
/// alerted on: the cold start is an estimate.
pub const SERVING_SLACK_MINUTES: i64 = 15;

/// The name of the alert on a training plan that is active but serves nothing (as
/// [`CAPACITY_BLOCK_NOT_SERVING`], for a HyperPod instance group on a training plan).
pub const TRAINING_PLAN_NOT_SERVING: &str = "TrainingPlanNotServing";

/// What brings a reserved window's nodes: the place to look when they do not come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowNodes {
    /// An EKS managed node group on a Capacity Block, scaled up by its schedule.
    NodeGroup,
    /// A Karpenter pool on a Capacity Block, launching as pods ask.
    KarpenterPool,
    /// A HyperPod instance group on a training plan, provisioned by SageMaker.
    HyperPodGroup,
}

impl WindowNodes {
    /// The nodes of `claim`, when it holds a reserved window.
    pub fn of(claim: &super::CapacityClaim) -> WindowNodes {
        match (claim.launcher, claim.provisioned_on_demand) {
            (super::Launcher::HyperPod, _) => WindowNodes::HyperPodGroup,
            (_, true) => WindowNodes::KarpenterPool,
            (_, false) => WindowNodes::NodeGroup,
        }
    }
}

/// The alert on the reservation of `group` (a node group's, a Karpenter pool's or a HyperPod
/// instance group's display path, brought by `nodes`; the reservation's id may be a
/// deploy-time input), whose window is scheduled as `schedule`, when its cold start is
/// known and leaves time to serve before the drain: no vLLM server reports (`absent`, for 5
/// minutes) while the time (`time()`, seconds) lies between serving-from plus the slack and
/// the drain.
pub fn not_serving_alert(
    group: &str,
    nodes: WindowNodes,
    schedule: &crate::catalog::capacity::BlockSchedule,
) -> Option<AlertFacts> {
    let (name, what, check) = match nodes {
        WindowNodes::NodeGroup => (
            CAPACITY_BLOCK_NOT_SERVING,
            "The Capacity Block",
            "Check that the block is active (aws ec2 describe-capacity-reservations) and the node group scaled up (aws eks describe-nodegroup; the scale-up schedule in EventBridge Scheduler, aws scheduler list-schedules)",
        ),
        WindowNodes::KarpenterPool => (
            CAPACITY_BLOCK_NOT_SERVING,
            "The Capacity Block",
            "Check that the block is active (aws ec2 describe-capacity-reservations) and Karpenter launched its nodes (kubectl get nodeclaims; the EC2NodeClass's status names the reservations it found)",
        ),
        WindowNodes::HyperPodGroup => (
            TRAINING_PLAN_NOT_SERVING,
            "The training plan",
            "Check that the plan is Active (aws sagemaker describe-training-plan) and the instance group's instances are InService (aws sagemaker list-cluster-nodes)",
        ),
    };
    use crate::catalog::time::format_utc;
    let serving = schedule.serving_from?;
    let from = serving + SERVING_SLACK_MINUTES;
    (from < schedule.drain_by).then(|| AlertFacts {
        name: name.to_owned(),
        expression: format!(
            r#"absent(vllm:num_requests_running{{job="vllm"}}) and on() (vector(time()) > {} < {})"#,
            from * 60,
            schedule.drain_by * 60
        ),
        for_duration: "5m".to_owned(),
        severity: Severity::Critical.as_str().to_owned(),
        threshold: 0.0,
        summary: format!(
            "{what} of {} is open and paid for, but no vLLM server reports (serving was expected from {}; alerting from {} until the drain at {}).",
            // The construct's id: the stack is the alert's own.
            group.rsplit('/').next().unwrap_or(group),
            format_utc(serving),
            format_utc(from),
            format_utc(schedule.drain_by)
        ),
        action: format!("{check}, then the model pods' events and logs (kubectl describe pod, kubectl logs) for a slow or failed weight load."),
    })
}

/// The reserved windows of `stack`'s capacity, each with the display path of its group and
/// what brings its nodes, in the order the stack holds them; and whether every GPU claim of the
/// stack has one (then its GPU nodes exist only inside them).
fn windows(
    stack: &crate::app::Stack,
) -> (
    Vec<(String, WindowNodes, crate::catalog::capacity::BlockSchedule)>,
    bool,
) {
    let placements = super::Placements::new(stack);
    // The monitoring constructs' own facts are the alerts read from these: skipped, not
    // recursed into.
    let facts: Vec<_> = placements
        .all()
        .filter(|p| p.construct.kind() != <PrometheusMonitoring as Construct>::KIND)
        .map(|p| p.facts())
        .collect();
    let cold_starts: Vec<(String, Option<u64>)> = facts
        .iter()
        .flat_map(|f| &f.served_models)
        .map(|s| (s.instance_type.to_owned(), s.cold_start_secs()))
        .collect();
    let mut every_gpu_windowed = true;
    let mut out = Vec::new();
    for claim in facts.iter().flat_map(|f| &f.capacity) {
        let schedule = super::reservation_schedule(claim, &cold_starts);
        let ec2_type = claim
            .instance_type
            .strip_prefix("ml.")
            .unwrap_or(&claim.instance_type);
        let gpus = crate::catalog::instance(ec2_type).is_some_and(|i| i.gpu_count > 0);
        every_gpu_windowed &= !gpus || schedule.is_some();
        if let Some(schedule) = schedule {
            out.push((claim.path.clone(), WindowNodes::of(claim), schedule));
        }
    }
    (out, every_gpu_windowed)
}

/// The not-serving alerts of every reserved window (Capacity Block, training plan) in
/// `stack` (see [`not_serving_alert`]), in the order the stack holds them.
fn window_alerts(
    windows: &[(String, WindowNodes, crate::catalog::capacity::BlockSchedule)],
) -> Vec<AlertFacts> {
    windows
        .iter()
        .filter_map(|(path, nodes, schedule)| not_serving_alert(path, *nodes, schedule))
        .collect()
}

/// [`GPU_NODE_SILENT`]'s expression when every GPU node of the stack comes from a reserved
/// window: it holds only from each window's serving-from (its start when the cold start is not
/// known) plus [`SERVING_SLACK_MINUTES`] to its drain, since outside them no GPU node exists
/// and no exporter can report. `None` when a window leaves no such time.
pub fn gpu_silence_within(
    expression: &str,
    schedules: &[crate::catalog::capacity::BlockSchedule],
) -> Option<String> {
    let ranges: Vec<String> = schedules
        .iter()
        .filter_map(|s| {
            let from = s.serving_from.unwrap_or(s.start) + SERVING_SLACK_MINUTES;
            (from < s.drain_by)
                .then(|| format!("(vector(time()) > {} < {})", from * 60, s.drain_by * 60))
        })
        .collect();
    match ranges.as_slice() {
        [] => None,
        [one] => Some(format!("({expression}) and on() {one}")),
        many => Some(format!("({expression}) and on() ({})", many.join(" or "))),
    }
}

/// Every alerting rule, in order.
pub const ALERTS: [AlertRule; 6] = [
    SERVER_ERRORS,
    SLOW_FIRST_TOKEN,
    QUEUE_BACKLOG,
    GPU_XID_ERRORS,
    GPU_NODE_SILENT,
    POD_RESTARTING,
];

/// An alerting rule as deployed: what the runbook and `hyperforge list` show.
#[derive(Clone, Debug, PartialEq)]
pub struct AlertFacts {
    /// The alert's name.
    pub name: String,
    /// The PromQL expression, threshold in place.
    pub expression: String,
    /// How long it must hold (`5m`; empty: at once).
    pub for_duration: String,
    /// `critical` or `warning`.
    pub severity: String,
    /// The threshold in the expression.
    pub threshold: f64,
    /// What it means.
    pub summary: String,
    /// What to do.
    pub action: String,
}

/// Prometheus metrics, alert rules and alert routing for a cluster's model servers and GPUs.
#[derive(Clone, Debug)]
pub struct PrometheusMonitoring {
    id: String,
    cluster: Ref<kind::EksCluster>,
    cluster_name: String,
    topic: Ref<kind::SnsTopic>,
    subnets: Vec<Ref<kind::Subnet>>,
    security_groups: Vec<Ref<kind::SecurityGroup>>,
    ttft_p99_seconds: f64,
    queue_depth: u32,
}

/// Handle to the monitoring resources.
#[derive(Clone, Debug)]
pub struct PrometheusMonitoringHandle {
    /// The workspace: its ARN and id (KEDA's and HyperPod's Prometheus triggers query it).
    pub workspace: Ref<kind::PrometheusWorkspace>,
}

impl PrometheusMonitoring {
    /// Monitoring of `cluster`, alerts to `topic`, its collector's network interfaces in
    /// `subnets` (AMP asks for subnets in at least two Availability Zones) and in the cluster
    /// security group EKS creates (which admits the nodes and pods that carry it).
    pub fn new(
        id: impl Into<String>,
        cluster: &EksClusterHandle,
        topic: &AlarmTopicHandle,
        subnets: Vec<Ref<kind::Subnet>>,
    ) -> Self {
        PrometheusMonitoring {
            id: id.into(),
            cluster: cluster.cluster.clone(),
            cluster_name: cluster.name.clone(),
            topic: topic.topic.clone(),
            subnets,
            security_groups: Vec::new(),
            ttft_p99_seconds: DEFAULT_TTFT_SECONDS,
            queue_depth: DEFAULT_QUEUE_DEPTH,
        }
    }

    /// More security groups for the collector's network interfaces.
    pub fn security_groups(mut self, groups: Vec<Ref<kind::SecurityGroup>>) -> Self {
        self.security_groups = groups;
        self
    }

    /// The p99 time to first token, in seconds, above which [`SLOW_FIRST_TOKEN`] fires
    /// ([`TTFT_SECONDS`]; 10 by default).
    pub fn ttft_p99_seconds(mut self, seconds: f64) -> Self {
        self.ttft_p99_seconds = seconds;
        self
    }

    /// The waiting requests per server above which [`QUEUE_BACKLOG`] fires ([`QUEUE_DEPTH`];
    /// 50 by default).
    pub fn queue_depth(mut self, requests: u32) -> Self {
        self.queue_depth = requests;
        self
    }

    /// The threshold of `rule` in this description.
    fn threshold(&self, rule: &AlertRule) -> f64 {
        match rule.name {
            n if n == SERVER_ERRORS.name => 0.05,
            n if n == SLOW_FIRST_TOKEN.name => self.ttft_p99_seconds,
            n if n == QUEUE_BACKLOG.name => f64::from(self.queue_depth),
            _ => 0.0,
        }
    }

    /// Every alerting rule of this description in `stack`: [`ALERTS`] with their thresholds
    /// in place, then the Capacity Block windows' (see [`not_serving_alert`]).
    /// When every GPU node of the stack comes from a reserved window, [`GPU_NODE_SILENT`]
    /// holds only inside the windows (see [`gpu_silence_within`]): before a block opens no
    /// exporter can report.
    pub fn alerts_in(&self, stack: &crate::app::Stack) -> Vec<AlertFacts> {
        let (windows, every_gpu_windowed) = windows(stack);
        let mut alerts = self.alerts();
        if every_gpu_windowed && !windows.is_empty() {
            let schedules: Vec<_> = windows.iter().map(|(_, _, s)| *s).collect();
            for alert in &mut alerts {
                if alert.name == GPU_NODE_SILENT.name {
                    if let Some(bounded) = gpu_silence_within(&alert.expression, &schedules) {
                        alert.expression = bounded;
                    }
                }
            }
        }
        alerts.extend(window_alerts(&windows));
        alerts
    }

    /// Every rule of [`ALERTS`] with its threshold in place.
    pub fn alerts(&self) -> Vec<AlertFacts> {
        ALERTS
            .iter()
            .map(|rule| {
                let threshold = self.threshold(rule);
                AlertFacts {
                    name: rule.name.to_owned(),
                    expression: rule
                        .expression
                        .replace("{threshold}", &threshold.to_string()),
                    for_duration: rule.for_duration.to_owned(),
                    severity: rule.severity.as_str().to_owned(),
                    threshold,
                    summary: rule.summary.to_owned(),
                    action: rule.action.to_owned(),
                }
            })
            .collect()
    }

    /// The Prometheus rules file of the alerts in `stack`.
    pub fn rules_file(&self, stack: &crate::app::Stack) -> String {
        let rules: Vec<serde_json::Value> = self
            .alerts_in(stack)
            .into_iter()
            .map(|a| {
                let mut rule = serde_json::Map::new();
                rule.insert("alert".into(), json!(a.name));
                rule.insert("expr".into(), json!(a.expression));
                if !a.for_duration.is_empty() {
                    rule.insert("for".into(), json!(a.for_duration));
                }
                rule.insert("labels".into(), json!({"severity": a.severity}));
                rule.insert(
                    "annotations".into(),
                    json!({"summary": a.summary, "action": a.action}),
                );
                serde_json::Value::Object(rule)
            })
            .collect();
        yaml(&json!({"groups": [{"name": "serving", "rules": rules}]}))
    }

    /// The collector's scrape configuration: the vLLM servers (`VllmDeployment` pods and the
    /// HyperPod inference operator's model pods), the DCGM exporters and kube-state-metrics, by
    /// pod label and port, each target's namespace, pod and node kept as labels (except for
    /// kube-state-metrics, whose series carry those of the objects they describe).
    pub fn scrape_configuration(&self) -> String {
        let meta = |label: &str| {
            format!(
                "__meta_kubernetes_pod_label_{}",
                label.replace(['.', '/', '-'], "_")
            )
        };
        let keep_target_labels = [
            json!({"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"}),
            json!({"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"}),
            json!({"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"}),
        ];
        let job = |name: &str, mut relabel: Vec<serde_json::Value>| {
            relabel.extend(keep_target_labels.iter().cloned());
            json!({
                "job_name": name,
                "metrics_path": "/metrics",
                "kubernetes_sd_configs": [{"role": "pod"}],
                "relabel_configs": relabel,
            })
        };
        let keep_label = |label: (&str, &str)| json!({"source_labels": [meta(label.0)], "regex": label.1, "action": "keep"});
        let keep_port_number = |port: u16| json!({"source_labels": ["__meta_kubernetes_pod_container_port_number"], "regex": port.to_string(), "action": "keep"});
        // Its series describe other objects: their `namespace`, `pod` and `container` labels
        // are kept as scraped (`honor_labels`), and no target label of its own pod is added.
        let kube_state_metrics = json!({
            "job_name": KUBE_STATE_METRICS_JOB,
            "honor_labels": true,
            "metrics_path": "/metrics",
            "kubernetes_sd_configs": [{"role": "pod"}],
            "relabel_configs": [
                keep_label(KUBE_STATE_METRICS_POD_LABEL),
                keep_port_number(KUBE_STATE_METRICS_PORT),
            ],
        });
        yaml(&json!({
            "global": {
                "scrape_interval": SCRAPE_INTERVAL,
                "external_labels": {"cluster": self.cluster_name},
            },
            "scrape_configs": [
                job(
                    VLLM_JOB,
                    vec![
                        keep_label(VLLM_POD_LABEL),
                        json!({"source_labels": ["__meta_kubernetes_pod_container_port_name"], "regex": VLLM_PORT_NAME, "action": "keep"}),
                    ],
                ),
                job(
                    HYPERPOD_VLLM_JOB,
                    vec![
                        json!({
                            "source_labels": [
                                meta(HYPERPOD_MODEL_POD_LABEL),
                                "__meta_kubernetes_pod_container_port_name",
                                "__meta_kubernetes_pod_container_port_number",
                            ],
                            "regex": format!(".+;{VLLM_PORT_NAME};{HYPERPOD_MODEL_PORT}"),
                            "action": "keep",
                        }),
                        json!({"source_labels": [meta(VLLM_POD_LABEL.0)], "regex": VLLM_POD_LABEL.1, "action": "drop"}),
                        json!({"target_label": "job", "replacement": VLLM_JOB}),
                    ],
                ),
                job(
                    DCGM_JOB,
                    vec![keep_label(DCGM_POD_LABEL), keep_port_number(DCGM_PORT)],
                ),
                kube_state_metrics,
            ],
        }))
    }

    /// The alert manager definition: every alert to the topic, in the stack's region.
    fn alert_manager(&self) -> Text {
        Text::lit(
            "alertmanager_config: |\n  route:\n    receiver: notification-topic\n    group_by: [alertname, namespace]\n    group_wait: 30s\n    group_interval: 5m\n    repeat_interval: 4h\n  receivers:\n    - name: notification-topic\n      sns_configs:\n        - topic_arn: ",
        )
        .push_ref(self.topic.arn())
        .push_lit("\n          sigv4:\n            region: ")
        .push_pseudo(Pseudo::Region)
        .push_lit("\n          subject: '{{ .Status }}: {{ .CommonLabels.alertname }}'\n")
    }
}

/// YAML text of a JSON value, keys in their order.
fn yaml(value: &serde_json::Value) -> String {
    crate::yaml::to_string(value)
}

impl Construct for PrometheusMonitoring {
    type Handle = PrometheusMonitoringHandle;
    const KIND: &'static str = "prometheus_monitoring";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> PrometheusMonitoringHandle {
        PrometheusMonitoringHandle {
            workspace: Ref::new(stack, format!("{}/Workspace", self.id)),
        }
    }

    fn references(&self) -> Vec<AttrRef> {
        let mut out = vec![self.cluster.arn(), self.topic.arn()];
        out.extend(self.subnets.iter().map(|r| r.id()));
        out.extend(self.security_groups.iter().map(|r| r.id()));
        out
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        if self.subnets.is_empty() {
            ds.report_field(
                Code::MonitoringWithoutSubnets,
                cx.path,
                "subnets",
                "the managed collector has no subnets",
                "name the cluster's private subnets (in at least two Availability Zones)",
            );
        }
        if !TTFT_SECONDS.contains(self.ttft_p99_seconds) {
            ds.report_field(
                Code::InvalidAlertThreshold,
                cx.path,
                "ttft_p99_seconds",
                format!(
                    "a time-to-first-token threshold of {} seconds is outside {}",
                    self.ttft_p99_seconds,
                    TTFT_SECONDS.describe()
                ),
                "alert on a p99 above 0 and at most 600 seconds",
            );
        }
        if !QUEUE_DEPTH.contains(i64::from(self.queue_depth)) {
            ds.report_field(
                Code::InvalidAlertThreshold,
                cx.path,
                "queue_depth",
                format!(
                    "a queue depth of {} is outside {}",
                    self.queue_depth,
                    QUEUE_DEPTH.describe()
                ),
                "alert on at least 1 waiting request",
            );
        }
    }

    fn facts(&self, cx: &Context<'_>) -> Facts<'_> {
        Facts {
            alerts: self.alerts_in(cx.stack),
            ..Facts::default()
        }
    }

    /// The workspace with its alert manager definition, the rules, the collector and the
    /// output naming the workspace.
    fn expand(&self, scope: &mut Scope<'_>) {
        let stack = scope.stack().name().to_owned();
        let handle = self.handle(&stack);
        scope.add(
            "Workspace",
            PrometheusWorkspace {
                alias: format!("{stack}-{}", self.id),
                kms_key: None,
                alert_manager: Some(self.alert_manager()),
            },
        );
        scope.add(
            "Rules",
            PrometheusRuleGroups {
                name: RULES_NAMESPACE.to_owned(),
                workspace_arn: handle.workspace.arn(),
                workspace_id: handle.workspace.id(),
                data: self.rules_file(scope.stack()),
            },
        );
        // The collector's network interfaces reach the scrape targets only from a group the
        // targets' nodes admit: the cluster's own (EKS nodes) and every group the stack's
        // other node launchers put their nodes in (HyperPod's).
        let mut security_groups = vec![self.cluster.cluster_security_group_id()];
        security_groups.extend(self.security_groups.iter().map(|r| r.id()));
        for placed in super::Placements::new(scope.stack()).all() {
            for group in placed.facts().node_security_groups {
                if !security_groups.contains(&group) {
                    security_groups.push(group);
                }
            }
        }
        scope.add(
            "Scraper",
            PrometheusScraper {
                alias: format!("{stack}-{}", self.id),
                cluster_arn: self.cluster.arn(),
                subnets: self.subnets.iter().map(|r| r.id()).collect(),
                security_groups,
                workspace_arn: handle.workspace.arn(),
                configuration: self.scrape_configuration(),
            },
        );
        scope.add(
            "Output",
            StackOutput {
                description: "The Prometheus workspace holding the serving and GPU metrics (query it with awscurl or Grafana; KEDA and HyperPod autoscaling read it)".to_owned(),
                value: handle.workspace.arn(),
            },
        );
    }
}

// --- Stack-file form -------------------------------------------------------------------------

stack_file_shape! {
    pub mod fields = <PrometheusMonitoring as Construct>::KIND, "Serving and GPU metrics in an Amazon Managed Service for Prometheus workspace, scraped by an AWS managed collector, with alert rules routed to a notification topic." {
        ID: req "prometheus_monitoring", Ty::Str, "The construct id.";
        CLUSTER: req "cluster", Ty::Ref(Want::Eks), "The EKS cluster whose pods are scraped.";
        TOPIC: req "topic", Ty::Ref(Want::AlarmTopic), "The notification topic alerts go to (an `alarm_topic` construct).";
        SUBNETS: req "subnets", Ty::Refs(Want::Subnets), "Subnets of the collector's network interfaces (the cluster's private subnets, two zones or more).";
        SECURITY_GROUPS: opt "security_groups", Ty::Refs(Want::SecurityGroup), "More security groups for the collector (it always has the cluster security group).";
        TTFT_P99_SECONDS: opt "ttft_p99_seconds", Ty::F64(super::TTFT_SECONDS), "Alert when the p99 time to first token exceeds this many seconds for 10 minutes (10 by default).";
        QUEUE_DEPTH: opt "queue_depth", Ty::U32(super::QUEUE_DEPTH), "Alert when more requests than this wait at one server for 5 minutes (50 by default).";
    }
}

impl super::stack_file::StackFileConstruct for PrometheusMonitoring {
    const SHAPE: &'static super::stack_file::Shape = &fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        let cluster = r.eks(&fields::CLUSTER);
        let topic = r.alarm_topic(&fields::TOPIC);
        let subnets = r.subnets(&fields::SUBNETS);
        let groups = r.security_groups(&fields::SECURITY_GROUPS);
        let ttft = r.f64(&fields::TTFT_P99_SECONDS);
        let depth = r.u32(&fields::QUEUE_DEPTH);
        let mut c = PrometheusMonitoring::new(id, &cluster.ok()??, &topic.ok()??, subnets.ok()??);
        if let Ok(Some(groups)) = groups {
            c = c.security_groups(groups);
        }
        if let Some(s) = ttft {
            c = c.ttft_p99_seconds(s);
        }
        if let Some(d) = depth {
            c = c.queue_depth(d);
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn gpu_silence_is_bounded_to_each_window_that_serves() {
        use crate::catalog::capacity::block_schedule;
        let day = 1440;
        let a = block_schedule(10 * day, 17 * day + 690, Some(60), 1);
        let b = block_schedule(20 * day, 27 * day + 690, None, 1);
        let expr = "up == 0";
        assert_eq!(
            gpu_silence_within(expr, &[a]).unwrap(),
            format!(
                "(up == 0) and on() (vector(time()) > {} < {})",
                (a.start + 60 + 15) * 60,
                a.drain_by * 60
            )
        );
        let both = gpu_silence_within(expr, &[a, b]).unwrap();
        assert!(both.contains(&format!(
            ") or (vector(time()) > {} < {}))",
            (b.start + 15) * 60,
            b.drain_by * 60
        )));
        // A window too short to serve leaves nothing to bound by.
        let short = block_schedule(10 * day, 10 * day + 50, None, 1);
        assert_eq!(gpu_silence_within(expr, &[short]), None);
    }

    use super::*;

    /// A block opening 2026-12-10 04:55 whose model serves after a 95-minute cold start: the
    /// alert holds from 06:30 plus the slack to the drain at 10:49 on the 17th, in seconds.
    #[test]
    fn a_window_alerts_from_serving_plus_slack_to_the_drain() {
        use crate::catalog::capacity::block_schedule;
        use crate::catalog::time::parse_utc_minutes;
        let minutes = |t: &str| parse_utc_minutes(t).unwrap();
        let schedule = block_schedule(
            minutes("2026-12-10T04:55:00Z"),
            minutes("2026-12-17T11:30:00Z"),
            Some(95),
            1,
        );
        let alert = not_serving_alert("s/GpuNodes", WindowNodes::NodeGroup, &schedule).unwrap();
        assert_eq!(
            alert.expression,
            format!(
                r#"absent(vllm:num_requests_running{{job="vllm"}}) and on() (vector(time()) > {} < {})"#,
                minutes("2026-12-10T06:45:00Z") * 60,
                minutes("2026-12-17T10:49:00Z") * 60
            )
        );
        assert_eq!(
            (alert.severity.as_str(), alert.for_duration.as_str()),
            ("critical", "5m")
        );
        assert!(
            alert.summary.contains("of GpuNodes is"),
            "{}",
            alert.summary
        );
        // Unknown cold start, or no time left to serve: no alert.
        let unknown = block_schedule(schedule.start, schedule.end, None, 1);
        assert_eq!(
            not_serving_alert("s/GpuNodes", WindowNodes::NodeGroup, &unknown),
            None
        );
        let short = block_schedule(schedule.start, schedule.start + 60, Some(95), 1);
        assert_eq!(
            not_serving_alert("s/GpuNodes", WindowNodes::NodeGroup, &short),
            None
        );
    }

    #[test]
    fn every_rule_has_a_threshold_placeholder_and_a_unique_name() {
        let mut names: Vec<&str> = ALERTS.iter().map(|a| a.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALERTS.len());
        for rule in ALERTS {
            assert!(rule.expression.contains("{threshold}"), "{}", rule.name);
        }
    }
}
