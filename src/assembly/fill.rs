//! Filling a Kubernetes stage's placeholders: the one place the values only a deployment
//! knows (stage outputs, deploy-time inputs) enter the objects a stage applies. The manifest
//! lists each placeholder and where its value comes from ([`PlaceholderValue`]); `hyperforge
//! fill` (the runbook's paths) and `hyperforge deploy` both call [`fill`], so the file in the
//! assembly is never changed and both paths apply the same text. No IO here.

use super::manifest::{is_placeholder_value, InputManifest, PlaceholderValue, ValueSource};
use super::plan::variable_of;

/// Why a stage's file could not be filled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FillError {
    /// A value the stage reads was not given, and has no default.
    #[error("no value for {variable} (placeholder `{placeholder}`)")]
    Missing {
        /// The variable that names it.
        variable: String,
        /// The placeholder it replaces.
        placeholder: String,
    },
    /// A value was given that the stage does not read.
    #[error("the stage reads no value {variable} (it reads: {reads})")]
    Unknown {
        /// The variable given.
        variable: String,
        /// The variables the stage reads.
        reads: String,
    },
    /// A value is not one a placeholder may be replaced with.
    #[error("the value `{value}` for {variable} is not an identifier or URL")]
    Malformed {
        /// The variable.
        variable: String,
        /// The value given.
        value: String,
    },
    /// The file does not carry a placeholder the manifest lists for it.
    #[error("the file does not carry the placeholder `{placeholder}` the manifest lists")]
    NotInFile {
        /// The placeholder.
        placeholder: String,
    },
}

impl FillError {
    /// What to do about it.
    pub fn help(&self) -> &'static str {
        match self {
            FillError::Missing { .. } => {
                "give it with --value VARIABLE=VALUE (the runbook reads each from a stage output or the inputs it sets first)"
            }
            FillError::Unknown { .. } => "check the variable's spelling against the stage's list",
            FillError::Malformed { .. } => {
                "stage outputs and inputs are identifiers or URLs: letters, digits and `:/._-`"
            }
            FillError::NotInFile { .. } => {
                "the file was changed after synthesis; synthesize again instead of editing it"
            }
        }
    }
}

/// The variable that names `value` (a stage output's, or the input's declared one, of the
/// stack's `inputs`).
pub fn variable(inputs: &[InputManifest], value: &PlaceholderValue) -> String {
    match &value.from {
        ValueSource::Output(out) => variable_of(&out.output),
        ValueSource::Input(name) => inputs
            .iter()
            .find(|i| &i.name == name)
            .map_or_else(|| variable_of(name), |i| i.variable.clone()),
    }
}

