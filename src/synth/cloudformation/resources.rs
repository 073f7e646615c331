//! Lowering of the resource layer to CloudFormation: one function per resource kind, chosen by
//! an exhaustive match. CloudFormation's own spelling lives here (inline egress rules, a
//! bucket's policy as a resource of its own, outputs).

mod eks;

use super::expr::{Expr, Val};
use super::l1::*;
use super::l1_support::TagStyle;
use super::lower::{bucket, managed_policy, name_tag};
use super::template::StackTemplates;
use crate::app::{logical_id, StageId};
use crate::resources::{
    Bucket, Checked, DataRepositoryAssociation, Direction, EcrPullThroughCacheRule, KmsKey,
    LustreFileSystem, Peer, PodIdentityAssociation, RawResource, RawTags, RawValue, Resource,
    ResourceKind, Role, RolePolicy, SecurityGroup, SecurityGroupRule, StackOutput,
};
use std::collections::BTreeMap;

mod compute;
mod network;
mod operations;

type Cx<'a, 'b> = &'a mut StackTemplates<'b>;

fn s(v: impl Into<String>) -> Val<String> {
    Val::Lit(v.into())
}

fn e<T>(expr: Expr) -> Val<T> {
    Val::Expr(expr)
}

/// Lowers one resource into its stage's template, then records its dependencies and
/// suppressions on the template resource lowered at its path. `stage_of` gives every
/// resource's stage: a dependency in an earlier stage is kept by the stage order (an earlier
/// stack), so only those in the same template become `DependsOn`.
pub(crate) fn lower(cx: Cx, r: &Resource, stage_of: &BTreeMap<&str, StageId>) {
    lower_kind(cx, r);
    meta(cx, r, stage_of);
    let checked: Vec<&'static str> = r
        .kind
        .checked()
        .iter()
        .map(|c| checked_property(*c))
        .collect();
    if !checked.is_empty() {
        if let Some(t) = cx.resource_at(r.stage, &r.path) {
            t.validated = checked;
        }
    }
}

/// A checked property as CloudFormation names it (dotted below `Properties`, `*` for any
/// list item).
pub(crate) fn checked_property(c: Checked) -> &'static str {
    match c {
        Checked::CapacityType => "CapacityType",
        Checked::InstanceTypes => "InstanceTypes",
        Checked::NodeSubnets => "Subnets",
        Checked::Scaling => "ScalingConfig",
        Checked::MarketOptions => "LaunchTemplateData.InstanceMarketOptions",
        Checked::CapacityReservation => "LaunchTemplateData.CapacityReservationSpecification",
        Checked::InstanceType => "LaunchTemplateData.InstanceType",
        Checked::GroupInstanceType => "InstanceGroups.*.InstanceType",
        Checked::GroupInstanceCount => "InstanceGroups.*.InstanceCount",
        Checked::GroupTrainingPlan => "InstanceGroups.*.TrainingPlanArn",
        Checked::ClusterSubnets => "VpcConfig.Subnets",
        Checked::ZoneId => "AvailabilityZoneId",
        Checked::Zone => "AvailabilityZone",
        Checked::CidrBlock => "CidrBlock",
        Checked::ClusterName => "Name",
        Checked::ClusterVersion => "Version",
        Checked::PrincipalArn => "PrincipalArn",
        Checked::Retention => "RetentionInDays",
    }
}

