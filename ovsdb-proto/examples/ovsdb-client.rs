//! A subset of Open vSwitch's `ovsdb-client`, with the same argument order:
//!
//! ```text
//! ovsdb-client [--private-key=FILE --certificate=FILE --ca-cert=FILE] COMMAND REMOTE …
//!   list-dbs REMOTE                  one database name per line
//!   get-schema REMOTE [DB]           the schema as JSON
//!   list-tables REMOTE [DB]          table names, one per line, sorted
//!   transact REMOTE TRANSACTION      the result array as one line of JSON
//!   dump REMOTE [DB] [TABLE…]        {"Table": {"uuid": {"column": value, …}}}
//!   monitor [--leader-only] REMOTE[,REMOTE…] DB TABLE…
//!                                    {"event":"ready"}, then one line per change:
//!                                    {"table":T,"uuid":U,"op":"insert"|"update"|"delete","row":{…}}
//!                                    and, when stdin closes or on SIGTERM,
//!                                    {"event":"snapshot","tables":{T:{uuid:{row}}}}
//! ```
//!
//! `monitor` keeps a cache of the tables through reconnects and leader changes; with
//! `--leader-only` it reads only from a clustered database's leader. Each server it
//! cannot use is reported on stderr (`ovsdb-client: REMOTE: why`); it exits 1 if it
//! never synced.
//!
//! `--timeout=SECS` bounds every command: the whole of a one-shot command, and for
//! `monitor` the wait until it is synced (exit 1 if it is not by then). Without it,
//! each request of a one-shot command waits at most `--request-timeout=SECS` (default
//! 60) for its reply, so that a server that is alive (it answers `echo`) but never
//! answers the request is reported, naming the request and the wait, instead of
//! holding the command for ever (OVS's ovsdb-client waits for ever; the library's
//! default, like OVS's, is no bound).
//! `--max-message-size=BYTES` refuses any message from the server larger than that
//! (1 GiB by default); a monitor's initial contents are decoded while they arrive, so
//! the limit bounds what one reply costs, not a multiple of it.
//!
//! `transact` exits with status 1 and prints the error on stderr when an operation
//! fails (the result array is still printed on stdout, as the real tool prints it).
//! When DB is left out, the server's only database (besides `_Server`) is used.

use std::collections::BTreeMap;
use std::process::ExitCode;

use ovsdb_proto::{Client, ConnectOptions, Operation, Remote, TlsConfig};
use serde_json::{Map, Value};

/// How long a request of a one-shot command waits for its reply when no `--timeout`
/// bounds the command.
const DEFAULT_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

const USAGE: &str = "usage: ovsdb-client [--private-key=FILE --certificate=FILE --ca-cert=FILE] \
[--timeout=SECS] [--request-timeout=SECS] [--max-message-size=BYTES] COMMAND REMOTE [ARG...]\ncommands: list-dbs, get-schema, list-tables, transact, dump, monitor";

