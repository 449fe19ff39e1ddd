//! The cache's event streams: the cache sends the events of one commit as one batch
//! (one wake-up per commit, not per row) and the reader takes them one at a time.
//!
//! Each stream is delivered one of two ways ([`Delivery`]): *lossless* (the default),
//! where a reader that falls behind holds the cache back, every update included, until
//! it reads; or *bounded*, where the cache never waits: what does not fit is counted
//! and dropped, and the reader gets one "missed N events" marker in its place, after
//! every event sent before them, to tell it to read the snapshot again.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

/// How a stream's events reach its reader.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Delivery {
    /// Every event, in order: while the reader is more than the stream's capacity
    /// behind, the cache waits for it (no update is applied, and a
    /// [`Cache::commit_and_wait`](super::Cache::commit_and_wait) meanwhile times out
    /// naming the stream). The default.
    #[default]
    Lossless,
    /// At most this many batches (one per commit) wait unread; the cache never waits
    /// for the reader. Events that do not fit are dropped and counted, and the reader
    /// receives one marker (`CacheEvent::Missed`, `TypedEvent::Missed`) saying how
    /// many it missed, in their place: it should read the snapshot again.
    Bounded(usize),
}

/// A stream of events sent in batches: [`CacheEvents`](super::CacheEvents) (every
/// change, untyped) and [`TypedEvents`](super::TypedEvents) (one table's, typed).
pub struct BatchReceiver<E> {
    rx: mpsc::Receiver<Vec<E>>,
    pending: VecDeque<E>,
    /// Bounded delivery: the events dropped since the last marker.
    missed: Option<Arc<AtomicU64>>,
    /// The marker of `n` missed events.
    marker: fn(u64) -> E,
}

impl<E> BatchReceiver<E> {
    /// The next event; `None` once the cache is dropped.
    pub async fn recv(&mut self) -> Option<E> {
        loop {
            if let Some(e) = self.try_recv() {
                return Some(e);
            }
            // Nothing waits and nothing was missed: whatever comes next is sent (a
            // drop needs a full channel, which wakes this).
            self.pending.extend(self.rx.recv().await?);
        }
    }

    /// An event if one is waiting (or the marker of events missed).
    pub fn try_recv(&mut self) -> Option<E> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(e);
            }
            match self.rx.try_recv() {
                Ok(batch) => self.pending.extend(batch),
                Err(_) => {
                    // Everything sent before the drops has been read: the marker.
                    let n = self
                        .missed
                        .as_ref()
                        .map_or(0, |m| m.swap(0, Ordering::AcqRel));
                    return (n > 0).then(|| (self.marker)(n));
                }
            }
        }
    }
}

// Nothing of a receiver is pinned: its events sit in a heap buffer it only moves out
// of. (An event type need not be `Unpin` for the stream to be.)
impl<E> Unpin for BatchReceiver<E> {}

/// [`BatchReceiver::recv`] as a `futures::Stream`: `while let Some(e) =
/// events.next().await`, `select!`, combinators. Ends once the cache is dropped.
impl<E> futures_util::Stream for BatchReceiver<E> {
    type Item = E;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<E>> {
        let this = self.get_mut();
        loop {
            if let Some(e) = this.try_recv() {
                return std::task::Poll::Ready(Some(e));
            }
            match this.rx.poll_recv(cx) {
                std::task::Poll::Ready(Some(batch)) => this.pending.extend(batch),
                std::task::Poll::Ready(None) => return std::task::Poll::Ready(None),
                std::task::Poll::Pending => return std::task::Poll::Pending,
            }
        }
    }
}

/// Which lossless stream the cache is waiting for, and since when.
#[derive(Default)]
pub(crate) struct HeldBy(Mutex<Option<(String, Instant)>>);

impl HeldBy {
    fn set(&self, v: Option<(String, Instant)>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = v;
    }

    /// The stream holding the cache back now, and for how long.
    pub(crate) fn now(&self) -> Option<(String, Duration)> {
        let held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        held.as_ref()
            .map(|(name, since)| (name.clone(), since.elapsed()))
    }
}

/// How long the cache waits for a lossless reader that is behind before it says so.
const STALL_WARNING: Duration = Duration::from_secs(5);

/// The cache's end of a stream.
pub(crate) struct BatchSender<E> {
    tx: mpsc::Sender<Vec<E>>,
    missed: Option<Arc<AtomicU64>>,
    /// The stream, as errors and warnings name it.
    name: String,
}

