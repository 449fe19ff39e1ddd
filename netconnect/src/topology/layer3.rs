//! A primary Layer3 network (docs/ovn-kubernetes.md §2): a distributed cluster router with a switch
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

use std::net::IpAddr;

use ipnet::IpNet;
use nb_model::keys::{lrp_options, ls_other_config};
use nb_model::{LogicalRouter, LogicalRouterPort, LogicalSwitch, LogicalSwitchPort};
use ovsdb_proto::model::Ref;

use super::builder::NetworkBuilder;
use super::desired::{Desired, Fragments};
use super::host::{self, HostSide};
use super::rows::{add_route, bind_to_chassis, map, router_port, same_family};
use super::{egress_ip, interconnect, GatewayMode, Inputs, NodeView};
use crate::api::annotations::L3GatewayConfig;
use crate::api::Network;
use crate::ovnk::addr::nth_in;
use crate::ovnk::fingerprint;
use crate::ovnk::names::Names;

/// Builds the rows of Layer3 network `net` (id `id`) into `d`. Each node's rows are a
/// fragment (`node:<name>`), left out when `known` says they are in the NB as built
/// from the same inputs: the network, its id, the settings and the zone, the node, its
/// host subnets and the default services it routes (a remote node's, only what of the
/// network it uses: its name and join subnets). The network-wide rows (the
/// routers, switches and policies every node's rows go into) are the base fragment,
/// kept as they are when the network, its id, the settings and the zone are the same:
/// then only what the nodes built now put into their sets is written.
pub fn build(inputs: &Inputs, net: &Network, id: u32, d: &mut Desired, known: &dyn Fragments) {
    let network = fingerprint(("layer3", net, id, inputs.config, inputs.zone));
    d.base_fragment(known, network);
    let mut l3 = Layer3::new(NetworkBuilder::new(inputs, net, id, "layer3", d));
    let remote = interconnect::remote_node_inputs(&l3.b);
    let mut default_services = inputs.allowed_default_services();
    if inputs.config.egress_ip {
        l3.no_reroute_policies();
    }
    let name = net.name();
    // With one local node (OVN-Kubernetes' one node per zone) the cluster router has
    // one distributed gateway port, and the management port's SNAT names only its
    // logical port, as OVN-Kubernetes writes it; with several (one NB for many nodes)
    // OVN needs each SNAT to name its gateway port too.
    l3.several_local = inputs.node_views().filter(|n| n.local).nth(1).is_some();
    // The network's host subnets, walked beside the nodes (both in name order).
    let mut hosts = inputs
        .allocations
        .host_subnets
        .get(&name)
        .map(|m| m.iter().peekable());
    for node in inputs.node_views() {
        if node.transit.is_empty() {
            continue;
        }
        let subnets = hosts
            .as_mut()
            .and_then(|h| super::in_step(h, node.name))
            .map_or(&[][..], |s| &**s);
        let local = node.local && !subnets.is_empty();
        // Through the first local node's host: OVN-Kubernetes has one node per zone.
        let services = match local {
            true => std::mem::take(&mut default_services),
            false => Vec::new(),
        };
        // A remote node's rows take less of the network than a local node's.
        let inputs = match node.local {
            true => fingerprint((network, &node, &services, subnets, l3.several_local)),
            false => fingerprint((remote, &node, subnets)),
        };
        if !l3.b.d.fragment_hashed(known, node.digest.label, inputs) {
            continue;
        }
        if !node.local {
            interconnect::remote_node(&mut l3.b, &node, subnets, &mut l3.cr, &mut l3.ts);
        } else if local {
            l3.local_node(&node, subnets, &services);
        }
        l3.b.d.end_fragment();
    }
    l3.finish();
}

/// The cluster router as the host sees it from `node`: `rtos-<p><node>` toward the
/// node switch, which a NAT must name as its gateway port (`rtos`) when the router has
/// several distributed gateway ports (a local node each).
fn host_side<'r>(
    names: &Names,
    cr: &'r mut LogicalRouter,
    node: &NodeView,
    rtos: Option<Ref<LogicalRouterPort>>,
) -> HostSide<'r> {
    HostSide {
        router: cr,
        router_name: names.cluster_router(),
        port: names.rtos(node.name),
        gateway_port: rtos,
        switch: names.node_switch(node.name),
    }
}

/// A Layer3 network being built: the rows every node adds to.
struct Layer3<'a> {
    b: NetworkBuilder<'a>,
    /// `<p>ovn_cluster_router`.
    cr: LogicalRouter,
    /// `<p>join`.
    join: LogicalSwitch,
    /// `<p>transit_switch`.
    ts: LogicalSwitch,
    /// The cluster router's addresses on the join switch (`.1` of each join subnet).
    cr_join: Vec<IpNet>,
    /// The network has several local nodes: the cluster router several distributed
    /// gateway ports.
    several_local: bool,
}