fn lower_kind(cx: Cx, r: &Resource) {
    match &r.kind {
        ResourceKind::SecurityGroup(g) => security_group(cx, r, g),
        ResourceKind::SecurityGroupRule(rule) => security_group_rule(cx, r, rule),
        ResourceKind::Bucket(b) => secure_bucket(cx, r, b),
        ResourceKind::StackOutput(o) => output(cx, r, o),
        ResourceKind::Role(role) => role_resource(cx, r, role),
        ResourceKind::KmsKey(key) => kms(cx, r, key),
        ResourceKind::PodIdentityAssociation(a) => pod_identity_association(cx, r, a),
        ResourceKind::Vpc(v) => network::vpc(cx, r, v),
        ResourceKind::DefaultSecurityGroup(g) => network::default_security_group(cx, r, g),
        ResourceKind::InternetGateway(g) => network::internet_gateway(cx, r, g),
        ResourceKind::VpcCidrBlock(b) => network::vpc_cidr_block(cx, r, b),
        ResourceKind::Subnet(sn) => network::subnet(cx, r, sn),
        ResourceKind::Eip(a) => network::eip(cx, r, a),
        ResourceKind::NatGateway(n) => network::nat_gateway(cx, r, n),
        ResourceKind::RouteTable(t) => network::route_table(cx, r, t),
        ResourceKind::Route(route) => network::route(cx, r, route),
        ResourceKind::SubnetRouteTableAssociation(a) => {
            network::subnet_route_table_association(cx, r, a)
        }
        ResourceKind::GatewayEndpoint(g) => network::gateway_endpoint(cx, r, g),
        ResourceKind::LogGroup(g) => network::log_group(cx, r, g),
        ResourceKind::FlowLog(f) => network::flow_log(cx, r, f),
        // Applied with kubectl from the Kubernetes stage's YAML.
        ResourceKind::KubeObject(_) => {}
        // Read by the Kubernetes stage; its producer's output is added by `templates`.
        ResourceKind::DeployValue(_) => {}
        // Carried out by the deployment paths from the manifest.
        ResourceKind::Step(_) => {}
        ResourceKind::EksCluster(c) => eks::cluster(cx, r, c),
        ResourceKind::OidcProvider(p) => eks::oidc_provider(cx, r, p),
        ResourceKind::EksAddon(a) => eks::addon(cx, r, a),
        ResourceKind::AccessEntry(a) => eks::access_entry(cx, r, a),
        ResourceKind::HyperPodCluster(c) => compute::hyperpod_cluster(cx, r, c),
        ResourceKind::CapacityBlockPurchase(p) => compute::capacity_block_purchase(cx, r, p),
        ResourceKind::LaunchTemplate(t) => compute::launch_template(cx, r, t),
        ResourceKind::NodeGroup(g) => compute::node_group(cx, r, g),
        ResourceKind::InstanceProfile(p) => compute::instance_profile(cx, r, p),
        ResourceKind::Instance(i) => compute::instance(cx, r, i),
        ResourceKind::LustreFileSystem(f) => lustre_file_system(cx, r, f),
        ResourceKind::DataRepositoryAssociation(a) => data_repository_association(cx, r, a),
        ResourceKind::EcrPullThroughCacheRule(rule) => pull_through_cache_rule(cx, r, rule),
        ResourceKind::RolePolicy(p) => role_policy(cx, r, p),
        ResourceKind::SnsTopic(t) => operations::topic(cx, r, t),
        ResourceKind::SnsTopicPolicy(p) => operations::topic_policy(cx, r, p),
        ResourceKind::PrometheusWorkspace(w) => operations::prometheus_workspace(cx, r, w),
        ResourceKind::PrometheusRuleGroups(g) => operations::prometheus_rule_groups(cx, r, g),
        ResourceKind::PrometheusScraper(p) => operations::prometheus_scraper(cx, r, p),
        ResourceKind::MetricAlarm(a) => operations::alarm(cx, r, a),
        ResourceKind::Dashboard(d) => operations::dashboard(cx, r, d),
        ResourceKind::EventRule(rule) => operations::rule(cx, r, rule),
        ResourceKind::Schedule(x) => operations::schedule(cx, r, x),
        // Exists already: references to it read the values given.
        ResourceKind::Existing(_) => {}
        ResourceKind::RawResource(raw) => raw_resource(cx, r, raw),
    }
}

/// A raw resource's CloudFormation form, its references lowered like every other.
fn raw_resource(cx: Cx, r: &Resource, raw: &RawResource) {
    if let Some((type_name, properties)) = &raw.cloudformation {
        let properties = raw_value(cx, r.stage, properties);
        let tags = match raw.cloudformation_tags {
            RawTags::KeyValueList => TagStyle::KeyValueList,
            RawTags::Map => TagStyle::Map,
            RawTags::None => TagStyle::NotTaggable,
        };
        cx.add_raw(r.stage, &r.path, type_name, tags, properties);
    }
}

