//! Model weights close to the GPUs: a [`ModelStore`] (an S3 bucket holding checkpoints keyed by
//! model and revision, its access-log bucket, and the Pod Identity roles that write and read it)
//! and a [`WeightsStaging`] (the Kubernetes Job that copies `model@revision` from the Hugging
//! Face Hub into the store once).
//!
//! Layout: a checkpoint lives under `<org>/<name>/<revision>/` (the repository's files at that
//! prefix's root), and its staging manifest (every file with its size and checksum) beside it at
//! `<org>/<name>/<revision>.manifest.json`, where no loader reading the prefix sees it. A new
//! revision is a new prefix: it is staged by a Job of its own, and the servers reading it change
//! their model path, so a Deployment rolls and never mixes old and new files.
//!
//! Who may do what (each a Pod Identity role, scoped to the prefixes of the models it handles):
//! the stager (`model-weights/weights-stager`) lists, reads and writes under the prefix of every
//! model a [`WeightsStaging`] of the stack copies into this store; each EKS vLLM Deployment
//! serving from the store reads its own model's prefix. On HyperPod the inference operator's
//! S3 CSI driver reads the bucket (granted by [`super::InferenceOperator`]). Every policy also
//! requires the bucket to belong to the stack's account (`s3:ResourceAccount`), so a bucket of
//! the same name in another account is never written to.

use super::eks::EksClusterHandle;
use super::vllm::{is_commit_sha, is_image_digest, is_image_name, SecretKeyRef};
use super::{Construct, Context, Facts, Placements, WeightsStagingFacts};
use crate::app::text::{Pseudo, Text};
use crate::app::{kind, AttrRef, Ref, Stack};
use crate::diagnostics::{Code, Diagnostics};
use crate::resources::iam::{pod_identity_trust, PolicyDocument, Statement};
use crate::resources::plan::Step;
use crate::resources::{
    AccessLogs, Bucket, BucketLifecycle, KubeObject, PodIdentityAssociation, Role, Rule, Scope,
    StackOutput,
};
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    Namespace, PodSpec, ResourceRequirements, SecretKeySelector, ServiceAccount, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;

/// The namespace the staging Jobs run in.
pub const STAGING_NAMESPACE: &str = "model-weights";

/// The service account of the staging Jobs (bound to the store's stager role).
pub const STAGER_SERVICE_ACCOUNT: &str = "weights-stager";

/// The image the staging Job runs by default: the official Python image (Debian slim), from
/// Amazon ECR Public's mirror of Docker Hub's official images (no Docker Hub rate limit),
/// pinned by digest.
pub const STAGER_IMAGE: &str = "public.ecr.aws/docker/library/python:3.12-slim-bookworm";

/// The digest [`STAGER_IMAGE`] is pinned to (the runbook's staging step checks that it
/// resolves before the Job is applied; `WeightsStaging::image` runs another).
pub const STAGER_IMAGE_DIGEST: &str =
    "sha256:54c85f3c47607a77f32adec749d3c81d1348bf25833671f512b26a9b6d778cb3";

/// The stager program, run by the Job's container (`python3 /stager/stage_weights.py`).
pub const STAGER_SCRIPT: &str = include_str!("assets/stage_weights.py");

/// The stager's dependencies (boto3 and what it needs), pinned with their hashes: the Job's
/// init container installs exactly these wheels (`pip install --require-hashes`).
pub const STAGER_REQUIREMENTS: &str = include_str!("assets/stage_weights.requirements.txt");

/// Parallel file copies of a staging Job, by default.
pub const DEFAULT_WORKERS: u32 = 8;

/// The declared range of parallel copies: each holds at most two 64 MiB parts in memory.
pub const WORKERS: super::stack_file::Ints = super::stack_file::Ints::new(1, 64);

/// Days an unfinished multipart upload stays before S3 aborts it (a stopped staging run's
/// How long copying `bytes` from the Hub takes on the nodes of `claims` a Job with
/// `node_selector` may run on (their labels hold it), and what sets that time: the Hub's rate,
/// or the sustained bandwidth of the slowest such node whose type is known.
pub fn staging_estimate(
    bytes: u64,
    node_selector: &BTreeMap<String, String>,
    claims: &[super::CapacityClaim],
) -> Option<(u64, String)> {
    let mut slowest: Option<(&str, f64)> = None;
    for claim in claims {
        if !node_selector
            .iter()
            .all(|(k, v)| claim.node_labels.get(k) == Some(v))
        {
            continue;
        }
        let name = claim
            .instance_type
            .strip_prefix("ml.")
            .unwrap_or(&claim.instance_type);
        if let Some(rate) = crate::catalog::loading::sustained_network_bytes_per_sec(name) {
            if slowest.is_none_or(|(_, r)| rate < r) {
                slowest = Some((name, rate));
            }
        }
    }
    let hub = crate::catalog::loading::HUB_BYTES_PER_SEC;
    let secs = crate::catalog::loading::staging_secs_on(bytes, slowest.map(|s| s.1));
    let limit = match slowest {
        Some((node, rate)) if rate < hub => format!(
            "the {node} node's {:.2} Gb/s sustained network bandwidth",
            rate * 8.0 / 1e9
        ),
        _ => format!("the Hub's {} MB/s", hub / 1e6),
    };
    Some((secs, limit))
}

/// parts are billed until then).
const ABORT_INCOMPLETE_UPLOAD_DAYS: u32 = 3;

/// Days a replaced or deleted checkpoint file stays recoverable.
const NONCURRENT_VERSION_DAYS: u32 = 30;

