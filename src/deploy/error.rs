//! The deploy errors: one enum, each message written for the person running the deploy.

use std::path::PathBuf;

/// Why a deploy, diff or destroy stopped. Nothing after the failing step was started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeployError {
    /// A file of the assembly (or the parameters file) could not be read.
    #[error("cannot read `{path}`: {source}")]
    Io {
        /// Which file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// `manifest.json` is missing something the deploy needs.
    #[error("`{path}` is not a usable hyperforge manifest: {message}; synthesize the app again")]
    Manifest {
        /// The manifest's path.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The stack named on the command line is not in the assembly.
    #[error("stack `{name}` is not in the assembly (it has: {available})")]
    UnknownStack {
        /// The name asked for.
        name: String,
        /// The stacks the manifest lists.
        available: String,
    },
    /// `--from` names a stage the stack does not have.
    #[error("stack `{stack}` has no stage `{name}` (its stages: {available})")]
    UnknownStage {
        /// The stack.
        stack: String,
        /// The stage asked for.
        name: String,
        /// The stack's stages.
        available: String,
    },
    /// The parameters file is not a JSON object of strings.
    #[error("parameters file `{path}`: {message}")]
    ParametersFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A parameter was given that no CloudFormation stage of the stack declares (a typo?).
    #[error("parameter `{name}` is not declared by any template of stack `{stack}` (declared: {declared})")]
    UnknownParameter {
        /// The stack.
        stack: String,
        /// The parameter given.
        name: String,
        /// The parameters the templates declare.
        declared: String,
    },
    /// A template parameter has no default and no value was given.
    #[error("parameter `{name}` of `{stack_name}` has no default and was not given: add it to the parameters file")]
    MissingParameter {
        /// The CloudFormation stack.
        stack_name: String,
        /// The parameter.
        name: String,
    },
    /// The template is too large to pass inline and no bucket was named.
    #[error("the template of `{stack_name}` is {size} bytes, over CloudFormation's {limit}-byte limit for inline templates: name an S3 bucket to upload it to (--template-bucket)")]
    TemplateTooLarge {
        /// The CloudFormation stack.
        stack_name: String,
        /// The template's size in bytes.
        size: usize,
        /// The inline limit in bytes.
        limit: usize,
    },
    /// An AWS API call failed (after the configured retries).
    #[error("{operation} for `{target}` failed: {message}")]
    Aws {
        /// The API operation (`CreateChangeSet`).
        operation: &'static str,
        /// The stack, change set or bucket concerned.
        target: String,
        /// The service's error code and message.
        message: String,
    },
    /// CloudFormation could not create the change set for a reason other than "no changes".
    #[error("CloudFormation rejected the change set for `{stack_name}`: {reason}")]
    ChangeSetFailed {
        /// The CloudFormation stack.
        stack_name: String,
        /// CloudFormation's status reason.
        reason: String,
    },
    /// The stack operation ended in a failed or rolled-back state.
    #[error(
        "`{stack_name}` ended in {status}: {explanation}{}",
        render_failures(failures)
    )]
    StackFailed {
        /// The CloudFormation stack.
        stack_name: String,
        /// Its final status.
        status: String,
        /// What that status means.
        explanation: String,
        /// `resource (type): reason` of each resource that failed, root causes first.
        failures: Vec<String>,
    },
    /// The stack is in a state the deploy will not change on its own.
    #[error("`{stack_name}` is in {status}: {advice}")]
    NeedsAttention {
        /// The CloudFormation stack.
        stack_name: String,
        /// Its status.
        status: String,
        /// What the user should do.
        advice: String,
    },
    /// An operation did not finish in time.
    #[error("gave up waiting for `{stack_name}` after {seconds} s (last status {status}); the operation goes on in CloudFormation: run the deploy again to pick it up")]
    Timeout {
        /// The CloudFormation stack.
        stack_name: String,
        /// How long we waited.
        seconds: u64,
        /// The last status seen.
        status: String,
    },
    /// An upload stage's bucket comes from a stack output that is missing.
    #[error("stage `{stage}` uploads to the bucket named by output `{output}` of `{stack_name}`, but {problem}")]
    MissingOutput {
        /// The upload stage.
        stage: String,
        /// The output.
        output: String,
        /// The CloudFormation stack expected to have it.
        stack_name: String,
        /// What is missing.
        problem: String,
    },
    /// A helm, kubectl or git command failed or could not be started.
    #[error("`{command}` {problem}")]
    External {
        /// The command line.
        command: String,
        /// What went wrong.
        problem: String,
    },
    /// `fleet.json` is missing something the fleet deploy needs.
    #[error("`{path}` is not a usable fleet manifest: {message}; synthesize the fleet again")]
    FleetManifest {
        /// The manifest's path.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// `--stack-set` names a StackSet the fleet does not have.
    #[error("the fleet has no StackSet `{name}` (it has: {available})")]
    UnknownStackSet {
        /// The name asked for.
        name: String,
        /// The fleet's StackSets.
        available: String,
    },
    /// A StackSet operation ended without succeeding; later StackSets were not started (they
    /// import the earlier ones' exports).
    #[error(
        "StackSet `{stack_set}`: operation {operation} ended {outcome}{}",
        render_instance_failures(failures)
    )]
    StackSetOperationFailed {
        /// The StackSet.
        stack_set: String,
        /// The operation: its id and what it did (`hyperforge-1 (create instances)`).
        operation: String,
        /// Its final status and CloudFormation's reason (`FAILED: ...`).
        outcome: String,
        /// `member (account, region): status: reason` of each instance that did not succeed.
        failures: Vec<String>,
    },
    /// The confirmation answer could not be read.
    #[error("cannot read the answer to the confirmation question: {0}")]
    Prompt(std::io::Error),
    /// The async runtime could not be started.
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
}

fn render_instance_failures(failures: &[String]) -> String {
    if failures.is_empty() {
        return String::new();
    }
    let mut s = String::from("\nfailed stack instances:");
    for f in failures {
        s.push_str("\n  ");
        s.push_str(f);
    }
    s
}

fn render_failures(failures: &[String]) -> String {
    if failures.is_empty() {
        return String::new();
    }
    let mut s = String::from("\nfailed resources:");
    for f in failures {
        s.push_str("\n  ");
        s.push_str(f);
    }
    s
}
