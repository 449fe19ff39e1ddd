//! The difference between what one key wants and what the NB holds, as one minimal
//! transaction. The ownership rules, all here:
//!
//! - A row is the key's when its `external_ids` carry the key's owner, or, for a
//!   network's key, one of the owners OVN-Kubernetes writes a network's port groups and
//!   node ACLs under (`ownership::network_of_alias`; such a row is known
//!   by its whole id, `Desired::add_aliased`) (for a table
//!   without `external_ids`, when the key claims its name; a static MAC binding, when
//!   it sits on one of the key's router ports). Only such rows are inserted, updated
//!   or deleted; an update sends only the columns that differ.
//! - A set of references (a router's `ports`, a switch's `load_balancer_group`) is
//!   changed by mutation, element by element: the key adds the references it wants and
//!   removes only references to its own rows, so references other parties added stay.
//! - A row the key wants that another party already holds under the same name is a
//!   conflict: nothing is written for the key; unless the key adopts
//!   ([`Desired::adopt`]) and the row carries no owner keys (OVN-Kubernetes' rows):
//!   then it is the key's, updated in place (module `adopt`).
//! - A *shared* row (the default COPP) that another party already created is used,
//!   and what only it would have referenced is not created either.
//! - Columns OVN's daemons write (`up`, `status`, …) are never compared or written.
//! - The rows of a skipped base fragment ([`DesiredRow::kept`]) are neither compared
//!   nor written: only the rows built now are put into their sets, and the key's rows
//!   no longer wanted taken out of them, as the rows built whole would hold them.
//! - A row no longer wanted is deleted: a root row explicitly, any other by removing the
//!   references to it (the server then collects it).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use ovsdb_proto::cache::{CachedRow, SetElements, Snapshot};
use ovsdb_proto::schema::DatabaseSchema;
use ovsdb_proto::{Atom, Condition, Datum, Function, Mutation, Mutator, Operation, Row, Uuid};

