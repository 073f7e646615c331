//! The Kubernetes backend.
pub mod crd;
