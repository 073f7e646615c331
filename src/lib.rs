//! hyperforge: typed builders for GPU inference infrastructure on AWS.
pub mod synth;
