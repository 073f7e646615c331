//! The VPC: public and private subnets over two or more availability zones, an internet
//! gateway, NAT, an S3 gateway endpoint, flow logs, and zonal subnets on secondary CIDR blocks
//! placed by availability zone id where reserved GPU capacity lives: the HyperPod subnet (a
//! training plan's zone) and the GPU node subnet (a Capacity Block's zone).

use super::cidr::{CidrError, Ipv4Cidr};
use super::stack_file::Ints;
use super::{Construct, Context};
use crate::app::text::{Pseudo, Text};
use crate::app::{kind, logical_id, Attr, AttrRef, Kind, Ref, Stack};
use crate::catalog::regions::AzId;
use crate::diagnostics::{Code, Diagnostics};
use crate::resources::iam::{
    account_key_policy, service_trust, PolicyDocument, PrincipalKind, Statement,
};
use crate::resources::{
    DefaultSecurityGroup, Eip, FlowLog, GatewayEndpoint, InternetGateway, KmsKey, LogGroup,
    NatGateway, Role, Route, RouteTable, RouteTarget, Rule, Scope, StackInput, Subnet,
    SubnetRouteTableAssociation, Vpc, VpcCidrBlock,
};

/// How many NAT gateways the VPC gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum NatGateways {
    /// One NAT gateway in the first public subnet (cheaper; one zone's outage cuts egress).
    #[default]
    One,
    /// One NAT gateway per availability zone.
    PerAz,
}

stack_file_names!(NatGateways { One => "one", PerAz => "per_az" });

/// A zonal subnet: a whole secondary CIDR block in one availability zone, where reserved
/// capacity is. HyperPod places one ENI per pod in its subnet, and the VPC CNI gives every pod
/// of a GPU node an address, so both are large.
#[derive(Clone, Debug, PartialEq)]
pub struct ZonalSubnet {
    /// The child id (`HyperPodSubnet`, `GpuSubnet`).
    pub id: &'static str,
    /// The zone id (`usw2-az2`).
    pub az_id: String,
    /// The secondary block (`10.1.0.0/16` for HyperPod, `100.64.0.0/16` for GPU nodes).
    pub cidr: String,
}

/// The pattern an availability zone id parameter or variable must match.
pub const AZ_ID_PATTERN: &str = "^[a-z]{2,}[0-9]+-az[0-9]+$";

/// What the zone id input of zonal subnet `child` is, for template parameters and variables.
pub fn zone_input_description(child: &str) -> &'static str {
    if child == HYPERPOD_SUBNET {
        "Availability Zone id of the HyperPod subnet: the zone of the training plan's reserved capacity (aws sagemaker describe-training-plan)."
    } else {
        "Availability Zone id of the GPU node subnet: the zone of the capacity reservation feeding its nodes, a Capacity Block or an On-Demand Capacity Reservation (aws ec2 describe-capacity-reservations)."
    }
}

/// The zone id `subnet` is pinned to by the description, when it is a zonal subnet of a
/// network in `stack` or an existing subnet (the spread subnets' zones are the deployer's
/// inputs, defaulting to the region's zones).
pub fn zone_of_subnet<'a>(stack: &'a Stack, subnet: &Ref<kind::Subnet>) -> Option<&'a str> {
    stack.nodes().iter().find_map(|n| {
        let any = n.construct.as_any();
        if let Some(existing) = any.downcast_ref::<super::ExistingNetwork>() {
            return existing
                .subnet_at(&n.id, subnet.path())
                .map(|s| s.az_id.as_str());
        }
        any.downcast_ref::<Network>()?
            .zonal_subnets_with_paths(&n.id)
            .find(|(p, _)| p == subnet.path())
            .map(|(_, z)| z.az_id.as_str())
    })
}

/// Whether `subnet` belongs to an imported network (`ExistingNetwork`): its placement is
/// changed by importing another subnet, not by a `Network` builder.
pub fn is_imported_subnet(stack: &Stack, subnet: &Ref<kind::Subnet>) -> bool {
    stack.nodes().iter().any(|n| {
        n.construct
            .as_any()
            .downcast_ref::<super::ExistingNetwork>()
            .is_some_and(|e| e.subnet_at(&n.id, subnet.path()).is_some())
    })
}

/// What a subnet of a network is, for documents that name it outside the templates (a
/// Service's load balancer subnets, a NetworkPolicy's address blocks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubnetFacts {
    /// Its block (`10.192.128.0/24`).
    pub cidr: String,
    /// Its `Name` tag (`kimi-k3-eks-private-1`), which the Load Balancer Controller resolves.
    pub name: String,
    /// Whether it routes to the internet gateway (a public subnet).
    pub public: bool,
    /// What fixes its availability zone.
    pub zone: ZoneKey,
}

/// What fixes a subnet's availability zone, as far as the description knows it. Every subnet
/// a network creates is placed by zone id, each zone an input the deployer may change, so two
/// subnets are known to share a zone only when the same thing fixes both: the same zone-id
/// input, or the same given zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZoneKey {
    /// The zone whose id the deploy-time input of this name holds.
    Input(String),
    /// This zone (an existing subnet's, as given).
    Given(String),
}

