//! A ClusterNetworkConnect in one zone (reference §5.4–5.6): the connect router, its
//! ports toward each connected network's router, the policies that send a network's
//! traffic for another connected network to it, and its routes back.
//!
//! For CNC `c` with tunnel key `K` (from its annotation) and each connected network
//! `n` with connect subnets `S` (its block, or its Layer2 pair):
//!
//! - `connect_router_<c>`, `requested-tnl-key=K`, the default COPP;
//! - Layer3, per node with an id: `crtor-<c>_<n>_<node>` on the connect router with the
//!   first address of the node's pair in `S` and the port key of [`port_tunnel_key`];
//!   for a local node its peer `rtocr-<n>_<node>_<c>` (the second address) on the
//!   network's cluster router; for a remote node the connect router's port alone,
//!   bound to the node's chassis (`requested-chassis`);
//! - Layer2: one pair, `crtor-<c>_<n>` and `rtocr-<n>_<c>` on the transit router;
//! - on each network router, for every other connected network and family, a
//!   priority-9001 policy rerouting traffic from the local node's switch to that
//!   network's subnets through the connect router;
//! - on the connect router, a route per node host subnet (Layer3) or network subnet
//!   (Layer2) back through the network router's address.
//!
//! Rows carry OVN-Kubernetes' own external ids (owner `ovnkube-network-connect-controller`,
//! type `ClusterNetworkConnect`, `k8s.ovn.org/id` in its `DbObjectIDs` form), so an NB
//! either wrote can be taken over by the other. Services ([`super::services`]) and the
//! service-only ACLs ([`super::acl`]) are added by [`build`] too.

use std::collections::BTreeSet;

use ipnet::IpNet;
use nb_model::{
    Copp, LogicalRouter, LogicalRouterPolicy, LogicalRouterPolicyAction, LogicalRouterStaticRoute,
};

use super::desired::{Desired, Fragments, IdForm, Scope};
use super::layer3::router_port;
use super::names::Names;
use super::{acl, cluster, ip_match_family, map, services, BuildError, Inputs};
use crate::alloc::connect::{pair, port_tunnel_key};
use crate::api::{Network, Topology};
pub use crate::ownership::connect_owner as owner;
use crate::ownership::{
    DESTINATION_NETWORK_ID, IP_FAMILY, NETWORK_ID, NODE_ID, ROUTER_NAME, SOURCE_NETWORK_ID,
};

/// The priority of the policies toward the connect router.
pub const POLICY_PRIORITY: i64 = 9001;

/// `connect_router_<cnc>`.
pub fn router_name(cnc: &str) -> String {
    format!("connect_router_{cnc}")
}

/// The connect router's port toward network `net`: `crtor-<cnc>_<net>_<node>`
/// (Layer3) or `crtor-<cnc>_<net>` (Layer2). The network name is the raw one.
pub fn crtor(cnc: &str, net: &str, node: Option<&str>) -> String {
    match node {
        Some(n) => format!("crtor-{cnc}_{net}_{n}"),
        None => format!("crtor-{cnc}_{net}"),
    }
}

/// The network router's port toward the connect router: `rtocr-<net>_<node>_<cnc>`
/// (Layer3) or `rtocr-<net>_<cnc>` (Layer2).
pub fn rtocr(net: &str, node: Option<&str>, cnc: &str) -> String {
    match node {
        Some(n) => format!("rtocr-{net}_{n}_{cnc}"),
        None => format!("rtocr-{net}_{cnc}"),
    }
}

/// A fingerprint of a fragment's inputs (stable within one process, which is where
/// reconcilers remember them).
pub(crate) fn fingerprint(inputs: impl std::hash::Hash) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(inputs)
}

/// `v4` or `v6`.
pub fn family(ipv4: bool) -> &'static str {
    if ipv4 {
        "v4"
    } else {
        "v6"
    }
}

