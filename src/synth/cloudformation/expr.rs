//! CloudFormation values: literals and the intrinsic functions (`Ref`, `Fn::GetAtt`, `Fn::Sub`,
//! `Fn::ImportValue`, ...) that the lowering produces from typed references.
//!
//! Every leaf field of the generated L1 types is a [`Val<T>`]: either a literal of the schema's
//! primitive type or an [`Expr`]. Intrinsics are never built by pasting strings.

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;

/// A CloudFormation intrinsic function or a JSON literal that may contain intrinsics.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// `{"Ref": "LogicalId"}`, also for pseudo parameters such as `AWS::Region`.
    Ref(String),
    /// `{"Fn::GetAtt": ["LogicalId", "Attribute"]}`.
    GetAtt(String, String),
    /// `{"Fn::Sub": "template"}`; `${Name}` refers to parameters, resources or pseudo parameters.
    Sub(String),
    /// `{"Fn::Sub": ["template", {"Var": value}]}`.
    SubWith(String, BTreeMap<String, Expr>),
    /// `{"Fn::ImportValue": name}`: a value exported by an earlier stage's stack.
    ImportValue(Box<Expr>),
    /// `{"Fn::Join": ["delimiter", [values]]}`.
    Join(String, Vec<Expr>),
    /// `{"Fn::Select": [index, list]}`.
    Select(u32, Box<Expr>),
    /// `{"Fn::Base64": value}`.
    Base64(Box<Expr>),
    /// `{"Fn::Split": ["delimiter", source]}`.
    Split(String, Box<Expr>),
    /// `{"Fn::ToJsonString": value}`.
    ToJsonString(Box<Expr>),
    /// A string literal.
    Str(String),
    /// An integer literal.
    Int(i64),
    /// A boolean literal.
    Bool(bool),
    /// A list whose items may be intrinsics.
    List(Vec<Expr>),
    /// An object whose values may be intrinsics (sorted keys: deterministic output).
    Map(BTreeMap<String, Expr>),
    /// Any other JSON literal.
    Json(serde_json::Value),
}

impl Expr {
    /// `Fn::Sub` with no variables.
    pub fn sub(template: impl Into<String>) -> Self {
        Expr::Sub(template.into())
    }

    /// `Ref` to a logical id or pseudo parameter.
    pub fn reference(logical_id: impl Into<String>) -> Self {
        Expr::Ref(logical_id.into())
    }

    /// `Fn::GetAtt`.
    pub fn get_att(logical_id: impl Into<String>, attribute: impl Into<String>) -> Self {
        Expr::GetAtt(logical_id.into(), attribute.into())
    }

    /// A string literal.
    pub fn str(value: impl Into<String>) -> Self {
        Expr::Str(value.into())
    }

    /// The JSON this expression serializes to.
    pub fn to_json(&self) -> serde_json::Value {
        // Serializing an `Expr` into a `serde_json::Value` cannot fail: every variant maps to
        // JSON objects with string keys.
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Whether this is a plain literal (no intrinsic anywhere inside).
    pub fn is_literal(&self) -> bool {
        match self {
            Expr::Str(_) | Expr::Int(_) | Expr::Bool(_) | Expr::Json(_) => true,
            Expr::List(items) => items.iter().all(Expr::is_literal),
            Expr::Map(map) => map.values().all(Expr::is_literal),
            _ => false,
        }
    }
}

impl From<&str> for Expr {
    fn from(value: &str) -> Self {
        Expr::Str(value.to_owned())
    }
}

impl From<String> for Expr {
    fn from(value: String) -> Self {
        Expr::Str(value)
    }
}

impl From<i64> for Expr {
    fn from(value: i64) -> Self {
        Expr::Int(value)
    }
}

impl From<bool> for Expr {
    fn from(value: bool) -> Self {
        Expr::Bool(value)
    }
}

struct One<'a, V: Serialize + ?Sized>(&'a str, &'a V);

impl<V: Serialize + ?Sized> Serialize for One<'_, V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(self.0, self.1)?;
        map.end()
    }
}

struct Pair<'a, A: Serialize + ?Sized, B: Serialize + ?Sized>(&'a A, &'a B);

impl<A: Serialize + ?Sized, B: Serialize + ?Sized> Serialize for Pair<'_, A, B> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(2))?;
        seq.serialize_element(self.0)?;
        seq.serialize_element(self.1)?;
        seq.end()
    }
}

