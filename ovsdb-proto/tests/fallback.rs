//! The cache against an old server that has neither `_Server`, `monitor_cond_since`
//! nor `monitor_cond` (as before Open vSwitch 2.9): it falls back to plain `monitor`.
//! No such ovsdb-server is packaged any more, so this one is played over a unix socket.

use std::time::Duration;

use ovsdb_proto::cache::{Cache, CacheConfig, CacheEvent, Change};
use ovsdb_proto::{Datum, Remote};
use serde_json::json;
use tokio::net::UnixListener;

mod common;

const A: &str = "00000000-0000-0000-0000-00000000000a";
const B: &str = "00000000-0000-0000-0000-00000000000b";

/// Serves one connection as a pre-2.9 ovsdb-server would.
async fn old_server(listener: UnixListener) {
    let (stream, _) = listener.accept().await.unwrap();
    let initial = json!({"T": {A: {"new": {"name": "a"}}}});
    common::serve_old(stream, initial, async |params, write| {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let update = json!({"T": {B: {"new": {"name": "b"}}, A: {"old": {"name": "a"}, "new": {"name": "a2"}}}});
        common::notify(write, "update", json!([params[1], update])).await
    })
    .await;
}

#[tokio::test]
async fn an_old_server_is_followed_with_plain_monitor() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let server = tokio::spawn(old_server(listener));

    let remote = Remote::Unix(path);
    let (cache, mut events) = Cache::start(CacheConfig::new(vec![remote], "DB", &["T"]));
    tokio::time::timeout(Duration::from_secs(10), cache.wait_until_ready())
        .await
        .unwrap();
    let a = A.parse().unwrap();
    assert_eq!(
        cache.snapshot().get("T", &a).unwrap()["name"],
        Datum::scalar("a")
    );

    let mut seen = Vec::new();
    while seen.len() < 3 {
        let e = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .unwrap()
            .unwrap();
        if let CacheEvent::Change(e) = e {
            seen.push(e);
        }
    }
    assert!(
        matches!(seen[0].change, Change::Insert { .. }),
        "the initial row"
    );
    let later: Vec<_> = seen[1..]
        .iter()
        .map(|e| (e.uuid.to_string(), &e.change))
        .collect();
    assert!(
        later
            .iter()
            .any(|(u, c)| u == B && matches!(c, Change::Insert { .. })),
        "{later:?}"
    );
    assert!(
        later.iter().any(|(u, c)| u == A
            && matches!(c, Change::Modify { new, .. } if new["name"] == Datum::scalar("a2"))),
        "{later:?}"
    );
    drop(cache);
    server.abort();
}
