//! Stack-file support, declared beside each builder: a construct's fields (names, types, docs)
//! are written once, with `stack_file_shape!`, in the construct's own module, and its
//! [`StackFileConstruct::build`] reads them back through a [`FieldReader`] by those same
//! declared [`Field`]s. The stack-file front end (`crate::stackfile`) checks files against the
//! shapes, generates the JSON Schema from them and implements the reader; it never names a
//! construct's fields itself.
//!
//! Reading a field the shape being read does not declare, or leaving unread a field a valid
//! file sets, is reported as an internal error (HF0902): a field cannot be declared without
//! being built, nor built without being declared.

use super::{
    AlarmTopicHandle, Construct, EksClusterHandle, HyperPodHandle, KarpenterHandle,
    LifecycleScriptsHandle,
};
use crate::app::{kind, Ref};
use crate::diagnostics::Code;

/// What a reference must point at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// A VPC: `Network` or `Network.vpc`.
    Vpc,
    /// One subnet or a list of them: `Network.private_subnets`, `Network.gpu_subnet`, ...
    Subnets,
    /// A security group: `ClusterSecurityGroup`.
    SecurityGroup,
    /// An EKS cluster: `Eks`.
    Eks,
    /// A HyperPod cluster: `HyperPod`.
    HyperPod,
    /// Lifecycle scripts: `Lifecycle`.
    Lifecycle,
    /// Karpenter: `Karpenter`.
    Karpenter,
    /// One subnet: `Network.gpu_subnet`, `Network.hyperpod_subnet`.
    Subnet,
    /// An S3 bucket: `Lifecycle` or `Lifecycle.bucket`.
    Bucket,
    /// The role of nodes: a managed node group or Karpenter (its node role).
    NodeRole,
    /// A model store: `Weights`.
    ModelStore,
    /// A notification topic: `Alarms`.
    AlarmTopic,
    /// Prometheus monitoring (its workspace): `Metrics`.
    PrometheusMonitoring,
}

impl Want {
    /// How the wanted thing is described in messages.
    pub fn describe(self) -> &'static str {
        match self {
            Want::Vpc => "a VPC (a `network` construct, or `<network>.vpc`)",
            Want::Subnets => "subnets (`<network>.private_subnets`, `.public_subnets`, `.hyperpod_subnet` or `.gpu_subnet`)",
            Want::SecurityGroup => "a security group (a `cluster_security_group` construct)",
            Want::Eks => "an EKS cluster (an `eks_cluster` construct)",
            Want::HyperPod => "a HyperPod cluster (a `hyperpod_cluster` construct)",
            Want::Lifecycle => "lifecycle scripts (a `lifecycle_scripts` construct)",
            Want::Karpenter => "Karpenter (a `karpenter` construct)",
            Want::Subnet => "one subnet (`<network>.gpu_subnet` or `.hyperpod_subnet`)",
            Want::Bucket => "a bucket (a `lifecycle_scripts` construct, or `<lifecycle>.bucket`)",
            Want::NodeRole => "nodes (a `managed_node_group` or `karpenter` construct)",
            Want::ModelStore => "a model store (a `model_store` construct)",
            Want::AlarmTopic => "a notification topic (an `alarm_topic` construct)",
            Want::PrometheusMonitoring => "Prometheus monitoring (a `prometheus_monitoring` construct)",
        }
    }
}

/// The whole numbers a numeric field accepts, both ends included. Declared with the field
/// (`Ty::U32(RANGE)`) from the same constant the builder's validation checks, so the stack-file
/// loader, the JSON Schema and the builder agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ints {
    /// The smallest value accepted.
    pub min: i64,
    /// The largest value accepted.
    pub max: i64,
}

impl Ints {
    /// `min` to `max`, both included.
    pub const fn new(min: i64, max: i64) -> Ints {
        assert!(min <= max);
        Ints { min, max }
    }

    /// Whether `v` is in the range.
    pub const fn contains(self, v: i64) -> bool {
        self.min <= v && v <= self.max
    }