/// Days access logs are kept.
const ACCESS_LOG_DAYS: u32 = 365;

/// The name of a model store's bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BucketName {
    /// This name. S3 names are global and permanent: include the account id and region
    /// (`my-model-weights-111122223333-us-west-2`).
    Named(String),
    /// `<stack>-<store id>-<account id>-<region>`, lowercase, with the account and region the
    /// stack is deployed to, resolved by CloudFormation and Terraform when it is deployed
    /// (`AWS::AccountId`, `AWS::Region`). It is unique wherever the stack goes, and the template
    /// is the same in every account and region (every stack instance of a fleet's StackSet).
    /// The `<stack>-<store id>` part is shortened with a stable hash when the longest region's
    /// name would take the whole past S3's 63 characters.
    PerAccountAndRegion,
}

impl From<&str> for BucketName {
    fn from(name: &str) -> Self {
        BucketName::Named(name.to_owned())
    }
}

impl From<String> for BucketName {
    fn from(name: String) -> Self {
        BucketName::Named(name)
    }
}

/// The account id a name resolved at deploy time is checked with: every account id has 12
/// digits.
const ANY_ACCOUNT_ID: &str = "000000000000";

impl BucketName {
    /// The name as templates spell it, for a store `id` of stack `stack`.
    pub fn text(&self, stack: &str, id: &str) -> Text {
        match self {
            BucketName::Named(name) => Text::lit(name.clone()),
            BucketName::PerAccountAndRegion => {
                // The same head in every region: the budget is the longest region's.
                let longest = crate::catalog::regions::KNOWN_REGIONS
                    .iter()
                    .map(|r| r.len())
                    .max()
                    .unwrap_or(0);
                let budget = 63 - ANY_ACCOUNT_ID.len() - longest - 2;
                let head =
                    crate::app::fit_name(&format!("{stack}-{id}").to_ascii_lowercase(), budget);
                Text::lit(format!("{head}-"))
                    .push_pseudo(Pseudo::AccountId)
                    .push_lit("-")
                    .push_pseudo(Pseudo::Region)
            }
        }
    }

    /// The name in `region`, any account's id standing for the one deployed to: what S3's
    /// naming rules are checked on.
    fn example(&self, stack: &str, id: &str, region: &str) -> String {
        self.text(stack, id).resolved(region, ANY_ACCOUNT_ID)
    }
}

/// A bucket of model checkpoints, keyed by model and revision.
#[derive(Clone, Debug)]
pub struct ModelStore {
    id: String,
    bucket_name: BucketName,
    cluster: EksClusterHandle,
    /// The staging Jobs' namespace and service account.
    stager: (String, String),
}

/// Handle to a store: what servers and staging Jobs need to find it.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelStoreHandle {
    /// The store's construct id.
    pub id: String,
    /// The bucket's name as templates spell it (the account and region as deploy-time
    /// values, for [`BucketName::PerAccountAndRegion`]).
    pub bucket_name: Text,
    /// The bucket.
    pub bucket: Ref<kind::Bucket>,
    /// The namespace the staging Jobs run in.
    pub stager_namespace: String,
    /// The service account the staging Jobs run as (the store's Pod Identity association
    /// gives it write access).
    pub stager_service_account: String,
}

impl ModelStoreHandle {
    /// The key prefix of `model_id` at `revision` (`moonshotai/Kimi-K3/<sha>/`).
    pub fn prefix(model_id: &str, revision: &str) -> String {
        format!("{model_id}/{revision}/")
    }

    /// The `s3://` URL of `model_id` at `revision`, as a Kubernetes object holds it
    /// ([`ModelStoreHandle::kubernetes_bucket_name`]).
    pub fn url(&self, model_id: &str, revision: &str) -> String {
        format!(
            "s3://{}/{}",
            self.kubernetes_bucket_name(),
            ModelStoreHandle::prefix(model_id, revision)
        )
    }

    /// The bucket's name in a Kubernetes object: the name, or, when the deployment resolves
    /// it, the placeholder of the store's bucket-name output, which the construct writing the
    /// object records with [`ModelStoreHandle::record_bucket_name`].
    pub fn kubernetes_bucket_name(&self) -> String {
        self.bucket_name
            .as_literal()
            .unwrap_or_else(|| crate::resources::deploy_placeholder(&self.bucket.name()))
    }

    /// Records the placeholder [`ModelStoreHandle::kubernetes_bucket_name`] gives, when it
    /// gives one, in `scope` (a construct of the Kubernetes stage holding it): the stage is
    /// then applied with the deployed name in its place.
    pub fn record_bucket_name(&self, scope: &mut Scope<'_>) {
        if self.bucket_name.as_literal().is_none() {
            scope.deploy_value(&format!("{}BucketName", self.id), self.bucket.name(), "");
        }
    }
}

impl ModelStore {
    /// A store in bucket `bucket_name` (a name, `"my-model-weights-111122223333-us-west-2"`:
    /// S3 names are global and permanent, so include the account id and region; or
    /// [`BucketName::PerAccountAndRegion`]), whose readers and writers are pods of `cluster`.
    pub fn new(
        id: impl Into<String>,
        bucket_name: impl Into<BucketName>,
        cluster: &EksClusterHandle,
    ) -> Self {
        ModelStore {
            id: id.into(),
            bucket_name: bucket_name.into(),
            cluster: cluster.clone(),
            stager: (
                STAGING_NAMESPACE.to_owned(),
                STAGER_SERVICE_ACCOUNT.to_owned(),
            ),
        }
    }

