//! The serving dashboard: a Grafana dashboard in a ConfigMap the dashboard sidecar loads, whose
//! panels query only the jobs the managed collector scrapes, and the runbook's way to import it.

use crate::reference;
use hyperforge::constructs::dashboard::{dashboard_json, DASHBOARD_KEY, GRAFANA_DASHBOARD_LABEL};
use hyperforge::constructs::ServingDashboard;
use hyperforge::App;
use serde::Deserialize;
use serde_json::Value;

/// The EKS reference with a dashboard in a Kubernetes stage of its own.
fn with_dashboard(name: &str) -> Result<hyperforge::Assembly, hyperforge::Diagnostics> {
    let mut stack = reference::kimi_k3_eks_stack("dash");
    let stage = stack.kubernetes_stage("dashboards");
    stack.add(stage, ServingDashboard::new("GrafanaDashboard", name));
    App::new().stack(stack).synth()
}

#[test]
fn the_dashboard_is_a_config_map_grafana_loads() {
    let assembly = with_dashboard("dash-serving").unwrap_or_else(|d| panic!("{d}"));
    let (path, text) = assembly
        .files()
        .iter()
        .find(|(p, _)| p.ends_with("-dashboards.yaml"))
        .expect("the dashboards stage");
    let text = String::from_utf8_lossy(text);
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
        .collect();
    assert_eq!(docs.len(), 1, "{path}");
    let cm = &docs[0];
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(cm["metadata"]["namespace"], "kube-system");
    assert_eq!(cm["metadata"]["labels"][GRAFANA_DASHBOARD_LABEL], "1");
    let dashboard: Value =
        serde_json::from_str(cm["data"][DASHBOARD_KEY].as_str().unwrap()).unwrap();
    assert_eq!(dashboard, dashboard_json("dash: serving", "dash-serving"));
}

#[test]
fn every_panel_reads_a_scraped_job_through_the_datasource_variable() {
    let dashboard = dashboard_json("s: serving", "s-serving");
    let panels = dashboard["panels"].as_array().unwrap();
    assert_eq!(panels.len(), 8);
    let titles: Vec<&str> = panels
        .iter()
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    for wanted in [
        "Requests running and waiting",
        "Time to first token",
        "KV cache usage",
        "Server errors (5xx share)",
        "GPU utilization",
        "GPU XID errors",
    ] {
        assert!(titles.contains(&wanted), "{wanted}");
    }
    for p in panels {
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            assert!(
                expr.contains("job=\"vllm\"") || expr.contains("job=\"dcgm\""),
                "{expr}"
            );
            assert_eq!(t["datasource"]["uid"], "${datasource}");
        }
        // Two panels to a row, no overlap.
        let grid = &p["gridPos"];
        assert!(grid["x"] == 0 || grid["x"] == 12);
    }
    assert_eq!(dashboard["templating"]["list"][0]["query"], "prometheus");
}

#[test]
fn a_bad_name_is_refused() {
    let err = with_dashboard("Serving_Dashboard").unwrap_err().to_string();
    assert!(err.contains("error[HF"), "{err}");
    let err = with_dashboard(&"a".repeat(41)).unwrap_err().to_string();
    assert!(err.contains("not a dashboard name"), "{err}");
}
