//! A primary Layer2 network with a transit router (OKEP-5094, docs/ovn-kubernetes.md §3).
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
//!
//! Each local node's host hangs off the switch by its management port `k8s-<p><node>`
//! (the `.2` of each subnet, the same on every node: a zone holds only its own); the
//! transit router SNATs what it sends there to the network's masquerade address and,
//! once the node has a gateway, reroutes the pods' packets for the node's address to
//! it ([`super::host`]). A local node gets its gateway router (and the `trtor-` port
//! peered with it) only from its `k8s.ovn.org/l3-gateway-config`, as in
//! OVN-Kubernetes.

use std::net::IpAddr;

use ipnet::IpNet;
use nb_model::keys::{lr_options, lrp_options, ls_other_config};
use nb_model::{LogicalRouter, LogicalSwitch, LogicalSwitchPort};

use super::builder::NetworkBuilder;
use super::desired::{Desired, Fragments};
use super::host::{self, HostSide};
use super::rows::{add_route, bind_to_chassis, map, router_port, same_family};
use super::{egress_ip, interconnect, BuildError, GatewayMode, Inputs, NodeView};
use crate::alloc::transit::node_pair;
use crate::api::annotations::L3GatewayConfig;
use crate::api::Network;
use crate::ovnk::addr::{nth, with_len};
use crate::ovnk::fingerprint;

/// The tunnel key of every zone's `trtos-` port.
pub(crate) const TRANSIT_ROUTER_TO_SWITCH_KEY: u32 = 1;
/// `trtor-` ports take `node id + this` (keys 2 to 9 are reserved).
pub(crate) const TRANSIT_ROUTER_PORT_KEY_OFFSET: u32 = 10;

/// The transit router's and the gateway router's addresses for `node_id`, one per
/// transit subnet (IPv4 first).
pub(crate) fn node_pairs(transit: &[IpNet], node_id: u32) -> (Vec<IpNet>, Vec<IpNet>) {
    transit.iter().filter_map(|t| node_pair(t, node_id)).unzip()
}

/// Builds the rows of Layer2 network `net` (id `id`) into `d`. Each node's own rows (its
/// `trtor-` port and, for a node of the zone with a gateway, its gateway router and
/// what hangs off it) are a fragment (`node:<name>`), left out when `known` says they
/// are in the NB as built from the same inputs: the network, its id, tunnel keys and
/// transit subnets, the settings and the zone, the node and its address pair. The
/// network-wide rows are the base fragment, kept as they are when those network
/// inputs, the zone's nodes and the default services they route are the same: then
/// only what the nodes built now put into their sets is written.
pub fn build(
    inputs: &Inputs,
    net: &Network,
    id: u32,
    d: &mut Desired,
    known: &dyn Fragments,
) -> Result<(), BuildError> {
    let name = net.name();
    let keys = inputs.allocations.tunnel_keys.get(&name);
    let transit = inputs.allocations.transit_subnets.get(&name);
    let (Some(keys), Some(transit)) = (keys, transit) else {
        return Err(BuildError::NoTransit(name));
    };
    let network = fingerprint(("layer2", net, id, keys, transit, inputs.config, inputs.zone));
    let nodes = inputs.nodes();
    let local: Vec<&NodeView> = nodes.iter().filter(|n| n.local).collect();
    let services = match local.is_empty() {
        true => Vec::new(),
        false => inputs.allowed_default_services(),
    };
    // The network-wide rows: the router, the switch, and what the zone's nodes give
    // them (the switch port's chassis, the management ports and what goes to them).
    d.base_fragment(known, fingerprint((network, &local, &services)));
    let b = NetworkBuilder::new(inputs, net, id, "layer2", d);
    let mut l2 = Layer2::new(b, keys);
    if inputs.config.egress_ip {
        // On the transit router, the network's cluster router (OKEP-5094's listing).
        let tr_name = l2.b.names.transit_router();
        egress_ip::add_no_reroute_policies(&mut l2.b, &mut l2.tr, &tr_name);
    }
    l2.switch_port(&nodes);
    for node in &local {
        l2.management_port(node);
    }
    if local.len() > 1 {
        // OVN-Kubernetes has one node per zone, so a zone's switch holds one
        // management port; with one NB for several nodes they share one address.
        let names: Vec<&str> = local.iter().map(|n| n.name).collect();
        l2.b.d.incomplete.push(format!(
            "nodes {} share one NB (no zone): their management ports on Layer2 network {} \
             have the same address, so at most one node's host is reachable from its pods; \
             run netconnectd per zone for host access",
            names.join(", "),
            name
        ));
    }
    if !local.is_empty() {
        // One ACL per address: the zone's management ports share their addresses.
        let switch = l2.b.names.layer2_switch();
        let acls = l2.b.allow_from_node(&switch, &l2.management);
        l2.ls.acls.extend(acls);
        l2.management_side(
            local.iter().any(|n| n.gateway_router().is_some()),
            &services,
        );
    }
    for node in &nodes {
        let (tr_side, gr_side) = node_pairs(transit, node.id);
        if tr_side.is_empty() {
            continue;
        }
        let Some(chassis) = node.chassis else {
            continue;
        };
        let fragment = fingerprint((network, node, chassis, &tr_side, &gr_side));
        if !l2.b.d.fragment_hashed(known, node.digest.label, fragment) {
            continue;
        }
        let pair = Pair { tr_side, gr_side };
        if node.local {
            if let Some((chassis, gw)) = node.gateway_router() {
                let trtor = l2.transit_router_port(node, &pair);
                l2.local_node(node, chassis, gw, trtor, &pair);
            }
        } else {
            let trtor = l2.transit_router_port(node, &pair);
            let b = &mut l2.b;
            interconnect::remote_transit_router_port(
                b,
                node,
                chassis,
                trtor,
                &pair.gr_side,
                &mut l2.tr,
            );
        }
        l2.b.d.end_fragment();
    }
    l2.finish();
    Ok(())
}

