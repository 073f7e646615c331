//! Synthesis: validate the whole app (every diagnostic at once: structural checks, then the
//! model-aware rules of `validate`), expand each stack's constructs once into its
//! [`ResourceGraph`], hand it to every [`Backend`] (CloudFormation, the stage payloads,
//! Kubernetes, Terraform), and collect their artifacts, the typed manifest and the runbook into
//! an [`Assembly`]. Nothing is written here: synthesis is pure computation.

pub mod cloudformation;
mod inventory;
pub mod kubernetes;
mod plan;
mod shape;
mod stages;
pub mod terraform;

use crate::app::{Acknowledged, App, Stack, StageId, Tags};
use crate::assembly::manifest::{
    AcknowledgedManifest, AdminHostManifest, Artifact, ArtifactFormat, ArtifactList, Manifest,
    StackManifest, StageManifest, ADMIN_TUNNEL_LOCAL_PORT,
};
use crate::assembly::Assembly;
use crate::constructs::Placements;
use crate::diagnostics::{Code, Diagnostics, Severity};
use crate::resources::ResourceGraph;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

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

/// Every diagnostic of `app`, without synthesizing: located, acknowledgements applied.
pub fn validate(app: &App) -> Diagnostics {
    let (mut ds, _) = check(app);
    settle(app, &mut ds);
    ds
}

/// A stack's acknowledgements and how many diagnostics each covered.
type Covered<'a> = Vec<(&'a Acknowledged, usize)>;

/// Gives every diagnostic of a construct added from Rust code its source location, and
/// takes out the warnings and notes a stack acknowledged (returned, per stack, with how many
/// each covered); an acknowledgement that covered nothing warns (`HF0018`).
fn settle<'a>(app: &'a App, ds: &mut Diagnostics) -> BTreeMap<&'a str, Covered<'a>> {
    // A display path starts with its stack's name, which holds no `/`.
    let stacks: BTreeMap<&str, &Stack> = app.stacks().iter().map(|s| (s.name(), s)).collect();
    for d in ds.iter_mut() {
        if d.location.is_none() {
            let stack = d.path.split('/').next().and_then(|name| stacks.get(name));
            d.location = stack
                .and_then(|s| override_location(s, d).or_else(|| s.location_of(&d.path)))
                .map(|l| l.to_string());
        }
    }
    let mut covered = BTreeMap::new();
    for stack in app.stacks() {
        let mut counts: Covered<'a> = Vec::new();
        for (i, ack) in stack.acknowledgements().iter().enumerate() {
            if !ack.is_usable() {
                continue;
            }
            let at = stack.display_path(&ack.path);
            let mut n = 0;
            ds.retain(|d| {
                let under = d.path == at
                    || d.path
                        .strip_prefix(at.as_str())
                        .is_some_and(|r| r.starts_with('/'));
                let hit = d.code == ack.code && d.severity != Severity::Error && under;
                n += usize::from(hit);
                !hit
            });
            if n == 0 {
                let mut d = crate::diagnostics::Diagnostic::new(
                    Code::UnusedAcknowledgement,
                    at,
                    format!(
                        "`{}` is acknowledged here, but nothing here reports it",
                        ack.code
                    ),
                    "remove the acknowledgement (or correct its path)",
                )
                .at_field(&format!("acknowledge[{i}].path"));
                d.location = ack.location.map(|l| l.to_string());
                ds.push(d);
            }
            counts.push((ack, n));
        }
        covered.insert(stack.name(), counts);
    }
    covered
}

