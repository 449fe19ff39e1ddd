//! Replies decoded while they arrive. A request whose reply may be large (a monitor's
//! initial contents) registers a tap for its id; when the reply's `id` is read, every
//! byte of that reply goes to the tap as it comes instead of waiting in the read buffer,
//! so the reply is held once (by whoever decodes it), not once in the buffer, once in
//! transit and once decoded. The tap is a bounded channel: a decoder that falls behind
//! stops the connection from reading, and the server from sending, until it catches up.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::{Buf, Bytes, BytesMut};
use serde::de::DeserializeSeed;
use tokio::sync::mpsc;
use tokio_util::codec::Decoder;

use crate::codec::{CodecError, JsonRpcCodec, RawMessage};
use crate::ops::OperationResult;
use crate::reply::{decode_transact_message, TransactionError};

/// How many pieces of a reply may wait for its decoder (each is what one read brought,
/// up to 64 KiB).
pub(crate) const TAP_CAPACITY: usize = 32;

/// How much a read may bring while a tapped reply arrives.
const PIECE: usize = 64 * 1024;

/// Where the bytes of a reply go while they arrive.
pub(crate) type Tap = mpsc::Sender<Bytes>;

/// The replies to be tapped, by request id. The client adds one before it sends the
/// request; the decoder takes it out once it has read the reply's `id`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Taps(Arc<Mutex<HashMap<u64, Tap>>>);

impl Taps {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Tap>> {
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

    /// Stops tapping every reply whose bytes have not started arriving: their decoders
    /// see the end of their bytes (the connection ended).
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }

    /// Takes the tap for the reply whose `id` member's text `id_text` finds, with the
    /// request's id: its bytes go there. `Ok(None)` when the reply is not tapped;
    /// `Err(())` while its id has not arrived yet. The id is looked for, and read,
    /// only while some reply is tapped: a request's tap is in before the request goes
    /// out, so a reply that arrives with none in is not tapped.
    fn take<'a>(
        &self,
        id_text: impl FnOnce() -> Option<&'a [u8]>,
    ) -> Result<Option<(u64, Tap)>, ()> {
        let mut map = self.lock();
        if map.is_empty() {
            return Ok(None);
        }
        let text = id_text().ok_or(())?;
        Ok(crate::codec::reply_id(text).and_then(|id| map.remove(&id).map(|tap| (id, tap))))
    }
}

/// What the connection reads: whole messages, or the pieces of a tapped reply.
#[derive(Debug)]
pub(crate) enum Frame {
    /// A whole message.
    Message(RawMessage),
    /// The next bytes of the reply to request `id`, for `tap`; `last` on its final
    /// piece.
    Piece {
        id: u64,
        tap: Tap,
        bytes: Bytes,
        last: bool,
    },
    /// The reply to transaction `id`, decoded where it lay (its caller read it).
    Transact {
        id: u64,
        outcome: Result<Vec<OperationResult>, TransactionError>,
    },
}

/// The reply being handed to a tap.
#[derive(Debug)]
struct Tapping {
    id: u64,
    tap: Tap,
    /// How many of the reply's bytes were handed on.
    released: usize,
}

/// The framing codec, with the taps: a message whose `id` is tapped comes out in
/// pieces, each as soon as it is scanned.
#[derive(Debug)]
pub(crate) struct TappingCodec {
    inner: JsonRpcCodec,
    taps: Taps,
    /// True once the current message's `id` was looked up.
    checked: bool,
    tapping: Option<Tapping>,
    /// The transaction whose caller reads now, and its number of operations: its
    /// reply, when the next message is it, is decoded where it lies
    /// ([`Frame::Transact`]).
    pub(crate) own: Option<(u64, usize)>,
}

impl TappingCodec {
    pub(crate) fn new(inner: JsonRpcCodec, taps: Taps) -> TappingCodec {
        TappingCodec {
            inner,
            taps,
            checked: false,
            tapping: None,
            own: None,
        }
    }
}

