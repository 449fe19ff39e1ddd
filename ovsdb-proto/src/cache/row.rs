//! Compact cached rows: one table's monitored columns are named once, in a shared
//! [`Layout`], and each row is only its values in that order. A row of a generic
//! `BTreeMap<String, Datum>` pays for a copy of every column name and a tree node per
//! handful of columns; here it pays for its values alone.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::ser::{Serialize, SerializeMap, Serializer};
use uuid::Uuid;

use crate::datum::{Atom, Datum, Row};
use crate::model::ColumnSource;
use crate::schema::{ColumnType, TableSchema};

use crate::diff::apply_column;
use crate::schema::Max;

use super::edited::{Edit, EditedSet, SetElements, EDITED_FROM};

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
        // A `named-uuid` has the type of a uuid, but only a request may hold one
        // (RFC 7047 §5.1): from a server it is a value that does not fit.
        if holds_named_uuid(&self.types[i], value) {
            return Err(self.misfit(uuid, i, &shown(value), NAMED_UUID));
        }
        self.types[i].check(value).map_err(|why| {
            self.misfit(
                uuid,
                i,
                &shown(value),
                format_args!("does not fit the column: {why}"),
            )
        })
    }

    /// Checks a large set of column `i` of row `uuid` that a modify toggled the
    /// elements `toggled` of, leaving `len` elements: the elements it put in were not
    /// checked before, and the count may have changed. The error names table, row,
    /// column and the toggled elements.
    fn check_edit(
        &self,
        uuid: &Uuid,
        i: usize,
        toggled: &[Atom],
        len: usize,
    ) -> Result<(), String> {
        let what = || format!("the set toggling {}", shown(&Datum::Set(toggled.into())));
        if toggled.iter().any(|a| matches!(a, Atom::NamedUuid(_))) {
            return Err(self.misfit(uuid, i, &what(), NAMED_UUID));
        }
        let t = &self.types[i];
        t.check_elements(toggled)
            .and_then(|()| t.check_count(len))
            .map_err(|why| {
                self.misfit(
                    uuid,
                    i,
                    &what(),
                    format_args!("does not fit the column: {why}"),
                )
            })
    }

    /// The error for `what`, of column `i` of row `uuid`, that does not fit: `why`.
    fn misfit(&self, uuid: &Uuid, i: usize, what: &str, why: impl fmt::Display) -> String {
        format!(
            "table {} row {uuid} column {}: {what} {why}",
            self.table, self.names[i]
        )
    }

    /// The `slot`th of the indexes kept for this table, as positions of its columns.
    pub(crate) fn index(&self, slot: usize) -> &[usize] {
        &self.indexes[slot]
    }
}

/// Why a value holding a `named-uuid` does not fit.
const NAMED_UUID: &str = "holds a named-uuid, which only a request may (RFC 7047 §5.1)";

