//! The `netconnectd` command: `--once` and `--plan` against a real NB, with good and
//! bad manifests.

use std::path::Path;
use std::process::{Command, Output};

use ovn_sandbox::Sandbox;

mod common;
use common::{get, netconnectd, wait_until, Daemon};

fn sandbox() -> Sandbox {
    Sandbox::start().unwrap_or_else(|e| panic!("cannot start the OVN sandbox: {e}"))
}

fn run(nb: &str, manifests: &Path, status: &Path, extra: &[&str]) -> Output {
    Command::new(netconnectd())
        .args(["--nb", nb, "--manifests"])
        .arg(manifests)
        .arg("--status-dir")
        .arg(status)
        .args(extra)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const GOOD: &str = r#"apiVersion: k8s.ovn.org/v1
kind: ClusterUserDefinedNetwork
metadata: {name: blue}
spec:
  namespaceSelector: {matchLabels: {tenant: blue}}
  network:
    topology: Layer3
    layer3: {role: Primary, subnets: [{cidr: 10.10.0.0/16}]}
"#;

const BAD: &str = r#"apiVersion: v1
kind: Namespace
metadata: {name: red}
---
apiVersion: k8s.ovn.org/v1
kind: UserDefinedNetwork
metadata: {name: net1, namespace: red}
spec:
  topology: Layer3
  layer3: {role: Primary, subnets: [{cidr: 10.1.0.0/17}, {cidr: 10.1.0.0/16}]}
"#;

const NODES: &str = r#"apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1, annotations: {k8s.ovn.org/node-chassis-id: c1}}}
- {apiVersion: v1, kind: Node, metadata: {name: n2, annotations: {k8s.ovn.org/node-chassis-id: c2}}}
"#;

#[test]
fn once_applies_the_good_objects_reports_the_bad_and_converges() {
    let sb = sandbox();
    let nb = sb.nb.unix_remote();
    let m = tempfile::tempdir().unwrap();
    let s = tempfile::tempdir().unwrap();
    // A field misspelt (`mtuu`): warned of with file, object and field, as kubectl
    // --validate would, and otherwise ignored.
    let typo = GOOD.replace(
        "layer3: {role: Primary,",
        "layer3: {mtuu: 1400, role: Primary,",
    );
    assert_ne!(typo, GOOD);
    std::fs::write(m.path().join("blue.yaml"), typo).unwrap();
    std::fs::write(m.path().join("udn.yaml"), BAD).unwrap();
    std::fs::write(m.path().join("nodes.yml"), NODES).unwrap();
    std::fs::write(m.path().join("README.txt"), "not a manifest").unwrap();

    let out = run(&nb, m.path(), s.path(), &["--once"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        stderr.contains("warning: blue.yaml doc 1: ClusterUserDefinedNetwork blue: spec.network.layer3.mtuu: unknown field, ignored"),
        "{stderr}"
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "a bad object makes --once fail:\n{stdout}{stderr}"
    );
    assert!(
        stderr.contains("udn.yaml doc 2: UserDefinedNetwork red/net1: spec.layer3.subnets[1]: Subnets must not overlap or contain each other: 10.1.0.0/16 overlaps 10.1.0.0/17"),
        "{stderr}"
    );
    assert!(stdout.contains("cluster: +13 ~0 -0"), "{stdout}");
    assert!(stdout.contains("network cluster_udn_blue: +"), "{stdout}");
    assert!(sb
        .nbctl(&["ls-list"])
        .unwrap()
        .contains("cluster_udn_blue_n2"));
    assert!(s.path().join("Node/n1.yaml").exists());
    let blue =
        std::fs::read_to_string(s.path().join("ClusterUserDefinedNetwork/blue.yaml")).unwrap();
    assert!(blue.contains("k8s.ovn.org/network-id: '1'"), "{blue}");
    assert!(
        blue.contains("type: NetworkCreated\n    status: 'True'\n    reason: NetworkAccepted"),
        "{blue}"
    );
    // The refused network is written as read, with why.
    let red = std::fs::read_to_string(s.path().join("UserDefinedNetwork/red/net1.yaml")).unwrap();
    assert!(
        red.contains("status: 'False'\n    reason: SyncError\n    message: 'spec.layer3.subnets[1]: Subnets must not overlap"),
        "{red}"
    );
    assert!(!red.contains("k8s.ovn.org/network-id"), "{red}");

    // Fixed: exit 0, and what was written before is unchanged.
    std::fs::write(
        m.path().join("udn.yaml"),
        BAD.replace("10.1.0.0/17", "10.2.0.0/16"),
    )
    .unwrap();
    let out = run(&nb, m.path(), s.path(), &["--once"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("network cluster_udn_blue: unchanged"),
        "{stdout}"
    );
    assert!(stdout.contains("network red_net1: +"), "{stdout}");
    let red = std::fs::read_to_string(s.path().join("UserDefinedNetwork/red/net1.yaml")).unwrap();
    assert!(red.contains("reason: NetworkAccepted"), "{red}");

    // --plan shows what removing a network would do, and writes nothing.
    std::fs::remove_file(m.path().join("blue.yaml")).unwrap();
    let before = sb.nbctl(&["show"]).unwrap();
    let out = run(&nb, m.path(), s.path(), &["--plan"]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(
            "gone cluster_udn_blue-network-controller:ClusterUserDefinedNetwork:blue: +0 ~0 -"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("  delete Logical_Router cluster_udn_blue_ovn_cluster_router"),
        "{stdout}"
    );
    assert!(stdout.contains("network red_net1: unchanged"), "{stdout}");
    assert_eq!(
        sb.nbctl(&["show"]).unwrap(),
        before,
        "--plan wrote something"
    );
    assert!(
        s.path()
            .join("ClusterUserDefinedNetwork/blue.yaml")
            .exists(),
        "--plan leaves the status dir alone"
    );

    // --once removes it.
    let out = run(&nb, m.path(), s.path(), &["--once"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(!sb.nbctl(&["ls-list"]).unwrap().contains("cluster_udn_blue"));
    assert!(!s
        .path()
        .join("ClusterUserDefinedNetwork/blue.yaml")
        .exists());
}

#[test]
fn an_unreachable_nb_is_a_clear_error() {
    let m = tempfile::tempdir().unwrap();
    let s = tempfile::tempdir().unwrap();
    let out = run(
        "tcp:127.0.0.1:1",
        m.path(),
        s.path(),
        &["--once", "--timeout", "1"],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("no usable Northbound server at tcp:127.0.0.1:1: ")
            && stderr.contains("tcp:127.0.0.1:1: ")
            && stderr.to_lowercase().contains("refused"),
        "the server and why it was unusable: {stderr}"
    );
    // ssl: without a CA is refused at once, before any connection.
    let t = std::time::Instant::now();
    let out = run("ssl:127.0.0.1:1", m.path(), s.path(), &["--once"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--nb ssl:127.0.0.1:1: an ssl: remote needs --ca-cert"),
        "{}",
        text(&out.stderr)
    );
    assert!(t.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn the_southbound_instead_of_the_northbound_says_so() {
    let sb = sandbox();
    let m = tempfile::tempdir().unwrap();
    let s = tempfile::tempdir().unwrap();
    let out = run(
        &sb.sb.unix_remote(),
        m.path(),
        s.path(),
        &["--once", "--timeout", "2"],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("no usable Northbound server at") && stderr.contains("OVN_Northbound"),
        "{stderr}"
    );
}

const CONNECTED: &str = r#"apiVersion: k8s.ovn.org/v1
kind: ClusterUserDefinedNetwork
metadata: {name: blue, labels: {c: "yes"}}
spec:
  namespaceSelector: {}
  network: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 103.103.0.0/16}]}}
---
apiVersion: k8s.ovn.org/v1
kind: ClusterUserDefinedNetwork
metadata: {name: green, labels: {c: "yes"}}
spec:
  namespaceSelector: {}
  network: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 104.104.0.0/16}]}}
---
apiVersion: k8s.ovn.org/v1
kind: ClusterNetworkConnect
metadata: {name: ok}
spec:
  networkSelectors: [{networkSelectionType: ClusterUserDefinedNetworks, clusterUserDefinedNetworkSelector: {networkSelector: {matchLabels: {c: "yes"}}}}]
  connectSubnets: [{cidr: 192.168.0.0/16, networkPrefix: 24}]
  connectivity: [PodNetwork]
---
apiVersion: k8s.ovn.org/v1
kind: ClusterNetworkConnect
metadata: {name: lonely}
spec:
  networkSelectors: [{networkSelectionType: ClusterUserDefinedNetworks, clusterUserDefinedNetworkSelector: {networkSelector: {matchLabels: {c: "nobody"}}}}]
  connectSubnets: [{cidr: 192.169.0.0/16, networkPrefix: 24}]
  connectivity: [PodNetwork]
"#;

/// The status document of connect `name` in the status dir.
fn connect_status(dir: &Path, name: &str) -> serde_json::Value {
    let text =
        std::fs::read_to_string(dir.join(format!("ClusterNetworkConnect/{name}.yaml"))).unwrap();
    let v: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
    v["status"].clone()
}

#[allow(clippy::too_many_lines)] // a test: one story, start to end
#[test]
fn connect_status_reports_acceptance_and_each_zone_as_the_okep_shows_it() {
    let sb = sandbox();
    let nb = sb.nb.unix_remote();
    let m = tempfile::tempdir().unwrap();
    let s = tempfile::tempdir().unwrap();
    std::fs::write(m.path().join("nets.yaml"), CONNECTED).unwrap();
    // node-b, a remote node, has no chassis id: zone node-a cannot bind its ports.
    std::fs::write(
        m.path().join("nodes.yaml"),
        "apiVersion: v1\nkind: List\nitems:\n\
         - {apiVersion: v1, kind: Node, metadata: {name: node-a, annotations: {k8s.ovn.org/node-chassis-id: ca}}}\n\
         - {apiVersion: v1, kind: Node, metadata: {name: node-b}}\n",
    )
    .unwrap();
    let out = run(&nb, m.path(), s.path(), &["--once", "--zone", "node-a"]);
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a refused connect makes --once fail"
    );
    assert!(
        stderr.contains("nets.yaml doc 4: ClusterNetworkConnect lonely: spec: not accepted: InsufficientNetworks: No network selected"),
        "{stderr}"
    );

    let ok = connect_status(s.path(), "ok");
    assert_eq!(ok["status"], "Failure", "{ok:#}");
    let conds = ok["conditions"].as_array().unwrap();
    assert_eq!(conds.len(), 2, "{ok:#}");
    assert_eq!(conds[0]["type"], "Accepted");
    assert_eq!(conds[0]["status"], "True");
    assert_eq!(conds[0]["reason"], "ValidationSucceeded");
    assert_eq!(
        conds[0]["message"],
        "All validation checks passed successfully"
    );
    assert_eq!(conds[1]["type"], "Ready-In-Zone-node-a");
    assert_eq!(conds[1]["status"], "False");
    assert_eq!(conds[1]["reason"], "OVNSetupFailed");
    assert!(
        conds[1]["message"]
            .as_str()
            .unwrap()
            .contains("node node-b has no k8s.ovn.org/node-chassis-id"),
        "{ok:#}"
    );
    let accepted_at = conds[0]["lastTransitionTime"].as_str().unwrap().to_owned();
    assert_eq!(
        accepted_at.len(),
        "2026-11-22T21:00:00Z".len(),
        "{accepted_at}"
    );

    // A refused connect writes nothing in the NB.
    let routers = sb
        .nbctl(&["--bare", "--columns=name", "list", "Logical_Router"])
        .unwrap();
    assert!(
        routers.contains("connect_router_ok") && !routers.contains("lonely"),
        "{routers}"
    );
    let lonely = connect_status(s.path(), "lonely");
    assert_eq!(lonely["status"], "Failure");
    let conds = lonely["conditions"].as_array().unwrap();
    assert_eq!(
        conds.len(),
        1,
        "a connect never accepted has no zone condition: {lonely:#}"
    );
    assert_eq!(conds[0]["reason"], "InsufficientNetworks");
    let text = std::fs::read_to_string(s.path().join("ClusterNetworkConnect/lonely.yaml")).unwrap();
    assert!(
        !text.contains("k8s.ovn.org/connect-router-tunnel-key"),
        "{text}"
    );
    let ok_text = std::fs::read_to_string(s.path().join("ClusterNetworkConnect/ok.yaml")).unwrap();
    assert!(
        ok_text.contains("k8s.ovn.org/connect-router-tunnel-key: '16715779'"),
        "{ok_text}"
    );
    assert!(ok_text.contains(r#"k8s.ovn.org/network-connect-subnet: '{"layer3_1":{"ipv4":"192.168.0.0/24"},"layer3_2":{"ipv4":"192.168.1.0/24"}}'"#), "{ok_text}");

    // node-b gets its chassis id: the zone becomes ready, the connect a Success; the
    // Accepted condition keeps its time (no flip).
    std::thread::sleep(std::time::Duration::from_millis(1100));
    std::fs::write(
        m.path().join("nodes.yaml"),
        "apiVersion: v1\nkind: List\nitems:\n\
         - {apiVersion: v1, kind: Node, metadata: {name: node-a, annotations: {k8s.ovn.org/node-chassis-id: ca}}}\n\
         - {apiVersion: v1, kind: Node, metadata: {name: node-b, annotations: {k8s.ovn.org/node-chassis-id: cb}}}\n",
    )
    .unwrap();
    run(&nb, m.path(), s.path(), &["--once", "--zone", "node-a"]);
    let ok = connect_status(s.path(), "ok");
    assert_eq!(ok["status"], "Success", "{ok:#}");
    assert_eq!(
        ok["conditions"][0]["lastTransitionTime"],
        accepted_at.as_str()
    );
    assert_eq!(ok["conditions"][1]["reason"], "OVNSetupSucceeded");
    assert_eq!(
        ok["conditions"][1]["message"],
        "Connect router and all ports created successfully"
    );
    assert_ne!(
        ok["conditions"][1]["lastTransitionTime"],
        accepted_at.as_str(),
        "the zone flipped later"
    );

    // Its events, as kubectl describe would list them: accepted, the zone failing
    // (node-b without its chassis), then succeeding; the refused connect's warning.
    let events = |cnc: &str| -> Vec<(String, String, String, i64)> {
        netconnect::status::events::read(s.path(), cnc)
            .into_iter()
            .map(|e| {
                (
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.message.unwrap_or_default(),
                    i64::from(e.count.unwrap_or_default()),
                )
            })
            .collect()
    };
    let ok_events = events("ok");
    let summary: Vec<(&str, &str)> = ok_events
        .iter()
        .map(|(t, r, _, _)| (t.as_str(), r.as_str()))
        .collect();
    assert_eq!(
        summary,
        [
            ("Normal", "ValidationSucceeded"),
            ("Warning", "OVNSetupFailed"),
            ("Normal", "OVNSetupSucceeded")
        ],
        "{ok_events:#?}"
    );
    assert!(
        ok_events[1].2.starts_with("Ready-In-Zone-node-a: "),
        "{ok_events:#?}"
    );
    let lonely_events = events("lonely");
    assert_eq!(lonely_events.len(), 1, "{lonely_events:#?}");
    assert_eq!(
        (lonely_events[0].0.as_str(), lonely_events[0].1.as_str()),
        ("Warning", "InsufficientNetworks")
    );
}

#[allow(clippy::too_many_lines)] // a test: one story, start to end
#[test]
fn the_daemon_watches_its_manifests_serves_its_endpoints_and_stops_cleanly_on_sigterm() {
    let sb = sandbox();
    let nb = sb.nb.unix_remote();
    let m = tempfile::tempdir().unwrap();
    let s = tempfile::tempdir().unwrap();
    std::fs::write(m.path().join("blue.yaml"), GOOD).unwrap();
    std::fs::write(m.path().join("nodes.yaml"), NODES).unwrap();
    let log = s.path().join("netconnectd.log");
    let mut d = Daemon::start_logging(&nb, m.path(), s.path(), &[], Some(&log));
    let addr = d.addr.clone();
    wait_until("/readyz", 20, || {
        get(&addr, "/readyz").is_some_and(|(c, _)| c == 200)
    });
    assert_eq!(get(&addr, "/healthz").unwrap().0, 200);
    let switches = || {
        sb.nbctl(&["--bare", "--columns=name", "list", "Logical_Switch"])
            .unwrap()
    };
    assert!(switches().contains("cluster_udn_blue_n1"));
    let (_, metrics) = get(&addr, "/metrics").unwrap();
    assert!(
        metrics.contains("netconnect_reconciles_total{kind=\"network\",result=\"written\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("netconnect_cache_connections_total 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("netconnect_objects{kind=\"Network\"} 1"),
        "{metrics}"
    );
    for line in [
        "netconnect_problems{kind=\"UserDefinedNetwork\"} 0",
        "netconnect_problems{kind=\"file\"} 0",
        "netconnect_nb_connected 1",
        "netconnect_queue_running 0",
        &format!(
            "netconnect_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        ),
    ] {
        assert!(metrics.contains(line), "{line}: {metrics}");
    }

    // A new file, saved as editors do (written beside, renamed into place): it is
    // reconciled within a second.
    let red = GOOD
        .replace("name: blue", "name: red")
        .replace("10.10.0.0/16", "10.20.0.0/16");
    std::fs::write(m.path().join(".red.yaml.tmp"), &red).unwrap();
    let t = std::time::Instant::now();
    std::fs::rename(m.path().join(".red.yaml.tmp"), m.path().join("red.yaml")).unwrap();
    wait_until("red's switches", 5, || {
        switches().contains("cluster_udn_red_n1")
    });
    assert!(
        t.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        t.elapsed()
    );

    // Half written: reported, and red's objects are kept (its rows stay).
    std::fs::write(m.path().join("red.yaml"), &red[..red.len() - 25]).unwrap();
    wait_until("the problem in /status", 5, || {
        get(&addr, "/status")
            .is_some_and(|(_, b)| b.contains("the objects it held before are kept"))
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        switches().contains("cluster_udn_red_n1"),
        "a broken file is not a deletion"
    );
    let (_, metrics) = get(&addr, "/metrics").unwrap();
    assert!(
        metrics.contains("netconnect_problems{kind=\"file\"} 1"),
        "{metrics}"
    );
    let (_, status) = get(&addr, "/status").unwrap();
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["ready"], true);
    assert!(status["keys"]
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k["key"] == "network cluster_udn_red"));

    // Deleted: red goes, from the NB and from /status.
    std::fs::remove_file(m.path().join("red.yaml")).unwrap();
    wait_until("red's rows gone", 5, || {
        !switches().contains("cluster_udn_red")
    });
    wait_until("red's key gone from /status", 5, || {
        get(&addr, "/status").is_some_and(|(_, b)| !b.contains("network cluster_udn_red"))
    });
    let (_, status) = get(&addr, "/status").unwrap();
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    let blue = status["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["key"] == "network cluster_udn_blue")
        .unwrap()
        .clone();
    // Its own transactions only (one, at the start), with when and how long.
    assert_eq!(blue["transactions"], 1, "{blue}");
    assert!(
        blue["lastReconcile"]
            .as_str()
            .is_some_and(|t| t.contains('T')),
        "{blue}"
    );
    assert!(blue["tookSeconds"].as_f64().is_some(), "{blue}");

    // A row of blue's deleted by another party: put back, and the change told in the
    // log (a key's own writes coming back are not, at debug level).
    sb.nbctl(&["ls-del", "cluster_udn_blue_n1"]).unwrap();
    wait_until("blue's switch put back", 5, || {
        switches().contains("cluster_udn_blue_n1")
    });

    // SIGHUP: the manifests read again, the daemon goes on (it died at once before).
    let pid = d.process.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap()
        .success());
    wait_until("SIGHUP's log line", 5, || {
        std::fs::read_to_string(&log)
            .is_ok_and(|l| l.contains("SIGHUP: reading the manifests again"))
    });
    assert!(
        d.process.0.try_wait().unwrap().is_none(),
        "alive after SIGHUP"
    );
    assert_eq!(get(&addr, "/readyz").unwrap().0, 200);

    // SIGTERM: exits 0.
    assert_eq!(d.process.terminate(10).code(), Some(0));

    // Its log, plain text in a file, says how long each key took, and where a write's
    // time went.
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(
        !log.contains('\x1b'),
        "no terminal colours in a file: {log}"
    );
    let line = |what: &str| log.lines().find(|l| l.contains(what)).map(str::to_owned);
    let red = line("reconciled key=network cluster_udn_red ").expect(&log);
    assert!(red.contains(" took="), "{red}");
    let built = line("netconnect::controller: built ").expect(&log);
    assert!(
        built.contains("rows=") && built.contains("took="),
        "{built}"
    );
    // Told with its key, table and row: the first of the rows the switch took with it
    // in one update (its allow-from-node ACL, the ACL table coming first), or the
    // switch itself.
    let unseen: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("row changed: key queued"))
        .collect();
    assert!(
        unseen
            .iter()
            .any(|l| l.contains("key=network cluster_udn_blue")
                && (l.contains("table=ACL ") || l.contains("table=Logical_Switch "))
                && l.contains("uuid=")),
        "{unseen:?}"
    );
    // Red's own rows coming back, ovn-northd setting its ports' `up`, and their
    // deletion by the key of its owner gone were no news to a key.
    assert!(
        !unseen.iter().any(|l| l.contains("cluster_udn_red")),
        "{unseen:?}"
    );
    let applied = line(" applied ").expect(&log);
    for field in [
        "planned=",
        "waited=",
        "transaction=",
        "shown=",
        "remembered=",
    ] {
        assert!(applied.contains(field), "{field}: {applied}");
    }
    // Every owner index is read for owners gone only after a world that lost one (red
    // deleted), not after one that only added (red written).
    let searches: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("gone owners looked for"))
        .collect();
    assert!(
        searches.iter().any(|l| l.contains("lost=false")),
        "{searches:?}"
    );
    assert!(
        searches.iter().any(|l| l.contains("lost=true")),
        "{searches:?}"
    );
}

/// Two services of blue's namespace, `s1` with endpoint `e1`, `s2` with 10.10.0.6.
fn services(e1: &str) -> String {
    let mut y = String::from(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: web, labels: {tenant: blue}}\n",
    );
    for (name, ip, e) in [("s1", "10.96.0.11", e1), ("s2", "10.96.0.12", "10.10.0.6")] {
        y.push_str(&format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: web}}\n\
             spec: {{clusterIP: {ip}, clusterIPs: [{ip}], ports: [{{port: 80, protocol: TCP, targetPort: 8080}}]}}\n\
             ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
             metadata: {{name: {name}-m, namespace: web, labels: {{endpointslice.kubernetes.io/managed-by: endpointslice-mirror-controller.k8s.ovn.org, k8s.ovn.org/service-name: {name}}}, annotations: {{k8s.ovn.org/endpointslice-network: cluster_udn_blue}}}}\n\
             addressType: IPv4\nports: [{{port: 8080, protocol: TCP}}]\nendpoints: [{{addresses: [{e}], conditions: {{ready: true}}}}]\n"
        ));
    }
    y
}

