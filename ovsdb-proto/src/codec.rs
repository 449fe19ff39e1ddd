//! JSON-RPC 1.0 framing for OVSDB as a tokio-util [`Decoder`] and [`Encoder`].
//!
//! ovsdb-server writes JSON objects back to back with no delimiter. The decoder finds
//! where each object ends by tracking nesting and strings as bytes arrive; it remembers
//! how far it has scanned, so a message split across many reads is scanned once, not
//! once per read. While scanning it notes where each top-level member's key and value
//! are, so a message can be taken apart without parsing it twice (see [`RawMessage`]).

use std::io;
use std::ops::Range;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

/// The default limit on one incoming message: 1 GiB, room for the initial contents of a
/// very large OVN_Northbound while still refusing to buffer without bound.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 1 << 30;

/// Why the byte stream could not be split into messages.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// Reading or writing the transport failed.
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    /// A message grew past the configured limit before it was complete.
    #[error("incoming message exceeds the limit of {limit} bytes")]
    TooLong {
        /// The limit in bytes.
        limit: usize,
    },
    /// The stream is not a sequence of JSON objects.
    #[error("malformed JSON-RPC stream at byte {offset} of the message: {message}")]
    Syntax {
        /// Offset from the start of the message being decoded.
        offset: usize,
        /// What was found.
        message: String,
    },
}

/// One complete JSON object from the stream, with the spans of its top-level members.
#[derive(Clone, Debug)]
pub struct RawMessage {
    bytes: Bytes,
    members: Vec<(Range<usize>, Range<usize>)>,
}

impl RawMessage {
    /// The whole message as received.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The JSON text of the value of top-level member `key`, if present; shares the
    /// message's buffer.
    pub fn member(&self, key: &str) -> Option<Bytes> {
        self.members.iter().find_map(|(k, v)| {
            let raw_key = &self.bytes[k.clone()];
            let matches = if raw_key.contains(&b'\\') {
                serde_json::from_slice::<String>(raw_key).is_ok_and(|s| s == key)
            } else {
                raw_key.len() == key.len() + 2 && &raw_key[1..raw_key.len() - 1] == key.as_bytes()
            };
            matches.then(|| self.bytes.slice(v.clone()))
        })
    }

