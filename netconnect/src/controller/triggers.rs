//! Which keys a change in the NB wakes: a pure function of the world and the changed
//! row, so that it is tested without a cache (kube-runtime's trigger mappers, as plain
//! functions).
//!
//! - A row netconnect owns wakes the key that owns it. A network's router or switch
//!   changing also wakes the ClusterNetworkConnects and the services of that network:
//!   they put their rows on them.
//! - A load balancer, netconnect's (a service key's) or another party's
//!   (OVN-Kubernetes' services controller) naming a network in `k8s.ovn.org/network`,
//!   wakes that network's connects: their service groups follow its ClusterIP load
//!   balancers.
//! - The default COPP or a meter of another party wakes every key: keys refer to them
//!   by name.
//! - A static MAC binding on a network's gateway router port (`rtoe-GR_<p><node>`)
//!   wakes that network's key: it owns the bindings on its ports.
//! - Any other row wakes nothing.

use ovsdb_proto::cache::CachedRow;
use ovsdb_proto::Atom;

use super::key::Key;
use crate::topology::desired::Owner;
use crate::world::{is_ours, World};

/// A key a change wakes, and why.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Wake {
    /// The key's own rows changed (perhaps by its own transaction: the queue tells a
    /// reconcile's own changes from others').
    Own(Key),
    /// A row the key refers to or builds on changed: it looks again.
    Look(Key),
}

/// The keys a change to `row` of `table` wakes (the row as it is now, or as it was
/// when deleted).
pub fn woken(world: &World, table: &str, row: &CachedRow) -> Vec<Wake> {
    let ids = row.get("external_ids");
    match ids.and_then(Owner::of) {
        Some(owner) if is_ours(&owner) => {
            let key = ids
                .map(|ids| world.key_of_row(&owner, ids))
                .unwrap_or_else(|| world.key_of(&owner));
            let mut out = Vec::new();
            if let Key::Network(net) = &key {
                if matches!(table, "Logical_Router" | "Logical_Switch") {
                    out.extend(world.connects_of(net).into_iter().map(Wake::Look));
                    out.extend(world.services_of(net).into_iter().map(Wake::Look));
                }
            }
            if table == "Load_Balancer" {
                // A service's load balancer: the connects of its network group them.
                if let Some(net) = owner.controller.strip_suffix("-network-controller") {
                    out.extend(world.connects_of(net).into_iter().map(Wake::Look));
                }
            }
            out.push(Wake::Own(key));
            out
        }
        _ if table == "Load_Balancer" => ids
            .and_then(|d| d.get_str(nb_model::keys::ovn_k8s::NETWORK))
            .and_then(Atom::as_str)
            .map(|net| world.connects_of(net).into_iter().map(Wake::Look).collect())
            .unwrap_or_default(),
        _ if matches!(table, "Copp" | "Meter") => {
            world.keys().into_iter().map(Wake::Look).collect()
        }
        _ if table == "Static_MAC_Binding" => row
            .get("logical_port")
            .and_then(|d| d.as_scalar())
            .and_then(Atom::as_str)
            .and_then(|port| world.network_of_gateway_port(port))
            .map(|net| vec![Wake::Own(Key::Network(net))])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use ovsdb_proto::cache::CacheConfig;
    use ovsdb_proto::{DatabaseSchema, Datum, Row, Uuid};

    use super::*;
    use crate::api::load::parse_file;
    use crate::status::dir::State;
    use crate::world::Settings;

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
            DatabaseSchema::from_slice(include_bytes!("../../../schemas/ovn-nb.ovsschema"))
                .unwrap();
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
            w.connects_of("cluster_udn_blue")
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
        let want: Vec<Wake> = w
            .connects_of("cluster_udn_green")
            .into_iter()
            .map(Wake::Look)
            .collect();
        assert!(!want.is_empty());
        assert_eq!(got, want);
        assert!(got.iter().all(
            |k| !matches!(k, Wake::Look(Key::ConnectNetwork(_, n)) if n == "cluster_udn_blue")
        ));
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
            DatabaseSchema::from_slice(include_bytes!("../../../schemas/ovn-nb.ovsschema"))
                .unwrap();
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
        let owner = crate::ownership::service_owner("web/s", "cluster_udn_blue");
        let stamp = [
            ("k8s.ovn.org/owner-controller", owner.controller.clone()),
            ("k8s.ovn.org/owner-type", owner.kind.clone()),
            ("k8s.ovn.org/name", owner.name.clone()),
        ];
        let lb = row("Load_Balancer", &ids(&stamp));
        let mut got = woken(&w, "Load_Balancer", &lb);
        got.sort();
        let mut want: Vec<Wake> = w
            .connects_of("cluster_udn_blue")
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
}
