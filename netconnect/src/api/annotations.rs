//! The annotations OVN-Kubernetes' cluster manager writes, with the same keys and
//! formats, so that objects it annotated can be read here and objects annotated here
//! read by it.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

/// On Nodes: the node's id, a decimal integer from 2 (0 and 1 are reserved).
pub(crate) const NODE_ID: &str = "k8s.ovn.org/node-id";
/// On Nodes: the interconnect zone the node is in (default: the node's own name).
pub(crate) const ZONE_NAME: &str = "k8s.ovn.org/zone-name";
/// On Nodes: the OVS system-id of the node's chassis.
pub(crate) const NODE_CHASSIS_ID: &str = "k8s.ovn.org/node-chassis-id";
/// On Nodes: host subnets by network name, `{"<netName>": ["<cidr>", …]}`.
pub(crate) const NODE_SUBNETS: &str = "k8s.ovn.org/node-subnets";
/// On Nodes: the node's transit switch port addresses,
/// `{"ipv4":"100.88.0.<id>/16","ipv6":"fd97::<id>/64"}`.
pub(crate) const NODE_TRANSIT_SWITCH_PORT_IFADDR: &str =
    "k8s.ovn.org/node-transit-switch-port-ifaddr";
/// On Nodes: the gateway configuration, `{"default": {"mode": …, …}}`.
pub(crate) const L3_GATEWAY_CONFIG: &str = "k8s.ovn.org/l3-gateway-config";

/// The annotations that hold allocations (what OVN-Kubernetes' cluster manager writes
/// and the daemon saves in its status directory).
pub const ALLOCATIONS: &[&str] = &[
    NODE_ID,
    NODE_SUBNETS,
    NODE_TRANSIT_SWITCH_PORT_IFADDR,
    NETWORK_ID,
    TUNNEL_KEYS,
    CONNECT_ROUTER_TUNNEL_KEY,
    NETWORK_CONNECT_SUBNET,
    super::pod::OVN_IFACE_LIST,
];
/// Node annotation: every address of the node's host, as CIDRs (a JSON list); the
/// addresses a NodePort answers on.
pub(crate) const HOST_CIDRS: &str = "k8s.ovn.org/host-cidrs";
/// On Nodes: `false` when the node's gateway cannot set the MTU of what it sends
/// (gateway-facing ports then carry no `gateway_mtu`).
pub(crate) const GATEWAY_MTU_SUPPORT: &str = "k8s.ovn.org/gateway-mtu-support";
/// On networks (a NAD in OVN-Kubernetes; here the UDN or CUDN): the network id.
pub(crate) const NETWORK_ID: &str = "k8s.ovn.org/network-id";
/// On primary Layer2 networks: `[<switch key>, <transit router key>]`.
pub(crate) const TUNNEL_KEYS: &str = "k8s.ovn.org/tunnel-keys";
/// On ClusterNetworkConnects: the connect router's tunnel key.
pub(crate) const CONNECT_ROUTER_TUNNEL_KEY: &str = "k8s.ovn.org/connect-router-tunnel-key";
/// On ClusterNetworkConnects: each connected network's connect subnets,
/// `{"layer3_1":{"ipv4":"192.168.0.0/24","ipv6":"fd00::/120"}}`.
pub(crate) const NETWORK_CONNECT_SUBNET: &str = "k8s.ovn.org/network-connect-subnet";

/// Why an annotation could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BadAnnotation {
    /// The annotation key.
    pub key: &'static str,
    /// Its value.
    pub value: String,
    /// What is wrong.
    pub reason: String,
}

impl std::fmt::Display for BadAnnotation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "annotation {} = {:?}: {}",
            self.key, self.value, self.reason
        )
    }
}

fn bad(key: &'static str, value: &str, reason: impl Into<String>) -> BadAnnotation {
    BadAnnotation {
        key,
        value: value.to_owned(),
        reason: reason.into(),
    }
}

/// Reads an integer annotation such as [`NODE_ID`] or [`NETWORK_ID`].
pub(crate) fn parse_id(key: &'static str, value: &str) -> Result<u32, BadAnnotation> {
    value
        .trim()
        .parse::<u32>()
        .map_err(|e| bad(key, value, format!("not a non-negative integer ({e})")))
}

