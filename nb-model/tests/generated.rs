//! The checked-in generated code is what the generator makes today.

use std::path::Path;

use ovsdb_codegen::check::{Model, ModelFiles};

fn files() -> ModelFiles<'static> {
    ModelFiles {
        root: Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")),
        schema: "schemas/ovn-nb.ovsschema",
        docs: "nb-model/docs/ovn-nb.md",
        generated: "nb-model/src/generated.rs",
    }
}

#[test]
fn generated_code_is_not_stale() {
    files().assert_fresh();
}

#[test]
fn the_model_has_every_table_of_the_schema_with_docs() {
    Model::<nb_model::OvnNorthbound>::assert_covers(&files());
}
