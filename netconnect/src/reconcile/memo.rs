//! The fragment memo: what the reconciler remembers of a key with fragments after
//! applying it (each fragment's fingerprint and its rows as the cache showed them), so
//! that a fragment whose inputs did not change and whose rows are as the key left them
//! ([`super::left`]) is neither built nor compared again.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use ovsdb_proto::cache::{CachedRow, RowChange, Snapshot};
use ovsdb_proto::Uuid;

use super::left::LeftRow;
use super::nb::NbIndexes;
use super::rows::{with_current, KeptIdentities, KeptRows, KeyRows, UuidSet};
use super::Plan;
use crate::ovnk::ownership::{Owner, Scope};
use crate::topology::desired::Fragments;
use crate::topology::Desired;

/// What is remembered of every key with fragments, by owner and scope.
#[derive(Debug, Default)]
pub(super) struct Memo(Mutex<HashMap<String, Arc<KeyMemo>>>);

impl Memo {
    /// The fragments of the key of `owner` and `scope` that need not be built again:
    /// those applied before whose rows are all as the reconciler left them (a fragment
    /// with a row changed since, by anyone, is built again; another key attaching its
    /// rows to a node's switch makes that node's fragment unknown, not the others).
    /// The key's rows outside fragments are built and compared every time; a network's
    /// router and switches are its base fragment
    /// ([`Desired::base_fragment`](crate::topology::desired::Desired::base_fragment)),
    /// known like the others: a write of the key's own that only put elements into
    /// their sets or took some out leaves them known.
    pub(super) fn known(
        &self,
        snap: &Snapshot,
        nb: &NbIndexes,
        owner: &Owner,
        scope: &Scope,
    ) -> KnownFragments {
        let Some(m) = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&memo_key(owner, scope))
            .cloned()
        else {
            return KnownFragments::default();
        };
        // Most often none of the key's rows changed since: its index entries are the
        // ones remembered, and only the rows outside them need a look. Else each
        // remembered row must still be the version there.
        let now = KeyRows::read(snap, nb, owner, scope);
        let untouched = now.untouched_since(&m.rows);
        let as_left = |r: &MemoRow| {
            let l = &r.left;
            (untouched && r.inside)
                || with_current(&now, snap, l.table, &l.uuid, |now, _| {
                    now.is_some_and(|now| l.is_as_left(now))
                })
        };
        // While the indexes are untouched, a fragment all of whose rows are in them is
        // as left without a look at its rows.
        let as_left_whole =
            |f: &FragmentMemo| (untouched && f.inside) || f.rows.iter().all(as_left);
        // A fragment with a row changed since is built again; the others are known.
        let stale = match untouched && m.outside == 0 {
            true => LabelSet::default(),
            false => m
                .fragments
                .iter()
                .filter(|(_, f)| !as_left_whole(f))
                .map(|(key, _)| *key)
                .collect(),
        };
        KnownFragments {
            memo: Some(m),
            stale,
        }
    }

    /// The rows of the fragments `desired` skipped (to be kept as they are).
    pub(super) fn kept_rows(&self, desired: &Desired, rows: &KeyRows) -> KeptRows {
        if desired.fragments().iter().all(|f| !f.skipped) {
            return KeptRows::default();
        }
        let memo = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let Some(m) = memo.get(&memo_key(&desired.owner, &desired.scope)) else {
            return KeptRows::default();
        };
        // The remembered fragments not skipped now: those built again, then (rarely)
        // those the key no longer builds.
        let mut except = Vec::new();
        let mut present = 0;
        let mut base = None;
        for f in desired.fragments() {
            if let Some(mf) = m.fragments.get(&f.key) {
                present += 1;
                if !f.skipped {
                    except.extend(mf.uuids());
                } else if f.base {
                    base = mf.identities.clone();
                }
            }
        }
        if m.fragments.len() != present {
            let labels: LabelSet = desired.fragments().iter().map(|f| f.key).collect();
            except.extend(
                m.fragments
                    .iter()
                    .filter(|(k, _)| !labels.contains(k))
                    .flat_map(|(_, f)| f.uuids()),
            );
        }
        let except: UuidSet = except.into_iter().collect();
        // The key's rows untouched since they were remembered: those not kept are
        // known by their uuids.
        let others = rows
            .untouched_since(&m.rows)
            .then(|| m.others.edited(&UuidSet::default(), &except));
        KeptRows {
            all: m.fragment_rows.clone(),
            except,
            others,
            base,
        }
    }

    /// After `desired` was applied by `plan` (whose operations gave `results`), with
    /// nothing but its own changes in the cache's `snap`, where the key's rows are
    /// `rows`: its fragments and their rows as `snap` shows them. `planned` is the
    /// key's rows and the snapshot the plan was made in, when it wrote anything: the
    /// rows of a skipped base fragment that were there as remembered are remembered
    /// as they are now, with what the plan put into their sets.
    pub(super) fn remember(
        &self,
        desired: &Desired,
        plan: &Plan,
        results: &[ovsdb_proto::OperationResult],
        rows: &KeyRows,
        snap: &Snapshot,
        planned: Option<(&KeyRows, &Snapshot)>,
    ) {
        let key = memo_key(&desired.owner, &desired.scope);
        let mut memo = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let old = memo.remove(&key);
        if desired.fragments().is_empty() {
            return;
        }
        let (built, mut identities) = built_now(desired, plan, results, rows, snap);
        // The fragments remembered before, with those built now put in (the map is
        // copied only while a reader still holds it): a node added changes one entry,
        // not the network's 500.
        let (mut fragments, fragment_rows, before) = match old.map(Arc::try_unwrap) {
            Some(Ok(m)) => (m.fragments, m.fragment_rows, Some((m.rows, m.others))),
            Some(Err(held)) => (
                held.fragments.clone(),
                held.fragment_rows.clone(),
                Some((held.rows.clone(), held.others.clone())),
            ),
            None => Default::default(),
        };
        // The rows of the fragments replaced or forgotten, and of those put in.
        let (mut removed, mut added) = (Vec::new(), Vec::new());
        let (mut present, mut outside) = (0, 0);
        for (at, (f, now)) in desired.fragments().iter().zip(built).enumerate() {
            let key = f.key;
            match now {
                Some((fingerprint, rows)) => {
                    let mut memo = FragmentMemo::new(fingerprint, rows);
                    if let Some((_, ids)) = identities.take_if(|(b, _)| *b == at) {
                        memo.identities = Some(Arc::new(ids));
                    }
                    added.extend(memo.uuids());
                    outside += usize::from(!memo.inside);
                    if let Some(was) = fragments.insert(key, memo) {
                        removed.extend(was.uuids());
                    }
                    present += 1;
                }
                None if f.skipped => {
                    let Some(memo) = fragments.get_mut(&key) else {
                        continue;
                    };
                    present += 1;
                    if let Some(planned) = planned.filter(|_| f.base) {
                        if let Some(now) = as_planned_now(memo, planned, (rows, snap)) {
                            *memo = now;
                        }
                    }
                    outside += usize::from(!memo.inside);
                }
                None => {
                    if let Some(was) = fragments.remove(&key) {
                        removed.extend(was.uuids());
                    }
                }
            }
        }
        if fragments.len() != present {
            forget_unbuilt(&mut fragments, desired, &mut removed);
        }
        // A row both removed and added (a fragment's row updated in place) stays.
        let (removed, added): (UuidSet, UuidSet) =
            (removed.into_iter().collect(), added.into_iter().collect());
        let fragment_rows = Arc::new(fragment_rows.edited(&removed, &added));
        let others = Arc::new(match before {
            Some((was, others)) => {
                others_after(&was, &others, rows, &fragment_rows, &removed, &added)
            }
            None => rows
                .iter()
                .map(|r| r.uuid)
                .filter(|u| !fragment_rows.contains(u))
                .collect(),
        });
        memo.insert(
            key,
            Arc::new(KeyMemo {
                fragments,
                fragment_rows,
                rows: rows.clone(),
                others,
                outside,
            }),
        );
    }

    /// Forgets what was remembered of the keys with fragments other than those of
    /// `scopes` (each key's owner and scope): the memo holds a key's rows as it left
    /// them, and a key the inputs no longer define must not keep them alive.
    pub(super) fn retain_known<'a>(
        &self,
        scopes: impl IntoIterator<Item = (&'a Owner, &'a Scope)>,
    ) {
        let keep: HashSet<String> = scopes.into_iter().map(|(o, s)| memo_key(o, s)).collect();
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|k, _| keep.contains(k));
    }

    /// How many keys' fragments are remembered.
    pub(super) fn remembered(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// After a failure: nothing is known of `desired`'s key.
    pub(super) fn forget(&self, desired: &Desired) {
        let key = memo_key(&desired.owner, &desired.scope);
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
    }
}

