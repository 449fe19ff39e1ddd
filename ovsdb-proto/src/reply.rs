//! What the server answers besides results: its errors, and the decoding of a
//! `transact` reply into per-operation results or the refused transaction.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::codec::reply_id;
use crate::datum::{parse_uuid, Row, TagStr};
use crate::ops::OperationResult;
use crate::Uuid;

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
                // Keys borrowed from the reply where they can be: no allocation for the
                // names a result has.
                while let Some(key) = map.next_key::<TagStr<'de>>()? {
                    match key.as_str() {
                        "uuid" => uuid = Some(map.next_value::<InsertedUuid>()?.0),
                        "rows" => rows = Some(map.next_value::<Vec<Row>>()?),
                        "count" => count = Some(map.next_value::<u64>()?),
                        "error" => error = Some(map.next_value::<serde_json::Value>()?),
                        "details" => details = Some(map.next_value::<serde_json::Value>()?),
                        other_key => {
                            let v: serde_json::Value = map.next_value()?;
                            other.insert(other_key.to_owned(), v);
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

/// The `uuid` of an insert's result, `["uuid", TEXT]`, read straight into a [`Uuid`]
/// rather than through a [`Datum`](crate::Datum).
struct InsertedUuid(Uuid);

impl<'de> Deserialize<'de> for InsertedUuid {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<InsertedUuid, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = InsertedUuid;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("the inserted row's uuid, [\"uuid\", TEXT]")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<InsertedUuid, A::Error> {
                let Some(tag) = seq.next_element::<TagStr<'de>>()? else {
                    return Err(de::Error::invalid_length(0, &self));
                };
                let Some(text) = seq.next_element::<TagStr<'de>>()? else {
                    return Err(de::Error::invalid_length(1, &self));
                };
                if tag.as_str() != "uuid" {
                    return Err(de::Error::custom(format_args!(
                        "insert result uuid is tagged \"{}\", not \"uuid\"",
                        tag.as_str()
                    )));
                }
                if seq.next_element::<de::IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(3, &self));
                }
                Ok(InsertedUuid(parse_uuid(text.as_str())?))
            }
        }
        d.deserialize_seq(V)
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
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_slice(reply);
    let slots = Slots {
        operations,
        results: Vec::with_capacity(operations),
        read: 0,
        end: None,
    }
    .deserialize(&mut de)
    .and_then(|slots| de.end().map(|()| slots))
    .map_err(|e| format!("malformed transact reply: {e}"))?;
    slots.outcome()
}

/// The reply to `transact` request `id` of `operations` operations, read straight from
/// the front of the connection's read buffer `buf`: its outcome and the offset one past
/// the message, or `None` when the front of `buf` is not such a reply, whole and
/// well-formed, with its members as ovsdb-server writes them (`id`, `result`, then a
/// null `error`). The framer then reads the message the general way, which says what
/// is wrong with it, if anything: this only saves a waiting caller framing its own
/// reply and then parsing it again.
pub(crate) fn decode_transact_message(
    buf: &[u8],
    id: u64,
    operations: usize,
) -> Option<(Result<Vec<OperationResult>, TransactionError>, usize)> {
    // The members around the result are matched as text: a reply to another request,
    // a notification or a message still arriving is told by its first bytes. The id
    // is read as the framer and the dispatcher read it.
    let (id_text, rest) = split_digits(buf.strip_prefix(b"{\"id\":")?);
    // A notification's `null` id is told without the parser (and its error).
    if id_text.is_empty() || reply_id(id_text)? != id {
        return None;
    }
    let result = rest.strip_prefix(b",\"result\":")?;
    let (outcome, after) = match plain_results(result, operations) {
        Some((results, after)) => (Ok(results), after),
        None => {
            let mut stream = serde_json::Deserializer::from_slice(result).into_iter::<AnySlots>();
            let AnySlots(mut slots) = stream.next()?.ok()?;
            // Read as if the transaction had no end, the slots are this one's when
            // there are as many as its operations (fewer or more: the general way
            // says so).
            if slots.read != operations {
                return None;
            }
            slots.operations = operations;
            (slots.outcome().ok()?, &result[stream.byte_offset()..])
        }
    };
    let rest = after.strip_prefix(b",\"error\":null}")?;
    Some((outcome, buf.len() - rest.len()))
}

