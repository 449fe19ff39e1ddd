//! A dry run (`--plan`): every key planned in turn against a copy of the NB, and each
//! plan then carried out on the copy, so that a key planned after another sees what
//! the first would have written. Over an empty NB the cluster rows are planned, then
//! the networks that refer to them, then the connects that join the networks' routers:
//! every row netconnect would write, none of it written.
//!
//! The copy is a cache's store ([`ovsdb_proto::cache::Store`]) filled from a snapshot.
//! A plan's operations are carried out as ovsdb-server would for the shapes the
//! planner makes (an insert, and an update, mutation or delete of one row by `_uuid`);
//! another shape is an error. Rows that lose their last reference are not collected:
//! the keys planned later look rows up by name and owner, which a leftover child does
//! not change.

use std::collections::HashMap;
use std::sync::Arc;

use ovsdb_proto::cache::{CacheConfig, Snapshot, Store};
use ovsdb_proto::{Atom, Condition, DatabaseSchema, Datum, Function, Mutation, Mutator};
use ovsdb_proto::{Operation, Row, Uuid};

use super::nb::NbIndexes;
use super::plan::Plan;
use super::planner::{PlanError, Planner};
use crate::topology::Desired;

/// Why a dry run could not go on.
#[derive(Debug, thiserror::Error)]
pub enum DryRunError {
    /// The key could not be planned.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The copy of the NB could not take the plan (a shape the dry run does not carry
    /// out, or a value the schema refuses).
    #[error("the dry run cannot carry out the plan: {0}")]
    Apply(String),
}

/// A copy of the NB that plans are carried out on.
pub struct DryRun {
    store: Store,
    indexes: NbIndexes,
    planner: Planner,
    /// The uuids given to inserted rows so far.
    inserted: u128,
}

impl DryRun {
    /// A copy of `snap`, an NB with `schema`.
    pub fn of(snap: &Snapshot, schema: Arc<DatabaseSchema>) -> Result<DryRun, DryRunError> {
        let mut config = CacheConfig::new(vec![], "OVN_Northbound", &[]);
        let indexes = NbIndexes::register(&mut config);
        let mut store = config.store(&schema).map_err(apply_error)?;
        let cached: HashMap<String, Vec<String>> = store
            .tables()
            .into_iter()
            .map(|(t, cs)| (t.to_owned(), cs.into_iter().map(str::to_owned).collect()))
            .collect();
        for table in snap.tables() {
            let Some(columns) = cached.get(table) else {
                continue;
            };
            let rows: Vec<(Uuid, Row)> = snap
                .table(table)
                .iter()
                .map(|(uuid, row)| {
                    let mut row = row.to_row();
                    row.retain(|c, _| columns.contains(c));
                    (*uuid, row)
                })
                .collect();
            for (uuid, row) in rows {
                store.insert(table, uuid, &row).map_err(apply_error)?;
            }
        }
        Ok(DryRun {
            store,
            indexes,
            planner: Planner::new(schema),
            inserted: 0,
        })
    }

    /// The plan of `desired` against the copy as the keys planned before left it; the
    /// plan is then carried out on the copy.
    pub fn plan(&mut self, desired: &Desired) -> Result<Plan, DryRunError> {
        let mut plan = self
            .planner
            .plan(desired, &self.store.snapshot(), &self.indexes)?;
        plan.incomplete = desired.incomplete.clone();
        self.carry_out(&plan.operations)?;
        Ok(plan)
    }

    /// The copy as the plans so far left it.
    #[cfg(test)]
    pub(crate) fn snapshot(&self) -> Arc<Snapshot> {
        self.store.snapshot()
    }

    /// Carries out `operations` (one transaction) on the copy.
    fn carry_out(&mut self, operations: &[Operation]) -> Result<(), DryRunError> {
        // The inserts' uuids first: a row may refer to one inserted after it.
        let mut named: HashMap<String, Uuid> = HashMap::new();
        for op in operations {
            if let Operation::Insert {
                uuid_name: Some(name),
                ..
            } = op
            {
                self.inserted += 1;
                // Version-4-shaped, from a counter: apart from any server's.
                let uuid = Uuid::from_u128((0xd1_u128 << 120) | self.inserted);
                named.insert(name.clone(), uuid);
            }
        }
        for op in operations {
            self.operation(op, &named)?;
        }
        Ok(())
    }

