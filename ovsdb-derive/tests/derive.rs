//! The derives on hand-written models: rows in and out, update2 diffs, enums with
//! values the model does not know, typed columns.

use std::collections::{BTreeMap, BTreeSet};

use ovsdb_derive::{Enum, Table};
use ovsdb_proto::model::{ColumnValue, Ref, Table as _};
use ovsdb_proto::{Datum, Row, Uuid};

#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Enum)]
enum PortType {
    #[default]
    #[ovsdb(rename = "")]
    Vif,
    #[ovsdb(rename = "router")]
    Router,
    #[ovsdb(rename = "localnet")]
    Localnet,
    #[ovsdb(other)]
    Other(String),
}

#[derive(Clone, Debug, Default, PartialEq, Table)]
#[ovsdb(table = "Logical_Switch_Port")]
struct Port {
    #[ovsdb(uuid)]
    uuid: Uuid,
    name: String,
    #[ovsdb(column = "type")]
    kind: PortType,
    tag: Option<i64>,
    addresses: BTreeSet<String>,
    options: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Table)]
#[ovsdb(table = "Logical_Switch")]
struct Switch {
    _uuid: Uuid,
    name: String,
    ports: BTreeSet<Ref<Port>>,
}

fn row(json: serde_json::Value) -> Row {
    serde_json::from_value(json).unwrap()
}

#[test]
fn a_row_decodes_into_the_struct_and_encodes_back() {
    let u = Uuid::new_v4();
    let r = row(serde_json::json!({
        "name": "p1", "type": "router", "tag": ["set", []],
        "addresses": ["set", ["0a:00:00:00:00:01 10.0.0.1", "router"]],
        "options": ["map", [["router-port", "lrp1"]]],
        "a_column_the_model_lacks": 7
    }));
    let p = Port::from_row(u, &r).unwrap();
    assert_eq!(p.uuid, u);
    assert_eq!(p.kind, PortType::Router);
    assert_eq!(p.tag, None);
    assert_eq!(p.addresses.len(), 2);
    assert_eq!(p.options["router-port"], "lrp1");
    let mut back = r.clone();
    back.remove("a_column_the_model_lacks");
    assert_eq!(p.to_row(), back);
    assert_eq!(Port::NAME, "Logical_Switch_Port");
    let names: Vec<_> = Port::columns().iter().map(|c| c.name).collect();
    assert_eq!(names, ["name", "type", "tag", "addresses", "options"]);
}

#[test]
fn update2_diffs_apply_per_column_kind() {
    let mut p = Port::from_row(
        Uuid::nil(),
        &row(serde_json::json!({"name": "p", "tag": 5, "addresses": ["set", ["a", "b"]], "options": ["map", [["x", "1"]]]})),
    )
    .unwrap();
    // As ovsdb-server makes diffs: an optional value's diff is its new value (the empty
    // set when removed); sets toggle; maps add, change or remove pairs.
    p.apply_diff(&row(serde_json::json!({
        "name": "q", "tag": 6, "addresses": ["set", ["b", "c"]], "options": ["map", [["x", "1"], ["y", "2"]]]
    })))
    .unwrap();
    assert_eq!(p.name, "q");
    assert_eq!(p.tag, Some(6), "the optional value was replaced");
    assert_eq!(p.addresses, ["a".to_string(), "c".to_string()].into());
    assert_eq!(p.options, [("y".to_string(), "2".to_string())].into());
    p.apply_diff(&row(serde_json::json!({"tag": ["set", []]})))
        .unwrap();
    assert_eq!(p.tag, None, "the optional value was removed");
    // A bad diff changes nothing.
    let before = p.clone();
    let e = p
        .apply_diff(&row(serde_json::json!({"name": "z", "tag": "x"})))
        .unwrap_err();
    assert_eq!(e.column, "tag");
    assert_eq!(p, before);
}

#[test]
fn an_enum_value_the_model_does_not_know_is_kept() {
    let p = Port::from_row(
        Uuid::nil(),
        &row(serde_json::json!({"type": "virtual-new-kind"})),
    )
    .unwrap();
    assert_eq!(p.kind, PortType::Other("virtual-new-kind".into()));
    assert_eq!(p.kind.to_datum(), Datum::scalar("virtual-new-kind"));
    assert_eq!(PortType::from("localnet"), PortType::Localnet);
    assert_eq!(PortType::Vif.to_string(), "");
}

#[test]
fn a_value_of_the_wrong_type_names_table_and_column() {
    let e = Port::from_row(Uuid::nil(), &row(serde_json::json!({"addresses": 5}))).unwrap_err();
    assert_eq!(
        e.to_string(),
        "table Logical_Switch_Port column addresses: 5 is of type integer, expected string"
    );
}

#[test]
fn typed_columns_build_conditions_and_references_name_their_table() {
    let c = Switch::COLUMNS.name.eq("sw0").into_condition();
    assert_eq!(
        serde_json::to_value(&c).unwrap(),
        serde_json::json!(["name", "==", "sw0"])
    );
    let r = Ref::<Port>::named("p1");
    let c = Switch::COLUMNS.ports.includes([r]).into_condition();
    assert_eq!(
        serde_json::to_value(&c).unwrap(),
        serde_json::json!(["ports", "includes", ["named-uuid", "p1"]])
    );
    assert_eq!(Switch::COLUMNS._uuid.name(), "_uuid");
    let ports = Switch::columns()
        .into_iter()
        .find(|c| c.name == "ports")
        .unwrap();
    assert_eq!(ports.kind.key_ref, Some("Logical_Switch_Port"));
}

#[test]
fn compile_errors_are_reported_with_spans() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*/*.rs");
}

#[test]
fn a_row_decodes_straight_from_wire_json_like_through_a_row() {
    let json = serde_json::json!({
        "_uuid": ["uuid", "36bd8a88-2b8f-4b4c-8e18-1c2f2b6a1f00"],
        "name": "p1", "type": "virtual-new-kind", "tag": ["set", [7]],
        "addresses": ["set", ["a", "b"]], "options": ["map", [["k", "v"]]],
        "a_column_the_model_lacks": {"anything": [1, 2]}
    });
    let direct: Port = serde_json::from_value(json.clone()).unwrap();
    let mut row = json.as_object().unwrap().clone();
    row.remove("a_column_the_model_lacks");
    row.remove("_uuid");
    let via_row = Port::from_row(
        direct.uuid,
        &serde_json::from_value::<ovsdb_proto::Row>(serde_json::Value::Object(row)).unwrap(),
    )
    .unwrap();
    assert_eq!(direct, via_row);
    assert_eq!(
        direct.uuid.to_string(),
        "36bd8a88-2b8f-4b4c-8e18-1c2f2b6a1f00"
    );
    assert_eq!(direct.kind, PortType::Other("virtual-new-kind".into()));
    assert_eq!(direct.tag, Some(7));
    // A name written as a one-element set decodes too.
    let p: Port = serde_json::from_value(serde_json::json!({"name": ["set", ["p2"]]})).unwrap();
    assert_eq!(p.name, "p2");
    let e = serde_json::from_value::<Port>(serde_json::json!({"tag": "seven"})).unwrap_err();
    assert!(
        e.to_string()
            .contains("table Logical_Switch_Port column tag"),
        "{e}"
    );
}
