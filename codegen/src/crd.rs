//! Kubernetes custom resource types from CustomResourceDefinition manifests: plain serde
//! structs for the spec, and a root object (`metadata` and `spec`) implementing k8s-openapi's
//! `Resource` and `Metadata` traits, serialized with its `apiVersion` and `kind` first, as
//! k8s-openapi serializes its own types.

use crate::model::{FieldDef, StructDef};
use crate::names::{doc, field_ident, pascal, serde_camel, snake};
use crate::Error;
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// One generated CRD module.
pub struct CrdModule {
    /// Module name, e.g. `inference_endpoint_config`.
    pub module: String,
    /// Unformatted Rust source.
    pub source: String,
}

/// Replaces Helm template expressions (`{{ ... }}`) with a placeholder so the manifest parses.
pub fn strip_templates(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        match rest[start..].find("}}") {
            Some(end) => {
                out.push_str("HELM-TEMPLATE");
                rest = &rest[start + end + 2..];
            }
            None => {
                rest = &rest[start..];
                break;
            }
        }
    }
    out.push_str(rest);
    out
}

/// What a vendored CRD defines for the served-versions table: its group, kind, the versions its
/// controller serves (`served: true`) and the origin its first line records.
pub struct Served {
    /// The API group.
    pub group: String,
    /// The kind.
    pub kind: String,
    /// The served versions, in the CRD's order.
    pub versions: Vec<String>,
    /// The `# source:` line's text.
    pub source: String,
}

/// The served versions of the CRD in `text`.
pub fn served(schema_path: &str, text: &str) -> Result<Served, Error> {
    let source = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("# source: "))
        .ok_or_else(|| {
            Error(format!(
                "{schema_path}: the first line is not `# source: ...`"
            ))
        })?;
    // The origin alone, without the notes on how the file was kept.
    let source = [". Contains ", ". Data file"]
        .iter()
        .filter_map(|cut| source.find(cut))
        .min()
        .map_or(source, |at| &source[..at])
        .to_owned();
    let crd = Parsed::new(schema_path, text)?;
    let versions = crd
        .versions()?
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| v.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect::<Vec<_>>();
    if versions.is_empty() {
        return Err(crd.err("/spec/versions", "no served version"));
    }
    Ok(Served {
        group: crd.str("/spec/group")?,
        kind: crd.str("/spec/names/kind")?,
        versions,
        source,
    })
}

/// A CRD manifest parsed once, Helm template expressions replaced: what `served` and
/// `generate` read.
struct Parsed<'a> {
    schema_path: &'a str,
    doc: Value,
}

impl<'a> Parsed<'a> {
    fn new(schema_path: &'a str, text: &str) -> Result<Self, Error> {
        let doc = serde_yaml::from_str(&strip_templates(text))
            .map_err(|e| Error(format!("{schema_path}: invalid YAML: {e}")))?;
        Ok(Parsed { schema_path, doc })
    }

    fn err(&self, ptr: &str, msg: &str) -> Error {
        Error(format!("{}#{ptr}: {msg}", self.schema_path))
    }

    /// The string at `ptr`.
    fn str(&self, ptr: &str) -> Result<String, Error> {
        self.doc
            .pointer(ptr)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| self.err(ptr, "missing or not a string"))
    }

    /// `spec.versions`.
    fn versions(&self) -> Result<&Vec<Value>, Error> {
        self.doc
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .ok_or_else(|| self.err("/spec/versions", "missing or not an array"))
    }
}

