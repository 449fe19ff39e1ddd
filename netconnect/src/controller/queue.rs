//! The work queue of a level-driven controller (kube-runtime's shape): a key is queued
//! once however often it is added; a key being reconciled is never handed out again
//! until it is done, and if it was added meanwhile it comes back once after; a key that
//! failed comes back after a backoff that doubles with each failure in a row.
//!
//! A level-driven controller hears of its own writes: the rows a reconcile wrote come
//! back as changes. The queue tells them from others' changes by what the reconcile saw
//! (`Queue::done_after`): a change that left a row as the reconcile last saw it
//! (whenever it is reported, while the key runs or after) needs no second look; any
//! other change queues the key again.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
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

/// Tells whether a reported change is one a reconcile already saw (see
/// `Queue::done_after`).
pub type Seen<C> = Arc<dyn Fn(&C) -> bool + Send + Sync>;

struct State<K, C> {
    ready: VecDeque<K>,
    queued: HashSet<K>,
    running: HashMap<K, Instant>,
    /// Added while running: queued again when done.
    dirty: HashSet<K>,
    /// The changes of a key's rows reported while it ran: queued again when done
    /// unless the reconcile saw each of them.
    changed: HashMap<K, Vec<C>>,
    /// What each key's last reconcile saw, for changes reported after it was done.
    seen: HashMap<K, Seen<C>>,
    delayed: BTreeMap<Instant, Vec<K>>,
    failures: HashMap<K, u32>,
}

/// A deduplicating queue of keys `K`, told of changes `C` to their rows.
pub struct Queue<K, C = ()> {
    state: Mutex<State<K, C>>,
    notify: Notify,
    backoff: Backoff,
}