/// True when `value`, of a column of type `t`, holds a `named-uuid` atom (only uuid
/// columns can: elsewhere the type check refuses it).
fn holds_named_uuid(t: &crate::schema::ColumnType, value: &Datum) -> bool {
    use crate::datum::AtomicType;
    let uuid_key = t.key.atomic == AtomicType::Uuid;
    let uuid_value = t
        .value
        .as_ref()
        .is_some_and(|v| v.atomic == AtomicType::Uuid);
    if !uuid_key && !uuid_value {
        return false;
    }
    let named = |a: &Atom| matches!(a, Atom::NamedUuid(_));
    match value {
        Datum::Set(s) => s.iter().any(named),
        Datum::Map(m) => m.iter().any(|(k, v)| named(k) || named(v)),
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
/// [`Row`]. Only the values that differ from their column's default are stored (most
/// of an OVN row's columns are empty); the others are read from the layout.
#[derive(Clone)]
pub struct CachedRow {
    layout: Arc<Layout>,
    /// Which columns are stored.
    present: Present,
    /// The stored values, in column order.
    values: Box<[Stored]>,
}

/// Values of at least this many elements are shared between a row's versions.
const SHARED_FROM: usize = 16;

/// A stored value: in place, or, when it is large, shared between the versions of its
/// row, so that a modify of another column of a router with thousands of ports does
/// not copy them; a large set that a modify changed is edited (see [`super::edited`]).
#[derive(Clone, Debug)]
enum Stored {
    Own(Datum),
    Shared(Arc<Datum>),
    Edited(Arc<EditedSet>),
}

impl Stored {
    fn new(value: Datum) -> Stored {
        if value.len() >= SHARED_FROM {
            Stored::Shared(Arc::new(value))
        } else {
            Stored::Own(value)
        }
    }

    /// The value; an edited set is made flat the first time.
    fn get(&self) -> &Datum {
        match self {
            Stored::Own(d) => d,
            Stored::Shared(d) => d,
            Stored::Edited(e) => e.flat(),
        }
    }

    /// True when the value is `default` (compared by length first: an edited set is
    /// never a column's default, and is not made flat to tell).
    fn is(&self, default: &Datum) -> bool {
        self.len() == default.len() && self.get() == default
    }

    /// The number of elements or pairs.
    fn len(&self) -> usize {
        match self {
            Stored::Edited(e) => e.len(),
            other => other.get().len(),
        }
    }

    /// The elements, if the value is a set, read in place.
    fn elements(&self) -> Option<SetElements<'_>> {
        match self {
            Stored::Edited(e) => Some(e.elements()),
            other => other.get().as_set().map(SetElements::flat),
        }
    }

    /// This large set of a column of type `ty` with set diff `diff` applied, edited
    /// rather than copied; `None` for another value, a small set or a diff that is
    /// not a set.
    fn edit(&self, ty: &ColumnType, diff: &Datum) -> Option<Edit> {
        if ty.max == Max::Limited(1) || ty.is_map() || self.len() < EDITED_FROM {
            return None;
        }
        let diff = diff.as_set()?;
        match self {
            Stored::Own(_) => None,
            Stored::Shared(base) => EditedSet::edit(base, &[], base.len(), diff),
            Stored::Edited(e) => {
                let (base, toggles) = e.parts();
                EditedSet::edit(base, toggles, e.len(), diff)
            }
        }
    }
}

impl PartialEq for Stored {
    fn eq(&self, other: &Stored) -> bool {
        match (self, other) {
            (Stored::Shared(a), Stored::Shared(b)) if Arc::ptr_eq(a, b) => true,
            (Stored::Edited(a), Stored::Edited(b)) if Arc::ptr_eq(a, b) => true,
            // An edited set compared where it is, not made flat.
            (Stored::Edited(_), _) | (_, Stored::Edited(_)) => self.elements() == other.elements(),
            _ => self.get() == other.get(),
        }
    }
}

/// Which of a row's columns hold other than their default: bit `i` for column `i`.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Present {
    /// Up to 128 columns, in place.
    Few([u64; 2]),
    /// More.
    Many(Box<[u64]>),
}

impl Present {
    fn new(columns: usize) -> Present {
        if columns <= 128 {
            Present::Few([0; 2])
        } else {
            Present::Many(vec![0; columns.div_ceil(64)].into())
        }
    }

    /// The columns at `positions` of a row of `layout`.
    fn of(layout: &Layout, positions: impl Iterator<Item = usize>) -> Present {
        let mut present = Present::new(layout.names.len());
        for i in positions {
            present.set(i);
        }
        present
    }

    fn words(&self) -> &[u64] {
        match self {
            Present::Few(w) => w,
            Present::Many(w) => w,
        }
    }

    fn set(&mut self, i: usize) {
        let words = match self {
            Present::Few(w) => &mut w[..],
            Present::Many(w) => &mut w[..],
        };
        words[i / 64] |= 1 << (i % 64);
    }

    fn has(&self, i: usize) -> bool {
        self.words()[i / 64] & (1 << (i % 64)) != 0
    }

    /// How many columns before `i` are stored: where `i`'s value is.
    fn rank(&self, i: usize) -> usize {
        let words = self.words();
        let below: u32 = words[..i / 64].iter().map(|w| w.count_ones()).sum();
        let mask = (1u64 << (i % 64)) - 1;
        (below + (words[i / 64] & mask).count_ones()) as usize
    }
}

impl CachedRow {
    /// A row of `layout` from values by column position (each column at most once, in
    /// any order; a column not given holds its default). Values equal to their
    /// column's default are not stored.
    pub(super) fn from_columns(layout: &Arc<Layout>, columns: &mut Vec<(usize, Datum)>) -> Self {
        columns.retain(|(i, v)| *v != layout.defaults[*i]);
        // Straight into the row's values, with no list in between: a decoded row is one
        // allocation for its values.
        CachedRow::of(layout, columns, Stored::new)
    }

