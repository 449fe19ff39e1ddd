//! Faults only containers can make, against a raft cluster whose members are containers
//! with their own addresses (`ovn_sandbox::ContainerCluster`): the leader cut off the
//! network or paused, a follower isolated from its peers, a member killed and
//! restarted, one replaced by an empty member, while a cache follows the cluster and
//! writes go through it.
//!
//! Each test ends with the cache equal to the server's contents, its event stream
//! replaying to the same, and every write present exactly once.

use integration_tests::{insert_unless_named, named};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use integration_tests::cache::{settle, Replay, TABLES};
use integration_tests::{client, NB};
use ovn_sandbox::{ContainerCluster, Installation};
use ovsdb_proto::cache::{Cache, CacheConfig, CacheEvent, CacheEvents, Change};
use ovsdb_proto::{Client, Condition, Datum, Operation, Remote, Row};

/// How often the cache probes a silent server: a connection to a member cut off the
/// network is declared dead after two of these.
const PROBE: Duration = Duration::from_secs(1);

/// How long a request may wait for its reply in the pause test.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// A cache's configuration for the cluster's members `members`, probing every
/// [`PROBE`].
fn config_of(cluster: &ContainerCluster, members: &[usize], leader_only: bool) -> CacheConfig {
    let remotes: Vec<String> = members.iter().map(|&i| cluster.tcp_remote(i)).collect();
    let mut config = CacheConfig::new(Remote::parse_list(&remotes.join(",")).unwrap(), NB, TABLES);
    config.leader_only = leader_only;
    config.connect.inactivity_probe = Some(PROBE);
    config.connect.connect_timeout = Some(PROBE);
    config.min_backoff = Duration::from_millis(20);
    config.max_backoff = Duration::from_millis(500);
    config
}

/// Inserts switch `name` through the cache unless it exists (a `wait` guards the
/// insert, so a retry after an unknown outcome cannot add it twice), retrying what
/// failed for the connection's sake until it is in or `within` is over.
async fn write(cache: &Cache, name: &str, within: Duration) {
    let guarded = insert_unless_named(name);
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
    let (cache, events) = Cache::start(config_of(&cluster, &[0, 1, 2], true));
    cache.ready(Duration::from_secs(20)).await.unwrap();
    let replay = Replay::default();
    let mut names = Vec::new();
    for i in 0..5 {
        names.push(format!("before-{i}"));
        write(&cache, names.last().unwrap(), Duration::from_secs(10)).await;
    }
    let leader = cluster.leader().expect("a leader");
    let first = cache.client().expect("connected");
    let remote = |i: usize| Remote::parse(&cluster.tcp_remote(i)).unwrap();
    assert_eq!(cache.remote(), Some(remote(leader)), "a leader-only cache");

    // The leader cut off: the cache's connection to it goes silent (no reset, no FIN).
    let cut = Instant::now();
    cluster.cut_off(leader).unwrap();
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
    assert_eq!(cache.remote(), Some(remote(new_leader)));
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
    cluster.heal(leader).unwrap();
    cluster.wait_connected().unwrap();
    for i in 0..5 {
        names.push(format!("after-{i}"));
        write(&cache, names.last().unwrap(), Duration::from_secs(10)).await;
    }
    eprintln!("healed: writes went on, {:?} after", healed.elapsed());

    every_write_once(&cluster, new_leader, leader, &cache, &names, events, replay).await;
}

