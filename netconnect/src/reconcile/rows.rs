//! A key's rows as one snapshot holds them ([`KeyRows`]), and the sets of row addresses
//! the reconciler keeps of them ([`UuidSet`], [`KeptRows`]).

use std::collections::HashMap;
use std::sync::Arc;

use ovsdb_proto::cache::{CachedRow, IndexedRows, RowChange, Snapshot};
use ovsdb_proto::Uuid;

use super::nb::{self, NbIndexes};
use crate::ovnk::ownership::{Owner, Scope};

/// A key's rows in one snapshot (its scope in every table), each with its table: the
/// entries of the owner indexes that hold them, shared with the snapshot, so that
/// reading them copies nothing (a network's key has about 1500 rows, read twice per
/// reconcile) and two reads tell in constant time which tables' rows are untouched.
/// Read once per snapshot and shared by the planner, the fragment memo and the checks
/// of who changed what.
#[derive(Clone, Debug, Default)]
pub(crate) struct KeyRows {
    /// In [`nb::KeyPart::label`] order.
    parts: Vec<nb::KeyPart>,
}

/// One of a key's rows.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyRow<'a> {
    /// Its address.
    pub uuid: Uuid,
    /// Its table, an index in [`nb::TABLES`].
    pub table: usize,
    /// The row.
    pub row: &'a Arc<CachedRow>,
    /// True for a row of the key's network written under another owner
    /// ([`nb::PartSource::Aliased`]).
    pub aliased: bool,
}

impl KeyRows {
    /// The rows of the key of `owner` and `scope` in `snap`.
    pub fn read(snap: &Snapshot, nb: &NbIndexes, owner: &Owner, scope: &Scope) -> KeyRows {
        KeyRows {
            parts: nb.key_parts(snap, owner, scope),
        }
    }

    /// The key's row at `uuid`, if it is one.
    pub fn get(&self, uuid: &Uuid) -> Option<KeyRow<'_>> {
        self.locate(uuid).map(|(_, r)| r)
    }

    /// True when the row at `uuid` is one of the key's.
    pub fn contains(&self, uuid: &Uuid) -> bool {
        self.parts.iter().any(|p| p.rows.get(uuid).is_some())
    }

    /// The rows, table by table (each table's in uuid order).
    pub fn iter(&self) -> impl Iterator<Item = KeyRow<'_>> {
        self.parts.iter().flat_map(|p| {
            let aliased = p.source == nb::PartSource::Aliased;
            p.rows.iter().map(move |(uuid, row)| KeyRow {
                uuid: *uuid,
                table: p.table,
                row,
                aliased,
            })
        })
    }

    /// The index entries holding the rows.
    pub fn parts(&self) -> impl Iterator<Item = &nb::KeyPart> {
        self.parts.iter()
    }

    /// True when every part of these rows is the same entry as in `earlier` (a read
    /// of the same key): none of the rows changed since.
    pub(crate) fn untouched_since(&self, earlier: &KeyRows) -> bool {
        self.parts.len() == earlier.parts.len()
            && self
                .parts
                .iter()
                .zip(&earlier.parts)
                .all(|(a, b)| a.label() == b.label() && a.rows.same(&b.rows))
    }

    /// The key's row at `uuid`, with the position of its part, if it is one.
    pub(crate) fn locate(&self, uuid: &Uuid) -> Option<(usize, KeyRow<'_>)> {
        self.parts.iter().enumerate().find_map(|(at, p)| {
            let row = p.rows.get(uuid)?;
            Some((
                at,
                KeyRow {
                    uuid: *uuid,
                    table: p.table,
                    row,
                    aliased: p.source == nb::PartSource::Aliased,
                },
            ))
        })
    }

    /// What changed from these rows to `later` (a later read of the same key), part by
    /// part (parts matched by label, a part only one read has beside an empty one),
    /// each part's shared structure passed over: a part untouched since costs one
    /// comparison. A row in another version is reported changed without its columns
    /// compared ([`IndexedRows::versions_changed`]); a row that moved from one part to
    /// another is removed from the first and added to the second.
    pub(super) fn versions_changed<'a>(
        &'a self,
        later: &'a KeyRows,
    ) -> impl Iterator<Item = RowChange<'a>> {
        self.side_by_side(later)
            .flat_map(|(x, y)| x.versions_changed(y))
    }

    /// The parts of these rows and of `later`, matched by label (a part only one read
    /// has beside an empty one).
    fn side_by_side<'a>(
        &'a self,
        later: &'a KeyRows,
    ) -> impl Iterator<Item = (&'a IndexedRows, &'a IndexedRows)> {
        static EMPTY: std::sync::LazyLock<IndexedRows> = std::sync::LazyLock::new(Default::default);
        let (mut a, mut b) = (self.parts.iter().peekable(), later.parts.iter().peekable());
        std::iter::from_fn(move || {
            let (x, y) = match (a.peek(), b.peek()) {
                (None, None) => return None,
                (Some(x), Some(y)) if x.label() == y.label() => {
                    (a.next().map(|p| &p.rows), b.next().map(|p| &p.rows))
                }
                (Some(x), Some(y)) if x.label() < y.label() => (a.next().map(|p| &p.rows), None),
                (Some(_), None) => (a.next().map(|p| &p.rows), None),
                _ => (None, b.next().map(|p| &p.rows)),
            };
            Some((x.unwrap_or(&EMPTY), y.unwrap_or(&EMPTY)))
        })
    }
}

