//! Several replicas of netconnectd, one writing (`--lock NAME`): the one that holds
//! OVSDB lock `NAME` on the server its cache writes to (a raft cluster's leader) is
//! active, the others stand by, synced and ready, their keys queued. Killed or cut
//! off, the active replica's connection ends, ovsdb-server gives the lock to the next
//! in line, and that replica writes.
//!
//! ovsdb-server keeps locks per server, not in the raft log: a lock held on a server
//! that is no longer the leader says nothing about the leader. So a replica is active
//! only while it holds the lock *on the server its cache writes to*; when the cache
//! moves to another server (the leader changed), the replica asks for the lock there
//! and stands by until it holds it. Every replica follows the leader the same way, so
//! they meet in one line again.
//!
//! The gate closes the moment the lock is lost or the cache leaves the lock's server;
//! the reconciler looks at it just before each send, the workers before each key. What
//! it does not fence: a transaction already sent when its replica stops being active
//! (it completes), and, at a raft leader change, the moment between one replica's
//! cache learning of the new leader (it then takes the new leader's lock at once) and
//! the other's learning it (until then it holds the old leader's lock and its writes
//! are forwarded to the new leader): the time a member takes to tell its clients it
//! stepped down. ovn-northd's lock on a clustered Southbound has the same window, and
//! OVN-Kubernetes' lease-based election a wider one (the lease's renew deadline).

use std::sync::Arc;
use std::time::Duration;

use ovsdb_proto::lock::{Lock, LockState};
use ovsdb_proto::{ConnectOptions, Remote};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::seams::Sink;
use crate::api::load::Problem;
use crate::reconcile::Reconciler;
use crate::status::dir::State;

/// What this replica is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Not told yet: the NB not synced, or the lock not answered.
    Starting,
    /// It holds the lock on the server it writes to: it writes.
    Active,
    /// Another replica holds the lock: it writes nothing, and is ready.
    Standby,
}

impl Role {
    /// Its name in `/status` and the log.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Starting => "starting",
            Role::Active => "active",
            Role::Standby => "standby",
        }
    }
}

/// Where a replica says what it is: its role (for `/status`, readiness and the
/// daemon, which takes over when it turns active) and whether its controller's workers
/// may take keys and its status directory be written. The gate is closed here the
/// moment the replica stops being active, and opened by the daemon once it took over
/// ([`Tell::open`]).
#[derive(Clone)]
pub(crate) struct Tell {
    /// What this replica is.
    pub role: Arc<watch::Sender<Role>>,
    /// True while it is active and has taken over.
    pub may_write: Arc<watch::Sender<bool>>,
}

impl Tell {
    /// A replica starting: its role [`Role::Starting`], its gate closed.
    pub(crate) fn new() -> Tell {
        Tell {
            role: Arc::new(watch::channel(Role::Starting).0),
            may_write: Arc::new(watch::channel(false).0),
        }
    }

    /// Opens the gate, if this replica is still active; true if it did.
    pub(crate) fn open(&self) -> bool {
        let active = *self.role.borrow() == Role::Active;
        self.may_write.send_replace(active);
        active
    }
}

/// A status directory written only while its replica may write: the replica standing
/// by reads it when it takes over, and never writes it meanwhile (the active
/// replica's allocations are the ones kept).
pub(crate) struct GatedSink {
    /// The status directory.
    pub inner: Arc<dyn Sink>,
    /// Open while the replica may write.
    pub may_write: watch::Receiver<bool>,
}

impl GatedSink {
    fn open(&self) -> bool {
        *self.may_write.borrow()
    }
}

impl Sink for GatedSink {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn load(&self) -> std::io::Result<(State, Vec<Problem>)> {
        self.inner.load()
    }

    fn save(&self, next: &State, since: Option<&State>) -> std::io::Result<bool> {
        match self.open() {
            true => self.inner.save(next, since),
            false => Ok(false),
        }
    }

    fn fold(&self, state: &State, go_on: &dyn Fn() -> bool) -> std::io::Result<bool> {
        match self.open() {
            true => self.inner.fold(state, go_on),
            false => Ok(true),
        }
    }

    fn record_ready(
        &self,
        cnc: &str,
        zone: &str,
        outcome: &Result<Vec<String>, String>,
        now: &str,
    ) -> std::io::Result<bool> {
        match self.open() {
            true => self.inner.record_ready(cnc, zone, outcome, now),
            false => Ok(false),
        }
    }
}

/// Holds (or waits for) lock `name` on the server the cache of `reconciler` writes to
/// until `stop`, telling `role` what this replica is.
///
/// `role` is set to [`Role::Starting`] between two servers: the workers stop taking
/// keys at once.
pub(crate) async fn hold(
    reconciler: Arc<Reconciler>,
    options: ConnectOptions,
    name: String,
    role: Tell,
    stop: CancellationToken,
) {
    let cache = reconciler.cache().clone();
    loop {
        tokio::select! {
            () = cache.wait_until_ready() => {}
            () = stop.cancelled() => return,
        }
        let Some(remote) = cache.remote() else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let lock = tokio::select! {
            l = Lock::request(&remote, &options, &name) => l,
            () = stop.cancelled() => return,
        };
        match lock {
            Ok(lock) => {
                follow(&lock, &remote, &reconciler, &name, &role, &stop).await;
                set(&role, Role::Starting, &name, &remote);
            }
            Err(e) => {
                tracing::warn!(lock = %name, %remote, error = %e, "cannot ask for the lock; trying again");
                set(&role, Role::Starting, &name, &remote);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Tells `role` what `lock` (asked for on `remote`) makes this replica, until the lock
/// is lost, the cache writes to another server, or `stop`.
async fn follow(
    lock: &Lock,
    remote: &Remote,
    reconciler: &Reconciler,
    name: &str,
    role: &Tell,
    stop: &CancellationToken,
) {
    loop {
        let now = match lock.state() {
            LockState::Held => Role::Active,
            LockState::Waiting => Role::Standby,
            LockState::Lost => return,
        };
        let cache = reconciler.cache();
        if cache.remote().as_ref() != Some(remote) {
            tracing::info!(lock = %name, %remote, "the NB's writer moved: asking for the lock there");
            return;
        }
        set(role, now, name, remote);
        tokio::select! {
            _ = lock.wait_held(), if now == Role::Standby => {}
            () = lock.lost(), if now == Role::Active => {}
            // At once: the writes go elsewhere now, the lock held here says nothing.
            () = cache.wait_left(remote) => {}
            () = stop.cancelled() => return,
        }
    }
}

/// Sets `role` to `now`, saying so in the log when it changes.
fn set(tell: &Tell, now: Role, name: &str, remote: &Remote) {
    if now != Role::Active {
        tell.may_write.send_replace(false);
    }
    let before = tell.role.send_replace(now);
    if before != now {
        match now {
            Role::Active => {
                tracing::info!(lock = %name, %remote, "active: this replica holds the lock and writes")
            }
            Role::Standby => {
                tracing::info!(lock = %name, %remote, "standby: another replica holds the lock")
            }
            Role::Starting => {
                tracing::info!(lock = %name, %remote, "not active: the lock is being asked for again")
            }
        }
    }
}