/// Checks the end of a fault: every write in `names` there exactly once (read from
/// member `from`), member `healed` caught up with it, the cache equal to it and its
/// events replaying to the same.
async fn every_write_once(
    cluster: &ContainerCluster,
    from: usize,
    healed: usize,
    cache: &Cache,
    names: &[String],
    mut events: CacheEvents,
    mut replay: Replay,
) {
    let (server, _) = client(&cluster.tcp_remote(from)).await;
    let want = settle(cache, &server).await;
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for row in want["Logical_Switch"].values() {
        let name = row["name"].as_scalar().and_then(|a| a.as_str()).unwrap();
        *count.entry(name.to_owned()).or_default() += 1;
    }
    let expected: BTreeMap<String, usize> = names.iter().map(|n| (n.clone(), 1)).collect();
    assert_eq!(count, expected, "every write exactly once");
    let (old, _) = client(&cluster.tcp_remote(healed)).await;
    let caught_up = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if integration_tests::cache::dump(&old).await == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(caught_up.is_ok(), "member {healed} never caught up");
    replay.drain(&mut events);
    assert_eq!(replay.contents(), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leader_times_requests_out_and_the_cache_fails_over() {
    let install = Installation::recent().unwrap_or_else(|e| panic!("{e}"));
    let cluster = ContainerCluster::start(&install, 3).unwrap_or_else(|e| panic!("{e}"));
    let mut config = config_of(&cluster, &[0, 1, 2], true);
    // The probe would notice a frozen server too: slower here than the request timeout.
    config.connect.inactivity_probe = Some(Duration::from_secs(5));
    config.connect.request_timeout = Some(REQUEST_TIMEOUT);
    let (cache, events) = Cache::start(config);
    cache.ready(Duration::from_secs(20)).await.unwrap();
    let replay = Replay::default();
    let mut names: Vec<String> = (0..5).map(|i| format!("before-{i}")).collect();
    for name in &names {
        write(&cache, name, Duration::from_secs(10)).await;
    }
    let leader = cluster.leader().expect("a leader");

    // Frozen, the leader neither answers nor closes: a write in flight fails with an
    // unknown outcome when the request timeout says, well before the probe would.
    let paused = Instant::now();
    cluster.members()[leader].pause().unwrap();
    let guarded = insert_unless_named("during-0");
    let first = cache
        .transact_and_wait(&guarded, Duration::from_secs(30))
        .await;
    let timed_out = paused.elapsed();
    let e = first.expect_err("a write to a paused leader succeeded");
    assert!(e.is_outcome_unknown(), "{e}");
    assert!(
        timed_out >= REQUEST_TIMEOUT && timed_out < REQUEST_TIMEOUT + Duration::from_secs(2),
        "the request failed after {timed_out:?} ({e})"
    );
    // Retried, it goes through whoever leads now: once, whatever the first did.
    names.push("during-0".into());
    write(&cache, "during-0", Duration::from_secs(30)).await;
    let recovered = paused.elapsed();
    let others: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let new_leader = cluster.wait_leader_among(&others).unwrap();
    assert_eq!(
        cache.remote(),
        Some(Remote::parse(&cluster.tcp_remote(new_leader)).unwrap())
    );
    // The connection to the frozen member stays up (its kernel even accepts new
    // ones) until two probe intervals pass without a message: then the cache tries
    // the others.
    assert!(
        recovered < Duration::from_secs(25),
        "the retry went through after {recovered:?}"
    );
    eprintln!(
        "leader {leader} paused: the write in flight failed after {timed_out:?}, the retry went through member {new_leader} after {recovered:?}"
    );

    cluster.members()[leader].unpause().unwrap();
    cluster.wait_connected().unwrap();
    for i in 0..5 {
        names.push(format!("after-{i}"));
        write(&cache, names.last().unwrap(), Duration::from_secs(10)).await;
    }
    every_write_once(&cluster, new_leader, leader, &cache, &names, events, replay).await;
}

/// The counter's value in a `Logical_Switch` row named "counter" (its
/// `external_ids:n`), if the row is that.
fn counter(row: &Row) -> Option<u64> {
    let is_counter = row.get("name")?.as_scalar()?.as_str() == Some("counter");
    let ids = row.get("external_ids")?.as_map()?;
    let n = ids
        .iter()
        .find(|(k, _)| k.as_str() == Some("n"))?
        .1
        .as_str()?;
    is_counter.then(|| n.parse().unwrap())
}

/// Sets the counter to `n` through `w`.
async fn set_counter(w: &Client, n: u64) {
    let mut row = Row::new();
    row.insert("external_ids".into(), Datum::map([("n", n.to_string())]));
    w.transact(
        NB,
        &[Operation::Update {
            table: "Logical_Switch".into(),
            conditions: vec![Condition::eq("name", "counter")],
            row,
        }],
    )
    .await
    .unwrap();
}

/// Applies the events waiting to `replay`, failing on any that takes the counter back
/// (or away): the highest value seen so far.
fn follow(events: &mut CacheEvents, replay: &mut Replay, mut seen: u64) -> u64 {
    while let Some(e) = events.try_recv() {
        if let CacheEvent::Change(c) = &e {
            match &c.change {
                Change::Insert { new } | Change::Modify { new, .. } => {
                    if let Some(n) = counter(&new.to_row()) {
                        assert!(n >= seen, "the counter went back from {seen} to {n}");
                        seen = n;
                    }
                }
                Change::Delete { old } => assert!(
                    counter(&old.to_row()).is_none(),
                    "the counter was deleted (a stale resync)"
                ),
            }
        }
        replay.apply(e);
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_reading_an_isolated_follower_moves_on_and_never_goes_back_in_time() {
    let install = Installation::recent().unwrap_or_else(|e| panic!("{e}"));
    let cluster = ContainerCluster::start(&install, 3).unwrap_or_else(|e| panic!("{e}"));
    let leader = cluster.leader().expect("a leader");
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let (w, _) = client(&cluster.tcp_remote(leader)).await;
    let mut row = named("counter");
    row.insert("external_ids".into(), Datum::map([("n", "0")]));
    w.transact(NB, &[Operation::insert("Logical_Switch", row)])
        .await
        .unwrap();

    // A cache reading from the followers only (any member will do).
    let (cache, mut events) = Cache::start(config_of(&cluster, &followers, false));
    cache.ready(Duration::from_secs(20)).await.unwrap();
    let mut replay = Replay::default();
    let mut seen = follow(&mut events, &mut replay, 0);
    let reading = (0..3)
        .find(|&i| cache.remote() == Some(Remote::parse(&cluster.tcp_remote(i)).unwrap()))
        .expect("the cache reads from a member");
    let other = followers.iter().copied().find(|&i| i != reading).unwrap();

    // Its member cut off its peers (clients still reach it): it falls behind while
    // the counter goes on, says it is not connected to its cluster, and the cache
    // moves to the other follower, never showing an older value.
    let cut = Instant::now();
    cluster.isolate(reading).unwrap();
    let mut n = 0;
    let mut last_snap = 0;
    let mut moved = None;
    while moved.is_none() || n < 20 {
        n += 1;
        set_counter(&w, n).await;
        seen = follow(&mut events, &mut replay, seen);
        let snap_n = cache
            .snapshot()
            .table("Logical_Switch")
            .values()
            .find_map(|r| counter(&r.to_row()))
            .unwrap();
        assert!(
            snap_n >= last_snap,
            "the snapshot went back from {last_snap} to {snap_n}"
        );
        last_snap = snap_n;
        if moved.is_none()
            && cache.remote() == Some(Remote::parse(&cluster.tcp_remote(other)).unwrap())
        {
            moved = Some(cut.elapsed());
        }
        assert!(
            cut.elapsed() < Duration::from_secs(30),
            "the cache never moved"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let moved = moved.unwrap();
    // It moved because its member said so, not because the connection died.
    seen = follow(&mut events, &mut replay, seen);
    assert!(
        replay
            .unusable
            .iter()
            .any(|(r, e)| *r == cluster.tcp_remote(reading) && e.contains("not connected")),
        "{:?}",
        replay.unusable
    );
    eprintln!("follower {reading} isolated: the cache moved to member {other} after {moved:?}");
    // On the other follower, the cache shows the latest value.
    assert!(
        cache
            .wait_for(Duration::from_secs(10), move |snap| {
                snap.table("Logical_Switch")
                    .values()
                    .any(|r| counter(&r.to_row()) == Some(n))
            })
            .await,
        "the cache does not follow the counter after the move"
    );

    // Healed: it rejoins; the counter goes on; cache and server agree.
    cluster.heal(reading).unwrap();
    cluster.wait_connected().unwrap();
    for _ in 0..10 {
        n += 1;
        set_counter(&w, n).await;
        seen = follow(&mut events, &mut replay, seen);
    }
    let want = settle(&cache, &w).await;
    // The snapshot may show an update a moment before its events are in the stream.
    let replayed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            seen = follow(&mut events, &mut replay, seen);
            if replay.contents() == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(replayed.is_ok(), "{:?}\n{want:?}", replay.contents());
    let last = want["Logical_Switch"].values().find_map(counter);
    assert_eq!(last, Some(n));
}

/// The member whose client remote the cache follows now.
fn reading(cluster: &ContainerCluster, cache: &Cache) -> Option<usize> {
    let remote = cache.remote()?;
    (0..cluster.members().len())
        .find(|&i| Remote::parse(&cluster.tcp_remote(i)).ok().as_ref() == Some(&remote))
}

/// Applies the events waiting to `replay`, failing on a delete: nothing is deleted in
/// the test that uses it, so one would be a resync from a member that is behind.
fn no_deletes(events: &mut CacheEvents, replay: &mut Replay) {
    while let Some(e) = events.try_recv() {
        if let CacheEvent::Change(c) = &e {
            assert!(
                !matches!(c.change, Change::Delete { .. }),
                "a row went away: {c:?}"
            );
        }
        replay.apply(e);
    }
}

/// Hides every member but `only` from clients, waits until the cache follows `only`
/// and shows every write in `names`, then shows the others again: how long it took.
async fn make_it_read(
    cluster: &ContainerCluster,
    cache: &Cache,
    only: usize,
    names: &[String],
    events: &mut CacheEvents,
    replay: &mut Replay,
) -> Duration {
    let start = Instant::now();
    for i in (0..3).filter(|&i| i != only) {
        cluster.hide(i).unwrap();
    }
    while reading(cluster, cache) != Some(only) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the cache never used member {only}: {:?}\n{:?}",
            replay.unusable,
            cluster.status(only)
        );
        no_deletes(events, replay);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = start.elapsed();
    let want: std::collections::BTreeSet<String> = names.iter().cloned().collect();
    let shown = cache
        .wait_for(Duration::from_secs(10), move |snap| {
            let have: std::collections::BTreeSet<String> = snap
                .table("Logical_Switch")
                .values()
                .filter_map(|r| r.to_row()["name"].as_scalar()?.as_str().map(str::to_owned))
                .collect();
            have == want
        })
        .await;
    assert!(
        shown,
        "the cache on member {only} does not show every write: {:?}",
        cluster.status(only)
    );
    no_deletes(events, replay);
    for i in 0..3 {
        cluster.heal(i).unwrap();
    }
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_killed_and_restarted_or_replaced_empty_is_used_again_once_caught_up() {
    let install = Installation::recent().unwrap_or_else(|e| panic!("{e}"));
    let mut cluster = ContainerCluster::start(&install, 3).unwrap_or_else(|e| panic!("{e}"));
    let (cache, mut events) = Cache::start(config_of(&cluster, &[0, 1, 2], false));
    cache.ready(Duration::from_secs(20)).await.unwrap();
    let mut replay = Replay::default();
    let mut names = Vec::new();
    let write_some = async |names: &mut Vec<String>, prefix: &str| {
        for i in 0..5 {
            names.push(format!("{prefix}-{i}"));
            // Through the cache's member, a follower forwarding to the leader.
            write(&cache, names.last().unwrap(), Duration::from_secs(30)).await;
        }
    };
    write_some(&mut names, "before").await;

    // The member the cache reads, killed: the cache moves on, writes go on; started
    // again with its files, it catches up and the cache can use it again.
    let killed = reading(&cluster, &cache).expect("reading a member");
    cluster.kill(killed).unwrap();
    write_some(&mut names, "killed").await;
    let restarted = Instant::now();
    cluster.restart(killed).unwrap();
    cluster.wait_connected().unwrap();
    let rejoined = restarted.elapsed();
    write_some(&mut names, "restarted").await;
    let took = make_it_read(&cluster, &cache, killed, &names, &mut events, &mut replay).await;
    eprintln!(
        "member {killed} killed and restarted: a member again after {rejoined:?}; \
         the cache on it {took:?} after the others were hidden"
    );

    // A member replaced by an empty one (kicked out, a new one joined at its
    // addresses): once caught up, the cache can use it, and nothing goes back.
    let leader = cluster.leader().expect("a leader");
    let replaced = (0..3).find(|&i| i != leader).unwrap();
    let started = Instant::now();
    cluster.replace(replaced).unwrap();
    let joined = started.elapsed();
    write_some(&mut names, "replaced").await;
    let took = make_it_read(&cluster, &cache, replaced, &names, &mut events, &mut replay).await;
    eprintln!(
        "member {replaced} replaced by an empty one: joined after {joined:?}; \
         the cache on it {took:?} after the others were hidden"
    );
    write_some(&mut names, "after").await;
    let leader = cluster.leader().expect("a leader");
    no_deletes(&mut events, &mut replay);
    every_write_once(&cluster, leader, replaced, &cache, &names, events, replay).await;
}

#[tokio::test]
async fn a_connect_to_an_address_nobody_answers_gives_up_at_the_connect_timeout() {
    // An address on a Docker network with no container: the kernel's ARP gives up
    // after about 3 s; the connect timeout is shorter.
    let network = ovn_sandbox::DockerNetwork::create().unwrap();
    let remote = Remote::parse(&format!("tcp:{}:6641", network.address(200))).unwrap();
    let options = ovsdb_proto::ConnectOptions {
        connect_timeout: Some(Duration::from_millis(500)),
        ..Default::default()
    };
    let start = Instant::now();
    let e = ovsdb_proto::connect_with(&remote, &options)
        .await
        .err()
        .expect("nobody is there");
    let took = start.elapsed();
    assert!(e.to_string().contains("not connected within 500ms"), "{e}");
    assert!(took < Duration::from_secs(2), "{took:?}");
}
