//! The EKS cluster: control plane in private subnets, authentication mode
//! `API_AND_CONFIG_MAP` (HyperPod requires API access entries), every control-plane log type,
//! secrets encrypted with a customer-managed KMS key, the core add-ons, access entries, the
//! IAM OIDC provider for service-account roles, and the admin host that lets an operator
//! outside the VPC reach the private endpoint.
//!
//! The admin host is a small SSM-managed instance in the first control-plane subnet: no inbound
//! rule, no public address, no Kubernetes credentials. Operators open a Session Manager port
//! forward through it to the endpoint (`AWS-StartPortForwardingSessionToRemoteHost`) and run
//! kubectl, helm and Terraform's Helm provider from their own machine with their own IAM
//! identity; the only rule it adds is TCP 443 from its group into the cluster security group.

use super::{Construct, Context, EksClusterFacts, Facts};
use crate::app::text::Text;
use crate::app::{kind, pascal_id, AttrRef, Ref};
use crate::diagnostics::{Code, Diagnostics};
use crate::resources::iam::{account_key_policy, service_trust};
use crate::resources::{self as res, Access, KmsKey, OidcProvider, Role, Scope, StackOutput};

/// Who can reach the Kubernetes API endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum EndpointAccess {
    /// Only from inside the VPC (the secure default), which operators reach through the
    /// cluster's admin host (a Session Manager port forward) unless it is turned off.
    #[default]
    Private,
    /// Private, plus public access from the listed CIDR blocks only.
    PublicAndPrivate {
        /// The blocks allowed to reach the public endpoint.
        public_cidrs: Vec<String>,
    },
}

impl EndpointAccess {
    /// Private plus public access from `cidrs` (never `0.0.0.0/0` unless you write it).
    pub fn public_and_private<I, S>(cidrs: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        EndpointAccess::PublicAndPrivate {
            public_cidrs: cidrs.into_iter().map(Into::into).collect(),
        }
    }
}

/// How operators outside the VPC reach the private API endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdminAccess {
    /// An SSM-managed admin host of this instance type (the default, `t3.micro`).
    SsmHost {
        /// The host's instance type.
        instance_type: String,
    },
    /// No admin host: the operator reaches the VPC another way (VPN, Direct Connect, a runner
    /// inside it).
    External,
}

/// The admin host's default instance type: it only forwards a TCP session.
pub const ADMIN_HOST_INSTANCE_TYPE: &str = "t3.micro";

/// The public SSM parameter naming the current Amazon Linux 2023 AMI (x86_64), which ships the
/// SSM agent.
pub const ADMIN_HOST_IMAGE_PARAMETER: &str =
    "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64";

/// The `Name` tag of the admin host of EKS cluster `cluster` (how the runbook and `hyperforge
/// deploy` find it).
pub fn admin_host_name(cluster: &str) -> String {
    format!("{cluster}-admin")
}

/// An EKS access policy granted to a principal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessPolicy {
    /// `AmazonEKSClusterAdminPolicy`, cluster-wide.
    ClusterAdmin,
    /// `AmazonEKSAdminPolicy`, cluster-wide.
    Admin,
    /// `AmazonEKSViewPolicy`, cluster-wide.
    View,
}

stack_file_names!(AccessPolicy {
    ClusterAdmin => "cluster_admin",
    Admin => "admin",
    View => "view",
});

impl AccessPolicy {
    /// The policy's name.
    pub fn policy_name(self) -> &'static str {
        match self {
            AccessPolicy::ClusterAdmin => "AmazonEKSClusterAdminPolicy",
            AccessPolicy::Admin => "AmazonEKSAdminPolicy",
            AccessPolicy::View => "AmazonEKSViewPolicy",
        }
    }
}

/// An access entry: an IAM principal allowed into the cluster with a policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessEntry {
    /// The principal's ARN.
    pub principal_arn: String,
    /// The policy granted.
    pub policy: AccessPolicy,
}

/// An EKS add-on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EksAddon {
    /// The add-on's name (`vpc-cni`).
    pub name: String,
    /// A pinned version; `None` takes the default for the cluster's Kubernetes version.
    pub version: Option<String>,
}