fn raw_value(cx: Cx, stage: StageId, v: &RawValue) -> serde_json::Value {
    match v {
        RawValue::Json(v) => v.clone(),
        RawValue::Ref(a) => serde_json::to_value(cx.attr(stage, a)).unwrap_or_default(),
        RawValue::Text(t) => serde_json::to_value(cx.text(stage, t)).unwrap_or_default(),
        RawValue::List(items) => items.iter().map(|i| raw_value(cx, stage, i)).collect(),
        RawValue::Object(fields) => fields
            .iter()
            .map(|(k, v)| (k.clone(), raw_value(cx, stage, v)))
            .collect(),
    }
}

/// The rule, its credential secret's ARN a template parameter.
fn role_policy(cx: Cx, r: &Resource, p: &RolePolicy) {
    let role = cx.attr(r.stage, &p.role);
    let document = cx.policy(r.stage, &p.document);
    cx.add(
        r.stage,
        &r.path,
        &iam_policy::Policy {
            policy_name: s(&p.name),
            policy_document: document,
            roles: Some(vec![e(role)]),
            ..Default::default()
        },
    );
}

fn pull_through_cache_rule(cx: Cx, r: &Resource, rule: &EcrPullThroughCacheRule) {
    let credential = rule
        .credential
        .as_ref()
        .map(|input| e(network::parameter(cx, r.stage, input)));
    cx.add(
        r.stage,
        &r.path,
        &ecr_pull_through_cache_rule::PullThroughCacheRule {
            ecr_repository_prefix: Some(s(&rule.repository_prefix)),
            upstream_registry_url: Some(s(&rule.upstream_registry_url)),
            credential_arn: credential,
            ..Default::default()
        },
    );
}

/// Records the resource's dependencies and suppressions on the template resource at its path
/// (for kinds lowered to several resources, the one named after the kind's own path).
fn meta(cx: Cx, r: &Resource, stage_of: &BTreeMap<&str, StageId>) {
    let acknowledgements = r.acknowledgements();
    if r.depends_on.is_empty() && acknowledgements.is_empty() {
        return;
    }
    let ids: Vec<String> = r
        .depends_on
        .iter()
        .filter(|p| stage_of.get(p.as_str()) == Some(&r.stage))
        .map(|p| logical_id(p))
        .collect();
    if let Some(t) = cx.resource_at(r.stage, &r.path) {
        t.depends_on.extend(ids);
        t.acknowledgements.extend(acknowledgements);
    }
}

fn security_group(cx: Cx, r: &Resource, g: &SecurityGroup) {
    let vpc = cx.attr(r.stage, &g.vpc);
    let egress = g
        .egress
        .iter()
        .map(|rule| ec2_security_group::Egress {
            cidr_ip: Some(s(&rule.cidr)),
            ip_protocol: s(&rule.protocol.0),
            from_port: rule.ports.map(|(from, _)| i64::from(from).into()),
            to_port: rule.ports.map(|(_, to)| i64::from(to).into()),
            description: Some(s(&rule.description)),
            ..Default::default()
        })
        .collect();
    cx.add(
        r.stage,
        &r.path,
        &ec2_security_group::SecurityGroup {
            group_description: s(&g.description),
            vpc_id: Some(e(vpc)),
            security_group_egress: Some(egress),
            tags: Some(name_tag(g.name_tag.clone())),
            ..Default::default()
        },
    );
}

fn security_group_rule(cx: Cx, r: &Resource, rule: &SecurityGroupRule) {
    let group = cx.attr(r.stage, &rule.group);
    let Peer::Group(peer) = &rule.peer;
    let peer = cx.attr(r.stage, peer);
    let (from_port, to_port) = match rule.ports {
        Some((from, to)) => (Some(i64::from(from).into()), Some(i64::from(to).into())),
        None => (None, None),
    };
    match rule.direction {
        Direction::Ingress => cx.add(
            r.stage,
            &r.path,
            &ec2_security_group_ingress::SecurityGroupIngress {
                group_id: Some(e(group)),
                ip_protocol: s(&rule.protocol.0),
                from_port,
                to_port,
                source_security_group_id: Some(e(peer)),
                description: Some(s(&rule.description)),
                ..Default::default()
            },
        ),
        Direction::Egress => cx.add(
            r.stage,
            &r.path,
            &ec2_security_group_egress::SecurityGroupEgress {
                group_id: e(group),
                ip_protocol: s(&rule.protocol.0),
                from_port,
                to_port,
                destination_security_group_id: Some(e(peer)),
                description: Some(s(&rule.description)),
                ..Default::default()
            },
        ),
    };
}

