//! A primary Layer3 network (reference §2): a distributed cluster router with a switch
//! per node, a join switch to the gateway routers, and a transit switch to the nodes of
//! other zones. With OKEP-5377 the network has several cluster subnets; every node
//! still gets one host subnet per family, and the priority-102 policies allow every
//! pair of subnets.
//!
//! Per network: `<p>ovn_cluster_router`, `<p>join` with `rtoj-`/`jtor-`,
//! `<p>transit_switch`, the three load balancer groups. Per local node: the node switch
//! `<p><node>` with `stor-`/`rtos-` (a distributed gateway port on the node's chassis)
//! and the management port, the transit switch pair `<p>tstor-`/`<p>rtots-`, the
//! gateway router ([`super::gateway`]), and the cluster router's routes and NAT for the
//! node. Per remote node: its `type=remote` transit switch port and the routes to its
//! host subnets and gateway router through it.

use nb_model::keys::{lrp_options, ls_other_config, lsp_external_ids, lsp_options, nat_options};
use std::collections::BTreeSet;

use ipnet::IpNet;
use nb_model::{
    GatewayChassis, LoadBalancerGroup, LogicalRouter, LogicalRouterPolicy,
    LogicalRouterPolicyAction, LogicalRouterPort, LogicalRouterStaticRoute,
    LogicalRouterStaticRoutePolicy, LogicalSwitch, LogicalSwitchPort, Nat, NatType,
};
use ovsdb_proto::model::Ref;

use super::addr::{nth, nth_in, with_len};
use super::desired::Desired;
use super::names::Names;
use super::{gateway, ip_match_family, mac, map, masquerade_ip, same_family, GatewayMode, Inputs};
use crate::alloc::BASE_TRANSIT_SWITCH_TUNNEL_KEY;
use crate::api::Network;

pub use nb_model::keys::ovn_k8s::{NETWORK, NODE, ROLE, TOPOLOGY};

/// The priority of the EgressIP no-reroute policies.
pub const NO_REROUTE_PRIORITY: i64 = 102;
/// The priority of the policies sending traffic for the node's IPs to the management
/// port.
pub const NODE_IP_REROUTE_PRIORITY: i64 = 1004;

/// A static route's identity: router, policy, prefix, next hop.
pub fn route_identity(router: &str, route: &LogicalRouterStaticRoute) -> String {
    let policy = match route.policy {
        Some(LogicalRouterStaticRoutePolicy::SrcIp) => "src-ip",
        _ => "dst-ip",
    };
    format!("{router}|{policy}|{}|{}", route.ip_prefix, route.nexthop)
}

/// A router policy's identity: router, priority, match.
pub fn policy_identity(router: &str, p: &LogicalRouterPolicy) -> String {
    format!("{router}|{}|{}", p.priority, p.match_)
}

/// A NAT rule's identity: router, type, logical and external address.
pub fn nat_identity(router: &str, n: &Nat) -> String {
    let kind = match &n.type_ {
        NatType::Snat => "snat",
        NatType::Dnat => "dnat",
        NatType::DnatAndSnat => "dnat_and_snat",
        NatType::Other(o) => o.as_str(),
    };
    format!("{router}|{kind}|{}|{}", n.logical_ip, n.external_ip)
}

/// `{network, topology}`, the external ids of most of a network's rows.
pub(crate) fn net_ids(net: &Network, topology: &str) -> std::collections::BTreeMap<String, String> {
    map([(NETWORK, net.name().as_str()), (TOPOLOGY, topology)])
}

/// `{network, role, topology}`, on switches and routers.
pub(crate) fn switch_ids(
    net: &Network,
    topology: &str,
) -> std::collections::BTreeMap<String, String> {
    map([
        (NETWORK, net.name().as_str()),
        (ROLE, "primary"),
        (TOPOLOGY, topology),
    ])
}

/// A router port with its MAC derived from its first network.
pub(crate) fn router_port(name: &str, networks: &[IpNet]) -> LogicalRouterPort {
    LogicalRouterPort {
        name: name.to_owned(),
        mac: networks
            .first()
            .map(|n| mac::from_ip(n.addr()))
            .unwrap_or_default(),
        networks: networks.iter().map(IpNet::to_string).collect(),
        ..Default::default()
    }
}

