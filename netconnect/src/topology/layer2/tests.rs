//! Layer2 rows pinned with OVN-Kubernetes' vector (docs/ovn-kubernetes.md §3.2, from OVN-Kubernetes'
//! layer2_user_defined_network_controller_test.go): network id 2, tunnel keys
//! `[16711685, 16715780]`, node `test-node` with id 4 and a gateway on
//! 192.168.126.202, subnet 100.200.0.0/16, and a stale remote node with id 5.

use nb_model::{
    LogicalRouter, LogicalRouterPolicy, LogicalRouterPort, LogicalRouterStaticRoute,
    LogicalRouterStaticRoutePolicy, LogicalSwitch, LogicalSwitchPort, Nat, StaticMacBinding,
};

use nb_model::keys::ovn_k8s::UDN_ENABLED_SERVICE;

use crate::testing::{cluster, cluster_in, node, service};
use crate::topology::{network, Inputs, TopologyConfig};

const P: &str = "cluster_udn_isolatednet_";
const NET: &str = "cluster_udn_isolatednet";

fn cudn(subnets: &str, annotations: &str) -> String {
    format!(
        "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata:\n  name: isolatednet\n  annotations: {{{annotations}}}\n\
         spec:\n  namespaceSelector: {{}}\n  network:\n    topology: Layer2\n    layer2:\n      role: Primary\n      subnets: {subnets}\n"
    )
}

const GATEWAY: &str = r#"{"default":{"mode":"shared","bridge-id":"breth0","interface-id":"breth0_test-node","mac-address":"0a:58:c0:a8:7e:ca","ip-addresses":["192.168.126.202/24"],"next-hops":["192.168.126.1"],"node-port-enable":"true"}}"#;

fn nodes() -> String {
    nodes_with(&[("k8s.ovn.org/l3-gateway-config", GATEWAY)])
}

/// The vector's two nodes, `test-node` with `extra` annotations.
fn nodes_with(extra: &[(&str, &str)]) -> String {
    let mut local = vec![
        ("k8s.ovn.org/node-id", "4"),
        ("k8s.ovn.org/node-chassis-id", "chassis-4"),
    ];
    local.extend_from_slice(extra);
    node("test-node", &local)
        + &node(
            "stale-node",
            &[
                ("k8s.ovn.org/node-id", "5"),
                ("k8s.ovn.org/node-chassis-id", "chassis-5"),
            ],
        )
}

fn build(yaml: &str) -> crate::topology::Desired {
    build_with(yaml, TopologyConfig::default())
}

fn build_with(yaml: &str, config: TopologyConfig) -> crate::topology::Desired {
    let (inv, alloc) = cluster(yaml);
    let inputs = Inputs {
        inventory: &inv,
        allocations: &alloc,
        zone: Some("test-node"),
        config: &config,
        prepared: None,
    };
    network(&inputs, NET).unwrap()
}

fn vector() -> crate::topology::Desired {
    build(
        &(cudn(
            "[100.200.0.0/16]",
            "k8s.ovn.org/network-id: '2', k8s.ovn.org/tunnel-keys: '[16711685,16715780]'",
        ) + &nodes()),
    )
}

#[test]
fn the_transit_router_and_its_switch_port_match_the_reference() {
    let d = vector();
    let tr = d
        .get::<LogicalRouter>(&format!("{P}transit_router"))
        .unwrap();
    assert_eq!(tr.options.len(), 1);
    assert_eq!(tr.options["requested-tnl-key"], "16715780");
    assert_eq!(tr.external_ids["k8s-cluster-router"], "yes");
    assert_eq!(tr.external_ids["k8s.ovn.org/topology"], "layer2");
    let trtos = d
        .get::<LogicalRouterPort>(&format!("trtos-{P}ovn_layer2_switch"))
        .unwrap();
    assert_eq!(
        trtos.networks.iter().collect::<Vec<_>>(),
        ["100.200.0.1/16"]
    );
    assert_eq!(trtos.mac, "0a:58:64:c8:00:01");
    assert_eq!(trtos.options["gateway_mtu"], "1400");
    assert_eq!(trtos.options["requested-tnl-key"], "1");
    assert_eq!(
        trtos
            .gateway_chassis
            .iter()
            .filter_map(|r| d.identity_of(r))
            .collect::<Vec<_>>(),
        [format!("trtos-{P}ovn_layer2_switch-chassis-4")]
    );
    let ls = d
        .get::<LogicalSwitch>(&format!("{P}ovn_layer2_switch"))
        .unwrap();
    assert_eq!(ls.other_config["requested-tnl-key"], "16711685");
    assert_eq!(ls.other_config["subnet"], "100.200.0.0/16");
    assert_eq!(
        ls.other_config["interconn-ts"],
        format!("{P}ovn_layer2_switch")
    );
    let stotr = d
        .get::<LogicalSwitchPort>(&format!("stotr-{P}ovn_layer2_switch"))
        .unwrap();
    assert_eq!(
        stotr.options["router-port"],
        format!("trtos-{P}ovn_layer2_switch")
    );
}

