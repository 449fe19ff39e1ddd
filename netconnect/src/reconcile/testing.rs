//! An NB held in a cache's own store ([`ovsdb_proto::cache::Store`]), filled by hand:
//! what the planner's and the fragment memo's tests plan and remember against, with no
//! server.

use std::collections::HashMap;
use std::sync::Arc;

use ovsdb_proto::cache::{CacheConfig, Store};
use ovsdb_proto::model::Table;
use ovsdb_proto::{Atom, DatabaseSchema, Datum, Row, Uuid};

use super::nb::NbIndexes;
use super::plan::Plan;
use super::planner::{PlanError, Planner};
use crate::topology::desired::{parse_foreign, Desired};

/// An NB held in a cache's store, with the reconciler's indexes.
pub(crate) struct Nb {
    pub(crate) store: Store,
    pub(crate) indexes: NbIndexes,
    pub(crate) planner: Planner,
    pub(crate) next: u128,
}

pub(crate) fn schema() -> Arc<DatabaseSchema> {
    Arc::new(
        DatabaseSchema::from_slice(include_bytes!("../../../schemas/ovn-nb.ovsschema"))
            .expect("the NB schema"),
    )
}

impl Nb {
    pub(crate) fn new() -> Nb {
        Nb::served_with(schema())
    }

    /// An empty NB served with `schema`.
    pub(crate) fn served_with(schema: Arc<DatabaseSchema>) -> Nb {
        let mut config = CacheConfig::new(vec![], "OVN_Northbound", &[]);
        let indexes = NbIndexes::register(&mut config);
        Nb {
            store: config.store(&schema).expect("a store"),
            indexes,
            planner: Planner::new(schema),
            next: 1,
        }
    }

    pub(crate) fn uuid(&mut self) -> Uuid {
        self.next += 1;
        Uuid::from_u128(self.next)
    }

    /// Inserts a row as another party wrote it; returns its uuid.
    pub(crate) fn put<T: Table>(&mut self, row: &T) -> Uuid {
        let uuid = self.uuid();
        self.store.insert(T::NAME, uuid, &row.to_row()).unwrap();
        uuid
    }

    /// Writes every row `d` wants as the server would hold it after the key's
    /// transaction (placeholders resolved); returns each row's uuid by placeholder.
    pub(crate) fn write(&mut self, d: &Desired) -> HashMap<String, Uuid> {
        let mut uuids = HashMap::new();
        for r in d.rows() {
            let u = self.uuid();
            uuids.insert(r.placeholder.clone(), u);
        }
        for r in d.rows() {
            let snap = self.store.snapshot();
            let resolve = |a: &Atom| match a {
                Atom::NamedUuid(p) => Atom::Uuid(uuids.get(&**p).copied().unwrap_or_else(|| {
                    let (t, n) = parse_foreign(p).expect("a foreign placeholder");
                    self.indexes.named(&snap, t, n)[0].0
                })),
                a => a.clone(),
            };
            let row: Row = r
                .row
                .iter()
                .map(|(c, v)| {
                    let v = match v {
                        Datum::Set(s) => Datum::set(s.iter().map(resolve).collect::<Vec<_>>()),
                        Datum::Map(m) => Datum::map(
                            m.iter()
                                .map(|(k, v)| (resolve(k), resolve(v)))
                                .collect::<Vec<_>>(),
                        ),
                    };
                    (c.clone(), v)
                })
                .collect();
            self.store
                .insert(r.table, uuids[&r.placeholder], &row)
                .unwrap();
        }
        uuids
    }

    /// Changes one column of row `uuid` of `table`, as another party would.
    pub(crate) fn set(&mut self, table: &str, uuid: Uuid, column: &str, value: Datum) {
        let mut row = self.store.snapshot().get(table, &uuid).unwrap().to_row();
        row.insert(column.into(), value);
        self.store.insert(table, uuid, &row).unwrap();
    }

    pub(crate) fn plan(&self, d: &Desired) -> Result<Plan, PlanError> {
        self.planner.plan(d, &self.store.snapshot(), &self.indexes)
    }
}
