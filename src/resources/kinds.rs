//! The resource kinds: one type per kind of thing hyperforge deploys, holding its facts;
//! [`ResourceFacts`], what every kind says about itself (its references, the handle kind that
//! points at it); and the `resource_kinds!` registry generating [`ResourceKind`], the closed set
//! the backends match exhaustively. Adding a kind: its type and `ResourceFacts` impl (here or
//! in its area's file), one line in the registry, and one arm in each backend (the compiler
//! lists them). The small kinds several constructs share live in this file.

use super::compute::{
    CapacityBlockPurchase, HyperPodCluster, Instance, InstanceProfile, LaunchTemplate, NodeGroup,
};
use super::eks::{AccessEntry, EksAddon, EksCluster, OidcProvider};
use super::iam::{deny_insecure_transport, PolicyDocument, PrincipalKind, Statement};
use super::network::*;
use super::operations::{
    Dashboard, EventRule, MetricAlarm, PrometheusRuleGroups, PrometheusScraper,
    PrometheusWorkspace, Schedule, SnsTopic, SnsTopicPolicy,
};
use super::plan::Step;
use super::KubeObject;
use super::{DataRepositoryAssociation, LustreFileSystem};
use crate::app::text::{Pseudo, Text};
use crate::app::{Attr, AttrRef, Kind};

/// What a resource kind says about itself, for the checks and backends that handle every
/// kind alike. Implemented beside each kind's type.
pub trait ResourceFacts {
    /// The kind a typed handle to this resource carries (`None`: handles never point here).
    const HANDLE: Option<Kind> = None;

    /// Every reference the resource makes.
    fn references(&self) -> Vec<AttrRef> {
        Vec::new()
    }
    /// Every deploy-time input the resource's values use.
    fn inputs(&self) -> Vec<StackInput> {
        Vec::new()
    }
    /// The kind a typed handle to this resource carries, for kinds that stand for several
    /// (an [`Existing`] resource).
    fn handle_kind(&self) -> Option<Kind> {
        Self::HANDLE
    }
}

/// The registry of resource kinds: each listed once, with its type. Generates
/// [`ResourceKind`], the `From` conversions and the dispatch of [`ResourceFacts`].
macro_rules! resource_kinds {
    ($($variant:ident),* $(,)?) => {
        /// Every kind of resource, as stored in a [`ResourceGraph`](super::ResourceGraph).
        #[derive(Clone, Debug, PartialEq)]
        #[non_exhaustive]
        pub enum ResourceKind {
            $(
                #[doc = concat!("See [`", stringify!($variant), "`].")]
                $variant($variant),
            )*
        }

        impl ResourceKind {
            /// The kind a typed handle to this resource carries (`None`: handles never point
            /// here).
            pub fn ref_kind(&self) -> Option<Kind> {
                match self { $( ResourceKind::$variant(r) => ResourceFacts::handle_kind(r), )* }
            }

            /// Every reference the resource makes.
            pub fn references(&self) -> Vec<AttrRef> {
                match self { $( ResourceKind::$variant(r) => ResourceFacts::references(r), )* }
            }

            /// Every deploy-time input the resource's values use.
            pub fn inputs(&self) -> Vec<StackInput> {
                match self { $( ResourceKind::$variant(r) => ResourceFacts::inputs(r), )* }
            }
        }

        $( impl From<$variant> for ResourceKind {
            fn from(r: $variant) -> Self { ResourceKind::$variant(r) }
        } )*
    };
}

resource_kinds! {
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
    KubeObject,
    EksCluster,
    OidcProvider,
    EksAddon,
    AccessEntry,
    HyperPodCluster,
    CapacityBlockPurchase,
    LaunchTemplate,
    NodeGroup,
    InstanceProfile,
    Instance,
    LustreFileSystem,
    DataRepositoryAssociation,
    EcrPullThroughCacheRule,
    RolePolicy,
    SnsTopic,
    SnsTopicPolicy,
    MetricAlarm,
    Dashboard,
    EventRule,
    Schedule,
    DeployValue,
    Step,
    PrometheusWorkspace,
    PrometheusRuleGroups,
    PrometheusScraper,
    Existing,
    RawResource,
}