    /// The namespace and service account the staging Jobs run as (default
    /// `model-weights/weights-stager`): EKS allows one Pod Identity association per service
    /// account, so a second stack staging into its own store on a shared cluster names its
    /// own (`HF0016` otherwise).
    pub fn stager(
        mut self,
        namespace: impl Into<String>,
        service_account: impl Into<String>,
    ) -> Self {
        self.stager = (namespace.into(), service_account.into());
        self
    }

    /// The bucket's name.
    pub fn bucket_name(&self) -> &BucketName {
        &self.bucket_name
    }

    fn validate(&self, stack: &Stack, path: &str, ds: &mut Diagnostics) {
        for (field, name) in [
            ("stager.namespace", &self.stager.0),
            ("stager.service_account", &self.stager.1),
        ] {
            if !super::vllm::is_dns_label(name) {
                ds.report_field(
                    Code::InvalidModelStore,
                    path,
                    field,
                    format!("`{name}` is not a Kubernetes name"),
                    "use 1-63 lowercase letters, digits and `-`, starting and ending with a letter or digit",
                );
            }
        }
        let name = self
            .bucket_name
            .example(stack.name(), &self.id, stack.region());
        if !is_bucket_name(&name) {
            ds.report_field(
                Code::InvalidModelStore,
                path,
                "bucket_name",
                format!("`{name}` is not an S3 bucket name"),
                "use 3-63 lowercase letters, digits, `-` and `.`, starting and ending with a letter or digit, e.g. `kimi-k3-weights-111122223333-us-west-2`",
            );
        }
    }
}

/// Whether `name` names a bucket that may exist: 3-63 lowercase letters, digits, `.` and
/// `-`, a letter or digit at each end, no `..`, not an IP address (S3's rules for every
/// bucket; an import or a bucket named by the operator's configuration is checked with these).
pub fn is_existing_bucket_name(name: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    (3..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-')
        && edge(name.chars().next())
        && edge(name.chars().last())
        && !name.contains("..")
        && name.parse::<std::net::Ipv4Addr>().is_err()
}

/// Whether `name` may name a bucket created now: [`is_existing_bucket_name`], plus the rules
/// S3 added since (no `.-` or `-.`, none of its reserved prefixes and suffixes).
pub fn is_bucket_name(name: &str) -> bool {
    is_existing_bucket_name(name)
        && !name.contains(".-")
        && !name.contains("-.")
        && !["xn--", "sthree-", "amzn-s3-demo-"]
            .iter()
            .any(|p| name.starts_with(p))
        && !["-s3alias", "--ol-s3", "--x-s3", "--table-s3", ".mrap"]
            .iter()
            .any(|s| name.ends_with(s))
}

/// `arn:<partition>:s3:::<bucket>` and `rest`.
pub(crate) fn bucket_arn(bucket: &Text, rest: &str) -> Text {
    Text::lit("arn:")
        .push_pseudo(Pseudo::Partition)
        .push_lit(":s3:::")
        .push_text(bucket.clone())
        .push_lit(rest)
}

/// The bucket must be this account's.
fn own_account(st: Statement) -> Statement {
    st.condition(
        "StringEquals",
        "s3:ResourceAccount",
        vec![Text::default().push_pseudo(Pseudo::AccountId)],
    )
}

/// Read (and, when `write`, write) access to the model prefixes `prefixes` of `bucket`.
pub fn prefix_policy(bucket: &Text, prefixes: &[String], write: bool) -> PolicyDocument {
    let list = own_account(
        Statement::allow(["s3:ListBucket"])
            .sid("ListModelPrefixes")
            .resource(bucket_arn(bucket, "")),
    )
    .condition(
        "StringLike",
        "s3:prefix",
        prefixes
            .iter()
            .map(|p| Text::lit(format!("{p}*")))
            .collect(),
    );
    let mut actions = vec!["s3:GetObject"];
    if write {
        actions.extend([
            "s3:PutObject",
            "s3:AbortMultipartUpload",
            "s3:ListMultipartUploadParts",
        ]);
    }
    let mut objects = Statement::allow(actions)
        .sid(if write {
            "StageModelObjects"
        } else {
            "ReadModelObjects"
        })
        .wildcards_because(
            "The objects under the model's own prefix, named prefix by prefix: the weights \
             files and their revisions are known only when they are staged; requests are \
             limited to buckets of the stack's account.",
        );
    for p in prefixes {
        objects = objects.resource(bucket_arn(bucket, &format!("/{p}*")));
    }
    PolicyDocument::new()
        .statement(list)
        .statement(own_account(objects))
}

/// The model prefix (`<org>/<name>/`, every revision) of `model_id`.
fn model_prefix(model_id: &str) -> String {
    format!("{model_id}/")
}

impl Construct for ModelStore {
    type Handle = ModelStoreHandle;
    const KIND: &'static str = "model_store";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> ModelStoreHandle {
        ModelStoreHandle {
            id: self.id.clone(),
            bucket_name: self.bucket_name.text(stack, &self.id),
            bucket: Ref::new(stack, format!("{}/Bucket", self.id)),
            stager_namespace: self.stager.0.clone(),
            stager_service_account: self.stager.1.clone(),
        }
    }

    fn references(&self) -> Vec<AttrRef> {
        vec![self.cluster.cluster.name()]
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        ModelStore::validate(self, cx.stack, cx.path, ds);
    }

    /// The log bucket, the model bucket, its name as an output, and the Pod Identity roles of
    /// the stack's staging Jobs and EKS servers that use this store.
    fn expand(&self, scope: &mut Scope<'_>) {
        let stack = scope.stack();
        let handle = self.handle(stack.name());
        let logs: Ref<kind::Bucket> = Ref::new(stack.name(), format!("{}/LogBucket", self.id));
        scope.add(
            "LogBucket",
            Bucket {
                name: None,
                access_logs: AccessLogs::Receives {
                    sources: vec![handle.bucket.arn()],
                },
                deleted_with_objects: None,
                lifecycle: Some(BucketLifecycle {
                    abort_incomplete_multipart_days: 1,
                    noncurrent_version_days: Some(1),
                    expire_days: Some(ACCESS_LOG_DAYS),
                }),
            },
        );
        scope.add(
            "Bucket",
            Bucket {
                name: Some(handle.bucket_name.clone()),
                access_logs: AccessLogs::To {
                    bucket: logs.name(),
                    prefix: "weights/".to_owned(),
                },
                deleted_with_objects: None,
                lifecycle: Some(BucketLifecycle {
                    abort_incomplete_multipart_days: ABORT_INCOMPLETE_UPLOAD_DAYS,
                    noncurrent_version_days: Some(NONCURRENT_VERSION_DAYS),
                    expire_days: None,
                }),
            },
        );
        scope.add(
            "BucketNameOutput",
            StackOutput {
                description: "Bucket of the staged model weights".to_owned(),
                value: handle.bucket.name(),
            },
        );
        scope.add(
            "LogBucketNameOutput",
            StackOutput {
                description: "Bucket of the model bucket's access logs".to_owned(),
                value: logs.name(),
            },
        );
        // The model bucket first: emptying it stops its access logging, so no log record of
        // the emptying lands in the log bucket after that one is emptied.
        scope.step(
            "EmptyBucket",
            Step::EmptyVersionedBucket {
                bucket: handle.bucket.name(),
                holds: "the staged model weights".to_owned(),
            },
        );
        scope.step(
            "EmptyLogBucket",
            Step::EmptyVersionedBucket {
                bucket: logs.name(),
                holds: "the model bucket's access logs".to_owned(),
            },
        );
        let (staged, readers) = users(stack, &self.id);
        if !staged.is_empty() {
            self.pod_role(
                scope,
                "Stager",
                "Stages model weights from the Hugging Face Hub into the model store (EKS Pod Identity)",
                (&self.stager.0, &self.stager.1),
                prefix_policy(&handle.bucket_name, &staged, true),
            );
        }
        for (i, (namespace, account, prefixes)) in readers.iter().enumerate() {
            self.pod_role(
                scope,
                &format!("Reader{}", i + 1),
                &format!("Reads the weights {namespace}/{account} serves from the model store (EKS Pod Identity)"),
                (namespace, account),
                prefix_policy(&handle.bucket_name, prefixes, false),
            );
        }
    }
}

