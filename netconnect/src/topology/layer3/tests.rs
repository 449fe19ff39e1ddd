//! Layer3 rows pinned with OVN-Kubernetes' vectors (docs/ovn-kubernetes.md §2, from OVN-Kubernetes'
//! layer3_user_defined_network_controller_test.go) and OKEP-5377's policies.

use nb_model::{
    GatewayChassis, LogicalRouter, LogicalRouterPolicy, LogicalRouterPort,
    LogicalRouterStaticRoute, LogicalRouterStaticRoutePolicy, LogicalSwitch, LogicalSwitchPort,
    Nat,
};

use nb_model::keys::ovn_k8s::UDN_ENABLED_SERVICE;

use crate::testing::{cluster, node, service};
use crate::topology::{network, Inputs, TopologyConfig};

const CHASSIS: &str = "cb9ec8fa-b409-4ef3-9f42-d9283c47aac6";
const P: &str = "cluster_udn_isolatednet_";
const NET: &str = "cluster_udn_isolatednet";

fn cudn(subnets: &str, network_id: u32) -> String {
    format!(
        "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata:\n  name: isolatednet\n  annotations: {{k8s.ovn.org/network-id: '{network_id}'}}\n\
         spec:\n  namespaceSelector: {{}}\n  network:\n    topology: Layer3\n    layer3:\n      role: Primary\n      subnets: {subnets}\n"
    )
}

fn gw_config(ip: &str, hop: &str) -> String {
    format!(
        r#"{{"default":{{"mode":"shared","bridge-id":"breth0","interface-id":"breth0_test-node","mac-address":"0a:58:c0:a8:7e:ca","ip-addresses":["{ip}"],"next-hops":["{hop}"],"node-port-enable":"true"}}}}"#
    )
}

/// OVN-Kubernetes' test node (`layer3_user_defined_network_controller_test.go`): id 4 (its GR join address 100.65.0.4), transit address
/// 100.88.0.3 (annotated), host subnet 192.168.1.0/24, a gateway on 192.168.126.202.
fn test_node() -> String {
    node(
        "test-node",
        &[
            ("k8s.ovn.org/node-id", "4"),
            ("k8s.ovn.org/node-chassis-id", CHASSIS),
            (
                "k8s.ovn.org/node-subnets",
                r#"{"cluster_udn_isolatednet":["192.168.1.0/24"]}"#,
            ),
            (
                "k8s.ovn.org/node-transit-switch-port-ifaddr",
                r#"{"ipv4":"100.88.0.3/16"}"#,
            ),
            (
                "k8s.ovn.org/l3-gateway-config",
                &gw_config("192.168.126.202/24", "192.168.126.1"),
            ),
        ],
    )
}

fn build(yaml: &str, zone: Option<&str>) -> crate::topology::Desired {
    build_with(yaml, zone, &TopologyConfig::default())
}

fn build_with(yaml: &str, zone: Option<&str>, config: &TopologyConfig) -> crate::topology::Desired {
    let (inv, alloc) = cluster(yaml);
    let inputs = Inputs {
        inventory: &inv,
        allocations: &alloc,
        zone,
        config,
        prepared: None,
    };
    network(&inputs, NET).unwrap()
}

fn ids<T>(
    d: &crate::topology::Desired,
    refs: &std::collections::BTreeSet<ovsdb_proto::model::Ref<T>>,
) -> Vec<String> {
    refs.iter()
        .map(|r| d.identity_of(r).unwrap().to_owned())
        .collect()
}

