//! The cache's contents: one writer applies whole update messages to a copy and swaps
//! it in, so readers only ever see whole updates; the maps share structure, so the copy
//! is cheap and a reader's snapshot is never deep-copied.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use uuid::Uuid;

use std::hash::Hash;

use crate::model::Table;

use super::change::{Change, Event, TableRows};
use super::decode::{RowChange, TableChanges};
use super::index::{AnyIndex, RowIndex, RowIndexSpec};
use super::row::{key_hash, CachedRow, Layouts};
use super::typed_tables::{events_for_all, AnyState, IndexMap, TypedSpec, TypedState};

/// One unique index: the rows by the hash of their values in its columns
/// ([`key_hash`]), as `(hash, uuid)` pairs. A lookup reads the few rows under a hash and
/// compares their values, so the index holds no copy of any value (OVS's IDL indexes do
/// the same). Two rows may share a key for a moment inside one update; both are kept.
type UniqueIndex = imbl::OrdSet<(u64, u128)>;

/// A table's kept unique index: which of its layout's indexes, and the rows. Cloned
/// with the snapshot on every update, so it holds nothing but pointers and the map.
#[derive(Clone)]
struct KeptIndex {
    layout: Arc<super::row::Layout>,
    slot: usize,
    rows: UniqueIndex,
}

impl KeptIndex {
    /// The index's columns, as positions in the layout (in name order).
    fn at(&self) -> &[usize] {
        self.layout.index(self.slot)
    }
}

