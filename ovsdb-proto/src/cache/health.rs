//! Whether a server may be used: what its `_Server.Database` row says (clustered,
//! connected, leader, raft index, cluster id), weighed against what the cache has
//! seen. Pure functions, no I/O.

use uuid::Uuid;

use super::UnusableReason;
use crate::datum::{Atom, Datum};

/// Why a server may not be used: the reason a program matches, and the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Refusal {
    pub(super) reason: UnusableReason,
    pub(super) why: String,
}

impl Refusal {
    fn new(reason: UnusableReason, why: impl Into<String>) -> Refusal {
        Refusal {
            reason,
            why: why.into(),
        }
    }
}

/// The server's view of the database, from `_Server.Database`.
#[derive(Debug, Default)]
pub(super) struct ServerState {
    pub(super) clustered: bool,
    pub(super) connected: bool,
    pub(super) leader: bool,
    pub(super) index: Option<i64>,
    /// The cluster id, once the server knows it.
    pub(super) cid: Option<Uuid>,
}

impl ServerState {
    pub(super) fn from_row(row: &crate::datum::Row) -> ServerState {
        let boolean = |c: &str| {
            matches!(
                row.get(c).and_then(Datum::as_scalar),
                Some(Atom::Boolean(true))
            )
        };
        ServerState {
            clustered: row
                .get("model")
                .and_then(Datum::as_scalar)
                .and_then(Atom::as_str)
                == Some("clustered"),
            connected: boolean("connected"),
            leader: boolean("leader"),
            index: row
                .get("index")
                .and_then(Datum::as_scalar)
                .and_then(Atom::as_integer),
            cid: match row.get("cid").and_then(Datum::as_scalar) {
                Some(Atom::Uuid(u)) => Some(*u),
                _ => None,
            },
        }
    }

    /// Why this server cannot be used, if it cannot.
    pub(super) fn refuse(&self, leader_only: bool, seen_index: i64) -> Option<Refusal> {
        if !self.clustered {
            return None;
        }
        if !self.connected {
            Some(Refusal::new(
                UnusableReason::NotConnectedToCluster,
                "not connected to its cluster",
            ))
        } else if leader_only && !self.leader {
            Some(Refusal::new(
                UnusableReason::NotLeader,
                "not the cluster leader",
            ))
        } else if self.index.unwrap_or(0) < seen_index {
            Some(Refusal::new(
                UnusableReason::Behind,
                format!(
                    "its raft index {} is behind the {seen_index} already seen",
                    self.index.unwrap_or(0)
                ),
            ))
        } else {
            None
        }
    }
}

/// The highest raft index the cache has seen, and the cluster it belongs to: a server
/// behind it has missed writes the cache already shows, and is refused. An index is
/// trusted only from a server the cache then synced with (as the C IDL does): a
/// member that claims a huge index and serves nothing cannot make every real member
/// look behind.
#[derive(Debug, Default)]
pub(super) struct RaftSeen {
    index: i64,
    cluster: Option<Uuid>,
    /// The index of the server admitted last, until the cache syncs with it.
    pending: Option<i64>,
    /// True when the last server refused was refused only for being behind.
    refused_behind: bool,
}

impl RaftSeen {
    /// Whether a server in `state` may be used (`Err` says why not); when it may, its
    /// index is recorded. `caught_up` asks that its index be at least the one seen (when
    /// choosing a server; a server already in use that reports a lower index later is
    /// not refused for it). A server of another cluster than the one the index was seen
    /// on (rebuilt from scratch) starts the count over.
    pub(super) fn admit(
        &mut self,
        state: &ServerState,
        leader_only: bool,
        caught_up: bool,
    ) -> Result<(), Refusal> {
        if let Some(cid) = state.cid {
            if self.cluster.is_some_and(|c| c != cid) {
                tracing::info!(
                    old = ?self.cluster,
                    new = %cid,
                    index = self.index,
                    "cache: the cluster id changed; the raft index seen is forgotten"
                );
                self.index = 0;
            }
            self.cluster = Some(cid);
        }
        let seen = if caught_up { self.index } else { 0 };
        if let Some(why) = state.refuse(leader_only, seen) {
            self.refused_behind = state.refuse(leader_only, 0).is_none();
            return Err(why);
        }
        self.pending = state.index;
        Ok(())
    }

