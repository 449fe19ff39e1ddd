//! The async client: one connection, many requests in flight matched by id, server
//! notifications delivered as a stream, `echo` answered without the caller.
//!
//! [`connect`] spawns the connection's two tasks (a reader and a writer) on the current
//! tokio runtime and returns a cloneable [`Client`] plus the [`Notifications`] stream.
//! The connection lives while a `Client` or the `Notifications` stream is alive.

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use futures_util::StreamExt;
use serde::de::{DeserializeOwned, DeserializeSeed};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::codec::FramedRead;

use crate::codec::{JsonRpcCodec, Outgoing, RawMessage, DEFAULT_MAX_MESSAGE_SIZE};
use crate::error::{Error, ServerError};
use crate::monitor::{MonitorRequest, MonitorSince, Notification, TableUpdates, TableUpdates2};
use crate::ops::{Operation, OperationResult};
use crate::remote::Remote;
use crate::reply::decode_transact_reply;
use crate::schema::DatabaseSchema;
use crate::tap::{Frame, TappingCodec, Taps, TAP_CAPACITY};
use crate::transport::{self, TlsConfig, Transport};
use crate::writer::Writer;
use uuid::Uuid;

/// How to connect.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// TLS files, required for `ssl:` remotes.
    pub tls: Option<TlsConfig>,
    /// The largest incoming message accepted, in bytes.
    pub max_message_size: usize,
    /// How many notifications may wait unread before the connection stops reading
    /// (backpressure: none is dropped).
    pub notification_capacity: usize,
    /// After this long without a message from the server, send it an `echo`; if that
    /// long passes again without a message, the connection is declared dead (a peer
    /// that vanished without closing TCP). `None` turns the probe off.
    pub inactivity_probe: Option<Duration>,
    /// The most bytes that may wait unsent because the server does not read (requests,
    /// and the replies to its `echo` requests); past it the connection fails with an
    /// error saying so, instead of buffering without bound.
    pub max_unsent: usize,
    /// How long a request waits for its reply before it fails with an unknown outcome
    /// (the connection stays up; a late reply is dropped). `None` (the default, as in
    /// OVS) waits as long as the connection lives.
    pub request_timeout: Option<Duration>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            tls: None,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            notification_capacity: 1024,
            inactivity_probe: Some(Duration::from_secs(5)),
            max_unsent: 64 << 20,
            request_timeout: None,
        }
    }
}

/// The id of a request this client sent, for [`Client::cancel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RequestId(pub u64);

type Reply = Result<Bytes, Error>;

struct Pending {
    method: &'static str,
    reply: oneshot::Sender<Reply>,
}

#[derive(Default)]
struct State {
    pending: HashMap<u64, Pending>,
    /// Requests given up before their reply came (a timeout, a dropped call): their
    /// late replies are dropped, not taken for a broken protocol.
    abandoned: std::collections::HashSet<u64>,
    closed: Option<Error>,
}

struct Shared {
    next_id: AtomicU64,
    /// Replies decoded while they arrive.
    taps: Taps,
    state: Mutex<State>,
    /// Becomes true once the connection has ended.
    ended: watch::Sender<bool>,
    /// How long a request may wait for its reply.
    request_timeout: Option<Duration>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the map inconsistent (every
        // critical section is a single insert, remove or drain), so poisoning is ignored.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Ends the connection: every request in flight gets `err`, later ones get it too.
    fn fail(&self, err: Error) {
        let drained: Vec<(Pending, Error)> = {
            let mut st = self.lock();
            if st.closed.is_some() {
                return;
            }
            tracing::debug!(error = %err, "ovsdb connection ended");
            // Requests in flight were (or may have been) sent: their outcome is unknown.
            let drained = st
                .pending
                .drain()
                .map(|(_, p)| (p, Error::outcome_unknown(err.duplicate())))
                .collect();
            st.closed = Some(err);
            drained
        };
        for (p, e) in drained {
            let _ = p.reply.send(Err(e));
        }
        self.ended.send_replace(true);
    }
}

/// A handle for sending requests on one connection; cheap to clone, usable from many
/// tasks at once.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    writer: Arc<Writer>,
    _handle: Arc<Handle>,
}

/// Held by every [`Client`] clone and by [`Notifications`]; when the last one goes,
/// the connection is closed.
struct Handle {
    shared: Arc<Shared>,
    writer: Arc<Writer>,
}

