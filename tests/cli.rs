//! The example `ovsdb-client` compared with the real `ovsdb-client` on the same server.

use std::path::PathBuf;
use std::process::{Command, Output};

use integration_tests::{sandbox, Sandbox};
use serde_json::{Map, Value};

/// The example binary, built by `cargo test --workspace` (which builds examples).
fn ours() -> PathBuf {
    integration_tests::example("ovsdb-client")
}

fn run_ours(args: &[&str]) -> Output {
    Command::new(ours()).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn real(sb: &Sandbox, args: &[&str]) -> String {
    sb.nb
        .tool("ovsdb-client", args)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn populate(sb: &Sandbox) {
    for args in [
        &["ls-add", "sw0"][..],
        &["lsp-add", "sw0", "sw0-p1"],
        &["lsp-set-addresses", "sw0-p1", "0a:00:00:00:00:01 10.0.0.11"],
        &["lsp-add", "sw0", "sw0-p2"],
        &[
            "acl-add",
            "sw0",
            "from-lport",
            "1001",
            "ip4.src == 10.0.0.11",
            "allow-related",
        ],
        &["lr-add", "lr0"],
        &[
            "lrp-add",
            "lr0",
            "lr0-sw0",
            "0a:00:00:00:01:01",
            "10.0.0.1/24",
            "fd00::1/64",
        ],
        &[
            "set",
            "Logical_Router",
            "lr0",
            "options:always_learn_from_arp_request=false",
            "external_ids:owner=\"a b\\\"c\"",
        ],
        &[
            "lb-add",
            "lb0",
            "30.0.0.1:80",
            "10.0.0.11:8080,10.0.0.12:8080",
            "tcp",
        ],
    ] {
        sb.nbctl(args).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn list_dbs_prints_what_ovsdb_client_prints() {
    let sb = sandbox();
    let o = run_ours(&["list-dbs", &sb.nb.unix_remote()]);
    assert!(o.status.success());
    assert_eq!(
        stdout(&o),
        real(&sb, &["list-dbs", &sb.nb.tool_unix_remote()])
    );
}

#[test]
fn get_schema_equals_ovsdb_client_as_json() {
    let sb = sandbox();
    let o = run_ours(&["get-schema", &sb.nb.tcp_remote(), "OVN_Northbound"]);
    assert!(o.status.success());
    let ours: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let theirs: Value = serde_json::from_str(&real(
        &sb,
        &["get-schema", &sb.nb.tool_unix_remote(), "OVN_Northbound"],
    ))
    .unwrap();
    assert_eq!(ours, theirs);
    // With the database left out, the only one is used.
    let o = run_ours(&["get-schema", &sb.sb.unix_remote()]);
    let ours: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(ours["name"], "OVN_Southbound");
}

#[test]
fn list_tables_prints_the_same_tables_sorted() {
    let sb = sandbox();
    let o = run_ours(&["list-tables", &sb.nb.unix_remote(), "OVN_Northbound"]);
    let ours: Vec<String> = stdout(&o).lines().map(str::to_owned).collect();
    let theirs_text = real(
        &sb,
        &["list-tables", &sb.nb.tool_unix_remote(), "OVN_Northbound"],
    );
    // ovsdb-client prints a "Table" heading and a rule first.
    let mut theirs: Vec<String> = theirs_text
        .lines()
        .skip(2)
        .map(|l| l.trim().to_owned())
        .collect();
    theirs.sort();
    assert_eq!(ours.len(), 39);
    assert_eq!(ours, theirs);
    let mut sorted = ours.clone();
    sorted.sort();
    assert_eq!(ours, sorted);
}

#[test]
fn transact_prints_the_result_array_like_ovsdb_client() {
    let sb = sandbox();
    populate(&sb);
    let txn = r#"["OVN_Northbound",{"op":"select","table":"Logical_Switch_Port","where":[],"columns":["name","addresses","type"]},{"op":"mutate","table":"Logical_Switch","where":[["name","==","sw0"]],"mutations":[["external_ids","insert",["map",[["k","v"]]]]]}]"#;
    let o = run_ours(&["transact", &sb.nb.unix_remote(), txn]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ours: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(stdout(&o).lines().count(), 1, "one line of JSON");
    // Select and mutate again with the real tool: the same reply (the mutate's insert
    // of an existing key changes nothing but still counts the row).
    let theirs: Value =
        serde_json::from_str(&real(&sb, &["transact", &sb.nb.tool_unix_remote(), txn])).unwrap();
    assert_eq!(ours, theirs);
    assert_eq!(ours[1]["count"], 1);

    let bad = r#"["OVN_Northbound",{"op":"insert","table":"Logical_Switch","row":{"name":"x"}},{"op":"insert","table":"Nope","row":{}}]"#;
    let o = run_ours(&["transact", &sb.nb.unix_remote(), bad]);
    assert_eq!(o.status.code(), Some(1), "a failed operation exits 1");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("syntax error") && stderr.contains("No table named Nope"),
        "{stderr}"
    );
    let ours: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let theirs: Value =
        serde_json::from_str(&real(&sb, &["transact", &sb.nb.tool_unix_remote(), bad])).unwrap();
    // The first result is a fresh uuid each time; the error is the same.
    assert_eq!(ours[1], theirs[1]);
    assert_eq!(ours[0]["uuid"][0], "uuid");
}

/// `ovsdb-client dump -f json` prints one object per table with headings and data rows;
/// turn that into `{"Table": {"uuid": {"column": value}}}`.
fn real_dump_as_ours(text: &str) -> Value {
    let mut out = Map::new();
    for table in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
        let table = table.unwrap();
        let name = table["caption"]
            .as_str()
            .unwrap()
            .trim_end_matches(" table")
            .to_owned();
        let headings: Vec<&str> = table["headings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap())
            .collect();
        let mut rows = Map::new();
        for row in table["data"].as_array().unwrap() {
            let mut columns = Map::new();
            let mut uuid = String::new();
            for (h, v) in headings.iter().zip(row.as_array().unwrap()) {
                if *h == "_uuid" {
                    uuid = v[1].as_str().unwrap().to_owned();
                } else {
                    columns.insert(h.to_string(), v.clone());
                }
            }
            rows.insert(uuid, Value::Object(columns));
        }
        out.insert(name, Value::Object(rows));
    }
    Value::Object(out)
}

/// The real `ovsdb-client dump -f json` of `tables` (all when empty), in our form.
fn real_dump(sb: &Sandbox, tables: &[&str]) -> Value {
    let remote = sb.nb.tool_unix_remote();
    let mut args = vec!["dump", "-f", "json", remote.as_str(), "OVN_Northbound"];
    args.extend_from_slice(tables);
    real_dump_as_ours(&real(sb, &args))
}

#[test]
fn dump_equals_ovsdb_client_dump() {
    let sb = sandbox();
    populate(&sb);
    let o = run_ours(&["dump", &sb.nb.unix_remote(), "OVN_Northbound"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ours: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let theirs = real_dump(&sb, &[]);
    assert_eq!(ours.as_object().unwrap().len(), 39);
    assert_eq!(ours["Logical_Switch_Port"].as_object().unwrap().len(), 2);
    assert_eq!(ours, theirs);
    // Chosen tables only, database left out.
    let o = run_ours(&[
        "dump",
        &sb.nb.unix_remote(),
        "Logical_Router",
        "Load_Balancer",
    ]);
    let ours: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        ours.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["Load_Balancer", "Logical_Router"]
    );
    assert_eq!(ours["Logical_Router"], theirs["Logical_Router"]);
}

#[test]
fn bad_arguments_are_reported_without_a_panic() {
    let sb = sandbox();
    for (args, needle) in [
        (vec!["list-dbs", "tcp:h:99999"], "invalid remote"),
        (
            vec!["frobnicate", sb.nb.unix_remote().as_str()],
            "unknown command",
        ),
        (
            vec!["transact", sb.nb.unix_remote().as_str(), "{not json"],
            "not valid JSON",
        ),
        (
            vec!["transact", sb.nb.unix_remote().as_str(), "[1]"],
            "first element is the database name",
        ),
        (
            vec![
                "dump",
                sb.nb.unix_remote().as_str(),
                "OVN_Northbound",
                "Nope",
            ],
            "no table named Nope",
        ),
        (
            vec!["list-dbs", "unix:/nonexistent.sock"],
            "/nonexistent.sock",
        ),
    ] {
        let o = run_ours(&args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("ovsdb-client: ") && stderr.contains(needle),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// Reads lines from the monitor's stdout, failing the test after `secs` seconds.
fn read_line(rx: &std::sync::mpsc::Receiver<String>, secs: u64) -> Value {
    let line = rx
        .recv_timeout(std::time::Duration::from_secs(secs))
        .expect("the monitor printed nothing in time");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"))
}

fn spawn_monitor(args: &[&str]) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    use std::io::BufRead;
    let mut child = Command::new(ours())
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

#[test]
fn monitor_prints_ready_then_changes_through_restart_and_replacement_then_a_snapshot_equal_to_the_server(
) {
    let mut sb = sandbox();
    sb.nbctl(&["ls-add", "before"]).unwrap();
    let (mut child, rx) = spawn_monitor(&[
        "monitor",
        &sb.nb.unix_remote(),
        "OVN_Northbound",
        "Logical_Switch",
    ]);
    assert_eq!(
        read_line(&rx, 20),
        serde_json::json!({"event": "ready"}),
        "ready comes first; initial rows are not events"
    );

    sb.nbctl(&["ls-add", "sw1"]).unwrap();
    let e = read_line(&rx, 10);
    assert_eq!(
        (e["table"].as_str(), e["op"].as_str()),
        (Some("Logical_Switch"), Some("insert"))
    );
    assert_eq!(e["row"]["name"], "sw1");
    let uuid = e["uuid"].as_str().unwrap().to_owned();
    sb.nbctl(&[
        "set",
        "Logical_Switch",
        "sw1",
        "other_config:subnet=10.0.0.0/24",
    ])
    .unwrap();
    let e = read_line(&rx, 10);
    assert_eq!(
        (e["op"].as_str(), e["uuid"].as_str()),
        (Some("update"), Some(uuid.as_str()))
    );
    assert_eq!(
        e["row"]["other_config"],
        serde_json::json!(["map", [["subnet", "10.0.0.0/24"]]])
    );
    sb.nbctl(&["ls-del", "sw1"]).unwrap();
    let e = read_line(&rx, 10);
    assert_eq!(
        (e["op"].as_str(), e["row"]["name"].as_str()),
        (Some("delete"), Some("sw1")),
        "the last row comes with a delete"
    );

    // A restart with the database kept: no event for the unchanged row, then the next
    // change.
    sb.nb.restart().unwrap();
    sb.nbctl(&["ls-add", "sw2"]).unwrap();
    let e = read_line(&rx, 20);
    assert_eq!(
        (e["op"].as_str(), e["row"]["name"].as_str()),
        (Some("insert"), Some("sw2")),
        "after the restart, the next change and nothing else"
    );
    // The database replaced by an empty one: a delete for each row that is gone.
    sb.nb.replace_database().unwrap();
    let mut gone: Vec<String> = (0..2)
        .map(|_| {
            let e = read_line(&rx, 20);
            assert_eq!(e["op"], "delete", "{e}");
            e["row"]["name"].as_str().unwrap().to_owned()
        })
        .collect();
    gone.sort();
    assert_eq!(gone, ["before", "sw2"]);
    sb.nbctl(&["ls-add", "sw3"]).unwrap();
    assert_eq!(read_line(&rx, 20)["row"]["name"], "sw3");

    drop(child.stdin.take()); // closing stdin ends the monitor with a snapshot
    let snap = read_line(&rx, 10);
    assert_eq!(snap["event"], "snapshot");
    let theirs = real_dump(&sb, &["Logical_Switch"]);
    assert_eq!(snap["tables"]["Logical_Switch"], theirs["Logical_Switch"]);
    assert!(child.wait().unwrap().success());
}

#[test]
fn monitor_follows_a_cluster_through_leader_loss_transfer_restart_and_leave_and_ends_on_sigterm() {
    let install = ovn_sandbox::Installation::recent().unwrap();
    let mut cluster = ovn_sandbox::Cluster::start(&install, 3, None).unwrap();
    let remotes = cluster.remotes();
    let (child, rx) = spawn_monitor(&[
        "monitor",
        "--leader-only",
        &remotes,
        "OVN_Northbound",
        "Logical_Switch",
    ]);
    assert_eq!(read_line(&rx, 20), serde_json::json!({"event": "ready"}));

    let leader = cluster.leader().expect("a leader");
    // Writes go through a member that survives; it forwards them to the leader.
    let through: Vec<String> = (0..3)
        .map(|m| format!("--db={}", cluster.members[m].tool_unix_remote()))
        .collect();
    let mut db = &through[(leader + 1) % 3];
    let nbctl = |db: &str, args: &[&str]| {
        let mut all = vec![db, "--no-leader-only", "--timeout=20"];
        all.extend_from_slice(args);
        install
            .output("ovn-nbctl", &all)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    nbctl(db, &["ls-add", "a"]);
    assert_eq!(read_line(&rx, 10)["row"]["name"], "a");
    cluster.members[leader].kill();
    nbctl(db, &["ls-add", "b"]);
    let e = read_line(&rx, 30);
    assert_eq!(
        (e["op"].as_str(), e["row"]["name"].as_str()),
        (Some("insert"), Some("b")),
        "followed to the new leader"
    );

    // Leadership handed over the way a leader does before it writes a snapshot.
    let now = wait_for_leader(&cluster);
    cluster.members[now]
        .appctl(&["cluster/failure-test", "transfer-leadership"])
        .unwrap();
    nbctl(db, &["ls-add", "c"]);
    assert_eq!(
        read_line(&rx, 30)["row"]["name"],
        "c",
        "followed the transfer"
    );
    // The killed member comes back and catches up.
    cluster.members[leader].restart().unwrap();
    nbctl(db, &["ls-add", "d"]);
    assert_eq!(read_line(&rx, 30)["row"]["name"], "d");
    // The leader leaves the cluster; writes go through a member that stays.
    let now = wait_for_leader(&cluster);
    cluster.members[now]
        .appctl(&["cluster/leave", "OVN_Northbound"])
        .unwrap();
    // Written once the members that stay have elected one of them: until then they are
    // not connected to the cluster, and ovn-nbctl gives up on a member that says so
    // (seen under a loaded test run: "database connection failed").
    wait_for_leader_among(&cluster, &[(now + 1) % 3, (now + 2) % 3]);
    db = &through[(now + 1) % 3];
    nbctl(db, &["ls-add", "e"]);
    assert_eq!(
        read_line(&rx, 30)["row"]["name"],
        "e",
        "followed past the leave"
    );

    // SIGTERM ends it with the snapshot, which equals the server's contents.
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let snap = read_line(&rx, 10);
    assert_eq!(snap["event"], "snapshot");
    let at = cluster.members[wait_for_leader(&cluster)].tool_unix_remote();
    let theirs = real_dump_as_ours(
        &install
            .output(
                "ovsdb-client",
                &[
                    "dump",
                    "-f",
                    "json",
                    &at,
                    "OVN_Northbound",
                    "Logical_Switch",
                ],
            )
            .unwrap(),
    );
    assert_eq!(snap["tables"]["Logical_Switch"], theirs["Logical_Switch"]);
    assert_eq!(theirs["Logical_Switch"].as_object().unwrap().len(), 5);
    let mut child = child;
    assert!(child.wait().unwrap().success());
}

/// The index of the cluster's leader, once it has one.
fn wait_for_leader(cluster: &ovn_sandbox::Cluster) -> usize {
    let all: Vec<usize> = (0..cluster.members.len()).collect();
    wait_for_leader_among(cluster, &all)
}

/// Waits until one of the members `among` says it leads; its index.
fn wait_for_leader_among(cluster: &ovn_sandbox::Cluster, among: &[usize]) -> usize {
    for _ in 0..200 {
        if let Some(l) = cluster.leader_among(among) {
            return l;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("none of members {among:?} leads");
}

#[test]
fn monitor_reports_each_unusable_server_and_fails_when_never_synced() {
    // Nothing listens on this port.
    let port = ovn_sandbox::free_port().unwrap();
    let remote = format!("tcp:127.0.0.1:{port}");
    let start = std::time::Instant::now();
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new(ours())
        .args([
            "--timeout=1",
            "monitor",
            &remote,
            "OVN_Northbound",
            "Logical_Switch",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // stdin stays open: only the timeout ends it.
    let _stdin = child.stdin.take();
    let status = child.wait().unwrap();
    assert!(start.elapsed() < std::time::Duration::from_secs(10));
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("ovsdb-client: {remote}: ")), "{err}");
    assert!(err.contains("not synced with"), "{err}");
    assert!(out.is_empty(), "no ready, no snapshot: {out}");
}

#[test]
fn every_one_shot_command_obeys_timeout() {
    // A server that accepts and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let remote = format!("tcp:{}", listener.local_addr().unwrap());
    let start = std::time::Instant::now();
    let out = run_ours(&["--timeout=0.5", "list-dbs", &remote]);
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("list-dbs did not finish within 500ms"),
        "{err}"
    );
    drop(listener);
}

#[test]
fn dump_refuses_a_value_that_does_not_fit_its_column() {
    // A server whose schema says integer and whose row holds a string.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let remote = format!("tcp:{}", listener.local_addr().unwrap());
    let uuid = "00000000-0000-0000-0000-00000000000a";
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut out = stream.try_clone().unwrap();
        let messages = serde_json::Deserializer::from_reader(stream).into_iter::<Value>();
        for msg in messages {
            let Ok(msg) = msg else { return };
            let result = match msg["method"].as_str() {
                Some("get_schema") => serde_json::json!({"name": "DB", "version": "1.0.0",
                    "tables": {"T": {"columns": {"n": {"type": "integer"}}}}}),
                Some("transact") => {
                    serde_json::json!([{"rows": [{"_uuid": ["uuid", uuid], "n": "x"}]}])
                }
                Some("list_dbs") => serde_json::json!(["DB"]),
                _ => msg["params"].clone(),
            };
            let reply = serde_json::json!({"id": msg["id"], "result": result, "error": null});
            if std::io::Write::write_all(&mut out, reply.to_string().as_bytes()).is_err() {
                return;
            }
        }
    });
    let out = run_ours(&["--timeout=5", "dump", &remote, "DB"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("table T row {uuid} column n")) && err.contains("expected integer"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "nothing printed: {}", stdout(&out));
    server.join().unwrap();
}

#[test]
fn max_message_size_refuses_a_larger_reply() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let remote = format!("tcp:{}", listener.local_addr().unwrap());
    // Two connections, one per run.
    let server = std::thread::spawn(move || {
        for _ in 0..2 {
            let (stream, _) = listener.accept().unwrap();
            let mut out = stream.try_clone().unwrap();
            for msg in serde_json::Deserializer::from_reader(stream).into_iter::<Value>() {
                let Ok(msg) = msg else { break };
                let reply = serde_json::json!({"id": msg["id"], "result": ["DB", "x".repeat(500)], "error": null});
                if std::io::Write::write_all(&mut out, reply.to_string().as_bytes()).is_err() {
                    break;
                }
            }
        }
    });
    let out = run_ours(&["--timeout=5", "--max-message-size=100", "list-dbs", &remote]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("exceeds the limit of 100 bytes"), "{err}");
    // The same reply within the default limit.
    let out = run_ours(&["--timeout=5", "list-dbs", &remote]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.join().unwrap();
}

#[test]
fn monitor_reports_a_table_the_server_lacks_and_follows_the_rest() {
    use std::io::Read;
    use std::process::Stdio;
    let server = integration_tests::nb_server();
    let mut child = Command::new(ours())
        .args([
            "--timeout=10",
            "monitor",
            &server.unix_remote(),
            "OVN_Northbound",
            "Logical_Switch",
            "No_Such_Table",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    // The first line is ready; closing stdin then ends it with the snapshot.
    let mut first = [0u8; 18];
    stdout.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"{\"event\":\"ready\"}\n");
    drop(stdin);
    let status = child.wait().unwrap();
    let (mut out, mut err) = (String::new(), String::new());
    stdout.read_to_string(&mut out).unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(
        err.contains("lacks tables [\"No_Such_Table\"]"),
        "the missing table was not reported: {err}"
    );
    let snapshot: Value = serde_json::from_str(out.trim()).unwrap();
    assert!(snapshot["tables"]["Logical_Switch"].is_object(), "{out}");
}

#[test]
fn a_server_that_answers_only_echo_is_reported_after_the_request_bound() {
    // Issue 19, item 3: alive (it answers echo, so the inactivity probe is content)
    // but silent on every request: without --timeout the command used to wait for
    // ever. Each request now has a bound (60 s by default; 1 s here).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let remote = format!("tcp:{}", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut out = stream.try_clone().unwrap();
        for msg in serde_json::Deserializer::from_reader(stream).into_iter::<Value>() {
            let Ok(msg) = msg else { return };
            if msg["method"] == "echo" {
                let reply =
                    serde_json::json!({"id": msg["id"], "result": msg["params"], "error": null});
                if std::io::Write::write_all(&mut out, reply.to_string().as_bytes()).is_err() {
                    return;
                }
            }
        }
    });
    let start = std::time::Instant::now();
    let out = run_ours(&["--request-timeout=1", "list-dbs", &remote]);
    let took = start.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no reply to list_dbs within 1s"), "{err}");
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    server.join().unwrap();
}
