//! Writing what a key wants: diff its desired rows against a snapshot of the NB
//! ([`planner::Planner`], pure) and send the result as one transaction over the cache's
//! connection, waiting until the cache shows it so that the key's next reconcile reads
//! its own writes.

pub mod nb;
pub mod plan;
pub mod planner;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use ovsdb_proto::cache::{
    Cache, CacheConfig, CacheEvents, CachedRow, Expected, IndexedRows, RowChange, Snapshot,
};
use ovsdb_proto::{Operation, Uuid};

pub use nb::NbIndexes;
pub use plan::{Plan, SeenRows};
pub use planner::PlanError;
use planner::WRITTEN_BY_OVN;

use crate::topology::desired::{Fragments, Owner, Scope};
use crate::topology::Desired;

/// Where a write's time went, for netconnectd's debug log: the plan (the key's rows
/// read, compared), the wait for what the key waits on (netconnectd's save of the
/// world's allocations), the transaction (serialized unless it was while waiting, sent,
/// answered), the wait until the cache showed it, what the reconciler remembers.
struct Took {
    last: Instant,
    planned: Duration,
    waited: Duration,
    transaction: Duration,
    shown: Duration,
}

impl Took {
    fn start() -> Took {
        Took {
            last: Instant::now(),
            planned: Duration::ZERO,
            waited: Duration::ZERO,
            transaction: Duration::ZERO,
            shown: Duration::ZERO,
        }
    }

    /// The time since the last lap (or the start).
    fn lap(&mut self) -> Duration {
        let now = Instant::now();
        let since = now - self.last;
        self.last = now;
        since
    }
}

/// What the reconciler remembers of a key with fragments after applying it.
#[derive(Debug, Default)]
struct KeyMemo {
    /// Each fragment's fingerprint and rows as the cache showed them then (a row
    /// changed or deleted since, by anyone, is no longer the one in the cache), by the
    /// hash of its label ([`Fragment::key`](crate::topology::desired::Fragment::key)).
    fragments: ByLabel<FragmentMemo>,
    /// The rows of every fragment in `fragments`: what a plan keeps when the key skips
    /// them all. Edited as fragments come and go (a node added puts in its few rows),
    /// never gathered again from the fragments' rows.
    fragment_rows: Arc<UuidSet>,
    /// The key's rows in its owner indexes then: while they are the same entries
    /// ([`KeyRows::untouched_since`]), none of them changed (its rows outside them, of
    /// tables without owner stamps, are looked at one by one).
    rows: KeyRows,
    /// Those of `rows` in no fragment (a network's router, its switches): with the
    /// rows of the fragments built again, all a plan must look at while `rows` are
    /// untouched. Edited by what changed since the last time, like `fragment_rows`.
    others: Arc<UuidSet>,
    /// How many of `fragments` have a row outside the owner indexes: while `rows` are
    /// untouched and there is none, every fragment is as left without a walk through
    /// them (500 per network at 500 nodes).
    outside: usize,
}

/// A map by fragment label hash ([`Fragment::key`](crate::topology::desired::Fragment::key)).
type ByLabel<V> = HashMap<u64, V, BuildLabelHasher>;

/// A set of fragment label hashes.
type LabelSet = HashSet<u64, BuildLabelHasher>;

/// Builds [`LabelHasher`]s.
type BuildLabelHasher = std::hash::BuildHasherDefault<LabelHasher>;

/// Hashes a label hash to itself: it is a SipHash already, and a node add looks up
/// each of 500 nodes in each of 500 networks' memos.
#[derive(Default)]
struct LabelHasher(u64);

impl std::hash::Hasher for LabelHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not used by `u64` keys; kept correct for any other.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A fragment's fingerprint, and its rows as the cache showed them.
#[derive(Debug, Clone)]
struct FragmentMemo {
    fingerprint: u64,
    /// Every row of it is among the key's rows in its owner indexes (while those are
    /// untouched, so are its rows).
    inside: bool,
    rows: Arc<[MemoRow]>,
    /// A base fragment's rows by table and identity: when it is skipped, the rows
    /// built now refer to them by these.
    identities: Option<Arc<KeptIdentities>>,
}

/// The rows of a skipped base fragment by table and identity.
pub type KeptIdentities = HashMap<&'static str, HashMap<String, Uuid>>;

impl FragmentMemo {
    fn new(fingerprint: u64, rows: Vec<MemoRow>) -> FragmentMemo {
        FragmentMemo {
            fingerprint,
            inside: rows.iter().all(|r| r.inside),
            rows: rows.into(),
            identities: None,
        }
    }

    /// The same fragment, its rows now `rows` (the same rows, in other versions).
    fn with_rows(&self, rows: Vec<MemoRow>) -> FragmentMemo {
        FragmentMemo {
            identities: self.identities.clone(),
            ..FragmentMemo::new(self.fingerprint, rows)
        }
    }

    /// Its rows' uuids.
    fn uuids(&self) -> impl Iterator<Item = Uuid> + '_ {
        self.rows.iter().map(|r| r.uuid)
    }
}

/// A row as the cache showed it, held weakly: a version replaced since is not kept
/// alive, and its address is not reused while held.
#[derive(Debug, Clone)]
struct MemoRow {
    table: &'static str,
    uuid: Uuid,
    row: Weak<CachedRow>,
    /// Among the key's rows in its owner indexes (else only in its table).
    inside: bool,
    /// For a row of a table with columns OVN's daemons write ([`WRITTEN_BY_OVN`]), a
    /// digest of its other columns ([`ours_digest`]).
    ours: Option<u64>,
}

impl MemoRow {
    /// Row `row` (`uuid` of `table`), `inside` the key's owner indexes or not.
    fn new(table: &'static str, uuid: Uuid, row: &Arc<CachedRow>, inside: bool) -> MemoRow {
        MemoRow {
            table,
            uuid,
            row: Arc::downgrade(row),
            inside,
            ours: has_columns_ovn_writes(row).then(|| ours_digest(row)),
        }
    }

    /// True when `now` is the version remembered, or one that differs from it only in
    /// columns OVN's daemons write: ovn-northd sets a port's `up` after it is
    /// written, which is no reason to build its fragment again.
    fn is_as_left(&self, now: &Arc<CachedRow>) -> bool {
        plan::is_version(now, &self.row) || self.ours.is_some_and(|d| ours_digest(now) == d)
    }
}

