//! What OVN-Kubernetes' cluster manager allocates, allocated the same way and written
//! as the same annotations: node ids, network ids, host subnets per (network, node),
//! Layer2 transit subnets and tunnel keys.
//!
//! Allocation is deterministic: objects are taken in name order (never map order), ids
//! and subnets already annotated are kept, and the next free one follows a rule that
//! depends only on what is in use ([`ids`]). The same inputs give the same answer to a
//! restarted daemon and to a second zone; an allocation, once made, does not change
//! while its object exists.

pub mod admission;
pub mod connect;
pub mod ids;
pub mod pods;
pub mod subnets;
pub mod transit;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use ipnet::IpNet;

use crate::api::{Inventory, Network, Problem, Role, Topology};
use crate::ovnk::addr::nth_in;

pub(crate) use ids::IdAllocator;
pub(crate) use subnets::SubnetAllocator;

/// The highest node id (OVN-Kubernetes' `maxNodeIDs`); ids 0 and 1 are reserved.
pub(crate) const MAX_NODE_ID: u32 = 5000;
/// Network ids are below this (OVN-Kubernetes' `MaxNetworks`); 0 is the default
/// network's.
pub(crate) const MAX_NETWORKS: u32 = 4096;
/// Transit switches' tunnel keys are this plus the network id (docs/ovn-kubernetes.md §2.5).
pub(crate) const BASE_TRANSIT_SWITCH_TUNNEL_KEY: u32 = 16_711_683;
/// The first tunnel key of the shared allocator, after the keys kept for transit
/// switches (`16711683 + 4096`).
pub(crate) const FIRST_ALLOCATED_TUNNEL_KEY: u32 = BASE_TRANSIT_SWITCH_TUNNEL_KEY + MAX_NETWORKS;
/// The highest datapath tunnel key OVN accepts (2^24 - 1).
pub(crate) const MAX_DATAPATH_TUNNEL_KEY: u32 = (1 << 24) - 1;

/// Cluster-wide settings the allocations depend on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// The transit switch subnets (default `100.88.0.0/16`, `fd97::/64`); also the
    /// default Layer2 transit subnets.
    pub(crate) transit_subnets: Vec<IpNet>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            transit_subnets: vec![
                "100.88.0.0/16".parse().expect("constant"),
                "fd97::/64".parse().expect("constant"),
            ],
        }
    }
}

/// A Layer3 network's host subnets by node name (IPv4 first): a persistent map, so the
/// map of a network a node joined or left shares every other node's entry with the map
/// before.
pub(crate) type HostSubnets = imbl::OrdMap<Arc<str>, Arc<[IpNet]>>;

/// Everything allocated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allocations {
    /// Node ids by node name.
    pub node_ids: BTreeMap<String, u32>,
    /// Each node's transit switch port addresses (IPv4 first).
    pub(crate) node_transit: BTreeMap<String, Vec<IpNet>>,
    /// Network ids by network name.
    pub network_ids: BTreeMap<String, u32>,
    /// Host subnets by network name, then node name. A network's map is taken from
    /// the allocations before when its nodes are annotated with what they were given
    /// then, and edited when nodes came or went (`allocate_after`).
    pub host_subnets: BTreeMap<String, HostSubnets>,
    /// Primary Layer2 networks' tunnel keys: `[switch, transit router]`.
    pub tunnel_keys: BTreeMap<String, Vec<u32>>,
    /// Primary Layer2 networks' transit subnets (IPv4 first).
    pub(crate) transit_subnets: BTreeMap<String, Vec<IpNet>>,
    /// Of the primary Layer2 networks whose transit subnet moved off the default (an
    /// overlap): what it moved to, said in the network's status.
    pub(crate) transit_moved: BTreeMap<String, String>,
    /// The addresses of the pods' interfaces on virtual networks, by `namespace/name`.
    pub pods: BTreeMap<String, pods::PodAddresses>,
    /// ClusterNetworkConnects' acceptance, tunnel keys and connect subnets, by name
    /// (`admission::admit`).
    pub connects: BTreeMap<String, admission::ConnectAllocation>,
    /// Each Layer3 network's host subnet allocator as handing out its host subnets left
    /// it: what a node added is given next.
    host_allocators: BTreeMap<String, SubnetAllocator>,
    /// The nodes annotated with exactly the host subnets they have, of every family in
    /// every Layer3 network, with those annotations as read (their `Arc`): while a node
    /// reads the same, it need not be compared again.
    pub(crate) as_annotated: BTreeMap<String, Arc<BTreeMap<String, Vec<IpNet>>>>,
}

