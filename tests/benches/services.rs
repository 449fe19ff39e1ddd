//! Services at scale: N primary networks (half Layer3, half Layer2) on M nodes, the
//! zone of one node, with S ClusterIP services of 3 endpoints each spread over the
//! networks' namespaces (issue 17's case: 20 × 100 with 1000 services).
//!
//! Each phase runs in its own process so that its peak memory (VmHWM) is its own:
//!
//! - `ours`: the networks programmed first, then every service's load balancers from
//!   empty (timed), one service's endpoint changed (its key alone; the keys
//!   netconnectd looks at again on that manifest change; every key), one node added;
//! - `floor`: the same transactions over a raw socket to a second server that holds
//!   the networks' rows, reading only the replies.
//!
//! `cargo bench -p integration-tests --bench services [-- NETWORKS NODES SERVICES]`;
//! `WORKERS=N` sets the keys in flight (netconnectd's default `--workers` otherwise).

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

/// The sizes of one run.
#[derive(Clone, Copy)]
struct Scale {
    networks: usize,
    nodes: usize,
    services: usize,
}

/// The `e`-th endpoint address of a service of network `net` (Layer3 networks hold
/// 10.132.0.0/14, Layer2 ones 10.200.0.0/16); `bump` moves one endpoint.
fn endpoint(net: usize, svc: usize, e: usize, bump: usize) -> String {
    let n = svc * 3 + e + bump;
    if net.is_multiple_of(2) {
        format!(
            "10.{}.{}.{}",
            132 + (n / 60_000) % 4,
            (n / 250) % 240,
            2 + n % 250
        )
    } else {
        format!("10.200.{}.{}", (n / 250) % 250, 2 + n % 250)
    }
}

fn manifests(s: Scale, changed: &[usize]) -> String {
    let mut y = String::new();
    for i in 0..s.networks {
        let network = if i.is_multiple_of(2) {
            "topology: Layer3\n    layer3: {role: Primary, subnets: [{cidr: 10.132.0.0/14, hostSubnet: 23}]}"
        } else {
            "topology: Layer2\n    layer2: {role: Primary, subnets: [10.200.0.0/16]}"
        };
        y.push_str(&format!(
            "---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: ns{i:02}, labels: {{net: n{i:02}}}}}\n\
             ---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {{name: net{i:02}}}\n\
             spec:\n  namespaceSelector: {{matchLabels: {{net: n{i:02}}}}}\n  network:\n    {network}\n"
        ));
    }
    for n in 0..s.nodes {
        let gw = format!(
            r#"{{"default":{{"mode":"shared","bridge-id":"breth0","mac-address":"0a:58:c0:a8:{:02x}:{:02x}","ip-addresses":["192.168.{}.{}/16"],"next-hops":["192.168.0.1"],"node-port-enable":"true"}}}}"#,
            n / 250,
            n % 250,
            n / 250,
            2 + n % 250
        );
        y.push_str(&format!(
            "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: node-{n:04}\n  annotations:\n    k8s.ovn.org/node-chassis-id: chassis-{n:04}\n    k8s.ovn.org/l3-gateway-config: '{gw}'\n"
        ));
    }
    for j in 0..s.services {
        let net = j % s.networks;
        let ip = format!("10.96.{}.{}", j / 250, 1 + j % 250);
        let bump = if changed.contains(&j) { 7 } else { 0 };
        y.push_str(&format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: svc{j:04}, namespace: ns{net:02}}}\n\
             spec: {{clusterIP: {ip}, clusterIPs: [{ip}], ports: [{{name: http, port: 80, protocol: TCP, targetPort: 8080}}]}}\n\
             ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
             metadata:\n  name: svc{j:04}-mirror\n  namespace: ns{net:02}\n\
             \x20 labels: {{endpointslice.kubernetes.io/managed-by: endpointslice-mirror-controller.k8s.ovn.org, k8s.ovn.org/service-name: svc{j:04}}}\n\
             \x20 annotations: {{k8s.ovn.org/endpointslice-network: cluster_udn_net{net:02}}}\n\
             addressType: IPv4\nports: [{{name: http, port: 8080, protocol: TCP}}]\nendpoints:\n"
        ));
        for e in 0..3 {
            let b = if e == 2 { bump } else { 0 };
            y.push_str(&format!(
                "- {{addresses: [{}], conditions: {{ready: true}}}}\n",
                endpoint(net, j, e, b)
            ));
        }
    }
    y
}

