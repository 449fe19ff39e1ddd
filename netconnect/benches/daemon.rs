//! netconnectd end to end beside the library it is made of, on the netconnect bench's
//! case: N primary Layer3 networks × M nodes in the zone of one node (default 500 ×
//! 500, about 761k rows).
//!
//! - `library` (a child process, so that its peak memory is its own): a cache and a
//!   reconciler program an empty ovsdb-server with every key, as many in flight as the
//!   daemon's workers (`--workers`, default 8) and no plan kept, then a node is added to the inputs and
//!   every key reconciled again;
//! - `daemon`: netconnectd started on another empty server over a manifest directory
//!   holding the same objects (`--zone`, `--status-dir`, `--listen`): the time from
//!   its start to `/readyz` answering 200, its peak memory, and the time from the
//!   nodes' file being replaced (one node more) to the last row of that change being
//!   written (`netconnect_rows_written_total` reaching what the library wrote).
//!
//! The daemon's own overhead is the difference: reading and watching files, the status
//! directory, the HTTP endpoints and metrics, and re-reading keys its own writes touch.
//!
//! `cargo bench -p netconnect --bench daemon [-- NETWORKS NODES]`; `WORKERS=N` sets the
//! keys in flight on both sides (netconnectd's default `--workers` otherwise).

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
use ovsdb_proto::cache::CacheConfig;

#[path = "../tests/common/mod.rs"]
mod common;
use common::get;

fn networks_yaml(networks: usize) -> String {
    let mut s = String::new();
    for i in 0..networks {
        s.push_str(&format!(
            "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {{name: net{i:04}}}\n\
             spec:\n  namespaceSelector: {{}}\n  network:\n    topology: Layer3\n    layer3: {{role: Primary, subnets: [{{cidr: 10.132.0.0/14, hostSubnet: 23}}]}}\n"
        ));
    }
    s
}

fn nodes_yaml(nodes: usize) -> String {
    let mut s = String::new();
    for n in 0..nodes {
        s.push_str(&format!(
            "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: node-{n:04}\n  annotations: {{k8s.ovn.org/node-chassis-id: chassis-{n:04}}}\n"
        ));
    }
    s
}

const ZONE: &str = "node-0000";

fn world(networks: usize, nodes: usize) -> World {
    let settings = Settings {
        zone: Some(ZONE.into()),
        ..Default::default()
    };
    let w = World::build(
        &[
            parse_file(Path::new("networks.yaml"), &networks_yaml(networks)),
            parse_file(Path::new("nodes.yaml"), &nodes_yaml(nodes)),
        ],
        &State::default(),
        settings,
    );
    assert!(w.problems.is_empty(), "{:?}", w.problems);
    w
}

fn peak_mib(pid: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// The keys in flight: `WORKERS`, else netconnectd's default `--workers`.
fn workers() -> usize {
    std::env::var("WORKERS").map_or(netconnect::daemon::args::DEFAULT_WORKERS.into(), |v| {
        v.parse().expect("WORKERS: a number")
    })
}

/// Reconciles every key of `w` in `controller::once`'s order, as many in flight as the
/// daemon's workers, keeping no plan (as they do).
async fn every_key(r: &Reconciler, w: &World) {
    use futures_util::stream::{self, StreamExt};
    use netconnect::world::Key;
    let mut keys = w.keys();
    keys.extend(w.gone_in(&r.cache().snapshot(), r.indexes()));
    for p in 0..netconnect::controller::key::PHASES {
        let these: Vec<Key> = keys.iter().filter(|k| k.phase() == p).cloned().collect();
        stream::iter(these)
            .map(|k| async move {
                netconnect::controller::reconcile_key(r, w, &k)
                    .await
                    .unwrap_or_else(|e| panic!("{k}: {e}"));
            })
            .buffer_unordered(workers())
            .collect::<Vec<()>>()
            .await;
    }
}

/// `library REMOTE N M`: prints `library start <secs> node <secs> <rows> peak <MiB>`.
fn library(remote: &str, networks: usize, nodes: usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let start = Instant::now();
        let cc = CacheConfig::new(vec![remote.parse().unwrap()], "OVN_Northbound", &[]);
        let (mut r, _) = Reconciler::connect(cc, Duration::from_secs(600))
            .await
            .unwrap();
        r.wait = Duration::from_secs(600);
        let w = world(networks, nodes);
        every_key(&r, &w).await;
        let started = start.elapsed();
        let w0 = r.rows_written();
        let t = Instant::now();
        let w2 = world(networks, nodes + 1);
        every_key(&r, &w2).await;
        let node = t.elapsed();
        println!(
            "library start {:.3} node {:.3} {} peak {:.0}",
            started.as_secs_f64(),
            node.as_secs_f64(),
            r.rows_written() - w0,
            peak_mib("self")
        );
    });
}

