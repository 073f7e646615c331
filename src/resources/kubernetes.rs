//! Kubernetes objects: the custom resource types generated from vendored CRDs.

// Generated from the vendored CRDs; items without a schema description carry no doc comment.
#[allow(missing_docs)]
pub mod crd;