    /// The cache synced with (or follows) the server admitted last: its index is
    /// trusted from now on.
    pub(super) fn trust(&mut self) {
        if let Some(i) = self.pending.take() {
            self.index = self.index.max(i);
        }
    }

    /// Whether the last server refused was refused only for being behind (and
    /// forgets it).
    pub(super) fn take_refused_behind(&mut self) -> bool {
        std::mem::take(&mut self.refused_behind)
    }

    /// The highest raft index trusted.
    pub(super) fn index(&self) -> i64 {
        self.index
    }

    /// Forgets the index seen (the caller knows it is wrong).
    pub(super) fn forget(&mut self) {
        tracing::info!(
            index = self.index,
            "cache: the raft index seen is forgotten"
        );
        self.index = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(index: i64, cid: u128) -> ServerState {
        ServerState {
            clustered: true,
            connected: true,
            leader: false,
            index: Some(index),
            cid: Some(Uuid::from_u128(cid)),
        }
    }

    #[test]
    fn a_standalone_server_is_always_usable() {
        let mut seen = RaftSeen {
            index: 100,
            ..Default::default()
        };
        assert!(seen.admit(&ServerState::default(), true, true).is_ok());
    }

    #[test]
    fn a_member_must_be_connected_the_leader_when_asked_and_caught_up() {
        let mut seen = RaftSeen::default();
        let mut s = member(10, 1);
        s.connected = false;
        let e = seen.admit(&s, false, true).unwrap_err();
        assert!(e.why.contains("not connected"));
        assert_eq!(e.reason, UnusableReason::NotConnectedToCluster);
        let e = seen.admit(&member(10, 1), true, true).unwrap_err();
        assert!(e.why.contains("leader"));
        assert_eq!(e.reason, UnusableReason::NotLeader);
        assert!(!e.reason.is_fault(), "a follower skipped on purpose");
        assert!(seen.admit(&member(10, 1), false, true).is_ok());
        seen.trust();
        let e = seen.admit(&member(9, 1), false, true).unwrap_err();
        assert!(e.why.contains("raft index 9 is behind the 10"), "{e:?}");
        assert_eq!(e.reason, UnusableReason::Behind);
        // A server in use may report a lower index (a new leader's first report).
        assert!(seen.admit(&member(9, 1), false, false).is_ok());
    }

    #[test]
    fn another_cluster_starts_over_and_a_forgotten_index_admits_any() {
        let mut seen = RaftSeen::default();
        assert!(seen.admit(&member(500, 1), false, true).is_ok());
        seen.trust();
        assert!(seen.admit(&member(3, 1), false, true).is_err());
        assert!(
            seen.admit(&member(3, 2), false, true).is_ok(),
            "rebuilt cluster"
        );
        seen.trust();
        assert!(seen.admit(&member(2, 2), false, true).is_err());
        seen.forget();
        assert!(seen.admit(&member(2, 2), false, true).is_ok());
    }

    #[test]
    fn an_index_from_a_server_never_synced_with_refuses_no_one() {
        // Issue 19, item 6: a member claiming a huge index that serves nothing.
        let mut seen = RaftSeen::default();
        assert!(seen.admit(&member(10, 1), false, true).is_ok());
        seen.trust();
        assert!(seen.admit(&member(1_000_000_000, 1), false, true).is_ok());
        // Its session failed before the cache synced: not trusted.
        assert!(seen.admit(&member(11, 1), false, true).is_ok());
        seen.trust();
        let e = seen.admit(&member(10, 1), false, true).unwrap_err();
        assert!(e.why.contains("behind the 11"), "{e:?}");
    }
}
