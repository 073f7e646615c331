//! The catalog: facts about instance types, regions and models, as data that every layer may
//! read. Sources are cited beside each table.

pub mod instances;
pub mod models;
pub mod regions;

pub use instances::{instance, instances, InstanceType};
pub use models::{model, models, Model};
