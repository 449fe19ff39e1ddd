//! What OVN-Kubernetes writes for every primary network that its network policies
//! build on (docs/ovn-kubernetes.md §2; `setupClusterPortGroups`,
//! `syncNodeManagementPort` and `addAllowACLFromNode` of OVN-Kubernetes'
//! `base_network_controller*.go`), under owners of its own rather than the network's
//! (`ownership::network_of_alias`):
//!
//! - two cluster-wide port groups, owner type `Cluster`: `clusterPortGroup`, which
//!   holds every management port of the zone, and `clusterRtrPortGroup`, empty without
//!   multicast; each named `a<FNV-1a 64>` of its id (`<controller>:Cluster:<name>`);
//! - per address of a management port, an ACL on the port's switch that lets what the
//!   node's host sends reach the pods whatever their policies (`ip4.src==<address>`,
//!   `to-lport`, priority 1001, `allow-related`, tier 2, meter `acl-logging`), owner
//!   type `NetpolNode` named after the switch, the address in `ip`.

use std::collections::BTreeMap;

use ipnet::IpNet;
use nb_model::{Acl, AclAction, AclDirection, LogicalSwitchPort, PortGroup};
use ovsdb_proto::model::Ref;

use super::builder::NetworkBuilder;
use super::cluster::ACL_LOGGING_METER;
use super::rows::ip_match_family;
use crate::ovnk::names::hash_name;
use crate::ovnk::ownership::{network_alias, NETPOL_NODE_KIND, PORT_GROUP_CLUSTER_KIND};

/// The name of the cluster port group holding every management port.
pub const CLUSTER_PORT_GROUP: &str = "clusterPortGroup";
/// The name of the cluster port group of the switches' router ports (multicast's).
pub const CLUSTER_RTR_PORT_GROUP: &str = "clusterRtrPortGroup";

/// The priority of the allow-from-node ACL (OVN-Kubernetes' `DefaultAllowPriority`).
pub const ALLOW_FROM_NODE_PRIORITY: i64 = 1001;
/// The tier of the allow-from-node ACL (OVN-Kubernetes' `DefaultACLTier`).
pub const ALLOW_FROM_NODE_TIER: i64 = 2;
/// `external_ids` key of the allow-from-node ACL: the management port's address.
pub(crate) const IP: &str = "ip";

/// The port group `name` of the network whose controller is `controller`, as
/// OVN-Kubernetes names it: `a<FNV-1a 64>` of `<controller>:Cluster:<name>`.
pub fn port_group_name(controller: &str, name: &str) -> String {
    hash_name(&format!("{controller}:{PORT_GROUP_CLUSTER_KIND}:{name}"))
}

impl NetworkBuilder<'_> {
    /// The allow-from-node ACLs of a management port with `addresses` on `switch`, for
    /// the switch's `acls`.
    pub(crate) fn allow_from_node(&mut self, switch: &str, addresses: &[IpNet]) -> Vec<Ref<Acl>> {
        let owner = network_alias(&self.d.owner, NETPOL_NODE_KIND, switch);
        addresses
            .iter()
            .map(|a| {
                let ip = a.addr();
                let acl = Acl {
                    priority: ALLOW_FROM_NODE_PRIORITY,
                    action: AclAction::AllowRelated,
                    direction: AclDirection::ToLport,
                    match_: format!("{}.src=={ip}", ip_match_family(ip.is_ipv4())),
                    tier: ALLOW_FROM_NODE_TIER,
                    meter: Some(ACL_LOGGING_METER.into()),
                    external_ids: BTreeMap::from([(IP.into(), ip.to_string())]),
                    ..Default::default()
                };
                let id = format!("{owner}:{ip}");
                self.d.add_aliased(owner.clone(), id, acl)
            })
            .collect()
    }

    /// The two cluster port groups, `clusterPortGroup` holding `management_ports`.
    pub(crate) fn cluster_port_groups(
        &mut self,
        management_ports: impl IntoIterator<Item = Ref<LogicalSwitchPort>>,
    ) {
        let mut ports = Some(management_ports.into_iter().collect());
        for name in [CLUSTER_PORT_GROUP, CLUSTER_RTR_PORT_GROUP] {
            let owner = network_alias(&self.d.owner, PORT_GROUP_CLUSTER_KIND, name);
            let id = owner.to_string();
            let group = PortGroup {
                name: hash_name(&id),
                ports: match name {
                    CLUSTER_PORT_GROUP => ports.take().unwrap_or_default(),
                    _ => Default::default(),
                },
                ..Default::default()
            };
            self.d.add_aliased(owner, id, group);
        }
    }
}
