//! OVN-Kubernetes' names for a network's NB objects (docs/ovn-kubernetes.md §1.1–1.3). Routers and
//! switches are named with the network's *prefix* (`-` and `/` replaced by `.`, then
//! `_`); ClusterNetworkConnect ports use the raw network name.

/// The NB object prefix of network `net`: `red-network` → `red.network_`.
pub fn prefix(net: &str) -> String {
    let mut p: String = net
        .chars()
        .map(|c| if c == '-' || c == '/' { '.' } else { c })
        .collect();
    p.push('_');
    p
}

/// The names of one network's objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Names {
    /// The network name, e.g. `red_net1`.
    pub net: String,
    /// Its prefix, e.g. `red_net1_`.
    pub prefix: String,
}

impl Names {
    /// The names of network `net`.
    pub fn new(net: &str) -> Names {
        Names {
            net: net.to_owned(),
            prefix: prefix(net),
        }
    }

    /// `<prefix>ovn_cluster_router` (Layer3).
    pub(crate) fn cluster_router(&self) -> String {
        format!("{}ovn_cluster_router", self.prefix)
    }

    /// `<prefix>transit_router` (Layer2, OKEP-5094).
    pub(crate) fn transit_router(&self) -> String {
        format!("{}transit_router", self.prefix)
    }

    /// `<prefix><node>`: a Layer3 node switch.
    pub(crate) fn node_switch(&self, node: &str) -> String {
        format!("{}{node}", self.prefix)
    }

    /// `<prefix>ovn_layer2_switch`.
    pub(crate) fn layer2_switch(&self) -> String {
        format!("{}ovn_layer2_switch", self.prefix)
    }

    /// `<prefix>join`.
    pub(crate) fn join_switch(&self) -> String {
        format!("{}join", self.prefix)
    }

    /// `<prefix>transit_switch` (Layer3 interconnect).
    pub(crate) fn transit_switch(&self) -> String {
        format!("{}transit_switch", self.prefix)
    }

    /// `GR_<prefix><node>`.
    pub fn gateway_router(&self, node: &str) -> String {
        format!("GR_{}{node}", self.prefix)
    }

    /// `ext_<prefix><node>`.
    pub(crate) fn external_switch(&self, node: &str) -> String {
        format!("ext_{}{node}", self.prefix)
    }

    /// `rtos-<prefix><node>`: cluster router to node switch.
    pub fn rtos(&self, node: &str) -> String {
        format!("rtos-{}{node}", self.prefix)
    }

    /// `stor-<prefix><node>`: node switch to cluster router.
    pub fn stor(&self, node: &str) -> String {
        format!("stor-{}{node}", self.prefix)
    }

    /// `trtos-<prefix>ovn_layer2_switch`: transit router to the Layer2 switch.
    pub fn trtos(&self) -> String {
        format!("trtos-{}", self.layer2_switch())
    }

    /// `stotr-<prefix>ovn_layer2_switch`: Layer2 switch to transit router.
    pub(crate) fn stotr(&self) -> String {
        format!("stotr-{}", self.layer2_switch())
    }

    /// `rtoj-<prefix>ovn_cluster_router`: cluster router to join switch.
    pub(crate) fn rtoj_cluster(&self) -> String {
        format!("rtoj-{}", self.cluster_router())
    }

    /// `jtor-<prefix>ovn_cluster_router`: join switch to cluster router.
    pub(crate) fn jtor_cluster(&self) -> String {
        format!("jtor-{}", self.cluster_router())
    }

    /// `rtoj-GR_<prefix><node>`: gateway router to join switch.
    pub(crate) fn rtoj_gateway(&self, node: &str) -> String {
        format!("rtoj-{}", self.gateway_router(node))
    }

    /// `jtor-GR_<prefix><node>`: join switch to gateway router.
    pub(crate) fn jtor_gateway(&self, node: &str) -> String {
        format!("jtor-{}", self.gateway_router(node))
    }

    /// `rtotr-GR_<prefix><node>`: gateway router to transit router (Layer2).
    pub(crate) fn rtotr(&self, node: &str) -> String {
        format!("rtotr-{}", self.gateway_router(node))
    }

