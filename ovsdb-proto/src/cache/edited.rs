//! Large set columns edited rather than copied. ovsdb-server sends a modify of a set
//! column as the elements to toggle; a router with 250k ports that gains one gets a
//! diff of one element. Applying it to a flat copy of the set costs 250k elements per
//! modify, for every one of a run of modifies. Here the new version keeps the flat set
//! it was edited from, shared, and only the elements toggled since: a modify copies
//! those. The set is made flat again when it is read whole as a [`Datum`] (once per
//! version read) or when its toggles outgrow the square root of its size, so that a
//! run of modifies costs about √n elements each.
//!
//! [`SetElements`] reads such a set (and any other) in place: its length, membership
//! and elements in order, without making it flat.

use std::cmp::Ordering;
use std::iter::Peekable;
use std::sync::{Arc, OnceLock};

use crate::datum::{Atom, Datum};

/// Sets of at least this many elements are edited by a modify, not copied.
pub(super) const EDITED_FROM: usize = 1024;

/// A large set as the flat set it was edited from (`base`) and the elements toggled
/// since (`toggles`, sorted: each one in `base` is taken out, each one not in it put
/// in).
#[derive(Debug)]
pub(super) struct EditedSet {
    base: Arc<Datum>,
    toggles: Box<[Atom]>,
    /// The number of elements.
    len: usize,
    /// The set made flat, once it has been read whole.
    flat: OnceLock<Arc<Datum>>,
}

/// A modified large set: still edited, or made flat again.
pub(super) enum Edit {
    /// The flat set and the toggles since.
    Edited(EditedSet),
    /// The set, flat.
    Flat(Datum),
}

impl EditedSet {
    /// The set whose flat form is `base` with `toggles` (sorted) toggled, `len`
    /// elements, with `diff` toggled too (an element repeated in `diff` toggles once);
    /// `None` when `base` is not a set.
    pub(super) fn edit(
        base: &Arc<Datum>,
        toggles: &[Atom],
        len: usize,
        diff: &[Atom],
    ) -> Option<Edit> {
        let elements = base.as_set()?;
        let mut diff: Vec<&Atom> = diff.iter().collect();
        if !diff.is_sorted_by(|a, b| a < b) {
            diff.sort_unstable();
            diff.dedup();
        }
        // Only the elements toggled now change the count: one in the set goes out,
        // one not in it comes in.
        let len = diff.iter().fold(len, |n, a| {
            let present = elements.binary_search(a).is_ok() != toggles.binary_search(a).is_ok();
            if present {
                n - 1
            } else {
                n + 1
            }
        });
        let toggles: Box<[Atom]> = merge(toggles.iter(), diff.into_iter()).cloned().collect();
        // Past √n toggles, each modify would copy more than a flat set's share of the
        // next flattening.
        if len < EDITED_FROM || toggles.len() > elements.len().isqrt().max(32) {
            let flat = merge(elements.iter(), toggles.iter()).cloned().collect();
            return Some(Edit::Flat(Datum::Set(flat)));
        }
        Some(Edit::Edited(EditedSet {
            base: base.clone(),
            toggles,
            len,
            flat: OnceLock::new(),
        }))
    }

    /// The flat set this one was edited from and the toggles since: the set made flat
    /// and none once it has been read whole.
    pub(super) fn parts(&self) -> (&Arc<Datum>, &[Atom]) {
        match self.flat.get() {
            Some(flat) => (flat, &[]),
            None => (&self.base, &self.toggles),
        }
    }

    /// The number of elements.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The set, flat: made on the first call.
    pub(super) fn flat(&self) -> &Datum {
        self.flat.get_or_init(|| {
            let base = self.base.as_set().unwrap_or(&[]);
            Arc::new(Datum::Set(
                merge(base.iter(), self.toggles.iter()).cloned().collect(),
            ))
        })
    }

    /// The elements, read in place.
    pub(super) fn elements(&self) -> SetElements<'_> {
        let (base, toggles) = self.parts();
        let base = base.as_set().unwrap_or(&[]);
        if toggles.is_empty() {
            return SetElements::flat(base);
        }
        SetElements(Inner::Edited {
            base,
            toggles,
            len: self.len,
        })
    }
}

/// The elements of two sorted sequences that are in exactly one of them, in order.
fn merge<'a>(
    a: impl Iterator<Item = &'a Atom>,
    b: impl Iterator<Item = &'a Atom>,
) -> SymmetricDifference<'a, impl Iterator<Item = &'a Atom>, impl Iterator<Item = &'a Atom>> {
    SymmetricDifference {
        a: a.peekable(),
        b: b.peekable(),
    }
}

/// See [`merge`].
struct SymmetricDifference<'a, A: Iterator<Item = &'a Atom>, B: Iterator<Item = &'a Atom>> {
    a: Peekable<A>,
    b: Peekable<B>,
}

