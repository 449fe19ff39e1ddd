//! Caller-defined indexes over a table's cached rows, kept in every snapshot beside
//! the rows and swapped with them, so a lookup always agrees with the rows it returns.
//!
//! An index is a closure from a row to any number of keys (none, one, or several: a
//! row may be found under each element of a set column). It is declared on a
//! [`CacheConfig`](super::CacheConfig) and read through the typed handle returned
//! then, so that a lookup names a key of the right type and an unknown index is a
//! compile-time impossibility rather than an empty result.

use std::any::Any;
use std::borrow::Borrow;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;

use uuid::Uuid;

use super::change::{Change, Event};
use super::row::CachedRow;

/// The state of one index: key to the rows that have it (the rows themselves, so that
/// a lookup reads no table).
pub(crate) type KeyMap<K> = imbl::HashMap<K, imbl::OrdMap<Uuid, Version>>;

/// A version of a row as an index holds it: two are equal when they are the same
/// version, so that comparing two snapshots' rows under a key ([`IndexedRows::diff`])
/// walks no columns unless asked to.
#[derive(Clone, Debug)]
pub(crate) struct Version(Arc<CachedRow>);

impl PartialEq for Version {
    fn eq(&self, other: &Version) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// An index's state as the snapshot stores it.
pub(crate) type AnyIndex = Arc<dyn Any + Send + Sync>;

/// A handle to a row index of a cache, returned by
/// [`CacheConfig::index`](super::CacheConfig::index) and given to
/// [`Snapshot::lookup_rows`](super::Snapshot::lookup_rows).
pub struct RowIndex<K> {
    pub(crate) slot: usize,
    pub(crate) table: Arc<str>,
    pub(crate) name: Arc<str>,
    _key: PhantomData<fn() -> K>,
}

impl<K> Clone for RowIndex<K> {
    fn clone(&self) -> Self {
        RowIndex {
            slot: self.slot,
            table: self.table.clone(),
            name: self.name.clone(),
            _key: PhantomData,
        }
    }
}

impl<K> std::fmt::Debug for RowIndex<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RowIndex({}.{})", self.table, self.name)
    }
}

impl<K> RowIndex<K> {
    /// The indexed table.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The index's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// What the writer keeps for one declared index.
pub(crate) trait RowIndexSpec: Send + Sync {
    fn table(&self) -> &str;
    /// The index after `events` (of any table; those of other tables are skipped).
    fn update(&self, current: Option<&AnyIndex>, events: &[Event]) -> AnyIndex;
}

pub(crate) struct Spec<K, F> {
    pub(crate) table: Arc<str>,
    pub(crate) keys: F,
    pub(crate) _key: PhantomData<fn() -> K>,
}

impl<K, F> RowIndexSpec for Spec<K, F>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    F: Fn(&CachedRow) -> Vec<K> + Send + Sync,
{
    fn table(&self) -> &str {
        &self.table
    }

    fn update(&self, current: Option<&AnyIndex>, events: &[Event]) -> AnyIndex {
        let mut map: KeyMap<K> = current
            .and_then(|c| c.downcast_ref::<KeyMap<K>>())
            .cloned()
            .unwrap_or_default();
        for e in events.iter().filter(|e| *e.table == *self.table) {
            let (old, new) = match &e.change {
                Change::Insert { new } => (None, Some(new)),
                Change::Modify { old, new } => (Some(old), Some(new)),
                Change::Delete { old } => (Some(old), None),
            };
            let old_keys = old.map(|r| (self.keys)(r)).unwrap_or_default();
            let new_keys = new.map(|r| (self.keys)(r)).unwrap_or_default();
            // The keys the row no longer has lose it; every key it has gets its new
            // version.
            let after: std::collections::HashSet<&K> = new_keys.iter().collect();
            for k in old_keys.iter().filter(|k| !after.contains(k)) {
                if let Some(set) = map.get_mut(k) {
                    set.remove(&e.uuid);
                    if set.is_empty() {
                        map.remove(k);
                    }
                }
            }
            if let Some(row) = new {
                for k in &new_keys {
                    map.entry(k.clone())
                        .or_default()
                        .insert(e.uuid, Version(row.clone()));
                }
            }
        }
        Arc::new(map)
    }
}

impl<K> RowIndex<K> {
    pub(crate) fn new(slot: usize, table: &str, name: &str) -> RowIndex<K> {
        RowIndex {
            slot,
            table: table.into(),
            name: name.into(),
            _key: PhantomData,
        }
    }
}

/// The keys of an index state, each with how many rows have it.
pub(crate) fn keys<K>(state: &AnyIndex) -> Option<impl Iterator<Item = (&K, usize)>>
where
    K: Hash + Eq + Send + Sync + 'static,
{
    let map = state.downcast_ref::<KeyMap<K>>()?;
    Some(map.iter().map(|(k, rows)| (k, rows.len())))
}

/// The rows one key of a row index holds in a snapshot
/// ([`Snapshot::indexed_rows`](super::Snapshot::indexed_rows)), in uuid order. It
/// shares the snapshot's structure: taking it copies nothing, and it tells in constant
/// time that the same key's rows in another snapshot are untouched
/// ([`IndexedRows::same`]). Holding it keeps those row versions alive.
#[derive(Clone, Default)]
pub struct IndexedRows(imbl::OrdMap<Uuid, Version>);

impl std::fmt::Debug for IndexedRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IndexedRows({} rows)", self.0.len())
    }
}

