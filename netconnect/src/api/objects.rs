//! The objects a cluster holds, in the shape `kubectl get -o yaml` prints them:
//! `v1 Node` and `v1 Namespace` as k8s-openapi types them, and OVN-Kubernetes'
//! `k8s.ovn.org/v1` `UserDefinedNetwork`, `ClusterUserDefinedNetwork` and
//! `ClusterNetworkConnect`, derived with kube's `CustomResource` from their specs here:
//! the types a Kubernetes API watcher hands over.
//!
//! Field names are the CRDs' own. Values are kept as written (CIDRs as strings);
//! [`super::validate`] checks them and turns them into typed networks. Every list or map
//! field reads `null` as empty (`null_as_empty`).

use kube::CustomResource;
use serde::{Deserialize, Serialize};

pub use k8s_openapi::api::core::v1::{Namespace, Node, Pod};

use super::meta::{null_as_empty, Condition};
use super::selector::LabelSelector;

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
    pub(crate) mtu: Option<u32>,
    /// Cluster subnets; with OKEP-5377 several per family, append-only.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub subnets: Vec<Layer3Subnet>,
    /// Join subnets (one per family) between the cluster router and the gateway routers.
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub(crate) join_subnets: Vec<String>,
}

/// One `layer3.subnets` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Layer3Subnet {
    /// The cluster subnet, e.g. `10.10.0.0/16`.
    pub cidr: String,
    /// The prefix length of each node's host subnet (default 24 for IPv4, 64 for IPv6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) host_subnet: Option<u8>,
}

/// `layer2`: one subnet shared by every node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Layer2Config {
    /// Primary or Secondary.
    pub role: Role,
    /// MTU (default 1400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mtu: Option<u32>,
    /// The subnets, at most one per family.
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub subnets: Vec<String>,
    /// Subnets IPAM must not hand out.
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub(crate) reserved_subnets: Vec<String>,
    /// Subnets for infrastructure addresses.
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub(crate) infrastructure_subnets: Vec<String>,
    /// Gateway addresses, one per family (default: the first address of each subnet).
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        rename = "defaultGatewayIPs",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub(crate) default_gateway_ips: Vec<String>,
    /// Join subnets.
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub(crate) join_subnets: Vec<String>,
    /// IPAM settings (`mode`, `lifecycle`), kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ipam: Option<serde_json::Value>,
}

/// A network's definition: the spec of a `k8s.ovn.org/v1 UserDefinedNetwork` (a
/// namespaced network; the derive makes [`UserDefinedNetwork`]), and a
/// ClusterUserDefinedNetwork's `spec.network`.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "k8s.ovn.org",
    version = "v1",
    kind = "UserDefinedNetwork",
    namespaced,
    status = "NetworkStatus",
    schema = "disabled",
    derive = "PartialEq",
    doc = "A namespaced network (`k8s.ovn.org/v1 UserDefinedNetwork`)."
)]
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
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<Condition>,
    /// Other status fields, kept as written.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// `spec` of a ClusterUserDefinedNetwork (the derive makes
/// [`ClusterUserDefinedNetwork`]).
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "k8s.ovn.org",
    version = "v1",
    kind = "ClusterUserDefinedNetwork",
    status = "NetworkStatus",
    schema = "disabled",
    derive = "PartialEq",
    doc = "A network shared by the namespaces it selects (`k8s.ovn.org/v1 ClusterUserDefinedNetwork`)."
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterUserDefinedNetworkSpec {
    /// The namespaces the network is for.
    pub(crate) namespace_selector: LabelSelector,
    /// The network.
    pub network: NetworkSpec,
    /// Fields netconnect does not use, kept as written.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// One `networkSelectors` entry of a ClusterNetworkConnect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NetworkSelector {
    /// `ClusterUserDefinedNetworks` or `PrimaryUserDefinedNetworks`.
    pub(crate) network_selection_type: String,
    /// For `ClusterUserDefinedNetworks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cluster_user_defined_network_selector: Option<ClusterUserDefinedNetworkSelector>,
    /// For `PrimaryUserDefinedNetworks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) primary_user_defined_network_selector: Option<PrimaryUserDefinedNetworkSelector>,
}

/// Selects ClusterUserDefinedNetworks by their labels.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClusterUserDefinedNetworkSelector {
    /// The CUDNs' labels.
    pub(crate) network_selector: LabelSelector,
}

/// Selects the primary network of each namespace whose labels match.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PrimaryUserDefinedNetworkSelector {
    /// The namespaces' labels.
    pub(crate) namespace_selector: LabelSelector,
}

/// One `connectSubnets` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ConnectSubnet {
    /// The whole range, e.g. `192.168.0.0/16`.
    pub cidr: String,
    /// The prefix length each connected network gets.
    pub(crate) network_prefix: u8,
}

/// `spec` of a ClusterNetworkConnect (the derive makes [`ClusterNetworkConnect`]).
#[derive(CustomResource, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[kube(
    group = "k8s.ovn.org",
    version = "v1",
    kind = "ClusterNetworkConnect",
    status = "ClusterNetworkConnectStatus",
    schema = "disabled",
    derive = "PartialEq",
    doc = "Networks connected together (`k8s.ovn.org/v1 ClusterNetworkConnect`, OKEP-5224)."
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetworkConnectSpec {
    /// Which networks to connect.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub(crate) network_selectors: Vec<NetworkSelector>,
    /// Where the connecting addresses come from (one per family).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub(crate) connect_subnets: Vec<ConnectSubnet>,
    /// `PodNetwork` and/or `ServiceNetwork`. The OKEP's field name
    /// `connectivityEnabled` is accepted too.
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        alias = "connectivityEnabled"
    )]
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
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<Condition>,
}

/// `spec` of a NetworkAttachmentDefinition (the derive makes
/// [`NetworkAttachmentDefinition`]).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "k8s.cni.cncf.io",
    version = "v1",
    kind = "NetworkAttachmentDefinition",
    namespaced,
    schema = "disabled",
    derive = "PartialEq",
    doc = "A network attachment (`k8s.cni.cncf.io/v1 NetworkAttachmentDefinition`)."
)]
#[serde(rename_all = "camelCase")]
pub struct NetworkAttachmentDefinitionSpec {
    /// The CNI configuration, JSON.
    #[serde(default)]
    pub config: String,
}

/// The networking plugin's virtual network definition, as its seed gives it:
/// `kind: onapNetwork` (of any `apiVersion`: the seed's `v1` is no API group of
/// Kubernetes'), its CNI configuration as JSON in `spec.config`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OnapNetwork {
    /// `apiVersion`, as written.
    #[serde(default)]
    pub api_version: String,
    /// `onapNetwork`.
    #[serde(default)]
    pub kind: String,
    /// Its name and the rest.
    #[serde(default)]
    pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    /// Its configuration.
    #[serde(default)]
    pub spec: OnapNetworkSpec,
}

/// `spec` of an [`OnapNetwork`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OnapNetworkSpec {
    /// JSON: `cnitype` (absent: `ovn`), `name`, `subnet`, `gateway`.
    #[serde(default)]
    pub config: String,
}
