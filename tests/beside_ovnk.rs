//! netconnect beside OVN-Kubernetes (`--manage connects`), on a real NB whose networks
//! are OVN-Kubernetes': their rows as netconnect would write them (the same names,
//! columns and `external_ids`) but without the owner stamps netconnect adds where
//! OVN-Kubernetes has none (`k8s.ovn.org/owner-controller`, `owner-type`, `name`, `id`
//! on the networks' and the cluster's rows). A ClusterNetworkConnect is added: its own
//! rows are written, OVN-Kubernetes' rows gain only elements of their sets (ports,
//! policies) and are otherwise untouched (same uuids, same columns), a second pass
//! writes nothing, and the rows of a connect that left the manifests are left alone.
//! Taken over (`--adopt ovn-kubernetes`): each of OVN-Kubernetes' rows netconnect wants
//! is adopted in place, none deleted or re-inserted, and a second pass writes nothing;
//! pods of an adopted network ping each other across its router through the takeover
//! without losing a reply.

use std::collections::BTreeMap;

use integration_tests::sandbox;
use integration_tests::udn;
use netconnect::keys::Key;
use netconnect::status::dir::State;
use netconnect::world::{Manage, Settings};
use ovsdb_proto::{Datum, Function, Mutation, Mutator, Operation};

fn namespace(name: &str) -> String {
    format!("---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}, labels: {{kubernetes.io/metadata.name: {name}}}}}\n")
}

/// The NetworkAttachmentDefinition OVN-Kubernetes' cluster manager renders for CUDN
/// `name` in namespace `ns`, with the network's id.
fn nad(name: &str, ns: &str, topology: &str, id: u32) -> String {
    format!(
        "---\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\n\
         metadata: {{name: {name}, namespace: {ns}, annotations: {{k8s.ovn.org/network-id: '{id}'}}}}\n\
         spec:\n  config: '{{\"cniVersion\":\"1.0.0\",\"name\":\"cluster_udn_{name}\",\"netAttachDefName\":\"{ns}/{name}\",\"topology\":\"{topology}\",\"type\":\"ovn-k8s-cni-overlay\"}}'\n"
    )
}

/// [`networks`] with the NetworkAttachmentDefinitions that carry the ids OVN-Kubernetes
/// gave them (those netconnect gives them when it writes them first: in name order).
fn networks_with_ids() -> String {
    networks()
        + &nad("blue", "blue", "layer3", 1)
        + &nad("green", "green", "layer3", 2)
        + &nad("yellow", "yellow", "layer2", 3)
}

/// [`networks`] with NADs numbering them as OVN-Kubernetes might have, not in name
/// order: blue 7, green 5, yellow 9.
fn numbered_networks() -> String {
    networks()
        + &nad("blue", "blue", "layer3", 7)
        + &nad("green", "green", "layer3", 5)
        + &nad("yellow", "yellow", "layer2", 9)
}

/// Two primary Layer3 networks and a primary Layer2 one (CUDNs labelled for the
/// connect), on two nodes.
fn networks() -> String {
    let mut s = String::new();
    for ns in ["blue", "green", "yellow"] {
        s += &namespace(ns);
    }
    for (name, ns, cidr) in [
        ("blue", "blue", "103.103.0.0/16"),
        ("green", "green", "104.104.0.0/16"),
    ] {
        s += &format!(
            "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {{name: {name}, labels: {{connect: colored}}}}\n\
             spec:\n  namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: {ns}}}}}\n  network: {{topology: Layer3, layer3: {{role: Primary, subnets: [{{cidr: {cidr}, hostSubnet: 24}}]}}}}\n"
        );
    }
    s += "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {name: yellow, labels: {connect: colored}}\n\
          spec:\n  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: yellow}}\n  network: {topology: Layer2, layer2: {role: Primary, subnets: [105.105.0.0/16]}}\n";
    for n in ["node-a", "node-b"] {
        s += &udn::node(n, "chassis-1", &[]);
    }
    s
}

fn connect(name: &str) -> String {
    format!(
        "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterNetworkConnect\nmetadata: {{name: {name}}}\n\
         spec:\n  networkSelectors:\n  - networkSelectionType: ClusterUserDefinedNetworks\n    clusterUserDefinedNetworkSelector: {{networkSelector: {{matchLabels: {{connect: colored}}}}}}\n\
         \x20 connectSubnets: [{{cidr: 192.168.0.0/16, networkPrefix: 24}}]\n  connectivity: [PodNetwork, ServiceNetwork]\n"
    )
}

