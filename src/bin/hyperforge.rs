//! The `hyperforge` command: synthesize, validate, diff and inspect the stacks described by the
//! stack files of a directory. The code lives in `src/cli/` so the library stays free of it; the
//! binary is built with the `cli` feature (default), which brings its dependencies.

#[path = "../cli/mod.rs"]
mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