impl<'a, A: Iterator<Item = &'a Atom>, B: Iterator<Item = &'a Atom>> Iterator
    for SymmetricDifference<'a, A, B>
{
    type Item = &'a Atom;

    fn next(&mut self) -> Option<&'a Atom> {
        loop {
            let order = match (self.a.peek(), self.b.peek()) {
                (None, None) => return None,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(a), Some(b)) => a.cmp(b),
            };
            match order {
                Ordering::Less => return self.a.next(),
                Ordering::Greater => return self.b.next(),
                Ordering::Equal => {
                    self.a.next();
                    self.b.next();
                }
            }
        }
    }
}

/// The elements of a set column of a cached row
/// ([`CachedRow::set`](super::CachedRow::set)), read where they are: a large set that
/// modifies edited is not made flat to be searched or walked.
#[derive(Clone, Copy, Debug)]
pub struct SetElements<'a>(Inner<'a>);

#[derive(Clone, Copy, Debug)]
enum Inner<'a> {
    Flat(&'a [Atom]),
    Edited {
        base: &'a [Atom],
        toggles: &'a [Atom],
        len: usize,
    },
}

impl<'a> SetElements<'a> {
    /// The elements of a flat set (sorted, as a [`Datum`] holds them).
    pub(super) fn flat(elements: &'a [Atom]) -> SetElements<'a> {
        SetElements(Inner::Flat(elements))
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        match self.0 {
            Inner::Flat(s) => s.len(),
            Inner::Edited { len, .. } => len,
        }
    }

    /// True for the empty set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when `atom` is an element (a binary search).
    pub fn contains(&self, atom: &Atom) -> bool {
        match self.0 {
            Inner::Flat(s) => s.binary_search(atom).is_ok(),
            Inner::Edited { base, toggles, .. } => {
                base.binary_search(atom).is_ok() != toggles.binary_search(atom).is_ok()
            }
        }
    }

    /// The elements, in order.
    pub fn iter(&self) -> impl Iterator<Item = &'a Atom> + use<'a> {
        let (base, toggles): (&[Atom], &[Atom]) = match self.0 {
            Inner::Flat(s) => (s, &[]),
            Inner::Edited { base, toggles, .. } => (base, toggles),
        };
        merge(base.iter(), toggles.iter())
    }
}

impl PartialEq for SetElements<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(range: impl Iterator<Item = i64>) -> Arc<Datum> {
        Arc::new(Datum::set(range))
    }

    fn atoms(xs: &[i64]) -> Vec<Atom> {
        xs.iter().map(|&x| Atom::Integer(x)).collect()
    }

    #[test]
    fn toggles_are_kept_apart_until_they_outgrow_the_square_root_of_the_set() {
        let base = set(0..4096);
        // Take 7 out, put 5000 in, twice each: one toggle left of each.
        let Some(Edit::Edited(e)) =
            EditedSet::edit(&base, &[], 4096, &atoms(&[5000, 7, 7, 5000, 7]))
        else {
            panic!("a small edit of a large set is kept as toggles");
        };
        assert_eq!(e.len(), 4096 + 1 - 1);
        let (b, t) = e.parts();
        assert!(Arc::ptr_eq(b, &base), "the flat set is shared, not copied");
        assert_eq!(t, &atoms(&[7, 5000])[..]);
        let read = e.elements();
        assert!(!read.contains(&Atom::Integer(7)) && read.contains(&Atom::Integer(5000)));
        assert!(read.contains(&Atom::Integer(8)) && !read.contains(&Atom::Integer(4096)));
        let want = Datum::set((0..4096).filter(|&x| x != 7).chain([5000]));
        assert!(read.iter().eq(want.as_set().unwrap()));
        assert_eq!(read, SetElements::flat(want.as_set().unwrap()));
        // Read whole: the same set, made flat once, and the base of the next edit.
        assert_eq!(*e.flat(), want);
        let (b, t) = e.parts();
        assert!(t.is_empty() && **b == want);
        // 64 toggles of a 4096-element set are its square root: past that, flat.
        let many: Vec<Atom> = atoms(&(10_000..10_064).collect::<Vec<_>>());
        assert!(matches!(
            EditedSet::edit(&base, &[], 4096, &many),
            Some(Edit::Edited(_))
        ));
        let Some(Edit::Flat(flat)) = EditedSet::edit(&base, &many, 4096 + 64, &atoms(&[20_000]))
        else {
            panic!("65 toggles of 4096 elements are made flat");
        };
        assert_eq!(flat.len(), 4096 + 65);
        // A set edited below the size worth editing is made flat too.
        let small = set(0..EDITED_FROM as i64);
        assert!(matches!(
            EditedSet::edit(&small, &[], EDITED_FROM, &atoms(&[0])),
            Some(Edit::Flat(d)) if d.len() == EDITED_FROM - 1
        ));
        // A map is not a set.
        let map = Arc::new(Datum::map([(1, 2)]));
        assert!(EditedSet::edit(&map, &[], 1, &atoms(&[1])).is_none());
    }
}
