//! Documentation to attach to generated tables, read from a Markdown-like file:
//!
//! ```text
//! ## Logical_Switch
//! What a logical switch is...
//!
//! ## Logical_Switch_Port
//! ...
//! ```
//!
//! Text before the first heading documents the database type.

use std::collections::BTreeMap;

/// Per-table documentation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Docs {
    /// Text for the database type.
    pub database: String,
    /// Text per table name.
    pub tables: BTreeMap<String, String>,
}

impl Docs {
    /// Parses the docs file format described in the module docs.
    pub fn parse(text: &str) -> Docs {
        let mut docs = Docs::default();
        let mut current: Option<String> = None;
        let mut body = String::new();
        let flush = |current: &Option<String>, body: &mut String, docs: &mut Docs| {
            let text = body.trim().to_string();
            match current {
                Some(t) => {
                    docs.tables.insert(t.clone(), text);
                }
                None => docs.database = text,
            }
            body.clear();
        };
        for line in text.lines() {
            if let Some(name) = line.strip_prefix("## ") {
                flush(&current, &mut body, &mut docs);
                current = Some(name.trim().to_string());
            } else {
                body.push_str(line);
                body.push('\n');
            }
        }
        flush(&current, &mut body, &mut docs);
        docs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_split_tables() {
        let d = Docs::parse("The db.\n\n## A\nFirst\nline.\n\n## B\nSecond.\n");
        assert_eq!(d.database, "The db.");
        assert_eq!(d.tables["A"], "First\nline.");
        assert_eq!(d.tables["B"], "Second.");
    }
}
