//! netconnect at scale: N primary Layer3 networks × M nodes, the zone of one node (as
//! OVN-Kubernetes' interconnect runs: one node per zone, the others remote).
//!
//! Each phase runs in its own process so that its peak memory (VmHWM) is its own:
//!
//! - `desired`: validating and allocating the inputs, and computing every key's rows;
//! - `ours`: programming an empty ovsdb-server through the cache and the reconciler (one
//!   transaction per network), then a second pass that must write nothing (rows compared
//!   per second), then one node added (the rows written, one transaction per network);
//!   last, the same from empty on a fresh server with four keys in flight, as
//!   `netconnectd --once` runs it;
//! - `floor`: the first reconciler's transactions sent again over a raw socket to an
//!   empty server, one at a time, reading only the replies (uuids put in place, each
//!   update and mutate checked to match what it matched for the reconciler); then the
//!   node-added ones.
//!
//! `cargo bench -p integration-tests --bench netconnect [-- NETWORKS NODES]` (default
//! 500 × 500).

// The allocator netconnectd uses.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::Path;
use std::time::{Duration, Instant};

use netconnect::api::load::parse_file;
use netconnect::status::dir::State;
use netconnect::world::{Settings, World};
use ovn_sandbox::{Installation, OvsdbServer, ServerOptions};

mod common;
use common::{peak_mib, run_child, Recorder, Replay};

fn manifests(networks: usize, nodes: usize) -> String {
    let mut s = String::new();
    for i in 0..networks {
        s.push_str(&format!(
            "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {{name: net{i:04}}}\n\
             spec:\n  namespaceSelector: {{}}\n  network:\n    topology: Layer3\n    layer3: {{role: Primary, subnets: [{{cidr: 10.132.0.0/14, hostSubnet: 23}}]}}\n"
        ));
    }
    for n in 0..nodes {
        s.push_str(&format!(
            "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: node-{n:04}\n  annotations: {{k8s.ovn.org/node-chassis-id: chassis-{n:04}}}\n"
        ));
    }
    s
}

fn world(networks: usize, nodes: usize) -> World {
    let settings = Settings {
        zone: Some("node-0000".into()),
        ..Default::default()
    };
    let w = World::build(
        &[parse_file(
            Path::new("bench.yaml"),
            &manifests(networks, nodes),
        )],
        &State::default(),
        settings,
    );
    assert!(w.problems.is_empty(), "{:?}", w.problems);
    w
}

/// `desired N M`: time to build the world and every key's rows.
fn desired(networks: usize, nodes: usize) {
    let start = Instant::now();
    let w = world(networks, nodes);
    let built = start.elapsed();
    let mut rows = 0usize;
    let t = Instant::now();
    for k in w.keys() {
        rows += w.desired(&k).unwrap().len();
    }
    let computed = t.elapsed();
    println!(
        "desired: inputs validated and allocated in {built:.2?}; {rows} rows for {} keys in {computed:.2?} ({:.0} rows/s); peak {:.0} MiB",
        w.keys().len(),
        rows as f64 / computed.as_secs_f64(),
        peak_mib()
    );
}

