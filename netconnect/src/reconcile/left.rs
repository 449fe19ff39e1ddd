//! One rule for "is this row as the key left it?", used wherever the reconciler asks:
//! by the queue, of a change the cache reports ([`super::SeenRows::saw`]); by the
//! fragment memo, of a fragment's rows before skipping it (`LeftRow::is_as_left`);
//! after a transaction, of the key's rows it changed (`changed_only_by`); and of a key
//! with nothing to write, of its rows read again after planning (`changed_only_by`
//! with no operations).
//!
//! A row is as the key left it when it is the very version the key left (or saw), or —
//! for a table with columns OVN's own daemons write ([`WRITTEN_BY_OVN`]) — a version
//! that differs from it only in those: ovn-northd sets a port's `up` after the key
//! wrote it, which is no change of the key's. A row the key's own transaction wrote may
//! also differ in the columns that transaction wrote.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};

use ovsdb_proto::cache::{CachedRow, RowChange};
use ovsdb_proto::{Datum, Operation, Uuid};

use super::rows::KeyRows;

/// Columns OVN's own daemons write; never compared or written.
pub const WRITTEN_BY_OVN: &[&str] = &["up", "dynamic_addresses", "tag", "status", "ipv6_prefix"];

/// True when `column` is one OVN's daemons write.
pub(crate) fn written_by_ovn(column: &str) -> bool {
    WRITTEN_BY_OVN.contains(&column)
}

/// True when `row`'s table has columns OVN's daemons write.
fn has_columns_ovn_writes(row: &CachedRow) -> bool {
    WRITTEN_BY_OVN.iter().any(|c| row.get(c).is_some())
}

/// `row`'s columns but those OVN's daemons write.
fn ours_columns(row: &CachedRow) -> impl Iterator<Item = (&str, &Datum)> {
    row.iter().filter(|(c, _)| !written_by_ovn(c))
}

/// A digest of `row`'s columns but those OVN's daemons write: two versions of a row
/// with one digest differ at most in those.
fn ours_digest(row: &CachedRow) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for (column, value) in ours_columns(row) {
        column.hash(&mut h);
        value.hash(&mut h);
    }
    h.finish()
}

/// True when `now` is as the key left a row it saw as `seen` (see the module's rule).
pub(crate) fn saw_as_left(seen: &Arc<CachedRow>, now: &Arc<CachedRow>) -> bool {
    Arc::ptr_eq(seen, now)
        || (has_columns_ovn_writes(seen) && ours_columns(seen).eq(ours_columns(now)))
}

/// True when `old` and `new`, versions of one row, differ at most in the columns OVN's
/// daemons write and in `written` (those a transaction of the key's wrote).
pub(crate) fn changed_only_in(old: &CachedRow, new: &CachedRow, written: &[&str]) -> bool {
    let compared = |c: &str| !written.contains(&c) && !written_by_ovn(c);
    old.changed_columns(new, compared).next().is_none()
}

/// True when `row` is the very version `held` refers to.
pub(crate) fn is_version(row: &Arc<CachedRow>, held: &Weak<CachedRow>) -> bool {
    std::ptr::eq(Arc::as_ptr(row), held.as_ptr())
}

/// A row as the key left it, held weakly (the fragment memo's form): a version replaced
/// since is not kept alive, and its address is not reused while held; for a table with
/// columns OVN's daemons write, a digest of its other columns.
#[derive(Debug, Clone)]
pub(crate) struct LeftRow {
    /// Its table.
    pub(crate) table: &'static str,
    /// Its address.
    pub(crate) uuid: Uuid,
    row: Weak<CachedRow>,
    ours: Option<u64>,
}

impl LeftRow {
    /// Row `row` (`uuid` of `table`) as the key left it.
    pub(crate) fn new(table: &'static str, uuid: Uuid, row: &Arc<CachedRow>) -> LeftRow {
        LeftRow {
            table,
            uuid,
            row: Arc::downgrade(row),
            ours: has_columns_ovn_writes(row).then(|| ours_digest(row)),
        }
    }

    /// True when `now` is as the key left this row (see the module's rule).
    pub(crate) fn is_as_left(&self, now: &Arc<CachedRow>) -> bool {
        is_version(now, &self.row) || self.ours.is_some_and(|d| ours_digest(now) == d)
    }
}

