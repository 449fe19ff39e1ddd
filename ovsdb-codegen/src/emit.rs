//! Builds the Rust items for a schema: one struct per table carrying
//! `#[derive(ovsdb_derive::Table)]`, enums for enum-constrained columns, constants for
//! table and column names, typed keys for the schema's indexes, and a database type.

use std::collections::BTreeMap;

use ovsdb_proto::schema::{BaseType, ColumnSchema, ColumnType, DatabaseSchema, Max, TableSchema};
use ovsdb_proto::AtomicType;
use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;

use crate::docs::Docs;
use crate::names::{const_name, field_name, type_name, variant_names};
use crate::Error;

/// The name of the variant that keeps enum values a model does not know.
const OTHER: &str = "Other";

/// `#[doc]` attributes for `text`, one per line, each with the leading space that
/// `///` comments have.
fn doc(text: &str) -> TokenStream {
    let lines = text.lines().map(|l| {
        if l.is_empty() {
            String::new()
        } else {
            format!(" {l}")
        }
    });
    quote! { #( #[doc = #lines] )* }
}

fn ident(name: &str) -> Ident {
    Ident::new(name, Span::call_site())
}

/// An enum type to emit.
struct EnumDef {
    name: String,
    doc: String,
    values: Vec<String>,
}

/// Everything the generator emits for one schema.
pub fn schema_items(schema: &DatabaseSchema, docs: &Docs) -> Result<TokenStream, Error> {
    let mut enums: Vec<EnumDef> = Vec::new();
    let mut tables = Vec::new();
    let mut table_consts = Vec::new();
    let mut column_modules = Vec::new();
    let mut db_entries = Vec::new();
    for t in schema.tables.values() {
        let struct_name = type_name(&t.name);
        let s = ident(&struct_name);
        let table_doc = docs
            .tables
            .get(&t.name)
            .cloned()
            .unwrap_or_else(|| format!("A row of table `{}`.", t.name));
        tables.push(table_struct(
            schema,
            t,
            &struct_name,
            &table_doc,
            &mut enums,
        )?);
        let tconst = ident(&const_name(&t.name));
        let tname = &t.name;
        let tdoc = doc(&format!("`{tname}`."));
        table_consts.push(quote! { #tdoc pub const #tconst: &str = #tname; });
        let module = ident(&field_name(&t.name));
        let mdoc = doc(&format!("Column names of table `{tname}`."));
        let consts = t.columns.values().map(|c| {
            let cn = ident(&const_name(&c.name));
            let name = &c.name;
            let d = doc(&format!("`{name}`."));
            quote! { #d pub const #cn: &str = #name; }
        });
        column_modules.push(quote! { #mdoc pub mod #module { #(#consts)* } });
        db_entries.push(quote! {
            (<#s as ::ovsdb_proto::model::Table>::NAME, <#s as ::ovsdb_proto::model::Table>::columns())
        });
    }
    let table_types: Vec<String> = schema.tables.keys().map(|t| type_name(t)).collect();
    let enum_items = enums.iter().map(enum_item);
    let mut db_name_rust = type_name(&schema.name);
    if table_types.contains(&db_name_rust) {
        db_name_rust.push_str("Database");
    }
    let db = ident(&db_name_rust);
    let (db_name, version) = (&schema.name, &schema.version);
    let db_doc_text = if docs.database.is_empty() {
        format!("The `{db_name}` database, schema version {version}.")
    } else {
        docs.database.clone()
    };
    let db_doc = doc(&db_doc_text);
    Ok(quote! {
        use std::collections::{BTreeMap, BTreeSet};

        use ovsdb_proto::model::{Cond, Ref};
        use ovsdb_proto::Uuid;

        #db_doc
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct #db;

        impl ::ovsdb_proto::model::Database for #db {
            const NAME: &'static str = #db_name;
            const VERSION: &'static str = #version;
            // One entry per table.
            #[allow(clippy::too_many_lines)]
            fn tables() -> ::std::vec::Vec<(&'static str, ::std::vec::Vec<::ovsdb_proto::model::ColumnDesc>)> {
                ::std::vec::Vec::from([ #(#db_entries,)* ])
            }
        }

        /// Table names.
        pub mod tables {
            #(#table_consts)*
        }

        /// Column names, one module per table.
        pub mod columns {
            #(#column_modules)*
        }

        #(#tables)*

        #(#enum_items)*
    })
}

fn table_struct(
    schema: &DatabaseSchema,
    t: &TableSchema,
    struct_name: &str,
    doc_text: &str,
    enums: &mut Vec<EnumDef>,
) -> Result<TokenStream, Error> {
    let s = ident(struct_name);
    let tname = &t.name;
    let mut fields = Vec::new();
    let mut field_types: BTreeMap<&str, (String, TokenStream)> = BTreeMap::new();
    let mut taken: Vec<String> = vec!["uuid".into()];
    for c in t.columns.values() {
        let mut fname = field_name(&c.name);
        while taken.contains(&fname) {
            fname.push('_');
        }
        taken.push(fname.clone());
        let f = ident(&fname);
        let ty = column_rust_type(schema, t, c, struct_name, enums)?;
        field_types.insert(&c.name, (fname.clone(), ty.clone()));
        let cname = &c.name;
        let rename = (fname != c.name).then(|| quote! { #[ovsdb(column = #cname)] });
        let fdoc = doc(&column_doc(c));
        fields.push(quote! {
            #fdoc
            #rename
            pub #f: #ty,
        });
    }
    let mut index_items = Vec::new();
    for cols in &t.indexes {
        index_items.push(index_key(t, struct_name, cols, &field_types)?);
    }
    let doc = doc(doc_text);
    let root = if t.is_root {
        " Root table: rows live without being referenced."
    } else {
        " Not a root table: a row is removed when nothing refers to it any longer."
    };
    Ok(quote! {
        #doc
        #[doc = ""]
        #[doc = #root]
        #[derive(Clone, Debug, Default, PartialEq, ::ovsdb_derive::Table)]
        #[ovsdb(table = #tname)]
        pub struct #s {
            /// The row's `_uuid`.
            #[ovsdb(uuid)]
            pub uuid: Uuid,
            #(#fields)*
        }

        #(#index_items)*
    })
}

fn column_doc(c: &ColumnSchema) -> String {
    let ty = &c.column_type;
    let mut doc = format!("Column `{}`", c.name);
    let base = |b: &BaseType| -> String {
        let mut s = b.atomic.to_string();
        if let Some(r) = &b.ref_table {
            s = format!("reference to `{r}`");
            if b.ref_type == ovsdb_proto::schema::RefType::Weak {
                s.push_str(" (weak)");
            }
        }
        let mut limits = Vec::new();
        if let (Some(lo), Some(hi)) = (b.min_integer, b.max_integer) {
            limits.push(format!("{lo} to {hi}"));
        } else if let Some(lo) = b.min_integer {
            limits.push(format!("at least {lo}"));
        } else if let Some(hi) = b.max_integer {
            limits.push(format!("at most {hi}"));
        }
        if let Some(hi) = b.max_length {
            limits.push(format!("at most {hi} characters"));
        }
        if !limits.is_empty() {
            s = format!("{s}, {}", limits.join(", "));
        }
        s
    };
    match (&ty.value, ty.min, ty.max) {
        (Some(v), _, _) => doc.push_str(&format!(": map of {} to {}", base(&ty.key), base(v))),
        (None, 1, Max::Limited(1)) => doc.push_str(&format!(": {}", base(&ty.key))),
        (None, 0, Max::Limited(1)) => doc.push_str(&format!(": optional {}", base(&ty.key))),
        (None, lo, hi) => doc.push_str(&format!(": set of {} to {hi} {}", lo, base(&ty.key))),
    }
    if !c.mutable {
        doc.push_str("; set on insert only");
    }
    if c.ephemeral {
        doc.push_str("; not kept across server restarts");
    }
    doc.push('.');
    doc
}

fn atom_rust_type(
    schema: &DatabaseSchema,
    base: &BaseType,
    enum_name: &str,
    doc: String,
    enums: &mut Vec<EnumDef>,
) -> Result<TokenStream, Error> {
    Ok(match base.atomic {
        AtomicType::Integer => quote! { i64 },
        AtomicType::Real => quote! { f64 },
        AtomicType::Boolean => quote! { bool },
        AtomicType::String => match &base.enum_values {
            Some(values) => {
                let values: Vec<String> = values
                    .iter()
                    .filter_map(|a| a.as_str().map(str::to_owned))
                    .collect();
                if !enums.iter().any(|e| e.name == enum_name) {
                    enums.push(EnumDef {
                        name: enum_name.to_owned(),
                        doc,
                        values,
                    });
                }
                let e = ident(enum_name);
                quote! { #e }
            }
            None => quote! { String },
        },
        AtomicType::Uuid => match &base.ref_table {
            Some(target) => {
                if !schema.tables.contains_key(target) {
                    return Err(Error(format!("refTable {target} is not in the schema")));
                }
                let t = ident(&type_name(target));
                quote! { Ref<#t> }
            }
            None => quote! { Uuid },
        },
    })
}

fn column_rust_type(
    schema: &DatabaseSchema,
    t: &TableSchema,
    c: &ColumnSchema,
    struct_name: &str,
    enums: &mut Vec<EnumDef>,
) -> Result<TokenStream, Error> {
    let ColumnType {
        key,
        value,
        min,
        max,
    } = &c.column_type;
    // Enum names must not clash with the table types.
    let mut base_enum = format!("{struct_name}{}", type_name(&c.name));
    while schema
        .tables
        .keys()
        .any(|t| type_name(t) == base_enum || type_name(t) == format!("{base_enum}Key"))
    {
        base_enum.push_str("Value");
    }
    let doc = |what: &str| format!("{what} `{}` column `{}`.", t.name, c.name);
    if let Some(v) = value {
        let k = atom_rust_type(
            schema,
            key,
            &format!("{base_enum}Key"),
            doc("Keys of the"),
            enums,
        )?;
        let v = atom_rust_type(
            schema,
            v,
            &format!("{base_enum}Value"),
            doc("Values in the map of the"),
            enums,
        )?;
        if key.atomic == AtomicType::Real {
            return Err(Error(format!(
                "table {} column {}: maps keyed by reals are not supported",
                t.name, c.name
            )));
        }
        return Ok(quote! { BTreeMap<#k, #v> });
    }
    let k = atom_rust_type(schema, key, &base_enum, doc("Values of the"), enums)?;
    Ok(match (min, max) {
        (1, Max::Limited(1)) => k,
        (0, Max::Limited(1)) => quote! { Option<#k> },
        _ => {
            if key.atomic == AtomicType::Real {
                return Err(Error(format!(
                    "table {} column {}: sets of reals are not supported",
                    t.name, c.name
                )));
            }
            quote! { BTreeSet<#k> }
        }
    })
}

fn index_key(
    t: &TableSchema,
    struct_name: &str,
    cols: &[String],
    field_types: &BTreeMap<&str, (String, TokenStream)>,
) -> Result<TokenStream, Error> {
    let s = ident(struct_name);
    let key_name = format!(
        "{struct_name}By{}",
        cols.iter().map(|c| type_name(c)).collect::<String>()
    );
    let k = ident(&key_name);
    let mut fields = Vec::new();
    let mut idents = Vec::new();
    let mut hashable = true;
    for c in cols {
        let (fname, ty) = field_types
            .get(c.as_str())
            .ok_or_else(|| Error(format!("table {} index names unknown column {c}", t.name)))?;
        hashable &= !real_valued(t, c);
        let f = ident(fname);
        let d = doc(&format!("Column `{c}`."));
        fields.push(quote! { #d pub #f: #ty, });
        idents.push(f);
    }
    let list = cols
        .iter()
        .map(|c| format!("`{c}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let doc = doc(&format!(
        "The schema's unique index of `{}` on {list}: at most one row has these values.",
        t.name
    ));
    let derives = if hashable {
        quote! { #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)] }
    } else {
        quote! { #[derive(Clone, Debug, PartialEq)] }
    };
    // Copy types are copied, the others cloned.
    let copies: Vec<bool> = cols
        .iter()
        .map(|c| {
            field_types
                .get(c.as_str())
                .is_some_and(|(_, ty)| copied(ty))
        })
        .collect();
    let take = |base: TokenStream, f: &Ident, copy: bool| {
        if copy {
            quote! { #base.#f }
        } else {
            quote! { #base.#f.clone() }
        }
    };
    let conds: Vec<TokenStream> = idents
        .iter()
        .zip(&copies)
        .map(|(f, copy)| {
            let v = take(quote! { self }, f, *copy);
            quote! { <#s as ::ovsdb_proto::model::Table>::COLUMNS.#f.eq(#v) }
        })
        .collect();
    let col_names: Vec<&str> = cols.iter().map(String::as_str).collect();
    let inits: Vec<TokenStream> = idents
        .iter()
        .zip(&copies)
        .map(|(f, copy)| {
            let v = take(quote! { row }, f, *copy);
            quote! { #f: #v }
        })
        .collect();
    Ok(quote! {
        #doc
        #derives
        pub struct #k {
            #(#fields)*
        }

        impl #k {
            /// The key of `row`.
            pub fn of(row: &#s) -> Self {
                #k { #( #inits, )* }
            }

            /// Conditions that select the row with this key.
            pub fn conditions(&self) -> ::std::vec::Vec<Cond<#s>> {
                ::std::vec::Vec::from([ #(#conds,)* ])
            }
        }

        impl ::ovsdb_proto::model::IndexKey for #k {
            type Table = #s;
            fn values(&self) -> ::std::vec::Vec<(&'static str, ::ovsdb_proto::Datum)> {
                ::std::vec::Vec::from([ #( (#col_names, ::ovsdb_proto::model::ColumnValue::to_datum(&self.#idents)), )* ])
            }
        }
    })
}

/// True when column `c` of `t` holds reals (keys or values): its index key cannot be
/// hashed.
fn real_valued(t: &TableSchema, c: &str) -> bool {
    t.column(c).is_some_and(|c| {
        let ct = &c.column_type;
        ct.key.atomic == AtomicType::Real
            || ct
                .value
                .as_ref()
                .is_some_and(|v| v.atomic == AtomicType::Real)
    })
}

/// True for a field type that is `Copy`.
fn copied(ty: &TokenStream) -> bool {
    matches!(ty.to_string().as_str(), "i64" | "f64" | "bool" | "Uuid")
}

fn enum_item(e: &EnumDef) -> TokenStream {
    let name = ident(&e.name);
    let variants = variant_names(&e.values, OTHER);
    let other = ident(OTHER);
    let items = e
        .values
        .iter()
        .zip(&variants)
        .enumerate()
        .map(|(i, (value, v))| {
            let v = ident(v);
            let d = doc(&format!("`\"{value}\"`."));
            let default = (i == 0).then(|| quote! { #[default] });
            quote! {
                #d
                #default
                #[ovsdb(rename = #value)]
                #v,
            }
        });
    let doc = doc(&e.doc);
    quote! {
        #doc
        #[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, ::ovsdb_derive::Enum)]
        pub enum #name {
            #(#items)*
            /// A value this model does not list (written by a newer server or client).
            #[ovsdb(other)]
            #other(String),
        }
    }
}
