//! The serving dashboard: one Grafana dashboard per stack with the panels an on-call engineer
//! opens first (requests waiting and running, time to first token, tokens per second, KV cache,
//! server errors, GPU utilization, memory and XID errors), over the Prometheus metrics
//! [`super::PrometheusMonitoring`] collects. It is shipped as a ConfigMap labelled
//! `grafana_dashboard: "1"`: Grafana's dashboard sidecar loads it as it is, and for Amazon
//! Managed Grafana the runbook exports its JSON for import. The queries name only metrics the
//! collector's jobs scrape ([`super::monitoring::VLLM_JOB`], [`super::monitoring::DCGM_JOB`]).

use super::monitoring::{DCGM_JOB, VLLM_JOB};
use super::{Construct, Context, Facts};
use crate::diagnostics::{Code, Diagnostics};
use crate::resources::{KubeObject, Scope};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The namespace the dashboard's ConfigMap is written to.
pub const DASHBOARD_NAMESPACE: &str = "kube-system";

/// The label Grafana's dashboard sidecar watches for.
pub const GRAFANA_DASHBOARD_LABEL: &str = "grafana_dashboard";

/// The key of the dashboard's JSON in the ConfigMap.
pub const DASHBOARD_KEY: &str = "serving.json";

/// A panel: its title, unit and PromQL queries (legend format, expression).
struct Panel {
    title: &'static str,
    unit: &'static str,
    queries: &'static [(&'static str, &'static str)],
}

/// The panels, in the order an on-call engineer reads them: is it serving, how fast, how full,
/// are the GPUs well.
fn panels() -> Vec<Panel> {
    vec![
        Panel {
            title: "Requests running and waiting",
            unit: "short",
            queries: &[
                ("running {{pod}}", "sum by (pod) (vllm:num_requests_running{job=\"vllm\"})"),
                ("waiting {{pod}}", "sum by (pod) (vllm:num_requests_waiting{job=\"vllm\"})"),
            ],
        },
        Panel {
            title: "Time to first token",
            unit: "s",
            queries: &[
                ("p50", "histogram_quantile(0.5, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{job=\"vllm\"}[5m])))"),
                ("p99", "histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{job=\"vllm\"}[5m])))"),
            ],
        },
        Panel {
            title: "Generated tokens per second",
            unit: "short",
            queries: &[("{{pod}}", "sum by (pod) (rate(vllm:generation_tokens_total{job=\"vllm\"}[1m]))")],
        },
        Panel {
            title: "KV cache usage",
            unit: "percentunit",
            queries: &[("{{pod}}", "max by (pod) (vllm:kv_cache_usage_perc{job=\"vllm\"})")],
        },
        Panel {
            title: "Server errors (5xx share)",
            unit: "percentunit",
            queries: &[("5xx", "sum (rate(http_requests_total{job=\"vllm\",status=\"5xx\"}[5m])) / sum (rate(http_requests_total{job=\"vllm\"}[5m]))")],
        },
        Panel {
            title: "GPU utilization",
            unit: "percent",
            queries: &[("{{node}} GPU {{gpu}}", "max by (node, gpu) (DCGM_FI_DEV_GPU_UTIL{job=\"dcgm\"})")],
        },
        Panel {
            title: "GPU memory used",
            unit: "decmbytes",
            queries: &[("{{node}} GPU {{gpu}}", "max by (node, gpu) (DCGM_FI_DEV_FB_USED{job=\"dcgm\"})")],
        },
        Panel {
            title: "GPU XID errors",
            unit: "short",
            queries: &[("{{node}} GPU {{gpu}}", "max by (node, gpu) (DCGM_FI_DEV_XID_ERRORS{job=\"dcgm\"})")],
        },
    ]
}