/// A property of a resource that hyperforge's rules checked: the format-neutral fact behind
/// the warning an override of it gets (`HF0022`); each backend spells it in its own names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Checked {
    /// A node group's capacity type, against its claim (Capacity Block, reservation).
    CapacityType,
    /// A node group's instance types, against the catalog and the region.
    InstanceTypes,
    /// A node group's subnets, against its reservation's zone.
    NodeSubnets,
    /// A node group's scaling, against the reservation and the autoscaling bound.
    Scaling,
    /// A launch template's market options (capacity-block).
    MarketOptions,
    /// A launch template's capacity reservation.
    CapacityReservation,
    /// A launch template's instance type.
    InstanceType,
    /// A HyperPod instance group's instance type.
    GroupInstanceType,
    /// A HyperPod instance group's instance count, against the training plan.
    GroupInstanceCount,
    /// A HyperPod instance group's training plan.
    GroupTrainingPlan,
    /// A HyperPod cluster's subnets, against the plan's zone.
    ClusterSubnets,
    /// A subnet's zone id.
    ZoneId,
    /// A subnet's zone name.
    Zone,
    /// A VPC's or subnet's block.
    CidrBlock,
    /// An EKS cluster's name, which other stages name.
    ClusterName,
    /// An EKS cluster's Kubernetes version.
    ClusterVersion,
    /// An access entry's principal.
    PrincipalArn,
    /// A log group's retention, one CloudWatch accepts.
    Retention,
}

impl ResourceKind {
    /// The properties of this resource that hyperforge's rules checked.
    pub fn checked(&self) -> &'static [Checked] {
        use Checked::*;
        match self {
            ResourceKind::NodeGroup(_) => &[CapacityType, InstanceTypes, NodeSubnets, Scaling],
            ResourceKind::LaunchTemplate(_) => &[MarketOptions, CapacityReservation, InstanceType],
            ResourceKind::HyperPodCluster(_) => &[
                GroupInstanceType,
                GroupInstanceCount,
                GroupTrainingPlan,
                ClusterSubnets,
            ],
            ResourceKind::Subnet(_) => &[ZoneId, Zone, CidrBlock],
            ResourceKind::Vpc(_) | ResourceKind::VpcCidrBlock(_) => &[CidrBlock],
            ResourceKind::EksCluster(_) => &[ClusterName, ClusterVersion],
            ResourceKind::AccessEntry(_) => &[PrincipalArn],
            ResourceKind::LogGroup(_) => &[Retention],
            ResourceKind::SecurityGroup(_)
            | ResourceKind::SecurityGroupRule(_)
            | ResourceKind::Bucket(_)
            | ResourceKind::StackOutput(_)
            | ResourceKind::Role(_)
            | ResourceKind::KmsKey(_)
            | ResourceKind::PodIdentityAssociation(_)
            | ResourceKind::DefaultSecurityGroup(_)
            | ResourceKind::InternetGateway(_)
            | ResourceKind::Eip(_)
            | ResourceKind::NatGateway(_)
            | ResourceKind::RouteTable(_)
            | ResourceKind::Route(_)
            | ResourceKind::SubnetRouteTableAssociation(_)
            | ResourceKind::GatewayEndpoint(_)
            | ResourceKind::FlowLog(_)
            | ResourceKind::KubeObject(_)
            | ResourceKind::DeployValue(_)
            | ResourceKind::Step(_)
            | ResourceKind::OidcProvider(_)
            | ResourceKind::EksAddon(_)
            | ResourceKind::CapacityBlockPurchase(_)
            | ResourceKind::InstanceProfile(_)
            | ResourceKind::Instance(_)
            | ResourceKind::LustreFileSystem(_)
            | ResourceKind::DataRepositoryAssociation(_)
            | ResourceKind::EcrPullThroughCacheRule(_)
            | ResourceKind::RolePolicy(_)
            | ResourceKind::SnsTopic(_)
            | ResourceKind::SnsTopicPolicy(_)
            | ResourceKind::PrometheusWorkspace(_)
            | ResourceKind::PrometheusRuleGroups(_)
            | ResourceKind::PrometheusScraper(_)
            | ResourceKind::MetricAlarm(_)
            | ResourceKind::Dashboard(_)
            | ResourceKind::EventRule(_)
            | ResourceKind::Schedule(_)
            | ResourceKind::Existing(_)
            | ResourceKind::RawResource(_) => &[],
        }
    }
}

