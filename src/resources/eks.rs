//! EKS resource kinds: the cluster, its IAM OIDC provider, add-ons and access entries.

use super::ResourceFacts;
use crate::app::text::{Pseudo, Text};
use crate::app::AttrRef;
use crate::app::Kind;

/// EKS add-ons of the cluster's own set whose pods are a Deployment: they stay `DEGRADED`
/// until some node runs them ([`EksAddon::needs_nodes`]).
pub const ADDONS_NEEDING_NODES: &[&str] = &["coredns"];

/// An EKS cluster (control plane) whose Kubernetes secrets are envelope-encrypted with a KMS
/// key. The endpoint is always reachable privately; the cluster creator is made an
/// administrator when the cluster is created.
#[derive(Clone, Debug, PartialEq)]
pub struct EksCluster {
    /// The cluster's name.
    pub name: String,
    /// The Kubernetes version (`1.33`).
    pub version: String,
    /// The control plane role's ARN (the role holds `AmazonEKSClusterPolicy`; the cluster is
    /// created once the role's policies exist).
    pub role: AttrRef,
    /// Subnet ids for the control plane's network interfaces.
    pub subnets: Vec<AttrRef>,
    /// Security group ids added to the control plane.
    pub security_groups: Vec<AttrRef>,
    /// The CIDR blocks allowed to reach the public endpoint; `None` keeps the endpoint private.
    pub public_access_cidrs: Option<Vec<String>>,
    /// How principals authenticate (`API_AND_CONFIG_MAP`).
    pub authentication_mode: String,
    /// The control-plane log types sent to CloudWatch Logs.
    pub log_types: Vec<String>,
    /// The ARN of the KMS key encrypting the cluster's secrets.
    pub secrets_key: AttrRef,
}

/// The IAM OIDC provider of an EKS cluster's issuer, for roles assumed by service accounts.
#[derive(Clone, Debug, PartialEq)]
pub struct OidcProvider {
    /// The cluster's OIDC issuer URL.
    pub issuer_url: AttrRef,
    /// The audiences (`sts.amazonaws.com`).
    pub client_ids: Vec<String>,
}

/// An EKS add-on. Fields an existing installation set differently are overwritten when the
/// add-on is created or updated ([`EksAddon::RESOLVE_CONFLICTS`]).
#[derive(Clone, Debug, PartialEq)]
pub struct EksAddon {
    /// The cluster's name.
    pub cluster: AttrRef,
    /// The add-on's name (`vpc-cni`).
    pub name: String,
    /// A pinned version; `None` takes the default for the cluster's Kubernetes version.
    pub version: Option<String>,
    /// The ARN of the role of the add-on's service account.
    pub service_account_role: Option<AttrRef>,
    /// The add-on's configuration values (a JSON object).
    pub configuration: Option<AddonConfiguration>,
    /// Whether the add-on's pods are a Deployment, so it becomes `ACTIVE` only once some node
    /// runs them. Such an add-on waits for the HyperPod cluster that brings its cluster's
    /// nodes ([`ResourceGraph::order_after_nodes`](super::ResourceGraph::order_after_nodes)).
    pub needs_nodes: bool,
}

impl EksAddon {
    /// How conflicts with fields set outside the add-on are resolved.
    pub const RESOLVE_CONFLICTS: &'static str = "OVERWRITE";
}

/// A JSON value whose strings may be resource attributes: an add-on's configuration.
#[derive(Clone, Debug, PartialEq)]
pub enum AddonConfiguration {
    /// `true` or `false`.
    Bool(bool),
    /// A literal string.
    Str(String),
    /// A string holding a resource attribute.
    Ref(AttrRef),
    /// An object, keys in order.
    Object(Vec<(String, AddonConfiguration)>),
}

impl AddonConfiguration {
    /// An object of `entries`.
    pub fn object<const N: usize>(entries: [(&str, AddonConfiguration); N]) -> Self {
        AddonConfiguration::Object(
            entries
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        )
    }

    fn references(&self, out: &mut Vec<AttrRef>) {
        match self {
            AddonConfiguration::Bool(_) | AddonConfiguration::Str(_) => {}
            AddonConfiguration::Ref(r) => out.push(r.clone()),
            AddonConfiguration::Object(entries) => {
                for (_, v) in entries {
                    v.references(out);
                }
            }
        }
    }

    /// The value as compact JSON text, references in place of their strings' contents.
    pub fn json_text(&self) -> Text {
        fn quoted(s: &str) -> String {
            serde_json::to_string(s).unwrap_or_default()
        }
        match self {
            AddonConfiguration::Bool(b) => Text::lit(b.to_string()),
            AddonConfiguration::Str(s) => Text::lit(quoted(s)),
            AddonConfiguration::Ref(r) => Text::lit("\"").push_ref(r.clone()).push_lit("\""),
            AddonConfiguration::Object(entries) => {
                let mut t = Text::lit("{");
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        t = t.push_lit(",");
                    }
                    t = t
                        .push_lit(format!("{}:", quoted(k)))
                        .push_text(v.json_text());
                }
                t.push_lit("}")
            }
        }
    }
}

/// What an access entry lets its principal do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// A standard entry granted the EKS access policy of this name (`AmazonEKSViewPolicy`)
    /// on the whole cluster.
    ClusterPolicy(String),
    /// The Linux nodes of an instance role join the cluster through the entry (`EC2_LINUX`).
    LinuxNodes,
}

impl Access {
    /// The entry's type, when not a standard entry.
    pub fn entry_type(&self) -> Option<&'static str> {
        match self {
            Access::ClusterPolicy(_) => None,
            Access::LinuxNodes => Some("EC2_LINUX"),
        }
    }
}

/// An EKS access entry: an IAM principal let into the cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct AccessEntry {
    /// The cluster's name.
    pub cluster: AttrRef,
    /// The principal's ARN.
    pub principal: Text,
    /// What the principal may do.
    pub access: Access,
}

/// `arn:<partition>:eks::aws:cluster-access-policy/<name>`.
pub fn cluster_access_policy_arn(name: &str) -> Text {
    Text::lit("arn:")
        .push_pseudo(Pseudo::Partition)
        .push_lit(format!(":eks::aws:cluster-access-policy/{name}"))
}

impl ResourceFacts for EksCluster {
    const HANDLE: Option<Kind> = Some(Kind::EksCluster);

    fn references(&self) -> Vec<AttrRef> {
        let mut out = vec![self.role.clone()];
        out.extend(self.subnets.iter().cloned());
        out.extend(self.security_groups.iter().cloned());
        out.push(self.secrets_key.clone());
        out
    }
}

impl ResourceFacts for OidcProvider {
    const HANDLE: Option<Kind> = Some(Kind::OidcProvider);

    fn references(&self) -> Vec<AttrRef> {
        vec![self.issuer_url.clone()]
    }
}

impl ResourceFacts for EksAddon {
    fn references(&self) -> Vec<AttrRef> {
        let mut out = vec![self.cluster.clone()];
        out.extend(self.service_account_role.iter().cloned());
        if let Some(c) = &self.configuration {
            c.references(&mut out);
        }
        out
    }
}

impl ResourceFacts for AccessEntry {
    fn references(&self) -> Vec<AttrRef> {
        let mut out = vec![self.cluster.clone()];
        out.extend(self.principal.references().cloned());
        out
    }
}
