//! Generates the committed Rust sources of `hyperforge` from vendored schemas:
//! CloudFormation L1 types from the registry schemas in `codegen/schemas/cloudformation/` and the
//! custom resource types (HyperPod Inference Operator, Karpenter, KEDA) from the CRDs in
//! `codegen/schemas/crds/` listed in [`CRDS`].
//!
//! Generation is a pure function of the schema files: [`generate_all`] returns every output file
//! (path relative to the workspace root, formatted contents); [`stale_files`] compares them with
//! what is on disk; [`write_files`] writes them.

pub mod cfn;
pub mod crd;
pub mod engines;
mod model;
pub mod names;
pub mod shapes;

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A generation error; the message names the schema file and JSON pointer where possible.
#[derive(Debug)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// One output file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedFile {
    /// Path relative to the workspace root, with `/` separators.
    pub path: String,
    pub contents: String,
}

/// Where the CloudFormation schemas live, relative to the workspace root.
pub const CFN_SCHEMAS: &str = "codegen/schemas/cloudformation";
/// The HyperPod Inference Operator's `InferenceEndpointConfig` CRD, relative to the workspace root.
pub const INFERENCE_CRD: &str =
    "codegen/schemas/crds/inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml";
/// Karpenter's `NodePool` CRD, relative to the workspace root.
pub const KARPENTER_NODE_POOL_CRD: &str = "codegen/schemas/crds/karpenter.sh_nodepools.yaml";
/// Karpenter's AWS `EC2NodeClass` CRD, relative to the workspace root.
pub const KARPENTER_EC2_NODE_CLASS_CRD: &str =
    "codegen/schemas/crds/karpenter.k8s.aws_ec2nodeclasses.yaml";
/// KEDA's `ScaledObject` CRD, relative to the workspace root.
pub const KEDA_SCALED_OBJECT_CRD: &str = "codegen/schemas/crds/keda.sh_scaledobjects.yaml";
/// KEDA's `TriggerAuthentication` CRD, relative to the workspace root.
pub const KEDA_TRIGGER_AUTHENTICATION_CRD: &str =
    "codegen/schemas/crds/keda.sh_triggerauthentications.yaml";
/// The CRDs the Kubernetes types are generated from, each with the version generated.
pub const CRDS: &[(&str, &str)] = &[
    (INFERENCE_CRD, "v1"),
    (KARPENTER_NODE_POOL_CRD, "v1"),
    (KARPENTER_EC2_NODE_CLASS_CRD, "v1"),
    (KEDA_SCALED_OBJECT_CRD, "v1alpha1"),
    (KEDA_TRIGGER_AUTHENTICATION_CRD, "v1alpha1"),
    (LEADER_WORKER_SET_CRD, "v1"),
    (KUEUE_RESOURCE_FLAVOR_CRD, "v1beta2"),
    (KUEUE_CLUSTER_QUEUE_CRD, "v1beta2"),
    (KUEUE_LOCAL_QUEUE_CRD, "v1beta2"),
];
/// Kueue's `ResourceFlavor` CRD (kubernetes-sigs/kueue), relative to the workspace root.
pub const KUEUE_RESOURCE_FLAVOR_CRD: &str =
    "codegen/schemas/crds/kueue.x-k8s.io_resourceflavors.yaml";
/// Kueue's `ClusterQueue` CRD, relative to the workspace root.
pub const KUEUE_CLUSTER_QUEUE_CRD: &str = "codegen/schemas/crds/kueue.x-k8s.io_clusterqueues.yaml";
/// Kueue's `LocalQueue` CRD, relative to the workspace root.
pub const KUEUE_LOCAL_QUEUE_CRD: &str = "codegen/schemas/crds/kueue.x-k8s.io_localqueues.yaml";
/// LeaderWorkerSet's CRD (kubernetes-sigs/lws), relative to the workspace root.
pub const LEADER_WORKER_SET_CRD: &str =
    "codegen/schemas/crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml";
/// Fields of a CRD's spec that embed a core Kubernetes type, generated as that k8s-openapi type
/// rather than as structs of their own: (CRD, JSON pointer below `spec`, Rust type). A pod
/// template embedded in a CRD is the core `PodTemplateSpec`, validated by the API server as
/// one, so the generated code reuses it (and its thousands of fields are not generated twice).
pub const CRD_EMBEDDED_CORE_TYPES: &[(&str, &str, &str)] = &[
    (
        LEADER_WORKER_SET_CRD,
        "/properties/leaderWorkerTemplate/properties/leaderTemplate",
        "k8s_openapi::api::core::v1::PodTemplateSpec",
    ),
    (
        LEADER_WORKER_SET_CRD,
        "/properties/leaderWorkerTemplate/properties/workerTemplate",
        "k8s_openapi::api::core::v1::PodTemplateSpec",
    ),
    (
        LEADER_WORKER_SET_CRD,
        "/properties/leaderWorkerTemplate/properties/volumeClaimTemplates/items",
        "k8s_openapi::api::core::v1::PersistentVolumeClaim",
    ),
];
/// Output directory of the L1 modules.
pub const L1_DIR: &str = "src/synth/cloudformation/l1";
/// The property shape table of the CloudFormation resource types (read by `hyperforge` to check
/// property overrides).
pub const CFN_SHAPES: &str = "src/synth/cloudformation/shapes.txt";
/// Output directory of the CRD modules.
pub const CRD_DIR: &str = "src/resources/kubernetes/crd";
/// The vendored CRDs, relative to the workspace root.
pub const CRD_SCHEMAS: &str = "codegen/schemas/crds";
/// The vendored vLLM release contracts (`codegen/tools/vllm_contract.py` writes them).
pub const VLLM_RELEASES: &str = "codegen/schemas/engines/vllm";
/// The engine table generated from them.
pub const ENGINE_TABLE: &str = "src/catalog/engine_releases.rs";

