//! The format-neutral resource layer: what constructs expand into and what backends lower.
//!
//! A construct's `expand` adds [`Resource`]s through a [`Scope`] (which names them by construct
//! path); synthesis expands every construct of a stack once into a [`ResourceGraph`]; each
//! backend lowers the graph's resources through one exhaustive `match` over [`ResourceKind`].
//! The facts of a resource (a bucket's secure defaults, a role's trust and policies, a
//! security group's rules) are written here once; how a format spells them (Terraform's four
//! bucket resources, CloudFormation's inline egress rules) is the backend's business.
//!
//! References between resources are [`AttrRef`]s, resolved by the backends (`Ref`/`Fn::GetAtt`
//! or `${type.name.attr}`); mixed strings are [`Text`](crate::app::text::Text).

pub mod acknowledge;
mod compute;
mod eks;
mod fsx;
pub mod iam;
mod kinds;
pub mod kubernetes;
mod network;
pub(crate) mod operations;
pub mod plan;

pub use acknowledge::{AckScope, Acknowledgement, Rule};
pub use compute::*;
pub use eks::*;
pub use fsx::*;
pub use kinds::*;
pub use kubernetes::KubeObject;
pub use network::*;
pub use operations::*;

use crate::app::{logical_id, AttrRef, Node, Stack, StageId, Tags};
use crate::diagnostics::{Code, Diagnostics};
use std::collections::BTreeMap;

/// One resource: what it is, where it sits and what it waits for.
#[derive(Clone, Debug, PartialEq)]
pub struct Resource {
    /// The construct path (`Network/Vpc`): the source of logical ids and Terraform names.
    pub path: String,
    /// The stage deploying it.
    pub stage: StageId,
    /// The resource itself.
    pub kind: ResourceKind,
    /// Paths of resources of the same stage it must be created after, beyond its references.
    pub depends_on: Vec<String>,
    /// Scanner and policy rules that do not apply to it, each with its reason (see
    /// [`Resource::acknowledgements`] for the ones its kind implies).
    pub acknowledged: Vec<Acknowledgement>,
}

/// The expander a construct writes its resources through: paths below the construct's id,
/// the stage, the stack for lookups and its effective tags.
#[derive(Debug)]
pub struct Scope<'a> {
    stack: &'a Stack,
    tags: &'a Tags,
    stage: StageId,
    prefix: String,
    resources: &'a mut Vec<Resource>,
}

impl<'a> Scope<'a> {
    /// The stack being expanded.
    pub fn stack(&self) -> &'a Stack {
        self.stack
    }

    /// The stack's effective tags ([`Stack::effective_tags`]: the app's, the stack's,
    /// `hyperforge:stack`), for what a construct writes that no backend tags on its own: tags
    /// that services apply to what they launch (Karpenter's `EC2NodeClass`).
    pub fn tags(&self) -> &'a Tags {
        self.tags
    }

    /// The path of child `id` (`Network/Vpc`).
    pub fn path(&self, id: &str) -> String {
        format!("{}/{id}", self.prefix)
    }

    /// Adds `kind` as child `id` of the construct; returns it for dependencies and
    /// suppressions.
    pub fn add(&mut self, id: &str, kind: impl Into<ResourceKind>) -> &mut Resource {
        let path = self.path(id);
        self.resources.push(Resource {
            path,
            stage: self.stage,
            kind: kind.into(),
            depends_on: Vec::new(),
            acknowledged: Vec::new(),
        });
        let last = self.resources.len() - 1;
        &mut self.resources[last]
    }

    /// The placeholder for `value` in a Kubernetes object of this construct's stage, recorded
    /// as child `id` ([`DeployValue`]): replaced by the deployed value when the stage is applied.
    /// `prefix` starts the placeholder, for a field whose schema wants a value's own prefix
    /// (`ws-` for a Prometheus workspace id); the whole placeholder is replaced.
    pub fn deploy_value(&mut self, id: &str, value: AttrRef, prefix: &str) -> String {
        let placeholder = format!("{prefix}{}", deploy_placeholder(&value));
        self.add(
            id,
            DeployValue {
                value: DeployedValue::Output(value),
                placeholder: placeholder.clone(),
            },
        );
        placeholder
    }

    /// The placeholder for deploy-time input `input` in a Kubernetes object of this
    /// construct's stage, recorded as child `id` ([`DeployValue`]): the input's default (so
    /// the file as written holds a value its schema accepts), replaced by the input's value when
    /// the stage is applied.
    pub fn deploy_input(&mut self, id: &str, input: StackInput) -> String {
        let placeholder = input.default.clone().unwrap_or_else(|| input.name.clone());
        self.add(
            id,
            DeployValue {
                value: DeployedValue::Input(input),
                placeholder: placeholder.clone(),
            },
        );
        placeholder
    }
}

