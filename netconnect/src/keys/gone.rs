//! The keys of owners gone: rows stamped with an owner the inputs no longer define
//! are removed by a key of their own (what a kind claims besides them, its
//! [`super::Kind::gone`]).

use crate::ovnk::ownership::Owner;
use crate::topology::Desired;

/// Rows of owners gone go with the networks': before what might take their names.
pub(super) const PHASE: usize = 1;

/// The key removing `owner`'s stamped rows and nothing else.
pub(super) fn desired(owner: &Owner) -> Desired {
    Desired::new(owner.clone())
}
