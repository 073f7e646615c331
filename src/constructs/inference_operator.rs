//! The SageMaker HyperPod Inference Operator, installed as the EKS add-on
//! `amazon-sagemaker-hyperpod-inference`, with the add-ons it needs (cert-manager,
//! metrics-server, the Mountpoint for S3 and FSx for Lustre CSI drivers), its IAM roles (trusted through the
//! cluster's OIDC provider, named as the add-on requires) and the bucket for the TLS
//! certificates it generates.

use super::eks::EksClusterHandle;
use super::hyperpod::HyperPodHandle;
use super::{Construct, Context};
use crate::app::text::Text;
use crate::app::{kind, AttrRef, Ref};
use crate::diagnostics::{Code, Diagnostics};
use crate::resources::iam::{
    irsa_trust_statement, load_balancer_controller_policy, PolicyDocument, PrincipalKind, Statement,
};
use crate::resources::plan::Step;
use crate::resources::{
    AccessLogs, AddonConfiguration as Config, Bucket, EksAddon, Role, Rule, Scope, StackOutput,
};

/// Namespace of the operator's service accounts.
pub const OPERATOR_NAMESPACE: &str = "hyperpod-inference-system";

/// The inference operator builder.
#[derive(Clone, Debug)]
pub struct InferenceOperator {
    id: String,
    eks: EksClusterHandle,
    hyperpod: HyperPodHandle,
    vpc: Ref<kind::Vpc>,
    model_buckets: Vec<String>,
}

/// Handles to the operator's resources.
#[derive(Clone, Debug)]
pub struct InferenceOperatorHandle {
    /// The bucket receiving generated TLS certificates.
    pub tls_bucket: Ref<kind::Bucket>,
    /// The operator's execution role.
    pub execution_role: Ref<kind::Role>,
}

impl InferenceOperator {
    /// The operator for `hyperpod`'s cluster, orchestrated by `eks`, its load balancers in `vpc`.
    pub fn new(
        id: impl Into<String>,
        eks: &EksClusterHandle,
        hyperpod: &HyperPodHandle,
        vpc: &Ref<kind::Vpc>,
    ) -> Self {
        InferenceOperator {
            id: id.into(),
            eks: eks.clone(),
            hyperpod: hyperpod.clone(),
            vpc: vpc.clone(),
            model_buckets: Vec::new(),
        }
    }

    /// Lets the S3 CSI driver read models from bucket `name` (for `modelSourceType: s3`); without
    /// any, it reads no bucket (see [`InferenceOperator::s3_csi_driver_policy`]). `name` is a
    /// bucket name (`HF0209` otherwise), not an ARN or a pattern.
    pub fn model_bucket(mut self, name: impl Into<String>) -> Self {
        self.model_buckets.push(name.into());
        self
    }

    /// The EKS cluster.
    pub fn eks(&self) -> &EksClusterHandle {
        &self.eks
    }

    /// The HyperPod cluster.
    pub fn hyperpod(&self) -> &HyperPodHandle {
        &self.hyperpod
    }

    /// The VPC of the load balancers.
    pub fn vpc(&self) -> &Ref<kind::Vpc> {
        &self.vpc
    }

    /// Buckets the S3 CSI driver may read.
    pub fn model_buckets(&self) -> &[String] {
        &self.model_buckets
    }

    /// The Mountpoint for S3 CSI driver's permissions: list the bucket, read its objects, which
    /// is all a mount of model weights needs (AWS's add-on templates also grant writes for
    /// general-purpose mounts; served models are only read), on the named model buckets only.
    /// With none named the driver reads no bucket: it mounts with one set of credentials for
    /// every PersistentVolume of the cluster, so a broader grant would let any namespace mount
    /// any bucket the role can read (AWS's add-on templates grant every bucket).
    ///
    /// The buckets of the model stores the stack's HyperPod endpoints serve from are read too:
    /// the operator fetches a staged copy through this driver.
    pub fn s3_csi_driver_policy(&self, stack: &crate::app::Stack) -> Option<PolicyDocument> {
        let mut buckets: Vec<Text> = self
            .model_buckets
            .iter()
            .map(|b| Text::lit(b.clone()))
            .collect();
        for placed in super::Placements::new(stack).all() {
            for served in placed.facts().served_models {
                if let Some(store) = served.server.staged_weights().filter(|_| served.hyperpod) {
                    if !buckets.contains(&store.bucket_name) {
                        buckets.push(store.bucket_name.clone());
                    }
                }
            }
        }
        if buckets.is_empty() {
            return None;
        }
        let bucket = |name: &Text, rest: &str| super::weights::bucket_arn(name, rest);
        let list = Statement::allow(["s3:ListBucket"]).sid("ListModelBuckets");
        let read = Statement::allow(["s3:GetObject"])
            .sid("ReadModels")
            .wildcards_because(
                "The objects of the model buckets the endpoints serve from, named one by one; \
                 the model files are staged at deploy time and the action only reads.",
            );
        let (list, read) = buckets.iter().fold((list, read), |(list, read), b| {
            (list.resource(bucket(b, "")), read.resource(bucket(b, "/*")))
        });
        Some(PolicyDocument::new().statement(list).statement(read))
    }