impl ModelStore {
    /// A role named `id` for the pods of `namespace`/`account`, with `policy`, and its Pod
    /// Identity association.
    fn pod_role(
        &self,
        scope: &mut Scope<'_>,
        id: &str,
        description: &str,
        (namespace, account): (&str, &str),
        policy: PolicyDocument,
    ) {
        let role: Ref<kind::Role> = Ref::new(scope.stack().name(), format!("{}/{id}Role", self.id));
        scope.add(
            &format!("{id}Role"),
            Role {
                description: description.to_owned(),
                trust: pod_identity_trust(),
                managed: Vec::new(),
                inline: vec![("model-weights".to_owned(), policy)],
                name: None,
            },
        );
        scope.add(
            &format!("{id}PodIdentityAssociation"),
            PodIdentityAssociation {
                cluster: self.cluster.cluster.name(),
                namespace: namespace.to_owned(),
                service_account: account.to_owned(),
                role: role.arn(),
            },
        );
    }
}

/// The model prefixes the stack's staging Jobs write into store `store`, and the EKS servers
/// reading from it (namespace, service account, their model prefixes), in construct order.
#[allow(clippy::type_complexity)]
fn users(stack: &Stack, store: &str) -> (Vec<String>, Vec<(String, String, Vec<String>)>) {
    let placements = Placements::new(stack);
    let mut staged: Vec<String> = Vec::new();
    let mut readers: Vec<(String, String, Vec<String>)> = Vec::new();
    for placed in placements.all() {
        let facts = placed.facts();
        for s in &facts.weight_stagings {
            let p = model_prefix(&s.model_id);
            if s.store == store && !staged.contains(&p) {
                staged.push(p);
            }
        }
        for m in &facts.served_models {
            let Some(w) = m.server.staged_weights() else {
                continue;
            };
            if w.id != store || m.hyperpod {
                continue;
            }
            let p = model_prefix(m.server.model_id());
            match readers
                .iter_mut()
                .find(|(ns, sa, _)| ns == m.namespace && sa == m.object_name)
            {
                Some((_, _, prefixes)) if !prefixes.contains(&p) => prefixes.push(p),
                Some(_) => {}
                None => readers.push((m.namespace.to_owned(), m.object_name.to_owned(), vec![p])),
            }
        }
    }
    (staged, readers)
}

/// A Kubernetes Job copying `model@revision` from the Hugging Face Hub into a [`ModelStore`]
/// once: it lists the repository's files at the revision, skips every file already staged with
/// the same size and content id, streams the rest into S3 in parallel (multipart, each file's
/// checksum verified against the Hub's before it is committed), and writes the staging
/// manifest when every file is in place. Re-running it copies nothing. Its name carries the
/// revision, so a new revision is a new Job.
#[derive(Clone, Debug)]
pub struct WeightsStaging {
    id: String,
    store: ModelStoreHandle,
    model_id: String,
    revision: String,
    image: String,
    image_digest: Option<String>,
    workers: u32,
    hf_token: Option<SecretKeyRef>,
    node_selector: BTreeMap<String, String>,
    weight_bytes: Option<u64>,
}

