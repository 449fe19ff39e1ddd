//! A ClusterNetworkConnect's addresses and keys (docs/ovn-kubernetes.md §5.2–5.3).
//!
//! The cluster manager cuts each connected network's *connect subnets* out of the
//! CNC's `connectSubnets` (`ConnectAllocator`): a whole `/networkPrefix` block per
//! family for a Layer3 network (a point-to-point pair per node is taken from it), one
//! /31 (/127) for a Layer2 network, taken from a block shared by Layer2 networks. They
//! are annotated on the CNC under the network's owner key, `layer3_<id>` or
//! `layer2_<id>` (`owner_key`).
//!
//! Every zone then derives the rest from the annotation alone, so that zones agree
//! without talking ([`pair`], `port_tunnel_key`): the pair of node `n` is addresses
//! `2n` and `2n+1` of the network's block (the connect router takes the first), and the
//! connect router's port keys follow from the block's position in the connect subnet.

use std::collections::BTreeMap;

use ipnet::IpNet;

use super::subnets::{SubnetAllocator, SubnetError};
use crate::api::Topology;
use crate::ovnk::addr::{p2p_pair, to_u128, with_len};

/// OVN's highest tunnel key for a logical port with Geneve (15 bits); the default of
/// [`crate::topology::TopologyConfig::max_port_tunnel_key`].
pub(crate) const MAX_PORT_TUNNEL_KEY: u32 = 32767;

/// The highest number of nodes a block is sized for in the port key formula
/// (OVN-Kubernetes' node id limit).
pub(crate) const MAX_NODES_PER_BLOCK: u128 = 5000;

/// A connected network's key in the subnet annotation: `layer3_<id>` or `layer2_<id>`.
pub(crate) fn owner_key(topology: Topology, network_id: u32) -> String {
    match topology {
        Topology::Layer2 => format!("layer2_{network_id}"),
        _ => format!("layer3_{network_id}"),
    }
}

/// The topology and network id an owner key names.
pub(crate) fn parse_owner_key(key: &str) -> Option<(Topology, u32)> {
    let (topology, id) = match key.split_once('_')? {
        ("layer3", id) => (Topology::Layer3, id),
        ("layer2", id) => (Topology::Layer2, id),
        _ => return None,
    };
    Some((topology, id.parse().ok()?))
}

/// Why a connect subnet could not be had or kept.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ConnectAllocError {
    /// No block (or no Layer2 pair) is left in a family.
    #[error("no connect subnet left in {0}")]
    Exhausted(String),
    /// An annotated subnet is not one this CNC hands out.
    #[error("{subnet} of {owner} is not a connect subnet of this ClusterNetworkConnect: {why}")]
    Foreign {
        /// The owner key.
        owner: String,
        /// The subnet.
        subnet: IpNet,
        /// Why.
        why: SubnetError,
    },
    /// The owner key is not `layer3_<id>` or `layer2_<id>`.
    #[error("{0:?} is not a network owner key (layer3_<id> or layer2_<id>)")]
    BadOwner(String),
}

/// A block of the connect subnets split into Layer2 pairs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Layer2Block {
    /// The `/networkPrefix` block of each family, IPv4 first.
    parents: Vec<IpNet>,
    pairs: SubnetAllocator,
    owners: usize,
}

/// The connect subnets of one CNC: which block or pair each network has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ConnectAllocator {
    /// The CNC's connect subnets with their network prefix, IPv4 first.
    connect_subnets: Vec<(IpNet, u8)>,
    blocks: SubnetAllocator,
    layer2: Vec<Layer2Block>,
    owners: BTreeMap<String, Vec<IpNet>>,
}

fn pair_len(net: &IpNet) -> u8 {
    if net.addr().is_ipv4() {
        31
    } else {
        127
    }
}

impl ConnectAllocator {
    /// An allocator over `connect_subnets` (each with its network prefix).
    pub fn new(connect_subnets: &[(IpNet, u8)]) -> ConnectAllocator {
        let mut blocks = SubnetAllocator::new();
        let mut sorted = connect_subnets.to_vec();
        sorted.sort_by_key(|(n, _)| n.addr().is_ipv6());
        for (net, prefix) in &sorted {
            blocks.add_range(*net, *prefix);
        }
        ConnectAllocator {
            connect_subnets: sorted,
            blocks,
            layer2: Vec::new(),
            owners: BTreeMap::new(),
        }
    }

    /// Every owner's subnets.
    pub fn allocations(&self) -> &BTreeMap<String, Vec<IpNet>> {
        &self.owners
    }

    fn families(&self) -> Vec<bool> {
        self.connect_subnets
            .iter()
            .map(|(n, _)| n.addr().is_ipv4())
            .collect()
    }

