//! Initial sync of a large OVN_Northbound into the cache, beside the floor: sending the
//! cache's own monitor request and reading the reply's bytes off the socket, nothing
//! else. Peak memory (VmHWM, reset
//! before each phase) is reported for each.
//!
//! `cargo bench -p integration-tests --bench sync [-- SWITCHES PORTS_PER_SWITCH ACLS_PER_SWITCH]`
//! (default 2000 switches with 50 ports and one ACL each: 104k rows; `2000 50 10` is
//! the 122k-row NB of issue 11)

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use ovn_sandbox::{Installation, OvsdbServer, ServerOptions};

mod common;
use ovsdb_proto::cache::{Cache, CacheConfig};
use ovsdb_proto::{Atom, Datum, Operation, Remote, Row};

const TABLES: &[&str] = &["Logical_Switch", "Logical_Switch_Port", "ACL"];

fn row(pairs: Vec<(&str, Datum)>) -> Row {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

async fn populate(remote: &str, switches: usize, ports: usize, acls: usize) -> usize {
    let (c, _) = ovsdb_proto::connect(remote).await.unwrap();
    let mut rows = 0;
    for s in 0..switches {
        let mut ops = Vec::new();
        let mut refs = Vec::new();
        for p in 0..ports {
            let name = format!("p{s}-{p}");
            refs.push(Atom::NamedUuid(format!("p{p}").into()));
            ops.push(Operation::insert_named(
                "Logical_Switch_Port",
                row(vec![
                    ("name", Datum::scalar(name.as_str())),
                    (
                        "addresses",
                        Datum::scalar(format!(
                            "0a:58:0a:{:02x}:{:02x}:{:02x} 10.{}.{}.{}",
                            s / 256,
                            s % 256,
                            p,
                            s / 256,
                            s % 256,
                            p
                        )),
                    ),
                    (
                        "external_ids",
                        Datum::map([("namespace", format!("ns{s}")), ("pod", "true".to_string())]),
                    ),
                    (
                        "options",
                        Datum::map([("requested-chassis", format!("node{}", s % 100))]),
                    ),
                ]),
                format!("p{p}"),
            ));
        }
        for a in 0..acls {
            ops.push(Operation::insert_named(
                "ACL",
                row(vec![
                    ("priority", Datum::scalar(1001 + a as i64)),
                    ("direction", Datum::scalar("to-lport")),
                    (
                        "match",
                        Datum::scalar(format!("outport == @pg{s} && ip4 && tcp.dst == {a}")),
                    ),
                    ("action", Datum::scalar("allow-related")),
                ]),
                format!("acl{a}"),
            ));
        }
        ops.push(Operation::insert(
            "Logical_Switch",
            row(vec![
                ("name", Datum::scalar(format!("ls{s}"))),
                ("ports", Datum::set(refs)),
                (
                    "acls",
                    Datum::set((0..acls).map(|a| Atom::NamedUuid(format!("acl{a}").into()))),
                ),
                (
                    "other_config",
                    Datum::map([("subnet", format!("10.{}.{}.0/24", s / 256, s % 256))]),
                ),
            ]),
        ));
        c.transact("OVN_Northbound", &ops).await.unwrap();
        rows += ports + acls + 1;
    }
    rows
}

/// The request the cache sends: `monitor_cond_since` of every column, each named (so
/// that the server leaves `_version` out), from no transaction.
async fn monitor_request(remote: &str) -> String {
    let (c, _) = ovsdb_proto::connect(remote).await.unwrap();
    let schema = c.get_schema("OVN_Northbound").await.unwrap();
    let tables: serde_json::Map<String, serde_json::Value> = TABLES
        .iter()
        .map(|t| {
            let columns: Vec<&String> = schema.table(t).unwrap().columns.keys().collect();
            (t.to_string(), serde_json::json!([{"columns": columns}]))
        })
        .collect();
    serde_json::json!({"id": 1, "method": "monitor_cond_since", "params": [
        "OVN_Northbound", "m", tables, "00000000-0000-0000-0000-000000000000"
    ]})
    .to_string()
}

/// The length of the reply, found once with the framing codec.
fn reply_length(path: &str, request: &str) -> usize {
    use tokio_util_codec::decode_len;
    let mut s = UnixStream::connect(path).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    decode_len(&mut s)
}

mod tokio_util_codec {
    use std::io::Read;

    use bytes::BytesMut;
    use ovsdb_proto::codec::JsonRpcCodec;
    use tokio_util::codec::Decoder;

    /// Reads one message and returns its length in bytes.
    pub fn decode_len(s: &mut impl Read) -> usize {
        let mut codec = JsonRpcCodec::default();
        let mut buf = BytesMut::new();
        let mut chunk = vec![0u8; 1 << 20];
        loop {
            let n = s.read(&mut chunk).unwrap();
            assert!(n > 0, "connection closed before the reply was complete");
            buf.extend_from_slice(&chunk[..n]);
            if let Some(m) = codec.decode(&mut buf).unwrap() {
                return m.as_bytes().len();
            }
        }
    }
}

/// The floor: send the request and read exactly `len` bytes, parsing nothing.
fn floor(path: &str, request: &str, len: usize) -> Duration {
    let mut s = UnixStream::connect(path).unwrap();
    let mut chunk = vec![0u8; 1 << 20];
    let start = Instant::now();
    s.write_all(request.as_bytes()).unwrap();
    let mut got = 0;
    let mut first = None;
    while got < len {
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0);
        first.get_or_insert_with(|| start.elapsed());
        got += n;
    }
    // ovsdb-server builds the whole reply before it writes any of it: this shows how
    // little of the wait is spent on the bytes themselves.
    eprintln!(
        "floor: first byte after {:.2?}, last after {:.2?}",
        first.unwrap_or_default(),
        start.elapsed()
    );
    start.elapsed()
}