/// Handle to a staging Job.
#[derive(Clone, Debug)]
pub struct WeightsStagingHandle {
    /// The Job's name.
    pub job: String,
    /// Its namespace.
    pub namespace: String,
}

impl WeightsStaging {
    /// Stages `model_id` at commit `revision` into `store`.
    pub fn new(
        id: impl Into<String>,
        store: &ModelStoreHandle,
        model_id: impl Into<String>,
        revision: impl Into<String>,
    ) -> Self {
        WeightsStaging {
            id: id.into(),
            store: store.clone(),
            model_id: model_id.into(),
            revision: revision.into(),
            image: STAGER_IMAGE.to_owned(),
            image_digest: Some(STAGER_IMAGE_DIGEST.to_owned()),
            workers: DEFAULT_WORKERS,
            hf_token: None,
            node_selector: BTreeMap::new(),
            weight_bytes: None,
        }
    }

    /// Runs another Python 3.11+ image (pinned by `digest`); it needs `pip`, as the init
    /// container installs the pinned boto3 into it.
    pub fn image(mut self, image: impl Into<String>, digest: impl Into<String>) -> Self {
        self.image = image.into();
        self.image_digest = Some(digest.into());
        self
    }

    /// Parallel file copies (default 8).
    pub fn workers(mut self, workers: u32) -> Self {
        self.workers = workers;
        self
    }

    /// Reads the Hugging Face token from Secret `name`, key `key` in the staging namespace
    /// (optional: without it the Hub is read anonymously, at lower rate limits; gated models
    /// need it).
    pub fn hf_token_secret(mut self, name: impl Into<String>, key: impl Into<String>) -> Self {
        self.hf_token = Some(SecretKeyRef {
            name: name.into(),
            key: key.into(),
        });
        self
    }

    /// Runs the Job on nodes labelled `key=value` (the system nodes:
    /// `hyperforge.io/node-role=system`), so the copy never waits for, or competes with, a
    /// GPU node.
    pub fn node_selector(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.node_selector.insert(key.into(), value.into());
        self
    }

    /// The checkpoint's size, when the model is not in the catalog (for the time estimates).
    pub fn weight_bytes(mut self, bytes: u64) -> Self {
        self.weight_bytes = Some(bytes);
        self
    }

    /// The image reference the Job runs (`<image>@<digest>`).
    pub fn image_reference(&self) -> String {
        match &self.image_digest {
            Some(d) => format!("{}@{d}", self.image),
            None => self.image.clone(),
        }
    }

    /// The model staged.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// The revision staged.
    pub fn revision(&self) -> &str {
        &self.revision
    }

    /// The checkpoint's size: given, or the catalog model's.
    pub fn weights(&self) -> Option<u64> {
        self.weight_bytes.or_else(|| {
            crate::catalog::model(&self.model_id).map(crate::catalog::Model::weight_bytes)
        })
    }

    /// How long the copy takes, seconds, when the size is known, and what sets that time
    /// ([`staging_estimate`] over the capacity of `stack`).
    pub fn staging_estimate(&self, stack: &crate::app::Stack) -> Option<(u64, String)> {
        let claims: Vec<super::CapacityClaim> = super::Placements::new(stack)
            .all()
            .filter(|p| p.construct.kind() != <Self as Construct>::KIND)
            .flat_map(|p| p.facts().capacity)
            .collect();
        staging_estimate(self.weights()?, &self.node_selector, &claims)
    }

    /// How long the copy may run before Kubernetes stops it (`activeDeadlineSeconds`): three
    /// times the estimate ([`WeightsStaging::staging_estimate`]), at least two hours, 48 hours
    /// when the size is unknown.
    pub fn deadline_secs(&self, stack: &crate::app::Stack) -> u64 {
        self.staging_estimate(stack)
            .map_or(48 * 3600, |(secs, _)| secs.saturating_mul(3).max(2 * 3600))
    }

    /// The Job's name: `stage-<model name>-<first 12 digits of the revision>`, at most 63
    /// characters, lowercase.
    pub fn job_name(&self) -> String {
        let name = self.model_id.rsplit('/').next().unwrap_or(&self.model_id);
        let mut slug: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        slug.truncate(63 - "stage--".len() - 12);
        let slug = slug.trim_matches('-');
        let rev: String = self.revision.chars().take(12).collect();
        format!("stage-{slug}-{rev}")
    }

