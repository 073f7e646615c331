//! Building one Terraform root module (a phase of a stack): resources named from construct paths
//! (`Network/Vpc` -> `aws_vpc.network_vpc`; collisions are errors), references lowered to
//! `${type.name.attribute}` interpolations, pseudo values to data sources, IAM documents to
//! locals, variables, outputs and the `terraform`/`provider` blocks.

use crate::app::text::{Part, Pseudo, Text};
use crate::app::{logical_id, Attr, AttrRef, Kind, Stack, StageId, Tags};
use crate::diagnostics::{Code, Diagnostics};
use crate::resources::iam::{PolicyDocument, PrincipalKind};
use serde_json::{json, Map, Value};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

/// `hashicorp/aws`: 6.x; the committed test schema is 6.66.0.
pub const AWS_PROVIDER: (&str, &str) = ("hashicorp/aws", "~> 6.27");
/// `hashicorp/awscc`: `awscc_sagemaker_cluster` (hashicorp/aws has no HyperPod resource).
pub const AWSCC_PROVIDER: (&str, &str) = ("hashicorp/awscc", "~> 1.67");
/// `hashicorp/helm`: 3.x (nested-attribute `kubernetes = {...}` provider configuration).
pub const HELM_PROVIDER: (&str, &str) = ("hashicorp/helm", "~> 3.1");
/// Terraform itself: 1.5 or newer (`terraform_data`, `check` blocks and provider-defined
/// functions are not used, so this is the oldest release with current provider protocol 6).
pub const REQUIRED_VERSION: &str = ">= 1.5.0";

/// The file holding the `terraform` block (required Terraform and provider versions).
pub const VERSIONS_FILE: &str = "versions.tf.json";
/// The file holding providers, variables, data sources, locals, resources and outputs.
pub const MAIN_FILE: &str = "main.tf.json";

/// A resource address (`aws_vpc.network_vpc`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Addr {
    pub ty: &'static str,
    pub name: String,
}

impl Addr {
    /// `type.name`, as `depends_on` wants it.
    pub fn address(&self) -> String {
        format!("{}.{}", self.ty, self.name)
    }

    /// `${type.name.attr}`.
    pub fn interp(&self, attr: &str) -> String {
        format!("${{{}.{}.{attr}}}", self.ty, self.name)
    }
}

/// A Terraform resource name: the snake_case of a logical id (`NetworkVpc` -> `network_vpc`,
/// `AmazonEKSClusterPolicy` -> `amazon_eks_cluster_policy`, `NatEip1` -> `nat_eip1`); see
/// [`crate::app::snake_case`].
pub fn snake(id: &str) -> String {
    crate::app::snake_case(id)
}

/// Escapes a literal for a Terraform string template: `${` and `%{` would start an
/// interpolation or a directive.
pub fn escape_template(s: &str) -> String {
    s.replace("${", "$${").replace("%{", "%%{")
}

/// A literal as an HCL quoted string (inside an interpolation: `"https://"`).
pub fn hcl_string(s: &str) -> String {
    format!("\"{}\"", hcl_string_body(s))
}

/// The characters of an HCL quoted string holding the literal `s`, without the quotes.
pub fn hcl_string_body(s: &str) -> String {
    let mut out = String::new();
    for c in escape_template(s).chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out
}

