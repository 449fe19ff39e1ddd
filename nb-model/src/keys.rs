//! Well-known keys of `options`, `other_config` and `external_ids` columns, as ovn-nb(5)
//! documents them and OVN-Kubernetes uses them.

/// Keys of `Logical_Switch_Port.options`.
pub mod lsp_options {
    /// For a `router` port: the name of the Logical_Router_Port it connects to.
    pub const ROUTER_PORT: &str = "router-port";
    /// The chassis the port must be bound on.
    pub const REQUESTED_CHASSIS: &str = "requested-chassis";
    /// The tunnel key to give the port instead of an allocated one.
    pub const REQUESTED_TNL_KEY: &str = "requested-tnl-key";
    /// For a `router` port: addresses to answer ARP for (`router` or explicit ones).
    pub const NAT_ADDRESSES: &str = "nat-addresses";
    /// For a `localnet` port: the physical network's name in ovn-bridge-mappings.
    pub const NETWORK_NAME: &str = "network_name";
    /// The interface id version the port must match (OVN-Kubernetes sets it).
    pub const IFACE_ID_VER: &str = "iface-id-ver";
}

/// Keys of `Logical_Router_Port.options`.
pub mod lrp_options {
    /// Largest packet size before the router sends ICMP "fragmentation needed".
    pub const GATEWAY_MTU: &str = "gateway_mtu";
    /// The chassis the port is bound on; a remote chassis makes it a transit router
    /// port (OVN 25.03 and later).
    pub const REQUESTED_CHASSIS: &str = "requested-chassis";
    /// The tunnel key to give the port instead of an allocated one.
    pub const REQUESTED_TNL_KEY: &str = "requested-tnl-key";
    /// How traffic reaches a distributed gateway port's chassis (`overlay` or `bridged`).
    pub const REDIRECT_TYPE: &str = "redirect-type";
    /// Whether multicast traffic is flooded out of the port.
    pub const MCAST_FLOOD: &str = "mcast_flood";
}

/// Keys of `Logical_Router.options`.
pub mod lr_options {
    /// Binds the router to one chassis, making it a gateway router.
    pub const CHASSIS: &str = "chassis";
    /// The tunnel key to give the router's datapath.
    pub const REQUESTED_TNL_KEY: &str = "requested-tnl-key";
    /// Whether to learn MAC bindings from every ARP request or only from replies.
    pub const ALWAYS_LEARN_FROM_ARP_REQUEST: &str = "always_learn_from_arp_request";
    /// Only resolve neighbors of these routers dynamically.
    pub const DYNAMIC_NEIGH_ROUTERS: &str = "dynamic_neigh_routers";
    /// SNAT load-balanced traffic to this address.
    pub const LB_FORCE_SNAT_IP: &str = "lb_force_snat_ip";
}

/// Keys of `Logical_Switch.other_config`.
pub mod ls_other_config {
    /// The IPv4 subnet dynamic addresses are taken from.
    pub const SUBNET: &str = "subnet";
    /// The IPv6 prefix dynamic addresses are taken from.
    pub const IPV6_PREFIX: &str = "ipv6_prefix";
    /// Addresses of the subnet never given out dynamically.
    pub const EXCLUDE_IPS: &str = "exclude_ips";
    /// Enables IGMP/MLD snooping.
    pub const MCAST_SNOOP: &str = "mcast_snoop";
    /// The tunnel key to give the switch's datapath.
    pub const REQUESTED_TNL_KEY: &str = "requested-tnl-key";
    /// Makes the switch an interconnect transit switch of this name.
    pub const INTERCONN_TS: &str = "interconn-ts";
    /// Whether the switch sends IGMP/MLD queries itself.
    pub const MCAST_QUERIER: &str = "mcast_querier";
    /// Whether unregistered multicast traffic is flooded.
    pub const MCAST_FLOOD_UNREGISTERED: &str = "mcast_flood_unregistered";
}

/// Keys of `NAT.options`.
pub mod nat_options {
    /// Whether the NAT is stateless.
    pub const STATELESS: &str = "stateless";
}

/// Keys of `Logical_Switch_Port.external_ids` OVN-Kubernetes writes on a transit
/// switch's ports.
pub mod lsp_external_ids {
    /// The node a transit switch port leads to.
    pub const NODE: &str = "node";
}

/// Keys OVN-Kubernetes writes in `external_ids` to tell which network and topology a
/// row belongs to.
pub mod ovn_k8s {
    /// The network's name (`namespace_name` for a user-defined network).
    pub const NETWORK: &str = "k8s.ovn.org/network";
    /// The network's topology: `layer2`, `layer3` or `localnet`.
    pub const TOPOLOGY: &str = "k8s.ovn.org/topology";
    /// The network's role: `primary` or `secondary`.
    pub const ROLE: &str = "k8s.ovn.org/role";
    /// The node a per-node row belongs to.
    pub const NODE: &str = "k8s.ovn.org/node";
    /// On a primary network's route to one of the default network's services it may
    /// reach: that service's `namespace/name`.
    pub const UDN_ENABLED_SERVICE: &str = "k8s.ovn.org/udn-enabled-default-service";
}