fn peak_mib() -> f64 {
    status_mib("VmHWM:")
}

/// A memory figure of this process from /proc/self/status (`VmHWM:`, `VmRSS:`), in MiB.
fn status_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

/// One measurement in a fresh process, so that its peak memory is its own:
/// `--child floor PATH REQUEST LEN` or `--child cache REMOTE ROWS`; prints "SECONDS
/// PEAK_MIB".
fn child(args: &[String]) {
    // RUST_LOG=ovsdb_proto=debug shows the cache's decode and apply times.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let elapsed = match args[0].as_str() {
        "floor" => floor(&args[1], &args[2], args[3].parse().unwrap()),
        "cache" => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .unwrap();
            let rows: usize = args[2].parse().unwrap();
            rt.block_on(async {
                let config = CacheConfig::new(
                    vec![Remote::parse(&args[1]).unwrap()],
                    "OVN_Northbound",
                    TABLES,
                );
                let start = Instant::now();
                let (cache, mut events) = Cache::start(config);
                cache.wait_until_ready().await;
                let d = start.elapsed();
                assert_eq!(cache.snapshot().len(), rows);
                eprintln!("cache: {:.0} MiB resident at ready", status_mib("VmRSS:"));
                if args.get(3).map(String::as_str) == Some("extras") {
                    extras(&cache, &mut events, &args[1]).await;
                }
                d
            })
        }
        other => panic!("unknown child mode {other}"),
    };
    println!("{} {}", elapsed.as_secs_f64(), peak_mib());
}

