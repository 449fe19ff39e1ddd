//! Services and their endpoints, in the shape `kubectl get -o yaml` prints them
//! (`v1 Service`, `discovery.k8s.io/v1 EndpointSlice`), and a service as netconnect
//! programs it once validated ([`ServiceInfo`]).
//!
//! For a namespace whose primary network is a user-defined network, a service's
//! endpoints are the slices OVN-Kubernetes' mirroring controller writes for that
//! network (label `endpointslice.kubernetes.io/managed-by:
//! endpointslice-mirror-controller.k8s.ovn.org`, label `k8s.ovn.org/service-name`,
//! annotation `k8s.ovn.org/endpointslice-network`): their addresses are the pods'
//! addresses on that network. The default network's slices of the service are not
//! the network's and are ignored.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::meta::ObjectMeta;

/// `endpointslice.kubernetes.io/managed-by` of the slices mirrored for a network.
pub const MIRROR_CONTROLLER: &str = "endpointslice-mirror-controller.k8s.ovn.org";
/// The label naming the service a slice is for.
pub const SERVICE_NAME_LABEL: &str = "k8s.ovn.org/service-name";
/// The standard label naming the service a slice is for.
pub const KUBERNETES_SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label naming the controller that manages a slice.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// The annotation naming the network a mirrored slice is for.
pub const SLICE_NETWORK_ANNOTATION: &str = "k8s.ovn.org/endpointslice-network";
/// The largest `sessionAffinityConfig.clientIP.timeoutSeconds` (one day); at it, OVN
/// selects by source and destination address instead of a timeout.
pub const MAX_AFFINITY_TIMEOUT: i32 = 86400;
/// The default `timeoutSeconds` of `sessionAffinity: ClientIP` (three hours).
pub const DEFAULT_AFFINITY_TIMEOUT: i32 = 10800;

/// A `v1 Service`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Service {
    /// `v1`.
    #[serde(default)]
    pub api_version: String,
    /// `Service`.
    #[serde(default)]
    pub kind: String,
    /// Name and namespace.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What it serves.
    #[serde(default)]
    pub spec: ServiceSpec,
    /// `status` (the load balancer's ingress addresses).
    #[serde(default)]
    pub status: ServiceStatus,
}

/// A service's spec: the fields that make its load balancers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    /// `ClusterIP` (the default), `NodePort`, `LoadBalancer` or `ExternalName`.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    /// The first cluster IP, or `None` for a headless service.
    #[serde(default, rename = "clusterIP")]
    pub cluster_ip: Option<String>,
    /// Every cluster IP (one per family), the first equal to `clusterIP`.
    #[serde(default, rename = "clusterIPs")]
    pub cluster_ips: Vec<String>,
    /// The ports.
    #[serde(default)]
    pub ports: Vec<ServicePort>,
    /// Addresses outside the cluster the service also answers on.
    #[serde(default, rename = "externalIPs")]
    pub external_ips: Vec<String>,
    /// `None` (the default) or `ClientIP`.
    #[serde(default)]
    pub session_affinity: Option<String>,
    /// The `ClientIP` affinity's timeout.
    #[serde(default)]
    pub session_affinity_config: Option<SessionAffinityConfig>,
    /// `Cluster` (the default) or `Local`.
    #[serde(default)]
    pub external_traffic_policy: Option<String>,
    /// `Cluster` (the default) or `Local`.
    #[serde(default)]
    pub internal_traffic_policy: Option<String>,
    /// Endpoints count whether ready or not.
    #[serde(default)]
    pub publish_not_ready_addresses: bool,
    /// Every other field, kept as it came.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// One port of a service.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    /// Required when the service has more than one port.
    #[serde(default)]
    pub name: Option<String>,
    /// `TCP` (the default), `UDP` or `SCTP`.
    #[serde(default)]
    pub protocol: Option<String>,
    /// The port the service answers on.
    #[serde(default)]
    pub port: i64,
    /// The port on the endpoints (resolved into the slices' ports).
    #[serde(default)]
    pub target_port: Option<serde_json::Value>,
    /// The node port, for `NodePort` and `LoadBalancer` services.
    #[serde(default)]
    pub node_port: Option<i64>,
}

