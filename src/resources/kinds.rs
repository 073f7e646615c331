//! The resource kinds: one type per kind of thing hyperforge deploys, holding its facts, and
//! [`ResourceKind`], the closed set the backends match exhaustively. Adding a kind adds a
//! variant here and one arm in each backend (the compiler lists them).

use super::compute::{CapacityBlockPurchase, HyperPodCluster, LaunchTemplate, NodeGroup};
use super::eks::{AccessEntry, EksAddon, EksCluster, OidcProvider};
use super::iam::PolicyDocument;
use super::network::*;
use super::KubeObject;
use super::{DataRepositoryAssociation, LustreFileSystem};
use crate::app::{AttrRef, Kind};

/// Every kind of resource, as stored in a [`ResourceGraph`](super::ResourceGraph).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ResourceKind {
    /// See [`SecurityGroup`].
    SecurityGroup(SecurityGroup),
    /// See [`SecurityGroupRule`].
    SecurityGroupRule(SecurityGroupRule),
    /// See [`Bucket`].
    Bucket(Bucket),
    /// See [`StackOutput`].
    StackOutput(StackOutput),
    /// See [`Role`].
    Role(Role),
    /// See [`KmsKey`].
    KmsKey(KmsKey),
    /// See [`PodIdentityAssociation`].
    PodIdentityAssociation(PodIdentityAssociation),
    /// See [`Vpc`].
    Vpc(Vpc),
    /// See [`DefaultSecurityGroup`].
    DefaultSecurityGroup(DefaultSecurityGroup),
    /// See [`InternetGateway`].
    InternetGateway(InternetGateway),
    /// See [`VpcCidrBlock`].
    VpcCidrBlock(VpcCidrBlock),
    /// See [`Subnet`].
    Subnet(Subnet),
    /// See [`Eip`].
    Eip(Eip),
    /// See [`NatGateway`].
    NatGateway(NatGateway),
    /// See [`RouteTable`].
    RouteTable(RouteTable),
    /// See [`Route`].
    Route(Route),
    /// See [`SubnetRouteTableAssociation`].
    SubnetRouteTableAssociation(SubnetRouteTableAssociation),
    /// See [`GatewayEndpoint`].
    GatewayEndpoint(GatewayEndpoint),
    /// See [`LogGroup`].
    LogGroup(LogGroup),
    /// See [`FlowLog`].
    FlowLog(FlowLog),
    /// See [`KubeObject`].
    KubeObject(KubeObject),
    /// See [`EksCluster`].
    EksCluster(EksCluster),
    /// See [`OidcProvider`].
    OidcProvider(OidcProvider),
    /// See [`EksAddon`].
    EksAddon(EksAddon),
    /// See [`AccessEntry`].
    AccessEntry(AccessEntry),
    /// See [`HyperPodCluster`].
    HyperPodCluster(HyperPodCluster),
    /// See [`CapacityBlockPurchase`].
    CapacityBlockPurchase(CapacityBlockPurchase),
    /// See [`LaunchTemplate`].
    LaunchTemplate(LaunchTemplate),
    /// See [`NodeGroup`].
    NodeGroup(NodeGroup),
    /// See [`LustreFileSystem`].
    LustreFileSystem(LustreFileSystem),
    /// See [`DataRepositoryAssociation`].
    DataRepositoryAssociation(DataRepositoryAssociation),
}

impl ResourceKind {
    /// The kind a typed handle to this resource carries (`None`: handles never point here).
    pub fn ref_kind(&self) -> Option<Kind> {
        match self {
            ResourceKind::SecurityGroup(_) => Some(Kind::SecurityGroup),
            ResourceKind::Bucket(_) => Some(Kind::Bucket),
            ResourceKind::Role(_) => Some(Kind::Role),
            ResourceKind::KmsKey(_) => Some(Kind::KmsKey),
            ResourceKind::LustreFileSystem(_) => Some(Kind::FsxFileSystem),
            ResourceKind::SecurityGroupRule(_)
            | ResourceKind::StackOutput(_)
            | ResourceKind::PodIdentityAssociation(_) => None,
            ResourceKind::Vpc(_) => Some(Kind::Vpc),
            ResourceKind::InternetGateway(_) => Some(Kind::InternetGateway),
            ResourceKind::Subnet(_) => Some(Kind::Subnet),
            ResourceKind::Eip(_) => Some(Kind::Eip),
            ResourceKind::NatGateway(_) => Some(Kind::NatGateway),
            ResourceKind::RouteTable(_) => Some(Kind::RouteTable),
            ResourceKind::LogGroup(_) => Some(Kind::LogGroup),
            ResourceKind::DefaultSecurityGroup(_)
            | ResourceKind::VpcCidrBlock(_)
            | ResourceKind::Route(_)
            | ResourceKind::SubnetRouteTableAssociation(_)
            | ResourceKind::GatewayEndpoint(_)
            | ResourceKind::FlowLog(_) => None,
            ResourceKind::KubeObject(_) => None,
            ResourceKind::EksCluster(_) => Some(Kind::EksCluster),
            ResourceKind::OidcProvider(_) => Some(Kind::OidcProvider),
            ResourceKind::EksAddon(_) | ResourceKind::AccessEntry(_) => None,
            ResourceKind::HyperPodCluster(_) => Some(Kind::HyperPodCluster),
            ResourceKind::CapacityBlockPurchase(_)
            | ResourceKind::LaunchTemplate(_)
            | ResourceKind::NodeGroup(_) => None,
            ResourceKind::DataRepositoryAssociation(_) => None,
        }
    }

