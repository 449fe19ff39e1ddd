//! Per-node load balancers pinned with OVN-Kubernetes' own vectors
//! (`lb_config_test.go`, `Test_buildPerNodeLBs`): two nodes, node-a with gateway
//! address 10.0.0.1 and host addresses 10.0.0.1 and 10.0.0.111, node-b with 10.0.0.2;
//! the masquerade subnet 169.254.169.0/29 and service CIDR 192.168.0.0/16 of that test.

use std::net::IpAddr;

use super::{load_balancers, Config, NodeLb, Rule, ServiceNode, Vip};
use crate::api::service::{PortEndpoints, Protocol};
use crate::topology::TopologyConfig;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn config() -> TopologyConfig {
    TopologyConfig {
        masquerade_subnets: vec![
            "169.254.169.0/29".parse().unwrap(),
            "fd69::/125".parse().unwrap(),
        ],
        service_cidrs: vec!["192.168.0.0/16".parse().unwrap()],
        ..TopologyConfig::default()
    }
}

const HOST_A: [IpAddr; 2] = [
    IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1)),
    IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 111)),
];
const HOST_B: [IpAddr; 1] = [IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2))];

fn nodes() -> Vec<ServiceNode<'static>> {
    vec![
        ServiceNode {
            name: "node-a",
            switch: "switch-node-a".into(),
            router: Some("gr-node-a".into()),
            gateway_addresses: vec![ip("10.0.0.1")],
            host_addresses: &HOST_A,
            node_port: true,
        },
        ServiceNode {
            name: "node-b",
            switch: "switch-node-b".into(),
            router: Some("gr-node-b".into()),
            gateway_addresses: vec![ip("10.0.0.2")],
            host_addresses: &HOST_B,
            node_port: true,
        },
    ]
}

/// Endpoints on target port 8080: each address with its node.
fn endpoints(eps: &[(&str, &str)]) -> PortEndpoints {
    [(
        8080,
        eps.iter()
            .map(|(a, n)| crate::api::service::Backend {
                ip: ip(a),
                node: Some(n.to_string()),
                cluster: true,
            })
            .collect(),
    )]
    .into()
}

fn tcp<'e>(vips: &[&str], eps: &'e PortEndpoints) -> Config<'e> {
    Config {
        protocol: Protocol::Tcp,
        vips: vips
            .iter()
            .map(|v| {
                if *v == "node" {
                    Vip::Node
                } else {
                    Vip::Ip(ip(v))
                }
            })
            .collect(),
        inport: 80,
        endpoints: eps,
        external_local: false,
        internal_local: false,
        node_port: false,
    }
}

fn rule(vip: &str, targets: &[&str]) -> Rule {
    Rule {
        vip: ip(vip),
        port: 80,
        targets: targets.iter().map(|t| (ip(t), 8080)).collect(),
    }
}

