//! Desired NB rows, computed by pure functions from the inputs and allocations: no I/O,
//! the same inputs always give the same rows.
//!
//! - [`layer3`]: a primary Layer3 network (docs/ovn-kubernetes.md §2, OKEP-5377);
//! - [`layer2`]: a primary Layer2 network with its transit router (docs/ovn-kubernetes.md §3,
//!   OKEP-5094);
//! - [`gateway`]: the gateway router of a local node and its external side;
//! - [`host`]: the management port to the node's host, its SNAT and reroutes;
//! - [`interconnect`]: what joins a network's zone to the other zones;
//! - [`services`]: a service's load balancers on its namespace's primary network;
//! - [`cluster`]: rows shared by every network (the default COPP and its meters);
//! - [`connect`]: a ClusterNetworkConnect (OKEP-5224): its router, its
//!   [`connect::services`] and its service-only [`connect::isolation`] ACLs.
//!
//! Every builder fills a [`Desired`] for one reconcile key. The row helpers per NB
//! table are in [`rows`]; a network's builders share one context (`builder`).

pub(crate) mod builder;
pub mod cluster;
pub mod connect;
pub mod desired;
mod egress_ip;
pub mod gateway;
pub mod host;
pub mod interconnect;
pub mod layer2;
pub mod layer3;
pub mod policy_base;
pub mod rows;
pub mod services;

use std::net::IpAddr;

use ipnet::IpNet;

use crate::alloc::Allocations;
use crate::api::annotations::L3GatewayConfig;
use crate::api::{Inventory, Network, NodeInfo, Role, Topology};
use crate::ovnk::ownership::Owner;
use crate::ovnk::{addr, in_step, names};

pub use desired::Desired;

/// How pods' traffic leaves the cluster (OVN-Kubernetes' `--gateway-mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GatewayMode {
    /// Through the gateway router (the default).
    #[default]
    Shared,
    /// Through the host's kernel, via the management port.
    Local,
}

/// Cluster-wide settings the rows depend on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TopologyConfig {
    /// Gateway mode.
    pub gateway_mode: GatewayMode,
    /// The cluster MTU, written as `gateway_mtu` on gateway-facing ports.
    pub(crate) mtu: u32,
    /// Masquerade subnets (IPv4, IPv6) the per-network masquerade IPs come from.
    pub(crate) masquerade_subnets: Vec<IpNet>,
    /// The physical network name of the gateways' localnet ports.
    pub(crate) physical_network: String,
    /// Whether the EgressIP no-reroute policies (priority 102) are written:
    /// OVN-Kubernetes writes them only with EgressIP enabled (`--enable-egress-ip`,
    /// off by default).
    pub(crate) egress_ip: bool,
    /// The default network's join subnets (`--gateway-v4-join-subnet`,
    /// `--gateway-v6-join-subnet`), which the pod-to-join no-reroute policies match.
    pub(crate) default_join: Vec<IpNet>,
    /// Layer2 networks' gateway and management addresses come from their
    /// `defaultGatewayIPs` and `infrastructureSubnets` (OVN-Kubernetes'
    /// `--enable-preconfigured-udn-addresses`, off by default: then `.1` and `.2`).
    pub(crate) preconfigured_udn_addresses: bool,
    /// The cluster's service CIDRs (service-only ClusterNetworkConnects let traffic
    /// to them pass).
    pub(crate) service_cidrs: Vec<IpNet>,
    /// The highest tunnel key OVN gives a logical port: 32767 with Geneve (the
    /// default), 2047 with VXLAN. Connect-router ports beyond it are refused.
    pub max_port_tunnel_key: u32,
    /// The source ports SNAT may use (`external_port_range` of every NAT rule),
    /// OVN-Kubernetes' `--ephemeral-port-range`.
    pub(crate) ephemeral_port_range: String,
    /// The default network's services (`namespace/name`) that primary networks reach
    /// through their node's host in shared gateway mode (OVN-Kubernetes'
    /// `--udn-allowed-default-services`).
    pub(crate) allowed_default_services: Vec<String>,
}

