//! A UserDefinedNetwork's or ClusterUserDefinedNetwork's spec: its topology, role,
//! subnets, join subnets and MTU, as the CRDs' rules allow them.

use super::*;

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
