//! The rows one reconcile key wants in OVN_Northbound.
//!
//! Topology builders add nb-model rows to a [`Desired`]. Each row has an *identity*
//! unique within its table and owner (a switch's or port's name; for a route, its
//! router, policy, prefix and next hop), and is stamped with its owner in
//! `external_ids` (docs/ovn-kubernetes.md §1.4):
//!
//! - `k8s.ovn.org/owner-controller`: the controller, `<network>-network-controller`
//!   for a network's rows;
//! - `k8s.ovn.org/owner-type`: the kind of object that owns it
//!   (`UserDefinedNetwork`, `ClusterUserDefinedNetwork`, `ClusterNetworkConnect`, …);
//! - `k8s.ovn.org/name`: that object's name;
//! - `k8s.ovn.org/id`: `<controller>:<owner-type>:<name>:<table>:<identity>`, unique.
//!
//! (A key may use OVN-Kubernetes' own id form instead, `IdForm::ObjectIds`, so that it
//! writes the rows OVN-Kubernetes writes, ids included.)
//!
//! References between rows are placeholders until the reconciler resolves them: to a
//! row of the same key (inserted in the same transaction or already in the NB), to a
//! row another party owns, found by name ([`Desired::refer`]), or to every row of a
//! table that matches a [`Selection`] ([`Desired::select`]). A key can also put its
//! rows into a set of references of a row it does not own ([`Desired::attach`]): a
//! ClusterNetworkConnect's port on a network's router, its ACLs on a network's switch.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::ovnk::ownership::{
    IdForm, Owner, Scope, OWNER_CONTROLLER, OWNER_ID, OWNER_NAME, OWNER_TYPE,
};
use ovsdb_proto::model::{Ref, RefTarget, Table};
use ovsdb_proto::{Atom, Datum, Row};

/// Rows of a table the key refers to without naming them: every row whose
/// `external_ids` hold all of `external_ids` and whose name ends with `name_suffix`
/// (OVN-Kubernetes' ClusterIP load balancers of a network, docs/ovn-kubernetes.md §5.7).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Selection {
    /// The table.
    pub table: &'static str,
    /// Keys and values every selected row's `external_ids` hold.
    pub external_ids: Vec<(String, String)>,
    /// What every selected row's name ends with.
    pub(crate) name_suffix: String,
}

impl Selection {
    /// True when `row` (of [`Selection::table`]) is selected.
    pub fn matches(&self, row: &ovsdb_proto::cache::CachedRow) -> bool {
        let name_ok = row
            .get("name")
            .and_then(Datum::as_scalar)
            .and_then(Atom::as_str)
            .is_some_and(|n| n.ends_with(&self.name_suffix));
        name_ok
            && self.external_ids.iter().all(|(k, v)| {
                row.get("external_ids")
                    .and_then(|d| d.get_str(k))
                    .and_then(Atom::as_str)
                    == Some(v.as_str())
            })
    }
}

/// The placeholder of selection `n` of a key: it stands for every row the selection
/// matches, in a set of references.
pub(crate) fn selection_placeholder(n: usize) -> String {
    format!("${n}")
}

/// What a reconciler knows of a key's *fragments* (groups of rows built from a few
/// inputs, e.g. a connect's rows for one node): whether a fragment whose inputs hash to
/// `fingerprint` is in the NB exactly as built before, so that building it again can be
/// skipped. The answer must be `false` unless the reconciler verified it.
pub trait Fragments {
    /// True when the fragment whose label hashes to `key` ([`Fragment::key`]) was last
    /// applied from inputs with this fingerprint and its rows have not changed since.
    fn unchanged(&self, key: u64, fingerprint: u64) -> bool;
}

/// No fragment is known: every fragment is built.
pub(crate) struct NoFragments;

impl Fragments for NoFragments {
    fn unchanged(&self, _: u64, _: u64) -> bool {
        false
    }
}

/// A fragment of a key's rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fragment {
    /// The hash of its label (unique in the key), by which reconcilers remember it
    /// (`label_hash`). The label's text is never kept: a node added formats 500
    /// labels on each of 500 keys, and comparing texts that share long prefixes was a
    /// tenth of a node added. Two labels of a key with one hash would only be built
    /// again more often: a fragment is known only when its fingerprint is the one
    /// remembered too.
    pub key: u64,
    /// The fingerprint of its inputs.
    pub(crate) fingerprint: u64,
    /// True when it was not built (its rows are in the NB as last applied).
    pub skipped: bool,
    /// True for a key's base fragment ([`Desired::base_fragment`]): the rows the
    /// others' rows are put into.
    pub base: bool,
}

