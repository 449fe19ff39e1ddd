//! What one reconcile of a key would write: the operations of its one transaction, and
//! an account of them for people (`--plan`, `--once` output, logs).

use std::fmt;

use ovsdb_proto::Operation;

use crate::topology::desired::{Owner, Scope};

/// A row's table and identity (its name, or its owner-scoped identity).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RowName {
    /// The table.
    pub table: String,
    /// The identity.
    pub identity: String,
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
    /// Changes to rows the key does not own.
    pub foreign: Vec<ForeignMutation>,
    /// How many desired rows were compared with the NB.
    pub compared: usize,
    /// What the key's rows lack ([`crate::topology::Desired::incomplete`]).
    pub incomplete: Vec<String>,
    /// The wanted rows already in the NB: table, identity, uuid.
    pub existing: Vec<(&'static str, String, ovsdb_proto::Uuid)>,
    /// After [`crate::reconcile::Reconciler::apply`]: true when, from planning until
    /// the cache showed the transaction, the key's rows changed only as the transaction
    /// changed them, so the changes the cache reported meanwhile were this reconcile's
    /// own and need no second look.
    pub only_own_changes: bool,
    /// The positions in `operations` of the inserts, in the order of `inserted`.
    pub inserts: Vec<usize>,
}

impl Plan {
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
        if !self.foreign.is_empty() {
            s.push_str(&format!(" (foreign rows mutated: {})", self.foreign.len()));
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
            writeln!(f, "  update {r}: {}", cols.join(", "))?;
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
        for note in &self.incomplete {
            writeln!(f, "  incomplete: {note}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Plan;

    #[test]
    fn what_a_key_could_not_build_is_printed_with_its_plan() {
        let plan = Plan {
            incomplete: vec!["nodes a, b share one NB".into()],
            ..Default::default()
        };
        assert_eq!(plan.to_string(), "  incomplete: nodes a, b share one NB\n");
    }
}
