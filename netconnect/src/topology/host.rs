//! What joins a network to its node's host, shared by the Layer3 and Layer2
//! topologies (OVN-Kubernetes' `syncNodeManagementPort`, `buildUDNEgressSNAT` and
//! `PolicyBasedRoutesManager.AddSameNodeIPPolicy`):
//!
//! - the *management port* `k8s-<p><node>`, a switch port whose OVS end is the host's
//!   `ovn-k8s-mpX` interface, addressed `.2` of each host subnet (Layer3) or of each
//!   network subnet (Layer2), its MAC derived from the first of them;
//! - the *masquerade SNAT* on the network's router: what leaves toward the management
//!   port's MAC is rewritten to the network's management-port masquerade address
//!   (`169.254.0.<10 + 2·id>` by default), so that the host tells networks with
//!   overlapping subnets apart by source;
//! - the priority-1004 *reroutes*: a pod's packet to its own node's address (and, on
//!   Layer3, to the network's gateway-router masquerade address) is sent to the
//!   management port instead of out through the gateway router;
//! - in shared gateway mode, the *routes to the default network's allowed services*
//!   (`--udn-allowed-default-services`: the API server and DNS by default): a pod's
//!   packet to one of their cluster IPs goes to the management port, and the host
//!   hands it to the default network (OVN-Kubernetes' `configureUDNEnabledServiceRoute`).

use std::net::IpAddr;

use ipnet::IpNet;
use nb_model::keys::ovn_k8s::UDN_ENABLED_SERVICE;
use nb_model::{
    LogicalRouter, LogicalRouterPolicy, LogicalRouterPolicyAction, LogicalRouterPort,
    LogicalRouterStaticRoutePolicy, LogicalSwitchPort,
};
use ovsdb_proto::model::Ref;

use super::builder::NetworkBuilder;
use super::rows::{
    add_nat, add_policy, add_route, ip_match_family, port_addresses, same_family, snat,
};
use super::{masquerade_ip, GatewayMode};
use crate::api::annotations::L3GatewayConfig;
use crate::ovnk::addr::nth_in;
use crate::ovnk::mac;

/// The priority of the policies sending traffic for the node's own addresses to the
/// management port (OVN-Kubernetes' `NodeSubnetPolicyPriority`).
pub(crate) const NODE_IP_REROUTE_PRIORITY: i64 = 1004;

/// The management port's addresses in `subnets`: the `.2` of each, in their order.
pub(crate) fn management_addresses(subnets: &[IpNet]) -> Vec<IpNet> {
    subnets.iter().filter_map(|s| nth_in(s, 2)).collect()
}

/// The management port's MAC: derived from its first address.
pub(crate) fn management_mac(addresses: &[IpNet]) -> String {
    addresses
        .first()
        .map(|m| mac::from_ip(m.addr()))
        .unwrap_or_default()
}

/// Where a router's traffic to the host leaves and what it is rerouted from: the
/// router, its port toward the switch holding the management port, and that switch.
pub(crate) struct HostSide<'r> {
    /// The router (Layer3's cluster router, Layer2's transit router).
    pub router: &'r mut LogicalRouter,
    /// Its name.
    pub(crate) router_name: String,
    /// Its port toward the management port's switch (`rtos-…`, `trtos-…`).
    pub port: String,
    /// That port's row, when the NAT must name it as its gateway port (a router with
    /// several distributed gateway ports).
    pub(crate) gateway_port: Option<Ref<LogicalRouterPort>>,
    /// The switch (written in the policies' comment, as OVN-Kubernetes does).
    pub switch: String,
}

