//! Read-your-writes: what a committed transaction must look like in the cache before a
//! reader can trust the cache to show it.
//!
//! From the operations and their results: an inserted row exists; a row updated by
//! `_uuid` holds the values written (in the columns the cache monitors); a row mutated
//! by `_uuid` holds the set elements and map keys inserted and lacks those deleted; a
//! row deleted by `_uuid` is gone; after a delete whose conditions are all `==` on
//! columns (`name == "sw0"`, the usual way to delete what one made), no row of the
//! table matches them. Other operations selecting rows by other conditions cannot be
//! checked without reading the server, and are not.
//!
//! Two answers come without waiting. An update, mutation or delete by `_uuid` that the
//! server counted 0 rows for (another client deleted the row first) left nothing to
//! show: nothing is expected of it, and the caller has the count. And a row the
//! transaction updated or mutated that is gone from the cache, when the cache held it
//! before the transaction was sent ([`Expected::since`]), was deleted after it by
//! someone else (the server found it, so the delete came later, and the cache applies
//! the server's changes in order): the transaction's effect was shown and overtaken.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::datum::{Atom, Datum};
use crate::ops::{Condition, Function, Mutator, Operation, OperationResult};

use super::Snapshot;

/// One thing the cache must show.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Expect {
    /// The row exists.
    Exists { table: String, uuid: Uuid },
    /// The row is gone.
    Gone { table: String, uuid: Uuid },
    /// The row's column holds this value (or the row is gone since, when `known`:
    /// the cache held it before the transaction was sent).
    Column {
        table: String,
        uuid: Uuid,
        column: String,
        value: Datum,
        known: bool,
    },
    /// No row of the table holds all these column values.
    NoneMatch {
        table: String,
        equal: Vec<(String, Datum)>,
    },
    /// The row's set or map column holds (or lacks) these elements or keys (or the
    /// row is gone since, when `known`).
    Elements {
        table: String,
        uuid: Uuid,
        column: String,
        atoms: Vec<Atom>,
        present: bool,
        known: bool,
    },
    /// No row of the table holds this element in its set column (every row that held
    /// it let go of it: `mutate where column includes X: delete X`).
    NoneHolds {
        table: String,
        column: String,
        atom: Atom,
    },
}

fn by_uuid(conditions: &[Condition]) -> Option<Uuid> {
    match conditions {
        [c] if c.column == "_uuid" && c.function == Function::Eq => {
            c.value.as_scalar().and_then(Atom::as_uuid)
        }
        _ => None,
    }
}

/// The columns and values of `conditions` when every one is `column == value` (and
/// there is at least one).
fn all_equal(
    conditions: &[Condition],
    named: &BTreeMap<String, Uuid>,
) -> Option<Vec<(String, Datum)>> {
    if conditions.is_empty() {
        return None;
    }
    conditions
        .iter()
        .map(|c| match c.function {
            Function::Eq => Some((c.column.clone(), resolve(&c.value, named)?)),
            _ => None,
        })
        .collect()
}

/// Replaces named-uuids with the uuids the transaction gave them.
fn resolve(d: &Datum, named: &BTreeMap<String, Uuid>) -> Option<Datum> {
    let fix = |a: &Atom| match a {
        Atom::NamedUuid(n) => named.get(&**n).map(|u| Atom::Uuid(*u)),
        other => Some(other.clone()),
    };
    Some(match d {
        Datum::Set(s) => Datum::set(s.iter().map(fix).collect::<Option<Vec<_>>>()?),
        Datum::Map(m) => Datum::map(
            m.iter()
                .map(|(k, v)| Some((fix(k)?, fix(v)?)))
                .collect::<Option<Vec<_>>>()?,
        ),
    })
}

/// A mutation that takes element X out of `column` of every row whose `column`
/// includes X (how a row held by others' rows is let go of): afterwards no row holds
/// X there, unless another operation of the transaction puts X somewhere (then nothing
/// is expected of it).
fn let_go(
    ops: &[Operation],
    table: &str,
    conditions: &[Condition],
    mutations: &[crate::ops::Mutation],
) -> Option<Expect> {
    let [c] = conditions else { return None };
    if c.function != Function::Includes {
        return None;
    }
    let atom = c.value.as_scalar()?.clone();
    let deleted = mutations.iter().any(|m| {
        m.column == c.column
            && m.mutator == Mutator::Delete
            && matches!(&m.value, Datum::Set(set) if set.contains(&atom))
    });
    let put = |d: &Datum| match d {
        Datum::Set(set) => set.contains(&atom),
        Datum::Map(pairs) => pairs.iter().any(|(k, v)| *k == atom || *v == atom),
    };
    let put_elsewhere = ops.iter().any(|op| match op {
        Operation::Insert { row, .. } | Operation::Update { row, .. } => row.values().any(put),
        Operation::Mutate { mutations, .. } => mutations
            .iter()
            .any(|m| m.mutator != Mutator::Delete && put(&m.value)),
        _ => false,
    });
    (deleted && !put_elsewhere).then(|| Expect::NoneHolds {
        table: table.to_owned(),
        column: c.column.clone(),
        atom,
    })
}