/// A network the CNC connects, as the builders need it.
pub(crate) struct Connected<'a> {
    pub net: &'a Network,
    pub name: String,
    pub id: u32,
    pub names: Names,
    /// The network's connect subnets (its block, or its Layer2 pair), IPv4 first.
    pub subnets: &'a [IpNet],
    /// The router the connect router is reached from.
    pub router: String,
    /// The switches of the zone: the local node switches (Layer3), or the Layer2 switch.
    pub local_switches: Vec<String>,
    /// Per local switch, the router port traffic enters from and the connect
    /// router's addresses on the matching pair (the policies' next hops).
    pub entries: Vec<(String, Vec<IpNet>)>,
}

/// The connect of CNC `cnc` as the builders see it: its spec, tunnel key and connected
/// networks (by network id). `None` for a CNC without a tunnel key (not accepted yet),
/// which wants nothing.
pub(crate) struct Connect<'a> {
    pub info: &'a crate::api::ConnectInfo,
    pub key: u32,
    pub nets: Vec<Connected<'a>>,
}

pub(crate) fn connect<'a>(
    inputs: &Inputs<'a>,
    cnc: &str,
) -> Result<Option<Connect<'a>>, BuildError> {
    let info = inputs
        .inventory
        .connects
        .get(cnc)
        .ok_or_else(|| BuildError::Unknown(cnc.to_owned()))?;
    let Some(ca) = inputs.allocations.connects.get(cnc) else {
        return Ok(None);
    };
    let Some(key) = ca.tunnel_key else {
        return Ok(None);
    };
    let nodes = inputs.nodes();
    let mut nets: Vec<Connected> = Vec::new();
    for (owner_key, name) in &ca.networks {
        let (Some(n), Some(&id), Some(subnets)) = (
            inputs.inventory.networks.get(name),
            inputs.allocations.network_ids.get(name),
            ca.subnets.get(owner_key),
        ) else {
            continue;
        };
        let net = &n.network;
        let names = Names::new(name);
        let (router, local_switches) = match net.topology {
            Topology::Layer2 => (names.transit_router(), vec![names.layer2_switch()]),
            _ => (
                names.cluster_router(),
                nodes
                    .iter()
                    .filter(|n| n.local)
                    .map(|n| names.node_switch(n.name))
                    .collect(),
            ),
        };
        nets.push(Connected {
            net,
            name: name.clone(),
            id,
            names,
            subnets,
            router,
            local_switches,
            entries: Vec::new(),
        });
    }
    nets.sort_by_key(|c| c.id);
    Ok(Some(Connect { info, key, nets }))
}

/// The rows of CNC `cnc` that are not any one network's: the connect router, and for
/// services its load balancer group and ACLs. The rows of networks no longer
/// connected (their partitions) are this key's too, and go.
pub fn build(inputs: &Inputs, cnc: &str) -> Result<Desired, BuildError> {
    let mut d = Desired::with_id_form(owner(cnc), IdForm::ObjectIds);
    let Some(c) = connect(inputs, cnc)? else {
        return Ok(d);
    };
    d.scope = Scope::Rest {
        held: c.nets.iter().map(|n| n.id.to_string()).collect(),
    };
    let router = router_name(cnc);
    let mut connect_router = LogicalRouter::named(&router);
    connect_router.options.insert(
        nb_model::keys::lr_options::REQUESTED_TNL_KEY.into(),
        c.key.to_string(),
    );
    connect_router.copp = Some(d.refer::<Copp>(cluster::DEFAULT_COPP));
    // The group is the CNC's whether or not it wants it now, so that it goes when
    // ServiceNetwork does.
    d.claim::<nb_model::LoadBalancerGroup>(&services::lb_group_name(cnc));
    if c.info.spec.service_network {
        services::build(&mut d, cnc, &c.nets);
    }
    if c.info.spec.service_network && !c.info.spec.pod_network {
        acl::build(&mut d, inputs, cnc, &c.nets);
    }
    d.add_unidentified(router, connect_router);
    Ok(d)
}

