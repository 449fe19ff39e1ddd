//! The OVN_Northbound tables netconnect reads and writes, and the cache indexes the
//! reconciler looks rows up by: every row by its owner (the three ownership keys of
//! `external_ids`) and partition, and every named row by name.
//!
//! A row a network's controller writes under one of OVN-Kubernetes' own owners other
//! than the network's (its cluster port groups, its allow-from-node ACLs:
//! `ownership::network_of_alias`) is indexed under the network's owner,
//! in an index of its own: it is the network key's row, and gone with the network, but
//! such rows alone (OVN-Kubernetes' own networks') never make an owner netconnect
//! would remove.
//!
//! A *partition* splits one owner's rows between keys: a ClusterNetworkConnect's rows
//! for one connected network (its ports, routes and policies, which carry the network's
//! id in `network-id` or `source-network-id`) belong to that network's key, so that
//! each network is one transaction (as OVN-Kubernetes writes them) and a change for one
//! network looks at its rows only.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use ovsdb_proto::cache::{CacheConfig, CachedRow, IndexedRows, RowIndex, Snapshot};
use ovsdb_proto::{Atom, Uuid};

use crate::ovnk::ownership::{network_of_alias, partition_of};
use crate::ovnk::ownership::{Owner, Scope};

/// The tables whose rows netconnect owns or refers to.
pub const TABLES: &[&str] = &[
    "ACL",
    "Address_Set",
    "Copp",
    "Gateway_Chassis",
    "Load_Balancer",
    "Load_Balancer_Group",
    "Logical_Router",
    "Logical_Router_Policy",
    "Logical_Router_Port",
    "Logical_Router_Static_Route",
    "Logical_Switch",
    "Logical_Switch_Port",
    "Meter",
    "Meter_Band",
    "NAT",
    "Port_Group",
    "Static_MAC_Binding",
];

/// Tables without a `name` column.
const NAMELESS: &[&str] = &[
    "ACL",
    "Logical_Router_Policy",
    "Logical_Router_Static_Route",
    "Meter_Band",
    "NAT",
];

/// Tables without `external_ids`: their rows have no owner stamp.
const UNSTAMPED: &[&str] = &["Load_Balancer_Group", "Static_MAC_Binding"];

/// The sets of references keys put their rows into on rows they do not own, and
/// whose current holders the reconciler must find (to take a row out of a parent that
/// should no longer hold it): a switch's ACLs, load balancer groups and load
/// balancers, a router's load balancers.
pub(crate) const ATTACHABLE: &[(&str, &[&str])] = &[
    (
        "Logical_Switch",
        &["acls", "load_balancer_group", "load_balancer"],
    ),
    ("Logical_Router", &["load_balancer"]),
];

/// The tables whose rows a network's controller writes under another owner of
/// OVN-Kubernetes' ([`network_of_alias`]).
pub(crate) const ALIASED: &[&str] = &["ACL", "Port_Group"];

/// The tables whose rows may have a partition.
pub(crate) const PARTITIONED: &[&str] = &[
    "Logical_Router_Policy",
    "Logical_Router_Port",
    "Logical_Router_Static_Route",
];

/// The indexes the reconciler reads, declared on a cache.
///
/// Their keys are behind an `Arc`: each snapshot's change to an index copies the
/// nodes of its map on the way to the keys changed, cloning the keys they hold (a few
/// dozen per node; the name index has a key for most of the NB's rows), and an `Arc`
/// is cloned without copying the names in it.
#[derive(Clone, Debug)]
pub struct NbIndexes {
    /// Rows without a partition, by owner.
    owner: BTreeMap<&'static str, RowIndex<Arc<Owner>>>,
    /// Rows with a partition, by owner and partition.
    part: BTreeMap<&'static str, RowIndex<Arc<(Owner, String)>>>,
    /// Rows with a partition, by owner (every partition of an owner in one look-up).
    parted: BTreeMap<&'static str, RowIndex<Arc<Owner>>>,
    /// Rows of a network's written under another owner, by the network's owner.
    aliased: BTreeMap<&'static str, RowIndex<Arc<Owner>>>,
    name: BTreeMap<&'static str, RowIndex<Arc<str>>>,
    holders: BTreeMap<&'static str, RowIndex<Uuid>>,
}

