//! The VPC kinds in Terraform. An internet gateway is attached through its own `vpc_id`;
//! Elastic IPs and NAT gateways wait for it with `depends_on`, as the provider documents; the
//! VPC's default security group is adopted and emptied; zone ids given at deployment are
//! variables.

use super::super::lower::name_tag;
use super::super::module::{escape_template, snake};
use super::Cx;
use crate::app::{logical_id, AttrRef};
use crate::resources::{
    DefaultSecurityGroup, Eip, FlowLog, GatewayEndpoint, InternetGateway, LogGroup, NatGateway,
    Resource, Route, RouteTable, RouteTarget, StackInput, Subnet, SubnetRouteTableAssociation, Vpc,
    VpcCidrBlock,
};
use serde_json::{json, Map, Value};

/// The address (`aws_internet_gateway.network_internet_gateway`) of the resource `r` reads.
fn address(r: &AttrRef) -> String {
    format!(
        "{}.{}",
        r.kind.terraform_type(),
        snake(&logical_id(&r.path))
    )
}

/// A variable for `input` (named after its snake_case); returns `${var.<name>}`.
pub(super) fn variable(cx: Cx, input: &StackInput) -> Value {
    cx.input(input)
}

pub(super) fn vpc(cx: Cx, r: &Resource, v: &Vpc) {
    cx.add(
        "aws_vpc",
        &r.path,
        json!({
            "cidr_block": v.cidr,
            "enable_dns_hostnames": true,
            "enable_dns_support": true,
            "tags": name_tag(v.name_tag.clone()),
        }),
    );
}

/// With no rules given, Terraform removes the default group's allow-within-group rules.
pub(super) fn default_security_group(cx: Cx, r: &Resource, g: &DefaultSecurityGroup) {
    let body = json!({"vpc_id": cx.attr(&g.vpc), "tags": name_tag(g.name_tag.clone())});
    cx.add("aws_default_security_group", &r.path, body);
}

pub(super) fn internet_gateway(cx: Cx, r: &Resource, g: &InternetGateway) {
    let body = json!({"vpc_id": cx.attr(&g.vpc), "tags": name_tag(g.name_tag.clone())});
    cx.add("aws_internet_gateway", &r.path, body);
}

pub(super) fn vpc_cidr_block(cx: Cx, r: &Resource, b: &VpcCidrBlock) {
    let body = json!({"vpc_id": cx.attr(&b.vpc), "cidr_block": b.cidr});
    cx.add("aws_vpc_ipv4_cidr_block_association", &r.path, body);
}

pub(super) fn subnet(cx: Cx, r: &Resource, sn: &Subnet) {
    let mut body = Map::new();
    body.insert("vpc_id".into(), cx.attr(&sn.vpc));
    body.insert("cidr_block".into(), json!(sn.cidr));
    body.insert("availability_zone_id".into(), variable(cx, &sn.zone_id));
    body.insert("map_public_ip_on_launch".into(), json!(false));
    let tags: Map<String, Value> = sn.tags.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    body.insert("tags".into(), Value::Object(tags));
    cx.add("aws_subnet", &r.path, Value::Object(body));
}

pub(super) fn eip(cx: Cx, r: &Resource, a: &Eip) {
    let eip = cx.add(
        "aws_eip",
        &r.path,
        json!({"domain": "vpc", "tags": name_tag(a.name_tag.clone())}),
    );
    cx.depends_on(&eip, &[address(&a.internet_gateway)]);
}

pub(super) fn nat_gateway(cx: Cx, r: &Resource, n: &NatGateway) {
    let body = json!({
        "allocation_id": cx.attr(&n.address),
        "subnet_id": cx.attr(&n.subnet),
        "tags": name_tag(n.name_tag.clone()),
    });
    let nat = cx.add("aws_nat_gateway", &r.path, body);
    cx.depends_on(&nat, &[address(&n.internet_gateway)]);
}

pub(super) fn route_table(cx: Cx, r: &Resource, t: &RouteTable) {
    let body = json!({"vpc_id": cx.attr(&t.vpc), "tags": name_tag(t.name_tag.clone())});
    cx.add("aws_route_table", &r.path, body);
}

pub(super) fn route(cx: Cx, r: &Resource, route: &Route) {
    let (key, target) = match &route.target {
        RouteTarget::InternetGateway(g) => ("gateway_id", g),
        RouteTarget::NatGateway(n) => ("nat_gateway_id", n),
    };
    let mut body = Map::new();
    body.insert("route_table_id".into(), cx.attr(&route.table));
    body.insert("destination_cidr_block".into(), json!(route.destination));
    body.insert(key.into(), cx.attr(target));
    cx.add("aws_route", &r.path, Value::Object(body));
}

pub(super) fn subnet_route_table_association(
    cx: Cx,
    r: &Resource,
    a: &SubnetRouteTableAssociation,
) {
    let body = json!({"route_table_id": cx.attr(&a.table), "subnet_id": cx.attr(&a.subnet)});
    cx.add("aws_route_table_association", &r.path, body);
}

pub(super) fn gateway_endpoint(cx: Cx, r: &Resource, g: &GatewayEndpoint) {
    let route_tables: Vec<Value> = g.route_tables.iter().map(|t| cx.attr(t)).collect();
    let body = json!({
        "vpc_id": cx.attr(&g.vpc),
        "service_name": cx.text(&g.service),
        "vpc_endpoint_type": "Gateway",
        "route_table_ids": route_tables,
    });
    cx.add("aws_vpc_endpoint", &r.path, body);
}

pub(super) fn log_group(cx: Cx, r: &Resource, g: &LogGroup) {
    let body = json!({
        "name": escape_template(&g.name),
        "kms_key_id": cx.attr(&g.key),
        "retention_in_days": g.retention_days,
    });
    cx.add("aws_cloudwatch_log_group", &r.path, body);
}

/// The flow log waits for its role's policies.
pub(super) fn flow_log(cx: Cx, r: &Resource, f: &FlowLog) {
    let body = json!({
        "vpc_id": cx.attr(&f.vpc),
        "traffic_type": "ALL",
        "log_destination_type": "cloud-watch-logs",
        "log_destination": cx.attr(&f.log_group),
        "iam_role_arn": cx.attr(&f.role),
    });
    let flow_log = cx.add("aws_flow_log", &r.path, body);
    let policies = cx.role_policies(&f.role.path);
    cx.depends_on(&flow_log, &policies);
}