/// One consistent view of every cached table.
#[derive(Clone, Default)]
pub struct Snapshot {
    tables: BTreeMap<String, TableRows>,
    /// Decoded rows and indexes of the tables configured as typed.
    typed: BTreeMap<String, AnyState>,
    /// The schema's unique indexes of each table: the columns, and the rows' values
    /// there.
    indexes: BTreeMap<String, Vec<KeptIndex>>,
    /// The caller's row indexes, by slot.
    row_indexes: Vec<AnyIndex>,
    /// How many times the contents were replaced before these (0 for the first).
    seq: u64,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("tables", &self.tables)
            .field("typed", &self.typed.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Snapshot {
    /// Which contents these are: each change the cache applies numbers the next.
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    fn typed_state<T: Table>(&self) -> Option<&TypedState<T>> {
        self.typed.get(T::NAME)?.downcast_ref::<TypedState<T>>()
    }

    /// The row whose values in the columns of one of the schema's indexes are `key`
    /// (column, value pairs, in any order): a hash lookup. `None` when there is no such
    /// row, or no index on exactly those columns among the cached ones.
    pub fn find(&self, table: &str, key: &[(&str, crate::Datum)]) -> Option<Arc<CachedRow>> {
        self.find_with_uuid(table, key).map(|(_, r)| r)
    }

    fn find_with_uuid(
        &self,
        table: &str,
        key: &[(&str, crate::Datum)],
    ) -> Option<(Uuid, Arc<CachedRow>)> {
        self.indexed(table, key)?
    }

    /// [`Snapshot::find`] telling "no index on exactly those columns" (`None`) from
    /// "no such row" (`Some(None)`).
    pub(crate) fn indexed(
        &self,
        table: &str,
        key: &[(&str, crate::Datum)],
    ) -> Option<Option<(Uuid, Arc<CachedRow>)>> {
        let mut wanted: Vec<(&str, &crate::Datum)> = key.iter().map(|(c, d)| (*c, d)).collect();
        wanted.sort_by(|a, b| a.0.cmp(b.0));
        let index = self.indexes.get(table)?.iter().find(|i| {
            let names = i.at().iter().map(|&c| i.layout.names[c].as_str());
            names.eq(wanted.iter().map(|w| w.0))
        })?;
        let hash = key_hash(wanted.iter().map(|w| w.1));
        let Some(rows) = self.tables.get(table) else {
            return Some(None);
        };
        Some(
            index
                .rows
                .range((hash, 0)..=(hash, u128::MAX))
                .map(|&(_, u)| Uuid::from_u128(u))
                .find_map(|uuid| {
                    let row = rows.get(&uuid)?;
                    row.has_key(index.at(), wanted.iter().map(|w| w.1))
                        .then(|| (uuid, row.clone()))
                }),
        )
    }

    /// The typed state of `table`, if it is kept typed.
    pub(crate) fn typed_any(&self, table: &str) -> Option<&AnyState> {
        self.typed.get(table)
    }

    /// The decoded rows of `T`, if the cache was configured to keep them
    /// ([`CacheConfig::typed`](super::CacheConfig::typed)); a cheap clone.
    pub fn rows<T: Table>(&self) -> Option<imbl::HashMap<Uuid, Arc<T>>> {
        self.typed_state::<T>().map(|s| s.rows.clone())
    }

    /// Every decoded row of `T`, in uuid order. `T`'s table not kept typed is an error
    /// saying how to keep it ([`CacheConfig::typed`](super::CacheConfig::typed)); the
    /// rows of a table that is not are read with [`Snapshot::table`].
    pub fn all<T: Table>(&self) -> Result<Vec<Arc<T>>, crate::Error> {
        let state = self.typed_state::<T>().ok_or_else(|| {
            crate::Error::config(format!(
                "table {} is not kept typed in this cache: CacheConfig::typed(TypedTable::<{}>::new()) \
                 or CacheConfig::typed_index before Cache::start",
                T::NAME,
                std::any::type_name::<T>().rsplit("::").next().unwrap_or("T")
            ))
        })?;
        let mut rows: Vec<(Uuid, Arc<T>)> =
            state.rows.iter().map(|(u, r)| (*u, r.clone())).collect();
        rows.sort_unstable_by_key(|(u, _)| *u);
        Ok(rows.into_iter().map(|(_, r)| r).collect())
    }

    /// One decoded row of `T`.
    pub fn get_typed<T: Table>(&self, uuid: &Uuid) -> Option<Arc<T>> {
        self.typed_state::<T>()?.rows.get(uuid).cloned()
    }

    /// The rows of `T` under `key` in a typed index (hash lookups, whatever the
    /// table's size); `key` may be any borrowed form of the index's key (`&str` for a
    /// `String` key). A handle this snapshot does not know (another cache's, or its
    /// table not configured as typed) is an error.
    pub fn lookup<T, K, Q>(
        &self,
        index: &super::TypedIndex<T, K>,
        key: &Q,
    ) -> Result<Vec<Arc<T>>, crate::Error>
    where
        T: Table,
        K: Hash + Eq + std::borrow::Borrow<Q> + Clone + Send + Sync + 'static,
        Q: Hash + Eq + ?Sized,
    {
        let unknown = || {
            crate::Error::config(format!(
                "index {} of table {} is not one of this cache's: build it with \
                 CacheConfig::typed_index (or pass the TypedTable it came from to \
                 CacheConfig::typed) before Cache::start, and look it up in that cache",
                index.name(),
                T::NAME
            ))
        };
        let state = self.typed_state::<T>().ok_or_else(unknown)?;
        let map = state
            .indexes
            .get(&index.id)
            .and_then(|i| i.downcast_ref::<IndexMap<K>>())
            .ok_or_else(unknown)?;
        Ok(map
            .get(key)
            .map(|uuids| {
                uuids
                    .iter()
                    .filter_map(|u| state.rows.get(u).cloned())
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The row of a schema index key such as `LogicalSwitchPortByName`, decoded (from
    /// the typed rows when the table is kept typed, else from the cached row).
    pub fn get_by<K: crate::model::IndexKey>(&self, key: &K) -> Option<Arc<K::Table>> {
        let values = key.values();
        let (uuid, row) = self.find_with_uuid(<K::Table as Table>::NAME, &values)?;
        if let Some(t) = self.get_typed::<K::Table>(&uuid) {
            return Some(t);
        }
        <K::Table as Table>::from_row(uuid, &*row)
            .ok()
            .map(Arc::new)
    }

    /// The rows under `key` in a row index ([`CacheConfig::index`](super::CacheConfig::index)),
    /// in uuid order. An index of another cache is an error.
    pub fn lookup_rows<K, Q>(
        &self,
        index: &RowIndex<K>,
        key: &Q,
    ) -> Result<Vec<(Uuid, Arc<CachedRow>)>, crate::Error>
    where
        K: Hash + Eq + std::borrow::Borrow<Q> + Send + Sync + 'static,
        Q: Hash + Eq + ?Sized,
    {
        self.read_index(index, |state| super::index::find::<K, Q>(state, key))
    }

    /// The rows under `key` in a row index, shared with this snapshot rather than
    /// copied, and comparable in constant time with the same key's rows in another
    /// snapshot ([`IndexedRows::same`](super::IndexedRows::same)). An index of another
    /// cache is an error.
    pub fn indexed_rows<K, Q>(
        &self,
        index: &RowIndex<K>,
        key: &Q,
    ) -> Result<super::IndexedRows, crate::Error>
    where
        K: Hash + Eq + std::borrow::Borrow<Q> + Send + Sync + 'static,
        Q: Hash + Eq + ?Sized,
    {
        self.read_index(index, |state| super::index::entry::<K, Q>(state, key))
    }

    /// Every key some row has in `index`, with how many rows have it, in no order:
    /// what the index holds, read without going through the table's rows and borrowed
    /// from the snapshot (nothing is copied unless the caller keeps a key). An index of
    /// another cache is an error.
    pub fn index_keys<K>(
        &self,
        index: &RowIndex<K>,
    ) -> Result<impl Iterator<Item = (&K, usize)> + '_, crate::Error>
    where
        K: Hash + Eq + Send + Sync + 'static,
    {
        self.read_index(index, super::index::keys::<K>)
    }

    /// `read` of the state of `index`; an error when the index is not this cache's
    /// (another cache's slot, or a state of another key type).
    fn read_index<'a, K, T>(
        &'a self,
        index: &RowIndex<K>,
        read: impl FnOnce(&'a AnyIndex) -> Option<T>,
    ) -> Result<T, crate::Error> {
        self.row_indexes
            .get(index.slot)
            .and_then(read)
            .ok_or_else(|| {
                crate::Error::config(format!(
                    "row index {} of {} is not one of this cache's",
                    index.name(),
                    index.table()
                ))
            })
    }

    /// The rows of `table` (empty if the table is not cached).
    pub fn table(&self, table: &str) -> TableRows {
        self.tables.get(table).cloned().unwrap_or_default()
    }

    /// One row.
    pub fn get(&self, table: &str, uuid: &Uuid) -> Option<Arc<CachedRow>> {
        self.tables.get(table)?.get(uuid).cloned()
    }

    /// The cached table names.
    pub fn tables(&self) -> impl Iterator<Item = &str> {
        self.tables.keys().map(String::as_str)
    }

    /// Total number of rows.
    pub fn len(&self) -> usize {
        self.tables.values().map(imbl::OrdMap::len).sum()
    }

    /// True when no row is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every table as `{"Table": {"uuid": {column: value}}}`, in RFC 7047 notation.
    pub fn to_json(&self) -> serde_json::Value {
        let mut out = serde_json::Map::new();
        for (name, rows) in &self.tables {
            // An ordered map: the rows come in uuid order already.
            let rows: serde_json::Map<String, serde_json::Value> = rows
                .iter()
                .map(|(u, r)| {
                    (
                        u.to_string(),
                        serde_json::to_value(&**r).unwrap_or_default(),
                    )
                })
                .collect();
            out.insert(name.clone(), serde_json::Value::Object(rows));
        }
        serde_json::Value::Object(out)
    }
}

/// The shared cell readers clone snapshots from.
#[derive(Clone, Debug, Default)]
pub struct Shared(Arc<RwLock<Arc<Snapshot>>>);

impl Shared {
    /// The current snapshot (an `Arc` clone, whatever the cache's size).
    pub fn load(&self) -> Arc<Snapshot> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn store(&self, mut s: Snapshot) {
        let mut cell = self.0.write().unwrap_or_else(|p| p.into_inner());
        s.seq = cell.seq + 1;
        *cell = Arc::new(s);
    }
}

/// The single writer.
#[derive(Default)]
pub struct Writer {
    shared: Shared,
    typed: Vec<Arc<dyn TypedSpec>>,
    row_indexes: Vec<Arc<dyn RowIndexSpec>>,
}

impl Writer {
    /// A writer that also keeps these tables decoded and these row indexes.
    pub(crate) fn new(
        typed: Vec<Arc<dyn TypedSpec>>,
        row_indexes: Vec<Arc<dyn RowIndexSpec>>,
    ) -> Writer {
        Writer {
            shared: Shared::default(),
            typed,
            row_indexes,
        }
    }

    /// Brings the row indexes of `next` up to date with `events`.
    fn apply_row_indexes(&self, next: &mut Snapshot, events: &[Event]) {
        if next.row_indexes.len() != self.row_indexes.len() {
            next.row_indexes = self
                .row_indexes
                .iter()
                .map(|spec| spec.update(None, &[]))
                .collect();
        }
        for (slot, spec) in self.row_indexes.iter().enumerate() {
            if events.iter().any(|e| e.table == spec.table()) {
                next.row_indexes[slot] = spec.update(Some(&next.row_indexes[slot]), events);
            }
        }
    }

    /// Brings the typed tables of `next` up to date with `events`.
    fn apply_typed(&self, next: &mut Snapshot, events: &[Event]) -> Result<(), String> {
        for spec in &self.typed {
            let table = spec.table();
            let mine: Vec<&Event> = events.iter().filter(|e| e.table == table).collect();
            if mine.is_empty() && next.typed.contains_key(table) {
                continue;
            }
            let state = spec.apply(next.typed.get(table), &mine)?;
            next.typed.insert(table.to_owned(), state);
        }
        Ok(())
    }

    /// The cell readers use.
    pub fn shared(&self) -> Shared {
        self.shared.clone()
    }

    /// Applies one update message; on error nothing is changed.
    pub(crate) fn apply(&self, updates: Vec<TableChanges>) -> Result<Vec<Event>, String> {
        let mut next = (*self.shared.load()).clone();
        let mut events = Vec::new();
        for TableChanges { layout, rows } in updates {
            let table = layout.table();
            let current = next.tables.entry(table.to_owned()).or_default();
            for (uuid, update) in rows {
                let change = match update {
                    RowChange::New(row) => {
                        let new = Arc::new(row);
                        match current.insert(uuid, new.clone()) {
                            Some(old) => Change::Modify { old, new },
                            None => Change::Insert { new },
                        }
                    }
                    RowChange::Modify(d) => {
                        let old = current.get(&uuid).cloned().ok_or_else(|| {
                            format!("modify of row {uuid} of {table}, which is not cached")
                        })?;
                        let new = Arc::new(old.apply_diff(&uuid, &d)?);
                        current.insert(uuid, new.clone());
                        Change::Modify { old, new }
                    }
                    RowChange::Delete => match current.remove(&uuid) {
                        Some(old) => Change::Delete { old },
                        None => continue,
                    },
                };
                events.push(Event {
                    table: table.to_owned(),
                    uuid,
                    change,
                });
            }
        }
        self.apply_typed(&mut next, &events)?;
        update_indexes(&mut next, &events);
        self.apply_row_indexes(&mut next, &events);
        self.shared.store(next);
        Ok(events)
    }

    /// Replaces the contents with `initial` (a full resync of the tables of `layouts`),
    /// returning only the true differences: inserts for new rows, updates for changed
    /// ones, deletes for rows that are gone; nothing for rows that did not change.
    pub(crate) fn resync(
        &self,
        layouts: &Layouts,
        initial: Vec<TableChanges>,
    ) -> Result<Vec<Event>, String> {
        let old = self.shared.load();
        let mut next = Snapshot::default();
        let mut events = Vec::new();
        let mut initial: BTreeMap<String, Vec<(Uuid, RowChange)>> = initial
            .into_iter()
            .map(|t| (t.layout.table().to_owned(), t.rows))
            .collect();
        for table in layouts.keys() {
            let mut rows = TableRows::new();
            let before = old.table(table);
            for (uuid, u) in initial.remove(table).unwrap_or_default() {
                let RowChange::New(row) = u else {
                    return Err(format!("a full resync of {table} sent {u:?} for {uuid}"));
                };
                let change = match before.get(&uuid) {
                    Some(prev) if **prev == row => {
                        rows.insert(uuid, prev.clone());
                        continue;
                    }
                    Some(prev) => {
                        let new = Arc::new(row);
                        rows.insert(uuid, new.clone());
                        Change::Modify {
                            old: prev.clone(),
                            new,
                        }
                    }
                    None => {
                        let new = Arc::new(row);
                        rows.insert(uuid, new.clone());
                        Change::Insert { new }
                    }
                };
                events.push(Event {
                    table: table.clone(),
                    uuid,
                    change,
                });
            }
            for (uuid, prev) in before.iter() {
                if !rows.contains_key(uuid) {
                    events.push(Event {
                        table: table.clone(),
                        uuid: *uuid,
                        change: Change::Delete { old: prev.clone() },
                    });
                }
            }
            next.tables.insert(table.clone(), rows);
        }
        if let Some(table) = initial.keys().next() {
            return Err(format!(
                "a full resync sent table {table}, which is not monitored"
            ));
        }
        // Indexes and typed tables are rebuilt from the new contents, through the same
        // incremental path as an update, from empty. Into an empty cache (the first
        // sync) the events are exactly those inserts.
        let all: Vec<Event>;
        let all = if old.is_empty() {
            &events
        } else {
            all = next
                .tables
                .iter()
                .flat_map(|(table, rows)| events_for_all(table, rows))
                .collect();
            &all
        };
        next.indexes.clear();
        next.typed.clear();
        next.row_indexes.clear();
        update_indexes(&mut next, all);
        self.apply_typed(&mut next, all)?;
        self.apply_row_indexes(&mut next, all);
        self.shared.store(next);
        Ok(events)
    }
}

/// Keeps the schema's unique indexes (those whose columns are all monitored) in step
/// with `events`. Keys are the index's columns in name order.
fn update_indexes(next: &mut Snapshot, events: &[Event]) {
    for e in events {
        let (old, new) = match &e.change {
            Change::Insert { new } => (None, Some(new)),
            Change::Modify { old, new } => (Some(old), Some(new)),
            Change::Delete { old } => (Some(old), None),
        };
        let layout = old.or(new).expect("a change has a row").layout();
        // A table's indexes are kept in its layout's order (every cached row of a table
        // has the same layout: a new one takes a resync, which starts the indexes over).
        if !next.indexes.contains_key(&e.table) {
            let all = (0..layout.indexes().count())
                .map(|slot| KeptIndex {
                    layout: layout.clone(),
                    slot,
                    rows: UniqueIndex::new(),
                })
                .collect();
            next.indexes.insert(e.table.clone(), all);
        }
        let kept = next.indexes.get_mut(&e.table).expect("inserted above");
        for (at, index) in layout.indexes().enumerate() {
            if let (Some(o), Some(n)) = (old, new) {
                if o.same_at(n, index) {
                    continue; // the key did not change
                }
            }
            let rows = &mut kept[at].rows;
            let uuid = e.uuid.as_u128();
            if let Some(o) = old {
                rows.remove(&(o.key_hash(index), uuid));
            }
            if let Some(n) = new {
                rows.insert((n.key_hash(index), uuid));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use serde::de::DeserializeSeed;

    use crate::cache::decode::{Form, UpdatesSeed};
    use crate::cache::row::Layout;
    use crate::schema::DatabaseSchema;

    fn layouts() -> Layouts {
        let schema = DatabaseSchema::from_json(&json!({"name": "D", "version": "1.0.0", "tables": {
            "T": {"columns": {"name": {"type": "string"}, "tags": {"type": {"key": "string", "min": 0, "max": "unlimited"}}}}
        }}))
        .unwrap();
        let t = schema.table("T").unwrap();
        let layout = Layout::new(t, &["name".to_string(), "tags".to_string()]).unwrap();
        [("T".to_string(), Arc::new(layout))].into()
    }

    fn updates(l: &Layouts, j: serde_json::Value) -> Vec<TableChanges> {
        UpdatesSeed(l.clone(), Form::Update2, None)
            .deserialize(&j)
            .unwrap()
    }

    const A: &str = "00000000-0000-0000-0000-00000000000a";
    const B: &str = "00000000-0000-0000-0000-00000000000b";
    const C: &str = "00000000-0000-0000-0000-00000000000c";

    #[test]
    fn updates_apply_whole_and_readers_keep_their_snapshot() {
        let w = Writer::default();
        let l = layouts();
        // "tags" left out: it holds its default, the empty set.
        let ev = w
            .apply(updates(&l, json!({"T": {A: {"initial": {"name": "a"}}}})))
            .unwrap();
        assert_eq!(ev.len(), 1);
        let before = w.shared().load();
        let ev = w
            .apply(updates(
                &l,
                json!({"T": {A: {"modify": {"tags": "x"}}, B: {"insert": {"name": "b"}}}}),
            ))
            .unwrap();
        assert_eq!(ev.len(), 2);
        assert_eq!(before.len(), 1, "an old snapshot does not change");
        let now = w.shared().load();
        assert_eq!(now.len(), 2);
        let a = now.get("T", &A.parse().unwrap()).unwrap();
        assert_eq!(a["tags"], crate::Datum::scalar("x"));
        // A bad message changes nothing.
        let e = w
            .apply(updates(
                &l,
                json!({"T": {B: {"delete": null}, C: {"modify": {"name": "c"}}}}),
            ))
            .unwrap_err();
        assert!(e.contains("not cached"), "{e}");
        assert_eq!(w.shared().load().len(), 2);
    }

    #[test]
    fn a_resync_reports_only_true_differences() {
        let w = Writer::default();
        let l = layouts();
        w.apply(updates(
            &l,
            json!({"T": {
                A: {"initial": {"name": "a"}}, B: {"initial": {"name": "b"}}
            }}),
        ))
        .unwrap();
        let ev = w
            .resync(
                &l,
                updates(
                    &l,
                    json!({"T": {A: {"initial": {"name": "a"}}, C: {"initial": {"name": "c"}}}}),
                ),
            )
            .unwrap();
        let kinds: Vec<(String, &str)> = ev
            .iter()
            .map(|e| {
                (
                    e.uuid.to_string(),
                    match e.change {
                        Change::Insert { .. } => "insert",
                        Change::Modify { .. } => "update",
                        Change::Delete { .. } => "delete",
                    },
                )
            })
            .collect();
        assert_eq!(kinds.len(), 2, "{kinds:?}");
        assert!(kinds.contains(&(C.to_string(), "insert")));
        assert!(kinds.contains(&(B.to_string(), "delete")));
        assert_eq!(w.shared().load().len(), 2);
    }

    #[test]
    fn a_unique_index_finds_rows_by_value_and_keeps_both_of_a_shared_key() {
        let schema =
            DatabaseSchema::from_json(&json!({"name": "D", "version": "1.0.0", "tables": {
                "T": {"columns": {"name": {"type": "string"}, "n": {"type": "integer"}},
                      "indexes": [["name", "n"]]}
            }}))
            .unwrap();
        let layout = Layout::new(schema.table("T").unwrap(), &["n".into(), "name".into()]).unwrap();
        let l: Layouts = [("T".to_string(), Arc::new(layout))].into();
        let w = Writer::default();
        let key = |name: &str, n: i64| {
            [
                ("n", crate::Datum::scalar(n)),
                ("name", crate::Datum::scalar(name)),
            ]
        };
        let found = |name: &str, n: i64| {
            w.shared()
                .load()
                .find_with_uuid("T", &key(name, n))
                .map(|(u, _)| u.to_string())
        };
        w.apply(updates(
            &l,
            json!({"T": {A: {"initial": {"name": "a", "n": 1}}, B: {"initial": {"name": "b", "n": 1}}}}),
        ))
        .unwrap();
        assert_eq!(found("a", 1).as_deref(), Some(A));
        assert_eq!(found("b", 1).as_deref(), Some(B));
        assert_eq!(found("a", 2), None, "same name, other n");
        assert_eq!(found("c", 1), None);
        // Key columns in any order, but all of them.
        let (n, name) = key("a", 1).into();
        assert!(w.shared().load().find("T", &[name.clone(), n]).is_some());
        assert!(w.shared().load().find("T", &[name]).is_none());
        // Two rows with one key (as for a moment inside an update): each is kept, and
        // the one left is found when the other goes, whichever that is.
        let share = json!({"T": {C: {"insert": {"name": "b", "n": 1}}}});
        w.apply(updates(&l, share.clone())).unwrap();
        w.apply(updates(&l, json!({"T": {C: {"delete": null}}})))
            .unwrap();
        assert_eq!(found("b", 1).as_deref(), Some(B));
        w.apply(updates(&l, share)).unwrap();
        w.apply(updates(&l, json!({"T": {B: {"delete": null}}})))
            .unwrap();
        assert_eq!(found("b", 1).as_deref(), Some(C));
        // A changed key moves the row.
        w.apply(updates(&l, json!({"T": {A: {"modify": {"n": 5}}}})))
            .unwrap();
        assert_eq!(found("a", 1), None);
        assert_eq!(found("a", 5).as_deref(), Some(A));
    }
}