/// The Grafana dashboard of `title` as JSON: a `datasource` variable of type Prometheus (the
/// AMP workspace, added to Grafana as a SigV4 data source), the panels two to a row.
pub fn dashboard_json(title: &str, uid: &str) -> Value {
    let panels: Vec<Value> = panels()
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let targets: Vec<Value> = p
                .queries
                .iter()
                .enumerate()
                .map(|(j, (legend, expr))| {
                    json!({
                        "refId": ((b'A' + j as u8) as char).to_string(),
                        "datasource": {"type": "prometheus", "uid": "${datasource}"},
                        "expr": expr,
                        "legendFormat": legend,
                    })
                })
                .collect();
            json!({
                "id": i + 1,
                "type": "timeseries",
                "title": p.title,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": 8, "w": 12, "x": (i % 2) * 12, "y": (i / 2) * 8},
                "fieldConfig": {"defaults": {"unit": p.unit}, "overrides": []},
                "targets": targets,
            })
        })
        .collect();
    json!({
        "uid": uid,
        "title": title,
        "tags": ["hyperforge", "vllm", "gpu"],
        "timezone": "utc",
        "schemaVersion": 39,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [{
            "name": "datasource",
            "label": "Prometheus",
            "type": "datasource",
            "query": "prometheus",
        }]},
        "panels": panels,
    })
}

/// One Grafana dashboard of the stack's model servers and GPUs, as a ConfigMap.
#[derive(Clone, Debug)]
pub struct ServingDashboard {
    id: String,
    name: String,
}

/// Handle to the dashboard.
#[derive(Clone, Debug)]
pub struct ServingDashboardHandle {
    /// The ConfigMap's name (in [`DASHBOARD_NAMESPACE`]).
    pub config_map: String,
}

impl ServingDashboard {
    /// The dashboard, its ConfigMap named `name` (a DNS label: `kimi-k3-serving-dashboard`).
    pub fn new(id: impl Into<String>, name: impl Into<String>) -> Self {
        ServingDashboard {
            id: id.into(),
            name: name.into(),
        }
    }

    /// The ConfigMap of stack `stack`.
    fn config_map(&self, stack: &str) -> ConfigMap {
        let dashboard = dashboard_json(&format!("{stack}: serving"), &self.name);
        let text = serde_json::to_string_pretty(&dashboard).unwrap_or_default();
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(DASHBOARD_NAMESPACE.to_owned()),
                labels: Some(BTreeMap::from([
                    (GRAFANA_DASHBOARD_LABEL.to_owned(), "1".to_owned()),
                    (
                        "app.kubernetes.io/managed-by".to_owned(),
                        "hyperforge".to_owned(),
                    ),
                    ("app.kubernetes.io/part-of".to_owned(), stack.to_owned()),
                ])),
                ..Default::default()
            },
            data: Some(BTreeMap::from([(DASHBOARD_KEY.to_owned(), text)])),
            ..Default::default()
        }
    }
}

impl Construct for ServingDashboard {
    type Handle = ServingDashboardHandle;
    const KIND: &'static str = "serving_dashboard";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, _stack: &str) -> ServingDashboardHandle {
        ServingDashboardHandle {
            config_map: self.name.clone(),
        }
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        // Grafana's uid is at most 40 characters; the name doubles as it.
        if !super::vllm::is_dns_label(&self.name) || self.name.len() > 40 {
            ds.report_field(
                Code::InvalidKubernetesName,
                cx.path,
                "name",
                format!("`{}` is not a dashboard name", self.name),
                "use 1-40 lowercase letters, digits and hyphens (it names the ConfigMap and is the dashboard's uid)",
            );
        }
    }

    fn facts(&self, _cx: &Context<'_>) -> Facts<'_> {
        Facts {
            dashboards: vec![self.name.clone()],
            ..Facts::default()
        }
    }

    /// The ConfigMap holding the dashboard's JSON.
    fn expand(&self, scope: &mut Scope<'_>) {
        let stack = scope.stack().name().to_owned();
        scope.add_object(KubeObject::new(&self.config_map(&stack)));
    }
}

/// The metrics jobs the panels read, for tests and readers.
pub const JOBS: [&str; 2] = [VLLM_JOB, DCGM_JOB];

// --- Stack-file form -------------------------------------------------------------------------

stack_file_shape! {
    pub mod fields = <ServingDashboard as Construct>::KIND, "A Grafana dashboard of the model servers and GPUs (the metrics of a `prometheus_monitoring`), as a ConfigMap labelled for Grafana's dashboard sidecar in kube-system." {
        ID: req "serving_dashboard", Ty::Str, "The construct id.";
        NAME: req "name", Ty::Str, "The ConfigMap's name and the dashboard's uid (1-40 lowercase letters, digits and hyphens).";
    }
}

impl super::stack_file::StackFileConstruct for ServingDashboard {
    const SHAPE: &'static super::stack_file::Shape = &fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        Some(ServingDashboard::new(id, r.text(&fields::NAME)?))
    }
}