/// Listing cost and event throughput, printed to stderr by the child.
async fn extras(cache: &Cache, events: &mut ovsdb_proto::cache::CacheEvents, remote: &str) {
    use futures_util::StreamExt;
    use ovsdb_proto::cache::CacheEvent;

    while events.try_recv().is_some() {}
    let snap = cache.snapshot();
    let ports = snap.table("Logical_Switch_Port");
    let n = ports.len();
    let start = Instant::now();
    let mut total = 0usize;
    for _ in 0..10 {
        total += std::hint::black_box(ports.iter().filter(|(_, r)| !r.is_empty()).count());
    }
    let per_pass = start.elapsed() / 10;
    assert_eq!(total, 10 * n);
    eprintln!(
        "listing: {n} rows in {per_pass:.2?}, {:.0} µs per 10k rows",
        per_pass.as_secs_f64() * 1e6 * 10_000.0 / n as f64
    );

    // A stream of small updates: one-row mutations, many in flight.
    let (c, _) = ovsdb_proto::connect(remote).await.unwrap();
    const UPDATES: usize = 20_000;
    let start = Instant::now();
    let writer = tokio::spawn(async move {
        futures_util::stream::iter(0..UPDATES)
            .map(|i| {
                let c = c.clone();
                async move {
                    let op = Operation::Mutate {
                        table: "Logical_Switch".into(),
                        conditions: vec![ovsdb_proto::Condition::eq(
                            "name",
                            format!("ls{}", i % 100).as_str(),
                        )],
                        mutations: vec![ovsdb_proto::Mutation::new(
                            "external_ids",
                            ovsdb_proto::Mutator::Insert,
                            Datum::map([(format!("k{i}"), "v".to_string())]),
                        )],
                    };
                    c.transact("OVN_Northbound", &[op]).await.unwrap();
                }
            })
            .buffer_unordered(256)
            .count()
            .await
    });
    // ovsdb-server merges pending updates of a row for a client that is behind, so
    // count the updates seen in the cache, not the events.
    let mut events_seen = 0usize;
    let target: usize = UPDATES;
    let keys = |cache: &Cache| -> usize {
        cache
            .snapshot()
            .table("Logical_Switch")
            .values()
            .map(|r| r["external_ids"].len())
            .sum()
    };
    while keys(cache) < target {
        if let Ok(Some(CacheEvent::Change(_))) =
            tokio::time::timeout(Duration::from_millis(100), events.recv()).await
        {
            events_seen += 1;
        }
    }
    while events.try_recv().is_some() {
        events_seen += 1;
    }
    let elapsed = start.elapsed();
    writer.await.unwrap();
    eprintln!(
        "events: {UPDATES} single-row updates in the cache after {elapsed:.2?} ({:.0}/s), in {events_seen} events",
        UPDATES as f64 / elapsed.as_secs_f64()
    );
}

/// Runs a child doing `args`; the two figures it prints.
fn run_child(args: &[&str]) -> (f64, f64) {
    let text = common::child_output(args);
    let mut parts = text.split_whitespace().map(|p| p.parse::<f64>().unwrap());
    (parts.next().unwrap(), parts.next().unwrap())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        return child(&args[i + 1..]);
    }
    let counts: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let switches = counts.first().copied().unwrap_or(2000);
    let ports = counts.get(1).copied().unwrap_or(50);
    let acls = counts.get(2).copied().unwrap_or(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let install = Installation::recent().unwrap_or_else(|e| panic!("{e}"));
    let server = OvsdbServer::start(&install, &ServerOptions::default()).unwrap();
    let remote = server.unix_remote();
    let path = remote.trim_start_matches("unix:").to_owned();

    let t = Instant::now();
    let rows = rt.block_on(populate(&remote, switches, ports, acls));
    println!(
        "ovsdb-server {}: {rows} rows written in {:.1?}",
        install.ovs_version(),
        t.elapsed()
    );
    let request = rt.block_on(monitor_request(&remote));
    let len = reply_length(&path, &request);
    println!("monitor reply: {:.1} MB", len as f64 / 1e6);

    let (mut floors, mut ours) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        floors.push(run_child(&["floor", &path, &request, &len.to_string()]));
        ours.push(run_child(&["cache", &remote, &rows.to_string()]));
    }
    floors.sort_by(|a, b| a.0.total_cmp(&b.0));
    ours.sort_by(|a, b| a.0.total_cmp(&b.0));
    run_child(&["cache", &remote, &rows.to_string(), "extras"]);
    let (f, o) = (floors[1], ours[1]);
    println!(
        "floor (read the reply's bytes): {:.2}s (median of 3), peak {:.0} MiB",
        f.0, f.1
    );
    println!(
        "cache (request to ready):       {:.2}s (median of 3), peak {:.0} MiB, {:.2}x the floor",
        o.0,
        o.1,
        o.0 / f.0
    );
}
