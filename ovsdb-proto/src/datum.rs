//! The OVSDB data model of RFC 7047 §5.1: atoms, sets, maps and rows, with their JSON
//! forms.
//!
//! A [`Datum`] is always a set or a map; a scalar column holds a set of one atom, which is
//! written on the wire as the bare atom, as the RFC allows. Sets are kept sorted and free
//! of duplicates and maps sorted by key, so two data with the same contents compare equal
//! whatever order the server sent them in.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

/// The string type of [`Atom::String`]: short strings inline, longer ones on the heap.
pub use compact_str::CompactString;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// One row: column name to value. Rows in replies carry only the columns asked for.
pub type Row = BTreeMap<String, Datum>;

/// The five atomic types of RFC 7047 §3.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AtomicType {
    /// A 64-bit signed integer.
    Integer,
    /// A double-precision floating point number.
    Real,
    /// `true` or `false`.
    Boolean,
    /// A UTF-8 string.
    String,
    /// A row identifier.
    Uuid,
}

impl AtomicType {
    /// The name used in schemas: `integer`, `real`, `boolean`, `string` or `uuid`.
    pub fn as_str(self) -> &'static str {
        match self {
            AtomicType::Integer => "integer",
            AtomicType::Real => "real",
            AtomicType::Boolean => "boolean",
            AtomicType::String => "string",
            AtomicType::Uuid => "uuid",
        }
    }

    /// Parses a schema's atomic type name.
    pub fn from_name(name: &str) -> Option<AtomicType> {
        Some(match name {
            "integer" => AtomicType::Integer,
            "real" => AtomicType::Real,
            "boolean" => AtomicType::Boolean,
            "string" => AtomicType::String,
            "uuid" => AtomicType::Uuid,
            _ => return None,
        })
    }
}

impl fmt::Display for AtomicType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One atomic value.
///
/// `NamedUuid` is the `["named-uuid", NAME]` form that refers, inside one transaction, to
/// a row inserted by the same transaction with that `uuid-name`. A server never sends it.
#[derive(Clone, Debug)]
pub enum Atom {
    /// An integer.
    Integer(i64),
    /// A real number. Never NaN or infinite on the wire (JSON has no form for them).
    Real(f64),
    /// A boolean.
    Boolean(bool),
    /// A string; one of up to 24 bytes is held inline, with no allocation of its own.
    String(CompactString),
    /// A row's uuid, `["uuid", "…"]` on the wire.
    Uuid(Uuid),
    /// A row inserted earlier in the same transaction, `["named-uuid", NAME]` on the wire.
    NamedUuid(Box<str>),
}

impl Atom {
    /// The atomic type this value is of; a named-uuid is a uuid.
    pub fn atomic_type(&self) -> AtomicType {
        match self {
            Atom::Integer(_) => AtomicType::Integer,
            Atom::Real(_) => AtomicType::Real,
            Atom::Boolean(_) => AtomicType::Boolean,
            Atom::String(_) => AtomicType::String,
            Atom::Uuid(_) | Atom::NamedUuid(_) => AtomicType::Uuid,
        }
    }

    /// The string, if this is a string atom.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Atom::String(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, if this is an integer atom.
    pub fn as_integer(&self) -> Option<i64> {
        match self {
            Atom::Integer(i) => Some(*i),
            _ => None,
        }
    }

    /// The uuid, if this is a uuid atom.
    pub fn as_uuid(&self) -> Option<Uuid> {
        match self {
            Atom::Uuid(u) => Some(*u),
            _ => None,
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Atom::Integer(_) => 0,
            Atom::Real(_) => 1,
            Atom::Boolean(_) => 2,
            Atom::String(_) => 3,
            Atom::Uuid(_) => 4,
            Atom::NamedUuid(_) => 5,
        }
    }
}

