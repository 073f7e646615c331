//! # hyperforge
//!
//! Infrastructure as code for serving frontier open-weight models on AWS GPUs. Typed builders
//! describe the VPC, the EKS or SageMaker HyperPod cluster, the GPU instance groups and the
//! capacity behind them, and the vLLM workload; synthesis turns that one description into
//! CloudFormation templates and Kubernetes manifests, ordered into deployment stages, with a
//! `manifest.json` that says what to run in which order.
//!
//! ```
//! use hyperforge::app::Stack;
//! use hyperforge::constructs::*;
//! use hyperforge::App;
//!
//! let mut stack = Stack::new("demo", "us-west-2");
//! let foundation = stack.cloudformation_stage("foundation");
//! let network = stack.add(foundation, Network::new("Network").hyperpod_subnet("usw2-az2"));
//! let sg = stack.add(foundation, ClusterSecurityGroup::new("ClusterSg", &network.vpc));
//! let eks = stack.add(
//!     foundation,
//!     EksCluster::new("Eks", "demo").subnets(&network.private_subnets).vpc(&network.vpc).security_group(&sg.group),
//! );
//! let scripts = stack.add(foundation, LifecycleScripts::new("Lifecycle"));
//! stack.upload_stage("lifecycle-scripts", scripts.upload());
//! stack.helm_stage("hyperpod-dependencies", HelmRelease::hyperpod_dependencies());
//! let cluster = stack.cloudformation_stage("cluster");
//! stack.add(
//!     cluster,
//!     HyperPodCluster::new("HyperPod", "demo", &eks.cluster, &scripts)
//!         .subnet(network.hyperpod_subnet.as_ref().unwrap())
//!         .security_group(&sg.group)
//!         .instance_group(InstanceGroup::new("gpu", "ml.p6-b300.48xlarge").capacity(
//!             Capacity::training_plan(
//!                 "arn:aws:sagemaker:us-west-2:111122223333:training-plan/demo-p6-b300",
//!                 "usw2-az2",
//!             ),
//!         )),
//! );
//! let assembly = App::new().stack(stack).synth().expect("valid description");
//! assert!(assembly.text("demo/04-cluster.template.json").unwrap().contains("AWS::SageMaker::Cluster"));
//! ```
//!
//! The same model on plain EKS: a GPU subnet in the Capacity Block's zone, the cluster, a
//! system node group and a GPU managed node group launched into the block, the NVIDIA device
//! plugin and the AWS Load Balancer Controller as Helm stages, and vLLM at tensor parallel 8
//! behind a Service on port 8000 (an internal Network Load Balancer in the private subnets).
//!
//! ```
//! use hyperforge::app::Stack;
//! use hyperforge::constructs::*;
//! use hyperforge::App;
//!
//! let mut stack = Stack::new("demo", "us-west-2").tag("team", "inference");
//! let foundation = stack.cloudformation_stage("foundation");
//! let network = stack.add(foundation, Network::new("Network").gpu_subnet("usw2-az2"));
//! let sg = stack.add(foundation, ClusterSecurityGroup::new("ClusterSg", &network.vpc));
//! let eks = stack.add(
//!     foundation,
//!     EksCluster::new("Eks", "demo").subnets(&network.private_subnets).vpc(&network.vpc).security_group(&sg.group),
//! );
//! stack.add(foundation, LoadBalancerController::new("LoadBalancerController", &eks.cluster));
//!
//! let nodes = stack.cloudformation_stage("nodes");
//! stack.add(nodes, ManagedNodeGroup::system("SystemNodes", &eks.cluster, &network.private_subnets));
//! stack.add(
//!     nodes,
//!     ManagedNodeGroup::gpu("GpuNodes", &eks.cluster, "p6-b300.48xlarge", network.gpu_subnet.iter())
//!         .capacity(NodeCapacity::capacity_block_of("cr-0123456789abcdef0", "usw2-az2", 1))
//!         .security_group(&sg.group),
//! );
//! stack.helm_stage("nvidia-device-plugin", HelmRelease::nvidia_device_plugin());
//! stack.helm_stage(
//!     "aws-load-balancer-controller",
//!     HelmRelease::aws_load_balancer_controller(&eks.name, "us-west-2", &network.vpc),
//! );
//!
//! let workload = stack.kubernetes_stage("workload");
//! stack.add(
//!     workload,
//!     VllmDeployment::new(
//!         "KimiK3",
//!         VllmServer::new("moonshotai/Kimi-K3", "vllm/vllm-openai:v0.27.0")
//!             .trust_remote_code(true)
//!             .revision("0123456789abcdef0123456789abcdef01234567")
//!             .tensor_parallel_size(8),
//!         "p6-b300.48xlarge",
//!     ),
//! );
//!
//! let assembly = App::new().tag("cost-center", "gpu-42").stack(stack).synth().expect("valid description");
//! let objects = assembly.text("demo/05-workload.yaml").unwrap();
//! assert!(objects.contains("- --tensor-parallel-size\n        - '8'"));
//! assert!(objects.contains("kind: Service") && objects.contains("port: 8000"));
//! // The GPU instances, their volumes and network interfaces carry the app's and stack's tags.
//! let nodes = assembly.text("demo/02-nodes.template.json").unwrap();
//! assert!(nodes.contains("\"network-interface\"") && nodes.contains("gpu-42"));
//! ```
//!
//! References are typed: a subnet handle cannot stand where a VPC is wanted.
//!
//! ```compile_fail
//! # use hyperforge::app::Stack;
//! # use hyperforge::constructs::*;
//! let mut stack = Stack::new("demo", "us-west-2");
//! let s = stack.cloudformation_stage("foundation");
//! let network = stack.add(s, Network::new("Network"));
//! // error[E0308]: expected `&Ref<Vpc>`, found `&Ref<Subnet>`
//! ClusterSecurityGroup::new("Sg", &network.private_subnets[0]);
//! ```
//!
//! Mistakes are reported all at once, each with a stable code, the construct path and a help
//! line; nothing is written while an error stands:
//!
//! ```
//! # use hyperforge::app::Stack;
//! # use hyperforge::constructs::*;
//! # use hyperforge::{App, Code};
//! let mut stack = Stack::new("demo", "us-west-2");
//! let s = stack.cloudformation_stage("foundation");
//! stack.add(s, Network::new("Network").cidr("10.0.0.0/33").availability_zones(1));
//! let errors = App::new().stack(stack).synth().unwrap_err();
//! assert!(errors.contains(Code::InvalidCidr, "demo/Network"));
//! assert!(errors.contains(Code::TooFewAvailabilityZones, "demo/Network"));
//! ```
//!
//! Module map: [`app`] (construct model), [`constructs`] (builders), [`catalog`] (instance and model
//! facts, GPU memory arithmetic), [`diagnostics`], `validate` (model-aware rules and service
//! limits, internal), [`synth`] (backends), [`assembly`] (output), [`cost`] (hourly estimate),
//! [`fleet`] (one description over regions and accounts), `runbook` (the deployment runbook
//! of a stack; feature `runbook`), `stackfile` (declarative YAML stack files; feature `stackfile`),
//! `policy` (Guard rules; feature `policy`), `deploy` (feature `deploy`), and [`generated`]:
//! the CloudFormation L1 and Kubernetes custom resource types generated from vendored schemas.
//! The reference deployments are example code written against this API, in the repository's
//! `examples/reference/mod.rs`.
//!
//! ## Features
//!
//! The default features build the `hyperforge` command with everything it offers. A library
//! needs none of the command's dependencies:
//!
//! ```toml
//! [dependencies]
//! hyperforge = { version = "0.1", default-features = false, features = ["k8s-v1_33"] }
//! ```
//!
//! - `k8s-v1_33` (default): selects Kubernetes 1.33, the version hyperforge's objects are
//!   validated against, for `k8s-openapi`, which needs exactly one version chosen in a build
//!   and refuses two. A crate that already enables another `k8s-openapi` `v1_*` feature leaves
//!   this one out (`default-features = false`); its version is then used.
//! - `runbook` (default): the `runbook` module and the `RUNBOOK.md` synthesis writes for each
//!   stack (Handlebars). Without it no runbook is written and the manifest lists none.
//! - `stackfile` (default): the `stackfile` module, declarative YAML stack files (yaml-rust2).
//! - `cli` (default): the `hyperforge` binary; enables `policy`, `runbook`, `stackfile` and
//!   `k8s-v1_33`.
//! - `policy`: the `policy` module, AWS CloudFormation Guard rules evaluated in-process.
//! - `deploy`: the `deploy` module, deployment through CloudFormation (AWS SDK, tokio).
//!
//! hyperforge enables `serde_json`'s `preserve_order` feature: templates and manifests keep
//! the key order they are built in (`AWSTemplateFormatVersion` first, a resource's `Type`
//! before its `Properties`, Kubernetes objects in their types' field order). Cargo unifies
//! features, so in a build that includes hyperforge every `serde_json::Map` and `Value`
//! object, the user's own included, keeps insertion order instead of sorting its keys.

