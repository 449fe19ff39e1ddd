//! One connection's machinery: the requests in flight matched by id, the state the
//! readers (see `reader.rs`) and the writer share, and the notifications stream.

use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::task::AtomicWaker;
use tokio::sync::{mpsc, oneshot, watch};

use crate::codec::JsonRpcCodec;
use crate::config::ConnectOptions;
use crate::error::Error;
use crate::monitor::{Notification, RawNotification};
use crate::ops::OperationResult;
use crate::reader::{read_loop, Progress, ReadSide};
use crate::reply::TransactionError;
use crate::tap::{TappingCodec, Taps};
use crate::transport::Transport;
use crate::writer::Writer;

pub(crate) type Reply = Result<Answer, Error>;

/// A reply's result as its reader hands it to the request.
#[derive(Debug)]
pub(crate) enum Answer {
    /// The `result` member's JSON text.
    Text(Bytes),
    /// A transaction's outcome, decoded as its caller read the reply.
    Transact(Result<Vec<OperationResult>, TransactionError>),
}

impl Answer {
    /// The result's text, for a request that is not a transaction read by its caller.
    pub(crate) fn text(self) -> Result<Bytes, Error> {
        match self {
            Answer::Text(text) => Ok(text),
            Answer::Transact(_) => Err(Error::protocol(
                "a reply read as a transaction's came for a request that is not one",
            )),
        }
    }
}

pub(crate) struct Pending {
    pub(crate) method: &'static str,
    pub(crate) reply: oneshot::Sender<Reply>,
}

#[derive(Default)]
pub(crate) struct State {
    /// By id. Ids rise one by one, so an ordered map keeps them without hashing.
    pub(crate) pending: BTreeMap<u64, Pending>,
    /// Requests given up before their reply came (a timeout, a dropped call): their
    /// late replies are dropped, not taken for a broken protocol.
    pub(crate) abandoned: BTreeSet<u64>,
    pub(crate) closed: Option<Error>,
}

pub(crate) struct Shared {
    pub(crate) next_id: AtomicU64,
    /// Replies decoded while they arrive.
    pub(crate) taps: Taps,
    state: Mutex<State>,
    /// Becomes true once the connection has ended.
    pub(crate) ended: watch::Sender<bool>,
    /// How long a request may wait for its reply.
    pub(crate) request_timeout: Option<Duration>,
    /// This connection, apart from every other of the process.
    pub(crate) id: u64,
    /// How many notifications the reader handed to the stream so far. A reply read
    /// after a notification is handled after it: once a request's reply is in, this
    /// counts every notification the server sent before it (ovsdb-server sends a
    /// transaction's monitor updates before its reply).
    pub(crate) notes_sent: AtomicU64,
    /// The read half and where what is read goes ([`Shared::read_side`]).
    pub(crate) read: Mutex<ReadSide>,
    /// The reader task, woken when a caller stops reading.
    pub(crate) reader_task: AtomicWaker,
    /// The caller that reads now, woken when its request completes otherwise (the
    /// connection's end, `cancel`).
    pub(crate) driver: AtomicWaker,
    /// Messages read whole, for the inactivity probe.
    pub(crate) completed: AtomicU64,
    /// Set once the connection has ended.
    is_ended: AtomicBool,
}

/// The next connection's id.
static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(1);

impl Shared {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the map inconsistent (every
        // critical section is a single insert, remove or drain), so poisoning is ignored.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The request a reply with `id` answers; `None` for one given up already (its
    /// late reply is dropped). A reply to no request breaks the protocol.
    pub(crate) fn take_pending(&self, id: u64) -> Result<Option<Pending>, Error> {
        let mut st = self.lock();
        match st.pending.remove(&id) {
            Some(p) => Ok(Some(p)),
            None if st.abandoned.remove(&id) => Ok(None),
            None => Err(Error::protocol(format!(
                "reply to no request: id {id} is not in flight"
            ))),
        }
    }

    /// Ends the connection: every request in flight gets `err`, later ones get it too.
    pub(crate) fn fail(&self, err: Error) {
        let drained: Vec<(Pending, Error)> = {
            let mut st = self.lock();
            if st.closed.is_some() {
                return;
            }
            tracing::debug!(error = %err, "ovsdb connection ended");
            // Requests in flight were (or may have been) sent: their outcome is unknown.
            let drained = std::mem::take(&mut st.pending)
                .into_values()
                .map(|p| (p, Error::outcome_unknown(err.duplicate())))
                .collect();
            st.closed = Some(err);
            drained
        };
        for (p, e) in drained {
            let _ = p.reply.send(Err(e));
        }
        // A reply being decoded while it arrives will get no more bytes: its decoder
        // sees the end of them now, whether or not its reply had started.
        self.taps.clear();
        self.is_ended.store(true, Ordering::Release);
        self.ended.send_replace(true);
        self.driver.wake();
    }

    /// True once the connection has ended.
    pub(crate) fn is_ended(&self) -> bool {
        self.is_ended.load(Ordering::Acquire)
    }
}

/// One connection: the state its reader task shares with the requests, and its
/// writer. Held by every [`Client`](crate::Client) clone and by [`Notifications`];
/// when the last one goes, the connection is closed.
pub(crate) struct Connection {
    pub(crate) shared: Arc<Shared>,
    pub(crate) writer: Arc<Writer>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.writer.shutdown();
        self.shared
            .fail(Error::closed(Some("closed by the client".into())));
    }
}

