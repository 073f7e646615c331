//! The construct model: an [`App`] holds [`Stack`]s; a stack is an ordered list of deployment
//! [`Stage`]s and the constructs placed in them. Every construct has an id; its resources have
//! paths (`Network/Vpc`) from which logical ids are derived (`NetworkVpc`). Nothing here knows an
//! output format.

pub mod arn;
pub mod refs;
pub mod stage;
pub mod text;

use crate::diagnostics::{Code, Diagnostics};
use serde_json::Value;
use stage::{HelmRelease, Upload};
use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

pub use refs::{kind, Attr, AttrRef, Kind, Ref, ResourceKind};

/// Tags: sorted, so output is deterministic.
pub type Tags = BTreeMap<String, String>;

/// EC2's limit of tags on one resource (keys starting with `aws:` do not count).
pub const MAX_TAGS_PER_RESOURCE: usize = 50;

/// Tag keys Karpenter sets on what it launches, besides `Name`, which its EC2NodeClass
/// refuses in `spec.tags` (Karpenter 1.8.1 CRD): `kubernetes.io/cluster/` is a prefix.
pub const KARPENTER_TAG_KEYS: [&str; 5] = [
    "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim",
    "karpenter.k8s.aws/ec2nodeclass",
    "eks:eks-cluster-name",
    "kubernetes.io/cluster/",
];

/// The most tags EKS or Karpenter add to one instance beyond `Name` (Karpenter's
/// [`KARPENTER_TAG_KEYS`]; an EKS managed node group adds fewer).
const ADDED_INSTANCE_TAGS: usize = KARPENTER_TAG_KEYS.len();

/// Tag key prefixes of the tags the AWS Load Balancer Controller tracks the resources it
/// creates by; its `defaultTags` (the stack's tags) must not override them.
pub const LOAD_BALANCER_CONTROLLER_TAG_PREFIXES: [&str; 3] =
    ["elbv2.k8s.aws/", "service.k8s.aws/", "ingress.k8s.aws/"];

/// Whether `key` is one EKS, Karpenter or the Load Balancer Controller sets on a cluster's
/// resources, so no app or stack tag may use it ([`KARPENTER_TAG_KEYS`],
/// [`LOAD_BALANCER_CONTROLLER_TAG_PREFIXES`]; `kubernetes.io/cluster/` also marks what EKS
/// and the Load Balancer Controller consider the cluster's).
pub fn is_reserved_tag_key(key: &str) -> bool {
    key.starts_with("kubernetes.io/cluster")
        || LOAD_BALANCER_CONTROLLER_TAG_PREFIXES
            .iter()
            .any(|p| key.starts_with(p))
        || KARPENTER_TAG_KEYS
            .iter()
            .any(|k| !k.ends_with('/') && *k == key)
}

/// A whole description: one or more stacks, and tags that reach every taggable resource.
#[derive(Clone, Debug, Default)]
pub struct App {
    tags: Tags,
    stacks: Vec<Stack>,
}

impl App {
    /// An empty app.
    pub fn new() -> Self {
        App::default()
    }

    /// Adds a tag to every taggable resource of every stack (a stack's own tag of the same key
    /// wins).
    pub fn tag(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.tags.insert(key.into(), value.into());
        self
    }

    /// Adds a stack.
    pub fn stack(mut self, stack: Stack) -> Self {
        self.stacks.push(stack);
        self
    }

    /// Adds a stack (by reference, for loops).
    pub fn add_stack(&mut self, stack: Stack) {
        self.stacks.push(stack);
    }

    /// The stacks in the order added.
    pub fn stacks(&self) -> &[Stack] {
        &self.stacks
    }

    /// The app-level tags.
    pub fn tags(&self) -> &Tags {
        &self.tags
    }
}

/// What a stage deploys, and with which tool.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum StageKind {
    /// A CloudFormation stack (`<stack>-<stage>`) built from the constructs placed in the stage.
    CloudFormation,
    /// A Helm release with pinned chart and values.
    Helm(HelmRelease),
    /// Files copied to an S3 bucket created by an earlier stage.
    Upload(Upload),
    /// Kubernetes objects applied with `kubectl apply`, built from the constructs in the stage.
    Kubernetes,
}

impl StageKind {
    /// The manifest's name for the kind.
    pub fn as_str(&self) -> &'static str {
        match self {
            StageKind::CloudFormation => "cloudformation",
            StageKind::Helm(_) => "helm",
            StageKind::Upload(_) => "s3-upload",
            StageKind::Kubernetes => "kubernetes",
        }
    }
}

/// One deployment step of a stack.
#[derive(Clone, Debug)]
pub struct Stage {
    /// The stage's name, unique in its stack (`foundation`, `cluster`, ...).
    pub name: String,
    /// What the stage deploys.
    pub kind: StageKind,
}

/// A handle to a stage, returned by the `Stack::*_stage` methods and passed to `Stack::add`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StageId(usize);

impl StageId {
    pub(crate) fn from_index(index: usize) -> StageId {
        StageId(index)
    }