#[test]
fn the_cluster_router_and_its_ports_match_the_reference() {
    let d = build(
        &(cudn("[{cidr: 192.168.0.0/16, hostSubnet: 24}]", 2) + &test_node()),
        None,
    );
    let cr = d
        .get::<LogicalRouter>(&format!("{P}ovn_cluster_router"))
        .unwrap();
    assert_eq!(cr.options["always_learn_from_arp_request"], "false");
    assert_eq!(cr.options.len(), 1);
    assert_eq!(cr.external_ids["k8s-cluster-router"], "yes");
    assert_eq!(cr.external_ids["k8s.ovn.org/network"], NET);
    assert_eq!(cr.external_ids["k8s.ovn.org/topology"], "layer3");
    assert_eq!(
        d.identity_of(cr.copp.as_ref().unwrap()),
        Some("ovnkube-default")
    );
    let mut ports = ids(&d, &cr.ports);
    ports.sort();
    assert_eq!(
        ports,
        [
            format!("{P}rtots-test-node"),
            format!("rtoj-{P}ovn_cluster_router"),
            format!("rtos-{P}test-node")
        ]
    );

    let rtos = d
        .get::<LogicalRouterPort>(&format!("rtos-{P}test-node"))
        .unwrap();
    assert_eq!(rtos.networks.iter().collect::<Vec<_>>(), ["192.168.1.1/24"]);
    assert_eq!(rtos.mac, "0a:58:c0:a8:01:01");
    assert_eq!(rtos.options["gateway_mtu"], "1400");
    let gc_name = format!("rtos-{P}test-node-{CHASSIS}");
    assert_eq!(
        ids(&d, &rtos.gateway_chassis),
        std::slice::from_ref(&gc_name)
    );
    let gc = d.get::<GatewayChassis>(&gc_name).unwrap();
    assert_eq!((gc.chassis_name.as_str(), gc.priority), (CHASSIS, 1));

    let rtoj = d
        .get::<LogicalRouterPort>(&format!("rtoj-{P}ovn_cluster_router"))
        .unwrap();
    assert_eq!(rtoj.networks.iter().collect::<Vec<_>>(), ["100.65.0.1/16"]);
    assert_eq!(rtoj.mac, "0a:58:64:41:00:01");

    let rtots = d
        .get::<LogicalRouterPort>(&format!("{P}rtots-test-node"))
        .unwrap();
    assert_eq!(rtots.networks.iter().collect::<Vec<_>>(), ["100.88.0.3/16"]);
    assert_eq!(rtots.mac, "0a:58:64:58:00:03");
    assert_eq!(rtots.options["mcast_flood"], "true");
}

#[test]
fn switches_carry_their_subnets_and_ports() {
    let d = build(
        &(cudn("[{cidr: 192.168.0.0/16, hostSubnet: 24}]", 2) + &test_node()),
        None,
    );
    let ls = d.get::<LogicalSwitch>(&format!("{P}test-node")).unwrap();
    assert_eq!(ls.other_config["subnet"], "192.168.1.0/24");
    // OVN-Kubernetes' UpdateNodeSwitchExcludeIPs: no exclusion once the management
    // port exists (it is written with the switch).
    assert!(
        !ls.other_config.contains_key("exclude_ips"),
        "{:?}",
        ls.other_config
    );
    assert!(ls.ports.len() == 2);
    assert_eq!(ls.external_ids["k8s.ovn.org/role"], "primary");
    let mut lbgs = ids(&d, &ls.load_balancer_group);
    lbgs.sort();
    assert_eq!(
        lbgs,
        [
            format!("{P}clusterLBGroup"),
            format!("{P}clusterSwitchLBGroup")
        ]
    );
    let stor = d
        .get::<LogicalSwitchPort>(&format!("stor-{P}test-node"))
        .unwrap();
    assert_eq!(stor.type_, "router");
    assert_eq!(stor.options["router-port"], format!("rtos-{P}test-node"));
    let mgmt = d
        .get::<LogicalSwitchPort>(&format!("k8s-{P}test-node"))
        .unwrap();
    assert_eq!(
        mgmt.addresses.iter().collect::<Vec<_>>(),
        ["0a:58:c0:a8:01:02 192.168.1.2"]
    );

    let ts = d
        .get::<LogicalSwitch>(&format!("{P}transit_switch"))
        .unwrap();
    assert_eq!(
        ts.other_config["requested-tnl-key"],
        (16711683 + 2).to_string()
    );
    assert_eq!(
        ts.other_config["interconn-ts"],
        format!("{P}transit_switch")
    );
    assert_eq!(ts.other_config["mcast_querier"], "false");
    let tstor = d
        .get::<LogicalSwitchPort>(&format!("{P}tstor-test-node"))
        .unwrap();
    assert_eq!(tstor.type_, "router");
    assert_eq!(tstor.options["requested-tnl-key"], "4");
    assert_eq!(tstor.options["router-port"], format!("{P}rtots-test-node"));
    assert_eq!(tstor.external_ids["node"], "test-node");
}

