//! Where allocations live between runs: a directory holding each Node,
//! UserDefinedNetwork and ClusterUserDefinedNetwork as the API server would show it
//! after OVN-Kubernetes' cluster manager annotated it:
//!
//! ```text
//! DIR/Node/<name>.yaml
//! DIR/UserDefinedNetwork/<namespace>/<name>.yaml
//! DIR/ClusterUserDefinedNetwork/<name>.yaml
//! DIR/ClusterNetworkConnect/<name>.yaml
//! DIR/.journal
//! ```
//!
//! The journal holds edits of Nodes' annotations not yet written into their files
//! ([`super::journal`]): a network added changes every Node's `node-subnets`.
//!
//! A ClusterNetworkConnect's file also holds its status ([`crate::status`]): the
//! `Accepted` condition written with the allocations, and each zone's
//! `Ready-In-Zone-<zone>` condition written by that zone's reconciler
//! (`record_ready`); writers serialize on `DIR/.lock`, so daemons of several zones
//! may share a directory.
//!
//! Each file is the object read from the manifests with the allocation annotations
//! added (`k8s.ovn.org/node-id`, `node-subnets`, `node-transit-switch-port-ifaddr`,
//! `network-id`, `tunnel-keys`) and, for a network, the spec in force: the last one
//! accepted when a newer one breaks the update rules. On the next run these
//! annotations complete the objects' own (theirs win), and the specs are the
//! "old" objects the update rules compare with. Files are replaced atomically
//! (written beside, then renamed); the file of an object that is gone is removed, which
//! releases its allocations.

use crate::api::meta::Meta;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use super::journal;
use super::network::is_refused;
use crate::api::annotations::{self, *};
use crate::api::load::{parse_file, Object, Problem};
use crate::api::objects::Node;
use crate::api::validate::{cudn_network, udn_network, Reserved};
use crate::api::{Context, Network, Remembered};

/// The objects of a state directory, by kind and `namespace/name`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct State {
    /// The objects, each shared with the states before and after it that hold it
    /// alike (`State::next_after`): a change to a few objects copies those, not the
    /// hundreds of Nodes whose annotations list every network.
    pub objects: BTreeMap<(String, String), Arc<Object>>,
}

/// The key of an object in a [`State`]: its kind and `namespace/name`.
pub(super) fn key(o: &Object) -> (String, String) {
    (o.kind().to_owned(), o.name())
}

/// The file of an object in a state directory.
pub(crate) fn path_of(dir: &Path, object: &Object) -> PathBuf {
    let (kind, name) = key(object);
    match name.split_once('/') {
        Some((ns, n)) => dir.join(kind).join(ns).join(format!("{n}.yaml")),
        None => dir.join(kind).join(format!("{name}.yaml")),
    }
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            yaml_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "yaml") {
            out.push(path);
        }
    }
    Ok(())
}

impl State {
    /// Reads a state directory (an absent one is an empty state). Files that cannot be
    /// read are reported and otherwise ignored. A Node's `k8s.ovn.org/node-subnets` is
    /// taken in the form this program writes (the same subnets): the state may differ
    /// in form from its files, so it is [`State::save`]d before a later state is saved
    /// `State::save_since` it.
    pub fn load(dir: &Path) -> io::Result<(State, Vec<Problem>)> {
        let mut files = Vec::new();
        yaml_files(dir, &mut files)?;
        files.sort();
        let mut objects = BTreeMap::new();
        let mut problems = Vec::new();
        for path in files {
            let name = path.strip_prefix(dir).unwrap_or(&path).to_path_buf();
            let text = std::fs::read_to_string(&path)?;
            let f = parse_file(&name, &text);
            problems.extend(f.problems);
            if let Some(why) = f.unreadable {
                problems.push(Problem {
                    origin: crate::api::Origin {
                        file: name,
                        doc: 0,
                        item: None,
                    },
                    object: None,
                    field: None,
                    message: why,
                });
            }
            for (_, o) in f.objects {
                objects.insert(key(&o), o);
            }
        }
        journal::replay(dir, &mut objects, &mut problems)?;
        // Each Node's host subnets as this program writes them (they read the same):
        // a later state splices the entries that change into them
        // ([`State::next_after`]).
        for o in objects.values_mut() {
            let Object::Node(node) = o else { continue };
            let a = node.metadata.annotations_mut();
            if let Some(text) = a.get_mut(NODE_SUBNETS) {
                if let Ok(read) = parse_node_subnets(text) {
                    *text = format_node_subnets(&read);
                }
            }
        }
        let objects = objects.into_iter().map(|(k, o)| (k, Arc::new(o))).collect();
        Ok((State { objects }, problems))
    }

