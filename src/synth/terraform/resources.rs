//! Lowering of the resource layer to Terraform: one function per resource kind, chosen by an
//! exhaustive match. Where Terraform models part of a resource as a resource of its own (a
//! bucket's encryption, a group's egress rule), that resource is named after its owner.

mod eks;

use super::lower::{bucket, managed_policy, name_tag};
use super::module::{snake, RootModule};
use crate::app::logical_id;
use crate::resources::Checked;
use crate::resources::{
    Bucket, DataRepositoryAssociation, Direction, EcrPullThroughCacheRule, KmsKey,
    LustreFileSystem, Peer, PodIdentityAssociation, Resource, ResourceKind, Role, RolePolicy,
    SecurityGroup, SecurityGroupRule, StackOutput,
};
use serde_json::{json, Map, Value};

mod compute;
mod network;
mod operations;

type Cx<'a, 'b> = &'a mut RootModule<'b>;

/// A checked property as the Terraform provider names it (dotted in the resource's block, `*`
/// for any list item or block).
pub(crate) fn checked_attribute(c: Checked) -> &'static str {
    match c {
        Checked::CapacityType => "capacity_type",
        Checked::InstanceTypes => "instance_types",
        Checked::NodeSubnets => "subnet_ids",
        Checked::Scaling => "scaling_config",
        Checked::MarketOptions => "instance_market_options",
        Checked::CapacityReservation => "capacity_reservation_specification",
        Checked::InstanceType => "instance_type",
        Checked::GroupInstanceType => "instance_groups.*.instance_type",
        Checked::GroupInstanceCount => "instance_groups.*.instance_count",
        Checked::GroupTrainingPlan => "instance_groups.*.training_plan_arn",
        Checked::ClusterSubnets => "vpc_config.subnets",
        Checked::ZoneId => "availability_zone_id",
        Checked::Zone => "availability_zone",
        Checked::CidrBlock => "cidr_block",
        Checked::ClusterName => "name",
        Checked::ClusterVersion => "version",
        Checked::PrincipalArn => "principal_arn",
        Checked::Retention => "retention_in_days",
    }
}

pub(crate) fn lower(cx: Cx, r: &Resource) {
    lower_kind(cx, r);
    // What the resource waits for, beyond its references: on the resource at its path.
    if !r.depends_on.is_empty() {
        if let Some(addr) = cx.address_of(&r.path) {
            let on: Vec<String> = r
                .depends_on
                .iter()
                .filter_map(|p| cx.address_of(p))
                .collect();
            cx.depends_on_address(&addr, &on);
        }
    }
    let acknowledgements = r.acknowledgements();
    let skips: Vec<(&str, &str)> = acknowledgements
        .iter()
        .flat_map(|a| a.rule.checkov.iter().map(|id| (*id, a.reason.as_str())))
        .collect();
    if !skips.is_empty() {
        if let Some(addr) = cx.address_of(&r.path) {
            cx.acknowledge_address(&addr, &skips);
        }
    }
}

