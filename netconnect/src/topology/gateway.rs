//! The gateway router of a local node (`GR_<p><node>`, reference §2.6), shared by the
//! Layer3 and Layer2 topologies, and its external side when the node carries
//! `k8s.ovn.org/l3-gateway-config`: the external switch `ext_<p><node>` with its
//! localnet port, the `rtoe-`/`etor-` pair, the default and masquerade routes, and the
//! SNAT of the network's traffic to its masquerade address.

use ipnet::IpNet;
use nb_model::{
    LoadBalancerGroup, LogicalRouter, LogicalRouterStaticRoute, LogicalSwitch, LogicalSwitchPort,
    Nat, NatType,
};
use ovsdb_proto::model::Ref;

use super::addr::with_len;
use super::desired::Desired;
use super::layer3::{add_route, nat_identity, net_ids, switch_ids};
use super::names::Names;
use super::{map, masquerade_ip, masquerade_next_hop, Inputs, NodeView};
use crate::api::annotations::L3GatewayConfig;
use crate::api::Network;

/// The gateway router itself, without ports or routes: its options, ids and load
/// balancer groups (the router group only when NodePorts are served).
#[allow(clippy::too_many_arguments)]
pub fn router(
    inputs: &Inputs,
    net: &Network,
    names: &Names,
    node: &NodeView,
    chassis: &str,
    topology: &str,
    cluster_lbg: &Ref<LoadBalancerGroup>,
    router_lbg: &Ref<LoadBalancerGroup>,
    d: &mut Desired,
) -> LogicalRouter {
    let _ = inputs;
    let mut gr = LogicalRouter {
        name: names.gateway_router(node.name),
        copp: Some(d.refer::<nb_model::Copp>(super::cluster::DEFAULT_COPP)),
        external_ids: switch_ids(net, topology),
        options: map([
            ("always_learn_from_arp_request", "false"),
            ("dynamic_neigh_routers", "false"),
            ("chassis", chassis),
            ("lb_force_snat_ip", "router_ip"),
            ("mac_binding_age_threshold", "300"),
            ("disable_garp_rarp", "true"),
        ]),
        load_balancer_group: [cluster_lbg.clone()].into(),
        ..Default::default()
    };
    if let Some(gw) = node.gateway {
        let ips: Vec<String> = gw
            .ip_addresses
            .iter()
            .map(|i| i.addr().to_string())
            .collect();
        if let Some(first) = ips.first() {
            gr.external_ids.insert("physical_ip".into(), first.clone());
            gr.external_ids.insert("physical_ips".into(), ips.join(","));
        }
        if gw.node_port_enable {
            gr.load_balancer_group.insert(router_lbg.clone());
        }
    }
    gr
}

/// The external side of `gr`: its port to the external switch, the switch with its
/// localnet port, the routes out, and the SNAT of the network's subnets and join
/// addresses to the network's masquerade address.
#[allow(clippy::too_many_arguments)]
pub fn external_side(
    inputs: &Inputs,
    net: &Network,
    id: u32,
    names: &Names,
    node: &NodeView,
    gw: &L3GatewayConfig,
    topology: &str,
    gr: &mut LogicalRouter,
    gr_join: &[IpNet],
    d: &mut Desired,
) {
    let cfg = inputs.config;
    let n = node.name;
    let gr_name = names.gateway_router(n);
    let masq_v4 = masquerade_ip(cfg, id, true, true);
    let masq_v6 = masquerade_ip(cfg, id, false, true);
    let masq_for = |ipv4: bool| if ipv4 { masq_v4 } else { masq_v6 };

    let mut networks: Vec<String> = gw.ip_addresses.iter().map(IpNet::to_string).collect();
    for ip in [masq_v4, masq_v6].into_iter().flatten() {
        if gw
            .ip_addresses
            .iter()
            .any(|a| a.addr().is_ipv4() == ip.is_ipv4())
        {
            let len = if ip.is_ipv4() { 32 } else { 128 };
            networks.push(with_len(ip, len).to_string());
        }
    }
    let rtoe = nb_model::LogicalRouterPort {
        name: names.rtoe(n),
        mac: gw.mac_address.clone(),
        networks: networks.into_iter().collect(),
        external_ids: net_ids(net, topology),
        ..Default::default()
    };
    gr.ports.insert(d.add(names.rtoe(n), rtoe));

    let mut ext = LogicalSwitch {
        name: names.external_switch(n),
        external_ids: switch_ids(net, topology),
        ..Default::default()
    };
    let bridge = if gw.bridge_id.is_empty() {
        "breth0"
    } else {
        gw.bridge_id.as_str()
    };
    let localnet = LogicalSwitchPort {
        name: names.localnet_port(bridge, n),
        type_: "localnet".into(),
        addresses: ["unknown".to_string()].into(),
        options: map([("network_name", cfg.physical_network.as_str())]),
        tag_request: gw.vlan_id.map(i64::from),
        external_ids: net_ids(net, topology),
        ..Default::default()
    };
    ext.ports
        .insert(d.add(names.localnet_port(bridge, n), localnet));
    let mut etor = LogicalSwitchPort::to_router(names.etor(n), names.rtoe(n));
    etor.addresses = [gw.mac_address.clone()].into();
    etor.external_ids = net_ids(net, topology);
    ext.ports.insert(d.add(names.etor(n), etor));
    d.add(names.external_switch(n), ext);

    for ipv4 in [true, false] {
        if !gw.ip_addresses.iter().any(|a| a.addr().is_ipv4() == ipv4) {
            continue;
        }
        if let Some((subnet, hop)) = masquerade_next_hop(cfg, ipv4) {
            let route = LogicalRouterStaticRoute {
                ip_prefix: subnet.to_string(),
                nexthop: hop.to_string(),
                output_port: Some(names.rtoe(n)),
                external_ids: net_ids(net, topology),
                ..Default::default()
            };
            add_route(d, &mut gr.static_routes, &gr_name, route);
        }
        for hop in gw.next_hops.iter().filter(|h| h.is_ipv4() == ipv4) {
            let route = LogicalRouterStaticRoute {
                ip_prefix: if ipv4 { "0.0.0.0/0" } else { "::/0" }.into(),
                nexthop: hop.to_string(),
                output_port: Some(names.rtoe(n)),
                external_ids: net_ids(net, topology),
                ..Default::default()
            };
            add_route(d, &mut gr.static_routes, &gr_name, route);
        }
    }

    let snat = |logical: String, external: std::net::IpAddr| Nat {
        type_: NatType::Snat,
        external_ip: external.to_string(),
        logical_ip: logical,
        options: map([(nb_model::keys::nat_options::STATELESS, "false")]),
        external_ids: net_ids(net, topology),
        ..Default::default()
    };
    let mut nats = Vec::new();
    for j in gr_join {
        if let Some(m) = masq_for(j.addr().is_ipv4()) {
            nats.push(snat(j.addr().to_string(), m));
        }
    }
    for s in &net.subnets {
        if let Some(m) = masq_for(s.cidr.addr().is_ipv4()) {
            nats.push(snat(s.cidr.to_string(), m));
        }
    }
    for nat in nats {
        let nid = nat_identity(&gr_name, &nat);
        gr.nat.insert(d.add(nid, nat));
    }
}