    /// The stage's position in deployment order (0 first).
    pub fn index(self) -> usize {
        self.0
    }
}

/// A construct as a stack stores it: the type-erased view the core model needs (its id and
/// the references it makes). The layers above reach the construct itself through
/// `ConstructRef` in [`crate::constructs`], which stores every construct `Stack::add` places.
/// A description is data: it is shared between the threads that synthesize an app's stacks.
pub trait AnyConstruct: Any + fmt::Debug + Send + Sync {
    /// The construct's id (first segment of its resources' paths).
    fn id(&self) -> &str;
    /// The construct's kind, as stack files and messages name it (`network`, `eks_cluster`).
    fn kind(&self) -> &'static str;
    /// Every reference the construct makes to other resources.
    fn references(&self) -> Vec<AttrRef>;
    /// The construct as `Any`, for code that needs its own type back.
    fn as_any(&self) -> &dyn Any;
    /// The stored value itself as `Any`, for the layer that stored it.
    fn as_stored(&self) -> &dyn Any;
    /// A boxed copy.
    fn clone_box(&self) -> Box<dyn AnyConstruct>;
}

impl Clone for Box<dyn AnyConstruct> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

/// A construct placed in a stage.
#[derive(Clone, Debug)]
pub struct Node {
    /// The construct's id (first segment of its resources' paths).
    pub id: String,
    /// The stage it is deployed in.
    pub stage: StageId,
    /// The construct itself.
    pub construct: Box<dyn AnyConstruct>,
    /// Where in the describing program it was added (`src/main.rs:52:5`), when known.
    pub location: Option<&'static std::panic::Location<'static>>,
}

/// A raw per-resource property override: the escape hatch when a builder lacks a field.
#[derive(Clone, Debug, PartialEq)]
pub struct PropertyOverride {
    /// The emitted resource's construct path (`Network/Vpc`).
    pub path: String,
    /// Dotted property path below `Properties` (`EnableDnsHostnames`, `VpcConfig.Subnets.0`).
    pub property: String,
    /// The value to set; `None` removes the property.
    pub value: Option<Value>,
    /// Where in the describing program it was given (its diagnostics point there).
    pub location: Option<&'static std::panic::Location<'static>>,
}

/// A raw attribute override of the Terraform resource(s) lowered at a construct path: the
/// Terraform twin of [`PropertyOverride`].
#[derive(Clone, Debug, PartialEq)]
pub struct TerraformOverride {
    /// The construct path (`Network/Vpc`).
    pub path: String,
    /// The Terraform resource type, when the path lowers to several (`aws_s3_bucket_versioning`).
    pub resource_type: Option<String>,
    /// Dotted attribute path in the resource's block (`tags.Team`, `scaling_config.max_size`).
    pub attribute: String,
    /// The value to set; `None` removes the attribute.
    pub value: Option<Value>,
    /// Where in the describing program it was given (its diagnostics point there).
    pub location: Option<&'static std::panic::Location<'static>>,
}

/// A patch of a Kubernetes object.
#[derive(Clone, Debug, PartialEq)]
pub enum ObjectPatch {
    /// A JSON merge patch (RFC 7386): an object whose members replace the object's, `null`
    /// removing one, objects merging recursively.
    Merge(Value),
    /// A JSON patch (RFC 6902): a list of `add`, `remove`, `replace`, `move`, `copy` and `test`
    /// operations on JSON Pointer paths (`/spec/template/spec/tolerations/-` appends).
    Json(Value),
}

/// A patch of the Kubernetes object at a construct path.
#[derive(Clone, Debug, PartialEq)]
pub struct KubePatch {
    /// The object's construct path: its construct's id and its kind (`Workload/Deployment`).
    pub path: String,
    /// The patch.
    pub patch: ObjectPatch,
    /// Where in the describing program it was given (its diagnostics point there).
    pub location: Option<&'static std::panic::Location<'static>>,
}

/// One deployment: a region, tags, an ordered list of stages and the constructs in them.
#[derive(Clone, Debug)]
pub struct Stack {
    name: String,
    region: String,
    description: Option<String>,
    tags: Tags,
    stages: Vec<Stage>,
    nodes: Vec<Node>,
    overrides: Vec<PropertyOverride>,
    acknowledged: Vec<Acknowledged>,
    terraform_overrides: Vec<TerraformOverride>,
    patches: Vec<KubePatch>,
}

/// A warning (or note) a reviewer decided to live with: its code, at one construct path and
/// below, with the reason written into the manifest (`Stack::acknowledge`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acknowledged {
    /// The construct path inside the stack (`GpuNodes`, `Workload/Deployment`); empty for the
    /// whole stack.
    pub path: String,
    /// The acknowledged code.
    pub code: Code,
    /// Why it is acceptable here.
    pub reason: String,
    /// Where in the describing program it was acknowledged.
    pub location: Option<&'static std::panic::Location<'static>>,
}

impl Acknowledged {
    /// Whether it can take effect: a warning or note, with a reason (`HF0017` otherwise).
    pub fn is_usable(&self) -> bool {
        self.code.severity() != crate::diagnostics::Severity::Error
            && !self.reason.trim().is_empty()
    }
}