/// A digest of `row`'s columns but those OVN's daemons write: two versions of a row
/// with one digest differ at most in those.
fn ours_digest(row: &CachedRow) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for (column, value) in ours_columns(row) {
        column.hash(&mut h);
        value.hash(&mut h);
    }
    h.finish()
}

/// True when `row`'s table has columns OVN's daemons write ([`WRITTEN_BY_OVN`]).
fn has_columns_ovn_writes(row: &CachedRow) -> bool {
    WRITTEN_BY_OVN.iter().any(|c| row.get(c).is_some())
}

/// `row`'s columns but those OVN's daemons write.
fn ours_columns(row: &CachedRow) -> impl Iterator<Item = (&str, &ovsdb_proto::Datum)> {
    row.iter().filter(|(c, _)| !WRITTEN_BY_OVN.contains(c))
}

/// True when `a` and `b`, versions of a row of a table with columns OVN's daemons
/// write, differ at most in those (ovn-northd sets a port's `up` once it is written).
pub(crate) fn same_but_where_ovn_writes(a: &CachedRow, b: &CachedRow) -> bool {
    has_columns_ovn_writes(a) && ours_columns(a).eq(ours_columns(b))
}

/// The fragments of a key known to be in the NB as built before (none unless the
/// key's rows are exactly as the reconciler left them).
#[derive(Debug, Default)]
pub struct KnownFragments {
    memo: Option<Arc<KeyMemo>>,
    /// The fragments remembered whose rows are no longer as left, by label hash.
    stale: LabelSet,
}

impl Fragments for KnownFragments {
    fn unchanged(&self, key: u64, fingerprint: u64) -> bool {
        let Some(m) = &self.memo else { return false };
        m.fragments
            .get(&key)
            .is_some_and(|f| f.fingerprint == fingerprint)
            && (self.stale.is_empty() || !self.stale.contains(&key))
    }
}

/// The comment a key's transaction ends with: whose rows they are.
fn comment(desired: &Desired) -> Operation {
    Operation::Comment(format!("netconnect: {}", desired.owner))
}

fn memo_key(owner: &Owner, scope: &Scope) -> String {
    format!("{owner}|{scope:?}")
}

/// A key's rows in one snapshot (its scope in every table), each with its table: the
/// entries of the owner indexes that hold them, shared with the snapshot, so that
/// reading them copies nothing (a network's key has about 1500 rows, read twice per
/// reconcile) and two reads tell in constant time which tables' rows are untouched.
/// Read once per snapshot and shared by the planner, the fragment memo and the checks
/// of who changed what.
#[derive(Clone, Debug, Default)]
pub struct KeyRows {
    /// In [`nb::KeyPart::label`] order.
    parts: Vec<nb::KeyPart>,
    len: usize,
}

/// One of a key's rows.
#[derive(Clone, Copy, Debug)]
pub struct KeyRow<'a> {
    /// Its address.
    pub uuid: Uuid,
    /// Its table, an index in [`nb::TABLES`].
    pub table: usize,
    /// The row.
    pub row: &'a Arc<CachedRow>,
}

impl KeyRows {
    /// The rows of the key of `owner` and `scope` in `snap`.
    pub fn read(snap: &Snapshot, nb: &NbIndexes, owner: &Owner, scope: &Scope) -> KeyRows {
        let parts = nb.key_parts(snap, owner, scope);
        let len = parts.iter().map(|p| p.rows.len()).sum();
        KeyRows { parts, len }
    }

    /// The key's row at `uuid`, if it is one.
    pub fn get(&self, uuid: &Uuid) -> Option<KeyRow<'_>> {
        self.locate(uuid).map(|(_, r)| r)
    }

    /// True when the row at `uuid` is one of the key's.
    pub fn contains(&self, uuid: &Uuid) -> bool {
        self.parts.iter().any(|p| p.rows.get(uuid).is_some())
    }

    /// The rows, table by table (each table's in uuid order).
    pub fn iter(&self) -> impl Iterator<Item = KeyRow<'_>> {
        self.parts.iter().flat_map(|p| {
            p.rows.iter().map(|(uuid, row)| KeyRow {
                uuid: *uuid,
                table: p.table,
                row,
            })
        })
    }

    /// The index entries holding the rows.
    pub fn parts(&self) -> impl Iterator<Item = &nb::KeyPart> {
        self.parts.iter()
    }

    /// How many rows the key has.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the key has no rows.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when every part of these rows is the same entry as in `earlier` (a read
    /// of the same key): none of the rows changed since.
    pub fn untouched_since(&self, earlier: &KeyRows) -> bool {
        self.parts.len() == earlier.parts.len()
            && self
                .parts
                .iter()
                .zip(&earlier.parts)
                .all(|(a, b)| a.label() == b.label() && a.rows.same(&b.rows))
    }

    /// The key's row at `uuid`, with the position of its part, if it is one.
    pub fn locate(&self, uuid: &Uuid) -> Option<(usize, KeyRow<'_>)> {
        self.parts.iter().enumerate().find_map(|(at, p)| {
            let row = p.rows.get(uuid)?;
            Some((
                at,
                KeyRow {
                    uuid: *uuid,
                    table: p.table,
                    row,
                },
            ))
        })
    }

    /// What changed from these rows to `later` (a later read of the same key), part by
    /// part (parts matched by label, a part only one read has beside an empty one),
    /// each part's shared structure passed over ([`IndexedRows::diff`]): a part
    /// untouched since costs one comparison. A row that moved from one part to another
    /// is removed from the first and added to the second.
    fn changes<'a>(&'a self, later: &'a KeyRows) -> impl Iterator<Item = RowChange<'a>> {
        self.side_by_side(later).flat_map(|(x, y)| x.diff(y))
    }

    /// [`KeyRows::changes`], a row in another version reported changed without its
    /// columns compared ([`IndexedRows::versions_changed`]).
    fn versions_changed<'a>(&'a self, later: &'a KeyRows) -> impl Iterator<Item = RowChange<'a>> {
        self.side_by_side(later)
            .flat_map(|(x, y)| x.versions_changed(y))
    }

    /// The parts of these rows and of `later`, matched by label (a part only one read
    /// has beside an empty one).
    fn side_by_side<'a>(
        &'a self,
        later: &'a KeyRows,
    ) -> impl Iterator<Item = (&'a IndexedRows, &'a IndexedRows)> {
        static EMPTY: std::sync::LazyLock<IndexedRows> = std::sync::LazyLock::new(Default::default);
        let (mut a, mut b) = (self.parts.iter().peekable(), later.parts.iter().peekable());
        std::iter::from_fn(move || {
            let (x, y) = match (a.peek(), b.peek()) {
                (None, None) => return None,
                (Some(x), Some(y)) if x.label() == y.label() => {
                    (a.next().map(|p| &p.rows), b.next().map(|p| &p.rows))
                }
                (Some(x), Some(y)) if x.label() < y.label() => (a.next().map(|p| &p.rows), None),
                (Some(_), None) => (a.next().map(|p| &p.rows), None),
                _ => (None, b.next().map(|p| &p.rows)),
            };
            Some((x.unwrap_or(&EMPTY), y.unwrap_or(&EMPTY)))
        })
    }
}