/// Where the override or patch a diagnostic is about was given, when it is about one: the
/// backends report them at the construct path they name, and the source line that made the
/// mistake is the override's, not the construct's.
fn override_location(
    stack: &Stack,
    d: &crate::diagnostics::Diagnostic,
) -> Option<&'static std::panic::Location<'static>> {
    let at = |path: &str| stack.display_path(path) == d.path;
    let names = |what: &str| d.message.contains(&format!("`{what}`"));
    match d.code {
        Code::UnknownOverrideTarget
        | Code::OverrideUnknownProperty
        | Code::OverrideWrongType
        | Code::OverrideOfValidatedProperty
        | Code::OverrideCloudFormationOnly => {
            let cloudformation = stack.overrides().iter().filter(|o| at(&o.path));
            let terraform = stack.terraform_overrides().iter().filter(|o| at(&o.path));
            // The override whose property the message names, else the first at the path.
            let mut found: Vec<(bool, Option<&'static std::panic::Location<'static>>)> =
                cloudformation
                    .map(|o| (names(&o.property), o.location))
                    .chain(terraform.map(|o| (names(&o.attribute), o.location)))
                    .collect();
            found.sort_by_key(|(named, _)| !named);
            found.first().and_then(|(_, l)| *l)
        }
        Code::UnknownTerraformOverrideTarget => stack
            .terraform_overrides()
            .iter()
            .filter(|o| at(&o.path))
            .max_by_key(|o| names(&o.attribute))
            .and_then(|o| o.location),
        Code::UnknownPatchTarget | Code::PatchFailed | Code::PatchChangesIdentity => {
            let patches: Vec<_> = stack.patches().iter().filter(|p| at(&p.path)).collect();
            // `patch N of ...` numbers the stack's patches from 1.
            let numbered = d
                .message
                .strip_prefix("patch ")
                .and_then(|r| r.split(' ').next())
                .and_then(|n| n.parse::<usize>().ok())
                .and_then(|n| stack.patches().get(n.checked_sub(1)?));
            numbered
                .or_else(|| patches.first().copied())
                .and_then(|p| p.location)
        }
        _ => None,
    }
}

/// Whether a diagnostic is about a property override or a Kubernetes patch (which the
/// backends find on what they render).
fn about_override(code: Code) -> bool {
    matches!(
        code,
        Code::UnknownOverrideTarget
            | Code::OverrideUnknownProperty
            | Code::OverrideWrongType
            | Code::OverrideOfValidatedProperty
            | Code::OverrideCloudFormationOnly
            | Code::UnknownTerraformOverrideTarget
            | Code::UnknownPatchTarget
            | Code::PatchFailed
            | Code::PatchChangesIdentity
    )
}

