//! The state worked out from an inventory: objects with their allocations as
//! annotations, their conditions, and what is shared with the state before.

use std::collections::BTreeMap;
use std::path::Path;

use crate::alloc::{allocate, ClusterConfig};
use crate::api::load::parse_file;
use crate::api::validate::Reserved;
use crate::api::Remembered;
use crate::status::dir::tests::{conditions, l3, run, state_of};
use crate::status::dir::{read_connect, record_ready};
use crate::testing::node;

use super::*;

/// `node` with `text` as its host subnets annotation.
fn with_text(node: &Node, text: &str) -> Node {
    let mut node = node.clone();
    let a = node.metadata.annotations_mut();
    a.insert(NODE_SUBNETS.into(), text.into());
    node
}

#[test]
fn a_node_is_the_one_before_with_its_text_only_when_every_field_is() {
    let built: Node = serde_json::from_str(
        r#"{"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "a", "labels": {"zone": "z1"}, "uid": "u1",
                         "annotations": {"k8s.ovn.org/node-id": "3"}},
            "spec": {"podCIDR": "10.244.0.0/24"},
            "status": {"conditions": []}}"#,
    )
    .unwrap();
    let text = r#"{"net":"10.1.0.0/24"}"#;
    let had = with_text(&built, text);
    assert!(is_with_text(&built, text, &had));
    assert!(!is_with_text(&built, r#"{"net":"10.1.1.0/24"}"#, &had));
    assert!(
        !is_with_text(&had, text, &had),
        "built holds the text already"
    );
    let changes: [&dyn Fn(&mut Node); 10] = [
        &|n| n.spec = None,
        &|n| n.status = None,
        &|n| n.metadata.name = Some("b".into()),
        &|n| n.metadata.namespace = Some("ns".into()),
        &|n| {
            drop(
                n.metadata
                    .labels
                    .get_or_insert_default()
                    .insert("zone".into(), "z2".into()),
            )
        },
        &|n| {
            drop(
                n.metadata
                    .annotations_mut()
                    .insert(NODE_ID.into(), "4".into()),
            )
        },
        &|n| {
            drop(
                n.metadata
                    .annotations_mut()
                    .insert("other".into(), "x".into()),
            )
        },
        &|n| n.metadata.uid = Some("u2".into()),
        &|n| n.metadata.resource_version = Some("7".into()),
        &|n| n.metadata.finalizers = Some(vec!["f".into()]),
    ];
    for (i, change) in changes.iter().enumerate() {
        let mut other = built.clone();
        change(&mut other);
        assert_ne!(with_text(&other, text), had, "change {i}");
        assert!(!is_with_text(&other, text, &had), "change {i}");
    }
    // One annotation fewer, and the text under the count of the others.
    let mut fewer = built.clone();
    fewer.metadata.annotations_mut().clear();
    assert!(!is_with_text(&fewer, text, &had));
}

#[test]
fn a_nodes_replaced_annotation_condition_keeps_its_time_while_it_lasts() {
    let condition = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == NODE_ANNOTATIONS_ACCEPTED))
            .cloned()
    };
    let mut first = Node::default();
    node_annotations_condition(
        &mut first,
        None,
        &["id 1 replaced".into()],
        "2026-11-28T10:00:00Z",
    );
    let c = condition(&first).unwrap();
    assert_eq!(
        (c.status.as_str(), c.message.as_deref()),
        ("False", Some("id 1 replaced"))
    );
    let since = c.last_transition_time.unwrap().0.to_string();
    assert_eq!(since, "2026-11-28T10:00:00Z");
    // Still replaced an hour later: the time it started stays.
    let mut later = Node::default();
    node_annotations_condition(
        &mut later,
        Some(&first),
        &["id 1 replaced".into()],
        "2026-11-28T11:00:00Z",
    );
    let c = condition(&later).unwrap();
    assert_eq!(c.last_transition_time.unwrap().0.to_string(), since);
    // Mended: the condition goes, the node's other conditions stay.
    let mut mended = later.clone();
    mended
        .status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()
        .push(Default::default());
    node_annotations_condition(&mut mended, Some(&later), &[], "2026-11-28T12:00:00Z");
    assert!(condition(&mended).is_none());
    assert_eq!(mended.status.unwrap().conditions.unwrap().len(), 1);
    // A node with nothing replaced and no condition is left as it was.
    let mut plain = Node::default();
    node_annotations_condition(&mut plain, None, &[], "2026-11-28T12:00:00Z");
    assert_eq!(plain, Node::default());
}

