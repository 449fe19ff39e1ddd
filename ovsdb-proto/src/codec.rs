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

/// The largest read buffer a connection keeps between messages. A message split off
/// its buffer takes the buffer's memory with it, so the next large message grew a new
/// buffer by doubling, on memory the allocator had just been given back by the
/// system: a 1519-row update (a network added) spent more time in the page faults of
/// that growth than in its decoding. A message is copied out instead, and the buffer
/// stays as large as the largest message read, up to this size.
pub(crate) const KEPT_READ_BUFFER: usize = 8 << 20;

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
            name_is(&self.bytes[k.clone()], key).then(|| self.bytes.slice(v.clone()))
        })
    }

    /// Where each top-level member's key (quotes included) and value lie in
    /// [`as_bytes`](Self::as_bytes).
    pub(crate) fn member_spans(&self) -> impl Iterator<Item = &(Range<usize>, Range<usize>)> {
        self.members.iter()
    }

    /// The message's bytes in `range`, sharing its buffer.
    pub(crate) fn slice(&self, range: Range<usize>) -> Bytes {
        self.bytes.slice(range)
    }

    /// Every top-level member: its key as JSON text (quotes included) and its value's
    /// JSON text, in the order they came.
    pub fn members(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.members
            .iter()
            .map(|(k, v)| (&self.bytes[k.clone()], &self.bytes[v.clone()]))
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

/// Whether `raw`, a member name as JSON text (quotes included), names `name`. A member
/// name is a JSON string: `"\u0069d"` is `id` as much as `"id"` is, so a name with an
/// escape is compared after unescaping.
pub(crate) fn name_is(raw: &[u8], name: &str) -> bool {
    if raw.contains(&b'\\') {
        // An escape is at least two bytes for one character: a longer text cannot match.
        raw.len() <= 6 * name.len() + 2
            && serde_json::from_slice::<String>(raw).is_ok_and(|s| s == name)
    } else {
        raw.len() == name.len() + 2 && &raw[1..raw.len() - 1] == name.as_bytes()
    }
}

/// The request a reply answers: its `id` member's text read as a JSON number that is a
/// request id. The framer (which decides whether a reply is decoded while it arrives)
/// and the dispatcher (which completes the request) both read it here, so they always
/// agree on which request a reply is for.
pub(crate) fn reply_id(text: &[u8]) -> Option<u64> {
    serde_json::from_slice(text).ok()
}

/// The deepest nesting of arrays and objects an incoming message may have, the
/// message's own object included: the most serde_json, which parses every value, reads
/// (its recursion limit of 128 leaves 127 levels). OVSDB's deepest messages nest
/// about ten levels.
pub const MAX_DEPTH: usize = 127;

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
        }
    }

    /// Starts a message at the front of `buf` (skipping whitespace) unless one is
    /// started; false when `buf` holds nothing but whitespace.
    pub(crate) fn begin(&mut self, buf: &mut BytesMut) -> Result<bool, CodecError> {
        if self.started {
            return Ok(true);
        }
        match buf.iter().position(|b| !b.is_ascii_whitespace()) {
            None => {
                buf.clear();
                return Ok(false);
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
        Ok(true)
    }

    /// Refuses a message that has reached `size` bytes when that is over the limit.
    pub(crate) fn check_size(&self, size: usize) -> Result<(), CodecError> {
        if size > self.max_len {
            return Err(CodecError::TooLong {
                limit: self.max_len,
            });
        }
        Ok(())
    }

    /// At the end of the stream: an error when a message was begun and is not complete
    /// (`held` bytes of it were read).
    pub(crate) fn check_eof(&self, held: usize) -> Result<(), CodecError> {
        if !self.started {
            return Ok(());
        }
        Err(CodecError::Io(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("connection closed in the middle of a message ({held} bytes)"),
        )))
    }

    /// Makes room for the next read, so that it does not copy what is held each time.
    pub(crate) fn reserve(&self, buf: &mut BytesMut) {
        buf.reserve(8192.min(self.max_len));
    }

    /// Whether a message was begun (and not yet finished).
    pub(crate) fn is_started(&self) -> bool {
        self.started
    }

    /// How far into `buf` the current message is scanned.
    pub(crate) fn scanned(&self) -> usize {
        self.pos
    }

    /// The JSON text of the current message's `id` member, once it was scanned; the
    /// name is matched as a JSON string, escapes and all (see [`name_is`]).
    pub(crate) fn id<'a>(&self, buf: &'a [u8]) -> Option<&'a [u8]> {
        self.members
            .iter()
            .find_map(|(k, v)| name_is(&buf[k.clone()], "id").then(|| &buf[v.clone()]))
    }

    /// Records that the first `n` bytes of `buf` were taken away (handed on while the
    /// message is still arriving): positions move down by `n`, and members that began
    /// there are forgotten.
    pub(crate) fn release(&mut self, n: usize) {
        self.pos -= n;
        self.key_start = self.key_start.saturating_sub(n);
        self.key = self.key.start.saturating_sub(n)..self.key.end.saturating_sub(n);
        self.value_start = self.value_start.saturating_sub(n);
        self.members.retain(|(k, _)| k.start >= n);
        for (k, v) in &mut self.members {
            *k = k.start - n..k.end - n;
            *v = v.start - n..v.end - n;
        }
    }

    /// Scans what `buf` holds of the current message: the offset one past its end
    /// once it is complete.
    pub(crate) fn scan_message(&mut self, buf: &[u8]) -> Result<Option<usize>, CodecError> {
        self.scan(buf)
    }

    /// Takes the complete message that ends at `end` out of `buf`. While `buf` is at
    /// most [`KEPT_READ_BUFFER`] the message is copied out and `buf` keeps its memory
    /// for the messages after it; a larger buffer goes with its message.
    pub(crate) fn finish(&mut self, buf: &mut BytesMut, end: usize) -> RawMessage {
        let bytes = if buf.capacity() <= KEPT_READ_BUFFER {
            let bytes = Bytes::copy_from_slice(&buf[..end]);
            buf.advance(end);
            bytes
        } else {
            buf.split_to(end).freeze()
        };
        let members = std::mem::take(&mut self.members);
        self.reset();
        RawMessage { bytes, members }
    }

    /// Forgets the message being decoded (its bytes were handed on whole).
    pub(crate) fn forget(&mut self) {
        self.reset();
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

    /// Refuses nesting deeper than [`MAX_DEPTH`] as soon as it is seen: no parser
    /// here could read the message, so it is not buffered to the end first (a
    /// message of `[[[[…` that never closes cost twice its size before).
    fn check_depth(&self, offset: usize) -> Result<(), CodecError> {
        if self.depth > MAX_DEPTH {
            return Err(self.syntax(
                offset,
                format!("nested deeper than {MAX_DEPTH} levels, more than the JSON parser reads"),
            ));
        }
        Ok(())
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
                i = self.skip_string(buf, i);
                continue;
            }
            let b = buf[i];
            if self.depth == 1 {
                match self.top_level(b, i, buf)? {
                    Step::Next => i += 1,
                    Step::Again => {}
                    Step::Done(end) => return Ok(Some(end)),
                }
                continue;
            }
            self.nested(b, i)?;
            i += 1;
        }
        self.pos = i;
        Ok(None)
    }

    /// Inside a string at `i`: the offset after the next quote or backslash (or the
    /// end of `buf`), the state updated for what was found.
    #[inline]
    fn skip_string(&mut self, buf: &[u8], i: usize) -> usize {
        if self.escaped {
            self.escaped = false;
            return i + 1;
        }
        match memchr::memchr2(b'"', b'\\', &buf[i..]) {
            None => buf.len(),
            Some(off) => {
                let at = i + off;
                if buf[at] == b'\\' {
                    self.escaped = true;
                } else {
                    self.in_string = false;
                    if self.depth == 1 && self.expect == Expect::Colon {
                        self.key = self.key_start..at + 1;
                    }
                }
                at + 1
            }
        }
    }

    /// Byte `b` at `i` among the message's members (depth 1): names, colons, the
    /// start and end of each value.
    #[inline]
    fn top_level(&mut self, b: u8, i: usize, buf: &[u8]) -> Result<Step, CodecError> {
        match self.expect {
            Expect::Key => match b {
                b'"' => {
                    self.key_start = i;
                    self.expect = Expect::Colon;
                    self.in_string = true;
                }
                b'}' => {
                    self.depth = 0;
                    return Ok(Step::Done(i + 1));
                }
                b',' if !self.members.is_empty() => {}
                c if c.is_ascii_whitespace() => {}
                c => {
                    return Err(
                        self.syntax(i, format!("expected a member name, found '{}'", c as char))
                    )
                }
            },
            Expect::Colon => match b {
                b':' => self.expect = Expect::Value,
                c if c.is_ascii_whitespace() => {}
                c => return Err(self.syntax(i, format!("expected ':', found '{}'", c as char))),
            },
            Expect::Value => {
                if b == b',' || b == b'}' {
                    return Err(self.syntax(i, "a member has no value"));
                }
                if !b.is_ascii_whitespace() {
                    self.value_start = i;
                    self.expect = Expect::InValue;
                    return Ok(Step::Again); // this byte again, as part of the value
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
                    return Ok(Step::Done(i + 1));
                }
                b'"' => self.in_string = true,
                b'{' | b'[' => {
                    self.open.push(b);
                    self.depth += 1;
                    self.check_depth(i)?;
                }
                b']' => return Err(self.syntax(i, "unbalanced ']'")),
                _ => {}
            },
        }
        Ok(Step::Next)
    }

    /// Byte `b` at `i` inside a member's value (depth 2 and more): strings and
    /// brackets, which must match even in a member nobody reads.
    #[inline]
    fn nested(&mut self, b: u8, i: usize) -> Result<(), CodecError> {
        match b {
            b'"' => self.in_string = true,
            b'{' | b'[' => {
                self.open.push(b);
                self.depth += 1;
                self.check_depth(i)?;
            }
            b'}' | b']' => {
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
        Ok(())
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

/// What [`JsonRpcCodec::scan`] does after a byte among the members.
enum Step {
    /// Go on with the next byte.
    Next,
    /// Look at this byte again (a value starts at it).
    Again,
    /// The message ends just before this offset.
    Done(usize),
}

impl Decoder for JsonRpcCodec {
    type Item = RawMessage;
    type Error = CodecError;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<RawMessage>, CodecError> {
        if !self.begin(buf)? {
            return Ok(None);
        }
        let end = self.scan(buf)?;
        self.check_size(end.unwrap_or(buf.len()))?;
        match end {
            Some(end) => Ok(Some(self.finish(buf, end))),
            None => {
                self.reserve(buf);
                Ok(None)
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<RawMessage>, CodecError> {
        match self.decode(buf)? {
            Some(m) => Ok(Some(m)),
            None => self.check_eof(buf.len()).map(|()| None),
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
                put_json(dst, &id);
                dst.put_slice(b",\"method\":");
                put_json(dst, &*method);
                dst.put_slice(b",\"params\":");
                dst.put_slice(&params);
                dst.put_u8(b'}');
            }
            Outgoing::Notification { method, params } => {
                dst.reserve(params.len() + method.len() + 40);
                dst.put_slice(b"{\"id\":null,\"method\":");
                put_json(dst, &*method);
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

/// Writes `value` (a number or a string) as JSON, in place.
fn put_json<T: serde::Serialize + ?Sized>(dst: &mut BytesMut, value: &T) {
    // Writing a number or a string into memory cannot fail.
    let _ = serde_json::to_writer(dst.writer(), value);
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

    /// A message `{"id":n,"result":"xxx…"}` of about `size` bytes.
    fn message_of(n: usize, size: usize) -> Vec<u8> {
        format!(r#"{{"id":{n},"result":"{}"}}"#, "x".repeat(size)).into_bytes()
    }

    #[test]
    fn the_read_buffer_keeps_its_memory_for_the_next_message_while_the_last_is_held() {
        let mut codec = JsonRpcCodec::default();
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&message_of(1, 300_000));
        let start = buf.as_ptr();
        let first = decode_all(&mut codec, &mut buf);
        assert_eq!(first.len(), 1);
        // The first message is still held (as a decoder that has not finished with it
        // holds it) while the next one arrives, in pieces as reads bring it.
        let second = message_of(2, 290_000);
        for piece in second.chunks(64 * 1024) {
            buf.extend_from_slice(piece);
            assert_eq!(buf.as_ptr(), start, "the buffer was allocated anew");
            decode_all(&mut codec, &mut buf);
        }
        assert_eq!(&first[0].member("id").unwrap()[..], b"1");
        assert_eq!(first[0].as_bytes(), &message_of(1, 300_000)[..]);
    }

    #[test]
    fn a_read_buffer_larger_than_kept_goes_with_its_message() {
        let mut codec = JsonRpcCodec::default();
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&message_of(1, KEPT_READ_BUFFER + 1000));
        let big = decode_all(&mut codec, &mut buf);
        assert_eq!(big.len(), 1);
        buf.extend_from_slice(&message_of(2, 10));
        let small = decode_all(&mut codec, &mut buf);
        assert_eq!(&small[0].member("id").unwrap()[..], b"2");
        assert!(
            buf.capacity() < KEPT_READ_BUFFER,
            "a {} byte buffer was kept",
            buf.capacity()
        );
        assert_eq!(big[0].as_bytes().len(), KEPT_READ_BUFFER + 1000 + 20);
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
        // The framer's own look-up, which decides whether a reply is tapped, agrees.
        let text = br#"{"\u0069\u0064":5,"result":{}}"#;
        let mut codec = JsonRpcCodec::default();
        let mut buf = BytesMut::from(&text[..]);
        assert!(codec.begin(&mut buf).unwrap());
        assert_eq!(codec.scan_message(&buf).unwrap(), Some(text.len()));
        assert_eq!(codec.id(&buf), Some(&b"5"[..]));
        assert!(name_is(br#""\/id""#, "/id"));
        assert!(!name_is(br#""\u0069dd""#, "id"));
        assert!(!name_is(br#""\u0069"#, "id"), "not a string");
    }

    #[test]
    fn a_reply_id_is_a_json_number_read_one_way_for_framer_and_dispatcher() {
        assert_eq!(reply_id(b"7"), Some(7));
        assert_eq!(reply_id(b" 7 "), Some(7));
        // Texts a plain integer parse takes and JSON does not, and the reverse: a
        // reply is for a request only if the dispatcher would say so too.
        for not_an_id in [&b"+7"[..], b"07", b"7.0", b"-1", b"\"7\"", b"null", b""] {
            assert_eq!(
                reply_id(not_an_id),
                None,
                "{}",
                String::from_utf8_lossy(not_an_id)
            );
        }
    }

    #[test]
    fn nesting_past_the_parsers_limit_is_refused_where_it_goes_past() {
        // As deep as serde_json reads: framed.
        let deep = |n: usize| {
            let mut m = br#"{"id":1,"result":"#.to_vec();
            m.extend(std::iter::repeat_n(b'[', n - 1));
            m.extend(std::iter::repeat_n(b']', n - 1));
            m.extend(br#","error":null}"#);
            m
        };
        let mut codec = JsonRpcCodec::default();
        let mut buf = BytesMut::from(&deep(MAX_DEPTH)[..]);
        assert!(codec.decode(&mut buf).unwrap().is_some());
        // One level more, or a megabyte of '[' that never closes: refused at the
        // bracket that goes past, before the rest is read.
        for text in [deep(MAX_DEPTH + 1), {
            let mut m = br#"{"id":1,"result":"#.to_vec();
            m.extend(std::iter::repeat_n(b'[', 1 << 20));
            m
        }] {
            let mut codec = JsonRpcCodec::default();
            let mut buf = BytesMut::from(&text[..]);
            match codec.decode(&mut buf) {
                Err(CodecError::Syntax { offset, message }) => {
                    assert_eq!(offset, 17 + MAX_DEPTH - 1, "{message}");
                    assert!(message.contains("nested deeper than 127"), "{message}");
                }
                other => panic!("{other:?}"),
            }
            assert!(codec.open.len() <= MAX_DEPTH);
        }
        // The limit is serde_json's: it reads the deepest framed, not one more.
        let past = deep(MAX_DEPTH + 1);
        assert!(serde_json::from_slice::<serde_json::Value>(&past).is_err());
        assert!(serde_json::from_slice::<serde_json::Value>(&deep(MAX_DEPTH)).is_ok());
    }

    #[test]
    fn a_member_without_a_value_is_refused() {
        for bad in [&br#"{"id":,"method":""}"#[..], br#"{"id": }"#] {
            let mut codec = JsonRpcCodec::default();
            let mut buf = BytesMut::from(bad);
            let r = codec.decode(&mut buf);
            assert!(
                matches!(&r, Err(CodecError::Syntax { message, .. }) if message == "a member has no value"),
                "{}: {r:?}",
                String::from_utf8_lossy(bad)
            );
        }
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
