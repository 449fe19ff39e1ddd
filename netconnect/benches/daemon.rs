//! netconnectd end to end beside the library it is made of and a raw floor, on the
//! netconnect bench's case: N primary Layer3 networks × M nodes in the zone of one
//! node (default 500 × 500, about 761k rows), then one change at a time:
//!
//! 1. `start to ready`: every row from an empty database;
//! 2. `a node added` (node M, the last by name, so that no allocation moves);
//! 3. `a network added` (network N);
//! 4. `a subnet appended` (a second cluster subnet on the first network);
//! 5. `a node removed` (node M again).
//!
//! Steps 2 to 5 are one round; `ROUNDS=R` (default 3) runs R of them, round r adding
//! network N+r-1 and appending a subnet to network r-1, so that each round changes as
//! much as the first. A step of one transaction lasts tens of milliseconds, and a
//! floor measured minutes apart from the daemon can be twice as fast or as slow on a
//! shared machine; each step's line is printed per round (`a node added (…; round
//! 1): …`), then a line per step of the medians over the rounds (`a node added (…;
//! the median of 3 rounds): …`), whose ratios are the ones to quote.
//!
//! Each step is measured three ways, on three empty ovsdb-servers:
//!
//! - `library` (a child process, so that its peak memory is its own): a cache and a
//!   reconciler reconcile every key of the step's inputs (its world built after the
//!   step before's and read beside the state the step before left, outside the clock,
//!   as netconnectd builds it), as many in flight as
//!   the daemon's workers (`--workers`, default 8), keeping no plan; each transaction
//!   is recorded with the uuids its inserts were given (a later step's after its time);
//! - `floor` (a child process): the recorded transactions sent over a raw socket, one
//!   at a time, reading only the replies; uuids the library's server gave are replaced
//!   by those the floor's server gave the same inserts (outside the clock); then again
//!   with the same connection monitoring the tables as the cache does, its updates
//!   framed and dropped: the floor of a client that learns what committed from a
//!   monitor, as the library does (the server serializes each row a second time, and
//!   sends a transaction's update before its reply);
//! - `daemon`: netconnectd started over a manifest directory holding the first step's
//!   objects (`--zone`, `--status-dir`, `--listen`); each later step's file is
//!   replaced as editors save it, and the step lasts until
//!   `netconnect_rows_written_total` (rows of committed transactions) has grown by
//!   what the library wrote for it.
//!
//! Each line also gives the CPU time each server spent in the step (read from `/proc`
//! 300 ms after the step, so that a monitor's last updates are counted): what the
//! server had to do, whatever the client's clock saw.
//!
//! Memory: the daemon's peak against a cache alone holding the same rows (a child that
//! only syncs a reconciler's cache from the library's server at the end).
//!
//! `cargo bench -p netconnect --bench daemon [-- NETWORKS NODES]`; `WORKERS=N` sets the
//! keys in flight on the library's and the daemon's side (netconnectd's default
//! `--workers` otherwise); `ROUNDS=R` the rounds of steps 2 to 5.
//!
//! `BENCH_DAEMON_LOG=FILE`: netconnectd logs at debug level to FILE (each manifest
//! reload's phases among them) instead of nowhere.
//!
//! `BENCH_STEP_MARK=FILE`: the library writes each later step's name and its process id
//! to FILE and waits two seconds before the step, for a profiler to attach, and again
//! (the name followed by `: done`) after it, for the profiler to stop before the next
//! step's inputs are built.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use netconnect::api::load::parse_file;
use netconnect::reconcile::Reconciler;
use netconnect::status::dir::State;
use netconnect::world::{Settings, World};
use ovn_sandbox::{Installation, OvsdbServer, ServerOptions};

/// What the workspace's benches share (running a phase as a child process).
#[path = "../../tests/benches/common/mod.rs"]
mod bench_common;
#[path = "../tests/common/mod.rs"]
mod common;
use common::get;

