//! The checked-in generated code is what the generator makes today, and covers the
//! schema.

use std::path::Path;

use ovsdb_codegen::check::{Model, ModelFiles};

fn files() -> ModelFiles<'static> {
    ModelFiles {
        root: Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")),
        schema: "schemas/vswitch.ovsschema",
        docs: "ovs-model/docs/vswitch.md",
        generated: "ovs-model/src/generated.rs",
    }
}

#[test]
fn generated_code_is_not_stale() {
    files().assert_fresh();
}

#[test]
fn the_model_has_every_table_of_the_schema_with_docs() {
    Model::<ovs_model::OpenVSwitchDatabase>::assert_covers(&files());
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
