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

#[test]
fn nodes_added_and_gone_edit_the_host_subnets_before_with_the_same_answer() {
    use crate::api::validate::Reserved;
    use crate::status::dir::State;
    let config = ClusterConfig::default();
    let nets = l3("red", "[{cidr: 10.1.0.0/16}]", "")
        + &l3("blue", "[{cidr: 10.2.0.0/16}, {cidr: 'fd00:2::/60'}]", "");
    let files = |nodes: &[String]| vec![parse_file(Path::new("t.yaml"), &(nodes.concat() + &nets))];
    let plain = |n: &str| node(n, &[]);
    // The first allocation, then the same nodes read with what it gave them (as the
    // daemon reads what it saved): every node is annotated exactly as allocated.
    let first = Inventory::build(
        &files(&[plain("a"), plain("b"), plain("c")]),
        &Context::default(),
    );
    let (a0, _) = allocate(&first, &config);
    let context =
        State::next(&first, &a0, &[], &State::default(), "now").context(Reserved::default());
    let read = Inventory::build(&files(&[plain("a"), plain("b"), plain("c")]), &context);
    let (a1, p1) = allocate_after(&read, &config, Some((&first, &a0)));
    assert!(p1.is_empty(), "{p1:#?}");
    assert_eq!(a1, allocate(&read, &config).0);
    assert_eq!(
        a1.as_annotated.len(),
        3,
        "every node is annotated as allocated"
    );

    // b gone, d added: the maps before are edited.
    let next = |nodes: &[String], before: &Inventory| {
        Inventory::build_after(&files(nodes), &context, Some(before))
    };
    let moved = next(&[plain("a"), plain("c"), plain("d")], &read);
    let m = NodesMoved::since(&moved, &read, &a1).expect("the nodes before read the same");
    let names = |v: Vec<&String>| v.into_iter().cloned().collect::<Vec<_>>();
    assert_eq!(names(m.added.iter().map(|(_, n, _)| *n).collect()), ["d"]);
    assert_eq!(names(m.gone.clone()), ["b"]);
    let (a2, p2) = allocate_after(&moved, &config, Some((&read, &a1)));
    assert!(p2.is_empty(), "{p2:#?}");
    assert_eq!(a2, allocate(&moved, &config).0, "as allocated afresh");
    let blue = &a2.host_subnets["cluster_udn_blue"];
    assert_eq!(blue["a"], a1.host_subnets["cluster_udn_blue"]["a"]);
    assert_eq!(
        blue["d"].len(),
        2,
        "a subnet of each family: {:?}",
        blue["d"]
    );
    assert!(!blue.contains_key("b"));
    // d was handed its subnets, not annotated with them: it is compared again later.
    assert!(!a2.as_annotated.contains_key("d") && a2.as_annotated.contains_key("a"));

    // d read back with what it was given: compared, then annotated as allocated.
    let given =
        State::next(&moved, &a2, &[], &State::default(), "now").context(Reserved::default());
    let back = Inventory::build_after(
        &files(&[plain("a"), plain("c"), plain("d")]),
        &given,
        Some(&moved),
    );
    let m = NodesMoved::since(&back, &moved, &a2).expect("a few nodes read anew");
    assert_eq!(names(m.reread.iter().map(|(n, _)| *n).collect()), ["d"]);
    let (a4, p4) = allocate_after(&back, &config, Some((&moved, &a2)));
    assert!(p4.is_empty(), "{p4:#?}");
    assert_eq!(a4, allocate(&back, &config).0);
    assert_eq!(a4.as_annotated.len(), 3);

    // A node added with a host subnet of its own that another node has: the whole
    // network is allocated again, in name order, so the node first by name keeps it.
    let a_red = a1.host_subnets["cluster_udn_red"]["a"][0].to_string();
    let taken = format!(r#"{{"cluster_udn_red":["{a_red}"]}}"#);
    let clash = next(
        &[
            node("0a", &[("k8s.ovn.org/node-subnets", &taken)]),
            plain("a"),
            plain("c"),
        ],
        &read,
    );
    assert!(clash.problems.is_empty(), "{:#?}", clash.problems);
    assert!(NodesMoved::since(&clash, &read, &a1).is_some());
    let (a3, p3) = allocate_after(&clash, &config, Some((&read, &a1)));
    let (fresh, fresh_problems) = allocate(&clash, &config);
    assert_eq!((&a3, &p3), (&fresh, &fresh_problems));
    assert_eq!(
        a3.host_subnets["cluster_udn_red"]["0a"][0].to_string(),
        a_red
    );
    assert_eq!(p3.len(), 1, "a's subnet is not kept: {p3:#?}");

    // A node before whose annotations changed: compared, and found not as given.
    let changed = next(
        &[node("a", &[("k8s.ovn.org/node-subnets", "{}")]), plain("c")],
        &read,
    );
    let m = NodesMoved::since(&changed, &read, &a1).expect("one node read anew");
    assert_eq!(names(m.reread.iter().map(|(n, _)| *n).collect()), ["a"]);
    assert_eq!(
        allocate_after(&changed, &config, Some((&read, &a1))),
        allocate(&changed, &config)
    );
}

#[test]
fn a_network_added_after_many_only_edited_finds_each_nodes_annotation_for_it() {
    use crate::api::validate::Reserved;
    use crate::status::dir::State;
    let config = ClusterConfig::default();
    // Twelve networks, then a thirteenth last by name: when it comes, each node's walk
    // through its annotations has passed over twelve networks whose host subnets
    // were only edited, and is moved ahead by a look-up.
    let nets = |n: usize| -> String {
        (0..n)
            .map(|i| {
                l3(
                    &format!("net{i:02}"),
                    &format!("[{{cidr: 10.{i}.0.0/16}}]"),
                    "",
                )
            })
            .collect()
    };
    let added = l3("zz", "[{cidr: 10.99.0.0/16}]", "");
    let plain = |n: &str| node(n, &[]);
    let file = |body: String| vec![parse_file(Path::new("t.yaml"), &body)];
    let nodes = [plain("a"), plain("b"), plain("c")].concat();
    let first = Inventory::build(&file(nodes.clone() + &nets(12)), &Context::default());
    let (a0, _) = allocate(&first, &config);
    let context =
        State::next(&first, &a0, &[], &State::default(), "now").context(Reserved::default());
    let read = Inventory::build_after(&file(nodes + &nets(12)), &context, Some(&first));
    let (a1, _) = allocate_after(&read, &config, Some((&first, &a0)));
    // b comes annotated for zz already, with a subnet that is not the first free one.
    let b_zz = r#"{"cluster_udn_zz":["10.99.7.0/24"]}"#;
    let with_zz = [
        plain("a"),
        node("b", &[("k8s.ovn.org/node-subnets", b_zz)]),
        plain("c"),
    ]
    .concat();
    let now = Inventory::build_after(&file(with_zz + &nets(12) + &added), &context, Some(&read));
    assert!(now.problems.is_empty(), "{:#?}", now.problems);
    let (a2, p2) = allocate_after(&now, &config, Some((&read, &a1)));
    assert!(p2.is_empty(), "{p2:#?}");
    assert_eq!(a2, allocate(&now, &config).0, "as allocated afresh");
    let zz = &a2.host_subnets["cluster_udn_zz"];
    assert_eq!(
        zz["b"][0].to_string(),
        "10.99.7.0/24",
        "b keeps its annotation"
    );
    assert_eq!(zz.len(), 3);
}