/// Elements a key's rows built now put into a set column of a row of its skipped base
/// fragment ([`Desired::base_fragment`]): the reconciler inserts those the row lacks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Growth {
    /// The position of the base fragment's row (a [`DesiredRow::kept`] one) among the
    /// key's rows.
    pub row: usize,
    /// The set column.
    pub column: String,
    /// The placeholders of the rows put in.
    pub(crate) elements: Vec<String>,
}

/// One set of references of a row the key does not own that the key puts its rows into.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Attachment {
    /// The parent's table.
    pub table: &'static str,
    /// The parent's name.
    pub parent: String,
    /// The set column.
    pub column: &'static str,
}

/// The placeholder a reference to the row of `table` named `name` that the key does
/// not own holds until resolved. (A reference to one of the key's own rows holds
/// `#<n>`, the row's position: short, so that sets of references sort fast.)
pub(crate) fn foreign_placeholder(table: &str, name: &str) -> String {
    format!("@{table}:{name}")
}

/// The table and name a foreign placeholder stands for.
pub(crate) fn parse_foreign(p: &str) -> Option<(&str, &str)> {
    p.strip_prefix('@')?.split_once(':')
}

/// One desired row.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredRow {
    /// The table.
    pub table: &'static str,
    /// The identity, unique within the table for this owner.
    pub(crate) identity: String,
    /// Every column the row sets, ownership stamped, references as placeholders.
    pub row: Row,
    /// A row several parties may create under one name (the default COPP and its
    /// meters): when a row of that name exists and is not this key's, it is used and
    /// this one is not created.
    pub shared: bool,
    /// False for tables without `external_ids` (`Load_Balancer_Group`): such a row
    /// is the key's by its name ([`Desired::claims`]).
    pub(crate) stamped: bool,
    /// The columns left at the model's default (so that a server whose schema lacks
    /// them can be written to).
    pub defaults: Defaults,
    /// The placeholder other rows refer to this one by.
    pub(crate) placeholder: String,
    /// True when the key owns every element of the row's sets of references (a
    /// ClusterNetworkConnect's load balancer group): elements it does not want are
    /// removed whoever added them.
    pub(crate) exclusive: bool,
    /// True for a row stamped without `k8s.ovn.org/id` (OVN-Kubernetes writes its
    /// connect routers so): it is the key's by its owner keys and its name.
    pub(crate) unidentified: bool,
    /// The fragment the row belongs to (its position in [`Desired::fragments`]).
    pub fragment: Option<u32>,
    /// True for a row of a skipped base fragment ([`Desired::base_fragment`]): only
    /// its table, identity and placeholder are known (`row` is empty), so that the
    /// rows built now can refer to it; it is in the NB as last applied, and is neither
    /// compared nor written but for the `Growth` its sets get.
    pub kept: bool,
}

/// The columns of a desired row left at the model's default, by their position in
/// [`DesiredRow::row`] (its columns in order). Only the first 64 are told apart (the
/// largest OVN_Northbound table has 18): a column after them is never taken for a
/// default, and is written as set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Defaults(u64);

impl Defaults {
    /// The columns of `row` that hold what the model's default row `default` holds.
    pub fn of(row: &Row, default: &Row) -> Defaults {
        let mut bits = 0;
        // Both rows come from one model, so their columns are the same, in one order:
        // each is looked up only when they are not.
        let mut defaults = default.iter();
        for (at, (column, value)) in row.iter().take(64).enumerate() {
            let d = match defaults.next() {
                Some((c, d)) if c == column => Some(d),
                _ => default.get(column),
            };
            if d == Some(value) {
                bits |= 1 << at;
            }
        }
        Defaults(bits)
    }

    /// True when the column at `position` in the row is left at its default.
    pub fn at(self, position: usize) -> bool {
        position < 64 && self.0 & (1 << position) != 0
    }
}

impl DesiredRow {
    /// The row's `name` column, if it has one.
    pub fn name(&self) -> Option<&str> {
        self.row.get("name")?.as_scalar()?.as_str()
    }
}

