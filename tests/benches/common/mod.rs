//! What the netconnect benches (and the cache's sync bench) share: peak memory, recording a reconciler's
//! transactions and replaying them over a raw socket (the floor), a raw monitoring
//! client, and running each phase in a child process.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use ovsdb_proto::Uuid;

/// For profiling: with `BENCH_STEP_MARK=FILE`, writes the step's name and the process
/// id to FILE and waits two seconds before the step (outside its time), so that a
/// profiler can be attached for that step.
pub fn mark_step(name: &str) {
    if let Some(file) = std::env::var_os("BENCH_STEP_MARK") {
        std::fs::write(file, format!("{name} {}\n", std::process::id())).unwrap();
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// The CPU time (user and system) process `pid` and every process under it have used
/// so far, read from `/proc` (a server in a container runs under the engine's init);
/// what a process that ended used is not counted. In the kernel's ticks of 10 ms.
pub fn cpu_of_tree(pid: u32) -> Duration {
    let ticks = |pid: u32| -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The fields after the command's name, which may hold spaces: state is the
        // first of them, utime and stime the 12th and 13th.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = rest.split_whitespace().collect();
        let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        n(11) + n(12)
    };
    let mut total = 0;
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        total += ticks(p);
        let tasks = std::fs::read_dir(format!("/proc/{p}/task"))
            .into_iter()
            .flatten();
        for t in tasks.flatten() {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            todo.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    Duration::from_millis(total * 10)
}

/// The median of `v` (the mean of the middle two for an even count); NaN for none.
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
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

/// One transaction a reconciler sent, as a floor replays it: its operations, and the
/// uuid the reconciler's server gave the insert at each position. The floor's server
/// gives the same inserts other uuids: [`Replay`] puts those in place of these.
pub struct Sent {
    /// The operations, as sent.
    pub operations: Vec<serde_json::Value>,
    /// (position in `operations`, the uuid given) for each insert.
    pub inserted: Vec<(usize, Uuid)>,
}

impl Sent {
    /// Writes what `plan` sent (after the reconciler applied it) to `out` as one JSON
    /// line: its operations and, for each insert, its position and the uuid it was
    /// given. Serialized straight into `out` (no JSON values, no string in between): a
    /// bench records inside its clock, so this is kept cheap.
    pub fn write_line(plan: &netconnect::reconcile::Plan, out: &mut impl Write) {
        let inserted: Vec<(usize, Uuid)> = plan
            .inserts
            .iter()
            .copied()
            .zip(plan.inserted_uuids.iter().copied())
            .collect();
        out.write_all(b"{\"operations\":").unwrap();
        serde_json::to_writer(&mut *out, &plan.operations).unwrap();
        out.write_all(b",\"inserted\":").unwrap();
        serde_json::to_writer(&mut *out, &inserted).unwrap();
        out.write_all(b"}\n").unwrap();
    }

    /// A transaction read back from a line of [`Sent::write_line`].
    pub fn from_line(line: &str) -> Sent {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let inserted = v["inserted"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let at = p[0].as_u64().unwrap() as usize;
                (at, p[1].as_str().unwrap().parse().unwrap())
            })
            .collect();
        let serde_json::Value::Array(operations) = v["operations"].clone() else {
            panic!("a recorded transaction without operations: {line}");
        };
        Sent {
            operations,
            inserted,
        }
    }
}

/// A reconciler's transactions written as they are sent, a JSON line each
/// ([`Sent::write_line`]), for a floor to replay with [`Replay`].
pub struct Recorder(std::io::BufWriter<std::fs::File>);

impl Recorder {
    /// A record in a new file at `path`.
    pub fn create(path: &str) -> Recorder {
        // A transaction's line is up to a few MB: written in large pieces.
        Recorder(std::io::BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(path).unwrap(),
        ))
    }

    /// Marks the start of step `name`: the transactions recorded after it are the
    /// step's (a floor reports each step's on its own).
    pub fn step(&mut self, name: &str) {
        writeln!(self.0, "{}", serde_json::json!({ "step": name })).unwrap();
    }

    /// Writes out what is buffered.
    pub fn flush(&mut self) {
        self.0.flush().unwrap();
    }

    /// Records what `plan` sent; nothing for an empty plan (nothing was sent).
    pub fn add(&mut self, plan: &netconnect::reconcile::Plan) {
        if !plan.is_empty() {
            Sent::write_line(plan, &mut self.0);
        }
    }
}

/// Recorded transactions sent again, one at a time, over a raw socket: the floor.
/// Each uuid the reconciler's server gave an insert is replaced by the one this
/// server gave the same insert, so that a later transaction naming the row by its
/// uuid finds it here too. A replayed transaction must do the same work: one that
/// fails, or whose update, mutate or delete matches no row, stops the bench.
pub struct Replay {
    client: RawClient,
    uuids: HashMap<Uuid, Uuid>,
    sent: usize,
}

impl Replay {
    /// A replay to the server at unix socket `path`.
    pub fn connect(path: &str) -> Replay {
        Replay {
            client: RawClient::connect(path),
            uuids: HashMap::new(),
            sent: 0,
        }
    }

