//! CloudFormation lowering of the EKS kinds.

use super::{e, s, Cx};
use crate::resources::{
    cluster_access_policy_arn, Access, AccessEntry, EksAddon, EksCluster, OidcProvider, Resource,
};
use crate::synth::cloudformation::expr::Val;
use crate::synth::cloudformation::l1::*;

pub(super) fn cluster(cx: Cx, r: &Resource, c: &EksCluster) {
    let role = cx.attr(r.stage, &c.role);
    let key = cx.attr(r.stage, &c.secrets_key);
    let subnets = c.subnets.iter().map(|id| e(cx.attr(r.stage, id))).collect();
    let groups: Vec<Val<String>> = c
        .security_groups
        .iter()
        .map(|id| e(cx.attr(r.stage, id)))
        .collect();
    cx.add(
        r.stage,
        &r.path,
        &eks_cluster::Cluster {
            name: Some(s(&c.name)),
            version: Some(s(&c.version)),
            role_arn: e(role),
            resources_vpc_config: eks_cluster::ResourcesVpcConfig {
                subnet_ids: subnets,
                security_group_ids: (!groups.is_empty()).then_some(groups),
                endpoint_private_access: Some(true.into()),
                endpoint_public_access: Some(c.public_access_cidrs.is_some().into()),
                public_access_cidrs: c
                    .public_access_cidrs
                    .as_ref()
                    .map(|cidrs| cidrs.iter().map(s).collect()),
                ..Default::default()
            },
            access_config: Some(eks_cluster::AccessConfig {
                authentication_mode: Some(s(&c.authentication_mode)),
                bootstrap_cluster_creator_admin_permissions: Some(true.into()),
            }),
            logging: Some(eks_cluster::Logging {
                cluster_logging: Some(eks_cluster::ClusterLogging {
                    enabled_types: Some(
                        c.log_types
                            .iter()
                            .map(|t| eks_cluster::LoggingTypeConfig { r#type: Some(s(t)) })
                            .collect(),
                    ),
                }),
            }),
            encryption_config: Some(vec![eks_cluster::EncryptionConfig {
                provider: Some(eks_cluster::Provider {
                    key_arn: Some(e(key)),
                }),
                resources: Some(vec![s("secrets")]),
            }]),
            ..Default::default()
        },
    );
}

pub(super) fn oidc_provider(cx: Cx, r: &Resource, p: &OidcProvider) {
    let url = cx.attr(r.stage, &p.issuer_url);
    cx.add(
        r.stage,
        &r.path,
        &iam_oidc_provider::OidcProvider {
            url: Some(e(url)),
            client_id_list: Some(p.client_ids.iter().map(s).collect()),
            ..Default::default()
        },
    );
}

/// `nodes` is not spelled here: the templates have never made add-ons wait for the HyperPod
/// cluster (Terraform's `aws_eks_addon` waits for the add-on to become active, hence its
/// dependency there).
pub(super) fn addon(cx: Cx, r: &Resource, a: &EksAddon) {
    let cluster_name = cx.attr(r.stage, &a.cluster);
    let role = a
        .service_account_role
        .as_ref()
        .map(|role| e(cx.attr(r.stage, role)));
    let configuration = a
        .configuration
        .as_ref()
        .map(|c| e(cx.text(r.stage, &c.json_text())));
    cx.add(
        r.stage,
        &r.path,
        &eks_addon::Addon {
            addon_name: s(&a.name),
            addon_version: a.version.as_ref().map(s),
            cluster_name: e(cluster_name),
            resolve_conflicts: Some(s(EksAddon::RESOLVE_CONFLICTS)),
            service_account_role_arn: role,
            configuration_values: configuration,
            ..Default::default()
        },
    );
}

pub(super) fn access_entry(cx: Cx, r: &Resource, a: &AccessEntry) {
    let cluster_name = cx.attr(r.stage, &a.cluster);
    let principal = cx.text(r.stage, &a.principal);
    let access_policies = match &a.access {
        Access::ClusterPolicy(name) => {
            let arn = cx.text(r.stage, &cluster_access_policy_arn(name));
            let policy = eks_access_entry::AccessPolicy {
                policy_arn: e(arn),
                access_scope: eks_access_entry::AccessScope {
                    r#type: s("cluster"),
                    namespaces: None,
                },
            };
            Some(vec![policy])
        }
        Access::LinuxNodes => None,
    };
    cx.add(
        r.stage,
        &r.path,
        &eks_access_entry::AccessEntry {
            cluster_name: e(cluster_name),
            principal_arn: e(principal),
            access_policies,
            r#type: a.access.entry_type().map(s),
            ..Default::default()
        },
    );
}
