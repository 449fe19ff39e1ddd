//! The fragment memo on an NB filled by hand (no server): what a key applied is
//! remembered as, which fragments are then known (skipped by the next build), and how
//! a change by another party, by OVN's own daemons, or a row gone changes that.

use nb_model::{LogicalRouter, LogicalSwitch, LogicalSwitchPort};
use ovsdb_proto::{Datum, Uuid};

use super::Memo;
use crate::ovnk::ownership::Owner;
use crate::reconcile::rows::KeyRows;
use crate::reconcile::testing::Nb;
use crate::topology::desired::{label_hash, Desired, Fragments, NoFragments};

fn owner() -> Owner {
    Owner {
        controller: "red-network-controller".into(),
        kind: "ClusterUserDefinedNetwork".into(),
        name: "red".into(),
    }
}

/// The key: a router outside fragments, and per node a fragment of a switch with one
/// port, `fingerprints` its fragments' (those `known` knows are skipped).
fn desired(known: &dyn Fragments, fingerprints: &[u64]) -> Desired {
    let mut d = Desired::new(owner());
    for (i, fp) in fingerprints.iter().enumerate() {
        if d.fragment(known, format_args!("node-{i}"), *fp) {
            let port = d.add(
                format!("port-{i}"),
                LogicalSwitchPort {
                    name: format!("red-port-{i}"),
                    addresses: ["router".to_string()].into(),
                    ..Default::default()
                },
            );
            let mut switch = LogicalSwitch::named(format!("red-switch-{i}"));
            switch.ports = [port].into();
            d.add(format!("switch-{i}"), switch);
        }
        d.end_fragment();
    }
    d.add("router", LogicalRouter::named("red-router"));
    d
}

fn label(i: usize) -> u64 {
    label_hash(format_args!("node-{i}"))
}

/// `d` written to `nb` as its transaction would have, then remembered as a reconcile
/// that found nothing to write remembers it; the uuids by placeholder.
fn applied(nb: &mut Nb, memo: &Memo, d: &Desired) -> std::collections::HashMap<String, Uuid> {
    let uuids = nb.write(d);
    remember(nb, memo, d);
    uuids
}

fn remember(nb: &Nb, memo: &Memo, d: &Desired) {
    let snap = nb.store.snapshot();
    let rows = KeyRows::read(&snap, &nb.indexes, &d.owner, &d.scope);
    let plan = nb.plan(d).unwrap();
    assert!(plan.is_empty(), "{}", plan.summary());
    memo.remember(d, &plan, &[], &rows, &snap, None);
}

fn known(nb: &Nb, memo: &Memo) -> super::KnownFragments {
    let d = desired(&NoFragments, &[]);
    memo.known(&nb.store.snapshot(), &nb.indexes, &d.owner, &d.scope)
}

#[test]
fn a_key_applied_is_known_by_its_fragments_fingerprints() {
    let (mut nb, memo) = (Nb::new(), Memo::default());
    assert!(
        !known(&nb, &memo).unchanged(label(0), 10),
        "nothing remembered yet"
    );
    applied(&mut nb, &memo, &desired(&NoFragments, &[10, 11]));
    assert_eq!(memo.remembered(), 1);
    let k = known(&nb, &memo);
    assert!(k.unchanged(label(0), 10) && k.unchanged(label(1), 11));
    assert!(
        !k.unchanged(label(0), 12),
        "another fingerprint: inputs changed"
    );
    assert!(!k.unchanged(label(2), 10), "a fragment never applied");
    // Built with what is known, every fragment is skipped; its rows are kept, the
    // router (in no fragment) is not.
    let next = desired(&k, &[10, 11]);
    assert!(next.fragments().iter().all(|f| f.skipped));
    let snap = nb.store.snapshot();
    let rows = KeyRows::read(&snap, &nb.indexes, &next.owner, &next.scope);
    let kept = memo.kept_rows(&next, &rows);
    let table_of = |u: &Uuid| rows.get(u).map(|r| crate::reconcile::nb::TABLES[r.table]);
    let mut kept_tables: Vec<&str> = rows
        .iter()
        .filter(|r| kept.contains(&r.uuid))
        .filter_map(|r| table_of(&r.uuid))
        .collect();
    kept_tables.sort_unstable();
    assert_eq!(
        kept_tables,
        [
            "Logical_Switch",
            "Logical_Switch",
            "Logical_Switch_Port",
            "Logical_Switch_Port"
        ]
    );
    // Built with one fragment's inputs changed: that one's rows are not kept.
    let one = desired(&k, &[10, 99]);
    assert_eq!(
        one.fragments()
            .iter()
            .map(|f| f.skipped)
            .collect::<Vec<_>>(),
        [true, false]
    );
    let kept = memo.kept_rows(&one, &rows);
    assert_eq!(rows.iter().filter(|r| kept.contains(&r.uuid)).count(), 2);
}

