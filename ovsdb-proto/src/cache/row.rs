//! Compact cached rows: one table's monitored columns are named once, in a shared
//! [`Layout`], and each row is only its values in that order. A row of a generic
//! `BTreeMap<String, Datum>` pays for a copy of every column name and a tree node per
//! handful of columns; here it pays for its values alone.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};
use uuid::Uuid;

use crate::datum::{Datum, Row};
use crate::model::ColumnSource;
use crate::schema::{ColumnType, TableSchema};

use super::diff::apply_column;

/// The monitored columns of one table, in name order, shared by all of its cached rows.
#[derive(Debug, PartialEq)]
pub struct Layout {
    table: String,
    names: Box<[String]>,
    types: Box<[ColumnType]>,
    defaults: Box<[Datum]>,
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

    fn position(&self, column: &str) -> Option<usize> {
        self.names.binary_search_by(|n| n.as_str().cmp(column)).ok()
    }

    /// The unique indexes kept for this table: each as the positions of its columns.
    pub(crate) fn indexes(&self) -> impl Iterator<Item = &[usize]> {
        self.indexes.iter().map(|i| &**i)
    }

    /// Checks the value of column `i` of row `uuid` against the column's type (element
    /// count, atom types, enums, ranges, lengths); the error names table, row, column
    /// and value.
    fn check(&self, uuid: &Uuid, i: usize, value: &Datum) -> Result<(), String> {
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
    layout: Arc<Layout>,
    values: Box<[Datum]>,
}

impl CachedRow {
    /// Row `uuid` of `layout` from a generic row: columns the row lacks get their
    /// defaults (ovsdb-server leaves out the columns that hold them), columns the layout
    /// does not have are dropped. A value that does not fit its column is an error.
    pub(crate) fn from_row(
        layout: &Arc<Layout>,
        uuid: &Uuid,
        row: Row,
    ) -> Result<CachedRow, String> {
        let mut given = row.into_iter().peekable();
        let mut values = Vec::with_capacity(layout.names.len());
        for (i, name) in layout.names.iter().enumerate() {
            while given.peek().is_some_and(|(c, _)| c < name) {
                given.next();
            }
            let value = match given.next_if(|(c, _)| c == name) {
                Some((_, d)) => {
                    layout.check(uuid, i, &d)?;
                    d
                }
                None => layout.defaults[i].clone(),
            };
            values.push(value);
        }
        Ok(CachedRow {
            layout: layout.clone(),
            values: values.into(),
        })
    }