#[test]
fn the_local_gateway_router_pair_matches_the_reference() {
    let d = vector();
    let trtor = d
        .get::<LogicalRouterPort>(&format!("trtor-GR_{P}test-node"))
        .unwrap();
    assert_eq!(trtor.networks.iter().collect::<Vec<_>>(), ["100.88.0.8/31"]);
    assert_eq!(trtor.mac, "0a:58:64:58:00:08");
    assert_eq!(trtor.options["requested-tnl-key"], "14");
    assert_eq!(
        trtor.peer.as_deref(),
        Some(format!("rtotr-GR_{P}test-node").as_str())
    );
    let rtotr = d
        .get::<LogicalRouterPort>(&format!("rtotr-GR_{P}test-node"))
        .unwrap();
    assert_eq!(
        rtotr.networks.iter().collect::<Vec<_>>(),
        ["100.65.0.4/16", "100.88.0.9/31"]
    );
    assert_eq!(rtotr.mac, "0a:58:64:41:00:04");
    assert_eq!(
        rtotr.peer.as_deref(),
        Some(format!("trtor-GR_{P}test-node").as_str())
    );
    let gr = d.get::<LogicalRouter>(&format!("GR_{P}test-node")).unwrap();
    assert_eq!(gr.options["lb_force_snat_ip"], "100.65.0.4");
    // The node's address, then network 2's gateway masquerade address (Layer2's
    // `nodeGatewayConfig` appends it too).
    assert_eq!(
        gr.external_ids["physical_ips"],
        "192.168.126.202,169.254.0.13"
    );
    let tr = format!("{P}transit_router");
    let route = |policy: &str, prefix: &str, hop: &str| {
        d.get::<LogicalRouterStaticRoute>(&format!("{tr}|{policy}|{prefix}|{hop}"))
    };
    let src = route("src-ip", "100.200.0.0/16", "100.88.0.9").unwrap();
    assert_eq!(src.policy, Some(LogicalRouterStaticRoutePolicy::SrcIp));
    assert!(route("dst-ip", "100.65.0.4", "100.88.0.9").is_some());
    let gr_route = d
        .get::<LogicalRouterStaticRoute>(&format!(
            "GR_{P}test-node|dst-ip|100.200.0.0/16|100.88.0.8"
        ))
        .unwrap();
    assert_eq!(
        gr_route.output_port.as_deref(),
        Some(format!("rtotr-GR_{P}test-node").as_str())
    );
}

#[test]
fn a_remote_node_gets_a_port_bound_to_its_chassis_and_a_route() {
    let d = vector();
    let trtor = d
        .get::<LogicalRouterPort>(&format!("trtor-GR_{P}stale-node"))
        .unwrap();
    assert_eq!(
        trtor.networks.iter().collect::<Vec<_>>(),
        ["100.88.0.10/31"]
    );
    assert_eq!(trtor.options["requested-tnl-key"], "15");
    assert_eq!(trtor.options["requested-chassis"], "chassis-5");
    assert_eq!(trtor.peer, None);
    assert_eq!(trtor.external_ids["k8s.ovn.org/node"], "stale-node");
    let r = d
        .get::<LogicalRouterStaticRoute>(&format!(
            "{P}transit_router|dst-ip|100.65.0.5|100.88.0.11"
        ))
        .unwrap();
    assert_eq!(r.external_ids["k8s.ovn.org/node"], "stale-node");
    assert!(d
        .get::<LogicalRouter>(&format!("GR_{P}stale-node"))
        .is_none());
}

