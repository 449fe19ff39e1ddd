//! A value against a real column: any JSON text read as a datum and checked against a
//! column of OVN_Northbound or Open_vSwitch.
//!
//! Input: bytes 0 and 1 pick the column, the rest is the value's JSON. Checked: no
//! panic; a value the column accepts survives its own JSON round trip exactly (the same
//! datum, accepted again).

use std::sync::OnceLock;

use ovsdb_proto::{ColumnType, DatabaseSchema, Datum};

/// Columns of kinds the shipped schemas lack (none has a real column today).
const EXTRA: &str = r#"{"name": "Fuzz", "version": "1.0.0", "tables": {"Fuzz": {"columns": {
    "r": {"type": "real"},
    "reals": {"type": {"key": {"type": "real", "minReal": -1e300, "maxReal": 1e300}, "min": 0, "max": "unlimited"}},
    "weights": {"type": {"key": "string", "value": "real", "min": 0, "max": "unlimited"}}
}}}}"#;

/// Every column of the schemas (OVN_Northbound, Open_vSwitch and a few of kinds those
/// lack), as `table.column` and type; the input's first two bytes index it.
pub fn columns() -> &'static [(String, ColumnType)] {
    static COLUMNS: OnceLock<Vec<(String, ColumnType)>> = OnceLock::new();
    COLUMNS.get_or_init(|| {
        let mut out = Vec::new();
        for text in [
            crate::NB_SCHEMA,
            include_str!("../../schemas/vswitch.ovsschema"),
            EXTRA,
        ] {
            let schema = DatabaseSchema::from_slice(text.as_bytes()).expect("a shipped schema");
            for table in schema.tables.values() {
                for column in table.columns.values() {
                    out.push((
                        format!("{}.{}", table.name, column.name),
                        column.column_type.clone(),
                    ));
                }
            }
        }
        out
    })
}

/// The check; see the module docs.
pub fn check(data: &[u8]) {
    let [a, b, text @ ..] = data else {
        return;
    };
    let columns = columns();
    let (name, ty) = &columns[usize::from(u16::from_le_bytes([*a, *b])) % columns.len()];
    let Ok(datum) = serde_json::from_slice::<Datum>(text) else {
        return;
    };
    if ty.check(&datum).is_err() {
        return;
    }
    let json = serde_json::to_string(&datum).expect("a datum serializes");
    let back: Datum = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("{name}: {json} does not read back: {e}"));
    assert_eq!(back, datum, "{name}: {json}");
    assert_eq!(ty.check(&back), Ok(()), "{name}: {json}");
}
