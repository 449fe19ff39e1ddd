//! The attribute names the derives understand.

/// The attribute's own name: `#[ovsdb(...)]`.
pub const OVSDB: &str = "ovsdb";
/// Container: the table's name.
pub const TABLE: &str = "table";
/// Field: the column's name.
pub const COLUMN: &str = "column";
/// Field: this field holds the row's `_uuid`.
pub const UUID: &str = "uuid";
/// Enum variant: the value on the wire.
pub const RENAME: &str = "rename";
/// Enum variant: holds values the enum does not list.
pub const OTHER: &str = "other";
