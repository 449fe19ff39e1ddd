//! Services of a user-defined network over the real datapath: the load balancers
//! netconnect writes from Service and EndpointSlice manifests carry TCP and UDP to
//! endpoints on another node, refuse what a service without endpoints is sent
//! (OVN-Kubernetes' `reject=true`), and `sessionAffinity: ClientIP` holds a client to
//! one backend, a service whose last endpoint goes away (its slice as kubectl prints it
//! then, `endpoints: null`) rejects at its VIP instead of sending to the pod it had; an
//! external host reaches a NodePort on the node's address through the node's per-node
//! load balancer, and an `externalTrafficPolicy: Local` one with the node's own
//! terminating-but-serving endpoint when only other nodes have ready ones. No load
//! balancer is made by hand.

use std::net::IpAddr;
use std::time::Duration;

use integration_tests::{sandbox, udn};
use netconnect::daemon::manifests::ManifestDir;
use netconnect::ovnk::addr::nth;
use netconnect::status::dir::State;
use netconnect::world::{Settings, World};
use ovn_sandbox::{Answer, Transport};

const NETWORK: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: web, labels: {kubernetes.io/metadata.name: web}}
---
apiVersion: k8s.ovn.org/v1
kind: UserDefinedNetwork
metadata: {name: net, namespace: web}
spec:
  topology: Layer3
  layer3: {role: Primary, subnets: [{cidr: 10.30.0.0/16, hostSubnet: 24}]}
"#;

type Port = udn::ServicePort;

