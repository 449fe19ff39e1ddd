//! The schema parser against any JSON text.
//!
//! Checked: no panic, in the parser or in checking each column's default value against
//! its own type (which may refuse it: an enum's or a range's zero value is outside it,
//! as in OVS, where defaults are not checked against constraints).

use ovsdb_proto::DatabaseSchema;

/// The check; see the module docs.
pub fn check(data: &[u8]) {
    let Ok(schema) = DatabaseSchema::from_slice(data) else {
        return;
    };
    for table in schema.tables.values() {
        for column in table.columns.values() {
            let default = column.column_type.default_datum();
            assert!(default.len() <= 1, "{}.{}", table.name, column.name);
            let _ = column.column_type.check(&default);
        }
    }
}
