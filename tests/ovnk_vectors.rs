//! An NB written from OVN-Kubernetes' own test vectors, not from netconnect's rows: the
//! rows ovnkube-controller 1.3 writes for two primary Layer3 ClusterUserDefinedNetworks
//! and a primary Layer2 one on a node of its zone (shared gateway, one node per zone,
//! EgressIP and multicast off), each family transcribed from the function of
//! OVN-Kubernetes' tests that expects it
//! (`go-controller/pkg/ovn/layer3_user_defined_network_controller_test.go`,
//! `layer2_user_defined_network_controller_test.go`, `multihoming_test.go`,
//! `master_test.go`, commit 8871cd9; `ovnk_vectors/rows.rs`, `ovnk_vectors/layer2.rs`)
//! and generalised from their one network and node to any. Where a vector holds a
//! test's stand-in rather than what the controller writes, the controller's function
//! is followed and named.
//!
//! Over it: netconnectd taking those networks over (`--adopt ovn-kubernetes`) finds
//! every row where the vectors put it (adopted in place, nothing planned but owner
//! keys, nothing inserted or deleted, a quiet second pass); an audit names each drift
//! made by hand and nothing else; beside them (`--manage connects`) a connect adds only
//! its own rows and elements of their sets.

use integration_tests::{sandbox, udn};
use netconnect::status::dir::State;
use netconnect::world::Settings;

#[path = "ovnk_vectors/layer2.rs"]
mod layer2;
#[path = "ovnk_vectors/rows.rs"]
mod rows;

use rows::*;

/// The networks of the fixture: two primary Layer3 CUDNs on node-a.
const BLUE: Net = Net {
    net: String::new(),
    topology: "layer3",
    keys: [0, 0],
    id: 2,
    cluster: "103.103.0.0/16",
    host: "103.103.4.0/24",
    node: &NODE,
};

fn networks() -> [Net; 3] {
    [
        Net {
            net: "cluster_udn_blue".into(),
            ..BLUE
        },
        Net {
            net: "cluster_udn_green".into(),
            id: 3,
            cluster: "104.104.0.0/16",
            host: "104.104.4.0/24",
            ..BLUE
        },
        Net {
            net: "cluster_udn_yellow".into(),
            topology: "layer2",
            id: 4,
            keys: [16_711_687, 16_715_782],
            cluster: "105.105.0.0/16",
            host: "105.105.0.0/16",
            ..BLUE
        },
    ]
}

/// The manifests OVN-Kubernetes would have had for [`networks`]: the CUDNs, the
/// NetworkAttachmentDefinitions its cluster manager renders (with the networks' ids),
/// node-a annotated as its cluster manager and node agent annotate it.
fn manifests() -> String {
    let mut s = String::new();
    let mut subnets = Vec::new();
    for n in networks() {
        let cudn = n.net.strip_prefix("cluster_udn_").unwrap();
        let (spec, keys) = match n.topology {
            "layer3" => (
                format!(
                    "{{topology: Layer3, layer3: {{role: Primary, subnets: [{{cidr: {}, hostSubnet: 24}}]}}}}",
                    n.cluster
                ),
                String::new(),
            ),
            _ => (
                format!(
                    "{{topology: Layer2, layer2: {{role: Primary, subnets: [{}]}}}}",
                    n.cluster
                ),
                format!(", k8s.ovn.org/tunnel-keys: '[{},{}]'", n.keys[0], n.keys[1]),
            ),
        };
        s += &format!(
            "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {{name: {cudn}, labels: {{connect: colored}}}}\n\
             spec:\n  namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: {cudn}}}}}\n  network: {spec}\n"
        );
        s += &format!(
            "---\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\n\
             metadata: {{name: {cudn}, namespace: {cudn}, annotations: {{k8s.ovn.org/network-id: '{}'{keys}}}}}\n\
             spec:\n  config: '{{\"cniVersion\":\"1.0.0\",\"name\":\"{}\",\"netAttachDefName\":\"{cudn}/{cudn}\",\"topology\":\"{}\",\"type\":\"ovn-k8s-cni-overlay\"}}'\n",
            n.id, n.net, n.topology
        );
        s += &format!("---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {cudn}, labels: {{kubernetes.io/metadata.name: {cudn}}}}}\n");
        if n.topology == "layer3" {
            subnets.push(format!("\"{}\":[\"{}\"]", n.net, n.host));
        }
    }
    let gw = udn::gateway_config(&[NODE.ip], &[NODE.next_hop]);
    let node_subnets = format!("{{{}}}", subnets.join(","));
    let transit = format!("{{\"ipv4\":\"100.88.0.{}/16\"}}", NODE.id);
    s + &udn::node(
        NODE.name,
        NODE.chassis,
        &[
            ("k8s.ovn.org/node-id", &NODE.id.to_string()),
            ("k8s.ovn.org/l3-gateway-config", &gw),
            ("k8s.ovn.org/node-subnets", &node_subnets),
            ("k8s.ovn.org/node-transit-switch-port-ifaddr", &transit),
        ],
    )
}

