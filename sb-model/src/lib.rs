//! Typed rows for OVN_Southbound 21.8.0 (OVN 26.03), generated from
//! `schemas/ovn-sb.ovsschema` by `ovsdb-codegen` and checked in (`src/generated.rs`,
//! with a test that fails when it is stale).
//!
//! Every table is a struct deriving `ovsdb_derive::Table`: [`Chassis`], [`Encap`],
//! [`PortBinding`], [`DatapathBinding`], [`LogicalFlow`], [`MacBinding`], … The
//! database is [`OvnSouthbound`]; a cache of it is
//! `CacheConfig::for_model::<OvnSouthbound>(remotes)`, as for the Northbound's model.
//!
//! ```
//! use sb_model::{Chassis, PortBinding};
//! use ovsdb_proto::model::Table;
//!
//! // The ports a chassis binds, as a condition a monitor or a select takes.
//! let bound = PortBinding::COLUMNS.logical_port.eq("pod-a");
//! # let _ = bound;
//! assert_eq!(Chassis::NAME, "Chassis");
//! ```

#![warn(missing_docs)]

#[rustfmt::skip]
mod generated;

pub use generated::*;
