//! The daemon's two seams with the outside world. Where its inputs come from
//! ([`Source`]: the manifest directory today, [`ManifestSource`]) and where what it
//! allocates and the statuses it reports go, to be read back at the next start
//! ([`Sink`]: the status directory today, [`StatusDir`], or nowhere, [`NoSink`]).
//! Another source (NetworkAttachmentDefinitions, a Kubernetes API watcher) or another
//! sink (the API server's annotations and status subresources) is a new implementation
//! of one of these, not an edit of the daemon's loop.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::mpsc;

use super::manifests::{self, ManifestDir};
use crate::api::load::{FileObjects, Problem};
use crate::status::dir::{record_ready, State};

/// Where the daemon's inputs come from: every object as the API server prints it,
/// read again whenever they may have changed.
pub trait Source: Send {
    /// Where the inputs are read from, for messages.
    fn describe(&self) -> String;

    /// Every input now, by the file (or stream) each came in, with the problems of
    /// what could not be read.
    fn read(&mut self) -> std::io::Result<Vec<FileObjects>>;

    /// Sends on `changed` whenever the inputs may have changed, as long as the guard
    /// returned is held.
    fn watch(&self, changed: mpsc::Sender<()>) -> std::io::Result<Box<dyn Send>>;
}

/// Where the daemon's allocations and statuses go: the state it works out after each
/// change ([`State`]), saved, and read back when it starts; and each
/// ClusterNetworkConnect's `Ready-In-Zone` condition as its keys reconcile.
pub trait Sink: Send + Sync {
    /// Where it writes, for messages.
    fn describe(&self) -> String;

    /// The state saved last, with the problems of what could not be read of it.
    fn load(&self) -> std::io::Result<(State, Vec<Problem>)>;

    /// Saves `next`: whole, or only what changed since `since` when the sink holds
    /// `since` as saved. True when part of it is left to [`Sink::fold`].
    fn save(&self, next: &State, since: Option<&State>) -> std::io::Result<bool>;

    /// Writes what [`Sink::save`] left while `go_on()` holds; true when all is done.
    fn fold(&self, state: &State, go_on: &dyn Fn() -> bool) -> std::io::Result<bool>;

    /// Records zone `zone`'s outcome of reconciling ClusterNetworkConnect `cnc` as of
    /// `now`; true when it changed what is recorded.
    fn record_ready(
        &self,
        cnc: &str,
        zone: &str,
        outcome: &Result<Vec<String>, String>,
        now: &str,
    ) -> std::io::Result<bool>;
}

/// The manifest directory (`--manifests`), read file by file and watched.
#[derive(Debug)]
pub struct ManifestSource {
    dir: ManifestDir,
    /// How long a burst of file events must settle before it is announced.
    settle: Duration,
}

impl ManifestSource {
    /// The manifests of `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> ManifestSource {
        ManifestSource {
            dir: ManifestDir::new(dir),
            settle: Duration::from_millis(100),
        }
    }
}

impl Source for ManifestSource {
    fn describe(&self) -> String {
        self.dir.dir().display().to_string()
    }

    fn read(&mut self) -> std::io::Result<Vec<FileObjects>> {
        self.dir.read()
    }

    fn watch(&self, changed: mpsc::Sender<()>) -> std::io::Result<Box<dyn Send>> {
        let watcher = manifests::watch(self.dir.dir(), self.settle, changed)
            .map_err(std::io::Error::other)?;
        Ok(Box::new(watcher))
    }
}

/// The status directory (`--status-dir`): each object as the API server would show it
/// once OVN-Kubernetes' cluster manager handled it.
#[derive(Clone, Debug)]
pub struct StatusDir(PathBuf);

impl StatusDir {
    /// The status directory `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> StatusDir {
        StatusDir(dir.into())
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.0
    }
}

impl Sink for StatusDir {
    fn describe(&self) -> String {
        self.0.display().to_string()
    }

    fn load(&self) -> std::io::Result<(State, Vec<Problem>)> {
        State::load(&self.0)
    }

    fn save(&self, next: &State, since: Option<&State>) -> std::io::Result<bool> {
        match since {
            Some(since) => next.save_since(since, &self.0),
            None => next.save(&self.0).map(|()| false),
        }
    }

    fn fold(&self, state: &State, go_on: &dyn Fn() -> bool) -> std::io::Result<bool> {
        state.fold_while(&self.0, go_on)
    }

    fn record_ready(
        &self,
        cnc: &str,
        zone: &str,
        outcome: &Result<Vec<String>, String>,
        now: &str,
    ) -> std::io::Result<bool> {
        record_ready(&self.0, cnc, zone, outcome, now)
    }
}

/// No sink: nothing is saved or read back (without `--status-dir`, allocations are
/// worked out again at each start, deterministically).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoSink;

impl Sink for NoSink {
    fn describe(&self) -> String {
        "nowhere".into()
    }

    fn load(&self) -> std::io::Result<(State, Vec<Problem>)> {
        Ok((State::default(), Vec::new()))
    }

    fn save(&self, _next: &State, _since: Option<&State>) -> std::io::Result<bool> {
        Ok(false)
    }

    fn fold(&self, _state: &State, _go_on: &dyn Fn() -> bool) -> std::io::Result<bool> {
        Ok(true)
    }

    fn record_ready(
        &self,
        _cnc: &str,
        _zone: &str,
        _outcome: &Result<Vec<String>, String>,
        _now: &str,
    ) -> std::io::Result<bool> {
        Ok(false)
    }
}
