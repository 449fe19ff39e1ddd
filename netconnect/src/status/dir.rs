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
pub(crate) fn key(o: &Object) -> (String, String) {
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
        // Events ([`super::events`]) are no object of the state.
        if path.is_dir() && path.file_name().is_some_and(|n| n == "Event") {
            continue;
        }
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
        // What the files said before, for the connects' events.
        let on_disk = State {
            objects: self
                .objects
                .iter()
                .filter_map(|(k, o)| {
                    let Object::ClusterNetworkConnect(_) = &**o else {
                        return None;
                    };
                    let c = read_connect(&path_of(dir, o))?;
                    Some((
                        k.clone(),
                        Arc::new(Object::ClusterNetworkConnect(Box::new(c))),
                    ))
                })
                .collect(),
        };
        self.record_accepted(&on_disk, dir)?;
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
        self.record_accepted(previous, dir)?;
        for (k, o) in &previous.objects {
            if !self.objects.contains_key(k) {
                let mut gone = vec![path_of(dir, o)];
                if let Object::ClusterNetworkConnect(c) = &**o {
                    gone.push(super::events::path(dir, c.metadata.name()));
                }
                for path in gone {
                    match std::fs::remove_file(path) {
                        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                        _ => {}
                    }
                }
            }
        }
        Ok(pending)
    }

    /// Records an event for each connect whose `Accepted` condition changed since
    /// `previous` ([`super::events`]).
    fn record_accepted(&self, previous: &State, dir: &Path) -> io::Result<()> {
        let accepted = |o: Option<&Object>| -> Vec<crate::api::Condition> {
            match o {
                Some(Object::ClusterNetworkConnect(c)) => c
                    .status
                    .iter()
                    .flat_map(|s| &s.conditions)
                    .filter(|c| c.type_ == super::ACCEPTED)
                    .cloned()
                    .collect(),
                _ => Vec::new(),
            }
        };
        let now = super::now();
        for (k, o) in &self.objects {
            let Object::ClusterNetworkConnect(c) = &**o else {
                continue;
            };
            let before = accepted(previous.objects.get(k).map(|b| &**b));
            let after = accepted(Some(o));
            super::events::record(dir, c.metadata.name(), &before, &after, &now)?;
        }
        Ok(())
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
        // A batch of files between looks at whether to go on.
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
/// file (one after the other, they add up). Returns the files' paths.
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
        super::write_atomically(&path, text.as_bytes())?;
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

pub(crate) fn read_connect(path: &Path) -> Option<crate::api::ClusterNetworkConnect> {
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
    let before: Vec<crate::api::Condition> = object
        .status
        .iter()
        .flat_map(|s| s.conditions.clone())
        .collect();
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
    let after: Vec<crate::api::Condition> = object
        .status
        .iter()
        .flat_map(|s| s.conditions.clone())
        .filter(|c| c.type_ != super::ACCEPTED)
        .collect();
    let text = to_yaml(&Object::ClusterNetworkConnect(Box::new(object)))?;
    super::write_atomically(&path, text.as_bytes())?;
    super::events::record(dir, cnc, &before, &after, now)?;
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
        Object::NetworkAttachmentDefinition(n) => y(n),
        Object::OnapNetwork(n) => y(n),
        Object::Pod(p) => y(p),
    }
}

#[cfg(test)]
pub(crate) mod tests;
