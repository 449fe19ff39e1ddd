//! The manifest directory as the daemon sees it: read file by file, keeping what a
//! broken file held before, and watched for changes.
//!
//! A file that cannot be read or is not valid YAML (an editor half way through
//! writing it) keeps the objects it held the last time it was good: it is reported,
//! never taken as the deletion of its objects. Likewise an object whose document no
//! longer decodes keeps its last good version (found by kind and name). A file that is
//! gone is a deletion.
//!
//! EndpointSlices are the exception: a slice lists the live backends of a service, and
//! its last good version may name pods that are gone (their addresses dead, or given to
//! other pods since). A slice that cannot be read counts as removed: its service keeps
//! the backends of its other slices, and with none left its VIPs reject, until a
//! readable version comes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::api::load::{
    is_manifest_name, parse_file_reusing, read_dir_with, FileObjects, ParsedDocs, Problem,
};

/// The manifests of one directory, with what each file last held when it was good.
#[derive(Debug, Default)]
pub struct ManifestDir {
    dir: PathBuf,
    good: BTreeMap<PathBuf, FileObjects>,
    /// Each file's text as last read, what it parsed to, and its documents: a file
    /// whose text is the same is not parsed again (a change to one file of many
    /// parses that one), and a file changed parses only its documents changed.
    parsed: BTreeMap<PathBuf, (String, FileObjects, ParsedDocs)>,
}

impl ManifestDir {
    /// The directory `dir`, not read yet.
    pub fn new(dir: impl Into<PathBuf>) -> ManifestDir {
        ManifestDir {
            dir: dir.into(),
            good: BTreeMap::new(),
            parsed: BTreeMap::new(),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reads every file again; see the module's comment for what a broken file or
    /// object gives.
    pub fn read(&mut self) -> std::io::Result<Vec<FileObjects>> {
        let mut before = std::mem::take(&mut self.parsed);
        let mut parsed = BTreeMap::new();
        let now = read_dir_with(&self.dir, |file, text| {
            let entry = match before.remove(file) {
                Some(same) if same.0 == text => same,
                other => {
                    let known = other.map(|(_, _, docs)| docs).unwrap_or_default();
                    let (objects, docs) = parse_file_reusing(file, text, known);
                    (text.to_owned(), objects, docs)
                }
            };
            let objects = entry.1.clone();
            parsed.insert(file.to_path_buf(), entry);
            objects
        })?;
        self.parsed = parsed;
        let mut out = Vec::with_capacity(now.len());
        let mut good = BTreeMap::new();
        for mut f in now {
            if let Some(why) = f.unreadable.take() {
                let Some(last) = self.good.get(&f.file) else {
                    // Never good: nothing to keep.
                    f.unreadable = Some(why);
                    out.push(f);
                    continue;
                };
                let mut kept = last.clone();
                let slices = kept.objects.len();
                kept.objects.retain(|(_, o)| !is_slice(o));
                let slices = match slices - kept.objects.len() {
                    0 => String::new(),
                    n => format!(" but its {n} EndpointSlice(s), whose endpoints may be gone"),
                };
                kept.problems.push(Problem {
                    origin: crate::api::Origin {
                        file: f.file.clone(),
                        doc: 0,
                        item: None,
                    },
                    object: None,
                    field: None,
                    message: format!("{why}; the objects it held before are kept{slices}"),
                });
                good.insert(f.file.clone(), last.clone());
                out.push(kept);
                continue;
            }
            // Objects whose documents no longer decode keep their last good version.
            if let Some(last) = self.good.get(&f.file) {
                let mut kept = Vec::new();
                for p in &mut f.problems {
                    let Some(label) = &p.object else { continue };
                    let previous = last
                        .objects
                        .iter()
                        .find(|(_, o)| format!("{} {}", o.kind(), o.name()) == *label);
                    if previous.is_some_and(|(_, o)| is_slice(o)) {
                        p.message.push_str(
                            "; the slice counts as removed (the endpoints of its version \
                             read before may be gone) until a version that can be read comes",
                        );
                        continue;
                    }
                    if let Some((origin, object)) = previous {
                        let present = f
                            .objects
                            .iter()
                            .any(|(_, o)| o.kind() == object.kind() && o.name() == object.name());
                        if !present {
                            kept.push((origin.clone(), object.clone()));
                            p.message.push_str("; the version read before is kept");
                        }
                    }
                }
                f.objects.extend(kept);
            }
            good.insert(f.file.clone(), f.clone());
            out.push(f);
        }
        self.good = good;
        Ok(out)
    }
}

/// True for an EndpointSlice: never kept past a version that cannot be read (see the
/// module's comment).
fn is_slice(o: &crate::api::Object) -> bool {
    matches!(o, crate::api::Object::EndpointSlice(_))
}

/// How long a burst of changes must be quiet, once no file is left half written,
/// before it is announced (an editor may still chmod or remove a backup just after
/// its save).
const GRACE: Duration = Duration::from_millis(10);

/// What a file event says of the directory.
#[derive(Debug)]
enum Seen {
    /// This file was written and not closed since (or changed otherwise): it may be
    /// half written.
    Open(PathBuf),
    /// This file is as its writer left it: closed after writing, renamed into place or
    /// away, or removed.
    Done(PathBuf),
    /// An event was lost (the kernel's queue overflowed, say): something changed, and
    /// what is not known.
    Lost,
}

impl Seen {
    /// What `event` in watched directory `dir` says of each of its paths that is the
    /// directory, a manifest in it ([`is_manifest_name`]), or an entry that is there
    /// and is no plain file (a link or a directory: a Kubernetes ConfigMap volume
    /// updates its manifests, links into `..data`, by renaming a new `..data` link
    /// over the old one); nothing for a read (reading the files, as every reload does,
    /// is no change: counting it would make each reload announce the next, for ever),
    /// nor for any other file: an editor's swap file written as one types, or a save's
    /// temporary file before it is renamed into place, changes no manifest, and a
    /// reload for it would build the whole world again for nothing (the rename is what
    /// announces the save).
    fn of(dir: &Path, event: &notify::Event) -> Vec<Seen> {
        use notify::event::{AccessKind, AccessMode, EventKind, ModifyKind};
        // The kernel's queue overflowed: events were dropped, which is not known.
        if event.need_rescan() {
            return vec![Seen::Lost];
        }
        let done = match event.kind {
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
            EventKind::Access(_) => return Vec::new(),
            EventKind::Modify(ModifyKind::Name(_)) | EventKind::Remove(_) => true,
            _ => false,
        };
        event
            .paths
            .iter()
            .filter(|p| p.as_path() == dir || is_manifest_name(p) || is_no_plain_file(p))
            .cloned()
            .map(|p| if done { Seen::Done(p) } else { Seen::Open(p) })
            .collect()
    }
}

/// True when `path` is there and is not a plain file (a link, a directory).
fn is_no_plain_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_file())
}