/// The EKS cluster builder.
#[derive(Clone, Debug)]
pub struct EksCluster {
    id: String,
    name: String,
    version: String,
    subnets: Vec<Ref<kind::Subnet>>,
    security_groups: Vec<Ref<kind::SecurityGroup>>,
    endpoint_access: EndpointAccess,
    admin_access: AdminAccess,
    vpc: Option<Ref<kind::Vpc>>,
    access_entries: Vec<AccessEntry>,
    addons: Vec<EksAddon>,
    network_policy: bool,
}

/// Handles to the cluster's resources.
#[derive(Clone, Debug)]
pub struct EksClusterHandle {
    /// The cluster.
    pub cluster: Ref<kind::EksCluster>,
    /// Its IAM OIDC provider.
    pub oidc_provider: Ref<kind::OidcProvider>,
    /// The KMS key encrypting its secrets.
    pub secrets_key: Ref<kind::KmsKey>,
    /// The cluster's name, as given.
    pub name: String,
}

/// Whether `name` is an EKS cluster name: 1-100 characters, a letter or digit, then letters,
/// digits, `-` and `_`.
pub(crate) fn is_cluster_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The VPC CNI add-on.
const VPC_CNI: &str = "vpc-cni";

const CORE_ADDONS: &[&str] = &[VPC_CNI, "kube-proxy", "coredns", "eks-pod-identity-agent"];

/// Every control-plane log type.
const LOG_TYPES: &[&str] = &[
    "api",
    "audit",
    "authenticator",
    "controllerManager",
    "scheduler",
];

impl EksCluster {
    /// A cluster named `name` running Kubernetes 1.33 with the core add-ons.
    pub fn new(id: impl Into<String>, name: impl Into<String>) -> Self {
        EksCluster {
            id: id.into(),
            name: name.into(),
            version: "1.33".to_owned(),
            subnets: Vec::new(),
            security_groups: Vec::new(),
            endpoint_access: EndpointAccess::Private,
            admin_access: AdminAccess::SsmHost {
                instance_type: ADMIN_HOST_INSTANCE_TYPE.to_owned(),
            },
            vpc: None,
            access_entries: Vec::new(),
            addons: CORE_ADDONS
                .iter()
                .map(|n| EksAddon {
                    name: (*n).to_owned(),
                    version: None,
                })
                .collect(),
            network_policy: true,
        }
    }

    /// Whether the VPC CNI enforces Kubernetes NetworkPolicies (default on). The VPC CNI
    /// add-on leaves them unenforced unless its configuration sets `enableNetworkPolicy`
    /// (EKS User Guide, `cni-network-policy`); without it the NetworkPolicy of a vLLM
    /// Deployment is decorative.
    pub fn network_policy(mut self, enforced: bool) -> Self {
        self.network_policy = enforced;
        self
    }

    /// The Kubernetes version (`1.33`).
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// The subnets for the control plane's network interfaces (private, in 2+ zones).
    pub fn subnets<'a, I>(mut self, subnets: I) -> Self
    where
        I: IntoIterator<Item = &'a Ref<kind::Subnet>>,
    {
        self.subnets.extend(subnets.into_iter().cloned());
        self
    }

    /// Adds a security group to the control plane.
    pub fn security_group(mut self, group: &Ref<kind::SecurityGroup>) -> Self {
        self.security_groups.push(group.clone());
        self
    }

    /// Who can reach the API endpoint (default: private only).
    pub fn endpoint_access(mut self, access: EndpointAccess) -> Self {
        self.endpoint_access = access;
        self
    }

    /// The cluster's VPC (where the admin host's security group lives); by default the VPC of
    /// the network its subnets belong to.
    pub fn vpc(mut self, vpc: &Ref<kind::Vpc>) -> Self {
        self.vpc = Some(vpc.clone());
        self
    }

    /// The admin host's instance type (default `t3.micro`).
    pub fn admin_host(mut self, instance_type: impl Into<String>) -> Self {
        self.admin_access = AdminAccess::SsmHost {
            instance_type: instance_type.into(),
        };
        self
    }

