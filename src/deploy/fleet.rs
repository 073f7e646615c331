//! Deploying a fleet's StackSets (`hyperforge deploy --fleet`) from the fleet's output
//! directory alone: `fleet.json` ([`FleetManifest`]) and the files it lists.
//!
//! For each StackSet in order ([`deploy_fleet`]): the StackSet is created, or updated when its
//! template differs from the deployed one; then each member's stack instance is created when
//! missing and updated when its `ParameterOverrides` differ (or it is `OUTDATED`), one
//! operation per group of members sharing a region and identical overrides, with the fleet's
//! operation preferences and `CallAs`. StackSets run one operation at a time: each is followed
//! to its end, every account and region's status printed as it changes, and a failed or
//! stopped operation stops the deploy (later StackSets import the earlier ones' exports).
//!
//! The members' other stages (Helm, Kubernetes, s3-upload, and CloudFormation stages deployed
//! per member) are not run: at the end the deploy prints, member by member, the stages that
//! remain and the stack instance whose outputs stand for each StackSet stage's
//! `<member>-<stage>` stack.
//!
//! The decisions (which instance of the fleet a deployed instance is, what changed, how
//! instances group into calls) are plain functions, tested without AWS.

use super::aws::{
    Clients, DeployedInstance, NewStackSet, OperationResult, StackSetCall, TemplateSource,
};
use super::console::{Console, Prompt};
use super::error::DeployError;
use super::manifest::{read_versioned, unsupported_version, AssemblyDir};
use super::run::template_url;
use super::DeployOptions;
use crate::assembly::fleet::{FleetManifest, StackInstanceManifest, StackSetManifest, Target};
use crate::assembly::is_contained;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A fleet's output directory on disk: its root and its checked `fleet.json`.
#[derive(Clone, Debug)]
pub struct FleetDir {
    root: PathBuf,
    manifest: FleetManifest,
}

impl FleetDir {
    /// Reads `<root>/fleet.json` and checks it: a supported version, every StackSet template
    /// and every member's `manifest.json` a file inside `root`, every instance a member's.
    pub fn load(root: &Path) -> Result<FleetDir, DeployError> {
        let (path, parsed) =
            read_versioned(root, "fleet.json", FleetManifest::VERSION, "fleet manifest")?;
        parsed
            .and_then(|manifest| Self::from_manifest(root, manifest))
            .map_err(|message| DeployError::FleetManifest { path, message })
    }

    /// Checks a fleet manifest whose paths are relative to `root`.
    pub fn from_manifest(root: &Path, manifest: FleetManifest) -> Result<FleetDir, String> {
        if manifest.version != FleetManifest::VERSION {
            return Err(unsupported_version(FleetManifest::VERSION));
        }
        let file_inside = |what: &str, rel: &str| {
            if !is_contained(rel) {
                return Err(format!(
                    "{what} `{rel}` is not a relative path inside the fleet's directory"
                ));
            }
            if !root.join(rel).is_file() {
                return Err(format!("{what} `{rel}` does not exist"));
            }
            Ok(())
        };
        let mut members = BTreeSet::new();
        for member in &manifest.members {
            if !members.insert(member.name.as_str()) {
                return Err(format!("member `{}` is listed twice", member.name));
            }
            file_inside(
                &format!("the assembly of member `{}`", member.name),
                &format!("{}/manifest.json", member.assembly),
            )?;
        }
        let mut names = BTreeSet::new();
        for set in &manifest.stack_sets {
            if !names.insert(set.name.as_str()) {
                return Err(format!("StackSet `{}` is listed twice", set.name));
            }
            file_inside(
                &format!("the template of StackSet `{}`", set.name),
                &set.template,
            )?;
            for instance in &set.instances {
                if !members.contains(instance.member.as_str()) {
                    return Err(format!(
                        "StackSet `{}` has an instance for `{}`, which is not a member",
                        set.name, instance.member
                    ));
                }
            }
        }
        if let Some(template) = &manifest.stack_sets_template {
            file_inside("the StackSets template", template)?;
        }
        Ok(FleetDir {
            root: root.to_path_buf(),
            manifest,
        })
    }

    /// The fleet's output directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The fleet's manifest.
    pub fn manifest(&self) -> &FleetManifest {
        &self.manifest
    }

    /// The StackSets to deploy: all, or the one named.
    pub fn stack_sets(&self, only: Option<&str>) -> Result<Vec<&StackSetManifest>, DeployError> {
        let sets = &self.manifest.stack_sets;
        match only {
            None => Ok(sets.iter().collect()),
            Some(name) => match sets.iter().find(|s| s.name == name) {
                Some(set) => Ok(vec![set]),
                None => Err(DeployError::UnknownStackSet {
                    name: name.to_owned(),
                    available: sets
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                }),
            },
        }
    }
}

/// What a deploy does to a StackSet or a stack instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Change {
    /// It does not exist: created.
    Create,
    /// It differs: updated.
    Update,
    /// It is as the fleet describes it.
    Unchanged,
}

/// One member's stack instance of a StackSet: what it needs and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstancePlan {
    /// The member.
    pub member: String,
    /// Its region.
    pub region: String,
    /// Its target.
    pub target: Target,
    /// What it needs.
    pub change: Change,
    /// Why it is updated (the overrides that differ, or its status).
    pub why: Option<String>,
    /// Its `ParameterOverrides`.
    pub overrides: BTreeMap<String, String>,
}

