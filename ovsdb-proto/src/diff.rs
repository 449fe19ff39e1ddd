//! Applying the `modify` entries of `update2`/`update3`, as ovsdb-server makes them, to
//! cached rows, generic rows and model types alike: for a column that holds at most one
//! value (a scalar, an optional value) the new value; for a set the elements to toggle;
//! for a map the pairs to add, change or (when equal to the current pair) remove.

use std::collections::BTreeMap;

use crate::datum::{Atom, Datum, Row};
use crate::schema::{ColumnType, Max, TableSchema};

/// Why a diff could not be applied.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DiffError {
    /// A map column's diff, but its current value is not a map.
    #[error("current value {0} is not a map")]
    CurrentNotMap(Datum),
    /// A map column's diff that is not a map.
    #[error("diff {0} is not a map")]
    DiffNotMap(Datum),
    /// A set column's diff, but its current value is not a set.
    #[error("current value {0} is not a set")]
    CurrentNotSet(Datum),
    /// A set column's diff that is not a set.
    #[error("diff {0} is not a set")]
    DiffNotSet(Datum),
    /// A diff of a column the table does not have.
    #[error("table {table} has no column {column}")]
    NoColumn {
        /// The table.
        table: String,
        /// The column.
        column: String,
    },
    /// A column's diff that could not be applied.
    #[error("table {table} column {column}: {source}")]
    Column {
        /// The table.
        table: String,
        /// The column.
        column: String,
        /// Why.
        source: Box<DiffError>,
    },
}

/// Applies one column's diff.
pub fn apply_column(ty: &ColumnType, old: &Datum, diff: &Datum) -> Result<Datum, DiffError> {
    apply_diff(ty.max == Max::Limited(1), ty.is_map(), old, diff)
}

/// Applies a diff to a value of a column that holds at most one value (`single`) or
/// several, a map (`map`) or a set: the one diff function, for cached rows and model
/// types alike.
pub(crate) fn apply_diff(
    single: bool,
    map: bool,
    old: &Datum,
    diff: &Datum,
) -> Result<Datum, DiffError> {
    // ovsdb-server diffs only columns that may hold several values; for the others
    // (`max` 1, optional ones included) the diff is the new value, empty when the
    // value was removed.
    if single {
        return Ok(diff.clone());
    }
    if map {
        let mut map: BTreeMap<Atom, Atom> = old
            .as_map()
            .ok_or_else(|| DiffError::CurrentNotMap(old.clone()))?
            .iter()
            .cloned()
            .collect();
        for (k, v) in diff
            .as_map()
            .ok_or_else(|| DiffError::DiffNotMap(diff.clone()))?
        {
            if map.get(k) == Some(v) {
                map.remove(k);
            } else {
                map.insert(k.clone(), v.clone());
            }
        }
        return Ok(Datum::Map(map.into_iter().collect()));
    }
    let current = old
        .as_set()
        .ok_or_else(|| DiffError::CurrentNotSet(old.clone()))?;
    let mut toggles: Vec<&Atom> = diff
        .as_set()
        .ok_or_else(|| DiffError::DiffNotSet(diff.clone()))?
        .iter()
        .collect();
    toggles.sort_unstable();
    toggles.dedup();
    // Both sorted: one merge, each element copied once (a set of 250k references that
    // gains one costs one pass, not one shift per element toggled).
    let mut set = Vec::with_capacity(current.len() + toggles.len());
    let mut t = toggles.into_iter().peekable();
    for a in current {
        while let Some(x) = t.next_if(|x| *x < a) {
            set.push(x.clone());
        }
        if t.next_if(|x| *x == a).is_none() {
            set.push(a.clone());
        }
    }
    set.extend(t.cloned());
    Ok(Datum::Set(set.into()))
}

/// Applies a `modify` entry to a row; the result is a new row, the old one untouched.
pub fn apply_row(table: &TableSchema, old: &Row, diff: &Row) -> Result<Row, DiffError> {
    let mut row = old.clone();
    for (column, d) in diff {
        let ty = table
            .column_type(column)
            .ok_or_else(|| DiffError::NoColumn {
                table: table.name.clone(),
                column: column.clone(),
            })?;
        let current = row
            .get(column)
            .cloned()
            .unwrap_or_else(|| ty.default_datum());
        let new = apply_column(&ty, &current, d).map_err(|e| DiffError::Column {
            table: table.name.clone(),
            column: column.clone(),
            source: Box::new(e),
        })?;
        row.insert(column.clone(), new);
    }
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ty(j: serde_json::Value) -> ColumnType {
        ColumnType::parse(&j, "t").unwrap()
    }

    fn d(j: serde_json::Value) -> Datum {
        Datum::from_json(&j).unwrap()
    }

    #[test]
    fn single_values_are_replaced_sets_toggled_maps_merged() {
        let s = ty(json!("string"));
        assert_eq!(
            apply_column(&s, &d(json!("a")), &d(json!("b"))).unwrap(),
            d(json!("b"))
        );
        // An optional value is replaced, as ovsdb-server sends it (the new value, or
        // the empty set when it was removed), not toggled.
        let opt = ty(json!({"key": "integer", "min": 0, "max": 1}));
        assert_eq!(
            apply_column(&opt, &d(json!(["set", []])), &d(json!(5))).unwrap(),
            d(json!(5))
        );
        assert_eq!(
            apply_column(&opt, &d(json!(5)), &d(json!(6))).unwrap(),
            d(json!(6))
        );
        assert_eq!(
            apply_column(&opt, &d(json!(5)), &d(json!(["set", []]))).unwrap(),
            d(json!(["set", []]))
        );
        let set = ty(json!({"key": "string", "min": 0, "max": "unlimited"}));
        assert_eq!(
            apply_column(
                &set,
                &d(json!(["set", ["a", "b"]])),
                &d(json!(["set", ["b", "c"]]))
            )
            .unwrap(),
            d(json!(["set", ["a", "c"]]))
        );
        let map = ty(json!({"key": "string", "value": "string", "min": 0, "max": "unlimited"}));
        assert_eq!(
            apply_column(
                &map,
                &d(json!(["map", [["a", "1"], ["b", "2"]]])),
                &d(json!(["map", [["a", "1"], ["b", "3"], ["c", "4"]]]))
            )
            .unwrap(),
            d(json!(["map", [["b", "3"], ["c", "4"]]]))
        );
        assert!(apply_column(&map, &d(json!(["set", ["x"]])), &d(json!(["map", []]))).is_err());
    }
}