    /// No admin host: you reach the VPC another way (VPN, Direct Connect, an in-VPC runner).
    pub fn without_admin_host(mut self) -> Self {
        self.admin_access = AdminAccess::External;
        self
    }

    /// How operators reach the endpoint from outside the VPC.
    pub fn admin_access(&self) -> &AdminAccess {
        &self.admin_access
    }

    /// Grants `principal_arn` an access policy on the cluster.
    pub fn access_entry(mut self, principal_arn: impl Into<String>, policy: AccessPolicy) -> Self {
        self.access_entries.push(AccessEntry {
            principal_arn: principal_arn.into(),
            policy,
        });
        self
    }

    /// Pins the version of an add-on, or adds one.
    pub fn addon(mut self, name: impl Into<String>, version: Option<String>) -> Self {
        let name = name.into();
        match self.addons.iter_mut().find(|a| a.name == name) {
            Some(a) => a.version = version,
            None => self.addons.push(EksAddon { name, version }),
        }
        self
    }

    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Kubernetes version.
    pub fn kubernetes_version(&self) -> &str {
        &self.version
    }

    /// The control plane subnets.
    pub fn subnet_refs(&self) -> &[Ref<kind::Subnet>] {
        &self.subnets
    }

    /// The control plane security groups.
    pub fn security_group_refs(&self) -> &[Ref<kind::SecurityGroup>] {
        &self.security_groups
    }

    /// Endpoint access.
    pub fn endpoint(&self) -> &EndpointAccess {
        &self.endpoint_access
    }

    /// Access entries.
    pub fn access_entries(&self) -> &[AccessEntry] {
        &self.access_entries
    }

    /// Add-ons in order.
    pub fn addons(&self) -> &[EksAddon] {
        &self.addons
    }

    /// Whether NetworkPolicies are enforced.
    pub fn network_policy_enforced(&self) -> bool {
        self.network_policy
    }

    pub(crate) fn references(&self) -> Vec<AttrRef> {
        self.subnets
            .iter()
            .map(|s| s.id())
            .chain(self.security_groups.iter().map(|g| g.id()))
            // A derived VPC's network is already referenced through the subnets.
            .chain(self.vpc.iter().map(|v| v.id()))
            .collect()
    }

    /// The cluster's VPC: the one given, or else the VPC of the network of `stack` all its
    /// subnets belong to (a network's VPC is its child `Vpc`, created or imported alike);
    /// `None` when the subnets name no single network of the stack.
    pub fn effective_vpc(&self, stack: &crate::app::Stack) -> Option<Ref<kind::Vpc>> {
        if let Some(vpc) = &self.vpc {
            return Some(vpc.clone());
        }
        let first = self.subnets.first()?;
        let network = first.id().construct_id().to_owned();
        let one_network = self.subnets.iter().all(|s| {
            s.id().construct_id() == network && super::network::subnet_facts(stack, s).is_some()
        });
        one_network.then(|| Ref::new(first.stack(), format!("{network}/Vpc")))
    }