impl Stack {
    /// A stack named `name` (it prefixes the CloudFormation stack names of its stages) in
    /// `region`.
    pub fn new(name: impl Into<String>, region: impl Into<String>) -> Self {
        Stack {
            name: name.into(),
            region: region.into(),
            description: None,
            tags: Tags::new(),
            stages: Vec::new(),
            nodes: Vec::new(),
            overrides: Vec::new(),
            acknowledged: Vec::new(),
            terraform_overrides: Vec::new(),
            patches: Vec::new(),
        }
    }

    /// A human description, written into every template.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }

    /// Adds a tag to every taggable resource of this stack.
    pub fn tag(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.tags.insert(key.into(), value.into());
        self
    }

    /// Adds a CloudFormation stage; constructs added to it become one template.
    pub fn cloudformation_stage(&mut self, name: impl Into<String>) -> StageId {
        self.push_stage(name.into(), StageKind::CloudFormation)
    }

    /// Adds a Helm stage installing `release`.
    pub fn helm_stage(&mut self, name: impl Into<String>, release: HelmRelease) -> StageId {
        self.push_stage(name.into(), StageKind::Helm(release))
    }

    /// Adds a stage that copies files to a bucket created earlier.
    pub fn upload_stage(&mut self, name: impl Into<String>, upload: Upload) -> StageId {
        self.push_stage(name.into(), StageKind::Upload(upload))
    }

    /// Adds a Kubernetes stage; constructs added to it become one multi-document YAML file.
    pub fn kubernetes_stage(&mut self, name: impl Into<String>) -> StageId {
        self.push_stage(name.into(), StageKind::Kubernetes)
    }

    fn push_stage(&mut self, name: String, kind: StageKind) -> StageId {
        self.stages.push(Stage { name, kind });
        StageId(self.stages.len() - 1)
    }

    /// Places a construct in `stage` (see `Stack::add` in [`crate::constructs`], which also
    /// returns the construct's typed handle).
    pub(crate) fn push_node(
        &mut self,
        stage: StageId,
        construct: Box<dyn AnyConstruct>,
        location: Option<&'static std::panic::Location<'static>>,
    ) {
        self.nodes.push(Node {
            id: construct.id().to_owned(),
            stage,
            construct,
            location,
        });
    }

    /// Sets a raw CloudFormation property on the emitted resource at `path`, after lowering
    /// (CDK's `addPropertyOverride`). `property` is dotted below `Properties`; numeric segments
    /// index lists, and a last segment `-` appends to a list, as in JSON Pointer
    /// (`LaunchTemplateData.TagSpecifications.0.Tags.-`).
    ///
    /// The property path and the value are checked against the resource type's registry
    /// schema: an unknown property at any depth is error `HF0020`, a value of the wrong JSON
    /// type `HF0021`. Overriding a property hyperforge's rules checked (a node group's
    /// `CapacityType`, ...) warns (`HF0022`), and so does an override without a Terraform
    /// twin ([`Stack::override_terraform`]) when the Terraform module is written (`HF0023`).
    #[track_caller]
    pub fn override_property(
        &mut self,
        path: impl Into<String>,
        property: impl Into<String>,
        value: Value,
    ) {
        self.overrides.push(PropertyOverride {
            path: path.into(),
            property: property.into(),
            value: Some(value),
            location: Some(std::panic::Location::caller()),
        });
    }

    /// Removes a property from the emitted resource at `path` (see [`Stack::override_property`]).
    #[track_caller]
    pub fn remove_property(&mut self, path: impl Into<String>, property: impl Into<String>) {
        self.overrides.push(PropertyOverride {
            path: path.into(),
            property: property.into(),
            value: None,
            location: Some(std::panic::Location::caller()),
        });
    }

    /// Sets a raw attribute on the Terraform resource lowered at construct path `path` (the
    /// Terraform twin of [`Stack::override_property`]). `attribute` is dotted in the resource's
    /// block (`scaling_config.max_size`, `tags.Team`); numeric segments index lists and blocks,
    /// a last `-` appends. Checked against the provider schemas like CloudFormation overrides
    /// against the registry's. A path that lowers to several Terraform resources (a bucket)
    /// needs [`Stack::override_terraform_type`].
    #[track_caller]
    pub fn override_terraform(
        &mut self,
        path: impl Into<String>,
        attribute: impl Into<String>,
        value: Value,
    ) {
        self.terraform_overrides.push(TerraformOverride {
            path: path.into(),
            resource_type: None,
            attribute: attribute.into(),
            value: Some(value),
            location: Some(std::panic::Location::caller()),
        });
    }

    /// [`Stack::override_terraform`] of the Terraform resource of type `resource_type` lowered
    /// at `path` (`aws_s3_bucket_versioning` of a bucket's path).
    #[track_caller]
    pub fn override_terraform_type(
        &mut self,
        path: impl Into<String>,
        resource_type: impl Into<String>,
        attribute: impl Into<String>,
        value: Value,
    ) {
        self.terraform_overrides.push(TerraformOverride {
            path: path.into(),
            resource_type: Some(resource_type.into()),
            attribute: attribute.into(),
            value: Some(value),
            location: Some(std::panic::Location::caller()),
        });
    }

