//! Synthesis: validate the whole app (every diagnostic at once: structural checks, then the
//! model-aware rules of [`crate::validate`]), then lower each stage with its backend, check the
//! rendered templates against CloudFormation's limits, and collect the artifacts and the
//! manifest into an [`Assembly`]. Nothing is written here: synthesis is pure computation.

pub mod cloudformation;
pub mod kubernetes;
pub mod terraform;

use crate::app::{logical_id, App, Stack, StageId, StageKind};
use crate::assembly::Assembly;
use crate::constructs::{ChartSource, Placements};
use crate::diagnostics::{Code, Diagnostics};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

impl App {
    /// Every diagnostic of the app, without synthesizing.
    pub fn validate(&self) -> Diagnostics {
        validate(self)
    }

    /// Validates and synthesizes every stack. On any error, returns all diagnostics and no
    /// output.
    pub fn synth(&self) -> Result<Assembly, Diagnostics> {
        synthesize(self)
    }

    /// [`App::synth`] with options, e.g. `deny_warnings` to fail on any warning.
    pub fn synth_with(&self, options: &SynthOptions) -> Result<Assembly, Diagnostics> {
        synthesize_with(self, options)
    }
}

/// Every diagnostic of `app`, without synthesizing.
pub fn validate(app: &App) -> Diagnostics {
    let mut ds = Diagnostics::new();
    let mut names = BTreeSet::new();
    for stack in app.stacks() {
        if !names.insert(stack.name()) {
            ds.report(
                Code::InvalidStackName,
                stack.name(),
                format!("two stacks are named `{}`", stack.name()),
                "stack names prefix CloudFormation stack names and artifact folders; make them unique",
            );
        }
        stack.validate_structure(app.tags(), &mut ds);
        for placed in Placements::new(stack).all() {
            placed.construct.validate(&placed.cx, &mut ds);
        }
    }
    crate::validate::app(app, &mut ds);
    ds
}

/// How synthesis treats diagnostics, and which output formats it writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SynthOptions {
    /// Treat warnings as errors: return every diagnostic and no output when any warning
    /// stands.
    pub deny_warnings: bool,
    /// The formats to write (all by default). The manifest keeps every stage; it lists only
    /// the artifacts written.
    pub formats: Formats,
}

/// One output format of the assembly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Format {
    /// CloudFormation templates, plus the files their stages deploy (Helm values, uploaded
    /// scripts).
    CloudFormation,
    /// One Terraform root module per stack, plus the stage files it reads (Helm values,
    /// uploaded scripts).
    Terraform,
    /// Kubernetes manifests.
    Kubernetes,
    /// One `RUNBOOK.md` per stack.
    Runbook,
}

impl Format {
    /// Every format.
    pub const ALL: [Format; 4] = [
        Format::CloudFormation,
        Format::Terraform,
        Format::Kubernetes,
        Format::Runbook,
    ];

    /// The format's name (`cloudformation`, `terraform`, `kubernetes`, `runbook`).
    pub fn as_str(self) -> &'static str {
        match self {
            Format::CloudFormation => "cloudformation",
            Format::Terraform => "terraform",
            Format::Kubernetes => "kubernetes",
            Format::Runbook => "runbook",
        }
    }

    /// Parses a format name (case-insensitive).
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL
            .into_iter()
            .find(|f| f.as_str().eq_ignore_ascii_case(name.trim()))
    }
}

/// A set of [`Format`]s. The default is every format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Formats(u8);

impl Default for Formats {
    fn default() -> Self {
        Formats::all()
    }
}

impl Formats {
    /// Every format.
    pub fn all() -> Self {
        Format::ALL.into_iter().collect()
    }

    /// No format (only `manifest.json` is written).
    pub fn none() -> Self {
        Formats(0)
    }

    /// This set plus `format`.
    pub fn with(self, format: Format) -> Self {
        Formats(self.0 | 1 << format as u8)
    }

