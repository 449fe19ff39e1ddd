//! Helpers shared by the integration tests: a sandbox per test and a connected client.

use std::time::Duration;

use ovsdb_proto::{Client, Notifications};

pub use ovn_sandbox::{Installation, OvsdbServer, Sandbox, ServerOptions};

/// The northbound database name.
pub const NB: &str = "OVN_Northbound";

/// A fresh sandbox from the recent installation; panics with the sandbox's own message
/// (which says what to install) when there is none, so a missing OVN fails the test
/// rather than skipping it.
pub fn sandbox() -> Sandbox {
    Sandbox::start().unwrap_or_else(|e| panic!("cannot start the OVN sandbox: {e}"))
}

/// Example binary `name` of a workspace crate, which `cargo test --workspace` builds
/// (beside this test's own binary); panics naming the command that builds it when it
/// is missing.
pub fn example(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|d| d.parent()).unwrap();
    let path = dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: run the suite with `cargo test --workspace`, which builds the examples",
        path.display()
    );
    path
}

/// Binary `name` of a workspace crate, which `cargo build --workspace --bins` builds
/// (the suite does, before its tests); panics naming that command when it is missing.
pub fn binary(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().and_then(|d| d.parent()).unwrap().join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` first",
        path.display()
    );
    path
}

/// A standalone OVN_Northbound server from the recent installation.
pub fn nb_server() -> OvsdbServer {
    let install = Installation::recent().unwrap_or_else(|e| panic!("{e}"));
    OvsdbServer::start(&install, &ServerOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// Adds a pod port `pod` to node switch `switch` (its address the fifth of `subnet`,
/// its MAC derived from it as OVN-Kubernetes derives them), then traces an ICMP packet
/// from it to `dst` through the NB pipeline with `ovn-trace --minimal`: the trace's text.
pub fn trace_from_new_pod(
    sandbox: &Sandbox,
    switch: &str,
    pod: &str,
    subnet: &ipnet::IpNet,
    dst: std::net::IpAddr,
) -> String {
    use netconnect::ovnk::{addr, mac};
    let src = addr::nth(subnet, 5).expect("a subnet with five addresses");
    let gw_mac = mac::from_ip(addr::nth(subnet, 1).expect("a gateway address"));
    let src_mac = mac::from_ip(src);
    sandbox
        .nbctl(&[
            "lsp-add",
            switch,
            pod,
            "--",
            "lsp-set-addresses",
            pod,
            &format!("{src_mac} {src}"),
        ])
        .unwrap();
    sandbox.sync().unwrap();
    let flow = format!(
        "inport == \"{pod}\" && eth.src == {src_mac} && eth.dst == {gw_mac} && ip4.src == {src} && ip4.dst == {dst} && ip.ttl == 64 && icmp4"
    );
    sandbox.trace(&["--minimal", switch, &flow]).unwrap()
}

/// Every row of `tables` on the server, by table then uuid, without `_uuid` and
/// `_version`.
pub async fn select_all(
    c: &Client,
    tables: &[&str],
) -> std::collections::BTreeMap<
    String,
    std::collections::BTreeMap<ovsdb_proto::Uuid, ovsdb_proto::Row>,
> {
    let ops: Vec<ovsdb_proto::Operation> = tables
        .iter()
        .map(|t| ovsdb_proto::Operation::select(*t, vec![]))
        .collect();
    let results = c.transact(NB, &ops).await.unwrap();
    tables
        .iter()
        .zip(results)
        .map(|(t, r)| {
            let rows = r
                .rows()
                .unwrap()
                .iter()
                .map(|row| {
                    let mut row = row.clone();
                    let uuid = row
                        .remove("_uuid")
                        .and_then(|d| d.as_scalar().and_then(ovsdb_proto::Atom::as_uuid))
                        .expect("a row's _uuid");
                    row.remove("_version");
                    (uuid, row)
                })
                .collect();
            (t.to_string(), rows)
        })
        .collect()
}

/// A `Logical_Switch` row with only its name.
pub fn named(name: &str) -> ovsdb_proto::Row {
    [("name".to_string(), ovsdb_proto::Datum::scalar(name))]
        .into_iter()
        .collect()
}

/// Inserts switch `name` unless one has that name (the `wait` then fails with "timed
/// out"): a retry after an unknown outcome cannot add it twice.
pub fn insert_unless_named(name: &str) -> Vec<ovsdb_proto::Operation> {
    use ovsdb_proto::{Condition, Operation, WaitUntil};
    vec![
        Operation::Wait {
            table: "Logical_Switch".into(),
            timeout: Some(0),
            conditions: vec![Condition::eq("name", name)],
            columns: vec!["name".into()],
            until: WaitUntil::Equal,
            rows: vec![],
        },
        Operation::insert("Logical_Switch", named(name)),
    ]
}

/// Connects to `remote`, failing the test on error.
pub async fn client(remote: &str) -> (Client, Notifications) {
    ovsdb_proto::connect(remote)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {remote}: {e}"))
}

/// A schema file for a made-up newer OVN_Northbound ("7.99.0"): the repository's 7.18.0
/// schema changed by `edit`. The file lives as long as the returned directory.
pub fn newer_nb_schema(
    edit: impl FnOnce(&mut serde_json::Value),
) -> (tempfile::TempDir, std::path::PathBuf) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../schemas/ovn-nb.ovsschema");
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    json["version"] = "7.99.0".into();
    json.as_object_mut().unwrap().remove("cksum");
    edit(&mut json);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("newer.ovsschema");
    std::fs::write(&file, serde_json::to_vec(&json).unwrap()).unwrap();
    (dir, file)
}

/// Waits for the next notification, failing the test after `secs` seconds.
pub async fn next_notification(n: &mut Notifications, secs: u64) -> ovsdb_proto::Notification {
    tokio::time::timeout(Duration::from_secs(secs), n.recv())
        .await
        .expect("timed out waiting for a notification")
        .expect("notifications ended")
}

/// Helpers for checking a cache against its server.
pub mod cache {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::Duration;

    use ovsdb_proto::cache::{Cache, CacheEvent, CacheEvents, Change, Snapshot};
    use ovsdb_proto::{Client, Row, Uuid};

    /// The tables the cache tests follow.
    pub const TABLES: &[&str] = &["Logical_Switch", "Logical_Switch_Port"];

    /// Table name to rows by uuid.
    pub type Contents = BTreeMap<String, BTreeMap<Uuid, Row>>;

    /// The server's contents of `TABLES`, as the cache keeps them.
    pub async fn dump(c: &Client) -> Contents {
        super::select_all(c, TABLES).await
    }

    /// A snapshot's rows of `TABLES`.
    pub fn contents(s: &Snapshot) -> Contents {
        TABLES
            .iter()
            .map(|t| {
                (
                    t.to_string(),
                    s.table(t).iter().map(|(u, r)| (*u, r.to_row())).collect(),
                )
            })
            .collect()
    }

    /// Applies events to a model of the contents, checking each one against it.
    #[derive(Default)]
    pub struct Replay {
        tables: Contents,
        /// True once `Ready` was seen.
        pub ready: bool,
        /// The servers reported unusable, and why, in order.
        pub unusable: Vec<(String, String)>,
        /// The typed reasons of [`Replay::unusable`], in the same order.
        pub reasons: Vec<ovsdb_proto::cache::UnusableReason>,
        /// The schema skews reported, in order.
        pub skews: Vec<ovsdb_proto::typed::SchemaSkew>,
    }

    impl Replay {
        /// Applies one event, checking it against what came before.
        pub fn apply(&mut self, e: CacheEvent) {
            let e = match e {
                CacheEvent::Ready => {
                    assert!(!self.ready, "ready announced twice");
                    self.ready = true;
                    return;
                }
                CacheEvent::Change(e) => e,
                CacheEvent::Unusable {
                    remote,
                    error,
                    reason,
                } => {
                    self.unusable.push((remote, error));
                    self.reasons.push(reason);
                    return;
                }
                CacheEvent::Skew(skew) => {
                    self.skews.push(skew);
                    return;
                }
                _ => return,
            };
            let t = self.tables.entry(e.table.clone()).or_default();
            match e.change {
                Change::Insert { new } => assert!(
                    t.insert(e.uuid, new.to_row()).is_none(),
                    "insert of a known row {}",
                    e.uuid
                ),
                Change::Modify { old, new } => {
                    let prev = t.insert(e.uuid, new.to_row());
                    assert_eq!(
                        prev.as_ref(),
                        Some(&old.to_row()),
                        "update's old row is not the last one seen"
                    );
                    assert_ne!(old, new, "an update that changes nothing");
                }
                Change::Delete { old } => assert_eq!(
                    t.remove(&e.uuid).as_ref(),
                    Some(&old.to_row()),
                    "delete of {}",
                    e.uuid
                ),
            }
        }

        /// Applies every waiting event; returns how many there were.
        /// Applies every event waiting; returns how many were row changes.
        pub fn drain(&mut self, events: &mut CacheEvents) -> usize {
            let mut n = 0;
            while let Some(e) = events.try_recv() {
                n += usize::from(matches!(e, CacheEvent::Change(_)));
                self.apply(e);
            }
            n
        }

        /// The contents the events built.
        pub fn contents(&self) -> Contents {
            TABLES
                .iter()
                .map(|t| {
                    (
                        t.to_string(),
                        self.tables.get(*t).cloned().unwrap_or_default(),
                    )
                })
                .collect()
        }
    }

    /// Waits until the cache equals the server; returns the server's contents.
    pub async fn settle(cache: &Cache, server: &Client) -> Contents {
        let want = dump(server).await;
        let w = Arc::new(want.clone());
        let ok = cache
            .wait_for(Duration::from_secs(20), move |s| contents(s) == *w)
            .await;
        assert!(
            ok,
            "the cache never matched the server:\ncache {:?}\nserver {:?}",
            contents(&cache.snapshot()),
            want
        );
        want
    }
}

/// Helpers for netconnect against a sandbox.
pub mod udn {
    use std::path::Path;
    use std::sync::Arc;
    use std::time::Duration;

    use netconnect::api::load::parse_file;
    use netconnect::controller::{self, Backoff};
    use netconnect::ovnk::addr;
    use netconnect::reconcile::{NbIndexes, Reconciler};
    use netconnect::status::dir::State;
    use netconnect::world::{Settings, World};
    use ovsdb_proto::cache::{Cache, CacheConfig, CacheEvents};

    /// Every row by table and uuid.
    pub type Rows = std::collections::BTreeMap<(String, String), ovsdb_proto::Row>;

    /// Every row of `tables` in `r`'s cache now.
    pub fn rows_of(r: &Reconciler, tables: &[&str]) -> Rows {
        let snap = r.cache().snapshot();
        let mut out = Rows::new();
        for t in tables {
            for (uuid, row) in snap.table(t).iter() {
                out.insert((t.to_string(), uuid.to_string()), row.to_row());
            }
        }
        out
    }

    /// `row` without the columns OVN's daemons write (ovn-northd sets a port's `up`
    /// when it gets to it, whoever wrote the port).
    pub fn without_ovn_columns(mut row: ovsdb_proto::Row) -> ovsdb_proto::Row {
        row.retain(|column, _| {
            !netconnect::reconcile::left::WRITTEN_BY_OVN.contains(&column.as_str())
        });
        row
    }

    /// Asserts that every row of `theirs` is in `after`, the same row (uuid), its
    /// columns (but those OVN's daemons write) the same but for elements added to its
    /// sets of references named in `growing`.
    pub fn assert_kept_but_set_elements(theirs: &Rows, after: &Rows, growing: &[&str]) {
        for (key, before) in theirs {
            let now = after
                .get(key)
                .unwrap_or_else(|| panic!("{key:?} deleted or recreated: {before:?}"));
            let before = without_ovn_columns(before.clone());
            let now = without_ovn_columns(now.clone());
            for (column, value) in &before {
                let new = &now[column];
                let grown = match (value, new) {
                    (ovsdb_proto::Datum::Set(a), ovsdb_proto::Datum::Set(b)) => {
                        a.iter().all(|x| b.contains(x))
                    }
                    _ => false,
                };
                assert!(
                    value == new || (grown && growing.contains(&column.as_str())),
                    "{key:?} {column}: {value:?} became {new:?}"
                );
            }
        }
    }

    /// A cache of the NB at `remote` with netconnect's indexes, and a reconciler over it.
    pub async fn reconciler(remote: &str) -> (Arc<Reconciler>, CacheEvents) {
        let mut cc = CacheConfig::new(vec![remote.parse().unwrap()], "OVN_Northbound", &[]);
        let nb = NbIndexes::register(&mut cc);
        let (cache, events) = Cache::start(cc);
        let cache = Arc::new(cache);
        tokio::time::timeout(Duration::from_secs(10), cache.wait_until_ready())
            .await
            .expect("the NB cache did not sync");
        (Arc::new(Reconciler::new(cache, nb)), events)
    }

    /// The world of the objects in `yaml`, completed by `state`; panics on any problem.
    pub fn world(yaml: &str, state: &State, zone: Option<&str>) -> World {
        let w = world_with_problems(yaml, state, zone);
        assert!(w.problems.is_empty(), "{:#?}", w.problems);
        w
    }

    /// The world of the objects in `yaml`, problems and all.
    pub fn world_with_problems(yaml: &str, state: &State, zone: Option<&str>) -> World {
        let settings = Settings {
            zone: zone.map(str::to_owned),
            ..Default::default()
        };
        world_in(yaml, state, settings)
    }

    /// The world of the objects in `yaml` under `settings`, problems and all.
    pub fn world_in(yaml: &str, state: &State, settings: Settings) -> World {
        World::build(
            &[parse_file(Path::new("manifests.yaml"), yaml)],
            state,
            settings,
        )
    }

    /// Reconciles every key of `world` once (five tries each); panics on any failure.
    pub async fn apply(r: &Reconciler, world: &World) -> Vec<controller::Outcome> {
        let out = outcomes(r, world, 5).await;
        for o in &out {
            if let Err(e) = &o.result {
                panic!("{}: {e}", o.key);
            }
        }
        out
    }

    /// Reconciles every key of `world` once with `tries` tries each; the outcomes,
    /// failures included.
    pub async fn outcomes(r: &Reconciler, world: &World, tries: u32) -> Vec<controller::Outcome> {
        let backoff = Backoff {
            min: Duration::from_millis(50),
            max: Duration::from_millis(500),
        };
        controller::once(r, world, tries, backoff, 4).await
    }

    /// A node document whose chassis is `chassis`, with extra annotations.
    ///
    /// Like every node of an OVN-Kubernetes cluster, it has a gateway
    /// (`k8s.ovn.org/l3-gateway-config`) unless `extra` gives one: its address
    /// `192.168.126.<n>/24`, `n` derived from the name (10 to 249).
    pub fn node(name: &str, chassis: &str, extra: &[(&str, &str)]) -> String {
        let mut s = format!(
            "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  annotations:\n    k8s.ovn.org/node-chassis-id: {chassis}\n"
        );
        let gateway = "k8s.ovn.org/l3-gateway-config";
        if !extra.iter().any(|(k, _)| *k == gateway) {
            let n = 10
                + name
                    .bytes()
                    .fold(7u32, |h, b| h.wrapping_mul(31) ^ u32::from(b))
                    % 240;
            let gw = gateway_config(&[&format!("192.168.126.{n}/24")], &["192.168.126.1"]);
            s.push_str(&format!("    {gateway}: '{gw}'\n"));
        }
        for (k, v) in extra {
            s.push_str(&format!("    {k}: '{v}'\n"));
        }
        s
    }

    /// A ClusterIP service `ns/name` on `cluster_ip:port` (TCP) and the endpoint slice
    /// OVN-Kubernetes' mirroring controller writes for it on network `net`: the pods
    /// `endpoints` listening on `target`.
    pub fn service(
        ns: &str,
        name: &str,
        cluster_ip: &str,
        port: u16,
        net: &str,
        target: u16,
        endpoints: &[&str],
    ) -> String {
        let endpoints: Vec<std::net::IpAddr> =
            endpoints.iter().map(|e| e.parse().unwrap()).collect();
        let s = ServiceSpec {
            cluster_ip,
            ports: &[("", port, "TCP", target)],
            affinity: None,
            node_port: None,
        };
        service_with(ns, name, net, &s, &endpoints)
    }

    /// One port of a service: its name (empty for a lone port), port, protocol and
    /// target port.
    pub type ServicePort = (&'static str, u16, &'static str, u16);

    /// A ClusterIP service's spec as the tests write it.
    pub struct ServiceSpec<'a> {
        /// Its cluster IP.
        pub cluster_ip: &'a str,
        /// Its ports.
        pub ports: &'a [ServicePort],
        /// `sessionAffinity: ClientIP` with this timeout (seconds), if any.
        pub affinity: Option<u32>,
        /// `type: NodePort` with this node port on the first port, if any.
        pub node_port: Option<u16>,
    }

    /// Service `ns/name` of `spec` and the endpoint slice OVN-Kubernetes' mirroring
    /// controller writes for it on network `net`: `endpoints`, ready.
    pub fn service_with(
        ns: &str,
        name: &str,
        net: &str,
        spec: &ServiceSpec,
        endpoints: &[std::net::IpAddr],
    ) -> String {
        let named = |n: &str| {
            if n.is_empty() {
                String::new()
            } else {
                format!("name: {n}, ")
            }
        };
        let svc_ports: Vec<String> = spec
            .ports
            .iter()
            .enumerate()
            .map(|(i, (n, p, proto, t))| {
                let node_port = match spec.node_port {
                    Some(np) if i == 0 => format!(", nodePort: {np}"),
                    _ => String::new(),
                };
                format!(
                    "{{{}port: {p}, protocol: {proto}, targetPort: {t}{node_port}}}",
                    named(n)
                )
            })
            .collect();
        let kind = if spec.node_port.is_some() {
            "type: NodePort, "
        } else {
            ""
        };
        let slice_ports: Vec<String> = spec
            .ports
            .iter()
            .map(|(n, _, proto, t)| format!("{{{}port: {t}, protocol: {proto}}}", named(n)))
            .collect();
        let affinity = match spec.affinity {
            Some(t) => format!(
                ", sessionAffinity: ClientIP, sessionAffinityConfig: {{clientIP: {{timeoutSeconds: {t}}}}}"
            ),
            None => String::new(),
        };
        let ip = spec.cluster_ip;
        let mut s = format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {ns}}}\n\
             spec: {{{kind}clusterIP: {ip}, clusterIPs: [{ip}], ports: [{}]{affinity}}}\n\
             ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
             metadata:\n  name: {name}-{net}\n  namespace: {ns}\n\
             \x20 labels: {{endpointslice.kubernetes.io/managed-by: endpointslice-mirror-controller.k8s.ovn.org, k8s.ovn.org/service-name: {name}}}\n\
             \x20 annotations: {{k8s.ovn.org/endpointslice-network: {net}}}\n\
             addressType: IPv4\nports: [{}]\nendpoints: [",
            svc_ports.join(", "),
            slice_ports.join(", ")
        );
        let eps: Vec<String> = endpoints
            .iter()
            .map(|e| format!("{{addresses: [{e}], conditions: {{ready: true}}}}"))
            .collect();
        s.push_str(&eps.join(", "));
        s.push_str("]\n");
        s
    }

    /// The two nodes of a two-zone cluster: `node-a` on `chassis-a` in `zone-a`,
    /// `node-b` on `chassis-b` in `zone-b`.
    pub fn two_zone_nodes() -> String {
        let gw_a = gateway_config(&["192.168.126.10/24"], &["192.168.126.1"]);
        let gw_b = gateway_config(&["192.168.126.11/24"], &["192.168.126.1"]);
        node(
            "node-a",
            "chassis-a",
            &[
                ("k8s.ovn.org/zone-name", "zone-a"),
                ("k8s.ovn.org/l3-gateway-config", &gw_a),
            ],
        ) + &node(
            "node-b",
            "chassis-b",
            &[
                ("k8s.ovn.org/zone-name", "zone-b"),
                ("k8s.ovn.org/l3-gateway-config", &gw_b),
            ],
        )
    }

    /// A node's `k8s.ovn.org/l3-gateway-config` (shared gateway mode, NodePorts on):
    /// its addresses `ips` (CIDRs) and next hops `next_hops`, its MAC derived from the
    /// first address.
    pub fn gateway_config(ips: &[&str], next_hops: &[&str]) -> String {
        let first: ipnet::IpNet = ips[0].parse().unwrap();
        serde_json::json!({"default": {
            "mode": "shared",
            "bridge-id": "breth0",
            "mac-address": netconnect::ovnk::mac::from_ip(first.addr()),
            "ip-addresses": ips,
            "next-hops": next_hops,
            "node-port-enable": "true",
        }})
        .to_string()
    }

    /// One sandbox per zone of [`two_zone_nodes`], each with its chassis local and the
    /// other registered as remote, and `yaml` reconciled into it for its zone (and
    /// synced through northd): zone A's, then zone B's.
    pub async fn two_zones(yaml: &str) -> Vec<(ovn_sandbox::Sandbox, World)> {
        let mut zones = Vec::new();
        for (zone, local, remote) in [
            ("zone-a", "chassis-a", "chassis-b"),
            ("zone-b", "chassis-b", "chassis-a"),
        ] {
            let sb = crate::sandbox();
            sb.sbctl(&["chassis-add", local, "geneve", "127.0.0.1"])
                .unwrap();
            sb.register_remote_chassis(remote, "127.0.0.2").unwrap();
            let world = world(yaml, &State::default(), Some(zone));
            let (r, _) = reconciler(&sb.nb.unix_remote()).await;
            apply(&r, &world).await;
            sb.sync().unwrap();
            zones.push((sb, world));
        }
        zones
    }

    /// Two dual-stack primary networks selecting every namespace: `blue`, Layer3
    /// (10.10.0.0/16 in /24s, fd10::/48 in /64s), and `yellow`, Layer2 (10.20.0.0/16,
    /// fd20::/64).
    pub const BLUE_AND_YELLOW: &str = r#"
apiVersion: k8s.ovn.org/v1
kind: ClusterUserDefinedNetwork
metadata: {name: blue}
spec:
  namespaceSelector: {}
  network:
    topology: Layer3
    layer3:
      role: Primary
      subnets: [{cidr: 10.10.0.0/16, hostSubnet: 24}, {cidr: "fd10::/48", hostSubnet: 64}]
---
apiVersion: k8s.ovn.org/v1
kind: ClusterUserDefinedNetwork
metadata: {name: yellow}
spec:
  namespaceSelector: {}
  network:
    topology: Layer2
    layer2: {role: Primary, subnets: [10.20.0.0/16, "fd20::/64"]}
"#;

    /// One of [`BLUE_AND_YELLOW`]'s networks as seen from one node.
    pub struct OnNode {
        /// The network's name.
        pub net: &'static str,
        /// Where the node's pods take their addresses: blue's host subnets on the
        /// node, yellow's subnets.
        pub subnets: Vec<ipnet::IpNet>,
        /// The switch the node's pods go on.
        pub switch: String,
    }

    /// [`BLUE_AND_YELLOW`]'s networks on `node` of `world`.
    pub fn blue_and_yellow_on(world: &World, node: &str) -> [OnNode; 2] {
        [
            OnNode {
                net: "cluster_udn_blue",
                subnets: world.allocations.host_subnets["cluster_udn_blue"][node].to_vec(),
                switch: format!("cluster_udn_blue_{node}"),
            },
            OnNode {
                net: "cluster_udn_yellow",
                subnets: vec![
                    "10.20.0.0/16".parse().unwrap(),
                    "fd20::/64".parse().unwrap(),
                ],
                switch: "cluster_udn_yellow_ovn_layer2_switch".into(),
            },
        ]
    }

    /// The host's end of `on`'s management port on `node`, in `chassis`' own namespace:
    /// an OVS internal port bound to `k8s-<net>_<node>` with the `.2` of each subnet
    /// and the MAC derived from the first, and the network's management-port
    /// masquerade addresses routed back through it (as ovnkube-node sets up
    /// `ovn-k8s-mpX`).
    pub fn host_management_port(
        chassis: &mut ovn_sandbox::Chassis,
        world: &World,
        on: &OnNode,
        node: &str,
    ) -> ovn_sandbox::Pod {
        let ips: Vec<ipnet::IpNet> = on
            .subnets
            .iter()
            .map(|s| ipnet::IpNet::new(addr::nth(s, 2).unwrap(), s.prefix_len()).unwrap())
            .collect();
        let mac = netconnect::ovnk::mac::from_ip(ips[0].addr());
        let port = chassis
            .add_management_port(&format!("k8s-{}_{node}", on.net), &mac, &ips)
            .unwrap();
        let id = world.allocations.network_ids[on.net];
        for v4 in [true, false] {
            let m = netconnect::topology::masquerade_ip(&world.settings.topology, id, v4, false)
                .unwrap();
            chassis
                .host_ip(&["route", "add", &m.to_string(), "dev", &port.host_veth])
                .unwrap();
        }
        port
    }

    /// A pod named `name` on `switch` at the `n`-th address of each of `subnets`, its
    /// default routes via their first addresses.
    pub fn pod_at(
        sb: &ovn_sandbox::Sandbox,
        chassis: &mut ovn_sandbox::Chassis,
        switch: &str,
        name: &str,
        subnets: &[ipnet::IpNet],
        n: u128,
    ) -> ovn_sandbox::Pod {
        let addresses: Vec<String> = subnets
            .iter()
            .map(|s| format!("{}/{}", addr::nth(s, n).unwrap(), s.prefix_len()))
            .collect();
        let gateways: Vec<String> = subnets
            .iter()
            .map(|s| addr::nth(s, 1).unwrap().to_string())
            .collect();
        add_pod(
            sb,
            chassis,
            switch,
            name,
            &addresses.iter().map(String::as_str).collect::<Vec<_>>(),
            &gateways.iter().map(String::as_str).collect::<Vec<_>>(),
        )
    }

    /// Adds a pod's logical port to `switch` (as OVN-Kubernetes' pod controller would)
    /// and the pod itself to the chassis.
    pub fn add_pod(
        sb: &ovn_sandbox::Sandbox,
        chassis: &mut ovn_sandbox::Chassis,
        switch: &str,
        name: &str,
        ips: &[&str],
        gateways: &[&str],
    ) -> ovn_sandbox::Pod {
        let nets: Vec<ipnet::IpNet> = ips.iter().map(|s| s.parse().unwrap()).collect();
        let mac = netconnect::ovnk::mac::from_ip(nets[0].addr());
        let mut addresses = mac.clone();
        for n in &nets {
            addresses.push(' ');
            addresses.push_str(&n.addr().to_string());
        }
        sb.nbctl(&[
            "lsp-add",
            switch,
            name,
            "--",
            "lsp-set-addresses",
            name,
            &addresses,
            "--",
            "lsp-set-port-security",
            name,
            &addresses,
        ])
        .unwrap();
        let gws: Vec<std::net::IpAddr> = gateways.iter().map(|g| g.parse().unwrap()).collect();
        chassis.add_pod(name, &mac, &nets, &gws).unwrap()
    }

    /// Every row of the tables netconnect touches, by table then uuid, without the columns
    /// OVN's daemons write.
    pub async fn dump(
        remote: &str,
    ) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, serde_json::Value>>
    {
        let (c, _) = super::client(remote).await;
        super::select_all(&c, netconnect::reconcile::nb::TABLES)
            .await
            .into_iter()
            .map(|(t, rows)| {
                let rows = rows
                    .into_iter()
                    .map(|(uuid, mut row)| {
                        // Columns OVN's own daemons write (northd sets `up`) are not ours
                        // to compare.
                        for c in netconnect::reconcile::left::WRITTEN_BY_OVN {
                            row.remove(*c);
                        }
                        (uuid.to_string(), serde_json::to_value(&row).unwrap())
                    })
                    .collect();
                (t, rows)
            })
            .collect()
    }

    /// Rows by table then uuid, as JSON.
    pub type Dump =
        std::collections::BTreeMap<String, std::collections::BTreeMap<String, serde_json::Value>>;

    /// Fails with the rows that differ between two dumps.
    pub fn assert_same_rows(before: &Dump, after: &Dump) {
        let mut diffs = Vec::new();
        for (table, rows) in before {
            for (uuid, row) in rows {
                match after.get(table).and_then(|r| r.get(uuid)) {
                    None => diffs.push(format!("{table} {uuid} is gone: {row}")),
                    Some(a) if a != row => {
                        diffs.push(format!("{table} {uuid} changed:\n  was {row}\n  now {a}"))
                    }
                    _ => {}
                }
            }
        }
        for (table, rows) in after {
            for (uuid, row) in rows {
                if !before.get(table).is_some_and(|r| r.contains_key(uuid)) {
                    diffs.push(format!("{table} {uuid} is new: {row}"));
                }
            }
        }
        assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    }
}
