//! JSON merge patch (RFC 7386) and JSON patch (RFC 6902) over `serde_json` values, for
//! `Stack::patch_object`. A JSON patch applies to a copy and replaces the target only when every
//! operation applied, so a failing patch changes nothing.

use serde_json::{Map, Value};

/// Applies merge patch `patch` to `target` (RFC 7386, section 2).
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(members) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else { return };
    for (name, value) in members {
        if value.is_null() {
            t.remove(name);
        } else {
            merge_patch(t.entry(name.clone()).or_insert(Value::Null), value);
        }
    }
}

/// Applies JSON patch `ops` (an array of operations) to `target` (RFC 6902). On failure,
/// returns the failing operation's index and the reason, and leaves `target` unchanged.
pub(crate) fn json_patch(target: &mut Value, ops: &Value) -> Result<(), (usize, String)> {
    let Value::Array(ops) = ops else {
        return Err((0, "a JSON patch is a list of operations".to_owned()));
    };
    let mut doc = target.clone();
    for (i, op) in ops.iter().enumerate() {
        apply_op(&mut doc, op).map_err(|e| (i, e))?;
    }
    *target = doc;
    Ok(())
}

fn member<'a>(op: &'a Value, name: &str) -> Result<&'a Value, String> {
    op.get(name)
        .ok_or_else(|| format!("the operation has no `{name}` member"))
}

fn pointer_member<'a>(op: &'a Value, name: &str) -> Result<&'a str, String> {
    member(op, name)?
        .as_str()
        .ok_or_else(|| format!("`{name}` is not a string"))
}

fn apply_op(doc: &mut Value, op: &Value) -> Result<(), String> {
    if !op.is_object() {
        return Err("an operation is an object".to_owned());
    }
    let name = pointer_member(op, "op")?;
    let path = pointer_member(op, "path")?;
    match name {
        "add" => add(doc, path, member(op, "value")?.clone()),
        "remove" => remove(doc, path).map(|_| ()),
        "replace" => {
            let value = member(op, "value")?.clone();
            let slot = doc
                .pointer_mut(&checked(path)?)
                .ok_or_else(|| format!("`{path}` does not exist"))?;
            *slot = value;
            Ok(())
        }
        "move" => {
            let from = pointer_member(op, "from")?;
            if path != from && path.starts_with(&format!("{from}/")) {
                return Err(format!("cannot move `{from}` into its own child `{path}`"));
            }
            let value = remove(doc, from)?;
            add(doc, path, value)
        }
        "copy" => {
            let from = pointer_member(op, "from")?;
            let value = doc
                .pointer(&checked(from)?)
                .cloned()
                .ok_or_else(|| format!("`{from}` does not exist"))?;
            add(doc, path, value)
        }
        "test" => {
            let expected = member(op, "value")?;
            match doc.pointer(&checked(path)?) {
                Some(actual) if actual == expected => Ok(()),
                Some(actual) => Err(format!("`{path}` is {actual}, not {expected}")),
                None => Err(format!("`{path}` does not exist")),
            }
        }
        other => Err(format!(
            "unknown operation `{other}` (add, remove, replace, move, copy, test)"
        )),
    }
}

/// `path` if it is a JSON Pointer (empty, or starting with `/`).
fn checked(path: &str) -> Result<String, String> {
    if path.is_empty() || path.starts_with('/') {
        Ok(path.to_owned())
    } else {
        Err(format!(
            "`{path}` is not a JSON Pointer (start it with `/`)"
        ))
    }
}

/// The parent pointer and the unescaped last token of `path`.
fn split(path: &str) -> Result<(&str, String), String> {
    checked(path)?;
    let Some(at) = path.rfind('/') else {
        return Err("the operation's path names the whole document".to_owned());
    };
    let token = path[at + 1..].replace("~1", "/").replace("~0", "~");
    Ok((&path[..at], token))
}