impl Scope<'_> {
    /// Adds an operational step to the construct's stage, as child `id`
    /// ([`plan::Step`]): what a deployment does beyond creating the resources.
    pub fn step(&mut self, id: &str, step: plan::Step) {
        self.add(id, step);
    }
}

impl Resource {
    /// Makes the resource wait for the resources at `paths` (same stage).
    pub fn after(&mut self, paths: impl IntoIterator<Item = String>) -> &mut Self {
        self.depends_on.extend(paths);
        self
    }

    /// Acknowledges a scanner rule that does not apply to this resource. The reason is
    /// mandatory: it is written beside the suppression in every tool's native form, for the
    /// security reviewer.
    pub fn acknowledge(&mut self, rule: Rule, reason: impl Into<String>) -> &mut Self {
        self.acknowledged.push(Acknowledgement {
            rule,
            reason: reason.into(),
            scope: None,
        });
        self
    }

    /// Acknowledges a scanner rule for one part of this resource (one finding of the rule).
    pub fn acknowledge_part(
        &mut self,
        rule: Rule,
        scope: AckScope,
        reason: impl Into<String>,
    ) -> &mut Self {
        self.acknowledged.push(Acknowledgement {
            rule,
            reason: reason.into(),
            scope: Some(scope),
        });
        self
    }

    /// Every acknowledgement of the resource: the ones declared on it, then the ones its kind
    /// implies (a role's inline policies, a bucket without access logs).
    pub fn acknowledgements(&self) -> Vec<Acknowledgement> {
        let mut out = self.acknowledged.clone();
        let mut add = |rule: Rule, reason: &str| {
            if !out.iter().any(|a| a.rule == rule) {
                out.push(Acknowledgement {
                    rule,
                    reason: reason.to_owned(),
                    scope: None,
                });
            }
        };
        match &self.kind {
            ResourceKind::Role(role) => {
                if !role.inline.is_empty() {
                    add(Rule::IAM_INLINE_POLICY, acknowledge::INLINE_POLICY_REASON);
                }
                out.extend(role_acknowledgements(role));
            }
            ResourceKind::RolePolicy(policy) => {
                out.extend(wildcard_acknowledgements(0, &policy.document));
            }
            ResourceKind::Bucket(bucket) => match &bucket.access_logs {
                AccessLogs::Off(reason) => add(Rule::S3_ACCESS_LOGGING, reason),
                AccessLogs::Receives { .. } => {
                    add(Rule::S3_ACCESS_LOGGING, acknowledge::LOG_BUCKET_REASON);
                    add(
                        Rule::S3_WITHOUT_KMS,
                        acknowledge::LOG_BUCKET_ENCRYPTION_REASON,
                    );
                }
                AccessLogs::To { .. } => {}
            },
            _ => {}
        }
        out
    }
}

/// The acknowledgements of the wildcards of policy `policy`'s statements that carry a
/// reason.
fn wildcard_acknowledgements(policy: usize, doc: &iam::PolicyDocument) -> Vec<Acknowledgement> {
    doc.statements
        .iter()
        .enumerate()
        .filter(|(_, s)| s.has_wildcard())
        .filter_map(|(statement, s)| {
            Some(Acknowledgement {
                rule: Rule::IAM_WILDCARD,
                reason: s.wildcard_reason.clone()?,
                scope: Some(AckScope::Statement { policy, statement }),
            })
        })
        .collect()
}

