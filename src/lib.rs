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
//! facts, GPU memory arithmetic), [`diagnostics`], [`validate`] (model-aware rules and service
//! limits), [`synth`] (backends), [`assembly`] (output), [`cost`] (hourly estimate),
//! [`reference`] (the reference deployments), [`runbook`] (the deployment runbook of a
//! stack), [`stackfile`] (declarative YAML stack files).

#![warn(missing_docs)]

pub mod app;
pub mod assembly;
pub mod catalog;
pub mod constructs;
pub mod cost;
#[cfg(feature = "deploy")]
pub mod deploy;
pub mod diagnostics;
#[cfg(feature = "policy")]
pub mod policy;
pub mod reference;
pub mod resources;
#[cfg(feature = "runbook")]
pub mod runbook;
#[cfg(feature = "stackfile")]
pub mod stackfile;
pub mod synth;
pub mod validate;

/// The constructs under their former module name.
#[doc(hidden)]
pub use constructs as spec;

pub use app::{App, Stack, StageId};
pub use assembly::{Assembly, AssemblyError};
pub use diagnostics::{Code, Diagnostic, Diagnostics, Severity};
pub use synth::{Format, Formats, SynthOptions};
