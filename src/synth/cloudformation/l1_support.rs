//! Support traits for the generated L1 types.

/// Metadata every generated L1 resource struct carries about its CloudFormation type.
pub trait CfnResource: serde::Serialize {
    /// The CloudFormation type name, e.g. `"AWS::EC2::VPC"`.
    const TYPE_NAME: &'static str;
    /// How the type takes tags (from the schema's `tagging` and the tag property's shape).
    const TAGS: TagStyle;
    /// Attribute names usable with `Fn::GetAtt`: top-level read-only properties (`"Arn"`,
    /// `"VpcId"`) and nested ones (`/properties/Foo/Bar` as `"Foo.Bar"`).
    const ATTRIBUTES: &'static [&'static str];
    /// Create-only property names (changing them replaces the resource); nested ones dotted.
    const CREATE_ONLY: &'static [&'static str];
}

/// How a resource type takes tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TagStyle {
    /// The type has no tag property (or the schema says it is not taggable).
    NotTaggable,
    /// The tag property is a list of `{"Key": ..., "Value": ...}` objects.
    KeyValueList,
    /// The tag property is an object of string keys to string values.
    Map,
}