impl Serialize for Expr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Expr::Ref(id) => One("Ref", id).serialize(serializer),
            Expr::GetAtt(id, attr) => {
                One("Fn::GetAtt", &Pair(id.as_str(), attr.as_str())).serialize(serializer)
            }
            Expr::Sub(template) => One("Fn::Sub", template).serialize(serializer),
            Expr::SubWith(template, vars) => {
                One("Fn::Sub", &Pair(template.as_str(), vars)).serialize(serializer)
            }
            Expr::ImportValue(name) => One("Fn::ImportValue", name.as_ref()).serialize(serializer),
            Expr::Join(delimiter, items) => {
                One("Fn::Join", &Pair(delimiter.as_str(), items)).serialize(serializer)
            }
            Expr::Select(index, list) => {
                One("Fn::Select", &Pair(index, list.as_ref())).serialize(serializer)
            }
            Expr::Base64(value) => One("Fn::Base64", value.as_ref()).serialize(serializer),
            Expr::Split(delimiter, source) => {
                One("Fn::Split", &Pair(delimiter.as_str(), source.as_ref())).serialize(serializer)
            }
            Expr::ToJsonString(value) => {
                One("Fn::ToJsonString", value.as_ref()).serialize(serializer)
            }
            Expr::Str(s) => serializer.serialize_str(s),
            Expr::Int(i) => serializer.serialize_i64(*i),
            Expr::Bool(b) => serializer.serialize_bool(*b),
            Expr::List(items) => items.serialize(serializer),
            Expr::Map(map) => map.serialize(serializer),
            Expr::Json(value) => value.serialize(serializer),
        }
    }
}

/// A property value of primitive type `T`: a literal or an intrinsic.
#[derive(Clone, Debug, PartialEq)]
pub enum Val<T> {
    /// A literal of the schema's type.
    Lit(T),
    /// An intrinsic function (resolved by CloudFormation at deploy time).
    Expr(Expr),
}

impl<T: Default> Default for Val<T> {
    fn default() -> Self {
        Val::Lit(T::default())
    }
}

impl<T: Serialize> Serialize for Val<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Val::Lit(value) => value.serialize(serializer),
            Val::Expr(expr) => expr.serialize(serializer),
        }
    }
}

impl<T> From<Expr> for Val<T> {
    fn from(expr: Expr) -> Self {
        Val::Expr(expr)
    }
}

impl From<&str> for Val<String> {
    fn from(value: &str) -> Self {
        Val::Lit(value.to_owned())
    }
}

impl From<String> for Val<String> {
    fn from(value: String) -> Self {
        Val::Lit(value)
    }
}

impl From<&String> for Val<String> {
    fn from(value: &String) -> Self {
        Val::Lit(value.clone())
    }
}

impl From<i64> for Val<i64> {
    fn from(value: i64) -> Self {
        Val::Lit(value)
    }
}

impl From<bool> for Val<bool> {
    fn from(value: bool) -> Self {
        Val::Lit(value)
    }
}

impl From<f64> for Val<f64> {
    fn from(value: f64) -> Self {
        Val::Lit(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn intrinsics_serialize_to_cloudformation_json() {
        assert_eq!(
            Expr::reference("NetworkVpc").to_json(),
            json!({"Ref": "NetworkVpc"})
        );
        assert_eq!(
            Expr::get_att("EksCluster", "Arn").to_json(),
            json!({"Fn::GetAtt": ["EksCluster", "Arn"]})
        );
        assert_eq!(
            Expr::ImportValue(Box::new(Expr::str("stack:NetworkVpc:Id"))).to_json(),
            json!({"Fn::ImportValue": "stack:NetworkVpc:Id"})
        );
        assert_eq!(
            Expr::Select(
                1,
                Box::new(Expr::Split("//".into(), Box::new(Expr::str("s3://b"))))
            )
            .to_json(),
            json!({"Fn::Select": [1, {"Fn::Split": ["//", "s3://b"]}]})
        );
        let mut vars = BTreeMap::new();
        vars.insert("Bucket".to_owned(), Expr::reference("Bucket"));
        assert_eq!(
            Expr::SubWith("arn:${AWS::Partition}:s3:::${Bucket}/*".into(), vars).to_json(),
            json!({"Fn::Sub": ["arn:${AWS::Partition}:s3:::${Bucket}/*", {"Bucket": {"Ref": "Bucket"}}]})
        );
    }

    #[test]
    fn val_serializes_literal_or_intrinsic() {
        let lit: Val<i64> = 8.into();
        let expr: Val<String> = Expr::reference("P").into();
        assert_eq!(serde_json::to_value(&lit).unwrap(), json!(8));
        assert_eq!(serde_json::to_value(&expr).unwrap(), json!({"Ref": "P"}));
    }
}