/// `text` (a Kubernetes stage's file) with each of `values` replaced by the value `given`
/// names by its variable, an input falling back to its default. Every placeholder is replaced
/// where it stands as a whole token (not inside a longer name); every listed placeholder must
/// be in the file, and every given variable must be one the stage reads.
pub fn fill(
    inputs: &[InputManifest],
    values: &[PlaceholderValue],
    text: &str,
    given: &[(String, String)],
) -> Result<String, Vec<FillError>> {
    let mut problems = Vec::new();
    let variables: Vec<String> = values.iter().map(|v| variable(inputs, v)).collect();
    for (name, _) in given {
        if !variables.contains(name) {
            problems.push(FillError::Unknown {
                variable: name.clone(),
                reads: if variables.is_empty() {
                    "none".to_owned()
                } else {
                    variables.join(", ")
                },
            });
        }
    }
    let mut replacements: Vec<(&str, String)> = Vec::new();
    for (value, variable) in values.iter().zip(&variables) {
        let default = match &value.from {
            ValueSource::Input(name) => inputs
                .iter()
                .find(|i| &i.name == name)
                .and_then(|i| i.default.clone()),
            ValueSource::Output(_) => None,
        };
        let chosen = given
            .iter()
            .rev()
            .find(|(n, _)| n == variable)
            .map(|(_, v)| v.clone())
            .or(default);
        match chosen {
            None => problems.push(FillError::Missing {
                variable: variable.clone(),
                placeholder: value.placeholder.clone(),
            }),
            Some(v) if !is_placeholder_value(&v) => problems.push(FillError::Malformed {
                variable: variable.clone(),
                value: v,
            }),
            Some(v) => {
                if token_positions(text, &value.placeholder).next().is_none() {
                    problems.push(FillError::NotInFile {
                        placeholder: value.placeholder.clone(),
                    });
                }
                replacements.push((&value.placeholder, v));
            }
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut out = text.to_owned();
    for (placeholder, value) in replacements {
        let mut next = String::with_capacity(out.len());
        let mut last = 0;
        for at in token_positions(&out, placeholder) {
            next.push_str(&out[last..at]);
            next.push_str(&value);
            last = at + placeholder.len();
        }
        next.push_str(&out[last..]);
        out = next;
    }
    Ok(out)
}

/// The byte offsets where `token` stands in `text` as a whole token: not preceded or followed
/// by a letter, digit, `-` or `_`.
fn token_positions<'a>(text: &'a str, token: &'a str) -> impl Iterator<Item = usize> + 'a {
    let part = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    text.match_indices(token).filter_map(move |(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + token.len()..].chars().next();
        (!token.is_empty() && !before.is_some_and(part) && !after.is_some_and(part)).then_some(at)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assembly::manifest::{InputManifest, StageOutput};

    fn inputs() -> Vec<InputManifest> {
        vec![InputManifest {
            name: "PoolCapacityReservationId".into(),
            variable: "POOL_CAPACITY_RESERVATION_ID".into(),
            description: "d".into(),
            default: Some("cr-0123456789abcdef0".into()),
            pattern: None,
            expected: "e".into(),
            stages: vec!["gpu".into()],
        }]
    }

    fn values() -> Vec<PlaceholderValue> {
        vec![
            PlaceholderValue {
                placeholder: "cr-0123456789abcdef0".into(),
                from: ValueSource::Input("PoolCapacityReservationId".into()),
            },
            PlaceholderValue {
                placeholder: "ws-hyperforge-output-MetricsWorkspaceId".into(),
                from: ValueSource::Output(StageOutput {
                    stage: Some("operations".into()),
                    output: "MetricsWorkspaceId".into(),
                }),
            },
        ]
    }

    const TEXT: &str = "id: cr-0123456789abcdef0\nnot: cr-0123456789abcdef0x\nurl: https://h/workspaces/ws-hyperforge-output-MetricsWorkspaceId\n";

    #[test]
    fn whole_tokens_are_replaced_inputs_default() {
        let out = fill(
            &inputs(),
            &values(),
            TEXT,
            &[("METRICS_WORKSPACE_ID".into(), "ws-abc".into())],
        )
        .unwrap();
        assert_eq!(
            out,
            "id: cr-0123456789abcdef0\nnot: cr-0123456789abcdef0x\nurl: https://h/workspaces/ws-abc\n"
        );
        let out = fill(
            &inputs(),
            &values(),
            TEXT,
            &[
                ("METRICS_WORKSPACE_ID".into(), "ws-abc".into()),
                (
                    "POOL_CAPACITY_RESERVATION_ID".into(),
                    "cr-0fedcba987654321f".into(),
                ),
            ],
        )
        .unwrap();
        assert!(out.starts_with("id: cr-0fedcba987654321f\nnot: cr-0123456789abcdef0x\n"));
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let errors = fill(
            &inputs(),
            &values(),
            "id: cr-0123456789abcdef0\n",
            &[
                (
                    "POOL_CAPACITY_RESERVATION_ID".into(),
                    "cr-1; rm -rf /".into(),
                ),
                ("METRICS_WORKSPACE".into(), "x".into()),
            ],
        )
        .unwrap_err();
        assert_eq!(
            errors,
            [
                FillError::Unknown {
                    variable: "METRICS_WORKSPACE".into(),
                    reads: "POOL_CAPACITY_RESERVATION_ID, METRICS_WORKSPACE_ID".into(),
                },
                FillError::Malformed {
                    variable: "POOL_CAPACITY_RESERVATION_ID".into(),
                    value: "cr-1; rm -rf /".into(),
                },
                FillError::Missing {
                    variable: "METRICS_WORKSPACE_ID".into(),
                    placeholder: "ws-hyperforge-output-MetricsWorkspaceId".into(),
                },
            ]
        );
        let errors = fill(
            &inputs(),
            &values(),
            "nothing here\n",
            &[("METRICS_WORKSPACE_ID".into(), "ws-abc".into())],
        )
        .unwrap_err();
        assert_eq!(errors.len(), 2);
        assert!(errors
            .iter()
            .all(|e| matches!(e, FillError::NotInFile { .. })));
        assert!(errors.iter().all(|e| !e.help().is_empty()));
    }
}