#[allow(clippy::too_many_lines)] // a test: one story, start to end
#[test]
fn routes_policies_and_nat_match_the_reference() {
    let d = build(
        &(cudn("[{cidr: 192.168.0.0/16, hostSubnet: 24}]", 2) + &test_node()),
        None,
    );
    let cr_name = format!("{P}ovn_cluster_router");
    let route = |policy: &str, prefix: &str, hop: &str| {
        d.get::<LogicalRouterStaticRoute>(&format!("{cr_name}|{policy}|{prefix}|{hop}"))
    };
    assert!(route("dst-ip", "100.65.0.4", "100.65.0.4").is_some());
    let src = route("src-ip", "192.168.1.0/24", "100.65.0.4").unwrap();
    assert_eq!(src.policy, Some(LogicalRouterStaticRoutePolicy::SrcIp));
    let m =
        format!("inport == \"rtos-{P}test-node\" && ip4.dst == 192.168.126.202 /* {P}test-node */");
    let p = d
        .get::<LogicalRouterPolicy>(&format!("{cr_name}|1004|{m}"))
        .unwrap();
    assert_eq!(p.nexthops.iter().collect::<Vec<_>>(), ["192.168.1.2"]);
    // expectedLayer3EgressEntities: a second 1004 policy for the gateway router's
    // masquerade address (network id 2: 169.254.0.13), the node's address too.
    let m =
        format!("inport == \"rtos-{P}test-node\" && ip4.dst == 169.254.0.13 /* {P}test-node */");
    let p = d
        .get::<LogicalRouterPolicy>(&format!("{cr_name}|1004|{m}"))
        .unwrap();
    assert_eq!(p.nexthops.iter().collect::<Vec<_>>(), ["192.168.1.2"]);
    let bindings: Vec<(String, String)> = d
        .all::<nb_model::StaticMacBinding>()
        .into_values()
        .map(|b| (b.logical_port, b.ip))
        .collect();
    let rtoe = format!("rtoe-GR_{P}test-node");
    assert_eq!(
        bindings,
        [
            (rtoe.clone(), "169.254.0.2".to_string()),
            (rtoe, "169.254.0.4".to_string())
        ]
    );
    let nat = d
        .all::<Nat>()
        .into_values()
        .find(|n| n.logical_port.is_some())
        .unwrap();
    // Network id 2: masquerade addresses 169.254.0.13 (gateway) and .14 (management port).
    assert_eq!(nat.external_ip, "169.254.0.14");
    assert_eq!(nat.logical_ip, "192.168.1.0/24");
    assert_eq!(nat.match_, "eth.dst == 0a:58:c0:a8:01:02");
    // Only its logical port, as OVN-Kubernetes' `BuildSNATWithMatch` writes it (one local
    // node: one distributed gateway port on the cluster router).
    assert_eq!(
        nat.logical_port.as_deref(),
        Some(format!("rtos-{P}test-node").as_str())
    );
    assert!(nat.gateway_port.is_none(), "{nat:?}");
    // Every NAT rule with OVN-Kubernetes' ephemeral port range (libovsdb/ops buildNAT).
    for n in d.all::<Nat>().values() {
        assert_eq!(n.external_port_range, "32768-60999", "{n:?}");
    }

    // The gateway router.
    let gr = d.get::<LogicalRouter>(&format!("GR_{P}test-node")).unwrap();
    assert_eq!(gr.options["chassis"], CHASSIS);
    // The node's address, then the network's gateway masquerade address
    // (`nodeGatewayConfig` appends it before `createGWRouter` joins them).
    assert_eq!(gr.external_ids["physical_ip"], "192.168.126.202");
    assert_eq!(
        gr.external_ids["physical_ips"],
        "192.168.126.202,169.254.0.13"
    );
    assert_eq!(gr.options["lb_force_snat_ip"], "router_ip");
    assert_eq!(gr.options["mac_binding_age_threshold"], "300");
    assert_eq!(gr.options["disable_garp_rarp"], "true");
    assert_eq!(gr.external_ids["physical_ip"], "192.168.126.202");
    assert_eq!(
        gr.load_balancer_group.len(),
        2,
        "NodePorts enabled: router group too"
    );
    let rtoj = d
        .get::<LogicalRouterPort>(&format!("rtoj-GR_{P}test-node"))
        .unwrap();
    assert_eq!(rtoj.networks.iter().collect::<Vec<_>>(), ["100.65.0.4/16"]);
    assert_eq!(rtoj.mac, "0a:58:64:41:00:04");
    let gr_name = format!("GR_{P}test-node");
    let gr_route = |prefix: &str, hop: &str| {
        d.get::<LogicalRouterStaticRoute>(&format!("{gr_name}|dst-ip|{prefix}|{hop}"))
    };
    assert!(gr_route("192.168.0.0/16", "100.65.0.1").is_some());
    let default = gr_route("0.0.0.0/0", "192.168.126.1").unwrap();
    assert_eq!(
        default.output_port.as_deref(),
        Some(format!("rtoe-GR_{P}test-node").as_str())
    );
    assert!(gr_route("169.254.0.0/17", "169.254.0.4").is_some());
    let rtoe = d
        .get::<LogicalRouterPort>(&format!("rtoe-GR_{P}test-node"))
        .unwrap();
    assert_eq!(
        rtoe.networks.iter().collect::<Vec<_>>(),
        ["169.254.0.13/32", "192.168.126.202/24"]
    );
    let snats: Vec<(String, String)> = d
        .all::<Nat>()
        .into_values()
        .filter(|n| n.logical_port.is_none())
        .map(|n| (n.logical_ip, n.external_ip))
        .collect();
    assert!(
        snats.contains(&("100.65.0.4".into(), "169.254.0.13".into())),
        "{snats:?}"
    );
    assert!(
        snats.contains(&("192.168.0.0/16".into(), "169.254.0.13".into())),
        "{snats:?}"
    );
    let ext = d
        .get::<LogicalSwitch>(&format!("ext_{P}test-node"))
        .unwrap();
    assert_eq!(ext.ports.len(), 2);
    let localnet = d
        .get::<LogicalSwitchPort>(&format!("breth0_{P}test-node"))
        .unwrap();
    assert_eq!(localnet.type_, "localnet");
    assert_eq!(localnet.options["network_name"], "physnet");
}

