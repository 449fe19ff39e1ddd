//! A pod's traffic leaves its network over the real datapath, Layer3 and Layer2, IPv4
//! and IPv6, in both gateway modes. The node's gateway bridge is set up as
//! ovnkube-node sets it up (`Chassis::add_gateway_bridge`: mapped as `physnet`, a
//! learning switch to an "external" host), and everything OVN does comes from
//! netconnect's rows.
//!
//! - Shared gateway mode: the source route to the gateway router, its SNAT to the
//!   network's masquerade address, its default route via the node's next hop, its
//!   external switch and localnet port; the bridge SNATs the masquerade address to the
//!   node's (`Chassis::snat_to_node`), so the external host sees the node's address.
//! - Local gateway mode: the source route to the management port and the SNAT of what
//!   goes there; the host (`Chassis::route_via_host`) routes the packet out and
//!   masquerades it to the node's address. Its masquerading counter shows the path.

use std::net::IpAddr;
use std::time::Duration;

use integration_tests::{sandbox, udn};
use ipnet::IpNet;
use netconnect::status::dir::State;
use netconnect::topology::addr::nth;
use netconnect::topology::{masquerade_ip, TopologyConfig};

const NETWORKS: &str = r#"
apiVersion: k8s.ovn.org/v1
kind: ClusterUserDefinedNetwork
metadata: {name: blue}
spec:
  namespaceSelector: {}
  network:
    topology: Layer3
    layer3:
      role: Primary
      subnets: [{cidr: 10.10.0.0/16, hostSubnet: 24}, {cidr: "fd10::/48", hostSubnet: 64}]
---
apiVersion: k8s.ovn.org/v1
kind: ClusterUserDefinedNetwork
metadata: {name: yellow}
spec:
  namespaceSelector: {}
  network:
    topology: Layer2
    layer2: {role: Primary, subnets: [10.20.0.0/16, "fd20::/64"]}
"#;

