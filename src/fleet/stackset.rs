//! One StackSet template from the members' own templates of a CloudFormation stage.
//!
//! Members of one model are the same stack (`FleetMember::stack`) in different accounts and
//! regions, so their templates differ only where constructs declared a deploy-time input (a
//! capacity id, zone ids): a template parameter whose default is the member's value. [`bind`]
//! takes those defaults out by the parameters' names; the values become the member's
//! overrides. A member value reaches a template in no other way: the account and region are
//! `AWS::AccountId` and `AWS::Region` wherever a name must differ between them (a bucket's),
//! and nothing searches a template for a member's values. When every member's template binds
//! to the same bytes, that is the StackSet's template; this is checked, never assumed, so a
//! description that writes a member's own value into its stack (its member name, say) makes
//! the stage one the members deploy on their own, with the first difference as the reason.

use serde_json::Value;
use std::collections::BTreeMap;

/// One member's template with its declared inputs as parameters without defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct Bound {
    /// The template.
    pub template: Value,
    /// The member's value of every parameter bound.
    pub overrides: BTreeMap<String, String>,
}

/// Takes the default of every parameter of `template` (one member's) that `inputs` names (a
/// declared input, with the member's value) out: the value becomes the member's override. An
/// input the template does not declare is not used by this stage and binds nothing.
pub fn bind(template: &Value, inputs: &BTreeMap<String, String>) -> Bound {
    let mut out = template.clone();
    let mut overrides = BTreeMap::new();
    let parameters = out
        .get_mut("Parameters")
        .and_then(Value::as_object_mut)
        .into_iter()
        .flat_map(|m| m.iter_mut());
    for (name, parameter) in parameters {
        if let (Some(value), Some(parameter)) = (inputs.get(name), parameter.as_object_mut()) {
            parameter.remove("Default");
            overrides.insert(name.clone(), value.clone());
        }
    }
    Bound {
        template: out,
        overrides,
    }
}

/// The first place two templates differ, as a JSON pointer with both values (shortened).
pub fn first_difference(a: &Value, b: &Value) -> String {
    fn walk(a: &Value, b: &Value, at: &mut String) -> Option<String> {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                for (k, va) in x {
                    let len = at.len();
                    at.push('/');
                    at.push_str(&k.replace('~', "~0").replace('/', "~1"));
                    match y.get(k) {
                        Some(vb) => {
                            if let Some(d) = walk(va, vb, at) {
                                return Some(d);
                            }
                        }
                        None => return Some(format!("`{at}` is only in one")),
                    }
                    at.truncate(len);
                }
                y.keys()
                    .find(|k| !x.contains_key(*k))
                    .map(|k| format!("`{at}/{k}` is only in one"))
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                    let len = at.len();
                    at.push_str(&format!("/{i}"));
                    if let Some(d) = walk(va, vb, at) {
                        return Some(d);
                    }
                    at.truncate(len);
                }
                None
            }
            _ if a == b => None,
            _ => Some(format!(
                "`{}` is {} in one and {} in the other",
                if at.is_empty() { "/" } else { at.as_str() },
                short(a),
                short(b)
            )),
        }
    }
    walk(a, b, &mut String::new()).unwrap_or_else(|| "they are equal".to_owned())
}

fn short(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 80 {
        format!("{}...", text.chars().take(77).collect::<String>())
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template(capacity: &str) -> Value {
        json!({
            "AWSTemplateFormatVersion": "2010-09-09",
            "Parameters": {
                "Reservation": {"Type": "String", "Default": capacity},
                "Other": {"Type": "String", "Default": "kept"}
            },
            "Resources": {
                "Bucket": {
                    "Type": "AWS::S3::Bucket",
                    "Properties": {
                        "BucketName": {"Fn::Sub": "weights-${AWS::AccountId}-${AWS::Region}"},
                        "Tags": [{"Key": "Reservation", "Value": {"Ref": "Reservation"}}]
                    }
                }
            }
        })
    }

    #[test]
    fn declared_inputs_lose_their_defaults_and_become_overrides() {
        let inputs = |c: &str| BTreeMap::from([("Reservation".to_owned(), c.to_owned())]);
        let a = bind(
            &template("cr-0aaaaaaaaaaaaaaaa"),
            &inputs("cr-0aaaaaaaaaaaaaaaa"),
        );
        let b = bind(
            &template("cr-0bbbbbbbbbbbbbbbb"),
            &inputs("cr-0bbbbbbbbbbbbbbbb"),
        );
        assert_eq!(
            a.template,
            b.template,
            "{}",
            first_difference(&a.template, &b.template)
        );
        assert!(a.template["Parameters"]["Reservation"]
            .get("Default")
            .is_none());
        // A parameter that is not a declared input keeps its default.
        assert_eq!(a.template["Parameters"]["Other"]["Default"], json!("kept"));
        assert_eq!(a.overrides, inputs("cr-0aaaaaaaaaaaaaaaa"));
        // Everything else is as the member's template has it.
        assert_eq!(a.template["Resources"], template("x")["Resources"]);
    }

    #[test]
    fn a_members_value_outside_its_inputs_makes_the_templates_differ() {
        // A reservation id also written as a literal is never searched for: the members'
        // templates then differ there, instead of one member's id being deployed to another.
        let with_literal = |capacity: &str| {
            let mut t = template(capacity);
            t["Resources"]["Bucket"]["Properties"]["Reservation"] = json!(capacity);
            t
        };
        let inputs = |c: &str| BTreeMap::from([("Reservation".to_owned(), c.to_owned())]);
        let a = bind(
            &with_literal("cr-0aaaaaaaaaaaaaaaa"),
            &inputs("cr-0aaaaaaaaaaaaaaaa"),
        );
        let b = bind(
            &with_literal("cr-0bbbbbbbbbbbbbbbb"),
            &inputs("cr-0bbbbbbbbbbbbbbbb"),
        );
        let why = first_difference(&a.template, &b.template);
        assert!(
            why.contains("/Resources/Bucket/Properties/Reservation"),
            "{why}"
        );
    }
}