/// True when the key's rows went from `before` to `after` (both in uuid order) only by
/// the operations `ops` (whose results are `results`): every row new is one they
/// inserted, every row changed is one they updated or mutated by uuid and changed only
/// in the columns they wrote, and no more rows are gone than the plan deleted
/// (explicitly or by dropping their last reference: `deleted`). What another party
/// wrote meanwhile (while the transaction was in flight) to a row the operations
/// inserted, or to a column they wrote, is not told from their own writes.
pub(crate) fn changed_only_by(
    before: &KeyRows,
    after: &KeyRows,
    ops: &[Operation],
    results: &[ovsdb_proto::OperationResult],
    deleted: usize,
) -> bool {
    let mut inserted: HashSet<Uuid> = HashSet::new();
    // The columns written, by row.
    let mut written: HashMap<Uuid, Vec<&str>> = HashMap::new();
    for (op, r) in ops.iter().zip(results) {
        let (conditions, columns): (_, Vec<&str>) = match op {
            Operation::Insert { .. } => {
                inserted.extend(r.uuid());
                continue;
            }
            Operation::Update {
                conditions, row, ..
            } => (conditions, row.keys().map(String::as_str).collect()),
            Operation::Mutate {
                conditions,
                mutations,
                ..
            } => (
                conditions,
                mutations.iter().map(|m| m.column.as_str()).collect(),
            ),
            _ => continue,
        };
        for uuid in conditions
            .iter()
            .filter(|c| c.column == "_uuid")
            .filter_map(|c| c.value.as_scalar().and_then(ovsdb_proto::Atom::as_uuid))
        {
            written.entry(uuid).or_default().extend(&columns);
        }
    }
    let mut gone = 0;
    // Only the columns not written are compared (the cluster router's sets are
    // mutated on every node added), and not those OVN writes (which no plan compares
    // either); another row is changed only if its versions differ.
    for change in before.versions_changed(after) {
        match change {
            RowChange::Added(u, _) if !inserted.contains(u) => return false,
            RowChange::Changed { uuid, old, new } => {
                let ours = written.get(uuid).map_or(&[][..], Vec::as_slice);
                if !changed_only_in(old, new, ours) {
                    return false;
                }
            }
            RowChange::Added(..) => {}
            RowChange::Removed(..) => gone += 1,
        }
    }
    gone <= deleted
}

#[cfg(test)]
mod tests {
    use super::*;
    use ovsdb_proto::cache::{CacheConfig, Store};
    use ovsdb_proto::{DatabaseSchema, Row};

    /// Rows held as the cache holds them: written to a store of the NB.
    struct Rows {
        store: Store,
    }

    impl Rows {
        fn new() -> Rows {
            let schema =
                DatabaseSchema::from_slice(include_bytes!("../../../schemas/ovn-nb.ovsschema"))
                    .expect("the NB schema");
            let mut config = CacheConfig::new(vec![], "OVN_Northbound", &[]);
            super::super::nb::NbIndexes::register(&mut config);
            Rows {
                store: config.store(&schema).expect("a store"),
            }
        }

        /// A version of row `uuid` of `table` with `columns` (the others default).
        fn version(
            &mut self,
            table: &str,
            uuid: u128,
            columns: &[(&str, Datum)],
        ) -> Arc<CachedRow> {
            let row: Row = columns
                .iter()
                .map(|(c, v)| ((*c).to_owned(), v.clone()))
                .collect();
            let uuid = Uuid::from_u128(uuid);
            self.store.insert(table, uuid, &row).unwrap();
            self.store.snapshot().get(table, &uuid).unwrap()
        }

        /// A port with `addresses` and `up`.
        fn port(&mut self, addresses: &str, up: bool) -> Arc<CachedRow> {
            let columns = [
                ("name", Datum::scalar("p1")),
                ("addresses", Datum::scalar(addresses)),
                ("up", Datum::scalar(up)),
            ];
            self.version("Logical_Switch_Port", 1, &columns)
        }
    }

    #[test]
    fn a_row_is_as_left_as_the_same_version_or_changed_only_where_ovn_writes() {
        let mut rows = Rows::new();
        let port = rows.port("router", false);
        let held = LeftRow::new("Logical_Switch_Port", Uuid::from_u128(1), &port);
        let up = rows.port("router", true);
        let equal = rows.port("router", false);
        let moved = rows.port("0a:58:0a:00:00:05", false);
        for (now, as_left, what) in [
            (&port, true, "the version left"),
            (&up, true, "northd set up"),
            (&equal, true, "an equal version"),
            (&moved, false, "its addresses changed"),
        ] {
            assert_eq!(saw_as_left(&port, now), as_left, "seen: {what}");
            assert_eq!(held.is_as_left(now), as_left, "held: {what}");
        }
        // A table without columns OVN writes: only the version counts.
        let name = [("name", Datum::scalar("sw"))];
        let switch = rows.version("Logical_Switch", 2, &name);
        let held_switch = LeftRow::new("Logical_Switch", Uuid::from_u128(2), &switch);
        let again = rows.version("Logical_Switch", 2, &name);
        for (now, as_left, what) in [
            (&switch, true, "the version"),
            (&again, false, "another version"),
        ] {
            assert_eq!(saw_as_left(&switch, now), as_left, "seen: {what}");
            assert_eq!(held_switch.is_as_left(now), as_left, "held: {what}");
        }
    }

