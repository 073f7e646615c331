//! The cluster security group shared by the EKS control plane and the HyperPod nodes: all
//! traffic to and from itself (EFA needs both directions), egress to anywhere, and the FSx for
//! Lustre ports from itself. No ingress from outside the group.

use super::Construct;
use crate::app::{kind, AttrRef, Ref};

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
}