/// The name of the zone-id input of zonal subnet `child` of the network with id `network`.
pub fn zone_input_name(network: &str, child: &str) -> String {
    format!("{}AzId", logical_id(&format!("{network}/{child}")))
}

/// The name of the zone-id input of the network's zone `az_index` (0-based): its public and
/// private subnets there.
pub fn spread_zone_input_name(network: &str, az_index: u32) -> String {
    format!("{}Zone{}AzId", logical_id(network), az_index + 1)
}

/// The zone-id input of the network's zone `az_index` in `region`: by default the region's
/// zone at that place among those every account can create EKS cluster subnets in
/// (`catalog::regions::spread_zone_ids`).
pub fn spread_zone_input(network: &str, az_index: u32, region: &str) -> StackInput {
    let n = az_index + 1;
    StackInput {
        name: spread_zone_input_name(network, az_index),
        description: format!(
            "Availability Zone id of the network's zone {n}: its public subnet {n} and private subnet {n} (aws ec2 describe-availability-zones lists the account's)."
        ),
        default: crate::catalog::regions::spread_zone_ids(region)
            .get(az_index as usize)
            .map(|z| (*z).to_owned()),
        pattern: Some(AZ_ID_PATTERN.to_owned()),
        expected: AZ_ID_EXPECTED.to_owned(),
    }
}

/// What a zone-id input holds, completing "must be".
const AZ_ID_EXPECTED: &str = "an Availability Zone id: the region's zone prefix, -az and a number";

/// The zonal subnets of `stack`'s networks that `role` names (`gpu`, `hyperpod`: the child id
/// without `Subnet`, in lower case, as the `hyperforge:subnet` tag has it), in the order the
/// networks were added.
pub fn zonal_subnets_tagged(stack: &Stack, role: &str) -> Vec<Ref<kind::Subnet>> {
    stack
        .nodes()
        .iter()
        .filter_map(|n| {
            let network = n.construct.as_any().downcast_ref::<Network>()?;
            Some(
                network
                    .zonal_subnets_with_paths(&n.id)
                    .filter(|(_, z)| z.id.trim_end_matches("Subnet").eq_ignore_ascii_case(role))
                    .map(|(path, _)| Ref::new(stack.name(), path))
                    .collect::<Vec<_>>(),
            )
        })
        .flatten()
        .collect()
}

/// The facts of `subnet` when it belongs to a valid network of `stack`.
pub fn subnet_facts(stack: &Stack, subnet: &Ref<kind::Subnet>) -> Option<SubnetFacts> {
    stack.nodes().iter().find_map(|n| {
        let any = n.construct.as_any();
        if let Some(existing) = any.downcast_ref::<super::ExistingNetwork>() {
            return existing.subnet_facts(&n.id, subnet.path());
        }
        let network = any.downcast_ref::<Network>()?;
        let child = subnet.path().strip_prefix(&format!("{}/", n.id))?;
        network.subnet_facts(stack.name(), &n.id, child)
    })
}

/// Reports `az_id` when it is not a zone id, or one of another region than `region`.
pub(crate) fn check_zone_id(az_id: &str, region: &str, path: &str, ds: &mut Diagnostics) {
    match AzId::parse(az_id) {
        None => ds.report(
            Code::InvalidAvailabilityZoneId,
            path,
            format!("`{az_id}` is not an availability zone id"),
            "zone ids look like `usw2-az2`; `aws ec2 describe-availability-zones` lists them (ZoneId)",
        ),
        Some(az) if !az.is_in_region(region) => ds.report(
            Code::AvailabilityZoneIdWrongRegion,
            path,
            format!("zone `{az}` is not in the stack's region {region}"),
            format!(
                "zones of {region} start with `{}-az`",
                crate::catalog::regions::zone_id_prefix(region).unwrap_or_default()
            ),
        ),
        Some(_) => {}
    }
}

/// The `Name` tag of the public subnet in zone index `az_index`.
fn public_subnet_name(stack: &str, az_index: u32) -> String {
    format!("{stack}-public-{}", az_index + 1)
}

/// The `Name` tag of the private subnet in zone index `az_index`.
fn private_subnet_name(stack: &str, az_index: u32) -> String {
    format!("{stack}-private-{}", az_index + 1)
}

/// The `Name` tag of zonal subnet `child` (`HyperPodSubnet` -> `<stack>-hyperpod`).
fn zonal_subnet_name(stack: &str, child: &str) -> String {
    format!(
        "{stack}-{}",
        child.trim_end_matches("Subnet").to_ascii_lowercase()
    )
}

/// The most availability zones any AWS region has (us-east-1 has six).
pub const MAX_AVAILABILITY_ZONES: u32 = 6;

/// The zone counts a network may have: EKS needs subnets in 2 zones, no region has more than
/// [`MAX_AVAILABILITY_ZONES`].
pub const AVAILABILITY_ZONES: Ints = Ints::new(2, MAX_AVAILABILITY_ZONES as i64);