fn owner_of(row: &CachedRow) -> Vec<Arc<Owner>> {
    let Some(ids) = row.get("external_ids") else {
        return Vec::new();
    };
    if partition_of(ids).is_some() {
        return Vec::new();
    }
    Owner::of(ids)
        .filter(|o| network_of_alias(o).is_none())
        .map(Arc::new)
        .into_iter()
        .collect()
}

fn aliased_owner_of(row: &CachedRow) -> Vec<Arc<Owner>> {
    row.get("external_ids")
        .and_then(Owner::of)
        .and_then(|o| network_of_alias(&o))
        .map(Arc::new)
        .into_iter()
        .collect()
}

fn parted_owner_of(row: &CachedRow) -> Vec<Arc<Owner>> {
    owner_and_partition(row)
        .map(|(o, _)| Arc::new(o))
        .into_iter()
        .collect()
}

fn part_of(row: &CachedRow) -> Vec<Arc<(Owner, String)>> {
    owner_and_partition(row).map(Arc::new).into_iter().collect()
}

/// The owner and partition of a row that has both.
fn owner_and_partition(row: &CachedRow) -> Option<(Owner, String)> {
    let ids = row.get("external_ids")?;
    Some((Owner::of(ids)?, partition_of(ids)?))
}

fn name_of(row: &CachedRow) -> Vec<Arc<str>> {
    string_column(row, "name")
        .map(|n| vec![n.into()])
        .unwrap_or_default()
}

fn string_column<'r>(row: &'r CachedRow, column: &str) -> Option<&'r str> {
    row.get(column)
        .and_then(|d| d.as_scalar())
        .and_then(Atom::as_str)
}

/// A static MAC binding is known by its port (all the bindings on a port) and by its
/// port and address, space-separated (one binding: its identity in a key).
fn binding_names(row: &CachedRow) -> Vec<Arc<str>> {
    let (Some(port), Some(ip)) = (string_column(row, "logical_port"), string_column(row, "ip"))
    else {
        return Vec::new();
    };
    vec![
        port.into(),
        crate::ovnk::ownership::binding_identity(port, ip).into(),
    ]
}

impl NbIndexes {
    /// Adds [`TABLES`] (every column) and the indexes to `config`.
    pub fn register(config: &mut CacheConfig) -> NbIndexes {
        let mut owner = BTreeMap::new();
        let mut part = BTreeMap::new();
        let mut parted = BTreeMap::new();
        let mut aliased = BTreeMap::new();
        let mut name = BTreeMap::new();
        for &table in TABLES {
            if !UNSTAMPED.contains(&table) {
                owner.insert(table, config.index(table, "owner", owner_of));
                part.insert(table, config.index(table, "part", part_of));
                if PARTITIONED.contains(&table) {
                    parted.insert(table, config.index(table, "parted", parted_owner_of));
                }
                if ALIASED.contains(&table) {
                    aliased.insert(table, config.index(table, "aliased", aliased_owner_of));
                }
            }
            if table == "Static_MAC_Binding" {
                name.insert(table, config.index(table, "name", binding_names));
            } else if !NAMELESS.contains(&table) {
                name.insert(table, config.index(table, "name", name_of));
            }
        }
        let mut holders = BTreeMap::new();
        for &(table, columns) in ATTACHABLE {
            let index = config.index(table, "holds", move |row: &CachedRow| {
                columns
                    .iter()
                    .filter_map(|c| row.set(c))
                    .flat_map(|s| s.iter().filter_map(Atom::as_uuid))
                    .collect()
            });
            holders.insert(table, index);
        }
        NbIndexes {
            owner,
            part,
            parted,
            aliased,
            name,
            holders,
        }
    }

    /// The rows of `table` (one of `ATTACHABLE`) whose attachable columns hold `child`.
    pub fn holders(
        &self,
        snap: &Snapshot,
        table: &str,
        child: &Uuid,
    ) -> Vec<(Uuid, Arc<CachedRow>)> {
        self.holders
            .get(table)
            .and_then(|i| snap.lookup_rows(i, child).ok())
            .unwrap_or_default()
    }

