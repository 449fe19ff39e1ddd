//! A model's database on a server: typed selects and transactions, and what to do when
//! the server's schema is not the model's (schema skew, [`super::skew`]).
//!
//! [`Db::connect`] reads the server's schema once and compares it with the model:
//! tables and columns the server lacks, tables and columns the model lacks, and columns
//! whose types differ ([`SchemaSkew`]). From then on, columns the server lacks are left
//! out of selects and out of inserts and updates when the model holds their default;
//! writing a value to such a column is an error naming it, raised before anything is
//! sent.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use uuid::Uuid;

use crate::client::Client;
use crate::datum::{Datum, Row};
use crate::error::Error;
use crate::model::{changed_columns, AnyColumn, Cond, Database, Mut, Ref, Table};
use crate::ops::{Condition, Operation, OperationResult, WaitUntil};
use crate::schema::DatabaseSchema;

use super::skew::SchemaSkew;

/// A connection used through the typed model `D`: one client's
/// ([`Db::connect`], [`Db::with_schema`]), or whichever connection a cache is synced on
/// at the moment a transaction is sent ([`Cache::db`](crate::cache::Cache::db)), so
/// that a handle kept across a failover follows the cache to the new server.
pub struct Db<D> {
    conn: Conn,
    skew: Arc<SchemaSkew>,
    _model: PhantomData<fn() -> D>,
}

impl<D> Clone for Db<D> {
    fn clone(&self) -> Self {
        Db {
            conn: self.conn.clone(),
            skew: self.skew.clone(),
            _model: PhantomData,
        }
    }
}

/// Where a [`Db`]'s transactions go.
#[derive(Clone)]
enum Conn {
    /// One client, for the handle's life.
    Fixed(Client),
    /// The connection of the moment, with the schema it was compared against: a
    /// cache's, which reconnects.
    Current {
        client: watch::Receiver<Option<Client>>,
        schema: watch::Receiver<Option<Arc<DatabaseSchema>>>,
        /// The last schema compared, and its skew.
        compared: Arc<Mutex<(Arc<DatabaseSchema>, Arc<SchemaSkew>)>>,
    },
}

impl Conn {
    fn client(&self) -> Result<Client, Error> {
        match self {
            Conn::Fixed(c) => Ok(c.clone()),
            Conn::Current { client, .. } => client
                .borrow()
                .clone()
                .ok_or_else(Error::cache_not_connected),
        }
    }
}

impl<D: Database> Db<D> {
    /// Reads the server's schema for `D` and compares it with the model. A difference is
    /// not an error: it is logged once here and kept in [`Db::skew`].
    pub async fn connect(client: Client) -> Result<Db<D>, Error> {
        let schema = client.get_schema(D::NAME).await?;
        let skew = SchemaSkew::compare(&D::tables(), D::NAME, D::VERSION, &schema);
        if !skew.is_empty() {
            tracing::info!(
                database = D::NAME,
                model = D::VERSION,
                server = %skew.server_version,
                missing_tables = ?skew.missing_tables,
                missing_columns = ?skew.missing_columns,
                mismatched_columns = ?skew.mismatched_columns,
                unknown_tables = skew.unknown_tables.len(),
                "server schema differs from the model"
            );
        }
        Ok(Db {
            conn: Conn::Fixed(client),
            skew: Arc::new(skew),
            _model: PhantomData,
        })
    }

    /// A handle over `client` for a server whose schema is `schema` (read already),
    /// without asking the server again.
    pub fn with_schema(client: Client, schema: &DatabaseSchema) -> Db<D> {
        let skew = SchemaSkew::compare(&D::tables(), D::NAME, D::VERSION, schema);
        Db {
            conn: Conn::Fixed(client),
            skew: Arc::new(skew),
            _model: PhantomData,
        }
    }