/// OVN-Kubernetes' default `--ephemeral-port-range`: Linux's default ephemeral ports.
pub(crate) const DEFAULT_EPHEMERAL_PORT_RANGE: &str = "32768-60999";

/// OVN-Kubernetes' default `--udn-allowed-default-services`: the API server and
/// cluster DNS.
pub(crate) const DEFAULT_ALLOWED_DEFAULT_SERVICES: [&str; 2] =
    ["default/kubernetes", "kube-system/kube-dns"];

impl Default for TopologyConfig {
    fn default() -> Self {
        TopologyConfig {
            gateway_mode: GatewayMode::Shared,
            mtu: crate::api::network::DEFAULT_MTU,
            masquerade_subnets: crate::api::network::default_masquerade(),
            physical_network: "physnet".into(),
            egress_ip: false,
            default_join: crate::api::network::default_network_join(),
            preconfigured_udn_addresses: false,
            service_cidrs: crate::api::network::default_service_cidrs(),
            max_port_tunnel_key: crate::alloc::connect::MAX_PORT_TUNNEL_KEY,
            ephemeral_port_range: DEFAULT_EPHEMERAL_PORT_RANGE.into(),
            allowed_default_services: DEFAULT_ALLOWED_DEFAULT_SERVICES
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }
}

/// A node as the builders see it. Its hash is its `NodeDigest::view`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeView<'a> {
    /// The node's name.
    pub name: &'a str,
    /// Its id.
    pub id: u32,
    /// Whether it is in the zone being built.
    pub local: bool,
    /// Its chassis, if known.
    pub chassis: Option<&'a str>,
    /// Its transit switch port addresses.
    pub transit: &'a [IpNet],
    /// Its gateway, if configured.
    pub gateway: Option<&'a L3GatewayConfig>,
    /// `k8s.ovn.org/gateway-mtu-support` is not `false`.
    pub(crate) gateway_mtu: bool,
    /// The host's addresses (`k8s.ovn.org/host-cidrs`), in the order of their text.
    pub(crate) host_addresses: &'a [IpAddr],
    /// The hash of `chassis`, `gateway`, `host_addresses` and `gateway_mtu`
    /// ([`NodeInfo::facts`](crate::api::NodeInfo::facts)).
    pub(crate) facts: u64,
    /// What fragments hash of the node.
    pub(crate) digest: NodeDigest,
}

impl std::hash::Hash for NodeView<'_> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.digest.view.hash(h)
    }
}

/// The hashes a network's builder takes of each node for the node's fragment, the
/// same for every network: a world works them out once ([`Inputs::prepared`]) rather
/// than each of its networks for each of its nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct NodeDigest {
    /// The hash of the node's name, id, zone, transit addresses and
    /// [`NodeInfo::facts`](crate::api::NodeInfo::facts) (which stands for the rest).
    pub(crate) view: u64,
    /// The hash of the node's fragment label, `node:<name>`
    /// ([`desired::label_hash`]).
    pub label: u64,
}

impl NodeDigest {
    fn of(name: &str, id: u32, local: bool, transit: &[IpNet], facts: u64) -> NodeDigest {
        NodeDigest {
            view: crate::ovnk::fingerprint((name, id, local, transit, facts)),
            label: desired::label_hash(format_args!("node:{name}")),
        }
    }
}

/// What every network's builder reads of a node beside its object, the same for
/// every network: its id, whether it is in the zone, its transit addresses and its
/// `NodeDigest`. A world works them out once ([`Inputs::prepared`]): each of its
/// networks' keys looked the node up in the allocations by name, and a node added
/// reconciles every network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedNode {
    id: u32,
    local: bool,
    transit: Vec<IpNet>,
    digest: NodeDigest,
}

impl<'a> NodeView<'a> {
    /// The chassis and gateway config of the node's gateway router, when the topology
    /// builds one: a node of the zone with a chassis and, as OVN-Kubernetes requires,
    /// `k8s.ovn.org/l3-gateway-config`.
    pub fn gateway_router(&self) -> Option<(&'a str, &'a L3GatewayConfig)> {
        if !self.local {
            return None;
        }
        Some((self.chassis?, self.gateway?))
    }
}