fn secure_bucket(cx: Cx, r: &Resource, b: &Bucket) {
    bucket(cx, r.stage, &r.path, b);
}

fn output(cx: Cx, r: &Resource, o: &StackOutput) {
    let value = cx.attr(r.stage, &o.value);
    cx.output(r.stage, &o.value.output_key(), &o.description, value);
}

fn role_resource(cx: Cx, r: &Resource, role: &Role) {
    let trust = cx.policy(r.stage, &role.trust);
    let policies = (!role.inline.is_empty()).then(|| {
        role.inline
            .iter()
            .map(|(name, doc)| iam_role::Policy {
                policy_name: s(name),
                policy_document: cx.policy(r.stage, doc),
            })
            .collect()
    });
    cx.add(
        r.stage,
        &r.path,
        &iam_role::Role {
            assume_role_policy_document: trust,
            description: Some(s(&role.description)),
            managed_policy_arns: (!role.managed.is_empty())
                .then(|| role.managed.iter().map(|m| managed_policy(m)).collect()),
            policies,
            role_name: role.name.as_ref().map(s),
            ..Default::default()
        },
    );
}

fn kms(cx: Cx, r: &Resource, key: &KmsKey) {
    let policy = cx.policy(r.stage, &key.policy);
    cx.add(
        r.stage,
        &r.path,
        &kms_key::Key {
            description: Some(s(&key.description)),
            enable_key_rotation: Some(true.into()),
            key_policy: Some(policy),
            ..Default::default()
        },
    );
}

fn pod_identity_association(cx: Cx, r: &Resource, a: &PodIdentityAssociation) {
    let cluster_name = cx.attr(r.stage, &a.cluster);
    let role = cx.attr(r.stage, &a.role);
    cx.add(
        r.stage,
        &r.path,
        &eks_pod_identity_association::PodIdentityAssociation {
            cluster_name: e(cluster_name),
            namespace: s(&a.namespace),
            service_account: s(&a.service_account),
            role_arn: e(role),
            ..Default::default()
        },
    );
}

fn lustre_file_system(cx: Cx, r: &Resource, f: &LustreFileSystem) {
    let subnet = cx.attr(r.stage, &f.subnet);
    let group = cx.attr(r.stage, &f.security_group);
    let kms_key_id = f.kms_key.as_ref().map(|k| e(cx.attr(r.stage, k)));
    cx.add(
        r.stage,
        &r.path,
        &fsx_file_system::FileSystem {
            file_system_type: s("LUSTRE"),
            file_system_type_version: Some(s(&f.version)),
            storage_type: Some(s(f.deployment.storage_type())),
            storage_capacity: Some(i64::from(f.storage_gib).into()),
            subnet_ids: vec![e(subnet)],
            security_group_ids: Some(vec![e(group)]),
            kms_key_id,
            lustre_configuration: Some(fsx_file_system::LustreConfiguration {
                deployment_type: Some(s(f.deployment.as_str())),
                per_unit_storage_throughput: Some(i64::from(f.throughput_per_tib).into()),
                data_compression_type: Some(s(f.compression.as_str())),
                log_configuration: Some(fsx_file_system::LogConfiguration {
                    level: s(&f.log_level),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            tags: Some(vec![fsx_file_system::Tag {
                key: s("Name"),
                value: s(&f.name_tag),
            }]),
            ..Default::default()
        },
    );
}

fn data_repository_association(cx: Cx, r: &Resource, a: &DataRepositoryAssociation) {
    let file_system = cx.attr(r.stage, &a.file_system);
    let path = cx.text(r.stage, &a.data_repository_path);
    let events = a.auto_import.iter().map(|ev| s(ev.as_str())).collect();
    cx.add(
        r.stage,
        &r.path,
        &fsx_data_repository_association::DataRepositoryAssociation {
            file_system_id: e(file_system),
            file_system_path: s(&a.file_system_path),
            data_repository_path: e(path),
            batch_import_meta_data_on_create: Some(a.import_existing.into()),
            s3: Some(fsx_data_repository_association::S3 {
                auto_import_policy: Some(fsx_data_repository_association::AutoImportPolicy {
                    events,
                }),
                ..Default::default()
            }),
            ..Default::default()
        },
    );
}
