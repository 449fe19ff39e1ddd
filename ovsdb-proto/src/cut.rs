//! Rows cut out of a reply while it streams. serde_json reads a stream a byte at a time
//! and is several times slower at it than at reading a slice, so a big monitor reply is
//! not handed to it whole: a cutter between the pieces and the parser takes each row
//! (the object at a given path, such as `result`/`2`/table/uuid) out of the text and puts
//! its number in its place. The parser reads the small remainder (the envelope, the
//! tables, the uuids) and the decoder reads each row from its own slice, on as many
//! threads as it likes.
//!
//! The cutter only matches braces, outside strings; it checks nothing. A row whose text
//! is not one JSON object fails when it is decoded, and whatever else is wrong fails in
//! the parser, so the reply is accepted exactly when it would have been whole. Two things
//! keep that true against a server that tries otherwise: member names are compared as
//! JSON strings (`"re\u0073ult"` is `result`), and a scalar found in a row's place
//! leaves a mark in the queue of rows, so a number the server wrote there is never taken
//! for one the cutter left (say, with the rows of a second `result` member behind it).

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

/// One step of the path to the rows, from the reply object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The member of this name.
    Key(&'static str),
    /// The array element at this index.
    Index(usize),
    /// Every member.
    AnyKey,
}

/// `monitor_cond_since`'s rows: `{"result": [found, last-txn-id, {table: {uuid: row}}]}`.
pub(crate) const SINCE_ROWS: &[Step] = &[
    Step::Key("result"),
    Step::Index(2),
    Step::AnyKey,
    Step::AnyKey,
];

/// The longest member name a path names.
const LONGEST_KEY: usize = 6;

/// How much of a member name is kept: the longest a path names, each character written
/// as a six-byte escape, and one byte more, so that a longer name never matches.
const KEPT_KEY: usize = 6 * LONGEST_KEY + 1;

/// `monitor` and `monitor_cond`'s rows: `{"result": {table: {uuid: row}}}`.
pub(crate) const ROWS: &[Step] = &[Step::Key("result"), Step::AnyKey, Step::AnyKey];

/// The rows cut out of one reply, in order, for its decoder to take. Cutter and decoder
/// are on one thread; the lock is never contended.
#[derive(Clone, Debug, Default)]
pub(crate) struct RowTexts(Arc<Mutex<VecDeque<CutRow>>>);

/// What stood in a row's place, in the order of the text.
#[derive(Debug)]
enum CutRow {
    /// A row cut out: its number and its text.
    Row(u64, Bytes),
    /// A scalar the server wrote where a row goes: left in place, never a row.
    Scalar,
}

impl RowTexts {
    /// The text of the row the parser read number `n` in place of.
    pub(crate) fn take(&self, n: u64) -> Result<Bytes, String> {
        let mut rows = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match rows.pop_front() {
            Some(CutRow::Row(m, text)) if m == n => Ok(text),
            Some(CutRow::Scalar) => Err(format!("a row is the number {n}, not a JSON object")),
            _ => Err(format!("row {n} of the reply was not cut out")),
        }
    }

    fn put(&self, row: CutRow) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(row);
    }
}

/// What a container of the text expects next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    Key,
    Colon,
    Value,
    Comma,
}

/// An object or array the cutter is inside of.
#[derive(Debug)]
struct Level {
    object: bool,
    /// The current element of an array.
    index: usize,
    /// The current member's name, while it is one the path names.
    key: Vec<u8>,
    expect: Expect,
    /// Whether this container is on the path (it and its parents matched their steps).
    on_path: bool,
}

/// Where the cutter is in the text.
#[derive(Debug)]
enum Mode {
    Structure,
    /// In a string outside a row; `key` when it is a member name being kept.
    String {
        key: bool,
        escaped: bool,
    },
    /// In a row: its brace depth, and whether in a string.
    Row {
        depth: usize,
        string: bool,
        escaped: bool,
    },
}

