//! The SageMaker HyperPod Inference Operator, installed as the EKS add-on
//! `amazon-sagemaker-hyperpod-inference`, with the add-ons it needs (cert-manager,
//! metrics-server, the Mountpoint for S3 CSI driver), its IAM roles (trusted through the
//! cluster's OIDC provider, named as the add-on requires) and the bucket for the TLS
//! certificates it generates.

use super::eks::EksClusterHandle;
use super::hyperpod::HyperPodHandle;
use super::Construct;
use crate::app::text::{Pseudo, Text};
use crate::app::{kind, AttrRef, Ref};
use crate::resources::iam::{PolicyDocument, Statement};

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

    /// Lets the S3 CSI driver read models from bucket `name` (for `modelSourceType: s3`).
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

    /// Read access for the S3 CSI driver to the model buckets, if any were named.
    pub fn model_buckets_policy(&self) -> Option<PolicyDocument> {
        if self.model_buckets.is_empty() {
            return None;
        }
        let mut list = Statement::allow(["s3:ListBucket"]).sid("ListModelBuckets");
        let mut read = Statement::allow(["s3:GetObject"]).sid("ReadModels");
        for b in &self.model_buckets {
            list = list.resource(
                Text::lit("arn:")
                    .push_pseudo(Pseudo::Partition)
                    .push_lit(format!(":s3:::{b}")),
            );
            read = read.resource(
                Text::lit("arn:")
                    .push_pseudo(Pseudo::Partition)
                    .push_lit(format!(":s3:::{b}/*")),
            );
        }
        Some(PolicyDocument::new().statement(list).statement(read))
    }

    /// The name of the operator's execution role: the add-on requires the prefix
    /// `SageMakerHyperPodInference`; the cluster name and region keep it unique per account.
    pub fn execution_role_name(&self, region: &str) -> String {
        let mut name = format!("SageMakerHyperPodInference-{}-{region}", self.hyperpod.name);
        name.truncate(64);
        name
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
}

/// The operator's access to its TLS certificate bucket and to tag the certificates it imports.
pub fn tls_certificates_policy(tls_bucket: &Ref<kind::Bucket>) -> PolicyDocument {
    PolicyDocument::new()
        .statement(
            Statement::allow(["s3:ListBucket"])
                .sid("ListCertificates")
                .resource(Text::attr(tls_bucket.arn())),
        )
        .statement(
            Statement::allow(["s3:GetObject", "s3:PutObject", "s3:PutObjectTagging"])
                .sid("WriteCertificates")
                .resource(Text::attr(tls_bucket.arn()).push_lit("/*")),
        )
        .statement(
            Statement::allow(["acm:AddTagsToCertificate"])
                .sid("TagCertificates")
                .resource(Text::arn("acm", true, true, Text::lit("certificate/*"))),
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
            .resource("*"),
        )
        .statement(
            Statement::allow(["aps:QueryMetrics"])
                .sid("QueryPrometheus")
                .resource(Text::arn("aps", true, true, Text::lit("workspace/*"))),
        )
}