#[test]
fn a_state_shares_the_objects_that_did_not_change_with_the_one_before() {
    let net = l3("[{cidr: 10.1.0.0/16}]");
    let first = state_of(
        &(node("a", &[]) + &node("b", &[]) + &net),
        &State::default(),
    );
    let shared = |before: &State, after: &State, kind: &str, name: &str| {
        let k = (kind.to_owned(), name.to_owned());
        Arc::ptr_eq(&before.objects[&k], &after.objects[&k])
    };
    // A node added: the others, and the network, are the objects they were.
    let nodes = node("a", &[]) + &node("b", &[]) + &node("c", &[]);
    let second = state_of(&(nodes.clone() + &net), &first);
    assert!(shared(&first, &second, "Node", "a"));
    assert!(shared(&first, &second, "Node", "b"));
    assert!(shared(&first, &second, "UserDefinedNetwork", "red/net"));
    // A second network: every node's host subnets change; the first network is
    // shared still.
    let blue = "---\napiVersion: k8s.ovn.org/v1\nkind: UserDefinedNetwork\nmetadata: {name: net, namespace: blue}\n\
                spec:\n  topology: Layer3\n  layer3:\n    role: Primary\n    subnets: [{cidr: 10.2.0.0/16}]\n";
    let third = state_of(&(nodes + &net + blue), &second);
    assert!(!shared(&second, &third, "Node", "a"));
    assert!(shared(&second, &third, "UserDefinedNetwork", "red/net"));
    let Object::Node(a) = &*third.objects[&("Node".to_owned(), "a".to_owned())] else {
        panic!("a is a node");
    };
    assert!(a.metadata.annotations()[NODE_SUBNETS].contains("blue"));
}

#[test]
fn networks_carry_their_conditions() {
    let dir = tempfile::tempdir().unwrap();
    // A /24 cut in /25s serves two nodes at most: one of three gets none.
    let cudn = "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {name: wide}\n\
                spec:\n  namespaceSelector: {matchLabels: {t: x}}\n  network: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 10.9.0.0/24, hostSubnet: 25}]}}\n";
    let ns = |n: &str| {
        format!("---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {n}, labels: {{t: x}}}}\n")
    };
    let yaml = node("a", &[])
        + &node("b", &[])
        + &node("c", &[])
        + &l3("[{cidr: 10.1.0.0/16}]")
        + cudn
        + &ns("p")
        + &ns("q");
    run(dir.path(), &yaml);
    let t = |a: &str, b: &str, c: &str, d: &str| (a.into(), b.into(), c.into(), d.into());
    assert_eq!(
        conditions(dir.path(), "UserDefinedNetwork/red/net.yaml"),
        [
            t(
                "NetworkCreated",
                "True",
                "NetworkAccepted",
                "Network accepted"
            ),
            t(
                "NetworkAllocationSucceeded",
                "True",
                "NetworkAllocationSucceeded",
                "Network allocation succeeded for all synced nodes."
            ),
        ]
    );
    let wide = conditions(dir.path(), "ClusterUserDefinedNetwork/wide.yaml");
    assert_eq!(
        wide[0],
        t(
            "NetworkCreated",
            "True",
            "NetworkAccepted",
            "Network accepted for the selected namespaces: [p, q]"
        )
    );
    assert_eq!(
        (wide[1].1.as_str(), wide[1].2.as_str()),
        ("False", "NetworkAllocationFailed")
    );
    assert!(wide[1].3.contains("host subnet for node"), "{}", wide[1].3);
}

