//! Typed columns: conditions and mutations that only accept values of the column's
//! type, and only the functions and mutators that make sense for it.

use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;

use crate::datum::Datum;
use crate::ops::{Condition, Function, Mutation, Mutator};

use super::{AtomValue, ColumnValue};

/// Column `name` of table `T`, whose values are of type `V`.
pub struct Column<T, V> {
    name: &'static str,
    _types: PhantomData<fn() -> (T, V)>,
}

impl<T, V> Column<T, V> {
    /// A column of this name. Generated code builds these; use `T::COLUMNS`.
    pub const fn new(name: &'static str) -> Self {
        Column {
            name,
            _types: PhantomData,
        }
    }

    /// The column's name in the schema.
    pub fn name(&self) -> &'static str {
        self.name
    }

    fn cond(&self, function: Function, value: Datum) -> Cond<T> {
        Cond {
            condition: Condition {
                column: self.name.to_owned(),
                function,
                value,
            },
            _table: PhantomData,
        }
    }

    fn mutation(&self, mutator: Mutator, value: Datum) -> Mut<T> {
        Mut {
            mutation: Mutation {
                column: self.name.to_owned(),
                mutator,
                value,
            },
            _table: PhantomData,
        }
    }
}

/// A column of table `T`, whatever its values' type: what
/// [`Transaction::update_where`](crate::model::db::Transaction::update_where) and
/// [`Transaction::wait_unchanged`](crate::model::db::Transaction::wait_unchanged) take
/// a list of (`&[T::COLUMNS.name.into(), T::COLUMNS.other_config.into()]`), so that a
/// column of another table, or none, does not compile.
pub struct AnyColumn<T> {
    name: &'static str,
    _table: PhantomData<fn() -> T>,
}

impl<T> AnyColumn<T> {
    /// The column's name in the schema.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl<T> Clone for AnyColumn<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for AnyColumn<T> {}

impl<T, V> From<Column<T, V>> for AnyColumn<T> {
    fn from(c: Column<T, V>) -> AnyColumn<T> {
        AnyColumn {
            name: c.name,
            _table: PhantomData,
        }
    }
}

impl<T, V> Clone for Column<T, V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, V> Copy for Column<T, V> {}

impl<T, V> std::fmt::Debug for Column<T, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Column({})", self.name)
    }
}

/// A condition on a row of table `T`.
#[derive(Clone, Debug, PartialEq)]
pub struct Cond<T> {
    condition: Condition,
    _table: PhantomData<fn() -> T>,
}

impl<T> Cond<T> {
    /// The untyped condition.
    pub fn condition(&self) -> &Condition {
        &self.condition
    }

    /// Unwraps the untyped condition.
    pub fn into_condition(self) -> Condition {
        self.condition
    }
}

/// A mutation of a row of table `T`.
#[derive(Clone, Debug, PartialEq)]
pub struct Mut<T> {
    mutation: Mutation,
    _table: PhantomData<fn() -> T>,
}

impl<T> Mut<T> {
    /// The untyped mutation.
    pub fn mutation(&self) -> &Mutation {
        &self.mutation
    }

    /// Unwraps the untyped mutation.
    pub fn into_mutation(self) -> Mutation {
        self.mutation
    }
}

impl<T, V: ColumnValue> Column<T, V> {
    /// `column == value`.
    pub fn eq(&self, value: impl Into<V>) -> Cond<T> {
        self.cond(Function::Eq, value.into().to_datum())
    }

    /// `column != value`.
    pub fn ne(&self, value: impl Into<V>) -> Cond<T> {
        self.cond(Function::Ne, value.into().to_datum())
    }
}

macro_rules! numeric {
    ($t:ty) => {
        impl<T> Column<T, $t> {
            /// `column < value`.
            pub fn lt(&self, value: impl Into<$t>) -> Cond<T> {
                self.cond(Function::Lt, Datum::scalar(value.into()))
            }
            /// `column <= value`.
            pub fn le(&self, value: impl Into<$t>) -> Cond<T> {
                self.cond(Function::Le, Datum::scalar(value.into()))
            }
            /// `column > value`.
            pub fn gt(&self, value: impl Into<$t>) -> Cond<T> {
                self.cond(Function::Gt, Datum::scalar(value.into()))
            }
            /// `column >= value`.
            pub fn ge(&self, value: impl Into<$t>) -> Cond<T> {
                self.cond(Function::Ge, Datum::scalar(value.into()))
            }
            /// `column += value`.
            pub fn add(&self, value: impl Into<$t>) -> Mut<T> {
                self.mutation(Mutator::Add, Datum::scalar(value.into()))
            }
            /// `column -= value`.
            pub fn sub(&self, value: impl Into<$t>) -> Mut<T> {
                self.mutation(Mutator::Sub, Datum::scalar(value.into()))
            }
            /// `column *= value`.
            pub fn mul(&self, value: impl Into<$t>) -> Mut<T> {
                self.mutation(Mutator::Mul, Datum::scalar(value.into()))
            }
            /// `column /= value`.
            pub fn div(&self, value: impl Into<$t>) -> Mut<T> {
                self.mutation(Mutator::Div, Datum::scalar(value.into()))
            }
        }
    };
}

