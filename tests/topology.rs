//! Primary UDN topologies written by netconnect's reconciler into a real NB, checked
//! by ovn-northd and ovn-nbctl.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use netconnect::alloc::{allocate, ClusterConfig};
use netconnect::api::load::parse_file;
use netconnect::api::{Context, Inventory};
use netconnect::reconcile::{NbIndexes, Reconciler};
use netconnect::topology::{self, Inputs, TopologyConfig};
use ovsdb_proto::cache::{Cache, CacheConfig};

use integration_tests::sandbox;

const MANIFESTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: blue, labels: {tenant: blue}}
---
apiVersion: k8s.ovn.org/v1
kind: ClusterUserDefinedNetwork
metadata: {name: blue}
spec:
  namespaceSelector: {matchLabels: {tenant: blue}}
  network:
    topology: Layer3
    layer3:
      role: Primary
      subnets: [{cidr: 10.10.0.0/16, hostSubnet: 24}, {cidr: 10.11.0.0/16, hostSubnet: 24}, {cidr: "fd10::/48"}]
---
apiVersion: k8s.ovn.org/v1
kind: UserDefinedNetwork
metadata: {name: net, namespace: yellow}
spec:
  topology: Layer2
  layer2: {role: Primary, subnets: [10.20.0.0/16, "fd20::/64"]}
"#;