/// Reads [`NODE_SUBNETS`]: each network's subnets, given as a list or (older,
/// single-stack) as one string.
pub(crate) fn parse_node_subnets(
    value: &str,
) -> Result<BTreeMap<String, Vec<IpNet>>, BadAnnotation> {
    use serde::de::DeserializeSeed;
    // A CIDR that does not parse stops the reading; why is kept here.
    let mut not_cidr = None;
    let mut de = serde_json::Deserializer::from_str(value);
    let read = cidr_text::Subnets {
        not_cidr: &mut not_cidr,
    }
    .deserialize(&mut de)
    .and_then(|m| de.end().map(|()| m));
    read.map_err(|e| match not_cidr {
        Some(why) => bad(NODE_SUBNETS, value, why),
        None => bad(
            NODE_SUBNETS,
            value,
            format!("not a JSON object of subnets ({e})"),
        ),
    })
}

/// Writes [`NODE_SUBNETS`] as OVN-Kubernetes does: every network as a list.
pub(crate) fn format_node_subnets(subnets: &BTreeMap<String, Vec<IpNet>>) -> String {
    let entries: Vec<(&str, &[IpNet])> = subnets
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_slice()))
        .collect();
    write_node_subnets(&entries)
}

/// [`format_node_subnets`] of entries given in name order (each name once).
pub(crate) fn write_node_subnets(entries: &[(&str, &[IpNet])]) -> String {
    // Written by hand: at 500 networks x 500 nodes a reload writes 250k CIDRs, and
    // their text through `Display` and a serializer was most of the time it took.
    // `"name":["a.b.c.d/len",…]`: the name, its quotes and brackets, 20 bytes a CIDR.
    let size: usize = entries
        .iter()
        .map(|(net, cidrs)| net.len() + 6 + 20 * cidrs.len())
        .sum();
    let mut out = String::with_capacity(2 + size);
    out.push('{');
    for (i, (net, cidrs)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_entry(&mut out, net, cidrs);
    }
    out.push('}');
    out
}

/// Appends one entry of [`write_node_subnets`]: `"name":["cidr",…]`.
fn push_entry(out: &mut String, net: &str, cidrs: &[IpNet]) {
    cidr_text::push_json_str(out, net);
    out.push_str(":[");
    for (j, c) in cidrs.iter().enumerate() {
        if j > 0 {
            out.push(',');
        }
        out.push('"');
        cidr_text::push_cidr(out, c);
        out.push('"');
    }
    out.push(']');
}

/// The [`write_node_subnets`] text `text` with the entries of the networks `changes`
/// names (in name order, each once) set to the CIDRs given, or taken out for none
/// (or an empty list): the text [`write_node_subnets`] writes for the entries that
/// result, `{}` for none. `None` when `text` is not one [`write_node_subnets`] writes
/// where the changes fall, or a name would be escaped.
///
/// Each entry is found by a binary search through the text, so that a network added
/// to a node's 500 costs a look-up and a copy of the text, not 500 entries written.
pub(crate) fn splice_node_subnets(
    text: &str,
    changes: &[(&str, Option<&[IpNet]>)],
) -> Option<String> {
    let t = text.as_bytes();
    if t.len() < 2 || t[0] != b'{' || t[t.len() - 1] != b'}' {
        return None;
    }
    if changes.windows(2).any(|w| w[0].0 >= w[1].0) {
        return None;
    }
    let close = t.len() - 1;
    let mut out = String::with_capacity(text.len() + 64);
    out.push('{');
    // Entries after the first follow a comma.
    let comma = |out: &mut String| {
        if out.len() > 1 {
            out.push(',');
        }
    };
    // At the first entry not looked at yet (or at the closing brace).
    let mut cursor = 1;
    for (net, cidrs) in changes {
        if !cidr_text::written_plain(net) {
            return None;
        }
        let at = entries::first_not_below(t, cursor, close, net.as_bytes())?;
        // The entries before it stay as they are (without the comma after them).
        if at > cursor {
            let before = if at == close { at } else { at - 1 };
            comma(&mut out);
            out.push_str(&text[cursor..before]);
        }
        cursor = at;
        if at < close && entries::name(t, at)? == net.as_bytes() {
            let end = entries::end(t, at)?;
            cursor = if end < close { end + 1 } else { end };
        }
        if let Some(cidrs) = cidrs.filter(|c| !c.is_empty()) {
            comma(&mut out);
            push_entry(&mut out, net, cidrs);
        }
    }
    if cursor < close {
        comma(&mut out);
        out.push_str(&text[cursor..close]);
    }
    out.push('}');
    Some(out)
}