/// `sessionAffinityConfig`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionAffinityConfig {
    /// `clientIP`.
    #[serde(default, rename = "clientIP")]
    pub client_ip: Option<ClientIpConfig>,
}

/// `sessionAffinityConfig.clientIP`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientIpConfig {
    /// Seconds a client sticks to its endpoint (1 to 86400).
    #[serde(default)]
    pub timeout_seconds: Option<i64>,
}

/// A service's status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceStatus {
    /// `loadBalancer.ingress[].ip`.
    #[serde(default)]
    pub load_balancer: LoadBalancerStatus,
}

/// `status.loadBalancer`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerStatus {
    /// The ingress points.
    #[serde(default)]
    pub ingress: Vec<LoadBalancerIngress>,
}

/// One ingress point of a `LoadBalancer` service.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerIngress {
    /// Its address, if it has one (not a hostname).
    #[serde(default)]
    pub ip: Option<String>,
}

/// A `discovery.k8s.io/v1 EndpointSlice`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSlice {
    /// `discovery.k8s.io/v1`.
    #[serde(default)]
    pub api_version: String,
    /// `EndpointSlice`.
    #[serde(default)]
    pub kind: String,
    /// Name, namespace, the service and network labels.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `IPv4`, `IPv6` or `FQDN`.
    #[serde(default)]
    pub address_type: String,
    /// The endpoints.
    #[serde(default)]
    pub endpoints: Vec<Endpoint>,
    /// The ports every endpoint serves.
    #[serde(default)]
    pub ports: Vec<EndpointPort>,
}

/// One endpoint of a slice.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// Its addresses (of the slice's address type).
    #[serde(default)]
    pub addresses: Vec<String>,
    /// Ready, serving, terminating.
    #[serde(default)]
    pub conditions: EndpointConditions,
    /// The node it runs on.
    #[serde(default)]
    pub node_name: Option<String>,
}

/// An endpoint's conditions; an unknown `ready` counts as ready, an unknown `serving`
/// as `ready`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointConditions {
    /// Ready to receive traffic.
    #[serde(default)]
    pub ready: Option<bool>,
    /// Serving, whether or not terminating.
    #[serde(default)]
    pub serving: Option<bool>,
    /// Terminating.
    #[serde(default)]
    pub terminating: Option<bool>,
}

/// One port of a slice: the service port it is for (by name and protocol) and the
/// endpoints' port number.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointPort {
    /// The service port's name (empty for an unnamed port).
    #[serde(default)]
    pub name: Option<String>,
    /// `TCP` (the default), `UDP` or `SCTP`.
    #[serde(default)]
    pub protocol: Option<String>,
    /// The port number on the endpoints.
    #[serde(default)]
    pub port: Option<i64>,
}

/// The service and network a slice was mirrored for, if it is one OVN-Kubernetes'
/// mirroring controller wrote.
pub fn mirrored_for(slice: &EndpointSlice) -> Option<(&str, &str)> {
    let m = &slice.metadata;
    if m.labels.get(MANAGED_BY_LABEL).map(String::as_str) != Some(MIRROR_CONTROLLER) {
        return None;
    }
    let service = m.labels.get(SERVICE_NAME_LABEL)?;
    let network = m.annotations.get(SLICE_NETWORK_ANNOTATION)?;
    Some((service.as_str(), network.as_str()))
}

/// A transport protocol of a service port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl Protocol {
    /// The protocol of `name` as a service writes it (`TCP` when absent).
    pub fn parse(name: Option<&str>) -> Option<Protocol> {
        match name.unwrap_or("TCP") {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            "SCTP" => Some(Protocol::Sctp),
            _ => None,
        }
    }

    /// `TCP`, `UDP` or `SCTP`, as in Kubernetes and in load balancer names.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
        }
    }
}