    /// Removes an attribute from the Terraform resource at `path` (see
    /// [`Stack::override_terraform`]).
    #[track_caller]
    pub fn remove_terraform(&mut self, path: impl Into<String>, attribute: impl Into<String>) {
        self.terraform_overrides.push(TerraformOverride {
            path: path.into(),
            resource_type: None,
            attribute: attribute.into(),
            value: None,
            location: Some(std::panic::Location::caller()),
        });
    }

    /// [`Stack::remove_terraform`] of the Terraform resource of type `resource_type` lowered at
    /// `path`.
    #[track_caller]
    pub fn remove_terraform_type(
        &mut self,
        path: impl Into<String>,
        resource_type: impl Into<String>,
        attribute: impl Into<String>,
    ) {
        self.terraform_overrides.push(TerraformOverride {
            path: path.into(),
            resource_type: Some(resource_type.into()),
            attribute: attribute.into(),
            value: None,
            location: Some(std::panic::Location::caller()),
        });
    }

    /// Patches the Kubernetes object at construct path `path` (its construct's id and its
    /// kind: `Workload/Deployment`) before it is written: a JSON merge patch (RFC 7386) or a
    /// JSON patch (RFC 6902). Patches apply in the order given. An unknown path is error
    /// `HF0025`, a patch that does not apply `HF0026`, one changing `apiVersion`, `kind`,
    /// `metadata.name` or `metadata.namespace` `HF0027`.
    #[track_caller]
    pub fn patch_object(&mut self, path: impl Into<String>, patch: ObjectPatch) {
        self.patches.push(KubePatch {
            path: path.into(),
            patch,
            location: Some(std::panic::Location::caller()),
        });
    }

    /// The Terraform attribute overrides in the order given.
    pub fn terraform_overrides(&self) -> &[TerraformOverride] {
        &self.terraform_overrides
    }

    /// The Kubernetes object patches in the order given.
    pub fn patches(&self) -> &[KubePatch] {
        &self.patches
    }

    /// The stack's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The stack's region.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The stack's description, if any.
    pub fn description_text(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// The stack's own tags.
    pub fn tags(&self) -> &Tags {
        &self.tags
    }

    /// The stages in deployment order.
    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// The stage behind a handle (`None` for a handle of another stack).
    pub fn stage(&self, id: StageId) -> Option<&Stage> {
        self.stages.get(id.0)
    }

    /// The constructs in the order added.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The constructs placed in `stage`.
    pub fn nodes_in(&self, stage: StageId) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(move |n| n.stage == stage)
    }

    /// Acknowledges warning (or note) `code` at construct path `path` and below (`""`: the
    /// whole stack), with the reason a reviewer accepted it for (CDK's `acknowledgeWarning`).
    /// Acknowledged diagnostics are left out of the report (so
    /// [`SynthOptions::deny_warnings`](crate::SynthOptions) stays usable) and listed with
    /// their reason in the stack's `manifest.json` entry. Errors cannot be acknowledged
    /// (`HF0017`); one that matches nothing warns (`HF0018`).
    ///
    /// ```
    /// # use hyperforge::{App, Code, Stack};
    /// let mut stack = Stack::new("demo", "us-west-2");
    /// stack.acknowledge("Endpoint", Code::WeightsDownloadedPerPod, "a one-off evaluation; staging costs more than it saves");
    /// ```
    #[track_caller]
    pub fn acknowledge(
        &mut self,
        path: impl Into<String>,
        code: Code,
        reason: impl Into<String>,
    ) -> &mut Self {
        self.acknowledged.push(Acknowledged {
            path: path.into(),
            code,
            reason: reason.into(),
            location: Some(std::panic::Location::caller()),
        });
        self
    }

    /// The acknowledgements, in the order given.
    pub fn acknowledgements(&self) -> &[Acknowledged] {
        &self.acknowledged
    }

    /// The source location of the construct a diagnostic at display path `path` belongs to.
    pub fn location_of(&self, path: &str) -> Option<&'static std::panic::Location<'static>> {
        let inner = path.strip_prefix(self.name.as_str())?.strip_prefix('/')?;
        let id = inner.split('/').next()?;
        self.nodes.iter().find(|n| n.id == id)?.location
    }

    /// Drops the source locations of the constructs and acknowledgements (for a stack built by
    /// a loader, whose diagnostics point into the file it read).
    pub fn forget_locations(&mut self) {
        for node in &mut self.nodes {
            node.location = None;
        }
        for ack in &mut self.acknowledged {
            ack.location = None;
        }
        for o in &mut self.overrides {
            o.location = None;
        }
        for o in &mut self.terraform_overrides {
            o.location = None;
        }
        for p in &mut self.patches {
            p.location = None;
        }
    }