    #[test]
    fn a_row_the_key_wrote_may_differ_in_the_columns_it_wrote_and_those_ovn_writes() {
        let mut rows = Rows::new();
        let old = rows.port("router", false);
        let new = rows.port("0a:58:0a:00:00:05", true);
        assert!(changed_only_in(&old, &new, &["addresses"]));
        assert!(!changed_only_in(&old, &new, &[]));
        assert!(!changed_only_in(&old, &new, &["name"]));
        assert!(changed_only_in(&old, &old, &[]));
    }

    #[test]
    fn the_held_form_and_the_seen_form_agree() {
        // Random versions of a port (two of whose columns OVN writes): whether one is
        // as another left it is the same whichever form the first is held in.
        let mut next = crate::testing::random(0x5eed_1eff);
        let mut rows = Rows::new();
        let mut random_port = |next: &mut dyn FnMut(u64) -> u64| {
            let pick = |v: u64| ["a", "b"][v as usize];
            let columns = [
                ("name", Datum::scalar(pick(next(2)))),
                ("addresses", Datum::scalar(pick(next(2)))),
                ("up", Datum::scalar(next(2) == 0)),
                ("tag", Datum::Set([].into_iter().collect())),
                ("type", Datum::scalar(["", "router"][next(2) as usize])),
            ];
            rows.version("Logical_Switch_Port", next(3).into(), &columns)
        };
        let mut as_left = 0;
        for _ in 0..2000 {
            let (a, b) = (random_port(&mut next), random_port(&mut next));
            let held = LeftRow::new("Logical_Switch_Port", Uuid::nil(), &a);
            assert_eq!(saw_as_left(&a, &b), held.is_as_left(&b), "{a:?} {b:?}");
            as_left += usize::from(saw_as_left(&a, &b));
        }
        assert!(as_left > 50, "{as_left} pairs as left");
    }

    #[test]
    fn two_reads_of_a_keys_rows_changed_by_no_operation_differ_only_in_what_ovn_writes() {
        use crate::ovnk::ownership::Owner;
        use crate::reconcile::testing::Nb;
        use crate::topology::Desired;
        use nb_model::{LogicalSwitch, LogicalSwitchPort};
        let mut d = Desired::new(Owner {
            controller: "red-network-controller".into(),
            kind: "ClusterUserDefinedNetwork".into(),
            name: "red".into(),
        });
        let port = d.add(
            "port",
            LogicalSwitchPort {
                name: "red-port".into(),
                addresses: ["router".to_string()].into(),
                ..Default::default()
            },
        );
        let mut switch = LogicalSwitch::named("red-switch");
        switch.ports = [port].into();
        d.add("switch", switch);
        let mut nb = Nb::new();
        let uuids = nb.write(&d);
        let uuid = |name: &str, table: &str| uuids[&d.row(table, name).unwrap().placeholder];
        let read = |nb: &Nb| {
            let snap = nb.store.snapshot();
            KeyRows::read(&snap, &nb.indexes, &d.owner, &d.scope)
        };
        // Changed by no operation of the key's (a key with nothing to write).
        let same = |before: &KeyRows, after: &KeyRows| changed_only_by(before, after, &[], &[], 0);
        let first = read(&nb);
        assert_eq!(first.iter().count(), 2, "the key's switch and port");
        // ovn-northd sets the port up: the same rows.
        nb.set(
            "Logical_Switch_Port",
            uuid("port", "Logical_Switch_Port"),
            "up",
            Datum::scalar(true),
        );
        let up = read(&nb);
        assert!(same(&first, &up));
        assert!(same(&first, &first));
        // Another party changes the switch: not the same.
        let config = Datum::map([("mcast_snoop", "true")]);
        let switch = uuid("switch", "Logical_Switch");
        nb.set("Logical_Switch", switch, "other_config", config);
        assert!(!same(&up, &read(&nb)));
        // A row gone or a row come: not the same.
        let changed = read(&nb);
        nb.store
            .delete("Logical_Switch_Port", uuid("port", "Logical_Switch_Port"))
            .unwrap();
        let gone = read(&nb);
        assert_eq!(gone.iter().count(), 1);
        assert!(!same(&changed, &gone));
        assert!(!same(&gone, &changed));
    }
}
