//! The read half of a connection: what the server sends, framed and handed out
//! (replies to their requests, pieces of tapped replies to their decoders,
//! notifications to the stream, `echo` answered), and the inactivity probe.
//!
//! Two kinds of reader take turns. The reader task reads whenever nobody else does. A
//! caller waiting for its reply reads for itself while it waits
//! ([`ReplyWait`]): its waker, not the task's, is then the one the socket wakes, and
//! its reply comes straight to it, without a hop through the task, a channel and, for
//! a caller that is `block_on`'s future, an extra turn of the runtime's driver. What
//! it reads for others it hands out as the task would. Once its own reply is in (or
//! a notification or a piece of a tapped reply could not be handed on without
//! waiting, or the connection ended), it gives reading back and wakes the task, which
//! reads on (and hands on first what was held back, with the wait it needs).
//!
//! A transaction's caller that reads for itself has its reply, when it lies whole at
//! the front of what was read, decoded there ([`crate::tap::Frame::Transact`]): not
//! framed first, copied out and parsed again. Anything else is framed the general way.

use std::future::Future;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, MutexGuard, TryLockError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use tokio::io::AsyncRead;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::FramedRead;

use crate::codec::{reply_id, Outgoing, RawMessage};
use crate::connection::{Answer, Pending, Reply, Shared};
use crate::error::Error;
use crate::monitor::RawNotification;
use crate::reply::ServerError;
use crate::tap::{Frame, Tap, TappingCodec};
use crate::writer::Writer;

type ReadStream = FramedRead<Counting<Box<dyn AsyncRead + Send + Unpin>>, TappingCodec>;

/// The read half and where what is read goes, behind [`Shared::read_side`]: whoever
/// holds the lock may read.
pub(crate) struct ReadSide {
    /// `None` once the connection has ended.
    stream: Option<ReadStream>,
    /// The [`crate::Notifications`] stream's sender; `None` once it was dropped.
    notes: Option<mpsc::Sender<RawNotification>>,
    /// What was read but could not be handed on without waiting: nothing more is
    /// read until the task has handed it on.
    held: Option<Held>,
    /// The task is handing `held` on (it waits outside the lock).
    delivering: bool,
    /// The request whose caller reads now: its waker is the one on the socket.
    driver: Option<u64>,
    /// Turns callers took at reading, for [`Shared::take_back`].
    turns: u64,
}

impl ReadSide {
    /// `read`, framed by `codec`, counting its bytes in `received`; notifications go
    /// to `notes`.
    pub(crate) fn new(
        read: Box<dyn AsyncRead + Send + Unpin>,
        received: Arc<AtomicU64>,
        codec: TappingCodec,
        notes: mpsc::Sender<RawNotification>,
    ) -> ReadSide {
        ReadSide {
            stream: Some(FramedRead::new(
                Counting {
                    inner: read,
                    received,
                },
                codec,
            )),
            notes: Some(notes),
            held: None,
            delivering: false,
            driver: None,
            turns: 0,
        }
    }

    /// `read` with the reply to `own` (a transaction's id and number of operations),
    /// if given, decoded where it lies while it runs, and only then: no other reader
    /// gets a reply so.
    fn own_turn<T>(
        &mut self,
        own: Option<(u64, usize)>,
        read: impl FnOnce(&mut ReadSide) -> T,
    ) -> T {
        let set = |side: &mut ReadSide, own| {
            if let Some(stream) = side.stream.as_mut() {
                stream.decoder_mut().own = own;
            }
        };
        if own.is_none() {
            return read(self);
        }
        set(self, own);
        let out = read(self);
        set(self, None);
        out
    }

    /// Drops the read half and the notifications' sender (the stream then ends).
    fn close(&mut self) {
        self.stream = None;
        self.notes = None;
        self.held = None;
        self.driver = None;
    }

