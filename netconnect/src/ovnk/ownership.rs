//! Who owns a row of the NB, in one place (OVN-Kubernetes keeps the same in
//! `libovsdb/ops/db_object_ids.go` and `db_object_types.go`): the `external_ids` keys a
//! row's owner is stamped with, the forms of a row's id, the owners netconnect writes
//! (and so may remove), how a ClusterNetworkConnect's rows are split between keys
//! (partitions), and the `external_ids` keys of those rows.
//!
//! The rules that use them are the planner's ([`crate::reconcile::planner`]): only rows
//! stamped with the key's owner are updated or deleted.

use std::collections::BTreeSet;

use ovsdb_proto::{Atom, Datum};

/// `external_ids` key: the controller that owns a row.
pub(crate) const OWNER_CONTROLLER: &str = "k8s.ovn.org/owner-controller";
/// `external_ids` key: the kind of object that owns a row.
pub(crate) const OWNER_TYPE: &str = "k8s.ovn.org/owner-type";
/// `external_ids` key: the name of the object that owns a row.
pub(crate) const OWNER_NAME: &str = "k8s.ovn.org/name";
/// `external_ids` key: a row's unique id.
pub(crate) const OWNER_ID: &str = "k8s.ovn.org/id";

/// A static MAC binding's identity in a key, and what the NB indexes find it by: its
/// port and address (the table's unique index), space-separated. The table has no
/// `external_ids`: a binding is a key's when it sits on one of the key's router ports.
pub(crate) fn binding_identity(port: &str, ip: &str) -> String {
    format!("{port} {ip}")
}

/// The port of a binding identity ([`binding_identity`]).
pub(crate) fn binding_port(identity: &str) -> &str {
    identity.split_once(' ').map_or(identity, |(port, _)| port)
}

/// Who owns a set of rows: one reconcile key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner {
    /// `k8s.ovn.org/owner-controller`.
    pub controller: String,
    /// `k8s.ovn.org/owner-type`.
    pub kind: String,
    /// `k8s.ovn.org/name`.
    pub name: String,
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.controller, self.kind, self.name)
    }
}

impl Owner {
    /// The `k8s.ovn.org/id` of the row `identity` of `table`.
    pub fn id(&self, table: &str, identity: &str) -> String {
        format!("{self}:{table}:{identity}")
    }

    /// The owner a row's `external_ids` name, if it carries all three keys.
    pub fn of(external_ids: &Datum) -> Option<Owner> {
        let get = |k: &str| {
            external_ids
                .get_str(k)
                .and_then(Atom::as_str)
                .map(str::to_owned)
        };
        Some(Owner {
            controller: get(OWNER_CONTROLLER)?,
            kind: get(OWNER_TYPE)?,
            name: get(OWNER_NAME)?,
        })
    }
}

/// How a key's rows' `k8s.ovn.org/id` is formed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum IdForm {
    /// `<controller>:<owner-type>:<name>:<table>:<identity>`: the form of the rows of
    /// netconnect's network keys.
    #[default]
    WithTable,
    /// `<controller>:<owner-type>:<name>:<identity>`: OVN-Kubernetes' `DbObjectIDs`
    /// form, the identity being the row's other id values joined by `:` (reference
    /// §1.4); unique per table.
    ObjectIds,
}

/// Which of its owner's rows a key holds (see [`crate::reconcile::nb`] on partitions).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    /// All of them, every partition included.
    #[default]
    All,
    /// Those of one partition.
    Part(String),
    /// Those outside any partition, and those of the partitions no other key holds
    /// now (`held`), which go.
    Rest {
        /// The partitions other keys hold.
        held: BTreeSet<String>,
    },
}

/// The name of the default COPP every network's routers refer to; the rows every
/// network refers to (it and its meters) are owned under this name.
pub(crate) const DEFAULT_COPP: &str = "ovnkube-default";

/// The controller of the rows every network refers to (the default COPP and meters).
pub(crate) const CLUSTER_CONTROLLER: &str = "default-network-controller";

/// The owner of the rows every network refers to (the default COPP, named so).
pub(crate) fn cluster_owner() -> Owner {
    Owner {
        controller: CLUSTER_CONTROLLER.into(),
        kind: "Cluster".into(),
        name: DEFAULT_COPP.into(),
    }
}

/// The controller that owns a ClusterNetworkConnect's rows.
pub(crate) const CONNECT_CONTROLLER: &str = "ovnkube-network-connect-controller";
/// The owner type of a ClusterNetworkConnect's rows (the value of [`OWNER_TYPE`]).
pub(crate) const CONNECT_OWNER_TYPE: &str = "ClusterNetworkConnect";

/// The owner of ClusterNetworkConnect `cnc`'s rows.
pub(crate) fn connect_owner(cnc: &str) -> Owner {
    Owner {
        controller: CONNECT_CONTROLLER.into(),
        kind: CONNECT_OWNER_TYPE.into(),
        name: cnc.into(),
    }
}

