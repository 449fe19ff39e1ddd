//! Every reason a ClusterNetworkConnect is refused, with its message; and the
//! allocations of those accepted.

use std::path::Path;

use super::*;
use crate::alloc::{allocate, ClusterConfig};
use crate::api::load::parse_file;
use crate::api::{Context, Inventory};
use crate::testing::node;

/// A CUDN labelled `c: <label>` with `network` as its spec.network, selecting the
/// namespaces labelled `primary: <name>`.
fn cudn(name: &str, label: &str, network: &str) -> String {
    format!(
        "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {{name: {name}, labels: {{c: {label}}}}}\n\
         spec:\n  namespaceSelector: {{matchLabels: {{primary: {name}}}}}\n  network: {network}\n"
    )
}

fn l3(name: &str, label: &str, cidrs: &str) -> String {
    cudn(
        name,
        label,
        &format!("{{topology: Layer3, layer3: {{role: Primary, subnets: {cidrs}}}}}"),
    )
}

fn l2(name: &str, label: &str, cidrs: &str) -> String {
    cudn(
        name,
        label,
        &format!("{{topology: Layer2, layer2: {{role: Primary, subnets: {cidrs}}}}}"),
    )
}

/// A CNC selecting CUDNs labelled `c: <label>`.
fn cnc(name: &str, label: &str, subnets: &str, annotations: &str) -> String {
    format!(
        "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterNetworkConnect\nmetadata: {{name: {name}, annotations: {{{annotations}}}}}\n\
         spec:\n  networkSelectors:\n  - networkSelectionType: ClusterUserDefinedNetworks\n    clusterUserDefinedNetworkSelector: {{networkSelector: {{matchLabels: {{c: {label}}}}}}}\n\
         \x20 connectSubnets: {subnets}\n  connectivity: [PodNetwork]\n"
    )
}

const V4: &str = "[{cidr: 192.168.0.0/16, networkPrefix: 24}]";

fn admit_yaml(yaml: &str) -> BTreeMap<String, ConnectAllocation> {
    let inv = Inventory::build(
        &[parse_file(Path::new("t.yaml"), yaml)],
        &Context::default(),
    );
    assert!(inv.problems.is_empty(), "{:#?}", inv.problems);
    let (alloc, p) = allocate(&inv, &ClusterConfig::default());
    assert!(p.is_empty(), "{p:#?}");
    let (out, problems) = admit(
        &inv,
        &alloc,
        &Reserved::default(),
        &ClusterConfig::default(),
        connect::MAX_PORT_TUNNEL_KEY,
    );
    // Every refusal is also reported as a problem of the object.
    let refused = out.values().filter(|c| c.accepted.is_err()).count();
    assert_eq!(problems.len(), refused, "{problems:#?}");
    out
}

#[test]
fn every_reason_is_given_with_a_message_naming_what_is_involved() {
    for (yaml, reason, message) in refusals() {
        assert_refused(&yaml, reason, message);
    }
}

