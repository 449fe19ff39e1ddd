//! The status directory: saving and loading states, the journal of node edits and its
//! fold, allocations across restarts. The helpers are shared with the tests of what
//! the states hold ([`super::super::annotate`]) and of worlds ([`crate::world`]).

use super::*;
use crate::alloc::Allocations;
use crate::alloc::{allocate, ClusterConfig};
use crate::api::Inventory;
use crate::testing::node;
use std::path::Path;

pub(crate) fn l3(subnets: &str) -> String {
    format!(
        "---\napiVersion: k8s.ovn.org/v1\nkind: UserDefinedNetwork\nmetadata: {{name: net, namespace: red}}\n\
         spec:\n  topology: Layer3\n  layer3:\n    role: Primary\n    subnets: {subnets}\n"
    )
}

pub(crate) fn run(dir: &Path, yaml: &str) -> (Inventory, Allocations) {
    let (state, problems) = State::load(dir).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    let ctx = state.context(Reserved::default());
    let inv = Inventory::build(&[parse_file(Path::new("m.yaml"), yaml)], &ctx);
    let (alloc, failed) = allocate(&inv, &ClusterConfig::default());
    State::next(&inv, &alloc, &failed, &state, "t")
        .save(dir)
        .unwrap();
    (inv, alloc)
}

pub(crate) fn conditions(dir: &Path, file: &str) -> Vec<(String, String, String, String)> {
    let (state, _) = State::load(dir).unwrap();
    let o = state
        .objects
        .values()
        .find(|o| path_of(dir, o) == dir.join(file))
        .unwrap_or_else(|| panic!("{file} is not in the state"));
    let s = match &**o {
        Object::UserDefinedNetwork(u) => &u.status,
        Object::ClusterUserDefinedNetwork(c) => &c.status,
        _ => panic!("{file} is not a network"),
    };
    s.iter()
        .flat_map(|s| &s.conditions)
        .map(|c| {
            (
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                c.message.clone(),
            )
        })
        .collect()
}

/// The state of `yaml`, allocated after `previous`.
pub(crate) fn state_of(yaml: &str, previous: &State) -> State {
    let ctx = previous.context(Reserved::default());
    let inv = Inventory::build(&[parse_file(Path::new("m.yaml"), yaml)], &ctx);
    let (alloc, failed) = allocate(&inv, &ClusterConfig::default());
    State::next(&inv, &alloc, &failed, previous, "t")
}

/// The files a full save of `state` writes, by path in the directory.
pub(crate) fn full_save(state: &State) -> BTreeMap<PathBuf, String> {
    let full = tempfile::tempdir().unwrap();
    state.save(full.path()).unwrap();
    files_of(full.path())
}

/// The YAML files of `dir` and what they hold, by path in the directory.
pub(crate) fn files_of(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut files = Vec::new();
    yaml_files(dir, &mut files).unwrap();
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            (f.strip_prefix(dir).unwrap().to_path_buf(), text)
        })
        .collect()
}

pub(crate) fn network_added_journaled_read_back_and_folded(count: usize) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let nodes: String = (0..count).map(|i| node(&format!("n{i:03}"), &[])).collect();
    let udn = |name: &str, cidr: &str| {
        l3(&format!("[{{cidr: {cidr}}}]")).replace("name: net,", &format!("name: {name},"))
    };
    let one = nodes.clone() + &udn("a", "10.1.0.0/16");
    let first = state_of(&one, &State::default());
    first.save(d).unwrap();
    let before = files_of(d);

    // A network added: every node's host subnets change, and only they.
    let two = one.clone() + &udn("b", "10.2.0.0/16");
    let second = state_of(&two, &first);
    assert!(
        second.save_since(&first, d).unwrap(),
        "the edits wait in the journal"
    );
    let journal_len = std::fs::metadata(d.join(journal::FILE)).unwrap().len();
    // A line per node naming it and giving its new entry (the network's), however
    // many networks its host subnets list.
    assert!(
        journal_len < 200 * count as u64,
        "the journal ({journal_len} bytes) holds what changed"
    );
    let now = files_of(d);
    for (path, text) in &before {
        if path.starts_with("Node") {
            assert_eq!(&now[path], text, "{} is left as it was", path.display());
        }
    }
    let (read, problems) = State::load(d).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(read, second);

    // A third network, journaled after the second; then the fold writes the files a
    // full save would, and removes the journal.
    let third = state_of(&(two + &udn("c", "10.3.0.0/16")), &second);
    assert!(third.save_since(&second, d).unwrap());
    assert_eq!(State::load(d).unwrap(), (third.clone(), Vec::new()));
    third.fold(d).unwrap();
    assert!(!d.join(journal::FILE).exists());
    assert_eq!(files_of(d), full_save(&third));
    assert_eq!(State::load(d).unwrap(), (third, Vec::new()));
}

