//! One connected network's rows of a connect (one partition, docs/ovn-kubernetes.md §5.4–5.6): the
//! connect router's port toward each of its nodes (Layer3) or toward it (Layer2), the
//! peer on its router, the connect router's routes back to it, and its policies
//! toward the other connected networks. Each node's rows and each policy group are a
//! fragment, built again only when what they are made of changes.

use std::collections::BTreeSet;

use ipnet::IpNet;
use nb_model::keys::lrp_options;
use nb_model::{
    LogicalRouter, LogicalRouterPolicy, LogicalRouterPolicyAction, LogicalRouterStaticRoute,
};

use super::{crtor, family, rtocr, Connected, Peer, POLICY_PRIORITY};
use crate::alloc::connect::{pair, port_tunnel_key};
use crate::api::Topology;
use crate::ovnk::fingerprint;
use crate::ovnk::ownership::{
    DESTINATION_NETWORK_ID, IP_FAMILY, NETWORK_ID, NODE_ID, ROUTER_NAME, SOURCE_NETWORK_ID,
};
use crate::topology::desired::{Desired, Fragments};
use crate::topology::rows::{ip_match_family, map, router_port};
use crate::topology::{Inputs, NodeView};

/// Where a connected network meets the connect router: one of its nodes (Layer3), or
/// the network itself (Layer2, node id 0, local).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target<'a> {
    /// The node, for Layer3.
    pub node: Option<&'a str>,
    /// The node's id (0 for Layer2).
    pub(crate) node_id: u32,
    /// Whether its router is in the zone.
    pub local: bool,
    /// The node's chassis.
    pub chassis: Option<&'a str>,
}

/// The targets of connected network `c`.
pub(crate) fn targets<'a>(c: &Connected, nodes: &[NodeView<'a>]) -> Vec<Target<'a>> {
    match c.net.topology {
        Topology::Layer2 => vec![Target {
            node: None,
            node_id: 0,
            local: true,
            chassis: None,
        }],
        _ => nodes
            .iter()
            .map(|n| Target {
                node: Some(n.name),
                node_id: n.id,
                local: n.local,
                chassis: n.chassis,
            })
            .collect(),
    }
}

/// The point-to-point link of a target: the connect router's addresses (`firsts`) and
/// the network router's (`seconds`), IPv4 first, and the connect router port's key.
struct Link {
    firsts: Vec<IpNet>,
    seconds: Vec<IpNet>,
    port_key: u64,
}

/// A connected network's rows being built.
pub(crate) struct Partition<'a> {
    /// Everything the builders read.
    pub inputs: &'a Inputs<'a>,
    /// The connect's name.
    pub cnc: &'a str,
    /// Its connect subnets.
    pub(crate) connect_subnets: &'a [(IpNet, u8)],
    /// `connect_router_<cnc>`.
    pub router: String,
    /// The fragments known to be in the NB as built before.
    pub known: &'a dyn Fragments,
    /// Where the rows go.
    pub d: &'a mut Desired,
}

