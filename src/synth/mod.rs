//! Backends: lowering of the construct tree to output formats.
pub mod cloudformation;
pub mod kubernetes;