    fn operation(
        &mut self,
        op: &Operation,
        named: &HashMap<String, Uuid>,
    ) -> Result<(), DryRunError> {
        match op {
            Operation::Insert {
                table,
                row,
                uuid_name,
            } => {
                let uuid = match uuid_name {
                    Some(n) => named[n],
                    None => {
                        self.inserted += 1;
                        Uuid::from_u128((0xd1_u128 << 120) | self.inserted)
                    }
                };
                let row = resolve_row(row, named)?;
                self.store.insert(table, uuid, &row).map_err(apply_error)
            }
            Operation::Update {
                table,
                conditions,
                row,
            } => {
                let uuid = by_uuid(conditions)?;
                let mut now = self.row(table, uuid)?;
                for (column, value) in resolve_row(row, named)? {
                    now.insert(column, value);
                }
                self.store.insert(table, uuid, &now).map_err(apply_error)
            }
            Operation::Mutate {
                table,
                conditions,
                mutations,
            } => {
                let uuid = by_uuid(conditions)?;
                let mut now = self.row(table, uuid)?;
                for m in mutations {
                    let value = resolve(&m.value, named)?;
                    let column = now.entry(m.column.clone()).or_insert_with(Datum::empty);
                    *column = mutate(column, m, &value)?;
                }
                self.store.insert(table, uuid, &now).map_err(apply_error)
            }
            Operation::Delete { table, conditions } => {
                let uuid = by_uuid(conditions)?;
                self.store.delete(table, uuid).map_err(apply_error)
            }
            Operation::Comment(_) | Operation::Wait { .. } | Operation::Select { .. } => Ok(()),
            other => Err(DryRunError::Apply(format!("{other:?}"))),
        }
    }

    /// Row `uuid` of `table` as the copy holds it.
    fn row(&self, table: &str, uuid: Uuid) -> Result<Row, DryRunError> {
        self.store
            .snapshot()
            .get(table, &uuid)
            .map(|r| r.to_row())
            .ok_or_else(|| DryRunError::Apply(format!("{table} {uuid} is not in the NB")))
    }
}

fn apply_error(e: ovsdb_proto::Error) -> DryRunError {
    DryRunError::Apply(e.to_string())
}

/// The uuid of the one row `conditions` select (`_uuid == <uuid>`, the planner's only
/// shape).
fn by_uuid(conditions: &[Condition]) -> Result<Uuid, DryRunError> {
    match conditions {
        [c] if c.column == "_uuid" && c.function == Function::Eq => match c.value.as_scalar() {
            Some(Atom::Uuid(u)) => Ok(*u),
            _ => Err(DryRunError::Apply(format!("a condition on {:?}", c.value))),
        },
        _ => Err(DryRunError::Apply(format!(
            "conditions other than one _uuid: {conditions:?}"
        ))),
    }
}

fn resolve_row(row: &Row, named: &HashMap<String, Uuid>) -> Result<Row, DryRunError> {
    row.iter()
        .map(|(c, v)| Ok((c.clone(), resolve(v, named)?)))
        .collect()
}

/// `value` with each named uuid replaced by the uuid its insert got.
fn resolve(value: &Datum, named: &HashMap<String, Uuid>) -> Result<Datum, DryRunError> {
    let atom = |a: &Atom| match a {
        Atom::NamedUuid(n) => named
            .get(&**n)
            .map(|u| Atom::Uuid(*u))
            .ok_or_else(|| DryRunError::Apply(format!("no insert named {n}"))),
        a => Ok(a.clone()),
    };
    Ok(match value {
        Datum::Set(s) => Datum::set(s.iter().map(atom).collect::<Result<Vec<_>, _>>()?),
        Datum::Map(m) => Datum::map(
            m.iter()
                .map(|(k, v)| Ok((atom(k)?, atom(v)?)))
                .collect::<Result<Vec<_>, DryRunError>>()?,
        ),
    })
}

