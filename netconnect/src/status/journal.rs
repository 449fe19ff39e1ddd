//! Edits of Node annotations not yet written into the Nodes' files: `DIR/.journal`.
//!
//! A network added or removed changes every Node's `k8s.ovn.org/node-subnets`, which
//! lists every network's host subnets: at 500 networks × 500 nodes, rewriting the 500
//! files (10 MB) before the network's rows could be written delayed them. When a save
//! changes only annotation values of many Nodes, it appends to the journal instead,
//! for each value, the bytes that changed between the ends both texts share (a
//! network's entry: some 40 bytes), with a digest of the text before and after.
//! Reading the directory applies the edits; netconnectd writes the Nodes' files whole
//! and removes the journal once the manifests have been quiet a moment
//! ([`State::fold`](super::dir::State::fold)), so that the files soon show what the API
//! server would again.
//!
//! The journal is one JSON object per line, appended and flushed to disk before the
//! save returns. A last line cut short (a stop during the append: that save never
//! returned, nothing used what it held) is ignored. A value's edits form a chain, each
//! made to what the one before left; they are applied from the link the file holds (a
//! fold stopped half way, or a stop before the journal was removed, leaves files holding
//! a later link). An edit made to a value the file does not hold is not applied and is
//! reported.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::Digest;

use crate::api::load::{Object, Problem};
use crate::api::meta::{same_but_annotations, Meta};
use crate::api::objects::Node;
use crate::api::Origin;

/// The journal's file name in a state directory.
pub const FILE: &str = ".journal";

/// Fewer Nodes edited in one save than this are written whole (a journal is worth
/// keeping only when it saves many files' writes).
pub(super) const FROM_NODES: usize = 16;

/// A journal longer than this is folded by the save that made it so.
pub(super) const FOLD_AT: u64 = 4 << 20;

/// One annotation value's edit: `middle` replaces the bytes of the text before that
/// lie between its first `front` and its last `back` bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct Edit {
    /// The Node's name.
    node: String,
    /// The annotation.
    annotation: String,
    /// [`digest`] of the value before.
    before: String,
    /// [`digest`] of the value after.
    after: String,
    front: usize,
    back: usize,
    middle: String,
}

