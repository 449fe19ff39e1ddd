//! The cluster manager's part of OKEP-5224: which networks each ClusterNetworkConnect
//! selects, whether it can be accepted (every check of the OKEP's status section,
//! each with its condition reason), its connect router's tunnel key and its networks'
//! connect subnets (docs/ovn-kubernetes.md §5.2).
//!
//! CNCs are taken in a fixed order, those accepted before first, then by name, so the
//! outcome never depends on map order (OVN-Kubernetes' does: the defect of
//! docs/ovn-kubernetes.md §5.2). New networks get their connect subnets in network id order.
//!
//! A refused CNC connects nothing new: its annotations keep what was accepted before,
//! less the networks that are no longer selected (isolation is the default, so a
//! network leaving a CNC is always disconnected). The zone part programs what the
//! annotations say.

use crate::api::meta::Meta;
use std::collections::{BTreeMap, BTreeSet};

use ipnet::IpNet;

use super::connect::{self, owner_key, parse_owner_key, ConnectAllocator};
use super::ids::IdAllocator;
use super::{Allocations, ClusterConfig, FIRST_ALLOCATED_TUNNEL_KEY, MAX_DATAPATH_TUNNEL_KEY};
use crate::api::validate::Reserved;
use crate::api::{ConnectInfo, Inventory, Network, Problem, Role, Topology};

/// Why a ClusterNetworkConnect is not accepted: its `Accepted` condition's reason
/// (OKEP-5224, "Accepted Condition Reasons").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// Not enough addresses or port keys for every network and node.
    ConnectSubnetExhausted,
    /// Two selected networks have overlapping pod subnets.
    OverlappingNetworkSubnets,
    /// A connect subnet overlaps a pod, join or transit subnet of a selected network,
    /// a service CIDR or the masquerade subnet.
    ConnectSubnetConflict,
    /// Another ClusterNetworkConnect selecting a common network has overlapping
    /// connect subnets.
    ConnectSubnetOverlap,
    /// Single-stack networks of both families, or a network family the connect
    /// subnets do not cover.
    IPFamilyMismatch,
    /// Fewer than two networks selected.
    InsufficientNetworks,
    /// A selected network is secondary, Localnet, or without overlay.
    UnsupportedNetworkType,
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// A refusal: the reason and a message naming the objects and CIDRs involved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The reason.
    pub reason: Reason,
    /// The message.
    pub message: String,
}

fn refuse<T>(reason: Reason, message: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal {
        reason,
        message: message.into(),
    })
}

/// What the cluster manager decided for one ClusterNetworkConnect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectAllocation {
    /// Accepted, or why not.
    pub accepted: Result<(), Refusal>,
    /// The networks selected now, by name.
    pub selected: Vec<String>,
    /// `k8s.ovn.org/connect-router-tunnel-key`.
    pub tunnel_key: Option<u32>,
    /// `k8s.ovn.org/network-connect-subnet`: connect subnets by owner key.
    pub subnets: BTreeMap<String, Vec<IpNet>>,
    /// The connected networks: owner key to network name, for owners whose network
    /// exists (the zone part connects these).
    pub networks: BTreeMap<String, String>,
}

