//! Typed reference handles. A `Ref<Subnet>` cannot stand where a `Ref<Vpc>` is wanted: the kind
//! is part of the type. Handles name a resource by its construct path; each backend lowers an
//! attribute of a handle to its own form (`Ref`/`Fn::GetAtt`/`Fn::ImportValue` in
//! CloudFormation), never by pasting strings.

use std::fmt;
use std::marker::PhantomData;

/// The kinds of resource a handle can point at.
pub mod kind {
    macro_rules! kinds {
        ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
            $( $(#[$doc])* #[derive(Clone, Copy, Debug, PartialEq, Eq)] pub enum $name {} )*
        };
    }
    kinds! {
        /// A VPC.
        Vpc,
        /// A subnet.
        Subnet,
        /// A security group.
        SecurityGroup,
        /// An EKS cluster.
        EksCluster,
        /// The IAM OIDC identity provider of an EKS cluster.
        OidcProvider,
        /// An IAM role.
        Role,
        /// An S3 bucket.
        Bucket,
        /// A KMS key.
        KmsKey,
        /// A SageMaker HyperPod cluster.
        HyperPodCluster,
        /// An internet gateway.
        InternetGateway,
        /// A route table.
        RouteTable,
        /// A NAT gateway.
        NatGateway,
        /// An Elastic IP address.
        Eip,
        /// A CloudWatch Logs log group.
        LogGroup,
        /// An FSx for Lustre file system.
        FsxFileSystem,
        /// An IAM instance profile.
        InstanceProfile,
        /// An SNS topic.
        SnsTopic,
        /// An EventBridge rule.
        EventRule,
        /// An Amazon Managed Service for Prometheus workspace.
        PrometheusWorkspace,
        /// An EKS managed node group.
        NodeGroup,
    }
}

/// Implemented by the marker types in [`kind`].
pub trait ResourceKind: 'static {
    /// The kind's name, used by backends to choose how attributes are read.
    const KIND: Kind;
}

/// The kind of a referenced resource, as a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// See [`kind::Vpc`].
    Vpc,
    /// See [`kind::Subnet`].
    Subnet,
    /// See [`kind::SecurityGroup`].
    SecurityGroup,
    /// See [`kind::EksCluster`].
    EksCluster,
    /// See [`kind::OidcProvider`].
    OidcProvider,
    /// See [`kind::Role`].
    Role,
    /// See [`kind::Bucket`].
    Bucket,
    /// See [`kind::KmsKey`].
    KmsKey,
    /// See [`kind::HyperPodCluster`].
    HyperPodCluster,
    /// An internet gateway (referenced inside its network only).
    InternetGateway,
    /// A route table (referenced inside its network only).
    RouteTable,
    /// A NAT gateway (referenced inside its network only).
    NatGateway,
    /// An Elastic IP address (referenced inside its network only).
    Eip,
    /// A CloudWatch Logs log group.
    LogGroup,
    /// See [`kind::FsxFileSystem`].
    FsxFileSystem,
    /// See [`kind::InstanceProfile`].
    InstanceProfile,
    /// See [`kind::SnsTopic`].
    SnsTopic,
    /// See [`kind::EventRule`].
    EventRule,
    /// See [`kind::PrometheusWorkspace`].
    PrometheusWorkspace,
    /// See [`kind::NodeGroup`].
    NodeGroup,
}