/// The override and patch mistakes of an app whose checks found errors (`found`), so that
/// they come with the others rather than after those are fixed. Only what passed its checks
/// is built: a stack whose structure is `sound`, and in it each construct no diagnostic names
/// (its bounds held), expanded and lowered for these mistakes alone. What else the backends
/// report may follow from the errors and is dropped, as are mistakes about the resources of
/// constructs left out.
fn override_mistakes(app: &App, found: &Diagnostics, sound: &[bool]) -> Diagnostics {
    // `path` is the construct's display path or one below it.
    let at_or_below = |path: &str, construct: &str| {
        path.strip_prefix(construct)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    let mut mistakes = Diagnostics::new();
    for (stack, _) in app.stacks().iter().zip(sound).filter(|(_, sound)| **sound) {
        if stack.overrides().is_empty()
            && stack.terraform_overrides().is_empty()
            && stack.patches().is_empty()
        {
            continue;
        }
        let left_out: Vec<String> = stack
            .nodes()
            .iter()
            .map(|n| stack.display_path(&n.id))
            .filter(|shown| found.iter().any(|d| at_or_below(&d.path, shown)))
            .collect();
        let kept = |n: &crate::app::Node| {
            let shown = stack.display_path(&n.id);
            !left_out.contains(&shown)
        };
        let tags = stack.effective_tags(app.tags());
        let graph = crate::constructs::expand_where(stack, &tags, kept);
        let input = BackendInput {
            stack,
            graph: &graph,
            tags: &tags,
            formats: Formats::all(),
        };
        let mut reported = Diagnostics::new();
        for backend in BACKENDS {
            if let Err(e) = backend.synth_stack(&input, &mut reported) {
                reported.extend(e);
            }
        }
        for d in reported {
            if about_override(d.code) && !left_out.iter().any(|c| at_or_below(&d.path, c)) {
                mistakes.push(d);
            }
        }
    }
    mistakes
}

/// Every diagnostic of `app` as the checks report them, and for each stack whether its
/// structure is sound (no structural error).
fn check(app: &App) -> (Diagnostics, Vec<bool>) {
    let mut ds = Diagnostics::new();
    let mut names = BTreeSet::new();
    let mut sound = Vec::new();
    for stack in app.stacks() {
        if !names.insert(stack.name()) {
            ds.report(
                Code::InvalidStackName,
                stack.name(),
                format!("two stacks are named `{}`", stack.name()),
                "stack names prefix CloudFormation stack names and artifact folders; make them unique",
            );
        }
        let mut structure = Diagnostics::new();
        stack.validate_structure(app.tags(), &mut structure);
        sound.push(!structure.has_errors());
        ds.extend(structure);
        for placed in Placements::new(stack).all() {
            placed.construct.validate(&placed.cx, &mut ds);
        }
    }
    crate::validate::app(app, &mut ds);
    (ds, sound)
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
    /// One `RUNBOOK.md` per stack. Written only when hyperforge is built with the `runbook`
    /// feature (a default one); without it no runbook is written and the manifest lists none.
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

    /// Every format a rule checks: all but the runbook, which is prose and commands rendered
    /// from the manifest (what `validate` synthesizes).
    pub fn checked() -> Self {
        Format::ALL
            .into_iter()
            .filter(|f| *f != Format::Runbook)
            .collect()
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
    synthesize_timed(app, options).map(|(assembly, _)| assembly)
}

/// Time spent in each phase of synthesis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SynthTimings {
    /// Structural checks, every construct's rules, the cross-construct rules, locating
    /// diagnostics.
    pub validation: Duration,
    /// Expanding constructs into resources and checking their references.
    pub expansion: Duration,
    /// Lowering resources into each format's documents (backends, less serialization).
    pub lowering: Duration,
    /// Rendering documents to text: JSON and YAML.
    pub serialization: Duration,
    /// Building and rendering the runbook.
    pub runbook: Duration,
    /// The stacks synthesized.
    pub stacks: u64,
}

impl SynthTimings {
    /// Adds `other`'s times and stacks to these.
    pub fn add(&mut self, other: &SynthTimings) {
        self.validation += other.validation;
        self.expansion += other.expansion;
        self.lowering += other.lowering;
        self.serialization += other.serialization;
        self.runbook += other.runbook;
        self.stacks += other.stacks;
    }

    /// The sum of the phases.
    pub fn total(&self) -> Duration {
        self.validation + self.expansion + self.lowering + self.serialization + self.runbook
    }
}

thread_local! {
    /// Serialization time on this thread, read around each backend.
    static SERIALIZING: std::cell::Cell<Duration> = const { std::cell::Cell::new(Duration::ZERO) };
}

/// Runs `render` (turning a document into text), counting its time as serialization.
pub(crate) fn serializing<T>(render: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = render();
    let spent = start.elapsed();
    SERIALIZING.with(|s| s.set(s.get() + spent));
    out
}

/// [`synthesize_with`], also returning the time spent in each phase.
pub fn synthesize_timed(
    app: &App,
    options: &SynthOptions,
) -> Result<(Assembly, SynthTimings), Diagnostics> {
    let mut timings = SynthTimings::default();
    let start = Instant::now();
    let (mut ds, sound) = check(app);
    if ds.has_errors() {
        let mistakes = override_mistakes(app, &ds, &sound);
        ds.extend(mistakes);
        settle(app, &mut ds);
        return Err(ds);
    }
    timings.validation += start.elapsed();
    let mut files = BTreeMap::new();
    let mut stacks = Vec::new();
    let mut errors = Diagnostics::new();
    let mut shared = BTreeMap::new();
    for (stack, outcome) in app
        .stacks()
        .iter()
        .zip(synthesize_stacks(app, options.formats))
    {
        timings.add(&outcome.timings);
        ds.extend(outcome.notes);
        // Stacks sharing a cluster are compared in the app's order.
        let mut clashes = Diagnostics::new();
        compare_shared_cluster_objects(stack.name(), outcome.shared, &mut shared, &mut clashes);
        match outcome.manifest {
            Ok(manifest) if !clashes.has_errors() => {
                files.extend(outcome.files);
                stacks.push(manifest);
            }
            Ok(_) => errors.extend(clashes),
            Err(e) => {
                errors.extend(clashes);
                errors.extend(e);
            }
        }
    }
    ds.extend(errors);
    let start = Instant::now();
    let covered = settle(app, &mut ds);
    timings.validation += start.elapsed();
    if ds.has_errors() || (options.deny_warnings && ds.has_warnings()) {
        return Err(ds);
    }
    for manifest in &mut stacks {
        manifest.acknowledged = covered
            .get(manifest.name.as_str())
            .into_iter()
            .flatten()
            .map(|(ack, n)| AcknowledgedManifest {
                code: ack.code.id().to_owned(),
                path: ack.path.clone(),
                reason: ack.reason.clone(),
                diagnostics: *n,
            })
            .collect();
    }
    if options.formats != Formats::all() {
        filter_formats(&mut files, &mut stacks, options.formats);
    }
    let start = Instant::now();
    let assembly = Assembly::new(files, Manifest::new(stacks), ds);
    timings.serialization += start.elapsed();
    Ok((assembly, timings))
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

/// What a backend lowers: one stack, its resource graph (every construct expanded once) and
/// the tags its taggable resources carry.
#[derive(Clone, Copy, Debug)]
pub struct BackendInput<'a> {
    /// The stack.
    pub stack: &'a Stack,
    /// Its resources.
    pub graph: &'a ResourceGraph,
    /// App and stack tags, merged.
    pub tags: &'a Tags,
    /// The formats written (a backend may warn only about what is written).
    pub formats: Formats,
}

impl BackendInput<'_> {
    /// The artifact path prefix of stage `index`: `<stack>/<NN>-<stage>`.
    pub fn stage_base(&self, index: usize) -> String {
        let name = self
            .stack
            .stages()
            .get(index)
            .map_or("", |s| s.name.as_str());
        format!("{}/{:02}-{name}", self.stack.name(), index + 1)
    }
}