impl Drop for Handle {
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
pub struct Notifications {
    rx: mpsc::Receiver<Notification>,
    _handle: Arc<Handle>,
}

impl Notifications {
    /// The next notification; `None` once the connection has ended.
    pub async fn recv(&mut self) -> Option<Notification> {
        self.rx.recv().await
    }

    /// A notification if one is waiting, without waiting.
    pub fn try_recv(&mut self) -> Option<Notification> {
        self.rx.try_recv().ok()
    }
}

impl futures_util::Stream for Notifications {
    type Item = Notification;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Notification>> {
        self.rx.poll_recv(cx)
    }
}

/// Connects to a remote given as `tcp:HOST:PORT`, `unix:PATH` (or `ssl:…` through
/// [`connect_with`]), with default options.
pub async fn connect(remote: &str) -> Result<(Client, Notifications), Error> {
    let remote = Remote::parse(remote)?;
    connect_with(&remote, &ConnectOptions::default()).await
}

/// Connects to `remote` with the given options.
pub async fn connect_with(
    remote: &Remote,
    options: &ConnectOptions,
) -> Result<(Client, Notifications), Error> {
    let stream = transport::open(remote, options.tls.as_ref()).await?;
    Ok(Client::from_transport(stream, options))
}

impl Client {
    /// Runs the protocol over an already open stream. Must be called within a tokio
    /// runtime, on which the connection's tasks are spawned.
    pub fn from_transport<T: Transport>(
        stream: T,
        options: &ConnectOptions,
    ) -> (Client, Notifications) {
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
            options.inactivity_probe,
        ));
        let handle = Arc::new(Handle {
            shared: shared.clone(),
            writer: writer.clone(),
        });
        let client = Client {
            shared,
            writer,
            _handle: handle.clone(),
        };
        (
            client,
            Notifications {
                rx: note_rx,
                _handle: handle,
            },
        )
    }

    /// True when both handles use the same connection.
    pub fn same_connection(&self, other: &Client) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// True once the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.shared.lock().closed.is_some()
    }

    /// Waits until the connection ends and returns why.
    pub async fn closed(&self) -> Error {
        let mut rx = self.shared.ended.subscribe();
        let _ = rx.wait_for(|ended| *ended).await;
        self.shared
            .lock()
            .closed
            .as_ref()
            .map(Error::duplicate)
            .unwrap_or_else(|| Error::closed(None))
    }

    fn register(&self, method: &'static str) -> Result<(u64, oneshot::Receiver<Reply>), Error> {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let mut st = self.shared.lock();
        if let Some(e) = &st.closed {
            return Err(Error::unavailable(e.duplicate()));
        }
        st.pending.insert(id, Pending { method, reply: tx });
        Ok((id, rx))
    }

    async fn send_request(
        &self,
        id: u64,
        method: &'static str,
        params: Bytes,
        rx: oneshot::Receiver<Reply>,
    ) -> Reply {
        let msg = Outgoing::Request {
            id,
            method: method.to_owned(),
            params,
        };
        // However this ends (a reply, a timeout, the caller giving up), the request
        // is no longer waited for.
        struct Forget<'a>(&'a Shared, u64);
        impl Drop for Forget<'_> {
            fn drop(&mut self) {
                let mut st = self.0.lock();
                if st.pending.remove(&self.1).is_some() && st.closed.is_none() {
                    st.abandoned.insert(self.1);
                }
            }
        }
        let _forget = Forget(&self.shared, id);
        if let Err(e) = self.writer.send(msg) {
            self.shared.fail(Error::io(e));
            return Err(Error::unavailable(self.closed_error()));
        }
        let reply = match self.shared.request_timeout {
            None => rx.await,
            Some(t) => match tokio::time::timeout(t, rx).await {
                Ok(r) => r,
                Err(_) => {
                    return Err(Error::outcome_unknown(Error::io(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "no reply to {method} within {t:?} (ConnectOptions::request_timeout)"
                        ),
                    ))))
                }
            },
        };
        reply.unwrap_or_else(|_| Err(Error::outcome_unknown(self.closed_error())))
    }

    fn closed_error(&self) -> Error {
        self.shared
            .lock()
            .closed
            .as_ref()
            .map(Error::duplicate)
            .unwrap_or_else(|| Error::closed(None))
    }

    /// Sends a request with already serialized params and returns the raw result.
    pub async fn call_raw(&self, method: &'static str, params: Bytes) -> Result<Bytes, Error> {
        let (id, rx) = self.register(method)?;
        self.send_request(id, method, params, rx).await
    }

    /// Sends a request whose result `seed` decodes while the reply arrives, on a
    /// blocking thread, so that decoding a large reply (a monitor's initial contents)
    /// overlaps with the server sending it instead of following it.
    pub async fn call_decoding<S>(
        &self,
        method: &'static str,
        params: Bytes,
        seed: S,
    ) -> Result<S::Value, Error>
    where
        S: DeserializeSeed<'static> + Send + 'static,
        S::Value: Send + 'static,
    {
        let (id, rx) = self.register(method)?;
        let (tap, chunks) = mpsc::channel(TAP_CAPACITY);
        self.shared.taps.insert(id, tap);
        // Not tapped after this call ends, whichever way it ends.
        struct Untap<'a>(&'a Taps, u64);
        impl Drop for Untap<'_> {
            fn drop(&mut self) {
                self.0.remove(self.1);
            }
        }
        let _untap = Untap(&self.shared.taps, id);
        let decoder = tokio::task::spawn_blocking(move || decode_reply(chunks, seed));
        // A tapped reply reaches the request only as "done": its result, or the
        // server's error, is what the decoder read.
        self.send_request(id, method, params, rx).await?;
        match decoder.await {
            Ok(Ok(Ok(value))) => Ok(value),
            Ok(Ok(Err(error))) => Err(Error::server(method, ServerError::from_json(error))),
            Ok(Err(e)) => Err(Error::protocol(format!("malformed {method} reply: {e}"))),
            Err(e) => Err(Error::protocol(format!(
                "decoding the {method} reply failed: {e}"
            ))),
        }
    }

    /// Sends any request and decodes its result.
    pub async fn call<P: Serialize + ?Sized, R: DeserializeOwned>(
        &self,
        method: &'static str,
        params: &P,
    ) -> Result<R, Error> {
        let raw = self
            .call_raw(method, encode_params(method, params)?)
            .await?;
        parse_reply(method, &raw)
    }

    /// `list_dbs`: the names of the databases the server holds.
    pub async fn list_dbs(&self) -> Result<Vec<String>, Error> {
        self.call("list_dbs", &[(); 0]).await
    }

    /// `get_schema`, parsed.
    pub async fn get_schema(&self, db: &str) -> Result<DatabaseSchema, Error> {
        let json = self.get_schema_json(db).await?;
        DatabaseSchema::from_json(&json).map_err(|e| {
            Error::protocol(format!(
                "get_schema {db}: the server's schema is invalid: {e}"
            ))
        })
    }

    /// `get_schema`, as the server sent it.
    pub async fn get_schema_json(&self, db: &str) -> Result<serde_json::Value, Error> {
        self.call("get_schema", &[db]).await
    }

    /// `transact`: runs `operations` atomically on `db`.
    ///
    /// Returns one result per operation; a refused transaction is an error whose
    /// [`Error::as_transaction_error`] tells which operation failed and why.
    pub async fn transact(
        &self,
        db: &str,
        operations: &[Operation],
    ) -> Result<Vec<OperationResult>, Error> {
        let (_, fut) = self.transact_cancellable(db, operations)?;
        fut.await
    }

    /// Like [`transact`](Self::transact), but returns the request's id first, so that
    /// [`cancel`](Self::cancel) can end a transaction blocked in a `wait`.
    pub fn transact_cancellable(
        &self,
        db: &str,
        operations: &[Operation],
    ) -> Result<
        (
            RequestId,
            impl std::future::Future<Output = Result<Vec<OperationResult>, Error>> + Send + 'static,
        ),
        Error,
    > {
        let params = transact_params(db, operations)?;
        let n = operations.len();
        let (id, rx) = self.register("transact")?;
        let client = self.clone();
        Ok((RequestId(id), async move {
            let raw = client.send_request(id, "transact", params, rx).await?;
            match decode_transact_reply(&raw, n) {
                Ok(Ok(results)) => Ok(results),
                Ok(Err(e)) => Err(Error::transaction(e)),
                Err(msg) => Err(Error::protocol(msg)),
            }
        }))
    }

    /// `transact` with the params array (`[DB, OP, …]`) given as JSON; returns the result
    /// array as the server sent it, errors included.
    pub async fn transact_json(
        &self,
        params: &serde_json::Value,
    ) -> Result<serde_json::Value, Error> {
        if !params
            .as_array()
            .is_some_and(|a| a.first().is_some_and(|d| d.is_string()))
        {
            return Err(Error::config(
                "a transaction is a JSON array whose first element is the database name",
            ));
        }
        self.call("transact", params).await
    }

    /// `cancel`: asks the server to end a request still in progress (a `transact` waiting
    /// in a `wait` operation); that request then fails with a `canceled` server error.
    ///
    /// RFC 7047 has the server answer the canceled request with a `canceled` error;
    /// ovsdb-server (at least up to 4.0) drops it without a reply. So after the
    /// notification this sends an `echo` as a barrier: the server handles messages in
    /// order, so once the echo is answered a request still unanswered was dropped, and
    /// the client fails it itself. A request that had already completed keeps its real
    /// result. On a clustered database a transaction already sent to the cluster when
    /// the cancel arrives may still commit.
    pub async fn cancel(&self, id: RequestId) -> Result<(), Error> {
        let params = serde_json::to_vec(&[id.0]).map_err(|e| Error::config(e.to_string()))?;
        if let Err(e) = self.writer.send(Outgoing::Notification {
            method: "cancel".into(),
            params: params.into(),
        }) {
            self.shared.fail(Error::io(e));
            return Err(self.closed_error());
        }
        self.echo(&serde_json::json!(["cancel barrier"])).await?;
        let dropped = self.shared.lock().pending.remove(&id.0);
        if let Some(p) = dropped {
            let error = ServerError::from_json(serde_json::json!("canceled"));
            let _ = p.reply.send(Err(Error::server(p.method, error)));
        }
        Ok(())
    }

    /// `monitor`: starts monitoring tables of `db` and returns their initial contents;
    /// later changes arrive as [`Notification::Update`] with the same `monitor_id`.
    pub async fn monitor(
        &self,
        db: &str,
        monitor_id: serde_json::Value,
        requests: &BTreeMap<String, MonitorRequest>,
    ) -> Result<TableUpdates, Error> {
        self.call("monitor", &(db, monitor_id, AsArrays(requests)))
            .await
    }

    /// `monitor_cond`: like [`monitor`](Self::monitor) with conditions per table and the
    /// `update2` form; later changes arrive as [`Notification::Update2`].
    pub async fn monitor_cond(
        &self,
        db: &str,
        monitor_id: serde_json::Value,
        requests: &BTreeMap<String, MonitorRequest>,
    ) -> Result<TableUpdates2, Error> {
        self.call("monitor_cond", &(db, monitor_id, AsArrays(requests)))
            .await
    }

    /// [`monitor_cond`](Self::monitor_cond), with the result (`<table-updates2>`)
    /// decoded by `seed` while it arrives (see [`call_decoding`](Self::call_decoding)).
    pub async fn monitor_cond_with<S>(
        &self,
        db: &str,
        monitor_id: serde_json::Value,
        requests: &BTreeMap<String, MonitorRequest>,
        seed: S,
    ) -> Result<S::Value, Error>
    where
        S: DeserializeSeed<'static> + Send + 'static,
        S::Value: Send + 'static,
    {
        let params = encode_params("monitor_cond", &(db, monitor_id, AsArrays(requests)))?;
        self.call_decoding("monitor_cond", params, seed).await
    }

    /// `monitor_cond_since`: like [`monitor_cond`](Self::monitor_cond), but when the
    /// server still has transaction `last_txn_id` it sends only the changes after it.
    /// Later changes arrive as [`Notification::Update3`]. `None` asks for everything.
    pub async fn monitor_cond_since(
        &self,
        db: &str,
        monitor_id: serde_json::Value,
        requests: &BTreeMap<String, MonitorRequest>,
        last_txn_id: Option<Uuid>,
    ) -> Result<MonitorSince, Error> {
        let since = last_txn_id.unwrap_or(Uuid::nil());
        let (found, last_txn_id, updates): (bool, Uuid, TableUpdates2) = self
            .call(
                "monitor_cond_since",
                &(db, monitor_id, AsArrays(requests), since),
            )
            .await?;
        Ok(MonitorSince {
            found,
            last_txn_id,
            updates,
        })
    }

    /// [`monitor_cond_since`](Self::monitor_cond_since), with the result
    /// (`[found, last-txn-id, table-updates2]`) decoded by `seed` while it arrives (see
    /// [`call_decoding`](Self::call_decoding)).
    pub async fn monitor_cond_since_with<S>(
        &self,
        db: &str,
        monitor_id: serde_json::Value,
        requests: &BTreeMap<String, MonitorRequest>,
        last_txn_id: Option<Uuid>,
        seed: S,
    ) -> Result<S::Value, Error>
    where
        S: DeserializeSeed<'static> + Send + 'static,
        S::Value: Send + 'static,
    {
        let since = last_txn_id.unwrap_or(Uuid::nil());
        let params = encode_params(
            "monitor_cond_since",
            &(db, monitor_id, AsArrays(requests), since),
        )?;
        self.call_decoding("monitor_cond_since", params, seed).await
    }

    /// `monitor_cond_change`: changes the conditions (and columns) of a live
    /// `monitor_cond` or `monitor_cond_since`, which from then on reports under
    /// `new_monitor_id`. The server sends what the change adds and removes as an update.
    pub async fn monitor_cond_change(
        &self,
        monitor_id: serde_json::Value,
        new_monitor_id: serde_json::Value,
        requests: &BTreeMap<String, MonitorRequest>,
    ) -> Result<(), Error> {
        let _: serde_json::Value = self
            .call(
                "monitor_cond_change",
                &(monitor_id, new_monitor_id, AsArrays(requests)),
            )
            .await?;
        Ok(())
    }

    /// `set_db_change_aware`: asks the server to cancel monitors (with
    /// `monitor_canceled`) rather than drop the connection when a database's schema is
    /// converted or the database removed.
    pub async fn set_db_change_aware(&self, aware: bool) -> Result<(), Error> {
        let _: serde_json::Value = self.call("set_db_change_aware", &[aware]).await?;
        Ok(())
    }

    /// `monitor_cancel`: ends a monitor.
    pub async fn monitor_cancel(&self, monitor_id: serde_json::Value) -> Result<(), Error> {
        let _: serde_json::Value = self.call("monitor_cancel", &[monitor_id]).await?;
        Ok(())
    }

    /// `lock`: asks for a lock; true when granted now, false when queued (a
    /// [`Notification::Locked`] follows when it is granted).
    pub async fn lock(&self, name: &str) -> Result<bool, Error> {
        self.lock_call("lock", name).await
    }

    /// `steal`: takes a lock from its holder, who gets [`Notification::Stolen`].
    pub async fn steal(&self, name: &str) -> Result<bool, Error> {
        self.lock_call("steal", name).await
    }

    async fn lock_call(&self, method: &'static str, name: &str) -> Result<bool, Error> {
        #[derive(serde::Deserialize)]
        struct Locked {
            locked: bool,
        }
        let r: Locked = self.call(method, &[name]).await?;
        Ok(r.locked)
    }

    /// `unlock`: releases a lock or leaves its queue.
    pub async fn unlock(&self, name: &str) -> Result<(), Error> {
        let _: serde_json::Value = self.call("unlock", &[name]).await?;
        Ok(())
    }

    /// `echo`: the server sends `params` back.
    pub async fn echo(&self, params: &serde_json::Value) -> Result<serde_json::Value, Error> {
        self.call("echo", params).await
    }
}