    /// A row of `layout` from values other than their column's default, by column
    /// position, each stored by `store`.
    fn of<V>(
        layout: &Arc<Layout>,
        columns: &mut Vec<(usize, V)>,
        store: impl Fn(V) -> Stored,
    ) -> Self {
        columns.sort_unstable_by_key(|(i, _)| *i);
        CachedRow {
            layout: layout.clone(),
            present: Present::of(layout, columns.iter().map(|(i, _)| *i)),
            values: columns.drain(..).map(|(_, v)| store(v)).collect(),
        }
    }

    /// The stored value of column `i`, if it is stored.
    fn stored(&self, i: usize) -> Option<&Stored> {
        self.present
            .has(i)
            .then(|| &self.values[self.present.rank(i)])
    }

    /// The value of column `i`.
    fn value(&self, i: usize) -> &Datum {
        match self.stored(i) {
            Some(v) => v.get(),
            None => &self.layout.defaults[i],
        }
    }

    /// This row (`uuid`) with an `update2` `modify` entry applied (each changed
    /// column's diff, by position in the layout); the row itself is untouched. A result
    /// that does not fit its column is an error.
    pub(crate) fn apply_diff(
        &self,
        uuid: &Uuid,
        diff: &[(usize, Datum)],
    ) -> Result<CachedRow, String> {
        // The modified columns computed from the old values, the others copied (a large
        // value only shared): each value is copied at most once, and a large set not
        // even once.
        let mut changed: Vec<Option<Stored>> = vec![None; self.len()];
        for (i, d) in diff {
            let i = *i;
            let current = changed[i].take();
            changed[i] = Some(self.modified(uuid, i, current.as_ref().or(self.stored(i)), d)?);
        }
        let mut columns: Vec<(usize, Stored)> = changed
            .into_iter()
            .enumerate()
            .filter_map(|(i, new)| match new {
                Some(new) => (!new.is(&self.layout.defaults[i])).then_some((i, new)),
                None => self.stored(i).map(|v| (i, v.clone())),
            })
            .collect();
        Ok(CachedRow::of(&self.layout, &mut columns, |v| v))
    }

    /// Column `i` of row `uuid`, holding `current` (its default if `None`), with diff
    /// `d` applied and checked against the column's type.
    fn modified(
        &self,
        uuid: &Uuid,
        i: usize,
        current: Option<&Stored>,
        d: &Datum,
    ) -> Result<Stored, String> {
        let ty = &self.layout.types[i];
        if let Some(edit) = current.and_then(|c| c.edit(ty, d)) {
            let toggled = d.as_set().unwrap_or(&[]);
            return Ok(match edit {
                Edit::Edited(e) => {
                    self.layout.check_edit(uuid, i, toggled, e.len())?;
                    Stored::Edited(Arc::new(e))
                }
                Edit::Flat(flat) => {
                    self.layout.check_edit(uuid, i, toggled, flat.len())?;
                    Stored::new(flat)
                }
            });
        }
        let base = current.map_or(&self.layout.defaults[i], Stored::get);
        let new = apply_column(ty, base, d).map_err(|e| {
            format!(
                "table {} row {uuid} column {}: {e}",
                self.layout.table, self.layout.names[i]
            )
        })?;
        self.layout.check(uuid, i, &new)?;
        Ok(Stored::new(new))
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
        self.layout.position(column).map(|i| self.value(i))
    }