/// Everything the builders read.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    /// The objects.
    pub inventory: &'a Inventory,
    /// The allocations.
    pub allocations: &'a Allocations,
    /// The zone being built; `None` builds every node as local (one NB for the cluster).
    pub zone: Option<&'a str>,
    /// Cluster-wide settings.
    pub config: &'a TopologyConfig,
    /// For each node of the inventory, in its order, what `Inputs::prepare_nodes`
    /// works out (`None` for a node without an id), when worked out already (by the
    /// world these inputs are of); `None` works it out for each key.
    pub prepared: Option<&'a [Option<PreparedNode>]>,
}

/// Why a network's rows could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The network is not in the inputs.
    #[error("network {0} is not defined")]
    Unknown(String),
    /// The network has no id (allocation failed).
    #[error("network {0} has no network id")]
    NoNetworkId(String),
    /// A primary Layer2 network has no tunnel keys or transit subnet.
    #[error("network {0} has no tunnel keys or transit subnet")]
    NoTransit(String),
}

impl<'a> Inputs<'a> {
    /// The nodes that have an id, in name order.
    pub fn nodes(&self) -> Vec<NodeView<'a>> {
        self.node_views().collect()
    }

    /// [`Inputs::nodes`], one at a time (a network's builder walks them once, for
    /// each of its networks: 500 nodes are not gathered 500 times for a node added).
    pub(crate) fn node_views(&self) -> Box<dyn Iterator<Item = NodeView<'a>> + 'a> {
        // Debug builds (every test's) check that what was worked out before is what
        // would be now; release builds walk the nodes when it is plainly not (prepared
        // for a node more or less).
        debug_assert!(
            self.prepared
                .is_none_or(|p| p == self.prepare_nodes().as_slice()),
            "the nodes prepared are not those of these inputs"
        );
        let given = self.prepared;
        let Some(prepared) = given.filter(|p| p.len() == self.inventory.nodes.len()) else {
            let walked: Vec<NodeView<'a>> = self
                .walk()
                .filter_map(|(name, node, p)| {
                    let (id, local, transit) = p?;
                    let digest = NodeDigest::of(name, id, local, transit, node.facts);
                    Some(view(name, node, id, local, transit, digest))
                })
                .collect();
            return Box::new(walked.into_iter());
        };
        Box::new(
            self.inventory
                .nodes
                .iter()
                .zip(prepared)
                .filter_map(|((name, node), p)| {
                    let p = p.as_ref()?;
                    Some(view(name, node, p.id, p.local, &p.transit, p.digest))
                }),
        )
    }

    /// For each node of the inventory, in its order, its id, whether it is in the
    /// zone, its transit addresses and its digest ([`PreparedNode`]); `None` for a node
    /// without an id. What [`Inputs::prepared`] holds.
    pub(crate) fn prepare_nodes(&self) -> Vec<Option<PreparedNode>> {
        self.walk()
            .map(|(name, node, p)| {
                let (id, local, transit) = p?;
                Some(PreparedNode {
                    id,
                    local,
                    transit: transit.to_vec(),
                    digest: NodeDigest::of(name, id, local, transit, node.facts),
                })
            })
            .collect()
    }

    /// The inventory's nodes, each with its id, whether it is in the zone and its
    /// transit addresses (`None` for a node without an id). The allocations' maps are
    /// walked beside the nodes' (all in name order), not looked up.
    fn walk(&self) -> impl Iterator<Item = Walked<'a>> + '_ {
        let inv = self.inventory;
        let mut ids = self.allocations.node_ids.iter().peekable();
        let mut transit = self.allocations.node_transit.iter().peekable();
        inv.nodes.iter().map(move |(name, node)| {
            let found = in_step(&mut ids, name).map(|&id| {
                let local = inv.is_local(node, self.zone);
                let t = in_step(&mut transit, name).map_or(&[][..], Vec::as_slice);
                (id, local, t)
            });
            (name, node, found)
        })
    }

    /// The default network's services primary networks may reach
    /// ([`TopologyConfig::allowed_default_services`]) that the inputs hold, with their
    /// cluster IPs, in the order of the setting. A service whose namespace has a
    /// primary user-defined network is not the default network's and is left out.
    pub(crate) fn allowed_default_services(&self) -> Vec<(&'a str, &'a [IpAddr])> {
        let inv = self.inventory;
        self.config
            .allowed_default_services
            .iter()
            .filter_map(|key| {
                let (k, svc) = inv.services.get_key_value(key)?;
                inv.network_of_service(svc)
                    .is_none()
                    .then_some((k.as_str(), svc.cluster_ips.as_slice()))
            })
            .collect()
    }

    /// The host subnets of network `net` on `node` (IPv4 first).
    pub fn host_subnets(&self, net: &str, node: &str) -> &'a [IpNet] {
        self.allocations
            .host_subnets
            .get(net)
            .and_then(|m| m.get(node))
            .map(|s| &**s)
            .unwrap_or(&[])
    }
}

