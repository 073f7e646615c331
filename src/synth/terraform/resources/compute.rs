//! Terraform lowering of the compute kinds: `awscc_sagemaker_cluster` (hashicorp/aws has
//! none); inputs are variables.

use super::network::variable;
use super::Cx;
use crate::app::logical_id;
use crate::resources::ADDONS_NEEDING_NODES;
use crate::resources::{HyperPodCluster, Resource};
use crate::synth::terraform::module::{escape_template, snake, Addr};
use serde_json::{json, Map, Value};

/// The address of the resource lowered from `path` as `ty`.
fn addr(ty: &'static str, path: &str) -> Addr {
    Addr {
        ty,
        name: snake(&logical_id(path)),
    }
}

/// The cluster waits for the earlier stages (the uploaded lifecycle scripts, the Helm chart)
/// and for its execution role's policies; the EKS add-ons whose pods need nodes wait for it.
/// awscc has no provider-level default tags, so the stack's tags are set here.
pub(super) fn hyperpod_cluster(cx: Cx, r: &Resource, c: &HyperPodCluster) {
    let mut groups = Vec::new();
    let mut role_policies = Vec::new();
    for g in &c.instance_groups {
        let source_uri = cx.text(&g.lifecycle.source_s3_uri);
        let mut group = Map::new();
        group.insert("instance_group_name".into(), json!(g.name));
        group.insert("instance_type".into(), json!(g.instance_type));
        group.insert("instance_count".into(), json!(g.count));
        group.insert("threads_per_core".into(), json!(g.threads_per_core));
        group.insert("execution_role".into(), cx.attr(&g.execution_role));
        group.insert(
            "instance_storage_configs".into(),
            json!([{"ebs_volume_config": {"volume_size_in_gb": g.ebs_volume_gb}}]),
        );
        group.insert(
            "life_cycle_config".into(),
            json!({"on_create": escape_template(&g.lifecycle.on_create), "source_s3_uri": source_uri}),
        );
        if !g.deep_health_checks.is_empty() {
            group.insert(
                "on_start_deep_health_checks".into(),
                json!(g.deep_health_checks),
            );
        }
        if let Some(input) = &g.training_plan {
            let var = variable(cx, input);
            group.insert("training_plan_arn".into(), var);
        }
        if !g.labels.is_empty() || !g.taints.is_empty() {
            let mut k8s = Map::new();
            if !g.labels.is_empty() {
                let labels: Map<String, Value> = g
                    .labels
                    .iter()
                    .map(|(k, v)| (escape_template(k), json!(escape_template(v))))
                    .collect();
                k8s.insert("labels".into(), Value::Object(labels));
            }
            if !g.taints.is_empty() {
                let taints: Vec<Value> = g
                    .taints
                    .iter()
                    .map(|t| {
                        let mut m = Map::new();
                        m.insert("key".into(), json!(escape_template(&t.key)));
                        if let Some(value) = &t.value {
                            m.insert("value".into(), json!(escape_template(value)));
                        }
                        m.insert("effect".into(), json!(t.effect));
                        Value::Object(m)
                    })
                    .collect();
                k8s.insert("taints".into(), json!(taints));
            }
            group.insert("kubernetes_config".into(), Value::Object(k8s));
        }
        groups.push(Value::Object(group));
        role_policies.extend(cx.role_policies(&g.execution_role.path));
    }
    let subnets: Vec<Value> = c.subnets.iter().map(|a| cx.attr(a)).collect();
    let security_groups: Vec<Value> = c.security_groups.iter().map(|a| cx.attr(a)).collect();
    let tags: Vec<Value> = cx
        .tags()
        .iter()
        .map(|(k, v)| json!({"key": escape_template(k), "value": escape_template(v)}))
        .collect();
    let cluster = cx.add(
        "awscc_sagemaker_cluster",
        &r.path,
        json!({
            "cluster_name": c.name,
            "orchestrator": {"eks": {"cluster_arn": cx.attr(&c.eks_cluster)}},
            "vpc_config": {"security_group_ids": security_groups, "subnets": subnets},
            "node_recovery": c.node_recovery,
            "instance_groups": groups,
            "tags": tags,
        }),
    );
    let mut waits = cx.earlier_stages(r.stage);
    waits.extend(role_policies);
    cx.depends_on(&cluster, &waits);
    let eks_id = c.eks_cluster.construct_id().to_owned();
    for addon in ADDONS_NEEDING_NODES {
        let addon = addr(
            "aws_eks_addon",
            &format!("{eks_id}/{}Addon", crate::app::pascal_id(addon)),
        );
        cx.depends_on(&addon, &[cluster.address()]);
    }
}
