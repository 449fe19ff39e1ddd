//! Pods' interfaces on the networking plugin's virtual networks, as its seed asks for
//! them in a pod's annotations, in every form the seed shows:
//!
//! - `ovnNetwork`: a JSON list of interfaces, `{"name": <virtual network>, "interface":
//!   "net1", "ipAddress": …, "macAddress": …}` (the seed also spells them `ip_address`,
//!   `mac_address`), with the routes in `ovnNetworkRoutes` beside it;
//! - `onapnetworks` (or `ovnNetwork` itself): one JSON object `{"ovnNetwork": [...],
//!   "ovnNetworkRoutes": [{"dst": …, "gw": …}]}`, an interface also carrying
//!   `defaultGateway` and `gateway_ip`.
//!
//! `ovnNetwork` wins over the seed's older `ovn` annotation, which netconnectd does not
//! read; a pod without either is not netconnectd's (the seed's backward
//! compatibility). What is checked here needs only the pod: interface names
//! (alphanumeric, ending in a digit, each once), at most ten, addresses and MACs well
//! formed, at most one default gateway. The networks and the addresses' places in
//! them are checked when addresses are handed out (`crate::alloc::pods`).

use std::net::IpAddr;

use serde_json::{Map, Value};

use crate::ovnk::mac::is_mac;

/// The annotation listing a pod's interfaces.
pub(crate) const OVN_NETWORK: &str = "ovnNetwork";
/// The annotation with a pod's routes, beside [`OVN_NETWORK`].
pub(crate) const OVN_NETWORK_ROUTES: &str = "ovnNetworkRoutes";
/// The seed's annotation holding both as one object.
pub(crate) const ONAP_NETWORKS: &str = "onapnetworks";
/// The annotation netconnectd answers with: each interface's addresses, for the CNI.
pub(crate) const OVN_IFACE_LIST: &str = "ovnIfaceList";
/// The most interfaces a pod may have (the seed's).
pub(crate) const MAX_INTERFACES: usize = 10;

/// One interface a pod asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterfaceSpec {
    /// The virtual network.
    pub network: String,
    /// The interface's name in the pod (`net0`).
    pub interface: String,
    /// A static address, with its prefix length when given so.
    pub ip: Option<(IpAddr, Option<u8>)>,
    /// A static MAC, lowercase.
    pub mac: Option<String>,
    /// A gateway other than the network's.
    pub gateway: Option<IpAddr>,
    /// The pod's default route goes through this interface.
    pub default_gateway: bool,
}

/// A route a pod asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteSpec {
    /// The destination, as written (`172.16.29.1/24`).
    pub dst: ipnet::IpNet,
    /// The next hop.
    pub gw: IpAddr,
}

/// What a pod asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodSpec {
    /// Its interfaces, in order.
    pub interfaces: Vec<InterfaceSpec>,
    /// Its routes.
    pub routes: Vec<RouteSpec>,
}

/// One entry of `ovnIfaceList`, the answer to the CNI, in the seed's words.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IfaceEntry {
    /// The address with its prefix length (`172.16.26.2/24`).
    pub ip_address: String,
    /// The MAC.
    pub mac_address: String,
    /// The gateway.
    pub gateway_ip: String,
    /// The interface's name in the pod.
    pub interface: String,
    /// `"true"` when the pod's default route goes through it.
    #[serde(rename = "defaultGateway")]
    pub default_gateway: String,
}

/// One entry of the answer's `ovnNetworkRoutes`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RouteEntry {
    /// The destination.
    pub dst: String,
    /// The next hop.
    pub gw: String,
}

/// A pod that asks for interfaces, as read.
#[derive(Clone, Debug, PartialEq)]
pub struct PodInfo {
    /// Where it was read.
    pub(crate) origin: super::Origin,
    /// `namespace/name`.
    pub key: String,
    /// The annotation it asked in.
    pub(crate) annotation: &'static str,
    /// The pod as read.
    pub object: super::objects::Pod,
    /// What it asks for.
    pub spec: PodSpec,
    /// The addresses its interfaces were given before (its `ovnIfaceList` as the status
    /// directory remembers it), by interface.
    pub(crate) answered: Vec<(String, ipnet::IpNet)>,
}

