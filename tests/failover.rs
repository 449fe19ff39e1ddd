//! The cache and the client through raft faults on a real 3-member OVN_Northbound
//! cluster: leadership handed over (as a leader does before writing a snapshot), a leader
//! leaving, a member restarted, and ovsdb-server's crash points with a transaction in
//! flight. After each, the cache equals a fresh dump and its events replay to it.

use integration_tests::insert_unless_named;
use std::time::Duration;

use integration_tests::cache::{settle, Replay, TABLES};
use integration_tests::{client, NB};
use ovn_sandbox::{Cluster, Installation};
use ovsdb_proto::cache::{Cache, CacheConfig, CacheEvents, UnusableReason};
use ovsdb_proto::{Client, Datum, Operation, Remote};

/// One cluster test at a time: seven 3-member clusters electing leaders at once on a
/// 2-core machine would test the machine's scheduler rather than the client.
static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Writes `names` through `w`, retrying through elections; panics if the connection dies.
async fn write_all(w: &Client, names: &[String]) {
    for name in names {
        let mut done = false;
        for _ in 0..300 {
            match w.transact(NB, &insert_unless_named(name)).await {
                Ok(_) => done = true,
                Err(e)
                    if e.as_transaction_error()
                        .is_some_and(|t| t.error.error == "timed out") =>
                {
                    done = true
                }
                Err(e) if e.is_retryable() || e.is_outcome_unknown() => {
                    panic!("the writer's connection died: {e}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
            if done {
                break;
            }
        }
        assert!(done, "{name} was never written");
    }
}

/// A 3-member cluster, a cache of it, and a client on a follower (which forwards its
/// writes to the leader).
struct Setup {
    cluster: Cluster,
    cache: Cache,
    events: CacheEvents,
    replay: Replay,
    leader: usize,
    follower: usize,
    w: Client,
}

async fn setup(leader_only: bool) -> Setup {
    let install = Installation::recent().unwrap();
    let cluster = Cluster::start(&install, 3, None).unwrap();
    let mut cfg = CacheConfig::new(Remote::parse_list(&cluster.remotes()).unwrap(), NB, TABLES);
    cfg.leader_only = leader_only;
    cfg.min_backoff = Duration::from_millis(20);
    cfg.max_backoff = Duration::from_millis(500);
    let (cache, events) = Cache::start(cfg);
    tokio::time::timeout(Duration::from_secs(30), cache.wait_until_ready())
        .await
        .unwrap();
    let leader = cluster.leader().unwrap();
    let follower = (leader + 1) % 3;
    let (w, _) = client(&cluster.members[follower].unix_remote()).await;
    Setup {
        cluster,
        cache,
        events,
        replay: Replay::default(),
        leader,
        follower,
        w,
    }
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

async fn check(s: &mut Setup, expect_switches: usize) {
    let want = settle(&s.cache, &s.w).await;
    assert_eq!(want["Logical_Switch"].len(), expect_switches);
    s.replay.drain(&mut s.events);
    assert!(s.replay.ready);
    assert_eq!(
        s.replay.contents(),
        want,
        "the events do not replay to the contents"
    );
}

#[tokio::test]
async fn leadership_handed_over_keeps_the_cache_and_the_writes_going() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut s = setup(true).await;
    write_all(&s.w, &names("a", 10)).await;
    s.cluster.members[s.leader]
        .appctl(&["cluster/failure-test", "transfer-leadership"])
        .unwrap();
    write_all(&s.w, &names("b", 10)).await;
    check(&mut s, 20).await;
    let mut moved = false;
    for _ in 0..100 {
        if s.cluster.leader().is_some_and(|l| l != s.leader) {
            moved = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(moved, "leadership did not move");
    // The leader-only cache now reads from the new leader.
    write_all(&s.w, &names("c", 5)).await;
    check(&mut s, 25).await;
}

#[tokio::test]
async fn a_leader_that_leaves_the_cluster_is_followed_by_the_cache() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut s = setup(true).await;
    write_all(&s.w, &names("a", 5)).await;
    s.cluster.members[s.leader]
        .appctl(&["cluster/leave", NB])
        .unwrap();
    write_all(&s.w, &names("b", 5)).await;
    check(&mut s, 10).await;
}

#[tokio::test]
async fn a_restarted_member_catches_up_and_the_cache_stays_whole() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut s = setup(false).await;
    let other = (s.leader + 2) % 3;
    write_all(&s.w, &names("a", 5)).await;
    s.cluster.members[other].kill();
    write_all(&s.w, &names("b", 5)).await;
    s.cluster.members[other].restart().unwrap();
    write_all(&s.w, &names("c", 5)).await;
    check(&mut s, 15).await;
    // The restarted member has everything too.
    let (r, _) = client(&s.cluster.members[other].unix_remote()).await;
    let mut caught_up = false;
    for _ in 0..100 {
        let rows = r
            .transact(NB, &[Operation::select("Logical_Switch", vec![])])
            .await
            .unwrap();
        if rows[0].rows().unwrap().len() == 15 {
            caught_up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(caught_up);
}

/// The outcome a client reported for an insert must agree with what happened: success
/// means the row exists, a definite failure means it does not, "unknown" allows either.
async fn crash_point(scenario: &str, on_leader: bool) {
    let mut s = setup(false).await;
    let target = if on_leader { s.leader } else { s.follower };
    // The client talks to a follower, which forwards its transaction to the leader.
    s.cluster.members[target]
        .appctl(&["cluster/failure-test", scenario])
        .unwrap();
    let outcome = tokio::time::timeout(
        Duration::from_secs(30),
        s.w.transact(NB, &insert_unless_named("in-flight")),
    )
    .await;

    // The scenario fired: the member it was set on crashed.
    let down = |i: usize, c: &Cluster| c.members[i].appctl(&["cluster/status", NB]).is_err();
    assert!(
        down(target, &s.cluster),
        "{scenario}: member {target} did not crash; outcome {outcome:?}"
    );
    // Bring the crashed member back and let the cluster settle; write through a
    // member that stayed up.
    for i in 0..3 {
        if down(i, &s.cluster) {
            s.cluster.members[i].restart().unwrap();
        }
    }
    s.cluster.wait_connected().unwrap();
    let survivor = (0..3).find(|i| !down(*i, &s.cluster)).unwrap();
    s.w = client(&s.cluster.members[survivor].unix_remote()).await.0;
    write_all(&s.w, &names("after", 1)).await;
    let want = settle(&s.cache, &s.w).await;
    let exists = want["Logical_Switch"]
        .values()
        .any(|r| r["name"] == Datum::scalar("in-flight"));
    match outcome {
        Ok(Ok(_)) => assert!(
            exists,
            "{scenario}: reported success, but the row is not there"
        ),
        Ok(Err(e)) if e.is_outcome_unknown() => {}
        Ok(Err(e)) => assert!(
            !exists,
            "{scenario}: reported failure ({e}), but the row is there"
        ),
        Err(_) => panic!("{scenario}: the transaction never finished"),
    }
    s.replay.drain(&mut s.events);
    assert_eq!(
        s.replay.contents(),
        want,
        "{scenario}: the events do not replay to the contents"
    );
}

#[tokio::test]
async fn a_follower_crashing_before_forwarding_a_transaction() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    crash_point("crash-before-sending-execute-command-request", false).await;
}

#[tokio::test]
async fn a_follower_crashing_after_forwarding_a_transaction() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    crash_point("crash-after-sending-execute-command-request", false).await;
}

#[tokio::test]
async fn a_leader_crashing_before_answering_a_forwarded_transaction() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    crash_point("crash-before-sending-execute-command-reply", true).await;
}

#[tokio::test]
async fn a_leader_crashing_after_answering_a_forwarded_transaction() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    crash_point("crash-after-sending-execute-command-reply", true).await;
}

/// A one-member cluster, a cache of it (every member), and a client.
async fn single() -> (Cluster, Cache, CacheEvents, Client) {
    single_with(|_| {}).await
}

/// [`single`], its cache's configuration changed by `adjust`.
async fn single_with(
    adjust: impl FnOnce(&mut CacheConfig),
) -> (Cluster, Cache, CacheEvents, Client) {
    let install = Installation::recent().unwrap();
    let cluster = Cluster::start(&install, 1, None).unwrap();
    let mut cfg = CacheConfig::new(Remote::parse_list(&cluster.remotes()).unwrap(), NB, TABLES);
    cfg.min_backoff = Duration::from_millis(20);
    cfg.max_backoff = Duration::from_millis(200);
    adjust(&mut cfg);
    let (cache, events) = Cache::start(cfg);
    tokio::time::timeout(Duration::from_secs(30), cache.wait_until_ready())
        .await
        .unwrap();
    let (w, _) = client(&cluster.members[0].unix_remote()).await;
    (cluster, cache, events, w)
}

#[tokio::test]
async fn a_cluster_rebuilt_from_scratch_is_used_although_its_raft_index_is_lower() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    let (mut cluster, cache, mut events, w) = single().await;
    // One transaction each: the raft index climbs past 20.
    write_all(&w, &names("old", 20)).await;
    settle(&cache, &w).await;
    let mut replay = Replay::default();
    replay.drain(&mut events);

    // A new cluster (new cluster id, index started over) on the same addresses.
    cluster.recreate().unwrap();
    let (w, _) = client(&cluster.members[0].unix_remote()).await;
    write_all(&w, &names("new", 1)).await;
    let want = settle(&cache, &w).await;
    assert_eq!(want["Logical_Switch"].len(), 1);
    replay.drain(&mut events);
    assert_eq!(
        replay.contents(),
        want,
        "the events replay to the new contents"
    );
    assert!(
        !replay.reasons.contains(&UnusableReason::Behind),
        "the new cluster was refused: {:?}",
        replay.unusable
    );
}

