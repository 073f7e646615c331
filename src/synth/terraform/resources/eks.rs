//! Terraform lowering of the EKS kinds.

use super::Cx;
use crate::app::logical_id;
use crate::resources::{
    cluster_access_policy_arn, Access, AccessEntry, AddonConfiguration, EksAddon, EksCluster,
    OidcProvider, Resource,
};
use crate::synth::terraform::module::{escape_template, snake};
use serde_json::{json, Map, Value};

/// The cluster waits for its role's policies: the control plane needs them while it is
/// created and deleted.
pub(super) fn cluster(cx: Cx, r: &Resource, c: &EksCluster) {
    let subnets: Vec<Value> = c.subnets.iter().map(|id| cx.attr(id)).collect();
    let groups: Vec<Value> = c.security_groups.iter().map(|id| cx.attr(id)).collect();
    let mut vpc_config = Map::new();
    vpc_config.insert("subnet_ids".into(), json!(subnets));
    if !groups.is_empty() {
        vpc_config.insert("security_group_ids".into(), json!(groups));
    }
    vpc_config.insert("endpoint_private_access".into(), json!(true));
    vpc_config.insert(
        "endpoint_public_access".into(),
        json!(c.public_access_cidrs.is_some()),
    );
    if let Some(cidrs) = &c.public_access_cidrs {
        vpc_config.insert("public_access_cidrs".into(), json!(cidrs));
    }
    let cluster = cx.add_eks_cluster(
        "aws_eks_cluster",
        &r.path,
        json!({
            "name": c.name,
            "version": c.version,
            "role_arn": cx.attr(&c.role),
            "vpc_config": vpc_config,
            "access_config": {
                "authentication_mode": c.authentication_mode,
                "bootstrap_cluster_creator_admin_permissions": true,
            },
            "enabled_cluster_log_types": c.log_types,
            "encryption_config": {
                "provider": {"key_arn": cx.attr(&c.secrets_key)},
                "resources": ["secrets"],
            },
        }),
    );
    let policies = cx.role_policies(&c.role.path);
    cx.depends_on(&cluster, &policies);
}

pub(super) fn oidc_provider(cx: Cx, r: &Resource, p: &OidcProvider) {
    cx.add(
        "aws_iam_openid_connect_provider",
        &r.path,
        json!({
            "url": cx.attr(&p.issuer_url),
            "client_id_list": p.client_ids,
        }),
    );
}

/// The configuration is a local object of references, encoded when applied. `aws_eks_addon`
/// waits for the add-on to become active.
pub(super) fn addon(cx: Cx, r: &Resource, a: &EksAddon) {
    let mut body = Map::new();
    body.insert("cluster_name".into(), cx.attr(&a.cluster));
    body.insert("addon_name".into(), json!(a.name));
    if let Some(v) = &a.version {
        body.insert("addon_version".into(), json!(v));
    }
    body.insert(
        "resolve_conflicts_on_create".into(),
        json!(EksAddon::RESOLVE_CONFLICTS),
    );
    body.insert(
        "resolve_conflicts_on_update".into(),
        json!(EksAddon::RESOLVE_CONFLICTS),
    );
    if let Some(role) = &a.service_account_role {
        body.insert("service_account_role_arn".into(), cx.attr(role));
    }
    if let Some(c) = &a.configuration {
        let local = format!("{}_configuration", snake(&logical_id(&r.path)));
        let value = configuration(cx, c);
        body.insert("configuration_values".into(), cx.local(&local, value));
    }
    // What it waits for (the nodes its pods need) is `Resource::depends_on`, applied by
    // `resources::lower` after this.
    cx.add("aws_eks_addon", &r.path, Value::Object(body));
}

fn configuration(cx: Cx, c: &AddonConfiguration) -> Value {
    match c {
        AddonConfiguration::Bool(b) => json!(b),
        AddonConfiguration::Str(s) => json!(escape_template(s)),
        AddonConfiguration::Ref(r) => cx.attr(r),
        AddonConfiguration::Object(entries) => Value::Object(
            entries
                .iter()
                .map(|(k, v)| (escape_template(k), configuration(cx, v)))
                .collect(),
        ),
    }
}

/// A cluster policy is an `aws_eks_access_policy_association` of its own. Nodes join through a
/// node entry, so later stages (Helm releases scheduling onto them) wait for it.
pub(super) fn access_entry(cx: Cx, r: &Resource, a: &AccessEntry) {
    let mut body = Map::new();
    body.insert("cluster_name".into(), cx.attr(&a.cluster));
    body.insert("principal_arn".into(), cx.text(&a.principal));
    if let Some(ty) = a.access.entry_type() {
        body.insert("type".into(), json!(ty));
    }
    let entry = cx.add("aws_eks_access_entry", &r.path, Value::Object(body));
    match &a.access {
        Access::ClusterPolicy(name) => {
            let policy_arn = cx.text(&cluster_access_policy_arn(name));
            cx.add_named(
                "aws_eks_access_policy_association",
                format!("{}_policy", entry.name),
                &r.path,
                json!({
                    "cluster_name": cx.attr(&a.cluster),
                    "principal_arn": entry.interp("principal_arn"),
                    "policy_arn": policy_arn,
                    "access_scope": {"type": "cluster"},
                }),
            );
        }
        Access::LinuxNodes => cx.record_stage(r.stage, &entry),
    }
}
