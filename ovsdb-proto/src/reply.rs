//! What the server answers besides results: its errors, and the decoding of a
//! `transact` reply into per-operation results or the refused transaction.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::datum::{Datum, Row};
use crate::ops::OperationResult;

/// An error the server sent in reply to a request: `{"error": E, "details": D}` (or a
/// bare string, as for `canceled`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerError {
    /// The short error name, e.g. `unknown database`, `constraint violation`.
    pub error: String,
    /// The server's longer explanation, when it gave one.
    pub details: Option<String>,
    /// The error exactly as received.
    pub raw: serde_json::Value,
}

impl ServerError {
    /// Reads an error from the `error` member of a reply or of a transaction result.
    pub fn from_json(raw: serde_json::Value) -> ServerError {
        let (error, details) = match &raw {
            serde_json::Value::String(s) => (s.clone(), None),
            serde_json::Value::Object(o) => (
                o.get("error")
                    .and_then(|e| e.as_str())
                    .map(str::to_owned)
                    .unwrap_or_else(|| raw.to_string()),
                o.get("details").and_then(|d| d.as_str()).map(str::to_owned),
            ),
            other => (other.to_string(), None),
        };
        ServerError {
            error,
            details,
            raw,
        }
    }
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.error)?;
        if let Some(d) = &self.details {
            write!(f, ": {d}")?;
        }
        Ok(())
    }
}

/// A transaction that the server refused: which operation failed (or none, for an error
/// found at commit such as a constraint or referential integrity violation), the server's
/// error, and the results of the operations before it.
#[derive(Clone, Debug, PartialEq)]
pub struct TransactionError {
    /// Index of the failing operation; `None` when the error came after all operations
    /// (found when committing).
    pub operation: Option<usize>,
    /// Number of operations in the transaction.
    pub operations: usize,
    /// The server's error.
    pub error: ServerError,
    /// Results of the operations that succeeded before the failure.
    pub results: Vec<OperationResult>,
}

impl fmt::Display for TransactionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.operation {
            Some(i) => write!(
                f,
                "transaction failed at operation {} of {}: {}",
                i, self.operations, self.error
            ),
            None => write!(f, "transaction failed at commit: {}", self.error),
        }
    }
}

/// One element of a transact reply: a result, an error, or null (not run).
enum Slot {
    Ok(OperationResult),
    Err(ServerError),
    NotRun,
}

impl<'de> Deserialize<'de> for Slot {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Slot, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Slot;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an operation result object or null")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Slot, E> {
                Ok(Slot::NotRun)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Slot, A::Error> {
                let mut uuid = None;
                let mut rows = None;
                let mut count = None;
                let mut error = None;
                let mut details = None;
                let mut other = serde_json::Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "uuid" => {
                            let d: Datum = map.next_value()?;
                            uuid =
                                Some(d.as_scalar().and_then(|a| a.as_uuid()).ok_or_else(|| {
                                    de::Error::custom(format_args!(
                                        "insert result uuid {d} is not a uuid"
                                    ))
                                })?);
                        }
                        "rows" => rows = Some(map.next_value::<Vec<Row>>()?),
                        "count" => count = Some(map.next_value::<u64>()?),
                        "error" => error = Some(map.next_value::<serde_json::Value>()?),
                        "details" => details = Some(map.next_value::<serde_json::Value>()?),
                        _ => {
                            let v: serde_json::Value = map.next_value()?;
                            other.insert(key, v);
                        }
                    }
                }
                if let Some(e) = error {
                    let mut raw = other;
                    raw.insert("error".into(), e);
                    if let Some(d) = details {
                        raw.insert("details".into(), d);
                    }
                    return Ok(Slot::Err(ServerError::from_json(
                        serde_json::Value::Object(raw),
                    )));
                }
                Ok(Slot::Ok(match (uuid, rows, count) {
                    (Some(uuid), None, None) => OperationResult::Insert { uuid },
                    (None, Some(rows), None) => OperationResult::Select { rows },
                    (None, None, Some(c)) => OperationResult::Count(c),
                    (None, None, None) => OperationResult::Empty,
                    _ => {
                        return Err(de::Error::custom(
                            "operation result mixes uuid, rows and count",
                        ))
                    }
                }))
            }
        }
        d.deserialize_any(V)
    }
}

