//! The watcher: picks a server, checks it is usable, monitors, and starts over on any
//! failure, as a stream of [`WatchEvent`]s (the contents of a server once synced, each
//! change after, each server found unusable) that the reflector applies to the store.
//! It never touches the store itself: the reflector answers each batch of rows with
//! whether it applied, and a batch that did not makes the watcher start over from the
//! server's whole contents.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};
use uuid::Uuid;

use crate::client::{Client, Notifications};
use crate::connect::connect_with;
use crate::error::{Error, ErrorKind};
use crate::model::skew::SchemaSkew;
use crate::monitor::{MonitorRequest, Notification};
use crate::ops::Condition;
use crate::remote::Remote;
use crate::schema::DatabaseSchema;

use super::backoff::{after_failure, backoff, pick, shuffled};
use super::decode::{decode_note, Note, TableChanges};
use super::health::RaftSeen;
use super::row::Layouts;
use super::server::{fit, monitor, unusable, ServerWatch, SERVER_MONITOR};
use super::CacheConfig;
use super::UnusableReason;

/// What the cache has seen so far, kept across sessions.
#[derive(Default)]
struct Progress {
    /// The last transaction applied, for `monitor_cond_since`.
    last_txn_id: Option<Uuid>,
    /// The raft index seen, so that a server behind it is refused.
    raft: RaftSeen,
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
    Again(UnusableReason, String),
    /// The server may not be used (not the leader, behind, without the database):
    /// wait before the next attempt.
    Refused(UnusableReason, String),
    /// The server canceled the monitor (a schema conversion): monitor again on the
    /// same connection.
    Canceled(String),
    /// Wait before the next attempt.
    Failed(Error),
}

/// A server's contents, once a session synced.
pub(super) struct Contents {
    /// All of them (`resync`) or the changes since the last transaction seen.
    pub(super) updates: Vec<TableChanges>,
    pub(super) resync: bool,
    pub(super) layouts: Layouts,
    /// What the server lacks of the monitored tables and columns, when that changed.
    pub(super) skew: Option<SchemaSkew>,
    pub(super) schema: Arc<DatabaseSchema>,
    /// The connection they came over, to transact on.
    pub(super) client: Client,
    /// The server they came from.
    pub(super) remote: Remote,
}

/// What the watcher reports to the reflector.
pub(super) enum WatchEvent {
    /// A server's contents are in; `ack` says whether they applied.
    Synced {
        contents: Box<Contents>,
        ack: oneshot::Sender<Result<(), String>>,
    },
    /// Changes seen by the live monitor; `ack` says whether they applied.
    Changed {
        changes: Vec<TableChanges>,
        ack: oneshot::Sender<Result<(), String>>,
    },
    /// A server could not be used, or stopped being usable.
    Unusable {
        remote: String,
        error: String,
        reason: UnusableReason,
    },
    /// The connection the contents came over is gone.
    Disconnected,
}

/// Runs the watcher until the reflector stops reading its events.
pub(super) async fn run(
    config: CacheConfig,
    events: mpsc::Sender<WatchEvent>,
    commands: mpsc::Receiver<Command>,
    handled: Arc<watch::Sender<(u64, u64)>>,
) {
    let progress = Progress {
        requests: config.tables.clone(),
        ..Progress::default()
    };
    Watcher {
        config,
        events,
        commands,
        progress,
        synced: false,
        serving: None,
        probe_scale: 1,
        handled,
    }
    .run()
    .await
}

/// The watcher's state, kept across sessions.
struct Watcher {
    config: CacheConfig,
    events: mpsc::Sender<WatchEvent>,
    commands: mpsc::Receiver<Command>,
    progress: Progress,
    /// True once the current session's contents applied.
    synced: bool,
    /// The server of the current session.
    serving: Option<Remote>,
    /// What the inactivity probe's interval is multiplied by: doubled each time a
    /// server goes silent past the probe before the cache synced (see
    /// [`MAX_PROBE_SCALE`]), back to 1 once a session syncs.
    probe_scale: u32,
    /// The session's connection and how many of its notifications are handled.
    handled: Arc<watch::Sender<(u64, u64)>>,
}

/// The most the inactivity probe's interval grows while no session syncs: 64 times
/// (5 s become 320 s). ovsdb-server answers nothing, probes included, while it composes
/// the reply to a monitor; for a big database (760k rows of an OVN NB took 18 s on a
/// 2-core machine) that outlasts the default probe, and a client that kept it would
/// cut every attempt short and never sync, each attempt costing the server the same
/// work again.
const MAX_PROBE_SCALE: u32 = 64;

impl Watcher {
    /// Reports `event`; false when nobody listens any more (the cache is gone).
    async fn emit(&self, event: WatchEvent) -> bool {
        self.events.send(event).await.is_ok()
    }

