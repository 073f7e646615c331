//! Helm and Kubernetes stages: the exact commands to run (printed for the user, or run when
//! asked and the tools are on PATH).

use super::error::DeployError;
use crate::assembly::manifest::{Chart, StageManifest, Step};
use crate::assembly::plan::sh_quote;
use std::fmt;
use std::path::{Path, PathBuf};

/// One command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalCommand {
    /// The program (`helm`).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Skip when this path already exists (a chart checkout from an earlier run).
    pub unless_exists: Option<PathBuf>,
    /// The tools a script runs besides the program itself, checked on PATH first.
    pub needs: Vec<&'static str>,
    /// Whether it talks to the cluster's Kubernetes API (through the admin tunnel).
    pub kubernetes_api: bool,
    /// The text written to its standard input, if any.
    pub stdin: Option<String>,
    /// Where that text comes from (a stage's file, filled), for the printed command.
    pub stdin_from: Option<String>,
}

impl ExternalCommand {
    fn new(program: &str, args: &[&str]) -> ExternalCommand {
        ExternalCommand {
            program: program.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            unless_exists: None,
            needs: Vec::new(),
            kubernetes_api: program == "kubectl" || program == "helm",
            stdin: None,
            stdin_from: None,
        }
    }

    /// The command carrying out one step of the plan: its script (the one the runbook shows)
    /// run by `sh`, after the deploy-time values it reads (`values`: variable and value, each
    /// quoted) are set.
    pub fn step(step: &Step, region: &str, values: &[(String, String)]) -> ExternalCommand {
        let mut script: String = values
            .iter()
            .map(|(variable, value)| format!("{variable}={}\n", sh_quote(value)))
            .collect();
        script.push_str(&step.script(region));
        ExternalCommand {
            program: "sh".to_owned(),
            args: vec!["-c".to_owned(), script],
            unless_exists: None,
            needs: step.tools().to_vec(),
            kubernetes_api: step.uses_kubernetes_api(),
            stdin: None,
            stdin_from: None,
        }
    }
}

impl fmt::Display for ExternalCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", sh_quote(&self.program))?;
        for a in &self.args {
            write!(f, " {}", sh_quote(a))?;
        }
        if let Some(from) = &self.stdin_from {
            write!(f, " < {} (with its values filled)", sh_quote(from))?;
        }
        Ok(())
    }
}

fn p(path: &Path) -> String {
    path.display().to_string()
}

/// Where a git chart is checked out: `<checkouts>/<release>-<first 12 hex of the commit>`.
pub fn chart_checkout(checkouts: &Path, release: &str, commit: &str) -> PathBuf {
    let short: String = commit.chars().take(12).collect();
    checkouts.join(format!("{release}-{short}"))
}

/// The commands that deploy a helm or kubernetes stage whose artifact paths are relative to
/// `root` (empty for other kinds, and for a stage without its values file or objects).
pub fn deploy_commands(
    stage: &StageManifest,
    root: &Path,
    checkouts: &Path,
) -> Vec<ExternalCommand> {
    let Some(file) = stage.artifacts().first().map(|a| root.join(&a.path)) else {
        return Vec::new();
    };
    match stage {
        StageManifest::Helm {
            release,
            namespace,
            chart,
            wait,
            ..
        } => with_namespace_created(
            namespace,
            with_wait(
                *wait,
                match chart {
                    Chart::Git { url, commit, path } => {
                        let dir = chart_checkout(checkouts, release, commit);
                        let chart_dir = dir.join(path);
                        let mut clone = ExternalCommand::new("git", &["clone", url, &p(&dir)]);
                        clone.unless_exists = Some(dir.clone());
                        vec![
                            clone,
                            ExternalCommand::new(
                                "git",
                                &["-C", &p(&dir), "checkout", "--detach", commit],
                            ),
                            ExternalCommand::new("helm", &["dependency", "build", &p(&chart_dir)]),
                            ExternalCommand::new(
                                "helm",
                                &[
                                    "upgrade",
                                    "--install",
                                    release,
                                    &p(&chart_dir),
                                    "-n",
                                    namespace,
                                    "-f",
                                    &p(&file),
                                ],
                            ),
                        ]
                    }
                    Chart::Repository {
                        repository,
                        name,
                        version,
                    } => vec![ExternalCommand::new(
                        "helm",
                        &[
                            "upgrade",
                            "--install",
                            release,
                            name,
                            "--repo",
                            repository,
                            "--version",
                            version,
                            "-n",
                            namespace,
                            "-f",
                            &p(&file),
                        ],
                    )],
                },
            ),
        ),
        // The stage's steps (Secrets before, Jobs after) are the plan's, added by the caller.
        StageManifest::Kubernetes { .. } => {
            vec![ExternalCommand::new("kubectl", &["apply", "-f", &p(&file)])]
        }
        _ => Vec::new(),
    }
}