/// Every row one key wants.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// The owner stamped on every row.
    pub owner: Owner,
    /// In the order added.
    rows: Vec<DesiredRow>,
    /// Table and identity to position in `rows`.
    index: HashMap<(&'static str, String), usize>,
    /// Rows referred to by name that this key does not own.
    foreign: BTreeSet<(&'static str, String)>,
    /// Names of rows of tables without `external_ids` that belong to this key whether
    /// or not it wants them now (so that they are deleted when it does not).
    claims: BTreeSet<(&'static str, String)>,
    /// The model's default row of each table added to, computed once.
    default_rows: BTreeMap<&'static str, Row>,
    /// How the rows' ids are formed.
    id_form: IdForm,
    /// Selections, by position (their placeholder is `$<position>`).
    selections: Vec<Selection>,
    /// Placeholders of the key's rows wanted in each attachment.
    attachments: BTreeMap<Attachment, Vec<String>>,
    /// What the key could not build (its other rows are still wanted): a node
    /// without a chassis, a pair outside its block. Reported in the key's status.
    pub incomplete: Vec<String>,
    /// Which of the owner's rows the key holds.
    pub scope: Scope,
    /// Rows the key wants that OVN-Kubernetes wrote (no owner keys, the same name or,
    /// for a route, policy or NAT rule, the same identity under the same router) are
    /// taken over where they are instead of being conflicts.
    pub adopt: bool,
    /// Why the key must not adopt although [`Desired::adopt`] is set (a network whose
    /// id is not known: adopting its rows would renumber it). A row it would adopt is
    /// then an error instead.
    pub adopt_refused: Option<String>,
    /// The key's fragments, built or skipped.
    fragments: Vec<Fragment>,
    /// The fragment rows are added to now.
    open: Option<u32>,
    /// The base fragment, while it is open (the others nest in it).
    base: Option<u32>,
    /// What the rows built now put into the sets of a skipped base fragment's rows.
    growth: Vec<Growth>,
    /// True once a row was built in a fragment nested in the base: only rows added to a
    /// skipped base after that can refer to one.
    built_in_base: bool,
}

/// Stamps `values`, a row of a table with `external_ids`, with `owner` and (unless
/// `unidentified`) `id`: the row's own ids, then the owner's (which win over the
/// row's), in the row's own column.
fn stamp(values: &mut Row, owner: &Owner, id: &str, unidentified: bool) {
    let column = match values.get_mut("external_ids") {
        Some(column) => column,
        None => values
            .entry("external_ids".into())
            .or_insert_with(Datum::empty),
    };
    let mut ids: Vec<(Atom, Atom)> = match std::mem::replace(column, Datum::empty()) {
        Datum::Map(pairs) => pairs.into_vec(),
        Datum::Set(_) => Vec::new(),
    };
    let owners = [
        (OWNER_CONTROLLER, owner.controller.as_str()),
        (OWNER_TYPE, owner.kind.as_str()),
        (OWNER_NAME, owner.name.as_str()),
    ];
    let id = (!unidentified).then_some((OWNER_ID, id));
    for (k, v) in owners.into_iter().chain(id) {
        ids.push((Atom::String(k.into()), Atom::String(v.into())));
    }
    *column = Datum::map(ids);
}

/// The identity in its key of a row of a network written under another owner
/// ([`Desired::add_aliased`]): `@` and its whole `k8s.ovn.org/id` (no identity of a
/// row under the key's own owner starts with `@`).
pub(crate) fn aliased_identity(id: &str) -> String {
    format!("@{id}")
}

/// How a row is added.
#[derive(Clone, Copy, Default)]
struct Kind {
    shared: bool,
    exclusive: bool,
    unidentified: bool,
}

impl Desired {
    /// No row yet, for `owner`.
    pub fn new(owner: Owner) -> Desired {
        Desired::with_id_form(owner, IdForm::WithTable)
    }

    /// No row yet, for `owner`, whose rows' ids have the form `id_form`.
    pub(crate) fn with_id_form(owner: Owner, id_form: IdForm) -> Desired {
        Desired {
            owner,
            rows: Vec::new(),
            index: HashMap::new(),
            foreign: BTreeSet::new(),
            claims: BTreeSet::new(),
            default_rows: BTreeMap::new(),
            id_form,
            selections: Vec::new(),
            attachments: BTreeMap::new(),
            incomplete: Vec::new(),
            scope: Scope::All,
            adopt: false,
            adopt_refused: None,
            fragments: Vec::new(),
            open: None,
            base: None,
            growth: Vec::new(),
            built_in_base: false,
        }
    }

    /// The `k8s.ovn.org/id` of the key's row `identity` of `table`.
    pub fn id(&self, table: &str, identity: &str) -> String {
        match self.id_form {
            IdForm::WithTable => self.owner.id(table, identity),
            IdForm::ObjectIds => format!("{}:{identity}", self.owner),
        }
    }

    /// What every id of the key's rows of `table` starts with (the identity follows).
    pub(crate) fn id_prefix(&self, table: &str) -> String {
        self.id(table, "")
    }

    /// Adds `row` under `identity` and returns a reference to it for other rows. A row
    /// added twice under one identity is a builder bug: the first one is kept.
    pub fn add<T: Table>(&mut self, identity: impl Into<String>, row: T) -> Ref<T> {
        self.insert(identity.into(), row, Kind::default())
    }

    /// Adds a row several parties may create under one name ([`DesiredRow::shared`]).
    pub(crate) fn add_shared<T: Table>(&mut self, identity: impl Into<String>, row: T) -> Ref<T> {
        let kind = Kind {
            shared: true,
            ..Kind::default()
        };
        self.insert(identity.into(), row, kind)
    }

    /// Adds a row whose sets of references the key owns whole
    /// ([`DesiredRow::exclusive`]).
    pub(crate) fn add_exclusive<T: Table>(
        &mut self,
        identity: impl Into<String>,
        row: T,
    ) -> Ref<T> {
        let kind = Kind {
            exclusive: true,
            ..Kind::default()
        };
        self.insert(identity.into(), row, kind)
    }

    /// Adds a named row stamped with its owner but without `k8s.ovn.org/id`
    /// ([`DesiredRow::unidentified`]); its identity is its name.
    pub(crate) fn add_unidentified<T: Table>(&mut self, name: impl Into<String>, row: T) -> Ref<T> {
        let kind = Kind {
            unidentified: true,
            ..Kind::default()
        };
        self.insert(name.into(), row, kind)
    }

    /// Adds a row of the key's network that OVN-Kubernetes writes under another of its
    /// owners, `owner` (a cluster port group, an allow-from-node ACL:
    /// `ownership::network_of_alias`), its `k8s.ovn.org/id` being `id`
    /// (OVN-Kubernetes' form, which starts with `owner`). It is stamped with `owner`;
    /// its identity in the key is [`aliased_identity`] of `id`. Only for the tables
    /// the reconciler finds such rows in (`ALIASED` of [`crate::reconcile::nb`]).
    pub(crate) fn add_aliased<T: Table>(&mut self, owner: Owner, id: String, row: T) -> Ref<T> {
        debug_assert!(id.starts_with(&owner.to_string()));
        let identity = aliased_identity(&id);
        self.insert_as(identity, row, Kind::default(), Some((owner, id)))
    }

    /// A reference standing for every row `selection` matches when the key is
    /// reconciled; only meaningful in a set of references.
    pub fn select<T: Table>(&mut self, selection: Selection) -> Ref<T> {
        debug_assert_eq!(selection.table, T::NAME);
        let at = match self.selections.iter().position(|s| *s == selection) {
            Some(at) => at,
            None => {
                self.selections.push(selection);
                self.selections.len() - 1
            }
        };
        Ref::named(selection_placeholder(at))
    }

    /// The selection a placeholder stands for.
    pub(crate) fn selection(&self, placeholder: &str) -> Option<&Selection> {
        self.selections
            .get(placeholder.strip_prefix('$')?.parse::<usize>().ok()?)
    }

    /// Puts the key's row `child` into `column` (a set of references) of the row named
    /// `parent` of `P`'s table, which the key does not own. The reconciler adds it and,
    /// when the key no longer attaches it there, takes it out again.
    pub fn attach<P: Table, C>(&mut self, parent: &str, column: &'static str, child: &Ref<C>) {
        let RefTarget::Named(p) = child.target() else {
            debug_assert!(false, "only the key's own rows are attached");
            return;
        };
        self.foreign.insert((P::NAME, parent.to_owned()));
        self.attachments
            .entry(Attachment {
                table: P::NAME,
                parent: parent.to_owned(),
                column,
            })
            .or_default()
            .push(p.clone());
    }

    /// Starts fragment `label` with inputs fingerprint `fingerprint`: true when it must
    /// be built (the rows added until [`Desired::end_fragment`] are its own), false
    /// when `known` says it is in the NB as built before (it is recorded as skipped;
    /// its rows are kept, and references to them from the key's other rows too). The
    /// rows a fragment attaches to other parties' rows must not be root rows (so that
    /// losing such a reference deletes them, which the reconciler notices). Fragments
    /// nest only in the base fragment.
    pub fn fragment(
        &mut self,
        known: &dyn Fragments,
        label: std::fmt::Arguments<'_>,
        fingerprint: u64,
    ) -> bool {
        self.fragment_hashed(known, label_hash(label), fingerprint)
    }

    /// [`Desired::fragment`] for the label whose [`label_hash`] is `key`.
    pub(crate) fn fragment_hashed(
        &mut self,
        known: &dyn Fragments,
        key: u64,
        fingerprint: u64,
    ) -> bool {
        debug_assert!(self.open == self.base, "fragments nest only in the base");
        let (at, skipped) = self.push_fragment(known, key, fingerprint, false);
        if !skipped {
            self.open = Some(at);
        }
        !skipped
    }

    /// Records a fragment (skipped when `known` says so); returns its position and
    /// whether it is skipped.
    fn push_fragment(
        &mut self,
        known: &dyn Fragments,
        key: u64,
        fingerprint: u64,
        base: bool,
    ) -> (u32, bool) {
        let skipped = known.unchanged(key, fingerprint);
        self.fragments.push(Fragment {
            key,
            fingerprint,
            skipped,
            base,
        });
        (self.fragments.len() as u32 - 1, skipped)
    }

    /// Starts the key's *base* fragment, whose inputs hash to `fingerprint`: the rows
    /// every other fragment's rows are put into (a network's router and switches, the
    /// sets of which hold a route or port of every node). The other fragments nest in
    /// it; it ends with [`Desired::end_fragment`] called outside them. True when it is
    /// built. When `known` says it is in the NB as built before, its rows are added
    /// all the same but kept ([`DesiredRow::kept`]: what the builder gives of them is
    /// not converted, compared or written), and the references its sets get to the
    /// rows of the fragments built now are recorded as `Growth`: a node added then
    /// costs its own rows and the elements it adds, however large the router. Its rows
    /// must not hold selections ([`Desired::select`]): what those match may change
    /// while the fragment's inputs do not; nor be exclusive (`Desired::add_exclusive`):
    /// a kept row's sets lose only the key's rows no longer wanted.
    pub fn base_fragment(&mut self, known: &dyn Fragments, fingerprint: u64) -> bool {
        debug_assert!(self.open.is_none() && self.base.is_none());
        let (at, skipped) = self.push_fragment(known, base_label(), fingerprint, true);
        self.open = Some(at);
        self.base = Some(at);
        !skipped
    }

    /// Ends the fragment begun by [`Desired::fragment`] (rows then go to the base
    /// fragment, if one is open), or the base fragment.
    pub fn end_fragment(&mut self) {
        if self.open == self.base {
            self.base = None;
        }
        self.open = self.base;
    }

    /// What the rows built now put into the sets of the skipped base fragment's rows.
    pub(crate) fn growth(&self) -> &[Growth] {
        &self.growth
    }

    /// True when rows are added to a skipped base fragment now.
    fn keeping(&self) -> bool {
        self.open
            .is_some_and(|at| self.fragments[at as usize].skipped)
    }

    /// Records what `values` (a kept row's columns, at position `at`) put into its
    /// sets of references from rows built now.
    fn record_growth(&mut self, at: usize, values: &Row) {
        for (column, value) in values {
            let Datum::Set(elements) = value else {
                continue;
            };
            let built: Vec<String> = elements
                .iter()
                .filter_map(|a| match a {
                    Atom::NamedUuid(p) => Some(p),
                    _ => None,
                })
                .filter(|p| {
                    debug_assert!(!p.starts_with('$'), "a kept row holds a selection");
                    self.by_placeholder(p).is_some_and(|r| !r.kept)
                })
                .map(|p| p.to_string())
                .collect();
            if !built.is_empty() {
                self.growth.push(Growth {
                    row: at,
                    column: column.clone(),
                    elements: built,
                });
            }
        }
    }

    /// The key's fragments.
    pub fn fragments(&self) -> &[Fragment] {
        &self.fragments
    }

    /// The attachments, each with the placeholders of the rows put there.
    pub(crate) fn attachments(&self) -> impl Iterator<Item = (&Attachment, &[String])> {
        self.attachments.iter().map(|(a, l)| (a, l.as_slice()))
    }

    fn insert<T: Table>(&mut self, identity: String, row: T, kind: Kind) -> Ref<T> {
        self.insert_as(identity, row, kind, None)
    }

    /// [`Desired::insert`], the row stamped with `alias`'s owner and id when given
    /// ([`Desired::add_aliased`]), else with the key's.
    fn insert_as<T: Table>(
        &mut self,
        identity: String,
        row: T,
        kind: Kind,
        alias: Option<(Owner, String)>,
    ) -> Ref<T> {
        let shared = kind.shared;
        let key = (T::NAME, identity.clone());
        if let Some(&at) = self.index.get(&key) {
            debug_assert!(false, "{} {identity} added twice", T::NAME);
            return Ref::named(self.rows[at].placeholder.clone());
        }
        let key_text = format!("#{}", self.rows.len());
        let reference = Ref::named(key_text.clone());
        self.index.insert(key, self.rows.len());
        let stamped = self.default_row::<T>().contains_key("external_ids");
        if self.keeping() {
            let at = self.rows.len();
            if self.built_in_base {
                self.record_growth(at, &row.to_row());
            }
            if !stamped {
                self.claims.insert((T::NAME, identity.clone()));
            }
            self.rows.push(DesiredRow {
                table: T::NAME,
                identity,
                row: Row::new(),
                shared,
                stamped,
                defaults: Defaults::default(),
                placeholder: key_text,
                exclusive: kind.exclusive,
                unidentified: kind.unidentified,
                fragment: self.open,
                kept: true,
            });
            return reference;
        }
        self.built_in_base |= self.base.is_some() && self.open != self.base;
        let mut values = row.to_row();
        if !stamped {
            let defaults = self.defaults_of::<T>(&values);
            self.claims.insert((T::NAME, identity.clone()));
            self.rows.push(DesiredRow {
                table: T::NAME,
                identity,
                row: values,
                shared,
                stamped,
                defaults,
                placeholder: key_text,
                exclusive: kind.exclusive,
                unidentified: false,
                fragment: self.open,
                kept: false,
            });
            return reference;
        }
        match &alias {
            Some((owner, id)) => stamp(&mut values, owner, id, kind.unidentified),
            None => {
                let id = self.id(T::NAME, &identity);
                stamp(&mut values, &self.owner, &id, kind.unidentified);
            }
        }
        let defaults = self.defaults_of::<T>(&values);
        self.rows.push(DesiredRow {
            table: T::NAME,
            identity,
            row: values,
            shared,
            stamped,
            defaults,
            placeholder: key_text,
            exclusive: kind.exclusive,
            unidentified: kind.unidentified,
            fragment: self.open,
            kept: false,
        });
        reference
    }

    /// The columns of `values`, a row of `T`'s table, left at the model's default.
    fn defaults_of<T: Table>(&mut self, values: &Row) -> Defaults {
        Defaults::of(values, self.default_row::<T>())
    }

    /// The model's default row of `T`'s table (every column, each at its default).
    fn default_row<T: Table>(&mut self) -> &Row {
        self.default_rows
            .entry(T::NAME)
            .or_insert_with(|| T::default().to_row())
    }

    /// Claims the row named `name` of `T`'s table, a table without `external_ids`, for
    /// this key even when the key does not want it (it is then deleted).
    pub(crate) fn claim<T: Table>(&mut self, name: &str) {
        self.claims.insert((T::NAME, name.to_owned()));
    }

    /// The rows of tables without `external_ids` this key owns by name.
    pub fn claims(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.claims.iter().map(|(t, n)| (*t, n.as_str()))
    }

    /// A reference to the row named `name` of `T`'s table that this key does not own
    /// (another key's, or another party's), found by name when the key is reconciled.
    pub fn refer<T: Table>(&mut self, name: &str) -> Ref<T> {
        self.foreign.insert((T::NAME, name.to_owned()));
        Ref::named(foreign_placeholder(T::NAME, name))
    }

    /// The row `identity` of `T`'s table, decoded (references stay placeholders: read
    /// them with `Desired::identity_of`).
    pub fn get<T: Table>(&self, identity: &str) -> Option<T> {
        let at = *self.index.get(&(T::NAME, identity.to_owned()))?;
        T::from_row(ovsdb_proto::Uuid::nil(), &self.rows[at].row).ok()
    }

    #[cfg(test)]
    /// The identity (or, for a row the key does not own, the name) a reference of one
    /// of this key's rows points at.
    pub(crate) fn identity_of<'a, T>(&'a self, r: &'a Ref<T>) -> Option<&'a str> {
        match r.target() {
            RefTarget::Named(n) => match n.strip_prefix('#') {
                Some(at) => self
                    .rows
                    .get(at.parse::<usize>().ok()?)
                    .map(|r| r.identity.as_str()),
                None => parse_foreign(n).map(|(_, name)| name),
            },
            RefTarget::Uuid(_) => None,
        }
    }

    /// The row a placeholder of this key stands for.
    pub(crate) fn by_placeholder(&self, p: &str) -> Option<&DesiredRow> {
        self.rows.get(p.strip_prefix('#')?.parse::<usize>().ok()?)
    }

    /// Every row of `T`'s table, decoded, by identity.
    pub fn all<T: Table>(&self) -> BTreeMap<String, T> {
        self.rows
            .iter()
            .filter(|r| r.table == T::NAME)
            .filter_map(|r| {
                T::from_row(ovsdb_proto::Uuid::nil(), &r.row)
                    .ok()
                    .map(|t| (r.identity.clone(), t))
            })
            .collect()
    }

    /// Every desired row, in the order added.
    pub fn rows(&self) -> impl Iterator<Item = &DesiredRow> {
        self.rows.iter()
    }

    /// The desired row `identity` of `table`.
    pub fn row(&self, table: &str, identity: &str) -> Option<&DesiredRow> {
        self.rows
            .iter()
            .find(|r| r.table == table && r.identity == identity)
    }

    /// The desired row `identity` of `table` (a table name the key writes), by index.
    pub(crate) fn get_row(&self, table: &'static str, identity: &str) -> Option<&DesiredRow> {
        let at = *self.index.get(&(table, identity.to_owned()))?;
        self.rows.get(at)
    }

    /// True when the key owns row `identity` of `table`.
    pub fn owns(&self, table: &'static str, identity: &str) -> bool {
        self.index.contains_key(&(table, identity.to_owned()))
    }

    /// The named rows this key refers to without owning them.
    pub fn foreign(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.foreign.iter().map(|(t, n)| (*t, n.as_str()))
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when the key wants no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// The label hash of a key's base fragment ([`Desired::base_fragment`]).
pub(crate) fn base_label() -> u64 {
    static BASE: std::sync::LazyLock<u64> =
        std::sync::LazyLock::new(|| label_hash(format_args!("base")));
    *BASE
}

/// The hash of a fragment's label, as [`Fragment::key`] holds it: the hash its text
/// has as a `str`, taken as the text is formatted, with no string made.
pub(crate) fn label_hash(label: std::fmt::Arguments<'_>) -> u64 {
    use std::hash::Hasher;
    /// Feeds the text written to it to the hasher.
    struct Feed(std::collections::hash_map::DefaultHasher);
    impl std::fmt::Write for Feed {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.write(s.as_bytes());
            Ok(())
        }
    }
    let mut feed = Feed(std::collections::hash_map::DefaultHasher::new());
    std::fmt::write(&mut feed, label).expect("hashing text cannot fail");
    // As `str`'s `Hash` ends it.
    feed.0.write_u8(0xff);
    feed.0.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nb_model::{LogicalRouter, LogicalRouterPort};

    #[test]
    fn defaults_are_told_by_position_whether_or_not_the_rows_columns_line_up() {
        let row = |cols: &[(&str, i64)]| -> Row {
            cols.iter()
                .map(|(c, v)| (c.to_string(), Datum::scalar(*v)))
                .collect()
        };
        let default = row(&[("a", 0), ("b", 0), ("c", 0)]);
        // Lined up: a and c hold their defaults.
        let d = Defaults::of(&row(&[("a", 0), ("b", 1), ("c", 0)]), &default);
        assert_eq!(
            (d.at(0), d.at(1), d.at(2), d.at(3)),
            (true, false, true, false)
        );
        // A column the default row lacks shifts the others: each is looked up.
        let d = Defaults::of(&row(&[("a", 0), ("aa", 0), ("b", 0), ("c", 1)]), &default);
        assert_eq!(
            (d.at(0), d.at(1), d.at(2), d.at(3)),
            (true, false, true, false)
        );
        assert!(!Defaults::default().at(64) && !d.at(1000));
    }

    #[test]
    fn a_label_hashes_as_its_text_does_and_labels_differ() {
        let text = |node: &str| format!("node:{node}");
        for node in [
            "a",
            "node-0001",
            "a-very-long-node-name-that-spans-the-hashers-block",
        ] {
            assert_eq!(
                label_hash(format_args!("node:{node}")),
                crate::ovnk::fingerprint(text(node)),
                "{node}"
            );
        }
        // Pieces split differently give one text, one hash; another text another.
        assert_eq!(
            label_hash(format_args!("to:{}:{}", 1, "rtoc")),
            label_hash(format_args!("to:1:{}", "rtoc"))
        );
        assert_ne!(
            label_hash(format_args!("node:{}", "ab")),
            label_hash(format_args!("node:{}", "a"))
        );
    }

    fn owner() -> Owner {
        Owner {
            controller: "blue-network-controller".into(),
            kind: "UserDefinedNetwork".into(),
            name: "ns/blue".into(),
        }
    }

    #[test]
    fn rows_are_stamped_with_their_owner_and_id() {
        let mut d = Desired::new(owner());
        let mut port =
            LogicalRouterPort::with_networks("rtos-x", "0a:58:0a:00:00:01", ["10.0.0.1/24"])
                .unwrap();
        port.external_ids
            .insert("k8s.ovn.org/network".into(), "blue".into());
        let p = d.add("rtos-x", port);
        let mut r = LogicalRouter::named("blue_ovn_cluster_router");
        r.ports.insert(p);
        d.add("blue_ovn_cluster_router", r);
        let port = d.get::<LogicalRouterPort>("rtos-x").unwrap();
        assert_eq!(port.external_ids["k8s.ovn.org/network"], "blue");
        assert_eq!(
            port.external_ids[OWNER_ID],
            "blue-network-controller:UserDefinedNetwork:ns/blue:Logical_Router_Port:rtos-x"
        );
        let router = d.get::<LogicalRouter>("blue_ovn_cluster_router").unwrap();
        let target = router.ports.iter().next().unwrap();
        assert_eq!(d.identity_of(target), Some("rtos-x"));
        let ids = &d
            .row("Logical_Router", "blue_ovn_cluster_router")
            .unwrap()
            .row["external_ids"];
        assert_eq!(Owner::of(ids), Some(owner()));
    }

    /// Knows every fragment: all are skipped.
    struct AllKnown;

    impl Fragments for AllKnown {
        fn unchanged(&self, _: u64, _: u64) -> bool {
            true
        }
    }

    /// Knows only the base fragment.
    struct BaseKnown;

    impl Fragments for BaseKnown {
        fn unchanged(&self, key: u64, _: u64) -> bool {
            key == base_label()
        }
    }

    /// A router in the base fragment with a port of its own and one port per node,
    /// each node a fragment.
    fn router_with_nodes(known: &dyn Fragments, nodes: &[&str]) -> Desired {
        let mut d = Desired::new(owner());
        let built = d.base_fragment(known, 7);
        assert_eq!(built, !known.unchanged(base_label(), 7));
        let mut r = LogicalRouter::named("blue_ovn_cluster_router");
        let own = LogicalRouterPort::with_networks("rtoj", "0a:58:64:40:00:01", ["100.64.0.1/16"])
            .unwrap();
        r.ports.insert(d.add("rtoj", own));
        for n in nodes {
            if d.fragment(known, format_args!("node:{n}"), 1) {
                let p = LogicalRouterPort::with_networks(
                    format!("rtos-{n}"),
                    "0a:58:0a:00:00:01",
                    ["10.0.0.1/24"],
                )
                .unwrap();
                r.ports.insert(d.add(format!("rtos-{n}"), p));
                d.end_fragment();
            }
        }
        d.add("blue_ovn_cluster_router", r);
        d.end_fragment();
        d
    }

    #[test]
    fn a_skipped_base_keeps_its_rows_and_records_what_the_fragments_built_put_in_them() {
        // Built whole: no row kept, nothing to grow.
        let whole = router_with_nodes(&NoFragments, &["a", "b"]);
        assert!(whole.rows().all(|r| !r.kept));
        assert!(whole.growth().is_empty());
        assert_eq!(whole.fragments().len(), 3);
        assert!(whole.fragments()[0].base);
        // The base known, the nodes built: the router and its own port are kept (no
        // columns), and the router's ports grow by the nodes' ports alone.
        let d = router_with_nodes(&BaseKnown, &["a", "b"]);
        let kept: Vec<&str> = d
            .rows()
            .filter(|r| r.kept)
            .map(|r| r.identity.as_str())
            .collect();
        assert_eq!(kept, ["rtoj", "blue_ovn_cluster_router"]);
        assert!(d.rows().filter(|r| r.kept).all(|r| r.row.is_empty()));
        let router_at = d
            .rows()
            .position(|r| r.identity == "blue_ovn_cluster_router")
            .unwrap();
        let grown: Vec<(&str, Vec<&str>)> = d
            .growth()
            .iter()
            .map(|g| {
                assert_eq!(g.row, router_at);
                let ids = g
                    .elements
                    .iter()
                    .map(|p| d.by_placeholder(p).unwrap().identity.as_str())
                    .collect();
                (g.column.as_str(), ids)
            })
            .collect();
        assert_eq!(grown, [("ports", vec!["rtos-a", "rtos-b"])]);
        // Every fragment known: nothing built, nothing grows.
        let d = router_with_nodes(&AllKnown, &["a", "b"]);
        assert!(d.growth().is_empty());
        assert!(d.rows().all(|r| r.kept));
    }

    #[test]
    fn foreign_references_are_recorded() {
        let mut d = Desired::new(owner());
        let copp = d.refer::<nb_model::Copp>("ovnkube-default");
        assert_eq!(d.identity_of(&copp), Some("ovnkube-default"));
        assert_eq!(
            d.foreign().collect::<Vec<_>>(),
            [("Copp", "ovnkube-default")]
        );
        assert!(d.is_empty());
    }
}
