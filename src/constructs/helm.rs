//! The Helm releases hyperforge knows: pinned charts with the values each deployment needs
//! (HyperPod dependencies, NVIDIA and EFA device plugins, the AWS load balancer controller,
//! Karpenter, NVIDIA's DCGM exporter, kube-state-metrics, KEDA). The release and upload types themselves are stage payloads of the core model
//! ([`crate::app::stage`]).

pub use crate::app::stage::{ChartSource, HelmRelease, Upload, UploadFile};
use crate::app::{kind, Ref};
use serde_json::json;

/// The version of NVIDIA's `dcgm-exporter` chart (tag `4.5.3-4.8.2` of NVIDIA/dcgm-exporter,
/// whose `deployment/Chart.yaml` says version 4.8.2).
pub const DCGM_EXPORTER_CHART_VERSION: &str = "4.8.2";
/// The LeaderWorkerSet chart version: the release whose CRD is vendored
/// (`codegen/schemas/crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml`, tag v0.10.0).
pub const LWS_CHART_VERSION: &str = "0.10.0";
/// The namespace the LeaderWorkerSet controller runs in.
pub const LWS_NAMESPACE: &str = "lws-system";
/// The Kueue chart [`HelmRelease::kueue`] installs (`oci://registry.k8s.io/kueue/charts`).
pub const KUEUE_CHART_VERSION: &str = "0.19.2";
/// The namespace Kueue's controller runs in.
pub const KUEUE_NAMESPACE: &str = "kueue-system";

/// The version of the prometheus-community `kube-state-metrics` chart (kube-state-metrics
/// 2.20.0).
pub const KUBE_STATE_METRICS_CHART_VERSION: &str = "8.4.0";

/// The node label HyperPod nodes carry their `ml.` instance type in (the
/// `hyperpod-dependencies` chart's health monitoring agent selects GPU nodes by it).
pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";

