//! Acknowledged findings: a scanner's rule that does not apply to one resource, declared once
//! on the resource with a mandatory reason, and written by each backend into every tool's
//! native suppression form (CloudFormation: `Metadata.checkov.skip`,
//! `Metadata.guard.SuppressedRules`, `Metadata.cfn_nag.rules_to_suppress`,
//! `Metadata.cdk_nag.rules_to_suppress`; Terraform: `"//": "checkov:skip=ID: reason"` in the
//! resource's block; Kubernetes: `checkov.io/skipN: ID=reason` annotations).

/// One concern, as each scanner names it (an empty list: the tool has no such rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// checkov check ids (`CKV_AWS_18`).
    pub checkov: &'static [&'static str],
    /// AWS CloudFormation Guard rule names, as the AWS Guard Rules Registry spells them.
    pub guard: &'static [&'static str],
    /// cfn_nag rule ids (`W35`).
    pub cfn_nag: &'static [&'static str],
    /// cdk-nag rule ids (`AwsSolutions-S1`).
    pub cdk_nag: &'static [&'static str],
}

impl Rule {
    /// An S3 bucket without server access logging.
    pub const S3_ACCESS_LOGGING: Rule = Rule {
        checkov: &["CKV_AWS_18"],
        guard: &["S3_BUCKET_LOGGING_ENABLED"],
        cfn_nag: &["W35"],
        cdk_nag: &["AwsSolutions-S1"],
    };

    /// An S3 bucket encrypted with S3-managed keys rather than KMS.
    pub const S3_WITHOUT_KMS: Rule = Rule::checkov(&["CKV_AWS_145"]);

    /// An IAM role with inline policies rather than customer managed ones.
    pub const IAM_INLINE_POLICY: Rule = Rule {
        checkov: &[],
        guard: &["IAM_NO_INLINE_POLICY_CHECK"],
        cfn_nag: &["F10"],
        cdk_nag: &[],
    };

    /// A route sending every address (`0.0.0.0/0`) to an internet gateway.
    pub const UNRESTRICTED_ROUTE_TO_INTERNET_GATEWAY: Rule = Rule {
        checkov: &[],
        guard: &["NO_UNRESTRICTED_ROUTE_TO_IGW"],
        cfn_nag: &[],
        cdk_nag: &[],
    };

    /// An IAM policy allowing write actions without resource constraints.
    pub const IAM_WRITE_WITHOUT_CONSTRAINTS: Rule = Rule {
        checkov: &["CKV_AWS_111"],
        guard: &[],
        cfn_nag: &[],
        cdk_nag: &[],
    };

    /// An IAM policy allowing actions or resources through a `*`. Acknowledged per wildcard
    /// (see [`AckScope`]), never for the whole role.
    pub const IAM_WILDCARD: Rule = Rule::cdk_nag(&["AwsSolutions-IAM5"]);

    /// An IAM role with an AWS managed policy attached. Acknowledged per policy.
    pub const AWS_MANAGED_POLICY: Rule = Rule::cdk_nag(&["AwsSolutions-IAM4"]);

    /// An EC2 instance outside an Auto Scaling group without termination protection.
    pub const EC2_WITHOUT_TERMINATION_PROTECTION: Rule = Rule::cdk_nag(&["AwsSolutions-EC29"]);

    /// cdk-nag's EC26 (encrypted EBS volumes) failing to run on an instance without a launch
    /// template when its template holds one: the rule reads the launch template's name of an
    /// instance that has none (cdk-nag 2.38.2 `EC2EBSVolumeEncrypted`). cdk-nag 3 reports the
    /// failure as the rule's own finding.
    pub const CDK_NAG_EC26_FAILURE: Rule = Rule::cdk_nag(&["CdkNagValidationFailure"]);

    /// A CloudWatch Logs group keeping its events for less than a year.
    pub const LOG_RETENTION_UNDER_A_YEAR: Rule = Rule::checkov(&["CKV_AWS_338"]);

    /// An EventBridge Scheduler schedule whose target input is encrypted with an AWS owned key
    /// rather than a customer managed one.
    pub const SCHEDULE_WITHOUT_CMK: Rule = Rule::checkov(&["CKV_AWS_297"]);

    /// A container whose root filesystem is writable.
    pub const K8S_WRITABLE_ROOT_FILESYSTEM: Rule = Rule::checkov(&["CKV_K8S_22"]);

    /// Containers that may run as root.
    pub const K8S_ROOT_CONTAINERS: Rule = Rule::checkov(&["CKV_K8S_23"]);

    /// A container running with a low user id.
    pub const K8S_LOW_UID: Rule = Rule::checkov(&["CKV_K8S_40"]);

