//! A YAML tree whose every node knows the line and column it starts at, built from the
//! `yaml-rust2` event stream without recursion (deep nesting cannot overflow the stack).
//! Anchors, aliases, tags and multiple documents are refused: stack files are plain data.

use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A position in the file, both 1-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Pos {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub col: usize,
}

impl Pos {
    fn of(m: Marker) -> Pos {
        Pos {
            line: m.line().max(1),
            col: m.col() + 1,
        }
    }
}

/// A YAML node with its position.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Where the node starts.
    pub pos: Pos,
    /// What it holds.
    pub value: Value,
}

/// The content of a node. Scalars keep their text and whether they were quoted (a quoted
/// scalar is always a string).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A scalar: its text, and whether it was written plain (unquoted).
    Scalar(String, bool),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, in file order; keys are scalars with their positions.
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// The scalar text, if this is a scalar.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar(s, _) => Some(s),
            _ => None,
        }
    }

    /// Whether the node is the null scalar (`~`, `null`, or nothing).
    pub fn is_null(&self) -> bool {
        matches!(&self.value, Value::Scalar(s, true) if s.is_empty() || s == "~" || s == "null" || s == "Null" || s == "NULL")
    }

    /// The value of key `key`, if this is a mapping holding it.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// A short name for the node's type, for messages.
    pub fn type_name(&self) -> &'static str {
        match &self.value {
            Value::Scalar(_, false) => "a string",
            Value::Scalar(s, true) => match s.as_str() {
                _ if self.is_null() => "null",
                "true" | "false" | "True" | "False" | "TRUE" | "FALSE" => "a boolean",
                _ if s.parse::<f64>().is_ok() => "a number",
                _ => "a string",
            },
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

/// A syntax problem: where, and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    /// Where the parser stopped.
    pub pos: Pos,
    /// What it found.
    pub message: String,
}

/// Stack files nest a handful of levels; deeper input is refused (it would only be an attack or
/// an accident, and deep trees cost stack on drop).
const MAX_DEPTH: usize = 64;

enum Frame {
    Seq(Pos, Vec<Node>),
    /// A mapping: its start, its entries, a key waiting for its value, and the line of each
    /// key's text so far (duplicates are found in logarithmic time, quoted or not).
    Map(
        Pos,
        Vec<(Node, Node)>,
        Option<Node>,
        std::collections::BTreeMap<String, usize>,
    ),
}

