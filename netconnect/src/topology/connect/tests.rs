//! ClusterNetworkConnect rows pinned with docs/ovn-kubernetes.md §5 (OKEP-5224 as OVN-Kubernetes
//! implements it, `ovn/controller/networkconnect/topology.go`): the connect router,
//! its ports and their peers, the policies toward it, the routes back, the services
//! group and the service-only ACLs.
//!
//! The vector: CNC `blue-green` (tunnel key 16715779, connect subnet 192.168.0.0/16
//! with /24 per network) connects Layer3 `blue` (network id 1, subnets 10.1.0.0/16 and
//! 10.3.0.0/16, its block 192.168.0.0/24) and Layer2 `green` (id 2, 10.2.0.0/16, the
//! pair 192.168.1.0/31), seen from zone `node-a` (node id 2, host subnet 10.1.1.0/24);
//! `node-b` (id 3, chassis `ch-b`, host subnet 10.1.2.0/24) is remote.

use std::collections::BTreeMap;

use nb_model::{
    Acl, AclAction, AclDirection, AddressSet, LoadBalancerGroup, LogicalRouter,
    LogicalRouterPolicy, LogicalRouterPolicyAction, LogicalRouterPort, LogicalRouterStaticRoute,
};

use super::{build, build_network, isolation};
use std::path::Path;

use crate::api::load::parse_file;
use crate::status::dir::State;
use crate::testing::node;
use crate::topology::desired::{Desired, NoFragments};
use crate::world::{Settings, World};

const CNC: &str = "blue-green";
const BLUE: &str = "cluster_udn_blue";
const GREEN: &str = "cluster_udn_green";
const CONNECT_ROUTER: &str = "connect_router_blue-green";
const BLUE_ROUTER: &str = "cluster_udn_blue_ovn_cluster_router";
const GREEN_ROUTER: &str = "cluster_udn_green_transit_router";
/// `<owner-controller>:<owner-type>:<cnc>`, how every id of the CNC's rows starts.
const ID: &str = "ovnkube-network-connect-controller:ClusterNetworkConnect:blue-green";

fn yaml(connectivity: &str) -> String {
    format!(
        r#"apiVersion: k8s.ovn.org/v1
kind: ClusterUserDefinedNetwork
metadata: {{name: blue, labels: {{c: "yes"}}, annotations: {{k8s.ovn.org/network-id: '1'}}}}
spec:
  namespaceSelector: {{}}
  network: {{topology: Layer3, layer3: {{role: Primary, subnets: [{{cidr: 10.1.0.0/16, hostSubnet: 24}}, {{cidr: 10.3.0.0/16, hostSubnet: 24}}]}}}}
---
apiVersion: k8s.ovn.org/v1
kind: ClusterUserDefinedNetwork
metadata: {{name: green, labels: {{c: "yes"}}, annotations: {{k8s.ovn.org/network-id: '2'}}}}
spec:
  namespaceSelector: {{}}
  network: {{topology: Layer2, layer2: {{role: Primary, subnets: [10.2.0.0/16]}}}}
---
apiVersion: k8s.ovn.org/v1
kind: ClusterNetworkConnect
metadata:
  name: blue-green
  annotations:
    k8s.ovn.org/connect-router-tunnel-key: '16715779'
    k8s.ovn.org/network-connect-subnet: '{{"layer3_1":{{"ipv4":"192.168.0.0/24"}},"layer2_2":{{"ipv4":"192.168.1.0/31"}}}}'
spec:
  networkSelectors: [{{networkSelectionType: ClusterUserDefinedNetworks, clusterUserDefinedNetworkSelector: {{networkSelector: {{matchLabels: {{c: "yes"}}}}}}}}]
  connectSubnets: [{{cidr: 192.168.0.0/16, networkPrefix: 24}}]
  connectivity: {connectivity}
"#
    ) + &node(
        "node-a",
        &[
            ("k8s.ovn.org/node-id", "2"),
            ("k8s.ovn.org/node-chassis-id", "ch-a"),
            (
                "k8s.ovn.org/node-subnets",
                r#"{"cluster_udn_blue":["10.1.1.0/24"]}"#,
            ),
        ],
    ) + &node(
        "node-b",
        &[
            ("k8s.ovn.org/node-id", "3"),
            ("k8s.ovn.org/node-chassis-id", "ch-b"),
            (
                "k8s.ovn.org/node-subnets",
                r#"{"cluster_udn_blue":["10.1.2.0/24"]}"#,
            ),
        ],
    )
}

