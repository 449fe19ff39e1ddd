//! Rows no longer wanted, and rows held by others: a root row is deleted explicitly,
//! any other by taking the references to it out of the rows that hold it (the server
//! then collects it); the key's rows attached to rows of other parties' are attached
//! and let go of by mutation.

use super::*;

impl<'a> Planning<'a> {
    /// Phase 7: the key's rows put into the sets of rows it does not own where it wants
    /// them. Returns every (parent, column, child) wanted, attached now or before.
    pub(super) fn attach(
        &self,
        plan: &mut Plan,
    ) -> Result<HashSet<(Uuid, &'static str, Atom)>, PlanError> {
        let mut attached = HashSet::new();
        for (att, children) in self.desired.attachments() {
            let Some((parent, row)) = self
                .nb
                .named(self.snap, att.table, &att.parent)
                .into_iter()
                .next()
            else {
                return Err(PlanError::MissingDependency {
                    table: att.table.to_owned(),
                    name: att.parent.clone(),
                });
            };
            // Read where it is: a router's 250k ports are searched, not copied.
            let have = row.set(att.column);
            let mut add = Vec::new();
            for p in children {
                // A row not wanted after all (a shared row another party holds) is not
                // attached.
                let Some(child) = self.resolved.get(&**p) else {
                    continue;
                };
                attached.insert((parent, att.column, child.clone()));
                if !have.is_some_and(|h| h.contains(child)) {
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
        Ok(attached)
    }

    /// Phase 8: the key's rows still wanted taken out of rows it does not own that
    /// should no longer hold them (those no longer wanted go in [`Self::delete_stale`]).
    pub(super) fn detach(&self, plan: &mut Plan, attached: &HashSet<(Uuid, &'static str, Atom)>) {
        for r in &self.wanted {
            let Some(e) = self.find(r.table, &r.identity) else {
                continue;
            };
            self.let_go_of(plan, r.table, e.uuid, |parent, column| {
                attached.contains(&(parent, column, Atom::Uuid(e.uuid)))
            });
        }
    }

    /// Takes row `child` of `table` out of the rows the key does not own that hold it
    /// in an [`ATTACHABLE`] column, but for those `keep` (parent, column) says stay.
    pub(super) fn let_go_of(
        &self,
        plan: &mut Plan,
        table: &str,
        child: Uuid,
        keep: impl Fn(Uuid, &'static str) -> bool,
    ) {
        for (parent_table, parent, column) in
            holders(self.nb, self.snap, self.info.get(table), child)
        {
            if !self.owns(&parent) && !keep(parent, column) {
                let_go(
                    plan,
                    parent_table,
                    Condition::uuid(parent),
                    parent.to_string(),
                    column,
                    child,
                );
            }
        }
    }

    /// Phase 9: the rows the key holds and no longer wants go: a root row explicitly
    /// (let go of first by the rows of other parties holding it), any other by taking
    /// the references to it out (the server then collects it); a stale child referred
    /// to by one of the key's rows goes with that reference.
    pub(super) fn delete_stale(&self, plan: &mut Plan, kept_changes: &mut KeptChanges) {
        let kept: HashSet<(&str, &str)> = self
            .wanted
            .iter()
            .map(|r| (r.table, r.identity.as_str()))
            .collect();
        let mut stale: Vec<(&str, &str, &Existing)> = self
            .existing
            .iter()
            .flat_map(|(t, rows)| rows.iter().map(move |(i, e)| (*t, i.as_str(), e)))
            .filter(|(t, i, e)| !kept.contains(&(*t, *i)) && !self.keep.contains(&e.uuid))
            .collect();
        stale.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        let needs_held = stale
            .iter()
            .any(|(t, _, _)| self.info.get(*t).is_some_and(|i| !i.schema.is_root));
        let held = if needs_held {
            self.held_by_the_key()
        } else {
            HashSet::new()
        };
        let kept_rows = match stale.is_empty() {
            true => Vec::new(),
            false => self.kept_rows(),
        };
        for (table, identity, e) in stale {
            let root = self.info.get(table).is_none_or(|t| t.schema.is_root);
            // Held by a row of the skipped base fragment: taken out of it, as that
            // row built whole would no longer hold it.
            let by_kept = self.kept_holders(&kept_rows, table, e.uuid);
            for (at, column) in &by_kept {
                let entry = kept_changes.entry(*at).or_default();
                entry
                    .entry(column.clone())
                    .or_default()
                    .0
                    .push(Atom::Uuid(e.uuid));
            }
            if root {
                self.let_go_of(plan, table, e.uuid, |_, _| false);
                plan.operations.push(Operation::Delete {
                    table: table.to_owned(),
                    conditions: vec![Condition::uuid(e.uuid)],
                });
            } else if !held.contains(&e.uuid) && by_kept.is_empty() {
                // Held by a row the key does not own: take the reference out of it.
                for (parent, column) in referrers(self.schema, table) {
                    let_go(
                        plan,
                        parent,
                        Condition::new(column, Function::Includes, Datum::uuid(e.uuid)),
                        format!("(any row referring to {table} {identity})"),
                        column,
                        e.uuid,
                    );
                }
            }
            plan.deleted.push(RowName {
                table: table.to_owned(),
                identity: identity.to_owned(),
            });
        }
    }

    /// Every row the key's rows refer to.
    pub(super) fn held_by_the_key(&self) -> HashSet<Uuid> {
        self.existing
            .values()
            .flat_map(|rows| rows.values())
            .flat_map(|e| {
                let refs = self
                    .info
                    .get(e.row.table())
                    .map(|i| i.refs.as_slice())
                    .unwrap_or(&[]);
                // A set is read where it is (a router's large `ports` are not made
                // flat); a map through its keys and values.
                refs.iter().flat_map(|c| {
                    let set = e.row.set(c);
                    let map = set.is_none().then(|| e.row.get(c)).flatten();
                    (set.into_iter().flat_map(|s| s.iter()))
                        .chain(map.into_iter().flat_map(atoms))
                        .filter_map(Atom::as_uuid)
                })
            })
            .collect()
    }
}

/// Takes `child` out of `column` of the rows of `parent_table` that `parent` selects
/// (rows the key does not own), named `parent_name` in the plan's account.
pub(super) fn let_go(
    plan: &mut Plan,
    parent_table: &str,
    parent: Condition,
    parent_name: String,
    column: &str,
    child: Uuid,
) {
    plan.foreign.push(ForeignMutation {
        row: RowName {
            table: parent_table.into(),
            identity: parent_name,
        },
        column: column.into(),
        inserted: 0,
        deleted: 1,
    });
    plan.operations.push(Operation::Mutate {
        table: parent_table.into(),
        conditions: vec![parent],
        mutations: vec![Mutation::new(column, Mutator::Delete, Datum::uuid(child))],
    });
}

/// The rows of the [`ATTACHABLE`] tables holding row `child` (of the table `info`
/// describes), with the column holding it.
pub(super) fn holders(
    nb: &NbIndexes,
    snap: &Snapshot,
    info: Option<&TableInfo>,
    child: Uuid,
) -> Vec<(&'static str, Uuid, &'static str)> {
    let mut out = Vec::new();
    for (parent_table, columns) in info.map(|i| i.held_in.as_slice()).unwrap_or(&[]) {
        for (uuid, row) in nb.holders(snap, parent_table, &child) {
            for &c in columns {
                let holds = row.set(c).is_some_and(|s| s.contains(&Atom::Uuid(child)));
                if holds {
                    out.push((*parent_table, uuid, c));
                }
            }
        }
    }
    out
}
