//! The monitor-driven cache against real ovsdb-servers: following writes, restarts with
//! the database kept and replaced, raft leader loss, read-your-writes. After each, the
//! cache must equal a fresh dump and replaying its events must give the same contents.

use integration_tests::{insert_unless_named, named};
use std::time::Duration;

use integration_tests::cache::{settle, Replay, TABLES};
use integration_tests::{client, nb_server, OvsdbServer, NB};
use ovn_sandbox::{Cluster, Installation};
use ovsdb_proto::cache::{Cache, CacheConfig, CacheEvents, CacheReader, RowChange};
use ovsdb_proto::{Client, Condition, Datum, Operation, Remote, Row};

fn config(remotes: &str) -> CacheConfig {
    let mut c = CacheConfig::new(Remote::parse_list(remotes).unwrap(), NB, TABLES);
    c.min_backoff = Duration::from_millis(20);
    c.max_backoff = Duration::from_millis(500);
    c
}

/// Writes switches named `names` through `w`, starts a cache of `remote`, waits until it
/// matches the server, and replays its initial events.
async fn synced(remote: &str, w: &Client, names: &[String]) -> (Cache, CacheEvents, Replay) {
    for n in names {
        w.transact(NB, &[Operation::insert("Logical_Switch", named(n))])
            .await
            .unwrap();
    }
    let (cache, mut events) = Cache::start(config(remote));
    tokio::time::timeout(Duration::from_secs(10), cache.wait_until_ready())
        .await
        .unwrap();
    let mut replay = Replay::default();
    settle(&cache, w).await;
    replay.drain(&mut events);
    (cache, events, replay)
}