/// The results of a transaction of `operations` operations when each is one that
/// ovsdb-server writes in a single way (an insert's `{"uuid":["uuid","…"]}`, a count,
/// `{}`), read as text, with what follows the array; `None` for anything else, which
/// the parser reads. Most writes are answered so, and reading them as text takes a
/// tenth of what the parser takes.
fn plain_results(text: &[u8], operations: usize) -> Option<(Vec<OperationResult>, &[u8])> {
    let mut rest = text.strip_prefix(b"[")?;
    let mut results = Vec::with_capacity(operations);
    loop {
        let (result, after) = plain_result(rest)?;
        results.push(result);
        match after.split_first()? {
            (b',', more) => rest = more,
            (b']', more) => return (results.len() == operations).then_some((results, more)),
            _ => return None,
        }
    }
}

/// One result written in the single way ovsdb-server writes it, and what follows it.
fn plain_result(text: &[u8]) -> Option<(OperationResult, &[u8])> {
    if let Some(rest) = text.strip_prefix(b"{\"uuid\":[\"uuid\",\"") {
        let uuid = std::str::from_utf8(rest.get(..36)?).ok()?;
        let uuid = parse_uuid::<serde_json::Error>(uuid).ok()?;
        let after = rest[36..].strip_prefix(b"\"]}")?;
        return Some((OperationResult::Insert { uuid }, after));
    }
    if let Some(rest) = text.strip_prefix(b"{\"count\":") {
        let (count, rest) = split_digits(rest);
        // Read by the parser, which refuses what JSON refuses (a leading zero).
        let count = serde_json::from_slice(count).ok()?;
        let after = rest.strip_prefix(b"}")?;
        return Some((OperationResult::Count(count), after));
    }
    let after = text.strip_prefix(b"{}")?;
    Some((OperationResult::Empty, after))
}

/// The digits at the front of `text`, and what follows them.
fn split_digits(text: &[u8]) -> (&[u8], &[u8]) {
    text.split_at(text.iter().take_while(|b| b.is_ascii_digit()).count())
}

/// A transaction's slots read with no count of operations to hold them to.
struct AnySlots(Slots);

impl<'de> Deserialize<'de> for AnySlots {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<AnySlots, D::Error> {
        d.deserialize_seq(Slots {
            operations: usize::MAX,
            results: Vec::new(),
            read: 0,
            end: None,
        })
        .map(AnySlots)
    }
}

/// How a reply's slots read so far end, once one of them decides it: the first error
/// (the operation that failed, or the commit), or the first thing wrong with the reply.
enum End {
    Refused(usize, ServerError),
    Malformed(String),
}

/// The slots of a `transact` reply, taken one by one as the parser reads them.
struct Slots {
    operations: usize,
    results: Vec<OperationResult>,
    /// Slots read.
    read: usize,
    /// Set by the first slot that ends the reply's meaning; those after it are only
    /// checked to be slots.
    end: Option<End>,
}

impl Slots {
    /// Takes slot `self.read`.
    fn take(&mut self, slot: Slot) {
        let i = self.read;
        self.read += 1;
        if self.end.is_some() {
            return;
        }
        self.end = match (slot, i >= self.operations) {
            (Slot::Ok(r), false) => {
                self.results.push(r);
                None
            }
            (Slot::Ok(_) | Slot::NotRun, true) => Some(End::Malformed(format!(
                "transact reply has a result past operation {}",
                self.operations
            ))),
            (Slot::Err(error), _) => Some(End::Refused(i, error)),
            (Slot::NotRun, false) => Some(End::Malformed(format!(
                "transact reply has null for operation {i} with no error before it"
            ))),
        };
    }

