//! A primary Layer2 network with a transit router (OKEP-5094, reference §3).
//!
//! One switch `<p>ovn_layer2_switch` spans every node (its tunnel key is the network's
//! first key). The distributed transit router `<p>transit_router` (the second key) is
//! the pods' default gateway on every node with the same address and MAC: its
//! `trtos-` port (tunnel key 1) faces the switch. Each node's gateway router hangs off
//! the transit router by a direct router-to-router link on the transit subnet: a /31
//! (/127) pair per node at `2 · node id`, the even address on the transit router's
//! `trtor-GR_…` port (tunnel key `10 + node id`), the odd one on the gateway router's
//! `rtotr-GR_…` port. A remote node's `trtor-` port has no peer and is bound to its
//! chassis by `requested-chassis`.

use ipnet::IpNet;
use nb_model::keys::{lr_options, lrp_options, ls_other_config};
use nb_model::{
    GatewayChassis, LogicalRouter, LogicalRouterStaticRoute, LogicalRouterStaticRoutePolicy,
    LogicalSwitch, LogicalSwitchPort,
};

use super::addr::{nth_in, with_len};
use super::desired::Desired;
use super::layer3::{
    add_route, claim_lb_groups, lb_groups, net_ids, router_port, switch_ids, NODE,
};
use super::names::Names;
use super::{gateway, map, same_family, BuildError, GatewayMode, Inputs};
use crate::alloc::transit::node_pair;
use crate::api::Network;

/// The tunnel key of every zone's `trtos-` port.
pub const TRANSIT_ROUTER_TO_SWITCH_KEY: u32 = 1;
/// `trtor-` ports take `node id + this` (keys 2 to 9 are reserved).
pub const TRANSIT_ROUTER_PORT_KEY_OFFSET: u32 = 10;

/// The transit router's and the gateway router's addresses for `node_id`, one per
/// transit subnet (IPv4 first).
pub fn node_pairs(transit: &[IpNet], node_id: u32) -> (Vec<IpNet>, Vec<IpNet>) {
    transit.iter().filter_map(|t| node_pair(t, node_id)).unzip()
}

