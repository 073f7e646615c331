//! Synthesizes the reference fleet: the Kimi K3 EKS stack in us-west-2, us-east-1 and
//! eu-west-2, each member on its region's Capacity Block, with StackSet templates for the
//! CloudFormation stages every member shares.
//!
//! ```sh
//! cargo run --example kimi_k3_fleet              # writes hyperforge.fleet/
//! cargo run --example kimi_k3_fleet -- out/      # writes out/
//! ```
//!
//! Prints every diagnostic and exits 1 without touching the output directory when a member
//! has an error.

mod reference;

use hyperforge::fleet::{FleetOptions, FleetWriteError};
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let out = std::env::args_os()
        .nth(1)
        .map_or_else(|| PathBuf::from("hyperforge.fleet"), PathBuf::from);
    let fleet = reference::kimi_k3_eks_fleet();
    match fleet.write_to(&out, &FleetOptions::default()) {
        Err(FleetWriteError::Diagnostics(diagnostics)) => {
            eprintln!("{diagnostics}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
        Ok(output) => {
            for warning in &output.warnings {
                eprintln!("{warning}\n");
            }
            println!(
                "wrote {} files ({} bytes) of {} members to {}",
                output.files,
                output.bytes,
                output.manifest.members.len(),
                out.display()
            );
            for set in &output.manifest.stack_sets {
                println!(
                    "  StackSet {}: {} ({} instances)",
                    set.name,
                    set.template,
                    set.instances.len()
                );
            }
            for stage in &output.manifest.per_member_stages {
                println!("  stage {} per member: {}", stage.stage, stage.reason);
            }
            ExitCode::SUCCESS
        }
    }
}