    /// Reports rows and waits until the reflector says whether they applied. When
    /// they did not, the cache and the server disagree: the resume position is
    /// forgotten, so that the next session fetches everything.
    async fn emit_rows(
        &mut self,
        event: impl FnOnce(oneshot::Sender<Result<(), String>>) -> WatchEvent,
    ) -> Result<(), Error> {
        let (ack, applied) = oneshot::channel();
        let outcome = match self.emit(event(ack)).await {
            true => applied
                .await
                .unwrap_or_else(|_| Err("the cache stopped".into())),
            false => Err("the cache stopped".into()),
        };
        outcome.map_err(|e| {
            self.progress.last_txn_id = None;
            Error::protocol(format!("cannot apply an update: {e}"))
        })
    }

    async fn run(mut self) {
        let mut rounds = Rounds::new(&self.config.remotes);
        loop {
            if rounds.order.is_empty() {
                tracing::error!("cache: no remote to connect to");
                return;
            }
            if self.events.is_closed() {
                return;
            }
            let remote = rounds.pick(&self.config.remotes);
            self.synced = false;
            self.serving = Some(remote.clone());
            let end = self.session(&remote).await.unwrap_or_else(End::Failed);
            self.emit(WatchEvent::Disconnected).await;
            self.learn(&mut rounds, &remote, &end).await;
            self.finish(&mut rounds, &remote, end).await;
        }
    }

    /// What the session with `remote` that ended with `end` tells of the servers: a
    /// session that synced was healthy (what failed before it is forgotten, and the
    /// reconnect after it waits the minimum); one silent past the inactivity probe
    /// before it synced makes the next attempts wait longer; servers refused for being
    /// behind long enough are reported; a server that sent what does not fit the
    /// schema is a suspect, tried after the others until a session of it ends without
    /// such an error.
    async fn learn(&mut self, rounds: &mut Rounds, remote: &Remote, end: &End) {
        if self.synced {
            rounds.failed_rounds = 0;
            rounds.tried.clear();
            rounds.behind_since = None;
            rounds.behind_reported = false;
            self.probe_scale = 1;
        } else if matches!(end, End::Failed(e) if e.is_inactivity_timeout())
            && self.probe_scale < MAX_PROBE_SCALE
        {
            self.probe_scale *= 2;
            let probe = self
                .config
                .connect
                .inactivity_probe
                .map(|p| p * self.probe_scale);
            tracing::warn!(
                %remote,
                ?probe,
                "cache: the server was silent past the inactivity probe before the cache synced \
                 (busy composing a big monitor reply?); the next attempts wait longer"
            );
        }
        if matches!(end, End::Failed(_) | End::Refused(..))
            && self.progress.raft.take_refused_behind()
        {
            let since = *rounds
                .behind_since
                .get_or_insert_with(std::time::Instant::now);
            if !rounds.behind_reported && since.elapsed() >= self.config.behind_limit {
                self.report_behind(since.elapsed()).await;
                rounds.behind_reported = true;
                if self.config.reset_when_behind {
                    self.progress.raft.forget();
                    rounds.behind_since = None;
                    rounds.behind_reported = false;
                    rounds.tried.clear();
                }
            }
        }
        let malformed = matches!(end, End::Failed(e) if e.kind() == ErrorKind::Protocol);
        let was_suspect = rounds.suspects.contains(remote);
        if malformed && !was_suspect {
            rounds.suspects.push(remote.clone());
        } else if !malformed && was_suspect {
            rounds.suspects.retain(|r| r != remote);
        }
    }

    /// Reports how the session with `remote` ended (`Unusable`, but for a cancel) and
    /// waits before the next: the minimum after starting over, a backoff after a
    /// failure.
    async fn finish(&mut self, rounds: &mut Rounds, remote: &Remote, end: End) {
        let trouble = match &end {
            End::Again(reason, why) | End::Refused(reason, why) => Some((*reason, why.clone())),
            End::Canceled(_) => None,
            // The event names the server: its reason need not again.
            End::Failed(e) => Some((
                UnusableReason::of(e),
                e.to_string().replace(&format!("{remote}: "), ""),
            )),
        };
        if let Some((reason, error)) = trouble {
            self.emit(WatchEvent::Unusable {
                remote: remote.to_string(),
                error,
                reason,
            })
            .await;
        }
        match end {
            End::Again(_, why) | End::Canceled(why) => {
                tracing::info!(%remote, %why, "cache: starting over");
                rounds.failed_rounds = 0;
            }
            End::Refused(reason, why) => {
                let wait = after_failure(
                    self.config.min_backoff,
                    self.config.max_backoff,
                    rounds.tried.len() >= rounds.order.len(),
                    &mut rounds.failed_rounds,
                );
                if reason.is_fault() {
                    tracing::info!(%remote, %why, ?wait, "cache: server unusable, trying the next one");
                } else {
                    tracing::debug!(%remote, %why, ?wait, "cache: server skipped, trying the next one");
                }
                tokio::time::sleep(wait).await;
            }
            End::Failed(e) => {
                let malformed = e.kind() == ErrorKind::Protocol;
                let wait = after_failure(
                    self.config.min_backoff,
                    self.config.max_backoff,
                    rounds.tried.len() >= rounds.order.len(),
                    &mut rounds.failed_rounds,
                );
                if malformed {
                    tracing::warn!(%remote, error = %e, ?wait, "cache: malformed data from the server; trying the next one");
                } else {
                    tracing::info!(%remote, error = %e, ?wait, "cache: server unusable, trying the next one");
                }
                tokio::time::sleep(wait).await;
            }
        }
    }

