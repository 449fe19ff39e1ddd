//! The cache task: pick a server, check it is usable, monitor, apply, and start over on
//! any failure.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use uuid::Uuid;

use crate::client::{connect_with, Client, Notifications};
use crate::datum::{Atom, Datum, Row};
use crate::error::{Error, ErrorKind};
use crate::monitor::{MonitorRequest, Notification, RowUpdate2, TableUpdates2};
use crate::ops::Condition;
use crate::remote::Remote;
use crate::schema::DatabaseSchema;
use crate::typed::SchemaSkew;

use super::diff::apply_row;
use super::row::{from_update2, Layout, Layouts, Since, SinceSeed, UpdatesSeed};
use super::store::Writer;
use super::{CacheConfig, CacheEvent, Published};

const SERVER_MONITOR: &str = "cache-server";

/// How long the cache waits for a behind [`crate::cache::CacheEvents`] reader before
/// it says so.
const STALL_WARNING: Duration = Duration::from_secs(5);

/// What the cache has seen so far, kept across sessions.
#[derive(Default)]
struct Progress {
    /// The last transaction applied, for `monitor_cond_since`.
    last_txn_id: Option<Uuid>,
    /// The highest raft index seen, so that a server behind it is refused.
    raft_index: i64,
    /// The cluster id that index belongs to: a server of another cluster (the
    /// cluster rebuilt from scratch) starts the count over.
    cluster: Option<Uuid>,
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

/// True for the errors an older server gives for what it does not have.
fn is_unknown(e: &Error) -> bool {
    e.as_server_error()
        .is_some_and(|s| s.error == "unknown method" || s.error == "unknown database")
}

fn unusable(why: impl Into<String>) -> Error {
    Error::unavailable(Error::closed(Some(why.into().into())))
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
                self.publish(vec![CacheEvent::Unusable {
                    remote: remote.to_string(),
                    error,
                }])
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
                Command::ResetRaftIndex => self.reset_raft_index(),
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
            self.check(&state, self.progress.raft_index)?;
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

    fn reset_raft_index(&mut self) {
        tracing::info!(
            index = self.progress.raft_index,
            "cache: the raft index seen is forgotten"
        );
        self.progress.raft_index = 0;
    }

    /// Refuses a server that is not usable (`seen` is the raft index it must reach, 0
    /// for none), and records its index. A server of another cluster than the one the
    /// index was seen on (rebuilt from scratch) starts the count over.
    fn check(&mut self, state: &ServerState, mut seen: i64) -> Result<(), Error> {
        if let Some(cid) = state.cid {
            if self.progress.cluster.is_some_and(|c| c != cid) {
                tracing::info!(
                    old = ?self.progress.cluster,
                    new = %cid,
                    index = self.progress.raft_index,
                    "cache: the cluster id changed; the raft index seen is forgotten"
                );
                self.progress.raft_index = 0;
                seen = seen.min(0);
            }
            self.progress.cluster = Some(cid);
        }
        if let Some(why) = state.refuse(self.config.leader_only, seen) {
            return Err(unusable(why));
        }
        if let Some(i) = state.index {
            self.progress.raft_index = self.progress.raft_index.max(i);
        }
        Ok(())
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
        self.publish(batch).await;
        // The connection and schema first: a caller woken by `ready` may transact at
        // once.
        self.published
            .schema
            .send_replace(Some(Arc::new(schema.clone())));
        self.published.client.send_replace(Some(client.clone()));
        self.published.ready.send_replace(true);

        loop {
            let note = tokio::select! {
                note = notes.recv() => note,
                Some(command) = self.commands.recv() => {
                    match command {
                        Command::SetConditions { table, conditions, reply } => {
                            let r = self.change_conditions(client, &table, conditions).await;
                            let _ = reply.send(r);
                        }
                        Command::ResetRaftIndex => self.reset_raft_index(),
                    }
                    continue;
                }
            };
            let Some(note) = note else {
                return Ok(End::Failed(client.closed().await));
            };
            let current = self.progress.monitor_id.as_str();
            let (updates, txn) = match note {
                Notification::Update3 {
                    monitor_id,
                    last_txn_id,
                    updates,
                } if monitor_id == current => (updates, Some(last_txn_id)),
                Notification::Update2 {
                    monitor_id,
                    updates,
                } if monitor_id == current => (updates, None),
                Notification::Update {
                    monitor_id,
                    updates,
                } if monitor_id == current => (to_update2(updates), None),
                Notification::Update2 {
                    monitor_id,
                    updates,
                } if monitor_id == SERVER_MONITOR => {
                    let Some(watch) = server.as_mut() else {
                        continue;
                    };
                    if let Some(state) = watch.apply(updates)? {
                        // Leadership or connectivity lost: look for a usable server.
                        if let Err(why) = self.check(&state, 0) {
                            return Ok(End::Again(format!("the server became unusable: {why}")));
                        }
                    }
                    continue;
                }
                Notification::MonitorCanceled(id) if id == current => {
                    return Ok(End::Canceled(format!("the server canceled monitor {id}")));
                }
                Notification::MonitorCanceled(id) if id == SERVER_MONITOR => {
                    // Without it leadership changes go unseen: a new connection, after
                    // a backoff.
                    return Ok(End::Failed(unusable(
                        "the server canceled the _Server monitor",
                    )));
                }
                Notification::MonitorCanceled(id) => {
                    tracing::debug!(%id, "cache: a cancel of a monitor this cache does not have, ignored");
                    continue;
                }
                other => {
                    tracing::debug!(?other, "cache: notification ignored");
                    continue;
                }
            };
            let changes = from_update2(&layouts, updates);
            let batch = self.changes(changes.and_then(|c| self.writer.apply(c)))?;
            if let Some(t) = txn {
                self.progress.last_txn_id = Some(t).filter(|u| !u.is_nil());
            }
            self.publish(batch).await;
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

    async fn publish(&self, batch: Vec<CacheEvent>) {
        self.published.version.send_modify(|v| *v += 1);
        if !batch.is_empty() {
            for s in &self.config.subscribers {
                s.deliver(&batch).await;
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

/// What of `wanted` can be monitored on a server whose schema is `schema`: the requests
/// to send (every column named, so that the server leaves `_version` out and the cache
/// knows which columns to complete with defaults), the layouts of the cached rows, and
/// the tables and columns the server lacks, which are left out (as the C IDL does: the
/// cache stays usable against an older server, those tables stay empty).
fn fit(
    db: &str,
    wanted: &BTreeMap<String, MonitorRequest>,
    schema: &DatabaseSchema,
) -> Result<(BTreeMap<String, MonitorRequest>, Layouts, SchemaSkew), Error> {
    let mut skew = SchemaSkew {
        database: db.to_owned(),
        server_version: schema.version.clone(),
        ..SchemaSkew::default()
    };
    let mut requests = BTreeMap::new();
    let mut layouts = Layouts::new();
    for (t, r) in wanted {
        let Some(ts) = schema.table(t) else {
            skew.missing_tables.push(t.clone());
            continue;
        };
        let mut r = r.clone();
        let cols = match r.columns.take() {
            None => ts.columns.keys().cloned().collect(),
            Some(cols) => {
                let (have, lack): (Vec<String>, Vec<String>) =
                    cols.into_iter().partition(|c| ts.column(c).is_some());
                if !lack.is_empty() {
                    skew.missing_columns.insert(t.clone(), lack);
                }
                have
            }
        };
        let layout = Layout::new(ts, &cols).map_err(Error::config)?;
        r.columns = Some(cols);
        requests.insert(t.clone(), r);
        layouts.insert(t.clone(), Arc::new(layout));
    }
    Ok((requests, layouts, skew))
}

/// The server's `_Server.Database` row for the cached database, watched for the
/// whole session.
struct ServerWatch {
    schema: DatabaseSchema,
    row: Option<Row>,
}

impl ServerWatch {
    /// Starts watching; `None` for a server from before `_Server` (or before
    /// `monitor_cond`), which is standalone: nothing to check.
    async fn start(client: &Client, database: &str) -> Result<Option<ServerWatch>, Error> {
        let schema = match client.get_schema("_Server").await {
            Ok(s) => s,
            Err(e) if is_unknown(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut req = BTreeMap::new();
        req.insert(
            "Database".to_string(),
            // `cid` came later than the rest: asked for only where the server has it.
            MonitorRequest::columns(
                ["name", "model", "connected", "leader", "index", "cid"]
                    .into_iter()
                    .filter(|c| {
                        schema
                            .table("Database")
                            .is_some_and(|t| t.column(c).is_some())
                    }),
            )
            .matching(vec![Condition::eq("name", database)]),
        );
        let rows = match client
            .monitor_cond("_Server", SERVER_MONITOR.into(), &req)
            .await
        {
            Ok(r) => r,
            Err(e) if is_unknown(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut watch = ServerWatch { schema, row: None };
        watch.apply(rows)?;
        Ok(Some(watch))
    }

    /// Applies an update (the monitor's condition lets only this database's row
    /// through) and returns the new state, if the row exists.
    fn apply(&mut self, updates: TableUpdates2) -> Result<Option<ServerState>, Error> {
        for u in updates.into_values().flat_map(|rows| rows.into_values()) {
            self.row = match u {
                RowUpdate2::Initial(r) | RowUpdate2::Insert(r) => Some(r),
                RowUpdate2::Modify(d) => {
                    let table = self
                        .schema
                        .table("Database")
                        .ok_or_else(|| Error::protocol("_Server has no Database table"))?;
                    let old = self.row.take().unwrap_or_default();
                    Some(apply_row(table, &old, &d).map_err(Error::protocol)?)
                }
                RowUpdate2::Delete => None,
            };
        }
        Ok(self.state())
    }

    fn state(&self) -> Option<ServerState> {
        self.row.as_ref().map(ServerState::from_row)
    }
}

/// The wait before attempt `failures + 1` after `failures` failures in a row: the
/// minimum after none, then up to twice as long each time (capped at `max`), jittered.
fn backoff(min: Duration, max: Duration, failures: u32) -> Duration {
    let exp = min.saturating_mul(1u32 << failures.min(16)).min(max);
    let fraction = (random_u64() % 1000) as u32;
    min + (exp.saturating_sub(min)) * fraction / 1000
}

fn random_u64() -> u64 {
    let b = Uuid::new_v4().into_bytes();
    u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[9], b[10]])
}

fn shuffled(remotes: &[Remote]) -> Vec<Remote> {
    let mut v = remotes.to_vec();
    for i in (1..v.len()).rev() {
        let j = (random_u64() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// Which of `order` to try next: going round from `from`, the first server not
/// `tried` since the last session that synced; a server among `suspects` (it sent data
/// that does not fit the schema) only when no other is left. `tried` must leave one
/// out.
fn pick(order: &[Remote], from: usize, tried: &[Remote], suspects: &[Remote]) -> usize {
    let round = (0..order.len()).map(|k| (from + k) % order.len());
    let untried = |&i: &usize| !tried.contains(&order[i]);
    round
        .clone()
        .filter(untried)
        .find(|&i| !suspects.contains(&order[i]))
        .or_else(|| round.clone().find(untried))
        .unwrap_or(from % order.len())
}

/// The server's view of the database, from `_Server.Database`.
#[derive(Debug, Default)]
struct ServerState {
    clustered: bool,
    connected: bool,
    leader: bool,
    index: Option<i64>,
    /// The cluster id, once the server knows it.
    cid: Option<Uuid>,
}

impl ServerState {
    fn from_row(row: &crate::datum::Row) -> ServerState {
        let boolean = |c: &str| {
            matches!(
                row.get(c).and_then(Datum::as_scalar),
                Some(Atom::Boolean(true))
            )
        };
        ServerState {
            clustered: row
                .get("model")
                .and_then(Datum::as_scalar)
                .and_then(Atom::as_str)
                == Some("clustered"),
            connected: boolean("connected"),
            leader: boolean("leader"),
            index: row
                .get("index")
                .and_then(Datum::as_scalar)
                .and_then(Atom::as_integer),
            cid: match row.get("cid").and_then(Datum::as_scalar) {
                Some(Atom::Uuid(u)) => Some(*u),
                _ => None,
            },
        }
    }

    /// Why this server cannot be used, if it cannot.
    fn refuse(&self, leader_only: bool, seen_index: i64) -> Option<String> {
        if !self.clustered {
            return None;
        }
        if !self.connected {
            Some("not connected to its cluster".into())
        } else if leader_only && !self.leader {
            Some("not the cluster leader".into())
        } else if self.index.unwrap_or(0) < seen_index {
            Some(format!(
                "its raft index {} is behind the {seen_index} already seen",
                self.index.unwrap_or(0)
            ))
        } else {
            None
        }
    }
}

/// `monitor_cond_since`, or on a server that lacks it `monitor_cond`, or on one that
/// lacks that too plain `monitor` (whose updates are turned into the `update2` form).
/// The big replies are decoded straight into cached rows, while they arrive.
async fn monitor(
    client: Client,
    db: &str,
    id: &str,
    requests: &BTreeMap<String, MonitorRequest>,
    since: Option<Uuid>,
    layouts: &Layouts,
) -> Result<Since, Error> {
    match client
        .monitor_cond_since_with(db, id.into(), requests, since, SinceSeed(layouts.clone()))
        .await
    {
        Err(e) if is_unknown(&e) => {}
        other => return other,
    }
    tracing::info!("cache: the server lacks monitor_cond_since; every reconnect resyncs in full");
    let updates = match client
        .monitor_cond_with(db, id.into(), requests, UpdatesSeed(layouts.clone()))
        .await
    {
        Err(e) if is_unknown(&e) => {
            tracing::info!("cache: the server lacks monitor_cond; using monitor");
            let plain: BTreeMap<String, MonitorRequest> = requests
                .iter()
                .map(|(t, r)| {
                    let mut r = r.clone();
                    r.conditions = None;
                    (t.clone(), r)
                })
                .collect();
            let updates = to_update2(client.monitor(db, id.into(), &plain).await?);
            from_update2(layouts, updates).map_err(Error::protocol)?
        }
        other => other?,
    };
    Ok(Since {
        found: false,
        last_txn_id: Uuid::nil(),
        updates,
    })
}

/// Plain `monitor` updates in the `update2` form: a row without `new` is deleted; any
/// other is replaced whole (its `new` holds every monitored column).
fn to_update2(updates: crate::monitor::TableUpdates) -> TableUpdates2 {
    updates
        .into_iter()
        .map(|(table, rows)| {
            let rows = rows
                .into_iter()
                .map(|(uuid, u)| {
                    let u2 = match u.new {
                        Some(new) => RowUpdate2::Insert(new),
                        None => RowUpdate2::Delete,
                    };
                    (uuid, u2)
                })
                .collect();
            (table, rows)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remotes(names: &[&str]) -> Vec<Remote> {
        names
            .iter()
            .map(|n| Remote::Unix(format!("/{n}").into()))
            .collect()
    }

    #[test]
    fn the_next_server_is_the_next_untried_one_and_a_suspect_comes_last() {
        let order = remotes(&["a", "b", "c"]);
        let some = |names: &str| -> Vec<Remote> {
            names
                .chars()
                .map(|n| order[(n as u8 - b'a') as usize].clone())
                .collect()
        };
        // Round robin while nothing is suspect.
        assert_eq!(pick(&order, 0, &[], &[]), 0);
        assert_eq!(pick(&order, 1, &some("a"), &[]), 1);
        assert_eq!(pick(&order, 3, &[], &[]), 0, "wraps around");
        // After a synced session on a (nothing tried since), b is next.
        assert_eq!(pick(&order, 1, &[], &[]), 1);
        // b sent malformed rows: c and a come first, b only when they failed too.
        assert_eq!(pick(&order, 1, &[], &some("b")), 2);
        assert_eq!(pick(&order, 3, &some("c"), &some("b")), 0);
        assert_eq!(pick(&order, 1, &some("ca"), &some("b")), 1);
        // Everything tried but one: that one.
        assert_eq!(pick(&order, 0, &some("ac"), &[]), 1);
    }
}
