//! `manifest.json` as types: what synthesis writes, what the runbook and `hyperforge list` read
//! and what deployment loads. Serializing a [`Manifest`] gives the file's exact text
//! ([`Manifest::to_json`]); its JSON Schema ([`Manifest::json_schema`]) is committed as
//! `docs/manifest.schema.json`.
//!
//! Artifact paths are relative to the assembly root and use `/`.

use schemars::JsonSchema;
use serde::ser::{SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::inventory::Inventory;
pub use super::plan::{SecretSource, SecretStep, Step, When};

/// `manifest.json`: the stacks of an assembly, each with its stages in deployment order and
/// the files each stage deploys.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Manifest {
    /// The format's version; this is version 4 (stacks record what they run, their
    /// inventory).
    pub version: u32,
    /// What wrote the manifest (`hyperforge 0.1.0`).
    pub generator: String,
    /// The stacks, in the app's order.
    pub stacks: Vec<StackManifest>,
}

/// One stack: its stages in deployment order, and the artifacts that belong to the whole
/// stack (the Terraform root module, the runbook).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StackManifest {
    /// The hyperforge stack name; it prefixes the CloudFormation stack names of its stages.
    pub name: String,
    /// The AWS region the stack is described for.
    pub region: String,
    /// The EKS cluster's name (for `aws eks update-kubeconfig`), or null when the stack has
    /// none.
    pub eks_cluster: Option<String>,
    /// The SSM-managed admin host through which kubectl, helm and Terraform's Helm provider
    /// reach the cluster's private API endpoint; absent when the stack has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_host: Option<AdminHostManifest>,
    /// The values chosen when the stack is deployed, each declared once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputManifest>,
    /// What the stack runs, for the people operating it.
    #[serde(default)]
    pub inventory: Inventory,
    /// The stages, in deployment order.
    pub stages: Vec<StageManifest>,
    /// The Terraform root module, when it was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terraform: Option<ArtifactList>,
    /// The runbook, when it was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runbook: Option<ArtifactList>,
    /// Warnings and notes the description acknowledged, each with its reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acknowledged: Vec<AcknowledgedManifest>,
}

/// A code a stack acknowledged at a construct path (`Stack::acknowledge`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AcknowledgedManifest {
    /// The diagnostic code (`HF0506`).
    pub code: String,
    /// The construct path inside the stack; empty for the whole stack.
    pub path: String,
    /// Why it is acceptable.
    pub reason: String,
    /// How many diagnostics it covered in this synthesis.
    pub diagnostics: usize,
}

/// The admin host of a stack's EKS cluster and the local end of the tunnel through it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AdminHostManifest {
    /// The instance's `Name` tag (`aws ec2 describe-instances --filters Name=tag:Name,...`).
    pub name_tag: String,
    /// The local port of the Session Manager port forward to the endpoint's port 443
    /// (kubeconfig server `https://127.0.0.1:<port>`).
    pub local_port: u16,
}

/// The local port the runbook and `hyperforge deploy` forward to the API endpoint.
pub const ADMIN_TUNNEL_LOCAL_PORT: u16 = 8443;

/// Whether a Helm release into `namespace` creates it (`--create-namespace`, Terraform's
/// `create_namespace`): every namespace but `kube-system`, which always exists (KEDA's
/// `keda`, for one, does not).
pub fn helm_creates_namespace(namespace: &str) -> bool {
    namespace != "kube-system"
}

