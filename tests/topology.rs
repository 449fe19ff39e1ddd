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

/// Three nodes with a chassis each; node-a and node-b have a gateway (dual stack),
/// node-c none.
fn nodes() -> String {
    let mut s = String::new();
    for (i, n) in ["node-a", "node-b", "node-c"].iter().enumerate() {
        s.push_str(&format!(
            "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: {n}\n  annotations:\n    k8s.ovn.org/node-chassis-id: chassis-{i}\n"
        ));
        if i < 2 {
            s.push_str(&format!(
                "    k8s.ovn.org/l3-gateway-config: '{{\"default\":{{\"mode\":\"shared\",\"bridge-id\":\"breth0\",\"mac-address\":\"0a:58:c0:a8:7e:0{i}\",\"ip-addresses\":[\"192.168.126.1{i}/24\",\"fd00:126::1{i}/64\"],\"next-hops\":[\"192.168.126.1\",\"fd00:126::1\"],\"node-port-enable\":\"true\"}}}}'\n"
            ));
        }
    }
    s
}

#[allow(clippy::too_many_lines)] // a test: one story, start to end
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
        prepared: None,
    };

    let mut cc = CacheConfig::new(
        vec![sb.nb.unix_remote().parse().unwrap()],
        "OVN_Northbound",
        &[],
    );
    let nb = NbIndexes::register(&mut cc);
    let (cache, _) = Cache::start(cc);
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
    // The SB has the datapaths and port bindings with the keys the NB asked for.
    let blue_id = alloc.network_ids["cluster_udn_blue"];
    assert_eq!(
        sb.datapath_key("cluster_udn_blue_transit_switch").unwrap(),
        (16711683 + blue_id).to_string()
    );
    for (n, id) in &alloc.node_ids {
        assert_eq!(
            sb.port_binding(&format!("cluster_udn_blue_tstor-{n}"), "tunnel_key")
                .unwrap(),
            id.to_string()
        );
        // A Layer2 node's transit router port comes with its gateway router.
        if n != "node-c" {
            assert_eq!(
                sb.port_binding(&format!("trtor-GR_yellow_net_{n}"), "tunnel_key")
                    .unwrap(),
                (10 + id).to_string()
            );
        }
    }
    assert_eq!(
        sb.nbctl(&[
            "--bare",
            "--columns=name",
            "find",
            "Logical_Router",
            "name=GR_cluster_udn_blue_node-c"
        ])
        .unwrap()
        .trim(),
        "",
        "node-c has no gateway config: no gateway router"
    );
    // The static MAC bindings of the gateway routers reach the SB as northd's.
    let smb = sb
        .sbctl(&[
            "--bare",
            "--columns=ip",
            "find",
            "Static_MAC_Binding",
            "logical_port=rtoe-GR_cluster_udn_blue_node-a",
        ])
        .unwrap();
    let mut ips: Vec<&str> = smb.split_whitespace().collect();
    ips.sort_unstable();
    assert_eq!(ips, ["169.254.0.2", "169.254.0.4", "fd69::2", "fd69::4"]);
    let keys = &alloc.tunnel_keys["yellow_net"];
    assert_eq!(
        sb.datapath_key("yellow_net_ovn_layer2_switch").unwrap(),
        keys[0].to_string()
    );
    assert_eq!(
        sb.datapath_key("yellow_net_transit_router").unwrap(),
        keys[1].to_string()
    );
    assert_eq!(
        sb.port_binding("trtos-yellow_net_ovn_layer2_switch", "tunnel_key")
            .unwrap(),
        "1"
    );
    // Every port the NB has is bound in the SB.
    let lsps = sb
        .nbctl(&["--bare", "--columns=name", "list", "Logical_Switch_Port"])
        .unwrap();
    for name in lsps.split_whitespace() {
        assert!(
            !sb.port_binding(name, "tunnel_key").unwrap().is_empty(),
            "no port binding for {name}"
        );
    }
}

use integration_tests::udn::add_pod;

fn ip(s: &str) -> std::net::IpAddr {
    s.parse().unwrap()
}

