//! cdk-nag's names for the findings a scoped acknowledgement covers (its `applies_to`), read
//! from the rendered properties the way the pack reads them: a reference is flattened to
//! `<LogicalId.Attr>`, `${Var}` to `<Var>`, a `Fn::Join` to its joined parts and anything else
//! to its compact JSON (cdk-nag `src/utils/flatten-cfn-reference.ts`; the findings of
//! `AwsSolutions-IAM5` in `src/rules/iam/IAMNoWildcardPermissions.ts` and of
//! `AwsSolutions-IAM4` in `src/rules/iam/IAMNoManagedPolicies.ts`, release 2.38.2).

use crate::resources::AckScope;
use serde_json::Value;

/// The findings of `scope` in a role's rendered `properties`, as cdk-nag names them.
pub(crate) fn findings(properties: &Value, scope: &AckScope) -> Vec<String> {
    match scope {
        AckScope::Statement { policy, statement } => {
            // A role's inline policies, or a policy resource's own document.
            let document = match properties.get("Policies") {
                Some(policies) => &policies[*policy]["PolicyDocument"],
                None => &properties["PolicyDocument"],
            };
            let st = &document["Statement"][*statement];
            if st["Effect"] != "Allow" {
                return Vec::new();
            }
            let actions = items(&st["Action"])
                .filter_map(Value::as_str)
                .filter(|a| a.contains('*'))
                .map(|a| format!("Action::{a}"));
            let resources = items(&st["Resource"])
                .map(flatten)
                .filter(|r| r.contains('*'))
                .map(|r| format!("Resource::{r}"));
            actions.chain(resources).collect()
        }
        AckScope::ManagedPolicy(name) => {
            let suffix = format!(":iam::aws:policy/{name}");
            items(&properties["ManagedPolicyArns"])
                .map(flatten)
                .filter(|p| p.ends_with(&suffix))
                .map(|p| format!("Policy::{p}"))
                .collect()
        }
        AckScope::Finding(finding) => vec![(*finding).to_owned()],
    }
}

/// A value or each item of a list (IAM accepts both).
fn items(v: &Value) -> Box<dyn Iterator<Item = &Value> + '_> {
    match v {
        Value::Array(list) => Box::new(list.iter()),
        Value::Null => Box::new(std::iter::empty()),
        other => Box::new(std::iter::once(other)),
    }
}

/// A CloudFormation value as one flat string, as cdk-nag flattens it.
fn flatten(v: &Value) -> String {
    if let Value::String(s) = v {
        return s.replace("${", "<").replace('}', ">");
    }
    if let Some(Value::Array(join)) = v.get("Fn::Join") {
        if let [Value::String(delimiter), Value::Array(parts)] = join.as_slice() {
            return parts
                .iter()
                .map(flatten)
                .collect::<Vec<_>>()
                .join(delimiter);
        }
    }
    if let Some(sub) = v.get("Fn::Sub") {
        return flatten(sub);
    }
    if let Some(Value::Array(att)) = v.get("Fn::GetAtt") {
        if let [resource, attribute] = att.as_slice() {
            return format!("<{}.{}>", flatten(resource), flatten(attribute));
        }
    }
    if let Some(import) = v.get("Fn::ImportValue") {
        return flatten(import);
    }
    if let Some(name) = v.get("Ref") {
        return format!("<{}>", flatten(name));
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn references_flatten_as_cdk_nag_names_them() {
        assert_eq!(
            flatten(&json!({"Fn::Sub": "arn:${AWS::Partition}:s3:::b/*"})),
            "arn:<AWS::Partition>:s3:::b/*"
        );
        assert_eq!(
            flatten(&json!({"Fn::Sub": "${Bucket.Arn}/*"})),
            "<Bucket.Arn>/*"
        );
        assert_eq!(
            flatten(&json!({"Fn::Join": ["", [{"Fn::GetAtt": ["B", "Arn"]}, "/*"]]})),
            "<B.Arn>/*"
        );
        assert_eq!(flatten(&json!({"Ref": "Topic"})), "<Topic>");
        assert_eq!(
            flatten(&json!({"Fn::ImportValue": "s-foundation:B:Arn"})),
            "s-foundation:B:Arn"
        );
        assert_eq!(
            flatten(&json!({"Fn::Sub": ["${A}/*", {"A": {"Fn::ImportValue": "x"}}]})),
            r#"["${A}/*",{"A":{"Fn::ImportValue":"x"}}]"#
        );
    }

    #[test]
    fn a_statement_names_its_wildcard_actions_and_resources() {
        let properties = json!({"Policies": [{"PolicyDocument": {"Statement": [
            {"Effect": "Allow", "Action": ["s3:GetObject", "s3:List*"],
             "Resource": ["*", {"Fn::Sub": "${B.Arn}/*"}, {"Fn::GetAtt": ["B", "Arn"]}]},
            {"Effect": "Deny", "Action": "s3:*", "Resource": "*"}
        ]}}], "ManagedPolicyArns": [
            {"Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/AmazonEKS_CNI_Policy"}
        ]});
        let scope = |statement| AckScope::Statement {
            policy: 0,
            statement,
        };
        assert_eq!(
            findings(&properties, &scope(0)),
            ["Action::s3:List*", "Resource::*", "Resource::<B.Arn>/*"]
        );
        assert!(findings(&properties, &scope(1)).is_empty());
        assert_eq!(
            findings(
                &properties,
                &AckScope::ManagedPolicy("AmazonEKS_CNI_Policy".into())
            ),
            ["Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEKS_CNI_Policy"]
        );
    }
}