impl Ord for Atom {
    /// Atoms of one type order as ovsdb-server orders them (strings bytewise, uuids by
    /// their hex text); atoms of different types order by type.
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Atom::Integer(a), Atom::Integer(b)) => a.cmp(b),
            (Atom::Real(a), Atom::Real(b)) => a.total_cmp(b),
            (Atom::Boolean(a), Atom::Boolean(b)) => a.cmp(b),
            (Atom::String(a), Atom::String(b)) => a.cmp(b),
            (Atom::Uuid(a), Atom::Uuid(b)) => a.cmp(b),
            (Atom::NamedUuid(a), Atom::NamedUuid(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for Atom {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl std::hash::Hash for Atom {
    /// Consistent with `Eq`: reals hash by their bits, as `total_cmp` compares them.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.rank().hash(state);
        match self {
            Atom::Integer(i) => i.hash(state),
            Atom::Real(r) => r.to_bits().hash(state),
            Atom::Boolean(b) => b.hash(state),
            Atom::String(s) => s.as_str().hash(state),
            Atom::NamedUuid(s) => s.hash(state),
            Atom::Uuid(u) => u.hash(state),
        }
    }
}

impl PartialEq for Atom {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Atom {}

impl From<i64> for Atom {
    fn from(v: i64) -> Self {
        Atom::Integer(v)
    }
}
impl From<f64> for Atom {
    fn from(v: f64) -> Self {
        Atom::Real(v)
    }
}
impl From<bool> for Atom {
    fn from(v: bool) -> Self {
        Atom::Boolean(v)
    }
}
impl From<&str> for Atom {
    fn from(v: &str) -> Self {
        Atom::String(CompactString::new(v))
    }
}
impl From<String> for Atom {
    fn from(v: String) -> Self {
        Atom::String(v.into())
    }
}
impl From<Uuid> for Atom {
    fn from(v: Uuid) -> Self {
        Atom::Uuid(v)
    }
}

impl fmt::Display for Atom {
    /// Formats the atom in its JSON wire form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let json = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        f.write_str(&json)
    }
}

/// A column's value: a set of atoms or a map between atoms.
///
/// Invariants, kept by every constructor here and by decoding: a set is sorted with no
/// duplicates; a map is sorted by key with no duplicate keys.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Datum {
    /// A set of atoms; a scalar is a set of one.
    Set(Box<[Atom]>),
    /// Key/value pairs.
    Map(Box<[(Atom, Atom)]>),
}

impl Datum {
    /// The empty set, the value of an optional column that holds nothing.
    pub fn empty() -> Datum {
        Datum::Set(Box::default())
    }

    /// A set holding one atom: a scalar column's value.
    pub fn scalar(atom: impl Into<Atom>) -> Datum {
        Datum::Set(vec![atom.into()].into())
    }

    /// A set of atoms, sorted and with duplicates removed.
    pub fn set<A: Into<Atom>>(atoms: impl IntoIterator<Item = A>) -> Datum {
        let mut v: Vec<Atom> = atoms.into_iter().map(Into::into).collect();
        v.sort();
        v.dedup();
        Datum::Set(v.into())
    }

    /// A map, sorted by key; when a key repeats, the last value given wins.
    pub fn map<K: Into<Atom>, V: Into<Atom>>(pairs: impl IntoIterator<Item = (K, V)>) -> Datum {
        let mut v: Vec<(Atom, Atom)> = pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        // Most maps come from a sorted map (a model's `BTreeMap`): kept as they are.
        if !v.windows(2).all(|w| w[0].0 < w[1].0) {
            // Stable, so that of equal keys the last given is the last of its run; each
            // later pair's value moves into the one kept before it is dropped.
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    std::mem::swap(later, kept);
                }
                same
            });
        }
        Datum::Map(v.into())
    }

    /// A `["uuid", …]` scalar.
    pub fn uuid(uuid: Uuid) -> Datum {
        Datum::scalar(Atom::Uuid(uuid))
    }

    /// A `["named-uuid", NAME]` scalar referring to a row inserted by the same transaction.
    pub fn named_uuid(name: impl Into<String>) -> Datum {
        Datum::Set(vec![Atom::NamedUuid(name.into().into_boxed_str())].into())
    }

    /// Number of elements (set) or pairs (map).
    pub fn len(&self) -> usize {
        match self {
            Datum::Set(s) => s.len(),
            Datum::Map(m) => m.len(),
        }
    }

    /// True when the set or map is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The atom of a set of exactly one element.
    pub fn as_scalar(&self) -> Option<&Atom> {
        match self {
            Datum::Set(s) if s.len() == 1 => s.first(),
            _ => None,
        }
    }

    /// The elements, if this is a set.
    pub fn as_set(&self) -> Option<&[Atom]> {
        match self {
            Datum::Set(s) => Some(s),
            Datum::Map(_) => None,
        }
    }

    /// The pairs, if this is a map (an empty set also reads as an empty map, because the
    /// two cannot be told apart without a schema).
    pub fn as_map(&self) -> Option<&[(Atom, Atom)]> {
        match self {
            Datum::Map(m) => Some(m),
            Datum::Set(s) if s.is_empty() => Some(&[]),
            Datum::Set(_) => None,
        }
    }

    /// Looks a key up in a map.
    pub fn get(&self, key: &Atom) -> Option<&Atom> {
        let pairs = self.as_map()?;
        pairs
            .binary_search_by(|(k, _)| k.cmp(key))
            .ok()
            .map(|i| &pairs[i].1)
    }

    /// Looks a string key up in a map (`external_ids`, `options`), as [`Datum::get`]
    /// with `Atom::from(key)` does, without making an atom of it.
    pub fn get_str(&self, key: &str) -> Option<&Atom> {
        let pairs = self.as_map()?;
        pairs
            .binary_search_by(|(k, _)| match k {
                Atom::String(s) => s.as_str().cmp(key),
                // A key of another type orders by its type, before or after strings.
                other => other.cmp(&Atom::String(Default::default())),
            })
            .ok()
            .map(|i| &pairs[i].1)
    }

    /// Parses the JSON wire form without a schema.
    pub fn from_json(value: &serde_json::Value) -> Result<Datum, serde_json::Error> {
        Datum::deserialize(value)
    }

    /// The JSON wire form.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

