//! Code generation. The trait impls go inside `const _: () = { ... };` so that nothing
//! they need can clash with the user's names; the typed-columns struct, which users
//! name, goes beside the input.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use super::ast::{Enumeration, Table};
use super::check;
use super::ctxt::Ctxt;

/// `#[derive(Table)]`.
pub fn table(input: &syn::DeriveInput) -> Result<TokenStream, Vec<syn::Error>> {
    let cx = Ctxt::new();
    let model = Table::from_ast(&cx, input);
    if let Some(m) = &model {
        check::table(&cx, m);
    }
    cx.check()?;
    let Some(m) = model else {
        return Err(vec![syn::Error::new_spanned(
            &input.ident,
            "cannot derive Table",
        )]);
    };
    Ok(expand_table(&m))
}

fn expand_table(m: &Table) -> TokenStream {
    let columns = columns_struct(m);
    let table_impl = table_impl(m);
    let deserialize = deserialize_impl(m);
    // Each field type must be a column value; the error, if any, points at the type.
    let assertions = m.columns.iter().map(|c| {
        let ty = &c.field.ty;
        quote_spanned! {ty.span()=>
            const _: fn() = || { fn column_value<V: ::ovsdb_proto::model::ColumnValue>() {} column_value::<#ty>(); };
        }
    });
    quote! {
        #columns

        const _: () = {
            #(#assertions)*
            #table_impl
            #deserialize
        };
    }
}

/// The fields, column names and field types of `m`'s columns, in order.
type Parts<'a> = (Vec<&'a syn::Ident>, Vec<&'a str>, Vec<&'a syn::Type>);

fn parts<'a>(m: &'a Table<'a>) -> Parts<'a> {
    let fields = m.columns.iter().map(|c| c.ident).collect();
    let names = m.columns.iter().map(|c| c.column.as_str()).collect();
    let types = m.columns.iter().map(|c| &c.field.ty).collect();
    (fields, names, types)
}

/// `<Row>Columns`: the typed columns, for conditions and mutations.
fn columns_struct(m: &Table) -> TokenStream {
    let ident = &m.input.ident;
    let vis = &m.input.vis;
    let columns_ident = format_ident!("{}Columns", ident);
    let table = &m.table;
    let uuid_field = m.uuid_fields[0].ident;
    let (fields, names, types) = parts(m);
    let column_docs: Vec<String> = names.iter().map(|n| format!("Column `{n}`.")).collect();
    let struct_doc = format!(
        "The typed columns of [`{ident}`] (table `{table}`), for conditions and mutations."
    );
    quote! {
        #[doc = #struct_doc]
        #[derive(Clone, Copy, Debug)]
        #vis struct #columns_ident {
            /// The row's `_uuid`.
            pub #uuid_field: ::ovsdb_proto::model::Column<#ident, ::ovsdb_proto::Uuid>,
            #(
                #[doc = #column_docs]
                pub #fields: ::ovsdb_proto::model::Column<#ident, #types>,
            )*
        }
    }
}

