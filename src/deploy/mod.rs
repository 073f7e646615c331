//! Deploying an assembly: CloudFormation stages through change sets (shown, confirmed,
//! executed, followed live, rolled-back states explained), s3-upload stages, Helm and
//! Kubernetes stages as the exact commands to run, `diff` against what is deployed, and
//! `destroy` in reverse order. Behind the `deploy` cargo feature.
//!
//! A fleet's StackSets are deployed by [`deploy_fleet`] from the fleet's output directory
//! ([`FleetDir`], see [`fleet`]).
//!
//! The functions a command-line tool calls are [`deploy`], [`diff`] and [`destroy`]; each
//! reads the assembly written by [`crate::Assembly::write_to`] (see [`AssemblyDir`]), talks to
//! AWS through the SDK's default credential chain ([`AwsSettings`]), prints to a [`Console`]
//! and asks a [`Prompt`] before changing anything unless [`DeployOptions::yes`] is set.
//!
//! ```no_run
//! use hyperforge::deploy::{self, AssemblyDir, Console, DeployOptions, StdinPrompt};
//! # fn main() -> Result<(), hyperforge::deploy::DeployError> {
//! let assembly = AssemblyDir::load(std::path::Path::new("hyperforge.out"))?;
//! let options = DeployOptions::default();
//! let console = Console::stdout();
//! let report = deploy::runtime()?.block_on(deploy::deploy(
//!     &assembly, "kimi-k3-hyperpod", &options, &console, &mut StdinPrompt))?;
//! # let _ = report; Ok(()) }
//! ```
//!
//! The decisions (what to do for each stack status, how a change set and stack events read)
//! are plain functions over this module's own structs ([`plan`], [`changeset`], [`events`],
//! [`params`], [`external`]), tested without AWS; [`aws`] converts SDK responses into them.

pub mod aws;
pub mod changeset;
pub mod console;
pub mod error;
pub mod events;
pub mod external;
pub mod fleet;
pub mod manifest;
pub mod params;
pub mod plan;
mod run;
pub mod tunnel;

pub use aws::{AwsSettings, Clients, ENDPOINT_ENV};
pub use changeset::{ChangeSetSummary, ResourceChange};
pub use console::{Answers, Captured, Console, Prompt, StdinPrompt};
pub use error::DeployError;
pub use external::ExternalCommand;
pub use fleet::{deploy_fleet, deploy_fleet_member, FleetDeployOptions, FleetDir, FleetReport};
pub use manifest::{AssemblyDir, StackPlan};
pub use run::{
    deploy, destroy, diff, template_key, template_url, Report, StageOutcome, StageReport,
};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// What a deploy, diff or destroy does and how.
#[derive(Clone, Debug)]
pub struct DeployOptions {
    /// Where and as whom to reach AWS.
    pub aws: AwsSettings,
    /// Go ahead without asking (`--yes`).
    pub yes: bool,
    /// Values of the stack's deploy-time inputs by name (`--parameters-file`): the CloudFormation
    /// parameters of that name and the Kubernetes placeholders of that input; others take their
    /// defaults.
    pub parameters: BTreeMap<String, String>,
    /// A bucket for templates over [`DeployOptions::inline_template_limit`]
    /// (`--template-bucket`).
    pub template_bucket: Option<String>,
    /// Templates larger than this many bytes are uploaded (CloudFormation's limit,
    /// 51,200 bytes, unless a test
    /// lowers it).
    pub inline_template_limit: usize,
    /// Run helm, kubectl and git for the Helm and Kubernetes stages, and every stage's steps,
    /// instead of printing the commands and stopping (`--run-external`). Steps that must run
    /// before a stack is deployed or deleted need it.
    pub run_external: bool,
    /// Start at this stage (`--from`); earlier stages (later ones for destroy) are taken as
    /// done.
    pub from_stage: Option<String>,
    /// How often to poll CloudFormation while waiting.
    pub poll_interval: Duration,
    /// How long to wait for one stack operation before giving up (the operation goes on).
    pub timeout: Duration,
    /// Where git charts are checked out.
    pub chart_checkouts: PathBuf,
    /// CloudFormation stages deployed elsewhere (a fleet's StackSet instances), by stage: the
    /// stack (name or id) whose outputs later stages read. The stages themselves are skipped.
    pub stage_stacks: BTreeMap<String, String>,
}

impl Default for DeployOptions {
    fn default() -> Self {
        DeployOptions {
            aws: AwsSettings::default(),
            yes: false,
            parameters: BTreeMap::new(),
            template_bucket: None,
            inline_template_limit: crate::validate::limits::INLINE_TEMPLATE_BYTES,
            run_external: false,
            from_stage: None,
            poll_interval: Duration::from_secs(5),
            timeout: Duration::from_secs(3 * 3600),
            chart_checkouts: std::env::temp_dir().join("hyperforge-charts"),
            stage_stacks: BTreeMap::new(),
        }
    }
}

/// A single-threaded tokio runtime for callers without one (`runtime()?.block_on(deploy(..))`).
pub fn runtime() -> Result<tokio::runtime::Runtime, DeployError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(DeployError::Runtime)
}
