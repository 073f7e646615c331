//! Lowering of the resource layer to CloudFormation: one function per resource kind, chosen by
//! an exhaustive match. CloudFormation's own spelling lives here (inline egress rules, a
//! bucket's policy as a resource of its own, outputs).

use super::expr::{Expr, Val};
use super::l1::*;
use super::lower::{bucket, name_tag};
use super::template::StackTemplates;
use crate::app::logical_id;
use crate::resources::{
    Bucket, Direction, Peer, Resource, ResourceKind, SecurityGroup, SecurityGroupRule, StackOutput,
};

type Cx<'a, 'b> = &'a mut StackTemplates<'b>;

fn s(v: impl Into<String>) -> Val<String> {
    Val::Lit(v.into())
}

fn e<T>(expr: Expr) -> Val<T> {
    Val::Expr(expr)
}

/// Lowers one resource into its stage's template.
pub(crate) fn lower(cx: Cx, r: &Resource) {
    match &r.kind {
        ResourceKind::SecurityGroup(g) => security_group(cx, r, g),
        ResourceKind::SecurityGroupRule(rule) => security_group_rule(cx, r, rule),
        ResourceKind::Bucket(b) => secure_bucket(cx, r, b),
        ResourceKind::StackOutput(o) => output(cx, r, o),
    }
}

/// Records the resource's dependencies and suppressions on the template resource added last.
fn meta(cx: Cx, r: &Resource) {
    let ids: Vec<String> = r.depends_on.iter().map(|p| logical_id(p)).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    if !ids.is_empty() {
        cx.depends_on(r.stage, &ids);
    }
    for (check, reason) in &r.suppressions {
        cx.suppress(r.stage, check, reason);
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
    meta(cx, r);
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
    meta(cx, r);
}

fn secure_bucket(cx: Cx, r: &Resource, b: &Bucket) {
    bucket(cx, r.stage, &r.path, b.no_access_log_reason);
    meta(cx, r);
}

fn output(cx: Cx, r: &Resource, o: &StackOutput) {
    let value = cx.attr(r.stage, &o.value);
    cx.output(
        r.stage,
        &format!("{}{}", logical_id(&o.value.path), o.value.attr.as_str()),
        &o.description,
        value,
    );
}
