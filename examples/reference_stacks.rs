//! Synthesizes every reference stack (Kimi K3 on HyperPod and on EKS) into one assembly.
//!
//! ```sh
//! cargo run --example reference_stacks            # writes hyperforge.out/
//! cargo run --example reference_stacks -- out/    # writes out/
//! ```
//!
//! Prints every diagnostic (rustc style) and exits 1 without touching the output directory
//! when a description has an error.

mod reference;

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let out = std::env::args_os()
        .nth(1)
        .map_or_else(|| PathBuf::from("hyperforge.out"), PathBuf::from);
    let mut app = hyperforge::App::new().tag("managed-by", "hyperforge");
    for reference in reference::all().into_iter().chain(reference::variants()) {
        for stack in reference.stacks() {
            app.add_stack(stack.clone());
        }
    }
    match app.synth() {
        Err(diagnostics) => {
            eprintln!("{diagnostics}");
            ExitCode::FAILURE
        }
        Ok(assembly) => {
            for warning in assembly.warnings() {
                eprintln!("{warning}\n");
            }
            if let Err(e) = assembly.write_to(&out) {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
            println!(
                "wrote {} files to {}",
                assembly.files().len(),
                out.display()
            );
            for path in assembly.files().keys() {
                println!("  {path}");
            }
            ExitCode::SUCCESS
        }
    }
}
