//! Reconnect delays: a session that synced and then lost its connection is a healthy
//! one; the reconnect after it waits the minimum backoff, however many healthy
//! sessions came before. Played by a server that syncs each client, then hangs up.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ovsdb_proto::cache::{Cache, CacheConfig};
use ovsdb_proto::Remote;
use serde_json::json;
use tokio::net::UnixListener;

mod common;

/// Accepts connections, syncs each client (plain `monitor`, as an old server), and
/// hangs up 50 ms later; records when each connection came and when it was closed.
async fn hang_up_after_sync(listener: UnixListener, times: Arc<Mutex<Vec<(Instant, Instant)>>>) {
    loop {
        let (stream, _) = listener.accept().await.unwrap();
        let came = Instant::now();
        common::serve_old(stream, json!({}), async |_, _| {
            tokio::time::sleep(Duration::from_millis(50)).await;
            false
        })
        .await;
        times.lock().unwrap().push((came, Instant::now()));
    }
}

#[tokio::test]
async fn after_a_healthy_session_the_reconnect_waits_the_minimum_backoff() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let times = Arc::new(Mutex::new(Vec::new()));
    let server = tokio::spawn(hang_up_after_sync(listener, times.clone()));

    let mut config = CacheConfig::new(vec![Remote::Unix(path)], "DB", &["T"]);
    config.min_backoff = Duration::from_millis(50);
    config.max_backoff = Duration::from_secs(8);
    let (cache, _) = Cache::start(config);
    let start = Instant::now();
    while times.lock().unwrap().len() < 10 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "reconnects too slow: {:?}",
            gaps(&times.lock().unwrap())
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let gaps = gaps(&times.lock().unwrap());
    // Each wait is the minimum (50 ms) plus the time to connect; growing backoff would
    // reach seconds within these ten sessions.
    assert!(
        gaps.iter().all(|g| *g < Duration::from_millis(500)),
        "{gaps:?}"
    );
    assert!(
        cache.stats().connections() > gaps.len() as u64,
        "every session synced"
    );
    drop(cache);
    server.abort();
}

/// From each hang-up to the next connection.
fn gaps(times: &[(Instant, Instant)]) -> Vec<Duration> {
    times.windows(2).map(|w| w[1].0 - w[0].1).collect()
}

/// Answers every `monitor`, then cancels it at once, and also sends a cancel of a
/// monitor id the client never created; records each connection and each monitor.
async fn cancel_every_monitor(listener: UnixListener, seen: Arc<Mutex<(usize, usize)>>) {
    loop {
        let (stream, _) = listener.accept().await.unwrap();
        seen.lock().unwrap().0 += 1;
        let seen = seen.clone();
        tokio::spawn(common::serve_old(
            stream,
            json!({}),
            async move |params, write| {
                seen.lock().unwrap().1 += 1;
                for mid in [json!("not-this-clients"), params[1].clone()] {
                    if !common::notify(write, "monitor_canceled", json!([mid])).await {
                        return false;
                    }
                }
                true
            },
        ));
    }
}

#[tokio::test]
async fn a_server_that_cancels_every_monitor_is_asked_again_ever_more_slowly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let seen = Arc::new(Mutex::new((0, 0)));
    let server = tokio::spawn(cancel_every_monitor(listener, seen.clone()));

    let mut config = CacheConfig::new(vec![Remote::Unix(path)], "DB", &["T"]);
    config.min_backoff = Duration::from_millis(50);
    config.max_backoff = Duration::from_secs(8);
    let (cache, _) = Cache::start(config);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (connections, monitors) = *seen.lock().unwrap();
    // Backing off from 50 ms and doubling, two seconds hold at most about six; asking
    // again at once would make thousands.
    assert!((2..=10).contains(&monitors), "{monitors} monitors in 2 s");
    // The cancel of a monitor it does not have is ignored: one connection all along.
    assert_eq!(connections, 1);
    drop(cache);
    server.abort();
}