struct Failure(String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(e.to_string())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()).await {
        Ok(code) => code,
        Err(Failure(msg)) => {
            eprintln!("ovsdb-client: {msg}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Vec<String>) -> Result<ExitCode, Failure> {
    let mut options = ConnectOptions::default();
    let (mut key, mut cert, mut ca) = (None, None, None);
    let mut rest = Vec::new();
    let mut leader_only = false;
    let mut timeout = None;
    let mut request_timeout = None;
    let seconds = |flag: &str, v: &str| {
        v.parse()
            .ok()
            .filter(|s: &f64| s.is_finite() && *s > 0.0)
            .map(std::time::Duration::from_secs_f64)
            .ok_or_else(|| Failure(format!("{flag}={v}: not a positive number of seconds")))
    };
    for a in args {
        if let Some(v) = a.strip_prefix("--private-key=") {
            key = Some(v.to_owned());
        } else if let Some(v) = a.strip_prefix("--certificate=") {
            cert = Some(v.to_owned());
        } else if let Some(v) = a.strip_prefix("--ca-cert=") {
            ca = Some(v.to_owned());
        } else if let Some(v) = a.strip_prefix("--timeout=") {
            timeout = Some(seconds("--timeout", v)?);
        } else if let Some(v) = a.strip_prefix("--request-timeout=") {
            request_timeout = Some(seconds("--request-timeout", v)?);
        } else if let Some(v) = a.strip_prefix("--max-message-size=") {
            options.max_message_size =
                v.parse().ok().filter(|n: &usize| *n > 0).ok_or_else(|| {
                    Failure(format!(
                        "--max-message-size={v}: not a positive number of bytes"
                    ))
                })?;
        } else if a == "--leader-only" {
            leader_only = true;
        } else if a == "-h" || a == "--help" {
            emit(&USAGE)?;
            return Ok(ExitCode::SUCCESS);
        } else if a.starts_with("--") {
            return Err(Failure(format!("unknown option {a}\n{USAGE}")));
        } else {
            rest.push(a);
        }
    }
    if let Some(ca) = ca {
        options.tls = Some(TlsConfig {
            ca_cert: ca.into(),
            certificate: cert.map(Into::into),
            private_key: key.map(Into::into),
        });
    }
    let [command, remote, args @ ..] = rest.as_slice() else {
        return Err(Failure(USAGE.into()));
    };
    if command == "monitor" {
        return monitor(remote, args, options, leader_only, timeout).await;
    }
    // A one-shot command's requests: bounded by --request-timeout, else by the
    // default unless --timeout bounds the whole command.
    options.request_timeout = match (request_timeout, timeout) {
        (Some(t), _) => Some(t),
        (None, None) => Some(DEFAULT_REQUEST_TIMEOUT),
        (None, Some(_)) => None,
    };
    match timeout {
        None => one_shot(command, remote, args, &options).await,
        Some(t) => tokio::time::timeout(t, one_shot(command, remote, args, &options))
            .await
            .map_err(|_| Failure(format!("{command} did not finish within {t:?}")))?,
    }
}

async fn one_shot(
    command: &str,
    remote: &str,
    args: &[String],
    options: &ConnectOptions,
) -> Result<ExitCode, Failure> {
    let remote = Remote::parse(remote)?;
    let (client, _notifications) = ovsdb_proto::connect_with(&remote, options).await?;
    match command {
        "list-dbs" => {
            no_more(args, 0)?;
            for db in client.list_dbs().await? {
                emit(&db)?;
            }
        }
        "get-schema" => {
            no_more(args, 1)?;
            let db = database(&client, args.first()).await?;
            emit(&client.get_schema_json(&db).await?)?;
        }
        "list-tables" => {
            no_more(args, 1)?;
            let db = database(&client, args.first()).await?;
            for table in client.get_schema(&db).await?.tables.keys() {
                emit(table)?;
            }
        }
        "transact" => {
            no_more(args, 1)?;
            let text = args
                .first()
                .ok_or_else(|| Failure("transact needs a TRANSACTION".into()))?;
            let params: Value = serde_json::from_str(text)
                .map_err(|e| Failure(format!("TRANSACTION is not valid JSON: {e}")))?;
            let result = client.transact_json(&params).await?;
            emit(&result)?;
            if let Some(e) = first_error(&result) {
                eprintln!("ovsdb-client: transaction failed: {e}");
                return Ok(ExitCode::FAILURE);
            }
        }
        "dump" => {
            let (db, tables) = match args.first() {
                Some(first) if client.list_dbs().await?.contains(first) => {
                    (first.clone(), &args[1..])
                }
                _ => (database(&client, None).await?, args),
            };
            emit(&dump(&client, &db, tables).await?)?;
        }
        other => return Err(Failure(format!("unknown command \"{other}\"\n{USAGE}"))),
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints one line; a closed stdout is an error, not a panic.
fn emit(line: &dyn std::fmt::Display) -> Result<(), Failure> {
    use std::io::Write;
    writeln!(std::io::stdout().lock(), "{line}")
        .map_err(|e| Failure(format!("cannot write to stdout: {e}")))
}

fn no_more(args: &[String], max: usize) -> Result<(), Failure> {
    if args.len() > max {
        return Err(Failure(format!(
            "too many arguments: {}",
            args[max..].join(" ")
        )));
    }
    Ok(())
}

/// The database named, or the server's only one besides `_Server`.
async fn database(client: &Client, given: Option<&String>) -> Result<String, Failure> {
    if let Some(db) = given {
        return Ok(db.clone());
    }
    let dbs: Vec<String> = client
        .list_dbs()
        .await?
        .into_iter()
        .filter(|d| d != "_Server")
        .collect();
    match dbs.as_slice() {
        [one] => Ok(one.clone()),
        _ if dbs.iter().any(|d| d == "Open_vSwitch") => Ok("Open_vSwitch".into()),
        _ => Err(Failure(format!(
            "the server has databases {}: name one",
            dbs.join(", ")
        ))),
    }
}

fn first_error(result: &Value) -> Option<String> {
    result.as_array()?.iter().find_map(|r| {
        let e = r.get("error")?;
        let details = r.get("details").and_then(Value::as_str);
        Some(match details {
            Some(d) => format!("{}: {d}", e.as_str().unwrap_or(&e.to_string())),
            None => e.as_str().unwrap_or(&e.to_string()).to_owned(),
        })
    })
}

async fn dump(client: &Client, db: &str, tables: &[String]) -> Result<Value, Failure> {
    let schema = client.get_schema(db).await?;
    let names: Vec<String> = if tables.is_empty() {
        schema.tables.keys().cloned().collect()
    } else {
        for t in tables {
            if schema.table(t).is_none() {
                return Err(Failure(format!("{db} has no table named {t}")));
            }
        }
        tables.to_vec()
    };
    let ops: Vec<Operation> = names
        .iter()
        .map(|t| {
            let mut columns: Vec<String> = schema.tables[t].columns.keys().cloned().collect();
            columns.push("_uuid".into());
            Operation::Select {
                table: t.clone(),
                conditions: vec![],
                columns: Some(columns),
            }
        })
        .collect();
    let results = client.transact(db, &ops).await?;
    let mut out = Map::new();
    for (name, result) in names.iter().zip(results) {
        let mut rows = BTreeMap::new();
        for mut row in result.rows().unwrap_or_default().iter().cloned() {
            let uuid = row
                .remove("_uuid")
                .and_then(|u| u.as_scalar().and_then(|a| a.as_uuid()))
                .ok_or_else(|| Failure(format!("a row of {name} came back without its _uuid")))?;
            // A server's value that does not fit its column is an error, not output.
            let table = &schema.tables[name];
            for (c, d) in &row {
                let column = table.column(c).ok_or_else(|| {
                    Failure(format!(
                        "table {name} row {uuid}: the server sent column {c}, which the schema lacks"
                    ))
                })?;
                column.column_type.check(d).map_err(|why| {
                    Failure(format!(
                        "table {name} row {uuid} column {c}: the server's value {d} does not fit the column: {why}"
                    ))
                })?;
            }
            let columns: Map<String, Value> =
                row.into_iter().map(|(c, d)| (c, d.to_json())).collect();
            rows.insert(uuid.to_string(), Value::Object(columns));
        }
        out.insert(name.clone(), Value::Object(rows.into_iter().collect()));
    }
    Ok(Value::Object(out))
}

/// `monitor`: follows the tables through a cache until stdin closes or SIGTERM.
async fn monitor(
    remotes: &str,
    args: &[String],
    options: ConnectOptions,
    leader_only: bool,
    timeout: Option<std::time::Duration>,
) -> Result<ExitCode, Failure> {
    use ovsdb_proto::cache::{Cache, CacheConfig, CacheEvent, Change};

    let [db, tables @ ..] = args else {
        return Err(Failure("monitor needs DB and at least one TABLE".into()));
    };
    if tables.is_empty() {
        return Err(Failure("monitor needs at least one TABLE".into()));
    }
    let tables: Vec<&str> = tables.iter().map(String::as_str).collect();
    let mut config = CacheConfig::new(Remote::parse_list(remotes)?, db.as_str(), &tables);
    config.leader_only = leader_only;
    config.connect = options;
    let (cache, mut events) = Cache::start(config);

    // Read on a thread of its own: a blocking read would hold up the runtime's
    // shutdown when the command ends for another reason (a timeout) with stdin open.
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        use std::io::Read;
        let mut buf = [0u8; 1024];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
        let _ = closed_tx.send(());
    });
    let stdin_closed = async {
        let _ = closed_rx.await;
    };
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| Failure(format!("cannot watch for SIGTERM: {e}")))?;
    tokio::pin!(stdin_closed);
    let deadline = async {
        match timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    let mut ready = false;
    loop {
        tokio::select! {
            _ = &mut deadline, if !ready => {
                return Err(Failure(format!(
                    "not synced with {remotes} within {:?}",
                    timeout.unwrap_or_default()
                )));
            }
            e = events.recv() => match e {
                // A follower skipped on purpose (--leader-only) is no fault: not said.
                Some(CacheEvent::Unusable { remote, error, reason }) if reason.is_fault() => {
                    eprintln!("ovsdb-client: {remote}: {error}");
                }
                Some(CacheEvent::Skew(skew)) => {
                    eprintln!(
                        "ovsdb-client: the server's {} schema (version {}) lacks tables {:?} and columns {:?}; not monitored",
                        skew.database, skew.server_version, skew.missing_tables, skew.missing_columns
                    );
                }
                Some(CacheEvent::Ready) => {
                    ready = true;
                    emit(&serde_json::json!({"event": "ready"}))?;
                }
                // The initial rows are in the cache before "ready", not printed as events.
                Some(CacheEvent::Change(_)) if !ready => {}
                Some(CacheEvent::Change(ev)) => {
                    let (op, row) = match &ev.change {
                        Change::Insert { new } => ("insert", new),
                        Change::Modify { new, .. } => ("update", new),
                        Change::Delete { old } => ("delete", old),
                    };
                    emit(&serde_json::json!({"table": ev.table, "uuid": ev.uuid.to_string(), "op": op, "row": &**row}))?;
                }
                Some(_) => {}
                None => return Err(Failure("the cache stopped".into())),
            },
            _ = &mut stdin_closed => break,
            _ = sigterm.recv() => break,
        }
    }
    if !ready {
        return Err(Failure(format!("never synced with {remotes}")));
    }
    // Everything the cache has applied was printed above: events are sent before the
    // snapshot they lead to is read here.
    while let Some(e) = events.try_recv() {
        if let CacheEvent::Change(ev) = e {
            let (op, row) = match &ev.change {
                Change::Insert { new } => ("insert", new),
                Change::Modify { new, .. } => ("update", new),
                Change::Delete { old } => ("delete", old),
            };
            emit(
                &serde_json::json!({"table": ev.table, "uuid": ev.uuid.to_string(), "op": op, "row": &**row}),
            )?;
        }
    }
    emit(&serde_json::json!({"event": "snapshot", "tables": cache.snapshot().to_json()}))?;
    Ok(ExitCode::SUCCESS)
}
