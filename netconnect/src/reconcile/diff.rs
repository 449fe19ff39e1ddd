//! The difference between what one key wants and what the NB holds, as one minimal
//! transaction. The ownership rules, all here:
//!
//! - A row is the key's when its `external_ids` carry the key's owner (for a table
//!   without `external_ids`, when the key claims its name). Only such rows are
//!   inserted, updated or deleted; an update sends only the columns that differ.
//! - A set of references (a router's `ports`, a switch's `load_balancer_group`) is
//!   changed by mutation, element by element: the key adds the references it wants and
//!   removes only references to its own rows, so references other parties added stay.
//! - A row the key wants that another party already holds under the same name is a
//!   conflict: nothing is written for the key.
//! - A *shared* row (the default COPP) that another party already created is used,
//!   and what only it would have referenced is not created either.
//! - Columns OVN's daemons write (`up`, `status`, …) are never compared or written.
//! - A row no longer wanted is deleted: a root row explicitly, any other by removing the
//!   references to it (the server then collects it).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ovsdb_proto::cache::{CachedRow, Snapshot};
use ovsdb_proto::schema::{DatabaseSchema, Max, TableSchema};
use ovsdb_proto::{Atom, Condition, Datum, Function, Mutation, Mutator, Operation, Row, Uuid};

use super::nb::{NbIndexes, ATTACHABLE, TABLES};
use super::plan::{ForeignMutation, Plan, RowName};
use crate::topology::desired::{
    foreign_placeholder, parse_foreign, Desired, DesiredRow, Owner, OWNER_ID,
};

/// Columns OVN's own daemons write; never compared or written.
pub const WRITTEN_BY_OVN: &[&str] = &["up", "dynamic_addresses", "tag", "status", "ipv6_prefix"];

/// Why a key cannot be reconciled now.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The server's schema lacks a table the key writes.
    #[error("the server has no table {0}")]
    MissingTable(String),
    /// A row the key refers to by name (another key's or party's) does not exist yet.
    #[error("{table} {name} does not exist (yet)")]
    MissingDependency {
        /// The table.
        table: String,
        /// The name.
        name: String,
    },
    /// Another party holds a row of a name the key wants.
    #[error("{row} already exists and belongs to {}", owner.as_ref().map(ToString::to_string).unwrap_or_else(|| "another party (no owner recorded)".into()))]
    Conflict {
        /// The row wanted.
        row: RowName,
        /// Who holds it, if recorded.
        owner: Option<Owner>,
    },
    /// The server's schema lacks a column the key sets.
    #[error("the server's {table} has no column {column}, which this row sets")]
    Unsupported {
        /// The table.
        table: String,
        /// The column.
        column: String,
    },
}

struct Existing {
    uuid: Uuid,
    row: Arc<CachedRow>,
}

/// What the planner needs to know of one table, worked out once per schema.
struct TableInfo {
    schema: TableSchema,
    /// Columns holding sets of references (changed by mutation), sorted.
    ref_sets: Vec<String>,
    /// Columns holding any references.
    refs: Vec<String>,
    /// The [`ATTACHABLE`] tables and columns that can hold this table's rows.
    held_in: Vec<(&'static str, Vec<&'static str>)>,
}

fn table_info(schema: &DatabaseSchema) -> HashMap<String, TableInfo> {
    schema
        .tables
        .iter()
        .map(|(name, t)| {
            let mut ref_sets = Vec::new();
            let mut refs = Vec::new();
            for (c, cs) in &t.columns {
                let ty = &cs.column_type;
                if ty.key.ref_table.is_some()
                    || ty.value.as_ref().is_some_and(|v| v.ref_table.is_some())
                {
                    refs.push(c.clone());
                }
                if ty.value.is_none()
                    && ty.key.ref_table.is_some()
                    && !matches!(ty.max, Max::Limited(0 | 1))
                {
                    ref_sets.push(c.clone());
                }
            }
            let held_in = ATTACHABLE
                .iter()
                .filter_map(|&(parent, columns)| {
                    let ps = schema.tables.get(parent)?;
                    let cols: Vec<&'static str> = columns
                        .iter()
                        .copied()
                        .filter(|c| {
                            ps.columns.get(*c).is_some_and(|cs| {
                                cs.column_type.key.ref_table.as_deref() == Some(name.as_str())
                            })
                        })
                        .collect();
                    (!cols.is_empty()).then_some((parent, cols))
                })
                .collect();
            (
                name.clone(),
                TableInfo {
                    schema: t.clone(),
                    ref_sets,
                    refs,
                    held_in,
                },
            )
        })
        .collect()
}