/// Every row of the tables netconnect writes, by table and uuid.
fn all_rows(r: &netconnect::reconcile::Reconciler) -> Rows {
    udn::rows_of(r, netconnect::reconcile::nb::TABLES)
}

/// `row` without netconnect's owner keys where OVN-Kubernetes stamps none (the rows
/// not of its `DbObjectIDs`), and without the columns OVN's daemons write.
fn stamps_off(row: &ovsdb_proto::Row) -> ovsdb_proto::Row {
    let mut row = udn::without_ovn_columns(row.clone());
    if let Some(ovsdb_proto::Datum::Map(ids)) = row.get("external_ids") {
        let of_ovn_k = ids.iter().any(|(k, v)| {
            k.as_str() == Some("k8s.ovn.org/owner-type")
                && matches!(v.as_str(), Some("Cluster" | "NetpolNode"))
        });
        if !of_ovn_k {
            let kept: Vec<_> = ids
                .iter()
                .filter(|(k, _)| {
                    !k.as_str().is_some_and(|k| {
                        ["owner-controller", "owner-type", "name", "id"]
                            .iter()
                            .any(|s| k == format!("k8s.ovn.org/{s}"))
                    })
                })
                .cloned()
                .collect();
            row.insert("external_ids".into(), ovsdb_proto::Datum::map(kept));
        }
    }
    row
}

/// Writes the fixture into the NB behind `r`; its rows.
async fn ovn_kubernetes_nb(r: &netconnect::reconcile::Reconciler) -> Rows {
    let mut f = Fixture::default();
    let copp = cluster_rows(&mut f);
    for n in networks() {
        match n.topology {
            "layer3" => layer3(&mut f, &n, &copp),
            _ => layer2::layer2(&mut f, &n, &copp),
        }
    }
    let count = f.ops.len();
    r.cache().transact(&f.ops).await.unwrap();
    r.cache()
        .wait_for(std::time::Duration::from_secs(10), |s| {
            netconnect::reconcile::nb::TABLES
                .iter()
                .map(|t| s.table(t).len())
                .sum::<usize>()
                >= count
        })
        .await;
    let rows = all_rows(r);
    assert_eq!(rows.len(), count);
    rows
}

use udn::Rows;

/// The world of [`manifests`] (and `more`) in `settings`, the zone node-a's.
fn world(more: &str, settings: Settings) -> netconnect::world::World {
    let settings = Settings {
        zone: Some(NODE.name.into()),
        ..settings
    };
    let world = udn::world_in(&(manifests() + more), &State::default(), settings);
    assert!(world.problems.is_empty(), "{:#?}", world.problems);
    world
}

