//! One connection's machinery: the requests in flight matched by id, the reader task
//! that frames what the server sends and hands it out (replies to their requests,
//! pieces of tapped replies to their decoders, notifications to the stream, `echo`
//! answered), and the inactivity probe.

use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::codec::FramedRead;

use crate::codec::{reply_id, JsonRpcCodec, Outgoing, RawMessage};
use crate::config::ConnectOptions;
use crate::error::Error;
use crate::monitor::{Notification, RawNotification};
use crate::reply::ServerError;
use crate::tap::{Frame, TappingCodec, Taps};
use crate::transport::Transport;
use crate::writer::Writer;

pub(crate) type Reply = Result<Bytes, Error>;

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
    fn take_pending(&self, id: u64) -> Result<Option<Pending>, Error> {
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
        self.ended.send_replace(true);
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
        let shared = Arc::new(Shared {
            next_id: AtomicU64::new(1),
            taps: taps.clone(),
            state: Mutex::new(State::default()),
            ended,
            request_timeout: options.request_timeout,
            id: NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed),
            notes_sent: AtomicU64::new(0),
        });
        let writer = Writer::new(Box::new(write), options.max_unsent);
        let received = Arc::new(AtomicU64::new(0));
        let reader = FramedRead::new(
            Counting {
                inner: read,
                received: received.clone(),
            },
            TappingCodec::new(JsonRpcCodec::new(options.max_message_size), taps),
        );
        tokio::spawn({
            let (writer, shared) = (writer.clone(), shared.clone());
            async move {
                if let Err(e) = writer.run(shared.ended.subscribe()).await {
                    shared.fail(Error::io(e));
                }
            }
        });
        tokio::spawn(read_loop(
            reader,
            received,
            writer.clone(),
            note_tx,
            shared.clone(),
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
struct Progress {
    probe: Option<Duration>,
    min_rate: Option<u64>,
}

async fn read_loop<R: tokio::io::AsyncRead + Unpin>(
    mut stream: FramedRead<Counting<R>, TappingCodec>,
    received: Arc<AtomicU64>,
    writer: Arc<Writer>,
    notes: mpsc::Sender<RawNotification>,
    shared: Arc<Shared>,
    Progress { probe, min_rate }: Progress,
) {
    let mut ended = shared.ended.subscribe();
    let mut notes = Some(notes);
    // Messages completed.
    let mut completed = 0u64;
    // One timer for the connection, checked each interval rather than restarted for
    // each message: an interval with no byte received sends a probe, a second one
    // ends the connection.
    let period = probe.unwrap_or(Duration::from_secs(3600 * 24 * 365));
    let mut watch = Watch {
        period,
        min_rate,
        seen: 0,
        completed_seen: 0,
        probing: false,
        slow: false,
    };
    let idle = tokio::time::sleep(period);
    tokio::pin!(idle);
    // Waited for across messages, not made anew for each.
    let end = ended.wait_for(|e| *e);
    tokio::pin!(end);
    loop {
        let next = tokio::select! {
            // A message ready is taken before the other branches are looked at.
            biased;
            m = stream.next() => m,
            _ = &mut end => return,
            _ = &mut idle, if probe.is_some() => {
                idle.as_mut().reset(tokio::time::Instant::now() + period);
                let tick = watch.tick(received.load(Ordering::Relaxed), completed);
                let probed = tick.and_then(|t| match t {
                    Tick::Probe => send_probe(&shared, &writer),
                    Tick::Quiet => Ok(()),
                });
                if let Err(e) = probed {
                    shared.fail(e);
                    return;
                }
                continue;
            }
        };
        let msg = match next {
            None => {
                shared.fail(Error::closed(Some(
                    "the server closed the connection".into(),
                )));
                return;
            }
            Some(Err(e)) => {
                shared.fail(e.into());
                return;
            }
            Some(Ok(Frame::Message(m))) => {
                completed += 1;
                m
            }
            Some(Ok(Frame::Piece {
                id,
                tap,
                bytes,
                last,
            })) => {
                // Waits while the decoder is behind: the connection stops reading. A
                // decoder that gave up leaves the rest of the reply to be skipped.
                let _ = tap.send(bytes).await;
                if last {
                    completed += 1;
                    drop(tap);
                    if let Err(e) = complete_tapped(id, &shared) {
                        shared.fail(e);
                        return;
                    }
                }
                continue;
            }
        };
        if let Err(e) = dispatch(msg, &writer, &mut notes, &shared).await {
            shared.fail(e);
            return;
        }
    }
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

/// Completes request `id`, whose reply went whole to its tap.
fn complete_tapped(id: u64, shared: &Shared) -> Result<(), Error> {
    let Some(pending) = shared.take_pending(id)? else {
        return Ok(());
    };
    let _ = pending.reply.send(Ok(Bytes::new()));
    Ok(())
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

async fn dispatch(
    msg: RawMessage,
    writer: &Writer,
    notes: &mut Option<mpsc::Sender<RawNotification>>,
    shared: &Shared,
) -> Result<(), Error> {
    let Envelope {
        id,
        method,
        params,
        result,
        error,
    } = Envelope::of(&msg)?;
    let id_is_null = id.as_deref().is_none_or(|i| i == b"null");
    if let Some(method) = method {
        let method: String = serde_json::from_slice(&method)
            .map_err(|e| Error::protocol(format!("method name is not a string: {e}")))?;
        let params = params.unwrap_or_else(|| Bytes::from_static(b"[]"));
        if !id_is_null {
            // Sent back in the answer as it came: it must be JSON, or what goes out is not.
            let id = id.as_deref().unwrap_or_default();
            echoable(id).map_err(|e| {
                Error::protocol(format!(
                    "the id {} of the server's {method:?} request is not JSON: {e}",
                    String::from_utf8_lossy(id)
                ))
            })?;
        }
        if id_is_null {
            // Decoded by whoever reads it; with nobody reading, still checked.
            let note = RawNotification { method, params };
            match notes {
                Some(tx) => {
                    let sent = tx.send(note).await;
                    if sent.is_ok() {
                        shared.notes_sent.fetch_add(1, Ordering::SeqCst);
                    }
                    if let Err(unsent) = sent {
                        tracing::debug!(
                            "notifications stream dropped; later notifications are discarded"
                        );
                        *notes = None;
                        unsent.0.decode().map_err(Error::protocol)?;
                    }
                }
                None => {
                    note.decode().map_err(Error::protocol)?;
                }
            }
            return Ok(());
        }
        let reply = if method == "echo" {
            // Sent back as it came: checked first, so that nothing invalid goes out.
            echoable(&params).map_err(|e| {
                Error::protocol(format!("the params of the server's echo are not JSON: {e}"))
            })?;
            Outgoing::Response {
                id: id.unwrap_or_default(),
                result: params,
            }
        } else {
            tracing::warn!(%method, "server sent a request this client does not handle");
            Outgoing::Response {
                id: id.unwrap_or_default(),
                result: Bytes::from_static(b"null"),
            }
        };
        return writer.send(reply).map_err(Error::io);
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
        return Ok(());
    };
    let error = error.filter(|e| &e[..] != b"null");
    let reply = match error {
        Some(e) => {
            let raw: serde_json::Value = serde_json::from_slice(&e)
                .map_err(|e| Error::protocol(format!("malformed error in reply {id}: {e}")))?;
            Err(Error::server(pending.method, ServerError::from_json(raw)))
        }
        None => match result {
            Some(r) => Ok(r),
            None => Err(Error::protocol(format!(
                "reply {id} to {} has neither result nor error",
                pending.method
            ))),
        },
    };
    let _ = pending.reply.send(reply);
    Ok(())
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
