//! The cache task: pick a server, check it is usable, monitor, apply, and start over on
//! any failure.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::mpsc;
use uuid::Uuid;

use crate::client::{connect_with, Client, Notifications};
use crate::datum::{Atom, Datum};
use crate::error::Error;
use crate::monitor::{MonitorRequest, MonitorSince, Notification, RowUpdate2, TableUpdates2};
use crate::ops::Condition;
use crate::remote::Remote;
use crate::schema::DatabaseSchema;

use super::store::Writer;
use super::{CacheConfig, CacheEvent, Published};

const SERVER_MONITOR: &str = "cache-server";

/// What the cache has seen so far, kept across sessions.
#[derive(Default)]
struct Progress {
    /// The last transaction applied, for `monitor_cond_since`.
    last_txn_id: Option<Uuid>,
    /// The highest raft index seen, so that a server behind it is refused.
    raft_index: i64,
    /// Whether the initial contents were announced.
    announced: bool,
    /// What is monitored now (conditions change while the cache runs).
    requests: BTreeMap<String, MonitorRequest>,
    /// The id of the data monitor now, `cache-N`.
    monitor_id: String,
    /// The last N used.
    seq: u64,
}

impl Progress {
    fn next_monitor_id(&mut self) -> String {
        self.seq += 1;
        self.monitor_id = format!("cache-{}", self.seq);
        self.monitor_id.clone()
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
    mut commands: mpsc::Receiver<Command>,
) {
    let mut progress = Progress {
        requests: config.tables.clone(),
        ..Progress::default()
    };
    let mut failures: u32 = 0;
    let mut order = shuffled(&config.remotes);
    let mut next = 0usize;
    loop {
        if order.is_empty() {
            tracing::error!("cache: no remote to connect to");
            return;
        }
        let remote = order[next % order.len()].clone();
        next += 1;
        if next % order.len() == 0 {
            order = shuffled(&config.remotes);
        }
        let end = session(
            &config,
            &remote,
            &writer,
            &published,
            &events,
            &mut commands,
            &mut progress,
        )
        .await;
        published.client.send_replace(None);
        match end {
            End::Again(why) | End::Canceled(why) => {
                tracing::info!(%remote, %why, "cache: starting over");
                failures = 0;
            }
            End::Failed(e) => {
                if events.is_closed() {
                    return;
                }
                failures = failures.saturating_add(1);
                let wait = backoff(config.min_backoff, config.max_backoff, failures);
                tracing::info!(%remote, error = %e, ?wait, "cache: server unusable, trying the next one");
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// Exponential backoff with full jitter.
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

/// The server's view of the database, from `_Server.Database`.
#[derive(Debug, Default)]
struct ServerState {
    clustered: bool,
    connected: bool,
    leader: bool,
    index: Option<i64>,
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

async fn session(
    config: &CacheConfig,
    remote: &Remote,
    writer: &Writer,
    published: &Published,
    events: &mpsc::Sender<Vec<CacheEvent>>,
    commands: &mut mpsc::Receiver<Command>,
    progress: &mut Progress,
) -> End {
    // Conditions changed while disconnected apply to this session's monitor.
    while let Ok(Command::SetConditions {
        table,
        conditions,
        reply,
    }) = commands.try_recv()
    {
        set_conditions(progress, &table, conditions);
        let _ = reply.send(Ok(()));
    }
    match session_inner(
        config, remote, writer, published, events, commands, progress,
    )
    .await
    {
        Ok(end) => end,
        Err(e) => End::Failed(e),
    }
}

async fn session_inner(
    config: &CacheConfig,
    remote: &Remote,
    writer: &Writer,
    published: &Published,
    events: &mpsc::Sender<Vec<CacheEvent>>,
    commands: &mut mpsc::Receiver<Command>,
    progress: &mut Progress,
) -> Result<End, Error> {
    let (client, mut notes) = connect_with(remote, &config.connect).await?;
    // Servers too old for this just say so; the connection then still works.
    let _ = client.set_db_change_aware(true).await;

    // Is this server usable? Watch its _Server row for the whole session. A server
    // from before _Server (or before monitor_cond) is standalone: nothing to check.
    let unknown = |e: &Error| {
        e.as_server_error()
            .is_some_and(|s| s.error == "unknown method" || s.error == "unknown database")
    };
    let mut req = BTreeMap::new();
    req.insert(
        "Database".to_string(),
        MonitorRequest::columns(["name", "model", "connected", "leader", "index"])
            .matching(vec![Condition::eq("name", config.database.as_str())]),
    );
    let server_columns: BTreeMap<String, Vec<String>> = req
        .iter()
        .map(|(t, r)| (t.clone(), r.columns.clone().unwrap_or_default()))
        .collect();
    let mut server_cache = Writer::new(); // the _Server row, for this session only
    let server_schema = match client.get_schema("_Server").await {
        Ok(schema) => match client
            .monitor_cond("_Server", SERVER_MONITOR.into(), &req)
            .await
        {
            Ok(rows) => {
                server_cache
                    .apply(&schema, &server_columns, rows)
                    .map_err(Error::protocol)?;
                let state = server_state(&server_cache, &config.database).ok_or_else(|| {
                    Error::unavailable(Error::closed(Some(
                        format!("the server has no database {}", config.database).into(),
                    )))
                })?;
                if let Some(why) = state.refuse(config.leader_only, progress.raft_index) {
                    return Err(Error::unavailable(Error::closed(Some(why.into()))));
                }
                if let Some(i) = state.index {
                    progress.raft_index = progress.raft_index.max(i);
                }
                schema
            }
            Err(e) if unknown(&e) => schema,
            Err(e) => return Err(e),
        },
        Err(e) if unknown(&e) => DatabaseSchema::default(),
        Err(e) => return Err(e),
    };

    // A monitor canceled by a schema conversion is set up again on this connection,
    // with the new schema.
    loop {
        let end = {
            let schema = client.get_schema(&config.database).await?;
            // Name every column: the server then leaves `_version` out, and the cache knows
            // which columns to complete with defaults.
            let mut requests = progress.requests.clone();
            let mut columns = BTreeMap::new();
            for (t, r) in &mut requests {
                let ts = schema.table(t).ok_or_else(|| {
                    Error::config(format!("the server's {} has no table {t}", config.database))
                })?;
                let cols = r
                    .columns
                    .get_or_insert_with(|| ts.columns.keys().cloned().collect())
                    .clone();
                columns.insert(t.clone(), cols);
            }
            let id = progress.next_monitor_id();
            let reply = monitor(
                client.clone(),
                &config.database,
                &id,
                &requests,
                progress.last_txn_id,
            )
            .await?;
            let mut batch: Vec<CacheEvent> = if reply.found {
                changes(writer.apply(&schema, &columns, reply.updates))?
            } else {
                changes(writer.resync(&schema, &columns, reply.updates))?
            };
            progress.last_txn_id = Some(reply.last_txn_id).filter(|u| !u.is_nil());
            if !progress.announced {
                batch.push(CacheEvent::Ready);
                progress.announced = true;
            }
            publish(published, events, batch).await?;
            published.ready.send_replace(true);
            published.client.send_replace(Some(client.clone()));
            let ctx = Follow {
                config,
                client: &client,
                schema: &schema,
                columns: &columns,
                writer,
                server_schema: &server_schema,
                server_columns: &server_columns,
                published,
                events,
            };
            ctx.run(&mut notes, commands, &mut server_cache, progress)
                .await
        }?;
        match end {
            End::Canceled(why) => tracing::info!(%remote, %why, "cache: monitoring again"),
            other => return Ok(other),
        }
    }
}

fn server_state(server: &Writer, database: &str) -> Option<ServerState> {
    let snap = server.shared().load();
    let rows = snap.table("Database");
    let state = rows
        .values()
        .find(|r| {
            r.get("name")
                .and_then(Datum::as_scalar)
                .and_then(Atom::as_str)
                == Some(database)
        })
        .map(|r| ServerState::from_row(r));
    state
}

fn changes(r: Result<Vec<super::Event>, String>) -> Result<Vec<CacheEvent>, Error> {
    r.map(|events| events.into_iter().map(CacheEvent::Change).collect())
        .map_err(|e| Error::protocol(format!("cannot apply an update: {e}")))
}

async fn publish(
    published: &Published,
    events: &mpsc::Sender<Vec<CacheEvent>>,
    batch: Vec<CacheEvent>,
) -> Result<(), Error> {
    published.version.send_modify(|v| *v += 1);
    if batch.is_empty() {
        return Ok(());
    }
    // Waits while the reader is behind: backpressure, never a dropped event. A
    // dropped stream means nobody listens; the cache itself carries on.
    let _ = events.send(batch).await;
    Ok(())
}

/// `monitor_cond_since`, or on a server that lacks it `monitor_cond`, or on one that
/// lacks that too plain `monitor` (whose updates are turned into the `update2` form).
async fn monitor(
    client: Client,
    db: &str,
    id: &str,
    requests: &BTreeMap<String, MonitorRequest>,
    since: Option<Uuid>,
) -> Result<MonitorSince, Error> {
    let unknown = |e: &Error| {
        e.as_server_error()
            .is_some_and(|s| s.error == "unknown method")
    };
    match client
        .monitor_cond_since(db, id.into(), requests, since)
        .await
    {
        Err(e) if unknown(&e) => {}
        other => return other,
    }
    tracing::info!("cache: the server lacks monitor_cond_since; every reconnect resyncs in full");
    let updates = match client.monitor_cond(db, id.into(), requests).await {
        Err(e) if unknown(&e) => {
            tracing::info!("cache: the server lacks monitor_cond; using monitor");
            let plain: BTreeMap<String, MonitorRequest> = requests
                .iter()
                .map(|(t, r)| {
                    let mut r = r.clone();
                    r.conditions = None;
                    (t.clone(), r)
                })
                .collect();
            to_update2(client.monitor(db, id.into(), &plain).await?)
        }
        other => other?,
    };
    Ok(MonitorSince {
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

fn set_conditions(progress: &mut Progress, table: &str, conditions: Vec<Condition>) {
    progress
        .requests
        .entry(table.to_owned())
        .or_default()
        .conditions = Some(conditions);
}

/// Changes a live monitor's conditions with `monitor_cond_change`; the server then
/// sends what the change adds and removes, under the new monitor id.
async fn change_conditions(
    client: &Client,
    progress: &mut Progress,
    table: &str,
    conditions: Vec<Condition>,
) -> Result<(), Error> {
    if !progress.requests.contains_key(table) {
        return Err(Error::config(format!(
            "table {table} is not monitored by this cache"
        )));
    }
    let old = progress.monitor_id.clone();
    let new = format!("cache-{}", progress.seq + 1);
    let change: BTreeMap<String, MonitorRequest> = [(
        table.to_owned(),
        MonitorRequest::default().matching(conditions.clone()),
    )]
    .into();
    client
        .monitor_cond_change(old.into(), new.clone().into(), &change)
        .await?;
    progress.seq += 1;
    progress.monitor_id = new;
    set_conditions(progress, table, conditions);
    Ok(())
}

/// What a session follows notifications with.
struct Follow<'a> {
    config: &'a CacheConfig,
    client: &'a Client,
    schema: &'a DatabaseSchema,
    columns: &'a BTreeMap<String, Vec<String>>,
    writer: &'a Writer,
    server_schema: &'a DatabaseSchema,
    server_columns: &'a BTreeMap<String, Vec<String>>,
    published: &'a Published,
    events: &'a mpsc::Sender<Vec<CacheEvent>>,
}

impl Follow<'_> {
    async fn run(
        &self,
        notes: &mut Notifications,
        commands: &mut mpsc::Receiver<Command>,
        server_cache: &mut Writer,
        progress: &mut Progress,
    ) -> Result<End, Error> {
        let Follow {
            config,
            client,
            schema,
            columns,
            writer,
            server_schema,
            server_columns,
            published,
            events,
        } = self;
        loop {
            let note = tokio::select! {
                note = notes.recv() => note,
                Some(Command::SetConditions { table, conditions, reply }) = commands.recv() => {
                    let r = change_conditions(client, progress, &table, conditions).await;
                    let _ = reply.send(r);
                    continue;
                }
            };
            let Some(note) = note else {
                return Ok(End::Failed(client.closed().await));
            };
            match note {
                Notification::Update3 {
                    monitor_id,
                    last_txn_id,
                    updates,
                } if monitor_id == progress.monitor_id.as_str() => {
                    let batch = match changes(writer.apply(schema, columns, updates)) {
                        Ok(b) => b,
                        Err(e) => {
                            // The cache and the server disagree: forget the position so the
                            // next session resyncs everything.
                            progress.last_txn_id = None;
                            return Err(e);
                        }
                    };
                    progress.last_txn_id = Some(last_txn_id).filter(|u| !u.is_nil());
                    publish(published, events, batch).await?;
                }
                Notification::Update {
                    monitor_id,
                    updates,
                } if monitor_id == progress.monitor_id.as_str() => {
                    let batch = changes(writer.apply(schema, columns, to_update2(updates)))?;
                    publish(published, events, batch).await?;
                }
                Notification::Update2 {
                    monitor_id,
                    updates,
                } if monitor_id == progress.monitor_id.as_str() => {
                    let batch = changes(writer.apply(schema, columns, updates))?;
                    publish(published, events, batch).await?;
                }
                Notification::Update2 {
                    monitor_id,
                    updates,
                } if monitor_id == SERVER_MONITOR => {
                    server_cache
                        .apply(server_schema, server_columns, updates)
                        .map_err(Error::protocol)?;
                    if let Some(state) = server_state(server_cache, &config.database) {
                        if let Some(i) = state.index {
                            progress.raft_index = progress.raft_index.max(i);
                        }
                        if let Some(why) = state.refuse(config.leader_only, 0) {
                            return Ok(End::Again(format!("the server is {why}")));
                        }
                    }
                }
                Notification::MonitorCanceled(id) if id == progress.monitor_id.as_str() => {
                    return Ok(End::Canceled(format!("the server canceled monitor {id}")));
                }
                Notification::MonitorCanceled(id) => {
                    return Ok(End::Again(format!("the server canceled monitor {id}")));
                }
                other => tracing::debug!(?other, "cache: notification ignored"),
            }
        }
    }
}
