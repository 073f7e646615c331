//! Whether the nodes serving a model can hold its weights on their own storage (`HF0510`).
//!
//! The weights are downloaded onto the serving node: the HyperPod inference operator's init
//! container fills a pod volume, the EKS Deployment's vLLM fills its cache in ephemeral
//! storage. Both live in kubelet's directory, next to containerd's images, on the storage each
//! capacity claim states ([`PodStorage`]): the local NVMe, a HyperPod group's EBS volume or a
//! node's root volume. Every claim that can run the model (same instance type, same launcher:
//! HyperPod for operator endpoints, EC2 otherwise) must hold
//! [`pod_storage_needed`] of the weights.

use crate::catalog::memory::{gib, pod_storage_needed};
use crate::constructs::{CapacityClaim, Launcher, PodStorage, ServedModel};
use crate::diagnostics::{Code, Diagnostic, Diagnostics};

/// Checks `served` (at `path`) against every claim of its stack that can run it.
pub fn check(served: &ServedModel<'_>, path: &str, claims: &[CapacityClaim], ds: &mut Diagnostics) {
    let Some(weights) = served.server.weights() else {
        return;
    };
    // Streamed from S3 straight into GPU memory, the weights never land on the node.
    if served.server.weight_source(served.hyperpod) == crate::catalog::WeightSource::S3Streamed {
        return;
    }
    let needed = pod_storage_needed(weights);
    let ec2_name = |t: &'_ str| t.strip_prefix("ml.").unwrap_or(t).to_owned();
    let served_type = ec2_name(served.instance_type);
    for claim in claims {
        let launcher_fits = (claim.launcher == Launcher::HyperPod) == served.hyperpod;
        if !launcher_fits || ec2_name(&claim.instance_type) != served_type {
            continue;
        }
        let Some(storage) = &claim.pod_storage else {
            continue;
        };
        if storage.bytes < needed {
            report(served, path, claim, storage, weights, needed, ds);
        }
    }
}

fn report(
    served: &ServedModel<'_>,
    path: &str,
    claim: &CapacityClaim,
    storage: &PodStorage,
    weights: u64,
    needed: u64,
    ds: &mut Diagnostics,
) {
    let diagnostic = Diagnostic::new(
        Code::PodStorageTooSmallForWeights,
        &claim.path,
        format!(
            "the nodes keep container images and pod volumes on {} ({:.1} GiB), but `{}` downloads {:.1} GiB of weights onto the node it runs on; {:.1} GiB are needed (the weights, a tenth more and 100 GiB for images and logs)",
            storage.what,
            gib(storage.bytes as f64),
            served.object_name,
            gib(weights as f64),
            gib(needed as f64),
        ),
        storage.remedy.clone(),
    )
    .at_field(storage.field)
    .note(format!("the model is served by {path}"));
    ds.push(diagnostic);
}