/// The tables whose rows carry `external_ids`.
const TABLES: [&str; 11] = [
    "Logical_Router",
    "Logical_Switch",
    "Logical_Router_Port",
    "Logical_Switch_Port",
    "Logical_Router_Static_Route",
    "Logical_Router_Policy",
    "NAT",
    "Copp",
    "Meter",
    "Meter_Band",
    "ACL",
];

/// Every row of the NB (of [`TABLES`]), by table and uuid.
fn rows(r: &netconnect::reconcile::Reconciler) -> BTreeMap<(String, String), ovsdb_proto::Row> {
    udn::rows_of(r, &TABLES)
}

/// Fills the NB behind `r` as OVN-Kubernetes would have it for [`networks`]: netconnect's
/// rows for them, the owner stamps taken off where OVN-Kubernetes writes none. Its rows.
async fn ovn_kubernetes_nb(
    r: &netconnect::reconcile::Reconciler,
) -> BTreeMap<(String, String), ovsdb_proto::Row> {
    ovn_kubernetes_nb_of(r, &networks()).await
}

/// [`ovn_kubernetes_nb`] for the networks of `manifests`.
async fn ovn_kubernetes_nb_of(
    r: &netconnect::reconcile::Reconciler,
    manifests: &str,
) -> BTreeMap<(String, String), ovsdb_proto::Row> {
    // OVN-Kubernetes' networks: netconnect's rows for them, the owner stamps taken off
    // where OVN-Kubernetes writes none.
    let plain = udn::world(manifests, &State::default(), None);
    udn::apply(r, &plain).await;
    let stamps = Datum::set([
        "k8s.ovn.org/owner-controller",
        "k8s.ovn.org/owner-type",
        "k8s.ovn.org/name",
        "k8s.ovn.org/id",
    ]);
    let mut strip = Vec::new();
    for t in TABLES {
        for owner_type in ["ClusterUserDefinedNetwork", "default-network-controller"] {
            let (column, key) = match owner_type {
                "default-network-controller" => ("k8s.ovn.org/owner-controller", owner_type),
                _ => ("k8s.ovn.org/owner-type", owner_type),
            };
            strip.push(Operation::Mutate {
                table: t.into(),
                conditions: vec![ovsdb_proto::Condition::new(
                    "external_ids",
                    Function::Includes,
                    Datum::map([(column, key)]),
                )],
                mutations: vec![Mutation::new(
                    "external_ids",
                    Mutator::Delete,
                    stamps.clone(),
                )],
            });
        }
    }
    r.cache().transact(&strip).await.unwrap();
    let sync = std::time::Duration::from_secs(10);
    r.cache()
        .wait_for(sync, |s| {
            TABLES.iter().all(|t| {
                s.table(t).iter().all(|(_, row)| {
                    row.get("external_ids")
                        .and_then(|d| d.get_str("k8s.ovn.org/owner-type"))
                        .and_then(|a| a.as_str())
                        != Some("ClusterUserDefinedNetwork")
                })
            })
        })
        .await;
    let theirs = rows(r);
    assert!(
        theirs.len() > 60,
        "{} rows of OVN-Kubernetes'",
        theirs.len()
    );
    theirs
}