/// The entries of a [`write_node_subnets`] text, `"name":["cidr",…]` separated by
/// commas: an entry starts at a quote that follows `{` or `],` and ends after its
/// first `]` (neither names written unescaped nor CIDRs hold a bracket).
mod entries {
    /// The name of the entry starting at `at`; `None` when none starts there.
    pub fn name(t: &[u8], at: usize) -> Option<&[u8]> {
        let rest = t.get(at..)?.strip_prefix(b"\"")?;
        let len = rest.iter().position(|&b| b == b'"' || b == b'\\')?;
        (rest[len] == b'"' && rest[len + 1..].starts_with(b":[")).then(|| &rest[..len])
    }

    /// Where the entry starting at `at` ends (after its `]`, at a `,` or the closing
    /// brace).
    pub fn end(t: &[u8], at: usize) -> Option<usize> {
        let end = at + t[at..].iter().position(|&b| b == b']')? + 1;
        matches!(t.get(end), Some(b',' | b'}')).then_some(end)
    }

    /// The first entry start in `from..to`, `to` for none (`from` is one or `to`).
    fn next_start(t: &[u8], from: usize, to: usize) -> usize {
        let from = from.max(2);
        t[from - 2..to]
            .windows(3)
            .position(|w| w == b"],\"")
            .map_or(to, |i| from + i)
    }

    /// The first entry in `from..close` (from an entry start, or `close`) whose name
    /// is not below `net`; `close` when there is none. `None` when the text does not
    /// read as entries where looked at.
    pub(crate) fn first_not_below(
        t: &[u8],
        from: usize,
        close: usize,
        net: &[u8],
    ) -> Option<usize> {
        let (mut lo, mut hi) = (from, close);
        // The answer lies in `lo..=hi`; both are entry starts or `close`.
        loop {
            if lo == hi || name(t, lo)? >= net {
                return Some(lo);
            }
            // `lo` is below: an entry start halfway to `hi`, else the next one.
            let mut mid = next_start(t, lo + (hi - lo) / 2 + 1, hi);
            if mid == hi {
                mid = next_start(t, lo + 1, hi);
                if mid == hi {
                    return Some(hi);
                }
            }
            if name(t, mid)? >= net {
                hi = mid;
            } else {
                lo = mid;
            }
        }
    }
}

/// How the CIDRs of [`NODE_SUBNETS`] are read and written without a string of their
/// own each (250k of them at 500 networks x 500 nodes).
mod cidr_text {
    use std::borrow::Cow;
    use std::collections::BTreeMap;
    use std::fmt::{self, Write};

    use ipnet::IpNet;
    use serde::de::{DeserializeSeed, Deserializer, Error, MapAccess, SeqAccess, Visitor};
    use serde::Deserialize;

    /// True when `s` is written as a JSON string between quotes as it is (no byte of
    /// it needs an escape).
    pub(crate) fn written_plain(s: &str) -> bool {
        s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\')
    }

    /// Appends `s` as a JSON string.
    pub(crate) fn push_json_str(out: &mut String, s: &str) {
        if written_plain(s) {
            out.push('"');
            out.push_str(s);
            out.push('"');
        } else {
            out.push_str(&serde_json::to_string(s).expect("strings serialize"));
        }
    }