    fn block_of(&self, subnet: &IpNet) -> Option<IpNet> {
        let (_, prefix) = self
            .connect_subnets
            .iter()
            .find(|(n, _)| n.addr().is_ipv4() == subnet.addr().is_ipv4())?;
        Some(with_len(subnet.addr(), *prefix).trunc())
    }

    /// Records `subnets` as `owner`'s (read from the annotation).
    pub(crate) fn mark(&mut self, owner: &str, subnets: &[IpNet]) -> Result<(), ConnectAllocError> {
        let (topology, _) =
            parse_owner_key(owner).ok_or_else(|| ConnectAllocError::BadOwner(owner.into()))?;
        let foreign = |subnet: IpNet, why: SubnetError| ConnectAllocError::Foreign {
            owner: owner.into(),
            subnet,
            why,
        };
        match topology {
            Topology::Layer2 => {
                let mut parents = Vec::new();
                for s in subnets {
                    if s.prefix_len() != pair_len(s) {
                        return Err(foreign(*s, SubnetError::Foreign(*s)));
                    }
                    parents.push(
                        self.block_of(s)
                            .ok_or_else(|| foreign(*s, SubnetError::Foreign(*s)))?,
                    );
                }
                let at = match self.layer2.iter().position(|b| b.parents == parents) {
                    Some(at) => at,
                    None => {
                        for p in &parents {
                            self.blocks.mark(p).map_err(|e| foreign(*p, e))?;
                        }
                        self.layer2.push(new_block(parents));
                        self.layer2.len() - 1
                    }
                };
                let block = &mut self.layer2[at];
                for s in subnets {
                    block.pairs.mark(s).map_err(|e| foreign(*s, e))?;
                }
                block.owners += 1;
            }
            _ => {
                for s in subnets {
                    self.blocks.mark(s).map_err(|e| foreign(*s, e))?;
                }
            }
        }
        self.owners.insert(owner.to_owned(), subnets.to_vec());
        Ok(())
    }

    /// Hands `owner` its subnets (one per family of the connect subnets); an owner that
    /// has them keeps them.
    pub fn allocate(&mut self, owner: &str) -> Result<Vec<IpNet>, ConnectAllocError> {
        if let Some(s) = self.owners.get(owner) {
            return Ok(s.clone());
        }
        let (topology, _) =
            parse_owner_key(owner).ok_or_else(|| ConnectAllocError::BadOwner(owner.into()))?;
        let subnets = match topology {
            Topology::Layer2 => self.allocate_layer2()?,
            _ => self.allocate_blocks()?,
        };
        self.owners.insert(owner.to_owned(), subnets.clone());
        Ok(subnets)
    }

    fn allocate_blocks(&mut self) -> Result<Vec<IpNet>, ConnectAllocError> {
        let mut out = Vec::new();
        for ipv4 in self.families() {
            match self.blocks.allocate(ipv4) {
                Ok(s) => out.push(s),
                Err(_) => {
                    for s in &out {
                        self.blocks.release(s);
                    }
                    return Err(ConnectAllocError::Exhausted(family_name(ipv4)));
                }
            }
        }
        Ok(out)
    }

    fn allocate_layer2(&mut self) -> Result<Vec<IpNet>, ConnectAllocError> {
        let families = self.families();
        for block in &mut self.layer2 {
            if let Some(pairs) = take_pairs(&mut block.pairs, &families) {
                block.owners += 1;
                return Ok(pairs);
            }
        }
        // Every block is full: a new one, from the blocks Layer3 networks take.
        let parents = self.allocate_blocks()?;
        let mut block = new_block(parents);
        let pairs = take_pairs(&mut block.pairs, &families)
            .ok_or_else(|| ConnectAllocError::Exhausted("a new Layer2 block".into()))?;
        block.owners = 1;
        self.layer2.push(block);
        Ok(pairs)
    }

    /// Frees `owner`'s subnets; a Layer2 block left without owners is freed too.
    pub fn release(&mut self, owner: &str) {
        let Some(subnets) = self.owners.remove(owner) else {
            return;
        };
        match parse_owner_key(owner) {
            Some((Topology::Layer2, _)) => {
                let parents: Vec<IpNet> = subnets.iter().filter_map(|s| self.block_of(s)).collect();
                if let Some(at) = self.layer2.iter().position(|b| b.parents == parents) {
                    let block = &mut self.layer2[at];
                    for s in &subnets {
                        block.pairs.release(s);
                    }
                    block.owners = block.owners.saturating_sub(1);
                    if block.owners == 0 {
                        let block = self.layer2.remove(at);
                        for p in &block.parents {
                            self.blocks.release(p);
                        }
                    }
                }
            }
            _ => {
                for s in &subnets {
                    self.blocks.release(s);
                }
            }
        }
    }
}