/// A resource that exists outside the description (a VPC, a cluster, a bucket the account
/// already has): nothing is created for it, and every reference to it reads the value given
/// for the attribute (`vpc-0abc...`), the same in every format.
#[derive(Clone, Debug, PartialEq)]
pub struct Existing {
    /// The kind handles to it carry.
    pub kind: Kind,
    /// The values of its attributes, as references read them.
    pub values: Vec<(Attr, Text)>,
}

impl Existing {
    /// The value of `attr`, when given.
    pub fn value(&self, attr: Attr) -> Option<&Text> {
        self.values.iter().find(|(a, _)| *a == attr).map(|(_, t)| t)
    }
}

impl ResourceFacts for Existing {
    fn handle_kind(&self) -> Option<Kind> {
        Some(self.kind)
    }
}

/// A resource hyperforge has no kind for, written as each format spells it: a CloudFormation
/// resource (type and properties) and its Terraform twin (resource type and body), with
/// references to described resources anywhere inside ([`RawValue::Ref`]).
#[derive(Clone, Debug, PartialEq)]
pub struct RawResource {
    /// `AWS::SQS::Queue` and its `Properties`.
    pub cloudformation: Option<(String, RawValue)>,
    /// `aws_sqs_queue` and its body.
    pub terraform: Option<(String, RawValue)>,
    /// How the CloudFormation type takes tags, for the stack's tags to reach it (the
    /// Terraform form is tagged by the provider's `default_tags`).
    pub cloudformation_tags: RawTags,
    /// The kind typed handles to it carry, when it is one hyperforge knows (`Kind::KmsKey` for
    /// an `AWS::KMS::Key` / `aws_kms_key`): references to it are then lowered like those to
    /// hyperforge's own resources of that kind.
    pub handle: Option<Kind>,
}

/// How a raw resource's CloudFormation type takes its `Tags` property.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RawTags {
    /// The type takes no tags (or the resource is left untagged).
    #[default]
    None,
    /// A list of `{"Key": ..., "Value": ...}` objects (most types).
    KeyValueList,
    /// An object of keys to values (`AWS::SSM::Parameter`, ...).
    Map,
}

impl ResourceFacts for RawResource {
    fn handle_kind(&self) -> Option<Kind> {
        self.handle
    }

    fn references(&self) -> Vec<AttrRef> {
        let mut out = Vec::new();
        for (_, v) in self.cloudformation.iter().chain(&self.terraform) {
            v.collect_references(&mut out);
        }
        out
    }
    fn inputs(&self) -> Vec<StackInput> {
        let mut out = Vec::new();
        for (_, v) in self.cloudformation.iter().chain(&self.terraform) {
            out.extend(v.inputs());
        }
        out
    }
}

/// A JSON value whose leaves may be references or texts with references: the properties of
/// a [`RawResource`]. Each backend renders the references its own way.
#[derive(Clone, Debug, PartialEq)]
pub enum RawValue {
    /// A JSON value taken as it is.
    Json(serde_json::Value),
    /// An attribute of a described resource.
    Ref(AttrRef),
    /// A string with references and pseudo parameters inside.
    Text(Text),
    /// A list.
    List(Vec<RawValue>),
    /// An object, keys in the order given.
    Object(Vec<(String, RawValue)>),
}