    /// This row (`uuid`) with an `update2` `modify` entry applied; the row itself is
    /// untouched. A result that does not fit its column is an error.
    pub(crate) fn apply_diff(&self, uuid: &Uuid, diff: &Row) -> Result<CachedRow, String> {
        // The modified columns computed from the old values, the others copied: each
        // value is copied once.
        let mut changed: Vec<Option<Datum>> = vec![None; self.values.len()];
        for (column, d) in diff {
            let i = self.layout.position(column).ok_or_else(|| {
                format!(
                    "modify of column {column}, which table {} does not monitor",
                    self.layout.table
                )
            })?;
            let base = changed[i].as_ref().unwrap_or(&self.values[i]);
            let new = apply_column(&self.layout.types[i], base, d).map_err(|e| {
                format!(
                    "table {} row {uuid} column {column}: {e}",
                    self.layout.table
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

    /// The values of one of the layout's indexes.
    pub(crate) fn key(&self, index: &[usize]) -> Vec<Datum> {
        index.iter().map(|&i| self.values[i].clone()).collect()
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

/// One row's change, decoded against its table's layout.
#[derive(Debug)]
pub(crate) enum RowChange {
    /// `initial` or `insert`: the whole row.
    New(CachedRow),
    /// `modify`: the columns' diffs.
    Modify(Row),
    /// `delete`.
    Delete,
}

/// The changes to one table in one update message.
#[derive(Debug)]
pub(crate) struct TableChanges {
    pub(crate) layout: Arc<Layout>,
    pub(crate) rows: Vec<(Uuid, RowChange)>,
}

/// The layouts of every monitored table, by name.
pub(crate) type Layouts = BTreeMap<String, Arc<Layout>>;

/// An `update2`-form update already decoded into generic rows, brought to the layouts.
pub(crate) fn from_update2(
    layouts: &Layouts,
    updates: crate::monitor::TableUpdates2,
) -> Result<Vec<TableChanges>, String> {
    use crate::monitor::RowUpdate2;
    updates
        .into_iter()
        .map(|(table, rows)| {
            let layout = layout_of(layouts, &table)?;
            let rows = rows
                .into_iter()
                .map(|(uuid, u)| {
                    let change = match u {
                        RowUpdate2::Initial(r) | RowUpdate2::Insert(r) => {
                            RowChange::New(CachedRow::from_row(&layout, &uuid, r)?)
                        }
                        RowUpdate2::Modify(d) => RowChange::Modify(d),
                        RowUpdate2::Delete => RowChange::Delete,
                    };
                    Ok((uuid, change))
                })
                .collect::<Result<_, String>>()?;
            Ok(TableChanges { layout, rows })
        })
        .collect()
}

fn layout_of(layouts: &Layouts, table: &str) -> Result<Arc<Layout>, String> {
    layouts
        .get(table)
        .cloned()
        .ok_or_else(|| format!("update for table {table}, which is not monitored"))
}

/// Decodes `<table-updates2>` (`{"Table": {"uuid": {"initial": row}, …}, …}`) straight
/// into cached rows, with no generic row in between.
pub(crate) struct UpdatesSeed(pub(crate) Layouts);

impl<'de> DeserializeSeed<'de> for UpdatesSeed {
    type Value = Vec<TableChanges>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for UpdatesSeed {
    type Value = Vec<TableChanges>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("table updates, an object of tables")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(table) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let layout = layout_of(&self.0, &table).map_err(serde::de::Error::custom)?;
            let rows = map.next_value_seed(TableSeed(&layout))?;
            out.push(TableChanges { layout, rows });
        }
        Ok(out)
    }
}

struct TableSeed<'a>(&'a Arc<Layout>);

impl<'de> DeserializeSeed<'de> for TableSeed<'_> {
    type Value = Vec<(Uuid, RowChange)>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for TableSeed<'_> {
    type Value = Vec<(Uuid, RowChange)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the updates of table {}, by row uuid", self.0.table)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut rows = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(uuid) = map.next_key_seed(UuidKey(&self.0.table))? {
            let change = map.next_value_seed(ChangeSeed(self.0, &uuid))?;
            rows.push((uuid, change));
        }
        Ok(rows)
    }
}

struct ChangeSeed<'a>(&'a Arc<Layout>, &'a Uuid);

impl<'de> DeserializeSeed<'de> for ChangeSeed<'_> {
    type Value = RowChange;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ChangeSeed<'_> {
    type Value = RowChange;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a row update: {\"initial\"|\"insert\"|\"modify\": row} or {\"delete\": null}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let kind = map
            .next_key_seed(KindKey)?
            .ok_or_else(|| serde::de::Error::custom("an empty row update"))?;
        let change = match kind {
            Kind::New => RowChange::New(map.next_value_seed(RowSeed(self.0, self.1))?),
            Kind::Modify => RowChange::Modify(map.next_value()?),
            Kind::Delete => {
                map.next_value::<IgnoredAny>()?;
                RowChange::Delete
            }
        };
        if map.next_key::<IgnoredAny>()?.is_some() {
            return Err(serde::de::Error::custom(
                "a row update with more than one kind",
            ));
        }
        Ok(change)
    }
}

/// A row's uuid, as a key of a table's updates.
struct UuidKey<'a>(&'a str);

impl<'de> DeserializeSeed<'de> for UuidKey<'_> {
    type Value = Uuid;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for UuidKey<'_> {
    type Value = Uuid;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a row uuid")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Uuid, E> {
        v.parse()
            .map_err(|_| E::custom(format!("table {}: row key {v:?} is not a uuid", self.0)))
    }
}

/// The kind of a row update.
enum Kind {
    New,
    Modify,
    Delete,
}

struct KindKey;

