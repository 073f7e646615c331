//! The deploy, diff and destroy sequences: stage by stage, converging from whatever state a
//! previous (possibly interrupted) run left.

use super::aws::{Clients, StackInfo, TemplateSource};
use super::changeset::{creation_summary, render, ChangeSetSummary};
use super::console::{Console, Prompt};
use super::error::DeployError;
use super::events::EventTracker;
use super::external::{self, ExternalCommand};
use super::manifest::{AssemblyDir, StackPlan};
use super::params;
use super::plan::{
    deploy_step, destroy_step, explain_status, status_kind, DeployStep, DestroyStep, StatusKind,
};
use super::DeployOptions;
use crate::assembly::fill;
use crate::assembly::manifest::{PlaceholderValue, StageManifest, Step, ValueSource, When};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// What happened to one stage.
#[derive(Clone, Debug, PartialEq)]
pub enum StageOutcome {
    /// The change set was executed and the stack is complete.
    Deployed {
        /// The CloudFormation stack.
        stack_name: String,
        /// Its final status.
        status: String,
        /// Its outputs.
        outputs: BTreeMap<String, String>,
        /// The change set that was executed.
        changes: ChangeSetSummary,
    },
    /// The deployed stack already matches the template and parameters.
    NoChanges {
        /// The CloudFormation stack.
        stack_name: String,
    },
    /// The user said no; nothing was changed and the run stopped.
    Declined,
    /// Files were put in the bucket.
    Uploaded {
        /// The bucket.
        bucket: String,
        /// The keys written.
        keys: Vec<String>,
    },
    /// Commands were printed for the user to run; the run stopped there.
    ExternalPending {
        /// The commands.
        commands: Vec<ExternalCommand>,
    },
    /// Commands were run.
    ExternalRun {
        /// The commands.
        commands: Vec<ExternalCommand>,
    },
    /// Before `--from`: not touched.
    Skipped,
    /// (diff) The stack does not exist; these resources would be created (logical id, type).
    WouldCreate {
        /// The CloudFormation stack.
        stack_name: String,
        /// `(logical id, type)` of each resource of the template.
        resources: Vec<(String, String)>,
    },
    /// (diff) What a deploy would change, from a change set that was deleted unexecuted.
    Diff {
        /// The described change set.
        changes: ChangeSetSummary,
    },
    /// (diff) What the stage would do, in a sentence.
    Planned(String),
    /// (diff) The stack cannot be compared now (an operation is running, a failed create).
    Unavailable(String),
    /// (destroy) The stack was deleted.
    Deleted {
        /// The CloudFormation stack.
        stack_name: String,
    },
    /// (destroy) Nothing to delete.
    Absent,
    /// (destroy) The uploaded objects (every version) were deleted.
    ObjectsDeleted {
        /// The bucket.
        bucket: String,
        /// How many object versions and delete markers were removed.
        count: usize,
    },
}

/// One stage's outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct StageReport {
    /// The stage name.
    pub stage: String,
    /// What happened.
    pub outcome: StageOutcome,
}

/// What a run did, stage by stage (in the order processed; stages after a stop are absent).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Report {
    /// The stack.
    pub stack: String,
    /// The stages processed.
    pub stages: Vec<StageReport>,
}

impl Report {
    /// The outcome of stage `name`, if it was processed.
    pub fn outcome(&self, name: &str) -> Option<&StageOutcome> {
        self.stages
            .iter()
            .find(|s| s.stage == name)
            .map(|s| &s.outcome)
    }
}

/// The S3 key of an uploaded template: `hyperforge/<stack>/<stage>/<sha256>.template.json`.
pub fn template_key(stack: &str, stage: &str, template: &[u8]) -> String {
    let digest = Sha256::digest(template);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("hyperforge/{stack}/{stage}/{hex}.template.json")
}

/// The `TemplateURL` of an uploaded template.
pub fn template_url(bucket: &str, region: &str, key: &str) -> String {
    format!("https://{bucket}.s3.{region}.amazonaws.com/{key}")
}

const CAPACITY_REMINDER: &str = "Reminder: deleting the stacks does not refund capacity bought outside them. EC2 Capacity Blocks and SageMaker training plans are paid up front for their whole term and stay billed until it ends; release or resell them separately if you can.";

struct Run<'a> {
    clients: Clients,
    options: &'a DeployOptions,
    console: &'a Console,
    prompt: &'a mut dyn Prompt,
    plan: &'a StackPlan,
}

/// How a CloudFormation stage starts once the stack is in a state a change set can apply to.
enum Start {
    Create,
    Update(StackInfo),
    Declined,
}

async fn connect(plan: &StackPlan, options: &DeployOptions) -> Clients {
    Clients::connect(&options.aws, &plan.region).await
}

fn start_index(plan: &StackPlan, options: &DeployOptions) -> Result<usize, DeployError> {
    match &options.from_stage {
        Some(name) => plan.stage_index(name),
        None => Ok(0),
    }
}