/// A role's acknowledgements that cover one part of it: each statement's wildcards that
/// carry a reason, each AWS managed policy hyperforge attaches for a documented reason.
fn role_acknowledgements(role: &kinds::Role) -> Vec<Acknowledgement> {
    let wildcards = role
        .inline
        .iter()
        .enumerate()
        .flat_map(|(policy, (_, doc))| wildcard_acknowledgements(policy, doc));
    let managed = role.managed.iter().filter_map(|name| {
        Some(Acknowledgement {
            rule: Rule::AWS_MANAGED_POLICY,
            reason: acknowledge::aws_managed_policy_reason(name)?.to_owned(),
            scope: Some(AckScope::ManagedPolicy(name.clone())),
        })
    });
    wildcards.chain(managed).collect()
}

/// Every resource of one stack, in expansion order (constructs in the order added).
#[derive(Clone, Debug, Default)]
pub struct ResourceGraph {
    /// The resources.
    pub resources: Vec<Resource>,
}

impl ResourceGraph {
    /// Expands `node` of `stack` with `expand`, below the construct's id and in its stage;
    /// `tags` are the stack's effective tags.
    pub fn expand_node(
        &mut self,
        stack: &Stack,
        tags: &Tags,
        node: &Node,
        expand: impl FnOnce(&mut Scope<'_>),
    ) {
        let mut scope = Scope {
            stack,
            tags,
            stage: node.stage,
            prefix: node.id.clone(),
            resources: &mut self.resources,
        };
        expand(&mut scope);
    }

    /// Makes every EKS add-on that needs nodes ([`EksAddon::needs_nodes`]) wait for the
    /// HyperPod cluster that brings its cluster's nodes, the same way for every format: the
    /// add-on is moved into the HyperPod cluster's stage when it sat in an earlier one, placed
    /// right after the cluster, and depends on it. A HyperPod cluster takes hours to create
    /// (deep health checks), longer than an add-on waits to become active. Clusters with a
    /// managed node group in the add-on's stage or earlier are left alone: their nodes come
    /// within that wait.
    pub fn order_after_nodes(&mut self) {
        // (add-on, HyperPod cluster) by index.
        let mut waits = Vec::new();
        for (i, r) in self.resources.iter().enumerate() {
            let ResourceKind::EksAddon(addon) = &r.kind else {
                continue;
            };
            let cluster = addon.cluster.path.as_str();
            let has_node_group = self.resources.iter().any(|g| {
                g.stage <= r.stage
                    && matches!(&g.kind, ResourceKind::NodeGroup(n) if n.cluster.path == cluster)
            });
            if !addon.needs_nodes || has_node_group {
                continue;
            }
            let hyperpod = self.resources.iter().position(|h| {
                matches!(&h.kind, ResourceKind::HyperPodCluster(c) if c.eks_cluster.path == cluster)
            });
            if let Some(h) = hyperpod {
                waits.push((i, h));
            }
        }
        let mut moving = BTreeMap::new();
        for &(i, h) in &waits {
            let (stage, path) = (self.resources[h].stage, self.resources[h].path.clone());
            let addon = &mut self.resources[i];
            if !addon.depends_on.contains(&path) {
                addon.depends_on.push(path);
            }
            if stage > addon.stage {
                addon.stage = stage;
                moving.insert(i, h);
            }
        }
        if moving.is_empty() {
            return;
        }
        // Each moved add-on goes right after its HyperPod cluster, in their original order.
        let mut after: BTreeMap<usize, Vec<Resource>> = BTreeMap::new();
        let mut kept = Vec::with_capacity(self.resources.len());
        for (i, r) in std::mem::take(&mut self.resources).into_iter().enumerate() {
            match moving.get(&i) {
                Some(&h) => after.entry(h).or_default().push(r),
                None => kept.push((i, r)),
            }
        }
        for (i, r) in kept {
            self.resources.push(r);
            self.resources.extend(after.remove(&i).unwrap_or_default());
        }
    }

    /// The resources that exist outside the description, by path: references to them read
    /// the values given.
    pub fn existing(&self) -> BTreeMap<String, Existing> {
        self.resources
            .iter()
            .filter_map(|r| match &r.kind {
                ResourceKind::Existing(e) => Some((r.path.clone(), e.clone())),
                _ => None,
            })
            .collect()
    }

    /// Reports resources in a stage of the wrong kind: a Kubernetes object outside a
    /// Kubernetes stage, an AWS resource in one (`HF0014`), once per construct.
    pub fn check_stages(&self, stack: &Stack, ds: &mut Diagnostics) {
        let mut reported = std::collections::BTreeSet::new();
        for r in &self.resources {
            let Some(stage) = stack.stage(r.stage) else {
                continue;
            };
            let kubernetes_stage = matches!(stage.kind, crate::app::StageKind::Kubernetes);
            let kubernetes_resource = matches!(
                r.kind,
                ResourceKind::KubeObject(_) | ResourceKind::DeployValue(_)
            );
            // A step belongs to whatever stage its construct is in.
            if kubernetes_stage == kubernetes_resource || matches!(r.kind, ResourceKind::Step(_)) {
                continue;
            }
            let construct = r.path.split('/').next().unwrap_or(&r.path);
            if !reported.insert(construct.to_owned()) {
                continue;
            }
            let (makes, wants) = if kubernetes_resource {
                ("Kubernetes objects", "a Kubernetes stage")
            } else {
                ("AWS resources", "a CloudFormation stage")
            };
            ds.report(
                Code::ConstructInWrongStage,
                stack.display_path(construct),
                format!(
                    "`{construct}` creates {makes} but is placed in stage `{}`",
                    stage.name
                ),
                format!("add it to {wants}"),
            );
        }
    }

    /// Checks every reference the graph's resources make: it must name a resource of the kind
    /// it claims. A mismatch is an internal error (HF0902): a handle and an expansion cannot
    /// drift apart silently.
    /// References to another stack are reported by the stack's structural checks.
    pub fn check_references(&self, stack: &Stack, ds: &mut Diagnostics) {
        let by_path: BTreeMap<&str, &Resource> = self
            .resources
            .iter()
            .map(|r| (r.path.as_str(), r))
            .collect();
        for r in &self.resources {
            for target in r.kind.references() {
                if target.stack != stack.name() {
                    continue;
                }
                if let Some(Resource {
                    kind: ResourceKind::Existing(e),
                    ..
                }) = by_path.get(target.path.as_str())
                {
                    if e.kind == target.kind && e.value(target.attr).is_none() {
                        ds.report(
                            Code::ExistingResourceIncomplete,
                            stack.display_path(&r.path),
                            format!(
                                "reads the {} of the existing `{}`, which its import does not give",
                                target.attr.as_str(),
                                target.construct_id()
                            ),
                            "give the value when importing it (see the import's builder methods)",
                        );
                        continue;
                    }
                }
                let found = by_path.get(target.path.as_str()).map(|t| t.kind.ref_kind());
                if let Some(Resource {
                    kind: ResourceKind::RawResource(raw),
                    ..
                }) = by_path.get(target.path.as_str())
                {
                    if raw.handle != Some(target.kind) {
                        ds.report(
                            Code::InvalidRawResource,
                            stack.display_path(&r.path),
                            format!(
                                "refers to the raw resource `{}` as a {:?}, but it is declared {}",
                                target.path,
                                target.kind,
                                match raw.handle {
                                    Some(kind) => format!("a {kind:?}"),
                                    None => "as no kind".to_owned(),
                                }
                            ),
                            format!(
                                "declare it `RawResource::referable_as(Kind::{:?})` (its types must be that kind's), or refer to it as what it is",
                                target.kind
                            ),
                        );
                    }
                    continue;
                }
                if found != Some(Some(target.kind)) {
                    let what = match found {
                        None => "which no construct creates".to_owned(),
                        Some(kind) => format!("which is a {kind:?}"),
                    };
                    ds.report(
                        Code::InternalError,
                        stack.display_path(&r.path),
                        format!(
                            "refers to {:?} `{}` ({}), {what}",
                            target.kind,
                            target.path,
                            logical_id(&target.path)
                        ),
                        "this is a bug in hyperforge: a construct's handle names a resource its expansion lacks; please report it",
                    );
                }
            }
        }
    }
}
