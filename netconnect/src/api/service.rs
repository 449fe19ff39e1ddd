//! Services and their endpoints, in the shape `kubectl get -o yaml` prints them
//! (`v1 Service`, `discovery.k8s.io/v1 EndpointSlice`, as k8s-openapi types them: a
//! list Go writes as `null` reads as absent), and a service as netconnect programs it
//! once validated ([`ServiceInfo`]).
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

pub use k8s_openapi::api::core::v1::Service;
pub use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};

use super::meta::Meta;

/// `endpointslice.kubernetes.io/managed-by` of the slices mirrored for a network.
pub(crate) const MIRROR_CONTROLLER: &str = "endpointslice-mirror-controller.k8s.ovn.org";
/// The label naming the service a slice is for.
pub(crate) const SERVICE_NAME_LABEL: &str = "k8s.ovn.org/service-name";
/// The label naming the controller that manages a slice.
pub(crate) const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// The annotation naming the network a mirrored slice is for (a label of the same key
/// in OVN-Kubernetes after 1.3).
pub(crate) const SLICE_NETWORK_ANNOTATION: &str = "k8s.ovn.org/endpointslice-network";
/// The largest `sessionAffinityConfig.clientIP.timeoutSeconds` (one day); at it, OVN
/// selects by source and destination address instead of a timeout.
pub(crate) const MAX_AFFINITY_TIMEOUT: i32 = 86400;
/// The default `timeoutSeconds` of `sessionAffinity: ClientIP` (three hours).
pub(crate) const DEFAULT_AFFINITY_TIMEOUT: i32 = 10800;

/// The service and network a slice was mirrored for, if it is one OVN-Kubernetes'
/// mirroring controller wrote.
pub(crate) fn mirrored_for(slice: &EndpointSlice) -> Option<(&str, &str)> {
    let m = &slice.metadata;
    if m.labels().get(MANAGED_BY_LABEL).map(String::as_str) != Some(MIRROR_CONTROLLER) {
        return None;
    }
    let service = m.labels().get(SERVICE_NAME_LABEL)?;
    // OVN-Kubernetes 1.3 names the network in an annotation; later versions in a label
    // of the same key.
    let network = m
        .annotations()
        .get(SLICE_NETWORK_ANNOTATION)
        .or_else(|| m.labels().get(SLICE_NETWORK_ANNOTATION))?;
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
/// have two), the eligible addresses in the order of their text.
pub(crate) type PortEndpoints = BTreeMap<u16, Vec<Backend>>;

/// One endpoint address of a service port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Backend {
    /// The address.
    pub(crate) ip: IpAddr,
    /// The node it is on, if the slice says.
    pub(crate) node: Option<String>,
    /// Eligible cluster-wide (KEP-1669's choice among all the port's endpoints); when
    /// not, it is eligible only on its node (the choice among that node's endpoints,
    /// what a `Local` traffic policy uses: OVN-Kubernetes' `buildNodeLBEndpointEntry`).
    pub(crate) cluster: bool,
}

impl Backend {
    /// Whether it is eligible as one of `node`'s own endpoints.
    pub(crate) fn on(&self, node: &str) -> bool {
        self.node.as_deref() == Some(node)
    }
}

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
    pub(crate) external_ips: Vec<IpAddr>,
    /// Its ports.
    pub ports: Vec<PortInfo>,
    /// `sessionAffinity: ClientIP`'s timeout in seconds.
    pub(crate) affinity_timeout: Option<i32>,
    /// `externalTrafficPolicy: Local`.
    pub(crate) external_local: bool,
    /// `internalTrafficPolicy: Local`.
    pub(crate) internal_local: bool,
    /// `publishNotReadyAddresses`.
    pub(crate) publish_not_ready: bool,
}

impl ServiceInfo {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

type Conditions = k8s_openapi::api::discovery::v1::EndpointConditions;

/// Whether an endpoint counts: ready; or, when no endpoint of the port is ready,
/// serving and terminating (KEP-1669); every endpoint when the service publishes not
/// ready addresses.
fn eligible<'a>(endpoints: &[&'a Endpoint], publish_not_ready: bool) -> Vec<&'a Endpoint> {
    let condition = |e: &Endpoint, which: fn(&Conditions) -> Option<bool>| {
        e.conditions.as_ref().and_then(which)
    };
    let ready = |e: &Endpoint| condition(e, |c| c.ready) != Some(false);
    let serving = |e: &Endpoint| condition(e, |c| c.serving).unwrap_or_else(|| ready(e));
    let terminating = |e: &Endpoint| condition(e, |c| c.terminating) == Some(true);
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

