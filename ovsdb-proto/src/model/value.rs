//! Conversions between Rust field types and OVSDB data.
//!
//! [`AtomValue`] is one atom (integer, real, boolean, string, uuid, an enum, a typed
//! reference); [`ColumnValue`] a whole column: a scalar, an `Option` (min 0, max 1), a
//! `BTreeSet` or a `BTreeMap`. `ColumnValue` also applies the `modify` diffs of
//! `update2` notifications.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use crate::datum::{Atom, AtomicType, Datum};

/// A value that cannot become (or be changed as) a model field's type: what was found
/// instead. [`super::DecodeError`] adds the table and column.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConvertError {
    /// What is wrong, e.g. `"x" is of type string, expected integer`.
    pub message: String,
}

impl ConvertError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> ConvertError {
        ConvertError {
            message: message.into(),
        }
    }
}

/// The shape of a column as a model field declares it, for checking a model against a
/// server's schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueKind {
    /// The type of the atoms (of the keys, for a map).
    pub key: AtomicType,
    /// For a map, the type of the values.
    pub value: Option<AtomicType>,
    /// Least number of elements.
    pub min: u64,
    /// Greatest number of elements; `None` for unlimited.
    pub max: Option<u64>,
    /// The table the key atoms refer to, for references.
    pub key_ref: Option<&'static str>,
    /// The table the value atoms refer to, for maps of references.
    pub value_ref: Option<&'static str>,
}

/// A Rust type that holds one OVSDB atom.
pub trait AtomValue: Sized + Clone {
    /// The atomic type on the wire.
    const ATOMIC_TYPE: AtomicType;
    /// The table referred to, for typed references.
    const REF_TABLE: Option<&'static str> = None;
    /// Reads the atom; the error says what was found instead.
    fn from_atom(atom: &Atom) -> Result<Self, ConvertError>;
    /// Reads an atom the caller no longer needs (strings are moved, not copied).
    fn from_atom_owned(atom: Atom) -> Result<Self, ConvertError> {
        Self::from_atom(&atom)
    }
    /// The atom on the wire.
    fn to_atom(&self) -> Atom;
}

fn wrong(atom: &Atom, expected: AtomicType) -> ConvertError {
    ConvertError::new(format!(
        "{atom} is of type {}, expected {expected}",
        atom.atomic_type()
    ))
}

impl AtomValue for i64 {
    const ATOMIC_TYPE: AtomicType = AtomicType::Integer;
    fn from_atom(atom: &Atom) -> Result<Self, ConvertError> {
        atom.as_integer()
            .ok_or_else(|| wrong(atom, AtomicType::Integer))
    }
    fn to_atom(&self) -> Atom {
        Atom::Integer(*self)
    }
}

impl AtomValue for f64 {
    const ATOMIC_TYPE: AtomicType = AtomicType::Real;
    fn from_atom(atom: &Atom) -> Result<Self, ConvertError> {
        match atom {
            Atom::Real(r) => Ok(*r),
            // A real without a fraction is written as an integer.
            Atom::Integer(i) => Ok(*i as f64),
            other => Err(wrong(other, AtomicType::Real)),
        }
    }
    fn to_atom(&self) -> Atom {
        Atom::Real(*self)
    }
}

impl AtomValue for bool {
    const ATOMIC_TYPE: AtomicType = AtomicType::Boolean;
    fn from_atom(atom: &Atom) -> Result<Self, ConvertError> {
        match atom {
            Atom::Boolean(b) => Ok(*b),
            other => Err(wrong(other, AtomicType::Boolean)),
        }
    }
    fn to_atom(&self) -> Atom {
        Atom::Boolean(*self)
    }
}

impl AtomValue for String {
    const ATOMIC_TYPE: AtomicType = AtomicType::String;
    fn from_atom_owned(atom: Atom) -> Result<Self, ConvertError> {
        match atom {
            Atom::String(s) => Ok(s.into_string()),
            other => Err(wrong(&other, AtomicType::String)),
        }
    }
    fn from_atom(atom: &Atom) -> Result<Self, ConvertError> {
        atom.as_str()
            .map(str::to_owned)
            .ok_or_else(|| wrong(atom, AtomicType::String))
    }
    fn to_atom(&self) -> Atom {
        Atom::String(self.clone().into())
    }
}

impl AtomValue for Uuid {
    const ATOMIC_TYPE: AtomicType = AtomicType::Uuid;
    fn from_atom(atom: &Atom) -> Result<Self, ConvertError> {
        atom.as_uuid().ok_or_else(|| wrong(atom, AtomicType::Uuid))
    }
    fn to_atom(&self) -> Atom {
        Atom::Uuid(*self)
    }
}

