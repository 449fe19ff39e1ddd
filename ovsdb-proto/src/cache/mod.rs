//! A monitor-driven, in-memory cache of a database that survives reconnects and raft
//! leader changes.
//!
//! [`Cache::start`] runs a task that connects to one of several remotes (in shuffled
//! order, with exponential backoff and jitter between attempts), optionally only to the
//! cluster's leader, and monitors the chosen tables with `monitor_cond_since`. On a
//! reconnect it asks for the changes since the last transaction it saw: when the server
//! still has them only those are applied, otherwise the whole contents are fetched and
//! compared with the cache so that only true differences become events.
//!
//! Readers take [`Snapshot`]s, which are whole updates only and cost an `Arc` clone.
//! Every change comes out of [`CacheEvents`] (and each table's [`TypedEvents`]) in
//! order; a slow reader of a lossless stream (the default) slows the cache down (and
//! through it the server connection) rather than losing events, and a write waiting
//! for the cache then fails naming that stream ([`ErrorKind::HeldBack`](crate::ErrorKind::HeldBack)); a
//! [`Delivery::Bounded`] stream never holds the cache back and tells its reader what it
//! missed. When a wait for a write returns, its events are in every stream; an event
//! read from a stream finds the snapshot at least as new.
//!
//! The crate's own docs (`ovsdb_proto`) open on a complete example: a typed, indexed
//! table, its event stream and the wait for a working server.
//!
//! # How it is built
//!
//! Cached rows are compact (each table's column names are kept once; a row stores only
//! the values that differ from their column's default, with a presence bit per column;
//! a value is 24 bytes, a boxed slice of atoms, and a string of up to 24 bytes is held
//! in its atom with no allocation). Unique indexes file rows by the hash of their key
//! and compare the few rows under a hash, holding no copy of any value. A monitor
//! reply's rows are cut out of it while it streams (`cut.rs`: serde reads a stream a
//! byte at a time, a slice several times faster) and decoded from slices, the rows of a
//! big table past its first 512 on every core (`cache/decode/parallel.rs`), in the
//! server's order, the first bad row reported as it would be on one thread. One decoder
//! (`cache/decode/mod.rs`) reads monitor replies, while they arrive, and every
//! `update`/`update2`/`update3` notification (taken raw, `Notifications::recv_raw`)
//! straight into them, and checks every value against its column (type, enum, range,
//! length, element count): a row that does not fit fails that update with the table,
//! row, column and value, the cache resyncs, and that server is tried after the others
//! until it syncs cleanly. Tables and columns the server lacks are left out of the
//! monitor and reported once (`CacheEvent::Skew`, `cache.skew()`), as the C IDL does;
//! the cache becomes ready with what exists. `cargo bench -p integration-tests --bench
//! sync` measures the initial sync of 104k rows beside the time to read the same
//! reply's bytes (`docs/benchmarks.md`).
//!
//! The cache reconnects by itself (shuffled remotes, the next one soon after one fails,
//! exponential backoff with jitter after a round in which all failed, starting again
//! from the minimum after a session that synced), only to a cluster's
//! leader if asked, never to a server whose raft index is behind what it has seen (a
//! new cluster id, a cluster rebuilt from scratch, starts the count over;
//! `cache.reset_raft_index()` for a restored backup, or `reset_when_behind` to do it
//! past `behind_limit`, which is reported in any case), and resumes with
//! `monitor_cond_since`; each server it cannot use is reported as
//! `CacheEvent::Unusable` with why; when the server cannot resume it, the contents are
//! fetched again and only true differences become events. A snapshot is one whole
//! update, costs an `Arc` clone and never changes under the reader. A lossless stream's
//! events are never dropped: its slow reader slows the cache. `cache.transact` fails fast with a retryable
//! error while disconnected and says when an outcome is unknown; `cache.wait_for` gives
//! read-your-writes; `cache.set_conditions` changes what is cached on the fly;
//! `cache.reader()` is a cloneable read-only handle for the readers. The cache is split
//! as kube-runtime splits its runtime: `watcher.rs` (a task that picks servers,
//! connects, resumes or resyncs and follows the monitor, reporting a stream of events:
//! contents synced, changes, servers unusable), `reflector.rs` (applies those to the
//! store and publishes them; a batch that does not apply sends the watcher back to a
//! full resync), `store.rs` (the snapshots), `server.rs` (schema fit, the `_Server`
//! watch, the monitor request and its fallbacks), `health.rs` (the raft check, a pure
//! function), `backoff.rs`. `ovsdb_proto::lock::Lock` acquires, steals and releases
//! locks and says when one is lost.

mod backoff;
mod change;
mod decode;
mod edited;
mod fill;
mod health;
mod hooks;
mod index;
mod receiver;
mod reflector;
mod row;
mod server;
mod store;
mod typed_tables;
mod wait;
mod watcher;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::client::Client;
use crate::config::ConnectOptions;
use crate::error::Error;
use crate::monitor::MonitorRequest;
use crate::ops::{Operation, OperationResult};
use crate::remote::Remote;
use crate::schema::DatabaseSchema;

