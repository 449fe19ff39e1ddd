//! A large reply is held once: its bytes go to the decoder as they arrive instead of
//! piling up in the read buffer and again in transit. One test in this binary, so
//! that the process's peak memory is this test's.

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use ovsdb_proto::codec::JsonRpcCodec;
use ovsdb_proto::{connect_with, ConnectOptions, Remote};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixListener;
use tokio_util::codec::FramedRead;

mod common;
use common::text;

/// The process's peak resident memory, in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .unwrap()
        .to_owned();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

const MIB: usize = 1 << 20;

/// Answers one request with a result of `size` bytes (an array of 1 KiB strings),
/// written 1 MiB at a time.
async fn serve_big(listener: UnixListener, size: usize) {
    let (stream, _) = listener.accept().await.unwrap();
    let (read, mut write) = stream.into_split();
    let mut frames = FramedRead::new(read, JsonRpcCodec::default());
    let msg = frames.next().await.unwrap().unwrap();
    let id = text(msg.member("id"));
    let element = format!("\"{}\"", "x".repeat(1022));
    let per_write = MIB / (element.len() + 1);
    let mut written = 0;
    write
        .write_all(format!("{{\"id\":{id},\"result\":[").as_bytes())
        .await
        .unwrap();
    let mut first = true;
    while written < size {
        let mut chunk = String::with_capacity(MIB + 1024);
        for _ in 0..per_write {
            if !first {
                chunk.push(',');
            }
            first = false;
            chunk.push_str(&element);
        }
        written += chunk.len();
        if write.write_all(chunk.as_bytes()).await.is_err() {
            return;
        }
    }
    let _ = write.write_all(b"],\"error\":null}").await;
    // Keep the connection until the client leaves.
    while frames.next().await.is_some() {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_reply_decoded_while_it_arrives_is_not_buffered_whole() {
    let size = 128 * MIB;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let server = tokio::spawn(serve_big(listener, size));
    let options = ConnectOptions {
        max_message_size: 512 * MIB,
        ..ConnectOptions::default()
    };
    let (client, _notes) = connect_with(&Remote::Unix(path), &options).await.unwrap();
    let before = peak_rss();
    // Counts the elements and keeps none: whatever memory the call takes is the
    // connection's.
    let n = tokio::time::timeout(
        Duration::from_secs(60),
        client.call_decoding("big", Bytes::from_static(b"[]"), Count),
    )
    .await
    .unwrap()
    .unwrap();
    let grew = peak_rss().saturating_sub(before);
    assert!(n * 1024 >= size, "{n} elements");
    assert!(
        grew < 48 * MIB as u64,
        "a {} MiB reply raised peak memory by {} MiB",
        size / MIB,
        grew / MIB as u64
    );
    drop(client);
    server.abort();
}

/// Counts the elements of an array.
struct Count;

impl<'de> serde::de::DeserializeSeed<'de> for Count {
    type Value = usize;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Count {
    type Value = usize;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an array")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
        let mut n = 0;
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
            n += 1;
        }
        Ok(n)
    }
}