/// A [`Read`] of the pieces of a reply with its rows cut out (see the module docs).
pub(crate) struct RowCutter<I> {
    pieces: I,
    piece: Bytes,
    path: &'static [Step],
    rows: RowTexts,
    stack: Vec<Level>,
    mode: Mode,
    /// Where in the piece being scanned the row being cut starts, if it starts there.
    row_start: Option<usize>,
    /// The part of the row being cut that earlier pieces held; a row within one piece
    /// is a slice of it, not a copy.
    row: Vec<u8>,
    /// How many rows were cut.
    cut: u64,
    /// Text for the parser, not yet read, from `at`.
    out: Vec<u8>,
    at: usize,
    /// Containers open past [`DEEPEST`], counted, not kept.
    deeper: usize,
}

/// The most containers the cutter keeps track of: more than any path to rows, and past
/// serde_json's own limit, so a text nested deeper fails in the parser, while the
/// cutter's memory stays bounded whatever the nesting.
const DEEPEST: usize = 256;

impl<I: Iterator<Item = Bytes>> RowCutter<I> {
    /// Cuts the objects at `path` out of the reply in `pieces` into `rows`.
    pub(crate) fn new(pieces: I, path: &'static [Step], rows: RowTexts) -> Self {
        RowCutter {
            pieces,
            piece: Bytes::new(),
            path,
            rows,
            stack: Vec::new(),
            mode: Mode::Structure,
            row_start: None,
            row: Vec::new(),
            cut: 0,
            out: Vec::new(),
            at: 0,
            deeper: 0,
        }
    }

    /// Whether a value starting now in the innermost container is on the path, and
    /// whether it is a row.
    fn value_on_path(&self) -> (bool, bool) {
        let depth = self.stack.len();
        let Some(top) = self.stack.last() else {
            // The reply itself is the root of the path.
            return (true, self.path.is_empty());
        };
        let matches = top.on_path
            && match self.path.get(depth - 1) {
                Some(Step::Key(name)) => top.object && top.key == name.as_bytes(),
                Some(Step::Index(i)) => !top.object && top.index == *i,
                Some(Step::AnyKey) => top.object,
                None => false,
            };
        (matches, matches && depth == self.path.len())
    }

    /// Whether the member name now starting is one to keep (the path names it).
    fn keeps_key(&self) -> bool {
        let depth = self.stack.len();
        self.stack.last().is_some_and(|top| {
            top.on_path && matches!(self.path.get(depth - 1), Some(Step::Key(_)))
        })
    }

    /// Cuts one piece: its structure goes to `out`, its rows to `rows`.
    fn scan(&mut self, piece: &Bytes) {
        let mut i = 0;
        while i < piece.len() {
            i = match self.mode {
                Mode::Row { .. } => self.scan_row(piece, i),
                Mode::String { .. } => self.scan_string(piece, i),
                Mode::Structure => self.scan_structure(piece, i),
            };
        }
        // A row whose `{` ended the piece goes on in the next one.
        if let Some(start) = self.row_start.take() {
            self.row.extend_from_slice(&piece[start..]);
        }
    }

    /// In a row, from `i`: to its end (cut out, its number written in its place) or
    /// to the end of the piece (kept for the next). Returns where scanning goes on.
    #[inline]
    fn scan_row(&mut self, piece: &Bytes, mut i: usize) -> usize {
        let Mode::Row {
            depth,
            string,
            escaped,
        } = &mut self.mode
        else {
            return i;
        };
        let start = self.row_start.take().unwrap_or(i);
        let mut done = false;
        while i < piece.len() {
            if *escaped {
                *escaped = false;
                i += 1;
            } else if *string {
                match memchr::memchr2(b'"', b'\\', &piece[i..]) {
                    None => i = piece.len(),
                    Some(j) => {
                        i += j;
                        if piece[i] == b'\\' {
                            *escaped = true;
                        } else {
                            *string = false;
                        }
                        i += 1;
                    }
                }
            } else {
                match memchr::memchr3(b'"', b'{', b'}', &piece[i..]) {
                    None => i = piece.len(),
                    Some(j) => {
                        i += j;
                        match piece[i] {
                            b'"' => *string = true,
                            b'{' => *depth += 1,
                            _ => {
                                *depth -= 1;
                                if *depth == 0 {
                                    i += 1;
                                    done = true;
                                    break;
                                }
                            }
                        }
                        i += 1;
                    }
                }
            }
        }
        if !done {
            self.row.extend_from_slice(&piece[start..i]);
            return i;
        }
        let text = if self.row.is_empty() {
            piece.slice(start..i)
        } else {
            self.row.extend_from_slice(&piece[start..i]);
            Bytes::from(std::mem::take(&mut self.row))
        };
        self.rows.put(CutRow::Row(self.cut, text));
        // Cannot fail: writing to a vector.
        let _ = write!(self.out, "{}", self.cut);
        self.cut += 1;
        self.mode = Mode::Structure;
        self.value_done();
        i
    }