/// The `ml.` names of the NVIDIA GPU instance types HyperPod offers (the catalog's), the values
/// of [`INSTANCE_TYPE_LABEL`] on HyperPod GPU nodes.
pub fn hyperpod_gpu_instance_types() -> Vec<String> {
    crate::catalog::instances::instances()
        .iter()
        .filter(|i| i.gpu_count > 0 && !i.hyperpod_regions.is_empty())
        .map(|i| i.ml_name())
        .collect()
}

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
            tags_value: None,
        }
    }

    /// The NVIDIA device plugin (advertises `nvidia.com/gpu`), on GPU nodes only, tolerating
    /// their taint.
    ///
    /// # Examples
    ///
    /// Each preset is a pinned chart with its values; a Helm stage installs it, here before
    /// the Load Balancer Controller, whose VPC id is read from the foundation stage's output
    /// when the stage is deployed:
    ///
    /// ```
    /// use hyperforge::app::Stack;
    /// use hyperforge::constructs::*;
    ///
    /// let plugin = HelmRelease::nvidia_device_plugin();
    /// assert_eq!(plugin.namespace, "kube-system");
    /// assert_eq!(plugin.values["nodeSelector"]["nvidia.com/gpu.present"], "true");
    ///
    /// let mut stack = Stack::new("demo", "us-west-2");
    /// let foundation = stack.cloudformation_stage("foundation");
    /// let network = stack.add(foundation, Network::new("Network"));
    /// let eks = stack.add(
    ///     foundation,
    ///     EksCluster::new("Eks", "demo").subnets(&network.private_subnets).vpc(&network.vpc),
    /// );
    /// stack.helm_stage("nvidia-device-plugin", plugin);
    /// let lbc = HelmRelease::aws_load_balancer_controller(&eks.name, "us-west-2", &network.vpc);
    /// assert_eq!(lbc.set_from_outputs[0].0, "vpcId");
    /// assert!(lbc.wait);
    /// stack.helm_stage("aws-load-balancer-controller", lbc);
    /// ```
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
            tags_value: None,
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
            tags_value: None,
        }
    }

    /// The LeaderWorkerSet controller (kubernetes-sigs/lws, chart `lws` 0.10.0 from
    /// `oci://registry.k8s.io/lws/charts`, namespace `lws-system`, as its installation page
    /// installs it) with its CRD: what runs a replica spanning several
    /// nodes ([`VllmDeployment::nodes_per_replica`](super::VllmDeployment::nodes_per_replica))
    /// as one group. Its CRD is the one vendored in `codegen/schemas/crds/` (tag v0.10.0).
    pub fn leader_worker_set() -> Self {
        HelmRelease {
            release: "lws".to_owned(),
            namespace: LWS_NAMESPACE.to_owned(),
            chart: ChartSource::Repository {
                repo: "oci://registry.k8s.io/lws/charts".to_owned(),
                chart: "lws".to_owned(),
                version: LWS_CHART_VERSION.to_owned(),
            },
            // The released chart's values pin the controller image to the release; the
            // controller runs on the system nodes.
            values: json!({
                "nodeSelector": { "hyperforge.io/node-role": "system" }
            }),
            note: "LeaderWorkerSet: runs each multi-node vLLM replica as one group (leader and workers created, restarted and deleted together).".to_owned(),
            set_from_outputs: Vec::new(),
            wait: true,
            tags_value: None,
        }
    }

    /// Kueue, which admits each multi-node replica (a LeaderWorkerSet group) as one workload:
    /// all its pods or none, within a quota of what the deployment may hold (decision 0050).
    /// The chart's own configuration already integrates `leaderworkerset.x-k8s.io/leaderworkerset`
    /// (`charts/kueue/values.yaml`, `managerConfig.controllerManagerConfigYaml`). Its pod
    /// webhook fails closed (`failurePolicy: Fail`) for pods in every namespace but
    /// `kube-system` and `kueue-system`, so the controller runs as two replicas (one leads)
    /// under a disruption budget, on the system nodes, instead of the chart's one.
    pub fn kueue() -> Self {
        HelmRelease {
            release: "kueue".to_owned(),
            namespace: KUEUE_NAMESPACE.to_owned(),
            chart: ChartSource::Repository {
                repo: "oci://registry.k8s.io/kueue/charts".to_owned(),
                chart: "kueue".to_owned(),
                version: KUEUE_CHART_VERSION.to_owned(),
            },
            values: json!({
                "controllerManager": {
                    "replicas": 2,
                    "nodeSelector": { "hyperforge.io/node-role": "system" },
                    "podDisruptionBudget": { "enabled": true }
                }
            }),
            note: "Kueue: admits each multi-node vLLM replica as one workload, all of its pods or none, within the deployment's quota.".to_owned(),
            set_from_outputs: Vec::new(),
            wait: true,
            tags_value: None,
        }
    }

    /// The AWS Load Balancer Controller for cluster `cluster_name`, its service account bound to
    /// an IAM role by EKS Pod Identity (`LoadBalancerController`), its VPC id read from the
    /// network stage's output; the stack's tags go to `defaultTags`, which the controller puts
    /// on the load balancers, target groups and security groups it creates.
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
            tags_value: Some("defaultTags".to_owned()),
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
            tags_value: None,
        }
    }

    /// AWS for Fluent Bit (chart `aws-for-fluent-bit` 0.2.0, Fluent Bit image 3.2.1, which
    /// takes EKS Pod Identity credentials) for cluster `cluster_name` in `region`: a DaemonSet
    /// on every node, GPU and HyperPod nodes included, shipping container logs into the two log
    /// groups a [`crate::constructs::LogShipping`] of the same cluster creates. The groups are
    /// named literally ([`crate::constructs::logs::log_group_names`]); the chart never creates
    /// a group (`autoCreateGroup: false`), so retention and encryption stay those of the
    /// stack. A `rewrite_tag` filter retags the records of [`SYSTEM_NAMESPACES`] `system.*`
    /// (keeping no copy), so the chart's `cloudWatchLogs` output (`kube.*`) receives the
    /// workloads and a second `cloudwatch_logs` output (`system.*`) the rest.
    ///
    /// [`SYSTEM_NAMESPACES`]: crate::constructs::logs::SYSTEM_NAMESPACES
    pub fn aws_for_fluent_bit(cluster_name: &str, region: &str) -> Self {
        use crate::constructs::logs::{
            log_group_names, FLUENT_BIT_SERVICE_ACCOUNT, SYSTEM_NAMESPACES,
        };
        let groups = log_group_names(cluster_name);
        let system = SYSTEM_NAMESPACES.join("|");
        let filters = format!(
            "[FILTER]\n    Name          rewrite_tag\n    Match         kube.*\n    Rule          $kubernetes['namespace_name'] ^({system})$ system.$TAG false\n    Emitter_Name  system_namespaces\n"
        );
        let outputs = format!(
            "[OUTPUT]\n    Name               cloudwatch_logs\n    Match              system.*\n    region             {region}\n    log_group_name     {}\n    log_stream_prefix  fluentbit-\n    auto_create_group  false\n",
            groups.system
        );
        HelmRelease {
            release: FLUENT_BIT_SERVICE_ACCOUNT.to_owned(),
            namespace: crate::constructs::logs::FLUENT_BIT_NAMESPACE.to_owned(),
            chart: ChartSource::Repository {
                repo: "https://aws.github.io/eks-charts".to_owned(),
                chart: "aws-for-fluent-bit".to_owned(),
                version: "0.2.0".to_owned(),
            },
            values: json!({
                "serviceAccount": { "create": true, "name": FLUENT_BIT_SERVICE_ACCOUNT },
                "cloudWatchLogs": {
                    "enabled": true,
                    "match": "kube.*",
                    "region": region,
                    "logGroupName": groups.workloads,
                    "logStreamPrefix": "fluentbit-",
                    "autoCreateGroup": false
                },
                "additionalFilters": filters,
                "additionalOutputs": outputs,
                "tolerations": [
                    { "key": crate::constructs::nodes::GPU_TAINT, "operator": "Exists", "effect": "NoSchedule" },
                    { "operator": "Exists" }
                ],
                "priorityClassName": "system-node-critical"
            }),
            note: "AWS for Fluent Bit: ships container logs from every node to the log groups of the LogShipping construct (workloads, and kube-system with the inference operator's namespace to the system group). Its IAM role is bound to the service account by EKS Pod Identity; it creates no log group.".to_owned(),
            set_from_outputs: Vec::new(),
            wait: true,
            tags_value: None,
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
            tags_value: None,
        }
    }

    /// NVIDIA's DCGM exporter (GPU metrics on port [`DCGM_PORT`](super::monitoring::DCGM_PORT),
    /// scraped by [`PrometheusMonitoring`](super::PrometheusMonitoring)'s collector), on GPU
    /// nodes only, tolerating their taint, with its Service on the same port. Chart 4.8.2
    /// (exporter `4.5.3-4.8.2`) from NVIDIA's chart repository. Its ServiceMonitor is off:
    /// no Prometheus Operator runs in the cluster (the collector finds the pods itself), and
    /// the chart would otherwise need the operator's CRD to install.
    ///
    /// GPU nodes are either of two kinds (a node affinity with two terms, either matching):
    /// EKS GPU nodes labelled [`GPU_PRESENT_LABEL`](crate::constructs::nodes::GPU_PRESENT_LABEL)
    /// by hyperforge's node groups and node pools, and HyperPod nodes of a GPU instance type
    /// ([`INSTANCE_TYPE_LABEL`] in [`hyperpod_gpu_instance_types`]). HyperPod nodes run no DCGM
    /// exporter of their own: in the `hyperpod-dependencies` chart (commit
    /// [`HYPERPOD_CLI_COMMIT`]) the `gpu-operator` subchart is disabled (`gpu-operator.enabled:
    /// false`) and even there has `dcgmExporter.enabled: false`, and the health monitoring
    /// agent exposes no metrics port.
    pub fn dcgm_exporter() -> Self {
        use crate::constructs::nodes::{GPU_PRESENT_LABEL, GPU_TAINT};
        HelmRelease {
            release: "dcgm-exporter".to_owned(),
            namespace: "kube-system".to_owned(),
            chart: ChartSource::Repository {
                repo: "https://nvidia.github.io/dcgm-exporter/helm-charts".to_owned(),
                chart: "dcgm-exporter".to_owned(),
                version: DCGM_EXPORTER_CHART_VERSION.to_owned(),
            },
            values: json!({
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                { "matchExpressions": [
                                    { "key": GPU_PRESENT_LABEL, "operator": "In", "values": ["true"] }
                                ] },
                                { "matchExpressions": [
                                    { "key": INSTANCE_TYPE_LABEL, "operator": "In", "values": hyperpod_gpu_instance_types() }
                                ] }
                            ]
                        }
                    }
                },
                "tolerations": [
                    { "key": GPU_TAINT, "operator": "Exists", "effect": "NoSchedule" }
                ],
                "service": { "enable": true, "port": super::monitoring::DCGM_PORT },
                "serviceMonitor": { "enabled": false }
            }),
            note: "NVIDIA DCGM exporter: GPU metrics (utilization, memory, XID errors) on port 9400 of every GPU node (EKS GPU nodes and HyperPod GPU instances), scraped by the managed Prometheus collector.".to_owned(),
            set_from_outputs: Vec::new(),
            wait: true,
            tags_value: None,
        }
    }

    /// kube-state-metrics (prometheus-community chart
    /// [`KUBE_STATE_METRICS_CHART_VERSION`], kube-state-metrics 2.20.0): the state of the
    /// cluster's objects as metrics on port
    /// [`KUBE_STATE_METRICS_PORT`](super::monitoring::KUBE_STATE_METRICS_PORT), among them
    /// `kube_pod_container_status_restarts_total`, which
    /// [`PrometheusMonitoring`](super::PrometheusMonitoring)'s collector scrapes for the
    /// [`POD_RESTARTING`](super::monitoring::POD_RESTARTING) alert. One replica, in
    /// `kube-system`, on the nodes `node_selector` selects: the system nodes
    /// (`hyperforge.io/node-role: system`) where a stack has them (EKS), none on HyperPod, whose
    /// nodes are all GPU instances. The chart's defaults are kept otherwise (its ServiceMonitor
    /// is off by default; `prometheusScrape` only annotates the Service).
    pub fn kube_state_metrics(node_selector: &[(String, String)]) -> Self {
        let mut values = serde_json::Map::new();
        if !node_selector.is_empty() {
            values.insert(
                "nodeSelector".to_owned(),
                node_selector
                    .iter()
                    .map(|(k, v)| (k.clone(), json!(v)))
                    .collect::<serde_json::Map<_, _>>()
                    .into(),
            );
        }
        HelmRelease {
            release: "kube-state-metrics".to_owned(),
            namespace: "kube-system".to_owned(),
            chart: ChartSource::Repository {
                repo: "https://prometheus-community.github.io/helm-charts".to_owned(),
                chart: "kube-state-metrics".to_owned(),
                version: KUBE_STATE_METRICS_CHART_VERSION.to_owned(),
            },
            values: values.into(),
            note: "kube-state-metrics: the state of the cluster's objects (container restarts among them) on port 8080, scraped by the managed Prometheus collector.".to_owned(),
            set_from_outputs: Vec::new(),
            wait: true,
            tags_value: None,
        }
    }

    /// Whether this is the AWS for Fluent Bit chart writing the workloads of the log group
    /// `workloads_group` (so, with the preset, the cluster whose groups these are).
    pub fn ships_logs_to(&self, workloads_group: &str) -> bool {
        matches!(&self.chart, ChartSource::Repository { chart, .. } if chart == "aws-for-fluent-bit")
            && self.values["cloudWatchLogs"]["logGroupName"] == workloads_group
    }

    /// Whether this release advertises NVIDIA GPUs to the kubelet (`nvidia.com/gpu`): NVIDIA's
    /// device plugin chart ([`HelmRelease::nvidia_device_plugin`]) or NVIDIA's GPU operator,
    /// which runs the same plugin.
    pub fn advertises_nvidia_gpus(&self) -> bool {
        matches!(&self.chart, ChartSource::Repository { chart, .. }
            if chart == "nvidia-device-plugin" || chart == "gpu-operator")
    }

    /// Whether this is the AWS Load Balancer Controller chart
    /// ([`HelmRelease::aws_load_balancer_controller`]).
    pub fn is_aws_load_balancer_controller(&self) -> bool {
        matches!(&self.chart, ChartSource::Repository { chart, .. }
            if chart == "aws-load-balancer-controller")
    }

    /// Whether this is the LeaderWorkerSet controller's chart ([`HelmRelease::leader_worker_set`]).
    pub fn is_leader_worker_set(&self) -> bool {
        matches!(&self.chart, ChartSource::Repository { chart, .. } if chart == "lws")
    }

    /// Whether this is Kueue's chart ([`HelmRelease::kueue`]).
    pub fn is_kueue(&self) -> bool {
        matches!(&self.chart, ChartSource::Repository { chart, .. } if chart == "kueue")
    }

    /// Whether this is the EFA device plugin's chart ([`HelmRelease::efa_device_plugin`]).
    pub fn is_efa_device_plugin(&self) -> bool {
        matches!(&self.chart, ChartSource::Repository { chart, .. }
            if chart == "aws-efa-k8s-device-plugin")
    }

    /// Whether this is the HyperPod dependencies chart.
    pub fn is_hyperpod_dependencies(&self) -> bool {
        matches!(&self.chart, ChartSource::Git { url, path, .. }
            if url.contains("sagemaker-hyperpod-cli") && path == "helm_chart/HyperPodHelmChart")
    }
}