#![warn(missing_docs)]
// docs.rs builds with `--cfg docsrs`: feature-gated items show the feature they need.
#![cfg_attr(docsrs, feature(doc_cfg))]
// Library code never panics on input through `unwrap`/`expect`: every fallible step returns
// a diagnostic or an error (test code may).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod app;
pub mod assembly;
pub mod catalog;
pub mod constructs;
pub mod cost;
#[cfg(feature = "deploy")]
#[cfg_attr(docsrs, doc(cfg(feature = "deploy")))]
pub mod deploy;
pub mod diagnostics;
pub mod fleet;
#[cfg(feature = "policy")]
#[cfg_attr(docsrs, doc(cfg(feature = "policy")))]
pub mod policy;
pub mod resources;
#[cfg(feature = "runbook")]
#[cfg_attr(docsrs, doc(cfg(feature = "runbook")))]
pub mod runbook;
#[cfg(feature = "stackfile")]
#[cfg_attr(docsrs, doc(cfg(feature = "stackfile")))]
pub mod stackfile;
pub mod synth;

// The reference deployments are example code (`examples/reference/mod.rs`), written against
// the public API as a user's crate would; the unit tests build them too.
#[cfg(test)]
extern crate self as hyperforge;
#[cfg(test)]
#[path = "../examples/reference/mod.rs"]
mod reference;
pub(crate) mod validate;
pub(crate) mod yaml;