    /// A handle whose transactions go over `client`'s connection of the moment, built
    /// against `schema`'s schema of the moment (a cache's: it fails, retryably, while
    /// there is none).
    pub(crate) fn following(
        client: watch::Receiver<Option<Client>>,
        schema: watch::Receiver<Option<Arc<DatabaseSchema>>>,
    ) -> Result<Db<D>, Error> {
        let now = schema
            .borrow()
            .clone()
            .ok_or_else(Error::cache_not_connected)?;
        let skew = Arc::new(SchemaSkew::compare(&D::tables(), D::NAME, D::VERSION, &now));
        Ok(Db {
            conn: Conn::Current {
                client,
                schema,
                compared: Arc::new(Mutex::new((now, skew.clone()))),
            },
            skew,
            _model: PhantomData,
        })
    }

    /// How the server's schema differs from the model's (for a handle following a
    /// cache: the server's when the handle was made or last began a transaction).
    pub fn skew(&self) -> &SchemaSkew {
        &self.skew
    }

    /// The client transactions go over now (for a handle following a cache: fails,
    /// retryably, while the cache has no connection).
    pub fn client(&self) -> Result<Client, Error> {
        self.conn.client()
    }

    /// This handle as of now: a handle following a cache takes the skew of the
    /// schema the cache is synced with (compared again only when that changed).
    fn current(&self) -> Db<D> {
        let mut db = self.clone();
        if let Conn::Current {
            schema, compared, ..
        } = &self.conn
        {
            let Some(now) = schema.borrow().clone() else {
                return db;
            };
            let mut c = compared.lock().unwrap_or_else(|p| p.into_inner());
            if !Arc::ptr_eq(&c.0, &now) {
                // Once per sync with a server (each publishes its schema anew).
                let skew = SchemaSkew::compare(&D::tables(), D::NAME, D::VERSION, &now);
                *c = (now, Arc::new(skew));
            }
            db.skew = c.1.clone();
        }
        db
    }

    /// Starts building a transaction.
    pub fn transaction(&self) -> Transaction<D> {
        Transaction {
            db: self.current(),
            ops: Vec::new(),
            inserted: Vec::new(),
            error: None,
            next_name: 0,
        }
    }

    /// A monitor request for table `T` naming the model's columns that the server has,
    /// so that a monitor of an older server does not ask for columns it lacks.
    pub fn monitor_request<T: Table>(&self) -> Result<crate::monitor::MonitorRequest, Error> {
        if !self.skew.has_table(T::NAME) {
            return Err(self.skew.lacks_table(T::NAME));
        }
        Ok(crate::monitor::MonitorRequest::columns(
            T::columns()
                .iter()
                .filter(|c| self.skew.has_column(T::NAME, c.name))
                .map(|c| c.name),
        ))
    }

    /// Reads the rows of `T` that meet every condition.
    pub async fn select<T: Table>(
        &self,
        conditions: impl IntoIterator<Item = Cond<T>>,
    ) -> Result<Vec<T>, Error> {
        let mut txn = self.transaction();
        let s = txn.select(conditions);
        let result = txn.commit().await?;
        result.rows(&s)
    }
}

/// The handle of a `select` in a [`Transaction`], to read its rows from the result.
#[derive(Debug)]
pub struct Selected<T> {
    index: usize,
    _table: PhantomData<fn() -> T>,
}

/// The handle of an update, mutate or delete, to read how many rows it matched.
#[derive(Clone, Copy, Debug)]
pub struct Counted(usize);

/// A transaction built from typed rows, columns and conditions.
pub struct Transaction<D> {
    db: Db<D>,
    ops: Vec<Operation>,
    /// `uuid-name` and operation index of each insert.
    inserted: Vec<(String, usize)>,
    /// The first problem found while building; reported by `commit`.
    error: Option<Error>,
    next_name: usize,
}