/// Generates the module for `version` of the CRD in `text`.
pub fn generate(schema_path: &str, text: &str, version: &str) -> Result<CrdModule, Error> {
    let err = |ptr: &str, msg: &str| Error(format!("{schema_path}#{ptr}: {msg}"));
    let crd = Parsed::new(schema_path, text)?;
    let doc_value = &crd.doc;
    let group = crd.str("/spec/group")?;
    let kind = crd.str("/spec/names/kind")?;
    let plural = crd.str("/spec/names/plural")?;
    let namespaced = crd.str("/spec/scope")? == "Namespaced";
    let versions = crd.versions()?;
    let index = versions
        .iter()
        .position(|v| v.get("name").and_then(Value::as_str) == Some(version))
        .ok_or_else(|| err("/spec/versions", &format!("no version `{version}`")))?;
    let spec_ptr = format!("/spec/versions/{index}/schema/openAPIV3Schema/properties/spec");
    let spec = doc_value
        .pointer(&spec_ptr)
        .ok_or_else(|| err(&spec_ptr, "missing"))?;

    let mut gen = Gen {
        file: schema_path,
        taken: BTreeSet::new(),
        structs: Vec::new(),
        embedded: crate::CRD_EMBEDDED_CORE_TYPES
            .iter()
            .filter(|(crd, _, _)| *crd == schema_path)
            .map(|(_, below_spec, ty)| (format!("{spec_ptr}{below_spec}"), *ty))
            .collect(),
    };
    // An embedded type names a field the CRD has, or the table is stale.
    for (at, _) in &gen.embedded {
        if doc_value.pointer(at).is_none() {
            return Err(err(
                at,
                "named in CRD_EMBEDDED_CORE_TYPES but not in the CRD",
            ));
        }
    }
    let spec_name = format!("{kind}Spec");
    gen.taken.insert(spec_name.clone());
    gen.taken.insert(kind.clone());
    gen.build_struct(&spec_name, &kind, spec, &spec_ptr)?;

    let module = snake(&kind);
    let mut src = String::new();
    let _ = writeln!(
        src,
        "// @generated by hyperforge-codegen from {schema_path}. Do not edit; regenerate with `cargo run -p hyperforge-codegen`."
    );
    let _ = writeln!(
        src,
        "\n//! `{kind}` (`{group}/{version}`), generated from its vendored CRD.\n"
    );
    let spec_doc = gen
        .structs
        .first()
        .and_then(Option::as_ref)
        .and_then(|s| s.doc.clone());
    root_object(
        &mut src,
        &Root {
            group: &group,
            version,
            kind: &kind,
            plural: &plural,
            namespaced,
            spec_doc: spec_doc.as_deref(),
        },
    );
    let derives =
        "#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]";
    for s in gen.structs.iter().flatten() {
        let attrs = [
            derives.to_string(),
            "#[serde(rename_all = \"camelCase\")]".to_string(),
        ];
        s.render(&attrs, &mut src);
    }
    Ok(CrdModule {
        module,
        source: src,
    })
}

/// What the root object of a custom resource is generated from.
struct Root<'a> {
    group: &'a str,
    version: &'a str,
    kind: &'a str,
    plural: &'a str,
    namespaced: bool,
    spec_doc: Option<&'a str>,
}

/// The root object `{kind}`: its metadata and spec, a constructor, k8s-openapi's `Resource`
/// and `Metadata` traits, and a `Serialize` that writes `apiVersion`, `kind`, `metadata` and
/// `spec` in that order (deserializing ignores `apiVersion` and `kind`).
fn root_object(src: &mut String, root: &Root<'_>) {
    let Root {
        group,
        version,
        kind,
        plural,
        namespaced,
        spec_doc,
    } = *root;
    const META: &str = "k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta";
    let scope = if namespaced {
        "NamespaceResourceScope"
    } else {
        "ClusterResourceScope"
    };
    let _ = writeln!(
        src,
        "/// A `{kind}` object (`{group}/{version}`): its metadata and spec.\n\
         #[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]\n\
         pub struct {kind} {{\n\
         /// Standard object metadata.\n\
         pub metadata: {META},"
    );
    if let Some(doc) = spec_doc {
        let _ = writeln!(src, "/// {doc}");
    }
    let _ = writeln!(
        src,
        "pub spec: {kind}Spec,\n\
         }}\n\
         \n\
         crd_object!({kind}, {kind}Spec, {group:?}, {version:?}, {plural:?}, {scope});"
    );
}

