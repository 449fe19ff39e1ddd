//! Schemas parsed from the repository's files and from hand-written documents, and
//! values checked against them.

use std::path::Path;

use super::*;
use serde_json::json;

fn schemas_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas")
}

#[test]
fn every_schema_in_the_repository_parses() {
    let mut seen = 0;
    for entry in std::fs::read_dir(schemas_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("ovsschema") {
            continue;
        }
        let s = DatabaseSchema::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(!s.tables.is_empty(), "{}", path.display());
        seen += 1;
    }
    assert_eq!(seen, 4, "expected the four schemas in schemas/");
}

#[test]
fn nb_schema_has_its_tables_and_types() {
    let s = DatabaseSchema::from_file(schemas_dir().join("ovn-nb.ovsschema")).unwrap();
    assert_eq!(s.name, "OVN_Northbound");
    assert_eq!(s.version, "7.18.0");
    assert_eq!(s.tables.len(), 39);
    let ls = s.table("Logical_Switch").unwrap();
    assert!(ls.is_root);
    let ports = &ls.column("ports").unwrap().column_type;
    assert_eq!(ports.key.ref_table.as_deref(), Some("Logical_Switch_Port"));
    assert_eq!(ports.key.ref_type, RefType::Strong);
    assert_eq!((ports.min, ports.max), (0, Max::Unlimited));
    let lsp = s.table("Logical_Switch_Port").unwrap();
    assert!(!lsp.is_root);
    assert_eq!(lsp.indexes, vec![vec!["name".to_string()]]);
    let acl = s.table("ACL").unwrap();
    let prio = &acl.column("priority").unwrap().column_type.key;
    assert_eq!((prio.min_integer, prio.max_integer), (Some(0), Some(32767)));
    let action = &acl.column("action").unwrap().column_type.key;
    assert!(action
        .enum_values
        .as_ref()
        .unwrap()
        .contains(&Atom::from("allow-related")));
    let ext = &ls.column("external_ids").unwrap().column_type;
    assert!(ext.is_map());
}

#[test]
fn a_datum_that_does_not_fit_names_table_column_and_value() {
    let s = DatabaseSchema::from_file(schemas_dir().join("ovn-nb.ovsschema")).unwrap();
    let acl = s.table("ACL").unwrap();
    let e = acl
        .check_datum("priority", &Datum::scalar(40000))
        .unwrap_err();
    assert_eq!(e.table, "ACL");
    assert_eq!(e.column, "priority");
    assert_eq!(e.value, "40000");
    assert!(
        e.to_string().contains("greater than the maximum 32767"),
        "{e}"
    );
    let e = acl
        .check_datum("action", &Datum::scalar("permit"))
        .unwrap_err();
    assert!(e.reason.contains("\"permit\" is not one of"), "{e}");
    let e = acl
        .check_datum("priority", &Datum::scalar("high"))
        .unwrap_err();
    assert!(
        e.reason
            .contains("\"high\" is of type string, expected integer"),
        "{e}"
    );
    let e = acl.check_datum("nope", &Datum::scalar(1)).unwrap_err();
    assert!(e.reason.contains("has no column nope"), "{e}");
    let ls = s.table("Logical_Switch").unwrap();
    assert!(ls
        .check_datum("external_ids", &Datum::map([("k", "v")]))
        .is_ok());
    assert!(ls.check_datum("external_ids", &Datum::empty()).is_ok());
    let e = ls
        .check_datum("external_ids", &Datum::set(["k"]))
        .unwrap_err();
    assert!(e.reason.contains("is a set, the column holds a map"), "{e}");
    let e = ls.check_datum("name", &Datum::set(["a", "b"])).unwrap_err();
    assert!(
        e.reason
            .contains("has 2 elements, the column allows 1 to 1"),
        "{e}"
    );
    let e = ls.check_datum("ports", &Datum::set(["x"])).unwrap_err();
    assert!(e.reason.contains("expected uuid"), "{e}");
    assert!(ls.check_datum("ports", &Datum::named_uuid("p1")).is_ok());
}

#[test]
fn string_lengths_count_characters_not_bytes() {
    let t = ColumnType::parse(
        &json!({"key": {"type": "string", "minLength": 1, "maxLength": 2}}),
        "t",
    )
    .unwrap();
    assert!(t.check(&Datum::scalar("éé")).is_ok());
    assert_eq!(
        t.check(&Datum::scalar("ééé")),
        Err(ValueError::TooLong {
            atom: "ééé".into(),
            max: 2
        })
    );
    assert_eq!(
        t.check(&Datum::scalar("")).unwrap_err().to_string(),
        r#""" is shorter than 1 characters"#
    );
}

#[test]
fn malformed_schemas_say_where_and_what() {
    let cases = [
        (json!([]), "top level", "expected a schema object"),
        (
            json!({"name": "X", "version": "1.0", "tables": {}}),
            "version",
            "x.y.z",
        ),
        (
            json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {"c": {"type": "float"}}}}}),
            "tables.T.columns.c.type",
            "unknown atomic type \"float\"",
        ),
        (
            json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {"c": {"type": {"key": "integer", "min": 2}}}}}}),
            "tables.T.columns.c.type.min",
            "must be 0 or 1",
        ),
        (
            json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {"c": {"type": {"key": {"type": "uuid", "refTable": "U"}}}}}}}),
            "tables.T.columns.c",
            "refTable \"U\" is not a table",
        ),
        (
            json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {}, "indexes": [["zz"]]}}}),
            "tables.T.indexes[0]",
            "no column named \"zz\"",
        ),
        (
            json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {"c": {"type": {"key": {"type": "string", "enum": ["set", [1]]}}}}}}}),
            "tables.T.columns.c.type.key.enum",
            "enum value 1 is not of type string",
        ),
        (
            json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {"c": {"type": {"key": {"type": "integer", "minInteger": 5, "maxInteger": 4}}}}}}}),
            "tables.T.columns.c.type.key",
            "minInteger 5 exceeds maxInteger 4",
        ),
        (
            json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {"c": {"type": {"key": {"type": "real", "minReal": 1.5, "maxReal": 0.5}}}}}}}),
            "tables.T.columns.c.type.key",
            "minReal 1.5 exceeds maxReal 0.5",
        ),
        (
            json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {"c": {"type": {"key": {"type": "string", "minLength": 3, "maxLength": 2}}}}}}}),
            "tables.T.columns.c.type.key",
            "minLength 3 exceeds maxLength 2",
        ),
        (
            json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {"c": {"type": {"key": {"type": "string", "minInteger": 1}}}}}}}),
            "tables.T.columns.c.type.key.minInteger",
            "not allowed on a base type of type string",
        ),
        (
            json!({"name": "X", "version": "1.0.0", "tables": {"T": {"columns": {"c": {"type": {"key": {"type": "integer", "refType": "weak"}}}}}}}),
            "tables.T.columns.c.type.key.refType",
            "not allowed on a base type of type integer",
        ),
    ];
    for (json, path, message) in cases {
        let e = DatabaseSchema::from_json(&json).unwrap_err();
        assert_eq!(e.path, path, "{e}");
        assert!(e.message.contains(message), "{e}");
    }
}

#[test]
fn schema_without_is_root_makes_every_table_a_root() {
    let s = DatabaseSchema::from_json(&json!({
        "name": "X", "version": "1.0.0",
        "tables": {"A": {"columns": {}}, "B": {"columns": {}}}
    }))
    .unwrap();
    assert!(s.tables.values().all(|t| t.is_root));
}