#[test]
fn keys_are_allocated_when_missing_and_transit_moves_off_an_overlap() {
    let d = build(&(cudn("[100.88.0.0/24, \"fd10::/64\"]", "") + &nodes()));
    let tr = d
        .get::<LogicalRouter>(&format!("{P}transit_router"))
        .unwrap();
    // The first network gets id 1; its switch key is 16711683 + 1, the router key the
    // first of the shared allocator.
    assert_eq!(tr.options["requested-tnl-key"], "16715779");
    let ls = d
        .get::<LogicalSwitch>(&format!("{P}ovn_layer2_switch"))
        .unwrap();
    assert_eq!(ls.other_config["requested-tnl-key"], "16711684");
    assert_eq!(ls.other_config["ipv6_prefix"], "fd10::");
    // 100.88.0.0/24 overlaps the default transit subnet: it moves to 100.89.0.0/16.
    let trtor = d
        .get::<LogicalRouterPort>(&format!("trtor-GR_{P}test-node"))
        .unwrap();
    assert_eq!(
        trtor.networks.iter().collect::<Vec<_>>(),
        ["100.89.0.8/31", "fd97::8/127"]
    );
    let trtos = d
        .get::<LogicalRouterPort>(&format!("trtos-{P}ovn_layer2_switch"))
        .unwrap();
    assert_eq!(trtos.ipv6_ra_configs["address_mode"], "dhcpv6_stateful");
    assert_eq!(trtos.ipv6_ra_configs["mtu"], "1400");
}

#[test]
fn local_gateway_mode_commits_all_and_sends_the_pods_out_through_the_management_port() {
    // docs/ovn-kubernetes.md §3.2: ct-commit-all on the transit router; the src-ip route of the
    // network's subnet goes via the gateway router in shared gateway mode, via the
    // management port in local gateway mode.
    let yaml = cudn(
        "[100.200.0.0/16]",
        "k8s.ovn.org/network-id: '2', k8s.ovn.org/tunnel-keys: '[16711685,16715780]'",
    ) + &nodes();
    let local = TopologyConfig {
        gateway_mode: crate::topology::GatewayMode::Local,
        ..TopologyConfig::default()
    };
    let tr_name = format!("{P}transit_router");
    let src_routes = |d: &crate::topology::Desired| {
        d.all::<LogicalRouterStaticRoute>()
            .into_keys()
            .filter(|k| k.starts_with(&format!("{tr_name}|src-ip|")))
            .count()
    };
    let d = build_with(&yaml, local);
    let tr = d.get::<LogicalRouter>(&tr_name).unwrap();
    assert_eq!(tr.options["ct-commit-all"], "true");
    // The only source route goes to the management port (syncNodeManagementPort).
    assert_eq!(src_routes(&d), 1);
    assert!(d
        .get::<LogicalRouterStaticRoute>(&format!("{tr_name}|src-ip|100.200.0.0/16|100.200.0.2"))
        .is_some());
    let d = build(&yaml);
    let tr = d.get::<LogicalRouter>(&tr_name).unwrap();
    assert!(!tr.options.contains_key("ct-commit-all"));
    assert_eq!(src_routes(&d), 1);
    assert!(d
        .get::<LogicalRouterStaticRoute>(&format!("{tr_name}|src-ip|100.200.0.0/16|100.88.0.9"))
        .is_some());
}

