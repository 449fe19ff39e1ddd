//! Pods' interfaces on the networking plugin's virtual networks: each interface's
//! address, MAC and gateway, the answer the CNI reads (`ovnIfaceList`).
//!
//! netconnectd hands out the dynamic addresses itself (not OVN's `dynamic`), so that
//! the answer is known before any row is written and is the same in every run: static
//! addresses first (pods in name order, so of two pods asking for one address the first
//! keeps it), then the addresses pods were given before (read back from the status
//! directory), then the lowest free address of the network's subnets in their order,
//! for the other interfaces in pod then interface order. A subnet's network address,
//! its IPv4 broadcast address and every gateway of the network are never handed out.
//! A static MAC is kept; otherwise the MAC is derived from the address, as
//! OVN-Kubernetes derives a pod's.
//!
//! A pod with one bad interface (an unknown network, a static address outside it or
//! taken, a gateway outside the subnet, no address left) is refused whole: no answer,
//! no port, a problem naming the pod and the interface.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;

use ipnet::IpNet;

use crate::api::onap::VirtualNetworkDef;
use crate::api::pod::{IfaceEntry, PodInfo, RouteEntry, RouteSpec};
use crate::api::{Inventory, Problem};
use crate::ovnk::addr::{nth, with_len};
use crate::ovnk::mac;

/// One interface as answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterfaceAddress {
    /// The interface's name in the pod.
    pub interface: String,
    /// Its virtual network.
    pub network: String,
    /// Its address, with its subnet's prefix length.
    pub ip: IpNet,
    /// Its MAC.
    pub mac: String,
    /// Its gateway.
    pub gateway: IpAddr,
    /// The pod's default route goes through it.
    pub default_gateway: bool,
}

/// A pod's answer: its interfaces and its routes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodAddresses {
    /// Its interfaces, in the order asked.
    pub interfaces: Vec<InterfaceAddress>,
    /// Its routes, as asked.
    pub routes: Vec<RouteSpec>,
}

/// The answers of every pod that asks for interfaces, by `namespace/name`, and the
/// problems of the pods refused.
pub(crate) fn pod_addresses(inv: &Inventory) -> (BTreeMap<String, PodAddresses>, Vec<Problem>) {
    let vns = &inv.virtual_networks;
    let mut taken: HashSet<IpAddr> = vns
        .values()
        .flat_map(|v| v.subnets.iter().map(|(_, g)| g.addr()))
        .collect();
    let mut problems = Vec::new();
    // Each pod's interfaces with what is known of them so far.
    let mut partial: BTreeMap<&String, Vec<Option<InterfaceAddress>>> = BTreeMap::new();
    // Static addresses first, pods in name order.
    for (key, pod) in &inv.pods {
        match statics(pod, vns, &taken) {
            Ok(found) => {
                taken.extend(found.iter().flatten().map(|i| i.ip.addr()));
                partial.insert(key, found);
            }
            Err(message) => problems.push(problem(pod, message)),
        }
    }
    // Then the dynamic addresses given before, still free and still in their network.
    for (key, found) in partial.iter_mut() {
        let pod = &inv.pods[*key];
        for (i, slot) in found.iter_mut().enumerate() {
            let spec = &pod.spec.interfaces[i];
            if slot.is_some() {
                continue;
            }
            let before = pod
                .answered
                .iter()
                .find(|(iface, ip)| *iface == spec.interface && !taken.contains(&ip.addr()));
            let vn = &vns[&spec.network];
            if let Some((_, ip)) = before {
                if let Some(subnet) = usable_subnet(vn, ip.addr()) {
                    taken.insert(ip.addr());
                    *slot = Some(address(spec, vn, subnet, ip.addr()));
                }
            }
        }
    }
    // Then the lowest free addresses.
    let mut out = BTreeMap::new();
    let mut cursors = HashMap::new();
    for (key, found) in partial {
        let pod = &inv.pods[key];
        let mut refused = None;
        let mut interfaces = Vec::new();
        for (spec, slot) in pod.spec.interfaces.iter().zip(found) {
            let vn = &vns[&spec.network];
            let got = slot.or_else(|| {
                let (subnet, ip) = lowest_free(vn, &taken, &mut cursors)?;
                taken.insert(ip);
                Some(address(spec, vn, subnet, ip))
            });
            match got {
                Some(a) => interfaces.push(a),
                None => {
                    refused = Some(format!(
                        "interface {}: virtual network {} has no address left",
                        spec.interface, spec.network
                    ));
                    break;
                }
            }
        }
        match refused {
            Some(message) => problems.push(problem(pod, message)),
            None => {
                out.insert(
                    key.clone(),
                    PodAddresses {
                        interfaces,
                        routes: pod.spec.routes.clone(),
                    },
                );
            }
        }
    }
    (out, problems)
}