    /// Whether `format` is in the set.
    pub fn contains(self, format: Format) -> bool {
        self.0 & (1 << format as u8) != 0
    }

    /// Whether an artifact of manifest format `artifact` (`cloudformation`, `helm-values`,
    /// `script`, `terraform`, `kubernetes`, `runbook`) is written. Helm values and uploaded
    /// scripts are deployed by the CloudFormation path and read by the Terraform module, so
    /// they come with either.
    pub fn includes_artifact(self, artifact: &str) -> bool {
        match artifact {
            "cloudformation" => self.contains(Format::CloudFormation),
            "terraform" => self.contains(Format::Terraform),
            "kubernetes" => self.contains(Format::Kubernetes),
            "runbook" => self.contains(Format::Runbook),
            _ => self.contains(Format::CloudFormation) || self.contains(Format::Terraform),
        }
    }
}

impl FromIterator<Format> for Formats {
    fn from_iter<I: IntoIterator<Item = Format>>(iter: I) -> Self {
        iter.into_iter().fold(Formats::none(), Formats::with)
    }
}

/// Validates and synthesizes `app`. On any error, returns every diagnostic and no output.
pub fn synthesize(app: &App) -> Result<Assembly, Diagnostics> {
    synthesize_with(app, &SynthOptions::default())
}

/// [`synthesize`] with `options`.
pub fn synthesize_with(app: &App, options: &SynthOptions) -> Result<Assembly, Diagnostics> {
    let mut ds = validate(app);
    if ds.has_errors() {
        return Err(ds);
    }
    let mut files = BTreeMap::new();
    let mut stacks = Vec::new();
    let mut errors = Diagnostics::new();
    for stack in app.stacks() {
        match synthesize_stack(app, stack, &mut files, &mut ds) {
            Ok(manifest) => stacks.push(manifest),
            Err(e) => errors.extend(e),
        }
    }
    if errors.has_errors() || ds.has_errors() || (options.deny_warnings && ds.has_warnings()) {
        let mut all = ds;
        all.extend(errors);
        return Err(all);
    }
    if options.formats != Formats::all() {
        filter_formats(&mut files, &mut stacks, options.formats);
    }
    let manifest = json!({
        "version": 1,
        "generator": concat!("hyperforge ", env!("CARGO_PKG_VERSION")),
        "stacks": stacks,
    });
    Ok(Assembly::new(files, manifest, ds))
}

/// Drops the artifacts of formats not in `formats` from `files` and from the manifest's
/// artifact lists. Stages stay; a stack-level entry (`terraform`, `runbook`) left without
/// artifacts is removed.
fn filter_formats(files: &mut BTreeMap<String, Vec<u8>>, stacks: &mut [Value], formats: Formats) {
    fn keep(list: &mut Value, formats: Formats, files: &mut BTreeMap<String, Vec<u8>>) {
        if let Some(artifacts) = list.as_array_mut() {
            artifacts.retain(|a| {
                let format = a.get("format").and_then(Value::as_str).unwrap_or_default();
                let kept = formats.includes_artifact(format);
                if !kept {
                    if let Some(path) = a.get("path").and_then(Value::as_str) {
                        files.remove(path);
                    }
                }
                kept
            });
        }
    }
    for stack in stacks.iter_mut().filter_map(Value::as_object_mut) {
        if let Some(stages) = stack.get_mut("stages").and_then(Value::as_array_mut) {
            for stage in stages.iter_mut() {
                if let Some(list) = stage.get_mut("artifacts") {
                    keep(list, formats, files);
                }
            }
        }
        for key in ["terraform", "runbook"] {
            let empty = match stack.get_mut(key).and_then(|e| e.get_mut("artifacts")) {
                Some(list) => {
                    keep(list, formats, files);
                    list.as_array().is_none_or(Vec::is_empty)
                }
                None => false,
            };
            if empty {
                stack.remove(key);
            }
        }
    }
}