/// The backends of one target port's `endpoints`: those eligible cluster-wide, and
/// those eligible among their node's endpoints only (KEP-1669's fallback applies per
/// node: a node whose endpoints are all terminating but serving serves with them even
/// when other nodes have ready ones). Each address once, in the order of its text
/// (OVN-Kubernetes sorts the strings, so "10.0.0.10" comes before "10.0.0.9").
fn backends(endpoints: &[&Endpoint], publish_not_ready: bool) -> Vec<Backend> {
    let cluster = eligible(endpoints, publish_not_ready);
    let mut by_node: BTreeMap<&str, Vec<&Endpoint>> = BTreeMap::new();
    for e in endpoints {
        if let Some(n) = e.node_name.as_deref() {
            by_node.entry(n).or_default().push(e);
        }
    }
    let local: Vec<&Endpoint> = by_node
        .values()
        .flat_map(|on_node| eligible(on_node, publish_not_ready))
        .collect();
    let among = |set: &[&Endpoint], e: &Endpoint| set.iter().any(|x| std::ptr::eq(*x, e));
    let mut addresses: BTreeMap<String, Backend> = BTreeMap::new();
    for e in endpoints {
        let in_cluster = among(&cluster, e);
        if !in_cluster && !among(&local, e) {
            continue;
        }
        for a in &e.addresses {
            let Ok(ip) = a.parse::<IpAddr>() else {
                continue;
            };
            let b = addresses.entry(ip.to_string()).or_insert_with(|| Backend {
                ip,
                node: e.node_name.clone(),
                cluster: false,
            });
            b.cluster |= in_cluster;
        }
    }
    addresses.into_values().collect()
}

/// The endpoints of each port of `svc` in `slices` (the network's slices of the
/// service), as OVN-Kubernetes reads them: a slice port matches a service port by name
/// and protocol; per target port number, the eligible endpoints' addresses, each once,
/// sorted.
pub(crate) fn endpoints_of(svc: &ServiceInfo, slices: &[&EndpointSlice]) -> Vec<PortEndpoints> {
    svc.ports
        .iter()
        .map(|p| {
            let mut by_port: BTreeMap<u16, Vec<&Endpoint>> = BTreeMap::new();
            for slice in slices {
                if slice.address_type == "FQDN" {
                    continue;
                }
                for sp in slice.ports.iter().flatten() {
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
                .map(|(port, endpoints)| (port, backends(&endpoints, svc.publish_not_ready)))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(metadata: &str) -> EndpointSlice {
        let text = format!(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\naddressType: IPv4\nendpoints: null\nmetadata: {metadata}\n"
        );
        serde_yaml_ng::from_str(&text).unwrap()
    }

    #[test]
    fn a_mirrored_slice_names_its_network_in_an_annotation_or_a_label() {
        let labels = "endpointslice.kubernetes.io/managed-by: endpointslice-mirror-controller.k8s.ovn.org, k8s.ovn.org/service-name: web";
        // OVN-Kubernetes 1.3: an annotation.
        let s = slice(&format!("{{name: a, namespace: red, labels: {{{labels}}}, annotations: {{k8s.ovn.org/endpointslice-network: red_net}}}}"));
        assert_eq!(mirrored_for(&s), Some(("web", "red_net")));
        // Later versions: a label of the same key.
        let s = slice(&format!("{{name: a, namespace: red, labels: {{{labels}, k8s.ovn.org/endpointslice-network: red_net}}}}"));
        assert_eq!(mirrored_for(&s), Some(("web", "red_net")));
        // The default network's slice of the service, or one naming no network: not one.
        let s = slice("{name: a, namespace: red, labels: {endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io, kubernetes.io/service-name: web}}");
        assert_eq!(mirrored_for(&s), None);
        let s = slice(&format!(
            "{{name: a, namespace: red, labels: {{{labels}}}}}"
        ));
        assert_eq!(mirrored_for(&s), None);
    }
}
