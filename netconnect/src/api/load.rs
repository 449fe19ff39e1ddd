//! Reading objects from YAML files: multi-document files and `kind: List` documents,
//! as `kubectl get -o yaml` writes them. Every object remembers where it came from, so
//! that a problem can name the file, the document and the field.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::meta::{Meta, ObjectMeta};
use super::objects::{
    ClusterNetworkConnect, ClusterUserDefinedNetwork, Namespace, NetworkAttachmentDefinition, Node,
    OnapNetwork, Pod, UserDefinedNetwork,
};
use super::service::{EndpointSlice, Service};

/// Where an object was read: the file (as named in messages), the document (from 1)
/// and, inside a `kind: List`, the item (from 1).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origin {
    /// The file, relative to the directory it was found in.
    pub file: PathBuf,
    /// The document in the file, from 1.
    pub doc: usize,
    /// The item of a `List` document, from 1.
    pub item: Option<usize>,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} doc {}", self.file.display(), self.doc)?;
        if let Some(i) = self.item {
            write!(f, " item {i}")?;
        }
        Ok(())
    }
}

/// One of the kinds netconnect reads.
#[derive(Clone, Debug, PartialEq)]
pub enum Object {
    /// `v1 Node`.
    Node(Box<Node>),
    /// `v1 Namespace`.
    Namespace(Box<Namespace>),
    /// `k8s.ovn.org/v1 UserDefinedNetwork`.
    UserDefinedNetwork(Box<UserDefinedNetwork>),
    /// `k8s.ovn.org/v1 ClusterUserDefinedNetwork`.
    ClusterUserDefinedNetwork(Box<ClusterUserDefinedNetwork>),
    /// `k8s.ovn.org/v1 ClusterNetworkConnect`.
    ClusterNetworkConnect(Box<ClusterNetworkConnect>),
    /// `v1 Service`.
    Service(Box<Service>),
    /// `discovery.k8s.io/v1 EndpointSlice`.
    EndpointSlice(Box<EndpointSlice>),
    /// `k8s.cni.cncf.io/v1 NetworkAttachmentDefinition`.
    NetworkAttachmentDefinition(Box<NetworkAttachmentDefinition>),
    /// The networking plugin's `onapNetwork` (any `apiVersion`).
    OnapNetwork(Box<OnapNetwork>),
    /// `v1 Pod` (only those asking for interfaces on virtual networks are kept).
    Pod(Box<Pod>),
}

impl Object {
    /// The kind, as in `kind:`.
    pub fn kind(&self) -> &'static str {
        match self {
            Object::Node(_) => "Node",
            Object::Namespace(_) => "Namespace",
            Object::UserDefinedNetwork(_) => "UserDefinedNetwork",
            Object::ClusterUserDefinedNetwork(_) => "ClusterUserDefinedNetwork",
            Object::ClusterNetworkConnect(_) => "ClusterNetworkConnect",
            Object::Service(_) => "Service",
            Object::EndpointSlice(_) => "EndpointSlice",
            Object::NetworkAttachmentDefinition(_) => "NetworkAttachmentDefinition",
            Object::OnapNetwork(_) => "onapNetwork",
            Object::Pod(_) => "Pod",
        }
    }

    /// `namespace/name` or `name`.
    pub fn name(&self) -> String {
        self.metadata().qualified_name()
    }

    /// Its name, namespace, labels and annotations.
    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            Object::Node(o) => &o.metadata,
            Object::Namespace(o) => &o.metadata,
            Object::UserDefinedNetwork(o) => &o.metadata,
            Object::ClusterUserDefinedNetwork(o) => &o.metadata,
            Object::ClusterNetworkConnect(o) => &o.metadata,
            Object::Service(o) => &o.metadata,
            Object::EndpointSlice(o) => &o.metadata,
            Object::NetworkAttachmentDefinition(o) => &o.metadata,
            Object::OnapNetwork(o) => &o.metadata,
            Object::Pod(o) => &o.metadata,
        }
    }
}

