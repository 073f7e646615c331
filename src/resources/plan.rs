//! Operational steps as resources: what a construct asks a deployment to do beyond creating
//! its resources (scale a Capacity Block's node group once the block is active, empty a
//! versioned bucket before its stack is deleted, create a Secret from its source). A construct
//! adds them through [`Scope::step`](super::Scope::step) in its own stage, exactly as it adds
//! resources; synthesis lowers them, with the steps the Kubernetes objects imply (the Secrets
//! they read, the Jobs they run), into each stage's `steps` in `manifest.json`, which every
//! deployment path carries out.

use super::ResourceFacts;
use crate::app::AttrRef;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where the value of a Secret comes from when it does not exist yet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "from", rename_all = "kebab-case")]
pub enum SecretSource {
    /// The operator creates it (the runbook says so); the step only checks that it exists.
    Operator,
    /// From an environment variable of the operator's shell (`HF_TOKEN`); never a literal.
    Environment {
        /// The variable's name.
        variable: String,
    },
    /// Random bytes, hex-encoded, made where the step runs (an API key); an existing Secret
    /// is kept.
    Generated {
        /// How many random bytes.
        bytes: u32,
    },
}

/// Whether `name` can name an environment variable (a container's, or the shell's a step
/// reads a Secret from): letters, digits and `_`, not starting with a digit.
pub fn is_variable_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A step a construct contributes, in its stage.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// After the stage: once the node group's Capacity Block is active, scale the group
    /// (created at size 0) to these sizes.
    ScaleCapacityBlockNodeGroup {
        /// The EKS node group name.
        node_group: String,
        /// (min, desired, max).
        sizes: (i64, i64, i64),
        /// When a schedule scales the group up (UTC minutes): the block opens then.
        scale_up_at: Option<i64>,
    },
    /// Before the stage's stack is deleted: empty the versioned bucket.
    EmptyVersionedBucket {
        /// The bucket's name.
        bucket: AttrRef,
        /// What it holds, for people.
        holds: String,
    },
    /// After the stage: subscribe an address to the notification topic.
    SubscribeTopic {
        /// The topic's ARN.
        topic: AttrRef,
    },
    /// How a Secret the construct's objects read is created: the Secret itself is found in
    /// the objects (every `secretKeyRef`), this says where a missing one's value comes from.
    SecretSource {
        /// The Secret's name.
        name: String,
        /// Its namespace.
        namespace: String,
        /// Its source.
        source: SecretSource,
    },
    /// Before the stage: the Hub revision the stage's objects pin exists.
    VerifyModelRevision {
        /// The model id.
        model_id: String,
        /// The full commit SHA.
        revision: String,
    },
    /// Before the stage: the image digest the stage's objects pin resolves.
    VerifyImage {
        /// The image reference pinned by digest.
        image: String,
    },
}

impl ResourceFacts for Step {
    fn references(&self) -> Vec<AttrRef> {
        match self {
            Step::EmptyVersionedBucket { bucket: r, .. } | Step::SubscribeTopic { topic: r } => {
                vec![r.clone()]
            }
            Step::ScaleCapacityBlockNodeGroup { .. }
            | Step::SecretSource { .. }
            | Step::VerifyModelRevision { .. }
            | Step::VerifyImage { .. } => Vec::new(),
        }
    }
}
