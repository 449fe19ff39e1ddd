//! Rows whose values do not fit their columns, from servers played here: the cache
//! takes none of them, says where they were, resyncs, and prefers a server that sends
//! good rows.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ovsdb_proto::cache::{Cache, CacheConfig, CacheEvent, CacheEvents};
use ovsdb_proto::{Datum, Remote};
use serde_json::{json, Value};
use tokio::net::UnixListener;

mod common;

const A: &str = "00000000-0000-0000-0000-00000000000a";
const B: &str = "00000000-0000-0000-0000-00000000000b";

/// How a played server behaves after it answered `monitor` with `initial`.
#[derive(Clone, Copy)]
enum After {
    /// Keeps the connection until the client leaves.
    Stay,
    /// Hangs up 50 ms later.
    HangUp,
    /// Sends this update (plain `monitor` form) and stays.
    Update(fn() -> Value),
}

/// An old server (plain `monitor`) of `DB` with table `T` (`name`: string); counts
/// connections and monitors.
fn serve(initial: Value, after: After) -> (Remote, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let dir = tempfile::tempdir().unwrap().keep();
    let path = dir.join("db.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let monitors = Arc::new(AtomicUsize::new(0));
    let (c, m) = (connections.clone(), monitors.clone());
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            c.fetch_add(1, Ordering::SeqCst);
            let (m, initial) = (m.clone(), initial.clone());
            tokio::spawn(common::serve_old(
                stream,
                initial,
                async move |params, write| {
                    m.fetch_add(1, Ordering::SeqCst);
                    match after {
                        After::Stay => true,
                        After::HangUp => {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            false
                        }
                        After::Update(update) => {
                            common::notify(write, "update", json!([params[1], update()])).await
                        }
                    }
                },
            ));
        }
    });
    (Remote::Unix(path), connections, monitors)
}

fn config(remotes: Vec<Remote>) -> CacheConfig {
    let mut config = CacheConfig::new(remotes, "DB", &["T"]);
    config.min_backoff = Duration::from_millis(20);
    config.max_backoff = Duration::from_millis(200);
    config
}

/// The errors of the unusable-server events waiting.
fn unusable(events: &mut CacheEvents) -> Vec<String> {
    let mut errors = Vec::new();
    while let Some(e) = events.try_recv() {
        if let CacheEvent::Unusable { error, .. } = e {
            errors.push(error);
        }
    }
    errors
}

#[tokio::test]
async fn a_server_sending_a_row_that_does_not_fit_is_not_used_and_comes_after_a_good_one() {
    let (bad, bad_connections, _) = serve(json!({"T": {A: {"new": {"name": 5}}}}), After::Stay);
    let (good, good_connections, _) =
        serve(json!({"T": {B: {"new": {"name": "b"}}}}), After::HangUp);
    let (cache, mut events) = Cache::start(config(vec![bad, good]));
    tokio::time::timeout(Duration::from_secs(5), cache.wait_until_ready())
        .await
        .unwrap();
    // The good server hangs up after each sync: the cache reconnects, to it each time.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let snap = cache.snapshot();
    let rows = snap.table("T");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        rows[&B.parse::<ovsdb_proto::Uuid>().unwrap()]["name"],
        Datum::scalar("b")
    );
    let good_n = good_connections.load(Ordering::SeqCst);
    let bad_n = bad_connections.load(Ordering::SeqCst);
    assert!(good_n >= 5, "{good_n} connections to the good server");
    assert_eq!(bad_n, 1, "the bad server was tried again ({good_n} good)");
    let errors = unusable(&mut events);
    assert!(
        errors
            .iter()
            .any(|e| e.contains(&format!("table T row {A} column name"))
                && e.contains("expected string")),
        "{errors:?}"
    );
}

#[tokio::test]
async fn an_update_that_does_not_fit_is_not_applied_and_the_cache_resyncs() {
    let (server, _, monitors) = serve(
        json!({"T": {B: {"new": {"name": "b"}}}}),
        After::Update(
            || json!({"T": {B: {"old": {"name": "b"}, "new": {"name": ["set", ["x", "y"]]}}}}),
        ),
    );
    let (cache, mut events) = Cache::start(config(vec![server]));
    tokio::time::timeout(Duration::from_secs(5), cache.wait_until_ready())
        .await
        .unwrap();
    let mut resynced = false;
    for _ in 0..100 {
        let rows = cache.snapshot().table("T");
        assert_eq!(
            rows[&B.parse::<ovsdb_proto::Uuid>().unwrap()]["name"],
            Datum::scalar("b")
        );
        if monitors.load(Ordering::SeqCst) >= 3 {
            resynced = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(resynced, "the cache did not ask again");
    let errors = unusable(&mut events);
    assert!(
        errors
            .iter()
            .any(|e| e.contains(&format!("table T row {B} column name"))
                && e.contains("has 2 elements")),
        "{errors:?}"
    );
}
