//! A server on a slow link: a reply that takes longer than the inactivity probe to
//! arrive is still activity (any byte is, as in OVS), so the connection is not killed
//! and the request re-sent forever.

use std::time::Duration;

use futures_util::StreamExt;
use ovsdb_proto::codec::JsonRpcCodec;
use ovsdb_proto::{ConnectOptions, Remote};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixListener;
use tokio_util::codec::FramedRead;

/// Answers the first request with its params, in pieces of `piece(reply length)`
/// bytes `pause` apart; answers nothing else and keeps the connection open.
async fn answer_slowly(listener: UnixListener, piece: fn(usize) -> usize, pause: Duration) {
    let (stream, _) = listener.accept().await.unwrap();
    let (read, mut write) = stream.into_split();
    let mut frames = FramedRead::new(read, JsonRpcCodec::default());
    let Some(Ok(msg)) = frames.next().await else {
        return;
    };
    let id: Value = serde_json::from_slice(&msg.member("id").unwrap()).unwrap();
    let params: Value = serde_json::from_slice(&msg.member("params").unwrap()).unwrap();
    let reply = json!({"id": id, "result": params, "error": null}).to_string();
    let bytes = reply.as_bytes();
    for chunk in bytes.chunks(piece(bytes.len())) {
        if write.write_all(chunk).await.is_err() {
            return;
        }
        tokio::time::sleep(pause).await;
    }
    // Whatever comes next (probes) goes unanswered.
    while let Some(Ok(_)) = frames.next().await {}
}

/// 40 pieces 50 ms apart: 2 s in all.
async fn trickle(listener: UnixListener) {
    answer_slowly(listener, |n| n.div_ceil(40), Duration::from_millis(50)).await
}

#[tokio::test]
async fn a_reply_slower_than_the_probe_interval_is_not_a_dead_server() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slow.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let server = tokio::spawn(trickle(listener));

    let options = ConnectOptions {
        inactivity_probe: Some(Duration::from_millis(200)),
        ..ConnectOptions::default()
    };
    let (client, _notes) = ovsdb_proto::connect_with(&Remote::Unix(path), &options)
        .await
        .unwrap();
    let padding = "x".repeat(4000);
    let got = tokio::time::timeout(Duration::from_secs(10), client.echo(&json!([padding])))
        .await
        .expect("the reply came")
        .expect("the connection held while the reply arrived");
    assert_eq!(got, json!([padding]));
    server.abort();
}

/// Sends `echo` requests as fast as it can and never reads a byte.
async fn deaf_echoer(listener: UnixListener) {
    let (stream, _) = listener.accept().await.unwrap();
    let (_read, mut write) = stream.into_split();
    for n in 0u64.. {
        let req = json!({"id": format!("e{n}"), "method": "echo", "params": ["x"]}).to_string();
        if write.write_all(req.as_bytes()).await.is_err() {
            return;
        }
    }
}

#[tokio::test]
async fn a_server_that_never_reads_cannot_make_the_client_buffer_without_bound() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deaf.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let server = tokio::spawn(deaf_echoer(listener));

    let options = ConnectOptions {
        max_unsent: 1 << 20,
        inactivity_probe: None,
        ..ConnectOptions::default()
    };
    let (client, _notes) = ovsdb_proto::connect_with(&Remote::Unix(path), &options)
        .await
        .unwrap();
    let e = tokio::time::timeout(Duration::from_secs(20), client.closed())
        .await
        .expect("the connection fails once the unsent replies pass the limit");
    assert!(e.to_string().contains("the server is not reading"), "{e}");
    server.abort();
}

/// Answers `echo` at once and `list_dbs` only after 1 s.
async fn slow_list_dbs(listener: UnixListener) {
    let (stream, _) = listener.accept().await.unwrap();
    let (read, write) = stream.into_split();
    let write = std::sync::Arc::new(tokio::sync::Mutex::new(write));
    let mut frames = FramedRead::new(read, JsonRpcCodec::default());
    while let Some(Ok(msg)) = frames.next().await {
        let method: Value = serde_json::from_slice(&msg.member("method").unwrap()).unwrap();
        let id: Value = serde_json::from_slice(&msg.member("id").unwrap()).unwrap();
        let params: Value = serde_json::from_slice(&msg.member("params").unwrap()).unwrap();
        let write = write.clone();
        tokio::spawn(async move {
            let result = if method == "list_dbs" {
                tokio::time::sleep(Duration::from_secs(1)).await;
                json!(["DB"])
            } else {
                params
            };
            let reply = json!({"id": id, "result": result, "error": null}).to_string();
            let _ = write.lock().await.write_all(reply.as_bytes()).await;
        });
    }
}

#[tokio::test]
async fn a_request_times_out_and_its_late_reply_does_not_break_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slow.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let server = tokio::spawn(slow_list_dbs(listener));

    let options = ConnectOptions {
        request_timeout: Some(Duration::from_millis(300)),
        inactivity_probe: None,
        ..ConnectOptions::default()
    };
    let (client, _notes) = ovsdb_proto::connect_with(&Remote::Unix(path), &options)
        .await
        .unwrap();
    let t = std::time::Instant::now();
    let e = client.list_dbs().await.unwrap_err();
    assert!(
        t.elapsed() < Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    assert!(e.is_outcome_unknown(), "{e:?}");
    assert!(
        e.to_string().contains("no reply to list_dbs within 300ms"),
        "{e}"
    );
    // The late reply comes and is dropped; the connection still serves.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        client.echo(&json!(["still"])).await.unwrap(),
        json!(["still"])
    );
    server.abort();
}

/// One byte every 50 ms: 20 bytes a second, for ever in practice.
async fn byte_by_byte(listener: UnixListener) {
    answer_slowly(listener, |_| 1, Duration::from_millis(50)).await
}

/// A client of `byte_by_byte` with a 200 ms probe and `min_receive_rate`, and its echo
/// of 4000 bytes (200 s at that pace) in flight.
async fn trickled(
    min_receive_rate: Option<u64>,
    wait: Duration,
) -> Result<Result<Value, ovsdb_proto::Error>, tokio::time::error::Elapsed> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trickle.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let server = tokio::spawn(byte_by_byte(listener));
    let options = ConnectOptions {
        inactivity_probe: Some(Duration::from_millis(200)),
        min_receive_rate,
        ..ConnectOptions::default()
    };
    let (client, _notes) = ovsdb_proto::connect_with(&Remote::Unix(path), &options)
        .await
        .unwrap();
    let got = tokio::time::timeout(wait, client.echo(&json!(["x".repeat(4000)]))).await;
    server.abort();
    got
}

#[tokio::test]
async fn a_server_trickling_a_reply_is_cut_off_by_the_minimum_rate() {
    // Issue 19, item 2: every byte counted as life for the probe, so a reply sent a
    // byte at a time held the request for ever.
    let t = std::time::Instant::now();
    let e = trickled(
        ConnectOptions::default().min_receive_rate,
        Duration::from_secs(10),
    )
    .await
    .expect("the rule ends it long before 10 s")
    .unwrap_err();
    let took = t.elapsed();
    eprintln!("cut off after {took:?}: {e}");
    assert!(e.is_outcome_unknown(), "{e}");
    assert!(e.to_string().contains("min_receive_rate"), "{e}");
    // Two slow 200 ms intervals in a row.
    assert!(took < Duration::from_secs(2), "{took:?}");
    // Without the rule the same request is still waiting after 2 s.
    assert!(trickled(None, Duration::from_secs(2)).await.is_err());
}