/// The deployed instance that is `instance`'s: the same account and region, or, for an
/// organizational unit, any instance deployed for that unit in that region.
pub fn find_instance<'a>(
    instance: &StackInstanceManifest,
    deployed: &'a [DeployedInstance],
) -> Option<&'a DeployedInstance> {
    deployed.iter().find(|d| {
        d.region == instance.region
            && match &instance.target {
                Target::Account(id) => &d.account == id,
                Target::OrganizationalUnit(id) => d.organizational_unit.as_deref() == Some(id),
            }
    })
}

/// What an existing instance needs: an update when its overrides differ from the fleet's
/// (each difference named) or when it is `OUTDATED` (its last operation failed or did not
/// reach it); `None` when it is current and the same.
pub fn instance_update(
    wanted: &BTreeMap<String, String>,
    deployed: &BTreeMap<String, String>,
    status: &str,
) -> Option<String> {
    let keys: BTreeSet<&String> = wanted.keys().chain(deployed.keys()).collect();
    let differences: Vec<String> = keys
        .into_iter()
        .filter_map(|k| match (deployed.get(k), wanted.get(k)) {
            (Some(a), Some(b)) if a == b => None,
            (Some(a), Some(b)) => Some(format!("{k}: {a} -> {b}")),
            (None, Some(b)) => Some(format!("{k}: (none) -> {b}")),
            (Some(a), None) => Some(format!("{k}: {a} -> (none)")),
            (None, None) => None,
        })
        .collect();
    if !differences.is_empty() {
        return Some(differences.join(", "));
    }
    (status == "OUTDATED").then(|| {
        "the instance is OUTDATED (its last operation failed or did not reach it)".to_owned()
    })
}

/// One `CreateStackInstances` or `UpdateStackInstances` call: targets in regions sharing
/// overrides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceCall {
    /// Update (`true`) or create.
    pub update: bool,
    /// The accounts or organizational units.
    pub targets: Vec<Target>,
    /// The regions.
    pub regions: Vec<String>,
    /// The `ParameterOverrides` every instance of the call takes.
    pub overrides: BTreeMap<String, String>,
    /// The members the call deploys.
    pub members: Vec<String>,
}

/// The calls that bring the instances to the fleet's: creates first, then updates; within
/// each, members of one region with identical overrides (and the same kind of target) share
/// a call, in the fleet's order.
pub fn group_calls(plans: &[InstancePlan]) -> Vec<InstanceCall> {
    let mut calls: Vec<InstanceCall> = Vec::new();
    for change in [Change::Create, Change::Update] {
        let start = calls.len();
        for plan in plans.iter().filter(|p| p.change == change) {
            let same_kind = |t: &Target| {
                matches!(
                    (t, &plan.target),
                    (Target::Account(_), Target::Account(_))
                        | (Target::OrganizationalUnit(_), Target::OrganizationalUnit(_))
                )
            };
            let existing = calls[start..].iter_mut().find(|c| {
                c.regions == [plan.region.clone()]
                    && c.overrides == plan.overrides
                    && c.targets.first().is_some_and(same_kind)
            });
            match existing {
                Some(call) => {
                    if !call.targets.contains(&plan.target) {
                        call.targets.push(plan.target.clone());
                    }
                    call.members.push(plan.member.clone());
                }
                None => calls.push(InstanceCall {
                    update: change == Change::Update,
                    targets: vec![plan.target.clone()],
                    regions: vec![plan.region.clone()],
                    overrides: plan.overrides.clone(),
                    members: vec![plan.member.clone()],
                }),
            }
        }
    }
    calls
}

/// Whether the deployed template is the local one: equal as JSON values (the service may
/// reformat), or as text when either is not JSON.
pub fn same_template(deployed: &str, local: &[u8]) -> bool {
    match (
        serde_json::from_str::<Value>(deployed),
        serde_json::from_slice::<Value>(local),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => deployed.trim() == String::from_utf8_lossy(local).trim(),
    }
}

/// What `--fleet` does beyond the [`DeployOptions`].
#[derive(Clone, Debug, Default)]
pub struct FleetDeployOptions {
    /// Prefix of the template keys in [`DeployOptions::template_bucket`] (`--template-prefix`);
    /// a template is put at `<prefix><file name>`.
    pub template_prefix: String,
    /// Deploy only this StackSet (`--stack-set`).
    pub stack_set: Option<String>,
    /// Print what would be created and updated without changing anything (`--dry-run`).
    pub dry_run: bool,
}

/// What happened to one StackSet and its instances.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackSetReport {
    /// The StackSet.
    pub name: String,
    /// The stage it deploys.
    pub stage: String,
    /// What the StackSet itself needed.
    pub stack_set: Change,
    /// What each member's instance needed.
    pub instances: Vec<InstancePlan>,
    /// The operations run, in order.
    pub operations: Vec<String>,
    /// Instances that failed in operations that still succeeded (within the failure
    /// tolerance).
    pub failed: Vec<OperationResult>,
    /// Whether the changes were made (false on a dry run or when declined).
    pub applied: bool,
    /// Each member's instance stack (its id), once it exists.
    pub stacks: BTreeMap<String, String>,
}

