//! Faults only containers can make, against a raft cluster whose members are containers
//! with their own addresses (`ovn_sandbox::ContainerCluster`): the leader cut off its
//! network while a cache follows it and writes go through the cache.
//!
//! Each test ends with the cache equal to the server's contents, its event stream
//! replaying to the same, and every write present exactly once.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use integration_tests::cache::{settle, Replay, TABLES};
use integration_tests::{client, NB};
use ovn_sandbox::{ContainerCluster, Installation};
use ovsdb_proto::cache::{Cache, CacheConfig};
use ovsdb_proto::{Condition, Datum, Operation, Remote, Row, WaitUntil};

/// How often the cache probes a silent server: a connection to a member cut off the
/// network is declared dead after two of these.
const PROBE: Duration = Duration::from_secs(1);

fn named(name: &str) -> Row {
    [("name".to_string(), Datum::scalar(name))]
        .into_iter()
        .collect()
}

/// Inserts switch `name` through the cache unless it exists (a `wait` guards the
/// insert, so a retry after an unknown outcome cannot add it twice), retrying what
/// failed for the connection's sake until it is in or `within` is over.
async fn write(cache: &Cache, name: &str, within: Duration) {
    let guarded = [
        Operation::Wait {
            table: "Logical_Switch".into(),
            timeout: Some(0),
            conditions: vec![Condition::eq("name", name)],
            columns: vec!["name".into()],
            until: WaitUntil::Equal,
            rows: vec![],
        },
        Operation::insert("Logical_Switch", named(name)),
    ];
    let deadline = Instant::now() + within;
    loop {
        match cache
            .transact_and_wait(&guarded, Duration::from_secs(10))
            .await
        {
            Ok(_) => return,
            // An earlier attempt whose outcome was unknown did commit.
            Err(e)
                if e.as_transaction_error()
                    .is_some_and(|t| t.error.error == "timed out") =>
            {
                return
            }
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "{name} not written within {within:?}: {e}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_only_cache_moves_off_a_partitioned_leader_and_no_write_is_lost_or_doubled() {
    let install = Installation::recent().unwrap_or_else(|e| panic!("{e}"));
    let cluster = ContainerCluster::start(&install, 3).unwrap_or_else(|e| panic!("{e}"));
    let mut config = CacheConfig::new(Remote::parse_list(&cluster.remotes()).unwrap(), NB, TABLES);
    config.leader_only = true;
    config.connect.inactivity_probe = Some(PROBE);
    config.min_backoff = Duration::from_millis(20);
    config.max_backoff = Duration::from_millis(500);
    let (cache, mut events) = Cache::start(config);
    cache.ready(Duration::from_secs(20)).await.unwrap();
    let mut replay = Replay::default();
    let mut names = Vec::new();
    for i in 0..5 {
        names.push(format!("before-{i}"));
        write(&cache, names.last().unwrap(), Duration::from_secs(10)).await;
    }
    let leader = cluster.leader().expect("a leader");
    let first = cache.client().expect("connected");

    // The leader cut off: the cache's connection to it goes silent (no reset, no FIN).
    let cut = Instant::now();
    cluster.members()[leader].disconnect().unwrap();
    let others: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    // Writes go on; the first one waits out the probe, the election and the reconnect.
    names.push("during-0".into());
    write(&cache, "during-0", Duration::from_secs(30)).await;
    let recovered = cut.elapsed();
    let new_leader = cluster.wait_leader_among(&others).unwrap();
    assert!(
        !cache.client().unwrap().same_connection(&first),
        "the cache still uses its connection to the cut-off leader"
    );
    for i in 1..10 {
        names.push(format!("during-{i}"));
        write(&cache, names.last().unwrap(), Duration::from_secs(10)).await;
    }
    // Two probe intervals to notice, an election, a reconnect: well within 15 s.
    assert!(
        recovered < Duration::from_secs(15),
        "the first write after the cut took {recovered:?}"
    );
    eprintln!(
        "leader {leader} cut off: the first write through the cache went through member \
         {new_leader}'s leadership after {recovered:?}"
    );

    // Healed: the old leader rejoins as a follower, and writes still go on.
    let healed = Instant::now();
    cluster.members()[leader].reconnect().unwrap();
    cluster.wait_connected().unwrap();
    for i in 0..5 {
        names.push(format!("after-{i}"));
        write(&cache, names.last().unwrap(), Duration::from_secs(10)).await;
    }
    eprintln!("healed: writes went on, {:?} after", healed.elapsed());

    // Every write there once, on every member; the cache and its events agree.
    let (server, _) = client(&cluster.tcp_remote(new_leader)).await;
    let want = settle(&cache, &server).await;
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for row in want["Logical_Switch"].values() {
        let name = row["name"].as_scalar().and_then(|a| a.as_str()).unwrap();
        *count.entry(name.to_owned()).or_default() += 1;
    }
    let expected: BTreeMap<String, usize> = names.iter().map(|n| (n.clone(), 1)).collect();
    assert_eq!(count, expected, "every write exactly once");
    let (old, _) = client(&cluster.tcp_remote(leader)).await;
    let on_old = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if integration_tests::cache::dump(&old).await == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(on_old.is_ok(), "the healed member never caught up");
    replay.drain(&mut events);
    assert_eq!(replay.contents(), want);
}
