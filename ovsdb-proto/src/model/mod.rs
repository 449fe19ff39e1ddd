//! Typed models: what `#[derive(Table)]` implements, typed references, typed columns
//! for conditions and mutations, and the description a model gives of itself so that
//! a client can check it against a server's schema.

mod column;
pub mod db;
pub mod skew;
mod value;
mod wire;

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;

use uuid::Uuid;

use crate::datum::{Atom, AtomicType, Datum, Row};

#[doc(hidden)]
pub use crate::datum::TagStr as __Key;
pub use column::{AnyColumn, Column, Cond, Mut};
pub use value::{
    __scalar_from_datum, __scalar_kind, AtomValue, ColumnValue, ConvertError, ValueKind,
};
#[doc(hidden)]
pub use wire::{ColumnSeed as __ColumnSeed, UuidAtom as __UuidAtom};

/// A row that could not be decoded into a model: which table and column, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("table {table} column {column}: {message}")]
pub struct DecodeError {
    /// The table.
    pub table: &'static str,
    /// The column.
    pub column: String,
    /// What was wrong with the value.
    pub message: String,
}

/// One column of a model, as the model declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnDesc {
    /// The column's name in the schema.
    pub name: &'static str,
    /// The shape the field's type stands for.
    pub kind: ValueKind,
}

/// Something a row can be decoded from: a generic [`Row`], or a cache's compact row.
pub trait ColumnSource {
    /// The value of `column`, if the row has it.
    fn column(&self, column: &str) -> Option<&Datum>;
}

impl ColumnSource for Row {
    fn column(&self, column: &str) -> Option<&Datum> {
        self.get(column)
    }
}

/// A set column's value from anything that converts, for struct literals:
/// `addresses: set(["dynamic"])` rather than `["dynamic".to_string()].into()`.
pub fn set<T: Ord, I>(items: I) -> std::collections::BTreeSet<T>
where
    I: IntoIterator,
    I::Item: Into<T>,
{
    items.into_iter().map(Into::into).collect()
}

/// A map column's value from pairs of anything that converts, for struct literals:
/// `external_ids: map([("owner", "me")])`.
pub fn map<K: Ord, V, I, A, B>(pairs: I) -> std::collections::BTreeMap<K, V>
where
    I: IntoIterator<Item = (A, B)>,
    A: Into<K>,
    B: Into<V>,
{
    pairs
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
}

/// A row of a model table however it is held: `T` itself, or the `Arc<T>` a cache
/// hands out (snapshots, typed events), so that both go straight into a typed
/// transaction (`txn.update(&old, &new)` with `old: Arc<T>`, `new: T`).
pub trait AsRow {
    /// The row's table.
    type Table: Table;
    /// The row.
    fn as_row(&self) -> &Self::Table;
}

impl<T: Table> AsRow for T {
    type Table = T;
    fn as_row(&self) -> &T {
        self
    }
}

impl<T: Table> AsRow for std::sync::Arc<T> {
    type Table = T;
    fn as_row(&self) -> &T {
        self
    }
}

/// A table's row type. Implemented by `#[derive(Table)]`.
pub trait Table: Sized + Clone + PartialEq + Default + Send + Sync + 'static {
    /// The table's name in the schema.
    const NAME: &'static str;
    /// The typed columns, for conditions and mutations (a struct with one
    /// [`Column`] per field).
    type Columns: 'static;
    /// The typed columns.
    const COLUMNS: Self::Columns;

    /// Every column the model has, with the shape of its field.
    fn columns() -> Vec<ColumnDesc>;
    /// The row's uuid (nil for a row not yet inserted).
    fn uuid(&self) -> Uuid;
    /// Sets the row's uuid.
    fn set_uuid(&mut self, uuid: Uuid);
    /// Decodes a row; columns the model does not know are ignored, columns the row lacks
    /// keep their defaults.
    fn from_row(uuid: Uuid, row: &dyn ColumnSource) -> Result<Self, DecodeError>;
    /// Applies an `update2` `modify` entry to this row.
    fn apply_diff(&mut self, diff: &Row) -> Result<(), DecodeError>;
    /// Every column's value (not `_uuid`).
    fn to_row(&self) -> Row;
}

