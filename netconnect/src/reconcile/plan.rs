//! What one reconcile of a key would write: the operations of its one transaction, and
//! an account of them for people (`--plan`, `--once` output, logs).

use std::fmt;
use std::sync::Arc;

use ovsdb_proto::cache::{CachedRow, IndexedRows};
use ovsdb_proto::{Operation, Uuid};

use crate::ovnk::ownership::{Owner, Scope};

/// A row's table and identity (its name, or its owner-scoped identity).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RowName {
    /// The table.
    pub table: String,
    /// The identity.
    pub(crate) identity: String,
}

impl fmt::Display for RowName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.table, self.identity)
    }
}

/// A change to a set or map column of a row the key does not own.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ForeignMutation {
    /// The row (by name, or `_uuid` when it has none).
    pub row: RowName,
    /// The column.
    pub column: String,
    /// Elements added.
    pub inserted: usize,
    /// Elements removed.
    pub deleted: usize,
}

/// A key's rows as a reconcile saw them last, to tell whether a change reported later
/// leaves a row as it was seen. The rows are held as the cache's indexes share them
/// (the reconciler's memo of the key holds the same): keeping them copies nothing; a
/// version changed since stays alive, so its address is not reused, until the key is
/// reconciled again.
#[derive(Clone)]
pub struct SeenRows(Arc<[IndexedRows]>);

impl SeenRows {
    /// The rows `rows`.
    pub fn new(rows: &[(Uuid, Arc<CachedRow>)]) -> SeenRows {
        SeenRows(Arc::new([rows.iter().cloned().collect()]))
    }

    /// The rows of a key as read in one snapshot.
    pub(crate) fn of(rows: &super::KeyRows) -> SeenRows {
        SeenRows(rows.parts().map(|p| p.rows.clone()).collect())
    }

    fn get(&self, uuid: &Uuid) -> Option<&Arc<CachedRow>> {
        self.0.iter().find_map(|p| p.get(uuid))
    }

    /// True when `row` is how the row `uuid` was seen: the same version, or one that
    /// differs from it only in columns OVN's daemons write (ovn-northd setting a
    /// port's `up` after the key wrote it is no change of the key's), or absent
    /// (deleted) and not seen.
    pub fn saw(&self, uuid: &Uuid, row: Option<&Arc<CachedRow>>) -> bool {
        match (self.get(uuid), row) {
            (Some(seen), Some(now)) => super::left::saw_as_left(seen, now),
            (None, None) => true,
            _ => false,
        }
    }

    /// How many rows were seen.
    pub fn len(&self) -> usize {
        self.0.iter().map(IndexedRows::len).sum()
    }

    /// True when the key had no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl fmt::Debug for SeenRows {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SeenRows({} rows)", self.len())
    }
}

impl PartialEq for SeenRows {
    fn eq(&self, other: &SeenRows) -> bool {
        self.len() == other.len()
            && self
                .0
                .iter()
                .flat_map(IndexedRows::iter)
                .all(|(u, r)| other.get(u).is_some_and(|o| Arc::ptr_eq(r, o)))
    }
}

/// The transaction one key needs, empty when the NB already holds what it wants.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// The key's owner.
    pub owner: Option<Owner>,
    /// Which of the owner's rows the key holds.
    pub scope: Scope,
    /// The operations, in order; empty means nothing to do.
    pub operations: Vec<Operation>,
    /// Rows inserted.
    pub inserted: Vec<RowName>,
    /// Rows updated, with the columns changed.
    pub updated: Vec<(RowName, Vec<String>)>,
    /// Rows deleted (explicitly, or by losing their last reference).
    pub deleted: Vec<RowName>,
    /// Rows another party wrote that the key takes over where they are (each is also
    /// in `updated`: its owner keys at least).
    pub adopted: Vec<RowName>,
    /// Rows another party wrote, held by the key's rows, of kinds the key writes, that
    /// the key does not want: left as they are (adopting only; see the planner's
    /// adoption).
    pub theirs: Vec<RowName>,
    /// Changes to rows the key does not own.
    pub foreign: Vec<ForeignMutation>,
    /// How many desired rows were compared with the NB.
    pub compared: usize,
    /// What the key's rows lack ([`crate::topology::Desired::incomplete`]).
    pub incomplete: Vec<String>,
    /// The wanted rows already in the NB: table, identity, uuid.
    pub existing: Vec<(&'static str, String, ovsdb_proto::Uuid)>,
    /// After [`crate::reconcile::Reconciler::apply`], when from planning until the
    /// cache showed the transaction the key's rows changed only as the transaction
    /// changed them: the rows as the cache then showed them. A change the cache
    /// reports that leaves a row as seen here was this reconcile's own (or one it
    /// planned with) and needs no second look.
    pub seen: Option<SeenRows>,
    /// The positions in `operations` of the inserts, in the order of `inserted`.
    pub inserts: Vec<usize>,
    /// After [`crate::reconcile::Reconciler::apply`] wrote them: the uuid the server
    /// gave each inserted row, in the order of `inserted`.
    pub inserted_uuids: Vec<Uuid>,
}

impl Plan {
    /// True when, from planning until the cache showed the transaction, the key's rows
    /// changed only as the transaction changed them ([`Plan::seen`]).
    pub(crate) fn only_own_changes(&self) -> bool {
        self.seen.is_some()
    }