/// One port of a validated service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortInfo {
    /// Its name (empty when the service has one unnamed port).
    pub name: String,
    /// Its protocol.
    pub protocol: Protocol,
    /// The port the service answers on.
    pub port: u16,
    /// The node port, if any.
    pub node_port: Option<u16>,
}

/// The endpoints of one service port: per target port number (a rolling update may
/// have two), the eligible addresses in the order of their text, each with its node.
pub type PortEndpoints = BTreeMap<u16, Vec<(IpAddr, Option<String>)>>;

/// A service as netconnect programs it.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceInfo {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its cluster IPs (none for a headless service).
    pub cluster_ips: Vec<IpAddr>,
    /// `externalIPs` and the load balancer ingress addresses.
    pub external_ips: Vec<IpAddr>,
    /// Its ports.
    pub ports: Vec<PortInfo>,
    /// `sessionAffinity: ClientIP`'s timeout in seconds.
    pub affinity_timeout: Option<i32>,
    /// `externalTrafficPolicy: Local`.
    pub external_local: bool,
    /// `internalTrafficPolicy: Local`.
    pub internal_local: bool,
    /// `publishNotReadyAddresses`.
    pub publish_not_ready: bool,
}

impl ServiceInfo {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Whether an endpoint counts: ready; or, when no endpoint of the port is ready,
/// serving and terminating (KEP-1669); every endpoint when the service publishes not
/// ready addresses.
fn eligible<'a>(endpoints: &[&'a Endpoint], publish_not_ready: bool) -> Vec<&'a Endpoint> {
    let ready = |e: &Endpoint| e.conditions.ready != Some(false);
    let serving = |e: &Endpoint| e.conditions.serving.unwrap_or_else(|| ready(e));
    let terminating = |e: &Endpoint| e.conditions.terminating == Some(true);
    let ready_ones: Vec<&Endpoint> = endpoints
        .iter()
        .copied()
        .filter(|e| publish_not_ready || ready(e))
        .collect();
    if !ready_ones.is_empty() {
        return ready_ones;
    }
    endpoints
        .iter()
        .copied()
        .filter(|e| serving(e) && terminating(e))
        .collect()
}

/// The endpoints of each port of `svc` in `slices` (the network's slices of the
/// service), as OVN-Kubernetes reads them: a slice port matches a service port by name
/// and protocol; per target port number, the eligible endpoints' addresses, each once,
/// sorted.
pub fn endpoints_of(svc: &ServiceInfo, slices: &[&EndpointSlice]) -> Vec<PortEndpoints> {
    svc.ports
        .iter()
        .map(|p| {
            let mut by_port: BTreeMap<u16, Vec<&Endpoint>> = BTreeMap::new();
            for slice in slices {
                if slice.address_type == "FQDN" {
                    continue;
                }
                for sp in &slice.ports {
                    let same = sp.name.as_deref().unwrap_or("") == p.name
                        && Protocol::parse(sp.protocol.as_deref()) == Some(p.protocol);
                    let Some(port) = sp.port.and_then(|n| u16::try_from(n).ok()) else {
                        continue;
                    };
                    if same {
                        by_port.entry(port).or_default().extend(&slice.endpoints);
                    }
                }
            }
            by_port
                .into_iter()
                .map(|(port, endpoints)| {
                    // Each address once, in the order of its text (OVN-Kubernetes sorts
                    // the strings, so "10.0.0.10" comes before "10.0.0.9").
                    let mut addresses: BTreeMap<String, (IpAddr, Option<String>)> = BTreeMap::new();
                    for e in eligible(&endpoints, svc.publish_not_ready) {
                        for a in &e.addresses {
                            if let Ok(ip) = a.parse::<IpAddr>() {
                                addresses
                                    .entry(ip.to_string())
                                    .or_insert_with(|| (ip, e.node_name.clone()));
                            }
                        }
                    }
                    (port, addresses.into_values().collect())
                })
                .collect()
        })
        .collect()
}
