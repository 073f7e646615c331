//! The Kubernetes objects of the vLLM constructs, from k8s-openapi types and the generated CRD
//! types: an [`InferenceEndpoint`]'s `InferenceEndpointConfig` (HyperPod Inference Operator),
//! and a [`VllmDeployment`]'s Namespace, ServiceAccount, Deployment (a LeaderWorkerSet when a
//! replica spans several nodes), Service (internal NLB by default), PodDisruptionBudget and
//! NetworkPolicy.

use super::{
    multi_node_args, Autoscaling, Client, Exposure, InferenceEndpoint, NodeRole, VllmDeployment,
    VllmServer, LB_SCHEME_ANNOTATION, LB_SUBNETS_ANNOTATION, STARTUP_PROBE_PERIOD_SECS, VLLM_PORT,
};
use crate::app::Stack;
use crate::constructs::network::{subnet_facts, SubnetFacts};
use crate::constructs::nodes::GPU_TAINT;
use crate::resources::kubernetes::crd::inference_endpoint_config::*;
use crate::resources::kubernetes::crd::leader_worker_set::{
    LeaderWorkerSet, LeaderWorkerSetLeaderWorkerTemplate, LeaderWorkerSetSpec,
};
use crate::resources::kubernetes::crd::scaled_object::ScaledObject;
use crate::resources::kubernetes::crd::trigger_authentication::TriggerAuthentication;
use crate::resources::Rule;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    HTTPGetAction, Namespace, PodSecurityContext, PodSpec, PodTemplateSpec, Probe,
    ResourceRequirements, SeccompProfile, SecretKeySelector, SecurityContext, Service,
    ServiceAccount, ServicePort, ServiceSpec, Toleration, Volume, VolumeMount,
};
use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

/// The ephemeral storage of a server streaming its weights from S3, GiB: the model's
/// configuration, tokenizer and code, and vLLM's compile caches.
const STREAMED_CACHE_GIB: u64 = 100;

/// Where the operator mounts the downloaded weights in the worker container.
pub const MODEL_MOUNT_PATH: &str = "/opt/ml/model";

/// The labels of an endpoint's object.
fn labels(stack: &Stack, name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "app.kubernetes.io/managed-by".to_owned(),
            "hyperforge".to_owned(),
        ),
        ("app.kubernetes.io/name".to_owned(), name.to_owned()),
        (
            "app.kubernetes.io/part-of".to_owned(),
            stack.name().to_owned(),
        ),
    ])
}