/// Decodes a `transact` reply for `operations` operations into the per-operation
/// results, or the transaction's error with the index of the failing operation.
///
/// The outer `Err` is a malformed reply; the inner one a refused transaction.
pub fn decode_transact_reply(
    reply: &[u8],
    operations: usize,
) -> Result<Result<Vec<OperationResult>, TransactionError>, String> {
    let slots: Vec<Slot> =
        serde_json::from_slice(reply).map_err(|e| format!("malformed transact reply: {e}"))?;
    if slots.len() < operations {
        return Err(format!(
            "transact reply has {} results for {operations} operations",
            slots.len()
        ));
    }
    let mut results = Vec::with_capacity(operations);
    for (i, slot) in slots.into_iter().enumerate() {
        match slot {
            Slot::Ok(r) if i < operations => results.push(r),
            Slot::Ok(_) | Slot::NotRun if i >= operations => {
                return Err(format!(
                    "transact reply has a result past operation {operations}"
                ))
            }
            Slot::Ok(_) => unreachable!("guarded above"),
            Slot::Err(error) => {
                return Ok(Err(TransactionError {
                    operation: (i < operations).then_some(i),
                    operations,
                    error,
                    results,
                }))
            }
            Slot::NotRun => {
                return Err(format!(
                    "transact reply has null for operation {i} with no error before it"
                ))
            }
        }
    }
    Ok(Ok(results))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_successful_reply_decodes_per_operation() {
        let reply = br#"[{"uuid":["uuid","005fc7ab-9549-4df1-aaf9-5d907d5e2675"]},{"rows":[{"name":"a","ports":["set",[]]}]},{"count":2},{}]"#;
        let r = decode_transact_reply(reply, 4).unwrap().unwrap();
        assert_eq!(
            r[0].uuid().unwrap().to_string(),
            "005fc7ab-9549-4df1-aaf9-5d907d5e2675"
        );
        assert_eq!(r[1].rows().unwrap()[0]["name"], Datum::scalar("a"));
        assert_eq!(r[2].count(), Some(2));
        assert_eq!(r[3], OperationResult::Empty);
    }

    #[test]
    fn an_operation_error_carries_its_index_error_and_details() {
        let reply = br#"[{"uuid":["uuid","005fc7ab-9549-4df1-aaf9-5d907d5e2675"]},{"error":"constraint violation","details":"bad"},null]"#;
        let e = decode_transact_reply(reply, 3).unwrap().unwrap_err();
        assert_eq!(e.operation, Some(1));
        assert_eq!(e.error.error, "constraint violation");
        assert_eq!(e.error.details.as_deref(), Some("bad"));
        assert_eq!(e.results.len(), 1);
        assert_eq!(
            e.to_string(),
            "transaction failed at operation 1 of 3: constraint violation: bad"
        );
    }

    #[test]
    fn a_trailing_commit_error_has_no_operation_index() {
        let reply = br#"[{},{"error":"referential integrity violation","details":"x"}]"#;
        let e = decode_transact_reply(reply, 1).unwrap().unwrap_err();
        assert_eq!(e.operation, None);
        assert!(e
            .to_string()
            .starts_with("transaction failed at commit: referential integrity violation"));
    }

    #[test]
    fn malformed_replies_are_reported_not_trusted() {
        assert!(decode_transact_reply(b"{}", 1)
            .unwrap_err()
            .contains("malformed"));
        assert!(decode_transact_reply(b"[]", 1)
            .unwrap_err()
            .contains("0 results for 1"));
        assert!(decode_transact_reply(b"[null]", 1)
            .unwrap_err()
            .contains("null for operation 0"));
        assert!(decode_transact_reply(b"[{},{}]", 1)
            .unwrap_err()
            .contains("past operation"));
        assert!(decode_transact_reply(br#"[{"uuid":5}]"#, 1)
            .unwrap_err()
            .contains("not a uuid"));
    }
}