    /// Appends the text of `net` (`a.b.c.d/len`, or IPv6 as `Display` writes it).
    pub(crate) fn push_cidr(out: &mut String, net: &IpNet) {
        match net {
            IpNet::V4(v4) => {
                for (i, octet) in v4.addr().octets().into_iter().enumerate() {
                    if i > 0 {
                        out.push('.');
                    }
                    push_u8(out, octet);
                }
                out.push('/');
                push_u8(out, v4.prefix_len());
            }
            IpNet::V6(_) => write!(out, "{net}").expect("a String takes any text"),
        }
    }

    fn push_u8(out: &mut String, n: u8) {
        if n >= 100 {
            out.push(char::from(b'0' + n / 100));
        }
        if n >= 10 {
            out.push(char::from(b'0' + n / 10 % 10));
        }
        out.push(char::from(b'0' + n % 10));
    }

    /// The whole annotation: a map of network names to their CIDRs, each parsed where
    /// it is read. The first text that is not a CIDR is described in `not_cidr`.
    pub struct Subnets<'a> {
        pub(crate) not_cidr: &'a mut Option<String>,
    }

    impl<'de> DeserializeSeed<'de> for Subnets<'_> {
        type Value = BTreeMap<String, Vec<IpNet>>;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(self)
        }
    }

    impl<'de> Visitor<'de> for Subnets<'_> {
        type Value = BTreeMap<String, Vec<IpNet>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of network names to CIDRs")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(map.size_hint().unwrap_or(8));
            while let Some(Text(net)) = map.next_key()? {
                let cidrs = map.next_value_seed(Cidrs {
                    net: &net,
                    not_cidr: &mut *self.not_cidr,
                })?;
                out.push((net.into_owned(), cidrs));
            }
            // Built in one go (the names come in order as written here); a name given
            // twice keeps its last value.
            Ok(out.into_iter().collect())
        }
    }

    /// One network's entry: a list of CIDRs or (older, single-stack) one.
    struct Cidrs<'a> {
        net: &'a str,
        not_cidr: &'a mut Option<String>,
    }

    impl Cidrs<'_> {
        fn parse<E: Error>(&mut self, text: &str) -> Result<IpNet, E> {
            text.parse().map_err(|_| {
                *self.not_cidr = Some(format!("{text:?} of {} is not a CIDR", self.net));
                E::custom("not a CIDR")
            })
        }
    }

    impl<'de> DeserializeSeed<'de> for Cidrs<'_> {
        type Value = Vec<IpNet>;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Cidrs<'_> {
        type Value = Vec<IpNet>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a CIDR or a list of CIDRs")
        }
        fn visit_str<E: Error>(mut self, v: &str) -> Result<Self::Value, E> {
            Ok(vec![self.parse(v)?])
        }
        fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(2));
            while let Some(Text(t)) = seq.next_element()? {
                out.push(self.parse(&t)?);
            }
            Ok(out)
        }
    }

    /// A string, borrowed from the annotation when it has no escapes.
    struct Text<'a>(Cow<'a, str>);

    struct TextVisitor;
    impl<'de> Visitor<'de> for TextVisitor {
        type Value = Cow<'de, str>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(Cow::Borrowed(v))
        }
        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Cow::Owned(v.to_owned()))
        }
    }

    impl<'de> Deserialize<'de> for Text<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_str(TextVisitor).map(Text)
        }
    }
}

/// [`NODE_TRANSIT_SWITCH_PORT_IFADDR`]: one address per family.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PrimaryIfAddr {
    /// The IPv4 address with its prefix length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<String>,
    /// The IPv6 address with its prefix length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ipv6: Option<String>,
}

/// Reads [`NODE_TRANSIT_SWITCH_PORT_IFADDR`] into its addresses (IPv4 first).
pub(crate) fn parse_transit_ifaddr(value: &str) -> Result<Vec<IpNet>, BadAnnotation> {
    let key = NODE_TRANSIT_SWITCH_PORT_IFADDR;
    let raw: PrimaryIfAddr = serde_json::from_str(value)
        .map_err(|e| bad(key, value, format!("not {{\"ipv4\":…,\"ipv6\":…}} ({e})")))?;
    let mut out = Vec::new();
    for (family, s) in [("ipv4", &raw.ipv4), ("ipv6", &raw.ipv6)] {
        if let Some(s) = s {
            let n: IpNet = s.parse().map_err(|_| {
                bad(
                    key,
                    value,
                    format!("{family} {s:?} is not an address/prefix"),
                )
            })?;
            if (family == "ipv4") != n.addr().is_ipv4() {
                return Err(bad(key, value, format!("{family} holds {s}")));
            }
            out.push(n);
        }
    }
    if out.is_empty() {
        return Err(bad(key, value, "no address"));
    }
    Ok(out)
}

