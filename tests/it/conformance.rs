//! Conformance with upstream, read from what the reference assemblies contain. The IAM policies
//! written for the AWS Load Balancer Controller and Karpenter grant, in the rendered
//! CloudFormation and in the rendered Terraform, every action the projects' published policies
//! grant, on resources at least as broad, or narrowed as the table of each policy says and why;
//! a statement of ours only counts if each of its conditions is one the upstream statement also
//! has. Every Helm value the assemblies set (values files and `--set` keys) is a key of the
//! pinned chart's `values.yaml`. The IAM properties found missing by review are pinned here too,
//! on both backends: the load balancer controller opens target security groups without
//! condition, Karpenter lists instance profiles, the Mountpoint S3 CSI driver reads model
//! buckets (and not the TLS bucket), the inference operator deletes its certificates.
//!
//! The upstream files are vendored in `tests/data/upstream/`; its README.md says where each
//! comes from.

use crate::common::{artifacts, repo_root};
use hyperforge::synth::terraform::snake;
use hyperforge::App;
use serde_json::{Map, Value};
use serde_yaml::Value as Yaml;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::OnceLock;

// --- Policies, normalised ---------------------------------------------------------------------

/// A policy statement with every string normalised: the partition, region and account are
/// `{partition}`, `{region}`, `{account}`; an attribute of a resource of the stack is
/// `{ref:<terraform name>.<attribute in lower case>}`, the same in both backends.
#[derive(Clone, Debug)]
struct Stmt {
    sid: Option<String>,
    allow: bool,
    actions: Vec<String>,
    resources: Vec<String>,
    conditions: Vec<Cond>,
}

/// One condition: operator, key, accepted values.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Cond {
    op: String,
    key: String,
    values: BTreeSet<String>,
}

#[derive(Clone, Debug, Default)]
struct Policy {
    statements: Vec<Stmt>,
}

fn one_or_many(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(a) => a.iter().collect(),
        Value::Null => Vec::new(),
        other => vec![other],
    }
}

/// Reads a policy document whose strings `value` normalises and whose condition keys `key`
/// normalises. Fields this comparison does not model fail the test rather than being skipped.
fn parse_policy(
    doc: &Value,
    value: &dyn Fn(&Value) -> String,
    key: &dyn Fn(&str) -> String,
) -> Policy {
    let mut statements = Vec::new();
    for s in one_or_many(&doc["Statement"]) {
        for unsupported in ["NotAction", "NotResource", "NotPrincipal"] {
            assert!(
                s.get(unsupported).is_none(),
                "{unsupported} is not modelled: {s}"
            );
        }
        let mut conditions = Vec::new();
        if let Some(Value::Object(ops)) = s.get("Condition") {
            for (op, entries) in ops {
                let entries = entries
                    .as_object()
                    .expect("condition entries are an object");
                for (k, v) in entries {
                    conditions.push(Cond {
                        op: op.clone(),
                        key: key(k),
                        values: one_or_many(v).into_iter().map(value).collect(),
                    });
                }
            }
        }
        statements.push(Stmt {
            sid: s.get("Sid").and_then(Value::as_str).map(str::to_owned),
            allow: match s["Effect"].as_str() {
                Some("Allow") => true,
                Some("Deny") => false,
                other => panic!("statement without Effect Allow or Deny ({other:?}): {s}"),
            },
            actions: one_or_many(&s["Action"])
                .into_iter()
                .map(|a| a.as_str().expect("actions are strings").to_owned())
                .collect(),
            resources: one_or_many(&s["Resource"]).into_iter().map(value).collect(),
            conditions,
        });
    }
    Policy { statements }
}

/// Expands `${name}` in a template (`${!x}` is a literal `${x}`), each name resolved by
/// `resolve`.
fn substitute(template: &str, resolve: &dyn Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .unwrap_or_else(|| panic!("unclosed ${{ in {template}"));
        let name = &after[..end];
        match name.strip_prefix('!') {
            Some(literal) => out.push_str(&format!("${{{literal}}}")),
            None => out.push_str(&resolve(name)),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

fn reference_token(name: &str, attribute: &str) -> String {
    format!("{{ref:{}.{}}}", snake(name), attribute.to_lowercase())
}

fn cfn_pseudo(name: &str) -> Option<&'static str> {
    match name {
        "AWS::Partition" => Some("{partition}"),
        "AWS::Region" => Some("{region}"),
        "AWS::AccountId" => Some("{account}"),
        "AWS::URLSuffix" => Some("{urlsuffix}"),
        _ => None,
    }
}

/// A CloudFormation value: a literal, `Fn::Sub` (with or without variables), `Fn::GetAtt`,
/// `Fn::ImportValue` of an export named `<stage stack>:<LogicalId>:<Attr>`, or `Ref`.
fn cfn_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(m) if m.len() == 1 => {
            let (f, arg) = m.iter().next().expect("one entry");
            match (f.as_str(), arg) {
                ("Fn::Sub", Value::String(t)) => cfn_sub(t, &Map::new()),
                ("Fn::Sub", Value::Array(a)) if a.len() == 2 => cfn_sub(
                    a[0].as_str().expect("Fn::Sub template"),
                    a[1].as_object().expect("Fn::Sub variables"),
                ),
                ("Fn::GetAtt", Value::Array(a)) if a.len() == 2 => reference_token(
                    a[0].as_str().expect("logical id"),
                    a[1].as_str().expect("attribute"),
                ),
                ("Fn::ImportValue", Value::String(export)) => {
                    let parts: Vec<&str> = export.split(':').collect();
                    assert_eq!(parts.len(), 3, "export name {export}");
                    reference_token(parts[1], parts[2])
                }
                ("Ref", Value::String(name)) => cfn_pseudo(name)
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("{{ref:{}}}", snake(name))),
                _ => panic!("unexpected intrinsic in a policy: {v}"),
            }
        }
        _ => panic!("unexpected value in a policy: {v}"),
    }
}

fn cfn_sub(template: &str, vars: &Map<String, Value>) -> String {
    substitute(template, &|name| {
        if let Some(v) = vars.get(name) {
            return cfn_value(v);
        }
        if let Some(p) = cfn_pseudo(name) {
            return p.to_owned();
        }
        match name.split_once('.') {
            Some((logical, attribute)) => reference_token(logical, attribute),
            None => format!("{{ref:{}}}", snake(name)),
        }
    })
}

/// A CloudFormation `PolicyDocument`: an object, or a JSON string built with `Fn::Sub` (then
/// every string in it is a template).
fn cfn_policy(doc: &Value) -> Policy {
    if let Some(sub) = doc.get("Fn::Sub") {
        let (template, vars) = match sub {
            Value::String(t) => (t.as_str(), Map::new()),
            Value::Array(a) => (
                a[0].as_str().expect("Fn::Sub template"),
                a[1].as_object().expect("Fn::Sub variables").clone(),
            ),
            _ => panic!("Fn::Sub policy: {doc}"),
        };
        let inner: Value = serde_json::from_str(template).expect("Fn::Sub policy is JSON");
        let value = |v: &Value| cfn_sub(v.as_str().expect("string"), &vars);
        return parse_policy(&inner, &value, &|k| cfn_sub(k, &vars));
    }
    parse_policy(doc, &cfn_value, &|k| k.to_owned())
}