    pub(crate) fn validate(&self, stack: &crate::app::Stack, path: &str, ds: &mut Diagnostics) {
        if !is_cluster_name(&self.name) {
            ds.report_field(
                Code::InvalidName,
                path,
                "name",
                format!("EKS cluster name `{}` is not valid", self.name),
                "EKS cluster names are 1-100 characters: a letter or digit, then letters, digits, `-` and `_`",
            );
        }
        let minor = self
            .version
            .strip_prefix("1.")
            .and_then(|m| m.parse::<u32>().ok());
        if !matches!(minor, Some(30..=34)) {
            ds.report_field(
                Code::UnsupportedKubernetesVersion,
                path,
                "version",
                format!("Kubernetes version `{}` is not supported", self.version),
                "use 1.30 to 1.34 (HyperPod's supported range); 1.33 is the default",
            );
        }
        if self.subnets.len() < 2 {
            ds.report_field(
                Code::TooFewAvailabilityZones,
                path,
                "subnets",
                format!(
                    "the control plane has {} subnet(s); EKS needs at least 2 in different zones",
                    self.subnets.len()
                ),
                "pass the network's private subnets: `.subnets(&network.private_subnets)`",
            );
        }
        if let EndpointAccess::PublicAndPrivate { public_cidrs } = &self.endpoint_access {
            for cidr in public_cidrs {
                if let Err(e) = cidr.parse::<super::Ipv4Cidr>() {
                    ds.report_field(
                        Code::InvalidCidr,
                        path,
                        "public_access_cidrs",
                        format!("public endpoint CIDR `{cidr}` is not valid: {e}"),
                        "list the blocks allowed to reach the API, e.g. 203.0.113.0/24",
                    );
                }
            }
        }
        match &self.admin_access {
            AdminAccess::SsmHost { instance_type } => {
                if self.effective_vpc(stack).is_none() {
                    ds.report_field(
                        Code::AdminHostWithoutVpc,
                        path,
                        "vpc",
                        "the admin host needs the cluster's VPC for its security group, and the cluster's subnets name no single network",
                        "give the cluster subnets of one network, or the VPC with `.vpc(&network.vpc)` (stack file: `vpc:`), or use `.without_admin_host()` if you reach the VPC another way",
                    );
                }
                if let Some(vpc) = &self.vpc {
                    let network = vpc.id();
                    if self
                        .subnets
                        .iter()
                        .any(|s| s.id().construct_id() != network.construct_id())
                    {
                        ds.report_field(
                            Code::AdminHostVpcMismatch,
                            path,
                            "vpc",
                            format!(
                                "the admin host's VPC `{}` is not the network of the cluster's subnets",
                                vpc.path()
                            ),
                            "pass the VPC of the network whose subnets the cluster uses: `.vpc(&network.vpc)`",
                        );
                    }
                }
                if !is_instance_type(instance_type) {
                    ds.report_field(
                        Code::InvalidAdminHostInstanceType,
                        path,
                        "admin_host_instance_type",
                        format!("admin host instance type `{instance_type}` is not an EC2 instance type"),
                        "write it like `t3.micro`",
                    );
                }
            }
            AdminAccess::External => {
                if self.endpoint_access == EndpointAccess::Private {
                    ds.report_field(
                        Code::PrivateApiWithoutAdminPath,
                        path,
                        "admin_host",
                        "the API endpoint is private and no admin host is created",
                        "make sure your VPN, Direct Connect or in-VPC runner reaches TCP 443 of the cluster security group, or keep the default admin host",
                    );
                }
            }
        }
        for entry in &self.access_entries {
            if !is_iam_principal_arn(&entry.principal_arn) {
                ds.report_field(
                    Code::InvalidAccessEntry,
                    path,
                    "access_entries",
                    format!(
                        "access entry principal `{}` is not an IAM role or user ARN",
                        entry.principal_arn
                    ),
                    "use `arn:aws:iam::<12-digit account>:role/<name>`",
                );
            }
        }
    }
}

/// `family.size`: lowercase letters, digits and hyphens, at most 32 characters.
fn is_instance_type(t: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    t.len() <= 32 && t.split_once('.').is_some_and(|(f, s)| part(f) && part(s))
}

fn is_iam_principal_arn(arn: &str) -> bool {
    crate::app::arn::is_iam_arn_of(arn, "role") || crate::app::arn::is_iam_arn_of(arn, "user")
}

