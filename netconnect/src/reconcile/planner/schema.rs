//! What the planner knows of a schema's tables, worked out once per schema: each
//! table's defaults, its columns of references, and where its rows can be held.

use std::collections::HashMap;

use ovsdb_proto::schema::{DatabaseSchema, Max, TableSchema};
use ovsdb_proto::{Atom, Datum};

use super::super::nb::ATTACHABLE;

/// What the planner needs to know of one table, worked out once per schema.
pub(super) struct TableInfo {
    pub(super) schema: TableSchema,
    /// Each column's default value, in the order of the schema's columns (by name).
    pub(super) defaults: Vec<Datum>,
    /// Columns holding sets of references (changed by mutation), sorted.
    pub(super) ref_sets: Vec<String>,
    /// Columns holding any references.
    pub(super) refs: Vec<String>,
    /// The [`ATTACHABLE`] tables and columns that can hold this table's rows.
    pub(super) held_in: Vec<(&'static str, Vec<&'static str>)>,
}

pub(super) fn table_info(schema: &DatabaseSchema) -> HashMap<String, TableInfo> {
    schema
        .tables
        .iter()
        .map(|(name, t)| {
            let mut ref_sets = Vec::new();
            let mut refs = Vec::new();
            for (c, cs) in &t.columns {
                let ty = &cs.column_type;
                if ty.key.ref_table.is_some()
                    || ty.value.as_ref().is_some_and(|v| v.ref_table.is_some())
                {
                    refs.push(c.clone());
                }
                if ty.value.is_none()
                    && ty.key.ref_table.is_some()
                    && !matches!(ty.max, Max::Limited(0 | 1))
                {
                    ref_sets.push(c.clone());
                }
            }
            let held_in = ATTACHABLE
                .iter()
                .filter_map(|&(parent, columns)| {
                    let ps = schema.tables.get(parent)?;
                    let cols: Vec<&'static str> = columns
                        .iter()
                        .copied()
                        .filter(|c| {
                            ps.columns.get(*c).is_some_and(|cs| {
                                cs.column_type.key.ref_table.as_deref() == Some(name.as_str())
                            })
                        })
                        .collect();
                    (!cols.is_empty()).then_some((parent, cols))
                })
                .collect();
            (
                name.clone(),
                TableInfo {
                    schema: t.clone(),
                    defaults: t
                        .columns
                        .values()
                        .map(|c| c.column_type.default_datum())
                        .collect(),
                    ref_sets,
                    refs,
                    held_in,
                },
            )
        })
        .collect()
}

/// The (table, column) pairs that refer to rows of `table` in a set a reference can
/// be taken out of (a column of exactly one reference, such as `Network_Function`'s
/// `inport`, cannot be: a row held there stays held, and its deletion fails).
pub(super) fn referrers<'a>(
    schema: &'a DatabaseSchema,
    table: &'a str,
) -> impl Iterator<Item = (&'a str, &'a str)> {
    schema.tables.values().flat_map(move |t| {
        t.columns.values().filter_map(move |c| {
            let ty = &c.column_type;
            let required_one = ty.min == 1 && matches!(ty.max, Max::Limited(1));
            (ty.key.ref_table.as_deref() == Some(table) && !required_one)
                .then_some((t.name.as_str(), c.name.as_str()))
        })
    })
}

/// The atoms of a datum: a set's elements, a map's keys and values.
pub(super) fn atoms(d: &Datum) -> impl Iterator<Item = &Atom> {
    let (set, map): (&[Atom], &[(Atom, Atom)]) = match d {
        Datum::Set(s) => (s, &[]),
        Datum::Map(m) => (&[], m),
    };
    set.iter().chain(map.iter().flat_map(|(k, v)| [k, v]))
}

/// The placeholders a datum holds.
pub(super) fn placeholders(d: &Datum) -> impl Iterator<Item = &str> {
    atoms(d).filter_map(|a| match a {
        Atom::NamedUuid(p) => Some(&**p),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_is_let_go_of_only_where_a_set_holds_it() {
        let schema =
            DatabaseSchema::from_slice(include_bytes!("../../../../schemas/ovn-nb.ovsschema"))
                .unwrap();
        let of_ports: Vec<(&str, &str)> = referrers(&schema, "Logical_Switch_Port").collect();
        assert!(
            of_ports.contains(&("Logical_Switch", "ports")),
            "{of_ports:?}"
        );
        assert!(
            !of_ports.contains(&("Network_Function", "inport")),
            "exactly one reference: {of_ports:?}"
        );
    }
}
