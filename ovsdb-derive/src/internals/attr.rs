//! Reading `#[ovsdb(...)]` attributes on containers, fields and enum variants.

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;

use super::ctxt::Ctxt;
use super::symbol::{COLUMN, OTHER, OVSDB, RENAME, TABLE, UUID};

/// A string attribute value and where it was written.
#[derive(Clone, Debug)]
pub struct Spanned {
    /// The value.
    pub value: String,
    /// The span of the literal.
    pub span: Span,
}

/// Runs `each` on every `key` or `key = value` inside `#[ovsdb(...)]`; errors go to `cx`.
fn for_each_meta(
    cx: &Ctxt,
    attrs: &[syn::Attribute],
    mut each: impl FnMut(&ParseNestedMeta) -> syn::Result<()>,
) {
    for attr in attrs.iter().filter(|a| a.path().is_ident(OVSDB)) {
        if let Err(e) = attr.parse_nested_meta(|meta| each(&meta)) {
            cx.syn_error(e);
        }
    }
}

fn string_value(meta: &ParseNestedMeta) -> syn::Result<Spanned> {
    let lit: syn::LitStr = meta.value()?.parse()?;
    Ok(Spanned {
        value: lit.value(),
        span: lit.span(),
    })
}

fn set_once(
    cx: &Ctxt,
    meta: &ParseNestedMeta,
    slot: &mut Option<Spanned>,
    key: &str,
) -> syn::Result<()> {
    let v = string_value(meta)?;
    if slot.is_some() {
        cx.error_spanned_by(&meta.path, format!("duplicate ovsdb attribute `{key}`"));
    }
    *slot = Some(v);
    Ok(())
}

fn unknown(meta: &ParseNestedMeta, allowed: &str) -> syn::Error {
    let name = meta
        .path
        .get_ident()
        .map(ToString::to_string)
        .unwrap_or_else(|| "?".into());
    meta.error(format!(
        "unknown ovsdb attribute `{name}`; expected {allowed}"
    ))
}

/// Attributes of the struct deriving `Table`.
#[derive(Default)]
pub struct Container {
    /// `table = "NAME"`.
    pub table: Option<Spanned>,
}

impl Container {
    /// Reads the container's attributes.
    pub fn from_attrs(cx: &Ctxt, attrs: &[syn::Attribute]) -> Container {
        let mut c = Container::default();
        for_each_meta(cx, attrs, |meta| {
            if meta.path.is_ident(TABLE) {
                set_once(cx, meta, &mut c.table, TABLE)
            } else {
                Err(unknown(meta, "`table = \"...\"`"))
            }
        });
        c
    }
}

/// Attributes of one field.
#[derive(Default)]
pub struct Field {
    /// `column = "NAME"`.
    pub column: Option<Spanned>,
    /// `uuid`: the field holds the row's `_uuid`.
    pub uuid: bool,
}

impl Field {
    /// Reads a field's attributes.
    pub fn from_attrs(cx: &Ctxt, attrs: &[syn::Attribute]) -> Field {
        let mut f = Field::default();
        for_each_meta(cx, attrs, |meta| {
            if meta.path.is_ident(COLUMN) {
                set_once(cx, meta, &mut f.column, COLUMN)
            } else if meta.path.is_ident(UUID) {
                if f.uuid {
                    cx.error_spanned_by(&meta.path, "duplicate ovsdb attribute `uuid`");
                }
                f.uuid = true;
                Ok(())
            } else {
                Err(unknown(meta, "`column = \"...\"` or `uuid`"))
            }
        });
        f
    }
}

/// Attributes of one enum variant.
#[derive(Default)]
pub struct Variant {
    /// `rename = "value"`.
    pub rename: Option<Spanned>,
    /// `other`: holds values the enum does not list.
    pub other: bool,
}

impl Variant {
    /// Reads a variant's attributes.
    pub fn from_attrs(cx: &Ctxt, attrs: &[syn::Attribute]) -> Variant {
        let mut v = Variant::default();
        for_each_meta(cx, attrs, |meta| {
            if meta.path.is_ident(RENAME) {
                set_once(cx, meta, &mut v.rename, RENAME)
            } else if meta.path.is_ident(OTHER) {
                v.other = true;
                Ok(())
            } else {
                Err(unknown(meta, "`rename = \"...\"` or `other`"))
            }
        });
        v
    }
}
