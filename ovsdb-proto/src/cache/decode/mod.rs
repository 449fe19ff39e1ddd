//! The one decoder of what the server sends the cache: monitor replies and update
//! notifications, in every form (`update3`, `update2`, plain `update`), read straight
//! into cached rows against each table's [`Layout`], with no generic row in between.
//! Every value is checked against its column as it is read.

use std::fmt;
use std::sync::Arc;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use uuid::Uuid;

use crate::datum::Datum;

use super::row::{CachedRow, Layout, Layouts};
use crate::cut::RowTexts;

mod parallel;

/// One row's change, decoded against its table's layout.
#[derive(Debug)]
pub(crate) enum RowChange {
    /// `initial` or `insert`: the whole row.
    New(CachedRow),
    /// `modify`: the changed columns' diffs, by position in the layout.
    Modify(Vec<(usize, Datum)>),
    /// `delete`.
    Delete,
}

/// The changes to one table in one update message.
#[derive(Debug)]
pub(crate) struct TableChanges {
    pub(crate) layout: Arc<Layout>,
    pub(crate) rows: Vec<(Uuid, RowChange)>,
}

fn layout_of(layouts: &Layouts, table: &str) -> Result<Arc<Layout>, String> {
    layouts
        .get(table)
        .cloned()
        .ok_or_else(|| format!("update for table {table}, which is not monitored"))
}

/// How rows' changes are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// `update2`/`update3`: `{"initial"|"insert"|"modify": row}` or `{"delete": null}`.
    Update2,
    /// Plain `update` (RFC 7047): `{"old": row, "new": row}`; no `new` is a delete, and
    /// `new` holds every monitored column.
    Update,
}

/// Decodes `<table-updates2>` (`{"Table": {"uuid": {"initial": row}, …}, …}`), or in
/// the plain form `<table-updates>` (`{"Table": {"uuid": {"old": row, "new": row}}}`),
/// straight into cached rows, with no generic row in between. Owns its layouts, for a
/// reply decoded on another thread.
/// With [`RowTexts`], the rows were cut out of the text ([`crate::cut`]) and are read
/// from there.
pub(crate) struct UpdatesSeed(
    pub(crate) Layouts,
    pub(crate) Form,
    pub(crate) Option<RowTexts>,
);

impl<'de> DeserializeSeed<'de> for UpdatesSeed {
    type Value = Vec<TableChanges>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        Tables(&self.0, self.1, self.2.as_ref()).deserialize(d)
    }
}

/// The tables of an update, in either form, against borrowed layouts; the rows in the
/// text or cut out of it.
struct Tables<'a>(&'a Layouts, Form, Option<&'a RowTexts>);

impl<'de> DeserializeSeed<'de> for Tables<'_> {
    type Value = Vec<TableChanges>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Tables<'_> {
    type Value = Vec<TableChanges>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("table updates, an object of tables")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(table) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let layout = layout_of(self.0, &table).map_err(serde::de::Error::custom)?;
            let rows = map.next_value_seed(TableSeed(&layout, self.1, self.2))?;
            out.push(TableChanges { layout, rows });
        }
        Ok(out)
    }
}

struct TableSeed<'a>(&'a Arc<Layout>, Form, Option<&'a RowTexts>);

impl<'de> DeserializeSeed<'de> for TableSeed<'_> {
    type Value = Vec<(Uuid, RowChange)>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for TableSeed<'_> {
    type Value = Vec<(Uuid, RowChange)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the updates of table {}, by row uuid", self.0.table)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut rows = Vec::with_capacity(map.size_hint().unwrap_or(0));
        let order = Order::default();
        // Small tables (every update but the biggest) here; the rows of a big one past
        // the first few hundred on every core, or here if no thread could start.
        if !self.here(&mut map, &mut rows, &order, ON_ONE_THREAD)?
            && !parallel::rest_of_table(self.0, self.1, self.2, &mut map, &mut rows)?
        {
            self.here(&mut map, &mut rows, &order, usize::MAX)?;
        }
        Ok(rows)
    }
}

