//! Writing what a key wants: diff its desired rows against a snapshot of the NB
//! (`planner::Planner`, pure) and send the result as one transaction over the cache's
//! connection, waiting until the cache shows it so that the key's next reconcile reads
//! its own writes.

pub mod dry_run;
pub mod left;
mod memo;
pub mod nb;
pub mod plan;
pub mod planner;
mod rows;
#[cfg(test)]
mod testing;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use ovsdb_proto::cache::{Cache, CacheConfig, CacheEvents, Expected, Snapshot};
use ovsdb_proto::Operation;

pub(crate) use memo::KnownFragments;
pub use nb::NbIndexes;
pub use plan::Plan;
pub(crate) use plan::SeenRows;
pub(crate) use planner::PlanError;
pub(crate) use rows::KeyRows;

use left::changed_only_by;
use memo::{memo_key, Memo};

use crate::ovnk::ownership::{Owner, Scope};
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

/// A transaction serialized ahead of sending it, or why it could not be.
type Prepared = Result<ovsdb_proto::Prepared, ovsdb_proto::Error>;

/// The comment a key's transaction ends with: whose rows they are.
fn comment(desired: &Desired) -> Operation {
    Operation::Comment(format!("netconnect: {}", desired.owner))
}

/// From how many rows a key's desired rows, and the snapshot its transaction was
/// planned in, are freed apart ([`free_apart`]).
pub(crate) const FREED_APART: usize = 256;