impl Kind {
    /// The CloudFormation resource type a handle of this kind points at.
    pub fn cloudformation_type(self) -> &'static str {
        match self {
            Kind::Vpc => "AWS::EC2::VPC",
            Kind::Subnet => "AWS::EC2::Subnet",
            Kind::SecurityGroup => "AWS::EC2::SecurityGroup",
            Kind::EksCluster => "AWS::EKS::Cluster",
            Kind::OidcProvider => "AWS::IAM::OIDCProvider",
            Kind::Role => "AWS::IAM::Role",
            Kind::Bucket => "AWS::S3::Bucket",
            Kind::KmsKey => "AWS::KMS::Key",
            Kind::HyperPodCluster => "AWS::SageMaker::Cluster",
            Kind::InternetGateway => "AWS::EC2::InternetGateway",
            Kind::RouteTable => "AWS::EC2::RouteTable",
            Kind::NatGateway => "AWS::EC2::NatGateway",
            Kind::Eip => "AWS::EC2::EIP",
            Kind::LogGroup => "AWS::Logs::LogGroup",
            Kind::FsxFileSystem => "AWS::FSx::FileSystem",
            Kind::InstanceProfile => "AWS::IAM::InstanceProfile",
            Kind::SnsTopic => "AWS::SNS::Topic",
            Kind::EventRule => "AWS::Events::Rule",
            Kind::PrometheusWorkspace => "AWS::APS::Workspace",
            Kind::NodeGroup => "AWS::EKS::Nodegroup",
        }
    }

    /// The Terraform resource type a handle of this kind points at.
    pub fn terraform_type(self) -> &'static str {
        match self {
            Kind::Vpc => "aws_vpc",
            Kind::Subnet => "aws_subnet",
            Kind::SecurityGroup => "aws_security_group",
            Kind::EksCluster => "aws_eks_cluster",
            Kind::OidcProvider => "aws_iam_openid_connect_provider",
            Kind::Role => "aws_iam_role",
            Kind::Bucket => "aws_s3_bucket",
            Kind::KmsKey => "aws_kms_key",
            Kind::HyperPodCluster => "awscc_sagemaker_cluster",
            Kind::InternetGateway => "aws_internet_gateway",
            Kind::RouteTable => "aws_route_table",
            Kind::NatGateway => "aws_nat_gateway",
            Kind::Eip => "aws_eip",
            Kind::LogGroup => "aws_cloudwatch_log_group",
            Kind::FsxFileSystem => "aws_fsx_lustre_file_system",
            Kind::InstanceProfile => "aws_iam_instance_profile",
            Kind::SnsTopic => "aws_sns_topic",
            Kind::EventRule => "aws_cloudwatch_event_rule",
            Kind::PrometheusWorkspace => "aws_prometheus_workspace",
            Kind::NodeGroup => "aws_eks_node_group",
        }
    }
}

macro_rules! impl_kind {
    ($($name:ident),*) => { $( impl ResourceKind for kind::$name { const KIND: Kind = Kind::$name; } )* };
}
impl_kind!(
    Vpc,
    Subnet,
    SecurityGroup,
    EksCluster,
    OidcProvider,
    Role,
    Bucket,
    KmsKey,
    HyperPodCluster,
    InternetGateway,
    RouteTable,
    NatGateway,
    Eip,
    LogGroup,
    FsxFileSystem,
    InstanceProfile,
    SnsTopic,
    EventRule,
    PrometheusWorkspace,
    NodeGroup
);

/// An attribute of a referenced resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Attr {
    /// The resource's id (`vpc-...`, `subnet-...`, `sg-...`).
    Id,
    /// The resource's ARN.
    Arn,
    /// The resource's name.
    Name,
    /// An EKS cluster's OIDC issuer URL.
    OidcIssuerUrl,
    /// The security group EKS creates for a cluster (control plane and managed nodes).
    ClusterSecurityGroupId,
    /// An Elastic IP address's allocation id (`eipalloc-...`).
    AllocationId,
    /// A file system's DNS name.
    DnsName,
    /// An FSx for Lustre file system's mount name (the Lustre file system name clients mount).
    MountName,
}

impl Attr {
    /// A short PascalCase name, used in export names.
    pub fn as_str(self) -> &'static str {
        match self {
            Attr::Id => "Id",
            Attr::Arn => "Arn",
            Attr::Name => "Name",
            Attr::OidcIssuerUrl => "OidcIssuerUrl",
            Attr::ClusterSecurityGroupId => "ClusterSecurityGroupId",
            Attr::AllocationId => "AllocationId",
            Attr::DnsName => "DnsName",
            Attr::MountName => "MountName",
        }
    }
}

/// A format-neutral reference to one attribute of a resource in a stack.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AttrRef {
    /// The stack the resource belongs to.
    pub stack: String,
    /// The resource's construct path inside the stack (`Network/Vpc`).
    pub path: String,
    /// What the resource is.
    pub kind: Kind,
    /// Which attribute is wanted.
    pub attr: Attr,
}

impl AttrRef {
    /// The name of the stack output that exports this attribute: `<LogicalId><Attr>`
    /// (`NetworkVpcId`); Terraform names its output the snake_case of it.
    pub fn output_key(&self) -> String {
        format!("{}{}", super::logical_id(&self.path), self.attr.as_str())
    }

    /// The id of the top-level construct the resource belongs to (`Network` of `Network/Vpc`).
    pub fn construct_id(&self) -> &str {
        self.path.split('/').next().unwrap_or(&self.path)
    }
}

/// A typed handle to a resource of kind `K`, created when a construct is added to a stack.
pub struct Ref<K: ResourceKind> {
    stack: String,
    path: String,
    _kind: PhantomData<fn() -> K>,
}

