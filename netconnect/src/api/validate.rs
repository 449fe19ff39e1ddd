//! The CRDs' validation rules (their CEL `XValidation`s, enums and bounds), checked on
//! objects read from files since no API server checked them, plus the checks
//! OVN-Kubernetes' cluster manager makes after admission (subnets against the
//! masquerade and service ranges and the join subnets). Each failure names the field.

use std::net::IpAddr;

use ipnet::IpNet;

use super::network::{
    ClusterSubnet, Network, NetworkOwner, DEFAULT_JOIN_V4, DEFAULT_JOIN_V6, DEFAULT_MTU,
};
use super::objects::{
    ClusterNetworkConnect, ClusterUserDefinedNetwork, Layer2Config, Layer3Config, NetworkSpec,
    Role, Topology, UserDefinedNetwork,
};

/// The most subnets a Layer3 network may list (OKEP-5377's CEL cost bound).
pub const MAX_LAYER3_SUBNETS: usize = 400;

/// A field and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field's path, e.g. `spec.layer3.subnets[1]`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

fn err<T>(field: impl Into<String>, message: impl Into<String>) -> Result<T, FieldError> {
    Err(FieldError {
        field: field.into(),
        message: message.into(),
    })
}

/// Parses a CIDR; `masked` requires it to be a network address (no host bits).
fn cidr(field: &str, text: &str, masked: bool) -> Result<IpNet, FieldError> {
    let n: IpNet = match text.trim().parse() {
        Ok(n) => n,
        Err(_) => return err(field, format!("{text:?} is not a CIDR")),
    };
    if masked && n.trunc() != n {
        return err(
            field,
            format!(
                "{text} is not a network address (did you mean {}?)",
                n.trunc()
            ),
        );
    }
    Ok(n.trunc())
}

fn family(n: &IpNet) -> &'static str {
    if n.addr().is_ipv4() {
        "IPv4"
    } else {
        "IPv6"
    }
}