impl RawValue {
    /// The value as compact JSON text (serde_json's form for the JSON parts), its texts and
    /// references as JSON strings.
    pub fn json_text(&self) -> Text {
        match self {
            RawValue::Json(v) => Text::lit(v.to_string()),
            RawValue::Ref(r) => Text::attr(r.clone()).json_quoted(),
            RawValue::Text(t) => t.json_quoted(),
            RawValue::List(items) => {
                let mut out = Text::lit("[");
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out = out.push_lit(",");
                    }
                    out = out.push_text(item.json_text());
                }
                out.push_lit("]")
            }
            RawValue::Object(fields) => {
                let mut out = Text::lit("{");
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out = out.push_lit(",");
                    }
                    out = out
                        .push_lit(serde_json::Value::String(k.clone()).to_string())
                        .push_lit(":")
                        .push_text(v.json_text());
                }
                out.push_lit("}")
            }
        }
    }

    /// The deploy-time inputs of its texts.
    pub fn inputs(&self) -> Vec<StackInput> {
        match self {
            RawValue::Json(_) | RawValue::Ref(_) => Vec::new(),
            RawValue::Text(t) => t.inputs().cloned().collect(),
            RawValue::List(items) => items.iter().flat_map(RawValue::inputs).collect(),
            RawValue::Object(fields) => fields.iter().flat_map(|(_, v)| v.inputs()).collect(),
        }
    }

    fn collect_references(&self, out: &mut Vec<AttrRef>) {
        match self {
            RawValue::Json(_) => {}
            RawValue::Ref(r) => out.push(r.clone()),
            RawValue::Text(t) => out.extend(t.references().cloned()),
            RawValue::List(items) => items.iter().for_each(|v| v.collect_references(out)),
            RawValue::Object(fields) => fields.iter().for_each(|(_, v)| v.collect_references(out)),
        }
    }

    /// An object of `fields`, in the order given.
    pub fn object<K: Into<String>>(fields: impl IntoIterator<Item = (K, RawValue)>) -> RawValue {
        RawValue::Object(fields.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// A list of `items`.
    pub fn list(items: impl IntoIterator<Item = RawValue>) -> RawValue {
        RawValue::List(items.into_iter().collect())
    }

    /// Whether the value is an object (properties and bodies must be).
    pub fn is_object(&self) -> bool {
        matches!(
            self,
            RawValue::Object(_) | RawValue::Json(serde_json::Value::Object(_))
        )
    }
}

impl From<serde_json::Value> for RawValue {
    fn from(v: serde_json::Value) -> Self {
        RawValue::Json(v)
    }
}

impl From<AttrRef> for RawValue {
    fn from(r: AttrRef) -> Self {
        RawValue::Ref(r)
    }
}

impl From<Text> for RawValue {
    fn from(t: Text) -> Self {
        RawValue::Text(t)
    }
}

impl From<&str> for RawValue {
    fn from(s: &str) -> Self {
        RawValue::Json(serde_json::Value::String(s.to_owned()))
    }
}

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
    /// The port range (both ends included); `None` for every port.
    pub ports: Option<(u16, u16)>,
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
    /// A fixed name (S3 names are global: one that includes the account id and region), or
    /// `None` for a name the deployment generates.
    pub name: Option<Text>,
    /// Where its server access logs go, or why it keeps none.
    pub access_logs: AccessLogs,
    /// Why the objects may be deleted with the bucket, for a bucket written by something other
    /// than the deployment (an operator): Terraform then empties it on destroy
    /// (`force_destroy`). CloudFormation never deletes a non-empty bucket; the runbook
    /// empties every versioned bucket before its stack is deleted.
    pub deleted_with_objects: Option<&'static str>,
    /// What S3 removes on its own, when anything.
    pub lifecycle: Option<BucketLifecycle>,
}

