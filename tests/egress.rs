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
use netconnect::api::load::parse_file;
use netconnect::status::dir::State;
use netconnect::topology::{masquerade_ip, GatewayMode};
use netconnect::world::{Settings, World};

const NODE: [&str; 2] = ["192.168.126.10", "fd00:126::10"];
const EXTERNAL: [&str; 2] = ["192.168.126.1", "fd00:126::1"];

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn nets(addresses: [&str; 2], len: [u8; 2]) -> Vec<IpNet> {
    addresses
        .iter()
        .zip(len)
        .map(|(a, l)| IpNet::new(ip(a), l).unwrap())
        .collect()
}

/// Blue and yellow on node-a, whose gateway has the node's addresses, in `mode`,
/// programmed into `sb`'s NB; the gateway bridge with the external host serving TCP
/// on 8080 (its reply names the peer); a pod of each network.
async fn setup(
    sb: &ovn_sandbox::Sandbox,
    chassis: &mut ovn_sandbox::Chassis,
    mode: GatewayMode,
) -> (
    World,
    std::sync::Arc<netconnect::reconcile::Reconciler>,
    [udn::OnNode; 2],
    Vec<ovn_sandbox::Pod>,
) {
    let node = nets(NODE, [24, 64]);
    let gw = udn::gateway_config(&[&node[0].to_string(), &node[1].to_string()], &EXTERNAL);
    let yaml = udn::BLUE_AND_YELLOW.to_string()
        + &udn::node(
            "node-a",
            "chassis-1",
            &[("k8s.ovn.org/l3-gateway-config", &gw)],
        );
    let mut settings = Settings::default();
    settings.topology.gateway_mode = mode;
    let world = World::build(
        &[parse_file(std::path::Path::new("m.yaml"), &yaml)],
        &State::default(),
        settings,
    );
    assert!(world.problems.is_empty(), "{:?}", world.problems);
    let (r, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    udn::apply(&r, &world).await;
    let external = chassis
        .add_gateway_bridge("physnet", &nets(EXTERNAL, [24, 64]), &[])
        .unwrap();
    chassis
        .serve_tcp(&external, 8080, "external, from {peer}")
        .unwrap();
    let on = udn::blue_and_yellow_on(&world, "node-a");
    let pods = on
        .iter()
        .map(|n| {
            udn::pod_at(
                sb,
                chassis,
                &n.switch,
                &format!("{}_pod", n.net),
                &n.subnets,
                5,
            )
        })
        .collect();
    (world, r, on, pods)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_reach_an_external_host_through_the_gateway_router_from_the_node_address() {
    let sb = sandbox();
    let mut chassis = ovn_sandbox::Chassis::start(&sb, "chassis-1").unwrap();
    let (world, r, on, pods) = setup(&sb, &mut chassis, GatewayMode::Shared).await;
    // ovnkube-node's SNAT of each network's gateway-router masquerade address.
    for n in &on {
        let id = world.allocations.network_ids[n.net];
        for (v4, node_ip) in [(true, NODE[0]), (false, NODE[1])] {
            let masquerade = masquerade_ip(&world.settings.topology, id, v4, true).unwrap();
            chassis
                .snat_to_node(&format!("breth0_{}_node-a", n.net), masquerade, ip(node_ip))
                .unwrap();
        }
    }
    sb.sync_hv().unwrap();

    let t = Duration::from_secs(3);
    for (n, pod) in on.iter().zip(&pods) {
        for (to, node_ip) in EXTERNAL.iter().zip(NODE) {
            let got = chassis.tcp_request(pod, ip(to), 8080, t).unwrap();
            assert_eq!(
                got,
                Some(format!("external, from {node_ip}")),
                "{}: a pod reaches {to}, seen from the node's address",
                n.net
            );
        }
    }

    // Without the gateway router's SNAT (deleted by hand) the packets leave from the
    // pods' own addresses, which the node's bridge does not NAT and the external host
    // cannot answer: nothing comes back. netconnect restores the SNAT.
    for n in &on {
        let gr = format!("GR_{}node-a", netconnect::ovnk::names::prefix(n.net));
        sb.nbctl(&["--if-exists", "lr-nat-del", &gr, "snat"])
            .unwrap();
    }
    expect_out_and_back(&sb, &chassis, &r, &world, &pods, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_local_gateway_mode_pods_leave_through_the_management_port_and_the_host() {
    let sb = sandbox();
    let mut chassis = ovn_sandbox::Chassis::start(&sb, "chassis-1").unwrap();
    let (world, r, on, pods) = setup(&sb, &mut chassis, GatewayMode::Local).await;
    // The node as ovnkube-node sets it up in local gateway mode: its addresses on the
    // gateway bridge's interface, a management port per network. No SNAT on the
    // bridge: a packet the gateway router sent would leave from a masquerade address
    // nobody answers.
    let node_mac = netconnect::ovnk::mac::from_ip(ip(NODE[0]));
    chassis
        .route_via_host(&nets(NODE, [24, 64]), &node_mac)
        .unwrap();
    for n in &on {
        udn::host_management_port(&mut chassis, &world, n, "node-a");
    }
    sb.sync_hv().unwrap();

    let t = Duration::from_secs(3);
    for (n, pod) in on.iter().zip(&pods) {
        for (v4, (to, node_ip)) in [true, false].into_iter().zip(EXTERNAL.iter().zip(NODE)) {
            let before = chassis.host_masqueraded(v4).unwrap();
            let got = chassis.tcp_request(pod, ip(to), 8080, t).unwrap();
            assert_eq!(
                got,
                Some(format!("external, from {node_ip}")),
                "{}: a pod reaches {to} through its node's host",
                n.net
            );
            assert!(
                chassis.host_masqueraded(v4).unwrap() > before,
                "{}: the host routed the request to {to}",
                n.net
            );
        }
    }

    // Without the source routes to the management port (deleted by hand) the pods'
    // packets have no route out: nothing reaches the host or the external host.
    // netconnect restores them.
    sb.nbctl(&[
        "lr-route-del",
        "cluster_udn_blue_ovn_cluster_router",
        &on[0].subnets[0].to_string(),
    ])
    .unwrap();
    sb.nbctl(&[
        "lr-route-del",
        "cluster_udn_yellow_transit_router",
        "10.20.0.0/16",
    ])
    .unwrap();
    let masqueraded = || chassis.host_masqueraded(true).unwrap();
    expect_out_and_back(&sb, &chassis, &r, &world, &pods, Some(&masqueraded)).await;
}

/// With a row deleted by hand, no pod of `pods` reaches the external host (and
/// `count`, if given, does not move); once `r` reconciles `world` again, every pod does, seen
/// from the node's address.
async fn expect_out_and_back(
    sb: &ovn_sandbox::Sandbox,
    chassis: &ovn_sandbox::Chassis,
    r: &netconnect::reconcile::Reconciler,
    world: &World,
    pods: &[ovn_sandbox::Pod],
    count: Option<&dyn Fn() -> u64>,
) {
    let t = Duration::from_secs(3);
    sb.sync_hv().unwrap();
    for pod in pods {
        let before = count.map(|c| c());
        let got = chassis.tcp_request(pod, ip(EXTERNAL[0]), 8080, t).unwrap();
        assert_eq!(got, None, "{}: the row is gone, no answer", pod.iface_id);
        assert_eq!(count.map(|c| c()), before, "{}", pod.iface_id);
    }
    udn::apply(r, world).await;
    sb.sync_hv().unwrap();
    for pod in pods {
        let got = chassis.tcp_request(pod, ip(EXTERNAL[0]), 8080, t).unwrap();
        assert_eq!(
            got,
            Some(format!("external, from {}", NODE[0])),
            "{}: the row is back",
            pod.iface_id
        );
    }
}
