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
//! `--leader-only` it reads only from a clustered database's leader.
//!
//! `transact` exits with status 1 and prints the error on stderr when an operation
//! fails (the result array is still printed on stdout, as the real tool prints it).
//! When DB is left out, the server's only database (besides `_Server`) is used.

use std::collections::BTreeMap;
use std::process::ExitCode;

use ovsdb_proto::{Client, ConnectOptions, Operation, Remote, TlsConfig};
use serde_json::{Map, Value};

const USAGE: &str = "usage: ovsdb-client [--private-key=FILE --certificate=FILE --ca-cert=FILE] \
COMMAND REMOTE [ARG...]\ncommands: list-dbs, get-schema, list-tables, transact, dump, monitor";

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
    for a in args {
        if let Some(v) = a.strip_prefix("--private-key=") {
            key = Some(v.to_owned());
        } else if let Some(v) = a.strip_prefix("--certificate=") {
            cert = Some(v.to_owned());
        } else if let Some(v) = a.strip_prefix("--ca-cert=") {
            ca = Some(v.to_owned());
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
        return monitor(remote, args, options, leader_only).await;
    }
    let remote = Remote::parse(remote)?;
    let (client, _notifications) = ovsdb_proto::connect_with(&remote, &options).await?;
    match command.as_str() {
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
) -> Result<ExitCode, Failure> {
    use ovsdb_proto::cache::{Cache, CacheConfig, CacheEvent, Change};
    use tokio::io::AsyncReadExt;

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

    let stdin_closed = async {
        let mut stdin = tokio::io::stdin();
        let mut buf = [0u8; 1024];
        while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
    };
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| Failure(format!("cannot watch for SIGTERM: {e}")))?;
    tokio::pin!(stdin_closed);
    let mut ready = false;
    loop {
        tokio::select! {
            e = events.recv() => match e {
                Some(CacheEvent::Ready) => {
                    ready = true;
                    emit(&serde_json::json!({"event": "ready"}))?;
                }
                // The initial rows are in the cache before "ready", not printed as events.
                Some(CacheEvent::Change(_)) if !ready => {}
                Some(CacheEvent::Change(ev)) => {
                    let (op, row) = match &ev.change {
                        Change::Insert { new } => ("insert", new),
                        Change::Update { new, .. } => ("update", new),
                        Change::Delete { old } => ("delete", old),
                    };
                    emit(&serde_json::json!({"table": ev.table, "uuid": ev.uuid.to_string(), "op": op, "row": &**row}))?;
                }
                None => return Err(Failure("the cache stopped".into())),
            },
            _ = &mut stdin_closed => break,
            _ = sigterm.recv() => break,
        }
    }
    // Everything the cache has applied was printed above: events are sent before the
    // snapshot they lead to is read here.
    while let Some(e) = events.try_recv() {
        if let CacheEvent::Change(ev) = e {
            let (op, row) = match &ev.change {
                Change::Insert { new } => ("insert", new),
                Change::Update { new, .. } => ("update", new),
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