fn new_block(parents: Vec<IpNet>) -> Layer2Block {
    let mut pairs = SubnetAllocator::new();
    for p in &parents {
        pairs.add_range(*p, pair_len(p));
    }
    Layer2Block {
        parents,
        pairs,
        owners: 0,
    }
}

/// One pair per family from `pairs`, or none (nothing taken) when a family is full.
fn take_pairs(pairs: &mut SubnetAllocator, families: &[bool]) -> Option<Vec<IpNet>> {
    let mut out = Vec::new();
    for &ipv4 in families {
        match pairs.allocate(ipv4) {
            Ok(s) => out.push(s),
            Err(_) => {
                for s in &out {
                    pairs.release(s);
                }
                return None;
            }
        }
    }
    Some(out)
}

fn family_name(ipv4: bool) -> String {
    if ipv4 { "IPv4" } else { "IPv6" }.into()
}

/// The point-to-point pairs of index `idx` (the node id for a Layer3 network, 0 for a
/// Layer2 network) in each of a network's connect subnets: (connect-router side,
/// network-router side), IPv4 first. `None` when a pair falls outside its subnet.
pub fn pair(subnets: &[IpNet], idx: u32) -> Option<Vec<(IpNet, IpNet)>> {
    let mut out: Vec<(IpNet, IpNet)> = subnets
        .iter()
        .map(|s| p2p_pair(&s.trunc(), idx as u128))
        .collect::<Option<_>>()?;
    out.sort_by_key(|(a, _)| a.addr().is_ipv6());
    Some(out)
}

