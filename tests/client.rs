//! Every client method against a real ovsdb-server (OVN 26.03 / OVS 4.0).

use std::collections::BTreeMap;
use std::time::Duration;

use integration_tests::{client, nb_server, next_notification, NB};
use ovsdb_proto::{
    Atom, Condition, DatabaseSchema, Datum, ErrorKind, Function, MonitorRequest, Mutation, Mutator,
    Notification, Operation, OperationResult, Row, WaitUntil,
};

fn row(pairs: &[(&str, Datum)]) -> Row {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// A `wait` that blocks until a Logical_Switch exists, which none does.
fn wait_forever() -> Operation {
    Operation::Wait {
        table: "Logical_Switch".into(),
        timeout: None,
        conditions: vec![],
        columns: vec!["name".into()],
        until: WaitUntil::NotEqual,
        rows: vec![],
    }
}

fn named_switch(name: &str) -> Row {
    row(&[("name", Datum::scalar(name))])
}

#[tokio::test]
async fn list_dbs_names_the_database_and_server() {
    let server = nb_server();
    let (c, _) = client(&server.unix_remote()).await;
    let mut dbs = c.list_dbs().await.unwrap();
    dbs.sort();
    assert_eq!(
        dbs,
        vec!["OVN_Northbound".to_string(), "_Server".to_string()]
    );
    // The same over TCP.
    let (t, _) = client(&server.tcp_remote()).await;
    assert_eq!(t.list_dbs().await.unwrap().len(), 2);
}

#[tokio::test]
async fn get_schema_equals_the_schema_file_in_the_repository() {
    let server = nb_server();
    let (c, _) = client(&server.unix_remote()).await;
    let live = c.get_schema(NB).await.unwrap();
    let file = DatabaseSchema::from_file(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../schemas/ovn-nb.ovsschema"
    ))
    .unwrap();
    assert_eq!(live.version, "7.18.0");
    assert_eq!(live.tables, file.tables);
    let e = c.get_schema("Nope").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Server);
    assert_eq!(e.as_server_error().unwrap().error, "unknown database");
}

#[tokio::test]
async fn named_uuids_link_new_rows_across_tables_in_one_transaction() {
    let server = nb_server();
    let (c, _) = client(&server.unix_remote()).await;
    let ports = Datum::set([Atom::NamedUuid("p1".into()), Atom::NamedUuid("p2".into())]);
    let r = c
        .transact(
            NB,
            &[
                Operation::insert_named("Logical_Switch_Port", named_switch("p1"), "p1"),
                Operation::insert_named("Logical_Switch_Port", named_switch("p2"), "p2"),
                Operation::insert_named(
                    "Logical_Switch",
                    row(&[("name", "sw0".into()), ("ports", ports)]),
                    "sw",
                ),
                Operation::Select {
                    table: "Logical_Switch".into(),
                    conditions: vec![Condition::eq("name", "sw0")],
                    columns: Some(vec!["ports".into(), "_uuid".into()]),
                },
            ],
        )
        .await
        .unwrap();
    let (p1, p2, sw) = (
        r[0].uuid().unwrap(),
        r[1].uuid().unwrap(),
        r[2].uuid().unwrap(),
    );
    let rows = r[3].rows().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["_uuid"], Datum::uuid(sw));
    assert_eq!(rows[0]["ports"], Datum::set([p1, p2]));
    // The ports survive because the switch refers to them (they are not root rows).
    let r = c
        .transact(NB, &[Operation::select("Logical_Switch_Port", vec![])])
        .await
        .unwrap();
    assert_eq!(r[0].rows().unwrap().len(), 2);
}

