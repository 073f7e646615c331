//! The synthesized reference apps checked by real external tools: cfn-lint, checkov and
//! cdk-nag's AwsSolutions pack (releases 2.x and 3.x) for CloudFormation, checkov for Terraform JSON, kubernetes-validate (strict) for built-in Kubernetes kinds, and
//! the vendored CRD schemas for the custom resources (HyperPod's InferenceEndpointConfig,
//! Karpenter's NodePool and EC2NodeClass).
//!
//! The tools come from the virtualenv made by `tests/tools/install-validators.sh`
//! (`$HYPERFORGE_VENV`, default `<repo>/.venv-validators`). A missing tool fails the
//! test; nothing here is skipped. The negative controls at the end run the same helpers
//! on deliberately broken inputs, so a check that can no longer fail is noticed.

use std::path::{Path, PathBuf};

use crate::common::{
    self, artifacts_with_format, run, run_script, synth_reference_apps, tool, truncate,
    Synthesized, MAX_LINE,
};
use serde::Deserialize;

/// Regions the reference apps target; cfn-lint checks instance types per region.
const LINT_REGIONS: [&str; 2] = ["us-east-1", "us-west-2"];
/// Kubernetes version the emitted objects are validated against (see .cargo/config.toml).
const KUBERNETES_VERSION: &str = "1.33";
const IEC_KIND: &str = "InferenceEndpointConfig";
const NODE_POOL_KIND: &str = "NodePool";
const EC2_NODE_CLASS_KIND: &str = "EC2NodeClass";

// ---------------------------------------------------------------------------------
// Helpers: each returns Ok(report) when the tool accepts the input, Err(findings) when
// it does not. They panic only when a tool is missing or cannot be started.
// ---------------------------------------------------------------------------------

/// cfn-lint with every rule on: errors, warnings and informational findings all fail.
pub(crate) fn cfn_lint(templates: &[PathBuf]) -> Result<(), String> {
    assert!(!templates.is_empty(), "cfn_lint called without templates");
    let mut args: Vec<String> = vec!["--format".into(), "parseable".into(), "--regions".into()];
    args.extend(LINT_REGIONS.iter().map(|r| r.to_string()));
    args.push("--".into());
    args.extend(templates.iter().map(|p| p.display().to_string()));
    let out = run(&tool("cfn-lint"), &args, None);
    // Exit status is a bitmask (2 errors, 4 warnings, 8 informational); any finding
    // prints a line, so an output line is a failure even when the status is 0.
    if out.success() && out.lines().next().is_none() {
        Ok(())
    } else {
        Err(out.to_string())
    }
}

/// checkov's CloudFormation checks on the given templates, judged by checkov_gate.py
/// (the same gate CI uses). Returns the gate's report.
pub(crate) fn checkov_cloudformation(templates: &[PathBuf]) -> Result<String, String> {
    assert!(
        !templates.is_empty(),
        "checkov_cloudformation called without templates"
    );
    // checkov scans directories; give it one holding only these templates.
    let scan = tempfile::tempdir().expect("create temporary directory");
    for (i, template) in templates.iter().enumerate() {
        let name = template
            .file_name()
            .expect("template file name")
            .to_string_lossy();
        std::fs::copy(template, scan.path().join(format!("{i:02}-{name}")))
            .unwrap_or_else(|e| panic!("copy {}: {e}", template.display()));
    }
    let dir = scan.path().display().to_string();
    let out = run(
        &tool("checkov"),
        [
            "-d",
            dir.as_str(),
            "--framework",
            "cloudformation",
            "--skip-download",
            "-o",
            "json",
        ],
        None,
    );
    // checkov exits 1 when a check fails; the gate decides, from the JSON.
    checkov_gate(out.stdout.as_bytes()).map_err(|gate| {
        format!(
            "{gate}\n(checkov {}; stderr follows)\n{}",
            out.status,
            tail(&out.stderr, 20)
        )
    })
}

/// cdk-nag's AwsSolutions pack, releases 2.x and 3.x, over the given templates included
/// into a CDK app (tests/tools/cdk-nag/check.js): every unacknowledged error or warning
/// fails. The packages come from `$HYPERFORGE_VENV/cdk-nag` (install-validators.sh).
pub(crate) fn cdk_nag(templates: &[PathBuf]) -> Result<String, String> {
    assert!(!templates.is_empty(), "cdk_nag called without templates");
    let modules = common::venv().join("cdk-nag/node_modules");
    assert!(
        modules.join("cdk-nag").is_dir() && modules.join("cdk-nag-v2").is_dir(),
        "cdk-nag not found in {}: run tests/tools/install-validators.sh (the README's test command does)",
        modules.display()
    );
    let out = std::process::Command::new("node")
        .arg(common::script("cdk-nag/check.js"))
        .args(templates)
        .env("NODE_PATH", &modules)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot start node (cdk-nag runs on Node.js 18+): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => Ok(stderr.lines().last().unwrap_or_default().to_owned()),
        Some(1) => Err(format!("{stdout}{}", tail(&stderr, 1))),
        _ => panic!(
            "cdk-nag could not run ({}):\n{stdout}\n{}",
            out.status,
            tail(&stderr, 30)
        ),
    }
}