/// What remains for one member after the StackSets: its other stages, run with the
/// member's own assembly, reading the StackSet stages' outputs from the instance stacks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberRemaining {
    /// The member.
    pub member: String,
    /// Its region.
    pub region: String,
    /// Its target.
    pub target: Target,
    /// Its assembly's directory, relative to the fleet's.
    pub assembly: String,
    /// Its stack's name in that assembly.
    pub stack: String,
    /// The stages no StackSet deploys, in order (each with its kind).
    pub stages: Vec<(String, String)>,
    /// `(stage, its member stack name, instance stack id)` of each StackSet stage deployed.
    pub instance_stacks: Vec<(String, String, String)>,
}

/// What a fleet deploy did.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FleetReport {
    /// The fleet.
    pub fleet: String,
    /// The region the StackSets live in.
    pub region: String,
    /// The StackSets processed, in order.
    pub stack_sets: Vec<StackSetReport>,
    /// The user declined a StackSet's changes; the deploy stopped there.
    pub declined: bool,
    /// What remains, member by member (empty when declined).
    pub remaining: Vec<MemberRemaining>,
}

impl FleetReport {
    /// The report of StackSet `name`.
    pub fn stack_set(&self, name: &str) -> Option<&StackSetReport> {
        self.stack_sets.iter().find(|s| s.name == name)
    }
}

struct FleetRun<'a> {
    clients: Clients,
    fleet: &'a FleetDir,
    options: &'a DeployOptions,
    fleet_options: &'a FleetDeployOptions,
    console: &'a Console,
    prompt: &'a mut dyn Prompt,
    call: StackSetCall,
}

/// Deploys the fleet's StackSets in order (or the one of [`FleetDeployOptions::stack_set`]),
/// then prints what remains for each member. The StackSets live in
/// [`AwsSettings::region`](super::AwsSettings::region), by default the first member's region.
pub async fn deploy_fleet(
    fleet: &FleetDir,
    options: &DeployOptions,
    fleet_options: &FleetDeployOptions,
    console: &Console,
    prompt: &mut dyn Prompt,
) -> Result<FleetReport, DeployError> {
    let m = fleet.manifest();
    let sets = fleet.stack_sets(fleet_options.stack_set.as_deref())?;
    let default_region = m
        .members
        .first()
        .map(|member| member.region.as_str())
        .unwrap_or("us-east-1");
    let clients = Clients::connect(&options.aws, default_region).await;
    console.line(&format!(
        "{} fleet `{}`: {} StackSet(s) in {} ({}, {} member(s))",
        if fleet_options.dry_run {
            "Planning"
        } else {
            "Deploying"
        },
        m.name,
        sets.len(),
        clients.region,
        m.permission_model.api_name(),
        m.members.len()
    ));
    let mut run = FleetRun {
        clients,
        fleet,
        options,
        fleet_options,
        console,
        prompt,
        call: StackSetCall {
            call_as: m.permission_model.call_as().to_owned(),
            preferences: m.preferences.clone(),
        },
    };
    let mut report = FleetReport {
        fleet: m.name.clone(),
        region: run.clients.region.clone(),
        ..FleetReport::default()
    };
    let total = sets.len();
    for (i, set) in sets.into_iter().enumerate() {
        console.line(&format!(
            "\n[{}/{total}] StackSet `{}` (stage `{}`, {} instance(s))",
            i + 1,
            set.name,
            set.stage,
            set.instances.len()
        ));
        let set_report = run.stack_set(set).await?;
        let declined = !set_report.applied && !fleet_options.dry_run && has_changes(&set_report);
        report.stack_sets.push(set_report);
        if declined {
            report.declined = true;
            return Ok(report);
        }
    }
    report.remaining = remaining(fleet, &report)?;
    print_remaining(console, &report, fleet_options.dry_run);
    Ok(report)
}

fn has_changes(report: &StackSetReport) -> bool {
    report.stack_set != Change::Unchanged
        || report
            .instances
            .iter()
            .any(|i| i.change != Change::Unchanged)
}

fn operation_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("hyperforge-{nanos}")
}

fn target_text(target: &Target) -> String {
    match target {
        Target::Account(id) => format!("account {id}"),
        Target::OrganizationalUnit(id) => format!("OU {id}"),
    }
}