    /// True when this state holds `o` under `key`, or an object equal to it (an
    /// object shared with another state is told by its address first).
    pub(crate) fn holds_alike(&self, key: &(String, String), o: &Arc<Object>) -> bool {
        self.objects.get(key).is_some_and(|b| alike(b, o))
    }

    /// The context an inventory is built in from this state: the accepted network
    /// definitions and the remembered annotations (each object's allocations, read
    /// where this state holds the object).
    pub(crate) fn context(&self, reserved: Reserved) -> Context {
        let mut accepted = BTreeMap::new();
        let mut accepted_connects = BTreeMap::new();
        let mut remembered = BTreeMap::new();
        for (k, object) in &self.objects {
            let o = &**object;
            if let Object::ClusterNetworkConnect(c) = o {
                if let Ok(spec) = crate::api::validate::connect_spec(c) {
                    accepted_connects.insert(c.metadata.name().to_owned(), spec);
                }
            }
            // A refused network's definition was never in force.
            let network: Option<Network> = match o {
                Object::UserDefinedNetwork(u) if !is_refused(u.status.as_ref()) => {
                    udn_network(u).ok()
                }
                Object::ClusterUserDefinedNetwork(c) if !is_refused(c.status.as_ref()) => {
                    cudn_network(c).ok()
                }
                _ => None,
            };
            if let Some(n) = network {
                accepted.insert(n.name(), n);
            }
            let kept = Remembered::Of(object.clone());
            if !kept.is_empty() {
                remembered.insert(k.clone(), kept);
            }
        }
        Context {
            accepted,
            accepted_connects,
            reserved,
            remembered,
        }
    }

    /// Writes the state to `dir`: each object's file replaced atomically, the files of
    /// objects not in this state removed. A connect's zone conditions already in its
    /// file and not in this state (another zone's, or this zone's since) are kept.
    pub fn save(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let _lock = lock(dir)?;
        let mut stale = Vec::new();
        yaml_files(dir, &mut stale)?;
        let objects: Vec<&Object> = self.objects.values().map(|o| &**o).collect();
        let written: std::collections::BTreeSet<PathBuf> =
            write_objects(dir, &objects)?.into_iter().collect();
        for path in stale {
            if !written.contains(&path) {
                std::fs::remove_file(&path)?;
            }
        }
        // Every file says what the journal did.
        journal::remove(dir)
    }