/// Row addresses in order (as integers), for looking up a few thousand of them
/// without hashing each.
#[derive(Clone, Debug, Default)]
pub struct UuidSet(Vec<u128>);

impl UuidSet {
    /// True when `uuid` is in the set.
    pub fn contains(&self, uuid: &Uuid) -> bool {
        self.position(uuid).is_some()
    }

    fn position(&self, uuid: &Uuid) -> Option<usize> {
        self.0.binary_search(&uuid.as_u128()).ok()
    }

    /// Membership tests of addresses asked in ascending order, each searching only
    /// past the one asked before.
    pub fn ascending(&self) -> Ascending<'_> {
        Ascending(&self.0)
    }

    /// The addresses, in order.
    pub fn iter(&self) -> impl Iterator<Item = Uuid> + '_ {
        self.0.iter().map(|&u| Uuid::from_u128(u))
    }

    /// How many addresses the set holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// This set without the addresses of `removed` and with those of `added`: one
    /// walk through each (all three are in order).
    fn edited(&self, removed: &UuidSet, added: &UuidSet) -> UuidSet {
        let mut gone = removed.0.iter().peekable();
        let mut new = added.0.iter().peekable();
        let mut out = Vec::with_capacity(self.0.len() + added.0.len());
        for &x in &self.0 {
            while gone.next_if(|&&g| g < x).is_some() {}
            if gone.next_if_eq(&&x).is_some() {
                continue;
            }
            while let Some(&a) = new.next_if(|&&a| a < x) {
                out.push(a);
            }
            new.next_if_eq(&&x);
            out.push(x);
        }
        out.extend(new);
        UuidSet(out)
    }
}

impl FromIterator<Uuid> for UuidSet {
    fn from_iter<I: IntoIterator<Item = Uuid>>(iter: I) -> UuidSet {
        let mut v: Vec<u128> = iter.into_iter().map(|u| u.as_u128()).collect();
        v.sort_unstable();
        v.dedup();
        UuidSet(v)
    }
}

/// [`UuidSet::ascending`]: what is left of the set past the last address asked.
#[derive(Clone, Copy, Debug)]
pub struct Ascending<'a>(&'a [u128]);

impl Ascending<'_> {
    /// True when `uuid` is in the set; `uuid` must not be below one asked before.
    pub fn contains(&mut self, uuid: &Uuid) -> bool {
        let x = uuid.as_u128();
        let past = self.0.partition_point(|&v| v < x);
        self.0 = &self.0[past..];
        self.0.first() == Some(&x)
    }
}

/// The rows a plan leaves as they are: those of the fragments the key skipped, known
/// as the rows of every fragment remembered less those of the fragments remembered and
/// not skipped now (built again, or no longer built). A node added skips all of its
/// network's fragments but its own: the few rows of the others are all that is read.
#[derive(Clone, Debug, Default)]
pub struct KeptRows {
    all: Arc<UuidSet>,
    except: UuidSet,
    /// When the key's rows are known to be those remembered, untouched since: the
    /// rows not kept (those in no fragment, and those of the fragments built again),
    /// the only ones a plan needs to look at.
    others: Option<UuidSet>,
    /// The rows of the skipped base fragment, by table and identity.
    base: Option<Arc<KeptIdentities>>,
}

impl KeptRows {
    /// The row of the skipped base fragment of `table` known as `identity`.
    pub fn base_row(&self, table: &str, identity: &str) -> Option<Uuid> {
        self.base.as_ref()?.get(table)?.get(identity).copied()
    }

    /// The key's rows that are not kept, when they are known without a look at the
    /// others ([`KeptRows`]).
    pub fn others(&self) -> Option<&UuidSet> {
        self.others.as_ref()
    }

    /// True when the row at `uuid` is kept.
    pub fn contains(&self, uuid: &Uuid) -> bool {
        self.all.contains(uuid) && !self.except.contains(uuid)
    }

    /// Membership tests of addresses asked in ascending order ([`UuidSet::ascending`]).
    pub fn ascending(&self) -> KeptAscending<'_> {
        KeptAscending {
            all: self.all.ascending(),
            except: self.except.ascending(),
        }
    }
}

/// [`KeptRows::ascending`].
#[derive(Clone, Copy, Debug)]
pub struct KeptAscending<'a> {
    all: Ascending<'a>,
    except: Ascending<'a>,
}

impl KeptAscending<'_> {
    /// True when `uuid` is kept; `uuid` must not be below one asked before.
    pub fn contains(&mut self, uuid: &Uuid) -> bool {
        self.all.contains(uuid) && !self.except.contains(uuid)
    }
}

/// `f` of the current version of row `uuid` of `table` and whether it is among the
/// key's `rows`; else it is looked up in its table (a row without its owner's stamp is
/// not among them).
fn with_current<R>(
    rows: &KeyRows,
    snap: &Snapshot,
    table: &str,
    uuid: &Uuid,
    f: impl FnOnce(Option<&Arc<CachedRow>>, bool) -> R,
) -> R {
    match rows.get(uuid) {
        Some(r) => f(Some(r.row), true),
        None => f(snap.get(table, uuid).as_ref(), false),
    }
}