impl Partition<'_> {
    /// Describes target `t` of `c` in what the key could not build.
    fn what(c: &Connected, t: &Target) -> String {
        match t.node {
            Some(n) => format!("network {} on node {n}", c.name),
            None => format!("network {}", c.name),
        }
    }

    /// The link of target `t` of `c`, or `None` (and why, in the key's incomplete
    /// list) when its pair or port key is out of range.
    fn link(&mut self, c: &Connected, t: &Target) -> Option<Link> {
        let Some(pairs) = pair(c.subnets, t.node_id) else {
            self.d.incomplete.push(format!(
                "no point-to-point pair for {} (node id {}) in its connect subnets",
                Self::what(c, t),
                t.node_id
            ));
            return None;
        };
        let max = self.inputs.config.max_port_tunnel_key;
        let port_key = port_tunnel_key(self.connect_subnets, c.net.topology, c.subnets, t.node_id)
            .filter(|k| *k <= u64::from(max));
        let Some(port_key) = port_key else {
            self.d.incomplete.push(format!(
                "the connect router's port for {} has no tunnel key within {max}",
                Self::what(c, t),
            ));
            return None;
        };
        Some(Link {
            firsts: pairs.iter().map(|p| p.0).collect(),
            seconds: pairs.iter().map(|p| p.1).collect(),
            port_key,
        })
    }

    /// Target `t`'s rows, one fragment: the ports and the routes back. A local target
    /// is recorded as an entry of `c` (where its policies match traffic from).
    pub fn target(&mut self, c: &mut Connected, t: &Target) {
        let Some(link) = self.link(c, t) else {
            return;
        };
        if t.local {
            let entry = match t.node {
                Some(n) => c.names.rtos(n),
                None => c.names.trtos(),
            };
            c.entries.push((entry, link.firsts.clone()));
        } else if t.chassis.is_none() {
            self.d.incomplete.push(format!(
                "node {} has no k8s.ovn.org/node-chassis-id: the connect router's port for {} is left out",
                t.node.unwrap_or_default(),
                Self::what(c, t)
            ));
            return;
        }
        let host_subnets: &[IpNet] = match t.node {
            Some(n) => self.inputs.host_subnets(&c.name, n),
            None => &[],
        };
        let fingerprint = fingerprint((
            (self.cnc, &c.name, c.id, c.subnets, &c.router),
            (t.node, t.node_id, t.local, t.chassis, host_subnets),
            (link.port_key, &c.net.subnets),
        ));
        let build = match t.node {
            Some(_) => {
                let label = format_args!("node:{}", t.node_id);
                self.d.fragment(self.known, label, fingerprint)
            }
            None => self
                .d
                .fragment(self.known, format_args!("layer2"), fingerprint),
        };
        if !build {
            return;
        }
        self.ports(c, t, &link);
        // Routes back: the node's host subnets (Layer3) or the network's subnets.
        let prefixes: Vec<IpNet> = match t.node {
            Some(_) => host_subnets.to_vec(),
            None => c.net.subnets.iter().map(|s| s.cidr).collect(),
        };
        self.routes_back(c, t, &link, prefixes);
        self.d.end_fragment();
    }

    /// `crtor-` on the connect router and, for a local target, its peer `rtocr-` on the
    /// network's router; a remote target's port is bound to its chassis.
    fn ports(&mut self, c: &Connected, t: &Target, link: &Link) {
        let port_ids = |router: &str| {
            map([
                (NETWORK_ID, c.id.to_string().as_str()),
                (NODE_ID, t.node_id.to_string().as_str()),
                (ROUTER_NAME, router),
            ])
        };
        let crtor_name = crtor(self.cnc, &c.name, t.node);
        let rtocr_name = rtocr(&c.name, t.node, self.cnc);
        let mut port = router_port(&crtor_name, &link.firsts);
        port.external_ids = port_ids(&self.router);
        port.options.insert(
            lrp_options::REQUESTED_TNL_KEY.into(),
            link.port_key.to_string(),
        );
        if t.local {
            port.peer = Some(rtocr_name.clone());
            let mut peer = router_port(&rtocr_name, &link.seconds);
            peer.external_ids = port_ids(&c.router);
            peer.peer = Some(crtor_name);
            let r = self
                .d
                .add(format!("{}:{}:{}", c.id, t.node_id, c.router), peer);
            self.d.attach::<LogicalRouter, _>(&c.router, "ports", &r);
        } else if let Some(chassis) = t.chassis {
            port.options
                .insert(lrp_options::REQUESTED_CHASSIS.into(), chassis.to_owned());
        }
        let r = self
            .d
            .add(format!("{}:{}:{}", c.id, t.node_id, self.router), port);
        self.d.attach::<LogicalRouter, _>(&self.router, "ports", &r);
    }

    /// The connect router's routes to `prefixes` through the network router's side of
    /// the link, one per family (a second subnet of a family gets its prefix in its
    /// identity: the id has no room for it).
    fn routes_back(&mut self, c: &Connected, t: &Target, link: &Link, prefixes: Vec<IpNet>) {
        let mut seen = BTreeSet::new();
        for prefix in prefixes {
            let ipv4 = prefix.addr().is_ipv4();
            let Some(next_hop) = link.seconds.iter().find(|s| s.addr().is_ipv4() == ipv4) else {
                continue;
            };
            let fam = family(ipv4);
            let mut identity = format!("{}:{}:{fam}", c.id, t.node_id);
            if !seen.insert(identity.clone()) {
                identity = format!("{identity}:{prefix}");
            }
            let route = LogicalRouterStaticRoute {
                ip_prefix: prefix.to_string(),
                nexthop: next_hop.addr().to_string(),
                external_ids: map([
                    (NETWORK_ID, c.id.to_string().as_str()),
                    (NODE_ID, t.node_id.to_string().as_str()),
                    (IP_FAMILY, fam),
                ]),
                ..Default::default()
            };
            let r = self.d.add(identity, route);
            self.d
                .attach::<LogicalRouter, _>(&self.router, "static_routes", &r);
        }
    }

    /// The policies of `src` (whose entries are known by now): from each entry port,
    /// for every other connected network, one fragment.
    pub fn policies(&mut self, src: &Connected, nets: &[Peer]) {
        let several = src.entries.len() > 1;
        for (inport, next_hops) in &src.entries {
            for dst in nets.iter().filter(|n| n.id != src.id) {
                let fingerprint = fingerprint((
                    (self.cnc, src.id, &src.router, inport, next_hops, several),
                    (dst.id, &dst.net.subnets),
                ));
                let label = format_args!("to:{}:{inport}", dst.id);
                if !self.d.fragment(self.known, label, fingerprint) {
                    continue;
                }
                for ipv4 in [true, false] {
                    self.policy(src, dst, inport, next_hops, ipv4, several);
                }
                self.d.end_fragment();
            }
        }
    }

    /// The priority-9001 policy of family `ipv4` rerouting traffic entering `src`'s
    /// router at `inport` for `dst`'s subnets to the connect router. `several` entry
    /// ports (several local nodes, one NB for the cluster) get one policy each.
    fn policy(
        &mut self,
        src: &Connected,
        dst: &Peer,
        inport: &str,
        next_hops: &[IpNet],
        ipv4: bool,
        several: bool,
    ) {
        let Some(next_hop) = next_hops.iter().find(|n| n.addr().is_ipv4() == ipv4) else {
            return;
        };
        let dsts: Vec<String> = dst
            .net
            .subnets_of(ipv4)
            .map(|s| format!("{}.dst == {}", ip_match_family(ipv4), s.cidr))
            .collect();
        let m = match dsts.len() {
            0 => return,
            1 => format!("inport == \"{inport}\" && {}", dsts[0]),
            _ => format!("inport == \"{inport}\" && ({})", dsts.join(" || ")),
        };
        let fam = family(ipv4);
        let policy = LogicalRouterPolicy {
            priority: POLICY_PRIORITY,
            action: LogicalRouterPolicyAction::Reroute,
            match_: m,
            nexthops: [next_hop.addr().to_string()].into(),
            external_ids: map([
                (SOURCE_NETWORK_ID, src.id.to_string().as_str()),
                (DESTINATION_NETWORK_ID, dst.id.to_string().as_str()),
                (IP_FAMILY, fam),
                (ROUTER_NAME, src.router.as_str()),
            ]),
            ..Default::default()
        };
        let mut identity = format!("{}:{}:{fam}:{}", src.id, dst.id, src.router);
        if several {
            identity = format!("{identity}:{inport}");
        }
        let r = self.d.add(identity, policy);
        self.d
            .attach::<LogicalRouter, _>(&src.router, "policies", &r);
    }
}