    /// Ends the connection with `err`, read side first.
    fn end(&mut self, shared: &Shared, err: Error) -> Pumped {
        self.close();
        shared.fail(err);
        Pumped::Ended
    }
}

/// A notification or a piece of a tapped reply that waits to be handed on.
enum Held {
    Note(RawNotification),
    Piece {
        id: u64,
        tap: Tap,
        bytes: Bytes,
        last: bool,
    },
}

/// What one message read gave.
enum Step {
    /// Handed out: read on.
    Read,
    /// The reply the reader was waiting for.
    Found(Reply),
    /// Could not be handed on without waiting.
    Hold(Held),
}

/// How a turn at reading ended.
enum Pumped {
    /// Nothing more to read now; the reader's waker is on the socket.
    Pending,
    /// The reader's own reply.
    Found(Reply),
    /// Something is held back for the task to hand on.
    Stalled,
    /// The connection ended.
    Ended,
}

/// Reads and hands out messages until the socket has nothing more, or the reply to
/// `want` is in, or something must be held back, or the connection ends.
fn pump(
    side: &mut ReadSide,
    cx: &mut Context<'_>,
    shared: &Shared,
    writer: &Writer,
    want: Option<u64>,
) -> Pumped {
    loop {
        let Some(stream) = side.stream.as_mut() else {
            return Pumped::Ended;
        };
        let step = match Pin::new(stream).poll_next(cx) {
            Poll::Pending => return Pumped::Pending,
            Poll::Ready(None) => {
                let why = "the server closed the connection";
                return side.end(shared, Error::closed(Some(why.into())));
            }
            Poll::Ready(Some(Err(e))) => return side.end(shared, e.into()),
            Poll::Ready(Some(Ok(Frame::Message(m)))) => {
                shared.completed.fetch_add(1, Ordering::Relaxed);
                dispatch(m, writer, &mut side.notes, shared, want)
            }
            Poll::Ready(Some(Ok(Frame::Piece {
                id,
                tap,
                bytes,
                last,
            }))) => match tap.try_send(bytes) {
                Err(TrySendError::Full(bytes)) => Ok(Step::Hold(Held::Piece {
                    id,
                    tap,
                    bytes,
                    last,
                })),
                // A decoder that gave up leaves the rest of the reply to be skipped.
                Ok(()) | Err(TrySendError::Closed(_)) => last_piece_in(id, tap, last, shared, want),
            },
            Poll::Ready(Some(Ok(Frame::Transact { id, outcome }))) => {
                shared.completed.fetch_add(1, Ordering::Relaxed);
                complete(id, Ok(Answer::Transact(outcome)), shared, want)
            }
        };
        match step {
            Ok(Step::Read) => {}
            Ok(Step::Found(reply)) => return Pumped::Found(reply),
            Ok(Step::Hold(held)) => {
                side.held = Some(held);
                return Pumped::Stalled;
            }
            Err(e) => return side.end(shared, e),
        }
    }
}

/// After a piece of the reply to `id` went to its tap: on the `last` one, the
/// request is complete (its result is what the decoder read).
fn last_piece_in(
    id: u64,
    tap: Tap,
    last: bool,
    shared: &Shared,
    want: Option<u64>,
) -> Result<Step, Error> {
    if !last {
        return Ok(Step::Read);
    }
    shared.completed.fetch_add(1, Ordering::Relaxed);
    // The decoder sees the end of its bytes before the request completes.
    drop(tap);
    complete(id, Ok(Answer::Text(Bytes::new())), shared, want)
}

/// Completes request `id` with `reply`: back to the reader when it waits for it
/// (`want`), else through the request's channel. A reply to a request given up is
/// dropped.
fn complete(id: u64, reply: Reply, shared: &Shared, want: Option<u64>) -> Result<Step, Error> {
    let Some(pending) = shared.take_pending(id)? else {
        return Ok(Step::Read);
    };
    if want == Some(id) {
        return Ok(Step::Found(reply));
    }
    let _ = pending.reply.send(reply);
    Ok(Step::Read)
}

