//! Imports: resources the account already has (a VPC and its subnets, an EKS cluster, a bucket,
//! a KMS key), described by the values AWS gives them. An import creates nothing; its handle is
//! the same type a created resource's is (`NetworkHandle`, `EksClusterHandle`, `Ref<Bucket>`),
//! so every construct takes either, and every reference to it reads the given value in every
//! format ([`crate::resources::Existing`]). Imports are checked like created resources: ids and
//! ARNs by their AWS forms, zone ids against the stack's region, subnets by kind and zone.

use super::network::SubnetFacts;
use super::{Construct, Context, EksClusterFacts, EksClusterHandle, Facts, NetworkHandle};
use crate::app::text::{Pseudo, Text};
use crate::app::{kind, Attr, Kind, Ref};
use crate::constructs::cidr::Ipv4Cidr;
use crate::diagnostics::{Code, Diagnostics};
use crate::resources::{Existing, Scope};

/// What an existing subnet is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubnetRole {
    /// Routes to an internet gateway (internet-facing load balancers).
    Public,
    /// Routes out through NAT (the EKS control plane's interfaces, system nodes, internal
    /// load balancers).
    Private,
    /// The private subnet of the GPU nodes, in their Capacity Block's zone.
    Gpu,
    /// The private subnet of the HyperPod nodes, in their training plan's zone.
    HyperPod,
}

/// One subnet of an existing network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExistingSubnet {
    /// `subnet-0123456789abcdef0`.
    pub id: String,
    /// Its zone id (`usw2-az2`).
    pub az_id: String,
    /// Its IPv4 block (`10.0.16.0/20`): network policies admit load balancers by it.
    pub cidr: String,
    /// What it is for.
    pub role: SubnetRole,
}

/// An existing VPC and the subnets the stack uses, as `aws ec2 describe-subnets` lists them.
/// The handle is a [`NetworkHandle`], so clusters, node groups and load balancers take it as
/// they take a created network's.
///
/// ```
/// use hyperforge::constructs::ExistingNetwork;
/// let network = ExistingNetwork::new("Network", "vpc-0a1b2c3d4e5f60718")
///     .private_subnet("subnet-0a1b2c3d4e5f60711", "usw2-az1", "10.0.0.0/19")
///     .private_subnet("subnet-0a1b2c3d4e5f60712", "usw2-az2", "10.0.32.0/19")
///     .gpu_subnet("subnet-0a1b2c3d4e5f60713", "usw2-az2", "10.0.64.0/19");
/// ```
#[derive(Clone, Debug)]
pub struct ExistingNetwork {
    id: String,
    vpc_id: String,
    subnets: Vec<ExistingSubnet>,
}

impl ExistingNetwork {
    /// The VPC `vpc_id`, imported as construct `id`.
    pub fn new(id: impl Into<String>, vpc_id: impl Into<String>) -> Self {
        ExistingNetwork {
            id: id.into(),
            vpc_id: vpc_id.into(),
            subnets: Vec::new(),
        }
    }

    /// A subnet `subnet_id` in zone `az_id` with block `cidr`, playing `role` (the methods
    /// below name the role).
    pub fn subnet(
        mut self,
        role: SubnetRole,
        subnet_id: impl Into<String>,
        az_id: impl Into<String>,
        cidr: impl Into<String>,
    ) -> Self {
        self.subnets.push(ExistingSubnet {
            id: subnet_id.into(),
            az_id: az_id.into(),
            cidr: cidr.into(),
            role,
        });
        self
    }
}

