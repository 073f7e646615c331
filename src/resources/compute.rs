//! Compute: SageMaker HyperPod clusters. Values chosen at deploy time (a training plan) are
//! [`Input`]s, which each format declares its own way.

use super::StackInput;
use crate::app::text::Text;
use crate::app::AttrRef;
use std::collections::BTreeMap;

/// A Kubernetes taint on a group's nodes, with the effect spelled as the service wants it
/// (`NoSchedule` for HyperPod).
#[derive(Clone, Debug, PartialEq)]
pub struct Taint {
    /// Key.
    pub key: String,
    /// Value; `None` states none.
    pub value: Option<String>,
    /// Effect.
    pub effect: String,
}

/// A SageMaker HyperPod cluster orchestrated by EKS. It can be created only once the
/// lifecycle scripts are uploaded, the HyperPod dependencies chart is installed and its
/// execution role holds its policies.
#[derive(Clone, Debug, PartialEq)]
pub struct HyperPodCluster {
    /// The cluster's name.
    pub name: String,
    /// The orchestrating EKS cluster's ARN.
    pub eks_cluster: AttrRef,
    /// Security groups of the nodes.
    pub security_groups: Vec<AttrRef>,
    /// Subnets of the nodes.
    pub subnets: Vec<AttrRef>,
    /// What happens to faulty nodes (`Automatic`, `None`).
    pub node_recovery: String,
    /// The instance groups.
    pub instance_groups: Vec<ClusterInstanceGroup>,
}

/// One instance group of a [`HyperPodCluster`].
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterInstanceGroup {
    /// The group's name.
    pub name: String,
    /// The `ml.` instance type.
    pub instance_type: String,
    /// Instances.
    pub count: i64,
    /// Threads per core.
    pub threads_per_core: i64,
    /// The instances' role (its ARN).
    pub execution_role: AttrRef,
    /// Size of the EBS volume of each instance, in GB.
    pub ebs_volume_gb: i64,
    /// The lifecycle scripts run when a node is created.
    pub lifecycle: LifecycleConfig,
    /// Deep health checks run on node start (`InstanceStress`, ...); empty: none.
    pub deep_health_checks: Vec<String>,
    /// The training plan feeding the group (its ARN); on-demand when `None`.
    pub training_plan: Option<StackInput>,
    /// Kubernetes labels of the nodes.
    pub labels: BTreeMap<String, String>,
    /// Kubernetes taints of the nodes.
    pub taints: Vec<Taint>,
}

/// Where a HyperPod node's lifecycle scripts are and which one runs on creation.
#[derive(Clone, Debug, PartialEq)]
pub struct LifecycleConfig {
    /// The S3 URI of the scripts' prefix.
    pub source_s3_uri: Text,
    /// The script run on creation (`on_create.sh`).
    pub on_create: String,
}