    /// The property overrides in the order given.
    pub fn overrides(&self) -> &[PropertyOverride] {
        &self.overrides
    }

    /// The CloudFormation stack name of a stage: `<stack>-<stage>`.
    pub fn stage_stack_name(&self, stage: StageId) -> String {
        match self.stage(stage) {
            Some(s) => format!("{}-{}", self.name, s.name),
            None => self.name.clone(),
        }
    }

    /// The construct path of a node or resource, as shown in diagnostics (`stack/Network/Vpc`).
    pub fn display_path(&self, path: &str) -> String {
        if path.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.name, path)
        }
    }

    /// The stage of the construct with id `construct_id`.
    pub fn stage_of(&self, construct_id: &str) -> Option<StageId> {
        self.nodes
            .iter()
            .find(|n| n.id == construct_id)
            .map(|n| n.stage)
    }

    /// Tags for a resource of this stack: app tags, then stack tags (stack wins), plus the
    /// stack's own identifying tag.
    pub fn effective_tags(&self, app_tags: &Tags) -> Tags {
        let mut tags = app_tags.clone();
        tags.extend(self.tags.iter().map(|(k, v)| (k.clone(), v.clone())));
        tags.insert("hyperforge:stack".to_owned(), self.name.clone());
        tags
    }

    /// Checks the stack's own structure (names, stages, construct ids, references between
    /// stages). Construct-specific rules live with the constructs.
    pub(crate) fn validate_structure(&self, app_tags: &Tags, ds: &mut Diagnostics) {
        let stack_path = self.display_path("");
        for (i, ack) in self.acknowledged.iter().enumerate() {
            let problem = if ack.is_usable() {
                None
            } else if ack.code.severity() == crate::diagnostics::Severity::Error {
                Some((
                    format!("`{}` is an error and cannot be acknowledged", ack.code),
                    "fix what it reports; only warnings and notes can be acknowledged",
                ))
            } else {
                Some((
                    format!("the acknowledgement of `{}` gives no reason", ack.code),
                    "say why the warning is acceptable here: the reason is written into the manifest for reviewers",
                ))
            };
            if let Some((message, help)) = problem {
                let field = if ack.code.severity() == crate::diagnostics::Severity::Error {
                    "code"
                } else {
                    "reason"
                };
                let mut d = crate::diagnostics::Diagnostic::new(
                    Code::AcknowledgedError,
                    self.display_path(&ack.path),
                    message,
                    help,
                )
                .at_field(&format!("acknowledge[{i}].{field}"));
                d.location = ack.location.map(|l| l.to_string());
                ds.push(d);
            }
        }
        if let Some(text) = &self.description {
            if text.len() > MAX_DESCRIPTION_BYTES {
                ds.report_field(
                    Code::DescriptionTooLong,
                    &stack_path,
                    "description",
                    format!(
                        "the description is {} bytes; CloudFormation accepts {MAX_DESCRIPTION_BYTES}",
                        text.len()
                    ),
                    "shorten it to at most 1,024 bytes",
                );
            }
        }
        if self.stages.is_empty() {
            ds.report(
                Code::NoStages,
                &stack_path,
                format!("stack `{}` has no stages", self.name),
                "add a stage (`cloudformation_stage`, `helm_stage`, `upload_stage`, `kubernetes_stage`)",
            );
        }
        if !is_valid_stack_name(&self.name) {
            ds.report(
                Code::InvalidStackName,
                &stack_path,
                format!(
                    "stack name `{}` is not a valid CloudFormation stack name",
                    self.name
                ),
                "use 1-100 characters: a letter first, then letters, digits and hyphens",
            );
        }
        if !crate::catalog::regions::is_known_region(&self.region) {
            ds.report(
                Code::InvalidRegion,
                &stack_path,
                format!("`{}` is not a known AWS region", self.region),
                format!(
                    "use one of: {}",
                    crate::catalog::regions::KNOWN_REGIONS.join(", ")
                ),
            );
        }
        let tags = self.effective_tags(app_tags);
        for (key, value) in &tags {
            if key.is_empty() || key.len() > 128 || key.starts_with("aws:") || value.len() > 256 {
                ds.report(
                    Code::InvalidTag,
                    &stack_path,
                    format!("tag `{key}` = `{value}` is not valid"),
                    "tag keys are 1-128 characters not starting with `aws:`; values at most 256",
                );
            } else if is_reserved_tag_key(key) {
                ds.report(
                    Code::ReservedTagKey,
                    &stack_path,
                    format!("tag key `{key}` is set by EKS, Karpenter or the Load Balancer Controller on the cluster's resources"),
                    "use another key: these track which cluster, node pool or load balancer a resource belongs to",
                );
            }
        }
        let added = ADDED_INSTANCE_TAGS + usize::from(!tags.contains_key("Name"));
        if tags.len() + added > MAX_TAGS_PER_RESOURCE {
            ds.report(
                Code::TooManyTags,
                &stack_path,
                format!(
                    "{} tags (the app's, the stack's and `hyperforge:stack`) plus the {added} EKS or Karpenter add to an instance exceed EC2's {MAX_TAGS_PER_RESOURCE} per resource",
                    tags.len()
                ),
                format!(
                    "keep at most {} tags on the app and stack together",
                    MAX_TAGS_PER_RESOURCE - added - 1
                ),
            );
        }
        let mut stage_names = BTreeSet::new();
        for (index, stage) in self.stages.iter().enumerate() {
            let path = self.display_path(&stage.name);
            if !stage_names.insert(stage.name.as_str()) {
                ds.report(
                    Code::DuplicateStage,
                    &path,
                    format!("stage `{}` is defined twice", stage.name),
                    "give every stage of a stack its own name",
                );
            }
            let full = format!("{}-{}", self.name, stage.name);
            if !is_valid_stack_name(&stage.name) || !is_valid_stack_name(&full) {
                ds.report(
                    Code::InvalidStackName,
                    &path,
                    format!("stage name `{}` makes the stack name `{full}`, which is not valid", stage.name),
                    "stage names are letters, digits and hyphens, starting with a letter; `<stack>-<stage>` must be at most 100 characters",
                );
            }
            let holds_constructs = matches!(
                stage.kind,
                StageKind::CloudFormation | StageKind::Kubernetes
            );
            if holds_constructs && !self.nodes.iter().any(|n| n.stage.0 == index) {
                ds.report(
                    Code::EmptyStage,
                    &path,
                    format!("stage `{}` has no constructs", stage.name),
                    "add constructs to the stage with `Stack::add`, or remove it",
                );
            }
        }
        let mut ids = BTreeSet::new();
        for node in &self.nodes {
            let path = self.display_path(&node.id);
            match self.stages.get(node.stage.0).map(|s| (&s.name, &s.kind)) {
                None => ds.report(
                    Code::ConstructInWrongStage,
                    &path,
                    format!(
                        "`{}` is placed in stage {} of a stack with {} stages",
                        node.id,
                        node.stage.0 + 1,
                        self.stages.len()
                    ),
                    "use a StageId this stack returned (`Stack::cloudformation_stage`, `Stack::kubernetes_stage`)",
                ),
                Some((name, StageKind::Helm(_) | StageKind::Upload(_))) => ds.report(
                    Code::ConstructInWrongStage,
                    &path,
                    format!("`{}` is placed in stage `{name}`, which deploys a Helm release or uploads files", node.id),
                    "add it to a CloudFormation stage (AWS resources) or a Kubernetes stage (Kubernetes objects)",
                ),
                Some(_) => {}
            }
            if !is_valid_construct_id(&node.id) {
                ds.report(
                    Code::InvalidConstructId,
                    &path,
                    format!("construct id `{}` is not a valid identifier", node.id),
                    "start with an ASCII letter; use only ASCII letters and digits (at most 64)",
                );
            }
            if !ids.insert(node.id.as_str()) {
                ds.report(
                    Code::LogicalIdCollision,
                    &path,
                    format!(
                        "construct id `{}` is used twice in stack `{}`",
                        node.id, self.name
                    ),
                    "give each construct its own id; ids become logical ids",
                );
            }
            if node.stage.0 >= self.stages.len() {
                ds.report(
                    Code::UnknownReference,
                    &path,
                    format!(
                        "construct `{}` was added to a stage of another stack",
                        node.id
                    ),
                    "add constructs only to stages returned by this stack's `*_stage` methods",
                );
            }
        }
        for node in &self.nodes {
            let path = self.display_path(&node.id);
            for r in node.construct.references() {
                self.check_reference(&r, node.stage, &path, ds);
            }
        }
        for (index, stage) in self.stages.iter().enumerate() {
            let path = self.display_path(&stage.name);
            match &stage.kind {
                StageKind::Upload(upload) => {
                    self.check_reference(&upload.bucket.name(), StageId(index), &path, ds);
                    check_upload_names(upload, &path, ds);
                }
                StageKind::Helm(release) => {
                    for (_, r) in &release.set_from_outputs {
                        self.check_reference(r, StageId(index), &path, ds);
                    }
                }
                _ => {}
            }
        }
    }

    fn check_reference(&self, r: &AttrRef, from: StageId, path: &str, ds: &mut Diagnostics) {
        if !r.kind.attrs().contains(&r.attr) {
            ds.report(
                Code::UnknownReference,
                path,
                format!(
                    "refers to {:?} of `{}`, which a {:?} does not have",
                    r.attr, r.path, r.kind
                ),
                format!(
                    "read one of {:?}, through the handle's methods",
                    r.kind.attrs()
                ),
            );
        }
        if r.stack != self.name {
            ds.report(
                Code::UnknownReference,
                path,
                format!("refers to `{}/{}` in another stack", r.stack, r.path),
                "references only work within one stack; pass the value in as a parameter",
            );
            return;
        }
        match self.stage_of(r.construct_id()) {
            None => ds.report(
                Code::UnknownReference,
                path,
                format!("refers to `{}`, which is not in this stack", r.path),
                format!("add construct `{}` to the stack", r.construct_id()),
            ),
            Some(target) if target > from => {
                let target_name = self.stages.get(target.0).map_or("?", |s| s.name.as_str());
                let from_name = self.stages.get(from.0).map_or("?", |s| s.name.as_str());
                ds.report(
                    Code::ReferenceToLaterStage,
                    path,
                    format!(
                        "stage `{from_name}` uses `{}`, which stage `{target_name}` creates later",
                        r.path
                    ),
                    format!(
                        "move `{}` to stage `{from_name}` or earlier",
                        r.construct_id()
                    ),
                )
            }
            Some(_) => {}
        }
    }
}