/// The gateway and management addresses of each of `net`'s subnets, with the
/// subnet's prefix length: `.1` and `.2` (OVN-Kubernetes' `GetNodeGatewayIfAddr`,
/// `GetNodeManagementIfAddr`), or with `preconfigured` (`allocateInfrastructureIPs`)
/// the family's `defaultGatewayIPs` entry, else the first free address of its
/// infrastructure subnets, and the next free one for the management port; what is
/// not found there falls back to `.1` and `.2` (`.1` for the management port when
/// the gateway is `.2`). Free means not the subnet's network or broadcast address
/// and not taken by the gateway.
pub(crate) fn infrastructure_addresses(net: &Network, preconfigured: bool) -> Vec<(IpNet, IpNet)> {
    let mut out = Vec::new();
    for s in &net.subnets {
        let cidr = s.cidr;
        let ipv4 = cidr.addr().is_ipv4();
        let (Some(one), Some(two)) = (nth(&cidr, 1), nth(&cidr, 2)) else {
            continue;
        };
        let (mut gw, mut mgmt) = (None, None);
        if preconfigured {
            gw = net
                .default_gateway_ips
                .iter()
                .copied()
                .find(|g| g.is_ipv4() == ipv4);
            let infra: Vec<&IpNet> = net
                .infrastructure_subnets
                .iter()
                .filter(|i| i.addr().is_ipv4() == ipv4)
                .collect();
            let mut taken = vec![cidr.network()];
            if ipv4 {
                taken.push(cidr.broadcast());
            }
            if !infra.is_empty() {
                if gw.is_none() {
                    gw = first_free(&infra, &taken);
                }
                taken.extend(gw);
                mgmt = first_free(&infra, &taken);
            }
        }
        let gw = gw.unwrap_or(one);
        let mgmt = mgmt.unwrap_or(if two == gw { one } else { two });
        let len = cidr.prefix_len();
        out.push((with_len(gw, len), with_len(mgmt, len)));
    }
    out
}

/// The first address of `subnets` (in order, each from its network address) not in
/// `taken`.
fn first_free(subnets: &[&IpNet], taken: &[IpAddr]) -> Option<IpAddr> {
    subnets.iter().find_map(|s| {
        (0..=taken.len() as u128)
            .filter_map(|i| nth(s, i))
            .find(|ip| !taken.contains(ip))
    })
}

/// The transit router `tr` as the host sees it: `trtos-` toward the switch.
fn host_side<'r>(b: &NetworkBuilder, tr: &'r mut LogicalRouter) -> HostSide<'r> {
    HostSide {
        router: tr,
        router_name: b.names.transit_router(),
        port: b.names.trtos(),
        gateway_port: None,
        switch: b.names.layer2_switch(),
    }
}

/// A node's link between the transit router and its gateway router: one address pair
/// per transit subnet (IPv4 first).
struct Pair {
    /// The transit router's side.
    tr_side: Vec<IpNet>,
    /// The gateway router's side.
    gr_side: Vec<IpNet>,
}

/// A Layer2 network being built: the rows every node adds to.
struct Layer2<'a> {
    b: NetworkBuilder<'a>,
    /// `<p>transit_router`.
    tr: LogicalRouter,
    /// `<p>ovn_layer2_switch`.
    ls: LogicalSwitch,
    /// The network's subnets, in spec order.
    subnets: Vec<IpNet>,
    /// Every node's management port addresses, one per subnet.
    management: Vec<IpNet>,
}