/// A node of the inventory (its name and what was read of it) with its id, whether it
/// is in the zone and its transit addresses, when it has an id ([`Inputs::nodes`]).
type Walked<'a> = (&'a String, &'a NodeInfo, Option<(u32, bool, &'a [IpNet])>);

/// The view of node `name` (`node`) with what the builders read of it beside.
fn view<'a>(
    name: &'a str,
    node: &'a NodeInfo,
    id: u32,
    local: bool,
    transit: &'a [IpNet],
    digest: NodeDigest,
) -> NodeView<'a> {
    NodeView {
        name,
        id,
        local,
        chassis: node.chassis_id.as_deref(),
        transit,
        gateway: node.gateway.as_ref(),
        host_addresses: &node.host_addresses,
        gateway_mtu: node.gateway_mtu,
        facts: node.facts,
        digest,
    }
}

/// The reconcile key of a network's rows.
pub(crate) fn network_owner(net: &Network) -> Owner {
    Owner {
        controller: names::Names::new(&net.name()).controller(),
        kind: net.owner.kind().to_owned(),
        name: net.owner.qualified_name(),
    }
}

/// The rows of network `name` for the inputs' zone: its Layer3 or Layer2 topology. A
/// secondary or Localnet network wants no rows (netconnect programs primary networks
/// only).
pub fn network(inputs: &Inputs, name: &str) -> Result<Desired, BuildError> {
    network_with(inputs, name, &desired::NoFragments)
}

/// [`network`], leaving out the fragments `known` says are in the NB as built before:
/// a network's rows for each node are a fragment of their own.
pub(crate) fn network_with(
    inputs: &Inputs,
    name: &str,
    known: &dyn desired::Fragments,
) -> Result<Desired, BuildError> {
    let info = inputs
        .inventory
        .networks
        .get(name)
        .ok_or_else(|| BuildError::Unknown(name.to_owned()))?;
    let net = &info.network;
    let mut desired = Desired::new(network_owner(net));
    if net.role != Role::Primary {
        return Ok(desired);
    }
    let id = *inputs
        .allocations
        .network_ids
        .get(name)
        .ok_or_else(|| BuildError::NoNetworkId(name.to_owned()))?;
    match net.topology {
        Topology::Layer3 => layer3::build(inputs, net, id, &mut desired, known),
        Topology::Layer2 => layer2::build(inputs, net, id, &mut desired, known)?,
        Topology::Localnet => {}
    }
    Ok(desired)
}