#[allow(clippy::too_many_lines)] // a test: one story, start to end
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_ping_across_nodes_of_their_network_and_not_into_another() {
    use integration_tests::udn;
    let sb = sandbox();
    let mut chassis = ovn_sandbox::Chassis::start(&sb, "chassis-1").unwrap();
    // Blue's first subnet holds two nodes; the third node's subnet comes from the
    // appended one (OKEP-5377). Green overlaps blue's first subnet; no connect joins
    // them.
    let yaml = r#"
apiVersion: k8s.ovn.org/v1
kind: ClusterUserDefinedNetwork
metadata: {name: green}
spec:
  namespaceSelector: {matchLabels: {tenant: green}}
  network:
    topology: Layer3
    layer3:
      role: Primary
      subnets: [{cidr: 10.10.0.0/16, hostSubnet: 24}]
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
    let world = udn::world(&yaml, &netconnect::status::dir::State::default(), None);
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
        let v4 = netconnect::ovnk::addr::nth(&s[0], 5).unwrap().to_string();
        let v6 = netconnect::ovnk::addr::nth(&s[1], 5).unwrap().to_string();
        let gw4 = netconnect::ovnk::addr::nth(&s[0], 1).unwrap().to_string();
        let gw6 = netconnect::ovnk::addr::nth(&s[1], 1).unwrap().to_string();
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

    // Green's pods, at blue's very addresses on node-a and node-b: each network's
    // pods reach their own peer, and only it (blue's peer gone, blue's ping fails
    // while green's still answers).
    let green = &world.allocations.host_subnets["cluster_udn_green"];
    let mut green_pods = Vec::new();
    for n in ["node-a", "node-b"] {
        assert_eq!(green[n][0], blue[n][0], "the same host subnet as blue's");
        let v4 = netconnect::ovnk::addr::nth(&green[n][0], 5)
            .unwrap()
            .to_string();
        let gw4 = netconnect::ovnk::addr::nth(&green[n][0], 1)
            .unwrap()
            .to_string();
        let pod = add_pod(
            &sb,
            &mut chassis,
            &format!("cluster_udn_green_{n}"),
            &format!("cluster_udn_green_green_pod-{n}"),
            &[&format!("{v4}/24")],
            &[&gw4],
        );
        green_pods.push((pod, ip(&v4)));
    }
    sb.sync_hv().unwrap();
    let (ga, _) = &green_pods[0];
    let (_, gb4) = &green_pods[1];
    assert_eq!(
        gb4, b4,
        "green's node-b pod has blue's node-b pod's address"
    );
    assert!(chassis.ping(ga, *gb4, 3).unwrap(), "green node-a to node-b");
    assert!(chassis.ping(a, *b4, 3).unwrap(), "blue node-a to node-b");
    sb.nbctl(&["lsp-del", "cluster_udn_blue_blue_pod-node-b"])
        .unwrap();
    sb.sync_hv().unwrap();
    assert!(
        !chassis.ping(a, *b4, 2).unwrap(),
        "blue's peer gone: nothing answers blue at that address"
    );
    assert!(
        chassis.ping(ga, *gb4, 3).unwrap(),
        "green's peer still answers green"
    );
}

use integration_tests::udn::{assert_same_rows, dump};

const TWO_ZONES: &str = r#"
apiVersion: k8s.ovn.org/v1
kind: ClusterUserDefinedNetwork
metadata: {name: blue}
spec:
  namespaceSelector: {}
  network:
    topology: Layer3
    layer3: {role: Primary, subnets: [{cidr: 10.10.0.0/16}]}
