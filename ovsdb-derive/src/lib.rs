//! Derive macros for typed OVSDB models.
//!
//! - `#[derive(Table)]` on a struct that is one table's row: decoding from a row and
//!   from `update2` diffs, encoding, the table name, typed columns and a description of
//!   the fields that a client checks against the server's schema.
//! - `#[derive(Enum)]` on an enum that is an enum-constrained string column.
//!
//! ```
//! use std::collections::{BTreeMap, BTreeSet};
//! use ovsdb_proto::model::{Ref, Table};
//! use ovsdb_proto::Uuid;
//!
//! #[derive(Clone, Debug, Default, PartialEq, ovsdb_derive::Table)]
//! #[ovsdb(table = "Logical_Switch_Port")]
//! pub struct LogicalSwitchPort {
//!     #[ovsdb(uuid)]
//!     pub uuid: Uuid,
//!     pub name: String,
//! }
//!
//! #[derive(Clone, Debug, Default, PartialEq, ovsdb_derive::Table)]
//! #[ovsdb(table = "Logical_Switch")]
//! pub struct LogicalSwitch {
//!     #[ovsdb(uuid)]
//!     pub uuid: Uuid,
//!     pub name: String,
//!     pub ports: BTreeSet<Ref<LogicalSwitchPort>>,
//!     #[ovsdb(column = "external_ids")]
//!     pub ids: BTreeMap<String, String>,
//! }
//!
//! assert_eq!(LogicalSwitch::NAME, "Logical_Switch");
//! let by_name = LogicalSwitch::COLUMNS.name.eq("sw0");
//! # let _ = by_name;
//! ```
//!
//! This crate only holds the entry points; the work is done in `internals`, in the
//! order parse (`attr`, `ast`), check (`check`), expand (`expand`), with every problem
//! collected in one `Ctxt` so that one compile reports them all.

#![warn(missing_docs)]

mod internals;

use proc_macro::TokenStream;

/// Implements `ovsdb_proto::model::Table` for a row struct; see the crate docs.
///
/// Container attribute: `#[ovsdb(table = "NAME")]` (default: the struct's name).
/// Field attributes: `#[ovsdb(column = "NAME")]` (default: the field's name),
/// `#[ovsdb(uuid)]` on the field that holds `_uuid` (or name the field `_uuid`).
#[proc_macro_derive(Table, attributes(ovsdb))]
pub fn derive_table(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    internals::expand::table(&input)
        .unwrap_or_else(internals::to_compile_errors)
        .into()
}

/// Implements `ovsdb_proto::model::AtomValue` and `ColumnValue` for an enum of string
/// values.
///
/// Variant attributes: `#[ovsdb(rename = "value")]` (default: the variant's name), and
/// `#[ovsdb(other)]` on one `Variant(String)` that keeps values the enum does not list,
/// so that a newer server's values decode instead of failing.
#[proc_macro_derive(Enum, attributes(ovsdb))]
pub fn derive_enum(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    internals::expand::enumeration(&input)
        .unwrap_or_else(internals::to_compile_errors)
        .into()
}