impl fmt::Display for Datum {
    /// Formats the datum in its JSON wire form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let json = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        f.write_str(&json)
    }
}

impl<A: Into<Atom>> From<A> for Datum {
    fn from(atom: A) -> Self {
        Datum::scalar(atom)
    }
}

// ---------------------------------------------------------------------------------------
// JSON: serialization

struct Tagged<'a, T: ?Sized>(&'a str, &'a T);

impl<T: Serialize + ?Sized> Serialize for Tagged<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(2))?;
        seq.serialize_element(self.0)?;
        seq.serialize_element(self.1)?;
        seq.end()
    }
}

impl Serialize for Atom {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Atom::Integer(i) => s.serialize_i64(*i),
            Atom::Real(r) => s.serialize_f64(*r),
            Atom::Boolean(b) => s.serialize_bool(*b),
            Atom::String(v) => s.serialize_str(v),
            Atom::Uuid(u) => {
                let mut buf = Uuid::encode_buffer();
                Tagged("uuid", u.hyphenated().encode_lower(&mut buf) as &str).serialize(s)
            }
            Atom::NamedUuid(n) => Tagged("named-uuid", &**n).serialize(s),
        }
    }
}

struct Pairs<'a>(&'a [(Atom, Atom)]);

impl Serialize for Pairs<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for (k, v) in self.0 {
            seq.serialize_element(&(k, v))?;
        }
        seq.end()
    }
}

