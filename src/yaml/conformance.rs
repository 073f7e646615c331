//! The emitter writes the same bytes as `serde_norway::to_string`, on generated JSON values
//! full of what YAML treats specially, and on the artifacts of the reference stacks.

#![cfg(test)]

use proptest::prelude::*;
use serde_json::{json, Map, Value};

fn same(value: &Value) {
    let ours = crate::yaml::to_string(value);
    let theirs = serde_yaml::to_string(value).expect("serde_norway writes every JSON value");
    assert_eq!(ours, theirs, "for {value:?}");
    let mut appended = String::from("---\n");
    crate::yaml::push(&mut appended, value);
    assert_eq!(appended, format!("---\n{theirs}"));
}

/// Pieces of text YAML reads specially: indicators, quotes, breaks of every kind, spellings
/// of other types, control and non-ASCII characters.
const PIECES: &[&str] = &[
    "",
    " ",
    "  ",
    "\n",
    "\n\n",
    "\r",
    "\r\n",
    "\t",
    "'",
    "\"",
    "\\",
    ":",
    ": ",
    ":x",
    "- ",
    "-",
    "--",
    "---",
    "...",
    "#",
    " #",
    "# ",
    "?",
    "? ",
    "!",
    "&",
    "*",
    "|",
    ">",
    "%",
    "@",
    "`",
    ",",
    "[",
    "]",
    "{",
    "}",
    "1.0",
    "1",
    "-1",
    "+1",
    "1e3",
    "1E3",
    "-1e-3",
    ".5",
    "5.",
    "007",
    "-007",
    "0x1F",
    "0X1F",
    "-0x1F",
    "0o17",
    "0b101",
    "1_000",
    "true",
    "True",
    "TRUE",
    "false",
    "yes",
    "no",
    "on",
    "null",
    "Null",
    "NULL",
    "~",
    ".inf",
    "-.inf",
    "+.inf",
    ".nan",
    ".NaN",
    "inf",
    "nan",
    "NaN",
    "infinity",
    "a",
    "abc",
    "x y",
    "a: b",
    "key",
    "é",
    "日本語",
    "\u{85}",
    "\u{a0}",
    "\u{2028}",
    "\u{2029}",
    "\u{feff}",
    "\u{0}",
    "\u{7}",
    "\u{1b}",
    "\u{7f}",
    "\u{9f}",
    "\u{d7ff}",
    "\u{e000}",
    "\u{fffd}",
    "\u{fffe}",
    "\u{1f600}",
    "\u{10ffff}",
    "{{ .Status }}",
    "${var.x}",
    "http://example.com/a?b=c#d",
    "s3://bucket/key",
];

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::collection::vec(prop::sample::select(PIECES), 0..7).prop_map(|p| p.concat()),
        1 => any::<String>(),
        1 => "[ -~\n]{0,40}",
        1 => (prop::sample::select(PIECES), 120usize..140)
            .prop_map(|(p, n)| format!("{}{p}", "k".repeat(n))),
    ]
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        prop::sample::select(&[0.0, -0.0, 1.0, 0.1, 1e20, 1e-7, 2.5e300, 123456789.0][..])
            .prop_map(Value::from),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        text().prop_map(Value::String),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..5)
                .prop_map(|entries| Value::Object(entries.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    #[test]
    fn same_as_serde_norway(v in value()) {
        same(&v);
    }

    #[test]
    fn same_as_serde_norway_for_any_string(s in text()) {
        same(&Value::String(s.clone()));
        same(&json!({ s.clone(): s.clone() }));
        same(&json!([s.clone(), [s.clone()], { "k": [s] }]));
    }
}

#[test]
fn same_for_the_cases_named() {
    for s in PIECES {
        same(&Value::String((*s).to_owned()));
        same(&json!({ *s: *s, "next": 1 }));
        same(&json!([*s, [*s, []], {}]));
    }
    for v in [
        json!(null),
        json!({}),
        json!([]),
        json!([[]]),
        json!([[[1, 2], [3]], [{}]]),
        json!({"a": [[1], {"b": []}], "c": {"d": {"e": "x\ny\n"}}}),
        json!({"keep": "a\n\n", "then": "plain"}),
        json!({"strip": "a\n\n\nb"}),
        json!({" lead": " a\nb", "trail": "a \nb", "tab": "a\tb\nc"}),
        json!({"multi\nline key": "v", "k".repeat(129): "long key"}),
        json!(["\n", "\n\n", " \n", "\n ", "a\n", "\r\n"]),
    ] {
        same(&v);
    }
}

/// Every YAML artifact of every reference stack comes out as serde_norway writes it (a
/// Kubernetes stage is its objects, each after `---`).
#[test]
fn same_for_the_reference_artifacts() {
    let mut compared = 0;
    for app in crate::reference::all()
        .into_iter()
        .chain(crate::reference::variants())
    {
        let assembly = app.synth().expect("reference stacks synthesize");
        for (path, bytes) in assembly.files() {
            if !path.ends_with(".yaml") {
                continue;
            }
            let text = std::str::from_utf8(bytes).expect("UTF-8");
            let body: String = text
                .lines()
                .skip_while(|l| l.starts_with('#'))
                .map(|l| format!("{l}\n"))
                .collect();
            // A document separator is a line of its own (a literal block's lines are indented).
            let documents: Vec<&str> = if let Some(rest) = body.strip_prefix("---\n") {
                rest.split("\n---\n").collect()
            } else {
                vec![body.as_str()]
            };
            let last = documents.len() - 1;
            let documents: Vec<String> = documents
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    if i < last {
                        format!("{d}\n")
                    } else {
                        (*d).to_owned()
                    }
                })
                .collect();
            for doc in documents {
                let value: Value = serde_yaml::from_str(&doc).expect("the artifact is YAML");
                same(&value);
                assert_eq!(crate::yaml::to_string(&value), doc, "{path}");
                compared += 1;
            }
        }
    }
    assert!(compared > 20, "compared {compared} documents");
}