/// Every name of an upload becomes an artifact path and an S3 key: plain file names, unique,
/// under a plain key prefix.
fn check_upload_names(upload: &Upload, path: &str, ds: &mut Diagnostics) {
    if !stage::is_plain_key_prefix(&upload.prefix) {
        ds.report_field(
            Code::InvalidFileName,
            path,
            "prefix",
            format!(
                "`{}` is not a key prefix of plain names ending in `/`",
                upload.prefix.escape_debug()
            ),
            "use segments of letters, digits, `.`, `_` and `-` joined and ended by `/` (`lifecycle/`)",
        );
    }
    let mut seen = BTreeSet::new();
    for f in &upload.files {
        if !stage::is_plain_file_name(&f.name) {
            ds.report_field(
                Code::InvalidFileName,
                path,
                "files",
                format!("`{}` is not a plain file name", f.name.escape_debug()),
                "use 1-255 letters, digits, `.`, `_` and `-`, starting with a letter or digit (no `/`, no `..`)",
            );
        } else if !seen.insert(f.name.as_str()) {
            ds.report_field(
                Code::InvalidFileName,
                path,
                "files",
                format!("`{}` is uploaded twice", f.name),
                "give every file of the upload its own name",
            );
        }
    }
}

/// The longest stack description CloudFormation accepts in a template, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 1024;

