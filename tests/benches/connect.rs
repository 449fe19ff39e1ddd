//! OKEP-5224's scale case: N primary Layer3 networks × M nodes connected by one
//! ClusterNetworkConnect, in the zone of one node (default 500 × 500: 250k ports and
//! 250k static routes on the connect router, 249,500 policies on the networks' routers).
//!
//! OVN gives a logical port at most a 15-bit tunnel key (32767), so no connect router
//! can have 250k ports: netconnect refuses such a CNC (`ConnectSubnetExhausted`), as it
//! should. To measure the NB side of the OKEP's case anyway, the bench lifts that limit
//! (`TopologyConfig::max_port_tunnel_key`); ovn-northd would not bind those ports.
//!
//! Phases, each in its own process (peak memory is its own):
//!
//! - `desired`: the inputs validated and allocated, the connect's rows computed;
//! - `ours`: the networks programmed first (not timed here: the netconnect bench times
//!   them), then the connect from empty through the cache and the reconciler (its own
//!   key, then one key and transaction per connected network, as OVN-Kubernetes
//!   writes it), a second pass that must write nothing, one node added and one network
//!   added (the connect's rows written and the time);
//! - `floor`: the same transactions sent again over a raw socket to an empty server,
//!   one at a time (see `common::Replay`), the connect's timed, reading only the
//!   replies.
//!
//! `cargo bench -p integration-tests --bench connect [-- NETWORKS NODES]`.
//! `BENCH_STEP_MARK=FILE`: `ours` writes `a node added` (then `a network added`) and
//! its process id to FILE and waits two seconds before that step, for a profiler to
//! attach.

// The allocator netconnectd uses.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::Path;
use std::time::{Duration, Instant};

use netconnect::api::load::parse_file;
use netconnect::keys::Key;
use netconnect::reconcile::Reconciler;
use netconnect::status::dir::State;
use netconnect::world::{Settings, World};
use ovn_sandbox::{Installation, OvsdbServer, ServerOptions};

mod common;
use common::{peak_mib, run_child, Recorder, Replay};

/// Network `i`'s cluster subnet: the `i`-th /17 of 16.0.0.0/8 (hosts /26: 512 nodes).
fn subnet(i: usize) -> String {
    format!("16.{}.{}.0/17", i / 2, (i % 2) * 128)
}

fn manifests(networks: usize, nodes: usize) -> String {
    let mut s = String::new();
    for i in 0..networks {
        s.push_str(&format!(
            "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {{name: net{i:04}, labels: {{connect: \"yes\"}}}}\n\
             spec:\n  namespaceSelector: {{}}\n  network:\n    topology: Layer3\n    layer3: {{role: Primary, subnets: [{{cidr: {}, hostSubnet: 26}}]}}\n",
            subnet(i)
        ));
    }
    for n in 0..nodes {
        s.push_str(&format!(
            "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: node-{n:04}\n  annotations: {{k8s.ovn.org/node-chassis-id: chassis-{n:04}}}\n"
        ));
    }
    // /22 blocks hold pairs for node ids up to 511.
    s.push_str(
        "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterNetworkConnect\nmetadata: {name: scale}\n\
         spec:\n  networkSelectors: [{networkSelectionType: ClusterUserDefinedNetworks, clusterUserDefinedNetworkSelector: {networkSelector: {matchLabels: {connect: \"yes\"}}}}]\n\
         \x20 connectSubnets: [{cidr: 172.16.0.0/12, networkPrefix: 22}]\n  connectivity: [PodNetwork]\n",
    );
    s
}