#[tokio::test]
async fn a_failing_operation_is_a_typed_error_with_its_index() {
    let server = nb_server();
    let (c, _) = client(&server.unix_remote()).await;
    let e = c
        .transact(
            NB,
            &[
                Operation::insert("Logical_Switch", named_switch("a")),
                Operation::Wait {
                    table: "Logical_Switch".into(),
                    timeout: Some(0),
                    conditions: vec![Condition::eq("name", "a")],
                    columns: vec!["name".into()],
                    until: WaitUntil::Equal,
                    rows: vec![named_switch("not-a")],
                },
                Operation::insert("Logical_Switch", named_switch("b")),
            ],
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transaction);
    let t = e.as_transaction_error().unwrap();
    assert_eq!(t.operation, Some(1));
    assert_eq!(t.operations, 3);
    assert_eq!(t.error.error, "timed out");
    assert_eq!(
        t.results.len(),
        1,
        "the insert before the failure has its result"
    );
    // Nothing was committed.
    let r = c
        .transact(NB, &[Operation::select("Logical_Switch", vec![])])
        .await
        .unwrap();
    assert_eq!(r[0].rows().unwrap().len(), 0);
}

#[tokio::test]
async fn a_commit_time_violation_has_no_operation_index() {
    let server = nb_server();
    let (c, _) = client(&server.unix_remote()).await;
    // Two ports with the same name break Logical_Switch_Port's index at commit.
    let ports = Datum::set([Atom::NamedUuid("a".into()), Atom::NamedUuid("b".into())]);
    let e = c
        .transact(
            NB,
            &[
                Operation::insert_named("Logical_Switch_Port", named_switch("dup"), "a"),
                Operation::insert_named("Logical_Switch_Port", named_switch("dup"), "b"),
                Operation::insert("Logical_Switch", row(&[("ports", ports)])),
            ],
        )
        .await
        .unwrap_err();
    let t = e.as_transaction_error().expect("a transaction error");
    assert_eq!(t.operation, None);
    assert_eq!(t.error.error, "constraint violation");
    assert!(
        t.error.details.as_deref().unwrap_or("").contains("dup"),
        "{t}"
    );
    assert_eq!(t.results.len(), 3);
    // A reference to a row that does not exist: referential integrity.
    let missing = "00000000-0000-0000-0000-000000000001".parse().unwrap();
    let e = c
        .transact(
            NB,
            &[Operation::insert(
                "Logical_Switch",
                row(&[("ports", Datum::uuid(missing))]),
            )],
        )
        .await
        .unwrap_err();
    let t = e.as_transaction_error().unwrap();
    assert_eq!(
        (t.operation, t.error.error.as_str()),
        (None, "referential integrity violation")
    );
}

#[tokio::test]
async fn update_mutate_delete_report_counts_and_change_rows() {
    let server = nb_server();
    let (c, _) = client(&server.unix_remote()).await;
    c.transact(
        NB,
        &[
            Operation::insert("Logical_Switch", named_switch("a")),
            Operation::insert("Logical_Switch", named_switch("b")),
        ],
    )
    .await
    .unwrap();
    let all = vec![Condition::new("name", Function::Ne, "zzz")];
    let r = c
        .transact(
            NB,
            &[
                Operation::Update {
                    table: "Logical_Switch".into(),
                    conditions: vec![Condition::eq("name", "a")],
                    row: row(&[("other_config", Datum::map([("subnet", "10.0.0.0/24")]))]),
                },
                Operation::Mutate {
                    table: "Logical_Switch".into(),
                    conditions: all.clone(),
                    mutations: vec![Mutation::new(
                        "external_ids",
                        Mutator::Insert,
                        Datum::map([("owner", "test")]),
                    )],
                },
                Operation::Select {
                    table: "Logical_Switch".into(),
                    conditions: vec![Condition::new(
                        "external_ids",
                        Function::Includes,
                        Datum::map([("owner", "test")]),
                    )],
                    columns: Some(vec![
                        "name".into(),
                        "other_config".into(),
                        "external_ids".into(),
                    ]),
                },
            ],
        )
        .await
        .unwrap();
    assert_eq!(r[0], OperationResult::Count(1));
    assert_eq!(r[1], OperationResult::Count(2));
    let rows = r[2].rows().unwrap();
    assert_eq!(rows.len(), 2);
    let a = rows
        .iter()
        .find(|r| r["name"] == Datum::scalar("a"))
        .unwrap();
    assert_eq!(
        a["other_config"].get(&"subnet".into()),
        Some(&Atom::from("10.0.0.0/24"))
    );
    assert_eq!(a["external_ids"], Datum::map([("owner", "test")]));
    let r = c
        .transact(
            NB,
            &[
                Operation::Mutate {
                    table: "Logical_Switch".into(),
                    conditions: vec![Condition::eq("name", "b")],
                    mutations: vec![Mutation::new(
                        "external_ids",
                        Mutator::Delete,
                        Datum::set(["owner"]),
                    )],
                },
                Operation::Delete {
                    table: "Logical_Switch".into(),
                    conditions: vec![Condition::eq("name", "a")],
                },
                Operation::select("Logical_Switch", vec![]),
            ],
        )
        .await
        .unwrap();
    assert_eq!((r[0].count(), r[1].count()), (Some(1), Some(1)));
    let rows = r[2].rows().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["external_ids"], Datum::Map(Box::default()));
}

