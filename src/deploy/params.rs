//! Template parameters: the parameters file, and what each stage passes to CloudFormation
//! (a given value, the template default, or the stack's previous value).

use super::error::DeployError;
use super::manifest::StackPlan;
use crate::assembly::manifest::Parameter;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// What a stage passes for one parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParameterValue {
    /// This value.
    Value(String),
    /// Keep what the deployed stack has (a parameter without default, not given now).
    UsePrevious,
}

/// Reads a parameters file: a JSON object `{"ParamName": "value"}` (numbers and booleans are
/// taken as their text).
pub fn read_parameters_file(path: &Path) -> Result<BTreeMap<String, String>, DeployError> {
    let text = std::fs::read_to_string(path).map_err(|source| DeployError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_parameters(&text).map_err(|message| DeployError::ParametersFile {
        path: path.to_path_buf(),
        message,
    })
}

/// Parses the text of a parameters file.
pub fn parse_parameters(text: &str) -> Result<BTreeMap<String, String>, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(map) = value else {
        return Err("expected a JSON object {\"ParamName\": \"value\"}".into());
    };
    map.into_iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k, s)),
            Value::Number(n) => Ok((k, n.to_string())),
            Value::Bool(b) => Ok((k, b.to_string())),
            other => Err(format!(
                "the value of `{k}` must be a string, number or boolean, not {other}"
            )),
        })
        .collect()
}

/// Fails on a given parameter that no CloudFormation stage of the stack declares.
pub fn check_known(stack: &StackPlan, given: &BTreeMap<String, String>) -> Result<(), DeployError> {
    let declared = stack.parameter_names();
    match given.keys().find(|k| !declared.contains(&k.as_str())) {
        Some(unknown) => Err(DeployError::UnknownParameter {
            stack: stack.name.clone(),
            name: unknown.clone(),
            declared: if declared.is_empty() {
                "none".into()
            } else {
                declared.join(", ")
            },
        }),
        None => Ok(()),
    }
}

/// The parameters one stage passes: given values first; then the template default (the
/// parameter is left out); then, for an existing stack that has the parameter, its previous
/// value; otherwise an error.
pub fn resolve(
    stack_name: &str,
    declared: &[Parameter],
    given: &BTreeMap<String, String>,
    deployed: &[String],
) -> Result<Vec<(String, ParameterValue)>, DeployError> {
    let mut out = Vec::new();
    for p in declared {
        if let Some(v) = given.get(&p.name) {
            out.push((p.name.clone(), ParameterValue::Value(v.clone())));
        } else if p.default.is_some() {
            continue;
        } else if deployed.contains(&p.name) {
            out.push((p.name.clone(), ParameterValue::UsePrevious));
        } else {
            return Err(DeployError::MissingParameter {
                stack_name: stack_name.to_owned(),
                name: p.name.clone(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, default: Option<&str>) -> Parameter {
        Parameter {
            name: name.into(),
            default: default.map(str::to_owned),
        }
    }

    #[test]
    fn parameters_file_values() {
        let p = parse_parameters(r#"{"A": "x", "B": 3, "C": true}"#);
        assert_eq!(
            p,
            Ok(BTreeMap::from([
                ("A".into(), "x".into()),
                ("B".into(), "3".into()),
                ("C".into(), "true".into())
            ]))
        );
        assert!(parse_parameters("[1]").is_err_and(|e| e.contains("JSON object")));
        assert!(parse_parameters(r#"{"A": [1]}"#).is_err_and(|e| e.contains("`A`")));
    }

    #[test]
    fn merge_order_given_then_default_then_previous() {
        let declared = [
            spec("PlanArn", Some("arn:default")),
            spec("AzId", Some("usw2-az2")),
            spec("Secret", None),
        ];
        let given = BTreeMap::from([("AzId".to_owned(), "usw2-az4".to_owned())]);
        let deployed = vec!["Secret".to_owned()];
        assert_eq!(
            resolve("s", &declared, &given, &deployed).ok(),
            Some(vec![
                ("AzId".into(), ParameterValue::Value("usw2-az4".into())),
                ("Secret".into(), ParameterValue::UsePrevious),
            ])
        );
        let err = resolve("s", &declared, &given, &[]);
        assert!(matches!(err, Err(DeployError::MissingParameter { name, .. }) if name == "Secret"));
    }
}
