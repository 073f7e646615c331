//! Loading an assembly directory's `manifest.json` ([`crate::assembly::manifest::Manifest`])
//! and checking it before anything is deployed: a supported version, and every stage's
//! artifacts present inside the directory.

use super::error::DeployError;
use crate::assembly::manifest::{Manifest, StageManifest};
use serde_json::Value;
use std::path::{Component, Path, PathBuf};

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
    /// The admin host the Helm and kubectl stages reach the private endpoint through.
    pub admin_host: Option<crate::assembly::manifest::AdminHostManifest>,
    /// The values chosen when the stack is deployed.
    pub inputs: Vec<crate::assembly::manifest::InputManifest>,
    /// The stages, in order, as the manifest lists them.
    pub stages: Vec<StageManifest>,
    /// The assembly directory the stages' artifact paths are relative to.
    pub root: PathBuf,
}

impl StackPlan {
    /// The CloudFormation stack name of stage `name`, if it is a CloudFormation stage.
    pub fn cloudformation_stack_name(&self, stage: &str) -> Option<&str> {
        self.stages
            .iter()
            .find(|s| s.name() == stage)
            .and_then(StageManifest::stack_name)
    }

    /// Every parameter name declared by any CloudFormation stage, and every input's (a value
    /// only Kubernetes stages read is given the same way).
    pub fn parameter_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .stages
            .iter()
            .flat_map(|s| match s {
                StageManifest::CloudFormation { parameters, .. } => parameters.as_slice(),
                _ => &[],
            })
            .map(|p| p.name.as_str())
            .collect();
        for input in &self.inputs {
            if !names.contains(&input.name.as_str()) {
                names.push(&input.name);
            }
        }
        names
    }

    /// The index of stage `name`, or an error listing the stages.
    pub fn stage_index(&self, name: &str) -> Result<usize, DeployError> {
        self.stages
            .iter()
            .position(|s| s.name() == name)
            .ok_or_else(|| DeployError::UnknownStage {
                stack: self.name.clone(),
                name: name.to_owned(),
                available: self
                    .stages
                    .iter()
                    .map(StageManifest::name)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// The files of `stage`, under the assembly directory.
    pub fn files(&self, stage: &StageManifest) -> Vec<PathBuf> {
        stage
            .artifacts()
            .iter()
            .map(|a| self.root.join(&a.path))
            .collect()
    }

    /// The first file of `stage`: the template of a CloudFormation stage, the values file of a
    /// Helm stage, the objects of a Kubernetes stage. [`AssemblyDir::load`] makes sure these
    /// stages have one.
    pub fn file(&self, stage: &StageManifest) -> Result<PathBuf, DeployError> {
        self.files(stage)
            .into_iter()
            .next()
            .ok_or_else(|| DeployError::Manifest {
                path: self.root.join("manifest.json"),
                message: format!("stage `{}` lists no artifact", stage.name()),
            })
    }
}

impl AssemblyDir {
    /// Reads `<root>/manifest.json` and checks that every artifact it lists exists.
    pub fn load(root: &Path) -> Result<AssemblyDir, DeployError> {
        let (path, parsed) = read_versioned(root, "manifest.json", Manifest::VERSION, "manifest")?;
        parsed
            .and_then(|manifest| Self::from_manifest(root, manifest))
            .map_err(|message| DeployError::Manifest { path, message })
    }

    /// Checks a manifest whose artifact paths are relative to `root`: its version, and that
    /// every stage's artifacts are files inside `root`.
    pub fn from_manifest(root: &Path, manifest: Manifest) -> Result<AssemblyDir, String> {
        if manifest.version != Manifest::VERSION {
            return Err(unsupported_version(Manifest::VERSION));
        }
        let stacks = manifest
            .stacks
            .into_iter()
            .map(|stack| {
                for stage in &stack.stages {
                    check_stage(root, stage)?;
                }
                Ok(StackPlan {
                    name: stack.name,
                    region: stack.region,
                    eks_cluster: stack.eks_cluster,
                    admin_host: stack.admin_host,
                    inputs: stack.inputs,
                    stages: stack.stages,
                    root: root.to_path_buf(),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
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

/// What a manifest of another version is told.
pub(super) fn unsupported_version(expected: u32) -> String {
    format!("unsupported `version` (expected {expected})")
}

/// Reads `<root>/<file>`, a JSON manifest of format `version` (`what` names the format), and
/// parses it as `T`: the file's path, and the manifest or what is wrong with it. The version
/// is checked first, so that a manifest of another version is reported as such rather than as
/// a mismatch of its fields. An unreadable file is an I/O error.
pub(super) fn read_versioned<T: serde::de::DeserializeOwned>(
    root: &Path,
    file: &str,
    version: u32,
    what: &str,
) -> Result<(PathBuf, Result<T, String>), DeployError> {
    let path = root.join(file);
    let text = std::fs::read_to_string(&path).map_err(|source| DeployError::Io {
        path: path.clone(),
        source,
    })?;
    Ok((path, parse_versioned(&text, version, what)))
}

/// The manifest in `text` (see [`read_versioned`]).
pub(super) fn parse_versioned<T: serde::de::DeserializeOwned>(
    text: &str,
    version: u32,
    what: &str,
) -> Result<T, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
    if value.get("version").and_then(Value::as_u64) != Some(u64::from(version)) {
        return Err(unsupported_version(version));
    }
    serde_json::from_str::<T>(text)
        .map_err(|e| format!("not in the format of {what} version {version} ({e})"))
}

fn check_stage(root: &Path, stage: &StageManifest) -> Result<(), String> {
    let name = stage.name();
    for a in stage.artifacts() {
        let inside = !a.path.is_empty()
            && Path::new(&a.path)
                .components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if !inside {
            return Err(format!(
                "artifact `{}` of stage `{name}` is not a relative path inside the assembly directory",
                a.path
            ));
        }
        if !root.join(&a.path).is_file() {
            return Err(format!(
                "artifact `{}` of stage `{name}` does not exist",
                a.path
            ));
        }
    }
    match stage {
        StageManifest::S3Upload { bucket, .. } if bucket.stage.is_none() => Err(format!(
            "the bucket of stage `{name}` without a string `stage`"
        )),
        StageManifest::S3Upload { .. } => Ok(()),
        _ if stage.artifacts().is_empty() => Err(format!("stage `{name}` lists no artifact")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assembly::manifest::Chart;

    fn written(name: &str) -> (PathBuf, Manifest) {
        let dir = std::env::temp_dir().join(format!("hf-manifest-{name}-{}", std::process::id()));
        let assembly = crate::reference::kimi_k3_hyperpod()
            .synth()
            .map_err(|e| e.to_string());
        let Ok(assembly) = assembly else {
            panic!("reference synthesizes")
        };
        assert!(assembly.write_to(&dir).is_ok());
        (dir, assembly.manifest().clone())
    }

    #[test]
    fn reads_the_reference_manifest() {
        let (dir, _) = written("reads");
        let loaded = AssemblyDir::load(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        let loaded = loaded.map_err(|e| e.to_string());
        let Ok(loaded) = loaded else {
            panic!("{loaded:?}")
        };
        let stack = loaded.stack("kimi-k3-hyperpod").map_err(|e| e.to_string());
        let Ok(stack) = stack else { panic!() };
        let kinds: Vec<_> = stack.stages.iter().map(StageManifest::kind).collect();
        assert_eq!(
            kinds,
            [
                "cloudformation",
                "s3-upload",
                "helm",
                "cloudformation",
                "cloudformation",
                "helm",
                "helm",
                "helm",
                "kubernetes",
                "kubernetes"
            ]
        );
        assert_eq!(
            stack.cloudformation_stack_name("foundation"),
            Some("kimi-k3-hyperpod-foundation")
        );
        assert!(matches!(
            &stack.stages[1],
            StageManifest::S3Upload { bucket, prefix, artifacts, .. }
                if bucket.stage.as_deref() == Some("foundation")
                    && bucket.output == "LifecycleBucketName"
                    && prefix == "lifecycle/" && artifacts.len() == 1
        ));
        assert_eq!(
            stack.files(&stack.stages[1]),
            [dir.join("kimi-k3-hyperpod/02-lifecycle-scripts/on_create.sh")]
        );
        assert!(matches!(
            &stack.stages[2],
            StageManifest::Helm {
                chart: Chart::Git { .. },
                ..
            }
        ));
        assert_eq!(
            stack.file(&stack.stages[0]).ok(),
            Some(dir.join("kimi-k3-hyperpod/01-foundation.template.json"))
        );
        assert!(stack
            .parameter_names()
            .contains(&"HyperPodP6B300TrainingPlanArn"));
        assert!(matches!(
            loaded.stack("nope"),
            Err(DeployError::UnknownStack { .. })
        ));
    }

    #[test]
    fn refuses_what_cannot_be_deployed() {
        let (dir, manifest) = written("refuses");
        let parse = |text: &str| parse_versioned::<Manifest>(text, Manifest::VERSION, "manifest");
        let error = |text: &str| match parse(text).and_then(|m| AssemblyDir::from_manifest(&dir, m))
        {
            Ok(_) => String::new(),
            Err(e) => e,
        };
        let with_path = |path: &str| {
            let mut m = manifest.clone();
            m.stacks[0].stages[0].artifacts_mut()[0].path = path.to_owned();
            error(&m.to_json())
        };
        let escaping = with_path("../outside.template.json");
        let absolute = with_path("/etc/hostname");
        let missing = with_path("kimi-k3-hyperpod/missing.template.json");
        let mut no_template = manifest.clone();
        no_template.stacks[0].stages[0].artifacts_mut().clear();
        let no_template = error(&no_template.to_json());
        let fine = error(&manifest.to_json());
        let _ = std::fs::remove_dir_all(&dir);

        assert_eq!(fine, "");
        assert!(
            escaping.contains("not a relative path inside"),
            "{escaping}"
        );
        assert!(
            absolute.contains("not a relative path inside"),
            "{absolute}"
        );
        assert!(missing.ends_with("does not exist"), "{missing}");
        assert_eq!(no_template, "stage `foundation` lists no artifact");
        assert!(error("{").starts_with("not JSON"));
        assert_eq!(
            error(r#"{"version": 5, "stacks": "anything"}"#),
            "unsupported `version` (expected 4)"
        );
        // A manifest of an earlier version (version 3: stacks without their inventory) is
        // refused, not half-read.
        assert_eq!(
            error(r#"{"version": 3, "stacks": []}"#),
            "unsupported `version` (expected 4)"
        );
        let shape = error(r#"{"version": 4, "generator": "g", "stacks": [{"name": "s"}]}"#);
        assert!(shape.contains("missing field `region`"), "{shape}");
    }
}
