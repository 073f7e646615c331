//! Raw resources: what hyperforge has no builder for, written in each format's own terms and
//! placed in a stack like any construct. [`RawResource`] is an AWS resource as a
//! CloudFormation type with its properties and a Terraform resource type with its body;
//! [`KubernetesManifest`] is one Kubernetes object. Both may refer to described resources
//! through typed handles ([`RawValue::Ref`]): a raw AWS resource reads them as every resource
//! does (`Ref`/`Fn::GetAtt`/`Fn::ImportValue`, `${type.name.attr}`); a Kubernetes object gets
//! the deployed value substituted when its stage is applied (`Scope::deploy_value`).

use super::{Construct, Context};
use crate::app::{AttrRef, Kind, Ref};
use crate::diagnostics::{Code, Diagnostics};
use crate::resources::{KubeObject, RawResource as RawKind, RawTags, RawValue, Rule, Scope};
use serde_json::Value;

/// Bounds on what a raw value may hold, so a hostile description cannot make synthesis walk
/// without end: nesting depth and references per resource.
const MAX_DEPTH: usize = 64;
const MAX_REFERENCES: usize = 256;

/// An AWS resource hyperforge has no construct for, in both infrastructure formats. Its
/// CloudFormation form is `Type` and `Properties`; its Terraform form a resource type and
/// body; a stack that emits both formats should give both (`HF0031` warns otherwise).
///
/// ```
/// use hyperforge::constructs::RawResource;
/// use hyperforge::resources::RawValue;
/// use serde_json::json;
/// # let mut stack = hyperforge::Stack::new("demo", "us-west-2");
/// # let s = stack.cloudformation_stage("foundation");
/// # let topic = stack.add(s, hyperforge::constructs::AlarmTopic::new("Alarms"));
/// let queue = RawResource::new("DeadLetters")
///     .cloudformation("AWS::SQS::Queue", json!({ "MessageRetentionPeriod": 1209600, "SqsManagedSseEnabled": true }))
///     .terraform("aws_sqs_queue", json!({ "message_retention_seconds": 1209600, "sqs_managed_sse_enabled": true }));
/// // A typed reference inside: the alarm topic's ARN, lowered per format.
/// let subscription = RawResource::new("Forward")
///     .cloudformation("AWS::SNS::Subscription", RawValue::object([
///         ("Protocol", RawValue::from("email")),
///         ("Endpoint", RawValue::from("ml-oncall@example.com")),
///         ("TopicArn", RawValue::from(topic.topic.arn())),
///     ]));
/// ```
#[derive(Clone, Debug)]
pub struct RawResource {
    id: String,
    cloudformation: Option<(String, RawValue)>,
    terraform: Option<(String, RawValue)>,
    cloudformation_tags: RawTags,
    acknowledged: Vec<(Rule, String)>,
    handle: Option<Kind>,
}

/// Typed references to a raw resource declared [`RawResource::referable_as`] a kind hyperforge
/// knows: other raw resources and constructs refer to it as they refer to hyperforge's own
/// resources of that kind, in every format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawResourceHandle {
    stack: String,
    path: String,
}

impl RawResourceHandle {
    /// The resource as a `K` (`raw.as_kind::<kind::KmsKey>().arn()`); it must be declared
    /// `referable_as(K::KIND)`, else synthesis refuses the reference (`HF0030`).
    pub fn as_kind<K: crate::app::ResourceKind>(&self) -> Ref<K> {
        Ref::new(&self.stack, &self.path)
    }
}

impl RawResource {
    /// A raw resource with construct id `id`; its logical id and Terraform name derive from
    /// the path `<id>/Resource`.
    pub fn new(id: impl Into<String>) -> Self {
        RawResource {
            id: id.into(),
            cloudformation: None,
            terraform: None,
            cloudformation_tags: RawTags::None,
            acknowledged: Vec::new(),
            handle: None,
        }
    }

