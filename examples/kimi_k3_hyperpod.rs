//! Synthesizes the Kimi K3 on HyperPod reference stack.
//!
//! ```sh
//! cargo run --example kimi_k3_hyperpod            # writes hyperforge.out/
//! cargo run --example kimi_k3_hyperpod -- out/    # writes out/
//! ```
//!
//! Prints every diagnostic (rustc style) and exits 1 without touching the output directory
//! when the description has an error.

mod reference;

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let out = std::env::args_os()
        .nth(1)
        .map_or_else(|| PathBuf::from("hyperforge.out"), PathBuf::from);
    let app = reference::kimi_k3_hyperpod();
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
