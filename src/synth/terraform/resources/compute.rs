//! Terraform lowering of the compute kinds: `awscc_sagemaker_cluster` (hashicorp/aws has
//! none), `aws_ec2_capacity_block_reservation`, `aws_launch_template` and
//! `aws_eks_node_group`, `aws_iam_instance_profile` and `aws_instance`; inputs are variables.

use super::network::variable;
use super::Cx;
use crate::app::logical_id;
use crate::resources::{
    CapacityBlockPurchase, HyperPodCluster, Instance, InstanceProfile, LaunchTemplate, NodeGroup,
    ReservedMarket, Resource,
};
use crate::synth::terraform::module::{escape_template, hcl_string, snake, Addr};
use serde_json::{json, Map, Value};

/// The address of the resource lowered from `path` as `ty`.
fn addr(ty: &'static str, path: &str) -> Addr {
    Addr {
        ty,
        name: snake(&logical_id(path)),
    }
}

/// The cluster waits for the earlier stages (the uploaded lifecycle scripts, the Helm chart)
/// and for its execution role's policies. (The EKS add-ons whose pods need its nodes wait for
/// it through their `Resource::depends_on`.)
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
}

/// Charged in full at purchase, never refunded; `terraform destroy` only removes it from state.
pub(super) fn capacity_block_purchase(cx: Cx, r: &Resource, p: &CapacityBlockPurchase) {
    cx.add(
        "aws_ec2_capacity_block_reservation",
        &r.path,
        json!({
            "capacity_block_offering_id": escape_template(&p.offering_id),
            "instance_platform": p.instance_platform,
            "tags": {"Name": p.name_tag},
        }),
    );
}

/// Booleans of nested blocks are strings in hashicorp/aws's launch template schema.
pub(super) fn launch_template(cx: Cx, r: &Resource, t: &LaunchTemplate) {
    let m = &t.metadata;
    let v = &t.root_volume;
    let mut data = Map::new();
    data.insert("instance_type".into(), json!(t.instance_type));
    data.insert(
        "metadata_options".into(),
        json!({
            "http_endpoint": if m.endpoint_enabled { "enabled" } else { "disabled" },
            "http_tokens": if m.tokens_required { "required" } else { "optional" },
            "http_put_response_hop_limit": m.hop_limit,
        }),
    );
    data.insert(
        "block_device_mappings".into(),
        json!([{
            "device_name": v.device_name,
            "ebs": {
                "volume_size": v.size_gb,
                "volume_type": v.volume_type,
                "encrypted": v.encrypted.to_string(),
                "delete_on_termination": v.delete_on_termination.to_string(),
            },
        }]),
    );
    if let Some(target) = &t.reservation {
        let reservation = match &target.purchase {
            Some(path) => json!(addr("aws_ec2_capacity_block_reservation", path).interp("id")),
            None => variable(cx, &target.reservation),
        };
        match target.market {
            ReservedMarket::CapacityBlock => {
                data.insert(
                    "instance_market_options".into(),
                    json!({"market_type": "capacity-block"}),
                );
            }
            ReservedMarket::OnDemand => {}
        }
        data.insert(
            "capacity_reservation_specification".into(),
            json!({"capacity_reservation_target": {"capacity_reservation_id": reservation}}),
        );
    }
    if !t.network_interfaces.is_empty() {
        let interfaces: Vec<Value> = t
            .network_interfaces
            .iter()
            .map(|i| {
                let groups: Vec<Value> = i.security_groups.iter().map(|a| cx.attr(a)).collect();
                json!({
                    "network_card_index": i.network_card_index,
                    "device_index": i.device_index,
                    "interface_type": i.interface_type,
                    "security_groups": groups,
                    "delete_on_termination": i.delete_on_termination.to_string(),
                })
            })
            .collect();
        data.insert("network_interfaces".into(), Value::Array(interfaces));
    }
    if !t.security_groups.is_empty() {
        let groups: Vec<Value> = t.security_groups.iter().map(|a| cx.attr(a)).collect();
        data.insert("vpc_security_group_ids".into(), json!(groups));
    }
    if let Some(text) = &t.user_data {
        data.insert(
            "user_data".into(),
            json!(format!("${{base64encode({})}}", hcl_string(text))),
        );
    }
    // Provider default tags reach neither the template's tag specifications nor what EC2
    // launches from it: the stack's tags are written here.
    let tags = escaped_tags(&t.tags_with(cx.tags()));
    let specs: Vec<Value> = t
        .tagged
        .iter()
        .map(|ty| json!({"resource_type": ty, "tags": tags}))
        .collect();
    data.insert("tag_specifications".into(), json!(specs));
    cx.add("aws_launch_template", &r.path, Value::Object(data));
}

