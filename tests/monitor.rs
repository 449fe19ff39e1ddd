//! The OVS monitor extensions against a real ovsdb-server: monitor_cond (update2),
//! monitor_cond_since (update3, history on a clustered database), monitor_cond_change,
//! set_db_change_aware.

use integration_tests::named;
use std::collections::BTreeMap;

use integration_tests::{client, nb_server, next_notification, OvsdbServer, NB};
use ovn_sandbox::{Cluster, Installation};
use ovsdb_proto::{
    Client, Condition, Datum, MonitorRequest, Notification, Notifications, Operation, RowUpdate2,
};

fn switches(req: MonitorRequest) -> BTreeMap<String, MonitorRequest> {
    [("Logical_Switch".to_string(), req)].into()
}

/// A server holding switches "a" and "b", a writer, and a second client to monitor with.
async fn switches_a_and_b() -> (OvsdbServer, Client, Client, Notifications) {
    let server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    let (c, notes) = client(&server.unix_remote()).await;
    w.transact(
        NB,
        &[
            Operation::insert("Logical_Switch", named("a")),
            Operation::insert("Logical_Switch", named("b")),
        ],
    )
    .await
    .unwrap();
    (server, w, c, notes)
}

#[tokio::test]
async fn monitor_cond_reports_only_matching_rows_in_update2_form() {
    let (_server, w, c, mut notes) = switches_a_and_b().await;
    let req = MonitorRequest::columns(["name", "other_config"])
        .matching(vec![Condition::eq("name", "a")]);
    let initial = c
        .monitor_cond(NB, "m".into(), &switches(req))
        .await
        .unwrap();
    let rows: Vec<_> = initial["Logical_Switch"].values().collect();
    assert_eq!(rows.len(), 1);
    let RowUpdate2::Initial(row) = rows[0] else {
        panic!("{rows:?}")
    };
    assert_eq!(row["name"], Datum::scalar("a"));

    // A change to the matching row is a modify carrying only what changed.
    w.transact(
        NB,
        &[Operation::Update {
            table: "Logical_Switch".into(),
            conditions: vec![],
            row: [("other_config".to_string(), Datum::map([("k", "v")]))]
                .into_iter()
                .collect(),
        }],
    )
    .await
    .unwrap();
    match next_notification(&mut notes, 10).await {
        Notification::Update2 {
            monitor_id,
            updates,
        } => {
            assert_eq!(monitor_id, "m");
            let u: Vec<_> = updates["Logical_Switch"].values().collect();
            assert_eq!(u.len(), 1, "only the matching row: {u:?}");
            let RowUpdate2::Modify(diff) = u[0] else {
                panic!("{u:?}")
            };
            assert_eq!(diff.keys().collect::<Vec<_>>(), ["other_config"]);
            assert_eq!(diff["other_config"], Datum::map([("k", "v")]));
        }
        other => panic!("{other:?}"),
    }
    w.transact(
        NB,
        &[Operation::Delete {
            table: "Logical_Switch".into(),
            conditions: vec![Condition::eq("name", "a")],
        }],
    )
    .await
    .unwrap();
    match next_notification(&mut notes, 10).await {
        Notification::Update2 { updates, .. } => {
            assert!(updates["Logical_Switch"]
                .values()
                .all(|u| *u == RowUpdate2::Delete));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn monitor_cond_change_narrows_and_widens_what_is_reported() {
    let (_server, w, c, mut notes) = switches_a_and_b().await;
    let all = MonitorRequest::columns(["name"]);
    let initial = c
        .monitor_cond(NB, "m1".into(), &switches(all))
        .await
        .unwrap();
    assert_eq!(initial["Logical_Switch"].len(), 2);

    // Narrow to "a": "b" goes away as a delete, reported under the new id.
    let only_a = MonitorRequest::default().matching(vec![Condition::eq("name", "a")]);
    c.monitor_cond_change("m1".into(), "m2".into(), &switches(only_a))
        .await
        .unwrap();
    match next_notification(&mut notes, 10).await {
        Notification::Update2 {
            monitor_id,
            updates,
        } => {
            assert_eq!(monitor_id, "m2");
            let u: Vec<_> = updates["Logical_Switch"].values().collect();
            assert_eq!(u, [&RowUpdate2::Delete]);
        }
        other => panic!("{other:?}"),
    }
    w.transact(NB, &[Operation::insert("Logical_Switch", named("c"))])
        .await
        .unwrap();
    c.echo(&serde_json::json!([])).await.unwrap();
    assert!(notes.try_recv().is_none(), "\"c\" does not match");

    // Widen again: "b" and "c" come (back) as inserts.
    let everything = MonitorRequest::default().matching(vec![]);
    c.monitor_cond_change("m2".into(), "m3".into(), &switches(everything))
        .await
        .unwrap();
    match next_notification(&mut notes, 10).await {
        Notification::Update2 {
            monitor_id,
            updates,
        } => {
            assert_eq!(monitor_id, "m3");
            let mut names: Vec<String> = updates["Logical_Switch"]
                .values()
                .map(|u| match u {
                    RowUpdate2::Insert(r) | RowUpdate2::Initial(r) => r["name"].to_string(),
                    other => panic!("{other:?}"),
                })
                .collect();
            names.sort();
            assert_eq!(names, ["\"b\"", "\"c\""]);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn monitor_cond_since_sends_only_what_was_missed_on_a_clustered_database() {
    let install = Installation::recent().unwrap();
    let cluster = Cluster::start(&install, 1, None).unwrap();
    let remote = cluster.members[0].unix_remote();
    let (w, _) = client(&remote).await;
    w.transact(NB, &[Operation::insert("Logical_Switch", named("before"))])
        .await
        .unwrap();

    let req = switches(MonitorRequest::columns(["name"]));
    let (c, _) = client(&remote).await;
    let first = c
        .monitor_cond_since(NB, "m".into(), &req, None)
        .await
        .unwrap();
    assert!(!first.found, "nothing to resume from");
    assert_eq!(first.updates["Logical_Switch"].len(), 1);
    let seen = first.last_txn_id;
    assert!(!seen.is_nil());
    drop(c);

    w.transact(NB, &[Operation::insert("Logical_Switch", named("missed"))])
        .await
        .unwrap();
    let (c, mut notes) = client(&remote).await;
    let again = c
        .monitor_cond_since(NB, "m".into(), &req, Some(seen))
        .await
        .unwrap();
    assert!(again.found, "the server still has {seen}");
    assert_ne!(again.last_txn_id, seen);
    let rows: Vec<_> = again.updates["Logical_Switch"].values().collect();
    assert_eq!(rows.len(), 1, "only the missed insert: {rows:?}");
    match rows[0] {
        RowUpdate2::Insert(r) => assert_eq!(r["name"], Datum::scalar("missed")),
        other => panic!("{other:?}"),
    }

    // Later changes come as update3 with the new transaction id.
    w.transact(NB, &[Operation::insert("Logical_Switch", named("later"))])
        .await
        .unwrap();
    match next_notification(&mut notes, 10).await {
        Notification::Update3 {
            last_txn_id,
            updates,
            ..
        } => {
            assert_ne!(last_txn_id, again.last_txn_id);
            assert_eq!(updates["Logical_Switch"].len(), 1);
        }
        other => panic!("{other:?}"),
    }

    // An id the server never had gives the whole contents, found = false.
    let (c, _) = client(&remote).await;
    let unknown = c
        .monitor_cond_since(NB, "m".into(), &req, Some(ovsdb_proto::Uuid::new_v4()))
        .await
        .unwrap();
    assert!(!unknown.found);
    assert_eq!(unknown.updates["Logical_Switch"].len(), 3);
}

#[tokio::test]
async fn set_db_change_aware_is_accepted() {
    let server = nb_server();
    let (c, _) = client(&server.unix_remote()).await;
    c.set_db_change_aware(true).await.unwrap();
    // Still a working connection afterwards.
    assert_eq!(c.list_dbs().await.unwrap().len(), 2);
}

#[tokio::test]
async fn many_monitors_on_one_connection_each_get_their_own_updates() {
    let server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    let (c, mut notes) = client(&server.unix_remote()).await;
    // Ten monitors, each watching the switches of one name.
    for i in 0..10 {
        let req = MonitorRequest::columns(["name"])
            .matching(vec![Condition::eq("name", format!("sw{i}").as_str())]);
        let initial = c
            .monitor_cond(NB, format!("m{i}").into(), &switches(req))
            .await
            .unwrap();
        assert!(initial.is_empty() || initial["Logical_Switch"].is_empty());
    }
    for i in (0..10).rev() {
        w.transact(
            NB,
            &[Operation::insert(
                "Logical_Switch",
                named(&format!("sw{i}")),
            )],
        )
        .await
        .unwrap();
    }
    let mut got = Vec::new();
    for _ in 0..10 {
        match next_notification(&mut notes, 10).await {
            Notification::Update2 {
                monitor_id,
                updates,
            } => {
                let rows: Vec<_> = updates["Logical_Switch"].values().collect();
                assert_eq!(rows.len(), 1);
                let RowUpdate2::Insert(r) = rows[0] else {
                    panic!("{rows:?}")
                };
                let id = monitor_id.as_str().unwrap().to_owned();
                assert_eq!(
                    r["name"],
                    Datum::scalar(format!("sw{}", &id[1..])),
                    "monitor {id} saw only its switch"
                );
                got.push(id);
            }
            other => panic!("{other:?}"),
        }
    }
    got.sort();
    let mut want: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
    want.sort();
    assert_eq!(got, want);
}