/// The attribute expression (after `type.name.`) that reads `attr` of a `kind` resource;
/// `None` for an attribute the kind does not have (every pair `Kind::attrs` lists has an arm:
/// the unit test below checks it).
fn attribute(kind: Kind, attr: Attr) -> Option<&'static str> {
    use Attr::*;
    Some(match (kind, attr) {
        (
            Kind::Vpc
            | Kind::Subnet
            | Kind::SecurityGroup
            | Kind::InternetGateway
            | Kind::RouteTable
            | Kind::NatGateway,
            Id,
        ) => "id",
        // An `aws_eip`'s id is its allocation id.
        (Kind::Eip, AllocationId) => "id",
        (Kind::EksCluster | Kind::Role | Kind::LogGroup, Name) => "name",
        (Kind::Bucket, Name) => "bucket",
        (
            Kind::EksCluster
            | Kind::OidcProvider
            | Kind::Role
            | Kind::Bucket
            | Kind::KmsKey
            | Kind::LogGroup,
            Arn,
        ) => "arn",
        (Kind::HyperPodCluster, Arn) => "cluster_arn",
        (Kind::EksCluster, OidcIssuerUrl) => "identity[0].oidc[0].issuer",
        (Kind::EksCluster, ClusterSecurityGroupId) => "vpc_config[0].cluster_security_group_id",
        (Kind::FsxFileSystem, Id) => "id",
        (Kind::FsxFileSystem, DnsName) => "dns_name",
        (Kind::FsxFileSystem, MountName) => "mount_name",
        (Kind::InstanceProfile | Kind::EventRule, Name) => "name",
        (Kind::SnsTopic | Kind::PrometheusWorkspace, Arn) => "arn",
        (Kind::PrometheusWorkspace, Id) => "id",
        (Kind::NodeGroup, Arn) => "arn",
        _ => return None,
    })
}

/// A variable declaration.
#[derive(Clone, Debug)]
pub(crate) struct Variable {
    pub description: String,
    pub default: Option<String>,
    /// An RE2 pattern the value must match (the CloudFormation parameter's `AllowedPattern`).
    pub pattern: Option<String>,
    /// The error message when it does not: one sentence.
    pub error_message: String,
}

/// One root module (a phase of a stack) under construction.
pub(crate) struct RootModule<'a> {
    pub stack: &'a Stack,
    tags: &'a Tags,
    resources: Map<String, Value>,
    data: BTreeMap<&'static str, BTreeMap<String, Value>>,
    variables: Map<String, Value>,
    locals: Map<String, Value>,
    outputs: Map<String, Value>,
    names: BTreeMap<String, String>,
    /// Addresses of the resources lowered from each non-CloudFormation stage (uploads, Helm),
    /// which later stages wait for with `depends_on`.
    stage_addresses: BTreeMap<StageId, Vec<String>>,
    /// The policy resources of each role lowered from the resource layer, by role path.
    role_policies: BTreeMap<String, Vec<String>>,
    /// The first EKS cluster lowered: the cluster the Helm provider talks to.
    eks_cluster: Option<Addr>,
    /// The phase (root module directory) of each resource path lowered by an earlier phase:
    /// references to them read that phase's state (`terraform_remote_state`).
    earlier: BTreeMap<String, String>,
    /// The attributes read from each earlier phase's outputs, by phase (filled while
    /// references are lowered, which only read the module).
    remote_reads: RefCell<BTreeMap<String, Vec<AttrRef>>>,
    /// Resources that exist outside the description: references read their given values.
    existing: BTreeMap<String, crate::resources::Existing>,
    pub ds: Diagnostics,
}

impl<'a> RootModule<'a> {
    pub fn new(stack: &'a Stack, tags: &'a Tags) -> Self {
        RootModule {
            stack,
            tags,
            resources: Map::new(),
            data: BTreeMap::new(),
            variables: Map::new(),
            locals: Map::new(),
            outputs: Map::new(),
            names: BTreeMap::new(),
            stage_addresses: BTreeMap::new(),
            role_policies: BTreeMap::new(),
            eks_cluster: None,
            earlier: BTreeMap::new(),
            remote_reads: RefCell::new(BTreeMap::new()),
            existing: BTreeMap::new(),
            ds: Diagnostics::new(),
        }
    }

    /// Resource paths lowered by earlier phases, each with its phase directory.
    pub fn with_earlier(mut self, earlier: BTreeMap<String, String>) -> Self {
        self.earlier = earlier;
        self
    }

