//! `cargo run -p hyperforge-codegen` regenerates the committed sources;
//! `cargo run -p hyperforge-codegen -- --check` exits 1 listing the files that are out of date.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let check = match args.as_slice() {
        [] => false,
        [flag] if flag == "--check" => true,
        _ => {
            eprintln!("usage: hyperforge-codegen [--check]");
            return ExitCode::from(2);
        }
    };
    let root = hyperforge_codegen::workspace_root();
    let files = match hyperforge_codegen::generate_all(&root) {
        Ok(files) => files,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if check {
        let stale = hyperforge_codegen::stale_files(&root, &files);
        if stale.is_empty() {
            println!("{} generated files are up to date", files.len());
            return ExitCode::SUCCESS;
        }
        eprintln!("generated code is stale: run `cargo run -p hyperforge-codegen`");
        for path in stale {
            eprintln!("  {path}");
        }
        return ExitCode::FAILURE;
    }
    match hyperforge_codegen::write_files(&root, &files) {
        Ok(changed) => {
            for path in &changed {
                println!("wrote {path}");
            }
            println!("{} generated files, {} changed", files.len(), changed.len());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