/// The rows of a skipped base fragment by table and identity.
pub(crate) type KeptIdentities = HashMap<&'static str, HashMap<String, Uuid>>;

/// Row addresses in order (as integers), for looking up a few thousand of them
/// without hashing each.
#[derive(Clone, Debug, Default)]
pub(crate) struct UuidSet(Vec<u128>);

impl UuidSet {
    /// True when `uuid` is in the set.
    pub fn contains(&self, uuid: &Uuid) -> bool {
        self.position(uuid).is_some()
    }

    fn position(&self, uuid: &Uuid) -> Option<usize> {
        self.0.binary_search(&uuid.as_u128()).ok()
    }

    /// Membership tests of addresses asked in ascending order, each searching only
    /// past the one asked before.
    pub(crate) fn ascending(&self) -> Ascending<'_> {
        Ascending(&self.0)
    }

    /// The addresses, in order.
    pub fn iter(&self) -> impl Iterator<Item = Uuid> + '_ {
        self.0.iter().map(|&u| Uuid::from_u128(u))
    }

    #[cfg(test)]
    /// How many addresses the set holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// This set without the addresses of `removed` and with those of `added`: one
    /// walk through each (all three are in order).
    pub(super) fn edited(&self, removed: &UuidSet, added: &UuidSet) -> UuidSet {
        let mut gone = removed.0.iter().peekable();
        let mut new = added.0.iter().peekable();
        let mut out = Vec::with_capacity(self.0.len() + added.0.len());
        for &x in &self.0 {
            while gone.next_if(|&&g| g < x).is_some() {}
            if gone.next_if_eq(&&x).is_some() {
                continue;
            }
            while let Some(&a) = new.next_if(|&&a| a < x) {
                out.push(a);
            }
            new.next_if_eq(&&x);
            out.push(x);
        }
        out.extend(new);
        UuidSet(out)
    }
}

impl FromIterator<Uuid> for UuidSet {
    fn from_iter<I: IntoIterator<Item = Uuid>>(iter: I) -> UuidSet {
        let mut v: Vec<u128> = iter.into_iter().map(|u| u.as_u128()).collect();
        v.sort_unstable();
        v.dedup();
        UuidSet(v)
    }
}

/// [`UuidSet::ascending`]: what is left of the set past the last address asked.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ascending<'a>(&'a [u128]);

impl Ascending<'_> {
    /// True when `uuid` is in the set; `uuid` must not be below one asked before.
    pub fn contains(&mut self, uuid: &Uuid) -> bool {
        let x = uuid.as_u128();
        let past = self.0.partition_point(|&v| v < x);
        self.0 = &self.0[past..];
        self.0.first() == Some(&x)
    }
}

/// The rows a plan leaves as they are: those of the fragments the key skipped, known
/// as the rows of every fragment remembered less those of the fragments remembered and
/// not skipped now (built again, or no longer built). A node added skips all of its
/// network's fragments but its own: the few rows of the others are all that is read.
#[derive(Clone, Debug, Default)]
pub(crate) struct KeptRows {
    pub(super) all: Arc<UuidSet>,
    pub(super) except: UuidSet,
    /// When the key's rows are known to be those remembered, untouched since: the
    /// rows not kept (those in no fragment, and those of the fragments built again),
    /// the only ones a plan needs to look at.
    pub(super) others: Option<UuidSet>,
    /// The rows of the skipped base fragment, by table and identity.
    pub(super) base: Option<Arc<KeptIdentities>>,
}

impl KeptRows {
    /// The row of the skipped base fragment of `table` known as `identity`.
    pub(crate) fn base_row(&self, table: &str, identity: &str) -> Option<Uuid> {
        self.base.as_ref()?.get(table)?.get(identity).copied()
    }

