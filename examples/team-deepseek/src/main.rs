//! Writes the team's deployment: `cargo run -p team-deepseek -- <output directory>`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "team-deepseek.out".to_owned());
    match team_deepseek::app().synth() {
        Ok(assembly) => {
            if !assembly.warnings().is_empty() {
                eprintln!("{}", assembly.warnings());
            }
            match assembly.write_to(std::path::Path::new(&out)) {
                Ok(()) => {
                    println!("wrote {out}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(diagnostics) => {
            eprintln!("{diagnostics}");
            ExitCode::FAILURE
        }
    }
}