/// The per-role shorthands of [`ExistingNetwork::subnet`].
macro_rules! subnet_roles {
    ($($(#[$doc:meta])* $method:ident => $role:ident),* $(,)?) => {
        impl ExistingNetwork {
            $(
                $(#[$doc])*
                pub fn $method(
                    self,
                    subnet_id: impl Into<String>,
                    az_id: impl Into<String>,
                    cidr: impl Into<String>,
                ) -> Self {
                    self.subnet(SubnetRole::$role, subnet_id, az_id, cidr)
                }
            )*
        }
    };
}

subnet_roles! {
    /// A private subnet (one per zone; EKS wants two zones at least).
    private_subnet => Private,
    /// A public subnet.
    public_subnet => Public,
    /// The GPU nodes' private subnet, in the zone of their Capacity Block.
    gpu_subnet => Gpu,
    /// The HyperPod nodes' private subnet, in the zone of their training plan.
    hyperpod_subnet => HyperPod,
}

impl ExistingNetwork {
    /// The imported subnets, in the order given.
    pub fn subnets(&self) -> &[ExistingSubnet] {
        &self.subnets
    }

    /// Each subnet with its child id (`PrivateSubnet1`, `PublicSubnet1`, `GpuSubnet`,
    /// `HyperPodSubnet`), the names a created network gives them.
    fn children(&self) -> impl Iterator<Item = (String, &ExistingSubnet)> {
        let (mut public, mut private) = (0, 0);
        self.subnets.iter().map(move |s| {
            let child = match s.role {
                SubnetRole::Public => {
                    public += 1;
                    format!("PublicSubnet{public}")
                }
                SubnetRole::Private => {
                    private += 1;
                    format!("PrivateSubnet{private}")
                }
                SubnetRole::Gpu => super::network::GPU_SUBNET.to_owned(),
                SubnetRole::HyperPod => super::network::HYPERPOD_SUBNET.to_owned(),
            };
            (child, s)
        })
    }

    /// The subnet at construct path `path` of this import placed as `node_id`.
    pub(crate) fn subnet_at(&self, node_id: &str, path: &str) -> Option<&ExistingSubnet> {
        let child = path.strip_prefix(node_id)?.strip_prefix('/')?;
        self.children().find(|(c, _)| c == child).map(|(_, s)| s)
    }

    /// The facts of the subnet at `path`, as a created network's subnets have them: the
    /// Load Balancer Controller resolves a subnet by its id as well as by its `Name` tag.
    pub(crate) fn subnet_facts(&self, node_id: &str, path: &str) -> Option<SubnetFacts> {
        let s = self.subnet_at(node_id, path)?;
        Some(SubnetFacts {
            cidr: s.cidr.clone(),
            name: s.id.clone(),
            public: s.role == SubnetRole::Public,
            zone: super::network::ZoneKey::Given(s.az_id.clone()),
        })
    }
}

/// The most subnets an import may list (a VPC holds 200 by default; a stack uses a few).
pub const MAX_SUBNETS: usize = 64;

/// Whether `id` is `<prefix>-` and 8 or 17 lowercase hex digits (EC2's resource id forms).
fn is_ec2_id(id: &str, prefix: &str) -> bool {
    id.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|hex| {
            matches!(hex.len(), 8 | 17)
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

impl Construct for ExistingNetwork {
    type Handle = NetworkHandle;
    const KIND: &'static str = "existing_network";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> NetworkHandle {
        let of_role = |role: SubnetRole| {
            self.children()
                .filter(|(_, s)| s.role == role)
                .map(|(c, _)| Ref::<kind::Subnet>::new(stack, format!("{}/{c}", self.id)))
                .collect::<Vec<_>>()
        };
        NetworkHandle {
            vpc: Ref::new(stack, format!("{}/Vpc", self.id)),
            public_subnets: of_role(SubnetRole::Public),
            private_subnets: of_role(SubnetRole::Private),
            hyperpod_subnet: of_role(SubnetRole::HyperPod).into_iter().next(),
            gpu_subnet: of_role(SubnetRole::Gpu).into_iter().next(),
        }
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        let path = cx.path;
        if !is_ec2_id(&self.vpc_id, "vpc") {
            ds.report_field(
                Code::InvalidExistingResource,
                path,
                "vpc_id",
                format!("`{}` is not a VPC id", self.vpc_id),
                "VPC ids are `vpc-` and 8 or 17 hex digits (`aws ec2 describe-vpcs --query 'Vpcs[].VpcId'`)",
            );
        }
        if self.subnets.len() > MAX_SUBNETS {
            ds.report(
                Code::ExistingResourceIncomplete,
                path,
                format!(
                    "{} subnets are imported; at most {MAX_SUBNETS} are",
                    self.subnets.len()
                ),
                "import the subnets the stack's clusters, nodes and load balancers use",
            );
            return;
        }
        let mut seen = std::collections::BTreeSet::new();
        for (child, s) in self.children() {
            let at = format!("{path}/{child}");
            if !is_ec2_id(&s.id, "subnet") {
                ds.report(
                    Code::InvalidExistingResource,
                    &at,
                    format!("`{}` is not a subnet id", s.id),
                    "subnet ids are `subnet-` and 8 or 17 hex digits (`aws ec2 describe-subnets --query 'Subnets[].SubnetId'`)",
                );
            }
            if !seen.insert(s.id.as_str()) {
                ds.report(
                    Code::ExistingResourceIncomplete,
                    &at,
                    format!("subnet `{}` is imported twice", s.id),
                    "list each subnet once, with the role it plays",
                );
            }
            if s.cidr.parse::<Ipv4Cidr>().is_err() {
                ds.report(
                    Code::InvalidCidr,
                    &at,
                    format!("`{}` is not the IPv4 block of subnet `{}`", s.cidr, s.id),
                    "give the subnet's CidrBlock as `aws ec2 describe-subnets` shows it, e.g. 10.0.32.0/19",
                );
            }
            super::network::check_zone_id(&s.az_id, cx.stack.region(), &at, ds);
        }
        for (role, what) in [(SubnetRole::Gpu, "GPU"), (SubnetRole::HyperPod, "HyperPod")] {
            if self.subnets.iter().filter(|s| s.role == role).count() > 1 {
                ds.report(
                    Code::ExistingResourceIncomplete,
                    path,
                    format!("more than one {what} subnet is imported"),
                    "import one: the nodes of a reservation live in its one zone",
                );
            }
        }
        let zones: std::collections::BTreeSet<&str> = self
            .subnets
            .iter()
            .filter(|s| s.role == SubnetRole::Private)
            .map(|s| s.az_id.as_str())
            .collect();
        if zones.len() < 2 {
            ds.report(
                Code::ExistingResourceIncomplete,
                path,
                format!(
                    "the import has private subnets in {} availability zone(s); EKS needs two at least",
                    zones.len()
                ),
                "import a private subnet in each of two zones or more (`private_subnet`)",
            );
        }
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        scope.add(
            "Vpc",
            Existing {
                kind: Kind::Vpc,
                values: vec![(Attr::Id, Text::lit(&self.vpc_id))],
            },
        );
        for (child, s) in self.children() {
            scope.add(
                &child,
                Existing {
                    kind: Kind::Subnet,
                    values: vec![(Attr::Id, Text::lit(&s.id))],
                },
            );
        }
    }
}

/// An existing EKS cluster, as `aws eks describe-cluster` shows it. The handle is an
/// [`EksClusterHandle`], so node groups, controllers, the inference operator and workloads take
/// it as they take a created cluster's. What hyperforge's own clusters have, an imported one
/// must have too: authentication with access entries (`API` or `API_AND_CONFIG_MAP`), as node
/// groups and controllers are admitted through them; the `eks-pod-identity-agent` add-on, as
/// the controllers', Fluent Bit's and the model servers' roles reach their pods through EKS
/// Pod Identity; an IAM OIDC provider for its issuer when a construct uses roles for service
/// accounts (the inference operator); and an API reachable from where the runbook's kubectl
/// and helm steps run. What the stack's constructs rely on it running is stated with
/// [`ExistingEksCluster::runs`] and checked (`HF0373`, `HF0383`); the runbook lists it.
///
/// ```
/// use hyperforge::constructs::{ClusterAddOn, ExistingEksCluster};
/// let cluster = ExistingEksCluster::new("Eks", "ml-platform")
///     .oidc_issuer_url("https://oidc.eks.us-west-2.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF")
///     .cluster_security_group_id("sg-0a1b2c3d4e5f60718")
///     .kubernetes_version("1.33")
///     .runs(ClusterAddOn::PodIdentityAgent)
///     .runs(ClusterAddOn::NvidiaDevicePlugin);
/// ```
#[derive(Clone, Debug)]
pub struct ExistingEksCluster {
    id: String,
    name: String,
    oidc_issuer_url: Option<String>,
    cluster_security_group_id: Option<String>,
    secrets_key_arn: Option<String>,
    kubernetes_version: String,
    runs: Vec<ClusterAddOn>,
}

/// What an imported cluster runs already that a stack's constructs rely on: stated by the
/// description (synthesis looks nothing up), checked by the rules, listed in the runbook's
/// prerequisites.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ClusterAddOn {
    /// The `eks-pod-identity-agent` add-on: the roles Pod Identity associations give service
    /// accounts (the weights stager's, Fluent Bit's, the controllers') reach pods through it.
    PodIdentityAgent,
    /// The AWS Load Balancer Controller: it makes the load balancer of a `Service` annotated
    /// `aws-load-balancer-type: external` (a served model's endpoint).
    LoadBalancerController,
    /// The NVIDIA device plugin: nodes advertise `nvidia.com/gpu`, which GPU pods request.
    NvidiaDevicePlugin,
}

impl ClusterAddOn {
    /// What it is, for messages and the runbook.
    pub fn describe(self) -> &'static str {
        match self {
            ClusterAddOn::PodIdentityAgent => {
                "the EKS Pod Identity agent add-on (`eks-pod-identity-agent`)"
            }
            ClusterAddOn::LoadBalancerController => "the AWS Load Balancer Controller",
            ClusterAddOn::NvidiaDevicePlugin => {
                "the NVIDIA device plugin (nodes advertise `nvidia.com/gpu`)"
            }
        }
    }

    /// The builder call stating it.
    pub fn stated(self) -> String {
        format!("ExistingEksCluster::runs(ClusterAddOn::{self:?})")
    }
}

impl ExistingEksCluster {
    /// The cluster named `name`, imported as construct `id`; Kubernetes 1.33 unless told.
    pub fn new(id: impl Into<String>, name: impl Into<String>) -> Self {
        ExistingEksCluster {
            id: id.into(),
            name: name.into(),
            oidc_issuer_url: None,
            cluster_security_group_id: None,
            secrets_key_arn: None,
            kubernetes_version: "1.33".to_owned(),
            runs: Vec::new(),
        }
    }

    /// States that the cluster runs `add_on` already (`aws eks list-addons`, `helm list -A`):
    /// the stack's constructs that rely on it are then accepted, and the runbook lists it
    /// among the prerequisites.
    pub fn runs(mut self, add_on: ClusterAddOn) -> Self {
        if !self.runs.contains(&add_on) {
            self.runs.push(add_on);
        }
        self
    }

    /// Its OIDC issuer (`cluster.identity.oidc.issuer`); roles for service accounts and the
    /// IAM OIDC provider's ARN need it. The provider must exist in the account.
    pub fn oidc_issuer_url(mut self, url: impl Into<String>) -> Self {
        self.oidc_issuer_url = Some(url.into());
        self
    }

    /// The security group EKS created for it (`resourcesVpcConfig.clusterSecurityGroupId`).
    pub fn cluster_security_group_id(mut self, id: impl Into<String>) -> Self {
        self.cluster_security_group_id = Some(id.into());
        self
    }

    /// The KMS key encrypting its secrets (`encryptionConfig[].provider.keyArn`).
    pub fn secrets_key_arn(mut self, arn: impl Into<String>) -> Self {
        self.secrets_key_arn = Some(arn.into());
        self
    }

    /// Its Kubernetes version (`version`).
    pub fn kubernetes_version(mut self, version: impl Into<String>) -> Self {
        self.kubernetes_version = version.into();
        self
    }

    /// The issuer's host and path (`oidc.eks.<region>.amazonaws.com/id/<id>`).
    fn issuer_host_path(&self) -> Option<&str> {
        self.oidc_issuer_url.as_deref()?.strip_prefix("https://")
    }
}

/// Whether `url` is an EKS OIDC issuer of `region`.
fn is_issuer_url(url: &str, region: &str) -> bool {
    url.strip_prefix(&format!("https://oidc.eks.{region}.amazonaws.com/id/"))
        .is_some_and(|id| {
            !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric())
        })
}

/// Whether `arn` is a KMS key ARN of `region`: `arn:<partition>:kms:<region>:<account>:key/<id>`.
fn is_kms_key_arn(arn: &str, region: &str) -> bool {
    crate::app::arn::Arn::parse(arn).is_some_and(|a| {
        a.service == "kms"
            && a.region == region
            && a.account.len() == 12
            && a.resource.strip_prefix("key/").is_some_and(|id| {
                !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
            })
    })
}

impl Construct for ExistingEksCluster {
    type Handle = EksClusterHandle;
    const KIND: &'static str = "existing_eks_cluster";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> EksClusterHandle {
        let at = |child: &str| format!("{}/{child}", self.id);
        EksClusterHandle {
            cluster: Ref::new(stack, at("Cluster")),
            oidc_provider: Ref::new(stack, at("OidcProvider")),
            secrets_key: Ref::new(stack, at("SecretsKey")),
            name: self.name.clone(),
        }
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        let path = cx.path;
        if !super::eks::is_cluster_name(&self.name) {
            ds.report_field(
                Code::InvalidExistingResource,
                path,
                "name",
                format!("`{}` is not an EKS cluster name", self.name),
                "EKS cluster names are 1-100 characters: a letter or digit, then letters, digits, `-` and `_` (`aws eks list-clusters`)",
            );
        }
        if let Some(url) = &self.oidc_issuer_url {
            if !is_issuer_url(url, cx.stack.region()) {
                ds.report_field(
                    Code::InvalidExistingResource,
                    path,
                    "oidc_issuer_url",
                    format!("`{url}` is not an EKS OIDC issuer of {}", cx.stack.region()),
                    format!(
                        "copy it from `aws eks describe-cluster --name {} --query cluster.identity.oidc.issuer`: https://oidc.eks.{}.amazonaws.com/id/<id>",
                        self.name,
                        cx.stack.region()
                    ),
                );
            }
        }
        if let Some(sg) = &self.cluster_security_group_id {
            if !is_ec2_id(sg, "sg") {
                ds.report_field(
                    Code::InvalidExistingResource,
                    path,
                    "cluster_security_group_id",
                    format!("`{sg}` is not a security group id"),
                    "security group ids are `sg-` and 8 or 17 hex digits (`aws eks describe-cluster --query cluster.resourcesVpcConfig.clusterSecurityGroupId`)",
                );
            }
        }
        if let Some(arn) = &self.secrets_key_arn {
            if !is_kms_key_arn(arn, cx.stack.region()) {
                ds.report_field(
                    Code::InvalidExistingResource,
                    path,
                    "secrets_key_arn",
                    format!("`{arn}` is not a KMS key ARN of {}", cx.stack.region()),
                    "key ARNs are arn:aws:kms:<region>:<account>:key/<key id>",
                );
            }
        }
        let minor = self
            .kubernetes_version
            .strip_prefix("1.")
            .and_then(|m| m.parse::<u32>().ok());
        if !matches!(minor, Some(30..=34)) {
            ds.report_field(
                Code::UnsupportedKubernetesVersion,
                path,
                "kubernetes_version",
                format!(
                    "Kubernetes version `{}` is not supported",
                    self.kubernetes_version
                ),
                "hyperforge supports clusters of 1.30 to 1.34; upgrade the cluster first",
            );
        }
    }

    fn facts(&self, _cx: &Context<'_>) -> Facts<'_> {
        Facts {
            eks_cluster: Some(EksClusterFacts {
                name: self.name.clone(),
                resource_path: format!("{}/Cluster", self.id),
                imported: true,
                kubernetes_version: self.kubernetes_version.clone(),
                admin_host: None,
                runs: self.runs.clone(),
            }),
            ..Facts::default()
        }
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        let arn = Text::lit("arn:")
            .push_pseudo(Pseudo::Partition)
            .push_lit(":eks:")
            .push_pseudo(Pseudo::Region)
            .push_lit(":")
            .push_pseudo(Pseudo::AccountId)
            .push_lit(format!(":cluster/{}", self.name));
        let mut values = vec![(Attr::Name, Text::lit(&self.name)), (Attr::Arn, arn)];
        if let Some(url) = &self.oidc_issuer_url {
            values.push((Attr::OidcIssuerUrl, Text::lit(url)));
        }
        if let Some(sg) = &self.cluster_security_group_id {
            values.push((Attr::ClusterSecurityGroupId, Text::lit(sg)));
        }
        scope.add(
            "Cluster",
            Existing {
                kind: Kind::EksCluster,
                values,
            },
        );
        let provider = self.issuer_host_path().map(|host_path| {
            Text::lit("arn:")
                .push_pseudo(Pseudo::Partition)
                .push_lit(":iam::")
                .push_pseudo(Pseudo::AccountId)
                .push_lit(format!(":oidc-provider/{host_path}"))
        });
        scope.add(
            "OidcProvider",
            Existing {
                kind: Kind::OidcProvider,
                values: provider.map(|p| vec![(Attr::Arn, p)]).unwrap_or_default(),
            },
        );
        scope.add(
            "SecretsKey",
            Existing {
                kind: Kind::KmsKey,
                values: self
                    .secrets_key_arn
                    .iter()
                    .map(|arn| (Attr::Arn, Text::lit(arn)))
                    .collect(),
            },
        );
    }
}

/// An existing S3 bucket, by name.
#[derive(Clone, Debug)]
pub struct ExistingBucket {
    id: String,
    name: String,
}

impl ExistingBucket {
    /// The bucket `name`, imported as construct `id`.
    pub fn new(id: impl Into<String>, name: impl Into<String>) -> Self {
        ExistingBucket {
            id: id.into(),
            name: name.into(),
        }
    }
}

impl Construct for ExistingBucket {
    type Handle = Ref<kind::Bucket>;
    const KIND: &'static str = "existing_bucket";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> Ref<kind::Bucket> {
        Ref::new(stack, format!("{}/Bucket", self.id))
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        if !super::weights::is_existing_bucket_name(&self.name) {
            ds.report_field(
                Code::InvalidExistingResource,
                cx.path,
                "name",
                format!("`{}` is not an S3 bucket name", self.name),
                "bucket names are 3-63 lowercase letters, digits, `.` and `-`, starting and ending with a letter or digit",
            );
        }
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        let arn = Text::lit("arn:")
            .push_pseudo(Pseudo::Partition)
            .push_lit(format!(":s3:::{}", self.name));
        scope.add(
            "Bucket",
            Existing {
                kind: Kind::Bucket,
                values: vec![(Attr::Name, Text::lit(&self.name)), (Attr::Arn, arn)],
            },
        );
    }
}