    /// Declares what the resource is among the kinds typed handles name (`Kind::KmsKey` for
    /// an `AWS::KMS::Key` / `aws_kms_key`), so references to it through its handle
    /// ([`RawResourceHandle::as_kind`]) are lowered like those to hyperforge's own resources of
    /// that kind. Its types must be that kind's in each format it gives.
    pub fn referable_as(mut self, kind: Kind) -> Self {
        self.handle = Some(kind);
        self
    }

    /// Tags the CloudFormation form with the stack's tags (app and stack tags, as every
    /// taggable resource gets), in the form its type takes them: `RawTags::KeyValueList` for
    /// most types, `RawTags::Map` for those whose `Tags` is an object. Tags the resource sets
    /// itself win. The Terraform form is tagged by the provider's `default_tags` either way.
    pub fn cloudformation_tags(mut self, form: RawTags) -> Self {
        self.cloudformation_tags = form;
        self
    }

    /// Acknowledges a scanner rule that does not apply to this resource, with the reason
    /// written beside the suppression in each format's native form (as hyperforge's own
    /// resources do).
    pub fn acknowledge(mut self, rule: Rule, reason: impl Into<String>) -> Self {
        self.acknowledged.push((rule, reason.into()));
        self
    }

    /// Its CloudFormation form: `type_name` (`AWS::SQS::Queue`) and `Properties`.
    pub fn cloudformation(
        mut self,
        type_name: impl Into<String>,
        properties: impl Into<RawValue>,
    ) -> Self {
        self.cloudformation = Some((type_name.into(), properties.into()));
        self
    }

    /// Its Terraform form: resource type (`aws_sqs_queue`) and body. Strings of a JSON body
    /// are Terraform templates, as in any `.tf.json` file.
    pub fn terraform(
        mut self,
        resource_type: impl Into<String>,
        body: impl Into<RawValue>,
    ) -> Self {
        self.terraform = Some((resource_type.into(), body.into()));
        self
    }
}

/// Whether `name` is a CloudFormation type name: `Service::Namespace::Type` (or a module's
/// `::MODULE` suffix), each part letters and digits starting with a letter.
fn is_cloudformation_type(name: &str) -> bool {
    let parts: Vec<&str> = name.split("::").collect();
    (3..=4).contains(&parts.len())
        && name.len() <= 204
        && parts.iter().all(|p| {
            p.starts_with(|c: char| c.is_ascii_alphabetic())
                && p.chars().all(|c| c.is_ascii_alphanumeric())
        })
}