/// One accepted checkov finding on the generated Terraform: `check` on any of `resources`.
pub(crate) struct TerraformSkip {
    pub(crate) check: String,
    pub(crate) resources: Vec<String>,
    pub(crate) reason: String,
}

/// Every Terraform file of the assembly in `dir` matches the committed provider schemas and
/// passes checkov with the committed suppressions (for the tests of one stack's own
/// artifacts).
pub(crate) fn assert_terraform_passes(dir: &Path) {
    let schema = crate::common::tf_schema::Schema::committed();
    let files = artifacts_with_format(dir, "terraform");
    assert!(!files.is_empty(), "no Terraform file in {}", dir.display());
    for path in &files {
        let findings = schema.check(&crate::common::tf_schema::read_json(path));
        assert!(
            findings.is_empty(),
            "{}:\n{}",
            path.display(),
            findings.join("\n")
        );
    }
    let skips = terraform_skips();
    let used = std::cell::RefCell::new(vec![false; skips.len()]);
    match checkov_terraform(&files, &skips, &used) {
        Ok(report) => eprintln!("{report}"),
        Err(findings) => panic!("{findings}"),
    }
}

/// Every CloudFormation template of the assembly in `dir` passes cfn-lint, checkov and
/// cdk-nag (for the tests of one stack's own artifacts).
pub(crate) fn assert_cloudformation_passes(dir: &Path) {
    let templates = artifacts_with_format(dir, "cloudformation");
    assert!(!templates.is_empty(), "no template in {}", dir.display());
    if let Err(findings) = cfn_lint(&templates) {
        panic!("{findings}");
    }
    match checkov_cloudformation(&templates) {
        Ok(report) => eprintln!("{report}"),
        Err(findings) => panic!("{findings}"),
    }
    match cdk_nag(&templates) {
        Ok(report) => eprintln!("{report}"),
        Err(findings) => panic!("{findings}"),
    }
}

/// tests/tools/checkov-terraform-skips.txt: `CHECK_ID  RESOURCES  reason` per line.
pub(crate) fn terraform_skips() -> Vec<TerraformSkip> {
    let path = common::script("checkov-terraform-skips.txt");
    let text = std::fs::read_to_string(&path).expect("read the skip file");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|line| {
            let mut words = line.split_whitespace();
            let check = words.next().unwrap_or_default().to_string();
            let resources = words
                .next()
                .unwrap_or_default()
                .split(',')
                .map(str::to_string)
                .collect();
            let reason = words.collect::<Vec<_>>().join(" ");
            assert!(
                check.starts_with("CKV") && reason.len() > 20,
                "{}: `{line}` needs a check id, resources and a reason",
                path.display()
            );
            TerraformSkip {
                check,
                resources,
                reason,
            }
        })
        .collect()
}

/// The acknowledgements the Terraform backend writes beside each resource, as Terraform JSON's
/// comment property (`"//": "checkov:skip=ID: reason"`, which checkov's tf.json runner does not
/// read itself): (check, `type.name`) to reason.
fn acknowledged_in(files: &[PathBuf]) -> std::collections::BTreeMap<(String, String), String> {
    let mut out = std::collections::BTreeMap::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        let Ok(module) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        for (ty, blocks) in module["resource"].as_object().into_iter().flatten() {
            for (name, body) in blocks.as_object().into_iter().flatten() {
                for line in body["//"].as_str().unwrap_or_default().lines() {
                    if let Some((id, reason)) = line
                        .strip_prefix("checkov:skip=")
                        .and_then(|rest| rest.split_once(": "))
                    {
                        assert!(reason.len() > 20, "{ty}.{name}: {id} without a reason");
                        out.insert((id.to_owned(), format!("{ty}.{name}")), reason.to_owned());
                        // Some checks (CKV_AWS_338 on log groups, for one) report the
                        // resource as `resource.<name>`, without its type.
                        out.insert(
                            (id.to_owned(), format!("resource.{name}")),
                            reason.to_owned(),
                        );
                    }
                }
            }
        }
    }
    out
}

