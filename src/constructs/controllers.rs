//! Cluster controllers that need AWS permissions: the AWS Load Balancer Controller's IAM role,
//! bound to its Kubernetes service account with EKS Pod Identity (no OIDC trust policy to keep
//! in sync).

use super::Construct;
use crate::app::{kind, AttrRef, Ref};
use crate::resources::iam::{load_balancer_controller_policy, pod_identity_trust};
use crate::resources::{PodIdentityAssociation, Role, Rule, Scope};

/// The controller's service account (in `kube-system`).
pub const LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT: &str = "aws-load-balancer-controller";

/// Why checkov's CKV_AWS_111 (write access without constraints) is accepted on a role with
/// the controller's policy.
pub const LOAD_BALANCER_CONTROLLER_WRITE_REASON: &str = "the load balancer controller creates load balancers and security groups whose ARNs exist only after it runs, and adds ingress rules to the security groups of its targets (nodes and pods), which it does not own, as its published policy allows; changes to what it created are conditioned on its elbv2.k8s.aws/cluster tag";

/// The AWS Load Balancer Controller's IAM role and Pod Identity association.
#[derive(Clone, Debug)]
pub struct LoadBalancerController {
    id: String,
    cluster: Ref<kind::EksCluster>,
}

/// Handle to the controller's role.
#[derive(Clone, Debug)]
pub struct LoadBalancerControllerHandle {
    /// The role.
    pub role: Ref<kind::Role>,
}

impl LoadBalancerController {
    /// The controller's permissions on `cluster`.
    pub fn new(id: impl Into<String>, cluster: &Ref<kind::EksCluster>) -> Self {
        LoadBalancerController {
            id: id.into(),
            cluster: cluster.clone(),
        }
    }

    /// The cluster.
    pub fn cluster(&self) -> &Ref<kind::EksCluster> {
        &self.cluster
    }

    pub(crate) fn references(&self) -> Vec<AttrRef> {
        vec![self.cluster.name()]
    }
}

impl Construct for LoadBalancerController {
    type Handle = LoadBalancerControllerHandle;
    const KIND: &'static str = "load_balancer_controller";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> LoadBalancerControllerHandle {
        LoadBalancerControllerHandle {
            role: Ref::new(stack, format!("{}/Role", self.id)),
        }
    }

    fn references(&self) -> Vec<AttrRef> {
        LoadBalancerController::references(self)
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        let role = self.handle(scope.stack().name()).role;
        scope
            .add(
                "Role",
                Role {
                    description: "AWS Load Balancer Controller (EKS Pod Identity)".to_owned(),
                    trust: pod_identity_trust(),
                    managed: Vec::new(),
                    inline: vec![(
                        "load-balancer-controller".to_owned(),
                        load_balancer_controller_policy(),
                    )],
                    name: None,
                },
            )
            .acknowledge(
                Rule::IAM_WRITE_WITHOUT_CONSTRAINTS,
                LOAD_BALANCER_CONTROLLER_WRITE_REASON,
            );
        scope.add(
            "PodIdentityAssociation",
            PodIdentityAssociation {
                cluster: self.cluster.name(),
                namespace: "kube-system".to_owned(),
                service_account: LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT.to_owned(),
                role: role.arn(),
            },
        );
    }
}

// --- Stack-file form -------------------------------------------------------------------------

stack_file_shape! {
    pub mod fields = <LoadBalancerController as Construct>::KIND, "The AWS Load Balancer Controller's IAM role, bound by EKS Pod Identity." {
        ID: req "load_balancer_controller", Ty::Str, "The construct id.";
        CLUSTER: req "cluster", Ty::Ref(Want::Eks), "The EKS cluster.";
    }
}

impl super::stack_file::StackFileConstruct for LoadBalancerController {
    const SHAPE: &'static super::stack_file::Shape = &fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        let eks = super::stack_file::required(r.eks(&fields::CLUSTER))?;
        Some(LoadBalancerController::new(id, &eks.cluster))
    }
}

// --- KEDA -------------------------------------------------------------------------------------

/// The KEDA operator's namespace (the `keda` preset's release namespace).
pub const KEDA_NAMESPACE: &str = "keda";

/// The KEDA operator's service account (chart `keda` 2.17.1, `serviceAccount.operator.name`).
pub const KEDA_OPERATOR_SERVICE_ACCOUNT: &str = "keda-operator";

