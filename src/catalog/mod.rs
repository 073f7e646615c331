//! The catalog: facts about instance types, regions and models, as data that every layer may
//! read, the GPU memory arithmetic over them, and how fast weights reach the GPUs and what
//! storing them costs (`loading`). Sources are cited beside each table.

pub mod capacity;
mod engine_releases;
pub mod engines;
pub mod instances;
pub mod loading;
pub mod memory;
pub mod models;
pub mod plan;
pub mod regions;
pub mod time;

pub use instances::{instance, instances, InstanceType, PRICED_REGIONS};
pub use loading::{
    cold_start, staging_secs, storage_usd_per_month, ColdStart, StoreKind, WeightSource,
};
pub use memory::MemoryPlan;
pub use models::{model, models, models_markdown, AttentionKind, Experts, Model, Precision};