#[test]
fn several_subnets_get_a_no_reroute_policy_per_ordered_pair() {
    // OKEP-5377's example: 10.1.0.0/16 and 10.2.0.0/16, EgressIP enabled.
    let config = TopologyConfig {
        egress_ip: true,
        ..TopologyConfig::default()
    };
    let d = build_with(
        &(cudn("[{cidr: 10.1.0.0/16}, {cidr: 10.2.0.0/16}]", 2) + &node("n1", &[])),
        None,
        &config,
    );
    let cr_name = format!("{P}ovn_cluster_router");
    let matches: Vec<String> = d
        .all::<LogicalRouterPolicy>()
        .into_values()
        .filter(|p| p.priority == 102)
        .map(|p| p.match_)
        .collect();
    for (a, b) in [
        ("10.1", "10.1"),
        ("10.1", "10.2"),
        ("10.2", "10.2"),
        ("10.2", "10.1"),
    ] {
        let m = format!("ip4.src == {a}.0.0/16 && ip4.dst == {b}.0.0/16");
        assert!(matches.contains(&m), "{m} missing from {matches:?}");
    }
    // The default network's join subnet, not the network's own (100.65.0.0/16).
    assert!(matches.contains(&"ip4.src == 10.1.0.0/16 && ip4.dst == 100.64.0.0/16".to_string()));
    assert!(matches.contains(&"pkt.mark == 42".to_string()));
    assert_eq!(matches.len(), 4 + 2 + 1);
    let cr = d.get::<LogicalRouter>(&cr_name).unwrap();
    assert_eq!(cr.policies.len(), 7, "no gateway config: no 1004 policy");
}

