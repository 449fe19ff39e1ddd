//! Each ownership rule of the planner (the module docs), on snapshots filled by hand
//! with the cache's own store ([`ovsdb_proto::cache::Store`]): no server.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use nb_model::{Copp, LogicalRouter, LogicalRouterStaticRoute, LogicalSwitch, LogicalSwitchPort};
use ovsdb_proto::{Atom, DatabaseSchema, Datum, Operation, Row, Uuid};

use super::PlanError;
use crate::ovnk::ownership::Owner;
use crate::reconcile::plan::Plan;
use crate::reconcile::testing::Nb;
use crate::topology::desired::Desired;

fn owner(name: &str) -> Owner {
    Owner {
        controller: format!("{name}-network-controller"),
        kind: "ClusterUserDefinedNetwork".into(),
        name: name.into(),
    }
}

/// A key's router with one port's worth of rows: a switch with a port, a router with
/// a static route.
fn network(name: &str) -> Desired {
    network_with(name, Some("100.64.0.1"))
}

/// [`network`], its route's next hop `nexthop`, or without its route.
fn network_with(name: &str, nexthop: Option<&str>) -> Desired {
    let mut d = Desired::new(owner(name));
    let port = d.add(
        format!("{name}-port"),
        LogicalSwitchPort {
            name: format!("{name}-port"),
            addresses: ["router".to_string()].into(),
            ..Default::default()
        },
    );
    let mut switch = LogicalSwitch::named(format!("{name}-switch"));
    switch.ports = [port].into();
    d.add(format!("{name}-switch"), switch);
    let mut router = LogicalRouter::named(format!("{name}-router"));
    if let Some(nexthop) = nexthop {
        let route = d.add(
            "10.0.0.0/16",
            LogicalRouterStaticRoute {
                ip_prefix: "10.0.0.0/16".into(),
                nexthop: nexthop.into(),
                ..Default::default()
            },
        );
        router.static_routes = [route].into();
    }
    d.add(format!("{name}-router"), router);
    d
}

/// The uuid [`Nb::write`] gave `d`'s row of `table` (the first, in `d`'s order).
fn uuid_of(uuids: &HashMap<String, Uuid>, d: &Desired, table: &str) -> Uuid {
    let row = d
        .rows()
        .find(|r| r.table == table)
        .expect("a row of the table");
    uuids[&row.placeholder]
}

/// The uuids every operation of `plan` names in its conditions.
fn touched(plan: &Plan) -> Vec<Uuid> {
    plan.operations
        .iter()
        .flat_map(|op| match op {
            Operation::Update { conditions, .. }
            | Operation::Mutate { conditions, .. }
            | Operation::Delete { conditions, .. } => conditions.clone(),
            _ => Vec::new(),
        })
        .filter_map(|c| c.value.as_scalar().and_then(Atom::as_uuid))
        .collect()
}

#[test]
fn an_unchanged_second_pass_plans_nothing() {
    let mut nb = Nb::new();
    let d = network("red");
    let first = nb.plan(&d).unwrap();
    assert_eq!(first.inserted.len(), 4, "{}", first.summary());
    nb.write(&d);
    let again = nb.plan(&d).unwrap();
    assert!(again.is_empty(), "{:#?}", again.operations);
    assert_eq!(again.compared, 4);
}

#[test]
fn only_the_columns_that_changed_are_sent() {
    let mut nb = Nb::new();
    let uuids = nb.write(&network("red"));
    // The same rows, but the route's next hop moved.
    let d = network_with("red", Some("100.64.0.9"));
    let plan = nb.plan(&d).unwrap();
    let route_uuid = uuid_of(&uuids, &d, "Logical_Router_Static_Route");
    assert_eq!(plan.operations.len(), 1, "{:#?}", plan.operations);
    let Operation::Update {
        table,
        conditions,
        row,
    } = &plan.operations[0]
    else {
        panic!("{:?}", plan.operations[0]);
    };
    assert_eq!(table, "Logical_Router_Static_Route");
    assert_eq!(conditions[0].value, Datum::uuid(route_uuid));
    assert_eq!(row.keys().collect::<Vec<_>>(), ["nexthop"]);
    assert_eq!(row["nexthop"], Datum::scalar("100.64.0.9"));
}

