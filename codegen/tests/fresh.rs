//! The committed generated sources must match what the generator produces from the schemas.

#[test]
fn generated_code_is_fresh() {
    let root = hyperforge_codegen::workspace_root();
    let files = match hyperforge_codegen::generate_all(&root) {
        Ok(files) => files,
        Err(e) => panic!("generation failed: {e}"),
    };
    let stale = hyperforge_codegen::stale_files(&root, &files);
    assert!(
        stale.is_empty(),
        "generated code is stale: run `cargo run -p hyperforge-codegen`\n  {}",
        stale.join("\n  ")
    );
}