/// Watches `dir` (creations, changes, deletions and renames of its manifests, of its
/// links and directories, and of the directory itself; other files are not looked at)
/// and sends a unit on `tx` after each burst of changes: once every file written in it
/// is closed (or renamed into place) and nothing more happened for a few milliseconds,
/// or, while a file may be half written (a writer that has not closed it), once the
/// burst has been quiet for `settle`. The watcher lives as long as the returned value.
pub fn watch(
    dir: &Path,
    settle: Duration,
    tx: tokio::sync::mpsc::Sender<()>,
) -> notify::Result<notify::RecommendedWatcher> {
    use notify::Watcher;
    let (raw_tx, mut raw_rx) = tokio::sync::mpsc::unbounded_channel::<Seen>();
    // The directory as the watcher names it in events: made absolute as it is.
    let watched = match dir.is_absolute() {
        true => dir.to_path_buf(),
        false => std::env::current_dir()
            .map_err(notify::Error::io)?
            .join(dir),
    };
    let mut watcher =
        notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
            Ok(e) => {
                for seen in Seen::of(&watched, &e) {
                    let _ = raw_tx.send(seen);
                }
            }
            Err(_) => {
                let _ = raw_tx.send(Seen::Lost);
            }
        })?;
    watcher.watch(dir, notify::RecursiveMode::NonRecursive)?;
    tokio::spawn(async move {
        while let Some(first) = raw_rx.recv().await {
            let mut burst = Burst::default();
            burst.note(first);
            // Let the burst end (an editor's write, rename, chmod).
            loop {
                let quiet = if burst.settled() { GRACE } else { settle };
                match tokio::time::timeout(quiet, raw_rx.recv()).await {
                    Ok(Some(seen)) => burst.note(seen),
                    Ok(None) => return,
                    Err(_) => break,
                }
            }
            if tx.send(()).await.is_err() {
                return;
            }
        }
    });
    Ok(watcher)
}

/// What a burst of file events left unsure.
#[derive(Debug, Default)]
struct Burst {
    /// The files written in it and not closed since.
    open: std::collections::BTreeSet<PathBuf>,
    /// An event of it was lost.
    lost: bool,
}