impl<D: Database> Transaction<D> {
    fn fail(&mut self, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    fn check_table<T: Table>(&mut self) -> bool {
        if self.db.skew.has_table(T::NAME) {
            true
        } else {
            let e = self.db.skew.lacks_table(T::NAME);
            self.fail(e);
            false
        }
    }

    /// Keeps the columns the server has; a column it lacks must hold its default.
    /// When the server has every column of `T` (the usual case) the row is sent as it is.
    fn server_row<T: Table>(&mut self, mut row: Row) -> Row {
        if !self.db.skew.lacks_columns_of(T::NAME) {
            return row;
        }
        let default = T::default().to_row();
        let skew = self.db.skew.clone();
        let mut first_error = None;
        row.retain(|column, value| {
            if skew.has_column(T::NAME, column) {
                return true;
            }
            if default.get(column) != Some(value) && first_error.is_none() {
                first_error = Some(skew.lacks(T::NAME, column));
            }
            false
        });
        if let Some(e) = first_error {
            self.fail(e);
        }
        row
    }

    fn conditions<T: Table>(
        &mut self,
        conditions: impl IntoIterator<Item = Cond<T>>,
    ) -> Vec<Condition> {
        let conditions: Vec<Condition> = conditions.into_iter().map(Cond::into_condition).collect();
        for c in &conditions {
            if c.column != "_uuid" && !self.db.skew.has_column(T::NAME, &c.column) {
                let e = self.db.skew.lacks(T::NAME, &c.column);
                self.fail(e);
            }
        }
        conditions
    }

    /// Inserts `row` and returns a reference to it for later operations of this
    /// transaction (a named-uuid); its uuid is in the result.
    pub fn insert<R: crate::model::AsRow>(&mut self, row: &R) -> Ref<R::Table> {
        self.next_name += 1;
        let name = format!("row{}", self.next_name);
        self.insert_named(row, &name)
    }

    /// Inserts `row` (a row, or the `Arc` of one a cache hands out) under the
    /// `uuid-name` `name`.
    pub fn insert_named<R: crate::model::AsRow>(&mut self, row: &R, name: &str) -> Ref<R::Table> {
        type T<R> = <R as crate::model::AsRow>::Table;
        let row = row.as_row();
        if self.check_table::<T<R>>() {
            let values = self.server_row::<T<R>>(row.to_row());
            self.inserted.push((name.to_owned(), self.ops.len()));
            self.ops
                .push(Operation::insert_named(T::<R>::NAME, values, name));
        }
        Ref::named(name)
    }

    /// Updates the row `new.uuid()` with the columns that differ between `old` and `new`
    /// (and nothing else, so a concurrent writer's other columns are kept). Either may
    /// be the `Arc<T>` a cache hands out ([`AsRow`](crate::model::AsRow)).
    pub fn update<O, N>(&mut self, old: &O, new: &N) -> Counted
    where
        O: crate::model::AsRow,
        N: crate::model::AsRow<Table = O::Table>,
    {
        let (old, new) = (old.as_row(), new.as_row());
        let changed = changed_columns(old, new);
        let conditions = vec![Condition::uuid(new.uuid())];
        self.update_columns::<O::Table>(conditions, changed)
    }

    /// Sets the given columns of `values` (a row, or the `Arc` of one a cache hands
    /// out) in every row meeting the conditions:
    /// `txn.update_where([T::COLUMNS.name.eq(n)], &row, &[T::COLUMNS.other_config.into()])`.
    pub fn update_where<R: crate::model::AsRow>(
        &mut self,
        conditions: impl IntoIterator<Item = Cond<R::Table>>,
        values: &R,
        columns: &[AnyColumn<R::Table>],
    ) -> Counted {
        type T<R> = <R as crate::model::AsRow>::Table;
        let all = values.as_row().to_row();
        let mut row = Row::new();
        for c in columns.iter().map(AnyColumn::name) {
            match all.get(c) {
                Some(v) => {
                    row.insert(c.to_string(), v.clone());
                }
                None => self.fail(Error::config(format!(
                    "table {} has no column {c}",
                    T::<R>::NAME
                ))),
            }
        }
        let conditions = self.conditions(conditions);
        self.update_columns::<T<R>>(conditions, row)
    }

    fn update_columns<T: Table>(&mut self, conditions: Vec<Condition>, row: Row) -> Counted {
        if self.check_table::<T>() {
            for c in row.keys() {
                if !self.db.skew.has_column(T::NAME, c) {
                    let e = self.db.skew.lacks(T::NAME, c);
                    self.fail(e);
                }
            }
        }
        self.ops.push(Operation::Update {
            table: T::NAME.into(),
            conditions,
            row,
        });
        Counted(self.ops.len() - 1)
    }

    /// Applies mutations to every row meeting the conditions: set and map elements are
    /// added or removed in place, so writers touching different keys do not overwrite
    /// each other.
    pub fn mutate<T: Table>(
        &mut self,
        conditions: impl IntoIterator<Item = Cond<T>>,
        mutations: impl IntoIterator<Item = Mut<T>>,
    ) -> Counted {
        self.check_table::<T>();
        let conditions = self.conditions(conditions);
        let mutations: Vec<_> = mutations.into_iter().map(Mut::into_mutation).collect();
        for m in &mutations {
            if !self.db.skew.has_column(T::NAME, &m.column) {
                let e = self.db.skew.lacks(T::NAME, &m.column);
                self.fail(e);
            }
        }
        self.ops.push(Operation::Mutate {
            table: T::NAME.into(),
            conditions,
            mutations,
        });
        Counted(self.ops.len() - 1)
    }

    /// Deletes every row meeting the conditions.
    pub fn delete<T: Table>(&mut self, conditions: impl IntoIterator<Item = Cond<T>>) -> Counted {
        self.check_table::<T>();
        let conditions = self.conditions(conditions);
        self.ops.push(Operation::Delete {
            table: T::NAME.into(),
            conditions,
        });
        Counted(self.ops.len() - 1)
    }

    /// Reads the rows meeting the conditions (the columns the server has).
    pub fn select<T: Table>(
        &mut self,
        conditions: impl IntoIterator<Item = Cond<T>>,
    ) -> Selected<T> {
        self.check_table::<T>();
        let conditions = self.conditions(conditions);
        let mut columns: Vec<String> = T::columns()
            .iter()
            .filter(|c| self.db.skew.has_column(T::NAME, c.name))
            .map(|c| c.name.to_owned())
            .collect();
        columns.push("_uuid".into());
        self.ops.push(Operation::Select {
            table: T::NAME.into(),
            conditions,
            columns: Some(columns),
        });
        Selected {
            index: self.ops.len() - 1,
            _table: PhantomData,
        }
    }

    /// Makes the transaction fail unless the row `row.uuid()` still holds the values of
    /// `row` in `columns` (every column the server has, when empty): optimistic
    /// concurrency for a read-modify-write.
    pub fn wait_unchanged<R: crate::model::AsRow>(
        &mut self,
        row: &R,
        columns: &[AnyColumn<R::Table>],
    ) {
        type T<R> = <R as crate::model::AsRow>::Table;
        let row = row.as_row();
        self.check_table::<T<R>>();
        let all = row.to_row();
        let columns: Vec<String> = if columns.is_empty() {
            all.keys()
                .filter(|c| self.db.skew.has_column(T::<R>::NAME, c))
                .cloned()
                .collect()
        } else {
            columns.iter().map(|c| c.name().to_owned()).collect()
        };
        let mut expected = Row::new();
        for c in &columns {
            match all.get(c) {
                Some(v) if self.db.skew.has_column(T::<R>::NAME, c) => {
                    expected.insert(c.clone(), v.clone());
                }
                _ => {
                    let e = self.db.skew.lacks(T::<R>::NAME, c);
                    self.fail(e);
                }
            }
        }
        self.ops.push(Operation::Wait {
            table: T::<R>::NAME.into(),
            timeout: Some(0),
            conditions: vec![Condition::uuid(row.uuid())],
            columns,
            until: WaitUntil::Equal,
            rows: vec![expected],
        });
    }

    /// Adds an untyped operation (an insert's `uuid-name` is resolved in the result
    /// like a typed insert's).
    pub fn raw(&mut self, op: Operation) -> usize {
        if let Operation::Insert {
            uuid_name: Some(name),
            ..
        } = &op
        {
            self.inserted.push((name.clone(), self.ops.len()));
        }
        self.ops.push(op);
        self.ops.len() - 1
    }

    /// Records a comment in the database log.
    pub fn comment(&mut self, text: impl Into<String>) {
        self.ops.push(Operation::Comment(text.into()));
    }

    /// The operations built so far.
    pub fn operations(&self) -> &[Operation] {
        &self.ops
    }

    /// Sends the transaction. A problem found while building (a column the server
    /// lacks) fails here without sending anything.
    pub async fn commit(self) -> Result<TransactionResult, Error> {
        self.send().await
    }

    /// [`commit`](Self::commit) without giving the transaction up, so that one not
    /// sent (the connection was down) can be sent again.
    pub(crate) async fn send(&self) -> Result<TransactionResult, Error> {
        self.send_marked().await.map(|(r, _)| r)
    }

    /// [`Transaction::send`], and the connection's [`Client::note_mark`] when the reply
    /// was in.
    pub(crate) async fn send_marked(&self) -> Result<(TransactionResult, (u64, u64)), Error> {
        if let Some(e) = &self.error {
            return Err(e.duplicate());
        }
        let client = self.db.conn.client()?;
        let results = client.transact(D::NAME, &self.ops).await?;
        let mark = client.note_mark();
        let named = self
            .inserted
            .iter()
            .filter_map(|(name, i)| {
                results
                    .get(*i)
                    .and_then(OperationResult::uuid)
                    .map(|u| (name.clone(), u))
            })
            .collect();
        Ok((TransactionResult { results, named }, mark))
    }
}

/// The outcome of a committed [`Transaction`].
#[derive(Clone, Debug)]
pub struct TransactionResult {
    results: Vec<OperationResult>,
    named: HashMap<String, Uuid>,
}

impl TransactionResult {
    /// The uuid the server gave a row inserted by this transaction.
    pub fn uuid<T>(&self, inserted: &Ref<T>) -> Option<Uuid> {
        match inserted.target() {
            crate::model::RefTarget::Named(n) => self.named.get(n).copied(),
            crate::model::RefTarget::Uuid(u) => Some(*u),
        }
    }

