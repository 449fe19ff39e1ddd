//! What the netconnect benches (and the cache's sync bench) share: peak memory, recording a reconciler's
//! transactions and replaying them over a raw socket (the floor), a raw monitoring
//! client, and running each phase in a child process.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use ovsdb_proto::{Atom, Condition, Operation};

/// For profiling: with `BENCH_STEP_MARK=FILE`, writes the step's name and the process
/// id to FILE and waits two seconds before the step (outside its time), so that a
/// profiler can be attached for that step.
pub fn mark_step(name: &str) {
    if let Some(file) = std::env::var_os("BENCH_STEP_MARK") {
        std::fs::write(file, format!("{name} {}\n", std::process::id())).unwrap();
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// The process's peak resident memory (VmHWM), in MiB.
pub fn peak_mib() -> f64 {
    mib("self", "VmHWM")
}

/// A memory figure of process `pid` (`self` for this one) from `/proc/PID/status`, in
/// MiB: `VmHWM` (the peak) or `VmRSS` (now); 0 when it cannot be read.
pub fn mib(pid: &str, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// Writes each transaction's operations as one JSON line.
pub fn record(path: &str, transactions: &[Vec<Operation>]) {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for ops in transactions {
        serde_json::to_writer(&mut file, ops).unwrap();
        file.write_all(b"\n").unwrap();
    }
}

/// The operations with each `_uuid == U` condition replaced by `name == <U's name>`.
pub fn by_name(ops: &[Operation], snap: &ovsdb_proto::cache::Snapshot) -> Vec<Operation> {
    let fix = |table: &str, conditions: &[Condition]| -> Vec<Condition> {
        conditions
            .iter()
            .map(|c| {
                let uuid = (c.column == "_uuid")
                    .then(|| c.value.as_scalar().and_then(Atom::as_uuid))
                    .flatten();
                match uuid.and_then(|u| snap.get(table, &u)) {
                    Some(row) => Condition::new("name", c.function, row["name"].clone()),
                    None => c.clone(),
                }
            })
            .collect()
    };
    ops.iter()
        .map(|op| match op {
            Operation::Update {
                table,
                conditions,
                row,
            } => Operation::Update {
                table: table.clone(),
                conditions: fix(table, conditions),
                row: row.clone(),
            },
            Operation::Mutate {
                table,
                conditions,
                mutations,
            } => Operation::Mutate {
                table: table.clone(),
                conditions: fix(table, conditions),
                mutations: mutations.clone(),
            },
            other => other.clone(),
        })
        .collect()
}

/// A raw JSON-RPC client on a unix socket: it writes a request and frames the reply,
/// nothing more (the floor the benches measure against).
pub struct RawClient {
    stream: UnixStream,
    buf: bytes::BytesMut,
    codec: ovsdb_proto::codec::JsonRpcCodec,
    chunk: Vec<u8>,
}

impl RawClient {
    /// A client of the server at `path`.
    pub fn connect(path: &str) -> RawClient {
        RawClient::on(UnixStream::connect(path).unwrap())
    }

    /// A client on `stream`.
    pub fn on(stream: UnixStream) -> RawClient {
        RawClient {
            stream,
            buf: bytes::BytesMut::new(),
            codec: ovsdb_proto::codec::JsonRpcCodec::default(),
            chunk: vec![0u8; 1 << 20],
        }
    }

    /// Sends `request` and reads one reply.
    pub fn round_trip(&mut self, request: &str) -> ovsdb_proto::codec::RawMessage {
        use tokio_util::codec::Decoder;
        self.stream.write_all(request.as_bytes()).unwrap();
        loop {
            if let Some(m) = self.codec.decode(&mut self.buf).unwrap() {
                return m;
            }
            let n = self.stream.read(&mut self.chunk).unwrap();
            assert!(n > 0, "the server closed the connection");
            self.buf.extend_from_slice(&self.chunk[..n]);
        }
    }
}

/// Sends each line of `file` as one transaction and reads its reply (one at a time,
/// as the reconciler does); returns the time.
pub fn send_all(client: &mut RawClient, file: &str) -> (Duration, usize) {
    let lines: Vec<String> = BufReader::new(std::fs::File::open(file).unwrap())
        .lines()
        .map(Result::unwrap)
        .collect();
    let requests: Vec<String> = lines
        .iter()
        .enumerate()
        .map(|(i, ops)| {
            let ops: Vec<serde_json::Value> = serde_json::from_str(ops).unwrap();
            let mut params = vec![serde_json::Value::from("OVN_Northbound")];
            params.extend(ops);
            serde_json::json!({"id": i, "method": "transact", "params": params}).to_string()
        })
        .collect();
    let start = Instant::now();
    for r in &requests {
        let m = client.round_trip(r);
        let text = String::from_utf8_lossy(m.as_bytes());
        assert!(
            !text.contains("\"error\":\""),
            "the floor's transaction failed: {text}"
        );
    }
    (start.elapsed(), requests.len())
}

/// A client that monitors every table netconnect caches and reads the updates into
/// the void, so that the server does the same monitor work as for the cache.
pub fn raw_monitor(path: &str) {
    let mut m = UnixStream::connect(path).unwrap();
    let tables: serde_json::Map<String, serde_json::Value> = netconnect::reconcile::nb::TABLES
        .iter()
        .map(|t| (t.to_string(), serde_json::json!([{}])))
        .collect();
    let req = serde_json::json!({"id": "m", "method": "monitor_cond_since", "params": [
        "OVN_Northbound", "m", tables, "00000000-0000-0000-0000-000000000000"]});
    m.write_all(req.to_string().as_bytes()).unwrap();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 20];
        while m.read(&mut buf).map(|n| n > 0).unwrap_or(false) {}
    });
    std::thread::sleep(Duration::from_millis(200));
}

/// Runs this bench binary as a child doing `args`, echoing and returning its output.
pub fn run_child(args: &[&str]) -> String {
    let text = child_output(args);
    print!("{text}");
    text
}

/// Runs this bench binary as a child doing `args`: its standard output (its standard
/// error echoed). Panics, with what the child said, if it fails.
pub fn child_output(args: &[&str]) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .arg("--child")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A multi-threaded runtime for a bench's phase.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A reconciler over the NB at `remote`, synced, that waits up to `wait` for the
/// cache to show a transaction (big ones at scale take long).
pub async fn reconciler(remote: &str, wait: Duration) -> netconnect::reconcile::Reconciler {
    let cc =
        ovsdb_proto::cache::CacheConfig::new(vec![remote.parse().unwrap()], "OVN_Northbound", &[]);
    let (mut r, _) = netconnect::reconcile::Reconciler::connect(cc, Duration::from_secs(600))
        .await
        .unwrap();
    r.wait = wait;
    r
}
