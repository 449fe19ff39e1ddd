//! A ClusterNetworkConnect's spec: its selectors, connect subnets and connectivity.

use super::*;

/// A ClusterNetworkConnect's spec checked against its CRD's rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectSpec {
    /// The connect subnets with their network prefix, IPv4 first.
    pub connect_subnets: Vec<(IpNet, u8)>,
    /// `PodNetwork` requested.
    pub pod_network: bool,
    /// `ServiceNetwork` requested.
    pub service_network: bool,
}

/// Checks a ClusterNetworkConnect against the CRD's rules (selectors, 1–2 connect
/// subnets of different families, masked CIDRs, network prefix bounds, equal host bits
/// in dual stack, 1–2 unique connectivity values).
pub fn connect_spec(cnc: &ClusterNetworkConnect) -> Result<ConnectSpec, FieldError> {
    let spec = &cnc.spec;
    if spec.network_selectors.is_empty() {
        return err("spec.networkSelectors", "at least one selector is required");
    }
    for (i, s) in spec.network_selectors.iter().enumerate() {
        let f = format!("spec.networkSelectors[{i}]");
        match s.network_selection_type.as_str() {
            "ClusterUserDefinedNetworks" => {
                let Some(sel) = &s.cluster_user_defined_network_selector else {
                    return err(format!("{f}.clusterUserDefinedNetworkSelector"), "required for ClusterUserDefinedNetworks");
                };
                sel.network_selector
                    .validate(&format!("{f}.clusterUserDefinedNetworkSelector.networkSelector"))
                    .map_err(|(field, message)| FieldError { field, message })?;
            }
            "PrimaryUserDefinedNetworks" => {
                let Some(sel) = &s.primary_user_defined_network_selector else {
                    return err(format!("{f}.primaryUserDefinedNetworkSelector"), "required for PrimaryUserDefinedNetworks");
                };
                sel.namespace_selector
                    .validate(&format!("{f}.primaryUserDefinedNetworkSelector.namespaceSelector"))
                    .map_err(|(field, message)| FieldError { field, message })?;
            }
            other => {
                return err(
                    format!("{f}.networkSelectionType"),
                    format!("Only ClusterUserDefinedNetworks or PrimaryUserDefinedNetworks can be selected, not {other:?}"),
                )
            }
        }
    }
    let n = spec.connect_subnets.len();
    if !(1..=2).contains(&n) {
        return err("spec.connectSubnets", format!("1 or 2 entries, got {n}"));
    }
    let mut subnets = Vec::new();
    for (i, c) in spec.connect_subnets.iter().enumerate() {
        let f = format!("spec.connectSubnets[{i}]");
        if c.cidr.len() > 43 {
            return err(format!("{f}.cidr"), "longer than 43 characters");
        }
        let net = match c.cidr.parse::<IpNet>() {
            Ok(net) if net.trunc() == net => net,
            _ => {
                return err(
                    format!("{f}.cidr"),
                    format!("CIDR must be a valid network address: {:?}", c.cidr),
                )
            }
        };
        let p = c.network_prefix;
        if !(1..=127).contains(&p) {
            return err(
                format!("{f}.networkPrefix"),
                format!("{p} is not between 1 and 127"),
            );
        }
        if p <= net.prefix_len() {
            return err(
                format!("{f}.networkPrefix"),
                format!("NetworkPrefix must be longer than the CIDR prefix length: /{p} is not longer than {net}"),
            );
        }
        if net.addr().is_ipv4() && p >= 32 {
            return err(
                format!("{f}.networkPrefix"),
                "NetworkPrefix must < 32 for ipv4 CIDR",
            );
        }
        if net.addr().is_ipv6() && p >= 128 {
            return err(
                format!("{f}.networkPrefix"),
                "NetworkPrefix must < 128 for ipv6 CIDR",
            );
        }
        subnets.push((net, p));
    }
    if n == 2 {
        let (a, b) = (subnets[0], subnets[1]);
        if family(&a.0) == family(&b.0) {
            return err(
                "spec.connectSubnets",
                "When 2 CIDRs are set, they must be from different IP families",
            );
        }
        let host = |(net, p): (IpNet, u8)| {
            if net.addr().is_ipv4() {
                32 - p as u32
            } else {
                128 - p as u32
            }
        };
        if host(a) != host(b) {
            return err(
                "spec.connectSubnets",
                "For dual-stack, networkPrefix must have matching host bits: (32 - ipv4NetworkPrefix) must equal (128 - ipv6NetworkPrefix)",
            );
        }
    }
    subnets.sort_by_key(|(net, _)| net.addr().is_ipv6());
    let c = &spec.connectivity;
    if !(1..=2).contains(&c.len()) {
        return err(
            "spec.connectivity",
            format!("1 or 2 entries, got {}", c.len()),
        );
    }
    let mut pod = false;
    let mut service = false;
    for (i, v) in c.iter().enumerate() {
        let seen = match v.as_str() {
            "PodNetwork" => std::mem::replace(&mut pod, true),
            // The OKEP's name for it, renamed before release.
            "ServiceNetwork" | "ClusterIPServiceNetwork" => std::mem::replace(&mut service, true),
            other => {
                return err(
                    format!("spec.connectivity[{i}]"),
                    format!("unsupported value {other:?}: PodNetwork or ServiceNetwork"),
                )
            }
        };
        if seen {
            return err(
                "spec.connectivity",
                "connectivity cannot contain duplicate values",
            );
        }
    }
    Ok(ConnectSpec {
        connect_subnets: subnets,
        pod_network: pod,
        service_network: service,
    })
}