/// Adds a static route to `routes` (the router's set) and `d`.
pub(crate) fn add_route(
    d: &mut Desired,
    routes: &mut BTreeSet<Ref<LogicalRouterStaticRoute>>,
    router: &str,
    route: LogicalRouterStaticRoute,
) {
    let id = route_identity(router, &route);
    routes.insert(d.add(id, route));
}

/// Adds a router policy to `policies` and `d`.
pub(crate) fn add_policy(
    d: &mut Desired,
    policies: &mut BTreeSet<Ref<LogicalRouterPolicy>>,
    router: &str,
    policy: LogicalRouterPolicy,
) {
    let id = policy_identity(router, &policy);
    policies.insert(d.add(id, policy));
}

/// The three load balancer groups of a network; returns (cluster, switch, router).
pub(crate) fn lb_groups(
    d: &mut Desired,
    names: &Names,
) -> (
    Ref<LoadBalancerGroup>,
    Ref<LoadBalancerGroup>,
    Ref<LoadBalancerGroup>,
) {
    let mut group = |name: String| {
        d.add(
            name.clone(),
            LoadBalancerGroup {
                name,
                ..Default::default()
            },
        )
    };
    (
        group(names.cluster_lb_group()),
        group(names.cluster_switch_lb_group()),
        group(names.cluster_router_lb_group()),
    )
}

/// Claims the network's load balancer groups (kept even when the network is gone, so
/// that the reconciler deletes them).
pub fn claim_lb_groups(d: &mut Desired, net_name: &str) {
    let names = Names::new(net_name);
    for n in [
        names.cluster_lb_group(),
        names.cluster_switch_lb_group(),
        names.cluster_router_lb_group(),
    ] {
        d.claim::<LoadBalancerGroup>(&n);
    }
}

/// The priority-102 policies: every ordered pair of same-family cluster subnets
/// (OKEP-5377, the pair with itself included), each subnet to the join subnet, and
/// reply traffic (`pkt.mark == 42`).
///
/// OVN-Kubernetes writes these from its EgressIP controller with owner type `EgressIP`
/// and `k8s.ovn.org/name` set to the policy kind; here they belong to the network like
/// its other rows, and keep the `priority`, `ip-family` and `network` keys.
pub fn no_reroute_policies(net: &Network) -> Vec<LogicalRouterPolicy> {
    let mut out = Vec::new();
    let ids = |family: &str| {
        map([
            ("priority", "102"),
            ("ip-family", family),
            ("network", net.name().as_str()),
        ])
    };
    for ipv4 in [true, false] {
        let ip = ip_match_family(ipv4);
        let subnets: Vec<IpNet> = net.subnets_of(ipv4).map(|s| s.cidr).collect();
        for s1 in &subnets {
            for s2 in &subnets {
                out.push(LogicalRouterPolicy {
                    priority: NO_REROUTE_PRIORITY,
                    action: LogicalRouterPolicyAction::Allow,
                    match_: format!("{ip}.src == {s1} && {ip}.dst == {s2}"),
                    external_ids: ids(ip),
                    ..Default::default()
                });
            }
        }
        if let Some(join) = net.join_subnets.iter().find(|j| j.addr().is_ipv4() == ipv4) {
            for s in &subnets {
                out.push(LogicalRouterPolicy {
                    priority: NO_REROUTE_PRIORITY,
                    action: LogicalRouterPolicyAction::Allow,
                    match_: format!("{ip}.src == {s} && {ip}.dst == {join}"),
                    external_ids: ids(ip),
                    ..Default::default()
                });
            }
        }
    }
    out.push(LogicalRouterPolicy {
        priority: NO_REROUTE_PRIORITY,
        action: LogicalRouterPolicyAction::Allow,
        match_: "pkt.mark == 42".into(),
        external_ids: ids("ip"),
        ..Default::default()
    });
    out
}