/// The objects of one step.
#[derive(Clone, Copy, Debug)]
struct Inputs {
    networks: usize,
    /// The first `appended` networks have a second cluster subnet.
    appended: usize,
    nodes: usize,
}

impl Inputs {
    fn networks_yaml(&self) -> String {
        let mut s = String::new();
        for i in 0..self.networks {
            let more = if i < self.appended {
                ", {cidr: 10.200.0.0/16, hostSubnet: 23}"
            } else {
                ""
            };
            s.push_str(&format!(
                "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {{name: net{i:04}}}\n\
                 spec:\n  namespaceSelector: {{}}\n  network:\n    topology: Layer3\n    layer3: {{role: Primary, subnets: [{{cidr: 10.132.0.0/14, hostSubnet: 23}}{more}]}}\n"
            ));
        }
        s
    }

    fn nodes_yaml(&self) -> String {
        let mut s = String::new();
        for n in 0..self.nodes {
            s.push_str(&format!(
                "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: node-{n:04}\n  annotations: {{k8s.ovn.org/node-chassis-id: chassis-{n:04}}}\n"
            ));
        }
        s
    }

    /// The world of these objects read beside `state` (what netconnectd saved after
    /// the world before), built after `previous`.
    fn world(&self, state: &State, previous: Option<&World>) -> World {
        let settings = Settings {
            zone: Some(ZONE.into()),
            ..Default::default()
        };
        let w = World::build_after(
            &[
                parse_file(Path::new("networks.yaml"), &self.networks_yaml()),
                parse_file(Path::new("nodes.yaml"), &self.nodes_yaml()),
            ],
            state,
            settings,
            previous,
        );
        assert!(w.problems.is_empty(), "{:?}", w.problems);
        w
    }
}

/// One step: what it changes, in which round (none for the start), and its inputs.
#[derive(Clone, Copy, Debug)]
struct Step {
    kind: &'static str,
    round: Option<usize>,
    inputs: Inputs,
}

impl Step {
    /// Its round, `round R`, when there are several.
    fn which(&self, rounds: usize) -> Option<String> {
        self.round
            .filter(|_| rounds > 1)
            .map(|r| format!("round {r}"))
    }

    /// Its kind, with its round when there are several.
    fn name(&self, rounds: usize) -> String {
        match self.which(rounds) {
            Some(w) => format!("{}, {w}", self.kind),
            None => self.kind.to_owned(),
        }
    }
}

/// The kinds of step a round makes, in its order.
const ROUND: [&str; 4] = [
    "a node added",
    "a network added",
    "a subnet appended",
    "a node removed",
];

/// The steps, each with its inputs: from empty, then `rounds` rounds of one change
/// each (round r adds network N+r-1 and appends a subnet to network r-1; its node
/// added and removed are node M each time).
fn steps(networks: usize, nodes: usize, rounds: usize) -> Vec<Step> {
    let first = Inputs {
        networks,
        appended: 0,
        nodes,
    };
    let mut out = vec![Step {
        kind: "start to ready",
        round: None,
        inputs: first,
    }];
    // What each step of a round changes, in `ROUND`'s order.
    let changes: [fn(&mut Inputs); 4] = [
        |i| i.nodes += 1,
        |i| i.networks += 1,
        |i| i.appended += 1,
        |i| i.nodes -= 1,
    ];
    let mut now = first;
    for r in 1..=rounds {
        for (kind, change) in ROUND.into_iter().zip(changes) {
            change(&mut now);
            out.push(Step {
                kind,
                round: Some(r),
                inputs: now,
            });
        }
    }
    out
}

/// The rounds of steps 2 to 5: `ROUNDS`, else 3.
fn rounds() -> usize {
    std::env::var("ROUNDS").map_or(3, |v| match v.parse() {
        Ok(n) if n > 0 => n,
        _ => panic!("ROUNDS: a number above 0"),
    })
}

const ZONE: &str = "node-0000";

