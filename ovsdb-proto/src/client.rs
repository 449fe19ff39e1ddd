//! The async client: the requests of RFC 7047 and the OVS extensions over one
//! connection, many in flight at once.
//!
//! [`connect`](fn@crate::connect) (from the `connect` module) spawns the connection's
//! two tasks (see `reader.rs` and `writer.rs`) on the current tokio runtime and returns a
//! cloneable [`Client`] plus the [`Notifications`] stream. The connection lives while
//! a `Client` or the `Notifications` stream is alive.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use serde::de::{DeserializeOwned, DeserializeSeed};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::codec::Outgoing;
use crate::config::ConnectOptions;
pub use crate::connection::Notifications;
use crate::connection::{Answer, Connection, Pending, Reply, Shared};
use crate::error::Error;
use crate::monitor::{MonitorRequest, MonitorSince, TableUpdates, TableUpdates2};
use crate::ops::{Operation, OperationResult, ResultShape};
use crate::reader::ReplyWait;
use crate::reply::{decode_transact_reply, ServerError};
use crate::schema::DatabaseSchema;
use crate::tap::{decode_reply, Cut, Taps, TAP_CAPACITY};
use crate::transport::Transport;

/// The id of a request this client sent, for [`Client::cancel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RequestId(pub u64);

/// A handle for sending requests on one connection; cheap to clone, usable from many
/// tasks at once.
#[derive(Clone)]
pub struct Client {
    connection: Arc<Connection>,
}

impl Client {
    /// This connection's id and how many notifications its reader has handed to the
    /// [`Notifications`] stream so far. Read right after a request's reply, it counts
    /// every notification the server sent before that reply: a reader of the stream
    /// that has handled that many (its [`Notifications`]' mark) has seen, for
    /// example, every monitor update of a transaction the reply answers.
    pub fn note_mark(&self) -> (u64, u64) {
        let shared = &self.connection.shared;
        (shared.id, shared.notes_sent.load(Ordering::SeqCst))
    }

    /// Runs the protocol over an already open stream. Must be called within a tokio
    /// runtime, on which the connection's tasks are spawned.
    pub fn from_transport<T: Transport>(
        stream: T,
        options: &ConnectOptions,
    ) -> (Client, Notifications) {
        let (connection, notifications) = Connection::start(stream, options);
        (Client { connection }, notifications)
    }

    /// True when both handles use the same connection.
    pub fn same_connection(&self, other: &Client) -> bool {
        Arc::ptr_eq(&self.connection, &other.connection)
    }