/// Adds `--set key=value` to the `helm upgrade` command for each value read from an earlier
/// stage's output.
pub fn with_sets(
    mut commands: Vec<ExternalCommand>,
    sets: &[(String, String)],
) -> Vec<ExternalCommand> {
    if let Some(upgrade) = commands
        .iter_mut()
        .find(|c| c.program == "helm" && c.args.first().map(String::as_str) == Some("upgrade"))
    {
        for (key, value) in sets {
            upgrade.args.push("--set".to_owned());
            upgrade.args.push(format!("{key}={value}"));
        }
    }
    commands
}

/// Applies a Kubernetes stage's objects as `filled` (its file with the values only a
/// deployment knows in place of their placeholders, [`crate::assembly::fill`]): `kubectl apply
/// -f FILE` becomes `kubectl apply -f -` reading the filled text, so the file in the assembly is
/// never changed and nothing is written elsewhere.
pub fn with_filled(mut commands: Vec<ExternalCommand>, filled: String) -> Vec<ExternalCommand> {
    if let Some(apply) = commands
        .iter_mut()
        .find(|c| c.program == "kubectl" && c.args.first().map(String::as_str) == Some("apply"))
    {
        if let Some(file) = apply.args.last_mut() {
            apply.stdin_from = Some(std::mem::replace(file, "-".to_owned()));
        }
        apply.stdin = Some(filled);
    }
    commands
}

/// Adds `--create-namespace` to the `helm upgrade` command when its namespace may not exist
/// yet (every namespace but `kube-system`).
fn with_namespace_created(
    namespace: &str,
    mut commands: Vec<ExternalCommand>,
) -> Vec<ExternalCommand> {
    if crate::assembly::manifest::helm_creates_namespace(namespace) {
        if let Some(upgrade) = commands
            .iter_mut()
            .find(|c| c.program == "helm" && c.args.first().map(String::as_str) == Some("upgrade"))
        {
            upgrade.args.push("--create-namespace".to_owned());
        }
    }
    commands
}

/// Adds `--wait` to the `helm upgrade` command when the stage waits for its workloads.
fn with_wait(wait: bool, mut commands: Vec<ExternalCommand>) -> Vec<ExternalCommand> {
    if wait {
        if let Some(upgrade) = commands
            .iter_mut()
            .find(|c| c.program == "helm" && c.args.first().map(String::as_str) == Some("upgrade"))
        {
            upgrade.args.push("--wait".to_owned());
        }
    }
    commands
}

