//! A big table's rows decoded on every core. The thread reading the reply only finds
//! each row's text (a cutter already did, or serde, checking it is JSON) and hands rows
//! over in batches; workers build the cached rows from those slices, which serde reads
//! several times faster than a stream. The rows come out in the order the server sent
//! them, and an error is the first one in that order, as a decoder on one thread would
//! report it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use serde::de::MapAccess;
use serde_json::value::RawValue;
use uuid::Uuid;

use super::{Entry, Form, Order, RowChange, UuidKey};
use crate::cache::row::Layout;
use crate::cut::RowTexts;

/// Rows handed to a worker at a time.
const BATCH: usize = 256;

/// One row as the reader found it.
enum Found {
    /// Its text, read by serde.
    Text(Box<RawValue>),
    /// Its text cut out of the reply, or the row the cutter left in place.
    Entry(Entry),
}

/// One batch: its place in the reply, and each row's uuid and what was found of it.
type Batch = (usize, Vec<(Uuid, Found)>);

/// What a worker made of one batch.
type Decoded = (usize, Result<Vec<(Uuid, RowChange)>, String>);

/// Decodes the rest of a table's rows from `map` (a serde_json map of `uuid: change`,
/// the form's row changes, or with `texts` the numbers of rows cut out) on worker
/// threads, appending them to `rows`. False, with nothing read, when no worker thread
/// could be started: the caller decodes the rows itself.
pub(super) fn rest_of_table<'de, A: MapAccess<'de>>(
    layout: &Arc<Layout>,
    form: Form,
    texts: Option<&RowTexts>,
    map: &mut A,
    rows: &mut Vec<(Uuid, RowChange)>,
) -> Result<bool, A::Error> {
    let workers = workers();
    let failed = AtomicBool::new(false);
    let (to_workers, from_reader) = mpsc::sync_channel::<Batch>(2 * workers.max(1));
    // Held by the workers alone: should they all end early (a panic), the reader's
    // next send fails instead of waiting for ever.
    let from_reader = Arc::new(Mutex::new(from_reader));
    let (done, decoded) = mpsc::channel::<Decoded>();
    let ran = std::thread::scope(|s| {
        let mut started = 0;
        for _ in 0..workers {
            let (from_reader, done, failed) = (from_reader.clone(), done.clone(), &failed);
            let worker = std::thread::Builder::new()
                .name("ovsdb-decode".into())
                .spawn_scoped(s, move || work(layout, form, &from_reader, done, failed));
            if worker.is_ok() {
                started += 1;
            }
        }
        drop((done, from_reader));
        if started == 0 {
            return None;
        }
        let (batches, read) = hand_over(layout, form, texts, map, &to_workers, &failed);
        drop(to_workers);
        // Every worker ends once the batches run out; all of them are in by then.
        Some((batches, decoded.iter().collect::<Vec<_>>(), read))
    });
    let Some((batches, mut decoded, read)) = ran else {
        return Ok(false);
    };
    decoded.sort_unstable_by_key(|(n, _)| *n);
    // A worker's error comes first: every batch it saw was read before the reader
    // stopped.
    if let Some((_, Err(e))) = decoded.iter().find(|(_, r)| r.is_err()) {
        return Err(serde::de::Error::custom(e));
    }
    read?;
    debug_assert_eq!(decoded.len(), batches);
    for (_, r) in decoded {
        rows.extend(r.expect("errors returned above"));
    }
    Ok(true)
}

