//! Building the CloudFormation templates of one stack: resources keyed by logical ids derived
//! from construct paths (collisions are errors), references lowered to `Ref`/`Fn::GetAtt`, and
//! to `Fn::ImportValue` of an automatic export when they cross stages; parameters, outputs,
//! tags and raw property overrides.

use super::expr::Expr;
use super::l1_support::{CfnResource, TagStyle};
use super::nag;
use crate::app::text::{Part, Pseudo, StackInput, Text};
use crate::app::{logical_id, Attr, AttrRef, Kind, Stack, StageId, StageKind, Tags};
use crate::diagnostics::{suggest, Code, Diagnostics};
use crate::resources::iam::{PolicyDocument, PrincipalKind};
use crate::resources::Acknowledgement;
use crate::synth::shape::{apply_path, find, touches, Dialect, TypeShapes};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// One emitted resource.
#[derive(Clone, Debug)]
pub(crate) struct Resource {
    pub path: String,
    pub logical_id: String,
    pub type_name: String,
    pub tags: TagStyle,
    pub properties: Value,
    pub depends_on: Vec<String>,
    pub acknowledgements: Vec<Acknowledgement>,
    /// Properties rules validated (dotted, `*` for any list item): overriding one warns.
    pub validated: Vec<&'static str>,
    /// Whether a raw resource wrote it (its properties are checked against its type's shapes).
    pub raw: bool,
}

/// A template parameter.
#[derive(Clone, Debug)]
pub(crate) struct Parameter {
    pub description: String,
    pub default: Option<String>,
    pub allowed_pattern: Option<String>,
    pub constraint: Option<String>,
}

/// An output of a stage's stack.
#[derive(Clone, Debug)]
pub(crate) struct Output {
    pub description: String,
    pub value: Expr,
    pub export_name: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct StageTemplate {
    pub parameters: Vec<(String, Parameter)>,
    pub resources: Vec<Resource>,
    pub outputs: BTreeMap<String, Output>,
    pub user_outputs: Vec<(String, Output)>,
}

/// The templates of one stack under construction.
pub(crate) struct StackTemplates<'a> {
    pub stack: &'a Stack,
    /// The stack's effective tags, on every taggable resource and in what launch templates
    /// tag.
    pub tags: &'a Tags,
    pub templates: BTreeMap<StageId, StageTemplate>,
    ids: BTreeMap<String, String>,
    /// Resources that exist outside the description: references read their given values.
    pub existing: BTreeMap<String, crate::resources::Existing>,
    pub ds: Diagnostics,
}