pub use crate::diff::{apply_column, apply_row};
pub use change::{Change, Event, TableRows};
pub use edited::SetElements;
pub use fill::Store;
pub use index::{IndexedRows, RowChange, RowIndex};
pub use receiver::{BatchReceiver, Delivery};
pub use row::CachedRow;
pub use store::Snapshot;
pub use typed_tables::{TypedEvent, TypedEvents, TypedIndex, TypedTable};
pub use wait::Expected;

#[doc(hidden)]
pub use hooks::{__decode_reply, __decode_updates};

/// What to cache and where from.
#[derive(Clone)]
pub struct CacheConfig {
    /// The servers; tried in shuffled order.
    pub remotes: Vec<Remote>,
    /// The database.
    pub database: String,
    /// The tables, with the columns and conditions to monitor.
    pub tables: BTreeMap<String, MonitorRequest>,
    /// Accept only the leader of a clustered database.
    pub leader_only: bool,
    /// Connection options (TLS, limits).
    pub connect: ConnectOptions,
    /// The wait before the next server after one could not be used, and the
    /// shortest after a round in which none could (the waits after such rounds grow
    /// exponentially, with jitter).
    pub min_backoff: Duration,
    /// The longest wait after a round in which no server could be used.
    pub max_backoff: Duration,
    /// How long the cache may go without syncing while servers are refused for a
    /// raft index behind the one it has seen (a cluster restored from a backup, or a
    /// member that lied about its index) before it says so: a
    /// [`CacheEvent::Unusable`] whose `remote` is every remote, comma-separated, and
    /// whose `error` gives the index and the time. Default 30 s. The cache then goes
    /// on refusing them (its contents are newer than theirs) unless
    /// [`reset_when_behind`](Self::reset_when_behind).
    pub behind_limit: Duration,
    /// Past [`behind_limit`](Self::behind_limit), forget the raft index seen (as
    /// [`Cache::reset_raft_index`] does) and sync with what the servers have, the
    /// rows they lack leaving the cache as deletes. Default false: a stale but
    /// reported cache rather than writes forgotten without a caller deciding.
    pub reset_when_behind: bool,
    /// How many update messages may wait unread in [`CacheEvents`] (and in each
    /// lossless typed stream).
    pub event_capacity: usize,
    /// How [`CacheEvents`] is delivered: lossless (the default: a reader that is
    /// behind holds the cache back) or bounded (the cache never waits; the reader is
    /// told what it missed).
    pub event_delivery: Delivery,
    /// Tables also kept decoded into model types, with their indexes.
    typed: Vec<Arc<dyn typed_tables::TypedSpec>>,
    /// The typed event streams.
    subscribers: Vec<Arc<dyn typed_tables::Subscriber>>,
    /// Indexes over cached rows, by slot.
    row_indexes: Vec<Arc<dyn index::RowIndexSpec>>,
}