/// A local node's addresses in its host subnets (IPv4 first).
struct HostAddresses<'s> {
    /// The host subnets.
    subnets: &'s [IpNet],
    /// The cluster router's port on the node switch: `.1` of each.
    gateway: Vec<IpNet>,
    /// The management port: `.2` of each.
    management: Vec<IpNet>,
}

impl<'s> HostAddresses<'s> {
    fn new(subnets: &'s [IpNet]) -> Self {
        HostAddresses {
            subnets,
            gateway: subnets.iter().filter_map(|s| nth_in(s, 1)).collect(),
            management: host::management_addresses(subnets),
        }
    }
}

impl<'a> Layer3<'a> {
    /// The cluster router, the join switch with the router's port on it, and the
    /// transit switch.
    fn new(mut b: NetworkBuilder<'a>) -> Self {
        let options = map([("always_learn_from_arp_request", "false")]);
        let cr = b.network_router(b.names.cluster_router(), options);
        let join = LogicalSwitch {
            name: b.names.join_switch(),
            external_ids: b.ids(),
            ..Default::default()
        };
        let ts = interconnect::transit_switch(&b);
        let cr_join = b
            .net
            .join_subnets_in_use()
            .iter()
            .filter_map(|j| nth_in(j, 1))
            .collect();
        let mut l3 = Layer3 {
            b,
            cr,
            join,
            ts,
            cr_join,
            several_local: false,
        };
        l3.cluster_join_ports();
        l3
    }

    /// `rtoj-<p>ovn_cluster_router` on the cluster router and its peer on the join
    /// switch.
    fn cluster_join_ports(&mut self) {
        let names = &self.b.names;
        let mut rtoj = router_port(&names.rtoj_cluster(), &self.cr_join);
        rtoj.external_ids = self.b.ids();
        self.cr
            .ports
            .insert(self.b.d.add(names.rtoj_cluster(), rtoj));
        let jtor = LogicalSwitchPort::to_router(names.jtor_cluster(), names.rtoj_cluster());
        self.join
            .ports
            .insert(self.b.d.add(names.jtor_cluster(), jtor));
    }

    /// The priority-102 policies on the cluster router.
    fn no_reroute_policies(&mut self) {
        let cr_name = self.b.names.cluster_router();
        egress_ip::add_no_reroute_policies(&mut self.b, &mut self.cr, &cr_name);
    }

    /// A node of the zone: its switch, the cluster router's port, NAT and routes for
    /// it and for the default network's allowed `services` (the first local node's),
    /// its transit switch pair and, once it has a chassis, its gateway router.
    fn local_node(
        &mut self,
        node: &NodeView,
        subnets: &[IpNet],
        services: &[(&'a str, &'a [IpAddr])],
    ) {
        let host = HostAddresses::new(subnets);
        self.node_switch(node, &host);
        let rtos = self.cluster_router_port(node, &host);
        let mgmt_mac = host::management_mac(&host.management);
        let gateway_port = self.several_local.then_some(rtos);
        let mut side = host_side(&self.b.names, &mut self.cr, node, gateway_port);
        self.b.management_snat(&mut side, host.subnets, &mgmt_mac);
        self.b
            .management_routes(&mut side, host.subnets, &host.management);
        self.b
            .default_service_routes(&mut side, services, &host.management);
        interconnect::local_pair(&mut self.b, node, &mut self.cr, &mut self.ts);
        if let Some((chassis, gw)) = node.gateway_router() {
            self.gateway(node, chassis, gw, &host);
        }
    }

    /// `<p><node>`: the host subnets in `other_config`, `stor-` and the management
    /// port.
    fn node_switch(&mut self, node: &NodeView, host: &HostAddresses) {
        let n = node.name;
        let names = &self.b.names;
        let mut ls = LogicalSwitch {
            name: names.node_switch(n),
            external_ids: self.b.switch_ids(),
            load_balancer_group: [
                self.b.lb_groups.cluster.clone(),
                self.b.lb_groups.switch.clone(),
            ]
            .into(),
            ..Default::default()
        };
        // No `exclude_ips`: OVN-Kubernetes excludes the management port's address
        // only until the port exists (`UpdateNodeSwitchExcludeIPs`), and the port is
        // written with the switch.
        for s in host.subnets {
            if s.addr().is_ipv4() {
                ls.other_config
                    .insert(ls_other_config::SUBNET.into(), s.to_string());
            } else {
                ls.other_config
                    .insert(ls_other_config::IPV6_PREFIX.into(), s.network().to_string());
            }
        }
        let stor = LogicalSwitchPort::to_router(names.stor(n), names.rtos(n));
        ls.ports.insert(self.b.d.add(names.stor(n), stor));
        ls.ports.insert(self.b.management_port(n, &host.management));
        ls.acls = self
            .b
            .allow_from_node(&ls.name, &host.management)
            .into_iter()
            .collect();
        self.b.d.add(self.b.names.node_switch(n), ls);
    }

