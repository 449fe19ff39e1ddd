//! The ranges networks must stay out of: the masquerade and service subnets, the
//! default network's cluster and join subnets, a network's own join subnets
//! (OVN-Kubernetes' cluster manager checks them after admission, OKEP-5377).

use super::*;

/// Address ranges networks must stay out of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reserved {
    /// The masquerade subnets (default `169.254.0.0/17`, `fd69::/112`).
    pub masquerade: Vec<IpNet>,
    /// The cluster's service CIDRs (default `10.96.0.0/16`).
    pub(crate) service_cidrs: Vec<IpNet>,
    /// The default network's cluster subnets (default `10.128.0.0/14`).
    pub(crate) cluster_subnets: Vec<IpNet>,
    /// The default network's join subnets (default `100.64.0.0/16`, `fd98::/64`).
    pub(crate) default_join: Vec<IpNet>,
}

impl Default for Reserved {
    fn default() -> Self {
        Reserved {
            masquerade: super::super::network::default_masquerade(),
            service_cidrs: super::super::network::default_service_cidrs(),
            cluster_subnets: super::super::network::default_cluster_subnets(),
            default_join: super::super::network::default_network_join(),
        }
    }
}

/// Checks a network's subnets against the reserved ranges and its own join subnets, as
/// OVN-Kubernetes' cluster manager does after admission.
pub(crate) fn check_reserved(
    net: &Network,
    reserved: &Reserved,
    at: &str,
) -> Result<(), FieldError> {
    let layer = match net.topology {
        Topology::Layer3 => "layer3",
        _ => "layer2",
    };
    for (i, s) in net.subnets.iter().enumerate() {
        let f = match net.topology {
            Topology::Layer3 => format!("{at}.{layer}.subnets[{i}].cidr"),
            _ => format!("{at}.{layer}.subnets[{i}]"),
        };
        for (what, ranges) in [
            ("the masquerade subnet", &reserved.masquerade),
            ("the service CIDR", &reserved.service_cidrs),
            (
                "the default network's cluster subnet",
                &reserved.cluster_subnets,
            ),
            ("the default network's join subnet", &reserved.default_join),
            ("the join subnet", &net.join_subnets),
        ] {
            if let Some(r) = ranges.iter().find(|r| overlaps(r, &s.cidr)) {
                return err(f, format!("{} overlaps {what} {r}", s.cidr));
            }
        }
    }
    Ok(())
}