impl<'a> StackTemplates<'a> {
    pub fn new(stack: &'a Stack, tags: &'a Tags) -> Self {
        let templates = stack
            .stages()
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s.kind, StageKind::CloudFormation))
            .map(|(i, _)| (StageId::from_index(i), StageTemplate::default()))
            .collect();
        StackTemplates {
            stack,
            tags,
            templates,
            ids: BTreeMap::new(),
            existing: BTreeMap::new(),
            ds: Diagnostics::new(),
        }
    }

    /// Adds resource `r` at construct path `path` to `stage`; returns its logical id.
    pub fn add<R: CfnResource>(&mut self, stage: StageId, path: &str, r: &R) -> String {
        let properties = serde_json::to_value(r).unwrap_or(Value::Null);
        self.push(stage, path, R::TYPE_NAME, R::TAGS, properties)
    }

    /// Adds a resource of a type hyperforge has no L1 type for (a raw resource): `type_name`
    /// and its `Properties` as given, tagged in the style its description states.
    pub fn add_raw(
        &mut self,
        stage: StageId,
        path: &str,
        type_name: &str,
        tags: TagStyle,
        properties: Value,
    ) {
        self.push(stage, path, type_name, tags, properties);
        if let Some(r) = self.last(stage) {
            r.raw = true;
        }
    }

    fn push(
        &mut self,
        stage: StageId,
        path: &str,
        type_name: &str,
        tags: TagStyle,
        properties: Value,
    ) -> String {
        let id = logical_id(path);
        if let Some(existing) = self.ids.get(&id) {
            self.ds.report(
                Code::LogicalIdCollision,
                self.stack.display_path(path),
                format!("`{path}` and `{existing}` both derive the logical id `{id}`"),
                "rename one of the constructs so their paths no longer concatenate to the same id",
            );
        } else {
            self.ids.insert(id.clone(), path.to_owned());
        }
        if let Some(t) = self.templates.get_mut(&stage) {
            t.resources.push(Resource {
                path: path.to_owned(),
                logical_id: id.clone(),
                type_name: type_name.to_owned(),
                tags,
                properties,
                depends_on: Vec::new(),
                acknowledgements: Vec::new(),
                validated: Vec::new(),
                raw: false,
            });
        }
        id
    }

    fn last(&mut self, stage: StageId) -> Option<&mut Resource> {
        self.templates.get_mut(&stage)?.resources.last_mut()
    }

    /// Makes the last added resource of `stage` depend on `ids`.
    pub fn depends_on(&mut self, stage: StageId, ids: &[&str]) {
        if let Some(r) = self.last(stage) {
            r.depends_on.extend(ids.iter().map(|s| (*s).to_owned()));
        }
    }

    /// The resource of `stage` at construct path `path`.
    pub fn resource_at(&mut self, stage: StageId, path: &str) -> Option<&mut Resource> {
        self.templates
            .get_mut(&stage)?
            .resources
            .iter_mut()
            .find(|r| r.path == path)
    }

    /// Declares a parameter of `stage` and returns a `Ref` to it.
    pub fn parameter(&mut self, stage: StageId, name: &str, p: Parameter) -> Expr {
        if let Some(t) = self.templates.get_mut(&stage) {
            if !t.parameters.iter().any(|(n, _)| n == name) {
                t.parameters.push((name.to_owned(), p));
            }
        }
        Expr::reference(name)
    }

    /// The template parameter declaring `input` in `stage`'s template; returns a `Ref` to it.
    pub fn input(&mut self, stage: StageId, input: &StackInput) -> Expr {
        self.parameter(
            stage,
            &input.name,
            Parameter {
                description: input.description.clone(),
                default: input.default.clone(),
                allowed_pattern: input.pattern.clone(),
                constraint: Some(input.expected.clone()),
            },
        )
    }

    /// Adds an output to `stage`'s stack.
    pub fn output(&mut self, stage: StageId, key: &str, description: &str, value: Expr) {
        if let Some(t) = self.templates.get_mut(&stage) {
            t.user_outputs.push((
                key.to_owned(),
                Output {
                    description: description.to_owned(),
                    value,
                    export_name: None,
                },
            ));
        }
    }

    /// Makes `r` a named output of the stage that creates it, for stages deployed by other tools
    /// (Helm values, uploads). Returns the output's key: `<LogicalId><Attr>`.
    pub fn plain_output(&mut self, r: &AttrRef) -> String {
        let id = logical_id(&r.path);
        let key = r.output_key();
        let target = self.stack.stage_of(r.construct_id());
        let value = match self.existing.get(&r.path).and_then(|e| e.value(r.attr)) {
            Some(given) => {
                let given = given.clone();
                self.text(target.unwrap_or(StageId::from_index(0)), &given)
            }
            None => local_attr(&id, r.kind, r.attr),
        };
        if let Some(t) = target.and_then(|s| self.templates.get_mut(&s)) {
            if !t.user_outputs.iter().any(|(k, _)| *k == key) {
                t.user_outputs.push((
                    key.clone(),
                    Output {
                        description: format!(
                            "{} of {}, for a later stage",
                            r.attr.as_str(),
                            r.path
                        ),
                        value,
                        export_name: None,
                    },
                ));
            }
        }
        key
    }

    /// The value of `r` as seen from `stage`: a local intrinsic, or an import of an export that
    /// is added to the owning stage's template.
    pub fn attr(&mut self, stage: StageId, r: &AttrRef) -> Expr {
        if let Some(value) = self.existing.get(&r.path).and_then(|e| e.value(r.attr)) {
            let value = value.clone();
            return self.text(stage, &value);
        }
        let target_id = logical_id(&r.path);
        let local = local_attr(&target_id, r.kind, r.attr);
        let Some(target_stage) = self.stack.stage_of(r.construct_id()) else {
            return local;
        };
        if target_stage == stage {
            return local;
        }
        let export_name = format!(
            "{}:{}:{}",
            self.stack.stage_stack_name(target_stage),
            target_id,
            r.attr.as_str()
        );
        if let Some(t) = self.templates.get_mut(&target_stage) {
            t.outputs
                .entry(format!("Export{}{}", target_id, r.attr.as_str()))
                .or_insert_with(|| Output {
                    description: format!("{} of {} for later stages", r.attr.as_str(), r.path),
                    value: local,
                    export_name: Some(export_name.clone()),
                });
        }
        Expr::ImportValue(Box::new(Expr::Str(export_name)))
    }

    /// A text as a CloudFormation value: a literal, a single intrinsic, or `Fn::Sub`.
    pub fn text(&mut self, stage: StageId, t: &Text) -> Expr {
        if let Some(lit) = t.as_literal() {
            return Expr::Str(lit);
        }
        match t.0.as_slice() {
            [Part::Ref(r)] => return self.attr(stage, r),
            [Part::Input(i)] => return self.input(stage, i),
            _ => {}
        }
        let mut template = String::new();
        let mut vars: BTreeMap<String, Expr> = BTreeMap::new();
        for part in &t.0 {
            match part {
                Part::Lit(s) => template.push_str(&s.replace("${", "${!")),
                Part::Pseudo(p) => template.push_str(match p {
                    Pseudo::Partition => "${AWS::Partition}",
                    Pseudo::Region => "${AWS::Region}",
                    Pseudo::AccountId => "${AWS::AccountId}",
                    Pseudo::UrlSuffix => "${AWS::URLSuffix}",
                }),
                // A resource of this template is named in place (`${Bucket.Arn}`), as a person
                // writes it and as policy packs that read bucket ARNs out of `Fn::Sub` expect
                // (cdk-nag's S10 matches the logical id followed by `/*`); an import needs a
                // variable.
                Part::Ref(r) => match self.attr(stage, r) {
                    Expr::GetAtt(id, attr) => template.push_str(&format!("${{{id}.{attr}}}")),
                    Expr::Ref(id) => template.push_str(&format!("${{{id}}}")),
                    value => {
                        let name = format!("{}{}", logical_id(&r.path), r.attr.as_str());
                        template.push_str(&format!("${{{name}}}"));
                        vars.insert(name, value);
                    }
                },
                Part::Input(i) => {
                    self.input(stage, i);
                    template.push_str(&format!("${{{}}}", i.name));
                }
                Part::IssuerHostPath(r) => {
                    let name = format!("{}OidcIssuer", logical_id(&r.path));
                    let url = self.attr(stage, r);
                    let host =
                        Expr::Select(1, Box::new(Expr::Split("//".to_owned(), Box::new(url))));
                    template.push_str(&format!("${{{name}}}"));
                    vars.insert(name, host);
                }
            }
        }
        if vars.is_empty() {
            Expr::Sub(template)
        } else {
            Expr::SubWith(template, vars)
        }
    }

    /// A policy document: a JSON object, or (when a condition key depends on a resource, which
    /// JSON object keys cannot express) a JSON string built with `Fn::Sub`.
    pub fn policy(&mut self, stage: StageId, doc: &PolicyDocument) -> Value {
        let dynamic_keys = doc
            .statements
            .iter()
            .any(|s| s.conditions.iter().any(|c| c.key.as_literal().is_none()));
        if dynamic_keys {
            let text = policy_json_text(doc);
            return self.text(stage, &text).to_json();
        }
        let mut statements = Vec::new();
        for s in &doc.statements {
            let mut st = Map::new();
            if let Some(sid) = &s.sid {
                st.insert("Sid".into(), json!(sid));
            }
            st.insert(
                "Effect".into(),
                json!(if s.allow { "Allow" } else { "Deny" }),
            );
            if !s.principals.is_empty() {
                let mut principal = Map::new();
                for p in &s.principals {
                    let value = self.text(stage, &p.value).to_json();
                    principal.insert(principal_key(p.kind).into(), value);
                }
                st.insert("Principal".into(), Value::Object(principal));
            }
            st.insert(
                "Action".into(),
                one_or_many(s.actions.iter().map(|a| json!(a)).collect()),
            );
            if !s.resources.is_empty() {
                let resources = s
                    .resources
                    .iter()
                    .map(|r| self.text(stage, r).to_json())
                    .collect();
                st.insert("Resource".into(), one_or_many(resources));
            }
            if !s.conditions.is_empty() {
                let mut cond: Map<String, Value> = Map::new();
                for c in &s.conditions {
                    let key = c.key.as_literal().unwrap_or_default();
                    let values: Vec<Value> = c
                        .values
                        .iter()
                        .map(|v| match c.bool_literal(v) {
                            Some(b) => json!(b),
                            None => self.text(stage, v).to_json(),
                        })
                        .collect();
                    let entry = cond.entry(c.operator.clone()).or_insert_with(|| json!({}));
                    if let Value::Object(m) = entry {
                        m.insert(key, one_or_many(values));
                    }
                }
                st.insert("Condition".into(), Value::Object(cond));
            }
            statements.push(Value::Object(st));
        }
        json!({"Version": "2012-10-17", "Statement": statements})
    }

    /// Applies tags and property overrides, then renders every stage's template. Each
    /// override is checked against its resource type's shapes (`shapes`); overrides of
    /// validated properties warn into `warnings`.
    pub fn finish(
        mut self,
        shapes: &[TypeShapes],
        warnings: &mut Diagnostics,
    ) -> Result<BTreeMap<StageId, Value>, Diagnostics> {
        let tags = self.tags;
        for t in self.templates.values_mut() {
            for r in &mut t.resources {
                apply_tags(r, tags);
            }
        }
        // A raw resource of a vendored type is checked as an override is, and for what its
        // type requires.
        for r in self.templates.values().flat_map(|t| &t.resources) {
            if !r.raw {
                continue;
            }
            let Some(t) = find(shapes, &r.type_name) else {
                continue;
            };
            for p in t.check_body(Dialect::CloudFormation, &r.properties, "property") {
                self.ds.report(
                    p.code,
                    self.stack.display_path(&r.path),
                    format!("raw resource `{}`: {}", r.type_name, p.message),
                    p.help,
                );
            }
        }
        for o in self.stack.overrides() {
            let at = self.stack.display_path(&o.path);
            let found = self
                .templates
                .values_mut()
                .flat_map(|t| t.resources.iter_mut())
                .find(|r| r.path == o.path);
            let Some(r) = found else {
                let paths: Vec<&str> = self
                    .templates
                    .values()
                    .flat_map(|t| t.resources.iter())
                    .map(|r| r.path.as_str())
                    .collect();
                let help = match suggest(&o.path, paths) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => "use the `hyperforge:path` shown in the template's resource metadata"
                        .to_owned(),
                };
                self.ds.report(
                    Code::UnknownOverrideTarget,
                    at,
                    format!(
                        "no emitted CloudFormation resource has the path `{}`",
                        o.path
                    ),
                    help,
                );
                continue;
            };
            if let Some(t) = find(shapes, &r.type_name) {
                let problems = t.check(
                    Dialect::CloudFormation,
                    &o.property,
                    o.value.as_ref(),
                    "property",
                );
                if !problems.is_empty() {
                    for p in problems {
                        self.ds.report(
                            p.code,
                            at.clone(),
                            format!("cannot override `{}`: {}", o.property, p.message),
                            p.help,
                        );
                    }
                    continue;
                }
            }
            if let Some(v) = r.validated.iter().find(|v| touches(&o.property, v)) {
                warnings.report(
                    Code::OverrideOfValidatedProperty,
                    at.clone(),
                    format!(
                        "the override of `{}` changes `{v}` of {}, which hyperforge's rules checked; the value it writes is not checked",
                        o.property, r.type_name
                    ),
                    "set it through the construct's builder, so the rules see it; keep the override only to bypass them",
                );
            }
            if let Err(msg) = apply_path(&mut r.properties, &o.property, o.value.clone()) {
                self.ds.report(
                    Code::UnknownOverrideTarget,
                    at,
                    format!("cannot override `{}`: {msg}", o.property),
                    "numeric segments index existing list items, `-` appends to a list; other segments name object keys",
                );
            }
        }
        if self.ds.has_errors() {
            return Err(self.ds);
        }
        let stack = self.stack;
        Ok(self
            .templates
            .into_iter()
            .map(|(stage, t)| (stage, render(stack, stage, t)))
            .collect())
    }
}

