//! Compact cached rows: one table's monitored columns are named once, in a shared
//! [`Layout`], and each row is only its values in that order. A row of a generic
//! `BTreeMap<String, Datum>` pays for a copy of every column name and a tree node per
//! handful of columns; here it pays for its values alone.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::ser::{Serialize, SerializeMap, Serializer};
use uuid::Uuid;

use crate::datum::{Datum, Row};
use crate::model::ColumnSource;
use crate::schema::{ColumnType, TableSchema};

use crate::diff::apply_column;

/// The monitored columns of one table, in name order, shared by all of its cached rows.
#[derive(Debug, PartialEq)]
pub struct Layout {
    pub(super) table: String,
    pub(super) names: Box<[String]>,
    types: Box<[ColumnType]>,
    pub(super) defaults: Box<[Datum]>,
    /// The schema's unique indexes whose columns are all monitored, as positions in
    /// `names` (sorted by name).
    indexes: Box<[Box<[usize]>]>,
}

impl Layout {
    /// The layout of `columns` of `table` (unknown columns are an error).
    pub(crate) fn new(table: &TableSchema, columns: &[String]) -> Result<Layout, String> {
        let mut names: Vec<String> = columns.to_vec();
        names.sort();
        names.dedup();
        let types = names
            .iter()
            .map(|c| {
                table
                    .column_type(c)
                    .ok_or_else(|| format!("table {} has no column {c}", table.name))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let defaults = types.iter().map(ColumnType::default_datum).collect();
        let indexes = table
            .indexes
            .iter()
            .filter_map(|index| {
                let mut at: Vec<usize> = index
                    .iter()
                    .map(|c| names.binary_search(c).ok())
                    .collect::<Option<_>>()?;
                at.sort_unstable();
                Some(at.into_boxed_slice())
            })
            .collect();
        Ok(Layout {
            table: table.name.clone(),
            names: names.into(),
            types: types.into(),
            defaults,
            indexes,
        })
    }

    /// The table.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The column names, in order.
    pub fn columns(&self) -> impl ExactSizeIterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    pub(super) fn position(&self, column: &str) -> Option<usize> {
        self.names.binary_search_by(|n| n.as_str().cmp(column)).ok()
    }

    /// The unique indexes kept for this table: each as the positions of its columns.
    pub(crate) fn indexes(&self) -> impl Iterator<Item = &[usize]> {
        self.indexes.iter().map(|i| &**i)
    }

    /// Checks the value of column `i` of row `uuid` against the column's type (element
    /// count, atom types, enums, ranges, lengths); the error names table, row, column
    /// and value.
    pub(super) fn check(&self, uuid: &Uuid, i: usize, value: &Datum) -> Result<(), String> {
        self.types[i].check(value).map_err(|why| {
            format!(
                "table {} row {uuid} column {}: {} does not fit the column: {why}",
                self.table,
                self.names[i],
                shown(value)
            )
        })
    }

    /// The column names of an index.
    pub(crate) fn index_name(&self, index: &[usize]) -> Vec<String> {
        index.iter().map(|&i| self.names[i].clone()).collect()
    }
}

/// The hash a unique index files a row under: of its key's values in the index's column
/// order. Fixed keys, so the same values always hash the same.
pub(crate) fn key_hash<'a>(values: impl Iterator<Item = &'a Datum>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    for v in values {
        v.hash(&mut h);
    }
    h.finish()
}

/// A value as it is shown in an error: at most about 200 characters of it.
fn shown(value: &Datum) -> String {
    let mut text = value.to_string();
    if text.len() > 200 {
        let mut end = 200;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// One cached row: the values of its table's monitored columns. Read a column with
/// [`CachedRow::get`] or `row["column"]`; [`CachedRow::to_row`] gives a generic
/// [`Row`].
#[derive(Clone)]
pub struct CachedRow {
    pub(super) layout: Arc<Layout>,
    pub(super) values: Box<[Datum]>,
}

impl CachedRow {
    /// This row (`uuid`) with an `update2` `modify` entry applied (each changed
    /// column's diff, by position in the layout); the row itself is untouched. A result
    /// that does not fit its column is an error.
    pub(crate) fn apply_diff(
        &self,
        uuid: &Uuid,
        diff: &[(usize, Datum)],
    ) -> Result<CachedRow, String> {
        // The modified columns computed from the old values, the others copied: each
        // value is copied once.
        let mut changed: Vec<Option<Datum>> = vec![None; self.values.len()];
        for (i, d) in diff {
            let i = *i;
            let base = changed[i].as_ref().unwrap_or(&self.values[i]);
            let new = apply_column(&self.layout.types[i], base, d).map_err(|e| {
                format!(
                    "table {} row {uuid} column {}: {e}",
                    self.layout.table, self.layout.names[i]
                )
            })?;
            self.layout.check(uuid, i, &new)?;
            changed[i] = Some(new);
        }
        let values = changed
            .into_iter()
            .zip(self.values.iter())
            .map(|(new, old)| new.unwrap_or_else(|| old.clone()))
            .collect();
        Ok(CachedRow {
            layout: self.layout.clone(),
            values,
        })
    }

    /// The layout the row follows.
    pub(crate) fn layout(&self) -> &Arc<Layout> {
        &self.layout
    }

    /// The row's table.
    pub fn table(&self) -> &str {
        &self.layout.table
    }

    /// The value of `column`, if it is monitored.
    pub fn get(&self, column: &str) -> Option<&Datum> {
        self.layout.position(column).map(|i| &self.values[i])
    }

    /// Every column with its value, in name order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Datum)> {
        self.layout.columns().zip(self.values.iter())
    }

    /// The number of columns.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True for a row of no column.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// A generic copy of the row.
    pub fn to_row(&self) -> Row {
        self.iter()
            .map(|(c, d)| (c.to_owned(), d.clone()))
            .collect()
    }

    /// The hash of the values of one of the layout's indexes (as [`key_hash`] of them).
    pub(crate) fn key_hash(&self, index: &[usize]) -> u64 {
        key_hash(index.iter().map(|&i| &self.values[i]))
    }

    /// True when the values at `index` are `key`, in order.
    pub(crate) fn has_key<'a>(
        &self,
        index: &[usize],
        mut key: impl Iterator<Item = &'a Datum>,
    ) -> bool {
        index.iter().all(|&i| key.next() == Some(&self.values[i])) && key.next().is_none()
    }

    /// True when the values at `index` are the same in both rows (of one layout).
    pub(crate) fn same_at(&self, other: &CachedRow, index: &[usize]) -> bool {
        index.iter().all(|&i| self.values[i] == other.values[i])
    }
}

impl ColumnSource for CachedRow {
    fn column(&self, name: &str) -> Option<&Datum> {
        self.get(name)
    }
}

impl PartialEq for CachedRow {
    fn eq(&self, other: &CachedRow) -> bool {
        (Arc::ptr_eq(&self.layout, &other.layout) || self.layout.names == other.layout.names)
            && self.values == other.values
    }
}

impl PartialEq<Row> for CachedRow {
    fn eq(&self, other: &Row) -> bool {
        self.len() == other.len() && self.iter().all(|(c, d)| other.get(c) == Some(d))
    }
}

impl std::ops::Index<&str> for CachedRow {
    type Output = Datum;