    /// The name of the operator's execution role: the add-on requires the prefix
    /// `SageMakerHyperPodInference`; the cluster name and region keep it unique per account.
    pub fn execution_role_name(&self, region: &str) -> String {
        // IAM role names: at most 64 characters, unique in the account (all regions).
        crate::app::fit_name(
            &format!("SageMakerHyperPodInference-{}-{region}", self.hyperpod.name),
            64,
        )
    }

    /// A role assumed by service account `subject` through the cluster's OIDC provider. A named
    /// role (the execution role) is also trusted by SageMaker.
    fn irsa_role(
        &self,
        subject: &str,
        description: &str,
        managed: &[&str],
        inline: Option<(&str, PolicyDocument)>,
        name: Option<String>,
    ) -> Role {
        let mut trust = PolicyDocument::new().statement(irsa_trust_statement(
            self.eks.oidc_provider.arn(),
            self.eks.cluster.oidc_issuer_url(),
            subject,
        ));
        if name.is_some() {
            trust = trust.statement(
                Statement::allow(["sts:AssumeRole"])
                    .principal(PrincipalKind::Service, "sagemaker.amazonaws.com"),
            );
        }
        Role {
            description: description.to_owned(),
            trust,
            managed: managed.iter().map(|m| (*m).to_owned()).collect(),
            inline: inline
                .into_iter()
                .map(|(n, doc)| (n.to_owned(), doc))
                .collect(),
            name,
        }
    }

    /// An add-on of the operator's cluster.
    fn addon(&self, name: &str) -> EksAddon {
        EksAddon {
            cluster: self.eks.cluster.name(),
            name: name.to_owned(),
            version: None,
            service_account_role: None,
            configuration: None,
            // The operator's dependencies run Deployments.
            needs_nodes: true,
        }
    }

    pub(crate) fn references(&self) -> Vec<AttrRef> {
        vec![
            self.eks.cluster.name(),
            self.eks.cluster.oidc_issuer_url(),
            self.eks.oidc_provider.arn(),
            self.hyperpod.cluster.arn(),
            self.vpc.id(),
        ]
    }
}