impl Burst {
    fn note(&mut self, seen: Seen) {
        match seen {
            Seen::Open(p) => {
                self.open.insert(p);
            }
            Seen::Done(p) => {
                self.open.remove(&p);
            }
            Seen::Lost => self.lost = true,
        }
    }

    /// True when every file written is as its writer left it, as far as is known.
    fn settled(&self) -> bool {
        self.open.is_empty() && !self.lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NET: &str = "apiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {name: blue}\nspec:\n  namespaceSelector: {}\n  network: {topology: Layer2, layer2: {role: Primary, subnets: [10.1.0.0/16]}}\n";

    fn names(files: &[FileObjects]) -> Vec<String> {
        files
            .iter()
            .flat_map(|f| {
                f.objects
                    .iter()
                    .map(|(_, o)| format!("{} {}", o.kind(), o.name()))
            })
            .collect()
    }

    #[test]
    fn a_broken_file_keeps_its_objects_and_a_deleted_one_loses_them() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("nets.yaml");
        std::fs::write(&file, NET).unwrap();
        let mut m = ManifestDir::new(dir.path());
        assert_eq!(
            names(&m.read().unwrap()),
            ["ClusterUserDefinedNetwork blue"]
        );
        // Half written: the YAML stops in the middle of a flow mapping.
        std::fs::write(&file, &NET[..NET.len() - 30]).unwrap();
        let files = m.read().unwrap();
        assert_eq!(names(&files), ["ClusterUserDefinedNetwork blue"], "kept");
        let p = files[0].problems.last().unwrap().to_string();
        assert!(
            p.contains("not valid YAML") && p.contains("the objects it held before are kept"),
            "{p}"
        );
        // Good again, then gone.
        std::fs::write(&file, NET).unwrap();
        assert_eq!(m.read().unwrap()[0].problems.len(), 0);
        std::fs::remove_file(&file).unwrap();
        assert!(
            names(&m.read().unwrap()).is_empty(),
            "a deleted file deletes its objects"
        );
    }