/// Service `web/<name>` on `cluster_ip` with `ports`, `ClientIP` affinity of that many
/// seconds if asked, and its mirrored slice on `web_net`: `endpoints`, ready.
fn service(
    name: &str,
    cluster_ip: &str,
    ports: &[Port],
    affinity: Option<u32>,
    endpoints: &[IpAddr],
) -> String {
    let spec = udn::ServiceSpec {
        cluster_ip,
        ports,
        affinity,
        node_port: None,
    };
    udn::service_with("web", name, "web_net", &spec, endpoints)
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[allow(clippy::too_many_lines)] // a test: one story, start to end
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_ip_services_carry_tcp_and_udp_reject_without_endpoints_and_keep_affinity() {
    let sb = sandbox();
    let mut chassis = ovn_sandbox::Chassis::start(&sb, "chassis-1").unwrap();
    let nodes = udn::node("node-a", "chassis-1", &[]) + &udn::node("node-b", "chassis-1", &[]);
    // The network alone first, for the host subnets the pods' addresses come from
    // (allocation depends on the nodes and networks only).
    let plain = udn::world(&(NETWORK.to_string() + &nodes), &State::default(), None);
    let subnets = &plain.allocations.host_subnets["web_net"];
    let addr = |node: &str, n: u128| nth(&subnets[node][0], n).unwrap();
    let (client_ip, b1_ip, b2_ip) = (addr("node-a", 5), addr("node-b", 5), addr("node-b", 6));

    let both: [Port; 2] = [("http", 80, "TCP", 8080), ("dns", 53, "UDP", 5353)];
    let http: [Port; 1] = [("http", 80, "TCP", 8080)];
    let yaml = NETWORK.to_string()
        + &nodes
        + &service("one", "10.96.1.10", &both, None, &[b1_ip])
        + &service("sticky", "10.96.1.11", &http, Some(10800), &[b1_ip, b2_ip])
        + &service("spread", "10.96.1.12", &http, None, &[b1_ip, b2_ip])
        + &service("empty", "10.96.1.13", &both, None, &[])
        + &service("forever", "10.96.1.14", &http, Some(86400), &[b1_ip, b2_ip]);
    let world = udn::world(&yaml, &State::default(), None);
    assert_eq!(world.allocations.host_subnets["web_net"], *subnets);
    let (r, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    udn::apply(&r, &world).await;
    let lbs = sb
        .nbctl(&["--bare", "--columns=name", "list", "Load_Balancer"])
        .unwrap();
    let mut lbs: Vec<&str> = lbs.split_whitespace().collect();
    lbs.sort_unstable();
    assert_eq!(
        lbs,
        [
            "web_net_Service_web/empty_TCP_cluster",
            "web_net_Service_web/empty_UDP_cluster",
            "web_net_Service_web/forever_TCP_cluster",
            "web_net_Service_web/one_TCP_cluster",
            "web_net_Service_web/one_UDP_cluster",
            "web_net_Service_web/spread_TCP_cluster",
            "web_net_Service_web/sticky_TCP_cluster",
        ]
    );

    let pod = |chassis: &mut ovn_sandbox::Chassis, node: &str, name: &str, ip: IpAddr| {
        let gw = nth(&subnets[node][0], 1).unwrap().to_string();
        udn::add_pod(
            &sb,
            chassis,
            &format!("web_net_{node}"),
            &format!("web_net_web_{name}"),
            &[&format!("{ip}/24")],
            &[&gw],
        )
    };
    let client = pod(&mut chassis, "node-a", "client", client_ip);
    for (name, ip) in [("b1", b1_ip), ("b2", b2_ip)] {
        let backend = pod(&mut chassis, "node-b", name, ip);
        chassis.serve(&backend, Transport::Tcp, 8080, name).unwrap();
        chassis.serve(&backend, Transport::Udp, 5353, name).unwrap();
    }
    sb.sync_hv().unwrap();

    let t = Duration::from_secs(3);
    let ask = |transport, vip: &str, port| {
        chassis
            .request(&client, transport, ip(vip), port, t)
            .unwrap()
    };
    let reply = |s: &str| Answer::Reply(s.to_owned());
    assert_eq!(
        ask(Transport::Tcp, "10.96.1.10", 80),
        reply("b1"),
        "TCP to the other node's endpoint"
    );
    assert_eq!(
        ask(Transport::Udp, "10.96.1.10", 53),
        reply("b1"),
        "UDP to the other node's endpoint"
    );
    // No endpoints: refused at once (a reset, an ICMP unreachable), not left to time out.
    assert_eq!(
        ask(Transport::Tcp, "10.96.1.13", 80),
        Answer::Refused,
        "TCP without endpoints"
    );
    assert_eq!(
        ask(Transport::Udp, "10.96.1.13", 53),
        Answer::Refused,
        "UDP without endpoints"
    );
    // A port the service does not have: nothing answers.
    assert_eq!(
        ask(Transport::Tcp, "10.96.1.10", 81),
        Answer::Silence,
        "a port no service has"
    );

    // Affinity holds the client to one backend; without it, new connections spread
    // (each backend is missed by 24 connections with probability 2^-24). With a
    // timeout, OVN learns the client's backend from its first connection and loses
    // that connection (a known OVN limitation, the reason OVN-Kubernetes makes the
    // largest timeout, one day, a hash on the addresses instead): the first answer is
    // not counted there. The one-day service loses nothing.
    let first = ask(Transport::Tcp, "10.96.1.11", 80);
    assert!(
        matches!(first, Answer::Reply(_) | Answer::Silence),
        "{first:?}"
    );
    let mut sticky = std::collections::BTreeSet::new();
    let mut forever = std::collections::BTreeSet::new();
    let mut spread = std::collections::BTreeSet::new();
    for _ in 0..24 {
        sticky.insert(ask(Transport::Tcp, "10.96.1.11", 80));
        forever.insert(ask(Transport::Tcp, "10.96.1.14", 80));
        spread.insert(ask(Transport::Tcp, "10.96.1.12", 80));
    }
    for (what, got) in [("a timeout", &sticky), ("one day", &forever)] {
        assert_eq!(got.len(), 1, "one backend with affinity of {what}: {got:?}");
        let backend = got.first().unwrap();
        assert!(
            *backend == reply("b1") || *backend == reply("b2"),
            "{what}: {backend:?}"
        );
    }
    if let Answer::Reply(_) = first {
        assert!(
            sticky.contains(&first),
            "the first connection's backend is kept"
        );
    }
    assert_eq!(
        spread,
        [reply("b1"), reply("b2")].into(),
        "both backends without affinity"
    );

    // Service `one`'s last pod goes away (b1 itself still serves `spread`): its mirrored
    // slice is rewritten as the API server prints a slice without endpoints, and read the
    // way netconnectd reads its manifest directory, the version before it in memory.
    let dir = tempfile::tempdir().unwrap();
    let (rest, one) = yaml.split_at(
        yaml.find("---\napiVersion: v1\nkind: Service\nmetadata: {name: one,")
            .unwrap(),
    );
    let (one, others) =
        one.split_at(one[4..].find("---\napiVersion: v1\nkind: Service").unwrap() + 4);
    std::fs::write(dir.path().join("cluster.yaml"), format!("{rest}{others}")).unwrap();
    std::fs::write(dir.path().join("one.yaml"), one).unwrap();
    let mut manifests = ManifestDir::new(dir.path());
    let read = World::build(
        &manifests.read().unwrap(),
        &State::default(),
        Settings::default(),
    );
    assert!(read.problems.is_empty(), "{:#?}", read.problems);
    udn::apply(&r, &read).await;
    assert_eq!(
        ask(Transport::Tcp, "10.96.1.10", 80),
        reply("b1"),
        "from the directory"
    );
    let emptied = emptied_slice(&one[..one.find("endpoints: [").unwrap()]);
    std::fs::write(dir.path().join("one.yaml"), &emptied).unwrap();
    let files = manifests.read().unwrap();
    let read = World::build(&files, &State::default(), Settings::default());
    udn::apply(&r, &read).await;
    sb.sync_hv().unwrap();
    for (transport, port) in [(Transport::Tcp, 80), (Transport::Udp, 53)] {
        assert_eq!(
            ask(transport, "10.96.1.10", port),
            Answer::Refused,
            "{transport:?} to a service whose slice is emptied: rejected, not sent to b1"
        );
    }
    assert!(read.problems.is_empty(), "{:#?}", read.problems);
    assert_ne!(
        ask(Transport::Tcp, "10.96.1.12", 80),
        Answer::Refused,
        "the pod that left service one still serves"
    );
}

/// `service_with`'s text of a service and the head of its mirrored slice (up to its
/// `endpoints`), with the slice's lists as the API server prints them once the
/// service has no endpoint: `discovery.k8s.io/v1` declares `endpoints` and `ports`
/// without `omitempty`, and Go writes the nil lists as `null`.
fn emptied_slice(head: &str) -> String {
    let at = head.rfind("ports: [").unwrap();
    format!("{}endpoints: null\nports: null\n", &head[..at])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_host_reaches_a_node_port_on_the_nodes_address() {
    let sb = sandbox();
    let mut chassis = ovn_sandbox::Chassis::start(&sb, "chassis-1").unwrap();
    let node_ip = "192.168.126.10";
    let gw = udn::gateway_config(&[&format!("{node_ip}/24")], &["192.168.126.1"]);
    let node = udn::node(
        "node-a",
        "chassis-1",
        &[
            ("k8s.ovn.org/l3-gateway-config", &gw),
            ("k8s.ovn.org/host-cidrs", &format!("[\"{node_ip}/24\"]")),
        ],
    );
    let plain = udn::world(&(NETWORK.to_string() + &node), &State::default(), None);
    let subnet = plain.allocations.host_subnets["web_net"]["node-a"][0];
    let backend_ip = nth(&subnet, 5).unwrap();
    // A NodePort service: its cluster IP in the cluster-wide load balancer, its node
    // port in node-a's per-node one.
    let yaml = NETWORK.to_string()
        + &node
        + &udn::service_with(
            "web",
            "np",
            "web_net",
            &udn::ServiceSpec {
                cluster_ip: "10.96.1.20",
                ports: &[("http", 80, "TCP", 8080)],
                affinity: None,
                node_port: Some(30080),
            },
            &[backend_ip],
        );
    let world = udn::world(&yaml, &State::default(), None);
    let (r, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    udn::apply(&r, &world).await;
    let lb = "web_net_Service_web/np_TCP_node_router+switch_node-a";
    assert_eq!(
        sb.nbctl(&["--bare", "get", "Load_Balancer", lb, "vips"])
            .unwrap()
            .trim(),
        format!("{{\"{node_ip}:30080\"=\"{backend_ip}:8080\"}}")
    );
    for (table, row) in [
        ("Logical_Router", "GR_web_net_node-a"),
        ("Logical_Switch", "web_net_node-a"),
    ] {
        let lbs = sb
            .nbctl(&["--bare", "get", table, row, "load_balancer"])
            .unwrap();
        let uuid = sb
            .nbctl(&[
                "--bare",
                "--columns=_uuid",
                "find",
                "Load_Balancer",
                &format!("name=\"{lb}\""),
            ])
            .unwrap();
        assert_eq!(
            lbs.trim().trim_matches(|c| c == '[' || c == ']'),
            uuid.trim(),
            "{row} holds the node port"
        );
    }

    let external = chassis
        .add_gateway_bridge("physnet", &["192.168.126.1/24".parse().unwrap()], &[])
        .unwrap();
    let gw_addr = nth(&subnet, 1).unwrap().to_string();
    let backend = udn::add_pod(
        &sb,
        &mut chassis,
        "web_net_node-a",
        "web_net_web_np",
        &[&format!("{backend_ip}/24")],
        &[&gw_addr],
    );
    chassis
        .serve(&backend, Transport::Tcp, 8080, "np backend, from {peer}")
        .unwrap();
    chassis
        .steer_node_port("breth0_web_net_node-a", ip(node_ip), 30080)
        .unwrap();
    sb.sync_hv().unwrap();
    let t = Duration::from_secs(3);
    let got = chassis
        .request(&external, Transport::Tcp, ip(node_ip), 30080, t)
        .unwrap();
    // The gateway router SNATs what it forwards to its own join address
    // (lb_force_snat_ip=router_ip): the backend sees that, not the external host.
    assert_eq!(got, Answer::Reply("np backend, from 100.65.0.2".into()));
    // A port no node port has: nothing answers.
    let other = chassis
        .request(&external, Transport::Tcp, ip(node_ip), 30081, t)
        .unwrap();
    assert!(!matches!(other, Answer::Reply(_)), "{other:?}");
}

/// `yaml`'s slice endpoints replaced by `endpoints` (a slice's `endpoints:` list).
fn with_endpoints(yaml: &str, endpoints: &str) -> String {
    let at = yaml.rfind("endpoints: [").unwrap();
    format!("{}endpoints:\n{endpoints}", &yaml[..at])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_node_port_serves_with_the_nodes_terminating_endpoint() {
    // externalTrafficPolicy: Local, node-a's only endpoint terminating but serving,
    // node-b's ready: KEP-1669's fallback applies per node (OVN-Kubernetes'
    // buildNodeLBEndpointEntry), so node-a's node port still serves, with its own pod
    // and without SNAT; chosen cluster-wide first, node-a would have none and reject.
    let sb = sandbox();
    let mut chassis = ovn_sandbox::Chassis::start(&sb, "chassis-1").unwrap();
    let (ip_a, ip_b) = ("192.168.126.10", "192.168.126.11");
    let node = |name: &str, chassis: &str, node_ip: &str| {
        let gw = udn::gateway_config(&[&format!("{node_ip}/24")], &["192.168.126.1"]);
        udn::node(
            name,
            chassis,
            &[
                ("k8s.ovn.org/l3-gateway-config", &gw),
                ("k8s.ovn.org/host-cidrs", &format!("[\"{node_ip}/24\"]")),
            ],
        )
    };
    let nodes = node("node-a", "chassis-1", ip_a) + &node("node-b", "chassis-2", ip_b);
    let plain = udn::world(&(NETWORK.to_string() + &nodes), &State::default(), None);
    let hosts = &plain.allocations.host_subnets["web_net"];
    let (subnet_a, subnet_b) = (hosts["node-a"][0], hosts["node-b"][0]);
    let (pod_a, pod_b) = (nth(&subnet_a, 5).unwrap(), nth(&subnet_b, 5).unwrap());
    let svc = udn::service_with(
        "web",
        "etp",
        "web_net",
        &udn::ServiceSpec {
            cluster_ip: "10.96.1.21",
            ports: &[("http", 80, "TCP", 8080)],
            affinity: None,
            node_port: Some(30081),
        },
        &[],
    )
    .replace(
        "type: NodePort, ",
        "type: NodePort, externalTrafficPolicy: Local, ",
    );
    let svc = with_endpoints(
        &svc,
        &format!(
            "- {{addresses: [{pod_a}], nodeName: node-a, conditions: {{ready: false, serving: true, terminating: true}}}}\n\
             - {{addresses: [{pod_b}], nodeName: node-b, conditions: {{ready: true, serving: true, terminating: false}}}}\n"
        ),
    );
    let world = udn::world(
        &(NETWORK.to_string() + &nodes + &svc),
        &State::default(),
        None,
    );
    let (r, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    udn::apply(&r, &world).await;

    let external = chassis
        .add_gateway_bridge("physnet", &["192.168.126.1/24".parse().unwrap()], &[])
        .unwrap();
    let backend = udn::add_pod(
        &sb,
        &mut chassis,
        "web_net_node-a",
        "web_net_web_etp",
        &[&format!("{pod_a}/24")],
        &[&nth(&subnet_a, 1).unwrap().to_string()],
    );
    chassis
        .serve(&backend, Transport::Tcp, 8080, "etp backend, from {peer}")
        .unwrap();
    chassis
        .steer_node_port("breth0_web_net_node-a", ip(ip_a), 30081)
        .unwrap();
    sb.sync_hv().unwrap();
    let got = chassis
        .request(
            &external,
            Transport::Tcp,
            ip(ip_a),
            30081,
            Duration::from_secs(3),
        )
        .unwrap();
    // No SNAT on a local node port: the backend sees the external host.
    assert_eq!(got, Answer::Reply("etp backend, from 192.168.126.1".into()));
}