impl Construct for InferenceOperator {
    type Handle = InferenceOperatorHandle;
    const KIND: &'static str = "inference_operator";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> InferenceOperatorHandle {
        InferenceOperatorHandle {
            tls_bucket: Ref::new(stack, format!("{}/TlsBucket", self.id)),
            execution_role: Ref::new(stack, format!("{}/ExecutionRole", self.id)),
        }
    }

    fn references(&self) -> Vec<AttrRef> {
        InferenceOperator::references(self)
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        for name in &self.model_buckets {
            if !super::weights::is_existing_bucket_name(name) {
                ds.report_field(
                    Code::InvalidModelBucketName,
                    cx.path,
                    "model_buckets",
                    format!("`{name}` is not an S3 bucket name"),
                    "give the bucket's name (`my-model-weights`), not an ARN, a wildcard or a path",
                );
            }
        }
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        let stack = scope.stack();
        let handle = self.handle(stack.name());
        let role =
            |id: &str| -> Ref<kind::Role> { Ref::new(stack.name(), format!("{}/{id}", self.id)) };
        let ns = OPERATOR_NAMESPACE;
        scope.add(
            "TlsBucket",
            Bucket {
                name: None,
                access_logs: AccessLogs::Off("Receives the TLS certificates the inference operator generates; the operator is its only writer"),
                deleted_with_objects: Some("the operator writes the certificates and writes them again when it is reinstalled; nothing else keeps them"),
                lifecycle: None,
            },
        );
        scope.add(
            "TlsBucketNameOutput",
            StackOutput {
                description: "Bucket of the inference operator's TLS certificates (empty it before deleting the stack)".to_owned(),
                value: handle.tls_bucket.name(),
            },
        );
        scope.step(
            "EmptyTlsBucket",
            Step::EmptyVersionedBucket {
                bucket: handle.tls_bucket.name(),
                holds: "the TLS certificates the inference operator wrote".to_owned(),
            },
        );
        scope.add(
            "ExecutionRole",
            self.irsa_role(
                &format!("system:serviceaccount:{ns}:hyperpod-inference-controller-manager"),
                "Execution role of the HyperPod inference operator",
                &["AmazonSageMakerHyperPodInferenceAccess"],
                Some((
                    "tls-certificates",
                    tls_certificates_policy(&handle.tls_bucket),
                )),
                Some(self.execution_role_name(stack.region())),
            ),
        );
        scope.add(
            "KedaRole",
            self.irsa_role(
                &format!("system:serviceaccount:{ns}:keda-operator"),
                "Lets KEDA read the metrics that scale inference endpoints",
                &[],
                Some(("read-metrics", keda_metrics_policy())),
                None,
            ),
        );
        scope.add(
            "GatedModelRole",
            self.irsa_role(
                "system:serviceaccount:*:hyperpod-inference-service-account*",
                "Lets endpoint pods download gated JumpStart models",
                &["AmazonSageMakerHyperPodGatedModelAccess"],
                None,
                None,
            ),
        );
        scope
            .add(
                "LoadBalancerControllerRole",
                self.irsa_role(
                    &format!("system:serviceaccount:{ns}:aws-load-balancer-controller"),
                    "AWS Load Balancer Controller of the inference operator",
                    &[],
                    Some((
                        "load-balancer-controller",
                        load_balancer_controller_policy(),
                    )),
                    None,
                ),
            )
            .acknowledge(
                Rule::IAM_WRITE_WITHOUT_CONSTRAINTS,
                super::controllers::LOAD_BALANCER_CONTROLLER_WRITE_REASON,
            );
        scope.add(
            "S3CsiDriverRole",
            self.irsa_role(
                "system:serviceaccount:kube-system:s3-csi-driver-sa",
                "Mountpoint for Amazon S3 CSI driver: mounts model buckets into endpoint pods",
                &[],
                self.s3_csi_driver_policy(stack).map(|p| ("read-models", p)),
                None,
            ),
        );
        // The add-ons' pods run on the HyperPod cluster's nodes: each waits for the cluster
        // (`ResourceGraph::order_after_nodes`), the same way in every format.
        let dependencies = [
            "CertManagerAddon",
            "MetricsServerAddon",
            "S3CsiDriverAddon",
            "FsxCsiDriverAddon",
        ];
        scope.add(dependencies[0], self.addon("cert-manager"));
        scope.add(dependencies[1], self.addon("metrics-server"));
        scope.add(
            dependencies[2],
            EksAddon {
                service_account_role: Some(role("S3CsiDriverRole").arn()),
                ..self.addon("aws-mountpoint-s3-csi-driver")
            },
        );
        // AWS's installer of the inference add-on (sagemaker-hyperpod-cli, inference-operator
        // migration/helm_to_addon.sh) makes sure the FSx CSI driver exists, as the operator's
        // Helm chart did (`fsx.enabled: true`, no role): endpoints with `modelSourceType: fsx`
        // mount a file system through it. Mounting existing file systems (static
        // provisioning) needs no AWS permissions, so it gets no role.
        scope.add(dependencies[3], self.addon("aws-fsx-csi-driver"));
        let configuration = Config::object([
            ("executionRoleArn", Config::Ref(handle.execution_role.arn())),
            (
                "tlsCertificateS3Bucket",
                Config::Ref(handle.tls_bucket.name()),
            ),
            (
                "hyperpodClusterArn",
                Config::Ref(self.hyperpod.cluster.arn()),
            ),
            (
                "jumpstartGatedModelDownloadRoleArn",
                Config::Ref(role("GatedModelRole").arn()),
            ),
            (
                "alb",
                Config::object([
                    ("enabled", Config::Bool(true)),
                    (
                        "serviceAccount",
                        Config::object([
                            ("create", Config::Bool(true)),
                            (
                                "roleArn",
                                Config::Ref(role("LoadBalancerControllerRole").arn()),
                            ),
                        ]),
                    ),
                ]),
            ),
            (
                "keda",
                Config::object([
                    ("enabled", Config::Bool(true)),
                    (
                        "auth",
                        Config::object([(
                            "aws",
                            Config::object([(
                                "irsa",
                                Config::object([
                                    ("enabled", Config::Bool(true)),
                                    ("roleArn", Config::Ref(role("KedaRole").arn())),
                                ]),
                            )]),
                        )]),
                    ),
                ]),
            ),
        ]);
        let after = dependencies.map(|id| scope.path(id));
        // It waits for the add-ons above, and so for the nodes (its configuration names the
        // HyperPod cluster as well).
        scope
            .add(
                "Addon",
                EksAddon {
                    configuration: Some(configuration),
                    needs_nodes: false,
                    ..self.addon("amazon-sagemaker-hyperpod-inference")
                },
            )
            .after(after);
    }
}