    /// [`State::save`] after `previous` was saved to `dir` without error: only the
    /// objects new or changed since are written, and the files of objects gone
    /// removed (a node added to a cluster of hundreds writes its own file, not every
    /// node's). When only annotation values of many Nodes changed (a network came or
    /// went), their edits go to the directory's journal ([`journal`]) instead of their
    /// files; true then, until [`State::fold`] writes them.
    pub(crate) fn save_since(&self, previous: &State, dir: &Path) -> io::Result<bool> {
        std::fs::create_dir_all(dir)?;
        let _lock = lock(dir)?;
        let mut whole: Vec<&Object> = Vec::new();
        // Nodes changed only in annotation values, with what they were: their edits
        // are worked out only when the journal takes them.
        let mut edited: Vec<(&Node, &Node, &Object)> = Vec::new();
        for (k, o) in &self.objects {
            let before = previous.objects.get(k);
            if before.is_some_and(|b| alike(b, o)) {
                continue;
            }
            let (before, o) = (before.map(|b| &**b), &**o);
            match (before, o) {
                (Some(Object::Node(b)), Object::Node(n)) if journal::only_values_differ(b, n) => {
                    edited.push((b, n, o))
                }
                _ => whole.push(o),
            }
        }
        let journaled = journal::exists(dir);
        let is_node = |o: &&Object| matches!(o, Object::Node(_));
        let mut edits = Vec::new();
        if edited.len() < journal::FROM_NODES || (journaled && whole.iter().any(is_node)) {
            whole.extend(edited.iter().map(|(_, _, o)| *o));
        } else {
            edits =
                journal::nodes_edits(&edited.iter().map(|(b, n, _)| (*b, *n)).collect::<Vec<_>>());
        }
        // A Node written whole with edits of it in the journal would have them replayed
        // onto its newer text: the journal is folded first.
        let pending = if journaled && whole.iter().any(is_node) {
            self.fold_locked(dir, &|| true)?;
            false
        } else if edits.is_empty() {
            journaled
        } else if journal::append(dir, &edits)? > journal::FOLD_AT {
            self.fold_locked(dir, &|| true)?;
            false
        } else {
            true
        };
        write_objects(dir, &whole)?;
        for (k, o) in &previous.objects {
            if !self.objects.contains_key(k) {
                match std::fs::remove_file(path_of(dir, o)) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
        }
        Ok(pending)
    }

    /// After `State::save_since` left edits in the journal of `dir` (this state being
    /// the one saved): writes the files of the Nodes they edit and removes the journal.
    pub fn fold(&self, dir: &Path) -> io::Result<()> {
        self.fold_while(dir, &|| true).map(|_| ())
    }

    /// [`State::fold`] a few files at a time while `go_on()` holds; false when it
    /// stopped before the end (the journal is kept then: the files written hold what
    /// its edits lead to, which reading it again allows for).
    pub(crate) fn fold_while(&self, dir: &Path, go_on: &dyn Fn() -> bool) -> io::Result<bool> {
        let _lock = lock(dir)?;
        self.fold_locked(dir, go_on)
    }

    /// [`State::fold_while`], `DIR/.lock` held.
    fn fold_locked(&self, dir: &Path, go_on: &dyn Fn() -> bool) -> io::Result<bool> {
        // About 30 ms of writing at 500 networks.
        const AT_ONCE: usize = 64;
        if !journal::exists(dir) {
            return Ok(true);
        }
        let nodes: Vec<&Object> = journal::nodes(dir)?
            .into_iter()
            .filter_map(|n| self.objects.get(&("Node".to_owned(), n)))
            .map(|o| &**o)
            .collect();
        for these in nodes.chunks(AT_ONCE) {
            if !go_on() {
                return Ok(false);
            }
            write_objects(dir, these)?;
        }
        journal::remove(dir)?;
        Ok(true)
    }
}

/// Writes `objects` to their files in `dir` ([`write_object`]) a few at a time: each
/// write waits until its file is on disk, and a network added changes every node's
/// file (500 one after the other took 0.3 s here). Returns the files' paths.
fn write_objects(dir: &Path, objects: &[&Object]) -> io::Result<Vec<PathBuf>> {
    const WRITERS: usize = 8;
    if objects.len() < 2 {
        return objects.iter().map(|o| write_object(dir, o)).collect();
    }
    let chunk = objects.len().div_ceil(WRITERS);
    std::thread::scope(|s| {
        let writers: Vec<_> = objects
            .chunks(chunk)
            .map(|these| {
                s.spawn(move || {
                    these
                        .iter()
                        .map(|o| write_object(dir, o))
                        .collect::<io::Result<Vec<_>>>()
                })
            })
            .collect();
        let mut paths = Vec::with_capacity(objects.len());
        for w in writers {
            let written = w
                .join()
                .map_err(|_| io::Error::other("a status writer stopped"))?;
            paths.extend(written?);
        }
        Ok(paths)
    })
}

/// Writes object `o` to its file in `dir` (unless the file already says the same),
/// keeping a connect's conditions that only the file has (each zone's, written as its
/// keys reconcile); returns the file's path.
fn write_object(dir: &Path, o: &Object) -> io::Result<PathBuf> {
    let path = path_of(dir, o);
    let mut o = o.clone();
    if let Object::ClusterNetworkConnect(c) = &mut o {
        if let Some(on_disk) = read_connect(&path) {
            let status = c.status.get_or_insert_with(Default::default);
            for cond in on_disk.status.unwrap_or_default().conditions {
                if !status.conditions.iter().any(|k| k.type_ == cond.type_) {
                    status.conditions.push(cond);
                }
            }
            super::summarize(status);
        }
    }
    let text = to_yaml(&o)?;
    if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
        write_atomically(&path, text.as_bytes())?;
    }
    Ok(path)
}

