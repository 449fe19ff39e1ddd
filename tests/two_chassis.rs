//! Two chassis, each its own ovs-vswitchd (userspace datapath) and ovn-controller in
//! its own namespace, joined by an underlay (`Chassis::link`): packets between nodes
//! cross a real geneve tunnel. Node-a is on chassis-1, node-b on chassis-2; pods of a
//! Layer3 and a Layer2 network reach each other across the nodes, IPv4 and IPv6, and a
//! pod on node-a reaches a ClusterIP service whose only endpoint is on node-b.

use std::net::IpAddr;
use std::time::Duration;

use integration_tests::{sandbox, udn};
use netconnect::status::dir::State;
use ovn_sandbox::{Answer, Chassis, Transport};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[allow(clippy::too_many_lines)] // a test: one story, start to end
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_and_services_reach_across_two_chassis_through_geneve() {
    let sb = sandbox();
    let mut c1 = Chassis::start_at(&sb, "chassis-1", ip("172.31.0.1")).unwrap();
    let mut c2 = Chassis::start_at(&sb, "chassis-2", ip("172.31.0.2")).unwrap();
    Chassis::link(&c1, &c2, 24).unwrap();
    let nodes = udn::node("node-a", "chassis-1", &[]) + &udn::node("node-b", "chassis-2", &[]);
    let plain = udn::world(
        &(udn::BLUE_AND_YELLOW.to_string() + &nodes),
        &State::default(),
        None,
    );
    let on_b = udn::blue_and_yellow_on(&plain, "node-b");
    let blue_b = netconnect::ovnk::addr::nth(&on_b[0].subnets[0], 5).unwrap();
    // A ClusterIP service in a namespace of the networks' (both select every
    // namespace, so it goes to the first, blue), its endpoint the blue pod on node-b.
    let yaml = udn::BLUE_AND_YELLOW.to_string()
        + &nodes
        + "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: web}\n"
        + &udn::service(
            "web",
            "svc",
            "10.96.0.50",
            80,
            "cluster_udn_blue",
            8080,
            &[&blue_b.to_string()],
        );
    let world = udn::world_with_problems(&yaml, &State::default(), None);
    let (r, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    udn::apply(&r, &world).await;

    let on_a = udn::blue_and_yellow_on(&world, "node-a");
    let on_b = udn::blue_and_yellow_on(&world, "node-b");
    let mut pods = Vec::new();
    for ((a, b), n) in on_a.iter().zip(&on_b).zip([5u128, 5]) {
        let pa = udn::pod_at(
            &sb,
            &mut c1,
            &a.switch,
            &format!("{}_a", a.net),
            &a.subnets,
            n,
        );
        // Layer2 pods share one subnet: node-b's takes the next address.
        let nb = if a.switch == b.switch { n + 1 } else { n };
        let pb = udn::pod_at(
            &sb,
            &mut c2,
            &b.switch,
            &format!("{}_b", b.net),
            &b.subnets,
            nb,
        );
        pods.push((a.net, pa, pb));
    }
    c2.serve(&pods[0].2, Transport::Tcp, 8080, "blue on node-b")
        .unwrap();
    sb.sync_hv().unwrap();

    for (net, pa, pb) in &pods {
        for to in &pb.ips {
            assert!(
                c1.ping(pa, to.addr(), 3).unwrap(),
                "{net}: node-a's pod to node-b's {}",
                to.addr()
            );
        }
    }
    // Networks stay apart across chassis too.
    let (_, blue_a, _) = &pods[0];
    let (_, _, yellow_b) = &pods[1];
    assert!(
        !c1.ping(blue_a, yellow_b.ips[0].addr(), 2).unwrap(),
        "blue to yellow"
    );
    let got = c1
        .request(
            &pods[0].1,
            Transport::Tcp,
            ip("10.96.0.50"),
            80,
            Duration::from_secs(3),
        )
        .unwrap();
    assert_eq!(
        got,
        Answer::Reply("blue on node-b".into()),
        "the service across chassis"
    );
    // They went through chassis-1's geneve tunnel to chassis-2, the only way there.
    let tunnel = c1
        .vsctl(&[
            "--bare",
            "--columns=name",
            "find",
            "interface",
            "type=geneve",
        ])
        .unwrap();
    let tunnel = tunnel.trim();
    assert_eq!(
        c1.vsctl(&["get", "interface", tunnel, "options:remote_ip"])
            .unwrap()
            .trim()
            .trim_matches('"'),
        "172.31.0.2"
    );
    // ovs-vswitchd writes interface statistics every few seconds: wait for them.
    let sent = || -> u64 {
        c1.vsctl(&["get", "interface", tunnel, "statistics:tx_packets"])
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while sent() < 10 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(sent() >= 10, "{} packets through the tunnel", sent());
}