/// What an audit (`--plan`) of `world` over the NB behind `r` says differs: a line per
/// row inserted, deleted, not written, or updated in more than its owner keys.
fn audit(r: &netconnect::reconcile::Reconciler, world: &netconnect::world::World) -> Vec<String> {
    use netconnect::reconcile::dry_run::DryRun;
    let snap = r.cache().snapshot();
    let mut dry = DryRun::of(&snap, r.cache().schema().unwrap()).unwrap();
    let mut lines = Vec::new();
    for key in netconnect::controller::all_keys(world, r) {
        let plan = dry.plan(&world.desired(&key).unwrap()).unwrap();
        lines.extend(plan.inserted.iter().map(|r| format!("insert {r}")));
        lines.extend(plan.deleted.iter().map(|r| format!("delete {r}")));
        lines.extend(plan.theirs.iter().map(|r| format!("not written {r}")));
        for (row, columns) in &plan.updated {
            if columns != &["external_ids"] {
                lines.push(format!("update {row}: {}", columns.join(", ")));
            }
        }
    }
    lines
}

/// Taken over (`--adopt ovn-kubernetes`), the audit finds nothing to change but owner
/// keys; every row stays where it was (uuid kept), only netconnect's owner keys added;
/// nothing is inserted; a second pass writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_nb_written_from_ovn_kubernetes_vectors_is_adopted_in_place_column_for_column() {
    let sb = sandbox();
    let (r, _events) = udn::reconciler(&sb.nb.unix_remote()).await;
    let theirs = ovn_kubernetes_nb(&r).await;
    let adopt = Settings {
        adopt: true,
        ..Default::default()
    };
    let world = world("", adopt);
    assert_eq!(
        audit(&r, &world),
        Vec::<String>::new(),
        "what differs from OVN-Kubernetes' rows"
    );

    udn::apply(&r, &world).await;
    let after = all_rows(&r);
    for (key, before) in &theirs {
        let now = after
            .get(key)
            .unwrap_or_else(|| panic!("{key:?} deleted or recreated"));
        assert_eq!(
            stamps_off(now),
            stamps_off(before),
            "{key:?} changed beyond its owner keys"
        );
        // Every row of the networks' is netconnect's now: stamped with an owner (but
        // the rows of tables without `external_ids`, netconnect's by their names). The
        // default COPP and its meters are the default network's, whose controller still
        // runs: used where they are, never taken.
        let shared = ["Copp", "Meter", "Meter_Band"].contains(&key.0.as_str());
        if let Some(ids) = now.get("external_ids").filter(|_| !shared) {
            assert!(
                ids.get_str("k8s.ovn.org/owner-type").is_some(),
                "{key:?} not adopted: {now:?}"
            );
        }
    }
    assert_eq!(after.len(), theirs.len(), "no row inserted");
    for o in udn::apply(&r, &world).await {
        let plan = o.result.as_ref().unwrap();
        assert!(plan.is_empty(), "{}: {}", o.key, plan);
    }
}

/// The audit names each drift made by hand over the fixture (a column changed, a row
/// deleted, a row netconnect would not write added), and nothing else; it writes
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audit_of_the_vectors_rows_names_each_drift_and_nothing_else() {
    let sb = sandbox();
    let (r, _events) = udn::reconciler(&sb.nb.unix_remote()).await;
    ovn_kubernetes_nb(&r).await;
    let (blue, green) = ("cluster_udn_blue_", "cluster_udn_green_");
    let gone = format!(
        "inport == \"rtos-{green}node-a\" && ip4.dst == 192.168.126.202 /* {green}node-a */"
    );
    for cmd in [
        vec![
            "set",
            "Logical_Router_Port",
            &format!("rtos-{blue}node-a"),
            "mac=\"0a:58:00:00:00:99\"",
        ],
        vec![
            "lr-policy-del",
            &format!("{green}ovn_cluster_router"),
            "1004",
            &gone,
        ],
        vec![
            "lr-policy-add",
            &format!("{blue}ovn_cluster_router"),
            "1234",
            "ip4.src == 1.2.3.4",
            "allow",
        ],
    ] {
        sb.nbctl(&cmd).unwrap();
    }
    r.cache()
        .wait_for(std::time::Duration::from_secs(10), |s| {
            s.table("Logical_Router_Policy").iter().any(|(_, row)| {
                row.get("priority").and_then(|d| d.as_scalar()) == Some(&1234.into())
            })
        })
        .await;
    let before = all_rows(&r);
    let adopt = Settings {
        adopt: true,
        ..Default::default()
    };
    let mut lines = audit(&r, &world("", adopt));
    lines.sort();
    let mut want = vec![
        format!("insert Logical_Router_Policy {green}ovn_cluster_router|1004|{gone}"),
        format!(
            "not written Logical_Router_Policy {blue}ovn_cluster_router|1234|ip4.src == 1.2.3.4"
        ),
        format!("update Logical_Router {green}ovn_cluster_router: external_ids, policies"),
        format!("update Logical_Router_Port rtos-{blue}node-a: external_ids, mac"),
    ];
    want.sort();
    assert_eq!(lines, want);
    assert_eq!(all_rows(&r).len(), before.len(), "nothing written");
}

