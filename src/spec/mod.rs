//! The typed builders: format-neutral descriptions of the network, the EKS and HyperPod
//! clusters, their capacity, the inference operator and the vLLM workload. Builders never fail
//! when called; every constraint is checked when the app is synthesized, so all problems are
//! reported at once with their construct paths.

pub mod cidr;
pub mod controllers;
pub mod eks;
pub mod helm;
pub mod hyperpod;
pub mod iam;
pub mod inference_operator;
pub mod karpenter;
pub mod lifecycle;
pub mod network;
pub mod nodes;
pub mod security_group;
pub mod text;
pub mod vllm;

pub use cidr::Ipv4Cidr;
pub use controllers::{LoadBalancerController, LoadBalancerControllerHandle};
pub use eks::{AccessEntry, AccessPolicy, EksAddon, EksCluster, EksClusterHandle, EndpointAccess};
pub use helm::{ChartSource, HelmRelease, Upload, UploadFile};
pub use hyperpod::{
    Capacity, DeepHealthCheck, HyperPodCluster, HyperPodHandle, InstanceGroup, NodeRecovery, Taint,
    TaintEffect, TrainingPlan,
};
pub use inference_operator::{InferenceOperator, InferenceOperatorHandle};
pub use karpenter::{Karpenter, KarpenterHandle, KarpenterNodePool, ReservationSelector};
pub use lifecycle::{LifecycleScripts, LifecycleScriptsHandle};
pub use network::{NatGateways, Network, NetworkHandle};
pub use nodes::{
    AmiType, CapacityBlock, CapacityBlockPurchase, ManagedNodeGroup, NodeCapacity, NodeGroupHandle,
};
pub use security_group::{ClusterSecurityGroup, ClusterSecurityGroupHandle};
pub use text::{Part, Pseudo, Text};
pub use vllm::{
    Exposure, InferenceEndpoint, InferenceEndpointHandle, SecretKeyRef, StartupBudget,
    StorageThroughput, VllmDeployment, VllmDeploymentHandle, VllmServer,
};

use crate::app::{AttrRef, Stack};
use crate::diagnostics::Diagnostics;

/// A construct that can be placed in a stack's stage.
pub trait Construct {
    /// Typed references to the construct's resources, returned by `Stack::add`.
    type Handle;
    /// The construct's id (first segment of its paths).
    fn id(&self) -> &str;
    /// The handle for this construct in stack `stack`.
    fn handle(&self, stack: &str) -> Self::Handle;
    /// Wraps the construct for storage in the stack.
    fn into_kind(self) -> ConstructKind;
}

/// Every kind of construct, as stored in a stack.
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum ConstructKind {
    /// See [`Network`].
    Network(Network),
    /// See [`ClusterSecurityGroup`].
    SecurityGroup(ClusterSecurityGroup),
    /// See [`EksCluster`].
    Eks(EksCluster),
    /// See [`LifecycleScripts`].
    Lifecycle(LifecycleScripts),
    /// See [`HyperPodCluster`].
    HyperPod(HyperPodCluster),
    /// See [`InferenceOperator`].
    InferenceOperator(InferenceOperator),
    /// See [`InferenceEndpoint`].
    InferenceEndpoint(InferenceEndpoint),
    /// See [`ManagedNodeGroup`].
    NodeGroup(ManagedNodeGroup),
    /// See [`LoadBalancerController`].
    LoadBalancerController(LoadBalancerController),
    /// See [`VllmDeployment`].
    VllmDeployment(VllmDeployment),
    /// See [`Karpenter`].
    Karpenter(Karpenter),
    /// See [`KarpenterNodePool`].
    KarpenterNodePool(KarpenterNodePool),
}

impl ConstructKind {
    /// Every reference the construct makes to other resources.
    pub fn references(&self) -> Vec<AttrRef> {
        match self {
            ConstructKind::Network(_) | ConstructKind::Lifecycle(_) => Vec::new(),
            ConstructKind::SecurityGroup(c) => c.references(),
            ConstructKind::Eks(c) => c.references(),
            ConstructKind::HyperPod(c) => c.references(),
            ConstructKind::InferenceOperator(c) => c.references(),
            ConstructKind::InferenceEndpoint(_) => Vec::new(),
            ConstructKind::NodeGroup(c) => c.references(),
            ConstructKind::LoadBalancerController(c) => c.references(),
            ConstructKind::VllmDeployment(_) | ConstructKind::KarpenterNodePool(_) => Vec::new(),
            ConstructKind::Karpenter(c) => c.references(),
        }
    }

    /// Checks the construct's own rules; `path` is its display path.
    pub fn validate(&self, stack: &Stack, path: &str, ds: &mut Diagnostics) {
        match self {
            ConstructKind::Network(c) => c.validate(stack, path, ds),
            ConstructKind::SecurityGroup(_) => {}
            ConstructKind::Eks(c) => c.validate(path, ds),
            ConstructKind::Lifecycle(_) => {}
            ConstructKind::HyperPod(c) => c.validate(stack, path, ds),
            ConstructKind::InferenceOperator(_) => {}
            ConstructKind::InferenceEndpoint(c) => c.validate(path, ds),
            ConstructKind::NodeGroup(c) => c.validate(stack, path, ds),
            ConstructKind::LoadBalancerController(_) => {}
            ConstructKind::VllmDeployment(c) => c.validate(path, ds),
            ConstructKind::Karpenter(_) => {}
            ConstructKind::KarpenterNodePool(c) => c.validate(path, ds),
        }
    }
}

macro_rules! construct_kind_from {
    ($($variant:ident($ty:ty)),*) => {
        $( impl From<$ty> for ConstructKind { fn from(c: $ty) -> Self { ConstructKind::$variant(c) } } )*
    };
}
construct_kind_from!(
    Network(Network),
    SecurityGroup(ClusterSecurityGroup),
    Eks(EksCluster),
    Lifecycle(LifecycleScripts),
    HyperPod(HyperPodCluster),
    InferenceOperator(InferenceOperator),
    InferenceEndpoint(InferenceEndpoint),
    NodeGroup(ManagedNodeGroup),
    LoadBalancerController(LoadBalancerController),
    VllmDeployment(VllmDeployment),
    Karpenter(Karpenter),
    KarpenterNodePool(KarpenterNodePool)
);