/// The reader task: reads whenever no caller does, hands on what a reader held back,
/// and keeps the inactivity probe, until the connection ends.
pub(crate) async fn read_loop(
    shared: Arc<Shared>,
    writer: Arc<Writer>,
    received: Arc<AtomicU64>,
    Progress { probe, min_rate }: Progress,
) {
    let mut ended = shared.ended.subscribe();
    // One timer for the connection, ticking rather than restarted for each message.
    // Each tick, a caller that read nothing since the last one while reading was its
    // gives it back; each probe interval (a whole number of ticks), an interval with
    // no byte received sends a probe, a second one ends the connection.
    let per_probe = probe.map(|p| p.as_nanos().div_ceil(TAKE_BACK.as_nanos()).max(1) as u32);
    let tick = match (probe, per_probe) {
        (Some(p), Some(n)) => p / n,
        _ => TAKE_BACK,
    };
    let mut watch = Watch {
        period: probe.unwrap_or(TAKE_BACK),
        min_rate,
        seen: 0,
        completed_seen: 0,
        probing: false,
        slow: false,
    };
    let mut ticks = 0;
    let mut seen_reader = None;
    let idle = tokio::time::sleep(tick);
    tokio::pin!(idle);
    // Waited for across turns, not made anew for each.
    let end = ended.wait_for(|e| *e);
    tokio::pin!(end);
    loop {
        // What was held back is handed on first, nothing read meanwhile: a
        // notifications stream not read stops the connection's reading.
        if let Some((held, notes)) = shared.take_held() {
            if let Err(e) = hand_on(held, notes, &shared).await {
                shared.read_side().end(&shared, e);
                return;
            }
            continue;
        }
        let flow = tokio::select! {
            // A message ready is taken before the other branches are looked at.
            biased;
            flow = std::future::poll_fn(|cx| task_turn(&shared, &writer, cx)) => flow,
            _ = &mut end => ControlFlow::Break(()),
            _ = &mut idle => {
                idle.as_mut().reset(tokio::time::Instant::now() + tick);
                shared.take_back(&mut seen_reader);
                ticks += 1;
                if per_probe.is_none_or(|n| ticks < n) {
                    continue;
                }
                ticks = 0;
                let completed = shared.completed.load(Ordering::Relaxed);
                let tick = watch.tick(received.load(Ordering::Relaxed), completed);
                let probed = tick.and_then(|t| match t {
                    Tick::Probe => send_probe(&shared, &writer),
                    Tick::Quiet => Ok(()),
                });
                match probed {
                    Ok(()) => ControlFlow::Continue(()),
                    Err(e) => {
                        shared.fail(e);
                        ControlFlow::Break(())
                    }
                }
            }
        };
        if flow.is_break() {
            shared.read_side().close();
            return;
        }
    }
}

/// The longest a caller that reads for itself may go unpolled before the task takes
/// reading back (between one and two of these).
const TAKE_BACK: Duration = Duration::from_secs(1);

/// The task's turn at reading: none while a caller reads (it wakes the task when it
/// stops). Ready when something was held back, or the connection ended.
fn task_turn(shared: &Shared, writer: &Writer, cx: &mut Context<'_>) -> Poll<ControlFlow<()>> {
    // Whoever stops reading wakes the task through this, whether or not the task's
    // waker is also on the socket.
    shared.reader_task.register(cx.waker());
    let mut side = shared.read_side();
    if side.held.is_some() {
        return Poll::Ready(ControlFlow::Continue(()));
    }
    if side.driver.is_some() {
        return Poll::Pending;
    }
    match pump(&mut side, cx, shared, writer, None) {
        Pumped::Pending => Poll::Pending,
        Pumped::Stalled | Pumped::Found(_) => Poll::Ready(ControlFlow::Continue(())),
        Pumped::Ended => Poll::Ready(ControlFlow::Break(())),
    }
}