impl Construct for EksCluster {
    type Handle = EksClusterHandle;
    const KIND: &'static str = "eks_cluster";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> EksClusterHandle {
        EksClusterHandle {
            cluster: Ref::new(stack, format!("{}/Cluster", self.id)),
            oidc_provider: Ref::new(stack, format!("{}/OidcProvider", self.id)),
            secrets_key: Ref::new(stack, format!("{}/SecretsKey", self.id)),
            name: self.name.clone(),
        }
    }

    fn references(&self) -> Vec<AttrRef> {
        EksCluster::references(self)
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        EksCluster::validate(self, cx.stack, cx.path, ds);
    }

    fn facts(&self, cx: &Context<'_>) -> Facts<'_> {
        Facts {
            eks_cluster: Some(EksClusterFacts {
                name: self.name().to_owned(),
                resource_path: format!("{}/Cluster", self.id),
                imported: false,
                kubernetes_version: self.kubernetes_version().to_owned(),
                admin_host: match (
                    &self.admin_access,
                    &self.effective_vpc(cx.stack),
                    self.subnets.first(),
                ) {
                    (AdminAccess::SsmHost { .. }, Some(_), Some(_)) => {
                        Some(admin_host_name(&self.name))
                    }
                    _ => None,
                },
                runs: Vec::new(),
            }),
            ..Facts::default()
        }
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        let handle = self.handle(scope.stack().name());
        let role: Ref<kind::Role> = Ref::new(scope.stack().name(), scope.path("ClusterRole"));
        scope.add(
            "ClusterRole",
            Role {
                description: format!("EKS control plane role of {}", self.name),
                trust: service_trust("eks.amazonaws.com"),
                managed: vec!["AmazonEKSClusterPolicy".to_owned()],
                inline: Vec::new(),
                name: None,
            },
        );
        scope.add(
            "SecretsKey",
            KmsKey {
                description: format!(
                    "Envelope encryption of Kubernetes secrets in EKS cluster {}",
                    self.name
                ),
                policy: account_key_policy(None),
            },
        );
        scope.add(
            "Cluster",
            res::EksCluster {
                name: self.name.clone(),
                version: self.version.clone(),
                role: role.arn(),
                subnets: self.subnets.iter().map(|s| s.id()).collect(),
                security_groups: self.security_groups.iter().map(|g| g.id()).collect(),
                public_access_cidrs: match &self.endpoint_access {
                    EndpointAccess::Private => None,
                    EndpointAccess::PublicAndPrivate { public_cidrs } => Some(public_cidrs.clone()),
                },
                // HyperPod requires API access entries.
                authentication_mode: "API_AND_CONFIG_MAP".to_owned(),
                log_types: LOG_TYPES.iter().map(|t| (*t).to_owned()).collect(),
                secrets_key: handle.secrets_key.arn(),
            },
        );
        scope.add(
            "OidcProvider",
            OidcProvider {
                issuer_url: handle.cluster.oidc_issuer_url(),
                client_ids: vec!["sts.amazonaws.com".to_owned()],
            },
        );
        for addon in &self.addons {
            scope.add(
                &format!("{}Addon", pascal_id(&addon.name)),
                res::EksAddon {
                    cluster: handle.cluster.name(),
                    name: addon.name.clone(),
                    version: addon.version.clone(),
                    service_account_role: None,
                    configuration: (addon.name == VPC_CNI && self.network_policy).then(|| {
                        res::AddonConfiguration::object([(
                            "enableNetworkPolicy",
                            res::AddonConfiguration::Str("true".to_owned()),
                        )])
                    }),
                    // Waits for a HyperPod cluster bringing the nodes, where there is one
                    // (`ResourceGraph::order_after_nodes`).
                    needs_nodes: res::ADDONS_NEEDING_NODES.contains(&addon.name.as_str()),
                },
            );
        }
        for (i, entry) in self.access_entries.iter().enumerate() {
            scope.add(
                &format!("AccessEntry{}", i + 1),
                res::AccessEntry {
                    cluster: handle.cluster.name(),
                    principal: Text::lit(&entry.principal_arn),
                    access: Access::ClusterPolicy(entry.policy.policy_name().to_owned()),
                },
            );
        }
        if let (AdminAccess::SsmHost { instance_type }, Some(vpc), Some(subnet)) = (
            &self.admin_access,
            &self.effective_vpc(scope.stack()),
            self.subnets.first(),
        ) {
            self.expand_admin_host(scope, &handle, instance_type, vpc, subnet);
        }
        scope.add(
            "ClusterNameOutput",
            StackOutput {
                description: "EKS cluster name (aws eks update-kubeconfig --name)".to_owned(),
                value: handle.cluster.name(),
            },
        );
    }
}