/// The `InferenceEndpointConfig` serving `ep` on HyperPod.
///
/// With `prefetchEnabled: true` the operator's init container downloads the weights from
/// Hugging Face, at the pinned `commitSHA`, into the model volume mounted at
/// [`MODEL_MOUNT_PATH`] (the token, when given, is visible to that init container only); vLLM
/// then serves the mounted copy (`--model /opt/ml/model`), so the 1.4 TB are fetched once per
/// pod. Without prefetch the operator leaves the download to the runtime, which would find an
/// empty directory at that path. Source: AWS, "Deploy models from Amazon S3, Amazon FSx, or
/// Hugging Face Hub using kubectl" (sagemaker-hyperpod-model-deployment-deploy-ftm): "When
/// `true`, an init container downloads the model before the inference container starts. When
/// `false`, the inference runtime (vLLM, TGI, SGLang) downloads the model natively at
/// startup", and its Hugging Face example pairs `prefetchEnabled: true` with vLLM
/// `--model /opt/ml/model`, so the downloader writes the repository's files at the mount's
/// root, not a Hub cache tree.
///
/// The defaults the operator would otherwise apply are set to what vLLM needs: invocation path
/// `v1/chat/completions`, load-balancer health check `/health`, metrics scraped from port 8000,
/// and a deploy timeout sized from the weights.
///
/// The worker gets no `/dev/shm` volume: the CRD (sagemaker-hyperpod-cli 011ca927) has no
/// `volumeMounts` on `worker`, and `spec.kubernetes.volumes` are for init containers only, so
/// the container runtime's default shared memory applies unless the operator adds more; the
/// runbook checks its size once the worker runs (docs/decisions/0005-no-dev-shm-volume-on-the-hyperpod-worker.md).
pub fn inference_endpoint_config(stack: &Stack, ep: &InferenceEndpoint) -> InferenceEndpointConfig {
    let server = ep.server();
    let gpus = ep.gpus().unwrap_or(1);
    let budget = server.startup_budget(ep.instance_type(), true);
    let gpu_quantity =
        BTreeMap::from([("nvidia.com/gpu".to_owned(), IntOrString::Int(gpus as i32))]);
    // The API key reaches vLLM from its Secret (the CRD's environment variables take
    // `valueFrom.secretKeyRef`); the operator's load balancer forwards the client's
    // `Authorization` header, and its health check and metrics use `/health` and `/metrics`,
    // which vLLM leaves open.
    let api_key =
        server
            .api_key()
            .map(|secret| InferenceEndpointConfigWorkerEnvironmentVariables {
                name: VllmServer::API_KEY_ENV.to_owned(),
                value: None,
                value_from: Some(InferenceEndpointConfigWorkerEnvironmentVariablesValueFrom {
                    secret_key_ref: Some(
                        InferenceEndpointConfigWorkerEnvironmentVariablesValueFromSecretKeyRef {
                            key: secret.key.clone(),
                            name: Some(secret.name.clone()),
                            optional: Some(false),
                        },
                    ),
                    ..Default::default()
                }),
            });
    let env: Vec<_> = api_key
        .into_iter()
        .chain(server.environment().iter().map(|(name, value)| {
            InferenceEndpointConfigWorkerEnvironmentVariables {
                name: name.clone(),
                value: Some(value.clone()),
                value_from: None,
            }
        }))
        .collect();
    let startup_probe = budget.map(|b| InferenceEndpointConfigWorkerProbesStartupProbe {
        http_get: Some(InferenceEndpointConfigWorkerProbesStartupProbeHttpGet {
            path: Some("/health".to_owned()),
            port: IntOrString::Int(VLLM_PORT),
            ..Default::default()
        }),
        period_seconds: Some(10),
        // The weights are already on the volume when the worker starts: load plus warm-up.
        failure_threshold: Some(probe_threshold((b.load_secs + b.warmup_secs) * 3 / 2, 10)),
        ..Default::default()
    });
    let instance = crate::catalog::instance(ep.instance_type());
    let spec = InferenceEndpointConfigSpec {
        model_name: server.served_name().to_owned(),
        instance_type: instance.map(|i| i.ml_name()),
        invocation_endpoint: Some("v1/chat/completions".to_owned()),
        replicas: Some(ep.replica_count()),
        auto_scaling_spec: ep.autoscaling_config().map(|a| auto_scaling_spec(ep, a)),
        max_deploy_time_in_seconds: budget.map(|b| i32::try_from(b.total_secs).unwrap_or(i32::MAX)),
        model_source_config: model_source(stack, server),
        worker: InferenceEndpointConfigWorker {
            image: server.image_reference(),
            args: Some(server.args(MODEL_MOUNT_PATH, gpus)),
            environment_variables: (!env.is_empty()).then_some(env),
            model_invocation_port: InferenceEndpointConfigWorkerModelInvocationPort {
                container_port: VLLM_PORT,
                name: Some("http".to_owned()),
            },
            model_volume_mount: InferenceEndpointConfigWorkerModelVolumeMount {
                name: "model-weights".to_owned(),
                mount_path: Some(MODEL_MOUNT_PATH.to_owned()),
            },
            resources: InferenceEndpointConfigWorkerResources {
                requests: Some(gpu_quantity.clone()),
                limits: Some(gpu_quantity),
                claims: None,
            },
            probes: Some(InferenceEndpointConfigWorkerProbes {
                startup_probe,
                // Readiness on `/health`, which vLLM leaves open when an API key guards the
                // `/v1` routes, instead of the operator's unstated default.
                readiness_probe: Some(InferenceEndpointConfigWorkerProbesReadinessProbe {
                    http_get: Some(InferenceEndpointConfigWorkerProbesReadinessProbeHttpGet {
                        path: Some("/health".to_owned()),
                        port: IntOrString::Int(VLLM_PORT),
                        ..Default::default()
                    }),
                    period_seconds: Some(10),
                    failure_threshold: Some(3),
                    timeout_seconds: Some(5),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        },
        kubernetes: release_check(server, "IfNotPresent")
            .as_ref()
            .and_then(operator_init_container)
            .map(|c| InferenceEndpointConfigKubernetes {
                init_containers: Some(vec![c]),
                ..Default::default()
            }),
        load_balancer: Some(InferenceEndpointConfigLoadBalancer {
            health_check_path: Some("/health".to_owned()),
            routing_algorithm: None,
        }),
        metrics: Some(InferenceEndpointConfigMetrics {
            enabled: Some(true),
            metrics_scrape_interval_seconds: None,
            model_metrics: Some(InferenceEndpointConfigMetricsModelMetrics {
                path: Some("/metrics".to_owned()),
                port: Some(VLLM_PORT),
            }),
        }),
        ..Default::default()
    };
    InferenceEndpointConfig {
        metadata: ObjectMeta {
            name: Some(ep.object_name().to_owned()),
            namespace: Some(ep.object_namespace().to_owned()),
            labels: Some(labels(stack, ep.object_name())),
            ..Default::default()
        },
        spec,
    }
}

/// The start-up check of the engine release ([`release_check`]), run with `python3 -c`.
const RELEASE_CHECK: &str = include_str!("../assets/check_engine_release.py");

/// The serving pod's first init container, when the image's tag names a release
/// (`v0.27.0`): in the server's own image, it stops the pod with a message unless vLLM's
/// installed version is that release, the one the server's options and variables were
/// checked against at synthesis (`validate::engine`). It reads the package's metadata only
/// (well under a second, nothing imported); the image is the one the server pulls anyway.
pub fn release_check(server: &VllmServer, image_pull_policy: &str) -> Option<Container> {
    let release = server.engine_release()?;
    let small = |cpu: &str, memory: &str| {
        BTreeMap::from([("cpu".to_owned(), q(cpu)), ("memory".to_owned(), q(memory))])
    };
    Some(Container {
        name: "engine-release".to_owned(),
        image: Some(server.image_reference()),
        image_pull_policy: Some(image_pull_policy.to_owned()),
        command: Some(vec![
            "python3".to_owned(),
            "-B".to_owned(),
            "-c".to_owned(),
            RELEASE_CHECK.to_owned(),
            "vllm".to_owned(),
            release,
            server.image_reference(),
        ]),
        resources: Some(ResourceRequirements {
            requests: Some(small("100m", "128Mi")),
            limits: Some(small("500m", "256Mi")),
            ..Default::default()
        }),
        security_context: Some(crate::resources::kubernetes::locked_down_container()),
        ..Default::default()
    })
}

/// [`release_check`] as the Inference Operator's CRD spells an init container (the same
/// Kubernetes `Container` schema).
fn operator_init_container(
    c: &Container,
) -> Option<InferenceEndpointConfigKubernetesInitContainers> {
    serde_json::to_value(c)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
}

fn probe_threshold(seconds: u64, period: u64) -> i32 {
    i32::try_from(seconds.div_ceil(period).max(1)).unwrap_or(i32::MAX)
}

/// Where the Hugging Face cache (the downloaded weights) lives in the container.
pub const HF_CACHE: &str = "/root/.cache/huggingface";

const GIB: u64 = 1 << 30;

/// Seconds Kubernetes gives a stopping server to finish the requests it holds
/// (`terminationGracePeriodSeconds`): the drain a reservation's timeline allows before its
/// nodes go.
pub const TERMINATION_GRACE_SECS: u64 = 60;

/// The minutes a server needs to finish its requests once told to stop: its termination
/// grace, in whole minutes. A reservation's drain comes that long before its nodes go.
pub fn drain_minutes() -> i64 {
    crate::catalog::capacity::minutes_from_secs(TERMINATION_GRACE_SECS)
}

/// The shared memory (`/dev/shm`, memory-backed) a vLLM pod on `gpus` GPUs gets, GiB: 8 per
/// GPU, for NCCL and the message queue between vLLM's worker processes.
pub fn shm_gib(gpus: u32) -> u64 {
    8 * u64::from(gpus)
}

fn q(s: impl Into<String>) -> Quantity {
    Quantity(s.into())
}

/// What runs a deployment's replicas.
pub enum Workload {
    /// One pod per replica, on one node.
    Deployment(Box<Deployment>),
    /// One group of pods per replica, one pod (a pipeline stage of all the node's GPUs) on each
    /// of its nodes: a leader running the API server and headless workers, created, restarted
    /// and deleted together.
    Group(Box<LeaderWorkerSet>),
}

/// The label LeaderWorkerSet gives each pod of a group with its index, `0` for the leader
/// (kubernetes-sigs/lws v0.10.0, `api/leaderworkerset/v1/leaderworkerset_types.go`).
pub const LWS_WORKER_INDEX_LABEL: &str = "leaderworkerset.sigs.k8s.io/worker-index";

/// The fabric a multi-node replica's NCCL must use, or fail: `NCCL_NET` names the network
/// plugin NCCL initialises, and none other (NCCL's environment variables page: "Forces NCCL to
/// use a specific network, for example to make sure NCCL uses an external plugin and doesn't
/// automatically fall back on the internal IB or Socket implementation"; NCCL v2.30.7-1
/// `ncclNetInit` returns `ncclInvalidUsage`, "Failed to initialize any NET plugin", when no
/// plugin of that name loads). `Libfabric` is the name aws-ofi-nccl registers (v1.21.1,
/// `src/nccl_ofi_interface_nvidia.cpp`). `FI_PROVIDER=efa` keeps libfabric on the EFA provider
/// (NVIDIA Dynamo's EFA guide). An image without aws-ofi-nccl, or a pod without EFA devices,
/// then fails at start-up with NCCL's message instead of serving over TCP sockets.
pub const MULTI_NODE_FABRIC_ENV: [(&str, &str); 2] =
    [("NCCL_NET", "Libfabric"), ("FI_PROVIDER", "efa")];

/// The port the bandwidth gate's rendezvous listens on in the leader pod (vLLM's own process
/// group takes 29501 once the gate has passed).
pub const FABRIC_CHECK_PORT: u16 = 29502;

const FABRIC_CHECK: &str = include_str!("../assets/check_fabric.py");

/// The group's bandwidth gate, an init container of every pod of a multi-node replica, after the
/// release check: in the server's image (which has torch and NCCL), on the GPUs, EFA devices and
/// environment the server gets next, one process per GPU all-reduces 1 GiB over every GPU of
/// the group and the pod stops unless NCCL's bus bandwidth reaches `floor_gbs`
/// ([`InstanceType::all_reduce_floor_gbs`](crate::catalog::InstanceType::all_reduce_floor_gbs)).
/// A replica whose fabric fell back to TCP fails at start-up with the figure, instead of
/// serving tens of times slower.
fn fabric_check(server: &Container, gpus: u32, floor_gbs: f64) -> Container {
    let fabric_env = server.env.as_ref().map(|env| {
        env.iter()
            .filter(|e| MULTI_NODE_FABRIC_ENV.iter().any(|(k, _)| e.name == *k))
            .cloned()
            .collect::<Vec<_>>()
    });
    Container {
        name: "fabric-check".to_owned(),
        image: server.image.clone(),
        image_pull_policy: server.image_pull_policy.clone(),
        command: Some(vec![
            "python3".to_owned(),
            "-B".to_owned(),
            "-c".to_owned(),
            FABRIC_CHECK.to_owned(),
            gpus.to_string(),
            format!("{floor_gbs:.1}"),
            FABRIC_CHECK_PORT.to_string(),
        ]),
        env: fabric_env,
        resources: server.resources.clone(),
        // NCCL keeps its intra-node buffers in shared memory.
        volume_mounts: server.volume_mounts.as_ref().map(|mounts| {
            mounts
                .iter()
                .filter(|m| m.mount_path == "/dev/shm")
                .cloned()
                .collect()
        }),
        security_context: server.security_context.clone(),
        ..Default::default()
    }
}

/// The objects of one deployment, in apply order.
pub struct VllmObjects {
    /// The namespace.
    pub namespace: Namespace,
    /// The pods' service account (no token mounted).
    pub service_account: ServiceAccount,
    /// The server's pods.
    pub workload: Workload,
    /// The checkov rules the server's pod cannot meet, with reasons: acknowledged on the
    /// workload.
    pub deployment_acknowledgements: Vec<(Rule, &'static str)>,
    /// Port 8000.
    pub service: Service,
    /// At most one replica down for voluntary disruptions.
    pub disruption_budget: PodDisruptionBudget,
    /// Ingress to port 8000 only.
    pub network_policy: NetworkPolicy,
    /// KEDA's objects, when the deployment autoscales.
    pub autoscaling: Option<KedaObjects>,
    /// Kueue's objects admitting each group whole, when a replica spans several nodes.
    pub gang: Option<super::gang::GangObjects>,
}

/// The KEDA objects scaling a Deployment.
pub struct KedaObjects {
    /// Pod Identity of the KEDA operator for the Prometheus trigger (SigV4 to AMP).
    pub trigger_authentication: TriggerAuthentication,
    /// The Deployment's scaler.
    pub scaled_object: ScaledObject,
}

/// The name of the `TriggerAuthentication` of a Deployment named `name`.
pub fn trigger_authentication_name(name: &str) -> String {
    format!("{name}-amp")
}

/// The ScaledObject and TriggerAuthentication scaling `d` with `a`, named and labelled by
/// `meta`.
///
/// The trigger is KEDA's `prometheus` scaler with `awsRegion` set, which signs every query
/// with SigV4 for service `aps` (KEDA v2.17.1 `pkg/scalers/aws/aws_sigv4.go`), with the
/// credentials the TriggerAuthentication names: `podIdentity.provider: aws` without a role ARN
/// is the KEDA operator's own (its EKS Pod Identity association, `KedaOperatorRole`;
/// `pkg/scalers/aws/aws_common.go`, `GetAwsAuthorization`). The metric is an `AverageValue`:
/// the HPA divides the query's value by the current replicas and compares it with the
/// target. `ignoreNullValues: "false"` makes an empty result an error, so a query that finds
/// no series (a relabelled or stopped scrape) holds the replicas where they are instead of
/// reading as an idle server and scaling down.
fn keda_objects(
    stack: &Stack,
    d: &VllmDeployment,
    a: &Autoscaling,
    meta: ObjectMeta,
) -> KedaObjects {
    use crate::resources::kubernetes::crd::scaled_object::*;
    use crate::resources::kubernetes::crd::trigger_authentication::*;
    let auth_name = trigger_authentication_name(d.object_name());
    let trigger_authentication = TriggerAuthentication {
        metadata: ObjectMeta {
            name: Some(auth_name.clone()),
            ..meta.clone()
        },
        spec: TriggerAuthenticationSpec {
            pod_identity: Some(TriggerAuthenticationPodIdentity {
                provider: "aws".to_owned(),
                identity_owner: Some("keda".to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        },
    };
    let metadata = BTreeMap::from([
        ("serverAddress".to_owned(), a.server_address().to_owned()),
        ("query".to_owned(), a.query_for(d.server().served_name())),
        ("threshold".to_owned(), format_target(a.target())),
        ("awsRegion".to_owned(), stack.region().to_owned()),
        ("ignoreNullValues".to_owned(), "false".to_owned()),
    ]);
    let secs = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
    let scaled_object = ScaledObject {
        metadata: meta,
        spec: ScaledObjectSpec {
            // A replica over several nodes is a LeaderWorkerSet group, which has the scale
            // subresource (its CRD's `subresources.scale`), and KEDA's operator may scale any
            // (`*/scale` in its ClusterRole).
            scale_target_ref: ScaledObjectScaleTargetRef {
                api_version: Some(if d.nodes() > 1 {
                    "leaderworkerset.x-k8s.io/v1".to_owned()
                } else {
                    "apps/v1".to_owned()
                }),
                kind: Some(if d.nodes() > 1 {
                    "LeaderWorkerSet".to_owned()
                } else {
                    "Deployment".to_owned()
                }),
                name: d.object_name().to_owned(),
                ..Default::default()
            },
            min_replica_count: Some(a.min()),
            max_replica_count: Some(a.max()),
            polling_interval: Some(secs(a.polling_interval())),
            cooldown_period: Some(secs(a.cooldown())),
            advanced: Some(ScaledObjectAdvanced {
                horizontal_pod_autoscaler_config: Some(
                    ScaledObjectAdvancedHorizontalPodAutoscalerConfig {
                        behavior: Some(ScaledObjectAdvancedHorizontalPodAutoscalerConfigBehavior {
                            scale_up: Some(
                                ScaledObjectAdvancedHorizontalPodAutoscalerConfigBehaviorScaleUp {
                                    stabilization_window_seconds: Some(secs(
                                        a.scale_up_stabilization(),
                                    )),
                                    ..Default::default()
                                },
                            ),
                            scale_down: Some(
                                ScaledObjectAdvancedHorizontalPodAutoscalerConfigBehaviorScaleDown {
                                    stabilization_window_seconds: Some(secs(
                                        a.scale_down_stabilization(),
                                    )),
                                    ..Default::default()
                                },
                            ),
                        }),
                        name: None,
                    },
                ),
                ..Default::default()
            }),
            triggers: vec![ScaledObjectTriggers {
                r#type: "prometheus".to_owned(),
                name: Some("vllm-queue".to_owned()),
                metric_type: Some("AverageValue".to_owned()),
                metadata,
                authentication_ref: Some(ScaledObjectTriggersAuthenticationRef {
                    kind: Some("TriggerAuthentication".to_owned()),
                    name: auth_name,
                }),
                ..Default::default()
            }],
            ..Default::default()
        },
    };
    KedaObjects {
        trigger_authentication,
        scaled_object,
    }
}

/// A target value as KEDA's metadata string: integers without a fraction.
fn format_target(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// The `autoScalingSpec` of an endpoint scaling with `a`: the operator's Prometheus trigger
/// (an average per replica, `metricType: Average`), the replica bounds, the polling interval,
/// the cooldown and the HPA's stabilization windows.
fn auto_scaling_spec(
    ep: &InferenceEndpoint,
    a: &Autoscaling,
) -> InferenceEndpointConfigAutoScalingSpec {
    let secs = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
    InferenceEndpointConfigAutoScalingSpec {
        min_replica_count: Some(a.min()),
        max_replica_count: Some(a.max()),
        polling_interval: Some(secs(a.polling_interval())),
        cooldown_period: Some(secs(a.cooldown())),
        scale_up_stabilization_time: Some(secs(a.scale_up_stabilization())),
        scale_down_stabilization_time: Some(secs(a.scale_down_stabilization())),
        prometheus_trigger: Some(InferenceEndpointConfigAutoScalingSpecPrometheusTrigger {
            name: Some("vllm-queue".to_owned()),
            server_address: Some(a.server_address().to_owned()),
            query: Some(a.query_for(ep.server().served_name())),
            target_value: Some(a.target()),
            metric_type: Some("Average".to_owned()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The checks checkov reports on the vLLM pod that the image's design rules out, with reasons
/// (acknowledged on the Deployment; written as `checkov.io/skipN` annotations).
const CHECKOV_SKIPS: &[(Rule, &str)] = &[
    (Rule::K8S_WRITABLE_ROOT_FILESYSTEM, "vLLM writes compile and kernel caches under its home directory; the root filesystem stays writable"),
    (Rule::K8S_ROOT_CONTAINERS, "the vllm/vllm-openai image runs as root and keeps its caches under /root; privilege escalation and every capability are dropped instead"),
    (Rule::K8S_LOW_UID, "the vllm/vllm-openai image runs as root (see CKV_K8S_23)"),
];

/// Acknowledged only for an image without a digest (which validation reports, HF0417).
const CHECKOV_SKIP_NO_DIGEST: (Rule, &str) = (
    Rule::K8S_IMAGE_WITHOUT_DIGEST,
    "the image is pinned by tag only (warning HF0417); pin a digest with VllmServer::image_digest",
);

/// The objects of `d` in stack `stack`.
pub fn deployment(stack: &Stack, tags: &crate::app::Tags, d: &VllmDeployment) -> VllmObjects {
    let name = d.object_name().to_owned();
    let ns = d.object_namespace().to_owned();
    let server = d.server();
    let gpus = d.gpu_count();
    let labels = BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), name.clone()),
        (
            "app.kubernetes.io/component".to_owned(),
            "model-server".to_owned(),
        ),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            "hyperforge".to_owned(),
        ),
        (
            "app.kubernetes.io/part-of".to_owned(),
            stack.name().to_owned(),
        ),
    ]);
    let selector = BTreeMap::from([("app.kubernetes.io/name".to_owned(), name.clone())]);
    let meta = |annotations: Option<BTreeMap<String, String>>| ObjectMeta {
        name: Some(name.clone()),
        namespace: Some(ns.clone()),
        labels: Some(labels.clone()),
        annotations,
        ..Default::default()
    };

    // The pod downloads the weights itself: startup covers download, load and warm-up. The
    // progress deadline comes from the same budget, so a rollout that is still within its
    // startup probe is never declared failed (ProgressDeadlineExceeded).
    let period = STARTUP_PROBE_PERIOD_SECS;
    let startup_failures =
        i32::try_from(server.startup_probe_secs(d.instance_type(), false) / period)
            .unwrap_or(i32::MAX);
    let progress_deadline =
        i32::try_from(server.rollout_deadline_secs(d.instance_type(), false)).unwrap_or(i32::MAX);
    let streamed = server.staged_url();
    let health = |period: i32, failures: i32| Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/health".to_owned()),
            port: IntOrString::String("http".to_owned()),
            ..Default::default()
        }),
        period_seconds: Some(period),
        failure_threshold: Some(failures),
        timeout_seconds: Some(5),
        ..Default::default()
    };
    // Room for the weights plus a tenth, on the node's local NVMe (RAID 0 ephemeral storage).
    // Streamed from S3, only the configuration, tokenizer and the repository's code land there.
    let cache_gib = match &streamed {
        Some(_) => STREAMED_CACHE_GIB,
        None => server
            .weights()
            .map_or(1024, |b| b.saturating_add(b / 10).div_ceil(GIB)),
    };
    let shm_gib = shm_gib(gpus);

    let mut env = vec![EnvVar {
        name: "HF_HOME".to_owned(),
        value: Some(HF_CACHE.to_owned()),
        ..Default::default()
    }];
    if let Some(secret) = server.hf_token() {
        env.push(EnvVar {
            name: "HF_TOKEN".to_owned(),
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: secret.name.clone(),
                    key: secret.key.clone(),
                    optional: Some(false),
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    if let Some(secret) = server.api_key() {
        env.push(EnvVar {
            name: VllmServer::API_KEY_ENV.to_owned(),
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: secret.name.clone(),
                    key: secret.key.clone(),
                    optional: Some(false),
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    if streamed.is_some() {
        // The streamer's S3 client and vLLM's own (boto3) read the bucket's region from here.
        env.push(EnvVar {
            name: "AWS_REGION".to_owned(),
            value: Some(stack.region().to_owned()),
            ..Default::default()
        });
    }
    let multi_node = d.nodes() > 1;
    if multi_node {
        env.extend(MULTI_NODE_FABRIC_ENV.iter().map(|(k, v)| EnvVar {
            name: (*k).to_owned(),
            value: Some((*v).to_owned()),
            ..Default::default()
        }));
    }
    env.extend(server.environment().iter().map(|(k, v)| EnvVar {
        name: k.clone(),
        value: Some(v.clone()),
        ..Default::default()
    }));

    let mut limits = BTreeMap::from([
        ("nvidia.com/gpu".to_owned(), q(gpus.to_string())),
        ("memory".to_owned(), q(format!("{}Gi", 1024 + shm_gib))),
        ("cpu".to_owned(), q((gpus * 20).to_string())),
        (
            "ephemeral-storage".to_owned(),
            q(format!("{}Gi", cache_gib + 100)),
        ),
    ]);
    let mut requests = BTreeMap::from([
        ("nvidia.com/gpu".to_owned(), q(gpus.to_string())),
        ("memory".to_owned(), q(format!("{}Gi", 256 + shm_gib))),
        ("cpu".to_owned(), q((gpus * 8).to_string())),
        (
            "ephemeral-storage".to_owned(),
            q(format!("{}Gi", cache_gib)),
        ),
    ]);
    if d.efa_enabled() {
        let efa = crate::catalog::instance(d.instance_type()).map_or(0, |i| i.efa_max);
        for map in [&mut limits, &mut requests] {
            map.insert("vpc.amazonaws.com/efa".to_owned(), q(efa.to_string()));
            map.insert("hugepages-2Mi".to_owned(), q("5120Mi"));
        }
    }

    if multi_node {
        // Guaranteed QoS: each node of a group holds one pod, so what it may use is what it
        // asks for, and the kubelet evicts it last.
        requests = limits.clone();
    }
    let container = Container {
        name: "vllm".to_owned(),
        image: Some(server.image_reference()),
        image_pull_policy: Some(d.image_pull_policy().to_owned()),
        args: Some(match &streamed {
            Some(url) => server.streamed_args(url, gpus),
            None => server.hub_args(gpus),
        }),
        env: Some(env),
        ports: Some(vec![ContainerPort {
            name: Some("http".to_owned()),
            container_port: VLLM_PORT,
            protocol: Some("TCP".to_owned()),
            ..Default::default()
        }]),
        resources: Some(ResourceRequirements {
            limits: Some(limits),
            requests: Some(requests),
            ..Default::default()
        }),
        startup_probe: Some(health(period as i32, startup_failures)),
        readiness_probe: Some(health(10, 3)),
        liveness_probe: Some(health(10, 6)),
        volume_mounts: Some(vec![
            VolumeMount {
                name: "dshm".to_owned(),
                mount_path: "/dev/shm".to_owned(),
                ..Default::default()
            },
            VolumeMount {
                name: "hf-cache".to_owned(),
                mount_path: HF_CACHE.to_owned(),
                ..Default::default()
            },
        ]),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            privileged: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_owned()]),
                add: None,
            }),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_owned(),
                localhost_profile: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    };

    // vLLM reads its API key from `VLLM_API_KEY` or the command line only, and the Hub
    // client its token from `HF_TOKEN`: an environment variable from a Secret is the way in.
    let secret_env = (server.api_key().is_some() || server.hf_token().is_some()).then_some((
        Rule::K8S_SECRETS_AS_ENVIRONMENT,
        "vLLM reads its API key (VLLM_API_KEY) and the Hub token (HF_TOKEN) from the environment only; both come from Secrets, never literals",
    ));
    let no_digest = server
        .pinned_digest()
        .is_none()
        .then_some(CHECKOV_SKIP_NO_DIGEST);
    let deployment_acknowledgements = CHECKOV_SKIPS
        .iter()
        .copied()
        .chain(no_digest)
        .chain(secret_env)
        .collect();
    let pod = PodSpec {
        service_account_name: Some(name.clone()),
        automount_service_account_token: Some(false),
        node_selector: Some(BTreeMap::from([(
            "node.kubernetes.io/instance-type".to_owned(),
            d.instance_type().to_owned(),
        )])),
        tolerations: Some(vec![Toleration {
            key: Some(GPU_TAINT.to_owned()),
            operator: Some("Exists".to_owned()),
            effect: Some("NoSchedule".to_owned()),
            ..Default::default()
        }]),
        security_context: Some(PodSecurityContext {
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_owned(),
                localhost_profile: None,
            }),
            ..Default::default()
        }),
        termination_grace_period_seconds: Some(TERMINATION_GRACE_SECS as i64),
        init_containers: release_check(server, d.image_pull_policy()).map(|c| vec![c]),
        containers: vec![container],
        volumes: Some(vec![
            Volume {
                name: "dshm".to_owned(),
                empty_dir: Some(EmptyDirVolumeSource {
                    medium: Some("Memory".to_owned()),
                    size_limit: Some(q(format!("{shm_gib}Gi"))),
                }),
                ..Default::default()
            },
            Volume {
                name: "hf-cache".to_owned(),
                empty_dir: Some(EmptyDirVolumeSource {
                    medium: None,
                    size_limit: Some(q(format!("{cache_gib}Gi"))),
                }),
                ..Default::default()
            },
        ]),
        ..Default::default()
    };
    let mut gang = None;
    let workload = if multi_node {
        let lws = leader_worker_set(d, meta(None), &labels, pod);
        let groups = d
            .autoscaling_config()
            .map_or(d.replica_count(), |a| a.max());
        let gang_pod = lws
            .spec
            .leader_worker_template
            .leader_template
            .as_ref()
            .and_then(|t| t.spec.clone())
            .unwrap_or_default();
        let objects = super::gang::gang_objects(
            &name,
            &ns,
            &labels,
            &gang_pod,
            d.nodes(),
            u32::try_from(groups).unwrap_or(0),
        );
        let mut lws = lws;
        lws.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(
                super::gang::QUEUE_LABEL.to_owned(),
                objects
                    .local_queue
                    .metadata
                    .name
                    .clone()
                    .unwrap_or_default(),
            );
        gang = Some(objects);
        Workload::Group(Box::new(lws))
    } else {
        Workload::Deployment(Box::new(Deployment {
            metadata: meta(None),
            spec: Some(DeploymentSpec {
                // With autoscaling, KEDA's HPA owns the count: a `replicas` here would reset it on
                // every apply (and start a 20-80 minute cold start or stop a warm replica).
                replicas: d.autoscaling_config().is_none().then(|| d.replica_count()),
                progress_deadline_seconds: Some(progress_deadline),
                selector: LabelSelector {
                    match_labels: Some(selector.clone()),
                    ..Default::default()
                },
                // Each replica holds a whole node's GPUs: a rolling update would wait for GPUs that
                // do not exist.
                strategy: Some(DeploymentStrategy {
                    type_: Some("Recreate".to_owned()),
                    rolling_update: None,
                }),
                template: crate::resources::kubernetes::pod_template(&labels, pod),
                ..Default::default()
            }),
            ..Default::default()
        }))
    };

    let mut annotations = BTreeMap::new();
    let service_type = match d.exposure() {
        Exposure::ClusterIp => "ClusterIP",
        Exposure::InternalLoadBalancer | Exposure::InternetFacingLoadBalancer => {
            let scheme = if d.exposure() == Exposure::InternetFacingLoadBalancer {
                "internet-facing"
            } else {
                "internal"
            };
            annotations.insert(
                "service.beta.kubernetes.io/aws-load-balancer-type".to_owned(),
                "external".to_owned(),
            );
            annotations.insert(
                "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type".to_owned(),
                "ip".to_owned(),
            );
            annotations.insert(LB_SCHEME_ANNOTATION.to_owned(), scheme.to_owned());
            // The target group checks vLLM's `/health` over HTTP on the traffic port, which
            // for `ip` targets is the pod's port 8000. The Load Balancer Controller's default
            // protocol is TCP (v2.13.2 docs/guide/service/annotations.md, healthcheck-protocol),
            // which ignores the path and passes as soon as the port accepts connections.
            annotations.insert(
                "service.beta.kubernetes.io/aws-load-balancer-healthcheck-protocol".to_owned(),
                "http".to_owned(),
            );
            annotations.insert(
                "service.beta.kubernetes.io/aws-load-balancer-healthcheck-port".to_owned(),
                "traffic-port".to_owned(),
            );
            annotations.insert(
                "service.beta.kubernetes.io/aws-load-balancer-healthcheck-path".to_owned(),
                "/health".to_owned(),
            );
            // A controller the stack installs tags its load balancers with the stack's tags
            // (`defaultTags`); one the cluster runs already knows none of them, so the Service
            // asks for them (`key=value` pairs; AWS tags hold no comma).
            let installs_controller = stack.stages().iter().any(|s| {
                matches!(&s.kind, crate::app::StageKind::Helm(r) if r.is_aws_load_balancer_controller())
            });
            if !installs_controller {
                let pairs: Vec<String> = tags
                    .iter()
                    .filter(|(k, v)| !k.contains([',', '=']) && !v.contains(','))
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                if !pairs.is_empty() {
                    annotations.insert(
                        "service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags"
                            .to_owned(),
                        pairs.join(","),
                    );
                }
            }
            "LoadBalancer"
        }
    };
    // The load balancer's subnets (given, or the serving nodes'): named on the Service (the controller resolves `Name` tags
    // in the cluster's VPC) and admitted by the NetworkPolicy by their blocks.
    let lb_subnets: Vec<SubnetFacts> = if service_type == "LoadBalancer" {
        d.effective_lb_subnets(stack)
            .iter()
            .filter_map(|s| subnet_facts(stack, s))
            .collect()
    } else {
        Vec::new()
    };
    if !lb_subnets.is_empty() {
        let names: Vec<&str> = lb_subnets.iter().map(|f| f.name.as_str()).collect();
        annotations.insert(LB_SUBNETS_ANNOTATION.to_owned(), names.join(", "));
    }
    for (k, v) in d.service_annotations() {
        annotations.entry(k.clone()).or_insert_with(|| v.clone());
    }
    // A group's API server is its leader's; workers serve no HTTP.
    let mut service_selector = selector.clone();
    if multi_node {
        service_selector.insert(LWS_WORKER_INDEX_LABEL.to_owned(), "0".to_owned());
    }
    let service = Service {
        metadata: meta((!annotations.is_empty()).then_some(annotations)),
        spec: Some(ServiceSpec {
            type_: Some(service_type.to_owned()),
            selector: Some(service_selector),
            ports: Some(vec![ServicePort {
                name: Some("http".to_owned()),
                port: VLLM_PORT,
                target_port: Some(IntOrString::String("http".to_owned())),
                protocol: Some("TCP".to_owned()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };

    VllmObjects {
        namespace: Namespace {
            metadata: ObjectMeta {
                name: Some(ns.clone()),
                labels: Some(BTreeMap::from([
                    (
                        "app.kubernetes.io/managed-by".to_owned(),
                        "hyperforge".to_owned(),
                    ),
                    (
                        "pod-security.kubernetes.io/enforce".to_owned(),
                        "baseline".to_owned(),
                    ),
                ])),
                ..Default::default()
            },
            ..Default::default()
        },
        service_account: ServiceAccount {
            metadata: meta(None),
            automount_service_account_token: Some(false),
            ..Default::default()
        },
        workload,
        deployment_acknowledgements,
        service,
        disruption_budget: PodDisruptionBudget {
            metadata: meta(None),
            spec: Some(PodDisruptionBudgetSpec {
                // One replica at a time: node drains (Capacity Block end, upgrades) proceed, and
                // no voluntary disruption takes more than one replica.
                max_unavailable: Some(IntOrString::Int(1)),
                selector: Some(LabelSelector {
                    match_labels: Some(selector.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        },
        autoscaling: d
            .autoscaling_config()
            .map(|a| keda_objects(stack, d, a, meta(None))),
        gang,
        network_policy: NetworkPolicy {
            metadata: meta(None),
            spec: Some(NetworkPolicySpec {
                pod_selector: Some(LabelSelector {
                    match_labels: Some(selector.clone()),
                    ..Default::default()
                }),
                policy_types: Some(vec!["Ingress".to_owned()]),
                ingress: Some(ingress_rules(
                    &lb_subnets,
                    d.clients(),
                    multi_node.then_some(&selector),
                )),
                ..Default::default()
            }),
        },
    }
}

/// A replica over `d.nodes()` nodes as one LeaderWorkerSet group of `d.nodes()` pods, one per
/// node: the leader is `pod` with the leader's words of vLLM's multi-node launch, each worker
/// the same pod with the worker's (headless: no API server, so no HTTP port or probes). Leader
/// and workers request the same resources, equal to their limits (Guaranteed QoS), init
/// containers included, and run the bandwidth gate ([`fabric_check`]) before the server.
///
/// - `RecreateGroupOnPodRestart`: a pipeline stage that restarts cannot rejoin a running
///   group, so the whole group is recreated.
/// - `LeaderCreated` start-up (the default, stated): the workers start with the leader. With
///   `LeaderReady` they would wait for a leader that becomes ready only once they have joined.
fn leader_worker_set(
    d: &VllmDeployment,
    metadata: ObjectMeta,
    labels: &BTreeMap<String, String>,
    pod: PodSpec,
) -> LeaderWorkerSet {
    let nodes = d.nodes();
    let floor_gbs =
        crate::catalog::instance(d.instance_type()).map_or(0.0, |i| i.all_reduce_floor_gbs());
    let template = |role: NodeRole| -> PodTemplateSpec {
        let mut pod = pod.clone();
        for c in pod.init_containers.iter_mut().flatten() {
            if let Some(r) = c.resources.as_mut() {
                r.requests = r.limits.clone();
            }
        }
        if let Some(server) = pod.containers.first() {
            let gate = fabric_check(server, d.gpu_count(), floor_gbs);
            pod.init_containers.get_or_insert_with(Vec::new).push(gate);
        }
        if let Some(c) = pod.containers.first_mut() {
            c.args
                .get_or_insert_with(Vec::new)
                .extend(multi_node_args(nodes, role));
            if role == NodeRole::Worker {
                c.ports = None;
                c.startup_probe = None;
                c.readiness_probe = None;
                c.liveness_probe = None;
            }
        }
        crate::resources::kubernetes::pod_template(labels, pod)
    };
    LeaderWorkerSet {
        metadata,
        spec: LeaderWorkerSetSpec {
            // With autoscaling, KEDA's HPA owns the count, as for a Deployment.
            replicas: d.autoscaling_config().is_none().then(|| d.replica_count()),
            startup_policy: Some("LeaderCreated".to_owned()),
            leader_worker_template: LeaderWorkerSetLeaderWorkerTemplate {
                size: Some(i32::try_from(nodes).unwrap_or(i32::MAX)),
                restart_policy: Some("RecreateGroupOnPodRestart".to_owned()),
                leader_template: Some(template(NodeRole::Leader)),
                worker_template: template(NodeRole::Worker),
                ..Default::default()
            },
            ..Default::default()
        },
    }
}

/// Who may open connections to port 8000: the load balancer, from its subnets' blocks (with
/// `ip` targets and client IP preservation off, the Network Load Balancer connects from its own
/// addresses there, for traffic and health checks), and the named in-cluster clients. Nothing
/// else: other pods of the VPC, including pods on nodes in other subnets, are refused. The
/// node's own address (kubelet probes) is always admitted by the VPC CNI's policy agent
/// (aws-network-policy-agent #65), and `kubectl port-forward` enters the pod through the node,
/// so both keep working. Pods on nodes in the load balancer's subnets share those blocks; the
/// API key still stands between them and the model.
///
/// The pods of a multi-node replica (`group`: their labels) also reach each other on every
/// port: the workers join the leader's torch process group (vLLM's master port, 29501) and
/// NCCL opens its bootstrap sockets on ports of its choosing. Their EFA traffic does not pass
/// through the VPC CNI and needs no rule.
fn ingress_rules(
    lb_subnets: &[SubnetFacts],
    clients: &[Client],
    group: Option<&BTreeMap<String, String>>,
) -> Vec<NetworkPolicyIngressRule> {
    let port = || {
        Some(vec![NetworkPolicyPort {
            port: Some(IntOrString::Int(VLLM_PORT)),
            protocol: Some("TCP".to_owned()),
            ..Default::default()
        }])
    };
    let mut rules = Vec::new();
    if let Some(group) = group {
        rules.push(NetworkPolicyIngressRule {
            ports: None,
            from: Some(vec![NetworkPolicyPeer {
                pod_selector: Some(LabelSelector {
                    match_labels: Some(group.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
        });
    }
    if !lb_subnets.is_empty() {
        rules.push(NetworkPolicyIngressRule {
            ports: port(),
            from: Some(
                lb_subnets
                    .iter()
                    .map(|f| NetworkPolicyPeer {
                        ip_block: Some(IPBlock {
                            cidr: f.cidr.clone(),
                            except: None,
                        }),
                        ..Default::default()
                    })
                    .collect(),
            ),
        });
    }
    if !clients.is_empty() {
        rules.push(NetworkPolicyIngressRule {
            ports: port(),
            from: Some(
                clients
                    .iter()
                    .map(|c| NetworkPolicyPeer {
                        namespace_selector: Some(LabelSelector {
                            match_labels: Some(BTreeMap::from([(
                                "kubernetes.io/metadata.name".to_owned(),
                                c.namespace.clone(),
                            )])),
                            ..Default::default()
                        }),
                        pod_selector: (!c.pod_labels.is_empty()).then(|| LabelSelector {
                            match_labels: Some(c.pod_labels.clone()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    })
                    .collect(),
            ),
        });
    }
    rules
}

/// Where the operator gets the weights: the staged copy in S3 (the prefix of the pinned
/// revision, fetched through the S3 CSI driver into the model volume before the worker starts),
/// else the Hugging Face Hub at the pinned commit.
fn model_source(stack: &Stack, server: &VllmServer) -> InferenceEndpointConfigModelSourceConfig {
    if let (Some(store), Some(revision)) = (server.staged_weights(), server.model_revision()) {
        let prefix = crate::constructs::ModelStoreHandle::prefix(server.model_id(), revision);
        return InferenceEndpointConfigModelSourceConfig {
            model_source_type: "s3".to_owned(),
            prefetch_enabled: Some(true),
            model_location: Some(prefix.trim_end_matches('/').to_owned()),
            s3_storage: Some(InferenceEndpointConfigModelSourceConfigS3Storage {
                bucket_name: store.kubernetes_bucket_name(),
                region: stack.region().to_owned(),
            }),
            ..Default::default()
        };
    }
    InferenceEndpointConfigModelSourceConfig {
        model_source_type: "huggingface".to_owned(),
        prefetch_enabled: Some(true),
        hugging_face_model: Some(InferenceEndpointConfigModelSourceConfigHuggingFaceModel {
            model_id: server.model_id().to_owned(),
            token_secret_ref: server.hf_token().map(|t| {
                InferenceEndpointConfigModelSourceConfigHuggingFaceModelTokenSecretRef {
                    key: t.key.clone(),
                    name: Some(t.name.clone()),
                    optional: None,
                }
            }),
            commit_sha: server.model_revision().map(str::to_owned),
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constructs::VllmServer;
    use crate::resources::KubeObject;

    /// The YAML of an object serialized once to a `Value` (what the graph holds) is the YAML
    /// of the typed object, key order included.
    fn same_yaml<K>(object: &K)
    where
        K: k8s_openapi::Metadata<Ty = ObjectMeta> + serde::Serialize,
    {
        let typed = serde_yaml::to_string(object).unwrap();
        let kube_object = KubeObject::new(object);
        assert_eq!(serde_yaml::to_string(kube_object.object()).unwrap(), typed);
        assert_eq!(
            kube_object.name(),
            object.metadata().name.as_deref().unwrap()
        );
    }

    #[test]
    fn objects_render_the_same_through_the_resource_layer() {
        let stack = Stack::new("demo", "us-east-1");
        let server = VllmServer::new("moonshotai/Kimi-K3", "vllm/vllm-openai:kimi-k3")
            .hf_token_secret("hf", "token")
            .env("VLLM_USE_V1", "1");
        let d = VllmDeployment::new("Kimi", server.clone(), "p6-b300.48xlarge")
            .efa(true)
            .service_annotation("a", "b");
        let o = deployment(&stack, &crate::app::Tags::new(), &d);
        same_yaml(&o.namespace);
        same_yaml(&o.service_account);
        if let Workload::Deployment(deployment) = &o.workload {
            same_yaml(deployment.as_ref());
        }
        same_yaml(&o.service);
        same_yaml(&o.disruption_budget);
        same_yaml(&o.network_policy);
        let ep = InferenceEndpoint::new("Kimi", server, "ml.p6-b300.48xlarge");
        let config = inference_endpoint_config(&stack, &ep);
        same_yaml(&config);
        let object = KubeObject::new(&config);
        assert_eq!(
            (object.api_version(), object.kind(), object.namespace()),
            (
                "inference.sagemaker.aws.amazon.com/v1",
                "InferenceEndpointConfig",
                Some("default")
            )
        );
    }
}