/// The (table, column) pairs that refer to rows of `table`.
fn referrers<'a>(
    schema: &'a DatabaseSchema,
    table: &'a str,
) -> impl Iterator<Item = (&'a str, &'a str)> {
    schema.tables.values().flat_map(move |t| {
        t.columns.values().filter_map(move |c| {
            (c.column_type.key.ref_table.as_deref() == Some(table))
                .then_some((t.name.as_str(), c.name.as_str()))
        })
    })
}

fn atoms(d: &Datum) -> Box<dyn Iterator<Item = &Atom> + '_> {
    match d {
        Datum::Set(s) => Box::new(s.iter()),
        Datum::Map(m) => Box::new(m.iter().flat_map(|(k, v)| [k, v])),
    }
}

/// The placeholders a datum holds.
fn placeholders(d: &Datum) -> impl Iterator<Item = &str> {
    atoms(d).filter_map(|a| match a {
        Atom::NamedUuid(p) => Some(&**p),
        _ => None,
    })
}

/// Computes the transaction that makes the NB hold what `desired` wants.
pub fn plan(
    desired: &Desired,
    snap: &Snapshot,
    nb: &NbIndexes,
    schema: &DatabaseSchema,
) -> Result<Plan, PlanError> {
    plan_with(
        desired,
        snap,
        nb,
        schema,
        &table_info(schema),
        &HashSet::new(),
    )
}

/// What the planner knows of a schema, worked out once and used for every key.
pub struct Planner {
    schema: std::sync::Arc<DatabaseSchema>,
    info: HashMap<String, TableInfo>,
}

impl Planner {
    /// A planner for a server whose schema is `schema`.
    pub fn new(schema: std::sync::Arc<DatabaseSchema>) -> Planner {
        let info = table_info(&schema);
        Planner { schema, info }
    }

    /// The schema planned for.
    pub fn schema(&self) -> &std::sync::Arc<DatabaseSchema> {
        &self.schema
    }

    /// Computes the transaction that makes the NB hold what `desired` wants.
    pub fn plan(
        &self,
        desired: &Desired,
        snap: &Snapshot,
        nb: &NbIndexes,
    ) -> Result<Plan, PlanError> {
        plan_with(desired, snap, nb, &self.schema, &self.info, &HashSet::new())
    }

    /// [`Planner::plan`], with the rows `keep` (those of fragments `desired` skipped)
    /// kept as they are.
    pub fn plan_keeping(
        &self,
        desired: &Desired,
        snap: &Snapshot,
        nb: &NbIndexes,
        keep: &HashSet<Uuid>,
    ) -> Result<Plan, PlanError> {
        plan_with(desired, snap, nb, &self.schema, &self.info, keep)
    }
}