/// Builds the rows of Layer3 network `net` (id `id`) into `d`.
pub fn build(inputs: &Inputs, net: &Network, id: u32, d: &mut Desired) {
    let cfg = inputs.config;
    let names = Names::new(&net.name());
    let topo = "layer3";
    let cr_name = names.cluster_router();
    let copp = d.refer::<nb_model::Copp>(super::cluster::DEFAULT_COPP);
    let (cluster_lbg, switch_lbg, router_lbg) = lb_groups(d, &names);
    claim_lb_groups(d, &net.name());

    let mut cr = LogicalRouter {
        name: cr_name.clone(),
        copp: Some(copp.clone()),
        external_ids: net_ids(net, topo),
        options: map([("always_learn_from_arp_request", "false")]),
        ..Default::default()
    };
    cr.external_ids
        .insert("k8s-cluster-router".into(), "yes".into());
    if cfg.gateway_mode == GatewayMode::Local {
        cr.options.insert("ct-commit-all".into(), "true".into());
    }

    // The join switch and the cluster router's side of it.
    let join_in_use = net.join_subnets_in_use();
    let cr_join: Vec<IpNet> = join_in_use.iter().filter_map(|j| nth_in(j, 1)).collect();
    let mut join = LogicalSwitch {
        name: names.join_switch(),
        external_ids: net_ids(net, topo),
        ..Default::default()
    };
    let mut rtoj = router_port(&names.rtoj_cluster(), &cr_join);
    rtoj.external_ids = net_ids(net, topo);
    cr.ports.insert(d.add(names.rtoj_cluster(), rtoj));
    let jtor = LogicalSwitchPort::to_router(names.jtor_cluster(), names.rtoj_cluster());
    join.ports.insert(d.add(names.jtor_cluster(), jtor));

    // The transit switch to the other zones.
    let mut ts = LogicalSwitch {
        name: names.transit_switch(),
        external_ids: switch_ids(net, topo),
        ..Default::default()
    };
    let key = (BASE_TRANSIT_SWITCH_TUNNEL_KEY + id).to_string();
    ts.other_config = map([
        (
            ls_other_config::INTERCONN_TS,
            names.transit_switch().as_str(),
        ),
        (ls_other_config::REQUESTED_TNL_KEY, key.as_str()),
        (ls_other_config::MCAST_SNOOP, "true"),
        (ls_other_config::MCAST_QUERIER, "false"),
        (ls_other_config::MCAST_FLOOD_UNREGISTERED, "true"),
    ]);

    if cfg.egress_ip {
        for p in no_reroute_policies(net) {
            add_policy(d, &mut cr.policies, &cr_name, p);
        }
    }

    for node in inputs.nodes() {
        let subnets = inputs.host_subnets(&net.name(), node.name);
        if node.transit.is_empty() {
            continue;
        }
        if node.local {
            if subnets.is_empty() {
                continue;
            }
            local_node(
                inputs,
                net,
                id,
                &names,
                &node,
                subnets,
                &mut cr,
                &mut join,
                &mut ts,
                d,
                [&cluster_lbg, &switch_lbg, &router_lbg],
            );
        } else {
            remote_node(inputs, net, &names, &node, subnets, &mut cr, &mut ts, d);
        }
    }
    d.add(names.join_switch(), join);
    d.add(names.transit_switch(), ts);
    d.add(cr_name, cr);
}

