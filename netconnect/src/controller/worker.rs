//! One worker: takes a key from the queue, reconciles it against the current world and
//! NB snapshot, records the outcome, tells the queue. And the first pass, which holds a
//! key back until the keys it depends on were reconciled once.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{reconcile_key, KeyQueue, KeyReport, OutcomeHook, Reported, Reports};
use crate::keys::{Key, PHASES};
use crate::reconcile::Reconciler;
use crate::world::World;

/// How long a reconcile in flight may still take once the daemon is told to stop.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The keys of the first pass not reconciled yet, by [`Key::phase`]: until a phase's
/// keys have each been reconciled once (well or not), the later phases' keys wait, so
/// that a clean start does not try a connect before the network routers it goes on
/// exist. Keys that come later (from changes) are never held.
#[derive(Default)]
pub(crate) struct FirstPass(Mutex<Vec<HashSet<Key>>>);

impl FirstPass {
    /// The first pass over `keys`.
    pub fn new(keys: impl IntoIterator<Item = Key>) -> FirstPass {
        let mut phases = vec![HashSet::new(); PHASES];
        for k in keys {
            phases[k.phase()].insert(k);
        }
        FirstPass(Mutex::new(phases))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<HashSet<Key>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True while `key` must wait: it is a key of the first pass, and a key of an
    /// earlier phase has not been reconciled yet.
    pub fn holds(&self, key: &Key) -> bool {
        let phases = self.lock();
        phases.get(key.phase()).is_some_and(|p| p.contains(key))
            && phases[..key.phase()].iter().any(|p| !p.is_empty())
    }

    /// Records that `key` was reconciled once.
    pub fn done(&self, key: &Key) {
        if let Some(p) = self.lock().get_mut(key.phase()) {
            p.remove(key);
        }
    }
}

/// How long a held key waits before it is looked at again.
const HELD: Duration = Duration::from_millis(20);

/// What a worker shares with the others.
#[derive(Clone)]
pub(crate) struct Worker {
    /// The keys to reconcile.
    pub queue: Arc<KeyQueue>,
    /// The current inputs.
    pub world: watch::Receiver<Arc<World>>,
    /// Plans and writes.
    pub reconciler: Arc<Reconciler>,
    /// Each key's last outcome.
    pub reports: Reports,
    /// Called after every reconcile.
    pub(crate) hook: Option<OutcomeHook>,
    /// The first pass's order.
    pub first: Arc<FirstPass>,
    /// While it says false, no key is taken.
    pub gate: Option<watch::Receiver<bool>>,
}

impl Worker {
    /// Reconciles keys until `shutdown` is cancelled. A reconcile in flight then has
    /// [`SHUTDOWN_GRACE`] to finish; one still waiting after it (on an NB that stopped
    /// answering, say) is given up: what it sent is the server's either way, and the
    /// next start plans from what the NB holds.
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            if let Some(mut gate) = self.gate.clone() {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = gate.wait_for(|open| *open) => {}
                }
            }
            let key = tokio::select! {
                _ = shutdown.cancelled() => break,
                key = self.queue.next() => key,
            };
            // Closed while this worker waited for a key: the key goes back.
            let closed = self.gate.as_ref().is_some_and(|g| !*g.borrow());
            if closed || self.first.holds(&key) {
                self.queue.done(&key, true);
                self.queue.add_after(key, HELD);
                continue;
            }
            let given_up = async {
                shutdown.cancelled().await;
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            };
            tokio::select! {
                () = self.reconcile(key.clone()) => {}
                () = given_up => {
                    tracing::warn!(%key, grace = ?SHUTDOWN_GRACE, "stopping: the reconcile in flight did not finish in time, given up");
                    break;
                }
            }
        }
    }

    async fn reconcile(&self, key: Key) {
        let w = self.world.borrow().clone();
        let start = Instant::now();
        let span = tracing::info_span!("reconcile", key = %key);
        let result = reconcile_key(&self.reconciler, &w, &key)
            .instrument(span)
            .await;
        let took = start.elapsed();
        if let Some(h) = &self.hook {
            h(&w, &key, &result, took);
        }
        self.first.done(&key);
        // A key's reconcile commits at most one transaction, its plan's.
        let sent = u64::from(result.as_ref().is_ok_and(|p| !p.is_empty()));
        let ok = result.is_ok();
        let seen = result.as_ref().ok().and_then(|p| p.seen.clone());
        self.queue.done_after(&key, ok, seen.map(Reported::seen_in));
        let mut r = self.reports.lock().unwrap_or_else(|p| p.into_inner());
        let entry = r.entry(key.clone()).or_insert(KeyReport {
            result: Ok(String::new()),
            failures: 0,
            transactions: 0,
            at: String::new(),
            took,
            logged: None,
        });
        entry.transactions += sent;
        entry.at = crate::status::now();
        entry.took = took;
        match result {
            Ok(plan) => {
                if entry.failures > 0 {
                    tracing::info!(%key, failures = entry.failures, "reconciled again after failing");
                }
                entry.failures = 0;
                entry.logged = None;
                let own = plan.only_own_changes();
                if plan.is_empty() {
                    entry.result = Ok("unchanged".into());
                    tracing::debug!(%key, own, ?took, "unchanged");
                } else {
                    let written = plan.summary();
                    tracing::info!(%key, %written, own, ?took, "reconciled");
                    entry.result = Ok(written);
                }
            }
            Err(e) => {
                entry.failures += 1;
                let text = e.to_string();
                log_failure(&key, &e, &text, entry, took);
                entry.result = Err(text);
            }
        }
        // A key whose inputs went away: forget its report once clean.
        if matches!(key, Key::Gone(_)) && ok {
            r.remove(&key);
        }
    }
}

