//! The resource kinds of a VPC: the VPC and its secondary blocks, subnets, gateways, routing,
//! gateway endpoints and flow logs; and [`StackInput`], a value chosen when a stack is
//! deployed (a CloudFormation parameter, a Terraform variable).

use super::ResourceFacts;
use super::StackInput;
use crate::app::text::Text;
use crate::app::AttrRef;
use crate::app::Kind;

/// A VPC with DNS support and DNS hostnames on.
#[derive(Clone, Debug, PartialEq)]
pub struct Vpc {
    /// The primary block.
    pub cidr: String,
    /// The `Name` tag.
    pub name_tag: String,
}

/// The default security group of a VPC, with every rule removed so that nothing placed in it
/// by mistake can talk. Only a format that can adopt the default group manages it
/// (CloudFormation cannot, and leaves the group as the VPC created it).
#[derive(Clone, Debug, PartialEq)]
pub struct DefaultSecurityGroup {
    /// Its VPC.
    pub vpc: AttrRef,
    /// The `Name` tag.
    pub name_tag: String,
}

/// An internet gateway attached to a VPC.
#[derive(Clone, Debug, PartialEq)]
pub struct InternetGateway {
    /// The VPC it is attached to.
    pub vpc: AttrRef,
    /// The `Name` tag.
    pub name_tag: String,
}

/// A secondary IPv4 block of a VPC.
#[derive(Clone, Debug, PartialEq)]
pub struct VpcCidrBlock {
    /// The VPC.
    pub vpc: AttrRef,
    /// The block.
    pub cidr: String,
}

/// A subnet. Instances launched in it get no public address.
#[derive(Clone, Debug, PartialEq)]
pub struct Subnet {
    /// Its VPC.
    pub vpc: AttrRef,
    /// Its block.
    pub cidr: String,
    /// Its zone, by id (`usw2-az2`): the same zone in every account, given when the stack is
    /// deployed (a zone name maps to a different zone in each account).
    pub zone_id: StackInput,
    /// Its tags, in order (`Name` first).
    pub tags: Vec<(String, String)>,
}

/// An Elastic IP address for a NAT gateway.
#[derive(Clone, Debug, PartialEq)]
pub struct Eip {
    /// The internet gateway of the VPC: a VPC address needs it attached first.
    pub internet_gateway: AttrRef,
    /// The `Name` tag.
    pub name_tag: String,
}

/// A public NAT gateway.
#[derive(Clone, Debug, PartialEq)]
pub struct NatGateway {
    /// The allocation id of its Elastic IP address.
    pub address: AttrRef,
    /// The public subnet it sits in.
    pub subnet: AttrRef,
    /// The internet gateway its traffic leaves through, which must be attached first.
    pub internet_gateway: AttrRef,
    /// The `Name` tag.
    pub name_tag: String,
}

/// A route table.
#[derive(Clone, Debug, PartialEq)]
pub struct RouteTable {
    /// Its VPC.
    pub vpc: AttrRef,
    /// The `Name` tag.
    pub name_tag: String,
}

/// Where a route sends traffic.
#[derive(Clone, Debug, PartialEq)]
pub enum RouteTarget {
    /// An internet gateway (the route works once the gateway is attached).
    InternetGateway(AttrRef),
    /// A NAT gateway.
    NatGateway(AttrRef),
}

/// A route of a route table.
#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    /// The route table.
    pub table: AttrRef,
    /// The destination block.
    pub destination: String,
    /// Where the traffic goes.
    pub target: RouteTarget,
}

/// The association of a subnet with a route table.
#[derive(Clone, Debug, PartialEq)]
pub struct SubnetRouteTableAssociation {
    /// The route table.
    pub table: AttrRef,
    /// The subnet.
    pub subnet: AttrRef,
}