/// What a network's controller is called after its network:
/// `<network>-network-controller`.
pub(crate) const NETWORK_CONTROLLER_SUFFIX: &str = "-network-controller";

/// The owner type of a service's load balancers (written by its network's
/// controller).
pub(crate) const SERVICE_OWNER_TYPE: &str = "Service";

/// The owner of the rows of service `key` (`namespace/name`) on network `net`.
pub(crate) fn service_owner(key: &str, net: &str) -> Owner {
    Owner {
        controller: format!("{net}{NETWORK_CONTROLLER_SUFFIX}"),
        kind: SERVICE_OWNER_TYPE.into(),
        name: key.into(),
    }
}

/// For the owner of a network's own rows (owner type `UserDefinedNetwork` or
/// `ClusterUserDefinedNetwork`, controller `<network>-network-controller`), the network.
pub(crate) fn network_of_owner(owner: &Owner) -> Option<&str> {
    let net = owner.controller.strip_suffix(NETWORK_CONTROLLER_SUFFIX)?;
    matches!(
        owner.kind.as_str(),
        "UserDefinedNetwork" | "ClusterUserDefinedNetwork"
    )
    .then_some(net)
}

/// OVN-Kubernetes' owner type of a network's two cluster-wide port groups
/// (`PortGroupCluster`, `clusterPortGroup` and `clusterRtrPortGroup`).
pub(crate) const PORT_GROUP_CLUSTER_KIND: &str = "Cluster";
/// OVN-Kubernetes' owner type of the ACL letting a node's host reach its pods on a
/// node switch (`ACLNetpolNode`).
pub(crate) const NETPOL_NODE_KIND: &str = "NetpolNode";

/// The owner a network's controller writes its row under when that is not the
/// network's own: `kind` (one of [`PORT_GROUP_CLUSTER_KIND`], [`NETPOL_NODE_KIND`])
/// and `name` under the controller of `network_owner`.
pub(crate) fn network_alias(network_owner: &Owner, kind: &str, name: &str) -> Owner {
    Owner {
        controller: network_owner.controller.clone(),
        kind: kind.into(),
        name: name.into(),
    }
}

/// For a row a user-defined network's controller writes under an owner of OVN-Kubernetes'
/// other than the network's (its cluster port groups, its allow-from-node ACLs), the
/// owner of the network's own rows, whose key writes it: the network's name follows
/// from the controller's (`cluster_udn_<name>` for a ClusterUserDefinedNetwork,
/// `<namespace>_<name>` for a UserDefinedNetwork: neither a namespace nor a name holds
/// `_`). None for any other owner, the default network's among them.
pub(crate) fn network_of_alias(owner: &Owner) -> Option<Owner> {
    if owner.kind != PORT_GROUP_CLUSTER_KIND && owner.kind != NETPOL_NODE_KIND {
        return None;
    }
    let net = owner.controller.strip_suffix(NETWORK_CONTROLLER_SUFFIX)?;
    let (kind, name) = match net.strip_prefix("cluster_udn_") {
        Some(name) => ("ClusterUserDefinedNetwork", name.to_owned()),
        None => {
            let (namespace, name) = net.split_once('_')?;
            ("UserDefinedNetwork", format!("{namespace}/{name}"))
        }
    };
    (!name.is_empty() && !name.ends_with('/')).then(|| Owner {
        controller: owner.controller.clone(),
        kind: kind.into(),
        name,
    })
}

/// The controller of the networking plugin's virtual networks' rows.
pub(crate) const VL_CONTROLLER: &str = "networking-plugin";
/// The owner type of the rows netconnectd writes for a virtual network an
/// `onapNetwork` declares. The library's calls stamp `VirtualNetwork` instead: a
/// virtual network made by hand is never netconnectd's to remove.
pub(crate) const VL_DECLARED_KIND: &str = "onapNetwork";

/// The owner type of a pod's ports on virtual networks.
pub(crate) const VL_POD_KIND: &str = "Pod";

/// The owner of the ports of pod `key` (`namespace/name`) on virtual networks.
pub(crate) fn pod_owner(key: &str) -> Owner {
    Owner {
        controller: VL_CONTROLLER.into(),
        kind: VL_POD_KIND.into(),
        name: key.into(),
    }
}

/// The owner of the rows of declared virtual network `name`.
pub(crate) fn virtual_network_owner(name: &str) -> Owner {
    Owner {
        controller: VL_CONTROLLER.into(),
        kind: VL_DECLARED_KIND.into(),
        name: name.into(),
    }
}

/// True for owners netconnect writes (and so may remove): the cluster rows, the
/// networks' rows, their services' rows, the ClusterNetworkConnects' rows and the
/// declared virtual networks' rows.
pub(crate) fn is_ours(owner: &Owner) -> bool {
    *owner == cluster_owner()
        || *owner == virtual_network_owner(&owner.name)
        || *owner == pod_owner(&owner.name)
        || *owner == connect_owner(&owner.name)
        || network_of_owner(owner).is_some()
        || (owner.controller.ends_with(NETWORK_CONTROLLER_SUFFIX)
            && owner.kind == SERVICE_OWNER_TYPE)
}