#[test]
fn a_refused_network_is_written_with_why_and_never_taken_as_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let udn = |name: &str, subnets: &str| {
        format!(
            "---\napiVersion: k8s.ovn.org/v1\nkind: UserDefinedNetwork\nmetadata: {{name: {name}, namespace: a}}\n\
             spec: {{topology: Layer3, layer3: {{role: Primary, subnets: {subnets}}}}}\n"
        )
    };
    // a/b-c and a/b.c would name their OVN objects alike: the second is refused.
    run(
        dir.path(),
        &(node("n", &[])
            + &udn("b-c", "[{cidr: 10.1.0.0/16}]")
            + &udn("b.c", "[{cidr: 10.2.0.0/16}, {cidr: 10.4.0.0/16}]")),
    );
    let refused = conditions(dir.path(), "UserDefinedNetwork/a/b.c.yaml");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(
        (
            refused[0].0.as_str(),
            refused[0].1.as_str(),
            refused[0].2.as_str()
        ),
        ("NetworkCreated", "False", "SyncError")
    );
    assert!(
        refused[0].3.contains("would share the OVN name prefix"),
        "{}",
        refused[0].3
    );
    // Alone, with a subnet fewer: a new network, not an update removing a subnet.
    let (inv, _) = run(
        dir.path(),
        &(node("n", &[]) + &udn("b.c", "[{cidr: 10.2.0.0/16}]")),
    );
    assert!(inv.problems.is_empty(), "{:?}", inv.problems);
    assert_eq!(inv.networks["a_b.c"].network.subnets.len(), 1);
    assert_eq!(
        conditions(dir.path(), "UserDefinedNetwork/a/b.c.yaml")[0].1,
        "True"
    );
}

#[test]
fn a_node_with_a_reserved_id_keeps_its_rows_and_its_status_says_what_was_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = node("a", &[("k8s.ovn.org/node-id", "1")]) + &l3("[{cidr: 10.1.0.0/16}]");
    let (_, alloc) = run(dir.path(), &yaml);
    assert_eq!(alloc.node_ids["a"], 2);
    assert_eq!(alloc.host_subnets["red_net"]["a"].len(), 1);
    let text = std::fs::read_to_string(dir.path().join("Node/a.yaml")).unwrap();
    assert!(text.contains("k8s.ovn.org/node-id: '2'"), "{text}");
    for line in [
        "  - message: 'metadata.annotations[k8s.ovn.org/node-id]: node id 1 cannot be used: 1 is outside 2..=5000; node id 2 is allocated instead'\n",
        "    reason: AnnotationReplaced\n",
        "    status: 'False'\n",
        "    type: OVNAnnotationsAccepted\n",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
    // Once the annotation is mended, the condition goes.
    run(
        dir.path(),
        &(node("a", &[("k8s.ovn.org/node-id", "2")]) + &l3("[{cidr: 10.1.0.0/16}]")),
    );
    let text = std::fs::read_to_string(dir.path().join("Node/a.yaml")).unwrap();
    assert!(!text.contains("OVNAnnotationsAccepted"), "{text}");
    assert!(text.contains("k8s.ovn.org/node-id: '2'"), "{text}");
}

#[test]
fn a_refused_connect_that_keeps_accepted_rows_says_so_in_its_zone_condition() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ClusterNetworkConnect/c.yaml");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        "apiVersion: k8s.ovn.org/v1\nkind: ClusterNetworkConnect\nmetadata:\n  name: c\n  annotations:\n    \
         k8s.ovn.org/network-connect-subnet: '{\"cluster_udn_red\":{\"ipv4\":\"192.168.0.0/24\"},\"cluster_udn_blue\":{\"ipv4\":\"192.168.1.0/24\"}}'\n\
         spec:\n  networkSelectors: []\n  connectSubnets: [{cidr: 192.168.0.0/16, networkPrefix: 24}]\n  connectivity: [PodNetwork]\n\
         status:\n  conditions:\n  - type: Accepted\n    status: 'False'\n    reason: InsufficientNetworks\n    message: only one network\n    lastTransitionTime: t\n",
    )
    .unwrap();
    assert!(record_ready(dir.path(), "c", "node-a", &Ok(vec![]), "t2").unwrap());
    let c = read_connect(&path).unwrap();
    let status = c.status.unwrap();
    let ready = &status.conditions[1];
    assert_eq!(ready.type_, "Ready-In-Zone-node-a");
    assert_eq!(ready.status, "True");
    assert!(
        ready.message.ends_with("the connect is not accepted, so its current definition is not programmed: what is programmed is the last accepted definition, connecting cluster_udn_blue, cluster_udn_red"),
        "{}",
        ready.message
    );
    assert_eq!(status.status.as_deref(), Some("Failure"));
}

