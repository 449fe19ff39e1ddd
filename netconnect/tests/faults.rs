//! netconnectd under faults, against real servers: killed mid-reconcile and restarted,
//! its NB server restarted or replaced by an empty database, the NB raft leader killed
//! and leadership moved while a large ClusterNetworkConnect is programmed, the leader
//! (a container) cut off the network in the same place, two daemons
//! for two zones over one manifest directory, and manifests that move, vanish, come
//! back or arrive a thousand at once. Each run's NB is compared with what an
//! undisturbed `netconnectd --once` writes from the same inputs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ovn_sandbox::{Cluster, ContainerCluster, Installation, OvsdbServer, Sandbox, ServerOptions};

mod common;
use common::{netconnectd, wait_until, Daemon};

/// The NB's rows of the tables netconnect writes, each row as JSON with its uuid,
/// version, the columns OVN's daemons write and every reference left out, sorted: two
/// NBs holding the same rows compare equal whatever their uuids.
fn contents(remote: &str) -> BTreeMap<String, Vec<String>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (c, _) = ovsdb_proto::connect(remote).await.unwrap();
        let tables = netconnect::reconcile::nb::TABLES;
        let ops: Vec<ovsdb_proto::Operation> = tables
            .iter()
            .map(|t| ovsdb_proto::Operation::select(*t, vec![]))
            .collect();
        let results = c.transact("OVN_Northbound", &ops).await.unwrap();
        let uuid = regex_lite_uuid();
        tables
            .iter()
            .zip(results)
            .map(|(t, r)| {
                let mut rows: Vec<String> = r
                    .rows()
                    .unwrap()
                    .iter()
                    .map(|row| {
                        let mut row = row.clone();
                        row.remove("_uuid");
                        row.remove("_version");
                        for c in netconnect::reconcile::left::WRITTEN_BY_OVN {
                            row.remove(*c);
                        }
                        uuid(&serde_json::to_string(&row).unwrap())
                    })
                    .collect();
                rows.sort();
                (t.to_string(), rows)
            })
            .collect()
    })
}

/// Replaces every `["uuid","…"]` of a JSON text by `["uuid"]`.
fn regex_lite_uuid() -> impl Fn(&str) -> String {
    |s: &str| {
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        while let Some(at) = rest.find("[\"uuid\",\"") {
            out.push_str(&rest[..at]);
            out.push_str("[\"uuid\"]");
            let after = &rest[at + 9..];
            let end = after.find("\"]").map(|e| e + 2).unwrap_or(after.len());
            rest = &after[end..];
        }
        out.push_str(rest);
        out
    }
}

fn count(c: &BTreeMap<String, Vec<String>>) -> usize {
    c.values().map(Vec::len).sum()
}

/// What an undisturbed `netconnectd --once` writes into an empty NB from `manifests`
/// and a copy of the allocations in `status`.
fn reference(manifests: &Path, status: &Path, extra: &[&str]) -> BTreeMap<String, Vec<String>> {
    let install = Installation::recent().unwrap();
    let nb = OvsdbServer::start(&install, &ServerOptions::default()).unwrap();
    let copy = tempfile::tempdir().unwrap();
    copy_dir(status, copy.path());
    let out = Command::new(netconnectd())
        .args(["--nb", &nb.unix_remote(), "--manifests"])
        .arg(manifests)
        .arg("--status-dir")
        .arg(copy.path())
        .arg("--once")
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    contents(&nb.unix_remote())
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        let t = to.join(e.file_name());
        if p.is_dir() {
            std::fs::create_dir_all(&t).unwrap();
            copy_dir(&p, &t);
        } else {
            std::fs::copy(&p, &t).unwrap();
        }
    }
}

/// The allocation annotations of every object in a status directory.
fn allocations(status: &Path) -> BTreeMap<String, BTreeMap<String, String>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "yaml") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(status, &mut files);
    files
        .into_iter()
        .map(|f| {
            let v: serde_json::Value =
                serde_yaml_ng::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
            let a: BTreeMap<String, String> = v["metadata"]["annotations"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter(|(k, _)| {
                            netconnect::api::annotations::ALLOCATIONS.contains(&k.as_str())
                        })
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                        .collect()
                })
                .unwrap_or_default();
            (f.strip_prefix(status).unwrap().display().to_string(), a)
        })
        .collect()
}