fn world(networks: usize, nodes: usize) -> World {
    let mut settings = Settings {
        zone: Some("node-0000".into()),
        ..Default::default()
    };
    // Lifted to measure the OKEP's case (see the module's comment).
    settings.topology.max_port_tunnel_key = u32::MAX;
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

/// The connect's keys: its own, then one per connected network.
fn connect_keys(w: &World) -> Vec<Key> {
    w.keys()
        .into_iter()
        .filter(|k| matches!(k, Key::Connect(_) | Key::ConnectNetwork(..)))
        .collect()
}

/// `desired N M`.
fn desired(networks: usize, nodes: usize) {
    let start = Instant::now();
    let w = world(networks, nodes);
    let built = start.elapsed();
    let t = Instant::now();
    let mut rows = 0;
    let keys = connect_keys(&w);
    for k in &keys {
        let d = w.desired(k).unwrap();
        assert!(d.incomplete.is_empty(), "{:?}", d.incomplete);
        rows += d.len();
    }
    let computed = t.elapsed();
    println!(
        "desired: inputs validated, allocated and the connect admitted in {built:.2?}; the connect's {rows} rows ({} keys) in {computed:.2?} ({:.0} rows/s); peak {:.0} MiB",
        keys.len(),
        rows as f64 / computed.as_secs_f64(),
        peak_mib()
    );
}

/// Reconciles every key of `w` but the connect, as netconnectd does (a network's
/// fragments whose inputs did not change are not built again), recording each
/// transaction in `rec`.
async fn networks_of(r: &Reconciler, w: &World, rec: &mut Recorder) {
    for k in w
        .keys()
        .into_iter()
        .filter(|k| !matches!(k, Key::Connect(_) | Key::ConnectNetwork(..)))
    {
        let plan = netconnect::controller::reconcile_key(r, w, &k)
            .await
            .unwrap_or_else(|e| panic!("{k}: {e}"));
        rec.add(&plan);
    }
}

/// Reconciles the connect's keys one at a time, recording each transaction in `rec`
/// (outside the clock); returns (rows written, transactions, time).
async fn connect_of(r: &Reconciler, w: &World, rec: &mut Recorder) -> (u64, usize, Duration) {
    let w0 = r.rows_written();
    let mut n = 0;
    let mut d = Duration::ZERO;
    for k in connect_keys(w) {
        let t = Instant::now();
        let plan = netconnect::controller::reconcile_key(r, w, &k)
            .await
            .unwrap();
        d += t.elapsed();
        n += usize::from(!plan.is_empty());
        rec.add(&plan);
    }
    (r.rows_written() - w0, n, d)
}

/// `ours REMOTE N M DIR`.
fn ours(remote: &str, networks: usize, nodes: usize, dir: &str) {
    let rt = common::runtime();
    let file = |name: &str| format!("{dir}/{name}.jsonl");
    rt.block_on(async {
        let r = common::reconciler(remote, Duration::from_secs(1200)).await;
        let cache = r.cache().clone();
        let w = world(networks, nodes);
        let t = Instant::now();
        networks_of(&r, &w, &mut Recorder::create(&file("nets"))).await;
        println!(
            "ours: the networks programmed first ({} rows in the cache) in {:.2?}",
            cache.snapshot().len(),
            t.elapsed()
        );

        let (rows, n, d) = connect_of(&r, &w, &mut Recorder::create(&file("cnc"))).await;
        println!(
            "ours: the connect from empty: {rows} rows in {n} transactions in {d:.2?} ({:.0} rows/s), cache at {} rows; peak {:.0} MiB",
            rows as f64 / d.as_secs_f64(),
            cache.snapshot().len(),
            peak_mib()
        );

        let t = Instant::now();
        let mut compared = 0;
        for k in connect_keys(&w) {
            let plan = r.plan(&w.desired(&k).unwrap()).unwrap();
            assert!(plan.is_empty(), "{k}: {plan}");
            compared += plan.compared;
        }
        let d = t.elapsed();
        println!(
            "ours: second pass, every row built and compared: {compared} rows in {d:.2?} ({:.0} rows/s), wrote nothing",
            compared as f64 / d.as_secs_f64()
        );
        let t = Instant::now();
        let mut built = 0;
        for k in connect_keys(&w) {
            let plan = netconnect::controller::reconcile_key(&r, &w, &k).await.unwrap();
            assert!(plan.is_empty(), "{k}: {plan}");
            built += plan.compared;
        }
        let d = t.elapsed();
        println!(
            "ours: second pass as the controller runs it (fragments unchanged are not built): {built} rows built and compared in {d:.2?}, wrote nothing"
        );

        // One node more: the networks get their rows for it (untimed), then the
        // connect's rows for it are timed.
        let w2 = world(networks, nodes + 1);
        networks_of(&r, &w2, &mut Recorder::create(&file("node-nets"))).await;

        common::mark_step("a node added");
        let (rows, n, d) = connect_of(&r, &w2, &mut Recorder::create(&file("node-cnc"))).await;
        println!("ours: a node added: the connect wrote {rows} rows in {n} transactions in {d:.2?}");


        // One network more.
        let w3 = world(networks + 1, nodes + 1);
        networks_of(&r, &w3, &mut Recorder::create(&file("net-nets"))).await;
        common::mark_step("a network added");
        let (rows, n, d) = connect_of(&r, &w3, &mut Recorder::create(&file("net-cnc"))).await;
        println!("ours: a network added: the connect wrote {rows} rows in {n} transactions in {d:.2?}");
    });
}

/// `floor PATH DIR [monitored]`: the networks preloaded, the connect's transactions
/// timed; `monitored` with the connection monitoring the tables as the cache does
/// (the server's share of keeping a cache).
fn floor(path: &str, dir: &str, monitored: bool) {
    let file = |name: &str| format!("{dir}/{name}.jsonl");
    let label = if monitored {
        "floor with a monitor reading the updates"
    } else {
        "floor"
    };
    let mut s = Replay::connect_maybe_monitored(path, monitored);
    s.send_all(&file("nets"));
    let (d, n) = s.send_all(&file("cnc"));
    println!(
        "{label}: the connect from empty in {n} transactions in {d:.2?}; peak {:.0} MiB",
        peak_mib()
    );
    s.send_all(&file("node-nets"));
    let (d, n) = s.send_all(&file("node-cnc"));
    println!("{label}: a node added: the connect's {n} transactions in {d:.2?}");
    s.send_all(&file("net-nets"));
    let (d, n) = s.send_all(&file("net-cnc"));
    println!("{label}: a network added: the connect's {n} transactions in {d:.2?}");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let a = &args[i + 1..];
        let n = |k: usize| a[k].parse::<usize>().unwrap();
        return match a[0].as_str() {
            "desired" => desired(n(1), n(2)),
            "ours" => ours(&a[1], n(2), n(3), &a[4]),
            "floor" => floor(&a[1], &a[2], a.get(3).is_some_and(|m| m == "monitored")),
            other => panic!("unknown child {other}"),
        };
    }
    let counts: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let networks = counts.first().copied().unwrap_or(500);
    let nodes = counts.get(1).copied().unwrap_or(500);
    println!("{networks} Layer3 networks × {nodes} nodes, one ClusterNetworkConnect, the zone of one node");
    run_child(&["desired", &networks.to_string(), &nodes.to_string()]);

    let install = Installation::recent().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let a = OvsdbServer::start(&install, &ServerOptions::default()).unwrap();
    run_child(&[
        "ours",
        &a.unix_remote(),
        &networks.to_string(),
        &nodes.to_string(),
        d,
    ]);
    drop(a);
    let b = OvsdbServer::start(&install, &ServerOptions::default()).unwrap();
    let path = b.unix_remote().trim_start_matches("unix:").to_owned();
    run_child(&["floor", &path, d]);
    drop(b);
    let c = OvsdbServer::start(&install, &ServerOptions::default()).unwrap();
    let path = c.unix_remote().trim_start_matches("unix:").to_owned();
    run_child(&["floor", &path, d, "monitored"]);
}