impl Serialize for Datum {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Datum::Set(v) if v.len() == 1 => v[0].serialize(s),
            Datum::Set(v) => Tagged("set", &**v).serialize(s),
            Datum::Map(m) => Tagged("map", &Pairs(m)).serialize(s),
        }
    }
}

// ---------------------------------------------------------------------------------------
// JSON: deserialization, straight from the parser without an intermediate `Value`.

pub(crate) fn parse_uuid<E: de::Error>(text: &str) -> Result<Uuid, E> {
    // RFC 7047 §5.1: a uuid is 36 characters in the 8-4-4-4-12 form.
    if text.len() != 36 {
        return Err(E::custom(format_args!("invalid uuid \"{text}\"")));
    }
    Uuid::try_parse(text).map_err(|_| E::custom(format_args!("invalid uuid \"{text}\"")))
}

fn valid_id(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The second element of `["uuid", TEXT]` or `["named-uuid", NAME]`.
fn tagged_uuid<'de, A: SeqAccess<'de>>(tag: &str, seq: &mut A) -> Result<Atom, A::Error> {
    let text: TagStr<'de> = seq.next_element()?.ok_or_else(|| {
        de::Error::custom(format_args!(
            "[\"{tag}\"] lacks its {}",
            if tag == "uuid" { "uuid string" } else { "name" }
        ))
    })?;
    if tag == "uuid" {
        return Ok(Atom::Uuid(parse_uuid(text.as_str())?));
    }
    if !valid_id(text.as_str()) {
        return Err(de::Error::custom(format_args!(
            "invalid named-uuid name \"{}\"",
            text.as_str()
        )));
    }
    Ok(Atom::NamedUuid(text.as_str().into()))
}

pub(crate) struct AtomVisitor;