/// Hands on what was held back, waiting as long as its receiver needs.
async fn hand_on(
    held: Held,
    notes: Option<mpsc::Sender<RawNotification>>,
    shared: &Shared,
) -> Result<(), Error> {
    let result = match held {
        Held::Note(note) => match notes {
            Some(tx) => match tx.send(note).await {
                Ok(()) => {
                    shared.notes_sent.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                }
                Err(unsent) => {
                    shared.read_side().notes = None;
                    unsent.0.decode().map(drop).map_err(Error::protocol)
                }
            },
            None => note.decode().map(drop).map_err(Error::protocol),
        },
        Held::Piece {
            id,
            tap,
            bytes,
            last,
        } => {
            // A decoder that gave up leaves the rest of the reply to be skipped.
            let _ = tap.send(bytes).await;
            last_piece_in(id, tap, last, shared, None).map(drop)
        }
    };
    shared.read_side().delivering = false;
    result
}

impl Shared {
    /// The read side, locked. Every critical section leaves it whole, so a poisoned
    /// lock is still usable.
    pub(crate) fn read_side(&self) -> MutexGuard<'_, ReadSide> {
        self.read.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What was held back, for the task to hand on, with the notifications' sender.
    fn take_held(&self) -> Option<(Held, Option<mpsc::Sender<RawNotification>>)> {
        let mut side = self.read_side();
        let held = side.held.take()?;
        side.delivering = true;
        Some((held, side.notes.clone()))
    }

    /// A turn at reading for the caller waiting for the reply to `id` (a transaction
    /// of `operations`), if nobody else reads and nothing waits to be handed on.
    fn caller_turn(
        &self,
        id: u64,
        operations: Option<usize>,
        cx: &mut Context<'_>,
        writer: &Writer,
    ) -> Turn {
        let mut side = match self.read.try_lock() {
            Ok(side) => side,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Turn::NotNow,
        };
        let busy = side.held.is_some()
            || side.delivering
            || side.stream.is_none()
            || side.driver.is_some_and(|d| d != id)
            || self.is_ended();
        if busy {
            self.give_back(side, id);
            return Turn::NotNow;
        }
        side.driver = Some(id);
        side.turns += 1;
        self.driver.register(cx.waker());
        let own = operations.map(|n| (id, n));
        let pumped = side.own_turn(own, |side| pump(side, cx, self, writer, Some(id)));
        if let Pumped::Pending = pumped {
            return Turn::Reading;
        }
        self.give_back(side, id);
        match pumped {
            Pumped::Found(reply) => Turn::Found(reply),
            _ => Turn::NotNow,
        }
    }

    /// Takes reading back from a caller that read nothing since the last tick, when
    /// `seen` (the reader and its turns at the last tick) is still what it was: its
    /// future was left unpolled (put aside, or its task busy elsewhere), and the
    /// connection must not wait for it. It is woken, to wait for its reply the
    /// other way; a caller merely waiting long for its reply takes reading up again.
    fn take_back(&self, seen: &mut Option<(u64, u64)>) {
        let mut side = self.read_side();
        let now = side.driver.map(|d| (d, side.turns));
        if now.is_none() || now != *seen {
            *seen = now;
            return;
        }
        side.driver = None;
        *seen = None;
        drop(side);
        self.driver.wake();
    }

    /// The caller waiting for `id` stops reading, if it was: the task reads on.
    fn stop_reading(&self, id: u64) {
        self.give_back(self.read_side(), id);
    }

    /// Reading goes back from the caller waiting for `id`, if it was its, to the
    /// task, which is woken (outside the lock) to read on.
    fn give_back(&self, mut side: MutexGuard<'_, ReadSide>, id: u64) {
        if side.driver == Some(id) {
            side.driver = None;
            drop(side);
            self.reader_task.wake();
        }
    }
}