/// How many entries of `now` hold the very value (`same`) the same key holds in
/// `before`.
pub(crate) fn sharing<V>(
    now: &BTreeMap<String, V>,
    before: &BTreeMap<String, V>,
    same: impl Fn(&V, &V) -> bool,
) -> usize {
    now.iter()
        .filter(|(k, v)| before.get(*k).is_some_and(|b| same(b, v)))
        .count()
}

#[test]
fn a_context_remembers_only_the_allocations_of_the_states_objects() {
    let mut n = Node::default();
    n.metadata.name = Some("n".into());
    for (k, v) in [
        (NODE_SUBNETS, r#"{"net1":["10.1.1.0/24"]}"#),
        (NODE_ID, "4"),
        (HOST_CIDRS, r#"["192.168.1.2/24"]"#),
        ("team", "blue"),
    ] {
        n.metadata.annotations_mut().insert(k.into(), v.into());
    }
    let key = ("Node".to_owned(), "n".to_owned());
    let mut state = State::default();
    state
        .objects
        .insert(key.clone(), Arc::new(Object::Node(Box::new(n.clone()))));
    let ctx = state.context(Reserved::default());
    let r = &ctx.remembered[&key];
    let mut remembered: Vec<&str> = r.iter().map(|(k, _)| k.as_str()).collect();
    remembered.sort();
    let mut want = [NODE_ID, NODE_SUBNETS];
    want.sort();
    assert_eq!(remembered, want);
    assert_eq!((r.get("team"), r.get(HOST_CIDRS)), (None, None));
    assert_eq!(r.get(NODE_ID).map(String::as_str), Some("4"));
    // The node read again without its annotations gets its allocations back, and
    // only them.
    let mut bare = n.clone();
    bare.metadata.annotations_mut().clear();
    let got = ctx.annotations("Node", &bare.metadata);
    let mut keys: Vec<&str> = got.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, want);
}

#[test]
fn saving_since_a_saved_state_writes_what_changed_and_removes_what_went() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let net = l3("[{cidr: 10.1.0.0/16}]");
    let first = state_of(
        &(node("a", &[]) + &node("b", &[]) + &net),
        &State::default(),
    );
    first.save(d).unwrap();
    // Node a unchanged (its file is not rewritten: what is there stays), b gone,
    // c new.
    let a = d.join("Node/a.yaml");
    std::fs::write(&a, "left alone\n").unwrap();
    let second = state_of(&(node("a", &[]) + &node("c", &[]) + &net), &first);
    second.save_since(&first, d).unwrap();
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "left alone\n");
    assert!(!d.join("Node/b.yaml").exists());
    assert!(d.join("Node/c.yaml").exists());
    // Every other file is what a full save writes.
    let full = tempfile::tempdir().unwrap();
    second.save(full.path()).unwrap();
    let mut files = Vec::new();
    yaml_files(full.path(), &mut files).unwrap();
    assert_eq!(files.len(), second.objects.len());
    for f in files {
        let rel = f.strip_prefix(full.path()).unwrap();
        if rel != Path::new("Node/a.yaml") {
            assert_eq!(
                std::fs::read_to_string(d.join(rel)).unwrap(),
                std::fs::read_to_string(&f).unwrap(),
                "{}",
                rel.display()
            );
        }
    }
}

#[test]
fn a_network_added_to_many_nodes_is_journaled_read_back_and_folded() {
    network_added_journaled_read_back_and_folded(journal::FROM_NODES);
}

/// As many nodes as write their annotations and edits a share per thread
/// ([`crate::status::PER_THREAD`]), on two or more threads.
#[test]
fn a_network_added_to_nodes_written_on_several_threads_is_journaled_read_back_and_folded() {
    network_added_journaled_read_back_and_folded(2 * crate::status::PER_THREAD + 3);
}