/// The networks with the same inputs in `a` and `b`, so that [`network_with`] builds
/// the same rows from both (whatever fragments are known): the settings and the zone,
/// the nodes as the builders see them and the default services a network routes (for
/// all networks at once), and each network's definition, id, host subnets, tunnel keys
/// and transit subnets.
pub(crate) fn unchanged_networks(a: &Inputs, b: &Inputs) -> std::collections::BTreeSet<String> {
    let shared = a.config == b.config
        && a.zone == b.zone
        && a.nodes() == b.nodes()
        && a.allowed_default_services() == b.allowed_default_services();
    if !shared {
        return Default::default();
    }
    let (x, y) = (a.allocations, b.allocations);
    b.inventory
        .networks
        .iter()
        .filter(|(name, info)| {
            let name = name.as_str();
            a.inventory
                .networks
                .get(name)
                .is_some_and(|i| i.network == info.network)
                && x.network_ids.get(name) == y.network_ids.get(name)
                && same_host_subnets(x.host_subnets.get(name), y.host_subnets.get(name))
                && x.tunnel_keys.get(name) == y.tunnel_keys.get(name)
                && x.transit_subnets.get(name) == y.transit_subnets.get(name)
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// True when two networks' host subnets are the same: the same map when a world kept
/// an unchanged network's (told without walking 500 nodes' subnets for each of 500
/// networks on every world change), else compared.
fn same_host_subnets(
    a: Option<&crate::alloc::HostSubnets>,
    b: Option<&crate::alloc::HostSubnets>,
) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.ptr_eq(b) || a == b,
        (None, None) => true,
        _ => false,
    }
}

/// The masquerade IP of network `id` for its gateway router (`gateway = true`) or
/// management port: the masquerade subnet's address `10 + 2·id − 1` or `10 + 2·id`
/// (OVN-Kubernetes' generator/udn/masquerade_ips.go).
pub fn masquerade_ip(
    config: &TopologyConfig,
    id: u32,
    ipv4: bool,
    gateway: bool,
) -> Option<IpAddr> {
    let subnet = masquerade_subnet(config, ipv4)?;
    let n = 10 + 2 * id as u128 - u128::from(gateway);
    addr::nth(subnet, n)
}

/// The masquerade subnet's dummy next hop (`…4`), the GR's route back to the host.
pub(crate) fn masquerade_next_hop(config: &TopologyConfig, ipv4: bool) -> Option<(IpNet, IpAddr)> {
    let subnet = masquerade_subnet(config, ipv4)?;
    Some((*subnet, addr::nth(subnet, 4)?))
}

/// The host's masquerade address (`…2`), where the host's traffic to services comes
/// from on the gateway bridge.
pub(crate) fn masquerade_host_ip(config: &TopologyConfig, ipv4: bool) -> Option<IpAddr> {
    addr::nth(masquerade_subnet(config, ipv4)?, 2)
}

/// The host's masquerade address for `externalTrafficPolicy: Local` NodePorts (`…3`).
pub(crate) fn masquerade_etp_local_ip(config: &TopologyConfig, ipv4: bool) -> Option<IpAddr> {
    addr::nth(masquerade_subnet(config, ipv4)?, 3)
}

fn masquerade_subnet(config: &TopologyConfig, ipv4: bool) -> Option<&IpNet> {
    config
        .masquerade_subnets
        .iter()
        .find(|s| s.addr().is_ipv4() == ipv4)
}

#[cfg(test)]
mod tests {
    use crate::ovnk::in_step;
    use std::collections::BTreeMap;

    #[test]
    fn a_map_walked_in_step_gives_each_name_its_value_and_none_to_names_it_lacks() {
        let map: BTreeMap<String, u32> = [("b", 2), ("d", 4), ("e", 5), ("g", 7)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        let mut walk = map.iter().peekable();
        // Names in order: some the map lacks, some of its entries passed over unasked.
        let got: Vec<(&str, Option<u32>)> = ["a", "b", "c", "e", "f", "g", "h"]
            .into_iter()
            .map(|n| (n, in_step(&mut walk, n).copied()))
            .collect();
        assert_eq!(
            got,
            [
                ("a", None),
                ("b", Some(2)),
                ("c", None),
                ("e", Some(5)),
                ("f", None),
                ("g", Some(7)),
                ("h", None),
            ]
        );
        assert!(walk.peek().is_none(), "the walk went through the whole map");
    }
}