    /// The value of a monitored column; panics for any other, as a map does.
    fn index(&self, column: &str) -> &Datum {
        match self.get(column) {
            Some(d) => d,
            None => panic!(
                "table {} has no monitored column {column}",
                self.layout.table
            ),
        }
    }
}

impl fmt::Debug for CachedRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for CachedRow {
    /// As a row object, `{"column": value, …}`.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.len()))?;
        for (c, d) in self.iter() {
            m.serialize_entry(c, d)?;
        }
        m.end()
    }
}

/// The layouts of every monitored table, by name.
pub(crate) type Layouts = BTreeMap<String, Arc<Layout>>;

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::DeserializeSeed;
    use serde_json::json;

    use crate::cache::decode::{decode_note, Form, RowChange, TableChanges, UpdatesSeed};

    fn layouts() -> Layouts {
        let schema = crate::schema::DatabaseSchema::from_json(&json!({
            "name": "D", "version": "1.0.0", "tables": {"T": {"columns": {
                "name": {"type": "string"},
                "n": {"type": {"key": "integer", "min": 0, "max": 1}},
                "tags": {"type": {"key": "string", "min": 0, "max": "unlimited"}},
                "kind": {"type": {"key": {"type": "string", "enum": ["set", ["a", "b"]]}, "min": 0, "max": 1}},
                "port": {"type": {"key": {"type": "integer", "minInteger": 1, "maxInteger": 100}, "min": 0, "max": 1}},
                "ids": {"type": {"key": "string", "value": "integer", "min": 0, "max": "unlimited"}}
            }, "indexes": [["name"]]}}
        }))
        .unwrap();
        let t = schema.table("T").unwrap();
        let cols: Vec<String> = t.columns.keys().cloned().collect();
        [("T".to_string(), Arc::new(Layout::new(t, &cols).unwrap()))].into()
    }

    const A: &str = "00000000-0000-0000-0000-00000000000a";

    /// Decodes table updates in `form`, as the cache does.
    fn decode(
        l: &Layouts,
        form: Form,
        updates: serde_json::Value,
    ) -> Result<Vec<TableChanges>, String> {
        let text = updates.to_string();
        let mut de = serde_json::Deserializer::from_str(&text);
        UpdatesSeed(l.clone(), form, None)
            .deserialize(&mut de)
            .map_err(|e| e.to_string())
    }

    /// Row A of table T, decoded from `row`.
    fn row(l: &Layouts, row: serde_json::Value) -> CachedRow {
        match decode(l, Form::Two, json!({"T": {A: {"initial": row}}})).unwrap()[0]
            .rows
            .pop()
        {
            Some((_, RowChange::New(row))) => row,
            other => panic!("{other:?}"),
        }
    }

    /// A `modify` of row A of table T, decoded from `diff`.
    fn diff(l: &Layouts, diff: serde_json::Value) -> Result<Vec<(usize, Datum)>, String> {
        match decode(l, Form::Two, json!({"T": {A: {"modify": diff}}}))?[0]
            .rows
            .pop()
        {
            Some((_, RowChange::Modify(d))) => Ok(d),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rows_decode_against_the_layout_with_defaults_for_left_out_columns() {
        let l = layouts();
        let row = row(&l, json!({"name": "a", "_version": ["uuid", A]}));
        assert_eq!(row["name"], Datum::scalar("a"));
        assert_eq!(row["n"], Datum::Set(Box::default()));
        assert_eq!(row.len(), 6, "{row:?}");
        assert!(row.get("_version").is_none());
        assert_eq!(row, row.to_row());
        assert_eq!(
            serde_json::to_value(&row).unwrap(),
            json!({"ids": ["map", []], "kind": ["set", []], "n": ["set", []], "name": "a", "port": ["set", []], "tags": ["set", []]})
        );
    }

    #[test]
    fn diffs_apply_to_a_copy() {
        let l = layouts();
        let a: Uuid = A.parse().unwrap();
        let row = row(&l, json!({"tags": ["set", ["x", "y"]]}));
        let next = row
            .apply_diff(&a, &diff(&l, json!({"tags": ["set", ["y", "z"]]})).unwrap())
            .unwrap();
        assert_eq!(next["tags"], Datum::set(["x", "z"]));
        assert_eq!(row["tags"], Datum::set(["x", "y"]));
        let e = diff(&l, json!({"other": 1})).unwrap_err();
        assert!(e.contains("other") && e.contains("table T"), "{e}");
    }

    #[test]
    fn bad_updates_are_errors_that_say_where() {
        let l = layouts();
        for (bad, want) in [
            (json!({"U": {}}), "table U"),
            (json!({"T": {"x": {"insert": {}}}}), "not a uuid"),
            (json!({"T": {A: {"upsert": {}}}}), "upsert"),
            (
                json!({"T": {A: {"insert": {}, "delete": null}}}),
                "more than one",
            ),
            (json!({"T": {A: {"insert": {"name": {"x": 1}}}}}), ""),
        ] {
            let e = decode(&l, Form::Two, bad.clone()).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    /// Values that do not fit their columns, with what the error must say.
    fn misfits() -> Vec<(&'static str, serde_json::Value, &'static str)> {
        vec![
            ("name", json!(5), "expected string"),
            ("n", json!("x"), "expected integer"),
            ("n", json!(["set", [1, 2, 3]]), "has 3 elements"),
            ("kind", json!("c"), "not one of"),
            ("port", json!(101), "greater than the maximum 100"),
            (
                "ids",
                json!(["map", [["a", "b"]]]),
                "value \"b\" is of type string",
            ),
            ("tags", json!(["map", [["a", "b"]]]), "map"),
        ]
    }

    #[test]
    fn values_that_do_not_fit_their_columns_are_refused_in_every_path() {
        let l = layouts();
        let a: Uuid = A.parse().unwrap();
        let where_ = |e: &str, column: &str| {
            e.contains("table T") && e.contains(A) && e.contains(&format!("column {column}"))
        };
        for (column, value, why) in misfits() {
            let mut errors = vec![
                // Streamed straight into cached rows (a monitor reply).
                decode(
                    &l,
                    Form::Two,
                    json!({"T": {A: {"initial": {column: value}}}}),
                )
                .unwrap_err(),
                // In the plain form (an old server's `monitor`).
                decode(&l, Form::Plain, json!({"T": {A: {"new": {column: value}}}})).unwrap_err(),
            ];
            // In an update3 notification of the cache's monitor.
            let params = json!(["m", A, {"T": {A: {"insert": {column: value}}}}]).to_string();
            errors.push(
                decode_note("update3", params.as_bytes(), "m", "s", &l)
                    .unwrap()
                    .unwrap_err(),
            );
            // As the result of a modify.
            let empty = row(&l, json!({}));
            let d = diff(&l, json!({column: value})).unwrap();
            errors.push(empty.apply_diff(&a, &d).unwrap_err());
            for e in errors {
                assert!(
                    e.contains(why) && where_(&e, column),
                    "{column} {value}: {e}"
                );
            }
        }
    }

    #[test]
    fn a_modify_that_leaves_a_set_too_large_is_refused() {
        let l = layouts();
        let a: Uuid = A.parse().unwrap();
        // "n" holds at most one value: a diff is its new value, so two are too many.
        let row = row(&l, json!({"n": 1}));
        let e = row
            .apply_diff(&a, &diff(&l, json!({"n": ["set", [1, 2]]})).unwrap())
            .unwrap_err();
        assert!(e.contains("has 2 elements"), "{e}");
    }

    #[test]
    fn values_that_fit_are_kept() {
        let l = layouts();
        let row = row(
            &l,
            json!({
                "name": "x", "n": 3, "kind": "b", "port": 100, "ids": ["map", [["a", 1]]],
                "tags": ["set", ["p", "q"]]
            }),
        );
        assert_eq!(row["port"], Datum::scalar(100));
        assert_eq!(row["ids"], Datum::map([("a", 1)]));
    }
}
