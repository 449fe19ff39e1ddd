//! Host subnets cut from a network's cluster subnets, one per node and family, with
//! OVN-Kubernetes' node subnet allocator's order (clustermanager/node/subnet_allocator.go):
//!
//! - ranges are tried in the order they were added, so subnets appended to a network
//!   (OKEP-5377) are used once the earlier ones are full and never move an existing
//!   allocation;
//! - inside a range, subnets go in index order, except that for IPv4, when the subnet
//!   bits cross a byte boundary, the index is rotated so that successive allocations
//!   change the most significant byte first (`172.16.0.0/12` in /20s: index 1 is
//!   `172.17.0.0/20`, not `172.16.16.0/20`);
//! - for IPv6 with 16 or more subnet bits, indexes whose low 16 bits are zero are
//!   skipped;
//! - at most 2^24 subnets of a range are considered.
//!
//! The cursor follows the rule of [`super::ids`]: after the highest index in use.

use ipnet::IpNet;

use crate::ovnk::addr::{from_u128, to_u128, with_len};

/// One cluster subnet and the host subnets handed out of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SubnetRange {
    network: IpNet,
    host_bits: u32,
    subnet_bits: u32,
    /// IPv4 rotation (left shift, 0 = none).
    left_shift: u32,
    /// The subnets handed out, by index: persistent, so that an allocator is copied
    /// in constant time (each network's is kept with its host subnets and edited when
    /// a node comes or goes).
    used: imbl::OrdSet<u32>,
}

/// Why a host subnet could not be had or kept.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SubnetError {
    /// No range of the family has a free subnet.
    #[error("no subnets available")]
    Exhausted,
    /// The subnet does not belong to any range.
    #[error("{0} does not belong to any of the network's subnets with its host subnet length")]
    Foreign(IpNet),
    /// The subnet is already handed out.
    #[error("{0} is already allocated")]
    Taken(IpNet),
}

impl SubnetRange {
    /// A range cutting `network` into subnets of prefix length `host_len`.
    pub fn new(network: IpNet, host_len: u8) -> SubnetRange {
        let network = network.trunc();
        let bits = if network.addr().is_ipv4() { 32 } else { 128 };
        let host_bits = bits - host_len as u32;
        let subnet_bits = host_len as u32 - network.prefix_len() as u32;
        let left_shift = if bits == 32
            && !host_bits.is_multiple_of(8)
            && (host_bits - 1) / 8 != (host_bits + subnet_bits - 1) / 8
        {
            8 - host_bits % 8
        } else {
            0
        };
        SubnetRange {
            network,
            host_bits,
            subnet_bits,
            left_shift,
            used: imbl::OrdSet::new(),
        }
    }

    fn count(&self) -> u32 {
        if self.subnet_bits >= 24 {
            1 << 24
        } else {
            1 << self.subnet_bits
        }
    }

    fn rotate_left(&self, n: u32, by: u32) -> u32 {
        let w = self.subnet_bits;
        if by == 0 || w == 0 {
            return n;
        }
        let mask = if w >= 32 { u32::MAX } else { (1 << w) - 1 };
        ((n << by) | (n >> (w - by))) & mask
    }

    /// The subnet of index `n`, `None` for an index that is skipped.
    fn subnet(&self, n: u32) -> Option<IpNet> {
        let is_v6 = self.network.addr().is_ipv6();
        if is_v6 && self.subnet_bits >= 16 && n & 0xFFFF == 0 {
            return None;
        }
        let offset = self.rotate_left(n, self.left_shift) as u128;
        let base = to_u128(self.network.network()) + (offset << self.host_bits);
        let bits = if is_v6 { 128 } else { 32 };
        Some(with_len(
            from_u128(self.network.addr(), base)?,
            (bits - self.host_bits) as u8,
        ))
    }

    /// The index of `subnet`, if it is one of this range's.
    fn index(&self, subnet: &IpNet) -> Option<u32> {
        let bits = if self.network.addr().is_ipv4() {
            32
        } else {
            128
        };
        if subnet.addr().is_ipv4() != self.network.addr().is_ipv4()
            || subnet.prefix_len() as u32 != bits - self.host_bits
            || !self.network.contains(&subnet.network())
        {
            return None;
        }
        let offset =
            (to_u128(subnet.network()) - to_u128(self.network.network())) >> self.host_bits;
        let offset = u32::try_from(offset).ok()?;
        let n = self.rotate_left(
            offset,
            (self.subnet_bits - self.left_shift) % self.subnet_bits.max(1),
        );
        // The rotation is a bijection on the subnet bits, so `n` gives `subnet` back;
        // only the count and the IPv6 indexes skipped remain to check.
        let skipped = subnet.addr().is_ipv6() && self.subnet_bits >= 16 && n & 0xFFFF == 0;
        (n < self.count() && !skipped).then_some(n)
    }