/// The group waits for its role's policies (nodes need them to join; the group must be
/// deleted before them), and later stages wait for the group.
pub(super) fn node_group(cx: Cx, r: &Resource, g: &NodeGroup) {
    let template = addr("aws_launch_template", &g.launch_template);
    let subnets: Vec<Value> = g.subnets.iter().map(|a| cx.attr(a)).collect();
    let mut body = Map::new();
    if let Some(name) = &g.name {
        body.insert("node_group_name".into(), json!(name));
    }
    body.insert("cluster_name".into(), cx.attr(&g.cluster));
    body.insert("node_role_arn".into(), cx.attr(&g.node_role));
    body.insert("subnet_ids".into(), json!(subnets));
    body.insert("ami_type".into(), json!(g.ami_type));
    body.insert("capacity_type".into(), json!(g.capacity_type));
    body.insert(
        "launch_template".into(),
        json!({"id": template.interp("id"), "version": template.interp("latest_version")}),
    );
    body.insert(
        "scaling_config".into(),
        json!({"min_size": g.min_size, "desired_size": g.desired_size, "max_size": g.max_size}),
    );
    if !g.labels.is_empty() {
        body.insert("labels".into(), json!(g.labels));
    }
    if !g.taints.is_empty() {
        let taints: Vec<Value> = g
            .taints
            .iter()
            .map(|t| {
                let mut m = Map::new();
                m.insert("key".into(), json!(t.key));
                if let Some(value) = &t.value {
                    m.insert("value".into(), json!(value));
                }
                m.insert("effect".into(), json!(t.effect));
                Value::Object(m)
            })
            .collect();
        body.insert("taint".into(), Value::Array(taints));
    }
    if g.desired_size_set_later {
        body.insert(
            "lifecycle".into(),
            json!({"ignore_changes": ["scaling_config[0].desired_size"]}),
        );
    }
    let group = cx.add("aws_eks_node_group", &r.path, Value::Object(body));
    let policies = cx.role_policies(&g.node_role.path);
    cx.depends_on(&group, &policies);
    cx.record_stage(r.stage, &group);
}

pub(super) fn instance_profile(cx: Cx, r: &Resource, p: &InstanceProfile) {
    let role = cx.attr(&p.role);
    cx.add("aws_iam_instance_profile", &r.path, json!({"role": role}));
}

/// The AMI comes from the public SSM parameter through an `aws_ssm_parameter` data source; a
/// newer AMI there shows as a replacement in `terraform plan` (the host keeps no state).
pub(super) fn instance(cx: Cx, r: &Resource, i: &Instance) {
    let data = cx.data_named(
        "aws_ssm_parameter",
        &snake(&logical_id(&format!("{}Image", r.path))),
        json!({"name": i.image_parameter}),
    );
    let subnet = cx.attr(&i.subnet);
    let profile = cx.attr(&i.instance_profile);
    let groups: Vec<Value> = i.security_groups.iter().map(|a| cx.attr(a)).collect();
    let m = &i.metadata;
    let v = &i.root_volume;
    let mut volume_tags = cx.tags().clone();
    volume_tags.insert("Name".to_owned(), i.name_tag.clone());
    cx.add(
        "aws_instance",
        &r.path,
        json!({
            "ami": format!("${{{data}.value}}"),
            "instance_type": i.instance_type,
            "subnet_id": subnet,
            "vpc_security_group_ids": groups,
            "iam_instance_profile": profile,
            "associate_public_ip_address": false,
            "monitoring": true,
            "ebs_optimized": true,
            "metadata_options": {
                "http_endpoint": if m.endpoint_enabled { "enabled" } else { "disabled" },
                "http_tokens": if m.tokens_required { "required" } else { "optional" },
                "http_put_response_hop_limit": m.hop_limit,
            },
            "root_block_device": {
                "volume_size": v.size_gb,
                "volume_type": v.volume_type,
                "encrypted": v.encrypted,
                "delete_on_termination": v.delete_on_termination,
            },
            "tags": {"Name": i.name_tag},
            // Default tags reach the instance, not its volumes: set when they are created.
            "volume_tags": escaped_tags(&volume_tags),
        }),
    );
}

/// Tags as a Terraform map, `${` and `%{` in keys and values taken literally.
fn escaped_tags(tags: &crate::app::Tags) -> Value {
    Value::Object(
        tags.iter()
            .map(|(k, v)| (escape_template(k), json!(escape_template(v))))
            .collect(),
    )
}
