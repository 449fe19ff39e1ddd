//! What the tests that play a server share: reading a member, and the answers of a
//! pre-2.9 ovsdb-server holding database `DB` with one table `T`, and a connection
//! served as one.

#![allow(dead_code)]

use bytes::Bytes;
use futures_util::StreamExt;
use ovsdb_proto::codec::JsonRpcCodec;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::UnixStream;
use tokio_util::codec::FramedRead;

/// A member of a message as JSON (null when absent).
pub fn text(b: Option<Bytes>) -> Value {
    b.map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap_or(Value::Null)
}

/// The `(result, error)` an old server (no `_Server`, plain `monitor`) answers to
/// `method` with `params`; a `monitor` gets `initial` as its initial contents.
pub fn old_server_answer(method: &str, params: &Value, initial: Value) -> (Value, Value) {
    match (method, params[0].as_str()) {
        ("get_schema", Some("DB")) => (
            json!({"name": "DB", "version": "1.0.0", "tables": {"T": {"columns": {"name": {"type": "string"}}}}}),
            Value::Null,
        ),
        ("get_schema", _) => (Value::Null, json!({"error": "unknown database"})),
        ("monitor", _) => (initial, Value::Null),
        ("echo", _) => (params.clone(), Value::Null),
        _ => (Value::Null, json!({"error": "unknown method"})),
    }
}

/// Serves one connection as an old server holding `initial`: answers every request as
/// [`old_server_answer`] does; after answering a `monitor` it calls `after_monitor`
/// with the monitor's params and the write half, which may write more (see [`notify`])
/// and says whether to go on. Ends when the client leaves or `after_monitor` says so.
pub async fn serve_old<F>(stream: UnixStream, initial: Value, mut after_monitor: F)
where
    F: AsyncFnMut(&Value, &mut OwnedWriteHalf) -> bool,
{
    let (read, mut write) = stream.into_split();
    let mut frames = FramedRead::new(read, JsonRpcCodec::default());
    while let Some(Ok(msg)) = frames.next().await {
        let method = text(msg.member("method"));
        let params = text(msg.member("params"));
        let (result, error) =
            old_server_answer(method.as_str().unwrap_or(""), &params, initial.clone());
        let reply = json!({"id": text(msg.member("id")), "result": result, "error": error});
        if write.write_all(reply.to_string().as_bytes()).await.is_err() {
            return;
        }
        if method == "monitor" && !after_monitor(&params, &mut write).await {
            return;
        }
    }
}

/// Sends a notification; false when the client is gone.
pub async fn notify(write: &mut OwnedWriteHalf, method: &str, params: Value) -> bool {
    let note = json!({"id": null, "method": method, "params": params});
    write.write_all(note.to_string().as_bytes()).await.is_ok()
}
