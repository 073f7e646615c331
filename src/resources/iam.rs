//! Format-neutral IAM policy documents: statements whose principals, resources and condition
//! keys may refer to resources of the stack.

use crate::app::text::Text;
use crate::app::AttrRef;

/// A policy document (`Version: 2012-10-17`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PolicyDocument {
    /// The statements in order.
    pub statements: Vec<Statement>,
}

impl PolicyDocument {
    /// An empty document.
    pub fn new() -> Self {
        PolicyDocument::default()
    }

    /// Adds a statement.
    pub fn statement(mut self, statement: Statement) -> Self {
        self.statements.push(statement);
        self
    }

    /// Gives every statement with a wildcard and no reason of its own `reason` (for a
    /// policy published upstream, where one reason covers the whole document).
    pub fn wildcards_because(mut self, reason: &str) -> Self {
        for s in &mut self.statements {
            if s.wildcard_reason.is_none() && s.has_wildcard() {
                s.wildcard_reason = Some(reason.to_owned());
            }
        }
        self
    }

    /// Every reference used anywhere in the document.
    pub fn references(&self) -> Vec<AttrRef> {
        let mut out = Vec::new();
        for s in &self.statements {
            for t in s
                .resources
                .iter()
                .chain(s.principals.iter().map(|p| &p.value))
            {
                out.extend(t.references().cloned());
            }
            for c in &s.conditions {
                out.extend(c.key.references().cloned());
                for v in &c.values {
                    out.extend(v.references().cloned());
                }
            }
        }
        out
    }
}

/// The kind of principal in a trust policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrincipalKind {
    /// `Service: sagemaker.amazonaws.com`.
    Service,
    /// `Federated: <OIDC provider ARN>`.
    Federated,
    /// `AWS: <account or role ARN>`.
    Aws,
}

/// A principal.
#[derive(Clone, Debug, PartialEq)]
pub struct Principal {
    /// Service, Federated or AWS.
    pub kind: PrincipalKind,
    /// The principal's identifier.
    pub value: Text,
}

/// A condition: `{operator: {key: values}}`.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    /// `StringEquals`, `StringLike`, `Bool`, ...
    pub operator: String,
    /// The condition key; may depend on a resource (an OIDC issuer).
    pub key: Text,
    /// The accepted values.
    pub values: Vec<Text>,
}

impl Condition {
    /// `value` as a JSON boolean, when this is a `Bool` condition and the value the literal
    /// `true` or `false`: policy tools (AWS CloudFormation Guard's registry rules among them)
    /// recognise `"aws:SecureTransport": false`, not the string.
    pub fn bool_literal(&self, value: &Text) -> Option<bool> {
        if self.operator != "Bool" {
            return None;
        }
        match value.as_literal()?.as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }
}

/// One statement.
#[derive(Clone, Debug, PartialEq)]
pub struct Statement {
    /// A statement id (letters and digits).
    pub sid: Option<String>,
    /// `Allow` (true) or `Deny` (false).
    pub allow: bool,
    /// Principals (trust and resource policies only).
    pub principals: Vec<Principal>,
    /// Actions.
    pub actions: Vec<String>,
    /// Resources (identity and resource policies only).
    pub resources: Vec<Text>,
    /// Conditions.
    pub conditions: Vec<Condition>,
    /// Why a `*` in its actions or resources cannot be narrowed: written as each policy
    /// pack's acknowledgement of exactly those wildcards. `None`: none is acknowledged.
    pub wildcard_reason: Option<String>,
}

impl Statement {
    /// An `Allow` statement for `actions`.
    pub fn allow<I, S>(actions: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Statement {
            sid: None,
            allow: true,
            principals: Vec::new(),
            actions: actions.into_iter().map(Into::into).collect(),
            resources: Vec::new(),
            conditions: Vec::new(),
            wildcard_reason: None,
        }
    }

    /// A `Deny` statement for `actions`.
    pub fn deny<I, S>(actions: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Statement {
            allow: false,
            ..Statement::allow(actions)
        }
    }

    /// Says why the wildcards of this statement cannot be narrowed (an `Allow` on objects
    /// under a prefix, on resources a controller creates at run time, on actions without
    /// resource-level permissions). The policy packs' acknowledgements name each wildcard.
    pub fn wildcards_because(mut self, reason: impl Into<String>) -> Self {
        self.wildcard_reason = Some(reason.into());
        self
    }

    /// Whether it allows an action or a resource through a `*` (a wildcard the policy packs
    /// report).
    pub fn has_wildcard(&self) -> bool {
        self.allow
            && (self.actions.iter().any(|a| a.contains('*'))
                || self
                    .resources
                    .iter()
                    .any(|r| r.literal_parts().any(|l| l.contains('*'))))
    }