/// Deploys every stage of `stack` in manifest order (from [`DeployOptions::from_stage`]).
/// Stops, with the report so far, when the user declines or at a Helm/Kubernetes stage whose
/// commands were printed rather than run.
pub async fn deploy(
    assembly: &AssemblyDir,
    stack: &str,
    options: &DeployOptions,
    console: &Console,
    prompt: &mut dyn Prompt,
) -> Result<Report, DeployError> {
    let plan = assembly.stack(stack)?;
    params::check_known(plan, &options.parameters)?;
    let start = start_index(plan, options)?;
    let clients = connect(plan, options).await;
    console.line(&format!(
        "Deploying `{}` to {} ({} stages)",
        plan.name,
        clients.region,
        plan.stages.len()
    ));
    let mut run = Run {
        clients,
        options,
        console,
        prompt,
        plan,
    };
    let mut report = Report {
        stack: plan.name.clone(),
        stages: Vec::new(),
    };
    let total = plan.stages.len();
    for (i, stage) in plan.stages.iter().enumerate() {
        if i < start {
            report.push(stage, StageOutcome::Skipped);
            continue;
        }
        console.line(&format!(
            "\n[{}/{total}] {} ({})",
            i + 1,
            stage.name(),
            stage.kind()
        ));
        // The plan's steps around the stage.
        let before = run.step_commands(stage, When::BeforeApply).await?;
        let after = run.step_commands(stage, When::AfterApply).await?;
        let outcome = match stage {
            StageManifest::CloudFormation { .. } | StageManifest::S3Upload { .. } => {
                if !before.is_empty() {
                    console.line("  steps before the stage:");
                    run.run_first(before, stage)?;
                }
                let outcome = match stage {
                    StageManifest::CloudFormation { .. } => {
                        if let Some(stack) = options.stage_stacks.get(stage.name()) {
                            console
                                .line(&format!("deployed by its StackSet: outputs from {stack}"));
                            StageOutcome::Skipped
                        } else {
                            run.deploy_cloudformation(stage).await?
                        }
                    }
                    _ => run.upload(stage).await?,
                };
                if after.is_empty() || matches!(outcome, StageOutcome::Declined) {
                    outcome
                } else {
                    report.push(stage, outcome);
                    console.line("  steps after the stage:");
                    run.external(after, plan.stages.get(i + 1), "")?
                }
            }
            StageManifest::Helm { .. } | StageManifest::Kubernetes { .. } => {
                let mut commands = before;
                commands.extend(external::deploy_commands(
                    stage,
                    &plan.root,
                    &options.chart_checkouts,
                ));
                commands.extend(after);
                if let StageManifest::Helm {
                    set_from_outputs, ..
                } = stage
                {
                    let mut sets = Vec::new();
                    for set in set_from_outputs {
                        let value = run
                            .output_value(stage.name(), set.stage.as_deref(), &set.output)
                            .await?;
                        sets.push((set.key.clone(), value));
                    }
                    commands = external::with_sets(commands, &sets);
                }
                if let StageManifest::Kubernetes { values, .. } = stage {
                    if !values.is_empty() {
                        let filled = run.filled(stage, values).await?;
                        commands = external::with_filled(commands, filled);
                    }
                }
                run.external(commands, plan.stages.get(i + 1), "")?
            }
        };
        let stop = matches!(
            outcome,
            StageOutcome::Declined | StageOutcome::ExternalPending { .. }
        );
        report.push(stage, outcome);
        if stop {
            return Ok(report);
        }
    }
    console.line(&format!("\n`{}` is deployed.", plan.name));
    Ok(report)
}

/// Shows what a deploy would change, stage by stage, without changing anything: for an
/// existing stack a change set is created, described and deleted unexecuted; for a missing
/// one the template's resources are listed.
pub async fn diff(
    assembly: &AssemblyDir,
    stack: &str,
    options: &DeployOptions,
    console: &Console,
    prompt: &mut dyn Prompt,
) -> Result<Report, DeployError> {
    let plan = assembly.stack(stack)?;
    params::check_known(plan, &options.parameters)?;
    let start = start_index(plan, options)?;
    let clients = connect(plan, options).await;
    let mut run = Run {
        clients,
        options,
        console,
        prompt,
        plan,
    };
    let mut report = Report {
        stack: plan.name.clone(),
        stages: Vec::new(),
    };
    for (i, stage) in plan.stages.iter().enumerate() {
        if i < start {
            report.push(stage, StageOutcome::Skipped);
            continue;
        }
        console.line(&format!("\n{} ({})", stage.name(), stage.kind()));
        let outcome = match stage {
            StageManifest::CloudFormation { .. } => run.diff_cloudformation(stage).await?,
            StageManifest::S3Upload { bucket, prefix, .. } => {
                let files = plan.files(stage);
                let text = format!(
                    "would upload {} file(s) under `{prefix}` of the bucket named by output `{}` of stage `{}`: {}",
                    files.len(),
                    bucket.output,
                    bucket.stage.as_deref().unwrap_or_default(),
                    file_names(&files).join(", ")
                );
                console.line(&format!("  {text}"));
                StageOutcome::Planned(text)
            }
            StageManifest::Helm { .. } | StageManifest::Kubernetes { .. } => {
                let commands =
                    external::deploy_commands(stage, &plan.root, &options.chart_checkouts);
                console.line("  would run:");
                for c in &commands {
                    console.line(&format!("    {c}"));
                }
                StageOutcome::Planned(
                    commands
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("\n"),
                )
            }
        };
        report.push(stage, outcome);
    }
    Ok(report)
}