/// The addresses of an `ovnIfaceList` annotation, by interface; nothing when it is
/// absent or unreadable (the addresses are then handed out again).
pub(crate) fn answered(
    annotations: &std::collections::BTreeMap<String, String>,
) -> Vec<(String, ipnet::IpNet)> {
    annotations
        .get(OVN_IFACE_LIST)
        .and_then(|t| serde_json::from_str::<Vec<IfaceEntry>>(t).ok())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|e| Some((e.interface, e.ip_address.parse().ok()?)))
        .collect()
}

/// What is wrong, and where: the annotation (and the entry), and why.
pub(crate) type PodProblem = (String, String);

/// The interfaces a pod with `annotations` asks for; `None` when it asks for none
/// (it is not netconnectd's).
pub(crate) fn pod_spec(
    annotations: &std::collections::BTreeMap<String, String>,
) -> Result<Option<(&'static str, PodSpec)>, PodProblem> {
    let field = |key: &str| format!("metadata.annotations[{key}]");
    let json = |key: &str| -> Result<Option<Value>, PodProblem> {
        annotations
            .get(key)
            .map(|text| {
                serde_json::from_str(text).map_err(|e| (field(key), format!("not JSON: {e}")))
            })
            .transpose()
    };
    let (key, list, routes) = match (json(OVN_NETWORK)?, json(ONAP_NETWORKS)?) {
        (Some(Value::Object(o)), _) => {
            (OVN_NETWORK, o.get(OVN_NETWORK).cloned(), object_routes(&o))
        }
        (Some(list), _) => (OVN_NETWORK, Some(list), json(OVN_NETWORK_ROUTES)?),
        (None, Some(Value::Object(o))) => (
            ONAP_NETWORKS,
            o.get(OVN_NETWORK).cloned(),
            object_routes(&o),
        ),
        (None, Some(_)) => {
            return Err((
                field(ONAP_NETWORKS),
                "not an object {\"ovnNetwork\": [...], \"ovnNetworkRoutes\": [...]}".into(),
            ))
        }
        (None, None) => return Ok(None),
    };
    let at = field(key);
    let Some(Value::Array(items)) = list else {
        return Err((at, "no list of interfaces (\"ovnNetwork\": [...])".into()));
    };
    if items.len() > MAX_INTERFACES {
        return Err((
            at,
            format!("{} interfaces; at most {MAX_INTERFACES}", items.len()),
        ));
    }
    let mut spec = PodSpec::default();
    for (i, item) in items.iter().enumerate() {
        let iface = interface(item).map_err(|m| (format!("{at}[{i}]"), m))?;
        if spec
            .interfaces
            .iter()
            .any(|o| o.interface == iface.interface)
        {
            return Err((
                format!("{at}[{i}]"),
                format!("interface {} is listed twice", iface.interface),
            ));
        }
        spec.interfaces.push(iface);
    }
    if spec.interfaces.iter().filter(|i| i.default_gateway).count() > 1 {
        return Err((at, "more than one interface is the default gateway".into()));
    }
    let routes_at = match key {
        OVN_NETWORK if annotations.contains_key(OVN_NETWORK_ROUTES) => field(OVN_NETWORK_ROUTES),
        _ => format!("{at}.ovnNetworkRoutes"),
    };
    match routes {
        None | Some(Value::Null) => {}
        Some(Value::Array(rs)) => {
            for (i, r) in rs.iter().enumerate() {
                spec.routes
                    .push(route(r).map_err(|m| (format!("{routes_at}[{i}]"), m))?);
            }
        }
        Some(_) => return Err((routes_at, "not a list of routes".into())),
    }
    Ok(Some((key, spec)))
}

fn object_routes(o: &Map<String, Value>) -> Option<Value> {
    o.get(OVN_NETWORK_ROUTES).cloned()
}

/// A string field, by any of `names`, trimmed; absent or empty: `None`.
fn text(o: &Map<String, Value>, names: &[&str]) -> Result<Option<String>, String> {
    for n in names {
        match o.get(*n) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) if s.trim().is_empty() => continue,
            Some(Value::String(s)) => return Ok(Some(s.trim().to_owned())),
            Some(Value::Bool(b)) => return Ok(Some(b.to_string())),
            Some(other) => return Err(format!("{n}: {other} is not a string")),
        }
    }
    Ok(None)
}

