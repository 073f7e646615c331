//! CloudFormation service limits checked on each rendered template, after lowering: body size
//! (over 51,200 bytes it must be deployed from S3, `HF0601`; over 1,000,000 bytes it is
//! refused, `HF0602`), 500 resources (`HF0603`), 200 outputs (`HF0604`), 200 parameters
//! (`HF0605`), and logical ids `^[a-zA-Z0-9]+$` of at most 255 characters (`HF0606`).
//!
//! Source: AWS CloudFormation quotas page and cfn-lint's `LIMITS` (template body 51,200 bytes
//! inline and 1,000,000 bytes from S3, 500 resources, 200 outputs, 200 parameters).

use crate::diagnostics::{Code, Diagnostics};
use serde_json::Value;

/// Largest template body accepted inline (`TemplateBody`), in bytes; the deploy path uploads
/// larger templates to S3.
pub const INLINE_TEMPLATE_BYTES: usize = 51_200;
/// Largest template body accepted from S3.
pub const S3_TEMPLATE_BYTES: usize = 1_000_000;
/// Resources per template.
pub const MAX_RESOURCES: usize = 500;
/// Outputs per template.
pub const MAX_OUTPUTS: usize = 200;
/// Parameters per template.
pub const MAX_PARAMETERS: usize = 200;
/// Longest logical id.
pub const MAX_LOGICAL_ID: usize = 255;

/// Whether `id` is a valid CloudFormation logical id.
pub fn is_logical_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_LOGICAL_ID && id.chars().all(|c| c.is_ascii_alphanumeric())
}

fn section<'a>(template: &'a Value, name: &str) -> Option<&'a serde_json::Map<String, Value>> {
    template.get(name).and_then(Value::as_object)
}

/// Checks `template`, rendered as `body_bytes` bytes, reporting at `path` (the artifact).
pub fn check_template(template: &Value, body_bytes: usize, path: &str, ds: &mut Diagnostics) {
    if body_bytes > S3_TEMPLATE_BYTES {
        ds.report(
            Code::TemplateTooLarge,
            path,
            format!("the template is {body_bytes} bytes, over CloudFormation's limit of {S3_TEMPLATE_BYTES}"),
            "split the stage's constructs over several CloudFormation stages",
        );
    } else if body_bytes > INLINE_TEMPLATE_BYTES {
        ds.report(
            Code::TemplateNeedsS3Upload,
            path,
            format!("the template is {body_bytes} bytes, over the {INLINE_TEMPLATE_BYTES}-byte inline limit"),
            "deploy it from S3: `aws cloudformation deploy --s3-bucket <bucket> ...`",
        );
    }
    let count = |name| section(template, name).map_or(0, |s| s.len());
    for (name, limit, code) in [
        ("Resources", MAX_RESOURCES, Code::TooManyResources),
        ("Outputs", MAX_OUTPUTS, Code::TooManyOutputs),
        ("Parameters", MAX_PARAMETERS, Code::TooManyParameters),
    ] {
        let n = count(name);
        if n > limit {
            ds.report(
                code,
                path,
                format!(
                    "the template has {n} {}, the limit is {limit}",
                    name.to_lowercase()
                ),
                "split the stage's constructs over several CloudFormation stages",
            );
        }
    }
    for name in ["Resources", "Outputs", "Parameters"] {
        for key in section(template, name).into_iter().flat_map(|s| s.keys()) {
            if !is_logical_id(key) {
                ds.report(
                    Code::InvalidLogicalId,
                    path,
                    format!("{} key `{key}` is not a valid logical id", name.trim_end_matches('s').to_lowercase()),
                    "logical ids are 1-255 ASCII letters and digits; rename the construct (ids derive from construct paths)",
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn logical_ids() {
        assert!(is_logical_id("NetworkVpc"));
        assert!(!is_logical_id("Network-Vpc"));
        assert!(!is_logical_id(&"A".repeat(256)));
    }

    #[test]
    fn small_template_passes_and_large_counts_fail() {
        let mut ds = Diagnostics::new();
        check_template(
            &json!({"Resources": {"A": {}}}),
            100,
            "s/01-f.template.json",
            &mut ds,
        );
        assert!(ds.is_empty());
        let resources: serde_json::Map<String, Value> =
            (0..501).map(|i| (format!("R{i}"), json!({}))).collect();
        let outputs: serde_json::Map<String, Value> =
            (0..201).map(|i| (format!("O{i}"), json!({}))).collect();
        let parameters: serde_json::Map<String, Value> =
            (0..201).map(|i| (format!("P{i}"), json!({}))).collect();
        let mut t = json!({"Resources": resources, "Outputs": outputs, "Parameters": parameters});
        t["Outputs"]["Bad-Id"] = json!({});
        check_template(&t, 60_000, "s/01-f.template.json", &mut ds);
        for code in [
            Code::TemplateNeedsS3Upload,
            Code::TooManyResources,
            Code::TooManyOutputs,
            Code::TooManyParameters,
            Code::InvalidLogicalId,
        ] {
            assert!(ds.contains(code, "s/01-f.template.json"), "{code}: {ds}");
        }
        let mut ds = Diagnostics::new();
        check_template(&json!({}), 1_000_001, "p", &mut ds);
        assert!(ds.contains(Code::TemplateTooLarge, "p"));
        assert!(!ds.contains(Code::TemplateNeedsS3Upload, "p"));
    }
}
