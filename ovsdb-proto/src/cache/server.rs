//! One session's conversation with a server: which of the wanted tables and columns
//! it has, the `_Server` watch that tells leadership and raft progress, and the monitor
//! request with its fallbacks for older servers (`monitor_cond_since`, then
//! `monitor_cond`, then plain `monitor`).

use std::collections::BTreeMap;
use std::sync::Arc;

use uuid::Uuid;

use crate::client::{monitor_params, Client};
use crate::cut::{RowTexts, ROWS, SINCE_ROWS};
use crate::datum::Row;
use crate::error::Error;
use crate::model::skew::SchemaSkew;
use crate::monitor::{MonitorRequest, RowUpdate2, TableUpdates2};
use crate::ops::Condition;
use crate::schema::DatabaseSchema;
use crate::tap::Cut;

use super::decode::{Form, Since, SinceSeed, UpdatesSeed};
use super::health::ServerState;
use super::row::{Layout, Layouts};
use crate::diff::apply_row;

/// The id of the `_Server` monitor.
pub(super) const SERVER_MONITOR: &str = "cache-server";

/// True for the errors an older server gives for what it does not have.
pub(super) fn is_unknown(e: &Error) -> bool {
    e.as_server_error()
        .is_some_and(|s| s.error == "unknown method" || s.error == "unknown database")
}

pub(super) fn unusable(why: impl Into<String>) -> Error {
    Error::unavailable(Error::closed(Some(why.into().into())))
}

/// What of `wanted` can be monitored on a server whose schema is `schema`: the requests
/// to send (every column named, so that the server leaves `_version` out and the cache
/// knows which columns to complete with defaults), the layouts of the cached rows, and
/// the tables and columns the server lacks, which are left out (as the C IDL does: the
/// cache stays usable against an older server, those tables stay empty).
pub(super) fn fit(
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
pub(super) struct ServerWatch {
    schema: DatabaseSchema,
    row: Option<Row>,
}

impl ServerWatch {
    /// Starts watching; `None` for a server from before `_Server` (or before
    /// `monitor_cond`), which is standalone: nothing to check.
    pub(super) async fn start(
        client: &Client,
        database: &str,
    ) -> Result<Option<ServerWatch>, Error> {
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
    pub(super) fn apply(&mut self, updates: TableUpdates2) -> Result<Option<ServerState>, Error> {
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

    pub(super) fn state(&self) -> Option<ServerState> {
        self.row.as_ref().map(ServerState::from_row)
    }
}

/// Sends `method` with `params`; the reply's rows are cut out of it at `path` while it
/// arrives ([`crate::cut`]) and the seed `seed` makes of them decodes it.
async fn ask<S>(
    client: &Client,
    method: &'static str,
    params: bytes::Bytes,
    path: &'static [crate::cut::Step],
    seed: impl FnOnce(RowTexts) -> S,
) -> Result<S::Value, Error>
where
    S: serde::de::DeserializeSeed<'static> + Send + 'static,
    S::Value: Send + 'static,
{
    let rows = RowTexts::default();
    let cut = Cut {
        path,
        rows: rows.clone(),
    };
    client
        .call_decoding_cut(method, params, seed(rows), Some(cut))
        .await
}

/// `monitor_cond_since`, or on a server that lacks it `monitor_cond`, or on one that
/// lacks that too plain `monitor` (whose updates are turned into the `update2` form).
/// The big replies are decoded straight into cached rows, while they arrive.
pub(super) async fn monitor(
    client: Client,
    db: &str,
    id: &str,
    requests: &BTreeMap<String, MonitorRequest>,
    since: Option<Uuid>,
    layouts: &Layouts,
) -> Result<Since, Error> {
    let since = Some(since.unwrap_or(Uuid::nil()));
    let params = monitor_params("monitor_cond_since", db, id.into(), requests, since)?;
    let seed = |rows| SinceSeed(layouts.clone(), Some(rows));
    match ask(&client, "monitor_cond_since", params, SINCE_ROWS, seed).await {
        Err(e) if is_unknown(&e) => {}
        other => return other,
    }
    tracing::info!("cache: the server lacks monitor_cond_since; every reconnect resyncs in full");
    let params = monitor_params("monitor_cond", db, id.into(), requests, None)?;
    let seed = |rows| UpdatesSeed(layouts.clone(), Form::Update2, Some(rows));
    let updates = match ask(&client, "monitor_cond", params, ROWS, seed).await {
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
            let params = monitor_params("monitor", db, id.into(), &plain, None)?;
            let seed = |rows| UpdatesSeed(layouts.clone(), Form::Update, Some(rows));
            ask(&client, "monitor", params, ROWS, seed).await?
        }
        other => other?,
    };
    Ok(Since {
        found: false,
        last_txn_id: Uuid::nil(),
        updates,
    })
}