/// Holds `DIR/.lock` exclusively until dropped.
fn lock(dir: &Path) -> io::Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(".lock"))?;
    f.lock()?;
    Ok(f)
}

fn read_connect(path: &Path) -> Option<crate::api::ClusterNetworkConnect> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_yaml_ng::from_str(&text).ok()
}

/// Records zone `zone`'s outcome of reconciling ClusterNetworkConnect `cnc` as its
/// `Ready-In-Zone-<zone>` condition in `dir` (nothing when the connect has no file, or
/// nothing changes). True when the file changed.
pub(crate) fn record_ready(
    dir: &Path,
    cnc: &str,
    zone: &str,
    outcome: &Result<Vec<String>, String>,
    now: &str,
) -> io::Result<bool> {
    if !dir.exists() {
        return Ok(false);
    }
    let _lock = lock(dir)?;
    let path = dir
        .join("ClusterNetworkConnect")
        .join(format!("{cnc}.yaml"));
    let Some(mut object) = read_connect(&path) else {
        return Ok(false);
    };
    let mut condition = super::ready(zone, outcome);
    let refused = object
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .any(|c| c.type_ == super::ACCEPTED && c.status == "False");
    if refused {
        let held: Vec<String> = object
            .metadata
            .annotations()
            .get(NETWORK_CONNECT_SUBNET)
            .and_then(|v| annotations::parse_connect_subnets(v).ok())
            .map(|by_network| by_network.into_keys().collect())
            .unwrap_or_default();
        super::ready_while_refused(&mut condition, &held);
    }
    if !super::set(
        object.status.get_or_insert_with(Default::default),
        condition,
        now,
    ) {
        return Ok(false);
    }
    let text = to_yaml(&Object::ClusterNetworkConnect(Box::new(object)))?;
    write_atomically(&path, text.as_bytes())?;
    Ok(true)
}

