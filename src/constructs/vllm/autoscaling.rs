//! Autoscaling of a vLLM server within what is reserved: [`Autoscaling`], set on a
//! [`VllmDeployment`](super::VllmDeployment) (a KEDA `ScaledObject` and its
//! `TriggerAuthentication`) or an [`InferenceEndpoint`](super::InferenceEndpoint) (the
//! `autoScalingSpec` of its `InferenceEndpointConfig`, which the HyperPod inference operator
//! turns into a KEDA `ScaledObject` of its own).
//!
//! The trigger is a Prometheus query against Amazon Managed Service for Prometheus (AMP). By
//! default it is vLLM's queue: `sum(vllm:num_requests_waiting{model_name="<served name>"})` with
//! an average-per-replica target, so the autoscaler asks for `ceil(waiting / target)` replicas.
//! `vllm:num_requests_waiting` is the gauge "Number of requests waiting to be processed" that
//! vLLM's V1 engine sets from its scheduler on every step, labelled `model_name` (the served
//! model name) and `engine` (vllm-project/vllm `vllm/v1/metrics/loggers.py`, `PrometheusStatLogger`,
//! commit 005a810bc40faa25b8870fbc8559c3462581eee3). A request waits only when the running batch
//! is full or the KV cache cannot take it, so a sustained queue is the signal that a replica is
//! saturated. The query selects on `model_name`, which vLLM sets itself, rather than on `pod` or
//! `namespace` labels, which exist only if the collector's relabelling adds them (an empty
//! result reads as 0 and would never scale up); give [`Autoscaling::query`] to select otherwise.
//!
//! Scale to zero is refused (`HF0362`): a cold start of a large model is 20 to 80 minutes of
//! weights and warm-up, on a reserved node that is paid for whether a replica runs on it or not.

use super::super::stack_file::{Floats, Ints};
use crate::app::{kind, Ref};
use crate::diagnostics::{Code, Diagnostics};

/// Replicas an autoscaled server may scale between: 0 (refused with its reason, `HF0362`) to
/// what a Kubernetes replica count (int32) holds.
pub const AUTOSCALING_REPLICAS: Ints = Ints::new(0, i32::MAX as i64);

/// Intervals, cooldowns and stabilization windows, seconds: none to one day.
pub const AUTOSCALING_SECS: Ints = Ints::new(0, 86_400);

/// The trigger's target value: above 0.
pub const AUTOSCALING_TARGET: Floats = Floats::above(0.0, 1e9);

/// Default target: 4 waiting requests per replica on average.
pub const DEFAULT_TARGET_VALUE: f64 = 4.0;
/// Default polling interval, seconds (KEDA's default).
pub const DEFAULT_POLLING_SECS: u32 = 30;
/// Default cooldown, seconds.
pub const DEFAULT_COOLDOWN_SECS: u32 = 600;
/// Default scale-up stabilization window, seconds: scale up at once.
pub const DEFAULT_SCALE_UP_STABILIZATION_SECS: u32 = 0;
/// Default scale-down stabilization window, seconds: half an hour, since a replica given up
/// takes 20 to 80 minutes to come back.
pub const DEFAULT_SCALE_DOWN_STABILIZATION_SECS: u32 = 1800;

/// How an autoscaled server scales: between `min_replicas` (at least 1) and `max_replicas`,
/// on a Prometheus query served by an AMP workspace.
#[derive(Clone, Debug, PartialEq)]
pub struct Autoscaling {
    min_replicas: i32,
    max_replicas: i32,
    server_address: String,
    workspace: Option<Ref<kind::PrometheusWorkspace>>,
    query: Option<String>,
    target_value: f64,
    polling_interval_secs: u32,
    cooldown_secs: u32,
    scale_up_stabilization_secs: u32,
    scale_down_stabilization_secs: u32,
}

impl Autoscaling {
    /// Scales between `min_replicas` and `max_replicas` on the AMP workspace whose query
    /// endpoint is `server_address` (`https://aps-workspaces.<region>.amazonaws.com/workspaces/<id>`;
    /// the workspace id is known only at deploy time, so pass the placeholder your deployment
    /// substitutes).
    pub fn new(min_replicas: i32, max_replicas: i32, server_address: impl Into<String>) -> Self {
        Autoscaling {
            min_replicas,
            max_replicas,
            server_address: server_address.into(),
            workspace: None,
            query: None,
            target_value: DEFAULT_TARGET_VALUE,
            polling_interval_secs: DEFAULT_POLLING_SECS,
            cooldown_secs: DEFAULT_COOLDOWN_SECS,
            scale_up_stabilization_secs: DEFAULT_SCALE_UP_STABILIZATION_SECS,
            scale_down_stabilization_secs: DEFAULT_SCALE_DOWN_STABILIZATION_SECS,
        }
    }

