//! Database, table and column schemas (RFC 7047 §3.2), parsed from a `.ovsschema` file
//! or a `get_schema` reply, and the check of a datum against its column's type.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde_json::{Map, Value};

use crate::datum::{Atom, AtomicType, Datum, Row};

/// A schema that could not be parsed: where in the document, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schema error at {path}: {message}")]
pub struct SchemaError {
    /// Where the problem is, e.g. `tables.Logical_Switch.columns.ports.type`.
    pub path: String,
    /// What is wrong there.
    pub message: String,
}

fn err(path: &str, message: impl Into<String>) -> SchemaError {
    SchemaError {
        path: if path.is_empty() {
            "top level".into()
        } else {
            path.into()
        },
        message: message.into(),
    }
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

    fn parse(v: &Value, path: &str) -> Result<BaseType, SchemaError> {
        match v {
            Value::String(name) => AtomicType::from_name(name)
                .map(BaseType::new)
                .ok_or_else(|| err(path, format!("unknown atomic type \"{name}\""))),
            Value::Object(o) => {
                let type_name = o
                    .get("type")
                    .ok_or_else(|| err(path, "base type lacks \"type\""))?;
                let mut base = BaseType::parse(type_name, &format!("{path}.type"))?;
                // Constraints belong to one atomic type each; ovsdb-server refuses the
                // others, and so does this.
                let allowed: &[&str] = match base.atomic {
                    AtomicType::Integer => &["minInteger", "maxInteger"],
                    AtomicType::Real => &["minReal", "maxReal"],
                    AtomicType::String => &["minLength", "maxLength"],
                    AtomicType::Uuid => &["refTable", "refType"],
                    AtomicType::Boolean => &[],
                };
                if let Some(k) = o.keys().find(|k| {
                    !["type", "enum"].contains(&k.as_str()) && !allowed.contains(&k.as_str())
                }) {
                    return Err(err(
                        &format!("{path}.{k}"),
                        format!("not allowed on a base type of type {}", base.atomic),
                    ));
                }
                if let Some(e) = o.get("enum") {
                    let epath = format!("{path}.enum");
                    let datum = Datum::from_json(e).map_err(|x| err(&epath, x.to_string()))?;
                    let atoms = match datum {
                        Datum::Set(atoms) => atoms,
                        Datum::Map(_) => return Err(err(&epath, "enum must be a set, not a map")),
                    };
                    for a in &atoms {
                        if !base.atomic_matches(a) {
                            return Err(err(
                                &epath,
                                format!("enum value {a} is not of type {}", base.atomic),
                            ));
                        }
                    }
                    base.enum_values = Some(atoms.into_vec());
                }
                base.min_integer = opt_i64(o, "minInteger", path)?;
                base.max_integer = opt_i64(o, "maxInteger", path)?;
                base.min_real = opt_f64(o, "minReal", path)?;
                base.max_real = opt_f64(o, "maxReal", path)?;
                base.min_length = opt_u64(o, "minLength", path)?;
                base.max_length = opt_u64(o, "maxLength", path)?;
                fn ordered<T: PartialOrd + std::fmt::Display>(
                    min: Option<T>,
                    max: Option<T>,
                    path: &str,
                    names: (&str, &str),
                ) -> Result<(), SchemaError> {
                    match (min, max) {
                        (Some(a), Some(b)) if a > b => Err(err(
                            path,
                            format!("{} {a} exceeds {} {b}", names.0, names.1),
                        )),
                        _ => Ok(()),
                    }
                }
                ordered(
                    base.min_integer,
                    base.max_integer,
                    path,
                    ("minInteger", "maxInteger"),
                )?;
                ordered(base.min_real, base.max_real, path, ("minReal", "maxReal"))?;
                ordered(
                    base.min_length,
                    base.max_length,
                    path,
                    ("minLength", "maxLength"),
                )?;
                if let Some(t) = o.get("refTable") {
                    let t = t
                        .as_str()
                        .ok_or_else(|| err(&format!("{path}.refTable"), "must be a string"))?;
                    base.ref_table = Some(t.to_owned());
                }
                if let Some(r) = o.get("refType") {
                    base.ref_type = match r.as_str() {
                        Some("strong") => RefType::Strong,
                        Some("weak") => RefType::Weak,
                        _ => {
                            return Err(err(
                                &format!("{path}.refType"),
                                format!("must be \"strong\" or \"weak\", not {r}"),
                            ))
                        }
                    };
                }
                Ok(base)
            }
            other => Err(err(
                path,
                format!("expected an atomic type name or a base-type object, found {other}"),
            )),
        }
    }

    fn atomic_matches(&self, atom: &Atom) -> bool {
        match (self.atomic, atom) {
            // A real written without a fraction arrives as an integer.
            (AtomicType::Real, Atom::Integer(_)) => true,
            (t, a) => a.atomic_type() == t,
        }
    }

    /// Checks one atom against the type and its constraints; the error says why not.
    pub fn check_atom(&self, atom: &Atom) -> Result<(), String> {
        if !self.atomic_matches(atom) {
            return Err(format!(
                "{atom} is of type {}, expected {}",
                atom.atomic_type(),
                self.atomic
            ));
        }
        if let Some(allowed) = &self.enum_values {
            if allowed.binary_search(atom).is_err() {
                let list: Vec<String> = allowed.iter().map(ToString::to_string).collect();
                return Err(format!("{atom} is not one of {}", list.join(", ")));
            }
        }
        match atom {
            Atom::Integer(i) => {
                if self.atomic == AtomicType::Real {
                    return self.check_real(*i as f64, atom);
                }
                if let Some(min) = self.min_integer {
                    if *i < min {
                        return Err(format!("{i} is less than the minimum {min}"));
                    }
                }
                if let Some(max) = self.max_integer {
                    if *i > max {
                        return Err(format!("{i} is greater than the maximum {max}"));
                    }
                }
            }
            Atom::Real(r) => return self.check_real(*r, atom),
            Atom::String(s) if self.min_length.is_some() || self.max_length.is_some() => {
                let n = s.chars().count() as u64;
                if let Some(min) = self.min_length {
                    if n < min {
                        return Err(format!("{atom} is shorter than {min} characters"));
                    }
                }
                if let Some(max) = self.max_length {
                    if n > max {
                        return Err(format!("{atom} is longer than {max} characters"));
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn check_real(&self, r: f64, atom: &Atom) -> Result<(), String> {
        if let Some(min) = self.min_real {
            if r < min {
                return Err(format!("{atom} is less than the minimum {min}"));
            }
        }
        if let Some(max) = self.max_real {
            if r > max {
                return Err(format!("{atom} is greater than the maximum {max}"));
            }
        }
        Ok(())
    }
}

/// Member `key` of `o`, read by `read` if present; the error names its path and says
/// what was `expected`.
fn opt<T>(
    o: &Map<String, Value>,
    key: &str,
    path: &str,
    expected: &str,
    read: fn(&Value) -> Option<T>,
) -> Result<Option<T>, SchemaError> {
    o.get(key)
        .map(|v| {
            read(v).ok_or_else(|| {
                err(
                    &format!("{path}.{key}"),
                    format!("expected {expected}, found {v}"),
                )
            })
        })
        .transpose()
}

fn opt_i64(o: &Map<String, Value>, key: &str, path: &str) -> Result<Option<i64>, SchemaError> {
    opt(o, key, path, "an integer", Value::as_i64)
}

fn opt_u64(o: &Map<String, Value>, key: &str, path: &str) -> Result<Option<u64>, SchemaError> {
    opt(o, key, path, "a non-negative integer", Value::as_u64)
}

fn opt_f64(o: &Map<String, Value>, key: &str, path: &str) -> Result<Option<f64>, SchemaError> {
    opt(o, key, path, "a number", Value::as_f64)
}

fn opt_bool(o: &Map<String, Value>, key: &str, path: &str) -> Result<Option<bool>, SchemaError> {
    opt(o, key, path, "true or false", Value::as_bool)
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

    /// Parses a `<column-type>`.
    pub fn parse(v: &Value, path: &str) -> Result<ColumnType, SchemaError> {
        match v {
            Value::String(_) => Ok(ColumnType::scalar(BaseType::parse(v, path)?)),
            Value::Object(o) => {
                let key = o
                    .get("key")
                    .ok_or_else(|| err(path, "column type lacks \"key\""))?;
                let key = BaseType::parse(key, &format!("{path}.key"))?;
                let value = o
                    .get("value")
                    .map(|v| BaseType::parse(v, &format!("{path}.value")))
                    .transpose()?;
                let min = opt_u64(o, "min", path)?.unwrap_or(1);
                if min > 1 {
                    return Err(err(
                        &format!("{path}.min"),
                        format!("must be 0 or 1, not {min}"),
                    ));
                }
                let max = match o.get("max") {
                    None => Max::Limited(1),
                    Some(Value::String(s)) if s == "unlimited" => Max::Unlimited,
                    Some(m) => match m.as_u64() {
                        Some(n) if n >= 1 => Max::Limited(n),
                        _ => {
                            return Err(err(
                                &format!("{path}.max"),
                                format!("must be a positive integer or \"unlimited\", not {m}"),
                            ))
                        }
                    },
                };
                if let Max::Limited(m) = max {
                    if min > m {
                        return Err(err(path, format!("min {min} is greater than max {m}")));
                    }
                }
                Ok(ColumnType {
                    key,
                    value,
                    min,
                    max,
                })
            }
            other => Err(err(
                path,
                format!("expected an atomic type name or a column-type object, found {other}"),
            )),
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

    /// Checks a datum against this type; the error says why it does not fit.
    pub fn check(&self, datum: &Datum) -> Result<(), String> {
        let n = datum.len();
        if (n as u64) < self.min || !self.max.allows(n) {
            return Err(format!(
                "has {n} element{}, the column allows {} to {}",
                if n == 1 { "" } else { "s" },
                self.min,
                self.max
            ));
        }
        match (&self.value, datum) {
            (None, Datum::Set(atoms)) => {
                for a in atoms {
                    self.key.check_atom(a)?;
                }
            }
            (Some(value), Datum::Map(pairs)) => {
                for (k, v) in pairs {
                    self.key.check_atom(k).map_err(|e| format!("key {e}"))?;
                    value.check_atom(v).map_err(|e| format!("value {e}"))?;
                }
            }
            (Some(_), Datum::Set(atoms)) if atoms.is_empty() => {}
            (Some(_), Datum::Set(_)) => return Err("is a set, the column holds a map".into()),
            (None, Datum::Map(_)) => return Err("is a map, the column holds a set".into()),
        }
        Ok(())
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

    /// Checks one column's value, naming the table, column and value when it does not fit.
    pub fn check_datum(&self, column: &str, datum: &Datum) -> Result<(), DatumError> {
        let fail = |reason: String| DatumError {
            table: self.name.clone(),
            column: column.to_owned(),
            value: datum.to_string(),
            reason,
        };
        let ty = self
            .column_type(column)
            .ok_or_else(|| fail(format!("table {} has no column {column}", self.name)))?;
        ty.check(datum).map_err(fail)
    }

    /// Checks every column of a row.
    pub fn check_row(&self, row: &Row) -> Result<(), DatumError> {
        for (column, datum) in row {
            self.check_datum(column, datum)?;
        }
        Ok(())
    }

    fn parse(name: &str, v: &Value, path: &str) -> Result<TableSchema, SchemaError> {
        let o = v
            .as_object()
            .ok_or_else(|| err(path, format!("expected a table object, found {v}")))?;
        let cols = o
            .get("columns")
            .and_then(Value::as_object)
            .ok_or_else(|| err(path, "table lacks a \"columns\" object"))?;
        let mut columns = BTreeMap::new();
        for (cname, c) in cols {
            let cpath = format!("{path}.columns.{cname}");
            if !valid_name(cname) || cname.starts_with('_') {
                return Err(err(&cpath, format!("invalid column name \"{cname}\"")));
            }
            let co = c
                .as_object()
                .ok_or_else(|| err(&cpath, format!("expected a column object, found {c}")))?;
            let ty = co
                .get("type")
                .ok_or_else(|| err(&cpath, "column lacks \"type\""))?;
            let column_type = ColumnType::parse(ty, &format!("{cpath}.type"))?;
            columns.insert(
                cname.clone(),
                ColumnSchema {
                    name: cname.clone(),
                    column_type,
                    ephemeral: opt_bool(co, "ephemeral", &cpath)?.unwrap_or(false),
                    mutable: opt_bool(co, "mutable", &cpath)?.unwrap_or(true),
                },
            );
        }
        let max_rows = opt_u64(o, "maxRows", path)?;
        if max_rows == Some(0) {
            return Err(err(&format!("{path}.maxRows"), "must be at least 1"));
        }
        let mut indexes = Vec::new();
        if let Some(ix) = o.get("indexes") {
            let ipath = format!("{path}.indexes");
            let list = ix
                .as_array()
                .ok_or_else(|| err(&ipath, "expected an array of column lists"))?;
            for (i, index) in list.iter().enumerate() {
                let cols = index.as_array().filter(|a| !a.is_empty()).ok_or_else(|| {
                    err(
                        &format!("{ipath}[{i}]"),
                        "expected a non-empty array of column names",
                    )
                })?;
                let mut names = Vec::new();
                for c in cols {
                    let c = c.as_str().ok_or_else(|| {
                        err(&format!("{ipath}[{i}]"), "column names must be strings")
                    })?;
                    if !columns.contains_key(c) && c != "_uuid" {
                        return Err(err(
                            &format!("{ipath}[{i}]"),
                            format!("no column named \"{c}\""),
                        ));
                    }
                    names.push(c.to_owned());
                }
                indexes.push(names);
            }
        }
        Ok(TableSchema {
            name: name.to_owned(),
            columns,
            max_rows,
            is_root: opt_bool(o, "isRoot", path)?.unwrap_or(false),
            indexes,
        })
    }
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
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
    /// Parses a schema from its JSON form (a `.ovsschema` file's contents or the reply to
    /// `get_schema`).
    pub fn from_json(v: &Value) -> Result<DatabaseSchema, SchemaError> {
        let o = v.as_object().ok_or_else(|| {
            err(
                "",
                format!("expected a schema object, found {}", kind_of(v)),
            )
        })?;
        let name = o
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| err("name", "missing or not a string"))?;
        if !valid_name(name) {
            return Err(err("name", format!("invalid database name \"{name}\"")));
        }
        let version = o
            .get("version")
            .and_then(Value::as_str)
            .ok_or_else(|| err("version", "missing or not a string"))?;
        let parts: Vec<&str> = version.split('.').collect();
        if parts.len() != 3
            || parts
                .iter()
                .any(|p| p.is_empty() || p.parse::<u32>().is_err())
        {
            return Err(err(
                "version",
                format!("\"{version}\" is not of the form x.y.z"),
            ));
        }
        let cksum = o.get("cksum").and_then(Value::as_str).map(str::to_owned);
        let tables_json = o
            .get("tables")
            .and_then(Value::as_object)
            .ok_or_else(|| err("tables", "missing or not an object"))?;
        let mut tables = BTreeMap::new();
        for (tname, t) in tables_json {
            let path = format!("tables.{tname}");
            if !valid_name(tname) || tname.starts_with('_') && name != "_Server" {
                return Err(err(&path, format!("invalid table name \"{tname}\"")));
            }
            tables.insert(tname.clone(), TableSchema::parse(tname, t, &path)?);
        }
        // RFC 7047 §3.2: with no isRoot anywhere, every table is a root.
        let any_root = tables_json.values().any(|t| t.get("isRoot").is_some());
        if !any_root {
            for t in tables.values_mut() {
                t.is_root = true;
            }
        }
        for t in tables.values() {
            for c in t.columns.values() {
                for base in std::iter::once(&c.column_type.key).chain(c.column_type.value.as_ref())
                {
                    if let Some(r) = &base.ref_table {
                        if !tables.contains_key(r) {
                            return Err(err(
                                &format!("tables.{}.columns.{}", t.name, c.name),
                                format!("refTable \"{r}\" is not a table of this schema"),
                            ));
                        }
                    }
                }
            }
        }
        Ok(DatabaseSchema {
            name: name.to_owned(),
            version: version.to_owned(),
            cksum,
            tables,
        })
    }

    /// Parses a schema from JSON text.
    pub fn from_slice(bytes: &[u8]) -> Result<DatabaseSchema, SchemaError> {
        let v: Value =
            serde_json::from_slice(bytes).map_err(|e| err("", format!("not valid JSON: {e}")))?;
        DatabaseSchema::from_json(&v)
    }

    /// Reads and parses a `.ovsschema` file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<DatabaseSchema, SchemaError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| SchemaError {
            path: path.display().to_string(),
            message: format!("cannot read: {e}"),
        })?;
        DatabaseSchema::from_slice(&bytes).map_err(|mut e| {
            e.path = format!("{}: {}", path.display(), e.path);
            e
        })
    }

    /// Looks a table up.
    pub fn table(&self, name: &str) -> Option<&TableSchema> {
        self.tables.get(name)
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schemas_dir() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas")
    }

    #[test]
    fn every_schema_in_the_repository_parses() {
        let mut seen = 0;
        for entry in std::fs::read_dir(schemas_dir()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("ovsschema") {
                continue;
            }
            let s = DatabaseSchema::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
            assert!(!s.tables.is_empty(), "{}", path.display());
            seen += 1;
        }
        assert_eq!(seen, 4, "expected the four schemas in schemas/");
    }

    #[test]
    fn nb_schema_has_its_tables_and_types() {
        let s = DatabaseSchema::from_file(schemas_dir().join("ovn-nb.ovsschema")).unwrap();
        assert_eq!(s.name, "OVN_Northbound");
        assert_eq!(s.version, "7.18.0");
        assert_eq!(s.tables.len(), 39);
        let ls = s.table("Logical_Switch").unwrap();
        assert!(ls.is_root);
        let ports = &ls.column("ports").unwrap().column_type;
        assert_eq!(ports.key.ref_table.as_deref(), Some("Logical_Switch_Port"));
        assert_eq!(ports.key.ref_type, RefType::Strong);
        assert_eq!((ports.min, ports.max), (0, Max::Unlimited));
        let lsp = s.table("Logical_Switch_Port").unwrap();
        assert!(!lsp.is_root);
        assert_eq!(lsp.indexes, vec![vec!["name".to_string()]]);
        let acl = s.table("ACL").unwrap();
        let prio = &acl.column("priority").unwrap().column_type.key;
        assert_eq!((prio.min_integer, prio.max_integer), (Some(0), Some(32767)));
        let action = &acl.column("action").unwrap().column_type.key;
        assert!(action
            .enum_values
            .as_ref()
            .unwrap()
            .contains(&Atom::from("allow-related")));
        let ext = &ls.column("external_ids").unwrap().column_type;
        assert!(ext.is_map());
    }

    #[test]
    fn a_datum_that_does_not_fit_names_table_column_and_value() {
        let s = DatabaseSchema::from_file(schemas_dir().join("ovn-nb.ovsschema")).unwrap();
        let acl = s.table("ACL").unwrap();
        let e = acl
            .check_datum("priority", &Datum::scalar(40000))
            .unwrap_err();
        assert_eq!(e.table, "ACL");
        assert_eq!(e.column, "priority");
        assert_eq!(e.value, "40000");
        assert!(
            e.to_string().contains("greater than the maximum 32767"),
            "{e}"
        );
        let e = acl
            .check_datum("action", &Datum::scalar("permit"))
            .unwrap_err();
        assert!(e.reason.contains("\"permit\" is not one of"), "{e}");
        let e = acl
            .check_datum("priority", &Datum::scalar("high"))
            .unwrap_err();
        assert!(
            e.reason
                .contains("\"high\" is of type string, expected integer"),
            "{e}"
        );
        let e = acl.check_datum("nope", &Datum::scalar(1)).unwrap_err();
        assert!(e.reason.contains("has no column nope"), "{e}");
        let ls = s.table("Logical_Switch").unwrap();
        assert!(ls
            .check_datum("external_ids", &Datum::map([("k", "v")]))
            .is_ok());
        assert!(ls.check_datum("external_ids", &Datum::empty()).is_ok());
        let e = ls
            .check_datum("external_ids", &Datum::set(["k"]))
            .unwrap_err();
        assert!(e.reason.contains("is a set, the column holds a map"), "{e}");
        let e = ls.check_datum("name", &Datum::set(["a", "b"])).unwrap_err();
        assert!(
            e.reason
                .contains("has 2 elements, the column allows 1 to 1"),
            "{e}"
        );
        let e = ls.check_datum("ports", &Datum::set(["x"])).unwrap_err();
        assert!(e.reason.contains("expected uuid"), "{e}");
        assert!(ls.check_datum("ports", &Datum::named_uuid("p1")).is_ok());
    }

    #[test]
    fn string_lengths_count_characters_not_bytes() {
        let t = ColumnType::parse(
            &json!({"key": {"type": "string", "minLength": 1, "maxLength": 2}}),
            "t",
        )
        .unwrap();
        assert!(t.check(&Datum::scalar("éé")).is_ok());
        assert!(t
            .check(&Datum::scalar("ééé"))
            .unwrap_err()
            .contains("longer than 2"));
        assert!(t
            .check(&Datum::scalar(""))
            .unwrap_err()
            .contains("shorter than 1"));
    }

    #[test]
    fn malformed_schemas_say_where_and_what() {
        let cases = [
            (json!([]), "top level", "expected a schema object"),
            (
                json!({"name": "X", "version": "1.0", "tables": {}}),
                "version",
                "x.y.z",
            ),
            (
                json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {"c": {"type": "float"}}}}}),
                "tables.T.columns.c.type",
                "unknown atomic type \"float\"",
            ),
            (
                json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {"c": {"type": {"key": "integer", "min": 2}}}}}}),
                "tables.T.columns.c.type.min",
                "must be 0 or 1",
            ),
            (
                json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {"c": {"type": {"key": {"type": "uuid", "refTable": "U"}}}}}}}),
                "tables.T.columns.c",
                "refTable \"U\" is not a table",
            ),
            (
                json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {}, "indexes": [["zz"]]}}}),
                "tables.T.indexes[0]",
                "no column named \"zz\"",
            ),
            (
                json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {"c": {"type": {"key": {"type": "string", "enum": ["set", [1]]}}}}}}}),
                "tables.T.columns.c.type.key.enum",
                "enum value 1 is not of type string",
            ),
            (
                json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {"c": {"type": {"key": {"type": "integer", "minInteger": 5, "maxInteger": 4}}}}}}}),
                "tables.T.columns.c.type.key",
                "minInteger 5 exceeds maxInteger 4",
            ),
            (
                json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {"c": {"type": {"key": {"type": "real", "minReal": 1.5, "maxReal": 0.5}}}}}}}),
                "tables.T.columns.c.type.key",
                "minReal 1.5 exceeds maxReal 0.5",
            ),
            (
                json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {"c": {"type": {"key": {"type": "string", "minLength": 3, "maxLength": 2}}}}}}}),
                "tables.T.columns.c.type.key",
                "minLength 3 exceeds maxLength 2",
            ),
            (
                json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {"c": {"type": {"key": {"type": "string", "minInteger": 1}}}}}}}),
                "tables.T.columns.c.type.key.minInteger",
                "not allowed on a base type of type string",
            ),
            (
                json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {"c": {"type": {"key": {"type": "integer", "refType": "weak"}}}}}}}),
                "tables.T.columns.c.type.key.refType",
                "not allowed on a base type of type integer",
            ),
        ];
        for (json, path, message) in cases {
            let e = DatabaseSchema::from_json(&json).unwrap_err();
            assert_eq!(e.path, path, "{e}");
            assert!(e.message.contains(message), "{e}");
        }
    }

    #[test]
    fn schema_without_is_root_makes_every_table_a_root() {
        let s = DatabaseSchema::from_json(&json!({
            "name": "X", "version": "1.0.0",
            "tables": {"A": {"columns": {}}, "B": {"columns": {}}}
        }))
        .unwrap();
        assert!(s.tables.values().all(|t| t.is_root));
    }
}
