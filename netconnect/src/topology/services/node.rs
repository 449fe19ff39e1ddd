//! A service's per-node load balancers, as OVN-Kubernetes' services controller builds
//! them (`buildServiceLBConfigs`, `buildPerNodeLBs`, `mergeLBs`) with service templates
//! turned off: what cannot be the same on every node.
//!
//! A port of the service gets per-node rules for
//! - its node port: on each node, a VIP per host address of the node
//!   (`k8s.ovn.org/host-cidrs`), unless the node's gateway serves no node ports;
//! - its external IPs when `externalTrafficPolicy: Local`;
//! - its cluster IPs when `internalTrafficPolicy: Local`, or when an endpoint is on a
//!   node's host network (an address outside the network's subnets).
//!
//! On each node the switch rules go to the endpoints (only the node's own for
//! `internalTrafficPolicy: Local` cluster IPs; an `externalTrafficPolicy: Local` node
//! port also answers on the host's ETP-local masquerade address `…3` with the node's
//! own endpoints), the gateway router rules to the endpoints with a host-network
//! endpoint on the node itself replaced by the host's masquerade address `…2` (the
//! host reached back through its gateway bridge); with `externalTrafficPolicy: Local`
//! the router rules keep the node's own endpoints and go in a load balancer of their
//! own that does not SNAT. A node's rules become `…_node_router+switch_<node>` when the
//! router's and the switch's are the same, else `…_node_router_<node>`,
//! `…_node_local_router_<node>` and `…_node_switch_<node>`; load balancers of several
//! nodes with the same rules are one, `…_merged`, on all their switches and routers.
//!
//! Service templates (OVN-Kubernetes' default for plain node ports: one load balancer
//! for every node, its VIPs and backends chassis template variables) are not written:
//! their variables live in one `Chassis_Template_Var` row per chassis that every
//! service and network shares, which netconnect does not own.

use std::net::IpAddr;

use ipnet::IpNet;

use super::{cluster_vips, PROTOCOLS};
use crate::api::service::{PortEndpoints, Protocol, ServiceInfo};
use crate::topology::{masquerade_etp_local_ip, masquerade_host_ip, TopologyConfig};

/// A VIP of a configuration: an address, or every host address of the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vip {
    /// The node's host addresses (a node port).
    Node,
    /// One address.
    Ip(IpAddr),
}

/// One port's VIPs and endpoints, and how they are filtered (OVN-Kubernetes'
/// `lbConfig`).
#[derive(Clone, Debug)]
pub struct Config<'e> {
    /// The protocol.
    pub protocol: Protocol,
    /// The VIPs.
    pub vips: Vec<Vip>,
    /// The port the VIPs answer on.
    pub inport: u16,
    /// The endpoints, per target port.
    pub(crate) endpoints: &'e PortEndpoints,
    /// `externalTrafficPolicy: Local` applies (node ports, external IPs).
    pub(crate) external_local: bool,
    /// `internalTrafficPolicy: Local` applies (cluster IPs).
    pub(crate) internal_local: bool,
    /// A node port.
    pub node_port: bool,
}

/// A node as a service's load balancers see it (OVN-Kubernetes' `nodeInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServiceNode<'a> {
    /// The node's name.
    pub name: &'a str,
    /// The network's switch its pods are on.
    pub switch: String,
    /// Its gateway router, if it has one.
    pub router: Option<String>,
    /// Its gateway's addresses (`l3-gateway-config`).
    pub(crate) gateway_addresses: Vec<IpAddr>,
    /// Its host's addresses (`host-cidrs`), where its node ports answer.
    pub(crate) host_addresses: &'a [IpAddr],
    /// Its gateway serves node ports.
    pub node_port: bool,
}

/// A rule: a VIP and port and their backends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rule {
    /// The VIP.
    pub vip: IpAddr,
    /// Its port.
    pub port: u16,
    /// The backends.
    pub(crate) targets: Vec<(IpAddr, u16)>,
}