#[tokio::test]
async fn wait_commit_comment_abort_and_assert() {
    let server = nb_server();
    let (c, _) = client(&server.unix_remote()).await;
    let r = c
        .transact(
            NB,
            &[
                Operation::insert("Logical_Switch", named_switch("w")),
                Operation::Wait {
                    table: "Logical_Switch".into(),
                    timeout: Some(0),
                    conditions: vec![],
                    columns: vec!["name".into()],
                    until: WaitUntil::Equal,
                    rows: vec![named_switch("w")],
                },
                Operation::Comment("made by the integration tests".into()),
                Operation::Commit { durable: false },
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        &r[1..],
        &[
            OperationResult::Empty,
            OperationResult::Empty,
            OperationResult::Empty
        ]
    );

    let e = c
        .transact(
            NB,
            &[
                Operation::insert("Logical_Switch", named_switch("x")),
                Operation::Abort,
            ],
        )
        .await
        .unwrap_err();
    let t = e.as_transaction_error().unwrap();
    assert_eq!((t.operation, t.error.error.as_str()), (Some(1), "aborted"));

    let e = c
        .transact(NB, &[Operation::Assert { lock: "l".into() }])
        .await
        .unwrap_err();
    assert_eq!(e.as_transaction_error().unwrap().error.error, "not owner");
    assert!(c.lock("l").await.unwrap());
    c.transact(NB, &[Operation::Assert { lock: "l".into() }])
        .await
        .unwrap();
}

#[tokio::test]
async fn cancel_ends_a_transaction_blocked_in_wait() {
    let server = nb_server();
    let (c, _) = client(&server.unix_remote()).await;
    let (id, pending) = c.transact_cancellable(NB, &[wait_forever()]).unwrap();
    let task = tokio::spawn(pending);
    // The wait blocks: the echo below comes back while the transaction is pending.
    c.echo(&serde_json::json!(["ping"])).await.unwrap();
    assert!(!task.is_finished());
    c.cancel(id).await.unwrap();
    let e = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_eq!(e.as_server_error().unwrap().error, "canceled", "{e}");
}

#[tokio::test]
async fn a_hundred_requests_in_flight_on_one_connection() {
    let server = nb_server();
    let (c, _) = client(&server.unix_remote()).await;
    let futures = (0..100).map(|i| {
        let c = c.clone();
        async move {
            c.transact(
                NB,
                &[Operation::insert(
                    "Logical_Switch",
                    named_switch(&format!("ls{i}")),
                )],
            )
            .await
        }
    });
    let results = futures_util::future::join_all(futures).await;
    let mut uuids: Vec<_> = results
        .into_iter()
        .map(|r| r.unwrap()[0].uuid().unwrap())
        .collect();
    uuids.sort();
    uuids.dedup();
    assert_eq!(uuids.len(), 100);
    let r = c
        .transact(NB, &[Operation::select("Logical_Switch", vec![])])
        .await
        .unwrap();
    assert_eq!(r[0].rows().unwrap().len(), 100);
}

#[tokio::test]
async fn a_lock_contended_by_two_clients_is_locked_and_stolen() {
    let server = nb_server();
    let (a, mut a_notes) = client(&server.unix_remote()).await;
    let (b, mut b_notes) = client(&server.unix_remote()).await;
    assert!(a.lock("leader").await.unwrap());
    assert!(!b.lock("leader").await.unwrap(), "b queues behind a");
    a.unlock("leader").await.unwrap();
    assert_eq!(
        next_notification(&mut b_notes, 10).await,
        Notification::Locked("leader".into())
    );
    assert!(a.steal("leader").await.unwrap());
    assert_eq!(
        next_notification(&mut b_notes, 10).await,
        Notification::Stolen("leader".into())
    );
    // a is the holder now: its assert passes, b's fails.
    a.transact(
        NB,
        &[Operation::Assert {
            lock: "leader".into(),
        }],
    )
    .await
    .unwrap();
    assert!(b
        .transact(
            NB,
            &[Operation::Assert {
                lock: "leader".into()
            }]
        )
        .await
        .is_err());
    assert!(a_notes.try_recv().is_none());
}

#[tokio::test]
async fn monitor_reports_initial_rows_then_updates_until_cancelled() {
    let server = nb_server();
    let (writer, _) = client(&server.unix_remote()).await;
    let (c, mut notes) = client(&server.unix_remote()).await;
    writer
        .transact(
            NB,
            &[Operation::insert("Logical_Switch", named_switch("before"))],
        )
        .await
        .unwrap();
    let mut req = BTreeMap::new();
    req.insert(
        "Logical_Switch".to_string(),
        MonitorRequest::columns(["name", "external_ids"]),
    );
    let initial = c.monitor(NB, serde_json::json!("m1"), &req).await.unwrap();
    let rows: Vec<_> = initial["Logical_Switch"].values().collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].new.as_ref().unwrap()["name"],
        Datum::scalar("before")
    );
    assert!(rows[0].old.is_none());

    let r = writer
        .transact(
            NB,
            &[Operation::insert("Logical_Switch", named_switch("after"))],
        )
        .await
        .unwrap();
    let uuid = r[0].uuid().unwrap();
    match next_notification(&mut notes, 10).await {
        Notification::Update {
            monitor_id,
            updates,
        } => {
            assert_eq!(monitor_id, serde_json::json!("m1"));
            let u = &updates["Logical_Switch"][&uuid];
            assert!(u.old.is_none());
            let new = u.new.as_ref().unwrap();
            assert_eq!(new["name"], Datum::scalar("after"));
            assert_eq!(new.len(), 2, "only the monitored columns: {new:?}");
        }
        other => panic!("expected an update, got {other:?}"),
    }
    c.monitor_cancel(serde_json::json!("m1")).await.unwrap();
    writer
        .transact(
            NB,
            &[Operation::insert("Logical_Switch", named_switch("later"))],
        )
        .await
        .unwrap();
    // Replies and notifications come in order: after this echo, nothing can be pending.
    c.echo(&serde_json::json!([])).await.unwrap();
    assert!(notes.try_recv().is_none(), "no update after monitor_cancel");
    let e = c.monitor_cancel(serde_json::json!("m1")).await.unwrap_err();
    assert_eq!(e.as_server_error().unwrap().error, "unknown monitor");
}

