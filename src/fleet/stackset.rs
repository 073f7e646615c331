//! One StackSet template from the members' own templates of a CloudFormation stage.
//!
//! Each member's template is rendered with its own values. Its declared inputs (a capacity id,
//! zone ids) are template parameters whose defaults are the member's values: [`generalize`]
//! binds them by name, taking the default out and making it the member's override. The
//! member's identity (its name, region, account, model, the fleet's own values), which
//! constructs take as plain names, is rewritten as parameters where the text holds it: a
//! string holding one becomes `Ref` or `Fn::Sub` of a parameter (the region and account the
//! `AWS::Region` and `AWS::AccountId` pseudo parameters). When every member's template
//! generalizes to the same bytes, that is the
//! StackSet's template and each member's values are its instance's overrides; this is checked,
//! never assumed, so a value that only looks like a member's (a fixed `us-east-1`, say) makes
//! the stage one the members deploy on their own, with the first difference as the reason.
//!
//! Intrinsics go only where CloudFormation evaluates them: resource properties and output
//! values and export names. Elsewhere (descriptions, metadata) a member value is replaced by
//! its parameter's name in angle brackets, as documentation, and in cdk-nag's acknowledged
//! findings, which name the properties as that pack flattens them. The arguments of `Ref`,
//! `Fn::GetAtt`, `Condition`, `Fn::FindInMap`, a `Fn::Join` or `Fn::Split` delimiter and a
//! `Fn::If` condition name are names, never rewritten.

use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A member value and how the StackSet template refers to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// The member's value.
    pub value: String,
    /// The parameter (or pseudo parameter, `AWS::Region`) standing for it.
    pub parameter: String,
    /// Whether `parameter` is a pseudo parameter (no declaration, no override).
    pub pseudo: bool,
    /// What the parameter holds (its `Description`).
    pub description: String,
    /// Whether the value is also replaced in text CloudFormation does not evaluate
    /// (descriptions, metadata): true for a value that names things (the member's name), false
    /// for one that hyperforge's own help texts may quote as an example (a zone id).
    pub in_text: bool,
}

/// One member's template with its values as parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Generalized {
    /// The template.
    pub template: Value,
    /// The member's value of every parameter the template declares for the fleet.
    pub overrides: BTreeMap<String, String>,
    /// Whether every place the template holds a member value in is parameterized or
    /// documentation (descriptions, metadata): only then is another member's template that is
    /// this one's text with its own values in the same places an instance of this one's
    /// generalization. A value in a condition, a mapping or a resource attribute such as
    /// `DependsOn` stays literal, and members are compared by their generalized templates.
    pub textually_faithful: bool,
}