fn principal_key(kind: PrincipalKind) -> &'static str {
    match kind {
        PrincipalKind::Service => "Service",
        PrincipalKind::Federated => "Federated",
        PrincipalKind::Aws => "AWS",
    }
}

fn one_or_many(mut values: Vec<Value>) -> Value {
    if values.len() == 1 {
        values.remove(0)
    } else {
        Value::Array(values)
    }
}

/// How CloudFormation reads an attribute of a resource of a kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Read {
    /// `Ref` of the logical id.
    Ref,
    /// `Fn::GetAtt` of this attribute name (one of the type's generated `ATTRIBUTES`).
    GetAtt(&'static str),
}

/// How `attr` of a `kind` resource is read; `None` for an attribute the kind does not have.
/// Every pair `Kind::attrs` lists has an arm (the unit test below checks it, and that each
/// `GetAtt` name is one of the type's generated `ATTRIBUTES`); other pairs are refused by
/// validation, never guessed.
fn read(kind: Kind, attr: Attr) -> Option<Read> {
    use Attr::*;
    Some(match (kind, attr) {
        (
            Kind::Vpc | Kind::Subnet | Kind::InternetGateway | Kind::RouteTable | Kind::NatGateway,
            Id,
        ) => Read::Ref,
        (Kind::EksCluster | Kind::Role | Kind::Bucket | Kind::LogGroup, Name) => Read::Ref,
        (Kind::SecurityGroup, Id) => Read::GetAtt("GroupId"),
        (Kind::EksCluster, OidcIssuerUrl) => Read::GetAtt("OpenIdConnectIssuerUrl"),
        (Kind::EksCluster, ClusterSecurityGroupId) => Read::GetAtt("ClusterSecurityGroupId"),
        (Kind::HyperPodCluster, Arn) => Read::GetAtt("ClusterArn"),
        (
            Kind::EksCluster
            | Kind::OidcProvider
            | Kind::Role
            | Kind::Bucket
            | Kind::KmsKey
            | Kind::LogGroup,
            Arn,
        ) => Read::GetAtt("Arn"),
        (Kind::Eip, AllocationId) => Read::GetAtt("AllocationId"),
        (Kind::FsxFileSystem, Id) => Read::Ref,
        (Kind::FsxFileSystem, DnsName) => Read::GetAtt("DNSName"),
        (Kind::FsxFileSystem, MountName) => Read::GetAtt("LustreMountName"),
        (Kind::InstanceProfile, Name) => Read::Ref,
        // `Ref` of a topic is its ARN; of a rule on the default bus, its name.
        (Kind::SnsTopic, Arn) | (Kind::EventRule, Name) => Read::Ref,
        (Kind::PrometheusWorkspace, Arn) => Read::GetAtt("Arn"),
        (Kind::PrometheusWorkspace, Id) => Read::GetAtt("WorkspaceId"),
        (Kind::NodeGroup, Arn) => Read::GetAtt("Arn"),
        _ => return None,
    })
}

