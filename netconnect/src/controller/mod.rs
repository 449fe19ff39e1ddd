//! The level-driven loop (kube-runtime's controller shape): sources turn changes into
//! keys, workers take keys from a [`queue::Queue`] and reconcile each against the
//! current inputs and the current NB snapshot. A worker is never told what changed,
//! only which key to look at again; so a missed event costs nothing but a later
//! reconcile, and rows changed behind netconnect's back (a port deleted by hand) are
//! put back because the cache's events queue the key that owns them.

pub mod queue;
pub mod worker;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ovsdb_proto::cache::{CacheEvent, CacheEvents, CachedRow, Change, Event};
use ovsdb_proto::Uuid;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::keys::{self, Key, Wake};
use crate::reconcile::{ReconcileError, Reconciler, SeenRows};
use crate::world::World;

pub use queue::Backoff;
pub(crate) use queue::Queue;

/// A change the cache reported to one of a key's rows: the row as the change left it.
#[derive(Clone, Debug)]
pub struct Reported {
    /// The row.
    pub uuid: Uuid,
    /// The row after the change; `None` when it was deleted.
    pub row: Option<Arc<CachedRow>>,
}

impl Reported {
    /// The change `event` reports.
    pub fn of(event: &Event) -> Reported {
        Reported {
            uuid: event.uuid,
            row: match &event.change {
                Change::Insert { new } | Change::Modify { new, .. } => Some(new.clone()),
                Change::Delete { .. } => None,
            },
        }
    }

    /// What a reconcile that saw `rows` saw, for [`Queue::done_after`]: the changes
    /// that leave a row as it was seen.
    pub(crate) fn seen_in(rows: SeenRows) -> queue::Seen<Reported> {
        Arc::new(move |c: &Reported| rows.saw(&c.uuid, c.row.as_ref()))
    }
}

/// The controller's queue: reconcile keys, told of the changes to their rows.
pub(crate) type KeyQueue = Queue<Key, Reported>;

/// What happened the last time a key was reconciled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyReport {
    /// `Ok` with what was written (`+3 ~1 -2`, or `unchanged`), or the error.
    pub result: Result<String, String>,
    /// Failures in a row.
    pub(crate) failures: u32,
    /// Transactions of this key's the server committed so far.
    pub transactions: u64,
    /// When its last reconcile ended (RFC 3339).
    pub(crate) at: String,
    /// How long its last reconcile took.
    pub(crate) took: std::time::Duration,
    /// The failure last logged for it, and when (the same one is logged once a minute
    /// at most while it lasts).
    pub(crate) logged: Option<(String, std::time::Instant)>,
}

/// Reports by key.
pub(crate) type Reports = Arc<Mutex<BTreeMap<Key, KeyReport>>>;

/// Reconciles one key against `world` now. Of a key whose rows come in fragments,
/// only the fragments whose inputs changed since the reconciler last applied it (or
/// whose rows changed in the NB) are built and compared. Nothing is written before
/// the world's allocations are saved ([`World::saved`]); the key is planned meanwhile.
pub async fn reconcile_key(
    reconciler: &Reconciler,
    world: &World,
    key: &Key,
) -> Result<crate::reconcile::Plan, ReconcileError> {
    let start = std::time::Instant::now();
    let desired = match world.fragment_scope(key) {
        Some((owner, scope)) => world.desired_with(key, &reconciler.known(&owner, &scope)),
        None => world.desired(key),
    };
    if let Ok(d) = &desired {
        tracing::debug!(rows = d.len(), took = ?start.elapsed(), "built");
    }
    // Built and planned while the world's allocations are being saved; written, or
    // reported as failed, once they are.
    let desired = match desired {
        Ok(desired) => desired,
        Err(e) => {
            world.saved().await;
            return Err(e.into());
        }
    };
    let result = reconciler.apply_when(&desired, world.saved()).await;
    if desired.len() >= crate::reconcile::FREED_APART {
        crate::reconcile::free_apart(desired);
    }
    result
}

/// Called after every reconcile with the world used, the key, the outcome and how
/// long it took (the daemon records ClusterNetworkConnects' zone conditions and its
/// metrics with it).
pub(crate) type OutcomeHook = Arc<
    dyn Fn(&World, &Key, &Result<crate::reconcile::Plan, ReconcileError>, Duration) + Send + Sync,
>;