    /// Sets the statement id.
    pub fn sid(mut self, sid: impl Into<String>) -> Self {
        self.sid = Some(sid.into());
        self
    }

    /// Adds a resource.
    pub fn resource(mut self, resource: impl Into<Text>) -> Self {
        self.resources.push(resource.into());
        self
    }

    /// Adds a principal.
    pub fn principal(mut self, kind: PrincipalKind, value: impl Into<Text>) -> Self {
        self.principals.push(Principal {
            kind,
            value: value.into(),
        });
        self
    }

    /// Adds a condition.
    pub fn condition(
        mut self,
        operator: impl Into<String>,
        key: impl Into<Text>,
        values: Vec<Text>,
    ) -> Self {
        self.conditions.push(Condition {
            operator: operator.into(),
            key: key.into(),
            values,
        });
        self
    }
}

/// Why a statement of actions without resource-level permissions names no resource.
pub const NO_RESOURCE_LEVEL_PERMISSIONS: &str = "These actions support no resource-level \
    permissions (Service Authorization Reference): IAM accepts only `*` for them.";

/// Why a writer of one log group may write any of its streams.
pub const LOG_STREAMS_REASON: &str = "`:*` after the log group's ARN names its log streams, \
    which the writer creates at run time under names it derives from its sources; the \
    statement names each log group it writes.";

/// The trust policy of a role assumed by an AWS service.
pub fn service_trust(service: &str) -> PolicyDocument {
    PolicyDocument::new()
        .statement(Statement::allow(["sts:AssumeRole"]).principal(PrincipalKind::Service, service))
}

/// A trust statement letting a Kubernetes service account assume the role through the EKS
/// cluster's OIDC provider (IRSA). `subject` may hold wildcards (`StringLike` is used then).
pub fn irsa_trust_statement(
    provider_arn: AttrRef,
    issuer_url: AttrRef,
    subject: &str,
) -> Statement {
    let operator = if subject.contains('*') {
        "StringLike"
    } else {
        "StringEquals"
    };
    Statement::allow(["sts:AssumeRoleWithWebIdentity"])
        .principal(PrincipalKind::Federated, provider_arn)
        .condition(
            operator,
            Text::default()
                .push_issuer(issuer_url.clone())
                .push_lit(":sub"),
            vec![Text::lit(subject)],
        )
        .condition(
            "StringEquals",
            Text::default().push_issuer(issuer_url).push_lit(":aud"),
            vec![Text::lit("sts.amazonaws.com")],
        )
}

/// A bucket policy statement denying every request not made over TLS.
pub fn deny_insecure_transport(bucket_arn: AttrRef) -> Statement {
    Statement::deny(["s3:*"])
        .sid("DenyInsecureTransport")
        .principal(PrincipalKind::Aws, "*")
        .resource(Text::attr(bucket_arn.clone()))
        .resource(Text::attr(bucket_arn).push_lit("/*"))
        .condition("Bool", "aws:SecureTransport", vec![Text::lit("false")])
}

/// The AWS Load Balancer Controller's permissions, a superset of its published IAM policy
/// (`docs/install/iam_policy.json` of the controller release the pinned chart runs; checked
/// statement by statement by `tests/it/conformance.rs`): read what it needs, create load
/// balancers, target groups and security groups, change only those it tagged for its cluster,
/// and open the targets' security groups to its own.
pub fn load_balancer_controller_policy() -> PolicyDocument {
    load_balancer_controller_statements().wildcards_because(
        "The AWS Load Balancer Controller's published IAM policy: it creates load balancers, \
         target groups, listeners and security groups at run time, so their ids are unknown \
         when the policy is written; changes are limited to resources tagged for its cluster \
         (`elbv2.k8s.aws/cluster`), and actions without resource-level permissions take `*`.",
    )
}

