//! The derive input turned into a model of what is to be generated.

use super::attr;
use super::ctxt::Ctxt;

/// A struct deriving `Table`.
pub struct Table<'a> {
    /// The struct.
    pub input: &'a syn::DeriveInput,
    /// The table's name in the schema.
    pub table: String,
    /// The columns, in declaration order (the uuid field excluded).
    pub columns: Vec<Field<'a>>,
    /// Fields marked as holding `_uuid` (one is right).
    pub uuid_fields: Vec<Field<'a>>,
}

/// One field of a `Table` struct.
pub struct Field<'a> {
    /// The field.
    pub field: &'a syn::Field,
    /// Its name.
    pub ident: &'a syn::Ident,
    /// The column's name in the schema.
    pub column: String,
    /// Where the column name came from (the attribute, or the field's name).
    pub column_span: proc_macro2::Span,
}

impl<'a> Table<'a> {
    /// Builds the model; `None` (with an error in `cx`) if the input is not a struct
    /// with named fields.
    pub fn from_ast(cx: &Ctxt, input: &'a syn::DeriveInput) -> Option<Table<'a>> {
        let attrs = attr::Container::from_attrs(cx, &input.attrs);
        let fields = match &input.data {
            syn::Data::Struct(syn::DataStruct {
                fields: syn::Fields::Named(named),
                ..
            }) => &named.named,
            _ => {
                cx.error_spanned_by(
                    &input.ident,
                    "#[derive(Table)] needs a struct with named fields, one per column",
                );
                return None;
            }
        };
        let table = attrs
            .table
            .map(|t| t.value)
            .unwrap_or_else(|| input.ident.to_string());
        let mut columns = Vec::new();
        let mut uuid_fields = Vec::new();
        for field in fields {
            let ident = field.ident.as_ref()?;
            let fattrs = attr::Field::from_attrs(cx, &field.attrs);
            let (column, column_span) = match fattrs.column {
                Some(c) => (c.value, c.span),
                None => (ident.to_string(), ident.span()),
            };
            let f = Field {
                field,
                ident,
                column,
                column_span,
            };
            if fattrs.uuid || f.ident == "_uuid" {
                uuid_fields.push(f);
            } else {
                columns.push(f);
            }
        }
        Some(Table {
            input,
            table,
            columns,
            uuid_fields,
        })
    }
}

/// An enum deriving `Enum`.
pub struct Enumeration<'a> {
    /// The enum.
    pub input: &'a syn::DeriveInput,
    /// Unit variants and their values on the wire.
    pub values: Vec<(&'a syn::Ident, String, proc_macro2::Span)>,
    /// The `#[ovsdb(other)]` variants (one is allowed).
    pub other: Vec<&'a syn::Variant>,
    /// Variants with fields that are not marked `other`.
    pub invalid: Vec<&'a syn::Variant>,
}

impl<'a> Enumeration<'a> {
    /// Builds the model; `None` (with an error in `cx`) if the input is not an enum.
    pub fn from_ast(cx: &Ctxt, input: &'a syn::DeriveInput) -> Option<Enumeration<'a>> {
        let syn::Data::Enum(data) = &input.data else {
            cx.error_spanned_by(&input.ident, "#[derive(Enum)] needs an enum");
            return None;
        };
        let mut e = Enumeration {
            input,
            values: Vec::new(),
            other: Vec::new(),
            invalid: Vec::new(),
        };
        for v in &data.variants {
            let attrs = attr::Variant::from_attrs(cx, &v.attrs);
            if attrs.other {
                e.other.push(v);
            } else if matches!(v.fields, syn::Fields::Unit) {
                let (value, span) = match attrs.rename {
                    Some(r) => (r.value, r.span),
                    None => (v.ident.to_string(), v.ident.span()),
                };
                e.values.push((&v.ident, value, span));
            } else {
                e.invalid.push(v);
            }
        }
        Some(e)
    }
}
