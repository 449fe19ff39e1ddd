//! Integer ids from a range: node ids, network ids, tunnel keys.
//!
//! OVN-Kubernetes hands ids out round-robin (a cursor that moves past the last id given
//! out, so a freed id is not reused at once) and rebuilds its allocators from the
//! annotations on restart. Here the cursor is a function of the ids in use: the next
//! id is the one after the highest in use, wrapping to the lowest free one when the
//! range's end is reached. The same ids in use always give the same next id, whoever
//! computes it and whenever, which is what lets two zones or a restarted daemon agree.

use std::collections::BTreeSet;

/// Ids of an inclusive range, some in use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IdAllocator {
    first: u32,
    last: u32,
    used: BTreeSet<u32>,
}

/// Why an id could not be had.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum IdError {
    /// Every id of the range is in use.
    #[error("all ids from {first} to {last} are in use")]
    Exhausted {
        /// The range's first id.
        first: u32,
        /// The range's last id.
        last: u32,
    },
    /// The id is outside the range.
    #[error("{id} is outside {first}..={last}")]
    OutOfRange {
        /// The id.
        id: u32,
        /// The range's first id.
        first: u32,
        /// The range's last id.
        last: u32,
    },
    /// The id is taken already.
    #[error("{0} is already in use")]
    Taken(u32),
}

impl IdAllocator {
    /// An allocator of `first..=last`, all free.
    pub fn new(first: u32, last: u32) -> IdAllocator {
        IdAllocator {
            first,
            last,
            used: BTreeSet::new(),
        }
    }

    /// Marks `id` as in use (an id read from an annotation).
    pub(crate) fn reserve(&mut self, id: u32) -> Result<(), IdError> {
        if id < self.first || id > self.last {
            return Err(IdError::OutOfRange {
                id,
                first: self.first,
                last: self.last,
            });
        }
        if !self.used.insert(id) {
            return Err(IdError::Taken(id));
        }
        Ok(())
    }

    /// Hands out the next id: the one after the highest in use, else (at the range's
    /// end) the lowest free one.
    pub fn allocate(&mut self) -> Result<u32, IdError> {
        let start = match self.used.last() {
            Some(&h) if h < self.last => h + 1,
            _ => self.first,
        };
        let id = (start..=self.last)
            .chain(self.first..start)
            .find(|i| !self.used.contains(i))
            .ok_or(IdError::Exhausted {
                first: self.first,
                last: self.last,
            })?;
        self.used.insert(id);
        Ok(id)
    }

    #[cfg(test)]
    /// Frees `id`.
    pub fn release(&mut self, id: u32) {
        self.used.remove(&id);
    }

    #[cfg(test)]
    /// True when `id` is in use.
    pub(crate) fn is_used(&self, id: u32) -> bool {
        self.used.contains(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_come_after_the_highest_in_use_then_wrap() {
        let mut a = IdAllocator::new(2, 5);
        assert_eq!(a.allocate().unwrap(), 2);
        assert_eq!(a.allocate().unwrap(), 3);
        a.release(2);
        assert_eq!(a.allocate().unwrap(), 4, "a freed id is not reused at once");
        assert_eq!(a.allocate().unwrap(), 5);
        assert_eq!(a.allocate().unwrap(), 2, "wraps to the lowest free");
        assert_eq!(
            a.allocate().unwrap_err(),
            IdError::Exhausted { first: 2, last: 5 }
        );
    }

    #[test]
    fn reservations_are_checked() {
        let mut a = IdAllocator::new(2, 10);
        a.reserve(7).unwrap();
        assert_eq!(a.reserve(7).unwrap_err(), IdError::Taken(7));
        assert!(matches!(a.reserve(1), Err(IdError::OutOfRange { .. })));
        assert_eq!(a.allocate().unwrap(), 8);
        assert!(a.is_used(7));
    }

    #[test]
    fn the_same_ids_in_use_give_the_same_next_id() {
        let mut a = IdAllocator::new(1, 100);
        let mut b = IdAllocator::new(1, 100);
        for id in [3, 9, 4] {
            a.reserve(id).unwrap();
        }
        for id in [9, 4, 3] {
            b.reserve(id).unwrap();
        }
        assert_eq!(a.allocate().unwrap(), b.allocate().unwrap());
    }
}