    /// True once the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.connection.shared.lock().closed.is_some()
    }

    /// Waits until the connection ends and returns why.
    pub async fn closed(&self) -> Error {
        let mut rx = self.connection.shared.ended.subscribe();
        let _ = rx.wait_for(|ended| *ended).await;
        self.connection
            .shared
            .lock()
            .closed
            .as_ref()
            .map(Error::duplicate)
            .unwrap_or_else(|| Error::closed(None))
    }

    fn register(&self, method: &'static str) -> Result<(u64, oneshot::Receiver<Reply>), Error> {
        let id = self
            .connection
            .shared
            .next_id
            .fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let mut st = self.connection.shared.lock();
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
        operations: Option<usize>,
    ) -> Reply {
        let msg = Outgoing::Request {
            id,
            method: method.into(),
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
        let _forget = Forget(&self.connection.shared, id);
        if let Err(e) = self.connection.writer.send(msg) {
            self.connection.shared.fail(Error::io(e));
            return Err(Error::unavailable(self.closed_error()));
        }
        let (shared, writer) = (&*self.connection.shared, &*self.connection.writer);
        let wait = ReplyWait::new(shared, writer, id, rx, operations);
        let reply = match self.connection.shared.request_timeout {
            None => wait.await,
            Some(t) => match tokio::time::timeout(t, wait).await {
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
        self.connection
            .shared
            .lock()
            .closed
            .as_ref()
            .map(Error::duplicate)
            .unwrap_or_else(|| Error::closed(None))
    }

    /// Sends a request with already serialized params and returns the raw result.
    pub async fn call_raw(&self, method: &'static str, params: Bytes) -> Result<Bytes, Error> {
        let (id, rx) = self.register(method)?;
        self.send_request(id, method, params, rx, None)
            .await?
            .text()
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
        self.call_decoding_cut(method, params, seed, None).await
    }

    /// [`call_decoding`](Self::call_decoding), with the rows at `cut`'s path cut out of
    /// the reply for the seed to read from slices.
    pub(crate) async fn call_decoding_cut<S>(
        &self,
        method: &'static str,
        params: Bytes,
        seed: S,
        cut: Option<Cut>,
    ) -> Result<S::Value, Error>
    where
        S: DeserializeSeed<'static> + Send + 'static,
        S::Value: Send + 'static,
    {
        let (id, rx) = self.register(method)?;
        let (tap, chunks) = mpsc::channel(TAP_CAPACITY);
        self.connection.shared.taps.insert(id, tap);
        // Not tapped after this call ends, whichever way it ends.
        struct Untap<'a>(&'a Taps, u64);
        impl Drop for Untap<'_> {
            fn drop(&mut self) {
                self.0.remove(self.1);
            }
        }
        let untap = Untap(&self.connection.shared.taps, id);
        let decoder = tokio::task::spawn_blocking(move || decode_reply(chunks, seed, cut));
        // A tapped reply reaches the request only as "done": its result, or the
        // server's error, is what the decoder read.
        let sent = self.send_request(id, method, params, rx, None).await;
        // The request is over: if the reply never started to arrive (the connection
        // ended, the request timed out), the decoder must not wait for it.
        drop(untap);
        sent?;
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
        self.transact_prepared_cancellable(Prepared::transact(db, operations)?)
    }

    /// [`transact`](Self::transact) of a transaction serialized beforehand
    /// ([`Prepared::transact`]): a caller that must wait before sending serializes
    /// meanwhile.
    pub async fn transact_prepared(
        &self,
        prepared: &Prepared,
    ) -> Result<Vec<OperationResult>, Error> {
        let (_, fut) = self.transact_prepared_cancellable(prepared.clone())?;
        fut.await
    }

    /// The transaction `prepared` sent, taken whole: one built for a single send
    /// ([`Client::transact_cancellable`]) is not copied.
    fn transact_prepared_cancellable(
        &self,
        prepared: Prepared,
    ) -> Result<
        (
            RequestId,
            impl std::future::Future<Output = Result<Vec<OperationResult>, Error>> + Send + 'static,
        ),
        Error,
    > {
        let Prepared { params, shapes } = prepared;
        let n = shapes.len();
        let (id, rx) = self.register("transact")?;
        let client = self.clone();
        Ok((RequestId(id), async move {
            let answer = client
                .send_request(id, "transact", params, rx, Some(n))
                .await?;
            let outcome = match answer {
                Answer::Transact(outcome) => Ok(outcome),
                Answer::Text(raw) => decode_transact_reply(&raw, n),
            };
            match outcome {
                // Each result must be the kind its operation gives (a select answered
                // with a count is the server's mistake, not rows).
                Ok(Ok(results)) => ResultShape::check(&shapes, &results)
                    .map(|()| results)
                    .map_err(Error::protocol),
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
        if let Err(e) = self.connection.writer.send(Outgoing::Notification {
            method: "cancel".into(),
            params: params.into(),
        }) {
            self.connection.shared.fail(Error::io(e));
            return Err(self.closed_error());
        }
        self.echo(&serde_json::json!(["cancel barrier"])).await?;
        let dropped = self.connection.shared.lock().pending.remove(&id.0);
        if let Some(p) = dropped {
            let error = ServerError::from_json(serde_json::json!("canceled"));
            let _ = p.reply.send(Err(Error::server(p.method, error)));
            // Its caller may be reading for itself, its waker on the socket only.
            self.connection.shared.driver.wake();
        }
        Ok(())
    }

    /// `monitor`: starts monitoring tables of `db` and returns their initial contents;
    /// later changes arrive as [`Notification::Update`](crate::Notification::Update) with the same `monitor_id`.
    pub async fn monitor(
        &self,
        db: &str,
        monitor_id: serde_json::Value,
        requests: &BTreeMap<String, MonitorRequest>,
    ) -> Result<TableUpdates, Error> {
        self.call("monitor", &(db, monitor_id, AsArrays(requests)))
            .await
    }

    /// [`monitor`](Self::monitor), with the result (`<table-updates>`) decoded by
    /// `seed` while it arrives (see [`call_decoding`](Self::call_decoding)).
    pub async fn monitor_with<S>(
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
        let params = monitor_params("monitor", db, monitor_id, requests, None)?;
        self.call_decoding("monitor", params, seed).await
    }

    /// `monitor_cond`: like [`monitor`](Self::monitor) with conditions per table and the
    /// `update2` form; later changes arrive as [`Notification::Update2`](crate::Notification::Update2).
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
        let params = monitor_params("monitor_cond", db, monitor_id, requests, None)?;
        self.call_decoding("monitor_cond", params, seed).await
    }

    /// `monitor_cond_since`: like [`monitor_cond`](Self::monitor_cond), but when the
    /// server still has transaction `last_txn_id` it sends only the changes after it.
    /// Later changes arrive as [`Notification::Update3`](crate::Notification::Update3). `None` asks for everything.
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
        let params = monitor_params(
            "monitor_cond_since",
            db,
            monitor_id,
            requests,
            Some(last_txn_id.unwrap_or(Uuid::nil())),
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
    /// [`Notification::Locked`](crate::Notification::Locked) follows when it is granted).
    pub async fn lock(&self, name: &str) -> Result<bool, Error> {
        self.lock_call("lock", name).await
    }

    /// `steal`: takes a lock from its holder, who gets [`Notification::Stolen`](crate::Notification::Stolen).
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

/// The params of `monitor` or `monitor_cond` (`since` none), or of `monitor_cond_since`.
pub(crate) fn monitor_params(
    method: &str,
    db: &str,
    monitor_id: serde_json::Value,
    requests: &BTreeMap<String, MonitorRequest>,
    since: Option<Uuid>,
) -> Result<Bytes, Error> {
    match since {
        None => encode_params(method, &(db, monitor_id, AsArrays(requests))),
        Some(since) => encode_params(method, &(db, monitor_id, AsArrays(requests), since)),
    }
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

/// A `transact` request's params serialized ahead of sending, with what checks its
/// reply: [`Client::transact_prepared`], [`Cache::transact_prepared`](crate::cache::Cache::transact_prepared).
#[derive(Clone, Debug)]
pub struct Prepared {
    params: Bytes,
    shapes: Vec<ResultShape>,
}

impl Prepared {
    /// `operations` on database `db`, serialized; an error when an operation cannot
    /// be.
    pub fn transact(db: &str, operations: &[Operation]) -> Result<Prepared, Error> {
        Ok(Prepared {
            params: transact_params(db, operations)?,
            shapes: operations.iter().map(ResultShape::of).collect(),
        })
    }
}

fn transact_params(db: &str, operations: &[Operation]) -> Result<Bytes, Error> {
    let mut out = Vec::with_capacity(32 + 96 * operations.len());
    out.push(b'[');
    let written = serde_json::to_writer(&mut out, db).and_then(|()| {
        operations.iter().try_for_each(|op| {
            out.push(b',');
            op.write_json(&mut out)
        })
    });
    written.map_err(|e| Error::config(format!("cannot serialize transaction: {e}")))?;
    out.push(b']');
    Ok(Bytes::from(out))
}
