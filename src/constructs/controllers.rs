//! Cluster controllers that need AWS permissions: the AWS Load Balancer Controller's IAM role,
//! bound to its Kubernetes service account with EKS Pod Identity (no OIDC trust policy to keep
//! in sync).

use super::Construct;
use crate::app::{kind, AttrRef, Ref};

/// The controller's service account (in `kube-system`).
pub const LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT: &str = "aws-load-balancer-controller";

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
}