#[cfg(test)]
thread_local! {
    /// How many workers to start, in place of one per core (for tests).
    static WORKERS: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// How many workers to start: one per core.
fn workers() -> usize {
    #[cfg(test)]
    if let Some(n) = WORKERS.with(|w| w.get()) {
        return n;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Reads the rows of `map` and sends them to the workers in batches, until the map
/// ends, a worker fails or the text is not JSON; returns how many batches it sent.
fn hand_over<'de, A: MapAccess<'de>>(
    layout: &Arc<Layout>,
    form: Form,
    texts: Option<&RowTexts>,
    map: &mut A,
    to_workers: &mpsc::SyncSender<Batch>,
    failed: &AtomicBool,
) -> (usize, Result<(), A::Error>) {
    let mut sent = 0;
    let mut batch = Vec::with_capacity(BATCH);
    let order = Order::default();
    loop {
        let uuid = match map.next_key_seed(UuidKey(&layout.table)) {
            Ok(Some(uuid)) => uuid,
            Ok(None) => break,
            Err(e) => return (sent, Err(e)),
        };
        let found = match texts {
            None => map.next_value::<Box<RawValue>>().map(Found::Text),
            Some(texts) => form
                .cut_entry(map, texts, layout, &uuid, &order)
                .map(Found::Entry),
        };
        match found {
            Ok(found) => batch.push((uuid, found)),
            Err(e) => return (sent, Err(e)),
        }
        if batch.len() == BATCH {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            if failed.load(Ordering::Relaxed) || to_workers.send((sent, full)).is_err() {
                return (sent, Ok(()));
            }
            sent += 1;
        }
    }
    if !batch.is_empty() && to_workers.send((sent, batch)).is_ok() {
        sent += 1;
    }
    (sent, Ok(()))
}

/// A worker: decodes batches until there are none left or one fails.
fn work(
    layout: &Arc<Layout>,
    form: Form,
    from_reader: &Mutex<mpsc::Receiver<Batch>>,
    done: mpsc::Sender<Decoded>,
    failed: &AtomicBool,
) {
    let order = Order::default();
    loop {
        // The lock is held only while waiting for one batch.
        let next = match from_reader.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok((n, batch)) = next else { return };
        let result = batch
            .into_iter()
            .map(|(uuid, found)| {
                let change = match found {
                    Found::Text(text) => form.decode(layout, &uuid, &order, text.get().as_bytes()),
                    Found::Entry(Entry::Text(text)) => form.decode(layout, &uuid, &order, &text),
                    Found::Entry(Entry::Row(change)) => Ok(change),
                }?;
                Ok((uuid, change))
            })
            .collect::<Result<Vec<_>, String>>();
        if result.is_err() {
            failed.store(true, Ordering::Relaxed);
        }
        if done.send((n, result)).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use serde::de::DeserializeSeed;
    use serde_json::json;
    use uuid::Uuid;

    use crate::cache::decode::{Form, RowChange, SinceSeed, UpdatesSeed};
    use crate::cache::row::{CachedRow, Layout, Layouts};
    use crate::cut::{RowTexts, ROWS, SINCE_ROWS};
    use crate::schema::DatabaseSchema;
    use crate::tap::{decode_reply, Cut};
    use crate::test_rng::Rng;

    fn layouts() -> Layouts {
        let schema =
            DatabaseSchema::from_json(&json!({"name": "D", "version": "1.0.0", "tables": {
                "T": {"columns": {
                    "name": {"type": "string"},
                    "tags": {"type": {"key": "string", "min": 0, "max": "unlimited"}},
                    "n": {"type": {"key": {"type": "integer", "maxInteger": 1000}}},
                    "peer": {"type": {"key": "uuid", "min": 0, "max": 1}}
                }}
            }}))
            .unwrap();
        let t = schema.table("T").unwrap();
        let cols: Vec<String> = t.columns.keys().cloned().collect();
        [("T".to_string(), Arc::new(Layout::new(t, &cols).unwrap()))].into()
    }

    fn uuid(i: usize) -> Uuid {
        Uuid::from_u128(0x1000_0000 + i as u128)
    }

    /// Row `i`'s columns, with strings that hold braces, quotes and escapes.
    fn columns(i: usize) -> serde_json::Value {
        let tags: Vec<String> = (0..i % 4).map(|t| format!("t{t}}}{{\"\\")).collect();
        json!({"name": format!("r{i} {{\"}}[ \u{e9}"), "tags": ["set", tags], "n": i % 1000})
    }

    /// `{"T": {uuid: {kind: row}}}` for `n` rows; `bad` replaces rows' columns.
    fn tables(n: usize, kind: &str, bad: &[(usize, serde_json::Value)]) -> serde_json::Value {
        let rows: serde_json::Map<String, serde_json::Value> = (0..n)
            .map(|i| {
                let row = bad
                    .iter()
                    .find(|(at, _)| *at == i)
                    .map_or_else(|| columns(i), |(_, row)| row.clone());
                (uuid(i).to_string(), json!({ kind: row }))
            })
            .collect();
        json!({ "T": rows })
    }

    fn rows(changes: Vec<crate::cache::decode::TableChanges>) -> Vec<(Uuid, CachedRow)> {
        changes
            .into_iter()
            .flat_map(|t| t.rows)
            .map(|(u, c)| match c {
                RowChange::New(row) => (u, row),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    /// A reply message as the cache reads it: in 4 KiB pieces from another thread,
    /// the rows cut out.
    fn tapped(message: String, since: bool) -> Result<Vec<(Uuid, CachedRow)>, String> {
        streamed(message.into_bytes(), since, true).map(rows)
    }

    /// A reply message read as it streams in 4 KiB pieces, with its rows cut out or
    /// (`cut` false) read whole by serde.
    fn streamed(
        message: Vec<u8>,
        since: bool,
        cut: bool,
    ) -> Result<Vec<crate::cache::decode::TableChanges>, String> {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let feeder = std::thread::spawn(move || {
            let message = Bytes::from(message);
            for at in (0..message.len()).step_by(4096) {
                let end = (at + 4096).min(message.len());
                if tx.blocking_send(message.slice(at..end)).is_err() {
                    return;
                }
            }
        });
        let texts = cut.then(RowTexts::default);
        let cut_at = |path| texts.clone().map(|rows| Cut { path, rows });
        let decoded = if since {
            decode_reply(rx, SinceSeed(layouts(), texts.clone()), cut_at(SINCE_ROWS))
                .map(|r| r.map(|s| s.updates))
        } else {
            decode_reply(
                rx,
                UpdatesSeed(layouts(), Form::Update, texts.clone()),
                cut_at(ROWS),
            )
        };
        feeder.join().unwrap();
        match decoded {
            Ok(Ok(changes)) => Ok(changes),
            Ok(Err(server)) => Err(format!("server error {server}")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Table updates in `form` read from one slice (the rows found by serde).
    fn sliced(text: &str, form: Form) -> Result<Vec<(Uuid, CachedRow)>, String> {
        let mut de = serde_json::Deserializer::from_str(text);
        UpdatesSeed(layouts(), form, None)
            .deserialize(&mut de)
            .map(rows)
            .map_err(|e| e.to_string())
    }

    /// Table updates read from a `serde_json::Value`.
    fn from_value(value: &serde_json::Value, form: Form) -> Result<Vec<(Uuid, CachedRow)>, String> {
        UpdatesSeed(layouts(), form, None)
            .deserialize(value)
            .map(rows)
            .map_err(|e| e.to_string())
    }

    const N: usize = 3000;

    #[test]
    fn a_big_table_decodes_the_same_in_order_on_every_path() {
        // Each row alone, in a table of one: decoded on the reading thread.
        let alone: Vec<(Uuid, CachedRow)> = (0..N)
            .flat_map(|i| {
                let one = json!({"T": {uuid(i).to_string(): {"new": columns(i)}}});
                sliced(&one.to_string(), Form::Update).unwrap()
            })
            .collect();
        assert_eq!(alone.len(), N);
        let plain = tables(N, "new", &[]);
        let two = tables(N, "initial", &[]);
        let message = json!({"id": 7, "result": plain, "error": null}).to_string();
        let since = json!({"result": [false, Uuid::nil().to_string(), two], "id": 7}).to_string();
        assert!(tapped(message, false).unwrap() == alone, "tapped");
        assert!(tapped(since, true).unwrap() == alone, "tapped, since");
        assert!(
            sliced(&plain.to_string(), Form::Update).unwrap() == alone,
            "slice"
        );
        assert!(
            sliced(&two.to_string(), Form::Update2).unwrap() == alone,
            "slice, update2"
        );
        assert!(from_value(&plain, Form::Update).unwrap() == alone, "value");
    }

    #[test]
    fn with_no_worker_thread_a_big_table_is_decoded_on_the_reading_thread() {
        let plain = tables(N, "new", &[]);
        let message = json!({"id": 7, "result": plain, "error": null}).to_string();
        let tapped_by_workers = tapped(message.clone(), false).unwrap();
        let sliced_by_workers = sliced(&plain.to_string(), Form::Update).unwrap();
        // On a thread of its own, where no worker may start; in time, or it hangs.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            super::WORKERS.with(|w| w.set(Some(0)));
            let _ = tx.send((
                tapped(message, false),
                sliced(&plain.to_string(), Form::Update),
            ));
        });
        let (tapped_here, sliced_here) = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("decoded without workers within a minute");
        assert_eq!(tapped_by_workers.len(), N);
        assert!(tapped_here.unwrap() == tapped_by_workers, "tapped");
        assert!(sliced_here.unwrap() == sliced_by_workers, "slice");
    }

    #[test]
    fn the_first_bad_row_of_a_big_table_fails_it_by_name_on_every_path() {
        let bad = [
            (2200, json!({"name": "x", "n": 5000})),
            (1500, json!({"name": "y", "n": 5001})),
            (2900, json!({"name": 1})),
        ];
        let plain = tables(N, "new", &bad);
        let message = json!({"id": 7, "result": plain, "error": null}).to_string();
        let first = format!("table T row {} column n: 5001 does not fit", uuid(1500));
        for (path, e) in [
            ("tapped", tapped(message, false).unwrap_err()),
            (
                "slice",
                sliced(&plain.to_string(), Form::Update).unwrap_err(),
            ),
            ("value", from_value(&plain, Form::Update).unwrap_err()),
        ] {
            assert!(e.contains(&first), "{path}: {e}");
        }
    }

    #[test]
    fn a_named_uuid_from_the_server_fails_the_table_by_row_and_column_on_every_path() {
        // RFC 7047 §5.1: a named-uuid exists only in requests.
        let bad = [(1700, json!({"name": "x", "peer": ["named-uuid", "row1"]}))];
        let plain = tables(N, "new", &bad);
        let message = json!({"id": 7, "result": plain, "error": null}).to_string();
        let want = format!(
            "table T row {} column peer: [\"named-uuid\",\"row1\"] holds a named-uuid",
            uuid(1700)
        );
        for (path, e) in [
            ("tapped", tapped(message, false).unwrap_err()),
            (
                "slice",
                sliced(&plain.to_string(), Form::Update).unwrap_err(),
            ),
            ("value", from_value(&plain, Form::Update).unwrap_err()),
        ] {
            assert!(e.contains(&want), "{path}: {e}");
        }
        // A real uuid there is a value like any other.
        let good = [(
            1700,
            json!({"name": "x", "peer": ["uuid", uuid(1).to_string()]}),
        )];
        assert!(from_value(&tables(N, "new", &good), Form::Update).is_ok());
    }

    #[test]
    fn invalid_json_inside_or_after_the_rows_of_a_big_table_fails_it() {
        let plain = tables(N, "new", &[]).to_string();
        let row = format!("\"{}\":{{\"new\":", uuid(2000));
        let at = plain.find(&row).unwrap() + row.len();
        let cases = [
            // A row with a trailing comma, and one with its object unclosed in an array.
            format!("{}{{\"name\":\"a\",}},{}", &plain[..at], &plain[at..]),
            plain.replacen(&row, &format!("{row}{{\"tags\":[\"set\",[\"a\"}}],"), 1),
            // Bad text after the last row.
            format!("{}]", &plain[..plain.len() - 1]),
        ];
        for text in cases {
            let message = format!("{{\"id\":7,\"result\":{text},\"error\":null}}");
            assert!(tapped(message, false).is_err(), "tapped: {text:.80}");
            assert!(sliced(&text, Form::Update).is_err(), "slice");
        }
    }

    #[test]
    fn duplicate_and_escaped_members_are_read_the_same_cut_and_whole() {
        // Replies found by fuzzing, or built to defeat a cutter that compares names as
        // bytes; `true` where the reply is good.
        let row = json!({"new": columns(0)}).to_string();
        let (u, v) = (uuid(0), uuid(1));
        for (text, good) in [
            // A number in a row's place, with a second result holding a row behind it.
            (
                format!(
                    r#"{{"id":7,"result":{{"T":{{"{u}":0}}}},"result":{{"T":{{"{u}":{row}}}}},"error":null}}"#
                ),
                false,
            ),
            (
                format!(
                    r#"{{"id":7,"re\u0073ult":{{"T":{{"{u}":0}}}},"result":{{"T":{{"{u}":{row}}}}},"error":null}}"#
                ),
                false,
            ),
            (
                format!(r#"{{"id":7,"result":{{"T":{{"{u}":0,"{v}":{row}}}}},"error":null}}"#),
                false,
            ),
            // Two good results: the first is the reply's, on both paths.
            (
                format!(
                    r#"{{"id":7,"result":{{"T":{{"{u}":{row}}}}},"result":{{"T":{{"{v}":{row}}}}},"error":null}}"#
                ),
                true,
            ),
            (
                format!(r#"{{"id":7,"r\u0065sult":{{"T":{{"{u}":{row}}}}},"error":null}}"#),
                true,
            ),
        ] {
            let cut = streamed(text.clone().into_bytes(), false, true).map(rows);
            let whole = streamed(text.clone().into_bytes(), false, false).map(rows);
            assert_eq!(cut.is_ok(), good, "{text}: {cut:?}");
            assert_eq!(whole.is_ok(), good, "{text}: {whole:?}");
            if let (Ok(a), Ok(b)) = (&cut, &whole) {
                assert!(a == b, "{text}");
                assert_eq!(a.len(), 1);
                assert_eq!(a[0].0, u);
            }
        }
    }

    /// `message` with one byte deleted, inserted or replaced, the new byte one the
    /// cutter or the parser cares about.
    fn mutated(message: &[u8], rng: &mut Rng) -> Vec<u8> {
        const BYTES: &[u8] = b"{}[]\":,\\ 0tn\xff";
        let mut m = message.to_vec();
        let at = rng.below(m.len());
        let byte = BYTES[rng.below(BYTES.len())];
        match rng.below(3) {
            0 => {
                m.remove(at);
            }
            1 => m.insert(at, byte),
            _ => m[at] = byte,
        }
        m
    }

    #[test]
    fn cutting_the_rows_out_accepts_and_decodes_exactly_what_reading_whole_does() {
        // Differential: thousands of one-byte mutations of a reply, each read with
        // its rows cut out and read whole by serde. The two agree on whether the reply
        // is good and, when it is, on every row. A big table's rows go to workers.
        let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
        for (rows, since, rounds) in [(12, false, 2500), (12, true, 2500), (700, false, 150)] {
            let tables = tables(rows, if since { "initial" } else { "new" }, &[]);
            let message = if since {
                json!({"id": 7, "result": [false, Uuid::nil().to_string(), tables], "error": null})
            } else {
                json!({"id": 7, "result": tables, "error": null})
            }
            .to_string()
            .into_bytes();
            for round in 0..rounds {
                let m = if round == 0 {
                    message.clone()
                } else {
                    mutated(&message, &mut rng)
                };
                let cut = streamed(m.clone(), since, true);
                let whole = streamed(m.clone(), since, false);
                let show = || String::from_utf8_lossy(&m).into_owned();
                match (&cut, &whole) {
                    (Ok(a), Ok(b)) => assert_eq!(format!("{a:?}"), format!("{b:?}"), "{}", show()),
                    (Err(_), Err(_)) => {}
                    _ => panic!(
                        "cut {:?}, whole {:?}: {}",
                        cut.as_ref().map(|_| ()),
                        whole.as_ref().map(|_| ()),
                        show()
                    ),
                }
                if round == 0 {
                    assert!(cut.is_ok(), "the unmutated reply decodes");
                }
            }
        }
    }
}