struct Gen<'a> {
    file: &'a str,
    taken: BTreeSet<String>,
    structs: Vec<Option<StructDef>>,
    /// Absolute JSON pointers generated as a core type (`CRD_EMBEDDED_CORE_TYPES`).
    embedded: Vec<(String, &'static str)>,
}

impl Gen<'_> {
    fn err(&self, ptr: &str, msg: &str) -> Error {
        Error(format!("{}#{ptr}: {msg}", self.file))
    }

    fn unique(&mut self, base: String) -> String {
        if self.taken.insert(base.clone()) {
            return base;
        }
        let mut n = 2;
        loop {
            let candidate = format!("{base}{n}");
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
            n += 1;
        }
    }

    /// `prefix` names nested structs (`{prefix}{Field}`).
    fn build_struct(
        &mut self,
        name: &str,
        prefix: &str,
        schema: &Value,
        ptr: &str,
    ) -> Result<(), Error> {
        let slot = self.structs.len();
        self.structs.push(None);
        let required: BTreeSet<&str> = match schema.get("required") {
            Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
            _ => BTreeSet::new(),
        };
        let props = schema
            .get("properties")
            .and_then(Value::as_object)
            .ok_or_else(|| self.err(ptr, "expected an object with properties"))?;
        let mut fields = Vec::new();
        for (prop, pschema) in props {
            let pptr = format!("{ptr}/properties/{prop}");
            let child = format!("{prefix}{}", pascal(prop));
            let ty = self.ty(pschema, &pptr, &child)?;
            let ident = field_ident(prop);
            let rename = (serde_camel(&ident) != *prop).then(|| prop.clone());
            fields.push(FieldDef {
                ident,
                rename,
                ty,
                optional: !required.contains(prop.as_str()),
                doc: doc(pschema.get("description").and_then(Value::as_str)),
            });
        }
        let mut def = StructDef {
            name: name.to_string(),
            doc: doc(schema.get("description").and_then(Value::as_str)),
            fields,
        };
        def.dedupe_fields();
        self.structs[slot] = Some(def);
        Ok(())
    }

    fn ty(&mut self, schema: &Value, ptr: &str, child: &str) -> Result<String, Error> {
        if let Some((_, ty)) = self.embedded.iter().find(|(at, _)| at == ptr) {
            return Ok((*ty).to_owned());
        }
        let flag = |key: &str| schema.get(key).and_then(Value::as_bool) == Some(true);
        if flag("x-kubernetes-int-or-string") {
            return Ok("k8s_openapi::apimachinery::pkg::util::intstr::IntOrString".into());
        }
        if flag("x-kubernetes-preserve-unknown-fields") {
            return Ok("serde_json::Value".into());
        }
        match schema.get("type").and_then(Value::as_str) {
            Some("string") => Ok("String".into()),
            Some("integer") => Ok(match schema.get("format").and_then(Value::as_str) {
                Some("int32") => "i32".into(),
                _ => "i64".into(),
            }),
            Some("number") => Ok("f64".into()),
            Some("boolean") => Ok("bool".into()),
            Some("array") => match schema.get("items") {
                Some(items) => Ok(format!(
                    "Vec<{}>",
                    self.ty(items, &format!("{ptr}/items"), child)?
                )),
                None => Ok("Vec<serde_json::Value>".into()),
            },
            Some("object") | None => {
                if matches!(schema.get("properties"), Some(Value::Object(p)) if !p.is_empty()) {
                    let name = self.unique(child.to_string());
                    self.build_struct(&name, &name.clone(), schema, ptr)?;
                    return Ok(name);
                }
                if let Some(ap @ Value::Object(_)) = schema.get("additionalProperties") {
                    let value = self.ty(ap, &format!("{ptr}/additionalProperties"), child)?;
                    return Ok(format!("std::collections::BTreeMap<String, {value}>"));
                }
                Ok("serde_json::Value".into())
            }
            Some(other) => Err(self.err(ptr, &format!("unknown type `{other}`"))),
        }
    }
}
