//! Reading an assembly directory's `manifest.json` into typed stages (the format written by
//! `synth::synthesize`; see `src/synth/mod.rs`).

use super::error::DeployError;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A synthesized assembly on disk: its root directory and its stacks.
#[derive(Clone, Debug)]
pub struct AssemblyDir {
    root: PathBuf,
    stacks: Vec<StackPlan>,
}

/// One stack of the manifest, its stages in deployment order.
#[derive(Clone, Debug, PartialEq)]
pub struct StackPlan {
    /// The hyperforge stack name.
    pub name: String,
    /// The region the stack was described for.
    pub region: String,
    /// The EKS cluster's name, if the stack has one (for `aws eks update-kubeconfig`).
    pub eks_cluster: Option<String>,
    /// The stages, in order.
    pub stages: Vec<Stage>,
}

/// One stage.
#[derive(Clone, Debug, PartialEq)]
pub struct Stage {
    /// The stage name (`foundation`).
    pub name: String,
    /// What the stage does.
    pub kind: StageKind,
}

/// A template parameter and its default.
#[derive(Clone, Debug, PartialEq)]
pub struct ParameterSpec {
    /// The parameter's name.
    pub name: String,
    /// Its default, if the template has one.
    pub default: Option<String>,
}

/// Where a Helm chart comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Chart {
    /// A chart repository.
    Repository {
        /// The repository URL.
        repository: String,
        /// The chart name.
        name: String,
        /// The pinned version.
        version: String,
    },
    /// A directory of a git repository at a pinned commit.
    Git {
        /// The clone URL.
        url: String,
        /// The pinned commit.
        commit: String,
        /// The chart's directory inside the repository.
        path: String,
    },
}

/// What a stage does, with absolute artifact paths.
#[derive(Clone, Debug, PartialEq)]
pub enum StageKind {
    /// A CloudFormation stack.
    CloudFormation {
        /// The CloudFormation stack name.
        stack_name: String,
        /// The template file.
        template: PathBuf,
        /// Capabilities to acknowledge (`CAPABILITY_IAM`).
        capabilities: Vec<String>,
        /// The template's parameters.
        parameters: Vec<ParameterSpec>,
    },
    /// Files put under a prefix of a bucket created by an earlier stage.
    Upload {
        /// The CloudFormation stage whose stack has the bucket-name output.
        bucket_stage: String,
        /// The output holding the bucket name.
        bucket_output: String,
        /// The key prefix (`lifecycle/`).
        prefix: String,
        /// The files to upload (each under `prefix` + its file name).
        files: Vec<PathBuf>,
    },
    /// A Helm release.
    Helm {
        /// The release name.
        release: String,
        /// The namespace.
        namespace: String,
        /// The chart.
        chart: Chart,
        /// The values file.
        values: PathBuf,
    },
    /// Kubernetes objects to apply.
    Kubernetes {
        /// The multi-document YAML file.
        manifest: PathBuf,
    },
}

impl StageKind {
    /// The manifest's name for the kind.
    pub fn as_str(&self) -> &'static str {
        match self {
            StageKind::CloudFormation { .. } => "cloudformation",
            StageKind::Upload { .. } => "s3-upload",
            StageKind::Helm { .. } => "helm",
            StageKind::Kubernetes { .. } => "kubernetes",
        }
    }
}

impl StackPlan {
    /// The CloudFormation stack name of stage `name`, if it is a CloudFormation stage.
    pub fn cloudformation_stack_name(&self, stage: &str) -> Option<&str> {
        self.stages.iter().find_map(|s| match &s.kind {
            StageKind::CloudFormation { stack_name, .. } if s.name == stage => {
                Some(stack_name.as_str())
            }
            _ => None,
        })
    }

    /// Every parameter name declared by any CloudFormation stage.
    pub fn parameter_names(&self) -> Vec<&str> {
        self.stages
            .iter()
            .flat_map(|s| match &s.kind {
                StageKind::CloudFormation { parameters, .. } => parameters.as_slice(),
                _ => &[],
            })
            .map(|p| p.name.as_str())
            .collect()
    }