/// A one-member cluster and its cache (behind for at most `limit`, reset then if
/// `reset`), 2 switches written, a backup of the member taken, 20 more written, the
/// backup restored: the member, of the same cluster, is twenty transactions behind
/// the cache. The member's client and the events so far.
async fn restored_from_a_backup(
    limit: Duration,
    reset: bool,
) -> (Cluster, Cache, CacheEvents, Replay, Client) {
    let (mut cluster, cache, mut events, w) = single_with(|c| {
        c.behind_limit = limit;
        c.reset_when_behind = reset;
    })
    .await;
    write_all(&w, &names("kept", 2)).await;
    settle(&cache, &w).await;
    let mut replay = Replay::default();
    replay.drain(&mut events);
    drop(w);

    // A backup of the member's database, taken while it is stopped.
    let member = &mut cluster.members[0];
    let db = member.installation().host_path(member.db_path());
    let backup = db.with_extension("backup");
    member.stop();
    std::fs::copy(&db, &backup).unwrap();
    member.restart().unwrap();
    let (w, _) = client(&member.unix_remote()).await;
    write_all(&w, &names("lost", 20)).await;
    settle(&cache, &w).await;
    replay.drain(&mut events);
    drop(w);

    // Restored: the same cluster, twenty transactions back.
    member.stop();
    std::fs::copy(&backup, &db).unwrap();
    member.restart().unwrap();
    let (w, _) = client(&member.unix_remote()).await;
    (cluster, cache, events, replay, w)
}

