//! The work queue of a level-driven controller (kube-runtime's shape): a key is queued
//! once however often it is added; a key being reconciled is never handed out again
//! until it is done, and if it was added meanwhile it comes back once after; a key that
//! failed comes back after a backoff that doubles with each failure in a row.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// How long a failed key waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// After the first failure.
    pub min: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            min: Duration::from_millis(100),
            max: Duration::from_secs(30),
        }
    }
}

impl Backoff {
    /// The wait after `failures` failures in a row (from 1).
    pub fn after(&self, failures: u32) -> Duration {
        let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(20));
        self.min.saturating_mul(factor).min(self.max)
    }
}

struct State<K> {
    ready: VecDeque<K>,
    queued: HashSet<K>,
    running: HashSet<K>,
    /// Added while running: queued again when done.
    dirty: HashSet<K>,
    /// Whose rows changed in the NB while running: queued again when done unless the
    /// reconcile tells the changes were its own.
    changed: HashSet<K>,
    delayed: BTreeMap<Instant, Vec<K>>,
    failures: HashMap<K, u32>,
}

/// A deduplicating queue of keys.
pub struct Queue<K> {
    state: Mutex<State<K>>,
    notify: Notify,
    backoff: Backoff,
}

impl<K: Clone + Eq + Hash> Queue<K> {
    /// An empty queue.
    pub fn new(backoff: Backoff) -> Queue<K> {
        Queue {
            state: Mutex::new(State {
                ready: VecDeque::new(),
                queued: HashSet::new(),
                running: HashSet::new(),
                dirty: HashSet::new(),
                changed: HashSet::new(),
                delayed: BTreeMap::new(),
                failures: HashMap::new(),
            }),
            notify: Notify::new(),
            backoff,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `key` (once).
    pub fn add(&self, key: K) {
        let mut s = self.lock();
        if s.running.contains(&key) {
            s.dirty.insert(key);
        } else if s.queued.insert(key.clone()) {
            s.ready.push_back(key);
            drop(s);
            self.notify.notify_one();
        }
    }

    /// Queues `key` because its rows changed in the NB. While it is being reconciled the
    /// change may be that reconcile's own writing: see [`Queue::done_after`].
    pub fn add_change(&self, key: K) {
        let mut s = self.lock();
        if s.running.contains(&key) {
            s.changed.insert(key);
        } else if s.queued.insert(key.clone()) {
            s.ready.push_back(key);
            drop(s);
            self.notify.notify_one();
        }
    }

    /// Queues `key` after `delay` (unless it is queued before then).
    pub fn add_after(&self, key: K, delay: Duration) {
        let mut s = self.lock();
        s.delayed
            .entry(Instant::now() + delay)
            .or_default()
            .push(key);
        drop(s);
        self.notify.notify_one();
    }

    /// The next key to reconcile, marked running; waits for one.
    pub async fn next(&self) -> K {
        loop {
            let wake = {
                let mut s = self.lock();
                let now = Instant::now();
                let due: Vec<Instant> = s.delayed.range(..=now).map(|(t, _)| *t).collect();
                for t in due {
                    for k in s.delayed.remove(&t).unwrap_or_default() {
                        if s.running.contains(&k) {
                            s.dirty.insert(k);
                        } else if s.queued.insert(k.clone()) {
                            s.ready.push_back(k);
                        }
                    }
                }
                if let Some(k) = s.ready.pop_front() {
                    s.queued.remove(&k);
                    s.running.insert(k.clone());
                    return k;
                }
                s.delayed.keys().next().copied()
            };
            match wake {
                Some(at) => {
                    tokio::select! {
                        _ = self.notify.notified() => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                None => self.notify.notified().await,
            }
        }
    }

    /// Marks `key` done. A failure queues it again after a backoff; a key added while
    /// it ran is queued again at once.
    pub fn done(&self, key: &K, ok: bool) {
        self.done_after(key, ok, false)
    }

    /// [`Queue::done`], where `own_changes` tells that every change of the key's rows
    /// while it ran was the reconcile's own: those reported by [`Queue::add_change`]
    /// then do not queue it again.
    pub fn done_after(&self, key: &K, ok: bool, own_changes: bool) {
        let mut s = self.lock();
        s.running.remove(key);
        if s.changed.remove(key) && !own_changes {
            s.dirty.insert(key.clone());
        }
        if ok {
            s.failures.remove(key);
        } else {
            let n = s.failures.entry(key.clone()).or_insert(0);
            *n += 1;
            let wait = self.backoff.after(*n);
            s.delayed
                .entry(Instant::now() + wait)
                .or_default()
                .push(key.clone());
        }
        if s.dirty.remove(key) && s.queued.insert(key.clone()) {
            s.ready.push_back(key.clone());
        }
        drop(s);
        self.notify.notify_one();
    }

    /// Failures in a row of `key`.
    pub fn failures(&self, key: &K) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// True when nothing is queued, delayed or running.
    pub fn is_idle(&self) -> bool {
        let s = self.lock();
        s.ready.is_empty() && s.running.is_empty() && s.delayed.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_key_is_queued_once_and_never_handed_out_twice_at_once() {
        let q = Queue::new(Backoff::default());
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.next().await, "a");
        // Added while running: not handed out again until done.
        q.add("a");
        assert_eq!(q.next().await, "b");
        let pending = tokio::time::timeout(Duration::from_millis(50), q.next()).await;
        assert!(
            pending.is_err(),
            "a is running, b is running: nothing to hand out"
        );
        q.done(&"a", true);
        assert_eq!(q.next().await, "a", "a comes back once after it is done");
        q.done(&"a", true);
        q.done(&"b", true);
        assert!(q.is_idle());
    }

    #[tokio::test(start_paused = true)]
    async fn failures_come_back_after_a_doubling_backoff() {
        let b = Backoff {
            min: Duration::from_millis(100),
            max: Duration::from_millis(350),
        };
        assert_eq!(b.after(1), Duration::from_millis(100));
        assert_eq!(b.after(3), Duration::from_millis(350));
        let q = Queue::new(b);
        q.add("k");
        let k = q.next().await;
        let t0 = Instant::now();
        q.done(&k, false);
        assert_eq!(q.next().await, "k");
        assert_eq!(t0.elapsed(), Duration::from_millis(100));
        q.done(&"k", false);
        let t1 = Instant::now();
        assert_eq!(q.next().await, "k");
        assert_eq!(t1.elapsed(), Duration::from_millis(200));
        assert_eq!(q.failures(&"k"), 2);
        q.done(&"k", true);
        assert_eq!(q.failures(&"k"), 0);
        assert!(q.is_idle());
    }
}