    /// Whether `v` is in the range (`i128` holds every `u64` and `i64`).
    pub const fn contains_wide(self, v: i128) -> bool {
        self.min as i128 <= v && v <= self.max as i128
    }

    /// Whether the unsigned `v` is in the range.
    pub const fn contains_u64(self, v: u64) -> bool {
        self.contains_wide(v as i128)
    }

    /// The range in words: `20 to 16384`.
    pub fn describe(self) -> String {
        format!("{} to {}", self.min, self.max)
    }
}

/// The numbers a numeric field accepts: `max` is included, `min` too unless `min_exclusive`.
/// Declared with the field (`Ty::F64(RANGE)`) from the constant the builder checks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Floats {
    /// The lower bound.
    pub min: f64,
    /// Whether the lower bound itself is refused.
    pub min_exclusive: bool,
    /// The largest value accepted.
    pub max: f64,
}

impl Floats {
    /// `min` to `max`, both included.
    pub const fn new(min: f64, max: f64) -> Floats {
        Floats {
            min,
            min_exclusive: false,
            max,
        }
    }

    /// Above `min` (excluded) up to `max` (included).
    pub const fn above(min: f64, max: f64) -> Floats {
        Floats {
            min,
            min_exclusive: true,
            max,
        }
    }

    /// Whether `v` is in the range (never for NaN).
    pub fn contains(self, v: f64) -> bool {
        let low = if self.min_exclusive {
            v > self.min
        } else {
            v >= self.min
        };
        low && v <= self.max
    }

    /// The range in words: `1000 to 1000000000000`, `above 0 up to 1`.
    pub fn describe(self) -> String {
        if self.min_exclusive {
            format!("above {} up to {}", self.min, self.max)
        } else {
            format!("{} to {}", self.min, self.max)
        }
    }
}

/// A field's type. Every numeric type carries the field's declared range.
#[derive(Clone, Copy, Debug)]
pub enum Ty {
    /// Any scalar, read as text.
    Str,
    /// A whole number in the range (a non-negative one that fits `u32`).
    U32(Ints),
    /// A whole number in the range (a non-negative one that fits `u64`).
    U64(Ints),
    /// A whole number in the range (one that fits `i64`).
    I64(Ints),
    /// A number in the range.
    F64(Floats),
    /// `true` or `false`.
    Bool,
    /// One of the listed strings.
    Enum(&'static [&'static str]),
    /// A mapping of string keys to scalar values (tags, labels, env).
    StrMap,
    /// A list of scalars.
    StrList,
    /// A list of enum values.
    EnumList(&'static [&'static str]),
    /// A reference to a construct (or one of its attributes) by id.
    Ref(Want),
    /// One reference or a list of references.
    Refs(Want),
    /// A nested object.
    Obj(&'static Shape),
    /// A list of nested objects.
    List(&'static Shape),
    /// The list of constructs of a stage.
    Constructs,
    /// The list of stages.
    Stages,
}

/// A field of an object.
#[derive(Debug)]
pub struct Field {
    /// The key.
    pub name: &'static str,
    /// Its type.
    pub ty: Ty,
    /// Whether it must be present.
    pub required: bool,
    /// The value an absent optional field stands for, as the file would write it (`365`,
    /// `per_az`, `true`); `None` when absence means "not set" or a value derived from other
    /// fields (the doc line says which). The schema gives it as `default`.
    pub default: Option<&'static str>,
    /// One line of documentation.
    pub doc: &'static str,
}

/// An object: its fields, in documentation order.
#[derive(Debug)]
pub struct Shape {
    /// The name used in messages (and `$defs`); a construct's kind for a construct.
    pub name: &'static str,
    /// One line of documentation.
    pub doc: &'static str,
    /// The fields.
    pub fields: &'static [&'static Field],
}

impl Shape {
    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<&'static Field> {
        self.fields.iter().copied().find(|f| f.name == name)
    }

    /// Whether `field` is one of this shape's declared fields (the same declaration).
    pub fn declares(&self, field: &Field) -> bool {
        self.fields.iter().any(|f| std::ptr::eq(*f, field))
    }
}

