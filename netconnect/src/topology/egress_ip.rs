//! EgressIP's no-reroute policies (priority 102) on a network's cluster router (Layer3)
//! or transit router (Layer2), written when EgressIP is enabled
//! (`--enable-egress-ip`; OVN-Kubernetes' `InitClusterEgressPolicies`, which picks the
//! router with `getTopologyScopedRouterName`).

use ipnet::IpNet;
use nb_model::{LogicalRouter, LogicalRouterPolicy, LogicalRouterPolicyAction};

use super::builder::NetworkBuilder;
use super::rows::{add_policy, ip_match_family, map};
use crate::api::Network;

/// The priority of the EgressIP no-reroute policies.
pub(crate) const NO_REROUTE_PRIORITY: i64 = 102;

/// The priority-102 policies: every ordered pair of same-family cluster subnets
/// (OKEP-5377, the pair with itself included), each subnet to the join subnet, and
/// reply traffic (`pkt.mark == 42`).
///
/// OVN-Kubernetes writes these from its EgressIP controller with owner type `EgressIP`
/// and `k8s.ovn.org/name` set to the policy kind; here they belong to the network like
/// its other rows, and keep the `priority`, `ip-family` and `network` keys.
fn no_reroute_policies(net: &Network, default_join: &[IpNet]) -> Vec<LogicalRouterPolicy> {
    let mut out = Vec::new();
    let ids = |family: &str| {
        map([
            ("priority", "102"),
            ("ip-family", family),
            ("network", net.name().as_str()),
        ])
    };
    for ipv4 in [true, false] {
        let ip = ip_match_family(ipv4);
        let subnets: Vec<IpNet> = net.subnets_of(ipv4).map(|s| s.cidr).collect();
        for s1 in &subnets {
            for s2 in &subnets {
                out.push(LogicalRouterPolicy {
                    priority: NO_REROUTE_PRIORITY,
                    action: LogicalRouterPolicyAction::Allow,
                    match_: format!("{ip}.src == {s1} && {ip}.dst == {s2}"),
                    external_ids: ids(ip),
                    ..Default::default()
                });
            }
        }
        // The default network's join subnet, as OVN-Kubernetes matches it
        // (`initClusterEgressPoliciesOps`: `config.Gateway.V4JoinSubnet`), whatever the
        // network's own.
        if let Some(join) = default_join.iter().find(|j| j.addr().is_ipv4() == ipv4) {
            for s in &subnets {
                out.push(LogicalRouterPolicy {
                    priority: NO_REROUTE_PRIORITY,
                    action: LogicalRouterPolicyAction::Allow,
                    match_: format!("{ip}.src == {s} && {ip}.dst == {join}"),
                    external_ids: ids(ip),
                    ..Default::default()
                });
            }
        }
    }
    out.push(LogicalRouterPolicy {
        priority: NO_REROUTE_PRIORITY,
        action: LogicalRouterPolicyAction::Allow,
        match_: "pkt.mark == 42".into(),
        external_ids: ids("ip"),
        ..Default::default()
    });
    out
}

/// Adds the no-reroute policies of the builder's network to `router` (`router_name`).
pub(crate) fn add_no_reroute_policies(
    b: &mut NetworkBuilder,
    router: &mut LogicalRouter,
    router_name: &str,
) {
    for p in no_reroute_policies(b.net, &b.cfg.default_join) {
        add_policy(b.d, &mut router.policies, router_name, p);
    }
}