impl Decoder for TappingCodec {
    type Item = Frame;
    type Error = CodecError;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, CodecError> {
        if let Some((id, operations)) = self.own.filter(|_| !self.inner.is_started()) {
            let max = self.inner.max_message_size();
            match decode_transact_message(buf, id, operations) {
                Some((outcome, end)) if end <= max => {
                    buf.advance(end);
                    return Ok(Some(Frame::Transact { id, outcome }));
                }
                _ => {}
            }
        }
        if !self.inner.begin(buf)? {
            return Ok(None);
        }
        let end = self.inner.scan_message(buf)?;
        let released = self.tapping.as_ref().map_or(0, |t| t.released);
        self.inner.check_size(released + end.unwrap_or(buf.len()))?;
        if !self.checked {
            let inner = &self.inner;
            if let Ok(tapped) = self.taps.take(|| inner.id(buf)) {
                self.checked = true;
                self.tapping = tapped.map(|(id, tap)| Tapping {
                    id,
                    tap,
                    released: 0,
                });
            }
        }
        if let Some(t) = &mut self.tapping {
            let upto = end.unwrap_or_else(|| self.inner.scanned());
            if upto == 0 {
                return Ok(None);
            }
            let bytes = buf.split_to(upto).freeze();
            t.released += upto;
            let piece = Frame::Piece {
                id: t.id,
                tap: t.tap.clone(),
                bytes,
                last: end.is_some(),
            };
            if end.is_some() {
                self.inner.forget();
                self.checked = false;
                self.tapping = None;
            } else {
                self.inner.release(upto);
                // Large reads while a large reply streams: fewer pieces, fewer wakeups
                // of its decoder.
                buf.reserve(PIECE);
            }
            return Ok(Some(piece));
        }
        match end {
            Some(end) => {
                self.checked = false;
                Ok(Some(Frame::Message(self.inner.finish(buf, end))))
            }
            None => {
                self.inner.reserve(buf);
                Ok(None)
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, CodecError> {
        match self.decode(buf)? {
            Some(f) => Ok(Some(f)),
            None => {
                let released = self.tapping.as_ref().map_or(0, |t| t.released);
                self.inner.check_eof(buf.len() + released).map(|()| None)
            }
        }
    }
}

/// The bytes of a reply, as the connection's decoder taps them.
pub(crate) struct Chunks {
    rx: mpsc::Receiver<Bytes>,
    current: Bytes,
}

impl Iterator for Chunks {
    type Item = Bytes;

    /// The next piece; none once the reply ended, or the connection did.
    fn next(&mut self) -> Option<Bytes> {
        self.rx.blocking_recv()
    }
}

impl std::io::Read for Chunks {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.next() {
                Some(chunk) => self.current = chunk,
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.current.len());
        out[..n].copy_from_slice(&self.current[..n]);
        self.current.advance(n);
        Ok(n)
    }
}

/// Decodes a whole reply message (`{"id": …, "result": …, "error": …}`) as it arrives,
/// `seed` taking the result: the result, or the server's error. With `cut`, the rows
/// at its path are cut out of the text for the seed to take (see [`crate::cut`]).
pub(crate) fn decode_reply<S: DeserializeSeed<'static>>(
    rx: mpsc::Receiver<Bytes>,
    seed: S,
    cut: Option<Cut>,
) -> Result<Result<S::Value, serde_json::Value>, serde_json::Error> {
    use serde::de::{IgnoredAny, MapAccess, Visitor};

    /// The result: `null` (beside an error) or what `S` reads.
    struct NullOr<S>(S);
    impl<S: DeserializeSeed<'static>> DeserializeSeed<'static> for NullOr<S> {
        type Value = Option<S::Value>;
        fn deserialize<D: serde::Deserializer<'static>>(
            self,
            d: D,
        ) -> Result<Self::Value, D::Error> {
            d.deserialize_option(self)
        }
    }
    impl<S: DeserializeSeed<'static>> Visitor<'static> for NullOr<S> {
        type Value = Option<S::Value>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a result")
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'static>>(
            self,
            d: D,
        ) -> Result<Self::Value, D::Error> {
            self.0.deserialize(d).map(Some)
        }
    }

    struct Envelope<S>(S);
    impl<S: DeserializeSeed<'static>> Visitor<'static> for Envelope<S> {
        type Value = Result<S::Value, serde_json::Value>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON-RPC reply")
        }
        fn visit_map<A: MapAccess<'static>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut seed = Some(self.0);
            let mut result = None;
            let mut error = serde_json::Value::Null;
            while let Some(key) = map.next_key::<String>()? {
                match (key.as_str(), seed.take()) {
                    ("result", Some(s)) => result = map.next_value_seed(NullOr(s))?,
                    ("error", s) => {
                        seed = s;
                        error = map.next_value()?;
                    }
                    (_, s) => {
                        seed = s;
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            if !error.is_null() {
                return Ok(Err(error));
            }
            result_or_missing(result)
        }
    }

    fn result_or_missing<V, E: serde::de::Error>(
        result: Option<V>,
    ) -> Result<Result<V, serde_json::Value>, E> {
        result
            .map(Ok)
            .ok_or_else(|| E::custom("the reply has neither result nor error"))
    }

    let chunks = Chunks {
        rx,
        current: Bytes::new(),
    };
    let (source, buffer): (Box<dyn std::io::Read>, usize) = match cut {
        // The text left is small; the rows are read from slices.
        Some(Cut { path, rows }) => (
            Box::new(crate::cut::RowCutter::new(chunks, path, rows)),
            8 * 1024,
        ),
        None => (Box::new(chunks), 64 * 1024),
    };
    let reader = std::io::BufReader::with_capacity(buffer, source);
    let mut de = serde_json::Deserializer::from_reader(reader);
    serde::Deserializer::deserialize_map(&mut de, Envelope(seed))
}

