//! Address arithmetic on CIDRs: the n-th address of a subnet, point-to-point pairs.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

/// An address as a number (IPv4 in the low 32 bits).
pub(crate) fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u32::from(v4) as u128,
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// The address `n` of the same family as `like`; `None` when it does not fit.
pub(crate) fn from_u128(like: IpAddr, n: u128) -> Option<IpAddr> {
    match like {
        IpAddr::V4(_) => u32::try_from(n).ok().map(|v| IpAddr::V4(Ipv4Addr::from(v))),
        IpAddr::V6(_) => Some(IpAddr::V6(Ipv6Addr::from(n))),
    }
}

/// The `n`-th address of `net` (0 is the network address), if inside it.
pub fn nth(net: &IpNet, n: u128) -> Option<IpAddr> {
    let base = to_u128(net.network());
    let ip = from_u128(net.addr(), base.checked_add(n)?)?;
    net.contains(&ip).then_some(ip)
}

/// `ip` with prefix length `len` (the address kept, not masked).
pub(crate) fn with_len(ip: IpAddr, len: u8) -> IpNet {
    match ip {
        IpAddr::V4(v4) => IpNet::V4(Ipv4Net::new(v4, len.min(32)).expect("length bounded")),
        IpAddr::V6(v6) => IpNet::V6(Ipv6Net::new(v6, len.min(128)).expect("length bounded")),
    }
}

/// The `n`-th address of `net` with `net`'s prefix length (`10.1.0.1/24` for n = 1).
pub(crate) fn nth_in(net: &IpNet, n: u128) -> Option<IpNet> {
    nth(net, n).map(|ip| with_len(ip, net.prefix_len()))
}

/// The point-to-point pair `idx` of `net`: addresses `2·idx` and `2·idx + 1` with a
/// /31 (IPv4) or /127 (IPv6) mask. `None` when the pair is outside `net`.
pub(crate) fn p2p_pair(net: &IpNet, idx: u128) -> Option<(IpNet, IpNet)> {
    let len = if net.addr().is_ipv4() { 31 } else { 127 };
    let first = nth(net, idx.checked_mul(2)?)?;
    let second = nth(net, idx * 2 + 1)?;
    Some((with_len(first, len), with_len(second, len)))
}

/// The number of addresses a prefix of length `len` holds in a family of `bits` bits,
/// saturating at `u128::MAX` (an IPv6 /0).
pub fn size(bits: u8, len: u8) -> u128 {
    let host = (bits - len.min(bits)) as u32;
    if host >= 128 {
        u128::MAX
    } else {
        1u128 << host
    }
}

/// A subnet (its network address) and a gateway, an address or an address with the
/// subnet's prefix length, that is a host address of it; both normalized, the gateway
/// with the subnet's prefix length. An error says which is wrong and why.
pub fn subnet_and_gateway(subnet: &str, gateway: &str) -> Result<(IpNet, IpNet), String> {
    let s: IpNet = subnet
        .parse()
        .map_err(|_| format!("subnet {subnet:?} is not a CIDR"))?;
    if s.trunc() != s {
        return Err(format!(
            "subnet {s} is not a network address (did you mean {}?)",
            s.trunc()
        ));
    }
    let g: IpNet = match gateway.parse::<IpNet>() {
        Ok(g) => g,
        Err(_) => {
            let ip: IpAddr = gateway
                .parse()
                .map_err(|_| format!("gateway {gateway:?} is not an address"))?;
            with_len(ip, s.prefix_len())
        }
    };
    if !s.contains(&g.addr()) || g.prefix_len() != s.prefix_len() || g.addr() == s.network() {
        return Err(format!("gateway {g} is not a host address of subnet {s}"));
    }
    Ok((s, g))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn nth_addresses_stay_inside() {
        assert_eq!(
            nth_in(&net("10.1.0.0/24"), 1).unwrap().to_string(),
            "10.1.0.1/24"
        );
        assert_eq!(
            nth_in(&net("fd00::/64"), 2).unwrap().to_string(),
            "fd00::2/64"
        );
        assert_eq!(nth(&net("10.1.0.0/24"), 256), None);
        assert_eq!(nth(&net("255.255.255.0/24"), 300), None);
    }

    #[test]
    fn pairs_are_even_then_odd() {
        let (a, b) = p2p_pair(&net("100.88.0.0/16"), 2).unwrap();
        assert_eq!(
            (a.to_string(), b.to_string()),
            ("100.88.0.4/31".into(), "100.88.0.5/31".into())
        );
        let (a, b) = p2p_pair(&net("fd97::/64"), 4).unwrap();
        assert_eq!(
            (a.to_string(), b.to_string()),
            ("fd97::8/127".into(), "fd97::9/127".into())
        );
        assert_eq!(p2p_pair(&net("192.168.0.0/24"), 128), None);
    }

    #[test]
    fn sizes_saturate() {
        assert_eq!(size(32, 24), 256);
        assert_eq!(size(128, 64), 1 << 64);
        assert_eq!(size(128, 0), u128::MAX);
    }
}