/// `impl Table`: the table's name and columns, and a row to and from its columns.
fn table_impl(m: &Table) -> TokenStream {
    let ident = &m.input.ident;
    let columns_ident = format_ident!("{}Columns", ident);
    let table = &m.table;
    let uuid_field = m.uuid_fields[0].ident;
    let (fields, names, types) = parts(m);
    quote! {
        #[automatically_derived]
        impl ::ovsdb_proto::model::Table for #ident {
            const NAME: &'static str = #table;
            type Columns = #columns_ident;
            const COLUMNS: #columns_ident = #columns_ident {
                #uuid_field: ::ovsdb_proto::model::Column::new("_uuid"),
                #( #fields: ::ovsdb_proto::model::Column::new(#names), )*
            };

            fn columns() -> ::std::vec::Vec<::ovsdb_proto::model::ColumnDesc> {
                ::std::vec![
                    #(
                        ::ovsdb_proto::model::ColumnDesc {
                            name: #names,
                            kind: <#types as ::ovsdb_proto::model::ColumnValue>::kind(),
                        },
                    )*
                ]
            }

            fn uuid(&self) -> ::ovsdb_proto::Uuid {
                self.#uuid_field
            }

            fn set_uuid(&mut self, uuid: ::ovsdb_proto::Uuid) {
                self.#uuid_field = uuid;
            }

            fn from_row(
                uuid: ::ovsdb_proto::Uuid,
                row: &dyn ::ovsdb_proto::model::ColumnSource,
            ) -> ::std::result::Result<Self, ::ovsdb_proto::model::DecodeError> {
                let mut this = <Self as ::std::default::Default>::default();
                this.#uuid_field = uuid;
                #( ::ovsdb_proto::model::__decode_column(#table, row, #names, &mut this.#fields)?; )*
                ::std::result::Result::Ok(this)
            }

            fn apply_diff(
                &mut self,
                diff: &::ovsdb_proto::Row,
            ) -> ::std::result::Result<(), ::ovsdb_proto::model::DecodeError> {
                // Applied to a copy, so a bad diff leaves the row as it was.
                let mut next = ::std::clone::Clone::clone(self);
                #( ::ovsdb_proto::model::__apply_column(#table, diff, #names, &mut next.#fields)?; )*
                *self = next;
                ::std::result::Result::Ok(())
            }

            fn to_row(&self) -> ::ovsdb_proto::Row {
                let mut row = ::ovsdb_proto::Row::new();
                #(
                    row.insert(
                        ::std::string::String::from(#names),
                        ::ovsdb_proto::model::ColumnValue::to_datum(&self.#fields),
                    );
                )*
                row
            }
        }
    }
}

/// `impl Deserialize`: a row straight from its wire JSON.
fn deserialize_impl(m: &Table) -> TokenStream {
    let ident = &m.input.ident;
    let table = &m.table;
    let uuid_field = m.uuid_fields[0].ident;
    let (fields, names, types) = parts(m);
    quote! {
        /// Decodes a row straight from its wire JSON (`{"column": value, …}`, with
        /// `_uuid` if present): columns the model does not know are skipped, columns
        /// the row lacks keep their defaults.
        #[automatically_derived]
        impl<'de> ::ovsdb_proto::__private::serde::Deserialize<'de> for #ident {
            fn deserialize<__D: ::ovsdb_proto::__private::serde::Deserializer<'de>>(
                __d: __D,
            ) -> ::std::result::Result<Self, __D::Error> {
                struct __Visitor;
                impl<'de> ::ovsdb_proto::__private::serde::de::Visitor<'de> for __Visitor {
                    type Value = #ident;
                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        f.write_str(::std::concat!("a row of table ", #table))
                    }
                    fn visit_map<__A: ::ovsdb_proto::__private::serde::de::MapAccess<'de>>(
                        self,
                        mut __map: __A,
                    ) -> ::std::result::Result<#ident, __A::Error> {
                        let mut this = <#ident as ::std::default::Default>::default();
                        while let ::std::option::Option::Some(__key) =
                            __map.next_key::<::ovsdb_proto::model::__Key<'de>>()?
                        {
                            match __key.as_str() {
                                "_uuid" => {
                                    this.#uuid_field = __map.next_value::<::ovsdb_proto::model::__UuidAtom>()?.0;
                                }
                                #(
                                    #names => {
                                        this.#fields = __map.next_value_seed(
                                            ::ovsdb_proto::model::__ColumnSeed::<#types>::new(#table, #names),
                                        )?;
                                    }
                                )*
                                _ => {
                                    __map.next_value::<::ovsdb_proto::__private::serde::de::IgnoredAny>()?;
                                }
                            }
                        }
                        ::std::result::Result::Ok(this)
                    }
                }
                __d.deserialize_map(__Visitor)
            }
        }
    }
}

/// `#[derive(Enum)]`.
pub fn enumeration(input: &syn::DeriveInput) -> Result<TokenStream, Vec<syn::Error>> {
    let cx = Ctxt::new();
    let model = Enumeration::from_ast(&cx, input);
    if let Some(m) = &model {
        check::enumeration(&cx, m);
    }
    cx.check()?;
    let Some(m) = model else {
        return Err(vec![syn::Error::new_spanned(
            &input.ident,
            "cannot derive Enum",
        )]);
    };
    Ok(expand_enum(&m))
}

