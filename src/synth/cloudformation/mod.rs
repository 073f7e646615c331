//! The CloudFormation backend.
pub mod expr;
pub mod l1;
pub mod l1_support;