/// The name of the connect's router `connect_router_colored`, if the NB has it.
fn connect_router(sb: &integration_tests::Sandbox) -> String {
    let args = [
        "--bare",
        "--columns=name",
        "find",
        "Logical_Router",
        "name=connect_router_colored",
    ];
    sb.nbctl(&args).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_added_beside_ovn_kubernetes_writes_its_own_rows_and_set_elements_only() {
    let sb = sandbox();
    let (r, _events) = udn::reconciler(&sb.nb.unix_remote()).await;
    let theirs = ovn_kubernetes_nb(&r).await;
    let sync = std::time::Duration::from_secs(10);

    // netconnect beside it, the connect in its manifests.
    let settings = Settings {
        manage: Manage::Connects,
        ..Default::default()
    };
    let yaml = networks() + &connect("colored");
    let world = udn::world_in(&yaml, &State::default(), settings.clone());
    assert!(world.problems.is_empty(), "{:#?}", world.problems);
    let keys = world.keys();
    assert!(
        keys.iter()
            .all(|k| matches!(k, Key::Connect(_) | Key::ConnectNetwork(..))),
        "{keys:?}"
    );
    let out = udn::apply(&r, &world).await;
    assert!(out
        .iter()
        .any(|o| o.result.as_ref().is_ok_and(|p| !p.is_empty())));
    let after = rows(&r);
    udn::assert_kept_but_set_elements(
        &theirs,
        &after,
        &["ports", "policies", "load_balancer_group", "acls"],
    );
    let router = connect_router(&sb);
    assert_eq!(router.trim(), "connect_router_colored");
    // A port of the connect on a network router of OVN-Kubernetes'.
    let ports = sb
        .nbctl(&[
            "--bare",
            "--columns=ports",
            "list",
            "Logical_Router",
            "cluster_udn_blue_ovn_cluster_router",
        ])
        .unwrap();
    let ours = after.len() - theirs.len();
    assert!(ours > 10, "{ours} rows of the connect's");
    assert!(ports.split_whitespace().count() >= 3, "{ports}");

    // A second pass writes nothing.
    let again = udn::apply(&r, &world).await;
    for o in &again {
        let plan = o.result.as_ref().unwrap();
        assert!(plan.is_empty(), "{}: {}", o.key, plan.summary());
    }

    // The connect leaves the manifests: its rows (as OVN-Kubernetes' own connect
    // controller's could be) are left alone, reported, never removed.
    let without = udn::world_in(&networks(), &State::default(), settings);
    let snap = r.cache().snapshot();
    let left = without.left_alone(&snap, r.indexes());
    assert_eq!(
        left.iter().map(|o| o.name.as_str()).collect::<Vec<_>>(),
        ["colored"]
    );
    let gone = udn::apply(&r, &without).await;
    assert!(
        gone.is_empty(),
        "{:?}",
        gone.iter().map(|o| &o.key).collect::<Vec<_>>()
    );
    let router = connect_router(&sb);
    assert_eq!(router.trim(), "connect_router_colored", "left alone");

    // A network's router gone (OVN-Kubernetes not done creating it, or deleting it):
    // the connect's key for that network says which row it misses; the others converge.
    sb.nbctl(&["lr-del", "cluster_udn_blue_ovn_cluster_router"])
        .unwrap();
    r.cache()
        .wait_for(sync, |s| {
            s.table("Logical_Router").iter().all(|(_, row)| {
                row.get("name")
                    .and_then(|d| d.as_scalar())
                    .and_then(|a| a.as_str())
                    != Some("cluster_udn_blue_ovn_cluster_router")
            })
        })
        .await;
    let out = udn::outcomes(&r, &world, 1).await;
    let failed: Vec<String> = out
        .iter()
        .filter_map(|o| o.result.as_ref().err().map(|e| format!("{}: {e}", o.key)))
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0].contains("blue")
            && failed[0]
                .contains("Logical_Router cluster_udn_blue_ovn_cluster_router does not exist"),
        "{failed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopting_ovn_kubernetes_rows_keeps_each_row_in_place_and_converges() {
    // OVN-Kubernetes' controller for the networks stopped, netconnect takes over with
    // --adopt ovn-kubernetes: every row OVN-Kubernetes wrote that netconnect wants is
    // the same row after (uuid kept), now carrying netconnect's owner keys; nothing of
    // theirs is deleted; a second pass writes nothing.
    let sb = sandbox();
    let (r, _events) = udn::reconciler(&sb.nb.unix_remote()).await;
    let theirs = ovn_kubernetes_nb(&r).await;

    // Without adoption, the networks' keys stop at the first row of OVN-Kubernetes'.
    let plain = udn::world(&networks(), &State::default(), None);
    let out = udn::outcomes(&r, &plain, 1).await;
    assert!(
        out.iter().any(|o| o
            .result
            .as_ref()
            .is_err_and(|e| e.to_string().contains("belongs to another party"))),
        "{out:?}"
    );

    // Without the networks' ids, adopting would renumber them: refused, naming why.
    let settings = Settings {
        adopt: true,
        ..Default::default()
    };
    let unnumbered = udn::world_in(&networks(), &State::default(), settings.clone());
    let out = udn::outcomes(&r, &unnumbered, 1).await;
    let refused: Vec<String> = out
        .iter()
        .filter_map(|o| o.result.as_ref().err().map(|e| format!("{}: {e}", o.key)))
        .collect();
    assert_eq!(refused.len(), 3, "{refused:?}");
    assert!(
        refused.iter().all(|e| e.contains("rows of OVN-Kubernetes'")
            && e.contains("id is not known")
            && e.contains("adopting would renumber it")),
        "{refused:?}"
    );
    let owner = sb
        .nbctl(&[
            "get",
            "Logical_Router",
            "cluster_udn_blue_ovn_cluster_router",
            "external_ids",
        ])
        .unwrap();
    assert!(!owner.contains("owner-type"), "not adopted: {owner}");

    let world = udn::world_in(&networks_with_ids(), &State::default(), settings);
    let out = udn::apply(&r, &world).await;
    let adopted: usize = out
        .iter()
        .map(|o| o.result.as_ref().map_or(0, |p| p.adopted.len()))
        .sum();
    let inserted: usize = out
        .iter()
        .map(|o| o.result.as_ref().map_or(0, |p| p.inserted.len()))
        .sum();
    assert!(adopted > 50, "{adopted} rows adopted");
    let after = rows(&r);
    for (table, uuid) in theirs.keys() {
        assert!(
            after.contains_key(&(table.clone(), uuid.clone())),
            "{table} {uuid} deleted or recreated"
        );
    }
    // Every row netconnect holds now is one of OVN-Kubernetes' or one it inserted.
    assert_eq!(after.len(), theirs.len() + inserted, "{inserted} inserted");
    let stamped = after
        .values()
        .filter(|row| {
            row.get("external_ids")
                .and_then(|d| d.get_str("k8s.ovn.org/owner-type"))
                .is_some()
        })
        .count();
    assert!(
        stamped >= adopted,
        "{stamped} rows stamped, {adopted} adopted"
    );
    let again = udn::apply(&r, &world).await;
    for o in &again {
        let plan = o.result.as_ref().unwrap();
        assert!(plan.is_empty(), "{}: {}", o.key, plan);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_without_the_networks_definitions_numbers_them_as_their_rows_do() {
    // OVN-Kubernetes numbered blue 7, green 5, yellow 9 (not the name order netconnect
    // would number them in); the manifests lack the NetworkAttachmentDefinitions that
    // say so. The numbers are read off the rows (the transit switches' tunnel keys,
    // the Layer2 transit router's), and the takeover changes no column but the owner
    // keys: nothing renumbered.
    use netconnect::reconcile::dry_run::DryRun;
    use netconnect::world::numbers;
    let sb = sandbox();
    let (r, _events) = udn::reconciler(&sb.nb.unix_remote()).await;
    ovn_kubernetes_nb_of(&r, &numbered_networks()).await;

    let read = numbers::read(&r.cache().snapshot());
    let ids: Vec<(&str, u32)> = read.ids.iter().map(|(n, i)| (n.as_str(), *i)).collect();
    assert_eq!(
        ids,
        [
            ("cluster_udn_blue", 7),
            ("cluster_udn_green", 5),
            ("cluster_udn_yellow", 9)
        ]
    );
    let keys = read.tunnel_keys["cluster_udn_yellow"].clone();
    assert_eq!(keys[0], 16_711_683 + 9, "{keys:?}");
    assert_eq!(read.tunnel_keys.len(), 1, "{:?}", read.tunnel_keys);

    let settings = Settings {
        adopt: true,
        numbers_in_nb: Some(std::sync::Arc::new(read)),
        ..Default::default()
    };
    let world = udn::world_in(&networks(), &State::default(), settings);
    assert_eq!(world.allocations.network_ids["cluster_udn_blue"], 7);
    assert_eq!(world.allocations.tunnel_keys["cluster_udn_yellow"], keys);
    let snap = r.cache().snapshot();
    let mut dry = DryRun::of(&snap, r.cache().schema().unwrap()).unwrap();
    let mut adopted = 0;
    for key in netconnect::controller::all_keys(&world, &r) {
        let plan = dry.plan(&world.desired(&key).unwrap()).unwrap();
        adopted += plan.adopted.len();
        assert!(plan.inserted.is_empty(), "{key}: {plan}");
        assert!(plan.deleted.is_empty(), "{key}: {plan}");
        for (row, columns) in &plan.updated {
            assert_eq!(columns, &["external_ids"], "{key}: {row} renumbered");
        }
    }
    assert!(adopted > 50, "{adopted} rows adopted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netconnectd_audits_and_takes_over_without_the_definitions_keeping_the_numbers() {
    // The same NB (blue 7, green 5, yellow 9) and manifests without the NADs, through
    // the command: `--plan --adopt` plans owner keys only; `--once --adopt` takes
    // over, the transit switches keep their keys, the status files say the ids.
    let sb = sandbox();
    let (r, _events) = udn::reconciler(&sb.nb.unix_remote()).await;
    ovn_kubernetes_nb_of(&r, &numbered_networks()).await;
    let m = tempfile::tempdir().unwrap();
    let s = tempfile::tempdir().unwrap();
    std::fs::write(m.path().join("networks.yaml"), networks()).unwrap();
    let run = |extra: &[&str]| {
        std::process::Command::new(integration_tests::binary("netconnectd"))
            .args(["--nb", &sb.nb.unix_remote(), "--manifests"])
            .arg(m.path())
            .arg("--status-dir")
            .arg(s.path())
            .args(["--adopt", "ovn-kubernetes"])
            .args(extra)
            .output()
            .unwrap()
    };
    let plan = run(&["--plan"]);
    let text = String::from_utf8_lossy(&plan.stdout).into_owned();
    assert_eq!(plan.status.code(), Some(2), "{text}");
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("  ")).collect();
    assert!(
        rows.iter().filter(|l| l.starts_with("  adopt ")).count() > 50,
        "{text}"
    );
    for line in &rows {
        let owner_keys_only = line.starts_with("  adopt ") && line.ends_with(": external_ids");
        // (A Layer2 network on two nodes of one NB says it cannot reach both hosts.)
        let note = line.starts_with("  not written ") || line.starts_with("  incomplete: ");
        assert!(owner_keys_only || note, "{line}\n{text}");
    }
    let once = run(&["--once"]);
    let out = String::from_utf8_lossy(&once.stdout).into_owned();
    assert!(
        once.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&once.stderr)
    );
    let key = |switch: &str| {
        sb.nbctl(&[
            "get",
            "Logical_Switch",
            switch,
            "other_config:requested-tnl-key",
        ])
        .unwrap()
    };
    assert_eq!(
        key("cluster_udn_blue_transit_switch").trim(),
        "\"16711690\""
    );
    assert_eq!(
        key("cluster_udn_green_transit_switch").trim(),
        "\"16711688\""
    );
    let status =
        std::fs::read_to_string(s.path().join("ClusterUserDefinedNetwork/yellow.yaml")).unwrap();
    assert!(status.contains("k8s.ovn.org/network-id: '9'"), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_keep_pinging_through_a_takeover() {
    // Two pods of OVN-Kubernetes' blue network on two nodes (their path crosses the
    // network's cluster router): pinging all the while netconnect adopts the rows,
    // not one reply is lost.
    let sb = sandbox();
    let mut chassis = ovn_sandbox::Chassis::start(&sb, "chassis-1").unwrap();
    let (r, _events) = udn::reconciler(&sb.nb.unix_remote()).await;
    ovn_kubernetes_nb(&r).await;
    let plain = udn::world(&networks(), &State::default(), None);
    let hosts = &plain.allocations.host_subnets["cluster_udn_blue"];
    let pod = |chassis: &mut ovn_sandbox::Chassis, node: &str| {
        let subnet = hosts[node][0];
        let ip = netconnect::ovnk::addr::nth(&subnet, 5).unwrap();
        let gw = netconnect::ovnk::addr::nth(&subnet, 1).unwrap();
        let p = udn::add_pod(
            &sb,
            chassis,
            &format!("cluster_udn_blue_{node}"),
            &format!("blue_pod_{node}"),
            &[&format!("{ip}/{}", subnet.prefix_len())],
            &[&gw.to_string()],
        );
        (p, ip)
    };
    let (a, _) = pod(&mut chassis, "node-a");
    let (_b, b_ip) = pod(&mut chassis, "node-b");
    sb.sync_hv().unwrap();
    assert!(
        chassis.ping(&a, b_ip, 3).unwrap(),
        "blue's pods ping before"
    );

    let netns = a.netns.clone();
    let pinging = tokio::task::spawn_blocking(move || {
        std::process::Command::new("ip")
            .args([
                "netns", "exec", &netns, "ping", "-c", "150", "-i", "0.02", "-W", "1",
            ])
            .arg(b_ip.to_string())
            .output()
    });
    let settings = Settings {
        adopt: true,
        ..Default::default()
    };
    let world = udn::world_in(&networks_with_ids(), &State::default(), settings);
    let takeover = async {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let out = udn::apply(&r, &world).await;
        let adopted: usize = out
            .iter()
            .map(|o| o.result.as_ref().map_or(0, |p| p.adopted.len()))
            .sum();
        sb.sync_hv().unwrap();
        adopted
    };
    let started = std::time::Instant::now();
    let (adopted, ping) = tokio::join!(takeover, pinging);
    // The pings (3 s) span the takeover (from 0.5 s).
    assert!(started.elapsed() > std::time::Duration::from_secs(2));
    let ping = ping.unwrap().unwrap();
    let text = String::from_utf8_lossy(&ping.stdout);
    assert!(adopted > 50, "{adopted} rows adopted");
    assert!(
        text.contains("150 packets transmitted, 150 received"),
        "a reply lost during the takeover:\n{text}"
    );
}

/// Three drifts by hand in OVN-Kubernetes' NB: blue's `rtos-…node-a` MAC changed, the
/// first policy of green's router taken out of it (its priority and match returned),
/// a policy netconnect does not write added to blue's router (priority 1234).
async fn drift(
    sb: &integration_tests::Sandbox,
    r: &netconnect::reconcile::Reconciler,
) -> (String, String) {
    let port = "rtos-cluster_udn_blue_node-a";
    sb.nbctl(&[
        "set",
        "Logical_Router_Port",
        port,
        "mac=\"0a:58:00:00:00:99\"",
    ])
    .unwrap();
    let green = "cluster_udn_green_ovn_cluster_router";
    let policies = sb
        .nbctl(&[
            "--bare",
            "--columns=policies",
            "list",
            "Logical_Router",
            green,
        ])
        .unwrap();
    let gone = policies.split_whitespace().next().unwrap().to_owned();
    let gone_match = sb
        .nbctl(&[
            "--bare",
            "--columns=match",
            "list",
            "Logical_Router_Policy",
            &gone,
        ])
        .unwrap();
    let gone_priority = sb
        .nbctl(&[
            "--bare",
            "--columns=priority",
            "list",
            "Logical_Router_Policy",
            &gone,
        ])
        .unwrap();
    sb.nbctl(&["remove", "Logical_Router", green, "policies", &gone])
        .unwrap();
    let blue = "cluster_udn_blue_ovn_cluster_router";
    sb.nbctl(&["lr-policy-add", blue, "1234", "ip4.src == 1.2.3.4", "allow"])
        .unwrap();
    let sync = std::time::Duration::from_secs(10);
    r.cache()
        .wait_for(sync, |s| {
            s.table("Logical_Router_Policy").iter().any(|(_, row)| {
                row.get("priority").and_then(|d| d.as_scalar()) == Some(&1234.into())
            })
        })
        .await;
    (gone_priority, gone_match)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audit_names_every_drift_and_every_row_it_would_not_write() {
    // `--plan --adopt ovn-kubernetes` over OVN-Kubernetes' NB with three drifts made by
    // hand: a column changed (a router port's MAC), a row deleted (a policy), a row
    // netconnect does not write added (a policy). The audit names the three, plans no
    // change but the owner keys for every other row, and writes nothing.
    use netconnect::reconcile::dry_run::DryRun;
    let sb = sandbox();
    let (r, _events) = udn::reconciler(&sb.nb.unix_remote()).await;
    ovn_kubernetes_nb(&r).await;
    let (port, green, blue) = (
        "rtos-cluster_udn_blue_node-a",
        "cluster_udn_green_ovn_cluster_router",
        "cluster_udn_blue_ovn_cluster_router",
    );
    let (gone_priority, gone_match) = drift(&sb, &r).await;
    let before = without_ovn_columns(rows(&r));

    let settings = Settings {
        adopt: true,
        ..Default::default()
    };
    let world = udn::world_in(&networks_with_ids(), &State::default(), settings);
    let snap = r.cache().snapshot();
    let mut dry = DryRun::of(&snap, r.cache().schema().unwrap()).unwrap();
    let (mut inserted, mut updated, mut theirs, mut deleted) = (vec![], vec![], vec![], vec![]);
    let mut adopted = 0;
    for key in netconnect::controller::all_keys(&world, &r) {
        let plan = dry.plan(&world.desired(&key).unwrap()).unwrap();
        adopted += plan.adopted.len();
        inserted.extend(plan.inserted.iter().map(ToString::to_string));
        deleted.extend(plan.deleted.iter().map(ToString::to_string));
        theirs.extend(plan.theirs.iter().map(ToString::to_string));
        for (row, columns) in &plan.updated {
            if columns != &["external_ids"] {
                updated.push(format!("{row}: {}", columns.join(", ")));
            }
        }
        let text = plan.to_string();
        if plan.theirs.iter().any(|t| t.to_string().contains("1234")) {
            assert!(
                text.contains(&format!(
                    "not written Logical_Router_Policy {blue}|1234|ip4.src == 1.2.3.4"
                )),
                "{text}"
            );
        }
    }
    assert!(adopted > 50, "{adopted} rows adopted");
    assert_eq!(
        inserted,
        [format!(
            "Logical_Router_Policy {green}|{}|{}",
            gone_priority.trim(),
            gone_match.trim().trim_matches('"')
        )],
        "the policy deleted"
    );
    assert_eq!(
        updated,
        [
            format!("Logical_Router_Port {port}: external_ids, mac"),
            format!("Logical_Router {green}: external_ids, policies"),
        ],
        "the column changed, the policy deleted put back in its router"
    );
    assert_eq!(
        theirs,
        [format!(
            "Logical_Router_Policy {blue}|1234|ip4.src == 1.2.3.4"
        )],
        "the row netconnect would not write"
    );
    assert!(deleted.is_empty(), "{deleted:?}");
    // Nothing was written (ovn-northd may still set a port's `up` meanwhile).
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(without_ovn_columns(rows(&r)), before);
}

/// `rows` without the columns OVN's daemons write (ovn-northd sets a port's `up`
/// when it gets to it, whoever wrote the port).
fn without_ovn_columns(
    rows: BTreeMap<(String, String), ovsdb_proto::Row>,
) -> BTreeMap<(String, String), ovsdb_proto::Row> {
    rows.into_iter()
        .map(|(k, row)| (k, udn::without_ovn_columns(row)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_beside_ovn_kubernetes_carries_pings_between_its_networks() {
    // Pods of OVN-Kubernetes' blue and green networks, on two nodes: apart before, they
    // ping each other once netconnect (--manage connects) adds the connect.
    let sb = sandbox();
    let mut chassis = ovn_sandbox::Chassis::start(&sb, "chassis-1").unwrap();
    let (r, _events) = udn::reconciler(&sb.nb.unix_remote()).await;
    ovn_kubernetes_nb(&r).await;
    let plain = udn::world(&networks(), &State::default(), None);
    let mut pod = |net: &str, node: &str| {
        let subnet = plain.allocations.host_subnets[&format!("cluster_udn_{net}")][node][0];
        let ip = netconnect::ovnk::addr::nth(&subnet, 5).unwrap();
        let gw = netconnect::ovnk::addr::nth(&subnet, 1).unwrap();
        let p = udn::add_pod(
            &sb,
            &mut chassis,
            &format!("cluster_udn_{net}_{node}"),
            &format!("{net}_pod_{node}"),
            &[&format!("{ip}/{}", subnet.prefix_len())],
            &[&gw.to_string()],
        );
        (p, ip)
    };
    let (blue, blue_ip) = pod("blue", "node-a");
    let (green, green_ip) = pod("green", "node-b");
    sb.sync_hv().unwrap();
    assert!(
        !chassis.ping(&blue, green_ip, 2).unwrap(),
        "blue reaches green before the connect"
    );

    let settings = Settings {
        manage: Manage::Connects,
        ..Default::default()
    };
    let yaml = networks_with_ids() + &connect("colored");
    let world = udn::world_in(&yaml, &State::default(), settings);
    udn::apply(&r, &world).await;
    sb.sync_hv().unwrap();
    assert!(
        chassis.ping(&blue, green_ip, 3).unwrap(),
        "blue (node-a) to green (node-b) through the connect"
    );
    assert!(chassis.ping(&green, blue_ip, 3).unwrap(), "green to blue");
}