    /// Every reference the resource makes.
    pub fn references(&self) -> Vec<AttrRef> {
        match self {
            ResourceKind::SecurityGroup(g) => vec![g.vpc.clone()],
            ResourceKind::SecurityGroupRule(r) => {
                let Peer::Group(peer) = &r.peer;
                vec![r.group.clone(), peer.clone()]
            }
            ResourceKind::Bucket(_) => Vec::new(),
            ResourceKind::StackOutput(o) => vec![o.value.clone()],
            ResourceKind::Role(r) => {
                let mut out = r.trust.references();
                for (_, doc) in &r.inline {
                    out.extend(doc.references());
                }
                out
            }
            ResourceKind::KmsKey(k) => k.policy.references(),
            ResourceKind::PodIdentityAssociation(a) => vec![a.cluster.clone(), a.role.clone()],
            ResourceKind::Vpc(_) => Vec::new(),
            ResourceKind::DefaultSecurityGroup(g) => vec![g.vpc.clone()],
            ResourceKind::InternetGateway(g) => vec![g.vpc.clone()],
            ResourceKind::VpcCidrBlock(b) => vec![b.vpc.clone()],
            ResourceKind::Subnet(s) => vec![s.vpc.clone()],
            ResourceKind::Eip(e) => vec![e.internet_gateway.clone()],
            ResourceKind::NatGateway(n) => vec![
                n.address.clone(),
                n.subnet.clone(),
                n.internet_gateway.clone(),
            ],
            ResourceKind::RouteTable(t) => vec![t.vpc.clone()],
            ResourceKind::Route(r) => {
                let (RouteTarget::InternetGateway(target) | RouteTarget::NatGateway(target)) =
                    &r.target;
                vec![r.table.clone(), target.clone()]
            }
            ResourceKind::SubnetRouteTableAssociation(a) => {
                vec![a.table.clone(), a.subnet.clone()]
            }
            ResourceKind::GatewayEndpoint(e) => {
                let mut out = vec![e.vpc.clone()];
                out.extend(e.service.references().cloned());
                out.extend(e.route_tables.iter().cloned());
                out
            }
            ResourceKind::LogGroup(g) => vec![g.key.clone()],
            ResourceKind::FlowLog(f) => vec![f.vpc.clone(), f.log_group.clone(), f.role.clone()],
            ResourceKind::KubeObject(_) => Vec::new(),
            ResourceKind::EksCluster(c) => {
                let mut out = vec![c.role.clone()];
                out.extend(c.subnets.iter().cloned());
                out.extend(c.security_groups.iter().cloned());
                out.push(c.secrets_key.clone());
                out
            }
            ResourceKind::OidcProvider(p) => vec![p.issuer_url.clone()],
            ResourceKind::EksAddon(a) => a.references(),
            ResourceKind::AccessEntry(e) => {
                let mut out = vec![e.cluster.clone()];
                out.extend(e.principal.references().cloned());
                out
            }
            ResourceKind::HyperPodCluster(c) => {
                let mut out = vec![c.eks_cluster.clone()];
                out.extend(c.security_groups.iter().cloned());
                out.extend(c.subnets.iter().cloned());
                for g in &c.instance_groups {
                    out.push(g.execution_role.clone());
                    out.extend(g.lifecycle.source_s3_uri.references().cloned());
                }
                out
            }
            ResourceKind::CapacityBlockPurchase(_) => Vec::new(),
            ResourceKind::LaunchTemplate(t) => {
                let mut out = t.security_groups.clone();
                for i in &t.network_interfaces {
                    out.extend(i.security_groups.iter().cloned());
                }
                out
            }
            ResourceKind::NodeGroup(g) => {
                let mut out = vec![g.cluster.clone(), g.node_role.clone()];
                out.extend(g.subnets.iter().cloned());
                out
            }
            ResourceKind::LustreFileSystem(f) => {
                let mut out = vec![f.subnet.clone(), f.security_group.clone()];
                out.extend(f.kms_key.clone());
                out
            }
            ResourceKind::DataRepositoryAssociation(a) => {
                let mut out = vec![a.file_system.clone()];
                out.extend(a.data_repository_path.references().cloned());
                out
            }
        }
    }
}