/// What a waiting caller's turn at reading gave.
enum Turn {
    /// Its reply.
    Found(Reply),
    /// It reads: its waker is on the socket.
    Reading,
    /// Somebody else reads, or must first: its reply comes through its channel.
    NotNow,
}

/// The wait for the reply to request `id`, during which the caller reads for itself
/// when nobody else does (see the module's documentation). Resolves to the reply, or
/// to an error when the request was dropped (the connection ended).
pub(crate) struct ReplyWait<'a> {
    shared: &'a Shared,
    writer: &'a Writer,
    id: u64,
    rx: oneshot::Receiver<Reply>,
    /// Whether the caller may read: not where waking the task would cost more than
    /// the hop it saves ([`may_read_here`]).
    may_read: bool,
    /// It reads now.
    reading: bool,
    /// For a transaction, its number of operations: a reply this caller reads for
    /// itself is decoded where it lies ([`Frame::Transact`]).
    operations: Option<usize>,
}

impl<'a> ReplyWait<'a> {
    /// The wait for the reply to `id` that `rx` receives; `operations` for a
    /// transaction.
    pub(crate) fn new(
        shared: &'a Shared,
        writer: &'a Writer,
        id: u64,
        rx: oneshot::Receiver<Reply>,
        operations: Option<usize>,
    ) -> ReplyWait<'a> {
        ReplyWait {
            shared,
            writer,
            id,
            rx,
            may_read: may_read_here(),
            reading: false,
            operations,
        }
    }
}

/// Whether a caller on this thread reads for itself: in a task, or on a
/// current-thread runtime. A caller on a thread outside a multi-thread runtime's
/// workers (the future `block_on` runs, as `#[tokio::main]` runs `main`) leaves
/// reading to the task: waking the task when it stopped reading would cross to a
/// worker's thread, which cost more than the hop saved (one at a time, 0.66x a raw
/// socket against 0.71x, in `cargo bench -p integration-tests --bench transact`).
fn may_read_here() -> bool {
    tokio::task::try_id().is_some()
        || tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread)
}

impl Future for ReplyWait<'_> {
    type Output = Result<Reply, oneshot::error::RecvError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        // Handed over already (by whoever read it, or by the connection's end or
        // `cancel`, which wake a caller that reads): nothing to read for it.
        if let Some(done) = this.handed_over(cx) {
            return Poll::Ready(done);
        }
        if this.may_read {
            match this
                .shared
                .caller_turn(this.id, this.operations, cx, this.writer)
            {
                Turn::Found(reply) => {
                    this.reading = false;
                    return Poll::Ready(Ok(reply));
                }
                Turn::Reading => {
                    this.reading = true;
                    return match this.handed_over(cx) {
                        Some(done) => Poll::Ready(done),
                        None => Poll::Pending,
                    };
                }
                Turn::NotNow => this.reading = false,
            }
        }
        Pin::new(&mut this.rx).poll(cx)
    }
}

impl ReplyWait<'_> {
    /// The reply, if it came through the channel; the caller then reads no more.
    fn handed_over(&mut self, cx: &mut Context<'_>) -> Option<<Self as Future>::Output> {
        let done = match self.rx.try_recv() {
            Ok(reply) => Ok(reply),
            Err(oneshot::error::TryRecvError::Empty) => return None,
            // The request was dropped; polling says so with the channel's error.
            Err(oneshot::error::TryRecvError::Closed) => match Pin::new(&mut self.rx).poll(cx) {
                Poll::Ready(done) => done,
                Poll::Pending => return None,
            },
        };
        if self.reading {
            self.reading = false;
            self.shared.stop_reading(self.id);
        }
        Some(done)
    }
}

impl Drop for ReplyWait<'_> {
    fn drop(&mut self) {
        if self.reading {
            self.shared.stop_reading(self.id);
        }
    }
}