fn plan_with(
    desired: &Desired,
    snap: &Snapshot,
    nb: &NbIndexes,
    schema: &DatabaseSchema,
    info: &HashMap<String, TableInfo>,
    keep: &HashSet<Uuid>,
) -> Result<Plan, PlanError> {
    let owner = &desired.owner;

    // The rows the key holds now, by table and identity.
    let mut existing: HashMap<&str, HashMap<String, Existing>> = HashMap::new();
    let mut owned: HashSet<Uuid> = HashSet::new();
    for &table in TABLES {
        let prefix = desired.id_prefix(table);
        let rows_in_scope = nb.in_scope(snap, table, owner, &desired.scope);
        for (uuid, row) in rows_in_scope {
            owned.insert(uuid);
            // A row of a skipped fragment stays as it is: nothing to compare.
            if keep.contains(&uuid) {
                continue;
            }
            let identity = match row
                .get("external_ids")
                .and_then(|d| d.get(&Atom::String(OWNER_ID.into())))
                .and_then(Atom::as_str)
            {
                Some(id) => id.strip_prefix(prefix.as_str()).map(str::to_owned),
                // Without an id, a row is the key's unidentified row of its name.
                None => row
                    .get("name")
                    .and_then(Datum::as_scalar)
                    .and_then(Atom::as_str)
                    .filter(|n| desired.get_row(table, n).is_some_and(|r| r.unidentified))
                    .map(str::to_owned),
            };
            let rows = existing.entry(table).or_default();
            // A row of the key's without a valid id, or a second row under one
            // identity, is not wanted: it goes.
            let identity = identity
                .filter(|i| !rows.contains_key(i))
                .unwrap_or_else(|| format!("?{uuid}"));
            rows.insert(identity, Existing { uuid, row });
        }
    }
    for (table, name) in desired.claims() {
        for (uuid, row) in nb.named(snap, table, name) {
            owned.insert(uuid);
            let rows = existing.entry(table).or_default();
            let identity = if rows.contains_key(name) {
                format!("?{uuid}")
            } else {
                name.to_owned()
            };
            rows.insert(identity, Existing { uuid, row });
        }
    }
    let find = |table: &str, identity: &str| existing.get(table).and_then(|m| m.get(identity));

    // Shared rows another party created already stand in for ours.
    let mut resolved: HashMap<&str, Atom> = HashMap::new();
    let mut wanted: Vec<&DesiredRow> = Vec::new();
    let mut substituted = false;
    for r in desired.rows() {
        let foreign = r.shared.then(|| r.name()).flatten().and_then(|name| {
            nb.named(snap, r.table, name)
                .into_iter()
                .find(|(u, _)| !owned.contains(u))
        });
        match foreign {
            Some((u, _)) => {
                resolved.insert(r.placeholder.as_str(), Atom::Uuid(u));
                substituted = true;
            }
            None => wanted.push(r),
        }
    }
    // What no wanted row refers to any more is not created: non-root rows would be
    // collected by the server at once.
    while substituted {
        let referenced: HashSet<&str> = wanted
            .iter()
            .flat_map(|r| r.row.values().flat_map(placeholders))
            .collect();
        let before = wanted.len();
        wanted.retain(|r| {
            info.get(r.table).is_none_or(|t| t.schema.is_root)
                || referenced.contains(r.placeholder.as_str())
        });
        substituted = wanted.len() != before;
    }

    // Every wanted row resolves to its row in the NB, or to a new row of this
    // transaction.
    let mut fresh = 0usize;
    for r in &wanted {
        if !info.contains_key(r.table) {
            return Err(PlanError::MissingTable(r.table.to_owned()));
        }
        let atom = match find(r.table, &r.identity) {
            Some(e) => Atom::Uuid(e.uuid),
            None => {
                fresh += 1;
                Atom::NamedUuid(format!("row{fresh}").into())
            }
        };
        resolved.insert(r.placeholder.as_str(), atom);
    }
    let mut foreign_names = Vec::new();
    for (table, name) in desired.foreign() {
        let p = foreign_placeholder(table, name);
        if resolved.contains_key(p.as_str()) {
            continue;
        }
        let found = nb.named(snap, table, name);
        let Some((u, _)) = found.first() else {
            return Err(PlanError::MissingDependency {
                table: table.to_owned(),
                name: name.to_owned(),
            });
        };
        foreign_names.push((p, *u));
    }
    for (p, u) in &foreign_names {
        resolved.insert(p.as_str(), Atom::Uuid(*u));
    }
    // Every selection, resolved to the rows it matches now (sorted).
    let mut selected: HashMap<&str, Vec<Atom>> = HashMap::new();
    for r in &wanted {
        for p in r.row.values().flat_map(placeholders) {
            if selected.contains_key(p) {
                continue;
            }
            if let Some(sel) = desired.selection(p) {
                let mut rows: Vec<Atom> = snap
                    .table(sel.table)
                    .iter()
                    .filter(|(_, row)| sel.matches(row))
                    .map(|(u, _)| Atom::Uuid(*u))
                    .collect();
                rows.sort_unstable();
                selected.insert(p, rows);
            }
        }
    }
    let resolve_atom = |a: &Atom| -> Result<Atom, PlanError> {
        match a {
            Atom::NamedUuid(p) => resolved.get(&**p).cloned().ok_or_else(|| {
                let (table, name) = parse_foreign(p).unwrap_or(("?", p));
                PlanError::MissingDependency {
                    table: table.into(),
                    name: name.into(),
                }
            }),
            other => Ok(other.clone()),
        }
    };
    let has_placeholder = |d: &Datum| atoms(d).any(|a| matches!(a, Atom::NamedUuid(_)));
    // The elements of a set, placeholders resolved and selections expanded.
    let resolve_set = |elements: &[Atom]| -> Result<Vec<Atom>, PlanError> {
        let mut out = Vec::with_capacity(elements.len());
        for a in elements {
            match a {
                Atom::NamedUuid(p) if p.starts_with('$') => {
                    out.extend(selected.get(&**p).into_iter().flatten().cloned())
                }
                a => out.push(resolve_atom(a)?),
            }
        }
        Ok(out)
    };
    let resolve = |d: &Datum| -> Result<Datum, PlanError> {
        Ok(match d {
            Datum::Set(s) => Datum::set(resolve_set(s)?),
            Datum::Map(m) => Datum::map(
                m.iter()
                    .map(|(k, v)| Ok((resolve_atom(k)?, resolve_atom(v)?)))
                    .collect::<Result<Vec<_>, PlanError>>()?,
            ),
        })
    };

    let mut plan = Plan {
        owner: Some(owner.clone()),
        scope: desired.scope.clone(),
        ..Default::default()
    };

    // New rows: none may take a name another party holds; children go before parents.
    let mut new_rows: Vec<&DesiredRow> = wanted
        .iter()
        .copied()
        .filter(|r| find(r.table, &r.identity).is_none())
        .collect();
    for r in &new_rows {
        if let Some(name) = r.name() {
            if let Some((_, row)) = nb
                .named(snap, r.table, name)
                .into_iter()
                .find(|(u, _)| !owned.contains(u))
            {
                return Err(PlanError::Conflict {
                    row: RowName {
                        table: r.table.into(),
                        identity: name.into(),
                    },
                    owner: row.get("external_ids").and_then(Owner::of),
                });
            }
        }
    }
    new_rows = dependency_order(new_rows);
    for r in new_rows {
        let ts = &info[r.table].schema;
        let mut row = Row::new();
        for (column, value) in &r.row {
            let Some(cs) = ts.column(column) else {
                if r.defaults.contains(column) {
                    continue;
                }
                return Err(PlanError::Unsupported {
                    table: r.table.into(),
                    column: column.clone(),
                });
            };
            if r.defaults.contains(column) && *value == cs.column_type.default_datum() {
                continue;
            }
            let value = if has_placeholder(value) {
                resolve(value)?
            } else {
                value.clone()
            };
            row.insert(column.clone(), value);
        }
        let Some(Atom::NamedUuid(name)) = resolved.get(r.placeholder.as_str()) else {
            unreachable!("new rows resolve to a named uuid");
        };
        plan.inserts.push(plan.operations.len());
        plan.operations
            .push(Operation::insert_named(r.table, row, name.clone()));
        plan.inserted.push(RowName {
            table: r.table.into(),
            identity: r.identity.clone(),
        });
    }

    // Rows the key holds and still wants: only what differs.
    let mut mutations: Vec<Operation> = Vec::new();
    for r in &wanted {
        let Some(e) = find(r.table, &r.identity) else {
            continue;
        };
        plan.compared += 1;
        plan.existing.push((r.table, r.identity.clone(), e.uuid));
        let ti = &info[r.table];
        let mut update = Row::new();
        let mut muts = Vec::new();
        let mut changed = Vec::new();
        // Both rows list their columns in name order: walk them side by side.
        let mut cached = e.row.iter().peekable();
        for (column, value) in &r.row {
            let current = loop {
                match cached.peek() {
                    Some((c, _)) if *c < column.as_str() => {
                        cached.next();
                    }
                    Some((c, d)) if *c == column.as_str() => {
                        let d = *d;
                        cached.next();
                        break Some(d);
                    }
                    _ => break None,
                }
            };
            if WRITTEN_BY_OVN.contains(&column.as_str()) {
                continue;
            }
            let Some(current) = current else {
                if ti.schema.column(column).is_none() && !r.defaults.contains(column) {
                    return Err(PlanError::Unsupported {
                        table: r.table.into(),
                        column: column.clone(),
                    });
                }
                continue;
            };
            if ti
                .ref_sets
                .binary_search_by(|c| c.as_str().cmp(column))
                .is_ok()
            {
                let mut want: Vec<Atom> = resolve_set(value.as_set().unwrap_or(&[]))?;
                want.sort_unstable();
                want.dedup();
                // Both sides sorted: every membership test is a binary search.
                let have = current.as_set().unwrap_or(&[]);
                let add: Vec<Atom> = want
                    .iter()
                    .filter(|a| have.binary_search(a).is_err())
                    .cloned()
                    .collect();
                let drop: Vec<Atom> = have
                    .iter()
                    .filter(|a| {
                        (r.exclusive || a.as_uuid().is_some_and(|u| owned.contains(&u)))
                            && want.binary_search(a).is_err()
                            // Rows of skipped fragments stay where they are.
                            && !a.as_uuid().is_some_and(|u| keep.contains(&u))
                    })
                    .cloned()
                    .collect();
                if drop.is_empty() && add.is_empty() {
                    continue;
                }
                if !drop.is_empty() {
                    muts.push(Mutation::new(
                        column.clone(),
                        Mutator::Delete,
                        Datum::set(drop),
                    ));
                }
                if !add.is_empty() {
                    muts.push(Mutation::new(
                        column.clone(),
                        Mutator::Insert,
                        Datum::set(add),
                    ));
                }
                changed.push(column.clone());
            } else if has_placeholder(value) {
                let value = resolve(value)?;
                if *current != value {
                    changed.push(column.clone());
                    update.insert(column.clone(), value);
                }
            } else if current != value {
                changed.push(column.clone());
                update.insert(column.clone(), value.clone());
            }
        }
        if !update.is_empty() {
            plan.operations.push(Operation::Update {
                table: r.table.into(),
                conditions: vec![Condition::uuid(e.uuid)],
                row: update,
            });
        }
        if !muts.is_empty() {
            mutations.push(Operation::Mutate {
                table: r.table.into(),
                conditions: vec![Condition::uuid(e.uuid)],
                mutations: muts,
            });
        }
        if !changed.is_empty() {
            plan.updated.push((
                RowName {
                    table: r.table.into(),
                    identity: r.identity.clone(),
                },
                changed,
            ));
        }
    }
    plan.operations.append(&mut mutations);

    // The key's rows in sets of rows it does not own: added where wanted...
    let mut attached: HashSet<(Uuid, &str, Atom)> = HashSet::new();
    for (att, children) in desired.attachments() {
        let Some((parent, row)) = nb.named(snap, att.table, &att.parent).into_iter().next() else {
            return Err(PlanError::MissingDependency {
                table: att.table.to_owned(),
                name: att.parent.clone(),
            });
        };
        let have = row.get(att.column).and_then(Datum::as_set).unwrap_or(&[]);
        let mut add = Vec::new();
        for p in children {
            // A row not wanted after all (a shared row another party holds) is not
            // attached.
            let Some(child) = resolved.get(&**p) else {
                continue;
            };
            attached.insert((parent, att.column, child.clone()));
            // Sets are kept sorted: a binary search.
            if have.binary_search(child).is_err() {
                add.push(child.clone());
            }
        }
        if !add.is_empty() {
            plan.foreign.push(ForeignMutation {
                row: RowName {
                    table: att.table.into(),
                    identity: att.parent.clone(),
                },
                column: att.column.into(),
                inserted: add.len(),
                deleted: 0,
            });
            plan.operations.push(Operation::Mutate {
                table: att.table.into(),
                conditions: vec![Condition::uuid(parent)],
                mutations: vec![Mutation::new(att.column, Mutator::Insert, Datum::set(add))],
            });
        }
    }
    // ...and taken out of the rows that should no longer hold them (the key's rows
    // still wanted; those no longer wanted go below).
    for r in &wanted {
        let Some(e) = find(r.table, &r.identity) else {
            continue;
        };
        for (parent_table, parent, column) in holders(nb, snap, info.get(r.table), e.uuid) {
            if owned.contains(&parent) || attached.contains(&(parent, column, Atom::Uuid(e.uuid))) {
                continue;
            }
            plan.foreign.push(ForeignMutation {
                row: RowName {
                    table: parent_table.into(),
                    identity: format!("{parent}"),
                },
                column: column.into(),
                inserted: 0,
                deleted: 1,
            });
            plan.operations.push(Operation::Mutate {
                table: parent_table.into(),
                conditions: vec![Condition::uuid(parent)],
                mutations: vec![Mutation::new(column, Mutator::Delete, Datum::uuid(e.uuid))],
            });
        }
    }

    // Rows the key holds and no longer wants.
    let kept: HashSet<(&str, &str)> = wanted
        .iter()
        .map(|r| (r.table, r.identity.as_str()))
        .collect();
    let mut stale: Vec<(&str, &str, &Existing)> = existing
        .iter()
        .flat_map(|(t, rows)| rows.iter().map(move |(i, e)| (*t, i.as_str(), e)))
        .filter(|(t, i, e)| !kept.contains(&(*t, *i)) && !keep.contains(&e.uuid))
        .collect();
    stale.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    // References held by the key's rows: a stale child referred to by one of them goes
    // with the reference (removed above, or with its stale parent). Worked out only
    // when a non-root row is stale.
    let needs_held = stale
        .iter()
        .any(|(t, _, _)| info.get(*t).is_some_and(|i| !i.schema.is_root));
    let held: HashSet<Uuid> = if needs_held {
        existing
            .values()
            .flat_map(|rows| rows.values())
            .flat_map(|e| {
                let refs = info
                    .get(e.row.table())
                    .map(|i| i.refs.as_slice())
                    .unwrap_or(&[]);
                refs.iter()
                    .filter_map(|c| e.row.get(c.as_str()))
                    .flat_map(|d| atoms(d).filter_map(Atom::as_uuid).collect::<Vec<_>>())
                    .collect::<Vec<_>>()
            })
            .collect()
    } else {
        HashSet::new()
    };
    for (table, identity, e) in stale {
        let root = info.get(table).is_none_or(|t| t.schema.is_root);
        if root {
            // Rows of other parties that refer to it (a switch holding a connect's
            // load balancer group) let go of it first.
            for (parent_table, parent, column) in holders(nb, snap, info.get(table), e.uuid) {
                if owned.contains(&parent) {
                    continue;
                }
                plan.foreign.push(ForeignMutation {
                    row: RowName {
                        table: parent_table.into(),
                        identity: format!("{parent}"),
                    },
                    column: column.into(),
                    inserted: 0,
                    deleted: 1,
                });
                plan.operations.push(Operation::Mutate {
                    table: parent_table.into(),
                    conditions: vec![Condition::uuid(parent)],
                    mutations: vec![Mutation::new(column, Mutator::Delete, Datum::uuid(e.uuid))],
                });
            }
            plan.operations.push(Operation::Delete {
                table: table.to_owned(),
                conditions: vec![Condition::uuid(e.uuid)],
            });
        } else if !held.contains(&e.uuid) {
            // Held by a row the key does not own: take the reference out of it.
            for (parent, column) in referrers(schema, table) {
                let includes = Condition::new(column, Function::Includes, Datum::uuid(e.uuid));
                plan.operations.push(Operation::Mutate {
                    table: parent.into(),
                    conditions: vec![includes],
                    mutations: vec![Mutation::new(column, Mutator::Delete, Datum::uuid(e.uuid))],
                });
                plan.foreign.push(ForeignMutation {
                    row: RowName {
                        table: parent.into(),
                        identity: format!("(any row referring to {table} {identity})"),
                    },
                    column: column.into(),
                    inserted: 0,
                    deleted: 1,
                });
            }
        }
        plan.deleted.push(RowName {
            table: table.to_owned(),
            identity: identity.to_owned(),
        });
    }
    Ok(plan)
}