/// A Terraform string: `${...}` interpolations of the partition, region and account data
/// sources and of resource attributes (`aws_x.name.attr`); `$${` is a literal `${`.
fn tf_string(s: &str) -> String {
    let unescaped = s.replace("$${", "\u{0}");
    substitute(&unescaped, &|expr| match expr {
        "data.aws_partition.current.partition" => "{partition}".to_owned(),
        "data.aws_region.current.region" => "{region}".to_owned(),
        "data.aws_caller_identity.current.account_id" => "{account}".to_owned(),
        "data.aws_partition.current.dns_suffix" => "{urlsuffix}".to_owned(),
        _ => {
            let parts: Vec<&str> = expr.split('.').collect();
            if parts.len() == 3 && parts[0].starts_with("aws") {
                format!("{{ref:{}.{}}}", parts[1], parts[2])
            } else {
                format!("{{expr:{expr}}}")
            }
        }
    })
    .replace('\u{0}', "${")
}

fn tf_policy(doc: &Value) -> Policy {
    parse_policy(
        doc,
        &|v| tf_string(v.as_str().expect("Terraform policy values are strings")),
        &tf_string,
    )
}

// --- What an assembly contains ----------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Backend {
    CloudFormation,
    Terraform,
}

const BACKENDS: [Backend; 2] = [Backend::CloudFormation, Backend::Terraform];

/// A Helm stage of the manifest: its chart, values files and `--set` keys.
struct HelmStage {
    stage: String,
    chart: String,
    values: Vec<(String, Yaml)>,
    set_keys: Vec<String>,
}

/// One stack of a written assembly.
struct StackOut {
    name: String,
    eks_cluster: Option<String>,
    /// (backend, role name in Terraform spelling) -> inline policies by name.
    roles: BTreeMap<(Backend, String), BTreeMap<String, Policy>>,
    helm: Vec<HelmStage>,
    /// Every helm-values artifact of the stack, wherever listed.
    helm_values_artifacts: usize,
}

impl StackOut {
    /// The inline policies named `policy` of every role, in `backend`.
    fn policies_named(&self, backend: Backend, policy: &str) -> Vec<(&str, &Policy)> {
        self.roles
            .iter()
            .filter(|((b, _), _)| *b == backend)
            .filter_map(|((_, role), ps)| ps.get(policy).map(|p| (role.as_str(), p)))
            .collect()
    }

    /// Every inline statement of role `role`, in `backend`.
    fn role(&self, backend: Backend, role: &str) -> Policy {
        let policies = self
            .roles
            .get(&(backend, role.to_owned()))
            .unwrap_or_else(|| panic!("{}: no role {role} in {backend:?}", self.name));
        Policy {
            statements: policies
                .values()
                .flat_map(|p| p.statements.clone())
                .collect(),
        }
    }
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn read_yaml(path: &Path) -> Yaml {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()))
}

/// The chart of a manifest Helm stage, as one string.
fn chart_identity(chart: &Value) -> String {
    match (chart.get("git"), chart.get("repository")) {
        (Some(git), _) => format!(
            "{}@{}:{}",
            git.as_str().unwrap_or_default(),
            chart["commit"].as_str().unwrap_or_default(),
            chart["path"].as_str().unwrap_or_default()
        ),
        (None, Some(repo)) => format!(
            "{} {} {}",
            repo.as_str().unwrap_or_default(),
            chart["name"].as_str().unwrap_or_default(),
            chart["version"].as_str().unwrap_or_default()
        ),
        _ => panic!("chart neither from a repository nor from git: {chart}"),
    }
}

/// Synthesizes `app`, writes it, and reads back what the tests here look at.
fn render(app: App) -> Vec<StackOut> {
    let dir = tempfile::tempdir().expect("temporary directory");
    app.synth()
        .expect("app synthesizes")
        .write_to(dir.path())
        .expect("write assembly");
    let root = dir.path();
    let manifest = read_json(&root.join("manifest.json"));
    let all = artifacts(root);
    let mut out = Vec::new();
    for stack in manifest["stacks"].as_array().expect("stacks") {
        let name = stack["name"].as_str().expect("stack name").to_owned();
        let mut s = StackOut {
            name: name.clone(),
            eks_cluster: stack["eks_cluster"].as_str().map(str::to_owned),
            roles: BTreeMap::new(),
            helm: Vec::new(),
            helm_values_artifacts: all
                .iter()
                .filter(|a| a.stack == name && a.format == "helm-values")
                .count(),
        };
        for stage in stack["stages"].as_array().expect("stages") {
            if stage["kind"] != "helm" {
                continue;
            }
            let values = one_or_many(&stage["artifacts"])
                .into_iter()
                .filter(|a| a["format"] == "helm-values")
                .map(|a| {
                    let rel = a["path"].as_str().expect("artifact path");
                    (rel.to_owned(), read_yaml(&root.join(rel)))
                })
                .collect();
            s.helm.push(HelmStage {
                stage: stage["name"].as_str().expect("stage name").to_owned(),
                chart: chart_identity(&stage["chart"]),
                values,
                set_keys: one_or_many(&stage["set_from_outputs"])
                    .into_iter()
                    .map(|k| k["key"].as_str().expect("--set key").to_owned())
                    .collect(),
            });
        }
        for a in all.iter().filter(|a| a.stack == name) {
            match a.format.as_str() {
                "cloudformation" => {
                    let template = read_json(&a.path);
                    let resources = template["Resources"].as_object().expect("Resources");
                    for (id, r) in resources {
                        if r["Type"] != "AWS::IAM::Role" {
                            continue;
                        }
                        let policies = one_or_many(&r["Properties"]["Policies"])
                            .into_iter()
                            .map(|p| {
                                let policy_name = p["PolicyName"].as_str().expect("PolicyName");
                                (policy_name.to_owned(), cfn_policy(&p["PolicyDocument"]))
                            })
                            .collect();
                        s.roles
                            .insert((Backend::CloudFormation, snake(id)), policies);
                    }
                }
                "terraform" if a.path.ends_with("main.tf.json") => {
                    let module = read_json(&a.path);
                    for role in module["resource"]["aws_iam_role"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(k, _)| k)
                    {
                        s.roles
                            .insert((Backend::Terraform, role.clone()), BTreeMap::new());
                    }
                    for p in module["resource"]["aws_iam_role_policy"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(_, p)| p)
                    {
                        let role = p["role"].as_str().expect("role");
                        let role = role
                            .strip_prefix("${aws_iam_role.")
                            .and_then(|r| r.strip_suffix(".name}"))
                            .unwrap_or_else(|| panic!("role of a policy: {role}"));
                        let local = p["policy"]
                            .as_str()
                            .and_then(|d| d.strip_prefix("${jsonencode(local."))
                            .and_then(|d| d.strip_suffix(")}"))
                            .unwrap_or_else(|| panic!("policy document: {}", p["policy"]));
                        let doc = &module["locals"][local];
                        assert!(doc.is_object(), "no local {local}");
                        s.roles
                            .get_mut(&(Backend::Terraform, role.to_owned()))
                            .unwrap_or_else(|| panic!("policy of unknown role {role}"))
                            .insert(
                                p["name"].as_str().expect("policy name").to_owned(),
                                tf_policy(doc),
                            );
                    }
                }
                _ => {}
            }
        }
        out.push(s);
    }
    out
}

/// Every stack of every reference app (the reference deployments and their variants).
fn reference() -> &'static [StackOut] {
    static STACKS: OnceLock<Vec<StackOut>> = OnceLock::new();
    STACKS.get_or_init(|| {
        crate::reference::all()
            .into_iter()
            .chain(crate::reference::variants())
            .flat_map(render)
            .collect()
    })
}