#[test]
fn the_management_port_its_snat_and_the_node_ip_reroute_match_the_reference() {
    // OVN-Kubernetes' layer2 test (expectedLayer2EgressEntities): the SNAT to the
    // management port's masquerade address (network id 2: 169.254.0.14) on trtos-,
    // and one 1004 policy for the node's address (a Layer2 network has no other).
    let d = vector();
    let mgmt = d
        .get::<LogicalSwitchPort>(&format!("k8s-{P}test-node"))
        .unwrap();
    assert_eq!(
        mgmt.addresses.iter().collect::<Vec<_>>(),
        ["0a:58:64:c8:00:02 100.200.0.2"]
    );
    let ls = d
        .get::<LogicalSwitch>(&format!("{P}ovn_layer2_switch"))
        .unwrap();
    let on_switch: Vec<String> = ls
        .ports
        .iter()
        .filter_map(|r| d.identity_of(r).map(str::to_owned))
        .collect();
    assert!(
        on_switch.contains(&format!("k8s-{P}test-node")),
        "{on_switch:?}"
    );
    let tr_name = format!("{P}transit_router");
    let nat = d
        .get::<Nat>(&format!("{tr_name}|snat|100.200.0.0/16|169.254.0.14"))
        .unwrap();
    assert_eq!(nat.match_, "eth.dst == 0a:58:64:c8:00:02");
    assert_eq!(
        nat.logical_port.as_deref(),
        Some(format!("trtos-{P}ovn_layer2_switch").as_str())
    );
    assert_eq!(nat.gateway_port, None);
    assert_eq!(nat.external_port_range, "32768-60999");
    let policies: Vec<LogicalRouterPolicy> = d
        .all::<LogicalRouterPolicy>()
        .into_values()
        .filter(|p| p.priority == 1004)
        .collect();
    assert_eq!(policies.len(), 1, "{policies:?}");
    assert_eq!(
        policies[0].match_,
        format!(
            "inport == \"trtos-{P}ovn_layer2_switch\" && ip4.dst == 192.168.126.202 /* {P}ovn_layer2_switch */"
        )
    );
    assert_eq!(
        policies[0].nexthops.iter().collect::<Vec<_>>(),
        ["100.200.0.2"]
    );
    let tr = d.get::<LogicalRouter>(&tr_name).unwrap();
    assert_eq!((tr.nat.len(), tr.policies.len()), (1, 1));
}