/// A gateway VPC endpoint: routes to the service in the given route tables.
#[derive(Clone, Debug, PartialEq)]
pub struct GatewayEndpoint {
    /// The VPC.
    pub vpc: AttrRef,
    /// The service name (`com.amazonaws.<region>.s3`).
    pub service: Text,
    /// The route tables that get the service's routes.
    pub route_tables: Vec<AttrRef>,
}

/// A CloudWatch Logs log group encrypted with a KMS key.
#[derive(Clone, Debug, PartialEq)]
pub struct LogGroup {
    /// The group's name.
    pub name: String,
    /// The key's ARN.
    pub key: AttrRef,
    /// How long events are kept, in days.
    pub retention_days: u32,
}

/// A flow log of every packet (accepted and rejected) of a VPC, delivered to a log group.
/// Delivery starts at once, so the role must hold its permissions before the flow log exists.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowLog {
    /// The VPC.
    pub vpc: AttrRef,
    /// The log group's ARN.
    pub log_group: AttrRef,
    /// The ARN of the role flow logs deliver with.
    pub role: AttrRef,
}

impl ResourceFacts for Vpc {
    const HANDLE: Option<Kind> = Some(Kind::Vpc);
}

impl ResourceFacts for DefaultSecurityGroup {
    fn references(&self) -> Vec<AttrRef> {
        vec![self.vpc.clone()]
    }
}

impl ResourceFacts for InternetGateway {
    const HANDLE: Option<Kind> = Some(Kind::InternetGateway);

    fn references(&self) -> Vec<AttrRef> {
        vec![self.vpc.clone()]
    }
}

impl ResourceFacts for VpcCidrBlock {
    fn references(&self) -> Vec<AttrRef> {
        vec![self.vpc.clone()]
    }
}

impl ResourceFacts for Subnet {
    const HANDLE: Option<Kind> = Some(Kind::Subnet);

    fn references(&self) -> Vec<AttrRef> {
        vec![self.vpc.clone()]
    }
    fn inputs(&self) -> Vec<StackInput> {
        vec![self.zone_id.clone()]
    }
}

impl ResourceFacts for Eip {
    const HANDLE: Option<Kind> = Some(Kind::Eip);

    fn references(&self) -> Vec<AttrRef> {
        vec![self.internet_gateway.clone()]
    }
}

impl ResourceFacts for NatGateway {
    const HANDLE: Option<Kind> = Some(Kind::NatGateway);

    fn references(&self) -> Vec<AttrRef> {
        vec![
            self.address.clone(),
            self.subnet.clone(),
            self.internet_gateway.clone(),
        ]
    }
}

impl ResourceFacts for RouteTable {
    const HANDLE: Option<Kind> = Some(Kind::RouteTable);

    fn references(&self) -> Vec<AttrRef> {
        vec![self.vpc.clone()]
    }
}

impl ResourceFacts for Route {
    fn references(&self) -> Vec<AttrRef> {
        let (RouteTarget::InternetGateway(target) | RouteTarget::NatGateway(target)) = &self.target;
        vec![self.table.clone(), target.clone()]
    }
}

impl ResourceFacts for SubnetRouteTableAssociation {
    fn references(&self) -> Vec<AttrRef> {
        vec![self.table.clone(), self.subnet.clone()]
    }
}

impl ResourceFacts for GatewayEndpoint {
    fn references(&self) -> Vec<AttrRef> {
        let mut out = vec![self.vpc.clone()];
        out.extend(self.service.references().cloned());
        out.extend(self.route_tables.iter().cloned());
        out
    }
}

impl ResourceFacts for LogGroup {
    const HANDLE: Option<Kind> = Some(Kind::LogGroup);

    fn references(&self) -> Vec<AttrRef> {
        vec![self.key.clone()]
    }
}

impl ResourceFacts for FlowLog {
    fn references(&self) -> Vec<AttrRef> {
        vec![self.vpc.clone(), self.log_group.clone(), self.role.clone()]
    }
}