numeric!(i64);
numeric!(f64);

impl<T> Column<T, i64> {
    /// `column %= value`.
    pub fn rem(&self, value: impl Into<i64>) -> Mut<T> {
        self.mutation(Mutator::Mod, Datum::scalar(value.into()))
    }
}

fn set_of<E: AtomValue>(elements: impl IntoIterator<Item = impl Into<E>>) -> Datum {
    Datum::set(elements.into_iter().map(|e| e.into().to_atom()))
}

fn map_of<K: AtomValue, V: AtomValue>(
    pairs: impl IntoIterator<Item = (impl Into<K>, impl Into<V>)>,
) -> Datum {
    Datum::map(
        pairs
            .into_iter()
            .map(|(k, v)| (k.into().to_atom(), v.into().to_atom())),
    )
}

impl<T, E: AtomValue + Ord> Column<T, BTreeSet<E>> {
    /// The column holds every one of `elements`.
    pub fn includes(&self, elements: impl IntoIterator<Item = impl Into<E>>) -> Cond<T> {
        self.cond(Function::Includes, set_of(elements))
    }
    /// The column holds none of `elements`.
    pub fn excludes(&self, elements: impl IntoIterator<Item = impl Into<E>>) -> Cond<T> {
        self.cond(Function::Excludes, set_of(elements))
    }
    /// Adds `elements` to the set.
    pub fn insert(&self, elements: impl IntoIterator<Item = impl Into<E>>) -> Mut<T> {
        self.mutation(Mutator::Insert, set_of(elements))
    }
    /// Removes `elements` from the set.
    pub fn delete(&self, elements: impl IntoIterator<Item = impl Into<E>>) -> Mut<T> {
        self.mutation(Mutator::Delete, set_of(elements))
    }
}

impl<T, E: AtomValue + PartialEq> Column<T, Option<E>> {
    /// The column holds `value`.
    pub fn includes(&self, value: impl Into<E>) -> Cond<T> {
        self.cond(Function::Includes, set_of::<E>([value.into()]))
    }
    /// The column does not hold `value`.
    pub fn excludes(&self, value: impl Into<E>) -> Cond<T> {
        self.cond(Function::Excludes, set_of::<E>([value.into()]))
    }
}

impl<T, K: AtomValue + Ord, V: AtomValue + PartialEq> Column<T, BTreeMap<K, V>> {
    /// The map holds every one of `pairs`.
    pub fn includes(
        &self,
        pairs: impl IntoIterator<Item = (impl Into<K>, impl Into<V>)>,
    ) -> Cond<T> {
        self.cond(Function::Includes, map_of(pairs))
    }
    /// The map holds none of `pairs`.
    pub fn excludes(
        &self,
        pairs: impl IntoIterator<Item = (impl Into<K>, impl Into<V>)>,
    ) -> Cond<T> {
        self.cond(Function::Excludes, map_of(pairs))
    }
    /// Adds `pairs` whose keys are not in the map yet (a key already present keeps its
    /// value: delete it first to change it).
    pub fn insert(&self, pairs: impl IntoIterator<Item = (impl Into<K>, impl Into<V>)>) -> Mut<T> {
        self.mutation(Mutator::Insert, map_of(pairs))
    }
    /// Removes these keys, whatever their values.
    pub fn delete_keys(&self, keys: impl IntoIterator<Item = impl Into<K>>) -> Mut<T> {
        self.mutation(Mutator::Delete, set_of(keys))
    }
    /// Removes these pairs where the key still has that value.
    pub fn delete_pairs(
        &self,
        pairs: impl IntoIterator<Item = (impl Into<K>, impl Into<V>)>,
    ) -> Mut<T> {
        self.mutation(Mutator::Delete, map_of(pairs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct T;

    #[test]
    fn typed_conditions_and_mutations_serialize_as_rfc_7047() {
        let name: Column<T, String> = Column::new("name");
        let prio: Column<T, i64> = Column::new("priority");
        let ids: Column<T, BTreeMap<String, String>> = Column::new("external_ids");
        let tags: Column<T, BTreeSet<i64>> = Column::new("tags");
        let peer: Column<T, Option<String>> = Column::new("peer");
        let c = [
            name.eq("a").into_condition(),
            prio.ge(100).into_condition(),
            ids.includes([("k", "v")]).into_condition(),
            tags.excludes([3]).into_condition(),
            peer.includes("p").into_condition(),
        ];
        assert_eq!(
            serde_json::to_value(c).unwrap(),
            json!([
                ["name", "==", "a"],
                ["priority", ">=", 100],
                ["external_ids", "includes", ["map", [["k", "v"]]]],
                ["tags", "excludes", 3],
                ["peer", "includes", "p"],
            ])
        );
        let m = [
            ids.delete_keys(["k"]).into_mutation(),
            tags.insert([1, 2]).into_mutation(),
            prio.add(1).into_mutation(),
        ];
        assert_eq!(
            serde_json::to_value(m).unwrap(),
            json!([
                ["external_ids", "delete", "k"],
                ["tags", "insert", ["set", [1, 2]]],
                ["priority", "+=", 1]
            ])
        );
    }
}