#[test]
fn a_fold_stopped_half_way_leaves_a_directory_read_as_saved() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let nodes: String = (0..100).map(|i| node(&format!("n{i:03}"), &[])).collect();
    let udn = |name: &str, cidr: &str| {
        l3(&format!("[{{cidr: {cidr}}}]")).replace("name: net,", &format!("name: {name},"))
    };
    let one = nodes + &udn("a", "10.1.0.0/16");
    let first = state_of(&one, &State::default());
    first.save(d).unwrap();
    let two = one + &udn("b", "10.2.0.0/16");
    let second = state_of(&two, &first);
    assert!(second.save_since(&first, d).unwrap());
    // One batch of files written, then a change comes.
    let batches = std::cell::Cell::new(0);
    let go_on = || {
        batches.set(batches.get() + 1);
        batches.get() == 1
    };
    assert!(!second.fold_while(d, &go_on).unwrap());
    assert!(d.join(journal::FILE).exists());
    assert_eq!(State::load(d).unwrap(), (second.clone(), Vec::new()));
    // The next network's edits go on top of files folded and files not.
    let third = state_of(&(two + &udn("c", "10.3.0.0/16")), &second);
    assert!(third.save_since(&second, d).unwrap());
    assert_eq!(State::load(d).unwrap(), (third.clone(), Vec::new()));
    assert!(third.fold_while(d, &|| true).unwrap());
    assert_eq!(files_of(d), full_save(&third));
}

#[test]
fn a_node_written_whole_while_edits_wait_folds_them_first() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let labelled = |i: usize, label: &str| {
        node(&format!("n{i:02}"), &[]).replace(
            "metadata:\n",
            &format!("metadata:\n  labels: {{l: {label}}}\n"),
        )
    };
    let nodes = |label: &str| -> String {
        (0..journal::FROM_NODES)
            .map(|i| labelled(i, label))
            .collect()
    };
    let a = l3("[{cidr: 10.1.0.0/16}]");
    let b = a
        .replace("name: net,", "name: other,")
        .replace("10.1.", "10.2.");
    let first = state_of(&(nodes("x") + &a), &State::default());
    first.save(d).unwrap();
    let second = state_of(&(nodes("x") + &a + &b), &first);
    assert!(second.save_since(&first, d).unwrap());
    // The network goes again (the nodes' host subnets are back as they were) and a
    // node changes a label: replaying the edit onto that node's new file would give
    // it the network's subnets again.
    let third_yaml = nodes("x").replacen("l: x", "l: y", 1) + &a;
    let third = state_of(&third_yaml, &second);
    assert!(!third.save_since(&second, d).unwrap(), "nothing waits");
    assert!(!d.join(journal::FILE).exists());
    assert_eq!(files_of(d), full_save(&third));
    assert_eq!(State::load(d).unwrap(), (third, Vec::new()));
}

#[test]
fn allocations_survive_a_restart_and_a_reordering_of_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let (_, first) = run(dir.path(), &(node("b", &[]) + &l3("[{cidr: 10.1.0.0/16}]")));
    assert_eq!(first.node_ids["b"], 2);
    // Node a arrives later: it must not take b's id or subnet.
    let (_, second) = run(
        dir.path(),
        &(node("a", &[]) + &node("b", &[]) + &l3("[{cidr: 10.1.0.0/16}]")),
    );
    assert_eq!(second.node_ids["b"], 2);
    assert_eq!(second.node_ids["a"], 3);
    assert_eq!(
        second.host_subnets["red_net"]["b"],
        first.host_subnets["red_net"]["b"]
    );
    let text = std::fs::read_to_string(dir.path().join("Node/b.yaml")).unwrap();
    assert!(text.contains("k8s.ovn.org/node-id: '2'"), "{text}");
    assert!(text.contains(r#"{"red_net":["10.1.0.0/24"]}"#), "{text}");
    let net = std::fs::read_to_string(dir.path().join("UserDefinedNetwork/red/net.yaml")).unwrap();
    assert!(net.contains("k8s.ovn.org/network-id: '1'"), "{net}");
    // A node that goes away loses its file, and with it its allocations.
    run(dir.path(), &(node("a", &[]) + &l3("[{cidr: 10.1.0.0/16}]")));
    assert!(!dir.path().join("Node/b.yaml").exists());
    assert!(dir.path().join("Node/a.yaml").exists());
}

#[test]
fn host_subnets_read_from_a_state_directory_are_as_this_program_writes_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = State::default();
    let yaml = node(
        "a",
        &[(
            NODE_SUBNETS,
            r#"{ "b": "10.1.0.0/24", "a": [ "10.2.0.0/24" ] }"#,
        )],
    );
    for (_, o) in parse_file(Path::new("m.yaml"), &yaml).objects {
        state.objects.insert(key(&o), Arc::new(o));
    }
    state.save(dir.path()).unwrap();
    let (read, problems) = State::load(dir.path()).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    let Object::Node(a) = &*read.objects[&("Node".to_owned(), "a".to_owned())] else {
        panic!("not a node");
    };
    assert_eq!(
        a.metadata.annotations()[NODE_SUBNETS],
        r#"{"a":["10.2.0.0/24"],"b":["10.1.0.0/24"]}"#
    );
}