/// `n` Layer3 networks labelled for the connect, `nodes` nodes, and a connect joining
/// them all.
fn manifests(dir: &Path, n: usize, nodes: usize) {
    let mut s = String::new();
    for i in 0..n {
        s.push_str(&format!(
            "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {{name: net{i:03}, labels: {{c: \"yes\"}}}}\n\
             spec:\n  namespaceSelector: {{matchLabels: {{net: net{i:03}}}}}\n  network: {{topology: Layer3, layer3: {{role: Primary, subnets: [{{cidr: 10.{i}.0.0/16, hostSubnet: 24}}]}}}}\n"
        ));
    }
    std::fs::write(dir.join("networks.yaml"), s).unwrap();
    let mut s = String::new();
    for i in 0..nodes {
        s.push_str(&format!(
            "---\napiVersion: v1\nkind: Node\nmetadata: {{name: node{i}, annotations: {{k8s.ovn.org/node-chassis-id: ch{i}}}}}\n"
        ));
    }
    std::fs::write(dir.join("nodes.yaml"), s).unwrap();
    std::fs::write(
        dir.join("connect.yaml"),
        "apiVersion: k8s.ovn.org/v1\nkind: ClusterNetworkConnect\nmetadata: {name: all}\n\
         spec:\n  networkSelectors: [{networkSelectionType: ClusterUserDefinedNetworks, clusterUserDefinedNetworkSelector: {networkSelector: {matchLabels: {c: \"yes\"}}}}]\n\
         \x20 connectSubnets: [{cidr: 192.168.0.0/16, networkPrefix: 24}]\n  connectivity: [PodNetwork]\n",
    )
    .unwrap();
}

#[test]
fn killed_mid_reconcile_and_restarted_it_converges_with_the_same_allocations_and_rows() {
    let sb = Sandbox::start().unwrap();
    let nb = sb.nb.unix_remote();
    let m = tempfile::tempdir().unwrap();
    let s = tempfile::tempdir().unwrap();
    manifests(m.path(), 40, 4);
    let mut d = Daemon::start(&nb, m.path(), s.path(), &[]);
    // Killed once some of the rows are in, before all of them are.
    wait_until("the first rows", 30, || {
        sb.nbctl(&["--bare", "--columns=name", "list", "Logical_Router"])
            .is_ok_and(|o| o.lines().filter(|l| !l.is_empty()).count() > 3)
    });
    d.kill();
    let partial = count(&contents(&nb));
    let before = allocations(s.path());
    let d = Daemon::start(&nb, m.path(), s.path(), &[]);
    d.wait_converged(120);
    assert_eq!(
        allocations(s.path()),
        before,
        "allocations unchanged by the restart"
    );
    let got = contents(&nb);
    let want = reference(m.path(), s.path(), &[]);
    assert!(
        count(&want) > partial,
        "the kill came before the end ({partial} rows)"
    );
    assert_eq!(
        got, want,
        "same rows as an undisturbed run: none duplicated, none leaked"
    );
}

#[test]
fn an_nb_restarted_or_replaced_by_an_empty_database_is_rebuilt() {
    let mut sb = Sandbox::start().unwrap();
    let nb = sb.nb.unix_remote();
    let m = tempfile::tempdir().unwrap();
    let s = tempfile::tempdir().unwrap();
    manifests(m.path(), 5, 3);
    let d = Daemon::start(&nb, m.path(), s.path(), &[]);
    d.wait_converged(60);
    let want = contents(&nb);
    sb.nb.restart().unwrap();
    d.wait_converged(60);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        contents(&nb),
        want,
        "a restart with its database changes nothing"
    );
    sb.nb.replace_database().unwrap();
    wait_until("the rows to be rebuilt", 60, || contents(&nb) == want);
}