impl PodAddresses {
    /// The pod's `ovnIfaceList`, as the seed shows it.
    pub(crate) fn iface_list(&self) -> String {
        let entries: Vec<IfaceEntry> = self
            .interfaces
            .iter()
            .map(|i| IfaceEntry {
                ip_address: i.ip.to_string(),
                mac_address: i.mac.clone(),
                gateway_ip: i.gateway.to_string(),
                interface: i.interface.clone(),
                default_gateway: i.default_gateway.to_string(),
            })
            .collect();
        serde_json::to_string(&entries).unwrap_or_default()
    }

    /// The pod's `ovnNetworkRoutes`, as the seed shows it.
    pub(crate) fn routes_text(&self) -> String {
        let entries: Vec<RouteEntry> = self
            .routes
            .iter()
            .map(|r| RouteEntry {
                dst: r.dst.to_string(),
                gw: r.gw.to_string(),
            })
            .collect();
        serde_json::to_string(&entries).unwrap_or_default()
    }
}

fn problem(pod: &PodInfo, message: String) -> Problem {
    Problem {
        origin: pod.origin.clone(),
        object: Some(format!("Pod {}", pod.key)),
        field: Some(format!("metadata.annotations[{}]", pod.annotation)),
        message: format!("{message}; nothing of the pod is written"),
    }
}

/// The interfaces of `pod` with static addresses, checked (the others `None`); an
/// error names the first interface that is wrong.
fn statics(
    pod: &PodInfo,
    vns: &BTreeMap<String, VirtualNetworkDef>,
    taken: &HashSet<IpAddr>,
) -> Result<Vec<Option<InterfaceAddress>>, String> {
    let mut mine: HashSet<IpAddr> = HashSet::new();
    let mut out = Vec::new();
    for spec in &pod.spec.interfaces {
        let at = format!("interface {}", spec.interface);
        let Some(vn) = vns.get(&spec.network) else {
            return Err(format!(
                "{at}: virtual network {} is not declared (no onapNetwork of that name)",
                spec.network
            ));
        };
        let Some((ip, len)) = spec.ip else {
            out.push(None);
            continue;
        };
        let Some(subnet) = vn.subnets.iter().map(|(s, _)| *s).find(|s| s.contains(&ip)) else {
            let subnets: Vec<String> = vn.subnets.iter().map(|(s, _)| s.to_string()).collect();
            return Err(format!(
                "{at}: {ip} is outside virtual network {} ({})",
                spec.network,
                subnets.join(", ")
            ));
        };
        if len.is_some_and(|l| l != subnet.prefix_len()) {
            return Err(format!(
                "{at}: {ip}/{} does not match its subnet {subnet}",
                len.unwrap_or_default()
            ));
        }
        if usable_subnet(vn, ip).is_none() {
            return Err(format!(
                "{at}: {ip} is its subnet's network, broadcast or gateway address"
            ));
        }
        if taken.contains(&ip) || !mine.insert(ip) {
            return Err(format!("{at}: {ip} is already taken"));
        }
        out.push(Some(address(spec, vn, subnet, ip)));
    }
    // A gateway given must be in its interface's subnet.
    for a in out.iter().flatten() {
        if !a.ip.contains(&a.gateway) {
            return Err(format!(
                "interface {}: gateway {} is outside {}",
                a.interface,
                a.gateway,
                a.ip.trunc()
            ));
        }
    }
    Ok(out)
}

/// The subnet of `vn` in which `ip` may be handed out, if any.
fn usable_subnet(vn: &VirtualNetworkDef, ip: IpAddr) -> Option<IpNet> {
    vn.subnets
        .iter()
        .find(|(s, g)| {
            s.contains(&ip)
                && ip != s.network()
                && !(s.addr().is_ipv4() && ip == s.broadcast())
                && ip != g.addr()
        })
        .map(|(s, _)| *s)
        .filter(|_| !vn.subnets.iter().any(|(_, g)| g.addr() == ip))
}