/// Logical ids are the path's segments joined: `Network/Vpc` -> `NetworkVpc`.
pub fn logical_id(path: &str) -> String {
    path.split('/').collect()
}

/// The snake_case of a logical id, Terraform's names for resources and variables (`NetworkVpc` -> `network_vpc`,
/// `AmazonEKSClusterPolicy` -> `amazon_eks_cluster_policy`, `NatEip1` -> `nat_eip1`).
pub fn snake_case(id: &str) -> String {
    let chars: Vec<char> = id.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_ascii_alphanumeric() {
            if !out.is_empty() && !out.ends_with('_') {
                out.push('_');
            }
            continue;
        }
        if c.is_ascii_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            let boundary = prev.is_ascii_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_ascii_uppercase() && next_lower);
            if boundary && !out.is_empty() && !out.ends_with('_') {
                out.push('_');
            }
        }
        out.push(c.to_ascii_lowercase());
    }
    out.trim_end_matches('_').to_owned()
}

/// A name made of words (`eks-pod-identity-agent`, `p6-b300`) as a logical-id segment
/// (`EksPodIdentityAgent`, `P6B300`).
pub fn pascal_id(name: &str) -> String {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// `name` within `limit` bytes (`limit` at least 16): unchanged when it fits, else its first
/// `limit - 9` bytes (cut on a character boundary), a hyphen and 8 hex digits of a stable hash of the
/// whole name (FNV-1a, 64 bits, its low 32). Names derived from other names (a stack's, a
/// cluster's, a fleet member's) then fit their service's limit for any input, and two that
/// differ only past the cut stay distinct, where truncating would make them one (an IAM role
/// shared by two regions' clusters, two node groups of one cluster).
pub fn fit_name(name: &str, limit: usize) -> String {
    if name.len() <= limit {
        return name.to_owned();
    }
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    // The head ends on a character boundary within `limit - 9` bytes, so the result fits in
    // bytes (the services count) whatever the name holds.
    let keep = limit.saturating_sub(9);
    let mut end = keep.min(name.len());
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}-{:08x}", &name[..end], hash & 0xffff_ffff)
}

/// Construct ids: an ASCII letter, then ASCII letters and digits; at most 64 characters.
pub fn is_valid_construct_id(id: &str) -> bool {
    let mut chars = id.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && id.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric())
}