/// A reader that counts the bytes it reads: any byte from the server is activity for
/// the inactivity probe, as in OVS, so a long message in transit is not taken for a
/// dead peer.
struct Counting<R> {
    inner: R,
    received: Arc<AtomicU64>,
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Counting<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 {
            self.received.fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }
}

/// What the reader checks of the server's liveness: the inactivity probe's interval,
/// and the slowest a message may arrive ([`crate::ConnectOptions::min_receive_rate`]).
pub(crate) struct Progress {
    pub(crate) probe: Option<Duration>,
    pub(crate) min_rate: Option<u64>,
}

/// The reader's watch over the server's liveness, checked once an interval.
struct Watch {
    period: Duration,
    min_rate: Option<u64>,
    /// Bytes received as of the last interval.
    seen: u64,
    /// Messages completed as of the last interval.
    completed_seen: u64,
    /// A probe went out in the last interval.
    probing: bool,
    /// The last interval was too slow for a message in transit.
    slow: bool,
}

/// What an interval's check asks of the reader.
enum Tick {
    /// Nothing: the server is alive.
    Quiet,
    /// Send a probe: nothing came in the interval.
    Probe,
}

impl Watch {
    /// The check at the end of an interval, `received` bytes and `completed` messages
    /// in so far: an error ends the connection.
    fn tick(&mut self, received: u64, completed: u64) -> Result<Tick, Error> {
        let stuck = completed == self.completed_seen;
        self.completed_seen = completed;
        // Bytes of a message still arriving are activity too, if they come fast
        // enough.
        if received != self.seen {
            let bytes = received - self.seen;
            self.seen = received;
            self.probing = false;
            let period = self.period;
            let floor = self.min_rate.map(|r| r as f64 * period.as_secs_f64());
            if stuck && floor.is_some_and(|f| (bytes as f64) < f) {
                if self.slow {
                    return Err(Error::closed(Some(
                        format!(
                            "a message from the server has been arriving at {bytes} bytes in {period:?}, \
                             slower than the minimum of {} bytes per second (ConnectOptions::min_receive_rate)",
                            self.min_rate.unwrap_or_default()
                        )
                        .into(),
                    )));
                }
                self.slow = true;
            } else {
                self.slow = false;
            }
            return Ok(Tick::Quiet);
        }
        self.slow = false;
        if self.probing {
            return Err(Error::silent(self.period));
        }
        self.probing = true;
        Ok(Tick::Probe)
    }
}

/// Sends an `echo` whose reply only shows the server is alive.
fn send_probe(shared: &Shared, writer: &Writer) -> Result<(), Error> {
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let (tx, _rx) = oneshot::channel();
    shared.lock().pending.insert(
        id,
        Pending {
            method: "echo",
            reply: tx,
        },
    );
    writer
        .send(Outgoing::Request {
            id,
            method: "echo".into(),
            params: Bytes::from_static(b"[\"inactivity probe\"]"),
        })
        .map_err(Error::io)
}

/// The members of a message that JSON-RPC gives a meaning to, found in one pass over
/// its members. The first of a name counts (as in [`RawMessage::member`]); any other
/// member is checked to be JSON and otherwise ignored.
#[derive(Default)]
struct Envelope {
    id: Option<Bytes>,
    method: Option<Bytes>,
    params: Option<Bytes>,
    result: Option<Bytes>,
    error: Option<Bytes>,
}

impl Envelope {
    fn of(msg: &RawMessage) -> Result<Envelope, Error> {
        let mut envelope = Envelope::default();
        for (key, value) in msg.member_spans() {
            let text = &msg.as_bytes()[key.clone()];
            let slot = match known_name(text) {
                Some(Known::Id) => &mut envelope.id,
                Some(Known::Method) => &mut envelope.method,
                Some(Known::Params) => &mut envelope.params,
                Some(Known::Result) => &mut envelope.result,
                Some(Known::Error) => &mut envelope.error,
                None => {
                    check_unread(text, &msg.as_bytes()[value.clone()])?;
                    continue;
                }
            };
            if slot.is_none() {
                *slot = Some(msg.slice(value.clone()));
            }
        }
        Ok(envelope)
    }
}

