//! Plumbing shared by the integration tests that run external tools (validators,
//! emulators) from the Python virtualenv made by `tests/tools/install-validators.sh`, and
//! that read synthesized assemblies back from disk.

pub mod tf_schema;

use std::ffi::OsStr;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

/// Longest line kept when a tool's output is quoted in a failure message. cfn-lint's
/// instance-type findings list every instance type of a region, tens of KB per line.
pub const MAX_LINE: usize = 300;

/// The repository root (where Cargo.toml is).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The validators' virtualenv: `$HYPERFORGE_VENV`, or `<repo>/.venv-validators`.
pub fn venv() -> PathBuf {
    match std::env::var_os("HYPERFORGE_VENV") {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => repo_root().join(".venv-validators"),
    }
}

/// Path of an executable in the venv's `bin/`. Panics (the test fails, it is never
/// skipped) when it is missing.
pub fn tool(name: &str) -> PathBuf {
    let path = venv().join("bin").join(name);
    if !path.is_file() {
        panic!(
            "{name} not found at {}: run tests/tools/install-validators.sh (the README's test command does)",
            path.display()
        );
    }
    path
}

/// A script in `tests/tools/`.
pub fn script(name: &str) -> PathBuf {
    let path = repo_root().join("tests/tools").join(name);
    assert!(path.is_file(), "missing {}", path.display());
    path
}

/// The vendored HyperPod InferenceEndpointConfig CRD.
pub fn inference_endpoint_config_crd() -> PathBuf {
    repo_root().join(
        "codegen/schemas/crds/inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml",
    )
}

/// The vendored Karpenter NodePool CRD.
pub fn karpenter_node_pool_crd() -> PathBuf {
    repo_root().join("codegen/schemas/crds/karpenter.sh_nodepools.yaml")
}

/// The vendored Karpenter EC2NodeClass CRD.
pub fn karpenter_ec2_node_class_crd() -> PathBuf {
    repo_root().join("codegen/schemas/crds/karpenter.k8s.aws_ec2nodeclasses.yaml")
}

/// The vendored KEDA ScaledObject CRD (its version `v1alpha1`).
pub fn keda_scaled_object_crd() -> PathBuf {
    repo_root().join("codegen/schemas/crds/keda.sh_scaledobjects.yaml")
}

/// KEDA's `TriggerAuthentication` CRD (`v1alpha1`).
pub fn keda_trigger_authentication_crd() -> PathBuf {
    repo_root().join("codegen/schemas/crds/keda.sh_triggerauthentications.yaml")
}

/// What a finished tool run printed.
pub struct ToolOutput {
    pub command: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl ToolOutput {
    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// Non-empty lines of stdout then stderr.
    pub fn lines(&self) -> impl Iterator<Item = &str> {
        self.stdout
            .lines()
            .chain(self.stderr.lines())
            .filter(|l| !l.trim().is_empty())
    }
}

impl fmt::Display for ToolOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "$ {}", self.command)?;
        writeln!(f, "{}", self.status)?;
        for (name, text) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            if !text.trim().is_empty() {
                writeln!(f, "--- {name}")?;
                for line in text.lines() {
                    writeln!(f, "{}", truncate(line, MAX_LINE))?;
                }
            }
        }
        Ok(())
    }
}

/// Cut a line to at most `max` bytes (on a char boundary), marking the cut.
pub fn truncate(line: &str, max: usize) -> String {
    if line.len() <= max {
        return line.to_string();
    }
    let mut end = max;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{} [... {} more bytes]", &line[..end], line.len() - end)
}