impl TableSeed<'_> {
    /// Decodes rows on this thread until `rows` holds `limit` of them; true when the
    /// table ended first.
    fn here<'de, A: MapAccess<'de>>(
        &self,
        map: &mut A,
        rows: &mut Vec<(Uuid, RowChange)>,
        order: &Order,
        limit: usize,
    ) -> Result<bool, A::Error> {
        while rows.len() < limit {
            let Some(uuid) = map.next_key_seed(UuidKey(&self.0.table))? else {
                return Ok(true);
            };
            let change = match self.2 {
                None => map.next_value_seed(self.1.seed(self.0, &uuid, order))?,
                Some(texts) => match self.1.cut_entry(map, texts, self.0, &uuid, order)? {
                    Entry::Row(change) => change,
                    Entry::Text(text) => self
                        .1
                        .decode(self.0, &uuid, order, &text)
                        .map_err(serde::de::Error::custom)?,
                },
            };
            rows.push((uuid, change));
        }
        Ok(false)
    }
}

/// How many rows of a table are decoded on the reading thread before the rest go to
/// workers ([`parallel`]).
const ON_ONE_THREAD: usize = 512;

impl Form {
    /// The seed of one row's change in this form.
    pub(super) fn seed<'a>(
        self,
        layout: &'a Arc<Layout>,
        uuid: &'a Uuid,
        order: &'a Order,
    ) -> ChangeOf<'a> {
        ChangeOf(self, RowSeed(layout, uuid, order))
    }

    /// The next row's change of `map`, whose rows were cut out into `texts`: decoded,
    /// when the cutter left the row in place, or its text.
    pub(super) fn cut_entry<'de, A: MapAccess<'de>>(
        self,
        map: &mut A,
        texts: &RowTexts,
        layout: &Arc<Layout>,
        uuid: &Uuid,
        order: &Order,
    ) -> Result<Entry, A::Error> {
        match map.next_value_seed(CutOrRow(self.seed(layout, uuid, order)))? {
            CutOr::Row(change) => Ok(Entry::Row(change)),
            CutOr::Cut(n) => texts
                .take(n)
                .map(Entry::Text)
                .map_err(serde::de::Error::custom),
        }
    }

    /// Decodes one row's change from its own text (one a cutter cut out, say).
    pub(super) fn decode(
        self,
        layout: &Arc<Layout>,
        uuid: &Uuid,
        order: &Order,
        text: &[u8],
    ) -> Result<RowChange, String> {
        let mut de = serde_json::Deserializer::from_slice(text);
        self.seed(layout, uuid, order)
            .deserialize(&mut de)
            .and_then(|change| de.end().map(|()| change))
            .map_err(|e| without_position(&e))
    }
}

/// The message of an error in one row's text, without serde_json's "at line 1 column
/// N": a place in that text, not in the message it came in.
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&position) {
        Some(message) => message.to_owned(),
        None => text,
    }
}

/// A row's change where rows may have been cut out of the text.
pub(super) enum Entry {
    /// The row was in place, and is decoded.
    Row(RowChange),
    /// The row's text, cut out.
    Text(bytes::Bytes),
}

/// What is in a row's place: the row, or the number a cutter left.
enum CutOr {
    Row(RowChange),
    Cut(u64),
}

/// Reads a [`CutOr`].
struct CutOrRow<'a>(ChangeOf<'a>);

impl<'de> DeserializeSeed<'de> for CutOrRow<'_> {
    type Value = CutOr;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for CutOrRow<'_> {
    type Value = CutOr;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.expecting(f)
    }

    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<CutOr, E> {
        Ok(CutOr::Cut(n))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<CutOr, A::Error> {
        self.0.visit_map(map).map(CutOr::Row)
    }
}

/// One row's change, in either form.
pub(super) struct ChangeOf<'a>(Form, RowSeed<'a>);

impl<'de> DeserializeSeed<'de> for ChangeOf<'_> {
    type Value = RowChange;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ChangeOf<'_> {
    type Value = RowChange;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            Form::Update2 => {
                "a row update: {\"initial\"|\"insert\"|\"modify\": row} or {\"delete\": null}"
            }
            Form::Update => "a row update: {\"old\": row, \"new\": row}",
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        match self.0 {
            Form::Update2 => update2(self.1, map),
            Form::Update => plain(self.1, map),
        }
    }
}

