//! The Helm releases hyperforge knows: pinned charts with the values each deployment needs
//! (HyperPod dependencies, NVIDIA and EFA device plugins, the AWS load balancer controller,
//! Karpenter, KEDA). The release and upload types themselves are stage payloads of the core model
//! ([`crate::app::stage`]).

pub use crate::app::stage::{ChartSource, HelmRelease, Upload, UploadFile};
use crate::app::{kind, Ref};
use serde_json::json;

/// The `hyperpod-dependencies` chart of `aws/sagemaker-hyperpod-cli` at this commit.
pub const HYPERPOD_CLI_COMMIT: &str = "011ca927123e02b35a399935bbb3ab1905fe33c7";

impl HelmRelease {
    /// The HyperPod dependencies chart (device plugins, health monitoring agent, deep health
    /// checks, job auto-restart, training operators) that HyperPod's CreateCluster requires on
    /// the EKS cluster. Its bundled inference operator stays off: the operator is installed as
    /// the EKS add-on `amazon-sagemaker-hyperpod-inference`.
    pub fn hyperpod_dependencies() -> Self {
        HelmRelease {
            release: "hyperpod-dependencies".to_owned(),
            namespace: "kube-system".to_owned(),
            chart: ChartSource::Git {
                url: "https://github.com/aws/sagemaker-hyperpod-cli.git".to_owned(),
                commit: HYPERPOD_CLI_COMMIT.to_owned(),
                path: "helm_chart/HyperPodHelmChart".to_owned(),
            },
            values: json!({
                "inferenceOperators": { "enabled": false }
            }),
            note: "Values for the HyperPod dependencies chart. The inference operator is installed as the EKS add-on amazon-sagemaker-hyperpod-inference, so the chart's copy stays disabled.".to_owned(),
            set_from_outputs: Vec::new(),
            // The chart's Deployments (training operators, MPI operator) schedule only once
            // the HyperPod nodes of a later stage exist.
            wait: false,
        }
    }

    /// The NVIDIA device plugin (advertises `nvidia.com/gpu`), on GPU nodes only, tolerating
    /// their taint.
    pub fn nvidia_device_plugin() -> Self {
        HelmRelease {
            release: "nvidia-device-plugin".to_owned(),
            namespace: "kube-system".to_owned(),
            chart: ChartSource::Repository {
                repo: "https://nvidia.github.io/k8s-device-plugin".to_owned(),
                chart: "nvidia-device-plugin".to_owned(),
                version: "0.18.2".to_owned(),
            },
            values: json!({
                "nodeSelector": { crate::constructs::nodes::GPU_PRESENT_LABEL: "true" },
                "tolerations": [
                    { "key": crate::constructs::nodes::GPU_TAINT, "operator": "Exists", "effect": "NoSchedule" },
                    { "key": "CriticalAddonsOnly", "operator": "Exists" }
                ],
                "priorityClassName": "system-node-critical"
            }),
            note: "NVIDIA device plugin: advertises nvidia.com/gpu on GPU nodes.".to_owned(),
            set_from_outputs: Vec::new(),
            wait: true,
        }
    }

    /// The EFA device plugin (advertises `vpc.amazonaws.com/efa`), on GPU nodes only.
    pub fn efa_device_plugin() -> Self {
        HelmRelease {
            release: "aws-efa-k8s-device-plugin".to_owned(),
            namespace: "kube-system".to_owned(),
            chart: ChartSource::Repository {
                repo: "https://aws.github.io/eks-charts".to_owned(),
                chart: "aws-efa-k8s-device-plugin".to_owned(),
                version: "v0.5.26".to_owned(),
            },
            values: json!({
                "nodeSelector": { crate::constructs::nodes::GPU_PRESENT_LABEL: "true" },
                "tolerations": [
                    { "key": crate::constructs::nodes::GPU_TAINT, "operator": "Exists", "effect": "NoSchedule" }
                ]
            }),
            note: "EFA device plugin: advertises vpc.amazonaws.com/efa on GPU nodes.".to_owned(),
            set_from_outputs: Vec::new(),
            wait: true,
        }
    }