const REGENERATE: &str = "Do not edit; regenerate with `cargo run -p hyperforge-codegen`.";

/// The workspace root (the parent of this crate's manifest directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(root: &Path, rel: &str) -> Result<String, Error> {
    std::fs::read_to_string(root.join(rel)).map_err(|e| Error(format!("{rel}: cannot read: {e}")))
}

/// Formats Rust source with `rustfmt --edition 2021` (run from `root`, like `cargo fmt`).
pub fn rustfmt(root: &Path, source: &str, what: &str) -> Result<String, Error> {
    let rustfmt = std::env::var("RUSTFMT").unwrap_or_else(|_| "rustfmt".to_string());
    let mut child = Command::new(&rustfmt)
        .args(["--edition", "2021"])
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error(format!("{what}: cannot run `{rustfmt}`: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(source.as_bytes())
            .map_err(|e| Error(format!("{what}: writing to rustfmt: {e}")))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| Error(format!("{what}: waiting for rustfmt: {e}")))?;
    if !output.status.success() {
        return Err(Error(format!(
            "{what}: rustfmt failed on the generated code: {}",
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    String::from_utf8(output.stdout).map_err(|e| Error(format!("{what}: rustfmt output: {e}")))
}

/// Generates every output file from the schemas under `root`, sorted by path.
pub fn generate_all(root: &Path) -> Result<Vec<GeneratedFile>, Error> {
    let mut files = Vec::new();

    // CloudFormation L1 modules.
    let dir = root.join(CFN_SCHEMAS);
    let entries =
        std::fs::read_dir(&dir).map_err(|e| Error(format!("{CFN_SCHEMAS}: cannot list: {e}")))?;
    let mut schemas = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error(format!("{CFN_SCHEMAS}: cannot list: {e}")))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".json") {
            schemas.push(name);
        }
    }
    schemas.sort();
    let mut modules = Vec::new();
    let mut shapes = Vec::new();
    for name in &schemas {
        let rel = format!("{CFN_SCHEMAS}/{name}");
        let text = read(root, &rel)?;
        shapes.push(shapes::type_table(&rel, &text)?);
        let module = cfn::generate(&rel, &text)?;
        if modules.iter().any(|(m, _)| *m == module.module) {
            return Err(Error(format!(
                "{rel}: module `{}` generated twice",
                module.module
            )));
        }
        let path = format!("{L1_DIR}/{}.rs", module.module);
        files.push(GeneratedFile {
            contents: rustfmt(root, &module.source, &rel)?,
            path,
        });
        modules.push((module.module, module.struct_name));
    }
    modules.sort();
    let mut mod_rs = format!(
        "// @generated by hyperforge-codegen from {CFN_SCHEMAS}/. {REGENERATE}\n\n\
         //! CloudFormation L1 resource types (generated), one module per resource type.\n\n"
    );
    for (module, _) in &modules {
        mod_rs.push_str(&format!("pub mod {module};\n"));
    }
    files.push(GeneratedFile {
        path: format!("{L1_DIR}/mod.rs"),
        contents: rustfmt(root, &mod_rs, L1_DIR)?,
    });
    // The shape table, types sorted by name (the runtime looks them up by binary search).
    shapes.sort();
    let mut table = shapes::header(CFN_SCHEMAS, REGENERATE);
    for t in &shapes {
        table.push_str(t);
    }
    files.push(GeneratedFile {
        path: CFN_SHAPES.to_owned(),
        contents: table,
    });

    // Kubernetes custom resources.
    let mut crd_modules = Vec::new();
    for &(rel, version) in CRDS {
        let module = crd::generate(rel, &read(root, rel)?, version)?;
        if crd_modules.contains(&module.module) {
            return Err(Error(format!(
                "{rel}: module `{}` generated twice",
                module.module
            )));
        }
        files.push(GeneratedFile {
            path: format!("{CRD_DIR}/{}.rs", module.module),
            contents: rustfmt(root, &module.source, rel)?,
        });
        crd_modules.push(module.module);
    }
    crd_modules.sort();
    let mut mod_rs = format!(
        "// @generated by hyperforge-codegen from codegen/schemas/crds/. {REGENERATE}\n\n\
         //! Custom resource types generated from vendored CRDs.\n\n"
    );
    for module in &crd_modules {
        mod_rs.push_str(&format!("pub mod {module};\n"));
    }
    // Every vendored CRD, typed or not: the versions its pinned controller serves.
    let crd_files = file_names(root, CRD_SCHEMAS, ".yaml")?;
    mod_rs.push_str(
        "\n/// A vendored CustomResourceDefinition: the kind its pinned controller defines and the \
         versions it serves.\n\
         #[derive(Clone, Copy, Debug, PartialEq, Eq)]\n\
         pub struct ServedCrd {\n\
         /// The API group.\npub group: &'static str,\n\
         /// The kind.\npub kind: &'static str,\n\
         /// The versions served (`served: true`).\npub versions: &'static [&'static str],\n\
         /// Where the CRD was vendored from.\npub source: &'static str,\n}\n\n\
         /// Every vendored CRD (`codegen/schemas/crds/`), by file name.\n\
         pub const SERVED: &[ServedCrd] = &[\n",
    );
    for name in &crd_files {
        let rel = format!("{CRD_SCHEMAS}/{name}");
        let s = crd::served(&rel, &read(root, &rel)?)?;
        let versions: Vec<String> = s.versions.iter().map(|v| format!("{v:?}")).collect();
        mod_rs.push_str(&format!(
            "ServedCrd {{ group: {:?}, kind: {:?}, versions: &[{}], source: {:?} }},\n",
            s.group,
            s.kind,
            versions.join(", "),
            s.source
        ));
    }
    mod_rs.push_str("];\n");
    files.push(GeneratedFile {
        path: format!("{CRD_DIR}/mod.rs"),
        contents: rustfmt(root, &mod_rs, CRD_DIR)?,
    });

    // The engine table.
    let names = file_names(root, VLLM_RELEASES, ".txt")?;
    let mut releases = Vec::new();
    for name in &names {
        let rel = format!("{VLLM_RELEASES}/{name}");
        releases.push(engines::parse(&rel, name, &read(root, &rel)?)?);
    }
    let table = format!(
        "// @generated by hyperforge-codegen from {VLLM_RELEASES}/. {REGENERATE}\n\n\
         //! The serving engines' release contracts: the options each release's server accepts and \
         the environment variables it reads, read from the release's own source \
         (`codegen/tools/vllm_contract.py`).\n\n\
         use super::engines::EngineRelease;\n\n{}",
        engines::table("vLLM", "VLLM", &mut releases)
    );
    files.push(GeneratedFile {
        path: ENGINE_TABLE.to_owned(),
        contents: rustfmt(root, &table, VLLM_RELEASES)?,
    });

    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// The names of the files in `dir` (relative to `root`) ending in `suffix`, sorted.
fn file_names(root: &Path, dir: &str, suffix: &str) -> Result<Vec<String>, Error> {
    let mut names: Vec<String> = std::fs::read_dir(root.join(dir))
        .map_err(|e| Error(format!("{dir}: cannot read: {e}")))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(suffix))
        .collect();
    names.sort();
    Ok(names)
}

/// `.rs` files in the generated directories that the generator does not produce.
fn extra_files(root: &Path, files: &[GeneratedFile]) -> Vec<String> {
    let mut extra = Vec::new();
    for dir in [L1_DIR, CRD_DIR] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = format!("{dir}/{name}");
            if name.ends_with(".rs") && !files.iter().any(|f| f.path == rel) {
                extra.push(rel);
            }
        }
    }
    extra.sort();
    extra
}