#[tokio::test]
async fn echo_returns_its_params_and_server_echoes_are_answered() {
    let server = nb_server();
    let (c, _) = client(&server.tcp_remote()).await;
    let p = serde_json::json!(["a", 1, {"k": [true]}]);
    assert_eq!(c.echo(&p).await.unwrap(), p);
    // ovsdb-server probes an idle connection after 5 s and drops it 5 s later if the
    // probe goes unanswered; the client answers by itself, so it stays connected.
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert!(!c.is_closed());
    assert_eq!(c.list_dbs().await.unwrap().len(), 2);
}

#[tokio::test]
async fn in_flight_requests_have_unknown_outcome_and_later_ones_are_retryable_when_the_server_dies()
{
    let mut server = nb_server();
    let (c, _) = client(&server.unix_remote()).await;
    let (id, pending) = c.transact_cancellable(NB, &[wait_forever()]).unwrap();
    let _ = id;
    let task = tokio::spawn(pending);
    c.echo(&serde_json::json!([])).await.unwrap();
    server.kill();
    let e = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    // The transaction was in flight: whether it took effect is unknown.
    assert!(e.is_outcome_unknown() && !e.is_retryable(), "{e}");
    let why = tokio::time::timeout(Duration::from_secs(10), c.closed())
        .await
        .unwrap();
    assert!(why.is_closed() || why.kind() == ErrorKind::Io, "{why}");
    // A request made afterwards is never sent: retryable.
    let e = c.list_dbs().await.unwrap_err();
    assert!(e.is_retryable() && !e.is_outcome_unknown(), "{e}");
}