#[test]
fn the_raft_leader_killed_and_leadership_moved_while_a_connect_is_programmed() {
    let install = Installation::recent().unwrap();
    let mut cluster = Cluster::start(&install, 3, None).unwrap();
    let remotes = cluster.remotes();
    let m = tempfile::tempdir().unwrap();
    let s = tempfile::tempdir().unwrap();
    manifests(m.path(), 40, 6);
    let d = Daemon::start(&remotes, m.path(), s.path(), &[]);
    let leader = cluster.leader().unwrap();
    let probe = cluster.members[(leader + 1) % 3].tcp_remote();
    wait_until("the first rows", 60, || count(&contents(&probe)) > 50);
    cluster.members[leader].kill();
    // Leadership moves again among the two left, while the daemon goes on.
    wait_until("a new leader", 30, || cluster.leader().is_some());
    let next = cluster.leader().unwrap();
    cluster.members[next]
        .appctl(&["cluster/failure-test", "transfer-leadership"])
        .unwrap();
    d.wait_converged(180);
    let probe = cluster.members[cluster.leader().unwrap()].tcp_remote();
    let got = contents(&probe);
    let want = reference(m.path(), s.path(), &[]);
    assert_eq!(
        got, want,
        "same rows as an undisturbed run: no duplicate from an unknown outcome"
    );
}

#[test]
fn the_nb_leader_cut_off_the_network_while_a_connect_is_programmed() {
    // Members in containers, each with its own address: the leader can be cut off
    // (no reset, no close: its connections go silent) rather than killed.
    let install = Installation::recent().unwrap();
    let cluster = ContainerCluster::start(&install, 3).unwrap();
    let m = tempfile::tempdir().unwrap();
    let s = tempfile::tempdir().unwrap();
    manifests(m.path(), 40, 6);
    let d = Daemon::start(&cluster.remotes(), m.path(), s.path(), &[]);
    let leader = cluster.leader().unwrap();
    let others: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let probe = cluster.tcp_remote(others[0]);
    wait_until("the first rows", 60, || count(&contents(&probe)) > 50);
    let cut = Instant::now();
    cluster.cut_off(leader).unwrap();
    d.wait_converged(180);
    let converged = cut.elapsed();
    let new_leader = cluster.wait_leader_among(&others).unwrap();
    let got = contents(&cluster.tcp_remote(new_leader));
    let want = reference(m.path(), s.path(), &[]);
    assert_eq!(
        got, want,
        "same rows as an undisturbed run: none lost, none written twice"
    );
    // Healed, the old leader holds the same rows.
    cluster.heal(leader).unwrap();
    cluster.wait_connected().unwrap();
    let old = cluster.tcp_remote(leader);
    wait_until("the healed member to catch up", 30, || {
        contents(&old) == want
    });
    eprintln!(
        "leader {leader} cut off mid-connect: converged {converged:?} after the cut, {} rows",
        count(&want)
    );
}

#[test]
fn two_daemons_for_two_zones_over_one_manifest_directory_agree_on_every_allocation() {
    let a = Sandbox::start().unwrap();
    let b = Sandbox::start().unwrap();
    let m = tempfile::tempdir().unwrap();
    manifests(m.path(), 6, 2);
    // node0 and node1 are their own zones (their names).
    let (sa, sb_) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let da = Daemon::start(
        &a.nb.unix_remote(),
        m.path(),
        sa.path(),
        &["--zone", "node0"],
    );
    let db = Daemon::start(
        &b.nb.unix_remote(),
        m.path(),
        sb_.path(),
        &["--zone", "node1"],
    );
    da.wait_converged(60);
    db.wait_converged(60);
    let (x, y) = (allocations(sa.path()), allocations(sb_.path()));
    assert!(x
        .values()
        .any(|a| a.contains_key("k8s.ovn.org/network-connect-subnet")));
    assert_eq!(x, y);
}

