//! Checks on the model that the type system would report late or confusingly.

use std::collections::HashMap;

use super::ast::{Enumeration, Table};
use super::ctxt::Ctxt;

/// Checks a `Table` model.
pub fn table(cx: &Ctxt, t: &Table) {
    if !t.input.generics.params.is_empty() {
        cx.error_spanned_by(
            &t.input.generics,
            "#[derive(Table)] does not support generic structs",
        );
    }
    if !valid_name(&t.table) {
        cx.error_spanned_by(
            &t.input.ident,
            format!("\"{}\" is not a valid OVSDB table name", t.table),
        );
    }
    match t.uuid_fields.as_slice() {
        [] => cx.error_spanned_by(
            &t.input.ident,
            "a Table needs a field for the row's uuid: name it `_uuid` or mark it #[ovsdb(uuid)]",
        ),
        [one] => {
            if last_ident(&one.field.ty).as_deref() != Some("Uuid") {
                cx.error_spanned_by(&one.field.ty, "the `_uuid` field must be of type Uuid");
            }
        }
        [_, rest @ ..] => {
            for f in rest {
                cx.error_spanned_by(f.ident, "only one field can hold the row's uuid");
            }
        }
    }
    let mut seen: HashMap<&str, &syn::Ident> = HashMap::new();
    for f in &t.columns {
        if !valid_name(&f.column) || f.column.starts_with('_') {
            cx.syn_error(syn::Error::new(
                f.column_span,
                format!("\"{}\" is not a valid OVSDB column name", f.column),
            ));
        }
        if let Some(first) = seen.insert(&f.column, f.ident) {
            cx.error_spanned_by(
                f.ident,
                format!(
                    "column \"{}\" is already mapped to field `{first}`",
                    f.column
                ),
            );
        }
        if let Err((span_of, msg)) = column_type(&f.field.ty) {
            cx.error_spanned_by(span_of, msg);
        }
    }
}