/// checkov's Terraform JSON checks on the given root-module files, judged by checkov_gate.py
/// after moving the failed checks that `skips` accepts (check and resource both listed) to
/// the skipped checks with their reasons. Marks in `used` the skips that matched.
pub(crate) fn checkov_terraform(
    files: &[PathBuf],
    skips: &[TerraformSkip],
    used: &std::cell::RefCell<Vec<bool>>,
) -> Result<String, String> {
    assert!(!files.is_empty(), "checkov_terraform called without files");
    let scan = tempfile::tempdir().expect("create temporary directory");
    let mut copied = 0;
    for (i, file) in files.iter().enumerate() {
        let name = file.file_name().expect("file name").to_string_lossy();
        // versions.tf.json holds only the `terraform` block, which checkov 3.3.30's tf.json
        // parser cannot read (see src/synth/terraform/module.rs); it has nothing to check.
        if name == "versions.tf.json" {
            continue;
        }
        std::fs::copy(file, scan.path().join(format!("{i:02}-{name}")))
            .unwrap_or_else(|e| panic!("copy {}: {e}", file.display()));
        copied += 1;
    }
    assert!(copied > 0, "no Terraform file left to scan in {files:?}");
    let dir = scan.path().display().to_string();
    let out = run(
        &tool("checkov"),
        [
            "-d",
            dir.as_str(),
            "--framework",
            "terraform_json",
            "--skip-download",
            "-o",
            "json",
        ],
        None,
    );
    let mut report: serde_json::Value = serde_json::from_str(&out.stdout).map_err(|e| {
        format!(
            "checkov printed no JSON ({e}); status {}\n{}",
            out.status,
            tail(&out.stderr, 20)
        )
    })?;
    if let Some(results) = report.get_mut("results") {
        let failed = results
            .get_mut("failed_checks")
            .and_then(|f| f.as_array_mut())
            .map(std::mem::take)
            .unwrap_or_default();
        let mut still_failed = Vec::new();
        let mut accepted = Vec::new();
        let acknowledged = acknowledged_in(files);
        for mut check in failed {
            let id = check["check_id"].as_str().unwrap_or_default().to_string();
            let resource = check["resource"].as_str().unwrap_or_default().to_string();
            if let Some(reason) = acknowledged.get(&(id.clone(), resource.clone())) {
                check["check_result"] = serde_json::json!({
                    "result": "SKIPPED",
                    "suppress_comment": reason,
                });
                accepted.push(check);
                continue;
            }
            match skips
                .iter()
                .position(|s| s.check == id && s.resources.contains(&resource))
            {
                Some(i) => {
                    if let Some(u) = used.borrow_mut().get_mut(i) {
                        *u = true;
                    }
                    check["check_result"] = serde_json::json!({
                        "result": "SKIPPED",
                        "suppress_comment": skips[i].reason,
                    });
                    accepted.push(check);
                }
                None => still_failed.push(check),
            }
        }
        let (n_failed, n_accepted) = (still_failed.len(), accepted.len());
        results["failed_checks"] = serde_json::Value::Array(still_failed);
        let skipped = results
            .get_mut("skipped_checks")
            .and_then(|s| s.as_array_mut());
        match skipped {
            Some(list) => list.extend(accepted),
            None => results["skipped_checks"] = serde_json::Value::Array(accepted),
        }
        if let Some(summary) = report.get_mut("summary") {
            let skipped = summary["skipped"].as_u64().unwrap_or(0);
            summary["failed"] = serde_json::json!(n_failed);
            summary["skipped"] = serde_json::json!(skipped + n_accepted as u64);
        }
    }
    let rendered = serde_json::to_vec(&report).expect("serialize report");
    checkov_gate(&rendered).map_err(|findings| {
        format!(
            "{findings}\n(checkov {}; stderr follows)\n{}",
            out.status,
            tail(&out.stderr, 20)
        )
    })
}

/// Pipe a checkov JSON report through tests/tools/checkov_gate.py.
fn checkov_gate(report: &[u8]) -> Result<String, String> {
    let out = run_script("checkov_gate.py", ["-"], Some(report));
    if out.success() {
        Ok(out.stdout)
    } else {
        Err(out.to_string())
    }
}

/// kubernetes-validate --strict on every built-in kind. Custom resources get only a
/// "Couldn't find schema" warning from it (they are checked against their CRD by
/// `validate_crd`); a built-in kind must be reported as passed, one line per document.
pub(crate) fn kubernetes_validate(files: &[PathBuf]) -> Result<String, String> {
    assert!(
        !files.is_empty(),
        "kubernetes_validate called without files"
    );
    let expected_passes: usize = files
        .iter()
        .flat_map(|f| documents(f))
        .filter(|d| is_builtin_api_version(d.api_version.as_deref().unwrap_or("")))
        .count();
    let mut args: Vec<String> = vec!["--strict".into(), "-k".into(), KUBERNETES_VERSION.into()];
    args.extend(files.iter().map(|p| p.display().to_string()));
    let out = run(&tool("kubernetes-validate"), &args, None);

    let mut problems = Vec::new();
    let mut passes = 0;
    for line in out.lines() {
        if line.starts_with("INFO ") && line.contains(" passed for resource ") {
            passes += 1;
        } else if line.starts_with("WARN ") && line.contains("Couldn't find schema for kind") {
            let api_version = line
                .split(" with api version ")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .unwrap_or("");
            if is_builtin_api_version(api_version) {
                problems.push(format!(
                    "no schema for a built-in kind: {}",
                    truncate(line, MAX_LINE)
                ));
            }
        } else {
            // ERROR lines, tracebacks, anything unexpected.
            problems.push(truncate(line, MAX_LINE));
        }
    }
    if !out.success() {
        problems.push(out.status.to_string());
    }
    if passes != expected_passes {
        problems.push(format!(
            "expected {expected_passes} built-in document(s) to pass, kubernetes-validate reported {passes}"
        ));
    }
    if problems.is_empty() {
        Ok(out.stdout)
    } else {
        Err(format!("{}\n{out}", problems.join("\n")))
    }
}

/// The Kubernetes artifacts of `app` that hold an object of kind `kind`.
fn kubernetes_files_with(app: &common::Synthesized, kind: &str) -> Vec<PathBuf> {
    app.artifacts_with_format("kubernetes")
        .into_iter()
        .filter(|f| documents(f).iter().any(|d| d.kind.as_deref() == Some(kind)))
        .collect()
}

/// tests/tools/validate_crd.py against the vendored InferenceEndpointConfig CRD.
fn validate_crd(files: &[PathBuf]) -> Result<String, String> {
    validate_against_crd(&common::inference_endpoint_config_crd(), files)
}