#[test]
fn the_gateway_router_binds_the_masquerade_next_hops_statically() {
    // OVN-Kubernetes' CreateDummyGWMacBindings: the dummy next hop (.4) and the host's
    // masquerade address (.2) on rtoe-, MACs derived from the addresses.
    let d = vector();
    let port = format!("rtoe-GR_{P}test-node");
    let bindings = d.all::<StaticMacBinding>();
    let got: Vec<(&str, &str, &str, bool)> = bindings
        .values()
        .map(|b| {
            (
                b.logical_port.as_str(),
                b.ip.as_str(),
                b.mac.as_str(),
                b.override_dynamic_mac,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (port.as_str(), "169.254.0.2", "0a:58:a9:fe:00:02", true),
            (port.as_str(), "169.254.0.4", "0a:58:a9:fe:00:04", true),
        ]
    );
}

#[test]
fn a_local_node_without_a_gateway_config_gets_its_management_port_and_no_gateway_router() {
    let d = build(
        &(cudn(
            "[100.200.0.0/16]",
            "k8s.ovn.org/network-id: '2', k8s.ovn.org/tunnel-keys: '[16711685,16715780]'",
        ) + &nodes_with(&[])),
    );
    assert!(d
        .get::<LogicalSwitchPort>(&format!("k8s-{P}test-node"))
        .is_some());
    assert!(d
        .get::<LogicalRouter>(&format!("GR_{P}test-node"))
        .is_none());
    assert!(d
        .get::<LogicalRouterPort>(&format!("trtor-GR_{P}test-node"))
        .is_none());
    assert!(d.all::<Nat>().is_empty());
    assert!(d.all::<StaticMacBinding>().is_empty());
    assert!(d
        .all::<LogicalRouterPolicy>()
        .values()
        .all(|p| p.priority != 1004));
    // The remote node's port is written whatever its gateway.
    assert!(d
        .get::<LogicalRouterPort>(&format!("trtor-GR_{P}stale-node"))
        .is_some());
}

#[test]
fn several_local_nodes_get_a_management_port_each_and_a_note_that_they_share_its_address() {
    let (inv, alloc) = cluster(
        &(cudn(
            "[100.200.0.0/16]",
            "k8s.ovn.org/network-id: '2', k8s.ovn.org/tunnel-keys: '[16711685,16715780]'",
        ) + &nodes()),
    );
    let config = TopologyConfig::default();
    let inputs = Inputs {
        inventory: &inv,
        allocations: &alloc,
        zone: None,
        config: &config,
        prepared: None,
    };
    let d = network(&inputs, NET).unwrap();
    for n in ["test-node", "stale-node"] {
        assert!(d.get::<LogicalSwitchPort>(&format!("k8s-{P}{n}")).is_some());
    }
    assert_eq!(d.incomplete.len(), 1, "{:?}", d.incomplete);
    assert!(d.incomplete[0].contains("nodes stale-node, test-node share one NB"));
    // In a zone of its own, a node's port is the only one: nothing to note.
    assert!(vector().incomplete.is_empty());
}

#[test]
fn the_default_networks_allowed_services_are_routed_through_the_management_port() {
    // OVN-Kubernetes' configureUDNEnabledServiceRoute: a dst-ip route on the transit
    // router per allowed service via the management port, marked with the service.
    // Each cluster IP of a family the network has (OVN-Kubernetes: the first only);
    // a service not allowed, or not the default network's, gets none.
    let mut context = crate::api::Context::default();
    context.reserved.service_cidrs = vec![
        "10.96.0.0/16".parse().unwrap(),
        "fd00:10:96::/112".parse().unwrap(),
    ];
    let yaml = cudn(
        "[100.200.0.0/16]",
        "k8s.ovn.org/network-id: '2', k8s.ovn.org/tunnel-keys: '[16711685,16715780]'",
    ) + &nodes()
        + &service("kube-system", "kube-dns", &["fd00:10:96::a", "10.96.0.10"])
        + &service("default", "kubernetes", &["10.96.0.1"])
        + &service("kube-system", "metrics", &["10.96.0.20"]);
    let (inv, alloc) = cluster_in(&yaml, &context);
    let build = |config: &TopologyConfig| {
        let inputs = Inputs {
            inventory: &inv,
            allocations: &alloc,
            zone: Some("test-node"),
            config,
            prepared: None,
        };
        network(&inputs, NET).unwrap()
    };
    let tr_name = format!("{P}transit_router");
    let service_routes = |d: &crate::topology::Desired| {
        d.all::<LogicalRouterStaticRoute>()
            .into_values()
            .filter(|r| r.external_ids.contains_key(UDN_ENABLED_SERVICE))
            .map(|r| (r.ip_prefix.clone(), r.nexthop.clone()))
            .collect::<Vec<_>>()
    };
    let d = build(&TopologyConfig::default());
    for (ip, svc) in [
        ("10.96.0.10", "kube-system/kube-dns"),
        ("10.96.0.1", "default/kubernetes"),
    ] {
        let id = format!("{tr_name}|dst-ip|{ip}|100.200.0.2");
        let r = d.get::<LogicalRouterStaticRoute>(&id).expect(&id);
        assert_eq!(r.policy, Some(LogicalRouterStaticRoutePolicy::DstIp));
        for (k, v) in [
            ("k8s.ovn.org/network", NET),
            ("k8s.ovn.org/topology", "layer2"),
            (UDN_ENABLED_SERVICE, svc),
        ] {
            assert_eq!(r.external_ids[k], v, "{id}: {k}");
        }
        let tr = d.get::<LogicalRouter>(&tr_name).unwrap();
        assert!(tr
            .static_routes
            .iter()
            .any(|r| d.identity_of(r) == Some(id.as_str())));
    }
    assert_eq!(service_routes(&d).len(), 2, "{:?}", service_routes(&d));

    // Another list: only what it names.
    let only_metrics = TopologyConfig {
        allowed_default_services: vec!["kube-system/metrics".into(), "x/absent".into()],
        ..TopologyConfig::default()
    };
    assert_eq!(
        service_routes(&build(&only_metrics)),
        [("10.96.0.20".to_string(), "100.200.0.2".to_string())]
    );
    // Local gateway mode: the pods' traffic already leaves through the host.
    let local = TopologyConfig {
        gateway_mode: crate::topology::GatewayMode::Local,
        ..TopologyConfig::default()
    };
    assert!(service_routes(&build(&local)).is_empty());
}

#[test]
fn egress_ip_puts_its_no_reroute_policies_on_the_transit_router() {
    // OKEP-5094's transit router listing (dual-stack, EgressIP enabled): the subnets
    // with themselves, with the default network's join subnets, and reply traffic.
    let yaml = cudn(
        "[203.203.0.0/16, '2010:100:200::/60']",
        "k8s.ovn.org/network-id: '2', k8s.ovn.org/tunnel-keys: '[16711685,16715780]'",
    ) + &nodes();
    let on = TopologyConfig {
        egress_ip: true,
        ..TopologyConfig::default()
    };
    let d = build_with(&yaml, on);
    let tr = d
        .get::<LogicalRouter>(&format!("{P}transit_router"))
        .unwrap();
    let mut matches: Vec<String> = d
        .all::<LogicalRouterPolicy>()
        .into_iter()
        .filter(|(_, p)| p.priority == 102)
        .map(|(id, p)| {
            assert!(tr
                .policies
                .iter()
                .any(|r| d.identity_of(r) == Some(id.as_str())));
            p.match_
        })
        .collect();
    matches.sort();
    assert_eq!(
        matches,
        [
            "ip4.src == 203.203.0.0/16 && ip4.dst == 100.64.0.0/16",
            "ip4.src == 203.203.0.0/16 && ip4.dst == 203.203.0.0/16",
            "ip6.src == 2010:100:200::/60 && ip6.dst == 2010:100:200::/60",
            "ip6.src == 2010:100:200::/60 && ip6.dst == fd98::/64",
            "pkt.mark == 42",
        ]
    );
    // Off by default, as in OVN-Kubernetes.
    let d = build(&yaml);
    assert!(d
        .all::<LogicalRouterPolicy>()
        .values()
        .all(|p| p.priority != 102));
}

/// The vector's network on `subnets`, with `gateways` and `infra` set as
/// OVN-Kubernetes' NetInfo takes them (unvalidated, as its unit vectors do).
fn l2_addresses(
    subnets: &str,
    gateways: &[&str],
    infra: &[&str],
    preconfigured: bool,
) -> Vec<(String, String)> {
    let (inv, _) = cluster(&cudn(subnets, ""));
    let mut net = inv.networks[NET].network.clone();
    net.default_gateway_ips = gateways.iter().map(|g| g.parse().unwrap()).collect();
    net.infrastructure_subnets = infra.iter().map(|i| i.parse().unwrap()).collect();
    crate::topology::layer2::infrastructure_addresses(&net, preconfigured)
        .into_iter()
        .map(|(gw, mgmt)| (gw.to_string(), mgmt.to_string()))
        .collect()
}

/// (subnets, defaultGatewayIPs, infrastructureSubnets, (gateway, management)).
type Vector = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    (&'static str, &'static str),
);

