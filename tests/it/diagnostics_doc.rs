//! `docs/diagnostics.md` documents every diagnostic code; it is generated from `Code::ALL`.
//! This test fails when the committed file is stale; `HYPERFORGE_BLESS=1` rewrites it.

use hyperforge::Code;

#[test]
fn diagnostics_reference_is_up_to_date() {
    let Some(actual) = crate::common::generated_file(
        "docs/diagnostics.md",
        &Code::reference_markdown(),
        "cargo test --test it diagnostics_doc::",
    ) else {
        return;
    };
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
    let Some(actual) = crate::common::generated_file(
        "docs/models.md",
        &hyperforge::catalog::models_markdown(),
        "cargo test --test it diagnostics_doc::",
    ) else {
        return;
    };
    for m in hyperforge::catalog::models() {
        assert!(
            actual.contains(&format!("`{}`", m.hf_id)),
            "{} unlisted",
            m.hf_id
        );
    }
}