/// The connect subnets, tunnel keys and acceptance of every ClusterNetworkConnect of
/// `inv`, given the networks' allocations.
pub(crate) fn admit(
    inv: &Inventory,
    alloc: &Allocations,
    reserved: &Reserved,
    config: &ClusterConfig,
    max_port_tunnel_key: u32,
) -> (BTreeMap<String, ConnectAllocation>, Vec<Problem>) {
    // Tunnel keys in use: Layer2 transit routers' and every annotated connect router's.
    let mut keys = IdAllocator::new(FIRST_ALLOCATED_TUNNEL_KEY, MAX_DATAPATH_TUNNEL_KEY);
    for k in alloc.tunnel_keys.values().filter_map(|k| k.get(1)) {
        let _ = keys.reserve(*k);
    }
    for c in inv.connects.values() {
        if let Some(k) = c.tunnel_key {
            let _ = keys.reserve(k);
        }
    }
    let by_owner = owners(inv, alloc);
    let mut order: Vec<&ConnectInfo> = inv.connects.values().collect();
    order.sort_by_key(|c| (c.subnets.is_none(), c.object.metadata.name().to_owned()));

    let mut out = BTreeMap::new();
    let mut problems = Vec::new();
    // The CNCs decided so far.
    let mut decided: Vec<Decided> = Vec::new();
    for cnc in order {
        let name = cnc.object.metadata.name();
        let selected: Vec<String> = inv
            .selected_networks(&cnc.object)
            .into_iter()
            .map(str::to_owned)
            .collect();
        let previous = cnc.subnets.clone().unwrap_or_default();
        let result = check(inv, alloc, reserved, config, cnc, &selected)
            .and_then(|()| cross_check(cnc, &selected, &decided))
            .and_then(|()| {
                let tunnel_key = match cnc.tunnel_key {
                    Some(k) => k,
                    None => keys.allocate().map_err(|e| Refusal {
                        reason: Reason::ConnectSubnetExhausted,
                        message: format!("no tunnel key for the connect router: {e}"),
                    })?,
                };
                let subnets = allocate(inv, alloc, cnc, &selected, &previous, &by_owner)?;
                check_pairs_and_keys(alloc, cnc, &subnets, &by_owner, max_port_tunnel_key)?;
                Ok((tunnel_key, subnets))
            });
        let (accepted, tunnel_key, subnets) = match result {
            Ok((key, subnets)) => (Ok(()), Some(key), subnets),
            Err(refusal) => {
                problems.push(Problem {
                    origin: cnc.origin.clone(),
                    object: Some(format!("ClusterNetworkConnect {name}")),
                    field: Some("spec".into()),
                    message: format!("not accepted: {}: {}", refusal.reason, refusal.message),
                });
                // Nothing new is connected; networks no longer selected are let go.
                let kept = previous
                    .into_iter()
                    .filter(|(owner, _)| {
                        by_owner
                            .get(owner)
                            .is_some_and(|net| selected.contains(net))
                    })
                    .collect();
                (Err(refusal), cnc.tunnel_key, kept)
            }
        };
        let networks: BTreeMap<String, String> = subnets
            .keys()
            .filter_map(|o| Some((o.clone(), by_owner.get(o)?.clone())))
            .collect();
        decided.push((
            name,
            &cnc.spec.connect_subnets,
            networks.values().cloned().collect(),
        ));
        out.insert(
            name.to_owned(),
            ConnectAllocation {
                accepted,
                selected,
                tunnel_key,
                subnets,
                networks,
            },
        );
    }
    (out, problems)
}

/// A CNC decided before: its name, connect subnets and connected networks.
type Decided<'a> = (&'a str, &'a [(IpNet, u8)], BTreeSet<String>);

/// Every network with an id, by owner key.
fn owners(inv: &Inventory, alloc: &Allocations) -> BTreeMap<String, String> {
    inv.networks
        .iter()
        .filter_map(|(name, n)| {
            let id = *alloc.network_ids.get(name)?;
            Some((owner_key(n.network.topology, id), name.clone()))
        })
        .collect()
}

