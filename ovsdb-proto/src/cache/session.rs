//! The cache task: pick a server, check it is usable, monitor, apply, and start over on
//! any failure.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use uuid::Uuid;

use crate::client::{connect_with, Client, Notifications};
use crate::error::{Error, ErrorKind};
use crate::monitor::{MonitorRequest, Notification};
use crate::ops::Condition;
use crate::remote::Remote;
use crate::typed::SchemaSkew;

use super::backoff::{backoff, pick, shuffled};
use super::decode::{decode_note, Note};
use super::health::RaftSeen;
use super::row::Layouts;
use super::store::{Snapshot, Writer};
use super::watcher::{fit, monitor, unusable, ServerWatch, SERVER_MONITOR};
use super::{CacheConfig, CacheEvent, Published};

/// How long the cache waits for a behind [`crate::cache::CacheEvents`] reader before
/// it says so.
const STALL_WARNING: Duration = Duration::from_secs(5);

/// What the cache has seen so far, kept across sessions.
#[derive(Default)]
struct Progress {
    /// The last transaction applied, for `monitor_cond_since`.
    last_txn_id: Option<Uuid>,
    /// The raft index seen, so that a server behind it is refused.
    raft: RaftSeen,
    /// Whether the initial contents were announced.
    announced: bool,
    /// What is monitored now (conditions change while the cache runs).
    requests: BTreeMap<String, MonitorRequest>,
    /// The id of the data monitor now, `cache-N`.
    monitor_id: String,
    /// The last N used.
    seq: u64,
    /// The column layouts the cached rows follow.
    layouts: Layouts,
    /// What the last server's schema lacked of what is monitored (reported when it
    /// changes).
    skew: Option<SchemaSkew>,
}

impl Progress {
    /// The id the next data monitor gets.
    fn next_id(&self) -> String {
        format!("cache-{}", self.seq + 1)
    }

    /// Records that the monitor now reports under `id` (from [`Progress::next_id`]).
    fn use_id(&mut self, id: String) {
        self.seq += 1;
        self.monitor_id = id;
    }

    fn set_conditions(&mut self, table: &str, conditions: Vec<Condition>) {
        self.requests
            .entry(table.to_owned())
            .or_default()
            .conditions = Some(conditions);
    }
}

/// A request from the [`Cache`](super::Cache) handle to its task.
pub(super) enum Command {
    /// Replace the conditions of one table's monitor.
    SetConditions {
        table: String,
        conditions: Vec<Condition>,
        reply: tokio::sync::oneshot::Sender<Result<(), Error>>,
    },
    /// Forget the raft index seen, so that a server behind it is used again.
    ResetRaftIndex,
}

/// Why a session ended.
enum End {
    /// Start a new session at once (leadership moved).
    Again(String),
    /// The server canceled the monitor (a schema conversion): monitor again on the
    /// same connection.
    Canceled(String),
    /// Wait before the next attempt.
    Failed(Error),
}

pub(super) async fn run(
    config: CacheConfig,
    writer: Writer,
    published: Published,
    events: mpsc::Sender<Vec<CacheEvent>>,
    commands: mpsc::Receiver<Command>,
) {
    let progress = Progress {
        requests: config.tables.clone(),
        ..Progress::default()
    };
    Task {
        config,
        writer,
        published,
        events,
        commands,
        progress,
    }
    .run()
    .await
}

/// The cache task's state, kept across sessions.
struct Task {
    config: CacheConfig,
    writer: Writer,
    published: Published,
    events: mpsc::Sender<Vec<CacheEvent>>,
    commands: mpsc::Receiver<Command>,
    progress: Progress,
}

