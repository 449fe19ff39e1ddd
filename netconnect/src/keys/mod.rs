//! The reconcile keys: a set of NB rows with one owner, written in one transaction.
//! Each kind of key is one module here: the keys it makes from a [`World`], the owner
//! its rows carry and how a row's owner maps back to its key, what it builds, when it
//! is unchanged between two worlds, and which changes in the NB wake it (`Kind`).
//! This module holds [`Key`] and the loops over the kinds; the matches on [`Key`] are
//! exhaustive, so that a new kind does not compile until it is complete.
//!
//! To add a kind: a file with a unit struct implementing `Kind` and the functions
//! its [`Key`] variant dispatches to, its variant in [`Key`], its entry in `KINDS`;
//! the compiler then names every match that needs its arm.

mod cluster;
mod connect;
mod gone;
mod network;
mod pod;
mod service;
#[cfg(test)]
mod tests;
mod virtual_network;

use std::collections::BTreeSet;

use ovsdb_proto::cache::{CachedRow, Snapshot};
use ovsdb_proto::Datum;

use crate::ovnk::ownership::{is_ours, network_of_alias, Owner, Scope};
use crate::reconcile::NbIndexes;
use crate::topology::desired::{Fragments, NoFragments};
use crate::topology::{BuildError, Desired};
use crate::world::{Manage, World};

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
    /// The networking plugin's virtual network declared by an `onapNetwork`, by name.
    VirtualNetwork(String),
    /// A pod's interfaces on virtual networks, by `namespace/name`.
    Pod(String),
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
            Key::VirtualNetwork(n) => write!(f, "virtual network {n}"),
            Key::Pod(p) => write!(f, "pod {p}"),
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
            Key::Cluster => cluster::PHASE,
            Key::Network(_) => network::PHASE,
            Key::VirtualNetwork(_) => virtual_network::PHASE,
            Key::Pod(_) => pod::PHASE,
            Key::Gone(_) => gone::PHASE,
            Key::Service(_) => service::PHASE,
            Key::Connect(_) => connect::PHASE,
            Key::ConnectNetwork(..) => connect::NETWORK_PHASE,
        }
    }

    /// The key's kind, as metrics and logs label it.
    pub fn kind(&self) -> &'static str {
        match self {
            Key::Cluster => "cluster",
            Key::Network(_) => "network",
            Key::Connect(_) => "connect",
            Key::ConnectNetwork(..) => "connect_network",
            Key::Service(_) => "service",
            Key::VirtualNetwork(_) => "virtual_network",
            Key::Pod(_) => "pod",
            Key::Gone(_) => "gone",
        }
    }
}

/// How many phases [`Key::phase`] has.
pub const PHASES: usize = 5;

/// A key a change in the NB wakes, and why.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Wake {
    /// The key's own rows changed (perhaps by its own transaction: the queue tells a
    /// reconcile's own changes from others').
    Own(Key),
    /// A row the key refers to or builds on changed: it looks again.
    Look(Key),
}

/// A change to a row of the NB, as the kinds read it: the row as it is now (or was
/// when deleted), and, when netconnect owns it, its owner and the key that owns it.
pub(crate) struct RowEvent<'a> {
    /// The row's table.
    pub(crate) table: &'a str,
    /// The row.
    pub(crate) row: &'a CachedRow,
    /// Its owner, when it is one netconnect writes ([`is_ours`]).
    pub(crate) owner: Option<&'a Owner>,
    /// The key that owns it then.
    pub(crate) key: Option<&'a Key>,
}

/// What each kind of key does across the kinds: the loops of this module ask every
/// kind in turn ([`KINDS`]).
trait Kind: Sync {
    /// Whether the kind's rows are written in mode `manage` (all but the connects'
    /// are OVN-Kubernetes' beside it).
    fn managed_in(&self, manage: Manage) -> bool {
        manage == Manage::All
    }

    /// True when `owner` is of the kind's type, whether the inputs define its key or
    /// not.
    fn owns(&self, owner: &Owner) -> bool;

    /// The keys of the kind `world` defines, in their order.
    fn keys(&self, world: &World) -> Vec<Key>;

    /// The keys of the kind in `now` that may write something other than what they
    /// wrote against `previous` (all of them unless the kind tells).
    fn changed(&self, _previous: &World, now: &World) -> Vec<Key> {
        self.keys(now)
    }

    /// Every owner whose rows the kind's keys write in `world`.
    fn owners(&self, world: &World) -> Vec<Owner>;

    /// The key of a row of `owner` whose `external_ids` are `ids`, when `owner` is the
    /// kind's: one of its keys, or [`Key::Gone`] for an owner of its type the inputs no
    /// longer define; `None` for another kind's owner.
    fn key_of(&self, world: &World, owner: &Owner, ids: Option<&Datum>) -> Option<Key>;

