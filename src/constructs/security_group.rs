//! The cluster security group shared by the EKS control plane and the cluster's nodes: all
//! traffic to and from itself (EFA needs both directions), egress to anywhere, and the FSx for
//! Lustre ports from itself. No ingress from outside the group.

use super::Construct;
use crate::app::{kind, AttrRef, Ref};
use crate::resources::{
    CidrEgress, Direction, Peer, Protocol, Scope, SecurityGroup, SecurityGroupRule,
};

/// The cluster security group builder.
#[derive(Clone, Debug)]
pub struct ClusterSecurityGroup {
    id: String,
    vpc: Ref<kind::Vpc>,
    fsx_lustre_ports: bool,
}

/// Handle to the group.
#[derive(Clone, Debug)]
pub struct ClusterSecurityGroupHandle {
    /// The security group.
    pub group: Ref<kind::SecurityGroup>,
}

impl ClusterSecurityGroup {
    /// A group in `vpc` with the intra-cluster rules and FSx for Lustre ports.
    pub fn new(id: impl Into<String>, vpc: &Ref<kind::Vpc>) -> Self {
        ClusterSecurityGroup {
            id: id.into(),
            vpc: vpc.clone(),
            fsx_lustre_ports: true,
        }
    }

    /// Leaves out the FSx for Lustre ingress rules (988, 1018-1023).
    pub fn without_fsx_lustre_ports(mut self) -> Self {
        self.fsx_lustre_ports = false;
        self
    }

    /// The VPC the group lives in.
    pub fn vpc(&self) -> &Ref<kind::Vpc> {
        &self.vpc
    }

    /// Whether the FSx for Lustre rules are emitted.
    pub fn fsx_lustre_ports(&self) -> bool {
        self.fsx_lustre_ports
    }

    pub(crate) fn references(&self) -> Vec<AttrRef> {
        vec![self.vpc.id()]
    }
}

impl Construct for ClusterSecurityGroup {
    type Handle = ClusterSecurityGroupHandle;
    const KIND: &'static str = "cluster_security_group";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> ClusterSecurityGroupHandle {
        ClusterSecurityGroupHandle {
            group: Ref::new(stack, format!("{}/Group", self.id)),
        }
    }

    fn references(&self) -> Vec<AttrRef> {
        ClusterSecurityGroup::references(self)
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        let stack_name = scope.stack().name().to_owned();
        let group = self.handle(&stack_name).group.id();
        scope.add(
            "Group",
            SecurityGroup {
                // The description is fixed text (CloudFormation replaces the group when it
                // changes, and packs read it as a literal); the Name tag names the stack.
                description: "Cluster: the EKS control plane and the cluster nodes; all traffic within the group, no ingress from outside".to_owned(),
                vpc: self.vpc.id(),
                name_tag: format!("{stack_name}-cluster"),
                egress: vec![CidrEgress {
                    id: "InternetEgress".to_owned(),
                    cidr: "0.0.0.0/0".to_owned(),
                    protocol: Protocol("-1".to_owned()),
                    ports: None,
                    description: "Nodes reach AWS APIs, container registries and model hubs through NAT".to_owned(),
                }],
            },
        );
        let within = "All traffic between cluster members (EFA needs every protocol)";
        for (id, direction) in [
            ("SelfIngress", Direction::Ingress),
            ("SelfEgress", Direction::Egress),
        ] {
            scope.add(
                id,
                SecurityGroupRule {
                    direction,
                    group: group.clone(),
                    protocol: Protocol("-1".to_owned()),
                    ports: None,
                    peer: Peer::Group(group.clone()),
                    description: within.to_owned(),
                },
            );
        }
        if self.fsx_lustre_ports {
            for (id, from, to) in [
                ("FsxLustreIngress988", 988, 988),
                ("FsxLustreIngress1018", 1018, 1023),
            ] {
                scope.add(
                    id,
                    SecurityGroupRule {
                        direction: Direction::Ingress,
                        group: group.clone(),
                        protocol: Protocol("tcp".to_owned()),
                        ports: Some((from, to)),
                        peer: Peer::Group(group.clone()),
                        description: format!(
                            "FSx for Lustre, ports {from}-{to}, from cluster members"
                        ),
                    },
                );
            }
        }
    }
}

// --- Stack-file form -------------------------------------------------------------------------

stack_file_shape! {
    pub mod fields = <ClusterSecurityGroup as Construct>::KIND, "The security group shared by the cluster's nodes." {
        ID: req "cluster_security_group", Ty::Str, "The construct id.";
        VPC: req "vpc", Ty::Ref(Want::Vpc), "The VPC.";
        FSX_LUSTRE_PORTS: opt "fsx_lustre_ports", Ty::Bool, default "true", "Open the FSx for Lustre ports between members.";
    }
}

impl super::stack_file::StackFileConstruct for ClusterSecurityGroup {
    const SHAPE: &'static super::stack_file::Shape = &fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        let vpc = super::stack_file::required(r.vpc(&fields::VPC))?;
        let mut c = ClusterSecurityGroup::new(id, &vpc);
        if r.bool(&fields::FSX_LUSTRE_PORTS) == Some(false) {
            c = c.without_fsx_lustre_ports();
        }
        Some(c)
    }
}