#[test]
fn no_reroute_policies_only_with_egress_ip_enabled() {
    // OVN-Kubernetes' default: EgressIP off, no priority-102 policy.
    let d = build(&(cudn("[{cidr: 10.1.0.0/16}]", 2) + &node("n1", &[])), None);
    let n = d
        .all::<LogicalRouterPolicy>()
        .into_values()
        .filter(|p| p.priority == 102)
        .count();
    assert_eq!(n, 0);
}

#[test]
fn remote_nodes_get_a_remote_port_and_routes_through_it() {
    let remote = node(
        "n2",
        &[
            ("k8s.ovn.org/node-id", "5"),
            ("k8s.ovn.org/node-chassis-id", "chassis-2"),
            (
                "k8s.ovn.org/node-subnets",
                r#"{"cluster_udn_isolatednet":["10.1.2.0/24","fd00:10:0:2::/64"]}"#,
            ),
        ],
    );
    let local = node(
        "n1",
        &[
            ("k8s.ovn.org/node-id", "2"),
            ("k8s.ovn.org/node-chassis-id", "chassis-1"),
        ],
    );
    let d = build(
        &(cudn("[{cidr: 10.1.0.0/16}, {cidr: \"fd00:10::/48\"}]", 3) + &local + &remote),
        Some("n1"),
    );
    let port = d.get::<LogicalSwitchPort>(&format!("{P}tstor-n2")).unwrap();
    assert_eq!(port.type_, "remote");
    assert_eq!(port.options["requested-tnl-key"], "5");
    assert_eq!(port.options["requested-chassis"], "chassis-2");
    assert_eq!(
        port.addresses.iter().collect::<Vec<_>>(),
        ["0a:58:64:58:00:05 100.88.0.5/16 fd97::5/64"]
    );
    assert!(
        d.get::<LogicalSwitch>(&format!("{P}n2")).is_none(),
        "no switch for a remote node"
    );
    assert!(d.get::<LogicalRouter>(&format!("GR_{P}n2")).is_none());
    let cr_name = format!("{P}ovn_cluster_router");
    for (prefix, hop) in [
        ("10.1.2.0/24", "100.88.0.5"),
        ("fd00:10:0:2::/64", "fd97::5"),
        ("100.65.0.5/32", "100.88.0.5"),
        ("fd99::5/128", "fd97::5"),
    ] {
        let r = d
            .get::<LogicalRouterStaticRoute>(&format!("{cr_name}|dst-ip|{prefix}|{hop}"))
            .unwrap_or_else(|| panic!("route {prefix} via {hop}"));
        assert_eq!(r.external_ids["ic-node"], "n2");
    }
    // The local node is dual stack: its switch has both prefixes, its port both
    // gateways. Its subnets come after the highest index in use (n2's).
    let ls = d.get::<LogicalSwitch>(&format!("{P}n1")).unwrap();
    assert_eq!(ls.other_config["subnet"], "10.1.3.0/24");
    assert_eq!(ls.other_config["ipv6_prefix"], "fd00:10:0:3::");
    let rtos = d.get::<LogicalRouterPort>(&format!("rtos-{P}n1")).unwrap();
    assert_eq!(rtos.networks.len(), 2);
    assert_eq!(rtos.mac, "0a:58:0a:01:03:01", "MAC from the IPv4 gateway");
    // The management port's SNAT for both families (buildUDNEgressSNAT): network id
    // 3's management-port masquerade addresses 169.254.0.16 and fd69::10, both for
    // the management port's MAC (from its IPv4 address).
    let mut snats: Vec<(String, String, String)> = d
        .all::<Nat>()
        .into_values()
        .filter(|n| n.logical_port.is_some())
        .map(|n| (n.logical_ip, n.external_ip, n.match_))
        .collect();
    snats.sort();
    let m = "eth.dst == 0a:58:0a:01:03:02".to_string();
    assert_eq!(
        snats,
        [
            ("10.1.3.0/24".into(), "169.254.0.16".into(), m.clone()),
            ("fd00:10:0:3::/64".into(), "fd69::10".into(), m),
        ]
    );
}

