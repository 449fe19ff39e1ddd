//! Checking a value against its column's type and constraints (RFC 7047 §3.2):
//! atomic type, enum, integer and real bounds, string length in characters, and the
//! number of elements.

use super::{BaseType, ColumnType, DatumError, Max, TableSchema};
use crate::datum::{Atom, AtomicType, Datum, Row};

/// Why a value does not fit its column's type.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ValueError {
    /// An atom of another atomic type.
    #[error("{atom} is of type {}, expected {expected}", atom.atomic_type())]
    Type {
        /// The atom.
        atom: Atom,
        /// The column's atomic type.
        expected: AtomicType,
    },
    /// An atom outside the type's `enum`.
    #[error("{atom} is not one of {}", list(allowed))]
    NotInEnum {
        /// The atom.
        atom: Atom,
        /// The allowed values.
        allowed: Vec<Atom>,
    },
    /// A number below `minInteger` or `minReal`.
    #[error("{value} is less than the minimum {min}")]
    BelowMinimum {
        /// The number as written.
        value: String,
        /// The minimum.
        min: String,
    },
    /// A number above `maxInteger` or `maxReal`.
    #[error("{value} is greater than the maximum {max}")]
    AboveMaximum {
        /// The number as written.
        value: String,
        /// The maximum.
        max: String,
    },
    /// A string shorter than `minLength` characters.
    #[error("{atom} is shorter than {min} characters")]
    TooShort {
        /// The string.
        atom: Atom,
        /// `minLength`.
        min: u64,
    },
    /// A string longer than `maxLength` characters.
    #[error("{atom} is longer than {max} characters")]
    TooLong {
        /// The string.
        atom: Atom,
        /// `maxLength`.
        max: u64,
    },
    /// Fewer elements than `min` or more than `max`.
    #[error("has {len} element{}, the column allows {min} to {max}", if *len == 1 { "" } else { "s" })]
    Count {
        /// How many the value has.
        len: usize,
        /// The column's `min`.
        min: u64,
        /// The column's `max`.
        max: Max,
    },
    /// A map key that does not fit the key type.
    #[error("key {0}")]
    Key(Box<ValueError>),
    /// A map value that does not fit the value type.
    #[error("value {0}")]
    Value(Box<ValueError>),
    /// A set for a map column.
    #[error("is a set, the column holds a map")]
    SetForMap,
    /// A map for a set column.
    #[error("is a map, the column holds a set")]
    MapForSet,
}

fn list(atoms: &[Atom]) -> String {
    let list: Vec<String> = atoms.iter().map(ToString::to_string).collect();
    list.join(", ")
}

impl BaseType {
    pub(super) fn atomic_matches(&self, atom: &Atom) -> bool {
        match (self.atomic, atom) {
            // A real written without a fraction arrives as an integer.
            (AtomicType::Real, Atom::Integer(_)) => true,
            (t, a) => a.atomic_type() == t,
        }
    }

    /// Checks one atom against the type and its constraints; the error says why not.
    pub fn check_atom(&self, atom: &Atom) -> Result<(), ValueError> {
        if !self.atomic_matches(atom) {
            return Err(ValueError::Type {
                atom: atom.clone(),
                expected: self.atomic,
            });
        }
        if let Some(allowed) = &self.enum_values {
            if allowed.binary_search(atom).is_err() {
                return Err(ValueError::NotInEnum {
                    atom: atom.clone(),
                    allowed: allowed.clone(),
                });
            }
        }
        match atom {
            Atom::Integer(i) => {
                if self.atomic == AtomicType::Real {
                    return self.check_real(*i as f64, atom);
                }
                if let Some(min) = self.min_integer {
                    if *i < min {
                        return Err(below(i, min));
                    }
                }
                if let Some(max) = self.max_integer {
                    if *i > max {
                        return Err(above(i, max));
                    }
                }
            }
            Atom::Real(r) => return self.check_real(*r, atom),
            Atom::String(s) if self.min_length.is_some() || self.max_length.is_some() => {
                let n = s.chars().count() as u64;
                if let Some(min) = self.min_length {
                    if n < min {
                        let atom = atom.clone();
                        return Err(ValueError::TooShort { atom, min });
                    }
                }
                if let Some(max) = self.max_length {
                    if n > max {
                        let atom = atom.clone();
                        return Err(ValueError::TooLong { atom, max });
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn check_real(&self, r: f64, atom: &Atom) -> Result<(), ValueError> {
        if let Some(min) = self.min_real {
            if r < min {
                return Err(below(atom, min));
            }
        }
        if let Some(max) = self.max_real {
            if r > max {
                return Err(above(atom, max));
            }
        }
        Ok(())
    }
}

impl ColumnType {
    /// Checks a datum against this type; the error says why it does not fit.
    pub fn check(&self, datum: &Datum) -> Result<(), ValueError> {
        self.check_count(datum.len())?;
        match (&self.value, datum) {
            (None, Datum::Set(atoms)) => self.check_elements(atoms)?,
            (Some(value), Datum::Map(pairs)) => {
                for (k, v) in pairs {
                    self.key
                        .check_atom(k)
                        .map_err(|e| ValueError::Key(Box::new(e)))?;
                    value
                        .check_atom(v)
                        .map_err(|e| ValueError::Value(Box::new(e)))?;
                }
            }
            (Some(_), Datum::Set(atoms)) if atoms.is_empty() => {}
            (Some(_), Datum::Set(_)) => return Err(ValueError::SetForMap),
            (None, Datum::Map(_)) => return Err(ValueError::MapForSet),
        }
        Ok(())
    }

    /// Checks that a value of `len` elements or pairs fits this type's `min` and `max`.
    pub(crate) fn check_count(&self, len: usize) -> Result<(), ValueError> {
        if (len as u64) < self.min || !self.max.allows(len) {
            return Err(ValueError::Count {
                len,
                min: self.min,
                max: self.max,
            });
        }
        Ok(())
    }

    /// Checks elements of a set of this type against its key type.
    pub(crate) fn check_elements(&self, atoms: &[Atom]) -> Result<(), ValueError> {
        atoms.iter().try_for_each(|a| self.key.check_atom(a))
    }
}

impl TableSchema {
    /// Checks one column's value, naming the table, column and value when it does not fit.
    pub fn check_datum(&self, column: &str, datum: &Datum) -> Result<(), DatumError> {
        let fail = |reason: String| DatumError {
            table: self.name.clone(),
            column: column.to_owned(),
            value: datum.to_string(),
            reason,
        };
        let ty = self
            .column_type(column)
            .ok_or_else(|| fail(format!("table {} has no column {column}", self.name)))?;
        ty.check(datum).map_err(|e| fail(e.to_string()))
    }

    /// Checks every column of a row.
    pub fn check_row(&self, row: &Row) -> Result<(), DatumError> {
        for (column, datum) in row {
            self.check_datum(column, datum)?;
        }
        Ok(())
    }
}

fn below(value: impl ToString, min: impl ToString) -> ValueError {
    ValueError::BelowMinimum {
        value: value.to_string(),
        min: min.to_string(),
    }
}

fn above(value: impl ToString, max: impl ToString) -> ValueError {
    ValueError::AboveMaximum {
        value: value.to_string(),
        max: max.to_string(),
    }
}