/// The world of `s` with one endpoint of each service in `changed` moved.
fn world(s: Scale, changed: &[usize]) -> World {
    let settings = Settings {
        zone: Some("node-0000".into()),
        ..Default::default()
    };
    let w = World::build(
        &[parse_file(Path::new("bench.yaml"), &manifests(s, changed))],
        &State::default(),
        settings,
    );
    assert!(
        w.problems.is_empty(),
        "{:?}",
        &w.problems[..w.problems.len().min(3)]
    );
    w
}

fn is_service(k: &Key) -> bool {
    matches!(k, Key::Service(_))
}

/// Applies `keys` of `w` one at a time, recording each transaction in `rec`
/// (outside the clock); returns the rows written, the transactions and the time.
async fn apply(
    r: &Reconciler,
    w: &World,
    keys: &[Key],
    rec: &mut Recorder,
) -> (u64, u64, Duration) {
    let (t0, w0) = (r.transactions(), r.rows_written());
    let mut d = Duration::ZERO;
    for k in keys {
        let t = Instant::now();
        let plan = r.apply(&w.desired(k).unwrap()).await.unwrap();
        d += t.elapsed();
        rec.add(&plan);
    }
    (r.rows_written() - w0, r.transactions() - t0, d)
}

/// `ours REMOTE N M S DIR`.
fn ours(remote: &str, s: Scale, dir: &str) {
    let rt = common::runtime();
    rt.block_on(async {
        let r = common::reconciler(remote, Duration::from_secs(600)).await;
        let w = world(s, &[]);
        let (services, others): (Vec<Key>, Vec<Key>) = w.keys().into_iter().partition(is_service);
        let file = |name: &str| format!("{dir}/{name}.jsonl");

        let (rows, txns, d) = apply(&r, &w, &others, &mut Recorder::create(&file("networks"))).await;
        println!("ours: the networks: {rows} rows in {txns} transactions in {d:.2?}");

        // The services from empty as netconnectd runs them: every key, as many in
        // flight as its workers (the networks' keys find nothing to do).
        let workers = std::env::var("WORKERS").map_or(
            netconnect::daemon::args::DEFAULT_WORKERS.into(),
            |v| v.parse().expect("WORKERS: a number"),
        );
        let (t0, w0) = (r.transactions(), r.rows_written());
        let start = Instant::now();
        let out = netconnect::controller::once(&r, &w, 1, Default::default(), workers).await;
        let d = start.elapsed();
        let mut rec = Recorder::create(&file("services"));
        out.iter().for_each(|o| rec.add(o.result.as_ref().unwrap()));
        drop(rec);
        let lbs = r.cache().snapshot().table("Load_Balancer").len();
        println!(
            "ours: {} services from empty, {workers} keys in flight: {} rows written ({lbs} load balancers) in {} transactions in {d:.2?}; peak {:.0} MiB",
            services.len(),
            r.rows_written() - w0,
            r.transactions() - t0,
            peak_mib()
        );

        // One endpoint of one service moved.
        let w2 = world(s, &[s.services / 2]);
        let key = Key::Service(format!("ns{:02}/svc{:04}", (s.services / 2) % s.networks, s.services / 2));
        assert!(w2.keys().contains(&key), "{key} is not a key");
        let mut rec = Recorder::create(&file("endpoint"));
        let (rows, txns, d) = apply(&r, &w2, std::slice::from_ref(&key), &mut rec).await;
        drop(rec);
        println!("ours: one endpoint changed, its service's key: {rows} rows written in {txns} transactions in {d:.2?}");
        // As netconnectd does on a manifest change: the keys of the new world not known
        // to be unchanged (every network and connect key, the services whose inputs
        // changed) looked at again.
        let w3 = world(s, &[s.services / 2, s.services / 2 + 1]);
        let t = Instant::now();
        let keys = netconnect::controller::changed_keys(&w2, &w3, &r);
        let compared = t.elapsed();
        let mut written = Recorder::create(&file("changed"));
        let (rows, txns, d) = apply(&r, &w3, &keys, &mut written).await;
        let services = keys.iter().filter(|k| is_service(k)).count();
        println!(
            "ours: one endpoint changed, as netconnectd takes it: inputs compared in {compared:.2?}, {} keys of {} looked at again ({services} a service's) in {d:.2?}, {rows} rows written in {txns} transactions",
            keys.len(),
            w3.keys().len(),
        );
        // Every key, as netconnectd did before it compared services' inputs.
        let w3b = world(s, &[s.services / 2, s.services / 2 + 2]);
        let (rows, txns, d) = apply(&r, &w3b, &w3b.keys(), &mut written).await;
        drop(written);
        println!(
            "ours: one endpoint changed, every key planned again: {rows} rows written in {txns} transactions in {d:.2?}"
        );

        // One node more: no service row should change.
        let mut n = s;
        n.nodes += 1;
        let w4 = world(n, &[s.services / 2, s.services / 2 + 2]);
        let (services, others): (Vec<Key>, Vec<Key>) = w4.keys().into_iter().partition(is_service);
        let mut rec = Recorder::create(&file("node"));
        let (srows, stxns, sd) = apply(&r, &w4, &services, &mut rec).await;
        let (rows, txns, d) = apply(&r, &w4, &others, &mut rec).await;
        drop(rec);
        println!(
            "ours: a node added: services' keys wrote {srows} rows in {stxns} transactions ({sd:.2?}); the networks' {rows} rows in {txns} transactions ({d:.2?})"
        );
    });
}