#[tokio::test]
async fn a_reply_over_the_size_limit_is_a_protocol_error() {
    let server = nb_server();
    let remote = ovsdb_proto::Remote::parse(&server.unix_remote()).unwrap();
    let options = ovsdb_proto::ConnectOptions {
        max_message_size: 4096,
        ..Default::default()
    };
    let (c, _) = ovsdb_proto::connect_with(&remote, &options).await.unwrap();
    assert_eq!(c.list_dbs().await.unwrap().len(), 2, "small replies pass");
    let e = c.get_schema(NB).await.unwrap_err();
    assert!(e.is_protocol(), "{e}");
    assert!(
        e.to_string().contains("exceeds the limit of 4096 bytes"),
        "{e}"
    );
}

#[tokio::test]
async fn a_value_that_does_not_fit_the_schema_is_caught_before_sending() {
    let server = nb_server();
    let (c, _) = client(&server.unix_remote()).await;
    let schema = c.get_schema(NB).await.unwrap();
    let acl = schema.table("ACL").unwrap();
    let bad = row(&[
        ("priority", Datum::scalar(70000)),
        ("action", Datum::scalar("allow")),
    ]);
    let e = acl.check_row(&bad).unwrap_err();
    assert_eq!(
        (e.table.as_str(), e.column.as_str(), e.value.as_str()),
        ("ACL", "priority", "70000")
    );
    // The server agrees that it is invalid.
    let e = c
        .transact(NB, &[Operation::insert("ACL", bad)])
        .await
        .unwrap_err();
    assert_eq!(
        e.as_transaction_error().unwrap().error.error,
        "constraint violation"
    );
}

#[tokio::test]
async fn the_lock_api_waits_for_a_lock_and_reports_it_stolen() {
    use ovsdb_proto::lock::{Lock, LockState};
    let server = nb_server();
    let remote = ovsdb_proto::Remote::parse(&server.unix_remote()).unwrap();
    let options = ovsdb_proto::ConnectOptions::default();
    let a = Lock::acquire(&remote, &options, "controller")
        .await
        .unwrap();
    assert_eq!(a.state(), LockState::Held);

    // b queues behind a and gets the lock when a releases it.
    let b = Lock::request(&remote, &options, "controller")
        .await
        .unwrap();
    assert_eq!(b.state(), LockState::Waiting);
    a.release().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), b.wait_held())
        .await
        .unwrap()
        .unwrap();
    b.client()
        .transact(
            NB,
            &[Operation::Assert {
                lock: "controller".into(),
            }],
        )
        .await
        .unwrap();

    // c steals it: b learns it lost the lock, and its asserts fail from then on.
    let c = Lock::steal(&remote, &options, "controller").await.unwrap();
    assert_eq!(c.state(), LockState::Held);
    tokio::time::timeout(Duration::from_secs(10), b.lost())
        .await
        .unwrap();
    assert_eq!(b.state(), LockState::Lost);
    assert!(b
        .client()
        .transact(
            NB,
            &[Operation::Assert {
                lock: "controller".into()
            }]
        )
        .await
        .is_err());

    // A holder whose connection ends loses the lock to the next in line, which is b:
    // the server kept it in line after the theft.
    let d = Lock::request(&remote, &options, "controller")
        .await
        .unwrap();
    drop(c);
    let mut b_state = b.state();
    for _ in 0..200 {
        b_state = b.state();
        if b_state == LockState::Held {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(b_state, LockState::Held, "the stolen lock came back");
    assert_eq!(d.state(), LockState::Waiting);
    b.release().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), d.wait_held())
        .await
        .unwrap()
        .unwrap();
}