    /// An image referenced by tag, without a digest.
    pub const K8S_IMAGE_WITHOUT_DIGEST: Rule = Rule::checkov(&["CKV_K8S_43"]);

    /// Secrets read from environment variables.
    pub const K8S_SECRETS_AS_ENVIRONMENT: Rule = Rule::checkov(&["CKV_K8S_35"]);

    /// A pod that mounts its service account's token.
    pub const K8S_SERVICE_ACCOUNT_TOKEN: Rule = Rule::checkov(&["CKV_K8S_38"]);

    /// A rule only cdk-nag has.
    pub const fn cdk_nag(ids: &'static [&'static str]) -> Rule {
        Rule {
            checkov: &[],
            guard: &[],
            cfn_nag: &[],
            cdk_nag: ids,
        }
    }

    /// A rule only checkov has.
    pub const fn checkov(ids: &'static [&'static str]) -> Rule {
        Rule {
            checkov: ids,
            guard: &[],
            cfn_nag: &[],
            cdk_nag: &[],
        }
    }
}

/// A rule that does not apply to a resource, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acknowledgement {
    /// The rule, in every tool's spelling.
    pub rule: Rule,
    /// Why it does not apply: written beside every tool's suppression, for the reviewer.
    pub reason: String,
    /// The part of the resource it covers; `None`: all of it.
    pub scope: Option<AckScope>,
}

/// The part of a resource an acknowledgement covers, for the packs that report one finding
/// per part (cdk-nag's `applies_to`): each backend names the findings from what it rendered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AckScope {
    /// The wildcards of statement `statement` of the role's inline policy `policy` (of the
    /// policy itself, for a policy resource: `policy` 0).
    Statement {
        /// The inline policy's index.
        policy: usize,
        /// The statement's index in that policy.
        statement: usize,
    },
    /// The AWS managed policy of this name attached to the role.
    ManagedPolicy(String),
    /// One finding, as the pack names it (for cdk-nag's `CdkNagValidationFailure`: the rule
    /// that failed to run).
    Finding(&'static str),
}

/// Why hyperforge attaches an AWS managed policy rather than writing its own: the service
/// documents that policy as what the role needs and keeps it current as the service gains
/// features. `None` for a policy hyperforge does not attach (a user's own choice, which the
/// packs report).
pub fn aws_managed_policy_reason(name: &str) -> Option<&'static str> {
    Some(match name {
        "AmazonEKSClusterPolicy" => {
            "Amazon EKS requires this AWS managed policy on the cluster IAM role and updates it \
             as EKS gains features (Amazon EKS User Guide, cluster IAM role)."
        }
        "AmazonEKSWorkerNodePolicy"
        | "AmazonEKS_CNI_Policy"
        | "AmazonEC2ContainerRegistryPullOnly" => {
            "Amazon EKS documents these AWS managed policies as the node IAM role's permissions \
             (to join the cluster, assign pod IP addresses and pull images) and updates them \
             with EKS (Amazon EKS User Guide, node IAM role)."
        }
        "AmazonSSMManagedInstanceCore" => {
            "The instance is reached only through Session Manager; this AWS managed policy is \
             the instance profile permission the Systems Manager agent needs (AWS Systems \
             Manager User Guide, instance profile)."
        }
        "AmazonSageMakerClusterInstanceRolePolicy" => {
            "SageMaker HyperPod documents this AWS managed policy as the cluster instance \
             role's baseline permissions (SageMaker Developer Guide, IAM for HyperPod)."
        }
        "AmazonSageMakerHyperPodInferenceAccess" | "AmazonSageMakerHyperPodGatedModelAccess" => {
            "The HyperPod inference operator's installation attaches this AWS managed policy to \
             its roles; AWS updates it with the operator (SageMaker Developer Guide, HyperPod \
             inference operator set-up)."
        }
        _ => return None,
    })
}

/// Why the roles hyperforge writes keep their permissions inline.
pub const INLINE_POLICY_REASON: &str = "The policy is written for this one role and shares its \
    lifecycle: it is created, changed and deleted with the role and cannot be attached to another \
    identity (AWS IAM guidance recommends inline policies for a strict one-to-one relationship \
    between a policy and an identity). Its statements are scoped as tightly as the service allows.";

/// Why a bucket receiving access logs keeps none of its own.
pub const LOG_BUCKET_REASON: &str = "Receives the server access logs of the stack's buckets; \
    logging it would record S3's own log deliveries into another bucket without end.";

/// Why a bucket receiving access logs is encrypted with S3-managed keys.
pub const LOG_BUCKET_ENCRYPTION_REASON: &str = "S3 delivers server access logs only to a bucket \
    encrypted with S3-managed keys (SSE-S3); SSE-KMS is not supported for the target bucket \
    (Amazon S3 User Guide, enabling server access logging).";