/// `{"initial"|"insert"|"modify": row}` or `{"delete": null}`.
fn update2<'de, A: MapAccess<'de>>(row: RowSeed<'_>, mut map: A) -> Result<RowChange, A::Error> {
    let kind = map
        .next_key_seed(KindKey)?
        .ok_or_else(|| serde::de::Error::custom("an empty row update"))?;
    let change = match kind {
        Kind::New => RowChange::New(map.next_value_seed(row)?),
        Kind::Modify => RowChange::Modify(map.next_value_seed(DiffSeed(row.0))?),
        Kind::Delete => {
            map.next_value::<IgnoredAny>()?;
            RowChange::Delete
        }
    };
    if map.next_key::<IgnoredAny>()?.is_some() {
        return Err(serde::de::Error::custom(
            "a row update with more than one kind",
        ));
    }
    Ok(change)
}

/// The plain form: `new` is the whole row; without it the row is gone.
fn plain<'de, A: MapAccess<'de>>(row: RowSeed<'_>, mut map: A) -> Result<RowChange, A::Error> {
    let mut new = None;
    let mut row = Some(row);
    while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
        match (&*key, row.take()) {
            ("new", Some(seed)) => new = Some(map.next_value_seed(seed)?),
            ("new", None) => return Err(serde::de::Error::custom("a row update with two \"new\"")),
            ("old", seed) => {
                row = seed;
                map.next_value::<IgnoredAny>()?;
            }
            (other, _) => {
                return Err(serde::de::Error::custom(format!(
                    "a row update with member {other:?}"
                )))
            }
        }
    }
    Ok(new.map_or(RowChange::Delete, RowChange::New))
}

/// A `modify` entry's columns, by position in the layout; a column the layout lacks
/// is an error.
struct DiffSeed<'a>(&'a Layout);

impl<'de> DeserializeSeed<'de> for DiffSeed<'_> {
    type Value = Vec<(usize, Datum)>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DiffSeed<'_> {
    type Value = Vec<(usize, Datum)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the changed columns of a row of table {}", self.0.table)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut diff = Vec::new();
        while let Some(column) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let at = self.0.position(&column).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "modify of column {column}, which table {} does not monitor",
                    self.0.table
                ))
            })?;
            diff.push((at, map.next_value()?));
        }
        Ok(diff)
    }
}

/// A row's uuid, as a key of a table's updates.
pub(super) struct UuidKey<'a>(pub(super) &'a str);

impl<'de> DeserializeSeed<'de> for UuidKey<'_> {
    type Value = Uuid;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for UuidKey<'_> {
    type Value = Uuid;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a row uuid")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Uuid, E> {
        v.parse()
            .map_err(|_| E::custom(format!("table {}: row key {v:?} is not a uuid", self.0)))
    }
}

/// The kind of a row update.
enum Kind {
    New,
    Modify,
    Delete,
}

struct KindKey;

impl<'de> DeserializeSeed<'de> for KindKey {
    type Value = Kind;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KindKey {
    type Value = Kind;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"initial\", \"insert\", \"modify\" or \"delete\"")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Kind, E> {
        match v {
            "initial" | "insert" => Ok(Kind::New),
            "modify" => Ok(Kind::Modify),
            "delete" => Ok(Kind::Delete),
            other => Err(E::custom(format!("unknown row update kind {other:?}"))),
        }
    }
}

/// The order the server sends a table's columns in, as positions in the layout,
/// learned from the rows before: ovsdb-server writes every row's columns in the same
/// order, so each column name is checked against one guess instead of searched for.
#[derive(Default)]
pub(super) struct Order {
    guesses: std::cell::RefCell<Vec<Option<usize>>>,
    /// A row's columns while it is decoded, kept for the next row's.
    columns: std::cell::Cell<Vec<(usize, Datum)>>,
}

/// Decodes row `uuid` against a layout.
struct RowSeed<'a>(&'a Arc<Layout>, &'a Uuid, &'a Order);

impl<'de> DeserializeSeed<'de> for RowSeed<'_> {
    type Value = CachedRow;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowSeed<'_> {
    type Value = CachedRow;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a row of table {}", self.0.table)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let layout = self.0;
        let n = layout.names.len();
        // The columns sent, by position, gathered in a buffer kept for the table's
        // next row; columns not sent hold their defaults.
        let mut columns = self.2.columns.take();
        columns.clear();
        let mut seen = Seen::new(n);
        let mut nth = 0;
        while let Some(at) = map.next_key_seed(ColumnKey(layout, self.2, nth))? {
            nth += 1;
            match at {
                Some(i) => {
                    let value: Datum = map.next_value()?;
                    layout
                        .check(self.1, i, &value)
                        .map_err(serde::de::Error::custom)?;
                    if seen.get(i) {
                        // A column sent twice: the last one counts.
                        columns.retain(|(c, _)| *c != i);
                    }
                    columns.push((i, value));
                    seen.set(i);
                }
                // A column not asked for (`_version`, say): not cached.
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let row = CachedRow::from_columns(layout, &mut columns);
        self.2.columns.set(columns);
        Ok(row)
    }
}