    #[test]
    fn an_object_that_no_longer_decodes_keeps_its_last_version() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("nets.yaml");
        std::fs::write(&file, NET).unwrap();
        let mut m = ManifestDir::new(dir.path());
        m.read().unwrap();
        std::fs::write(&file, NET.replace("topology: Layer2", "topology: Layer9")).unwrap();
        let files = m.read().unwrap();
        assert_eq!(names(&files), ["ClusterUserDefinedNetwork blue"]);
        let p = files[0].problems[0].to_string();
        assert!(
            p.contains("Layer9") && p.contains("the version read before is kept"),
            "{p}"
        );
    }

    /// A service of a user-defined network and its slice mirrored for it, with one
    /// ready endpoint.
    const SERVICE: &str = "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: red}\n\
        spec: {clusterIP: 10.96.0.10, clusterIPs: [10.96.0.10], ports: [{port: 80, protocol: TCP, targetPort: 8080}]}\n";
    const SLICE: &str = "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
        metadata:\n  name: red-net-web-abcde\n  namespace: red\n\
        \x20 labels: {endpointslice.kubernetes.io/managed-by: endpointslice-mirror-controller.k8s.ovn.org, k8s.ovn.org/service-name: web}\n\
        \x20 annotations: {k8s.ovn.org/endpointslice-network: red_net}\n\
        addressType: IPv4\n";
    const ONE_POD: &str = "endpoints:\n- addresses: [10.128.1.3]\n  conditions: {ready: true, serving: true, terminating: false}\n\
        ports:\n- name: \"\"\n  port: 8080\n  protocol: TCP\n";

    /// The backends of service `red/web` in what `files` hold.
    fn backends(files: &[FileObjects]) -> Vec<String> {
        let inv = crate::api::Inventory::build(files, &Default::default());
        let svc = &inv.services["red/web"];
        let slices = inv.slices_of(svc, "red_net");
        crate::api::service::endpoints_of(svc, &slices)
            .iter()
            .flat_map(|by_port| by_port.values().flatten())
            .map(|b| b.ip.to_string())
            .collect()
    }

    #[test]
    fn a_slice_emptied_as_kubectl_prints_it_leaves_its_service_no_backend() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("web.yaml");
        std::fs::write(&file, format!("{SERVICE}{SLICE}{ONE_POD}")).unwrap();
        let mut m = ManifestDir::new(dir.path());
        assert_eq!(backends(&m.read().unwrap()), ["10.128.1.3"]);
        // The service's last pod went away: discovery.k8s.io/v1 declares `endpoints`
        // and `ports` without omitempty, so the API server prints the nil lists.
        std::fs::write(
            &file,
            format!("{SERVICE}{SLICE}endpoints: null\nports: null\n"),
        )
        .unwrap();
        let files = m.read().unwrap();
        assert!(files[0].problems.is_empty(), "{:?}", files[0].problems);
        assert_eq!(names(&files).len(), 2, "the slice is read, empty");
        assert!(backends(&files).is_empty());
    }

    #[test]
    fn an_endpoint_slice_that_cannot_be_read_counts_as_removed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("web.yaml");
        let good = format!("{SERVICE}{SLICE}{ONE_POD}");
        std::fs::write(&file, &good).unwrap();
        let mut m = ManifestDir::new(dir.path());
        assert_eq!(backends(&m.read().unwrap()), ["10.128.1.3"]);
        // A version netconnectd cannot read: not kept, unlike other kinds.
        std::fs::write(&file, format!("{SERVICE}{SLICE}endpoints: 7\n")).unwrap();
        let files = m.read().unwrap();
        assert_eq!(names(&files), ["Service red/web"]);
        assert!(backends(&files).is_empty());
        let p = files[0].problems[0].to_string();
        assert!(
            p.contains("EndpointSlice red/red-net-web-abcde: endpoints")
                && p.contains("the slice counts as removed"),
            "{p}"
        );
        // Readable again, then the file half written: the service is kept, the slice not.
        std::fs::write(&file, &good).unwrap();
        assert_eq!(backends(&m.read().unwrap()), ["10.128.1.3"]);
        let half = format!("{SERVICE}{SLICE}endpoints: [{{addresses: [10.12");
        std::fs::write(&file, half).unwrap();
        let files = m.read().unwrap();
        assert_eq!(names(&files), ["Service red/web"]);
        let p = files[0].problems.last().unwrap().to_string();
        assert!(
            p.contains("the objects it held before are kept but its 1 EndpointSlice(s)"),
            "{p}"
        );
    }

    /// A watch of `dir` (a burst left half written settles after `settle`) and what it
    /// announces.
    fn watching(
        dir: &Path,
        settle: Duration,
    ) -> (notify::RecommendedWatcher, tokio::sync::mpsc::Receiver<()>) {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        (watch(dir, settle, tx).unwrap(), rx)
    }

    /// Waits at most `within` for an announcement: true when one came (a watch that
    /// ended is none).
    async fn announced(rx: &mut tokio::sync::mpsc::Receiver<()>, within: Duration) -> bool {
        matches!(tokio::time::timeout(within, rx.recv()).await, Ok(Some(())))
    }

    const SOON: Duration = Duration::from_secs(2);
    const QUIET: Duration = Duration::from_millis(400);

    #[tokio::test]
    async fn changes_are_announced_once_per_burst() {
        let dir = tempfile::tempdir().unwrap();
        let (_w, mut rx) = watching(dir.path(), Duration::from_millis(100));
        // An editor's save: write beside, rename into place.
        let tmp = dir.path().join(".nets.yaml.swp");
        std::fs::write(&tmp, NET).unwrap();
        std::fs::rename(&tmp, dir.path().join("nets.yaml")).unwrap();
        assert!(announced(&mut rx, SOON).await, "a change is announced");
        assert!(
            !announced(&mut rx, Duration::from_millis(300)).await,
            "one announcement for the burst"
        );
        // Reading the directory again, as a reload does, announces nothing.
        let mut m = ManifestDir::new(dir.path());
        assert_eq!(
            names(&m.read().unwrap()),
            ["ClusterUserDefinedNetwork blue"]
        );
        assert!(
            !announced(&mut rx, Duration::from_millis(500)).await,
            "reading is not a change"
        );
        std::fs::remove_file(dir.path().join("nets.yaml")).unwrap();
        assert!(announced(&mut rx, SOON).await, "a deletion is announced");
    }

    #[tokio::test]
    async fn a_file_that_is_no_manifest_is_not_a_change_until_renamed_into_one() {
        let dir = tempfile::tempdir().unwrap();
        let (_w, mut rx) = watching(dir.path(), Duration::from_millis(100));
        // An editor's swap file, a backup, a note: written, changed, removed, and
        // never a manifest.
        for name in [".nets.yaml.swp", "nets.yaml~", "notes.txt"] {
            let f = dir.path().join(name);
            std::fs::write(&f, NET).unwrap();
            std::fs::write(&f, "changed").unwrap();
            std::fs::remove_file(&f).unwrap();
        }
        assert!(!announced(&mut rx, QUIET).await, "no manifest changed");
        // A save's temporary file, written long before (the watcher runs meanwhile)
        // and renamed into place: one change, not one for the write and one for the
        // rename.
        std::fs::write(dir.path().join(".tmp"), NET).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        std::fs::rename(dir.path().join(".tmp"), dir.path().join("nets.yaml")).unwrap();
        assert!(announced(&mut rx, SOON).await, "the rename is announced");
        assert!(!announced(&mut rx, QUIET).await, "once");
    }

    #[tokio::test]
    async fn a_configmap_volume_is_read_through_its_links_and_its_swap_announced() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // As the kubelet lays out a ConfigMap volume: the files are links into `..data`,
        // itself a link to a directory named by the update.
        std::fs::create_dir(d.join("..v1")).unwrap();
        std::fs::write(d.join("..v1/nets.yaml"), NET).unwrap();
        symlink("..v1", d.join("..data")).unwrap();
        symlink("..data/nets.yaml", d.join("nets.yaml")).unwrap();
        let mut m = ManifestDir::new(d);
        assert_eq!(
            names(&m.read().unwrap()),
            ["ClusterUserDefinedNetwork blue"]
        );
        let (_w, mut rx) = watching(d, Duration::from_millis(100));
        // An update: a new directory, and a link to it renamed over `..data`.
        std::fs::create_dir(d.join("..v2")).unwrap();
        std::fs::write(d.join("..v2/nets.yaml"), NET.replace("blue", "green")).unwrap();
        symlink("..v2", d.join("..data_tmp")).unwrap();
        std::fs::rename(d.join("..data_tmp"), d.join("..data")).unwrap();
        std::fs::remove_dir_all(d.join("..v1")).unwrap();
        assert!(announced(&mut rx, SOON).await, "the update is announced");
        // A link to nothing is read, and reported; a link to a directory is no file.
        symlink("..data/gone.yaml", d.join("gone.yaml")).unwrap();
        symlink("..v2", d.join("dir.yaml")).unwrap();
        let files = m.read().unwrap();
        assert_eq!(names(&files), ["ClusterUserDefinedNetwork green"]);
        let read: Vec<_> = files.iter().map(|f| f.file.to_str().unwrap()).collect();
        assert_eq!(read, ["gone.yaml", "nets.yaml"]);
        assert!(files[0].unreadable.is_some(), "{:?}", files[0]);
    }

    #[tokio::test]
    async fn the_directory_moved_away_is_a_change() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("manifests");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("nets.yaml"), NET).unwrap();
        let (_w, mut rx) = watching(&dir, Duration::from_millis(100));
        // Its manifests are untouched, and no longer where they were read.
        std::fs::rename(&dir, parent.path().join("elsewhere")).unwrap();
        assert!(
            announced(&mut rx, SOON).await,
            "the directory's move is announced"
        );
    }

    #[test]
    fn an_overflow_is_a_lost_event_and_only_manifests_and_the_directory_count() {
        let dir = Path::new("/m");
        let overflow =
            notify::Event::new(notify::EventKind::Other).set_flag(notify::event::Flag::Rescan);
        assert!(matches!(Seen::of(dir, &overflow)[..], [Seen::Lost]));
        let written = |p: &str| {
            let e = notify::Event::new(notify::EventKind::Modify(notify::event::ModifyKind::Data(
                notify::event::DataChange::Any,
            )));
            Seen::of(dir, &e.add_path(PathBuf::from(p)))
        };
        assert!(matches!(&written("/m/a.yml")[..], [Seen::Open(p)] if p == Path::new("/m/a.yml")));
        assert!(written("/m/.a.yml").is_empty());
        assert!(matches!(&written("/m")[..], [Seen::Open(_)]));
    }

    #[tokio::test]
    async fn a_save_is_announced_once_closed_and_a_file_still_being_written_is_not() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        // A settle far longer than the waits below: what is announced within them was
        // announced because the files were closed, not because the burst went quiet.
        let (_w, mut rx) = watching(dir.path(), Duration::from_secs(30));
        let soon = Duration::from_secs(3);
        let tmp = dir.path().join(".nets.yaml.swp");
        std::fs::write(&tmp, NET).unwrap();
        std::fs::rename(&tmp, dir.path().join("nets.yaml")).unwrap();
        assert!(
            announced(&mut rx, soon).await,
            "a save renamed into place is announced"
        );
        // Written in place, half way: not announced while the writer holds it open.
        let mut f = std::fs::File::create(dir.path().join("more.yaml")).unwrap();
        f.write_all(&NET.as_bytes()[..40]).unwrap();
        f.flush().unwrap();
        assert!(
            !announced(&mut rx, soon).await,
            "a file still being written is not announced"
        );
        f.write_all(&NET.as_bytes()[40..]).unwrap();
        drop(f);
        assert!(announced(&mut rx, soon).await, "announced once closed");
    }
}