/// Writes [`NODE_TRANSIT_SWITCH_PORT_IFADDR`].
pub(crate) fn format_transit_ifaddr(addrs: &[IpNet]) -> String {
    let mut v = PrimaryIfAddr::default();
    for a in addrs {
        if a.addr().is_ipv4() {
            v.ipv4 = Some(a.to_string());
        } else {
            v.ipv6 = Some(a.to_string());
        }
    }
    serde_json::to_string(&v).expect("strings serialize")
}

/// Reads [`TUNNEL_KEYS`], a JSON list of integers.
pub(crate) fn parse_tunnel_keys(value: &str) -> Result<Vec<u32>, BadAnnotation> {
    serde_json::from_str(value)
        .map_err(|e| bad(TUNNEL_KEYS, value, format!("not a JSON list of keys ({e})")))
}

/// Writes [`TUNNEL_KEYS`].
pub(crate) fn format_tunnel_keys(keys: &[u32]) -> String {
    serde_json::to_string(keys).expect("integers serialize")
}

/// Reads [`NETWORK_CONNECT_SUBNET`]: each connected network's connect subnets (IPv4
/// first) by owner key (`layer3_<id>`, `layer2_<id>`).
pub(crate) fn parse_connect_subnets(
    value: &str,
) -> Result<BTreeMap<String, Vec<IpNet>>, BadAnnotation> {
    let key = NETWORK_CONNECT_SUBNET;
    let raw: BTreeMap<String, PrimaryIfAddr> = serde_json::from_str(value).map_err(|e| {
        bad(
            key,
            value,
            format!("not {{\"layer3_<id>\": {{\"ipv4\": …, \"ipv6\": …}}}} ({e})"),
        )
    })?;
    let mut out = BTreeMap::new();
    for (owner, addrs) in raw {
        let mut subnets = Vec::new();
        for (family, s) in [("ipv4", &addrs.ipv4), ("ipv6", &addrs.ipv6)] {
            let Some(s) = s else { continue };
            let n: IpNet = s
                .parse()
                .map_err(|_| bad(key, value, format!("{owner}: {family} {s:?} is not a CIDR")))?;
            if (family == "ipv4") != n.addr().is_ipv4() || n.trunc() != n {
                return Err(bad(key, value, format!("{owner}: {family} holds {s}")));
            }
            subnets.push(n);
        }
        if subnets.is_empty() {
            return Err(bad(key, value, format!("{owner}: no subnet")));
        }
        out.insert(owner, subnets);
    }
    Ok(out)
}

/// Writes [`NETWORK_CONNECT_SUBNET`].
pub(crate) fn format_connect_subnets(subnets: &BTreeMap<String, Vec<IpNet>>) -> String {
    let raw: BTreeMap<&String, PrimaryIfAddr> = subnets
        .iter()
        .map(|(owner, nets)| {
            let mut v = PrimaryIfAddr::default();
            for n in nets {
                if n.addr().is_ipv4() {
                    v.ipv4 = Some(n.to_string());
                } else {
                    v.ipv6 = Some(n.to_string());
                }
            }
            (owner, v)
        })
        .collect();
    serde_json::to_string(&raw).expect("strings serialize")
}

/// The node's gateway, from `L3_GATEWAY_CONFIG` (its `default` entry).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct L3GatewayConfig {
    /// `shared` or `local`.
    pub mode: String,
    /// The external bridge, e.g. `breth0`.
    pub(crate) bridge_id: String,
    /// The OVS interface id of the gateway's external port.
    pub(crate) interface_id: String,
    /// The external port's MAC.
    pub(crate) mac_address: String,
    /// The node's addresses on the external network, with prefix lengths.
    pub(crate) ip_addresses: Vec<IpNet>,
    /// The default gateways.
    pub next_hops: Vec<IpAddr>,
    /// Whether NodePort services are served.
    pub(crate) node_port_enable: bool,
    /// The VLAN of the external network, if any.
    pub(crate) vlan_id: Option<u16>,
}