fn load_balancer_controller_statements() -> PolicyDocument {
    let elb = |resource: &str| Text::arn("elasticloadbalancing", true, true, Text::lit(resource));
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
                "shield:DescribeProtection",
                "shield:GetSubscriptionState",
                "waf-regional:GetWebACL",
                "waf-regional:GetWebACLForResource",
                "wafv2:GetWebACL",
                "wafv2:GetWebACLForResource",
            ])
            .sid("Discover")
            .resource("*"),
        )
        // The web ACL and Shield Advanced protection an Ingress asks for by annotation; these
        // services scope by web ACL and protection ids the controller learns at run time.
        .statement(
            Statement::allow([
                "shield:CreateProtection",
                "shield:DeleteProtection",
                "waf-regional:AssociateWebACL",
                "waf-regional:DisassociateWebACL",
                "wafv2:AssociateWebACL",
                "wafv2:DisassociateWebACL",
            ])
            .sid("ProtectLoadBalancers")
            .resource("*"),
        )
        // Since v2.6 the controller gives its load balancers a backend security group and adds
        // a rule for it to the security group of every target ENI: the nodes' or pods' groups,
        // which it did not create and which carry no elbv2.k8s.aws/cluster tag. Without this
        // unconditional statement (upstream's) health checks and traffic are dropped.
        .statement(
            Statement::allow([
                "ec2:AuthorizeSecurityGroupIngress",
                "ec2:RevokeSecurityGroupIngress",
            ])
            .sid("OpenTargetSecurityGroups")
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
            .resource(elb("loadbalancer/*"))
            .resource(elb("targetgroup/*/*"))
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
                "elasticloadbalancing:SetRulePriorities",
                "elasticloadbalancing:SetWebAcl",
            ])
            .sid("ManageListeners")
            .resource(elb("loadbalancer/*"))
            .resource(elb("listener/*"))
            .resource(elb("listener-rule/*")),
        )
        // Tags on load balancers and target groups decide what the controller may modify and
        // delete (`ManageOwnLoadBalancers`), so, as upstream: it retags only its own (never
        // setting the ownership tag itself) and sets the tag only while creating one.
        .statement(
            Statement::allow([
                "elasticloadbalancing:AddTags",
                "elasticloadbalancing:RemoveTags",
            ])
            .sid("TagOwnLoadBalancers")
            .resource(elb("loadbalancer/*"))
            .resource(elb("targetgroup/*/*"))
            .condition(
                "Null",
                "aws:RequestTag/elbv2.k8s.aws/cluster",
                vec![Text::lit("true")],
            )
            .condition(
                "Null",
                "aws:ResourceTag/elbv2.k8s.aws/cluster",
                vec![Text::lit("false")],
            ),
        )
        .statement(
            Statement::allow(["elasticloadbalancing:AddTags"])
                .sid("TagLoadBalancersOnCreate")
                .resource(elb("loadbalancer/*"))
                .resource(elb("targetgroup/*/*"))
                .condition(
                    "StringEquals",
                    "elasticloadbalancing:CreateAction",
                    vec![
                        Text::lit("CreateTargetGroup"),
                        Text::lit("CreateLoadBalancer"),
                    ],
                )
                .condition(
                    "Null",
                    "aws:RequestTag/elbv2.k8s.aws/cluster",
                    vec![Text::lit("false")],
                ),
        )
        .statement(
            Statement::allow([
                "elasticloadbalancing:AddTags",
                "elasticloadbalancing:RemoveTags",
            ])
            .sid("TagListeners")
            .resource(elb("listener/*"))
            .resource(elb("listener-rule/*")),
        )
        .statement(elbv2_tagged(
            Statement::allow([
                "elasticloadbalancing:DeleteLoadBalancer",
                "elasticloadbalancing:DeleteTargetGroup",
                "elasticloadbalancing:ModifyCapacityReservation",
                "elasticloadbalancing:ModifyIpPools",
                "elasticloadbalancing:ModifyListenerAttributes",
                "elasticloadbalancing:ModifyLoadBalancerAttributes",
                "elasticloadbalancing:ModifyTargetGroup",
                "elasticloadbalancing:ModifyTargetGroupAttributes",
                "elasticloadbalancing:SetIpAddressType",
                "elasticloadbalancing:SetSecurityGroups",
                "elasticloadbalancing:SetSubnets",
            ])
            .sid("ManageOwnLoadBalancers")
            .resource(elb("loadbalancer/*"))
            .resource(elb("targetgroup/*/*"))
            // ModifyListenerAttributes acts on the listener.
            .resource(elb("listener/*")),
        ))
        .statement(
            Statement::allow([
                "elasticloadbalancing:DeregisterTargets",
                "elasticloadbalancing:RegisterTargets",
            ])
            .sid("RegisterTargets")
            .resource(elb("targetgroup/*/*")),
        )
}

/// The trust policy of a role that EKS Pod Identity hands to pods.
pub fn pod_identity_trust() -> PolicyDocument {
    PolicyDocument::new().statement(
        Statement::allow(["sts:AssumeRole", "sts:TagSession"])
            .principal(PrincipalKind::Service, "pods.eks.amazonaws.com"),
    )
}

/// A KMS key policy that leaves the key to the account's IAM policies (the account root
/// administers it), plus `extra` (a service allowed to use it).
pub fn account_key_policy(extra: Option<Statement>) -> PolicyDocument {
    let mut doc = PolicyDocument::new().statement(
        Statement::allow(["kms:*"])
            .sid("AccountAdministers")
            .principal(
                PrincipalKind::Aws,
                Text::lit("arn:")
                    .push_pseudo(crate::app::text::Pseudo::Partition)
                    .push_lit(":iam::")
                    .push_pseudo(crate::app::text::Pseudo::AccountId)
                    .push_lit(":root"),
            )
            .resource("*"),
    );
    if let Some(s) = extra {
        doc = doc.statement(s);
    }
    doc
}