/// The KEDA operator's IAM role and its Pod Identity association (`keda/keda-operator`): read
/// access to the stack's Amazon Managed Service for Prometheus workspaces, for the Prometheus
/// triggers of autoscaled `VllmDeployment`s.
///
/// A trigger's `TriggerAuthentication` says `podIdentity.provider: aws` without a role ARN, so
/// KEDA signs its queries with the operator's own credentials (KEDA v2.17.1
/// `pkg/scalers/aws/aws_common.go`, `GetAwsAuthorization`: the `aws` provider uses the
/// operator's credential chain unless `awsRoleArn` is given), here the role EKS Pod Identity
/// hands to `keda/keda-operator`. The Prometheus scaler sends only instant queries,
/// `GET <serverAddress>/api/v1/query` (`pkg/scalers/prometheus_scaler.go`), signed with SigV4 for
/// service `aps` (`pkg/scalers/aws/aws_sigv4.go`); AMP authorizes those with `aps:QueryMetrics`
/// (AMP User Guide, "Amazon Managed Service for Prometheus permissions"), so that is the one
/// action granted, on the workspaces of the stack's account and region (their ids are known
/// only at deploy time). No `sts:AssumeRole` is needed, as no role ARN is set.
#[derive(Clone, Debug)]
pub struct KedaOperatorRole {
    id: String,
    cluster: Ref<kind::EksCluster>,
}

/// Handle to the KEDA operator's role.
#[derive(Clone, Debug)]
pub struct KedaOperatorRoleHandle {
    /// The role.
    pub role: Ref<kind::Role>,
}

impl KedaOperatorRole {
    /// The KEDA operator's permissions on `cluster`.
    pub fn new(id: impl Into<String>, cluster: &Ref<kind::EksCluster>) -> Self {
        KedaOperatorRole {
            id: id.into(),
            cluster: cluster.clone(),
        }
    }

    /// The cluster.
    pub fn cluster(&self) -> &Ref<kind::EksCluster> {
        &self.cluster
    }
}

/// Why KEDA may query every Prometheus workspace of the account in the stack's region.
pub(crate) const WORKSPACE_QUERY_REASON: &str = "KEDA queries the workspace each ScaledObject \
    names, which the cluster's users choose after deployment; the action only reads metrics, \
    in the stack's account and region.";

/// The policy of the KEDA operator's role: `aps:QueryMetrics` on the account's workspaces in
/// the stack's region.
pub fn keda_operator_policy() -> crate::resources::iam::PolicyDocument {
    use crate::app::text::Text;
    use crate::resources::iam::{PolicyDocument, Statement};
    PolicyDocument::new().statement(
        Statement::allow(["aps:QueryMetrics"])
            .sid("QueryPrometheusWorkspaces")
            .resource(Text::arn("aps", true, true, Text::lit("workspace/*")))
            .wildcards_because(WORKSPACE_QUERY_REASON),
    )
}

impl Construct for KedaOperatorRole {
    type Handle = KedaOperatorRoleHandle;
    const KIND: &'static str = "keda_operator_role";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> KedaOperatorRoleHandle {
        KedaOperatorRoleHandle {
            role: Ref::new(stack, format!("{}/Role", self.id)),
        }
    }

    fn references(&self) -> Vec<AttrRef> {
        vec![self.cluster.name()]
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        let role = self.handle(scope.stack().name()).role;
        scope.add(
            "Role",
            Role {
                description: "KEDA operator: queries Amazon Managed Service for Prometheus (EKS Pod Identity)".to_owned(),
                trust: pod_identity_trust(),
                managed: Vec::new(),
                inline: vec![("keda-operator".to_owned(), keda_operator_policy())],
                name: None,
            },
        );
        scope.add(
            "PodIdentityAssociation",
            PodIdentityAssociation {
                cluster: self.cluster.name(),
                namespace: KEDA_NAMESPACE.to_owned(),
                service_account: KEDA_OPERATOR_SERVICE_ACCOUNT.to_owned(),
                role: role.arn(),
            },
        );
    }
}

stack_file_shape! {
    pub mod keda_fields = <KedaOperatorRole as Construct>::KIND, "The KEDA operator's IAM role (query Amazon Managed Service for Prometheus workspaces of the stack's account and region), bound to `keda/keda-operator` by EKS Pod Identity." {
        ID: req "keda_operator_role", Ty::Str, "The construct id.";
        CLUSTER: req "cluster", Ty::Ref(Want::Eks), "The EKS cluster.";
    }
}

impl super::stack_file::StackFileConstruct for KedaOperatorRole {
    const SHAPE: &'static super::stack_file::Shape = &keda_fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        let eks = super::stack_file::required(r.eks(&keda_fields::CLUSTER))?;
        Some(KedaOperatorRole::new(id, &eks.cluster))
    }
}