#[test]
fn manifests_moved_deleted_recreated_and_a_thousand_at_once() {
    let sb = Sandbox::start().unwrap();
    let nb = sb.nb.unix_remote();
    let m = tempfile::tempdir().unwrap();
    let s = tempfile::tempdir().unwrap();
    manifests(m.path(), 3, 2);
    let d = Daemon::start(&nb, m.path(), s.path(), &[]);
    d.wait_converged(60);
    let router_uuid = || {
        sb.nbctl(&[
            "--bare",
            "--columns=_uuid",
            "find",
            "Logical_Router",
            "name=cluster_udn_net001_ovn_cluster_router",
        ])
        .unwrap()
        .trim()
        .to_owned()
    };
    let before = router_uuid();

    // net001 moved to its own file (added there first, then taken out of the other):
    // its rows are never deleted.
    let all = std::fs::read_to_string(m.path().join("networks.yaml")).unwrap();
    let docs: Vec<&str> = all.split("---\n").filter(|d| !d.is_empty()).collect();
    std::fs::write(m.path().join("moved.yaml"), docs[1]).unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let rest: String = docs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 1)
        .map(|(_, d)| format!("---\n{d}"))
        .collect();
    std::fs::write(m.path().join("networks.yaml"), rest).unwrap();
    d.wait_converged(30);
    assert_eq!(router_uuid(), before, "a moved object keeps its rows");

    // A file deleted and created again: its objects go and come back.
    std::fs::remove_file(m.path().join("moved.yaml")).unwrap();
    wait_until("net001 to go", 10, || router_uuid().is_empty());
    std::fs::write(m.path().join("moved.yaml"), docs[1]).unwrap();
    wait_until("net001 to come back", 10, || !router_uuid().is_empty());

    // A thousand objects at once.
    let mut s1000 = String::new();
    for i in 0..1000 {
        s1000.push_str(&format!("---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: ns{i}, labels: {{team: t{}}}}}\n", i % 10));
    }
    for i in 0..20 {
        s1000.push_str(&format!(
            "---\napiVersion: k8s.ovn.org/v1\nkind: UserDefinedNetwork\nmetadata: {{name: l2, namespace: ns{i}}}\n\
             spec: {{topology: Layer2, layer2: {{role: Primary, subnets: [10.{}.0.0/16]}}}}\n",
            100 + i
        ));
    }
    std::fs::write(m.path().join("many.yaml"), s1000).unwrap();
    wait_until("the twenty Layer2 networks", 60, || {
        sb.nbctl(&["--bare", "--columns=name", "list", "Logical_Switch"])
            .is_ok_and(|o| {
                o.lines()
                    .filter(|l| l.ends_with("_ovn_layer2_switch"))
                    .count()
                    == 20
            })
    });
    d.wait_converged(60);
    assert_eq!(contents(&nb), reference(m.path(), s.path(), &[]));
}

/// Stops every member of `cluster`, runs `f` on each member's database file, and
/// starts them again; waits for a leader.
fn with_cluster_stopped(cluster: &mut Cluster, f: impl Fn(&Path)) {
    for m in &mut cluster.members {
        m.stop();
    }
    for m in &cluster.members {
        f(&m.installation().host_path(m.db_path()));
    }
    for m in &mut cluster.members {
        m.restart().unwrap();
    }
    wait_until("a leader after the restart", 60, || {
        cluster.leader().is_some()
    });
}

#[test]
fn a_raft_cluster_restored_from_its_files_gets_the_daemons_rows_back() {
    // Every member's files backed up, the daemon writes a network more, every member
    // restored from its backup (the same cluster, a lower raft index): the daemon says
    // so, takes what the servers have (by default) and puts the network's rows back.
    // (It kept its stale cache for good before: the rows never came back.)
    let install = Installation::recent().unwrap();
    let mut cluster = Cluster::start(&install, 3, None).unwrap();
    let remotes = cluster.remotes();
    let m = tempfile::tempdir().unwrap();
    let s = tempfile::tempdir().unwrap();
    manifests(m.path(), 2, 2);
    let log = s.path().join("daemon.log");
    let d = Daemon::start_logging(
        &remotes,
        m.path(),
        s.path(),
        &["--behind-limit", "2"],
        Some(&log),
    );
    d.wait_converged(60);
    with_cluster_stopped(&mut cluster, |db| {
        std::fs::copy(db, db.with_extension("backup")).unwrap();
    });
    let probe = |c: &Cluster| c.members[c.leader().unwrap_or(0)].tcp_remote();
    let has_net2 = |c: &BTreeMap<String, Vec<String>>| {
        c["Logical_Switch"]
            .iter()
            .any(|r| r.contains("cluster_udn_net002"))
    };
    manifests(m.path(), 3, 2);
    wait_until("net002 written", 60, || {
        has_net2(&contents(&probe(&cluster)))
    });
    d.wait_converged(60);

    with_cluster_stopped(&mut cluster, |db| {
        std::fs::copy(db.with_extension("backup"), db).unwrap();
    });
    assert!(
        !has_net2(&contents(&probe(&cluster))),
        "restored without net002"
    );
    wait_until("net002's rows back", 120, || {
        has_net2(&contents(&probe(&cluster)))
    });
    d.wait_converged(60);
    let want = reference(m.path(), s.path(), &[]);
    assert_eq!(
        contents(&probe(&cluster)),
        want,
        "the rows of an undisturbed run"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("every NB server is behind what this daemon saw"),
        "{text}"
    );
    let (_, status) = common::get(&d.addr, "/status").unwrap();
    assert!(status.contains("\"nbBehind\":\""), "{status}");
}

