//! `docs/diagnostics.md` documents every diagnostic code; it is generated from `Code::ALL`.
//! This test fails when the committed file is stale; `HYPERFORGE_BLESS=1` rewrites it.

use hyperforge::Code;
use std::path::Path;

#[test]
fn diagnostics_reference_is_up_to_date() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/diagnostics.md");
    let expected = Code::reference_markdown();
    if std::env::var_os("HYPERFORGE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &expected).expect("write docs/diagnostics.md");
        return;
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "docs/diagnostics.md is stale: run `HYPERFORGE_BLESS=1 cargo test --test it diagnostics_doc::`"
    );
    for code in Code::ALL {
        assert!(
            actual.contains(&format!("## {}: ", code.id())),
            "{code} undocumented"
        );
    }
}

/// `docs/models.md` lists the model catalog (the rustdoc of `catalog::models` includes it);
/// generated from the catalog, stale when it changes.
#[test]
fn model_catalog_reference_is_up_to_date() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/models.md");
    let expected = hyperforge::catalog::models_markdown();
    if std::env::var_os("HYPERFORGE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &expected).expect("write docs/models.md");
        return;
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "docs/models.md is stale: run `HYPERFORGE_BLESS=1 cargo test --test it diagnostics_doc::`"
    );
    for m in hyperforge::catalog::models() {
        assert!(
            actual.contains(&format!("`{}`", m.hf_id)),
            "{} unlisted",
            m.hf_id
        );
    }
}
