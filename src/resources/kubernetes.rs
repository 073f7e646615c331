//! Kubernetes objects: [`KubeObject`], one object of a Kubernetes stage, and the custom resource
//! types generated from vendored CRDs ([`crd`]).

/// What every generated custom resource type has beside its struct: a constructor by name,
/// k8s-openapi's `Resource` and `Metadata` (so `KubeObject::new` takes it like a built-in
/// type), and serialization as `apiVersion`, `kind`, `metadata`, `spec`, in that order.
macro_rules! crd_object {
    ($kind:ident, $spec:ident, $group:literal, $version:literal, $plural:literal, $scope:ident) => {
        impl $kind {
            #[doc = concat!("A `", stringify!($kind), "` named `name` with `spec`.")]
            pub fn new(name: &str, spec: $spec) -> Self {
                $kind {
                    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                        name: Some(name.to_owned()),
                        ..Default::default()
                    },
                    spec,
                }
            }
        }

        impl k8s_openapi::Resource for $kind {
            const API_VERSION: &'static str = concat!($group, "/", $version);
            const GROUP: &'static str = $group;
            const KIND: &'static str = stringify!($kind);
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = k8s_openapi::$scope;
        }

        impl k8s_openapi::Metadata for $kind {
            type Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
            fn metadata(&self) -> &Self::Ty {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut Self::Ty {
                &mut self.metadata
            }
        }

        impl serde::Serialize for $kind {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeStruct as _;
                let mut object = serializer.serialize_struct(stringify!($kind), 4)?;
                object
                    .serialize_field("apiVersion", <Self as k8s_openapi::Resource>::API_VERSION)?;
                object.serialize_field("kind", <Self as k8s_openapi::Resource>::KIND)?;
                object.serialize_field("metadata", &self.metadata)?;
                object.serialize_field("spec", &self.spec)?;
                object.end()
            }
        }
    };
}

// Generated from the vendored CRDs; items without a schema description carry no doc comment.
// Documented as `crate::generated::kubernetes`, so the generated types stay out of this
// module's page.
#[allow(missing_docs)]
#[doc(hidden)]
pub mod crd;

use super::ResourceFacts;
use super::{Resource, Scope};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::Value;

/// One Kubernetes object, applied with `kubectl apply`: built from its typed form (k8s-openapi
/// or [`crd`] types) and serialized once, when its construct expands. The Kubernetes backend
/// writes it as one document of its stage's YAML; the CloudFormation and Terraform backends
/// emit nothing for it.
#[derive(Clone, Debug, PartialEq)]
pub struct KubeObject {
    api_version: String,
    kind: String,
    name: String,
    namespace: Option<String>,
    object: Value,
}

impl KubeObject {
    /// The object `object`, with its `apiVersion`, `kind`, name and namespace read from its
    /// type and metadata: any k8s-openapi type or generated [`crd`] type (both implement
    /// k8s-openapi's `Resource` and `Metadata` traits).
    pub fn new<K>(object: &K) -> Self
    where
        K: k8s_openapi::Metadata<Ty = ObjectMeta> + Serialize,
    {
        let meta = object.metadata();
        KubeObject {
            api_version: K::API_VERSION.to_owned(),
            kind: K::KIND.to_owned(),
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone(),
            // Serializing to a `Value` fails only for maps with non-string keys, which
            // Kubernetes objects do not have.
            object: serde_json::to_value(object).unwrap_or(Value::Null),
        }
    }

    /// An object given as JSON (a raw manifest): `apiVersion`, `kind` and `metadata.name` must
    /// be strings; the problem otherwise.
    pub fn from_value(object: Value) -> Result<Self, String> {
        let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
        let (Some(api_version), Some(kind)) = (text("/apiVersion"), text("/kind")) else {
            return Err("the object has no `apiVersion` and `kind` strings".to_owned());
        };
        let Some(name) = text("/metadata/name") else {
            return Err("the object has no `metadata.name` string".to_owned());
        };
        let namespace = match object.pointer("/metadata/namespace") {
            None => None,
            Some(Value::String(ns)) => Some(ns.clone()),
            Some(_) => return Err("`metadata.namespace` is not a string".to_owned()),
        };
        Ok(KubeObject {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
            namespace,
            object,
        })
    }

    /// `apiVersion` (`apps/v1`).
    pub fn api_version(&self) -> &str {
        &self.api_version
    }

    /// `kind` (`Deployment`).
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `metadata.namespace`, for namespaced objects.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The whole object as applied, keys in the order its type serializes them.
    pub fn object(&self) -> &Value {
        &self.object
    }
}

impl Scope<'_> {
    /// Adds `object` as the child named after its kind (`Deployment`): a construct creates at
    /// most one object of each kind.
    pub fn add_object(&mut self, object: KubeObject) -> &mut Resource {
        let id = object.kind.clone();
        self.add(&id, object)
    }
}

impl ResourceFacts for KubeObject {}

/// The security context of a container hyperforge runs its own programs in (the weights
/// stager, the capacity drain): a non-root user and group (10001, above the range checkov's
/// CKV_K8S_40 flags), no privilege escalation, no capabilities, a read-only root filesystem.
pub fn locked_down_container() -> k8s_openapi::api::core::v1::SecurityContext {
    use k8s_openapi::api::core::v1::{Capabilities, SecurityContext};
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        run_as_user: Some(10001),
        run_as_group: Some(10001),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            add: None,
        }),
        ..Default::default()
    }
}

/// The pod security context of those programs' pods: the runtime's default seccomp profile,
/// no container as root.
pub fn restricted_pod() -> k8s_openapi::api::core::v1::PodSecurityContext {
    use k8s_openapi::api::core::v1::{PodSecurityContext, SeccompProfile};
    PodSecurityContext {
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".to_owned(),
            localhost_profile: None,
        }),
        run_as_non_root: Some(true),
        ..Default::default()
    }
}

/// A pod template of `spec` whose pods carry `labels`.
pub fn pod_template(
    labels: &std::collections::BTreeMap<String, String>,
    spec: k8s_openapi::api::core::v1::PodSpec,
) -> k8s_openapi::api::core::v1::PodTemplateSpec {
    k8s_openapi::api::core::v1::PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels.clone()),
            ..Default::default()
        }),
        spec: Some(spec),
    }
}
