//! ClusterNetworkConnect (OKEP-5224) written by netconnect into a real NB: the rows
//! checked against the reference's names, addresses and keys, accepted by ovn-northd,
//! and pods pinging across connected networks over a real datapath (and not across
//! networks no CNC connects).

use integration_tests::sandbox;
use integration_tests::udn::{self, add_pod};
use netconnect::state::State;

/// A namespace, labelled with its own name (as Kubernetes does).
fn namespace(name: &str) -> String {
    format!("---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}, labels: {{kubernetes.io/metadata.name: {name}}}}}\n")
}

/// A primary Layer3 ClusterUserDefinedNetwork for namespace `ns`.
fn cudn_l3(name: &str, ns: &str, subnets: &str, labels: &str) -> String {
    format!(
        "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {{name: {name}, labels: {{{labels}}}}}\n\
         spec:\n  namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: {ns}}}}}\n  network:\n    topology: Layer3\n    layer3:\n      role: Primary\n      subnets: {subnets}\n"
    )
}

/// A primary Layer3 UserDefinedNetwork in namespace `ns`.
fn udn_l3(name: &str, ns: &str, subnets: &str) -> String {
    format!(
        "---\napiVersion: k8s.ovn.org/v1\nkind: UserDefinedNetwork\nmetadata: {{name: {name}, namespace: {ns}}}\n\
         spec:\n  topology: Layer3\n  layer3:\n    role: Primary\n    subnets: {subnets}\n"
    )
}

/// The OKEP's example: blue and green (CUDNs labelled `connect: colored`) and yellow
/// (a namespace's primary UDN) connected by `colored-enterprise`; red is connected to
/// nothing.
fn okep_layer3() -> String {
    let mut s = String::new();
    for ns in ["blue", "green", "yellow", "red"] {
        s += &namespace(ns);
    }
    s += &cudn_l3(
        "blue-network",
        "blue",
        "[{cidr: 103.103.0.0/16, hostSubnet: 24}]",
        "connect: colored",
    );
    s += &cudn_l3(
        "green-network",
        "green",
        "[{cidr: 104.104.0.0/16, hostSubnet: 24}]",
        "connect: colored",
    );
    s += &cudn_l3(
        "red-network",
        "red",
        "[{cidr: 106.106.0.0/16, hostSubnet: 24}]",
        "",
    );
    s += &udn_l3(
        "yellow-network",
        "yellow",
        "[{cidr: 105.105.0.0/16, hostSubnet: 24}]",
    );
    s += r#"---
apiVersion: k8s.ovn.org/v1
kind: ClusterNetworkConnect
metadata: {name: colored-enterprise}
spec:
  networkSelectors:
  - networkSelectionType: ClusterUserDefinedNetworks
    clusterUserDefinedNetworkSelector:
      networkSelector: {matchLabels: {connect: colored}}
  - networkSelectionType: PrimaryUserDefinedNetworks
    primaryUserDefinedNetworkSelector:
      namespaceSelector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: In, values: [yellow]}]}
  connectSubnets: [{cidr: 192.168.0.0/16, networkPrefix: 24}]
  connectivity: [PodNetwork]
"#;
    for n in ["node-a", "node-b", "node-c"] {
        s += &udn::node(n, "chassis-1", &[]);
    }
    s
}

