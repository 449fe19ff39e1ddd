//! Typed rows for OVN_Northbound 7.18.0 (OVN 26.03), generated from
//! `schemas/ovn-nb.ovsschema` by `ovsdb-codegen` and checked in (`src/generated.rs`,
//! with a test that fails when it is stale), plus a few hand-written helpers.
//!
//! Every table is a struct deriving `ovsdb_derive::Table`: [`LogicalSwitch`],
//! [`LogicalSwitchPort`], [`LogicalRouter`], [`LogicalRouterPort`], … Enum-constrained
//! columns are Rust enums that keep values they do not list (a newer server's) in an
//! `Other(String)` variant. References are typed: `LogicalSwitch::ports` is a set of
//! `Ref<LogicalSwitchPort>`. Each schema index has a key type, such as
//! [`LogicalSwitchPortByName`].
//!
//! ```
//! use nb_model::{LogicalRouterPort, LogicalSwitch};
//! use ovsdb_proto::model::Table;
//!
//! let lrp = LogicalRouterPort::with_networks("rtos-sw0", "0a:58:0a:f4:00:01", ["10.244.0.1/24"]).unwrap();
//! assert_eq!(lrp.networks.len(), 1);
//! let by_name = LogicalSwitch::COLUMNS.name.eq("sw0");
//! # let _ = by_name;
//! ```

#![warn(missing_docs)]

#[rustfmt::skip]
mod generated;
mod helpers;
pub mod keys;

pub use generated::*;
pub use helpers::InvalidAddress;