    /// Resources that exist outside the description, by path (see
    /// [`crate::resources::ResourceGraph::existing`]).
    /// The pseudo values they name are read through data sources declared here.
    pub fn with_existing(mut self, existing: BTreeMap<String, crate::resources::Existing>) -> Self {
        let pseudos: BTreeSet<Pseudo> = existing
            .values()
            .flat_map(|e| e.values.iter())
            .flat_map(|(_, t)| t.0.iter())
            .filter_map(|p| match p {
                Part::Pseudo(p) => Some(*p),
                _ => None,
            })
            .collect();
        for p in pseudos {
            self.pseudo(p);
        }
        self.existing = existing;
        self
    }

    /// The output an earlier phase gives `r` under (`network_vpc_id`).
    pub fn output_name(r: &AttrRef) -> String {
        snake(&r.output_key())
    }

    /// Adds a resource of type `ty` for construct path `path` (named `snake(logical id)`).
    pub fn add(&mut self, ty: &'static str, path: &str, body: Value) -> Addr {
        let name = snake(&logical_id(path));
        self.add_named(ty, name, path, body)
    }

    /// Adds a resource named `name` (a part of the resource at `path` that Terraform models as
    /// a resource of its own: a bucket's encryption, a role's policy attachment).
    pub fn add_named(&mut self, ty: &'static str, name: String, path: &str, body: Value) -> Addr {
        self.insert(ty, &name, path, body);
        Addr { ty, name }
    }

    /// Adds a resource of a type hyperforge has no kind for (a raw resource), named like
    /// [`RootModule::add`]; returns its address `type.name`.
    pub fn add_raw(&mut self, ty: &str, path: &str, body: Value) -> String {
        // Checked as an override is, and for what its type requires, when its type's schema
        // is committed.
        if let Some(t) = crate::synth::shape::find(super::provider_shapes(), ty) {
            let problems =
                t.check_body(crate::synth::shape::Dialect::Terraform, &body, "attribute");
            for p in problems {
                self.ds.report(
                    p.code,
                    self.stack.display_path(path),
                    format!("raw resource `{ty}`: {}", p.message),
                    p.help,
                );
            }
        }
        let name = snake(&logical_id(path));
        self.insert(ty, &name, path, body);
        format!("{ty}.{name}")
    }