    /// Scales between `min_replicas` and `max_replicas` on the metrics of `workspace` (a
    /// [`PrometheusMonitoring`](crate::constructs::PrometheusMonitoring)'s): its id is known only
    /// once deployed, so the objects carry a placeholder the runbook and `hyperforge deploy`
    /// replace with it when the stage is applied.
    pub fn on_workspace(
        min_replicas: i32,
        max_replicas: i32,
        workspace: &Ref<kind::PrometheusWorkspace>,
    ) -> Self {
        let mut a = Autoscaling::new(min_replicas, max_replicas, String::new());
        a.workspace = Some(workspace.clone());
        a
    }

    /// The workspace queried, when given as one.
    pub fn workspace(&self) -> Option<&Ref<kind::PrometheusWorkspace>> {
        self.workspace.as_ref()
    }

    /// This autoscaling with its query endpoint at `address` (a workspace's, resolved when the
    /// construct expands).
    pub(crate) fn with_address(mut self, address: String) -> Self {
        self.server_address = address;
        self
    }

    /// The query endpoint of workspace placeholder `id` in `region`.
    pub(crate) fn workspace_address(region: &str, id: &str) -> String {
        format!("https://aps-workspaces.{region}.amazonaws.com/workspaces/{id}")
    }

    /// A PromQL query of its own, returning one value, instead of the queue depth; the target
    /// is still an average per replica.
    pub fn query(mut self, query: impl Into<String>) -> Self {
        self.query = Some(query.into());
        self
    }

    /// The target value per replica (default 4 waiting requests).
    pub fn target_value(mut self, value: f64) -> Self {
        self.target_value = value;
        self
    }

    /// How often the trigger is evaluated, seconds (default 30).
    pub fn polling_interval_secs(mut self, secs: u32) -> Self {
        self.polling_interval_secs = secs;
        self
    }

    /// The cooldown, seconds (default 600).
    pub fn cooldown_secs(mut self, secs: u32) -> Self {
        self.cooldown_secs = secs;
        self
    }

    /// The scale-up stabilization window, seconds (default 0).
    pub fn scale_up_stabilization_secs(mut self, secs: u32) -> Self {
        self.scale_up_stabilization_secs = secs;
        self
    }

    /// The scale-down stabilization window, seconds (default 1800).
    pub fn scale_down_stabilization_secs(mut self, secs: u32) -> Self {
        self.scale_down_stabilization_secs = secs;
        self
    }

    /// The fewest replicas.
    pub fn min(&self) -> i32 {
        self.min_replicas
    }

    /// The most replicas.
    pub fn max(&self) -> i32 {
        self.max_replicas
    }

    /// The AMP query endpoint.
    pub fn server_address(&self) -> &str {
        &self.server_address
    }

    /// The query given, if any.
    pub fn custom_query(&self) -> Option<&str> {
        self.query.as_deref()
    }

    /// The query run: the one given, or the queue depth of `served_model_name`.
    pub fn query_for(&self, served_model_name: &str) -> String {
        self.query
            .clone()
            .unwrap_or_else(|| queue_depth_query(served_model_name))
    }

    /// The target value per replica.
    pub fn target(&self) -> f64 {
        self.target_value
    }

    /// The polling interval, seconds.
    pub fn polling_interval(&self) -> u32 {
        self.polling_interval_secs
    }

    /// The cooldown, seconds.
    pub fn cooldown(&self) -> u32 {
        self.cooldown_secs
    }

    /// The scale-up stabilization window, seconds.
    pub fn scale_up_stabilization(&self) -> u32 {
        self.scale_up_stabilization_secs
    }

    /// The scale-down stabilization window, seconds.
    pub fn scale_down_stabilization(&self) -> u32 {
        self.scale_down_stabilization_secs
    }