    /// The AWS Load Balancer Controller for cluster `cluster_name`, its service account bound to
    /// an IAM role by EKS Pod Identity (`LoadBalancerController`), its VPC id read from the
    /// network stage's output.
    pub fn aws_load_balancer_controller(
        cluster_name: &str,
        region: &str,
        vpc: &Ref<kind::Vpc>,
    ) -> Self {
        HelmRelease {
            release: "aws-load-balancer-controller".to_owned(),
            namespace: "kube-system".to_owned(),
            chart: ChartSource::Repository {
                repo: "https://aws.github.io/eks-charts".to_owned(),
                chart: "aws-load-balancer-controller".to_owned(),
                version: "1.13.2".to_owned(),
            },
            values: json!({
                "clusterName": cluster_name,
                "region": region,
                "replicaCount": 2,
                "serviceAccount": {
                    "create": true,
                    "name": crate::constructs::controllers::LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT
                },
                "nodeSelector": { "hyperforge.io/node-role": "system" }
            }),
            note: "AWS Load Balancer Controller: provisions the Network Load Balancer of the model Service. Its IAM role is bound to the service account by EKS Pod Identity; vpcId comes from the foundation stage's output.".to_owned(),
            set_from_outputs: vec![("vpcId".to_owned(), vpc.id())],
            wait: true,
        }
    }

    /// Karpenter for cluster `cluster_name`, its service account bound to the controller role by
    /// EKS Pod Identity, on the system nodes. Capacity reservations (Capacity Blocks) are on by
    /// default from 1.6; the feature gate is set explicitly anyway.
    pub fn karpenter(cluster_name: &str) -> Self {
        HelmRelease {
            release: "karpenter".to_owned(),
            namespace: crate::constructs::karpenter::KARPENTER_NAMESPACE.to_owned(),
            chart: ChartSource::Repository {
                repo: "oci://public.ecr.aws/karpenter".to_owned(),
                chart: "karpenter".to_owned(),
                version: "1.8.1".to_owned(),
            },
            values: json!({
                "settings": {
                    "clusterName": cluster_name,
                    "featureGates": { "reservedCapacity": true }
                },
                "serviceAccount": { "name": crate::constructs::karpenter::KARPENTER_SERVICE_ACCOUNT },
                "replicas": 2,
                "nodeSelector": { "hyperforge.io/node-role": "system" }
            }),
            note: "Karpenter: launches GPU nodes into the Capacity Block selected by the EC2NodeClass. Its IAM role is bound to the service account by EKS Pod Identity.".to_owned(),
            set_from_outputs: Vec::new(),
            wait: true,
        }
    }

    /// KEDA 2.17.1 (chart `keda` from kedacore/charts, the version of the CRDs hyperforge's
    /// `ScaledObject` and `TriggerAuthentication` types are generated from), for the autoscaled
    /// `VllmDeployment`s of cluster `cluster_name`, in namespace `keda`, on the system nodes. The
    /// operator's service account `keda-operator` gets its IAM role from EKS Pod Identity
    /// ([`KedaOperatorRole`](crate::constructs::KedaOperatorRole)); the chart installs the CRDs.
    /// On HyperPod the inference operator brings its own KEDA, so this preset is for EKS only.
    pub fn keda(cluster_name: &str) -> Self {
        HelmRelease {
            release: "keda".to_owned(),
            namespace: crate::constructs::controllers::KEDA_NAMESPACE.to_owned(),
            chart: ChartSource::Repository {
                repo: "https://kedacore.github.io/charts".to_owned(),
                chart: "keda".to_owned(),
                version: "2.17.1".to_owned(),
            },
            values: json!({
                "clusterName": cluster_name,
                "crds": { "install": true },
                "serviceAccount": {
                    "operator": {
                        "create": true,
                        "name": crate::constructs::controllers::KEDA_OPERATOR_SERVICE_ACCOUNT
                    }
                },
                "nodeSelector": { "hyperforge.io/node-role": "system" }
            }),
            note: "KEDA: scales the vLLM Deployments on their Prometheus queries (Amazon Managed Service for Prometheus, SigV4). The operator's IAM role is bound to its service account keda/keda-operator by EKS Pod Identity.".to_owned(),
            set_from_outputs: Vec::new(),
            wait: true,
        }
    }

    /// Whether this is the HyperPod dependencies chart.
    pub fn is_hyperpod_dependencies(&self) -> bool {
        matches!(&self.chart, ChartSource::Git { url, path, .. }
            if url.contains("sagemaker-hyperpod-cli") && path == "helm_chart/HyperPodHelmChart")
    }
}