impl EksCluster {
    /// The admin host: its security group (egress HTTPS only, for Session Manager and the
    /// endpoint), the rule admitting it to the cluster security group EKS manages (attached to
    /// the endpoint's interfaces whatever other groups are given), its role
    /// (`AmazonSSMManagedInstanceCore` only) and profile, and the instance.
    fn expand_admin_host(
        &self,
        scope: &mut Scope<'_>,
        cluster: &EksClusterHandle,
        instance_type: &str,
        vpc: &Ref<kind::Vpc>,
        subnet: &Ref<kind::Subnet>,
    ) {
        let stack = scope.stack().name().to_owned();
        let name = admin_host_name(&self.name);
        scope.add(
            "AdminHostSecurityGroup",
            res::SecurityGroup {
                description: "Admin host of the EKS cluster of this stack (no inbound rules)"
                    .to_owned(),
                vpc: vpc.id(),
                name_tag: name.clone(),
                egress: vec![res::CidrEgress {
                    id: "AdminHostHttpsEgress".to_owned(),
                    cidr: "0.0.0.0/0".to_owned(),
                    protocol: res::Protocol("tcp".to_owned()),
                    ports: Some((443, 443)),
                    description: "HTTPS to Session Manager and the cluster endpoint".to_owned(),
                }],
            },
        );
        let group: Ref<kind::SecurityGroup> =
            Ref::new(&stack, scope.path("AdminHostSecurityGroup"));
        scope.add(
            "AdminHostApiIngress",
            res::SecurityGroupRule {
                direction: res::Direction::Ingress,
                group: cluster.cluster.cluster_security_group_id(),
                protocol: res::Protocol("tcp".to_owned()),
                ports: Some((443, 443)),
                peer: res::Peer::Group(group.id()),
                description: "Kubernetes API from the admin host".to_owned(),
            },
        );
        scope.add(
            "AdminHostRole",
            Role {
                description: format!(
                    "Admin host of EKS cluster {} (Session Manager only)",
                    self.name
                ),
                trust: service_trust("ec2.amazonaws.com"),
                managed: vec!["AmazonSSMManagedInstanceCore".to_owned()],
                inline: Vec::new(),
                name: None,
            },
        );
        let role: Ref<kind::Role> = Ref::new(&stack, scope.path("AdminHostRole"));
        scope.add(
            "AdminHostInstanceProfile",
            res::InstanceProfile { role: role.name() },
        );
        let profile: Ref<kind::InstanceProfile> =
            Ref::new(&stack, scope.path("AdminHostInstanceProfile"));
        scope.add(
            "AdminHost",
            res::Instance {
                instance_type: instance_type.to_owned(),
                image_parameter: ADMIN_HOST_IMAGE_PARAMETER.to_owned(),
                subnet: subnet.id(),
                security_groups: vec![group.id()],
                instance_profile: profile.name(),
                metadata: res::MetadataOptions {
                    endpoint_enabled: true,
                    tokens_required: true,
                    hop_limit: 1,
                },
                root_volume: res::RootVolume {
                    device_name: "/dev/xvda".to_owned(),
                    size_gb: 8,
                    volume_type: "gp3".to_owned(),
                    encrypted: true,
                    delete_on_termination: true,
                },
                name_tag: name,
            },
        )
        .acknowledge(
            res::Rule::EC2_WITHOUT_TERMINATION_PROTECTION,
            "The admin host only carries Session Manager tunnels to the cluster's private API \
             and holds no data; it is replaced or deleted with its stack, which termination \
             protection would block.",
        )
        .acknowledge_part(
            res::Rule::CDK_NAG_EC26_FAILURE,
            res::AckScope::Finding("AwsSolutions-EC26"),
            "The root volume is encrypted (`BlockDeviceMappings[0].Ebs.Encrypted: true`, checked \
             by checkov CKV_AWS_8); the rule fails to run on an instance without a launch \
             template when its template holds one.",
        );
    }
}

// --- Stack-file form -------------------------------------------------------------------------

stack_file_shape! {
    pub mod access_entry_fields = "AccessEntry", "An IAM principal allowed into the cluster." {
        PRINCIPAL_ARN: req "principal_arn", Ty::Str, "The role or user ARN.";
        POLICY: req "policy", Ty::Enum(AccessPolicy::NAMES), "The access policy.";
    }
}

