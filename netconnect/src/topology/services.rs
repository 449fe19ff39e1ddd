//! A service's load balancers on its namespace's primary network, as OVN-Kubernetes'
//! services controller writes them for a user-defined network.
//!
//! The cluster-wide load balancer of a protocol, `<p>Service_<ns>/<name>_<PROTO>_cluster`
//! (`<p>` the network's name prefix), holds one VIP per cluster IP (and external IP,
//! unless `externalTrafficPolicy: Local`) and port, `ip:port` (`[ip]:port` for IPv6),
//! whose backends are the port's eligible endpoints of the VIP's family, `ip:port`
//! joined by commas, in the order of their text; several target ports of one service
//! port (a rolling update) add their backends to the same VIP. It goes in the
//! network's cluster load balancer group, which every node switch and gateway router
//! of the network holds.
//!
//! Options: `reject=true` (a VIP without backends answers with a reset or an ICMP
//! unreachable), `event=false`, `skip_snat=false`, `neighbor_responder=none`,
//! `hairpin_snat_ip` (the masquerade subnets' `.5`, the address a pod reaching itself
//! through a VIP is SNATed to); with `sessionAffinity: ClientIP`, `affinity_timeout`,
//! or at the largest timeout (one day) `selection_fields=[ip_src, ip_dst]` instead.
//! `external_ids`: `k8s.ovn.org/kind=Service`, `k8s.ovn.org/owner=<ns>/<name>`,
//! `k8s.ovn.org/network`, `k8s.ovn.org/role=primary`.
//!
//! What cannot be the same on every node (node ports, `externalTrafficPolicy: Local`
//! external IPs, `internalTrafficPolicy: Local` cluster IPs, host-network endpoints)
//! goes in per-node load balancers ([`node`]) on the nodes' switches and gateway
//! routers. Headless services have none.

use std::collections::BTreeMap;
use std::net::IpAddr;

use nb_model::{
    LoadBalancer, LoadBalancerGroup, LoadBalancerProtocol, LoadBalancerSelectionFields,
    LogicalRouter, LogicalSwitch,
};

pub mod node;

use super::desired::Desired;
use super::rows::map;
use super::{BuildError, Inputs, TopologyConfig};
use crate::api::service::{
    endpoints_of, PortEndpoints, Protocol, ServiceInfo, MAX_AFFINITY_TIMEOUT,
};
use crate::api::{Network, Topology};
use crate::ovnk::addr::nth;
use crate::ovnk::names::Names;
use nb_model::keys::ovn_k8s::{NETWORK, ROLE};

/// `external_ids` key: the kind of object a load balancer is for (`Service`).
pub(crate) const KIND: &str = "k8s.ovn.org/kind";
/// `external_ids` key: the service a load balancer is for (`<ns>/<name>`).
pub(crate) const OWNER: &str = "k8s.ovn.org/owner";
use crate::ovnk::ownership::service_owner as owner;
/// The protocols, in the order their load balancers are made.
pub(crate) const PROTOCOLS: [Protocol; 3] = [Protocol::Tcp, Protocol::Udp, Protocol::Sctp];

/// The name of `svc`'s load balancer of `protocol` and `scope` (`cluster`, or a node's)
/// on the network named by `names`.
pub(crate) fn lb_name(names: &Names, svc: &ServiceInfo, protocol: Protocol, scope: &str) -> String {
    format!(
        "{}Service_{}/{}_{}_{scope}",
        names.prefix,
        svc.namespace,
        svc.name,
        protocol.as_str()
    )
}

/// The address a pod that reaches itself through a VIP is SNATed to: the `.5` of each
/// masquerade subnet, IPv4 then IPv6, space-separated.
pub(crate) fn hairpin_snat_ip(cfg: &TopologyConfig) -> String {
    let mut ips: Vec<&ipnet::IpNet> = cfg.masquerade_subnets.iter().collect();
    ips.sort_by_key(|s| s.addr().is_ipv6());
    let ips: Vec<String> = ips
        .into_iter()
        .filter_map(|s| nth(s, 5))
        .map(|ip| ip.to_string())
        .collect();
    ips.join(" ")
}

/// `ip:port`, `[ip]:port` for IPv6.
pub fn endpoint(ip: IpAddr, port: u16) -> String {
    match ip {
        IpAddr::V4(v4) => format!("{v4}:{port}"),
        IpAddr::V6(v6) => format!("[{v6}]:{port}"),
    }
}

