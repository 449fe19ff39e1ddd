//! The 7.18.0 model against servers with other schemas: Debian bookworm's OVN 23.03
//! (7.0.0, older) and a made-up newer schema with a column and an enum value the model
//! does not know.

use std::collections::BTreeMap;

use integration_tests::{client, NB};
use nb_model::{
    Acl, AclAction, AclDirection, DhcpRelay, LogicalSwitch, LogicalSwitchPort, OvnNorthbound,
};
use ovn_sandbox::{Installation, OvsdbServer, ServerOptions};
use ovsdb_proto::model::Table;
use ovsdb_proto::typed::Db;
use ovsdb_proto::{Condition, DatabaseSchema, Datum, ErrorKind, Operation, Row};

fn schema(file: &str) -> DatabaseSchema {
    DatabaseSchema::from_file(format!("{}/../schemas/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[allow(clippy::too_many_lines)] // a test: one story, start to end
#[tokio::test]
async fn the_model_works_against_ovn_23_03_and_reports_the_difference() {
    let install = Installation::host().unwrap_or_else(|e| panic!("{e}"));
    let server = OvsdbServer::start(&install, &ServerOptions::default()).unwrap();
    let (c, _) = client(&server.unix_remote()).await;
    let db = Db::<OvnNorthbound>::connect(c).await.unwrap();
    let skew = db.skew();
    assert_eq!(
        (skew.server_version.as_str(), skew.model_version.as_str()),
        ("7.0.0", "7.18.0")
    );

    // The reported difference is exactly the difference between the two schema files.
    let (old, new) = (schema("ovn-nb-7.0.0.ovsschema"), schema("ovn-nb.ovsschema"));
    let missing: Vec<String> = new
        .tables
        .keys()
        .filter(|t| old.table(t).is_none())
        .cloned()
        .collect();
    assert_eq!(skew.missing_tables, missing);
    let mut columns = BTreeMap::new();
    for (name, t) in &new.tables {
        if let Some(o) = old.table(name) {
            let m: Vec<String> = t
                .columns
                .keys()
                .filter(|c| o.column(c).is_none())
                .cloned()
                .collect();
            if !m.is_empty() {
                columns.insert(name.clone(), m);
            }
        }
    }
    assert_eq!(skew.missing_columns, columns);
    assert!(skew.missing_columns["Logical_Switch_Port"].contains(&"peer".to_string()));
    assert!(skew.unknown_tables.is_empty() && skew.unknown_columns.is_empty());

    // Rows whose new columns hold their defaults are written and read back.
    let mut txn = db.transaction();
    let mut lsp = LogicalSwitchPort {
        name: "p1".into(),
        ..Default::default()
    };
    lsp.addresses.insert("0a:00:00:00:00:01".into());
    let p = txn.insert(&lsp);
    // An ACL lives only while a switch refers to it.
    let acl = txn.insert(&Acl {
        priority: 10,
        action: AclAction::Drop,
        direction: AclDirection::FromLport,
        match_: "1".into(),
        ..Default::default()
    });
    let mut sw = LogicalSwitch::named("sw0");
    sw.ports = [p].into();
    sw.acls = [acl].into();
    txn.insert(&sw);
    txn.commit().await.unwrap();
    let read = db
        .select([LogicalSwitchPort::COLUMNS.name.eq("p1")])
        .await
        .unwrap();
    assert_eq!(read[0].addresses, lsp.addresses);
    assert_eq!(read[0].peer, None);

    // Writing a column the server lacks is an error naming it, before anything is sent.
    let mut txn = db.transaction();
    let with_peer = LogicalSwitchPort {
        name: "p2".into(),
        peer: Some("lrp".into()),
        ..Default::default()
    };
    txn.insert(&with_peer);
    let e = txn.commit().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config);
    let msg = e.to_string();
    assert!(
        msg.contains("column peer of table Logical_Switch_Port") && msg.contains("7.0.0"),
        "{msg}"
    );
    assert!(db
        .select([LogicalSwitchPort::COLUMNS.name.eq("p2")])
        .await
        .unwrap()
        .is_empty());

    // So is updating one, conditioning on one, or using a table the server lacks.
    let mut txn = db.transaction();
    let mut changed = read[0].clone();
    changed.peer = Some("x".into());
    txn.update(&read[0], &changed);
    assert!(txn
        .commit()
        .await
        .unwrap_err()
        .to_string()
        .contains("column peer"));
    let e = db.select([Acl::COLUMNS.tier.eq(1)]).await.unwrap_err();
    assert!(e.to_string().contains("column tier of table ACL"), "{e}");
    let e = db.select::<DhcpRelay>([]).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("table DHCP_Relay is not in the server's"),
        "{e}"
    );

    // Monitors name only the columns the server has: the model's full column list is
    // refused by the old server, the skew-aware request is not.
    let mut all = BTreeMap::new();
    all.insert(
        "ACL".to_string(),
        ovsdb_proto::MonitorRequest::columns(Acl::columns().iter().map(|c| c.name)),
    );
    let e = db
        .client()
        .unwrap()
        .monitor_cond(NB, "full".into(), &all)
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("tier") || e.as_server_error().is_some(),
        "{e}"
    );
    let mut fitted = BTreeMap::new();
    fitted.insert("ACL".to_string(), db.monitor_request::<Acl>().unwrap());
    let rows = db
        .client()
        .unwrap()
        .monitor_cond(NB, "fitted".into(), &fitted)
        .await
        .unwrap();
    let acl = rows["ACL"].values().next().unwrap();
    let ovsdb_proto::RowUpdate2::Initial(acl) = acl else {
        panic!("{acl:?}")
    };
    let typed = Acl::from_row(ovsdb_proto::Uuid::nil(), acl).unwrap();
    assert_eq!(
        (typed.priority, typed.tier),
        (10, 0),
        "tier, unknown to 7.0.0, keeps its default"
    );
    assert!(db.monitor_request::<DhcpRelay>().is_err());

    // Updating columns both sides know works as usual.
    let mut txn = db.transaction();
    let mut renamed = read[0].clone();
    renamed.name = "p1-renamed".into();
    txn.update(&read[0], &renamed);
    txn.commit().await.unwrap();
    assert_eq!(
        db.select([LogicalSwitchPort::COLUMNS.name.eq("p1-renamed")])
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn a_newer_servers_unknown_column_and_enum_value_are_kept_not_fatal() {
    // A "7.99.0" schema: the ACL action gains a value and Logical_Switch a column.
    let (_dir, file) = integration_tests::newer_nb_schema(|json| {
        let action = &mut json["tables"]["ACL"]["columns"]["action"]["type"]["key"]["enum"][1];
        action.as_array_mut().unwrap().push("future-verdict".into());
        json["tables"]["Logical_Switch"]["columns"]["future_column"] =
            serde_json::json!({"type": {"key": "string", "min": 0, "max": 1}});
    });
    let install = Installation::recent().unwrap();
    let server = OvsdbServer::start(
        &install,
        &ServerOptions {
            schema_file: Some(file),
            ..Default::default()
        },
    )
    .unwrap();

    // Another (newer) client writes what the model does not know.
    let (raw, _) = client(&server.unix_remote()).await;
    let mut acl = Row::new();
    acl.insert("priority".into(), Datum::scalar(5));
    acl.insert("direction".into(), Datum::scalar("to-lport"));
    acl.insert("match".into(), Datum::scalar("ip4"));
    acl.insert("action".into(), Datum::scalar("future-verdict"));
    let mut sw = Row::new();
    sw.insert("name".into(), Datum::scalar("sw0"));
    sw.insert("future_column".into(), Datum::scalar("kept"));
    sw.insert("acls".into(), Datum::named_uuid("a"));
    raw.transact(
        "OVN_Northbound",
        &[
            Operation::insert_named("ACL", acl, "a"),
            Operation::insert("Logical_Switch", sw),
        ],
    )
    .await
    .unwrap();

    let (c, _) = client(&server.unix_remote()).await;
    let db = Db::<OvnNorthbound>::connect(c).await.unwrap();
    assert_eq!(db.skew().server_version, "7.99.0");
    assert_eq!(
        db.skew().unknown_columns["Logical_Switch"],
        ["future_column"]
    );
    assert!(db.skew().missing_tables.is_empty());

    let acls = db.select::<Acl>([]).await.unwrap();
    assert_eq!(acls[0].action, AclAction::Other("future-verdict".into()));
    let switches = db
        .select([LogicalSwitch::COLUMNS.name.eq("sw0")])
        .await
        .unwrap();

    // Typed updates of other columns leave what the model does not know as it was.
    let mut txn = db.transaction();
    let mut acl2 = acls[0].clone();
    acl2.priority = 6;
    txn.update(&acls[0], &acl2);
    let mut sw2 = switches[0].clone();
    sw2.other_config.insert("k".into(), "v".into());
    txn.update(&switches[0], &sw2);
    txn.commit().await.unwrap();
    let r = raw
        .transact(
            "OVN_Northbound",
            &[
                Operation::select("ACL", vec![]),
                Operation::select("Logical_Switch", vec![Condition::eq("name", "sw0")]),
            ],
        )
        .await
        .unwrap();
    let acl_row = &r[0].rows().unwrap()[0];
    assert_eq!(acl_row["action"], Datum::scalar("future-verdict"));
    assert_eq!(acl_row["priority"], Datum::scalar(6));
    let sw_row = &r[1].rows().unwrap()[0];
    assert_eq!(sw_row["future_column"], Datum::scalar("kept"));
    assert_eq!(sw_row["other_config"], Datum::map([("k", "v")]));
}