/// The first value of metric `name` in `text`.
fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
}

#[test]
fn killed_during_a_500_node_networks_transaction_it_converges_and_touches_no_one_elses_row() {
    // One network on 500 nodes: its key's one transaction holds thousands of rows.
    // SIGKILL while that key is being reconciled: the NB holds all of the network's
    // rows or none (a transaction is atomic); restarted, the daemon converges to what
    // an undisturbed run writes (no row twice, none missing), and another party's rows
    // are as they were.
    let sb = Sandbox::start().unwrap();
    let nb = sb.nb.unix_remote();
    sb.nbctl(&[
        "ls-add",
        "theirs",
        "--",
        "set",
        "Logical_Switch",
        "theirs",
        "external_ids:owner=someone",
        "--",
        "pg-add",
        "theirs_pg",
    ])
    .unwrap();
    let theirs = || {
        (
            sb.nbctl(&["list", "Logical_Switch", "theirs"]).unwrap(),
            sb.nbctl(&["list", "Port_Group", "theirs_pg"]).unwrap(),
        )
    };
    let before = theirs();
    let m = tempfile::tempdir().unwrap();
    let s = tempfile::tempdir().unwrap();
    let mut text = String::from(
        "apiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {name: big}\n\
         spec:\n  namespaceSelector: {}\n  network: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 172.16.0.0/12, hostSubnet: 24}]}}\n",
    );
    for i in 0..500 {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Node\nmetadata: {{name: node{i:03}, annotations: {{k8s.ovn.org/node-chassis-id: ch{i}}}}}\n"
        ));
    }
    std::fs::write(m.path().join("big.yaml"), text).unwrap();
    let mut d = Daemon::start(&nb, m.path(), s.path(), &[]);
    // Killed while a key's reconcile is in flight, well into it.
    wait_until("the network's reconcile under way", 120, || {
        common::get(&d.addr, "/metrics").is_some_and(|(_, t)| {
            metric(&t, "netconnect_queue_running").is_some_and(|n| n >= 1.0)
                && metric(&t, "netconnect_oldest_running_seconds").is_some_and(|s| s > 0.3)
        })
    });
    d.kill();
    let switches = || {
        sb.nbctl(&["--bare", "--columns=name", "list", "Logical_Switch"])
            .unwrap()
            .split_whitespace()
            .filter(|n| n.starts_with("cluster_udn_big_node"))
            .count()
    };
    let at_kill = switches();
    assert!(
        at_kill == 0 || at_kill >= 500,
        "{at_kill} of the network's switches: a transaction cut in two"
    );
    let d = Daemon::start(&nb, m.path(), s.path(), &[]);
    d.wait_converged(300);
    let without_theirs = |c: BTreeMap<String, Vec<String>>| -> BTreeMap<String, Vec<String>> {
        c.into_iter()
            .map(|(t, rows)| {
                let rows = rows.into_iter().filter(|r| !r.contains("theirs")).collect();
                (t, rows)
            })
            .collect()
    };
    let got = without_theirs(contents(&nb));
    let want = without_theirs(reference(m.path(), s.path(), &[]));
    assert_eq!(
        got, want,
        "the rows of an undisturbed run, none twice, none missing"
    );
    assert_eq!(theirs(), before, "another party's rows untouched");
    eprintln!("killed with {at_kill} of the network's switches in; converged after the restart");
}
