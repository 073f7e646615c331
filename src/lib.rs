//! hyperforge: typed builders for GPU inference infrastructure on AWS.
pub mod app;
pub mod assembly;
pub mod catalog;
pub mod diagnostics;
pub mod reference;
pub mod spec;
pub mod synth;

pub use app::{App, Stack, StageId};
pub use assembly::{Assembly, AssemblyError};
pub use diagnostics::{Code, Diagnostic, Diagnostics, Severity};