/// A Rust type that holds a whole column's value.
pub trait ColumnValue: Sized + Clone + PartialEq {
    /// The column shape this type stands for.
    fn kind() -> ValueKind;
    /// Reads a column's value.
    fn from_datum(datum: &Datum) -> Result<Self, ConvertError>;
    /// The value on the wire.
    fn to_datum(&self) -> Datum;
    /// Applies an `update2` `modify` entry as ovsdb-server makes it: the new value for
    /// a column of at most one value; for a set the elements to add or remove; for a
    /// map the pairs to add, change or remove. (The same function as the cache's.)
    fn apply_diff(&mut self, diff: &Datum) -> Result<(), ConvertError> {
        let kind = Self::kind();
        let single = kind.max == Some(1);
        let new = if single {
            diff.clone()
        } else {
            crate::diff::apply_diff(false, kind.value.is_some(), &self.to_datum(), diff)
                .map_err(|e| ConvertError::new(e.to_string()))?
        };
        *self = Self::from_datum_owned(new)?;
        Ok(())
    }
    /// True when this is the value a new row gets when the column is left out.
    fn is_default(&self) -> bool;

    /// Reads a value the caller no longer needs (strings are moved, not copied).
    fn from_datum_owned(datum: Datum) -> Result<Self, ConvertError> {
        Self::from_datum(&datum)
    }

    /// Decodes the value straight from the wire. The default goes through [`Datum`];
    /// scalars read their atom directly.
    fn deserialize_wire<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        super::wire::via_datum(d)
    }

    /// The value from a bare string on the wire (a scalar string column); the default
    /// goes through [`Datum`].
    fn from_wire_str(s: &str) -> Result<Self, ConvertError> {
        Self::from_datum(&Datum::Set(vec![Atom::String(s.to_owned().into())].into()))
    }
}

fn scalar_kind<T: AtomValue>() -> ValueKind {
    ValueKind {
        key: T::ATOMIC_TYPE,
        value: None,
        min: 1,
        max: Some(1),
        key_ref: T::REF_TABLE,
        value_ref: None,
    }
}

fn one_atom(datum: &Datum) -> Result<&Atom, ConvertError> {
    datum
        .as_scalar()
        .ok_or_else(|| ConvertError::new(format!("{datum} is not a single value")))
}

/// Scalars: exactly one atom.
macro_rules! scalar_column {
    ($($t:ty => $default:expr),*) => {$(
        impl ColumnValue for $t {
            fn kind() -> ValueKind {
                scalar_kind::<$t>()
            }
            fn from_datum(datum: &Datum) -> Result<Self, ConvertError> {
                <$t as AtomValue>::from_atom(one_atom(datum)?)
            }
            fn to_datum(&self) -> Datum {
                Datum::Set(vec![self.to_atom()].into())
            }
            #[allow(clippy::float_cmp)]
            fn is_default(&self) -> bool {
                *self == $default
            }
            fn deserialize_wire<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any(super::wire::ScalarVisitor::<$t>(std::marker::PhantomData))
            }
        }
    )*};
}

scalar_column!(i64 => 0, f64 => 0.0, bool => false, String => "", Uuid => Uuid::nil());

/// Implements [`ColumnValue`] for a scalar column of an [`AtomValue`] type that has a
/// `Default` (used by the derives for enums and by [`Ref`](super::Ref)).
#[macro_export]
macro_rules! impl_scalar_column {
    ($t:ty) => {
        impl $crate::model::ColumnValue for $t {
            fn kind() -> $crate::model::ValueKind {
                $crate::model::__scalar_kind::<$t>()
            }
            fn from_datum(
                datum: &$crate::Datum,
            ) -> ::std::result::Result<Self, $crate::model::ConvertError> {
                $crate::model::__scalar_from_datum(datum)
            }
            fn to_datum(&self) -> $crate::Datum {
                $crate::Datum::Set(::std::vec![$crate::model::AtomValue::to_atom(self)].into())
            }
            fn is_default(&self) -> bool {
                *self == <$t as ::std::default::Default>::default()
            }
        }
    };
}

#[doc(hidden)]
pub fn __scalar_kind<T: AtomValue>() -> ValueKind {
    scalar_kind::<T>()
}

#[doc(hidden)]
pub fn __scalar_from_datum<T: AtomValue>(datum: &Datum) -> Result<T, ConvertError> {
    T::from_atom(one_atom(datum)?)
}

impl<T: AtomValue + PartialEq> ColumnValue for Option<T> {
    fn kind() -> ValueKind {
        ValueKind {
            min: 0,
            ..scalar_kind::<T>()
        }
    }
    fn from_datum(datum: &Datum) -> Result<Self, ConvertError> {
        match datum.as_set() {
            Some([]) => Ok(None),
            Some([atom]) => T::from_atom(atom).map(Some),
            _ => Err(ConvertError::new(format!(
                "{datum} holds more than one value"
            ))),
        }
    }
    fn to_datum(&self) -> Datum {
        match self {
            Some(v) => Datum::Set(vec![v.to_atom()].into()),
            None => Datum::empty(),
        }
    }
    fn from_datum_owned(datum: Datum) -> Result<Self, ConvertError> {
        match datum {
            Datum::Set(atoms) if atoms.len() <= 1 => {
                atoms.into_vec().pop().map(T::from_atom_owned).transpose()
            }
            other => Err(ConvertError::new(format!(
                "{other} holds more than one value"
            ))),
        }
    }
    fn is_default(&self) -> bool {
        self.is_none()
    }
}

