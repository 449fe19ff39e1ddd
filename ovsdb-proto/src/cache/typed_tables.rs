//! Typed rows and indexes kept beside the untyped rows, updated with them in the same
//! swap so that readers see both consistently.

use std::any::Any;
use std::collections::BTreeMap;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;

use uuid::Uuid;

use crate::model::Table;

use super::change::{Change, Event, TableRows};
use super::row::CachedRow;
use super::CacheEvent;

/// A typed table's state in a snapshot.
pub(crate) type AnyState = Arc<dyn Any + Send + Sync>;

/// The decoded rows of a table and its indexes.
pub(crate) struct TypedState<T> {
    pub(crate) rows: imbl::HashMap<Uuid, Arc<T>>,
    /// By the id of the index's handle.
    pub(crate) indexes: BTreeMap<u64, AnyState>,
}

impl<T> Clone for TypedState<T> {
    fn clone(&self) -> Self {
        TypedState {
            rows: self.rows.clone(),
            indexes: self.indexes.clone(),
        }
    }
}

/// The rows of one index: key to the uuids of the rows that have it.
pub(crate) type IndexMap<K> = imbl::HashMap<K, imbl::HashSet<Uuid>>;

/// What the writer needs to keep one typed table.
pub(crate) trait TypedSpec: Send + Sync {
    fn table(&self) -> &'static str;
    /// The [`TypedTable`] itself, to add an index to a registered table.
    fn as_any(&self) -> &dyn Any;
    /// The new state after `events` (those of this table), from `current`.
    fn apply(&self, current: Option<&AnyState>, events: &[&Event]) -> Result<AnyState, String>;
}

/// Maintains one index of a `T`.
pub(crate) trait IndexFn<T>: Send + Sync {
    fn id(&self) -> u64;
    fn update(
        &self,
        state: Option<&AnyState>,
        removed: &[Arc<T>],
        added: &[(Uuid, Arc<T>)],
    ) -> AnyState;
}

/// An index whose `keys` give each row's keys (none, one or several).
pub(crate) struct Index<T, K, F> {
    pub(crate) id: u64,
    pub(crate) keys: F,
    pub(crate) _t: PhantomData<fn(&T) -> K>,
}

impl<T, K, F, I> IndexFn<T> for Index<T, K, F>
where
    T: Table,
    K: Hash + Eq + Clone + Send + Sync + 'static,
    F: Fn(&T) -> I + Send + Sync,
    I: IntoIterator<Item = K>,
{
    fn id(&self) -> u64 {
        self.id
    }

    fn update(
        &self,
        state: Option<&AnyState>,
        removed: &[Arc<T>],
        added: &[(Uuid, Arc<T>)],
    ) -> AnyState {
        let mut map: IndexMap<K> = state
            .and_then(|s| s.downcast_ref::<IndexMap<K>>())
            .cloned()
            .unwrap_or_default();
        for old in removed {
            for k in (self.keys)(old) {
                if let Some(set) = map.get_mut(&k) {
                    set.remove(&old.uuid());
                    if set.is_empty() {
                        map.remove(&k);
                    }
                }
            }
        }
        for (uuid, new) in added {
            for k in (self.keys)(new) {
                map.entry(k).or_default().insert(*uuid);
            }
        }
        Arc::new(map)
    }
}

/// Gives every index handle its own id, so that a handle of one cache is not mistaken
/// for an index of another.
static NEXT_INDEX: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A handle to an index of a typed table, returned by [`TypedTable::index`] and given
/// to [`Snapshot::lookup`](super::Snapshot::lookup): the key type is checked at
/// compile time, and a handle the snapshot does not know is an error.
pub struct TypedIndex<T, K> {
    pub(crate) id: u64,
    name: Arc<str>,
    _t: PhantomData<fn(&T) -> K>,
}

impl<T, K> Clone for TypedIndex<T, K> {
    fn clone(&self) -> Self {
        TypedIndex {
            id: self.id,
            name: self.name.clone(),
            _t: PhantomData,
        }
    }
}

impl<T, K> std::fmt::Debug for TypedIndex<T, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TypedIndex({})", self.name)
    }
}