/// The connect's own rows, and its rows for blue and for green, from zone `node-a`
/// (admitted as the daemon admits connects).
fn vector(connectivity: &str) -> (Desired, Desired, Desired) {
    let files = [parse_file(Path::new("cnc.yaml"), &yaml(connectivity))];
    let settings = Settings {
        zone: Some("node-a".into()),
        ..Settings::default()
    };
    let world = World::build(&files, &State::default(), settings);
    assert!(world.problems.is_empty(), "{:#?}", world.problems);
    let inputs = world.inputs();
    let own = build(&inputs, CNC).unwrap();
    let blue = build_network(&inputs, CNC, BLUE, &NoFragments).unwrap();
    let green = build_network(&inputs, CNC, GREEN, &NoFragments).unwrap();
    (own, blue, green)
}

/// What the key puts into `column` of the row `parent` it does not own, by identity.
fn attached(d: &Desired, parent: &str, column: &str) -> Vec<String> {
    let mut out: Vec<String> = d
        .attachments()
        .filter(|(a, _)| a.parent == parent && a.column == column)
        .flat_map(|(_, kids)| kids.iter())
        .map(|p| d.by_placeholder(p).unwrap().identity.clone())
        .collect();
    out.sort();
    out
}

fn strings<'a>(i: impl IntoIterator<Item = &'a String>) -> Vec<&'a str> {
    i.into_iter().map(String::as_str).collect()
}