fn interface(item: &Value) -> Result<InterfaceSpec, String> {
    let Value::Object(o) = item else {
        return Err(format!("{item} is not an object"));
    };
    let network = text(o, &["name"])?.ok_or("name (the virtual network) is missing")?;
    let interface = text(o, &["interface"])?.ok_or("interface is missing")?;
    let named = interface.chars().all(|c| c.is_ascii_alphanumeric())
        && interface.chars().last().is_some_and(|c| c.is_ascii_digit());
    if !named {
        return Err(format!(
            "interface {interface:?}: alphanumeric, ending in a digit (net0)"
        ));
    }
    let ip = match text(o, &["ipAddress", "ip_address"])? {
        None => None,
        Some(s) => Some(match s.split_once('/') {
            Some((a, len)) => {
                let a: IpAddr = a
                    .parse()
                    .map_err(|_| format!("ip address {s:?} is not an address"))?;
                let len: u8 = len
                    .parse()
                    .map_err(|_| format!("ip address {s:?}: bad prefix length"))?;
                (a, Some(len))
            }
            None => (
                s.parse()
                    .map_err(|_| format!("ip address {s:?} is not an address"))?,
                None,
            ),
        }),
    };
    let mac = match text(o, &["macAddress", "mac_address"])? {
        Some(m) if is_mac(&m) => Some(m.to_ascii_lowercase()),
        Some(m) => {
            return Err(format!(
                "mac address {m:?} is not a MAC (0a:00:00:00:00:1e)"
            ))
        }
        None => None,
    };
    if mac
        .as_deref()
        .is_some_and(|m| u8::from_str_radix(&m[..2], 16).is_ok_and(|b| b & 1 == 1))
    {
        return Err(format!(
            "mac address {}: a multicast MAC",
            mac.unwrap_or_default()
        ));
    }
    let gateway = match text(o, &["gateway_ip", "gatewayIp", "gatewayIP"])? {
        Some(g) => Some(
            g.split('/')
                .next()
                .unwrap_or_default()
                .parse()
                .map_err(|_| format!("gateway ip {g:?} is not an address"))?,
        ),
        None => None,
    };
    let default_gateway = match text(o, &["defaultGateway"])?.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => return Err(format!("defaultGateway {other:?}: \"true\" or \"false\"")),
    };
    Ok(InterfaceSpec {
        network,
        interface,
        ip,
        mac,
        gateway,
        default_gateway,
    })
}