/// `ours REMOTE N M OPS NODE_OPS`: program through the reconciler; record each
/// transaction for the floor.
fn ours(remote: &str, networks: usize, nodes: usize, ops_file: &str, node_ops_file: &str) {
    let rt = common::runtime();
    rt.block_on(async {
        let r = common::reconciler(remote, Duration::from_secs(600)).await;
        let cache = r.cache().clone();
        let w = world(networks, nodes);
        let mut rec = Recorder::create(ops_file);
        let mut programmed = Duration::ZERO;
        let mut rows = 0;
        for k in w.keys() {
            let t = Instant::now();
            let d = w.desired(&k).unwrap();
            let plan = r.apply(&d).await.unwrap();
            programmed += t.elapsed();
            rows += plan.inserted.len();
            rec.add(&plan);
        }
        drop(rec);
        println!(
            "ours, one key at a time: {rows} rows in {} transactions in {programmed:.2?} ({:.0} rows/s), cache at {} rows; peak {:.0} MiB",
            r.transactions(),
            rows as f64 / programmed.as_secs_f64(),
            cache.snapshot().len(),
            peak_mib()
        );
        // A second pass over unchanged inputs: every row compared, nothing written.
        let t = Instant::now();
        let mut compared = 0;
        for k in w.keys() {
            let plan = r.plan(&w.desired(&k).unwrap()).unwrap();
            assert!(plan.is_empty(), "{k}: {plan}");
            compared += plan.compared;
        }
        let d = t.elapsed();
        println!(
            "ours: second pass compared {compared} rows in {d:.2?} ({:.0} rows/s), wrote nothing",
            compared as f64 / d.as_secs_f64()
        );

        // One node more, each key reconciled as netconnectd reconciles it: re-planning
        // only the fragments whose inputs changed.
        let w2 = world(networks, nodes + 1);
        let mut rec = Recorder::create(node_ops_file);
        let t0 = r.transactions();
        let w0 = r.rows_written();
        let mut d = Duration::ZERO;
        for k in w2.keys() {
            let t = Instant::now();
            let plan = netconnect::controller::reconcile_key(&r, &w2, &k)
                .await
                .unwrap();
            d += t.elapsed();
            rec.add(&plan);
        }
        drop(rec);
        println!(
            "ours: a node added: {} rows written in {} transactions in {d:.2?}",
            r.rows_written() - w0,
            r.transactions() - t0
        );

        // The same from empty again, as netconnectd --once runs it: four keys in
        // flight (the cache and reconciler are fresh, on a fresh database).
        // Run last, with the first reconciler gone: the floor replays what that one
        // wrote, and two caches of the whole database at once would blur the peak.
        drop((r, cache));
        let remote2 = std::env::var("NETCONNECT_BENCH_SECOND").unwrap();
        let r = common::reconciler(&remote2, Duration::from_secs(600)).await;
        let start = Instant::now();
        let out = netconnect::controller::once(&r, &w, 1, Default::default(), 4).await;
        let programmed = start.elapsed();
        let rows: usize = out.iter().map(|o| o.result.as_ref().unwrap().inserted.len()).sum();
        println!(
            "ours, four keys in flight: {rows} rows in {} transactions in {programmed:.2?} ({:.0} rows/s), cache at {} rows",
            r.transactions(),
            rows as f64 / programmed.as_secs_f64(),
            r.cache().snapshot().len(),
        );
    });
}

/// `floor PATH OPS NODE_OPS [monitored]`.
fn floor(path: &str, ops_file: &str, node_ops_file: &str, monitored: bool) {
    let mut s = Replay::connect_maybe_monitored(path, monitored);
    let (d, n) = s.send_all(ops_file);
    let label = if monitored {
        "floor with a monitor reading the updates"
    } else {
        "floor"
    };
    println!(
        "{label}: {n} transactions in {d:.2?}; peak {:.0} MiB",
        peak_mib()
    );
    let (d, n) = s.send_all(node_ops_file);
    println!("{label}: a node added: {n} transactions in {d:.2?}");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let a = &args[i + 1..];
        let n = |k: usize| a[k].parse::<usize>().unwrap();
        return match a[0].as_str() {
            "desired" => desired(n(1), n(2)),
            "ours" => ours(&a[1], n(2), n(3), &a[4], &a[5]),
            "floor" => floor(
                &a[1],
                &a[2],
                &a[3],
                a.get(4).is_some_and(|m| m == "monitored"),
            ),
            other => panic!("unknown child {other}"),
        };
    }
    let counts: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let networks = counts.first().copied().unwrap_or(500);
    let nodes = counts.get(1).copied().unwrap_or(500);
    println!("{networks} Layer3 networks × {nodes} nodes, the zone of one node");
    run_child(&["desired", &networks.to_string(), &nodes.to_string()]);

    let install = Installation::recent().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let ops = dir.path().join("ops.jsonl");
    let node_ops = dir.path().join("node-ops.jsonl");
    let a = OvsdbServer::start(&install, &ServerOptions::default()).unwrap();
    let a2 = OvsdbServer::start(&install, &ServerOptions::default()).unwrap();
    std::env::set_var("NETCONNECT_BENCH_SECOND", a2.unix_remote());
    run_child(&[
        "ours",
        &a.unix_remote(),
        &networks.to_string(),
        &nodes.to_string(),
        ops.to_str().unwrap(),
        node_ops.to_str().unwrap(),
    ]);
    drop(a);
    drop(a2);
    let b = OvsdbServer::start(&install, &ServerOptions::default()).unwrap();
    let path = b.unix_remote().trim_start_matches("unix:").to_owned();
    run_child(&[
        "floor",
        &path,
        ops.to_str().unwrap(),
        node_ops.to_str().unwrap(),
    ]);
    drop(b);
    // The same with the connection monitoring the tables, as the cache does: the
    // server's share of the cost of keeping a cache.
    let c = OvsdbServer::start(&install, &ServerOptions::default()).unwrap();
    let path = c.unix_remote().trim_start_matches("unix:").to_owned();
    run_child(&[
        "floor",
        &path,
        ops.to_str().unwrap(),
        node_ops.to_str().unwrap(),
        "monitored",
    ]);
}