/// Messages the server sends unasked (`update`, `update2`, `update3`, `locked`,
/// `stolen`, `monitor_canceled`, …), in the order received.
///
/// When this stream is not read, the connection stops reading once
/// [`ConnectOptions::notification_capacity`] notifications wait: nothing is dropped.
/// Drop the stream to say notifications are not wanted.
///
/// Notifications are decoded as they are read: one that does not decode ends the
/// connection with a protocol error saying why, and the stream with it.
pub struct Notifications {
    rx: mpsc::Receiver<RawNotification>,
    connection: Arc<Connection>,
    /// How many notifications were taken from the stream.
    taken: u64,
}

impl Notifications {
    /// The next notification; `None` once the connection has ended.
    pub async fn recv(&mut self) -> Option<Notification> {
        let raw = self.recv_raw().await?;
        self.decoded(raw)
    }

    /// A notification if one is waiting, without waiting.
    pub fn try_recv(&mut self) -> Option<Notification> {
        let raw = self.rx.try_recv().ok()?;
        self.taken += 1;
        self.decoded(raw)
    }

    /// The next notification as it came, for a caller that decodes it itself (and
    /// ends the connection with [`Notifications::fail`] when it cannot).
    pub async fn recv_raw(&mut self) -> Option<RawNotification> {
        let raw = self.rx.recv().await?;
        self.taken += 1;
        Some(raw)
    }

    /// The connection's id and how many notifications were taken from this stream:
    /// once a reader that takes them one at a time has handled the last one taken,
    /// it has handled every notification up to this count
    /// ([`crate::Client::note_mark`]).
    pub(crate) fn mark(&self) -> (u64, u64) {
        (self.connection.shared.id, self.taken)
    }

    /// Ends the connection with a protocol error: the caller found a notification it
    /// read with [`recv_raw`](Self::recv_raw) malformed.
    pub fn fail(&mut self, why: impl Into<String>) {
        self.connection.shared.fail(Error::protocol(why.into()));
        self.rx.close();
    }

    fn decoded(&mut self, raw: RawNotification) -> Option<Notification> {
        match raw.decode() {
            Ok(note) => Some(note),
            Err(e) => {
                self.fail(e.to_string());
                None
            }
        }
    }
}

impl futures_util::Stream for Notifications {
    type Item = Notification;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Notification>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(raw)) => {
                self.taken += 1;
                Poll::Ready(self.decoded(raw))
            }
            other => other.map(|_| None),
        }
    }
}

impl Connection {
    /// Starts the connection's reader and writer tasks over `stream` on the current
    /// tokio runtime.
    pub(crate) fn start<T: Transport>(
        stream: T,
        options: &ConnectOptions,
    ) -> (Arc<Connection>, Notifications) {
        let (read, write) = tokio::io::split(stream);
        let (note_tx, note_rx) = mpsc::channel(options.notification_capacity.max(1));
        let (ended, _) = watch::channel(false);
        let taps = Taps::default();
        let received = Arc::new(AtomicU64::new(0));
        let codec = TappingCodec::new(JsonRpcCodec::new(options.max_message_size), taps.clone());
        let shared = Arc::new(Shared {
            next_id: AtomicU64::new(1),
            taps,
            state: Mutex::new(State::default()),
            ended,
            request_timeout: options.request_timeout,
            id: NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed),
            notes_sent: AtomicU64::new(0),
            read: Mutex::new(ReadSide::new(
                Box::new(read),
                received.clone(),
                codec,
                note_tx,
            )),
            reader_task: AtomicWaker::new(),
            driver: AtomicWaker::new(),
            completed: AtomicU64::new(0),
            is_ended: AtomicBool::new(false),
        });
        let writer = Writer::new(Box::new(write), options.max_unsent);
        tokio::spawn({
            let (writer, shared) = (writer.clone(), shared.clone());
            async move {
                if let Err(e) = writer.run(shared.ended.subscribe()).await {
                    shared.fail(Error::io(e));
                }
            }
        });
        tokio::spawn(read_loop(
            shared.clone(),
            writer.clone(),
            received,
            Progress {
                probe: options.inactivity_probe,
                min_rate: options.min_receive_rate,
            },
        ));
        let connection = Arc::new(Connection { shared, writer });
        (
            connection.clone(),
            Notifications {
                rx: note_rx,
                connection,
                taken: 0,
            },
        )
    }
}