    /// `rtos-<p><node>`: the cluster router's port to the node switch, a distributed
    /// gateway port on the node's chassis.
    fn cluster_router_port(
        &mut self,
        node: &NodeView,
        host: &HostAddresses,
    ) -> Ref<LogicalRouterPort> {
        let name = self.b.names.rtos(node.name);
        let mut rtos = router_port(&name, &host.gateway);
        if node.gateway_mtu {
            rtos.options
                .insert(lrp_options::GATEWAY_MTU.into(), self.b.cfg.mtu.to_string());
        }
        if let Some(chassis) = node.chassis {
            bind_to_chassis(self.b.d, &mut rtos, chassis);
        }
        let rtos = self.b.d.add(name, rtos);
        self.cr.ports.insert(rtos.clone());
        rtos
    }

    /// The node's gateway router, its join switch pair, the routes between it and the
    /// cluster router, the reroutes to the node's addresses and the router's external
    /// side.
    fn gateway(
        &mut self,
        node: &NodeView,
        chassis: &str,
        gw: &L3GatewayConfig,
        host: &HostAddresses,
    ) {
        let gr_join = self.b.gateway_join(node.id);
        let mut gr = self.b.gateway_router(node, chassis);
        self.gateway_join_ports(node, &gr_join, &mut gr);
        self.gateway_routes(node, host, &gr_join, &mut gr);
        // The gateway router's masquerade addresses are the node's too (OVN-Kubernetes'
        // `hostAddrs` of a Layer3 network).
        let masquerade: Vec<IpAddr> = [true, false]
            .into_iter()
            .filter_map(|ipv4| self.b.gateway_masquerade(ipv4))
            .collect();
        let mut side = host_side(&self.b.names, &mut self.cr, node, None);
        self.b
            .node_ip_reroutes(&mut side, gw, &masquerade, &host.management);
        self.b.external_side(node, gw, &mut gr, &gr_join);
        self.b.d.add(self.b.names.gateway_router(node.name), gr);
    }

    /// `rtoj-GR_…` on the gateway router (its join addresses) and `jtor-GR_…` on the
    /// join switch.
    fn gateway_join_ports(&mut self, node: &NodeView, gr_join: &[IpNet], gr: &mut LogicalRouter) {
        let n = node.name;
        let names = &self.b.names;
        let mut rtoj = router_port(&names.rtoj_gateway(n), gr_join);
        rtoj.external_ids = self.b.ids();
        if node.gateway_mtu {
            rtoj.options
                .insert(lrp_options::GATEWAY_MTU.into(), self.b.cfg.mtu.to_string());
        }
        gr.ports.insert(self.b.d.add(names.rtoj_gateway(n), rtoj));
        let mut jtor = LogicalSwitchPort::to_router(names.jtor_gateway(n), names.rtoj_gateway(n));
        jtor.external_ids = self.b.ids();
        self.join
            .ports
            .insert(self.b.d.add(names.jtor_gateway(n), jtor));
    }

    /// The gateway router's routes to the cluster subnets via the cluster router; the
    /// cluster router's routes to the gateway router's join addresses, and (shared
    /// gateway mode) its source routes sending the node's pods out through the gateway
    /// router.
    fn gateway_routes(
        &mut self,
        node: &NodeView,
        host: &HostAddresses,
        gr_join: &[IpNet],
        gr: &mut LogicalRouter,
    ) {
        let b = &mut self.b;
        let gr_name = b.names.gateway_router(node.name);
        let cr_name = b.names.cluster_router();
        for s in &b.net.subnets {
            if let Some(via) = same_family(&self.cr_join, s.cidr.addr().is_ipv4()) {
                let route = b.route(s.cidr, via);
                add_route(b.d, &mut gr.static_routes, &gr_name, route);
            }
        }
        for j in gr_join {
            let route = b.route(j.addr(), j.addr());
            add_route(b.d, &mut self.cr.static_routes, &cr_name, route);
        }
        if b.cfg.gateway_mode == GatewayMode::Shared {
            for s in host.subnets {
                if let Some(via) = same_family(gr_join, s.addr().is_ipv4()) {
                    let route = b.source_route(s, via);
                    add_route(b.d, &mut self.cr.static_routes, &cr_name, route);
                }
            }
        }
    }

    /// Adds the network-wide rows, complete now that every node is in.
    fn finish(self) {
        let Layer3 {
            mut b,
            cr,
            join,
            ts,
            ..
        } = self;
        let management_ports = std::mem::take(&mut b.management_ports);
        b.cluster_port_groups(management_ports);
        b.d.add(b.names.join_switch(), join);
        b.d.add(b.names.transit_switch(), ts);
        b.d.add(b.names.cluster_router(), cr);
        b.d.end_fragment();
    }
}

#[cfg(test)]
mod tests;