fn problem_for(
    origin: &crate::api::Origin,
    object: String,
    field: &str,
    message: String,
) -> Problem {
    Problem {
        origin: origin.clone(),
        object: Some(object),
        field: Some(field.to_owned()),
        message,
    }
}

impl Allocations {
    /// True when `node`, reading host subnets `read`, is annotated with exactly the
    /// host subnets it has in every Layer3 network and with no others: its host
    /// subnets annotation says what would be written.
    pub(crate) fn annotated_exactly(
        &self,
        node: &str,
        read: &Arc<BTreeMap<String, Vec<IpNet>>>,
    ) -> bool {
        self.as_annotated
            .get(node)
            .is_some_and(|a| Arc::ptr_eq(a, read))
            && read.len() == self.host_subnets.len()
    }
}

/// Allocates what the inventory's objects lack, keeping what they carry. Objects that
/// cannot get an allocation are left out of the result and reported.
pub fn allocate(inv: &Inventory, config: &ClusterConfig) -> (Allocations, Vec<Problem>) {
    allocate_after(inv, config, None)
}

/// [`allocate`], taking from `before` (an inventory and what was allocated for it)
/// the host subnets of each Layer3 network whose subnets are the same, when allocating
/// again would keep each node's and hand out none but to nodes added:
///
/// - every node of `before` still here reads the very annotations it read then, and
///   they held exactly what it was given (the daemon saves what it allocates and
///   reads it back), and a node added has no host subnet of the network annotated:
///   the map before, less the nodes gone, plus a subnet of each family for each node
///   added, handed out in name order from the network's allocator as it was left;
/// - or every node is the same and annotated with exactly what it was given, of every
///   family the network has: the map before.
///
/// The answer is the one [`allocate`] gives, with no problem. (A node added beside 500
/// networks then costs 500 subnets handed out, not the 250k of every node compared
/// and copied; a network added allocates its own host subnets.)
pub(crate) fn allocate_after(
    inv: &Inventory,
    config: &ClusterConfig,
    before: Option<(&Inventory, &Allocations)>,
) -> (Allocations, Vec<Problem>) {
    let mut out = Allocations::default();
    let mut problems = Vec::new();
    node_ids(inv, config, &mut out, &mut problems);
    // Network ids, then tunnel keys and subnets, network by network in name order.
    network_ids(inv, &mut out, &mut problems);
    tunnel_keys(inv, &mut out, &mut problems);
    subnets(inv, config, before, &mut out, &mut problems);
    let (pods, mut refused) = pods::pod_addresses(inv);
    out.pods = pods;
    problems.append(&mut refused);
    (out, problems)
}

/// True when `given` (a network's host subnets before, by node) is what each node of
/// `nodes` (all of them, in name order, each with the subnets annotated on it) is
/// annotated with, of every family the network's `allocator` has.
fn annotated_as_given<'a>(
    given: &HostSubnets,
    allocator: &SubnetAllocator,
    mut nodes: impl Iterator<Item = (&'a String, &'a [IpNet])>,
) -> bool {
    given.iter().all(|(node, was)| {
        nodes
            .next()
            .is_some_and(|(name, now)| **name == **node && now == &**was && allocator.covers(now))
    }) && nodes.next().is_none()
}

