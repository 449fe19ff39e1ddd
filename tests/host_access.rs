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
//!
//! The same path carries a pod's packets to the default network's services that
//! primary networks may reach (the API server and DNS): netconnect routes their
//! cluster IPs to the management port, and the host (which on a real node hands them
//! to the default network) answers.

use std::net::IpAddr;
use std::time::Duration;

use integration_tests::{sandbox, udn};
use netconnect::ovnk::addr::nth;
use netconnect::topology::masquerade_ip;
use ovn_sandbox::{Answer, Transport};

const NODE_V4: &str = "192.168.126.10";
const NODE_V6: &str = "fd00:126::10";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Node `node-a` on a chassis, [`udn::BLUE_AND_YELLOW`] (and `extra` objects) as
/// netconnect programs them under `settings`, the host's end of each network's
/// management port, and a pod per network at the `.5` of its subnets; `addresses` go
/// on the host's loopback first.
struct NodeA {
    sb: integration_tests::Sandbox,
    chassis: ovn_sandbox::Chassis,
    world: netconnect::world::World,
    r: std::sync::Arc<netconnect::reconcile::Reconciler>,
    nets: [udn::OnNode; 2],
    /// The host's end of the last network's management port (the host is one
    /// namespace: a server there answers on every port).
    host: ovn_sandbox::Pod,
    pods: Vec<ovn_sandbox::Pod>,
}

async fn node_a(
    gateway: &[&str],
    next_hops: &[&str],
    extra: &str,
    settings: netconnect::world::Settings,
    addresses: &[&str],
) -> NodeA {
    let sb = sandbox();
    let mut chassis = ovn_sandbox::Chassis::start(&sb, "chassis-1").unwrap();
    let gw = udn::gateway_config(gateway, next_hops);
    let yaml = udn::BLUE_AND_YELLOW.to_string()
        + &udn::node(
            "node-a",
            "chassis-1",
            &[("k8s.ovn.org/l3-gateway-config", &gw)],
        )
        + extra;
    let world = udn::world_in(&yaml, &netconnect::status::dir::State::default(), settings);
    assert!(world.problems.is_empty(), "{:#?}", world.problems);
    let (r, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    udn::apply(&r, &world).await;
    let nets = udn::blue_and_yellow_on(&world, "node-a");
    for a in addresses {
        chassis.host_ip(&["addr", "add", a, "dev", "lo"]).unwrap();
    }
    let mut host = None;
    for net in &nets {
        host = Some(udn::host_management_port(
            &mut chassis,
            &world,
            net,
            "node-a",
        ));
    }
    let mut pods = Vec::new();
    for net in &nets {
        pods.push(udn::pod_at(
            &sb,
            &mut chassis,
            &net.switch,
            &format!("{}_pod", net.net),
            &net.subnets,
            5,
        ));
    }
    NodeA {
        sb,
        chassis,
        world,
        r,
        nets,
        host: host.unwrap(),
        pods,
    }
}

#[allow(clippy::too_many_lines)] // a test: one story, start to end
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_reach_their_nodes_host_through_the_management_port_and_back() {
    // The node's addresses on the host's loopback, a management port per network with
    // the addresses netconnect gave it in the NB.
    let NodeA {
        sb,
        mut chassis,
        world,
        r,
        nets,
        host,
        pods,
    } = node_a(
        &[&format!("{NODE_V4}/24"), &format!("{NODE_V6}/64")],
        &["192.168.126.1", "fd00:126::1"],
        "",
        Default::default(),
        &[&format!("{NODE_V4}/32"), &format!("{NODE_V6}/128")],
    )
    .await;
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
        let mac = netconnect::ovnk::mac::from_ip(nth(&net.subnets[0], 2).unwrap());
        assert_eq!(words[0], mac, "{}: the management port's MAC", net.net);
    }
    chassis
        .serve_tcp(&host, 8080, "node-a host, from {peer}")
        .unwrap();
    for (net, pod) in nets.iter().zip(&pods) {
        chassis.serve_tcp(pod, 8080, net.net).unwrap();
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

/// The default network's `kube-system/kube-dns` (allowed: routed to the host) and
/// `kube-system/metrics` (not allowed), dual-stack, and a node with a gateway.
fn default_services() -> String {
    let svc = |name: &str, v4: &str, v6: &str| {
        format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: kube-system}}\n\
             spec: {{clusterIP: '{v4}', clusterIPs: ['{v4}', '{v6}'], ipFamilyPolicy: RequireDualStack, \
             ports: [{{name: dns, port: 53, protocol: UDP}}, {{name: dns-tcp, port: 53, protocol: TCP}}]}}\n"
        )
    };
    svc("kube-dns", "10.96.0.10", "fd00:10:96::a") + &svc("metrics", "10.96.0.20", "fd00:10:96::14")
}

