//! Deploys (or diffs, or destroys) one stack of a written assembly directory.
//!
//! ```sh
//! cargo run --features deploy --example deploy -- <assembly-dir> <stack> [--yes] \
//!     [--endpoint-url URL] [--region R] [--profile P] [--parameters-file F] \
//!     [--template-bucket B] [--run-external] [--from STAGE] [--destroy] [--diff]
//! ```
//!
//! Credentials come from the AWS SDK's default chain (environment, profile, SSO, instance
//! role). `HYPERFORGE_AWS_ENDPOINT_URL` points every call at an emulator.

use hyperforge::deploy::{
    self, params, AssemblyDir, Console, DeployError, DeployOptions, StdinPrompt,
};
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: deploy <assembly-dir> <stack> [--yes] [--endpoint-url URL] [--region R] [--profile P] [--parameters-file F] [--template-bucket B] [--run-external] [--from STAGE] [--destroy] [--diff]";

#[derive(PartialEq)]
enum Mode {
    Deploy,
    Diff,
    Destroy,
}

struct Args {
    dir: PathBuf,
    stack: String,
    mode: Mode,
    parameters_file: Option<PathBuf>,
    options: DeployOptions,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut positional = Vec::new();
    let mut options = DeployOptions::default();
    let mut mode = Mode::Deploy;
    let mut parameters_file = None;
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--yes" | "-y" => options.yes = true,
            "--run-external" => options.run_external = true,
            "--diff" => mode = Mode::Diff,
            "--destroy" => mode = Mode::Destroy,
            "--endpoint-url" => options.aws.endpoint_url = Some(value(&arg)?),
            "--region" => options.aws.region = Some(value(&arg)?),
            "--profile" => options.aws.profile = Some(value(&arg)?),
            "--template-bucket" => options.template_bucket = Some(value(&arg)?),
            "--from" => options.from_stage = Some(value(&arg)?),
            "--parameters-file" => parameters_file = Some(PathBuf::from(value(&arg)?)),
            "-h" | "--help" => return Err(USAGE.to_owned()),
            a if a.starts_with('-') => return Err(format!("unknown option `{a}`\n{USAGE}")),
            _ => positional.push(arg),
        }
    }
    let [dir, stack] = <[String; 2]>::try_from(positional).map_err(|_| USAGE.to_owned())?;
    Ok(Args {
        dir: PathBuf::from(dir),
        stack,
        mode,
        parameters_file,
        options,
    })
}

fn run(mut args: Args) -> Result<(), DeployError> {
    if let Some(file) = &args.parameters_file {
        args.options.parameters = params::read_parameters_file(file)?;
    }
    let assembly = AssemblyDir::load(&args.dir)?;
    let console = Console::stdout();
    let mut prompt = StdinPrompt;
    let rt = deploy::runtime()?;
    let (a, s, o) = (&assembly, args.stack.as_str(), &args.options);
    match args.mode {
        Mode::Deploy => rt.block_on(deploy::deploy(a, s, o, &console, &mut prompt))?,
        Mode::Diff => rt.block_on(deploy::diff(a, s, o, &console, &mut prompt))?,
        Mode::Destroy => rt.block_on(deploy::destroy(a, s, o, &console, &mut prompt))?,
    };
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