/// True when `a` and `b` are one object, or equal ones (an object shared between
/// states is told by its address first).
fn alike(a: &Arc<Object>, b: &Arc<Object>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

fn to_yaml(o: &Object) -> io::Result<String> {
    fn y<T: Serialize>(t: &T) -> io::Result<String> {
        serde_yaml_ng::to_string(t).map_err(io::Error::other)
    }
    match o {
        Object::Node(n) => y(n),
        Object::Namespace(n) => y(n),
        Object::UserDefinedNetwork(u) => y(u),
        Object::ClusterUserDefinedNetwork(c) => y(c),
        Object::ClusterNetworkConnect(c) => y(c),
        Object::Service(s) => y(s),
        Object::EndpointSlice(s) => y(s),
    }
}

/// Writes `bytes` to `path` by writing a file beside it and renaming it into place, so
/// a reader sees the old file or the new one, never half of one.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    io::Write::write_all(&mut tmp, bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::Allocations;
    use crate::alloc::{allocate, ClusterConfig};
    use crate::api::Inventory;
    use crate::testing::node;
    use std::path::Path;

    fn l3(subnets: &str) -> String {
        format!(
            "---\napiVersion: k8s.ovn.org/v1\nkind: UserDefinedNetwork\nmetadata: {{name: net, namespace: red}}\n\
             spec:\n  topology: Layer3\n  layer3:\n    role: Primary\n    subnets: {subnets}\n"
        )
    }

    fn run(dir: &Path, yaml: &str) -> (Inventory, Allocations) {
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

    fn conditions(dir: &Path, file: &str) -> Vec<(String, String, String, String)> {
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
    fn state_of(yaml: &str, previous: &State) -> State {
        let ctx = previous.context(Reserved::default());
        let inv = Inventory::build(&[parse_file(Path::new("m.yaml"), yaml)], &ctx);
        let (alloc, failed) = allocate(&inv, &ClusterConfig::default());
        State::next(&inv, &alloc, &failed, previous, "t")
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

    /// The files a full save of `state` writes, by path in the directory.
    fn full_save(state: &State) -> BTreeMap<PathBuf, String> {
        let full = tempfile::tempdir().unwrap();
        state.save(full.path()).unwrap();
        files_of(full.path())
    }

    /// The YAML files of `dir` and what they hold, by path in the directory.
    fn files_of(dir: &Path) -> BTreeMap<PathBuf, String> {
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

    fn network_added_journaled_read_back_and_folded(count: usize) {
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
    fn networks_carry_their_conditions() {
        let dir = tempfile::tempdir().unwrap();
        // A /24 cut in /25s serves two nodes at most: one of three gets none.
        let cudn = "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {name: wide}\n\
                    spec:\n  namespaceSelector: {matchLabels: {t: x}}\n  network: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 10.9.0.0/24, hostSubnet: 25}]}}\n";
        let ns = |n: &str| {
            format!(
                "---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {n}, labels: {{t: x}}}}\n"
            )
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
        let net =
            std::fs::read_to_string(dir.path().join("UserDefinedNetwork/red/net.yaml")).unwrap();
        assert!(net.contains("k8s.ovn.org/network-id: '1'"), "{net}");
        // A node that goes away loses its file, and with it its allocations.
        run(dir.path(), &(node("a", &[]) + &l3("[{cidr: 10.1.0.0/16}]")));
        assert!(!dir.path().join("Node/b.yaml").exists());
        assert!(dir.path().join("Node/a.yaml").exists());
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
        let net =
            std::fs::read_to_string(dir.path().join("UserDefinedNetwork/red/net.yaml")).unwrap();
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

    /// How many entries of `now` hold the very value (`same`) the same key holds in
    /// `before`.
    fn sharing<V>(
        now: &BTreeMap<String, V>,
        before: &BTreeMap<String, V>,
        same: impl Fn(&V, &V) -> bool,
    ) -> usize {
        now.iter()
            .filter(|(k, v)| before.get(*k).is_some_and(|b| same(b, v)))
            .count()
    }

    #[allow(clippy::too_many_lines)] // a test: one story, start to end
    #[test]
    fn a_world_built_after_another_is_the_world_built_afresh() {
        use crate::api::load::FileObjects;
        use crate::world::{Settings, World};
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
        let steps: Vec<(&str, Vec<FileObjects>)> = vec![
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
        ];
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
                            u64::from(k == 3 && next(3) == 0)
                                + u64::from(k == 2 && next(3) == 0) * 2,
                        ),
                    };
                }
                let yaml: String = nets
                    .keys()
                    .map(|i| network(*i))
                    .chain(nodes.iter().map(|(i, k)| a_node(*i, *k)))
                    .collect();
                let files = [parse_file(Path::new("m.yaml"), &yaml)];
                let w =
                    World::build_after(&files, &state, Settings::default(), built_after.as_ref());
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
                    let changed = super::super::annotate::changed_host_subnets(
                        &w.allocations,
                        &b.allocations,
                    );
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
}