/// One deployment stage; `kind` says which tool deploys it. Every kind lists the artifacts it
/// deploys (only those written: `hyperforge synth --format` can leave the list empty).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(tag = "kind")]
#[non_exhaustive]
pub enum StageManifest {
    /// A CloudFormation stack deployed from one template.
    #[serde(rename = "cloudformation")]
    CloudFormation {
        /// The stage name, unique in its stack (`foundation`).
        name: String,
        /// The CloudFormation stack name (`<stack>-<stage>`).
        stack_name: String,
        /// The capabilities to acknowledge (`CAPABILITY_IAM` or `CAPABILITY_NAMED_IAM`).
        capabilities: Vec<String>,
        /// The template's parameters, in template order.
        parameters: Vec<Parameter>,
        /// The template's output names, in template order.
        outputs: Vec<String>,
        /// Whether the template is over CloudFormation's 51,200-byte inline limit, so it is
        /// deployed from S3 (`aws cloudformation deploy --s3-bucket`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        deploy_from_s3: bool,
        /// The operational steps around the stack, in order.
        #[serde(default)]
        steps: Vec<Step>,
        /// The template (format `cloudformation`).
        artifacts: Vec<Artifact>,
    },
    /// A Helm release of a pinned chart.
    #[serde(rename = "helm")]
    Helm {
        /// The stage name, unique in its stack.
        name: String,
        /// The release name.
        release: String,
        /// The release's namespace.
        namespace: String,
        /// Where the chart comes from.
        chart: Chart,
        /// Values set from outputs of earlier CloudFormation stages (`--set key=<output>`);
        /// left out when there are none.
        #[serde(default)]
        set_from_outputs: Vec<SetFromOutput>,
        /// Whether installing waits for the release's workloads (`helm --wait`); false when
        /// they can schedule only on nodes a later stage creates.
        #[serde(default)]
        wait: bool,
        /// The operational steps around the release, in order.
        #[serde(default)]
        steps: Vec<Step>,
        /// The values file (format `helm-values`).
        artifacts: Vec<Artifact>,
    },
    /// Files put under a prefix of a bucket created by an earlier CloudFormation stage.
    #[serde(rename = "s3-upload")]
    S3Upload {
        /// The stage name, unique in its stack.
        name: String,
        /// The stage output that names the bucket.
        bucket: StageOutput,
        /// The key prefix (`lifecycle/`); each file goes to the prefix plus its file name.
        prefix: String,
        /// The operational steps around the upload, in order.
        #[serde(default)]
        steps: Vec<Step>,
        /// The files to upload (format `script`).
        artifacts: Vec<Artifact>,
    },
    /// Kubernetes objects applied with `kubectl apply`.
    #[serde(rename = "kubernetes")]
    Kubernetes {
        /// The stage name, unique in its stack.
        name: String,
        /// Values only a deployment knows: the file carries each as its `placeholder`,
        /// replaced as the stage is applied by an output of an earlier CloudFormation stage
        /// (Terraform: the same name in snake case, an output of the phase that creates it) or
        /// a deploy-time input of the stack; left out when there are none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        values: Vec<PlaceholderValue>,
        /// The operational steps around the apply, in order: the Secrets its objects read and
        /// no artifact creates (their values never enter the assembly), checks of what they
        /// pin, the Jobs to wait for.
        #[serde(default)]
        steps: Vec<Step>,
        /// The multi-document YAML file (format `kubernetes`).
        artifacts: Vec<Artifact>,
    },
}

/// A CloudFormation template parameter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Parameter {
    /// The parameter's name.
    pub name: String,
    /// Its default, or null when the template has none.
    pub default: Option<String>,
}

/// Where a Helm chart comes from, pinned. The two forms are told apart by their fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
#[non_exhaustive]
pub enum Chart {
    /// A chart in a Helm repository (`https://`) or an OCI registry (`oci://`).
    Repository {
        /// The repository URL.
        repository: String,
        /// The chart's name.
        name: String,
        /// The exact chart version.
        version: String,
    },
    /// A chart directory in a git repository at a pinned commit.
    Git {
        /// The clone URL.
        #[serde(rename = "git")]
        url: String,
        /// The full commit SHA.
        commit: String,
        /// The chart's directory inside the repository.
        path: String,
    },
}

/// A Helm value set from an output of an earlier CloudFormation stage (for a Kubernetes stage:
/// the placeholder `key` replaced by the output).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SetFromOutput {
    /// The values key (`vpcId`).
    pub key: String,
    /// The CloudFormation stage whose stack has the output.
    pub stage: Option<String>,
    /// The output's name.
    pub output: String,
}

/// A value a Kubernetes stage's file carries as a placeholder.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PlaceholderValue {
    /// The text the file carries in its place (letters, digits, `-`; the input's default for
    /// an input, so the file as written holds a value its schemas accept).
    pub placeholder: String,
    /// Where the value comes from.
    #[serde(flatten)]
    pub from: ValueSource,
}

/// Where a deployed value comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ValueSource {
    /// An output of a CloudFormation stage of the same stack.
    Output(StageOutput),
    /// The stack's deploy-time input of this name (see [`InputManifest`]).
    Input(String),
}