/// The keys in flight: `WORKERS`, else netconnectd's default `--workers`.
fn workers() -> usize {
    std::env::var("WORKERS").map_or(netconnect::daemon::args::DEFAULT_WORKERS.into(), |v| {
        v.parse().expect("WORKERS: a number")
    })
}

/// Reconciles the keys of `w` netconnectd would look at: every one at the start, the
/// changed ones after `previous` ([`netconnect::controller::changed_keys`]); in
/// `controller::once`'s order, as many in flight as the daemon's workers; gives each
/// key's plan to `done` as it completes (netconnectd keeps none).
async fn changed_keys(
    r: &Reconciler,
    previous: Option<&World>,
    w: &World,
    done: impl Fn(netconnect::reconcile::Plan) + Sync,
) {
    let done = &done;
    use futures_util::stream::{self, StreamExt};
    use netconnect::keys::Key;
    let keys = match previous {
        Some(p) => netconnect::controller::changed_keys(p, w, r),
        None => netconnect::controller::all_keys(w, r),
    };
    for p in 0..netconnect::keys::PHASES {
        let these: Vec<Key> = keys.iter().filter(|k| k.phase() == p).cloned().collect();
        stream::iter(these)
            .map(|k| async move {
                let plan = netconnect::controller::reconcile_key(r, w, &k)
                    .await
                    .unwrap_or_else(|e| panic!("{k}: {e}"));
                done(plan);
            })
            .buffer_unordered(workers())
            .collect::<Vec<()>>()
            .await;
    }
}

/// `library REMOTE N M RECORD SERVER`: each step's inputs reconciled in turn; prints a
/// line `step SECS ROWS TRANSACTIONS SERVER_CPU` per step (the CPU time of the process
/// SERVER, the server at REMOTE, during the step) and `peak MIB`, and writes each
/// step's transactions to RECORD (a line `{"step": …}` before each step's).
fn library(remote: &str, networks: usize, nodes: usize, record: &str, server: u32) {
    let rt = bench_common::runtime();
    let out = std::sync::Mutex::new(bench_common::Recorder::create(record));
    rt.block_on(async {
        let start = Instant::now();
        let r = bench_common::reconciler(remote, Duration::from_secs(600)).await;
        let mut previous: Option<World> = None;
        // What netconnectd would have saved after the world before: each world is
        // read beside it, as netconnectd reads its status directory (a node added is
        // then read back with what it was given).
        let mut state = State::default();
        let rounds = rounds();
        for (i, step) in steps(networks, nodes, rounds).into_iter().enumerate() {
            let (name, inputs) = (step.name(rounds), step.inputs);
            let w = inputs.world(&state, previous.as_ref());
            let (w0, t0) = (r.rows_written(), r.transactions());
            if i > 0 {
                bench_common::mark_step(&name);
            }
            let cpu = bench_common::cpu_of_tree(server);
            // The first step counts from the start: connecting is part of it.
            let t = if i == 0 { start } else { Instant::now() };
            out.lock().unwrap().step(&name);
            // Each transaction sent is written to the record: as it completes at the
            // start (holding 758k rows' plans would weigh on the peak measured), after
            // the step's time later (the plans of a step are small).
            let held = std::sync::Mutex::new(Vec::new());
            match i {
                0 => changed_keys(&r, None, &w, |p| out.lock().unwrap().add(&p)).await,
                _ => {
                    let keep = |p| held.lock().unwrap().push(p);
                    changed_keys(&r, previous.as_ref(), &w, keep).await
                }
            }
            let took = t.elapsed();
            if i > 0 {
                bench_common::mark_step(&format!("{name}: done"));
            }
            for p in held.into_inner().unwrap() {
                out.lock().unwrap().add(&p);
            }
            println!(
                "step {:.6} {} {} {:.2}",
                took.as_secs_f64(),
                r.rows_written() - w0,
                r.transactions() - t0,
                server_cpu_since(server, cpu).as_secs_f64()
            );
            state = w.state(&state);
            // netconnectd serves the start's world read again beside the state it
            // saved, as every later reload reads it.
            previous = Some(match i {
                0 => inputs.world(&state, Some(&w)),
                _ => w,
            });
        }
        println!("peak {:.0}", bench_common::peak_mib());
    });
    out.into_inner().unwrap().flush();
}

