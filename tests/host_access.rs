//! A pod reaches its node's host through the management port, and the host reaches
//! the pod, over the real datapath (ovs-vswitchd userspace and ovn-controller): Layer3
//! and Layer2, IPv4 and IPv6. The "host" is the chassis' own network namespace, where
//! each network's management port is an OVS internal port (as `ovn-k8s-mpX` on a real
//! node), and the node's addresses are on its loopback. No row is made by hand but the
//! pods' ports.
//!
//! What carries the packets is netconnect's: the 1004 policies rerouting the node's
//! address to the management port, the management port itself, and the SNAT to the
//! network's masquerade address of what leaves toward it; the host sees the masquerade
//! address as the source and answers it through the management port.

use std::net::IpAddr;
use std::time::Duration;

use integration_tests::{sandbox, udn};
use ipnet::IpNet;
use netconnect::topology::addr::nth;

const NODE_V4: &str = "192.168.126.10";
const NODE_V6: &str = "fd00:126::10";

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

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// The `n`-th address of `subnet` with the subnet's prefix length.
fn nth_net(subnet: &IpNet, n: u128) -> IpNet {
    IpNet::new(nth(subnet, n).unwrap(), subnet.prefix_len()).unwrap()
}

/// One network as the test uses it: its subnets on the node (host subnets for
/// Layer3, the network's for Layer2), the switch pods go on, its management port.
struct Net {
    name: &'static str,
    subnets: Vec<IpNet>,
    switch: String,
    management_port: String,
    /// The management port's masquerade address of each family.
    masquerade: Vec<IpAddr>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_reach_their_nodes_host_through_the_management_port_and_back() {
    let sb = sandbox();
    let mut chassis = ovn_sandbox::Chassis::start(&sb, "chassis-1").unwrap();
    let gw = udn::gateway_config(
        &[&format!("{NODE_V4}/24"), &format!("{NODE_V6}/64")],
        &["192.168.126.1", "fd00:126::1"],
    );
    let yaml = NETWORKS.to_string()
        + &udn::node(
            "node-a",
            "chassis-1",
            &[("k8s.ovn.org/l3-gateway-config", &gw)],
        );
    let world = udn::world(&yaml, &netconnect::status::dir::State::default(), None);
    let (r, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    udn::apply(&r, &world).await;

    let alloc = &world.allocations;
    let config = netconnect::topology::TopologyConfig::default();
    let masquerade = |net: &str| -> Vec<IpAddr> {
        let id = alloc.network_ids[net];
        [true, false]
            .into_iter()
            .filter_map(|v4| netconnect::topology::masquerade_ip(&config, id, v4, false))
            .collect()
    };
    let nets = [
        Net {
            name: "cluster_udn_blue",
            subnets: alloc.host_subnets["cluster_udn_blue"]["node-a"].clone(),
            switch: "cluster_udn_blue_node-a".into(),
            management_port: "k8s-cluster_udn_blue_node-a".into(),
            masquerade: masquerade("cluster_udn_blue"),
        },
        Net {
            name: "cluster_udn_yellow",
            subnets: vec![
                "10.20.0.0/16".parse().unwrap(),
                "fd20::/64".parse().unwrap(),
            ],
            switch: "cluster_udn_yellow_ovn_layer2_switch".into(),
            management_port: "k8s-cluster_udn_yellow_node-a".into(),
            masquerade: masquerade("cluster_udn_yellow"),
        },
    ];

    // The node's addresses, and its management ports with the addresses netconnect
    // gave them in the NB; the host routes each network's masquerade addresses back
    // out of that network's management port.
    chassis
        .host_ip(&["addr", "add", &format!("{NODE_V4}/32"), "dev", "lo"])
        .unwrap();
    chassis
        .host_ip(&["addr", "add", &format!("{NODE_V6}/128"), "dev", "lo"])
        .unwrap();
    let mut hosts = Vec::new();
    for net in &nets {
        let addresses = sb
            .nbctl(&[
                "--bare",
                "get",
                "Logical_Switch_Port",
                &net.management_port,
                "addresses",
            ])
            .unwrap();
        let words: Vec<&str> = addresses
            .trim()
            .trim_matches(|c| c == '[' || c == ']' || c == '"')
            .split(' ')
            .collect();
        let want: Vec<String> = net
            .subnets
            .iter()
            .map(|s| nth(s, 2).unwrap().to_string())
            .collect();
        assert_eq!(
            &words[1..],
            want,
            "{}: the management port's addresses",
            net.name
        );
        let ips: Vec<IpNet> = net.subnets.iter().map(|s| nth_net(s, 2)).collect();
        let host = chassis
            .add_management_port(&net.management_port, words[0], &ips)
            .unwrap();
        for m in &net.masquerade {
            chassis
                .host_ip(&["route", "add", &m.to_string(), "dev", &host.host_veth])
                .unwrap();
        }
        hosts.push(host);
    }
    let host = hosts[0].clone();
    chassis
        .serve_tcp(&host, 8080, "node-a host, from {peer}")
        .unwrap();

    let mut pods = Vec::new();
    for net in &nets {
        let addresses: Vec<String> = net
            .subnets
            .iter()
            .map(|s| nth_net(s, 5).to_string())
            .collect();
        let gateways: Vec<String> = net
            .subnets
            .iter()
            .map(|s| nth(s, 1).unwrap().to_string())
            .collect();
        let pod = udn::add_pod(
            &sb,
            &mut chassis,
            &net.switch,
            &format!("{}_pod", net.name),
            &addresses.iter().map(String::as_str).collect::<Vec<_>>(),
            &gateways.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        chassis.serve_tcp(&pod, 8080, net.name).unwrap();
        pods.push(pod);
    }
    sb.sync_hv().unwrap();

    let timeout = Duration::from_secs(3);
    for (net, pod) in nets.iter().zip(&pods) {
        // The host sees the network's masquerade address of the family, not the pod's.
        for (node_ip, masquerade) in [ip(NODE_V4), ip(NODE_V6)].into_iter().zip(&net.masquerade) {
            let got = chassis.tcp_request(pod, node_ip, 8080, timeout).unwrap();
            assert_eq!(
                got,
                Some(format!("node-a host, from {masquerade}")),
                "{}: a pod reaches its node's host at {node_ip}",
                net.name
            );
        }
        for pod_ip in &pod.ips {
            let got = chassis
                .tcp_request(&host, pod_ip.addr(), 8080, timeout)
                .unwrap();
            assert_eq!(
                got.as_deref(),
                Some(net.name),
                "{}: the host reaches the pod at {}",
                net.name,
                pod_ip.addr()
            );
        }
    }

    // Without the 1004 reroutes (deleted by hand), the node's address is the gateway
    // router's, which answers no TCP: nothing reaches the host. netconnect puts them
    // back and the host answers again.
    let routers = [
        "cluster_udn_blue_ovn_cluster_router",
        "cluster_udn_yellow_transit_router",
    ];
    for ((net, pod), router) in nets.iter().zip(&pods).zip(routers) {
        sb.nbctl(&["lr-policy-del", router, "1004"]).unwrap();
        sb.sync_hv().unwrap();
        let got = chassis
            .tcp_request(pod, ip(NODE_V4), 8080, Duration::from_secs(2))
            .unwrap();
        assert_eq!(
            got, None,
            "{}: without the reroute the host is not reached",
            net.name
        );
    }
    udn::apply(&r, &world).await;
    sb.sync_hv().unwrap();
    for pod in &pods {
        let got = chassis
            .tcp_request(pod, ip(NODE_V4), 8080, timeout)
            .unwrap();
        assert!(
            got.is_some_and(|g| g.starts_with("node-a host")),
            "{}",
            pod.iface_id
        );
    }
}