/// A value chosen when the stack is deployed, declared once per stack: a parameter of every
/// CloudFormation stage that uses it, a Terraform variable of the same name in snake case, a
/// placeholder Kubernetes stages list (`values`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InputManifest {
    /// The name (`GpuNodesCapacityReservationId`): the CloudFormation parameter's.
    pub name: String,
    /// The shell and environment variable the runbook and `hyperforge deploy` read it from
    /// (`GPU_NODES_CAPACITY_RESERVATION_ID`); its lower case is the Terraform variable.
    pub variable: String,
    /// What the value is and where to find it.
    pub description: String,
    /// The value used when none is given; null when one must be.
    pub default: Option<String>,
    /// The pattern a value must match (RE2), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// What a valid value is, completing "must be".
    pub expected: String,
    /// The stages whose artifacts use it, in deployment order.
    pub stages: Vec<String>,
}

/// Whether `value` may replace a placeholder in a Kubernetes file: an identifier or URL
/// (letters, digits and `:/._-`), which YAML reads as the same plain string wherever the
/// placeholder stood. The inputs' own patterns are checked by the CloudFormation parameters
/// and Terraform variables that declare them.
pub fn is_placeholder_value(value: &str) -> bool {
    !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ":/._-".contains(c))
}

/// An output of a CloudFormation stage of the same stack.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StageOutput {
    /// The CloudFormation stage whose stack has the output.
    pub stage: Option<String>,
    /// The output's name.
    pub output: String,
}

/// Artifacts that belong to a stack rather than to one stage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ArtifactList {
    /// The files.
    pub artifacts: Vec<Artifact>,
}

/// One file of the assembly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Artifact {
    /// What the file is.
    pub format: ArtifactFormat,
    /// Its path relative to the assembly root (`kimi-k3-eks/01-foundation.template.json`).
    pub path: String,
}

/// What an artifact is.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[non_exhaustive]
pub enum ArtifactFormat {
    /// A CloudFormation template.
    #[serde(rename = "cloudformation")]
    CloudFormation,
    /// A Helm values file.
    #[serde(rename = "helm-values")]
    HelmValues,
    /// A file uploaded to S3 (a lifecycle script).
    #[serde(rename = "script")]
    Script,
    /// A file of the Terraform root module.
    #[serde(rename = "terraform")]
    Terraform,
    /// Kubernetes objects (multi-document YAML).
    #[serde(rename = "kubernetes")]
    Kubernetes,
    /// The stack's `RUNBOOK.md`.
    #[serde(rename = "runbook")]
    Runbook,
}

impl ArtifactFormat {
    /// The manifest's name for the format (`helm-values`).
    pub fn as_str(self) -> &'static str {
        match self {
            ArtifactFormat::CloudFormation => "cloudformation",
            ArtifactFormat::HelmValues => "helm-values",
            ArtifactFormat::Script => "script",
            ArtifactFormat::Terraform => "terraform",
            ArtifactFormat::Kubernetes => "kubernetes",
            ArtifactFormat::Runbook => "runbook",
        }
    }
}

impl Artifact {
    /// An artifact of `format` at `path`.
    pub fn new(format: ArtifactFormat, path: impl Into<String>) -> Artifact {
        Artifact {
            format,
            path: path.into(),
        }
    }
}

impl Manifest {
    /// The format version this crate writes and reads.
    pub const VERSION: u32 = 4;

    /// A manifest of `stacks`, at [`Manifest::VERSION`], generated by this crate.
    pub fn new(stacks: Vec<StackManifest>) -> Manifest {
        Manifest {
            version: Manifest::VERSION,
            generator: concat!("hyperforge ", env!("CARGO_PKG_VERSION")).to_owned(),
            stacks,
        }
    }

    /// The stack named `name`.
    pub fn stack(&self, name: &str) -> Option<&StackManifest> {
        self.stacks.iter().find(|s| s.name == name)
    }