    /// The kind's keys a change wakes, beside the key that owns the row.
    fn woken(&self, _world: &World, _event: &RowEvent) -> Vec<Wake> {
        Vec::new()
    }

    /// Owners of the kind found in `snap` by rows that carry no owner stamp (a table
    /// without `external_ids`).
    fn unstamped_owners(&self, _snap: &Snapshot) -> Vec<Owner> {
        Vec::new()
    }

    /// The key that removes the rows of `owner`, gone, when `owner` is the kind's:
    /// what it claims besides its stamped rows.
    fn gone(&self, _owner: &Owner) -> Option<Desired> {
        None
    }
}

/// Every kind, in the order their keys come.
const KINDS: [&dyn Kind; 6] = [
    &cluster::Cluster,
    &network::Networks,
    &virtual_network::VirtualNetworks,
    &pod::Pods,
    &service::Services,
    &connect::Connects,
];

impl World {
    /// The kinds whose rows this world's settings write.
    fn kinds(&self) -> impl Iterator<Item = &'static dyn Kind> {
        let manage = self.settings.manage;
        KINDS.into_iter().filter(move |k| k.managed_in(manage))
    }

    /// True when rows of `owner` are netconnect's to write in this world's mode.
    pub fn manages(&self, owner: &Owner) -> bool {
        is_ours(owner) && self.kinds().any(|k| k.owns(owner))
    }

    /// The keys the inputs define: the cluster rows, then each network in name order,
    /// then the services on them, then each ClusterNetworkConnect (whose rows go on the
    /// networks'), then each connected network of each; only the connects' beside
    /// OVN-Kubernetes ([`Manage::Connects`]).
    pub fn keys(&self) -> Vec<Key> {
        self.kinds().flat_map(|k| k.keys(self)).collect()
    }

    /// The keys of this world that may write something other than what they wrote
    /// against `previous`: every key but the services and the networks whose inputs
    /// are the same. (A key whose rows someone else changed is woken by the change
    /// itself.)
    pub fn changed_since(&self, previous: &World) -> Vec<Key> {
        self.kinds()
            .flat_map(|k| k.changed(previous, self))
            .collect()
    }

    /// The key of a row of `owner` whose `external_ids` are `ids`: [`World::key_of`],
    /// except that a ClusterNetworkConnect's row for a network it connects now is that
    /// network's key's.
    pub(crate) fn key_of_row(&self, owner: &Owner, ids: &Datum) -> Key {
        self.key_with(owner, Some(ids))
    }

    /// The key whose rows carry `owner`: one of [`World::keys`], or [`Key::Gone`] when
    /// the inputs no longer define it.
    pub(crate) fn key_of(&self, owner: &Owner) -> Key {
        self.key_with(owner, None)
    }

    fn key_with(&self, owner: &Owner, ids: Option<&Datum>) -> Key {
        KINDS
            .iter()
            .find_map(|k| k.key_of(self, owner, ids))
            .unwrap_or_else(|| Key::Gone(owner.clone()))
    }

    /// Every owner whose rows a key of this world writes: exactly the owners
    /// `World::key_of` gives a key that is not [`Key::Gone`].
    pub fn owners(&self) -> &std::collections::HashSet<Owner> {
        self.owners_once().get_or_init(|| {
            self.kinds()
                .flat_map(|k| k.owners(self))
                .filter(|o| !matches!(self.key_of(o), Key::Gone(_)))
                .collect()
        })
    }

    /// True when an owner `previous` wrote rows under is no key's in this world: only
    /// then can this world leave owners gone that `previous` did not ([`World::gone_in`]
    /// need not look again otherwise: what it found after `previous` was queued then,
    /// and rows written since under an owner gone wake its key themselves).
    pub(crate) fn lost_owners_of(&self, previous: &World) -> bool {
        let now = self.owners();
        previous.owners().iter().any(|o| !now.contains(o))
    }

    /// The keys that own rows in the NB but are no longer defined, from the owners
    /// found there. Beside OVN-Kubernetes ([`Manage::Connects`]) there are none: the
    /// rows of a connect not in the manifests may be those of OVN-Kubernetes' own
    /// connect controller; they are reported ([`World::left_alone`]), never removed.
    pub fn gone<'a>(&self, owners: impl IntoIterator<Item = &'a Owner>) -> BTreeSet<Key> {
        if self.settings.manage != Manage::All {
            return BTreeSet::new();
        }
        owners
            .into_iter()
            .filter(|o| self.manages(o))
            .map(|o| self.key_of(o))
            .filter(|k| matches!(k, Key::Gone(_)))
            .collect()
    }

    /// Beside OVN-Kubernetes ([`Manage::Connects`]): the owners of rows in `snap` that
    /// the keys would remove were netconnect the NB's only writer (a connect not in the
    /// manifests), which it leaves alone. None when it is.
    pub fn left_alone(&self, snap: &Snapshot, nb: &NbIndexes) -> BTreeSet<Owner> {
        if self.settings.manage == Manage::All {
            return BTreeSet::new();
        }
        let unstamped = self.kinds().flat_map(|k| k.unstamped_owners(snap));
        nb.owners(snap)
            .into_iter()
            .cloned()
            .chain(unstamped)
            .filter(|o| self.manages(o) && matches!(self.key_of(o), Key::Gone(_)))
            .collect()
    }

    /// The keys with rows in the NB of `snap` that the inputs no longer define: owners
    /// found by their stamps, and those the kinds find by rows without stamps (a
    /// ClusterNetworkConnect's load balancer group).
    pub(crate) fn gone_in(&self, snap: &Snapshot, nb: &NbIndexes) -> BTreeSet<Key> {
        let mut gone = self.gone(nb.owners(snap));
        for kind in self.kinds() {
            gone.extend(self.gone(&kind.unstamped_owners(snap)));
        }
        gone
    }

    /// The owner and scope of a key whose rows come in fragments (a connect's rows for
    /// one network, a primary Layer3 or Layer2 network's), known before its rows are
    /// built.
    pub fn fragment_scope(&self, key: &Key) -> Option<(Owner, Scope)> {
        match key {
            Key::ConnectNetwork(cnc, net) => connect::fragment_scope(self, cnc, net),
            Key::Network(name) => network::fragment_scope(self, name),
            Key::Cluster
            | Key::Connect(_)
            | Key::Service(_)
            | Key::VirtualNetwork(_)
            | Key::Pod(_)
            | Key::Gone(_) => None,
        }
    }

    /// What `key` wants in the NB.
    pub fn desired(&self, key: &Key) -> Result<Desired, BuildError> {
        self.desired_with(key, &NoFragments)
    }

    /// What `key` wants in the NB, leaving out the fragments `known` says are in the
    /// NB as built before.
    pub fn desired_with(&self, key: &Key, known: &dyn Fragments) -> Result<Desired, BuildError> {
        let mut d = self.desired_of(key, known)?;
        d.adopt = self.settings.adopt;
        Ok(d)
    }

    fn desired_of(&self, key: &Key, known: &dyn Fragments) -> Result<Desired, BuildError> {
        match key {
            Key::Cluster => Ok(cluster::desired()),
            Key::Network(name) => network::desired(self, name, known),
            Key::Connect(name) => connect::desired(self, name),
            Key::ConnectNetwork(name, net) => connect::desired_network(self, name, net, known),
            Key::Service(name) => service::desired(self, name),
            Key::VirtualNetwork(name) => virtual_network::desired(self, name),
            Key::Pod(key) => pod::desired(self, key),
            Key::Gone(owner) => Ok(KINDS
                .iter()
                .find_map(|k| k.gone(owner))
                .unwrap_or_else(|| gone::desired(owner))),
        }
    }
}

