//! Where the servers get the weights from (`HF0506`, `HF0425`).
//!
//! What the `InferenceEndpointConfig` CRD says: `modelSourceType` is one of `fsx`, `s3`,
//! `huggingface` or `kubernetesVolume`; with `huggingface` the operator's init container
//! downloads the model into the worker pod's model volume, so every new pod (each replica,
//! and any pod recreated after a node replacement or reschedule) downloads it again.
//! `prefetchEnabled` (set by hyperforge) makes that init container download before the server
//! starts instead of leaving the download to the server; either way nothing keeps a copy
//! between pods. A HyperPod endpoint serving from the Hub is reported when that download is
//! long: more than [`SLOW_DOWNLOAD_SECS`] at the catalog's rate (or the server's own). Serving
//! a staged copy (`VllmServer::weights_from`) is the remedy.
//!
//! An EKS Deployment serving a staged copy streams it with the Run:ai model streamer; a load
//! format that cannot read `s3://` is refused.

use crate::app::StageId;
use crate::catalog::memory::gib;
use crate::constructs::{ServedModel, WeightsStagingFacts};
use crate::diagnostics::{Code, Diagnostics};

/// Downloads longer than this (seconds) per pod are reported.
pub const SLOW_DOWNLOAD_SECS: u64 = 600;

/// The vLLM loader that reads `s3://` paths.
pub const S3_LOAD_FORMAT: &str = "runai_streamer";

/// Checks where a server gets the weights from.
pub fn check(served: &ServedModel<'_>, path: &str, ds: &mut Diagnostics) {
    let server = served.server;
    if server.staged_weights().is_some() {
        match server.load_format_given() {
            Some(format) if !served.hyperpod && format != S3_LOAD_FORMAT => ds.report_field(
                Code::LoadFormatCannotReadS3,
                path,
                "load_format",
                format!(
                    "`{}` streams its weights from S3, which load format `{format}` cannot read",
                    served.object_name
                ),
                format!("leave `load_format` unset (the Deployment uses `{S3_LOAD_FORMAT}`) or set it to `{S3_LOAD_FORMAT}`"),
            ),
            _ => {}
        }
        return;
    }
    if !served.hyperpod {
        return;
    }
    let (Some(bytes), Some(budget)) = (
        server.weights(),
        server.startup_budget(served.instance_type, true),
    ) else {
        return;
    };
    if budget.download_secs <= SLOW_DOWNLOAD_SECS {
        return;
    }
    let replicas = served.replicas.max(1);
    let rate = bytes as f64 / budget.download_secs.max(1) as f64;
    ds.report_field(
        Code::WeightsDownloadedPerPod,
        path,
        "model",
        format!(
            "every new worker pod of `{}` downloads {:.1} GiB from the Hugging Face Hub (modelSourceType huggingface): about {} min at {:.0} MB/s before loading; {replicas} replica(s) download it {replicas} time(s), and again whenever a pod is recreated (node replacement, reschedule)",
            served.object_name,
            gib(bytes as f64),
            budget.download_secs.div_ceil(60),
            rate / 1e6,
        ),
        "stage the weights once into a model store (`model_store` and a `weights_staging` Job) and serve that copy (`weights_from`, stack files: `weights_store`): the operator then fetches it from S3 in the cluster's region (modelSourceType s3). prefetchEnabled only decides who downloads (the init container or the server) and does not avoid it",
    );
}

/// A server reading a model store needs a staging Job for its store, model and revision in an
/// earlier stage (`stagings`: those placed before it, with their stages): the runbook and
/// deploy wait for that Job before the server's stage.
pub fn staged(
    served: &ServedModel<'_>,
    stage: StageId,
    path: &str,
    stagings: &[(StageId, WeightsStagingFacts)],
    ds: &mut Diagnostics,
) {
    let server = served.server;
    let (Some(store), Some(revision)) = (server.staged_weights(), server.model_revision()) else {
        return;
    };
    let found = stagings.iter().any(|(at, s)| {
        at.index() < stage.index()
            && s.store == store.id
            && s.model_id == server.model_id()
            && s.revision == revision
    });
    if !found {
        ds.report_field(
            Code::WeightsNotStaged,
            path,
            "weights_store",
            format!(
                "`{}` reads {}@{} from model store `{}`, but no earlier stage stages it there",
                served.object_name,
                server.model_id(),
                revision,
                store.id
            ),
            format!(
                "add a `weights_staging` Job (store `{}`, model `{}`, revision `{revision}`) to a Kubernetes stage before this one",
                store.id,
                server.model_id()
            ),
        );
    }
}
