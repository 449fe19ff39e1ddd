//! What the tests that play a server share: reading a member, and the answers of a
//! pre-2.9 ovsdb-server holding database `DB` with one table `T`.

#![allow(dead_code)]

use bytes::Bytes;
use serde_json::{json, Value};

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