#[test]
fn a_fragment_another_party_changed_or_deleted_is_built_again_but_not_for_ovns_columns() {
    let (mut nb, memo) = (Nb::new(), Memo::default());
    let d = desired(&NoFragments, &[10, 11]);
    let uuids = applied(&mut nb, &memo, &d);
    let port0 = uuids[&d.row("Logical_Switch_Port", "port-0").unwrap().placeholder];
    let switch1 = uuids[&d.row("Logical_Switch", "switch-1").unwrap().placeholder];
    // ovn-northd sets node-0's port up: still as the key left it.
    nb.set("Logical_Switch_Port", port0, "up", Datum::scalar(true));
    let k = known(&nb, &memo);
    assert!(k.unchanged(label(0), 10) && k.unchanged(label(1), 11));
    // Someone changes node-1's switch: node-1 is built again, node-0 is not.
    let config = Datum::map([("mcast_snoop", "true")]);
    nb.set("Logical_Switch", switch1, "other_config", config);
    let k = known(&nb, &memo);
    assert!(k.unchanged(label(0), 10));
    assert!(!k.unchanged(label(1), 11));
    // Node-0's port deleted: node-0 is built again too.
    nb.store.delete("Logical_Switch_Port", port0).unwrap();
    let k = known(&nb, &memo);
    assert!(!k.unchanged(label(0), 10) && !k.unchanged(label(1), 11));
}

#[test]
fn a_key_forgotten_or_no_longer_defined_is_known_by_nothing() {
    let (mut nb, memo) = (Nb::new(), Memo::default());
    let d = desired(&NoFragments, &[10]);
    applied(&mut nb, &memo, &d);
    assert!(known(&nb, &memo).unchanged(label(0), 10));
    memo.forget(&d);
    assert!(!known(&nb, &memo).unchanged(label(0), 10));
    remember(&nb, &memo, &d);
    assert!(known(&nb, &memo).unchanged(label(0), 10));
    // The inputs define the key still: kept; then no longer: forgotten.
    memo.retain_known([(&d.owner, &d.scope)]);
    assert_eq!(memo.remembered(), 1);
    memo.retain_known([]);
    assert_eq!(memo.remembered(), 0);
    assert!(!known(&nb, &memo).unchanged(label(0), 10));
}

#[test]
fn a_fragment_no_longer_built_is_forgotten() {
    let (mut nb, memo) = (Nb::new(), Memo::default());
    applied(&mut nb, &memo, &desired(&NoFragments, &[10, 11]));
    // The key now builds only node-0 (node-1 gone): the plan deletes node-1's rows,
    // and what is remembered after that holds node-0 only.
    let fewer = desired(&NoFragments, &[10]);
    nb.store
        .delete(
            "Logical_Switch_Port",
            uuid_named(&nb, "Logical_Switch_Port", "red-port-1"),
        )
        .unwrap();
    nb.store
        .delete(
            "Logical_Switch",
            uuid_named(&nb, "Logical_Switch", "red-switch-1"),
        )
        .unwrap();
    remember(&nb, &memo, &fewer);
    let k = known(&nb, &memo);
    assert!(k.unchanged(label(0), 10));
    assert!(!k.unchanged(label(1), 11));
}

/// The uuid of the row of `table` named `name`.
fn uuid_named(nb: &Nb, table: &str, name: &str) -> Uuid {
    let snap = nb.store.snapshot();
    let found = snap
        .table(table)
        .iter()
        .find(|(_, r)| {
            r.get("name")
                .and_then(|d| d.as_scalar())
                .and_then(|a| a.as_str())
                == Some(name)
        })
        .map(|(u, _)| *u);
    found.unwrap_or_else(|| panic!("{table} {name}"))
}