#[test]
fn a_node_with_no_zone_filter_is_local_and_the_result_is_deterministic() {
    let yaml = cudn("[{cidr: 10.1.0.0/16}]", 2) + &node("b", &[]) + &node("a", &[]);
    let d1 = build(&yaml, None);
    let d2 = build(&yaml, None);
    assert_eq!(d1, d2);
    // Nodes are taken in name order: a gets id 2 and 10.1.0.0/24, b id 3 and 10.1.1.0/24.
    let a = d1.get::<LogicalSwitch>(&format!("{P}a")).unwrap();
    assert_eq!(a.other_config["subnet"], "10.1.0.0/24");
    let b = d1.get::<LogicalSwitch>(&format!("{P}b")).unwrap();
    assert_eq!(b.other_config["subnet"], "10.1.1.0/24");
    // No chassis annotation: no gateway router.
    assert!(d1.get::<LogicalRouter>(&format!("GR_{P}a")).is_none());
}

#[test]
fn local_gateway_mode_commits_all_and_sends_the_nodes_pods_out_through_the_management_port() {
    // docs/ovn-kubernetes.md §2.1 and §2.6: ct-commit-all on the cluster router; the src-ip route
    // of the node's host subnet via the management port (192.168.1.2), not the GR.
    let (inv, alloc) =
        cluster(&(cudn("[{cidr: 192.168.0.0/16, hostSubnet: 24}]", 2) + &test_node()));
    let config = TopologyConfig {
        gateway_mode: crate::topology::GatewayMode::Local,
        ..TopologyConfig::default()
    };
    let inputs = Inputs {
        inventory: &inv,
        allocations: &alloc,
        zone: None,
        config: &config,
        prepared: None,
    };
    let d = network(&inputs, NET).unwrap();
    let cr_name = format!("{P}ovn_cluster_router");
    let cr = d.get::<LogicalRouter>(&cr_name).unwrap();
    assert_eq!(cr.options["ct-commit-all"], "true");
    let route = |policy: &str, prefix: &str, hop: &str| {
        d.get::<LogicalRouterStaticRoute>(&format!("{cr_name}|{policy}|{prefix}|{hop}"))
    };
    assert!(route("src-ip", "192.168.1.0/24", "192.168.1.2").is_some());
    assert!(route("src-ip", "192.168.1.0/24", "100.65.0.4").is_none());
    assert!(route("dst-ip", "100.65.0.4", "100.65.0.4").is_some());
    // Shared mode (the default) has neither.
    let d = build(
        &(cudn("[{cidr: 192.168.0.0/16, hostSubnet: 24}]", 2) + &test_node()),
        None,
    );
    let cr = d.get::<LogicalRouter>(&cr_name).unwrap();
    assert!(!cr.options.contains_key("ct-commit-all"));
}