/// Which columns a row sent: a bit set, on the stack for tables of up to 128 columns.
enum Seen {
    Small(u128),
    Large(Vec<bool>),
}

impl Seen {
    fn new(n: usize) -> Seen {
        if n <= 128 {
            Seen::Small(0)
        } else {
            Seen::Large(vec![false; n])
        }
    }

    fn set(&mut self, i: usize) {
        match self {
            Seen::Small(bits) => *bits |= 1 << i,
            Seen::Large(v) => v[i] = true,
        }
    }

    fn get(&self, i: usize) -> bool {
        match self {
            Seen::Small(bits) => bits & (1 << i) != 0,
            Seen::Large(v) => v[i],
        }
    }
}

/// The `nth` column name of a row, as its position in the layout (`None` for a column
/// it lacks).
struct ColumnKey<'a>(&'a Layout, &'a Order, usize);

impl<'de> DeserializeSeed<'de> for ColumnKey<'_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for ColumnKey<'_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a column name")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        let ColumnKey(layout, order, nth) = self;
        let mut order = order.guesses.borrow_mut();
        if let Some(Some(guess)) = order.get(nth) {
            if layout.names[*guess] == v {
                return Ok(Some(*guess));
            }
        }
        let at = layout.position(v);
        if order.len() <= nth {
            order.resize(nth + 1, None);
        }
        order[nth] = at;
        Ok(at)
    }
}

/// Decodes a `monitor_cond_since` result, `[found, last-txn-id, table-updates2]`.
pub(crate) struct SinceSeed(pub(crate) Layouts, pub(crate) Option<RowTexts>);

/// A decoded `monitor_cond_since` result.
pub(crate) struct Since {
    pub(crate) found: bool,
    pub(crate) last_txn_id: Uuid,
    pub(crate) updates: Vec<TableChanges>,
}

impl<'de> DeserializeSeed<'de> for SinceSeed {
    type Value = Since;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for SinceSeed {
    type Value = Since;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[found, last-txn-id, table-updates2]")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let missing = |what: &str| serde::de::Error::custom(format!("the reply lacks {what}"));
        let found = seq.next_element()?.ok_or_else(|| missing("found"))?;
        let last_txn_id = seq.next_element()?.ok_or_else(|| missing("last-txn-id"))?;
        let updates = seq
            .next_element_seed(Tables(&self.0, Form::Update2, self.1.as_ref()))?
            .ok_or_else(|| missing("the table updates"))?;
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(serde::de::Error::custom(
                "the reply has more than three elements",
            ));
        }
        Ok(Since {
            found,
            last_txn_id,
            updates,
        })
    }
}

/// What an update notification holds, for the cache.
#[derive(Debug)]
pub(crate) enum Note {
    /// Changes seen by the cache's data monitor, and for `update3` the transaction
    /// after them.
    Data {
        txn: Option<Uuid>,
        changes: Vec<TableChanges>,
    },
    /// Changes seen by the `_Server` monitor (generic rows: one small row).
    Server(crate::monitor::TableUpdates2),
    /// Changes for another monitor id (one this cache replaced or never had).
    Other(serde_json::Value),
}

/// Decodes an `update`/`update2`/`update3` notification's params: the data monitor's
/// (`data`) straight into cached rows, the `_Server` monitor's (`server`) into generic
/// rows, any other monitor's skipped. `None` for any other method.
pub(crate) fn decode_note(
    method: &str,
    params: &[u8],
    data: &str,
    server: &str,
    layouts: &Layouts,
) -> Option<Result<Note, String>> {
    let (form, txn) = match method {
        "update3" => (Form::Update2, true),
        "update2" => (Form::Update2, false),
        "update" => (Form::Update, false),
        _ => return None,
    };
    let seed = NoteSeed {
        form,
        txn,
        data,
        server,
        layouts,
    };
    let mut de = serde_json::Deserializer::from_slice(params);
    let note = seed
        .deserialize(&mut de)
        .and_then(|note| de.end().map(|()| note))
        .map_err(|e| format!("malformed {method} notification: {e}"));
    Some(note)
}