/// CloudWatch Logs' retention periods, days.
pub const LOG_RETENTION_DAYS: [u32; 22] = [
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
    3288, 3653,
];

/// The range of [`LOG_RETENTION_DAYS`], the declared range of `flow_log_retention_days`.
pub const LOG_RETENTION_RANGE: Ints = Ints::new(
    LOG_RETENTION_DAYS[0] as i64,
    LOG_RETENTION_DAYS[LOG_RETENTION_DAYS.len() - 1] as i64,
);

/// The child id of the HyperPod subnet.
pub const HYPERPOD_SUBNET: &str = "HyperPodSubnet";
/// The child id of the GPU node subnet.
pub const GPU_SUBNET: &str = "GpuSubnet";

/// The VPC builder.
#[derive(Clone, Debug)]
pub struct Network {
    id: String,
    cidr: String,
    availability_zones: u32,
    nat_gateways: NatGateways,
    zonal_subnets: Vec<ZonalSubnet>,
    flow_log_retention_days: u32,
}

/// The planned layout of a validated [`Network`], shared by every backend.
#[derive(Clone, Debug, PartialEq)]
pub struct NetworkPlan {
    /// The VPC's primary block.
    pub vpc_cidr: Ipv4Cidr,
    /// Public subnets, one per zone (`PublicSubnet1`, ...).
    pub public_subnets: Vec<SubnetPlan>,
    /// Private subnets, one per zone (`PrivateSubnet1`, ...).
    pub private_subnets: Vec<SubnetPlan>,
    /// Zonal subnets on secondary blocks: (child id, block, zone).
    pub zonal: Vec<(&'static str, Ipv4Cidr, AzId)>,
    /// NAT gateways: one, or one per zone.
    pub nat_gateways: NatGateways,
    /// Flow log retention in days.
    pub flow_log_retention_days: u32,
}

/// One planned subnet.
#[derive(Clone, Debug, PartialEq)]
pub struct SubnetPlan {
    /// Child id (`PublicSubnet1`).
    pub id: String,
    /// Its block.
    pub cidr: Ipv4Cidr,
    /// Which of the network's zones (0-based): its zone-id input.
    pub az_index: u32,
}

/// Handles to the network's resources.
#[derive(Clone, Debug)]
pub struct NetworkHandle {
    /// The VPC.
    pub vpc: Ref<kind::Vpc>,
    /// Public subnets, one per zone.
    pub public_subnets: Vec<Ref<kind::Subnet>>,
    /// Private subnets, one per zone (EKS control plane ENIs, system nodes).
    pub private_subnets: Vec<Ref<kind::Subnet>>,
    /// The HyperPod subnet, when configured.
    pub hyperpod_subnet: Option<Ref<kind::Subnet>>,
    /// The GPU node subnet, when configured.
    pub gpu_subnet: Option<Ref<kind::Subnet>>,
}

/// Valid primary VPC prefix lengths: /16 to /20 leaves room for /24../28 subnets.
const VPC_PREFIXES: std::ops::RangeInclusive<u8> = 16..=20;

impl Network {
    /// A VPC with id `id`, `10.192.0.0/16`, two zones, one NAT gateway, flow logs kept a year.
    pub fn new(id: impl Into<String>) -> Self {
        Network {
            id: id.into(),
            cidr: "10.192.0.0/16".to_owned(),
            availability_zones: 2,
            nat_gateways: NatGateways::One,
            zonal_subnets: Vec::new(),
            flow_log_retention_days: 365,
        }
    }

    /// The primary CIDR block (/16 to /20).
    pub fn cidr(mut self, cidr: impl Into<String>) -> Self {
        self.cidr = cidr.into();
        self
    }

    /// How many availability zones get a public and a private subnet (at least 2).
    pub fn availability_zones(mut self, count: u32) -> Self {
        self.availability_zones = count;
        self
    }

    /// One NAT gateway, or one per zone.
    pub fn nat_gateways(mut self, nat: NatGateways) -> Self {
        self.nat_gateways = nat;
        self
    }

    /// Adds the HyperPod subnet: the secondary block `10.1.0.0/16` in zone `az_id`.
    pub fn hyperpod_subnet(self, az_id: impl Into<String>) -> Self {
        self.zonal_subnet(HYPERPOD_SUBNET, az_id, "10.1.0.0/16")
    }

    /// Adds the HyperPod subnet with an explicit secondary block.
    pub fn hyperpod_subnet_with_cidr(
        self,
        az_id: impl Into<String>,
        cidr: impl Into<String>,
    ) -> Self {
        self.zonal_subnet(HYPERPOD_SUBNET, az_id, cidr)
    }

    /// Adds the GPU node subnet: the secondary block `100.64.0.0/16` in zone `az_id` (a Capacity
    /// Block's zone: its instances cannot launch anywhere else).
    pub fn gpu_subnet(self, az_id: impl Into<String>) -> Self {
        self.zonal_subnet(GPU_SUBNET, az_id, "100.64.0.0/16")
    }

