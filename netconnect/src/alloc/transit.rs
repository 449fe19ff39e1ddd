//! Layer2 transit subnets (OKEP-5094): the subnet the transit router and the gateway
//! routers share, cut into one point-to-point pair per node.
//!
//! The default is the cluster's transit subnet (`100.88.0.0/16`, `fd97::/64`). When it
//! overlaps one of the network's subnets or its join subnet it moves to the first
//! subnet of the same size after the larger of the two overlapping ones, at most ten
//! times, as OVN-Kubernetes' cluster manager does. The result depends only on the
//! network's (immutable) spec, so it needs no annotation.

use ipnet::IpNet;

use crate::api::validate::overlaps;
use crate::api::Network;
use crate::ovnk::addr::{from_u128, p2p_pair, to_u128, with_len};

/// What `subnets` (a network's transit subnets) say of a move off `defaults`, if one
/// of them moved: `transit subnet moved to <subnet> (the default <d> overlaps …)`.
pub(crate) fn moved(subnets: &[IpNet], defaults: &[IpNet]) -> Option<String> {
    let moved: Vec<String> = subnets
        .iter()
        .filter(|s| !defaults.contains(s))
        .map(|s| {
            match defaults
                .iter()
                .find(|d| d.addr().is_ipv4() == s.addr().is_ipv4())
            {
                Some(d) => {
                    format!("{s} (the default {d} overlaps the network's subnets or join subnet)")
                }
                None => s.to_string(),
            }
        })
        .collect();
    (!moved.is_empty()).then(|| format!("transit subnet moved to {}", moved.join(", ")))
}

/// The transit subnets of a Layer2 network, one per family it has, IPv4 first.
pub(crate) fn transit_subnets(net: &Network, defaults: &[IpNet]) -> Result<Vec<IpNet>, String> {
    let mut out = Vec::new();
    for ipv4 in [true, false] {
        if !net.subnets.iter().any(|s| s.cidr.addr().is_ipv4() == ipv4) {
            continue;
        }
        let Some(mut transit) = defaults
            .iter()
            .find(|d| d.addr().is_ipv4() == ipv4)
            .copied()
        else {
            return Err(format!(
                "no default {} transit subnet is configured",
                if ipv4 { "IPv4" } else { "IPv6" }
            ));
        };
        let taken: Vec<IpNet> = net
            .subnets
            .iter()
            .map(|s| s.cidr)
            .chain(net.join_subnets.iter().copied())
            .filter(|s| s.addr().is_ipv4() == ipv4)
            .collect();
        let mut found = false;
        for _ in 0..10 {
            match taken.iter().find(|t| overlaps(t, &transit)) {
                None => {
                    found = true;
                    break;
                }
                Some(t) => {
                    let bigger = if t.prefix_len() < transit.prefix_len() {
                        *t
                    } else {
                        transit
                    };
                    let next = to_u128(bigger.broadcast()).checked_add(1);
                    let Some(ip) = next.and_then(|n| from_u128(transit.addr(), n)) else {
                        return Err(format!("no transit subnet after {bigger}"));
                    };
                    transit = with_len(ip, transit.prefix_len()).trunc();
                }
            }
        }
        if !found {
            return Err("can't generate transit subnets: failed to find non-overlapping transit subnet after 10 attempts".into());
        }
        out.push(transit);
    }
    Ok(out)
}

/// A node's pair on a Layer2 transit subnet: the transit router's side (`trtor-`,
/// the even address) and the gateway router's side (`rtotr-`, the odd one), as
/// /31 or /127, at `2 · node id`.
pub(crate) fn node_pair(transit: &IpNet, node_id: u32) -> Option<(IpNet, IpNet)> {
    p2p_pair(transit, node_id as u128)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::network::{ClusterSubnet, NetworkOwner};
    use crate::api::{Role, Topology};

    fn l2(subnets: &[&str]) -> Network {
        Network {
            owner: NetworkOwner::ClusterUserDefinedNetwork { name: "t".into() },
            topology: Topology::Layer2,
            role: Role::Primary,
            mtu: 1400,
            subnets: subnets
                .iter()
                .map(|s| {
                    let cidr: IpNet = s.parse().unwrap();
                    ClusterSubnet {
                        cidr,
                        host_len: cidr.prefix_len(),
                    }
                })
                .collect(),
            join_subnets: vec![
                "100.65.0.0/16".parse().unwrap(),
                "fd99::/64".parse().unwrap(),
            ],
            default_gateway_ips: vec![],
            infrastructure_subnets: vec![],
            transport: "Geneve".into(),
        }
    }

    fn defaults() -> Vec<IpNet> {
        vec![
            "100.88.0.0/16".parse().unwrap(),
            "fd97::/64".parse().unwrap(),
        ]
    }

    fn t(net: &Network) -> Vec<String> {
        transit_subnets(net, &defaults())
            .unwrap()
            .iter()
            .map(|n| n.to_string())
            .collect()
    }

    #[test]
    fn the_default_is_kept_when_nothing_overlaps() {
        assert_eq!(
            t(&l2(&["10.100.0.0/16", "fd10::/64"])),
            ["100.88.0.0/16", "fd97::/64"]
        );
        assert_eq!(t(&l2(&["10.100.0.0/16"])), ["100.88.0.0/16"]);
    }

    #[test]
    fn an_overlap_moves_past_the_larger_subnet() {
        assert_eq!(t(&l2(&["100.88.5.0/24"])), ["100.89.0.0/16"]);
        assert_eq!(
            t(&l2(&["100.64.0.0/12"])),
            ["100.88.0.0/16"],
            "100.64.0.0/12 ends at 100.79"
        );
        assert_eq!(t(&l2(&["100.80.0.0/12"])), ["100.96.0.0/16"]);
        assert_eq!(t(&l2(&["100.88.0.0/15"])), ["100.90.0.0/16"]);
    }

    #[test]
    fn pairs_follow_the_node_id() {
        // docs/ovn-kubernetes.md §3.1: node id 2 -> 100.88.0.4/31 + 100.88.0.5/31; vector id 4 -> .8/.9.
        let (a, b) = node_pair(&"100.88.0.0/16".parse().unwrap(), 4).unwrap();
        assert_eq!(
            (a.to_string(), b.to_string()),
            ("100.88.0.8/31".into(), "100.88.0.9/31".into())
        );
    }
}