#[test]
fn rows_of_other_owners_are_never_updated_or_deleted() {
    let mut nb = Nb::new();
    // Another network's rows, and a row nobody stamped, beside the key's stale rows.
    let blue = nb.write(&network("blue"));
    let bare = nb.put(&LogicalSwitch::named("made-by-hand"));
    nb.write(&network("red"));
    let plan = nb.plan(&Desired::new(owner("red"))).unwrap();
    assert_eq!(plan.deleted.len(), 4, "{}", plan.summary());
    let touched = touched(&plan);
    for u in blue.values().chain([&bare]) {
        assert!(!touched.contains(u), "{u} touched: {:#?}", plan.operations);
    }
}

#[test]
fn references_other_parties_put_in_the_keys_rows_stay() {
    let mut nb = Nb::new();
    let d = network("red");
    let uuids = nb.write(&d);
    // A pod's port, added to the key's switch by someone else.
    let pod = nb.put(&LogicalSwitchPort {
        name: "pod".into(),
        ..Default::default()
    });
    let switch = uuid_of(&uuids, &d, "Logical_Switch");
    let mut ports = nb
        .store
        .snapshot()
        .get("Logical_Switch", &switch)
        .unwrap()
        .get("ports")
        .unwrap()
        .as_set()
        .unwrap()
        .to_vec();
    ports.push(Atom::Uuid(pod));
    nb.set("Logical_Switch", switch, "ports", Datum::set(ports));
    let plan = nb.plan(&d).unwrap();
    assert!(plan.is_empty(), "{:#?}", plan.operations);
}

