//! What the cache says changed: one row's change as cached rows ([`Event`]), or
//! decoded into a model type ([`TypedChange`]).

use std::sync::Arc;

use uuid::Uuid;

use crate::model::Table;

use super::row::CachedRow;

/// The rows of one table by uuid.
pub type TableRows = imbl::OrdMap<Uuid, Arc<CachedRow>>;

/// What happened to one row.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// A new row.
    Insert {
        /// The row.
        new: Arc<CachedRow>,
    },
    /// A changed row (`modify`, in `update2`'s words), before and after.
    Modify {
        /// Before.
        old: Arc<CachedRow>,
        /// After.
        new: Arc<CachedRow>,
    },
    /// A deleted row, as it last was.
    Delete {
        /// The last version.
        old: Arc<CachedRow>,
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

/// A change decoded into a model type.
#[derive(Clone, Debug, PartialEq)]
pub enum TypedChange<T> {
    /// A new row.
    Insert {
        /// The row.
        new: T,
    },
    /// A changed row (`modify`, in `update2`'s words).
    Modify {
        /// Before.
        old: T,
        /// After.
        new: T,
    },
    /// A deleted row, as it last was.
    Delete {
        /// The last version.
        old: T,
    },
}

impl Event {
    /// The change decoded into `T`, if the event is for `T`'s table: how a consumer
    /// handles the events of the tables it has models for.
    pub fn decode<T: Table>(&self) -> Option<Result<TypedChange<T>, crate::model::DecodeError>> {
        if self.table != T::NAME {
            return None;
        }
        let d = |r: &CachedRow| T::from_row(self.uuid, r);
        Some((|| {
            Ok(match &self.change {
                Change::Insert { new } => TypedChange::Insert { new: d(new)? },
                Change::Modify { old, new } => TypedChange::Modify {
                    old: d(old)?,
                    new: d(new)?,
                },
                Change::Delete { old } => TypedChange::Delete { old: d(old)? },
            })
        })())
    }
}