/// A member name JSON-RPC gives a meaning to.
#[derive(Clone, Copy)]
enum Known {
    Id,
    Method,
    Params,
    Result,
    Error,
}

/// The member a key names when it is one JSON-RPC reads: `raw` is the key's JSON text,
/// quotes included. A member name is a JSON string, so a key with an escape
/// (`"\u0069d"`) is compared unescaped.
fn known_name(raw: &[u8]) -> Option<Known> {
    let unescaped: String;
    let name = if raw.contains(&b'\\') {
        unescaped = serde_json::from_slice(raw).ok()?;
        unescaped.as_bytes()
    } else {
        raw.get(1..raw.len().saturating_sub(1))?
    };
    match name {
        b"id" => Some(Known::Id),
        b"method" => Some(Known::Method),
        b"params" => Some(Known::Params),
        b"result" => Some(Known::Result),
        b"error" => Some(Known::Error),
        _ => None,
    }
}

/// Checks a member no part of the client reads: its name must be a JSON string and its
/// value JSON (the framer only matched its brackets).
fn check_unread(key: &[u8], value: &[u8]) -> Result<(), Error> {
    let name: String = serde_json::from_slice(key).map_err(|e| {
        Error::protocol(format!(
            "a message member's name {} is not a JSON string: {e}",
            String::from_utf8_lossy(key)
        ))
    })?;
    serde_json::from_slice::<serde::de::IgnoredAny>(value)
        .map_err(|e| Error::protocol(format!("member {name:?} of a message is not JSON: {e}")))?;
    Ok(())
}

/// Checks that `text`, which the client will write back as it came (a server request's
/// id, an echo's params), is JSON that any reader accepts: skipping over it is not
/// enough, since a skip does not look inside strings (invalid UTF-8, a lone surrogate
/// escape), so it is read whole.
fn echoable(text: &[u8]) -> Result<(), serde_json::Error> {
    serde_json::from_slice::<serde_json::Value>(text).map(drop)
}

/// Hands out one whole message: a reply to its request (or back to the reader, when
/// it is the reply to `want`), a notification to the stream, an answer to the
/// server's `echo`.
fn dispatch(
    msg: RawMessage,
    writer: &Writer,
    notes: &mut Option<mpsc::Sender<RawNotification>>,
    shared: &Shared,
    want: Option<u64>,
) -> Result<Step, Error> {
    let Envelope {
        id,
        method,
        params,
        result,
        error,
    } = Envelope::of(&msg)?;
    if let Some(method) = method {
        return server_message(method, id, params, writer, notes, shared);
    }
    let id_text = id.ok_or_else(|| Error::protocol("message has neither \"method\" nor \"id\""))?;
    // Read as the framer read it (`reply_id`): a reply to a request decoded while it
    // arrives never comes here whole, it went to its decoder in pieces.
    let id = reply_id(&id_text).ok_or_else(|| {
        Error::protocol(format!(
            "reply to no request: id {} was never sent",
            String::from_utf8_lossy(&id_text)
        ))
    })?;
    let Some(pending) = shared.take_pending(id)? else {
        return Ok(Step::Read);
    };
    let error = error.filter(|e| &e[..] != b"null");
    let reply = match error {
        Some(e) => {
            let raw: serde_json::Value = serde_json::from_slice(&e)
                .map_err(|e| Error::protocol(format!("malformed error in reply {id}: {e}")))?;
            Err(Error::server(pending.method, ServerError::from_json(raw)))
        }
        None => match result {
            Some(r) => Ok(Answer::Text(r)),
            None => Err(Error::protocol(format!(
                "reply {id} to {} has neither result nor error",
                pending.method
            ))),
        },
    };
    if want == Some(id) {
        return Ok(Step::Found(reply));
    }
    let _ = pending.reply.send(reply);
    Ok(Step::Read)
}