/// Declares a shape and its fields once: a module `$module` holding one `static` [`Field`] per
/// field (named by the given identifier) and `SHAPE`, the [`Shape`] listing them in order.
///
/// ```ignore
/// stack_file_shape! {
///     pub mod zonal_subnet = "ZonalSubnet", "A subnet in one availability zone." {
///         AZ_ID: req "az_id", Ty::Str, "The zone id.";
///         CIDR: opt "cidr", Ty::Str, "The secondary block.";
///     }
/// }
/// ```
macro_rules! stack_file_shape {
    (@required req) => { true };
    (@required opt) => { false };
    (@default) => { None };
    (@default $default:expr) => { Some($default) };
    (
        $vis:vis mod $module:ident = $name:expr, $doc:literal {
            $( $field:ident : $req:ident $key:literal, $ty:expr, $(default $default:expr,)? $fdoc:literal; )*
        }
    ) => {
        #[doc = concat!("The stack-file fields of `", stringify!($module), "`.")]
        #[allow(unused_imports)]
        $vis mod $module {
            use super::*;
            use $crate::constructs::stack_file::{Field, Shape, Ty, Want};
            $(
                #[doc = concat!("`", $key, "`")]
                pub static $field: Field = Field {
                    name: $key,
                    ty: $ty,
                    required: $crate::constructs::stack_file::stack_file_shape!(@required $req),
                    default: $crate::constructs::stack_file::stack_file_shape!(@default $($default)?),
                    doc: $fdoc,
                };
            )*
            /// The shape: every field above, in documentation order.
            pub static SHAPE: Shape = Shape {
                name: $name,
                doc: $doc,
                fields: &[$( &$field ),*],
            };
        }
    };
}

pub(crate) use stack_file_shape;

/// A reference field's value: `Ok(None)` when absent, `Err(Invalid)` when present but wrong
/// (already reported to the file's author).
pub type Resolved<T> = Result<Option<T>, Invalid>;

/// A value was present but could not be used; the problem has been reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Invalid;