/// A problem with one input: where, which object (when known), which field (when
/// known), and what. Displayed as
/// `udn.yaml doc 2: UserDefinedNetwork red/net1: spec.layer3.subnets[1]: 10.1.0.0/16 overlaps 10.1.0.0/17`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Where the object was read.
    pub(crate) origin: Origin,
    /// `Kind namespace/name`, when the document got that far.
    pub object: Option<String>,
    /// The field's path, e.g. `spec.layer3.subnets[1]`.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.origin)?;
        if let Some(o) = &self.object {
            write!(f, ": {o}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for Problem {}

/// What one file held: its objects, and the documents that could not be read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FileObjects {
    /// The file, relative to its directory.
    pub file: PathBuf,
    /// The objects, in file order.
    pub objects: Vec<(Origin, Object)>,
    /// Documents that were skipped, and why.
    pub problems: Vec<Problem>,
    /// Fields of objects read that netconnectd does not know and ignored (as
    /// `kubectl --validate` warns of them): a typo, or a field of a newer version.
    pub warnings: Vec<Problem>,
    /// Set when the file as a whole could not be read or parsed as YAML; then
    /// `objects` holds what came before the error, if anything.
    pub(crate) unreadable: Option<String>,
}

/// The files of `dir` ending in `.yaml` or `.yml` (not its subdirectories), in name
/// order. A symbolic link is taken for what it points to (a Kubernetes ConfigMap
/// volume holds its files as links into a directory it swaps): a link to a directory
/// is left out, a link to nothing is kept, so that reading it reports it.
pub(crate) fn manifest_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        let file = kind.is_file() || (kind.is_symlink() && !path.is_dir());
        if is_manifest_name(&path) && file {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// True when a file at `path` is read as a manifest ([`manifest_files`]): its name
/// ends in `.yaml` or `.yml` and does not begin with a dot (an editor's swap file or
/// a save's temporary file is not one).
pub(crate) fn is_manifest_name(path: &Path) -> bool {
    let is_yaml = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e == "yaml" || e == "yml");
    let hidden = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.'));
    is_yaml && !hidden
}

/// Reads every manifest file of `dir` (see `manifest_files`).
pub fn read_dir(dir: &Path) -> std::io::Result<Vec<FileObjects>> {
    read_dir_with(dir, parse_file)
}

/// [`read_dir`], each file's text given to `parse` (with the file's name in `dir`).
pub(crate) fn read_dir_with(
    dir: &Path,
    mut parse: impl FnMut(&Path, &str) -> FileObjects,
) -> std::io::Result<Vec<FileObjects>> {
    Ok(manifest_files(dir)?
        .iter()
        .map(|path| {
            let name = path.strip_prefix(dir).unwrap_or(path).to_path_buf();
            match std::fs::read_to_string(path) {
                Ok(text) => parse(&name, &text),
                Err(e) => FileObjects {
                    file: name,
                    unreadable: Some(format!("cannot read: {e}")),
                    ..Default::default()
                },
            }
        })
        .collect())
}

/// Parses the text of one file named `file` (used in messages).
pub fn parse_file(file: &Path, text: &str) -> FileObjects {
    parse_counted(file, text).0
}

/// A file's documents as parsed, by their text ([`parse_file_reusing`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct ParsedDocs(std::collections::HashMap<String, (FileObjects, usize)>);

/// [`parse_file`], taking each document whose text `known` holds as it was parsed then
/// (a file of 500 objects one of which changed parses that one; `known` is used up);
/// with the documents' texts and what they parsed to, for the next time. Documents are told apart at the
/// lines that are `---` alone: a file with another line starting `---`, `...` or `%`
/// (markers with content, document ends, directives), or a document of which is not
/// valid YAML, is parsed whole.
pub(crate) fn parse_file_reusing(
    file: &Path,
    text: &str,
    mut known: ParsedDocs,
) -> (FileObjects, ParsedDocs) {
    let whole = || (parse_file(file, text), ParsedDocs::default());
    let Some(docs) = split_documents(text) else {
        return whole();
    };
    let mut out = FileObjects {
        file: file.to_path_buf(),
        ..Default::default()
    };
    let mut parsed = ParsedDocs::default();
    // The documents before this one.
    let mut before = 0;
    for doc in docs {
        let (objects, count) = match known.0.remove(doc) {
            Some(same) => same,
            None => parse_counted(file, doc),
        };
        if objects.unreadable.is_some() {
            return whole();
        }
        let at = |o: &Origin| Origin {
            doc: o.doc + before,
            ..o.clone()
        };
        out.objects.extend(
            objects
                .objects
                .iter()
                .map(|(o, object)| (at(o), object.clone())),
        );
        out.problems
            .extend(objects.problems.iter().map(|p| Problem {
                origin: at(&p.origin),
                ..p.clone()
            }));
        out.warnings
            .extend(objects.warnings.iter().map(|p| Problem {
                origin: at(&p.origin),
                ..p.clone()
            }));
        before += count;
        parsed.0.insert(doc.to_owned(), (objects, count));
    }
    (out, parsed)
}

/// `text` cut before each line that is `---` alone (with spaces after it at most):
/// the text before the first (unless only blank lines and comments), then each
/// document with its marker; `None` when another line starts with `---`, `...` or
/// `%`.
fn split_documents(text: &str) -> Option<Vec<&str>> {
    let mut docs = Vec::new();
    let (mut start, mut at) = (0, 0);
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        if let Some(rest) = bare.strip_prefix("---") {
            if !rest.trim().is_empty() {
                return None;
            }
            docs.push(&text[start..at]);
            start = at;
        } else if bare.starts_with("...") || bare.starts_with('%') {
            return None;
        }
        at += line.len();
    }
    docs.push(&text[start..]);
    // Blank lines and comments before the first marker are no document (alone, a
    // parser reads them as an empty one).
    let blank = |t: &str| {
        t.lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    };
    if docs.len() > 1 && blank(docs[0]) {
        docs.remove(0);
    }
    Some(docs)
}

