//! The VPC kinds in CloudFormation. An internet gateway's attachment to its VPC is a resource
//! of its own here (`<gateway>Attachment`), which routes through the gateway and Elastic IPs
//! wait for; zone ids given at deployment are template parameters.

use super::super::expr::Expr;
use super::super::l1::*;
use super::super::lower::name_tag;
use super::{e, s, Cx};
use crate::app::StageId;
use crate::app::{logical_id, Attr, AttrRef};
use crate::resources::{
    DefaultSecurityGroup, Eip, FlowLog, GatewayEndpoint, InternetGateway, LogGroup, NatGateway,
    Resource, Route, RouteTable, RouteTarget, StackInput, Subnet, SubnetRouteTableAssociation, Vpc,
    VpcCidrBlock,
};

/// The logical id of the attachment of internet gateway `gateway`.
fn attachment(gateway: &AttrRef) -> String {
    logical_id(&format!("{}Attachment", gateway.path))
}

/// A template parameter for `input`; returns a `Ref` to it.
pub(super) fn parameter(cx: Cx, stage: StageId, input: &StackInput) -> Expr {
    cx.input(stage, input)
}

pub(super) fn vpc(cx: Cx, r: &Resource, v: &Vpc) {
    cx.add(
        r.stage,
        &r.path,
        &ec2_vpc::Vpc {
            cidr_block: Some(s(&v.cidr)),
            enable_dns_hostnames: Some(true.into()),
            enable_dns_support: Some(true.into()),
            tags: Some(name_tag(v.name_tag.clone())),
            ..Default::default()
        },
    );
}

/// CloudFormation cannot adopt a VPC's default security group.
pub(super) fn default_security_group(_cx: Cx, _r: &Resource, _g: &DefaultSecurityGroup) {}

pub(super) fn internet_gateway(cx: Cx, r: &Resource, g: &InternetGateway) {
    let igw = cx.add(
        r.stage,
        &r.path,
        &ec2_internet_gateway::InternetGateway {
            tags: Some(name_tag(g.name_tag.clone())),
        },
    );
    let vpc = cx.attr(r.stage, &g.vpc);
    cx.add(
        r.stage,
        &format!("{}Attachment", r.path),
        &ec2_vpc_gateway_attachment::VpcGatewayAttachment {
            internet_gateway_id: Some(e(Expr::reference(&igw))),
            vpc_id: e(vpc),
            vpn_gateway_id: None,
        },
    );
}

pub(super) fn vpc_cidr_block(cx: Cx, r: &Resource, b: &VpcCidrBlock) {
    let vpc = cx.attr(r.stage, &b.vpc);
    cx.add(
        r.stage,
        &r.path,
        &ec2_vpc_cidr_block::VpcCidrBlock {
            cidr_block: Some(s(&b.cidr)),
            vpc_id: e(vpc),
            ..Default::default()
        },
    );
}

pub(super) fn subnet(cx: Cx, r: &Resource, sn: &Subnet) {
    let vpc = cx.attr(r.stage, &sn.vpc);
    let zone_id = parameter(cx, r.stage, &sn.zone_id);
    cx.add(
        r.stage,
        &r.path,
        &ec2_subnet::Subnet {
            vpc_id: e(vpc),
            cidr_block: Some(s(&sn.cidr)),
            availability_zone_id: Some(e(zone_id)),
            map_public_ip_on_launch: Some(false.into()),
            tags: Some(
                sn.tags
                    .iter()
                    .map(|(key, value)| ec2_subnet::Tag {
                        key: s(key),
                        value: s(value),
                    })
                    .collect(),
            ),
            ..Default::default()
        },
    );
}

/// A VPC address waits for the gateway's attachment.
pub(super) fn eip(cx: Cx, r: &Resource, a: &Eip) {
    cx.add(
        r.stage,
        &r.path,
        &ec2_eip::Eip {
            domain: Some(s("vpc")),
            tags: Some(name_tag(a.name_tag.clone())),
            ..Default::default()
        },
    );
    cx.depends_on(r.stage, &[&attachment(&a.internet_gateway)]);
}