/// The tunnel key of the connect router's port toward a network with connect subnets
/// `subnets`, for node `node_id` (Layer3) or the network's one port (Layer2,
/// `node_id` ignored). From the first subnet (IPv4 in dual stack) and the connect
/// subnet of its family: `index · maxNodes + n + 1`, where `index` is the block's
/// position in the connect subnet, `maxNodes = min(2^(bits − networkPrefix), 5000)`
/// (computed without overflow, unlike OVN-Kubernetes for IPv6 blocks of /64 or
/// larger) and `n` the node id, or for Layer2 the pair's position in its block.
/// `None` when the subnet is not inside a connect subnet or the key does not fit in
/// 32 bits.
pub(crate) fn port_tunnel_key(
    connect_subnets: &[(IpNet, u8)],
    topology: Topology,
    subnets: &[IpNet],
    node_id: u32,
) -> Option<u64> {
    let first = subnets
        .iter()
        .find(|s| s.addr().is_ipv4())
        .or(subnets.first())?;
    let (connect, prefix) = connect_subnets
        .iter()
        .find(|(c, _)| c.addr().is_ipv4() == first.addr().is_ipv4() && c.contains(first))?;
    let bits: u32 = if first.addr().is_ipv4() { 32 } else { 128 };
    let host = bits - *prefix as u32;
    let max_nodes = if host >= 13 {
        MAX_NODES_PER_BLOCK
    } else {
        (1u128 << host).min(MAX_NODES_PER_BLOCK)
    };
    let base = to_u128(first.network());
    let block = base >> host << host;
    let index = (block - to_u128(connect.network())) >> host;
    let n = match topology {
        Topology::Layer2 => (base - block) >> (bits - first.prefix_len() as u32),
        _ => node_id as u128,
    };
    let key = index.checked_mul(max_nodes)?.checked_add(n + 1)?;
    u64::try_from(key).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn strings(v: &[IpNet]) -> Vec<String> {
        v.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn owner_keys_round_trip() {
        assert_eq!(owner_key(Topology::Layer3, 1), "layer3_1");
        assert_eq!(owner_key(Topology::Layer2, 12), "layer2_12");
        assert_eq!(parse_owner_key("layer2_12"), Some((Topology::Layer2, 12)));
        assert_eq!(parse_owner_key("layer4_1"), None);
        assert_eq!(parse_owner_key("layer3_x"), None);
    }

    #[test]
    fn layer3_networks_take_blocks_and_layer2_networks_share_one() {
        // The OKEP's example: 192.168.0.0/16 in /24s.
        let mut a = ConnectAllocator::new(&[(net("192.168.0.0/16"), 24)]);
        assert_eq!(
            strings(&a.allocate("layer3_1").unwrap()),
            ["192.168.0.0/24"]
        );
        assert_eq!(
            strings(&a.allocate("layer2_2").unwrap()),
            ["192.168.1.0/31"]
        );
        assert_eq!(
            strings(&a.allocate("layer2_3").unwrap()),
            ["192.168.1.2/31"]
        );
        assert_eq!(
            strings(&a.allocate("layer3_4").unwrap()),
            ["192.168.2.0/24"]
        );
        assert_eq!(
            strings(&a.allocate("layer3_1").unwrap()),
            ["192.168.0.0/24"],
            "an owner keeps its block"
        );
        // The Layer2 block goes back when its last network does.
        a.release("layer2_2");
        a.release("layer2_3");
        let mut b = a.clone();
        b.mark("layer3_9", &[net("192.168.1.0/24")]).unwrap();
        assert!(matches!(
            a.mark("layer3_9", &[net("192.168.0.0/24")]),
            Err(ConnectAllocError::Foreign { .. })
        ));
    }

    #[test]
    fn annotations_restore_the_same_state() {
        let mut a = ConnectAllocator::new(&[(net("192.168.0.0/16"), 24), (net("fd00::/112"), 120)]);
        let l3 = a.allocate("layer3_1").unwrap();
        let l2 = a.allocate("layer2_2").unwrap();
        assert_eq!(strings(&l3), ["192.168.0.0/24", "fd00::/120"]);
        assert_eq!(strings(&l2), ["192.168.1.0/31", "fd00::100/127"]);
        let mut b = ConnectAllocator::new(&[(net("fd00::/112"), 120), (net("192.168.0.0/16"), 24)]);
        b.mark("layer2_2", &l2).unwrap();
        b.mark("layer3_1", &l3).unwrap();
        assert_eq!(
            b.allocate("layer2_5").unwrap(),
            a.allocate("layer2_5").unwrap()
        );
        assert_eq!(
            b.allocate("layer3_6").unwrap(),
            a.allocate("layer3_6").unwrap()
        );
    }

    #[test]
    fn exhaustion_is_reported_and_takes_nothing() {
        let mut a = ConnectAllocator::new(&[(net("192.168.0.0/23"), 24)]);
        a.allocate("layer3_1").unwrap();
        a.allocate("layer3_2").unwrap();
        assert_eq!(
            a.allocate("layer3_3").unwrap_err(),
            ConnectAllocError::Exhausted("IPv4".into())
        );
        assert_eq!(
            a.allocate("layer2_4").unwrap_err(),
            ConnectAllocError::Exhausted("IPv4".into())
        );
        a.release("layer3_1");
        assert_eq!(
            strings(&a.allocate("layer2_4").unwrap()),
            ["192.168.0.0/31"]
        );
    }

    #[test]
    fn pairs_give_the_connect_router_the_even_address() {
        let p = pair(&[net("192.168.0.0/24")], 2).unwrap();
        assert_eq!(
            (p[0].0.to_string(), p[0].1.to_string()),
            ("192.168.0.4/31".into(), "192.168.0.5/31".into())
        );
        let l2 = pair(&[net("fd00::100/127"), net("192.168.1.2/31")], 0).unwrap();
        assert_eq!(l2[0].0.to_string(), "192.168.1.2/31");
        assert_eq!(l2[1].1.to_string(), "fd00::101/127");
        assert_eq!(
            pair(&[net("192.168.0.0/24")], 128),
            None,
            "node id too high for a /24"
        );
    }

    #[test]
    fn port_keys_follow_the_block_position() {
        let c = [(net("192.168.0.0/16"), 24)];
        // maxNodes = 256 for /24: block 0 node 2 -> 3, block 2 node 3 -> 2·256 + 4.
        let key = |t, s: &str, n| port_tunnel_key(&c, t, &[net(s)], n).unwrap();
        assert_eq!(key(Topology::Layer3, "192.168.0.0/24", 2), 3);
        assert_eq!(key(Topology::Layer3, "192.168.2.0/24", 3), 516);
        // Layer2: pair position in the block: 192.168.1.6/31 is the 4th pair of block 1.
        assert_eq!(key(Topology::Layer2, "192.168.1.6/31", 0), 256 + 3 + 1);
        // IPv6 with /64 blocks: OVN-Kubernetes computes 1 << 64 = 0 here, we cap at 5000.
        let v6 = [(net("fd00::/48"), 64)];
        assert_eq!(
            port_tunnel_key(&v6, Topology::Layer3, &[net("fd00:0:0:3::/64")], 2),
            Some(3 * 5000 + 3)
        );
        // Dual stack: the IPv4 subnet decides.
        let ds = [(net("192.168.0.0/16"), 24), (net("fd00::/112"), 120)];
        assert_eq!(
            port_tunnel_key(
                &ds,
                Topology::Layer3,
                &[net("fd00::300/120"), net("192.168.1.0/24")],
                2
            ),
            Some(256 + 3)
        );
        assert_eq!(
            port_tunnel_key(&c, Topology::Layer3, &[net("10.0.0.0/24")], 2),
            None
        );
    }
}