struct NoteSeed<'a> {
    form: Form,
    txn: bool,
    data: &'a str,
    server: &'a str,
    layouts: &'a Layouts,
}

impl<'de> DeserializeSeed<'de> for NoteSeed<'_> {
    type Value = Note;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for NoteSeed<'_> {
    type Value = Note;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[monitor-id, (last-txn-id,) table-updates]")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let missing = |what: &str| serde::de::Error::custom(format!("the params lack {what}"));
        let id: serde_json::Value = seq
            .next_element()?
            .ok_or_else(|| missing("the monitor id"))?;
        let txn = match self.txn {
            true => Some(
                seq.next_element::<Uuid>()?
                    .ok_or_else(|| missing("the last transaction id"))?,
            ),
            false => None,
        };
        let note = if id.as_str() == Some(self.data) {
            let changes = seq.next_element_seed(Tables(self.layouts, self.form, None))?;
            Note::Data {
                txn,
                changes: changes.ok_or_else(|| missing("the table updates"))?,
            }
        } else if id.as_str() == Some(self.server) && self.form == Form::Update2 {
            Note::Server(
                seq.next_element()?
                    .ok_or_else(|| missing("the table updates"))?,
            )
        } else {
            seq.next_element::<IgnoredAny>()?
                .ok_or_else(|| missing("the table updates"))?;
            Note::Other(id)
        };
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(serde::de::Error::custom(
                "the params have too many elements",
            ));
        }
        Ok(note)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn layouts() -> Layouts {
        let schema = crate::schema::DatabaseSchema::from_json(&json!({
            "name": "D", "version": "1.0.0",
            "tables": {"T": {"columns": {"name": {"type": "string"}}}}
        }))
        .unwrap();
        let t = schema.table("T").unwrap();
        [(
            "T".to_string(),
            Arc::new(Layout::new(t, &["name".to_string()]).unwrap()),
        )]
        .into()
    }

    const A: &str = "00000000-0000-0000-0000-00000000000a";

    fn note(method: &str, params: serde_json::Value) -> Result<Note, String> {
        decode_note(
            method,
            params.to_string().as_bytes(),
            "data",
            "server",
            &layouts(),
        )
        .unwrap()
    }

    #[test]
    fn notifications_go_to_the_monitor_they_are_for() {
        let Note::Data { txn, changes } = note(
            "update3",
            json!(["data", A, {"T": {A: {"insert": {"name": "a"}}}}]),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(txn, Some(A.parse().unwrap()));
        let RowChange::New(row) = &changes[0].rows[0].1 else {
            panic!("{changes:?}")
        };
        assert_eq!(row["name"], Datum::scalar("a"));
        // The plain form: a row with no "new" is gone.
        let Note::Data { txn: None, changes } = note(
            "update",
            json!(["data", {"T": {A: {"old": {"name": "a"}}}}]),
        )
        .unwrap() else {
            panic!()
        };
        assert!(matches!(changes[0].rows[0].1, RowChange::Delete));
        assert!(matches!(
            note(
                "update2",
                json!(["server", {"Database": {A: {"modify": {"x": 1}}}}])
            ),
            Ok(Note::Server(_))
        ));
        // Another monitor's rows are skipped, whatever their tables.
        assert!(matches!(
            note("update2", json!(["cache-0", {"Unknown": {}}])),
            Ok(Note::Other(_))
        ));
        assert!(decode_note("locked", b"[\"l\"]", "data", "server", &layouts()).is_none());
    }

    #[test]
    fn malformed_notifications_say_why() {
        for (method, params, want) in [
            ("update3", json!(["data"]), "last transaction id"),
            ("update2", json!(["data"]), "table updates"),
            ("update2", json!(["data", {}, 1]), "too many"),
            ("update2", json!(["data", {"U": {}}]), "table U"),
            (
                "update",
                json!(["data", {"T": {A: {"new": {"name": 1}}}}]),
                "column name",
            ),
        ] {
            let e = note(method, params.clone()).unwrap_err();
            assert!(e.contains(want) && e.contains(method), "{params}: {e}");
        }
    }
}