impl Bucket {
    /// The bucket policy, given the bucket's own ARN: requests without TLS are denied, and a
    /// bucket receiving access logs lets S3's logging service write them for its sources
    /// (this account's buckets named in `sources` only, as the S3 User Guide's "Permissions
    /// for log delivery" grants it).
    pub fn policy(&self, arn: AttrRef) -> PolicyDocument {
        let mut doc = PolicyDocument::new().statement(deny_insecure_transport(arn.clone()));
        if let AccessLogs::Receives { sources } = &self.access_logs {
            doc = doc.statement(
                Statement::allow(["s3:PutObject"])
                    .sid("S3ServerAccessLogs")
                    .principal(PrincipalKind::Service, "logging.s3.amazonaws.com")
                    .resource(Text::attr(arn).push_lit("/*"))
                    .condition(
                        "ArnLike",
                        "aws:SourceArn",
                        sources.iter().cloned().map(Text::attr).collect(),
                    )
                    .condition(
                        "StringEquals",
                        "aws:SourceAccount",
                        vec![Text::default().push_pseudo(Pseudo::AccountId)],
                    ),
            );
        }
        doc
    }

    /// Whether S3 encrypts it with its own keys (SSE-S3) rather than KMS: only a bucket
    /// receiving access logs, the one encryption S3 log delivery supports.
    pub fn s3_managed_encryption(&self) -> bool {
        matches!(self.access_logs, AccessLogs::Receives { .. })
    }
}

/// A bucket's server access logging.
#[derive(Clone, Debug, PartialEq)]
pub enum AccessLogs {
    /// None, and why (checkov `CKV_AWS_18`, shown where the finding is suppressed).
    Off(&'static str),
    /// Delivered to another bucket (its name), under `prefix`.
    To {
        /// The receiving bucket's name.
        bucket: AttrRef,
        /// The key prefix of this bucket's logs (`weights/`).
        prefix: String,
    },
    /// The bucket receives the access logs of `sources` (their ARNs): S3's logging service may
    /// write to it for those buckets of this account only. S3 delivers access logs only to a
    /// bucket encrypted with S3-managed keys (SSE-S3), so this bucket is, and it logs nothing
    /// itself (logging the log bucket would log its own deliveries).
    Receives {
        /// The ARNs of the buckets whose logs it receives.
        sources: Vec<AttrRef>,
    },
}

/// Lifecycle rules on every object of a bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketLifecycle {
    /// Days after which an unfinished multipart upload is aborted (its parts are billed until
    /// then).
    pub abort_incomplete_multipart_days: u32,
    /// Days an object version stays after it is replaced or deleted, when limited.
    pub noncurrent_version_days: Option<u32>,
    /// Days after which current objects expire, when limited (log buckets).
    pub expire_days: Option<u32>,
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

pub use crate::app::text::StackInput;

/// An ECR pull-through cache rule: an image `<repo>` of the upstream registry is pulled as
/// `<account>.dkr.ecr.<region>.amazonaws.com/<repository_prefix>/<repo>` and kept in the
/// account's private registry, so nodes pull from ECR instead of the upstream registry.
#[derive(Clone, Debug, PartialEq)]
pub struct EcrPullThroughCacheRule {
    /// The repository namespace of the cached images (`docker-hub`).
    pub repository_prefix: String,
    /// The upstream registry (`registry-1.docker.io`).
    pub upstream_registry_url: String,
    /// The ARN of the Secrets Manager secret (named `ecr-pullthroughcache/...`) holding the
    /// upstream credentials, chosen when the stack is deployed; Docker Hub requires one.
    pub credential: Option<StackInput>,
}

impl ResourceFacts for EcrPullThroughCacheRule {
    fn inputs(&self) -> Vec<StackInput> {
        self.credential.iter().cloned().collect()
    }
}

/// An inline policy added to a role that another construct created (a grant).
#[derive(Clone, Debug, PartialEq)]
pub struct RolePolicy {
    /// The policy's name, unique on the role.
    pub name: String,
    /// The role's name.
    pub role: AttrRef,
    /// The document.
    pub document: PolicyDocument,
}

/// A value only a deployment knows that a Kubernetes stage's objects carry as a placeholder,
/// replaced when the stage is applied: an earlier stage's output (the producing stage outputs
/// it) or a deploy-time input. The stage's manifest entry lists each (`values`) for the
/// runbook and `hyperforge deploy`. Kubernetes objects are static YAML; this is how they name
/// what only a deployment knows (a workspace id, a reservation id).
#[derive(Clone, Debug, PartialEq)]
pub struct DeployValue {
    /// Where the value comes from.
    pub value: DeployedValue,
    /// The placeholder the objects carry.
    pub placeholder: String,
}

/// Where a [`DeployValue`] comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum DeployedValue {
    /// An attribute of a resource of an earlier stage, read from its output.
    Output(AttrRef),
    /// A deploy-time input of the stack.
    Input(StackInput),
}

