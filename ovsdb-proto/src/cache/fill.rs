//! A cache's store filled by hand: the snapshots a [`Cache`](super::Cache) would publish
//! (with the configuration's unique, typed and row indexes), built from rows given
//! here instead of a server's monitor. For unit tests of code that reads snapshots
//! (as kube-runtime's public store writer serves its users), and for tools that replay a
//! dump.

use std::collections::BTreeMap;
use std::sync::Arc;

use uuid::Uuid;

use super::decode::{RowChange, TableChanges};
use super::row::{CachedRow, Layouts};
use super::store::Writer;
use super::{CacheConfig, Snapshot};
use crate::datum::Row;
use crate::error::Error;
use crate::schema::DatabaseSchema;

/// The store of a cache of `config` against a server with `schema`, filled by hand.
///
/// ```
/// # use ovsdb_proto::{cache::CacheConfig, DatabaseSchema, Datum, Row, Uuid};
/// let schema = DatabaseSchema::from_json(&serde_json::json!({"name": "D", "version": "1.0.0",
///     "tables": {"T": {"columns": {"name": {"type": "string"}}}}}))?;
/// let mut config = CacheConfig::new(vec![], "D", &["T"]);
/// let by_name = config.index("T", "name", |r| r.get("name").cloned().into_iter().collect());
/// let mut store = config.store(&schema)?;
/// let mut row = Row::new();
/// row.insert("name".into(), Datum::scalar("a"));
/// store.insert("T", Uuid::from_u128(1), &row)?;
/// let snapshot = store.snapshot();
/// assert_eq!(snapshot.lookup_rows(&by_name, &Datum::scalar("a"))?.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Store {
    writer: Writer,
    layouts: Layouts,
}

impl CacheConfig {
    /// The store a cache of this configuration keeps, against a server with `schema`,
    /// empty, to be filled by hand ([`Store`]). The tables and columns the server lacks
    /// are left out, as the cache leaves them out.
    pub fn store(&self, schema: &DatabaseSchema) -> Result<Store, Error> {
        let (_, layouts, _) = super::server::fit(&self.database, &self.tables, schema)?;
        Ok(Store {
            writer: Writer::new(self.typed.clone(), self.row_indexes.clone()),
            layouts,
        })
    }
}

impl Store {
    /// Inserts (or replaces) row `uuid` of `table`. The row's values are checked
    /// against their columns, as a server's would be; a table or column not cached, or
    /// a value that does not fit, is an error and changes nothing.
    pub fn insert(&mut self, table: &str, uuid: Uuid, row: &Row) -> Result<(), Error> {
        let layout = self.layout(table)?;
        let mut columns = Vec::with_capacity(row.len());
        for (column, value) in row {
            let i = layout.position(column).ok_or_else(|| {
                Error::config(format!("table {table} has no cached column {column}"))
            })?;
            layout.check(&uuid, i, value).map_err(Error::config)?;
            columns.push((i, value.clone()));
        }
        let row = CachedRow::from_columns(&layout, &mut columns);
        self.apply(layout, uuid, RowChange::New(row))
    }

    /// Deletes row `uuid` of `table`, if it is there.
    pub fn delete(&mut self, table: &str, uuid: Uuid) -> Result<(), Error> {
        let layout = self.layout(table)?;
        self.apply(layout, uuid, RowChange::Delete)
    }

    /// The snapshot as filled so far: what a cache's reader would see.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.writer.shared().load()
    }

    /// The tables the store holds, with their cached columns.
    pub fn tables(&self) -> BTreeMap<&str, Vec<&str>> {
        self.layouts
            .iter()
            .map(|(t, l)| (t.as_str(), l.columns().collect()))
            .collect()
    }

    fn layout(&self, table: &str) -> Result<Arc<super::row::Layout>, Error> {
        self.layouts
            .get(table)
            .cloned()
            .ok_or_else(|| Error::config(format!("table {table} is not cached")))
    }

    fn apply(
        &mut self,
        layout: Arc<super::row::Layout>,
        uuid: Uuid,
        change: RowChange,
    ) -> Result<(), Error> {
        self.writer
            .apply(vec![TableChanges {
                layout,
                rows: vec![(uuid, change)],
            }])
            .map(drop)
            .map_err(Error::config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datum::Datum;

    fn store() -> Store {
        let schema =
            DatabaseSchema::from_json(&serde_json::json!({"name": "D", "version": "1.0.0",
            "tables": {"T": {"columns": {
                "name": {"type": "string"},
                "n": {"type": {"key": {"type": "integer", "maxInteger": 10}}}
            }, "indexes": [["name"]]}}}))
            .unwrap();
        CacheConfig::new(vec![], "D", &["T"])
            .store(&schema)
            .unwrap()
    }

    fn row(name: &str, n: i64) -> Row {
        [
            ("name".to_string(), Datum::scalar(name)),
            ("n".to_string(), Datum::scalar(n)),
        ]
        .into()
    }

    #[test]
    fn rows_filled_by_hand_are_found_as_a_cache_finds_them() {
        let mut s = store();
        s.insert("T", Uuid::from_u128(1), &row("a", 1)).unwrap();
        s.insert("T", Uuid::from_u128(2), &row("b", 2)).unwrap();
        let snap = s.snapshot();
        assert_eq!(snap.len(), 2);
        let a = snap.find("T", &[("name", Datum::scalar("a"))]).unwrap();
        assert_eq!(a.get("n"), Some(&Datum::scalar(1)));
        s.delete("T", Uuid::from_u128(1)).unwrap();
        assert!(s
            .snapshot()
            .find("T", &[("name", Datum::scalar("a"))])
            .is_none());
        assert_eq!(snap.len(), 2, "a snapshot taken before never changes");
        assert_eq!(s.tables()["T"], ["n", "name"]);
    }

    #[test]
    fn a_row_that_does_not_fit_changes_nothing_and_says_why() {
        let mut s = store();
        let e = s
            .insert("T", Uuid::from_u128(1), &row("a", 11))
            .unwrap_err();
        assert!(e.to_string().contains("11"), "{e}");
        let e = s.insert("U", Uuid::from_u128(1), &row("a", 1)).unwrap_err();
        assert!(e.to_string().contains("table U is not cached"), "{e}");
        let mut extra = row("a", 1);
        extra.insert("x".into(), Datum::scalar(1));
        let e = s.insert("T", Uuid::from_u128(1), &extra).unwrap_err();
        assert!(e.to_string().contains("no cached column x"), "{e}");
        assert!(s.snapshot().is_empty());
    }
}