/// Monitor requests as `{"Table": [request]}`: the array form every monitor method
/// accepts and `monitor_cond_change` requires.
struct AsArrays<'a>(&'a BTreeMap<String, MonitorRequest>);

impl Serialize for AsArrays<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (table, request) in self.0 {
            m.serialize_entry(table, &[request])?;
        }
        m.end()
    }
}

/// The bytes of a reply, as the connection's decoder taps them.
struct Chunks {
    rx: mpsc::Receiver<Bytes>,
    current: Bytes,
}

impl std::io::Read for Chunks {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(chunk) => self.current = chunk,
                // The reply ended, or the connection did.
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.current.len());
        out[..n].copy_from_slice(&self.current[..n]);
        self.current.advance(n);
        Ok(n)
    }
}

/// Decodes a whole reply message (`{"id": …, "result": …, "error": …}`) as it arrives,
/// `seed` taking the result: the result, or the server's error.
fn decode_reply<S: DeserializeSeed<'static>>(
    rx: mpsc::Receiver<Bytes>,
    seed: S,
) -> Result<Result<S::Value, serde_json::Value>, serde_json::Error> {
    use serde::de::{IgnoredAny, MapAccess, Visitor};

    /// The result: `null` (beside an error) or what `S` reads.
    struct NullOr<S>(S);
    impl<S: DeserializeSeed<'static>> DeserializeSeed<'static> for NullOr<S> {
        type Value = Option<S::Value>;
        fn deserialize<D: serde::Deserializer<'static>>(
            self,
            d: D,
        ) -> Result<Self::Value, D::Error> {
            d.deserialize_option(self)
        }
    }
    impl<S: DeserializeSeed<'static>> Visitor<'static> for NullOr<S> {
        type Value = Option<S::Value>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a result")
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'static>>(
            self,
            d: D,
        ) -> Result<Self::Value, D::Error> {
            self.0.deserialize(d).map(Some)
        }
    }

    struct Envelope<S>(S);
    impl<S: DeserializeSeed<'static>> Visitor<'static> for Envelope<S> {
        type Value = Result<S::Value, serde_json::Value>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON-RPC reply")
        }
        fn visit_map<A: MapAccess<'static>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut seed = Some(self.0);
            let mut result = None;
            let mut error = serde_json::Value::Null;
            while let Some(key) = map.next_key::<String>()? {
                match (key.as_str(), seed.take()) {
                    ("result", Some(s)) => result = map.next_value_seed(NullOr(s))?,
                    ("error", s) => {
                        seed = s;
                        error = map.next_value()?;
                    }
                    (_, s) => {
                        seed = s;
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            if !error.is_null() {
                return Ok(Err(error));
            }
            result_or_missing(result)
        }
    }

    fn result_or_missing<V, E: serde::de::Error>(
        result: Option<V>,
    ) -> Result<Result<V, serde_json::Value>, E> {
        result
            .map(Ok)
            .ok_or_else(|| E::custom("the reply has neither result nor error"))
    }

    let reader = std::io::BufReader::with_capacity(
        64 * 1024,
        Chunks {
            rx,
            current: Bytes::new(),
        },
    );
    let mut de = serde_json::Deserializer::from_reader(reader);
    serde::Deserializer::deserialize_map(&mut de, Envelope(seed))
}

