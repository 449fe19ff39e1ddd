//! The checked-in generated code is what the generator makes today, and covers the
//! schema.

use std::path::Path;

use ovsdb_codegen::check::{Model, ModelFiles};

fn files() -> ModelFiles<'static> {
    ModelFiles {
        root: Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")),
        schema: "schemas/ovn-sb.ovsschema",
        docs: "sb-model/docs/ovn-sb.md",
        generated: "sb-model/src/generated.rs",
    }
}

#[test]
fn generated_code_is_not_stale() {
    files().assert_fresh();
}

#[test]
fn the_model_has_every_table_of_the_schema_with_docs() {
    Model::<sb_model::OvnSouthbound>::assert_covers(&files());
}

#[test]
fn a_chassis_row_decodes_and_encodes_back() {
    use ovsdb_proto::model::Table;
    use ovsdb_proto::{Row, Uuid};
    let row: Row = serde_json::from_value(serde_json::json!({
        "name": "chassis-1", "hostname": "node1",
        "encaps": ["set", [["uuid", "36bd8a88-2b8f-4b4c-8e18-1c2f2b6a1f00"]]],
        "other_config": ["map", [["ovn-bridge-mappings", "physnet:br-ex"]]]
    }))
    .unwrap();
    let c = sb_model::Chassis::from_row(Uuid::nil(), &row).unwrap();
    assert_eq!(c.hostname, "node1");
    assert_eq!(c.encaps.len(), 1);
    assert_eq!(c.other_config["ovn-bridge-mappings"], "physnet:br-ex");
    assert_eq!(c.to_row()["name"], row["name"]);
}