#[allow(clippy::too_many_arguments)]
fn local_node(
    inputs: &Inputs,
    net: &Network,
    id: u32,
    names: &Names,
    node: &super::NodeView,
    subnets: &[IpNet],
    cr: &mut LogicalRouter,
    join: &mut LogicalSwitch,
    ts: &mut LogicalSwitch,
    d: &mut Desired,
    [cluster_lbg, switch_lbg, router_lbg]: [&Ref<LoadBalancerGroup>; 3],
) {
    let cfg = inputs.config;
    let topo = "layer3";
    let n = node.name;
    let cr_name = names.cluster_router();
    let gw_ips: Vec<IpNet> = subnets.iter().filter_map(|s| nth_in(s, 1)).collect();
    let mgmt_ips: Vec<IpNet> = subnets.iter().filter_map(|s| nth_in(s, 2)).collect();

    // The node switch and its ports.
    let mut ls = LogicalSwitch {
        name: names.node_switch(n),
        external_ids: switch_ids(net, topo),
        load_balancer_group: [cluster_lbg.clone(), switch_lbg.clone()].into(),
        ..Default::default()
    };
    for (s, m) in subnets.iter().zip(&mgmt_ips) {
        if s.addr().is_ipv4() {
            ls.other_config
                .insert(ls_other_config::SUBNET.into(), s.to_string());
            ls.other_config
                .insert("exclude_ips".into(), m.addr().to_string());
        } else {
            ls.other_config
                .insert(ls_other_config::IPV6_PREFIX.into(), s.network().to_string());
        }
    }
    let stor = LogicalSwitchPort::to_router(names.stor(n), names.rtos(n));
    ls.ports.insert(d.add(names.stor(n), stor));
    let mgmt_mac = mac::from_ip(mgmt_ips[0].addr());
    let mut addresses = mgmt_mac.clone();
    for m in &mgmt_ips {
        addresses.push(' ');
        addresses.push_str(&m.addr().to_string());
    }
    let mgmt = LogicalSwitchPort {
        name: names.management_port(n),
        addresses: [addresses].into(),
        ..Default::default()
    };
    ls.ports.insert(d.add(names.management_port(n), mgmt));

    // The cluster router's port to it: a distributed gateway port on the node's chassis.
    let mut rtos = router_port(&names.rtos(n), &gw_ips);
    if node.gateway_mtu {
        rtos.options
            .insert(lrp_options::GATEWAY_MTU.into(), cfg.mtu.to_string());
    }
    if let Some(chassis) = node.chassis {
        let gc_name = format!("{}-{chassis}", names.rtos(n));
        let gc = GatewayChassis {
            name: gc_name.clone(),
            chassis_name: chassis.to_owned(),
            priority: 1,
            ..Default::default()
        };
        rtos.gateway_chassis.insert(d.add(gc_name, gc));
    }
    let rtos = d.add(names.rtos(n), rtos);
    cr.ports.insert(rtos.clone());

    // The management port's masquerade SNAT on the cluster router. Its gateway port is
    // named: with several local nodes (one NB for the cluster) the router has several
    // distributed gateway ports, and OVN needs to know which one the NAT is for.
    if let Some(masq) = masquerade_ip(cfg, id, true, false) {
        if let Some(v4) = subnets.iter().find(|s| s.addr().is_ipv4()) {
            let nat = Nat {
                type_: nb_model::NatType::Snat,
                external_ip: masq.to_string(),
                logical_ip: v4.to_string(),
                logical_port: Some(names.rtos(n)),
                gateway_port: Some(rtos),
                match_: format!("eth.dst == {mgmt_mac}"),
                options: map([(nat_options::STATELESS, "false")]),
                external_ids: net_ids(net, topo),
                ..Default::default()
            };
            let nid = nat_identity(&cr_name, &nat);
            cr.nat.insert(d.add(nid, nat));
        }
    }

    // The transit switch pair.
    let mut rtots = router_port(&names.rtots(n), node.transit);
    rtots
        .options
        .insert(lrp_options::MCAST_FLOOD.into(), "true".into());
    cr.ports.insert(d.add(names.rtots(n), rtots));
    let mut tstor = LogicalSwitchPort::to_router(names.tstor(n), names.rtots(n));
    tstor
        .options
        .insert(lsp_options::REQUESTED_TNL_KEY.into(), node.id.to_string());
    tstor
        .external_ids
        .insert(lsp_external_ids::NODE.into(), n.to_owned());
    ts.ports.insert(d.add(names.tstor(n), tstor));
    d.add(names.node_switch(n), ls);

    // The gateway router, and the cluster router's routes to it.
    let Some(chassis) = node.chassis else {
        return;
    };
    let gr_join: Vec<IpNet> = net
        .join_subnets_in_use()
        .iter()
        .filter_map(|j| nth_in(j, node.id as u128))
        .collect();
    let cr_join: Vec<IpNet> = net
        .join_subnets_in_use()
        .iter()
        .filter_map(|j| nth_in(j, 1))
        .collect();
    let mut gr = gateway::router(
        inputs,
        net,
        names,
        node,
        chassis,
        topo,
        cluster_lbg,
        router_lbg,
        d,
    );
    let mut rtoj = router_port(&names.rtoj_gateway(n), &gr_join);
    rtoj.external_ids = net_ids(net, topo);
    if node.gateway_mtu {
        rtoj.options
            .insert(lrp_options::GATEWAY_MTU.into(), cfg.mtu.to_string());
    }
    gr.ports.insert(d.add(names.rtoj_gateway(n), rtoj));
    let mut jtor = LogicalSwitchPort::to_router(names.jtor_gateway(n), names.rtoj_gateway(n));
    jtor.external_ids = net_ids(net, topo);
    join.ports.insert(d.add(names.jtor_gateway(n), jtor));
    let gr_name = names.gateway_router(n);
    for s in &net.subnets {
        if let Some(via) = same_family(&cr_join, s.cidr.addr().is_ipv4()) {
            let route = LogicalRouterStaticRoute {
                ip_prefix: s.cidr.to_string(),
                nexthop: via.to_string(),
                external_ids: net_ids(net, topo),
                ..Default::default()
            };
            add_route(d, &mut gr.static_routes, &gr_name, route);
        }
    }
    for j in &gr_join {
        let route = LogicalRouterStaticRoute {
            ip_prefix: j.addr().to_string(),
            nexthop: j.addr().to_string(),
            external_ids: net_ids(net, topo),
            ..Default::default()
        };
        add_route(d, &mut cr.static_routes, &cr_name, route);
    }
    for (s, m) in subnets.iter().zip(&mgmt_ips) {
        let via = match cfg.gateway_mode {
            GatewayMode::Shared => same_family(&gr_join, s.addr().is_ipv4()),
            GatewayMode::Local => Some(m.addr()),
        };
        if let Some(via) = via {
            let route = LogicalRouterStaticRoute {
                ip_prefix: s.to_string(),
                nexthop: via.to_string(),
                policy: Some(LogicalRouterStaticRoutePolicy::SrcIp),
                external_ids: net_ids(net, topo),
                ..Default::default()
            };
            add_route(d, &mut cr.static_routes, &cr_name, route);
        }
    }
    if let Some(gw) = node.gateway {
        // Traffic from pods to the node's own addresses goes to the management port.
        for ip in &gw.ip_addresses {
            let ipv4 = ip.addr().is_ipv4();
            let Some(m) = same_family(&mgmt_ips, ipv4) else {
                continue;
            };
            let p = LogicalRouterPolicy {
                priority: NODE_IP_REROUTE_PRIORITY,
                action: LogicalRouterPolicyAction::Reroute,
                match_: format!(
                    "inport == \"{}\" && {}.dst == {} /* {} */",
                    names.rtos(n),
                    ip_match_family(ipv4),
                    ip.addr(),
                    names.node_switch(n)
                ),
                nexthops: [m.to_string()].into(),
                external_ids: net_ids(net, topo),
                ..Default::default()
            };
            add_policy(d, &mut cr.policies, &cr_name, p);
        }
        gateway::external_side(inputs, net, id, names, node, gw, topo, &mut gr, &gr_join, d);
    }
    d.add(gr_name, gr);
}

