//! What the cache says changed: one row's [`Change`], its rows held as cached rows
//! (an [`Event`]) or as a model type (a typed event, or [`Event::decode`]).

use std::sync::Arc;

use uuid::Uuid;

use crate::model::Table;

use super::row::CachedRow;

/// The rows of one table by uuid.
pub type TableRows = imbl::OrdMap<Uuid, Arc<CachedRow>>;

/// What happened to one row. `R` is how the rows are held: cached rows (the default,
/// the cache's [`Event`]s) or a model type (`Arc<T>` in typed events, `T` from
/// [`Event::decode`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Change<R = Arc<CachedRow>> {
    /// A new row.
    Insert {
        /// The row.
        new: R,
    },
    /// A changed row (`modify`, in `update2`'s words), before and after.
    Modify {
        /// Before.
        old: R,
        /// After.
        new: R,
    },
    /// A deleted row, as it last was.
    Delete {
        /// The last version.
        old: R,
    },
}

/// One row's change in one table.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// The table.
    pub table: String,
    /// The row.
    pub uuid: Uuid,
    /// The change.
    pub change: Change,
}

impl Event {
    /// The change decoded into `T`, if the event is for `T`'s table: how a consumer
    /// handles the events of the tables it has models for.
    pub fn decode<T: Table>(&self) -> Option<Result<Change<T>, crate::model::DecodeError>> {
        if self.table != T::NAME {
            return None;
        }
        let d = |r: &CachedRow| T::from_row(self.uuid, r);
        Some((|| {
            Ok(match &self.change {
                Change::Insert { new } => Change::Insert { new: d(new)? },
                Change::Modify { old, new } => Change::Modify {
                    old: d(old)?,
                    new: d(new)?,
                },
                Change::Delete { old } => Change::Delete { old: d(old)? },
            })
        })())
    }
}
