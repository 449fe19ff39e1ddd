//! A world built after another is the world built afresh.

use std::path::Path;

use super::*;
use crate::api::load::parse_file;
use crate::status::dir::tests::{l3, sharing};
use crate::testing::node;

/// The steps of [`a_world_built_after_another_is_the_world_built_afresh`]: what
/// changes, and the files after it.
fn steps() -> Vec<(&'static str, Vec<crate::api::load::FileObjects>)> {
    let net = l3("[{cidr: 10.1.0.0/16}]");
    let net2 = "---\napiVersion: k8s.ovn.org/v1\nkind: UserDefinedNetwork\nmetadata: {name: net2, namespace: red}\n\
         spec:\n  topology: Layer3\n  layer3:\n    role: Primary\n    subnets: [{cidr: 10.2.0.0/16}]\n";
    let (a, b, c) = (node("a", &[]), node("b", &[]), node("c", &[]));
    let a9 = node("a", &[("k8s.ovn.org/node-id", "9")]);
    // A host subnet that is not the network's: not kept, and reported.
    let c_bad = node(
        "c",
        &[(
            "k8s.ovn.org/node-subnets",
            r#"{"red_net":["10.99.0.0/24"]}"#,
        )],
    );
    let one = |yaml: String| vec![parse_file(Path::new("m.yaml"), &yaml)];
    vec![
        ("first", one(a.clone() + &b + &net)),
        ("the allocations remembered", one(a.clone() + &b + &net)),
        ("nothing changed", one(a.clone() + &b + &net)),
        ("a node added", one(a.clone() + &b + &c + &net)),
        (
            "a node's annotation given",
            one(a9.clone() + &b + &c + &net),
        ),
        (
            "a node moved to another file",
            vec![
                parse_file(Path::new("m.yaml"), &(a9.clone() + &c + &net)),
                parse_file(Path::new("n.yaml"), &b),
            ],
        ),
        ("a network added", one(a9.clone() + &b + &c + &net + net2)),
        (
            "its subnets remembered",
            one(a9.clone() + &b + &c + &net + net2),
        ),
        ("a node removed", one(a9.clone() + &b + &net + net2)),
        ("a network removed", one(a9.clone() + &b + &net)),
        ("nothing changed but that", one(a9.clone() + &b + &net)),
        (
            "a node with a subnet not the network's",
            one(a9.clone() + &b + &c_bad + &net + net2),
        ),
        (
            "nothing changed but the problem",
            one(a9.clone() + &b + &c_bad + &net + net2),
        ),
        (
            "that node moved to another file",
            vec![
                parse_file(Path::new("m.yaml"), &(a9.clone() + &b + &net + net2)),
                parse_file(Path::new("n.yaml"), &c_bad),
            ],
        ),
        (
            "the other network moved too",
            vec![
                parse_file(Path::new("m.yaml"), &(a9.clone() + &b + &net)),
                parse_file(Path::new("n.yaml"), &(c_bad.clone() + net2)),
            ],
        ),
    ]
}

#[test]
fn a_world_built_after_another_is_the_world_built_afresh() {
    use crate::world::{Settings, World};
    let steps = steps();
    let mut state = State::default();
    let mut previous: Option<World> = None;
    let (mut taken, mut shared, mut kept_text) = (0, 0, 0);
    for (step, files) in &steps {
        let afresh = World::build(files, &state, Settings::default());
        let after = World::build_after(files, &state, Settings::default(), previous.as_ref());
        assert_eq!(after.inventory, afresh.inventory, "{step}");
        assert_eq!(after.allocations, afresh.allocations, "{step}");
        assert_eq!(after.problems, afresh.problems, "{step}");
        if let Some(p) = &previous {
            // Networks whose inputs are as they were share their host subnets;
            // nodes taken as they were share what they read.
            let (now, before) = (&after.allocations, &p.allocations);
            shared += sharing(&now.host_subnets, &before.host_subnets, |b, n| b.ptr_eq(n));
            taken += sharing(&after.inventory.nodes, &p.inventory.nodes, |b, n| {
                std::sync::Arc::ptr_eq(&b.subnets, &n.subnets)
            });
        }
        // Nodes annotated with exactly what they have keep the text they were
        // read with: the same state as writing every node's again.
        let state_of = |w: &World| {
            let problems = &w.problems[w.inventory.problems.len()..];
            State::next(&w.inventory, &w.allocations, problems, &state, "then")
        };
        let mut written = after.clone();
        written.allocations.as_annotated.clear();
        let next = state_of(&after);
        assert_eq!(next, state_of(&written), "{step}");
        kept_text += after
            .inventory
            .nodes
            .iter()
            .filter(|(n, i)| after.allocations.annotated_exactly(n, &i.subnets))
            .count();
        state = next;
        previous = Some(after);
    }
    let p = previous.unwrap();
    assert_eq!(p.allocations.node_ids["a"], 9);
    assert!(taken >= 8, "only {taken} nodes were taken as they were");
    assert!(
        kept_text >= 8,
        "only {kept_text} nodes kept their subnets' text"
    );
    assert!(
        shared >= 3,
        "only {shared} networks' host subnets were shared"
    );
    assert!(
        p.problems
            .iter()
            .any(|p| p.message.contains("10.99.0.0/24") && p.origin.file.ends_with("n.yaml")),
        "{:?}",
        p.problems
    );
}

#[test]
fn a_network_is_numbered_by_its_definition_first_then_by_its_rows_then_by_what_was_remembered() {
    use crate::world::{NumbersInNb, Settings, World};
    // UDN red/net is network `red_net`; its rows in the NB say 7.
    let net = l3("[{cidr: 10.1.0.0/16}]");
    let nad = "---\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\n\
        metadata: {name: net, namespace: red, annotations: {k8s.ovn.org/network-id: '4'}}\n\
        spec:\n  config: '{\"cniVersion\":\"1.0.0\",\"name\":\"red_net\",\"netAttachDefName\":\"red/net\",\"topology\":\"layer3\",\"type\":\"ovn-k8s-cni-overlay\"}'\n";
    let numbers = NumbersInNb {
        ids: [("red_net".to_owned(), 7)].into(),
        ..Default::default()
    };
    let with = |numbers: Option<&NumbersInNb>| Settings {
        numbers_in_nb: numbers.cloned().map(std::sync::Arc::new),
        ..Default::default()
    };
    let build = |yaml: &str, state: &State, settings: Settings| {
        let w = World::build(&[parse_file(Path::new("m.yaml"), yaml)], state, settings);
        assert!(w.problems.is_empty(), "{:?}", w.problems);
        w.allocations.network_ids["red_net"]
    };
    let nodes = node("a", &[]);
    let plain = format!("{nodes}{net}");
    // Nothing says: netconnect numbers it (the first id).
    assert_eq!(build(&plain, &State::default(), with(None)), 1);
    // Its rows say 7.
    assert_eq!(build(&plain, &State::default(), with(Some(&numbers))), 7);
    // Its NetworkAttachmentDefinition says 4: that wins over the rows.
    let defined = format!("{plain}{nad}");
    assert_eq!(build(&defined, &State::default(), with(Some(&numbers))), 4);
    // A status directory remembering 1 (numbered before the rows were read): the rows
    // win, they are what the pods use.
    let first = World::build(
        &[parse_file(Path::new("m.yaml"), &plain)],
        &State::default(),
        with(None),
    );
    let remembered = first.state(&State::default());
    assert_eq!(build(&plain, &remembered, with(None)), 1);
    assert_eq!(build(&plain, &remembered, with(Some(&numbers))), 7);
}