/// Reads [`HOST_CIDRS`]: the addresses without their prefix lengths, each once, in
/// the order of their text (as OVN-Kubernetes lists them).
pub(crate) fn parse_host_cidrs(value: &str) -> Result<Vec<IpAddr>, BadAnnotation> {
    let cidrs: Vec<String> = serde_json::from_str(value)
        .map_err(|e| bad(HOST_CIDRS, value, format!("not a JSON list of CIDRs ({e})")))?;
    let mut by_text = BTreeMap::new();
    for c in &cidrs {
        let net = c
            .parse::<IpNet>()
            .map_err(|_| bad(HOST_CIDRS, value, format!("{c:?} is not a CIDR")))?;
        by_text.insert(net.addr().to_string(), net.addr());
    }
    Ok(by_text.into_values().collect())
}

/// Reads [`L3_GATEWAY_CONFIG`]. `None` for `mode: disabled` (no gateway).
pub(crate) fn parse_l3_gateway_config(
    value: &str,
) -> Result<Option<L3GatewayConfig>, BadAnnotation> {
    let key = L3_GATEWAY_CONFIG;
    #[derive(Deserialize)]
    struct Raw {
        mode: String,
        #[serde(rename = "bridge-id", default)]
        bridge_id: String,
        #[serde(rename = "interface-id", default)]
        interface_id: String,
        #[serde(rename = "mac-address", default)]
        mac_address: String,
        #[serde(rename = "ip-addresses", default)]
        ip_addresses: Vec<String>,
        #[serde(rename = "ip-address", default)]
        ip_address: String,
        #[serde(rename = "next-hops", default)]
        next_hops: Vec<String>,
        #[serde(rename = "next-hop", default)]
        next_hop: String,
        #[serde(rename = "node-port-enable", default)]
        node_port_enable: String,
        #[serde(rename = "vlan-id", default)]
        vlan_id: String,
    }
    let mut all: BTreeMap<String, Raw> = serde_json::from_str(value)
        .map_err(|e| bad(key, value, format!("not {{\"default\": {{…}}}} ({e})")))?;
    let raw = all
        .remove("default")
        .ok_or_else(|| bad(key, value, "no \"default\" entry"))?;
    match raw.mode.as_str() {
        "disabled" => return Ok(None),
        "shared" | "local" => {}
        m => {
            return Err(bad(
                key,
                value,
                format!("mode {m:?} is not shared, local or disabled"),
            ))
        }
    }
    let mut ips = raw.ip_addresses;
    if ips.is_empty() && !raw.ip_address.is_empty() {
        ips.push(raw.ip_address);
    }
    let ip_addresses = ips
        .iter()
        .map(|s| {
            s.parse::<IpNet>().map_err(|_| {
                bad(
                    key,
                    value,
                    format!("ip-addresses {s:?} is not an address/prefix"),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut hops = raw.next_hops;
    if hops.is_empty() && !raw.next_hop.is_empty() {
        hops.push(raw.next_hop);
    }
    let next_hops = hops
        .iter()
        .map(|s| {
            s.parse::<IpAddr>()
                .map_err(|_| bad(key, value, format!("next-hops {s:?} is not an address")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if !crate::ovnk::mac::is_mac(&raw.mac_address) {
        return Err(bad(
            key,
            value,
            format!("mac-address {:?} is not a MAC address", raw.mac_address),
        ));
    }
    let vlan_id = match raw.vlan_id.as_str() {
        "" | "0" => None,
        v => Some(
            v.parse::<u16>()
                .ok()
                .filter(|v| *v <= 4095)
                .ok_or_else(|| bad(key, value, format!("vlan-id {v:?} is not 0 to 4095")))?,
        ),
    };
    Ok(Some(L3GatewayConfig {
        mode: raw.mode,
        bridge_id: raw.bridge_id,
        interface_id: raw.interface_id,
        mac_address: raw.mac_address.to_ascii_lowercase(),
        ip_addresses,
        next_hops,
        node_port_enable: raw.node_port_enable == "true",
        vlan_id,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spliced_node_subnets_text_is_the_text_written_for_its_entries() {
        // Random maps and changes (a fixed seed): splicing the changes into a map's
        // text gives the text of the map with the changes made.
        let mut next = crate::testing::random(0x2545_f491_4f6c_dd1du64);
        let names: Vec<String> = (0..40).map(|i| format!("ns{}.net{i}", i % 3)).collect();
        let cidrs = |next: &mut dyn FnMut(u64) -> u64| -> Vec<IpNet> {
            (0..next(3))
                .map(|_| match next(2) {
                    0 => format!("10.{}.{}.0/24", next(256), next(256)),
                    _ => format!("fd00:{:x}::/64", next(65536)),
                })
                .map(|c| c.parse().unwrap())
                .collect()
        };
        let mut spliced = 0;
        for _ in 0..3000 {
            let mut map: BTreeMap<String, Vec<IpNet>> = BTreeMap::new();
            for n in &names {
                if next(2) == 0 {
                    map.insert(n.clone(), cidrs(&mut next));
                }
            }
            let text = format_node_subnets(&map);
            let mut changes: BTreeMap<&str, Option<Vec<IpNet>>> = BTreeMap::new();
            for _ in 0..next(4) {
                let n = &names[next(names.len() as u64) as usize];
                let c = (next(3) > 0).then(|| cidrs(&mut next));
                changes.insert(n, c);
            }
            let mut want = map.clone();
            for (n, c) in &changes {
                match c.as_ref().filter(|c| !c.is_empty()) {
                    Some(c) => want.insert(n.to_string(), c.clone()),
                    None => want.remove(*n),
                };
            }
            let asked: Vec<(&str, Option<&[IpNet]>)> =
                changes.iter().map(|(n, c)| (*n, c.as_deref())).collect();
            let got = splice_node_subnets(&text, &asked);
            assert_eq!(got, Some(format_node_subnets(&want)), "{text} {asked:?}");
            spliced += usize::from(!changes.is_empty());
        }
        assert!(spliced > 2000, "{spliced}");
        // Text not written so, or a name that would be escaped: no answer.
        let one: &[IpNet] = &["10.1.0.0/24".parse().unwrap()];
        assert_eq!(
            splice_node_subnets(r#"{"a": ["10.0.0.0/24"]}"#, &[("b", Some(one))]),
            None
        );
        assert_eq!(splice_node_subnets("", &[("b", Some(one))]), None);
        assert_eq!(splice_node_subnets("{}", &[("q\"", Some(one))]), None);
        assert_eq!(
            splice_node_subnets("{}", &[("b", Some(one))]).as_deref(),
            Some(r#"{"b":["10.1.0.0/24"]}"#)
        );
    }

    #[test]
    fn node_subnets_read_lists_and_single_strings_and_write_lists() {
        let m = parse_node_subnets(
            r#"{"default":"10.244.0.0/24","blue_net":["10.1.0.0/24","fd00:1::/64"]}"#,
        )
        .unwrap();
        assert_eq!(
            m["default"],
            vec!["10.244.0.0/24".parse::<IpNet>().unwrap()]
        );
        assert_eq!(m["blue_net"].len(), 2);
        assert_eq!(
            format_node_subnets(&m),
            r#"{"blue_net":["10.1.0.0/24","fd00:1::/64"],"default":["10.244.0.0/24"]}"#
        );
        let e = parse_node_subnets(r#"{"a":"10.1.0.0"}"#).unwrap_err();
        assert!(
            e.to_string().contains("\"10.1.0.0\" of a is not a CIDR"),
            "{e}"
        );
    }

    #[test]
    fn node_subnets_written_by_hand_read_back_as_written() {
        let cidrs: Vec<IpNet> = [
            "0.0.0.0/0",
            "9.10.99.100/32",
            "255.254.200.0/23",
            "10.0.0.0/8",
            "fd00:1::/64",
            "::/0",
        ]
        .iter()
        .map(|c| c.parse().unwrap())
        .collect();
        let m: BTreeMap<String, Vec<IpNet>> = [
            ("a".to_owned(), cidrs.clone()),
            ("q\"uo\\te\n".to_owned(), cidrs[..1].to_vec()),
            ("ns.net-1_x".to_owned(), Vec::new()),
        ]
        .into_iter()
        .collect();
        let text = format_node_subnets(&m);
        // The text a serializer gives, which OVN-Kubernetes reads.
        let by_serde: BTreeMap<&str, Vec<String>> = m
            .iter()
            .map(|(k, v)| (k.as_str(), v.iter().map(IpNet::to_string).collect()))
            .collect();
        assert_eq!(text, serde_json::to_string(&by_serde).unwrap());
        assert_eq!(parse_node_subnets(&text).unwrap(), m);
    }

    #[test]
    fn node_subnets_that_are_not_json_or_not_a_map_are_refused_saying_so() {
        for bad in [
            r#"{"a":["10.1.0.0/24"]} x"#,
            r#"["10.1.0.0/24"]"#,
            r#"{"a":[1]}"#,
            "",
        ] {
            let e = parse_node_subnets(bad).unwrap_err();
            assert!(
                e.to_string().contains("not a JSON object of subnets"),
                "{bad}: {e}"
            );
        }
        let e = parse_node_subnets(r#"{"a":["10.1.0.0/24"],"b":["x"]}"#).unwrap_err();
        assert!(e.to_string().contains("\"x\" of b is not a CIDR"), "{e}");
        let twice = parse_node_subnets(r#"{"b":"10.2.0.0/24","a":[],"b":["10.3.0.0/24"]}"#);
        assert_eq!(
            format_node_subnets(&twice.unwrap()),
            r#"{"a":[],"b":["10.3.0.0/24"]}"#,
            "in name order, the last of a name given twice"
        );
    }

    #[test]
    fn transit_ifaddr_round_trips_and_checks_families() {
        let v = r#"{"ipv4":"100.88.0.2/16","ipv6":"fd97::2/64"}"#;
        let a = parse_transit_ifaddr(v).unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(format_transit_ifaddr(&a), v);
        assert!(parse_transit_ifaddr(r#"{"ipv4":"fd97::2/64"}"#).is_err());
        assert!(parse_transit_ifaddr("{}").is_err());
    }

    #[test]
    fn the_gateway_config_reads_ovn_kubernetes_form_with_old_single_fields() {
        let v = r#"{"default":{"mode":"shared","bridge-id":"breth0","interface-id":"breth0_n1","mac-address":"F2:20:A0:3C:26:4C","ip-address":"172.18.0.2/16","next-hop":"172.18.0.1","node-port-enable":"true","vlan-id":"0"}}"#;
        let c = parse_l3_gateway_config(v).unwrap().unwrap();
        assert_eq!(c.mac_address, "f2:20:a0:3c:26:4c");
        assert_eq!(c.ip_addresses[0].to_string(), "172.18.0.2/16");
        assert_eq!(c.next_hops[0].to_string(), "172.18.0.1");
        assert!(c.node_port_enable);
        assert_eq!(c.vlan_id, None);
        assert_eq!(
            parse_l3_gateway_config(r#"{"default":{"mode":"disabled"}}"#).unwrap(),
            None
        );
        let e = parse_l3_gateway_config(r#"{"default":{"mode":"odd"}}"#).unwrap_err();
        assert!(e.to_string().contains("mode \"odd\""), "{e}");
    }

    #[test]
    fn ids_and_tunnel_keys_parse_or_say_why_not() {
        assert_eq!(parse_id(NODE_ID, "7").unwrap(), 7);
        assert!(parse_id(NODE_ID, "-1").is_err());
        assert_eq!(
            parse_tunnel_keys("[16711685,16715780]").unwrap(),
            vec![16711685, 16715780]
        );
        assert_eq!(format_tunnel_keys(&[1, 2]), "[1,2]");
        assert!(parse_tunnel_keys("x").is_err());
    }
}
