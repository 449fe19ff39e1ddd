//! The sandbox itself: real daemons wired together, private per test, gone afterwards,
//! raft clusters, and the host's older OVN for compatibility tests.

use integration_tests::named;
use std::path::Path;
use std::time::Duration;

use integration_tests::{client, sandbox};
use ovn_sandbox::{
    Chassis, Cluster, ContainerCluster, Installation, OvsdbServer, Sandbox, ServerOptions,
    BACKEND_VAR,
};
use ovsdb_proto::{Condition, Datum, Operation};

#[tokio::test]
async fn northd_turns_a_logical_switch_into_a_southbound_datapath() {
    let sb = sandbox();
    let version = sb.nb.installation().ovn_version().to_owned();
    let v: Vec<u32> = version
        .split('.')
        .take(2)
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(
        (v[0], v[1]) >= (25, 3),
        "OVN {version} is too old for transit routers"
    );
    let (nb, _) = client(&sb.nb.unix_remote()).await;
    let r = nb
        .transact(
            "OVN_Northbound",
            &[Operation::insert("Logical_Switch", named("sw0"))],
        )
        .await
        .unwrap();
    let uuid = r[0].uuid().unwrap();
    sb.sync().unwrap();
    let (south, _) = client(&sb.sb.unix_remote()).await;
    let r = south
        .transact(
            "OVN_Southbound",
            &[Operation::select("Datapath_Binding", vec![])],
        )
        .await
        .unwrap();
    let rows = r[0].rows().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    // Southbound refers back to the northbound row by its uuid.
    let row = &rows[0];
    let names_it = row
        .values()
        .any(|d| d.to_string().contains(&uuid.to_string()));
    assert!(names_it, "{row:?} does not mention {uuid}");
}

#[test]
fn a_transit_router_port_on_a_remote_chassis_becomes_a_remote_port() {
    // OVN 25.03 added transit routers: a router port whose requested-chassis is a remote
    // chassis is bound as a "remote" port (what OKEP-5094's Layer2 topology builds on).
    let sb = sandbox();
    sb.sbctl(&["chassis-add", "remote-ch", "geneve", "192.0.2.10"])
        .unwrap();
    sb.sbctl(&["set", "Chassis", "remote-ch", "other_config:is-remote=true"])
        .unwrap();
    sb.nbctl(&[
        "lr-add",
        "tr0",
        "--",
        "lrp-add",
        "tr0",
        "tr0-p0",
        "0a:00:00:00:00:01",
        "192.168.0.1/31",
        "--",
        "set",
        "Logical_Router_Port",
        "tr0-p0",
        "options:requested-chassis=remote-ch",
    ])
    .unwrap();
    sb.sync().unwrap();
    let out = sb
        .sbctl(&[
            "--bare",
            "--columns=type",
            "find",
            "Port_Binding",
            "logical_port=tr0-p0",
        ])
        .unwrap();
    assert_eq!(out.trim(), "remote");
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn every_daemon_is_gone_when_the_sandbox_is_dropped() {
    let sb = sandbox();
    let pids = [
        sb.nb.pid().unwrap(),
        sb.sb.pid().unwrap(),
        sb.northd_pid().unwrap(),
    ];
    assert!(pids.iter().all(|p| alive(*p)));
    let dir = sb.nb.unix_remote();
    drop(sb);
    assert!(pids.iter().all(|p| !alive(*p)), "left running: {pids:?}");
    let sock = dir.trim_start_matches("unix:");
    assert!(!Path::new(sock).exists(), "{sock} left behind");
}

#[test]
fn every_daemon_is_gone_after_a_panic() {
    let pids = std::sync::Mutex::new(Vec::new());
    let r = std::panic::catch_unwind(|| {
        let sb = sandbox();
        pids.lock()
            .unwrap()
            .extend([sb.nb.pid().unwrap(), sb.northd_pid().unwrap()]);
        panic!("test failure inside a sandbox");
    });
    assert!(r.is_err());
    let pids = pids.into_inner().unwrap();
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|p| !alive(*p)), "left running: {pids:?}");
}