/// `column` after mutation `m` with (resolved) `value`: elements inserted into or
/// deleted from a set; pairs inserted into a map (a key present keeps its value), or
/// deleted by key (a set) or by pair (a map).
fn mutate(column: &Datum, m: &Mutation, value: &Datum) -> Result<Datum, DryRunError> {
    let pairs = |d: &Datum| match d {
        Datum::Map(p) => p.to_vec(),
        Datum::Set(_) => Vec::new(),
    };
    Ok(match (m.mutator, value) {
        (Mutator::Insert, Datum::Set(add)) => Datum::set(
            column
                .as_set()
                .unwrap_or_default()
                .iter()
                .chain(add.iter())
                .cloned(),
        ),
        (Mutator::Insert, Datum::Map(add)) => {
            let mut now = pairs(column);
            for (k, v) in add.iter() {
                if !now.iter().any(|(n, _)| n == k) {
                    now.push((k.clone(), v.clone()));
                }
            }
            Datum::map(now)
        }
        (Mutator::Delete, Datum::Set(gone)) => match column {
            Datum::Set(s) => Datum::set(s.iter().filter(|a| !gone.contains(a)).cloned()),
            Datum::Map(p) => Datum::map(p.iter().filter(|(k, _)| !gone.contains(k)).cloned()),
        },
        (Mutator::Delete, Datum::Map(gone)) => {
            Datum::map(pairs(column).into_iter().filter(|p| !gone.contains(p)))
        }
        (other, _) => {
            return Err(DryRunError::Apply(format!(
                "mutator {} on {}",
                other.as_str(),
                m.column
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(mutator: Mutator, value: Datum) -> (Mutation, Datum) {
        (Mutation::new("c", mutator, value.clone()), value)
    }

    #[test]
    fn mutations_do_what_ovsdb_server_does_with_them() {
        let set = Datum::set(["a", "b"]);
        let (ins, v) = m(Mutator::Insert, Datum::set(["b", "c"]));
        assert_eq!(mutate(&set, &ins, &v).unwrap(), Datum::set(["a", "b", "c"]));
        let (del, v) = m(Mutator::Delete, Datum::set(["a", "z"]));
        assert_eq!(mutate(&set, &del, &v).unwrap(), Datum::set(["b"]));
        // A map: a key already there keeps its value; delete by key or by pair.
        let map = Datum::map([("k", "1"), ("l", "2")]);
        let (ins, v) = m(Mutator::Insert, Datum::map([("k", "9"), ("n", "3")]));
        assert_eq!(
            mutate(&map, &ins, &v).unwrap(),
            Datum::map([("k", "1"), ("l", "2"), ("n", "3")])
        );
        let (del, v) = m(Mutator::Delete, Datum::set(["k"]));
        assert_eq!(mutate(&map, &del, &v).unwrap(), Datum::map([("l", "2")]));
        let (del, v) = m(Mutator::Delete, Datum::map([("k", "9"), ("l", "2")]));
        assert_eq!(mutate(&map, &del, &v).unwrap(), Datum::map([("k", "1")]));
        // An empty optional column takes a map's pairs.
        let (ins, v) = m(Mutator::Insert, Datum::map([("k", "1")]));
        assert_eq!(
            mutate(&Datum::empty(), &ins, &v).unwrap(),
            Datum::map([("k", "1")])
        );
        let (add, v) = m(Mutator::Add, Datum::scalar(1));
        assert!(mutate(&Datum::scalar(1), &add, &v).is_err());
    }

    #[test]
    fn only_one_row_by_uuid_is_selected() {
        let u = Uuid::from_u128(7);
        assert_eq!(by_uuid(&[Condition::uuid(u)]).unwrap(), u);
        let by_name = Condition::new("name", Function::Eq, Datum::scalar("a"));
        assert!(by_uuid(&[by_name]).is_err());
        assert!(by_uuid(&[]).is_err());
    }

    #[test]
    fn named_uuids_resolve_to_their_inserts_and_an_unknown_name_is_an_error() {
        let named: HashMap<String, Uuid> = [("row1".to_owned(), Uuid::from_u128(5))].into();
        let d = Datum::set([
            Atom::NamedUuid("row1".into()),
            Atom::Uuid(Uuid::from_u128(6)),
        ]);
        assert_eq!(
            resolve(&d, &named).unwrap(),
            Datum::set([
                Atom::Uuid(Uuid::from_u128(5)),
                Atom::Uuid(Uuid::from_u128(6))
            ])
        );
        assert!(resolve(&Datum::named_uuid("other"), &named).is_err());
    }
}