/// tests/tools/validate_crd.py: every document of the kind `crd` defines, in `files`, against
/// the CRD's `v1` schema (each file must hold at least one).
fn validate_against_crd(crd: &Path, files: &[PathBuf]) -> Result<String, String> {
    validate_against_crd_version(crd, "v1", files)
}

/// [`validate_against_crd`] against the CRD's version `version` (KEDA's `v1alpha1`).
pub(crate) fn validate_against_crd_version(
    crd: &Path,
    version: &str,
    files: &[PathBuf],
) -> Result<String, String> {
    assert!(!files.is_empty(), "validate_crd called without files");
    let mut args = vec![
        "--crd".to_string(),
        crd.display().to_string(),
        "--version".to_string(),
        version.to_string(),
    ];
    args.extend(files.iter().map(|p| p.display().to_string()));
    let out = run_script("validate_crd.py", &args, None);
    if out.success() {
        Ok(out.stdout)
    } else {
        Err(out.to_string())
    }
}

// ---------------------------------------------------------------------------------
// Small utilities
// ---------------------------------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
struct TypeMeta {
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    kind: Option<String>,
}

/// apiVersion/kind of every non-empty document of a YAML file.
fn documents(path: &Path) -> Vec<TypeMeta> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_yaml::Deserializer::from_str(&text)
        .filter_map(|doc| {
            let value = serde_yaml::Value::deserialize(doc)
                .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()));
            if value.is_null() {
                return None;
            }
            Some(
                serde_yaml::from_value::<TypeMeta>(value).unwrap_or_else(|e| {
                    panic!("{}: a document is not an object: {e}", path.display())
                }),
            )
        })
        .collect()
}