/// The gateway waits for the attachment through its Elastic IP, which waits for it.
pub(super) fn nat_gateway(cx: Cx, r: &Resource, n: &NatGateway) {
    let allocation = cx.attr(r.stage, &n.address);
    let subnet = cx.attr(r.stage, &n.subnet);
    cx.add(
        r.stage,
        &r.path,
        &ec2_nat_gateway::NatGateway {
            allocation_id: Some(e(allocation)),
            subnet_id: Some(e(subnet)),
            tags: Some(name_tag(n.name_tag.clone())),
            ..Default::default()
        },
    );
}

pub(super) fn route_table(cx: Cx, r: &Resource, t: &RouteTable) {
    let vpc = cx.attr(r.stage, &t.vpc);
    cx.add(
        r.stage,
        &r.path,
        &ec2_route_table::RouteTable {
            vpc_id: e(vpc),
            tags: Some(name_tag(t.name_tag.clone())),
        },
    );
}

/// A route through an internet gateway waits for the gateway's attachment.
pub(super) fn route(cx: Cx, r: &Resource, route: &Route) {
    let table = cx.attr(r.stage, &route.table);
    let mut l1 = ec2_route::Route {
        route_table_id: e(table),
        destination_cidr_block: Some(s(&route.destination)),
        ..Default::default()
    };
    let mut after = None;
    match &route.target {
        RouteTarget::InternetGateway(g) => {
            l1.gateway_id = Some(e(cx.attr(r.stage, g)));
            after = Some(attachment(g));
        }
        RouteTarget::NatGateway(n) => l1.nat_gateway_id = Some(e(cx.attr(r.stage, n))),
    }
    cx.add(r.stage, &r.path, &l1);
    if let Some(after) = after {
        cx.depends_on(r.stage, &[&after]);
    }
}

pub(super) fn subnet_route_table_association(
    cx: Cx,
    r: &Resource,
    a: &SubnetRouteTableAssociation,
) {
    let table = cx.attr(r.stage, &a.table);
    let subnet = cx.attr(r.stage, &a.subnet);
    cx.add(
        r.stage,
        &r.path,
        &ec2_subnet_route_table_association::SubnetRouteTableAssociation {
            route_table_id: e(table),
            subnet_id: e(subnet),
        },
    );
}

pub(super) fn gateway_endpoint(cx: Cx, r: &Resource, g: &GatewayEndpoint) {
    let vpc = cx.attr(r.stage, &g.vpc);
    let service = cx.text(r.stage, &g.service);
    let route_tables = g
        .route_tables
        .iter()
        .map(|t| e(cx.attr(r.stage, t)))
        .collect();
    cx.add(
        r.stage,
        &r.path,
        &ec2_vpc_endpoint::VpcEndpoint {
            vpc_id: e(vpc),
            service_name: Some(e(service)),
            vpc_endpoint_type: Some(s("Gateway")),
            route_table_ids: Some(route_tables),
            ..Default::default()
        },
    );
}

pub(super) fn log_group(cx: Cx, r: &Resource, g: &LogGroup) {
    let key = cx.attr(r.stage, &g.key);
    cx.add(
        r.stage,
        &r.path,
        &logs_log_group::LogGroup {
            log_group_name: Some(s(&g.name)),
            kms_key_id: Some(e(key)),
            retention_in_days: Some(i64::from(g.retention_days).into()),
            ..Default::default()
        },
    );
}

/// The flow log names its log group (`LogGroupName`).
pub(super) fn flow_log(cx: Cx, r: &Resource, f: &FlowLog) {
    let vpc = cx.attr(r.stage, &f.vpc);
    let group = cx.attr(
        r.stage,
        &AttrRef {
            attr: Attr::Name,
            ..f.log_group.clone()
        },
    );
    let role = cx.attr(r.stage, &f.role);
    cx.add(
        r.stage,
        &r.path,
        &ec2_flow_log::FlowLog {
            resource_id: e(vpc),
            resource_type: s("VPC"),
            traffic_type: Some(s("ALL")),
            log_destination_type: Some(s("cloud-watch-logs")),
            log_group_name: Some(e(group)),
            deliver_logs_permission_arn: Some(e(role)),
            ..Default::default()
        },
    );
}
