//! The framing codec against any byte stream, read whole and in pieces.
//!
//! Input: byte 0 sets the message size limit (64 to 4144 bytes), byte 1 the size of the
//! pieces the stream arrives in (1 to 256 bytes), the rest is the stream. Checked:
//! - the same messages come out, in the same order, whatever the pieces, and the stream
//!   is refused (or not) the same way;
//! - the read buffer never holds more than the limit plus one piece;
//! - a message's members can be looked up without panicking.

use bytes::BytesMut;
use ovsdb_proto::codec::{JsonRpcCodec, RawMessage};
use tokio_util::codec::Decoder;

/// What a stream decoded to: its messages, and whether it ended in an error.
#[derive(Debug, PartialEq)]
struct Outcome {
    messages: Vec<Vec<u8>>,
    refused: bool,
}

/// Decodes `stream` arriving in `piece`-byte reads; panics if the buffer ever holds
/// more than `limit` plus one read.
fn decode(stream: &[u8], limit: usize, piece: usize) -> Outcome {
    let mut codec = JsonRpcCodec::new(limit);
    let mut buf = BytesMut::new();
    let mut messages = Vec::new();
    // Every message the buffer holds now (at the end of the stream: `eof`); false once
    // the stream is refused.
    let mut drain = |codec: &mut JsonRpcCodec, buf: &mut BytesMut, eof: bool| loop {
        let next = if eof {
            codec.decode_eof(buf)
        } else {
            codec.decode(buf)
        };
        match next {
            Ok(Some(m)) => messages.push(looked_at(m)),
            Ok(None) => return true,
            Err(_) => return false,
        }
    };
    for read in stream.chunks(piece) {
        buf.extend_from_slice(read);
        if !drain(&mut codec, &mut buf, false) {
            return Outcome {
                messages,
                refused: true,
            };
        }
        assert!(
            buf.len() <= limit + piece,
            "the buffer holds {} bytes with a limit of {limit}",
            buf.len()
        );
    }
    let refused = !drain(&mut codec, &mut buf, true);
    Outcome { messages, refused }
}

/// The message's text, after looking up the members the client reads.
fn looked_at(m: RawMessage) -> Vec<u8> {
    for name in ["id", "method", "params", "result", "error"] {
        if let Some(v) = m.member(name) {
            assert!(m.as_bytes().len() >= v.len());
        }
    }
    assert!(m.members().count() <= m.as_bytes().len());
    m.as_bytes().to_vec()
}

/// The check; see the module docs.
pub fn check(data: &[u8]) {
    let [limit, piece, stream @ ..] = data else {
        return;
    };
    let limit = 64 + 16 * usize::from(*limit);
    let piece = 1 + usize::from(*piece);
    let whole = decode(stream, limit, stream.len().max(1));
    let pieces = decode(stream, limit, piece);
    assert_eq!(whole, pieces, "read whole and in {piece}-byte pieces");
}