fn route(r: &Value) -> Result<RouteSpec, String> {
    let Value::Object(o) = r else {
        return Err(format!("{r} is not an object"));
    };
    let dst = text(o, &["dst"])?.ok_or("dst is missing")?;
    let gw = text(o, &["gw"])?.ok_or("gw is missing")?;
    Ok(RouteSpec {
        dst: dst
            .parse()
            .map_err(|_| format!("dst {dst:?} is not a CIDR"))?,
        gw: gw
            .parse()
            .map_err(|_| format!("gw {gw:?} is not an address"))?,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn spec(pairs: &[(&str, &str)]) -> Result<Option<PodSpec>, PodProblem> {
        let a: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        pod_spec(&a).map(|s| s.map(|(_, s)| s))
    }

    #[test]
    fn every_form_the_seed_shows_reads_alike() {
        // The list, camelCase; the list, snake_case; the one object, under either key.
        let list = r#"[
            { "name": "ovn-ls-24", "interface": "net1", "ipAddress": "172.16.24.55", "macAddress": "0A:00:00:00:00:4E" },
            {"name": "ovn-ls-24", "interface": "net2"}]"#;
        let a = spec(&[(OVN_NETWORK, list)]).unwrap().unwrap();
        assert_eq!(a.interfaces.len(), 2);
        assert_eq!(
            a.interfaces[0].ip,
            Some(("172.16.24.55".parse().unwrap(), None))
        );
        assert_eq!(a.interfaces[0].mac.as_deref(), Some("0a:00:00:00:00:4e"));
        assert_eq!(a.interfaces[1].ip, None);
        let snake = list
            .replace("ipAddress", "ip_address")
            .replace("macAddress", "mac_address");
        assert_eq!(spec(&[(OVN_NETWORK, &snake)]).unwrap().unwrap(), a);

        let object = r#"{
           "ovnNetwork":[
              { "name":"ovn-ls-26", "interface":"net0", "defaultGateway":"true" },
              { "name":"ovn-ls-24", "interface":"net1", "defaultGateway":"false",
                "ip_address":"172.16.24.2/24", "mac_address":"0a:00:00:00:00:1e", "gateway_ip":"172.16.24.1" } ],
           "ovnNetworkRoutes":[ { "dst":"172.16.29.1/24", "gw":"172.16.24.1" } ] }"#;
        let b = spec(&[(ONAP_NETWORKS, object)]).unwrap().unwrap();
        assert!(b.interfaces[0].default_gateway);
        assert_eq!(
            b.interfaces[1].ip,
            Some(("172.16.24.2".parse().unwrap(), Some(24)))
        );
        assert_eq!(
            b.interfaces[1].gateway,
            Some("172.16.24.1".parse().unwrap())
        );
        assert_eq!(b.routes[0].gw, "172.16.24.1".parse::<IpAddr>().unwrap());
        assert_eq!(spec(&[(OVN_NETWORK, object)]).unwrap().unwrap(), b);

        // Routes beside the list.
        let c = spec(&[
            (OVN_NETWORK, r#"[{"name": "n", "interface": "net0"}]"#),
            (
                OVN_NETWORK_ROUTES,
                r#"[{"dst": "10.0.0.0/8", "gw": "172.16.24.1"}]"#,
            ),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.routes.len(), 1);
        // No annotation: not netconnectd's pod (the seed's `ovn` alone included).
        assert_eq!(spec(&[("ovn", "{}")]).unwrap(), None);
    }

    #[test]
    fn only_pods_asking_for_interfaces_are_read() {
        // A cluster's other pods are not even decoded: one netconnectd could not read
        // is no problem of its.
        let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: n}\nspec: {containers: 7}\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata: {name: q, namespace: n, annotations: {ovnNetwork: '[{\"name\": \"v\", \"interface\": \"net0\"}]'}}\n";
        let f = crate::api::load::parse_file(std::path::Path::new("pods.yaml"), yaml);
        assert!(f.problems.is_empty(), "{:?}", f.problems);
        let names: Vec<String> = f.objects.iter().map(|(_, o)| o.name()).collect();
        assert_eq!(names, ["n/q"]);
    }

    #[test]
    fn bad_interfaces_are_refused_naming_the_entry() {
        let one = |entry: &str| spec(&[(OVN_NETWORK, &format!("[{entry}]"))]).unwrap_err();
        let cases = [
            (
                r#"{"interface": "net0"}"#,
                "name (the virtual network) is missing",
            ),
            (r#"{"name": "n", "interface": "eth"}"#, "ending in a digit"),
            (r#"{"name": "n", "interface": "net-0"}"#, "alphanumeric"),
            (
                r#"{"name": "n", "interface": "net0", "ipAddress": "1.2.3"}"#,
                "not an address",
            ),
            (
                r#"{"name": "n", "interface": "net0", "macAddress": "0a:00:00:00:00"}"#,
                "not a MAC",
            ),
            (
                r#"{"name": "n", "interface": "net0", "macAddress": "01:00:00:00:00:01"}"#,
                "multicast",
            ),
            (
                r#"{"name": "n", "interface": "net0", "defaultGateway": "yes"}"#,
                "\"true\" or \"false\"",
            ),
        ];
        for (entry, message) in cases {
            let (field, m) = one(entry);
            assert_eq!(field, "metadata.annotations[ovnNetwork][0]", "{entry}");
            assert!(m.contains(message), "{entry}: {m}");
        }
        let eleven: Vec<String> = (0..11)
            .map(|i| format!(r#"{{"name": "n", "interface": "net{i}"}}"#))
            .collect();
        let (_, m) = spec(&[(OVN_NETWORK, &format!("[{}]", eleven.join(",")))]).unwrap_err();
        assert!(m.contains("11 interfaces; at most 10"), "{m}");
        let (field, m) = spec(&[(
            OVN_NETWORK,
            r#"[{"name": "n", "interface": "net0"}, {"name": "m", "interface": "net0"}]"#,
        )])
        .unwrap_err();
        assert_eq!(field, "metadata.annotations[ovnNetwork][1]");
        assert!(m.contains("listed twice"));
        let (_, m) = spec(&[(OVN_NETWORK, "{nope")]).unwrap_err();
        assert!(m.contains("not JSON"));
        let (field, m) = spec(&[(
            ONAP_NETWORKS,
            r#"{"ovnNetwork": [], "ovnNetworkRoutes": [{"dst": "x", "gw": "1.1.1.1"}]}"#,
        )])
        .unwrap_err();
        assert_eq!(
            field,
            "metadata.annotations[onapnetworks].ovnNetworkRoutes[0]"
        );
        assert!(m.contains("not a CIDR"));
    }
}