/// The options of every load balancer of `svc`, and its selection fields.
fn options(
    cfg: &TopologyConfig,
    svc: &ServiceInfo,
) -> (
    BTreeMap<String, String>,
    std::collections::BTreeSet<LoadBalancerSelectionFields>,
) {
    let hairpin = hairpin_snat_ip(cfg);
    let mut options = map([
        ("event", "false"),
        ("reject", "true"),
        ("skip_snat", "false"),
        ("neighbor_responder", "none"),
        ("hairpin_snat_ip", hairpin.as_str()),
    ]);
    let mut fields = std::collections::BTreeSet::new();
    match svc.affinity_timeout {
        Some(MAX_AFFINITY_TIMEOUT) => {
            fields.insert(LoadBalancerSelectionFields::IpSrc);
            fields.insert(LoadBalancerSelectionFields::IpDst);
        }
        Some(t) => {
            options.insert("affinity_timeout".into(), t.to_string());
        }
        None => {}
    }
    (options, fields)
}

/// The `external_ids` of every load balancer of `svc` on network `net`.
fn external_ids(svc: &ServiceInfo, net: &str) -> BTreeMap<String, String> {
    map([
        (KIND, "Service"),
        (OWNER, svc.key().as_str()),
        (NETWORK, net),
        (ROLE, "primary"),
    ])
}

fn protocol_of(p: Protocol) -> LoadBalancerProtocol {
    match p {
        Protocol::Tcp => LoadBalancerProtocol::Tcp,
        Protocol::Udp => LoadBalancerProtocol::Udp,
        Protocol::Sctp => LoadBalancerProtocol::Sctp,
    }
}

/// The VIPs of `svc` its cluster-wide load balancers answer on: its cluster IPs and,
/// unless `externalTrafficPolicy: Local`, its external IPs.
pub(crate) fn cluster_vips(svc: &ServiceInfo) -> Vec<IpAddr> {
    let mut vips = svc.cluster_ips.clone();
    if !svc.external_local {
        vips.extend(svc.external_ips.iter().copied());
    }
    vips
}

/// The cluster-wide load balancers of `svc` on network `net` (one per protocol it
/// has ports of), from `endpoints` (one entry per port of the service, as
/// [`crate::api::service::endpoints_of`] gives them), for the ports `cluster_wide`
/// says keep their cluster IPs there ([`node::configs`]: not those with
/// `internalTrafficPolicy: Local` or host-network endpoints).
pub(crate) fn cluster_load_balancers(
    cfg: &TopologyConfig,
    net: &str,
    svc: &ServiceInfo,
    endpoints: &[PortEndpoints],
    cluster_wide: &[bool],
) -> Vec<LoadBalancer> {
    if svc.cluster_ips.is_empty() {
        return Vec::new();
    }
    let names = Names::new(net);
    let (options, selection_fields) = options(cfg, svc);
    let external_ids = external_ids(svc, net);
    let vips = cluster_vips(svc);
    let mut out = Vec::new();
    for protocol in PROTOCOLS {
        let ports: Vec<usize> = (0..svc.ports.len())
            .filter(|&i| svc.ports[i].protocol == protocol && cluster_wide[i])
            .collect();
        if ports.is_empty() {
            continue;
        }
        let mut rules: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for i in ports {
            let none = PortEndpoints::new();
            let by_target = endpoints.get(i).unwrap_or(&none);
            for vip in &vips {
                let backends = by_target.iter().flat_map(|(port, addresses)| {
                    addresses
                        .iter()
                        .filter(|b| b.cluster && b.ip.is_ipv4() == vip.is_ipv4())
                        .map(move |b| endpoint(b.ip, *port))
                });
                rules
                    .entry(endpoint(*vip, svc.ports[i].port))
                    .or_default()
                    .extend(backends);
            }
        }
        out.push(LoadBalancer {
            name: lb_name(&names, svc, protocol, "cluster"),
            protocol: Some(protocol_of(protocol)),
            vips: rules.into_iter().map(|(v, b)| (v, b.join(","))).collect(),
            options: options.clone(),
            selection_fields: selection_fields.clone(),
            external_ids: external_ids.clone(),
            ..Default::default()
        });
    }
    out
}

