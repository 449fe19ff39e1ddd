//! Rust names for schema names: `Logical_Router_Port` -> `LogicalRouterPort`,
//! `allow-related` -> `AllowRelated`, `type` -> `type_`.

/// A type name: each `_`-separated part capitalised; parts written all in capitals
/// (`ACL`, `NB`, `DHCP`) keep only their first capital.
pub fn type_name(schema_name: &str) -> String {
    let mut out = String::new();
    for part in schema_name.split(|c: char| !c.is_ascii_alphanumeric()) {
        if part.is_empty() {
            continue;
        }
        let all_caps = part.chars().all(|c| !c.is_ascii_lowercase());
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            if all_caps {
                out.extend(chars.map(|c| c.to_ascii_lowercase()));
            } else {
                out.extend(chars);
            }
        }
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'V');
    }
    out
}

/// A field or module name: lower case, `_`-separated, keywords given a trailing `_`.
pub fn field_name(schema_name: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in schema_name.chars() {
        if c.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else if c.is_ascii_alphanumeric() {
            out.push(c);
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        } else {
            if !out.ends_with('_') {
                out.push('_');
            }
            prev_lower = false;
        }
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    if is_keyword(&out) {
        out.push('_');
    }
    out
}

/// A constant's name: the field name in capitals.
pub fn const_name(schema_name: &str) -> String {
    field_name(schema_name)
        .trim_end_matches('_')
        .to_ascii_uppercase()
}

fn is_keyword(s: &str) -> bool {
    matches!(
        s,
        "as" | "break"
            | "const"
            | "continue"
            | "crate"
            | "else"
            | "enum"
            | "extern"
            | "false"
            | "fn"
            | "for"
            | "if"
            | "impl"
            | "in"
            | "let"
            | "loop"
            | "match"
            | "mod"
            | "move"
            | "mut"
            | "pub"
            | "ref"
            | "return"
            | "self"
            | "Self"
            | "static"
            | "struct"
            | "super"
            | "trait"
            | "true"
            | "type"
            | "unsafe"
            | "use"
            | "where"
            | "while"
            | "async"
            | "await"
            | "dyn"
            | "abstract"
            | "become"
            | "box"
            | "do"
            | "final"
            | "macro"
            | "override"
            | "priv"
            | "typeof"
            | "unsized"
            | "virtual"
            | "yield"
            | "try"
            | "gen"
    )
}

/// Variant names for enum values, made unique (a clash gets a numeric suffix) and kept
/// clear of `other`, the name of the variant for unknown values.
pub fn variant_names(values: &[String], other: &str) -> Vec<String> {
    let mut used = vec![other.to_string()];
    values
        .iter()
        .map(|v| {
            let base = if v.is_empty() {
                "Empty".to_string()
            } else {
                type_name(v)
            };
            let mut name = base.clone();
            let mut n = 2;
            while used.contains(&name) {
                name = format!("{base}{n}");
                n += 1;
            }
            used.push(name.clone());
            name
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_become_type_names() {
        assert_eq!(type_name("Logical_Router_Port"), "LogicalRouterPort");
        assert_eq!(type_name("ACL"), "Acl");
        assert_eq!(type_name("NB_Global"), "NbGlobal");
        assert_eq!(type_name("QoS"), "QoS");
        assert_eq!(type_name("Open_vSwitch"), "OpenVSwitch");
        assert_eq!(type_name("allow-related"), "AllowRelated");
        assert_eq!(type_name("dnat_and_snat"), "DnatAndSnat");
        assert_eq!(type_name("802.1q"), "V8021q");
    }

    #[test]
    fn column_names_become_field_names() {
        assert_eq!(field_name("external_ids"), "external_ids");
        assert_eq!(field_name("type"), "type_");
        assert_eq!(field_name("match"), "match_");
        assert_eq!(field_name("Logical_Switch"), "logical_switch");
        assert_eq!(field_name("ipv6_ra_configs"), "ipv6_ra_configs");
        assert_eq!(const_name("type"), "TYPE");
    }

    #[test]
    fn variant_names_are_unique() {
        let v: Vec<String> = ["a-b", "a_b", "", "other"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(variant_names(&v, "Other"), ["AB", "AB2", "Empty", "Other2"]);
    }
}
