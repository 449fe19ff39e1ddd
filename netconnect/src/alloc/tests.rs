//! Allocation over whole inventories: determinism, annotations kept, conflicts reported.

use std::path::Path;

use super::*;
use crate::api::load::parse_file;
use crate::api::{Context, Inventory};
use crate::testing::node;

fn l3(name: &str, subnets: &str, annotations: &str) -> String {
    format!(
        "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata:\n  name: {name}\n  annotations: {{{annotations}}}\n\
         spec:\n  namespaceSelector: {{}}\n  network:\n    topology: Layer3\n    layer3:\n      role: Primary\n      subnets: {subnets}\n"
    )
}

fn l2(name: &str, annotations: &str) -> String {
    format!(
        "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata:\n  name: {name}\n  annotations: {{{annotations}}}\n\
         spec:\n  namespaceSelector: {{}}\n  network:\n    topology: Layer2\n    layer2:\n      role: Primary\n      subnets: [10.200.0.0/16]\n"
    )
}

fn run(yaml: &str) -> (Inventory, Allocations, Vec<Problem>) {
    let inv = Inventory::build(
        &[parse_file(Path::new("t.yaml"), yaml)],
        &Context::default(),
    );
    assert!(inv.problems.is_empty(), "{:#?}", inv.problems);
    let (a, p) = allocate(&inv, &ClusterConfig::default());
    (inv, a, p)
}

#[test]
fn allocations_do_not_depend_on_the_order_objects_are_read() {
    let parts = [
        node("c", &[]),
        node("a", &[]),
        node("b", &[]),
        l3("red", "[{cidr: 10.1.0.0/16}]", ""),
        l3("blue", "[{cidr: 10.2.0.0/16}]", ""),
        l2("green", ""),
    ];
    let forward = run(&parts.concat()).1;
    let mut reversed = parts.to_vec();
    reversed.reverse();
    let backward = run(&reversed.concat()).1;
    assert_eq!(forward, backward);
    assert_eq!(forward.node_ids["a"], 2);
    assert_eq!(forward.node_ids["c"], 4);
    assert_eq!(
        forward.network_ids["cluster_udn_blue"], 1,
        "networks by name"
    );
    assert_eq!(forward.network_ids["cluster_udn_green"], 2);
    assert_eq!(forward.network_ids["cluster_udn_red"], 3);
    assert_eq!(
        forward.host_subnets["cluster_udn_red"]["b"][0].to_string(),
        "10.1.1.0/24"
    );
    assert_eq!(forward.node_transit["c"][0].to_string(), "100.88.0.4/16");
    assert_eq!(
        forward.tunnel_keys["cluster_udn_green"],
        vec![16711685, 16715779]
    );
}

#[test]
fn annotated_allocations_are_kept_and_new_ones_follow_them() {
    let yaml = node("a", &[("k8s.ovn.org/node-id", "7")])
        + &node("b", &[])
        + &node(
            "c",
            &[(
                "k8s.ovn.org/node-subnets",
                r#"{"cluster_udn_red":["10.1.9.0/24"],"default":["10.244.0.0/24"]}"#,
            )],
        )
        + &l3(
            "red",
            "[{cidr: 10.1.0.0/16}]",
            "k8s.ovn.org/network-id: '40'",
        );
    let (_, a, p) = run(&yaml);
    assert!(p.is_empty(), "{p:?}");
    assert_eq!(
        (a.node_ids["a"], a.node_ids["b"], a.node_ids["c"]),
        (7, 8, 9)
    );
    assert_eq!(a.network_ids["cluster_udn_red"], 40);
    let red = &a.host_subnets["cluster_udn_red"];
    assert_eq!(red["c"][0].to_string(), "10.1.9.0/24");
    assert_eq!(red["a"][0].to_string(), "10.1.10.0/24");
    assert_eq!(red["b"][0].to_string(), "10.1.11.0/24");
}

#[test]
fn appended_subnets_serve_new_nodes_and_move_no_existing_one() {
    let full = "[{cidr: 10.1.0.0/23, hostSubnet: 24}]";
    let grown = "[{cidr: 10.1.0.0/23, hostSubnet: 24}, {cidr: 10.2.0.0/23, hostSubnet: 24}]";
    let subnets = r#"{"cluster_udn_red":["10.1.0.0/24"]}"#;
    let subnets_b = r#"{"cluster_udn_red":["10.1.1.0/24"]}"#;
    let existing = node("a", &[("k8s.ovn.org/node-subnets", subnets)])
        + &node("b", &[("k8s.ovn.org/node-subnets", subnets_b)]);
    let (_, a, p) = run(&(existing.clone() + &node("c", &[]) + &l3("red", full, "")));
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].to_string()
            .contains("no IPv4 host subnet for node c: no subnets available"),
        "{}",
        p[0]
    );
    assert!(a.host_subnets["cluster_udn_red"]["c"].is_empty());
    let (_, a, p) = run(&(existing + &node("c", &[]) + &l3("red", grown, "")));
    assert!(p.is_empty(), "{p:?}");
    let red = &a.host_subnets["cluster_udn_red"];
    assert_eq!(red["a"][0].to_string(), "10.1.0.0/24");
    assert_eq!(red["b"][0].to_string(), "10.1.1.0/24");
    assert_eq!(red["c"][0].to_string(), "10.2.0.0/24");
}