impl std::fmt::Debug for CacheConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheConfig")
            .field("remotes", &self.remotes)
            .field("database", &self.database)
            .field("tables", &self.tables)
            .field("leader_only", &self.leader_only)
            .field(
                "typed",
                &self.typed.iter().map(|t| t.table()).collect::<Vec<_>>(),
            )
            .field(
                "subscribers",
                &self
                    .subscribers
                    .iter()
                    .map(|t| t.table())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl CacheConfig {
    /// Caches every column of `tables` of `database` from `remotes`.
    pub fn new(remotes: Vec<Remote>, database: impl Into<String>, tables: &[&str]) -> CacheConfig {
        CacheConfig {
            remotes,
            database: database.into(),
            tables: tables
                .iter()
                .map(|t| (t.to_string(), MonitorRequest::all()))
                .collect(),
            leader_only: false,
            connect: ConnectOptions::default(),
            min_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(8),
            behind_limit: Duration::from_secs(30),
            reset_when_behind: false,
            event_capacity: 64,
            event_delivery: Delivery::Lossless,
            typed: Vec::new(),
            subscribers: Vec::new(),
            row_indexes: Vec::new(),
        }
    }

    /// Caches model `D`'s database from `remotes`: its name comes from the model, and
    /// the tables from what is then made typed, indexed or subscribed to (or added to
    /// [`tables`](Self::tables)).
    pub fn for_model<D: crate::model::Database>(remotes: Vec<Remote>) -> CacheConfig {
        CacheConfig::new(remotes, D::NAME, &[])
    }

    /// Keeps an index over the cached rows of `table`: `keys` gives the keys a row is
    /// found under (none, one, or several). Look rows up with
    /// [`Snapshot::lookup_rows`] and the handle returned. `table` is added to the
    /// monitored tables (every column) if it is not there.
    ///
    /// Each update copies the parts of the index it changes (the snapshots before it
    /// keep theirs), cloning the keys held there: for an index with many keys, prefer
    /// keys cloned without copying, such as `Arc<str>` for a name (looked up by
    /// `&str`) rather than `String`.
    pub fn index<K, F>(&mut self, table: &str, name: &str, keys: F) -> RowIndex<K>
    where
        K: std::hash::Hash + Eq + Clone + Send + Sync + 'static,
        F: Fn(&CachedRow) -> Vec<K> + Send + Sync + 'static,
    {
        self.tables
            .entry(table.to_owned())
            .or_insert_with(MonitorRequest::all);
        let slot = self.row_indexes.len();
        self.row_indexes.push(Arc::new(index::Spec {
            table: table.into(),
            keys,
            _key: std::marker::PhantomData,
        }));
        RowIndex::new(slot, table, name)
    }

    /// Also keeps the rows of `T` decoded (and indexed as `table` says), read with
    /// [`Snapshot::rows`], [`Snapshot::get_typed`] and [`Snapshot::lookup`]. `T`'s
    /// table is added to the monitored tables if it is not there.
    pub fn typed<T: crate::model::Table>(&mut self, mut table: TypedTable<T>) -> &mut Self {
        self.tables
            .entry(T::NAME.to_owned())
            .or_insert_with(MonitorRequest::all);
        // One typed state per table: a second registration adds its indexes.
        let at = self.typed.iter().position(|t| t.table() == T::NAME);
        match at.and_then(|i| self.typed[i].as_any().downcast_ref::<TypedTable<T>>()) {
            Some(kept) => {
                let mut merged = kept.clone();
                merged.indexes.append(&mut table.indexes);
                self.typed[at.expect("found")] = Arc::new(merged);
            }
            None => self.typed.push(Arc::new(table)),
        }
        self
    }

    /// Keeps the rows of `T` decoded (as [`typed`](Self::typed) does, once however
    /// often it is called) and adds an index to them: `keys` gives a row's keys (an
    /// `Option` for one or none, a `Vec` or any iterator for several). Built from the
    /// config, the index cannot be forgotten on the way to [`Cache::start`].
    ///
    /// ```no_run
    /// # async fn example(mut config: ovsdb_proto::cache::CacheConfig, port: ovsdb_proto::Uuid)
    /// # -> Result<(), ovsdb_proto::Error> {
    /// # use std::collections::BTreeSet;
    /// # use ovsdb_proto::{model::Ref, Uuid};
    /// # #[derive(Clone, Debug, Default, PartialEq, ovsdb_derive::Table)]
    /// # #[ovsdb(table = "Logical_Switch_Port")]
    /// # struct LogicalSwitchPort { #[ovsdb(uuid)] uuid: Uuid, name: String }
    /// #[derive(Clone, Debug, Default, PartialEq, ovsdb_derive::Table)]
    /// #[ovsdb(table = "Logical_Switch")]
    /// struct LogicalSwitch {
    ///     #[ovsdb(uuid)]
    ///     uuid: Uuid,
    ///     name: String,
    ///     ports: BTreeSet<Ref<LogicalSwitchPort>>,
    /// }
    ///
    /// // A switch under the uuid of each of its ports: which switch holds a port.
    /// let by_port = config.typed_index("by port", |s: &LogicalSwitch| {
    ///     s.ports.iter().filter_map(|p| p.uuid()).collect::<Vec<_>>()
    /// });
    /// let (cache, _) = ovsdb_proto::cache::Cache::start(config);
    /// let holders = cache.snapshot().lookup(&by_port, &port)?;
    /// # Ok(()) }
    /// ```
    pub fn typed_index<T, K, F, I>(&mut self, name: &str, keys: F) -> TypedIndex<T, K>
    where
        T: crate::model::Table,
        K: std::hash::Hash + Eq + Clone + Send + Sync + 'static,
        F: Fn(&T) -> I + Send + Sync + 'static,
        I: IntoIterator<Item = K> + 'static,
    {
        let at = self.typed.iter().position(|t| t.table() == T::NAME);
        let mut table = at
            .and_then(|i| self.typed[i].as_any().downcast_ref::<TypedTable<T>>())
            .cloned()
            .unwrap_or_default();
        let index = table.index_many(name, keys);
        match at {
            Some(i) => self.typed[i] = Arc::new(table),
            None => {
                self.typed(table);
            }
        }
        index
    }

    /// A stream of the changes of `T`'s table alone, decoded into `T` (inserts, updates
    /// with the old and new row, deletes with the last row), with its own
    /// [`TypedEvent::Ready`]. Like [`CacheEvents`] it is lossless: the cache waits for
    /// a reader that is behind by more than [`event_capacity`](Self::event_capacity)
    /// batches (as set when this is called), so a stream that is kept must be read
    /// (else writes waiting for the cache fail with [`ErrorKind::HeldBack`](crate::ErrorKind::HeldBack),
    /// naming it); [`subscribe_with`](Self::subscribe_with) a bounded
    /// [`Delivery`] for a stream that must never hold the cache back. `T`'s table is
    /// added to the monitored tables if it is not there.
    pub fn subscribe<T: crate::model::Table>(&mut self) -> TypedEvents<T> {
        self.subscribe_with::<T>(Delivery::Lossless)
    }

    /// [`subscribe`](Self::subscribe) delivered as `delivery`: with
    /// [`Delivery::Bounded`] the stream never holds the cache back, and a reader that
    /// fell behind gets [`TypedEvent::Missed`] in place of what it missed.
    pub fn subscribe_with<T: crate::model::Table>(&mut self, delivery: Delivery) -> TypedEvents<T> {
        self.tables
            .entry(T::NAME.to_owned())
            .or_insert_with(MonitorRequest::all);
        let (subscriber, events) = typed_tables::subscription::<T>(delivery, self.event_capacity);
        self.subscribers.push(subscriber);
        events
    }
}

/// An item of the event stream.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CacheEvent {
    /// A row changed.
    Change(Event),
    /// The initial contents are in (sent once, after their insert events).
    Ready,
    /// The server's schema lacks monitored tables or columns: those are not monitored
    /// and stay empty (or hold their defaults). Sent when what is lacking changes (at
    /// the first sync, and after a reconnect or a schema conversion that changed it),
    /// after that sync's changes.
    Skew(crate::model::skew::SchemaSkew),
    /// A server could not be used, or stopped being usable (connection refused or lost,
    /// not the leader, behind what the cache has seen, a failed monitor): the cache
    /// tries again, the next server first. The contents stay as they were.
    Unusable {
        /// The server.
        remote: String,
        /// Why, for people.
        error: String,
        /// Why, for programs: [`UnusableReason::is_fault`] is false for a follower a
        /// `leader_only` cache skips on purpose.
        reason: UnusableReason,
    },
    /// A bounded stream ([`Delivery::Bounded`]) dropped this many events because its
    /// reader was behind; they were between the events before and after this one.
    /// The snapshot has them: read it again.
    Missed {
        /// How many events were dropped.
        events: u64,
    },
}

