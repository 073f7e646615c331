//! hyperforge: typed builders for GPU inference infrastructure on AWS.
pub mod app;
pub mod catalog;
pub mod diagnostics;
pub mod spec;
pub mod synth;