fn lower_kind(cx: Cx, r: &Resource) {
    match &r.kind {
        ResourceKind::SecurityGroup(g) => security_group(cx, r, g),
        ResourceKind::SecurityGroupRule(rule) => security_group_rule(cx, r, rule),
        ResourceKind::Bucket(b) => secure_bucket(cx, r, b),
        ResourceKind::StackOutput(o) => output(cx, o),
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
        // Read by the Kubernetes stage; its producer's phase outputs it (`root_modules`).
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

/// A raw resource's Terraform form, its references lowered like every other.
fn raw_resource(cx: Cx, r: &Resource, raw: &crate::resources::RawResource) {
    if let Some((ty, body)) = &raw.terraform {
        let body = raw_value(cx, body);
        cx.add_raw(ty, &r.path, body);
    }
}

fn raw_value(cx: Cx, v: &crate::resources::RawValue) -> Value {
    use crate::resources::RawValue;
    match v {
        RawValue::Json(v) => v.clone(),
        RawValue::Ref(a) => cx.attr(a),
        RawValue::Text(t) => cx.text(t),
        RawValue::List(items) => items.iter().map(|i| raw_value(cx, i)).collect(),
        RawValue::Object(fields) => fields
            .iter()
            .map(|(k, v)| (k.clone(), raw_value(cx, v)))
            .collect(),
    }
}

/// The rule, its credential secret's ARN a variable.
fn role_policy(cx: Cx, r: &Resource, p: &RolePolicy) {
    let policy = cx.policy(&snake(&logical_id(&r.path)), &p.document);
    let role = cx.attr(&p.role);
    cx.add(
        "aws_iam_role_policy",
        &r.path,
        json!({"name": p.name, "role": role, "policy": policy}),
    );
}

fn pull_through_cache_rule(cx: Cx, r: &Resource, rule: &EcrPullThroughCacheRule) {
    let mut body = Map::new();
    body.insert(
        "ecr_repository_prefix".into(),
        json!(rule.repository_prefix),
    );
    body.insert(
        "upstream_registry_url".into(),
        json!(rule.upstream_registry_url),
    );
    if let Some(input) = &rule.credential {
        body.insert("credential_arn".into(), network::variable(cx, input));
    }
    cx.add(
        "aws_ecr_pull_through_cache_rule",
        &r.path,
        Value::Object(body),
    );
}

/// The parent path of `path` (`Sg/Group` -> `Sg`).
fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(p, _)| p)
}

fn security_group(cx: Cx, r: &Resource, g: &SecurityGroup) {
    let vpc = cx.attr(&g.vpc);
    let group = cx.add(
        "aws_security_group",
        &r.path,
        json!({
            "description": g.description,
            "vpc_id": vpc,
            "tags": name_tag(g.name_tag.clone()),
        }),
    );
    // Terraform removes the default allow-all egress rule of a new group, so each rule the
    // group states is a resource.
    for rule in &g.egress {
        let mut body = json!({
            "security_group_id": group.interp("id"),
            "ip_protocol": rule.protocol.0,
            "cidr_ipv4": rule.cidr,
            "description": rule.description,
        });
        if let (Some((from, to)), Value::Object(m)) = (rule.ports, &mut body) {
            m.insert("from_port".into(), json!(from));
            m.insert("to_port".into(), json!(to));
        }
        cx.add(
            "aws_vpc_security_group_egress_rule",
            &format!("{}/{}", parent(&r.path), rule.id),
            body,
        );
    }
}

fn security_group_rule(cx: Cx, r: &Resource, rule: &SecurityGroupRule) {
    let mut body = Map::new();
    body.insert("security_group_id".into(), cx.attr(&rule.group));
    body.insert("ip_protocol".into(), json!(rule.protocol.0));
    if let Some((from, to)) = rule.ports {
        body.insert("from_port".into(), json!(from));
        body.insert("to_port".into(), json!(to));
    }
    let Peer::Group(peer) = &rule.peer;
    body.insert("referenced_security_group_id".into(), cx.attr(peer));
    body.insert("description".into(), json!(rule.description));
    let ty = match rule.direction {
        Direction::Ingress => "aws_vpc_security_group_ingress_rule",
        Direction::Egress => "aws_vpc_security_group_egress_rule",
    };
    cx.add(ty, &r.path, Value::Object(body));
}

fn secure_bucket(cx: Cx, r: &Resource, b: &Bucket) {
    bucket(cx, &r.path, b);
}

fn output(cx: Cx, o: &StackOutput) {
    let value = cx.attr(&o.value);
    cx.output(&snake(&o.value.output_key()), &o.description, value);
}

