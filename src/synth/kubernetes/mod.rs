//! The Kubernetes backend: lowering of workloads to Kubernetes objects (the HyperPod
//! Inference Operator's `InferenceEndpointConfig` from generated CRD types) and multi-document
//! YAML in a stable order.

// Generated from the vendored CRDs; items without a schema description carry no doc comment.
#[allow(missing_docs)]
pub mod crd;
pub mod vllm;

use crate::app::{Stack, StageId};
use crate::constructs::vllm::VLLM_PORT;
use crate::constructs::{ConstructRef, InferenceEndpoint};
use crd::inference_endpoint_config::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

/// Where the operator mounts the downloaded weights in the worker container.
pub const MODEL_MOUNT_PATH: &str = "/opt/ml/model";

/// Labels every object carries.
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
/// The operator's init container downloads the weights from Hugging Face into the model volume
/// (with the token, when given, visible to that init container only); vLLM then serves the
/// mounted copy, so the 1.4 TB are fetched once. The defaults the operator would otherwise
/// apply are set to what vLLM needs: invocation path `v1/chat/completions`, load-balancer health
/// check `/health`, metrics scraped from port 8000, and a deploy timeout sized from the weights.
pub fn inference_endpoint_config(stack: &Stack, ep: &InferenceEndpoint) -> InferenceEndpointConfig {
    let server = ep.server();
    let gpus = ep.gpus().unwrap_or(1);
    let budget = server.startup_budget();
    let gpu_quantity =
        BTreeMap::from([("nvidia.com/gpu".to_owned(), IntOrString::Int(gpus as i32))]);
    let env: Vec<_> = server
        .environment()
        .iter()
        .map(
            |(name, value)| InferenceEndpointConfigWorkerEnvironmentVariables {
                name: name.clone(),
                value: Some(value.clone()),
                value_from: None,
            },
        )
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
        max_deploy_time_in_seconds: budget.map(|b| i32::try_from(b.total_secs).unwrap_or(i32::MAX)),
        model_source_config: InferenceEndpointConfigModelSourceConfig {
            model_source_type: "huggingface".to_owned(),
            hugging_face_model: Some(InferenceEndpointConfigModelSourceConfigHuggingFaceModel {
                model_id: server.model_id().to_owned(),
                token_secret_ref: server.hf_token().map(|t| {
                    InferenceEndpointConfigModelSourceConfigHuggingFaceModelTokenSecretRef {
                        key: t.key.clone(),
                        name: Some(t.name.clone()),
                        optional: None,
                    }
                }),
                commit_sha: None,
            }),
            ..Default::default()
        },
        worker: InferenceEndpointConfigWorker {
            image: server.image().to_owned(),
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
            probes: startup_probe.map(|p| InferenceEndpointConfigWorkerProbes {
                startup_probe: Some(p),
                ..Default::default()
            }),
            ..Default::default()
        },
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

fn probe_threshold(seconds: u64, period: u64) -> i32 {
    i32::try_from(seconds.div_ceil(period).max(1)).unwrap_or(i32::MAX)
}

/// The multi-document YAML of a Kubernetes stage: objects in the order their constructs were
/// added.
pub fn stage_yaml(stack: &Stack, stage: StageId) -> Result<String, serde_yaml::Error> {
    let mut out = String::new();
    for node in stack.nodes_in(stage) {
        let Some(construct) = ConstructRef::of(node.construct.as_ref()) else {
            continue;
        };
        let docs: Vec<String> = match construct {
            ConstructRef::InferenceEndpoint(ep) => {
                vec![serde_yaml::to_string(&inference_endpoint_config(
                    stack, ep,
                ))?]
            }
            ConstructRef::VllmDeployment(d) => {
                let o = vllm::objects(stack, d);
                vec![
                    serde_yaml::to_string(&o.namespace)?,
                    serde_yaml::to_string(&o.service_account)?,
                    serde_yaml::to_string(&o.deployment)?,
                    serde_yaml::to_string(&o.service)?,
                    serde_yaml::to_string(&o.disruption_budget)?,
                    serde_yaml::to_string(&o.network_policy)?,
                ]
            }
            ConstructRef::KarpenterNodePool(pool) => pool
                .objects(stack.name())
                .iter()
                .map(serde_yaml::to_string)
                .collect::<Result<_, _>>()?,
            // Constructs of CloudFormation stages emit no Kubernetes objects.
            ConstructRef::Network(_)
            | ConstructRef::SecurityGroup(_)
            | ConstructRef::Eks(_)
            | ConstructRef::Lifecycle(_)
            | ConstructRef::HyperPod(_)
            | ConstructRef::InferenceOperator(_)
            | ConstructRef::NodeGroup(_)
            | ConstructRef::LoadBalancerController(_)
            | ConstructRef::Karpenter(_)
            | ConstructRef::FsxLustre(_) => Vec::new(),
        };
        for doc in docs {
            out.push_str("---\n");
            out.push_str(&doc);
        }
    }
    Ok(out)
}
