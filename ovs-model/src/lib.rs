//! Typed rows for Open_vSwitch 8.8.0 (Open vSwitch 4.0), generated from
//! `schemas/vswitch.ovsschema` by `ovsdb-codegen` and checked in (`src/generated.rs`,
//! with a test that fails when it is stale).
//!
//! Every table is a struct deriving `ovsdb_derive::Table`: [`OpenVSwitch`] (the one
//! row of switch-wide settings, where ovn-controller reads `system-id`, `ovn-remote`
//! and `ovn-encap-ip`), [`Bridge`], [`Port`], [`Interface`], … The database is
//! [`OpenVSwitchDatabase`] (the table took the plain name); a cache of it is
//! `CacheConfig::for_model::<OpenVSwitchDatabase>(remotes)`.
//!
//! ```
//! use ovs_model::{Interface, OpenVSwitch};
//! use ovsdb_proto::model::Table;
//!
//! // The interface OVN binds a logical port to names it in `external_ids:iface-id`.
//! let by_name = Interface::COLUMNS.name.eq("tap0");
//! # let _ = by_name;
//! assert_eq!(OpenVSwitch::NAME, "Open_vSwitch");
//! ```

#![warn(missing_docs)]

#[rustfmt::skip]
mod generated;

pub use generated::*;
