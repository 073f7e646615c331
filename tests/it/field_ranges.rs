//! Every numeric stack-file field's declared range, generated from the declarations (through
//! the JSON Schema they generate), so a new numeric field is covered without editing this file.
//!
//! For each numeric field, at each place `stackfile_every_field.yaml` sets it: the range's
//! ends load without a range diagnostic, and the values just outside are reported once, as
//! `HF0711` at the value's `file:line:col`, with no second diagnostic from the builder.

use hyperforge::stackfile::load_str;
use hyperforge::Code;
use serde_json::Value;
use std::collections::BTreeMap;

const FIXTURE: &str = include_str!("stackfile_every_field.yaml");

/// A numeric field's declared range, as the schema states it.
#[derive(Clone, Debug, PartialEq)]
struct Range {
    integer: bool,
    min: f64,
    min_exclusive: bool,
    max: f64,
}

/// Every numeric field of the schema by name. Fields of the same name in different objects
/// must declare the same range (else this test would need to tell them apart).
fn numeric_fields() -> BTreeMap<String, Range> {
    let schema = hyperforge::stackfile::json_schema();
    let mut out: BTreeMap<String, Range> = BTreeMap::new();
    for def in schema["$defs"].as_object().expect("$defs").values() {
        let Some(props) = def["properties"].as_object() else {
            continue;
        };
        for (name, p) in props {
            let integer = match p["type"].as_str() {
                Some("integer") => true,
                Some("number") => false,
                _ => continue,
            };
            let num = |v: &Value| v.as_f64();
            let (min, min_exclusive) = match (num(&p["minimum"]), num(&p["exclusiveMinimum"])) {
                (Some(m), None) => (m, false),
                (None, Some(m)) => (m, true),
                _ => panic!("numeric field `{name}` declares no lower bound: {p}"),
            };
            let max = num(&p["maximum"])
                .unwrap_or_else(|| panic!("numeric field `{name}` declares no maximum: {p}"));
            let range = Range {
                integer,
                min,
                min_exclusive,
                max,
            };
            if let Some(seen) = out.get(name) {
                assert_eq!(seen, &range, "`{name}` is declared with two ranges");
            }
            out.insert(name.clone(), range);
        }
    }
    assert!(out.len() >= 20, "few numeric fields found: {out:?}");
    out
}

/// Where the fixture sets `name` to a number: (line index, byte range of the value).
fn occurrences(name: &str) -> Vec<(usize, std::ops::Range<usize>)> {
    let key = format!("{name}: ");
    let mut out = Vec::new();
    for (i, line) in FIXTURE.lines().enumerate() {
        let code = line.split(" #").next().unwrap_or(line);
        let mut from = 0;
        while let Some(at) = code[from..].find(&key) {
            let start = from + at;
            let before = code[..start].chars().last();
            let value_start = start + key.len();
            from = value_start;
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let len = code[value_start..]
                .find([',', '}', ' '])
                .unwrap_or(code.len() - value_start);
            let value = &code[value_start..value_start + len];
            if value.parse::<f64>().is_ok() {
                out.push((i, value_start..value_start + len));
            }
        }
    }
    out
}

/// The fixture with the value at `at` replaced by `value`.
fn with_value(line: usize, at: &std::ops::Range<usize>, value: &str) -> String {
    let mut out = String::new();
    for (i, l) in FIXTURE.lines().enumerate() {
        if i == line {
            out.push_str(&l[..at.start]);
            out.push_str(value);
            out.push_str(&l[at.end..]);
        } else {
            out.push_str(l);
        }
        out.push('\n');
    }
    out
}

fn fmt(v: f64, integer: bool) -> String {
    if integer {
        format!("{}", v as i128)
    } else {
        format!("{v:?}")
    }
}

/// The values just inside and just outside `r`.
fn probes(r: &Range) -> (Vec<String>, Vec<String>) {
    if r.integer {
        let (min, max) = (r.min as i128, r.max as i128);
        (
            vec![min.to_string(), max.to_string()],
            vec![(min - 1).to_string(), (max + 1).to_string()],
        )
    } else {
        let lowest_in = if r.min_exclusive {
            r.min.next_up()
        } else {
            r.min
        };
        let highest_out = if r.min_exclusive {
            r.min
        } else {
            r.min.next_down()
        };
        (
            vec![fmt(lowest_in, false), fmt(r.max, false)],
            vec![fmt(highest_out, false), fmt(r.max.next_up(), false)],
        )
    }
}

#[test]
fn every_numeric_field_declares_a_range_and_is_set_by_the_fixture() {
    for name in numeric_fields().keys() {
        assert!(
            !occurrences(name).is_empty(),
            "stackfile_every_field.yaml does not set numeric field `{name}` to a number"
        );
    }
}

#[test]
fn values_at_the_ends_of_a_declared_range_are_accepted() {
    for (name, range) in numeric_fields() {
        let (inside, _) = probes(&range);
        for (line, at) in occurrences(&name) {
            for value in &inside {
                let text = with_value(line, &at, value);
                let Err(ds) = load_str("f.yaml", &text) else {
                    continue;
                };
                let here = format!("f.yaml:{}:", line + 1);
                for d in ds.iter() {
                    assert!(
                        d.code != Code::StackFileOutOfRange,
                        "`{name}: {value}` (line {}) is inside {range:?} but reported: {d:?}",
                        line + 1
                    );
                    // A builder diagnostic at the field is about its relation to other
                    // values (a parallel size that does not divide the heads), never a
                    // second opinion on the range: the builder checks the same constant.
                    assert!(
                        !(d.path.starts_with(&here) && d.message.contains("out of range")),
                        "`{name}: {value}` (line {}) is inside {range:?} but the builder refuses it: {d:?}",
                        line + 1
                    );
                }
            }
        }
    }
}

#[test]
fn values_just_outside_a_declared_range_are_reported_once_at_the_value() {
    for (name, range) in numeric_fields() {
        let (_, outside) = probes(&range);
        for (line, at) in occurrences(&name) {
            for value in &outside {
                let text = with_value(line, &at, value);
                let ds = load_str("f.yaml", &text)
                    .err()
                    .unwrap_or_else(|| panic!("`{name}: {value}` (line {}) loaded", line + 1));
                let here = format!("f.yaml:{}:{}", line + 1, at.start + 1);
                let on_line: Vec<_> = ds
                    .iter()
                    .filter(|d| d.path.starts_with(&format!("f.yaml:{}:", line + 1)))
                    .collect();
                assert!(
                    on_line.len() == 1
                        && on_line[0].code == Code::StackFileOutOfRange
                        && on_line[0].path == here,
                    "`{name}: {value}` (line {}) outside {range:?}: expected one HF0711 at {here}, got {on_line:#?}",
                    line + 1
                );
            }
        }
    }
}