    /// True when there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.operations.is_empty()
    }

    /// A one-line account: `+3 ~1 -2 (foreign 1)`.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "+{} ~{} -{}",
            self.inserted.len(),
            self.updated.len(),
            self.deleted.len()
        );
        if !self.adopted.is_empty() {
            s.push_str(&format!(" (adopted: {})", self.adopted.len()));
        }
        if !self.theirs.is_empty() {
            s.push_str(&format!(" (not written: {})", self.theirs.len()));
        }
        if !self.foreign.is_empty() {
            // Elements of others' sets (a port on a router another key or party owns).
            s.push_str(&format!(
                " (elements in others' rows: {})",
                self.foreign.len()
            ));
        }
        s
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(o) = &self.owner {
            writeln!(f, "{o}: {}", self.summary())?;
        }
        for r in &self.inserted {
            writeln!(f, "  insert {r}")?;
        }
        for (r, cols) in &self.updated {
            let verb = match self.adopted.contains(r) {
                true => "adopt",
                false => "update",
            };
            writeln!(f, "  {verb} {r}: {}", cols.join(", "))?;
        }
        for r in &self.deleted {
            writeln!(f, "  delete {r}")?;
        }
        for m in &self.foreign {
            writeln!(
                f,
                "  mutate {} {}: +{} -{} (not owned)",
                m.row, m.column, m.inserted, m.deleted
            )?;
        }
        for r in &self.theirs {
            writeln!(f, "  not written {r} (another party's, left as it is)")?;
        }
        for note in &self.incomplete {
            writeln!(f, "  incomplete: {note}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ovsdb_proto::cache::CachedRow;
    use ovsdb_proto::Uuid;

    use super::{Plan, SeenRows};

    #[test]
    fn a_row_was_seen_as_the_same_version_or_as_absent() {
        let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let schema = ovsdb_proto::DatabaseSchema::from_slice(include_bytes!(
            "../../../schemas/ovn-nb.ovsschema"
        ))
        .unwrap();
        let mut store =
            ovsdb_proto::cache::CacheConfig::new(vec![], "OVN_Northbound", &["Logical_Switch"])
                .store(&schema)
                .unwrap();
        // Each call a new version of one row, as the cache holds it.
        let mut row = |n: &str| -> Arc<CachedRow> {
            let mut r = ovsdb_proto::Row::new();
            r.insert("name".into(), ovsdb_proto::Datum::scalar(n));
            store.insert("Logical_Switch", a, &r).unwrap();
            store.snapshot().get("Logical_Switch", &a).unwrap()
        };
        let (ra, rb) = (row("a"), row("b"));
        let seen = SeenRows::new(&[(a, ra.clone()), (b, rb.clone())]);
        assert!(seen.saw(&a, Some(&ra)));
        assert!(
            !seen.saw(&a, Some(&row("a"))),
            "an equal row of another version"
        );
        assert!(!seen.saw(&b, None), "deleted after it was seen");
        assert!(seen.saw(&c, None), "deleted before");
        assert!(!seen.saw(&c, Some(&row("c"))), "inserted after");
        // A version dropped since is not mistaken for a new one at its address.
        drop(rb);
        let fresh: Vec<_> = (0..64).map(|i| row(&i.to_string())).collect();
        assert!(fresh.iter().all(|r| !seen.saw(&b, Some(r))));
    }

    #[test]
    fn a_port_changed_only_where_ovn_writes_was_seen() {
        let u = Uuid::from_u128(1);
        let schema = ovsdb_proto::DatabaseSchema::from_slice(include_bytes!(
            "../../../schemas/ovn-nb.ovsschema"
        ))
        .unwrap();
        let mut store = ovsdb_proto::cache::CacheConfig::new(
            vec![],
            "OVN_Northbound",
            &["Logical_Switch_Port"],
        )
        .store(&schema)
        .unwrap();
        // Each call a new version of the port, as the cache holds it.
        let mut port = |addresses: &str, up: Option<bool>| -> Arc<CachedRow> {
            let mut r = ovsdb_proto::Row::new();
            r.insert("name".into(), ovsdb_proto::Datum::scalar("p"));
            let a = ovsdb_proto::Datum::set([addresses]);
            r.insert("addresses".into(), a);
            if let Some(up) = up {
                r.insert("up".into(), ovsdb_proto::Datum::scalar(up));
            }
            store.insert("Logical_Switch_Port", u, &r).unwrap();
            store.snapshot().get("Logical_Switch_Port", &u).unwrap()
        };
        let written = port("0a:58:0a:0a:01:02 10.10.1.2", None);
        let seen = SeenRows::new(&[(u, written)]);
        assert!(
            seen.saw(&u, Some(&port("0a:58:0a:0a:01:02 10.10.1.2", Some(true)))),
            "ovn-northd set its up"
        );
        assert!(
            !seen.saw(&u, Some(&port("0a:58:0a:0a:01:03 10.10.1.3", Some(true)))),
            "another party changed its addresses"
        );
        assert!(!seen.saw(&u, None), "deleted");
    }

    #[test]
    fn what_a_key_could_not_build_is_printed_with_its_plan() {
        let plan = Plan {
            incomplete: vec!["nodes a, b share one NB".into()],
            ..Default::default()
        };
        assert_eq!(plan.to_string(), "  incomplete: nodes a, b share one NB\n");
    }
}
