//! Every OVN_Northbound table through the typed model against a real ovsdb-server: a
//! row with every column set to a value other than its default is decoded into the
//! model, inserted through a typed transaction, read back typed, and compared.
//!
//! Rows the target refers to are inserted alongside (untyped), and rows of non-root
//! tables are given a referrer so that they survive the commit.

use std::collections::HashSet;

use integration_tests::{client, nb_server};
use nb_model::*;
use ovsdb_proto::model::{Database, Table};
use ovsdb_proto::schema::{BaseType, ColumnType, DatabaseSchema, Max, RefType};
use ovsdb_proto::typed::{resolve_named, Db};
use ovsdb_proto::{Atom, AtomicType, Datum, Operation, Row, Uuid};

struct Builder<'a> {
    schema: &'a DatabaseSchema,
    counter: i64,
    ops: Vec<(String, String, Row)>,
    /// Named rows something refers to strongly.
    kept: HashSet<String>,
}

impl Builder<'_> {
    fn next(&mut self) -> i64 {
        self.counter += 1;
        self.counter
    }

    fn atom(&mut self, base: &BaseType, pick: usize) -> Atom {
        let n = self.next();
        match base.atomic {
            AtomicType::Integer => {
                let lo = base.min_integer.unwrap_or(0);
                let hi = base.max_integer.unwrap_or(i64::MAX);
                let mut v = lo.saturating_add(n).min(hi);
                if v == 0 {
                    v = if hi > 0 { 1 } else { lo };
                }
                Atom::Integer(v)
            }
            AtomicType::Real => Atom::Real(1.5),
            AtomicType::Boolean => Atom::Boolean(true),
            AtomicType::String => match &base.enum_values {
                // The last values, so that they differ from the model's default (the first).
                Some(values) => values[values.len() - 1 - pick % values.len()].clone(),
                None => {
                    let mut s = format!("v{n}");
                    if let Some(max) = base.max_length {
                        s.truncate(max as usize);
                    }
                    while (s.len() as u64) < base.min_length.unwrap_or(0) {
                        s.push('x');
                    }
                    Atom::String(s.into())
                }
            },
            AtomicType::Uuid => match &base.ref_table {
                Some(target) => {
                    let name = self.insert(target, false, None);
                    if base.ref_type == RefType::Strong {
                        self.kept.insert(name.clone());
                    }
                    Atom::NamedUuid(name.into())
                }
                None => Atom::Uuid(Uuid::new_v4()),
            },
        }
    }

    fn value(&mut self, ty: &ColumnType) -> Datum {
        if let Some(v) = &ty.value {
            let (k, v) = (self.atom(&ty.key, 0), self.atom(v, 0));
            return Datum::map([(k, v)]);
        }
        let max = match ty.max {
            Max::Limited(m) => m as usize,
            Max::Unlimited => usize::MAX,
        };
        let mut n = 2.min(max).max(1);
        if let Some(values) = &ty.key.enum_values {
            n = n.min(values.len());
        }
        Datum::set((0..n).map(|i| self.atom(&ty.key, i)))
    }

    /// Builds and queues a row of `table`: every column when `full`, otherwise the
    /// columns that need a value (required ones and index columns). Returns its name.
    fn insert(&mut self, table: &str, full: bool, name: Option<&str>) -> String {
        let t = self.schema.table(table).unwrap();
        let indexed: HashSet<&String> = t.indexes.iter().flatten().collect();
        let mut row = Row::new();
        for c in t.columns.values() {
            if full || c.column_type.min >= 1 || indexed.contains(&c.name) {
                row.insert(c.name.clone(), self.value(&c.column_type));
            }
        }
        let name = name
            .map(str::to_owned)
            .unwrap_or_else(|| format!("r{}", self.next()));
        self.ops.push((table.to_owned(), name.clone(), row));
        name
    }

    /// Adds referrers for rows of non-root tables that nothing refers to strongly.
    fn keep_alive(&mut self) {
        loop {
            let orphan = self
                .ops
                .iter()
                .find(|(t, n, _)| !self.schema.table(t).unwrap().is_root && !self.kept.contains(n))
                .map(|(t, n, _)| (t.clone(), n.clone()));
            let Some((table, name)) = orphan else { return };
            // A column of another table that refers strongly to `table`; root tables first.
            let mut parents: Vec<(&str, &str, bool)> = Vec::new();
            for pt in self.schema.tables.values() {
                for c in pt.columns.values() {
                    let k = &c.column_type.key;
                    if k.ref_table.as_deref() == Some(table.as_str())
                        && k.ref_type == RefType::Strong
                        && c.column_type.value.is_none()
                    {
                        parents.push((&pt.name, &c.name, pt.is_root));
                    }
                }
            }
            parents.sort_by_key(|p| !p.2);
            let (ptable, pcol, _) = *parents
                .first()
                .unwrap_or_else(|| panic!("nothing can refer to {table}"));
            let (ptable, pcol) = (ptable.to_owned(), pcol.to_owned());
            let pname = self.insert(&ptable, false, None);
            let prow = &mut self.ops.last_mut().unwrap().2;
            prow.insert(pcol, Datum::set([Atom::NamedUuid(name.clone().into())]));
            let _ = pname;
            self.kept.insert(name);
        }
    }
}

