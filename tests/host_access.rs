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
use netconnect::topology::addr::nth;
use netconnect::topology::masquerade_ip;

const NODE_V4: &str = "192.168.126.10";
const NODE_V6: &str = "fd00:126::10";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_reach_their_nodes_host_through_the_management_port_and_back() {
    let sb = sandbox();
    let mut chassis = ovn_sandbox::Chassis::start(&sb, "chassis-1").unwrap();
    let gw = udn::gateway_config(
        &[&format!("{NODE_V4}/24"), &format!("{NODE_V6}/64")],
        &["192.168.126.1", "fd00:126::1"],
    );
    let yaml = udn::BLUE_AND_YELLOW.to_string()
        + &udn::node(
            "node-a",
            "chassis-1",
            &[("k8s.ovn.org/l3-gateway-config", &gw)],
        );
    let world = udn::world(&yaml, &netconnect::status::dir::State::default(), None);
    let (r, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    udn::apply(&r, &world).await;
    let nets = udn::blue_and_yellow_on(&world, "node-a");

    // The node's addresses on the host's loopback, a management port per network with
    // the addresses netconnect gave it in the NB.
    chassis
        .host_ip(&["addr", "add", &format!("{NODE_V4}/32"), "dev", "lo"])
        .unwrap();
    chassis
        .host_ip(&["addr", "add", &format!("{NODE_V6}/128"), "dev", "lo"])
        .unwrap();
    let mut host = None;
    for net in &nets {
        let name = format!("k8s-{}_node-a", net.net);
        let addresses = sb
            .nbctl(&["--bare", "get", "Logical_Switch_Port", &name, "addresses"])
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
            net.net
        );
        let port = udn::host_management_port(&mut chassis, &world, net, "node-a");
        assert_eq!(words[0], port.mac, "{}: the management port's MAC", net.net);
        host = Some(port);
    }
    let host = host.unwrap();
    chassis
        .serve_tcp(&host, 8080, "node-a host, from {peer}")
        .unwrap();
    let mut pods = Vec::new();
    for net in &nets {
        let pod = udn::pod_at(
            &sb,
            &mut chassis,
            &net.switch,
            &format!("{}_pod", net.net),
            &net.subnets,
            5,
        );
        chassis.serve_tcp(&pod, 8080, net.net).unwrap();
        pods.push(pod);
    }
    sb.sync_hv().unwrap();

    let timeout = Duration::from_secs(3);
    let config = &world.settings.topology;
    for (net, pod) in nets.iter().zip(&pods) {
        // The host sees the network's management-port masquerade address of the
        // family, not the pod's.
        let id = world.allocations.network_ids[net.net];
        for (v4, node_ip) in [(true, ip(NODE_V4)), (false, ip(NODE_V6))] {
            let masquerade = masquerade_ip(config, id, v4, false).unwrap();
            let got = chassis.tcp_request(pod, node_ip, 8080, timeout).unwrap();
            assert_eq!(
                got,
                Some(format!("node-a host, from {masquerade}")),
                "{}: a pod reaches its node's host at {node_ip}",
                net.net
            );
        }
        for pod_ip in &pod.ips {
            let got = chassis
                .tcp_request(&host, pod_ip.addr(), 8080, timeout)
                .unwrap();
            assert_eq!(
                got.as_deref(),
                Some(net.net),
                "{}: the host reaches the pod at {}",
                net.net,
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
            net.net
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