/// Why a server could not be used ([`CacheEvent::Unusable`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UnusableReason {
    /// A cluster member that is not the leader, skipped because the cache follows the
    /// leader only (`leader_only`): expected in a healthy cluster, not a fault.
    NotLeader,
    /// A cluster member cut off from its cluster.
    NotConnectedToCluster,
    /// A cluster member whose raft index is behind what the cache has already seen.
    Behind,
    /// Every server has been refused as behind for longer than `behind_limit` (a
    /// cluster restored from a backup?); `remote` names them all.
    EveryServerBehind,
    /// The server does not have the database.
    NoDatabase,
    /// Connecting failed, or the connection was lost or went silent.
    Connection,
    /// The server answered a request of the cache's with an error.
    Refused,
    /// The server sent what breaks the protocol or does not fit its schema.
    Malformed,
}

impl UnusableReason {
    /// False for what a healthy deployment shows on purpose (a follower skipped by a
    /// `leader_only` cache); true for anything worth an operator's look.
    pub fn is_fault(self) -> bool {
        !matches!(self, UnusableReason::NotLeader)
    }

    /// The reason of a session that ended with error `e`.
    pub(crate) fn of(e: &Error) -> UnusableReason {
        match e.kind() {
            crate::ErrorKind::Protocol | crate::ErrorKind::Datum => UnusableReason::Malformed,
            crate::ErrorKind::Server | crate::ErrorKind::Transaction => UnusableReason::Refused,
            _ => UnusableReason::Connection,
        }
    }
}

/// The event stream of a [`Cache`]: every change, untyped, and the cache's state.
pub type CacheEvents = BatchReceiver<CacheEvent>;

/// Where the cache task publishes its state.
pub(crate) struct Published {
    pub(crate) stats: Arc<CacheStats>,
    pub(crate) ready: watch::Sender<bool>,
    pub(crate) version: watch::Sender<u64>,
    pub(crate) client: watch::Sender<Option<Client>>,
    /// The server `client` is connected to.
    pub(crate) remote: watch::Sender<Option<Remote>>,
    pub(crate) schema: watch::Sender<Option<Arc<DatabaseSchema>>>,
    pub(crate) skew: watch::Sender<Option<Arc<crate::model::skew::SchemaSkew>>>,
    /// The lossless stream the cache is waiting for, if any.
    pub(crate) held: Arc<receiver::HeldBy>,
    /// Each server's last reason to be unusable.
    pub(crate) unusable: Arc<Unusable>,
    /// The [`Snapshot::seq`] whose events are in every stream.
    pub(crate) delivered: watch::Sender<u64>,
    /// The connection the watcher follows and how many of its notifications are
    /// handled (applied to the store): `Client::note_mark`'s terms.
    pub(crate) handled: Arc<watch::Sender<(u64, u64)>>,
}

/// Each server's last reason to be unusable, by remote, for the error of a cache that
/// does not sync.
#[derive(Default)]
pub(crate) struct Unusable(std::sync::Mutex<BTreeMap<String, String>>);

impl Unusable {
    pub(crate) fn record(&self, remote: &str, error: &str) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.insert(remote.to_owned(), error.to_owned());
    }

    fn get(&self) -> BTreeMap<String, String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Counters of a cache's life, for metrics.
#[derive(Debug, Default)]
pub struct CacheStats {
    connections: std::sync::atomic::AtomicU64,
    resyncs: std::sync::atomic::AtomicU64,
    resumes: std::sync::atomic::AtomicU64,
}

