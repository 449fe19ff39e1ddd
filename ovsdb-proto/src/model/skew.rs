//! What to do when the server's schema is not the model's: the differences
//! ([`SchemaSkew`]), found once when a typed handle connects. It compares a model with
//! a schema, so it lives with the model, above the schema.

use std::collections::BTreeMap;

use crate::error::Error;
use crate::model::{ColumnDesc, ValueKind};
use crate::schema::{ColumnType, DatabaseSchema, Max};

/// How the server's schema differs from the model's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchemaSkew {
    /// The database.
    pub database: String,
    /// The schema version the model was generated from.
    pub model_version: String,
    /// The server's schema version.
    pub server_version: String,
    /// Tables of the model the server does not have.
    pub missing_tables: Vec<String>,
    /// Columns of the model the server does not have, by table.
    pub missing_columns: BTreeMap<String, Vec<String>>,
    /// Columns whose type on the server is not the model's: table, column, and how.
    pub mismatched_columns: Vec<(String, String, String)>,
    /// Tables of the server the model does not know (ignored).
    pub unknown_tables: Vec<String>,
    /// Columns of the server the model does not know, by table (ignored).
    pub unknown_columns: BTreeMap<String, Vec<String>>,
}

impl SchemaSkew {
    /// Compares a model with a server's schema.
    pub fn compare(
        model: &[(&'static str, Vec<ColumnDesc>)],
        name: &str,
        model_version: &str,
        server: &DatabaseSchema,
    ) -> SchemaSkew {
        let mut skew = SchemaSkew {
            database: name.to_owned(),
            model_version: model_version.to_owned(),
            server_version: server.version.clone(),
            ..Default::default()
        };
        for (table, columns) in model {
            let Some(st) = server.table(table) else {
                skew.missing_tables.push(table.to_string());
                continue;
            };
            for c in columns {
                match st.column(c.name) {
                    None => skew
                        .missing_columns
                        .entry(table.to_string())
                        .or_default()
                        .push(c.name.to_owned()),
                    Some(sc) => {
                        if let Some(why) = kind_mismatch(&c.kind, &sc.column_type) {
                            skew.mismatched_columns.push((
                                table.to_string(),
                                c.name.to_owned(),
                                why,
                            ));
                        }
                    }
                }
            }
            let known: Vec<&str> = columns.iter().map(|c| c.name).collect();
            let unknown: Vec<String> = st
                .columns
                .keys()
                .filter(|c| !known.contains(&c.as_str()))
                .cloned()
                .collect();
            if !unknown.is_empty() {
                skew.unknown_columns.insert(table.to_string(), unknown);
            }
        }
        skew.unknown_tables = server
            .tables
            .keys()
            .filter(|t| !model.iter().any(|(m, _)| m == t))
            .cloned()
            .collect();
        skew
    }

    /// True when server and model agree on every table and column.
    pub fn is_empty(&self) -> bool {
        self.missing_tables.is_empty()
            && self.missing_columns.is_empty()
            && self.mismatched_columns.is_empty()
            && self.unknown_tables.is_empty()
            && self.unknown_columns.is_empty()
    }

    /// True when the server has this table.
    pub fn has_table(&self, table: &str) -> bool {
        !self.missing_tables.iter().any(|t| t == table)
    }

    /// True when the server lacks (or types differently) a column of this table.
    pub fn lacks_columns_of(&self, table: &str) -> bool {
        self.missing_columns.contains_key(table)
            || self.mismatched_columns.iter().any(|(t, _, _)| t == table)
    }

    /// True when the server has this column with the model's type.
    pub fn has_column(&self, table: &str, column: &str) -> bool {
        self.has_table(table)
            && !self
                .missing_columns
                .get(table)
                .is_some_and(|c| c.iter().any(|c| c == column))
            && !self
                .mismatched_columns
                .iter()
                .any(|(t, c, _)| t == table && c == column)
    }

    pub(crate) fn lacks(&self, table: &str, column: &str) -> Error {
        let why = self
            .mismatched_columns
            .iter()
            .find(|(t, c, _)| t == table && c == column)
            .map(|(_, _, w)| format!("has a different type there ({w})"))
            .unwrap_or_else(|| "is not in it".into());
        Error::config(format!(
            "column {column} of table {table} {why}: the server's {} schema is version {}, the model's {}",
            self.database, self.server_version, self.model_version
        ))
    }

    pub(crate) fn lacks_table(&self, table: &str) -> Error {
        Error::config(format!(
            "table {table} is not in the server's {} schema (version {}; the model's is {})",
            self.database, self.server_version, self.model_version
        ))
    }
}

fn kind_mismatch(model: &ValueKind, server: &ColumnType) -> Option<String> {
    let server_value = server.value.as_ref().map(|v| v.atomic);
    if model.key != server.key.atomic || model.value != server_value {
        let show = |k: crate::AtomicType, v: Option<crate::AtomicType>| match v {
            Some(v) => format!("map of {k} to {v}"),
            None => k.to_string(),
        };
        return Some(format!(
            "model {}, server {}",
            show(model.key, model.value),
            show(server.key.atomic, server_value)
        ));
    }
    let server_max = match server.max {
        Max::Limited(n) => Some(n),
        Max::Unlimited => None,
    };
    // A model field that holds more than the server allows, or that cannot hold what
    // the server may send, is a mismatch; a scalar that became optional is one too.
    let fits = |m: Option<u64>, s: Option<u64>| match (m, s) {
        (None, _) => true,
        (Some(m), Some(s)) => m >= s,
        (Some(_), None) => false,
    };
    if !fits(model.max, server_max) || model.min > server.min {
        return Some(format!(
            "model holds {} to {:?}, server {} to {:?}",
            model.min, model.max, server.min, server_max
        ));
    }
    None
}