/// The zone conditions of ClusterNetworkConnects, from the outcomes of their keys: a
/// connect is ready in the zone once its own key and the key of each network it
/// connects reconciled completely; the first failure is reported as it comes.
#[derive(Debug, Default)]
pub(crate) struct ReadyTracker {
    outcomes: Mutex<BTreeMap<Key, Result<Vec<String>, String>>>,
}

impl ReadyTracker {
    /// Records the outcome of reconciling `key` against `world`; returns the connect
    /// and its zone outcome when that can be told (a failure, or every key of the
    /// connect reconciled).
    pub fn record(
        &self,
        world: &World,
        key: &Key,
        result: &Result<crate::reconcile::Plan, ReconcileError>,
    ) -> Option<(String, Result<Vec<String>, String>)> {
        let (cnc, outcome) = world.ready_outcome(key, result)?;
        let cnc = cnc.to_owned();
        let mut m = self.outcomes.lock().unwrap_or_else(|p| p.into_inner());
        m.insert(key.clone(), outcome);
        let mut missing = Vec::new();
        let mut complete = true;
        for k in world.keys() {
            let mine = matches!(&k, Key::Connect(c) | Key::ConnectNetwork(c, _) if *c == cnc);
            if !mine {
                continue;
            }
            match m.get(&k) {
                Some(Err(e)) => return Some((cnc, Err(e.clone()))),
                Some(Ok(v)) => missing.extend(v.iter().cloned()),
                None => complete = false,
            }
        }
        complete.then_some((cnc, Ok(missing)))
    }
}

/// The running controller.
pub struct Controller {
    reconciler: Arc<Reconciler>,
    world: watch::Receiver<Arc<World>>,
    queue: Arc<KeyQueue>,
    reports: Reports,
    hook: Option<OutcomeHook>,
    /// When and why the NB was last found behind what the cache had seen (a database
    /// restored from a backup), as the cache reported it.
    restored: Restored,
    /// While it says false, no key is taken ([`Controller::with_gate`]).
    gate: Option<watch::Receiver<bool>>,
}

/// When and why the NB was last found behind what the cache had seen.
pub(crate) type Restored = Arc<std::sync::Mutex<Option<String>>>;

impl Controller {
    /// A controller reconciling the worlds `world` receives, through `reconciler`.
    pub fn new(
        reconciler: Arc<Reconciler>,
        world: watch::Receiver<Arc<World>>,
        backoff: Backoff,
    ) -> Controller {
        Controller {
            reconciler,
            world,
            queue: Arc::new(Queue::new(backoff)),
            reports: Arc::default(),
            hook: None,
            restored: Arc::default(),
            gate: None,
        }
    }

    /// When and why the NB was last found restored from a backup, shared with the
    /// running controller.
    pub(crate) fn restored(&self) -> Restored {
        self.restored.clone()
    }

    /// Calls `hook` after every reconcile.
    pub(crate) fn with_hook(mut self, hook: OutcomeHook) -> Controller {
        self.hook = Some(hook);
        self
    }

    /// Takes keys only while `gate` says true (one replica of several active): the
    /// keys stay queued meanwhile, and a reconcile already under way finishes.
    pub(crate) fn with_gate(mut self, gate: watch::Receiver<bool>) -> Controller {
        self.gate = Some(gate);
        self
    }

    /// The reports, shared with the running controller.
    pub fn reports(&self) -> Reports {
        self.reports.clone()
    }

    /// The queue, shared with the running controller.
    pub fn queue(&self) -> Arc<KeyQueue> {
        self.queue.clone()
    }

    /// Runs until the returned future is dropped: `workers` tasks reconciling keys,
    /// one task turning cache `events` into keys, one turning new worlds into keys.
    pub async fn run(self, events: CacheEvents, workers: usize) {
        self.run_until(events, workers, CancellationToken::new())
            .await
    }