#[test]
fn a_node_without_a_gateway_config_gets_its_management_port_and_no_gateway_router() {
    // OVN-Kubernetes builds a gateway only from k8s.ovn.org/l3-gateway-config; the
    // management port, its SNAT and (local gateway mode) its source route are the
    // node's whatever its gateway.
    let yaml = cudn("[{cidr: 192.168.0.0/16, hostSubnet: 24}]", 2)
        + &node(
            "test-node",
            &[
                ("k8s.ovn.org/node-id", "4"),
                ("k8s.ovn.org/node-chassis-id", CHASSIS),
                (
                    "k8s.ovn.org/node-subnets",
                    r#"{"cluster_udn_isolatednet":["192.168.1.0/24"]}"#,
                ),
            ],
        );
    let (inv, alloc) = cluster(&yaml);
    let config = TopologyConfig {
        gateway_mode: crate::topology::GatewayMode::Local,
        ..TopologyConfig::default()
    };
    let inputs = Inputs {
        inventory: &inv,
        allocations: &alloc,
        zone: None,
        config: &config,
        prepared: None,
    };
    let d = network(&inputs, NET).unwrap();
    let cr_name = format!("{P}ovn_cluster_router");
    assert!(d
        .get::<LogicalSwitchPort>(&format!("k8s-{P}test-node"))
        .is_some());
    assert!(d
        .get::<Nat>(&format!("{cr_name}|snat|192.168.1.0/24|169.254.0.14"))
        .is_some());
    assert!(d
        .get::<LogicalRouterStaticRoute>(&format!("{cr_name}|src-ip|192.168.1.0/24|192.168.1.2"))
        .is_some());
    assert!(d
        .get::<LogicalRouter>(&format!("GR_{P}test-node"))
        .is_none());
    assert!(d
        .get::<LogicalRouterPort>(&format!("rtoj-GR_{P}test-node"))
        .is_none());
    assert!(d
        .get::<LogicalRouterStaticRoute>(&format!("{cr_name}|dst-ip|100.65.0.4|100.65.0.4"))
        .is_none());
    assert!(d
        .all::<LogicalRouterPolicy>()
        .values()
        .all(|p| p.priority != 1004));
    assert!(d.all::<nb_model::StaticMacBinding>().is_empty());
}

#[test]
fn the_default_networks_allowed_services_are_routed_through_the_management_port() {
    // configureUDNEnabledServiceRoute on Layer3: the cluster router, via the local
    // node's management address (.2 of its host subnet).
    let yaml = cudn("[{cidr: 192.168.0.0/16, hostSubnet: 24}]", 2)
        + &test_node()
        + &service("kube-system", "kube-dns", &["10.96.0.10"]);
    let d = build(&yaml, Some("test-node"));
    let id = format!("{P}ovn_cluster_router|dst-ip|10.96.0.10|192.168.1.2");
    let r = d.get::<LogicalRouterStaticRoute>(&id).expect(&id);
    assert_eq!(r.policy, Some(LogicalRouterStaticRoutePolicy::DstIp));
    assert_eq!(r.external_ids[UDN_ENABLED_SERVICE], "kube-system/kube-dns");
    assert_eq!(r.external_ids["k8s.ovn.org/topology"], "layer3");

    // A namespace the network selects holds the service: it is the network's own
    // service then, not the default network's.
    let own = yaml + "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: kube-system}\n";
    let d = build(&own, Some("test-node"));
    assert!(!d
        .all::<LogicalRouterStaticRoute>()
        .values()
        .any(|r| r.external_ids.contains_key(UDN_ENABLED_SERVICE)));
}