use super::left::written_by_ovn;
use super::nb::{NbIndexes, TABLES};
use super::plan::{ForeignMutation, Plan, RowName};
use super::rows::{KeptRows, KeyRow, KeyRows};
use crate::ovnk::ownership::{binding_identity, binding_port, Owner, OWNER_ID};
use crate::topology::desired::{
    aliased_identity, foreign_placeholder, parse_foreign, Desired, DesiredRow,
};

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
    /// The key would adopt rows of another party's but must not
    /// ([`Desired::adopt_refused`]).
    #[error("would adopt {rows} rows of OVN-Kubernetes' (the first: {first}), but {why}")]
    AdoptRefused {
        /// How many rows.
        rows: usize,
        /// The first of them.
        first: RowName,
        /// Why not.
        why: String,
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

/// What a plan takes out of and puts into the sets of the rows of a skipped base
/// fragment ([`DesiredRow::kept`]), by the row's position then column.
type KeptChanges = BTreeMap<usize, BTreeMap<String, (Vec<Atom>, Vec<Atom>)>>;

/// What the planner knows of a schema, worked out once and used for every key.
pub(crate) struct Planner {
    schema: Arc<DatabaseSchema>,
    info: HashMap<String, TableInfo>,
}

impl Planner {
    /// A planner for a server whose schema is `schema`.
    pub fn new(schema: Arc<DatabaseSchema>) -> Planner {
        let info = table_info(&schema);
        Planner { schema, info }
    }

    /// The schema planned for.
    pub fn schema(&self) -> &Arc<DatabaseSchema> {
        &self.schema
    }

    /// Computes the transaction that makes the NB hold what `desired` wants.
    pub fn plan(
        &self,
        desired: &Desired,
        snap: &Snapshot,
        nb: &NbIndexes,
    ) -> Result<Plan, PlanError> {
        let rows = KeyRows::read(snap, nb, &desired.owner, &desired.scope);
        self.plan_keeping(desired, snap, nb, &rows, &KeptRows::default())
    }

    /// [`Planner::plan`] where the key's rows are `rows` (read in `snap`), with the rows
    /// `keep` (those of fragments `desired` skipped) kept as they are.
    pub(crate) fn plan_keeping(
        &self,
        desired: &Desired,
        snap: &Snapshot,
        nb: &NbIndexes,
        rows: &KeyRows,
        keep: &KeptRows,
    ) -> Result<Plan, PlanError> {
        let mut p = Planning {
            desired,
            snap,
            nb,
            schema: &self.schema,
            info: &self.info,
            keep,
            rows,
            existing: HashMap::new(),
            claimed: HashSet::new(),
            resolved: HashMap::new(),
            wanted: Vec::new(),
            selected: HashMap::new(),
            adopted: HashSet::new(),
        };
        let mut plan = Plan {
            owner: Some(desired.owner.clone()),
            scope: desired.scope.clone(),
            ..Default::default()
        };
        p.find_existing();
        if desired.adopt {
            p.adopt(&mut plan)?;
        }
        if p.reuse_shared_rows() {
            p.drop_unreferenced();
        }
        p.resolve_references()?;
        p.insert_new_rows(&mut plan)?;
        p.update_columns(&mut plan)?;
        let mut kept = p.grow_kept()?;
        let attached = p.attach(&mut plan)?;
        p.detach(&mut plan, &attached);
        p.delete_stale(&mut plan, &mut kept);
        p.change_kept(&mut plan, kept);
        if desired.adopt {
            p.list_theirs(&mut plan);
        }
        Ok(plan)
    }
}

/// One key being planned: the inputs, and what the phases found so far. The phases run
/// in order ([`Planner::plan_keeping`]): the key's rows in the NB; shared rows another
/// party holds, and what only they needed; every reference resolved; then the
/// operations: inserts, column updates, attaching the key's rows to rows it does not
/// own and detaching them, and deleting what is no longer wanted.
struct Planning<'a> {
    desired: &'a Desired,
    snap: &'a Snapshot,
    nb: &'a NbIndexes,
    schema: &'a DatabaseSchema,
    info: &'a HashMap<String, TableInfo>,
    /// Rows of fragments `desired` skipped: left as they are.
    keep: &'a KeptRows,
    /// The key's rows in its owner's indexes.
    rows: &'a KeyRows,
    /// The key's rows in the NB, by table and identity.
    existing: HashMap<&'static str, HashMap<String, Existing>>,
    /// The key's rows outside its owner's indexes (of tables without `external_ids`,
    /// found by the names it claims).
    claimed: HashSet<Uuid>,
    /// Each placeholder's row: a uuid in the NB, or a named uuid of this transaction.
    resolved: HashMap<Cow<'a, str>, Atom>,
    /// The desired rows that will exist (not stood in for by another party's).
    wanted: Vec<&'a DesiredRow>,
    /// Each selection's rows now, sorted.
    selected: HashMap<&'a str, Vec<Atom>>,
    /// Rows another party wrote that the key takes over ([`Desired::adopt`]).
    adopted: HashSet<Uuid>,
}

impl<'a> Planning<'a> {
    /// True when the row at `uuid` is one of the key's.
    fn owns(&self, uuid: &Uuid) -> bool {
        self.rows.contains(uuid) || self.claimed.contains(uuid) || self.adopted.contains(uuid)
    }

    /// The key's row of `table` known as `identity`, if the NB holds it.
    fn find(&self, table: &str, identity: &str) -> Option<&Existing> {
        self.existing.get(table).and_then(|m| m.get(identity))
    }