    /// In a string of the structure, from `i`: to its closing quote or the end of the
    /// piece; a member name on the path is kept. Returns where scanning goes on.
    #[inline]
    fn scan_string(&mut self, piece: &Bytes, mut i: usize) -> usize {
        let Mode::String { key, escaped } = &mut self.mode else {
            return i;
        };
        let start = i;
        let mut ended = false;
        while i < piece.len() {
            if *escaped {
                *escaped = false;
                i += 1;
                continue;
            }
            match memchr::memchr2(b'"', b'\\', &piece[i..]) {
                None => i = piece.len(),
                Some(j) => {
                    i += j;
                    if piece[i] == b'\\' {
                        *escaped = true;
                        i += 1;
                    } else {
                        ended = true;
                        break;
                    }
                }
            }
        }
        let key = *key;
        self.out.extend_from_slice(&piece[start..i]);
        if key {
            if let Some(top) = self.stack.last_mut() {
                // Past the longest name a path has, a member name cannot match: what
                // is kept stops growing there.
                let room = KEPT_KEY - top.key.len().min(KEPT_KEY);
                let part = &piece[start..i];
                top.key.extend_from_slice(&part[..part.len().min(room)]);
            }
        }
        if !ended {
            return i;
        }
        self.out.push(b'"');
        self.mode = Mode::Structure;
        if key {
            if let Some(top) = self.stack.last_mut() {
                unescape_name(&mut top.key);
            }
        }
        match self.stack.last_mut() {
            Some(top) if top.object && top.expect == Expect::Key => top.expect = Expect::Colon,
            _ => self.value_done(),
        }
        i + 1
    }

    /// One byte of the structure at `i`. Returns where scanning goes on.
    #[inline]
    fn scan_structure(&mut self, piece: &Bytes, i: usize) -> usize {
        let b = piece[i];
        match b {
            b'"' => {
                self.out.push(b);
                let key = self
                    .stack
                    .last()
                    .is_some_and(|t| t.object && t.expect == Expect::Key);
                let keep = key && self.keeps_key();
                if let Some(top) = self.stack.last_mut() {
                    top.key.clear();
                }
                self.mode = Mode::String {
                    key: keep,
                    escaped: false,
                };
            }
            b'{' | b'[' => self.open(b, i),
            b'}' | b']' => {
                self.out.push(b);
                if self.deeper > 0 {
                    self.deeper -= 1;
                } else {
                    self.stack.pop();
                }
                self.value_done();
            }
            b':' => {
                self.out.push(b);
                if let Some(top) = self.stack.last_mut() {
                    top.expect = Expect::Value;
                }
            }
            b',' => {
                self.out.push(b);
                if let Some(top) = self.stack.last_mut() {
                    if top.object {
                        top.expect = Expect::Key;
                    } else {
                        top.index += 1;
                        top.expect = Expect::Value;
                    }
                }
            }
            _ => {
                self.out.push(b);
                let starts_value = !b.is_ascii_whitespace()
                    && self.stack.last().is_some_and(|t| t.expect == Expect::Value);
                if starts_value && self.value_on_path().1 {
                    self.rows.put(CutRow::Scalar);
                    self.value_done();
                }
            }
        }
        i + 1
    }

    /// `b`, a `{` or `[` at `i`, opens a row or a container of the structure.
    #[inline]
    fn open(&mut self, b: u8, i: usize) {
        let (on_path, row) = self.value_on_path();
        if row && b == b'{' {
            self.row_start = Some(i);
            self.mode = Mode::Row {
                depth: 1,
                string: false,
                escaped: false,
            };
        } else if self.stack.len() >= DEEPEST {
            self.out.push(b);
            self.deeper += 1;
        } else {
            self.out.push(b);
            let object = b == b'{';
            self.stack.push(Level {
                object,
                index: 0,
                key: Vec::new(),
                expect: if object { Expect::Key } else { Expect::Value },
                on_path,
            });
        }
    }