/// What a backend wrote for one stack.
#[derive(Clone, Debug, Default)]
pub struct BackendOutput {
    /// Files, by path relative to the assembly's root.
    pub files: Vec<(String, Vec<u8>)>,
    /// The manifest entries of the stages this backend deploys, by stage.
    pub stages: BTreeMap<StageId, StageManifest>,
    /// Artifacts of the whole stack, filed under the manifest's `terraform` entry (only the
    /// Terraform root module is stack-wide today).
    pub stack_artifacts: Vec<Artifact>,
}

/// A backend: lowers a stack's resources (and its stages' payloads) into the artifacts of one
/// output format. Backends know nothing of each other or of constructs.
pub trait Backend {
    /// Lowers one stack; problems found on the rendered artifacts (template limits) that do not
    /// stop synthesis go to `ds`.
    fn synth_stack(
        &self,
        input: &BackendInput<'_>,
        ds: &mut Diagnostics,
    ) -> Result<BackendOutput, Diagnostics>;
}

/// The backends, in the order their artifacts are produced. Every stage's manifest entry comes
/// from exactly one of them.
const BACKENDS: &[&dyn Backend] = &[
    &cloudformation::CloudFormation,
    &stages::StagePayloads,
    &kubernetes::Kubernetes,
    &terraform::Terraform,
];

/// `HF0383`: a Pod Identity association on an imported EKS cluster not stated to run the Pod
/// Identity agent add-on (the role would never reach the pods), once per construct.
fn check_pod_identity_agent(
    stack: &Stack,
    graph: &crate::resources::ResourceGraph,
    ds: &mut Diagnostics,
) {
    use crate::constructs::ClusterAddOn;
    use crate::resources::ResourceKind;
    let agent = ClusterAddOn::PodIdentityAgent;
    let placements = crate::constructs::Placements::new(stack);
    // Imported clusters without the agent stated: (resource path, name).
    let without: Vec<(String, String)> = placements
        .all()
        .filter_map(|p| p.facts().eks_cluster)
        .filter(|c| c.imported && !c.runs.contains(&agent))
        .map(|c| (c.resource_path, c.name))
        .collect();
    let mut reported = std::collections::BTreeSet::new();
    for r in &graph.resources {
        let ResourceKind::PodIdentityAssociation(a) = &r.kind else {
            continue;
        };
        let Some((_, name)) = without.iter().find(|(path, _)| *path == a.cluster.path) else {
            continue;
        };
        let construct = r.path.split('/').next().unwrap_or(&r.path);
        if !reported.insert(construct.to_owned()) {
            continue;
        }
        ds.report(
            Code::ImportedClusterPrerequisite,
            stack.display_path(construct),
            format!(
                "gives service account {}/{} a role through a Pod Identity association on the imported cluster `{name}`, which is not stated to run {}",
                a.namespace,
                a.service_account,
                agent.describe()
            ),
            format!(
                "check it (`aws eks describe-addon --region {} --cluster-name {name} --addon-name eks-pod-identity-agent`) and state it: `{}`",
                stack.region(),
                agent.stated()
            ),
        );
    }
}

/// An object a stack creates that its EKS cluster holds once (a Pod Identity association; a
/// Kubernetes object other than a namespace), for `HF0016`.
struct SharedObject {
    /// What it is, with its cluster and region (the key two stacks collide on).
    key: String,
    /// The display path of the resource creating it.
    here: String,
    /// Whether the stack imports the cluster (rather than creating it).
    imported: bool,
}