impl ResourceFacts for DeployValue {
    fn references(&self) -> Vec<AttrRef> {
        match &self.value {
            DeployedValue::Output(r) => vec![r.clone()],
            DeployedValue::Input(_) => Vec::new(),
        }
    }
    fn inputs(&self) -> Vec<StackInput> {
        match &self.value {
            DeployedValue::Output(_) => Vec::new(),
            DeployedValue::Input(i) => vec![i.clone()],
        }
    }
}

/// The placeholder a Kubernetes object carries for `value` until it is applied:
/// `hyperforge-output-<output name>` (letters, digits and `-` only, so every tool leaves it as
/// it is, a schema pattern for names or ids accepts it, and `sed` replaces it without
/// escaping).
pub fn deploy_placeholder(value: &AttrRef) -> String {
    format!("hyperforge-output-{}", value.output_key())
}

impl ResourceFacts for RolePolicy {
    fn references(&self) -> Vec<AttrRef> {
        let mut out = vec![self.role.clone()];
        out.extend(self.document.references());
        out
    }
}

impl ResourceFacts for SecurityGroup {
    const HANDLE: Option<Kind> = Some(Kind::SecurityGroup);

    fn references(&self) -> Vec<AttrRef> {
        vec![self.vpc.clone()]
    }
}

impl ResourceFacts for SecurityGroupRule {
    fn references(&self) -> Vec<AttrRef> {
        let Peer::Group(peer) = &self.peer;
        vec![self.group.clone(), peer.clone()]
    }
}

impl ResourceFacts for Bucket {
    const HANDLE: Option<Kind> = Some(Kind::Bucket);

    fn references(&self) -> Vec<AttrRef> {
        match &self.access_logs {
            AccessLogs::Off(_) => Vec::new(),
            AccessLogs::To { bucket, .. } => vec![bucket.clone()],
            AccessLogs::Receives { sources } => sources.clone(),
        }
    }
}

impl ResourceFacts for StackOutput {
    fn references(&self) -> Vec<AttrRef> {
        vec![self.value.clone()]
    }
}

impl ResourceFacts for Role {
    const HANDLE: Option<Kind> = Some(Kind::Role);

    fn references(&self) -> Vec<AttrRef> {
        let mut out = self.trust.references();
        for (_, doc) in &self.inline {
            out.extend(doc.references());
        }
        out
    }
}

impl ResourceFacts for KmsKey {
    const HANDLE: Option<Kind> = Some(Kind::KmsKey);

    fn references(&self) -> Vec<AttrRef> {
        self.policy.references()
    }
}

impl ResourceFacts for PodIdentityAssociation {
    fn references(&self) -> Vec<AttrRef> {
        vec![self.cluster.clone(), self.role.clone()]
    }
}