    fn insert(&mut self, ty: &str, name: &str, path: &str, body: Value) {
        let key = format!("{ty}.{name}");
        if let Some(existing) = self.names.get(&key) {
            self.ds.report(
                Code::LogicalIdCollision,
                self.stack.display_path(path),
                format!("`{path}` and `{existing}` both derive the Terraform address `{key}`"),
                "rename one of the constructs so their paths no longer derive the same name",
            );
            return;
        }
        self.names.insert(key, path.to_owned());
        let by_type = self
            .resources
            .entry(ty.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(m) = by_type {
            m.insert(name.to_owned(), body);
        }
    }

    /// [`RootModule::depends_on`] of the resource at address `address` (`type.name`).
    pub fn depends_on_address(&mut self, address: &str, on: &[String]) {
        if let Some((ty, name)) = address.split_once('.') {
            self.depends_on_at(ty, name, on);
        }
    }

    /// Makes `addr` wait for `on` (`depends_on`, merged and kept in order).
    pub fn depends_on(&mut self, addr: &Addr, on: &[String]) {
        self.depends_on_at(addr.ty, &addr.name, on);
    }

    /// Writes checkov acknowledgements on the resource at `address` as Terraform JSON's comment
    /// property (`"//"`, which Terraform ignores), one `checkov:skip=ID: reason` line each:
    /// checkov's own suppression syntax, beside the resource, for the gate that reads them.
    pub fn acknowledge_address(&mut self, address: &str, skips: &[(&str, &str)]) {
        let Some((ty, name)) = address.split_once('.') else {
            return;
        };
        let Some(Value::Object(body)) = self.resources.get_mut(ty).and_then(|m| m.get_mut(name))
        else {
            return;
        };
        if skips.is_empty() {
            return;
        }
        let lines: Vec<String> = skips
            .iter()
            .map(|(id, reason)| format!("checkov:skip={id}: {reason}"))
            .collect();
        body.insert("//".into(), json!(lines.join("\n")));
    }

    fn depends_on_at(&mut self, ty: &str, name: &str, on: &[String]) {
        if on.is_empty() {
            return;
        }
        let Some(Value::Object(body)) = self.resources.get_mut(ty).and_then(|m| m.get_mut(name))
        else {
            return;
        };
        let list = body.entry("depends_on").or_insert_with(|| json!([]));
        if let Value::Array(items) = list {
            for a in on {
                if !items.iter().any(|i| i.as_str() == Some(a.as_str())) {
                    items.push(json!(a));
                }
            }
        }
    }

    /// The address of the resource lowered for construct path `path` (the resource itself,
    /// not a part Terraform states separately).
    pub fn address_of(&self, path: &str) -> Option<String> {
        let suffix = format!(".{}", snake(&logical_id(path)));
        self.names
            .iter()
            .find(|(address, p)| *p == path && address.ends_with(&suffix))
            .map(|(address, _)| address.clone())
    }

    /// [`RootModule::add`] for an EKS cluster, which the Helm provider and releases then use
    /// (the first one lowered).
    pub fn add_eks_cluster(&mut self, ty: &'static str, path: &str, body: Value) -> Addr {
        let addr = self.add(ty, path, body);
        self.eks_cluster.get_or_insert_with(|| addr.clone());
        addr
    }

    /// Whether the module holds a Helm release.
    pub fn has_helm_release(&self) -> bool {
        self.resources.contains_key("helm_release")
    }

    /// The stack's EKS cluster (the first lowered), for the Helm provider.
    pub fn eks_cluster(&self) -> Option<Addr> {
        self.eks_cluster.clone()
    }

    /// Records the policy resources (inline policies, attachments) of the role at `path`.
    pub fn record_role_policies(&mut self, path: &str, policies: Vec<String>) {
        self.role_policies.insert(path.to_owned(), policies);
    }

    /// The addresses of the policy resources of the role at `path`, for `depends_on` of a
    /// resource that needs the role's permissions when it is created.
    pub fn role_policies(&self, path: &str) -> Vec<String> {
        self.role_policies.get(path).cloned().unwrap_or_default()
    }

    /// Records that `addr` was lowered from `stage` (a stage later stages wait for).
    pub fn record_stage(&mut self, stage: StageId, addr: &Addr) {
        self.stage_addresses
            .entry(stage)
            .or_default()
            .push(addr.address());
    }

    /// Every address recorded for stages before `stage`.
    pub fn earlier_stages(&self, stage: StageId) -> Vec<String> {
        self.stage_addresses
            .range(..stage)
            .flat_map(|(_, a)| a.iter().cloned())
            .collect()
    }

    /// The bare expression reading `r` (`aws_vpc.network_vpc.id`); for a resource of an
    /// earlier phase, that phase's output read through `terraform_remote_state`.
    pub fn expr(&self, r: &AttrRef) -> String {
        if let Some(value) = self.existing.get(&r.path).and_then(|e| e.value(r.attr)) {
            return existing_expr(value);
        }
        if let Some(phase) = self.earlier.get(&r.path) {
            let mut reads = self.remote_reads.borrow_mut();
            let reads = reads.entry(phase.clone()).or_default();
            if !reads.contains(r) {
                reads.push(r.clone());
            }
            return format!(
                "data.terraform_remote_state.{}.outputs.{}",
                remote_state_name(phase),
                Self::output_name(r)
            );
        }
        format!(
            "{}.{}.{}",
            r.kind.terraform_type(),
            snake(&logical_id(&r.path)),
            attribute(r.kind, r.attr).unwrap_or("id")
        )
    }

    /// `${...}` of `r`.
    pub fn attr(&self, r: &AttrRef) -> Value {
        Value::String(format!("${{{}}}", self.expr(r)))
    }

    fn pseudo(&mut self, p: Pseudo) -> &'static str {
        let (ty, expr) = match p {
            Pseudo::Partition => ("aws_partition", "data.aws_partition.current.partition"),
            Pseudo::UrlSuffix => ("aws_partition", "data.aws_partition.current.dns_suffix"),
            Pseudo::Region => ("aws_region", "data.aws_region.current.region"),
            Pseudo::AccountId => (
                "aws_caller_identity",
                "data.aws_caller_identity.current.account_id",
            ),
        };
        self.data_named(ty, "current", json!({}));
        expr
    }

