//! A small model of the emitted structs and its rendering to Rust source.

use std::fmt::Write as _;

/// One generated struct.
pub struct StructDef {
    pub name: String,
    pub doc: Option<String>,
    pub fields: Vec<FieldDef>,
}

/// One field of a generated struct.
pub struct FieldDef {
    /// Rust identifier (possibly raw, `r#type`).
    pub ident: String,
    /// Serialized name, when it differs from what the struct's serde naming produces.
    pub rename: Option<String>,
    /// The Rust type, without the `Option` wrapper.
    pub ty: String,
    pub optional: bool,
    pub doc: Option<String>,
}

impl StructDef {
    /// Makes field identifiers unique within the struct (`foo`, `foo_2`, ...).
    pub fn dedupe_fields(&mut self) {
        let mut seen = std::collections::BTreeSet::new();
        for field in &mut self.fields {
            let base = field.ident.clone();
            let mut n = 2;
            while !seen.insert(field.ident.clone()) {
                field.ident = format!("{}_{n}", base.trim_start_matches("r#"));
                n += 1;
            }
        }
    }

    /// Renders the struct with the given attribute lines (derives, serde container attributes).
    pub fn render(&self, attrs: &[String], out: &mut String) {
        if let Some(doc) = &self.doc {
            let _ = writeln!(out, "/// {doc}");
        }
        for attr in attrs {
            let _ = writeln!(out, "{attr}");
        }
        let _ = writeln!(out, "pub struct {} {{", self.name);
        for field in &self.fields {
            if let Some(doc) = &field.doc {
                let _ = writeln!(out, "/// {doc}");
            }
            let mut serde = Vec::new();
            if let Some(rename) = &field.rename {
                serde.push(format!("rename = {rename:?}"));
            }
            if field.optional {
                serde.push("skip_serializing_if = \"Option::is_none\"".to_string());
            }
            if !serde.is_empty() {
                let _ = writeln!(out, "#[serde({})]", serde.join(", "));
            }
            if field.optional {
                let _ = writeln!(out, "pub {}: Option<{}>,", field.ident, field.ty);
            } else {
                let _ = writeln!(out, "pub {}: {},", field.ident, field.ty);
            }
        }
        let _ = writeln!(out, "}}\n");
    }
}