    /// The index entries holding exactly the rows of `owner` a key of scope `scope`
    /// holds, each with its table, in [`KeyPart::label`] order: shared with `snap`,
    /// nothing copied. A scope of the whole owner holds its rows outside partitions and
    /// in every partition; [`Scope::Part`] one partition's; [`Scope::Rest`] those
    /// outside partitions and in the partitions other keys do not hold.
    pub(crate) fn key_parts(&self, snap: &Snapshot, owner: &Owner, scope: &Scope) -> Vec<KeyPart> {
        let mut out = Vec::new();
        let mut put = |table: usize, source: PartSource, rows: Option<IndexedRows>| {
            if let Some(rows) = rows.filter(|r| !r.is_empty()) {
                out.push(KeyPart {
                    table,
                    source,
                    rows,
                });
            }
        };
        for (at, &table) in TABLES.iter().enumerate() {
            let parted = PARTITIONED.contains(&table);
            if !matches!(scope, Scope::Part(_)) {
                let rows = self
                    .owner
                    .get(table)
                    .and_then(|i| snap.indexed_rows(i, owner).ok());
                put(at, PartSource::Owner, rows);
                // After the owner's part (the aliased tables have no partitions), as
                // `PartSource::Aliased` sorts.
                let aliased = self
                    .aliased
                    .get(table)
                    .and_then(|i| snap.indexed_rows(i, owner).ok());
                put(at, PartSource::Aliased, aliased);
            }
            if !parted {
                continue;
            }
            let part = |p: &str| {
                self.part
                    .get(table)
                    .and_then(|i| snap.indexed_rows(i, &(owner.clone(), p.to_owned())).ok())
            };
            match scope {
                Scope::Part(p) => put(at, PartSource::Partition(p.clone()), part(p)),
                Scope::All => {
                    let rows = self
                        .parted
                        .get(table)
                        .and_then(|i| snap.indexed_rows(i, owner).ok());
                    put(at, PartSource::Parted, rows);
                }
                // The partitions the owner's rows are in, from the keys of the
                // partition index: the rows of held partitions are not read (a
                // connect over 500 networks holds 750k rows in them; reading them to
                // leave them out was most of its key's time).
                Scope::Rest { held } => {
                    let mut partitions: Vec<String> = self
                        .part
                        .get(table)
                        .and_then(|i| snap.index_keys(i).ok())
                        .into_iter()
                        .flatten()
                        .filter(|(k, _)| k.0 == *owner && !held.contains(&k.1))
                        .map(|(k, _)| k.1.clone())
                        .collect();
                    partitions.sort();
                    for p in partitions {
                        let rows = part(&p);
                        put(at, PartSource::Partition(p), rows);
                    }
                }
            }
        }
        out
    }

    /// The rows of `table` named `name` (a static MAC binding is named by its port, and
    /// by its port and address).
    pub fn named(&self, snap: &Snapshot, table: &str, name: &str) -> Vec<(Uuid, Arc<CachedRow>)> {
        self.name
            .get(table)
            .and_then(|i| snap.lookup_rows(i, name).ok())
            .unwrap_or_default()
    }

    /// Every owner that has rows in the snapshot, each once (read from the owner
    /// indexes' keys, not from the rows, and borrowed from the snapshot: an owner is
    /// copied only if the caller keeps it).
    pub fn owners<'a>(&self, snap: &'a Snapshot) -> HashSet<&'a Owner> {
        let indexes = self.owner.values().chain(self.parted.values());
        indexes
            .flat_map(|index| snap.index_keys(index).into_iter().flatten())
            .map(|(o, _)| &**o)
            .collect()
    }
}

/// Which index entry a [`KeyPart`] is.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum PartSource {
    /// The owner's rows outside any partition.
    Owner,
    /// The owner's rows in every partition.
    Parted,
    /// The owner's rows in one partition.
    Partition(String),
    /// The rows of the owner's network written under other owners
    /// ([`network_of_alias`]).
    Aliased,
}

/// The rows of one table of a key under one index entry, shared with the snapshot.
#[derive(Clone, Debug)]
pub(crate) struct KeyPart {
    /// The table, an index in [`TABLES`].
    pub table: usize,
    /// The entry.
    pub source: PartSource,
    /// The rows, in uuid order.
    pub rows: IndexedRows,
}

impl KeyPart {
    /// What tells the part from the key's others, the same in every read of the key.
    pub fn label(&self) -> (usize, &PartSource) {
        (self.table, &self.source)
    }
}