/// Whether `name` is a Terraform resource type: a provider prefix, `_`, then snake case.
fn is_terraform_type(name: &str) -> bool {
    name.len() <= 128
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.contains('_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The depth and reference count of `v`, stopping past the bounds.
fn measure(v: &RawValue, depth: usize, refs: &mut usize) -> usize {
    if depth > MAX_DEPTH {
        return depth;
    }
    match v {
        RawValue::Json(j) => depth + json_depth(j, 0),
        RawValue::Ref(_) => {
            *refs += 1;
            depth
        }
        RawValue::Text(t) => {
            *refs += t.references().count();
            depth
        }
        RawValue::List(items) => items
            .iter()
            .map(|i| measure(i, depth + 1, refs))
            .max()
            .unwrap_or(depth),
        RawValue::Object(fields) => fields
            .iter()
            .map(|(_, v)| measure(v, depth + 1, refs))
            .max()
            .unwrap_or(depth),
    }
}

fn json_depth(v: &Value, depth: usize) -> usize {
    if depth > MAX_DEPTH {
        return depth;
    }
    match v {
        Value::Array(items) => items
            .iter()
            .map(|i| json_depth(i, depth + 1))
            .max()
            .unwrap_or(depth),
        Value::Object(m) => m
            .values()
            .map(|i| json_depth(i, depth + 1))
            .max()
            .unwrap_or(depth),
        _ => depth,
    }
}

fn check_value(v: &RawValue, what: &str, path: &str, ds: &mut Diagnostics) {
    if !v.is_object() {
        ds.report(
            Code::InvalidRawResource,
            path,
            format!("the {what} are not an object"),
            "give a JSON object (or `RawValue::object`) of the resource's properties",
        );
    }
    let mut refs = 0;
    if measure(v, 0, &mut refs) > MAX_DEPTH || refs > MAX_REFERENCES {
        ds.report(
            Code::InvalidRawResource,
            path,
            format!("the {what} nest deeper than {MAX_DEPTH} levels or hold more than {MAX_REFERENCES} references"),
            "split the resource, or describe it with a construct of its own",
        );
    }
}

impl Construct for RawResource {
    type Handle = RawResourceHandle;
    const KIND: &'static str = "raw_resource";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> RawResourceHandle {
        RawResourceHandle {
            stack: stack.to_owned(),
            path: format!("{}/Resource", self.id),
        }
    }

    fn references(&self) -> Vec<AttrRef> {
        crate::resources::ResourceFacts::references(&self.resource())
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        let path = cx.path;
        for (rule, reason) in &self.acknowledged {
            if reason.trim().len() < 20 {
                ds.report(
                    Code::InvalidRawResource,
                    path,
                    format!(
                        "the acknowledgement of {:?} gives no reason a reviewer can judge",
                        rule.checkov
                    ),
                    "say in a sentence why the rule does not apply to this resource",
                );
            }
        }
        if self.cloudformation.is_none() && self.terraform.is_none() {
            ds.report(
                Code::InvalidRawResource,
                path,
                "the raw resource has neither a CloudFormation nor a Terraform form",
                "give it `cloudformation(type, properties)`, `terraform(type, body)` or both",
            );
        }
        if let Some(kind) = self.handle {
            let cloudformation = self.cloudformation.as_ref().map(|(t, _)| t.as_str());
            let terraform = self.terraform.as_ref().map(|(t, _)| t.as_str());
            for (format, given, wanted, field) in [
                (
                    "CloudFormation",
                    cloudformation,
                    kind.cloudformation_type(),
                    "cloudformation",
                ),
                ("Terraform", terraform, kind.terraform_type(), "terraform"),
            ] {
                if let Some(given) = given.filter(|g| *g != wanted) {
                    ds.report_field(
                        Code::InvalidRawResource,
                        path,
                        field,
                        format!("the raw resource is referable as a {kind:?}, whose {format} type is `{wanted}`, but its type is `{given}`"),
                        format!("declare the kind its types are, or write it as `{wanted}`"),
                    );
                }
            }
        }
        if let Some((type_name, properties)) = &self.cloudformation {
            if !is_cloudformation_type(type_name) {
                ds.report_field(
                    Code::InvalidRawResource,
                    path,
                    "cloudformation",
                    format!("`{type_name}` is not a CloudFormation resource type"),
                    "types are written `Service::Namespace::Type`, e.g. `AWS::SQS::Queue`",
                );
            }
            check_value(properties, "CloudFormation properties", path, ds);
        }
        if let Some((resource_type, body)) = &self.terraform {
            if !is_terraform_type(resource_type) {
                ds.report_field(
                    Code::InvalidRawResource,
                    path,
                    "terraform",
                    format!("`{resource_type}` is not a Terraform resource type"),
                    "types are the provider's name, `_` and the resource in snake case, e.g. `aws_sqs_queue`",
                );
            }
            check_value(body, "Terraform body", path, ds);
        }
        if self.cloudformation.is_none() || self.terraform.is_none() {
            let missing = if self.cloudformation.is_none() {
                "CloudFormation"
            } else {
                "Terraform"
            };
            if self.cloudformation.is_some() || self.terraform.is_some() {
                ds.report(
                    Code::RawResourceLacksFormat,
                    path,
                    format!("the raw resource has no {missing} form, so the {missing} output lacks it"),
                    format!(
                        "give it a {missing} form too, or write only the format it has (`SynthOptions::formats`) and acknowledge HF0031 here"
                    ),
                );
            }
        }
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        let resource = scope.add("Resource", self.resource());
        for (rule, reason) in &self.acknowledged {
            resource.acknowledge(*rule, reason.clone());
        }
    }
}

impl RawResource {
    /// The format-neutral resource it adds: what a construct of the user's own adds through
    /// its `Scope` (`scope.add("Key", raw.resource())`) to compose raw resources; typed handles
    /// to it are `Ref::new(stack, scope.path("Key"))` when it is `referable_as` their kind.
    pub fn resource(&self) -> RawKind {
        RawKind {
            cloudformation: self.cloudformation.clone(),
            terraform: self.terraform.clone(),
            cloudformation_tags: self.cloudformation_tags,
            handle: self.handle,
        }
    }
}

/// One Kubernetes object hyperforge has no construct for, applied in a Kubernetes stage with
/// the others. Values only a deployment knows (a role's ARN for a service account's
/// annotation) are set with [`KubernetesManifest::value_from`]: the stage's manifest entry
/// lists them, and the runbook and `hyperforge deploy` substitute the deployed value.
///
/// ```
/// use hyperforge::constructs::KubernetesManifest;
/// use serde_json::json;
/// let priority = KubernetesManifest::new("ServingPriority", json!({
///     "apiVersion": "scheduling.k8s.io/v1",
///     "kind": "PriorityClass",
///     "metadata": { "name": "serving" },
///     "value": 1000000,
///     "description": "model servers preempt batch work",
/// }));
/// ```
#[derive(Clone, Debug)]
pub struct KubernetesManifest {
    id: String,
    object: Value,
    values_from: Vec<(String, AttrRef)>,
}

impl KubernetesManifest {
    /// The object `object` (with `apiVersion`, `kind` and `metadata.name`) as construct `id`;
    /// its path is `<id>/<kind>`.
    pub fn new(id: impl Into<String>, object: Value) -> Self {
        KubernetesManifest {
            id: id.into(),
            object,
            values_from: Vec::new(),
        }
    }

    /// Sets the string at JSON pointer `pointer` (`/metadata/annotations/eks.amazonaws.com~1role-arn`)
    /// to the deployed value of `value` (the parent object must exist).
    pub fn value_from(mut self, pointer: impl Into<String>, value: AttrRef) -> Self {
        self.values_from.push((pointer.into(), value));
        self
    }
}

/// Why an object of `api_version` and `kind` cannot be applied where hyperforge pins the
/// controller of its group (a vendored CRD, `crd::SERVED`), and the help: a kind the group's
/// CRDs do not define, or a version the kind's CRD does not serve. `None` for any other group.
pub fn unserved_custom_resource(api_version: &str, kind: &str) -> Option<(String, String)> {
    use crate::resources::kubernetes::crd::SERVED;
    let (group, version) = api_version.split_once('/')?;
    let of_group: Vec<_> = SERVED.iter().filter(|c| c.group == group).collect();
    if of_group.is_empty() {
        return None;
    }
    let Some(crd) = of_group.iter().find(|c| c.kind == kind) else {
        let kinds: Vec<&str> = of_group.iter().map(|c| c.kind).collect();
        return Some((
            format!("the pinned controller of `{group}` defines no kind `{kind}`"),
            format!(
                "its kinds are {} (CRDs from {})",
                kinds.join(", "),
                of_group[0].source
            ),
        ));
    };
    let preferred = crd.versions.first()?;
    (!crd.versions.contains(&version)).then(|| {
        (
            format!("`{group}/{version}` `{kind}` is not served by the pinned controller"),
            format!(
                "use `apiVersion: {group}/{preferred}` (it serves {}; CRD from {})",
                crd.versions.join(", "),
                crd.source
            ),
        )
    })
}

/// The parent object of JSON pointer `pointer` in `v` and the last key.
fn parent_of<'a>(
    v: &'a mut Value,
    pointer: &str,
) -> Option<(&'a mut serde_json::Map<String, Value>, String)> {
    let (parent, last) = pointer.rsplit_once('/')?;
    let key = last.replace("~1", "/").replace("~0", "~");
    match v.pointer_mut(parent)? {
        Value::Object(m) => Some((m, key)),
        _ => None,
    }
}