fn overlaps(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// The checks that need only the CNC and the networks it selects, in the order
/// OVN-Kubernetes' cluster manager makes them.
fn check(
    inv: &Inventory,
    alloc: &Allocations,
    reserved: &Reserved,
    config: &ClusterConfig,
    cnc: &ConnectInfo,
    selected: &[String],
) -> Result<(), Refusal> {
    let nets: Vec<&Network> = selected.iter().map(|n| &inv.networks[n].network).collect();
    for n in &nets {
        supported(n)?;
    }
    enough(&nets)?;
    disjoint(&nets)?;
    for (c, _) in &cnc.spec.connect_subnets {
        connect_subnet_free(c, &nets, alloc, reserved, config)?;
    }
    families(&nets, cnc)
}

/// A primary Layer3 or Layer2 network with Geneve transport.
fn supported(n: &Network) -> Result<(), Refusal> {
    let name = n.name();
    if n.topology == Topology::Localnet {
        return refuse(
            Reason::UnsupportedNetworkType,
            format!("Network '{name}' has type 'localnet'. Localnet networks are not supported"),
        );
    }
    if n.role != Role::Primary {
        return refuse(
            Reason::UnsupportedNetworkType,
            format!(
                "Network '{name}' has role '{}'. Only 'Primary' role networks are supported",
                n.role
            ),
        );
    }
    if !n.transport.eq_ignore_ascii_case("geneve") {
        return refuse(
            Reason::UnsupportedNetworkType,
            format!("Network '{name}' has transport '{}'. Network connect is not supported when overlay tunneling is disabled", n.transport),
        );
    }
    Ok(())
}

/// At least two networks.
fn enough(nets: &[&Network]) -> Result<(), Refusal> {
    match nets {
        [] => refuse(
            Reason::InsufficientNetworks,
            "No network selected, minimum 2 networks required for connection",
        ),
        [one] => refuse(
            Reason::InsufficientNetworks,
            format!(
                "Only 1 network ('{}') selected, minimum 2 networks required for connection",
                one.name()
            ),
        ),
        _ => Ok(()),
    }
}

/// No two networks' pod subnets overlap.
fn disjoint(nets: &[&Network]) -> Result<(), Refusal> {
    for (i, a) in nets.iter().enumerate() {
        for b in &nets[i + 1..] {
            for sa in &a.subnets {
                if let Some(sb) = b.subnets.iter().find(|sb| overlaps(&sa.cidr, &sb.cidr)) {
                    return refuse(
                        Reason::OverlappingNetworkSubnets,
                        format!("Cannot connect networks '{}' and '{}': overlapping pod subnets {} and {} detected", a.name(), b.name(), sa.cidr, sb.cidr),
                    );
                }
            }
        }
    }
    Ok(())
}

/// Connect subnet `c` overlaps no service CIDR, masquerade subnet, subnet of the
/// default network, or any network's pod, join or transit subnets.
fn connect_subnet_free(
    c: &IpNet,
    nets: &[&Network],
    alloc: &Allocations,
    reserved: &Reserved,
    config: &ClusterConfig,
) -> Result<(), Refusal> {
    let conflict = |what: String| {
        refuse(
            Reason::ConnectSubnetConflict,
            format!("Connect subnet {c} conflicts with {what}"),
        )
    };
    if let Some(s) = reserved.service_cidrs.iter().find(|s| overlaps(c, s)) {
        return conflict(format!("the service CIDR {s}"));
    }
    if let Some(s) = reserved.masquerade.iter().find(|s| overlaps(c, s)) {
        return conflict(format!("the masquerade subnet {s}"));
    }
    if let Some(s) = reserved.cluster_subnets.iter().find(|s| overlaps(c, s)) {
        return conflict(format!("the default network's cluster subnet {s}"));
    }
    if let Some(s) = reserved.default_join.iter().find(|s| overlaps(c, s)) {
        return conflict(format!("the default network's join subnet {s}"));
    }
    for n in nets {
        let name = n.name();
        if let Some(s) = n.subnets.iter().find(|s| overlaps(c, &s.cidr)) {
            return conflict(format!("pod subnet {} of network '{name}'", s.cidr));
        }
        if let Some(j) = n.join_subnets_in_use().iter().find(|j| overlaps(c, j)) {
            return conflict(format!("join subnet {j} of network '{name}'"));
        }
        let transit: &[IpNet] = match n.topology {
            Topology::Layer2 => alloc
                .transit_subnets
                .get(&name)
                .map(Vec::as_slice)
                .unwrap_or(&[]),
            _ => &config.transit_subnets,
        };
        if let Some(t) = transit.iter().find(|t| overlaps(c, t)) {
            return conflict(format!("transit subnet {t} of network '{name}'"));
        }
    }
    Ok(())
}

/// No single-stack IPv4 network with a single-stack IPv6 one, and a connect subnet for
/// every family a network has.
fn families(nets: &[&Network], cnc: &ConnectInfo) -> Result<(), Refusal> {
    let v4_only = nets.iter().find(|n| n.has_ipv4() && !n.has_ipv6());
    let v6_only = nets.iter().find(|n| n.has_ipv6() && !n.has_ipv4());
    if let (Some(a), Some(b)) = (v4_only, v6_only) {
        return refuse(
            Reason::IPFamilyMismatch,
            format!("Cannot connect single-stack IPv4 network '{}' with single-stack IPv6 network '{}'. Networks must use the same IP family", a.name(), b.name()),
        );
    }
    let connect_has = |ipv4: bool| {
        cnc.spec
            .connect_subnets
            .iter()
            .any(|(c, _)| c.addr().is_ipv4() == ipv4)
    };
    for n in nets {
        for (ipv4, has, family) in [(true, n.has_ipv4(), "IPv4"), (false, n.has_ipv6(), "IPv6")] {
            if has && !connect_has(ipv4) {
                return refuse(
                    Reason::IPFamilyMismatch,
                    format!("Network '{}' has {family} subnets but connectSubnets have no {family} subnet", n.name()),
                );
            }
        }
    }
    Ok(())
}

/// Another CNC decided before that connects a network this one selects must not have
/// overlapping connect subnets.
fn cross_check(cnc: &ConnectInfo, selected: &[String], decided: &[Decided]) -> Result<(), Refusal> {
    for (other, subnets, networks) in decided {
        let Some(common) = selected.iter().find(|n| networks.contains(*n)) else {
            continue;
        };
        for (mine, _) in &cnc.spec.connect_subnets {
            if let Some((theirs, _)) = subnets.iter().find(|(t, _)| overlaps(mine, t)) {
                return refuse(
                    Reason::ConnectSubnetOverlap,
                    format!("Connect subnet {mine} overlaps with connect subnet {theirs} of ClusterNetworkConnect '{other}' which also selects network '{common}'. Each ClusterNetworkConnect selecting the same network must use non-overlapping connect subnets"),
                );
            }
        }
    }
    Ok(())
}

/// The connect subnets of every selected network: those annotated kept, the others'
/// released, new networks' handed out in network id order.
fn allocate(
    inv: &Inventory,
    alloc: &Allocations,
    cnc: &ConnectInfo,
    selected: &[String],
    previous: &BTreeMap<String, Vec<IpNet>>,
    by_owner: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, Vec<IpNet>>, Refusal> {
    let exhausted = |message: String| Refusal {
        reason: Reason::ConnectSubnetExhausted,
        message,
    };
    let mut a = ConnectAllocator::new(&cnc.spec.connect_subnets);
    for (owner, subnets) in previous {
        a.mark(owner, subnets)
            .map_err(|e| exhausted(format!("the annotated connect subnets cannot be kept: {e}")))?;
    }
    for owner in previous.keys() {
        if !by_owner.get(owner).is_some_and(|n| selected.contains(n)) {
            a.release(owner);
        }
    }
    let mut new: Vec<(u32, &String)> = selected
        .iter()
        .filter_map(|n| Some((*alloc.network_ids.get(n)?, n)))
        .collect();
    new.sort();
    for (id, name) in new {
        let owner = owner_key(inv.networks[name].network.topology, id);
        a.allocate(&owner).map_err(|e| {
            let cidrs: Vec<String> = cnc
                .spec
                .connect_subnets
                .iter()
                .map(|(c, p)| format!("{c} (/{p} per network)"))
                .collect();
            exhausted(format!(
                "Insufficient IP addresses in connect subnet {} for network '{name}': {e}",
                cidrs.join(", ")
            ))
        })?;
    }
    Ok(a.allocations().clone())
}

/// Every node's pair must lie inside its network's block, and every connect-router
/// port key must be unique and within OVN's limit.
fn check_pairs_and_keys(
    alloc: &Allocations,
    cnc: &ConnectInfo,
    subnets: &BTreeMap<String, Vec<IpNet>>,
    by_owner: &BTreeMap<String, String>,
    max_port_tunnel_key: u32,
) -> Result<(), Refusal> {
    let exhausted = |message: String| refuse(Reason::ConnectSubnetExhausted, message);
    let mut used: BTreeMap<u64, String> = BTreeMap::new();
    for (owner, nets) in subnets {
        let Some(name) = by_owner.get(owner) else {
            continue;
        };
        let Some((topology, _)) = parse_owner_key(owner) else {
            continue;
        };
        let ports: Vec<(u32, String)> = match topology {
            Topology::Layer2 => vec![(0, format!("network '{name}'"))],
            _ => alloc
                .node_ids
                .iter()
                .map(|(node, id)| (*id, format!("network '{name}' on node '{node}' (id {id})")))
                .collect(),
        };
        for (id, what) in ports {
            if connect::pair(nets, id).is_none() {
                let block: Vec<String> = nets.iter().map(ToString::to_string).collect();
                return exhausted(format!("Insufficient IP addresses in connect subnet: no point-to-point pair for {what} in {}", block.join(", ")));
            }
            let key = connect::port_tunnel_key(&cnc.spec.connect_subnets, topology, nets, id)
                .filter(|k| *k <= u64::from(max_port_tunnel_key));
            let Some(key) = key else {
                return exhausted(format!("the connect router's port for {what} would need a tunnel key above OVN's limit of {max_port_tunnel_key}: fewer networks per connect subnet, or a longer networkPrefix, are needed"));
            };
            if let Some(other) = used.insert(key, what.clone()) {
                return exhausted(format!("the connect router's ports for {other} and {what} would share tunnel key {key}"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
