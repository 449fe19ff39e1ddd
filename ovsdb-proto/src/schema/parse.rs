//! Parsing a schema document (RFC 7047 §3.2): a `.ovsschema` file or a `get_schema`
//! reply, every problem reported with its path in the document.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use super::{
    BaseType, ColumnSchema, ColumnType, DatabaseSchema, Max, RefType, SchemaError, TableSchema,
};
use crate::datum::{Atom, AtomicType, Datum};

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

impl BaseType {
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
                    base.enum_values = Some(base.enum_of(e, &format!("{path}.enum"))?);
                }
                base.min_integer = opt_i64(o, "minInteger", path)?;
                base.max_integer = opt_i64(o, "maxInteger", path)?;
                base.min_real = opt_f64(o, "minReal", path)?;
                base.max_real = opt_f64(o, "maxReal", path)?;
                base.min_length = opt_u64(o, "minLength", path)?;
                base.max_length = opt_u64(o, "maxLength", path)?;
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
                    base.ref_type = ref_type(r, path)?;
                }
                Ok(base)
            }
            other => Err(err(
                path,
                format!("expected an atomic type name or a base-type object, found {other}"),
            )),
        }
    }

    /// The values of an `enum` constraint (at `path`): a set of atoms of this type.
    fn enum_of(&self, e: &Value, path: &str) -> Result<Vec<Atom>, SchemaError> {
        let datum = Datum::from_json(e).map_err(|x| err(path, x.to_string()))?;
        let atoms = match datum {
            Datum::Set(atoms) => atoms,
            Datum::Map(_) => return Err(err(path, "enum must be a set, not a map")),
        };
        for a in &atoms {
            if !self.atomic_matches(a) {
                return Err(err(
                    path,
                    format!("enum value {a} is not of type {}", self.atomic),
                ));
            }
        }
        Ok(atoms.into_vec())
    }
}

/// A base type's `refType` (at `path`): `strong` or `weak`.
fn ref_type(r: &Value, path: &str) -> Result<RefType, SchemaError> {
    match r.as_str() {
        Some("strong") => Ok(RefType::Strong),
        Some("weak") => Ok(RefType::Weak),
        _ => Err(err(
            &format!("{path}.refType"),
            format!("must be \"strong\" or \"weak\", not {r}"),
        )),
    }
}

/// An error when both bounds are given and `min` exceeds `max` (`names` theirs).
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

impl ColumnType {
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
}

impl TableSchema {
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