impl<T, K> TypedIndex<T, K> {
    /// The index's name (for messages).
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A table the cache keeps decoded into `T`, with indexes over the decoded rows (with
/// `nb-model`'s `LogicalSwitchPort`, which this crate cannot name; `tests/cache.rs` runs
/// it):
///
/// ```text
/// let mut ports = TypedTable::<LogicalSwitchPort>::new();
/// let by_namespace = ports.index("namespace", |p| p.external_ids.get("namespace").cloned());
/// config.typed(ports);
/// // later
/// let blue = cache.snapshot().lookup(&by_namespace, "blue")?;
/// ```
pub struct TypedTable<T> {
    pub(crate) indexes: Vec<Arc<dyn IndexFn<T>>>,
    pub(crate) _t: PhantomData<fn() -> T>,
}

impl<T> Clone for TypedTable<T> {
    fn clone(&self) -> Self {
        TypedTable {
            indexes: self.indexes.clone(),
            _t: PhantomData,
        }
    }
}

impl<T: Table> Default for TypedTable<T> {
    fn default() -> Self {
        TypedTable::new()
    }
}

impl<T: Table> TypedTable<T> {
    /// `T` decoded, no index yet.
    pub fn new() -> Self {
        TypedTable {
            indexes: Vec::new(),
            _t: PhantomData,
        }
    }

    /// Adds an index named `name`: `key` gives a row's key (or none); many rows may
    /// share one. Returns the handle to look rows up with.
    pub fn index<K, F>(&mut self, name: &str, key: F) -> TypedIndex<T, K>
    where
        K: Hash + Eq + Clone + Send + Sync + 'static,
        F: Fn(&T) -> Option<K> + Send + Sync + 'static,
    {
        self.index_many(name, key)
    }

    /// Adds an index named `name` under which a row is found by each of the keys
    /// `keys` gives (none, one or several): a reverse reference, say, the switch
    /// holding a port found by the port's uuid (`|s| s.ports.iter().filter_map(Ref::uuid)`
    /// collected). Returns the handle to look rows up with.
    pub fn index_many<K, F, I>(&mut self, name: &str, keys: F) -> TypedIndex<T, K>
    where
        K: Hash + Eq + Clone + Send + Sync + 'static,
        F: Fn(&T) -> I + Send + Sync + 'static,
        I: IntoIterator<Item = K> + 'static,
    {
        let id = NEXT_INDEX.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.indexes.push(Arc::new(Index {
            id,
            keys,
            _t: PhantomData,
        }));
        TypedIndex {
            id,
            name: name.into(),
            _t: PhantomData,
        }
    }
}

impl<T: Table> TypedSpec for TypedTable<T> {
    fn table(&self) -> &'static str {
        T::NAME
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn apply(&self, current: Option<&AnyState>, events: &[&Event]) -> Result<AnyState, String> {
        let mut state: TypedState<T> = current
            .and_then(|s| s.downcast_ref::<TypedState<T>>())
            .cloned()
            .unwrap_or(TypedState {
                rows: imbl::HashMap::new(),
                indexes: BTreeMap::new(),
            });
        let mut removed = Vec::new();
        let mut added = Vec::new();
        for e in events {
            let new_row = match &e.change {
                Change::Insert { new } | Change::Modify { new, .. } => Some(new),
                Change::Delete { .. } => None,
            };
            if let Some(old) = state.rows.remove(&e.uuid) {
                removed.push(old);
            }
            if let Some(row) = new_row {
                let t = Arc::new(T::from_row(e.uuid, &**row).map_err(|d| d.to_string())?);
                state.rows.insert(e.uuid, t.clone());
                added.push((e.uuid, t));
            }
        }
        for index in &self.indexes {
            let new = index.update(state.indexes.get(&index.id()), &removed, &added);
            state.indexes.insert(index.id(), new);
        }
        Ok(Arc::new(state))
    }
}

/// Builds the typed state of a whole table from its untyped rows (after a resync).
pub(crate) fn events_for_all(table: &str, rows: &TableRows) -> Vec<Event> {
    rows.iter()
        .map(|(u, r)| Event {
            table: table.to_owned(),
            uuid: *u,
            change: Change::Insert { new: r.clone() },
        })
        .collect()
}

/// An item of a table's typed event stream ([`CacheConfig::subscribe`](super::CacheConfig::subscribe)).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum TypedEvent<T> {
    /// A row of the table changed.
    Change {
        /// The row.
        uuid: Uuid,
        /// What happened to it, in the model's terms. For a table also kept typed
        /// ([`CacheConfig::typed`](super::CacheConfig::typed)) the rows are those of
        /// the snapshots before and after, shared, not decoded again.
        change: Change<Arc<T>>,
    },
    /// A row changed but does not decode into the model (a value the model cannot
    /// hold); the untyped events and the snapshot still have it.
    Undecodable {
        /// The row.
        uuid: Uuid,
        /// Why it does not decode.
        error: crate::model::DecodeError,
    },
    /// The initial contents are in (sent once, after their inserts).
    Ready,
    /// A bounded stream ([`Delivery::Bounded`](super::Delivery::Bounded)) dropped
    /// this many of the table's events because its reader was behind; they were
    /// between the events before and after this one. The snapshot has them: read the
    /// table again.
    Missed {
        /// How many events were dropped.
        events: u64,
    },
}

/// The typed event stream of one table: every change of the table, in order, decoded
/// into `T`.
pub type TypedEvents<T> = super::BatchReceiver<TypedEvent<T>>;

/// Where the cache task sends one table's typed events.
pub(crate) trait Subscriber: Send + Sync {
    fn table(&self) -> &'static str;
    /// Sends this table's share of `batch`, waiting while the reader is behind;
    /// `before` and `after` are the table's typed states (when it is kept typed) in the
    /// snapshots the batch went between.
    fn deliver<'a>(
        &'a self,
        batch: &'a [CacheEvent],
        before: Option<&'a AnyState>,
        after: Option<&'a AnyState>,
        held: &'a super::receiver::HeldBy,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>;
}

pub(crate) struct TypedSubscriber<T> {
    pub(crate) tx: super::receiver::BatchSender<TypedEvent<T>>,
}

/// A subscriber delivering as `delivery` and the stream it feeds (`capacity`: a
/// lossless stream's).
pub(crate) fn subscription<T: Table>(
    delivery: super::Delivery,
    capacity: usize,
) -> (Arc<dyn Subscriber>, TypedEvents<T>) {
    let (tx, rx) = super::receiver::channel(
        format!("TypedEvents<{}> (CacheConfig::subscribe)", T::NAME),
        delivery,
        capacity,
        |events| TypedEvent::Missed { events },
    );
    (Arc::new(TypedSubscriber { tx }), rx)
}

impl<T: Table> Subscriber for TypedSubscriber<T> {
    fn table(&self) -> &'static str {
        T::NAME
    }