impl FleetRun<'_> {
    fn call_as(&self) -> &str {
        &self.call.call_as
    }

    async fn stack_set(&mut self, set: &StackSetManifest) -> Result<StackSetReport, DeployError> {
        let m = self.fleet.manifest();
        let path = self.fleet.root().join(&set.template);
        let body = std::fs::read(&path).map_err(|source| DeployError::Io { path, source })?;
        let deployed = self
            .clients
            .describe_stack_set(&set.name, self.call_as())
            .await?;
        if let Some(info) = &deployed {
            if !info.permission_model.is_empty()
                && info.permission_model != m.permission_model.api_name()
            {
                return Err(DeployError::NeedsAttention {
                    stack_name: set.name.clone(),
                    status: info.status.clone(),
                    advice: format!(
                        "the StackSet's permission model is {}, the fleet's is {}; a StackSet's permission model cannot change: delete the StackSet or rename the fleet",
                        info.permission_model,
                        m.permission_model.api_name()
                    ),
                });
            }
            if !self.fleet_options.dry_run {
                self.wait_running(&set.name).await?;
            }
        }
        let set_change = match &deployed {
            None => Change::Create,
            Some(info) if same_template(&info.template_body, &body) => Change::Unchanged,
            Some(_) => Change::Update,
        };
        let listed = match deployed {
            Some(_) => {
                self.clients
                    .list_stack_instances(&set.name, self.call_as())
                    .await?
            }
            None => Vec::new(),
        };
        let mut plans = Vec::new();
        for instance in &set.instances {
            let (change, why) = match find_instance(instance, &listed) {
                None => (Change::Create, None),
                Some(d) => {
                    let current = self
                        .clients
                        .instance_overrides(&set.name, &d.account, &d.region, self.call_as())
                        .await?;
                    match instance_update(&instance.parameter_overrides, &current, &d.status) {
                        Some(why) => (Change::Update, Some(why)),
                        None => (Change::Unchanged, None),
                    }
                }
            };
            plans.push(InstancePlan {
                member: instance.member.clone(),
                region: instance.region.clone(),
                target: instance.target.clone(),
                change,
                why,
                overrides: instance.parameter_overrides.clone(),
            });
        }
        self.print_plan(set, set_change, &plans, &listed);
        let mut report = StackSetReport {
            name: set.name.clone(),
            stage: set.stage.clone(),
            stack_set: set_change,
            instances: plans,
            operations: Vec::new(),
            failed: Vec::new(),
            applied: false,
            stacks: stacks_of(set, &listed),
        };
        if !has_changes(&report) {
            self.console.line(&format!("`{}`: no changes", set.name));
            report.applied = true;
            return Ok(report);
        }
        if self.fleet_options.dry_run {
            return Ok(report);
        }
        if !self.confirm(&format!("Apply these changes to StackSet `{}`?", set.name))? {
            self.console.line("Not deployed; nothing was changed.");
            return Ok(report);
        }
        let description = format!(
            "Fleet {}: stage {} of every member (generated by hyperforge).",
            m.name, set.stage
        );
        let new = NewStackSet {
            name: &set.name,
            description: &description,
            permission_model: &m.permission_model,
            capabilities: &set.capabilities,
            parameters: &set.parameters,
        };
        match set_change {
            Change::Create => {
                let source = self.template_source(set, &body).await?;
                self.clients
                    .create_stack_set(&new, &source, &self.call)
                    .await?;
                self.console
                    .line(&format!("  created StackSet `{}`", set.name));
            }
            Change::Update => {
                let source = self.template_source(set, &body).await?;
                let id = self
                    .clients
                    .update_stack_set(&new, &source, &self.call, &operation_id())
                    .await?;
                self.console.line(&format!(
                    "  updating the template of `{}` (operation {id})",
                    set.name
                ));
                let failed = self.wait_operation(set, &id, "update the template").await?;
                report.operations.push(id);
                report.failed.extend(failed);
            }
            Change::Unchanged => {}
        }
        for call in group_calls(&report.instances) {
            let verb = if call.update { "update" } else { "create" };
            let id = self
                .clients
                .stack_instances(
                    &set.name,
                    call.update,
                    &call.targets,
                    &call.regions,
                    &call.overrides,
                    &self.call,
                    &operation_id(),
                )
                .await?;
            self.console.line(&format!(
                "  {verb} instance(s) of {} (operation {id})",
                call.members.join(", ")
            ));
            let failed = self
                .wait_operation(set, &id, &format!("{verb} instances"))
                .await?;
            report.operations.push(id);
            report.failed.extend(failed);
        }
        let listed = self
            .clients
            .list_stack_instances(&set.name, self.call_as())
            .await?;
        report.stacks = stacks_of(set, &listed);
        report.applied = true;
        if report.failed.is_empty() {
            self.console.line(&format!("`{}` is deployed.", set.name));
        } else {
            self.console.line(&format!(
                "`{}` is deployed, except for these instances (within the failure tolerance):",
                set.name
            ));
            for f in &report.failed {
                self.console.line(&format!("  {}", result_text(set, f)));
            }
        }
        Ok(report)
    }

    fn confirm(&mut self, question: &str) -> Result<bool, DeployError> {
        if self.options.yes {
            return Ok(true);
        }
        self.prompt.confirm(self.console, question)
    }

    fn print_plan(
        &self,
        set: &StackSetManifest,
        change: Change,
        plans: &[InstancePlan],
        listed: &[DeployedInstance],
    ) {
        let c = self.console;
        let would = if self.fleet_options.dry_run {
            "would be"
        } else {
            "will be"
        };
        match change {
            Change::Create => c.line(&format!(
                "`{}` does not exist: it {would} created from {}",
                set.name, set.template
            )),
            Change::Update => c.line(&format!(
                "`{}`: its template differs from {}: it {would} updated (every instance)",
                set.name, set.template
            )),
            Change::Unchanged => c.line(&format!("`{}`: the template is the same", set.name)),
        }
        for p in plans {
            let (mark, text) = match p.change {
                Change::Create => ("+", format!("instance {would} created")),
                Change::Update => (
                    "~",
                    format!(
                        "instance {would} updated ({})",
                        p.why.as_deref().unwrap_or_default()
                    ),
                ),
                Change::Unchanged => ("=", "instance unchanged".to_owned()),
            };
            c.line(&format!(
                "  {mark} {} ({}, {}): {text}",
                p.member,
                target_text(&p.target),
                p.region
            ));
        }
        for d in listed {
            let ours = set.instances.iter().any(|i| {
                i.region == d.region
                    && match &i.target {
                        Target::Account(id) => id == &d.account,
                        Target::OrganizationalUnit(id) => {
                            d.organizational_unit.as_deref() == Some(id)
                        }
                    }
            });
            if !ours {
                c.line(&format!(
                    "  ! account {} {}: an instance of no member of the fleet; left as it is (aws cloudformation delete-stack-instances removes it)",
                    d.account, d.region
                ));
            }
        }
    }

    /// Inline when it fits and no bucket is named, else put at `<prefix><file>` in the
    /// template bucket.
    async fn template_source(
        &self,
        set: &StackSetManifest,
        body: &[u8],
    ) -> Result<TemplateSource, DeployError> {
        let limit = self.options.inline_template_limit;
        let Some(bucket) = &self.options.template_bucket else {
            if set.deploy_from_s3 || body.len() > limit {
                return Err(DeployError::TemplateTooLarge {
                    stack_name: set.name.clone(),
                    size: body.len(),
                    limit,
                });
            }
            return Ok(TemplateSource::Body(
                String::from_utf8_lossy(body).into_owned(),
            ));
        };
        let file = set.template.rsplit('/').next().unwrap_or(&set.template);
        let key = format!("{}{file}", self.fleet_options.template_prefix);
        self.clients.put_object(bucket, &key, body.to_vec()).await?;
        self.console.line(&format!(
            "  template ({} bytes) uploaded to s3://{bucket}/{key}",
            body.len()
        ));
        Ok(TemplateSource::Url(template_url(
            bucket,
            &self.clients.region,
            &key,
        )))
    }

    /// Waits for operations an earlier (interrupted) run left running.
    async fn wait_running(&self, name: &str) -> Result<(), DeployError> {
        for id in self
            .clients
            .running_operations(name, self.call_as())
            .await?
        {
            self.console.line(&format!(
                "`{name}`: operation {id} is still running; waiting for it first"
            ));
            let started = Instant::now();
            let mut delay = self.options.poll_interval;
            loop {
                let (status, _) = self
                    .clients
                    .stack_set_operation(name, &id, self.call_as())
                    .await?;
                if !matches!(status.as_str(), "RUNNING" | "QUEUED" | "STOPPING") {
                    break;
                }
                self.check_timeout(name, &id, started, &status)?;
                tokio::time::sleep(delay).await;
                delay = self.backoff(delay);
            }
        }
        Ok(())
    }

    fn backoff(&self, delay: Duration) -> Duration {
        (delay * 2).min(self.options.poll_interval * 6)
    }

    fn check_timeout(
        &self,
        name: &str,
        id: &str,
        started: Instant,
        status: &str,
    ) -> Result<(), DeployError> {
        if started.elapsed() > self.options.timeout {
            return Err(DeployError::Timeout {
                stack_name: format!("{name}` operation `{id}"),
                seconds: started.elapsed().as_secs(),
                status: status.to_owned(),
            });
        }
        Ok(())
    }

    /// Follows an operation to its end, printing each account and region's status as it
    /// changes. Returns the instances that failed in a succeeded operation; a failed or
    /// stopped operation is an error listing every instance that did not succeed.
    async fn wait_operation(
        &self,
        set: &StackSetManifest,
        id: &str,
        action: &str,
    ) -> Result<Vec<OperationResult>, DeployError> {
        let started = Instant::now();
        let progress = self.console.progress(&format!("{} {action}", set.name));
        let mut seen: BTreeMap<(String, String), String> = BTreeMap::new();
        let mut delay = self.options.poll_interval;
        loop {
            let (status, reason) = self
                .clients
                .stack_set_operation(&set.name, id, self.call_as())
                .await?;
            let results = self
                .clients
                .operation_results(&set.name, id, self.call_as())
                .await?;
            for r in &results {
                let key = (r.account.clone(), r.region.clone());
                if seen.get(&key) != Some(&r.status) {
                    progress.event(&format!("    {}", result_text(set, r)));
                    seen.insert(key, r.status.clone());
                }
            }
            progress.status(&status);
            let not_succeeded = || {
                results
                    .iter()
                    .filter(|r| matches!(r.status.as_str(), "FAILED" | "CANCELLED"))
                    .cloned()
                    .collect::<Vec<_>>()
            };
            match status.as_str() {
                "SUCCEEDED" => return Ok(not_succeeded()),
                "FAILED" | "STOPPED" => {
                    return Err(DeployError::StackSetOperationFailed {
                        stack_set: set.name.clone(),
                        operation: format!("{id} ({action})"),
                        outcome: match reason.filter(|r| !r.is_empty()) {
                            Some(r) => format!("{status}: {r}"),
                            None => status,
                        },
                        failures: not_succeeded()
                            .iter()
                            .map(|r| result_text(set, r))
                            .collect(),
                    })
                }
                _ => {}
            }
            self.check_timeout(&set.name, id, started, &status)?;
            tokio::time::sleep(delay).await;
            delay = self.backoff(delay);
        }
    }
}