/// What mutations of row `uuid` of `table` left: each element inserted present, each
/// deleted absent, per column; later mutations of a column win over earlier ones.
fn mutated(
    table: &str,
    uuid: Uuid,
    mutations: &[crate::ops::Mutation],
    named: &BTreeMap<String, Uuid>,
) -> Vec<Expect> {
    // The last word for each atom.
    let mut last: BTreeMap<(String, Atom), bool> = BTreeMap::new();
    for m in mutations {
        let present = match m.mutator {
            Mutator::Insert => true,
            Mutator::Delete => false,
            _ => continue,
        };
        let Some(value) = resolve(&m.value, named) else {
            continue;
        };
        let atoms: Vec<Atom> = match &value {
            Datum::Set(s) => s.to_vec(),
            // Inserted pairs: their keys are present. Deleted pairs or keys: only a key
            // deletion is sure to remove the key.
            Datum::Map(pairs) if present => pairs.iter().map(|(k, _)| k.clone()).collect(),
            Datum::Map(_) => continue,
        };
        for a in atoms {
            last.insert((m.column.clone(), a), present);
        }
    }
    let mut grouped: BTreeMap<(String, bool), Vec<Atom>> = BTreeMap::new();
    for ((column, atom), present) in last {
        grouped.entry((column, present)).or_default().push(atom);
    }
    grouped
        .into_iter()
        .map(|((column, present), atoms)| Expect::Elements {
            table: table.to_owned(),
            uuid,
            column,
            atoms,
            present,
            known: false,
        })
        .collect()
}

