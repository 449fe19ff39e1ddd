//! Every kind of typed operation through nb-model against a real ovsdb-server.

use integration_tests::{client, nb_server};
use nb_model::{
    Acl, AclAction, AclDirection, LogicalSwitch, LogicalSwitchPort, LogicalSwitchPortByName,
    OvnNorthbound,
};
use ovsdb_proto::model::Table;
use ovsdb_proto::typed::Db;

async fn db(remote: &str) -> Db<OvnNorthbound> {
    let (c, _) = client(remote).await;
    let db = Db::<OvnNorthbound>::connect(c).await.unwrap();
    assert!(
        db.skew().is_empty(),
        "same schema on both sides: {:?}",
        db.skew()
    );
    db
}

fn port(name: &str, mac: &str) -> LogicalSwitchPort {
    LogicalSwitchPort {
        name: name.into(),
        addresses: [mac.to_string()].into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_switch_and_its_new_ports_are_inserted_together_and_read_back_typed() {
    let server = nb_server();
    let db = db(&server.unix_remote()).await;
    let mut txn = db.transaction();
    let p1 = txn.insert(&port("p1", "0a:00:00:00:00:01"));
    let p2 = txn.insert(&port("p2", "0a:00:00:00:00:02"));
    let mut sw = LogicalSwitch::named("sw0");
    sw.ports = [p1.clone(), p2.clone()].into();
    let sw_ref = txn.insert(&sw);
    let result = txn.commit().await.unwrap();
    let (u1, u2, usw) = (
        result.uuid(&p1).unwrap(),
        result.uuid(&p2).unwrap(),
        result.uuid(&sw_ref).unwrap(),
    );

    let switches = db
        .select([LogicalSwitch::COLUMNS.name.eq("sw0")])
        .await
        .unwrap();
    assert_eq!(switches.len(), 1);
    assert_eq!(switches[0].uuid, usw);
    let got: Vec<_> = switches[0]
        .ports
        .iter()
        .map(|r| r.uuid().unwrap())
        .collect();
    let mut want = vec![u1, u2];
    want.sort();
    assert_eq!(got, want);

    // Look a port up by the schema's index on name.
    let key = LogicalSwitchPortByName { name: "p2".into() };
    let found = db.select(key.conditions()).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].uuid, u2);
    assert_eq!(LogicalSwitchPortByName::of(&found[0]), key);
}

#[tokio::test]
async fn update_sends_only_changed_columns_and_keeps_a_concurrent_change() {
    let server = nb_server();
    let a = db(&server.unix_remote()).await;
    let b = db(&server.unix_remote()).await;
    let mut txn = a.transaction();
    let r = txn.insert(&LogicalSwitch::named("sw0"));
    let uuid = txn.commit().await.unwrap().uuid(&r).unwrap();
    let old = a
        .select([LogicalSwitch::COLUMNS.uuid.eq(uuid)])
        .await
        .unwrap()
        .remove(0);

    // b changes other_config while a holds an old copy.
    let mut theirs = old.clone();
    theirs
        .other_config
        .insert("subnet".into(), "10.0.0.0/24".into());
    let mut txn = b.transaction();
    txn.update(&old, &theirs);
    txn.commit().await.unwrap();

    // a renames the switch from its old copy: only `name` is sent.
    let mut ours = old.clone();
    ours.name = "sw0-renamed".into();
    let mut txn = a.transaction();
    let n = txn.update(&old, &ours);
    match &txn.operations()[0] {
        ovsdb_proto::Operation::Update { row, .. } => {
            assert_eq!(
                row.keys().collect::<Vec<_>>(),
                ["name"],
                "only the changed column"
            )
        }
        other => panic!("{other:?}"),
    }
    let result = txn.commit().await.unwrap();
    assert_eq!(result.count(n), Some(1));
    let now = a
        .select([LogicalSwitch::COLUMNS.uuid.eq(uuid)])
        .await
        .unwrap()
        .remove(0);
    assert_eq!(now.name, "sw0-renamed");
    assert_eq!(
        now.other_config["subnet"], "10.0.0.0/24",
        "b's change survived"
    );
}

#[tokio::test]
async fn mutations_of_different_map_keys_by_two_writers_both_survive() {
    let server = nb_server();
    let a = db(&server.unix_remote()).await;
    let b = db(&server.tcp_remote()).await;
    let mut txn = a.transaction();
    txn.insert(&LogicalSwitch::named("sw0"));
    txn.commit().await.unwrap();
    let ids = LogicalSwitch::COLUMNS.external_ids;
    let name = LogicalSwitch::COLUMNS.name;
    let (ra, rb) = tokio::join!(
        async {
            let mut t = a.transaction();
            t.mutate(
                [name.eq("sw0")],
                [ids.insert([("owner-a".to_string(), "1".to_string())])],
            );
            t.commit().await
        },
        async {
            let mut t = b.transaction();
            t.mutate(
                [name.eq("sw0")],
                [ids.insert([("owner-b".to_string(), "2".to_string())])],
            );
            t.commit().await
        }
    );
    ra.unwrap();
    rb.unwrap();
    let sw = a.select([name.eq("sw0")]).await.unwrap().remove(0);
    assert_eq!(sw.external_ids.len(), 2, "{:?}", sw.external_ids);
    // Delete one key by mutation, the other stays.
    let mut t = a.transaction();
    t.mutate([name.eq("sw0")], [ids.delete_keys(["owner-a".to_string()])]);
    t.commit().await.unwrap();
    let sw = a.select([name.eq("sw0")]).await.unwrap().remove(0);
    assert_eq!(sw.external_ids.keys().collect::<Vec<_>>(), ["owner-b"]);
}