const NODE: [&str; 2] = ["192.168.126.10", "fd00:126::10"];
const EXTERNAL: [&str; 2] = ["192.168.126.1", "fd00:126::1"];

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_reach_an_external_host_through_the_gateway_router_from_the_node_address() {
    let sb = sandbox();
    let mut chassis = ovn_sandbox::Chassis::start(&sb, "chassis-1").unwrap();
    let gw = udn::gateway_config(
        &[&format!("{}/24", NODE[0]), &format!("{}/64", NODE[1])],
        &EXTERNAL,
    );
    let yaml = NETWORKS.to_string()
        + &udn::node(
            "node-a",
            "chassis-1",
            &[("k8s.ovn.org/l3-gateway-config", &gw)],
        );
    let world = udn::world(&yaml, &State::default(), None);
    let (r, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    udn::apply(&r, &world).await;

    let external = chassis
        .add_gateway_bridge(
            "physnet",
            &[
                format!("{}/24", EXTERNAL[0]).parse().unwrap(),
                format!("{}/64", EXTERNAL[1]).parse().unwrap(),
            ],
            &[],
        )
        .unwrap();
    chassis
        .serve_tcp(&external, 8080, "external, from {peer}")
        .unwrap();

    let config = TopologyConfig::default();
    let alloc = &world.allocations;
    let blue: Vec<IpNet> = alloc.host_subnets["cluster_udn_blue"]["node-a"].clone();
    let yellow: Vec<IpNet> = vec![
        "10.20.0.0/16".parse().unwrap(),
        "fd20::/64".parse().unwrap(),
    ];
    let nets = [
        ("cluster_udn_blue", blue, "cluster_udn_blue_node-a"),
        (
            "cluster_udn_yellow",
            yellow,
            "cluster_udn_yellow_ovn_layer2_switch",
        ),
    ];
    let mut pods = Vec::new();
    for (net, subnets, switch) in &nets {
        // ovnkube-node's SNAT of the network's gateway-router masquerade address.
        let id = alloc.network_ids[*net];
        for (v4, node_ip) in [(true, NODE[0]), (false, NODE[1])] {
            let masquerade = masquerade_ip(&config, id, v4, true).unwrap();
            chassis
                .snat_to_node(&format!("breth0_{net}_node-a"), masquerade, ip(node_ip))
                .unwrap();
        }
        let addresses: Vec<String> = subnets
            .iter()
            .map(|s| {
                IpNet::new(nth(s, 5).unwrap(), s.prefix_len())
                    .unwrap()
                    .to_string()
            })
            .collect();
        let gateways: Vec<String> = subnets
            .iter()
            .map(|s| nth(s, 1).unwrap().to_string())
            .collect();
        pods.push(udn::add_pod(
            &sb,
            &mut chassis,
            switch,
            &format!("{net}_pod"),
            &addresses.iter().map(String::as_str).collect::<Vec<_>>(),
            &gateways.iter().map(String::as_str).collect::<Vec<_>>(),
        ));
    }
    sb.sync_hv().unwrap();

    let t = Duration::from_secs(3);
    for ((net, _, _), pod) in nets.iter().zip(&pods) {
        for (to, node_ip) in EXTERNAL.iter().zip(NODE) {
            let got = chassis.tcp_request(pod, ip(to), 8080, t).unwrap();
            assert_eq!(
                got,
                Some(format!("external, from {node_ip}")),
                "{net}: a pod reaches {to}, seen from the node's address"
            );
        }
    }

    // Without the gateway router's SNAT (deleted by hand) the packets leave from the
    // pods' own addresses, which the node's bridge does not NAT and the external host
    // cannot answer: nothing comes back. netconnect restores the SNAT.
    for (net, _, _) in &nets {
        let gr = format!("GR_{}node-a", netconnect::topology::names::prefix(net));
        sb.nbctl(&["--if-exists", "lr-nat-del", &gr, "snat"])
            .unwrap();
    }
    sb.sync_hv().unwrap();
    for pod in &pods {
        let got = chassis.tcp_request(pod, ip(EXTERNAL[0]), 8080, t).unwrap();
        assert_eq!(got, None, "{}: no SNAT, no answer", pod.iface_id);
    }
    udn::apply(&r, &world).await;
    sb.sync_hv().unwrap();
    for pod in &pods {
        let got = chassis.tcp_request(pod, ip(EXTERNAL[0]), 8080, t).unwrap();
        assert_eq!(
            got,
            Some(format!("external, from {}", NODE[0])),
            "{}: the SNAT is back",
            pod.iface_id
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_local_gateway_mode_pods_leave_through_the_management_port_and_the_host() {
    use netconnect::api::load::parse_file;
    use netconnect::topology::GatewayMode;
    use netconnect::world::{Settings, World};
    let sb = sandbox();
    let mut chassis = ovn_sandbox::Chassis::start(&sb, "chassis-1").unwrap();
    let node_nets: Vec<IpNet> = vec![
        format!("{}/24", NODE[0]).parse().unwrap(),
        format!("{}/64", NODE[1]).parse().unwrap(),
    ];
    let gw = udn::gateway_config(
        &[&node_nets[0].to_string(), &node_nets[1].to_string()],
        &EXTERNAL,
    );
    let yaml = NETWORKS.to_string()
        + &udn::node(
            "node-a",
            "chassis-1",
            &[("k8s.ovn.org/l3-gateway-config", &gw)],
        );
    let mut settings = Settings::default();
    settings.topology.gateway_mode = GatewayMode::Local;
    let world = World::build(
        &[parse_file(std::path::Path::new("m.yaml"), &yaml)],
        &State::default(),
        settings,
    );
    assert!(world.problems.is_empty(), "{:?}", world.problems);
    let (r, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    udn::apply(&r, &world).await;

    // The node as ovnkube-node sets it up in local gateway mode: its addresses on the
    // gateway bridge's interface, a management port per network with the network's
    // masquerade addresses routed back through it. No SNAT on the bridge: a packet
    // the gateway router sent would leave from a masquerade address nobody answers.
    let external = chassis
        .add_gateway_bridge(
            "physnet",
            &[
                format!("{}/24", EXTERNAL[0]).parse().unwrap(),
                format!("{}/64", EXTERNAL[1]).parse().unwrap(),
            ],
            &[],
        )
        .unwrap();
    let node_mac = netconnect::topology::mac::from_ip(ip(NODE[0]));
    chassis.route_via_host(&node_nets, &node_mac).unwrap();
    chassis
        .serve_tcp(&external, 8080, "external, from {peer}")
        .unwrap();
    let config = TopologyConfig::default();
    let alloc = &world.allocations;
    let nets = [
        (
            "cluster_udn_blue",
            alloc.host_subnets["cluster_udn_blue"]["node-a"].clone(),
            "cluster_udn_blue_node-a",
        ),
        (
            "cluster_udn_yellow",
            vec![
                "10.20.0.0/16".parse().unwrap(),
                "fd20::/64".parse().unwrap(),
            ],
            "cluster_udn_yellow_ovn_layer2_switch",
        ),
    ];
    let mut pods = Vec::new();
    for (net, subnets, switch) in &nets {
        let mgmt: Vec<IpNet> = subnets
            .iter()
            .map(|s| IpNet::new(nth(s, 2).unwrap(), s.prefix_len()).unwrap())
            .collect();
        let mac = netconnect::topology::mac::from_ip(mgmt[0].addr());
        let port = chassis
            .add_management_port(&format!("k8s-{net}_node-a"), &mac, &mgmt)
            .unwrap();
        let id = alloc.network_ids[*net];
        for v4 in [true, false] {
            let m = masquerade_ip(&config, id, v4, false).unwrap();
            chassis
                .host_ip(&["route", "add", &m.to_string(), "dev", &port.host_veth])
                .unwrap();
        }
        let addresses: Vec<String> = subnets
            .iter()
            .map(|s| {
                IpNet::new(nth(s, 5).unwrap(), s.prefix_len())
                    .unwrap()
                    .to_string()
            })
            .collect();
        let gateways: Vec<String> = subnets
            .iter()
            .map(|s| nth(s, 1).unwrap().to_string())
            .collect();
        pods.push(udn::add_pod(
            &sb,
            &mut chassis,
            switch,
            &format!("{net}_pod"),
            &addresses.iter().map(String::as_str).collect::<Vec<_>>(),
            &gateways.iter().map(String::as_str).collect::<Vec<_>>(),
        ));
    }
    sb.sync_hv().unwrap();

    let t = Duration::from_secs(3);
    for ((net, _, _), pod) in nets.iter().zip(&pods) {
        for (v4, (to, node_ip)) in [true, false].into_iter().zip(EXTERNAL.iter().zip(NODE)) {
            let before = chassis.host_masqueraded(v4).unwrap();
            let got = chassis.tcp_request(pod, ip(to), 8080, t).unwrap();
            assert_eq!(
                got,
                Some(format!("external, from {node_ip}")),
                "{net}: a pod reaches {to} through its node's host"
            );
            assert!(
                chassis.host_masqueraded(v4).unwrap() > before,
                "{net}: the host routed the request to {to}"
            );
        }
    }

    // Without the source routes to the management port (deleted by hand) the pods'
    // packets have no route out: nothing reaches the host or the external host.
    // netconnect restores them.
    let routes = [
        (
            "cluster_udn_blue_ovn_cluster_router",
            nets[0].1[0].to_string(),
        ),
        (
            "cluster_udn_yellow_transit_router",
            "10.20.0.0/16".to_string(),
        ),
    ];
    for (router, prefix) in &routes {
        sb.nbctl(&["lr-route-del", router, prefix]).unwrap();
    }
    sb.sync_hv().unwrap();
    for pod in &pods {
        let before = chassis.host_masqueraded(true).unwrap();
        let got = chassis.tcp_request(pod, ip(EXTERNAL[0]), 8080, t).unwrap();
        assert_eq!(got, None, "{}: no route out, no answer", pod.iface_id);
        assert_eq!(chassis.host_masqueraded(true).unwrap(), before);
    }
    udn::apply(&r, &world).await;
    sb.sync_hv().unwrap();
    for pod in &pods {
        let got = chassis.tcp_request(pod, ip(EXTERNAL[0]), 8080, t).unwrap();
        assert_eq!(
            got,
            Some(format!("external, from {}", NODE[0])),
            "{}: the route is back",
            pod.iface_id
        );
    }
}
