//! The integration tests, one module per area, built as one test crate so the library is
//! linked once. Run them with `cargo test --test it`, one area with `cargo test --test it
//! <module>::` (for example `cargo test --test it cli::`).
//!
//! The deploy path against moto is a separate test crate (`tests/deploy_moto.rs`): it needs
//! the `deploy` feature and runs one test at a time.

mod common;
mod fixtures;
#[path = "../../examples/reference/mod.rs"]
mod reference;

mod admin_path;
mod autoscaling;
mod book;
mod checkov_kubernetes;
mod cli;
mod cold_start;
mod conformance;
mod construct_model;
mod crd_inference_endpoint_config;
mod dashboard;
mod diagnostics_doc;
mod drain;
mod eks_path;
mod engine_contract;
mod external_validators;
mod field_ranges;
mod fleet;
mod fleet_file;
mod fsx;
mod fuzz;
mod hostile;
mod image_cache;
mod inputs;
mod layers;
mod logs;
mod manifest;
mod monitoring;
mod multi_node;
mod numeric_inputs;
mod open_model;
mod operations;
mod overrides;
mod parity;
mod policy;
mod reservations;
mod runbook;
mod runbook_script;
mod schemas;
mod snapshots;
mod stackfile;
mod tags;
mod terraform_schema;
mod topology;
mod validation;
mod weights;
mod weights_stager;
mod workload;
mod zones;