/// `floor PATH DIR`.
fn floor(path: &str, dir: &str) {
    let mut s = Replay::connect(path);
    let file = |name: &str| format!("{dir}/{name}.jsonl");
    s.send_all(&file("networks"));
    let (d, n) = s.send_all(&file("services"));
    println!(
        "floor: the services from empty: {n} transactions in {d:.2?}; peak {:.0} MiB",
        peak_mib()
    );
    let (d, n) = s.send_all(&file("endpoint"));
    println!("floor: one endpoint changed: {n} transactions in {d:.2?}");
    // What ours wrote between the two steps, untimed: the same database for the next.
    s.send_all(&file("changed"));
    let (d, n) = s.send_all(&file("node"));
    println!("floor: a node added: {n} transactions in {d:.2?}");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let a = &args[i + 1..];
        let n = |k: usize| a[k].parse::<usize>().unwrap();
        return match a[0].as_str() {
            "ours" => ours(
                &a[1],
                Scale {
                    networks: n(2),
                    nodes: n(3),
                    services: n(4),
                },
                &a[5],
            ),
            "floor" => floor(&a[1], &a[2]),
            other => panic!("unknown child {other}"),
        };
    }
    let counts: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let s = Scale {
        networks: counts.first().copied().unwrap_or(20),
        nodes: counts.get(1).copied().unwrap_or(100),
        services: counts.get(2).copied().unwrap_or(1000),
    };
    println!(
        "{} networks (half Layer3, half Layer2) × {} nodes, {} services × 3 endpoints, the zone of one node",
        s.networks, s.nodes, s.services
    );
    let install = Installation::recent().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let a = OvsdbServer::start(&install, &ServerOptions::default()).unwrap();
    run_child(&[
        "ours",
        &a.unix_remote(),
        &s.networks.to_string(),
        &s.nodes.to_string(),
        &s.services.to_string(),
        d,
    ]);
    drop(a);
    let b = OvsdbServer::start(&install, &ServerOptions::default()).unwrap();
    let path = b.unix_remote().trim_start_matches("unix:").to_owned();
    run_child(&["floor", &path, d]);
}