impl<'de> Visitor<'de> for AtomVisitor {
    type Value = Atom;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "an OVSDB atom (integer, real, boolean, string, [\"uuid\", …] or [\"named-uuid\", …])",
        )
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Atom, E> {
        Ok(Atom::Integer(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Atom, E> {
        i64::try_from(v)
            .map(Atom::Integer)
            .map_err(|_| E::custom(format_args!("integer {v} does not fit in 64 signed bits")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Atom, E> {
        Ok(Atom::Real(v))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Atom, E> {
        Ok(Atom::Boolean(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Atom, E> {
        Ok(Atom::String(CompactString::new(v)))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Atom, E> {
        Ok(Atom::String(v.into()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Atom, A::Error> {
        let tag: TagStr<'de> = seq
            .next_element()?
            .ok_or_else(|| de::Error::custom("empty array where an atom was expected"))?;
        let atom = match tag.as_str() {
            "uuid" | "named-uuid" => tagged_uuid(tag.as_str(), &mut seq)?,
            "set" | "map" => {
                return Err(de::Error::custom(format_args!(
                    "a [\"{}\", …] datum where a single atom was expected",
                    tag.as_str()
                )))
            }
            other => {
                return Err(de::Error::custom(format_args!(
                    "unknown array form [\"{other}\", …]: expected \"uuid\" or \"named-uuid\""
                )))
            }
        };
        if seq.next_element::<de::IgnoredAny>()?.is_some() {
            return Err(de::Error::custom(
                "an atom array has more than two elements",
            ));
        }
        Ok(atom)
    }
}

impl<'de> Deserialize<'de> for Atom {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Atom, D::Error> {
        d.deserialize_any(AtomVisitor)
    }
}

/// A string that borrows from the input when it can (keys, tags).
#[doc(hidden)]
pub enum TagStr<'de> {
    /// Borrowed.
    Borrowed(&'de str),
    /// Owned (the input had escapes).
    Owned(String),
}

impl TagStr<'_> {
    /// The text.
    pub fn as_str(&self) -> &str {
        match self {
            TagStr::Borrowed(s) => s,
            TagStr::Owned(s) => s,
        }
    }
}

impl<'de> Deserialize<'de> for TagStr<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TagStr<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(TagStr::Borrowed(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(TagStr::Owned(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(TagStr::Owned(v))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for PairWrap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PairWrap;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a [key, value] pair")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<PairWrap, A::Error> {
                let k: Atom = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::custom("map pair lacks its key"))?;
                let v: Atom = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::custom("map pair lacks its value"))?;
                if seq.next_element::<de::IgnoredAny>()?.is_some() {
                    return Err(de::Error::custom("map pair has more than two elements"));
                }
                Ok(PairWrap(k, v))
            }
        }
        d.deserialize_seq(V)
    }
}

/// `[atom, atom]`, one pair of a map.
struct PairWrap(Atom, Atom);

fn finish_set<E: de::Error>(mut v: Vec<Atom>) -> Result<Datum, E> {
    if !v.windows(2).all(|w| w[0] < w[1]) {
        v.sort();
        if let Some(w) = v.windows(2).find(|w| w[0] == w[1]) {
            return Err(E::custom(format_args!(
                "set contains duplicate element {}",
                w[0]
            )));
        }
    }
    // A boxed slice keeps none of the slack decoding grew the vector with.
    Ok(Datum::Set(v.into()))
}

fn finish_map<E: de::Error>(mut v: Vec<(Atom, Atom)>) -> Result<Datum, E> {
    if !v.windows(2).all(|w| w[0].0 < w[1].0) {
        v.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(w) = v.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(E::custom(format_args!(
                "map contains duplicate key {}",
                w[0].0
            )));
        }
    }
    Ok(Datum::Map(v.into()))
}

pub(crate) struct DatumVisitor;

impl<'de> Visitor<'de> for DatumVisitor {
    type Value = Datum;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an OVSDB value (an atom, [\"set\", […]] or [\"map\", […]])")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Datum, E> {
        Ok(Datum::Set(vec![Atom::Integer(v)].into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Datum, E> {
        AtomVisitor.visit_u64(v).map(|a| Datum::Set(vec![a].into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Datum, E> {
        Ok(Datum::Set(vec![Atom::Real(v)].into()))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Datum, E> {
        Ok(Datum::Set(vec![Atom::Boolean(v)].into()))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Datum, E> {
        Ok(Datum::Set(vec![Atom::String(CompactString::new(v))].into()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Datum, E> {
        Ok(Datum::Set(vec![Atom::String(v.into())].into()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Datum, A::Error> {
        let tag: TagStr<'de> = seq
            .next_element()?
            .ok_or_else(|| de::Error::custom("empty array where a value was expected"))?;
        let datum = match tag.as_str() {
            "set" => {
                let atoms: Vec<Atom> = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::custom("[\"set\"] lacks its array of atoms"))?;
                finish_set(atoms)?
            }
            "map" => {
                let pairs: Vec<PairWrap> = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::custom("[\"map\"] lacks its array of pairs"))?;
                finish_map(pairs.into_iter().map(|p| (p.0, p.1)).collect())?
            }
            "uuid" | "named-uuid" => Datum::Set(vec![tagged_uuid(tag.as_str(), &mut seq)?].into()),
            other => {
                return Err(de::Error::custom(format_args!(
                    "unknown array form [\"{other}\", …]: expected \"set\", \"map\", \"uuid\" or \"named-uuid\""
                )))
            }
        };
        if seq.next_element::<de::IgnoredAny>()?.is_some() {
            return Err(de::Error::custom(format_args!(
                "[\"{}\", …] has more than two elements",
                tag.as_str()
            )));
        }
        Ok(datum)
    }
}

impl<'de> Deserialize<'de> for Datum {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Datum, D::Error> {
        d.deserialize_any(DatumVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(text: &str) -> Datum {
        let d: Datum = serde_json::from_str(text).expect(text);
        let back = serde_json::to_string(&d).unwrap();
        let again: Datum = serde_json::from_str(&back).unwrap();
        assert_eq!(d, again, "{text} -> {back}");
        d
    }

    #[test]
    fn a_map_is_sorted_by_key_and_the_last_value_of_a_key_wins() {
        let pairs = |d: &Datum| -> Vec<(Atom, Atom)> { d.as_map().unwrap().to_vec() };
        let a = |s: &str| Atom::String(s.into());
        // Sorted and distinct: as given.
        assert_eq!(
            pairs(&Datum::map([("a", "1"), ("b", "2"), ("c", "3")])),
            [(a("a"), a("1")), (a("b"), a("2")), (a("c"), a("3"))]
        );
        // Unsorted, with repeats (the last of each key wins, wherever it was).
        assert_eq!(
            pairs(&Datum::map([
                ("c", "1"),
                ("a", "2"),
                ("c", "3"),
                ("b", "4"),
                ("a", "5"),
                ("a", "6"),
            ])),
            [(a("a"), a("6")), (a("b"), a("4")), (a("c"), a("3"))]
        );
        // Sorted but for a repeat at the end.
        assert_eq!(
            pairs(&Datum::map([("a", "1"), ("b", "2"), ("b", "3")])),
            [(a("a"), a("1")), (a("b"), a("3"))]
        );
        assert_eq!(pairs(&Datum::map(Vec::<(Atom, Atom)>::new())), []);
    }

    #[test]
    fn every_json_form_round_trips() {
        assert_eq!(round_trip("42"), Datum::scalar(42));
        assert_eq!(round_trip("-7"), Datum::scalar(-7));
        assert_eq!(round_trip("1.5"), Datum::scalar(1.5));
        assert_eq!(round_trip("true"), Datum::scalar(true));
        assert_eq!(round_trip("\"a\\\"b\""), Datum::scalar("a\"b"));
        let u = Uuid::parse_str("36bd8a88-2b8f-4b4c-8e18-1c2f2b6a1f00").unwrap();
        assert_eq!(
            round_trip("[\"uuid\",\"36bd8a88-2b8f-4b4c-8e18-1c2f2b6a1f00\"]"),
            Datum::uuid(u)
        );
        assert_eq!(
            round_trip("[\"named-uuid\",\"row_1\"]"),
            Datum::named_uuid("row_1")
        );
        assert_eq!(round_trip("[\"set\",[]]"), Datum::empty());
        assert_eq!(round_trip("[\"set\",[3,1,2]]"), Datum::set([1, 2, 3]));
        assert_eq!(
            round_trip("[\"map\",[[\"b\",2],[\"a\",1]]]"),
            Datum::map([("a", 1), ("b", 2)])
        );
        assert_eq!(round_trip("[\"map\",[]]"), Datum::Map(Box::default()));
    }

    #[test]
    fn every_real_survives_its_own_json_round_trip_exactly() {
        // Fuzzing found -9.733022326854775e18, the shortest form serde_json itself
        // writes, read back 1 ulp off without exact float parsing (`float_roundtrip`).
        let mut reals = vec![-9.733022326854775e18, 0.1, 1e-300, 5e-324, f64::MAX, -0.0];
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let r = f64::from_bits(x);
            if r.is_finite() {
                reals.push(r);
            }
        }
        for r in reals {
            let text = serde_json::to_string(&Datum::scalar(r)).unwrap();
            let back: Datum = serde_json::from_str(&text).unwrap();
            assert_eq!(
                back.as_scalar().map(|a| match a {
                    Atom::Real(b) => b.to_bits(),
                    _ => 0,
                }),
                Some(r.to_bits()),
                "{r:e} written as {text}"
            );
        }
    }

    #[test]
    fn a_value_and_an_atom_are_three_words() {
        // Every cached column pays for this much whether or not it holds anything:
        // a boxed slice (no capacity word) and the tag.
        assert_eq!(std::mem::size_of::<Datum>(), 24);
        // An atom is as big as its inline string, the tag kept in the string's spare
        // last byte.
        assert_eq!(std::mem::size_of::<Atom>(), 24);
    }

    #[test]
    fn single_element_set_is_written_as_bare_atom() {
        assert_eq!(serde_json::to_value(Datum::set(["x"])).unwrap(), json!("x"));
        assert_eq!(
            serde_json::to_value(Datum::set(["x", "y"])).unwrap(),
            json!(["set", ["x", "y"]])
        );
        let d: Datum = serde_json::from_value(json!(["set", ["only"]])).unwrap();
        assert_eq!(d, Datum::scalar("only"));
    }

    #[test]
    fn sets_and_maps_compare_equal_whatever_the_wire_order() {
        let a: Datum = serde_json::from_str("[\"set\",[\"b\",\"a\"]]").unwrap();
        let b: Datum = serde_json::from_str("[\"set\",[\"a\",\"b\"]]").unwrap();
        assert_eq!(a, b);
        let m: Datum = serde_json::from_str("[\"map\",[[\"z\",1],[\"a\",2]]]").unwrap();
        assert_eq!(m.get(&Atom::from("a")), Some(&Atom::Integer(2)));
        assert_eq!(m.get(&Atom::from("q")), None);
    }

    #[test]
    fn a_string_key_is_found_as_its_atom_is() {
        let keys = [
            "",
            "a",
            "k8s.ovn.org/owner-controller",
            "k8s.ovn.org/name",
            "z",
        ];
        let m = Datum::map(keys.iter().enumerate().map(|(i, k)| (*k, i as i64)));
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(m.get_str(k), Some(&Atom::Integer(i as i64)), "{k:?}");
            assert_eq!(m.get_str(k), m.get(&Atom::from(*k)));
        }
        for absent in ["b", "k8s.ovn.org/owner", "zz"] {
            assert_eq!(m.get_str(absent), None, "{absent:?}");
        }
        // Keys of another type hold no string; a set or a scalar is no map.
        let ints = Datum::map([(1, "x"), (2, "y")]);
        assert_eq!(ints.get_str("1"), None);
        assert_eq!(Datum::scalar("a").get_str("a"), None);
        assert_eq!(Datum::empty().get_str("a"), None);
    }

    fn rejects(text: &str, needle: &str) {
        let err = serde_json::from_str::<Datum>(text)
            .expect_err(text)
            .to_string();
        assert!(err.contains(needle), "{text}: {err:?} lacks {needle:?}");
    }

    #[test]
    fn malformed_forms_are_rejected_with_a_clear_message() {
        rejects("[\"uuid\",\"not-a-uuid\"]", "invalid uuid \"not-a-uuid\"");
        rejects("[\"uuid\"]", "lacks its uuid string");
        rejects("[\"bag\",[]]", "unknown array form [\"bag\"");
        rejects("[]", "empty array");
        rejects("[\"set\",[1,1]]", "duplicate element 1");
        rejects("[\"map\",[[\"k\",1],[\"k\",2]]]", "duplicate key \"k\"");
        rejects("[\"map\",[[\"k\"]]]", "lacks its value");
        rejects(
            "[\"set\",[[\"set\",[]]]]",
            "where a single atom was expected",
        );
        rejects("[\"set\",[1],2]", "more than two elements");
        rejects("{\"a\":1}", "an OVSDB value");
        rejects("null", "an OVSDB value");
        rejects("[\"named-uuid\",\"1bad\"]", "invalid named-uuid name");
        rejects("18446744073709551615", "does not fit");
    }

    #[test]
    fn atoms_of_mixed_types_order_by_type_then_value() {
        let d = Datum::set([
            Atom::from("b"),
            Atom::from(3),
            Atom::from("a"),
            Atom::from(1),
        ]);
        assert_eq!(
            d,
            Datum::Set(vec![1.into(), 3.into(), "a".into(), "b".into()].into())
        );
    }
}