/// [`parse_file`] of `text`, with how many documents it held.
fn parse_counted(file: &Path, text: &str) -> (FileObjects, usize) {
    let mut out = FileObjects {
        file: file.to_path_buf(),
        ..Default::default()
    };
    let mut count = 0;
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        count = i + 1;
        let origin = Origin {
            file: file.to_path_buf(),
            doc: i + 1,
            item: None,
        };
        let value = match serde_yaml_ng::Value::deserialize(doc) {
            Ok(v) => v,
            Err(e) => {
                // The YAML stream itself is broken: nothing after this point can be
                // trusted, so the file counts as unreadable.
                out.unreadable = Some(format!("{origin}: not valid YAML: {e}"));
                break;
            }
        };
        if value.is_null() {
            continue;
        }
        let value = match serde_json::to_value(&value) {
            Ok(v) => v,
            Err(e) => {
                out.problems.push(Problem {
                    origin,
                    object: None,
                    field: None,
                    message: format!("cannot be represented as JSON: {e}"),
                });
                continue;
            }
        };
        if value.get("kind").and_then(|k| k.as_str()) == Some("List") {
            let items = value
                .get("items")
                .and_then(|i| i.as_array())
                .cloned()
                .unwrap_or_default();
            for (j, item) in items.into_iter().enumerate() {
                let origin = Origin {
                    item: Some(j + 1),
                    ..origin.clone()
                };
                push_object(&mut out, origin, item);
            }
        } else {
            push_object(&mut out, origin, value);
        }
    }
    (out, count)
}

fn push_object(out: &mut FileObjects, origin: Origin, value: serde_json::Value) {
    let mut unknown = Vec::new();
    match decode_object(value, &mut unknown) {
        Ok(Some(object)) => {
            let label = format!("{} {}", object.kind(), object.name());
            // `apiVersion` and `kind` were read before (kube's derived types skip them).
            let unknown = unknown
                .into_iter()
                .filter(|f| !matches!(f.as_str(), "apiVersion" | "kind"));
            out.warnings.extend(unknown.map(|field| Problem {
                origin: origin.clone(),
                object: Some(label.clone()),
                field: Some(field),
                message: "unknown field, ignored".into(),
            }));
            out.objects.push((origin, object));
        }
        Ok(None) => {}
        Err((object, field, message)) => out.problems.push(Problem {
            origin,
            object,
            field,
            message,
        }),
    }
}