/// Frees `v` on a blocking thread, off the caller's path: a network added at 500 nodes
/// (1519 rows) spent a noticeable part of its reconcile, after its rows were shown,
/// freeing the snapshot it was planned in (the last holder of the versions its
/// transaction replaced) and its desired rows. Dropped at once outside a Tokio runtime.
pub(crate) fn free_apart<T: Send + 'static>(v: T) {
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn_blocking(move || drop(v));
    }
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
    /// This process is one replica of several and not the active one (any more):
    /// nothing sent ([`Reconciler::gate_writes`]).
    #[error("this replica is not the active one; nothing sent")]
    NotActive,
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
            ReconcileError::NotActive => true,
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
    memo: Memo,
    /// Keys whose last transaction may have written what the cache does not show yet.
    unsettled: Mutex<HashMap<String, Unsettled>>,
    /// While it says false, nothing is sent ([`Reconciler::gate_writes`]).
    write_gate: std::sync::OnceLock<tokio::sync::watch::Receiver<bool>>,
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
        config: CacheConfig,
        wait: Duration,
    ) -> Result<(Reconciler, CacheEvents), String> {
        let (reconciler, events) = Reconciler::start(config);
        reconciler.ready(wait).await?;
        Ok((reconciler, events))
    }

    /// A reconciler over a cache of the NB `config` names, started and not waited for
    /// ([`Reconciler::ready`]).
    pub fn start(mut config: CacheConfig) -> (Reconciler, CacheEvents) {
        let nb = NbIndexes::register(&mut config);
        let (cache, events) = Cache::start(config);
        (Reconciler::new(Arc::new(cache), nb), events)
    }

    /// Waits at most `wait` until the cache is synced; the error names each server
    /// tried and why it was unusable (refused, not answering, no OVN_Northbound
    /// database, a TLS failure, …). The cache keeps trying either way.
    pub async fn ready(&self, wait: Duration) -> Result<(), String> {
        self.cache.ready(wait).await.map_err(|e| {
            let remotes: Vec<String> = self
                .cache
                .remotes()
                .iter()
                .map(ToString::to_string)
                .collect();
            format!("no usable Northbound server at {}: {e}", remotes.join(","))
        })
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
            memo: Memo::default(),
            unsettled: Mutex::new(HashMap::new()),
            write_gate: std::sync::OnceLock::new(),
        }
    }

    /// Sends no transaction while `gate` says false (one replica of several, not the
    /// active one): a key's write then fails with [`ReconcileError::NotActive`],
    /// nothing sent. Looked at just before each send, after the key's plan. Set once;
    /// later calls are ignored.
    pub fn gate_writes(&self, gate: tokio::sync::watch::Receiver<bool>) {
        let _ = self.write_gate.set(gate);
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
        self.memo
            .known(&self.cache.snapshot(), &self.nb, owner, scope)
    }

    /// Forgets what was remembered of the keys with fragments other than those of
    /// `scopes` (each key's owner and scope): the memo holds a key's rows as it left
    /// them, and a key the inputs no longer define must not keep them alive.
    pub(crate) fn retain_known<'a>(
        &self,
        scopes: impl IntoIterator<Item = (&'a Owner, &'a Scope)>,
    ) {
        self.memo.retain_known(scopes);
    }

    /// How many keys' fragments are remembered.
    pub fn remembered(&self) -> usize {
        self.memo.remembered()
    }

    /// After a failure: nothing is known of `desired`'s key.
    fn forget(&self, desired: &Desired) {
        self.memo.forget(desired);
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
        let keep = self.memo.kept_rows(desired, rows);
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
    pub(crate) async fn apply_when(
        &self,
        desired: &Desired,
        ready: impl std::future::Future<Output = ()>,
    ) -> Result<Plan, ReconcileError> {
        if let Err(e) = self.settle(desired).await {
            ready.await;
            return Err(e);
        }
        let mut took = Took::start();
        let (plan, prepared, planned) = self.plan_when(desired, ready, &mut took).await;
        let plan = plan?;
        if plan.is_empty() {
            return Ok(self.unchanged(desired, plan, planned));
        }
        self.write(desired, plan, prepared, planned, took).await
    }

    /// The plan of `desired`, made before `ready` completes and again after if the
    /// cache moved meanwhile (a key that need not wait goes on as planned); its
    /// transaction serialized while waiting, if the plan stands; the snapshot it was
    /// made in, with the key's rows there.
    async fn plan_when(
        &self,
        desired: &Desired,
        ready: impl std::future::Future<Output = ()>,
        took: &mut Took,
    ) -> (
        Result<Plan, ReconcileError>,
        Option<Prepared>,
        (Arc<Snapshot>, KeyRows),
    ) {
        let mut planned = self.cache.snapshot();
        let mut before = KeyRows::read(&planned, &self.nb, &desired.owner, &desired.scope);
        let mut plan = self.plan_or_forget(desired, &planned, &before);
        took.planned = took.lap();
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
        (plan, prepared, (planned, before))
    }

    /// An empty plan: the key's rows are remembered as it left them, unless the cache
    /// moved while planning and they are not the same but for what OVN's daemons
    /// write (read again only then).
    fn unchanged(
        &self,
        desired: &Desired,
        mut plan: Plan,
        (planned, before): (Arc<Snapshot>, KeyRows),
    ) -> Plan {
        let now = self.cache.snapshot();
        let (rows, own) = if Arc::ptr_eq(&now, &planned) {
            (before, true)
        } else {
            let rows = KeyRows::read(&now, &self.nb, &desired.owner, &desired.scope);
            // Changed by no write of the key's: at most in what OVN's daemons write.
            let own = changed_only_by(&before, &rows, &[], &[], 0);
            (rows, own)
        };
        if own {
            plan.seen = Some(SeenRows::of(&rows));
            self.memo.remember(desired, &plan, &[], &rows, &now, None);
        } else {
            self.forget(desired);
        }
        plan
    }

    /// Sends `plan`'s transaction (`prepared` already, or serialized now) and waits
    /// until the cache shows it; the key's rows are then remembered as it left them,
    /// unless another party changed them meanwhile.
    async fn write(
        &self,
        desired: &Desired,
        mut plan: Plan,
        prepared: Option<Prepared>,
        (planned, before): (Arc<Snapshot>, KeyRows),
        mut took: Took,
    ) -> Result<Plan, ReconcileError> {
        if self.write_gate.get().is_some_and(|g| !*g.borrow()) {
            return Err(ReconcileError::NotActive);
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
        let written = plan.inserted.len() + plan.updated.len() + plan.deleted.len();
        let results = match sent {
            Ok(results) => {
                self.rows_written
                    .fetch_add(written as u64, Ordering::Relaxed);
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
        // Planned in `planned`: a row held there that the transaction changed and that
        // is gone by the time the cache shows it was deleted after it (a network's key
        // deleting the switch a connect's key let go of): shown, not waited for.
        let shown = self
            .cache
            .wait_shown_since(&ops, &results, &planned, self.wait)
            .await;
        let snap = match shown {
            Ok(snap) => snap,
            Err(e) => {
                self.forget(desired);
                let expected = Expected::since(&ops, &results, &planned);
                self.unsettle(desired, connections, Some(expected));
                return Err(e.into());
            }
        };
        took.shown = took.lap();
        // The first contents that show the transaction (the wait checked it there): the
        // key's rows are read where they were first written.
        let now = KeyRows::read(&snap, &self.nb, &desired.owner, &desired.scope);
        if changed_only_by(&before, &now, &ops, &results, plan.deleted.len()) {
            plan.seen = Some(SeenRows::of(&now));
            let planned = Some((&before, &*planned));
            self.memo
                .remember(desired, &plan, &results, &now, &snap, planned);
        } else {
            self.forget(desired);
        }
        ops.pop();
        plan.operations = ops;
        // The snapshot planned in may be the last holder of the versions (and index
        // entries) the transaction replaced: they are freed apart.
        if written >= FREED_APART {
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

    /// The transaction of `plan` (its operations and [`comment`]) serialized; `None`
    /// for no plan or an empty one.
    fn prepare(
        &self,
        plan: &mut Result<Plan, ReconcileError>,
        desired: &Desired,
    ) -> Option<Prepared> {
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
    use std::sync::Arc;

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