    /// Builds a message from one JSON object's text, as the decoder would; for tests and
    /// for callers that frame messages themselves.
    pub fn from_bytes(bytes: impl Into<Bytes>) -> Result<RawMessage, CodecError> {
        let mut codec = JsonRpcCodec::default();
        let mut buf = BytesMut::from(&bytes.into()[..]);
        match codec.decode_eof(&mut buf)? {
            Some(m) if buf.iter().all(u8::is_ascii_whitespace) => Ok(m),
            Some(_) => Err(CodecError::Syntax {
                offset: 0,
                message: "more than one JSON object".into(),
            }),
            None => Err(CodecError::Syntax {
                offset: 0,
                message: "no JSON object".into(),
            }),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// At depth 1, before a member's key (or the closing brace).
    Key,
    /// At depth 1, inside or after a key, before the colon.
    Colon,
    /// At depth 1, after the colon, before the value starts.
    Value,
    /// Inside a value (at depth 1 for scalars, deeper for containers).
    InValue,
}

/// Where the bytes of a reply go while they arrive: a receiver that decodes the reply
/// before its last byte is in.
pub(crate) type Tap = std::sync::mpsc::Sender<Bytes>;

/// The replies to be tapped, by request id. The client adds one before it sends the
/// request; the decoder takes it out once it has read the reply's `id`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Taps(std::sync::Arc<std::sync::Mutex<std::collections::HashMap<u64, Tap>>>);

impl Taps {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<u64, Tap>> {
        // Every critical section is one insert or remove: a poisoned map is still whole.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends the bytes of the reply to `id` to `tap` as they arrive.
    pub(crate) fn insert(&self, id: u64, tap: Tap) {
        self.lock().insert(id, tap);
    }

    /// Stops tapping the reply to `id`, if its bytes have not started arriving.
    pub(crate) fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    fn take(&self, id: u64) -> Option<Tap> {
        let mut map = self.lock();
        if map.is_empty() {
            return None;
        }
        map.remove(&id)
    }
}

/// The tap of the message being decoded.
#[derive(Debug, Default)]
struct Tapping {
    /// True once the message's `id` was looked up.
    checked: bool,
    tap: Option<Tap>,
    /// How many of the message's bytes were sent to the tap.
    sent: usize,
}

/// The JSON-RPC framing codec: decodes [`RawMessage`]s, encodes [`Outgoing`] messages.
#[derive(Debug)]
pub struct JsonRpcCodec {
    max_len: usize,
    /// Offset of the next byte to scan, relative to the start of the buffer.
    pos: usize,
    /// True once the opening brace of the current message has been seen.
    started: bool,
    depth: usize,
    /// The brackets open inside the current member's value, innermost last.
    open: Vec<u8>,
    in_string: bool,
    escaped: bool,
    expect: Expect,
    key_start: usize,
    key: Range<usize>,
    value_start: usize,
    members: Vec<(Range<usize>, Range<usize>)>,
    taps: Option<Taps>,
    tapping: Tapping,
}

impl Default for JsonRpcCodec {
    fn default() -> Self {
        JsonRpcCodec::new(DEFAULT_MAX_MESSAGE_SIZE)
    }
}

impl JsonRpcCodec {
    /// A codec that refuses incoming messages longer than `max_len` bytes.
    pub fn new(max_len: usize) -> JsonRpcCodec {
        JsonRpcCodec {
            max_len,
            pos: 0,
            started: false,
            depth: 0,
            open: Vec::new(),
            in_string: false,
            escaped: false,
            expect: Expect::Key,
            key_start: 0,
            key: 0..0,
            value_start: 0,
            members: Vec::new(),
            taps: None,
            tapping: Tapping::default(),
        }
    }

    /// Sends the bytes of the replies in `taps` there as they arrive.
    pub(crate) fn with_taps(mut self, taps: Taps) -> JsonRpcCodec {
        self.taps = Some(taps);
        self
    }

    /// Feeds the tap of the current message, if it has one, with `buf[..upto]`.
    fn feed_tap(&mut self, buf: &[u8], upto: usize) {
        let Some(taps) = &self.taps else { return };
        if !self.tapping.checked {
            let id = self
                .members
                .iter()
                .find_map(|(k, v)| (&buf[k.clone()] == b"\"id\"").then(|| &buf[v.clone()]));
            let Some(id) = id else { return };
            self.tapping.checked = true;
            let id = std::str::from_utf8(id)
                .ok()
                .and_then(|t| t.parse::<u64>().ok());
            self.tapping.tap = id.and_then(|id| taps.take(id));
        }
        if let Some(tap) = &self.tapping.tap {
            if upto > self.tapping.sent {
                let chunk = Bytes::copy_from_slice(&buf[self.tapping.sent..upto]);
                self.tapping.sent = upto;
                if tap.send(chunk).is_err() {
                    // The receiver gave up; the reply is still delivered whole.
                    self.tapping.tap = None;
                }
            }
        }
    }

    /// The limit on one incoming message, in bytes.
    pub fn max_message_size(&self) -> usize {
        self.max_len
    }

    fn syntax(&self, offset: usize, message: impl Into<String>) -> CodecError {
        CodecError::Syntax {
            offset,
            message: message.into(),
        }
    }

    fn end_value(&mut self, end: usize, buf: &[u8]) {
        let mut end = end;
        while end > self.value_start && buf[end - 1].is_ascii_whitespace() {
            end -= 1;
        }
        self.members.push((self.key.clone(), self.value_start..end));
    }

    /// Scans from `self.pos`; returns the offset one past the closing brace when the
    /// message is complete.
    fn scan(&mut self, buf: &[u8]) -> Result<Option<usize>, CodecError> {
        let mut i = self.pos;
        let len = buf.len();
        while i < len {
            if self.in_string {
                // Jump to the next quote or backslash.
                if self.escaped {
                    self.escaped = false;
                    i += 1;
                    continue;
                }
                match memchr::memchr2(b'"', b'\\', &buf[i..]) {
                    None => {
                        i = len;
                        break;
                    }
                    Some(off) => {
                        i += off;
                        if buf[i] == b'\\' {
                            self.escaped = true;
                        } else {
                            self.in_string = false;
                            if self.depth == 1 && self.expect == Expect::Colon {
                                self.key = self.key_start..i + 1;
                            }
                        }
                        i += 1;
                        continue;
                    }
                }
            }
            let b = buf[i];
            if self.depth == 1 {
                match self.expect {
                    Expect::Key => match b {
                        b'"' => {
                            self.key_start = i;
                            self.expect = Expect::Colon;
                            self.in_string = true;
                        }
                        b'}' => {
                            self.depth = 0;
                            return Ok(Some(i + 1));
                        }
                        b',' if !self.members.is_empty() => {}
                        c if c.is_ascii_whitespace() => {}
                        c => {
                            return Err(self.syntax(
                                i,
                                format!("expected a member name, found '{}'", c as char),
                            ))
                        }
                    },
                    Expect::Colon => match b {
                        b':' => self.expect = Expect::Value,
                        c if c.is_ascii_whitespace() => {}
                        c => {
                            return Err(
                                self.syntax(i, format!("expected ':', found '{}'", c as char))
                            )
                        }
                    },
                    Expect::Value => {
                        if !b.is_ascii_whitespace() {
                            self.value_start = i;
                            self.expect = Expect::InValue;
                            continue; // look at this byte again as part of the value
                        }
                    }
                    Expect::InValue => match b {
                        b',' => {
                            self.end_value(i, buf);
                            self.expect = Expect::Key;
                        }
                        b'}' => {
                            self.end_value(i, buf);
                            self.depth = 0;
                            return Ok(Some(i + 1));
                        }
                        b'"' => self.in_string = true,
                        b'{' | b'[' => {
                            self.open.push(b);
                            self.depth += 1;
                        }
                        b']' => return Err(self.syntax(i, "unbalanced ']'")),
                        _ => {}
                    },
                }
                i += 1;
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => {
                    self.open.push(b);
                    self.depth += 1;
                }
                b'}' | b']' => {
                    // Even in a member nobody reads, brackets must match.
                    let opener = if b == b'}' { b'{' } else { b'[' };
                    if self.open.pop() != Some(opener) {
                        return Err(self.syntax(
                            i,
                            format!("'{}' does not close '{}'", b as char, opener as char),
                        ));
                    }
                    self.depth -= 1;
                }
                _ => {}
            }
            i += 1;
        }
        self.pos = i;
        Ok(None)
    }

    fn reset(&mut self) {
        self.pos = 0;
        self.started = false;
        self.depth = 0;
        self.open.clear();
        self.in_string = false;
        self.escaped = false;
        self.expect = Expect::Key;
        self.members = Vec::new();
    }
}

impl Decoder for JsonRpcCodec {
    type Item = RawMessage;
    type Error = CodecError;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<RawMessage>, CodecError> {
        if !self.started {
            let skip = buf.iter().position(|b| !b.is_ascii_whitespace());
            match skip {
                None => {
                    buf.clear();
                    return Ok(None);
                }
                Some(n) => buf.advance(n),
            }
            if buf[0] != b'{' {
                return Err(self.syntax(
                    0,
                    format!(
                        "expected '{{' to start a message, found '{}'",
                        buf[0] as char
                    ),
                ));
            }
            self.started = true;
            self.depth = 1;
            self.pos = 1;
        }
        match self.scan(buf)? {
            Some(end) => {
                if end > self.max_len {
                    return Err(CodecError::TooLong {
                        limit: self.max_len,
                    });
                }
                self.feed_tap(buf, end);
                self.tapping = Tapping::default();
                let bytes = buf.split_to(end).freeze();
                let members = std::mem::take(&mut self.members);
                self.reset();
                Ok(Some(RawMessage { bytes, members }))
            }
            None => {
                if buf.len() > self.max_len {
                    return Err(CodecError::TooLong {
                        limit: self.max_len,
                    });
                }
                self.feed_tap(buf, self.pos);
                // Reserve so the next read does not copy what we already hold each time.
                buf.reserve(8192.min(self.max_len));
                Ok(None)
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<RawMessage>, CodecError> {
        match self.decode(buf)? {
            Some(m) => Ok(Some(m)),
            None if self.started => Err(CodecError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "connection closed in the middle of a message ({} bytes)",
                    buf.len()
                ),
            ))),
            None => Ok(None),
        }
    }
}

/// A message to send: the parts that are JSON are already serialized.
#[derive(Clone, Debug)]
pub enum Outgoing {
    /// `{"id":ID,"method":METHOD,"params":PARAMS}`.
    Request {
        /// The request id.
        id: u64,
        /// The method name.
        method: String,
        /// The params array as JSON text.
        params: Bytes,
    },
    /// `{"id":null,"method":METHOD,"params":PARAMS}`.
    Notification {
        /// The method name.
        method: String,
        /// The params array as JSON text.
        params: Bytes,
    },
    /// `{"id":ID,"result":RESULT,"error":null}`, the reply to a server's request.
    Response {
        /// The id of the request answered, as JSON text.
        id: Bytes,
        /// The result as JSON text.
        result: Bytes,
    },
}

impl Encoder<Outgoing> for JsonRpcCodec {
    type Error = CodecError;

    fn encode(&mut self, item: Outgoing, dst: &mut BytesMut) -> Result<(), CodecError> {
        match item {
            Outgoing::Request { id, method, params } => {
                dst.reserve(params.len() + method.len() + 48);
                dst.put_slice(b"{\"id\":");
                dst.put_slice(id.to_string().as_bytes());
                dst.put_slice(b",\"method\":");
                put_json_string(dst, &method);
                dst.put_slice(b",\"params\":");
                dst.put_slice(&params);
                dst.put_u8(b'}');
            }
            Outgoing::Notification { method, params } => {
                dst.reserve(params.len() + method.len() + 40);
                dst.put_slice(b"{\"id\":null,\"method\":");
                put_json_string(dst, &method);
                dst.put_slice(b",\"params\":");
                dst.put_slice(&params);
                dst.put_u8(b'}');
            }
            Outgoing::Response { id, result } => {
                dst.reserve(id.len() + result.len() + 32);
                dst.put_slice(b"{\"id\":");
                dst.put_slice(&id);
                dst.put_slice(b",\"result\":");
                dst.put_slice(&result);
                dst.put_slice(b",\"error\":null}");
            }
        }
        Ok(())
    }
}

fn put_json_string(dst: &mut BytesMut, s: &str) {
    let mut w = dst.writer();
    // Writing a string into memory cannot fail.
    let _ = serde_json::to_writer(&mut w, s);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(codec: &mut JsonRpcCodec, buf: &mut BytesMut) -> Vec<RawMessage> {
        let mut out = Vec::new();
        while let Some(m) = codec.decode(buf).unwrap() {
            out.push(m);
        }
        out
    }

    const TRICKY: &str =
        r#"{"id":7,"result":[{"rows":[{"name":"a\"}{[","x":"\\"}]},"{"],"error":null}"#;

    #[test]
    fn a_message_split_at_every_byte_offset_decodes_the_same() {
        let whole = format!(
            "{TRICKY}  \n{}",
            r#"{"method":"echo","params":[],"id":"e1"}"#
        );
        for split in 0..=whole.len() {
            let mut codec = JsonRpcCodec::default();
            let mut buf = BytesMut::new();
            buf.extend_from_slice(&whole.as_bytes()[..split]);
            let mut got = decode_all(&mut codec, &mut buf);
            buf.extend_from_slice(&whole.as_bytes()[split..]);
            got.extend(decode_all(&mut codec, &mut buf));
            assert_eq!(got.len(), 2, "split at {split}");
            assert_eq!(got[0].as_bytes(), TRICKY.as_bytes(), "split at {split}");
            assert_eq!(&got[0].member("id").unwrap()[..], b"7");
            assert_eq!(&got[0].member("error").unwrap()[..], b"null");
            assert_eq!(
                &got[0].member("result").unwrap()[..],
                &br#"[{"rows":[{"name":"a\"}{[","x":"\\"}]},"{"]"#[..]
            );
            assert_eq!(&got[1].member("id").unwrap()[..], b"\"e1\"");
            assert_eq!(&got[1].member("method").unwrap()[..], b"\"echo\"");
        }
    }

    #[test]
    fn mismatched_brackets_are_refused_even_in_members_never_read() {
        for bad in [
            r#"{"id":1,"result":[1},"error":null}"#,
            r#"{"id":1,"extra":{"a":[1,2}],"result":1,"error":null}"#,
            r#"{"id":1,"extra":[{]},"result":1,"error":null}"#,
        ] {
            let mut codec = JsonRpcCodec::default();
            let mut buf = BytesMut::from(bad.as_bytes());
            let e = codec.decode(&mut buf).unwrap_err().to_string();
            assert!(e.contains("does not close"), "{bad}: {e}");
        }
        // Brackets inside strings are text.
        let mut codec = JsonRpcCodec::default();
        let mut buf = BytesMut::from(&br#"{"id":1,"x":["]}"],"result":1,"error":null}"#[..]);
        assert!(codec.decode(&mut buf).unwrap().is_some());
    }

    #[test]
    fn one_byte_at_a_time_decodes_back_to_back_messages() {
        let stream = r#"{"id":1,"result":{},"error":null}{"id":2,"result":"}","error":null}{"id":null,"method":"update","params":[null,{}]}"#;
        let mut codec = JsonRpcCodec::default();
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for b in stream.bytes() {
            buf.put_u8(b);
            got.extend(decode_all(&mut codec, &mut buf));
        }
        assert_eq!(got.len(), 3);
        assert_eq!(&got[1].member("result").unwrap()[..], b"\"}\"");
        assert_eq!(&got[2].member("params").unwrap()[..], b"[null,{}]");
        assert!(buf.is_empty());
    }

    #[test]
    fn whitespace_inside_and_between_messages_is_tolerated() {
        let mut codec = JsonRpcCodec::default();
        let mut buf = BytesMut::from(&b"\n  { \"id\" : 3 , \"result\" : [ 1 , 2 ] \n}\n"[..]);
        let m = codec.decode(&mut buf).unwrap().unwrap();
        assert_eq!(&m.member("id").unwrap()[..], b"3");
        assert_eq!(&m.member("result").unwrap()[..], b"[ 1 , 2 ]");
        assert!(codec.decode(&mut buf).unwrap().is_none());
    }

    #[test]
    fn escaped_member_names_are_matched_by_their_value() {
        let m = RawMessage::from_bytes(&br#"{"\u0069d":5}"#[..]).unwrap();
        assert_eq!(&m.member("id").unwrap()[..], b"5");
    }

    #[test]
    fn a_message_over_the_limit_is_an_error_not_a_buffer() {
        let mut codec = JsonRpcCodec::new(64);
        let mut buf = BytesMut::new();
        buf.extend_from_slice(b"{\"id\":1,\"result\":\"");
        assert!(codec.decode(&mut buf).unwrap().is_none());
        buf.extend_from_slice(&[b'x'; 100]);
        match codec.decode(&mut buf) {
            Err(CodecError::TooLong { limit: 64 }) => {}
            other => panic!("expected TooLong, got {other:?}"),
        }
        // A complete message that is too long is refused as well.
        let mut codec = JsonRpcCodec::new(10);
        let mut buf = BytesMut::from(&b"{\"id\":12345678}"[..]);
        assert!(matches!(
            codec.decode(&mut buf),
            Err(CodecError::TooLong { limit: 10 })
        ));
    }

    #[test]
    fn a_stream_that_is_not_objects_is_a_syntax_error() {
        for bad in [&b"[1,2]"[..], b"x", b"{1:2}", b"{\"a\" 1}", b"{\"a\":1]"] {
            let mut codec = JsonRpcCodec::default();
            let mut buf = BytesMut::from(bad);
            let r = codec.decode(&mut buf);
            assert!(
                matches!(r, Err(CodecError::Syntax { .. })),
                "{:?}: {r:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn eof_in_the_middle_of_a_message_is_reported() {
        let mut codec = JsonRpcCodec::default();
        let mut buf = BytesMut::from(&b"{\"id\":1,"[..]);
        let e = codec.decode_eof(&mut buf).unwrap_err();
        assert!(e.to_string().contains("in the middle of a message"), "{e}");
    }

    #[test]
    fn encoded_messages_decode_back() {
        let mut codec = JsonRpcCodec::default();
        let mut buf = BytesMut::new();
        codec
            .encode(
                Outgoing::Request {
                    id: 9,
                    method: "transact".into(),
                    params: Bytes::from_static(b"[\"db\"]"),
                },
                &mut buf,
            )
            .unwrap();
        codec
            .encode(
                Outgoing::Response {
                    id: Bytes::from_static(b"\"echo\""),
                    result: Bytes::from_static(b"[]"),
                },
                &mut buf,
            )
            .unwrap();
        codec
            .encode(
                Outgoing::Notification {
                    method: "cancel".into(),
                    params: Bytes::from_static(b"[9]"),
                },
                &mut buf,
            )
            .unwrap();
        let v: Vec<serde_json::Value> = serde_json::Deserializer::from_slice(&buf)
            .into_iter()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            v[0],
            serde_json::json!({"id": 9, "method": "transact", "params": ["db"]})
        );
        assert_eq!(
            v[1],
            serde_json::json!({"id": "echo", "result": [], "error": null})
        );
        assert_eq!(
            v[2],
            serde_json::json!({"id": null, "method": "cancel", "params": [9]})
        );
        let got = decode_all(&mut codec, &mut buf);
        assert_eq!(got.len(), 3);
    }
}