/// Whether an apiVersion belongs to Kubernetes itself (core `v1`, `apps/v1`,
/// `rbac.authorization.k8s.io/v1`, ...) rather than to a custom resource.
fn is_builtin_api_version(api_version: &str) -> bool {
    const CRD_GROUPS_UNDER_K8S_IO: [&str; 2] =
        ["gateway.networking.k8s.io", "snapshot.storage.k8s.io"];
    let group = match api_version.split_once('/') {
        Some((group, _)) => group,
        None => "",
    };
    !CRD_GROUPS_UNDER_K8S_IO.contains(&group)
        && (!group.contains('.') || group.ends_with(".k8s.io"))
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|l| truncate(l, MAX_LINE))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Run `check` on each app's artifacts of `format`; fail once, listing every app's
/// findings. Returns how many apps had such artifacts.
fn check_each_app(
    apps: &[Synthesized],
    format: &str,
    check: impl Fn(&[PathBuf]) -> Result<(), String>,
) -> usize {
    let mut failures = Vec::new();
    let mut checked = 0;
    for app in apps {
        let files = app.artifacts_with_format(format);
        if files.is_empty() {
            continue;
        }
        checked += 1;
        if let Err(findings) = check(&files) {
            failures.push(format!(
                "== {} ({} {format} artifact(s))\n{findings}",
                app.label,
                files.len()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    checked
}

// ---------------------------------------------------------------------------------
// The reference apps
// ---------------------------------------------------------------------------------

/// Every reference app's templates pass `check`; at least one app has templates.
fn reference_templates_pass(check: impl Fn(&[PathBuf]) -> Result<(), String>) {
    let apps = synth_reference_apps();
    let checked = check_each_app(&apps, "cloudformation", check);
    assert!(
        checked > 0,
        "no reference app has a cloudformation artifact"
    );
}

#[test]
fn cloudformation_templates_pass_cfn_lint() {
    reference_templates_pass(cfn_lint);
}

#[test]
fn cloudformation_templates_pass_checkov() {
    reference_templates_pass(|files| {
        checkov_cloudformation(files).map(|report| eprintln!("{report}"))
    });
}

#[test]
fn cloudformation_templates_pass_cdk_nag() {
    reference_templates_pass(|files| cdk_nag(files).map(|report| eprintln!("{report}")));
}

#[test]
fn terraform_root_modules_pass_checkov() {
    let apps = synth_reference_apps();
    let skips = terraform_skips();
    let used = std::cell::RefCell::new(vec![false; skips.len()]);
    let checked = check_each_app(&apps, "terraform", |files| {
        checkov_terraform(files, &skips, &used).map(|report| eprintln!("{report}"))
    });
    assert!(checked > 0, "no reference app has a terraform artifact");
    let stale: Vec<String> = skips
        .iter()
        .zip(used.borrow().iter())
        .filter(|(_, used)| !**used)
        .map(|(s, _)| format!("{} {}", s.check, s.resources.join(",")))
        .collect();
    assert!(
        stale.is_empty(),
        "suppressions that match no failed check in any reference app (remove them from tests/tools/checkov-terraform-skips.txt): {}",
        stale.join("; ")
    );
}

#[test]
fn kubernetes_objects_pass_strict_schema() {
    let apps = synth_reference_apps();
    let checked = check_each_app(&apps, "kubernetes", |files| {
        kubernetes_validate(files).map(drop)
    });
    assert!(checked > 0, "no reference app has a kubernetes artifact");
}

#[test]
fn inference_endpoint_config_passes_crd_schema() {
    let apps = synth_reference_apps();
    let mut failures = Vec::new();
    let mut hyperpod_apps = 0;
    for app in &apps {
        let files: Vec<PathBuf> = kubernetes_files_with(app, IEC_KIND);
        if app.label.to_lowercase().contains("hyperpod") {
            hyperpod_apps += 1;
            assert!(
                !files.is_empty(),
                "HyperPod app {} has no {IEC_KIND} in its kubernetes artifacts",
                app.label
            );
        }
        if files.is_empty() {
            continue;
        }
        match validate_crd(&files) {
            Ok(report) => eprintln!("{}: {}", app.label, report.trim()),
            Err(findings) => failures.push(format!("== {}\n{findings}", app.label)),
        }
    }
    assert!(
        hyperpod_apps > 0,
        "no reference app has a stack named like *hyperpod*"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Karpenter's NodePool and EC2NodeClass, in the app that has them, against the CRDs of the
/// Karpenter release the app installs.
#[test]
fn karpenter_objects_pass_crd_schema() {
    let apps = synth_reference_apps();
    let mut failures = Vec::new();
    let mut karpenter_apps = 0;
    for app in &apps {
        for (kind, crd) in [
            (NODE_POOL_KIND, common::karpenter_node_pool_crd()),
            (EC2_NODE_CLASS_KIND, common::karpenter_ec2_node_class_crd()),
        ] {
            let files: Vec<PathBuf> = kubernetes_files_with(app, kind);
            if app.label.to_lowercase().contains("karpenter") {
                assert!(
                    !files.is_empty(),
                    "Karpenter app {} has no {kind} in its kubernetes artifacts",
                    app.label
                );
            }
            if files.is_empty() {
                continue;
            }
            if kind == NODE_POOL_KIND {
                karpenter_apps += 1;
            }
            match validate_against_crd(&crd, &files) {
                Ok(report) => eprintln!("{}: {}", app.label, report.trim()),
                Err(findings) => failures.push(format!("== {} ({kind})\n{findings}", app.label)),
            }
        }
    }
    assert!(
        karpenter_apps > 0,
        "no reference app has a Karpenter NodePool"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Each LeaderWorkerSet (a multi-node replica) against the CRD of the LeaderWorkerSet release
/// the stack installs (v0.10.0): its pod templates against the core pod schema embedded there.
#[test]
fn leader_worker_sets_pass_crd_schema() {
    let mut groups = 0;
    let mut failures = Vec::new();
    for app in synth_reference_apps() {
        let files: Vec<PathBuf> = kubernetes_files_with(&app, "LeaderWorkerSet");
        if files.is_empty() {
            continue;
        }
        groups += 1;
        match validate_against_crd(&common::leader_worker_set_crd(), &files) {
            Ok(report) => eprintln!("{}: {}", app.label, report.trim()),
            Err(findings) => failures.push(format!("== {}\n{findings}", app.label)),
        }
    }
    assert!(groups > 0, "no reference app has a LeaderWorkerSet");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Kueue's objects (each multi-node deployment's ResourceFlavor, ClusterQueue and LocalQueue)
/// against the CRDs of the Kueue release the stack installs (v0.19.2), version `v1beta2`.
#[test]
fn kueue_queues_pass_crd_schema() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for app in synth_reference_apps() {
        for (kind, file) in [
            ("ResourceFlavor", "kueue.x-k8s.io_resourceflavors.yaml"),
            ("ClusterQueue", "kueue.x-k8s.io_clusterqueues.yaml"),
            ("LocalQueue", "kueue.x-k8s.io_localqueues.yaml"),
        ] {
            let files: Vec<PathBuf> = kubernetes_files_with(&app, kind);
            if files.is_empty() {
                continue;
            }
            checked += 1;
            let crd = common::repo_root().join("codegen/schemas/crds").join(file);
            match validate_against_crd_version(&crd, "v1beta2", &files) {
                Ok(report) => eprintln!("{} {kind}: {}", app.label, report.trim()),
                Err(findings) => failures.push(format!("== {} {kind}\n{findings}", app.label)),
            }
        }
    }
    assert_eq!(checked, 3, "the multi-node reference's three Kueue kinds");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---------------------------------------------------------------------------------
// Negative controls: the same helpers accept a valid input and reject a broken one.
// ---------------------------------------------------------------------------------

fn write(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path
}

const GOOD_TEMPLATE: &str = r#"{
  "AWSTemplateFormatVersion": "2010-09-09",
  "Description": "Network for the inference cluster",
  "Resources": {
    "Vpc": {
      "Type": "AWS::EC2::VPC",
      "Properties": {
        "CidrBlock": "10.0.0.0/16",
        "EnableDnsHostnames": true,
        "EnableDnsSupport": true,
        "Tags": [{"Key": "Name", "Value": "kimi-k3"}]
      }
    },
    "InferenceSecurityGroup": {
      "Type": "AWS::EC2::SecurityGroup",
      "Properties": {
        "GroupDescription": "vLLM OpenAI-compatible API inside the VPC",
        "VpcId": {"Ref": "Vpc"},
        "SecurityGroupIngress": [{"IpProtocol": "tcp", "FromPort": 8000, "ToPort": 8000,
          "CidrIp": "10.0.0.0/16", "Description": "vLLM API from inside the VPC"}],
        "SecurityGroupEgress": [{"IpProtocol": "-1", "CidrIp": "0.0.0.0/0", "Description": "all outbound"}]
      }
    }
  },
  "Outputs": {
    "VpcId": {"Value": {"Ref": "Vpc"}},
    "SecurityGroupId": {"Value": {"Fn::GetAtt": ["InferenceSecurityGroup", "GroupId"]}}
  }
}
"#;

const BAD_NODEGROUP_TEMPLATE: &str = r#"{
  "AWSTemplateFormatVersion": "2010-09-09",
  "Parameters": {
    "ClusterName": {"Type": "String"},
    "NodeRoleArn": {"Type": "String"},
    "SubnetId": {"Type": "AWS::EC2::Subnet::Id"}
  },
  "Resources": {
    "GpuNodes": {
      "Type": "AWS::EKS::Nodegroup",
      "Properties": {
        "ClusterName": {"Ref": "ClusterName"},
        "NodeRole": {"Ref": "NodeRoleArn"},
        "Subnets": [{"Ref": "SubnetId"}],
        "AmiType": "AL2023_x86_64_NVIDIA",
        "CapacityType": "CAPACITY_BLOCKS"
      }
    }
  }
}
"#;

const GOOD_DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
  labels: {app: vllm}
spec:
  replicas: 1
  selector:
    matchLabels: {app: vllm}
  template:
    metadata:
      labels: {app: vllm}
    spec:
      tolerations:
        - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
      containers:
        - name: vllm
          image: vllm/vllm-openai:kimi-k3
          args: ["--model", "moonshotai/Kimi-K3", "--tensor-parallel-size", "8", "--port", "8000"]
          ports:
            - {name: http, containerPort: 8000}
          resources:
            limits: {nvidia.com/gpu: 8}
          readinessProbe:
            httpGet: {path: /health, port: 8000}
            periodSeconds: 10
          volumeMounts:
            - {name: shm, mountPath: /dev/shm}
      volumes:
        - name: shm
          emptyDir: {medium: Memory, sizeLimit: 64Gi}
---
apiVersion: v1
kind: Service
metadata:
  name: vllm
spec:
  selector: {app: vllm}
  ports:
    - {name: http, port: 8000, targetPort: 8000}
"#;

const GOOD_IEC: &str = r#"apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata:
  name: kimi-k3
  namespace: default
spec:
  modelName: kimi-k3
  endpointName: kimi-k3
  instanceType: ml.p6-b300.48xlarge
  replicas: 1
  modelSourceConfig:
    modelSourceType: huggingface
    huggingFaceModel:
      modelId: moonshotai/Kimi-K3
  worker:
    image: vllm/vllm-openai:kimi-k3
    args: ["--tensor-parallel-size", "8"]
    modelInvocationPort:
      containerPort: 8000
      name: http
    modelVolumeMount:
      name: model-weights
      mountPath: /opt/ml/model
    resources:
      limits:
        nvidia.com/gpu: 8
      requests:
        nvidia.com/gpu: 8
        cpu: "96"
        memory: 1Ti
"#;

#[test]
fn cfn_lint_rejects_unknown_capacity_type() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.template.json", GOOD_TEMPLATE);
    let bad = write(dir.path(), "bad.template.json", BAD_NODEGROUP_TEMPLATE);
    if let Err(findings) = cfn_lint(&[good]) {
        panic!("cfn-lint rejected the valid control template:\n{findings}");
    }
    let findings = cfn_lint(&[bad]).expect_err("cfn-lint accepted CapacityType CAPACITY_BLOCKS");
    assert!(
        findings.contains("E3030") && findings.contains("CAPACITY_BLOCKS"),
        "{findings}"
    );
}

#[test]
fn kubernetes_validate_rejects_misspelt_field() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.yaml", GOOD_DEPLOYMENT);
    let bad = write(
        dir.path(),
        "bad.yaml",
        &GOOD_DEPLOYMENT.replace("readinessProbe:", "readinessProb:"),
    );
    let crs = write(dir.path(), "iec.yaml", GOOD_IEC);
    if let Err(findings) = kubernetes_validate(&[good, crs]) {
        panic!("kubernetes-validate rejected the valid control objects:\n{findings}");
    }
    let findings =
        kubernetes_validate(&[bad]).expect_err("kubernetes-validate accepted readinessProb");
    assert!(
        findings.contains("'readinessProb' was unexpected"),
        "{findings}"
    );

    // A built-in kind with an apiVersion Kubernetes 1.33 does not serve is not "a custom
    // resource": kubernetes-validate only warns about it, the helper must fail.
    let old = write(
        dir.path(),
        "old.yaml",
        &GOOD_DEPLOYMENT.replace("apps/v1", "apps/v1beta1"),
    );
    let findings =
        kubernetes_validate(&[old]).expect_err("kubernetes-validate accepted apps/v1beta1");
    assert!(
        findings.contains("no schema for a built-in kind"),
        "{findings}"
    );
}

#[test]
fn crd_schema_rejects_unknown_field_and_bad_instance_type() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.yaml", GOOD_IEC);
    let bad = write(
        dir.path(),
        "bad.yaml",
        &GOOD_IEC.replace(
            "  instanceType: ml.p6-b300.48xlarge\n",
            "  instanceType: p6-b300.48xlarge\n  tensorParallel: 8\n",
        ),
    );
    if let Err(findings) = validate_crd(&[good]) {
        panic!("the CRD schema rejected the valid control InferenceEndpointConfig:\n{findings}");
    }
    let findings = validate_crd(&[bad])
        .expect_err("the CRD schema accepted the broken InferenceEndpointConfig");
    assert!(
        findings.contains("'tensorParallel' was unexpected"),
        "{findings}"
    );
    assert!(
        findings.contains("spec.instanceType: 'p6-b300.48xlarge' does not match"),
        "{findings}"
    );

    // A file without any InferenceEndpointConfig is an error, not a silent pass.
    let none = write(dir.path(), "none.yaml", GOOD_DEPLOYMENT);
    let findings = validate_crd(&[none])
        .expect_err("validate_crd passed a file without InferenceEndpointConfig");
    assert!(
        findings.contains("no InferenceEndpointConfig"),
        "{findings}"
    );
}

const GOOD_NODE_POOL: &str = r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: gpu
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: gpu}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [reserved]}
      expireAfter: Never
  limits:
    nvidia.com/gpu: 8
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 10m
"#;

const GOOD_EC2_NODE_CLASS: &str = r#"apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: gpu
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags: {hyperforge:subnet: gpu}
  securityGroupSelectorTerms:
    - tags: {aws:eks:cluster-name: demo}
  capacityReservationSelectorTerms:
    - id: cr-0123456789abcdef0
  metadataOptions:
    httpTokens: required
"#;

#[test]
fn karpenter_crd_schemas_reject_v1beta1_fields_and_bad_values() {
    let dir = tempfile::tempdir().unwrap();
    let node_pool_crd = common::karpenter_node_pool_crd();
    let node_class_crd = common::karpenter_ec2_node_class_crd();
    let good_pool = write(dir.path(), "pool.yaml", GOOD_NODE_POOL);
    let good_class = write(dir.path(), "class.yaml", GOOD_EC2_NODE_CLASS);
    if let Err(findings) = validate_against_crd(&node_pool_crd, &[good_pool]) {
        panic!("the NodePool CRD schema rejected the valid control NodePool:\n{findings}");
    }
    if let Err(findings) = validate_against_crd(&node_class_crd, std::slice::from_ref(&good_class))
    {
        panic!("the EC2NodeClass CRD schema rejected the valid control EC2NodeClass:\n{findings}");
    }

    // karpenter.sh/v1beta1 spellings: expireAfter under disruption, WhenUnderutilized.
    let bad_pool = write(
        dir.path(),
        "bad-pool.yaml",
        &GOOD_NODE_POOL
            .replace("      expireAfter: Never\n", "")
            .replace(
                "    consolidationPolicy: WhenEmpty\n",
                "    consolidationPolicy: WhenUnderutilized\n    expireAfter: 720h\n",
            ),
    );
    let findings = validate_against_crd(&node_pool_crd, &[bad_pool])
        .expect_err("the NodePool CRD schema accepted a v1beta1 disruption block");
    assert!(
        findings.contains("'expireAfter' was unexpected"),
        "{findings}"
    );
    assert!(
        findings.contains("spec.disruption.consolidationPolicy: 'WhenUnderutilized' is not one of"),
        "{findings}"
    );

    let bad_class = write(
        dir.path(),
        "bad-class.yaml",
        &GOOD_EC2_NODE_CLASS
            .replace("id: cr-0123456789abcdef0", "id: 0123456789abcdef0")
            .replace("httpTokens: required", "httpTokens: mandatory"),
    );
    let findings = validate_against_crd(&node_class_crd, &[bad_class])
        .expect_err("the EC2NodeClass CRD schema accepted a malformed reservation id");
    assert!(
        findings.contains(
            "spec.capacityReservationSelectorTerms[0].id: '0123456789abcdef0' does not match"
        ),
        "{findings}"
    );
    assert!(
        findings.contains("spec.metadataOptions.httpTokens: 'mandatory' is not one of"),
        "{findings}"
    );

    // Each CRD checks only its own kind, and a file without it is an error.
    let findings = validate_against_crd(&node_pool_crd, &[good_class])
        .expect_err("validate_crd passed a file without NodePool");
    assert!(findings.contains("no NodePool document"), "{findings}");
}

#[test]
fn checkov_gate_rejects_parse_errors_and_empty_scans() {
    let parse_error = r#"{"check_type": "terraform_json",
        "results": {"passed_checks": [], "failed_checks": [], "skipped_checks": [], "parsing_errors": ["/main.tf.json"]},
        "summary": {"passed": 3, "failed": 0, "skipped": 0, "parsing_errors": 1, "resource_count": 0, "checkov_version": "3.3.30"}}"#;
    let findings =
        checkov_gate(parse_error.as_bytes()).expect_err("the gate passed a parsing error");
    assert!(findings.contains("could not parse"), "{findings}");

    // What checkov prints when no file matched the framework.
    let nothing = r#"{"passed": 0, "failed": 0, "skipped": 0, "parsing_errors": 0, "resource_count": 0, "checkov_version": "3.3.30"}"#;
    let findings = checkov_gate(nothing.as_bytes()).expect_err("the gate passed an empty scan");
    assert!(findings.contains("nothing was scanned"), "{findings}");

    let passing = r#"[{"check_type": "cloudformation",
        "results": {"passed_checks": [], "failed_checks": [], "skipped_checks": [], "parsing_errors": []},
        "summary": {"passed": 4, "failed": 0, "skipped": 0, "parsing_errors": 0, "resource_count": 2, "checkov_version": "3.3.30"}}]"#;
    if let Err(findings) = checkov_gate(passing.as_bytes()) {
        panic!("the gate rejected a clean report:\n{findings}");
    }
}