/// Reads the declared fields of one object of a stack file (a construct, or an object nested
/// in one). Values are read only through the [`Field`]s of the shape being read; a field of
/// another shape is a programming error (reported as an internal error). Scalars that are absent or of
/// the wrong type, and numbers outside the field's declared range (all already reported by the
/// structural check), read as `None`.
pub trait FieldReader {
    /// The text of a scalar field.
    fn text(&mut self, field: &'static Field) -> Option<String>;
    /// A whole number up to `u32::MAX`.
    fn u32(&mut self, field: &'static Field) -> Option<u32>;
    /// A non-negative whole number.
    fn u64(&mut self, field: &'static Field) -> Option<u64>;
    /// A whole number.
    fn i64(&mut self, field: &'static Field) -> Option<i64>;
    /// A number.
    fn f64(&mut self, field: &'static Field) -> Option<f64>;
    /// `true` or `false`.
    fn bool(&mut self, field: &'static Field) -> Option<bool>;
    /// A mapping of names to scalar values, in file order (empty when absent).
    fn str_map(&mut self, field: &'static Field) -> Vec<(String, String)>;
    /// A list of scalars, `None` when absent.
    fn str_list(&mut self, field: &'static Field) -> Option<Vec<String>>;
    /// Whether the field is present.
    fn has(&mut self, field: &'static Field) -> bool;

    /// A VPC reference.
    fn vpc(&mut self, field: &'static Field) -> Resolved<Ref<kind::Vpc>>;
    /// One subnet reference or a list of them.
    fn subnets(&mut self, field: &'static Field) -> Resolved<Vec<Ref<kind::Subnet>>>;
    /// A reference naming exactly one subnet.
    fn subnet(&mut self, field: &'static Field) -> Resolved<Ref<kind::Subnet>>;
    /// One security group reference or a list of them.
    fn security_groups(&mut self, field: &'static Field)
        -> Resolved<Vec<Ref<kind::SecurityGroup>>>;
    /// An EKS cluster reference.
    fn eks(&mut self, field: &'static Field) -> Resolved<EksClusterHandle>;
    /// A lifecycle scripts reference.
    fn lifecycle(&mut self, field: &'static Field) -> Resolved<LifecycleScriptsHandle>;
    /// A HyperPod cluster reference.
    fn hyperpod(&mut self, field: &'static Field) -> Resolved<HyperPodHandle>;
    /// A Karpenter reference.
    fn karpenter(&mut self, field: &'static Field) -> Resolved<KarpenterHandle>;
    /// A bucket reference.
    fn bucket(&mut self, field: &'static Field) -> Resolved<Ref<kind::Bucket>>;
    /// The node roles a list field names (managed node groups or Karpenter).
    fn node_roles(&mut self, field: &'static Field) -> Resolved<Vec<Ref<kind::Role>>>;
    /// A model store reference.
    fn model_store(
        &mut self,
        field: &'static Field,
    ) -> Resolved<crate::constructs::ModelStoreHandle>;
    /// A notification topic reference.
    fn alarm_topic(&mut self, field: &'static Field) -> Resolved<AlarmTopicHandle>;
    /// A Prometheus monitoring reference.
    fn prometheus_monitoring(
        &mut self,
        field: &'static Field,
    ) -> Resolved<crate::constructs::PrometheusMonitoringHandle>;

    /// Runs `body` with a reader of the nested object `field` (an [`Ty::Obj`]), if present.
    fn object(&mut self, field: &'static Field, body: &mut dyn FnMut(&mut dyn FieldReader));
    /// Runs `body` with a reader of each object of the list `field` (a [`Ty::List`]).
    fn each(&mut self, field: &'static Field, body: &mut dyn FnMut(&mut dyn FieldReader));
    /// Records that the object being read is the part `name` of the construct (its display
    /// path is the construct's path and `/name`), written at `field`; builder diagnostics
    /// about the part point into it.
    fn part(&mut self, name: &str, field: &'static Field);
    /// Reports a problem with the object being read, at `field` when given and present
    /// (otherwise at the object).
    fn report(&mut self, code: Code, field: Option<&'static Field>, message: &str, help: &str);
}

/// The required value of a reference: `None` when absent or invalid.
pub fn required<T>(value: Resolved<T>) -> Option<T> {
    value.ok().flatten()
}

/// Builds one value from the nested object `field`, if present.
pub fn object<T>(
    r: &mut dyn FieldReader,
    field: &'static Field,
    mut build: impl FnMut(&mut dyn FieldReader) -> T,
) -> Option<T> {
    let mut out = None;
    r.object(field, &mut |o| out = Some(build(o)));
    out
}

/// Builds one value from each object of the list `field`, skipping objects that build `None`.
pub fn list<T>(
    r: &mut dyn FieldReader,
    field: &'static Field,
    mut build: impl FnMut(&mut dyn FieldReader) -> Option<T>,
) -> Vec<T> {
    let mut out = Vec::new();
    r.each(field, &mut |o| out.extend(build(o)));
    out
}

/// A construct with a stack-file form: the key [`Construct::KIND`] holds its id, and the other
/// fields of [`StackFileConstruct::SHAPE`] its settings.
///
/// Every construct of the registry implements it (the registry lists the shapes), so a
/// construct cannot be registered without its stack-file form.
pub trait StackFileConstruct: Construct {
    /// The construct's fields; its name is [`Construct::KIND`] and its first field the id.
    const SHAPE: &'static Shape;
    /// Builds the construct with id `id` from its fields; `None` when a value it needs is
    /// missing or invalid (already reported).
    fn build(id: &str, r: &mut dyn FieldReader) -> Option<Self>;
}

/// Receives one registered construct type at a time (see [`visit_kind`](super::visit_kind)).
pub trait KindVisitor {
    /// What visiting yields.
    type Out;
    /// Visits construct type `C`.
    fn visit<C: StackFileConstruct>(self) -> Self::Out
    where
        C::Handle: 'static;
}