fn expand_enum(m: &Enumeration) -> TokenStream {
    let ident = &m.input.ident;
    let variants: Vec<_> = m.values.iter().map(|(v, _, _)| *v).collect();
    let values: Vec<_> = m.values.iter().map(|(_, s, _)| s.as_str()).collect();
    let listed = values
        .iter()
        .map(|v| format!("\"{v}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let (unknown, other_as_str, from_str_other) = match m.other.first() {
        Some(other) => {
            let o = &other.ident;
            (
                quote! { other => #ident::#o(::std::string::String::from(other)) },
                quote! { #ident::#o(s) => s.as_str(), },
                quote! { other => #ident::#o(::std::string::String::from(other)) },
            )
        }
        None => (
            quote! {
                other => return ::std::result::Result::Err(::ovsdb_proto::model::ConvertError::new(::std::format!(
                    "\"{}\" is not one of {}", other, #listed
                )))
            },
            quote! {},
            quote! {},
        ),
    };
    let from_str = if m.other.is_empty() {
        quote! {}
    } else {
        quote! {
            impl ::std::convert::From<&str> for #ident {
                /// The variant for `value`; values the enum does not list are kept as
                /// they are.
                fn from(value: &str) -> Self {
                    match value {
                        #( #values => #ident::#variants, )*
                        #from_str_other
                    }
                }
            }
        }
    };
    quote! {
        const _: () = {
            #[automatically_derived]
            impl ::ovsdb_proto::model::AtomValue for #ident {
                const ATOMIC_TYPE: ::ovsdb_proto::AtomicType = ::ovsdb_proto::AtomicType::String;

                fn from_atom(atom: &::ovsdb_proto::Atom) -> ::std::result::Result<Self, ::ovsdb_proto::model::ConvertError> {
                    let text = match atom {
                        ::ovsdb_proto::Atom::String(s) => s.as_str(),
                        other => return ::std::result::Result::Err(::ovsdb_proto::model::ConvertError::new(::std::format!(
                            "{} is of type {}, expected string", other, other.atomic_type()
                        ))),
                    };
                    ::std::result::Result::Ok(match text {
                        #( #values => #ident::#variants, )*
                        #unknown,
                    })
                }

                fn to_atom(&self) -> ::ovsdb_proto::Atom {
                    ::ovsdb_proto::Atom::String(::ovsdb_proto::CompactString::new(self.as_str()))
                }
            }

            ::ovsdb_proto::impl_scalar_column!(#ident);

            #[automatically_derived]
            impl #ident {
                /// The value as written in the database.
                pub fn as_str(&self) -> &str {
                    match self {
                        #( #ident::#variants => #values, )*
                        #other_as_str
                    }
                }
            }

            #[automatically_derived]
            impl ::std::fmt::Display for #ident {
                fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                    f.write_str(self.as_str())
                }
            }

            #from_str
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expansion_names_the_table_columns_and_uuid_field() {
        let input: syn::DeriveInput = syn::parse_str(
            "#[ovsdb(table = \"Logical_Switch\")] pub struct LogicalSwitch { #[ovsdb(uuid)] pub id: Uuid, \
             pub name: String, #[ovsdb(column = \"external_ids\")] pub ids: BTreeMap<String, String> }",
        )
        .unwrap();
        let out = table(&input).unwrap().to_string();
        assert!(out.contains("pub struct LogicalSwitchColumns"), "{out}");
        assert!(
            out.contains("const NAME : & 'static str = \"Logical_Switch\""),
            "{out}"
        );
        assert!(out.contains("Column :: new (\"_uuid\")"), "{out}");
        assert!(out.contains("\"external_ids\""), "{out}");
        assert!(out.contains("self . id = uuid"), "{out}");
    }

    #[test]
    fn enum_expansion_maps_values_and_keeps_unknown_ones() {
        let input: syn::DeriveInput = syn::parse_str(
            "enum Action { #[ovsdb(rename = \"allow-related\")] AllowRelated, Drop, #[ovsdb(other)] Other(String) }",
        )
        .unwrap();
        let out = enumeration(&input).unwrap().to_string();
        assert!(
            out.contains("\"allow-related\" => Action :: AllowRelated"),
            "{out}"
        );
        assert!(out.contains("\"Drop\" => Action :: Drop"), "{out}");
        assert!(out.contains("other => Action :: Other"), "{out}");
    }
}