#[tokio::test]
async fn typed_conditions_select_and_delete_and_enums_round_trip() {
    let server = nb_server();
    let db = db(&server.unix_remote()).await;
    let mut txn = db.transaction();
    let mut refs = Vec::new();
    for (prio, action) in [
        (100, AclAction::AllowRelated),
        (200, AclAction::Drop),
        (300, AclAction::Reject),
    ] {
        refs.push(txn.insert(&Acl {
            priority: prio,
            action,
            direction: AclDirection::ToLport,
            match_: format!("ip4 && udp.dst == {prio}"),
            ..Default::default()
        }));
    }
    let mut sw = LogicalSwitch::named("sw0");
    sw.acls = refs.into_iter().collect();
    txn.insert(&sw);
    txn.commit().await.unwrap();

    let cols = Acl::COLUMNS;
    let high = db.select([cols.priority.ge(200)]).await.unwrap();
    assert_eq!(high.len(), 2);
    let drops = db.select([cols.action.eq(AclAction::Drop)]).await.unwrap();
    assert_eq!(drops.len(), 1);
    assert_eq!(drops[0].priority, 200);
    assert_eq!(drops[0].direction, AclDirection::ToLport);

    // Deleting the switch's reference garbage-collects the (non-root) ACL row.
    let mut txn = db.transaction();
    let drop_ref = ovsdb_proto::model::Ref::new(drops[0].uuid);
    let n = txn.mutate(
        [LogicalSwitch::COLUMNS.name.eq("sw0")],
        [LogicalSwitch::COLUMNS.acls.delete([drop_ref])],
    );
    let result = txn.commit().await.unwrap();
    assert_eq!(result.count(n), Some(1));
    assert_eq!(db.select([cols.priority.lt(1000)]).await.unwrap().len(), 2);

    let mut txn = db.transaction();
    let n = txn.delete([LogicalSwitch::COLUMNS.name.eq("sw0")]);
    assert_eq!(txn.commit().await.unwrap().count(n), Some(1));
    assert!(
        db.select::<Acl>([]).await.unwrap().is_empty(),
        "ACLs went with their switch"
    );
}

#[tokio::test]
async fn wait_unchanged_refuses_a_write_based_on_a_stale_read() {
    let server = nb_server();
    let db = db(&server.unix_remote()).await;
    let mut txn = db.transaction();
    // A row as a cache hands it out (an `Arc`) is inserted as is.
    txn.insert(&std::sync::Arc::new(LogicalSwitch::named("sw0")));
    txn.commit().await.unwrap();
    let read = db
        .select([LogicalSwitch::COLUMNS.name.eq("sw0")])
        .await
        .unwrap()
        .remove(0);

    // Unchanged: the guarded update goes through.
    let mut next = read.clone();
    next.other_config.insert("k".into(), "1".into());
    let mut txn = db.transaction();
    txn.wait_unchanged(&std::sync::Arc::new(read.clone()), &[]);
    txn.update(&read, &next);
    txn.commit().await.unwrap();

    // The row changed since `read`: the same guarded write now fails, changing nothing.
    let mut stale = read.clone();
    stale.name = "other".into();
    let mut txn = db.transaction();
    txn.wait_unchanged(&read, &[LogicalSwitch::COLUMNS.other_config.into()]);
    txn.update(&read, &stale);
    let e = txn.commit().await.unwrap_err();
    let t = e.as_transaction_error().expect("a transaction error");
    assert_eq!(
        (t.operation, t.error.error.as_str()),
        (Some(0), "timed out")
    );
    let now = db
        .select([LogicalSwitch::COLUMNS.uuid.eq(read.uuid)])
        .await
        .unwrap()
        .remove(0);
    assert_eq!(now.name, "sw0");
}

#[tokio::test]
async fn a_helper_built_router_port_commits() {
    let server = nb_server();
    let db = db(&server.unix_remote()).await;
    let mut txn = db.transaction();
    let lrp = nb_model::LogicalRouterPort::with_networks(
        "rtos-sw0",
        "0a:58:0a:f4:00:01",
        ["10.244.0.1/24"],
    )
    .unwrap();
    let lrp_ref = txn.insert(&lrp);
    let mut lr = nb_model::LogicalRouter::named("ovn_cluster_router");
    lr.ports = [lrp_ref].into();
    txn.insert(&lr);
    let lsp = txn.insert(&LogicalSwitchPort::to_router("stor-sw0", "rtos-sw0"));
    let mut sw = LogicalSwitch::named("sw0");
    sw.ports = [lsp].into();
    txn.insert(&sw);
    txn.commit().await.unwrap();
    let ports = db
        .select([nb_model::LogicalRouterPort::COLUMNS.name.eq("rtos-sw0")])
        .await
        .unwrap();
    assert_eq!(ports[0].networks, lrp.networks);
    assert_eq!(ports[0].mac, "0a:58:0a:f4:00:01");
}

#[test]
fn struct_literals_take_plain_strings_through_set_and_map() {
    // Issue 21, item 7: `["dynamic".to_string()].into()` at every set column.
    use ovsdb_proto::model::{map, set};
    let port = LogicalSwitchPort {
        name: "p1".into(),
        addresses: set(["dynamic"]),
        external_ids: map([("owner", "me")]),
        ..Default::default()
    };
    assert_eq!(port.addresses, ["dynamic".to_string()].into());
    assert_eq!(port.external_ids["owner"], "me");
}