    /// The rules a value can break on its own: scale to zero (`HF0362`), min above max
    /// (`HF0363`), the address, query, target and times (`HF0364`).
    pub(crate) fn validate(&self, path: &str, ds: &mut Diagnostics) {
        if self.min_replicas < 1 {
            ds.report_field(
                Code::ScaleToZeroRefused,
                path,
                "autoscaling.min_replicas",
                format!(
                    "autoscaling may scale down to {} replicas; scale to zero is not offered",
                    self.min_replicas
                ),
                "set `min_replicas` to 1 or more: a cold start is 20 to 80 minutes of weights and warm-up, on a reserved node that is paid for anyway",
            );
        }
        if self.max_replicas < 1 || self.min_replicas > self.max_replicas {
            ds.report_field(
                Code::AutoscalingReplicasNotOrdered,
                path,
                "autoscaling.max_replicas",
                format!(
                    "autoscaling between {} and {} replicas: the maximum is below the minimum or below 1",
                    self.min_replicas, self.max_replicas
                ),
                "set `max_replicas` to at least `min_replicas` and at least 1",
            );
        }
        if self.workspace.is_none() && !is_https_url(&self.server_address) {
            ds.report_field(
                Code::InvalidAutoscaling,
                path,
                "autoscaling.server_address",
                format!(
                    "`{}` is not an https URL of a Prometheus query endpoint",
                    self.server_address
                ),
                "pass the AMP workspace's endpoint, `https://aps-workspaces.<region>.amazonaws.com/workspaces/<workspace id>` (no trailing `/api/v1/query`)",
            );
        }
        if self.query.as_deref().is_some_and(|q| q.trim().is_empty()) {
            ds.report_field(
                Code::InvalidAutoscaling,
                path,
                "autoscaling.query",
                "the autoscaling query is empty",
                "give a PromQL query returning one value, or leave `query` out for vLLM's queue depth",
            );
        }
        if !AUTOSCALING_TARGET.contains(self.target_value) {
            ds.report_field(
                Code::InvalidAutoscaling,
                path,
                "autoscaling.target_value",
                format!(
                    "the autoscaling target {} is not a positive number",
                    self.target_value
                ),
                "set a target above 0 (the query's value per replica)",
            );
        }
        for (field, secs) in [
            (
                "autoscaling.polling_interval_secs",
                self.polling_interval_secs,
            ),
            ("autoscaling.cooldown_secs", self.cooldown_secs),
            (
                "autoscaling.scale_up_stabilization_secs",
                self.scale_up_stabilization_secs,
            ),
            (
                "autoscaling.scale_down_stabilization_secs",
                self.scale_down_stabilization_secs,
            ),
        ] {
            if !AUTOSCALING_SECS.contains(i64::from(secs)) {
                ds.report_field(
                    Code::InvalidAutoscaling,
                    path,
                    field,
                    format!("{secs} seconds is beyond one day"),
                    "use 0 to 86400 seconds",
                );
            }
        }
        if self.polling_interval_secs == 0 {
            ds.report_field(
                Code::InvalidAutoscaling,
                path,
                "autoscaling.polling_interval_secs",
                "a polling interval of 0 seconds",
                "poll every 1 second or more (KEDA's default is 30)",
            );
        }
    }
}

/// The default trigger: the requests waiting in every engine serving `served_model_name`.
pub fn queue_depth_query(served_model_name: &str) -> String {
    format!(
        "sum(vllm:num_requests_waiting{{model_name=\"{}\"}})",
        served_model_name.replace('\\', "\\\\").replace('"', "\\\"")
    )
}

/// `https://host/...` with a non-empty host of URL characters and no whitespace.
fn is_https_url(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("https://") else {
        return false;
    };
    let host = rest.split('/').next().unwrap_or_default();
    !host.is_empty()
        && !s.ends_with('/')
        && s.chars().all(|c| c.is_ascii_graphic())
        && !s.contains(['"', '\'', '`', '<', '>', '\\'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_query_is_the_queue_of_the_served_model() {
        assert_eq!(
            queue_depth_query("kimi-k3"),
            "sum(vllm:num_requests_waiting{model_name=\"kimi-k3\"})"
        );
        assert_eq!(
            queue_depth_query("a\"b"),
            "sum(vllm:num_requests_waiting{model_name=\"a\\\"b\"})"
        );
    }

    #[test]
    fn addresses() {
        assert!(is_https_url(
            "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-12345678-abcd"
        ));
        assert!(is_https_url(
            "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/${AMP_WORKSPACE_ID}"
        ));
        for bad in [
            "http://x",
            "https://",
            "https:///x",
            "https://x/ y",
            "https://x/",
        ] {
            assert!(!is_https_url(bad), "{bad}");
        }
    }
}