impl Construct for KubernetesManifest {
    type Handle = ();
    const KIND: &'static str = "kubernetes_manifest";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, _stack: &str) {}

    fn references(&self) -> Vec<AttrRef> {
        self.values_from.iter().map(|(_, r)| r.clone()).collect()
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        let path = cx.path;
        match KubeObject::from_value(self.object.clone()) {
            Err(problem) => ds.report(
                Code::InvalidRawResource,
                path,
                format!("the Kubernetes object is malformed: {problem}"),
                "give one object with `apiVersion`, `kind` and `metadata.name`",
            ),
            Ok(o) => {
                if !super::vllm::is_dns_subdomain(o.name()) || o.name().is_empty() {
                    ds.report(
                        Code::InvalidRawResource,
                        path,
                        format!("`{}` is not a Kubernetes object name", o.name()),
                        "names are lowercase DNS-1123 subdomains: letters, digits, `-` and `.`",
                    );
                }
                if let Some((problem, help)) = unserved_custom_resource(o.api_version(), o.kind()) {
                    ds.report(Code::CustomResourceNotServed, path, problem, help);
                }
                if let Some(ns) = o.namespace() {
                    if !super::vllm::is_dns_label(ns) {
                        ds.report(
                            Code::InvalidRawResource,
                            path,
                            format!("`{ns}` is not a namespace name"),
                            "namespaces are DNS-1123 labels: 1-63 lowercase letters, digits and `-`",
                        );
                    }
                }
            }
        }
        if json_depth(&self.object, 0) > MAX_DEPTH || self.values_from.len() > MAX_REFERENCES {
            ds.report(
                Code::InvalidRawResource,
                path,
                format!("the object nests deeper than {MAX_DEPTH} levels or takes more than {MAX_REFERENCES} deployed values"),
                "split the object",
            );
        }
        let mut probe = self.object.clone();
        for (pointer, _) in &self.values_from {
            if pointer.starts_with("/apiVersion")
                || pointer.starts_with("/kind")
                || pointer.starts_with("/metadata/name")
                || pointer.starts_with("/metadata/namespace")
                || parent_of(&mut probe, pointer).is_none()
            {
                ds.report(
                    Code::InvalidRawResource,
                    path,
                    format!("`{pointer}` is not a settable place in the object"),
                    "point at a key of an existing object (JSON pointer, `~1` for `/`), not at the object's identity",
                );
            }
        }
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        let mut object = self.object.clone();
        for (i, (pointer, value)) in self.values_from.iter().enumerate() {
            let placeholder = scope.deploy_value(&format!("Value{}", i + 1), value.clone(), "");
            if let Some((parent, key)) = parent_of(&mut object, pointer) {
                parent.insert(key, Value::String(placeholder));
            }
        }
        if let Ok(o) = KubeObject::from_value(object) {
            scope.add_object(o);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_follow_each_format() {
        assert!(is_cloudformation_type("AWS::SQS::Queue"));
        assert!(is_cloudformation_type("Acme::Lint::Rule::MODULE"));
        assert!(!is_cloudformation_type("AWS::SQS"));
        assert!(!is_cloudformation_type("AWS::SQS::Queue/../x"));
        assert!(is_terraform_type("aws_sqs_queue"));
        assert!(!is_terraform_type("AWS_SQS"));
        assert!(!is_terraform_type("queue"));
    }

    #[test]
    fn nesting_is_bounded() {
        let mut v = Value::Null;
        for _ in 0..100 {
            v = Value::Array(vec![v]);
        }
        assert!(json_depth(&v, 0) > MAX_DEPTH);
        let mut ds = Diagnostics::new();
        check_value(&RawValue::Json(v), "properties", "demo/X", &mut ds);
        assert_eq!(ds.len(), 2, "{ds}");
    }
}