/// Logs key `key`'s failure `e` (`text`): at most once a minute while the same failure
/// lasts (debug in between); at info when it waits on a row another key or party has
/// not written yet (a node or network just added: it resolves itself), else at warn.
fn log_failure(
    key: &Key,
    e: &crate::reconcile::ReconcileError,
    text: &str,
    entry: &mut super::KeyReport,
    took: std::time::Duration,
) {
    use crate::reconcile::planner::PlanError;
    let failures = entry.failures;
    let repeat = entry
        .logged
        .as_ref()
        .is_some_and(|(t, at)| t == text && at.elapsed() < LOG_AGAIN_AFTER);
    if repeat {
        tracing::debug!(%key, error = %text, failures, ?took, "reconcile failed again");
        return;
    }
    entry.logged = Some((text.to_owned(), Instant::now()));
    match e {
        crate::reconcile::ReconcileError::Plan(PlanError::MissingDependency { .. }) => {
            tracing::info!(%key, error = %text, failures, "waiting for a row not written yet");
        }
        _ => tracing::warn!(%key, error = %text, failures, ?took, "reconcile failed"),
    }
}

/// How long the same failure of a key goes unlogged after it was logged.
const LOG_AGAIN_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_pass_holds_a_key_until_every_earlier_phase_was_reconciled_once() {
        let net = |n: &str| Key::Network(n.into());
        let connect = Key::Connect("c".into());
        let part = Key::ConnectNetwork("c".into(), "a".into());
        let first = FirstPass::new([
            Key::Cluster,
            net("a"),
            net("b"),
            connect.clone(),
            part.clone(),
        ]);
        assert!(!first.holds(&Key::Cluster));
        assert!(first.holds(&net("a")));
        first.done(&Key::Cluster);
        assert!(!first.holds(&net("a")) && !first.holds(&net("b")));
        assert!(first.holds(&connect) && first.holds(&part));
        first.done(&net("a"));
        assert!(first.holds(&connect), "b is not done");
        first.done(&net("b"));
        assert!(!first.holds(&connect));
        assert!(first.holds(&part));
        first.done(&connect);
        assert!(!first.holds(&part));
        // A key that was not in the first pass is never held.
        let late = FirstPass::new([Key::Cluster, net("a")]);
        assert!(!late.holds(&net("z")));
        assert!(!late.holds(&Key::Connect("d".into())));
    }
}
