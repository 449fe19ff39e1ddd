//! The monitor-reply decoder as the cache reads a reply: rows cut out of the stream and
//! decoded from slices, against the same reply read whole by serde.
//!
//! Input: byte 0 sets the size of the pieces the reply arrives in (1 to 256 bytes), the
//! rest is the reply message. Checked: cut in pieces, cut in one piece and read whole
//! agree on whether the reply is good and, when it is, on every row in order.

use std::sync::OnceLock;

use ovsdb_proto::cache::__decode_reply;
use ovsdb_proto::DatabaseSchema;

/// A database whose one table has a column of each kind the decoder reads.
fn schema() -> &'static DatabaseSchema {
    static SCHEMA: OnceLock<DatabaseSchema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        DatabaseSchema::from_json(&serde_json::json!({
            "name": "D", "version": "1.0.0", "tables": {"T": {"columns": {
                "name": {"type": "string"},
                "tags": {"type": {"key": "string", "min": 0, "max": "unlimited"}},
                "n": {"type": {"key": {"type": "integer", "maxInteger": 1000}}},
                "opts": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}},
                "r": {"type": {"key": "real", "min": 0, "max": 1}},
                "peer": {"type": {"key": {"type": "uuid"}, "min": 0, "max": 1}}
            }}}
        }))
        .expect("the fuzz schema")
    })
}

/// The check; see the module docs.
pub fn check(data: &[u8]) {
    let [piece, message @ ..] = data else {
        return;
    };
    let piece = 1 + usize::from(*piece);
    let cut = __decode_reply(schema(), message, piece, true);
    let cut_whole = __decode_reply(schema(), message, message.len(), true);
    let whole = __decode_reply(schema(), message, message.len(), false);
    let text = String::from_utf8_lossy(message);
    for (how, other) in [("in one piece", &cut_whole), ("read whole", &whole)] {
        match (&cut, other) {
            (Ok(a), Ok(b)) => assert!(a == b, "cut in pieces and {how} differ: {text}"),
            (Err(_), Err(_)) => {}
            _ => panic!(
                "cut in {piece}-byte pieces: {:?}; {how}: {:?}; reply: {text}",
                cut.as_ref().map(|r| r.len()),
                other.as_ref().map(|r| r.len())
            ),
        }
    }
}