impl<'de> DeserializeSeed<'de> for KindKey {
    type Value = Kind;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KindKey {
    type Value = Kind;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"initial\", \"insert\", \"modify\" or \"delete\"")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Kind, E> {
        match v {
            "initial" | "insert" => Ok(Kind::New),
            "modify" => Ok(Kind::Modify),
            "delete" => Ok(Kind::Delete),
            other => Err(E::custom(format!("unknown row update kind {other:?}"))),
        }
    }
}

/// Decodes a row object against a layout.
struct RowSeed<'a>(&'a Arc<Layout>, &'a Uuid);

impl<'de> DeserializeSeed<'de> for RowSeed<'_> {
    type Value = CachedRow;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowSeed<'_> {
    type Value = CachedRow;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a row of table {}", self.0.table)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let layout = self.0;
        let n = layout.names.len();
        // Filled in place: columns not sent keep a placeholder (an empty set, which
        // allocates nothing) until they get their defaults.
        let mut values: Vec<Datum> = Vec::with_capacity(n);
        values.resize_with(n, || Datum::Set(Vec::new()));
        let mut seen = Seen::new(n);
        while let Some(at) = map.next_key_seed(ColumnKey(layout))? {
            match at {
                Some(i) => {
                    values[i] = map.next_value()?;
                    layout
                        .check(self.1, i, &values[i])
                        .map_err(serde::de::Error::custom)?;
                    seen.set(i);
                }
                // A column not asked for (`_version`, say): not cached.
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        for (i, value) in values.iter_mut().enumerate() {
            if !seen.get(i) {
                *value = layout.defaults[i].clone();
            }
        }
        let values = values.into_boxed_slice();
        Ok(CachedRow {
            layout: layout.clone(),
            values,
        })
    }
}

/// Which columns a row sent: a bit set, on the stack for tables of up to 128 columns.
enum Seen {
    Small(u128),
    Large(Vec<bool>),
}

impl Seen {
    fn new(n: usize) -> Seen {
        if n <= 128 {
            Seen::Small(0)
        } else {
            Seen::Large(vec![false; n])
        }
    }

    fn set(&mut self, i: usize) {
        match self {
            Seen::Small(bits) => *bits |= 1 << i,
            Seen::Large(v) => v[i] = true,
        }
    }

    fn get(&self, i: usize) -> bool {
        match self {
            Seen::Small(bits) => bits & (1 << i) != 0,
            Seen::Large(v) => v[i],
        }
    }
}

/// A column name, as its position in the layout (`None` for a column it lacks).
struct ColumnKey<'a>(&'a Layout);

impl<'de> DeserializeSeed<'de> for ColumnKey<'_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for ColumnKey<'_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a column name")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.0.position(v))
    }
}

/// Decodes a `monitor_cond_since` result, `[found, last-txn-id, table-updates2]`.
pub(crate) struct SinceSeed(pub(crate) Layouts);

/// A decoded `monitor_cond_since` result.
pub(crate) struct Since {
    pub(crate) found: bool,
    pub(crate) last_txn_id: Uuid,
    pub(crate) updates: Vec<TableChanges>,
}