stack_file_shape! {
    pub mod addon_fields = "Addon", "An EKS add-on." {
        NAME: req "name", Ty::Str, "The add-on's name.";
        VERSION: opt "version", Ty::Str, "Its version (default: EKS's default).";
    }
}

stack_file_shape! {
    pub mod fields = <EksCluster as Construct>::KIND, "An EKS cluster with a private endpoint, secrets encryption, access entries and add-ons." {
        ID: req "eks_cluster", Ty::Str, "The construct id.";
        NAME: req "name", Ty::Str, "The cluster's name.";
        VERSION: opt "version", Ty::Str, "The Kubernetes version, e.g. `1.33`.";
        SUBNETS: opt "subnets", Ty::Refs(Want::Subnets), "The control plane's subnets.";
        SECURITY_GROUPS: opt "security_groups", Ty::Refs(Want::SecurityGroup), "Additional security groups.";
        VPC: opt "vpc", Ty::Ref(Want::Vpc), "The cluster's VPC (required for the admin host).";
        ADMIN_HOST: opt "admin_host", Ty::Bool, default "true", "Create the SSM-managed admin host that reaches the private endpoint (`false` when you reach the VPC another way).";
        ADMIN_HOST_INSTANCE_TYPE: opt "admin_host_instance_type", Ty::Str, default "t3.micro", "The admin host's instance type.";
        PUBLIC_ACCESS_CIDRS: opt "public_access_cidrs", Ty::StrList, "Also allow the public endpoint from these blocks (default: private only).";
        ACCESS_ENTRIES: opt "access_entries", Ty::List(&access_entry_fields::SHAPE), "Principals allowed into the cluster.";
        ADDONS: opt "addons", Ty::List(&addon_fields::SHAPE), "EKS add-ons.";
        NETWORK_POLICY: opt "network_policy", Ty::Bool, default "true", "Whether the VPC CNI enforces NetworkPolicies.";
    }
}

impl super::stack_file::StackFileConstruct for EksCluster {
    const SHAPE: &'static super::stack_file::Shape = &fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        use super::stack_file::list;
        let subnets = r.subnets(&fields::SUBNETS);
        let sgs = r.security_groups(&fields::SECURITY_GROUPS);
        let vpc = r.vpc(&fields::VPC);
        let mut c = EksCluster::new(id, r.text(&fields::NAME)?);
        if let Some(v) = vpc.ok()? {
            c = c.vpc(&v);
        }
        if let Some(t) = r.text(&fields::ADMIN_HOST_INSTANCE_TYPE) {
            c = c.admin_host(t);
        }
        if r.bool(&fields::ADMIN_HOST) == Some(false) {
            c = c.without_admin_host();
        }
        if let Some(v) = r.text(&fields::VERSION) {
            c = c.version(v);
        }
        if let Some(s) = subnets.ok()? {
            c = c.subnets(&s);
        }
        for g in sgs.ok()?.unwrap_or_default() {
            c = c.security_group(&g);
        }
        if let Some(cidrs) = r.str_list(&fields::PUBLIC_ACCESS_CIDRS) {
            c = c.endpoint_access(EndpointAccess::public_and_private(cidrs));
        }
        for (arn, policy) in list(r, &fields::ACCESS_ENTRIES, |e| {
            use access_entry_fields as f;
            let policy = e.text(&f::POLICY).and_then(|n| AccessPolicy::from_name(&n));
            let arn = e.text(&f::PRINCIPAL_ARN);
            Some((arn?, policy?))
        }) {
            c = c.access_entry(arn, policy);
        }
        for (name, version) in list(r, &fields::ADDONS, |a| {
            let name = a.text(&addon_fields::NAME);
            let version = a.text(&addon_fields::VERSION);
            Some((name?, version))
        }) {
            c = c.addon(name, version);
        }
        if let Some(v) = r.bool(&fields::NETWORK_POLICY) {
            c = c.network_policy(v);
        }
        Some(c)
    }
}