fn array_index(token: &str, len: usize, appending: bool) -> Result<usize, String> {
    if appending && token == "-" {
        return Ok(len);
    }
    if token.is_empty()
        || !token.bytes().all(|b| b.is_ascii_digit())
        || (token.len() > 1 && token.starts_with('0'))
    {
        return Err(format!("`{token}` is not a list index"));
    }
    let i: usize = token
        .parse()
        .map_err(|_| format!("`{token}` is not a list index"))?;
    let limit = if appending {
        len
    } else {
        len.saturating_sub(1)
    };
    if i > limit || (!appending && len == 0) {
        return Err(format!("index {i} is past the end of a list of {len}"));
    }
    Ok(i)
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, token) = split(path)?;
    let target = doc
        .pointer_mut(parent)
        .ok_or_else(|| format!("the parent of `{path}` does not exist"))?;
    match target {
        Value::Object(m) => {
            m.insert(token, value);
            Ok(())
        }
        Value::Array(items) => {
            let i = array_index(&token, items.len(), true)?;
            items.insert(i, value);
            Ok(())
        }
        _ => Err(format!("the parent of `{path}` is not an object or list")),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, String> {
    let (parent, token) = split(path)?;
    let target = doc
        .pointer_mut(parent)
        .ok_or_else(|| format!("`{path}` does not exist"))?;
    match target {
        Value::Object(m) => m
            .remove(&token)
            .ok_or_else(|| format!("`{path}` does not exist")),
        Value::Array(items) => {
            let i = array_index(&token, items.len(), false)?;
            Ok(items.remove(i))
        }
        _ => Err(format!("`{path}` does not exist")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// RFC 7386 appendix A, every example.
    #[test]
    fn merge_patch_rfc_examples() {
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (
                json!({"a":"b","b":"c"}),
                json!({"a":null}),
                json!({"b":"c"}),
            ),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (
                json!({"a":{"b":"c"}}),
                json!({"a":{"b":"d","c":null}}),
                json!({"a":{"b":"d"}}),
            ),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"a":"foo"}), json!("bar"), json!("bar")),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (
                json!({}),
                json!({"a":{"bb":{"ccc":null}}}),
                json!({"a":{"bb":{}}}),
            ),
        ];
        for (target, patch, expected) in cases {
            let mut t = target.clone();
            merge_patch(&mut t, &patch);
            assert_eq!(t, expected, "{target} + {patch}");
        }
    }

    fn ok(doc: Value, patch: Value, expected: Value) {
        let mut d = doc.clone();
        json_patch(&mut d, &patch).unwrap_or_else(|e| panic!("{doc} {patch}: {e:?}"));
        assert_eq!(d, expected, "{patch}");
    }

    fn fails(doc: Value, patch: Value) -> (usize, String) {
        let mut d = doc.clone();
        let e = json_patch(&mut d, &patch).unwrap_err();
        assert_eq!(d, doc, "a failing patch changes nothing");
        e
    }

    /// RFC 6902 appendix A.
    #[test]
    fn json_patch_rfc_examples() {
        // A.1 - A.8
        ok(
            json!({"foo":"bar"}),
            json!([{"op":"add","path":"/baz","value":"qux"}]),
            json!({"baz":"qux","foo":"bar"}),
        );
        ok(
            json!({"foo":["bar","baz"]}),
            json!([{"op":"add","path":"/foo/1","value":"qux"}]),
            json!({"foo":["bar","qux","baz"]}),
        );
        ok(
            json!({"baz":"qux","foo":"bar"}),
            json!([{"op":"remove","path":"/baz"}]),
            json!({"foo":"bar"}),
        );
        ok(
            json!({"foo":["bar","qux","baz"]}),
            json!([{"op":"remove","path":"/foo/1"}]),
            json!({"foo":["bar","baz"]}),
        );
        ok(
            json!({"baz":"qux","foo":"bar"}),
            json!([{"op":"replace","path":"/baz","value":"boo"}]),
            json!({"baz":"boo","foo":"bar"}),
        );
        ok(
            json!({"foo":{"bar":"baz","waldo":"fred"},"qux":{"corge":"grault"}}),
            json!([{"op":"move","from":"/foo/waldo","path":"/qux/thud"}]),
            json!({"foo":{"bar":"baz"},"qux":{"corge":"grault","thud":"fred"}}),
        );
        ok(
            json!({"foo":["all","grass","cows","eat"]}),
            json!([{"op":"move","from":"/foo/1","path":"/foo/3"}]),
            json!({"foo":["all","cows","eat","grass"]}),
        );
        ok(
            json!({"baz":"qux","foo":["a",2,"c"]}),
            json!([{"op":"test","path":"/baz","value":"qux"},{"op":"test","path":"/foo/1","value":2}]),
            json!({"baz":"qux","foo":["a",2,"c"]}),
        );
        // A.9: a failing test.
        assert_eq!(
            fails(
                json!({"baz":"qux"}),
                json!([{"op":"test","path":"/baz","value":"bar"}])
            )
            .0,
            0
        );
        // A.10: adding a nested member object.
        ok(
            json!({"foo":"bar"}),
            json!([{"op":"add","path":"/child","value":{"grandchild":{}}}]),
            json!({"foo":"bar","child":{"grandchild":{}}}),
        );
        // A.11: unrecognized members are ignored.
        ok(
            json!({"foo":"bar"}),
            json!([{"op":"add","path":"/baz","value":"qux","xyz":123}]),
            json!({"foo":"bar","baz":"qux"}),
        );
        // A.12: adding to a nonexistent target.
        let (i, e) = fails(
            json!({"foo":"bar"}),
            json!([{"op":"add","path":"/baz/bat","value":"qux"}]),
        );
        assert_eq!(i, 0);
        assert!(e.contains("does not exist"), "{e}");
        // A.14: ~ escapes.
        ok(
            json!({"/":9,"~1":10}),
            json!([{"op":"test","path":"/~01","value":10}]),
            json!({"/":9,"~1":10}),
        );
        // A.15: comparing strings and numbers.
        fails(
            json!({"/":9,"~1":10}),
            json!([{"op":"test","path":"/~01","value":"10"}]),
        );
        // A.16: adding an array value.
        ok(
            json!({"foo":["bar"]}),
            json!([{"op":"add","path":"/foo/-","value":["abc","def"]}]),
            json!({"foo":["bar",["abc","def"]]}),
        );
        // Copy, and a failure in a later operation that rolls back the earlier ones.
        ok(
            json!({"a":{"b":1}}),
            json!([{"op":"copy","from":"/a","path":"/c"}]),
            json!({"a":{"b":1},"c":{"b":1}}),
        );
        let (i, _) = fails(
            json!({"a":[1]}),
            json!([{"op":"add","path":"/a/-","value":2},{"op":"remove","path":"/a/5"}]),
        );
        assert_eq!(i, 1);
        assert!(fails(json!({}), json!([{"op":"frobnicate","path":"/a"}]))
            .1
            .contains("unknown operation"));
        assert!(fails(json!({}), json!([{"op":"add","path":"a","value":1}]))
            .1
            .contains("JSON Pointer"));
        assert!(fails(
            json!({"a":[1]}),
            json!([{"op":"add","path":"/a/01","value":1}])
        )
        .1
        .contains("index"));
        fails(json!({}), json!({"op":"add"}));
    }
}