/// `external_ids` key of a ClusterNetworkConnect's row: a connected network's id.
pub(crate) const NETWORK_ID: &str = "network-id";
/// `external_ids` key: a node's id (`0` for a Layer2 network's port).
pub(crate) const NODE_ID: &str = "node-id";
/// `external_ids` key: the router a port or policy is on.
pub(crate) const ROUTER_NAME: &str = "router-name";
/// `external_ids` key: a policy's source network id.
pub(crate) const SOURCE_NETWORK_ID: &str = "source-network-id";
/// `external_ids` key: a policy's destination network id.
pub(crate) const DESTINATION_NETWORK_ID: &str = "destination-network-id";
/// `external_ids` key: `v4` or `v6`.
pub(crate) const IP_FAMILY: &str = "ip-family";

/// The `external_ids` keys whose value is the partition of a ClusterNetworkConnect's
/// row (see [`crate::reconcile::nb`]).
pub(crate) const PARTITION_KEYS: &[&str] = &[NETWORK_ID, SOURCE_NETWORK_ID];

/// The partition of a row: for a ClusterNetworkConnect's row, the network id it is for.
pub(crate) fn partition_of(external_ids: &Datum) -> Option<String> {
    let kind = external_ids.get_str(OWNER_TYPE).and_then(Atom::as_str)?;
    if kind != CONNECT_OWNER_TYPE {
        return None;
    }
    PARTITION_KEYS.iter().find_map(|k| {
        external_ids
            .get_str(k)
            .and_then(Atom::as_str)
            .map(str::to_owned)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_networks_port_groups_and_node_acls_are_its_keys_and_the_default_networks_are_not() {
        let alias = |controller: &str, kind: &str| Owner {
            controller: controller.into(),
            kind: kind.into(),
            name: "clusterPortGroup".into(),
        };
        let cudn = network_of_alias(&alias("cluster_udn_blue-network-controller", "Cluster"));
        assert_eq!(
            cudn,
            Some(Owner {
                controller: "cluster_udn_blue-network-controller".into(),
                kind: "ClusterUserDefinedNetwork".into(),
                name: "blue".into(),
            })
        );
        let udn = network_of_alias(&alias("ns1_green-network-controller", "NetpolNode"));
        assert_eq!(
            udn.map(|o| (o.kind, o.name)),
            Some(("UserDefinedNetwork".into(), "ns1/green".into()))
        );
        // The default network's port groups and node ACLs are never a key's.
        assert_eq!(
            network_of_alias(&alias(CLUSTER_CONTROLLER, "Cluster")),
            None
        );
        assert_eq!(
            network_of_alias(&alias(CLUSTER_CONTROLLER, "NetpolNode")),
            None
        );
        // Nor another owner type of a network's controller.
        assert_eq!(
            network_of_alias(&alias("cluster_udn_blue-network-controller", "Service")),
            None
        );
    }

    #[test]
    fn the_owners_netconnect_writes_are_its_and_no_others() {
        assert!(is_ours(&cluster_owner()));
        assert!(is_ours(&virtual_network_owner("ovn-ls-24")));
        let by_hand = Owner {
            kind: "VirtualNetwork".into(),
            ..virtual_network_owner("ovn-ls-24")
        };
        assert!(!is_ours(&by_hand), "CreateVL's rows are not netconnectd's");
        assert!(is_ours(&connect_owner("c")));
        let net = |controller: &str, kind: &str| Owner {
            controller: controller.into(),
            kind: kind.into(),
            name: "n".into(),
        };
        assert!(is_ours(&net(
            "cluster_udn_n-network-controller",
            "ClusterUserDefinedNetwork"
        )));
        assert!(is_ours(&net(
            "red_n-network-controller",
            "UserDefinedNetwork"
        )));
        // OVN-Kubernetes' default network, its egress IPs, another connect controller.
        assert!(!is_ours(&net(
            "default-network-controller",
            "NetworkPolicy"
        )));
        assert!(!is_ours(&net("default-network-controller", "EgressIP")));
        assert!(!is_ours(&Owner {
            controller: "someone-else".into(),
            ..connect_owner("c")
        }));
    }

    #[test]
    fn only_a_connects_rows_have_a_partition() {
        let ids = |kind: &str| {
            Datum::map([
                (OWNER_TYPE, kind),
                (SOURCE_NETWORK_ID, "3"),
                (DESTINATION_NETWORK_ID, "4"),
            ])
        };
        assert_eq!(partition_of(&ids(CONNECT_OWNER_TYPE)).as_deref(), Some("3"));
        assert_eq!(partition_of(&ids("ClusterUserDefinedNetwork")), None);
        let both = Datum::map([(OWNER_TYPE, CONNECT_OWNER_TYPE), (NETWORK_ID, "7")]);
        assert_eq!(partition_of(&both).as_deref(), Some("7"));
    }
}
