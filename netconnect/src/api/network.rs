//! A user-defined network once its spec is validated: what the topology builders read.
//!
//! A UserDefinedNetwork `red/net1` is network `red_net1`; a ClusterUserDefinedNetwork
//! `blue` is network `cluster_udn_blue` (OVN-Kubernetes' names, which every NB row of
//! the network is named after).

use std::net::IpAddr;

use ipnet::IpNet;

use super::objects::{Role, Topology};

/// Which object defines a network.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NetworkOwner {
    /// A namespaced UserDefinedNetwork.
    UserDefinedNetwork {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A ClusterUserDefinedNetwork.
    ClusterUserDefinedNetwork {
        /// Its name.
        name: String,
    },
}

impl NetworkOwner {
    /// The kind, as in `kind:`.
    pub fn kind(&self) -> &'static str {
        match self {
            NetworkOwner::UserDefinedNetwork { .. } => "UserDefinedNetwork",
            NetworkOwner::ClusterUserDefinedNetwork { .. } => "ClusterUserDefinedNetwork",
        }
    }

    /// `namespace/name` or `name`.
    pub(crate) fn qualified_name(&self) -> String {
        match self {
            NetworkOwner::UserDefinedNetwork { namespace, name } => format!("{namespace}/{name}"),
            NetworkOwner::ClusterUserDefinedNetwork { name } => name.clone(),
        }
    }

    /// The network's name in OVN-Kubernetes: `<namespace>_<name>` for a UDN,
    /// `cluster_udn_<name>` for a CUDN.
    pub(crate) fn network_name(&self) -> String {
        match self {
            NetworkOwner::UserDefinedNetwork { namespace, name } => format!("{namespace}_{name}"),
            NetworkOwner::ClusterUserDefinedNetwork { name } => format!("cluster_udn_{name}"),
        }
    }
}

impl std::fmt::Display for NetworkOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind(), self.qualified_name())
    }
}

/// One cluster subnet and the prefix length of the host subnets cut from it. For a
/// Layer2 network the host length is the subnet's own (there is one subnet for all).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterSubnet {
    /// The subnet, masked.
    pub cidr: IpNet,
    /// The host subnets' prefix length.
    pub(crate) host_len: u8,
}

/// The default MTU of a user-defined network.
pub(crate) const DEFAULT_MTU: u32 = 1400;
/// The default IPv4 join subnet of user-defined networks.
pub(crate) const DEFAULT_JOIN_V4: &str = "100.65.0.0/16";
/// The default IPv6 join subnet of user-defined networks.
pub(crate) const DEFAULT_JOIN_V6: &str = "fd99::/64";
/// The cluster's service CIDR when none is configured (`--service-cidr`).
pub(crate) const DEFAULT_SERVICE_CIDR: &str = "10.96.0.0/16";
/// The masquerade subnets (IPv4, IPv6): OVN-Kubernetes' defaults.
pub(crate) const DEFAULT_MASQUERADE: [&str; 2] = ["169.254.0.0/17", "fd69::/112"];

/// The cluster defaults above, parsed.
pub(crate) fn default_service_cidrs() -> Vec<ipnet::IpNet> {
    vec![DEFAULT_SERVICE_CIDR.parse().expect("constant")]
}

/// The default network's cluster subnets (OVN-Kubernetes' `--cluster-subnets`
/// default, `10.128.0.0/14`): user-defined networks and connect subnets stay out of
/// them.
pub(crate) const DEFAULT_CLUSTER_SUBNETS: [&str; 1] = ["10.128.0.0/14"];
/// The default network's join subnets (OVN-Kubernetes' `--gateway-v4-join-subnet` and
/// `--gateway-v6-join-subnet` defaults).
pub(crate) const DEFAULT_NETWORK_JOIN: [&str; 2] = ["100.64.0.0/16", "fd98::/64"];

/// [`DEFAULT_CLUSTER_SUBNETS`], parsed.
pub(crate) fn default_cluster_subnets() -> Vec<ipnet::IpNet> {
    parse_all(&DEFAULT_CLUSTER_SUBNETS)
}

/// [`DEFAULT_NETWORK_JOIN`], parsed.
pub(crate) fn default_network_join() -> Vec<ipnet::IpNet> {
    parse_all(&DEFAULT_NETWORK_JOIN)
}

fn parse_all(cidrs: &[&str]) -> Vec<ipnet::IpNet> {
    cidrs.iter().map(|c| c.parse().expect("constant")).collect()
}

/// [`DEFAULT_MASQUERADE`], parsed.
pub(crate) fn default_masquerade() -> Vec<ipnet::IpNet> {
    DEFAULT_MASQUERADE
        .iter()
        .map(|m| m.parse().expect("constant"))
        .collect()
}

/// A validated network definition.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Network {
    /// The object that defines it.
    pub owner: NetworkOwner,
    /// Layer3 or Layer2 (Localnet networks are accepted but not programmed).
    pub topology: Topology,
    /// Primary or Secondary.
    pub role: Role,
    /// MTU.
    pub(crate) mtu: u32,
    /// Cluster subnets in spec order (IPv4 and IPv6 interleaved as written).
    pub subnets: Vec<ClusterSubnet>,
    /// Join subnets, IPv4 first.
    pub(crate) join_subnets: Vec<IpNet>,
    /// Layer2: the gateway address of each family, if given.
    pub(crate) default_gateway_ips: Vec<IpAddr>,
    /// Layer2: the subnets the gateway and management addresses come from, if given.
    pub(crate) infrastructure_subnets: Vec<IpNet>,
    /// `Geneve` unless the spec says otherwise.
    pub transport: String,
}

impl Network {
    /// The network's OVN-Kubernetes name (see `NetworkOwner::network_name`).
    pub fn name(&self) -> String {
        self.owner.network_name()
    }

    /// True when the network has IPv4 subnets.
    pub(crate) fn has_ipv4(&self) -> bool {
        self.subnets.iter().any(|s| s.cidr.addr().is_ipv4())
    }

    /// True when the network has IPv6 subnets.
    pub(crate) fn has_ipv6(&self) -> bool {
        self.subnets.iter().any(|s| s.cidr.addr().is_ipv6())
    }

    /// The cluster subnets of one family, in spec order.
    pub(crate) fn subnets_of(&self, ipv4: bool) -> impl Iterator<Item = &ClusterSubnet> {
        self.subnets
            .iter()
            .filter(move |s| s.cidr.addr().is_ipv4() == ipv4)
    }

    /// The join subnets of the families the network has, IPv4 first.
    pub(crate) fn join_subnets_in_use(&self) -> Vec<IpNet> {
        self.join_subnets
            .iter()
            .filter(|j| {
                if j.addr().is_ipv4() {
                    self.has_ipv4()
                } else {
                    self.has_ipv6()
                }
            })
            .copied()
            .collect()
    }
}