/// Run `program args...` to completion, optionally feeding `stdin`, and capture its
/// output. Panics only if the program cannot be started at all.
pub fn run<I, S>(program: &Path, args: I, stdin: Option<&[u8]>) -> ToolOutput
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<_> = args
        .into_iter()
        .map(|a| a.as_ref().to_os_string())
        .collect();
    let command = std::iter::once(program.as_os_str())
        .chain(args.iter().map(|a| a.as_os_str()))
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let mut child = Command::new(program)
        .args(&args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{command}`: {e}"));
    let output = std::thread::scope(|s| {
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            // Write from another thread so a tool that prints before reading all of
            // its input cannot deadlock against us.
            s.spawn(move || {
                let _ = pipe.write_all(input);
            });
        }
        child.wait_with_output()
    })
    .unwrap_or_else(|e| panic!("waiting for `{command}`: {e}"));
    ToolOutput {
        command,
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Run a script from `tests/tools/` with the venv's Python.
pub fn run_script<I, S>(name: &str, args: I, stdin: Option<&[u8]>) -> ToolOutput
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let script = script(name);
    let mut all = vec![script.into_os_string()];
    all.extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
    run(&tool("python"), all, stdin)
}

/// One artifact listed in an assembly's manifest.json.
#[derive(Debug, Clone)]
pub struct Artifact {
    pub stack: String,
    pub format: String,
    /// Absolute path (the manifest's path joined to the assembly root).
    pub path: PathBuf,
}

/// All artifacts of the assembly written to `root`, read from `<root>/manifest.json`.
/// Panics with a clear message if the manifest is missing or malformed, or if a listed
/// artifact does not exist.
pub fn artifacts(root: &Path) -> Vec<Artifact> {
    let manifest_path = root.join("manifest.json");
    let text = std::fs::read_to_string(&manifest_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", manifest_path.display()));
    let manifest: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", manifest_path.display()));
    let field = |v: &serde_json::Value, key: &str, what: &str| -> String {
        v.get(key)
            .and_then(|s| s.as_str())
            .unwrap_or_else(|| {
                panic!(
                    "{}: {what} without a string `{key}`: {v}",
                    manifest_path.display()
                )
            })
            .to_string()
    };
    assert_eq!(
        manifest.get("version").and_then(|v| v.as_u64()),
        Some(4),
        "{}: unsupported manifest version",
        manifest_path.display()
    );
    let mut out = Vec::new();
    let stacks = manifest["stacks"]
        .as_array()
        .unwrap_or_else(|| panic!("{}: no `stacks` array", manifest_path.display()));
    for stack in stacks {
        let stack_name = field(stack, "name", "stack");
        // The stages, then the stack's Terraform root module (listed as stage `terraform`).
        let stages = stack["stages"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|stage| (field(stage, "name", "stage"), stage));
        let terraform = stack.get("terraform").map(|t| ("terraform".to_string(), t));
        for (stage_name, stage) in stages.chain(terraform) {
            for artifact in stage["artifacts"].as_array().into_iter().flatten() {
                let rel = field(artifact, "path", "artifact");
                let path = root.join(&rel);
                assert!(
                    path.is_file(),
                    "{}: artifact {rel} of stage {stage_name} of stack {stack_name} does not exist",
                    manifest_path.display()
                );
                out.push(Artifact {
                    stack: stack_name.clone(),
                    format: field(artifact, "format", "artifact"),
                    path,
                });
            }
        }
    }
    out
}

/// Paths of the artifacts of one `format` ("cloudformation", "kubernetes", ...).
pub fn artifacts_with_format(root: &Path, format: &str) -> Vec<PathBuf> {
    artifacts(root)
        .into_iter()
        .filter(|a| a.format == format)
        .map(|a| a.path)
        .collect()
}

/// A reference app synthesized into its own temporary directory.
pub struct Synthesized {
    /// Stack names from the manifest, for messages.
    pub label: String,
    pub dir: tempfile::TempDir,
}

impl Synthesized {
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn artifacts_with_format(&self, format: &str) -> Vec<PathBuf> {
        artifacts_with_format(self.root(), format)
    }
}

/// Synthesize every reference app into a fresh temporary directory.
pub fn synth_reference_apps() -> Vec<Synthesized> {
    let apps: Vec<hyperforge::App> = hyperforge::reference::all()
        .into_iter()
        .chain(hyperforge::reference::variants())
        .collect();
    assert!(
        !apps.is_empty(),
        "hyperforge::reference::all() returned no app"
    );
    apps.into_iter()
        .map(|app| {
            let dir = tempfile::tempdir().expect("create temporary directory");
            let assembly: hyperforge::Assembly = app.synth().expect("reference app synthesizes");
            assembly.write_to(dir.path()).expect("write assembly");
            let label = artifacts(dir.path())
                .iter()
                .map(|a| a.stack.clone())
                .fold(Vec::<String>::new(), |mut names, n| {
                    if !names.contains(&n) {
                        names.push(n);
                    }
                    names
                })
                .join(", ");
            Synthesized { label, dir }
        })
        .collect()
}

/// The artifact of stage `stage` of stack `stack` (`<stack>/<NN>-<stage>.<ext>`), whatever
/// its position.
pub fn stage_file(assembly: &hyperforge::Assembly, stack: &str, stage: &str, ext: &str) -> String {
    assembly
        .files()
        .keys()
        .find(|p| {
            p.strip_prefix(&format!("{stack}/"))
                .and_then(|f| f.split_once('-'))
                .is_some_and(|(n, rest)| {
                    n.len() == 2
                        && n.bytes().all(|b| b.is_ascii_digit())
                        && rest == format!("{stage}.{ext}")
                })
        })
        .cloned()
        .unwrap_or_else(|| panic!("no stage {stage} in {stack}"))
}

/// `app` synthesized (errors fail the test) and written to a new temporary directory, for the
/// external validators.
pub fn written(app: &hyperforge::App) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temporary directory");
    app.synth()
        .unwrap_or_else(|d| panic!("{d}"))
        .write_to(dir.path())
        .expect("write");
    dir
}