#[tokio::test]
async fn a_cluster_restored_from_a_backup_is_refused_and_reported_until_the_index_is_reset() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    let limit = Duration::from_secs(1);
    let (_cluster, cache, mut events, mut replay, w) = restored_from_a_backup(limit, false).await;
    let mut reported = false;
    for _ in 0..200 {
        replay.drain(&mut events);
        if replay.reasons.contains(&UnusableReason::Behind) {
            reported = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(reported, "no refusal reported: {:?}", replay.unusable);
    assert_eq!(
        cache.snapshot().table("Logical_Switch").len(),
        22,
        "a refused server's contents are not taken"
    );
    // Refused past the limit: said once for the whole cache, and it stays as it is.
    let said = tokio::time::timeout(limit * 10, async {
        loop {
            replay.drain(&mut events);
            if let Some((remote, e)) = replay
                .unusable
                .iter()
                .find(|(_, e)| e.contains("none was synced"))
            {
                return (remote.clone(), e.clone());
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await
    .expect("the cache never said every server has been behind");
    assert!(
        said.1.contains("Cache::reset_raft_index() takes theirs"),
        "{said:?}"
    );
    tokio::time::sleep(limit * 2).await;
    replay.drain(&mut events);
    assert_eq!(
        replay
            .reasons
            .iter()
            .filter(|r| **r == UnusableReason::EveryServerBehind)
            .count(),
        1,
        "said once"
    );
    assert_eq!(cache.snapshot().table("Logical_Switch").len(), 22);

    // The caller knows better: the index is forgotten and the cache resyncs.
    cache.reset_raft_index().await.unwrap();
    let want = settle(&cache, &w).await;
    assert_eq!(want["Logical_Switch"].len(), 2);
    replay.drain(&mut events);
    assert_eq!(replay.contents(), want);
}

#[tokio::test]
async fn a_cache_told_to_reset_when_behind_takes_the_restored_clusters_contents() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    let limit = Duration::from_secs(1);
    let (_cluster, cache, mut events, mut replay, w) = restored_from_a_backup(limit, true).await;
    let started = std::time::Instant::now();
    let want = settle(&cache, &w).await;
    let took = started.elapsed();
    assert_eq!(want["Logical_Switch"].len(), 2, "the restored contents");
    assert!(took >= limit, "synced before the limit: {took:?}");
    replay.drain(&mut events);
    assert_eq!(replay.contents(), want);
    let said: Vec<_> = replay
        .unusable
        .iter()
        .filter(|(_, e)| e.contains("none was synced"))
        .collect();
    assert_eq!(said.len(), 1, "{:?}", replay.unusable);
    assert!(
        said[0].1.contains("the raft index is forgotten"),
        "{said:?}"
    );
}