    /// [`Controller::run`] until `shutdown` is cancelled: then no new key is taken,
    /// the reconciles in flight finish (their transactions are not cut short), and the
    /// future returns.
    pub(crate) async fn run_until(
        self,
        mut events: CacheEvents,
        workers: usize,
        shutdown: CancellationToken,
    ) {
        // The world the first keys come from: later worlds are compared with it.
        let initial = self.world.borrow().clone();
        let keys = all_keys(&initial, &self.reconciler);
        let first = Arc::new(worker::FirstPass::new(keys.iter().cloned()));
        for k in keys {
            self.queue.add(k);
        }
        let mut tasks = tokio::task::JoinSet::new();
        let mut others = tokio::task::JoinSet::new();
        let w = worker::Worker {
            queue: self.queue.clone(),
            world: self.world.clone(),
            reconciler: self.reconciler.clone(),
            reports: self.reports.clone(),
            hook: self.hook.clone(),
            first,
            gate: self.gate.clone(),
        };
        for _ in 0..workers.max(1) {
            tasks.spawn(w.clone().run(shutdown.clone()));
        }
        let queue = self.queue.clone();
        let world = self.world.clone();
        let restored = self.restored.clone();
        others.spawn(async move {
            while let Some(e) = events.recv().await {
                note_restored(&e, &restored);
                let CacheEvent::Change(e) = e else {
                    continue;
                };
                let row = match &e.change {
                    Change::Insert { new } | Change::Modify { new, .. } => new,
                    Change::Delete { old } => old,
                };
                let w = world.borrow().clone();
                for wake in keys::woken(&w, &e.table, row) {
                    match wake {
                        Wake::Own(key) => {
                            // Most changes are the key's own writes coming back (a
                            // network added: 1519 of them): debug tells only one its
                            // last reconcile did not see, which queues the key.
                            // The key is copied for the log only when it logs: every
                            // row written comes this way.
                            let named = tracing::enabled!(tracing::Level::DEBUG)
                                .then(|| key.clone());
                            let unseen = queue.add_change(key, Reported::of(&e));
                            if let Some(key) = named {
                                let (table, uuid) = (e.table.as_str(), e.uuid);
                                if unseen {
                                    tracing::debug!(%key, %table, %uuid, "row changed: key queued");
                                } else {
                                    tracing::trace!(%key, %table, %uuid, "row changed: seen or held");
                                }
                            }
                        }
                        Wake::Look(key) => queue.add(key),
                    }
                }
            }
        });
        others.spawn(follow_worlds(
            self.queue.clone(),
            self.world.clone(),
            self.reconciler.clone(),
            initial,
        ));
        // The workers end on shutdown; the sources go with them.
        while tasks.join_next().await.is_some() {}
        others.abort_all();
    }
}

/// Queues the keys each new world makes to look again, from `initial` on: those whose
/// inputs changed first, then those of owners the world left without inputs.
async fn follow_worlds(
    queue: Arc<KeyQueue>,
    mut world: watch::Receiver<Arc<World>>,
    reconciler: Arc<Reconciler>,
    initial: Arc<World>,
) {
    let mut previous = initial;
    while world.changed().await.is_ok() {
        let w = world.borrow_and_update().clone();
        // The keys whose inputs changed are queued first: the rest (the keys
        // of owners gone, read from every owner index of the cache, which
        // takes long at 500 x 500) is no reason for them to wait.
        for k in w.changed_since(&previous) {
            queue.add(k);
        }
        // And the worker woken for them runs now: the runtime keeps a task this
        // one woke for this thread, where no other thread takes it, until this
        // one yields (a network added waited so at 500 x 500).
        tokio::task::yield_now().await;
        let started = std::time::Instant::now();
        let keys = w.keys();
        let defined: HashSet<&Key> = keys.iter().collect();
        queue.retain_seen(|k| defined.contains(k));
        forget_gone_of(&w, &keys, &reconciler);
        let forgot = started.elapsed();
        let gone = gone_keys(&previous, &w, &reconciler);
        let lost = gone.is_some();
        for k in gone.into_iter().flatten() {
            queue.add(k);
        }
        tracing::debug!(?forgot, lost, took = ?started.elapsed(), "gone owners looked for");
        previous = w;
    }
}

/// Logs and keeps, for `/status`, the cache's report that every NB server is behind
/// what it saw (a database restored from a backup).
fn note_restored(e: &CacheEvent, restored: &Restored) {
    if let CacheEvent::Unusable {
        reason: ovsdb_proto::cache::UnusableReason::EveryServerBehind,
        error,
        ..
    } = e
    {
        tracing::warn!(%error, "every NB server is behind what this daemon saw: a database restored from a backup?");
        let mut r = restored.lock().unwrap_or_else(|p| p.into_inner());
        *r = Some(format!("{}: {error}", crate::status::now()));
    }
}

/// The keys a new world makes to look again: those of `world` that may have changed
/// since `previous` ([`World::changed_since`]: a service whose inputs are the same is
/// not looked at again when another service's endpoints move), and the keys of owners
/// in the NB that `world` no longer defines, looked for only when `world` lost an
/// owner `previous` had (`World::lost_owners_of`: those gone before were among the
/// keys `previous` made).
pub fn changed_keys(previous: &World, world: &World, reconciler: &Reconciler) -> Vec<Key> {
    let mut keys = world.changed_since(previous);
    keys.extend(gone_keys(previous, world, reconciler).into_iter().flatten());
    keys
}

