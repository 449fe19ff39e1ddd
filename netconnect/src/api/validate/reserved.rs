//! The ranges networks must stay out of: the masquerade and service subnets, the join
//! and transit subnets (OVN-Kubernetes' cluster manager checks them after admission).

use super::*;

/// Address ranges networks must stay out of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reserved {
    /// The masquerade subnets (default `169.254.0.0/17`, `fd69::/112`).
    pub masquerade: Vec<IpNet>,
    /// The cluster's service CIDRs (default `10.96.0.0/16`).
    pub service_cidrs: Vec<IpNet>,
}

impl Default for Reserved {
    fn default() -> Self {
        Reserved {
            masquerade: super::super::network::default_masquerade(),
            service_cidrs: super::super::network::default_service_cidrs(),
        }
    }
}

/// Checks a network's subnets against the reserved ranges and its own join subnets, as
/// OVN-Kubernetes' cluster manager does after admission.
pub fn check_reserved(net: &Network, reserved: &Reserved, at: &str) -> Result<(), FieldError> {
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
            ("the join subnet", &net.join_subnets),
        ] {
            if let Some(r) = ranges.iter().find(|r| overlaps(r, &s.cidr)) {
                return err(f, format!("{} overlaps {what} {r}", s.cidr));
            }
        }
    }
    Ok(())
}