    fn deliver<'a>(
        &'a self,
        batch: &'a [CacheEvent],
        before: Option<&'a AnyState>,
        after: Option<&'a AnyState>,
        held: &'a super::receiver::HeldBy,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>> {
        let typed = |s: Option<&'a AnyState>| s.and_then(|s| s.downcast_ref::<TypedState<T>>());
        let (before, after) = (typed(before), typed(after));
        Box::pin(async move {
            // Nobody listens: nothing to decode.
            if self.tx.is_closed() {
                return;
            }
            let mine: Vec<TypedEvent<T>> = batch
                .iter()
                .filter_map(|e| match e {
                    CacheEvent::Ready => Some(TypedEvent::Ready),
                    CacheEvent::Unusable { .. }
                    | CacheEvent::Skew(_)
                    | CacheEvent::Missed { .. } => None,
                    CacheEvent::Change(e) if e.table == T::NAME => {
                        Some(match typed_change::<T>(e, before, after) {
                            Ok(change) => TypedEvent::Change {
                                uuid: e.uuid,
                                change,
                            },
                            Err(error) => TypedEvent::Undecodable {
                                uuid: e.uuid,
                                error,
                            },
                        })
                    }
                    CacheEvent::Change(_) => None,
                })
                .collect();
            self.tx.send(mine, held).await;
        })
    }
}

/// A change of `T`'s table in the model's terms: the rows of the typed states
/// `before` and `after` when the table is kept typed (each row decoded once, by the
/// writer), else decoded here.
fn typed_change<T: Table>(
    e: &Event,
    before: Option<&TypedState<T>>,
    after: Option<&TypedState<T>>,
) -> Result<Change<Arc<T>>, crate::model::DecodeError> {
    let shared =
        |s: Option<&TypedState<T>>, row: &CachedRow| match s.and_then(|s| s.rows.get(&e.uuid)) {
            Some(t) => Ok(t.clone()),
            None => T::from_row(e.uuid, row).map(Arc::new),
        };
    Ok(match &e.change {
        Change::Insert { new } => Change::Insert {
            new: shared(after, new)?,
        },
        Change::Modify { old, new } => Change::Modify {
            old: shared(before, old)?,
            new: shared(after, new)?,
        },
        Change::Delete { old } => Change::Delete {
            old: shared(before, old)?,
        },
    })
}