    /// Adds the GPU node subnet with an explicit secondary block.
    pub fn gpu_subnet_with_cidr(self, az_id: impl Into<String>, cidr: impl Into<String>) -> Self {
        self.zonal_subnet(GPU_SUBNET, az_id, cidr)
    }

    fn zonal_subnet(
        mut self,
        id: &'static str,
        az_id: impl Into<String>,
        cidr: impl Into<String>,
    ) -> Self {
        self.zonal_subnets.retain(|z| z.id != id);
        self.zonal_subnets.push(ZonalSubnet {
            id,
            az_id: az_id.into(),
            cidr: cidr.into(),
        });
        self
    }

    /// How long VPC flow logs are kept (CloudWatch Logs retention days).
    pub fn flow_log_retention_days(mut self, days: u32) -> Self {
        self.flow_log_retention_days = days;
        self
    }

    /// The zonal subnet with child id `id` (`HyperPodSubnet`, `GpuSubnet`), if any.
    pub fn zonal(&self, id: &str) -> Option<&ZonalSubnet> {
        self.zonal_subnets.iter().find(|z| z.id == id)
    }

    /// The zonal subnets with their paths under construct id `id`.
    pub fn zonal_subnets_with_paths<'a>(
        &'a self,
        id: &'a str,
    ) -> impl Iterator<Item = (String, &'a ZonalSubnet)> + 'a {
        self.zonal_subnets
            .iter()
            .map(move |z| (format!("{id}/{}", z.id), z))
    }

    fn subnet_prefix(vpc: Ipv4Cidr) -> u8 {
        (vpc.prefix() + 8).min(28)
    }

    /// The facts of its subnet `child` (`PrivateSubnet1`) in stack `stack`; `None` when there
    /// is no such subnet or the network has errors.
    pub fn subnet_facts(&self, stack: &str, id: &str, child: &str) -> Option<SubnetFacts> {
        let plan = self.plan()?;
        let planned = |subnets: &[SubnetPlan], public: bool| {
            subnets.iter().find(|s| s.id == child).map(|s| SubnetFacts {
                cidr: s.cidr.to_string(),
                name: if public {
                    public_subnet_name(stack, s.az_index)
                } else {
                    private_subnet_name(stack, s.az_index)
                },
                public,
                zone: ZoneKey::Input(spread_zone_input_name(id, s.az_index)),
            })
        };
        planned(&plan.public_subnets, true)
            .or_else(|| planned(&plan.private_subnets, false))
            .or_else(|| {
                plan.zonal
                    .iter()
                    .find(|(id, _, _)| *id == child)
                    .map(|(child, block, _)| SubnetFacts {
                        cidr: block.to_string(),
                        name: zonal_subnet_name(stack, child),
                        public: false,
                        zone: ZoneKey::Input(zone_input_name(id, child)),
                    })
            })
    }

    /// The planned layout; `None` while the description has errors (see `validate`).
    pub fn plan(&self) -> Option<NetworkPlan> {
        let vpc: Ipv4Cidr = self.cidr.parse().ok()?;
        if !VPC_PREFIXES.contains(&vpc.prefix())
            || !AVAILABILITY_ZONES.contains(i64::from(self.availability_zones))
        {
            return None;
        }
        let prefix = Self::subnet_prefix(vpc);
        let half = 1u32 << (prefix - vpc.prefix() - 1);
        let mut public = Vec::new();
        let mut private = Vec::new();
        for i in 0..self.availability_zones {
            public.push(SubnetPlan {
                id: format!("PublicSubnet{}", i + 1),
                cidr: vpc.subnet(prefix, i)?,
                az_index: i,
            });
            private.push(SubnetPlan {
                id: format!("PrivateSubnet{}", i + 1),
                cidr: vpc.subnet(prefix, half + i)?,
                az_index: i,
            });
        }
        let mut zonal = Vec::new();
        for z in &self.zonal_subnets {
            zonal.push((z.id, z.cidr.parse().ok()?, AzId::parse(&z.az_id)?));
        }
        Some(NetworkPlan {
            vpc_cidr: vpc,
            public_subnets: public,
            private_subnets: private,
            zonal,
            nat_gateways: self.nat_gateways,
            flow_log_retention_days: self.flow_log_retention_days,
        })
    }

    pub(crate) fn validate(&self, stack: &Stack, path: &str, ds: &mut Diagnostics) {
        let vpc = match self.cidr.parse::<Ipv4Cidr>() {
            Ok(vpc) => Some(vpc),
            Err(e) => {
                report_cidr(ds, path, "VPC", &self.cidr, &e);
                None
            }
        };
        if let Some(vpc) = vpc {
            if !VPC_PREFIXES.contains(&vpc.prefix()) {
                ds.report(
                    Code::CidrOutOfRange,
                    path,
                    format!(
                        "VPC block {vpc} is a /{}, hyperforge lays out /16 to /20 VPCs",
                        vpc.prefix()
                    ),
                    "use a /16 (65,536 addresses, e.g. 10.192.0.0/16) to /20 block",
                );
            } else {
                let prefix = Self::subnet_prefix(vpc);
                let half = 1u32 << (prefix - vpc.prefix() - 1);
                // A count beyond any region's is reported on its own (HF0108).
                let zones = self.availability_zones;
                if zones > half && zones <= MAX_AVAILABILITY_ZONES {
                    ds.report(
                        Code::CidrOutOfRange,
                        path,
                        format!(
                            "{zones} zones need {} /{prefix} subnets, but {vpc} holds only {} of them",
                            2 * u64::from(zones),
                            2 * u64::from(half)
                        ),
                        "use fewer zones or a larger VPC block",
                    );
                }
            }
        }
        if self.availability_zones > MAX_AVAILABILITY_ZONES {
            ds.report_field(
                Code::TooManyAvailabilityZones,
                path,
                "availability_zones",
                format!(
                    "{} availability zones requested; no region has more than {MAX_AVAILABILITY_ZONES}",
                    self.availability_zones
                ),
                format!("use 2 to {MAX_AVAILABILITY_ZONES} zones"),
            );
        }
        let spread = crate::catalog::regions::spread_zone_ids(stack.region());
        if !spread.is_empty()
            && self.availability_zones <= MAX_AVAILABILITY_ZONES
            && self.availability_zones as usize > spread.len()
        {
            ds.report_field(
                Code::TooManyAvailabilityZones,
                path,
                "availability_zones",
                format!(
                    "{} availability zones requested; {} has {} where every account can create an EKS cluster's subnets ({})",
                    self.availability_zones,
                    stack.region(),
                    spread.len(),
                    spread.join(", ")
                ),
                format!("use 2 to {} zones in {}", spread.len(), stack.region()),
            );
        }
        if i64::from(self.availability_zones) < AVAILABILITY_ZONES.min {
            ds.report_field(
                Code::TooFewAvailabilityZones,
                path,
                "availability_zones",
                format!(
                    "{} availability zone(s) requested; EKS needs subnets in at least 2",
                    self.availability_zones
                ),
                "use `availability_zones(2)` or more",
            );
        }
        let mut blocks: Vec<Ipv4Cidr> = vpc.into_iter().collect();
        for h in &self.zonal_subnets {
            let sub_path = format!("{path}/{}", h.id);
            match h.cidr.parse::<Ipv4Cidr>() {
                Err(e) => report_cidr(ds, &sub_path, "secondary", &h.cidr, &e),
                Ok(block) => {
                    if !(16..=28).contains(&block.prefix()) {
                        ds.report(
                            Code::CidrOutOfRange,
                            &sub_path,
                            format!(
                                "secondary block {block} is a /{}; VPC blocks are /16 to /28",
                                block.prefix()
                            ),
                            "use a /16 such as 10.1.0.0/16: every pod on the nodes there gets an address",
                        );
                    }
                    if let Some(other) = blocks.iter().find(|b| b.overlaps(block)) {
                        ds.report(
                            Code::CidrOverlap,
                            &sub_path,
                            format!("secondary block {block} overlaps the VPC's block {other}"),
                            "choose a block outside the VPC's other blocks, e.g. 10.1.0.0/16 or 100.64.0.0/16",
                        );
                    }
                    blocks.push(block);
                }
            }
            check_zone_id(&h.az_id, stack.region(), &sub_path, ds);
        }
        if !LOG_RETENTION_DAYS.contains(&self.flow_log_retention_days) {
            ds.report_field(
                Code::InvalidLogRetention,
                path,
                "flow_log_retention_days",
                format!("flow log retention of {} days is not a CloudWatch Logs retention period", self.flow_log_retention_days),
                "use one of 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653",
            );
        }
    }
}

fn report_cidr(ds: &mut Diagnostics, path: &str, what: &str, text: &str, e: &CidrError) {
    ds.report(
        Code::InvalidCidr,
        path,
        format!("{what} CIDR `{text}` is not valid: {e}"),
        "write an IPv4 block with zero host bits, e.g. 10.192.0.0/16",
    );
}

impl Construct for Network {
    type Handle = NetworkHandle;
    const KIND: &'static str = "network";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> NetworkHandle {
        let child = |name: String| format!("{}/{name}", self.id);
        NetworkHandle {
            vpc: Ref::new(stack, child("Vpc".into())),
            // Bounded before validation runs: a count no region has is reported, never built.
            public_subnets: (1..=self.availability_zones.min(MAX_AVAILABILITY_ZONES))
                .map(|i| Ref::new(stack, child(format!("PublicSubnet{i}"))))
                .collect(),
            private_subnets: (1..=self.availability_zones.min(MAX_AVAILABILITY_ZONES))
                .map(|i| Ref::new(stack, child(format!("PrivateSubnet{i}"))))
                .collect(),
            hyperpod_subnet: self
                .zonal(HYPERPOD_SUBNET)
                .map(|_| Ref::new(stack, child(HYPERPOD_SUBNET.into()))),
            gpu_subnet: self
                .zonal(GPU_SUBNET)
                .map(|_| Ref::new(stack, child(GPU_SUBNET.into()))),
        }
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        Network::validate(self, cx.stack, cx.path, ds);
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        // A network without a plan has errors, and synthesis stops at validation.
        let Some(plan) = self.plan() else { return };
        let stack_name = scope.stack().name().to_owned();
        let region = scope.stack().region().to_owned();
        let handle = self.handle(&stack_name);
        let at = |child: &str, kind: Kind, attr: Attr| AttrRef {
            stack: stack_name.clone(),
            path: format!("{}/{child}", self.id),
            kind,
            attr,
        };
        let vpc = handle.vpc.id();
        let all = "0.0.0.0/0";
        scope.add(
            "Vpc",
            Vpc {
                cidr: plan.vpc_cidr.to_string(),
                name_tag: format!("{stack_name}-vpc"),
            },
        );
        scope.add(
            "DefaultSecurityGroup",
            DefaultSecurityGroup {
                vpc: vpc.clone(),
                name_tag: format!("{stack_name}-default-no-traffic"),
            },
        );
        scope.add(
            "InternetGateway",
            InternetGateway {
                vpc: vpc.clone(),
                name_tag: format!("{stack_name}-igw"),
            },
        );
        let igw = at("InternetGateway", Kind::InternetGateway, Attr::Id);
        scope.add(
            "PublicRouteTable",
            RouteTable {
                vpc: vpc.clone(),
                name_tag: format!("{stack_name}-public"),
            },
        );
        let public_rt = at("PublicRouteTable", Kind::RouteTable, Attr::Id);
        scope
            .add(
                "PublicDefaultRoute",
                Route {
                    table: public_rt.clone(),
                    destination: all.to_owned(),
                    target: RouteTarget::InternetGateway(igw.clone()),
                },
            )
            .acknowledge(
                Rule::UNRESTRICTED_ROUTE_TO_INTERNET_GATEWAY,
                PUBLIC_ROUTE_REASON,
            );
        let subnet = |id: &str| at(id, Kind::Subnet, Attr::Id);
        let mut nats = Vec::new();
        for sp in &plan.public_subnets {
            scope.add(
                &sp.id,
                Subnet {
                    vpc: vpc.clone(),
                    cidr: sp.cidr.to_string(),
                    zone_id: spread_zone_input(&self.id, sp.az_index, &region),
                    tags: vec![
                        (
                            "Name".to_owned(),
                            public_subnet_name(&stack_name, sp.az_index),
                        ),
                        ("kubernetes.io/role/elb".to_owned(), "1".to_owned()),
                    ],
                },
            );
            scope.add(
                &format!("{}RouteTableAssociation", sp.id),
                SubnetRouteTableAssociation {
                    table: public_rt.clone(),
                    subnet: subnet(&sp.id),
                },
            );
            let wants_nat = match plan.nat_gateways {
                NatGateways::One => sp.az_index == 0,
                NatGateways::PerAz => true,
            };
            if wants_nat {
                let n = sp.az_index + 1;
                let eip = format!("NatEip{n}");
                scope.add(
                    &eip,
                    Eip {
                        internet_gateway: igw.clone(),
                        name_tag: format!("{stack_name}-nat-{n}"),
                    },
                );
                let nat = format!("NatGateway{n}");
                scope.add(
                    &nat,
                    NatGateway {
                        address: at(&eip, Kind::Eip, Attr::AllocationId),
                        subnet: subnet(&sp.id),
                        internet_gateway: igw.clone(),
                        name_tag: format!("{stack_name}-nat-{n}"),
                    },
                );
                nats.push(at(&nat, Kind::NatGateway, Attr::Id));
            }
        }
        // Private subnets leave through the NAT gateway of their zone, or the last one.
        let nat_for = |az_index: u32| -> Option<AttrRef> {
            let i = (az_index as usize).min(nats.len().saturating_sub(1));
            nats.get(i).cloned()
        };
        let mut private_route_tables = Vec::new();
        let mut private_route =
            |scope: &mut Scope<'_>, id: &str, tag: String, nat: Option<AttrRef>| {
                let table = format!("{id}RouteTable");
                scope.add(
                    &table,
                    RouteTable {
                        vpc: vpc.clone(),
                        name_tag: tag,
                    },
                );
                let table = at(&table, Kind::RouteTable, Attr::Id);
                if let Some(nat) = nat {
                    scope.add(
                        &format!("{id}DefaultRoute"),
                        Route {
                            table: table.clone(),
                            destination: all.to_owned(),
                            target: RouteTarget::NatGateway(nat),
                        },
                    );
                }
                scope.add(
                    &format!("{id}RouteTableAssociation"),
                    SubnetRouteTableAssociation {
                        table: table.clone(),
                        subnet: subnet(id),
                    },
                );
                private_route_tables.push(table);
            };
        let internal_elb = || ("kubernetes.io/role/internal-elb".to_owned(), "1".to_owned());
        for sp in &plan.private_subnets {
            let name = private_subnet_name(&stack_name, sp.az_index);
            scope.add(
                &sp.id,
                Subnet {
                    vpc: vpc.clone(),
                    cidr: sp.cidr.to_string(),
                    zone_id: spread_zone_input(&self.id, sp.az_index, &region),
                    tags: vec![("Name".to_owned(), name.clone()), internal_elb()],
                },
            );
            private_route(scope, &sp.id, name, nat_for(sp.az_index));
        }
        for (child, block, az_id) in &plan.zonal {
            let short = child.trim_end_matches("Subnet");
            let cidr_block = format!("{short}CidrBlock");
            scope.add(
                &cidr_block,
                VpcCidrBlock {
                    vpc: vpc.clone(),
                    cidr: block.to_string(),
                },
            );
            let name = zonal_subnet_name(&stack_name, child);
            let zone = StackInput {
                name: zone_input_name(&self.id, child),
                description: zone_input_description(child).to_owned(),
                default: Some(az_id.to_string()),
                pattern: Some(AZ_ID_PATTERN.to_owned()),
                expected: AZ_ID_EXPECTED.to_owned(),
            };
            let cidr_block = scope.path(&cidr_block);
            scope
                .add(
                    child,
                    Subnet {
                        vpc: vpc.clone(),
                        cidr: block.to_string(),
                        zone_id: zone,
                        tags: vec![
                            ("Name".to_owned(), name.clone()),
                            internal_elb(),
                            ("hyperforge:subnet".to_owned(), short.to_ascii_lowercase()),
                        ],
                    },
                )
                .after([cidr_block]);
            private_route(scope, child, name, nat_for(0));
        }
        scope.add(
            "S3Endpoint",
            GatewayEndpoint {
                vpc: vpc.clone(),
                service: Text::lit("com.amazonaws.")
                    .push_pseudo(Pseudo::Region)
                    .push_lit(".s3"),
                route_tables: private_route_tables,
            },
        );
        self.expand_flow_logs(scope, &stack_name, vpc, plan.flow_log_retention_days);
    }
}