    /// The rows a select read, decoded into the model.
    pub fn rows<T: Table>(&self, selected: &Selected<T>) -> Result<Vec<T>, Error> {
        let rows = self
            .results
            .get(selected.index)
            .and_then(OperationResult::rows)
            .ok_or_else(|| Error::protocol("select result missing from the transaction reply"))?;
        rows.iter()
            .map(|row| {
                let uuid = crate::model::__row_uuid(row).ok_or_else(|| {
                    Error::protocol(format!("a {} row came back without _uuid", T::NAME))
                })?;
                T::from_row(uuid, row).map_err(|e| Error::protocol(e.to_string()))
            })
            .collect()
    }

    /// How many rows an update, mutate or delete matched.
    pub fn count(&self, op: Counted) -> Option<u64> {
        self.results.get(op.0).and_then(OperationResult::count)
    }

    /// Every operation's result.
    pub fn results(&self) -> &[OperationResult] {
        &self.results
    }
}

/// Replaces named-uuids in a datum with the uuids a transaction gave them.
pub fn resolve_named(datum: &Datum, result: &TransactionResult) -> Datum {
    use crate::datum::Atom;
    let fix = |a: &Atom| match a {
        Atom::NamedUuid(n) => result
            .named
            .get(&**n)
            .map(|u| Atom::Uuid(*u))
            .unwrap_or_else(|| a.clone()),
        other => other.clone(),
    };
    match datum {
        Datum::Set(s) => Datum::set(s.iter().map(fix)),
        Datum::Map(m) => Datum::map(m.iter().map(|(k, v)| (fix(k), fix(v)))),
    }
}
