//! A UserDefinedNetwork's or ClusterUserDefinedNetwork's spec: its topology, role,
//! subnets, join subnets and MTU, as the CRDs' rules allow them.

use super::*;
use crate::api::meta::Meta;

/// A UserDefinedNetwork's network.
pub(crate) fn udn_network(udn: &UserDefinedNetwork) -> Result<Network, FieldError> {
    let owner = NetworkOwner::UserDefinedNetwork {
        namespace: udn.metadata.namespace().unwrap_or_default().to_owned(),
        name: udn.metadata.name().to_owned(),
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
pub(crate) fn cudn_network(cudn: &ClusterUserDefinedNetwork) -> Result<Network, FieldError> {
    let owner = NetworkOwner::ClusterUserDefinedNetwork {
        name: cudn.metadata.name().to_owned(),
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
            infrastructure_subnets: Vec::new(),
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
        let host_len = host_subnet(&f, s.host_subnet, &c)?;
        beside_earlier_subnets(&f, &subnets, &c, host_len)?;
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
        infrastructure_subnets: Vec::new(),
        transport,
    })
}

/// The host subnet length of Layer3 subnet `c` (field `f`): the one given, or /24
/// (/64 for IPv6), longer than `c` and leaving host addresses.
fn host_subnet(f: &str, given: Option<u8>, c: &IpNet) -> Result<u8, FieldError> {
    let bits = c.max_prefix_len();
    let field = format!("{f}.hostSubnet");
    let Some(h) = given else {
        let d = if bits == 32 { 24 } else { 64 };
        if d <= c.prefix_len() {
            return err(
                field,
                format!("the default host subnet /{d} is not smaller than {c}; set hostSubnet"),
            );
        }
        return Ok(d);
    };
    if !(1..=127).contains(&h) {
        return err(field, format!("{h} is not between 1 and 127"));
    }
    if h <= c.prefix_len() {
        return err(
            field,
            format!("HostSubnet must be smaller than CIDR subnet: /{h} is not longer than {c}"),
        );
    }
    if bits == 32 && h >= 32 {
        return err(field, "HostSubnet must < 32 for ipv4 CIDR");
    }
    if h >= bits {
        return err(field, format!("/{h} leaves no host addresses"));
    }
    Ok(h)
}

/// Layer3 subnet `c` (field `f`, host subnet `/host_len`) beside the subnets listed
/// before it: not the same, not overlapping, the same host subnet in one family.
fn beside_earlier_subnets(
    f: &str,
    earlier: &[ClusterSubnet],
    c: &IpNet,
    host_len: u8,
) -> Result<(), FieldError> {
    for (j, prev) in earlier.iter().enumerate() {
        if prev.cidr == *c {
            return err(
                f,
                format!("Subnets with same CIDR are not allowed: {c} is also subnets[{j}]"),
            );
        }
        if overlaps(&prev.cidr, c) {
            return err(
                f,
                format!("Subnets must not overlap or contain each other: {c} overlaps {} (subnets[{j}])", prev.cidr),
            );
        }
        if family(&prev.cidr) == family(c) && prev.host_len != host_len {
            return err(
                format!("{f}.hostSubnet"),
                format!(
                    "Subnets from the same IP family must use the same hostSubnet value: /{host_len} here, /{} in subnets[{j}]",
                    prev.host_len
                ),
            );
        }
    }
    Ok(())
}

/// A Layer2 network's subnets against its IPAM mode: required unless IPAM is
/// disabled, and then absent, for a secondary network only.
fn ipam(at: &str, field: &str, l2: &Layer2Config) -> Result<(), FieldError> {
    let disabled = l2
        .ipam
        .as_ref()
        .and_then(|i| i.get("mode"))
        .and_then(|m| m.as_str())
        == Some("Disabled");
    if !disabled {
        if l2.subnets.is_empty() {
            return err(
                field,
                "Subnets is required with ipam.mode is Enabled or unset",
            );
        }
        return Ok(());
    }
    if !l2.subnets.is_empty() {
        return err(field, "Subnets must be unset when ipam.mode is Disabled");
    }
    if l2.role != Role::Secondary {
        return err(
            format!("{at}.ipam.mode"),
            "Disabled ipam.mode is only supported for Secondary network",
        );
    }
    Ok(())
}

/// The CIDRs of list `name`, each inside one of the network's `subnets`.
fn within(
    at: &str,
    name: &str,
    list: &[String],
    subnets: &[IpNet],
) -> Result<Vec<IpNet>, FieldError> {
    let mut out = Vec::new();
    for (i, s) in list.iter().enumerate() {
        let f = format!("{at}.{name}[{i}]");
        let c = cidr(&f, s, true)?;
        if !subnets.iter().any(|p| p.contains(&c)) {
            return err(f, format!("{name} must be subnetworks of the networks specified in the subnets field: {c} is not"));
        }
        out.push(c);
    }
    Ok(out)
}

/// A Layer2 network's default gateway IPs: addresses in its `subnets` (and in its
/// infrastructure subnets `infra`, if any), one per family or none.
fn default_gateways(
    at: &str,
    list: &[String],
    subnets: &[IpNet],
    infra: &[IpNet],
) -> Result<Vec<IpAddr>, FieldError> {
    let mut gateways = Vec::new();
    for (i, s) in list.iter().enumerate() {
        let f = format!("{at}.defaultGatewayIPs[{i}]");
        let ip: IpAddr = match s.parse() {
            Ok(ip) => ip,
            Err(_) => return err(f, format!("{s:?} is not an IP address")),
        };
        if !subnets.iter().any(|p| p.contains(&ip)) {
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
    if !gateways.is_empty() && gateways.len() != subnets.len() {
        return err(
            format!("{at}.defaultGatewayIPs"),
            "defaultGatewayIPs must be specified for all IP families",
        );
    }
    Ok(gateways)
}

fn layer2(
    owner: NetworkOwner,
    l2: &Layer2Config,
    at: &str,
    transport: String,
) -> Result<Network, FieldError> {
    let field = format!("{at}.subnets");
    ipam(at, &field, l2)?;
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
    let reserved = within(at, "reservedSubnets", &l2.reserved_subnets, &parsed)?;
    let infra = within(
        at,
        "infrastructureSubnets",
        &l2.infrastructure_subnets,
        &parsed,
    )?;
    for (i, a) in infra.iter().enumerate() {
        if let Some(r) = reserved.iter().find(|r| overlaps(a, r)) {
            return err(
                format!("{at}.infrastructureSubnets[{i}]"),
                format!("infrastructureSubnets and reservedSubnets must not overlap: {a} and {r}"),
            );
        }
    }
    let gateways = default_gateways(at, &l2.default_gateway_ips, &parsed, &infra)?;
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
        infrastructure_subnets: infra,
        transport,
    })
}
