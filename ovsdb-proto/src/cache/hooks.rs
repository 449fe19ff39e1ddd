//! Entry points into the decoder for the codec benchmark and the fuzz targets: they
//! decode a reply as the cache does without a server. Not part of the API (re-exported
//! hidden from [`super`]).

use std::sync::Arc;

use super::{decode, row, CachedRow};
use crate::schema::DatabaseSchema;

/// Decodes a `<table-updates>` (`plain`) or `<table-updates2>` text straight into
/// cached rows of every column of its tables in `schema`, as the cache does with a
/// monitor reply; returns the rows it inserts, in order. For the decoder's benchmark; not part of
/// the API.
#[doc(hidden)]
pub fn __decode_updates(
    schema: &DatabaseSchema,
    text: &[u8],
    plain: bool,
) -> Result<Vec<(uuid::Uuid, CachedRow)>, String> {
    use serde::de::DeserializeSeed;
    let layouts = layouts(schema)?;
    let mut de = serde_json::Deserializer::from_slice(text);
    let form = if plain {
        decode::Form::Update
    } else {
        decode::Form::Update2
    };
    let changes = decode::UpdatesSeed(layouts, form, None)
        .deserialize(&mut de)
        .map_err(|e| e.to_string())?;
    Ok(new_rows(changes))
}

/// Decodes a whole plain `monitor` reply message (envelope included) as the cache
/// does, fed in pieces of `piece` bytes through a channel from another thread, as the
/// connection hands them over; with `cut`, its rows cut out and decoded from slices (as
/// the cache reads it), else read whole by serde. Returns the rows in order, or why
/// the reply was refused. For the decoder's benchmark and fuzz target; not part of the
/// API.
#[doc(hidden)]
pub fn __decode_reply(
    schema: &DatabaseSchema,
    message: &[u8],
    piece: usize,
    cut: bool,
) -> Result<Vec<(uuid::Uuid, CachedRow)>, String> {
    let layouts = layouts(schema)?;
    let (tx, rx) = tokio::sync::mpsc::channel(crate::tap::TAP_CAPACITY);
    let feeder = {
        let message = bytes::Bytes::copy_from_slice(message);
        let piece = piece.max(1);
        std::thread::spawn(move || {
            for at in (0..message.len()).step_by(piece) {
                let end = (at + piece).min(message.len());
                if tx.blocking_send(message.slice(at..end)).is_err() {
                    return;
                }
            }
        })
    };
    let rows = cut.then(crate::cut::RowTexts::default);
    let seed = decode::UpdatesSeed(layouts, decode::Form::Update, rows.clone());
    let cut = rows.map(|rows| crate::tap::Cut {
        path: crate::cut::ROWS,
        rows,
    });
    let decoded = crate::tap::decode_reply(rx, seed, cut);
    let _ = feeder.join();
    Ok(new_rows(
        decoded
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("server error {e}"))?,
    ))
}

/// The rows the changes insert, in order.
fn new_rows(changes: Vec<decode::TableChanges>) -> Vec<(uuid::Uuid, CachedRow)> {
    changes
        .into_iter()
        .flat_map(|t| t.rows)
        .filter_map(|(u, c)| match c {
            decode::RowChange::New(row) => Some((u, row)),
            _ => None,
        })
        .collect()
}

/// Every table of `schema`, every column cached.
fn layouts(schema: &DatabaseSchema) -> Result<row::Layouts, String> {
    let mut layouts = row::Layouts::new();
    for (name, table) in &schema.tables {
        let cols: Vec<String> = table.columns.keys().cloned().collect();
        layouts.insert(name.clone(), Arc::new(row::Layout::new(table, &cols)?));
    }
    Ok(layouts)
}