/// Deletes the stack's stages in reverse order after one confirmation: Helm and Kubernetes
/// stages by printed (or, with `run_external`, run) commands, upload stages by deleting every
/// version of the uploaded objects (a versioned bucket that is not empty cannot be deleted),
/// CloudFormation stacks by `DeleteStack`, waiting for each.
pub async fn destroy(
    assembly: &AssemblyDir,
    stack: &str,
    options: &DeployOptions,
    console: &Console,
    prompt: &mut dyn Prompt,
) -> Result<Report, DeployError> {
    let plan = assembly.stack(stack)?;
    let count = plan.stages.len();
    let first = match &options.from_stage {
        Some(name) => plan.stage_index(name)?,
        None => count.saturating_sub(1),
    };
    let clients = connect(plan, options).await;
    let mut report = Report {
        stack: plan.name.clone(),
        stages: Vec::new(),
    };
    let order: Vec<&StageManifest> = plan.stages[..(first + 1).min(count)].iter().rev().collect();
    console.line(&format!(
        "Destroying `{}` in {}; in this order:",
        plan.name, clients.region
    ));
    for stage in &order {
        let what = match stage {
            StageManifest::CloudFormation { stack_name, .. } => {
                format!("delete stack `{stack_name}` and every resource in it")
            }
            StageManifest::S3Upload { prefix, .. } => {
                format!("delete the uploaded objects under `{prefix}` (every version)")
            }
            StageManifest::Helm { release, .. } => format!("uninstall Helm release `{release}`"),
            StageManifest::Kubernetes { .. } => "delete the Kubernetes objects".to_owned(),
        };
        console.line(&format!("  {}: {what}", stage.name()));
    }
    console.line(CAPACITY_REMINDER);
    let mut run = Run {
        clients,
        options,
        console,
        prompt,
        plan,
    };
    if !run.confirm(&format!("Destroy `{}`?", plan.name))? {
        console.line("Nothing was deleted.");
        report.stages.push(StageReport {
            stage: order
                .first()
                .map(|s| s.name().to_owned())
                .unwrap_or_default(),
            outcome: StageOutcome::Declined,
        });
        return Ok(report);
    }
    for (n, stage) in order.iter().enumerate() {
        console.line(&format!("\n{} ({})", stage.name(), stage.kind()));
        let outcome = match stage {
            StageManifest::CloudFormation { stack_name, .. } => {
                run.before_delete(stage).await?;
                run.destroy_cloudformation(stack_name).await?
            }
            StageManifest::S3Upload { bucket, prefix, .. } => {
                match run
                    .bucket_of(
                        stage.name(),
                        bucket.stage.as_deref().unwrap_or_default(),
                        &bucket.output,
                        false,
                    )
                    .await?
                {
                    None => {
                        console.line("  the bucket's stack is gone: nothing to delete");
                        StageOutcome::Absent
                    }
                    Some(bucket) => {
                        let count = run.clients.delete_prefix(&bucket, prefix).await?;
                        console.line(&format!(
                            "  deleted {count} object version(s) under s3://{bucket}/{prefix}"
                        ));
                        StageOutcome::ObjectsDeleted { bucket, count }
                    }
                }
            }
            StageManifest::Helm { .. } | StageManifest::Kubernetes { .. } => {
                let commands = external::destroy_commands(stage, &plan.root);
                run.external(commands, order.get(n + 1).copied(), "--destroy ")?
            }
        };
        let stop = matches!(outcome, StageOutcome::ExternalPending { .. });
        report.push(stage, outcome);
        if stop {
            return Ok(report);
        }
    }
    console.line(&format!("\n`{}` is destroyed.", plan.name));
    console.line(CAPACITY_REMINDER);
    Ok(report)
}

impl Report {
    fn push(&mut self, stage: &StageManifest, outcome: StageOutcome) {
        self.stages.push(StageReport {
            stage: stage.name().to_owned(),
            outcome,
        });
    }
}