/// True when the key's rows went from `before` to `after` (both in uuid order) only by
/// the operations `ops` (whose results are `results`): every row new is one they
/// inserted, every row changed is one they updated or mutated by uuid and changed only
/// in the columns they wrote, and no more rows are gone than the plan deleted
/// (explicitly or by dropping their last reference: `deleted`). What another party
/// wrote meanwhile (while the transaction was in flight) to a row the operations
/// inserted, or to a column they wrote, is not told from their own writes.
fn changed_only_by(
    before: &KeyRows,
    after: &KeyRows,
    ops: &[Operation],
    results: &[ovsdb_proto::OperationResult],
    deleted: usize,
) -> bool {
    let mut inserted: HashSet<Uuid> = HashSet::new();
    // The columns written, by row.
    let mut written: HashMap<Uuid, Vec<&str>> = HashMap::new();
    for (op, r) in ops.iter().zip(results) {
        let (conditions, columns): (_, Vec<&str>) = match op {
            Operation::Insert { .. } => {
                inserted.extend(r.uuid());
                continue;
            }
            Operation::Update {
                conditions, row, ..
            } => (conditions, row.keys().map(String::as_str).collect()),
            Operation::Mutate {
                conditions,
                mutations,
                ..
            } => (
                conditions,
                mutations.iter().map(|m| m.column.as_str()).collect(),
            ),
            _ => continue,
        };
        for uuid in conditions
            .iter()
            .filter(|c| c.column == "_uuid")
            .filter_map(|c| c.value.as_scalar().and_then(ovsdb_proto::Atom::as_uuid))
        {
            written.entry(uuid).or_default().extend(&columns);
        }
    }
    let mut gone = 0;
    // Only the columns not written are compared (the cluster router's sets are
    // mutated on every node added), and not those OVN writes (which no plan compares
    // either); another row is changed only if its versions differ.
    for change in before.versions_changed(after) {
        match change {
            RowChange::Added(u, _) if !inserted.contains(u) => return false,
            RowChange::Changed { uuid, old, new } => {
                let ours = written.get(uuid).map_or(&[][..], Vec::as_slice);
                let compared = |c: &str| !ours.contains(&c) && !WRITTEN_BY_OVN.contains(&c);
                if old.changed_columns(new, compared).next().is_some() {
                    return false;
                }
            }
            RowChange::Added(..) => {}
            RowChange::Removed(..) => gone += 1,
        }
    }
    gone <= deleted
}

/// Fragment `memo` with its rows as `now` shows them, if `planned` (a key's rows and
/// the snapshot a plan was made in) showed them as remembered: its rows as the plan
/// that led to `now` left them. None when one was not as remembered (the fragment is
/// then built again next time) or is gone.
fn as_planned_now(
    memo: &FragmentMemo,
    planned: (&KeyRows, &Snapshot),
    now: (&KeyRows, &Snapshot),
) -> Option<FragmentMemo> {
    let mut rows = Vec::with_capacity(memo.rows.len());
    for r in memo.rows.iter() {
        let as_remembered = with_current(planned.0, planned.1, r.table, &r.uuid, |row, _| {
            row.is_some_and(|row| r.is_as_left(row))
        });
        if !as_remembered {
            return None;
        }
        rows.push(with_current(
            now.0,
            now.1,
            r.table,
            &r.uuid,
            |row, inside| Some(MemoRow::new(r.table, r.uuid, row?, inside)),
        )?);
    }
    Some(memo.with_rows(rows))
}

/// The key's rows in no fragment, `now`: those of `was` (a read of the same key,
/// whose rows in no fragment were `others`) edited by what changed between the two
/// reads and by the rows that joined fragments (`added`) or left them (`removed`), so
/// that the fragments' rows are then `fragment_rows`.
fn others_after(
    was: &KeyRows,
    others: &UuidSet,
    now: &KeyRows,
    fragment_rows: &UuidSet,
    removed: &UuidSet,
    added: &UuidSet,
) -> UuidSet {
    let (mut gone, mut new) = (Vec::new(), Vec::new());
    for change in was.versions_changed(now) {
        match change {
            RowChange::Added(u, _) => new.push(*u),
            RowChange::Removed(u, _) => gone.push(*u),
            RowChange::Changed { .. } => {}
        }
    }
    // Rows that joined a fragment are no longer others; rows whose fragment was
    // forgotten are, while they exist.
    gone.extend(added.iter());
    new.extend(
        removed
            .iter()
            .filter(|u| !added.contains(u) && now.contains(u)),
    );
    new.retain(|u| !fragment_rows.contains(u));
    others.edited(&gone.into_iter().collect(), &new.into_iter().collect())
}

/// From how many rows a key's desired rows, and the snapshot its transaction was
/// planned in, are freed apart ([`free_apart`]).
pub const FREED_APART: usize = 256;

/// Frees `v` on a blocking thread, off the caller's path: a network added at 500 nodes
/// (1519 rows) spent 5.7 ms of its 80 ms reconcile after its rows were shown freeing
/// the snapshot it was planned in (3.7 ms: the last holder of the versions its
/// transaction replaced) and its desired rows (2 ms). Dropped at once outside a Tokio
/// runtime.
pub fn free_apart<T: Send + 'static>(v: T) {
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn_blocking(move || drop(v));
    }
}

/// True when two reads of a key's rows hold the same rows (a row replaced by an
/// equal version counts as the same).
fn same_rows(a: &KeyRows, b: &KeyRows) -> bool {
    a.len() == b.len() && a.changes(b).next().is_none()
}

/// Why a key was not reconciled.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The cache is not synced with a usable server.
    #[error("the NB cache is not connected")]
    NotConnected,
    /// The key's rows cannot be built from the inputs.
    #[error(transparent)]
    Build(#[from] crate::topology::BuildError),
    /// The key's rows cannot be planned (a conflict, a missing dependency, …).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The transaction failed, or its outcome is unknown.
    #[error("transaction failed: {0}")]
    Nb(#[from] ovsdb_proto::Error),
    /// The key's previous transaction may have written rows the cache does not show
    /// yet; nothing was sent, so that they are not written twice.
    #[error(
        "the cache did not show the outcome of the previous transaction within {0:?}; nothing sent"
    )]
    Unsettled(Duration),
}

