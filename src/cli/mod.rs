//! The `hyperforge` command line: argument parsing (clap), stack discovery, and one function
//! per subcommand. Every file it writes goes through `Assembly::write_to` (atomic).

/// `print!` that ignores a closed stdout (`hyperforge diff | head`) instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

/// `println!` that ignores a closed stdout.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod commands;
mod deploy;
mod fleet;
mod output;
mod plan;

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit codes (documented in `--help` and in the book, `docs/book/src/reference/cli.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Success.
    Ok = 0,
    /// Diagnostics with errors (or warnings with `--deny-warnings`), `synth --check` found
    /// differences, or `diff` found changes.
    Failed = 1,
    /// Usage or input error: bad arguments, unreadable stack files, unknown stack or code.
    Usage = 2,
    /// I/O error writing output.
    Io = 3,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e as u8)
    }
}

#[derive(Parser, Debug)]
#[command(
    name = "hyperforge",
    version,
    about = "Synthesize CloudFormation, Terraform JSON, Kubernetes YAML and a runbook for serving \
             open-weight models on AWS GPUs",
    after_help = concat!(
        "Examples:\n",
        "  hyperforge synth                      # every stack in stacks/ to hyperforge.out/\n",
        "  hyperforge synth --check              # CI: fail with a diff when hyperforge.out/ is stale\n",
        "  hyperforge validate --json\n",
        "  hyperforge synth --fleet stacks/fleets/kimi-k3-eks-fleet.yaml   # to hyperforge.fleet/\n",
        "  hyperforge explain HF0501\n\n",
        "Exit codes:\n",
        "  0  success\n",
        "  1  diagnostics with errors (or warnings with --deny-warnings), `synth --check` found\n",
        "     differences, or `diff` found changes\n",
        "  2  usage or input error: bad arguments, unreadable stacks directory or file, unknown\n",
        "     stack or diagnostic code\n",
        "  3  I/O error writing the output directory (the previous output is left as it was)",
    )
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// Options every subcommand accepts.
#[derive(Args, Debug, Clone)]
pub struct Global {
    /// Directory of stack files: every `*.yaml` in it is one, in name order.
    #[arg(long, global = true, value_name = "DIR", default_value = "stacks")]
    pub stacks: PathBuf,
    /// Output directory of the assembly [default: hyperforge.out; with --fleet,
    /// hyperforge.fleet].
    #[arg(long, global = true, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// When to color output (`auto`: only on a terminal, and never when NO_COLOR is set).
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

impl Global {
    /// The output directory: `--out`, or `hyperforge.out`.
    pub fn out(&self) -> &std::path::Path {
        self.out
            .as_deref()
            .unwrap_or(std::path::Path::new("hyperforge.out"))
    }

    /// A fleet's output directory: `--out`, or `hyperforge.fleet`.
    pub fn fleet_out(&self) -> &std::path::Path {
        self.out
            .as_deref()
            .unwrap_or(std::path::Path::new("hyperforge.fleet"))
    }
}

/// `--color`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// Color on a terminal unless NO_COLOR is set.
    Auto,
    /// Always color.
    Always,
    /// Never color.
    Never,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Write the assembly: artifacts of the selected formats and manifest.json
    #[command(after_help = "\
Examples:
  hyperforge synth
  hyperforge synth kimi-k3-eks --format cloudformation,kubernetes --out build/
  hyperforge synth --check            # in CI, after committing hyperforge.out/
  hyperforge synth --fleet stacks/fleets/kimi-k3-eks-fleet.yaml
  hyperforge synth --fleet fleet.yaml --out build/fleet --threads 4 --check
  hyperforge synth --policy wa-security-pillar --policy my-rules/

--policy evaluates Guard rules over the CloudFormation templates before anything is written, as
validate does: a failed rule (HF1001), a rule file that cannot be read or evaluated (HF1002)
or, with --deny-warnings, a warning leaves the output directory as it was and exits non-zero.
It needs the CloudFormation templates: with --format, include cloudformation.

With --check nothing is written: the assembly is regenerated in memory and compared with the
output directory (missing, extra and changed files); any difference is printed as a unified
diff and the exit code is 1.

With --fleet FILE the fleet file's members are synthesized instead of the stacks directory:
one assembly per distinct member description (assemblies/<first such member>/), each
member's Terraform root modules calling it (members/<member>/), the StackSet templates of the
CloudFormation stages every member shares (stacksets/), fleet.json and FLEET.md, to
hyperforge.fleet/ unless --out says otherwise. A summary gives the members, StackSets,
per-member stages, files and time. With --member, only that member's whole assembly is
written (to hyperforge.out/ unless --out says otherwise), as a stack alone is.")]
    Synth(SynthArgs),
    /// Report every diagnostic of the selected stacks without writing anything
    #[command(after_help = "\
Examples:
  hyperforge validate
  hyperforge validate kimi-k3-hyperpod --deny-warnings
  hyperforge validate --json | jq '.[].code'
  hyperforge validate --policy wa-security-pillar --policy eks-kms
  hyperforge validate --policy my-rules/          # every .guard file of a directory
  hyperforge validate --fleet stacks/fleets/kimi-k3-eks-fleet.yaml

--policy evaluates AWS CloudFormation Guard rules over every synthesized CloudFormation
template, in-process: a vendored pack from the AWS Guard Rules Registry (wa-security-pillar,
eks-kms; policy/README.md) or your own .guard file or directory. Each failed rule is an error
(HF1001) at the construct path of the resource, with the rule's fix; a rule file that cannot be
read (unknown, not a regular file, over 4 MiB) or evaluated (unparsable, nested past 64 levels)
is HF1002.

--fleet FILE validates every member of the fleet file (the fleet file's own problems, then each
member's diagnostics, at the stack file's lines) and writes nothing.

Exit code 0 when clean, 1 on errors (or warnings with --deny-warnings).")]
    Validate(ValidateArgs),
    /// Show what `synth` would change in the output directory
    #[command(after_help = "\
Examples:
  hyperforge diff
  hyperforge diff kimi-k3-eks --out build/

Exit code 0 and \"no changes\" when the output is current, 1 with a unified diff otherwise.")]
    Diff(DiffArgs),
    /// Deploy a synthesized stack through CloudFormation (feature `deploy`)
    #[command(after_help = "\
Examples:
  hyperforge synth && hyperforge deploy kimi-k3-eks
  hyperforge deploy kimi-k3-hyperpod --parameters-file params.json --template-bucket my-bucket
  hyperforge deploy kimi-k3-eks --from workload --run-external --yes
  hyperforge deploy --fleet --out fleet.out --template-bucket my-bucket --template-prefix kimi/
  hyperforge deploy --fleet --out fleet.out --stack-set kimi-k3-eks-fleet-nodes --dry-run
  hyperforge deploy --fleet --out fleet.out --member kimi-k3-eks-fleet-us-east-1 --run-external

Deploys the assembly in --out stage by stage: each CloudFormation stage is created, or updated
through a change set shown for confirmation (replacements flagged); helm and kubectl stages,
and each stage's steps (manifest.json `steps`: Secrets, checks, Job waits, the Capacity Block
node group's scale-up, the alarm topic's subscription), are printed as commands, or run with
--run-external. Credentials and region come from the AWS SDK's default chain (the steps' AWS
CLI gets --profile and --endpoint-url too); --endpoint-url (or HYPERFORGE_AWS_ENDPOINT_URL)
points at an emulator.

With --fleet, --out is a fleet's output (fleet.json): each StackSet, in order, is created or
updated (when its template changed), then each member's stack instance is created or updated
(when its parameter overrides changed), every operation followed to its end with each account
and region's status; a failed operation stops the deploy. The StackSets live in --region (by
default the first member's region); templates go to --template-bucket under --template-prefix
(needed for templates over 51,200 bytes). The members' other stages are printed, member by
member, with the instance stacks whose outputs they read. With --member, that member's other
stages are deployed as a stack's are (--from, --run-external), with credentials of its account:
its StackSet stages are skipped and their outputs read from its stack instances.")]
    Deploy(DeployArgs),
    /// Delete a deployed stack's stages in reverse order (feature `deploy`)
    #[command(after_help = "\
Example:
  hyperforge destroy kimi-k3-eks

Deleting the stacks does not refund Capacity Blocks or training plans: they are bought outside
the stacks and paid up front.")]
    Destroy(DeployArgs),
    /// Print a Kubernetes stage's objects with the values only a deployment knows filled in
    #[command(after_help = "\
Examples:
  hyperforge fill --out . kimi-k3-eks workload \\
    --value METRICS_WORKSPACE_ID=ws-0123abcd | kubectl apply -f -
  hyperforge fill --out hyperforge.out kimi-k3-eks-karpenter gpu-capacity \\
    --value GPU_POOL_CAPACITY_RESERVATION_ID=cr-0fedcba9876543210 | kubectl apply -f -

Reads --out's manifest.json: the stage's file carries a placeholder for each value its manifest
entry lists (`values`), an earlier stage's output or one of the stack's deploy-time inputs
(`inputs`). Each is given as --value VARIABLE=VALUE, the variable the runbook names it by; an
input not given takes its default. The file is printed with every placeholder replaced and is
itself left as it is. Every problem (a value missing or not an identifier or URL, a variable
the stage does not read, a placeholder no longer in the file) is reported at once, with exit
code 1.")]
    Fill(FillArgs),
    /// List the stacks, their stages in order and their artifacts
    #[command(after_help = "\
Example:
  hyperforge list --stacks stacks/")]
    List,
    /// Print the instance or model catalog as a table
    #[command(after_help = "\
Examples:
  hyperforge catalog instances
  hyperforge catalog models")]
    Catalog {
        /// Which catalog.
        #[arg(value_enum)]
        which: CatalogKind,
    },
    /// Print the documentation of a diagnostic code
    #[command(after_help = "\
Examples:
  hyperforge explain HF0501
  hyperforge explain hf0314

An unknown code exits with 2 and lists the known codes.")]
    Explain {
        /// The code, e.g. HF0501 (case-insensitive).
        code: String,
    },
    /// Estimate the hourly and 30-day cost of each stack's instances
    #[command(after_help = "\
Example:
  hyperforge cost kimi-k3-hyperpod

Prices are EC2 on-demand prices in us-east-1 from the catalog; Capacity Block and training
plan prices are set at purchase and are not included.")]
    Cost(StackArgs),
    /// List every layout of one replica of a catalog model: instance type, nodes, TP, PP
    #[command(after_help = "\
Examples:
  hyperforge plan moonshotai/Kimi-K3 --region us-east-1
  hyperforge plan moonshotai/Kimi-K3 --region us-west-2 --context 262144 --replicas 2
  hyperforge plan moonshotai/Kimi-K3 --region us-east-1 --reservation p6-b200.48xlarge:2

Each candidate is an instance type, the nodes one replica spans, its tensor parallel size (inside a
node) and pipeline parallel size (one stage per node). A layout serves when the weights fit in the
GPU memory vLLM may use and the headroom left holds the KV cache of one sequence of --context
tokens (default: the model's longest): the KV policy. Feasible layouts come first with their
memory per GPU, KV capacity and price in the region; every other layout follows with why it
cannot serve. It says when a single node suffices, so no multi-node layout is needed.

Exit code 0 when a layout serves, 1 when none does, 2 on a bad argument.")]
    Plan(PlanArgs),
    /// Print a shell completion script
    #[command(after_help = "\
Examples:
  hyperforge completions bash > ~/.local/share/bash-completion/completions/hyperforge
  hyperforge completions zsh > \"${fpath[1]}/_hyperforge\"
  hyperforge completions fish > ~/.config/fish/completions/hyperforge.fish")]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// `plan`.
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// The model's Hugging Face id (`hyperforge catalog models` lists them).
    #[arg(value_name = "MODEL")]
    pub model: String,
    /// The region the replicas run in (where the types are offered, and their prices).
    #[arg(long, value_name = "REGION")]
    pub region: String,
    /// The context one sequence must fit, tokens (default: the model's longest).
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub context: Option<u64>,
    /// Replicas to price (and to fit in --reservation).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=i64::from(hyperforge::catalog::plan::MAX_REPLICAS)))]
    pub replicas: u32,
    /// The fraction of GPU memory vLLM may use.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.90)]
    pub gpu_memory_utilization: f64,
    /// The most nodes one replica may span.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=i64::from(hyperforge::catalog::plan::MAX_NODES_PER_REPLICA)))]
    pub max_nodes: u32,
    /// A reservation the replicas must fit in, as its instance type and count.
    #[arg(long, value_name = "TYPE:COUNT")]
    pub reservation: Option<String>,
    /// Also print the smallest feasible layout as a stack file's `vllm_deployment` fields or as
    /// the Rust builder calls, to paste into a description.
    #[arg(long, value_name = "FORM")]
    pub emit: Option<EmitForm>,
}

/// How `plan --emit` prints the chosen layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EmitForm {
    /// A stack file's `vllm_deployment` fields.
    StackFile,
    /// The Rust builder calls.
    Rust,
}

/// `diff`.
#[derive(Args, Debug)]
pub struct DiffArgs {
    #[command(flatten)]
    pub select: StackArgs,
    /// Compare with the deployed CloudFormation stacks instead (change sets created, described
    /// and deleted, never executed; feature `deploy`). Takes exactly one stack and the
    /// deploy options.
    #[arg(long)]
    pub deployed: bool,
    #[command(flatten)]
    pub aws: AwsArgs,
}

/// `fill`.
#[derive(Args, Debug)]
pub struct FillArgs {
    /// The stack (as manifest.json names it).
    #[arg(value_name = "STACK")]
    pub stack: String,
    /// The Kubernetes stage.
    #[arg(value_name = "STAGE")]
    pub stage: String,
    /// A value the stage reads, by its variable.
    #[arg(long = "value", value_name = "VARIABLE=VALUE")]
    pub values: Vec<String>,
}

/// `deploy` and `destroy`.
#[derive(Args, Debug)]
pub struct DeployArgs {
    /// The stack to deploy (its stages are read from `--out`'s manifest.json).
    #[arg(value_name = "STACK", required_unless_present = "fleet")]
    pub stack: Option<String>,
    /// Deploy the StackSets of the fleet in `--out` (its fleet.json) instead of one stack.
    #[arg(long, conflicts_with_all = ["stack", "parameters_file"])]
    pub fleet: bool,
    /// (--fleet) Deploy this member's stages that no StackSet deploys (Helm, Kubernetes,
    /// per-member CloudFormation), with credentials of its account, after the StackSets; its
    /// StackSet stages' outputs are read from its stack instances.
    #[arg(long, value_name = "MEMBER", requires = "fleet", conflicts_with_all = ["stack_set", "dry_run"])]
    pub member: Option<String>,
    /// (--fleet) Key prefix of the StackSet templates in --template-bucket.
    #[arg(long, value_name = "PREFIX", requires = "fleet", default_value = "")]
    pub template_prefix: String,
    /// (--fleet) Deploy only this StackSet.
    #[arg(long, value_name = "NAME", requires = "fleet")]
    pub stack_set: Option<String>,
    /// (--fleet) Print what would be created and updated; change nothing.
    #[arg(long, requires = "fleet")]
    pub dry_run: bool,
    /// Answer yes to every confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Run helm and kubectl stages and the stages' steps (the tools must be on PATH) instead of
    /// printing them.
    #[arg(long)]
    pub run_external: bool,
    /// Start at this stage (after running the printed external commands yourself).
    #[arg(long, value_name = "STAGE")]
    pub from: Option<String>,
    /// A JSON object of the stack's deploy-time inputs (`{"Name": "value"}`, the names
    /// manifest.json lists under `inputs`): each is passed to every CloudFormation stage that
    /// declares it and put in place of a Kubernetes stage's placeholder for it; an input not
    /// given keeps its default.
    #[arg(long, value_name = "FILE")]
    pub parameters_file: Option<PathBuf>,
    /// Bucket for templates over the 51,200-byte inline limit.
    #[arg(long, value_name = "BUCKET")]
    pub template_bucket: Option<String>,
    #[command(flatten)]
    pub aws: AwsArgs,
}

/// Where and as whom to talk to AWS.
#[derive(Args, Debug, Default)]
pub struct AwsArgs {
    /// Another endpoint (an emulator such as moto); also HYPERFORGE_AWS_ENDPOINT_URL.
    #[arg(long, value_name = "URL")]
    pub endpoint_url: Option<String>,
    /// Region (default: the stack's region).
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
    /// A named profile of the AWS configuration.
    #[arg(long, value_name = "PROFILE")]
    pub profile: Option<String>,
}

/// Stack selection.
#[derive(Args, Debug)]
pub struct StackArgs {
    /// Stack names to use (default: every stack).
    #[arg(value_name = "STACK", id = "stack_names")]
    pub names: Vec<String>,
}

/// `synth`.
#[derive(Args, Debug)]
pub struct SynthArgs {
    #[command(flatten)]
    pub select: StackArgs,
    /// Formats to write, comma-separated (default: all).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "FORMAT")]
    pub format: Vec<FormatArg>,
    /// Compare with the output directory instead of writing; exit 1 with a diff if it differs.
    #[arg(long)]
    pub check: bool,
    /// Print the time of each phase on standard error: loading the stack files, validation,
    /// expansion, lowering, serialization and the runbook (summed over stacks; with --fleet,
    /// over the distinct assemblies synthesized), then writing or comparing.
    #[arg(long)]
    pub timings: bool,
    /// Treat warnings as errors.
    #[arg(long)]
    pub deny_warnings: bool,
    /// Also evaluate Guard policy rules: a vendored pack (`wa-security-pillar`, `eks-kms`)
    /// or a `.guard` file or directory of them. Repeatable.
    #[arg(long, value_name = "NAME|FILE", conflicts_with = "fleet")]
    pub policy: Vec<String>,
    /// Synthesize the members of this fleet file instead of the stacks directory.
    #[arg(long, value_name = "FILE", conflicts_with = "stack_names")]
    pub fleet: Option<PathBuf>,
    /// With --fleet: members synthesized at once (default: one per core).
    #[arg(long, value_name = "N", requires = "fleet")]
    pub threads: Option<usize>,
    /// With --fleet: synthesize only this member, to its whole assembly (in --out, by
    /// default hyperforge.out): byte for byte what its stack alone gives.
    #[arg(
        long,
        value_name = "MEMBER",
        requires = "fleet",
        conflicts_with = "threads"
    )]
    pub member: Option<String>,
}

/// `validate`.
#[derive(Args, Debug)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub select: StackArgs,
    /// Print the diagnostics as a JSON array on stdout.
    #[arg(long)]
    pub json: bool,
    /// Treat warnings as errors.
    #[arg(long)]
    pub deny_warnings: bool,
    /// Also evaluate Guard policy rules: a vendored pack (`wa-security-pillar`, `eks-kms`)
    /// or a `.guard` file or directory of them. Repeatable.
    #[arg(long, value_name = "NAME|FILE", conflicts_with = "fleet")]
    pub policy: Vec<String>,
    /// Validate every member of this fleet file instead of the stacks directory.
    #[arg(long, value_name = "FILE", conflicts_with = "stack_names")]
    pub fleet: Option<PathBuf>,
}

/// An output format on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// CloudFormation templates (with the Helm values and scripts their stages deploy).
    Cloudformation,
    /// Terraform root modules (with the Helm values and scripts they read).
    Terraform,
    /// Kubernetes manifests.
    Kubernetes,
    /// RUNBOOK.md per stack.
    Runbook,
}

impl From<FormatArg> for hyperforge::Format {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::Cloudformation => hyperforge::Format::CloudFormation,
            FormatArg::Terraform => hyperforge::Format::Terraform,
            FormatArg::Kubernetes => hyperforge::Format::Kubernetes,
            FormatArg::Runbook => hyperforge::Format::Runbook,
        }
    }
}

/// `catalog`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CatalogKind {
    /// GPU instance types.
    Instances,
    /// Models.
    Models,
}

/// Runs the command line and returns the process exit code.
pub fn main() -> ExitCode {
    // `--version` (or `-V`) alone is answered before clap builds the whole command tree, with
    // the line clap would print.
    let mut args = std::env::args_os().skip(1);
    if let (Some(only), None) = (args.next(), args.next()) {
        if only == "--version" || only == "-V" {
            println!("hyperforge {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
    }
    let cli = Cli::parse();
    let color = output::Color::resolve(cli.global.color);
    let exit = match cli.command {
        Command::Synth(args) => commands::synth(&cli.global, color, &args),
        Command::Validate(args) => commands::validate(&cli.global, &args),
        Command::Diff(args) if args.deployed => match args.select.names.as_slice() {
            [stack] => {
                let deploy_args = DeployArgs {
                    stack: Some(stack.clone()),
                    fleet: false,
                    member: None,
                    template_prefix: String::new(),
                    stack_set: None,
                    dry_run: false,
                    yes: true,
                    run_external: false,
                    from: None,
                    parameters_file: None,
                    template_bucket: None,
                    aws: args.aws,
                };
                deploy::run(&cli.global, &deploy_args, deploy::Mode::Diff)
            }
            _ => {
                eprintln!("error: `diff --deployed` takes exactly one stack");
                Exit::Usage
            }
        },
        Command::Diff(args) => commands::diff(&cli.global, color, &args.select),
        Command::Deploy(args) => deploy::run(&cli.global, &args, deploy::Mode::Deploy),
        Command::Destroy(args) => deploy::run(&cli.global, &args, deploy::Mode::Destroy),
        Command::Fill(args) => commands::fill(&cli.global, &args),
        Command::List => commands::list(&cli.global),
        Command::Catalog { which } => commands::catalog(which),
        Command::Explain { code } => commands::explain(&code),
        Command::Plan(args) => plan::run(&args),
        Command::Cost(args) => commands::cost(&cli.global, &args),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "hyperforge", &mut std::io::stdout());
            Exit::Ok
        }
    };
    exit.into()
}