fn file_names(files: &[std::path::PathBuf]) -> Vec<String> {
    files
        .iter()
        .filter_map(|f| f.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .collect()
}

fn read(path: &Path) -> Result<Vec<u8>, DeployError> {
    std::fs::read(path).map_err(|source| DeployError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn change_set_name() -> String {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    format!("hyperforge-{millis}")
}

/// `(logical id, type)` of each resource of a template.
fn template_resources(template: &[u8]) -> Vec<(String, String)> {
    serde_json::from_slice::<serde_json::Value>(template)
        .ok()
        .and_then(|t| {
            t.get("Resources").and_then(|r| r.as_object()).map(|r| {
                r.iter()
                    .map(|(id, res)| {
                        let ty = res.get("Type").and_then(|t| t.as_str()).unwrap_or("?");
                        (id.clone(), ty.to_owned())
                    })
                    .collect()
            })
        })
        .unwrap_or_default()
}

impl Run<'_> {
    fn confirm(&mut self, question: &str) -> Result<bool, DeployError> {
        if self.options.yes {
            return Ok(true);
        }
        self.prompt.confirm(self.console, question)
    }

    async fn sleep(&self) {
        tokio::time::sleep(self.options.poll_interval).await;
    }

    /// Follows the stack until no operation is running; prints each new event. Returns the
    /// stack (`None` once it no longer exists).
    async fn wait(
        &self,
        stack_name: &str,
        tracker: &mut EventTracker,
    ) -> Result<Option<StackInfo>, DeployError> {
        let started = Instant::now();
        let progress = self.console.progress(stack_name);
        loop {
            let info = self.clients.describe_stack(stack_name).await?;
            for line in tracker.lines(&self.clients.recent_events(stack_name).await?) {
                progress.event(&line);
            }
            let Some(info) = info else {
                return Ok(None);
            };
            progress.status(&info.status);
            if status_kind(&info.status) != StatusKind::InProgress {
                return Ok(Some(info));
            }
            if started.elapsed() > self.options.timeout {
                return Err(DeployError::Timeout {
                    stack_name: stack_name.to_owned(),
                    seconds: started.elapsed().as_secs(),
                    status: info.status,
                });
            }
            self.sleep().await;
        }
    }

    async fn tracker(&self, stack_name: &str) -> Result<EventTracker, DeployError> {
        Ok(EventTracker::new(
            &self.clients.recent_events(stack_name).await?,
        ))
    }

    /// Deletes the stack and waits until it is gone.
    async fn delete_and_wait(&self, stack_name: &str) -> Result<(), DeployError> {
        let mut tracker = self.tracker(stack_name).await?;
        self.clients.delete_stack(stack_name).await?;
        match self.wait(stack_name, &mut tracker).await? {
            None => Ok(()),
            Some(info) if info.status == "DELETE_COMPLETE" => Ok(()),
            Some(info) => Err(DeployError::StackFailed {
                stack_name: stack_name.to_owned(),
                explanation: explain_status(stack_name, &info.status),
                status: info.status,
                failures: tracker.failures(),
            }),
        }
    }

    /// Brings the stack to a state a change set can apply to.
    async fn converge(&mut self, stack_name: &str) -> Result<Start, DeployError> {
        for _ in 0..8 {
            let info = self.clients.describe_stack(stack_name).await?;
            let status = info.as_ref().map(|i| i.status.clone());
            match deploy_step(stack_name, status.as_deref()) {
                DeployStep::Create => return Ok(Start::Create),
                DeployStep::Update => {
                    if let Some(info) = info {
                        return Ok(Start::Update(info));
                    }
                    return Ok(Start::Create);
                }
                DeployStep::Wait => {
                    self.console.line(&format!(
                        "`{stack_name}` is {}: another operation is running; waiting for it to finish",
                        status.unwrap_or_default()
                    ));
                    let mut tracker = self.tracker(stack_name).await?;
                    self.wait(stack_name, &mut tracker).await?;
                }
                DeployStep::DiscardReview => {
                    self.console.line(&format!(
                        "`{stack_name}` is REVIEW_IN_PROGRESS: a create change set was made but never executed (an interrupted deploy?). Deleting its pending change sets and the empty stack, then creating it again."
                    ));
                    for id in self.clients.list_change_sets(stack_name).await? {
                        self.clients.delete_change_set(stack_name, &id).await?;
                    }
                    self.delete_and_wait(stack_name).await?;
                }
                DeployStep::DeleteFailedCreate => {
                    let status = status.unwrap_or_default();
                    self.console.line(&format!(
                        "`{stack_name}` is {status}: its creation failed{}. CloudFormation cannot update such a stack; it must be deleted and created again.",
                        info.and_then(|i| i.reason).map(|r| format!(" ({r})")).unwrap_or_default()
                    ));
                    if !self.confirm(&format!("Delete `{stack_name}` and create it again?"))? {
                        self.console.line("Not deployed.");
                        return Ok(Start::Declined);
                    }
                    self.delete_and_wait(stack_name).await?;
                }
                DeployStep::Refuse(advice) => {
                    return Err(DeployError::NeedsAttention {
                        stack_name: stack_name.to_owned(),
                        status: status.unwrap_or_default(),
                        advice,
                    })
                }
            }
        }
        Err(DeployError::NeedsAttention {
            stack_name: stack_name.to_owned(),
            status: "changing".into(),
            advice: "the stack kept changing state while the deploy tried to bring it to a stable one; run the deploy again".into(),
        })
    }

    /// Inline, or uploaded to the template bucket when too large.
    async fn template_source(
        &self,
        stack_name: &str,
        stage: &str,
        body: &[u8],
    ) -> Result<TemplateSource, DeployError> {
        let limit = self.options.inline_template_limit;
        if body.len() <= limit {
            return Ok(TemplateSource::Body(
                String::from_utf8_lossy(body).into_owned(),
            ));
        }
        let Some(bucket) = &self.options.template_bucket else {
            return Err(DeployError::TemplateTooLarge {
                stack_name: stack_name.to_owned(),
                size: body.len(),
                limit,
            });
        };
        let key = template_key(&self.plan.name, stage, body);
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

    /// The stage's template, its parameter values and how the template reaches CloudFormation.
    async fn prepare_template(
        &self,
        stage: &StageManifest,
        deployed_parameters: &[String],
    ) -> Result<
        (
            Vec<u8>,
            Vec<(String, params::ParameterValue)>,
            TemplateSource,
        ),
        DeployError,
    > {
        let StageManifest::CloudFormation {
            stack_name,
            parameters,
            ..
        } = stage
        else {
            return Err(DeployError::ChangeSetFailed {
                stack_name: stage.name().to_owned(),
                reason: "not a CloudFormation stage".into(),
            });
        };
        let body = read(&self.plan.file(stage)?)?;
        let values = params::resolve(
            stack_name,
            parameters,
            &self.options.parameters,
            deployed_parameters,
        )?;
        let source = self
            .template_source(stack_name, stage.name(), &body)
            .await?;
        Ok((body, values, source))
    }

    /// Creates an UPDATE change set and waits until CloudFormation has computed it.
    async fn prepare_change_set(
        &self,
        stage: &StageManifest,
        stack_name: &str,
        capabilities: &[String],
        deployed_parameters: &[String],
    ) -> Result<(String, ChangeSetSummary), DeployError> {
        let (_, values, source) = self.prepare_template(stage, deployed_parameters).await?;
        let id = self
            .clients
            .create_change_set(
                stack_name,
                &change_set_name(),
                false,
                &source,
                &values,
                capabilities,
                &format!("hyperforge {} stage {}", self.plan.name, stage.name()),
            )
            .await?;
        let started = Instant::now();
        loop {
            let summary = self.clients.describe_change_set(stack_name, &id).await?;
            let pending = matches!(
                summary.status.as_str(),
                "CREATE_PENDING" | "CREATE_IN_PROGRESS"
            );
            if !pending {
                return Ok((id, summary));
            }
            if started.elapsed() > self.options.timeout {
                return Err(DeployError::Timeout {
                    stack_name: stack_name.to_owned(),
                    seconds: started.elapsed().as_secs(),
                    status: format!("change set {}", summary.status),
                });
            }
            self.sleep().await;
        }
    }

    async fn deploy_cloudformation(
        &mut self,
        stage: &StageManifest,
    ) -> Result<StageOutcome, DeployError> {
        let StageManifest::CloudFormation {
            stack_name,
            capabilities,
            ..
        } = stage
        else {
            return Ok(StageOutcome::Skipped);
        };
        let deployed = match self.converge(stack_name).await? {
            Start::Declined => return Ok(StageOutcome::Declined),
            Start::Create => return self.create(stage, stack_name, capabilities).await,
            Start::Update(info) => info.parameters,
        };
        let (id, summary) = self
            .prepare_change_set(stage, stack_name, capabilities, &deployed)
            .await?;
        if summary.is_no_changes() {
            self.clients.delete_change_set(stack_name, &id).await?;
            self.console.line(&format!(
                "`{stack_name}`: no changes (the deployed template and parameters are the same)"
            ));
            return Ok(StageOutcome::NoChanges {
                stack_name: stack_name.clone(),
            });
        }
        if summary.status == "FAILED" {
            // Best effort: the error below is what matters.
            let _ = self.clients.delete_change_set(stack_name, &id).await;
            return Err(DeployError::ChangeSetFailed {
                stack_name: stack_name.clone(),
                reason: summary
                    .status_reason
                    .unwrap_or_else(|| "no reason given".into()),
            });
        }
        self.console.line(&render(&summary));
        if !self.confirm(&format!("Update `{stack_name}` with these changes?"))? {
            self.clients.delete_change_set(stack_name, &id).await?;
            self.console
                .line("Not deployed; the change set was deleted.");
            return Ok(StageOutcome::Declined);
        }
        let mut tracker = self.tracker(stack_name).await?;
        self.clients.execute_change_set(stack_name, &id).await?;
        self.finish(stack_name, &mut tracker, summary).await
    }

    /// A stack that does not exist: list what its template adds, confirm, `CreateStack`.
    async fn create(
        &mut self,
        stage: &StageManifest,
        stack_name: &str,
        capabilities: &[String],
    ) -> Result<StageOutcome, DeployError> {
        let (body, values, source) = self.prepare_template(stage, &[]).await?;
        let summary = creation_summary(stack_name, &template_resources(&body));
        self.console.line(&format!(
            "`{stack_name}` does not exist yet: it will be created."
        ));
        self.console.line(&render(&summary));
        if !self.confirm(&format!("Create `{stack_name}`?"))? {
            self.console.line("Not deployed; nothing was created.");
            return Ok(StageOutcome::Declined);
        }
        let mut tracker = EventTracker::new(&[]);
        self.clients
            .create_stack(stack_name, &source, &values, capabilities)
            .await?;
        self.finish(stack_name, &mut tracker, summary).await
    }

    /// Follows a started create or update to its end; prints the outputs on success.
    async fn finish(
        &self,
        stack_name: &str,
        tracker: &mut EventTracker,
        changes: ChangeSetSummary,
    ) -> Result<StageOutcome, DeployError> {
        let Some(info) = self.wait(stack_name, tracker).await? else {
            return Err(DeployError::StackFailed {
                stack_name: stack_name.to_owned(),
                status: "DELETE_COMPLETE".into(),
                explanation: "the stack was deleted while it was being deployed".into(),
                failures: tracker.failures(),
            });
        };
        if status_kind(&info.status) != StatusKind::Succeeded {
            return Err(DeployError::StackFailed {
                stack_name: stack_name.to_owned(),
                explanation: explain_status(stack_name, &info.status),
                status: info.status,
                failures: tracker.failures(),
            });
        }
        self.console.line(&format!(
            "`{stack_name}`: {}",
            explain_status(stack_name, &info.status)
        ));
        if !info.outputs.is_empty() {
            self.console.line("Outputs:");
            for (k, v) in &info.outputs {
                self.console.line(&format!("  {k} = {v}"));
            }
        }
        Ok(StageOutcome::Deployed {
            stack_name: stack_name.to_owned(),
            status: info.status,
            outputs: info.outputs,
            changes,
        })
    }

    async fn diff_cloudformation(
        &mut self,
        stage: &StageManifest,
    ) -> Result<StageOutcome, DeployError> {
        let StageManifest::CloudFormation {
            stack_name,
            capabilities,
            ..
        } = stage
        else {
            return Ok(StageOutcome::Skipped);
        };
        let info = self.clients.describe_stack(stack_name).await?;
        let step = deploy_step(stack_name, info.as_ref().map(|i| i.status.as_str()));
        match (info, step) {
            (None, _) | (_, DeployStep::Create | DeployStep::DiscardReview) => {
                let resources = template_resources(&read(&self.plan.file(stage)?)?);
                self.console.line(&format!(
                    "`{stack_name}` does not exist: it would be created with {} resources:",
                    resources.len()
                ));
                for (id, ty) in &resources {
                    self.console.line(&format!("  + {ty:<40} {id}"));
                }
                Ok(StageOutcome::WouldCreate {
                    stack_name: stack_name.clone(),
                    resources,
                })
            }
            (Some(info), DeployStep::Update) => {
                let (id, summary) = self
                    .prepare_change_set(stage, stack_name, capabilities, &info.parameters)
                    .await?;
                self.clients.delete_change_set(stack_name, &id).await?;
                if summary.is_no_changes() {
                    self.console
                        .line(&format!("`{stack_name}`: no differences"));
                    return Ok(StageOutcome::NoChanges {
                        stack_name: stack_name.clone(),
                    });
                }
                if summary.status == "FAILED" {
                    return Err(DeployError::ChangeSetFailed {
                        stack_name: stack_name.clone(),
                        reason: summary
                            .status_reason
                            .unwrap_or_else(|| "no reason given".into()),
                    });
                }
                self.console.line(&render(&summary));
                Ok(StageOutcome::Diff { changes: summary })
            }
            (Some(info), _) => {
                let text = format!(
                    "`{stack_name}` is {}: {}; no diff now",
                    info.status,
                    explain_status(stack_name, &info.status)
                );
                self.console.line(&text);
                Ok(StageOutcome::Unavailable(text))
            }
        }
    }

    /// The text of Kubernetes stage `stage`'s file with `values` in place of their
    /// placeholders: outputs read from the stacks, inputs from the parameters given (or their
    /// defaults).
    async fn filled(
        &self,
        stage: &StageManifest,
        values: &[PlaceholderValue],
    ) -> Result<String, DeployError> {
        let path = self.plan.file(stage)?;
        let text = std::fs::read_to_string(&path).map_err(|source| DeployError::Io {
            path: path.clone(),
            source,
        })?;
        let mut given = Vec::new();
        for v in values {
            let value = match &v.from {
                ValueSource::Output(out) => Some(
                    self.output_value(stage.name(), out.stage.as_deref(), &out.output)
                        .await?,
                ),
                ValueSource::Input(name) => self.options.parameters.get(name).cloned(),
            };
            if let Some(value) = value {
                given.push((fill::variable(&self.plan.inputs, v), value));
            }
        }
        fill::fill(&self.plan.inputs, values, &text, &given).map_err(|problems| {
            DeployError::External {
                command: format!("kubectl apply -f {}", path.display()),
                problem: problems
                    .iter()
                    .map(|p| format!("{p} ({})", p.help()))
                    .collect::<Vec<_>>()
                    .join("; "),
            }
        })
    }

    /// The value of an earlier stage's output that `stage` needs (a `--set` value, a
    /// placeholder's, a step's): a missing stack or output is an error.
    async fn output_value(
        &self,
        stage: &str,
        of: Option<&str>,
        output: &str,
    ) -> Result<String, DeployError> {
        Ok(self
            .bucket_of(stage, of.unwrap_or_default(), output, true)
            .await?
            .unwrap_or_default())
    }

    /// The value of an earlier stage's output (a bucket name, a VPC id for `--set`).
    /// `required`: a missing stack or output is an error (deploy) rather than `None` (destroy).
    async fn bucket_of(
        &self,
        stage: &str,
        bucket_stage: &str,
        output: &str,
        required: bool,
    ) -> Result<Option<String>, DeployError> {
        let missing = |stack_name: &str, problem: String| DeployError::MissingOutput {
            stage: stage.to_owned(),
            output: output.to_owned(),
            stack_name: stack_name.to_owned(),
            problem,
        };
        let stack_name = self
            .options
            .stage_stacks
            .get(bucket_stage)
            .map(String::as_str)
            .or_else(|| self.plan.cloudformation_stack_name(bucket_stage));
        let Some(stack_name) = stack_name else {
            return Err(missing(
                bucket_stage,
                format!("`{bucket_stage}` is not a CloudFormation stage of this stack"),
            ));
        };
        let info = self.clients.describe_stack(stack_name).await?;
        let info = match info {
            Some(i) if status_kind(&i.status) != StatusKind::Review => i,
            _ if !required => return Ok(None),
            _ => {
                return Err(missing(
                    stack_name,
                    format!("that stack does not exist: deploy stage `{bucket_stage}` first"),
                ))
            }
        };
        match info.outputs.get(output) {
            Some(bucket) => Ok(Some(bucket.clone())),
            None if !required => Ok(None),
            None => Err(missing(
                stack_name,
                format!(
                    "the stack ({}) has no such output (it has: {})",
                    info.status,
                    info.outputs.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            )),
        }
    }

    /// Carries out the steps before `stage`'s stack is deleted: a versioned bucket through
    /// the SDK (its logging stopped, then every version and delete marker deleted), any other
    /// step as its script ([`Run::run_first`]).
    async fn before_delete(&mut self, stage: &StageManifest) -> Result<(), DeployError> {
        let mut scripts = Vec::new();
        for step in stage.steps_at(When::BeforeDelete) {
            match step {
                Step::EmptyVersionedBucket { bucket, holds } => {
                    let name = self
                        .bucket_of(
                            stage.name(),
                            bucket.stage.as_deref().unwrap_or_default(),
                            &bucket.output,
                            false,
                        )
                        .await?;
                    let Some(name) = name else {
                        self.console.line(&format!(
                            "  {}: the stack is gone, nothing to empty",
                            step.marker()
                        ));
                        continue;
                    };
                    self.console.line(&format!(
                        "  {}: emptying s3://{name} ({holds})",
                        step.marker()
                    ));
                    self.clients.stop_access_logging(&name).await?;
                    let count = self.clients.delete_prefix(&name, "").await?;
                    self.console.line(&format!(
                        "  deleted {count} object version(s) from s3://{name}"
                    ));
                }
                Step::VerifyModelRevision { .. }
                | Step::VerifyImage { .. }
                | Step::Secret(_)
                | Step::WaitJob { .. }
                | Step::ScaleCapacityBlockNodeGroup { .. }
                | Step::SubscribeTopic { .. } => {
                    let values = self.step_values(stage, step).await?;
                    scripts.push(ExternalCommand::step(step, &self.clients.region, &values));
                }
            }
        }
        if !scripts.is_empty() {
            self.run_first(scripts, stage)?;
        }
        Ok(())
    }

    /// Runs steps that must be done before hyperforge goes on with `stage` itself (a stack
    /// it deploys or deletes right after). Printing them and stopping would leave no way to
    /// resume after them, so they need `--run-external`; without it, they are printed and the
    /// run stops with an error naming the option.
    fn run_first(
        &self,
        commands: Vec<ExternalCommand>,
        stage: &StageManifest,
    ) -> Result<(), DeployError> {
        if self.options.run_external {
            self.external(commands, None, "")?;
            return Ok(());
        }
        for c in &commands {
            self.console.line(&format!("    {c}"));
        }
        Err(DeployError::External {
            command: format!("the steps before stage `{}`", stage.name()),
            problem: "must run before hyperforge goes on with the stage: pass --run-external to let it run them (they are printed above)".to_owned(),
        })
    }

    /// The commands carrying out `stage`'s steps at `when`, each with the deploy-time values
    /// it reads (outputs of the stage's stacks).
    async fn step_commands(
        &self,
        stage: &StageManifest,
        when: When,
    ) -> Result<Vec<ExternalCommand>, DeployError> {
        let mut out = Vec::new();
        for step in stage.steps_at(when) {
            let values = self.step_values(stage, step).await?;
            out.push(ExternalCommand::step(step, &self.clients.region, &values));
        }
        Ok(out)
    }

    /// The deploy-time values `step` reads, each with its shell variable, from the outputs of
    /// the stack's stages.
    async fn step_values(
        &self,
        stage: &StageManifest,
        step: &Step,
    ) -> Result<Vec<(String, String)>, DeployError> {
        let mut values = Vec::new();
        for read in step.reads() {
            let value = self
                .output_value(
                    stage.name(),
                    read.output.stage.as_deref(),
                    &read.output.output,
                )
                .await?;
            values.push((read.variable, value));
        }
        Ok(values)
    }

    async fn upload(&self, stage: &StageManifest) -> Result<StageOutcome, DeployError> {
        let StageManifest::S3Upload { bucket, prefix, .. } = stage else {
            return Ok(StageOutcome::Skipped);
        };
        let Some(bucket) = self
            .bucket_of(
                stage.name(),
                bucket.stage.as_deref().unwrap_or_default(),
                &bucket.output,
                true,
            )
            .await?
        else {
            return Ok(StageOutcome::Skipped);
        };
        let mut keys = Vec::new();
        for file in &self.plan.files(stage) {
            let name = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let key = format!("{prefix}{name}");
            self.clients.put_object(&bucket, &key, read(file)?).await?;
            self.console
                .line(&format!("  uploaded s3://{bucket}/{key}"));
            keys.push(key);
        }
        Ok(StageOutcome::Uploaded { bucket, keys })
    }

    /// Prints the commands of a Helm or Kubernetes stage, or runs them when asked to.
    fn external(
        &self,
        commands: Vec<ExternalCommand>,
        next: Option<&StageManifest>,
        mode: &str,
    ) -> Result<StageOutcome, DeployError> {
        let region = self.clients.region.clone();
        if self.options.run_external {
            // Through the admin host's tunnel when the endpoint is private and the stack has
            // one; closed again when the stage's commands end.
            let cluster_api = commands.iter().any(|c| c.kubernetes_api);
            let tunnel = match (&self.plan.eks_cluster, &self.plan.admin_host) {
                (Some(cluster), Some(admin)) if cluster_api => {
                    self.console.line(&format!(
                        "  opening the tunnel to `{cluster}` through admin host `{}` (127.0.0.1:{})",
                        admin.name_tag, admin.local_port
                    ));
                    Some(super::tunnel::Tunnel::open(
                        cluster,
                        &region,
                        admin,
                        &self.options.aws.cli_environment(),
                    )?)
                }
                _ => None,
            };
            for c in &commands {
                self.console.line(&format!("  $ {c}"));
            }
            external::run(
                &commands,
                tunnel.as_ref().map(|t| t.kubeconfig()),
                &self.options.aws.cli_environment(),
            )?;
            return Ok(StageOutcome::ExternalRun { commands });
        }
        let cluster_api = commands.iter().any(|c| c.kubernetes_api);
        match (&self.plan.eks_cluster, &self.plan.admin_host) {
            _ if !cluster_api => {}
            (Some(cluster), Some(admin)) => {
                self.console.line(&format!(
                    "  The API endpoint of `{cluster}` is private: open the tunnel through admin host `{}` first:",
                    admin.name_tag
                ));
                for line in super::tunnel::instructions(cluster, &region, admin) {
                    self.console.line(&format!("    {line}"));
                }
            }
            (Some(cluster), None) => self.console.line(&format!(
                "  kubectl and helm must reach EKS cluster `{cluster}`: aws eks update-kubeconfig --name {cluster} --region {region}"
            )),
            _ => {}
        }
        self.console.line("  Run next:");
        for c in &commands {
            self.console.line(&format!("    {c}"));
        }
        match next {
            Some(next) => self.console.line(&format!(
                "  then continue with {mode}--from {} (or pass --run-external to let hyperforge run them).",
                next.name()
            )),
            None => self
                .console
                .line("  (or pass --run-external to let hyperforge run them)."),
        }
        Ok(StageOutcome::ExternalPending { commands })
    }

    async fn destroy_cloudformation(
        &mut self,
        stack_name: &str,
    ) -> Result<StageOutcome, DeployError> {
        for _ in 0..4 {
            let info = self.clients.describe_stack(stack_name).await?;
            match destroy_step(info.as_ref().map(|i| i.status.as_str())) {
                DestroyStep::Absent => {
                    self.console
                        .line(&format!("`{stack_name}` does not exist: nothing to delete"));
                    return Ok(StageOutcome::Absent);
                }
                DestroyStep::Wait => {
                    self.console.line(&format!(
                        "`{stack_name}` is {}: waiting for the running operation first",
                        info.map(|i| i.status).unwrap_or_default()
                    ));
                    let mut tracker = self.tracker(stack_name).await?;
                    self.wait(stack_name, &mut tracker).await?;
                }
                DestroyStep::Delete => {
                    self.delete_and_wait(stack_name).await?;
                    self.console.line(&format!("`{stack_name}` deleted"));
                    return Ok(StageOutcome::Deleted {
                        stack_name: stack_name.to_owned(),
                    });
                }
            }
        }
        Err(DeployError::NeedsAttention {
            stack_name: stack_name.to_owned(),
            status: "changing".into(),
            advice: "the stack kept changing state; run destroy again".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_key_and_url() {
        let key = template_key("demo", "foundation", b"{}");
        assert_eq!(
            key,
            "hyperforge/demo/foundation/44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a.template.json"
        );
        assert_eq!(
            template_url("my-bucket", "us-west-2", &key),
            format!("https://my-bucket.s3.us-west-2.amazonaws.com/{key}")
        );
    }

    #[test]
    fn resources_of_a_template() {
        let t =
            br#"{"Resources": {"B": {"Type": "AWS::S3::Bucket"}, "A": {"Type": "AWS::EC2::VPC"}}}"#;
        assert_eq!(
            template_resources(t),
            [
                ("B".to_owned(), "AWS::S3::Bucket".to_owned()),
                ("A".to_owned(), "AWS::EC2::VPC".to_owned())
            ]
        );
    }
}