    /// Declares a data source `data.<ty>.<name>` once (the first body given wins) and returns
    /// its address.
    pub fn data_named(&mut self, ty: &'static str, name: &str, body: Value) -> String {
        self.data
            .entry(ty)
            .or_default()
            .entry(name.to_owned())
            .or_insert(body);
        format!("data.{ty}.{name}")
    }

    /// A text as a Terraform string template: literals escaped, references and pseudo values
    /// interpolated.
    pub fn text(&mut self, t: &Text) -> Value {
        let mut out = String::new();
        for part in &t.0 {
            match part {
                Part::Lit(s) => out.push_str(&escape_template(s)),
                Part::Pseudo(p) => {
                    let e = self.pseudo(*p);
                    out.push_str(&format!("${{{e}}}"));
                }
                Part::Ref(r) => out.push_str(&format!("${{{}}}", self.expr(r))),
                Part::Input(i) => {
                    self.input(i);
                    out.push_str(&format!("${{var.{}}}", snake(&i.name)));
                }
                Part::IssuerHostPath(r) => out.push_str(&format!(
                    "${{replace({}, \"https://\", \"\")}}",
                    self.expr(r)
                )),
            }
        }
        Value::String(out)
    }

    /// Declares the policy document as `local.<name>` and returns `${jsonencode(local.<name>)}`.
    ///
    /// In Terraform's JSON syntax a JSON object given as an expression (here, a local value)
    /// is an object constructor whose property names are string templates, and whose string
    /// values are templates too. So the document is written as plain JSON, condition keys
    /// such as `${replace(aws_eks_cluster.eks_cluster.identity[0].oidc[0].issuer,
    /// "https://", "")}:sub` included, and `jsonencode` turns it into the string IAM wants at
    /// apply time. No string pasting of JSON text, and the document stays readable.
    pub fn policy(&mut self, name: &str, doc: &PolicyDocument) -> Value {
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
                    let value = self.text(&p.value);
                    principal.insert(principal_key(p.kind).into(), value);
                }
                st.insert("Principal".into(), Value::Object(principal));
            }
            st.insert(
                "Action".into(),
                one_or_many(s.actions.iter().map(|a| json!(a)).collect()),
            );
            if !s.resources.is_empty() {
                let resources = s.resources.iter().map(|r| self.text(r)).collect();
                st.insert("Resource".into(), one_or_many(resources));
            }
            if !s.conditions.is_empty() {
                let mut cond: Map<String, Value> = Map::new();
                for c in &s.conditions {
                    let key = match self.text(&c.key) {
                        Value::String(k) => k,
                        _ => String::new(),
                    };
                    let values = c
                        .values
                        .iter()
                        .map(|v| match c.bool_literal(v) {
                            Some(b) => json!(b),
                            None => self.text(v),
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
        self.local(
            name,
            json!({"Version": "2012-10-17", "Statement": statements}),
        )
    }

    /// The stack's effective tags.
    pub fn tags(&self) -> &'a Tags {
        self.tags
    }

    /// Declares `local.<name>` (an object whose strings may interpolate references) and
    /// returns `${jsonencode(local.<name>)}`.
    pub fn local(&mut self, name: &str, value: Value) -> Value {
        self.locals.insert(name.to_owned(), value);
        Value::String(format!("${{jsonencode(local.{name})}}"))
    }

    /// Declares `var.<name>` and returns `${var.<name>}`.
    pub fn variable(&mut self, name: &str, v: Variable) -> Value {
        let mut m = Map::new();
        m.insert("type".into(), json!("string"));
        m.insert("description".into(), json!(v.description));
        if let Some(d) = v.default {
            // Defaults are literal values in JSON syntax (no template interpretation).
            m.insert("default".into(), json!(d));
        }
        if let Some(pattern) = v.pattern {
            m.insert(
                "validation".into(),
                json!([{
                    "condition": format!("${{can(regex({}, var.{name}))}}", hcl_string(&pattern)),
                    "error_message": v.error_message,
                }]),
            );
        }
        self.variables.insert(name.to_owned(), Value::Object(m));
        Value::String(format!("${{var.{name}}}"))
    }

    /// The variable declaring `input` (named after its snake_case); returns `${var.<name>}`.
    pub fn input(&mut self, input: &crate::app::text::StackInput) -> Value {
        self.variable(
            &snake(&input.name),
            Variable {
                description: input.description.clone(),
                default: input.default.clone(),
                pattern: input.pattern.clone(),
                error_message: format!("Must be {}.", input.expected),
            },
        )
    }

    /// Adds an output.
    pub fn output(&mut self, name: &str, description: &str, value: Value) {
        self.outputs.insert(
            name.to_owned(),
            json!({"description": description, "value": value}),
        );
    }

    /// The attributes this module reads of each earlier phase, by phase directory.
    pub fn remote_reads(&self) -> BTreeMap<String, Vec<AttrRef>> {
        self.remote_reads.borrow().clone()
    }

    /// Every resource's address (`type.name`) with the construct path it was lowered from.
    pub fn addresses(&self) -> impl Iterator<Item = (&String, &String)> {
        self.names.iter()
    }

    /// The block of the resource at `address` (`type.name`).
    pub fn body_mut(&mut self, address: &str) -> Option<&mut Value> {
        let (ty, name) = address.split_once('.')?;
        self.resources.get_mut(ty)?.get_mut(name)
    }

    /// Every resource path this module lowered.
    pub fn paths(&self) -> impl Iterator<Item = &String> {
        self.names.values()
    }

    /// The root module's files (`versions.tf.json`, `main.tf.json`), keys in a fixed order.
    /// `helm` configures the Helm provider (used when a `helm_release` is emitted).
    pub fn finish(
        mut self,
        helm: Option<Value>,
    ) -> Result<Vec<(&'static str, Value)>, Diagnostics> {
        if self.ds.has_errors() {
            return Err(self.ds);
        }
        for phase in self.remote_reads.borrow().keys() {
            self.data
                .entry("terraform_remote_state")
                .or_default()
                .insert(
                    remote_state_name(phase),
                    json!({
                        "backend": "local",
                        "config": {"path": format!("${{path.root}}/../{phase}/terraform.tfstate")},
                    }),
                );
        }
        // Tag keys and values are literals, never templates.
        let escaped: Map<String, Value> = self
            .tags
            .iter()
            .map(|(k, v)| (escape_template(k), json!(escape_template(v))))
            .collect();
        let awscc = self.resources.keys().any(|t| t.starts_with("awscc_"));
        let aws = self.resources.keys().any(|t| t.starts_with("aws_"))
            || self.data.keys().any(|t| t.starts_with("aws_"));
        let helm = helm.filter(|_| self.resources.contains_key("helm_release"));
        let mut providers = Map::new();
        if aws {
            providers.insert(
                "aws".into(),
                json!({"source": AWS_PROVIDER.0, "version": AWS_PROVIDER.1}),
            );
        }
        if awscc {
            providers.insert(
                "awscc".into(),
                json!({"source": AWSCC_PROVIDER.0, "version": AWSCC_PROVIDER.1}),
            );
        }
        if helm.is_some() {
            providers.insert(
                "helm".into(),
                json!({"source": HELM_PROVIDER.0, "version": HELM_PROVIDER.1}),
            );
        }
        let region = self.stack.region();
        let mut provider = Map::new();
        if aws {
            provider.insert(
                "aws".into(),
                json!({"region": region, "default_tags": {"tags": escaped}}),
            );
        }
        if awscc {
            provider.insert("awscc".into(), json!({"region": region}));
        }
        if let Some(h) = helm {
            provider.insert("helm".into(), h);
        }
        let comment = format!(
            "Terraform root module of stack {} (generated by hyperforge).",
            self.stack.name()
        );
        // The `terraform` block has a file of its own: checkov 3.3's tf.json parser fails on
        // its unlabelled `required_version` (it reads every top-level block as labelled), so
        // main.tf.json stays scannable.
        let versions = json!({
            "//": comment,
            "terraform": {"required_version": REQUIRED_VERSION, "required_providers": providers},
        });
        let mut root = Map::new();
        root.insert("//".into(), json!(comment));
        root.insert("provider".into(), Value::Object(provider));
        if !self.variables.is_empty() {
            root.insert("variable".into(), Value::Object(self.variables));
        }
        if !self.data.is_empty() {
            let data: Map<String, Value> = self
                .data
                .into_iter()
                .map(|(ty, by_name)| {
                    let by_name: Map<String, Value> = by_name.into_iter().collect();
                    (ty.to_owned(), Value::Object(by_name))
                })
                .collect();
            root.insert("data".into(), Value::Object(data));
        }
        if !self.locals.is_empty() {
            root.insert("locals".into(), Value::Object(self.locals));
        }
        root.insert("resource".into(), Value::Object(self.resources));
        if !self.outputs.is_empty() {
            root.insert("output".into(), Value::Object(self.outputs));
        }
        Ok(vec![
            (VERSIONS_FILE, versions),
            (MAIN_FILE, Value::Object(root)),
        ])
    }
}

/// The `terraform_remote_state` data source reading phase directory `phase`
/// (`01-foundation` -> `phase_01_foundation`: an identifier starts with a letter).
/// A value given for an existing resource as a Terraform expression: a string literal, with
/// the pseudo values it names read from the provider's data sources.
fn existing_expr(value: &Text) -> String {
    let mut out = String::from("\"");
    for part in &value.0 {
        match part {
            Part::Lit(s) => out.push_str(&hcl_string_body(s)),
            Part::Pseudo(p) => out.push_str(match p {
                Pseudo::Partition => "${data.aws_partition.current.partition}",
                Pseudo::UrlSuffix => "${data.aws_partition.current.dns_suffix}",
                Pseudo::Region => "${data.aws_region.current.region}",
                Pseudo::AccountId => "${data.aws_caller_identity.current.account_id}",
            }),
            // Values of existing resources are literals and pseudo values only.
            Part::Ref(_) | Part::IssuerHostPath(_) | Part::Input(_) => {}
        }
    }
    out.push('"');
    out
}

fn remote_state_name(phase: &str) -> String {
    format!("phase_{}", snake(phase))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_handle_attribute_has_a_terraform_reading() {
        for &kind in Kind::ALL {
            for &attr in kind.attrs() {
                assert!(attribute(kind, attr).is_some(), "{kind:?}.{attr:?}");
            }
        }
    }

    #[test]
    fn names_are_snake_case_of_logical_ids() {
        assert_eq!(snake("NetworkVpc"), "network_vpc");
        assert_eq!(snake("NetworkNatEip1"), "network_nat_eip1");
        assert_eq!(
            snake("NetworkPrivateSubnet1RouteTable"),
            "network_private_subnet1_route_table"
        );
        assert_eq!(
            snake("InferenceOperatorS3CsiDriverRole"),
            "inference_operator_s3_csi_driver_role"
        );
        assert_eq!(snake("AmazonEKSClusterPolicy"), "amazon_eks_cluster_policy");
        assert_eq!(snake("AmazonEKS_CNI_Policy"), "amazon_eks_cni_policy");
        assert_eq!(snake("write-flow-logs"), "write_flow_logs");
    }

    #[test]
    fn literals_cannot_start_interpolations() {
        assert_eq!(escape_template("a${b}%{c}"), "a$${b}%%{c}");
        assert_eq!(hcl_string("^a\\-b{12}\"$"), "\"^a\\\\-b{12}\\\"$\"");
    }
}