impl Network {
    /// The VPC's flow logs: a KMS key, the log group it encrypts, the role that delivers and
    /// the flow log itself.
    fn expand_flow_logs(
        &self,
        scope: &mut Scope<'_>,
        stack_name: &str,
        vpc: AttrRef,
        retention_days: u32,
    ) {
        let at = |child: &str, kind: Kind, attr: Attr| AttrRef {
            stack: stack_name.to_owned(),
            path: format!("{}/{child}", self.id),
            kind,
            attr,
        };
        let group_name = format!("/hyperforge/{stack_name}/vpc-flow-logs");
        let log_group_arn = Text::arn(
            "logs",
            true,
            true,
            Text::lit(format!("log-group:{group_name}")),
        );
        let logs_service = Text::lit("logs.")
            .push_pseudo(Pseudo::Region)
            .push_lit(".amazonaws.com");
        scope.add(
            "FlowLogKey",
            KmsKey {
                description: format!("Encrypts the VPC flow logs of {stack_name}"),
                policy: account_key_policy(Some(
                    Statement::allow([
                        "kms:Encrypt*",
                        "kms:Decrypt*",
                        "kms:ReEncrypt*",
                        "kms:GenerateDataKey*",
                        "kms:Describe*",
                    ])
                    .sid("CloudWatchLogsUse")
                    .principal(PrincipalKind::Service, logs_service)
                    .resource("*")
                    .condition(
                        "ArnLike",
                        "kms:EncryptionContext:aws:logs:arn",
                        vec![log_group_arn.clone()],
                    ),
                )),
            },
        );
        scope.add(
            "FlowLogGroup",
            LogGroup {
                name: group_name,
                key: at("FlowLogKey", Kind::KmsKey, Attr::Arn),
                retention_days,
            },
        );
        scope.add(
            "FlowLogRole",
            Role {
                description: "Lets VPC Flow Logs write to its log group".to_owned(),
                trust: service_trust("vpc-flow-logs.amazonaws.com"),
                managed: Vec::new(),
                inline: vec![(
                    "write-flow-logs".to_owned(),
                    PolicyDocument::new().statement(
                        Statement::allow([
                            "logs:CreateLogStream",
                            "logs:PutLogEvents",
                            "logs:DescribeLogStreams",
                        ])
                        .resource(log_group_arn.clone())
                        .resource(log_group_arn.push_lit(":*"))
                        .wildcards_because(crate::resources::iam::LOG_STREAMS_REASON),
                    ),
                )],
                name: None,
            },
        );
        scope.add(
            "FlowLog",
            FlowLog {
                vpc,
                log_group: at("FlowLogGroup", Kind::LogGroup, Attr::Arn),
                role: at("FlowLogRole", Kind::Role, Attr::Arn),
            },
        );
    }
}