    fn mark(&mut self, subnet: &IpNet) -> Result<bool, SubnetError> {
        match self.index(subnet) {
            None => Ok(false),
            Some(n) if self.used.insert(n).is_none() => Ok(true),
            Some(_) => Err(SubnetError::Taken(*subnet)),
        }
    }

    fn allocate(&mut self) -> Option<IpNet> {
        let count = self.count();
        let start = match self.used.get_max() {
            Some(&h) if h + 1 < count => h + 1,
            _ => 0,
        };
        for i in 0..count {
            let n = (start + i) % count;
            if self.used.contains(&n) {
                continue;
            }
            if let Some(s) = self.subnet(n) {
                self.used.insert(n);
                return Some(s);
            }
        }
        None
    }

    fn release(&mut self, subnet: &IpNet) {
        if let Some(n) = self.index(subnet) {
            self.used.remove(&n);
        }
    }
}

/// A network's host subnet allocator: its ranges, per family in the order added.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SubnetAllocator {
    ranges: Vec<SubnetRange>,
}

impl SubnetAllocator {
    /// An allocator with no range.
    pub fn new() -> SubnetAllocator {
        SubnetAllocator::default()
    }

    /// Adds a range (a cluster subnet and its host subnet length) after the others.
    pub(crate) fn add_range(&mut self, network: IpNet, host_len: u8) {
        self.ranges.push(SubnetRange::new(network, host_len));
    }

    /// True when a range of the family of `ipv4` exists.
    pub(crate) fn has_family(&self, ipv4: bool) -> bool {
        self.ranges
            .iter()
            .any(|r| r.network.addr().is_ipv4() == ipv4)
    }

    /// True when `subnets` hold one of each family this allocator has a range of.
    pub(crate) fn covers(&self, subnets: &[IpNet]) -> bool {
        [true, false]
            .into_iter()
            .all(|v4| !self.has_family(v4) || subnets.iter().any(|s| s.addr().is_ipv4() == v4))
    }

    /// Marks `subnet` as handed out (read from an annotation).
    pub(crate) fn mark(&mut self, subnet: &IpNet) -> Result<(), SubnetError> {
        for r in &mut self.ranges {
            if r.mark(subnet)? {
                return Ok(());
            }
        }
        Err(SubnetError::Foreign(*subnet))
    }

    /// Hands out a subnet of the family of `ipv4` from the first range that has one.
    pub fn allocate(&mut self, ipv4: bool) -> Result<IpNet, SubnetError> {
        self.ranges
            .iter_mut()
            .filter(|r| r.network.addr().is_ipv4() == ipv4)
            .find_map(SubnetRange::allocate)
            .ok_or(SubnetError::Exhausted)
    }

