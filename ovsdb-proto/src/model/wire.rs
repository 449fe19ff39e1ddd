//! Decoding model rows straight from wire JSON, without building an untyped `Row`
//! first: what the derive's `Deserialize` impl calls.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use uuid::Uuid;

use crate::datum::{Atom, AtomVisitor, Datum, DatumVisitor};

use super::ColumnValue;

/// Decodes one column's value from the wire, naming table and column on error.
#[doc(hidden)]
pub struct ColumnSeed<V> {
    table: &'static str,
    column: &'static str,
    _v: PhantomData<fn() -> V>,
}

impl<V> ColumnSeed<V> {
    /// A seed for `table`.`column`.
    pub fn new(table: &'static str, column: &'static str) -> Self {
        ColumnSeed {
            table,
            column,
            _v: PhantomData,
        }
    }
}

impl<'de, V: ColumnValue> DeserializeSeed<'de> for ColumnSeed<V> {
    type Value = V;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<V, D::Error> {
        V::deserialize_wire(d).map_err(|e| {
            de::Error::custom(format_args!(
                "table {} column {}: {e}",
                self.table, self.column
            ))
        })
    }
}

/// The `_uuid` member: `["uuid", "…"]`.
#[doc(hidden)]
pub struct UuidAtom(pub Uuid);

impl<'de> Deserialize<'de> for UuidAtom {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match d.deserialize_any(AtomVisitor)? {
            Atom::Uuid(u) => Ok(UuidAtom(u)),
            other => Err(de::Error::custom(format_args!(
                "_uuid {other} is not a uuid"
            ))),
        }
    }
}

/// Decodes through [`Datum`]: the general path, for sets and maps.
pub(crate) fn via_datum<'de, V: ColumnValue, D: Deserializer<'de>>(d: D) -> Result<V, D::Error> {
    let datum = Datum::deserialize(d)?;
    V::from_datum_owned(datum).map_err(de::Error::custom)
}

/// A scalar written bare, or as a one-element `["set", [x]]`.
pub(crate) struct ScalarVisitor<V>(pub(crate) PhantomData<fn() -> V>);

impl<'de, V: ColumnValue> Visitor<'de> for ScalarVisitor<V> {
    type Value = V;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an OVSDB value")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<V, E> {
        V::from_datum(&Datum::Set(vec![Atom::Integer(v)].into())).map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<V, E> {
        let d = DatumVisitor.visit_u64(v)?;
        V::from_datum(&d).map_err(E::custom)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<V, E> {
        V::from_datum(&Datum::Set(vec![Atom::Real(v)].into())).map_err(E::custom)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<V, E> {
        V::from_datum(&Datum::Set(vec![Atom::Boolean(v)].into())).map_err(E::custom)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<V, E> {
        V::from_wire_str(v).map_err(E::custom)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V, A::Error> {
        let d = DatumVisitor.visit_seq(seq)?;
        V::from_datum(&d).map_err(de::Error::custom)
    }
}