// --- Stack-file form -------------------------------------------------------------------------

stack_file_shape! {
    pub mod zonal_subnet_fields = "ZonalSubnet", "A subnet in one availability zone, from a secondary CIDR block of the VPC." {
        AZ_ID: req "az_id", Ty::Str, "The zone id (e.g. `usw2-az2`): the capacity's zone.";
        CIDR: opt "cidr", Ty::Str, "The secondary block (default `10.1.0.0/16` for HyperPod, `100.64.0.0/16` for GPU nodes).";
    }
}

stack_file_shape! {
    pub mod network_fields = <Network as Construct>::KIND, "A VPC with public and private subnets, NAT, flow logs, and optional HyperPod and GPU subnets." {
        ID: req "network", Ty::Str, "The construct id.";
        CIDR: opt "cidr", Ty::Str, default "10.192.0.0/16", "The primary CIDR block, /16 to /20.";
        AVAILABILITY_ZONES: opt "availability_zones", Ty::U32(super::AVAILABILITY_ZONES), default "2", "Zones with a public and a private subnet.";
        NAT_GATEWAYS: opt "nat_gateways", Ty::Enum(NatGateways::NAMES), default "one", "One NAT gateway, or one per zone.";
        HYPERPOD_SUBNET: opt "hyperpod_subnet", Ty::Obj(&zonal_subnet_fields::SHAPE), "The HyperPod subnet, in the training plan's zone.";
        GPU_SUBNET: opt "gpu_subnet", Ty::Obj(&zonal_subnet_fields::SHAPE), "The GPU node subnet, in the Capacity Block's zone.";
        FLOW_LOG_RETENTION_DAYS: opt "flow_log_retention_days", Ty::U32(super::LOG_RETENTION_RANGE), default "365", "Flow log retention in days.";
    }
}