/// Node ids (annotated ones first, in name order, so a clash keeps the first node's)
/// and each node's transit switch port addresses.
fn node_ids(
    inv: &Inventory,
    config: &ClusterConfig,
    out: &mut Allocations,
    problems: &mut Vec<Problem>,
) {
    use crate::api::annotations::*;
    // A node whose id cannot be kept (reserved, out of range, another node's) gets a new
    // one, as OVN-Kubernetes' cluster manager gives it, and the bad id is reported.
    let mut node_ids = IdAllocator::new(2, MAX_NODE_ID);
    let mut missing = Vec::new();
    for (name, node) in &inv.nodes {
        match node.node_id {
            Some(id) => match node_ids.reserve(id) {
                Ok(()) => {
                    out.node_ids.insert(name.clone(), id);
                }
                Err(e) => missing.push((name, Some((id, e)))),
            },
            None => missing.push((name, None)),
        }
    }
    for (name, refused) in missing {
        let node = &inv.nodes[name];
        match (node_ids.allocate(), refused) {
            (Ok(id), None) => {
                out.node_ids.insert(name.clone(), id);
            }
            (Ok(id), Some((bad, why))) => {
                out.node_ids.insert(name.clone(), id);
                problems.push(problem_for(
                    &node.origin,
                    format!("Node {name}"),
                    &format!("metadata.annotations[{NODE_ID}]"),
                    format!(
                        "node id {bad} cannot be used: {why}; node id {id} is allocated instead"
                    ),
                ));
            }
            (Err(e), _) => problems.push(problem_for(
                &node.origin,
                format!("Node {name}"),
                "metadata.name",
                format!("no node id: {e}"),
            )),
        }
    }
    for (name, id) in &out.node_ids {
        let addrs = match &inv.nodes[name].transit_ifaddr {
            Some(given) => given.clone(),
            None => config
                .transit_subnets
                .iter()
                .filter_map(|t| nth_in(t, *id as u128))
                .collect(),
        };
        out.node_transit.insert(name.clone(), addrs);
    }
}

/// Network ids: annotated ones first, then the others in name order.
fn network_ids(inv: &Inventory, out: &mut Allocations, problems: &mut Vec<Problem>) {
    use crate::api::annotations::*;
    let mut network_ids = IdAllocator::new(1, MAX_NETWORKS - 1);
    let mut missing = Vec::new();
    for (name, net) in &inv.networks {
        match net.network_id {
            Some(id) => match network_ids.reserve(id) {
                Ok(()) => {
                    out.network_ids.insert(name.clone(), id);
                }
                Err(e) => problems.push(problem_for(
                    &net.origin,
                    net.network.owner.to_string(),
                    &format!("metadata.annotations[{NETWORK_ID}]"),
                    format!("network id {id} cannot be used: {e}"),
                )),
            },
            None => missing.push(name),
        }
    }
    for name in missing {
        match network_ids.allocate() {
            Ok(id) => {
                out.network_ids.insert(name.clone(), id);
            }
            Err(e) => problems.push(problem_for(
                &inv.networks[name].origin,
                inv.networks[name].network.owner.to_string(),
                "metadata.name",
                format!("no network id: {e}"),
            )),
        }
    }
}

/// The transit subnets of primary Layer2 network `name`, and what its status says when
/// they moved off the default.
fn layer2_transit(
    name: &str,
    net: &crate::api::Network,
    config: &ClusterConfig,
    out: &mut Allocations,
) -> Result<(), String> {
    let t = transit::transit_subnets(net, &config.transit_subnets)?;
    if let Some(note) = transit::moved(&t, &config.transit_subnets) {
        out.transit_moved.insert(name.to_owned(), note);
    }
    out.transit_subnets.insert(name.to_owned(), t);
    Ok(())
}