/// The rows of the [`ATTACHABLE`] tables holding row `child` (of the table `info`
/// describes), with the column holding it.
fn holders(
    nb: &NbIndexes,
    snap: &Snapshot,
    info: Option<&TableInfo>,
    child: Uuid,
) -> Vec<(&'static str, Uuid, &'static str)> {
    let mut out = Vec::new();
    for (parent_table, columns) in info.map(|i| i.held_in.as_slice()).unwrap_or(&[]) {
        for (uuid, row) in nb.holders(snap, parent_table, &child) {
            for &c in columns {
                let holds = row
                    .get(c)
                    .and_then(Datum::as_set)
                    .is_some_and(|s| s.contains(&Atom::Uuid(child)));
                if holds {
                    out.push((*parent_table, uuid, c));
                }
            }
        }
    }
    out
}

/// New rows ordered so that a row comes after the new rows it refers to.
fn dependency_order(rows: Vec<&DesiredRow>) -> Vec<&DesiredRow> {
    let by_placeholder: HashMap<&str, usize> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| (r.placeholder.as_str(), i))
        .collect();
    // 0: not seen, 1: being visited, 2: placed.
    let mut state = vec![0u8; rows.len()];
    let mut out = Vec::with_capacity(rows.len());
    // Iterative depth-first walk (topologies are deep enough to matter at scale); a
    // reference cycle, which the NB schema's tables do not form, is cut where met.
    for start in 0..rows.len() {
        let mut stack: Vec<(usize, bool)> = vec![(start, false)];
        while let Some((i, expanded)) = stack.pop() {
            if expanded {
                state[i] = 2;
                out.push(rows[i]);
                continue;
            }
            if state[i] != 0 {
                continue;
            }
            state[i] = 1;
            stack.push((i, true));
            for p in rows[i].row.values().flat_map(placeholders) {
                if let Some(&j) = by_placeholder.get(p) {
                    if state[j] == 0 {
                        stack.push((j, false));
                    }
                }
            }
        }
    }
    out
}