/// The key of one of a table's unique indexes (generated as `<Table>By<Columns>`, for
/// instance `LogicalSwitchPortByName`): look a row up with
/// [`Snapshot::get_by`](crate::cache::Snapshot::get_by).
pub trait IndexKey {
    /// The indexed table.
    type Table: Table;
    /// The index's columns with this key's values.
    fn values(&self) -> Vec<(&'static str, Datum)>;
}

/// A database's model: its name, the schema version it was generated from, and its
/// tables. Implemented by generated code.
pub trait Database: Send + Sync + 'static {
    /// The database name, e.g. `OVN_Northbound`.
    const NAME: &'static str;
    /// The schema version the model was generated from.
    const VERSION: &'static str;
    /// Every table: its name and columns.
    fn tables() -> Vec<(&'static str, Vec<ColumnDesc>)>;
}

/// What a reference points at: a row's uuid, or a row inserted earlier in the same
/// transaction under a `uuid-name`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RefTarget {
    /// An existing row.
    Uuid(Uuid),
    /// A row inserted by the same transaction.
    Named(String),
}

/// A reference to a row of table `T`: a uuid on the wire, typed in Rust so that a
/// Logical_Switch's `ports` cannot hold a Logical_Router_Port.
pub struct Ref<T> {
    target: RefTarget,
    _table: PhantomData<fn() -> T>,
}

impl<T> Ref<T> {
    /// A reference to the row with this uuid.
    pub fn new(uuid: Uuid) -> Ref<T> {
        Ref {
            target: RefTarget::Uuid(uuid),
            _table: PhantomData,
        }
    }

    /// A reference to a row inserted by the same transaction under `uuid-name` `name`.
    pub fn named(name: impl Into<String>) -> Ref<T> {
        Ref {
            target: RefTarget::Named(name.into()),
            _table: PhantomData,
        }
    }

    /// What the reference points at.
    pub fn target(&self) -> &RefTarget {
        &self.target
    }

    /// The uuid, unless the reference is to a row being inserted.
    pub fn uuid(&self) -> Option<Uuid> {
        match &self.target {
            RefTarget::Uuid(u) => Some(*u),
            RefTarget::Named(_) => None,
        }
    }
}

impl<T> Clone for Ref<T> {
    fn clone(&self) -> Self {
        Ref {
            target: self.target.clone(),
            _table: PhantomData,
        }
    }
}

impl<T> PartialEq for Ref<T> {
    fn eq(&self, other: &Self) -> bool {
        self.target == other.target
    }
}
impl<T> Eq for Ref<T> {}
impl<T> PartialOrd for Ref<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Ref<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.target.cmp(&other.target)
    }
}
impl<T> Hash for Ref<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.target.hash(state)
    }
}

impl<T> Default for Ref<T> {
    /// The nil uuid: a placeholder the server refuses; set a real reference.
    fn default() -> Self {
        Ref::new(Uuid::nil())
    }
}

impl<T> fmt::Debug for Ref<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.target {
            RefTarget::Uuid(u) => write!(f, "Ref({u})"),
            RefTarget::Named(n) => write!(f, "Ref(named {n})"),
        }
    }
}

impl<T> From<Uuid> for Ref<T> {
    fn from(uuid: Uuid) -> Self {
        Ref::new(uuid)
    }
}

impl<T: Table> AtomValue for Ref<T> {
    const ATOMIC_TYPE: AtomicType = AtomicType::Uuid;
    const REF_TABLE: Option<&'static str> = Some(T::NAME);
    fn from_atom(atom: &Atom) -> Result<Self, ConvertError> {
        match atom {
            Atom::Uuid(u) => Ok(Ref::new(*u)),
            Atom::NamedUuid(n) => Ok(Ref::named(n.clone())),
            other => Err(ConvertError::new(format!(
                "{other} is of type {}, expected a reference to {}",
                other.atomic_type(),
                T::NAME
            ))),
        }
    }
    fn to_atom(&self) -> Atom {
        match &self.target {
            RefTarget::Uuid(u) => Atom::Uuid(*u),
            RefTarget::Named(n) => Atom::NamedUuid(n.clone().into()),
        }
    }
}

