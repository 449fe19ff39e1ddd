//! The reconcile key: a set of NB rows with one owner, written in one transaction, and
//! the order keys depend on each other in.

use crate::topology::desired::Owner;

/// A reconcile key: a set of NB rows with one owner, written in one transaction.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// The rows every network refers to (the default COPP and its meters).
    Cluster,
    /// A network's topology, by network name.
    Network(String),
    /// A ClusterNetworkConnect's own rows in the zone (its router, services, ACLs), by
    /// its name.
    Connect(String),
    /// A ClusterNetworkConnect's rows for one connected network: (CNC, network).
    ConnectNetwork(String, String),
    /// A service's load balancers on its namespace's primary network, by
    /// `namespace/name`.
    Service(String),
    /// Rows whose owner no longer exists: they are removed.
    Gone(Owner),
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Key::Cluster => f.write_str("cluster"),
            Key::Network(n) => write!(f, "network {n}"),
            Key::Connect(c) => write!(f, "connect {c}"),
            Key::ConnectNetwork(c, n) => write!(f, "connect {c} network {n}"),
            Key::Service(s) => write!(f, "service {s}"),
            Key::Gone(o) => write!(f, "gone {o}"),
        }
    }
}

impl Key {
    /// The key's place in the order keys depend on each other: the cluster rows (0)
    /// before the networks, which refer to them, and rows of owners gone (1); the
    /// networks before the services (2), whose load balancers go in the networks'
    /// groups; those before the ClusterNetworkConnects' own rows (3), which refer to
    /// the networks' routers and group the services' load balancers; those before a
    /// connect's rows for each network (4), which go on both.
    pub fn phase(&self) -> usize {
        match self {
            Key::Cluster => 0,
            Key::Network(_) | Key::Gone(_) => 1,
            Key::Service(_) => 2,
            Key::Connect(_) => 3,
            Key::ConnectNetwork(..) => 4,
        }
    }
}

/// How many phases [`Key::phase`] has.
pub const PHASES: usize = 5;