/// Tunnel keys of the primary Layer2 networks' transit routers.
fn tunnel_keys(inv: &Inventory, out: &mut Allocations, problems: &mut Vec<Problem>) {
    use crate::api::annotations::*;
    // Tunnel keys come from one allocator shared by Layer2 transit routers and
    // ClusterNetworkConnect routers; every key already annotated is reserved first.
    let mut keys = IdAllocator::new(FIRST_ALLOCATED_TUNNEL_KEY, MAX_DATAPATH_TUNNEL_KEY);
    let wants_keys = |name: &String| {
        let n = &inv.networks[name].network;
        n.topology == Topology::Layer2 && n.role == Role::Primary
    };
    let mut need_key = Vec::new();
    for name in out.network_ids.keys().filter(|n| wants_keys(n)) {
        let net = &inv.networks[name];
        let id = out.network_ids[name];
        let switch_key = BASE_TRANSIT_SWITCH_TUNNEL_KEY + id;
        match &net.tunnel_keys {
            Some(given) if given.len() == 2 && given[0] == switch_key => {
                match keys.reserve(given[1]) {
                    Ok(()) => {
                        out.tunnel_keys.insert(name.clone(), given.clone());
                    }
                    Err(e) => problems.push(problem_for(
                        &net.origin,
                        net.network.owner.to_string(),
                        &format!("metadata.annotations[{TUNNEL_KEYS}]"),
                        format!("tunnel key {} cannot be used: {e}", given[1]),
                    )),
                }
            }
            Some(given) => problems.push(problem_for(
                &net.origin,
                net.network.owner.to_string(),
                &format!("metadata.annotations[{TUNNEL_KEYS}]"),
                format!(
                    "{given:?} is not [{switch_key}, <transit router key>] for network id {id}"
                ),
            )),
            None => need_key.push(name.clone()),
        }
    }
    for cnc in inv.connects.values() {
        if let Some(k) = cnc.tunnel_key {
            // A clash is the connect's problem, reported when it is admitted.
            let _ = keys.reserve(k);
        }
    }
    for name in need_key {
        let net = &inv.networks[&name];
        match keys.allocate() {
            Ok(k) => {
                let switch_key = BASE_TRANSIT_SWITCH_TUNNEL_KEY + out.network_ids[&name];
                out.tunnel_keys.insert(name.clone(), vec![switch_key, k]);
            }
            Err(e) => problems.push(problem_for(
                &net.origin,
                net.network.owner.to_string(),
                "metadata.name",
                format!("no tunnel key: {e}"),
            )),
        }
    }
}

/// How many networks a node's walk through its annotated subnets passes over before a
/// look-up is cheaper (about log2 of the entries at 500 networks).
const WALKED_PAST: usize = 8;

/// Host subnets of the Layer3 networks, transit subnets of the primary Layer2 ones.
fn subnets(
    inv: &Inventory,
    config: &ClusterConfig,
    before: Option<(&Inventory, &Allocations)>,
    out: &mut Allocations,
    problems: &mut Vec<Problem>,
) {
    let moved = before.and_then(|(b, alloc)| NodesMoved::since(inv, b, alloc));
    // Whether each node (in name order) is annotated with exactly what it has in each
    // Layer3 network so far.
    let mut as_annotated = vec![true; inv.nodes.len()];
    // Each node's annotated subnets are read network by network in name order, the
    // order of its own map: one walk through each node's map in all (a look-up per
    // network and node was most of a reload's time at 500 x 500).
    let mut annotated: Vec<_> = inv
        .nodes
        .iter()
        .map(|(name, node)| (name, node, node.subnets.range::<str, _>(..).peekable()))
        .collect();
    // The networks passed over since the walk last moved: past a few, each node's walk
    // is moved to the next network by a look-up (a network added, last by name, after
    // 499 whose host subnets were only edited, walked each node's 499 entries).
    let mut passed_over = 0;
    for (name, info) in &inv.networks {
        let net = &info.network;
        passed_over += 1;
        if !out.network_ids.contains_key(name) {
            continue;
        }
        match net.topology {
            Topology::Layer3 => {
                let given = given_before(before, name, net);
                let edited = given
                    .zip(moved.as_ref())
                    .and_then(|((subnets, allocator), moved)| {
                        Some((moved.edit(name, subnets, allocator)?, moved))
                    });
                if let Some(((subnets, allocator), moved)) = edited {
                    for (i, _, _) in &moved.added {
                        as_annotated[*i] = false;
                    }
                    out.host_subnets.insert(name.clone(), subnets);
                    out.host_allocators.insert(name.clone(), allocator);
                    continue;
                }
                if passed_over > WALKED_PAST {
                    for (_, node, given) in &mut annotated {
                        let from = (Bound::Included(name.as_str()), Bound::Unbounded);
                        *given = node.subnets.range::<str, _>(from).peekable();
                    }
                }
                passed_over = 0;
                let mut nodes = annotated.iter_mut().map(|(node_name, node, given)| {
                    let mine = crate::ovnk::in_step(given, name);
                    (*node_name, *node, mine.map_or(&[][..], Vec::as_slice))
                });
                // The host subnets before, when every node is annotated with them.
                let kept = given.filter(|(given, allocator)| {
                    annotated_as_given(given, allocator, nodes.by_ref().map(|(n, _, s)| (n, s)))
                });
                let (subnets, allocator) = match kept {
                    Some((kept, allocator)) => (kept.clone(), allocator.clone()),
                    None => {
                        // A comparison that failed took some of the walk through the
                        // nodes' annotations: this network's are looked up instead.
                        let nodes: Box<dyn Iterator<Item = _>> = match given {
                            None => Box::new(nodes),
                            Some(_) => Box::new(inv.nodes.iter().map(|(node_name, node)| {
                                let mine = node.subnets.get(name);
                                (node_name, node, mine.map_or(&[][..], Vec::as_slice))
                            })),
                        };
                        let hosts = host_subnets(info, name, nodes);
                        problems.extend(hosts.problems);
                        for (all, this) in as_annotated.iter_mut().zip(hosts.as_annotated) {
                            *all &= this;
                        }
                        (hosts.subnets, hosts.allocator)
                    }
                };
                out.host_subnets.insert(name.clone(), subnets);
                out.host_allocators.insert(name.clone(), allocator);
            }
            Topology::Layer2 if net.role == Role::Primary => {
                if let Err(e) = layer2_transit(name, net, config, out) {
                    problems.push(problem_for(&info.origin, net.owner.to_string(), "spec", e))
                }
            }
            _ => {}
        }
    }
    out.as_annotated = annotated_nodes(inv, as_annotated);
}