impl<'a> Layer2<'a> {
    /// The transit router (the network's second tunnel key) and the switch (its
    /// first), with the network's subnets.
    fn new(mut b: NetworkBuilder<'a>, keys: &[u32]) -> Self {
        let options = map([(lr_options::REQUESTED_TNL_KEY, keys[1].to_string().as_str())]);
        let tr = b.network_router(b.names.transit_router(), options);
        let mut ls = b.interconnect_switch(b.names.layer2_switch(), keys[0]);
        ls.load_balancer_group = [b.lb_groups.cluster.clone(), b.lb_groups.switch.clone()].into();
        for s in &b.net.subnets {
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
        let subnets = b.net.subnets.iter().map(|s| s.cidr).collect();
        let mut l2 = Layer2 {
            b,
            tr,
            ls,
            subnets,
            management: Vec::new(),
        };
        l2.management = l2.management_addresses();
        l2
    }

    /// The pods' default gateways, with their subnet's prefix length.
    fn pod_gateways(&self) -> Vec<IpNet> {
        infrastructure_addresses(self.b.net, self.b.cfg.preconfigured_udn_addresses)
            .into_iter()
            .map(|(gw, _)| gw)
            .collect()
    }

    /// `trtos-` on the transit router, the pods' gateway on every node, and its peer
    /// `stotr-` on the switch. Bound to the zone's chassis: OVN-Kubernetes has one node
    /// per zone; with several local nodes each chassis is a gateway chassis of equal
    /// priority.
    fn switch_port(&mut self, nodes: &[NodeView]) {
        let net = self.b.net;
        let mut trtos = router_port(&self.b.names.trtos(), &self.pod_gateways());
        trtos.options.insert(
            lrp_options::REQUESTED_TNL_KEY.into(),
            TRANSIT_ROUTER_TO_SWITCH_KEY.to_string(),
        );
        if nodes.iter().filter(|n| n.local).all(|n| n.gateway_mtu) {
            trtos
                .options
                .insert(lrp_options::GATEWAY_MTU.into(), self.b.cfg.mtu.to_string());
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
        let mut chassis: Vec<&str> = nodes
            .iter()
            .filter(|n| n.local)
            .filter_map(|n| n.chassis)
            .collect();
        chassis.sort_unstable();
        chassis.dedup();
        for c in chassis {
            bind_to_chassis(self.b.d, &mut trtos, c);
        }
        let names = &self.b.names;
        self.tr.ports.insert(self.b.d.add(names.trtos(), trtos));
        let mut stotr = LogicalSwitchPort::to_router(names.stotr(), names.trtos());
        stotr.external_ids = self.b.ids();
        self.ls.ports.insert(self.b.d.add(names.stotr(), stotr));
    }

    /// The management port's addresses, with their subnet's prefix length.
    fn management_addresses(&self) -> Vec<IpNet> {
        infrastructure_addresses(self.b.net, self.b.cfg.preconfigured_udn_addresses)
            .into_iter()
            .map(|(_, mgmt)| mgmt)
            .collect()
    }

    /// `k8s-<p><node>` on the switch for a local node.
    fn management_port(&mut self, node: &NodeView) {
        if self.management.is_empty() {
            return;
        }
        let port = self.b.management_port(node.name, &self.management);
        self.ls.ports.insert(port);
    }

    /// What the transit router sends toward the management port (the same on every
    /// node): with a local gateway, its masquerade SNAT (OVN-Kubernetes'
    /// `addOrUpdateUDNClusterSubnetEgressSNAT`); in local gateway mode, the pods'
    /// source routes through it; in shared gateway mode, the routes to the default
    /// network's allowed `services` through it.
    fn management_side(&mut self, gateway: bool, services: &[(&str, &[IpAddr])]) {
        let mgmt_mac = host::management_mac(&self.management);
        let Layer2 {
            b,
            tr,
            subnets,
            management,
            ..
        } = self;
        let mut side = host_side(b, tr);
        if gateway {
            b.management_snat(&mut side, subnets, &mgmt_mac);
        }
        b.management_routes(&mut side, subnets, management);
        b.default_service_routes(&mut side, services, management);
    }

    /// `trtor-GR_…`, the transit router's port toward a node's gateway router (its
    /// tunnel key `10 + node id`), not yet added.
    fn transit_router_port(&self, node: &NodeView, pair: &Pair) -> nb_model::LogicalRouterPort {
        let key = TRANSIT_ROUTER_PORT_KEY_OFFSET + node.id;
        let mut trtor = router_port(&self.b.names.trtor(node.name), &pair.tr_side);
        trtor
            .options
            .insert(lrp_options::REQUESTED_TNL_KEY.into(), key.to_string());
        trtor.external_ids = self.b.ids();
        trtor
    }

    /// A node of the zone with a gateway: `trtor-` peered with its gateway router's
    /// `rtotr-`, the gateway router with its routes and external side, the transit
    /// router's routes to it, and the reroutes of the node's addresses to its
    /// management port.
    fn local_node(
        &mut self,
        node: &NodeView,
        chassis: &str,
        gw: &L3GatewayConfig,
        mut trtor: nb_model::LogicalRouterPort,
        pair: &Pair,
    ) {
        let n = node.name;
        trtor.peer = Some(self.b.names.rtotr(n));
        self.tr
            .ports
            .insert(self.b.d.add(self.b.names.trtor(n), trtor));
        let gr_join = self.b.gateway_join(node.id);
        let mut gr = self.b.gateway_router(node, chassis);
        let joins: Vec<String> = gr_join.iter().map(|j| j.addr().to_string()).collect();
        gr.options
            .insert("lb_force_snat_ip".into(), joins.join(" "));
        self.gateway_port(node, &gr_join, pair, &mut gr);
        self.gateway_routes(node, &gr_join, pair, &mut gr);
        self.b.external_side(node, gw, &mut gr, &gr_join);
        self.b.d.add(self.b.names.gateway_router(n), gr);
        // A Layer2 network's node has no host addresses besides its own
        // (OVN-Kubernetes' `hostAddrs` is empty for Layer2).
        let Layer2 {
            b, tr, management, ..
        } = self;
        let mut side = host_side(b, tr);
        b.node_ip_reroutes(&mut side, gw, &[], management);
    }

    /// `rtotr-GR_…`: the gateway router's port toward the transit router, with its join
    /// addresses and its side of the pair.
    fn gateway_port(
        &mut self,
        node: &NodeView,
        gr_join: &[IpNet],
        pair: &Pair,
        gr: &mut LogicalRouter,
    ) {
        let n = node.name;
        let mut networks = gr_join.to_vec();
        networks.extend(pair.gr_side.iter().copied());
        let mut rtotr = router_port(&self.b.names.rtotr(n), &networks);
        rtotr.peer = Some(self.b.names.trtor(n));
        rtotr.external_ids = self.b.ids();
        if node.gateway_mtu {
            rtotr
                .options
                .insert(lrp_options::GATEWAY_MTU.into(), self.b.cfg.mtu.to_string());
        }
        gr.ports.insert(self.b.d.add(self.b.names.rtotr(n), rtotr));
    }

    /// The gateway router's routes to the network's subnets via the transit router;
    /// the transit router's source routes out through the gateway router (shared
    /// gateway mode) and its routes to the gateway router's join addresses.
    fn gateway_routes(
        &mut self,
        node: &NodeView,
        gr_join: &[IpNet],
        pair: &Pair,
        gr: &mut LogicalRouter,
    ) {
        let b = &mut self.b;
        let gr_name = b.names.gateway_router(node.name);
        let tr_name = b.names.transit_router();
        for s in &b.net.subnets {
            let ipv4 = s.cidr.addr().is_ipv4();
            if let Some(via) = same_family(&pair.tr_side, ipv4) {
                let mut route = b.route(s.cidr, via);
                route.output_port = Some(b.names.rtotr(node.name));
                add_route(b.d, &mut gr.static_routes, &gr_name, route);
            }
            if b.cfg.gateway_mode == GatewayMode::Shared {
                if let Some(via) = same_family(&pair.gr_side, ipv4) {
                    let route = b.source_route(s.cidr, via);
                    add_route(b.d, &mut self.tr.static_routes, &tr_name, route);
                }
            }
        }
        for j in gr_join {
            if let Some(via) = same_family(&pair.gr_side, j.addr().is_ipv4()) {
                let route = b.route(j.addr(), via);
                add_route(b.d, &mut self.tr.static_routes, &tr_name, route);
            }
        }
    }

    /// Adds the network-wide rows, complete now that every node is in.
    fn finish(self) {
        let Layer2 { mut b, tr, ls, .. } = self;
        let management_ports = std::mem::take(&mut b.management_ports);
        b.cluster_port_groups(management_ports);
        b.d.add(b.names.layer2_switch(), ls);
        b.d.add(b.names.transit_router(), tr);
        b.d.end_fragment();
    }
}

#[cfg(test)]
mod tests;