/// The commands that remove what a helm or kubernetes stage installed (artifact paths relative
/// to `root`).
pub fn destroy_commands(stage: &StageManifest, root: &Path) -> Vec<ExternalCommand> {
    match stage {
        StageManifest::Helm {
            release, namespace, ..
        } => vec![ExternalCommand::new(
            "helm",
            &["uninstall", release, "-n", namespace],
        )],
        StageManifest::Kubernetes { artifacts, .. } => artifacts
            .first()
            .map(|a| {
                ExternalCommand::new(
                    "kubectl",
                    &[
                        "delete",
                        "--ignore-not-found",
                        "-f",
                        &p(&root.join(&a.path)),
                    ],
                )
            })
            .into_iter()
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether `program` is an executable file on PATH.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Runs the commands in order, inheriting the terminal; stops at the first failure.
/// `kubeconfig`, when given, is the `KUBECONFIG` kubectl and helm use (the admin tunnel's).
/// Runs `commands` in order, each with `env` (the AWS CLI's settings) and, when given, the
/// tunnel's kubeconfig.
pub fn run(
    commands: &[ExternalCommand],
    kubeconfig: Option<&Path>,
    env: &[(&'static str, String)],
) -> Result<(), DeployError> {
    for c in commands {
        for program in std::iter::once(c.program.as_str()).chain(c.needs.iter().copied()) {
            if !on_path(program) {
                return Err(DeployError::External {
                    command: c.to_string(),
                    problem: format!("cannot run: `{program}` is not on PATH"),
                });
            }
        }
    }
    for c in commands {
        if c.unless_exists.as_deref().is_some_and(Path::exists) {
            continue;
        }
        let mut command = std::process::Command::new(&c.program);
        command.args(&c.args);
        command.envs(env.iter().map(|(k, v)| (k, v)));
        if let Some(path) = kubeconfig {
            command.env("KUBECONFIG", path);
        }
        let started = |e: std::io::Error| DeployError::External {
            command: c.to_string(),
            problem: format!("could not be started: {e}"),
        };
        let status = match &c.stdin {
            None => command.status().map_err(started)?,
            Some(text) => {
                use std::io::Write;
                command.stdin(std::process::Stdio::piped());
                let mut child = command.spawn().map_err(started)?;
                if let Some(mut input) = child.stdin.take() {
                    // A program that exits early closes the pipe; its status says why.
                    let _ = input.write_all(text.as_bytes());
                }
                child.wait().map_err(started)?
            }
        };
        if !status.success() {
            return Err(DeployError::External {
                command: c.to_string(),
                problem: format!("failed ({status})"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::assembly::manifest::{Artifact, ArtifactFormat};

    fn helm(release: &str, namespace: &str, chart: Chart, values: &str) -> StageManifest {
        StageManifest::Helm {
            name: release.into(),
            release: release.into(),
            namespace: namespace.into(),
            chart,
            set_from_outputs: Vec::new(),
            wait: false,
            steps: Vec::new(),
            artifacts: vec![Artifact::new(ArtifactFormat::HelmValues, values)],
        }
    }

    #[test]
    fn helm_git_chart_commands() {
        let kind = helm(
            "hyperpod-dependencies",
            "kube-system",
            Chart::Git {
                url: "https://github.com/aws/sagemaker-hyperpod-cli.git".into(),
                commit: "011ca927123e02b35a399935bbb3ab1905fe33c7".into(),
                path: "helm_chart/HyperPodHelmChart".into(),
            },
            "s/03-hyperpod-dependencies.values.yaml",
        );
        let lines: Vec<String> = deploy_commands(&kind, Path::new("out"), Path::new("/tmp/charts"))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            lines,
            [
                "git clone https://github.com/aws/sagemaker-hyperpod-cli.git /tmp/charts/hyperpod-dependencies-011ca927123e",
                "git -C /tmp/charts/hyperpod-dependencies-011ca927123e checkout --detach 011ca927123e02b35a399935bbb3ab1905fe33c7",
                "helm dependency build /tmp/charts/hyperpod-dependencies-011ca927123e/helm_chart/HyperPodHelmChart",
                "helm upgrade --install hyperpod-dependencies /tmp/charts/hyperpod-dependencies-011ca927123e/helm_chart/HyperPodHelmChart -n kube-system -f out/s/03-hyperpod-dependencies.values.yaml",
            ]
        );
        assert_eq!(
            destroy_commands(&kind, Path::new("out"))[0].to_string(),
            "helm uninstall hyperpod-dependencies -n kube-system"
        );
    }

    #[test]
    fn repository_chart_and_kubectl() {
        let kind = helm(
            "r",
            "ns",
            Chart::Repository {
                repository: "https://charts.example.com".into(),
                name: "thing".into(),
                version: "1.2.3".into(),
            },
            "v.yaml",
        );
        assert_eq!(
            deploy_commands(&kind, Path::new(""), Path::new("c"))[0].to_string(),
            "helm upgrade --install r thing --repo https://charts.example.com --version 1.2.3 -n ns -f v.yaml --create-namespace"
        );
        let k = StageManifest::Kubernetes {
            values: Vec::new(),
            steps: Vec::new(),
            name: "inference".into(),
            artifacts: vec![Artifact::new(
                ArtifactFormat::Kubernetes,
                "s/05-inference.yaml",
            )],
        };
        assert_eq!(
            deploy_commands(&k, Path::new("dir with space"), Path::new("c"))[0].to_string(),
            "kubectl apply -f 'dir with space/s/05-inference.yaml'"
        );
        assert_eq!(
            destroy_commands(&k, Path::new("out"))[0].to_string(),
            "kubectl delete --ignore-not-found -f out/s/05-inference.yaml"
        );
        let filled = with_filled(
            vec![ExternalCommand::new(
                "kubectl",
                &["apply", "-f", "out/s/05-x.yaml"],
            )],
            "kind: X\n".to_owned(),
        );
        assert_eq!(filled[0].program, "kubectl");
        assert_eq!(filled[0].args, ["apply", "-f", "-"]);
        assert_eq!(filled[0].stdin.as_deref(), Some("kind: X\n"));
        assert_eq!(
            filled[0].to_string(),
            "kubectl apply -f - < out/s/05-x.yaml (with its values filled)"
        );
        let without_file = StageManifest::Kubernetes {
            values: Vec::new(),
            steps: Vec::new(),
            name: "inference".into(),
            artifacts: Vec::new(),
        };
        assert!(deploy_commands(&without_file, Path::new("out"), Path::new("c")).is_empty());
    }

    /// A step runs its own script through `sh`, after the values it reads are set (quoted:
    /// a value never becomes a command), and needs its tools on PATH.
    #[test]
    fn a_step_runs_its_script_with_its_values() {
        let step = Step::EmptyVersionedBucket {
            bucket: crate::assembly::manifest::StageOutput {
                stage: Some("foundation".into()),
                output: "WeightsBucketName".into(),
            },
            holds: "weights".into(),
        };
        let c = ExternalCommand::step(
            &step,
            "us-west-2",
            &[("WEIGHTS_BUCKET_NAME".into(), "b; rm -rf /".into())],
        );
        assert_eq!(c.program, "sh");
        assert_eq!(c.needs, ["aws"]);
        assert!(!c.kubernetes_api);
        assert!(
            c.args[1].starts_with("WEIGHTS_BUCKET_NAME='b; rm -rf /'\n# step: empty-versioned-bucket WeightsBucketName\n"),
            "{}",
            c.args[1]
        );
        assert!(c.args[1].ends_with(&step.script("us-west-2")));
    }

    #[test]
    fn a_waiting_release_with_values_from_outputs() {
        let mut stage = helm(
            "lbc",
            "kube-system",
            Chart::Repository {
                repository: "https://aws.github.io/eks-charts".into(),
                name: "aws-load-balancer-controller".into(),
                version: "1.13.2".into(),
            },
            "v.yaml",
        );
        if let StageManifest::Helm { wait, .. } = &mut stage {
            *wait = true;
        }
        let commands = with_sets(
            deploy_commands(&stage, Path::new(""), Path::new("c")),
            &[("vpcId".to_owned(), "vpc-0abc".to_owned())],
        );
        let line = commands[0].to_string();
        assert!(
            line.ends_with("-f v.yaml --wait --set vpcId=vpc-0abc"),
            "{line}"
        );
    }
}