/// A per-node load balancer before it becomes a row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NodeLb {
    /// Its scope, the part of the name after the protocol (`node_switch_<node>`, …).
    pub scope: String,
    /// Its protocol.
    pub protocol: Protocol,
    /// Its rules.
    pub rules: Vec<Rule>,
    /// `skip_snat=true` (an `externalTrafficPolicy: Local` router's).
    pub(crate) skip_snat: bool,
    /// The switches it goes on.
    pub switches: Vec<String>,
    /// The routers it goes on.
    pub routers: Vec<String>,
}

/// True when `ip` is outside `subnets`: an endpoint on a node's host network.
fn is_host_endpoint(ip: &IpAddr, subnets: &[IpNet]) -> bool {
    !subnets.iter().any(|s| s.contains(ip))
}

/// The per-node configurations of `svc`'s ports (in port order: node port, external
/// IPs, cluster IPs), and for each port whether its cluster IPs stay in the
/// cluster-wide load balancer. `subnets` are the network's.
pub(crate) fn configs<'e>(
    svc: &ServiceInfo,
    endpoints: &'e [PortEndpoints],
    subnets: &[IpNet],
) -> (Vec<Config<'e>>, Vec<bool>) {
    static NONE: PortEndpoints = PortEndpoints::new();
    let mut per_node = Vec::new();
    let mut cluster = Vec::new();
    for (i, port) in svc.ports.iter().enumerate() {
        let eps = endpoints.get(i).unwrap_or(&NONE);
        let config = |vips: Vec<Vip>, inport: u16| Config {
            protocol: port.protocol,
            vips,
            inport,
            endpoints: eps,
            external_local: false,
            internal_local: false,
            node_port: false,
        };
        if let Some(node_port) = port.node_port {
            per_node.push(Config {
                external_local: svc.external_local,
                node_port: true,
                ..config(vec![Vip::Node], node_port)
            });
        }
        if svc.external_local && !svc.external_ips.is_empty() {
            let external = svc.external_ips.iter().map(|ip| Vip::Ip(*ip)).collect();
            per_node.push(Config {
                external_local: true,
                ..config(external, port.port)
            });
        }
        let host = eps
            .values()
            .flatten()
            .any(|b| b.cluster && is_host_endpoint(&b.ip, subnets));
        if host || svc.internal_local {
            let vips = cluster_vips(svc).into_iter().map(Vip::Ip).collect();
            per_node.push(Config {
                internal_local: svc.internal_local,
                ..config(vips, port.port)
            });
            cluster.push(false);
        } else {
            cluster.push(true);
        }
    }
    (per_node, cluster)
}

/// The targets of one configuration on one node, per family: all endpoints, the
/// switch's and the router's.
#[derive(Default)]
struct Targets {
    all: [Vec<(IpAddr, u16)>; 2],
    switch: [Vec<(IpAddr, u16)>; 2],
    router: [Vec<(IpAddr, u16)>; 2],
}

fn family(ip: &IpAddr) -> usize {
    usize::from(ip.is_ipv6())
}

impl Targets {
    fn of(cfg: &TopologyConfig, c: &Config, node: &ServiceNode) -> Targets {
        let mut t = Targets::default();
        for (port, backends) in c.endpoints {
            for b in backends {
                // A local policy takes the node's own endpoints, chosen among them;
                // otherwise those eligible cluster-wide.
                let here = b.on(node.name);
                let ip = &b.ip;
                let f = family(ip);
                if b.cluster {
                    t.all[f].push((*ip, *port));
                }
                let switch_local = c.external_local || c.internal_local;
                if (switch_local && here) || (!switch_local && b.cluster) {
                    t.switch[f].push((*ip, *port));
                }
                if (c.external_local && here) || (!c.external_local && b.cluster) {
                    // The node's own host reached through its gateway router comes
                    // from the host's masquerade address.
                    let ip = if node.gateway_addresses.contains(ip) {
                        masquerade_host_ip(cfg, ip.is_ipv4()).unwrap_or(*ip)
                    } else {
                        *ip
                    };
                    t.router[f].push((ip, *port));
                }
            }
        }
        t
    }
}

/// The rules of one node for one protocol: the switch's, the router's, and the
/// router's that do not SNAT.
#[derive(Default)]
struct NodeRules {
    switch: Vec<Rule>,
    router: Vec<Rule>,
    local_router: Vec<Rule>,
}

