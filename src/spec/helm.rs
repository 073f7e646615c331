//! Non-CloudFormation stages: Helm releases with pinned charts and values, and file uploads to
//! a bucket created by an earlier stage.

use crate::app::{kind, Ref};
use serde_json::{json, Value};

/// Where a chart comes from, pinned.
#[derive(Clone, Debug, PartialEq)]
pub enum ChartSource {
    /// A chart repository: `helm install --repo <repo> <chart> --version <version>`.
    Repository {
        /// Repository URL.
        repo: String,
        /// Chart name.
        chart: String,
        /// Exact chart version.
        version: String,
    },
    /// A chart in a git repository at a pinned commit (charts not published to a repository).
    Git {
        /// Clone URL.
        url: String,
        /// Full commit SHA.
        commit: String,
        /// Path of the chart inside the repository.
        path: String,
    },
}

/// A Helm release.
#[derive(Clone, Debug, PartialEq)]
pub struct HelmRelease {
    /// Release name.
    pub release: String,
    /// Namespace.
    pub namespace: String,
    /// The chart, pinned.
    pub chart: ChartSource,
    /// The values (written to a values file).
    pub values: Value,
    /// A comment placed at the top of the values file.
    pub note: String,
}

/// The `hyperpod-dependencies` chart of `aws/sagemaker-hyperpod-cli` at this commit.
pub const HYPERPOD_CLI_COMMIT: &str = "011ca927123e02b35a399935bbb3ab1905fe33c7";

impl HelmRelease {
    /// The HyperPod dependencies chart (device plugins, health monitoring agent, deep health
    /// checks, job auto-restart, training operators) that HyperPod's CreateCluster requires on
    /// the EKS cluster. Its bundled inference operator stays off: the operator is installed as
    /// the EKS add-on `amazon-sagemaker-hyperpod-inference`.
    pub fn hyperpod_dependencies() -> Self {
        HelmRelease {
            release: "hyperpod-dependencies".to_owned(),
            namespace: "kube-system".to_owned(),
            chart: ChartSource::Git {
                url: "https://github.com/aws/sagemaker-hyperpod-cli.git".to_owned(),
                commit: HYPERPOD_CLI_COMMIT.to_owned(),
                path: "helm_chart/HyperPodHelmChart".to_owned(),
            },
            values: json!({
                "inferenceOperators": { "enabled": false }
            }),
            note: "Values for the HyperPod dependencies chart. The inference operator is installed as the EKS add-on amazon-sagemaker-hyperpod-inference, so the chart's copy stays disabled.".to_owned(),
        }
    }

    /// Whether this is the HyperPod dependencies chart.
    pub fn is_hyperpod_dependencies(&self) -> bool {
        matches!(&self.chart, ChartSource::Git { url, path, .. }
            if url.contains("sagemaker-hyperpod-cli") && path == "helm_chart/HyperPodHelmChart")
    }
}

/// A file to upload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadFile {
    /// File name (also the key below the prefix).
    pub name: String,
    /// Contents.
    pub content: String,
}

/// Files copied to `s3://<bucket>/<prefix>`.
#[derive(Clone, Debug, PartialEq)]
pub struct Upload {
    /// The destination bucket (created by an earlier CloudFormation stage).
    pub bucket: Ref<kind::Bucket>,
    /// Key prefix, ending in `/`.
    pub prefix: String,
    /// The files.
    pub files: Vec<UploadFile>,
}
