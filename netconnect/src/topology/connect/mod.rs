//! A ClusterNetworkConnect in one zone (docs/ovn-kubernetes.md §5.4–5.6): the connect router, its
//! ports toward each connected network's router, the policies that send a network's
//! traffic for another connected network to it, and its routes back.
//!
//! For CNC `c` with tunnel key `K` (from its annotation) and each connected network
//! `n` with connect subnets `S` (its block, or its Layer2 pair):
//!
//! - `connect_router_<c>`, `requested-tnl-key=K`, the default COPP;
//! - Layer3, per node with an id: `crtor-<c>_<n>_<node>` on the connect router with the
//!   first address of the node's pair in `S` and the port key of
//!   `port_tunnel_key`;
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
//! either wrote can be taken over by the other. Services ([`services`]) and the
//! service-only ACLs ([`isolation`]) are added by [`build`] too; one connected
//! network's rows (`build_network`) by its `router` module.

pub mod isolation;
pub(crate) mod router;
pub mod services;

use ipnet::IpNet;
use nb_model::{Copp, LogicalRouter};

use super::desired::{Desired, Fragments};
use super::names::Names;
use super::{BuildError, Inputs, NodeView};
use crate::alloc::admission::ConnectAllocation;
use crate::api::{Network, Topology};
use crate::ovnk::ownership::connect_owner as owner;
use crate::ovnk::ownership::{IdForm, Scope};
use router::{targets, Partition};

/// The priority of the policies toward the connect router.
pub(crate) const POLICY_PRIORITY: i64 = 9001;

/// `connect_router_<cnc>`.
pub(crate) fn router_name(cnc: &str) -> String {
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
    pub(crate) local_switches: Vec<String>,
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

/// A network CNC `cnc` connects, as the policies toward it need it.
#[derive(Clone, Copy)]
pub(crate) struct Peer<'a> {
    pub net: &'a Network,
    pub id: u32,
}

/// The connect of CNC `cnc` in `inputs`, whose nodes ([`Inputs::nodes`]) are `nodes`.
pub(crate) fn connect<'a>(
    inputs: &Inputs<'a>,
    nodes: &[NodeView],
    cnc: &str,
) -> Result<Option<Connect<'a>>, BuildError> {
    let Some((info, key, ca)) = accepted(inputs, cnc)? else {
        return Ok(None);
    };
    // The zone's nodes (of `nodes`, the inputs' own), found once: every network's
    // local switches are theirs.
    let local: Vec<&str> = nodes.iter().filter(|n| n.local).map(|n| n.name).collect();
    let mut nets: Vec<Connected> = peers_of(inputs, ca)
        .map(|(name, peer, subnets)| connected(name, peer, subnets, &local))
        .collect();
    nets.sort_by_key(|c| c.id);
    Ok(Some(Connect { info, key, nets }))
}

/// CNC `cnc`'s definition, tunnel key and allocations; `None` for a CNC without a
/// tunnel key (not accepted yet), which wants nothing.
fn accepted<'a>(
    inputs: &Inputs<'a>,
    cnc: &str,
) -> Result<Option<(&'a crate::api::ConnectInfo, u32, &'a ConnectAllocation)>, BuildError> {
    let info = inputs
        .inventory
        .connects
        .get(cnc)
        .ok_or_else(|| BuildError::Unknown(cnc.to_owned()))?;
    let Some(ca) = inputs.allocations.connects.get(cnc) else {
        return Ok(None);
    };
    Ok(ca.tunnel_key.map(|key| (info, key, ca)))
}

/// The networks of connect allocation `ca` that are defined and allocated: each with
/// its name, id and connect subnets, in the allocation's order.
fn peers_of<'a>(
    inputs: &Inputs<'a>,
    ca: &'a ConnectAllocation,
) -> impl Iterator<Item = (&'a String, Peer<'a>, &'a [IpNet])> + 'a {
    let (networks, ids) = (&inputs.inventory.networks, &inputs.allocations.network_ids);
    ca.networks.iter().filter_map(move |(owner_key, name)| {
        let (Some(n), Some(&id), Some(subnets)) =
            (networks.get(name), ids.get(name), ca.subnets.get(owner_key))
        else {
            return None;
        };
        let peer = Peer {
            net: &n.network,
            id,
        };
        Some((name, peer, &subnets[..]))
    })
}

/// Network `name` as the builders see it, `local` being the zone's nodes.
fn connected<'a>(
    name: &str,
    peer: Peer<'a>,
    subnets: &'a [IpNet],
    local: &[&str],
) -> Connected<'a> {
    let Peer { net, id } = peer;
    let names = Names::new(name);
    let (router, local_switches) = match net.topology {
        Topology::Layer2 => (names.transit_router(), vec![names.layer2_switch()]),
        _ => (
            names.cluster_router(),
            local.iter().map(|n| names.node_switch(n)).collect(),
        ),
    };
    Connected {
        net,
        name: name.to_owned(),
        id,
        names,
        subnets,
        router,
        local_switches,
        entries: Vec::new(),
    }
}

/// The rows of CNC `cnc` that are not any one network's: the connect router, and for
/// services its load balancer group and ACLs. The rows of networks no longer
/// connected (their partitions) are this key's too, and go.
pub fn build(inputs: &Inputs, cnc: &str) -> Result<Desired, BuildError> {
    let mut d = Desired::with_id_form(owner(cnc), IdForm::ObjectIds);
    let Some(c) = connect(inputs, &inputs.nodes(), cnc)? else {
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
    connect_router.copp = Some(d.refer::<Copp>(crate::ovnk::ownership::DEFAULT_COPP));
    // The group is the CNC's whether or not it wants it now, so that it goes when
    // ServiceNetwork does.
    d.claim::<nb_model::LoadBalancerGroup>(&services::lb_group_name(cnc));
    if c.info.spec.service_network {
        services::build(&mut d, cnc, &c.nets);
    }
    if c.info.spec.service_network && !c.info.spec.pod_network {
        isolation::build(&mut d, inputs, cnc, &c.nets);
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
pub(crate) fn build_network(
    inputs: &Inputs,
    cnc: &str,
    net: &str,
    known: &dyn Fragments,
) -> Result<Desired, BuildError> {
    let mut d = Desired::with_id_form(owner(cnc), IdForm::ObjectIds);
    let Some((info, _, ca)) = accepted(inputs, cnc)? else {
        return Ok(d);
    };
    // This network whole; of the others, what the policies toward them take (a
    // connect's key is built for each of its 500 networks).
    let mut src = None;
    let mut peers: Vec<Peer> = Vec::new();
    for (name, peer, subnets) in peers_of(inputs, ca) {
        if name == net {
            src = Some((name, peer, subnets));
        }
        peers.push(peer);
    }
    let Some((name, peer, subnets)) = src else {
        return Err(BuildError::Unknown(net.to_owned()));
    };
    peers.sort_by_key(|p| p.id);
    let nodes = inputs.nodes();
    let local: Vec<&str> = nodes.iter().filter(|n| n.local).map(|n| n.name).collect();
    let mut src = connected(name, peer, subnets, &local);
    d.scope = Scope::Part(src.id.to_string());
    let mut part = Partition {
        inputs,
        cnc,
        connect_subnets: &info.spec.connect_subnets,
        router: router_name(cnc),
        known,
        d: &mut d,
    };
    for t in targets(&src, &nodes) {
        part.target(&mut src, &t);
    }
    part.policies(&src, &peers);
    Ok(d)
}

#[cfg(test)]
mod tests;