impl<'de> DeserializeSeed<'de> for SinceSeed {
    type Value = Since;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for SinceSeed {
    type Value = Since;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[found, last-txn-id, table-updates2]")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let missing = |what: &str| serde::de::Error::custom(format!("the reply lacks {what}"));
        let found = seq.next_element()?.ok_or_else(|| missing("found"))?;
        let last_txn_id = seq.next_element()?.ok_or_else(|| missing("last-txn-id"))?;
        let updates = seq
            .next_element_seed(UpdatesSeed(self.0))?
            .ok_or_else(|| missing("the table updates"))?;
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(serde::de::Error::custom(
                "the reply has more than three elements",
            ));
        }
        Ok(Since {
            found,
            last_txn_id,
            updates,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    #[test]
    fn rows_decode_against_the_layout_with_defaults_for_left_out_columns() {
        let l = layouts();
        let text =
            json!({"T": {A: {"initial": {"name": "a", "_version": ["uuid", A]}}}}).to_string();
        let mut de = serde_json::Deserializer::from_str(&text);
        let changes = UpdatesSeed(l.clone()).deserialize(&mut de).unwrap();
        let RowChange::New(row) = &changes[0].rows[0].1 else {
            panic!("{changes:?}")
        };
        assert_eq!(row["name"], Datum::scalar("a"));
        assert_eq!(row["n"], Datum::Set(vec![]));
        assert_eq!(row.len(), 6, "{row:?}");
        assert!(row.get("_version").is_none());
        // The same through a generic row.
        let generic: Row = [("name".to_string(), Datum::scalar("a"))].into();
        assert_eq!(
            &CachedRow::from_row(&l["T"], &A.parse().unwrap(), generic).unwrap(),
            row
        );
        assert_eq!(*row, row.to_row());
        assert_eq!(
            serde_json::to_value(row).unwrap(),
            json!({"ids": ["map", []], "kind": ["set", []], "n": ["set", []], "name": "a", "port": ["set", []], "tags": ["set", []]})
        );
    }

    #[test]
    fn diffs_apply_to_a_copy() {
        let l = layouts();
        let a: Uuid = A.parse().unwrap();
        let row = CachedRow::from_row(
            &l["T"],
            &a,
            [("tags".to_string(), Datum::set(["x", "y"]))].into(),
        )
        .unwrap();
        let next = row
            .apply_diff(&a, &[("tags".to_string(), Datum::set(["y", "z"]))].into())
            .unwrap();
        assert_eq!(next["tags"], Datum::set(["x", "z"]));
        assert_eq!(row["tags"], Datum::set(["x", "y"]));
        let e = row
            .apply_diff(&a, &[("other".to_string(), Datum::scalar(1))].into())
            .unwrap_err();
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
            let text = bad.to_string();
            let mut de = serde_json::Deserializer::from_str(&text);
            let e = UpdatesSeed(l.clone())
                .deserialize(&mut de)
                .unwrap_err()
                .to_string();
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
            // Streamed straight into cached rows (a monitor reply).
            let text = json!({"T": {A: {"initial": {column: value}}}}).to_string();
            let mut de = serde_json::Deserializer::from_str(&text);
            let e = UpdatesSeed(l.clone())
                .deserialize(&mut de)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(why) && where_(&e, column),
                "{column} {value}: {e}"
            );
            // Through a generic row (a notification).
            let datum = Datum::from_json(&value).unwrap();
            let generic: Row = [(column.to_string(), datum.clone())].into();
            let e = CachedRow::from_row(&l["T"], &a, generic).unwrap_err();
            assert!(
                e.contains(why) && where_(&e, column),
                "{column} {value}: {e}"
            );
            // As the result of a modify.
            let row = CachedRow::from_row(&l["T"], &a, Row::new()).unwrap();
            let e = row
                .apply_diff(&a, &[(column.to_string(), datum)].into())
                .unwrap_err();
            assert!(
                e.contains(why) && where_(&e, column),
                "{column} {value}: {e}"
            );
        }
    }

    #[test]
    fn a_modify_that_leaves_a_set_too_large_is_refused() {
        let l = layouts();
        let a: Uuid = A.parse().unwrap();
        // "n" holds at most one value: a diff is its new value, so two are too many.
        let row =
            CachedRow::from_row(&l["T"], &a, [("n".to_string(), Datum::scalar(1))].into()).unwrap();
        let e = row
            .apply_diff(&a, &[("n".to_string(), Datum::set([1, 2]))].into())
            .unwrap_err();
        assert!(e.contains("has 2 elements"), "{e}");
    }

    #[test]
    fn values_that_fit_are_kept() {
        let l = layouts();
        let text = json!({"T": {A: {"initial": {
            "name": "x", "n": 3, "kind": "b", "port": 100, "ids": ["map", [["a", 1]]],
            "tags": ["set", ["p", "q"]]
        }}}})
        .to_string();
        let mut de = serde_json::Deserializer::from_str(&text);
        let changes = UpdatesSeed(l.clone()).deserialize(&mut de).unwrap();
        let RowChange::New(row) = &changes[0].rows[0].1 else {
            panic!("{changes:?}")
        };
        assert_eq!(row["port"], Datum::scalar(100));
        assert_eq!(row["ids"], Datum::map([("a", 1)]));
    }
}