/// `floor PATH RECORD SERVER [monitored]`: the recorded transactions sent in order
/// over a raw socket, one at a time; prints `step SECS TRANSACTIONS SERVER_CPU` per
/// step (as `library`). Only sending a request and reading its reply is timed;
/// translating uuids is not. `monitored`: the connection monitors the tables as the
/// cache does, its updates dropped ([`bench_common::Replay::connect_monitored`]: the
/// server's own work for a monitor-driven client, the cache's not).
fn floor(path: &str, record: &str, server: u32, monitored: bool) {
    use std::io::BufRead;
    let mut replay = bench_common::Replay::connect_maybe_monitored(path, monitored);
    let mut step: Option<(Duration, usize)> = None;
    let mut cpu = bench_common::cpu_of_tree(server);
    let mut report = |step: Option<(Duration, usize)>| {
        if let Some((d, n)) = step {
            let used = server_cpu_since(server, cpu);
            println!("step {:.6} {n} {:.2}", d.as_secs_f64(), used.as_secs_f64());
        }
        cpu = bench_common::cpu_of_tree(server);
    };
    let file = std::io::BufReader::new(std::fs::File::open(record).unwrap());
    for line in file.lines() {
        let line = line.unwrap();
        if line.starts_with("{\"step\"") {
            report(step.replace((Duration::ZERO, 0)));
            continue;
        }
        let took = replay.send(bench_common::Sent::from_line(&line));
        let s = step.get_or_insert((Duration::ZERO, 0));
        s.0 += took;
        s.1 += 1;
    }
    report(step);
}

/// `cache REMOTE`: a reconciler's cache synced from REMOTE, nothing reconciled;
/// prints `peak MIB ROWS RESIDENT_MIB`.
fn cache_alone(remote: &str) {
    let rt = bench_common::runtime();
    rt.block_on(async {
        let r = bench_common::reconciler(remote, Duration::from_secs(30)).await;
        println!(
            "peak {:.0} {} {:.0}",
            bench_common::peak_mib(),
            r.cache().snapshot().len(),
            bench_common::mib("self", "VmRSS")
        );
    });
}

/// Sends netconnectd's log to the file `BENCH_DAEMON_LOG` names, at debug level, or
/// nowhere.
fn daemon_log(cmd: &mut Command) -> &mut Command {
    match std::env::var_os("BENCH_DAEMON_LOG").filter(|p| !p.is_empty()) {
        Some(path) => cmd.env("RUST_LOG", "netconnect=debug,info").stderr(
            std::fs::File::create(&path).unwrap_or_else(|e| {
                panic!("BENCH_DAEMON_LOG: cannot create {}: {e}", path.display())
            }),
        ),
        None => cmd.stderr(Stdio::null()),
    }
}

/// The CPU time process `server` (and what runs under it) used since it was `before`,
/// once it has had 300 ms to finish what a step left it (a monitor's updates composed
/// after the last reply).
fn server_cpu_since(server: u32, before: Duration) -> Duration {
    std::thread::sleep(Duration::from_millis(300));
    bench_common::cpu_of_tree(server).saturating_sub(before)
}