/// `member (account region): STATUS: reason`.
fn result_text(set: &StackSetManifest, r: &OperationResult) -> String {
    let member = set
        .instances
        .iter()
        .find(|i| i.region == r.region && i.target == Target::Account(r.account.clone()))
        .map(|i| format!("{} ", i.member))
        .unwrap_or_default();
    format!(
        "{member}(account {}, {}): {}{}",
        r.account,
        r.region,
        r.status,
        r.reason
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(|s| format!(": {s}"))
            .unwrap_or_default()
    )
}

/// Each member's instance stack id, from the listed instances.
fn stacks_of(set: &StackSetManifest, listed: &[DeployedInstance]) -> BTreeMap<String, String> {
    set.instances
        .iter()
        .filter_map(|i| {
            let id = find_instance(i, listed)?.stack_id.clone()?;
            Some((i.member.clone(), id))
        })
        .collect()
}

/// Deploys one member's stages that no StackSet deploys (its Helm, Kubernetes and upload
/// stages, and CloudFormation stages deployed per member) through the single-stack path,
/// with credentials of the member's account: its StackSet stages are skipped, and a later
/// stage reading one of their outputs reads it from the member's stack instance (found with
/// `ListStackInstances` in the StackSets' region, `options.aws.region` or the first member's).
/// Every StackSet the member belongs to must have its instance.
pub async fn deploy_fleet_member(
    fleet: &FleetDir,
    member: &str,
    options: &DeployOptions,
    console: &Console,
    prompt: &mut dyn Prompt,
) -> Result<super::Report, DeployError> {
    let m = fleet.manifest();
    let Some(entry) = m.member(member) else {
        return Err(DeployError::UnknownStack {
            name: member.to_owned(),
            available: m
                .members
                .iter()
                .map(|m| m.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    let admin_region = m
        .members
        .first()
        .map_or(entry.region.as_str(), |f| f.region.as_str());
    let clients = Clients::connect(&options.aws, admin_region).await;
    let call_as = m.permission_model.call_as();
    let mut stage_stacks = BTreeMap::new();
    for set in &m.stack_sets {
        let Some(instance) = set.instances.iter().find(|i| i.member == entry.name) else {
            continue;
        };
        let listed = clients.list_stack_instances(&set.name, call_as).await?;
        let Some(stack) = find_instance(instance, &listed).and_then(|d| d.stack_id.clone()) else {
            return Err(DeployError::FleetManifest {
                path: fleet.root().join("fleet.json"),
                message: format!(
                    "member `{}` has no stack instance of StackSet `{}` yet: deploy the StackSets first (`hyperforge deploy --fleet`)",
                    entry.name, set.name
                ),
            });
        };
        console.line(&format!("{}: stage `{}` is {stack}", set.name, set.stage));
        stage_stacks.insert(set.stage.clone(), stack);
    }
    let assembly = AssemblyDir::load(&fleet.root().join(&entry.assembly))?;
    let mut options = options.clone();
    // The member's own stacks and tools work in its region, not the StackSets'.
    options.aws.region = None;
    options.stage_stacks = stage_stacks;
    super::deploy(&assembly, &entry.stack, &options, console, prompt).await
}

/// Each member's stages that no StackSet deploys, from its own assembly.
fn remaining(fleet: &FleetDir, report: &FleetReport) -> Result<Vec<MemberRemaining>, DeployError> {
    let m = fleet.manifest();
    let set_stages: BTreeSet<&str> = m.stack_sets.iter().map(|s| s.stage.as_str()).collect();
    let mut out = Vec::new();
    // Members whose descriptions are one share an assembly: each is read once.
    let mut loaded: BTreeMap<&str, AssemblyDir> = BTreeMap::new();
    for member in &m.members {
        let assembly = match loaded.entry(member.assembly.as_str()) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(AssemblyDir::load(&fleet.root().join(&member.assembly))?)
            }
        };
        let plan = assembly.stack(&member.stack)?;
        let stages = plan
            .stages
            .iter()
            .filter(|s| !set_stages.contains(s.name()))
            .map(|s| (s.name().to_owned(), s.kind().to_string()))
            .collect();
        let instance_stacks = report
            .stack_sets
            .iter()
            .filter_map(|s| {
                let id = s.stacks.get(&member.name)?;
                let name = plan.cloudformation_stack_name(&s.stage)?;
                Some((s.stage.clone(), name.to_owned(), id.clone()))
            })
            .collect();
        out.push(MemberRemaining {
            member: member.name.clone(),
            region: member.region.clone(),
            target: member.target.clone(),
            assembly: member.assembly.clone(),
            stack: member.stack.clone(),
            stages,
            instance_stacks,
        });
    }
    Ok(out)
}

fn print_remaining(console: &Console, report: &FleetReport, dry_run: bool) {
    if dry_run {
        console.line("\nDry run: nothing was changed.");
    } else {
        console.line(&format!(
            "\nThe StackSets of fleet `{}` are deployed.",
            report.fleet
        ));
    }
    if report.remaining.iter().all(|r| r.stages.is_empty()) {
        console.line("No member has stages beyond its StackSets.");
        return;
    }
    console.line(
        "StackSets deploy only the CloudFormation stages every member shares. What remains, member by member, with credentials of the member's account in its region:",
    );
    for r in &report.remaining {
        let Some((first, _)) = r.stages.first() else {
            console.line(&format!("\n`{}`: nothing remains.", r.member));
            continue;
        };
        console.line(&format!(
            "\n`{}` ({}, {}): {}",
            r.member,
            target_text(&r.target),
            r.region,
            r.stages
                .iter()
                .map(|(s, kind)| format!("{s} ({kind})"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        console.line(&format!(
            "  `hyperforge deploy --fleet --member {} --run-external`, or follow {}/{}/RUNBOOK.md from stage `{first}`, skipping the StackSet stages;",
            r.member, r.assembly, r.stack
        ));
        if r.instance_stacks.is_empty() {
            console.line("  its StackSet stages' instance stacks do not exist yet.");
        } else {
            console.line("  where it reads an output of a StackSet stage's stack, read the instance stack's instead:");
            for (stage, name, id) in &r.instance_stacks {
                console.line(&format!("    {stage}: `{name}` is {id}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<FleetManifest, String> {
        super::super::manifest::parse_versioned(text, FleetManifest::VERSION, "fleet manifest")
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn plan(member: &str, region: &str, target: Target, change: Change, v: &str) -> InstancePlan {
        InstancePlan {
            member: member.into(),
            region: region.into(),
            target,
            change,
            why: None,
            overrides: map(&[("Zone", v)]),
        }
    }

    fn deployed(account: &str, region: &str, ou: Option<&str>) -> DeployedInstance {
        DeployedInstance {
            account: account.into(),
            region: region.into(),
            organizational_unit: ou.map(str::to_owned),
            stack_id: Some(format!("arn:{account}:{region}")),
            status: "CURRENT".into(),
            status_reason: None,
        }
    }

    #[test]
    fn instances_match_by_account_or_unit_and_region() {
        let listed = [
            deployed("111122223333", "us-west-2", None),
            deployed("444455556666", "us-east-1", Some("ou-ab12-cd34ef56")),
        ];
        let instance = |region: &str, target: Target| StackInstanceManifest {
            member: "m".into(),
            region: region.into(),
            target,
            parameter_overrides: BTreeMap::new(),
        };
        let account = Target::Account("111122223333".into());
        let unit = Target::OrganizationalUnit("ou-ab12-cd34ef56".into());
        assert_eq!(
            find_instance(&instance("us-west-2", account.clone()), &listed),
            Some(&listed[0])
        );
        assert_eq!(
            find_instance(&instance("us-east-1", account), &listed),
            None
        );
        assert_eq!(
            find_instance(&instance("us-east-1", unit.clone()), &listed),
            Some(&listed[1])
        );
        assert_eq!(find_instance(&instance("us-west-2", unit), &listed), None);
    }

    #[test]
    fn an_instance_is_updated_when_its_overrides_differ_or_it_is_outdated() {
        let wanted = map(&[("A", "1"), ("B", "2")]);
        assert_eq!(instance_update(&wanted, &wanted, "CURRENT"), None);
        assert_eq!(
            instance_update(
                &wanted,
                &map(&[("A", "1"), ("B", "3"), ("C", "x")]),
                "CURRENT"
            )
            .as_deref(),
            Some("B: 3 -> 2, C: x -> (none)")
        );
        assert_eq!(
            instance_update(&wanted, &map(&[("A", "1")]), "CURRENT").as_deref(),
            Some("B: (none) -> 2")
        );
        assert!(
            instance_update(&wanted, &wanted, "OUTDATED").is_some_and(|w| w.contains("OUTDATED"))
        );
    }

    #[test]
    fn calls_group_members_of_a_region_with_the_same_overrides() {
        let a = |id: &str| Target::Account(id.into());
        let plans = [
            plan("m1", "us-west-2", a("111111111111"), Change::Update, "z1"),
            plan("m2", "us-west-2", a("222222222222"), Change::Create, "z1"),
            plan("m3", "us-west-2", a("333333333333"), Change::Create, "z1"),
            plan("m4", "us-east-1", a("111111111111"), Change::Create, "z1"),
            plan("m5", "us-west-2", a("444444444444"), Change::Create, "z2"),
            plan(
                "m6",
                "us-west-2",
                a("555555555555"),
                Change::Unchanged,
                "z1",
            ),
            plan(
                "m7",
                "us-west-2",
                Target::OrganizationalUnit("ou-ab12-cd34ef56".into()),
                Change::Create,
                "z1",
            ),
        ];
        let calls = group_calls(&plans);
        let summary: Vec<(bool, Vec<String>, Vec<String>)> = calls
            .iter()
            .map(|c| (c.update, c.members.clone(), c.regions.clone()))
            .collect();
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            summary,
            [
                (false, s(&["m2", "m3"]), s(&["us-west-2"])),
                (false, s(&["m4"]), s(&["us-east-1"])),
                (false, s(&["m5"]), s(&["us-west-2"])),
                (false, s(&["m7"]), s(&["us-west-2"])),
                (true, s(&["m1"]), s(&["us-west-2"])),
            ]
        );
        assert_eq!(calls[0].targets, [a("222222222222"), a("333333333333")]);
        assert!(group_calls(&plans[5..6]).is_empty());
    }

    #[test]
    fn a_failed_operation_names_every_failed_instance() {
        let set: StackSetManifest = serde_json::from_value(serde_json::json!({
            "name": "f-base", "stage": "base", "template": "stacksets/01-base.template.json",
            "capabilities": [], "parameters": [], "outputs": [],
            "instances": [{"member": "f-us-west-2", "region": "us-west-2",
                "target": {"account": "111122223333"}, "parameter_overrides": {}}]
        }))
        .expect("stack set");
        let failed = OperationResult {
            account: "111122223333".into(),
            region: "us-west-2".into(),
            status: "FAILED".into(),
            reason: Some("ResourceLogicalId:Vpc, ResourceType:AWS::EC2::VPC, ResourceStatusReason:limit exceeded".into()),
        };
        let other = OperationResult {
            account: "444455556666".into(),
            region: "eu-west-2".into(),
            status: "CANCELLED".into(),
            reason: None,
        };
        let err = DeployError::StackSetOperationFailed {
            stack_set: set.name.clone(),
            operation: "hyperforge-1 (create instances)".into(),
            outcome: "FAILED: the failure tolerance was exceeded".into(),
            failures: vec![result_text(&set, &failed), result_text(&set, &other)],
        };
        assert_eq!(
            err.to_string(),
            "StackSet `f-base`: operation hyperforge-1 (create instances) ended FAILED: the failure tolerance was exceeded\n\
             failed stack instances:\n  \
             f-us-west-2 (account 111122223333, us-west-2): FAILED: ResourceLogicalId:Vpc, ResourceType:AWS::EC2::VPC, ResourceStatusReason:limit exceeded\n  \
             (account 444455556666, eu-west-2): CANCELLED"
        );
    }

    #[test]
    fn templates_compare_as_json() {
        assert!(same_template("{\"a\": [1, 2]}", b"{\n  \"a\": [1,2]\n}\n"));
        assert!(!same_template("{\"a\": [1, 2]}", b"{\"a\": [2, 1]}"));
        assert!(same_template("Resources: {}\n", b"Resources: {}"));
    }

    #[test]
    fn a_fleet_directory_is_checked_before_anything_is_deployed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::create_dir_all(root.join("members/f-us-west-2")).expect("mkdir");
        std::fs::create_dir_all(root.join("stacksets")).expect("mkdir");
        std::fs::write(root.join("members/f-us-west-2/manifest.json"), "{}").expect("write");
        std::fs::write(root.join("stacksets/01-base.template.json"), "{}").expect("write");
        let manifest = serde_json::json!({
            "version": 1,
            "generator": "test",
            "name": "f",
            "permission_model": {"kind": "self-managed"},
            "preferences": {"region_concurrency": "sequential", "max_concurrent": {"count": 1}, "failure_tolerance": {"count": 0}},
            "members": [{"name": "f-us-west-2", "stack": "f", "region": "us-west-2", "target": {"account": "111122223333"}, "values": {}, "assembly": "members/f-us-west-2"}],
            "stack_sets": [{"name": "f-base", "stage": "base", "template": "stacksets/01-base.template.json", "capabilities": [], "parameters": [], "outputs": [],
                "instances": [{"member": "f-us-west-2", "region": "us-west-2", "target": {"account": "111122223333"}, "parameter_overrides": {}}]}],
            "runbook": "FLEET.md"
        });
        let check = |edit: &dyn Fn(&mut Value)| {
            let mut m = manifest.clone();
            edit(&mut m);
            match parse(&m.to_string()).and_then(|m| FleetDir::from_manifest(root, m)) {
                Ok(_) => String::new(),
                Err(e) => e,
            }
        };
        assert_eq!(check(&|_| {}), "");
        assert_eq!(
            check(&|m| m["version"] = 2.into()),
            "unsupported `version` (expected 1)"
        );
        let escaping = check(&|m| m["stack_sets"][0]["template"] = "../x.json".into());
        assert!(
            escaping.contains("not a relative path inside"),
            "{escaping}"
        );
        let missing = check(&|m| m["stack_sets"][0]["template"] = "stacksets/02.json".into());
        assert!(missing.ends_with("does not exist"), "{missing}");
        let member = check(&|m| m["members"][0]["assembly"] = "members/other".into());
        assert!(member.contains("member `f-us-west-2`"), "{member}");
        let stranger =
            check(&|m| m["stack_sets"][0]["instances"][0]["member"] = "f-eu-west-1".into());
        assert!(stranger.contains("not a member"), "{stranger}");
        let shape = check(&|m| m["members"] = "x".into());
        assert!(shape.contains("not in the format"), "{shape}");

        let fleet = FleetDir::from_manifest(root, parse(&manifest.to_string()).expect("parse"))
            .expect("fleet");
        assert_eq!(
            fleet.stack_sets(Some("f-base")).map(|s| s.len()).ok(),
            Some(1)
        );
        let err = fleet.stack_sets(Some("nope")).expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "the fleet has no StackSet `nope` (it has: f-base)"
        );
    }
}