/// A running netconnectd, killed when dropped (a test that fails leaves no daemon).
struct Daemon(std::process::Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET path` on `addr`: the status code.
fn status_of(addr: &str, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.split_whitespace().nth(1)?.parse().ok()
}

/// Beside OVN-Kubernetes (`--manage connects`), netconnectd adds a ClusterNetworkConnect
/// over the vectors' three networks: `/readyz` 200 once it converged, exit 0 on
/// SIGTERM; every row of OVN-Kubernetes' is where it was with its columns as they were
/// but for elements added to its sets; a second pass writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_beside_the_vectors_rows_adds_only_its_rows_and_set_elements() {
    let sb = sandbox();
    let (r, _events) = udn::reconciler(&sb.nb.unix_remote()).await;
    let theirs = ovn_kubernetes_nb(&r).await;
    let cnc = "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterNetworkConnect\nmetadata: {name: colored}\n\
        spec:\n  networkSelectors:\n  - networkSelectionType: ClusterUserDefinedNetworks\n    clusterUserDefinedNetworkSelector: {networkSelector: {matchLabels: {connect: colored}}}\n\
        \x20 connectSubnets: [{cidr: 192.168.0.0/16, networkPrefix: 24}]\n  connectivity: [PodNetwork, ServiceNetwork]\n";
    let (m, s) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(m.path().join("all.yaml"), manifests() + cnc).unwrap();
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let mut d = Daemon(
        std::process::Command::new(integration_tests::binary("netconnectd"))
            .args(["--nb", &sb.nb.unix_remote(), "--zone", NODE.name])
            .args(["--manage", "connects", "--listen", &addr, "--manifests"])
            .arg(m.path())
            .arg("--status-dir")
            .arg(s.path())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let start = std::time::Instant::now();
    while status_of(&addr, "/readyz") != Some(200) {
        assert!(start.elapsed().as_secs() < 30, "/readyz never 200");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // The command's own pass over it: nothing to do, exit 0.
    let once = std::process::Command::new(integration_tests::binary("netconnectd"))
        .args(["--nb", &sb.nb.unix_remote(), "--zone", NODE.name])
        .args(["--manage", "connects", "--once", "--manifests"])
        .arg(m.path())
        .arg("--status-dir")
        .arg(s.path())
        .output()
        .unwrap();
    assert_eq!(
        once.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&once.stderr)
    );
    let pid = d.0.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    assert_eq!(d.0.wait().unwrap().code(), Some(0));

    let after = all_rows(&r);
    let sets = [
        "ports",
        "policies",
        "static_routes",
        "load_balancer_group",
        "acls",
    ];
    udn::assert_kept_but_set_elements(&theirs, &after, &sets);
    assert!(after.len() > theirs.len() + 10, "the connect's rows");
    let connects = Settings {
        manage: netconnect::world::Manage::Connects,
        ..Default::default()
    };
    for o in udn::apply(&r, &world(cnc, connects)).await {
        let plan = o.result.as_ref().unwrap();
        assert!(plan.is_empty(), "{}: {}", o.key, plan);
    }
}