    /// Frees `subnet`.
    pub fn release(&mut self, subnet: &IpNet) {
        for r in &mut self.ranges {
            r.release(subnet);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn take(a: &mut SubnetAllocator, ipv4: bool, n: usize) -> Vec<String> {
        (0..n)
            .map(|_| a.allocate(ipv4).unwrap().to_string())
            .collect()
    }

    #[test]
    fn ipv4_subnets_crossing_a_byte_boundary_rotate_like_ovn_kubernetes() {
        // docs/ovn-kubernetes.md §7: 172.16.0.0/12 with /20 hands out 172.16.0.0/20 then 172.17.0.0/20.
        let mut a = SubnetAllocator::new();
        a.add_range(net("172.16.0.0/12"), 20);
        assert_eq!(
            take(&mut a, true, 3),
            ["172.16.0.0/20", "172.17.0.0/20", "172.18.0.0/20"]
        );
        let r = SubnetRange::new(net("172.16.0.0/12"), 20);
        assert_eq!(r.subnet(16).unwrap().to_string(), "172.16.16.0/20");
        for n in [0, 1, 15, 16, 17, 255] {
            assert_eq!(
                r.index(&r.subnet(n).unwrap()),
                Some(n),
                "index of {n} round-trips"
            );
        }
    }

    #[test]
    fn subnets_cover_an_allocator_with_one_of_each_of_its_families() {
        let mut a = SubnetAllocator::new();
        a.add_range(net("10.1.0.0/16"), 24);
        assert!(a.covers(&[net("10.1.3.0/24")]));
        assert!(!a.covers(&[]));
        a.add_range(net("fd00:1::/48"), 64);
        assert!(!a.covers(&[net("10.1.3.0/24")]), "no IPv6");
        assert!(a.covers(&[net("10.1.3.0/24"), net("fd00:1:0:3::/64")]));
    }

    #[test]
    fn byte_aligned_subnets_go_in_order() {
        // OpenShift's familiar 10.128.0.0/14 in /23s crosses a byte boundary too:
        // 10.128.0.0, 10.129.0.0, 10.130.0.0, 10.131.0.0, then 10.128.2.0.
        let mut a = SubnetAllocator::new();
        a.add_range(net("10.128.0.0/14"), 23);
        assert_eq!(
            take(&mut a, true, 5),
            [
                "10.128.0.0/23",
                "10.129.0.0/23",
                "10.130.0.0/23",
                "10.131.0.0/23",
                "10.128.2.0/23"
            ]
        );
        let mut b = SubnetAllocator::new();
        b.add_range(net("10.1.0.0/16"), 24);
        assert_eq!(take(&mut b, true, 2), ["10.1.0.0/24", "10.1.1.0/24"]);
    }

    #[test]
    fn ipv6_skips_indexes_with_zero_low_bits() {
        let mut a = SubnetAllocator::new();
        a.add_range(net("fd00:10::/48"), 64);
        assert_eq!(
            take(&mut a, false, 2),
            ["fd00:10:0:1::/64", "fd00:10:0:2::/64"]
        );
        let mut small = SubnetAllocator::new();
        small.add_range(net("fd00::/120"), 124);
        assert_eq!(
            take(&mut small, false, 1),
            ["fd00::/124"],
            "fewer than 16 bits: index 0 is used"
        );
    }

    #[test]
    fn appended_ranges_are_used_once_the_first_is_full_and_move_nothing() {
        let mut a = SubnetAllocator::new();
        a.add_range(net("10.1.0.0/23"), 24);
        assert_eq!(take(&mut a, true, 2), ["10.1.0.0/24", "10.1.1.0/24"]);
        assert_eq!(a.allocate(true).unwrap_err(), SubnetError::Exhausted);
        a.add_range(net("10.2.0.0/23"), 24);
        assert_eq!(take(&mut a, true, 1), ["10.2.0.0/24"]);
        assert_eq!(
            a.allocate(false).unwrap_err(),
            SubnetError::Exhausted,
            "no IPv6 range"
        );
    }

    #[test]
    fn every_subnet_of_a_range_has_its_own_index_and_nothing_else_has_one() {
        // Rotated IPv4, byte-aligned IPv4, IPv6 with and without skipped indexes.
        for (cidr, len) in [
            ("10.128.0.0/14", 23),
            ("172.16.0.0/12", 20),
            ("10.1.0.0/16", 24),
            ("fd00:10::/44", 64),
            ("fd00::/120", 124),
        ] {
            let r = SubnetRange::new(net(cidr), len);
            let mut seen = BTreeSet::new();
            for n in 0..r.count().min(70_000) {
                match r.subnet(n) {
                    Some(s) => {
                        assert_eq!(r.index(&s), Some(n), "{cidr} /{len}: {s}");
                        assert!(seen.insert(s), "{cidr} /{len}: {s} twice");
                    }
                    None => assert_eq!(n & 0xFFFF, 0, "{cidr}: only IPv6's skipped indexes"),
                }
            }
            // The skipped IPv6 subnets, other lengths and outside ranges have none.
            if r.subnet_bits >= 16 && r.network.addr().is_ipv6() {
                assert_eq!(r.index(&with_len(r.network.network(), len)), None);
            }
            let other_len = with_len(r.network.network(), len - 1);
            assert_eq!(r.index(&other_len), None, "{cidr}: {other_len}");
            assert_eq!(r.index(&net("192.0.2.0/24")), None);
        }
    }

    #[test]
    fn marks_are_checked_and_steer_the_cursor() {
        let mut a = SubnetAllocator::new();
        a.add_range(net("10.1.0.0/16"), 24);
        a.mark(&net("10.1.5.0/24")).unwrap();
        assert_eq!(
            a.mark(&net("10.1.5.0/24")).unwrap_err(),
            SubnetError::Taken(net("10.1.5.0/24"))
        );
        assert!(matches!(
            a.mark(&net("10.2.0.0/24")),
            Err(SubnetError::Foreign(_))
        ));
        assert!(
            matches!(a.mark(&net("10.1.6.0/25")), Err(SubnetError::Foreign(_))),
            "wrong length"
        );
        assert_eq!(take(&mut a, true, 1), ["10.1.6.0/24"]);
        a.release(&net("10.1.5.0/24"));
        assert_eq!(take(&mut a, true, 1), ["10.1.7.0/24"]);
    }
}