/// The keys a change to `row` of `table` wakes (the row as it is now, or as it was
/// when deleted): the key that owns it, if netconnect does, and what each kind says.
pub(crate) fn woken(world: &World, table: &str, row: &CachedRow) -> Vec<Wake> {
    let ids = row.get("external_ids");
    let stamped = ids.and_then(Owner::of);
    // A row of a network's under another of OVN-Kubernetes' owners (a cluster port
    // group, an allow-from-node ACL) is the network key's while the network is defined,
    // never a key gone's: it may be a network's OVN-Kubernetes runs.
    let network = stamped.as_ref().and_then(network_of_alias);
    let aliased = network.is_some();
    let owner = network.or(stamped).filter(|o| world.manages(o));
    let key = owner
        .as_ref()
        .map(|o| ids.map_or_else(|| world.key_of(o), |ids| world.key_of_row(o, ids)));
    let event = RowEvent {
        table,
        row,
        owner: owner.as_ref(),
        key: key.as_ref(),
    };
    let mut out: Vec<Wake> = world.kinds().flat_map(|k| k.woken(world, &event)).collect();
    // Beside OVN-Kubernetes, rows of an owner gone are left alone ([`World::gone`]).
    let removable =
        |k: &Key| !matches!(k, Key::Gone(_)) || (world.settings.manage == Manage::All && !aliased);
    out.extend(key.filter(removable).map(Wake::Own));
    out
}