/// The rows of CNC `cnc` for connected network `net` in the inputs' zone (one
/// partition): the connect router's ports toward it and their peers on its router, the
/// routes back to it, and its policies toward the other connected networks.
///
/// Its rows come in fragments (each node's ports and routes, the policies toward each
/// other network) that `known` may say need not be built again.
pub fn build_network(
    inputs: &Inputs,
    cnc: &str,
    net: &str,
    known: &dyn Fragments,
) -> Result<Desired, BuildError> {
    let mut d = Desired::with_id_form(owner(cnc), IdForm::ObjectIds);
    let Some(mut conn) = connect(inputs, cnc)? else {
        return Ok(d);
    };
    let Some(at) = conn.nets.iter().position(|n| n.name == net) else {
        return Err(BuildError::Unknown(net.to_owned()));
    };
    d.scope = Scope::Part(conn.nets[at].id.to_string());
    let connect_subnets = &conn.info.spec.connect_subnets;
    let router = router_name(cnc);
    let nodes = inputs.nodes();
    {
        let c = &mut conn.nets[at];
        let port_ids = |node_id: u32, router: &str| {
            map([
                (NETWORK_ID, c.id.to_string().as_str()),
                (NODE_ID, node_id.to_string().as_str()),
                (ROUTER_NAME, router),
            ])
        };
        let targets: Vec<(Option<&str>, u32, bool, Option<&str>)> = match c.net.topology {
            Topology::Layer2 => vec![(None, 0, true, None)],
            _ => nodes
                .iter()
                .map(|n| (Some(n.name), n.id, n.local, n.chassis))
                .collect(),
        };
        for (node, node_id, local, chassis) in targets {
            let what = || match node {
                Some(n) => format!("network {} on node {n}", c.name),
                None => format!("network {}", c.name),
            };
            let Some(pairs) = pair(c.subnets, node_id) else {
                d.incomplete.push(format!(
                    "no point-to-point pair for {} (node id {node_id}) in its connect subnets",
                    what()
                ));
                continue;
            };
            let firsts: Vec<IpNet> = pairs.iter().map(|p| p.0).collect();
            let seconds: Vec<IpNet> = pairs.iter().map(|p| p.1).collect();
            let port_key = port_tunnel_key(connect_subnets, c.net.topology, c.subnets, node_id)
                .filter(|k| *k <= u64::from(inputs.config.max_port_tunnel_key));
            let Some(port_key) = port_key else {
                d.incomplete.push(format!(
                    "the connect router's port for {} has no tunnel key within {}",
                    what(),
                    inputs.config.max_port_tunnel_key
                ));
                continue;
            };
            if local {
                let entry = match node {
                    Some(n) => c.names.rtos(n),
                    None => c.names.trtos(),
                };
                c.entries.push((entry, firsts.clone()));
            } else if chassis.is_none() {
                d.incomplete.push(format!(
                    "node {} has no k8s.ovn.org/node-chassis-id: the connect router's port for {} is left out",
                    node.unwrap_or_default(),
                    what()
                ));
                continue;
            }
            // The node's rows are one fragment: built again only when what they are
            // made of changes.
            let host_subnets: &[IpNet] = match node {
                Some(n) => inputs.host_subnets(&c.name, n),
                None => &[],
            };
            let fingerprint = fingerprint((
                (cnc, &c.name, c.id, c.subnets, &c.router),
                (node, node_id, local, chassis, host_subnets),
                (port_key, &c.net.subnets),
            ));
            let label = match node {
                Some(_) => format!("node:{node_id}"),
                None => "layer2".to_owned(),
            };
            if !d.fragment(known, label, fingerprint) {
                continue;
            }
            let crtor_name = crtor(cnc, &c.name, node);
            let rtocr_name = rtocr(&c.name, node, cnc);
            let mut port = router_port(&crtor_name, &firsts);
            port.external_ids = port_ids(node_id, &router);
            port.options.insert(
                nb_model::keys::lrp_options::REQUESTED_TNL_KEY.into(),
                port_key.to_string(),
            );
            if local {
                port.peer = Some(rtocr_name.clone());
                let mut peer = router_port(&rtocr_name, &seconds);
                peer.external_ids = port_ids(node_id, &c.router);
                peer.peer = Some(crtor_name.clone());
                let r = d.add(format!("{}:{node_id}:{}", c.id, c.router), peer);
                d.attach::<LogicalRouter, _>(&c.router, "ports", &r);
            } else if let Some(chassis) = chassis {
                port.options.insert(
                    nb_model::keys::lrp_options::REQUESTED_CHASSIS.into(),
                    chassis.to_owned(),
                );
            }
            let r = d.add(format!("{}:{node_id}:{router}", c.id), port);
            d.attach::<LogicalRouter, _>(&router, "ports", &r);

            // Routes back: the node's host subnets (Layer3) or the network's subnets.
            let prefixes: Vec<IpNet> = match node {
                Some(_) => host_subnets.to_vec(),
                None => c.net.subnets.iter().map(|s| s.cidr).collect(),
            };
            let mut seen = BTreeSet::new();
            for prefix in prefixes {
                let ipv4 = prefix.addr().is_ipv4();
                let Some(next_hop) = seconds.iter().find(|s| s.addr().is_ipv4() == ipv4) else {
                    continue;
                };
                let fam = family(ipv4);
                let mut identity = format!("{}:{node_id}:{fam}", c.id);
                if !seen.insert(identity.clone()) {
                    // A second subnet of one family (the id has no room for it).
                    identity = format!("{identity}:{prefix}");
                }
                let route = LogicalRouterStaticRoute {
                    ip_prefix: prefix.to_string(),
                    nexthop: next_hop.addr().to_string(),
                    external_ids: map([
                        (NETWORK_ID, c.id.to_string().as_str()),
                        (NODE_ID, node_id.to_string().as_str()),
                        (IP_FAMILY, fam),
                    ]),
                    ..Default::default()
                };
                let r = d.add(identity, route);
                d.attach::<LogicalRouter, _>(&router, "static_routes", &r);
            }
            d.end_fragment();
        }
    }

    // Policies: from each network, for every other connected network and family.
    {
        let nets = &conn.nets;
        let src = &nets[at];
        let several = src.entries.len() > 1;
        for (inport, next_hops) in &src.entries {
            for dst in nets.iter().filter(|n| n.id != src.id) {
                let dst_subnets = &dst.net.subnets;
                let fingerprint = fingerprint((
                    (cnc, src.id, &src.router, inport, next_hops, several),
                    (dst.id, dst_subnets),
                ));
                if !d.fragment(known, format!("to:{}:{inport}", dst.id), fingerprint) {
                    continue;
                }
                for ipv4 in [true, false] {
                    let Some(next_hop) = next_hops.iter().find(|n| n.addr().is_ipv4() == ipv4)
                    else {
                        continue;
                    };
                    let dsts: Vec<String> = dst
                        .net
                        .subnets_of(ipv4)
                        .map(|s| format!("{}.dst == {}", ip_match_family(ipv4), s.cidr))
                        .collect();
                    let m = match dsts.len() {
                        0 => continue,
                        1 => format!("inport == \"{inport}\" && {}", dsts[0]),
                        _ => format!("inport == \"{inport}\" && ({})", dsts.join(" || ")),
                    };
                    let fam = family(ipv4);
                    let policy = LogicalRouterPolicy {
                        priority: POLICY_PRIORITY,
                        action: LogicalRouterPolicyAction::Reroute,
                        match_: m,
                        nexthops: [next_hop.addr().to_string()].into(),
                        external_ids: map([
                            (SOURCE_NETWORK_ID, src.id.to_string().as_str()),
                            (DESTINATION_NETWORK_ID, dst.id.to_string().as_str()),
                            (IP_FAMILY, fam),
                            (ROUTER_NAME, src.router.as_str()),
                        ]),
                        ..Default::default()
                    };
                    let mut identity = format!("{}:{}:{fam}:{}", src.id, dst.id, src.router);
                    if several {
                        // Several local nodes (one NB for the cluster): one policy per
                        // entry port.
                        identity = format!("{identity}:{inport}");
                    }
                    let r = d.add(identity, policy);
                    d.attach::<LogicalRouter, _>(&src.router, "policies", &r);
                }
                d.end_fragment();
            }
        }
    }

    Ok(d)
}