#[test]
fn gateway_and_management_addresses_follow_ovn_kubernetes_vectors() {
    // TestGetNodeGatewayIP and TestGetNodeManagementIP (multi_network_test.go), with
    // EnablePreconfiguredUDNAddresses: (subnet, defaultGatewayIPs,
    // infrastructureSubnets) → (gateway, management).
    let cases: [Vector; 8] = [
        ("[10.0.0.0/24]", &[], &[], ("10.0.0.1/24", "10.0.0.2/24")),
        (
            "[10.0.0.0/24]",
            &["10.0.0.5"],
            &[],
            ("10.0.0.5/24", "10.0.0.2/24"),
        ),
        (
            "[10.0.0.0/24]",
            &[],
            &["10.0.0.4/30"],
            ("10.0.0.4/24", "10.0.0.5/24"),
        ),
        (
            "[10.0.0.0/24]",
            &[],
            &["10.0.0.0/30"],
            ("10.0.0.1/24", "10.0.0.2/24"),
        ),
        (
            "[10.0.0.0/24]",
            &["10.0.0.5"],
            &["10.0.0.255/32", "10.0.0.100/32"],
            ("10.0.0.5/24", "10.0.0.100/24"),
        ),
        (
            "[10.0.0.0/24]",
            &["10.0.0.2"],
            &["10.0.0.0/30"],
            ("10.0.0.2/24", "10.0.0.1/24"),
        ),
        (
            "['2001:db8::/64']",
            &[],
            &["2001:db8::/126"],
            ("2001:db8::1/64", "2001:db8::2/64"),
        ),
        (
            "['2001:db8::/64']",
            &["2001:db8::ffff:ffff:ffff:fffe"],
            &["2001:db8::ffff:ffff:ffff:fffe/127"],
            (
                "2001:db8::ffff:ffff:ffff:fffe/64",
                "2001:db8::ffff:ffff:ffff:ffff/64",
            ),
        ),
    ];
    for (subnets, gws, infra, (gw, mgmt)) in cases {
        assert_eq!(
            l2_addresses(subnets, gws, infra, true),
            [(gw.to_string(), mgmt.to_string())],
            "{subnets} {gws:?} {infra:?}"
        );
    }
    // The management port falls back to .1 when a gateway outside the infrastructure
    // subnets takes .2 (allocateInfrastructureIPs' corner case).
    assert_eq!(
        l2_addresses("[10.0.0.0/24]", &["10.0.0.2"], &[], true),
        [("10.0.0.2/24".to_string(), "10.0.0.1/24".to_string())]
    );
    // Without the setting (OVN-Kubernetes' default): .1 and .2 whatever the spec says.
    assert_eq!(
        l2_addresses("[10.0.0.0/24]", &["10.0.0.5"], &["10.0.0.4/30"], false),
        [("10.0.0.1/24".to_string(), "10.0.0.2/24".to_string())]
    );
}