/// `aws_iam_role` with the trust policy, one `aws_iam_role_policy` per inline policy and one
/// `aws_iam_role_policy_attachment` per managed policy (the role's own
/// `inline_policy`/`managed_policy_arns` arguments are deprecated in hashicorp/aws 6). The
/// policies' addresses are recorded: a resource that needs the role's permissions when it is
/// created waits for them (`RootModule::role_policies`).
fn role_resource(cx: Cx, r: &Resource, role: &Role) {
    let base = snake(&logical_id(&r.path));
    let trust = cx.policy(&format!("{base}_trust"), &role.trust);
    let mut body = Map::new();
    if let Some(name) = &role.name {
        body.insert("name".into(), json!(name));
    }
    body.insert("description".into(), json!(role.description));
    body.insert("assume_role_policy".into(), trust);
    let addr = cx.add("aws_iam_role", &r.path, Value::Object(body));
    let mut policies = Vec::new();
    for (name, doc) in &role.inline {
        let local = format!("{base}_{}", snake(name));
        let policy = cx.policy(&local, doc);
        let p = cx.add_named(
            "aws_iam_role_policy",
            local,
            &r.path,
            json!({"name": name, "role": addr.interp("name"), "policy": policy}),
        );
        policies.push(p.address());
    }
    for m in &role.managed {
        let arn = managed_policy(cx, m);
        let a = cx.add_named(
            "aws_iam_role_policy_attachment",
            format!("{base}_{}", snake(m)),
            &r.path,
            json!({"role": addr.interp("name"), "policy_arn": arn}),
        );
        policies.push(a.address());
    }
    cx.record_role_policies(&r.path, policies);
}

fn kms(cx: Cx, r: &Resource, key: &KmsKey) {
    let local = format!("{}_policy", snake(&logical_id(&r.path)));
    let policy = cx.policy(&local, &key.policy);
    cx.add(
        "aws_kms_key",
        &r.path,
        json!({"description": key.description, "enable_key_rotation": true, "policy": policy}),
    );
}

/// The association waits for the role's policies, and later stages (Helm releases) wait for
/// the association.
fn pod_identity_association(cx: Cx, r: &Resource, a: &PodIdentityAssociation) {
    let body = json!({
        "cluster_name": cx.attr(&a.cluster),
        "namespace": a.namespace,
        "service_account": a.service_account,
        "role_arn": cx.attr(&a.role),
    });
    let association = cx.add("aws_eks_pod_identity_association", &r.path, body);
    let policies = cx.role_policies(&a.role.path);
    cx.depends_on(&association, &policies);
    cx.record_stage(r.stage, &association);
}

/// `aws_fsx_lustre_file_system`: the file system type is the resource type's.
fn lustre_file_system(cx: Cx, r: &Resource, f: &LustreFileSystem) {
    let mut body = Map::new();
    body.insert("file_system_type_version".into(), json!(f.version));
    body.insert("deployment_type".into(), json!(f.deployment.as_str()));
    body.insert("storage_type".into(), json!(f.deployment.storage_type()));
    body.insert("storage_capacity".into(), json!(f.storage_gib));
    body.insert(
        "per_unit_storage_throughput".into(),
        json!(f.throughput_per_tib),
    );
    body.insert(
        "data_compression_type".into(),
        json!(f.compression.as_str()),
    );
    body.insert("subnet_ids".into(), json!([cx.attr(&f.subnet)]));
    body.insert(
        "security_group_ids".into(),
        json!([cx.attr(&f.security_group)]),
    );
    if let Some(key) = &f.kms_key {
        body.insert("kms_key_id".into(), cx.attr(key));
    }
    body.insert("log_configuration".into(), json!({"level": f.log_level}));
    body.insert("tags".into(), name_tag(f.name_tag.clone()));
    cx.add("aws_fsx_lustre_file_system", &r.path, Value::Object(body));
}

fn data_repository_association(cx: Cx, r: &Resource, a: &DataRepositoryAssociation) {
    let events: Vec<&str> = a.auto_import.iter().map(|ev| ev.as_str()).collect();
    let body = json!({
        "file_system_id": cx.attr(&a.file_system),
        "file_system_path": a.file_system_path,
        "data_repository_path": cx.text(&a.data_repository_path),
        "batch_import_meta_data_on_create": a.import_existing,
        "s3": {"auto_import_policy": {"events": events}},
    });
    cx.add("aws_fsx_data_repository_association", &r.path, body);
}