#[test]
fn a_refused_update_keeps_the_accepted_spec_in_force_and_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    run(
        dir.path(),
        &(node("a", &[]) + &l3("[{cidr: 10.1.0.0/16}, {cidr: 10.2.0.0/16}]")),
    );
    let (inv, _) = {
        let (state, _) = State::load(dir.path()).unwrap();
        let ctx = state.context(Reserved::default());
        let inv = Inventory::build(
            &[parse_file(
                Path::new("m.yaml"),
                &(node("a", &[]) + &l3("[{cidr: 10.2.0.0/16}]")),
            )],
            &ctx,
        );
        let (alloc, _) = allocate(&inv, &ClusterConfig::default());
        State::next(&inv, &alloc, &[], &state, "t")
            .save(dir.path())
            .unwrap();
        (inv, alloc)
    };
    assert_eq!(inv.problems.len(), 1);
    let p = inv.problems[0].to_string();
    assert!(
        p.contains("UserDefinedNetwork red/net: spec.layer3.subnets: Removing existing subnets is not allowed: 10.1.0.0/16 is gone; the accepted definition stays in force"),
        "{p}"
    );
    assert_eq!(inv.networks["red_net"].network.subnets.len(), 2);
    let net = std::fs::read_to_string(dir.path().join("UserDefinedNetwork/red/net.yaml")).unwrap();
    assert!(
        net.contains("10.1.0.0/16"),
        "the accepted spec is kept: {net}"
    );
}

#[test]
fn annotations_on_the_objects_win_over_remembered_ones() {
    let dir = tempfile::tempdir().unwrap();
    run(dir.path(), &(node("a", &[]) + &l3("[{cidr: 10.1.0.0/16}]")));
    let (_, a) = run(
        dir.path(),
        &(node("a", &[("k8s.ovn.org/node-id", "9")]) + &l3("[{cidr: 10.1.0.0/16}]")),
    );
    assert_eq!(a.node_ids["a"], 9);
    assert_eq!(
        a.host_subnets["red_net"]["a"][0].to_string(),
        "10.1.0.0/24",
        "the subnet is kept"
    );
}

#[test]
fn a_nodes_subnets_of_networks_not_managed_here_are_kept_in_name_order() {
    // "default" and "zzz_net" are not networks of the inventory: written back as
    // read, around this network's entry, in name order.
    let own = r#"{"zzz_net":["10.9.0.0/24"],"default":"10.244.0.0/24"}"#;
    let yaml = node("a", &[("k8s.ovn.org/node-subnets", own)])
        + &node("b", &[])
        + &l3("[{cidr: 10.1.0.0/16}, {cidr: fd00:1::/48}]");
    let state = state_of(&yaml, &State::default());
    let written = |name: &str| match &*state.objects[&("Node".to_owned(), name.to_owned())] {
        Object::Node(n) => n.metadata.annotations()[NODE_SUBNETS].clone(),
        o => panic!("{o:?} is not a node"),
    };
    assert_eq!(
        written("a"),
        r#"{"default":["10.244.0.0/24"],"red_net":["10.1.0.0/24","fd00:1:0:1::/64"],"zzz_net":["10.9.0.0/24"]}"#
    );
    assert_eq!(
        written("b"),
        r#"{"red_net":["10.1.1.0/24","fd00:1:0:2::/64"]}"#
    );
}

