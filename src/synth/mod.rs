//! Synthesis: validate the whole app (every diagnostic at once: structural checks, then the
//! model-aware rules of [`crate::validate`]), then lower each stage with its backend, check the
//! rendered templates against CloudFormation's limits, and collect the artifacts and the
//! manifest into an [`Assembly`]. Nothing is written here: synthesis is pure computation.

pub mod cloudformation;
pub mod kubernetes;
pub mod terraform;

use crate::app::{logical_id, App, Stack, StageId, StageKind};
use crate::assembly::manifest::{
    Artifact, ArtifactFormat, ArtifactList, Chart, Manifest, Parameter, SetFromOutput,
    StackManifest, StageManifest, StageOutput,
};
use crate::assembly::Assembly;
use crate::constructs::{ChartSource, Placements};
use crate::diagnostics::{Code, Diagnostics};
use serde_json::Value;
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

    /// Whether artifacts of `format` are written. Helm values and uploaded scripts are
    /// deployed by the CloudFormation path and read by the Terraform module, so they come with
    /// either.
    pub fn includes(self, format: ArtifactFormat) -> bool {
        match format {
            ArtifactFormat::CloudFormation => self.contains(Format::CloudFormation),
            ArtifactFormat::Terraform => self.contains(Format::Terraform),
            ArtifactFormat::Kubernetes => self.contains(Format::Kubernetes),
            ArtifactFormat::Runbook => self.contains(Format::Runbook),
            ArtifactFormat::HelmValues | ArtifactFormat::Script => {
                self.contains(Format::CloudFormation) || self.contains(Format::Terraform)
            }
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
    Ok(Assembly::new(files, Manifest::new(stacks), ds))
}

/// Drops the artifacts of formats not in `formats` from `files` and from the manifest's
/// artifact lists. Stages stay; a stack-level entry (`terraform`, `runbook`) left without
/// artifacts is removed.
fn filter_formats(
    files: &mut BTreeMap<String, Vec<u8>>,
    stacks: &mut [StackManifest],
    formats: Formats,
) {
    let mut keep = |artifacts: &mut Vec<Artifact>| {
        artifacts.retain(|a| {
            let kept = formats.includes(a.format);
            if !kept {
                files.remove(&a.path);
            }
            kept
        });
    };
    for stack in stacks {
        for stage in &mut stack.stages {
            keep(stage.artifacts_mut());
        }
        for entry in [&mut stack.terraform, &mut stack.runbook] {
            if let Some(list) = entry {
                keep(&mut list.artifacts);
                if list.artifacts.is_empty() {
                    *entry = None;
                }
            }
        }
    }
}

/// Lowers one stack into `files`; diagnostics found on the rendered artifacts (template
/// limits) go to `ds`.
fn synthesize_stack(
    app: &App,
    stack: &Stack,
    files: &mut BTreeMap<String, Vec<u8>>,
    ds: &mut Diagnostics,
) -> Result<StackManifest, Diagnostics> {
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
        let name = stage.name.clone();
        let entry = match &stage.kind {
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
                // Every parameter is of type String, so a default is a string.
                let parameters: Vec<Parameter> = template
                    .get("Parameters")
                    .and_then(Value::as_object)
                    .map(|p| {
                        p.iter()
                            .map(|(name, spec)| Parameter {
                                name: name.clone(),
                                default: spec
                                    .get("Default")
                                    .and_then(Value::as_str)
                                    .map(str::to_owned),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let outputs: Vec<String> = template
                    .get("Outputs")
                    .and_then(Value::as_object)
                    .map(|o| o.keys().cloned().collect())
                    .unwrap_or_default();
                let mut text = serde_json::to_string_pretty(&template).unwrap_or_default();
                text.push('\n');
                crate::validate::limits::check_template(&template, text.len(), &path, ds);
                files.insert(path.clone(), text.into_bytes());
                StageManifest::CloudFormation {
                    name,
                    stack_name: stack.stage_stack_name(id),
                    capabilities: vec![capability.to_owned()],
                    parameters,
                    outputs,
                    artifacts: vec![Artifact::new(ArtifactFormat::CloudFormation, path)],
                }
            }
            StageKind::Helm(release) => {
                let path = format!("{base}.values.yaml");
                let mut text = String::new();
                for line in release.note.lines() {
                    text.push_str(&format!("# {line}\n"));
                }
                text.push_str(&serde_yaml::to_string(&release.values).map_err(yaml_error(stack))?);
                files.insert(path.clone(), text.into_bytes());
                let chart = match &release.chart {
                    ChartSource::Repository {
                        repo,
                        chart,
                        version,
                    } => Chart::Repository {
                        repository: repo.clone(),
                        name: chart.clone(),
                        version: version.clone(),
                    },
                    ChartSource::Git { url, commit, path } => Chart::Git {
                        url: url.clone(),
                        commit: commit.clone(),
                        path: path.clone(),
                    },
                };
                let set_from_outputs = release
                    .set_from_outputs
                    .iter()
                    .map(|(key, r)| SetFromOutput {
                        key: key.clone(),
                        stage: stack
                            .stage_of(r.construct_id())
                            .and_then(|s| stack.stage(s))
                            .map(|s| s.name.clone()),
                        output: format!("{}{}", logical_id(&r.path), r.attr.as_str()),
                    })
                    .collect();
                StageManifest::Helm {
                    name,
                    release: release.release.clone(),
                    namespace: release.namespace.clone(),
                    chart,
                    set_from_outputs,
                    artifacts: vec![Artifact::new(ArtifactFormat::HelmValues, path)],
                }
            }
            StageKind::Upload(upload) => {
                let bucket_stage = stack
                    .stage_of(upload.bucket.path().split('/').next().unwrap_or_default())
                    .and_then(|s| stack.stage(s))
                    .map(|s| s.name.clone());
                let mut artifacts = Vec::new();
                for file in &upload.files {
                    let path = format!("{base}/{}", file.name);
                    files.insert(path.clone(), file.content.clone().into_bytes());
                    artifacts.push(Artifact::new(ArtifactFormat::Script, path));
                }
                StageManifest::S3Upload {
                    name,
                    bucket: StageOutput {
                        stage: bucket_stage,
                        output: format!("{}Name", logical_id(upload.bucket.path())),
                    },
                    prefix: upload.prefix.clone(),
                    artifacts,
                }
            }
            StageKind::Kubernetes => {
                let path = format!("{base}.yaml");
                let text = kubernetes::stage_yaml(&graph, id).map_err(yaml_error(stack))?;
                files.insert(path.clone(), text.into_bytes());
                StageManifest::Kubernetes {
                    name,
                    artifacts: vec![Artifact::new(ArtifactFormat::Kubernetes, path)],
                }
            }
        };
        stages.push(entry);
    }
    let eks = Placements::new(stack)
        .all()
        .find_map(|p| p.facts().eks_cluster)
        .map(|c| c.name);
    let mut manifest = StackManifest {
        name: stack.name().to_owned(),
        region: stack.region().to_owned(),
        eks_cluster: eks,
        stages,
        terraform: None,
        runbook: None,
    };
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
            artifacts.push(Artifact::new(ArtifactFormat::Terraform, path));
        }
        manifest.terraform = Some(ArtifactList { artifacts });
    }
    let runbook = crate::runbook::render(stack, &manifest).map_err(|e| {
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
    manifest.runbook = Some(ArtifactList {
        artifacts: vec![Artifact::new(ArtifactFormat::Runbook, path)],
    });
    Ok(manifest)
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
