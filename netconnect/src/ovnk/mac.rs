//! MAC addresses derived from IP addresses, as OVN-Kubernetes derives them
//! (docs/ovn-kubernetes.md §1.5): `0a:58:` and the four IPv4 bytes; for IPv6, `0a:58:` and the first
//! four bytes of the SHA-256 of the address's RFC 5952 text. A port's MAC comes from
//! the first entry of its networks (IPv4 first in dual stack).

use std::net::IpAddr;

use sha2::{Digest, Sha256};

/// The MAC OVN-Kubernetes gives a port whose first address is `ip`.
pub fn from_ip(ip: IpAddr) -> String {
    let bytes: [u8; 4] = match ip {
        IpAddr::V4(v4) => v4.octets(),
        // Go's net.IP treats an IPv4-mapped IPv6 address as IPv4.
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.octets(),
            None => {
                let hash = Sha256::digest(v6.to_string().as_bytes());
                [hash[0], hash[1], hash[2], hash[3]]
            }
        },
    };
    format!(
        "0a:58:{:02x}:{:02x}:{:02x}:{:02x}",
        bytes[0], bytes[1], bytes[2], bytes[3]
    )
}

/// True when `s` is a MAC address (six pairs of hex digits separated by `:`).
pub(crate) fn is_mac(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_macs_carry_the_address() {
        // Reference vectors: rtos-isolatednet_test-node, rtoj, rtots.
        assert_eq!(from_ip("192.168.1.1".parse().unwrap()), "0a:58:c0:a8:01:01");
        assert_eq!(from_ip("100.65.0.1".parse().unwrap()), "0a:58:64:41:00:01");
        assert_eq!(from_ip("100.88.0.3".parse().unwrap()), "0a:58:64:58:00:03");
        assert_eq!(
            from_ip("::ffff:100.88.0.8".parse().unwrap()),
            "0a:58:64:58:00:08"
        );
    }

    #[test]
    fn ipv6_macs_hash_the_compressed_text() {
        let ip: IpAddr = "fd00:192:168:0::2".parse().unwrap();
        assert_eq!(ip.to_string(), "fd00:192:168::2");
        let h = Sha256::digest(b"fd00:192:168::2");
        assert_eq!(
            from_ip(ip),
            format!("0a:58:{:02x}:{:02x}:{:02x}:{:02x}", h[0], h[1], h[2], h[3])
        );
        assert!(is_mac(&from_ip(ip)));
        // OVN-Kubernetes' own vectors (util/net_unit_test.go, managementport tests).
        assert_eq!(from_ip("fd01::1234".parse().unwrap()), "0a:58:11:37:a6:26");
        assert_eq!(
            from_ip("fda6:0:0:1::1".parse().unwrap()),
            "0a:58:23:5a:40:f1"
        );
    }

    #[test]
    fn mac_syntax_is_checked() {
        assert!(is_mac("0a:58:0a:f4:00:01"));
        assert!(!is_mac("0a:58:0a:f4:00"));
        assert!(!is_mac("0a:58:0a:f4:00:0g"));
    }
}