/// The keys of owners in the NB that `world` no longer defines, looked for in every
/// owner index of the cache only when `world` lost an owner `previous` had
/// ([`World::lost_owners_of`]); `None` when it lost none (those gone before were among
/// the keys `previous` made).
fn gone_keys(
    previous: &World,
    world: &World,
    reconciler: &Reconciler,
) -> Option<std::collections::BTreeSet<Key>> {
    world
        .lost_owners_of(previous)
        .then(|| world.gone_in(&reconciler.cache().snapshot(), reconciler.indexes()))
}

/// Forgets the fragments remembered of keys `world` no longer defines (a connect that
/// no longer selects a network, a network gone), so that their rows are not kept alive.
pub fn forget_gone(world: &World, reconciler: &Reconciler) {
    forget_gone_of(world, &world.keys(), reconciler);
}

/// [`forget_gone`], `keys` being `world`'s.
fn forget_gone_of(world: &World, keys: &[Key], reconciler: &Reconciler) {
    let scopes: Vec<_> = keys
        .iter()
        .filter_map(|k| world.fragment_scope(k))
        .collect();
    reconciler.retain_known(scopes.iter().map(|(o, s)| (o, s)));
}

/// Every key of `world`, and the keys of owners in the NB that `world` no longer
/// defines (looked for in every owner index of the cache).
pub fn all_keys(world: &World, reconciler: &Reconciler) -> Vec<Key> {
    let snap = reconciler.cache().snapshot();
    let mut keys = world.keys();
    keys.extend(world.gone_in(&snap, reconciler.indexes()));
    for owner in world.left_alone(&snap, reconciler.indexes()) {
        tracing::warn!(
            %owner,
            "rows of an owner not in the manifests are left alone beside OVN-Kubernetes (--manage connects): another controller may own them"
        );
    }
    keys
}

/// The outcome of reconciling one key in [`once`].
#[derive(Debug)]
pub struct Outcome {
    /// The key.
    pub key: Key,
    /// What was written, or the last error.
    pub result: Result<crate::reconcile::Plan, ReconcileError>,
    /// Attempts made.
    pub(crate) attempts: u32,
}

/// Reconciles every key of `world` (and the keys of owners it no longer defines) once,
/// retrying a transient failure (`attempts` at most, with `backoff`). The cluster rows
/// go first, then the networks, then the ClusterNetworkConnects' own rows, then their
/// rows for each connected network; within each, up to
/// `parallel` keys are in flight at once (each is still one transaction, and no key is
/// reconciled twice at once). Outcomes come in that order.
pub async fn once(
    reconciler: &Reconciler,
    world: &World,
    attempts: u32,
    backoff: Backoff,
    parallel: usize,
) -> Vec<Outcome> {
    use futures_util::stream::{self, StreamExt};
    let keys = all_keys(world, reconciler);
    let one = |key: Key| async move {
        let mut n = 0;
        let result = loop {
            n += 1;
            let r = reconcile_key(reconciler, world, &key).await;
            match &r {
                Err(e) if e.is_transient() && n < attempts => {
                    tracing::warn!(%key, attempt = n, error = %e, "retrying");
                    tokio::time::sleep(backoff.after(n)).await;
                }
                _ => break r,
            }
        };
        Outcome {
            key,
            result,
            attempts: n,
        }
    };
    // The cluster rows first, then the networks (and what is gone), then the
    // connects, whose rows go on the networks' routers and switches.
    let mut out = Vec::with_capacity(keys.len());
    for p in 0..keys::PHASES {
        let these: Vec<Key> = keys.iter().filter(|k| k.phase() == p).cloned().collect();
        let mut done: Vec<Outcome> = stream::iter(these)
            .map(one)
            .buffer_unordered(parallel.max(1))
            .collect()
            .await;
        done.sort_by(|a, b| a.key.cmp(&b.key));
        out.extend(done);
    }
    out
}

/// Waits until `queue` has been idle for `quiet`, at most `timeout`; true if it was.
pub async fn settle(queue: &KeyQueue, quiet: Duration, timeout: Duration) -> bool {
    let start = Instant::now();
    let mut idle_since: Option<Instant> = None;
    while start.elapsed() < timeout {
        if queue.is_idle() {
            let since = *idle_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= quiet {
                return true;
            }
        } else {
            idle_since = None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}