---
apiVersion: k8s.ovn.org/v1
kind: ClusterUserDefinedNetwork
metadata: {name: yellow}
spec:
  namespaceSelector: {}
  network:
    topology: Layer2
    layer2: {role: Primary, subnets: [10.20.0.0/16]}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_zones_agree_on_remote_ports_and_keys_and_traffic_leaves_through_them() {
    use integration_tests::udn;
    let yaml = TWO_ZONES.to_string() + &udn::two_zone_nodes();
    let zones = udn::two_zones(&yaml).await;
    let (a, world_a) = &zones[0];
    let (b, world_b) = &zones[1];
    assert_eq!(
        world_a.allocations, world_b.allocations,
        "both zones allocate the same"
    );
    let id_b = world_a.allocations.node_ids["node-b"].to_string();

    // Layer3: node-b's transit switch port is remote in zone A, a router port in zone B,
    // with the same tunnel key in both SBs; and so for the transit switch itself.
    let get = |sb: &integration_tests::Sandbox, table: &str, rec: &str, col: &str| {
        sb.nbctl(&["--bare", "get", table, rec, col])
            .unwrap()
            .trim()
            .to_owned()
    };
    assert_eq!(
        get(
            a,
            "Logical_Switch_Port",
            "cluster_udn_blue_tstor-node-b",
            "type"
        ),
        "remote"
    );
    assert_eq!(
        get(
            b,
            "Logical_Switch_Port",
            "cluster_udn_blue_tstor-node-b",
            "type"
        ),
        "router"
    );
    let ka = a
        .port_binding("cluster_udn_blue_tstor-node-b", "tunnel_key")
        .unwrap();
    assert_eq!(ka, id_b);
    assert_eq!(
        b.port_binding("cluster_udn_blue_tstor-node-b", "tunnel_key")
            .unwrap(),
        ka
    );
    let pb_type = a.port_binding("cluster_udn_blue_tstor-node-b", "type");
    assert_eq!(pb_type.unwrap(), "remote");
    assert_eq!(
        a.datapath_key("cluster_udn_blue_transit_switch").unwrap(),
        b.datapath_key("cluster_udn_blue_transit_switch").unwrap()
    );
    assert_eq!(
        a.datapath_key("cluster_udn_yellow_transit_router").unwrap(),
        b.datapath_key("cluster_udn_yellow_transit_router").unwrap()
    );
    // Layer2: node-b's transit router port is bound to chassis-b in zone A (a remote
    // port binding) and peered with its gateway router in zone B; same key.
    let ptr_a = a
        .port_binding("trtor-GR_cluster_udn_yellow_node-b", "tunnel_key")
        .unwrap();
    assert_eq!(
        ptr_a,
        (10 + world_a.allocations.node_ids["node-b"]).to_string()
    );
    assert_eq!(
        b.port_binding("trtor-GR_cluster_udn_yellow_node-b", "tunnel_key")
            .unwrap(),
        ptr_a
    );
    let t = a.port_binding("trtor-GR_cluster_udn_yellow_node-b", "type");
    assert_eq!(t.unwrap(), "remote");

    // A pod on node-a sends to node-b's subnet: zone A's pipeline leaves through the
    // remote transit switch port.
    let sa = &world_a.allocations.host_subnets["cluster_udn_blue"]["node-a"][0];
    let other = &world_a.allocations.host_subnets["cluster_udn_blue"]["node-b"][0];
    let dst = netconnect::ovnk::addr::nth(other, 5).unwrap();
    let trace =
        integration_tests::trace_from_new_pod(a, "cluster_udn_blue_node-a", "pod-a", sa, dst);
    assert!(
        trace.contains("output(\"cluster_udn_blue_tstor-node-b\");"),
        "the packet does not leave through the remote port:\n{trace}"
    );
}

fn l3(name: &str, subnets: &str) -> String {
    format!(
        "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {{name: {name}}}\nspec:\n  namespaceSelector: {{}}\n  network:\n    topology: Layer3\n    layer3: {{role: Primary, subnets: {subnets}}}\n"
    )
}