impl ReconcileError {
    /// True when trying again later may succeed without any input changing.
    pub fn is_transient(&self) -> bool {
        match self {
            ReconcileError::NotConnected => true,
            ReconcileError::Build(_) => false,
            ReconcileError::Plan(PlanError::MissingDependency { .. }) => true,
            ReconcileError::Plan(_) => false,
            ReconcileError::Nb(_) => true,
            ReconcileError::Unsettled(_) => true,
        }
    }
}

/// Applies desired rows to the NB through a cache.
pub struct Reconciler {
    cache: Arc<Cache>,
    nb: NbIndexes,
    /// How long to wait for the cache to show a transaction.
    pub wait: Duration,
    transactions: AtomicU64,
    rows_written: AtomicU64,
    /// The planner for the schema last seen.
    planner: std::sync::Mutex<Option<Arc<planner::Planner>>>,
    /// What was applied of keys with fragments, by owner and scope.
    memo: Mutex<HashMap<String, Arc<KeyMemo>>>,
    /// Keys whose last transaction may have written what the cache does not show yet.
    unsettled: Mutex<HashMap<String, Unsettled>>,
}

/// A transaction whose effects the cache may not show yet: the key's next plan waits
/// until they show, or until the cache synced on a later connection (whose initial
/// contents hold whatever committed), so that a retry never writes the same rows twice.
#[derive(Debug, Clone)]
struct Unsettled {
    /// The cache's connection count when the transaction failed.
    connections: u64,
    /// When it committed: what the cache must show of it.
    committed: Option<Expected>,
}

impl Reconciler {
    /// Starts a cache of the NB from `config` (its remotes, TLS, leader-only) with the
    /// reconciler's indexes, and returns a reconciler over it once it has synced, with
    /// the cache's events; an error naming the remotes when no server was usable within
    /// `wait`.
    pub async fn connect(
        mut config: CacheConfig,
        wait: Duration,
    ) -> Result<(Reconciler, CacheEvents), String> {
        let remotes: Vec<String> = config.remotes.iter().map(ToString::to_string).collect();
        let nb = NbIndexes::register(&mut config);
        let (cache, events) = Cache::start(config);
        let cache = Arc::new(cache);
        if tokio::time::timeout(wait, cache.wait_until_ready())
            .await
            .is_err()
        {
            return Err(format!(
                "no usable Northbound server at {} within {wait:?}",
                remotes.join(",")
            ));
        }
        Ok((Reconciler::new(cache, nb), events))
    }

    /// A reconciler over `cache`, whose config had `nb` registered.
    pub fn new(cache: Arc<Cache>, nb: NbIndexes) -> Reconciler {
        Reconciler {
            cache,
            nb,
            wait: Duration::from_secs(30),
            transactions: AtomicU64::new(0),
            rows_written: AtomicU64::new(0),
            planner: std::sync::Mutex::new(None),
            memo: Mutex::new(HashMap::new()),
            unsettled: Mutex::new(HashMap::new()),
        }
    }

    /// The cache.
    pub fn cache(&self) -> &Arc<Cache> {
        &self.cache
    }

    /// The cache's indexes.
    pub fn indexes(&self) -> &NbIndexes {
        &self.nb
    }