#[test]
fn checkov_passes_valid_template_and_reports_failed_checks() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.template.json", GOOD_TEMPLATE);
    let report = checkov_cloudformation(&[good])
        .unwrap_or_else(|f| panic!("checkov rejected the control template:\n{f}"));
    assert!(report.contains("cloudformation: passed"), "{report}");

    let open_ssh = GOOD_TEMPLATE.replace(
        r#""FromPort": 8000, "ToPort": 8000,
          "CidrIp": "10.0.0.0/16", "Description": "vLLM API from inside the VPC""#,
        r#""FromPort": 22, "ToPort": 22, "CidrIp": "0.0.0.0/0""#,
    );
    assert_ne!(open_ssh, GOOD_TEMPLATE, "fixture replacement did not apply");
    let bad = write(dir.path(), "open-ssh.template.json", &open_ssh);
    let findings =
        checkov_cloudformation(&[bad]).expect_err("checkov passed SSH open to the world");
    assert!(findings.contains("CKV_AWS_24"), "{findings}");
}

/// A bucket without a TLS-only policy and a role allowing `s3:GetObject` on every resource:
/// cdk-nag reports both, in both releases, until each is acknowledged, the role's wildcard
/// only by its finding (`applies_to`).
#[test]
fn cdk_nag_reports_findings_and_reads_acknowledgements() {
    let template = |bucket_metadata: &str, role_metadata: &str| {
        format!(
            r#"{{"AWSTemplateFormatVersion": "2010-09-09", "Resources": {{
            "Bucket": {{"Type": "AWS::S3::Bucket", {bucket_metadata} "Properties": {{
                "PublicAccessBlockConfiguration": {{"BlockPublicAcls": true, "BlockPublicPolicy": true,
                    "IgnorePublicAcls": true, "RestrictPublicBuckets": true}}}}}},
            "Role": {{"Type": "AWS::IAM::Role", {role_metadata} "Properties": {{
                "AssumeRolePolicyDocument": {{"Version": "2012-10-17", "Statement": [{{"Effect": "Allow",
                    "Principal": {{"Service": "ec2.amazonaws.com"}}, "Action": "sts:AssumeRole"}}]}},
                "Policies": [{{"PolicyName": "read", "PolicyDocument": {{"Version": "2012-10-17",
                    "Statement": [{{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}}]}}}}]}}}}}}}}"#
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let bare = write(dir.path(), "bare.template.json", &template("", ""));
    let findings = cdk_nag(&[bare]).expect_err("cdk-nag passed a bucket without TLS-only access");
    for expected in [
        "cdk-nag 2.x\terror\tAwsSolutions-S10",
        "cdk-nag 3.x\terror\tAwsSolutions-S10",
        "AwsSolutions-IAM5[Resource::*]",
        "AwsSolutions-S1",
    ] {
        assert!(findings.contains(expected), "{expected}:\n{findings}");
    }

    let reason = "A fixture: this is acknowledged for the test.";
    let bucket = format!(
        r#""Metadata": {{"cdk_nag": {{"rules_to_suppress": [{{"id": "AwsSolutions-S10", "reason": "{reason}"}},
            {{"id": "AwsSolutions-S1", "reason": "{reason}"}}]}}}},"#
    );
    let other_finding = format!(
        r#""Metadata": {{"cdk_nag": {{"rules_to_suppress": [{{"id": "AwsSolutions-IAM5", "reason": "{reason}",
            "applies_to": ["Resource::arn:aws:s3:::other/*"]}}]}}}},"#
    );
    let narrow = write(
        dir.path(),
        "narrow.template.json",
        &template(&bucket, &other_finding),
    );
    let findings = cdk_nag(&[narrow]).expect_err("an acknowledgement of another finding applied");
    assert!(findings.contains("IAM5[Resource::*]"), "{findings}");
    assert!(!findings.contains("S10"), "{findings}");

    let this_finding = other_finding.replace("arn:aws:s3:::other/*", "*");
    let acknowledged = write(
        dir.path(),
        "acknowledged.template.json",
        &template(&bucket, &this_finding),
    );
    if let Err(findings) = cdk_nag(&[acknowledged]) {
        panic!("cdk-nag ignored the acknowledgements:\n{findings}");
    }
}

#[test]
fn checkov_reports_failed_terraform_checks() {
    let dir = tempfile::tempdir().unwrap();
    let open_ssh = write(
        dir.path(),
        "main.tf.json",
        r#"{"resource": {"aws_security_group": {"open": {
            "description": "SSH from anywhere",
            "ingress": [{"from_port": 22, "to_port": 22, "protocol": "tcp", "cidr_blocks": ["0.0.0.0/0"], "description": "ssh"}]
        }}}}"#,
    );
    let none = std::cell::RefCell::new(Vec::new());
    let findings = checkov_terraform(&[open_ssh], &[], &none)
        .expect_err("checkov passed SSH open to the world");
    assert!(findings.contains("CKV_AWS_24"), "{findings}");
}