/// A zonal subnet's zone and optional secondary block.
fn zonal_subnet(
    r: &mut dyn super::stack_file::FieldReader,
    field: &'static super::stack_file::Field,
) -> Option<(String, Option<String>)> {
    use zonal_subnet_fields as f;
    super::stack_file::object(r, field, |z| {
        let az = z.text(&f::AZ_ID);
        let cidr = z.text(&f::CIDR);
        Some((az?, cidr))
    })
    .flatten()
}

impl super::stack_file::StackFileConstruct for Network {
    const SHAPE: &'static super::stack_file::Shape = &network_fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        use network_fields as f;
        let mut c = Network::new(id);
        if let Some(v) = r.text(&f::CIDR) {
            c = c.cidr(v);
        }
        if let Some(v) = r.u32(&f::AVAILABILITY_ZONES) {
            c = c.availability_zones(v);
        }
        if let Some(v) = r
            .text(&f::NAT_GATEWAYS)
            .and_then(|n| NatGateways::from_name(&n))
        {
            c = c.nat_gateways(v);
        }
        c = match zonal_subnet(r, &f::HYPERPOD_SUBNET) {
            Some((az, Some(cidr))) => c.hyperpod_subnet_with_cidr(az, cidr),
            Some((az, None)) => c.hyperpod_subnet(az),
            None => c,
        };
        c = match zonal_subnet(r, &f::GPU_SUBNET) {
            Some((az, Some(cidr))) => c.gpu_subnet_with_cidr(az, cidr),
            Some((az, None)) => c.gpu_subnet(az),
            None => c,
        };
        if let Some(v) = r.u32(&f::FLOW_LOG_RETENTION_DAYS) {
            c = c.flow_log_retention_days(v);
        }
        Some(c)
    }
}

