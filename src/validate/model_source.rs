//! Where the workers get the weights from (`HF0506`).
//!
//! What the `InferenceEndpointConfig` CRD says: `modelSourceType` is one of `fsx`, `s3`,
//! `huggingface` or `kubernetesVolume`; with `huggingface` the operator's init container
//! downloads the model into the worker pod's model volume, so every new pod (each replica,
//! and any pod recreated after a node replacement or reschedule) downloads it again.
//! `prefetchEnabled` (set by hyperforge) makes that init container download before the server
//! starts instead of leaving the download to the server; either way nothing keeps a copy
//! between pods. hyperforge lowers endpoints
//! with `modelSourceType: huggingface`, so the rule warns when that download is long: more
//! than [`SLOW_DOWNLOAD_SECS`] at the server's assumed download throughput.

use crate::catalog::memory::gib;
use crate::constructs::ServedModel;
use crate::diagnostics::{Code, Diagnostics};

/// Downloads longer than this (seconds) per pod are reported.
pub const SLOW_DOWNLOAD_SECS: u64 = 600;

/// Checks where a HyperPod endpoint's workers get the weights from (the EKS path's vLLM
/// Deployment has its own loading, described by its startup probe).
pub fn check(served: &ServedModel<'_>, path: &str, ds: &mut Diagnostics) {
    if !served.hyperpod {
        return;
    }
    let server = served.server;
    let (Some(bytes), Some(budget)) = (server.weights(), server.startup_budget()) else {
        return;
    };
    if budget.download_secs <= SLOW_DOWNLOAD_SECS {
        return;
    }
    let replicas = served.replicas.max(1);
    ds.report_field(
        Code::WeightsDownloadedPerPod,
        path,
        "model",
        format!(
            "every new worker pod of `{}` downloads {:.1} GiB from the Hugging Face Hub (modelSourceType huggingface): about {} min at {:.0} MB/s before loading; {replicas} replica(s) download it {replicas} time(s), and again whenever a pod is recreated (node replacement, reschedule)",
            served.object_name,
            gib(bytes as f64),
            budget.download_secs.div_ceil(60),
            server.throughput().download_bytes_per_sec / 1e6,
        ),
        "a copy in AWS storage the operator mounts (modelSourceType s3 or fsx, e.g. FSx for Lustre in the cluster's zone) avoids the download; InferenceEndpoint lowers only the Hub source today. prefetchEnabled only decides who downloads (the init container or the server) and does not avoid it",
    );
}