impl CacheStats {
    /// Connections on which monitoring started (the first one included), counted once
    /// the connection's initial contents are in the cache.
    pub fn connections(&self) -> u64 {
        self.connections.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Full resyncs: the whole contents read again (the first sync included).
    pub fn resyncs(&self) -> u64 {
        self.resyncs.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Reconnections that resumed from the last transaction seen
    /// (`monitor_cond_since` found it) instead of resyncing.
    pub fn resumes(&self) -> u64 {
        self.resumes.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn count(&self, resumed: bool) {
        use std::sync::atomic::Ordering::Relaxed;
        self.connections.fetch_add(1, Relaxed);
        if resumed {
            self.resumes.fetch_add(1, Relaxed);
        } else {
            self.resyncs.fetch_add(1, Relaxed);
        }
    }
}

/// A read-only handle on a cache's contents: cheap to clone, to hand to each reader
/// (a controller's workers, an HTTP handler) without the [`Cache`] itself. It keeps
/// showing the last contents once the cache is dropped.
///
/// Names, for a reader of kube-rs: this is what kube's reflector calls a `Store` (the
/// readers' handle a running watcher fills); [`Store`] here is contents filled by hand
/// (kube's `Writer` and its store in one), for tests and dry runs. The cache's own
/// handle is named for what it holds, the contents a *cache* of a database keeps, as
/// in libovsdb and the C IDL; kube's `Store` would read as the writer's side here.
#[derive(Clone, Debug)]
pub struct CacheReader {
    shared: store::Shared,
    ready: watch::Receiver<bool>,
    version: watch::Receiver<u64>,
}

impl CacheReader {
    /// The current contents (an `Arc` clone, whatever their size).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.shared.load()
    }

    /// True once the initial contents are in.
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Waits until the initial contents are in.
    pub async fn wait_until_ready(&self) {
        let mut r = self.ready.clone();
        let _ = r.wait_for(|ready| *ready).await;
    }

    /// Waits until `predicate` holds for the contents (read-your-writes: wait for the
    /// row a transaction inserted or changed), at most `timeout`.
    pub async fn wait_for(&self, timeout: Duration, predicate: impl Fn(&Snapshot) -> bool) -> bool {
        self.first_where(timeout, predicate).await.is_some()
    }

    /// The first contents for which `predicate` holds, waiting at most `timeout`.
    pub(crate) async fn first_where(
        &self,
        timeout: Duration,
        predicate: impl Fn(&Snapshot) -> bool,
    ) -> Option<Arc<Snapshot>> {
        let mut v = self.version.clone();
        let check = async {
            loop {
                let snapshot = self.snapshot();
                if predicate(&snapshot) {
                    return snapshot;
                }
                if v.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(timeout, check).await.ok()
    }
}

/// How a wait for the notifications a reply came after ended.
enum Handled {
    /// Handled, and their events in every stream.
    Shown,
    /// The cache follows a later connection.
    Failover,
    /// Not by the deadline.
    TimedOut,
}

/// What is left of the time until `deadline`.
fn left(deadline: tokio::time::Instant) -> Duration {
    deadline.saturating_duration_since(tokio::time::Instant::now())
}

/// A running cache. Dropping it stops its task and closes its connection.
pub struct Cache {
    stats: Arc<CacheStats>,
    reader: CacheReader,
    client: watch::Receiver<Option<Client>>,
    remote: watch::Receiver<Option<Remote>>,
    schema: watch::Receiver<Option<Arc<DatabaseSchema>>>,
    skew: watch::Receiver<Option<Arc<crate::model::skew::SchemaSkew>>>,
    database: String,
    commands: mpsc::Sender<watcher::Command>,
    held: Arc<receiver::HeldBy>,
    unusable: Arc<Unusable>,
    remotes: Vec<Remote>,
    delivered: watch::Receiver<u64>,
    /// The connection the cache follows and how many of its notifications it handled.
    handled: watch::Receiver<(u64, u64)>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Cache {
    /// Starts the cache task on the current tokio runtime. The [`CacheEvents`] stream
    /// may be dropped by a caller that does not want it (it then costs nothing); one
    /// that is kept must be read, since the cache waits for a reader that is behind.
    pub fn start(config: CacheConfig) -> (Cache, CacheEvents) {
        let writer = store::Writer::new(config.typed.clone(), config.row_indexes.clone());
        let shared = writer.shared();
        let (ready_tx, ready) = watch::channel(false);
        let (version_tx, version) = watch::channel(0);
        let (client_tx, client) = watch::channel(None);
        let (remote_tx, remote) = watch::channel(None);
        let (schema_tx, schema) = watch::channel(None);
        let (skew_tx, skew) = watch::channel(None);
        let (events_tx, events_rx) = receiver::channel(
            "the CacheEvents stream (Cache::start's)".into(),
            config.event_delivery,
            config.event_capacity,
            |events| CacheEvent::Missed { events },
        );
        let held = Arc::new(receiver::HeldBy::default());
        let unusable = Arc::new(Unusable::default());
        let remotes = config.remotes.clone();
        let (delivered_tx, delivered) = watch::channel(0);
        let (handled_tx, handled) = watch::channel((0, 0));
        let database = config.database.clone();
        let stats = Arc::new(CacheStats::default());
        let published = Published {
            stats: stats.clone(),
            ready: ready_tx,
            version: version_tx,
            client: client_tx,
            remote: remote_tx,
            schema: schema_tx,
            skew: skew_tx,
            held: held.clone(),
            unusable: unusable.clone(),
            delivered: delivered_tx,
            handled: Arc::new(handled_tx),
        };
        let (commands, commands_rx) = mpsc::channel(16);
        let task = tokio::spawn(reflector::run(
            config,
            writer,
            published,
            events_tx,
            commands_rx,
        ));
        (
            Cache {
                stats,
                reader: CacheReader {
                    shared,
                    ready,
                    version,
                },
                client,
                remote,
                schema,
                skew,
                database,
                commands,
                held,
                unusable,
                remotes,
                delivered,
                handled,
                task,
            },
            events_rx,
        )
    }

    /// Replaces the conditions of `table`'s monitor (`monitor_cond_change`): rows that
    /// stop matching leave the cache as deletes, rows that start matching come in as
    /// inserts. Returns once the server accepted the change (or, while disconnected,
    /// once it is recorded for the next connection).
    pub async fn set_conditions(
        &self,
        table: &str,
        conditions: Vec<crate::ops::Condition>,
    ) -> Result<(), Error> {
        let (reply, rx) = tokio::sync::oneshot::channel();
        self.commands
            .send(watcher::Command::SetConditions {
                table: table.to_owned(),
                conditions,
                reply,
            })
            .await
            .map_err(|_| Error::closed(Some("the cache stopped".into())))?;
        rx.await
            .map_err(|_| Error::closed(Some("the cache stopped".into())))?
    }

    /// Forgets the highest raft index the cache has seen. The cache refuses a
    /// clustered server whose index is behind it (so that it never goes back in time
    /// to a member that missed writes), and reports each refusal as
    /// [`CacheEvent::Unusable`]; a cluster id change forgets the index by itself. Call
    /// this when the index is known to be wrong (a cluster restored from a backup, a
    /// member that reported a bogus index): the next server the cache checks is taken
    /// whatever its index, and the cache resyncs from it. Takes effect at the cache's
    /// next check of a server (within the backoff wait).
    pub async fn reset_raft_index(&self) -> Result<(), Error> {
        self.commands
            .send(watcher::Command::ResetRaftIndex)
            .await
            .map_err(|_| Error::closed(Some("the cache stopped".into())))
    }

    /// Counters of the cache's connections and resyncs.
    pub fn stats(&self) -> &CacheStats {
        &self.stats
    }

    /// The current contents.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.reader.snapshot()
    }

    /// A cloneable read-only handle on the contents.
    pub fn reader(&self) -> CacheReader {
        self.reader.clone()
    }

    /// Waits until the initial contents are in. It waits for as long as that takes:
    /// [`ready`](Self::ready) says why it did not happen in time.
    pub async fn wait_until_ready(&self) {
        self.reader.wait_until_ready().await
    }

    /// Waits at most `timeout` until the initial contents are in. If they are not, the
    /// error ([`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable)) names each
    /// server tried and why it was unusable (refused, not found, not the leader,
    /// behind, a failed monitor…), or says that none has answered yet; the cache keeps
    /// trying.
    pub async fn ready(&self, timeout: Duration) -> Result<(), Error> {
        if tokio::time::timeout(timeout, self.wait_until_ready())
            .await
            .is_ok()
        {
            return Ok(());
        }
        Err(Error::not_ready(format!(
            "the cache of {} did not sync within {timeout:?}: {}",
            self.database,
            self.why_unusable()
        )))
    }

    /// Each server tried and why it was unusable last, or that none answered yet.
    fn why_unusable(&self) -> String {
        let tried = self.unusable.get();
        if tried.is_empty() {
            let remotes: Vec<String> = self.remotes.iter().map(|r| r.to_string()).collect();
            format!("no server has answered yet (trying {})", remotes.join(", "))
        } else {
            tried
                .iter()
                .map(|(remote, error)| format!("{remote}: {error}"))
                .collect::<Vec<_>>()
                .join("; ")
        }
    }

    /// The servers the cache was configured with, in order.
    pub fn remotes(&self) -> &[Remote] {
        &self.remotes
    }

    /// The connection the cache is synced over, if it is synced now.
    pub fn client(&self) -> Option<Client> {
        self.client.borrow().clone()
    }

    /// Waits until the cache is no longer synced with `remote`: its connection there
    /// ended, or it moved to another server (a raft cluster's new leader). At once when
    /// it is not synced with `remote` now. What holds something on one server (an
    /// OVSDB lock: ovsdb-server keeps locks per server, not in the raft log) learns
    /// here that its writes no longer go there.
    pub async fn wait_left(&self, remote: &Remote) {
        let mut rx = self.remote.clone();
        let _ = rx.wait_for(|r| r.as_ref() != Some(remote)).await;
    }

    /// The server the cache is synced with now, if any (one of the configured
    /// remotes): which member of a cluster it follows.
    pub fn remote(&self) -> Option<Remote> {
        self.remote.borrow().clone()
    }

    /// Runs a transaction over the cache's connection. When the cache is not connected
    /// (or its connection just ended) this fails at once with an error for which
    /// [`Error::is_retryable`] is true; when the connection is lost after the request
    /// was sent, [`Error::is_outcome_unknown`] is true.
    pub async fn transact(&self, operations: &[Operation]) -> Result<Vec<OperationResult>, Error> {
        let client = self.client().ok_or_else(Error::cache_not_connected)?;
        client.transact(&self.database, operations).await
    }

    /// `operations` on the cached database serialized for
    /// [`Cache::transact_prepared`], to be sent later (a caller that waits before
    /// sending serializes meanwhile).
    pub fn prepare(&self, operations: &[Operation]) -> Result<crate::client::Prepared, Error> {
        crate::client::Prepared::transact(&self.database, operations)
    }

    /// [`Cache::transact`] of a transaction [`Cache::prepare`]d beforehand.
    pub async fn transact_prepared(
        &self,
        prepared: &crate::client::Prepared,
    ) -> Result<Vec<OperationResult>, Error> {
        let client = self.client().ok_or_else(Error::cache_not_connected)?;
        client.transact_prepared(prepared).await
    }

    /// The schema of the cached database on the server the cache last synced from.
    pub fn schema(&self) -> Option<Arc<DatabaseSchema>> {
        self.schema.borrow().clone()
    }

    /// What the schema of the server the cache last monitored lacks of the monitored
    /// tables and columns (empty when it has them all); `None` before the first
    /// monitor. Only `missing_tables` and `missing_columns` are filled.
    pub fn skew(&self) -> Option<Arc<crate::model::skew::SchemaSkew>> {
        self.skew.borrow().clone()
    }

    /// Commits typed transaction `txn` over this cache's connection and waits, at most
    /// `timeout`, until the cache shows its effects (see
    /// [`Cache::transact_and_wait`]): its typed result, read-your-writes. A
    /// transaction that could not be sent because the cache was between servers (a
    /// failover) is sent once the cache has one, within the same `timeout` (a handle
    /// from [`Cache::db`] follows the cache); one sent whose outcome is unknown is not.
    pub async fn commit_and_wait<D: crate::model::Database>(
        &self,
        txn: crate::model::db::Transaction<D>,
        timeout: Duration,
    ) -> Result<crate::model::db::TransactionResult, Error> {
        let deadline = tokio::time::Instant::now() + timeout;
        let before = self.snapshot();
        let (result, mark) = self.send_by(deadline, || txn.send_marked()).await?;
        let expected = || Expected::since(txn.operations(), result.results(), &before);
        match self.wait_handled(mark, deadline).await {
            Handled::Shown => Ok(result),
            Handled::TimedOut => Err(self.not_shown(&expected(), timeout)),
            Handled::Failover => {
                self.wait_expected(&expected(), left(deadline)).await?;
                Ok(result)
            }
        }
    }

    /// Read-your-writes for any transaction sent over the cache's own connection: waits
    /// until the cache has handled every notification of connection `mark.0` up to
    /// `mark.1` (read when the transaction's reply was in: ovsdb-server sends a
    /// transaction's monitor updates before its reply, so the contents then show all it
    /// changed that the cache monitors, whatever the operations' shape: by uuid, by
    /// conditions, mutations), then until their events are in every stream. False when
    /// the cache follows a later connection by then (a failover: the caller waits for
    /// what the transaction's results say instead) or at `deadline`.
    async fn wait_handled(&self, mark: (u64, u64), deadline: tokio::time::Instant) -> Handled {
        let mut handled = self.handled.clone();
        let done = |h: &(u64, u64)| h.0 > mark.0 || (h.0 == mark.0 && h.1 >= mark.1);
        let reached = tokio::time::timeout_at(deadline, handled.wait_for(done)).await;
        match reached {
            Ok(Ok(h)) if h.0 == mark.0 => {}
            Ok(Ok(_)) => return Handled::Failover,
            Ok(Err(_)) | Err(_) => return Handled::TimedOut,
        }
        let seq = self.snapshot().seq();
        let mut d = self.delivered.clone();
        let delivered = tokio::time::timeout_at(deadline, d.wait_for(|v| *v >= seq))
            .await
            .is_ok_and(|r| r.is_ok());
        match delivered {
            true => Handled::Shown,
            false => Handled::TimedOut,
        }
    }

    /// Runs `send` until it is sent or `deadline`: a request not sent because the
    /// cache was between servers (a failover) goes again once it has one. One whose
    /// outcome is unknown is not sent again.
    async fn send_by<T, F, Fut>(&self, deadline: tokio::time::Instant, send: F) -> Result<T, Error>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, Error>>,
    {
        loop {
            match send().await {
                Err(e)
                    if e.is_retryable()
                        && tokio::time::Instant::now() < deadline
                        && self.reconnected_by(deadline).await =>
                {
                    // A handle bound to one closed client fails at once each time:
                    // not in a tight loop.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                // Never sent for want of a server: say why each was unusable.
                Err(e) if e.is_retryable() => {
                    let why = format!(
                        "the cache is not connected to a usable server: {}",
                        self.why_unusable()
                    );
                    return Err(Error::unavailable(Error::closed(Some(why.into()))));
                }
                other => return other,
            }
        }
    }

    /// Waits until the cache has a connection that is not closed, at most until
    /// `deadline`; true if it has one.
    async fn reconnected_by(&self, deadline: tokio::time::Instant) -> bool {
        let mut client = self.client.clone();
        let connected = async {
            loop {
                if client
                    .borrow_and_update()
                    .as_ref()
                    .is_some_and(|c| !c.is_closed())
                {
                    return;
                }
                if client.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout_at(deadline, connected).await.is_ok()
    }

    /// A typed handle on the cache's connection: typed transactions built from it go
    /// over the connection the cache is synced on *when each is committed*, compared
    /// with the schema the cache read from that server, so a handle kept across a
    /// reconnect or a failover follows the cache. Fails, retryably, while the cache has
    /// never been connected; a commit fails the same way while it is between servers.
    pub fn db<D: crate::model::Database>(&self) -> Result<crate::model::db::Db<D>, Error> {
        crate::model::db::Db::following(self.client.clone(), self.schema.clone())
    }

    /// Runs a transaction over the cache's connection and waits, at most `timeout`,
    /// until the cache shows its effects (read-your-writes): inserted rows present,
    /// rows updated, mutated or deleted by `_uuid` as the transaction left them. An
    /// update, mutation or delete by `_uuid` the server counted no row for (another
    /// client deleted it first) is not waited for (its count, 0, is in the results); nor
    /// is a row it changed that the cache held before and that another client deleted
    /// after it. Not
    /// sent because the cache was between servers, it is sent once the cache has one,
    /// within `timeout` (one whose outcome is unknown is not sent again).
    ///
    /// The order, on any runtime: when this returns, the events of the update that
    /// showed the transaction are in every event stream (typed and untyped), so a
    /// caller that reads its streams next finds its own changes there; and a reader
    /// of any stream that sees an event finds the snapshot at least as new. A
    /// transaction that succeeded but whose effects did not show in time is an error
    /// saying so (its results are lost to the caller: read the cache again):
    /// [`ErrorKind::HeldBack`](crate::ErrorKind::HeldBack) when a lossless stream's
    /// reader is behind.
    pub async fn transact_and_wait(
        &self,
        operations: &[Operation],
        timeout: Duration,
    ) -> Result<Vec<OperationResult>, Error> {
        let deadline = tokio::time::Instant::now() + timeout;
        let before = self.snapshot();
        let (results, mark) = self
            .send_by(deadline, || async {
                let client = self.client().ok_or_else(Error::cache_not_connected)?;
                let results = client.transact(&self.database, operations).await?;
                Ok((results, client.note_mark()))
            })
            .await?;
        match self.wait_handled(mark, deadline).await {
            Handled::Shown => return Ok(results),
            Handled::TimedOut => {
                return Err(self.not_shown(&Expected::since(operations, &results, &before), timeout))
            }
            Handled::Failover => {}
        }
        let expected = Expected::since(operations, &results, &before);
        self.wait_expected(&expected, left(deadline)).await?;
        Ok(results)
    }

    /// Waits until the cache shows what `operations` did, given their `results`; the
    /// first contents that show it (the cache's may be newer by the time it returns:
    /// these need not be read and checked again).
    pub async fn wait_shown(
        &self,
        operations: &[Operation],
        results: &[OperationResult],
        timeout: Duration,
    ) -> Result<Arc<Snapshot>, Error> {
        self.wait_expected(&Expected::new(operations, results), timeout)
            .await
    }

    /// [`Cache::wait_shown`] for a transaction sent after the cache's contents were
    /// `before`: a row they held that the transaction updated or mutated and that is
    /// gone since was deleted after it by someone else, which ends the wait for that
    /// row at once (see [`Expected::since`]).
    pub async fn wait_shown_since(
        &self,
        operations: &[Operation],
        results: &[OperationResult],
        before: &Snapshot,
        timeout: Duration,
    ) -> Result<Arc<Snapshot>, Error> {
        self.wait_expected(&Expected::since(operations, results, before), timeout)
            .await
    }

    /// Waits until the cache shows `expected`.
    async fn wait_expected(
        &self,
        expected: &Expected,
        timeout: Duration,
    ) -> Result<Arc<Snapshot>, Error> {
        let deadline = tokio::time::Instant::now() + timeout;
        // The contents that first show it, then their events in every stream: a
        // caller that reads its streams after the wait finds its own events there.
        let shown = self
            .reader
            .first_where(timeout, |s| expected.shown_in(s))
            .await;
        if let Some(shown) = shown {
            let seq = shown.seq();
            let mut d = self.delivered.clone();
            let reached = tokio::time::timeout_at(deadline, d.wait_for(|v| *v >= seq)).await;
            if matches!(reached, Ok(Ok(_))) {
                return Ok(shown);
            }
        }
        Err(self.not_shown(expected, timeout))
    }

    /// Why a transaction's effects were not shown within `timeout`: a stream's reader
    /// held the cache back, or what is still missing.
    fn not_shown(&self, expected: &Expected, timeout: Duration) -> Error {
        if let Some((stream, for_)) = self.held.now() {
            Error::held_back(format!(
                "the transaction committed but the cache did not show it within {timeout:?}: \
                 the cache has been waiting {for_:.1?} for the reader of {stream}, which is \
                 behind, and applies no update until it reads (read it, drop it, or subscribe \
                 with Delivery::Bounded so that it never holds the cache back)"
            ))
        } else {
            Error::protocol(format!(
                "the transaction committed but the cache did not show it within {timeout:?} (still missing: {})",
                expected.missing(&self.snapshot(), 3).join("; ")
            ))
        }
    }

    /// Waits until `predicate` holds for the cache's contents (read-your-writes: wait
    /// for the row a transaction inserted or changed), at most `timeout`.
    pub async fn wait_for(&self, timeout: Duration, predicate: impl Fn(&Snapshot) -> bool) -> bool {
        self.reader.wait_for(timeout, predicate).await
    }
}