#[test]
fn preconfigured_addresses_reach_the_rows() {
    let yaml = cudn(
        "[100.200.0.0/16]\n      infrastructureSubnets: [100.200.255.0/29]\n      defaultGatewayIPs: [100.200.255.1]",
        "k8s.ovn.org/network-id: '2', k8s.ovn.org/tunnel-keys: '[16711685,16715780]'",
    ) + &nodes();
    let on = TopologyConfig {
        preconfigured_udn_addresses: true,
        ..TopologyConfig::default()
    };
    for (config, gw, mgmt) in [
        (TopologyConfig::default(), "100.200.0.1/16", "100.200.0.2"),
        // The infrastructure subnet's first address is free (only the network's own
        // network and broadcast addresses are not), as OVN-Kubernetes allocates it.
        (on, "100.200.255.1/16", "100.200.255.0"),
    ] {
        let d = build_with(&yaml, config);
        let trtos = d
            .get::<LogicalRouterPort>(&format!("trtos-{P}ovn_layer2_switch"))
            .unwrap();
        assert_eq!(trtos.networks.iter().collect::<Vec<_>>(), [gw]);
        let mp = d
            .get::<LogicalSwitchPort>(&format!("k8s-{P}test-node"))
            .unwrap();
        assert!(
            mp.addresses
                .iter()
                .any(|a| a.ends_with(&format!(" {mgmt}"))),
            "{:?}",
            mp.addresses
        );
    }
}

/// OVN-Kubernetes' `syncNodeManagementPort` on a Layer2 network: one
/// allow-from-node ACL on the network's one switch (named after it, the management
/// address `.2` of the subnet), the zone's management port in `clusterPortGroup`
/// (`multihoming_test.go`'s `withClusterPortGroup`).
#[test]
fn the_allow_from_node_acl_is_on_the_switch_and_the_port_in_the_cluster_port_group() {
    use nb_model::{Acl, LogicalSwitch, PortGroup};
    let d = vector();
    let switch = format!("{P}ovn_layer2_switch");
    let ctrl = format!("{NET}-network-controller");
    let acl_id = format!("{ctrl}:NetpolNode:{switch}:100.200.0.2");
    let acl = d.get::<Acl>(&format!("@{acl_id}")).unwrap();
    assert_eq!(acl.match_, "ip4.src==100.200.0.2");
    assert_eq!(acl.external_ids["k8s.ovn.org/name"], switch);
    assert_eq!(acl.external_ids["ip"], "100.200.0.2");
    let ls = d.get::<LogicalSwitch>(&switch).unwrap();
    let acls: Vec<&str> = ls.acls.iter().filter_map(|a| d.identity_of(a)).collect();
    assert_eq!(acls, [format!("@{acl_id}")]);
    let pg = d
        .get::<PortGroup>(&format!("@{ctrl}:Cluster:clusterPortGroup"))
        .unwrap();
    let ports: Vec<&str> = pg.ports.iter().filter_map(|p| d.identity_of(p)).collect();
    assert_eq!(ports, [format!("k8s-{P}test-node")]);
}