    /// The index of stage `name`, or an error listing the stages.
    pub fn stage_index(&self, name: &str) -> Result<usize, DeployError> {
        self.stages
            .iter()
            .position(|s| s.name == name)
            .ok_or_else(|| DeployError::UnknownStage {
                stack: self.name.clone(),
                name: name.to_owned(),
                available: self
                    .stages
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

impl AssemblyDir {
    /// Reads `<root>/manifest.json` and checks that every artifact it lists exists.
    pub fn load(root: &Path) -> Result<AssemblyDir, DeployError> {
        let path = root.join("manifest.json");
        let text = std::fs::read_to_string(&path).map_err(|source| DeployError::Io {
            path: path.clone(),
            source,
        })?;
        let value: Value = serde_json::from_str(&text).map_err(|e| DeployError::Manifest {
            path: path.clone(),
            message: format!("not JSON ({e})"),
        })?;
        Self::from_manifest(root, &value).map_err(|message| DeployError::Manifest { path, message })
    }

    /// Parses a manifest whose artifact paths are relative to `root`.
    pub fn from_manifest(root: &Path, manifest: &Value) -> Result<AssemblyDir, String> {
        if manifest.get("version").and_then(Value::as_u64) != Some(1) {
            return Err("unsupported `version` (expected 1)".into());
        }
        let stacks = manifest
            .get("stacks")
            .and_then(Value::as_array)
            .ok_or("no `stacks` array")?
            .iter()
            .map(|s| parse_stack(root, s))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AssemblyDir {
            root: root.to_path_buf(),
            stacks,
        })
    }

    /// The assembly's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every stack.
    pub fn stacks(&self) -> &[StackPlan] {
        &self.stacks
    }

    /// The stack named `name`.
    pub fn stack(&self, name: &str) -> Result<&StackPlan, DeployError> {
        self.stacks
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| DeployError::UnknownStack {
                name: name.to_owned(),
                available: self
                    .stacks
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

fn string(v: &Value, key: &str, what: &str) -> Result<String, String> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("{what} without a string `{key}`"))
}

fn artifact_paths(root: &Path, stage: &Value, name: &str) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for a in stage
        .get("artifacts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let rel = string(a, "path", &format!("an artifact of stage `{name}`"))?;
        let path = root.join(&rel);
        if !path.is_file() {
            return Err(format!("artifact `{rel}` of stage `{name}` does not exist"));
        }
        out.push(path);
    }
    Ok(out)
}

fn first_artifact(root: &Path, stage: &Value, name: &str) -> Result<PathBuf, String> {
    artifact_paths(root, stage, name)?
        .into_iter()
        .next()
        .ok_or_else(|| format!("stage `{name}` lists no artifact"))
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn parse_stack(root: &Path, v: &Value) -> Result<StackPlan, String> {
    let name = string(v, "name", "a stack")?;
    let region = string(v, "region", &format!("stack `{name}`"))?;
    let eks_cluster = v
        .get("eks_cluster")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut stages = Vec::new();
    for s in v
        .get("stages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let stage_name = string(s, "name", &format!("a stage of `{name}`"))?;
        let what = format!("stage `{stage_name}`");
        let kind = match string(s, "kind", &what)?.as_str() {
            "cloudformation" => StageKind::CloudFormation {
                stack_name: string(s, "stack_name", &what)?,
                template: first_artifact(root, s, &stage_name)?,
                capabilities: s
                    .get("capabilities")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                parameters: s
                    .get("parameters")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|p| {
                        Ok(ParameterSpec {
                            name: string(p, "name", &format!("a parameter of {what}"))?,
                            default: p.get("default").and_then(scalar),
                        })
                    })
                    .collect::<Result<_, String>>()?,
            },
            "s3-upload" => {
                let bucket = s
                    .get("bucket")
                    .ok_or_else(|| format!("{what} without `bucket`"))?;
                StageKind::Upload {
                    bucket_stage: string(bucket, "stage", &format!("the bucket of {what}"))?,
                    bucket_output: string(bucket, "output", &format!("the bucket of {what}"))?,
                    prefix: string(s, "prefix", &what)?,
                    files: artifact_paths(root, s, &stage_name)?,
                }
            }
            "helm" => {
                let chart = s
                    .get("chart")
                    .ok_or_else(|| format!("{what} without `chart`"))?;
                let chart_what = format!("the chart of {what}");
                let chart = if chart.get("git").is_some() {
                    Chart::Git {
                        url: string(chart, "git", &chart_what)?,
                        commit: string(chart, "commit", &chart_what)?,
                        path: string(chart, "path", &chart_what)?,
                    }
                } else {
                    Chart::Repository {
                        repository: string(chart, "repository", &chart_what)?,
                        name: string(chart, "name", &chart_what)?,
                        version: string(chart, "version", &chart_what)?,
                    }
                };
                StageKind::Helm {
                    release: string(s, "release", &what)?,
                    namespace: string(s, "namespace", &what)?,
                    chart,
                    values: first_artifact(root, s, &stage_name)?,
                }
            }
            "kubernetes" => StageKind::Kubernetes {
                manifest: first_artifact(root, s, &stage_name)?,
            },
            other => return Err(format!("{what} has unknown kind `{other}`")),
        };
        stages.push(Stage {
            name: stage_name,
            kind,
        });
    }
    Ok(StackPlan {
        name,
        region,
        eks_cluster,
        stages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_reference_manifest() {
        let dir = std::env::temp_dir().join(format!("hf-manifest-{}", std::process::id()));
        let assembly = crate::reference::kimi_k3_hyperpod()
            .synth()
            .map_err(|e| e.to_string());
        let Ok(assembly) = assembly else {
            panic!("reference synthesizes")
        };
        assert!(assembly.write_to(&dir).is_ok());
        let loaded = AssemblyDir::load(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        let loaded = loaded.map_err(|e| e.to_string());
        let Ok(loaded) = loaded else {
            panic!("{loaded:?}")
        };
        let stack = loaded.stack("kimi-k3-hyperpod").map_err(|e| e.to_string());
        let Ok(stack) = stack else { panic!() };
        let kinds: Vec<_> = stack.stages.iter().map(|s| s.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "cloudformation",
                "s3-upload",
                "helm",
                "cloudformation",
                "kubernetes"
            ]
        );
        assert_eq!(
            stack.cloudformation_stack_name("foundation"),
            Some("kimi-k3-hyperpod-foundation")
        );
        assert!(matches!(
            &stack.stages[1].kind,
            StageKind::Upload { bucket_stage, bucket_output, prefix, files }
                if bucket_stage == "foundation" && bucket_output == "LifecycleBucketName"
                    && prefix == "lifecycle/" && files.len() == 1
        ));
        assert!(matches!(
            &stack.stages[2].kind,
            StageKind::Helm {
                chart: Chart::Git { .. },
                ..
            }
        ));
        assert!(stack
            .parameter_names()
            .contains(&"HyperPodP6B300TrainingPlanArn"));
        assert!(matches!(
            loaded.stack("nope"),
            Err(DeployError::UnknownStack { .. })
        ));
    }
}