#[allow(clippy::too_many_arguments)]
fn remote_node(
    inputs: &Inputs,
    net: &Network,
    names: &Names,
    node: &super::NodeView,
    subnets: &[IpNet],
    cr: &mut LogicalRouter,
    ts: &mut LogicalSwitch,
    d: &mut Desired,
) {
    let _ = inputs;
    let n = node.name;
    let Some(chassis) = node.chassis else {
        // OVN-Kubernetes waits for the chassis annotation (a suppressed error).
        return;
    };
    let mut addresses = mac::from_ip(node.transit[0].addr());
    for t in node.transit {
        addresses.push(' ');
        addresses.push_str(&t.to_string());
    }
    let port = LogicalSwitchPort {
        name: names.tstor(n),
        type_: "remote".into(),
        addresses: [addresses].into(),
        options: map([
            (lsp_options::REQUESTED_TNL_KEY, node.id.to_string().as_str()),
            (lsp_options::REQUESTED_CHASSIS, chassis),
        ]),
        external_ids: map([(lsp_external_ids::NODE, n)]),
        ..Default::default()
    };
    ts.ports.insert(d.add(names.tstor(n), port));
    let ids = map([("ic-node", n), (NETWORK, net.name().as_str())]);
    let cr_name = names.cluster_router();
    for s in subnets {
        if let Some(via) = same_family(node.transit, s.addr().is_ipv4()) {
            let route = LogicalRouterStaticRoute {
                ip_prefix: s.to_string(),
                nexthop: via.to_string(),
                external_ids: ids.clone(),
                ..Default::default()
            };
            add_route(d, &mut cr.static_routes, &cr_name, route);
        }
    }
    for j in net.join_subnets_in_use() {
        let ipv4 = j.addr().is_ipv4();
        let (Some(gr_ip), Some(via)) = (nth(&j, node.id as u128), same_family(node.transit, ipv4))
        else {
            continue;
        };
        let route = LogicalRouterStaticRoute {
            ip_prefix: with_len(gr_ip, if ipv4 { 32 } else { 128 }).to_string(),
            nexthop: via.to_string(),
            external_ids: ids.clone(),
            ..Default::default()
        };
        add_route(d, &mut cr.static_routes, &cr_name, route);
    }
}

#[cfg(test)]
mod tests;