type DecodeFailure = (Option<String>, Option<String>, String);

/// The `apiVersion` a kind netconnect reads must have (`onapNetwork` may have any).
fn required_api_version(kind: &str) -> Option<&'static str> {
    match kind {
        "Node" | "Namespace" | "Service" | "Pod" => Some("v1"),
        "UserDefinedNetwork" | "ClusterUserDefinedNetwork" | "ClusterNetworkConnect" => {
            Some("k8s.ovn.org/v1")
        }
        "EndpointSlice" => Some("discovery.k8s.io/v1"),
        "NetworkAttachmentDefinition" => Some("k8s.cni.cncf.io/v1"),
        _ => None,
    }
}

/// The object a document describes; `None` for kinds netconnect does not read.
fn decode_object(
    value: serde_json::Value,
    unknown: &mut Vec<String>,
) -> Result<Option<Object>, DecodeFailure> {
    let text = |key: &str| {
        value
            .get(key)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let name = value
        .pointer("/metadata/name")
        .and_then(|v| v.as_str())
        .map(str::to_owned);
    let namespace = value
        .pointer("/metadata/namespace")
        .and_then(|v| v.as_str())
        .map(str::to_owned);
    let label = match (&namespace, &name) {
        (Some(ns), Some(n)) => Some(format!("{kind} {ns}/{n}")),
        (None, Some(n)) => Some(format!("{kind} {n}")),
        _ => None,
    };
    let fail = |field: Option<String>, message: String| Err((label.clone(), field, message));
    if kind.is_empty() {
        return fail(Some("kind".into()), "missing".into());
    }
    let object = match kind.as_str() {
        k if required_api_version(k).is_some_and(|want| api_version != want) => {
            let want = required_api_version(k).unwrap_or_default();
            return fail(
                Some("apiVersion".into()),
                format!("{kind} is apiVersion {want}, not \"{api_version}\""),
            );
        }
        "Node" => Object::Node(Box::new(typed(value, &label, unknown)?)),
        "Service" => Object::Service(Box::new(typed(value, &label, unknown)?)),
        "EndpointSlice" => Object::EndpointSlice(Box::new(typed(value, &label, unknown)?)),
        "Namespace" => Object::Namespace(Box::new(typed(value, &label, unknown)?)),
        "UserDefinedNetwork" => {
            Object::UserDefinedNetwork(Box::new(typed(value, &label, unknown)?))
        }
        "ClusterUserDefinedNetwork" => {
            Object::ClusterUserDefinedNetwork(Box::new(typed(value, &label, unknown)?))
        }
        "ClusterNetworkConnect" => {
            Object::ClusterNetworkConnect(Box::new(typed(value, &label, unknown)?))
        }
        "NetworkAttachmentDefinition" => {
            Object::NetworkAttachmentDefinition(Box::new(typed(value, &label, unknown)?))
        }
        "onapNetwork" => Object::OnapNetwork(Box::new(typed(value, &label, unknown)?)),
        // Only a pod asking for interfaces on virtual networks is netconnectd's: the
        // others (every pod of a cluster's dump) are not even decoded.
        "Pod" if !asks_for_interfaces(&value) => return Ok(None),
        "Pod" => Object::Pod(Box::new(typed(value, &label, unknown)?)),
        _ => return Ok(None),
    };
    if object.name().is_empty() || name.is_none() {
        return fail(Some("metadata.name".into()), "missing".into());
    }
    let namespaced = matches!(
        object,
        Object::UserDefinedNetwork(_)
            | Object::Pod(_)
            | Object::Service(_)
            | Object::EndpointSlice(_)
            | Object::NetworkAttachmentDefinition(_)
    );
    match (namespaced, namespace.as_deref()) {
        (true, None | Some("")) => fail(
            Some("metadata.namespace".into()),
            format!("{kind} is namespaced and needs one"),
        ),
        (false, Some(ns)) if !ns.is_empty() => fail(
            Some("metadata.namespace".into()),
            format!("{kind} is cluster-scoped and takes no namespace (got \"{ns}\")"),
        ),
        _ => Ok(Some(object)),
    }
}

/// True when a pod's annotations hold one of those asking for interfaces
/// ([`super::pod`]).
fn asks_for_interfaces(value: &serde_json::Value) -> bool {
    let annotations = value.pointer("/metadata/annotations");
    [super::pod::OVN_NETWORK, super::pod::ONAP_NETWORKS]
        .iter()
        .any(|k| annotations.and_then(|a| a.get(k)).is_some())
}

/// Deserializes with the path of the field that failed; the paths of the fields the
/// type does not know (and ignored) go to `unknown`.
fn typed<T: DeserializeOwned>(
    value: serde_json::Value,
    label: &Option<String>,
    unknown: &mut Vec<String>,
) -> Result<T, DecodeFailure> {
    // serde_ignored writes an optional value's step as `?`: not a field of the path.
    let mut note = |path: serde_ignored::Path<'_>| {
        let path = path.to_string().replace(".?", "");
        unknown.push(path.strip_prefix("?.").unwrap_or(&path).to_owned());
    };
    let ignored = serde_ignored::Deserializer::new(value, &mut note);
    serde_path_to_error::deserialize(ignored).map_err(|e| {
        let path = e.path().to_string();
        let field = (path != ".").then_some(path);
        (label.clone(), field, e.into_inner().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_parsed_document_by_document_reads_as_parsed_whole() {
        // Random files (a fixed seed) of documents of every sort, each parsed after
        // another random file sharing some of its documents: what the documents
        // parsed before give is what parsing the file whole gives.
        let mut next = crate::testing::random(0x1234_5678_9abc_def1u64);
        let doc = |k: u64, i: u64| -> String {
            match k {
                0 => format!("apiVersion: v1\nkind: Node\nmetadata: {{name: n{i}}}\n"),
                1 => format!("apiVersion: v1\nkind: List\nitems:\n- {{apiVersion: v1, kind: Node, metadata: {{name: l{i}}}}}\n- {{apiVersion: v1, kind: Namespace, metadata: {{name: s{i}}}}}\n"),
                2 => String::new(),
                3 => "# only a comment\n".into(),
                4 => format!("apiVersion: v1\nkind: Node\nmetadata: {{name: [b{i}]}}\n"),
                5 => "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n".into(),
                6 => "a: [1, 2\n".into(),
                7 => "text: |\n  block\n  --- not a marker\n".into(),
                8 => "... \n".into(),
                _ => "--- {apiVersion: v1, kind: Namespace, metadata: {name: inline}}\n".into(),
            }
        };
        let pool: Vec<String> = (0..40).map(|i| doc(i % 10, i)).collect();
        let file = |next: &mut dyn FnMut(u64) -> u64| -> String {
            let mut text = match next(3) {
                0 => String::new(),
                1 => "# a header\n".into(),
                _ => pool[next(40) as usize].clone(),
            };
            for _ in 0..next(8) {
                text.push_str(["---\n", "---  \n", "---\r\n"][next(3) as usize]);
                // The pool's later half seldom: most files split.
                let most = if next(4) == 0 { 40 } else { 20 };
                let d = &pool[next(most) as usize];
                text.push_str(d);
            }
            text
        };
        let (mut split, mut reused) = (0, 0);
        let name = Path::new("f.yaml");
        for _ in 0..2000 {
            let old = file(&mut next);
            // Another file, or the same with a document added at its end.
            let new = match next(2) {
                0 => file(&mut next),
                _ => format!("{old}---\n{}", pool[next(20) as usize]),
            };
            let (_, known) = parse_file_reusing(name, &old, ParsedDocs::default());
            let offered: Vec<String> = known.0.keys().cloned().collect();
            let (got, docs) = parse_file_reusing(name, &new, known);
            assert_eq!(got, parse_file(name, &new), "{old:?} then {new:?}");
            split += usize::from(!docs.0.is_empty());
            reused += docs.0.keys().filter(|d| offered.contains(d)).count();
        }
        assert!(
            split > 400 && reused > 300,
            "{split} files split, {reused} documents reused"
        );
    }

    fn parse(text: &str) -> FileObjects {
        parse_file(Path::new("x.yaml"), text)
    }

    #[test]
    fn several_documents_and_lists_are_read_with_their_positions() {
        let f = parse(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: blue\n  labels: {team: blue}\n---\n\
             ---\n\
             apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: n1}\n\
             - apiVersion: v1\n  kind: Node\n  metadata: {name: n2, annotations: {k8s.ovn.org/node-id: \"3\"}}\n",
        );
        assert!(f.problems.is_empty(), "{:?}", f.problems);
        assert_eq!(f.objects.len(), 3);
        assert_eq!(f.objects[0].0.to_string(), "x.yaml doc 1");
        assert_eq!(f.objects[2].0.to_string(), "x.yaml doc 3 item 2");
        let Object::Node(n2) = &f.objects[2].1 else {
            panic!("not a node")
        };
        assert_eq!(n2.metadata.annotations()["k8s.ovn.org/node-id"], "3");
    }

    #[test]
    fn a_bad_document_names_its_field_and_does_not_stop_the_others() {
        let f = parse(
            "apiVersion: k8s.ovn.org/v1\nkind: UserDefinedNetwork\nmetadata: {name: net1, namespace: red}\n\
             spec:\n  topology: Layer9\n---\n\
             apiVersion: v1\nkind: Namespace\nmetadata: {name: red}\n",
        );
        assert_eq!(f.objects.len(), 1);
        assert_eq!(f.problems.len(), 1);
        let p = f.problems[0].to_string();
        assert!(
            p.starts_with("x.yaml doc 1: UserDefinedNetwork red/net1: spec.topology: unknown variant `Layer9`"),
            "{p}"
        );
    }

    #[test]
    fn scope_and_api_version_are_checked() {
        let f = parse("apiVersion: k8s.ovn.org/v1\nkind: UserDefinedNetwork\nmetadata: {name: a}\nspec: {topology: Layer2, layer2: {role: Primary, subnets: [10.0.0.0/16]}}\n");
        assert_eq!(
            f.problems[0].to_string(),
            "x.yaml doc 1: UserDefinedNetwork a: metadata.namespace: UserDefinedNetwork is namespaced and needs one"
        );
        let f = parse("apiVersion: v2\nkind: Node\nmetadata: {name: a}\n");
        assert!(f.problems[0]
            .to_string()
            .contains("apiVersion: Node is apiVersion v1"));
        let f = parse("apiVersion: v1\nkind: Namespace\nmetadata: {name: a, namespace: b}\n");
        assert!(f.problems[0].to_string().contains("cluster-scoped"));
    }

    #[test]
    fn other_kinds_are_ignored_and_broken_yaml_marks_the_file() {
        let f = parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n");
        assert!(f.objects.is_empty() && f.problems.is_empty());
        let f =
            parse("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\nkey: [unclosed\n");
        assert_eq!(f.objects.len(), 1);
        assert!(f
            .unreadable
            .as_deref()
            .unwrap()
            .contains("doc 2: not valid YAML"));
    }

    #[test]
    fn the_fields_of_an_object_are_kept_for_writing_back() {
        let f = parse("apiVersion: v1\nkind: Node\nmetadata:\n  name: a\n  uid: '1234'\nstatus:\n  addresses: [{type: InternalIP, address: 10.0.0.1}]\n");
        let Object::Node(n) = &f.objects[0].1 else {
            panic!()
        };
        assert_eq!(n.metadata.uid.as_deref(), Some("1234"));
        let back = serde_json::to_value(n).unwrap();
        assert_eq!(back["metadata"]["uid"], "1234");
        assert_eq!(back["status"]["addresses"][0]["address"], "10.0.0.1");
    }

    /// The JSON pointers of every list and object inside `v` (not `v` itself), with
    /// their paths without indices (`/spec/ports/*/name`).
    fn containers(v: &serde_json::Value, at: &str, bare: &str, out: &mut Vec<(String, String)>) {
        let children: Vec<(String, String, &serde_json::Value)> = match v {
            serde_json::Value::Object(m) => m
                .iter()
                .map(|(k, c)| {
                    let k = k.replace('~', "~0").replace('/', "~1");
                    (format!("{at}/{k}"), format!("{bare}/{k}"), c)
                })
                .collect(),
            serde_json::Value::Array(a) => a
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("{at}/{i}"), format!("{bare}/*"), c))
                .collect(),
            _ => Vec::new(),
        };
        for (at, bare, c) in children {
            if c.is_object() || c.is_array() {
                out.push((at.clone(), bare.clone()));
                containers(c, &at, &bare, out);
            }
        }
    }

    #[test]
    fn a_null_list_or_map_reads_as_empty_wherever_it_is() {
        // Go writes a nil slice or map without `omitempty` as `null`, and the API server
        // prints what it stored: each list and map of every object of the kubectl dump,
        // set to `null` in turn, reads as that field empty (or absent, which k8s-openapi
        // tells apart from empty and netconnect does not).
        //
        // Not lists or maps but Go structs held by value, never written as `null`: an
        // object's `metadata` and `spec`, a ClusterUserDefinedNetwork's network and
        // namespace selector, a connect's network selector.
        let structs = [
            "/metadata",
            "/spec",
            "/spec/network",
            "/spec/namespaceSelector",
            "/spec/networkSelectors/*/clusterUserDefinedNetworkSelector/networkSelector",
            "/spec/networkSelectors/*/primaryUserDefinedNetworkSelector/namespaceSelector",
        ];
        let text = include_str!("../../tests/data/kubectl/kind-cluster.yaml");
        let dump: serde_json::Value = serde_yaml_ng::from_str(text).unwrap();
        let decode = |v: serde_json::Value| decode_object(v, &mut Vec::new()).map_err(|e| e.2);
        let mut tried = 0;
        for item in dump["items"].as_array().unwrap() {
            let mut paths = Vec::new();
            containers(item, "", "", &mut paths);
            for (at, bare) in paths {
                // A list's elements are values, not fields: Go writes none as `null`.
                // managedFields' `fieldsV1` is opaque, kept as written.
                let opaque = bare.contains("/fieldsV1/");
                if structs.contains(&bare.as_str()) || bare.ends_with("/*") || opaque {
                    continue;
                }
                let variant = |f: &dyn Fn(&mut serde_json::Value)| {
                    let mut v = item.clone();
                    f(v.pointer_mut(&at).unwrap());
                    decode(v)
                };
                let null = variant(&|v| *v = serde_json::Value::Null);
                let empty = variant(&|v| {
                    *v = match v {
                        serde_json::Value::Array(_) => serde_json::json!([]),
                        _ => serde_json::json!({}),
                    }
                });
                let (parent, key) = at.rsplit_once('/').unwrap();
                let absent = match item.pointer(parent) {
                    Some(serde_json::Value::Object(_)) => {
                        let mut v = item.clone();
                        let key = key.replace("~1", "/").replace("~0", "~");
                        v.pointer_mut(parent)
                            .unwrap()
                            .as_object_mut()
                            .unwrap()
                            .remove(&key);
                        Some(decode(v))
                    }
                    _ => None,
                };
                let null = null.unwrap_or_else(|e| panic!("{} {at} null: {e}", item["kind"]));
                assert!(
                    Ok(&null) == empty.as_ref()
                        || Some(Ok(&null)) == absent.as_ref().map(|a| a.as_ref()),
                    "{} {at}: null reads as neither empty nor absent",
                    item["kind"]
                );
                tried += 1;
            }
        }
        assert!(tried > 100, "{tried} lists and maps");
    }
}
