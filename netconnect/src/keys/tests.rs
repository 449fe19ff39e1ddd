//! The keys a world defines and the owners they write under ([`World::owners`]), and
//! which keys a change in the NB wakes ([`woken`]): pure functions of the world and
//! the changed row, tested without a cache (kube-runtime's trigger mappers, as plain
//! functions).

use std::collections::BTreeMap;
use std::path::Path;

use ovsdb_proto::cache::{CacheConfig, CachedRow};
use ovsdb_proto::{DatabaseSchema, Datum, Row, Uuid};

use super::connect::connects_of;
use super::*;
use crate::api::load::parse_file;
use crate::status::dir::State;
use crate::world::Settings;

/// The objects of the owner tests, each a YAML document: a namespace with its
/// primary network and a service on it, two cluster networks a connect selects, a
/// third, two nodes.
const WEB: &str = "apiVersion: v1\nkind: Namespace\nmetadata: {name: web}\n";
const WEB_NET: &str = "apiVersion: k8s.ovn.org/v1\nkind: UserDefinedNetwork\nmetadata: {name: net, namespace: web}\n\
        spec: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 10.30.0.0/16, hostSubnet: 24}]}}\n";
const SERVICE: &str = "apiVersion: v1\nkind: Service\nmetadata: {name: s1, namespace: web}\n\
        spec: {clusterIP: 10.96.0.11, clusterIPs: [10.96.0.11], ports: [{port: 80, protocol: TCP, targetPort: 8080}]}\n";
const BLUE: &str = "apiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {name: blue, labels: {connect: c}}\n\
        spec:\n  namespaceSelector: {matchLabels: {team: blue}}\n  network: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 10.1.0.0/16}]}}\n";
const GREEN: &str = "apiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {name: green, labels: {connect: c}}\n\
        spec:\n  namespaceSelector: {matchLabels: {team: green}}\n  network: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 10.2.0.0/16}]}}\n";
const RED: &str = "apiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {name: red}\n\
        spec:\n  namespaceSelector: {matchLabels: {team: red}}\n  network: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 10.3.0.0/16}]}}\n";
const CONNECT: &str = "apiVersion: k8s.ovn.org/v1\nkind: ClusterNetworkConnect\nmetadata: {name: c}\n\
        spec:\n  networkSelectors:\n  - networkSelectionType: ClusterUserDefinedNetworks\n    clusterUserDefinedNetworkSelector: {networkSelector: {matchLabels: {connect: c}}}\n\
        \x20 connectSubnets: [{cidr: 192.168.0.0/16, networkPrefix: 24}]\n  connectivity: [PodNetwork, ServiceNetwork]\n";
const NODE_A: &str = "apiVersion: v1\nkind: Node\nmetadata: {name: a, annotations: {k8s.ovn.org/node-chassis-id: ca}}\n";
const NODE_B: &str = "apiVersion: v1\nkind: Node\nmetadata: {name: b, annotations: {k8s.ovn.org/node-chassis-id: cb}}\n";
const ALL: [&str; 7] = [WEB, WEB_NET, SERVICE, BLUE, GREEN, CONNECT, NODE_A];

/// The world of `docs` (some refused, in the worlds that take an object away).
fn world_of(docs: &[&str]) -> World {
    let yaml: String = docs.iter().map(|d| format!("---\n{d}")).collect();
    World::build(
        &[parse_file(std::path::Path::new("m.yaml"), &yaml)],
        &State::default(),
        Settings::default(),
    )
}

/// The world of [`ALL`] but `gone`.
fn without(gone: &str) -> World {
    world_of(&ALL.into_iter().filter(|d| *d != gone).collect::<Vec<_>>())
}

/// The world of [`ALL`] with a network and a node more.
fn more() -> World {
    let mut docs = ALL.to_vec();
    docs.extend([RED, NODE_B]);
    world_of(&docs)
}

#[test]
fn a_worlds_owners_are_the_owners_its_keys_write_under() {
    let base = world_of(&ALL);
    assert!(base.problems.is_empty(), "{:?}", base.problems);
    let owners = base.owners();
    // The cluster, three networks, the service, the connect.
    assert_eq!(owners.len(), 6, "{owners:?}");
    for w in [
        without(SERVICE),
        without(CONNECT),
        without(BLUE),
        without(WEB_NET),
        more(),
    ] {
        let mine = w.owners();
        for o in owners.iter().chain(mine) {
            let gone = matches!(w.key_of(o), Key::Gone(_));
            assert_eq!(mine.contains(o), !gone, "{o:?}");
        }
    }
}