    /// The fragments of the key of `owner` and `scope` that need not be built again:
    /// those applied before whose rows are all as the reconciler left them (a fragment
    /// with a row changed since, by anyone, is built again; another key attaching its
    /// rows to a node's switch makes that node's fragment unknown, not the others).
    /// The key's rows outside fragments are built and compared every time; a network's
    /// router and switches are its base fragment
    /// ([`Desired::base_fragment`](crate::topology::desired::Desired::base_fragment)),
    /// known like the others: a write of the key's own that only put elements into
    /// their sets or took some out leaves them known.
    pub fn known(&self, owner: &Owner, scope: &Scope) -> KnownFragments {
        let Some(m) = self
            .memo
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&memo_key(owner, scope))
            .cloned()
        else {
            return KnownFragments::default();
        };
        let snap = self.cache.snapshot();
        // Most often none of the key's rows changed since: its index entries are the
        // ones remembered, and only the rows outside them need a look. Else each
        // remembered row must still be the version there.
        let now = KeyRows::read(&snap, &self.nb, owner, scope);
        let untouched = now.untouched_since(&m.rows);
        let as_left = |r: &MemoRow| {
            (untouched && r.inside)
                || with_current(&now, &snap, r.table, &r.uuid, |now, _| {
                    now.is_some_and(|now| r.is_as_left(now))
                })
        };
        // While the indexes are untouched, a fragment all of whose rows are in them is
        // as left without a look at its rows.
        let as_left_whole =
            |f: &FragmentMemo| (untouched && f.inside) || f.rows.iter().all(as_left);
        // A fragment with a row changed since is built again; the others are known.
        let stale = match untouched && m.outside == 0 {
            true => LabelSet::default(),
            false => m
                .fragments
                .iter()
                .filter(|(_, f)| !as_left_whole(f))
                .map(|(key, _)| *key)
                .collect(),
        };
        KnownFragments {
            memo: Some(m),
            stale,
        }
    }

    fn planner(&self) -> Result<Arc<planner::Planner>, ReconcileError> {
        let schema = self.cache.schema().ok_or(ReconcileError::NotConnected)?;
        let mut p = self.planner.lock().unwrap_or_else(|e| e.into_inner());
        Ok(match &*p {
            Some(pl) if Arc::ptr_eq(pl.schema(), &schema) || **pl.schema() == *schema => pl.clone(),
            _ => {
                let pl = Arc::new(planner::Planner::new(schema));
                *p = Some(pl.clone());
                pl
            }
        })
    }

    /// The rows of the fragments `desired` skipped (to be kept as they are).
    fn kept_rows(&self, desired: &Desired, rows: &KeyRows) -> KeptRows {
        if desired.fragments().iter().all(|f| !f.skipped) {
            return KeptRows::default();
        }
        let memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
        let Some(m) = memo.get(&memo_key(&desired.owner, &desired.scope)) else {
            return KeptRows::default();
        };
        // The remembered fragments not skipped now: those built again, then (rarely)
        // those the key no longer builds.
        let mut except = Vec::new();
        let mut present = 0;
        let mut base = None;
        for f in desired.fragments() {
            if let Some(mf) = m.fragments.get(&f.key) {
                present += 1;
                if !f.skipped {
                    except.extend(mf.uuids());
                } else if f.base {
                    base = mf.identities.clone();
                }
            }
        }
        if m.fragments.len() != present {
            let labels: LabelSet = desired.fragments().iter().map(|f| f.key).collect();
            except.extend(
                m.fragments
                    .iter()
                    .filter(|(k, _)| !labels.contains(k))
                    .flat_map(|(_, f)| f.uuids()),
            );
        }
        let except: UuidSet = except.into_iter().collect();
        // The key's rows untouched since they were remembered: those not kept are
        // known by their uuids.
        let others = rows
            .untouched_since(&m.rows)
            .then(|| m.others.edited(&UuidSet::default(), &except));
        KeptRows {
            all: m.fragment_rows.clone(),
            except,
            others,
            base,
        }
    }

    /// What reconciling `desired` would write now.
    pub fn plan(&self, desired: &Desired) -> Result<Plan, ReconcileError> {
        let snap = self.cache.snapshot();
        let rows = KeyRows::read(&snap, &self.nb, &desired.owner, &desired.scope);
        self.plan_in(desired, &snap, &rows)
    }

    /// The plan of `desired` in `snap`, where the key's rows are `rows`.
    fn plan_in(
        &self,
        desired: &Desired,
        snap: &Snapshot,
        rows: &KeyRows,
    ) -> Result<Plan, ReconcileError> {
        let planner = self.planner()?;
        let keep = self.kept_rows(desired, rows);
        let mut plan = planner.plan_keeping(desired, snap, &self.nb, rows, &keep)?;
        plan.incomplete = desired.incomplete.clone();
        Ok(plan)
    }

    /// Writes what `desired` needs, in one transaction (none when nothing differs), and
    /// waits until the cache shows it.
    pub async fn apply(&self, desired: &Desired) -> Result<Plan, ReconcileError> {
        self.apply_when(desired, std::future::ready(())).await
    }

    /// [`Reconciler::apply`], going no further than the plan before `ready` completes,
    /// and returning no error before it either (netconnectd plans a world's keys while
    /// it saves the world's allocations); the plan is made again if the cache moved
    /// meanwhile.
    pub async fn apply_when(
        &self,
        desired: &Desired,
        ready: impl std::future::Future<Output = ()>,
    ) -> Result<Plan, ReconcileError> {
        if let Err(e) = self.settle(desired).await {
            ready.await;
            return Err(e);
        }
        let mut took = Took::start();
        let mut planned = self.cache.snapshot();
        let mut before = KeyRows::read(&planned, &self.nb, &desired.owner, &desired.scope);
        let mut plan = self.plan_or_forget(desired, &planned, &before);
        took.planned = took.lap();
        // Planned again only if it waited and the cache moved meanwhile: a key that
        // need not wait goes on as planned, as `apply` always did. One that waits has
        // its transaction serialized meanwhile.
        let mut ready = std::pin::pin!(ready);
        let mut prepared = None;
        if (&mut ready).now_or_never().is_none() {
            prepared = self.prepare(&mut plan, desired);
            ready.await;
            took.waited = took.lap();
            let now = self.cache.snapshot();
            if !Arc::ptr_eq(&now, &planned) {
                planned = now;
                before = KeyRows::read(&planned, &self.nb, &desired.owner, &desired.scope);
                plan = self.plan_or_forget(desired, &planned, &before);
                prepared = None;
            }
        }
        let mut plan = plan?;
        if plan.is_empty() {
            // The rows are read again only if the cache moved while planning.
            let now = self.cache.snapshot();
            let (rows, own) = if Arc::ptr_eq(&now, &planned) {
                (before, true)
            } else {
                let rows = KeyRows::read(&now, &self.nb, &desired.owner, &desired.scope);
                let own = same_rows(&before, &rows);
                (rows, own)
            };
            if own {
                plan.seen = Some(SeenRows::of(&rows));
                self.remember(desired, &plan, &[], &rows, &now, None);
            } else {
                self.forget(desired);
            }
            return Ok(plan);
        }
        // The operations are lent to the transaction (with a comment after them) and
        // given back to the plan: a key's first transaction holds all its rows.
        let mut ops = std::mem::take(&mut plan.operations);
        ops.push(comment(desired));
        let prepared = prepared.unwrap_or_else(|| self.cache.prepare(&ops));
        self.transactions.fetch_add(1, Ordering::Relaxed);
        let connections = self.cache.stats().connections();
        let sent = match prepared {
            Ok(prepared) => self.cache.transact_prepared(&prepared).await,
            Err(e) => Err(e),
        };
        took.transaction = took.lap();
        let results = match sent {
            Ok(results) => {
                self.rows_written.fetch_add(
                    (plan.inserted.len() + plan.updated.len() + plan.deleted.len()) as u64,
                    Ordering::Relaxed,
                );
                results
            }
            Err(e) => {
                self.forget(desired);
                if e.is_outcome_unknown() {
                    self.unsettle(desired, connections, None);
                }
                return Err(e.into());
            }
        };
        plan.inserted_uuids = plan
            .inserts
            .iter()
            .map(|at| results.get(*at).and_then(|r| r.uuid()).unwrap_or_default())
            .collect();
        match self.cache.wait_shown(&ops, &results, self.wait).await {
            Ok(snap) => {
                took.shown = took.lap();
                // The first contents that show the transaction (the wait checked it
                // there): the key's rows are read where they were first written.
                let now = KeyRows::read(&snap, &self.nb, &desired.owner, &desired.scope);
                if changed_only_by(&before, &now, &ops, &results, plan.deleted.len()) {
                    plan.seen = Some(SeenRows::of(&now));
                    self.remember(
                        desired,
                        &plan,
                        &results,
                        &now,
                        &snap,
                        Some((&before, &planned)),
                    );
                } else {
                    self.forget(desired);
                }
                ops.pop();
                plan.operations = ops;
                // The snapshot planned in may be the last holder of the versions (and
                // index entries) the transaction replaced: they are freed apart.
                if plan.inserted.len() + plan.updated.len() + plan.deleted.len() >= FREED_APART {
                    free_apart((planned, before));
                }
                let remembered = took.lap();
                tracing::debug!(
                    planned = ?took.planned,
                    waited = ?took.waited,
                    transaction = ?took.transaction,
                    shown = ?took.shown,
                    ?remembered,
                    "applied"
                );
                Ok(plan)
            }
            Err(e) => {
                self.forget(desired);
                self.unsettle(desired, connections, Some(Expected::new(&ops, &results)));
                Err(e.into())
            }
        }
    }

    /// The transaction of `plan` (its operations and [`comment`]) serialized; `None`
    /// for no plan or an empty one.
    fn prepare(
        &self,
        plan: &mut Result<Plan, ReconcileError>,
        desired: &Desired,
    ) -> Option<Result<ovsdb_proto::Prepared, ovsdb_proto::Error>> {
        let plan = plan.as_mut().ok().filter(|p| !p.is_empty())?;
        plan.operations.push(comment(desired));
        let prepared = self.cache.prepare(&plan.operations);
        plan.operations.pop();
        Some(prepared)
    }

    /// [`Reconciler::plan_in`]; a plan that kept a base fragment's rows it could not
    /// find (gone, or not remembered as built) is not tried so again: the key's next
    /// reconcile builds every fragment.
    fn plan_or_forget(
        &self,
        desired: &Desired,
        snap: &Snapshot,
        rows: &KeyRows,
    ) -> Result<Plan, ReconcileError> {
        let plan = self.plan_in(desired, snap, rows);
        if plan.is_err() && desired.rows().any(|r| r.kept) {
            self.forget(desired);
        }
        plan
    }

    fn unsettle(&self, desired: &Desired, connections: u64, committed: Option<Expected>) {
        self.unsettled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                memo_key(&desired.owner, &desired.scope),
                Unsettled {
                    connections,
                    committed,
                },
            );
    }

    /// Waits, at most [`Reconciler::wait`], until the cache shows what the key's last
    /// transaction may have written (see [`Unsettled`]); an error, with nothing sent,
    /// when it does not.
    async fn settle(&self, desired: &Desired) -> Result<(), ReconcileError> {
        let key = memo_key(&desired.owner, &desired.scope);
        let Some(u) = self
            .unsettled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned()
        else {
            return Ok(());
        };
        let stats = self.cache.stats();
        let settled = self
            .cache
            .wait_for(self.wait, |snap| {
                stats.connections() > u.connections
                    || u.committed.as_ref().is_some_and(|e| e.shown_in(snap))
            })
            .await;
        if !settled {
            return Err(ReconcileError::Unsettled(self.wait));
        }
        self.unsettled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        Ok(())
    }

    /// After `desired` was applied by `plan` (whose operations gave `results`), with
    /// nothing but its own changes in the cache's `snap`, where the key's rows are
    /// `rows`: its fragments and their rows as `snap` shows them. `planned` is the
    /// key's rows and the snapshot the plan was made in, when it wrote anything: the
    /// rows of a skipped base fragment that were there as remembered are remembered
    /// as they are now, with what the plan put into their sets.
    fn remember(
        &self,
        desired: &Desired,
        plan: &Plan,
        results: &[ovsdb_proto::OperationResult],
        rows: &KeyRows,
        snap: &Snapshot,
        planned: Option<(&KeyRows, &Snapshot)>,
    ) {
        let key = memo_key(&desired.owner, &desired.scope);
        let mut memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
        let old = memo.remove(&key);
        if desired.fragments().is_empty() {
            return;
        }
        // The uuid of every wanted row: those that were there, and those inserted.
        let mut uuids: HashMap<(&str, &str), Uuid> = plan
            .existing
            .iter()
            .map(|(t, i, u)| ((*t, i.as_str()), *u))
            .collect();
        for (name, at) in plan.inserted.iter().zip(&plan.inserts) {
            if let Some(u) = results.get(*at).and_then(|r| r.uuid()) {
                uuids.insert((name.table.as_str(), name.identity.as_str()), u);
            }
        }
        // The rows of the fragments built now; a fragment with a row not accounted for
        // is not remembered.
        let mut built: Vec<Option<(u64, Vec<MemoRow>)>> = desired
            .fragments()
            .iter()
            .map(|f| (!f.skipped).then(|| (f.fingerprint, Vec::new())))
            .collect();
        // A base fragment built now: its rows by table and identity.
        let mut identities: Option<(usize, KeptIdentities)> = desired
            .fragments()
            .iter()
            .position(|f| f.base && !f.skipped)
            .map(|at| (at, KeptIdentities::new()));
        for r in desired.rows() {
            let Some(at) = r.fragment.map(|at| at as usize) else {
                continue;
            };
            let Some(entry) = built[at].as_mut() else {
                continue;
            };
            let found = uuids.get(&(r.table, r.identity.as_str())).and_then(|u| {
                with_current(rows, snap, r.table, u, |now, inside| {
                    Some(MemoRow::new(r.table, *u, now?, inside))
                })
            });
            match found {
                Some(row) => {
                    if let Some((_, ids)) = identities.as_mut().filter(|(b, _)| *b == at) {
                        ids.entry(r.table)
                            .or_default()
                            .insert(r.identity.clone(), row.uuid);
                    }
                    entry.1.push(row)
                }
                None => built[at] = None,
            }
        }
        // The fragments remembered before, with those built now put in (the map is
        // copied only while a reader still holds it): a node added changes one entry,
        // not the network's 500.
        let (mut fragments, fragment_rows, before) = match old.map(Arc::try_unwrap) {
            Some(Ok(m)) => (m.fragments, m.fragment_rows, Some((m.rows, m.others))),
            Some(Err(held)) => (
                held.fragments.clone(),
                held.fragment_rows.clone(),
                Some((held.rows.clone(), held.others.clone())),
            ),
            None => Default::default(),
        };
        // The rows of the fragments replaced or forgotten, and of those put in.
        let (mut removed, mut added) = (Vec::new(), Vec::new());
        let (mut present, mut outside) = (0, 0);
        for (at, (f, now)) in desired.fragments().iter().zip(built).enumerate() {
            let key = f.key;
            match now {
                Some((fingerprint, rows)) => {
                    let mut memo = FragmentMemo::new(fingerprint, rows);
                    if let Some((_, ids)) = identities.take_if(|(b, _)| *b == at) {
                        memo.identities = Some(Arc::new(ids));
                    }
                    added.extend(memo.uuids());
                    outside += usize::from(!memo.inside);
                    if let Some(was) = fragments.insert(key, memo) {
                        removed.extend(was.uuids());
                    }
                    present += 1;
                }
                None if f.skipped => {
                    let Some(memo) = fragments.get_mut(&key) else {
                        continue;
                    };
                    present += 1;
                    if let Some(planned) = planned.filter(|_| f.base) {
                        if let Some(now) = as_planned_now(memo, planned, (rows, snap)) {
                            *memo = now;
                        }
                    }
                    outside += usize::from(!memo.inside);
                }
                None => {
                    if let Some(was) = fragments.remove(&key) {
                        removed.extend(was.uuids());
                    }
                }
            }
        }
        // Fragments the key no longer builds (a node gone) are forgotten.
        if fragments.len() != present {
            let labels: LabelSet = desired.fragments().iter().map(|f| f.key).collect();
            fragments.retain(|k, f| {
                let keep = labels.contains(k);
                if !keep {
                    removed.extend(f.uuids());
                }
                keep
            });
        }
        // A row both removed and added (a fragment's row updated in place) stays.
        let (removed, added): (UuidSet, UuidSet) =
            (removed.into_iter().collect(), added.into_iter().collect());
        let fragment_rows = Arc::new(fragment_rows.edited(&removed, &added));
        let others = Arc::new(match before {
            Some((was, others)) => {
                others_after(&was, &others, rows, &fragment_rows, &removed, &added)
            }
            None => rows
                .iter()
                .map(|r| r.uuid)
                .filter(|u| !fragment_rows.contains(u))
                .collect(),
        });
        memo.insert(
            key,
            Arc::new(KeyMemo {
                fragments,
                fragment_rows,
                rows: rows.clone(),
                others,
                outside,
            }),
        );
    }

    /// Forgets what was remembered of the keys with fragments other than those of
    /// `scopes` (each key's owner and scope): the memo holds a key's rows as it left
    /// them, and a key the inputs no longer define must not keep them alive.
    pub fn retain_known<'a>(&self, scopes: impl IntoIterator<Item = (&'a Owner, &'a Scope)>) {
        let keep: HashSet<String> = scopes.into_iter().map(|(o, s)| memo_key(o, s)).collect();
        self.memo
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|k, _| keep.contains(k));
    }

    /// How many keys' fragments are remembered.
    pub fn remembered(&self) -> usize {
        self.memo.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// After a failure: nothing is known of `desired`'s key.
    fn forget(&self, desired: &Desired) {
        let key = memo_key(&desired.owner, &desired.scope);
        self.memo
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
    }

    /// Transactions sent so far.
    pub fn transactions(&self) -> u64 {
        self.transactions.load(Ordering::Relaxed)
    }

    /// Rows inserted, updated or deleted so far, by transactions the server committed.
    pub fn rows_written(&self) -> u64 {
        self.rows_written.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::{KeptRows, UuidSet};
    use ovsdb_proto::Uuid;
    use std::collections::BTreeSet;
    use std::sync::Arc;

    #[test]
    fn a_uuid_set_finds_its_members_asked_at_random_or_in_ascending_order() {
        // Uuids whose integer order differs from their first byte's: the set orders
        // them as integers (as the server orders uuids, by their text).
        let u = |n: u128| Uuid::from_u128(n.rotate_right(8));
        let set: UuidSet = [7, 3, 3, 11, 300, 5].into_iter().map(u).collect();
        assert_eq!(set.len(), 5, "duplicates count once");
        for n in 0..400u128 {
            let member = [3, 5, 7, 11, 300].contains(&n);
            assert_eq!(set.contains(&u(n)), member, "{n}");
        }
        let mut asked: Vec<Uuid> = [2, 3, 4, 7, 8, 300, 301].into_iter().map(u).collect();
        asked.sort_by_key(Uuid::as_u128);
        let mut ascending = set.ascending();
        let found: Vec<bool> = asked.iter().map(|x| ascending.contains(x)).collect();
        let expected: Vec<bool> = asked.iter().map(|x| set.contains(x)).collect();
        assert_eq!(found, expected);
        assert_eq!(found.iter().filter(|f| **f).count(), 3);
    }

    #[test]
    fn an_edited_set_is_the_set_built_from_its_members_and_kept_rows_leave_out_the_exceptions() {
        // Random sets (a fixed seed): edited, the set holds what a set built from the
        // same members holds, whatever the overlaps of the three.
        let mut next = crate::testing::random(0x9e37_79b9_7f4a_7c15u64);
        let u = |n: u64| Uuid::from_u128((n as u128).rotate_right(8));
        for _ in 0..200 {
            let mut pick = |k: u64| -> BTreeSet<u64> { (0..next(k)).map(|_| next(60)).collect() };
            let (old, removed, added) = (pick(40), pick(20), pick(20));
            let set: UuidSet = old.iter().map(|n| u(*n)).collect();
            let edited = set.edited(
                &removed.iter().map(|n| u(*n)).collect(),
                &added.iter().map(|n| u(*n)).collect(),
            );
            let want: BTreeSet<u64> = old
                .difference(&removed)
                .chain(added.iter())
                .copied()
                .collect();
            let built: UuidSet = want.iter().map(|n| u(*n)).collect();
            assert_eq!(edited.0, built.0, "{old:?} - {removed:?} + {added:?}");
            let except = pick(20);
            let kept = KeptRows {
                all: Arc::new(edited),
                except: except.iter().map(|n| u(*n)).collect(),
                others: None,
                base: None,
            };
            let mut asked: Vec<u64> = (0..70).collect();
            asked.sort_by_key(|n| u(*n).as_u128());
            let mut ascending = kept.ascending();
            for n in asked {
                let member = want.contains(&n) && !except.contains(&n);
                assert_eq!(kept.contains(&u(n)), member, "{n}");
                assert_eq!(ascending.contains(&u(n)), member, "{n} asked in order");
            }
        }
    }

    #[test]
    fn what_is_freed_apart_is_freed_in_a_runtime_and_out_of_one() {
        let held = Arc::new(());
        super::free_apart(held.clone());
        assert_eq!(Arc::strong_count(&held), 1, "outside a runtime: at once");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        rt.block_on(async { super::free_apart(held.clone()) });
        // Dropping the runtime waits for its blocking threads.
        drop(rt);
        assert_eq!(
            Arc::strong_count(&held),
            1,
            "in a runtime: on its blocking thread"
        );
    }
}