/// A fragment built now, as the cache shows it: its fingerprint and rows.
type Built = Option<(u64, Vec<MemoRow>)>;

/// After `desired` was applied by `plan` (whose operations gave `results`), where the
/// key's rows are `rows` in `snap`: each fragment built now with its rows (`None` for
/// one skipped, or with a row not accounted for: it is not remembered), and the base
/// fragment built now (its position) with its rows by table and identity.
fn built_now(
    desired: &Desired,
    plan: &Plan,
    results: &[ovsdb_proto::OperationResult],
    rows: &KeyRows,
    snap: &Snapshot,
) -> (Vec<Built>, Option<(usize, KeptIdentities)>) {
    // The uuid of every wanted row: those that were there, and those inserted.
    let mut uuids: HashMap<(&str, &str), Uuid> = plan
        .existing
        .iter()
        .map(|(t, i, u)| ((*t, i.as_str()), *u))
        .collect();
    for (name, at) in plan.inserted.iter().zip(&plan.inserts) {
        if let Some(u) = results.get(*at).and_then(|r| r.uuid()) {
            uuids.insert((name.table.as_str(), name.identity.as_str()), u);
        }
    }
    let mut built: Vec<Built> = desired
        .fragments()
        .iter()
        .map(|f| (!f.skipped).then(|| (f.fingerprint, Vec::new())))
        .collect();
    let mut identities: Option<(usize, KeptIdentities)> = desired
        .fragments()
        .iter()
        .position(|f| f.base && !f.skipped)
        .map(|at| (at, KeptIdentities::new()));
    for r in desired.rows() {
        let Some(at) = r.fragment.map(|at| at as usize) else {
            continue;
        };
        let Some(entry) = built[at].as_mut() else {
            continue;
        };
        let found = uuids.get(&(r.table, r.identity.as_str())).and_then(|u| {
            with_current(rows, snap, r.table, u, |now, inside| {
                Some(MemoRow::new(r.table, *u, now?, inside))
            })
        });
        match found {
            Some(row) => {
                if let Some((_, ids)) = identities.as_mut().filter(|(b, _)| *b == at) {
                    ids.entry(r.table)
                        .or_default()
                        .insert(r.identity.clone(), row.left.uuid);
                }
                entry.1.push(row)
            }
            None => built[at] = None,
        }
    }
    (built, identities)
}