    /// `trtor-GR_<prefix><node>`: transit router to gateway router (Layer2).
    pub fn trtor(&self, node: &str) -> String {
        format!("trtor-{}", self.gateway_router(node))
    }

    /// `rtoe-GR_<prefix><node>`: gateway router to external switch.
    pub fn rtoe(&self, node: &str) -> String {
        format!("rtoe-{}", self.gateway_router(node))
    }

    /// `etor-GR_<prefix><node>`: external switch to gateway router.
    pub(crate) fn etor(&self, node: &str) -> String {
        format!("etor-{}", self.gateway_router(node))
    }

    /// `<bridge>_<prefix><node>`: the localnet port of the external switch.
    pub(crate) fn localnet_port(&self, bridge: &str, node: &str) -> String {
        format!("{bridge}_{}{node}", self.prefix)
    }

    /// `<prefix>rtots-<node>`: cluster router to transit switch. The prefix comes
    /// first here, unlike `rtos-`.
    pub(crate) fn rtots(&self, node: &str) -> String {
        format!("{}rtots-{node}", self.prefix)
    }

    /// `<prefix>tstor-<node>`: transit switch to cluster router (or the remote node's
    /// port).
    pub(crate) fn tstor(&self, node: &str) -> String {
        format!("{}tstor-{node}", self.prefix)
    }

    /// `k8s-<prefix><node>`: the management port.
    pub(crate) fn management_port(&self, node: &str) -> String {
        format!("k8s-{}{node}", self.prefix)
    }

    /// `<prefix>clusterLBGroup`.
    pub(crate) fn cluster_lb_group(&self) -> String {
        format!("{}clusterLBGroup", self.prefix)
    }

    /// `<prefix>clusterSwitchLBGroup`.
    pub(crate) fn cluster_switch_lb_group(&self) -> String {
        format!("{}clusterSwitchLBGroup", self.prefix)
    }

    /// `<prefix>clusterRouterLBGroup`.
    pub(crate) fn cluster_router_lb_group(&self) -> String {
        format!("{}clusterRouterLBGroup", self.prefix)
    }

    /// `<netName>-network-controller`: the controller OVN-Kubernetes names as the owner
    /// of a network's rows.
    pub fn controller(&self) -> String {
        format!("{}-network-controller", self.net)
    }
}

/// OVN-Kubernetes' hashed name for a row id (`HashForOVN`: port groups, address
/// sets): `a` and the decimal FNV-1a 64-bit hash of the id.
pub(crate) fn hash_name(id: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("a{h}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_replace_dashes_and_slashes() {
        assert_eq!(prefix("red-network"), "red.network_");
        assert_eq!(
            prefix("cluster_udn_blue-network"),
            "cluster_udn_blue.network_"
        );
        assert_eq!(prefix("isolatednet"), "isolatednet_");
        assert_eq!(prefix("ns/a-b"), "ns.a.b_");
    }

    #[test]
    fn names_follow_the_reference_tables() {
        let n = Names::new("isolatednet");
        assert_eq!(n.cluster_router(), "isolatednet_ovn_cluster_router");
        assert_eq!(n.rtos("test-node"), "rtos-isolatednet_test-node");
        assert_eq!(n.rtots("test-node"), "isolatednet_rtots-test-node");
        assert_eq!(n.tstor("test-node"), "isolatednet_tstor-test-node");
        assert_eq!(n.rtoj_cluster(), "rtoj-isolatednet_ovn_cluster_router");
        assert_eq!(n.gateway_router("n1"), "GR_isolatednet_n1");
        assert_eq!(n.trtos(), "trtos-isolatednet_ovn_layer2_switch");
        assert_eq!(n.trtor("test-node"), "trtor-GR_isolatednet_test-node");
        assert_eq!(n.rtotr("test-node"), "rtotr-GR_isolatednet_test-node");
        assert_eq!(n.localnet_port("breth0", "n1"), "breth0_isolatednet_n1");
        assert_eq!(n.management_port("n1"), "k8s-isolatednet_n1");
        assert_eq!(
            n.cluster_switch_lb_group(),
            "isolatednet_clusterSwitchLBGroup"
        );
        assert_eq!(n.controller(), "isolatednet-network-controller");
    }
}