    fn validate(&self, path: &str, ds: &mut Diagnostics) {
        if !super::vllm::is_hf_model_id(&self.model_id) {
            ds.report_field(
                Code::InvalidModelId,
                path,
                "model",
                format!("`{}` is not a Hugging Face model id", self.model_id),
                "model ids are `organization/name` as on the Hugging Face Hub, each part letters, digits, `_`, `.` and `-`",
            );
        }
        if !is_commit_sha(&self.revision) {
            ds.report_field(
                Code::InvalidModelRevision,
                path,
                "revision",
                format!("model revision `{}` is not a commit SHA", self.revision),
                "give the 40-hex-digit commit you reviewed; a staged copy is keyed by it, so branches and tags (which move) cannot be staged",
            );
        }
        if !is_image_name(&self.image) || !self.image_digest.as_deref().is_some_and(is_image_digest)
        {
            ds.report_field(
                Code::InvalidWeightsStaging,
                path,
                "image",
                format!("`{}` is not an image pinned by digest", self.image),
                "give an image reference and its `sha256:` digest; the Job runs it with the bucket's write access",
            );
        }
        if !WORKERS.contains(i64::from(self.workers)) {
            ds.report_field(
                Code::InvalidWeightsStaging,
                path,
                "workers",
                format!("{} parallel copies requested", self.workers),
                format!("use {} parallel copies", WORKERS.describe()),
            );
        }
        if let Some(secret) = &self.hf_token {
            secret.validate(path, "hf_token_secret", ds);
        }
        for (key, value) in &self.node_selector {
            if !super::vllm::is_label_key(key) || !super::vllm::is_label_value(value) {
                ds.report_field(
                    Code::InvalidKubernetesName,
                    path,
                    "node_selector",
                    format!("`{key}={value}` is not a node label"),
                    "label keys are `[prefix/]name`, values at most 63 letters, digits, `-`, `_` and `.`",
                );
            }
        }
        if let Some(bytes) = self.weight_bytes {
            if !super::vllm::WEIGHT_BYTES.contains_u64(bytes) {
                ds.report_field(
                    Code::InvalidWeightBytes,
                    path,
                    "weight_bytes",
                    format!("weights of {bytes} bytes are out of range"),
                    "give the checkpoint's size in bytes, from 1 to 1 PiB (2^50)",
                );
            }
        }
    }