/// A message the server sent unasked: a notification (no id) for the stream, or a
/// request, answered.
fn server_message(
    method: Bytes,
    id: Option<Bytes>,
    params: Option<Bytes>,
    writer: &Writer,
    notes: &mut Option<mpsc::Sender<RawNotification>>,
    shared: &Shared,
) -> Result<Step, Error> {
    let id_is_null = id.as_deref().is_none_or(|i| i == b"null");
    let method: String = serde_json::from_slice(&method)
        .map_err(|e| Error::protocol(format!("method name is not a string: {e}")))?;
    let params = params.unwrap_or_else(|| Bytes::from_static(b"[]"));
    if id_is_null {
        // Decoded by whoever reads it; with nobody reading, still checked.
        let note = RawNotification { method, params };
        let Some(tx) = notes else {
            note.decode().map_err(Error::protocol)?;
            return Ok(Step::Read);
        };
        match tx.try_send(note) {
            Ok(()) => {
                shared.notes_sent.fetch_add(1, Ordering::SeqCst);
            }
            Err(TrySendError::Full(note)) => return Ok(Step::Hold(Held::Note(note))),
            Err(TrySendError::Closed(unsent)) => {
                tracing::debug!("notifications stream dropped; later notifications are discarded");
                *notes = None;
                unsent.decode().map_err(Error::protocol)?;
            }
        }
        return Ok(Step::Read);
    }
    // Sent back in the answer as it came: it must be JSON, or what goes out is not.
    let id = id.unwrap_or_default();
    echoable(&id).map_err(|e| {
        Error::protocol(format!(
            "the id {} of the server's {method:?} request is not JSON: {e}",
            String::from_utf8_lossy(&id)
        ))
    })?;
    let reply = if method == "echo" {
        // Sent back as it came: checked first, so that nothing invalid goes out.
        echoable(&params).map_err(|e| {
            Error::protocol(format!("the params of the server's echo are not JSON: {e}"))
        })?;
        Outgoing::Response { id, result: params }
    } else {
        tracing::warn!(%method, "server sent a request this client does not handle");
        Outgoing::Response {
            id,
            result: Bytes::from_static(b"null"),
        }
    };
    writer.send(reply).map_err(Error::io)?;
    Ok(Step::Read)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(text: &str) -> Result<Envelope, Error> {
        Envelope::of(&RawMessage::from_bytes(text.as_bytes().to_vec()).unwrap())
    }

    fn text(b: &Option<Bytes>) -> Option<&str> {
        b.as_deref().map(|b| std::str::from_utf8(b).unwrap())
    }

    #[test]
    fn the_envelope_finds_each_member_once_escaped_or_not_and_the_first_of_a_name_counts() {
        let e = envelope(
            r#"{"\u0069d":7,"extra":{"a":[1]},"result":[1],"error":null,"result":"second","method":"m","params":[]}"#,
        )
        .unwrap();
        assert_eq!(text(&e.id), Some("7"));
        assert_eq!(text(&e.result), Some("[1]"));
        assert_eq!(text(&e.error), Some("null"));
        assert_eq!(text(&e.method), Some("\"m\""));
        assert_eq!(text(&e.params), Some("[]"));
        let e = envelope(r#"{"ids":1,"i":2,"":3}"#).unwrap();
        assert!(e.id.is_none() && e.result.is_none());
    }

    #[test]
    fn a_member_nobody_reads_must_still_be_json() {
        let e = envelope(r#"{"id":1,"result":[],"extra":tru}"#)
            .err()
            .unwrap();
        assert!(
            e.to_string().contains("\"extra\" of a message is not JSON"),
            "{e}"
        );
    }
}