/// Forgets the fragments `desired` no longer builds (a node gone), their rows put in
/// `removed`.
fn forget_unbuilt(
    fragments: &mut ByLabel<FragmentMemo>,
    desired: &Desired,
    removed: &mut Vec<Uuid>,
) {
    let labels: LabelSet = desired.fragments().iter().map(|f| f.key).collect();
    fragments.retain(|k, f| {
        let keep = labels.contains(k);
        if !keep {
            removed.extend(f.uuids());
        }
        keep
    });
}

/// What the reconciler remembers of a key with fragments after applying it.
#[derive(Debug, Default)]
struct KeyMemo {
    /// Each fragment's fingerprint and rows as the cache showed them then (a row
    /// changed or deleted since, by anyone, is no longer the one in the cache), by the
    /// hash of its label ([`Fragment::key`](crate::topology::desired::Fragment::key)).
    fragments: ByLabel<FragmentMemo>,
    /// The rows of every fragment in `fragments`: what a plan keeps when the key skips
    /// them all. Edited as fragments come and go (a node added puts in its few rows),
    /// never gathered again from the fragments' rows.
    fragment_rows: Arc<UuidSet>,
    /// The key's rows in its owner indexes then: while they are the same entries
    /// ([`KeyRows::untouched_since`]), none of them changed (its rows outside them, of
    /// tables without owner stamps, are looked at one by one).
    rows: KeyRows,
    /// Those of `rows` in no fragment (a network's router, its switches): with the
    /// rows of the fragments built again, all a plan must look at while `rows` are
    /// untouched. Edited by what changed since the last time, like `fragment_rows`.
    others: Arc<UuidSet>,
    /// How many of `fragments` have a row outside the owner indexes: while `rows` are
    /// untouched and there is none, every fragment is as left without a walk through
    /// them (500 per network at 500 nodes).
    outside: usize,
}

/// A map by fragment label hash ([`Fragment::key`](crate::topology::desired::Fragment::key)).
type ByLabel<V> = HashMap<u64, V, BuildLabelHasher>;

/// A set of fragment label hashes.
type LabelSet = HashSet<u64, BuildLabelHasher>;

/// Builds [`LabelHasher`]s.
type BuildLabelHasher = std::hash::BuildHasherDefault<LabelHasher>;

/// Hashes a label hash to itself: it is a SipHash already, and a node add looks up
/// each of 500 nodes in each of 500 networks' memos.
#[derive(Default)]
struct LabelHasher(u64);

impl std::hash::Hasher for LabelHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not used by `u64` keys; kept correct for any other.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A fragment's fingerprint, and its rows as the cache showed them.
#[derive(Debug, Clone)]
struct FragmentMemo {
    fingerprint: u64,
    /// Every row of it is among the key's rows in its owner indexes (while those are
    /// untouched, so are its rows).
    inside: bool,
    rows: Arc<[MemoRow]>,
    /// A base fragment's rows by table and identity: when it is skipped, the rows
    /// built now refer to them by these.
    identities: Option<Arc<KeptIdentities>>,
}