/// The rows to cut out of a reply: where they are, and where they go.
pub(crate) struct Cut {
    /// The path to them.
    pub(crate) path: &'static [crate::cut::Step],
    /// Their texts, for the seed.
    pub(crate) rows: crate::cut::RowTexts,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `text` to `codec` in `step`-byte reads; returns the frames and the
    /// largest the read buffer grew.
    fn feed(codec: &mut TappingCodec, text: &[u8], step: usize) -> (Vec<Frame>, usize) {
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        let mut most = 0;
        for piece in text.chunks(step) {
            buf.extend_from_slice(piece);
            most = most.max(buf.len());
            while let Some(f) = codec.decode(&mut buf).unwrap() {
                frames.push(f);
            }
        }
        (frames, most)
    }

    fn codec(limit: usize, tapped: &[u64]) -> (TappingCodec, Vec<mpsc::Receiver<Bytes>>) {
        let taps = Taps::default();
        let mut rxs = Vec::new();
        for id in tapped {
            let (tx, rx) = mpsc::channel(1);
            taps.insert(*id, tx);
            rxs.push(rx);
        }
        (TappingCodec::new(JsonRpcCodec::new(limit), taps), rxs)
    }

    fn big_reply(id: u64, n: usize) -> String {
        let rows: Vec<String> = (0..n).map(|i| format!("\"row-{i}\"")).collect();
        format!(
            "{{\"id\":{id},\"result\":[{}],\"error\":null}}",
            rows.join(",")
        )
    }