/// The local intrinsic for an attribute of the resource `id` of kind `kind`. An attribute the
/// kind does not have (an `AttrRef` built by hand, refused by validation) reads as `Ref`.
fn local_attr(id: &str, kind: Kind, attr: Attr) -> Expr {
    match read(kind, attr) {
        Some(Read::GetAtt(name)) => Expr::get_att(id, name),
        Some(Read::Ref) | None => Expr::reference(id),
    }
}

/// The policy as JSON text whose strings may contain references.
fn policy_json_text(doc: &PolicyDocument) -> Text {
    fn string(t: &Text) -> Text {
        let mut out = Text::lit("\"");
        for part in &t.0 {
            out = match part {
                Part::Lit(s) => {
                    let quoted = serde_json::to_string(s).unwrap_or_default();
                    out.push_lit(&quoted[1..quoted.len().saturating_sub(1)])
                }
                other => {
                    out.0.push(other.clone());
                    out
                }
            };
        }
        out.push_lit("\"")
    }
    fn list(items: Vec<Text>) -> Text {
        if items.len() == 1 {
            return items.into_iter().next().unwrap_or_default();
        }
        let mut out = Text::lit("[");
        for (i, item) in items.into_iter().enumerate() {
            if i > 0 {
                out = out.push_lit(",");
            }
            out = out.push_text(item);
        }
        out.push_lit("]")
    }
    let mut out = Text::lit("{\"Version\":\"2012-10-17\",\"Statement\":[");
    for (i, s) in doc.statements.iter().enumerate() {
        if i > 0 {
            out = out.push_lit(",");
        }
        out = out.push_lit("{");
        if let Some(sid) = &s.sid {
            out = out.push_lit(format!("\"Sid\":\"{sid}\","));
        }
        out = out.push_lit(format!(
            "\"Effect\":\"{}\"",
            if s.allow { "Allow" } else { "Deny" }
        ));
        if !s.principals.is_empty() {
            out = out.push_lit(",\"Principal\":{");
            for (j, p) in s.principals.iter().enumerate() {
                if j > 0 {
                    out = out.push_lit(",");
                }
                out = out
                    .push_lit(format!("\"{}\":", principal_key(p.kind)))
                    .push_text(string(&p.value));
            }
            out = out.push_lit("}");
        }
        let actions = s
            .actions
            .iter()
            .map(|a| string(&Text::lit(a.as_str())))
            .collect();
        out = out.push_lit(",\"Action\":").push_text(list(actions));
        if !s.resources.is_empty() {
            out = out
                .push_lit(",\"Resource\":")
                .push_text(list(s.resources.iter().map(string).collect()));
        }
        if !s.conditions.is_empty() {
            let mut by_operator: Vec<(&str, Vec<&crate::resources::iam::Condition>)> = Vec::new();
            for c in &s.conditions {
                match by_operator.iter_mut().find(|(op, _)| *op == c.operator) {
                    Some((_, cs)) => cs.push(c),
                    None => by_operator.push((c.operator.as_str(), vec![c])),
                }
            }
            out = out.push_lit(",\"Condition\":{");
            for (j, (op, cs)) in by_operator.iter().enumerate() {
                if j > 0 {
                    out = out.push_lit(",");
                }
                out = out.push_lit(format!("\"{op}\":{{"));
                for (k, c) in cs.iter().enumerate() {
                    if k > 0 {
                        out = out.push_lit(",");
                    }
                    out = out
                        .push_text(string(&c.key))
                        .push_lit(":")
                        .push_text(list(c.values.iter().map(string).collect()));
                }
                out = out.push_lit("}");
            }
            out = out.push_lit("}");
        }
        out = out.push_lit("}");
    }
    out.push_lit("]}")
}