impl FragmentMemo {
    fn new(fingerprint: u64, rows: Vec<MemoRow>) -> FragmentMemo {
        FragmentMemo {
            fingerprint,
            inside: rows.iter().all(|r| r.inside),
            rows: rows.into(),
            identities: None,
        }
    }

    /// The same fragment, its rows now `rows` (the same rows, in other versions).
    fn with_rows(&self, rows: Vec<MemoRow>) -> FragmentMemo {
        FragmentMemo {
            identities: self.identities.clone(),
            ..FragmentMemo::new(self.fingerprint, rows)
        }
    }

    /// Its rows' uuids.
    fn uuids(&self) -> impl Iterator<Item = Uuid> + '_ {
        self.rows.iter().map(|r| r.left.uuid)
    }
}

/// A fragment's row as the cache showed it ([`LeftRow`]), and whether it was among the
/// key's rows in its owner indexes (else only in its table).
#[derive(Debug, Clone)]
struct MemoRow {
    left: LeftRow,
    inside: bool,
}

impl MemoRow {
    /// Row `row` (`uuid` of `table`), `inside` the key's owner indexes or not.
    fn new(table: &'static str, uuid: Uuid, row: &Arc<CachedRow>, inside: bool) -> MemoRow {
        MemoRow {
            left: LeftRow::new(table, uuid, row),
            inside,
        }
    }
}

/// The fragments of a key known to be in the NB as built before (none unless the
/// key's rows are exactly as the reconciler left them).
#[derive(Debug, Default)]
pub struct KnownFragments {
    memo: Option<Arc<KeyMemo>>,
    /// The fragments remembered whose rows are no longer as left, by label hash.
    stale: LabelSet,
}

impl Fragments for KnownFragments {
    fn unchanged(&self, key: u64, fingerprint: u64) -> bool {
        let Some(m) = &self.memo else { return false };
        m.fragments
            .get(&key)
            .is_some_and(|f| f.fingerprint == fingerprint)
            && (self.stale.is_empty() || !self.stale.contains(&key))
    }
}

pub(super) fn memo_key(owner: &Owner, scope: &Scope) -> String {
    format!("{owner}|{scope:?}")
}

/// Fragment `memo` with its rows as `now` shows them, if `planned` (a key's rows and
/// the snapshot a plan was made in) showed them as remembered: its rows as the plan
/// that led to `now` left them. None when one was not as remembered (the fragment is
/// then built again next time) or is gone.
fn as_planned_now(
    memo: &FragmentMemo,
    planned: (&KeyRows, &Snapshot),
    now: (&KeyRows, &Snapshot),
) -> Option<FragmentMemo> {
    let mut rows = Vec::with_capacity(memo.rows.len());
    for r in memo.rows.iter() {
        let l = &r.left;
        let as_remembered = with_current(planned.0, planned.1, l.table, &l.uuid, |row, _| {
            row.is_some_and(|row| l.is_as_left(row))
        });
        if !as_remembered {
            return None;
        }
        rows.push(with_current(
            now.0,
            now.1,
            l.table,
            &l.uuid,
            |row, inside| Some(MemoRow::new(l.table, l.uuid, row?, inside)),
        )?);
    }
    Some(memo.with_rows(rows))
}

/// The key's rows in no fragment, `now`: those of `was` (a read of the same key,
/// whose rows in no fragment were `others`) edited by what changed between the two
/// reads and by the rows that joined fragments (`added`) or left them (`removed`), so
/// that the fragments' rows are then `fragment_rows`.
fn others_after(
    was: &KeyRows,
    others: &UuidSet,
    now: &KeyRows,
    fragment_rows: &UuidSet,
    removed: &UuidSet,
    added: &UuidSet,
) -> UuidSet {
    let (mut gone, mut new) = (Vec::new(), Vec::new());
    for change in was.versions_changed(now) {
        match change {
            RowChange::Added(u, _) => new.push(*u),
            RowChange::Removed(u, _) => gone.push(*u),
            RowChange::Changed { .. } => {}
        }
    }
    // Rows that joined a fragment are no longer others; rows whose fragment was
    // forgotten are, while they exist.
    gone.extend(added.iter());
    new.extend(
        removed
            .iter()
            .filter(|u| !added.contains(u) && now.contains(u)),
    );
    new.retain(|u| !fragment_rows.contains(u));
    others.edited(&gone.into_iter().collect(), &new.into_iter().collect())
}

#[cfg(test)]
mod tests;