fn lb(scope: &str, rules: Vec<Rule>, switches: &[&str], routers: &[&str]) -> NodeLb {
    NodeLb {
        scope: scope.into(),
        protocol: Protocol::Tcp,
        rules,
        skip_snat: false,
        switches: switches.iter().map(|s| s.to_string()).collect(),
        routers: routers.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn a_host_network_endpoint_is_reached_back_through_the_masquerade_address_on_its_own_node() {
    // "host-network pod": the endpoint is node-a's gateway address.
    let eps = endpoints(&[("10.0.0.1", "node-a")]);
    let got = load_balancers(&config(), &[tcp(&["1.2.3.4"], &eps)], &nodes());
    assert_eq!(
        got,
        [
            lb(
                "node_router_node-a",
                vec![rule("1.2.3.4", &["169.254.169.2"])],
                &[],
                &["gr-node-a"]
            ),
            lb(
                "node_switch_node-a_merged",
                vec![rule("1.2.3.4", &["10.0.0.1"])],
                &["switch-node-a", "switch-node-b"],
                &["gr-node-b"]
            ),
        ]
    );
}

#[test]
fn a_node_port_answers_on_every_host_address_of_each_node() {
    // "nodeport service, standard pod".
    let eps = endpoints(&[("10.128.0.2", "node-a")]);
    let mut c = tcp(&["node"], &eps);
    c.node_port = true;
    let got = load_balancers(&config(), &[c], &nodes());
    assert_eq!(
        got,
        [
            lb(
                "node_router+switch_node-a",
                vec![
                    rule("10.0.0.1", &["10.128.0.2"]),
                    rule("10.0.0.111", &["10.128.0.2"])
                ],
                &["switch-node-a"],
                &["gr-node-a"]
            ),
            lb(
                "node_router+switch_node-b",
                vec![rule("10.0.0.2", &["10.128.0.2"])],
                &["switch-node-b"],
                &["gr-node-b"]
            ),
        ]
    );
}

#[test]
fn internal_traffic_policy_local_keeps_a_nodes_switch_to_its_own_endpoints() {
    // "clusterIP + externalIP service, standard pods, InternalTrafficPolicy=local".
    let eps = endpoints(&[("10.128.0.1", "node-a"), ("10.128.1.1", "node-b")]);
    let mut cluster = tcp(&["192.168.0.1"], &eps);
    cluster.internal_local = true;
    let external = tcp(&["1.2.3.4"], &eps);
    let got = load_balancers(&config(), &[cluster, external], &nodes());
    let both = ["10.128.0.1", "10.128.1.1"];
    assert_eq!(
        got,
        [
            lb(
                "node_router_node-a_merged",
                vec![rule("192.168.0.1", &both), rule("1.2.3.4", &both)],
                &[],
                &["gr-node-a", "gr-node-b"]
            ),
            lb(
                "node_switch_node-a",
                vec![rule("192.168.0.1", &["10.128.0.1"]), rule("1.2.3.4", &both)],
                &["switch-node-a"],
                &[]
            ),
            lb(
                "node_switch_node-b",
                vec![rule("192.168.0.1", &["10.128.1.1"]), rule("1.2.3.4", &both)],
                &["switch-node-b"],
                &[]
            ),
        ]
    );
}

#[test]
fn external_traffic_policy_local_node_ports_keep_local_endpoints_without_snat() {
    // "nodeport service, host-network pod, ExternalTrafficPolicy=local": a cluster IP
    // and an ETP=Local node port, the endpoint on node-a's host. Node-a's router
    // answers the node port without SNAT and reaches its own host through the
    // masquerade address; node-b's has no local endpoint (an empty rule: OVN rejects);
    // each switch also answers the ETP-local masquerade address `.3` with the node's
    // own endpoints.
    let eps = endpoints(&[("10.0.0.1", "node-a")]);
    let cluster = tcp(&["192.168.0.1"], &eps);
    let mut node_port = tcp(&["node"], &eps);
    node_port.node_port = true;
    node_port.external_local = true;
    let got = load_balancers(&config(), &[cluster, node_port], &nodes());
    let mut local_a = lb(
        "node_local_router_node-a",
        vec![
            rule("10.0.0.1", &["169.254.169.2"]),
            rule("10.0.0.111", &["169.254.169.2"]),
        ],
        &[],
        &["gr-node-a"],
    );
    local_a.skip_snat = true;
    let ep = ["10.0.0.1"];
    assert_eq!(
        got,
        [
            lb(
                "node_router_node-a",
                vec![rule("192.168.0.1", &["169.254.169.2"])],
                &[],
                &["gr-node-a"]
            ),
            local_a,
            lb(
                "node_switch_node-a",
                vec![
                    rule("192.168.0.1", &ep),
                    rule("169.254.169.3", &ep),
                    rule("10.0.0.1", &ep),
                    rule("169.254.169.3", &ep),
                    rule("10.0.0.111", &ep),
                ],
                &["switch-node-a"],
                &[]
            ),
            lb(
                "node_router_node-b",
                vec![rule("192.168.0.1", &ep), rule("10.0.0.2", &[])],
                &[],
                &["gr-node-b"]
            ),
            lb(
                "node_switch_node-b",
                vec![
                    rule("192.168.0.1", &ep),
                    rule("169.254.169.3", &[]),
                    rule("10.0.0.2", &ep)
                ],
                &["switch-node-b"],
                &[]
            ),
        ]
    );
}

/// The endpoints of a one-port service (target 8080) read from `endpoints`, a slice's
/// `endpoints:` list, as netconnect reads a mirrored slice.
fn from_slice(endpoints: &str) -> PortEndpoints {
    let svc: crate::api::service::Service = serde_yaml_ng::from_str(
        "metadata: {name: web, namespace: red}\nspec: {clusterIP: 192.168.0.1, ports: [{port: 80}]}\n",
    )
    .unwrap();
    let svc = crate::api::validate::service::service(&svc, &config().service_cidrs)
        .unwrap()
        .unwrap();
    let slice: crate::api::service::EndpointSlice = serde_yaml_ng::from_str(&format!(
        "addressType: IPv4\nports: [{{port: 8080, protocol: TCP}}]\nendpoints:\n{endpoints}"
    ))
    .unwrap();
    crate::api::service::endpoints_of(&svc, &[&slice]).remove(0)
}

#[test]
fn a_local_policy_falls_back_to_terminating_endpoints_per_node() {
    // KEP-1669 per node (OVN-Kubernetes' buildNodeLBEndpointEntry): node-a's only
    // endpoint is terminating but still serving, node-b's is ready. Cluster-wide only
    // the ready one counts; node-a's local rules use its terminating one (OVN-Kubernetes
    // serves there; choosing cluster-wide first would leave node-a with none: reject).
    let eps = from_slice(
        "- {addresses: [10.128.0.5], nodeName: node-a, conditions: {ready: false, serving: true, terminating: true}}\n\
         - {addresses: [10.128.1.5], nodeName: node-b, conditions: {ready: true, serving: true, terminating: false}}\n",
    );
    let cluster: Vec<String> = eps[&8080]
        .iter()
        .filter(|b| b.cluster)
        .map(|b| b.ip.to_string())
        .collect();
    assert_eq!(cluster, ["10.128.1.5"]);
    let mut node_port = tcp(&["node"], &eps);
    node_port.node_port = true;
    node_port.external_local = true;
    let got = load_balancers(&config(), &[node_port], &nodes());
    let rules = |scope: &str| {
        got.iter()
            .find(|l| l.scope == scope)
            .unwrap_or_else(|| panic!("no {scope} in {got:#?}"))
            .rules
            .clone()
    };
    let mut local_a = rules("node_local_router_node-a");
    local_a.sort_by_key(|r| r.vip);
    assert_eq!(
        local_a,
        [
            rule("10.0.0.1", &["10.128.0.5"]),
            rule("10.0.0.111", &["10.128.0.5"])
        ]
    );
    assert_eq!(
        rules("node_local_router_node-b"),
        [rule("10.0.0.2", &["10.128.1.5"])]
    );
    // The switches: the node port to the cluster-wide choice, the ETP-local
    // masquerade address `.3` to the node's own.
    assert_eq!(
        rules("node_switch_node-a"),
        [
            rule("169.254.169.3", &["10.128.0.5"]),
            rule("10.0.0.1", &["10.128.1.5"]),
            rule("169.254.169.3", &["10.128.0.5"]),
            rule("10.0.0.111", &["10.128.1.5"]),
        ]
    );
}