fn external_ids(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The owner keys every row of the CNC carries, and its id.
fn owned(id: &str, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut ids = external_ids(&[
        (
            "k8s.ovn.org/owner-controller",
            "ovnkube-network-connect-controller",
        ),
        ("k8s.ovn.org/owner-type", "ClusterNetworkConnect"),
        ("k8s.ovn.org/name", CNC),
        ("k8s.ovn.org/id", &format!("{ID}:{id}")),
    ]);
    ids.extend(external_ids(extra));
    ids
}

fn port(d: &Desired, name: &str) -> LogicalRouterPort {
    let mut ports: Vec<LogicalRouterPort> = d
        .all::<LogicalRouterPort>()
        .into_values()
        .filter(|p| p.name == name)
        .collect();
    assert_eq!(ports.len(), 1, "one port {name}");
    ports.remove(0)
}

#[test]
fn the_connect_router_has_the_annotated_key_the_default_copp_and_no_id() {
    // §5.4: options {requested-tnl-key}, the ovnkube-default COPP, external ids
    // without k8s.ovn.org/id.
    let (own, _, _) = vector("[PodNetwork]");
    let router = own.get::<LogicalRouter>(CONNECT_ROUTER).unwrap();
    assert_eq!(router.name, CONNECT_ROUTER);
    assert_eq!(
        router.options,
        external_ids(&[("requested-tnl-key", "16715779")])
    );
    assert_eq!(
        own.identity_of(router.copp.as_ref().unwrap()),
        Some("ovnkube-default")
    );
    assert_eq!(
        router.external_ids,
        external_ids(&[
            (
                "k8s.ovn.org/owner-controller",
                "ovnkube-network-connect-controller"
            ),
            ("k8s.ovn.org/owner-type", "ClusterNetworkConnect"),
            ("k8s.ovn.org/name", CNC),
        ])
    );
}

#[test]
fn a_local_layer3_node_gets_a_peered_pair_and_a_remote_node_a_port_bound_to_its_chassis() {
    // §5.3: the node's pair is the block's 2·id-th /31, the connect router's port takes
    // the first address; key = network index · 256 + node id + 1.
    let (_, blue, _) = vector("[PodNetwork]");

    let local = port(&blue, "crtor-blue-green_cluster_udn_blue_node-a");
    assert_eq!(strings(&local.networks), ["192.168.0.4/31"]);
    assert_eq!(local.mac, "0a:58:c0:a8:00:04");
    assert_eq!(local.options, external_ids(&[("requested-tnl-key", "3")]));
    assert_eq!(
        local.peer.as_deref(),
        Some("rtocr-cluster_udn_blue_node-a_blue-green")
    );
    assert_eq!(
        local.external_ids,
        owned(
            &format!("1:2:{CONNECT_ROUTER}"),
            &[
                ("network-id", "1"),
                ("node-id", "2"),
                ("router-name", CONNECT_ROUTER)
            ]
        )
    );

    let peer = port(&blue, "rtocr-cluster_udn_blue_node-a_blue-green");
    assert_eq!(strings(&peer.networks), ["192.168.0.5/31"]);
    assert!(peer.options.is_empty(), "{:?}", peer.options);
    assert_eq!(
        peer.peer.as_deref(),
        Some("crtor-blue-green_cluster_udn_blue_node-a")
    );
    assert_eq!(
        peer.external_ids,
        owned(
            &format!("1:2:{BLUE_ROUTER}"),
            &[
                ("network-id", "1"),
                ("node-id", "2"),
                ("router-name", BLUE_ROUTER)
            ]
        )
    );

    let remote = port(&blue, "crtor-blue-green_cluster_udn_blue_node-b");
    assert_eq!(strings(&remote.networks), ["192.168.0.6/31"]);
    assert_eq!(
        remote.options,
        external_ids(&[("requested-tnl-key", "4"), ("requested-chassis", "ch-b")])
    );
    assert_eq!(remote.peer, None);
    assert_eq!(
        blue.all::<LogicalRouterPort>().len(),
        3,
        "no rtocr- port for the remote node"
    );

    assert_eq!(
        attached(&blue, CONNECT_ROUTER, "ports"),
        [
            format!("1:2:{CONNECT_ROUTER}"),
            format!("1:3:{CONNECT_ROUTER}")
        ]
    );
    assert_eq!(
        attached(&blue, BLUE_ROUTER, "ports"),
        [format!("1:2:{BLUE_ROUTER}")]
    );
}

#[test]
fn a_layer2_network_gets_one_pair_on_its_transit_router_with_node_id_0() {
    // §5.3: index 0 of its /31; key = network index 1 · 256 + sub-index 0 + 1.
    let (_, _, green) = vector("[PodNetwork]");
    let crtor = port(&green, "crtor-blue-green_cluster_udn_green");
    assert_eq!(strings(&crtor.networks), ["192.168.1.0/31"]);
    assert_eq!(crtor.options, external_ids(&[("requested-tnl-key", "257")]));
    assert_eq!(
        crtor.peer.as_deref(),
        Some("rtocr-cluster_udn_green_blue-green")
    );
    assert_eq!(crtor.external_ids["node-id"], "0");
    let rtocr = port(&green, "rtocr-cluster_udn_green_blue-green");
    assert_eq!(strings(&rtocr.networks), ["192.168.1.1/31"]);
    assert_eq!(
        attached(&green, GREEN_ROUTER, "ports"),
        [format!("2:0:{GREEN_ROUTER}")]
    );
}

#[test]
fn each_network_router_reroutes_the_other_networks_subnets_to_the_connect_router() {
    // §5.5: priority 9001, from the local entry port, several same-family destination
    // subnets in parentheses, next hop the connect router's side of the pair.
    let (_, blue, green) = vector("[PodNetwork]");
    let policy = |d: &Desired| {
        let all = d.all::<LogicalRouterPolicy>();
        assert_eq!(all.len(), 1, "{all:?}");
        all.into_values().next().unwrap()
    };

    let from_blue = policy(&blue);
    assert_eq!(from_blue.priority, 9001);
    assert_eq!(from_blue.action, LogicalRouterPolicyAction::Reroute);
    assert_eq!(
        from_blue.match_,
        r#"inport == "rtos-cluster_udn_blue_node-a" && ip4.dst == 10.2.0.0/16"#
    );
    assert_eq!(strings(&from_blue.nexthops), ["192.168.0.4"]);
    assert_eq!(
        from_blue.external_ids,
        owned(
            &format!("1:2:v4:{BLUE_ROUTER}"),
            &[
                ("source-network-id", "1"),
                ("destination-network-id", "2"),
                ("ip-family", "v4"),
                ("router-name", BLUE_ROUTER)
            ]
        )
    );
    assert_eq!(
        attached(&blue, BLUE_ROUTER, "policies"),
        [format!("1:2:v4:{BLUE_ROUTER}")]
    );

    let from_green = policy(&green);
    assert_eq!(
        from_green.match_,
        r#"inport == "trtos-cluster_udn_green_ovn_layer2_switch" && (ip4.dst == 10.1.0.0/16 || ip4.dst == 10.3.0.0/16)"#
    );
    assert_eq!(strings(&from_green.nexthops), ["192.168.1.0"]);
}

#[test]
fn the_connect_router_routes_back_to_each_node_host_subnet_and_to_a_layer2_subnet() {
    // §5.6: Layer3, per node host subnet via the network side of that node's pair;
    // Layer2, per network subnet via the network side of pair 0.
    let (_, blue, green) = vector("[PodNetwork]");
    let routes = |d: &Desired| -> Vec<(String, String, String)> {
        d.all::<LogicalRouterStaticRoute>()
            .into_values()
            .map(|r| {
                assert_eq!(r.policy, None);
                assert_eq!(r.output_port, None);
                (r.ip_prefix, r.nexthop, r.external_ids["node-id"].clone())
            })
            .collect()
    };
    let mut back_to_blue = routes(&blue);
    back_to_blue.sort();
    assert_eq!(
        back_to_blue,
        [
            ("10.1.1.0/24".into(), "192.168.0.5".into(), "2".into()),
            ("10.1.2.0/24".into(), "192.168.0.7".into(), "3".into()),
        ]
    );
    assert_eq!(
        routes(&green),
        [("10.2.0.0/16".into(), "192.168.1.1".into(), "0".into())]
    );
    let route = blue.get::<LogicalRouterStaticRoute>("1:2:v4").unwrap();
    assert_eq!(
        route.external_ids,
        owned(
            "1:2:v4",
            &[("network-id", "1"), ("node-id", "2"), ("ip-family", "v4")]
        )
    );
    assert_eq!(
        attached(&blue, CONNECT_ROUTER, "static_routes"),
        ["1:2:v4", "1:3:v4"]
    );
}

#[test]
fn service_network_groups_the_cluster_ip_load_balancers_on_each_local_switch() {
    // §5.7: cnc_svc_<cnc> on blue's local node switch and on green's switch.
    let (own, _, _) = vector("[PodNetwork, ServiceNetwork]");
    let group = own.get::<LoadBalancerGroup>("cnc_svc_blue-green").unwrap();
    assert_eq!(group.name, "cnc_svc_blue-green");
    assert_eq!(group.load_balancer.len(), 2, "one selection per network");
    assert_eq!(
        attached(&own, "cluster_udn_blue_node-a", "load_balancer_group"),
        ["cnc_svc_blue-green"]
    );
    assert_eq!(
        attached(
            &own,
            "cluster_udn_green_ovn_layer2_switch",
            "load_balancer_group"
        ),
        ["cnc_svc_blue-green"]
    );
    assert!(own.all::<Acl>().is_empty(), "pods may talk: no ACL");
    let (pods_only, _, _) = vector("[PodNetwork]");
    assert!(pods_only.all::<LoadBalancerGroup>().is_empty());
}

#[test]
fn service_only_connects_pass_services_and_the_own_network_and_drop_new_pod_connections() {
    // §5.8: three tier-0 from-lport ACLs on each local switch, metered by acl-logging.
    let (own, _, _) = vector("[ServiceNetwork]");
    let acls = own.all::<Acl>();
    let rules: Vec<(i64, AclAction, &str, &str)> = acls
        .values()
        .map(|a| {
            assert_eq!(a.direction, AclDirection::FromLport);
            assert_eq!(a.tier, 0);
            assert_eq!(a.meter.as_deref(), Some("acl-logging"));
            assert!(!a.log);
            (
                a.priority,
                a.action.clone(),
                a.match_.as_str(),
                a.external_ids["type"].as_str(),
            )
        })
        .collect();
    let set = isolation::address_set_name(CNC, true);
    let drop = format!("ip4.dst == ${set} && ct.new");
    let mut rules = rules;
    rules.sort_by_key(|r| (r.0, r.3.to_owned()));
    assert_eq!(
        rules,
        [
            (450, AclAction::Drop, drop.as_str(), "drop-pod"),
            (
                475,
                AclAction::Pass,
                "ip4.dst == 10.1.0.0/16 || ip4.dst == 10.3.0.0/16",
                "pass-same-network-1"
            ),
            (
                475,
                AclAction::Pass,
                "ip4.dst == 10.2.0.0/16",
                "pass-same-network-2"
            ),
            (
                500,
                AclAction::Pass,
                "(ip4.dst == 10.96.0.0/16)",
                "pass-service"
            ),
        ]
    );
    let sets = own.all::<AddressSet>();
    let v4 = sets.values().next().unwrap();
    assert_eq!(sets.len(), 1, "IPv4 only");
    assert_eq!(v4.name, set);
    assert_eq!(
        strings(&v4.addresses),
        ["10.1.0.0/16", "10.2.0.0/16", "10.3.0.0/16"]
    );
    assert_eq!(
        attached(&own, "cluster_udn_blue_node-a", "acls"),
        ["drop-pod", "pass-same-network-1", "pass-service"]
    );
    assert_eq!(
        attached(&own, "cluster_udn_green_ovn_layer2_switch", "acls"),
        ["drop-pod", "pass-same-network-2", "pass-service"]
    );
}