/// Paths (relative to `root`) whose contents on disk differ from `files`, plus stray `.rs` files
/// in the generated directories. Empty when everything is up to date.
pub fn stale_files(root: &Path, files: &[GeneratedFile]) -> Vec<String> {
    let mut stale: Vec<String> = files
        .iter()
        .filter(|f| {
            std::fs::read_to_string(root.join(&f.path)).ok().as_deref() != Some(&f.contents)
        })
        .map(|f| f.path.clone())
        .collect();
    stale.extend(extra_files(root, files));
    stale.sort();
    stale
}

/// Writes `files` under `root` (only those that changed) and removes stray `.rs` files from the
/// generated directories. Returns the paths written or removed.
pub fn write_files(root: &Path, files: &[GeneratedFile]) -> Result<Vec<String>, Error> {
    let mut changed = Vec::new();
    for path in extra_files(root, files) {
        std::fs::remove_file(root.join(&path))
            .map_err(|e| Error(format!("{path}: cannot remove: {e}")))?;
        changed.push(path);
    }
    for file in files {
        let path = root.join(&file.path);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(&file.contents) {
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error(format!("{}: cannot create directory: {e}", file.path)))?;
        }
        std::fs::write(&path, &file.contents)
            .map_err(|e| Error(format!("{}: cannot write: {e}", file.path)))?;
        changed.push(file.path.clone());
    }
    changed.sort();
    Ok(changed)
}