impl<E> BatchSender<E> {
    /// Whether the reader dropped the stream (its events need not be made).
    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Sends `batch` as the stream's delivery says: lossless waits (recording in
    /// `held` that this stream holds the cache back), bounded drops and counts. A
    /// dropped stream means nobody listens: its events go nowhere.
    pub(crate) async fn send(&self, batch: Vec<E>, held: &HeldBy) {
        if batch.is_empty() {
            return;
        }
        let n = batch.len() as u64;
        if let Some(missed) = &self.missed {
            // Once something was missed, nothing more is sent until the reader has
            // taken the marker: events after a gap never overtake it.
            if missed.load(Ordering::Acquire) > 0 {
                missed.fetch_add(n, Ordering::AcqRel);
            } else if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(batch) {
                missed.fetch_add(n, Ordering::AcqRel);
            }
            return;
        }
        let batch = match self.tx.try_send(batch) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => return,
            Err(mpsc::error::TrySendError::Full(batch)) => batch,
        };
        held.set(Some((self.name.clone(), Instant::now())));
        let send = self.tx.send(batch);
        tokio::pin!(send);
        if tokio::time::timeout(STALL_WARNING, &mut send)
            .await
            .is_err()
        {
            tracing::warn!(
                stream = %self.name,
                after = ?STALL_WARNING,
                "cache: waiting for the reader of {}; no update is applied until it reads \
                 (read it, drop it, or subscribe with Delivery::Bounded)",
                self.name
            );
            let _ = send.await;
        }
        held.set(None);
    }
}

/// A stream named `name` (as errors and warnings say it) delivered as `delivery`;
/// `capacity` is the lossless stream's (a bounded one's is its own), `marker` makes
/// the marker of `n` missed events.
pub(crate) fn channel<E>(
    name: String,
    delivery: Delivery,
    capacity: usize,
    marker: fn(u64) -> E,
) -> (BatchSender<E>, BatchReceiver<E>) {
    let (capacity, missed) = match delivery {
        Delivery::Lossless => (capacity, None),
        Delivery::Bounded(n) => (n, Some(Arc::new(AtomicU64::new(0)))),
    };
    let (tx, rx) = mpsc::channel(capacity.max(1));
    (
        BatchSender {
            tx,
            missed: missed.clone(),
            name,
        },
        BatchReceiver {
            rx,
            pending: VecDeque::new(),
            missed,
            marker,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    enum Ev {
        E(u32),
        Missed(u64),
    }

    #[tokio::test]
    async fn a_bounded_stream_never_waits_and_marks_what_it_dropped_in_order() {
        let held = HeldBy::default();
        let (tx, mut rx) = channel("s".into(), Delivery::Bounded(2), 64, Ev::Missed);
        for i in 0..5 {
            // Returns at once though nobody reads.
            tokio::time::timeout(
                Duration::from_millis(100),
                tx.send(vec![Ev::E(i), Ev::E(i + 10)], &held),
            )
            .await
            .expect("a bounded stream never waits");
        }
        assert!(held.now().is_none());
        // Two batches fitted; three (six events) were dropped.
        let got: Vec<Ev> = std::iter::from_fn(|| rx.try_recv()).collect();
        assert_eq!(
            got,
            [Ev::E(0), Ev::E(10), Ev::E(1), Ev::E(11), Ev::Missed(6)]
        );
        // Then the stream carries on, and nothing is marked twice.
        tx.send(vec![Ev::E(7)], &held).await;
        assert_eq!(rx.recv().await, Some(Ev::E(7)));
        assert_eq!(rx.try_recv(), None);
    }

    #[tokio::test]
    async fn a_bounded_stream_sends_nothing_after_a_gap_before_its_marker() {
        let held = HeldBy::default();
        let (tx, mut rx) = channel("s".into(), Delivery::Bounded(1), 64, Ev::Missed);
        tx.send(vec![Ev::E(1)], &held).await;
        tx.send(vec![Ev::E(2)], &held).await; // dropped: full
        assert_eq!(rx.recv().await, Some(Ev::E(1)));
        // Room again, but a gap is pending: this one is counted with it, not sent
        // ahead of the marker.
        tx.send(vec![Ev::E(3)], &held).await;
        assert_eq!(rx.recv().await, Some(Ev::Missed(2)));
        tx.send(vec![Ev::E(4)], &held).await;
        assert_eq!(rx.recv().await, Some(Ev::E(4)));
    }

    #[tokio::test]
    async fn a_lossless_stream_waits_and_says_which_stream_holds_the_cache() {
        let held = Arc::new(HeldBy::default());
        let (tx, mut rx) = channel("TypedEvents<T>".into(), Delivery::Lossless, 1, Ev::Missed);
        tx.send(vec![Ev::E(1)], &held).await;
        let h = held.clone();
        let sending = tokio::spawn(async move { tx.send(vec![Ev::E(2)], &h).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (name, _) = held.now().expect("the cache is held");
        assert_eq!(name, "TypedEvents<T>");
        assert_eq!(rx.recv().await, Some(Ev::E(1)));
        sending.await.unwrap();
        assert!(held.now().is_none());
        assert_eq!(rx.recv().await, Some(Ev::E(2)));
    }
}