#[allow(clippy::too_many_lines)] // a test: one story, start to end
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_reach_the_default_networks_dns_through_their_nodes_host() {
    let mut settings = netconnect::world::Settings::default();
    settings.set_service_cidrs(vec![
        "10.96.0.0/16".parse().unwrap(),
        "fd00:10:96::/112".parse().unwrap(),
    ]);
    // The host answers on both services' cluster IPs: what reaches it tells which
    // were routed to it.
    let NodeA {
        sb,
        mut chassis,
        world,
        r,
        nets,
        host,
        pods,
    } = node_a(
        &[&format!("{NODE_V4}/24")],
        &["192.168.126.1"],
        &default_services(),
        settings,
        &[
            "10.96.0.10/32",
            "10.96.0.20/32",
            "fd00:10:96::a/128",
            "fd00:10:96::14/128",
        ],
    )
    .await;
    chassis
        .serve(
            &host,
            Transport::Udp,
            53,
            "dns on node-a's host, from {peer}",
        )
        .unwrap();
    chassis
        .serve(&host, Transport::Tcp, 53, "dns over tcp, from {peer}")
        .unwrap();
    sb.sync_hv().unwrap();

    let timeout = Duration::from_secs(3);
    let config = &world.settings.topology;
    for (net, pod) in nets.iter().zip(&pods) {
        let id = world.allocations.network_ids[net.net];
        for (v4, dns, metrics) in [
            (true, ip("10.96.0.10"), ip("10.96.0.20")),
            (false, ip("fd00:10:96::a"), ip("fd00:10:96::14")),
        ] {
            let masquerade = masquerade_ip(config, id, v4, false).unwrap();
            let got = chassis
                .request(pod, Transport::Udp, dns, 53, timeout)
                .unwrap();
            assert_eq!(
                got,
                Answer::Reply(format!("dns on node-a's host, from {masquerade}")),
                "{}: a pod reaches kube-dns at {dns} through its node's host",
                net.net
            );
            let got = chassis.tcp_request(pod, dns, 53, timeout).unwrap();
            assert_eq!(
                got,
                Some(format!("dns over tcp, from {masquerade}")),
                "{}: over TCP too",
                net.net
            );
            // A default-network service not on the list is not routed to the host:
            // it goes out through the gateway router, where nobody answers.
            let got = chassis
                .request(pod, Transport::Tcp, metrics, 53, Duration::from_secs(2))
                .unwrap();
            assert_eq!(
                got,
                Answer::Silence,
                "{}: {metrics} is not reached",
                net.net
            );
        }
    }

    // Without the route (deleted by hand), kube-dns is not reached either; netconnect
    // puts it back.
    let routers = [
        "cluster_udn_blue_ovn_cluster_router",
        "cluster_udn_yellow_transit_router",
    ];
    for ((net, pod), router) in nets.iter().zip(&pods).zip(routers) {
        sb.nbctl(&["lr-route-del", router, "10.96.0.10"]).unwrap();
        sb.sync_hv().unwrap();
        let got = chassis
            .request(
                pod,
                Transport::Udp,
                ip("10.96.0.10"),
                53,
                Duration::from_secs(2),
            )
            .unwrap();
        assert_eq!(got, Answer::Silence, "{}: without the route", net.net);
    }
    udn::apply(&r, &world).await;
    sb.sync_hv().unwrap();
    for pod in &pods {
        let got = chassis
            .request(pod, Transport::Udp, ip("10.96.0.10"), 53, timeout)
            .unwrap();
        assert!(
            matches!(&got, Answer::Reply(r) if r.starts_with("dns on node-a's host")),
            "{}: {got:?}",
            pod.iface_id
        );
    }
}