fn encode_params<P: Serialize + ?Sized>(method: &str, params: &P) -> Result<Bytes, Error> {
    serde_json::to_vec(params)
        .map(Bytes::from)
        .map_err(|e| Error::config(format!("cannot serialize {method} params: {e}")))
}

fn parse_reply<R: DeserializeOwned>(method: &str, raw: &[u8]) -> Result<R, Error> {
    serde_json::from_slice(raw)
        .map_err(|e| Error::protocol(format!("malformed {method} reply: {e}")))
}

fn transact_params(db: &str, operations: &[Operation]) -> Result<Bytes, Error> {
    struct Params<'a>(&'a str, &'a [Operation]);
    impl Serialize for Params<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeSeq;
            let mut seq = s.serialize_seq(Some(self.1.len() + 1))?;
            seq.serialize_element(self.0)?;
            for op in self.1 {
                seq.serialize_element(op)?;
            }
            seq.end()
        }
    }
    serde_json::to_vec(&Params(db, operations))
        .map(Bytes::from)
        .map_err(|e| Error::config(format!("cannot serialize transaction: {e}")))
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

async fn read_loop<R: tokio::io::AsyncRead + Unpin>(
    mut stream: FramedRead<Counting<R>, TappingCodec>,
    received: Arc<AtomicU64>,
    writer: Arc<Writer>,
    notes: mpsc::Sender<Notification>,
    shared: Arc<Shared>,
    probe: Option<Duration>,
) {
    let mut ended = shared.ended.subscribe();
    let mut notes = Some(notes);
    let mut probing = false;
    let mut seen = 0u64;
    loop {
        let idle = async {
            match probe {
                Some(p) => tokio::time::sleep(p).await,
                None => std::future::pending().await,
            }
        };
        let next = tokio::select! {
            m = stream.next() => m,
            _ = ended.wait_for(|e| *e) => return,
            _ = idle => {
                // Bytes of a message still arriving are activity too.
                let now = received.load(Ordering::Relaxed);
                if now != seen {
                    seen = now;
                    probing = false;
                    continue;
                }
                if probing {
                    let p = probe.unwrap_or_default();
                    shared.fail(Error::closed(Some(
                        format!("no message from the server for {:?} after an inactivity probe", p).into(),
                    )));
                    return;
                }
                probing = true;
                if let Err(e) = send_probe(&shared, &writer) {
                    shared.fail(e);
                    return;
                }
                continue;
            }
        };
        probing = false;
        seen = received.load(Ordering::Relaxed);
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
            Some(Ok(Frame::Message(m))) => m,
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

/// Completes request `id`, whose reply went whole to its tap.
fn complete_tapped(id: u64, shared: &Shared) -> Result<(), Error> {
    let pending = {
        let mut st = shared.lock();
        match st.pending.remove(&id) {
            Some(p) => p,
            None if st.abandoned.remove(&id) => return Ok(()),
            None => {
                return Err(Error::protocol(format!(
                    "reply to no request: id {id} is not in flight"
                )))
            }
        }
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

/// Checks that the members of `msg` nobody parses (any but `id`, `method`, `params`,
/// `result` and `error`) are JSON: the framer only matched their brackets.
fn check_unread(msg: &RawMessage) -> Result<(), Error> {
    const READ: [&[u8]; 5] = [
        b"\"id\"",
        b"\"method\"",
        b"\"params\"",
        b"\"result\"",
        b"\"error\"",
    ];
    for (key, value) in msg.members() {
        if READ.contains(&key) {
            continue;
        }
        let name: String = serde_json::from_slice(key).map_err(|e| {
            Error::protocol(format!(
                "a message member's name {} is not a JSON string: {e}",
                String::from_utf8_lossy(key)
            ))
        })?;
        serde_json::from_slice::<serde::de::IgnoredAny>(value).map_err(|e| {
            Error::protocol(format!("member {name:?} of a message is not JSON: {e}"))
        })?;
    }
    Ok(())
}

async fn dispatch(
    msg: RawMessage,
    writer: &Writer,
    notes: &mut Option<mpsc::Sender<Notification>>,
    shared: &Shared,
) -> Result<(), Error> {
    check_unread(&msg)?;
    let id = msg.member("id");
    let id_is_null = id.as_deref().is_none_or(|i| i == b"null");
    if let Some(method) = msg.member("method") {
        let method: String = serde_json::from_slice(&method)
            .map_err(|e| Error::protocol(format!("method name is not a string: {e}")))?;
        let params = msg
            .member("params")
            .unwrap_or_else(|| Bytes::from_static(b"[]"));
        if id_is_null {
            let note = Notification::decode(&method, &params).map_err(Error::protocol)?;
            if let Some(tx) = notes {
                if tx.send(note).await.is_err() {
                    tracing::debug!(
                        "notifications stream dropped; later notifications are discarded"
                    );
                    *notes = None;
                }
            }
            return Ok(());
        }
        let reply = if method == "echo" {
            // Sent back as it came: checked first, so that nothing invalid goes out.
            serde_json::from_slice::<serde::de::IgnoredAny>(&params).map_err(|e| {
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
    let id: u64 = serde_json::from_slice(&id_text).map_err(|_| {
        Error::protocol(format!(
            "reply to no request: id {} was never sent",
            String::from_utf8_lossy(&id_text)
        ))
    })?;
    let pending = {
        let mut st = shared.lock();
        match st.pending.remove(&id) {
            Some(p) => p,
            None if st.abandoned.remove(&id) => return Ok(()),
            None => {
                return Err(Error::protocol(format!(
                    "reply to no request: id {id} is not in flight"
                )))
            }
        }
    };
    let error = msg.member("error").filter(|e| &e[..] != b"null");
    let reply = match error {
        Some(e) => {
            let raw: serde_json::Value = serde_json::from_slice(&e)
                .map_err(|e| Error::protocol(format!("malformed error in reply {id}: {e}")))?;
            Err(Error::server(pending.method, ServerError::from_json(raw)))
        }
        None => match msg.member("result") {
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