#[test]
fn only_a_world_that_lost_an_owner_can_leave_owners_gone() {
    let base = world_of(&ALL);
    for gone in [SERVICE, CONNECT, BLUE, WEB_NET] {
        assert!(without(gone).lost_owners_of(&base), "{gone}");
    }
    // A node is no owner; the namespace gone takes its network and service along.
    assert!(!without(NODE_A).lost_owners_of(&base));
    assert!(without(WEB).lost_owners_of(&base));
    assert!(!more().lost_owners_of(&base));
    assert!(!base.lost_owners_of(&base));
    assert!(!more().lost_owners_of(&world_of(&[RED, NODE_B])));
    assert!(world_of(&[RED, NODE_B]).lost_owners_of(&more()));
}

const MANIFESTS: &str = "\
apiVersion: v1
kind: Node
metadata: {name: a}
---
apiVersion: k8s.ovn.org/v1
kind: ClusterUserDefinedNetwork
metadata: {name: blue, labels: {connect: c}}
spec:
  namespaceSelector: {}
  network: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 10.1.0.0/16}]}}
---
apiVersion: k8s.ovn.org/v1
kind: ClusterUserDefinedNetwork
metadata: {name: green, labels: {connect: c}}
spec:
  namespaceSelector: {}
  network: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 10.2.0.0/16}]}}
---
apiVersion: k8s.ovn.org/v1
kind: ClusterNetworkConnect
metadata: {name: c}
spec:
  networkSelectors:
  - networkSelectionType: ClusterUserDefinedNetworks
    clusterUserDefinedNetworkSelector: {networkSelector: {matchLabels: {connect: c}}}
  connectSubnets: [{cidr: 192.168.0.0/16, networkPrefix: 24}]
  connectivity: [PodNetwork, ServiceNetwork]
";

fn world() -> World {
    let files = [parse_file(Path::new("m.yaml"), MANIFESTS)];
    let w = World::build(&files, &State::default(), Settings::default());
    assert!(w.problems.is_empty(), "{:?}", w.problems);
    w
}

/// A row of `table` with these `external_ids` (and a name), as the cache holds it.
fn row(table: &str, ids: &[(&str, &str)]) -> std::sync::Arc<CachedRow> {
    let schema =
        DatabaseSchema::from_slice(include_bytes!("../../../schemas/ovn-nb.ovsschema")).unwrap();
    let mut store = CacheConfig::new(vec![], "OVN_Northbound", &[table])
        .store(&schema)
        .unwrap();
    let ids: BTreeMap<&str, &str> = ids.iter().copied().collect();
    let mut r = Row::new();
    r.insert("external_ids".into(), Datum::map(ids));
    if table != "Logical_Router_Static_Route" {
        r.insert("name".into(), Datum::scalar("x"));
    }
    store.insert(table, Uuid::from_u128(1), &r).unwrap();
    store.snapshot().get(table, &Uuid::from_u128(1)).unwrap()
}