/// `xxh3:` and the 64-bit XXH3 hash of `text` in hex: a check that an edit is applied
/// to the value it was made to, not a seal (a network added digests 40 MB of text at
/// 500 x 500: SHA-256 showed in its profile).
fn digest(text: &str) -> String {
    format!("{XXH3}{:016x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes()))
}

/// How [`digest`]s begin.
const XXH3: &str = "xxh3:";

/// The digest of `text` as `like` was made: [`digest`], or, for a journal written
/// before it, the first 16 hex digits of the SHA-256.
fn digest_like(text: &str, like: &str) -> String {
    if like.starts_with(XXH3) {
        return digest(text);
    }
    let d = sha2::Sha256::digest(text.as_bytes());
    d[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The edits turning Node `before` into `after`, when they differ only in the values of
/// annotations both have (`None` otherwise: the Node is to be written whole).
pub(super) fn node_edits(before: &Node, after: &Node) -> Option<Vec<Edit>> {
    if !only_values_differ(before, after) {
        return None;
    }
    let pairs = before
        .metadata
        .annotations()
        .iter()
        .zip(after.metadata.annotations());
    let changed = pairs.filter(|((_, vb), (_, va))| vb != va);
    Some(
        changed
            .map(|((_, vb), (ka, va))| edit(after.metadata.name(), ka, vb, va))
            .collect(),
    )
}

/// The edits of each pair of Nodes (before, after) that [`only_values_differ`], in
/// order: a network added to hundreds of nodes edits every one (digesting 20 MB of
/// text at 500 x 500), a share per thread.
pub(super) fn nodes_edits(pairs: &[(&Node, &Node)]) -> Vec<Edit> {
    super::in_shares(pairs, |pairs| {
        pairs
            .iter()
            .flat_map(|(b, n)| node_edits(b, n).unwrap_or_default())
            .collect()
    })
}

/// True when Nodes `before` and `after` differ at most in the values of annotations
/// both have: what [`node_edits`] can say, told without working out the edits.
pub(super) fn only_values_differ(before: &Node, after: &Node) -> bool {
    let Node {
        metadata,
        spec,
        status,
    } = before;
    let (b, a) = (metadata.annotations(), after.metadata.annotations());
    *spec == after.spec
        && *status == after.status
        && b.len() == a.len()
        && b.keys().eq(a.keys())
        && same_but_annotations(metadata, &after.metadata)
}

/// The edit of Node `node`'s annotation `annotation` from `before` to `after`.
fn edit(node: &str, annotation: &str, before: &str, after: &str) -> Edit {
    let (b, a) = (before.as_bytes(), after.as_bytes());
    let mut front = common_prefix(b, a);
    // Both texts are UTF-8 and share the bytes up to `front`: a character cut there is
    // cut in both.
    while !before.is_char_boundary(front) {
        front -= 1;
    }
    let most = b.len().min(a.len()) - front;
    let mut back = common_suffix(&b[b.len() - most..], &a[a.len() - most..]);
    while !before.is_char_boundary(b.len() - back) {
        back -= 1;
    }
    Edit {
        node: node.to_owned(),
        annotation: annotation.to_owned(),
        before: digest(before),
        after: digest(after),
        front,
        back,
        middle: after[front..a.len() - back].to_owned(),
    }
}

/// How many bytes `a` and `b` share from the start: compared 64 bytes at a time, as a
/// network's edit leaves 20 kB of text alike at 500 networks.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let blocks = a.chunks_exact(64).zip(b.chunks_exact(64));
    let alike = 64 * blocks.take_while(|(x, y)| x == y).count();
    let rest = a[alike..].iter().zip(&b[alike..]);
    alike + rest.take_while(|(x, y)| x == y).count()
}

/// How many bytes `a` and `b` share at the end, compared as [`common_prefix`] does.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let blocks = a.rchunks_exact(64).zip(b.rchunks_exact(64));
    let alike = 64 * blocks.take_while(|(x, y)| x == y).count();
    let rest = a[..a.len() - alike].iter().rev();
    alike
        + rest
            .zip(b[..b.len() - alike].iter().rev())
            .take_while(|(x, y)| x == y)
            .count()
}

fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// Appends `edits` to the journal of `dir` and waits until they are on disk; returns the
/// journal's length.
pub(super) fn append(dir: &Path, edits: &[Edit]) -> io::Result<u64> {
    let mut text = Vec::new();
    for e in edits {
        serde_json::to_writer(&mut text, e).map_err(io::Error::other)?;
        text.push(b'\n');
    }
    let path = path(dir);
    let created = !path.exists();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    f.write_all(&text)?;
    f.sync_data()?;
    if created {
        // The file's name is on disk too.
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(f.metadata()?.len())
}

/// Whether `dir` has a journal.
pub(super) fn exists(dir: &Path) -> bool {
    path(dir).exists()
}

/// Removes the journal of `dir` (there may be none).
pub(super) fn remove(dir: &Path) -> io::Result<()> {
    match std::fs::remove_file(path(dir)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The journal's edits in order, with the lines that cannot be read reported; a last
/// line cut short is dropped without a word.
fn read(dir: &Path, problems: &mut Vec<Problem>) -> io::Result<Vec<(usize, Edit)>> {
    let f = match std::fs::File::open(path(dir)) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        f => f?,
    };
    let mut edits = Vec::new();
    let mut lines = io::BufReader::new(f).lines().enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let line = line?;
        let last = lines.peek().is_none();
        match serde_json::from_str::<Edit>(&line) {
            Ok(e) => edits.push((i + 1, e)),
            Err(e) if !(last && e.is_eof()) => {
                problems.push(problem(i + 1, None, format!("not an edit ({e})")))
            }
            Err(_) => {}
        }
    }
    Ok(edits)
}

/// The names of the Nodes the journal of `dir` edits.
pub(super) fn nodes(dir: &Path) -> io::Result<BTreeSet<String>> {
    let edits = read(dir, &mut Vec::new())?;
    Ok(edits.into_iter().map(|(_, e)| e.node).collect())
}

fn problem(line: usize, node: Option<&str>, message: String) -> Problem {
    Problem {
        origin: Origin {
            file: PathBuf::from(FILE),
            doc: 0,
            item: None,
        },
        object: node.map(|n| format!("Node {n}")),
        field: Some(format!("line {line}")),
        message,
    }
}

/// Applies the journal of `dir` to the Nodes of `objects` (keyed as a state's), reporting
/// the edits that do not apply. An edit of a Node that is gone is dropped (its file was
/// removed after the edit was written). A value's edits are a chain, each made to what
/// the one before left: the file may hold any link of it (a fold stopped half way
/// wrote some Nodes' files), and the edits after that link are applied.
pub(super) fn replay(
    dir: &Path,
    objects: &mut BTreeMap<(String, String), Object>,
    problems: &mut Vec<Problem>,
) -> io::Result<()> {
    let mut chains: BTreeMap<(String, String), Vec<(usize, Edit)>> = BTreeMap::new();
    for (line, e) in read(dir, problems)? {
        let at = (e.node.clone(), e.annotation.clone());
        chains.entry(at).or_default().push((line, e));
    }
    for ((node, annotation), chain) in chains {
        let Some(Object::Node(object)) = objects.get_mut(&("Node".to_owned(), node.clone())) else {
            continue;
        };
        let (first_line, _) = chain[0];
        let Some(value) = object.metadata.annotations_mut().get_mut(&annotation) else {
            problems.push(problem(
                first_line,
                Some(&node),
                format!("the file has no annotation {annotation}: its edits are not applied"),
            ));
            continue;
        };
        // The digest of the value as the edits leave it: each is checked against the
        // edit made to it, and the value is hashed once (as the chain's first edit
        // was: a daemon writes its journal's edits one way).
        let mut now = digest_like(value, &chain[0].1.before);
        let from = chain
            .iter()
            .rposition(|(_, e)| e.after == now)
            .map_or(0, |i| i + 1);
        for (line, e) in &chain[from..] {
            if e.after == now {
                // The same edit again (two daemons sharing the directory).
                continue;
            }
            match (e.before == now).then(|| apply(value, e)).flatten() {
                Some(v) => {
                    *value = v;
                    now.clone_from(&e.after);
                }
                None => {
                    problems.push(problem(
                        *line,
                        Some(&node),
                        format!(
                            "annotation {annotation} is not the value the edit was made \
                             to: the file's value is kept"
                        ),
                    ));
                    break;
                }
            }
        }
    }
    Ok(())
}

/// `value` edited by `e` (made to it), unless `e`'s ends do not fit in it.
fn apply(value: &str, e: &Edit) -> Option<String> {
    let end = value.len().checked_sub(e.back)?;
    let (front, back) = (value.get(..e.front)?, value.get(end..)?);
    if e.front > end {
        return None;
    }
    Some(format!("{front}{}{back}", e.middle))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(annotations: &[(&str, &str)]) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some("a".into());
        for (k, v) in annotations {
            n.metadata
                .annotations_mut()
                .insert((*k).into(), (*v).into());
        }
        n
    }

    fn key() -> (String, String) {
        ("Node".to_owned(), "a".to_owned())
    }

    /// Replays `edits` appended in turn onto a Node holding `start`.
    fn replayed(start: &Node, edits: &[Vec<Edit>]) -> (Node, Vec<Problem>) {
        let dir = tempfile::tempdir().unwrap();
        for e in edits {
            append(dir.path(), e).unwrap();
        }
        let mut objects = BTreeMap::from([(key(), Object::Node(Box::new(start.clone())))]);
        let mut problems = Vec::new();
        replay(dir.path(), &mut objects, &mut problems).unwrap();
        match objects.remove(&key()) {
            Some(Object::Node(n)) => (*n, problems),
            _ => unreachable!(),
        }
    }

    #[test]
    fn common_ends_are_counted_byte_by_byte_across_blocks() {
        let text: Vec<u8> = (0..300u32).map(|i| b'a' + (i % 26) as u8).collect();
        for at in [0, 1, 63, 64, 65, 127, 128, 200, 299] {
            let mut other = text.clone();
            other[at] = b'#';
            assert_eq!(super::common_prefix(&text, &other), at, "changed at {at}");
            assert_eq!(
                super::common_suffix(&text, &other),
                299 - at,
                "changed at {at}"
            );
        }
        assert_eq!(super::common_prefix(&text, &text[..130]), 130);
        assert_eq!(super::common_suffix(&text, &text[170..]), 130);
        assert_eq!(super::common_prefix(&text, &text), 300);
    }

    #[test]
    fn edits_replayed_in_turn_give_each_value_written() {
        let values = [
            r#"{"a":["10.0.0.0/24"],"c":["10.2.0.0/24"]}"#,
            r#"{"a":["10.0.0.0/24"],"b":["10.1.0.0/24"],"c":["10.2.0.0/24"]}"#,
            r#"{"a":["10.0.0.0/24"],"b":["10.1.0.0/24"]}"#,
            r#"{"b":["10.1.0.0/24"]}"#,
            r#"{"b":["10.1.0.0/24"],"é":["10.9.0.0/24"]}"#,
            r#"{"b":["10.1.0.0/24"],"è":["10.9.0.0/24"]}"#,
            r#"{}"#,
            r#"{"b":["10.1.0.0/24"]}"#,
        ];
        let nodes: Vec<Node> = values
            .iter()
            .map(|v| node(&[("k8s.ovn.org/node-subnets", v), ("other", "x")]))
            .collect();
        let edits: Vec<Vec<Edit>> = nodes
            .windows(2)
            .map(|w| node_edits(&w[0], &w[1]).unwrap())
            .collect();
        assert!(edits.iter().all(|e| e.len() == 1));
        // A network's entry is what is written, not the whole value.
        // (the shared ends take the entry's first quote: its bytes are all the same).
        assert_eq!(edits[0][0].middle, r#"b":["10.1.0.0/24"],""#);
        for upto in 0..edits.len() {
            let (got, problems) = replayed(&nodes[0], &edits[..=upto]);
            assert_eq!(got, nodes[upto + 1], "after {} edits", upto + 1);
            assert!(problems.is_empty(), "{problems:?}");
        }
        // A file already holding a later link of the chain (a fold stopped half way, or
        // before the journal was removed) gets the edits after it, and no word.
        for (k, start) in nodes.iter().enumerate() {
            let (got, problems) = replayed(start, &edits);
            assert_eq!(&got, nodes.last().unwrap(), "from value {k}");
            assert!(problems.is_empty(), "from value {k}: {problems:?}");
        }
        // Each edit written twice (two daemons sharing the directory) is applied once.
        let twice: Vec<Vec<Edit>> = edits.iter().flat_map(|e| [e.clone(), e.clone()]).collect();
        let (got, problems) = replayed(&nodes[0], &twice);
        assert_eq!(&got, nodes.last().unwrap());
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn an_edit_written_with_the_digests_of_an_earlier_version_is_applied() {
        // The line an earlier netconnectd wrote (SHA-256 digests) for the edit below.
        let dir = tempfile::tempdir().unwrap();
        let line = r#"{"node":"a","annotation":"s","before":"44136fa355b3678a","after":"103eecc9b7b1bf3f","front":1,"back":1,"middle":"\"b\":[\"10.1.0.0/24\"]"}"#;
        std::fs::write(dir.path().join(FILE), format!("{line}\n")).unwrap();
        let mut objects = BTreeMap::from([(key(), Object::Node(Box::new(node(&[("s", "{}")]))))]);
        let mut problems = Vec::new();
        replay(dir.path(), &mut objects, &mut problems).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        let want = node(&[("s", r#"{"b":["10.1.0.0/24"]}"#)]);
        assert_eq!(objects[&key()], Object::Node(Box::new(want.clone())));
        // Edits written now carry XXH3 digests, and replay as well.
        let edits = node_edits(&node(&[("s", "{}")]), &want).unwrap();
        assert!(edits[0].before.starts_with(XXH3), "{:?}", edits[0]);
        assert_eq!(replayed(&node(&[("s", "{}")]), &[edits]).0, want);
    }

    #[test]
    fn a_node_changed_past_its_annotation_values_is_not_edited() {
        let a = node(&[("x", "1")]);
        let mut labelled = a.clone();
        labelled
            .metadata
            .labels
            .get_or_insert_default()
            .insert("l".into(), "v".into());
        assert_eq!(node_edits(&a, &labelled), None);
        assert_eq!(node_edits(&a, &node(&[("x", "1"), ("y", "2")])), None);
        assert_eq!(node_edits(&a, &node(&[("y", "1")])), None);
        assert_eq!(node_edits(&a, &a), Some(Vec::new()));
    }

    #[test]
    fn an_edit_already_in_the_file_is_skipped_and_one_made_to_another_value_is_reported() {
        let before = node(&[("s", r#"{"a":["10.0.0.0/24"]}"#)]);
        let after = node(&[("s", r#"{"a":["10.0.0.0/24"],"b":["10.1.0.0/24"]}"#)]);
        let edits = vec![node_edits(&before, &after).unwrap()];
        // The Node's file was written whole after the edit (a fold stopped before the
        // journal was removed).
        let (got, problems) = replayed(&after, &edits);
        assert_eq!((got, problems), (after.clone(), Vec::new()));
        // The file holds a third value: kept, and the edit reported.
        let other = node(&[("s", r#"{"z":["10.7.0.0/24"]}"#)]);
        let (got, problems) = replayed(&other, &edits);
        assert_eq!(got, other);
        assert_eq!(problems.len(), 1, "{problems:?}");
        let p = problems[0].to_string();
        assert!(p.contains(".journal") && p.contains("Node a"), "{p}");
        assert!(p.contains("not the value the edit was made to"), "{p}");
    }

    #[test]
    fn a_last_line_cut_short_is_dropped_and_a_bad_line_before_it_reported() {
        let dir = tempfile::tempdir().unwrap();
        let before = node(&[("s", "{}")]);
        let after = node(&[("s", r#"{"b":["10.1.0.0/24"]}"#)]);
        append(dir.path(), &node_edits(&before, &after).unwrap()).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(FILE))
            .unwrap();
        f.write_all(b"{\"node\":\"a\",\"annot").unwrap();
        let mut objects = BTreeMap::from([(key(), Object::Node(Box::new(before.clone())))]);
        let mut problems = Vec::new();
        replay(dir.path(), &mut objects, &mut problems).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(objects[&key()], Object::Node(Box::new(after.clone())));

        // The same cut line followed by another is a bad line, said where.
        f.write_all(b"\n{}\n").unwrap();
        let mut objects = BTreeMap::from([(key(), Object::Node(Box::new(before)))]);
        replay(dir.path(), &mut objects, &mut problems).unwrap();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].to_string().contains(".journal"), "{problems:?}");
        assert!(problems[0].to_string().contains("line 2"), "{problems:?}");
        assert_eq!(objects[&key()], Object::Node(Box::new(after)));
    }
}