macro_rules! into_kind {
    ($($variant:ident),*) => {
        $( impl From<$variant> for ResourceKind {
            fn from(r: $variant) -> Self { ResourceKind::$variant(r) }
        } )*
    };
}
into_kind!(
    SecurityGroup,
    SecurityGroupRule,
    Bucket,
    StackOutput,
    Role,
    KmsKey,
    PodIdentityAssociation,
    Vpc,
    DefaultSecurityGroup,
    InternetGateway,
    VpcCidrBlock,
    Subnet,
    Eip,
    NatGateway,
    RouteTable,
    Route,
    SubnetRouteTableAssociation,
    GatewayEndpoint,
    LogGroup,
    FlowLog,
    EksCluster,
    OidcProvider,
    EksAddon,
    AccessEntry,
    HyperPodCluster,
    CapacityBlockPurchase,
    LaunchTemplate,
    NodeGroup,
    LustreFileSystem,
    DataRepositoryAssociation
);
into_kind!(KubeObject);

/// An IP protocol of a security group rule (`-1` is every protocol).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protocol(pub String);

/// A security group. Egress rules listed here belong to the group's own definition; rules
/// between groups are [`SecurityGroupRule`]s.
#[derive(Clone, Debug, PartialEq)]
pub struct SecurityGroup {
    /// The group's description.
    pub description: String,
    /// Its VPC.
    pub vpc: AttrRef,
    /// The `Name` tag.
    pub name_tag: String,
    /// Egress to CIDR blocks, each with a child id (Terraform states each as a resource of its
    /// own, named `<construct>/<id>`).
    pub egress: Vec<CidrEgress>,
}

/// Egress from a group to a CIDR block.
#[derive(Clone, Debug, PartialEq)]
pub struct CidrEgress {
    /// The rule's child id (`InternetEgress`).
    pub id: String,
    /// The destination block.
    pub cidr: String,
    /// The protocol.
    pub protocol: Protocol,
    /// What the rule is for.
    pub description: String,
}

/// Which way a rule admits traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Into the group.
    Ingress,
    /// Out of the group.
    Egress,
}

/// The other side of a rule.
#[derive(Clone, Debug, PartialEq)]
pub enum Peer {
    /// Another (or the same) security group.
    Group(AttrRef),
}

/// A rule of a security group defined on its own.
#[derive(Clone, Debug, PartialEq)]
pub struct SecurityGroupRule {
    /// Ingress or egress.
    pub direction: Direction,
    /// The group the rule belongs to.
    pub group: AttrRef,
    /// The protocol.
    pub protocol: Protocol,
    /// The port range (both ends included); `None` for every port.
    pub ports: Option<(u16, u16)>,
    /// Where traffic comes from or goes to.
    pub peer: Peer,
    /// What the rule is for.
    pub description: String,
}

/// An S3 bucket with hyperforge's secure defaults: KMS encryption with a bucket key,
/// versioning, public access blocked, ownership enforced, and a policy that denies requests
/// without TLS.
#[derive(Clone, Debug, PartialEq)]
pub struct Bucket {
    /// Why the bucket needs no access logging (checkov `CKV_AWS_18`), shown where the finding
    /// is suppressed.
    pub no_access_log_reason: &'static str,
}

/// A value a stage's deployment exports for people and later tools: the output named
/// `<LogicalId><Attr>` of `value`.
#[derive(Clone, Debug, PartialEq)]
pub struct StackOutput {
    /// What it is.
    pub description: String,
    /// The attribute exported.
    pub value: AttrRef,
}

/// An IAM role: who may assume it, the AWS managed policies attached to it and its own
/// inline policies.
#[derive(Clone, Debug, PartialEq)]
pub struct Role {
    /// What the role is for.
    pub description: String,
    /// The trust policy.
    pub trust: PolicyDocument,
    /// AWS managed policies by name (`AmazonEKSClusterPolicy`), attached in this order.
    pub managed: Vec<String>,
    /// Inline policies: name and document, in this order.
    pub inline: Vec<(String, PolicyDocument)>,
    /// A fixed role name (needs the named-IAM acknowledgement); generated when `None`.
    pub name: Option<String>,
}

/// A customer managed KMS key with rotation on.
#[derive(Clone, Debug, PartialEq)]
pub struct KmsKey {
    /// What the key protects.
    pub description: String,
    /// The key policy.
    pub policy: PolicyDocument,
}

/// An EKS Pod Identity association: pods of a service account receive a role's credentials.
/// The association is usable only once the role's policies exist.
#[derive(Clone, Debug, PartialEq)]
pub struct PodIdentityAssociation {
    /// The cluster's name.
    pub cluster: AttrRef,
    /// The service account's namespace.
    pub namespace: String,
    /// The service account.
    pub service_account: String,
    /// The role's ARN.
    pub role: AttrRef,
}

/// A string chosen when the stack is deployed, with a default: a template parameter in
/// CloudFormation, a variable in Terraform.
#[derive(Clone, Debug, PartialEq)]
pub struct StackInput {
    /// The input's name, PascalCase (`NetworkGpuSubnetAzId`); Terraform uses its snake_case.
    pub name: String,
    /// What the value is and where to find it.
    pub description: String,
    /// The value used when none is given.
    pub default: Option<String>,
    /// The pattern a value must match (RE2 and CloudFormation `AllowedPattern` alike).
    pub pattern: Option<String>,
    /// What a valid value is, completing "must be" (`an Availability Zone id such as
    /// usw2-az2`).
    pub expected: String,
}
