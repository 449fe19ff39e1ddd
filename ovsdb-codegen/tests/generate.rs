//! The generator's errors. What it makes of real schemas is checked where it is used:
//! `nb-model`, `sb-model` and `ovs-model` each check in its output for their schema,
//! test that it is not stale, that it compiles and covers every table, and decode rows
//! with it.

#[test]
fn bad_schemas_are_errors_not_panics() {
    let e = ovsdb_codegen::generate(b"{}", None, "x").unwrap_err();
    assert!(e.to_string().contains("name"), "{e}");
    let e = ovsdb_codegen::generate(b"not json", None, "x").unwrap_err();
    assert!(e.to_string().contains("not valid JSON"), "{e}");
}