/// Checks an `Enum` model.
pub fn enumeration(cx: &Ctxt, e: &Enumeration) {
    if !e.input.generics.params.is_empty() {
        cx.error_spanned_by(
            &e.input.generics,
            "#[derive(Enum)] does not support generic enums",
        );
    }
    let mut seen: HashMap<&str, &syn::Ident> = HashMap::new();
    for (ident, value, span) in &e.values {
        if let Some(first) = seen.insert(value, ident) {
            cx.syn_error(syn::Error::new(
                *span,
                format!("value \"{value}\" is already used by variant `{first}`"),
            ));
        }
    }
    for v in &e.invalid {
        cx.error_spanned_by(
            &v.ident,
            "an Enum variant must be a unit variant, or `Name(String)` marked #[ovsdb(other)]",
        );
    }
    for (i, v) in e.other.iter().enumerate() {
        if i > 0 {
            cx.error_spanned_by(&v.ident, "only one variant can be #[ovsdb(other)]");
        }
        let holds_string = match &v.fields {
            syn::Fields::Unnamed(u) if u.unnamed.len() == 1 => {
                last_ident(&u.unnamed[0].ty).as_deref() == Some("String")
            }
            _ => false,
        };
        if !holds_string {
            cx.error_spanned_by(
                &v.fields,
                "the #[ovsdb(other)] variant must hold one String",
            );
        }
    }
    if e.values.is_empty() {
        cx.error_spanned_by(&e.input.ident, "an Enum needs at least one unit variant");
    }
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn last_segment(ty: &syn::Type) -> Option<&syn::PathSegment> {
    match ty {
        syn::Type::Path(p) if p.qself.is_none() => p.path.segments.last(),
        syn::Type::Group(g) => last_segment(&g.elem),
        syn::Type::Paren(p) => last_segment(&p.elem),
        _ => None,
    }
}

fn last_ident(ty: &syn::Type) -> Option<String> {
    last_segment(ty).map(|s| s.ident.to_string())
}

fn type_args(seg: &syn::PathSegment) -> Vec<&syn::Type> {
    match &seg.arguments {
        syn::PathArguments::AngleBracketed(a) => a
            .args
            .iter()
            .filter_map(|arg| match arg {
                syn::GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

const HELP: &str = "use i64, f64, bool, String, Uuid, Ref<T> or an Enum, inside Option<_>, \
BTreeSet<_> or BTreeMap<_, _>";

type TypeError<'a> = Result<(), (&'a syn::Type, String)>;

/// A column's field type: an atom, or an atom in Option, BTreeSet or BTreeMap.
fn column_type(ty: &syn::Type) -> TypeError<'_> {
    let Some(seg) = last_segment(ty) else {
        return Err((
            ty,
            format!("this field type cannot map to an OVSDB column: {HELP}"),
        ));
    };
    let args = type_args(seg);
    match seg.ident.to_string().as_str() {
        "Option" | "BTreeSet" if args.len() == 1 => atom_type(args[0]),
        "BTreeMap" if args.len() == 2 => atom_type(args[0]).and(atom_type(args[1])),
        _ => atom_type(ty),
    }
}

/// One atom's type.
fn atom_type(ty: &syn::Type) -> TypeError<'_> {
    let Some(seg) = last_segment(ty) else {
        return Err((ty, format!("this type cannot map to an OVSDB atom: {HELP}")));
    };
    let name = seg.ident.to_string();
    let hint = match name.as_str() {
        "i8" | "i16" | "i32" | "i128" | "u8" | "u16" | "u32" | "u64" | "u128" | "isize"
        | "usize" => Some("OVSDB integers are 64-bit signed: use i64".to_string()),
        "f32" => Some("OVSDB reals are 64-bit: use f64".to_string()),
        "str" | "Cow" | "Box" | "Rc" | "Arc" => {
            Some(format!("`{name}` cannot map to an OVSDB atom: use String"))
        }
        "Vec" | "HashSet" | "VecDeque" => Some(format!(
            "`{name}` cannot map to an OVSDB column: use BTreeSet"
        )),
        "HashMap" => Some("`HashMap` cannot map to an OVSDB column: use BTreeMap".to_string()),
        "Option" | "BTreeSet" | "BTreeMap" => Some(format!(
            "`{name}` cannot be nested in another collection: {HELP}"
        )),
        _ => None,
    };
    match hint {
        Some(h) => Err((ty, h)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors_of(src: &str) -> Vec<String> {
        let input: syn::DeriveInput = syn::parse_str(src).unwrap();
        let cx = Ctxt::new();
        if let Some(t) = Table::from_ast(&cx, &input) {
            table(&cx, &t);
        }
        match cx.check() {
            Ok(()) => vec![],
            Err(errors) => errors.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn a_valid_struct_has_no_errors() {
        let e = errors_of(
            "struct S { #[ovsdb(uuid)] id: Uuid, a: i64, b: Option<String>, c: BTreeSet<Ref<T>>, \
             d: std::collections::BTreeMap<String, i64>, e: MyEnum }",
        );
        assert!(e.is_empty(), "{e:?}");
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let e = errors_of(
            "#[ovsdb(tabel = \"X\")] struct S { a: u32, b: Vec<String>, #[ovsdb(column = \"a\")] c: i64, \
             d: Option<Option<i64>>, #[ovsdb(colour = \"x\")] e: &'static str }",
        );
        let joined = e.join("\n");
        for needle in [
            "unknown ovsdb attribute `tabel`",
            "unknown ovsdb attribute `colour`",
            "a Table needs a field for the row's uuid",
            "use i64",
            "use BTreeSet",
            "column \"a\" is already mapped to field `a`",
            "cannot be nested",
            "cannot map to an OVSDB column",
        ] {
            assert!(joined.contains(needle), "missing {needle:?} in:\n{joined}");
        }
        assert_eq!(e.len(), 8, "{joined}");
    }

    #[test]
    fn enum_checks() {
        let input: syn::DeriveInput = syn::parse_str(
            "enum E { #[ovsdb(rename = \"a\")] A, #[ovsdb(rename = \"a\")] B, C(i64), #[ovsdb(other)] D(i64) }",
        )
        .unwrap();
        let cx = Ctxt::new();
        let model = Enumeration::from_ast(&cx, &input).unwrap();
        enumeration(&cx, &model);
        let joined: Vec<String> = cx
            .check()
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect();
        let joined = joined.join("\n");
        assert!(joined.contains("already used by variant `A`"), "{joined}");
        assert!(joined.contains("must be a unit variant"), "{joined}");
        assert!(joined.contains("must hold one String"), "{joined}");
    }
}