fn metric(addr: &str, name: &str) -> Option<f64> {
    let (_, body) = get(addr, "/metrics")?;
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let a = &args[i + 1..];
        return library(&a[0], a[1].parse().unwrap(), a[2].parse().unwrap());
    }
    let counts: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let networks = counts.first().copied().unwrap_or(500);
    let nodes = counts.get(1).copied().unwrap_or(500);
    println!("{networks} Layer3 networks × {nodes} nodes, the zone of {ZONE}");
    let install = Installation::recent().unwrap_or_else(|e| panic!("{e}"));

    // The library.
    let a = OvsdbServer::start(&install, &ServerOptions::default()).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--child", &a.unix_remote()])
        .args([networks.to_string(), nodes.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).unwrap();
    let f: Vec<&str> = line.split_whitespace().collect();
    let (lib_start, lib_node, node_rows, lib_peak): (f64, f64, f64, f64) = (
        f[2].parse().unwrap(),
        f[4].parse().unwrap(),
        f[5].parse().unwrap(),
        f[7].parse().unwrap(),
    );
    drop(a);

    // The daemon.
    let b = OvsdbServer::start(&install, &ServerOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("manifests");
    let s = dir.path().join("status");
    std::fs::create_dir_all(&m).unwrap();
    std::fs::write(m.join("networks.yaml"), networks_yaml(networks)).unwrap();
    std::fs::write(m.join("nodes.yaml"), nodes_yaml(nodes)).unwrap();
    let addr = format!("127.0.0.1:{}", ovn_sandbox::free_port().unwrap());
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_netconnectd"))
        .args(["--nb", &b.unix_remote(), "--zone", ZONE, "--listen", &addr])
        .args(["--workers", &workers().to_string()])
        .arg("--manifests")
        .arg(&m)
        .arg("--status-dir")
        .arg(&s)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
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
    let peak_ready = peak_mib(&pid);
    let before = metric(&addr, "netconnect_rows_written_total").unwrap();
    let reconciles = |result: &str| {
        metric(
            &addr,
            &format!("netconnect_reconciles_total{{kind=\"network\",result=\"{result}\"}}"),
        )
        .unwrap_or(0.0)
    };
    let (written0, unchanged0) = (reconciles("written"), reconciles("unchanged"));
    // One node more, saved as editors do.
    std::fs::write(m.join(".nodes.yaml.tmp"), nodes_yaml(nodes + 1)).unwrap();
    let t = Instant::now();
    std::fs::rename(m.join(".nodes.yaml.tmp"), m.join("nodes.yaml")).unwrap();
    let node = loop {
        let now = metric(&addr, "netconnect_rows_written_total").unwrap_or(before);
        if now - before >= node_rows {
            break t.elapsed();
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    std::thread::sleep(Duration::from_secs(2));
    let written = metric(&addr, "netconnect_rows_written_total").unwrap() - before;
    let (written1, unchanged1) = (reconciles("written"), reconciles("unchanged"));
    let peak = peak_mib(&pid);
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let _ = child.wait();

    let ratio = |d: f64, l: f64| d / l;
    println!(
        "network keys reconciled for the node: {} writing, {} finding nothing to write",
        written1 - written0,
        unchanged1 - unchanged0
    );
    println!(
        "start to ready: library {lib_start:.2} s, daemon {:.2} s ({:.3}x)",
        ready.as_secs_f64(),
        ratio(ready.as_secs_f64(), lib_start)
    );
    println!(
        "a node added ({node_rows} rows): library {lib_node:.3} s, daemon {:.3} s from the file's rename ({:.3}x); the daemon wrote {written} rows for it",
        node.as_secs_f64(),
        ratio(node.as_secs_f64(), lib_node)
    );
    println!(
        "peak memory: library {lib_peak:.0} MiB, daemon {peak_ready:.0} MiB at ready, {peak:.0} MiB at the end ({:.3}x)",
        ratio(peak, lib_peak)
    );
}