    /// A value ended (or, for a scalar, is known to be under way) in the innermost
    /// container.
    fn value_done(&mut self) {
        if let Some(top) = self.stack.last_mut() {
            top.expect = Expect::Comma;
        }
    }
}

impl<I: Iterator<Item = Bytes>> Read for RowCutter<I> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.out.len() {
            self.out.clear();
            self.at = 0;
            if self.piece.is_empty() {
                match self.pieces.next() {
                    Some(piece) => self.piece = piece,
                    // The end; a row cut short stays unread, so the parser reports the
                    // reply cut short.
                    None => return Ok(0),
                }
            }
            let piece = std::mem::take(&mut self.piece);
            self.scan(&piece);
        }
        let n = buf.len().min(self.out.len() - self.at);
        buf[..n].copy_from_slice(&self.out[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Turns a kept member name (its text between the quotes) into the name it stands for
/// when it has escapes; a name too long to match, or not a valid string, is left as it is
/// (it then matches nothing a path names: those have no backslash).
fn unescape_name(name: &mut Vec<u8>) {
    if !name.contains(&b'\\') || name.len() >= KEPT_KEY {
        return;
    }
    let mut quoted = Vec::with_capacity(name.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(name);
    quoted.push(b'"');
    if let Ok(plain) = serde_json::from_slice::<String>(&quoted) {
        *name = plain.into_bytes();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` in `step`-byte pieces.
    fn pieces(text: &str, step: usize) -> std::vec::IntoIter<Bytes> {
        let pieces: Vec<Bytes> = text
            .as_bytes()
            .chunks(step)
            .map(Bytes::copy_from_slice)
            .collect();
        pieces.into_iter()
    }

    /// The text the parser reads and the rows cut, for `text` fed in `step`-byte pieces.
    fn cut(text: &str, path: &'static [Step], step: usize) -> (String, Vec<String>) {
        let rows = RowTexts::default();
        let mut cutter = RowCutter::new(pieces(text, step), path, rows.clone());
        let mut out = String::new();
        cutter.read_to_string(&mut out).unwrap();
        let texts = (0..cutter.cut)
            .map(|n| loop {
                match rows.take(n) {
                    Ok(text) => break String::from_utf8(text.to_vec()).unwrap(),
                    // A scalar's mark: the row is further on.
                    Err(e) if e.contains("not a JSON object") => continue,
                    Err(e) => panic!("{e}"),
                }
            })
            .collect();
        (out, texts)
    }

    #[test]
    fn rows_at_the_path_are_cut_out_and_numbered_wherever_the_pieces_split() {
        let text = r#"{"id":1,"result":[false,"0-1",{"T":{"u1":{"initial":{"a":"}{\"","b":[{"c":1}]}},"u2":{"delete":null}},"U":{}}],"error":null}"#;
        for step in 1..=text.len() {
            let (out, rows) = cut(text, SINCE_ROWS, step);
            assert_eq!(
                out, r#"{"id":1,"result":[false,"0-1",{"T":{"u1":0,"u2":1},"U":{}}],"error":null}"#,
                "pieces of {step}"
            );
            assert_eq!(
                rows,
                [
                    r#"{"initial":{"a":"}{\"","b":[{"c":1}]}}"#,
                    r#"{"delete":null}"#
                ],
                "pieces of {step}"
            );
        }
    }

    #[test]
    fn only_the_path_is_cut() {
        // `result` elsewhere, or a row that is not an object: left in place.
        let text = r#"{"error":{"result":{"T":{"u":{}}}},"resul":{"T":{"u":{}}},"result":{"T":{"u":null,"v":{"new":{}}}},"id":"result"}"#;
        let (out, rows) = cut(text, ROWS, 7);
        assert_eq!(
            out,
            r#"{"error":{"result":{"T":{"u":{}}}},"resul":{"T":{"u":{}}},"result":{"T":{"u":null,"v":0}},"id":"result"}"#
        );
        assert_eq!(rows, [r#"{"new":{}}"#]);
        // The since form's rows are the third element's, not the first's.
        let (out, rows) = cut(
            r#"{"result":[{"T":{"u":{}}},"x",{"T":{"u":{}}}]}"#,
            SINCE_ROWS,
            3,
        );
        assert_eq!(out, r#"{"result":[{"T":{"u":{}}},"x",{"T":{"u":0}}]}"#);
        assert_eq!(rows, ["{}"]);
    }

    #[test]
    fn a_member_name_is_matched_as_the_string_it_stands_for() {
        let every_char_escaped: String = "result"
            .chars()
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect();
        for name in ["re\\u0073ult", "\\u0072esult", &every_char_escaped] {
            let text = format!(r#"{{"{name}":{{"T":{{"u":{{"new":{{}}}}}}}}}}"#);
            for step in 1..=text.len() {
                let (out, rows) = cut(&text, ROWS, step);
                assert_eq!(
                    out,
                    format!(r#"{{"{name}":{{"T":{{"u":0}}}}}}"#),
                    "{name}, {step}"
                );
                assert_eq!(rows, [r#"{"new":{}}"#], "{name}, {step}");
            }
        }
        // One escape too many, or a name that only starts like one: not the path.
        for name in [
            format!("{every_char_escaped}\\u0020"),
            "re\\u0073ultx".into(),
        ] {
            let text = format!(r#"{{"{name}":{{"T":{{"u":{{}}}}}}}}"#);
            let (out, rows) = cut(&text, ROWS, 3);
            assert_eq!(out, text);
            assert!(rows.is_empty());
        }
    }

    #[test]
    fn a_number_in_a_rows_place_is_never_taken_for_a_cut_row() {
        // Fuzzing found a reply whose first `result` has the number 0 where a row goes
        // and whose second `result` has a row: the row, cut out as number 0, was taken
        // for the server's 0, so the reply was accepted cut and refused whole.
        let text = r#"{"result":{"T":{"u":0}},"result":{"T":{"u":{"new":{}}}}}"#;
        for step in 1..=text.len() {
            let rows = RowTexts::default();
            let mut out = String::new();
            RowCutter::new(pieces(text, step), ROWS, rows.clone())
                .read_to_string(&mut out)
                .unwrap();
            assert_eq!(out, r#"{"result":{"T":{"u":0}},"result":{"T":{"u":0}}}"#);
            let e = rows.take(0).unwrap_err();
            assert!(e.contains("not a JSON object"), "{e}");
            assert_eq!(&rows.take(0).unwrap()[..], b"{\"new\":{}}");
        }
    }

    #[test]
    fn a_row_cut_short_is_not_read() {
        let (out, rows) = cut(r#"{"result":{"T":{"u":{"new":{"a":"#, ROWS, 4);
        assert_eq!(out, r#"{"result":{"T":{"u":"#);
        assert!(rows.is_empty());
    }

    #[test]
    fn every_name_a_path_has_fits_the_longest_kept() {
        for path in [SINCE_ROWS, ROWS] {
            for step in path {
                if let Step::Key(name) = step {
                    assert!(name.len() <= LONGEST_KEY, "{name}");
                }
            }
        }
        // A longer member name that starts like one is not taken for it.
        let text = format!(
            r#"{{"result{}":{{"T":{{"u":{{}}}}}},"result":{{"T":{{"v":{{}}}}}}}}"#,
            "x".repeat(10_000)
        );
        let (out, rows) = cut(&text, ROWS, 5);
        assert_eq!(out, text.replace(r#""v":{}"#, r#""v":0"#));
        assert_eq!(rows, ["{}"]);
    }

    #[test]
    fn nesting_past_the_deepest_kept_is_passed_on_not_kept() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let text = format!(r#"{{"x":{deep},"result":{{"T":{{"u":{{}}}}}}}}"#);
        let pieces = vec![Bytes::from(text.clone())];
        let rows = RowTexts::default();
        let mut cutter = RowCutter::new(pieces.into_iter(), ROWS, rows.clone());
        let mut out = String::new();
        cutter.read_to_string(&mut out).unwrap();
        assert!(
            cutter.stack.capacity() <= 2 * DEEPEST,
            "{}",
            cutter.stack.capacity()
        );
        // The structure after it is still followed.
        assert_eq!(out, text.replace(r#"{"u":{}}"#, r#"{"u":0}"#));
        assert_eq!(&rows.take(0).unwrap()[..], b"{}");
    }
}
