//! The generated InferenceEndpointConfig type serializes to a Kubernetes object.

use hyperforge::synth::kubernetes::crd::inference_endpoint_config::*;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;
use std::collections::BTreeMap;

#[test]
fn inference_endpoint_config_object() {
    let mut limits = BTreeMap::new();
    limits.insert("nvidia.com/gpu".to_string(), IntOrString::Int(8));
    limits.insert("memory".to_string(), IntOrString::String("512Gi".into()));
    let spec = InferenceEndpointConfigSpec {
        model_name: "llama".into(),
        instance_type: Some("ml.p5.48xlarge".into()),
        replicas: Some(2),
        worker: InferenceEndpointConfigWorker {
            image: "vllm/vllm-openai:latest".into(),
            resources: InferenceEndpointConfigWorkerResources {
                limits: Some(limits),
                ..Default::default()
            },
            ..Default::default()
        },
        ..Default::default()
    };
    let object = InferenceEndpointConfig::new("llama", spec);
    let value = serde_json::to_value(&object).unwrap();
    assert_eq!(
        value["apiVersion"],
        json!("inference.sagemaker.aws.amazon.com/v1")
    );
    assert_eq!(value["kind"], json!("InferenceEndpointConfig"));
    assert_eq!(value["metadata"]["name"], json!("llama"));
    assert_eq!(value["spec"]["modelName"], json!("llama"));
    assert_eq!(value["spec"]["replicas"], json!(2));
    assert_eq!(
        value["spec"]["worker"]["resources"]["limits"],
        json!({"memory": "512Gi", "nvidia.com/gpu": 8})
    );
    assert!(value["spec"].get("endpointName").is_none());
}