impl IndexedRows {
    /// How many rows.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The row with `uuid`, if it is one of these.
    pub fn get(&self, uuid: &Uuid) -> Option<&Arc<CachedRow>> {
        self.0.get(uuid).map(|v| &v.0)
    }

    /// The rows, in uuid order.
    pub fn iter(&self) -> impl Iterator<Item = (&Uuid, &Arc<CachedRow>)> {
        self.0.iter().map(|(u, v)| (u, &v.0))
    }

    /// What changed from these rows to `other` (the same key's rows in another
    /// snapshot), in uuid order. The parts of the two that are shared are passed over
    /// unvisited: a few rows changed among thousands cost a few steps. A row replaced by
    /// an equal version is not reported.
    pub fn diff<'a>(&'a self, other: &'a IndexedRows) -> impl Iterator<Item = RowChange<'a>> {
        self.versions_changed(other).filter(|c| match c {
            RowChange::Changed { old, new, .. } => old != new,
            _ => true,
        })
    }

    /// [`IndexedRows::diff`] without comparing the columns of a row whose version
    /// differs: such a row is reported changed even when the versions are equal (as
    /// after a resync), so that a caller that knows which rows it changed compares
    /// none of theirs (a large row's sets among them).
    pub fn versions_changed<'a>(
        &'a self,
        other: &'a IndexedRows,
    ) -> impl Iterator<Item = RowChange<'a>> {
        self.0.diff(&other.0).map(|d| match d {
            imbl::ordmap::DiffItem::Add(uuid, row) => RowChange::Added(uuid, &row.0),
            imbl::ordmap::DiffItem::Update { old, new } => RowChange::Changed {
                uuid: old.0,
                old: &old.1 .0,
                new: &new.1 .0,
            },
            imbl::ordmap::DiffItem::Remove(uuid, row) => RowChange::Removed(uuid, &row.0),
        })
    }

    /// True when `other` is these rows untouched: taken from the same snapshot, or
    /// from a later one in which no row under the key was inserted, changed or
    /// removed. (False says only that something may have: rows changed and changed
    /// back are equal but not the same.) Constant time.
    pub fn same(&self, other: &IndexedRows) -> bool {
        self.0.ptr_eq(&other.0)
    }
}

impl FromIterator<(Uuid, Arc<CachedRow>)> for IndexedRows {
    /// Rows gathered by hand (as a test or a caller's own bookkeeping holds them); they
    /// share nothing with a snapshot.
    fn from_iter<I: IntoIterator<Item = (Uuid, Arc<CachedRow>)>>(iter: I) -> IndexedRows {
        IndexedRows(iter.into_iter().map(|(u, r)| (u, Version(r))).collect())
    }
}

/// One difference between two versions of the rows under an index key
/// ([`IndexedRows::diff`]).
#[derive(Clone, Copy, Debug)]
pub enum RowChange<'a> {
    /// A row only the second holds.
    Added(&'a Uuid, &'a Arc<CachedRow>),
    /// A row both hold, in versions that differ (equal ones only from
    /// [`IndexedRows::versions_changed`]).
    Changed {
        /// The row's uuid.
        uuid: &'a Uuid,
        /// The first's version.
        old: &'a Arc<CachedRow>,
        /// The second's version.
        new: &'a Arc<CachedRow>,
    },
    /// A row only the first holds.
    Removed(&'a Uuid, &'a Arc<CachedRow>),
}

/// The rows under `key` in an index state, shared.
pub(crate) fn entry<K, Q>(state: &AnyIndex, key: &Q) -> Option<IndexedRows>
where
    K: Hash + Eq + Borrow<Q> + Send + Sync + 'static,
    Q: Hash + Eq + ?Sized,
{
    let map = state.downcast_ref::<KeyMap<K>>()?;
    Some(IndexedRows(map.get(key).cloned().unwrap_or_default()))
}

/// The rows under `key` in an index state, in uuid order.
pub(crate) fn find<K, Q>(state: &AnyIndex, key: &Q) -> Option<Vec<(Uuid, Arc<CachedRow>)>>
where
    K: Hash + Eq + Borrow<Q> + Send + Sync + 'static,
    Q: Hash + Eq + ?Sized,
{
    let rows = entry::<K, Q>(state, key)?;
    Some(rows.iter().map(|(u, r)| (*u, r.clone())).collect())
}