#[test]
fn with_several_local_nodes_the_management_snat_names_its_gateway_port() {
    // One NB for two nodes: the cluster router has a distributed gateway port per
    // node, and OVN needs each NAT to name the one it is on.
    let other = node(
        "other-node",
        &[
            ("k8s.ovn.org/node-id", "5"),
            ("k8s.ovn.org/node-chassis-id", "other-chassis"),
            (
                "k8s.ovn.org/node-subnets",
                r#"{"cluster_udn_isolatednet":["192.168.2.0/24"]}"#,
            ),
            (
                "k8s.ovn.org/node-transit-switch-port-ifaddr",
                r#"{"ipv4":"100.88.0.5/16"}"#,
            ),
        ],
    );
    let yaml = cudn("[{cidr: 192.168.0.0/16, hostSubnet: 24}]", 2) + &test_node() + &other;
    let d = build(&yaml, None);
    let snats: Vec<Nat> = d
        .all::<Nat>()
        .into_values()
        .filter(|n| n.match_.starts_with("eth.dst"))
        .collect();
    assert_eq!(snats.len(), 2, "{snats:?}");
    assert!(snats.iter().all(|n| n.gateway_port.is_some()), "{snats:?}");
    // In test-node's zone alone, the other node remote: no gateway port named.
    let d = build(&yaml, Some("test-node"));
    let snats: Vec<Nat> = d
        .all::<Nat>()
        .into_values()
        .filter(|n| n.match_.starts_with("eth.dst"))
        .collect();
    assert_eq!(snats.len(), 1, "{snats:?}");
    assert!(snats[0].gateway_port.is_none(), "{snats:?}");
}

/// The owner keys OVN-Kubernetes stamps a row of its `DbObjectIDs` with (its
/// `GetExternalIDs`): controller, owner type, name and id.
fn object_ids(kind: &str, name: &str, id: &str) -> Vec<(String, String)> {
    [
        (
            "k8s.ovn.org/owner-controller",
            format!("{NET}-network-controller"),
        ),
        ("k8s.ovn.org/owner-type", kind.to_owned()),
        ("k8s.ovn.org/name", name.to_owned()),
        ("k8s.ovn.org/id", id.to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// OVN-Kubernetes' `egressip_udn_l3_test.go` (the node switch's `NetpolNode` ACL) and
/// `multihoming_test.go` / `master_test.go` (`newNetworkClusterPortGroup`,
/// `newNetworkRouterPortGroup`): the rows network policies build on.
#[test]
fn the_allow_from_node_acl_and_the_cluster_port_groups_match_the_reference() {
    use nb_model::{Acl, AclAction, AclDirection, PortGroup};
    let d = build(
        &(cudn("[{cidr: 192.168.0.0/16, hostSubnet: 24}]", 2) + &test_node()),
        None,
    );
    let switch = format!("{P}test-node");
    let ctrl = format!("{NET}-network-controller");
    let acl_id = format!("{ctrl}:NetpolNode:{switch}:192.168.1.2");
    let acl = d.get::<Acl>(&format!("@{acl_id}")).unwrap();
    assert_eq!(acl.direction, AclDirection::ToLport);
    assert_eq!(acl.action, AclAction::AllowRelated);
    assert_eq!(acl.match_, "ip4.src==192.168.1.2");
    assert_eq!((acl.priority, acl.tier), (1001, 2));
    assert_eq!(acl.meter.as_deref(), Some("acl-logging"));
    assert_eq!((acl.name, acl.severity, acl.log), (None, None, false));
    let mut want = object_ids("NetpolNode", &switch, &acl_id);
    want.push(("ip".into(), "192.168.1.2".into()));
    want.sort();
    assert_eq!(acl.external_ids.into_iter().collect::<Vec<_>>(), want);
    let ls = d.get::<LogicalSwitch>(&switch).unwrap();
    assert_eq!(ids(&d, &ls.acls), [format!("@{acl_id}")]);

    // Named `a` and the FNV-1a 64 of the id (computed apart from netconnect's code).
    for (name, hashed, ports) in [
        (
            "clusterPortGroup",
            "a7625753787500193510",
            vec![format!("k8s-{P}test-node")],
        ),
        ("clusterRtrPortGroup", "a7906938476932160434", vec![]),
    ] {
        let id = format!("{ctrl}:Cluster:{name}");
        let pg = d.get::<PortGroup>(&format!("@{id}")).unwrap();
        assert_eq!(pg.name, hashed);
        assert_eq!(ids(&d, &pg.ports), ports, "{name}");
        assert!(pg.acls.is_empty());
        let mut want = object_ids("Cluster", name, &id);
        want.sort();
        assert_eq!(pg.external_ids.into_iter().collect::<Vec<_>>(), want);
    }
}