/// Parses the first document of `text`. `Ok(None)` for a file without a document (empty, or
/// only comments).
pub fn parse(text: &str) -> Result<Option<Node>, SyntaxError> {
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut root: Option<Node> = None;
    let mut documents = 0usize;
    loop {
        let (event, mark) = parser.next_token().map_err(|e| SyntaxError {
            pos: Pos::of(*e.marker()),
            message: e.info().to_owned(),
        })?;
        let pos = Pos::of(mark);
        let refuse = |message: &str| {
            Err(SyntaxError {
                pos,
                message: message.to_owned(),
            })
        };
        let node = match event {
            Event::StreamEnd => return Ok(root),
            Event::Nothing | Event::StreamStart | Event::DocumentEnd => continue,
            Event::DocumentStart => {
                documents += 1;
                if documents > 1 {
                    return refuse("a stack file holds one YAML document; found a second `---`");
                }
                continue;
            }
            Event::Alias(_) => return refuse("aliases (`*name`) are not supported in stack files"),
            Event::Scalar(_, _, anchor, _)
            | Event::SequenceStart(anchor, _)
            | Event::MappingStart(anchor, _)
                if anchor != 0 =>
            {
                return refuse("anchors (`&name`) are not supported in stack files")
            }
            Event::Scalar(_, _, _, Some(_))
            | Event::SequenceStart(_, Some(_))
            | Event::MappingStart(_, Some(_)) => {
                return refuse("YAML tags (`!name`) are not supported in stack files")
            }
            Event::SequenceStart(..) | Event::MappingStart(..) if stack.len() >= MAX_DEPTH => {
                return refuse("values are nested more than 64 levels deep")
            }
            Event::SequenceStart(..) => {
                stack.push(Frame::Seq(pos, Vec::new()));
                continue;
            }
            Event::MappingStart(..) => {
                stack.push(Frame::Map(pos, Vec::new(), None, Default::default()));
                continue;
            }
            Event::Scalar(text, style, _, None) => Node {
                pos,
                value: Value::Scalar(text, style == TScalarStyle::Plain),
            },
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq(start, items)) => Node {
                    pos: start,
                    value: Value::Seq(items),
                },
                _ => return refuse("unbalanced sequence"),
            },
            Event::MappingEnd => match stack.pop() {
                // A block mapping's start event is marked at its first `:`; the first key is
                // where a reader looks.
                Some(Frame::Map(start, entries, None, _)) => Node {
                    pos: entries.first().map_or(start, |(k, _)| k.pos.min(start)),
                    value: Value::Map(entries),
                },
                _ => return refuse("unbalanced mapping"),
            },
        };
        match stack.last_mut() {
            None => {
                if root.is_none() {
                    root = Some(node);
                }
            }
            Some(Frame::Seq(_, items)) => items.push(node),
            Some(Frame::Map(_, entries, pending, seen)) => match pending.take() {
                None => {
                    if !matches!(node.value, Value::Scalar(..)) {
                        return Err(SyntaxError {
                            pos: node.pos,
                            message: "mapping keys must be plain scalars".to_owned(),
                        });
                    }
                    let text = node.as_str().unwrap_or_default().to_owned();
                    if let Some(first_line) = seen.get(&text) {
                        return Err(SyntaxError {
                            pos: node.pos,
                            message: format!(
                                "key `{text}` is repeated (first at line {first_line})"
                            ),
                        });
                    }
                    seen.insert(text, node.pos.line);
                    *pending = Some(node);
                }
                Some(key) => entries.push((key, node)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_key_is_refused_quoted_or_not() {
        for text in [
            "region: a\nregion: b\n",
            "region: a\n\"region\": b\n",
            "'k': 1\nk: 2\n",
        ] {
            let err = parse(text).unwrap_err();
            assert!(
                err.message.contains("is repeated (first at line 1)"),
                "{text:?}: {}",
                err.message
            );
            assert_eq!(err.pos.line, 2);
        }
    }

    #[test]
    fn a_mapping_of_many_keys_parses() {
        let text: String = (0..60_000).map(|i| format!("k{i}: {i}\n")).collect();
        // Generous even for a debug build on a loaded machine; a quadratic duplicate-key check
        // took tens of seconds here.
        let start = std::time::Instant::now();
        let root = parse(&text).unwrap().unwrap();
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(root.get("k59999").and_then(Node::as_str), Some("59999"));
    }

    #[test]
    fn positions_are_one_based() {
        let root = parse("a: 1\nb:\n  - x\n  - 'y'\n").unwrap().unwrap();
        let b = root.get("b").unwrap();
        assert_eq!(b.pos, Pos { line: 3, col: 3 });
        let Value::Seq(items) = &b.value else {
            panic!()
        };
        assert_eq!(items[1].pos, Pos { line: 4, col: 5 });
        assert_eq!(items[1].value, Value::Scalar("y".into(), false));
        assert_eq!(root.get("a").unwrap().pos, Pos { line: 1, col: 4 });
    }

    #[test]
    fn refuses_what_stack_files_do_not_use() {
        assert!(parse("a: &x 1\nb: *x\n").is_err());
        assert!(parse("a: !!str 1\n").is_err());
        assert!(parse("a: 1\n---\nb: 2\n").is_err());
        assert!(parse("a: 1\na: 2\n").is_err());
        assert_eq!(parse("# nothing\n").unwrap(), None);
        assert!(parse(&"[".repeat(100_000)).is_err());
    }
}