    /// The key's rows that are not kept, when they are known without a look at the
    /// others ([`KeptRows`]).
    pub fn others(&self) -> Option<&UuidSet> {
        self.others.as_ref()
    }

    /// True when the row at `uuid` is kept.
    pub fn contains(&self, uuid: &Uuid) -> bool {
        self.all.contains(uuid) && !self.except.contains(uuid)
    }

    /// Membership tests of addresses asked in ascending order ([`UuidSet::ascending`]).
    pub(crate) fn ascending(&self) -> KeptAscending<'_> {
        KeptAscending {
            all: self.all.ascending(),
            except: self.except.ascending(),
        }
    }
}

/// [`KeptRows::ascending`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeptAscending<'a> {
    all: Ascending<'a>,
    except: Ascending<'a>,
}

impl KeptAscending<'_> {
    /// True when `uuid` is kept; `uuid` must not be below one asked before.
    pub fn contains(&mut self, uuid: &Uuid) -> bool {
        self.all.contains(uuid) && !self.except.contains(uuid)
    }
}

/// `f` of the current version of row `uuid` of `table` and whether it is among the
/// key's `rows`; else it is looked up in its table (a row without its owner's stamp is
/// not among them).
pub(super) fn with_current<R>(
    rows: &KeyRows,
    snap: &Snapshot,
    table: &str,
    uuid: &Uuid,
    f: impl FnOnce(Option<&Arc<CachedRow>>, bool) -> R,
) -> R {
    match rows.get(uuid) {
        Some(r) => f(Some(r.row), true),
        None => f(snap.get(table, uuid).as_ref(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::{KeptRows, UuidSet};
    use ovsdb_proto::Uuid;
    use std::collections::BTreeSet;
    use std::sync::Arc;

    #[test]
    fn a_uuid_set_finds_its_members_asked_at_random_or_in_ascending_order() {
        // Uuids whose integer order differs from their first byte's: the set orders
        // them as integers (as the server orders uuids, by their text).
        let u = |n: u128| Uuid::from_u128(n.rotate_right(8));
        let set: UuidSet = [7, 3, 3, 11, 300, 5].into_iter().map(u).collect();
        assert_eq!(set.len(), 5, "duplicates count once");
        for n in 0..400u128 {
            let member = [3, 5, 7, 11, 300].contains(&n);
            assert_eq!(set.contains(&u(n)), member, "{n}");
        }
        let mut asked: Vec<Uuid> = [2, 3, 4, 7, 8, 300, 301].into_iter().map(u).collect();
        asked.sort_by_key(Uuid::as_u128);
        let mut ascending = set.ascending();
        let found: Vec<bool> = asked.iter().map(|x| ascending.contains(x)).collect();
        let expected: Vec<bool> = asked.iter().map(|x| set.contains(x)).collect();
        assert_eq!(found, expected);
        assert_eq!(found.iter().filter(|f| **f).count(), 3);
    }

    #[test]
    fn an_edited_set_is_the_set_built_from_its_members_and_kept_rows_leave_out_the_exceptions() {
        // Random sets (a fixed seed): edited, the set holds what a set built from the
        // same members holds, whatever the overlaps of the three.
        let mut next = crate::testing::random(0x9e37_79b9_7f4a_7c15u64);
        let u = |n: u64| Uuid::from_u128((n as u128).rotate_right(8));
        for _ in 0..200 {
            let mut pick = |k: u64| -> BTreeSet<u64> { (0..next(k)).map(|_| next(60)).collect() };
            let (old, removed, added) = (pick(40), pick(20), pick(20));
            let set: UuidSet = old.iter().map(|n| u(*n)).collect();
            let edited = set.edited(
                &removed.iter().map(|n| u(*n)).collect(),
                &added.iter().map(|n| u(*n)).collect(),
            );
            let want: BTreeSet<u64> = old
                .difference(&removed)
                .chain(added.iter())
                .copied()
                .collect();
            let built: UuidSet = want.iter().map(|n| u(*n)).collect();
            assert_eq!(edited.0, built.0, "{old:?} - {removed:?} + {added:?}");
            let except = pick(20);
            let kept = KeptRows {
                all: Arc::new(edited),
                except: except.iter().map(|n| u(*n)).collect(),
                others: None,
                base: None,
            };
            let mut asked: Vec<u64> = (0..70).collect();
            asked.sort_by_key(|n| u(*n).as_u128());
            let mut ascending = kept.ascending();
            for n in asked {
                let member = want.contains(&n) && !except.contains(&n);
                assert_eq!(kept.contains(&u(n)), member, "{n}");
                assert_eq!(ascending.contains(&u(n)), member, "{n} asked in order");
            }
        }
    }
}