/// The rows of service `key` (`namespace/name`): its cluster-wide load balancers, each
/// put in its network's cluster load balancer group, and its per-node load balancers
/// ([`node`]) on the local nodes' switches and gateway routers.
pub fn build(inputs: &Inputs, key: &str) -> Result<Desired, BuildError> {
    let inv = inputs.inventory;
    let unknown = || BuildError::Unknown(key.to_owned());
    let svc = inv.services.get(key).ok_or_else(unknown)?;
    let net = inv.network_of_service(svc).ok_or_else(unknown)?;
    let network = &inv.networks.get(net).ok_or_else(unknown)?.network;
    let subnets: Vec<ipnet::IpNet> = network.subnets.iter().map(|s| s.cidr).collect();
    let mut d = Desired::new(owner(key, net));
    let slices = inv.slices_of(svc, net);
    let endpoints = endpoints_of(svc, &slices);
    let names = Names::new(net);
    let group = names.cluster_lb_group();
    let (configs, cluster_wide) = node::configs(svc, &endpoints, &subnets);
    for lb in cluster_load_balancers(inputs.config, net, svc, &endpoints, &cluster_wide) {
        let r = d.add(lb.name.clone(), lb);
        d.attach::<LoadBalancerGroup, _>(&group, "load_balancer", &r);
    }
    if configs.is_empty() {
        return Ok(d);
    }
    let nodes = service_nodes(inputs, network, &names);
    let (options, selection_fields) = options(inputs.config, svc);
    let external_ids = external_ids(svc, net);
    for lb in node::load_balancers(inputs.config, &configs, &nodes) {
        let mut rules: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for r in &lb.rules {
            rules
                .entry(endpoint(r.vip, r.port))
                .or_default()
                .extend(r.targets.iter().map(|(ip, port)| endpoint(*ip, *port)));
        }
        let mut options = options.clone();
        if lb.skip_snat {
            options.insert("skip_snat".into(), "true".into());
        }
        let row = LoadBalancer {
            name: lb_name(&names, svc, lb.protocol, &lb.scope),
            protocol: Some(protocol_of(lb.protocol)),
            vips: rules.into_iter().map(|(v, b)| (v, b.join(","))).collect(),
            options,
            selection_fields: selection_fields.clone(),
            external_ids: external_ids.clone(),
            ..Default::default()
        };
        let r = d.add(row.name.clone(), row);
        for s in &lb.switches {
            d.attach::<LogicalSwitch, _>(s, "load_balancer", &r);
        }
        for gr in &lb.routers {
            d.attach::<LogicalRouter, _>(gr, "load_balancer", &r);
        }
    }
    Ok(d)
}

/// The services with the same inputs in `a` and `b`, so that [`build`] gives the same
/// rows from both: the service, its network (definition and name), its slices on that
/// network, the network's nodes as services see them, the cluster settings. What a
/// network gives its services is compared once per network.
pub fn unchanged(a: &Inputs, b: &Inputs) -> std::collections::BTreeSet<String> {
    let mut networks: std::collections::HashMap<&str, bool> = std::collections::HashMap::new();
    let mut out = std::collections::BTreeSet::new();
    if a.config != b.config {
        return out;
    }
    for (key, sb) in &b.inventory.services {
        let Some(sa) = a.inventory.services.get(key) else {
            continue;
        };
        let (Some(na), Some(nb)) = (
            a.inventory.network_of_service(sa),
            b.inventory.network_of_service(sb),
        ) else {
            continue;
        };
        if sa != sb || na != nb {
            continue;
        }
        let same_network = *networks.entry(nb).or_insert_with(|| {
            match (a.inventory.networks.get(na), b.inventory.networks.get(nb)) {
                (Some(x), Some(y)) => {
                    let names = Names::new(nb);
                    x.network == y.network
                        && service_nodes(a, &x.network, &names)
                            == service_nodes(b, &y.network, &names)
                }
                _ => false,
            }
        });
        if same_network && a.inventory.slices_of(sa, na) == b.inventory.slices_of(sb, nb) {
            out.insert(key.clone());
        }
    }
    out
}

/// The nodes of the zone as `network`'s services see them, in name order: a Layer3
/// node once it has its host subnets (its switch), a Layer2 node on the network's
/// switch; its gateway router when it has a gateway and a chassis (as the topology
/// builds it).
fn service_nodes<'a>(
    inputs: &Inputs<'a>,
    network: &Network,
    names: &Names,
) -> Vec<node::ServiceNode<'a>> {
    let net = network.name();
    inputs
        .nodes()
        .into_iter()
        .filter(|n| n.local)
        .filter_map(|n| {
            let switch = match network.topology {
                Topology::Layer2 => names.layer2_switch(),
                _ if inputs.host_subnets(&net, n.name).is_empty() => return None,
                _ => names.node_switch(n.name),
            };
            let gw = n.gateway;
            Some(node::ServiceNode {
                name: n.name,
                switch,
                router: n.gateway_router().map(|_| names.gateway_router(n.name)),
                gateway_addresses: gw
                    .map(|g| g.ip_addresses.iter().map(|a| a.addr()).collect())
                    .unwrap_or_default(),
                host_addresses: n.host_addresses,
                node_port: gw.is_some_and(|g| g.node_port_enable),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