/// One cluster per refusal reason (some reasons several ways), with what the refusal
/// says.
#[allow(clippy::too_many_lines)] // a test's table: one case per refusal
fn refusals() -> Vec<(String, Reason, &'static str)> {
    let two = l3("a", "x", "[{cidr: 10.1.0.0/16}]") + &l3("b", "x", "[{cidr: 10.2.0.0/16}]");
    let cases: Vec<(String, Reason, &str)> = vec![
        (
            l3("a", "x", "[{cidr: 10.1.0.0/16}]")
                + &cudn("s", "x", "{topology: Layer3, layer3: {role: Secondary, subnets: [{cidr: 10.2.0.0/16}]}}")
                + &cnc("c", "x", V4, ""),
            Reason::UnsupportedNetworkType,
            "Network 'cluster_udn_s' has role 'Secondary'. Only 'Primary' role networks are supported",
        ),
        (
            l3("a", "x", "[{cidr: 10.1.0.0/16}]")
                + &cudn("ln", "x", "{topology: Localnet, localnet: {role: Secondary, physicalNetworkName: p}}")
                + &cnc("c", "x", V4, ""),
            Reason::UnsupportedNetworkType,
            "Network 'cluster_udn_ln' has type 'localnet'. Localnet networks are not supported",
        ),
        (
            // A network without overlay (OKEP-5224: the connect routers are joined
            // over Geneve tunnels).
            l3("a", "x", "[{cidr: 10.1.0.0/16}]")
                + &cudn("flat", "x", "{topology: Layer3, transport: NoOverlay, layer3: {role: Primary, subnets: [{cidr: 10.2.0.0/16}]}}")
                + &cnc("c", "x", V4, ""),
            Reason::UnsupportedNetworkType,
            "Network 'cluster_udn_flat' has transport 'NoOverlay'. Network connect is not supported when overlay tunneling is disabled",
        ),
        (
            l3("a", "x", "[{cidr: 10.1.0.0/16}]") + &cnc("c", "x", V4, ""),
            Reason::InsufficientNetworks,
            "Only 1 network ('cluster_udn_a') selected, minimum 2 networks required for connection",
        ),
        (
            cnc("c", "nothing", V4, ""),
            Reason::InsufficientNetworks,
            "No network selected",
        ),
        (
            l3("a", "x", "[{cidr: 10.1.0.0/16}]") + &l3("b", "x", "[{cidr: 10.1.0.0/16}]") + &cnc("c", "x", V4, ""),
            Reason::OverlappingNetworkSubnets,
            "Cannot connect networks 'cluster_udn_a' and 'cluster_udn_b': overlapping pod subnets 10.1.0.0/16 and 10.1.0.0/16 detected",
        ),
        (
            two.clone() + &cnc("c", "x", "[{cidr: 10.0.0.0/8, networkPrefix: 24}]", ""),
            Reason::ConnectSubnetConflict,
            "Connect subnet 10.0.0.0/8 conflicts with the service CIDR 10.96.0.0/16",
        ),
        (
            two.clone() + &cnc("c", "x", "[{cidr: 10.1.0.0/20, networkPrefix: 24}]", ""),
            Reason::ConnectSubnetConflict,
            "Connect subnet 10.1.0.0/20 conflicts with pod subnet 10.1.0.0/16 of network 'cluster_udn_a'",
        ),
        (
            two.clone() + &cnc("c", "x", "[{cidr: 169.254.0.0/16, networkPrefix: 24}]", ""),
            Reason::ConnectSubnetConflict,
            "Connect subnet 169.254.0.0/16 conflicts with the masquerade subnet 169.254.0.0/17",
        ),
        (
            two.clone() + &cnc("c", "x", "[{cidr: 10.128.0.0/16, networkPrefix: 24}]", ""),
            Reason::ConnectSubnetConflict,
            "Connect subnet 10.128.0.0/16 conflicts with the default network's cluster subnet 10.128.0.0/14",
        ),
        (
            two.clone() + &cnc("c", "x", "[{cidr: 100.64.0.0/16, networkPrefix: 24}]", ""),
            Reason::ConnectSubnetConflict,
            "Connect subnet 100.64.0.0/16 conflicts with the default network's join subnet 100.64.0.0/16",
        ),
        (
            two.clone() + &cnc("c", "x", "[{cidr: 100.65.0.0/16, networkPrefix: 24}]", ""),
            Reason::ConnectSubnetConflict,
            "Connect subnet 100.65.0.0/16 conflicts with join subnet 100.65.0.0/16 of network 'cluster_udn_a'",
        ),
        (
            two.clone() + &cnc("c", "x", "[{cidr: 100.88.0.0/20, networkPrefix: 24}]", ""),
            Reason::ConnectSubnetConflict,
            "Connect subnet 100.88.0.0/20 conflicts with transit subnet 100.88.0.0/16 of network 'cluster_udn_a'",
        ),
        (
            l3("a", "x", "[{cidr: 10.1.0.0/16}]") + &l3("b", "x", "[{cidr: \"fd00:1::/48\"}]") + &cnc("c", "x", V4, ""),
            Reason::IPFamilyMismatch,
            "Cannot connect single-stack IPv4 network 'cluster_udn_a' with single-stack IPv6 network 'cluster_udn_b'. Networks must use the same IP family",
        ),
        (
            l3("a", "x", "[{cidr: 10.1.0.0/16}, {cidr: \"fd00:1::/48\"}]") + &l3("b", "x", "[{cidr: 10.2.0.0/16}]") + &cnc("c", "x", V4, ""),
            Reason::IPFamilyMismatch,
            "Network 'cluster_udn_a' has IPv6 subnets but connectSubnets have no IPv6 subnet",
        ),
        (
            l3("a", "x", "[{cidr: 10.1.0.0/16}]") + &l3("b", "x", "[{cidr: 10.2.0.0/16}]") + &l3("d", "x", "[{cidr: 10.3.0.0/16}]")
                + &cnc("c", "x", "[{cidr: 192.168.0.0/23, networkPrefix: 24}]", ""),
            Reason::ConnectSubnetExhausted,
            "Insufficient IP addresses in connect subnet 192.168.0.0/23 (/24 per network) for network 'cluster_udn_d': no connect subnet left in IPv4",
        ),
        (
            // A /28 block holds pairs for node ids up to 7.
            two.clone() + &node("n", &[("k8s.ovn.org/node-id", "9")]) + &cnc("c", "x", "[{cidr: 192.168.0.0/16, networkPrefix: 28}]", ""),
            Reason::ConnectSubnetExhausted,
            "no point-to-point pair for network 'cluster_udn_a' on node 'n' (id 9) in 192.168.0.0/28",
        ),
        (
            // A block at index 200 of /24s: keys from 200·256 + 1, above OVN's limit.
            two.clone() + &node("n", &[]) + &cnc("c", "x", "[{cidr: 10.200.0.0/16, networkPrefix: 24}]",
                r#"k8s.ovn.org/network-connect-subnet: '{"layer3_1":{"ipv4":"10.200.200.0/24"}}'"#),
            Reason::ConnectSubnetExhausted,
            "the connect router's port for network 'cluster_udn_a' on node 'n' (id 2) would need a tunnel key above OVN's limit of 32767",
        ),
    ];
    cases
}

/// The connect `c` of `yaml` is refused for `reason`, its message holds `message`, and
/// its status says so.
fn assert_refused(yaml: &str, reason: Reason, message: &str) {
    let out = admit_yaml(yaml);
    let c = &out["c"];
    let Err(r) = &c.accepted else {
        panic!("{yaml}\nwas accepted: {c:?}");
    };
    assert_eq!(r.reason, reason, "{yaml}\n{}", r.message);
    // The status document it makes: Accepted False with the reason, Failure.
    let mut st = crate::api::objects::ClusterNetworkConnectStatus::default();
    crate::status::set(&mut st, crate::status::accepted(&c.accepted), "t");
    assert_eq!(st.status.as_deref(), Some("Failure"));
    assert_eq!(st.conditions.len(), 1);
    assert_eq!(
        (
            st.conditions[0].type_.as_str(),
            st.conditions[0].status.as_str()
        ),
        ("Accepted", "False")
    );
    assert_eq!(st.conditions[0].reason, reason.to_string());
    assert_eq!(st.conditions[0].message, r.message);
    assert!(
        r.message.contains(message),
        "{yaml}\nwant: {message}\ngot:  {}",
        r.message
    );
    if !yaml.contains("network-connect-subnet") {
        assert_eq!(c.tunnel_key, None, "a refused new CNC gets no tunnel key");
        assert!(c.subnets.is_empty(), "a refused new CNC gets no subnets");
    }
}

#[test]
fn a_second_connect_overlapping_a_first_on_a_shared_network_is_refused() {
    let yaml = l3("a", "x", "[{cidr: 10.1.0.0/16}]")
        + &l3("b", "x", "[{cidr: 10.2.0.0/16}]")
        + &cudn("c3", "y", "{topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 10.3.0.0/16}]}}")
        // b is in both: labels are single-valued, so the second CNC selects by name.
        + &cnc("one", "x", V4, "")
        + "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterNetworkConnect\nmetadata: {name: two}\n\
           spec:\n  networkSelectors:\n  - networkSelectionType: ClusterUserDefinedNetworks\n    clusterUserDefinedNetworkSelector: {networkSelector: {matchExpressions: [{key: c, operator: In, values: [y]}]}}\n\
           \x20 - networkSelectionType: PrimaryUserDefinedNetworks\n    primaryUserDefinedNetworkSelector: {namespaceSelector: {matchLabels: {ns: b}}}\n\
           \x20 connectSubnets: [{cidr: 192.168.128.0/17, networkPrefix: 24}]\n  connectivity: [PodNetwork]\n"
        + "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: nsb, labels: {ns: b, primary: a}}\n";
    // The namespace's primary network is a.
    let out = admit_yaml(&yaml);
    assert_eq!(out["one"].accepted, Ok(()));
    let Err(r) = &out["two"].accepted else {
        panic!("{:?}", out["two"]);
    };
    assert_eq!(r.reason, Reason::ConnectSubnetOverlap);
    assert_eq!(
        r.message,
        "Connect subnet 192.168.128.0/17 overlaps with connect subnet 192.168.0.0/16 of ClusterNetworkConnect 'one' which also selects network 'cluster_udn_a'. \
         Each ClusterNetworkConnect selecting the same network must use non-overlapping connect subnets"
    );
}

#[test]
fn new_networks_get_blocks_in_network_id_order_and_layer2_networks_pairs() {
    let yaml = node("n1", &[])
        + &l3("zz", "x", "[{cidr: 10.1.0.0/16}]")
        + &l2("aa", "x", "[10.2.0.0/16]")
        + &l3("mm", "x", "[{cidr: 10.3.0.0/16}]")
        + &l2("bb", "x", "[10.4.0.0/16]")
        + &cnc("c", "x", V4, "");
    let out = admit_yaml(&yaml);
    let c = &out["c"];
    assert_eq!(c.accepted, Ok(()));
    // Ids by name: aa 1, bb 2, mm 3, zz 4; aa takes a block for Layer2 pairs first.
    let got: Vec<(String, String)> = c
        .subnets
        .iter()
        .map(|(o, s)| (o.clone(), s[0].to_string()))
        .collect();
    assert_eq!(
        got,
        [
            ("layer2_1".to_string(), "192.168.0.0/31".to_string()),
            ("layer2_2".into(), "192.168.0.2/31".into()),
            ("layer3_3".into(), "192.168.1.0/24".into()),
            ("layer3_4".into(), "192.168.2.0/24".into()),
        ]
    );
    assert_eq!(c.networks["layer3_4"], "cluster_udn_zz");
    assert_eq!(
        c.tunnel_key,
        Some(crate::alloc::FIRST_ALLOCATED_TUNNEL_KEY + 2),
        "after the two Layer2 transit routers' keys"
    );
}

#[test]
fn a_refusal_connects_nothing_new_but_lets_deselected_networks_go() {
    // Accepted before with a, b and d; now d is gone from the selection and a new e
    // overlaps a: refused, and the annotation keeps a and b only.
    let annotation = r#"k8s.ovn.org/connect-router-tunnel-key: '16715779', k8s.ovn.org/network-connect-subnet: '{"layer3_1":{"ipv4":"192.168.0.0/24"},"layer3_2":{"ipv4":"192.168.1.0/24"},"layer3_9":{"ipv4":"192.168.2.0/24"}}'"#;
    let net = |name: &str, id: u32, label: &str, cidr: &str| {
        l3(name, label, &format!("[{{cidr: {cidr}}}]")).replace(
            "metadata: {",
            &format!("metadata: {{annotations: {{k8s.ovn.org/network-id: '{id}'}}, "),
        )
    };
    let yaml = net("a", 1, "x", "10.1.0.0/16")
        + &net("b", 2, "x", "10.2.0.0/16")
        + &net("d", 9, "other", "10.9.0.0/16")
        + &net("e", 5, "x", "10.1.0.0/20")
        + &cnc("c", "x", V4, annotation);
    let out = admit_yaml(&yaml);
    let c = &out["c"];
    assert_eq!(
        c.accepted.as_ref().unwrap_err().reason,
        Reason::OverlappingNetworkSubnets
    );
    assert_eq!(c.tunnel_key, Some(16_715_779));
    assert_eq!(
        c.subnets.keys().collect::<Vec<_>>(),
        ["layer3_1", "layer3_2"]
    );
}

#[test]
fn annotations_given_on_the_object_are_used_as_given() {
    // As OVN-Kubernetes' cluster manager annotated it: a key and a block of its choice.
    let annotation = r#"k8s.ovn.org/connect-router-tunnel-key: '20000', k8s.ovn.org/network-connect-subnet: '{"layer3_1":{"ipv4":"192.168.7.0/24"},"layer3_2":{"ipv4":"192.168.3.0/24"}}'"#;
    let yaml = node("n1", &[])
        + &l3("a", "x", "[{cidr: 10.1.0.0/16}]")
        + &l3("b", "x", "[{cidr: 10.2.0.0/16}]")
        + &cnc("c", "x", V4, annotation);
    let out = admit_yaml(&yaml);
    let c = &out["c"];
    assert_eq!(c.accepted, Ok(()));
    assert_eq!(c.tunnel_key, Some(20000));
    assert_eq!(c.subnets["layer3_1"][0].to_string(), "192.168.7.0/24");
    assert_eq!(c.subnets["layer3_2"][0].to_string(), "192.168.3.0/24");
    assert_eq!(
        connect::port_tunnel_key(
            &[("192.168.0.0/16".parse().unwrap(), 24)],
            Topology::Layer3,
            &c.subnets["layer3_1"],
            2
        ),
        Some(7 * 256 + 3)
    );
}