/// Runs the manifests `yaml` the way netconnectd does (with EgressIP enabled, for its
/// no-reroute policies): state read, world built, state saved, every key reconciled.
async fn step(
    r: &netconnect::reconcile::Reconciler,
    dir: &std::path::Path,
    yaml: &str,
) -> netconnect::world::World {
    use netconnect::status::dir::State;
    let (state, problems) = State::load(dir).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    let mut settings = netconnect::world::Settings::default();
    settings.set_egress_ip(true);
    let world = integration_tests::udn::world_in(yaml, &state, settings);
    assert!(world.problems.is_empty(), "{:#?}", world.problems);
    world.state(&state).save(dir).unwrap();
    integration_tests::udn::apply(r, &world).await;
    world
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn day_two_subnets_appended_nodes_added_and_removed_networks_deleted() {
    use integration_tests::udn;
    let sb = sandbox();
    let dir = tempfile::tempdir().unwrap();
    let (r, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    let nodes2 = udn::node("n1", "c1", &[]) + &udn::node("n2", "c2", &[]);
    let other = l3("other", "[{cidr: 10.50.0.0/16}]");
    let red = l3("red", "[{cidr: 10.1.0.0/23, hostSubnet: 24}]");
    let w1 = step(&r, dir.path(), &(nodes2.clone() + &other)).await;
    let before_red = dump(&sb.nb.unix_remote()).await;
    let w2 = step(&r, dir.path(), &(nodes2.clone() + &other + &red)).await;
    assert_eq!(
        w1.allocations.host_subnets["cluster_udn_other"],
        w2.allocations.host_subnets["cluster_udn_other"]
    );
    let red_subnets = w2.allocations.host_subnets["cluster_udn_red"].clone();

    // A third node: red's only range is full until a subnet is appended.
    let nodes3 = nodes2.clone() + &udn::node("n3", "c3", &[]);
    let (state, _) = netconnect::status::dir::State::load(dir.path()).unwrap();
    let w = udn::world_with_problems(&(nodes3.clone() + &other + &red), &state, None);
    assert!(
        w.problems.iter().any(|p| p
            .to_string()
            .contains("no IPv4 host subnet for node n3: no subnets available")),
        "{:?}",
        w.problems
    );
    let red2 = l3(
        "red",
        "[{cidr: 10.1.0.0/23, hostSubnet: 24}, {cidr: 10.2.0.0/23, hostSubnet: 24}]",
    );
    let t0 = r.transactions();
    let w3 = step(&r, dir.path(), &(nodes3.clone() + &other + &red2)).await;
    let red3 = &w3.allocations.host_subnets["cluster_udn_red"];
    assert_eq!(
        red3["n1"], red_subnets["n1"],
        "existing node subnets do not move"
    );
    assert_eq!(red3["n2"], red_subnets["n2"]);
    assert_eq!(red3["n3"][0].to_string(), "10.2.0.0/24");
    // One transaction per network that changed (red: subnet and node; other: node),
    // none for the cluster rows.
    assert_eq!(r.transactions() - t0, 2);
    let policies = sb
        .nbctl(&["lr-policy-list", "cluster_udn_red_ovn_cluster_router"])
        .unwrap();
    for m in [
        "ip4.src == 10.1.0.0/23 && ip4.dst == 10.2.0.0/23",
        "ip4.src == 10.2.0.0/23 && ip4.dst == 10.1.0.0/23",
        "ip4.src == 10.2.0.0/23 && ip4.dst == 10.2.0.0/23",
    ] {
        assert!(policies.contains(m), "{m} missing:\n{policies}");
    }
    assert!(sb
        .nbctl(&["ls-list"])
        .unwrap()
        .contains("cluster_udn_red_n3"));

    // Node n3 removed: its rows go from every network, and nothing else changes.
    step(&r, dir.path(), &(nodes2.clone() + &other + &red2)).await;
    let switches = sb.nbctl(&["ls-list"]).unwrap();
    assert!(!switches.contains("_n3"), "{switches}");
    assert!(!sb.nbctl(&["lr-list"]).unwrap().contains("_n3"));

    // red deleted: the NB is back to exactly the rows that were there before it.
    let t1 = r.transactions();
    step(&r, dir.path(), &(nodes2.clone() + &other)).await;
    assert_eq!(r.transactions() - t1, 1, "one transaction, for red");
    let after = dump(&sb.nb.unix_remote()).await;
    assert_same_rows(&before_red, &after);
    // And a second pass writes nothing.
    let t2 = r.transactions();
    step(&r, dir.path(), &(nodes2 + &other)).await;
    assert_eq!(r.transactions(), t2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_of_other_owners_are_kept_byte_for_byte() {
    use integration_tests::udn;
    let sb = sandbox();
    // Another controller's rows, OVN-Kubernetes-style: a switch with a port, a router
    // with a route, owned by its own keys.
    for cmd in [
        vec![
            "ls-add",
            "foreign-ls",
            "--",
            "set",
            "logical_switch",
            "foreign-ls",
            "external_ids:k8s.ovn.org/owner-controller=someone-else",
            "external_ids:k8s.ovn.org/owner-type=Thing",
            "external_ids:k8s.ovn.org/name=x",
        ],
        vec!["lsp-add", "foreign-ls", "foreign-port"],
        vec!["lr-add", "foreign-lr"],
        vec!["lr-route-add", "foreign-lr", "0.0.0.0/0", "192.0.2.1"],
        vec!["lb-add", "foreign-lb", "10.96.0.10:53", "10.10.0.5:53"],
    ] {
        sb.nbctl(&cmd).unwrap();
    }
    let before = dump(&sb.nb.unix_remote()).await;
    let (r, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    let yaml = udn::node("n1", "c1", &[]) + &l3("blue", "[{cidr: 10.10.0.0/16}]");
    let world = udn::world(&yaml, &netconnect::status::dir::State::default(), None);
    udn::apply(&r, &world).await;
    // A pod port added to netconnect's switch by someone else stays through reconciles.
    sb.nbctl(&["lsp-add", "cluster_udn_blue_n1", "pod-x"])
        .unwrap();
    udn::apply(&r, &world).await;
    assert!(sb
        .nbctl(&["lsp-list", "cluster_udn_blue_n1"])
        .unwrap()
        .contains("pod-x"));
    let after = dump(&sb.nb.unix_remote()).await;
    for (table, rows) in &before {
        for (uuid, row) in rows {
            assert_eq!(after[table].get(uuid), Some(row), "{table} {uuid} changed");
        }
    }
    // A foreign switch holding a name netconnect wants is a conflict: nothing written.
    let (r2, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    sb.nbctl(&["ls-add", "cluster_udn_green_n1"]).unwrap();
    // The conflict is found in the cache: plan once it shows the foreign switch (the
    // suite once planned first and wrote green beside it).
    let shown = r2
        .cache()
        .wait_for(Duration::from_secs(10), |snap| {
            snap.table("Logical_Switch").iter().any(|(_, row)| {
                row.get("name")
                    .and_then(|d| d.as_scalar())
                    .and_then(|a| a.as_str())
                    == Some("cluster_udn_green_n1")
            })
        })
        .await;
    assert!(shown, "the cache never showed the foreign switch");
    let world = udn::world(
        &(yaml + &l3("green", "[{cidr: 10.30.0.0/16}]")),
        &netconnect::status::dir::State::default(),
        None,
    );
    let t = r2.transactions();
    let outcomes = netconnect::controller::once(&r2, &world, 1, Default::default(), 4).await;
    let green = outcomes
        .iter()
        .find(|o| o.key == netconnect::keys::Key::Network("cluster_udn_green".into()))
        .unwrap();
    let e = green.result.as_ref().unwrap_err().to_string();
    assert!(
        e.contains(
            "Logical_Switch cluster_udn_green_n1 already exists and belongs to another party"
        ),
        "{e}"
    );
    assert_eq!(
        r2.transactions(),
        t,
        "nothing written for green (the others were unchanged)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_repairs_rows_deleted_behind_its_back_and_a_restart_sends_nothing() {
    use integration_tests::udn;
    use netconnect::controller::{settle, Backoff, Controller};
    let sb = sandbox();
    let gw = udn::gateway_config(&["192.168.126.10/24"], &["192.168.126.1"]);
    let yaml = udn::node("n1", "c1", &[("k8s.ovn.org/l3-gateway-config", &gw)])
        + &udn::node("n2", "c2", &[])
        + &l3("blue", "[{cidr: 10.10.0.0/16}]");
    let world = std::sync::Arc::new(udn::world(
        &yaml,
        &netconnect::status::dir::State::default(),
        None,
    ));
    let (r, events) = udn::reconciler(&sb.nb.unix_remote()).await;
    let (_tx, rx) = tokio::sync::watch::channel(world.clone());
    let backoff = Backoff {
        min: std::time::Duration::from_millis(50),
        max: std::time::Duration::from_secs(1),
    };
    let controller = Controller::new(r.clone(), rx, backoff);
    let queue = controller.queue();
    let reports = controller.reports();
    let running = tokio::spawn(controller.run(events, 2));
    let quiet = std::time::Duration::from_millis(300);
    let limit = std::time::Duration::from_secs(20);
    assert!(settle(&queue, quiet, limit).await);
    let full = dump(&sb.nb.unix_remote()).await;
    let names = |d: &std::collections::BTreeMap<
        String,
        std::collections::BTreeMap<String, serde_json::Value>,
    >| {
        let mut v: Vec<String> = d
            .iter()
            .flat_map(|(t, rows)| {
                rows.values()
                    .map(move |r| format!("{t} {}", r["external_ids"]))
            })
            .collect();
        v.sort();
        v
    };
    // Someone deletes a port, a route and a whole switch by hand.
    let (deleted, _) = r
        .indexes()
        .named(
            &r.cache().snapshot(),
            "Logical_Switch",
            "cluster_udn_blue_n1",
        )
        .pop()
        .expect("the node switch is there");
    sb.nbctl(&["lsp-del", "cluster_udn_blue_tstor-n2"]).unwrap();
    sb.nbctl(&[
        "lr-route-del",
        "cluster_udn_blue_ovn_cluster_router",
        "100.65.0.2",
    ])
    .unwrap();
    sb.nbctl(&["ls-del", "cluster_udn_blue_n1"]).unwrap();
    // The controller's cache has the deletions (the last one, so the others too: a
    // quiet queue before it does would prove nothing), then the controller settles.
    assert!(
        r.cache()
            .wait_for(limit, |snap| snap.get("Logical_Switch", &deleted).is_none())
            .await
    );
    // The controller learns of the deletions from its cache's events, which a loaded
    // machine may hand it later than a quiet spell of the queue: the rows must come
    // back within the limit, not by the first quiet spell.
    let since = std::time::Instant::now();
    let repaired = loop {
        assert!(settle(&queue, quiet, limit).await);
        let now = dump(&sb.nb.unix_remote()).await;
        if names(&now) == names(&full) || since.elapsed() > limit {
            break now;
        }
    };
    assert_eq!(
        names(&repaired),
        names(&full),
        "the deleted rows came back (the key's last report: {:?})",
        reports
            .lock()
            .unwrap()
            .get(&netconnect::keys::Key::Network("cluster_udn_blue".into()))
    );
    assert!(sb
        .nbctl(&["ls-list"])
        .unwrap()
        .contains("cluster_udn_blue_n1"));
    let report =
        reports.lock().unwrap()[&netconnect::keys::Key::Network("cluster_udn_blue".into())].clone();
    assert!(report.result.is_ok(), "{report:?}");
    running.abort();

    // A new reconciler over the same inputs and NB (a restart) sends nothing.
    let (r2, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    udn::apply(&r2, &world).await;
    assert_eq!(r2.transactions(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_the_cache_has_not_shown_is_never_sent_twice() {
    use integration_tests::udn;
    use netconnect::keys::Key;
    use netconnect::reconcile::ReconcileError;
    let sb = sandbox();
    let yaml = udn::node("n1", "c1", &[]) + &l3("blue", "[{cidr: 10.10.0.0/16}]");
    let world = udn::world(&yaml, &netconnect::status::dir::State::default(), None);
    // The cluster rows first, through a cache that keeps up.
    let (r0, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    netconnect::controller::reconcile_key(&r0, &world, &Key::Cluster)
        .await
        .unwrap();
    // A cache whose event stream is kept and never read stops applying updates once
    // its one-message buffer is full: the network's transaction commits, unseen.
    let mut cc = CacheConfig::new(
        vec![sb.nb.unix_remote().parse().unwrap()],
        "OVN_Northbound",
        &[],
    );
    cc.event_capacity = 1;
    let nb = NbIndexes::register(&mut cc);
    let (cache, events) = Cache::start(cc);
    let cache = Arc::new(cache);
    cache.wait_until_ready().await;
    // Its initial contents fill the buffer; a foreign write's update is applied and
    // then waits for room, and nothing after it is read.
    let switches = cache.snapshot().table("Logical_Switch").len();
    sb.nbctl(&["ls-add", "someone-elses"]).unwrap();
    assert!(
        cache
            .wait_for(Duration::from_secs(10), |s| s.table("Logical_Switch").len()
                == switches + 1)
            .await
    );
    let mut r = Reconciler::new(cache, nb);
    r.wait = Duration::from_secs(2);
    let key = Key::Network("cluster_udn_blue".into());
    let first = netconnect::controller::reconcile_key(&r, &world, &key).await;
    let e = first.unwrap_err().to_string();
    assert!(e.contains("did not show it within"), "{e}");
    assert_eq!(r.transactions(), 1);
    // Planned again from the stale cache, it would insert every row a second time.
    let again = netconnect::controller::reconcile_key(&r, &world, &key).await;
    assert!(
        matches!(again, Err(ReconcileError::Unsettled(_))),
        "{again:?}"
    );
    assert!(again.unwrap_err().is_transient());
    assert_eq!(r.transactions(), 1, "nothing sent while unsettled");
    // Once the cache catches up, the key is already as wanted: nothing to write.
    drop(events);
    let plan = netconnect::controller::reconcile_key(&r, &world, &key)
        .await
        .unwrap();
    assert!(plan.is_empty(), "{plan}");
    assert_eq!(
        r.transactions(),
        1,
        "one transaction in all: no row written twice"
    );
}

/// The cluster key of `world` (being saved) reconciled on a task of its own, found
/// still waiting for the save half a second later.
async fn waiting_for_save(
    r: &Arc<Reconciler>,
    world: &netconnect::world::World,
) -> tokio::task::JoinHandle<
    Result<netconnect::reconcile::Plan, netconnect::reconcile::ReconcileError>,
> {
    let reconciled = {
        let (r, world) = (r.clone(), world.clone());
        tokio::spawn(async move {
            let key = netconnect::keys::Key::Cluster;
            netconnect::controller::reconcile_key(&r, &world, &key).await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!reconciled.is_finished(), "the key waits for the save");
    reconciled
}

/// The save done: the plan of the key `reconciled` [`waiting_for_save`].
async fn once_saved(
    saving: netconnect::world::Saving,
    reconciled: tokio::task::JoinHandle<
        Result<netconnect::reconcile::Plan, netconnect::reconcile::ReconcileError>,
    >,
) -> netconnect::reconcile::Plan {
    drop(saving);
    tokio::time::timeout(Duration::from_secs(10), reconciled)
        .await
        .expect("the key goes on once the save is done")
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_being_saved_writes_nothing_until_its_save_is_done() {
    use integration_tests::udn;
    use netconnect::keys::Key;
    let sb = sandbox();
    let yaml = udn::node("n1", "c1", &[]) + &l3("blue", "[{cidr: 10.10.0.0/16}]");
    let world = udn::world(&yaml, &netconnect::status::dir::State::default(), None);
    let (r, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    // netconnectd serves a world while it saves its allocations: its keys are built
    // meanwhile and written once the save is done.
    let (world, saving) = world.saving();
    let reconciled = waiting_for_save(&r, &world).await;
    assert_eq!(r.transactions(), 0, "nothing sent before the save is done");
    let plan = once_saved(saving, reconciled).await;
    assert!(!plan.inserted.is_empty(), "{plan}");
    assert_eq!(r.transactions(), 1);
    // A world once saved (and a world never gated) waits for nothing.
    let again = tokio::time::timeout(
        Duration::from_secs(10),
        netconnect::controller::reconcile_key(&r, &world, &Key::Cluster),
    )
    .await
    .expect("a saved world's key does not wait")
    .unwrap();
    assert!(again.is_empty(), "{again}");

    // A key planned while its world is saved is planned again if the NB moved
    // meanwhile: a row deleted by hand during the save is put back.
    let (world, saving) =
        udn::world(&yaml, &netconnect::status::dir::State::default(), None).saving();
    let reconciled = waiting_for_save(&r, &world).await;
    let (at, root) = plan
        .inserted
        .iter()
        .enumerate()
        .find(|(_, n)| n.table == "Copp")
        .unwrap_or_else(|| panic!("the cluster rows hold the default COPP: {plan}"));
    let uuid = plan.inserted_uuids[at].to_string();
    sb.nbctl(&["destroy", &root.table, &uuid]).unwrap();
    let table = root.table.clone();
    assert!(
        r.cache()
            .wait_for(Duration::from_secs(10), |s| s
                .get(&table, &plan.inserted_uuids[at])
                .is_none())
            .await,
        "the cache shows the row deleted"
    );
    let put_back = once_saved(saving, reconciled).await;
    assert!(
        put_back.inserted.iter().any(|n| n == root),
        "{root} put back: {put_back}"
    );
}

/// `name` as OVN-Kubernetes' cluster port group of the network whose controller is
/// `controller`, with its owner keys, added with ovn-nbctl.
fn their_port_group(sb: &integration_tests::Sandbox, controller: &str) {
    let name = netconnect::topology::policy_base::port_group_name(controller, "clusterPortGroup");
    let ids = [
        format!("external_ids:k8s.ovn.org/owner-controller={controller}"),
        "external_ids:k8s.ovn.org/owner-type=Cluster".into(),
        "external_ids:k8s.ovn.org/name=clusterPortGroup".into(),
        format!("external_ids:k8s.ovn.org/id={controller}:Cluster:clusterPortGroup"),
    ];
    let mut cmd = vec!["pg-add".to_owned(), name.clone(), "--".into(), "set".into()];
    cmd.extend(["port_group".into(), name]);
    cmd.extend(ids);
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    sb.nbctl(&cmd).unwrap();
}

/// The names of the port groups and the matches of the ACLs `controller` owns.
fn policy_base_of(sb: &integration_tests::Sandbox, controller: &str) -> (String, String) {
    let find = |table: &str, column: &str| {
        sb.nbctl(&[
            "--bare",
            &format!("--columns={column}"),
            "find",
            table,
            &format!("external_ids:k8s.ovn.org/owner-controller={controller}"),
        ])
        .unwrap()
        .split_whitespace()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
        .join(" ")
    };
    (find("port_group", "name"), find("acl", "match"))
}

/// OVN-Kubernetes' cluster port groups and allow-from-node ACLs (reference §2) are the
/// network key's: written with its rows (the management ports in
/// `clusterPortGroup`), left alone on a second pass, gone with the network. The
/// default network's and a network's netconnect does not run are never touched, though
/// they carry the same owner types.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_networks_port_groups_and_node_acls_come_and_go_with_it_and_no_others() {
    use integration_tests::udn;
    let sb = sandbox();
    their_port_group(&sb, "default-network-controller");
    their_port_group(&sb, "cluster_udn_theirs-network-controller");
    let theirs = dump(&sb.nb.unix_remote()).await;
    let dir = tempfile::tempdir().unwrap();
    let (r, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    let nodes = udn::node("n1", "c1", &[]) + &udn::node("n2", "c2", &[]);
    let green = l3("green", "[{cidr: 10.60.0.0/16}]");
    let blue = l3("blue", "[{cidr: 10.1.0.0/16, hostSubnet: 24}]");
    let w = step(&r, dir.path(), &(nodes.clone() + &green + &blue)).await;

    let ctrl = "cluster_udn_blue-network-controller";
    let (groups, acls) = policy_base_of(&sb, ctrl);
    let pg = |n| netconnect::topology::policy_base::port_group_name(ctrl, n);
    let mut want = [pg("clusterPortGroup"), pg("clusterRtrPortGroup")];
    want.sort();
    assert_eq!(groups, want.join(" "));
    let mgmt: Vec<String> = ["n1", "n2"]
        .iter()
        .map(|n| {
            let subnet = w.allocations.host_subnets["cluster_udn_blue"][*n][0];
            format!("ip4.src=={}", subnet.hosts().nth(1).unwrap())
        })
        .collect();
    assert_eq!(acls, mgmt.join(" "), "one ACL per node switch");
    let ports = sb
        .nbctl(&[
            "--bare",
            "--columns=ports",
            "list",
            "port_group",
            &pg("clusterPortGroup"),
        ])
        .unwrap();
    for n in ["n1", "n2"] {
        let port = sb
            .nbctl(&[
                "--bare",
                "--columns=_uuid",
                "find",
                "logical_switch_port",
                &format!("name=k8s-cluster_udn_blue_{n}"),
            ])
            .unwrap();
        assert!(
            ports.contains(port.trim()),
            "{n}'s management port in {ports}"
        );
    }
    let acl = sb
        .nbctl(&[
            "--bare",
            "--columns=acls",
            "list",
            "logical_switch",
            "cluster_udn_blue_n1",
        ])
        .unwrap();
    assert!(!acl.trim().is_empty(), "the ACL is on n1's switch");

    // A second pass writes nothing.
    let t = r.transactions();
    step(&r, dir.path(), &(nodes.clone() + &green + &blue)).await;
    assert_eq!(r.transactions(), t);

    // blue gone: its port groups and ACLs with it; green's and theirs stay.
    step(&r, dir.path(), &(nodes.clone() + &green)).await;
    assert_eq!(policy_base_of(&sb, ctrl), (String::new(), String::new()));
    let (green_groups, _) = policy_base_of(&sb, "cluster_udn_green-network-controller");
    assert_eq!(green_groups.split(' ').count(), 2, "{green_groups}");
    // No network at all: the port groups left are theirs, exactly as they were.
    step(&r, dir.path(), &nodes).await;
    let now = dump(&sb.nb.unix_remote()).await;
    assert_eq!(theirs["Port_Group"].len(), 2);
    assert_eq!(theirs["Port_Group"], now["Port_Group"]);
}