    #[test]
    fn the_reading_transactions_reply_is_decoded_where_it_lies_when_it_arrives_whole() {
        let uuid = "005fc7ab-9549-4df1-aaf9-5d907d5e2675";
        let own = format!(r#"{{"id":8,"result":[{{"uuid":["uuid","{uuid}"]}}],"error":null}}"#);
        let text = format!(
            r#"{{"id":null,"method":"update","params":[]}}{own}{{"id":9,"result":[],"error":null}}"#
        );
        let kinds = |frames: &[Frame]| -> Vec<String> {
            frames
                .iter()
                .map(|f| match f {
                    Frame::Message(m) => format!("message {:?}", m.member("id")),
                    Frame::Transact { id, outcome } => {
                        let uuid = outcome.as_ref().unwrap()[0].uuid().unwrap();
                        format!("transaction {id} {uuid}")
                    }
                    Frame::Piece { id, .. } => format!("piece {id}"),
                })
                .collect()
        };
        // Whole in the buffer: the own reply decoded, the others framed as before.
        let (mut c, _) = codec(1 << 20, &[]);
        c.own = Some((8, 1));
        let (frames, _) = feed(&mut c, text.as_bytes(), text.len());
        let seen = kinds(&frames);
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert!(seen[0].starts_with("message Some(b\"null\""), "{seen:?}");
        assert_eq!(seen[1], format!("transaction 8 {uuid}"));
        assert!(seen[2].starts_with("message Some(b\"9\""), "{seen:?}");
        // Arriving in pieces: framed the general way, nothing lost or doubled.
        let (mut c, _) = codec(1 << 20, &[]);
        c.own = Some((8, 1));
        let (frames, _) = feed(&mut c, text.as_bytes(), 7);
        let seen = kinds(&frames);
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert!(seen[1].starts_with("message Some(b\"8\""), "{seen:?}");
        // A reply over the size limit is refused as it always was.
        let (mut c, _) = codec(own.len() - 1, &[]);
        c.own = Some((8, 1));
        let mut buf = BytesMut::from(own.as_bytes());
        assert!(c.decode(&mut buf).is_err());
    }

    #[test]
    fn a_tapped_reply_leaves_in_pieces_as_it_arrives_and_others_stay_whole() {
        let (mut c, _rx) = codec(1 << 20, &[7]);
        let reply = big_reply(7, 10_000);
        let text = format!(
            "{{\"id\":null,\"method\":\"update\",\"params\":[]}}{reply} {{\"id\":8,\"result\":[],\"error\":null}}"
        );
        let (frames, most) = feed(&mut c, text.as_bytes(), 4096);
        let mut joined = Vec::new();
        let mut whole = Vec::new();
        let mut lasts = 0;
        for f in frames {
            match f {
                Frame::Piece {
                    id, bytes, last, ..
                } => {
                    assert_eq!(id, 7);
                    joined.extend_from_slice(&bytes);
                    lasts += usize::from(last);
                }
                Frame::Message(m) => whole.push(m),
                Frame::Transact { id, .. } => panic!("no transaction is read as its own: {id}"),
            }
        }
        assert_eq!(
            joined,
            reply.as_bytes(),
            "the pieces are the reply, in order"
        );
        assert_eq!(lasts, 1);
        assert_eq!(whole.len(), 2, "the notification and the untapped reply");
        assert_eq!(&whole[1].member("id").unwrap()[..], b"8");
        // The buffer never held more than a read and what was left of the last.
        assert!(most <= 2 * 4096, "the buffer grew to {most}");
        assert!(reply.len() > 50_000);
    }

    #[test]
    fn the_size_limit_holds_for_a_tapped_reply_too() {
        let (mut c, _rx) = codec(10_000, &[7]);
        let reply = big_reply(7, 10_000);
        let mut buf = BytesMut::new();
        let mut err = None;
        for piece in reply.as_bytes().chunks(1024) {
            buf.extend_from_slice(piece);
            match c.decode(&mut buf) {
                Ok(_) => {}
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        assert!(
            matches!(err, Some(CodecError::TooLong { limit: 10_000 })),
            "{err:?}"
        );
    }

    #[test]
    fn a_reply_whose_id_comes_last_goes_to_its_tap_whole() {
        let (mut c, _rx) = codec(1 << 20, &[3]);
        let text = "{\"result\":[1,2,3],\"error\":null,\"id\":3}";
        let (frames, _) = feed(&mut c, text.as_bytes(), 5);
        let [Frame::Piece { bytes, last, .. }] = &frames[..] else {
            panic!("{frames:?}")
        };
        assert!(*last);
        assert_eq!(&bytes[..], text.as_bytes());
    }
}