fn owned_by(net: &str) -> [(&'static str, String); 3] {
    [
        (
            "k8s.ovn.org/owner-controller",
            format!("cluster_udn_{net}-network-controller"),
        ),
        ("k8s.ovn.org/owner-type", "ClusterUserDefinedNetwork".into()),
        ("k8s.ovn.org/name", net.into()),
    ]
}

fn ids<'a>(pairs: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    pairs.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[test]
fn a_networks_own_row_wakes_the_network_and_its_router_its_connects() {
    let w = world();
    let blue = Key::Network("cluster_udn_blue".into());
    let route = row("Logical_Router_Static_Route", &ids(&owned_by("blue")));
    assert_eq!(
        woken(&w, "Logical_Router_Static_Route", &route),
        [Wake::Own(blue.clone())]
    );
    let router = row("Logical_Router", &ids(&owned_by("blue")));
    let mut got = woken(&w, "Logical_Router", &router);
    got.sort();
    let mut want = vec![Wake::Own(blue)];
    want.extend(
        connects_of(&w, "cluster_udn_blue")
            .into_iter()
            .map(Wake::Look),
    );
    want.sort();
    assert!(want.len() >= 3, "{want:?}");
    assert_eq!(got, want);
}

#[test]
fn a_services_load_balancer_wakes_the_connects_of_its_network_only() {
    let w = world();
    let lb = row(
        "Load_Balancer",
        &[("k8s.ovn.org/network", "cluster_udn_green")],
    );
    let got = woken(&w, "Load_Balancer", &lb);
    let want: Vec<Wake> = connects_of(&w, "cluster_udn_green")
        .into_iter()
        .map(Wake::Look)
        .collect();
    assert!(!want.is_empty());
    assert_eq!(got, want);
    assert!(got
        .iter()
        .all(|k| !matches!(k, Wake::Look(Key::ConnectNetwork(_, n)) if n == "cluster_udn_blue")));
    let other = row("Load_Balancer", &[("k8s.ovn.org/network", "nobody")]);
    assert!(woken(&w, "Load_Balancer", &other).is_empty());
}

#[test]
fn another_partys_copp_or_meter_wakes_every_key() {
    let w = world();
    let all: Vec<Wake> = w.keys().into_iter().map(Wake::Look).collect();
    assert!(all.len() >= 5, "{all:?}");
    for table in ["Copp", "Meter"] {
        assert_eq!(woken(&w, table, &row(table, &[])), all, "{table}");
    }
}

#[test]
fn a_static_mac_binding_on_a_gateway_routers_port_wakes_its_network() {
    let files = [parse_file(
        Path::new("m.yaml"),
        &format!("{MANIFESTS}---\napiVersion: v1\nkind: Node\nmetadata: {{name: node-a}}\n"),
    )];
    let w = World::build(&files, &State::default(), Settings::default());
    let schema =
        DatabaseSchema::from_slice(include_bytes!("../../../schemas/ovn-nb.ovsschema")).unwrap();
    let mut store = CacheConfig::new(vec![], "OVN_Northbound", &["Static_MAC_Binding"])
        .store(&schema)
        .unwrap();
    let mut got = Vec::new();
    for (i, port) in [
        "rtoe-GR_cluster_udn_blue_node-a",
        "rtoe-GR_cluster_udn_blue_node-z",
        "rtoe-GR_someone_else",
    ]
    .into_iter()
    .enumerate()
    {
        let mut r = Row::new();
        r.insert("logical_port".into(), Datum::scalar(port));
        let u = Uuid::from_u128(i as u128 + 1);
        store.insert("Static_MAC_Binding", u, &r).unwrap();
        let row = store.snapshot().get("Static_MAC_Binding", &u).unwrap();
        got.push(woken(&w, "Static_MAC_Binding", &row));
    }
    assert_eq!(
        got,
        [
            vec![Wake::Own(Key::Network("cluster_udn_blue".into()))],
            vec![],
            vec![]
        ]
    );
}

#[test]
fn other_parties_rows_wake_nothing() {
    let w = world();
    for table in ["Logical_Switch", "Logical_Router", "ACL"] {
        let theirs = row(
            table,
            &[("k8s.ovn.org/owner-controller", "default-network-controller")],
        );
        assert!(woken(&w, table, &theirs).is_empty(), "{table}");
    }
}

#[test]
fn a_row_of_an_owner_gone_wakes_the_key_that_removes_it() {
    let w = world();
    let r = row("Logical_Switch", &ids(&owned_by("red")));
    let got = woken(&w, "Logical_Switch", &r);
    assert!(
        matches!(&got[..], [Wake::Own(Key::Gone(o))] if o.name == "red"),
        "{got:?}"
    );
    // Its key claims the network's load balancer groups, so that they go too.
    let [Wake::Own(key)] = &got[..] else {
        unreachable!()
    };
    let d = w.desired(key).unwrap();
    assert_eq!(
        d.claims().map(|(_, n)| n).collect::<Vec<_>>(),
        [
            "cluster_udn_red_clusterLBGroup",
            "cluster_udn_red_clusterRouterLBGroup",
            "cluster_udn_red_clusterSwitchLBGroup"
        ]
    );
}

#[test]
fn a_services_own_load_balancer_wakes_the_service_and_its_networks_connects() {
    let manifests = format!(
        "{MANIFESTS}---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: web}}\n\
             ---\napiVersion: v1\nkind: Service\nmetadata: {{name: s, namespace: web}}\n\
             spec: {{clusterIP: 10.96.0.10, ports: [{{port: 80}}]}}\n"
    );
    let files = [parse_file(Path::new("m.yaml"), &manifests)];
    let w = World::build(&files, &State::default(), Settings::default());
    // Blue and green both select every namespace: web is given the first, blue,
    // and the two are told.
    assert_eq!(w.problems.len(), 2, "{:?}", w.problems);
    assert!(w.problems.iter().all(|p| p.message.contains("namespace web is selected by several primary networks (cluster_udn_blue, cluster_udn_green)")));
    let svc = Key::Service("web/s".into());
    assert!(w.keys().contains(&svc), "{:?}", w.keys());
    let owner = crate::ovnk::ownership::service_owner("web/s", "cluster_udn_blue");
    let stamp = [
        ("k8s.ovn.org/owner-controller", owner.controller.clone()),
        ("k8s.ovn.org/owner-type", owner.kind.clone()),
        ("k8s.ovn.org/name", owner.name.clone()),
    ];
    let lb = row("Load_Balancer", &ids(&stamp));
    let mut got = woken(&w, "Load_Balancer", &lb);
    got.sort();
    let mut want: Vec<Wake> = connects_of(&w, "cluster_udn_blue")
        .into_iter()
        .map(Wake::Look)
        .collect();
    want.push(Wake::Own(svc.clone()));
    want.sort();
    assert!(want.len() >= 3, "{want:?}");
    assert_eq!(got, want);
    // Blue's router changing wakes the service too: its per-node load balancers
    // sit on blue's switches and gateway routers.
    let router = row("Logical_Router", &ids(&owned_by("blue")));
    assert!(woken(&w, "Logical_Router", &router).contains(&Wake::Look(svc.clone())));
    // The service gone: its rows' key removes them, and only them (not the
    // network's load balancer groups, which a network's gone key claims).
    let gone = World::build(
        &[parse_file(Path::new("m.yaml"), MANIFESTS)],
        &State::default(),
        Settings::default(),
    );
    let woke = woken(&gone, "Load_Balancer", &lb);
    let own: Vec<&Key> = woke
        .iter()
        .filter_map(|w| match w {
            Wake::Own(k) => Some(k),
            Wake::Look(_) => None,
        })
        .collect();
    let [key @ Key::Gone(_)] = &own[..] else {
        panic!("{woke:?}");
    };
    let d = gone.desired(key).unwrap();
    assert!(d.is_empty() && d.claims().next().is_none(), "{d:?}");
}

#[test]
fn beside_ovn_kubernetes_only_the_connects_are_keys_and_their_routers_changes_wake_them() {
    let files = [parse_file(Path::new("m.yaml"), MANIFESTS)];
    let settings = Settings {
        manage: crate::world::Manage::Connects,
        ..Default::default()
    };
    let w = World::build(&files, &State::default(), settings);
    let keys = w.keys();
    assert!(!keys.is_empty());
    assert!(
        keys.iter()
            .all(|k| matches!(k, Key::Connect(_) | Key::ConnectNetwork(..))),
        "{keys:?}"
    );
    // A network's router as OVN-Kubernetes writes it (no owner stamp, its network
    // named): the connects of that network look again; nothing is the router's key.
    let router = row(
        "Logical_Router",
        &[
            ("k8s.ovn.org/network", "cluster_udn_blue"),
            ("k8s-cluster-router", "yes"),
        ],
    );
    let mut got = woken(&w, "Logical_Router", &router);
    got.sort();
    let mut want: Vec<Wake> = connects_of(&w, "cluster_udn_blue")
        .into_iter()
        .map(Wake::Look)
        .collect();
    want.sort();
    assert!(!want.is_empty());
    assert_eq!(got, want);
    // A row stamped with a network's owner is not netconnect's here.
    let stamped = row("Logical_Switch", &ids(&owned_by("blue")));
    assert!(woken(&w, "Logical_Switch", &stamped)
        .iter()
        .all(|k| matches!(k, Wake::Look(Key::Connect(_) | Key::ConnectNetwork(..)))));
    // Another connect's rows, gone from the manifests, wake no key that removes them.
    let other = crate::ovnk::ownership::connect_owner("other");
    let stamp = [
        ("k8s.ovn.org/owner-controller", other.controller.clone()),
        ("k8s.ovn.org/owner-type", other.kind.clone()),
        ("k8s.ovn.org/name", other.name.clone()),
    ];
    let theirs = row("Logical_Router", &ids(&stamp));
    assert!(woken(&w, "Logical_Router", &theirs).is_empty());
    assert!(w.gone([&other]).is_empty());
    // The same world managing everything removes them.
    let all = World::build(&files, &State::default(), Settings::default());
    assert_eq!(all.gone([&other]).len(), 1);
}
