//! Database, table and column schemas (RFC 7047 §3.2), parsed from a `.ovsschema` file
//! or a `get_schema` reply, and the check of a datum against its column's type.

use std::collections::BTreeMap;
use std::fmt;

use crate::datum::{Atom, AtomicType, Datum};

mod check;
mod parse;
#[cfg(test)]
mod tests;

pub use check::ValueError;

/// A schema that could not be parsed: where in the document, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schema error at {path}: {message}")]
pub struct SchemaError {
    /// Where the problem is, e.g. `tables.Logical_Switch.columns.ports.type`.
    pub path: String,
    /// What is wrong there.
    pub message: String,
}

/// A datum that does not fit its column: which table and column, the value, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("table {table} column {column}: value {value} is not valid: {reason}")]
pub struct DatumError {
    /// The table the column belongs to.
    pub table: String,
    /// The column.
    pub column: String,
    /// The offending value in JSON notation.
    pub value: String,
    /// Why it does not fit.
    pub reason: String,
}

/// Whether a reference keeps its target alive (`strong`) or is removed when the target
/// goes away (`weak`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefType {
    /// Deleting a referenced row is an error; an unreferenced non-root row is collected.
    Strong,
    /// A reference to a deleted row is dropped from the set.
    Weak,
}

/// The upper bound on the number of elements in a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Max {
    /// At most this many.
    Limited(u64),
    /// `"unlimited"`.
    Unlimited,
}

impl Max {
    fn allows(self, n: usize) -> bool {
        match self {
            Max::Limited(m) => (n as u64) <= m,
            Max::Unlimited => true,
        }
    }
}

impl fmt::Display for Max {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Max::Limited(m) => write!(f, "{m}"),
            Max::Unlimited => f.write_str("unlimited"),
        }
    }
}

/// An atomic type with its constraints: a `<base-type>` of RFC 7047 §3.2.
#[derive(Clone, Debug, PartialEq)]
pub struct BaseType {
    /// The atomic type.
    pub atomic: AtomicType,
    /// The allowed values, sorted, when the schema gives an `enum`.
    pub enum_values: Option<Vec<Atom>>,
    /// `minInteger`.
    pub min_integer: Option<i64>,
    /// `maxInteger`.
    pub max_integer: Option<i64>,
    /// `minReal`.
    pub min_real: Option<f64>,
    /// `maxReal`.
    pub max_real: Option<f64>,
    /// `minLength`, in Unicode characters.
    pub min_length: Option<u64>,
    /// `maxLength`, in Unicode characters.
    pub max_length: Option<u64>,
    /// `refTable`: the table a uuid refers to.
    pub ref_table: Option<String>,
    /// `refType`; strong when the schema leaves it out.
    pub ref_type: RefType,
}

impl BaseType {
    /// An unconstrained base type.
    pub fn new(atomic: AtomicType) -> BaseType {
        BaseType {
            atomic,
            enum_values: None,
            min_integer: None,
            max_integer: None,
            min_real: None,
            max_real: None,
            min_length: None,
            max_length: None,
            ref_table: None,
            ref_type: RefType::Strong,
        }
    }
}

/// A column's type: a key type, an optional value type (for maps), and bounds on the
/// number of elements.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnType {
    /// The type of set elements, or of map keys.
    pub key: BaseType,
    /// The type of map values; `None` for sets and scalars.
    pub value: Option<BaseType>,
    /// Least number of elements: 0 or 1.
    pub min: u64,
    /// Greatest number of elements.
    pub max: Max,
}

impl ColumnType {
    /// A required scalar of the given type (min 1, max 1).
    pub fn scalar(base: BaseType) -> ColumnType {
        ColumnType {
            key: base,
            value: None,
            min: 1,
            max: Max::Limited(1),
        }
    }

    /// True when the column holds a map.
    pub fn is_map(&self) -> bool {
        self.value.is_some()
    }

    /// True when the column holds exactly one value (min 1, max 1, not a map).
    pub fn is_scalar(&self) -> bool {
        self.value.is_none() && self.min == 1 && self.max == Max::Limited(1)
    }

    /// True when the column holds zero or one value.
    pub fn is_optional(&self) -> bool {
        self.value.is_none() && self.min == 0 && self.max == Max::Limited(1)
    }

    /// The value a column of this type holds in a freshly inserted row when none is
    /// given: the empty set or map when `min` is 0, otherwise the type's zero value.
    pub fn default_datum(&self) -> Datum {
        if self.min == 0 {
            return if self.is_map() {
                Datum::Map(Box::default())
            } else {
                Datum::empty()
            };
        }
        let atom = match self.key.atomic {
            AtomicType::Integer => Atom::Integer(0),
            AtomicType::Real => Atom::Real(0.0),
            AtomicType::Boolean => Atom::Boolean(false),
            AtomicType::String => Atom::String(String::new().into()),
            AtomicType::Uuid => Atom::Uuid(uuid::Uuid::nil()),
        };
        Datum::scalar(atom)
    }
}

/// One column of a table.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnSchema {
    /// The column's name.
    pub name: String,
    /// Its type.
    pub column_type: ColumnType,
    /// True when the server need not keep the value across restarts.
    pub ephemeral: bool,
    /// False when the column can only be set on insert.
    pub mutable: bool,
}

/// One table of a database.
#[derive(Clone, Debug, PartialEq)]
pub struct TableSchema {
    /// The table's name.
    pub name: String,
    /// Its columns by name (without the implicit `_uuid` and `_version`).
    pub columns: BTreeMap<String, ColumnSchema>,
    /// `maxRows`, when the schema limits the table.
    pub max_rows: Option<u64>,
    /// True when rows need no reference to survive. Tables of a schema with no `isRoot`
    /// anywhere are all roots, as RFC 7047 says.
    pub is_root: bool,
    /// Sets of columns whose values must be unique across rows.
    pub indexes: Vec<Vec<String>>,
}

impl TableSchema {
    /// Looks a column up; `_uuid` and `_version` resolve to uuid columns.
    pub fn column(&self, name: &str) -> Option<&ColumnSchema> {
        self.columns.get(name)
    }

    /// The type of a column, including the implicit `_uuid` and `_version`.
    pub fn column_type(&self, name: &str) -> Option<ColumnType> {
        match name {
            "_uuid" | "_version" => Some(ColumnType::scalar(BaseType::new(AtomicType::Uuid))),
            _ => self.columns.get(name).map(|c| c.column_type.clone()),
        }
    }
}

/// A whole database schema.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DatabaseSchema {
    /// The database's name, e.g. `OVN_Northbound`.
    pub name: String,
    /// The schema version, e.g. `7.18.0`.
    pub version: String,
    /// The checksum recorded in the file, if any.
    pub cksum: Option<String>,
    /// Tables by name.
    pub tables: BTreeMap<String, TableSchema>,
}

impl DatabaseSchema {
    /// Looks a table up.
    pub fn table(&self, name: &str) -> Option<&TableSchema> {
        self.tables.get(name)
    }
}