fn nbctl_get(sb: &integration_tests::Sandbox, args: &[&str]) -> String {
    sb.nbctl(args).unwrap().trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn okep_layer3_example_rows_follow_the_reference_and_pods_ping_only_where_connected() {
    let sb = sandbox();
    let mut chassis = ovn_sandbox::Chassis::start(&sb, "chassis-1").unwrap();
    let world = udn::world(&okep_layer3(), &State::default(), None);
    let (r, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    udn::apply(&r, &world).await;

    // Cluster manager: ids in name order (blue 1, green 2, red 3, yellow 4), the first
    // shared tunnel key, connect subnets in network id order.
    let c = &world.allocations.connects["colored-enterprise"];
    assert_eq!(c.accepted, Ok(()));
    assert_eq!(c.tunnel_key, Some(16_715_779));
    let subnets: Vec<(String, String)> = c
        .subnets
        .iter()
        .map(|(o, s)| (o.clone(), s[0].to_string()))
        .collect();
    assert_eq!(
        subnets,
        [
            ("layer3_1".to_string(), "192.168.0.0/24".to_string()),
            ("layer3_2".into(), "192.168.1.0/24".into()),
            ("layer3_4".into(), "192.168.2.0/24".into()),
        ]
    );

    // Zone: the connect router, its ports (node-a has id 2: pair .4/.5, key 0·256+2+1),
    // the peer on blue's router, the policies and routes.
    let router = "connect_router_colored-enterprise";
    assert_eq!(
        nbctl_get(
            &sb,
            &["get", "Logical_Router", router, "options:requested-tnl-key"]
        ),
        "\"16715779\""
    );
    let crtor = "crtor-colored-enterprise_cluster_udn_blue-network_node-a";
    let rtocr = "rtocr-cluster_udn_blue-network_node-a_colored-enterprise";
    assert_eq!(
        nbctl_get(&sb, &["get", "Logical_Router_Port", crtor, "networks", "mac", "peer", "options"]),
        "[\"192.168.0.4/31\"]\n\"0a:58:c0:a8:00:04\"\nrtocr-cluster_udn_blue-network_node-a_colored-enterprise\n{requested-tnl-key=\"3\"}"
    );
    assert_eq!(
        nbctl_get(&sb, &["get", "Logical_Router_Port", rtocr, "networks", "peer", "external_ids"]),
        "[\"192.168.0.5/31\"]\ncrtor-colored-enterprise_cluster_udn_blue-network_node-a\n\
         {\"k8s.ovn.org/id\"=\"ovnkube-network-connect-controller:ClusterNetworkConnect:colored-enterprise:1:2:cluster_udn_blue.network_ovn_cluster_router\", \
         \"k8s.ovn.org/name\"=colored-enterprise, \"k8s.ovn.org/owner-controller\"=ovnkube-network-connect-controller, \
         \"k8s.ovn.org/owner-type\"=ClusterNetworkConnect, network-id=\"1\", node-id=\"2\", router-name=cluster_udn_blue.network_ovn_cluster_router}"
    );
    let blue_ports = nbctl_get(
        &sb,
        &["lrp-list", "cluster_udn_blue.network_ovn_cluster_router"],
    );
    assert!(blue_ports.contains(rtocr), "{blue_ports}");
    let ports = nbctl_get(&sb, &["lrp-list", router]);
    assert_eq!(ports.lines().count(), 9, "3 networks × 3 nodes: {ports}");
    let policies = nbctl_get(
        &sb,
        &[
            "lr-policy-list",
            "cluster_udn_blue.network_ovn_cluster_router",
        ],
    );
    assert!(
        policies.contains("9001 inport == \"rtos-cluster_udn_blue.network_node-a\" && ip4.dst == 104.104.0.0/16         reroute               192.168.0.4"),
        "{policies}"
    );
    assert!(
        !policies.contains("106.106"),
        "red is not connected: {policies}"
    );
    let routes = nbctl_get(&sb, &["lr-route-list", router]);
    let blue_a = &world.allocations.host_subnets["cluster_udn_blue-network"]["node-a"][0];
    assert!(
        routes.contains(&format!("{blue_a}")) && routes.contains("192.168.0.5"),
        "{routes}"
    );
    assert_eq!(
        routes.lines().filter(|l| l.contains("dst-ip")).count(),
        9,
        "{routes}"
    );

    // northd binds the ports with the requested keys.
    sb.sync().unwrap();
    assert_eq!(
        sb.sbctl(&[
            "--bare",
            "--columns",
            "tunnel_key",
            "find",
            "Port_Binding",
            &format!("logical_port={crtor}")
        ])
        .unwrap()
        .trim(),
        "3"
    );

    // A second pass writes nothing.
    let before = r.transactions();
    udn::apply(&r, &world).await;
    assert_eq!(
        r.transactions(),
        before,
        "a second pass sends no transaction"
    );

    // Packets: pods of blue, green, yellow and red, on different nodes.
    let pod = |net: &str, prefix: &str, node: &str, chassis: &mut ovn_sandbox::Chassis| {
        let s = &world.allocations.host_subnets[net][node][0];
        let ip = netconnect::topology::addr::nth(s, 5).unwrap().to_string();
        let gw = netconnect::topology::addr::nth(s, 1).unwrap().to_string();
        let p = add_pod(
            &sb,
            chassis,
            &format!("{prefix}{node}"),
            &format!("{prefix}pod-{node}"),
            &[&format!("{ip}/24")],
            &[&gw],
        );
        (p, ip.parse::<std::net::IpAddr>().unwrap())
    };
    let (blue, blue_ip) = pod(
        "cluster_udn_blue-network",
        "cluster_udn_blue.network_",
        "node-a",
        &mut chassis,
    );
    let (green, green_ip) = pod(
        "cluster_udn_green-network",
        "cluster_udn_green.network_",
        "node-b",
        &mut chassis,
    );
    let (_yellow, yellow_ip) = pod(
        "yellow_yellow-network",
        "yellow_yellow.network_",
        "node-c",
        &mut chassis,
    );
    let (red, red_ip) = pod(
        "cluster_udn_red-network",
        "cluster_udn_red.network_",
        "node-b",
        &mut chassis,
    );
    sb.sync_hv().unwrap();
    assert!(
        chassis.ping(&blue, green_ip, 3).unwrap(),
        "blue (node-a) to green (node-b)"
    );
    assert!(chassis.ping(&green, blue_ip, 3).unwrap(), "green to blue");
    assert!(
        chassis.ping(&blue, yellow_ip, 3).unwrap(),
        "blue to yellow (node-c)"
    );
    assert!(
        !chassis.ping(&blue, red_ip, 2).unwrap(),
        "blue cannot reach red"
    );
    assert!(
        !chassis.ping(&red, green_ip, 2).unwrap(),
        "red cannot reach green"
    );
}