    /// The Job's objects: the namespace, the service account, the program and its pinned
    /// requirements, and the Job.
    fn objects(&self, stack: &Stack) -> (Namespace, ServiceAccount, ConfigMap, Job) {
        let labels = BTreeMap::from([
            (
                "app.kubernetes.io/managed-by".to_owned(),
                "hyperforge".to_owned(),
            ),
            (
                "app.kubernetes.io/component".to_owned(),
                "weights-stager".to_owned(),
            ),
            (
                "app.kubernetes.io/part-of".to_owned(),
                stack.name().to_owned(),
            ),
        ]);
        let meta = |name: &str, namespaced: bool| ObjectMeta {
            name: Some(name.to_owned()),
            namespace: namespaced.then(|| self.store.stager_namespace.clone()),
            labels: Some(labels.clone()),
            ..Default::default()
        };
        let job_name = self.job_name();
        let config = ConfigMap {
            metadata: meta(&job_name, true),
            data: Some(BTreeMap::from([
                ("stage_weights.py".to_owned(), STAGER_SCRIPT.to_owned()),
                (
                    "requirements.txt".to_owned(),
                    STAGER_REQUIREMENTS.to_owned(),
                ),
            ])),
            ..Default::default()
        };
        let image = self.image_reference();
        let mount = |name: &str, path: &str, read_only: bool| VolumeMount {
            name: name.to_owned(),
            mount_path: path.to_owned(),
            read_only: Some(read_only),
            ..Default::default()
        };
        let locked_down = crate::resources::kubernetes::locked_down_container();
        let env = |name: &str, value: &str| EnvVar {
            name: name.to_owned(),
            value: Some(value.to_owned()),
            value_from: None,
        };
        let q = |s: &str| Quantity(s.to_owned());
        let install = Container {
            name: "install-boto3".to_owned(),
            image: Some(image.clone()),
            image_pull_policy: Some("IfNotPresent".to_owned()),
            command: Some(
                [
                    "python3",
                    "-m",
                    "pip",
                    "install",
                    "--no-cache-dir",
                    "--disable-pip-version-check",
                    "--require-hashes",
                    "--no-deps",
                    "--only-binary=:all:",
                    "--target",
                    "/deps",
                    "--requirement",
                    "/stager/requirements.txt",
                ]
                .map(str::to_owned)
                .to_vec(),
            ),
            env: Some(vec![env("HOME", "/tmp")]),
            resources: Some(ResourceRequirements {
                requests: Some(BTreeMap::from([
                    ("cpu".to_owned(), q("250m")),
                    ("memory".to_owned(), q("256Mi")),
                ])),
                limits: Some(BTreeMap::from([("memory".to_owned(), q("512Mi"))])),
                claims: None,
            }),
            security_context: Some(locked_down.clone()),
            volume_mounts: Some(vec![
                mount("deps", "/deps", false),
                mount("stager", "/stager", true),
                mount("tmp", "/tmp", false),
            ]),
            ..Default::default()
        };
        let mut stage_env = vec![
            env("PYTHONPATH", "/deps"),
            env("PYTHONUNBUFFERED", "1"),
            env("HOME", "/tmp"),
        ];
        if let Some(secret) = &self.hf_token {
            stage_env.push(EnvVar {
                name: "HF_TOKEN".to_owned(),
                value: None,
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name: secret.name.clone(),
                        key: secret.key.clone(),
                        optional: Some(true),
                    }),
                    ..Default::default()
                }),
            });
        }
        let stage = Container {
            name: "stage".to_owned(),
            image: Some(image),
            image_pull_policy: Some("IfNotPresent".to_owned()),
            command: Some(vec![
                "python3".to_owned(),
                "/stager/stage_weights.py".to_owned(),
                "--repo".to_owned(),
                self.model_id.clone(),
                "--revision".to_owned(),
                self.revision.clone(),
                "--bucket".to_owned(),
                self.store.kubernetes_bucket_name(),
                "--prefix".to_owned(),
                ModelStoreHandle::prefix(&self.model_id, &self.revision),
                "--region".to_owned(),
                stack.region().to_owned(),
                "--workers".to_owned(),
                self.workers.to_string(),
            ]),
            env: Some(stage_env),
            resources: Some(ResourceRequirements {
                // Streaming holds at most two 64 MiB parts per worker; hashing and TLS take
                // about a core per GB/s.
                requests: Some(BTreeMap::from([
                    ("cpu".to_owned(), q("2")),
                    (
                        "memory".to_owned(),
                        q(&format!("{}Mi", 512 + 160 * self.workers)),
                    ),
                ])),
                limits: Some(BTreeMap::from([(
                    "memory".to_owned(),
                    q(&format!("{}Mi", 1024 + 256 * self.workers)),
                )])),
                claims: None,
            }),
            security_context: Some(locked_down),
            volume_mounts: Some(vec![
                mount("deps", "/deps", true),
                mount("stager", "/stager", true),
                mount("tmp", "/tmp", false),
            ]),
            ..Default::default()
        };
        let empty = |name: &str, limit: &str| Volume {
            name: name.to_owned(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: None,
                size_limit: Some(q(limit)),
            }),
            ..Default::default()
        };
        let pod = PodSpec {
            service_account_name: Some(self.store.stager_service_account.clone()),
            automount_service_account_token: Some(false),
            restart_policy: Some("Never".to_owned()),
            // On SIGTERM the stager aborts its open uploads; parts in flight finish first.
            termination_grace_period_seconds: Some(120),
            node_selector: (!self.node_selector.is_empty()).then(|| self.node_selector.clone()),
            security_context: Some(crate::resources::kubernetes::restricted_pod()),
            init_containers: Some(vec![install]),
            containers: vec![stage],
            volumes: Some(vec![
                empty("deps", "256Mi"),
                Volume {
                    name: "stager".to_owned(),
                    config_map: Some(ConfigMapVolumeSource {
                        name: job_name.clone(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                empty("tmp", "1Gi"),
            ]),
            ..Default::default()
        };
        let job = Job {
            metadata: meta(&job_name, true),
            spec: Some(JobSpec {
                backoff_limit: Some(3),
                active_deadline_seconds: Some(
                    i64::try_from(self.deadline_secs(stack)).unwrap_or(i64::MAX),
                ),
                template: crate::resources::kubernetes::pod_template(&labels, pod),
                ..Default::default()
            }),
            ..Default::default()
        };
        let namespace = Namespace {
            metadata: meta(&self.store.stager_namespace, false),
            ..Default::default()
        };
        let account = ServiceAccount {
            metadata: meta(&self.store.stager_service_account, true),
            automount_service_account_token: Some(false),
            ..Default::default()
        };
        (namespace, account, config, job)
    }
}

impl Construct for WeightsStaging {
    type Handle = WeightsStagingHandle;
    const KIND: &'static str = "weights_staging";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, _stack: &str) -> WeightsStagingHandle {
        WeightsStagingHandle {
            job: self.job_name(),
            namespace: self.store.stager_namespace.clone(),
        }
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        WeightsStaging::validate(self, cx.path, ds);
    }

    fn facts(&self, _cx: &Context<'_>) -> Facts<'_> {
        Facts {
            weight_stagings: vec![WeightsStagingFacts {
                store: self.store.id.clone(),
                bucket: self.store.bucket_name.clone(),
                bucket_output: self.store.bucket.name(),
                model_id: self.model_id.clone(),
                revision: self.revision.clone(),
                job: self.job_name(),
                namespace: self.store.stager_namespace.clone(),
                weight_bytes: self.weights(),
                node_selector: self.node_selector.clone(),
                hf_token: self.hf_token.clone(),
                image: self.image_reference(),
            }],
            ..Facts::default()
        }
    }

    /// The Namespace, ServiceAccount, ConfigMap and Job, in apply order.
    fn expand(&self, scope: &mut Scope<'_>) {
        let (namespace, account, config, job) = self.objects(scope.stack());
        // The revision is checked before the Job downloads it, and before any server of a
        // later stage reads the copy.
        super::vllm::verify_pins(
            scope,
            &self.model_id,
            Some(&self.revision),
            Some(self.image_reference()),
        );
        if let Some(token) = &self.hf_token {
            token.declare_hf_token_source(scope, &self.store.stager_namespace);
        }
        self.store.record_bucket_name(scope);
        scope.add_object(KubeObject::new(&namespace));
        scope.add_object(KubeObject::new(&account));
        scope.add_object(KubeObject::new(&config));
        let job = scope.add_object(KubeObject::new(&job));
        if self.hf_token.is_some() {
            job.acknowledge(
                Rule::K8S_SECRETS_AS_ENVIRONMENT,
                "the stager reads the Hugging Face token from HF_TOKEN, from a Secret, never a literal",
            );
        }
    }
}

// --- Stack-file form -------------------------------------------------------------------------

stack_file_shape! {
    pub mod store_fields = <ModelStore as Construct>::KIND, "A bucket of model checkpoints keyed by model and revision, with its access-log bucket and the Pod Identity roles of the staging Jobs and EKS servers that use it." {
        ID: req "model_store", Ty::Str, "The construct id.";
        BUCKET_NAME: opt "bucket_name", Ty::Str, "The bucket's name: global, so include the account id and region (`kimi-k3-weights-111122223333-us-west-2`). Without it the name is `<stack>-<model_store>-<account id>-<region>`, lowercase, with the account and region the stack is deployed to.";
        CLUSTER: req "cluster", Ty::Ref(Want::Eks), "The EKS cluster whose pods stage and read the weights.";
        STAGER: opt "stager", Ty::Obj(&stager_fields::SHAPE), "The staging Jobs' namespace and service account (default `model-weights/weights-stager`); a second stack on a shared cluster names its own.";
    }
}

stack_file_shape! {
    pub mod stager_fields = "Stager", "The namespace and service account the staging Jobs run as." {
        NAMESPACE: req "namespace", Ty::Str, "The namespace.";
        SERVICE_ACCOUNT: req "service_account", Ty::Str, "The service account.";
    }
}

impl super::stack_file::StackFileConstruct for ModelStore {
    const SHAPE: &'static super::stack_file::Shape = &store_fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        let name = r
            .text(&store_fields::BUCKET_NAME)
            .map_or(BucketName::PerAccountAndRegion, BucketName::Named);
        let eks = super::stack_file::required(r.eks(&store_fields::CLUSTER));
        let stager = super::stack_file::object(r, &store_fields::STAGER, |o| {
            let namespace = o.text(&stager_fields::NAMESPACE);
            let account = o.text(&stager_fields::SERVICE_ACCOUNT);
            Some((namespace?, account?))
        })
        .flatten();
        let store = ModelStore::new(id, name, &eks?);
        Some(match stager {
            Some((namespace, account)) => store.stager(namespace, account),
            None => store,
        })
    }
}

stack_file_shape! {
    pub mod staging_fields = <WeightsStaging as Construct>::KIND, "A Kubernetes Job copying a model at one revision from the Hugging Face Hub into a model store, once (re-running copies nothing)." {
        ID: req "weights_staging", Ty::Str, "The construct id.";
        STORE: req "store", Ty::Ref(Want::ModelStore), "The model store.";
        MODEL: req "model", Ty::Str, "The Hugging Face model id (`organization/name`).";
        REVISION: req "revision", Ty::Str, "The commit to stage: 40 lowercase hex digits, the same the servers pin.";
        WORKERS: opt "workers", Ty::U32(super::WORKERS), default "8", "Parallel file copies.";
        HF_TOKEN_SECRET: opt "hf_token_secret", Ty::Obj(&crate::constructs::vllm::secret_key_ref_fields::SHAPE), "The Secret (in namespace `model-weights`) holding the Hugging Face token; read if present.";
        NODE_SELECTOR: opt "node_selector", Ty::StrMap, "Node labels the Job runs on (`hyperforge.io/node-role: system`).";
        WEIGHT_BYTES: opt "weight_bytes", Ty::U64(crate::constructs::vllm::WEIGHT_BYTES), "The checkpoint's size, for models not in the catalog.";
        IMAGE: opt "image", Ty::Str, "Another Python 3.11+ image with pip (default: python:3.12-slim from ECR Public).";
        IMAGE_DIGEST: opt "image_digest", Ty::Str, "The digest of `image` (required with it).";
    }
}

impl super::stack_file::StackFileConstruct for WeightsStaging {
    const SHAPE: &'static super::stack_file::Shape = &staging_fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        use staging_fields as f;
        let store = super::stack_file::required(r.model_store(&f::STORE));
        let model = r.text(&f::MODEL);
        let revision = r.text(&f::REVISION);
        let workers = r.u32(&f::WORKERS);
        let token = super::stack_file::object(r, &f::HF_TOKEN_SECRET, |h| {
            use super::vllm::secret_key_ref_fields as k;
            let name = h.text(&k::NAME);
            let key = h.text(&k::KEY);
            Some((name?, key?))
        });
        let selector = r.str_map(&f::NODE_SELECTOR);
        let bytes = r.u64(&f::WEIGHT_BYTES);
        let image = r.text(&f::IMAGE);
        let digest = r.text(&f::IMAGE_DIGEST);
        let mut s = WeightsStaging::new(id, &store?, model?, revision?);
        if let Some(w) = workers {
            s = s.workers(w);
        }
        if let Some((n, k)) = token.flatten() {
            s = s.hf_token_secret(n, k);
        }
        for (k, v) in selector {
            s = s.node_selector(k, v);
        }
        if let Some(b) = bytes {
            s = s.weight_bytes(b);
        }
        match (image, digest) {
            (Some(i), Some(d)) => s = s.image(i, d),
            (Some(i), None) => {
                s.image = i;
                s.image_digest = None;
            }
            (None, Some(d)) => s.image_digest = Some(d),
            (None, None) => {}
        }
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name the deployment resolves fits S3's rules for every stack name hyperforge accepts
    /// (up to 100 characters), every store id (up to 64) and every region, and its template
    /// is the same in every region (the budget is the longest region's, not the stack's).
    #[test]
    fn names_per_account_and_region_fit_every_stack_and_region() {
        let name = BucketName::PerAccountAndRegion;
        for stack_len in [1, 20, 27, 28, 63, 100] {
            let stack = format!("K{}", "a".repeat(stack_len - 1));
            for id in ["Weights", &format!("W{}", "x".repeat(63))] {
                let text = name.text(&stack, id);
                for region in crate::catalog::regions::KNOWN_REGIONS {
                    let example = name.example(&stack, id, region);
                    assert!(is_bucket_name(&example), "{example}");
                }
                assert_eq!(text, name.text(&stack, id), "deterministic");
            }
        }
        // Short enough: kept whole, lowercase.
        assert_eq!(
            name.example("Kimi-K3-eks", "Weights", "us-west-2"),
            "kimi-k3-eks-weights-000000000000-us-west-2"
        );
        // Two long stacks that differ past the cut keep different names.
        let a = name.example(&format!("{}a", "s".repeat(60)), "Weights", "us-west-2");
        let b = name.example(&format!("{}b", "s".repeat(60)), "Weights", "us-west-2");
        assert_ne!(a, b);
        // A given name is taken as it is.
        assert_eq!(
            BucketName::from("my-weights").text("s", "Weights"),
            Text::lit("my-weights")
        );
    }
}
