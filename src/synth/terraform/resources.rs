//! Lowering of the resource layer to Terraform: one function per resource kind, chosen by an
//! exhaustive match. Where Terraform models part of a resource as a resource of its own (a
//! bucket's encryption, a group's egress rule), that resource is named after its owner.

use super::lower::{bucket, name_tag};
use super::module::{snake, RootModule};
use crate::app::logical_id;
use crate::resources::{
    Bucket, Direction, Peer, Resource, ResourceKind, SecurityGroup, SecurityGroupRule, StackOutput,
};
use serde_json::{json, Map, Value};

type Cx<'a, 'b> = &'a mut RootModule<'b>;

/// Lowers one resource into the root module.
pub(crate) fn lower(cx: Cx, r: &Resource) {
    match &r.kind {
        ResourceKind::SecurityGroup(g) => security_group(cx, r, g),
        ResourceKind::SecurityGroupRule(rule) => security_group_rule(cx, r, rule),
        ResourceKind::Bucket(b) => secure_bucket(cx, r, b),
        ResourceKind::StackOutput(o) => output(cx, o),
    }
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
        cx.add(
            "aws_vpc_security_group_egress_rule",
            &format!("{}/{}", parent(&r.path), rule.id),
            json!({
                "security_group_id": group.interp("id"),
                "ip_protocol": rule.protocol.0,
                "cidr_ipv4": rule.cidr,
                "description": rule.description,
            }),
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

fn secure_bucket(cx: Cx, r: &Resource, _b: &Bucket) {
    bucket(cx, &r.path);
}

fn output(cx: Cx, o: &StackOutput) {
    let value = cx.attr(&o.value);
    cx.output(
        &snake(&format!(
            "{}{}",
            logical_id(&o.value.path),
            o.value.attr.as_str()
        )),
        &o.description,
        value,
    );
}
