//! Derive macros for OVSDB table rows, and a generator that turns an `.ovsschema` file
//! into typed Rust.
//!
//! This crate is a placeholder: the typed-model work (`#[derive(Table)]`, the schema
//! generator) is planned and has not started. Nothing is exported yet.