fn apply_tags(r: &mut Resource, tags: &Tags) {
    let Value::Object(props) = &mut r.properties else {
        return;
    };
    match r.tags {
        TagStyle::NotTaggable => {}
        TagStyle::KeyValueList => {
            let mut merged: BTreeMap<String, Value> = tags
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            if let Some(Value::Array(existing)) = props.get("Tags") {
                for t in existing {
                    if let (Some(Value::String(k)), Some(v)) = (t.get("Key"), t.get("Value")) {
                        merged.insert(k.clone(), v.clone());
                    }
                }
            }
            let list = merged
                .into_iter()
                .map(|(k, v)| json!({"Key": k, "Value": v}))
                .collect();
            props.insert("Tags".into(), Value::Array(list));
        }
        TagStyle::Map => {
            let mut merged: BTreeMap<String, Value> = tags
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            if let Some(Value::Object(existing)) = props.get("Tags") {
                for (k, v) in existing {
                    merged.insert(k.clone(), v.clone());
                }
            }
            props.insert("Tags".into(), Value::Object(merged.into_iter().collect()));
        }
    }
}

fn render(stack: &Stack, stage: StageId, t: StageTemplate) -> Value {
    let stage_name = stack.stage(stage).map_or("", |s| s.name.as_str());
    let description = match stack.description_text() {
        Some(d) => format!("{d} Stage {stage_name} (generated by hyperforge)."),
        None => format!(
            "{} stage {stage_name} (generated by hyperforge).",
            stack.name()
        ),
    };
    let mut root = Map::new();
    root.insert("AWSTemplateFormatVersion".into(), json!("2010-09-09"));
    root.insert("Description".into(), json!(description));
    if !t.parameters.is_empty() {
        let mut params = Map::new();
        for (name, p) in t.parameters {
            let mut m = Map::new();
            m.insert("Type".into(), json!("String"));
            m.insert("Description".into(), json!(p.description));
            if let Some(d) = p.default {
                m.insert("Default".into(), json!(d));
            }
            if let Some(pattern) = p.allowed_pattern {
                m.insert("AllowedPattern".into(), json!(pattern));
            }
            if let Some(c) = p.constraint {
                m.insert("ConstraintDescription".into(), json!(c));
            }
            params.insert(name, Value::Object(m));
        }
        root.insert("Parameters".into(), Value::Object(params));
    }
    let mut resources = Map::new();
    for r in t.resources {
        let mut m = Map::new();
        m.insert("Type".into(), json!(r.type_name));
        if !r.depends_on.is_empty() {
            m.insert(
                "DependsOn".into(),
                one_or_many(r.depends_on.iter().map(|d| json!(d)).collect()),
            );
        }
        let mut metadata = Map::new();
        metadata.insert("hyperforge:path".into(), json!(stack.display_path(&r.path)));
        acknowledgement_metadata(&mut metadata, &r.acknowledgements, &r.properties);
        m.insert("Metadata".into(), Value::Object(metadata));
        if !matches!(&r.properties, Value::Object(p) if p.is_empty()) {
            m.insert("Properties".into(), r.properties);
        }
        resources.insert(r.logical_id, Value::Object(m));
    }
    root.insert("Resources".into(), Value::Object(resources));
    let mut outputs = Map::new();
    for (key, o) in t.user_outputs.into_iter().chain(t.outputs) {
        let mut m = Map::new();
        m.insert("Description".into(), json!(o.description));
        m.insert("Value".into(), o.value.to_json());
        if let Some(name) = o.export_name {
            m.insert("Export".into(), json!({"Name": name}));
        }
        outputs.insert(key, Value::Object(m));
    }
    if !outputs.is_empty() {
        root.insert("Outputs".into(), Value::Object(outputs));
    }
    Value::Object(root)
}