async fn round_trip<T: Table + std::fmt::Debug>(schema: &DatabaseSchema) {
    let server = nb_server();
    let (c, _) = client(&server.unix_remote()).await;
    let db = Db::<OvnNorthbound>::connect(c).await.unwrap();

    let mut b = Builder {
        schema,
        counter: 0,
        ops: Vec::new(),
        kept: HashSet::new(),
    };
    b.insert(T::NAME, true, Some("target"));
    b.keep_alive();
    let original = b
        .ops
        .iter()
        .find(|(_, n, _)| n == "target")
        .unwrap()
        .2
        .clone();

    // Every column of the model is set, and to a value other than its default.
    let typed = T::from_row(Uuid::nil(), &original).unwrap_or_else(|e| panic!("{}: {e}", T::NAME));
    let default = T::default().to_row();
    assert_eq!(
        typed.to_row().len(),
        schema.table(T::NAME).unwrap().columns.len(),
        "{}",
        T::NAME
    );
    for (column, value) in typed.to_row() {
        let ty = &schema
            .table(T::NAME)
            .unwrap()
            .column(&column)
            .unwrap()
            .column_type;
        // A required enum with a single value has nothing but its default to hold.
        let only_one = ty.is_scalar() && ty.key.enum_values.as_ref().is_some_and(|v| v.len() == 1);
        if !only_one {
            assert_ne!(
                Some(&value),
                default.get(&column),
                "{}.{column} kept its default",
                T::NAME
            );
        }
        assert_eq!(
            Some(&value),
            original.get(&column),
            "{}.{column} changed in decoding",
            T::NAME
        );
    }

    let mut txn = db.transaction();
    let mut target = None;
    for (table, name, row) in b.ops {
        if name == "target" {
            target = Some(txn.insert_named(&typed, "target"));
        } else {
            txn.raw(Operation::insert_named(table, row, name));
        }
    }
    let result = txn
        .commit()
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", T::NAME));
    let uuid = result.uuid(&target.unwrap()).unwrap();

    let got = db.select([T::COLUMNS_UUID_EQ(uuid)]).await.unwrap();
    assert_eq!(got.len(), 1, "{} row did not survive the commit", T::NAME);
    let resolved: Row = original
        .iter()
        .map(|(k, v)| (k.clone(), resolve_named(v, &result)))
        .collect();
    let want = T::from_row(uuid, &resolved).unwrap();
    assert!(
        got[0] == want,
        "{}: read back\n{:?}\nexpected\n{:?}",
        T::NAME,
        got[0],
        want
    );
    assert_eq!(got[0].to_row(), resolved, "{}", T::NAME);
}

/// `_uuid == uuid` for any table.
trait UuidCond: Table {
    #[allow(non_snake_case)]
    fn COLUMNS_UUID_EQ(uuid: Uuid) -> ovsdb_proto::model::Cond<Self>;
}

impl<T: Table> UuidCond for T {
    fn COLUMNS_UUID_EQ(uuid: Uuid) -> ovsdb_proto::model::Cond<Self> {
        ovsdb_proto::model::Column::<T, Uuid>::new("_uuid").eq(uuid)
    }
}

macro_rules! every_table {
    ($schema:expr, $seen:expr; $($t:ident)*) => {
        $(
            round_trip::<$t>($schema).await;
            $seen.push(<$t as Table>::NAME);
        )*
    };
}

#[tokio::test]
async fn every_northbound_table_round_trips_with_every_column_set() {
    let schema = DatabaseSchema::from_file(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../schemas/ovn-nb.ovsschema"
    ))
    .unwrap();
    let mut seen: Vec<&str> = Vec::new();
    every_table!(&schema, seen;
        NbGlobal SampleCollector Sample Copp LogicalSwitch LogicalSwitchPort NetworkFunctionHealthCheck
        NetworkFunction NetworkFunctionGroup LogicalSwitchPortHealthCheck ForwardingGroup AddressSet
        PortGroup LoadBalancer LoadBalancerGroup LoadBalancerHealthCheck Acl QoS Mirror MirrorRule Meter
        MeterBand LogicalRouter LogicalRouterPort LogicalRouterStaticRoute LogicalRouterPolicy Nat
        DhcpOptions DhcpRelay Connection Dns Ssl GatewayChassis HaChassis HaChassisGroup Bfd
        StaticMacBinding ChassisTemplateVar SamplingApp
    );
    seen.sort();
    let mut all: Vec<&str> = OvnNorthbound::tables()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    all.sort();
    assert_eq!(seen, all, "every table of the model was tested");
}