/// The README's Rust code blocks, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// What a description usually needs, in one import: `use hyperforge::prelude::*;`.
///
/// ```
/// use hyperforge::prelude::*;
///
/// let mut stack = Stack::new("demo", "us-west-2");
/// let foundation = stack.cloudformation_stage("foundation");
/// let network = stack.add(foundation, Network::new("Network").gpu_subnet("usw2-az2"));
/// stack.add(
///     foundation,
///     EksCluster::new("Eks", "demo").subnets(&network.private_subnets).vpc(&network.vpc),
/// );
/// let ds: Diagnostics = App::new().stack(stack).validate();
/// assert!(!ds.has_errors(), "{ds}");
/// ```
pub mod prelude {
    pub use crate::app::{App, Stack, StageId};
    pub use crate::catalog::{Model, Precision};
    pub use crate::constructs::{
        Autoscaling, Capacity, CapacityBlock, ClusterSecurityGroup, ContainerStorage, EksCluster,
        HelmRelease, HyperPodCluster, InferenceEndpoint, InferenceOperator, InstanceGroup,
        Karpenter, KarpenterNodePool, KubernetesManifest, LifecycleScripts, LoadBalancerController,
        ManagedNodeGroup, ModelStore, Network, NodeCapacity, RawResource, ServingDashboard,
        VllmDeployment, VllmServer, WeightsStaging,
    };
    pub use crate::diagnostics::{Code, Diagnostics};
    pub use crate::synth::SynthOptions;
    pub use crate::Assembly;
}

/// Types generated by `hyperforge-codegen` from the schemas vendored under `codegen/schemas/`
/// (regenerate with `cargo run -p hyperforge-codegen`; do not edit them by hand).
pub mod generated {
    /// Kubernetes custom resource types (HyperPod's `InferenceEndpointConfig`, Karpenter's
    /// `NodePool` and `EC2NodeClass`, KEDA's `ScaledObject` and `TriggerAuthentication`),
    /// generated from their vendored CRDs. Each root object implements k8s-openapi's
    /// `Resource` and `Metadata` traits. Also reachable as `resources::kubernetes::crd`.
    #[doc(inline)]
    pub use crate::resources::kubernetes::crd as kubernetes;
    /// CloudFormation L1 resource types, one module per resource type, generated from the
    /// CloudFormation registry schemas. Also reachable as `synth::cloudformation::l1`.
    #[doc(inline)]
    pub use crate::synth::cloudformation::l1 as cloudformation;
}

/// The constructs under their former module name.
#[doc(hidden)]
pub use constructs as spec;

pub use app::{App, ObjectPatch, Stack, StageId};
pub use assembly::{Assembly, AssemblyError};
pub use diagnostics::{Code, Diagnostic, Diagnostics, Severity};
/// The JSON library property overrides, raw resources and Kubernetes manifests take values
/// of, re-exported so a description needs no dependency of its own for it.
pub use serde_json;
pub use synth::{Format, Formats, SynthOptions};