impl NetworkBuilder<'_> {
    /// `k8s-<p><node>` with `addresses` (MAC first), not yet on its switch (in the
    /// cluster port group: [`NetworkBuilder::management_ports`]).
    pub(crate) fn management_port(
        &mut self,
        node: &str,
        addresses: &[IpNet],
    ) -> Ref<LogicalSwitchPort> {
        let name = self.names.management_port(node);
        let port = LogicalSwitchPort {
            name: name.clone(),
            addresses: [port_addresses(
                &management_mac(addresses),
                addresses.iter().map(|m| m.addr().to_string()),
            )]
            .into(),
            ..Default::default()
        };
        let port = self.d.add(name, port);
        self.management_ports.push(port.clone());
        port
    }

    /// The masquerade SNAT of each of `subnets` on `side`'s router, for packets to the
    /// management port's MAC `mgmt_mac` leaving through `side`'s port.
    pub(crate) fn management_snat(
        &mut self,
        side: &mut HostSide,
        subnets: &[IpNet],
        mgmt_mac: &str,
    ) {
        for subnet in subnets {
            let Some(masquerade) = masquerade_ip(self.cfg, self.id, subnet.addr().is_ipv4(), false)
            else {
                continue;
            };
            let mut nat = snat(
                subnet.trunc(),
                masquerade,
                &self.cfg.ephemeral_port_range,
                self.ids(),
            );
            nat.logical_port = Some(side.port.clone());
            nat.gateway_port = side.gateway_port.clone();
            nat.match_ = format!("eth.dst == {mgmt_mac}");
            add_nat(self.d, &mut side.router.nat, &side.router_name, nat);
        }
    }

    /// Local gateway mode: the pods leave through the management port, a source route
    /// per subnet of `subnets` via the management address of the same position in
    /// `management` (OVN-Kubernetes' `syncNodeManagementPort`, gateway or not).
    pub(crate) fn management_routes(
        &mut self,
        side: &mut HostSide,
        subnets: &[IpNet],
        management: &[IpNet],
    ) {
        if self.cfg.gateway_mode != GatewayMode::Local {
            return;
        }
        for (s, m) in subnets.iter().zip(management) {
            let route = self.source_route(s, m.addr());
            add_route(
                self.d,
                &mut side.router.static_routes,
                &side.router_name,
                route,
            );
        }
    }

    /// Shared gateway mode: a destination route on `side`'s router for each cluster IP
    /// of each of `services` (`namespace/name` and cluster IPs) via the management
    /// address of its family in `management`, marked with the service's name.
    ///
    /// OVN-Kubernetes routes only a service's first cluster IP (`spec.clusterIP`), so
    /// a dual-stack network's pods reach a dual-stack DNS over one family only, and a
    /// network without that family gets an error retried forever; here each cluster
    /// IP of a family the network has gets its route, and the others none.
    pub(crate) fn default_service_routes(
        &mut self,
        side: &mut HostSide,
        services: &[(&str, &[IpAddr])],
        management: &[IpNet],
    ) {
        if self.cfg.gateway_mode != GatewayMode::Shared {
            return;
        }
        for (key, cluster_ips) in services {
            for ip in *cluster_ips {
                let Some(mgmt) = management
                    .iter()
                    .find(|m| m.addr().is_ipv4() == ip.is_ipv4())
                else {
                    continue;
                };
                let mut route = self.route(ip, mgmt.addr());
                route.policy = Some(LogicalRouterStaticRoutePolicy::DstIp);
                route
                    .external_ids
                    .insert(UDN_ENABLED_SERVICE.into(), key.to_string());
                add_route(
                    self.d,
                    &mut side.router.static_routes,
                    &side.router_name,
                    route,
                );
            }
        }
    }

    /// The 1004 reroutes to the management port's address of each family in
    /// `management`: for the node's first address of that family in `gw` and for each
    /// of `extra` of that family.
    pub(crate) fn node_ip_reroutes(
        &mut self,
        side: &mut HostSide,
        gw: &L3GatewayConfig,
        extra: &[IpAddr],
        management: &[IpNet],
    ) {
        for mgmt in management {
            let ipv4 = mgmt.addr().is_ipv4();
            let Some(node_ip) = same_family(&gw.ip_addresses, ipv4) else {
                continue;
            };
            let targets = std::iter::once(node_ip).chain(
                extra
                    .iter()
                    .copied()
                    .filter(|ip| ip.is_ipv4() == ipv4 && *ip != node_ip),
            );
            for target in targets {
                let p = LogicalRouterPolicy {
                    priority: NODE_IP_REROUTE_PRIORITY,
                    action: LogicalRouterPolicyAction::Reroute,
                    match_: format!(
                        "inport == \"{}\" && {}.dst == {target} /* {} */",
                        side.port,
                        ip_match_family(ipv4),
                        side.switch
                    ),
                    nexthops: [mgmt.addr().to_string()].into(),
                    external_ids: self.ids(),
                    ..Default::default()
                };
                add_policy(self.d, &mut side.router.policies, &side.router_name, p);
            }
        }
    }
}