    /// The elements of set column `column`, read where they are (`None` when the
    /// column is not monitored or holds a map). Prefer it to [`CachedRow::get`] to
    /// search or walk a large set: a set that modifies changed is kept as the set it
    /// was and the elements toggled since, and `get` makes it flat (a copy, once per
    /// row version), while this reads it as it is.
    pub fn set(&self, column: &str) -> Option<SetElements<'_>> {
        let i = self.layout.position(column)?;
        match self.stored(i) {
            Some(v) => v.elements(),
            None => self.layout.defaults[i].as_set().map(SetElements::flat),
        }
    }

    /// Every column with its value, in name order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Datum)> {
        self.layout
            .columns()
            .enumerate()
            .map(|(i, c)| (c, self.value(i)))
    }

    /// The columns that `among` accepts whose values differ between this row and
    /// `other` (another version of it), in name order. A large value both versions
    /// hold as one stored value (a modify of other columns leaves it shared) is told
    /// equal by its address, without a look at its elements; the columns `among`
    /// refuses are not compared at all. Rows of different layouts (a schema changed
    /// between them) differ in every column `among` accepts.
    pub fn changed_columns<'a>(
        &'a self,
        other: &'a CachedRow,
        among: impl Fn(&str) -> bool + 'a,
    ) -> impl Iterator<Item = &'a str> + 'a {
        let same_layout =
            Arc::ptr_eq(&self.layout, &other.layout) || self.layout.names == other.layout.names;
        self.layout
            .columns()
            .enumerate()
            .filter(move |(_, c)| among(c))
            .filter(move |(i, _)| !same_layout || self.stored(*i) != other.stored(*i))
            .map(|(_, c)| c)
    }

    /// The number of columns.
    pub fn len(&self) -> usize {
        self.layout.names.len()
    }

    /// True for a row of no column.
    pub fn is_empty(&self) -> bool {
        self.layout.names.is_empty()
    }

    /// A generic copy of the row.
    pub fn to_row(&self) -> Row {
        self.iter()
            .map(|(c, d)| (c.to_owned(), d.clone()))
            .collect()
    }

    /// The hash of the values of one of the layout's indexes (as [`key_hash`] of them).
    pub(crate) fn key_hash(&self, index: &[usize]) -> u64 {
        key_hash(index.iter().map(|&i| self.value(i)))
    }

    /// True when the values at `index` are `key`, in order.
    pub(crate) fn has_key<'a>(
        &self,
        index: &[usize],
        mut key: impl Iterator<Item = &'a Datum>,
    ) -> bool {
        index.iter().all(|&i| key.next() == Some(self.value(i))) && key.next().is_none()
    }

    /// True when the values at `index` are the same in both rows (of one layout).
    pub(crate) fn same_at(&self, other: &CachedRow, index: &[usize]) -> bool {
        index.iter().all(|&i| self.value(i) == other.value(i))
    }
}

impl ColumnSource for CachedRow {
    fn column(&self, name: &str) -> Option<&Datum> {
        self.get(name)
    }
}