fn artifact(format: &str, path: &str) -> Value {
    json!({"format": format, "path": path})
}

/// Lowers one stack into `files`; diagnostics found on the rendered artifacts (template
/// limits) go to `ds`.
fn synthesize_stack(
    app: &App,
    stack: &Stack,
    files: &mut BTreeMap<String, Vec<u8>>,
    ds: &mut Diagnostics,
) -> Result<Value, Diagnostics> {
    let tags = stack.effective_tags(app.tags());
    let graph = crate::constructs::expand(stack);
    let mut problems = Diagnostics::new();
    graph.check_references(stack, &mut problems);
    if problems.has_errors() {
        return Err(problems);
    }
    let mut templates = cloudformation::templates(stack, &graph, &tags)?;
    let mut stages = Vec::new();
    for (index, stage) in stack.stages().iter().enumerate() {
        let id = StageId::from_index(index);
        let base = format!("{}/{:02}-{}", stack.name(), index + 1, stage.name);
        let mut entry = Map::new();
        entry.insert("name".into(), json!(stage.name));
        entry.insert("kind".into(), json!(stage.kind.as_str()));
        match &stage.kind {
            StageKind::CloudFormation => {
                let template = templates.remove(&id).unwrap_or(Value::Null);
                let path = format!("{base}.template.json");
                // Named IAM resources need the stronger acknowledgement.
                let named_iam = template
                    .get("Resources")
                    .and_then(Value::as_object)
                    .is_some_and(|resources| {
                        resources.values().any(|r| {
                            r["Type"]
                                .as_str()
                                .is_some_and(|t| t.starts_with("AWS::IAM::"))
                                && r["Properties"].get("RoleName").is_some()
                        })
                    });
                let capability = if named_iam {
                    "CAPABILITY_NAMED_IAM"
                } else {
                    "CAPABILITY_IAM"
                };
                let parameters: Vec<Value> = template
                    .get("Parameters")
                    .and_then(Value::as_object)
                    .map(|p| {
                        p.iter()
                            .map(|(name, spec)| json!({"name": name, "default": spec.get("Default")}))
                            .collect()
                    })
                    .unwrap_or_default();
                let outputs: Vec<&String> = template
                    .get("Outputs")
                    .and_then(Value::as_object)
                    .map(|o| o.keys().collect())
                    .unwrap_or_default();
                entry.insert("stack_name".into(), json!(stack.stage_stack_name(id)));
                entry.insert("capabilities".into(), json!([capability]));
                entry.insert("parameters".into(), json!(parameters));
                entry.insert("outputs".into(), json!(outputs));
                let mut text = serde_json::to_string_pretty(&template).unwrap_or_default();
                text.push('\n');
                crate::validate::limits::check_template(&template, text.len(), &path, ds);
                files.insert(path.clone(), text.into_bytes());
                entry.insert(
                    "artifacts".into(),
                    json!([artifact("cloudformation", &path)]),
                );
            }
            StageKind::Helm(release) => {
                let path = format!("{base}.values.yaml");
                let mut text = String::new();
                for line in release.note.lines() {
                    text.push_str(&format!("# {line}\n"));
                }
                text.push_str(&serde_yaml::to_string(&release.values).map_err(yaml_error(stack))?);
                files.insert(path.clone(), text.into_bytes());
                entry.insert("release".into(), json!(release.release));
                entry.insert("namespace".into(), json!(release.namespace));
                entry.insert(
                    "chart".into(),
                    match &release.chart {
                        ChartSource::Repository {
                            repo,
                            chart,
                            version,
                        } => {
                            json!({"repository": repo, "name": chart, "version": version})
                        }
                        ChartSource::Git { url, commit, path } => {
                            json!({"git": url, "commit": commit, "path": path})
                        }
                    },
                );
                if !release.set_from_outputs.is_empty() {
                    let sets: Vec<Value> = release
                        .set_from_outputs
                        .iter()
                        .map(|(key, r)| {
                            let stage = stack
                                .stage_of(r.construct_id())
                                .and_then(|s| stack.stage(s))
                                .map(|s| s.name.clone());
                            json!({
                                "key": key,
                                "stage": stage,
                                "output": format!("{}{}", logical_id(&r.path), r.attr.as_str()),
                            })
                        })
                        .collect();
                    entry.insert("set_from_outputs".into(), Value::Array(sets));
                }
                entry.insert("artifacts".into(), json!([artifact("helm-values", &path)]));
            }
            StageKind::Upload(upload) => {
                let bucket_stage = stack
                    .stage_of(upload.bucket.path().split('/').next().unwrap_or_default())
                    .and_then(|s| stack.stage(s))
                    .map(|s| s.name.clone());
                entry.insert(
                    "bucket".into(),
                    json!({
                        "stage": bucket_stage,
                        "output": format!("{}Name", logical_id(upload.bucket.path())),
                    }),
                );
                entry.insert("prefix".into(), json!(upload.prefix));
                let mut artifacts = Vec::new();
                for file in &upload.files {
                    let path = format!("{base}/{}", file.name);
                    files.insert(path.clone(), file.content.clone().into_bytes());
                    artifacts.push(artifact("script", &path));
                }
                entry.insert("artifacts".into(), Value::Array(artifacts));
            }
            StageKind::Kubernetes => {
                let path = format!("{base}.yaml");
                let text = kubernetes::stage_yaml(stack, id).map_err(yaml_error(stack))?;
                files.insert(path.clone(), text.into_bytes());
                entry.insert("artifacts".into(), json!([artifact("kubernetes", &path)]));
            }
        }
        stages.push(Value::Object(entry));
    }
    let eks = Placements::new(stack)
        .all()
        .find_map(|p| p.facts().eks_cluster)
        .map(|c| c.name);
    let mut manifest = Map::new();
    manifest.insert("name".into(), json!(stack.name()));
    manifest.insert("region".into(), json!(stack.region()));
    manifest.insert("eks_cluster".into(), json!(eks));
    manifest.insert("stages".into(), Value::Array(stages));
    let module = terraform::root_module(stack, &graph, &tags, |index| {
        let Some(stage) = stack.stages().get(index) else {
            return String::new();
        };
        let base = format!("{:02}-{}", index + 1, stage.name);
        match stage.kind {
            StageKind::Helm(_) => format!("{base}.values.yaml"),
            _ => base,
        }
    })?;
    if !module.is_empty() {
        let mut artifacts = Vec::new();
        for (name, content) in module {
            let path = format!("{}/terraform/{name}", stack.name());
            let mut text = serde_json::to_string_pretty(&content).unwrap_or_default();
            text.push('\n');
            files.insert(path.clone(), text.into_bytes());
            artifacts.push(artifact("terraform", &path));
        }
        manifest.insert("terraform".into(), json!({ "artifacts": artifacts }));
    }
    let runbook = crate::runbook::render(stack, &Value::Object(manifest.clone())).map_err(|e| {
        let mut ds = Diagnostics::new();
        ds.report(
            Code::RenderFailed,
            stack.name(),
            e.to_string(),
            "this is a bug in hyperforge; please report it with the stack description",
        );
        ds
    })?;
    let path = format!("{}/RUNBOOK.md", stack.name());
    files.insert(path.clone(), runbook.into_bytes());
    manifest.insert(
        "runbook".into(),
        json!({ "artifacts": [artifact("runbook", &path)] }),
    );
    Ok(Value::Object(manifest))
}

fn yaml_error(stack: &Stack) -> impl Fn(serde_yaml::Error) -> Diagnostics + '_ {
    move |e| {
        let mut ds = Diagnostics::new();
        ds.report(
            Code::RenderFailed,
            stack.name(),
            format!("could not render YAML: {e}"),
            "this is a bug in hyperforge; please report it with the stack description",
        );
        ds
    }
}