/// Restarts `server` (database kept) and waits until the cache has a new connection.
async fn restart_and_reconnect(server: &mut OvsdbServer, cache: &Cache) {
    let old = cache.client().unwrap();
    server.restart().unwrap();
    tokio::time::timeout(Duration::from_secs(10), old.closed())
        .await
        .unwrap();
    let mut back = false;
    for _ in 0..400 {
        if cache.client().is_some_and(|c| !c.is_closed()) {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(back, "the cache did not reconnect");
}

/// Renames the switch named `from` through `w`.
async fn rename(w: &Client, from: &str, to: &str) {
    w.transact(
        NB,
        &[Operation::Update {
            table: "Logical_Switch".into(),
            conditions: vec![Condition::eq("name", from)],
            row: named(to),
        }],
    )
    .await
    .unwrap();
}

/// True once `cache` shows `n` switches (within 10 s).
async fn shows_switches(cache: &CacheReader, n: usize) -> bool {
    cache
        .wait_for(Duration::from_secs(10), |s| {
            s.table("Logical_Switch").len() == n
        })
        .await
}

fn switches(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

#[tokio::test]
async fn the_cache_follows_every_kind_of_change_and_its_events_replay_to_it() {
    let server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    let (cache, mut events, mut replay) =
        synced(&server.unix_remote(), &w, &["before".into()]).await;

    let r = w
        .transact(NB, &[Operation::insert("Logical_Switch", named("new"))])
        .await
        .unwrap();
    let new = r[0].uuid().unwrap();
    w.transact(
        NB,
        &[Operation::Mutate {
            table: "Logical_Switch".into(),
            conditions: vec![Condition::eq("name", "before")],
            mutations: vec![ovsdb_proto::Mutation::new(
                "external_ids",
                ovsdb_proto::Mutator::Insert,
                Datum::map([("k", "v")]),
            )],
        }],
    )
    .await
    .unwrap();
    w.transact(
        NB,
        &[Operation::Delete {
            table: "Logical_Switch".into(),
            conditions: vec![Condition::uuid(new)],
        }],
    )
    .await
    .unwrap();
    let want = settle(&cache, &w).await;
    replay.drain(&mut events);
    assert!(replay.ready);
    assert_eq!(replay.contents(), want);
    let snap = cache.snapshot();
    let before: Vec<_> = snap.table("Logical_Switch").values().cloned().collect();
    assert_eq!(
        before[0]["external_ids"],
        Datum::map([("k", "v")]),
        "the map diff was applied"
    );
}

#[tokio::test]
async fn a_restart_with_the_database_kept_brings_no_spurious_events() {
    let mut server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    let (cache, mut events, mut replay) =
        synced(&server.tcp_remote(), &w, &switches("ls", 20)).await;

    restart_and_reconnect(&mut server, &cache).await;
    let (w, _) = client(&server.unix_remote()).await;
    assert!(
        replay.drain(&mut events) == 0,
        "the resync after the restart changed nothing"
    );
    assert!(
        !replay.unusable.is_empty(),
        "the lost connection was reported"
    );
    w.transact(NB, &[Operation::insert("Logical_Switch", named("after"))])
        .await
        .unwrap();
    let want = settle(&cache, &w).await;
    assert_eq!(replay.drain(&mut events), 1, "exactly the one insert");
    assert_eq!(replay.contents(), want);
}

#[tokio::test]
async fn tables_and_columns_the_server_lacks_are_reported_once_and_the_rest_is_cached() {
    let mut server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    w.transact(NB, &[Operation::insert("Logical_Switch", named("ls0"))])
        .await
        .unwrap();
    let mut config = config(&server.tcp_remote());
    config.tables.insert(
        "Logical_Switch".into(),
        ovsdb_proto::MonitorRequest::columns(["name", "no_such_column"]),
    );
    config
        .tables
        .insert("No_Such_Table".into(), ovsdb_proto::MonitorRequest::all());
    let (cache, mut events) = Cache::start(config);
    tokio::time::timeout(Duration::from_secs(10), cache.wait_until_ready())
        .await
        .expect("the cache became ready although the server lacks a table");
    let mut replay = Replay::default();
    replay.drain(&mut events);
    assert!(replay.ready);
    assert_eq!(replay.skews.len(), 1, "{:?}", replay.skews);
    let skew = &replay.skews[0];
    assert_eq!(skew.missing_tables, ["No_Such_Table"]);
    assert_eq!(
        skew.missing_columns
            .get("Logical_Switch")
            .map(Vec::as_slice),
        Some(&["no_such_column".to_string()][..])
    );
    assert_eq!(cache.skew().as_deref(), Some(skew));
    let snap = cache.snapshot();
    let rows: Vec<_> = snap.table("Logical_Switch").values().cloned().collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["name"], Datum::scalar("ls0"));
    assert!(snap.table("No_Such_Table").is_empty());
    // Conditions on the missing table are kept for a server that has it.
    cache
        .set_conditions("No_Such_Table", vec![Condition::eq("name", "x")])
        .await
        .unwrap();

    // A reconnect to the same schema says nothing again, and the cache follows writes.
    restart_and_reconnect(&mut server, &cache).await;
    let (w, _) = client(&server.unix_remote()).await;
    w.transact(NB, &[Operation::insert("Logical_Switch", named("ls1"))])
        .await
        .unwrap();
    assert!(shows_switches(&cache.reader(), 2).await);
    replay.drain(&mut events);
    assert_eq!(replay.skews.len(), 1, "reported again: {:?}", replay.skews);
    assert!(!replay.unusable.is_empty(), "the restart was reported");
}

#[tokio::test]
async fn a_reader_follows_the_cache_and_keeps_its_last_contents_after_it() {
    let server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    let (cache, _) = Cache::start(config(&server.unix_remote()));
    let reader = cache.reader();
    let other = reader.clone();
    reader.wait_until_ready().await;
    assert!(other.is_ready());
    w.transact(NB, &[Operation::insert("Logical_Switch", named("r0"))])
        .await
        .unwrap();
    assert!(shows_switches(&other, 1).await);
    drop(cache);
    assert_eq!(reader.snapshot().table("Logical_Switch").len(), 1);
}

#[tokio::test]
async fn a_typed_table_that_is_also_subscribed_decodes_each_row_once() {
    use nb_model::LogicalSwitch;
    use ovsdb_proto::cache::{Change, TypedEvent, TypedTable};
    use std::sync::Arc;

    let server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    let mut cfg = config(&server.unix_remote());
    cfg.typed(TypedTable::<LogicalSwitch>::new());
    let mut switches = cfg.subscribe::<LogicalSwitch>();
    let (cache, _) = Cache::start(cfg);
    cache.wait_until_ready().await;
    async fn next(
        s: &mut ovsdb_proto::cache::TypedEvents<LogicalSwitch>,
    ) -> (ovsdb_proto::Uuid, Change<Arc<LogicalSwitch>>) {
        loop {
            let e = tokio::time::timeout(Duration::from_secs(10), s.recv())
                .await
                .unwrap()
                .unwrap();
            if let TypedEvent::Change { uuid, change } = e {
                return (uuid, change);
            }
        }
    }
    w.transact(NB, &[Operation::insert("Logical_Switch", named("once"))])
        .await
        .unwrap();
    let (uuid, Change::Insert { new: inserted }) = next(&mut switches).await else {
        panic!("not an insert")
    };
    let kept = cache.snapshot().get_typed::<LogicalSwitch>(&uuid).unwrap();
    assert!(
        Arc::ptr_eq(&inserted, &kept),
        "the event's row is the snapshot's"
    );
    rename(&w, "once", "twice").await;
    let (_, Change::Modify { old, new }) = next(&mut switches).await else {
        panic!("not an update")
    };
    assert!(
        Arc::ptr_eq(&old, &inserted),
        "the old row was not decoded again"
    );
    assert_eq!(new.name, "twice");
    let kept = cache.snapshot().get_typed::<LogicalSwitch>(&uuid).unwrap();
    assert!(Arc::ptr_eq(&new, &kept));
}

#[tokio::test]
async fn a_database_replaced_by_an_empty_one_is_resynced_with_deletes() {
    let mut server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    let (cache, mut events, mut replay) =
        synced(&server.unix_remote(), &w, &switches("ls", 5)).await;

    server.replace_database().unwrap();
    let (w, _) = client(&server.unix_remote()).await;
    w.transact(NB, &[Operation::insert("Logical_Switch", named("fresh"))])
        .await
        .unwrap();
    let want = settle(&cache, &w).await;
    let n = replay.drain(&mut events);
    assert_eq!(n, 6, "five deletes and one insert");
    assert_eq!(replay.contents(), want);
    assert_eq!(cache.snapshot().len(), 1);
}

#[tokio::test]
async fn read_your_writes_and_retryable_errors_while_disconnected() {
    let mut server = nb_server();
    let (cache, _) = Cache::start(config(&server.unix_remote()));
    cache.wait_until_ready().await;
    let r = cache
        .transact(&[Operation::insert("Logical_Switch", named("mine"))])
        .await
        .unwrap();
    let uuid = r[0].uuid().unwrap();
    assert!(
        cache
            .wait_for(Duration::from_secs(10), |s| s
                .get("Logical_Switch", &uuid)
                .is_some())
            .await
    );
    // Serialized ahead and sent later, as many times as asked: each time committed
    // alike, its results checked alike.
    let prepared = cache
        .prepare(&[
            Operation::insert("Logical_Switch", named("prepared")),
            Operation::Comment("prepared".into()),
        ])
        .unwrap();
    let mut uuids = Vec::new();
    for _ in 0..2 {
        let r = cache.transact_prepared(&prepared).await.unwrap();
        assert_eq!(r.len(), 2, "{r:?}");
        uuids.push(r[0].uuid().unwrap());
    }
    assert_ne!(uuids[0], uuids[1]);
    assert!(
        cache
            .wait_for(Duration::from_secs(10), |s| uuids
                .iter()
                .all(|u| s.get("Logical_Switch", u).is_some()))
            .await
    );

    server.kill();
    let mut saw_retryable = false;
    for _ in 0..100 {
        match cache
            .transact(&[Operation::insert("Logical_Switch", named("x"))])
            .await
        {
            Err(e) if e.is_retryable() => {
                saw_retryable = true;
                break;
            }
            Err(e) => assert!(e.is_outcome_unknown() || e.is_retryable(), "{e}"),
            Ok(_) => panic!("a transaction succeeded with the server dead"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(saw_retryable);
}

#[tokio::test]
async fn a_leader_only_cache_follows_writes_while_the_leader_is_killed() {
    let install = Installation::recent().unwrap();
    let mut cluster = Cluster::start(&install, 3, None).unwrap();
    let mut cfg = config(&cluster.remotes());
    cfg.leader_only = true;
    let (cache, mut events) = Cache::start(cfg);
    tokio::time::timeout(Duration::from_secs(20), cache.wait_until_ready())
        .await
        .unwrap();
    let mut replay = Replay::default();

    let leader = cluster.leader().expect("a leader");
    // Writes through a follower (forwarded to the leader) before and after the kill.
    let survivor = (leader + 1) % 3;
    let (w, _) = client(&cluster.members[survivor].unix_remote()).await;
    for i in 0..10 {
        w.transact(
            NB,
            &[Operation::insert("Logical_Switch", named(&format!("a{i}")))],
        )
        .await
        .unwrap();
    }
    cluster.members[leader].kill();
    let mut written = 0;
    for i in 0..10 {
        // Inserts only if absent, so a retry after an unclear failure cannot duplicate.
        let name = format!("b{i}");
        let guarded = insert_unless_named(&name);
        for _ in 0..100 {
            match w.transact(NB, &guarded).await {
                Ok(_) => {
                    written += 1;
                    break;
                }
                Err(e) if e.is_retryable() || e.is_outcome_unknown() => {
                    panic!("the survivor's connection died: {e}")
                }
                Err(e)
                    if e.as_transaction_error()
                        .is_some_and(|t| t.error.error == "timed out") =>
                {
                    written += 1; // an earlier attempt committed
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
    assert_eq!(written, 10, "writes went on after the leader died");
    let want = settle(&cache, &w).await;
    assert_eq!(want["Logical_Switch"].len(), 20);
    replay.drain(&mut events);
    assert_eq!(replay.contents(), want);
    let new_leader = cluster.leader().expect("a new leader");
    assert_ne!(new_leader, leader);
    // Why each server was left, typed: the dead leader's connection; followers the
    // leader-only cache skipped on purpose are no fault; nothing else.
    use ovsdb_proto::cache::UnusableReason::{Connection, NotConnectedToCluster, NotLeader};
    assert!(
        replay.reasons.contains(&Connection),
        "{:?}",
        replay.unusable
    );
    for (r, why) in replay.reasons.iter().zip(&replay.unusable) {
        assert!(
            matches!(r, Connection | NotConnectedToCluster | NotLeader),
            "{r:?}: {why:?}"
        );
        assert_eq!(r.is_fault(), *r != NotLeader);
    }
}

#[tokio::test]
async fn a_schema_conversion_cancels_the_monitor_and_the_cache_reestablishes_it() {
    let server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    let (cache, mut events, mut replay) =
        synced(&server.unix_remote(), &w, &["before".into()]).await;
    let first = cache.client().unwrap();

    // An upgrade: the same schema with one more Logical_Switch column.
    let (_dir, file) = integration_tests::newer_nb_schema(|json| {
        json["tables"]["Logical_Switch"]["columns"]["added_by_upgrade"] =
            serde_json::json!({"type": {"key": "string", "min": 0, "max": 1}});
    });
    server.convert(&file).unwrap();

    // The monitor is re-established on the same connection's server with the new schema.
    let mut renewed = false;
    for _ in 0..200 {
        let snap = cache.snapshot();
        if snap
            .table("Logical_Switch")
            .values()
            .any(|r| r.get("added_by_upgrade").is_some())
        {
            renewed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(renewed, "the cache never saw the converted schema");
    // The cache's connection asked to be told (set_db_change_aware) and survived, its
    // monitor canceled and re-established; the plain client was disconnected.
    assert!(
        first.list_dbs().await.is_ok(),
        "the server dropped the cache's connection"
    );
    assert!(
        cache.client().unwrap().same_connection(&first),
        "the monitor was re-established on the same connection"
    );
    assert!(
        w.list_dbs().await.is_err(),
        "the plain client was not disconnected"
    );
    let (w, _) = client(&server.unix_remote()).await;
    w.transact(NB, &[Operation::insert("Logical_Switch", named("after"))])
        .await
        .unwrap();
    let want = settle(&cache, &w).await;
    replay.drain(&mut events);
    assert_eq!(replay.contents(), want);
}

#[tokio::test]
async fn optional_columns_take_the_new_value_a_modify_sends() {
    use nb_model::LogicalSwitchPort;
    use ovsdb_proto::cache::TypedTable;

    let server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    let mut sw = named("sw0");
    let mut port = named("p0");
    port.insert("tag_request".into(), Datum::scalar(5));
    sw.insert(
        "ports".into(),
        Datum::set([ovsdb_proto::Atom::NamedUuid("p".into())]),
    );
    w.transact(
        NB,
        &[
            Operation::insert_named("Logical_Switch_Port", port, "p"),
            Operation::insert("Logical_Switch", sw),
        ],
    )
    .await
    .unwrap();
    let mut cfg = config(&server.unix_remote());
    cfg.typed(TypedTable::<LogicalSwitchPort>::new());
    let (cache, mut events) = Cache::start(cfg);
    cache.wait_until_ready().await;
    let mut replay = Replay::default();
    // 5 -> 6 (the server sends 6, not the pair to toggle), then removed (it sends the
    // empty set), then set again.
    for value in [Datum::scalar(6), Datum::empty(), Datum::scalar(7)] {
        let row: Row = [("tag_request".to_string(), value.clone())].into();
        w.transact(
            NB,
            &[Operation::Update {
                table: "Logical_Switch_Port".into(),
                conditions: vec![Condition::eq("name", "p0")],
                row,
            }],
        )
        .await
        .unwrap();
        let want = settle(&cache, &w).await;
        replay.drain(&mut events);
        assert_eq!(replay.contents(), want);
        let typed: Vec<Option<i64>> = cache
            .snapshot()
            .rows::<LogicalSwitchPort>()
            .unwrap()
            .values()
            .map(|p| p.tag_request)
            .collect();
        assert_eq!(typed, [value.as_scalar().and_then(|a| a.as_integer())]);
    }
}

#[allow(clippy::too_many_lines)] // a test: one story, start to end
#[tokio::test]
async fn typed_rows_and_indexes_follow_changes_and_resyncs() {
    use nb_model::{LogicalSwitchPort, LogicalSwitchPortByName};
    use ovsdb_proto::cache::TypedTable;

    let mut server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    let port = |name: &str, ns: &str| -> Row {
        [
            ("name".to_string(), Datum::scalar(name)),
            ("external_ids".to_string(), Datum::map([("namespace", ns)])),
        ]
        .into_iter()
        .collect()
    };
    // Ports survive only when a switch refers to them.
    let mut ops = Vec::new();
    let mut refs = Vec::new();
    for (i, (name, ns)) in [("p1", "blue"), ("p2", "blue"), ("p3", "green")]
        .iter()
        .enumerate()
    {
        ops.push(Operation::insert_named(
            "Logical_Switch_Port",
            port(name, ns),
            format!("p{i}"),
        ));
        refs.push(ovsdb_proto::Atom::NamedUuid(format!("p{i}").into()));
    }
    let mut sw = named("sw0");
    sw.insert("ports".into(), Datum::set(refs));
    ops.push(Operation::insert("Logical_Switch", sw));
    w.transact(NB, &ops).await.unwrap();

    let mut cfg = config(&server.unix_remote());
    let mut ports = TypedTable::<LogicalSwitchPort>::new();
    let by_namespace = ports.index("namespace", |p| p.external_ids.get("namespace").cloned());
    let by_name = ports.index("name", |p| Some(LogicalSwitchPortByName::of(p)));
    cfg.typed(ports);
    let (cache, mut events_typed) = Cache::start(cfg);
    cache.wait_until_ready().await;
    // The events of a modelled table decode into the model.
    let mut decoded = Vec::new();
    while let Some(e) = events_typed.try_recv() {
        if let ovsdb_proto::cache::CacheEvent::Change(e) = e {
            if let Some(change) = e.decode::<LogicalSwitchPort>() {
                match change.unwrap() {
                    ovsdb_proto::cache::Change::Insert { new } => decoded.push(new.name),
                    other => panic!("{other:?}"),
                }
            }
        }
    }
    decoded.sort();
    assert_eq!(decoded, ["p1", "p2", "p3"]);
    let snap = cache.snapshot();
    assert_eq!(snap.rows::<LogicalSwitchPort>().unwrap().len(), 3);
    let blue = snap.lookup(&by_namespace, "blue").unwrap();
    let mut names: Vec<&str> = blue.iter().map(|p| p.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["p1", "p2"]);
    let p3 = snap
        .lookup(&by_name, &LogicalSwitchPortByName { name: "p3".into() })
        .unwrap();
    assert_eq!(p3.len(), 1);
    assert_eq!(
        snap.get_typed::<LogicalSwitchPort>(&p3[0].uuid)
            .unwrap()
            .name,
        "p3"
    );
    // The schema's unique index, typed: the key type names the table.
    let p3 = snap
        .get_by(&LogicalSwitchPortByName { name: "p3".into() })
        .unwrap();
    assert_eq!(p3.external_ids["namespace"], "green");
    assert!(snap
        .get_by(&LogicalSwitchPortByName { name: "p9".into() })
        .is_none());
    // A handle of another table configuration is an error, not an empty answer.
    let mut elsewhere = TypedTable::<LogicalSwitchPort>::new();
    let foreign = elsewhere.index("namespace", |p| p.external_ids.get("namespace").cloned());
    assert!(snap.lookup(&foreign, "blue").is_err());
    // The schema's own index on name works on the untyped rows too.
    let found = snap
        .find("Logical_Switch_Port", &[("name", Datum::scalar("p3"))])
        .unwrap();
    assert_eq!(found["external_ids"], Datum::map([("namespace", "green")]));
    assert!(snap
        .find("Logical_Switch_Port", &[("name", Datum::scalar("p9"))])
        .is_none());
    assert!(
        snap.find("Logical_Switch_Port", &[("type", Datum::scalar(""))])
            .is_none(),
        "no index on type"
    );

    // p2 moves to green: both index entries follow.
    w.transact(
        NB,
        &[Operation::Update {
            table: "Logical_Switch_Port".into(),
            conditions: vec![Condition::eq("name", "p2")],
            row: [(
                "external_ids".to_string(),
                Datum::map([("namespace", "green")]),
            )]
            .into_iter()
            .collect(),
        }],
    )
    .await
    .unwrap();
    let green = |s: &ovsdb_proto::cache::Snapshot| s.lookup(&by_namespace, "green").unwrap().len();
    assert!(
        cache
            .wait_for(Duration::from_secs(10), |s| green(s) == 2)
            .await
    );
    // Renaming moves the schema index entry.
    w.transact(
        NB,
        &[Operation::Update {
            table: "Logical_Switch_Port".into(),
            conditions: vec![Condition::eq("name", "p3")],
            row: [("name".to_string(), Datum::scalar("p3-renamed"))]
                .into_iter()
                .collect(),
        }],
    )
    .await
    .unwrap();
    let renamed = |s: &ovsdb_proto::cache::Snapshot| {
        s.find(
            "Logical_Switch_Port",
            &[("name", Datum::scalar("p3-renamed"))],
        )
        .is_some()
    };
    assert!(cache.wait_for(Duration::from_secs(10), renamed).await);
    assert!(cache
        .snapshot()
        .find("Logical_Switch_Port", &[("name", Datum::scalar("p3"))])
        .is_none());
    assert_eq!(
        cache
            .snapshot()
            .lookup(&by_namespace, "blue")
            .unwrap()
            .len(),
        1
    );

    // After a full resync the typed rows and indexes are rebuilt from the new contents.
    server.replace_database().unwrap();
    assert!(
        cache
            .wait_for(Duration::from_secs(20), |s| s
                .rows::<LogicalSwitchPort>()
                .is_some_and(|r| r.is_empty()))
            .await
    );
    assert!(cache
        .snapshot()
        .lookup(&by_namespace, "green")
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn changing_conditions_narrows_and_widens_the_cache_and_survives_a_reconnect() {
    let mut server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    let abc: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
    let (cache, mut events, mut replay) = synced(&server.unix_remote(), &w, &abc).await;
    let names = |cache: &Cache| {
        let mut v: Vec<String> = cache
            .snapshot()
            .table("Logical_Switch")
            .values()
            .map(|r| r["name"].to_string())
            .collect();
        v.sort();
        v
    };

    // Narrow to "a": b and c leave as deletes.
    cache
        .set_conditions("Logical_Switch", vec![Condition::eq("name", "a")])
        .await
        .unwrap();
    assert!(shows_switches(&cache.reader(), 1).await);
    assert_eq!(names(&cache), ["\"a\""]);
    w.transact(NB, &[Operation::insert("Logical_Switch", named("d"))])
        .await
        .unwrap();
    w.transact(NB, &[Operation::insert("Logical_Switch", named("a"))])
        .await
        .unwrap();
    assert!(shows_switches(&cache.reader(), 2).await);
    assert_eq!(names(&cache), ["\"a\"", "\"a\""], "only rows named a");

    // The narrower condition holds across a reconnect.
    restart_and_reconnect(&mut server, &cache).await;
    assert_eq!(names(&cache), ["\"a\"", "\"a\""]);

    // Widen again: every switch comes back as an insert.
    cache
        .set_conditions("Logical_Switch", vec![])
        .await
        .unwrap();
    let (w, _) = client(&server.unix_remote()).await;
    let want = settle(&cache, &w).await;
    assert_eq!(want["Logical_Switch"].len(), 5);
    replay.drain(&mut events);
    assert_eq!(replay.contents(), want, "the events tell the same story");
    assert!(cache.set_conditions("Nope", vec![]).await.is_err());
}

#[allow(clippy::too_many_lines)] // a test: one story, start to end
#[tokio::test]
async fn each_table_has_its_own_typed_event_stream() {
    use nb_model::{LogicalSwitch, LogicalSwitchPort};
    use ovsdb_proto::cache::{Change, TypedEvent};

    let mut server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    w.transact(NB, &[Operation::insert("Logical_Switch", named("before"))])
        .await
        .unwrap();
    let mut cfg = config(&server.unix_remote());
    let mut switches = cfg.subscribe::<LogicalSwitch>();
    let mut ports = cfg.subscribe::<LogicalSwitchPort>();
    // Only the typed streams are read: the stream of every table is dropped.
    let (cache, _) = Cache::start(cfg);
    cache.wait_until_ready().await;

    async fn next<T>(s: &mut ovsdb_proto::cache::TypedEvents<T>) -> TypedEvent<T> {
        tokio::time::timeout(Duration::from_secs(10), s.recv())
            .await
            .expect("no typed event")
            .expect("the stream ended")
    }
    // The initial row, then ready.
    match next(&mut switches).await {
        TypedEvent::Change {
            change: Change::Insert { new },
            ..
        } => assert_eq!(new.name, "before"),
        other => panic!("{other:?}"),
    }
    assert_eq!(next(&mut switches).await, TypedEvent::Ready);
    assert_eq!(next(&mut ports).await, TypedEvent::Ready);

    // Insert, update, delete of a switch with a port.
    let mut sw = named("sw");
    sw.insert("ports".into(), Datum::named_uuid("p"));
    w.transact(
        NB,
        &[
            Operation::insert_named("Logical_Switch_Port", named("p1"), "p"),
            Operation::insert("Logical_Switch", sw),
        ],
    )
    .await
    .unwrap();
    let TypedEvent::Change {
        uuid,
        change: Change::Insert { new },
    } = next(&mut switches).await
    else {
        panic!("not an insert")
    };
    assert_eq!((new.name.as_str(), new.ports.len()), ("sw", 1));
    match next(&mut ports).await {
        TypedEvent::Change {
            change: Change::Insert { new },
            ..
        } => assert_eq!(new.name, "p1"),
        other => panic!("{other:?}"),
    }
    rename(&w, "sw", "sw2").await;
    match next(&mut switches).await {
        TypedEvent::Change {
            uuid: u,
            change: Change::Modify { old, new },
        } => {
            assert_eq!(u, uuid);
            assert_eq!((old.name.as_str(), new.name.as_str()), ("sw", "sw2"));
            assert_eq!(old.ports, new.ports);
        }
        other => panic!("{other:?}"),
    }
    w.transact(
        NB,
        &[Operation::Delete {
            table: "Logical_Switch".into(),
            conditions: vec![Condition::eq("name", "sw2")],
        }],
    )
    .await
    .unwrap();
    match next(&mut switches).await {
        TypedEvent::Change {
            uuid: u,
            change: Change::Delete { old },
        } => assert_eq!((u, old.name.as_str()), (uuid, "sw2")),
        other => panic!("{other:?}"),
    }
    // The port went with its switch (it is not a root); the switch stream saw none of
    // the port's events.
    match next(&mut ports).await {
        TypedEvent::Change {
            change: Change::Delete { old },
            ..
        } => assert_eq!(old.name, "p1"),
        other => panic!("{other:?}"),
    }
    assert_eq!(switches.try_recv(), None);
    assert_eq!(ports.try_recv(), None);

    // The cache carries on across a restart without the dropped stream, and the
    // resync brings no event for the unchanged row.
    restart_and_reconnect(&mut server, &cache).await;
    let (w, _) = client(&server.unix_remote()).await;
    w.transact(NB, &[Operation::insert("Logical_Switch", named("after"))])
        .await
        .unwrap();
    match next(&mut switches).await {
        TypedEvent::Change {
            change: Change::Insert { new },
            ..
        } => assert_eq!(new.name, "after"),
        other => panic!("{other:?}"),
    }
    assert_eq!(ports.try_recv(), None);
}

#[allow(clippy::too_many_lines)] // a test: one story, start to end
#[tokio::test]
async fn row_indexes_find_rows_under_every_key_and_follow_changes() {
    let server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    let mut cfg = config(&server.unix_remote());
    // A switch is found under each of its `other_config` keys.
    let by_key = cfg.index("Logical_Switch", "other_config keys", |row| {
        row.get("other_config")
            .and_then(|d| d.as_map())
            .map(|m| {
                m.iter()
                    .filter_map(|(k, _)| k.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    });
    let mut row = named("a");
    row.insert("other_config".into(), Datum::map([("x", "1"), ("y", "2")]));
    w.transact(NB, &[Operation::insert("Logical_Switch", row)])
        .await
        .unwrap();
    let (cache, _) = Cache::start(cfg);
    tokio::time::timeout(Duration::from_secs(10), cache.wait_until_ready())
        .await
        .unwrap();
    let names = |key: &str| -> Vec<String> {
        cache
            .snapshot()
            .lookup_rows(&by_key, key)
            .unwrap()
            .into_iter()
            .map(|(_, r)| r["name"].as_scalar().unwrap().as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names("x"), ["a"]);
    assert_eq!(names("y"), ["a"]);
    assert!(names("z").is_empty());
    // The keys the index holds, with their row counts, without reading the table.
    let keys = || -> Vec<(String, usize)> {
        let snap = cache.snapshot();
        let mut k: Vec<(String, usize)> = snap
            .index_keys(&by_key)
            .unwrap()
            .map(|(k, n)| (k.clone(), n))
            .collect();
        k.sort();
        k
    };
    assert_eq!(keys(), [("x".to_owned(), 1), ("y".to_owned(), 1)]);
    let mut row = named("b");
    row.insert("other_config".into(), Datum::map([("y", "3"), ("z", "4")]));
    // The insert is waited for; the delete by name is not, so it is waited for too.
    async fn leaving_one_switch(cache: &Cache, ops: &[Operation]) {
        cache
            .transact_and_wait(ops, Duration::from_secs(10))
            .await
            .unwrap();
        assert!(shows_switches(&cache.reader(), 1).await);
    }
    leaving_one_switch(
        &cache,
        &[
            Operation::insert("Logical_Switch", row),
            Operation::Delete {
                table: "Logical_Switch".into(),
                conditions: vec![Condition::eq("name", "a")],
            },
        ],
    )
    .await;
    assert!(names("x").is_empty());
    assert_eq!(names("y"), ["b"]);
    assert_eq!(names("z"), ["b"]);
    assert_eq!(
        keys(),
        [("y".to_owned(), 1), ("z".to_owned(), 1)],
        "a key no row has any more is gone"
    );
    // A key's rows shared with the snapshot: a change leaves the keys it does not
    // touch the same, and the others not.
    let before = cache.snapshot();
    let (y, z) = (
        before.indexed_rows(&by_key, "y").unwrap(),
        before.indexed_rows(&by_key, "z").unwrap(),
    );
    assert_eq!((y.len(), z.len()), (1, 1));
    assert!(y.same(&cache.snapshot().indexed_rows(&by_key, "y").unwrap()));
    let mut row = named("c");
    row.insert("other_config".into(), Datum::map([("w", "1"), ("z", "5")]));
    cache
        .transact_and_wait(
            &[Operation::insert("Logical_Switch", row)],
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    let after = cache.snapshot();
    assert!(y.same(&after.indexed_rows(&by_key, "y").unwrap()));
    let z_now = after.indexed_rows(&by_key, "z").unwrap();
    assert!(!z.same(&z_now));
    let mut z_names: Vec<&str> = z_now
        .iter()
        .map(|(_, r)| r["name"].as_scalar().unwrap().as_str().unwrap())
        .collect();
    z_names.sort();
    assert_eq!(z_names, ["b", "c"]);
    // What changed under a key: nothing under an untouched one; the row added; then
    // a row changed and one removed.
    let name_of = |r: &std::sync::Arc<ovsdb_proto::cache::CachedRow>| {
        r["name"].as_scalar().unwrap().as_str().unwrap().to_owned()
    };
    let changes = |a: &ovsdb_proto::cache::IndexedRows, b: &ovsdb_proto::cache::IndexedRows| {
        a.diff(b)
            .map(|c| match c {
                RowChange::Added(_, r) => format!("+{}", name_of(r)),
                RowChange::Changed { old, new, .. } => {
                    assert_eq!(name_of(old), name_of(new));
                    format!("~{}", name_of(new))
                }
                RowChange::Removed(_, r) => format!("-{}", name_of(r)),
            })
            .collect::<Vec<_>>()
    };
    assert!(changes(&y, &after.indexed_rows(&by_key, "y").unwrap()).is_empty());
    assert_eq!(changes(&z, &z_now), ["+c"]);
    leaving_one_switch(
        &cache,
        &[
            Operation::Update {
                table: "Logical_Switch".into(),
                conditions: vec![Condition::eq("name", "b")],
                row: [(
                    "other_config".to_owned(),
                    Datum::map([("y", "3"), ("z", "6")]),
                )]
                .into_iter()
                .collect(),
            },
            Operation::Delete {
                table: "Logical_Switch".into(),
                conditions: vec![Condition::eq("name", "c")],
            },
        ],
    )
    .await;
    let last = cache.snapshot().indexed_rows(&by_key, "z").unwrap();
    let mut seen = changes(&z_now, &last);
    seen.sort();
    assert_eq!(seen, ["-c", "~b"]);
    assert!(after.indexed_rows(&by_key, "none").unwrap().is_empty());
    // A handle of another cache is an error, not an empty answer.
    let mut other = config(&server.unix_remote());
    other.index("Logical_Switch", "a", |_| vec![0u8]);
    let foreign = other.index("Logical_Switch", "b", |_| vec![1u8]);
    assert!(cache.snapshot().lookup_rows(&foreign, &1u8).is_err());
    assert!(cache.snapshot().index_keys(&foreign).is_err());
    assert!(cache.snapshot().indexed_rows(&foreign, &1u8).is_err());
}

/// On a multi-threaded runtime the reply can wake the caller before the cache task has
/// applied the update that came ahead of it (seen: 26 to 46 of 50 plain transactions
/// not yet in the snapshot when they returned); waiting closes that gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_and_wait_returns_only_once_the_cache_shows_it() {
    let server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    let (cache, _, _) = synced(&server.unix_remote(), &w, &switches("s", 3)).await;
    for i in 0..50 {
        let name = format!("new{i}");
        let r = cache
            .transact_and_wait(
                &[Operation::insert("Logical_Switch", named(&name))],
                Duration::from_secs(10),
            )
            .await
            .unwrap();
        let uuid = r[0].uuid().unwrap();
        // No waiting here: the cache must already hold the row.
        let row = cache.snapshot().get("Logical_Switch", &uuid).unwrap();
        assert_eq!(row["name"], Datum::scalar(name.as_str()));
        let mut update = Row::new();
        update.insert("other_config".into(), Datum::map([("n", i.to_string())]));
        cache
            .transact_and_wait(
                &[Operation::Update {
                    table: "Logical_Switch".into(),
                    conditions: vec![Condition::uuid(uuid)],
                    row: update,
                }],
                Duration::from_secs(10),
            )
            .await
            .unwrap();
        let row = cache.snapshot().get("Logical_Switch", &uuid).unwrap();
        assert_eq!(row["other_config"], Datum::map([("n", i.to_string())]));
    }
}

/// The race with another client: a write by `_uuid` to a row another client deleted
/// first is answered at once with the server's count (0), not waited for until the
/// timeout; a row the write changed that is deleted right after (here, by the same
/// transaction's next operation) ends the wait too: the cache held it before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_to_a_row_deleted_before_or_after_it_is_answered_without_waiting() {
    let server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    let (cache, _, _) = synced(&server.unix_remote(), &w, &switches("s", 2)).await;
    let snap = cache.snapshot();
    let table = snap.table("Logical_Switch");
    let uuids: Vec<_> = table.iter().map(|(u, _)| *u).collect();
    let (gone, doomed) = (uuids[0], uuids[1]);
    // Deleted by another client, then updated and mutated through the cache.
    w.transact(
        NB,
        &[Operation::Delete {
            table: "Logical_Switch".into(),
            conditions: vec![Condition::uuid(gone)],
        }],
    )
    .await
    .unwrap();
    let mut update = Row::new();
    update.insert("other_config".into(), Datum::map([("k", "v")]));
    let timeout = Duration::from_secs(3);
    let results = cache
        .transact_and_wait(
            &[
                Operation::Update {
                    table: "Logical_Switch".into(),
                    conditions: vec![Condition::uuid(gone)],
                    row: update.clone(),
                },
                Operation::Mutate {
                    table: "Logical_Switch".into(),
                    conditions: vec![Condition::uuid(gone)],
                    mutations: vec![ovsdb_proto::Mutation::new(
                        "other_config",
                        ovsdb_proto::Mutator::Insert,
                        Datum::map([("k2", "v")]),
                    )],
                },
            ],
            timeout,
        )
        .await
        .expect("answered, not timed out");
    assert_eq!(
        results.iter().map(|r| r.count()).collect::<Vec<_>>(),
        [Some(0), Some(0)]
    );
    // Changed, then deleted after the change.
    let results = cache
        .transact_and_wait(
            &[
                Operation::Update {
                    table: "Logical_Switch".into(),
                    conditions: vec![Condition::uuid(doomed)],
                    row: update,
                },
                Operation::Delete {
                    table: "Logical_Switch".into(),
                    conditions: vec![Condition::uuid(doomed)],
                },
            ],
            timeout,
        )
        .await
        .expect("answered, not timed out");
    assert_eq!(results[0].count(), Some(1));
    assert!(cache.snapshot().get("Logical_Switch", &doomed).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_transactions_go_through_the_cache_with_their_typed_results() {
    use nb_model::{LogicalSwitch, LogicalSwitchPort, OvnNorthbound};
    use ovsdb_proto::model::Table;
    let server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    let (cache, _, _) = synced(&server.unix_remote(), &w, &[]).await;
    let db = cache.db::<OvnNorthbound>().unwrap();
    let mut txn = db.transaction();
    let port = txn.insert(&LogicalSwitchPort {
        name: "p1".into(),
        ..Default::default()
    });
    let mut sw = LogicalSwitch::named("sw1");
    sw.ports.insert(port.clone());
    let sw_ref = txn.insert(&sw);
    let selected = txn.select([LogicalSwitch::COLUMNS.name.eq("sw1")]);
    let result = cache
        .commit_and_wait(txn, Duration::from_secs(10))
        .await
        .unwrap();
    let sw_uuid = result.uuid(&sw_ref).unwrap();
    let port_uuid = result.uuid(&port).unwrap();
    let rows = result.rows(&selected).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].uuid, sw_uuid);
    // Read-your-writes: both rows are in the cache when commit_and_wait returns.
    let snap = cache.snapshot();
    assert!(snap.get("Logical_Switch", &sw_uuid).is_some());
    assert!(snap.get("Logical_Switch_Port", &port_uuid).is_some());
}

#[tokio::test]
async fn a_big_table_syncs_whole_and_follows_one_update_of_every_row() {
    // Past its first 512 rows a table is decoded on worker threads: from the monitor
    // reply with its rows cut out while it streams, and from an update2 naming every
    // row. Both must land whole and in place.
    let server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    let mut ops = Vec::new();
    let mut refs = Vec::new();
    for i in 0..3000 {
        let port: Row = [
            ("name".to_string(), Datum::scalar(format!("p{i}"))),
            (
                "external_ids".to_string(),
                Datum::map([("n", i.to_string()), ("odd", "}{\"[".to_string())]),
            ),
        ]
        .into_iter()
        .collect();
        ops.push(Operation::insert_named(
            "Logical_Switch_Port",
            port,
            format!("p{i}"),
        ));
        refs.push(ovsdb_proto::Atom::NamedUuid(format!("p{i}").into()));
    }
    let mut sw = named("sw0");
    sw.insert("ports".into(), Datum::set(refs));
    ops.push(Operation::insert("Logical_Switch", sw));
    w.transact(NB, &ops).await.unwrap();

    let (cache, _events) = Cache::start(config(&server.unix_remote()));
    tokio::time::timeout(Duration::from_secs(20), cache.wait_until_ready())
        .await
        .unwrap();
    settle(&cache, &w).await;
    let snap = cache.snapshot();
    assert_eq!(snap.table("Logical_Switch_Port").len(), 3000);
    let p2999 = snap
        .find("Logical_Switch_Port", &[("name", Datum::scalar("p2999"))])
        .unwrap();
    assert_eq!(
        p2999["external_ids"],
        Datum::map([("n", "2999"), ("odd", "}{\"[")])
    );

    w.transact(
        NB,
        &[Operation::Update {
            table: "Logical_Switch_Port".into(),
            conditions: vec![],
            row: [("tag_request".to_string(), Datum::scalar(7))]
                .into_iter()
                .collect(),
        }],
    )
    .await
    .unwrap();
    settle(&cache, &w).await;
    let tagged = cache
        .snapshot()
        .table("Logical_Switch_Port")
        .values()
        .filter(|p| p["tag_request"] == Datum::scalar(7))
        .count();
    assert_eq!(tagged, 3000);
}

/// Inserts port `name` on a switch of its own through the cache's handle and waits to
/// read them back.
async fn commit_port(cache: &Cache, name: &str) -> Result<(), ovsdb_proto::Error> {
    let db = cache.db::<nb_model::OvnNorthbound>()?;
    let mut txn = db.transaction();
    let port = txn.insert(&nb_model::LogicalSwitchPort {
        name: name.into(),
        ..Default::default()
    });
    let mut switch = nb_model::LogicalSwitch::named(format!("{name}-switch"));
    switch.ports = [port].into();
    txn.insert(&switch);
    cache
        .commit_and_wait(txn, Duration::from_secs(1))
        .await
        .map(|_| ())
}

#[tokio::test]
async fn an_unread_typed_stream_is_named_when_it_holds_the_cache_back() {
    // Issue 21, item 1: a kept, unread subscription stopped the cache, and the 45th
    // write's timeout blamed the protocol.
    use nb_model::LogicalSwitchPort;
    use ovsdb_proto::ErrorKind;

    let server = nb_server();
    let mut cfg = config(&server.unix_remote());
    cfg.event_capacity = 4;
    let _unread = cfg.subscribe::<LogicalSwitchPort>();
    let (cache, _) = Cache::start(cfg);
    cache.wait_until_ready().await;
    let mut failed = None;
    for i in 0..20 {
        if let Err(e) = commit_port(&cache, &format!("p{i}")).await {
            failed = Some((i, e));
            break;
        }
    }
    let (i, e) = failed.expect("an unread lossless stream holds the cache back");
    // Its four slots hold the initial batch (Ready) and three commits' batches; the
    // fourth commit's events cannot be queued, so its wait fails.
    assert_eq!(i, 3, "the stream's capacity is used first");
    assert_eq!(e.kind(), ErrorKind::HeldBack, "{e}");
    let text = e.to_string();
    assert!(
        text.contains("TypedEvents<Logical_Switch_Port>") && text.contains("Delivery::Bounded"),
        "{text}"
    );
}

#[tokio::test]
async fn a_bounded_typed_stream_never_holds_the_cache_back_and_says_what_it_missed() {
    use nb_model::LogicalSwitchPort;
    use ovsdb_proto::cache::{Delivery, TypedEvent};

    let server = nb_server();
    let mut cfg = config(&server.unix_remote());
    cfg.event_capacity = 4;
    let mut ports = cfg.subscribe_with::<LogicalSwitchPort>(Delivery::Bounded(3));
    // The untyped stream bounded too, and unread.
    cfg.event_delivery = Delivery::Bounded(2);
    let (cache, mut all) = Cache::start(cfg);
    cache.wait_until_ready().await;
    for i in 0..30 {
        commit_port(&cache, &format!("p{i}")).await.unwrap();
    }
    // What the reader gets: the ready marker, three batches, one marker for the 27
    // inserts that did not fit, nothing else.
    let mut inserts = 0;
    let mut missed = 0;
    let mut order = Vec::new();
    while let Ok(Some(e)) = tokio::time::timeout(Duration::from_millis(200), ports.recv()).await {
        match e {
            TypedEvent::Change { .. } => {
                inserts += 1;
                order.push('c');
            }
            TypedEvent::Missed { events } => {
                missed += events;
                order.push('m');
            }
            TypedEvent::Ready => order.push('r'),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        inserts + missed,
        30,
        "every insert is either read or counted"
    );
    assert!(missed > 0, "the reader was behind");
    let order: String = order.into_iter().collect();
    assert!(
        order.ends_with('m') && order.matches('m').count() == 1,
        "{order}"
    );
    // After the marker the stream carries on.
    commit_port(&cache, "after").await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), ports.recv()).await;
    assert!(
        matches!(next, Ok(Some(TypedEvent::Change { .. }))),
        "{next:?}"
    );
    // The untyped stream too says what it missed: nothing lost without a count.
    let mut seen = 0u64;
    while let Some(e) = all.try_recv() {
        seen += match e {
            ovsdb_proto::cache::CacheEvent::Missed { events } => events,
            ovsdb_proto::cache::CacheEvent::Change(_) => 1,
            _ => 0,
        };
    }
    assert_eq!(seen, 62, "31 switches and their ports, read or counted");
}

#[tokio::test]
async fn a_cache_that_does_not_sync_says_which_servers_it_tried_and_why() {
    // Issue 21, item 2: `timeout(10s, wait_until_ready())` said only `Elapsed`.
    let remotes = "tcp:127.0.0.1:1,unix:/nonexistent.sock,tcp:localhost";
    let (cache, _) = Cache::start(config(remotes));
    let e = cache.ready(Duration::from_secs(2)).await.unwrap_err();
    assert!(e.is_retryable(), "{e}");
    let text = e.to_string();
    assert!(
        text.starts_with("the cache of OVN_Northbound did not sync within 2s: "),
        "{text}"
    );
    for remote in [
        "tcp:127.0.0.1:1",
        "unix:/nonexistent.sock",
        "tcp:localhost:6640",
    ] {
        let said = text
            .split("; ")
            .find(|part| part.contains(&format!("{remote}: ")))
            .unwrap_or_else(|| panic!("{remote} is not named: {text}"));
        assert!(
            said.len() > remote.len() + 2,
            "no reason for {remote}: {text}"
        );
        // Item 8: the reason does not name the server again.
        assert_eq!(said.matches(remote).count(), 1, "{said}");
    }
    assert!(
        text.contains("Connection refused") || text.contains("connection refused"),
        "{text}"
    );
    assert!(text.to_lowercase().contains("no such file"), "{text}");

    // A server that answers: ready at once.
    let server = nb_server();
    let (cache, _) = Cache::start(config(&server.unix_remote()));
    cache.ready(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test]
async fn a_typed_handle_taken_from_the_cache_follows_it_across_a_reconnect() {
    // Issue 21, item 3: `cache.db()` kept across a reconnect failed with `connection
    // closed` although the cache had reconnected.
    let mut server = nb_server();
    let (cache, _) = Cache::start(config(&server.unix_remote()));
    cache.ready(Duration::from_secs(10)).await.unwrap();
    let db = cache.db::<nb_model::OvnNorthbound>().unwrap();
    let before = db.client().unwrap();
    let commit = |name: &'static str| {
        let mut txn = db.transaction();
        txn.insert(&nb_model::LogicalSwitch::named(name));
        cache.commit_and_wait(txn, Duration::from_secs(5))
    };
    commit("before").await.unwrap();
    restart_and_reconnect(&mut server, &cache).await;
    assert!(before.is_closed(), "the first connection is gone");
    // Sent over the new connection, and shown by the cache (commit_and_wait waits
    // for that).
    commit("after").await.unwrap();
    assert!(!db.client().unwrap().is_closed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_waited_for_has_its_events_in_every_stream_when_the_wait_returns() {
    // Issue 21, item 4: after commit_and_wait the transaction's own events were
    // queued 200/200 times on a current-thread runtime, 175/200 on a multi-thread one.
    use nb_model::LogicalSwitch;
    use ovsdb_proto::cache::{Change, TypedEvent};

    let server = nb_server();
    let mut cfg = config(&server.unix_remote());
    cfg.event_capacity = 1024;
    let mut switches = cfg.subscribe::<LogicalSwitch>();
    let (cache, mut all) = Cache::start(cfg);
    cache.ready(Duration::from_secs(10)).await.unwrap();
    let db = cache.db::<nb_model::OvnNorthbound>().unwrap();
    let mut late = Vec::new();
    for i in 0..200 {
        let name = format!("s{i}");
        let mut txn = db.transaction();
        txn.insert(&LogicalSwitch::named(name.clone()));
        cache
            .commit_and_wait(txn, Duration::from_secs(5))
            .await
            .unwrap();
        // Without waiting: what the streams hold now.
        let mut typed = false;
        while let Some(e) = switches.try_recv() {
            if let TypedEvent::Change {
                change: Change::Insert { new },
                ..
            } = e
            {
                typed |= new.name == name;
            }
        }
        let mut untyped = false;
        while let Some(e) = all.try_recv() {
            if let ovsdb_proto::cache::CacheEvent::Change(e) = e {
                untyped |= e.table == "Logical_Switch";
            }
        }
        if !(typed && untyped) {
            late.push((i, typed, untyped));
        }
    }
    assert!(
        late.is_empty(),
        "events not yet queued when the wait returned: {late:?}"
    );
}

#[tokio::test]
async fn a_typed_index_with_several_keys_per_row_finds_which_switch_holds_a_port() {
    // Issue 21, items 5 and 6: reverse references through a multi-key typed index,
    // built from the config (so it cannot be left out of it); an index whose table
    // was never given to the config says how to fix it.
    use nb_model::{LogicalSwitch, LogicalSwitchPort, OvnNorthbound};
    use ovsdb_proto::cache::TypedTable;
    use ovsdb_proto::model::{Ref, Table};

    let server = nb_server();
    let mut cfg = config(&server.unix_remote());
    let by_port = cfg.typed_index("by port", |s: &LogicalSwitch| {
        s.ports.iter().filter_map(|p| p.uuid()).collect::<Vec<_>>()
    });
    // A second index on the same table: both kept, one typed state.
    let by_name = cfg.typed_index("by name", |s: &LogicalSwitch| Some(s.name.clone()));
    let mut forgotten = TypedTable::<LogicalSwitchPort>::new();
    let never = forgotten.index("name", |p| Some(p.name.clone()));
    let (cache, _) = Cache::start(cfg);
    cache.ready(Duration::from_secs(10)).await.unwrap();

    let db = cache.db::<OvnNorthbound>().unwrap();
    let mut txn = db.transaction();
    let mut refs = Vec::new();
    for name in ["a1", "a2"] {
        refs.push(txn.insert(&LogicalSwitchPort {
            name: name.into(),
            ..Default::default()
        }));
    }
    let mut a = LogicalSwitch::named("a");
    a.ports = refs.iter().cloned().collect();
    let a_ref = txn.insert(&a);
    let result = cache
        .commit_and_wait(txn, Duration::from_secs(5))
        .await
        .unwrap();
    let port = result.uuid(&refs[1]).unwrap();
    let holders = cache.snapshot().lookup(&by_port, &port).unwrap();
    assert_eq!(
        holders.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["a"]
    );
    assert_eq!(cache.snapshot().lookup(&by_name, "a").unwrap().len(), 1);

    // The port moves to another switch: the index follows.
    let a_uuid = result.uuid(&a_ref).unwrap();
    let mut txn = db.transaction();
    let mut b = LogicalSwitch::named("b");
    b.ports = [Ref::<LogicalSwitchPort>::new(port)].into();
    txn.insert(&b);
    txn.mutate::<LogicalSwitch>(
        [LogicalSwitch::COLUMNS.uuid.eq(a_uuid)],
        [LogicalSwitch::COLUMNS
            .ports
            .delete([Ref::<LogicalSwitchPort>::new(port)])],
    );
    cache
        .commit_and_wait(txn, Duration::from_secs(5))
        .await
        .unwrap();
    let holders = cache.snapshot().lookup(&by_port, &port).unwrap();
    assert_eq!(
        holders.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["b"]
    );

    let e = cache.snapshot().lookup(&never, "a1").unwrap_err();
    assert!(e.to_string().contains("CacheConfig::typed_index"), "{e}");
}

#[tokio::test]
async fn the_common_path_reads_like_the_domain() {
    // Issue 21, item 7: the model names the database, the cache's Arc<T> goes into
    // an update as it is, typed rows come in uuid order with a config mistake as an
    // error that says what to do.
    use nb_model::{LogicalSwitch, LogicalSwitchPort, OvnNorthbound};
    use ovsdb_proto::cache::TypedTable;

    let server = nb_server();
    let mut cfg =
        CacheConfig::for_model::<OvnNorthbound>(Remote::parse_list(&server.unix_remote()).unwrap());
    assert_eq!(cfg.database, "OVN_Northbound");
    cfg.typed(TypedTable::<LogicalSwitch>::new());
    let (cache, _) = Cache::start(cfg);
    cache.ready(Duration::from_secs(10)).await.unwrap();
    let db = cache.db::<OvnNorthbound>().unwrap();
    let mut txn = db.transaction();
    for name in ["sw-b", "sw-a", "sw-c"] {
        txn.insert(&LogicalSwitch::named(name));
    }
    cache
        .commit_and_wait(txn, Duration::from_secs(5))
        .await
        .unwrap();

    let rows = cache.snapshot().all::<LogicalSwitch>().unwrap();
    assert_eq!(rows.len(), 3);
    assert!(rows.windows(2).all(|w| w[0].uuid < w[1].uuid), "uuid order");
    // The cache's own Arc, changed and written back.
    let old = rows.iter().find(|s| s.name == "sw-a").unwrap().clone();
    let mut new = (*old).clone();
    new.external_ids.insert("owner".into(), "me".into());
    let mut txn = db.transaction();
    txn.update(&old, &new);
    cache
        .commit_and_wait(txn, Duration::from_secs(5))
        .await
        .unwrap();
    let now = cache
        .snapshot()
        .get_typed::<LogicalSwitch>(&old.uuid)
        .unwrap();
    assert_eq!(now.external_ids["owner"], "me");

    let e = cache.snapshot().all::<LogicalSwitchPort>().unwrap_err();
    assert!(
        e.to_string()
            .contains("CacheConfig::typed(TypedTable::<LogicalSwitchPort>::new())"),
        "{e}"
    );
}

/// A cluster member that lies: `_Server` says it is the leader of `cid` with raft
/// index 10^12, and it closes the connection as soon as its data is asked for. Counts
/// its connections.
fn lying_member(
    path: std::path::PathBuf,
    server_schema: serde_json::Value,
    cid: String,
) -> std::sync::Arc<std::sync::atomic::AtomicUsize> {
    use serde_json::{json, Value};
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut out = stream.try_clone().unwrap();
            for msg in serde_json::Deserializer::from_reader(stream).into_iter::<Value>() {
                let Ok(msg) = msg else { break };
                let result = match (msg["method"].as_str(), msg["params"][0].as_str()) {
                    (Some("get_schema"), Some("_Server")) => server_schema.clone(),
                    (Some("monitor_cond"), Some("_Server")) => json!({"Database": {
                        "00000000-0000-0000-0000-000000000001": {"initial": {
                            "name": NB, "model": "clustered", "connected": true,
                            "leader": true, "index": 1_000_000_000_000i64,
                            "cid": ["uuid", cid]}}}}),
                    (Some("set_db_change_aware"), _) => json!({}),
                    (Some("echo"), _) => msg["params"].clone(),
                    // Its data: nothing, the connection ends.
                    _ => break,
                };
                let reply = json!({"id": msg["id"], "result": result, "error": null});
                if std::io::Write::write_all(&mut out, reply.to_string().as_bytes()).is_err() {
                    break;
                }
            }
        }
    });
    seen
}

#[tokio::test]
async fn a_member_lying_about_its_raft_index_does_not_make_the_real_ones_look_behind() {
    // Issue 19, item 6: an index learned from a server the cache never synced with
    // made every real member "behind" for good, the cache stale for ever.
    let install = Installation::recent().unwrap();
    let mut cluster = Cluster::start(&install, 1, None).unwrap();
    let real = cluster.members[0].unix_remote();
    let (c, _) = client(&real).await;
    let server_schema = c.get_schema_json("_Server").await.unwrap();
    let db = c
        .transact(
            "_Server",
            &[Operation::select(
                "Database",
                vec![Condition::eq("name", NB)],
            )],
        )
        .await
        .unwrap();
    let cid = db[0].rows().unwrap()[0]["cid"]
        .as_scalar()
        .unwrap()
        .as_uuid()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let liar_path = dir.path().join("liar.sock");
    let liar = lying_member(liar_path.clone(), server_schema, cid.to_string());

    let remotes = format!("unix:{},{real}", liar_path.display());
    let (cache, _) = Cache::start(config(&remotes));
    cache.ready(Duration::from_secs(20)).await.unwrap();
    // The real member gone, only the liar is left to try: wait until it was.
    cluster.members[0].kill();
    for _ in 0..200 {
        if liar.load(std::sync::atomic::Ordering::Relaxed) >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cluster.members[0].restart().unwrap();
    let (w, _) = client(&real).await;
    // Sent once the cache has a server again (commit_and_wait rides over the gap).
    let db = cache.db::<nb_model::OvnNorthbound>().unwrap();
    let mut txn = db.transaction();
    txn.insert(&nb_model::LogicalSwitch::named("after"));
    let shown = cache.commit_and_wait(txn, Duration::from_secs(20)).await;
    assert!(
        liar.load(std::sync::atomic::Ordering::Relaxed) >= 2,
        "the liar was not tried while the real member was away"
    );
    shown.expect("the cache follows the real member again");
    drop(w);
}

#[tokio::test]
async fn a_delete_by_name_is_waited_for_through_the_tables_index_or_a_scan() {
    // Read-your-writes for deletes by `==` conditions: Address_Set's name is one of
    // the schema's indexes (a hash lookup), Logical_Switch's is not (a scan).
    let server = nb_server();
    let mut cfg = config(&server.unix_remote());
    cfg.tables
        .insert("Address_Set".into(), ovsdb_proto::MonitorRequest::all());
    let (cache, _) = Cache::start(cfg);
    cache.ready(Duration::from_secs(10)).await.unwrap();
    let timeout = Duration::from_secs(5);
    for table in ["Address_Set", "Logical_Switch"] {
        cache
            .transact_and_wait(&[Operation::insert(table, named("x"))], timeout)
            .await
            .unwrap();
        let before = cache.snapshot();
        assert_eq!(before.table(table).len(), 1);
        let delete = [Operation::Delete {
            table: table.into(),
            conditions: vec![Condition::eq("name", "x")],
        }];
        let results = cache.transact_and_wait(&delete, timeout).await.unwrap();
        // What the wait waited for: the contents before the delete do not show it
        // (whether or not the update had come before the reply), those after do.
        let expected = ovsdb_proto::cache::Expected::new(&delete, &results);
        assert!(!expected.shown_in(&before), "{table}");
        assert!(expected.shown_in(&cache.snapshot()), "{table}");
        assert!(cache.snapshot().table(table).is_empty(), "{table}");
    }
    // `wait_shown` gives the contents that show the transaction: a row inserted by a
    // plain transact is in them, and they are the cache's own (not a copy).
    let results = cache
        .transact(&[Operation::insert("Logical_Switch", named("y"))])
        .await
        .unwrap();
    let uuid = results[0].uuid().unwrap();
    let shown = cache
        .wait_shown(
            &[Operation::insert("Logical_Switch", named("y"))],
            &results,
            timeout,
        )
        .await
        .unwrap();
    assert!(shown.get("Logical_Switch", &uuid).is_some());
    assert!(std::sync::Arc::ptr_eq(&shown, &cache.snapshot()));
}

/// ovsdb-server answers nothing, probes included, while it composes the reply to a
/// monitor; for a big database that outlasts the inactivity probe (760k rows of an OVN
/// NB: 18 s on a 2-core machine). Here a proxy holds the server's reply to each monitor
/// of the NB back for 1.2 s, six probe intervals of 200 ms: the first connections are
/// ended by the probe, and the cache waits longer on each until one syncs (with the
/// probe kept as it was, it never did).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_silent_past_the_probe_while_composing_a_monitor_reply_is_waited_for() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = nb_server();
    let backend = server.unix_remote().trim_start_matches("unix:").to_owned();
    let dir = tempfile::tempdir().unwrap();
    let front = dir.path().join("slow.sock");
    let listener = tokio::net::UnixListener::bind(&front).unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    let proxy = tokio::spawn(async move {
        loop {
            let (client, _) = listener.accept().await.unwrap();
            counted.fetch_add(1, Ordering::SeqCst);
            let upstream = tokio::net::UnixStream::connect(&backend).await.unwrap();
            let (mut cr, mut cw) = client.into_split();
            let (mut ur, mut uw) = upstream.into_split();
            let hold = Arc::new(AtomicBool::new(false));
            let asked = hold.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 1 << 16];
                while let Ok(n) = cr.read(&mut buf).await {
                    let chunk = &buf[..n];
                    let text = String::from_utf8_lossy(chunk);
                    if n == 0 {
                        break;
                    }
                    // The NB's monitor: its reply is held back (set before the request
                    // goes on, so that the reply comes after).
                    if text.contains("\"method\":\"monitor") && text.contains(NB) {
                        asked.store(true, Ordering::SeqCst);
                    }
                    if uw.write_all(chunk).await.is_err() {
                        break;
                    }
                }
            });
            tokio::spawn(async move {
                let mut buf = vec![0u8; 1 << 16];
                while let Ok(n) = ur.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    if hold.swap(false, Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(1200)).await;
                    }
                    if cw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    let mut cfg = config(&format!("unix:{}", front.display()));
    cfg.connect.inactivity_probe = Some(Duration::from_millis(200));
    let (cache, _events) = Cache::start(cfg);
    let synced = tokio::time::timeout(Duration::from_secs(20), cache.wait_until_ready()).await;
    let n = connections.load(Ordering::SeqCst);
    assert!(synced.is_ok(), "not synced after {n} connections");
    assert!(
        n > 1,
        "the first connection synced: the reply was not held back"
    );
    drop(cache);
    proxy.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_by_conditions_and_mutations_are_shown_when_they_return() {
    // Read-your-writes for every shape: an update and a mutation selecting rows by
    // name (not by uuid), typed and raw. Each return shows the write at once, 200 times
    // over (the old code returned before the cache showed it in most of them).
    use nb_model::{LogicalSwitch, OvnNorthbound};
    use ovsdb_proto::model::Table;
    let server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    let (cache, events, _) = synced(&server.unix_remote(), &w, &switches("s", 1)).await;
    drop(events);
    let db = cache.db::<OvnNorthbound>().unwrap();
    let timeout = Duration::from_secs(5);
    let other_config = |i: usize| {
        let snap = cache.snapshot();
        let (_, row) = snap
            .table("Logical_Switch")
            .iter()
            .next()
            .map(|(u, r)| (*u, r.clone()))
            .unwrap();
        row.get("other_config")
            .and_then(|d| d.get_str(&format!("k{}", i % 2)))
            .and_then(|a| a.as_str().map(str::to_owned))
    };
    for i in 0..200 {
        let value = i.to_string();
        if i % 2 == 0 {
            // A typed update by name.
            let mut txn = db.transaction();
            let mut values = LogicalSwitch::named("s0");
            values.other_config.insert("k0".into(), value.clone());
            txn.update_where(
                [LogicalSwitch::COLUMNS.name.eq("s0".to_owned())],
                &values,
                &[LogicalSwitch::COLUMNS.other_config.into()],
            );
            cache.commit_and_wait(txn, timeout).await.unwrap();
        } else {
            // A raw mutation by name.
            cache
                .transact_and_wait(
                    &[Operation::Mutate {
                        table: "Logical_Switch".into(),
                        conditions: vec![Condition::new(
                            "name",
                            ovsdb_proto::Function::Eq,
                            Datum::scalar("s0"),
                        )],
                        mutations: vec![
                            ovsdb_proto::Mutation::new(
                                "other_config",
                                ovsdb_proto::Mutator::Delete,
                                Datum::set(["k1"]),
                            ),
                            ovsdb_proto::Mutation::new(
                                "other_config",
                                ovsdb_proto::Mutator::Insert,
                                Datum::map([("k1", value.as_str())]),
                            ),
                        ],
                    }],
                    timeout,
                )
                .await
                .unwrap();
        }
        assert_eq!(
            other_config(i),
            Some(value),
            "write {i} returned before the cache showed it"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_with_every_server_gone_says_why_each_was_unusable() {
    // The only server stops: a write waits its timeout for one to come back, then its
    // error names each server tried and why it was unusable (as `ready()` does).
    let server = nb_server();
    let remote = server.unix_remote();
    let (w, _) = client(&remote).await;
    let (cache, events, _) = synced(&remote, &w, &switches("s", 1)).await;
    drop(events);
    drop(w);
    drop(server);
    tokio::time::timeout(Duration::from_secs(10), async {
        while cache.client().is_some_and(|c| !c.is_closed()) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    // Let the cache try the server once more (it is refused).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let e = cache
        .transact_and_wait(
            &[Operation::insert("Logical_Switch", named("late"))],
            Duration::from_secs(1),
        )
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(e.is_retryable(), "{text}");
    assert!(
        text.contains("the cache is not connected to a usable server: ")
            && text.contains(&remote.to_string()),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_streams_are_futures_streams() {
    // CacheEvents and TypedEvents read with StreamExt, as any stream: the insert of a
    // switch arrives on both.
    use futures_util::StreamExt;
    use nb_model::LogicalSwitch;
    use ovsdb_proto::cache::{Change, TypedEvent};
    let server = nb_server();
    let (w, _) = client(&server.unix_remote()).await;
    let mut cfg = config(&server.unix_remote());
    let typed = cfg.subscribe::<LogicalSwitch>();
    let (cache, events) = Cache::start(cfg);
    cache.wait_until_ready().await;
    w.transact(
        NB,
        &[Operation::insert("Logical_Switch", named("streamed"))],
    )
    .await
    .unwrap();
    let inserted = events.filter_map(|e| async move {
        match e {
            ovsdb_proto::cache::CacheEvent::Change(c) if c.table == "Logical_Switch" => Some(c),
            _ => None,
        }
    });
    let mut inserted = Box::pin(inserted);
    let first = tokio::time::timeout(Duration::from_secs(10), inserted.next())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(first.change, Change::Insert { .. }));
    let mut typed = typed;
    let name = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(e) = typed.next().await {
            if let TypedEvent::Change {
                change: Change::Insert { new },
                ..
            } = e
            {
                return new.name.clone();
            }
        }
        String::new()
    })
    .await
    .unwrap();
    assert_eq!(name, "streamed");
}