impl PartialEq for CachedRow {
    fn eq(&self, other: &CachedRow) -> bool {
        // Both store exactly their non-default values, so equal rows store the same.
        (Arc::ptr_eq(&self.layout, &other.layout) || self.layout.names == other.layout.names)
            && self.present == other.present
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
    use std::collections::BTreeSet;

    use serde::de::DeserializeSeed;
    use serde_json::json;

    use crate::cache::decode::{decode_note, Form, RowChange, TableChanges, UpdatesSeed};

    fn schema() -> crate::schema::DatabaseSchema {
        crate::schema::DatabaseSchema::from_json(&json!({
            "name": "D", "version": "1.0.0", "tables": {"T": {"columns": {
                "name": {"type": "string"},
                "n": {"type": {"key": "integer", "min": 0, "max": 1}},
                "tags": {"type": {"key": "string", "min": 0, "max": "unlimited"}},
                "kind": {"type": {"key": {"type": "string", "enum": ["set", ["a", "b"]]}, "min": 0, "max": 1}},
                "port": {"type": {"key": {"type": "integer", "minInteger": 1, "maxInteger": 100}, "min": 0, "max": 1}},
                "ids": {"type": {"key": "string", "value": "integer", "min": 0, "max": "unlimited"}}
            }, "indexes": [["name"]]}}
        }))
        .unwrap()
    }

    fn layouts() -> Layouts {
        let schema = schema();
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
        match decode(l, Form::Update2, json!({"T": {A: {"initial": row}}})).unwrap()[0]
            .rows
            .pop()
        {
            Some((_, RowChange::New(row))) => row,
            other => panic!("{other:?}"),
        }
    }

    /// A `modify` of row A of table T, decoded from `diff`.
    fn diff(l: &Layouts, diff: serde_json::Value) -> Result<Vec<(usize, Datum)>, String> {
        match decode(l, Form::Update2, json!({"T": {A: {"modify": diff}}}))?[0]
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
            let e = decode(&l, Form::Update2, bad.clone()).unwrap_err();
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
                    Form::Update2,
                    json!({"T": {A: {"initial": {column: value}}}}),
                )
                .unwrap_err(),
                // In the plain form (an old server's `monitor`).
                decode(
                    &l,
                    Form::Update,
                    json!({"T": {A: {"new": {column: value}}}}),
                )
                .unwrap_err(),
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
    fn a_large_set_that_modifies_change_is_edited_and_reads_as_the_generic_diff_gives_it() {
        let l = layouts();
        let schema = schema();
        let table = schema.table("T").unwrap();
        let uuid: Uuid = A.parse().unwrap();
        let at = l["T"].position("tags").unwrap();
        let tag = |i: usize| format!("t{i:05}");
        let first: Vec<String> = (0..1500).map(tag).collect();
        let mut cached = row(&l, json!({"name": "x", "tags": ["set", first]}));
        let mut generic = cached.to_row();
        let mut rng = crate::test_rng::Rng::new(0x5eed);
        let (mut edited, mut flat) = (0, 0);
        for step in 0..400 {
            // Random elements of 0..2000 toggled: the set drifts from 1500 towards
            // 1000 elements, so it is edited, made flat by its toggles, and by its size.
            let toggled: Vec<String> = (0..1 + rng.below(4))
                .map(|_| tag(rng.below(2000)))
                .collect();
            let change = json!({"tags": ["set", toggled.iter().collect::<BTreeSet<_>>()]});
            let next = cached
                .apply_diff(&uuid, &diff(&l, change.clone()).unwrap())
                .unwrap();
            let before = generic.clone();
            generic = crate::diff::apply_row(
                table,
                &generic,
                &Row::from_iter([(
                    "tags".to_string(),
                    Datum::from_json(&change["tags"]).unwrap(),
                )]),
            )
            .unwrap();
            let want = generic["tags"].as_set().unwrap();
            let read = next.set("tags").unwrap();
            assert_eq!(read.len(), want.len(), "step {step}");
            assert!(read.iter().eq(want), "step {step}");
            for t in &toggled {
                let t = Atom::String(t.as_str().into());
                assert_eq!(read.contains(&t), want.binary_search(&t).is_ok(), "{t}");
            }
            match next.stored(at) {
                Some(Stored::Edited(_)) => edited += 1,
                Some(Stored::Shared(_)) => flat += 1,
                other => panic!("step {step}: {other:?}"),
            }
            // The version it came from is untouched.
            assert!(cached == before, "step {step}");
            if step % 50 == 49 {
                assert_eq!(next["tags"], generic["tags"], "step {step}: read whole");
            }
            cached = next;
        }
        assert!(cached == generic);
        assert!(edited > 300 && flat > 10, "{edited} edited, {flat} flat");
    }

    #[test]
    fn a_large_set_edited_into_a_misfit_is_refused_with_what_was_toggled() {
        let schema = crate::schema::DatabaseSchema::from_json(&json!({
            "name": "D", "version": "1.0.0", "tables": {"T": {"columns": {
                "ports": {"type": {"key": {"type": "integer", "maxInteger": 5000}, "min": 0, "max": 1100}},
                "refs": {"type": {"key": "uuid", "min": 0, "max": "unlimited"}}
            }}}
        }))
        .unwrap();
        let t = schema.table("T").unwrap();
        let cols: Vec<String> = t.columns.keys().cloned().collect();
        let l: Layouts = [("T".to_string(), Arc::new(Layout::new(t, &cols).unwrap()))].into();
        let a: Uuid = A.parse().unwrap();
        let refs: Vec<serde_json::Value> = (0..1100u128)
            .map(|i| json!(["uuid", Uuid::from_u128(i + 1).to_string()]))
            .collect();
        let full = row(
            &l,
            json!({"ports": ["set", (0..1100).collect::<Vec<_>>()], "refs": ["set", refs]}),
        );
        let refused = |d: serde_json::Value| {
            full.apply_diff(&a, &diff(&l, d).unwrap())
                .map(|_| ())
                .unwrap_err()
        };
        let e = refused(json!({"ports": 7000}));
        assert!(
            e.contains("column ports") && e.contains("7000") && e.contains("greater"),
            "{e}"
        );
        let e = refused(json!({"ports": 4000}));
        assert!(
            e.contains("column ports") && e.contains("1101 elements"),
            "{e}"
        );
        let e = refused(json!({"refs": ["named-uuid", "x"]}));
        assert!(e.contains("column refs") && e.contains("named-uuid"), "{e}");
        // Taking one out and putting one in fits: edited.
        let ok = full
            .apply_diff(&a, &diff(&l, json!({"ports": ["set", [5, 4000]]})).unwrap())
            .unwrap();
        assert!(matches!(
            ok.stored(l["T"].position("ports").unwrap()),
            Some(Stored::Edited(_))
        ));
        assert!(ok.set("ports").unwrap().contains(&Atom::Integer(4000)));
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

    #[test]
    fn only_values_other_than_their_defaults_are_stored() {
        let l = layouts();
        let r = row(
            &l,
            json!({"name": "x", "tags": ["set", []], "ids": ["map", [["a", 1]]]}),
        );
        // name and ids stored; n, tags, kind and port are their defaults.
        assert_eq!(r.values.len(), 2);
        assert_eq!(r["name"], Datum::scalar("x"));
        assert_eq!(r["tags"], Datum::empty());
        assert_eq!(r["ids"], Datum::map([("a", 1)]));
        assert_eq!(r.len(), 6);
        let names: Vec<&str> = r.iter().map(|(c, _)| c).collect();
        assert_eq!(names, ["ids", "kind", "n", "name", "port", "tags"]);
        // A default sent or left out is the same row.
        let sent = row(
            &l,
            json!({"name": "x", "ids": ["map", [["a", 1]]], "n": ["set", []]}),
        );
        assert!(sent == r);
        assert_eq!(sent.to_row(), r.to_row());
        // A name left empty is its default too, and not stored.
        assert_eq!(row(&l, json!({"name": ""})).values.len(), 0);
    }

    #[test]
    fn a_column_sent_twice_takes_the_last_value() {
        let l = layouts();
        let text =
            format!(r#"{{"T": {{"{A}": {{"initial": {{"name": "a", "n": 1, "name": "b"}}}}}}}}"#);
        let mut de = serde_json::Deserializer::from_str(&text);
        let mut t = UpdatesSeed(l.clone(), Form::Update2, None)
            .deserialize(&mut de)
            .unwrap();
        let Some((_, RowChange::New(r))) = t[0].rows.pop() else {
            panic!("a row")
        };
        assert_eq!(r["name"], Datum::scalar("b"));
        assert_eq!(r["n"], Datum::scalar(1));
        assert_eq!(r.values.len(), 2);
    }

    #[test]
    fn a_modify_stores_values_that_leave_their_default_and_drops_those_back_to_it() {
        let l = layouts();
        let r = row(&l, json!({"name": "x", "n": 3}));
        let uuid: Uuid = A.parse().unwrap();
        // n removed (an optional column's diff is its new value: empty), port set.
        let m = r
            .apply_diff(
                &uuid,
                &diff(&l, json!({"n": ["set", []], "port": 7})).unwrap(),
            )
            .unwrap();
        assert_eq!(m["n"], Datum::empty());
        assert_eq!(m["port"], Datum::scalar(7));
        assert_eq!(m["name"], Datum::scalar("x"));
        assert_eq!(m.values.len(), 2, "name and port");
        assert!(m == row(&l, json!({"name": "x", "port": 7})));
        assert_eq!(r["n"], Datum::scalar(3), "the old row is untouched");
    }

    #[test]
    fn a_modify_shares_a_large_unchanged_value_instead_of_copying_it() {
        let l = layouts();
        let tags: Vec<String> = (0..1000).map(|i| format!("tag{i}")).collect();
        let r = row(&l, json!({"name": "x", "tags": ["set", tags]}));
        let uuid: Uuid = A.parse().unwrap();
        let m = r
            .apply_diff(&uuid, &diff(&l, json!({"name": "y"})).unwrap())
            .unwrap();
        let at = l["T"].position("tags").unwrap();
        match (r.stored(at), m.stored(at)) {
            (Some(Stored::Shared(a)), Some(Stored::Shared(b))) => {
                assert!(Arc::ptr_eq(a, b), "the same 1000 tags, not a copy")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(m["name"], Datum::scalar("y"));
        assert_eq!(m["tags"], r["tags"]);
        // The large value itself modified: a new value, the old row untouched.
        let m2 = m
            .apply_diff(&uuid, &diff(&l, json!({"tags": "tag0"})).unwrap())
            .unwrap();
        assert_eq!(m2["tags"].len(), 999);
        assert_eq!(m["tags"].len(), 1000);
        // Small values stay in place, and sharing costs no room: a stored value is
        // the size of a value.
        assert!(matches!(
            m.stored(l["T"].position("name").unwrap()),
            Some(Stored::Own(_))
        ));
        assert_eq!(std::mem::size_of::<Stored>(), std::mem::size_of::<Datum>());
    }

    #[test]
    fn presence_of_more_than_128_columns_is_kept_apart() {
        let mut p = Present::new(200);
        assert!(matches!(p, Present::Many(_)));
        for i in [0, 63, 64, 127, 128, 199] {
            p.set(i);
        }
        assert!(p.has(128) && p.has(199) && !p.has(1) && !p.has(198));
        assert_eq!(p.rank(0), 0);
        assert_eq!(p.rank(128), 4);
        assert_eq!(p.rank(199), 5);
        let mut few = Present::new(128);
        few.set(127);
        few.set(5);
        assert!(matches!(few, Present::Few(_)));
        assert_eq!(few.rank(127), 1);
    }

    #[test]
    fn indexed_rows_tell_a_new_version_of_a_row_from_a_change_of_it() {
        use crate::cache::{IndexedRows, RowChange as Change};
        let l = layouts();
        let a = Arc::new(row(&l, json!({"name": "a"})));
        let a_again = Arc::new(row(&l, json!({"name": "a"})));
        let b = Arc::new(row(&l, json!({"name": "b"})));
        let [u1, u2, u3, u4] = [1, 2, 3, 4].map(uuid::Uuid::from_u128);
        let before: IndexedRows = [(u1, a.clone()), (u2, a.clone()), (u3, a.clone())]
            .into_iter()
            .collect();
        // Row 1 untouched, 2 in an equal version, 3 changed, 4 new.
        let after: IndexedRows = [(u1, a.clone()), (u2, a_again), (u3, b.clone()), (u4, b)]
            .into_iter()
            .collect();
        let seen = |changes: Vec<Change<'_>>| -> Vec<(char, uuid::Uuid)> {
            changes
                .into_iter()
                .map(|c| match c {
                    Change::Added(u, _) => ('+', *u),
                    Change::Changed { uuid, .. } => ('~', *uuid),
                    Change::Removed(u, _) => ('-', *u),
                })
                .collect()
        };
        assert_eq!(seen(before.diff(&after).collect()), [('~', u3), ('+', u4)]);
        assert_eq!(
            seen(before.versions_changed(&after).collect()),
            [('~', u2), ('~', u3), ('+', u4)]
        );
        assert_eq!(seen(after.diff(&before).collect()), [('~', u3), ('-', u4)]);
    }

    #[test]
    fn the_columns_changed_between_two_versions_are_told_and_refused_ones_left_out() {
        let l = layouts();
        let a: Uuid = A.parse().unwrap();
        let tags: Vec<String> = (0..100).map(|i| format!("t{i}")).collect();
        let first = row(&l, json!({"name": "a", "n": 1, "tags": ["set", tags]}));
        // A modify of one column; the large set is shared by both versions.
        let second = first
            .apply_diff(&a, &diff(&l, json!({"n": 2})).unwrap())
            .unwrap();
        let all = |_: &str| true;
        assert_eq!(
            first.changed_columns(&second, all).collect::<Vec<_>>(),
            ["n"]
        );
        assert_eq!(
            second.changed_columns(&first, all).collect::<Vec<_>>(),
            ["n"]
        );
        assert_eq!(first.changed_columns(&first, all).count(), 0);
        // Then an element toggled in the large set (edited, not copied) and a column
        // set from its default.
        let third = second
            .apply_diff(&a, &diff(&l, json!({"tags": "t7", "port": 5})).unwrap())
            .unwrap();
        assert_eq!(
            second.changed_columns(&third, all).collect::<Vec<_>>(),
            ["port", "tags"]
        );
        assert_eq!(
            first
                .changed_columns(&third, |c| c != "tags")
                .collect::<Vec<_>>(),
            ["n", "port"],
            "a column refused is not reported"
        );
        // An equal value in a version of its own is not a change.
        let again = row(&l, json!({"name": "a", "n": 1, "tags": ["set", tags]}));
        assert_eq!(first.changed_columns(&again, all).count(), 0);
    }
}