#[test]
fn a_container_clusters_containers_and_network_are_gone_after_a_panic() {
    // The containers carry the name of the thread that made them (libtest names a
    // test's thread after the test): a thread of this test's own.
    let name = format!("containers-after-a-panic-{}", std::process::id());
    let seen = std::sync::Mutex::new(Vec::new());
    let r = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name(name.clone())
            .spawn_scoped(s, || {
                let install = Installation::recent().unwrap();
                let cluster = ContainerCluster::start(&install, 1).unwrap();
                assert_eq!(cluster.leader(), Some(0));
                *seen.lock().unwrap() = ovn_sandbox::labelled(Some(&name)).unwrap();
                panic!("test failure inside a container cluster");
            })
            .unwrap()
            .join()
    });
    assert!(r.is_err());
    let mut seen = seen.into_inner().unwrap();
    seen.sort();
    // The member, its raft network and its clients' network.
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(
        seen[0].starts_with("container ovsrs-") && seen[0].ends_with("-nb0"),
        "{seen:?}"
    );
    assert!(
        seen[1..].iter().all(|s| s.starts_with("network ovsrs-")),
        "{seen:?}"
    );
    let left = ovn_sandbox::labelled(Some(&name)).unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The programs running in a container (`/proc/*/comm`).
fn programs_in(container: &ovn_sandbox::Container) -> String {
    container
        .exec(&["sh", "-c", "cat /proc/[0-9]*/comm"])
        .unwrap()
}

#[test]
fn the_central_and_a_chassis_run_where_the_backend_says() {
    let install = Installation::recent().unwrap();
    let sb = Sandbox::start_with(&install).unwrap();
    let chassis = Chassis::start(&sb, "where").unwrap();
    if std::env::var(BACKEND_VAR).as_deref() == Ok("processes") {
        assert_eq!(install.image(), None);
        assert!(sb.nb.tcp_remote().starts_with("tcp:127.0.0.1:"));
        assert!(sb.network().is_none() && sb.nb.container().is_none());
        assert!(chassis.container().is_none());
        return;
    }
    // The suite's machines have a Docker Engine: by default, containers with addresses
    // of their own on the sandbox's network.
    let network = sb.network().expect("the central on a Docker network");
    assert_eq!(
        sb.nb.tcp_remote(),
        format!("tcp:{}:6641", network.address(10))
    );
    assert_eq!(
        sb.sb.tcp_remote(),
        format!("tcp:{}:6641", network.address(11))
    );
    for (container, program) in [
        (sb.nb.container(), "ovsdb-server"),
        (sb.sb.container(), "ovsdb-server"),
        (sb.northd_container(), "ovn-northd"),
    ] {
        let container = container.expect("a container");
        assert_eq!(container.ip_on(network), container.ip().into());
        assert!(programs_in(container).contains(program));
    }
    // ovn-northd reaches both servers over TCP at their addresses.
    let northd = std::fs::read_to_string(sb.northd_log()).unwrap();
    for server in [&sb.nb, &sb.sb] {
        let remote = server.tcp_remote();
        assert!(northd.contains(&format!("{remote}: connected")), "{northd}");
    }
    // The chassis is a container on the same network running all three daemons, its
    // ovn-controller following the Southbound server at its address.
    let container = chassis.container().expect("the chassis in a container");
    assert!(container.ip_on(network).is_some());
    let programs = programs_in(container);
    for program in ["ovsdb-server", "ovs-vswitchd", "ovn-controller"] {
        assert!(programs.contains(program), "{program} not in {programs}");
    }
    let remote = chassis
        .vsctl(&["get", "open", ".", "external_ids:ovn-remote"])
        .unwrap();
    assert_eq!(remote.trim().trim_matches('"'), sb.sb.tcp_remote());
}

