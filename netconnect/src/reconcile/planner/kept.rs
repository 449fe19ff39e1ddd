//! The rows of a skipped base fragment ([`DesiredRow::kept`]): neither compared nor
//! written, only the rows built now put into their sets and the key's rows no longer
//! wanted taken out of them.

use super::*;

impl<'a> Planning<'a> {
    /// The row of the skipped base fragment at position `at` of the key's rows, as the
    /// NB holds it.
    pub(super) fn kept_row(&self, at: usize) -> Option<(&'a DesiredRow, Uuid, Arc<CachedRow>)> {
        let r = self.desired.rows().nth(at).filter(|r| r.kept)?;
        let uuid = self.resolved.get(r.placeholder.as_str())?.as_uuid()?;
        let row = self.snap.get(r.table, &uuid)?;
        Some((r, uuid, row))
    }

    /// Phase 6b: what the rows built now put into the sets of the rows of a skipped
    /// base fragment ([`Desired::growth`]) that they lack.
    pub(super) fn grow_kept(&self) -> Result<KeptChanges, PlanError> {
        let mut changes = KeptChanges::new();
        for g in self.desired.growth() {
            let Some((r, _, row)) = self.kept_row(g.row) else {
                let r = self.desired.rows().nth(g.row);
                return Err(PlanError::MissingDependency {
                    table: r.map_or("?", |r| r.table).to_owned(),
                    name: r.map(|r| r.identity.clone()).unwrap_or_default(),
                });
            };
            debug_assert!(r.kept);
            let have = row.set(&g.column);
            let mut add = Vec::new();
            for p in &g.elements {
                // The rows built now resolve to a uuid or a named uuid of this plan.
                let a =
                    self.resolved
                        .get(p.as_str())
                        .ok_or_else(|| PlanError::MissingDependency {
                            table: r.table.to_owned(),
                            name: p.clone(),
                        })?;
                if !have.is_some_and(|h| h.contains(a)) {
                    add.push(a.clone());
                }
            }
            if !add.is_empty() {
                let entry = changes.entry(g.row).or_default();
                entry.entry(g.column.clone()).or_default().1.extend(add);
            }
        }
        Ok(changes)
    }

    /// Phase 10: the mutations of the skipped base fragment's rows, each told as an
    /// update of its columns (as the row built whole would have been).
    pub(super) fn change_kept(&self, plan: &mut Plan, changes: KeptChanges) {
        for (at, columns) in changes {
            let Some((r, uuid, _)) = self.kept_row(at) else {
                continue;
            };
            let names: Vec<String> = columns.keys().cloned().collect();
            let mut muts = Vec::new();
            for (column, (drop, add)) in columns {
                if !drop.is_empty() {
                    let drop = Datum::set(drop);
                    muts.push(Mutation::new(column.clone(), Mutator::Delete, drop));
                }
                if !add.is_empty() {
                    muts.push(Mutation::new(column, Mutator::Insert, Datum::set(add)));
                }
            }
            plan.operations.push(Operation::Mutate {
                table: r.table.into(),
                conditions: vec![Condition::uuid(uuid)],
                mutations: muts,
            });
            plan.updated.push((
                RowName {
                    table: r.table.into(),
                    identity: r.identity.clone(),
                },
                names,
            ));
        }
    }

    /// The rows of the skipped base fragment as the NB holds them, with their
    /// positions.
    pub(super) fn kept_rows(&self) -> Vec<(usize, &'a DesiredRow, Arc<CachedRow>)> {
        let kept = self.desired.rows().enumerate().filter(|(_, r)| r.kept);
        kept.filter_map(|(at, _)| self.kept_row(at).map(|(r, _, row)| (at, r, row)))
            .collect()
    }

    /// Of the rows of the skipped base fragment `kept` ([`Self::kept_rows`]), those
    /// holding `child` (of `table`) in a set of references, with the column.
    pub(super) fn kept_holders(
        &self,
        kept: &[(usize, &DesiredRow, Arc<CachedRow>)],
        table: &str,
        child: Uuid,
    ) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        let child = Atom::Uuid(child);
        for (at, r, row) in kept {
            let at = *at;
            for c in &self.info[r.table].ref_sets {
                let refers = self.info[r.table]
                    .schema
                    .column(c)
                    .is_some_and(|cs| cs.column_type.key.ref_table.as_deref() == Some(table));
                if refers && row.set(c).is_some_and(|s| s.contains(&child)) {
                    out.push((at, c.clone()));
                }
            }
        }
        out
    }
}