    /// Phase 1: the rows the key holds now, by table and identity. A row of the key's
    /// without a valid id, or a second row under one identity, gets an identity no
    /// desired row has, so that it goes.
    fn find_existing(&mut self) {
        let desired = self.desired;
        let prefixes: Vec<String> = TABLES.iter().map(|t| desired.id_prefix(t)).collect();
        // The rows not kept: known by their uuids while the key's rows are untouched
        // since they were remembered (looked at in the order of a full walk, so that
        // a second row of one identity is the same row either way), else every row.
        let others: Box<dyn Iterator<Item = KeyRow<'_>>> = match self.keep.others() {
            Some(uuids) => {
                // Debug builds (every test's) check that the rows known are the rows
                // a walk finds.
                #[cfg(debug_assertions)]
                {
                    let mut walked: Vec<Uuid> = self
                        .rows
                        .iter()
                        .filter(|r| !self.keep.contains(&r.uuid))
                        .map(|r| r.uuid)
                        .collect();
                    let mut known: Vec<Uuid> =
                        uuids.iter().filter(|u| self.rows.contains(u)).collect();
                    walked.sort();
                    known.sort();
                    debug_assert_eq!(walked, known, "the rows of {} not kept", desired.owner);
                }
                let mut found: Vec<(usize, KeyRow)> =
                    uuids.iter().filter_map(|u| self.rows.locate(&u)).collect();
                found.sort_by_key(|(part, r)| (*part, r.uuid));
                Box::new(found.into_iter().map(|(_, r)| r))
            }
            None => Box::new(self.rows.iter().filter(|r| !self.keep.contains(&r.uuid))),
        };
        for r in others {
            let (table, prefix) = (TABLES[r.table], &prefixes[r.table]);
            let identity = match r
                .row
                .get("external_ids")
                .and_then(|d| d.get_str(OWNER_ID))
                .and_then(Atom::as_str)
            {
                // A row of the key's network under another owner is known by its
                // whole id ([`Desired::add_aliased`]).
                Some(id) if r.aliased => Some(aliased_identity(id)),
                Some(id) => id.strip_prefix(prefix.as_str()).map(str::to_owned),
                // Without an id, a row is the key's unidentified row of its name.
                None => r
                    .row
                    .get("name")
                    .and_then(Datum::as_scalar)
                    .and_then(Atom::as_str)
                    .filter(|n| desired.get_row(table, n).is_some_and(|r| r.unidentified))
                    .map(str::to_owned),
            };
            let rows = self.existing.entry(table).or_default();
            let identity = identity
                .filter(|i| !rows.contains_key(i))
                .unwrap_or_else(|| format!("?{}", r.uuid));
            let row = r.row.clone();
            rows.insert(identity, Existing { uuid: r.uuid, row });
        }
        // Rows of tables without `external_ids` are the key's by the names it claims.
        for (table, name) in desired.claims() {
            for (uuid, row) in self.nb.named(self.snap, table, name) {
                self.claimed.insert(uuid);
                let rows = self.existing.entry(table).or_default();
                let identity = if rows.contains_key(name) {
                    format!("?{uuid}")
                } else {
                    name.to_owned()
                };
                rows.insert(identity, Existing { uuid, row });
            }
        }
        self.find_port_bindings();
    }

    /// Static MAC bindings on the key's router ports are the key's, wanted or not. They
    /// are looked for where they can be: on the ports the key's wanted bindings name (an
    /// address no longer bound there goes), and on the router ports the key holds and
    /// no longer wants (their bindings go with them). Not on every port the key holds:
    /// a network of 500 nodes holds hundreds.
    fn find_port_bindings(&mut self) {
        const TABLE: &str = "Static_MAC_Binding";
        let desired = self.desired;
        let mut ports: BTreeSet<&str> = desired
            .claims()
            .filter(|(t, _)| *t == TABLE)
            .map(|(_, identity)| binding_port(identity))
            .collect();
        if let Some(lrps) = self.existing.get("Logical_Router_Port") {
            ports.extend(
                lrps.iter()
                    .filter(|(identity, _)| {
                        desired.get_row("Logical_Router_Port", identity).is_none()
                    })
                    .filter_map(|(_, e)| e.row.get("name")?.as_scalar()?.as_str()),
            );
        }
        let mut found = Vec::new();
        for port in ports {
            for (uuid, row) in self.nb.named(self.snap, TABLE, port) {
                if !self.keep.contains(&uuid) && !self.owns(&uuid) {
                    let ip = row
                        .get("ip")
                        .and_then(Datum::as_scalar)
                        .and_then(Atom::as_str)
                        .unwrap_or_default();
                    found.push((binding_identity(port, ip), uuid, row.clone()));
                }
            }
        }
        for (identity, uuid, row) in found {
            self.claimed.insert(uuid);
            let rows = self.existing.entry(TABLE).or_default();
            let identity = if rows.contains_key(&identity) {
                format!("?{uuid}")
            } else {
                identity
            };
            rows.insert(identity, Existing { uuid, row });
        }
    }

    /// Phase 2: a shared row (the default COPP, its meters) that another party created
    /// already stands in for the key's. True when one did.
    fn reuse_shared_rows(&mut self) -> bool {
        let mut substituted = false;
        for r in self.desired.rows() {
            if r.kept {
                continue;
            }
            let foreign = r.shared.then(|| r.name()).flatten().and_then(|name| {
                self.nb
                    .named(self.snap, r.table, name)
                    .into_iter()
                    .find(|(u, _)| !self.owns(u))
            });
            match foreign {
                Some((u, _)) => {
                    self.resolved
                        .insert(Cow::Borrowed(r.placeholder.as_str()), Atom::Uuid(u));
                    substituted = true;
                }
                None => self.wanted.push(r),
            }
        }
        substituted
    }

    /// Phase 3: what no wanted row refers to any more is not created (a non-root row
    /// would be collected by the server at once), until nothing more goes.
    fn drop_unreferenced(&mut self) {
        loop {
            let grown = self.desired.growth().iter().flat_map(|g| &g.elements);
            let referenced: HashSet<&str> = self
                .wanted
                .iter()
                .flat_map(|r| r.row.values().flat_map(placeholders))
                .chain(grown.map(String::as_str))
                .collect();
            let before = self.wanted.len();
            let info = self.info;
            self.wanted.retain(|r| {
                info.get(r.table).is_none_or(|t| t.schema.is_root)
                    || referenced.contains(r.placeholder.as_str())
            });
            if self.wanted.len() == before {
                return;
            }
        }
    }

    /// Phase 4: every wanted row resolves to its row in the NB or to a new row of this
    /// transaction; every row referred to by name to the row of that name; every
    /// selection to the rows it matches now.
    fn resolve_references(&mut self) -> Result<(), PlanError> {
        let mut fresh = 0usize;
        for i in 0..self.wanted.len() {
            let r = self.wanted[i];
            if !self.info.contains_key(r.table) {
                return Err(PlanError::MissingTable(r.table.to_owned()));
            }
            let atom = match self.find(r.table, &r.identity) {
                Some(e) => Atom::Uuid(e.uuid),
                None => {
                    fresh += 1;
                    Atom::NamedUuid(format!("row{fresh}").into())
                }
            };
            self.resolved
                .insert(Cow::Borrowed(r.placeholder.as_str()), atom);
        }
        // The rows of a skipped base fragment are where they were left.
        for r in self.desired.rows().filter(|r| r.kept) {
            let Some(uuid) = self.keep.base_row(r.table, &r.identity) else {
                return Err(PlanError::MissingDependency {
                    table: r.table.to_owned(),
                    name: r.identity.clone(),
                });
            };
            self.resolved
                .insert(Cow::Borrowed(r.placeholder.as_str()), Atom::Uuid(uuid));
        }
        for (table, name) in self.desired.foreign() {
            let p = foreign_placeholder(table, name);
            if self.resolved.contains_key(p.as_str()) {
                continue;
            }
            let Some((u, _)) = self.nb.named(self.snap, table, name).into_iter().next() else {
                return Err(PlanError::MissingDependency {
                    table: table.to_owned(),
                    name: name.to_owned(),
                });
            };
            self.resolved.insert(Cow::Owned(p), Atom::Uuid(u));
        }
        for r in &self.wanted {
            for p in r.row.values().flat_map(placeholders) {
                // Most placeholders are rows': told apart by their form, unhashed.
                let Some(sel) = self.desired.selection(p) else {
                    continue;
                };
                if self.selected.contains_key(p) {
                    continue;
                }
                let mut rows: Vec<Atom> = self
                    .snap
                    .table(sel.table)
                    .iter()
                    .filter(|(_, row)| sel.matches(row))
                    .map(|(u, _)| Atom::Uuid(*u))
                    .collect();
                rows.sort_unstable();
                self.selected.insert(p, rows);
            }
        }
        Ok(())
    }

    /// An atom with its placeholder resolved.
    fn resolve_atom(&self, a: &Atom) -> Result<Atom, PlanError> {
        match a {
            Atom::NamedUuid(p) => self.resolved.get(&**p).cloned().ok_or_else(|| {
                let (table, name) = parse_foreign(p).unwrap_or(("?", p));
                PlanError::MissingDependency {
                    table: table.into(),
                    name: name.into(),
                }
            }),
            other => Ok(other.clone()),
        }
    }

    /// The elements of a set, placeholders resolved and selections expanded.
    fn resolve_set(&self, elements: &[Atom]) -> Result<Vec<Atom>, PlanError> {
        let mut out = Vec::with_capacity(elements.len());
        for a in elements {
            match a {
                Atom::NamedUuid(p) if p.starts_with('$') => {
                    out.extend(self.selected.get(&**p).into_iter().flatten().cloned())
                }
                a => out.push(self.resolve_atom(a)?),
            }
        }
        Ok(out)
    }

    /// A value with its placeholders resolved.
    fn resolve(&self, d: &Datum) -> Result<Datum, PlanError> {
        Ok(match d {
            Datum::Set(s) => Datum::set(self.resolve_set(s)?),
            Datum::Map(m) => Datum::map(
                m.iter()
                    .map(|(k, v)| Ok((self.resolve_atom(k)?, self.resolve_atom(v)?)))
                    .collect::<Result<Vec<_>, PlanError>>()?,
            ),
        })
    }

    /// The row of `table` named `name` that another party holds, if any.
    fn held_by_another(&self, table: &str, name: &str) -> Option<Arc<CachedRow>> {
        self.nb
            .named(self.snap, table, name)
            .into_iter()
            .find(|(u, _)| !self.owns(u))
            .map(|(_, row)| row)
    }

    /// Phase 5: the rows to create. None may take a name another party holds (the key
    /// is then a conflict, and nothing is written); children go before parents.
    fn insert_new_rows(&self, plan: &mut Plan) -> Result<(), PlanError> {
        let new_rows: Vec<&DesiredRow> = self
            .wanted
            .iter()
            .copied()
            .filter(|r| self.find(r.table, &r.identity).is_none())
            .collect();
        for r in &new_rows {
            if let Some(row) = r.name().and_then(|n| self.held_by_another(r.table, n)) {
                return Err(PlanError::Conflict {
                    row: RowName {
                        table: r.table.into(),
                        identity: r.name().unwrap_or_default().into(),
                    },
                    owner: row.get("external_ids").and_then(Owner::of),
                });
            }
        }
        for r in dependency_order(new_rows) {
            let info = &self.info[r.table];
            // The row's columns and the server's are both in name order: walked side
            // by side, each of the row's meets the server's of its name, if any.
            let mut server = info.schema.columns.keys().zip(&info.defaults).peekable();
            let mut columns = Vec::with_capacity(r.row.len());
            for (at, (column, value)) in r.row.iter().enumerate() {
                let Some(default) = crate::ovnk::in_step(&mut server, column) else {
                    if r.defaults.at(at) {
                        continue;
                    }
                    return Err(PlanError::Unsupported {
                        table: r.table.into(),
                        column: column.clone(),
                    });
                };
                if r.defaults.at(at) && value == default {
                    continue;
                }
                let value = if has_placeholder(value) {
                    self.resolve(value)?
                } else {
                    value.clone()
                };
                columns.push((column.clone(), value));
            }
            // In order already: built whole, not searched column by column.
            let row: Row = columns.into_iter().collect();
            let Some(Atom::NamedUuid(name)) = self.resolved.get(r.placeholder.as_str()) else {
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
        Ok(())
    }

    /// Phase 6: the rows the key holds and still wants get only what differs: an
    /// update of the plain columns, a mutation of the sets of references (adding what
    /// is wanted, removing only references to the key's own rows).
    fn update_columns(&self, plan: &mut Plan) -> Result<(), PlanError> {
        let mut mutations: Vec<Operation> = Vec::new();
        for r in &self.wanted {
            let Some(e) = self.find(r.table, &r.identity) else {
                continue;
            };
            plan.compared += 1;
            plan.existing.push((r.table, r.identity.clone(), e.uuid));
            let (update, muts, changed) = self.row_changes(r, e)?;
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
        Ok(())
    }

    /// What differs between desired row `r` and its row `e` in the NB: the columns to
    /// update, the mutations of its sets of references, and the names of the columns
    /// changed.
    fn row_changes(
        &self,
        r: &DesiredRow,
        e: &Existing,
    ) -> Result<(Row, Vec<Mutation>, Vec<String>), PlanError> {
        let ti = &self.info[r.table];
        let mut update = Row::new();
        let mut muts = Vec::new();
        let mut changed = Vec::new();
        for (at, (column, value)) in r.row.iter().enumerate() {
            if written_by_ovn(column) {
                continue;
            }
            let ref_set = ti
                .ref_sets
                .binary_search_by(|c| c.as_str().cmp(column))
                .is_ok();
            // A set of references is read where it is: a large one that modifies
            // changed is not made flat to be compared.
            if let Some(have) = e.row.set(column).filter(|_| ref_set) {
                let (drop, add) = self.set_changes(r, value, have)?;
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
                continue;
            }
            let Some(current) = e.row.get(column) else {
                if ti.schema.column(column).is_none() && !r.defaults.at(at) {
                    return Err(PlanError::Unsupported {
                        table: r.table.into(),
                        column: column.clone(),
                    });
                }
                continue;
            };
            if has_placeholder(value) {
                let value = self.resolve(value)?;
                if *current != value {
                    changed.push(column.clone());
                    update.insert(column.clone(), value);
                }
            } else if current != value {
                changed.push(column.clone());
                update.insert(column.clone(), value.clone());
            }
        }
        Ok((update, muts, changed))
    }

    /// The references to take out of a set column holding `current` and to put in, for
    /// it to hold what `value` wants: out go only references to the key's own rows (or
    /// any, for a row the key holds exclusively), never those of skipped fragments.
    fn set_changes(
        &self,
        r: &DesiredRow,
        value: &Datum,
        have: SetElements<'_>,
    ) -> Result<(Vec<Atom>, Vec<Atom>), PlanError> {
        let mut want: Vec<Atom> = self.resolve_set(value.as_set().unwrap_or(&[]))?;
        want.sort_unstable();
        want.dedup();
        // Both sides sorted: one walk through the two finds what only one side holds.
        let (mut add, mut drop) = (Vec::new(), Vec::new());
        let (mut w, mut h) = (want.iter().peekable(), have.iter().peekable());
        // The references in `have` come in uuid order.
        let mut keep = self.keep.ascending();
        loop {
            let only_have = match (w.peek(), h.peek()) {
                (None, None) => break,
                (Some(a), Some(b)) if a == b => {
                    w.next();
                    h.next();
                    continue;
                }
                (Some(a), Some(b)) => *b < *a,
                (None, Some(_)) => true,
                (Some(_), None) => false,
            };
            if !only_have {
                add.extend(w.next().cloned());
                continue;
            }
            let Some(a) = h.next() else { break };
            // A reference to a row of a skipped fragment stays; so does one to another
            // party's row, unless the key holds this row exclusively.
            let mine = match a.as_uuid() {
                Some(u) => {
                    !keep.contains(&u)
                        && (r.exclusive || self.rows.contains(&u) || self.claimed.contains(&u))
                }
                None => r.exclusive,
            };
            if mine {
                drop.push(a.clone());
            }
        }
        Ok((drop, add))
    }
}

/// True when `d` holds a placeholder.
fn has_placeholder(d: &Datum) -> bool {
    atoms(d).any(|a| matches!(a, Atom::NamedUuid(_)))
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

mod adopt;
mod kept;
mod schema;
mod stale;

use schema::{atoms, placeholders, referrers, table_info, TableInfo};
#[cfg(test)]
mod tests;
