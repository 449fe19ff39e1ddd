//! The receiving end of a cache's event streams: the cache sends the events of one
//! commit as one batch (one wake-up per commit, not per row) and the reader takes
//! them one at a time.

use std::collections::VecDeque;

use tokio::sync::mpsc;

/// A stream of events sent in batches: [`CacheEvents`](super::CacheEvents) (every
/// change, untyped) and [`TypedEvents`](super::TypedEvents) (one table's, typed).
/// Lossless: a reader that falls behind holds the cache back.
pub struct BatchReceiver<E> {
    rx: mpsc::Receiver<Vec<E>>,
    pending: VecDeque<E>,
}

impl<E> BatchReceiver<E> {
    pub(crate) fn new(rx: mpsc::Receiver<Vec<E>>) -> Self {
        BatchReceiver {
            rx,
            pending: VecDeque::new(),
        }
    }

    /// The next event; `None` once the cache is dropped.
    pub async fn recv(&mut self) -> Option<E> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(e);
            }
            self.pending.extend(self.rx.recv().await?);
        }
    }

    /// An event if one is waiting.
    pub fn try_recv(&mut self) -> Option<E> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(e);
            }
            self.pending.extend(self.rx.try_recv().ok()?);
        }
    }
}