#[test]
fn clashing_annotations_are_reported_and_the_first_keeps_its_value() {
    let subnets = r#"{"cluster_udn_red":["10.1.0.0/24"]}"#;
    let yaml = node(
        "a",
        &[
            ("k8s.ovn.org/node-id", "3"),
            ("k8s.ovn.org/node-subnets", subnets),
        ],
    ) + &node(
        "b",
        &[
            ("k8s.ovn.org/node-id", "3"),
            ("k8s.ovn.org/node-subnets", subnets),
        ],
    ) + &l3("red", "[{cidr: 10.1.0.0/16}]", "")
        + &l2(
            "blue",
            "k8s.ovn.org/network-id: '1', k8s.ovn.org/tunnel-keys: '[16711684,16715800]'",
        )
        + &l2(
            "green",
            "k8s.ovn.org/network-id: '2', k8s.ovn.org/tunnel-keys: '[16711685,16715800]'",
        );
    let (_, a, p) = run(&yaml);
    let text: Vec<String> = p.iter().map(ToString::to_string).collect();
    assert!(
        text.iter().any(|t| t.contains("Node b")
            && t.contains(
                "node id 3 cannot be used: 3 is already in use; node id 4 is allocated instead"
            )),
        "{text:#?}"
    );
    assert!(
        text.iter().any(|t| t.contains("Node b")
            && t.contains("host subnet 10.1.0.0/24 of network cluster_udn_red is not kept")),
        "{text:#?}"
    );
    assert!(
        text.iter()
            .any(|t| t.contains("ClusterUserDefinedNetwork green")
                && t.contains("tunnel key 16715800 cannot be used")),
        "{text:#?}"
    );
    assert_eq!(a.node_ids["a"], 3);
    // As OVN-Kubernetes' cluster manager does with a duplicate id: b gets a new one.
    assert_eq!(a.node_ids["b"], 4);
    assert_eq!(
        a.host_subnets["cluster_udn_red"]["a"][0].to_string(),
        "10.1.0.0/24"
    );
    assert!(!a.tunnel_keys.contains_key("cluster_udn_green"));
}

#[test]
fn a_node_annotated_with_a_reserved_id_gets_a_new_one_and_the_bad_id_is_reported() {
    // OVN-Kubernetes reserves node ids 0 and 1; its cluster manager gives such a node the
    // next free id instead of leaving it out (replayed from its ClusterNetworkConnect
    // tests, where netconnectd dropped the node and its networks lost its rows).
    let yaml = node("a", &[("k8s.ovn.org/node-id", "1")])
        + &node("b", &[("k8s.ovn.org/node-id", "2")])
        + &node("c", &[("k8s.ovn.org/node-id", "0")])
        + &l3("red", "[{cidr: 10.1.0.0/16}]", "");
    let (_, a, p) = run(&yaml);
    assert_eq!(a.node_ids["b"], 2);
    assert_eq!(a.node_ids["a"], 3);
    assert_eq!(a.node_ids["c"], 4);
    for (n, id, new) in [("a", 1, 3), ("c", 0, 4)] {
        assert!(
            a.host_subnets["cluster_udn_red"][n].len() == 1,
            "node {n} keeps its rows"
        );
        assert!(
            p.iter().any(|p| {
                let t = p.to_string();
                t.contains(&format!("Node {n}: metadata.annotations[k8s.ovn.org/node-id]"))
                    && t.contains(&format!(
                        "node id {id} cannot be used: {id} is outside 2..=5000; node id {new} is allocated instead"
                    ))
            }),
            "{p:#?}"
        );
    }
    assert_eq!(p.len(), 2, "{p:#?}");
}

#[test]
fn tunnel_keys_skip_those_of_connect_routers() {
    let cnc = "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterNetworkConnect\nmetadata:\n  name: c\n  annotations: {k8s.ovn.org/connect-router-tunnel-key: '16715779'}\n\
               spec:\n  networkSelectors: [{networkSelectionType: ClusterUserDefinedNetworks, clusterUserDefinedNetworkSelector: {networkSelector: {}}}]\n  connectSubnets: [{cidr: 192.168.0.0/16, networkPrefix: 24}]\n  connectivity: [PodNetwork]\n";
    let (_, a, p) = run(&(l2("blue", "") + cnc));
    assert!(p.is_empty());
    assert_eq!(a.tunnel_keys["cluster_udn_blue"], vec![16711684, 16715780]);
}