// --- Coverage ---------------------------------------------------------------------------------

/// Whether every string `small` matches is matched by `big` (IAM `*` wildcards; `{...}`
/// tokens are fixed values, matched only by themselves or a `*`).
fn glob_covers(big: &str, small: &str) -> bool {
    let b: Vec<char> = big.chars().collect();
    let s: Vec<char> = small.chars().collect();
    // covers[i][j]: big[i..] covers small[j..].
    let mut covers = vec![vec![false; s.len() + 1]; b.len() + 1];
    covers[b.len()][s.len()] = true;
    for i in (0..b.len()).rev() {
        for j in (0..=s.len()).rev() {
            covers[i][j] = if b[i] == '*' {
                covers[i + 1][j] || (j < s.len() && covers[i][j + 1])
            } else {
                j < s.len() && s[j] != '*' && b[i] == s[j] && covers[i + 1][j + 1]
            };
        }
    }
    covers[0][0]
}

fn action_covers(pattern: &str, action: &str) -> bool {
    glob_covers(&pattern.to_lowercase(), &action.to_lowercase())
}

/// Whether `ours` allows `action` on `resource` when the request satisfies `given` (the
/// upstream statement's conditions): an Allow statement of ours must name the action and a
/// resource at least as broad, and each of its conditions must be one of `given` with at least
/// the same values. A Deny of ours on an overlapping resource defeats it.
fn allows(ours: &Policy, action: &str, resource: &str, given: &[Cond]) -> bool {
    let names = |s: &Stmt| s.actions.iter().any(|p| action_covers(p, action));
    let denied = ours.statements.iter().any(|s| {
        !s.allow
            && names(s)
            && s.resources
                .iter()
                .any(|d| glob_covers(d, resource) || glob_covers(resource, d))
    });
    !denied
        && ours.statements.iter().any(|s| {
            s.allow
                && names(s)
                && s.resources.iter().any(|r| glob_covers(r, resource))
                && s.conditions.iter().all(|c| {
                    given
                        .iter()
                        .any(|g| g.op == c.op && g.key == c.key && c.values.is_superset(&g.values))
                })
        })
}

/// How we narrow an upstream statement's resources.
enum Narrowed {
    /// Upstream's `*` region and account are the stack's region and account.
    ToStackRegionAndAccount,
    /// Only these resources (none: the actions are not granted at all).
    To(&'static [&'static str]),
}

/// A justified narrowing of some actions of one upstream statement.
struct Narrowing {
    /// The upstream statement: its Sid, or `#<index>` when it has none.
    statement: &'static str,
    /// The actions narrowed; empty for all of the statement's.
    actions: &'static [&'static str],
    narrowed: Narrowed,
    reason: &'static str,
}

fn pin_to_stack(resource: &str) -> String {
    let parts: Vec<&str> = resource.splitn(6, ':').collect();
    if parts.len() < 6 || parts[0] != "arn" {
        return resource.to_owned();
    }
    let region = if parts[3] == "*" {
        "{region}"
    } else {
        parts[3]
    };
    let account = if parts[4] == "*" {
        "{account}"
    } else {
        parts[4]
    };
    format!(
        "arn:{}:{}:{region}:{account}:{}",
        parts[1], parts[2], parts[5]
    )
}

/// What of `upstream` `ours` does not grant, given `narrowings`; also reports narrowings that
/// match nothing, or that would widen instead.
fn gaps(upstream: &Policy, ours: &Policy, narrowings: &[Narrowing]) -> Vec<String> {
    let mut out = Vec::new();
    let mut used = vec![false; narrowings.len()];
    for (i, up) in upstream.statements.iter().enumerate() {
        assert!(up.allow, "upstream Deny statements are not modelled");
        let label = up.sid.clone().unwrap_or_else(|| format!("#{i}"));
        for action in &up.actions {
            let rows: Vec<usize> = narrowings
                .iter()
                .enumerate()
                .filter(|(_, n)| {
                    n.statement == label
                        && (n.actions.is_empty() || n.actions.contains(&action.as_str()))
                })
                .map(|(k, _)| k)
                .collect();
            assert!(rows.len() <= 1, "{label} {action}: several narrowings");
            let targets: Vec<String> = match rows.first() {
                None => up.resources.clone(),
                Some(&k) => {
                    used[k] = true;
                    let targets: Vec<String> = match &narrowings[k].narrowed {
                        Narrowed::ToStackRegionAndAccount => {
                            up.resources.iter().map(|r| pin_to_stack(r)).collect()
                        }
                        Narrowed::To(rs) => rs.iter().map(|r| (*r).to_owned()).collect(),
                    };
                    for t in &targets {
                        if !up.resources.iter().any(|u| glob_covers(u, t)) {
                            out.push(format!(
                                "{label} {action}: the narrowing to {t} ({}) is not within upstream's {:?}",
                                narrowings[k].reason, up.resources
                            ));
                        }
                    }
                    targets
                }
            };
            for r in targets {
                if !allows(ours, action, &r, &up.conditions) {
                    out.push(format!("{label}: {action} on {r}"));
                }
            }
        }
    }
    for (k, n) in narrowings.iter().enumerate() {
        if !used[k] {
            out.push(format!(
                "narrowing of {} {:?} ({}) matches no upstream statement and action",
                n.statement, n.actions, n.reason
            ));
        }
    }
    out
}

fn upstream_file(name: &str) -> std::path::PathBuf {
    repo_root().join("tests/data/upstream").join(name)
}

// --- The AWS Load Balancer Controller ----------------------------------------------------------

/// The inline policy holding the controller's permissions, in every backend.
const LBC_POLICY: &str = "load-balancer-controller";

/// `docs/install/iam_policy.json` of the controller (aws partition), partition generalised.
fn lbc_upstream() -> Policy {
    let doc = read_json(&upstream_file(
        "aws-load-balancer-controller-v2.13.2.iam_policy.json",
    ));
    let value = |v: &Value| {
        let s = v.as_str().expect("upstream strings");
        match s.strip_prefix("arn:aws:") {
            Some(rest) => format!("arn:{{partition}}:{rest}"),
            None => s.to_owned(),
        }
    };
    parse_policy(&doc, &value, &|k| k.to_owned())
}

