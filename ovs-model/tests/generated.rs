//! The checked-in generated code is what the generator makes today, and covers the
//! schema.

use std::path::Path;

#[test]
fn generated_code_is_not_stale() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let schema = std::fs::read(root.join("schemas/vswitch.ovsschema")).unwrap();
    let docs = std::fs::read_to_string(root.join("ovs-model/docs/vswitch.md")).unwrap();
    let want = ovsdb_codegen::generate(&schema, Some(&docs), "schemas/vswitch.ovsschema").unwrap();
    let have = std::fs::read_to_string(root.join("ovs-model/src/generated.rs")).unwrap();
    assert!(
        have == want,
        "ovs-model/src/generated.rs is stale; regenerate it with\n  cargo run -p ovsdb-codegen -- \
         schemas/vswitch.ovsschema --docs ovs-model/docs/vswitch.md --out ovs-model/src/generated.rs"
    );
}

#[test]
fn the_model_has_every_table_of_the_schema_with_docs() {
    use ovsdb_proto::model::Database;
    let tables = ovs_model::OpenVSwitchDatabase::tables();
    assert_eq!(tables.len(), 19);
    assert_eq!(ovs_model::OpenVSwitchDatabase::VERSION, "8.8.0");
    let schema = ovsdb_proto::DatabaseSchema::from_file(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../schemas/vswitch.ovsschema"
    ))
    .unwrap();
    for (name, columns) in &tables {
        let t = schema.table(name).unwrap();
        assert_eq!(columns.len(), t.columns.len(), "{name}");
        for c in columns {
            let sc = &t.column(c.name).unwrap().column_type;
            assert_eq!(c.kind.key, sc.key.atomic, "{name}.{}", c.name);
            assert_eq!(
                c.kind.value,
                sc.value.as_ref().map(|v| v.atomic),
                "{name}.{}",
                c.name
            );
            assert_eq!(
                c.kind.key_ref,
                sc.key.ref_table.as_deref(),
                "{name}.{}",
                c.name
            );
        }
    }
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/vswitch.md")).unwrap();
    assert_eq!(docs.matches("\n## ").count(), 19);
}

#[test]
fn a_bridge_row_decodes_with_its_enum_and_index_key() {
    use ovsdb_proto::model::{Database, Table};
    use ovsdb_proto::{Row, Uuid};
    assert_eq!(ovs_model::OpenVSwitchDatabase::NAME, "Open_vSwitch");
    let row: Row = serde_json::from_value(
        serde_json::json!({"name": "br-int", "fail_mode": "secure", "datapath_type": "system"}),
    )
    .unwrap();
    let b = ovs_model::Bridge::from_row(Uuid::nil(), &row).unwrap();
    assert_eq!(b.fail_mode, Some(ovs_model::BridgeFailMode::Secure));
    let key = ovs_model::BridgeByName::of(&b);
    assert_eq!(key.name, "br-int");
    assert_eq!(key.conditions().len(), 1);
}