/// The operator's access to its TLS certificate bucket and to tag the certificates it imports.
pub fn tls_certificates_policy(tls_bucket: &Ref<kind::Bucket>) -> PolicyDocument {
    PolicyDocument::new()
        .statement(
            Statement::allow(["s3:ListBucket"])
                .sid("ListCertificates")
                .resource(Text::attr(tls_bucket.arn())),
        )
        // The operator deletes certificates it replaces or no longer needs (AWS's add-on
        // migration grants it, Sid TLSBucketDeleteObjectsPermission).
        .statement(
            Statement::allow([
                "s3:DeleteObject",
                "s3:GetObject",
                "s3:PutObject",
                "s3:PutObjectTagging",
            ])
            .sid("WriteCertificates")
            .resource(Text::attr(tls_bucket.arn()).push_lit("/*"))
            .wildcards_because(
                "The objects of the operator's own TLS bucket, which holds only the \
                 certificates the operator writes under names it chooses.",
            ),
        )
        .statement(
            Statement::allow(["acm:AddTagsToCertificate"])
                .sid("TagCertificates")
                .resource(Text::arn("acm", true, true, Text::lit("certificate/*")))
                .wildcards_because(
                    "The operator imports its certificates at run time, so their ids are \
                     unknown when the policy is written; the action only adds tags.",
                ),
        )
}

/// KEDA's read access to the metrics that scale endpoints (CloudWatch and Amazon Managed
/// Prometheus).
pub fn keda_metrics_policy() -> PolicyDocument {
    PolicyDocument::new()
        .statement(
            Statement::allow([
                "cloudwatch:GetMetricData",
                "cloudwatch:GetMetricStatistics",
                "cloudwatch:ListMetrics",
            ])
            .sid("ReadCloudWatchMetrics")
            .resource("*")
            .wildcards_because(crate::resources::iam::NO_RESOURCE_LEVEL_PERMISSIONS),
        )
        .statement(
            Statement::allow(["aps:QueryMetrics"])
                .sid("QueryPrometheus")
                .resource(Text::arn("aps", true, true, Text::lit("workspace/*")))
                .wildcards_because(super::controllers::WORKSPACE_QUERY_REASON),
        )
}

// --- Stack-file form -------------------------------------------------------------------------

stack_file_shape! {
    pub mod fields = <InferenceOperator as Construct>::KIND, "The HyperPod inference operator (EKS add-on) and its IAM role and TLS bucket." {
        ID: req "inference_operator", Ty::Str, "The construct id.";
        EKS: req "eks", Ty::Ref(Want::Eks), "The EKS cluster.";
        HYPERPOD: req "hyperpod", Ty::Ref(Want::HyperPod), "The HyperPod cluster.";
        VPC: req "vpc", Ty::Ref(Want::Vpc), "The VPC of the load balancers.";
        MODEL_BUCKETS: opt "model_buckets", Ty::StrList, "Buckets the S3 CSI driver may read models from; without any, every bucket of the stack's account but the TLS bucket.";
    }
}

impl super::stack_file::StackFileConstruct for InferenceOperator {
    const SHAPE: &'static super::stack_file::Shape = &fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        use super::stack_file::required;
        let eks = required(r.eks(&fields::EKS));
        let hyperpod = required(r.hyperpod(&fields::HYPERPOD));
        let vpc = required(r.vpc(&fields::VPC));
        let mut c = InferenceOperator::new(id, &eks?, &hyperpod?, &vpc?);
        for b in r.str_list(&fields::MODEL_BUCKETS).unwrap_or_default() {
            c = c.model_bucket(b);
        }
        Some(c)
    }
}

#[cfg(test)]
mod bucket_name_tests {
    use crate::constructs::weights::is_existing_bucket_name as is_bucket_name;

    #[test]
    fn bucket_names_only() {
        for ok in ["kimi-k3-weights", "abc", "a.b-c.1"] {
            assert!(is_bucket_name(ok), "{ok}");
        }
        for bad in [
            "*",
            "ab",
            "a/../b",
            "arn:aws:s3:::b",
            "Bucket",
            "-ab",
            "ab-",
            "a..b",
            "192.168.1.1",
            "a\0b",
            &"a".repeat(64),
        ] {
            assert!(!is_bucket_name(bad), "{bad}");
        }
    }
}