impl<T: AtomValue + Ord> ColumnValue for BTreeSet<T> {
    fn kind() -> ValueKind {
        ValueKind {
            min: 0,
            max: None,
            ..scalar_kind::<T>()
        }
    }
    fn from_datum(datum: &Datum) -> Result<Self, ConvertError> {
        datum
            .as_set()
            .ok_or_else(|| ConvertError::new(format!("{datum} is not a set")))?
            .iter()
            .map(T::from_atom)
            .collect()
    }
    fn to_datum(&self) -> Datum {
        // A BTreeSet iterates in its own order, which for enums need not be the atoms'
        // order; Datum::set sorts.
        Datum::set(self.iter().map(AtomValue::to_atom))
    }
    fn from_datum_owned(datum: Datum) -> Result<Self, ConvertError> {
        match datum {
            Datum::Set(atoms) => atoms
                .into_vec()
                .into_iter()
                .map(T::from_atom_owned)
                .collect(),
            other => Err(ConvertError::new(format!("{other} is not a set"))),
        }
    }
    fn is_default(&self) -> bool {
        self.is_empty()
    }
}

impl<K: AtomValue + Ord, V: AtomValue + PartialEq> ColumnValue for BTreeMap<K, V> {
    fn kind() -> ValueKind {
        ValueKind {
            key: K::ATOMIC_TYPE,
            value: Some(V::ATOMIC_TYPE),
            min: 0,
            max: None,
            key_ref: K::REF_TABLE,
            value_ref: V::REF_TABLE,
        }
    }
    fn from_datum(datum: &Datum) -> Result<Self, ConvertError> {
        datum
            .as_map()
            .ok_or_else(|| ConvertError::new(format!("{datum} is not a map")))?
            .iter()
            .map(|(k, v)| Ok((K::from_atom(k)?, V::from_atom(v)?)))
            .collect()
    }
    fn to_datum(&self) -> Datum {
        Datum::map(self.iter().map(|(k, v)| (k.to_atom(), v.to_atom())))
    }
    fn from_datum_owned(datum: Datum) -> Result<Self, ConvertError> {
        match datum {
            Datum::Map(pairs) => pairs
                .into_vec()
                .into_iter()
                .map(|(k, v)| Ok((K::from_atom_owned(k)?, V::from_atom_owned(v)?)))
                .collect(),
            Datum::Set(s) if s.is_empty() => Ok(BTreeMap::new()),
            other => Err(ConvertError::new(format!("{other} is not a map"))),
        }
    }
    fn is_default(&self) -> bool {
        self.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(json: &str) -> Datum {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn scalars_round_trip_and_reject_other_types() {
        assert_eq!(i64::from_datum(&d("5")).unwrap(), 5);
        assert_eq!(
            f64::from_datum(&d("2")).unwrap(),
            2.0,
            "a real written as an integer"
        );
        assert_eq!(String::from_datum(&d("\"x\"")).unwrap(), "x");
        assert!(String::from_datum(&d("5"))
            .unwrap_err()
            .message
            .contains("expected string"));
        assert!(i64::from_datum(&d("[\"set\",[]]"))
            .unwrap_err()
            .message
            .contains("not a single value"));
        assert_eq!(true.to_datum(), d("true"));
    }

    #[test]
    fn optional_values_are_replaced_under_update2_diffs() {
        // ovsdb-server sends the new value of a column that holds at most one value
        // (lib/ovsdb-data.c diffs only columns whose max is above 1).
        let mut v: Option<String> = None;
        v.apply_diff(&d("\"a\"")).unwrap();
        assert_eq!(v.as_deref(), Some("a"));
        v.apply_diff(&d("\"b\"")).unwrap();
        assert_eq!(v.as_deref(), Some("b"));
        v.apply_diff(&d("[\"set\",[]]")).unwrap();
        assert_eq!(v, None);
        assert!(v.apply_diff(&d("[\"set\",[\"a\",\"b\"]]")).is_err());
    }

    #[test]
    fn sets_toggle_and_maps_add_change_remove_under_update2_diffs() {
        let mut s: BTreeSet<i64> = [1, 2].into();
        s.apply_diff(&d("[\"set\",[2,3]]")).unwrap();
        assert_eq!(s, [1, 3].into());
        let mut m: BTreeMap<String, String> =
            [("a".into(), "1".into()), ("b".into(), "2".into())].into();
        m.apply_diff(&d("[\"map\",[[\"a\",\"1\"],[\"b\",\"9\"],[\"c\",\"3\"]]]"))
            .unwrap();
        let want: BTreeMap<String, String> =
            [("b".into(), "9".into()), ("c".into(), "3".into())].into();
        assert_eq!(m, want);
    }

    #[test]
    fn kinds_describe_the_shape() {
        let k = <BTreeMap<String, i64>>::kind();
        assert_eq!(
            (k.key, k.value, k.min, k.max),
            (AtomicType::String, Some(AtomicType::Integer), 0, None)
        );
        let k = <Option<bool>>::kind();
        assert_eq!((k.min, k.max), (0, Some(1)));
    }
}