/// CloudFormation stack names: a letter, then letters, digits and hyphens; at most 128
/// characters (hyperforge keeps to 100 so stage suffixes fit).
pub fn is_valid_stack_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && name.len() <= 100
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A derived name fits its limit whatever its parts, unchanged when it already fits, and
    /// names that differ only past the cut stay distinct (as truncation would not keep them).
    #[test]
    fn fitted_names_fit_and_stay_distinct() {
        assert_eq!(fit_name("kimi-k3-eks-gpunodes", 63), "kimi-k3-eks-gpunodes");
        let long = format!("kimi-k3-eks-fleet-{}", "x".repeat(60));
        // The hash is pinned: a name must not change between releases.
        assert_eq!(
            fit_name(&long, 63),
            format!("kimi-k3-eks-fleet-{}-405c6384", "x".repeat(36))
        );
        let mut seen = std::collections::BTreeSet::new();
        for region in ["us-east-1", "us-west-2", "eu-west-2", "ap-south-2"] {
            for limit in [16, 63, 64] {
                let name = format!("KarpenterNodeRole-{}-{region}", "m".repeat(80));
                let fitted = fit_name(&name, limit);
                assert_eq!(fitted.len(), limit);
                assert_eq!(fit_name(&name, limit), fitted, "deterministic");
                assert!(seen.insert(fitted), "{name} at {limit}");
            }
        }
        // Multi-byte characters are cut on a boundary and the result still fits in bytes.
        let wide = fit_name(&"é".repeat(100), 63);
        assert!(wide.len() <= 63, "{wide}");
    }

    #[test]
    fn a_stack_without_stages_or_with_a_long_description_is_refused() {
        let ds = App::new()
            .stack(Stack::new("demo", "us-west-2").description("x".repeat(1025)))
            .validate();
        assert!(ds.contains(Code::NoStages, "demo"), "{ds}");
        assert!(ds.contains(Code::DescriptionTooLong, "demo"), "{ds}");
    }

    #[test]
    fn upload_file_names_cannot_leave_the_output_or_the_prefix() {
        use crate::constructs::{LifecycleScripts, Network};
        let mut stack = Stack::new("demo", "us-west-2");
        let f = stack.cloudformation_stage("foundation");
        stack.add(f, Network::new("Network"));
        let scripts = stack.add(
            f,
            LifecycleScripts::new("Lifecycle")
                .file("../../../../tmp/evil.sh", "#!/bin/sh")
                .file("helper.sh", "a")
                .file("helper.sh", "b"),
        );
        let upload = scripts.upload();
        stack.upload_stage("scripts", upload.clone());
        // Clean file names, a prefix that leaves the bucket's folder.
        let mut clean = upload;
        clean.files.retain(|f| f.name == "on_create.sh");
        clean.prefix = "../up/".to_owned();
        stack.upload_stage("more", clean);
        let ds = App::new().stack(stack).validate();
        let bad: Vec<_> = ds
            .with_code(Code::InvalidFileName)
            .map(|d| d.message.clone())
            .collect();
        assert!(bad.iter().any(|m| m.contains("evil.sh")), "{ds}");
        assert!(bad.iter().any(|m| m.contains("uploaded twice")), "{ds}");
        let more: Vec<_> = ds
            .iter()
            .filter(|d| d.code == Code::InvalidFileName && d.path == "demo/more")
            .collect();
        assert!(
            more.len() == 1 && more[0].field.as_deref() == Some("prefix"),
            "{ds}"
        );
        assert!(["lifecycle/", "a/b-c_d.1/"]
            .iter()
            .all(|p| stage::is_plain_key_prefix(p)));
        assert!(["", "/", "a", "../a/", "a//", "/a/"]
            .iter()
            .all(|p| !stage::is_plain_key_prefix(p)));
    }

    #[test]
    fn a_reference_to_an_attribute_the_kind_lacks_is_refused() {
        use crate::constructs::{HelmRelease, Network};
        let mut stack = Stack::new("demo", "us-west-2");
        let f = stack.cloudformation_stage("foundation");
        let network = stack.add(f, Network::new("Network"));
        let mut release = HelmRelease::nvidia_device_plugin();
        let mut vpc_arn = network.vpc.id();
        vpc_arn.attr = Attr::Arn;
        release.set_from_outputs.push(("vpc".to_owned(), vpc_arn));
        stack.helm_stage("plugin", release);
        let ds = App::new().stack(stack).validate();
        assert!(ds.contains(Code::UnknownReference, "demo/plugin"), "{ds}");
    }

    #[test]
    fn logical_ids_come_from_paths() {
        assert_eq!(logical_id("Network/Vpc"), "NetworkVpc");
        assert_eq!(
            logical_id("Network/PrivateSubnet1"),
            "NetworkPrivateSubnet1"
        );
        assert_eq!(logical_id("Eks"), "Eks");
    }

    #[test]
    fn names_become_logical_id_segments() {
        assert_eq!(pascal_id("eks-pod-identity-agent"), "EksPodIdentityAgent");
        assert_eq!(pascal_id("p6-b300"), "P6B300");
        assert_eq!(pascal_id(""), "");
    }

    #[test]
    fn construct_ids_are_identifiers() {
        assert!(is_valid_construct_id("Network"));
        assert!(is_valid_construct_id("Gpu2"));
        assert!(!is_valid_construct_id("2Gpu"));
        assert!(!is_valid_construct_id("my-net"));
        assert!(!is_valid_construct_id(""));
        assert!(!is_valid_construct_id(&"a".repeat(65)));
    }

    #[test]
    fn stack_names_follow_cloudformation() {
        assert!(is_valid_stack_name("kimi-k3-hyperpod"));
        assert!(!is_valid_stack_name("-x"));
        assert!(!is_valid_stack_name("a_b"));
    }
}