/// An existing customer managed KMS key, by ARN (in the stack's region).
#[derive(Clone, Debug)]
pub struct ExistingKmsKey {
    id: String,
    arn: String,
}

impl ExistingKmsKey {
    /// The key `arn`, imported as construct `id`.
    pub fn new(id: impl Into<String>, arn: impl Into<String>) -> Self {
        ExistingKmsKey {
            id: id.into(),
            arn: arn.into(),
        }
    }
}

impl Construct for ExistingKmsKey {
    type Handle = Ref<kind::KmsKey>;
    const KIND: &'static str = "existing_kms_key";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> Ref<kind::KmsKey> {
        Ref::new(stack, format!("{}/Key", self.id))
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        if !is_kms_key_arn(&self.arn, cx.stack.region()) {
            ds.report_field(
                Code::InvalidExistingResource,
                cx.path,
                "arn",
                format!("`{}` is not a KMS key ARN of {}", self.arn, cx.stack.region()),
                "key ARNs are arn:aws:kms:<region>:<account>:key/<key id> (`aws kms describe-key --key-id alias/<name>`); an alias ARN is not a key ARN",
            );
        }
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        scope.add(
            "Key",
            Existing {
                kind: Kind::KmsKey,
                values: vec![(Attr::Arn, Text::lit(&self.arn))],
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ec2_ids_have_eight_or_seventeen_hex_digits() {
        assert!(is_ec2_id("vpc-0a1b2c3d", "vpc"));
        assert!(is_ec2_id("subnet-0a1b2c3d4e5f60718", "subnet"));
        assert!(!is_ec2_id("subnet-0A1B2C3D", "subnet"));
        assert!(!is_ec2_id("vpc-123", "vpc"));
        assert!(!is_ec2_id("sg-0a1b2c3d", "vpc"));
    }

    #[test]
    fn issuers_and_key_arns_are_regional() {
        let url = "https://oidc.eks.us-west-2.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF";
        assert!(is_issuer_url(url, "us-west-2"));
        assert!(!is_issuer_url(url, "us-east-1"));
        assert!(!is_issuer_url(
            "https://oidc.eks.us-west-2.amazonaws.com/id/../x",
            "us-west-2"
        ));
        let key = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab";
        assert!(is_kms_key_arn(key, "us-west-2"));
        assert!(!is_kms_key_arn(key, "eu-west-1"));
        assert!(!is_kms_key_arn(
            "arn:aws:kms:us-west-2:111122223333:alias/x",
            "us-west-2"
        ));
    }
}