    /// A replay to the server at `path`, `monitored` or not (see
    /// [`Replay::connect_monitored`]).
    pub fn connect_maybe_monitored(path: &str, monitored: bool) -> Replay {
        if monitored {
            Replay::connect_monitored(path)
        } else {
            Replay::connect(path)
        }
    }

    /// A replay whose connection also monitors every table netconnect caches, as the
    /// cache does, its updates framed and dropped: the floor of a client that learns
    /// what committed from a monitor. ovsdb-server sends a session's monitor updates
    /// before the reply of the transaction that caused them, so each round trip pays
    /// for its update, as the cache's transactions do (a monitor on a connection of
    /// its own would get its update after the reply, outside the clock).
    pub fn connect_monitored(path: &str) -> Replay {
        let mut client = RawClient::connect(path);
        let tables: serde_json::Map<String, serde_json::Value> = netconnect::reconcile::nb::TABLES
            .iter()
            .map(|t| (t.to_string(), serde_json::json!([{}])))
            .collect();
        let req = serde_json::json!({"id": "m", "method": "monitor_cond_since", "params": [
            "OVN_Northbound", "m", tables, "00000000-0000-0000-0000-000000000000"]});
        let reply = client.round_trip(&req.to_string());
        assert!(
            reply.member("error").is_none_or(|e| &e[..] == b"null"),
            "the floor's monitor failed: {}",
            String::from_utf8_lossy(reply.as_bytes())
        );
        Replay {
            client,
            uuids: HashMap::new(),
            sent: 0,
        }
    }

    /// Sends `t` and reads its reply; returns the time of the round trip alone (the
    /// uuids are put in place before the clock starts).
    pub fn send(&mut self, t: Sent) -> Duration {
        let kinds: Vec<String> = t
            .operations
            .iter()
            .map(|op| op["op"].as_str().unwrap_or_default().to_owned())
            .collect();
        let mut params = vec![serde_json::Value::from("OVN_Northbound")];
        params.extend(t.operations);
        let mut request =
            serde_json::json!({"id": self.sent, "method": "transact", "params": params});
        self.sent += 1;
        translate(&mut request, &self.uuids);
        let request = request.to_string();
        let start = Instant::now();
        let reply = self.client.round_trip(&request);
        let took = start.elapsed();
        let reply: serde_json::Value = serde_json::from_slice(reply.as_bytes()).unwrap();
        let results = reply["result"]
            .as_array()
            .unwrap_or_else(|| panic!("the floor's transaction failed: {reply}"));
        if let Some(e) = results.iter().find(|r| r.get("error").is_some()) {
            panic!("the floor's transaction failed: {e}\nrequest: {request}");
        }
        for (kind, result) in kinds.iter().zip(results) {
            if matches!(kind.as_str(), "update" | "mutate" | "delete") {
                assert!(
                    result["count"].as_u64().unwrap_or(0) > 0,
                    "the floor's {kind} matched no row (the reconciler's did): {request}"
                );
            }
        }
        for (at, theirs) in t.inserted {
            let ours = results[at]["uuid"][1].as_str().unwrap().parse().unwrap();
            self.uuids.insert(theirs, ours);
        }
        took
    }

    /// Sends each transaction of `file` (written by [`record`]); returns the time and
    /// the number of transactions.
    pub fn send_all(&mut self, file: &str) -> (Duration, usize) {
        let lines: Vec<String> = BufReader::new(std::fs::File::open(file).unwrap())
            .lines()
            .map(Result::unwrap)
            .collect();
        let n = lines.len();
        let took = lines.iter().map(|l| self.send(Sent::from_line(l))).sum();
        (took, n)
    }
}

/// Replaces, anywhere in `v`, each `["uuid", U]` whose U is in `map` by its image.
fn translate(v: &mut serde_json::Value, map: &HashMap<Uuid, Uuid>) {
    match v {
        serde_json::Value::Array(a) => {
            if a.len() == 2 && a[0] == "uuid" {
                if let Some(u) = a[1].as_str().and_then(|u| u.parse::<Uuid>().ok()) {
                    if let Some(to) = map.get(&u) {
                        a[1] = serde_json::Value::String(to.to_string());
                    }
                    return;
                }
            }
            a.iter_mut().for_each(|x| translate(x, map));
        }
        serde_json::Value::Object(o) => o.values_mut().for_each(|x| translate(x, map)),
        _ => {}
    }
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

    /// Sends `request` and reads its reply; notifications (a monitor's updates)
    /// before it are framed and dropped.
    pub fn round_trip(&mut self, request: &str) -> ovsdb_proto::codec::RawMessage {
        use tokio_util::codec::Decoder;
        self.stream.write_all(request.as_bytes()).unwrap();
        loop {
            if let Some(m) = self.codec.decode(&mut self.buf).unwrap() {
                if m.member("method").is_none() {
                    return m;
                }
                continue;
            }
            let n = self.stream.read(&mut self.chunk).unwrap();
            assert!(n > 0, "the server closed the connection");
            self.buf.extend_from_slice(&self.chunk[..n]);
        }
    }
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