/// The host subnets network `name` (now `net`) had before and their allocator, when its
/// subnets are the same.
fn given_before<'a>(
    before: Option<(&Inventory, &'a Allocations)>,
    name: &str,
    net: &Network,
) -> Option<(&'a HostSubnets, &'a SubnetAllocator)> {
    before.and_then(|(inv_before, alloc)| {
        let same = inv_before
            .networks
            .get(name)
            .is_some_and(|b| b.network.subnets == net.subnets);
        let allocator = alloc.host_allocators.get(name);
        alloc.host_subnets.get(name).zip(allocator).filter(|_| same)
    })
}

/// The nodes (in name order) annotated with exactly what they have (`as_annotated`),
/// with their annotations as read.
fn annotated_nodes(
    inv: &Inventory,
    as_annotated: Vec<bool>,
) -> BTreeMap<String, Arc<BTreeMap<String, Vec<IpNet>>>> {
    inv.nodes
        .iter()
        .zip(as_annotated)
        .filter(|(_, kept)| *kept)
        .map(|((name, node), _)| (name.clone(), node.subnets.clone()))
        .collect()
}

/// The nodes added and gone since an allocation before, when every node of it that is
/// still here either reads the annotations it read then and they held exactly what it
/// was given, or is one of a few read anew (its subnets are compared network by
/// network).
struct NodesMoved<'a> {
    /// The nodes added: their place in the inventory's nodes, their name, the node.
    added: Vec<(usize, &'a String, &'a crate::api::NodeInfo)>,
    /// The nodes gone.
    gone: Vec<&'a String>,
    /// The nodes of before whose annotations were read anew (the node added before,
    /// read back with what it was given).
    reread: Vec<(&'a String, &'a crate::api::NodeInfo)>,
}