/// Where our load balancer controller policy is narrower than upstream's, statement by
/// statement (upstream's statements have no Sid: `#n` is the index in the vendored file).
const LBC_NARROWINGS: &[Narrowing] = &[
    Narrowing {
        statement: "#0",
        actions: &[],
        narrowed: Narrowed::To(&[
            "arn:{partition}:iam::{account}:role/aws-service-role/elasticloadbalancing.amazonaws.com/*",
        ]),
        reason: "with iam:AWSServiceName elasticloadbalancing.amazonaws.com the only role created is Elastic Load Balancing's service-linked role, at this path",
    },
    Narrowing {
        statement: "#4",
        actions: &[],
        narrowed: Narrowed::To(&[
            "arn:{partition}:ec2:{region}:{account}:security-group/*",
            "arn:{partition}:ec2:{region}:{account}:vpc/*",
        ]),
        reason: "CreateSecurityGroup is authorized on the new group and its VPC, both in the stack's region and account",
    },
    Narrowing {
        statement: "#5",
        actions: &[],
        narrowed: Narrowed::ToStackRegionAndAccount,
        reason: "the controller's security groups are in the stack's region and account",
    },
    Narrowing {
        statement: "#6",
        actions: &[],
        narrowed: Narrowed::ToStackRegionAndAccount,
        reason: "the controller's security groups are in the stack's region and account",
    },
    Narrowing {
        statement: "#7",
        actions: &["ec2:DeleteSecurityGroup"],
        narrowed: Narrowed::To(&["arn:{partition}:ec2:{region}:{account}:security-group/*"]),
        reason: "DeleteSecurityGroup acts on a security group; the controller's are in the stack's region and account (the ingress actions of this statement are granted on * by OpenTargetSecurityGroups)",
    },
    Narrowing {
        statement: "#8",
        actions: &[],
        narrowed: Narrowed::To(&[
            "arn:{partition}:elasticloadbalancing:{region}:{account}:loadbalancer/*",
            "arn:{partition}:elasticloadbalancing:{region}:{account}:targetgroup/*/*",
        ]),
        reason: "the resources these create: load balancers and target groups of the stack's region and account",
    },
    Narrowing {
        statement: "#9",
        actions: &[],
        narrowed: Narrowed::To(&[
            "arn:{partition}:elasticloadbalancing:{region}:{account}:loadbalancer/*",
            "arn:{partition}:elasticloadbalancing:{region}:{account}:listener/*",
            "arn:{partition}:elasticloadbalancing:{region}:{account}:listener-rule/*",
        ]),
        reason: "listeners are created on load balancers and rules on listeners; these are all the resource types the actions act on",
    },
    Narrowing {
        statement: "#10",
        actions: &[],
        narrowed: Narrowed::ToStackRegionAndAccount,
        reason: "the controller's load balancers and target groups are in the stack's region and account",
    },
    Narrowing {
        statement: "#11",
        actions: &[],
        narrowed: Narrowed::ToStackRegionAndAccount,
        reason: "the controller's listeners and rules are in the stack's region and account",
    },
    Narrowing {
        statement: "#12",
        actions: &[],
        narrowed: Narrowed::To(&[
            "arn:{partition}:elasticloadbalancing:{region}:{account}:loadbalancer/*",
            "arn:{partition}:elasticloadbalancing:{region}:{account}:targetgroup/*/*",
            "arn:{partition}:elasticloadbalancing:{region}:{account}:listener/*",
        ]),
        reason: "the resource types these act on: load balancers (attributes, IP type, security groups, subnets, capacity, IPAM pools), target groups, listener attributes",
    },
    Narrowing {
        statement: "#13",
        actions: &[],
        narrowed: Narrowed::ToStackRegionAndAccount,
        reason: "the controller's load balancers and target groups are in the stack's region and account",
    },
    Narrowing {
        statement: "#14",
        actions: &[],
        narrowed: Narrowed::ToStackRegionAndAccount,
        reason: "the controller's target groups are in the stack's region and account",
    },
    Narrowing {
        statement: "#15",
        actions: &[],
        narrowed: Narrowed::To(&[
            "arn:{partition}:elasticloadbalancing:{region}:{account}:loadbalancer/*",
            "arn:{partition}:elasticloadbalancing:{region}:{account}:listener/*",
            "arn:{partition}:elasticloadbalancing:{region}:{account}:listener-rule/*",
        ]),
        reason: "the resource types these act on: a web ACL is set on a load balancer, listeners and their certificates, rules and their priorities",
    },
];

#[test]
fn load_balancer_controller_policy_covers_upstream_in_both_backends() {
    let upstream = lbc_upstream();
    assert_eq!(upstream.statements.len(), 16, "the vendored file changed");
    for stack in reference() {
        for backend in BACKENDS {
            let policies = stack.policies_named(backend, LBC_POLICY);
            assert!(
                !policies.is_empty(),
                "{} {backend:?}: no role with the {LBC_POLICY} policy",
                stack.name
            );
            for (role, policy) in policies {
                let gaps = gaps(&upstream, policy, LBC_NARROWINGS);
                assert!(
                    gaps.is_empty(),
                    "{} {backend:?} {role}: upstream grants what we do not:\n  {}",
                    stack.name,
                    gaps.join("\n  ")
                );
            }
        }
    }
}

#[test]
fn load_balancer_controller_roles_open_target_security_groups_without_condition() {
    for stack in reference() {
        for backend in BACKENDS {
            for (role, policy) in stack.policies_named(backend, LBC_POLICY) {
                for action in [
                    "ec2:AuthorizeSecurityGroupIngress",
                    "ec2:RevokeSecurityGroupIngress",
                ] {
                    assert!(
                        allows(policy, action, "*", &[]),
                        "{} {backend:?} {role}: {action} on the targets' security groups needs a condition or is missing",
                        stack.name
                    );
                }
            }
        }
    }
}

// --- Karpenter ---------------------------------------------------------------------------------

/// The inline policy holding Karpenter's controller permissions, in every backend.
const KARPENTER_POLICY: &str = "karpenter-controller";

/// The upstream template's substitutions that name its own resources, and what they are here.
const KARPENTER_BINDINGS: &[(&str, &str, &str)] = &[
    (
        "KarpenterNodeRole.Arn",
        "{ref:karpenter_node_role.arn}",
        "the role of the nodes Karpenter launches: the Karpenter construct's NodeRole, which the EC2NodeClass names",
    ),
    (
        "KarpenterInterruptionQueue.Arn",
        "{upstream:interruption-queue}",
        "a queue only the upstream template creates (see the narrowing of AllowInterruptionQueueActions)",
    ),
];

/// The v1.8.1 controller policy, its substitutions resolved for the cluster `cluster`.
fn karpenter_upstream(cluster: &str) -> Policy {
    let file = read_json(&upstream_file("karpenter-v1.8.1.controller-policy.json"));
    let resolve = |name: &str| -> String {
        if let Some(p) = cfn_pseudo(name) {
            return p.to_owned();
        }
        if name == "ClusterName" {
            return cluster.to_owned();
        }
        KARPENTER_BINDINGS
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, ours, _)| (*ours).to_owned())
            .unwrap_or_else(|| panic!("unbound substitution ${{{name}}} in the Karpenter policy"))
    };
    parse_policy(
        &file["PolicyDocument"],
        &|v| substitute(v.as_str().expect("upstream strings"), &resolve),
        &|k| substitute(k, &resolve),
    )
}

/// Where our Karpenter controller policy is narrower than upstream's, statement by statement.
const KARPENTER_NARROWINGS: &[Narrowing] = &[
    Narrowing {
        statement: "AllowScopedEC2InstanceAccessActions",
        actions: &[],
        narrowed: Narrowed::ToStackRegionAndAccount,
        reason: "the security groups, subnets and Capacity Block reservations nodes launch into are the stack's own (no VPC shared from another account)",
    },
    Narrowing {
        statement: "AllowScopedEC2LaunchTemplateAccessActions",
        actions: &[],
        narrowed: Narrowed::ToStackRegionAndAccount,
        reason: "Karpenter's launch templates are created in the stack's account",
    },
    Narrowing {
        statement: "AllowScopedEC2InstanceActionsWithTags",
        actions: &[],
        narrowed: Narrowed::ToStackRegionAndAccount,
        reason: "instances, fleets, volumes, interfaces, templates and reservations of the stack's account",
    },
    Narrowing {
        statement: "AllowScopedResourceCreationTagging",
        actions: &[],
        narrowed: Narrowed::ToStackRegionAndAccount,
        reason: "what Karpenter creates is in the stack's account",
    },
    Narrowing {
        statement: "AllowScopedResourceTagging",
        actions: &[],
        narrowed: Narrowed::ToStackRegionAndAccount,
        reason: "Karpenter's instances are in the stack's account",
    },
    Narrowing {
        statement: "AllowScopedDeletion",
        actions: &[],
        narrowed: Narrowed::ToStackRegionAndAccount,
        reason: "Karpenter's instances and launch templates are in the stack's account",
    },
    Narrowing {
        statement: "AllowInterruptionQueueActions",
        actions: &[],
        narrowed: Narrowed::To(&[]),
        reason: "no interruption queue: settings.interruptionQueue is unset (karpenter_runs_without_an_interruption_queue), and Karpenter then reads no SQS queue",
    },
];