#[allow(clippy::too_many_lines)] // a test: one story, start to end
#[test]
fn a_state_worked_out_after_the_one_before_is_the_state_worked_out_whole() {
    // Random steps (a fixed seed): nodes and networks come and go, nodes carry
    // host subnets of their own or not; each step's state worked out after the
    // state before (splicing what changed into the nodes' texts) is the state
    // worked out whole. The world is built beside the state saved, after the world
    // before or after that world read again beside the state (as netconnectd
    // does once the manifests are quiet).
    use crate::world::{Settings, World};
    let mut next = crate::testing::random(0x0bad_5eed_1234_5678u64);
    let network = |i: usize| {
        let spec = match i % 4 {
            3 => format!("topology: Layer2\n    layer2: {{role: Primary, subnets: [10.{i}.0.0/16]}}"),
            1 => format!("topology: Layer3\n    layer3: {{role: Primary, subnets: [{{cidr: 10.{i}.0.0/16}}, {{cidr: 'fd00:{i}::/48'}}]}}"),
            _ => format!("topology: Layer3\n    layer3: {{role: Primary, subnets: [{{cidr: 10.{i}.0.0/16, hostSubnet: 24}}]}}"),
        };
        format!(
            "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {{name: net{i}}}\n\
             spec:\n  namespaceSelector: {{}}\n  network:\n    {spec}\n"
        )
    };
    // A node as plain, with host subnets of a network not managed here, or with a
    // host subnet of its own for net0.
    let a_node = |i: usize, kind: u64| match kind {
        0 => node(&format!("n{i}"), &[]),
        1 => node(
            &format!("n{i}"),
            &[(NODE_SUBNETS, r#"{"default":"10.244.1.0/24"}"#)],
        ),
        _ => node(
            &format!("n{i}"),
            &[(
                NODE_SUBNETS,
                &format!(r#"{{"cluster_udn_net0":["10.0.{}.0/24"]}}"#, 100 + i),
            )],
        ),
    };
    let (mut compared, mut spliced, mut contexts_remembering) = (0, 0, 0);
    for _ in 0..30 {
        let mut nets: BTreeMap<usize, ()> = BTreeMap::new();
        let mut nodes: BTreeMap<usize, u64> = BTreeMap::new();
        let mut state = State::default();
        let (mut built_after, mut state_of): (Option<World>, Option<World>) = (None, None);
        for _ in 0..12 {
            for _ in 0..next(3) {
                let i = next(8) as usize;
                if nets.remove(&i).is_none() {
                    nets.insert(i, ());
                }
            }
            for _ in 0..next(4) {
                let i = next(10) as usize;
                match next(4) {
                    0 => nodes.remove(&i),
                    k => nodes.insert(
                        i,
                        u64::from(k == 3 && next(3) == 0) + u64::from(k == 2 && next(3) == 0) * 2,
                    ),
                };
            }
            let yaml: String = nets
                .keys()
                .map(|i| network(*i))
                .chain(nodes.iter().map(|(i, k)| a_node(*i, *k)))
                .collect();
            let files = [parse_file(Path::new("m.yaml"), &yaml)];
            let w = World::build_after(&files, &state, Settings::default(), built_after.as_ref());
            let problems = &w.problems[w.inventory.problems.len()..];
            let whole = State::next(&w.inventory, &w.allocations, problems, &state, "then");
            let basis = state_of.as_ref().map(|b| (&b.inventory, &b.allocations));
            let after = State::next_after(
                &w.inventory,
                &w.allocations,
                problems,
                &state,
                basis,
                "then",
            );
            assert_eq!(after, whole, "{yaml}");
            compared += 1;
            if let Some(b) = &state_of {
                let changed =
                    super::super::annotate::changed_host_subnets(&w.allocations, &b.allocations);
                spliced += usize::from(changed.is_some_and(|c| !c.is_empty()));
            }
            // What the context remembers of an object is read where the state
            // holds it, and is what a context of the state read back from its
            // files remembers.
            let ctx = whole.context(Reserved::default());
            for (k, r) in &ctx.remembered {
                assert!(
                    matches!(r, Remembered::Of(o) if Arc::ptr_eq(o, &whole.objects[k])),
                    "{k:?} copied"
                );
            }
            let dir = tempfile::tempdir().unwrap();
            whole.save(dir.path()).unwrap();
            let (read, problems) = State::load(dir.path()).unwrap();
            assert!(problems.is_empty(), "{problems:?}");
            let cold = read.context(Reserved::default());
            assert_eq!(format!("{ctx:?}"), format!("{cold:?}"), "{yaml}");
            contexts_remembering += usize::from(!ctx.remembered.is_empty());
            state = whole;
            built_after = Some(match next(2) {
                0 => World::build_after(&files, &state, Settings::default(), Some(&w)),
                _ => w.clone(),
            });
            state_of = Some(w);
        }
    }
    assert_eq!(compared, 360);
    assert!(spliced > 100, "only {spliced} states spliced what changed");
    assert!(
        contexts_remembering > 100,
        "only {contexts_remembering} contexts remembered anything"
    );
}

#[test]
fn a_connects_subnets_once_accepted_stay_in_force() {
    // OKEP-5224: connectSubnets is immutable; a changed list is reported and the
    // accepted one kept (the connect's allocations are carved from it).
    let cnc = |cidr: &str| {
        format!(
            "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterNetworkConnect\nmetadata: {{name: c}}\n\
             spec:\n  networkSelectors: [{{networkSelectionType: ClusterUserDefinedNetworks, clusterUserDefinedNetworkSelector: {{networkSelector: {{}}}}}}]\n\
             \x20 connectSubnets: [{{cidr: {cidr}, networkPrefix: 24}}]\n  connectivity: [PodNetwork]\n"
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let (inv, _) = run(
        dir.path(),
        &(node("a", &[]) + &l3("[{cidr: 10.1.0.0/16}]") + &cnc("192.168.0.0/16")),
    );
    assert!(inv.problems.is_empty(), "{:?}", inv.problems);
    let (inv, _) = run(
        dir.path(),
        &(node("a", &[]) + &l3("[{cidr: 10.1.0.0/16}]") + &cnc("172.16.0.0/16")),
    );
    let problems: Vec<String> = inv.problems.iter().map(ToString::to_string).collect();
    assert!(
        problems.iter().any(|p| p.contains(
            "ClusterNetworkConnect c: spec.connectSubnets: connectSubnets is immutable; the accepted ones stay in force"
        )),
        "{problems:?}"
    );
    let subnets: Vec<String> = inv.connects["c"]
        .spec
        .connect_subnets
        .iter()
        .map(|s| s.0.to_string())
        .collect();
    assert_eq!(subnets, ["192.168.0.0/16"]);
}

#[test]
fn a_layer2_transit_subnet_moved_off_an_overlap_is_said_in_the_status() {
    // OKEP-5094: the default transit subnet 100.88.0.0/16 overlaps the network's
    // 100.88.0.0/20; it moves to the next /16, and the status says so. A network clear
    // of it says nothing of its transit subnet.
    let l2 = |name: &str, subnet: &str| {
        format!(
            "---\napiVersion: k8s.ovn.org/v1\nkind: UserDefinedNetwork\nmetadata: {{name: {name}, namespace: red}}\n\
             spec:\n  topology: Layer2\n  layer2: {{role: Primary, subnets: [{subnet}]}}\n"
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let yaml = l2("over", "100.88.0.0/20") + &l2("clear", "10.5.0.0/16");
    run(dir.path(), &yaml);
    let created = |file: &str| {
        conditions(dir.path(), file)
            .into_iter()
            .find(|c| c.0 == NETWORK_CREATED)
            .unwrap()
    };
    let over = created("UserDefinedNetwork/red/over.yaml");
    assert_eq!(over.1, "True");
    assert!(
        over.3.contains(
            "transit subnet moved to 100.89.0.0/16 (the default 100.88.0.0/16 overlaps the network's subnets or join subnet)"
        ),
        "{over:?}"
    );
    let clear = created("UserDefinedNetwork/red/clear.yaml");
    assert!(!clear.3.contains("transit"), "{clear:?}");
}