/// Writes acknowledgements into each tool's native metadata: `checkov.skip`,
/// `guard.SuppressedRules` (with `guard.SuppressionReasons`, which Guard ignores),
/// `cfn_nag.rules_to_suppress`, `cdk_nag.rules_to_suppress`.
/// A scoped acknowledgement becomes cdk-nag's `applies_to`: the findings of that part of
/// the resource, named from the rendered `properties` (and left out when it has none).
fn acknowledgement_metadata(
    metadata: &mut Map<String, Value>,
    acks: &[Acknowledgement],
    properties: &Value,
) {
    let (scoped, whole): (Vec<&Acknowledgement>, Vec<&Acknowledgement>) =
        acks.iter().partition(|a| a.scope.is_some());
    let with_reason = |ids: fn(&Acknowledgement) -> &'static [&'static str], reason: &str| {
        whole
            .iter()
            .flat_map(|a| {
                ids(a)
                    .iter()
                    .map(move |id| json!({"id": id, reason: a.reason}))
            })
            .collect::<Vec<Value>>()
    };
    let checkov = with_reason(|a| a.rule.checkov, "comment");
    if !checkov.is_empty() {
        metadata.insert("checkov".into(), json!({"skip": checkov}));
    }
    // Guard reads only the rule names; the reasons ride beside them, for the reviewer.
    let guard: Vec<(&str, &str)> = whole
        .iter()
        .flat_map(|a| a.rule.guard.iter().map(|id| (*id, a.reason.as_str())))
        .collect();
    if !guard.is_empty() {
        let names: Vec<&str> = guard.iter().map(|(id, _)| *id).collect();
        let reasons: Map<String, Value> = guard
            .iter()
            .map(|(id, reason)| ((*id).to_owned(), json!(reason)))
            .collect();
        metadata.insert(
            "guard".into(),
            json!({"SuppressedRules": names, "SuppressionReasons": reasons}),
        );
    }
    let cfn_nag = with_reason(|a| a.rule.cfn_nag, "reason");
    if !cfn_nag.is_empty() {
        metadata.insert("cfn_nag".into(), json!({"rules_to_suppress": cfn_nag}));
    }
    let mut cdk_nag = with_reason(|a| a.rule.cdk_nag, "reason");
    // One entry per rule and reason, listing every finding it covers.
    let mut granular: BTreeMap<(&str, &str), Vec<String>> = BTreeMap::new();
    for a in &scoped {
        let findings = a
            .scope
            .as_ref()
            .map(|scope| nag::findings(properties, scope))
            .unwrap_or_default();
        for id in a.rule.cdk_nag {
            granular
                .entry((id, a.reason.as_str()))
                .or_default()
                .extend(findings.iter().cloned());
        }
    }
    for ((id, reason), mut findings) in granular {
        findings.sort();
        findings.dedup();
        if !findings.is_empty() {
            cdk_nag.push(json!({"id": id, "reason": reason, "applies_to": findings}));
        }
    }
    if !cdk_nag.is_empty() {
        metadata.insert("cdk_nag".into(), json!({"rules_to_suppress": cdk_nag}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generated `ATTRIBUTES` of the L1 type a kind of handle points at.
    fn l1_attributes(kind: Kind) -> &'static [&'static str] {
        use crate::synth::cloudformation::l1::*;
        use crate::synth::cloudformation::l1_support::CfnResource;
        match kind {
            Kind::Vpc => ec2_vpc::Vpc::ATTRIBUTES,
            Kind::Subnet => ec2_subnet::Subnet::ATTRIBUTES,
            Kind::SecurityGroup => ec2_security_group::SecurityGroup::ATTRIBUTES,
            Kind::EksCluster => eks_cluster::Cluster::ATTRIBUTES,
            Kind::OidcProvider => iam_oidc_provider::OidcProvider::ATTRIBUTES,
            Kind::Role => iam_role::Role::ATTRIBUTES,
            Kind::Bucket => s3_bucket::Bucket::ATTRIBUTES,
            Kind::KmsKey => kms_key::Key::ATTRIBUTES,
            Kind::HyperPodCluster => sagemaker_cluster::Cluster::ATTRIBUTES,
            Kind::InternetGateway => ec2_internet_gateway::InternetGateway::ATTRIBUTES,
            Kind::RouteTable => ec2_route_table::RouteTable::ATTRIBUTES,
            Kind::NatGateway => ec2_nat_gateway::NatGateway::ATTRIBUTES,
            Kind::Eip => ec2_eip::Eip::ATTRIBUTES,
            Kind::LogGroup => logs_log_group::LogGroup::ATTRIBUTES,
            Kind::FsxFileSystem => fsx_file_system::FileSystem::ATTRIBUTES,
            Kind::InstanceProfile => iam_instance_profile::InstanceProfile::ATTRIBUTES,
            Kind::SnsTopic => sns_topic::Topic::ATTRIBUTES,
            Kind::EventRule => events_rule::Rule::ATTRIBUTES,
            Kind::PrometheusWorkspace => aps_workspace::Workspace::ATTRIBUTES,
            Kind::NodeGroup => eks_nodegroup::Nodegroup::ATTRIBUTES,
        }
    }

    #[test]
    fn every_handle_attribute_reads_a_real_cloudformation_attribute() {
        for &kind in Kind::ALL {
            for &attr in kind.attrs() {
                match read(kind, attr) {
                    Some(Read::GetAtt(name)) => assert!(
                        l1_attributes(kind).contains(&name),
                        "{kind:?}.{attr:?} reads GetAtt {name}, not an attribute of the type"
                    ),
                    Some(Read::Ref) => {}
                    None => panic!("{kind:?}.{attr:?} has no CloudFormation reading"),
                }
            }
        }
    }
}
