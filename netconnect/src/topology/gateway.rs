//! The gateway router of a local node (`GR_<p><node>`, docs/ovn-kubernetes.md §2.6), shared by the
//! Layer3 and Layer2 topologies, and its external side when the node carries
//! `k8s.ovn.org/l3-gateway-config`: the external switch `ext_<p><node>` with its
//! localnet port, the `rtoe-`/`etor-` pair, the default and masquerade routes, the
//! static MAC bindings of the masquerade next hops, and the SNAT of the network's
//! traffic to its masquerade address.

use std::net::IpAddr;

use ipnet::IpNet;
use nb_model::{
    LogicalRouter, LogicalRouterPort, LogicalSwitch, LogicalSwitchPort, StaticMacBinding,
};

use super::builder::NetworkBuilder;
use super::rows::{add_nat, add_route, map, snat};
use super::{masquerade_host_ip, masquerade_ip, masquerade_next_hop, NodeView};
use crate::api::annotations::L3GatewayConfig;
use crate::ovnk::addr::with_len;
use crate::ovnk::mac;
use crate::ovnk::ownership::binding_identity;

impl NetworkBuilder<'_> {
    /// The gateway router of `node` on `chassis`, without ports or routes: its options,
    /// ids and load balancer groups (the router group only when NodePorts are served).
    pub fn gateway_router(&mut self, node: &NodeView, chassis: &str) -> LogicalRouter {
        let mut gr = LogicalRouter {
            name: self.names.gateway_router(node.name),
            copp: Some(self.copp()),
            external_ids: self.switch_ids(),
            options: map([
                ("always_learn_from_arp_request", "false"),
                ("dynamic_neigh_routers", "false"),
                ("chassis", chassis),
                ("lb_force_snat_ip", "router_ip"),
                ("mac_binding_age_threshold", "300"),
                ("disable_garp_rarp", "true"),
            ]),
            load_balancer_group: [self.lb_groups.cluster.clone()].into(),
            ..Default::default()
        };
        if let Some(gw) = node.gateway {
            // The node's addresses, then the network's gateway masquerade address of
            // each of their families (OVN-Kubernetes' `nodeGatewayConfig` appends them
            // before `createGWRouter` joins them).
            let mut ips: Vec<String> = gw
                .ip_addresses
                .iter()
                .map(|i| i.addr().to_string())
                .collect();
            for ipv4 in [true, false] {
                let family = gw.ip_addresses.iter().any(|i| i.addr().is_ipv4() == ipv4);
                if let Some(m) = masquerade_ip(self.cfg, self.id, ipv4, true).filter(|_| family) {
                    ips.push(m.to_string());
                }
            }
            if let Some(first) = ips.first() {
                gr.external_ids.insert("physical_ip".into(), first.clone());
                gr.external_ids.insert("physical_ips".into(), ips.join(","));
            }
            if gw.node_port_enable {
                gr.load_balancer_group.insert(self.lb_groups.router.clone());
            }
        }
        gr
    }

    /// The external side of `gr`: its port to the external switch, the switch with its
    /// localnet port, the routes out, and the SNAT of the network's subnets and of the
    /// gateway router's join addresses `gr_join` to the network's masquerade address.
    pub(crate) fn external_side(
        &mut self,
        node: &NodeView,
        gw: &L3GatewayConfig,
        gr: &mut LogicalRouter,
        gr_join: &[IpNet],
    ) {
        self.external_port(node, gw, gr);
        self.external_switch(node, gw);
        self.external_routes(node, gw, gr);
        self.masquerade_mac_bindings(node, gw);
        self.masquerade_snat(node, gr, gr_join);
    }

    /// Static MAC bindings on `rtoe-GR_…` for the masquerade subnet's dummy next hop
    /// (`…4`) and the host's masquerade address (`…2`) of each family the node has
    /// (OVN-Kubernetes' `CreateDummyGWMacBindings`): the masquerade subnet is directly
    /// attached to the external port and its addresses are the same on every node, so
    /// the router must not look them up on the wire (nobody answers for `…4`).
    fn masquerade_mac_bindings(&mut self, node: &NodeView, gw: &L3GatewayConfig) {
        let port = self.names.rtoe(node.name);
        for ipv4 in [true, false] {
            if !gw.ip_addresses.iter().any(|a| a.addr().is_ipv4() == ipv4) {
                continue;
            }
            let hop = masquerade_next_hop(self.cfg, ipv4).map(|(_, hop)| hop);
            for ip in hop.into_iter().chain(masquerade_host_ip(self.cfg, ipv4)) {
                let binding = StaticMacBinding {
                    logical_port: port.clone(),
                    ip: ip.to_string(),
                    mac: mac::from_ip(ip),
                    override_dynamic_mac: true,
                    ..Default::default()
                };
                let identity = binding_identity(&port, &binding.ip);
                self.d.add(identity, binding);
            }
        }
    }

    /// The masquerade IP of the network's gateway routers, per family.
    pub(crate) fn gateway_masquerade(&self, ipv4: bool) -> Option<IpAddr> {
        masquerade_ip(self.cfg, self.id, ipv4, true)
    }

    /// `rtoe-GR_…`: the node's addresses and, for each family it has, the network's
    /// masquerade address as a host route.
    fn external_port(&mut self, node: &NodeView, gw: &L3GatewayConfig, gr: &mut LogicalRouter) {
        let n = node.name;
        let mut networks: Vec<String> = gw.ip_addresses.iter().map(IpNet::to_string).collect();
        for ip in [true, false]
            .into_iter()
            .filter_map(|ipv4| self.gateway_masquerade(ipv4))
        {
            if gw
                .ip_addresses
                .iter()
                .any(|a| a.addr().is_ipv4() == ip.is_ipv4())
            {
                let len = if ip.is_ipv4() { 32 } else { 128 };
                networks.push(with_len(ip, len).to_string());
            }
        }
        let rtoe = LogicalRouterPort {
            name: self.names.rtoe(n),
            mac: gw.mac_address.clone(),
            networks: networks.into_iter().collect(),
            external_ids: self.ids(),
            ..Default::default()
        };
        gr.ports.insert(self.d.add(self.names.rtoe(n), rtoe));
    }

    /// `ext_<p><node>` with its localnet port on the gateway's bridge and `etor-`.
    fn external_switch(&mut self, node: &NodeView, gw: &L3GatewayConfig) {
        let n = node.name;
        let mut ext = LogicalSwitch {
            name: self.names.external_switch(n),
            external_ids: self.switch_ids(),
            ..Default::default()
        };
        let bridge = if gw.bridge_id.is_empty() {
            "breth0"
        } else {
            gw.bridge_id.as_str()
        };
        let localnet = LogicalSwitchPort {
            name: self.names.localnet_port(bridge, n),
            type_: "localnet".into(),
            addresses: ["unknown".to_string()].into(),
            options: map([("network_name", self.cfg.physical_network.as_str())]),
            tag_request: gw.vlan_id.map(i64::from),
            external_ids: self.ids(),
            ..Default::default()
        };
        ext.ports
            .insert(self.d.add(self.names.localnet_port(bridge, n), localnet));
        let mut etor = LogicalSwitchPort::to_router(self.names.etor(n), self.names.rtoe(n));
        etor.addresses = [gw.mac_address.clone()].into();
        etor.external_ids = self.ids();
        ext.ports.insert(self.d.add(self.names.etor(n), etor));
        self.d.add(self.names.external_switch(n), ext);
    }

    /// For each family the node has: the masquerade subnet via its dummy next hop, and
    /// the default route via the node's next hops, both out of `rtoe-`.
    fn external_routes(&mut self, node: &NodeView, gw: &L3GatewayConfig, gr: &mut LogicalRouter) {
        let gr_name = self.names.gateway_router(node.name);
        let out = self.names.rtoe(node.name);
        for ipv4 in [true, false] {
            if !gw.ip_addresses.iter().any(|a| a.addr().is_ipv4() == ipv4) {
                continue;
            }
            let default = if ipv4 { "0.0.0.0/0" } else { "::/0" };
            let masquerade = masquerade_next_hop(self.cfg, ipv4);
            let hops = gw.next_hops.iter().filter(|h| h.is_ipv4() == ipv4);
            let routes = masquerade
                .map(|(subnet, hop)| (subnet.to_string(), hop))
                .into_iter()
                .chain(hops.map(|hop| (default.to_owned(), *hop)));
            for (prefix, hop) in routes {
                let mut route = self.route(prefix, hop);
                route.output_port = Some(out.clone());
                add_route(self.d, &mut gr.static_routes, &gr_name, route);
            }
        }
    }

    /// The SNAT of the gateway router's join addresses, then of the network's subnets,
    /// to the network's masquerade address of their family.
    fn masquerade_snat(&mut self, node: &NodeView, gr: &mut LogicalRouter, gr_join: &[IpNet]) {
        let gr_name = self.names.gateway_router(node.name);
        let logical = gr_join
            .iter()
            .map(|j| (j.addr().to_string(), j.addr().is_ipv4()))
            .chain(
                self.net
                    .subnets
                    .iter()
                    .map(|s| (s.cidr.to_string(), s.cidr.addr().is_ipv4())),
            );
        let mut nats = Vec::new();
        for (l, ipv4) in logical {
            if let Some(m) = self.gateway_masquerade(ipv4) {
                nats.push(snat(l, m, &self.cfg.ephemeral_port_range, self.ids()));
            }
        }
        for nat in nats {
            add_nat(self.d, &mut gr.nat, &gr_name, nat);
        }
    }
}