fn metric(addr: &str, name: &str) -> Option<f64> {
    let (_, body) = get(addr, "/metrics")?;
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Runs this bench as a child doing `args`; its output's lines, split in words.
fn child(args: &[&str]) -> Vec<Vec<String>> {
    bench_common::child_output(args)
        .lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// Waits until netconnectd's rows written reach `target`; then until they stay put
/// for a second (the step's last reconciles done). The time to reach the target.
fn written_by_daemon(addr: &str, target: f64, t: Instant) -> Duration {
    let written = || metric(addr, "netconnect_rows_written_total").unwrap_or(0.0);
    let took = loop {
        if written() >= target {
            break t.elapsed();
        }
        assert!(
            t.elapsed() < Duration::from_secs(1800),
            "netconnectd wrote {} rows of {target}",
            written()
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut last = written();
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let now = written();
        if now == last {
            return took;
        }
        last = now;
    }
}

/// One step's figures: its rows and transactions (the library's), then the seconds
/// and the server's CPU seconds of the floor, the floor with a monitor, the library
/// and the daemon.
#[derive(Clone, Copy, Debug)]
struct Figures {
    rows: f64,
    transactions: f64,
    floor: (f64, f64),
    monitored: (f64, f64),
    library: (f64, f64),
    daemon: (f64, f64),
}

impl Figures {
    /// Each figure's median over `all`.
    fn median(all: &[&Figures]) -> Figures {
        let m = |f: fn(&Figures) -> f64| {
            bench_common::median(&all.iter().map(|x| f(x)).collect::<Vec<f64>>())
        };
        Figures {
            rows: m(|x| x.rows),
            transactions: m(|x| x.transactions),
            floor: (m(|x| x.floor.0), m(|x| x.floor.1)),
            monitored: (m(|x| x.monitored.0), m(|x| x.monitored.1)),
            library: (m(|x| x.library.0), m(|x| x.library.1)),
            daemon: (m(|x| x.daemon.0), m(|x| x.daemon.1)),
        }
    }

    /// The step's line: `kind (ROWS rows, T transactions[; which]): …`, with the
    /// daemon's time as a share of start to ready when given.
    fn line(&self, kind: &str, which: Option<&str>, share: Option<f64>) -> String {
        let ((f, f_cpu), (m, m_cpu)) = (self.floor, self.monitored);
        let ((lib, lib_cpu), (d, d_cpu)) = (self.library, self.daemon);
        let share = share.map_or(String::new(), |s| {
            format!(", {:.2}% of start to ready", 100.0 * s)
        });
        let which = which.map_or(String::new(), |w| format!("; {w}"));
        format!(
            "{kind} ({} rows, {} transactions{which}): floor {f:.3} s (with a monitor {m:.3} s), library {lib:.3} s ({:.2}x; {:.2}x with a monitor), daemon {d:.3} s ({:.2}x; {:.2}x with a monitor{share}); the server's CPU: {f_cpu:.2} s for the floor, {m_cpu:.2} s with a monitor, {lib_cpu:.2} s for the library, {d_cpu:.2} s for the daemon",
            self.rows,
            self.transactions,
            lib / f,
            lib / m,
            d / f,
            d / m,
        )
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        return run_child(&args[i + 1..]);
    }
    let counts: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let networks = counts.first().copied().unwrap_or(500);
    let nodes = counts.get(1).copied().unwrap_or(500);
    println!("{networks} Layer3 networks × {nodes} nodes, the zone of {ZONE}");
    let install = Installation::recent().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("sent.jsonl");
    let record = record.to_str().unwrap();
    let rounds = rounds();
    let steps = steps(networks, nodes, rounds);
    let lib = run_library(&install, record, networks, nodes, steps.len());
    let floor = run_floor(&install, record, "");
    let monitored = run_floor(&install, record, "monitored");
    let daemon = run_daemon(&install, dir.path(), &steps, &lib.steps);
    report(&steps, rounds, &lib, (&floor, &monitored), &daemon);
}

/// A child process of the bench: the library's run, a floor's, or a cache alone.
fn run_child(a: &[String]) {
    match a[0].as_str() {
        "library" => library(
            &a[1],
            a[2].parse().unwrap(),
            a[3].parse().unwrap(),
            &a[4],
            a[5].parse().unwrap(),
        ),
        "floor" => floor(
            &a[1],
            &a[2],
            a[3].parse().unwrap(),
            a.get(4).is_some_and(|m| m == "monitored"),
        ),
        "cache" => cache_alone(&a[1]),
        other => panic!("unknown child {other}"),
    }
}

/// The library's run of every step, and a cache alone of what it left.
struct LibraryRun {
    /// Each step's seconds, rows, transactions and the server's CPU seconds.
    steps: Vec<(f64, f64, f64, f64)>,
    /// Its peak memory, MiB.
    peak: f64,
    /// The cache alone: its peak, its rows, its resident memory once synced.
    cache: (f64, f64, f64),
}

/// The process id of `s`, as text.
fn pid_of(s: &OvsdbServer) -> String {
    s.pid().expect("the server's process").to_string()
}

/// The library's steps on a server of their own (recording its transactions to
/// `record`), then a cache alone syncing what they left.
fn run_library(
    install: &Installation,
    record: &str,
    networks: usize,
    nodes: usize,
    steps: usize,
) -> LibraryRun {
    let a = OvsdbServer::start(install, &ServerOptions::default()).unwrap();
    let out = child(&[
        "library",
        &a.unix_remote(),
        &networks.to_string(),
        &nodes.to_string(),
        record,
        &pid_of(&a),
    ]);
    let lib = out[..steps]
        .iter()
        .map(|l| {
            (
                l[1].parse().unwrap(),
                l[2].parse().unwrap(),
                l[3].parse().unwrap(),
                l[4].parse().unwrap(),
            )
        })
        .collect();
    let peak: f64 = out[steps][1].parse().unwrap();
    let cache = child(&["cache", &a.unix_remote()]);
    LibraryRun {
        steps: lib,
        peak,
        cache: (
            cache[0][1].parse().unwrap(),
            cache[0][2].parse().unwrap(),
            cache[0][3].parse().unwrap(),
        ),
    }
}

/// A step of a floor's run: its seconds and the server's CPU seconds.
type FloorStep = (f64, f64);

/// The floor's run of the recorded transactions on a server of its own (`monitored`:
/// with a monitor on its connection): each step's seconds and the server's CPU seconds.
fn run_floor(install: &Installation, record: &str, monitored: &str) -> Vec<FloorStep> {
    let f = OvsdbServer::start(install, &ServerOptions::default()).unwrap();
    let path = f.unix_remote().trim_start_matches("unix:").to_owned();
    child(&["floor", &path, record, &pid_of(&f), monitored])
        .iter()
        .map(|l| (l[1].parse().unwrap(), l[3].parse().unwrap()))
        .collect()
}

/// netconnectd's run of every step.
struct DaemonRun {
    /// Each step's time, and the server's CPU time in it.
    steps: Vec<(Duration, Duration)>,
    /// Its peak memory at ready and at the end, and its resident memory at the end, MiB.
    peak_ready: f64,
    peak: f64,
    resident: f64,
}

/// netconnectd from empty to ready over the first step's manifests in `dir`, then
/// each later step's file saved as editors save it, the step lasting until it wrote
/// what the library wrote for it (`lib`).
fn run_daemon(
    install: &Installation,
    dir: &std::path::Path,
    steps: &[Step],
    lib: &[(f64, f64, f64, f64)],
) -> DaemonRun {
    let b = OvsdbServer::start(install, &ServerOptions::default()).unwrap();
    let m = dir.join("manifests");
    let s = dir.join("status");
    std::fs::create_dir_all(&m).unwrap();
    std::fs::write(m.join("networks.yaml"), steps[0].inputs.networks_yaml()).unwrap();
    std::fs::write(m.join("nodes.yaml"), steps[0].inputs.nodes_yaml()).unwrap();
    let addr = format!("127.0.0.1:{}", ovn_sandbox::free_port().unwrap());
    let server: u32 = pid_of(&b).parse().unwrap();
    let mut cpu = bench_common::cpu_of_tree(server);
    let start = Instant::now();
    let mut netconnectd = Command::new(env!("CARGO_BIN_EXE_netconnectd"));
    let mut child = daemon_log(&mut netconnectd)
        .args(["--nb", &b.unix_remote(), "--zone", ZONE, "--listen", &addr])
        .args(["--workers", &workers().to_string()])
        .arg("--manifests")
        .arg(&m)
        .arg("--status-dir")
        .arg(&s)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let ready = loop {
        if get(&addr, "/readyz").is_some_and(|(c, _)| c == 200) {
            break start.elapsed();
        }
        assert!(child.try_wait().unwrap().is_none(), "netconnectd exited");
        std::thread::sleep(Duration::from_millis(20));
    };
    let peak_ready = bench_common::mib(&pid, "VmHWM");
    let mut times = vec![(ready, server_cpu_since(server, cpu))];
    let mut total = metric(&addr, "netconnect_rows_written_total").unwrap();
    let mut previous = steps[0].inputs;
    for (i, inputs) in steps.iter().map(|s| &s.inputs).enumerate().skip(1) {
        // The changed file, saved as editors do.
        let (file, text) = if inputs.nodes != previous.nodes {
            ("nodes.yaml", inputs.nodes_yaml())
        } else {
            ("networks.yaml", inputs.networks_yaml())
        };
        std::fs::write(m.join(".tmp"), text).unwrap();
        cpu = bench_common::cpu_of_tree(server);
        let t = Instant::now();
        std::fs::rename(m.join(".tmp"), m.join(file)).unwrap();
        let took = written_by_daemon(&addr, total + lib[i].1, t);
        times.push((took, server_cpu_since(server, cpu)));
        total = metric(&addr, "netconnect_rows_written_total").unwrap();
        previous = *inputs;
    }
    let peak = bench_common::mib(&pid, "VmHWM");
    let resident = bench_common::mib(&pid, "VmRSS");
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let _ = child.wait();
    DaemonRun {
        steps: times,
        peak_ready,
        peak,
        resident,
    }
}

/// Each step's line, then each kind's medians over the rounds, then memory.
fn report(
    steps: &[Step],
    rounds: usize,
    lib: &LibraryRun,
    (floor, monitored): (&[FloorStep], &[FloorStep]),
    daemon: &DaemonRun,
) {
    let figures: Vec<Figures> = (0..steps.len())
        .map(|i| Figures {
            rows: lib.steps[i].1,
            transactions: lib.steps[i].2,
            floor: floor[i],
            monitored: monitored[i],
            library: (lib.steps[i].0, lib.steps[i].3),
            daemon: (
                daemon.steps[i].0.as_secs_f64(),
                daemon.steps[i].1.as_secs_f64(),
            ),
        })
        .collect();
    let from_empty = figures[0].daemon.0;
    for (step, f) in steps.iter().zip(&figures) {
        let share = step.round.map(|_| f.daemon.0 / from_empty);
        println!(
            "{}",
            f.line(step.kind, step.which(rounds).as_deref(), share)
        );
    }
    if rounds > 1 {
        for kind in ROUND {
            let of_kind: Vec<&Figures> = steps
                .iter()
                .zip(&figures)
                .filter(|(s, _)| s.kind == kind)
                .map(|(_, f)| f)
                .collect();
            let m = Figures::median(&of_kind);
            let which = format!("the median of {rounds} rounds");
            println!(
                "{}",
                m.line(kind, Some(&which), Some(m.daemon.0 / from_empty))
            );
        }
    }
    let (cache_peak, cache_rows, cache_now) = lib.cache;
    let (lib_peak, peak_ready, peak, resident) =
        (lib.peak, daemon.peak_ready, daemon.peak, daemon.resident);
    println!(
        "peak memory: a cache alone of the {cache_rows} rows {cache_peak:.0} MiB (resident once synced {cache_now:.0} MiB); library {lib_peak:.0} MiB ({:.2}x the cache's peak); daemon {peak_ready:.0} MiB at ready, {peak:.0} MiB at the end ({:.2}x), resident at the end {resident:.0} MiB ({:.2}x the cache's)",
        lib_peak / cache_peak,
        peak / cache_peak,
        resident / cache_now
    );
}