    /// Says that servers have been refused as behind for `how_long` with no sync.
    async fn report_behind(&self, how_long: std::time::Duration) {
        let remotes: Vec<String> = self.config.remotes.iter().map(|r| r.to_string()).collect();
        let what = if self.config.reset_when_behind {
            "the raft index is forgotten and the cache syncs with what they have"
        } else {
            "the cache keeps its newer contents; Cache::reset_raft_index() takes theirs"
        };
        let error = format!(
            "servers have been refused for {how_long:.1?} for a raft index behind the {} \
             already seen, and none was synced with (a cluster restored from a backup?): {what}",
            self.progress.raft.index()
        );
        tracing::warn!(%error, "cache: every server behind");
        self.emit(WatchEvent::Unusable {
            remote: remotes.join(","),
            error,
            reason: UnusableReason::EveryServerBehind,
        })
        .await;
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
        let mut options = self.config.connect.clone();
        options.inactivity_probe = options.inactivity_probe.map(|p| p * self.probe_scale);
        let (client, mut notes) = connect_with(remote, &options).await?;
        // Servers too old for this just say so; the connection then still works.
        let _ = client.set_db_change_aware(true).await;
        let mut server = ServerWatch::start(&client, &self.config.database).await?;
        if let Some(watch) = &server {
            let Some(state) = watch.state() else {
                let why = format!("the server has no database {}", self.config.database);
                return Ok(End::Refused(UnusableReason::NoDatabase, why));
            };
            if let Err(r) = self
                .progress
                .raft
                .admit(&state, self.config.leader_only, true)
            {
                return Ok(End::Refused(r.reason, r.why));
            }
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
        let layouts = self.sync(client).await?;
        self.follow(client, notes, server, &layouts).await
    }

    /// Sends the monitor request (since the last transaction seen, unless the tables'
    /// layouts changed) and hands its reply on; the layouts the rows are cached with.
    async fn sync(&mut self, client: &Client) -> Result<Layouts, Error> {
        let db = self.config.database.clone();
        let schema = client.get_schema(&db).await?;
        let (requests, layouts, skew) = fit(&db, &self.progress.requests, &schema)?;
        let mut skew_changed = None;
        if self.progress.skew.as_ref() != Some(&skew) {
            if !skew.is_empty() {
                tracing::warn!(
                    database = %db,
                    server = %skew.server_version,
                    missing_tables = ?skew.missing_tables,
                    missing_columns = ?skew.missing_columns,
                    "cache: the server lacks monitored tables or columns; they stay empty"
                );
            }
            skew_changed = Some(skew.clone());
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
        let asked = std::time::Instant::now();
        let reply = monitor(client.clone(), &db, &id, &requests, since, &layouts).await?;
        self.progress.use_id(id);
        let rows: usize = reply.updates.iter().map(|t| t.rows.len()).sum();
        let decoded = asked.elapsed();
        let contents = Box::new(Contents {
            updates: reply.updates,
            resync: !reply.found,
            layouts: layouts.clone(),
            skew: skew_changed,
            schema: Arc::new(schema),
            client: client.clone(),
            remote: self.serving.clone().expect("a session's server"),
        });
        let resync = !reply.found;
        self.emit_rows(move |ack| WatchEvent::Synced { contents, ack })
            .await?;
        tracing::debug!(
            rows,
            resync,
            ?decoded,
            applied = ?asked.elapsed() - decoded,
            "cache: monitor reply decoded (from the request) and applied"
        );
        self.synced = true;
        self.progress.raft.trust();
        self.progress.last_txn_id = Some(reply.last_txn_id).filter(|u| !u.is_nil());
        Ok(layouts)
    }

    /// Follows the monitor's updates and the commands of the cache's handles until
    /// the session ends.
    async fn follow(
        &mut self,
        client: &Client,
        notes: &mut Notifications,
        server: &mut Option<ServerWatch>,
        layouts: &Layouts,
    ) -> Result<End, Error> {
        loop {
            // Every notification taken so far is handled: the data's applied to the
            // store (the reflector acknowledged it), the rest acted on.
            self.handled.send_replace(notes.mark());
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
            let note = match decode_note(&raw.method, &raw.params, current, SERVER_MONITOR, layouts)
            {
                Some(Ok(note)) => note,
                // A malformed update: the cache may have missed it, so the next
                // session fetches everything.
                Some(Err(e)) => {
                    self.progress.last_txn_id = None;
                    notes.fail(e.clone());
                    return Err(Error::protocol(e));
                }
                None => match other_notification(&raw, current, notes)? {
                    Some(end) => return Ok(end),
                    None => continue,
                },
            };
            if let Some(end) = self.take(note, server).await? {
                return Ok(end);
            }
        }
    }

    /// Takes one update of the data or of the `_Server` database; `Some` when it ends
    /// the session (the server became unusable).
    async fn take(
        &mut self,
        note: Note,
        server: &mut Option<ServerWatch>,
    ) -> Result<Option<End>, Error> {
        match note {
            Note::Data { txn, changes } => {
                self.emit_rows(|ack| WatchEvent::Changed { changes, ack })
                    .await?;
                if let Some(t) = txn {
                    self.progress.last_txn_id = Some(t).filter(|u| !u.is_nil());
                }
            }
            Note::Server(updates) => {
                let Some(watch) = server.as_mut() else {
                    return Ok(None);
                };
                if let Some(state) = watch.apply(updates)? {
                    // Leadership or connectivity lost: look for a usable server.
                    if let Err(r) = self
                        .progress
                        .raft
                        .admit(&state, self.config.leader_only, false)
                    {
                        let why = format!("the server became unusable: {}", r.why);
                        return Ok(Some(End::Again(r.reason, why)));
                    }
                    // The server the cache is synced with.
                    self.progress.raft.trust();
                }
            }
            Note::Other(id) => {
                tracing::debug!(%id, "cache: an update for a monitor this cache does not have, ignored");
            }
        }
        Ok(None)
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

/// A notification that is no update of the cache's monitors (`current`, the data's):
/// `Some` when it ends the session (one of them canceled), `None` when it is ignored.
fn other_notification(
    raw: &crate::monitor::RawNotification,
    current: &str,
    notes: &mut Notifications,
) -> Result<Option<End>, Error> {
    let note = match raw.decode() {
        Ok(note) => note,
        Err(e) => {
            notes.fail(e.to_string());
            return Err(Error::protocol(e));
        }
    };
    match note {
        Notification::MonitorCanceled(id) if id == current => Ok(Some(End::Canceled(format!(
            "the server canceled monitor {id}"
        )))),
        Notification::MonitorCanceled(id) if id == SERVER_MONITOR => {
            // Without it leadership changes go unseen: a new connection, after a
            // backoff.
            Ok(Some(End::Failed(unusable(
                "the server canceled the _Server monitor",
            ))))
        }
        Notification::MonitorCanceled(id) => {
            tracing::debug!(%id, "cache: a cancel of a monitor this cache does not have, ignored");
            Ok(None)
        }
        other => {
            tracing::debug!(?other, "cache: notification ignored");
            Ok(None)
        }
    }
}

/// Which server the watcher tries next, and what failed since the last session that
/// synced.
struct Rounds {
    /// Rounds in a row in which every server failed.
    failed_rounds: u32,
    /// Since when servers have been refused for being behind, with no sync since.
    behind_since: Option<std::time::Instant>,
    /// Whether that was reported.
    behind_reported: bool,
    /// Servers that sent what does not fit the schema (rows whose values do not fit
    /// their columns, updates that do not apply): tried after the others until one of
    /// their sessions ends without such an error.
    suspects: Vec<Remote>,
    /// The remotes tried since the last session that synced.
    tried: Vec<Remote>,
    /// This round's order.
    order: Vec<Remote>,
    /// Where in `order` the next pick starts.
    next: usize,
}

impl Rounds {
    fn new(remotes: &[Remote]) -> Rounds {
        Rounds {
            failed_rounds: 0,
            behind_since: None,
            behind_reported: false,
            suspects: Vec::new(),
            tried: Vec::new(),
            order: shuffled(remotes),
            next: 0,
        }
    }

    /// The server to try next; when every server failed, a new round in a new order.
    fn pick(&mut self, remotes: &[Remote]) -> Remote {
        if self.tried.len() >= self.order.len() {
            self.tried.clear();
            self.order = shuffled(remotes);
        }
        let at = pick(&self.order, self.next, &self.tried, &self.suspects);
        let remote = self.order[at].clone();
        self.next = at + 1;
        self.tried.push(remote.clone());
        remote
    }
}