    fn outcome(self) -> Result<Result<Vec<OperationResult>, TransactionError>, String> {
        let operations = self.operations;
        if self.read < operations {
            return Err(format!(
                "transact reply has {} results for {operations} operations",
                self.read
            ));
        }
        match self.end {
            None => Ok(Ok(self.results)),
            Some(End::Malformed(why)) => Err(why),
            Some(End::Refused(i, error)) => Ok(Err(TransactionError {
                operation: (i < operations).then_some(i),
                operations,
                error,
                results: self.results,
            })),
        }
    }
}

impl<'de> Visitor<'de> for Slots {
    type Value = Slots;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of operation results")
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Slots, A::Error> {
        while let Some(slot) = seq.next_element::<Slot>()? {
            self.take(slot);
        }
        Ok(self)
    }
}

impl<'de> de::DeserializeSeed<'de> for Slots {
    type Value = Slots;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Slots, D::Error> {
        d.deserialize_seq(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Datum;

    /// The reply read where it lies, or `None`, beside what the general way reads.
    fn own(
        text: &str,
        id: u64,
        operations: usize,
    ) -> Option<(Result<Vec<OperationResult>, TransactionError>, usize)> {
        decode_transact_message(text.as_bytes(), id, operations)
    }

    const UUID: &str = "005fc7ab-9549-4df1-aaf9-5d907d5e2675";

    #[test]
    fn a_transactions_own_reply_is_decoded_where_it_lies_and_ends_where_the_message_does() {
        let reply = format!(
            r#"{{"id":12,"result":[{{"uuid":["uuid","{UUID}"]}},{{"count":2}}],"error":null}}"#
        );
        let text = format!(r#"{reply}{{"id":null,"method":"update""#);
        let (outcome, end) = own(&text, 12, 2).expect("decoded");
        assert_eq!(end, reply.len());
        let results = outcome.unwrap();
        let general = decode_transact_reply(
            format!(r#"[{{"uuid":["uuid","{UUID}"]}},{{"count":2}}]"#).as_bytes(),
            2,
        )
        .unwrap()
        .unwrap();
        assert_eq!(results, general);
        // A refused operation is an outcome too.
        let refused = format!(
            r#"{{"id":3,"result":[{{"uuid":["uuid","{UUID}"]}},{{"error":"constraint violation","details":"bad"}}],"error":null}}"#
        );
        let e = own(&refused, 3, 2).unwrap().0.unwrap_err();
        assert_eq!(
            (e.operation, e.error.error.as_str()),
            (Some(1), "constraint violation")
        );
    }

    #[test]
    fn plain_results_read_as_text_are_what_the_parser_reads() {
        let upper = UUID.to_uppercase();
        // (result, operations, read as text rather than by the parser)
        for (result, ops, plain) in [
            (format!(r#"[{{"uuid":["uuid","{UUID}"]}}]"#), 1, true),
            (
                format!(
                    r#"[{{"uuid":["uuid","{upper}"]}},{{"count":0}},{{}},{{"count":18446744073709551615}}]"#
                ),
                4,
                true,
            ),
            (
                format!(r#"[{{}},{{"uuid":["uuid","{UUID}"]}},{{"count":7}}]"#),
                3,
                true,
            ),
            (
                format!(r#"[{{"uuid":["uuid","{UUID}"]}},{{"rows":[{{"name":"a"}}]}}]"#),
                2,
                false,
            ),
            (
                r#"[{"count":1},{"error":"constraint violation"},null]"#.to_owned(),
                3,
                false,
            ),
            (r#"[ {"count" : 1} ]"#.to_owned(), 1, false),
            (r#"[{"count":1,"x":2}]"#.to_owned(), 1, false),
        ] {
            let general = decode_transact_reply(result.as_bytes(), ops);
            let as_text = plain_results(result.as_bytes(), ops);
            assert_eq!(as_text.is_some(), plain, "{result}");
            let text = format!(r#"{{"id":5,"result":{result},"error":null}}"#);
            let (outcome, end) = own(&text, 5, ops).expect(&text);
            assert_eq!(end, text.len());
            assert_eq!(Ok(outcome), general, "{result}");
        }
        // Plain but wrong: a count with a leading zero, a short uuid, a bad one.
        for result in [
            r#"[{"count":01}]"#.to_owned(),
            format!(r#"[{{"uuid":["uuid","{}"]}}]"#, &UUID[1..]),
            format!(r#"[{{"uuid":["uuid","{}"]}}]"#, UUID.replace('-', "x")),
        ] {
            let text = format!(r#"{{"id":5,"result":{result},"error":null}}"#);
            assert!(own(&text, 5, 1).is_none(), "{text}");
            assert!(
                decode_transact_reply(result.as_bytes(), 1).is_err(),
                "{result}"
            );
        }
    }

    #[test]
    fn anything_but_a_whole_plain_reply_to_that_transaction_is_left_to_the_framer() {
        let ok = format!(r#"{{"id":7,"result":[{{"uuid":["uuid","{UUID}"]}}],"error":null}}"#);
        assert!(own(&ok, 7, 1).is_some());
        for (why, text, id, ops) in [
            ("another request's", ok.clone(), 8, 1),
            ("more operations than results", ok.clone(), 7, 2),
            ("still arriving", ok[..ok.len() - 1].to_owned(), 7, 1),
            ("a leading zero", ok.replacen(":7,", ":07,", 1), 7, 1),
            ("whitespace first", format!(" {ok}"), 7, 1),
            (
                "members in another order",
                format!(r#"{{"result":[{{"uuid":["uuid","{UUID}"]}}],"id":7,"error":null}}"#),
                7,
                1,
            ),
            (
                "an error member",
                ok.replace(r#""error":null"#, r#""error":"canceled""#),
                7,
                1,
            ),
            (
                "a member past error",
                ok.replace(r#""error":null}"#, r#""error":null,"x":1}"#),
                7,
                1,
            ),
            (
                "a commit error past the operations",
                format!(
                    r#"{{"id":7,"result":[{{"uuid":["uuid","{UUID}"]}},{{"error":"referential integrity violation"}}],"error":null}}"#
                ),
                7,
                1,
            ),
            ("a malformed uuid", ok.replace(UUID, "nope"), 7, 1),
            (
                "a notification",
                r#"{"id":null,"method":"update","params":[]}"#.to_owned(),
                7,
                1,
            ),
        ] {
            assert!(own(&text, id, ops).is_none(), "{why}: {text}");
        }
    }

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
        // What follows a refused operation is still read as results; nothing may
        // follow the array.
        assert!(decode_transact_reply(br#"[{"error":"x"},5]"#, 2)
            .unwrap_err()
            .contains("malformed"));
        assert!(decode_transact_reply(b"[{}] [{}]", 1)
            .unwrap_err()
            .contains("trailing characters"));
        for (bad, says) in [
            (r#"[{"uuid":5}]"#, "expected the inserted row's uuid"),
            (
                r#"[{"uuid":["named-uuid","x"]}]"#,
                "tagged \"named-uuid\", not \"uuid\"",
            ),
            (r#"[{"uuid":[]}]"#, "invalid length 0"),
            (r#"[{"uuid":["uuid"]}]"#, "invalid length 1"),
            (
                r#"[{"uuid":["uuid","005fc7ab-9549-4df1-aaf9-5d907d5e2675",1]}]"#,
                "invalid length 3",
            ),
            (
                r#"[{"uuid":["uuid","005fc7ab"]}]"#,
                "invalid uuid \"005fc7ab\"",
            ),
        ] {
            let e = decode_transact_reply(bad.as_bytes(), 1).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