/// The objects `stack` creates that its EKS cluster holds once, in graph order.
fn shared_cluster_objects(
    stack: &Stack,
    graph: &crate::resources::ResourceGraph,
) -> Vec<SharedObject> {
    use crate::app::Attr;
    use crate::resources::ResourceKind;
    // A cluster's name, and whether the stack imports it (rather than creating it).
    let cluster_of = |r: &crate::resources::Resource| match &r.kind {
        ResourceKind::EksCluster(c) => Some((c.name.clone(), false)),
        ResourceKind::Existing(e) if e.kind == crate::app::Kind::EksCluster => {
            Some((e.value(Attr::Name)?.as_literal()?, true))
        }
        _ => None,
    };
    let cluster_name = |path: &str| {
        graph
            .resources
            .iter()
            .find(|r| r.path == path)
            .and_then(cluster_of)
    };
    // The stack's one EKS cluster, which its Kubernetes stages target.
    let clusters: Vec<(String, bool)> = graph.resources.iter().filter_map(cluster_of).collect();
    let kube_cluster = match clusters.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    };
    let region = stack.region();
    let mut out = Vec::new();
    for r in &graph.resources {
        let key = match &r.kind {
            ResourceKind::PodIdentityAssociation(a) => {
                cluster_name(&a.cluster.path).map(|(c, imported)| {
                    (
                        format!(
                            "the EKS Pod Identity association of service account {}/{} in cluster `{c}` ({region})",
                            a.namespace, a.service_account
                        ),
                        imported,
                    )
                })
            }
            ResourceKind::KubeObject(o) if o.kind() != "Namespace" => {
                kube_cluster.as_ref().map(|(c, imported)| {
                    (
                        format!(
                            "the {} `{}{}` in cluster `{c}` ({region})",
                            o.kind(),
                            o.namespace().map(|n| format!("{n}/")).unwrap_or_default(),
                            o.name()
                        ),
                        *imported,
                    )
                })
            }
            _ => None,
        };
        if let Some((key, imported)) = key {
            out.push(SharedObject {
                key,
                here: stack.display_path(&r.path),
                imported,
            });
        }
    }
    out
}

/// `HF0016`: `objects` of stack `stack_name` against `seen`, keyed by region, cluster and
/// identity, with the display path of the first stack creating each and whether that stack
/// imports the cluster: a second stack creating one on a cluster either imports is reported at
/// its resource, naming the first.
fn compare_shared_cluster_objects(
    stack_name: &str,
    objects: Vec<SharedObject>,
    seen: &mut BTreeMap<String, (String, bool)>,
    ds: &mut Diagnostics,
) {
    for SharedObject {
        key,
        here,
        imported,
    } in objects
    {
        match seen.get(&key) {
            // Within one stack, the stack's own checks speak. Two stacks each creating a
            // cluster of one name describe two clusters (one of which EKS refuses), not one
            // shared: the objects are compared when at least one side imports the cluster.
            Some((first, first_imported))
                if !first.starts_with(&format!("{stack_name}/"))
                    && (imported || *first_imported) =>
            {
                ds.report(
                    Code::SharedClusterObject,
                    here,
                    format!("creates {key}, which `{first}` creates too"),
                    "give one of them names of its own (the weights stager: `ModelStore::stager`), or let one stack create what both use",
                )
            }
            Some(_) => {}
            None => {
                seen.insert(key, (here, imported));
            }
        }
    }
}

/// What synthesizing one stack gives, before the stacks are compared with each other.
struct StackOutcome {
    /// Its files.
    files: BTreeMap<String, Vec<u8>>,
    /// What the backends found without failing (template limits).
    notes: Diagnostics,
    /// Its phases' times.
    timings: SynthTimings,
    /// The objects its cluster holds once (`HF0016`).
    shared: Vec<SharedObject>,
    /// Its manifest entry, or its errors.
    manifest: Result<StackManifest, Diagnostics>,
}

