//! The objects a cluster holds, in the shape `kubectl get -o yaml` prints them:
//! `v1 Node`, `v1 Namespace`, and OVN-Kubernetes' `k8s.ovn.org/v1`
//! `UserDefinedNetwork`, `ClusterUserDefinedNetwork` and `ClusterNetworkConnect`.
//!
//! Field names are the CRDs' own. Values are kept as written (CIDRs as strings);
//! [`super::validate`] checks them and turns them into typed networks.

use serde::{Deserialize, Serialize};

use super::meta::{Condition, ObjectMeta};
use super::selector::LabelSelector;

/// A cluster node. netconnect reads its name, labels and OVN-Kubernetes' annotations.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    /// `v1`.
    #[serde(default)]
    pub api_version: String,
    /// `Node`.
    #[serde(default)]
    pub kind: String,
    /// Name, labels, annotations.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `spec` and `status`, kept as they came.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// A namespace: its labels select it for ClusterUserDefinedNetworks and connects.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Namespace {
    /// `v1`.
    #[serde(default)]
    pub api_version: String,
    /// `Namespace`.
    #[serde(default)]
    pub kind: String,
    /// Name and labels.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `spec` and `status`, kept as they came.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// How a network is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Topology {
    /// A switch per node behind a distributed router.
    Layer3,
    /// One switch across all nodes.
    Layer2,
    /// A switch bridged to a physical network (ClusterUserDefinedNetwork only).
    Localnet,
}

impl std::fmt::Display for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Topology::Layer3 => "Layer3",
            Topology::Layer2 => "Layer2",
            Topology::Localnet => "Localnet",
        })
    }
}

/// Whether a network is its pods' primary network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Role {
    /// The pods' default gateway and cluster network.
    Primary,
    /// An extra interface.
    Secondary,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::Primary => "Primary",
            Role::Secondary => "Secondary",
        })
    }
}

/// `layer3`: a cluster subnet split into one host subnet per node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Layer3Config {
    /// Primary or Secondary.
    pub role: Role,
    /// MTU of the network's interfaces (default 1400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// Cluster subnets; with OKEP-5377 several per family, append-only.
    #[serde(default)]
    pub subnets: Vec<Layer3Subnet>,
    /// Join subnets (one per family) between the cluster router and the gateway routers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub join_subnets: Vec<String>,
}

/// One `layer3.subnets` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Layer3Subnet {
    /// The cluster subnet, e.g. `10.10.0.0/16`.
    pub cidr: String,
    /// The prefix length of each node's host subnet (default 24 for IPv4, 64 for IPv6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_subnet: Option<u8>,
}

/// `layer2`: one subnet shared by every node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Layer2Config {
    /// Primary or Secondary.
    pub role: Role,
    /// MTU (default 1400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// The subnets, at most one per family.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<String>,
    /// Subnets IPAM must not hand out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserved_subnets: Vec<String>,
    /// Subnets for infrastructure addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub infrastructure_subnets: Vec<String>,
    /// Gateway addresses, one per family (default: the first address of each subnet).
    #[serde(
        default,
        rename = "defaultGatewayIPs",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub default_gateway_ips: Vec<String>,
    /// Join subnets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub join_subnets: Vec<String>,
    /// IPAM settings (`mode`, `lifecycle`), kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipam: Option<serde_json::Value>,
}

/// A network's definition, shared by the UDN spec and a CUDN's `spec.network`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSpec {
    /// Layer3, Layer2 or Localnet.
    pub topology: Topology,
    /// Set when the topology is Layer3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer3: Option<Layer3Config>,
    /// Set when the topology is Layer2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer2: Option<Layer2Config>,
    /// Set when the topology is Localnet (not programmed by netconnect).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub localnet: Option<serde_json::Value>,
    /// `Geneve` (the default), `NoOverlay` or `EVPN`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// Fields netconnect does not use, kept as written.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// Status shared by the network kinds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Other status fields, kept as written.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// A namespaced network (`k8s.ovn.org/v1 UserDefinedNetwork`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserDefinedNetwork {
    /// `k8s.ovn.org/v1`.
    #[serde(default)]
    pub api_version: String,
    /// `UserDefinedNetwork`.
    #[serde(default)]
    pub kind: String,
    /// Name, namespace, annotations.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The network.
    pub spec: NetworkSpec,
    /// Conditions.
    #[serde(default)]
    pub status: NetworkStatus,
}

/// `spec` of a ClusterUserDefinedNetwork.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterUserDefinedNetworkSpec {
    /// The namespaces the network is for.
    pub namespace_selector: LabelSelector,
    /// The network.
    pub network: NetworkSpec,
    /// Fields netconnect does not use, kept as written.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// A network shared by the namespaces it selects (`k8s.ovn.org/v1
/// ClusterUserDefinedNetwork`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterUserDefinedNetwork {
    /// `k8s.ovn.org/v1`.
    #[serde(default)]
    pub api_version: String,
    /// `ClusterUserDefinedNetwork`.
    #[serde(default)]
    pub kind: String,
    /// Name, labels, annotations.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Selector and network.
    pub spec: ClusterUserDefinedNetworkSpec,
    /// Conditions.
    #[serde(default)]
    pub status: NetworkStatus,
}

/// One `networkSelectors` entry of a ClusterNetworkConnect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSelector {
    /// `ClusterUserDefinedNetworks` or `PrimaryUserDefinedNetworks`.
    pub network_selection_type: String,
    /// For `ClusterUserDefinedNetworks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_user_defined_network_selector: Option<ClusterUserDefinedNetworkSelector>,
    /// For `PrimaryUserDefinedNetworks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_user_defined_network_selector: Option<PrimaryUserDefinedNetworkSelector>,
}

/// Selects ClusterUserDefinedNetworks by their labels.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterUserDefinedNetworkSelector {
    /// The CUDNs' labels.
    pub network_selector: LabelSelector,
}

/// Selects the primary network of each namespace whose labels match.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrimaryUserDefinedNetworkSelector {
    /// The namespaces' labels.
    pub namespace_selector: LabelSelector,
}

/// One `connectSubnets` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectSubnet {
    /// The whole range, e.g. `192.168.0.0/16`.
    pub cidr: String,
    /// The prefix length each connected network gets.
    pub network_prefix: u8,
}

/// `spec` of a ClusterNetworkConnect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetworkConnectSpec {
    /// Which networks to connect.
    pub network_selectors: Vec<NetworkSelector>,
    /// Where the connecting addresses come from (one per family).
    pub connect_subnets: Vec<ConnectSubnet>,
    /// `PodNetwork` and/or `ServiceNetwork`. The OKEP's field name
    /// `connectivityEnabled` is accepted too.
    #[serde(alias = "connectivityEnabled")]
    pub connectivity: Vec<String>,
}

/// Status of a ClusterNetworkConnect.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetworkConnectStatus {
    /// `Success` or `Failure`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// `Accepted` and one `Ready-In-Zone-<zone>` per zone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Networks connected together (`k8s.ovn.org/v1 ClusterNetworkConnect`, OKEP-5224).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetworkConnect {
    /// `k8s.ovn.org/v1`.
    #[serde(default)]
    pub api_version: String,
    /// `ClusterNetworkConnect`.
    #[serde(default)]
    pub kind: String,
    /// Name, annotations.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Selectors, subnets, connectivity.
    pub spec: ClusterNetworkConnectSpec,
    /// Status.
    #[serde(default)]
    pub status: ClusterNetworkConnectStatus,
}