/// Why the public route table sends every address to the internet gateway.
const PUBLIC_ROUTE_REASON: &str = "The route serves the public subnets only, which hold the NAT \
    gateways the private subnets reach the internet through (container images, model weights, AWS \
    APIs without a VPC endpoint) and an internet-facing load balancer when the workload asks for \
    one. Their instances get no public address (MapPublicIpOnLaunch is false), and every node and \
    pod runs in the private subnets.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_zone_count_is_refused_without_being_built() {
        let mut stack = Stack::new("demo", "us-west-2");
        let f = stack.cloudformation_stage("foundation");
        let net = stack.add(f, Network::new("Network").availability_zones(u32::MAX));
        assert_eq!(net.private_subnets.len(), MAX_AVAILABILITY_ZONES as usize);
        let ds = crate::app::App::new().stack(stack).validate();
        assert!(
            ds.contains(Code::TooManyAvailabilityZones, "demo/Network"),
            "{ds}"
        );
    }

    #[test]
    fn default_layout() {
        let plan = Network::new("Network")
            .hyperpod_subnet("usw2-az2")
            .plan()
            .unwrap();
        let cidrs: Vec<String> = plan
            .public_subnets
            .iter()
            .chain(&plan.private_subnets)
            .map(|s| s.cidr.to_string())
            .collect();
        assert_eq!(
            cidrs,
            [
                "10.192.0.0/24",
                "10.192.1.0/24",
                "10.192.128.0/24",
                "10.192.129.0/24"
            ]
        );
        let (id, block, az) = plan.zonal[0].clone();
        assert_eq!(id, "HyperPodSubnet");
        assert_eq!(block.to_string(), "10.1.0.0/16");
        assert_eq!(az.as_str(), "usw2-az2");
    }

    #[test]
    fn small_vpc_layout() {
        let plan = Network::new("N")
            .cidr("10.0.0.0/20")
            .availability_zones(3)
            .plan()
            .unwrap();
        assert_eq!(plan.public_subnets[2].cidr.to_string(), "10.0.0.32/28");
        assert_eq!(plan.private_subnets[0].cidr.to_string(), "10.0.8.0/28");
    }
}
