//! The SageMaker HyperPod Inference Operator, installed as the EKS add-on
//! `amazon-sagemaker-hyperpod-inference`, with the add-ons it needs (cert-manager,
//! metrics-server, the Mountpoint for S3 CSI driver), its IAM roles (trusted through the
//! cluster's OIDC provider, named as the add-on requires) and the bucket for the TLS
//! certificates it generates.

use super::eks::EksClusterHandle;
use super::hyperpod::HyperPodHandle;
use super::iam::{PolicyDocument, Statement};
use super::text::Text;
use super::Construct;
use crate::app::{kind, AttrRef, Ref};

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

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> InferenceOperatorHandle {
        InferenceOperatorHandle {
            tls_bucket: Ref::new(stack, format!("{}/TlsBucket", self.id)),
            execution_role: Ref::new(stack, format!("{}/ExecutionRole", self.id)),
        }
    }

    fn into_kind(self) -> super::ConstructKind {
        self.into()
    }
}

/// The AWS Load Balancer Controller's permissions, after its published IAM policy: read what
/// it needs, create load balancers, target groups and security groups, and change only those
/// it tagged for its cluster.
pub fn load_balancer_controller_policy() -> PolicyDocument {
    let elbv2_tagged = |st: Statement| {
        st.condition(
            "Null",
            "aws:ResourceTag/elbv2.k8s.aws/cluster",
            vec![Text::lit("false")],
        )
    };
    PolicyDocument::new()
        .statement(
            Statement::allow(["iam:CreateServiceLinkedRole"])
                .sid("ServiceLinkedRole")
                .resource(Text::arn(
                    "iam",
                    false,
                    true,
                    Text::lit("role/aws-service-role/elasticloadbalancing.amazonaws.com/*"),
                ))
                .condition(
                    "StringEquals",
                    "iam:AWSServiceName",
                    vec![Text::lit("elasticloadbalancing.amazonaws.com")],
                ),
        )
        .statement(
            Statement::allow([
                "acm:DescribeCertificate",
                "acm:ListCertificates",
                "cognito-idp:DescribeUserPoolClient",
                "ec2:DescribeAccountAttributes",
                "ec2:DescribeAddresses",
                "ec2:DescribeAvailabilityZones",
                "ec2:DescribeCoipPools",
                "ec2:DescribeInstances",
                "ec2:DescribeInternetGateways",
                "ec2:DescribeIpamPools",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeRouteTables",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSubnets",
                "ec2:DescribeTags",
                "ec2:DescribeVpcPeeringConnections",
                "ec2:DescribeVpcs",
                "ec2:GetCoipPoolUsage",
                "ec2:GetSecurityGroupsForVpc",
                "elasticloadbalancing:DescribeCapacityReservation",
                "elasticloadbalancing:DescribeListenerAttributes",
                "elasticloadbalancing:DescribeListenerCertificates",
                "elasticloadbalancing:DescribeListeners",
                "elasticloadbalancing:DescribeLoadBalancerAttributes",
                "elasticloadbalancing:DescribeLoadBalancers",
                "elasticloadbalancing:DescribeRules",
                "elasticloadbalancing:DescribeSSLPolicies",
                "elasticloadbalancing:DescribeTags",
                "elasticloadbalancing:DescribeTargetGroupAttributes",
                "elasticloadbalancing:DescribeTargetGroups",
                "elasticloadbalancing:DescribeTargetHealth",
                "elasticloadbalancing:DescribeTrustStores",
                "iam:GetServerCertificate",
                "iam:ListServerCertificates",
                "shield:GetSubscriptionState",
                "wafv2:GetWebACLForResource",
            ])
            .sid("Discover")
            .resource("*"),
        )
        .statement(
            Statement::allow(["ec2:CreateSecurityGroup"])
                .sid("CreateSecurityGroups")
                .resource(Text::arn("ec2", true, true, Text::lit("security-group/*")))
                .resource(Text::arn("ec2", true, true, Text::lit("vpc/*"))),
        )
        .statement(
            Statement::allow(["ec2:CreateTags"])
                .sid("TagNewSecurityGroups")
                .resource(Text::arn("ec2", true, true, Text::lit("security-group/*")))
                .condition(
                    "StringEquals",
                    "ec2:CreateAction",
                    vec![Text::lit("CreateSecurityGroup")],
                )
                .condition(
                    "Null",
                    "aws:RequestTag/elbv2.k8s.aws/cluster",
                    vec![Text::lit("false")],
                ),
        )
        .statement(elbv2_tagged(
            Statement::allow([
                "ec2:AuthorizeSecurityGroupIngress",
                "ec2:CreateTags",
                "ec2:DeleteSecurityGroup",
                "ec2:DeleteTags",
                "ec2:RevokeSecurityGroupIngress",
            ])
            .sid("ManageOwnSecurityGroups")
            .resource(Text::arn("ec2", true, true, Text::lit("security-group/*"))),
        ))
        .statement(
            Statement::allow([
                "elasticloadbalancing:CreateLoadBalancer",
                "elasticloadbalancing:CreateTargetGroup",
            ])
            .sid("CreateLoadBalancers")
            .resource(Text::arn(
                "elasticloadbalancing",
                true,
                true,
                Text::lit("loadbalancer/*"),
            ))
            .resource(Text::arn(
                "elasticloadbalancing",
                true,
                true,
                Text::lit("targetgroup/*/*"),
            ))
            .condition(
                "Null",
                "aws:RequestTag/elbv2.k8s.aws/cluster",
                vec![Text::lit("false")],
            ),
        )
        .statement(
            Statement::allow([
                "elasticloadbalancing:CreateListener",
                "elasticloadbalancing:CreateRule",
                "elasticloadbalancing:DeleteListener",
                "elasticloadbalancing:DeleteRule",
                "elasticloadbalancing:ModifyListener",
                "elasticloadbalancing:ModifyRule",
                "elasticloadbalancing:AddListenerCertificates",
                "elasticloadbalancing:RemoveListenerCertificates",
                "elasticloadbalancing:SetWebAcl",
            ])
            .sid("ManageListeners")
            .resource(Text::arn(
                "elasticloadbalancing",
                true,
                true,
                Text::lit("loadbalancer/*"),
            ))
            .resource(Text::arn(
                "elasticloadbalancing",
                true,
                true,
                Text::lit("listener/*"),
            ))
            .resource(Text::arn(
                "elasticloadbalancing",
                true,
                true,
                Text::lit("listener-rule/*"),
            )),
        )
        .statement(
            Statement::allow([
                "elasticloadbalancing:AddTags",
                "elasticloadbalancing:RemoveTags",
            ])
            .sid("TagLoadBalancers")
            .resource(Text::arn(
                "elasticloadbalancing",
                true,
                true,
                Text::lit("loadbalancer/*"),
            ))
            .resource(Text::arn(
                "elasticloadbalancing",
                true,
                true,
                Text::lit("targetgroup/*/*"),
            ))
            .resource(Text::arn(
                "elasticloadbalancing",
                true,
                true,
                Text::lit("listener/*"),
            ))
            .resource(Text::arn(
                "elasticloadbalancing",
                true,
                true,
                Text::lit("listener-rule/*"),
            )),
        )
        .statement(elbv2_tagged(
            Statement::allow([
                "elasticloadbalancing:DeleteLoadBalancer",
                "elasticloadbalancing:DeleteTargetGroup",
                "elasticloadbalancing:ModifyCapacityReservation",
                "elasticloadbalancing:ModifyListenerAttributes",
                "elasticloadbalancing:ModifyLoadBalancerAttributes",
                "elasticloadbalancing:ModifyTargetGroup",
                "elasticloadbalancing:ModifyTargetGroupAttributes",
                "elasticloadbalancing:SetIpAddressType",
                "elasticloadbalancing:SetSecurityGroups",
                "elasticloadbalancing:SetSubnets",
            ])
            .sid("ManageOwnLoadBalancers")
            .resource(Text::arn(
                "elasticloadbalancing",
                true,
                true,
                Text::lit("loadbalancer/*"),
            ))
            .resource(Text::arn(
                "elasticloadbalancing",
                true,
                true,
                Text::lit("targetgroup/*/*"),
            )),
        ))
        .statement(
            Statement::allow([
                "elasticloadbalancing:DeregisterTargets",
                "elasticloadbalancing:RegisterTargets",
            ])
            .sid("RegisterTargets")
            .resource(Text::arn(
                "elasticloadbalancing",
                true,
                true,
                Text::lit("targetgroup/*/*"),
            )),
        )
}
