//! A ClusterNetworkConnect's spec: its selectors, connect subnets and connectivity.

use super::*;
use crate::api::objects::{ConnectSubnet, NetworkSelector};

/// A ClusterNetworkConnect's spec checked against its CRD's rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectSpec {
    /// The connect subnets with their network prefix, IPv4 first.
    pub(crate) connect_subnets: Vec<(IpNet, u8)>,
    /// `PodNetwork` requested.
    pub(crate) pod_network: bool,
    /// `ServiceNetwork` requested.
    pub(crate) service_network: bool,
}

/// Checks a ClusterNetworkConnect against the CRD's rules (selectors, 1–2 connect
/// subnets of different families, masked CIDRs, network prefix bounds, equal host bits
/// in dual stack, 1–2 unique connectivity values).
pub(crate) fn connect_spec(cnc: &ClusterNetworkConnect) -> Result<ConnectSpec, FieldError> {
    let spec = &cnc.spec;
    if spec.network_selectors.is_empty() {
        return err("spec.networkSelectors", "at least one selector is required");
    }
    for (i, s) in spec.network_selectors.iter().enumerate() {
        selector(&format!("spec.networkSelectors[{i}]"), s)?;
    }
    let n = spec.connect_subnets.len();
    if !(1..=2).contains(&n) {
        return err("spec.connectSubnets", format!("1 or 2 entries, got {n}"));
    }
    let mut subnets = Vec::new();
    for (i, c) in spec.connect_subnets.iter().enumerate() {
        subnets.push(connect_subnet(&format!("spec.connectSubnets[{i}]"), c)?);
    }
    if let [a, b] = subnets[..] {
        dual_stack(a, b)?;
    }
    subnets.sort_by_key(|(net, _)| net.addr().is_ipv6());
    let (pod_network, service_network) = connectivity(&spec.connectivity)?;
    Ok(ConnectSpec {
        connect_subnets: subnets,
        pod_network,
        service_network,
    })
}

/// One network selector, at field `f`.
fn selector(f: &str, s: &NetworkSelector) -> Result<(), FieldError> {
    let (field, selector) = match s.network_selection_type.as_str() {
        "ClusterUserDefinedNetworks" => {
            let field = format!("{f}.clusterUserDefinedNetworkSelector");
            let Some(sel) = &s.cluster_user_defined_network_selector else {
                return err(field, "required for ClusterUserDefinedNetworks");
            };
            (format!("{field}.networkSelector"), &sel.network_selector)
        }
        "PrimaryUserDefinedNetworks" => {
            let field = format!("{f}.primaryUserDefinedNetworkSelector");
            let Some(sel) = &s.primary_user_defined_network_selector else {
                return err(field, "required for PrimaryUserDefinedNetworks");
            };
            (format!("{field}.namespaceSelector"), &sel.namespace_selector)
        }
        other => {
            return err(
                format!("{f}.networkSelectionType"),
                format!("Only ClusterUserDefinedNetworks or PrimaryUserDefinedNetworks can be selected, not {other:?}"),
            )
        }
    };
    selector
        .validate(&field)
        .map_err(|(field, message)| FieldError { field, message })
}

/// One connect subnet, at field `f`: a masked CIDR of at most 43 characters and a
/// network prefix longer than it and shorter than the family's address.
fn connect_subnet(f: &str, c: &ConnectSubnet) -> Result<(IpNet, u8), FieldError> {
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
    let field = format!("{f}.networkPrefix");
    if !(1..=127).contains(&p) {
        return err(field, format!("{p} is not between 1 and 127"));
    }
    if p <= net.prefix_len() {
        return err(
            field,
            format!("NetworkPrefix must be longer than the CIDR prefix length: /{p} is not longer than {net}"),
        );
    }
    if net.addr().is_ipv4() && p >= 32 {
        return err(field, "NetworkPrefix must < 32 for ipv4 CIDR");
    }
    if net.addr().is_ipv6() && p >= 128 {
        return err(field, "NetworkPrefix must < 128 for ipv6 CIDR");
    }
    Ok((net, p))
}

/// Two connect subnets: of different families, with as many host bits each.
fn dual_stack(a: (IpNet, u8), b: (IpNet, u8)) -> Result<(), FieldError> {
    if family(&a.0) == family(&b.0) {
        return err(
            "spec.connectSubnets",
            "When 2 CIDRs are set, they must be from different IP families",
        );
    }
    let host = |(net, p): (IpNet, u8)| u32::from(net.max_prefix_len()) - u32::from(p);
    if host(a) != host(b) {
        return err(
            "spec.connectSubnets",
            "For dual-stack, networkPrefix must have matching host bits: (32 - ipv4NetworkPrefix) must equal (128 - ipv6NetworkPrefix)",
        );
    }
    Ok(())
}

/// The connectivity values: 1 or 2, unique; returns (pod network, service network).
fn connectivity(c: &[String]) -> Result<(bool, bool), FieldError> {
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
    Ok((pod, service))
}