impl<K: Clone + Eq + Hash, C> Queue<K, C> {
    /// An empty queue.
    pub fn new(backoff: Backoff) -> Queue<K, C> {
        Queue {
            state: Mutex::new(State {
                ready: VecDeque::new(),
                queued: HashSet::new(),
                running: HashMap::new(),
                dirty: HashSet::new(),
                changed: HashMap::new(),
                seen: HashMap::new(),
                delayed: BTreeMap::new(),
                failures: HashMap::new(),
            }),
            notify: Notify::new(),
            backoff,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K, C>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `key` (once).
    pub fn add(&self, key: K) {
        let mut s = self.lock();
        if s.running.contains_key(&key) {
            s.dirty.insert(key);
        } else if s.queued.insert(key.clone()) {
            s.ready.push_back(key);
            drop(s);
            self.notify.notify_one();
        }
    }

    /// Queues `key` because `change` happened to its rows, unless the key's last
    /// reconcile saw it (its own write, reported late). While the key is being
    /// reconciled the change is held for [`Queue::done_after`] to judge. True when the
    /// change is one the key's last reconcile did not see: the key is queued for it (or
    /// was queued already); false for a change held or seen.
    pub(crate) fn add_change(&self, key: K, change: C) -> bool {
        let mut s = self.lock();
        if s.running.contains_key(&key) {
            s.changed.entry(key).or_default().push(change);
            false
        } else if s.seen.get(&key).is_some_and(|seen| seen(&change)) {
            // Nothing the reconcile did not see.
            false
        } else {
            if s.queued.insert(key.clone()) {
                s.ready.push_back(key);
                drop(s);
                self.notify.notify_one();
            }
            true
        }
    }

    /// Queues `key` after `delay` (unless it is queued before then).
    pub(crate) fn add_after(&self, key: K, delay: Duration) {
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
                        if s.running.contains_key(&k) {
                            s.dirty.insert(k);
                        } else if s.queued.insert(k.clone()) {
                            s.ready.push_back(k);
                        }
                    }
                }
                if let Some(k) = s.ready.pop_front() {
                    s.queued.remove(&k);
                    s.running.insert(k.clone(), Instant::now());
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
    /// it ran, or whose rows changed meanwhile, is queued again at once.
    pub fn done(&self, key: &K, ok: bool) {
        self.done_after(key, ok, None)
    }

    /// [`Queue::done`], where `seen` (if any) tells which changes the reconcile saw,
    /// having judged that until then the key's rows changed only by its own writing:
    /// the changes reported by [`Queue::add_change`] while it ran, or later, queue
    /// the key again only when `seen` does not hold for them. It is judged here, under
    /// the queue's lock, so that a change reported after the reconcile's judgement and
    /// before this call is not lost.
    pub(crate) fn done_after(&self, key: &K, ok: bool, seen: Option<Seen<C>>) {
        let mut s = self.lock();
        s.running.remove(key);
        let changes = s.changed.remove(key).unwrap_or_default();
        let unseen = match &seen {
            Some(seen) => changes.iter().any(|c| !seen(c)),
            None => !changes.is_empty(),
        };
        if unseen {
            s.dirty.insert(key.clone());
        }
        match seen {
            Some(seen) if ok => {
                s.seen.insert(key.clone(), seen);
            }
            _ => {
                s.seen.remove(key);
            }
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

    /// Forgets what the last reconciles of the keys `keep` refuses saw (keys gone).
    pub(crate) fn retain_seen(&self, keep: impl Fn(&K) -> bool) {
        self.lock().seen.retain(|k, _| keep(k));
    }

    #[cfg(test)]
    /// Failures in a row of `key`.
    pub(crate) fn failures(&self, key: &K) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// How many keys wait (ready or delayed), how many run, and how long the longest
    /// running has run: what a stall looks like while it lasts.
    pub(crate) fn depth(&self) -> (usize, usize, Duration) {
        let s = self.lock();
        let waiting = s.ready.len() + s.delayed.values().map(Vec::len).sum::<usize>();
        let oldest = s
            .running
            .values()
            .map(Instant::elapsed)
            .max()
            .unwrap_or_default();
        (waiting, s.running.len(), oldest)
    }

    /// True when nothing is queued, delayed or running.
    pub(crate) fn is_idle(&self) -> bool {
        let s = self.lock();
        s.ready.is_empty() && s.running.is_empty() && s.delayed.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_key_is_queued_once_and_never_handed_out_twice_at_once() {
        let q: Queue<&str> = Queue::new(Backoff::default());
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
        let q: Queue<&str> = Queue::new(b);
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

    #[tokio::test]
    async fn a_change_comes_back_unless_the_reconcile_saw_it_whenever_it_is_reported() {
        // Changes are version numbers of one row; the reconcile saw version 2.
        let saw = |v: u32| -> Option<Seen<u32>> { Some(Arc::new(move |c: &u32| *c == v)) };
        let q: Queue<&str, u32> = Queue::new(Backoff::default());
        q.add("k");
        assert_eq!(q.next().await, "k");
        // Its own write, reported while it runs: held, then seen.
        assert!(!q.add_change("k", 2), "held while the key runs");
        q.done_after(&"k", true, saw(2));
        assert!(q.is_idle(), "the one change was its own");
        // Its own write reported after it was done: seen, nothing queued.
        assert!(!q.add_change("k", 2), "seen");
        assert!(q.is_idle(), "a late report of its own write");
        // Another's change reported after it was done: queued (and news again while
        // queued).
        assert!(q.add_change("k", 3), "not seen");
        assert!(q.add_change("k", 3), "not seen, the key queued already");
        assert_eq!(q.next().await, "k");
        // A change after what the reconcile saw, reported before it is done (after its
        // judgement): not lost.
        q.add_change("k", 3);
        q.add_change("k", 4);
        q.done_after(&"k", true, saw(3));
        assert_eq!(q.next().await, "k", "version 4 was not seen");
        // A reconcile that could not tell (None) sees nothing.
        q.add_change("k", 4);
        q.done_after(&"k", true, None);
        assert_eq!(q.next().await, "k");
        q.done_after(&"k", true, None);
        q.add_change("k", 4);
        assert_eq!(q.next().await, "k", "nothing was seen: every change counts");
        q.done_after(&"k", true, saw(4));
        // Keys gone forget what they saw.
        q.retain_seen(|_| false);
        q.add_change("k", 4);
        assert_eq!(q.next().await, "k");
        q.done(&"k", true);
        assert!(q.is_idle());
    }
}