/// The lowest address of `vn`'s subnets, in their order, not taken. Within one pass
/// addresses are only taken, never freed, so each subnet's scan resumes where the last
/// one stopped (`cursors`): every address is looked at once per pass, not once per
/// interface handed out.
fn lowest_free(
    vn: &VirtualNetworkDef,
    taken: &HashSet<IpAddr>,
    cursors: &mut HashMap<IpNet, u128>,
) -> Option<(IpNet, IpAddr)> {
    for (subnet, _) in &vn.subnets {
        let size: u128 = match subnet {
            IpNet::V4(s) => 1u128 << (32 - s.prefix_len()),
            IpNet::V6(s) => 1u128
                .checked_shl(u32::from(128 - s.prefix_len()))
                .unwrap_or(u128::MAX),
        };
        let n = cursors.entry(*subnet).or_insert(1);
        while *n < size {
            let Some(ip) = nth(subnet, *n) else { break };
            if !taken.contains(&ip) && usable_subnet(vn, ip).is_some() {
                return Some((*subnet, ip));
            }
            *n += 1;
        }
    }
    None
}

fn address(
    spec: &crate::api::pod::InterfaceSpec,
    vn: &VirtualNetworkDef,
    subnet: IpNet,
    ip: IpAddr,
) -> InterfaceAddress {
    let gateway = spec.gateway.unwrap_or_else(|| {
        vn.subnets
            .iter()
            .find(|(s, _)| *s == subnet)
            .map_or(subnet.network(), |(_, g)| g.addr())
    });
    InterfaceAddress {
        interface: spec.interface.clone(),
        network: spec.network.clone(),
        ip: with_len(ip, subnet.prefix_len()),
        mac: spec.mac.clone().unwrap_or_else(|| mac::from_ip(ip)),
        gateway,
        default_gateway: spec.default_gateway,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::api::load::parse_file;
    use crate::api::Context;

    const VNS: &str = r#"
apiVersion: v1
kind: onapNetwork
metadata: {name: ovn-ls-24}
spec: {config: '{"subnet": "172.16.24.0/24", "gateway": "172.16.24.1"}'}
---
apiVersion: v1
kind: onapNetwork
metadata: {name: ovn-ls-30}
spec: {config: '{"subnet": ["172.16.30.0/30", "172.16.31.0/24"]}'}
"#;

    fn pod(name: &str, ovn_network: &str) -> String {
        format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: ns\n  annotations:\n    ovnNetwork: '{ovn_network}'\n"
        )
    }

    fn inventory(yaml: &str, context: &Context) -> Inventory {
        Inventory::build(&[parse_file(Path::new("m.yaml"), yaml)], context)
    }

    fn run(yaml: &str) -> (BTreeMap<String, PodAddresses>, Vec<String>) {
        let inv = inventory(yaml, &Context::default());
        assert!(inv.problems.is_empty(), "{:?}", inv.problems);
        let (out, problems) = pod_addresses(&inv);
        (out, problems.iter().map(ToString::to_string).collect())
    }

    fn ips(a: &PodAddresses) -> Vec<String> {
        a.interfaces.iter().map(|i| i.ip.to_string()).collect()
    }

    #[test]
    fn statics_first_then_the_lowest_free_in_pod_order() {
        // a-pod's dynamic interface is handed out after b-pod's static .2 is reserved.
        let yaml = VNS.to_owned()
            + &pod(
                "a-pod",
                r#"[{"name": "ovn-ls-24", "interface": "net0"}, {"name": "ovn-ls-30", "interface": "net1", "defaultGateway": "true"}]"#,
            )
            + &pod(
                "b-pod",
                r#"[{"name": "ovn-ls-24", "interface": "net0", "ip_address": "172.16.24.2/24", "mac_address": "0a:00:00:00:00:1e"}]"#,
            )
            + &pod("c-pod", r#"[{"name": "ovn-ls-30", "interface": "net3"}]"#);
        let (out, problems) = run(&yaml);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(ips(&out["ns/a-pod"]), ["172.16.24.3/24", "172.16.30.2/30"]);
        assert_eq!(ips(&out["ns/b-pod"]), ["172.16.24.2/24"]);
        // The /30's one usable address besides its gateway is a-pod's: c-pod goes on
        // to the network's second subnet.
        assert_eq!(ips(&out["ns/c-pod"]), ["172.16.31.2/24"]);
        let b = &out["ns/b-pod"].interfaces[0];
        assert_eq!(b.mac, "0a:00:00:00:00:1e");
        assert_eq!(b.gateway.to_string(), "172.16.24.1");
        let a = &out["ns/a-pod"];
        assert_eq!(
            a.interfaces[0].mac, "0a:58:ac:10:18:03",
            "derived from the address"
        );
        assert!(a.interfaces[1].default_gateway);
        assert_eq!(
            a.iface_list(),
            r#"[{"ip_address":"172.16.24.3/24","mac_address":"0a:58:ac:10:18:03","gateway_ip":"172.16.24.1","interface":"net0","defaultGateway":"false"},{"ip_address":"172.16.30.2/30","mac_address":"0a:58:ac:10:1e:02","gateway_ip":"172.16.30.1","interface":"net1","defaultGateway":"true"}]"#
        );
    }

    #[test]
    fn an_address_given_before_is_kept() {
        let yaml =
            VNS.to_owned() + &pod("a-pod", r#"[{"name": "ovn-ls-24", "interface": "net0"}]"#);
        let mut context = Context::default();
        let remembered = format!(
            "{}    ovnIfaceList: '[{{\"ip_address\":\"172.16.24.77/24\",\"mac_address\":\"0a:58:ac:10:18:4d\",\"gateway_ip\":\"172.16.24.1\",\"interface\":\"net0\",\"defaultGateway\":\"false\"}}]'\n",
            pod("a-pod", r#"[{"name": "ovn-ls-24", "interface": "net0"}]"#)
        );
        let before = inventory(&(VNS.to_owned() + &remembered), &Context::default());
        let object = crate::api::Object::Pod(Box::new(before.pods["ns/a-pod"].object.clone()));
        context.remembered.insert(
            ("Pod".into(), "ns/a-pod".into()),
            crate::api::Remembered::Of(std::sync::Arc::new(object)),
        );
        let inv = inventory(&yaml, &context);
        let (out, _) = pod_addresses(&inv);
        assert_eq!(ips(&out["ns/a-pod"]), ["172.16.24.77/24"]);
    }

    #[test]
    fn a_pod_with_one_bad_interface_is_refused_whole_naming_it() {
        let cases = [
            (
                r#"[{"name": "ovn-ls-24", "interface": "net0"}, {"name": "nope", "interface": "net1"}]"#,
                "interface net1: virtual network nope is not declared",
            ),
            (
                r#"[{"name": "ovn-ls-24", "interface": "net0", "ipAddress": "172.16.25.5"}]"#,
                "interface net0: 172.16.25.5 is outside virtual network ovn-ls-24 (172.16.24.0/24)",
            ),
            (
                r#"[{"name": "ovn-ls-24", "interface": "net0", "ipAddress": "172.16.24.5/16"}]"#,
                "does not match its subnet 172.16.24.0/24",
            ),
            (
                r#"[{"name": "ovn-ls-24", "interface": "net0", "ipAddress": "172.16.24.1"}]"#,
                "network, broadcast or gateway address",
            ),
            (
                r#"[{"name": "ovn-ls-24", "interface": "net0", "ipAddress": "172.16.24.9"}]"#,
                "interface net0: 172.16.24.9 is already taken",
            ),
            (
                r#"[{"name": "ovn-ls-24", "interface": "net0", "ipAddress": "172.16.24.5", "gateway_ip": "10.0.0.1"}]"#,
                "gateway 10.0.0.1 is outside 172.16.24.0/24",
            ),
        ];
        for (ovn_network, message) in cases {
            let yaml = VNS.to_owned()
                + &pod(
                    "a-first",
                    r#"[{"name": "ovn-ls-24", "interface": "net0", "ipAddress": "172.16.24.9"}]"#,
                )
                + &pod("b-pod", ovn_network);
            let (out, problems) = run(&yaml);
            assert!(!out.contains_key("ns/b-pod"), "{ovn_network}");
            assert!(out.contains_key("ns/a-first"));
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert!(
                problems[0].contains("Pod ns/b-pod: metadata.annotations[ovnNetwork]: ")
                    && problems[0].contains(message)
                    && problems[0].ends_with("nothing of the pod is written"),
                "{ovn_network}: {problems:?}"
            );
        }
        // A network without an address left.
        let full = VNS.to_owned()
            + &pod(
                "a",
                r#"[{"name": "ovn-ls-30", "interface": "net0", "ipAddress": "172.16.30.2"}]"#,
            )
            + &pod("b", r#"[{"name": "ovn-ls-24", "interface": "net0"}]"#);
        let (out, problems) = run(&full.replace("\"172.16.31.0/24\"", "\"172.16.32.0/30\"").replace(
            r#"[{"name": "ovn-ls-24", "interface": "net0"}]"#,
            r#"[{"name": "ovn-ls-24", "interface": "net0"}, {"name": "ovn-ls-30", "interface": "net1"}, {"name": "ovn-ls-30", "interface": "net2"}]"#,
        ));
        assert!(out.contains_key("ns/a"));
        assert!(!out.contains_key("ns/b"));
        assert!(
            problems.iter().any(
                |p| p.contains("interface net2: virtual network ovn-ls-30 has no address left")
            ),
            "{problems:?}"
        );
    }
}