/// Our references that stand for an ARN upstream spells out.
fn resolve_ours(policy: &Policy, cluster: &str) -> Policy {
    let eks = format!("arn:{{partition}}:eks:{{region}}:{{account}}:cluster/{cluster}");
    let mut p = policy.clone();
    for s in &mut p.statements {
        for r in &mut s.resources {
            // The stack's EKS cluster (logical id EksCluster), which is named `cluster`.
            *r = r.replace("{ref:eks_cluster.arn}", &eks);
        }
    }
    p
}

#[test]
fn karpenter_controller_policy_covers_upstream_in_both_backends() {
    let mut checked = 0;
    for stack in reference() {
        for backend in BACKENDS {
            for (role, policy) in stack.policies_named(backend, KARPENTER_POLICY) {
                let cluster = stack.eks_cluster.as_deref().expect("an EKS cluster");
                let upstream = karpenter_upstream(cluster);
                assert_eq!(upstream.statements.len(), 17, "the vendored file changed");
                let gaps = gaps(
                    &upstream,
                    &resolve_ours(policy, cluster),
                    KARPENTER_NARROWINGS,
                );
                assert!(
                    gaps.is_empty(),
                    "{} {backend:?} {role}: upstream grants what we do not:\n  {}",
                    stack.name,
                    gaps.join("\n  ")
                );
                checked += 1;
            }
        }
    }
    assert!(
        checked >= 2,
        "no Karpenter controller role in both backends of the reference stacks"
    );
}