    /// The text of `manifest.json`: pretty-printed with two-space indents, ending in a newline.
    pub fn to_json(&self) -> String {
        // Infallible: every map key is a string and every value a string, number or list.
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Parses the text of a `manifest.json`. The version is not checked.
    pub fn from_json(text: &str) -> Result<Manifest, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The JSON Schema (draft 2020-12) of `manifest.json`, as committed in
    /// `docs/manifest.schema.json`.
    pub fn json_schema() -> Value {
        let generated = schemars::schema_for!(Manifest).to_value();
        // The identifying keys first, as in `docs/stack-file.schema.json`.
        let mut schema = serde_json::Map::new();
        schema.insert(
            "$schema".to_owned(),
            Value::from("https://json-schema.org/draft/2020-12/schema"),
        );
        schema.insert(
            "$id".to_owned(),
            Value::from("https://hyperforge.dev/manifest.schema.json"),
        );
        schema.insert("title".to_owned(), Value::from("hyperforge manifest.json"));
        if let Value::Object(generated) = generated {
            for (key, value) in generated {
                if !schema.contains_key(&key) {
                    schema.insert(key, value);
                }
            }
        }
        Value::Object(schema)
    }
}

impl StackManifest {
    /// The stage named `name`.
    pub fn stage(&self, name: &str) -> Option<&StageManifest> {
        self.stages.iter().find(|s| s.name() == name)
    }

    /// The CloudFormation stack name of stage `stage`, if it is a CloudFormation stage.
    pub fn cloudformation_stack_name(&self, stage: &str) -> Option<&str> {
        self.stage(stage).and_then(StageManifest::stack_name)
    }
}

impl StageManifest {
    /// The stage name.
    pub fn name(&self) -> &str {
        match self {
            StageManifest::CloudFormation { name, .. }
            | StageManifest::Helm { name, .. }
            | StageManifest::S3Upload { name, .. }
            | StageManifest::Kubernetes { name, .. } => name,
        }
    }

    /// The manifest's name for the stage's kind (`cloudformation`, `helm`, `s3-upload`,
    /// `kubernetes`).
    pub fn kind(&self) -> &'static str {
        match self {
            StageManifest::CloudFormation { .. } => "cloudformation",
            StageManifest::Helm { .. } => "helm",
            StageManifest::S3Upload { .. } => "s3-upload",
            StageManifest::Kubernetes { .. } => "kubernetes",
        }
    }

    /// The files the stage deploys.
    pub fn artifacts(&self) -> &[Artifact] {
        match self {
            StageManifest::CloudFormation { artifacts, .. }
            | StageManifest::Helm { artifacts, .. }
            | StageManifest::S3Upload { artifacts, .. }
            | StageManifest::Kubernetes { artifacts, .. } => artifacts,
        }
    }

    /// The files the stage deploys, to change.
    pub fn artifacts_mut(&mut self) -> &mut Vec<Artifact> {
        match self {
            StageManifest::CloudFormation { artifacts, .. }
            | StageManifest::Helm { artifacts, .. }
            | StageManifest::S3Upload { artifacts, .. }
            | StageManifest::Kubernetes { artifacts, .. } => artifacts,
        }
    }

    /// The stage's operational steps, in order.
    pub fn steps(&self) -> &[Step] {
        match self {
            StageManifest::CloudFormation { steps, .. }
            | StageManifest::Helm { steps, .. }
            | StageManifest::S3Upload { steps, .. }
            | StageManifest::Kubernetes { steps, .. } => steps,
        }
    }

    /// The stage's operational steps, to change.
    pub fn steps_mut(&mut self) -> &mut Vec<Step> {
        match self {
            StageManifest::CloudFormation { steps, .. }
            | StageManifest::Helm { steps, .. }
            | StageManifest::S3Upload { steps, .. }
            | StageManifest::Kubernetes { steps, .. } => steps,
        }
    }

    /// The steps that run at `when`, in order.
    pub fn steps_at(&self, when: When) -> impl Iterator<Item = &Step> {
        self.steps().iter().filter(move |s| s.when() == when)
    }

    /// The CloudFormation stack name, for a CloudFormation stage.
    pub fn stack_name(&self) -> Option<&str> {
        match self {
            StageManifest::CloudFormation { stack_name, .. } => Some(stack_name),
            _ => None,
        }
    }
}