#[tokio::test]
async fn two_sandboxes_do_not_share_anything() {
    let a = sandbox();
    let b = sandbox();
    assert_ne!(a.nb.unix_remote(), b.nb.unix_remote());
    assert_ne!(a.nb.tcp_remote(), b.nb.tcp_remote());
    let (ca, _) = client(&a.nb.tcp_remote()).await;
    let (cb, _) = client(&b.nb.tcp_remote()).await;
    ca.transact(
        "OVN_Northbound",
        &[Operation::insert("Logical_Switch", named("only-in-a"))],
    )
    .await
    .unwrap();
    let r = cb
        .transact(
            "OVN_Northbound",
            &[Operation::select("Logical_Switch", vec![])],
        )
        .await
        .unwrap();
    assert!(r[0].rows().unwrap().is_empty());
}

#[tokio::test]
async fn a_three_member_raft_cluster_elects_a_leader_and_replicates() {
    let install = Installation::recent().unwrap();
    let cluster = Cluster::start(&install, 3, None).unwrap();
    let leader = cluster.leader().expect("a leader");
    let (c, _) = client(&cluster.members[leader].tcp_remote()).await;
    let r = c
        .transact(
            "_Server",
            &[Operation::Select {
                table: "Database".into(),
                conditions: vec![Condition::eq("name", "OVN_Northbound")],
                columns: Some(vec!["leader".into(), "model".into(), "connected".into()]),
            }],
        )
        .await
        .unwrap();
    let row = &r[0].rows().unwrap()[0];
    assert_eq!(row["model"], Datum::scalar("clustered"));
    assert_eq!(row["leader"], Datum::scalar(true));
    assert_eq!(row["connected"], Datum::scalar(true));
    c.transact(
        "OVN_Northbound",
        &[Operation::insert("Logical_Switch", named("replicated"))],
    )
    .await
    .unwrap();
    let follower = (leader + 1) % 3;
    let (f, _) = client(&cluster.members[follower].unix_remote()).await;
    let mut seen = false;
    for _ in 0..100 {
        let r = f
            .transact(
                "OVN_Northbound",
                &[Operation::select("Logical_Switch", vec![])],
            )
            .await
            .unwrap();
        if r[0].rows().unwrap().len() == 1 {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen, "the follower never saw the write");
    assert_eq!(cluster.remotes().split(',').count(), 3);
}

#[tokio::test]
async fn a_restarted_server_keeps_its_database_and_port() {
    let mut server = integration_tests::nb_server();
    let (c, _) = client(&server.tcp_remote()).await;
    c.transact(
        "OVN_Northbound",
        &[Operation::insert("Logical_Switch", named("kept"))],
    )
    .await
    .unwrap();
    let before = server.tcp_remote();
    server.restart().unwrap();
    assert_eq!(server.tcp_remote(), before);
    assert!(tokio::time::timeout(Duration::from_secs(5), c.closed())
        .await
        .is_ok());
    let (c, _) = client(&server.tcp_remote()).await;
    let r = c
        .transact(
            "OVN_Northbound",
            &[Operation::select("Logical_Switch", vec![])],
        )
        .await
        .unwrap();
    assert_eq!(r[0].rows().unwrap()[0]["name"], Datum::scalar("kept"));
}

#[tokio::test]
async fn the_hosts_older_ovn_serves_the_7_0_0_schema() {
    let install = Installation::host().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        install.ovn_version().starts_with("23.03"),
        "host OVN {}",
        install.ovn_version()
    );
    let server = OvsdbServer::start(&install, &ServerOptions::default()).unwrap();
    let (c, _) = client(&server.unix_remote()).await;
    let schema = c.get_schema("OVN_Northbound").await.unwrap();
    assert_eq!(schema.version, "7.0.0");
    let file = ovsdb_proto::DatabaseSchema::from_file(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../schemas/ovn-nb-7.0.0.ovsschema"
    ))
    .unwrap();
    assert_eq!(schema.tables, file.tables);
    let r = c
        .transact(
            "OVN_Northbound",
            &[Operation::insert("Logical_Switch", named("old"))],
        )
        .await
        .unwrap();
    assert!(r[0].uuid().is_some());
}