impl<T: Table> ColumnValue for Ref<T> {
    fn kind() -> ValueKind {
        __scalar_kind::<Self>()
    }
    fn from_datum(datum: &Datum) -> Result<Self, ConvertError> {
        __scalar_from_datum(datum)
    }
    fn to_datum(&self) -> Datum {
        Datum::Set(vec![self.to_atom()].into())
    }
    fn is_default(&self) -> bool {
        self.target == RefTarget::Uuid(Uuid::nil())
    }
}

/// Support for the derives: decodes one column of a row, naming it on error.
#[doc(hidden)]
pub fn __decode_column<V: ColumnValue>(
    table: &'static str,
    row: &dyn ColumnSource,
    column: &str,
    into: &mut V,
) -> Result<(), DecodeError> {
    with_column(table, row, column, |d| {
        *into = V::from_datum(d)?;
        Ok(())
    })
}

/// Support for the derives: applies one column's diff, naming it on error.
#[doc(hidden)]
pub fn __apply_column<V: ColumnValue>(
    table: &'static str,
    diff: &Row,
    column: &str,
    into: &mut V,
) -> Result<(), DecodeError> {
    with_column(table, diff, column, |d| into.apply_diff(d))
}

/// Runs `f` on `row`'s value for `column`, if present; an error names table and column.
fn with_column(
    table: &'static str,
    row: &dyn ColumnSource,
    column: &str,
    f: impl FnOnce(&Datum) -> Result<(), ConvertError>,
) -> Result<(), DecodeError> {
    match row.column(column) {
        Some(d) => f(d).map_err(|e| DecodeError {
            table,
            column: column.to_owned(),
            message: e.message,
        }),
        None => Ok(()),
    }
}

/// Support for the derives: the row's `_uuid`, if present and valid.
#[doc(hidden)]
pub fn __row_uuid(row: &Row) -> Option<Uuid> {
    row.get("_uuid")
        .and_then(Datum::as_scalar)
        .and_then(Atom::as_uuid)
}

/// The columns whose values differ between two versions of a row: what an `update`
/// needs to send.
pub fn changed_columns<T: Table>(old: &T, new: &T) -> Row {
    let old = old.to_row();
    new.to_row()
        .into_iter()
        .filter(|(k, v)| old.get(k) != Some(v))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Default, PartialEq, Debug)]
    struct Port;

    impl Table for Port {
        const NAME: &'static str = "Port";
        type Columns = ();
        const COLUMNS: () = ();
        fn columns() -> Vec<ColumnDesc> {
            vec![]
        }
        fn uuid(&self) -> Uuid {
            Uuid::nil()
        }
        fn set_uuid(&mut self, _: Uuid) {}
        fn from_row(_: Uuid, _: &dyn ColumnSource) -> Result<Self, DecodeError> {
            Ok(Port)
        }
        fn apply_diff(&mut self, _: &Row) -> Result<(), DecodeError> {
            Ok(())
        }
        fn to_row(&self) -> Row {
            Row::new()
        }
    }

    #[test]
    fn references_are_uuids_on_the_wire_and_typed_in_rust() {
        let u = Uuid::parse_str("36bd8a88-2b8f-4b4c-8e18-1c2f2b6a1f00").unwrap();
        let r: Ref<Port> = Ref::new(u);
        assert_eq!(r.to_datum(), Datum::uuid(u));
        assert_eq!(Ref::<Port>::from_datum(&Datum::uuid(u)).unwrap(), r);
        assert_eq!(
            Ref::<Port>::named("p").to_atom(),
            Atom::NamedUuid("p".into())
        );
        let e = Ref::<Port>::from_datum(&Datum::scalar("x")).unwrap_err();
        assert!(e.message.contains("expected a reference to Port"), "{e}");
        assert_eq!(<Ref<Port> as ColumnValue>::kind().key_ref, Some("Port"));
    }

    #[test]
    fn decode_errors_name_table_and_column() {
        let mut row = Row::new();
        row.insert("n".into(), Datum::scalar("text"));
        let mut v = 0i64;
        let e = __decode_column("T", &row, "n", &mut v).unwrap_err();
        assert_eq!(
            e.to_string(),
            "table T column n: \"text\" is of type string, expected integer"
        );
    }
}