/// Rewrites `template` (one member's) with `tokens` (its values, longest first is not
/// required: they are ordered here) as parameters, and takes the default of every parameter
/// in `bound` (a declared input, by name, with the member's value) out: the value becomes
/// the member's override.
pub fn generalize(
    template: &Value,
    tokens: &[Token],
    bound: &BTreeMap<String, String>,
) -> Generalized {
    let mut tokens: Vec<&Token> = tokens.iter().filter(|t| !t.value.is_empty()).collect();
    // Longest first, so a member name holding the region is replaced whole.
    tokens.sort_by(|a, b| {
        b.value
            .len()
            .cmp(&a.value.len())
            .then(a.parameter.cmp(&b.parameter))
    });
    let mut cx = Cx {
        tokens: &tokens,
        used: BTreeMap::new(),
        kept_token: false,
    };
    let mut out = template.clone();
    let mut overrides = BTreeMap::new();
    if let Some(root) = out.as_object_mut() {
        for (section, body) in root.iter_mut() {
            match section.as_str() {
                "Resources" => {
                    for resource in body
                        .as_object_mut()
                        .into_iter()
                        .flat_map(|m| m.values_mut())
                    {
                        let Some(resource) = resource.as_object_mut() else {
                            continue;
                        };
                        for (key, value) in resource.iter_mut() {
                            match key.as_str() {
                                "Properties" => cx.evaluated(value),
                                "Metadata" => {
                                    cx.findings(value);
                                    cx.textual(value);
                                }
                                _ => cx.kept(value),
                            }
                        }
                    }
                }
                "Outputs" => {
                    for output in body
                        .as_object_mut()
                        .into_iter()
                        .flat_map(|m| m.values_mut())
                    {
                        let Some(output) = output.as_object_mut() else {
                            continue;
                        };
                        for (key, value) in output.iter_mut() {
                            match key.as_str() {
                                "Value" => cx.evaluated(value),
                                "Export" => {
                                    if let Some(name) =
                                        value.as_object_mut().and_then(|e| e.get_mut("Name"))
                                    {
                                        cx.evaluated(name);
                                    }
                                }
                                "Description" => cx.textual(value),
                                _ => cx.kept(value),
                            }
                        }
                    }
                }
                "Parameters" => {
                    for (name, parameter) in
                        body.as_object_mut().into_iter().flat_map(|m| m.iter_mut())
                    {
                        let Some(parameter) = parameter.as_object_mut() else {
                            continue;
                        };
                        // A declared input is bound by its name, never found by its value.
                        if let Some(value) = bound.get(name) {
                            parameter.remove("Default");
                            overrides.insert(name.clone(), value.clone());
                        }
                        for (key, value) in parameter.iter_mut() {
                            match key.as_str() {
                                "Description" | "ConstraintDescription" => cx.textual(value),
                                _ => cx.kept(value),
                            }
                        }
                    }
                }
                "Description" | "Metadata" => cx.textual(body),
                _ => cx.kept(body),
            }
        }
    }
    let used: Vec<&Token> = cx.used.into_values().collect();
    // Parameters are only used inside an object template's sections.
    if let (false, Some(root)) = (used.is_empty(), out.as_object_mut()) {
        let parameters = root
            .entry("Parameters")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(parameters) = parameters.as_object_mut() {
            for token in used {
                let mut declaration = Map::new();
                declaration.insert("Type".into(), "String".into());
                declaration.insert("Description".into(), token.description.clone().into());
                parameters.insert(token.parameter.clone(), Value::Object(declaration));
                overrides.insert(token.parameter.clone(), token.value.clone());
            }
        }
        // The parameters section goes before the resources, as CloudFormation documents it.
        if root.keys().position(|k| k == "Parameters") > root.keys().position(|k| k == "Resources")
        {
            let entries = std::mem::take(root);
            let (parameters, rest): (Vec<_>, Vec<_>) =
                entries.into_iter().partition(|(k, _)| k == "Parameters");
            for (k, v) in rest {
                if k == "Resources" {
                    root.extend(parameters.iter().cloned());
                }
                root.insert(k, v);
            }
        }
    }
    Generalized {
        template: out,
        overrides,
        textually_faithful: !cx.kept_token,
    }
}

struct Cx<'a> {
    tokens: &'a [&'a Token],
    /// The non-pseudo parameters used, by name.
    used: BTreeMap<String, &'a Token>,
    /// A member value was found where it stays literal.
    kept_token: bool,
}

impl<'a> Cx<'a> {
    fn holds_token(&self, s: &str) -> bool {
        self.tokens.iter().any(|t| s.contains(t.value.as_str()))
    }

