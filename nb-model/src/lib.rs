//! Typed rows for OVN_Northbound 7.18.0 (OVN 26.03), generated from
//! `schemas/ovn-nb.ovsschema`.
//!
//! This crate is a placeholder until the generator in `ovsdb-derive` exists. Until then,
//! use the untyped API of [`ovsdb_proto`]; the schema name and version the model will
//! target are below so that callers can already check a server against them.

/// Name of the database this model describes.
pub const DATABASE: &str = "OVN_Northbound";

/// Schema version the model will be generated from.
pub const SCHEMA_VERSION: &str = "7.18.0";