impl Serialize for StageManifest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Written by hand for the key order of the file: `name`, then the `kind` tag (a derived
        // internally tagged enum writes the tag first), then the kind's fields, `artifacts` last.
        let fields = match self {
            StageManifest::CloudFormation { .. } => 5,
            StageManifest::Helm { .. } => 5,
            StageManifest::S3Upload { .. } => 2,
            StageManifest::Kubernetes { values, .. } => usize::from(!values.is_empty()),
        };
        let steps = usize::from(!self.steps().is_empty());
        let mut s = serializer.serialize_struct("StageManifest", 3 + fields + steps)?;
        s.serialize_field("name", self.name())?;
        s.serialize_field("kind", self.kind())?;
        match self {
            StageManifest::CloudFormation {
                stack_name,
                capabilities,
                parameters,
                outputs,
                deploy_from_s3,
                ..
            } => {
                s.serialize_field("stack_name", stack_name)?;
                s.serialize_field("capabilities", capabilities)?;
                s.serialize_field("parameters", parameters)?;
                s.serialize_field("outputs", outputs)?;
                if *deploy_from_s3 {
                    s.serialize_field("deploy_from_s3", deploy_from_s3)?;
                } else {
                    s.skip_field("deploy_from_s3")?;
                }
            }
            StageManifest::Helm {
                release,
                namespace,
                chart,
                set_from_outputs,
                wait,
                ..
            } => {
                s.serialize_field("release", release)?;
                s.serialize_field("namespace", namespace)?;
                s.serialize_field("chart", chart)?;
                if set_from_outputs.is_empty() {
                    s.skip_field("set_from_outputs")?;
                } else {
                    s.serialize_field("set_from_outputs", set_from_outputs)?;
                }
                s.serialize_field("wait", wait)?;
            }
            StageManifest::S3Upload { bucket, prefix, .. } => {
                s.serialize_field("bucket", bucket)?;
                s.serialize_field("prefix", prefix)?;
            }
            StageManifest::Kubernetes { values, .. } => {
                if !values.is_empty() {
                    s.serialize_field("values", values)?;
                }
            }
        }
        if self.steps().is_empty() {
            s.skip_field("steps")?;
        } else {
            s.serialize_field("steps", self.steps())?;
        }
        s.serialize_field("artifacts", self.artifacts())?;
        s.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack() -> StackManifest {
        StackManifest {
            name: "s".into(),
            region: "us-west-2".into(),
            eks_cluster: None,
            admin_host: None,
            inputs: vec![InputManifest {
                name: "GpuAzId".into(),
                variable: "GPU_AZ_ID".into(),
                description: "The GPU subnet's zone.".into(),
                default: Some("usw2-az2".into()),
                pattern: Some("^[a-z]+[0-9]-az[0-9]+$".into()),
                expected: "a zone id".into(),
                stages: vec!["foundation".into()],
            }],
            inventory: Inventory::default(),
            stages: vec![
                StageManifest::CloudFormation {
                    deploy_from_s3: false,
                    name: "foundation".into(),
                    stack_name: "s-foundation".into(),
                    capabilities: vec!["CAPABILITY_IAM".into()],
                    parameters: vec![Parameter {
                        name: "P".into(),
                        default: None,
                    }],
                    outputs: vec!["BucketName".into()],
                    steps: vec![Step::EmptyVersionedBucket {
                        bucket: StageOutput {
                            stage: Some("foundation".into()),
                            output: "BucketName".into(),
                        },
                        holds: "scripts".into(),
                    }],
                    artifacts: vec![Artifact::new(
                        ArtifactFormat::CloudFormation,
                        "s/01-foundation.template.json",
                    )],
                },
                StageManifest::S3Upload {
                    name: "scripts".into(),
                    bucket: StageOutput {
                        stage: Some("foundation".into()),
                        output: "BucketName".into(),
                    },
                    prefix: "lifecycle/".into(),
                    steps: Vec::new(),
                    artifacts: vec![Artifact::new(ArtifactFormat::Script, "s/02-scripts/a.sh")],
                },
                StageManifest::Helm {
                    wait: true,
                    name: "chart".into(),
                    release: "r".into(),
                    namespace: "ns".into(),
                    chart: Chart::Git {
                        url: "https://example.com/c.git".into(),
                        commit: "abc".into(),
                        path: "charts/c".into(),
                    },
                    set_from_outputs: vec![SetFromOutput {
                        key: "bucket".into(),
                        stage: None,
                        output: "BucketName".into(),
                    }],
                    steps: Vec::new(),
                    artifacts: Vec::new(),
                },
                StageManifest::Helm {
                    wait: true,
                    name: "repo-chart".into(),
                    release: "q".into(),
                    namespace: "ns".into(),
                    chart: Chart::Repository {
                        repository: "oci://example.com/charts".into(),
                        name: "q".into(),
                        version: "1.0.0".into(),
                    },
                    set_from_outputs: Vec::new(),
                    steps: Vec::new(),
                    artifacts: vec![Artifact::new(
                        ArtifactFormat::HelmValues,
                        "s/04-repo-chart.values.yaml",
                    )],
                },
                StageManifest::Kubernetes {
                    name: "workload".into(),
                    values: vec![PlaceholderValue {
                        placeholder: "ws-hyperforge-output-MetricsWorkspaceId".into(),
                        from: ValueSource::Output(StageOutput {
                            stage: Some("foundation".into()),
                            output: "MetricsWorkspaceId".into(),
                        }),
                    }],
                    steps: vec![
                        Step::Secret(SecretStep {
                            name: "hf-token".into(),
                            namespace: "model-weights".into(),
                            keys: vec!["token".into()],
                            required: false,
                            used_by: vec!["Job/stage-model-0123456789ab".into()],
                            source: SecretSource::Environment {
                                variable: "HF_TOKEN".into(),
                            },
                        }),
                        Step::WaitJob {
                            name: "stage-model-0123456789ab".into(),
                            namespace: "model-weights".into(),
                            timeout_seconds: 7800,
                        },
                    ],
                    artifacts: vec![Artifact::new(
                        ArtifactFormat::Kubernetes,
                        "s/05-workload.yaml",
                    )],
                },
            ],
            terraform: None,
            runbook: Some(ArtifactList {
                artifacts: vec![Artifact::new(ArtifactFormat::Runbook, "s/RUNBOOK.md")],
            }),
            acknowledged: Vec::new(),
        }
    }

    #[test]
    fn stage_keys_in_file_order() {
        let text = Manifest::new(vec![stack()]).to_json();
        let order = |keys: &[&str]| {
            let at: Vec<usize> = keys
                .iter()
                .map(|k| text.find(&format!("\"{k}\"")).unwrap_or(usize::MAX))
                .collect();
            assert!(at.windows(2).all(|w| w[0] < w[1]), "{keys:?} in\n{text}");
        };
        order(&["version", "generator", "stacks"]);
        order(&["region", "eks_cluster", "stages", "runbook"]);
        order(&["foundation", "kind", "stack_name", "capabilities"]);
        order(&["parameters", "outputs", "artifacts"]);
        assert!(text.contains("\"eks_cluster\": null"));
        assert!(text.contains("\"default\": null"));
        assert!(text.contains("\"stage\": null"));
        assert!(!text.contains("terraform"));
        // One `set_from_outputs`: the empty list of the repository chart is left out.
        assert_eq!(text.matches("set_from_outputs").count(), 1);
        assert!(text.contains("\"git\": \"https://example.com/c.git\""));
        assert!(text.ends_with("}\n"));
    }

    #[test]
    fn every_kind_reads_back() {
        let manifest = Manifest::new(vec![stack()]);
        let text = manifest.to_json();
        let back = Manifest::from_json(&text).map_err(|e| e.to_string());
        assert_eq!(back.as_ref(), Ok(&manifest));
        assert_eq!(back.map(|m| m.to_json()), Ok(text));
        assert_eq!(
            manifest.stacks[0].cloudformation_stack_name("foundation"),
            Some("s-foundation")
        );
        assert_eq!(
            manifest.stacks[0].cloudformation_stack_name("scripts"),
            None
        );
        let kinds: Vec<&str> = manifest.stacks[0].stages.iter().map(|s| s.kind()).collect();
        assert_eq!(
            kinds,
            ["cloudformation", "s3-upload", "helm", "helm", "kubernetes"]
        );
    }

    #[test]
    fn unknown_kinds_and_formats_are_errors() {
        let stage = r#"{"name": "x", "kind": "pulumi", "artifacts": []}"#;
        assert!(serde_json::from_str::<StageManifest>(stage)
            .is_err_and(|e| e.to_string().contains("pulumi")));
        let artifact = r#"{"format": "pulumi", "path": "x"}"#;
        assert!(serde_json::from_str::<Artifact>(artifact).is_err());
        let formats = [
            ArtifactFormat::CloudFormation,
            ArtifactFormat::HelmValues,
            ArtifactFormat::Script,
            ArtifactFormat::Terraform,
            ArtifactFormat::Kubernetes,
            ArtifactFormat::Runbook,
        ];
        for f in formats {
            assert_eq!(
                serde_json::to_value(f).ok(),
                Some(Value::from(f.as_str())),
                "{f:?}"
            );
        }
    }
}