impl<K: ResourceKind> Ref<K> {
    /// A handle to the resource at `path` in `stack`. Constructs create these for their own
    /// resources; user code receives them from `Stack::add`.
    pub fn new(stack: impl Into<String>, path: impl Into<String>) -> Self {
        Ref {
            stack: stack.into(),
            path: path.into(),
            _kind: PhantomData,
        }
    }

    /// The resource's construct path inside its stack.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The stack the resource belongs to.
    pub fn stack(&self) -> &str {
        &self.stack
    }

    fn attr(&self, attr: Attr) -> AttrRef {
        AttrRef {
            stack: self.stack.clone(),
            path: self.path.clone(),
            kind: K::KIND,
            attr,
        }
    }
}

// Manual impls: deriving would require `K: Clone` etc. on the uninhabited marker types.
impl<K: ResourceKind> Clone for Ref<K> {
    fn clone(&self) -> Self {
        Ref::new(self.stack.clone(), self.path.clone())
    }
}

impl<K: ResourceKind> PartialEq for Ref<K> {
    fn eq(&self, other: &Self) -> bool {
        self.stack == other.stack && self.path == other.path
    }
}

impl<K: ResourceKind> fmt::Debug for Ref<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ref<{:?}>({}/{})", K::KIND, self.stack, self.path)
    }
}

/// The attributes each kind of handle can read: the accessor methods on `Ref<kind::K>` and
/// [`Kind::attrs`], from one table (backends test that they lower every listed pair).
macro_rules! attrs {
    ($( $kind:ident { $($(#[$doc:meta])* $method:ident => $attr:ident),* $(,)? } )*) => {
        $( impl Ref<kind::$kind> {
            $( $(#[$doc])* pub fn $method(&self) -> AttrRef { self.attr(Attr::$attr) } )*
        } )*

        impl Kind {
            /// The attributes a handle of this kind can read.
            pub fn attrs(self) -> &'static [Attr] {
                match self { $( Kind::$kind => &[$(Attr::$attr),*], )* }
            }

            /// Every kind.
            pub const ALL: &'static [Kind] = &[$(Kind::$kind),*];
        }
    };
}

attrs! {
    Vpc { /** The VPC id. */ id => Id }
    Subnet { /** The subnet id. */ id => Id }
    SecurityGroup { /** The security group id. */ id => Id }
    EksCluster {
        /** The cluster name. */ name => Name,
        /** The cluster ARN. */ arn => Arn,
        /** The cluster's OIDC issuer URL. */ oidc_issuer_url => OidcIssuerUrl,
        /** The security group EKS created for the cluster. */ cluster_security_group_id => ClusterSecurityGroupId,
    }
    OidcProvider { /** The provider ARN. */ arn => Arn }
    Role { /** The role ARN. */ arn => Arn, /** The role name. */ name => Name }
    Bucket { /** The bucket name. */ name => Name, /** The bucket ARN. */ arn => Arn }
    KmsKey { /** The key ARN. */ arn => Arn }
    HyperPodCluster { /** The cluster ARN. */ arn => Arn }
    InternetGateway { /** The gateway id. */ id => Id }
    RouteTable { /** The route table id. */ id => Id }
    NatGateway { /** The NAT gateway id. */ id => Id }
    Eip { /** The address's allocation id. */ allocation_id => AllocationId }
    LogGroup { /** The log group name. */ name => Name, /** The log group ARN. */ arn => Arn }
    FsxFileSystem {
        /** The file system id (`fs-...`). */ id => Id,
        /** The file system's DNS name. */ dns_name => DnsName,
        /** The Lustre mount name (`mount -t lustre <dns>@tcp:/<mount name>`). */ mount_name => MountName,
    }
    InstanceProfile { /** The instance profile's name. */ name => Name }
    SnsTopic { /** The topic ARN. */ arn => Arn }
    EventRule { /** The rule's name (on the default event bus). */ name => Name }
    PrometheusWorkspace { /** The workspace ARN. */ arn => Arn, /** The workspace id (`ws-...`). */ id => Id }
    NodeGroup { /** The node group ARN. */ arn => Arn }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_carry_kind_and_path() {
        let vpc: Ref<kind::Vpc> = Ref::new("app", "Network/Vpc");
        let id = vpc.id();
        assert_eq!(id.kind, Kind::Vpc);
        assert_eq!(id.attr, Attr::Id);
        assert_eq!(id.construct_id(), "Network");
        assert_eq!(format!("{vpc:?}"), "Ref<Vpc>(app/Network/Vpc)");
    }
}