#[test]
fn karpenter_controller_role_lists_instance_profiles() {
    let mut checked = 0;
    for stack in reference() {
        for backend in BACKENDS {
            for (role, policy) in stack.policies_named(backend, KARPENTER_POLICY) {
                assert!(
                    allows(policy, "iam:ListInstanceProfiles", "*", &[]),
                    "{} {backend:?} {role}: iam:ListInstanceProfiles missing (deleting an EC2NodeClass never finishes)",
                    stack.name
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 2);
}

#[test]
fn karpenter_runs_without_an_interruption_queue() {
    let mut checked = 0;
    for stack in reference() {
        for h in stack
            .helm
            .iter()
            .filter(|h| h.chart.contains(" karpenter "))
        {
            for (file, values) in &h.values {
                assert!(
                    values["settings"].get("interruptionQueue").is_none(),
                    "{file}: an interruption queue needs the SQS permissions narrowed away in KARPENTER_NARROWINGS"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 0, "no Karpenter values file");
}

// --- The coverage check itself -----------------------------------------------------------------

#[test]
fn coverage_check_reports_a_missing_statement_and_an_added_condition() {
    let upstream = lbc_upstream();
    let stack = &reference()[0];
    let (_, ours) = stack.policies_named(Backend::CloudFormation, LBC_POLICY)[0];
    assert!(gaps(&upstream, ours, LBC_NARROWINGS).is_empty());

    // Without the unconditional ingress statement, the tag-conditioned one does not count.
    let mut without = ours.clone();
    without
        .statements
        .retain(|s| s.sid.as_deref() != Some("OpenTargetSecurityGroups"));
    let found = gaps(&upstream, &without, LBC_NARROWINGS);
    assert!(
        found.contains(&"#3: ec2:AuthorizeSecurityGroupIngress on *".to_owned()),
        "{found:?}"
    );

    // A condition upstream does not have makes a statement of ours not count.
    let mut conditioned = ours.clone();
    for s in &mut conditioned.statements {
        if s.sid.as_deref() == Some("RegisterTargets") {
            s.conditions.push(Cond {
                op: "StringEquals".into(),
                key: "aws:RequestedRegion".into(),
                values: ["{region}".to_owned()].into(),
            });
        }
    }
    let found = gaps(&upstream, &conditioned, LBC_NARROWINGS);
    assert!(
        found
            .iter()
            .any(|g| g.starts_with("#14: elasticloadbalancing:RegisterTargets")),
        "{found:?}"
    );

    // A narrowing may not widen, and an unused one is reported.
    let widening = [Narrowing {
        statement: "#14",
        actions: &[],
        narrowed: Narrowed::To(&["arn:{partition}:s3:::*"]),
        reason: "test",
    }];
    let found = gaps(&upstream, ours, &widening);
    assert!(
        found.iter().any(|g| g.contains("is not within upstream")),
        "{found:?}"
    );
    let stale = [Narrowing {
        statement: "#99",
        actions: &[],
        narrowed: Narrowed::ToStackRegionAndAccount,
        reason: "test",
    }];
    assert!(gaps(&upstream, ours, &stale)
        .iter()
        .any(|g| g.contains("matches no upstream statement")));
}

#[test]
fn glob_coverage() {
    assert!(glob_covers("*", "arn:{partition}:s3:::b/*"));
    assert!(glob_covers(
        "arn:a:elb:r:1:loadbalancer/*",
        "arn:a:elb:r:1:loadbalancer/net/*/*"
    ));
    assert!(!glob_covers(
        "arn:a:elb:r:1:loadbalancer/net/*/*",
        "arn:a:elb:r:1:loadbalancer/*"
    ));
    assert!(!glob_covers("arn:a:ec2:{region}:x", "arn:a:ec2:*:x"));
    assert!(glob_covers("arn:a:ec2:*:x", "arn:a:ec2:{region}:x"));
    assert!(!glob_covers("a*b", "a*"));
    assert!(action_covers("s3:*", "S3:GetObject"));
}

// --- The inference operator's roles -----------------------------------------------------------

const CSI_ROLE: &str = "inference_operator_s3_csi_driver_role";
const EXECUTION_ROLE: &str = "inference_operator_execution_role";
const TLS_BUCKET: &str = "{ref:inference_operator_tls_bucket.arn}";

fn hyperpod_stacks(stacks: &[StackOut]) -> Vec<&StackOut> {
    let found: Vec<&StackOut> = stacks
        .iter()
        .filter(|s| {
            s.roles
                .contains_key(&(Backend::CloudFormation, CSI_ROLE.to_owned()))
        })
        .collect();
    assert!(!found.is_empty(), "no stack with the inference operator");
    found
}

/// With no model bucket named the driver reads no bucket: it mounts with one set of
/// credentials for every PersistentVolume, so any grant would serve every namespace.
#[test]
fn s3_csi_driver_reads_no_bucket_unless_one_is_named() {
    for stack in hyperpod_stacks(reference()) {
        for backend in BACKENDS {
            let p = stack.role(backend, CSI_ROLE);
            let at = format!("{} {backend:?} {CSI_ROLE}", stack.name);
            for (action, resource) in [
                (
                    "s3:ListBucket",
                    "arn:{partition}:s3:::kimi-k3-weights".to_owned(),
                ),
                (
                    "s3:GetObject",
                    "arn:{partition}:s3:::kimi-k3-weights/config.json".to_owned(),
                ),
                ("s3:ListBucket", TLS_BUCKET.to_owned()),
                ("s3:GetObject", format!("{TLS_BUCKET}/cert.pem")),
            ] {
                let any_account = [Cond {
                    op: "StringEquals".into(),
                    key: "s3:ResourceAccount".into(),
                    values: ["{account}".to_owned()].into(),
                }];
                assert!(
                    !allows(&p, action, &resource, &[])
                        && !allows(&p, action, &resource, &any_account),
                    "{at}: {action} on {resource} without a named model bucket"
                );
            }
        }
    }
}

#[test]
fn s3_csi_driver_is_scoped_to_named_model_buckets() {
    let text = std::fs::read_to_string(repo_root().join("stacks/kimi-k3-hyperpod.yaml"))
        .expect("reference stack file");
    let anchor = "      - inference_operator: InferenceOperator\n";
    assert!(text.contains(anchor), "stack file layout changed");
    let text = text.replace(
        anchor,
        &format!("{anchor}        model_buckets: [kimi-k3-weights]\n"),
    );
    let app = hyperforge::stackfile::load_str("kimi-k3-hyperpod.yaml", &text)
        .expect("stack file with a model bucket loads");
    let stacks = render(app);
    for stack in hyperpod_stacks(&stacks) {
        for backend in BACKENDS {
            let p = stack.role(backend, CSI_ROLE);
            let at = format!("{} {backend:?} {CSI_ROLE}", stack.name);
            assert!(
                allows(
                    &p,
                    "s3:ListBucket",
                    "arn:{partition}:s3:::kimi-k3-weights",
                    &[]
                ),
                "{at}: cannot list the named bucket"
            );
            assert!(
                allows(
                    &p,
                    "s3:GetObject",
                    "arn:{partition}:s3:::kimi-k3-weights/a/b",
                    &[]
                ),
                "{at}: cannot read the named bucket"
            );
            assert!(
                p.statements
                    .iter()
                    .filter(|s| s.allow)
                    .flat_map(|s| &s.resources)
                    .all(|r| r.starts_with("arn:{partition}:s3:::kimi-k3-weights")
                        || r.starts_with(&format!("arn:{{partition}}:s3:::{STORE_BUCKET}"))),
                "{at}: grants more than the named bucket and the model store: {p:?}"
            );
        }
    }
}

/// The reference HyperPod stack's model store.
const STORE_BUCKET: &str = "kimi-k3-hyperpod-weights-111122223333-us-west-2";

#[test]
fn s3_csi_driver_reads_the_model_store_its_endpoints_serve_from() {
    for stack in hyperpod_stacks(reference()) {
        for backend in BACKENDS {
            let p = stack.role(backend, CSI_ROLE);
            let at = format!("{} {backend:?} {CSI_ROLE}", stack.name);
            let bucket = format!("arn:{{partition}}:s3:::{STORE_BUCKET}");
            assert!(
                allows(&p, "s3:ListBucket", &bucket, &[]),
                "{at}: cannot list the model store"
            );
            assert!(
                allows(
                    &p,
                    "s3:GetObject",
                    &format!("{bucket}/moonshotai/Kimi-K3/0123456789abcdef0123456789abcdef01234567/config.json"),
                    &[]
                ),
                "{at}: cannot read the staged weights"
            );
            assert!(
                !allows(&p, "s3:PutObject", &format!("{bucket}/x"), &[]),
                "{at}: may write the model store"
            );
        }
    }
}

#[test]
fn inference_operator_may_delete_its_certificates() {
    for stack in hyperpod_stacks(reference()) {
        for backend in BACKENDS {
            let p = stack.role(backend, EXECUTION_ROLE);
            assert!(
                allows(
                    &p,
                    "s3:DeleteObject",
                    &format!("{TLS_BUCKET}/cert.pem"),
                    &[]
                ),
                "{} {backend:?} {EXECUTION_ROLE}: cannot delete certificates in the TLS bucket",
                stack.name
            );
        }
    }
}

// --- Helm values against the pinned charts ----------------------------------------------------

/// The charts the code pins, each with the `values.yaml` vendored for it.
const PINNED_VALUES: &[(&str, &str)] = &[
    (
        "https://aws.github.io/eks-charts aws-efa-k8s-device-plugin v0.5.26",
        "aws-efa-k8s-device-plugin-v0.5.26.values.yaml",
    ),
    (
        "oci://registry.k8s.io/lws/charts lws 0.10.0",
        "lws-0.10.0.values.yaml",
    ),
    (
        "oci://registry.k8s.io/kueue/charts kueue 0.19.2",
        "kueue-0.19.2.values.yaml",
    ),
    (
        "https://aws.github.io/eks-charts aws-load-balancer-controller 1.13.2",
        "aws-load-balancer-controller-1.13.2.values.yaml",
    ),
    (
        "https://nvidia.github.io/k8s-device-plugin nvidia-device-plugin 0.18.2",
        "nvidia-device-plugin-0.18.2.values.yaml",
    ),
    (
        "oci://public.ecr.aws/karpenter karpenter 1.8.1",
        "karpenter-1.8.1.values.yaml",
    ),
    (
        "https://github.com/aws/sagemaker-hyperpod-cli.git@011ca927123e02b35a399935bbb3ab1905fe33c7:helm_chart/HyperPodHelmChart",
        "hyperpod-dependencies-011ca927.values.yaml",
    ),
    (
        "https://aws.github.io/eks-charts aws-for-fluent-bit 0.2.0",
        "aws-for-fluent-bit-0.2.0.values.yaml",
    ),
    (
        "https://nvidia.github.io/dcgm-exporter/helm-charts dcgm-exporter 4.8.2",
        "dcgm-exporter-4.8.2.values.yaml",
    ),
    (
        "https://kedacore.github.io/charts keda 2.17.1",
        "keda-2.17.1.values.yaml",
    ),
    (
        "https://prometheus-community.github.io/helm-charts kube-state-metrics 8.4.0",
        "kube-state-metrics-8.4.0.values.yaml",
    ),
];

/// Keys a chart's templates read that its `values.yaml` shows only in comments (so the parsed
/// file lacks them), with the template that reads each.
const COMMENTED_KEYS: &[(&str, &str, &str)] = &[
    (
        "aws-for-fluent-bit-0.2.0.values.yaml",
        "priorityClassName",
        "templates/daemonset.yaml: `{{- if .Values.priorityClassName }}`",
    ),
    (
        "aws-for-fluent-bit-0.2.0.values.yaml",
        "additionalFilters",
        "templates/configmap.yaml: `{{ .Values.additionalFilters | indent 4}}` after the kubernetes filter",
    ),
    (
        "aws-for-fluent-bit-0.2.0.values.yaml",
        "additionalOutputs",
        "templates/configmap.yaml: `{{ .Values.additionalOutputs | indent 4 }}` after the outputs",
    ),
];

/// Maps a chart declares with default entries whose keys are free-form all the same; below an
/// empty map (`{}`) or an undeclared-type key (`null`) any key is accepted anyway.
const FREE_FORM: &[(&str, &str, &str)] = &[(
    "karpenter-1.8.1.values.yaml",
    "nodeSelector",
    "a pod nodeSelector: any node label (Helm merges ours with the chart's kubernetes.io/os)",
)];

fn yaml_key(k: &Yaml) -> String {
    match k {
        Yaml::String(s) => s.clone(),
        other => serde_yaml::to_string(other)
            .unwrap_or_default()
            .trim()
            .to_owned(),
    }
}

/// Key paths of `ours` that `chart` (the pinned `values.yaml` named `file`) does not declare.
fn unknown_keys(file: &str, ours: &Yaml, chart: &Yaml) -> Vec<String> {
    fn walk(file: &str, path: &mut Vec<String>, ours: &Yaml, chart: &Yaml, out: &mut Vec<String>) {
        let Yaml::Mapping(ours) = ours else { return };
        let joined = path.join(".");
        let free = FREE_FORM.iter().any(|(f, p, _)| *f == file && *p == joined);
        match chart {
            Yaml::Null => {}
            Yaml::Mapping(m) if m.is_empty() || free => {}
            Yaml::Mapping(m) => {
                for (k, v) in ours {
                    let key = yaml_key(k);
                    path.push(key.clone());
                    let commented = || {
                        let joined = path.join(".");
                        COMMENTED_KEYS
                            .iter()
                            .any(|(f, k, _)| *f == file && *k == joined)
                    };
                    match m.get(key.as_str()) {
                        None if commented() => {}
                        None => out.push(path.join(".")),
                        Some(c) => walk(file, path, v, c, out),
                    }
                    path.pop();
                }
            }
            _ => out.push(format!("{joined} (a map here, not in the chart)")),
        }
    }
    let mut out = Vec::new();
    walk(file, &mut Vec::new(), ours, chart, &mut out);
    out
}

/// A `--set` key (`a.b\.c`) as the values it sets (`{a: {"b.c": null}}`).
fn set_key_as_values(key: &str) -> Yaml {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut chars = key.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => current.extend(chars.next()),
            '.' => parts.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    parts.push(current);
    parts.into_iter().rev().fold(Yaml::Null, |inner, part| {
        let mut m = serde_yaml::Mapping::new();
        m.insert(Yaml::String(part), inner);
        Yaml::Mapping(m)
    })
}

fn pinned_values(chart: &str) -> (&'static str, Yaml) {
    let (_, file) = PINNED_VALUES
        .iter()
        .find(|(c, _)| *c == chart)
        .unwrap_or_else(|| {
            panic!("chart {chart} has no vendored values.yaml: add it to tests/data/upstream/ and PINNED_VALUES")
        });
    (file, read_yaml(&upstream_file(file)))
}

#[test]
fn helm_values_set_only_keys_of_the_pinned_charts() {
    let mut files = 0;
    let mut set_keys = 0;
    let mut charts = std::collections::BTreeSet::new();
    // The reference stacks, and the log shipping test stack for the chart they do not use.
    let logs = render(crate::logs::app());
    for stack in reference().iter().chain(&logs) {
        let mut values_of_stack = 0;
        for h in &stack.helm {
            let (file, chart) = pinned_values(&h.chart);
            charts.insert(file);
            for (artifact, values) in &h.values {
                let unknown = unknown_keys(file, values, &chart);
                assert!(
                    unknown.is_empty(),
                    "{artifact} (stage {}) sets keys {file} does not have: {unknown:?}",
                    h.stage
                );
                values_of_stack += 1;
            }
            for key in &h.set_keys {
                let unknown = unknown_keys(file, &set_key_as_values(key), &chart);
                assert!(
                    unknown.is_empty(),
                    "{} stage {}: --set {key} is not a key of {file}",
                    stack.name,
                    h.stage
                );
                set_keys += 1;
            }
        }
        assert_eq!(
            values_of_stack, stack.helm_values_artifacts,
            "{}: a helm-values artifact outside a Helm stage was not checked",
            stack.name
        );
        files += values_of_stack;
    }
    assert!(
        files >= 6 && set_keys >= 2,
        "{files} files, {set_keys} --set keys"
    );
    let pinned: std::collections::BTreeSet<&str> = PINNED_VALUES.iter().map(|(_, f)| *f).collect();
    let unchecked: Vec<&&str> = pinned.difference(&charts).collect();
    assert!(
        unchecked.is_empty(),
        "no values checked against {unchecked:?}"
    );
}

/// The KEDA preset (in no reference stack yet) sets only keys of the pinned chart's values.
#[test]
fn keda_preset_sets_only_keys_of_the_pinned_chart() {
    let keda = hyperforge::constructs::HelmRelease::keda("cluster");
    let hyperforge::constructs::helm::ChartSource::Repository {
        repo,
        chart,
        version,
    } = &keda.chart
    else {
        panic!("{:?}", keda.chart)
    };
    let (file, pinned) = pinned_values(&format!("{repo} {chart} {version}"));
    let ours: Yaml = serde_yaml::to_value(&keda.values).unwrap();
    let unknown = unknown_keys(file, &ours, &pinned);
    assert!(unknown.is_empty(), "{file} does not have {unknown:?}");
    // The service account the operator's Pod Identity association names is the chart's.
    assert_eq!(
        pinned["serviceAccount"]["operator"]["name"],
        Yaml::String(hyperforge::constructs::controllers::KEDA_OPERATOR_SERVICE_ACCOUNT.to_owned())
    );
}

#[test]
fn helm_values_check_reports_a_made_up_key() {
    let (file, chart) = pinned_values("oci://public.ecr.aws/karpenter karpenter 1.8.1");
    let ours: Yaml = serde_yaml::from_str(
        "settings:\n  clusterName: c\n  clusterNmae: c\nserviceAccount:\n  annotations:\n    any/key: v\nnodeSelector:\n  any/label: v\n",
    )
    .expect("YAML");
    assert_eq!(
        unknown_keys(file, &ours, &chart),
        vec!["settings.clusterNmae".to_owned()]
    );
    let (file, chart) =
        pinned_values("https://aws.github.io/eks-charts aws-load-balancer-controller 1.13.2");
    assert_eq!(
        unknown_keys(file, &set_key_as_values("vpcID"), &chart),
        vec!["vpcID".to_owned()]
    );
    assert!(unknown_keys(file, &set_key_as_values("vpcId"), &chart).is_empty());
    // A key a chart reads but only comments counts for that chart alone.
    assert_eq!(
        unknown_keys(file, &set_key_as_values("additionalOutputs"), &chart),
        vec!["additionalOutputs".to_owned()]
    );
    let (fb_file, fb_chart) =
        pinned_values("https://aws.github.io/eks-charts aws-for-fluent-bit 0.2.0");
    assert!(unknown_keys(fb_file, &set_key_as_values("additionalOutputs"), &fb_chart).is_empty());
    assert_eq!(
        unknown_keys(
            fb_file,
            &set_key_as_values("cloudWatchLogs.autoCreateGroups"),
            &fb_chart
        ),
        vec!["cloudWatchLogs.autoCreateGroups".to_owned()]
    );
    assert!(unknown_keys(
        file,
        &set_key_as_values("podAnnotations.example\\.com/x"),
        &chart
    )
    .is_empty());
}

/// Karpenter may create, tag, change and delete only instance profiles that carry this
/// cluster's ownership tag (upstream's scoping), in both backends: an unconditioned grant
/// would let it delete any profile in the account.
#[test]
fn karpenter_changes_only_its_own_instance_profiles() {
    let mut checked = 0;
    for stack in reference() {
        let cluster = stack.eks_cluster.as_deref().unwrap_or_default();
        for backend in BACKENDS {
            for (role, policy) in stack.policies_named(backend, KARPENTER_POLICY) {
                for s in policy.statements.iter().filter(|s| s.allow) {
                    let mutating = s.actions.iter().any(|a| {
                        matches!(
                            a.as_str(),
                            "iam:CreateInstanceProfile"
                                | "iam:TagInstanceProfile"
                                | "iam:AddRoleToInstanceProfile"
                                | "iam:RemoveRoleFromInstanceProfile"
                                | "iam:DeleteInstanceProfile"
                        )
                    });
                    if !mutating {
                        continue;
                    }
                    let tagged = s.conditions.iter().any(|c| {
                        c.key
                            .ends_with(&format!("/kubernetes.io/cluster/{cluster}"))
                            && c.values.iter().any(|v| v == "owned")
                    });
                    assert!(
                        tagged,
                        "{} {backend:?} {role}: {:?} changes instance profiles not owned by the cluster",
                        stack.name, s.sid
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 6, "{checked}");
}

/// The ownership tag decides what the load balancer controller may modify and delete, so it
/// may not put that tag on a load balancer or target group it did not create: without a tag
/// condition, `AddTags` would let it take over (and then delete) any in the account.
#[test]
fn load_balancer_controller_cannot_claim_foreign_load_balancers() {
    let mut checked = 0;
    for stack in reference() {
        for backend in BACKENDS {
            for (role, policy) in stack.policies_named(backend, LBC_POLICY) {
                for resource in [
                    "arn:{partition}:elasticloadbalancing:{region}:{account}:loadbalancer/net/x/1",
                    "arn:{partition}:elasticloadbalancing:{region}:{account}:targetgroup/x/1",
                ] {
                    assert!(
                        !allows(policy, "elasticloadbalancing:AddTags", resource, &[]),
                        "{} {backend:?} {role}: AddTags on {resource} without a tag condition",
                        stack.name
                    );
                    checked += 1;
                }
                // The same resource spelling matches where tagging is meant to be free.
                assert!(
                    allows(
                        policy,
                        "elasticloadbalancing:AddTags",
                        "arn:{partition}:elasticloadbalancing:{region}:{account}:listener/net/x/1/2",
                        &[]
                    ),
                    "{} {backend:?} {role}: cannot tag its listeners",
                    stack.name
                );
            }
        }
    }
    assert!(checked >= 6, "{checked}");
}

/// The DCGM exporter preset sets only keys of its pinned chart, on GPU nodes only (EKS GPU
/// nodes, or HyperPod GPU instance types), tolerating their taint, its Service on port 9400, no
/// ServiceMonitor.
#[test]
fn dcgm_exporter_values_are_keys_of_the_pinned_chart() {
    use hyperforge::constructs::helm::{ChartSource, HelmRelease};
    use hyperforge::constructs::nodes::{GPU_PRESENT_LABEL, GPU_TAINT};
    let release = HelmRelease::dcgm_exporter();
    let ChartSource::Repository {
        repo,
        chart,
        version,
    } = &release.chart
    else {
        panic!("the DCGM exporter comes from a chart repository")
    };
    let (file, upstream) = pinned_values(&format!("{repo} {chart} {version}"));
    let ours: Yaml = serde_yaml::to_value(&release.values).unwrap();
    let unknown = unknown_keys(file, &ours, &upstream);
    assert!(unknown.is_empty(), "{file} does not have {unknown:?}");
    let v = &release.values;
    let terms = &v["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    assert_eq!(
        terms[0],
        serde_json::json!({"matchExpressions": [{"key": GPU_PRESENT_LABEL, "operator": "In", "values": ["true"]}]})
    );
    let hyperpod = &terms[1]["matchExpressions"][0];
    assert_eq!(hyperpod["key"], "node.kubernetes.io/instance-type");
    assert_eq!(hyperpod["operator"], "In");
    let types = hyperpod["values"].as_array().unwrap();
    assert!(
        types.contains(&serde_json::json!("ml.p6-b300.48xlarge")),
        "{types:?}"
    );
    assert!(types.iter().all(|t| t.as_str().unwrap().starts_with("ml.")));
    assert_eq!(terms.as_array().unwrap().len(), 2);
    assert!(v.get("nodeSelector").is_none());
    assert_eq!(
        v["tolerations"],
        serde_json::json!([{"key": GPU_TAINT, "operator": "Exists", "effect": "NoSchedule"}])
    );
    assert_eq!(v["service"]["port"], 9400);
    assert_eq!(upstream["service"]["port"], Yaml::from(9400));
    assert_eq!(v["serviceMonitor"]["enabled"], false);
}

/// The kube-state-metrics preset comes from the pinned prometheus-community chart, sets only
/// keys of its values, listens where the collector's `kube-state-metrics` job scrapes (the
/// chart's `service.port` 8080 is the container port, its pods labelled
/// `app.kubernetes.io/name: kube-state-metrics`), and runs on the nodes it is given: the EKS
/// references' system nodes, anywhere on HyperPod.
#[test]
fn kube_state_metrics_values_are_keys_of_the_pinned_chart() {
    use hyperforge::constructs::helm::{ChartSource, HelmRelease};
    use hyperforge::constructs::monitoring::{
        KUBE_STATE_METRICS_POD_LABEL, KUBE_STATE_METRICS_PORT,
    };
    let system = [("hyperforge.io/node-role".to_owned(), "system".to_owned())];
    let release = HelmRelease::kube_state_metrics(&system);
    let ChartSource::Repository {
        repo,
        chart,
        version,
    } = &release.chart
    else {
        panic!("kube-state-metrics comes from a chart repository")
    };
    let (file, upstream) = pinned_values(&format!("{repo} {chart} {version}"));
    let ours: Yaml = serde_yaml::to_value(&release.values).unwrap();
    let unknown = unknown_keys(file, &ours, &upstream);
    assert!(unknown.is_empty(), "{file} does not have {unknown:?}");
    assert_eq!(
        release.values,
        serde_json::json!({"nodeSelector": {"hyperforge.io/node-role": "system"}})
    );
    assert_eq!(
        upstream["service"]["port"],
        Yaml::from(u64::from(KUBE_STATE_METRICS_PORT))
    );
    assert_eq!(
        KUBE_STATE_METRICS_POD_LABEL,
        ("app.kubernetes.io/name", "kube-state-metrics")
    );
    assert_eq!(release.namespace, "kube-system");
    assert_eq!(
        HelmRelease::kube_state_metrics(&[]).values,
        serde_json::json!({})
    );
    // The references install it: on the system nodes on EKS, without a selector on HyperPod.
    // (The multi-node variant shows the serving path alone and has no operations stages.)
    for app in crate::reference::all()
        .into_iter()
        .chain(crate::reference::variants())
    {
        for stack in app
            .stacks()
            .iter()
            .filter(|s| !s.name().ends_with("multi-node"))
        {
            let hyperpod = stack.name().contains("hyperpod");
            let found = stack
                .stages()
                .iter()
                .find_map(|s| match &s.kind {
                    hyperforge::app::StageKind::Helm(r) if r.release == "kube-state-metrics" => {
                        Some(r)
                    }
                    _ => None,
                })
                .unwrap_or_else(|| panic!("{}: no kube-state-metrics", stack.name()));
            assert_eq!(
                found.values.get("nodeSelector").is_some(),
                !hyperpod,
                "{}",
                stack.name()
            );
        }
    }
}