/// The `netconnect_reconciles_total` of keys of `kind`, every result.
fn reconciles(metrics: &str, kind: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("netconnect_reconciles_total{{kind=\"{kind}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn an_endpoint_moved_in_the_manifests_is_written_by_its_service_alone() {
    let sb = sandbox();
    let nb = sb.nb.unix_remote();
    let m = tempfile::tempdir().unwrap();
    let s = tempfile::tempdir().unwrap();
    std::fs::write(m.path().join("blue.yaml"), GOOD).unwrap();
    std::fs::write(m.path().join("nodes.yaml"), NODES).unwrap();
    std::fs::write(m.path().join("services.yaml"), services("10.10.0.5")).unwrap();
    let mut d = Daemon::start(&nb, m.path(), s.path(), &[]);
    d.wait_converged(30);
    let vips = |lb: &str| {
        sb.nbctl(&["--bare", "get", "Load_Balancer", lb, "vips"])
            .unwrap()
            .trim()
            .to_owned()
    };
    let s1 = "cluster_udn_blue_Service_web/s1_TCP_cluster";
    assert_eq!(vips(s1), "{\"10.96.0.11:80\"=\"10.10.0.5:8080\"}");
    let before = get(&d.addr, "/metrics").unwrap().1;

    std::fs::write(m.path().join("services.yaml"), services("10.10.0.7")).unwrap();
    wait_until("s1's new endpoint", 10, || {
        vips(s1) == "{\"10.96.0.11:80\"=\"10.10.0.7:8080\"}"
    });
    d.wait_converged(30);
    let after = get(&d.addr, "/metrics").unwrap().1;
    // Of the services, s1 alone is looked at again; the network not at all (its
    // inputs are the same).
    assert_eq!(
        reconciles(&after, "service") - reconciles(&before, "service"),
        1,
        "{after}"
    );
    assert_eq!(
        reconciles(&after, "network"),
        reconciles(&before, "network"),
        "{after}"
    );
    assert_eq!(d.process.terminate(10).code(), Some(0));
}

/// `count` nodes `n01`, `n02`, … as one List document.
fn nodes(count: usize) -> String {
    let mut s = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for i in 1..=count {
        s.push_str(&format!(
            "- {{apiVersion: v1, kind: Node, metadata: {{name: n{i:02}, annotations: \
             {{k8s.ovn.org/node-chassis-id: c{i}}}}}}}\n"
        ));
    }
    s
}

#[test]
fn a_network_added_to_many_nodes_reaches_their_files_once_quiet_and_before_a_stop() {
    let sb = sandbox();
    let nb = sb.nb.unix_remote();
    let m = tempfile::tempdir().unwrap();
    let s = tempfile::tempdir().unwrap();
    const NODES: usize = 20;
    std::fs::write(m.path().join("nodes.yaml"), nodes(NODES)).unwrap();
    std::fs::write(m.path().join("blue.yaml"), GOOD).unwrap();
    let mut d = Daemon::start(&nb, m.path(), s.path(), &[]);
    let addr = d.addr.clone();
    wait_until("/readyz", 20, || {
        get(&addr, "/readyz").is_some_and(|(c, _)| c == 200)
    });
    let journal = s.path().join(".journal");
    let every_node_lists = |net: &str| {
        (1..=NODES).all(|i| {
            std::fs::read_to_string(s.path().join(format!("Node/n{i:02}.yaml")))
                .is_ok_and(|t| t.contains(net))
        })
    };
    assert!(every_node_lists("cluster_udn_blue"));
    let network = |name: &str, cidr: &str| {
        GOOD.replace("name: blue", &format!("name: {name}"))
            .replace("10.10.0.0/16", cidr)
    };
    let switches = || {
        sb.nbctl(&["--bare", "--columns=name", "list", "Logical_Switch"])
            .unwrap()
    };

    // A network added: every node's host subnets change, and only they; the edits
    // wait in the journal (its rows are written meanwhile) until the manifests have
    // been quiet a moment, then the nodes' files carry them.
    std::fs::write(m.path().join("red.yaml"), network("red", "10.20.0.0/16")).unwrap();
    let seen = std::time::Instant::now();
    while !journal.exists() {
        assert!(
            seen.elapsed() < std::time::Duration::from_secs(5),
            "no journal was written for a network added to {NODES} nodes"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    wait_until("red's switches", 5, || {
        switches().contains("cluster_udn_red_n01")
    });
    wait_until("the journal folded into the nodes' files", 10, || {
        !journal.exists() && every_node_lists("cluster_udn_red")
    });

    // Another, and a stop as soon as its rows are there: the stop folds the journal.
    std::fs::write(
        m.path().join("green.yaml"),
        network("green", "10.30.0.0/16"),
    )
    .unwrap();
    wait_until("green's switches", 5, || {
        switches().contains("cluster_udn_green_n01")
    });
    assert_eq!(d.process.terminate(10).code(), Some(0));
    assert!(
        !journal.exists(),
        "the journal is folded before netconnectd exits"
    );
    assert!(every_node_lists("cluster_udn_green") && every_node_lists("cluster_udn_red"));

    // A run after reads the directory as it was left: nothing to change.
    let out = run(&nb, m.path(), s.path(), &["--plan"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout
            .lines()
            .all(|l| l.starts_with(' ') || l.ends_with(": unchanged")),
        "{stdout}"
    );
}

/// The lines of a `--plan` or `--once` output that summarise a key (`<key>: +N ~N -N`
/// or `<key>: unchanged`), sorted.
fn key_lines(stdout: &str) -> Vec<String> {
    let mut lines: Vec<String> = stdout
        .lines()
        .filter(|l| !l.starts_with(' ') && (l.contains(": +") || l.ends_with(": unchanged")))
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

#[test]
fn plan_over_an_empty_nb_shows_every_key_as_once_then_writes_it() {
    // Each key planned as if the keys before it were applied: the networks refer to
    // the cluster rows, the connect to the networks' routers, none of them in the NB.
    let sb = sandbox();
    let nb = sb.nb.unix_remote();
    let m = tempfile::tempdir().unwrap();
    let s = tempfile::tempdir().unwrap();
    let connected = &CONNECTED[..CONNECTED.find("---\napiVersion: k8s.ovn.org/v1\nkind: ClusterNetworkConnect\nmetadata: {name: lonely}").unwrap()];
    std::fs::write(m.path().join("nets.yaml"), connected).unwrap();
    std::fs::write(m.path().join("nodes.yml"), NODES).unwrap();
    let empty = sb.nbctl(&["show"]).unwrap();

    let out = run(&nb, m.path(), s.path(), &["--plan"]);
    let planned = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(2),
        "2: the NB lacks rows\n{planned}{}",
        text(&out.stderr)
    );
    assert!(!planned.contains("cannot plan"), "{planned}");
    assert!(
        planned.contains("  insert Copp ovnkube-default"),
        "{planned}"
    );
    assert!(
        planned.contains("  insert Logical_Router connect_router_ok"),
        "{planned}"
    );
    assert!(
        planned.contains(
            "  mutate Logical_Router cluster_udn_blue_ovn_cluster_router ports: +2 -0 (not owned)"
        ),
        "the connect's ports on a router the plan has only just inserted:\n{planned}"
    );
    assert_eq!(
        sb.nbctl(&["show"]).unwrap(),
        empty,
        "--plan wrote something"
    );

    // --once writes exactly what the plan said, key by key.
    let out = run(&nb, m.path(), s.path(), &["--once"]);
    let written = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{written}{}", text(&out.stderr));
    assert_eq!(key_lines(&planned), key_lines(&written));
    assert!(
        key_lines(&written).iter().all(|l| l.contains(": +")),
        "{written}"
    );

    // And then the NB matches: exit 0, every key unchanged.
    let out = run(&nb, m.path(), s.path(), &["--plan"]);
    let again = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{again}");
    assert!(
        key_lines(&again).iter().all(|l| l.ends_with(": unchanged")),
        "{again}"
    );
    assert_eq!(key_lines(&again).len(), key_lines(&planned).len());
}

/// Freezes (or thaws) the NB server: its container paused, or its process stopped.
fn freeze(sb: &Sandbox, frozen: bool) {
    match sb.nb.container() {
        Some(c) if frozen => c.pause().unwrap(),
        Some(c) => c.unpause().unwrap(),
        None => {
            let signal = if frozen { "-STOP" } else { "-CONT" };
            let pid = sb.nb.pid().expect("the NB server runs").to_string();
            assert!(Command::new("kill")
                .args([signal, &pid])
                .status()
                .unwrap()
                .success());
        }
    }
}

#[test]
fn sigterm_while_a_key_waits_on_a_silent_nb_stops_the_daemon_promptly() {
    // The NB stops answering while a key's transaction is in flight (its wait bounded
    // only by the 30 s read-your-writes timeout): SIGTERM still stops the daemon within
    // its shutdown grace, well inside Kubernetes' 30 s termination grace period.
    let sb = sandbox();
    let nb = sb.nb.unix_remote();
    let m = tempfile::tempdir().unwrap();
    let s = tempfile::tempdir().unwrap();
    std::fs::write(m.path().join("blue.yaml"), GOOD).unwrap();
    std::fs::write(m.path().join("nodes.yml"), NODES).unwrap();
    let log = s.path().join("daemon.log");
    let mut d = Daemon::start_logging(&nb, m.path(), s.path(), &[], Some(&log));
    d.wait_converged(30);
    freeze(&sb, true);
    // A network added: its key's transaction goes to a server that does not answer.
    std::fs::write(
        m.path().join("green.yaml"),
        GOOD.replace("name: blue", "name: green")
            .replace("tenant: blue", "tenant: green")
            .replace("10.10.0.0/16", "10.20.0.0/16"),
    )
    .unwrap();
    wait_until(
        "the green network's key to send its transaction",
        10,
        || std::fs::read_to_string(&log).is_ok_and(|l| l.contains("key=network cluster_udn_green")),
    );
    // The stall shows while it lasts: a key running for over a second.
    wait_until("the stall in the metrics", 10, || {
        get(&d.addr, "/metrics").is_some_and(|(_, m)| {
            m.lines().any(|l| {
                l.strip_prefix("netconnect_oldest_running_seconds ")
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .is_some_and(|v| v > 1.0)
            }) && m.contains("netconnect_queue_running 1")
        })
    });
    let started = std::time::Instant::now();
    let status = d.process.terminate(15);
    let took = started.elapsed();
    freeze(&sb, false);
    assert_eq!(status.code(), Some(0));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        took < std::time::Duration::from_secs(10),
        "stopped {took:?} after SIGTERM:\n{text}"
    );
    assert!(
        text.contains("given up"),
        "the key was not in flight:\n{text}"
    );
}

#[test]
fn beside_ovn_kubernetes_the_daemon_is_ready_once_its_connects_converge_and_claims_no_network() {
    // The networks' rows in the NB (written by a first run, as OVN-Kubernetes would
    // have them: by the names it gives them); then netconnectd --manage connects with
    // a fresh status directory: only the connects' keys run, /readyz answers 200 once
    // they converged, /status lists them alone, and a network's status file keeps the
    // status it was read with (OVN-Kubernetes' cluster manager's), claiming nothing.
    let sb = sandbox();
    let nb = sb.nb.unix_remote();
    let m = tempfile::tempdir().unwrap();
    let first = tempfile::tempdir().unwrap();
    let networks = &CONNECTED[..CONNECTED
        .find("---\napiVersion: k8s.ovn.org/v1\nkind: ClusterNetworkConnect")
        .unwrap()];
    std::fs::write(m.path().join("nets.yaml"), networks).unwrap();
    std::fs::write(m.path().join("nodes.yaml"), NODES).unwrap();
    let out = run(&nb, m.path(), first.path(), &["--once"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    std::fs::write(m.path().join("nets.yaml"), CONNECTED).unwrap();
    let s = tempfile::tempdir().unwrap();
    let d = Daemon::start(&nb, m.path(), s.path(), &["--manage", "connects"]);
    wait_until("/readyz", 20, || {
        get(&d.addr, "/readyz").is_some_and(|(c, _)| c == 200)
    });
    let routers = sb
        .nbctl(&["--bare", "--columns=name", "list", "Logical_Router"])
        .unwrap();
    assert!(routers.contains("connect_router_ok"), "{routers}");
    let (_, status) = get(&d.addr, "/status").unwrap();
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["ready"], true);
    let keys: Vec<String> = status["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["key"].as_str().unwrap().to_owned())
        .collect();
    assert!(!keys.is_empty());
    assert!(
        keys.iter().all(|k| k.starts_with("connect ")),
        "only the connects' keys: {keys:?}"
    );
    wait_until("ok's status Success", 10, || {
        s.path().join("ClusterNetworkConnect/ok.yaml").exists()
            && connect_status(s.path(), "ok")["status"] == "Success"
    });
    wait_until("blue's status file", 10, || {
        s.path()
            .join("ClusterUserDefinedNetwork/blue.yaml")
            .exists()
    });
    let blue =
        std::fs::read_to_string(s.path().join("ClusterUserDefinedNetwork/blue.yaml")).unwrap();
    assert!(!blue.contains("NetworkCreated"), "{blue}");
    // netconnectd --manage all said it created the network.
    let claimed =
        std::fs::read_to_string(first.path().join("ClusterUserDefinedNetwork/blue.yaml")).unwrap();
    assert!(claimed.contains("NetworkCreated"), "{claimed}");
}

#[test]
fn with_network_connect_off_connects_are_read_as_absent() {
    // OVN-Kubernetes' switch: off, a ClusterNetworkConnect is not acted on. A connect
    // written with it on goes (the manifests hold none, in effect), a refused one is
    // not reported, and the networks stay.
    let sb = sandbox();
    let nb = sb.nb.unix_remote();
    let m = tempfile::tempdir().unwrap();
    let s = tempfile::tempdir().unwrap();
    std::fs::write(m.path().join("nets.yaml"), CONNECTED).unwrap();
    std::fs::write(m.path().join("nodes.yaml"), NODES).unwrap();
    let routers = || {
        sb.nbctl(&["--bare", "--columns=name", "list", "Logical_Router"])
            .unwrap()
    };
    // On (the default): the connect's router; the lonely connect is refused (exit 1).
    let out = run(&nb, m.path(), s.path(), &["--once"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("ClusterNetworkConnect lonely"));
    assert!(routers().contains("connect_router_ok"), "{}", routers());

    let out = run(
        &nb,
        m.path(),
        s.path(),
        &["--once", "--enable-network-connect=false"],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(!stderr.contains("ClusterNetworkConnect"), "{stderr}");
    assert!(!routers().contains("connect_router"), "{}", routers());
    assert!(
        routers().contains("cluster_udn_blue_ovn_cluster_router"),
        "{}",
        routers()
    );
    assert!(
        !s.path().join("ClusterNetworkConnect/ok.yaml").exists(),
        "no connect status"
    );

    // Beside OVN-Kubernetes with nothing to do: refused at start.
    let out = run(
        &nb,
        m.path(),
        s.path(),
        &[
            "--once",
            "--manage",
            "connects",
            "--enable-network-connect=false",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("nothing to manage"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_daemon_is_live_before_its_nb_answers_and_ready_once_it_does() {
    // The NB does not answer when the daemon starts: /healthz answers at once (the
    // process serves), /readyz says 503, each --timeout the log says why it still
    // waits; once the NB answers, the daemon syncs and becomes ready (it exited after
    // 30 s before, serving nothing meanwhile).
    let sb = sandbox();
    let nb = sb.nb.unix_remote();
    let m = tempfile::tempdir().unwrap();
    let s = tempfile::tempdir().unwrap();
    std::fs::write(m.path().join("blue.yaml"), GOOD).unwrap();
    std::fs::write(m.path().join("nodes.yaml"), NODES).unwrap();
    freeze(&sb, true);
    let log = s.path().join("daemon.log");
    let d = Daemon::start_logging(
        &nb,
        m.path(),
        s.path(),
        &["--timeout", "1", "--log-format", "json"],
        Some(&log),
    );
    wait_until("/healthz", 10, || {
        get(&d.addr, "/healthz").is_some_and(|(c, _)| c == 200)
    });
    assert_eq!(get(&d.addr, "/readyz").unwrap().0, 503);
    // Said at warn, as one JSON object per line.
    let waiting = |l: &str| {
        serde_json::from_str::<serde_json::Value>(l).is_ok_and(|v| {
            let message = v["fields"]["message"].as_str().unwrap_or_default();
            v["level"] == "WARN"
                && message.contains("no usable Northbound server at")
                && message.contains("still trying")
        })
    };
    wait_until("a line saying why it still waits", 10, || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.lines().any(waiting))
    });
    assert_eq!(get(&d.addr, "/readyz").unwrap().0, 503);
    freeze(&sb, false);
    wait_until("/readyz", 30, || {
        get(&d.addr, "/readyz").is_some_and(|(c, _)| c == 200)
    });
    let switches = sb
        .nbctl(&["--bare", "--columns=name", "list", "Logical_Switch"])
        .unwrap();
    assert!(switches.contains("cluster_udn_blue_n1"), "{switches}");
}