    /// A value CloudFormation evaluates: strings become `Ref` or `Fn::Sub`.
    fn evaluated(&mut self, value: &mut Value) {
        match value {
            Value::String(s) => {
                if let Some(replacement) = self.string(s) {
                    *value = replacement;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.evaluated(v)),
            Value::Object(map) if map.len() == 1 => {
                let Some((key, arg)) = map.iter_mut().next() else {
                    return;
                };
                match key.as_str() {
                    "Ref" | "Fn::GetAtt" | "Condition" | "Fn::FindInMap" => {}
                    "Fn::Sub" => match arg {
                        Value::String(s) => self.sub_template(s),
                        Value::Array(parts) => {
                            if let Some(Value::String(s)) = parts.get_mut(0) {
                                self.sub_template(s);
                            }
                            if let Some(vars) = parts.get_mut(1) {
                                self.evaluated(vars);
                            }
                        }
                        _ => {}
                    },
                    "Fn::Join" | "Fn::Split" | "Fn::If" => {
                        if let Value::Array(parts) = arg {
                            parts.iter_mut().skip(1).for_each(|v| self.evaluated(v));
                        }
                    }
                    _ => self.evaluated(arg),
                }
            }
            Value::Object(map) => map.values_mut().for_each(|v| self.evaluated(v)),
            _ => {}
        }
    }

    /// A plain string: `Ref` when it is exactly one value, `Fn::Sub` when it holds some.
    fn string(&mut self, s: &str) -> Option<Value> {
        if !self.holds_token(s) {
            return None;
        }
        if let Some(token) = self.tokens.iter().find(|t| t.value == s) {
            self.note(token);
            return Some(serde_json::json!({ "Ref": token.parameter }));
        }
        let escaped = s.replace("${", "${!");
        let mut text = escaped;
        self.replace(&mut text, |t| format!("${{{}}}", t.parameter));
        Some(serde_json::json!({ "Fn::Sub": text }))
    }

    /// A `Fn::Sub` template string: values become `${Parameter}` in place.
    fn sub_template(&mut self, s: &mut String) {
        if self.holds_token(s) {
            self.replace(s, |t| format!("${{{}}}", t.parameter));
        }
    }

    /// The findings cdk-nag's acknowledgements apply to (`cdk_nag.rules_to_suppress[].
    /// applies_to`) name the properties as cdk-nag flattens them, where a parameter is
    /// `<Name>`: every value the properties now take from a parameter (pseudo parameters too)
    /// is spelled so, in the same places.
    fn findings(&mut self, metadata: &mut Value) {
        let Some(rules) = metadata
            .pointer_mut("/cdk_nag/rules_to_suppress")
            .and_then(Value::as_array_mut)
        else {
            return;
        };
        let findings = rules
            .iter_mut()
            .filter_map(|rule| rule.get_mut("applies_to").and_then(Value::as_array_mut))
            .flatten()
            .filter_map(|f| match f {
                Value::String(s) => Some(s),
                _ => None,
            });
        for finding in findings {
            for t in self.tokens {
                if finding.contains(t.value.as_str()) {
                    *finding = finding.replace(t.value.as_str(), &format!("<{}>", t.parameter));
                }
            }
        }
    }

    /// Text CloudFormation does not evaluate: values become `<Parameter>`.
    fn textual(&mut self, value: &mut Value) {
        match value {
            Value::String(s) if self.holds_token(s) => {
                for t in self.tokens.iter().filter(|t| t.in_text) {
                    if s.contains(t.value.as_str()) {
                        *s = s.replace(t.value.as_str(), &format!("<{}>", t.parameter));
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.textual(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.textual(v)),
            _ => {}
        }
    }

    /// A value CloudFormation reads as written (a condition, a mapping, a parameter's
    /// allowed values): left as it is, noting whether it holds a member value.
    fn kept(&mut self, value: &Value) {
        match value {
            Value::String(s) => self.kept_token |= self.holds_token(s),
            Value::Array(items) => items.iter().for_each(|v| self.kept(v)),
            Value::Object(map) => map.values().for_each(|v| self.kept(v)),
            _ => {}
        }
    }

    fn replace(&mut self, s: &mut String, spell: impl Fn(&Token) -> String) {
        let tokens = self.tokens;
        for t in tokens {
            if s.contains(t.value.as_str()) {
                *s = s.replace(t.value.as_str(), &spell(t));
                self.note(t);
            }
        }
    }

    fn note(&mut self, token: &'a Token) {
        if !token.pseudo {
            self.used.insert(token.parameter.clone(), token);
        }
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

    fn tokens(member: &str, region: &str) -> Vec<Token> {
        vec![
            Token {
                value: member.into(),
                parameter: "FleetMember".into(),
                pseudo: false,
                description: "the member".into(),
                in_text: true,
            },
            Token {
                value: region.into(),
                parameter: "AWS::Region".into(),
                pseudo: true,
                description: String::new(),
                in_text: false,
            },
        ]
    }

    /// The member's declared inputs: the template's `Reservation` parameter.
    fn bound(capacity: &str) -> BTreeMap<String, String> {
        BTreeMap::from([("Reservation".to_owned(), capacity.to_owned())])
    }

    fn template(member: &str, region: &str, capacity: &str) -> Value {
        json!({
            "AWSTemplateFormatVersion": "2010-09-09",
            "Description": format!("{member} nodes"),
            "Parameters": {"Reservation": {"Type": "String", "Default": capacity, "ConstraintDescription": "such as cr-0aaaaaaaaaaaaaaaa"}},
            "Resources": {
                "Bucket": {
                    "Type": "AWS::S3::Bucket",
                    "Metadata": {"path": format!("{member}/Bucket")},
                    "Properties": {
                        "BucketName": format!("{member}-weights-{region}"),
                        "Tags": [{"Key": "Name", "Value": member}],
                        "Arn": {"Fn::Sub": format!("arn:${{AWS::Partition}}:s3:::{member}/*")},
                        "Other": {"Fn::Join": ["-", [member, {"Ref": "Reservation"}]]},
                        "Literal": "${NotAVariable}"
                    }
                }
            },
            "Outputs": {
                "Name": {"Value": {"Ref": "Bucket"}, "Export": {"Name": format!("{member}-nodes:Bucket")}}
            }
        })
    }

    #[test]
    fn members_generalize_to_one_template_with_their_values_as_overrides() {
        let a = generalize(
            &template("kimi-use1", "us-east-1", "cr-0aaaaaaaaaaaaaaaa"),
            &tokens("kimi-use1", "us-east-1"),
            &bound("cr-0aaaaaaaaaaaaaaaa"),
        );
        let b = generalize(
            &template("kimi-usw2", "us-west-2", "cr-0bbbbbbbbbbbbbbbb"),
            &tokens("kimi-usw2", "us-west-2"),
            &bound("cr-0bbbbbbbbbbbbbbbb"),
        );
        assert_eq!(
            a.template,
            b.template,
            "{}",
            first_difference(&a.template, &b.template)
        );
        let t = &a.template;
        assert_eq!(
            t["Resources"]["Bucket"]["Properties"]["BucketName"],
            json!({"Fn::Sub": "${FleetMember}-weights-${AWS::Region}"})
        );
        assert_eq!(
            t["Resources"]["Bucket"]["Properties"]["Tags"][0]["Value"],
            json!({"Ref": "FleetMember"})
        );
        assert_eq!(
            t["Resources"]["Bucket"]["Properties"]["Arn"],
            json!({"Fn::Sub": "arn:${AWS::Partition}:s3:::${FleetMember}/*"})
        );
        assert_eq!(
            t["Resources"]["Bucket"]["Properties"]["Other"],
            json!({"Fn::Join": ["-", [{"Ref": "FleetMember"}, {"Ref": "Reservation"}]]})
        );
        // A literal `${` in a plain string is escaped only when the string becomes a Sub.
        assert_eq!(
            t["Resources"]["Bucket"]["Properties"]["Literal"],
            json!("${NotAVariable}")
        );
        assert_eq!(t["Description"], json!("<FleetMember> nodes"));
        assert_eq!(
            t["Resources"]["Bucket"]["Metadata"]["path"],
            json!("<FleetMember>/Bucket")
        );
        assert_eq!(
            t["Outputs"]["Name"]["Export"]["Name"],
            json!({"Fn::Sub": "${FleetMember}-nodes:Bucket"})
        );
        assert!(t["Parameters"]["Reservation"].get("Default").is_none());
        assert_eq!(t["Parameters"]["FleetMember"]["Type"], json!("String"));
        // The capacity id is the declared input's value: no parameter of its own.
        assert_eq!(t["Parameters"].as_object().unwrap().len(), 2);
        assert_eq!(
            a.overrides,
            BTreeMap::from([
                ("FleetMember".to_owned(), "kimi-use1".to_owned()),
                ("Reservation".to_owned(), "cr-0aaaaaaaaaaaaaaaa".to_owned()),
            ])
        );
        let keys: Vec<&String> = t.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "AWSTemplateFormatVersion",
                "Description",
                "Parameters",
                "Resources",
                "Outputs"
            ]
        );
    }

    #[test]
    fn a_member_value_where_cloudformation_reads_text_as_written_is_noted() {
        let t = tokens("m-a", "us-east-1");
        let none = BTreeMap::new();
        let faithful = generalize(&template("m-a", "us-east-1", "cr-1"), &t, &bound("cr-1"));
        assert!(faithful.textually_faithful);
        let conditions = json!({
            "Conditions": {"East": {"Fn::Equals": [{"Ref": "AWS::Region"}, "us-east-1"]}},
            "Resources": {"R": {"Type": "T", "Properties": {"Name": "m-a"}}}
        });
        assert!(!generalize(&conditions, &t, &none).textually_faithful);
        let depends =
            json!({"Resources": {"R": {"Type": "T", "DependsOn": "m-a", "Properties": {}}}});
        assert!(!generalize(&depends, &t, &none).textually_faithful);
    }

    #[test]
    fn inputs_are_bound_by_name_and_their_values_are_never_searched_for() {
        // The reservation id also written as a literal (not through its input) stays literal:
        // the two members' templates then differ there, instead of one member's id being
        // deployed to the other.
        let with_literal = |member: &str, capacity: &str| {
            let mut t = template(member, "us-east-1", capacity);
            t["Resources"]["Bucket"]["Properties"]["Reservation"] = json!(capacity);
            t
        };
        let a = generalize(
            &with_literal("m-a", "cr-0aaaaaaaaaaaaaaaa"),
            &tokens("m-a", "us-east-1"),
            &bound("cr-0aaaaaaaaaaaaaaaa"),
        );
        let b = generalize(
            &with_literal("m-b", "cr-0bbbbbbbbbbbbbbbb"),
            &tokens("m-b", "us-east-1"),
            &bound("cr-0bbbbbbbbbbbbbbbb"),
        );
        let why = first_difference(&a.template, &b.template);
        assert!(
            why.contains("/Resources/Bucket/Properties/Reservation"),
            "{why}"
        );
        // A parameter is bound whatever its default: the override is the member's value.
        assert_eq!(a.overrides["Reservation"], "cr-0aaaaaaaaaaaaaaaa");
        assert!(a.template["Parameters"]["Reservation"]
            .get("Default")
            .is_none());
    }

    #[test]
    fn a_value_that_only_looks_like_a_members_makes_the_templates_differ() {
        let fixed = |member: &str, region: &str| {
            json!({"Resources": {"R": {"Type": "T", "Properties": {
                "Name": member, "Registry": "602401143452.dkr.ecr.us-east-1.amazonaws.com", "Region": region
            }}}})
        };
        let none = BTreeMap::new();
        let a = generalize(
            &fixed("m-a", "us-east-1"),
            &tokens("m-a", "us-east-1"),
            &none,
        );
        let b = generalize(
            &fixed("m-b", "us-west-2"),
            &tokens("m-b", "us-west-2"),
            &none,
        );
        assert_ne!(a.template, b.template);
        let why = first_difference(&a.template, &b.template);
        assert!(why.contains("/Resources/R/Properties/Registry"), "{why}");
    }
}
