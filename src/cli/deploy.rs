//! `hyperforge deploy`, `destroy` and `diff --deployed`: the CloudFormation deploy path of an
//! assembly already written to `--out`. Without the `deploy` feature (the default build, which
//! compiles no AWS SDK) these commands explain how to get it.

use super::{DeployArgs, Exit, Global};

/// What to do with the deployed stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Create or update each CloudFormation stage.
    Deploy,
    /// Describe the change sets without executing them.
    Diff,
    /// Delete the stages in reverse order.
    Destroy,
}

#[cfg(not(feature = "deploy"))]
pub fn run(_global: &Global, _args: &DeployArgs, _mode: Mode) -> Exit {
    eprintln!(
        "error: this hyperforge was built without the `deploy` feature (it keeps the AWS SDK out of \
         the default build)\n  = help: cargo install --path . --features deploy, or cargo run \
         --features deploy --bin hyperforge -- ..."
    );
    Exit::Usage
}

#[cfg(feature = "deploy")]
pub fn run(global: &Global, args: &DeployArgs, mode: Mode) -> Exit {
    use hyperforge::deploy::{self, params, AssemblyDir, Console, DeployError, StdinPrompt};
    if args.fleet && args.member.is_none() && (args.from.is_some() || args.run_external) {
        eprintln!(
            "error: --from and --run-external take a stack, or a fleet member (--member)\n  = \
             help: `hyperforge deploy --fleet` deploys the StackSets; `--fleet --member NAME` then \
             deploys that member's other stages"
        );
        return Exit::Usage;
    }
    if args.fleet && mode != Mode::Deploy {
        eprintln!(
            "error: only `deploy` takes --fleet\n  = help: delete a fleet's stack instances and \
             StackSets with `aws cloudformation delete-stack-instances` and `delete-stack-set`"
        );
        return Exit::Usage;
    }
    let result = (|| -> Result<(), DeployError> {
        let mut options = deploy::DeployOptions {
            yes: args.yes,
            run_external: args.run_external,
            template_bucket: args.template_bucket.clone(),
            from_stage: args.from.clone(),
            ..Default::default()
        };
        options.aws.endpoint_url = args.aws.endpoint_url.clone();
        options.aws.region = args.aws.region.clone();
        options.aws.profile = args.aws.profile.clone();
        if let Some(file) = &args.parameters_file {
            options.parameters = params::read_parameters_file(file)?;
        }
        let console = Console::stdout();
        let mut prompt = StdinPrompt;
        if let (true, Some(member)) = (args.fleet, &args.member) {
            let fleet = deploy::FleetDir::load(global.fleet_out())?;
            let rt = deploy::runtime()?;
            rt.block_on(deploy::deploy_fleet_member(
                &fleet,
                member,
                &options,
                &console,
                &mut prompt,
            ))?;
            return Ok(());
        }
        if args.fleet {
            let fleet = deploy::FleetDir::load(global.fleet_out())?;
            let fleet_options = deploy::FleetDeployOptions {
                template_prefix: args.template_prefix.clone(),
                stack_set: args.stack_set.clone(),
                dry_run: args.dry_run,
            };
            let rt = deploy::runtime()?;
            rt.block_on(deploy::deploy_fleet(
                &fleet,
                &options,
                &fleet_options,
                &console,
                &mut prompt,
            ))?;
            return Ok(());
        }
        let assembly = AssemblyDir::load(global.out())?;
        let rt = deploy::runtime()?;
        let (a, s, o) = (
            &assembly,
            args.stack.as_deref().unwrap_or_default(),
            &options,
        );
        match mode {
            Mode::Deploy => rt.block_on(deploy::deploy(a, s, o, &console, &mut prompt))?,
            Mode::Diff => rt.block_on(deploy::diff(a, s, o, &console, &mut prompt))?,
            Mode::Destroy => rt.block_on(deploy::destroy(a, s, o, &console, &mut prompt))?,
        };
        Ok(())
    })();
    match result {
        Ok(()) => Exit::Ok,
        Err(e) => {
            eprintln!("error: {e}");
            match e {
                // The input was wrong (the CLI's usage exit code); everything else happened on
                // the AWS side or while waiting for it.
                DeployError::Manifest { .. }
                | DeployError::UnknownStack { .. }
                | DeployError::UnknownStage { .. }
                | DeployError::ParametersFile { .. }
                | DeployError::UnknownParameter { .. }
                | DeployError::MissingParameter { .. }
                | DeployError::TemplateTooLarge { .. }
                | DeployError::FleetManifest { .. }
                | DeployError::UnknownStackSet { .. } => Exit::Usage,
                _ => Exit::Failed,
            }
        }
    }
}
