//! Stage payloads that are not built from constructs: a Helm release with a pinned chart and
//! its values, and files uploaded to a bucket created by an earlier stage. The presets live with
//! the constructs (`constructs::helm`).

use crate::app::{kind, AttrRef, Ref};
use serde_json::Value;

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
    /// Values known only after an earlier stage deployed (`--set key=<stack output>`).
    pub set_from_outputs: Vec<(String, AttrRef)>,
    /// Whether installing waits for the release's workloads to be ready (`helm --wait`,
    /// Terraform `wait`). False for a chart whose pods schedule only on nodes a later stage
    /// creates: waiting would time out and leave the release `failed`.
    pub wait: bool,
    /// The values key that takes the stack's effective tags as a map, for a chart whose
    /// controller creates AWS resources (the Load Balancer Controller's `defaultTags`, on its
    /// load balancers, target groups and security groups); filled in at synthesis.
    pub tags_value: Option<String>,
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

/// Whether `name` is a plain file name: 1-255 ASCII letters, digits, `.`, `_` and `-`,
/// starting with a letter or digit (so no path separator, no `..`, no hidden file).
pub fn is_plain_file_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && name.len() <= 255
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Whether `prefix` is a key prefix of plain segments ending in `/` (`lifecycle/`,
/// `scripts/v2/`), at most 512 bytes.
pub fn is_plain_key_prefix(prefix: &str) -> bool {
    prefix.len() <= 512
        && prefix
            .strip_suffix('/')
            .is_some_and(|p| p.split('/').all(is_plain_file_name))
}