/// The expectations of a committed transaction.
pub(crate) fn expectations(ops: &[Operation], results: &[OperationResult]) -> Vec<Expect> {
    let named: BTreeMap<String, Uuid> = ops
        .iter()
        .zip(results)
        .filter_map(|(op, r)| match (op, r) {
            (
                Operation::Insert {
                    uuid_name: Some(n), ..
                },
                OperationResult::Insert { uuid },
            ) => Some((n.clone(), *uuid)),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    for (op, result) in ops.iter().zip(results) {
        // No row matched: nothing changed, nothing to show (the count says so).
        if result.count() == Some(0) {
            continue;
        }
        match op {
            Operation::Insert { table, .. } => {
                if let Some(uuid) = result.uuid() {
                    out.push(Expect::Exists {
                        table: table.clone(),
                        uuid,
                    });
                }
            }
            Operation::Update {
                table,
                conditions,
                row,
            } => {
                let Some(uuid) = by_uuid(conditions) else {
                    continue;
                };
                for (column, value) in row {
                    if let Some(value) = resolve(value, &named) {
                        out.push(Expect::Column {
                            table: table.clone(),
                            uuid,
                            column: column.clone(),
                            value,
                            known: false,
                        });
                    }
                }
            }
            Operation::Mutate {
                table,
                conditions,
                mutations,
            } => {
                let Some(uuid) = by_uuid(conditions) else {
                    out.extend(let_go(ops, table, conditions, mutations));
                    continue;
                };
                out.extend(mutated(table, uuid, mutations, &named));
            }
            Operation::Delete { table, conditions } => {
                if let Some(uuid) = by_uuid(conditions) {
                    out.push(Expect::Gone {
                        table: table.clone(),
                        uuid,
                    });
                } else if let Some(equal) = all_equal(conditions, &named) {
                    out.push(Expect::NoneMatch {
                        table: table.clone(),
                        equal,
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// What a committed transaction left in the database, to tell when a cache shows it
/// (see the module's rules): kept by a caller whose wait for a transaction timed out,
/// and checked again before it acts on the cache.
#[derive(Clone, Debug, PartialEq)]
pub struct Expected(Vec<Expect>);

impl Expected {
    /// What `operations` left, given the `results` the server returned for them.
    pub fn new(operations: &[Operation], results: &[OperationResult]) -> Expected {
        Expected(expectations(operations, results))
    }

    /// [`Expected::new`], knowing that `before` (contents of the cache read before the
    /// transaction was sent) held the rows it holds: such a row that the transaction
    /// updated or mutated and that is gone later was deleted after the transaction,
    /// which then needs no more waiting for.
    pub fn since(
        operations: &[Operation],
        results: &[OperationResult],
        before: &Snapshot,
    ) -> Expected {
        let mut e = expectations(operations, results);
        for x in &mut e {
            if let Expect::Column {
                table, uuid, known, ..
            }
            | Expect::Elements {
                table, uuid, known, ..
            } = x
            {
                *known = before.get(table, uuid).is_some();
            }
        }
        Expected(e)
    }

    /// True when `snapshot` shows all of it.
    pub fn shown_in(&self, snapshot: &Snapshot) -> bool {
        self.0.iter().all(|e| shown(snapshot, e))
    }

    /// Up to `n` of the things `snapshot` does not show yet, for an error message.
    pub fn missing(&self, snapshot: &Snapshot, n: usize) -> Vec<String> {
        self.0
            .iter()
            .filter(|e| !shown(snapshot, e))
            .take(n)
            .map(|e| format!("{e:?}"))
            .collect()
    }
}

/// True when the snapshot shows `e`. Tables and columns the cache does not monitor
/// count as shown.
pub(crate) fn shown(s: &Snapshot, e: &Expect) -> bool {
    let monitored = |t: &str| s.tables().any(|x| x == t);
    match e {
        Expect::Exists { table, uuid } => !monitored(table) || s.get(table, uuid).is_some(),
        Expect::Gone { table, uuid } => s.get(table, uuid).is_none(),
        // One hash lookup when the columns are one of the schema's indexes (a port's
        // name), else a scan of the table. A column the cache does not monitor
        // matches nothing: shown.
        Expect::NoneMatch { table, equal } => {
            let key: Vec<(&str, Datum)> =
                equal.iter().map(|(c, v)| (c.as_str(), v.clone())).collect();
            match s.indexed(table, &key) {
                Some(found) => found.is_none(),
                None => !s
                    .table(table)
                    .values()
                    .any(|row| equal.iter().all(|(c, v)| row.get(c) == Some(v))),
            }
        }
        Expect::Column {
            table,
            uuid,
            column,
            value,
            known,
        } => {
            if !monitored(table) {
                return true;
            }
            match s.get(table, uuid) {
                None => *known,
                Some(row) => row.get(column).is_none_or(|v| v == value),
            }
        }
        Expect::Elements {
            table,
            uuid,
            column,
            atoms,
            present,
            known,
        } => {
            if !monitored(table) {
                return true;
            }
            let Some(row) = s.get(table, uuid) else {
                return *known;
            };
            // A set is searched where it is (a large one that modifies changed is not
            // made flat); a map by its keys.
            if let Some(set) = row.set(column) {
                return atoms.iter().all(|a| set.contains(a) == *present);
            }
            let Some(v) = row.get(column) else {
                return true;
            };
            atoms.iter().all(|a| v.get(a).is_some() == *present)
        }
        // A scan of the table: only transactions that let go of rows held by others'.
        Expect::NoneHolds {
            table,
            column,
            atom,
        } => {
            !monitored(table)
                || !s
                    .table(table)
                    .values()
                    .any(|row| row.set(column).is_some_and(|set| set.contains(atom)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Mutation;

    #[test]
    fn expectations_follow_uuid_conditions_and_named_inserts() {
        let u = Uuid::from_u128(7);
        let v = Uuid::from_u128(8);
        let mut row = crate::Row::new();
        row.insert("ports".into(), Datum::named_uuid("p"));
        let ops = vec![
            Operation::insert_named("LSP", crate::Row::new(), "p"),
            Operation::Update {
                table: "LS".into(),
                conditions: vec![Condition::uuid(u)],
                row,
            },
            Operation::Mutate {
                table: "LR".into(),
                conditions: vec![Condition::uuid(u)],
                mutations: vec![
                    Mutation::new("ports", Mutator::Insert, Datum::named_uuid("p")),
                    Mutation::new("ports", Mutator::Delete, Datum::uuid(v)),
                ],
            },
            Operation::Delete {
                table: "LS".into(),
                conditions: vec![Condition::eq("name", "x")],
            },
            Operation::Delete {
                table: "LS".into(),
                conditions: vec![Condition::uuid(v)],
            },
        ];
        let results = vec![
            OperationResult::Insert { uuid: v },
            OperationResult::Count(1),
            OperationResult::Count(1),
            OperationResult::Count(1),
            OperationResult::Count(1),
        ];
        let e = expectations(&ops, &results);
        assert_eq!(e.len(), 5, "{e:?}");
        assert!(e.contains(&Expect::NoneMatch {
            table: "LS".into(),
            equal: vec![("name".into(), Datum::scalar("x"))],
        }));
        assert!(e.contains(&Expect::Column {
            table: "LS".into(),
            uuid: u,
            column: "ports".into(),
            value: Datum::uuid(v),
            known: false,
        }));
        assert!(e.contains(&Expect::Gone {
            table: "LS".into(),
            uuid: v
        }));
    }

    #[test]
    fn a_delete_by_equal_columns_waits_until_no_cached_row_matches() {
        let ops = vec![Operation::Delete {
            table: "LS".into(),
            conditions: vec![Condition::eq("name", "x")],
        }];
        let e = Expected::new(&ops, &[OperationResult::Count(1)]);
        // An empty snapshot shows it; a condition other than == is not checked.
        assert!(e.shown_in(&Snapshot::default()));
        let other = vec![Operation::Delete {
            table: "LS".into(),
            conditions: vec![Condition::new("name", Function::Ne, "x")],
        }];
        assert!(expectations(&other, &[OperationResult::Count(1)]).is_empty());
    }

    #[test]
    fn letting_go_of_a_row_held_by_others_waits_until_no_row_holds_it() {
        let x = Uuid::from_u128(9);
        let let_go = Operation::Mutate {
            table: "LR".into(),
            conditions: vec![Condition::new(
                "policies",
                Function::Includes,
                Datum::uuid(x),
            )],
            mutations: vec![Mutation::new("policies", Mutator::Delete, Datum::uuid(x))],
        };
        let e = expectations(std::slice::from_ref(&let_go), &[OperationResult::Count(2)]);
        assert_eq!(
            e,
            [Expect::NoneHolds {
                table: "LR".into(),
                column: "policies".into(),
                atom: Atom::Uuid(x),
            }]
        );
        // Put in another row by the same transaction: nothing is expected of it.
        let moved = vec![
            let_go.clone(),
            Operation::Mutate {
                table: "LR".into(),
                conditions: vec![Condition::uuid(Uuid::from_u128(1))],
                mutations: vec![Mutation::new("policies", Mutator::Insert, Datum::uuid(x))],
            },
        ];
        let results = [OperationResult::Count(1), OperationResult::Count(1)];
        assert!(!expectations(&moved, &results)
            .iter()
            .any(|e| matches!(e, Expect::NoneHolds { .. })));
        // A mutation that does not take out what its condition names expects nothing.
        let other = Operation::Mutate {
            table: "LR".into(),
            conditions: vec![Condition::new(
                "policies",
                Function::Includes,
                Datum::uuid(x),
            )],
            mutations: vec![Mutation::new(
                "policies",
                Mutator::Delete,
                Datum::uuid(Uuid::from_u128(2)),
            )],
        };
        assert!(expectations(&[other], &[OperationResult::Count(1)]).is_empty());
    }

    /// A store of one table `T` with a set column `s` of strings.
    fn store() -> crate::cache::Store {
        let schema =
            crate::DatabaseSchema::from_json(&serde_json::json!({"name": "D", "version": "1.0.0",
            "tables": {"T": {"columns": {
                "s": {"type": {"key": "string", "min": 0, "max": "unlimited"}}
            }}}}))
            .unwrap();
        crate::cache::CacheConfig::new(vec![], "D", &["T"])
            .store(&schema)
            .unwrap()
    }

    fn mutate(u: Uuid) -> Operation {
        Operation::Mutate {
            table: "T".into(),
            conditions: vec![Condition::uuid(u)],
            mutations: vec![Mutation::new("s", Mutator::Insert, Datum::set(["a"]))],
        }
    }

    #[test]
    fn a_write_the_server_counted_no_row_for_expects_nothing() {
        // Another client deleted the row first: count 0, nothing to wait for.
        let u = Uuid::from_u128(3);
        let update = Operation::Update {
            table: "T".into(),
            conditions: vec![Condition::uuid(u)],
            row: [("s".to_string(), Datum::set(["b"]))].into(),
        };
        let zero = [OperationResult::Count(0)];
        assert!(expectations(std::slice::from_ref(&update), &zero).is_empty());
        assert!(expectations(&[mutate(u)], &zero).is_empty());
        assert!(!expectations(&[mutate(u)], &[OperationResult::Count(1)]).is_empty());
    }

    #[test]
    fn a_row_gone_since_the_cache_held_it_before_the_write_was_deleted_after_it() {
        let u = Uuid::from_u128(5);
        let mut s = store();
        s.insert("T", u, &[("s".to_string(), Datum::set(["x"]))].into())
            .unwrap();
        let before = s.snapshot();
        s.delete("T", u).unwrap();
        let after = s.snapshot();
        let ops = [mutate(u)];
        let one = [OperationResult::Count(1)];
        // Held before the transaction, gone now: the mutation was shown, then overtaken.
        assert!(Expected::since(&ops, &one, &before).shown_in(&after));
        // Not held before (the cache had not caught up with the row): still waited for.
        assert!(!Expected::since(&ops, &one, &after).shown_in(&after));
        assert!(!Expected::new(&ops, &one).shown_in(&after));
        // Held and still there without the element: not shown yet.
        assert!(!Expected::since(&ops, &one, &before).shown_in(&before));
    }
}
