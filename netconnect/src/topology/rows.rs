//! Row helpers, one group per NB table, shared by every topology: the identities a
//! route, policy or NAT is known by, router ports with their MAC, gateway chassis,
//! routes and policies added to their router, the load balancer groups of a network,
//! and the small value helpers (`external_ids` from pairs, address families) the
//! builders use everywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ipnet::IpNet;
use nb_model::keys::nat_options;
use nb_model::{
    GatewayChassis, LoadBalancerGroup, LogicalRouterPolicy, LogicalRouterPort,
    LogicalRouterStaticRoute, LogicalRouterStaticRoutePolicy, Nat, NatType,
};
use ovsdb_proto::model::Ref;

use super::desired::Desired;
use crate::ovnk::mac;
use crate::ovnk::names::Names;

/// `external_ids` (or options) from pairs.
pub(crate) fn map<const N: usize>(pairs: [(&str, &str); N]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The address of the first of `nets` of the family `ipv4` says, without its prefix
/// length.
pub(crate) fn same_family(nets: &[IpNet], ipv4: bool) -> Option<IpAddr> {
    nets.iter()
        .find(|n| n.addr().is_ipv4() == ipv4)
        .map(IpNet::addr)
}

/// `ip4` or `ip6`, as in OVN match expressions.
pub(crate) fn ip_match_family(ipv4: bool) -> &'static str {
    if ipv4 {
        "ip4"
    } else {
        "ip6"
    }
}

/// A port's `addresses` entry: its MAC followed by its addresses, space-separated.
pub(crate) fn port_addresses(mac: &str, addresses: impl IntoIterator<Item = String>) -> String {
    let mut out = mac.to_owned();
    for a in addresses {
        out.push(' ');
        out.push_str(&a);
    }
    out
}

// Logical_Router_Port and Gateway_Chassis.

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

/// Makes `port` a distributed gateway port on `chassis` (priority 1), the gateway
/// chassis row named `<port>-<chassis>`.
pub(crate) fn bind_to_chassis(d: &mut Desired, port: &mut LogicalRouterPort, chassis: &str) {
    let name = format!("{}-{chassis}", port.name);
    let gc = GatewayChassis {
        name: name.clone(),
        chassis_name: chassis.to_owned(),
        priority: 1,
        ..Default::default()
    };
    port.gateway_chassis.insert(d.add(name, gc));
}

// Logical_Router_Static_Route.

/// A static route's identity: router, policy, prefix, next hop.
pub(crate) fn route_identity(router: &str, route: &LogicalRouterStaticRoute) -> String {
    let policy = match route.policy {
        Some(LogicalRouterStaticRoutePolicy::SrcIp) => "src-ip",
        _ => "dst-ip",
    };
    format!("{router}|{policy}|{}|{}", route.ip_prefix, route.nexthop)
}

/// A destination route to `prefix` via `nexthop`, with `external_ids`.
pub(crate) fn route(
    prefix: impl ToString,
    nexthop: impl ToString,
    external_ids: BTreeMap<String, String>,
) -> LogicalRouterStaticRoute {
    LogicalRouterStaticRoute {
        ip_prefix: prefix.to_string(),
        nexthop: nexthop.to_string(),
        external_ids,
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

// Logical_Router_Policy.

/// A router policy's identity: router, priority, match.
pub(crate) fn policy_identity(router: &str, p: &LogicalRouterPolicy) -> String {
    format!("{router}|{}|{}", p.priority, p.match_)
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

// NAT.

/// A NAT rule's identity: router, type, logical and external address.
pub(crate) fn nat_identity(router: &str, n: &Nat) -> String {
    let kind = match &n.type_ {
        NatType::Snat => "snat",
        NatType::Dnat => "dnat",
        NatType::DnatAndSnat => "dnat_and_snat",
        NatType::Other(o) => o.as_str(),
    };
    format!("{router}|{kind}|{}|{}", n.logical_ip, n.external_ip)
}

/// A stateful SNAT of `logical` to `external` using source ports `port_range` (as
/// OVN-Kubernetes' `buildNAT` writes every NAT rule), with `external_ids`.
pub(crate) fn snat(
    logical: impl ToString,
    external: impl ToString,
    port_range: &str,
    external_ids: BTreeMap<String, String>,
) -> Nat {
    Nat {
        type_: NatType::Snat,
        external_ip: external.to_string(),
        logical_ip: logical.to_string(),
        options: map([(nat_options::STATELESS, "false")]),
        external_port_range: port_range.to_owned(),
        external_ids,
        ..Default::default()
    }
}

/// Adds a NAT rule to `nats` (the router's set) and `d`.
pub(crate) fn add_nat(d: &mut Desired, nats: &mut BTreeSet<Ref<Nat>>, router: &str, nat: Nat) {
    let id = nat_identity(router, &nat);
    nats.insert(d.add(id, nat));
}

// Load_Balancer_Group.

/// A network's three load balancer groups.
#[derive(Clone, Debug)]
pub(crate) struct LbGroups {
    /// `<p>clusterLBGroup`: on every switch and gateway router.
    pub cluster: Ref<LoadBalancerGroup>,
    /// `<p>clusterSwitchLBGroup`: on the switches.
    pub switch: Ref<LoadBalancerGroup>,
    /// `<p>clusterRouterLBGroup`: on gateway routers that serve NodePorts.
    pub router: Ref<LoadBalancerGroup>,
}

/// Adds the network's three load balancer groups to `d`, and claims them.
pub(crate) fn lb_groups(d: &mut Desired, names: &Names) -> LbGroups {
    let mut group = |name: String| {
        d.add(
            name.clone(),
            LoadBalancerGroup {
                name,
                ..Default::default()
            },
        )
    };
    let groups = LbGroups {
        cluster: group(names.cluster_lb_group()),
        switch: group(names.cluster_switch_lb_group()),
        router: group(names.cluster_router_lb_group()),
    };
    claim_lb_groups(d, &names.net);
    groups
}

/// Claims the network's load balancer groups (kept even when the network is gone, so
/// that the reconciler deletes them).
pub(crate) fn claim_lb_groups(d: &mut Desired, net_name: &str) {
    let names = Names::new(net_name);
    for n in [
        names.cluster_lb_group(),
        names.cluster_switch_lb_group(),
        names.cluster_router_lb_group(),
    ] {
        d.claim::<LoadBalancerGroup>(&n);
    }
}