impl<'a> NodesMoved<'a> {
    fn since(
        inv: &'a Inventory,
        inv_before: &'a Inventory,
        before: &Allocations,
    ) -> Option<NodesMoved<'a>> {
        let (mut added, mut reread) = (Vec::new(), Vec::new());
        for (i, (name, node)) in inv.nodes.iter().enumerate() {
            match before.as_annotated.get(name) {
                Some(read) if Arc::ptr_eq(read, &node.subnets) => {}
                _ if inv_before.nodes.contains_key(name) => reread.push((name, node)),
                _ => added.push((i, name, node)),
            }
        }
        // Many nodes read anew are compared more cheaply by one walk of all.
        if reread.len() * 8 > inv.nodes.len().max(8) {
            return None;
        }
        let gone = inv_before
            .nodes
            .keys()
            .filter(|n| !inv.nodes.contains_key(*n))
            .collect();
        Some(NodesMoved {
            added,
            gone,
            reread,
        })
    }

    /// Network `name`'s host subnets `before` and their `allocator` with the nodes gone
    /// taken out and a subnet of each family handed out to each node added; `None`
    /// when a node read anew is not annotated with exactly its subnets before, of every
    /// family, when a node added has host subnets of the network annotated (kept, they
    /// go in name order among the others') or one cannot be given a subnet (a problem
    /// to report).
    fn edit(
        &self,
        name: &str,
        before: &HostSubnets,
        allocator: &SubnetAllocator,
    ) -> Option<(HostSubnets, SubnetAllocator)> {
        let annotated =
            |node: &crate::api::NodeInfo| node.subnets.get(name).is_some_and(|s| !s.is_empty());
        if self.added.iter().any(|(_, _, node)| annotated(node)) {
            return None;
        }
        for (node_name, node) in &self.reread {
            let now = node.subnets.get(name).map_or(&[][..], Vec::as_slice);
            if !allocator.covers(now) || &**before.get(node_name.as_str())? != now {
                return None;
            }
        }
        let (mut subnets, mut allocator) = (before.clone(), allocator.clone());
        for node in &self.gone {
            for s in subnets.remove(node.as_str())?.iter() {
                allocator.release(s);
            }
        }
        for (_, node, _) in &self.added {
            let mut given = Vec::with_capacity(2);
            for ipv4 in [true, false] {
                if allocator.has_family(ipv4) {
                    given.push(allocator.allocate(ipv4).ok()?);
                }
            }
            subnets.insert(node.as_str().into(), given.into());
        }
        Some((subnets, allocator))
    }
}

/// A Layer3 network's host subnets, allocated.
struct Hosts {
    subnets: HostSubnets,
    /// The allocator as handing them out left it.
    allocator: SubnetAllocator,
    /// Whether each node was annotated with exactly what it has.
    as_annotated: Vec<bool>,
    problems: Vec<Problem>,
}

/// The host subnets of Layer3 network `name` (`info`) for every node of `nodes` (in
/// name order, each with the subnets of the network annotated on it): annotated ones
/// kept (a node's subnet that is not one of the network's, or another node's, is
/// reported and replaced), then the missing ones handed out node by node in name order.
fn host_subnets<'a>(
    info: &crate::api::NetworkInfo,
    name: &str,
    nodes: impl Iterator<Item = (&'a String, &'a crate::api::NodeInfo, &'a [IpNet])>,
) -> Hosts {
    let mut alloc = SubnetAllocator::new();
    for s in &info.network.subnets {
        alloc.add_range(s.cidr, s.host_len);
    }
    let mut problems = Vec::new();
    let mut result: Vec<(String, Vec<IpNet>)> = Vec::new();
    let mut as_annotated = Vec::new();
    for (node_name, node, annotated) in nodes {
        let mut kept = Vec::with_capacity(annotated.len().max(1));
        for s in annotated {
            match alloc.mark(s) {
                Ok(()) => kept.push(*s),
                Err(e) => problems.push(Problem {
                    origin: node.origin.clone(),
                    object: Some(format!("Node {node_name}")),
                    field: Some(format!(
                        "metadata.annotations[{}]",
                        crate::api::annotations::NODE_SUBNETS
                    )),
                    message: format!("host subnet {s} of network {name} is not kept: {e}"),
                }),
            }
        }
        let sorted = annotated.is_sorted_by_key(|s| s.addr().is_ipv6());
        as_annotated.push(sorted && kept.len() == annotated.len());
        result.push((node_name.clone(), kept));
    }
    for ((node_name, subnets), as_annotated) in result.iter_mut().zip(&mut as_annotated) {
        for ipv4 in [true, false] {
            if !alloc.has_family(ipv4) || subnets.iter().any(|s| s.addr().is_ipv4() == ipv4) {
                continue;
            }
            *as_annotated = false;
            match alloc.allocate(ipv4) {
                Ok(s) => subnets.push(s),
                Err(e) => problems.push(Problem {
                    origin: info.origin.clone(),
                    object: Some(info.network.owner.to_string()),
                    field: Some("spec".into()),
                    message: format!(
                        "no {} host subnet for node {node_name}: {e}",
                        if ipv4 { "IPv4" } else { "IPv6" }
                    ),
                }),
            }
        }
        subnets.sort_by_key(|s| s.addr().is_ipv6());
    }
    Hosts {
        subnets: result.into_iter().collect(),
        allocator: alloc,
        as_annotated,
        problems,
    }
}

#[cfg(test)]
mod tests;