#[test]
fn a_name_another_owner_holds_is_a_conflict_and_nothing_is_written() {
    let mut nb = Nb::new();
    nb.write(&network("blue"));
    let mut d = network("red");
    // The key wants a switch of the name blue's switch has.
    d.add("blue-switch", LogicalSwitch::named("blue-switch"));
    match nb.plan(&d) {
        Err(PlanError::Conflict {
            row,
            owner: Some(o),
        }) => {
            assert_eq!(row.table, "Logical_Switch");
            assert_eq!(row.identity, "blue-switch");
            assert_eq!(o, owner("blue"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_shared_row_another_party_created_is_used_not_created() {
    let mut nb = Nb::new();
    let theirs = nb.put(&Copp {
        name: "ovnkube-default".into(),
        meters: BTreeMap::from([("arp".to_string(), "arp-meter".to_string())]),
        ..Default::default()
    });
    let mut d = Desired::new(owner("red"));
    let copp = d.add_shared(
        "ovnkube-default",
        Copp {
            name: "ovnkube-default".into(),
            ..Default::default()
        },
    );
    let mut router = LogicalRouter::named("red-router");
    router.copp = Some(copp);
    d.add("red-router", router);
    let plan = nb.plan(&d).unwrap();
    assert_eq!(plan.inserted.len(), 1, "{}", plan.summary());
    assert_eq!(plan.inserted[0].table, "Logical_Router");
    let Operation::Insert { row, .. } = &plan.operations[plan.inserts[0]] else {
        panic!("{:?}", plan.operations);
    };
    assert_eq!(row["copp"], Datum::uuid(theirs));
}

#[test]
fn a_stale_child_goes_with_the_reference_to_it() {
    let mut nb = Nb::new();
    let old = network("red");
    let uuids = nb.write(&old);
    let route = uuid_of(&uuids, &old, "Logical_Router_Static_Route");
    let router = uuid_of(&uuids, &old, "Logical_Router");
    // The same network without its route.
    let d = network_with("red", None);
    let plan = nb.plan(&d).unwrap();
    assert_eq!(plan.deleted.len(), 1);
    assert_eq!(plan.deleted[0].table, "Logical_Router_Static_Route");
    // No delete of the route itself (not a root row): the router lets go of it.
    assert_eq!(plan.operations.len(), 1, "{:#?}", plan.operations);
    let Operation::Mutate {
        table,
        conditions,
        mutations,
    } = &plan.operations[0]
    else {
        panic!("{:?}", plan.operations);
    };
    assert_eq!(table, "Logical_Router");
    assert_eq!(conditions[0].value, Datum::uuid(router));
    assert_eq!(mutations[0].column, "static_routes");
    assert_eq!(mutations[0].value, Datum::set([Atom::Uuid(route)]));
}

#[test]
fn columns_ovn_writes_are_never_compared() {
    let mut nb = Nb::new();
    let d = network("red");
    let uuids = nb.write(&d);
    let port = uuid_of(&uuids, &d, "Logical_Switch_Port");
    nb.set("Logical_Switch_Port", port, "up", Datum::scalar(true));
    let plan = nb.plan(&d).unwrap();
    assert!(plan.is_empty(), "{:#?}", plan.operations);
}

#[test]
fn a_second_row_of_one_identity_goes() {
    let mut nb = Nb::new();
    let d = network("red");
    nb.write(&d);
    // The same switch again (a crash between two writes of an older writer, say).
    let twin = nb.write(&{
        let mut t = Desired::new(owner("red"));
        t.add("red-switch", LogicalSwitch::named("red-switch"));
        t
    });
    let twin = *twin.values().next().unwrap();
    let plan = nb.plan(&d).unwrap();
    assert_eq!(touched(&plan), [twin], "{:#?}", plan.operations);
    assert!(matches!(plan.operations[0], Operation::Delete { .. }));
}

/// [`network`] with a router port `<name>-rtoe` and `bindings` static MAC bindings on
/// it (their addresses).
fn network_with_bindings(name: &str, bindings: &[&str]) -> Desired {
    use nb_model::{LogicalRouterPort, StaticMacBinding};
    let mut d = network(name);
    let port = format!("{name}-rtoe");
    let lrp = d.add(
        port.clone(),
        LogicalRouterPort {
            name: port.clone(),
            mac: "0a:58:00:00:00:01".into(),
            networks: ["192.0.2.1/24".to_string()].into(),
            ..Default::default()
        },
    );
    let mut router = LogicalRouter::named(format!("{name}-gr"));
    router.ports = [lrp].into();
    d.add(format!("{name}-gr"), router);
    for ip in bindings {
        d.add(
            crate::ovnk::ownership::binding_identity(&port, ip),
            StaticMacBinding {
                logical_port: port.clone(),
                ip: (*ip).into(),
                mac: "0a:58:a9:fe:00:04".into(),
                override_dynamic_mac: true,
                ..Default::default()
            },
        );
    }
    d
}

#[test]
fn static_mac_bindings_on_the_keys_router_ports_are_the_keys_and_go_with_them() {
    use nb_model::StaticMacBinding;
    let mut nb = Nb::new();
    let d = network_with_bindings("red", &["169.254.0.4", "169.254.0.2"]);
    assert_eq!(nb.plan(&d).unwrap().inserted.len(), 4 + 2 + 2);
    let uuids = nb.write(&d);
    assert!(nb.plan(&d).unwrap().is_empty());
    // Someone else's binding on someone else's port, and one left on the key's port
    // that the key does not want (an address it used to bind).
    let theirs = nb.put(&StaticMacBinding {
        logical_port: "made-by-hand".into(),
        ip: "169.254.0.4".into(),
        mac: "0a:58:a9:fe:00:04".into(),
        ..Default::default()
    });
    let stale = nb.put(&StaticMacBinding {
        logical_port: "red-rtoe".into(),
        ip: "169.254.0.9".into(),
        mac: "0a:58:a9:fe:00:09".into(),
        ..Default::default()
    });
    let plan = nb.plan(&d).unwrap();
    assert_eq!(touched(&plan), [stale], "{:#?}", plan.operations);
    // The gateway gone: its port and every binding on it go, the other party's stays.
    let plan = nb.plan(&network("red")).unwrap();
    let touched = touched(&plan);
    let bindings: Vec<Uuid> = d
        .rows()
        .filter(|r| r.table == "Static_MAC_Binding")
        .map(|r| uuids[&r.placeholder])
        .chain([stale])
        .collect();
    for b in &bindings {
        assert!(touched.contains(b), "{b} kept: {:#?}", plan.operations);
    }
    assert!(!touched.contains(&theirs));
}

/// The reconciler remembers a key's fragments (and then skips building them) only when
/// its transaction alone changed the key's rows: a row of the key another party
/// changed (outside the columns the transaction wrote), added or removed while the
/// transaction was in flight is seen, and the key is built whole next time, so that
/// the other party's change is repaired.
#[test]
fn a_change_by_another_party_while_the_keys_transaction_is_in_flight_is_seen() {
    use crate::reconcile::left::changed_only_by;
    use crate::reconcile::KeyRows;
    use ovsdb_proto::OperationResult;

    // The key's rows as planned, then as the cache shows them after the transaction
    // (the route's next hop moved) and whatever `meanwhile` did.
    let after = |meanwhile: &dyn Fn(&mut Nb, &HashMap<String, Uuid>)| {
        let mut nb = Nb::new();
        let d = network("red");
        let uuids = nb.write(&d);
        let key = |nb: &Nb| KeyRows::read(&nb.store.snapshot(), &nb.indexes, &d.owner, &d.scope);
        let before = key(&nb);
        let plan = nb.plan(&network_with("red", Some("100.64.0.9"))).unwrap();
        assert_eq!(plan.operations.len(), 1, "{:#?}", plan.operations);
        let route = uuid_of(&uuids, &d, "Logical_Router_Static_Route");
        nb.set(
            "Logical_Router_Static_Route",
            route,
            "nexthop",
            Datum::scalar("100.64.0.9"),
        );
        meanwhile(&mut nb, &uuids);
        let results = [OperationResult::Count(1)];
        changed_only_by(&before, &key(&nb), &plan.operations, &results, 0)
    };
    // Another party setting `column` of the key's row of `table` to `value`.
    let set = |table: &'static str, column: &'static str, value: Datum| {
        move |nb: &mut Nb, uuids: &HashMap<String, Uuid>| {
            let row = uuid_of(uuids, &network("red"), table);
            nb.set(table, row, column, value.clone());
        }
    };
    assert!(after(&|_, _| {}), "the transaction alone changed the rows");
    assert!(
        after(&set("Logical_Switch_Port", "up", Datum::scalar(true))),
        "a column OVN's daemons write (ovn-northd setting a port up) is none of the key's"
    );
    assert!(
        !after(&set(
            "Logical_Switch",
            "other_config",
            Datum::map([("mcast_snoop", "true")])
        )),
        "another party changed a row the transaction did not touch"
    );
    assert!(
        !after(&set(
            "Logical_Router_Static_Route",
            "options",
            Datum::map([("ecmp_symmetric_reply", "true")])
        )),
        "another party changed a column of the updated row the update did not write"
    );
    assert!(
        !after(&|nb, _| {
            let mut extra = Desired::new(owner("red"));
            extra.add("red-extra", LogicalSwitch::named("red-extra"));
            nb.write(&extra);
        }),
        "another party added a row stamped as the key's"
    );
    assert!(
        !after(&|nb, uuids| {
            let port = uuid_of(uuids, &network("red"), "Logical_Switch_Port");
            nb.store.delete("Logical_Switch_Port", port).unwrap();
        }),
        "another party removed one of the key's rows"
    );
}

/// An NB served with the 7.0.0 schema (OVN 23.03), which lacks columns the model has
/// (`Logical_Switch_Port`'s `peer`, `Logical_Router_Static_Route`'s
/// `selection_fields`).
fn older_nb() -> Nb {
    Nb::served_with(Arc::new(
        DatabaseSchema::from_slice(include_bytes!("../../../../schemas/ovn-nb-7.0.0.ovsschema"))
            .expect("the 7.0.0 NB schema"),
    ))
}

#[test]
fn columns_an_older_server_lacks_are_left_out_while_they_hold_their_defaults() {
    let nb = older_nb();
    let plan = nb
        .plan(&network("blue"))
        .expect("written without the new columns");
    let inserted: Vec<&Row> = plan
        .operations
        .iter()
        .filter_map(|op| match op {
            Operation::Insert { row, .. } => Some(row),
            _ => None,
        })
        .collect();
    assert_eq!(inserted.len(), 4);
    for row in &inserted {
        for lacking in ["peer", "health_checks", "selection_fields"] {
            assert!(!row.contains_key(lacking), "{lacking} written: {row:?}");
        }
        // Columns set away from their defaults are written, the ownership stamp too.
        assert!(row.contains_key("external_ids"));
    }
    assert!(inserted.iter().any(|r| r.contains_key("nexthop")));
    assert!(inserted.iter().any(|r| r.contains_key("addresses")));

    // A column the server lacks that the key sets is refused, not dropped.
    let mut d = Desired::new(owner("blue"));
    d.add(
        "p",
        LogicalSwitchPort {
            name: "p".into(),
            peer: Some("q".into()),
            ..Default::default()
        },
    );
    match nb.plan(&d) {
        Err(PlanError::Unsupported { table, column }) => {
            assert_eq!(
                (table.as_str(), column.as_str()),
                ("Logical_Switch_Port", "peer")
            )
        }
        other => panic!("planned {other:?}"),
    }
}

/// A network of OVN-Kubernetes' shape for [`adoption`]: a switch with a port, a router
/// with a route (identity router, policy, prefix and next hop, as netconnect's
/// builders name routes).
fn adoptable(name: &str) -> Desired {
    let mut d = Desired::new(owner(name));
    let port = d.add(
        format!("{name}-port"),
        LogicalSwitchPort {
            name: format!("{name}-port"),
            addresses: ["router".to_string()].into(),
            ..Default::default()
        },
    );
    let mut switch = LogicalSwitch::named(format!("{name}-switch"));
    switch.ports = [port].into();
    d.add(format!("{name}-switch"), switch);
    let router_name = format!("{name}-router");
    let mut router = LogicalRouter::named(router_name.clone());
    let route = LogicalRouterStaticRoute {
        ip_prefix: "10.0.0.0/16".into(),
        nexthop: "100.64.0.1".into(),
        ..Default::default()
    };
    crate::topology::rows::add_route(&mut d, &mut router.static_routes, &router_name, route);
    d.add(router_name, router);
    d
}

#[test]
fn adoption_takes_over_ovn_kubernetes_rows_in_place_and_leaves_the_rest() {
    let mut nb = Nb::new();
    // OVN-Kubernetes' rows: the same rows, none of netconnect's owner keys, and a route
    // of its own netconnect does not want.
    let uuids = nb.write(&adoptable("blue"));
    let stamps = [
        "k8s.ovn.org/owner-controller",
        "k8s.ovn.org/owner-type",
        "k8s.ovn.org/name",
        "k8s.ovn.org/id",
    ];
    for r in adoptable("blue").rows() {
        let u = uuids[&r.placeholder];
        let ids = nb.store.snapshot().get(r.table, &u).unwrap().to_row()["external_ids"].clone();
        let kept: Vec<(Atom, Atom)> = match ids {
            Datum::Map(m) => m
                .iter()
                .filter(|(k, _)| !stamps.contains(&k.as_str().unwrap_or_default()))
                .cloned()
                .collect(),
            Datum::Set(_) => Vec::new(),
        };
        nb.set(r.table, u, "external_ids", Datum::map(kept));
    }
    let router = uuid_of(&uuids, &adoptable("blue"), "Logical_Router");
    let theirs = nb.put(&LogicalRouterStaticRoute {
        ip_prefix: "10.9.0.0/16".into(),
        nexthop: "100.64.0.9".into(),
        ..Default::default()
    });
    let mut routes = nb
        .store
        .snapshot()
        .get("Logical_Router", &router)
        .unwrap()
        .to_row()["static_routes"]
        .as_set()
        .unwrap()
        .to_vec();
    routes.push(Atom::Uuid(theirs));
    nb.set(
        "Logical_Router",
        router,
        "static_routes",
        Datum::set(routes),
    );

    // Without adoption: a conflict, nothing written.
    let mut d = adoptable("blue");
    assert!(matches!(
        nb.plan(&d),
        Err(PlanError::Conflict { owner: None, .. })
    ));
    // With it: every row taken where it is, its owner keys written, nothing inserted
    // or deleted, OVN-Kubernetes' own route left.
    d.adopt = true;
    let mut dry = crate::reconcile::dry_run::DryRun::of(
        &nb.store.snapshot(),
        crate::reconcile::testing::schema(),
    )
    .unwrap();
    let plan = dry.plan(&d).unwrap();
    assert!(
        plan.inserted.is_empty() && plan.deleted.is_empty(),
        "{plan}"
    );
    assert_eq!(plan.adopted.len(), 4, "{plan}");
    assert!(
        plan.updated
            .iter()
            .all(|(_, cols)| cols.contains(&"external_ids".to_string())),
        "{plan}"
    );
    assert!(
        plan.to_string()
            .contains("  adopt Logical_Router blue-router: external_ids"),
        "{plan}"
    );
    assert!(
        plan.operations
            .iter()
            .all(|o| !matches!(o, Operation::Insert { .. } | Operation::Delete { .. })),
        "{:#?}",
        plan.operations
    );
    // Adopted: the next plan is empty, and the router is the same row, still holding
    // OVN-Kubernetes' route.
    let again = dry.plan(&d).unwrap();
    assert!(again.is_empty(), "{again}");
    let snap = dry.snapshot();
    let row = snap
        .get("Logical_Router", &router)
        .expect("the same router");
    assert!(row.to_row()["static_routes"]
        .as_set()
        .unwrap()
        .contains(&Atom::Uuid(theirs)));
    assert_eq!(
        Owner::of(&row.to_row()["external_ids"]),
        Some(owner("blue"))
    );
}

#[test]
fn a_row_another_owner_stamped_is_never_adopted() {
    let mut nb = Nb::new();
    nb.write(&network("blue"));
    let mut d = network("red");
    d.add("blue-switch", LogicalSwitch::named("blue-switch"));
    d.adopt = true;
    assert!(matches!(
        nb.plan(&d),
        Err(PlanError::Conflict { owner: Some(_), .. })
    ));
}