/// Synthesizes every stack of `app`, on up to the machine's cores when there are several, and
/// returns their outcomes in the app's order (so the output does not depend on the schedule).
fn synthesize_stacks(app: &App, formats: Formats) -> Vec<StackOutcome> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let stacks = app.stacks();
    let one = |stack: &Stack| {
        let mut files = BTreeMap::new();
        let mut notes = Diagnostics::new();
        let mut timings = SynthTimings::default();
        let mut shared = Vec::new();
        let manifest = synthesize_stack(
            app,
            stack,
            formats,
            &mut files,
            &mut notes,
            &mut timings,
            &mut shared,
        );
        StackOutcome {
            files,
            notes,
            timings,
            shared,
            manifest,
        }
    };
    let workers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(stacks.len());
    if workers <= 1 {
        return stacks.iter().map(one).collect();
    }
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, StackOutcome)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(stack) = stacks.get(i) else {
                            break;
                        };
                        mine.push((i, one(stack)));
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, o)| o).collect()
}

/// Lowers one stack into `files`; diagnostics found on the rendered artifacts (template
/// limits) go to `ds`.
fn synthesize_stack(
    app: &App,
    stack: &Stack,
    formats: Formats,
    files: &mut BTreeMap<String, Vec<u8>>,
    ds: &mut Diagnostics,
    timings: &mut SynthTimings,
    shared: &mut Vec<SharedObject>,
) -> Result<StackManifest, Diagnostics> {
    timings.stacks += 1;
    let start = Instant::now();
    let tags = stack.effective_tags(app.tags());
    let graph = crate::constructs::expand(stack, &tags);
    let mut problems = Diagnostics::new();
    graph.check_references(stack, &mut problems);
    graph.check_stages(stack, &mut problems);
    *shared = shared_cluster_objects(stack, &graph);
    check_pod_identity_agent(stack, &graph, &mut problems);
    timings.expansion += start.elapsed();
    if problems.has_errors() {
        return Err(problems);
    }
    let start = Instant::now();
    let serialized_before = SERIALIZING.with(std::cell::Cell::get);
    let input = BackendInput {
        stack,
        graph: &graph,
        tags: &tags,
        formats,
    };
    let mut entries = BTreeMap::new();
    let mut stack_artifacts = Vec::new();
    // Every backend runs, so that the errors of all of them (a CloudFormation override, a
    // Kubernetes patch) are reported at once.
    let mut failed = Diagnostics::new();
    for backend in BACKENDS {
        match backend.synth_stack(&input, ds) {
            Ok(out) => {
                files.extend(out.files);
                entries.extend(out.stages);
                stack_artifacts.extend(out.stack_artifacts);
            }
            Err(e) => failed.extend(e),
        }
    }
    let serialized = SERIALIZING
        .with(std::cell::Cell::get)
        .saturating_sub(serialized_before);
    timings.serialization += serialized;
    timings.lowering += start.elapsed().saturating_sub(serialized);
    if failed.has_errors() {
        return Err(failed);
    }
    let eks = Placements::new(stack)
        .all()
        .find_map(|p| p.facts().eks_cluster);
    plan::lower_steps(
        stack,
        &graph,
        eks.as_ref().map(|c| c.name.as_str()),
        &mut entries,
    );
    let stages = (0..stack.stages().len())
        .filter_map(|index| entries.remove(&StageId::from_index(index)))
        .collect();
    let admin_host = eks
        .as_ref()
        .and_then(|c| c.admin_host.clone())
        .map(|name_tag| AdminHostManifest {
            name_tag,
            local_port: ADMIN_TUNNEL_LOCAL_PORT,
        });
    let mut manifest = StackManifest {
        name: stack.name().to_owned(),
        region: stack.region().to_owned(),
        eks_cluster: eks.map(|c| c.name),
        admin_host,
        inputs: plan::lower_inputs(stack, &graph),
        inventory: inventory::lower_inventory(stack),
        stages,
        terraform: None,
        runbook: None,
        acknowledged: Vec::new(),
    };
    if !stack_artifacts.is_empty() {
        manifest.terraform = Some(ArtifactList {
            artifacts: stack_artifacts,
        });
    }
    // The runbook is rendered only when it is written (its template is the costliest part of
    // a run that writes nothing else of it).
    #[cfg(feature = "runbook")]
    if formats.contains(Format::Runbook) {
        let start = Instant::now();
        let runbook = crate::runbook::render(&manifest).map_err(|e| {
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
        timings.runbook += start.elapsed();
    }
    Ok(manifest)
}

/// A YAML rendering failure of `stack`'s artifacts, as a diagnostic.
pub(crate) fn yaml_error(stack: &Stack) -> impl Fn(serde_yaml::Error) -> Diagnostics + '_ {
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