/// Builds the rows of Layer2 network `net` (id `id`) into `d`.
pub fn build(inputs: &Inputs, net: &Network, id: u32, d: &mut Desired) -> Result<(), BuildError> {
    let cfg = inputs.config;
    let name = net.name();
    let names = Names::new(&name);
    let topo = "layer2";
    let keys = inputs.allocations.tunnel_keys.get(&name);
    let transit = inputs.allocations.transit_subnets.get(&name);
    let (Some(keys), Some(transit)) = (keys, transit) else {
        return Err(BuildError::NoTransit(name));
    };
    let _ = id;
    let tr_name = names.transit_router();
    let copp = d.refer::<nb_model::Copp>(super::cluster::DEFAULT_COPP);
    let (cluster_lbg, switch_lbg, router_lbg) = lb_groups(d, &names);
    claim_lb_groups(d, &name);

    let mut tr = LogicalRouter {
        name: tr_name.clone(),
        copp: Some(copp),
        external_ids: net_ids(net, topo),
        options: map([(lr_options::REQUESTED_TNL_KEY, keys[1].to_string().as_str())]),
        ..Default::default()
    };
    tr.external_ids
        .insert("k8s-cluster-router".into(), "yes".into());
    if cfg.gateway_mode == GatewayMode::Local {
        tr.options.insert("ct-commit-all".into(), "true".into());
    }

    let mut ls = LogicalSwitch {
        name: names.layer2_switch(),
        external_ids: switch_ids(net, topo),
        load_balancer_group: [cluster_lbg.clone(), switch_lbg].into(),
        ..Default::default()
    };
    for s in &net.subnets {
        if s.cidr.addr().is_ipv4() {
            ls.other_config
                .insert(ls_other_config::SUBNET.into(), s.cidr.to_string());
        } else {
            ls.other_config.insert(
                ls_other_config::IPV6_PREFIX.into(),
                s.cidr.network().to_string(),
            );
        }
    }
    let ls_key = keys[0].to_string();
    for (k, v) in [
        (ls_other_config::INTERCONN_TS, names.layer2_switch()),
        (ls_other_config::REQUESTED_TNL_KEY, ls_key),
        (ls_other_config::MCAST_SNOOP, "true".into()),
        (ls_other_config::MCAST_QUERIER, "false".into()),
        (ls_other_config::MCAST_FLOOD_UNREGISTERED, "true".into()),
    ] {
        ls.other_config.insert(k.into(), v);
    }

    // The transit router's port on the switch: the pods' gateway on every node.
    let gateways: Vec<IpNet> = if net.default_gateway_ips.is_empty() {
        net.subnets
            .iter()
            .filter_map(|s| nth_in(&s.cidr, 1))
            .collect()
    } else {
        net.default_gateway_ips
            .iter()
            .filter_map(|g| {
                let s = net.subnets.iter().find(|s| s.cidr.contains(g))?;
                Some(with_len(*g, s.cidr.prefix_len()))
            })
            .collect()
    };
    let mut trtos = router_port(&names.trtos(), &gateways);
    trtos.options.insert(
        lrp_options::REQUESTED_TNL_KEY.into(),
        TRANSIT_ROUTER_TO_SWITCH_KEY.to_string(),
    );
    let nodes = inputs.nodes();
    if nodes.iter().filter(|n| n.local).all(|n| n.gateway_mtu) {
        trtos
            .options
            .insert(lrp_options::GATEWAY_MTU.into(), cfg.mtu.to_string());
    }
    if net.has_ipv6() {
        trtos.ipv6_ra_configs = map([
            ("address_mode", "dhcpv6_stateful"),
            ("send_periodic", "true"),
            ("max_interval", "900"),
            ("min_interval", "300"),
            ("router_preference", "LOW"),
            ("mtu", net.mtu.to_string().as_str()),
        ]);
    }
    // Bound to the zone's chassis: OVN-Kubernetes has one node per zone; with several
    // local nodes each chassis is a gateway chassis of equal priority.
    let mut chassis: Vec<&str> = nodes
        .iter()
        .filter(|n| n.local)
        .filter_map(|n| n.chassis)
        .collect();
    chassis.sort_unstable();
    chassis.dedup();
    for c in chassis {
        let gc_name = format!("{}-{c}", names.trtos());
        let gc = GatewayChassis {
            name: gc_name.clone(),
            chassis_name: c.to_owned(),
            priority: 1,
            ..Default::default()
        };
        trtos.gateway_chassis.insert(d.add(gc_name, gc));
    }
    tr.ports.insert(d.add(names.trtos(), trtos));
    let mut stotr = LogicalSwitchPort::to_router(names.stotr(), names.trtos());
    stotr.external_ids = net_ids(net, topo);
    ls.ports.insert(d.add(names.stotr(), stotr));

    for node in &nodes {
        let n = node.name;
        let (tr_side, gr_side) = node_pairs(transit, node.id);
        if tr_side.is_empty() {
            continue;
        }
        let gr_join: Vec<IpNet> = net
            .join_subnets_in_use()
            .iter()
            .filter_map(|j| nth_in(j, node.id as u128))
            .collect();
        let tr_key = (TRANSIT_ROUTER_PORT_KEY_OFFSET + node.id).to_string();
        let mut trtor = router_port(&names.trtor(n), &tr_side);
        trtor
            .options
            .insert(lrp_options::REQUESTED_TNL_KEY.into(), tr_key);
        trtor.external_ids = net_ids(net, topo);
        if node.local {
            let Some(chassis) = node.chassis else {
                continue;
            };
            trtor.peer = Some(names.rtotr(n));
            tr.ports.insert(d.add(names.trtor(n), trtor));
            let mut gr = gateway::router(
                inputs,
                net,
                &names,
                node,
                chassis,
                topo,
                &cluster_lbg,
                &router_lbg,
                d,
            );
            let joins: Vec<String> = gr_join.iter().map(|j| j.addr().to_string()).collect();
            gr.options
                .insert("lb_force_snat_ip".into(), joins.join(" "));
            let mut rtotr_nets = gr_join.clone();
            rtotr_nets.extend(gr_side.iter().copied());
            let mut rtotr = router_port(&names.rtotr(n), &rtotr_nets);
            rtotr.peer = Some(names.trtor(n));
            rtotr.external_ids = net_ids(net, topo);
            if node.gateway_mtu {
                rtotr
                    .options
                    .insert(lrp_options::GATEWAY_MTU.into(), cfg.mtu.to_string());
            }
            gr.ports.insert(d.add(names.rtotr(n), rtotr));
            let gr_name = names.gateway_router(n);
            for s in &net.subnets {
                if let Some(via) = same_family(&tr_side, s.cidr.addr().is_ipv4()) {
                    let route = LogicalRouterStaticRoute {
                        ip_prefix: s.cidr.to_string(),
                        nexthop: via.to_string(),
                        output_port: Some(names.rtotr(n)),
                        external_ids: net_ids(net, topo),
                        ..Default::default()
                    };
                    add_route(d, &mut gr.static_routes, &gr_name, route);
                }
                if cfg.gateway_mode == GatewayMode::Shared {
                    if let Some(via) = same_family(&gr_side, s.cidr.addr().is_ipv4()) {
                        let route = LogicalRouterStaticRoute {
                            ip_prefix: s.cidr.to_string(),
                            nexthop: via.to_string(),
                            policy: Some(LogicalRouterStaticRoutePolicy::SrcIp),
                            external_ids: net_ids(net, topo),
                            ..Default::default()
                        };
                        add_route(d, &mut tr.static_routes, &tr_name, route);
                    }
                }
            }
            for j in &gr_join {
                if let Some(via) = same_family(&gr_side, j.addr().is_ipv4()) {
                    let route = LogicalRouterStaticRoute {
                        ip_prefix: j.addr().to_string(),
                        nexthop: via.to_string(),
                        external_ids: net_ids(net, topo),
                        ..Default::default()
                    };
                    add_route(d, &mut tr.static_routes, &tr_name, route);
                }
            }
            if let Some(gw) = node.gateway {
                gateway::external_side(
                    inputs, net, id, &names, node, gw, topo, &mut gr, &gr_join, d,
                );
            }
            d.add(gr_name, gr);
        } else {
            let Some(chassis) = node.chassis else {
                continue;
            };
            trtor
                .options
                .insert(lrp_options::REQUESTED_CHASSIS.into(), chassis.to_owned());
            trtor.external_ids.insert(NODE.into(), n.to_owned());
            tr.ports.insert(d.add(names.trtor(n), trtor));
            for j in &gr_join {
                if let Some(via) = same_family(&gr_side, j.addr().is_ipv4()) {
                    let mut ids = net_ids(net, topo);
                    ids.insert(NODE.into(), n.to_owned());
                    let route = LogicalRouterStaticRoute {
                        ip_prefix: j.addr().to_string(),
                        nexthop: via.to_string(),
                        external_ids: ids,
                        ..Default::default()
                    };
                    add_route(d, &mut tr.static_routes, &tr_name, route);
                }
            }
        }
    }
    d.add(names.layer2_switch(), ls);
    d.add(tr_name, tr);
    Ok(())
}

#[cfg(test)]
mod tests;