fn nodes() -> String {
    let mut s = String::new();
    for (i, n) in ["node-a", "node-b", "node-c"].iter().enumerate() {
        s.push_str(&format!(
            "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: {n}\n  annotations:\n    k8s.ovn.org/node-chassis-id: chassis-{i}\n"
        ));
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layer3_and_layer2_networks_are_accepted_by_northd_and_idempotent() {
    let sb = sandbox();
    let files = [parse_file(
        Path::new("m.yaml"),
        &(MANIFESTS.to_string() + &nodes()),
    )];
    let inv = Inventory::build(&files, &Context::default());
    assert!(inv.problems.is_empty(), "{:?}", inv.problems);
    let (alloc, problems) = allocate(&inv, &ClusterConfig::default());
    assert!(problems.is_empty(), "{problems:?}");
    let config = TopologyConfig::default();
    let inputs = Inputs {
        inventory: &inv,
        allocations: &alloc,
        zone: None,
        config: &config,
    };

    let mut cc = CacheConfig::new(
        vec![sb.nb.unix_remote().parse().unwrap()],
        "OVN_Northbound",
        &[],
    );
    let nb = NbIndexes::register(&mut cc);
    let (cache, _events) = Cache::start(cc);
    let cache = Arc::new(cache);
    tokio::time::timeout(Duration::from_secs(10), cache.wait_until_ready())
        .await
        .unwrap();
    let r = Reconciler::new(cache.clone(), nb);

    let mut keys = vec![topology::cluster::build()];
    for name in inv.networks.keys() {
        keys.push(topology::network(&inputs, name).unwrap());
    }
    for d in &keys {
        let plan = r
            .apply(d)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", d.owner));
        println!("{plan}");
    }
    let first = r.transactions();
    assert_eq!(first, keys.len() as u64);
    for d in &keys {
        let plan = r.apply(d).await.unwrap();
        assert!(plan.is_empty(), "second pass wants to write:\n{plan}");
    }
    assert_eq!(r.transactions(), first, "no transaction on a second pass");
    sb.sync().unwrap();
    let log = std::fs::read_to_string(sb.northd_log()).unwrap();
    let bad: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("|WARN|") || l.contains("|ERR|"))
        .collect();
    assert!(bad.is_empty(), "northd complained:\n{}", bad.join("\n"));
    println!("{}", sb.nbctl(&["show"]).unwrap());
}

/// The MAC OVN-Kubernetes gives a pod whose first address is `ip` (IPv4).
fn pod_mac(ip: std::net::Ipv4Addr) -> String {
    let o = ip.octets();
    format!("0a:58:{:02x}:{:02x}:{:02x}:{:02x}", o[0], o[1], o[2], o[3])
}

/// Adds a pod's logical port to `switch` (as OVN-Kubernetes' pod controller would) and
/// the pod itself to the chassis.
fn add_pod(
    sb: &integration_tests::Sandbox,
    chassis: &mut ovn_sandbox::Chassis,
    switch: &str,
    name: &str,
    ips: &[&str],
    gateways: &[&str],
) -> ovn_sandbox::Pod {
    let nets: Vec<ipnet::IpNet> = ips.iter().map(|s| s.parse().unwrap()).collect();
    let v4 = match nets[0].addr() {
        std::net::IpAddr::V4(v4) => v4,
        _ => panic!("IPv4 first"),
    };
    let mac = pod_mac(v4);
    let mut addresses = mac.clone();
    for n in &nets {
        addresses.push(' ');
        addresses.push_str(&n.addr().to_string());
    }
    sb.nbctl(&[
        "lsp-add",
        switch,
        name,
        "--",
        "lsp-set-addresses",
        name,
        &addresses,
        "--",
        "lsp-set-port-security",
        name,
        &addresses,
    ])
    .unwrap();
    let gws: Vec<std::net::IpAddr> = gateways.iter().map(|g| g.parse().unwrap()).collect();
    chassis.add_pod(name, &mac, &nets, &gws).unwrap()
}

fn ip(s: &str) -> std::net::IpAddr {
    s.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_ping_across_nodes_of_their_network_and_not_into_another() {
    use integration_tests::udn;
    let sb = sandbox();
    let mut chassis = ovn_sandbox::Chassis::start(&sb, "chassis-1").unwrap();
    // Blue's first subnet holds two nodes; the third node's subnet comes from the
    // appended one (OKEP-5377).
    let yaml = r#"
apiVersion: k8s.ovn.org/v1
kind: ClusterUserDefinedNetwork
metadata: {name: blue}
spec:
  namespaceSelector: {matchLabels: {tenant: blue}}
  network:
    topology: Layer3
    layer3:
      role: Primary
      subnets: [{cidr: 10.10.0.0/23, hostSubnet: 24}, {cidr: "fd10::/48"}, {cidr: 10.11.0.0/16, hostSubnet: 24}]
---
apiVersion: k8s.ovn.org/v1
kind: UserDefinedNetwork
metadata: {name: net, namespace: yellow}
spec:
  topology: Layer2
  layer2: {role: Primary, subnets: [10.20.0.0/16, "fd20::/64"]}
"#
    .to_string()
        + &udn::node("node-a", "chassis-1", &[])
        + &udn::node("node-b", "chassis-1", &[])
        + &udn::node("node-c", "chassis-1", &[]);
    let world = udn::world(&yaml, &netconnect::state::State::default(), None);
    let (r, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    udn::apply(&r, &world).await;

    let blue = &world.allocations.host_subnets["cluster_udn_blue"];
    assert_eq!(
        blue["node-c"][0].to_string(),
        "10.11.0.0/24",
        "the appended subnet serves node-c"
    );
    let mut blue_pods = Vec::new();
    for n in ["node-a", "node-b", "node-c"] {
        let s = &blue[n];
        let v4 = netconnect::topology::addr::nth(&s[0], 5)
            .unwrap()
            .to_string();
        let v6 = netconnect::topology::addr::nth(&s[1], 5)
            .unwrap()
            .to_string();
        let gw4 = netconnect::topology::addr::nth(&s[0], 1)
            .unwrap()
            .to_string();
        let gw6 = netconnect::topology::addr::nth(&s[1], 1)
            .unwrap()
            .to_string();
        let pod = add_pod(
            &sb,
            &mut chassis,
            &format!("cluster_udn_blue_{n}"),
            &format!("cluster_udn_blue_blue_pod-{n}"),
            &[&format!("{v4}/24"), &format!("{v6}/64")],
            &[&gw4, &gw6],
        );
        blue_pods.push((pod, ip(&v4), ip(&v6)));
    }
    let mut yellow_pods = Vec::new();
    for (i, _) in ["node-a", "node-c"].iter().enumerate() {
        let v4 = format!("10.20.0.{}", 10 + i);
        let v6 = format!("fd20::{}", 10 + i);
        let pod = add_pod(
            &sb,
            &mut chassis,
            "yellow_net_ovn_layer2_switch",
            &format!("yellow_net_yellow_pod-{i}"),
            &[&format!("{v4}/16"), &format!("{v6}/64")],
            &["10.20.0.1", "fd20::1"],
        );
        yellow_pods.push((pod, ip(&v4), ip(&v6)));
    }
    sb.sync_hv().unwrap();

    let (a, a4, _) = &blue_pods[0];
    let (_, b4, _) = &blue_pods[1];
    let (_, c4, c6) = &blue_pods[2];
    assert!(
        chassis.ping(a, *b4, 3).unwrap(),
        "blue node-a to node-b, IPv4"
    );
    assert!(
        chassis.ping(a, *c4, 3).unwrap(),
        "blue across its two subnets (10.10 to 10.11)"
    );
    assert!(
        chassis.ping(a, *c6, 3).unwrap(),
        "blue node-a to node-c, IPv6"
    );
    let (y0, _, _) = &yellow_pods[0];
    let (_, y1_4, y1_6) = &yellow_pods[1];
    assert!(
        chassis.ping(y0, *y1_4, 3).unwrap(),
        "yellow across nodes, IPv4"
    );
    assert!(
        chassis.ping(y0, *y1_6, 3).unwrap(),
        "yellow across nodes, IPv6"
    );
    assert!(
        chassis.ping(y0, ip("10.20.0.1"), 3).unwrap(),
        "yellow's transit router answers as its gateway"
    );
    assert!(
        !chassis.ping(a, *y1_4, 2).unwrap(),
        "blue cannot reach yellow"
    );
    assert!(
        !chassis.ping(y0, *a4, 2).unwrap(),
        "yellow cannot reach blue"
    );
}