/// True when one of `a`, `b` contains the other (CIDRs overlap exactly then).
pub fn overlaps(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// Checks a dual-stack list: at most two entries, of different families.
fn dual_stack(field: &str, list: &[String]) -> Result<Vec<IpNet>, FieldError> {
    if list.len() > 2 {
        return err(field, format!("at most 2 entries, got {}", list.len()));
    }
    let parsed = list
        .iter()
        .enumerate()
        .map(|(i, s)| cidr(&format!("{field}[{i}]"), s, false))
        .collect::<Result<Vec<_>, _>>()?;
    if parsed.len() == 2 && family(&parsed[0]) == family(&parsed[1]) {
        return err(
            field,
            "When 2 CIDRs are set, they must be from different IP families",
        );
    }
    Ok(parsed)
}

/// A UserDefinedNetwork's network.
pub fn udn_network(udn: &UserDefinedNetwork) -> Result<Network, FieldError> {
    let owner = NetworkOwner::UserDefinedNetwork {
        namespace: udn.metadata.namespace.clone().unwrap_or_default(),
        name: udn.metadata.name.clone(),
    };
    if udn.spec.topology == Topology::Localnet {
        return err(
            "spec.topology",
            "Localnet is only available to ClusterUserDefinedNetworks",
        );
    }
    spec_network(owner, &udn.spec, "spec")
}

/// A ClusterUserDefinedNetwork's network.
pub fn cudn_network(cudn: &ClusterUserDefinedNetwork) -> Result<Network, FieldError> {
    let owner = NetworkOwner::ClusterUserDefinedNetwork {
        name: cudn.metadata.name.clone(),
    };
    cudn.spec
        .namespace_selector
        .validate("spec.namespaceSelector")
        .map_err(|(field, message)| FieldError { field, message })?;
    spec_network(owner, &cudn.spec.network, "spec.network")
}

fn spec_network(owner: NetworkOwner, spec: &NetworkSpec, at: &str) -> Result<Network, FieldError> {
    for (topo, present, name) in [
        (Topology::Layer3, spec.layer3.is_some(), "layer3"),
        (Topology::Layer2, spec.layer2.is_some(), "layer2"),
        (Topology::Localnet, spec.localnet.is_some(), "localnet"),
    ] {
        if (spec.topology == topo) != present {
            return err(
                format!("{at}.{name}"),
                format!("{at}.{name} is required when topology is {topo} and forbidden otherwise"),
            );
        }
    }
    let transport = spec.transport.clone().unwrap_or_else(|| "Geneve".into());
    match spec.topology {
        Topology::Layer3 => layer3(
            owner,
            spec.layer3.as_ref().expect("checked"),
            &format!("{at}.layer3"),
            transport,
        ),
        Topology::Layer2 => layer2(
            owner,
            spec.layer2.as_ref().expect("checked"),
            &format!("{at}.layer2"),
            transport,
        ),
        Topology::Localnet => Ok(Network {
            owner,
            topology: Topology::Localnet,
            role: Role::Secondary,
            mtu: DEFAULT_MTU,
            subnets: Vec::new(),
            join_subnets: Vec::new(),
            default_gateway_ips: Vec::new(),
            transport,
        }),
    }
}

fn mtu(at: &str, mtu: Option<u32>, subnets: &[ClusterSubnet]) -> Result<u32, FieldError> {
    let m = mtu.unwrap_or(DEFAULT_MTU);
    if !(576..=65536).contains(&m) {
        return err(
            format!("{at}.mtu"),
            format!("{m} is not between 576 and 65536"),
        );
    }
    if m < 1280 && subnets.iter().any(|s| s.cidr.addr().is_ipv6()) {
        return err(
            format!("{at}.mtu"),
            "MTU should be greater than or equal to 1280 when IPv6 subnet is used",
        );
    }
    Ok(m)
}

fn join_subnets(at: &str, role: Role, given: &[String]) -> Result<Vec<IpNet>, FieldError> {
    let field = format!("{at}.joinSubnets");
    if !given.is_empty() && role != Role::Primary {
        return err(field, "JoinSubnets is only supported for Primary network");
    }
    let mut join = dual_stack(&field, given)?;
    for default in [DEFAULT_JOIN_V4, DEFAULT_JOIN_V6] {
        let d: IpNet = default.parse().expect("constant");
        if !join.iter().any(|j| family(j) == family(&d)) {
            join.push(d);
        }
    }
    join.sort_by_key(|j| j.addr().is_ipv6());
    Ok(join)
}

fn layer3(
    owner: NetworkOwner,
    l3: &Layer3Config,
    at: &str,
    transport: String,
) -> Result<Network, FieldError> {
    let field = format!("{at}.subnets");
    if l3.subnets.is_empty() {
        return err(field, "at least one subnet is required");
    }
    if l3.subnets.len() > MAX_LAYER3_SUBNETS {
        return err(
            field,
            format!(
                "at most {MAX_LAYER3_SUBNETS} subnets, got {}",
                l3.subnets.len()
            ),
        );
    }
    let mut subnets: Vec<ClusterSubnet> = Vec::new();
    for (i, s) in l3.subnets.iter().enumerate() {
        let f = format!("{field}[{i}]");
        let c = cidr(&format!("{f}.cidr"), &s.cidr, false)?;
        let bits = if c.addr().is_ipv4() { 32 } else { 128 };
        let host_len = match s.host_subnet {
            Some(h) => {
                if !(1..=127).contains(&h) {
                    return err(
                        format!("{f}.hostSubnet"),
                        format!("{h} is not between 1 and 127"),
                    );
                }
                if h <= c.prefix_len() {
                    return err(
                        format!("{f}.hostSubnet"),
                        format!("HostSubnet must be smaller than CIDR subnet: /{h} is not longer than {c}"),
                    );
                }
                if bits == 32 && h >= 32 {
                    return err(
                        format!("{f}.hostSubnet"),
                        "HostSubnet must < 32 for ipv4 CIDR",
                    );
                }
                if h >= bits {
                    return err(
                        format!("{f}.hostSubnet"),
                        format!("/{h} leaves no host addresses"),
                    );
                }
                h
            }
            None => {
                let d = if bits == 32 { 24 } else { 64 };
                if d <= c.prefix_len() {
                    return err(
                        format!("{f}.hostSubnet"),
                        format!(
                            "the default host subnet /{d} is not smaller than {c}; set hostSubnet"
                        ),
                    );
                }
                d
            }
        };
        for (j, prev) in subnets.iter().enumerate() {
            if prev.cidr == c {
                return err(
                    &f,
                    format!("Subnets with same CIDR are not allowed: {c} is also subnets[{j}]"),
                );
            }
            if overlaps(&prev.cidr, &c) {
                return err(
                    &f,
                    format!("Subnets must not overlap or contain each other: {c} overlaps {} (subnets[{j}])", prev.cidr),
                );
            }
            if family(&prev.cidr) == family(&c) && prev.host_len != host_len {
                return err(
                    format!("{f}.hostSubnet"),
                    format!(
                        "Subnets from the same IP family must use the same hostSubnet value: /{host_len} here, /{} in subnets[{j}]",
                        prev.host_len
                    ),
                );
            }
        }
        subnets.push(ClusterSubnet { cidr: c, host_len });
    }
    if l3.role == Role::Secondary {
        if subnets.len() > 2 {
            return err(field, "Secondary networks may define at most 2 subnets");
        }
        if subnets.len() == 2 && family(&subnets[0].cidr) == family(&subnets[1].cidr) {
            return err(
                field,
                "When 2 CIDRs are set for Secondary networks, they must be from different IP families",
            );
        }
    }
    let mtu = mtu(at, l3.mtu, &subnets)?;
    let join_subnets = join_subnets(at, l3.role, &l3.join_subnets)?;
    Ok(Network {
        owner,
        topology: Topology::Layer3,
        role: l3.role,
        mtu,
        subnets,
        join_subnets,
        default_gateway_ips: Vec::new(),
        transport,
    })
}

fn layer2(
    owner: NetworkOwner,
    l2: &Layer2Config,
    at: &str,
    transport: String,
) -> Result<Network, FieldError> {
    let ipam_disabled = l2
        .ipam
        .as_ref()
        .and_then(|i| i.get("mode"))
        .and_then(|m| m.as_str())
        == Some("Disabled");
    let field = format!("{at}.subnets");
    if l2.subnets.is_empty() && !ipam_disabled {
        return err(
            field,
            "Subnets is required with ipam.mode is Enabled or unset",
        );
    }
    if ipam_disabled {
        if !l2.subnets.is_empty() {
            return err(field, "Subnets must be unset when ipam.mode is Disabled");
        }
        if l2.role != Role::Secondary {
            return err(
                format!("{at}.ipam.mode"),
                "Disabled ipam.mode is only supported for Secondary network",
            );
        }
    }
    let parsed = dual_stack(&field, &l2.subnets)?;
    let subnets: Vec<ClusterSubnet> = parsed
        .iter()
        .map(|c| ClusterSubnet {
            cidr: *c,
            host_len: c.prefix_len(),
        })
        .collect();
    let primary_only = |name: &str, set: bool| -> Result<(), FieldError> {
        if set && l2.role != Role::Primary {
            return err(
                format!("{at}.{name}"),
                format!("{name} is only supported for Primary network"),
            );
        }
        Ok(())
    };
    primary_only("defaultGatewayIPs", !l2.default_gateway_ips.is_empty())?;
    primary_only("reservedSubnets", !l2.reserved_subnets.is_empty())?;
    primary_only(
        "infrastructureSubnets",
        !l2.infrastructure_subnets.is_empty(),
    )?;
    let within = |name: &str, list: &[String]| -> Result<Vec<IpNet>, FieldError> {
        let mut out = Vec::new();
        for (i, s) in list.iter().enumerate() {
            let f = format!("{at}.{name}[{i}]");
            let c = cidr(&f, s, true)?;
            if !parsed.iter().any(|p| p.contains(&c)) {
                return err(f, format!("{name} must be subnetworks of the networks specified in the subnets field: {c} is not"));
            }
            out.push(c);
        }
        Ok(out)
    };
    let reserved = within("reservedSubnets", &l2.reserved_subnets)?;
    let infra = within("infrastructureSubnets", &l2.infrastructure_subnets)?;
    for (i, a) in infra.iter().enumerate() {
        if let Some(r) = reserved.iter().find(|r| overlaps(a, r)) {
            return err(
                format!("{at}.infrastructureSubnets[{i}]"),
                format!("infrastructureSubnets and reservedSubnets must not overlap: {a} and {r}"),
            );
        }
    }
    let mut gateways = Vec::new();
    for (i, s) in l2.default_gateway_ips.iter().enumerate() {
        let f = format!("{at}.defaultGatewayIPs[{i}]");
        let ip: IpAddr = match s.parse() {
            Ok(ip) => ip,
            Err(_) => return err(f, format!("{s:?} is not an IP address")),
        };
        if !parsed.iter().any(|p| p.contains(&ip)) {
            return err(f, format!("defaultGatewayIPs must belong to one of the subnets specified in the subnets field: {ip} does not"));
        }
        if !infra.is_empty() && !infra.iter().any(|p| p.contains(&ip)) {
            return err(
                f,
                "defaultGatewayIPs have to belong to infrastructureSubnets",
            );
        }
        gateways.push(ip);
    }
    if !gateways.is_empty() && gateways.len() != parsed.len() {
        return err(
            format!("{at}.defaultGatewayIPs"),
            "defaultGatewayIPs must be specified for all IP families",
        );
    }
    let mtu = mtu(at, l2.mtu, &subnets)?;
    let join_subnets = join_subnets(at, l2.role, &l2.join_subnets)?;
    Ok(Network {
        owner,
        topology: Topology::Layer2,
        role: l2.role,
        mtu,
        subnets,
        join_subnets,
        default_gateway_ips: gateways,
        transport,
    })
}

/// The update rules between the last accepted definition of a network and a new one:
/// topology, role, MTU, join subnets and Layer2 subnets are immutable; Layer3 subnets
/// may only be appended, each keeping its hostSubnet (OKEP-5377), and only for primary
/// networks.
pub fn check_update(old: &Network, new: &Network, at: &str) -> Result<(), FieldError> {
    if old.topology != new.topology {
        return err(
            format!("{at}.topology"),
            format!("Topology is immutable (was {})", old.topology),
        );
    }
    let layer = match new.topology {
        Topology::Layer3 => "layer3",
        Topology::Layer2 => "layer2",
        Topology::Localnet => "localnet",
    };
    let l = format!("{at}.{layer}");
    if old.role != new.role {
        return err(
            format!("{l}.role"),
            format!("role is immutable (was {})", old.role),
        );
    }
    if old.mtu != new.mtu {
        return err(
            format!("{l}.mtu"),
            format!("mtu is immutable (was {})", old.mtu),
        );
    }
    if old.join_subnets != new.join_subnets {
        return err(format!("{l}.joinSubnets"), "joinSubnets is immutable");
    }
    if new.topology != Topology::Layer3 {
        if old.subnets != new.subnets || old.default_gateway_ips != new.default_gateway_ips {
            return err(l, format!("{layer} is immutable"));
        }
        return Ok(());
    }
    for o in &old.subnets {
        match new.subnets.iter().find(|n| n.cidr == o.cidr) {
            None => {
                return err(
                    format!("{l}.subnets"),
                    format!(
                        "Removing existing subnets is not allowed: {} is gone",
                        o.cidr
                    ),
                )
            }
            Some(n) if n.host_len != o.host_len => {
                return err(
                    format!("{l}.subnets"),
                    format!(
                        "hostSubnet is immutable: {} was /{}, now /{}",
                        o.cidr, o.host_len, n.host_len
                    ),
                )
            }
            Some(_) => {}
        }
    }
    if new.role == Role::Secondary && old.subnets.len() != new.subnets.len() {
        return err(
            format!("{l}.subnets"),
            "Subnets is immutable for Secondary role",
        );
    }
    Ok(())
}

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
            masquerade: vec![
                "169.254.0.0/17".parse().expect("constant"),
                "fd69::/112".parse().expect("constant"),
            ],
            service_cidrs: vec!["10.96.0.0/16".parse().expect("constant")],
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::load::{parse_file, Object};
    use std::path::Path;

    fn udn(spec_yaml: &str) -> UserDefinedNetwork {
        let text = format!(
            "apiVersion: k8s.ovn.org/v1\nkind: UserDefinedNetwork\nmetadata: {{name: net1, namespace: red}}\nspec:\n{spec_yaml}"
        );
        let f = parse_file(Path::new("udn.yaml"), &text);
        assert!(f.problems.is_empty(), "{:?}", f.problems);
        match f.objects.into_iter().next().map(|o| o.1) {
            Some(Object::UserDefinedNetwork(u)) => u,
            other => panic!("{other:?}"),
        }
    }

    fn l3(subnets: &str) -> Result<Network, FieldError> {
        udn_network(&udn(&format!(
            "  topology: Layer3\n  layer3:\n    role: Primary\n    subnets: {subnets}\n"
        )))
    }

    #[test]
    fn a_layer3_network_gets_defaults_and_keeps_subnet_order() {
        let n = l3("[{cidr: 10.10.0.0/16, hostSubnet: 17}, {cidr: \"fd00:10::/48\"}, {cidr: 10.11.0.0/16, hostSubnet: 17}]").unwrap();
        assert_eq!(n.name(), "red_net1");
        assert_eq!(n.mtu, 1400);
        assert_eq!(n.subnets[1].host_len, 64);
        assert_eq!(n.subnets[2].cidr.to_string(), "10.11.0.0/16");
        assert_eq!(
            n.join_subnets
                .iter()
                .map(|j| j.to_string())
                .collect::<Vec<_>>(),
            ["100.65.0.0/16", "fd99::/64"]
        );
    }

    #[test]
    fn layer3_subnet_rules_name_the_entry() {
        let e = l3("[{cidr: 10.1.0.0/17}, {cidr: 10.1.0.0/16}]").unwrap_err();
        assert_eq!(e.field, "spec.layer3.subnets[1]");
        assert!(
            e.message.contains("10.1.0.0/16 overlaps 10.1.0.0/17"),
            "{e}"
        );
        let e = l3("[{cidr: 10.1.0.0/16}, {cidr: 10.1.0.0/16}]").unwrap_err();
        assert!(e.message.contains("same CIDR"), "{e}");
        let e = l3("[{cidr: 10.1.0.0/16, hostSubnet: 24}, {cidr: 10.2.0.0/16, hostSubnet: 25}]")
            .unwrap_err();
        assert_eq!(e.field, "spec.layer3.subnets[1].hostSubnet");
        assert!(e.message.contains("same hostSubnet"), "{e}");
        let e = l3("[{cidr: 10.1.0.0/16, hostSubnet: 16}]").unwrap_err();
        assert!(e.message.contains("must be smaller than CIDR"), "{e}");
        let e = l3("[{cidr: 10.1.0.0/16, hostSubnet: 32}]").unwrap_err();
        assert!(e.message.contains("< 32"), "{e}");
        let e = l3("[{cidr: nonsense}]").unwrap_err();
        assert_eq!(e.field, "spec.layer3.subnets[0].cidr");
        let e = l3("[]").unwrap_err();
        assert!(e.message.contains("at least one"), "{e}");
        let many: Vec<String> = (0..401)
            .map(|i| format!("{{cidr: 10.{}.{}.0/24, hostSubnet: 28}}", i / 256, i % 256))
            .collect();
        let e = l3(&format!("[{}]", many.join(", "))).unwrap_err();
        assert!(e.message.contains("at most 400"), "{e}");
        let ok: Vec<String> = (0..400)
            .map(|i| format!("{{cidr: 10.{}.{}.0/24, hostSubnet: 28}}", i / 256, i % 256))
            .collect();
        assert_eq!(
            l3(&format!("[{}]", ok.join(", "))).unwrap().subnets.len(),
            400
        );
    }

    #[test]
    fn topology_sections_and_roles_are_consistent() {
        let e = udn_network(&udn(
            "  topology: Layer3\n  layer2: {role: Primary, subnets: [10.0.0.0/16]}\n",
        ))
        .unwrap_err();
        assert_eq!(e.field, "spec.layer3");
        let e = udn_network(&udn(
            "  topology: Layer2\n  layer2: {role: Secondary, subnets: [10.0.0.0/16], joinSubnets: [100.66.0.0/16]}\n",
        ))
        .unwrap_err();
        assert_eq!(
            e.message,
            "JoinSubnets is only supported for Primary network"
        );
        let e = udn_network(&udn(
            "  topology: Layer2\n  layer2: {role: Primary, subnets: [10.0.0.0/16, 10.1.0.0/16]}\n",
        ))
        .unwrap_err();
        assert!(e.message.contains("different IP families"), "{e}");
        let e = udn_network(&udn(
            "  topology: Layer2\n  layer2: {role: Primary, subnets: [10.0.0.0/16, \"fd00::/64\"], mtu: 1200}\n",
        ))
        .unwrap_err();
        assert!(e.message.contains("1280"), "{e}");
        let e = udn_network(&udn(
            "  topology: Layer2\n  layer2: {role: Primary, subnets: [10.0.0.0/16], defaultGatewayIPs: [10.1.0.1]}\n",
        ))
        .unwrap_err();
        assert_eq!(e.field, "spec.layer2.defaultGatewayIPs[0]");
    }

    #[test]
    fn updates_may_only_append_layer3_subnets() {
        let old = l3("[{cidr: 10.1.0.0/16}]").unwrap();
        let grown = l3("[{cidr: 10.1.0.0/16}, {cidr: 10.2.0.0/16}]").unwrap();
        check_update(&old, &grown, "spec").unwrap();
        let e = check_update(&grown, &old, "spec").unwrap_err();
        assert!(
            e.message
                .contains("Removing existing subnets is not allowed: 10.2.0.0/16"),
            "{e}"
        );
        let changed = l3("[{cidr: 10.1.0.0/16, hostSubnet: 25}]").unwrap();
        let e = check_update(&old, &changed, "spec").unwrap_err();
        assert!(e.message.starts_with("hostSubnet is immutable"), "{e}");
        let l2a = udn_network(&udn(
            "  topology: Layer2\n  layer2: {role: Primary, subnets: [10.0.0.0/16]}\n",
        ))
        .unwrap();
        let l2b = udn_network(&udn(
            "  topology: Layer2\n  layer2: {role: Primary, subnets: [10.0.0.0/16], mtu: 1500}\n",
        ))
        .unwrap();
        assert!(check_update(&l2a, &l2b, "spec")
            .unwrap_err()
            .message
            .contains("mtu is immutable"));
        let e = check_update(&old, &l2a, "spec").unwrap_err();
        assert!(e.message.contains("Topology is immutable"), "{e}");
    }

    #[test]
    fn reserved_ranges_and_join_subnets_are_kept_out() {
        let r = Reserved::default();
        let e = check_reserved(&l3("[{cidr: 10.96.0.0/12}]").unwrap(), &r, "spec").unwrap_err();
        assert_eq!(e.field, "spec.layer3.subnets[0].cidr");
        assert!(e.message.contains("service CIDR 10.96.0.0/16"), "{e}");
        let e = check_reserved(&l3("[{cidr: 100.65.0.0/20}]").unwrap(), &r, "spec").unwrap_err();
        assert!(e.message.contains("join subnet"), "{e}");
        let e = check_reserved(&l3("[{cidr: 169.254.0.0/20}]").unwrap(), &r, "spec").unwrap_err();
        assert!(e.message.contains("masquerade"), "{e}");
        check_reserved(&l3("[{cidr: 10.1.0.0/16}]").unwrap(), &r, "spec").unwrap();
    }

    fn cnc(spec_yaml: &str) -> Result<ConnectSpec, FieldError> {
        let text = format!("apiVersion: k8s.ovn.org/v1\nkind: ClusterNetworkConnect\nmetadata: {{name: c}}\nspec:\n{spec_yaml}");
        let f = parse_file(Path::new("cnc.yaml"), &text);
        assert!(f.problems.is_empty(), "{:?}", f.problems);
        match &f.objects[0].1 {
            Object::ClusterNetworkConnect(c) => connect_spec(c),
            other => panic!("{other:?}"),
        }
    }

    const SEL: &str = "  networkSelectors:\n  - networkSelectionType: PrimaryUserDefinedNetworks\n    primaryUserDefinedNetworkSelector:\n      namespaceSelector: {matchLabels: {a: b}}\n";

    #[test]
    fn connect_specs_follow_the_crd_rules() {
        let ok = cnc(&format!("{SEL}  connectSubnets: [{{cidr: \"fd01::/64\", networkPrefix: 120}}, {{cidr: 192.168.0.0/16, networkPrefix: 24}}]\n  connectivity: [PodNetwork, ServiceNetwork]\n")).unwrap();
        assert_eq!(
            ok.connect_subnets[0].0.to_string(),
            "192.168.0.0/16",
            "IPv4 first"
        );
        assert!(ok.pod_network && ok.service_network);
        let okep = cnc(&format!("{SEL}  connectSubnets: [{{cidr: 192.168.0.0/16, networkPrefix: 24}}]\n  connectivityEnabled: [ClusterIPServiceNetwork]\n")).unwrap();
        assert!(okep.service_network && !okep.pod_network);
        let cases = [
            ("[{cidr: 192.168.0.0/16, networkPrefix: 24}, {cidr: 10.0.0.0/16, networkPrefix: 24}]", "[PodNetwork]", "different IP families"),
            ("[{cidr: 192.168.0.0/16, networkPrefix: 24}, {cidr: \"fd01::/64\", networkPrefix: 96}]", "[PodNetwork]", "matching host bits"),
            ("[{cidr: 192.168.0.1/16, networkPrefix: 24}]", "[PodNetwork]", "valid network address"),
            ("[{cidr: 192.168.0.0/16, networkPrefix: 16}]", "[PodNetwork]", "must be longer than the CIDR prefix"),
            ("[{cidr: 192.168.0.0/16, networkPrefix: 32}]", "[PodNetwork]", "must < 32"),
            ("[{cidr: 192.168.0.0/16, networkPrefix: 24}]", "[PodNetwork, PodNetwork]", "duplicate"),
            ("[{cidr: 192.168.0.0/16, networkPrefix: 24}]", "[Everything]", "unsupported value"),
            ("[]", "[PodNetwork]", "1 or 2 entries"),
        ];
        for (subnets, conn, want) in cases {
            let e = cnc(&format!(
                "{SEL}  connectSubnets: {subnets}\n  connectivity: {conn}\n"
            ))
            .unwrap_err();
            assert!(e.message.contains(want), "{subnets} {conn}: {e}");
        }
        let e = cnc("  networkSelectors: [{networkSelectionType: SecondaryUserDefinedNetworks}]\n  connectSubnets: [{cidr: 192.168.0.0/16, networkPrefix: 24}]\n  connectivity: [PodNetwork]\n").unwrap_err();
        assert_eq!(e.field, "spec.networkSelectors[0].networkSelectionType");
    }
}
