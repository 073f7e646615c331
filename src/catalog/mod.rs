//! The catalog: facts about instance types, regions and models, as data that every layer may
//! read, and the GPU memory arithmetic over them. Sources are cited beside each table.

pub mod capacity;
pub mod instances;
pub mod memory;
pub mod models;
pub mod regions;

pub use instances::{instance, instances, InstanceType, PRICED_REGIONS};
pub use memory::MemoryPlan;
pub use models::{model, models, AttentionKind, Experts, Model, Precision};