impl Task {
    async fn run(mut self) {
        let mut failures: u32 = 0;
        // Servers that sent what does not fit the schema (rows whose values do not fit
        // their columns, updates that do not apply): tried after the others until one
        // of their sessions ends without such an error.
        let mut suspects: Vec<Remote> = Vec::new();
        // The remotes tried since the last session that synced.
        let mut tried: Vec<Remote> = Vec::new();
        let mut order = shuffled(&self.config.remotes);
        let mut next = 0usize;
        loop {
            if order.is_empty() {
                tracing::error!("cache: no remote to connect to");
                return;
            }
            if tried.len() >= order.len() {
                // Every server failed: a new round, in a new order.
                tried.clear();
                order = shuffled(&self.config.remotes);
            }
            let at = pick(&order, next, &tried, &suspects);
            let remote = order[at].clone();
            next = at + 1;
            tried.push(remote.clone());
            let synced_before = self.published.stats.connections();
            let end = self.session(&remote).await.unwrap_or_else(End::Failed);
            self.published.client.send_replace(None);
            // A session that synced was healthy: what failed before it is forgotten,
            // and the reconnect after it waits the minimum.
            if self.published.stats.connections() > synced_before {
                failures = 0;
                tried.clear();
            }
            let malformed = matches!(&end, End::Failed(e) if e.kind() == ErrorKind::Protocol);
            let was_suspect = suspects.contains(&remote);
            if malformed && !was_suspect {
                suspects.push(remote.clone());
            } else if !malformed && was_suspect {
                suspects.retain(|r| *r != remote);
            }
            let trouble = match &end {
                End::Again(why) => Some(why.clone()),
                End::Canceled(_) => None,
                End::Failed(e) => Some(e.to_string()),
            };
            if let Some(error) = trouble {
                let now = self.writer.shared().load();
                self.publish(
                    vec![CacheEvent::Unusable {
                        remote: remote.to_string(),
                        error,
                    }],
                    &now,
                )
                .await;
            }
            match end {
                End::Again(why) | End::Canceled(why) => {
                    tracing::info!(%remote, %why, "cache: starting over");
                    failures = 0;
                }
                End::Failed(e) if malformed => {
                    let wait = backoff(self.config.min_backoff, self.config.max_backoff, failures);
                    failures = failures.saturating_add(1);
                    tracing::warn!(%remote, error = %e, ?wait, "cache: malformed data from the server; trying the next one");
                    tokio::time::sleep(wait).await;
                }
                End::Failed(e) => {
                    let wait = backoff(self.config.min_backoff, self.config.max_backoff, failures);
                    failures = failures.saturating_add(1);
                    tracing::info!(%remote, error = %e, ?wait, "cache: server unusable, trying the next one");
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// One connection: check the server, then monitor until something ends it.
    async fn session(&mut self, remote: &Remote) -> Result<End, Error> {
        // Conditions changed while disconnected apply to this session's monitor.
        while let Ok(command) = self.commands.try_recv() {
            match command {
                Command::SetConditions {
                    table,
                    conditions,
                    reply,
                } => {
                    self.progress.set_conditions(&table, conditions);
                    let _ = reply.send(Ok(()));
                }
                Command::ResetRaftIndex => self.progress.raft.forget(),
            }
        }
        let (client, mut notes) = connect_with(remote, &self.config.connect).await?;
        // Servers too old for this just say so; the connection then still works.
        let _ = client.set_db_change_aware(true).await;
        let mut server = ServerWatch::start(&client, &self.config.database).await?;
        if let Some(watch) = &server {
            let state = watch.state().ok_or_else(|| {
                unusable(format!(
                    "the server has no database {}",
                    self.config.database
                ))
            })?;
            self.progress
                .raft
                .admit(&state, self.config.leader_only, true)
                .map_err(unusable)?;
        }
        // A monitor canceled by a schema conversion is set up again on this connection,
        // with the new schema.
        // A server that keeps canceling is not asked again at once.
        let mut cancels = 0u32;
        loop {
            match self.monitor(&client, &mut notes, &mut server).await? {
                End::Canceled(why) => {
                    let wait = backoff(self.config.min_backoff, self.config.max_backoff, cancels);
                    cancels = cancels.saturating_add(1);
                    tracing::info!(%remote, %why, ?wait, "cache: monitoring again");
                    tokio::time::sleep(wait).await;
                }
                other => return Ok(other),
            }
        }
    }

    /// Monitors the data tables and follows their changes.
    async fn monitor(
        &mut self,
        client: &Client,
        notes: &mut Notifications,
        server: &mut Option<ServerWatch>,
    ) -> Result<End, Error> {
        let db = self.config.database.clone();
        let schema = client.get_schema(&db).await?;
        let (requests, layouts, skew) = fit(&db, &self.progress.requests, &schema)?;
        let mut skew_event = None;
        if self.progress.skew.as_ref() != Some(&skew) {
            if !skew.is_empty() {
                tracing::warn!(
                    database = %db,
                    server = %skew.server_version,
                    missing_tables = ?skew.missing_tables,
                    missing_columns = ?skew.missing_columns,
                    "cache: the server lacks monitored tables or columns; they stay empty"
                );
                skew_event = Some(CacheEvent::Skew(skew.clone()));
            }
            self.published
                .skew
                .send_replace(Some(Arc::new(skew.clone())));
            self.progress.skew = Some(skew);
        }
        // Rows keep the layout they were cached with; a new one (after a schema
        // conversion) takes a full resync, so that no table mixes layouts. So does a
        // table that came or went.
        let mut layouts = layouts;
        let mut since = self.progress.last_txn_id;
        if !layouts.keys().eq(self.progress.layouts.keys()) {
            since = None;
        }
        for (t, layout) in &mut layouts {
            match self.progress.layouts.get(t) {
                Some(old) if old == layout => *layout = old.clone(),
                _ => since = None,
            }
        }
        self.progress.layouts = layouts.clone();
        let id = self.progress.next_id();
        let reply = monitor(client.clone(), &db, &id, &requests, since, &layouts).await?;
        self.progress.use_id(id);
        let before = self.writer.shared().load();
        let applied = if reply.found {
            self.writer.apply(reply.updates)
        } else {
            self.writer.resync(&layouts, reply.updates)
        };
        // Counted once the contents are in: a caller that sees the count grow reads
        // this connection's state.
        self.published.stats.count(reply.found);
        let mut batch = self.changes(applied)?;
        batch.extend(skew_event);
        self.progress.last_txn_id = Some(reply.last_txn_id).filter(|u| !u.is_nil());
        if !self.progress.announced {
            batch.push(CacheEvent::Ready);
            self.progress.announced = true;
        }
        self.publish(batch, &before).await;
        // The connection and schema first: a caller woken by `ready` may transact at
        // once.
        self.published
            .schema
            .send_replace(Some(Arc::new(schema.clone())));
        self.published.client.send_replace(Some(client.clone()));
        self.published.ready.send_replace(true);

        loop {
            let raw = tokio::select! {
                raw = notes.recv_raw() => raw,
                Some(command) = self.commands.recv() => {
                    match command {
                        Command::SetConditions { table, conditions, reply } => {
                            let r = self.change_conditions(client, &table, conditions).await;
                            let _ = reply.send(r);
                        }
                        Command::ResetRaftIndex => self.progress.raft.forget(),
                    }
                    continue;
                }
            };
            let Some(raw) = raw else {
                return Ok(End::Failed(client.closed().await));
            };
            let current = self.progress.monitor_id.as_str();
            let note = match decode_note(
                &raw.method,
                &raw.params,
                current,
                SERVER_MONITOR,
                &layouts,
            ) {
                Some(Ok(note)) => note,
                // A malformed update: the cache may have missed it, so the next
                // session fetches everything.
                Some(Err(e)) => {
                    self.progress.last_txn_id = None;
                    notes.fail(e.clone());
                    return Err(Error::protocol(e));
                }
                None => {
                    let note = match raw.decode() {
                        Ok(note) => note,
                        Err(e) => {
                            notes.fail(e.clone());
                            return Err(Error::protocol(e));
                        }
                    };
                    match note {
                        Notification::MonitorCanceled(id) if id == current => {
                            return Ok(End::Canceled(format!("the server canceled monitor {id}")));
                        }
                        Notification::MonitorCanceled(id) if id == SERVER_MONITOR => {
                            // Without it leadership changes go unseen: a new connection,
                            // after a backoff.
                            return Ok(End::Failed(unusable(
                                "the server canceled the _Server monitor",
                            )));
                        }
                        Notification::MonitorCanceled(id) => {
                            tracing::debug!(%id, "cache: a cancel of a monitor this cache does not have, ignored");
                        }
                        other => tracing::debug!(?other, "cache: notification ignored"),
                    }
                    continue;
                }
            };
            match note {
                Note::Data { txn, changes } => {
                    let before = self.writer.shared().load();
                    let batch = self.changes(self.writer.apply(changes))?;
                    if let Some(t) = txn {
                        self.progress.last_txn_id = Some(t).filter(|u| !u.is_nil());
                    }
                    self.publish(batch, &before).await;
                }
                Note::Server(updates) => {
                    let Some(watch) = server.as_mut() else {
                        continue;
                    };
                    if let Some(state) = watch.apply(updates)? {
                        // Leadership or connectivity lost: look for a usable server.
                        if let Err(why) =
                            self.progress
                                .raft
                                .admit(&state, self.config.leader_only, false)
                        {
                            return Ok(End::Again(format!("the server became unusable: {why}")));
                        }
                    }
                }
                Note::Other(id) => {
                    tracing::debug!(%id, "cache: an update for a monitor this cache does not have, ignored");
                }
            }
        }
    }

    /// The events of an applied update. When the update did not apply, the cache and
    /// the server disagree: the resume position is forgotten, so that the next
    /// session fetches everything.
    fn changes(
        &mut self,
        applied: Result<Vec<super::Event>, String>,
    ) -> Result<Vec<CacheEvent>, Error> {
        match applied {
            Ok(events) => Ok(events.into_iter().map(CacheEvent::Change).collect()),
            Err(e) => {
                self.progress.last_txn_id = None;
                Err(Error::protocol(format!("cannot apply an update: {e}")))
            }
        }
    }

    /// Sends `batch`, which took the contents from `before` to what they are now.
    async fn publish(&self, batch: Vec<CacheEvent>, before: &Snapshot) {
        self.published.version.send_modify(|v| *v += 1);
        if !batch.is_empty() {
            let after = self.writer.shared().load();
            for s in &self.config.subscribers {
                let table = s.table();
                s.deliver(&batch, before.typed_any(table), after.typed_any(table))
                    .await;
            }
            // Waits while the reader is behind: backpressure, never a dropped event. A
            // dropped stream means nobody listens; the cache itself carries on. A kept
            // stream nobody reads stops the cache, which is said once per stall.
            let batch = match self.events.try_send(batch) {
                Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => return,
                Err(mpsc::error::TrySendError::Full(batch)) => batch,
            };
            let send = self.events.send(batch);
            tokio::pin!(send);
            if tokio::time::timeout(STALL_WARNING, &mut send)
                .await
                .is_err()
            {
                tracing::warn!(
                    after = ?STALL_WARNING,
                    "cache: waiting for the CacheEvents reader; no update is applied until it \
                     reads (drop the stream if nothing reads it)"
                );
                let _ = send.await;
            }
        }
    }

    /// Changes a live monitor's conditions with `monitor_cond_change`; the server then
    /// sends what the change adds and removes, under the new monitor id.
    async fn change_conditions(
        &mut self,
        client: &Client,
        table: &str,
        conditions: Vec<Condition>,
    ) -> Result<(), Error> {
        if !self.progress.requests.contains_key(table) {
            return Err(Error::config(format!(
                "table {table} is not monitored by this cache"
            )));
        }
        if !self.progress.layouts.contains_key(table) {
            // The server lacks the table: the conditions wait for one that has it.
            self.progress.set_conditions(table, conditions);
            return Ok(());
        }
        let old = self.progress.monitor_id.clone();
        let new = self.progress.next_id();
        let change: BTreeMap<String, MonitorRequest> = [(
            table.to_owned(),
            MonitorRequest::default().matching(conditions.clone()),
        )]
        .into();
        client
            .monitor_cond_change(old.into(), new.clone().into(), &change)
            .await?;
        self.progress.use_id(new);
        self.progress.set_conditions(table, conditions);
        Ok(())
    }
}