impl NodeRules {
    fn add(&mut self, cfg: &TopologyConfig, c: &Config, node: &ServiceNode) {
        let t = Targets::of(cfg, c, node);
        let mut vips = Vec::new();
        for v in &c.vips {
            match v {
                Vip::Node if node.node_port => vips.extend(node.host_addresses.iter().copied()),
                Vip::Node => {}
                Vip::Ip(ip) => vips.push(*ip),
            }
        }
        let rule = |vip: IpAddr, targets: &[(IpAddr, u16)]| Rule {
            vip,
            port: c.inport,
            targets: targets.to_vec(),
        };
        for vip in vips {
            let f = family(&vip);
            if c.external_local && c.node_port {
                if let Some(m) = masquerade_etp_local_ip(cfg, vip.is_ipv4()) {
                    self.switch.push(rule(m, &t.switch[f]));
                }
            }
            let cluster_ip = cfg.service_cidrs.iter().any(|s| s.contains(&vip));
            if c.internal_local && cluster_ip {
                self.switch.push(rule(vip, &t.switch[f]));
            } else {
                self.switch.push(rule(vip, &t.all[f]));
            }
            let r = rule(vip, &t.router[f]);
            if c.external_local && !r.targets.is_empty() {
                self.local_router.push(r);
            } else {
                self.router.push(r);
            }
        }
    }

    /// The load balancers of `node` for `protocol`.
    fn into_lbs(self, node: &ServiceNode, protocol: Protocol) -> Vec<NodeLb> {
        let n = node.name;
        let lb = |scope: String, rules: Vec<Rule>, switch: bool, router: bool| NodeLb {
            scope,
            protocol,
            rules,
            skip_snat: false,
            switches: if switch {
                vec![node.switch.clone()]
            } else {
                vec![]
            },
            routers: node.router.iter().filter(|_| router).cloned().collect(),
        };
        let mut out = Vec::new();
        if self.switch == self.router && !self.switch.is_empty() && node.router.is_some() {
            out.push(lb(
                format!("node_router+switch_{n}"),
                self.router,
                true,
                true,
            ));
            return out;
        }
        if !self.router.is_empty() && node.router.is_some() {
            out.push(lb(format!("node_router_{n}"), self.router, false, true));
        }
        if !self.local_router.is_empty() && node.router.is_some() {
            let mut l = lb(
                format!("node_local_router_{n}"),
                self.local_router,
                false,
                true,
            );
            l.skip_snat = true;
            out.push(l);
        }
        if !self.switch.is_empty() {
            out.push(lb(format!("node_switch_{n}"), self.switch, true, false));
        }
        out
    }
}

/// The per-node load balancers of `configs` on `nodes` (in their order), merged.
pub(crate) fn load_balancers(
    cfg: &TopologyConfig,
    configs: &[Config],
    nodes: &[ServiceNode],
) -> Vec<NodeLb> {
    let mut out = Vec::new();
    for node in nodes {
        for protocol in PROTOCOLS {
            let mut rules = NodeRules::default();
            let mut any = false;
            for c in configs.iter().filter(|c| c.protocol == protocol) {
                rules.add(cfg, c, node);
                any = true;
            }
            if any {
                out.extend(rules.into_lbs(node, protocol));
            }
        }
    }
    merge(out)
}

/// Load balancers with the same protocol, options and rules become one, on all their
/// switches and routers, named after the first with `_merged` (OVN-Kubernetes'
/// `mergeLBs`).
fn merge(lbs: Vec<NodeLb>) -> Vec<NodeLb> {
    if lbs.len() == 1 {
        return lbs;
    }
    let mut out: Vec<NodeLb> = Vec::new();
    for lb in lbs {
        match out.iter_mut().find(|o| {
            o.protocol == lb.protocol && o.skip_snat == lb.skip_snat && o.rules == lb.rules
        }) {
            Some(o) => {
                o.switches.extend(lb.switches);
                o.routers.extend(lb.routers);
                if !o.scope.ends_with("_merged") {
                    o.scope.push_str("_merged");
                }
            }
            None => out.push(lb),
        }
    }
    out
}

#[cfg(test)]
mod tests;
