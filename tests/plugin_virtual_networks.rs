//! The networking-plugin seed's CreateVL / QueryVL / UpdateVL / DeleteVL against a real
//! NB: the rows the seed describes, one transaction per call, a duplicate refused, other
//! rows untouched; and the example CLI.

use std::process::Command;
use std::time::Duration;

use integration_tests::{sandbox, Sandbox};
use netconnect::virtual_networks::{self as vl, Plugin, VlError};
use ovsdb_proto::cache::{Cache, CacheConfig};

fn plugin() -> Plugin {
    Plugin {
        router: "k8smaster".into(),
        gateway_router: Some("GR_k8smaster".into()),
        join_next_hop: Some("100.64.1.1".parse().unwrap()),
        external_ip: Some("192.168.121.19".parse().unwrap()),
        wait: Duration::from_secs(10),
    }
}

async fn cache(remote: &str) -> Cache {
    let (cache, _) = Cache::start(CacheConfig::new(
        vec![remote.parse().unwrap()],
        "OVN_Northbound",
        &[
            "Logical_Switch",
            "Logical_Switch_Port",
            "Logical_Router",
            "Logical_Router_Port",
            "Logical_Router_Static_Route",
            "NAT",
        ],
    ));
    tokio::time::timeout(Duration::from_secs(10), cache.wait_until_ready())
        .await
        .unwrap();
    cache
}

/// The rows `create("ovn-ls-24", "172.16.24.0/24", "172.16.24.1/24")` writes, as the
/// seed lists them, and the site's own route and NAT kept.
fn assert_created_as_the_seed_shows(sb: &Sandbox) {
    assert_eq!(
        sb.nbctl(&["get", "logical_switch", "ovn-ls-24", "other_config:subnet"])
            .unwrap()
            .trim(),
        "\"172.16.24.0/24\""
    );
    assert_eq!(
        sb.nbctl(&[
            "get",
            "logical_switch",
            "ovn-ls-24",
            "external_ids:gateway_ip"
        ])
        .unwrap()
        .trim(),
        "\"172.16.24.1/24\""
    );
    let lrp = sb.nbctl(&["lrp-list", "k8smaster"]).unwrap();
    assert!(lrp.contains("rtos-ovn-ls-24"), "{lrp}");
    assert_eq!(
        sb.nbctl(&["get", "logical_router_port", "rtos-ovn-ls-24", "networks"])
            .unwrap()
            .trim(),
        "[\"172.16.24.1/24\"]"
    );
    assert_eq!(
        sb.nbctl(&["get", "logical_switch_port", "stor-ovn-ls-24", "type"])
            .unwrap()
            .trim(),
        "router"
    );
    assert_eq!(
        sb.nbctl(&[
            "get",
            "logical_switch_port",
            "stor-ovn-ls-24",
            "options:router-port"
        ])
        .unwrap()
        .trim(),
        "rtos-ovn-ls-24"
    );
    let routes = sb.nbctl(&["lr-route-list", "GR_k8smaster"]).unwrap();
    assert!(
        routes.contains("172.16.24.0/24") && routes.contains("100.64.1.1"),
        "{routes}"
    );
    assert!(
        routes.contains("192.168.121.1"),
        "the site's own route is kept"
    );
    let nats = sb.nbctl(&["lr-nat-list", "GR_k8smaster"]).unwrap();
    assert!(
        nats.contains("192.168.121.19") && nats.contains("172.16.24.0/24"),
        "{nats}"
    );
}

/// Values another writer puts on the virtual network's rows, once the cache shows them.
async fn another_writers_values(sb: &Sandbox, cache: &Cache) {
    sb.nbctl(&[
        "set",
        "logical_switch_port",
        "stor-ovn-ls-24",
        "up=true",
        "external_ids:site=a",
    ])
    .unwrap();
    sb.nbctl(&[
        "set",
        "logical_switch",
        "ovn-ls-24",
        "other_config:mcast_snoop=true",
    ])
    .unwrap();
    sb.nbctl(&[
        "set",
        "logical_router_port",
        "rtos-ovn-ls-24",
        "ipv6_ra_configs:send_periodic=false",
    ])
    .unwrap();
    let seen = |cache: &Cache| {
        let snap = cache.snapshot();
        let lrp = snap
            .table("Logical_Router_Port")
            .values()
            .any(|r| r["ipv6_ra_configs"].len() == 1);
        let ls = snap
            .table("Logical_Switch")
            .values()
            .any(|r| r["other_config"].len() == 2);
        let lsp = snap
            .table("Logical_Switch_Port")
            .values()
            .any(|r| r["external_ids"].get(&"site".into()).is_some());
        lrp && ls && lsp
    };
    tokio::time::timeout(Duration::from_secs(10), async {
        while !seen(cache) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the cache shows the other writer's values");
}

/// [`another_writers_values`], kept by an update.
fn another_writers_values_kept(sb: &Sandbox) {
    let get = |table: &str, row: &str, column: &str| {
        sb.nbctl(&["get", table, row, column])
            .unwrap()
            .trim()
            .to_owned()
    };
    assert_eq!(get("logical_switch_port", "stor-ovn-ls-24", "up"), "true");
    assert_eq!(
        get("logical_switch_port", "stor-ovn-ls-24", "external_ids:site"),
        "a"
    );
    assert_eq!(
        get("logical_switch", "ovn-ls-24", "other_config:mcast_snoop"),
        "\"true\""
    );
    assert_eq!(
        get(
            "logical_router_port",
            "rtos-ovn-ls-24",
            "ipv6_ra_configs:send_periodic"
        ),
        "\"false\""
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_query_update_delete_follow_the_seed() {
    let sb = sandbox();
    // The site made the distributed and gateway routers (the seed assumes them).
    sb.nbctl(&["lr-add", "k8smaster"]).unwrap();
    sb.nbctl(&["lr-add", "GR_k8smaster"]).unwrap();
    sb.nbctl(&["lr-route-add", "GR_k8smaster", "0.0.0.0/0", "192.168.121.1"])
        .unwrap();
    let cache = cache(&sb.nb.unix_remote()).await;
    let p = plugin();

    let vn = vl::create(&cache, &p, "ovn-ls-24", "172.16.24.0/24", "172.16.24.1/24")
        .await
        .unwrap();
    assert_eq!(vn.subnet.to_string(), "172.16.24.0/24");
    assert_created_as_the_seed_shows(&sb);
    sb.sync().unwrap();

    // Create of an existing name is an error, and writes nothing.
    let before = sb.nbctl(&["show"]).unwrap();
    let e = vl::create(&cache, &p, "ovn-ls-24", "172.16.25.0/24", "172.16.25.1")
        .await
        .unwrap_err();
    assert!(matches!(e, VlError::Exists(_)), "{e}");
    assert_eq!(sb.nbctl(&["show"]).unwrap(), before);
    sb.nbctl(&["ls-add", "late"]).unwrap();
    assert!(
        cache
            .wait_for(Duration::from_secs(10), |s| s.table("Logical_Switch").len()
                == 2)
            .await
    );

    // Query returns the typed rows.
    let q = vl::query(&cache.snapshot(), &p, "ovn-ls-24")
        .unwrap()
        .unwrap();
    assert_eq!(q.router_port.mac, "0a:58:ac:10:18:01");
    assert_eq!(q.route.as_ref().unwrap().nexthop, "100.64.1.1");
    assert!(
        vl::query(&cache.snapshot(), &p, "late").unwrap().is_none(),
        "not ours"
    );

    // Another writer's columns and map keys on the rows (ovn-northd's `up` on the
    // switch port among them) are not the plugin's: the update keeps them.
    another_writers_values(&sb, &cache).await;

    // Update moves everything to the new subnet in one transaction.
    let u = vl::update(&cache, &p, "ovn-ls-24", "172.16.124.0/24", "172.16.124.1")
        .await
        .unwrap();
    assert_eq!(u.switch.uuid, vn.switch.uuid, "the same rows, updated");
    assert_eq!(
        u.router_port.networks.iter().collect::<Vec<_>>(),
        ["172.16.124.1/24"]
    );
    assert_eq!(u.snat.as_ref().unwrap().logical_ip, "172.16.124.0/24");
    assert_eq!(u.route.as_ref().unwrap().ip_prefix, "172.16.124.0/24");
    another_writers_values_kept(&sb);

    vl::create(&cache, &p, "ovn-ls-25", "172.16.25.0/24", "172.16.25.1")
        .await
        .unwrap();
    let all: Vec<String> = vl::list(&cache.snapshot(), &p)
        .unwrap()
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert_eq!(all, ["ovn-ls-24", "ovn-ls-25"]);

    // Delete removes its rows only.
    vl::delete(&cache, &p, "ovn-ls-24").await.unwrap();
    assert!(!sb.nbctl(&["ls-list"]).unwrap().contains("ovn-ls-24"));
    assert!(!sb
        .nbctl(&["lrp-list", "k8smaster"])
        .unwrap()
        .contains("rtos-ovn-ls-24"));
    let routes = sb.nbctl(&["lr-route-list", "GR_k8smaster"]).unwrap();
    assert!(
        !routes.contains("172.16.124.0/24")
            && routes.contains("172.16.25.0/24")
            && routes.contains("192.168.121.1"),
        "{routes}"
    );
    assert!(sb.nbctl(&["ls-list"]).unwrap().contains("late"));
    let e = vl::delete(&cache, &p, "ovn-ls-24").await.unwrap_err();
    assert!(matches!(e, VlError::NotFound(_)), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_taken_after_the_cache_read_fails_in_the_transaction() {
    let sb = sandbox();
    sb.nbctl(&["lr-add", "k8smaster"]).unwrap();
    let mut config = CacheConfig::new(
        vec![sb.nb.unix_remote().parse().unwrap()],
        "OVN_Northbound",
        &[
            "Logical_Switch",
            "Logical_Switch_Port",
            "Logical_Router",
            "Logical_Router_Port",
        ],
    );
    config.event_capacity = 1;
    // The event stream is kept and never read: once it is full the cache stops
    // applying updates, so it cannot see the switch made below.
    let (cache, _kept_unread) = Cache::start(config);
    cache.wait_until_ready().await;
    for n in ["x1", "x2", "x3"] {
        sb.nbctl(&["ls-add", n]).unwrap();
    }
    sb.nbctl(&["ls-add", "late"]).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let snap = cache.snapshot();
    assert!(
        !snap
            .table("Logical_Switch")
            .values()
            .any(|r| r["name"] == ovsdb_proto::Datum::scalar("late")),
        "the cache should be stale for this test"
    );
    let p = Plugin {
        gateway_router: None,
        ..plugin()
    };
    let e = vl::create(&cache, &p, "late", "172.16.26.0/24", "172.16.26.1")
        .await
        .unwrap_err();
    assert!(matches!(e, VlError::Exists(_)), "{e}");
    assert!(
        !sb.nbctl(&["lrp-list", "k8smaster"])
            .unwrap()
            .contains("rtos-late"),
        "nothing written"
    );
}

#[test]
fn the_example_cli_runs_each_verb() {
    let sb = sandbox();
    sb.nbctl(&["lr-add", "k8smaster"]).unwrap();
    let bin = integration_tests::example("virtual_networks");
    let run = |args: &[&str]| {
        Command::new(&bin)
            .arg(sb.nb.unix_remote())
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["create", "blue", "10.9.0.0/24", "10.9.0.1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["query", "blue"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("blue subnet=10.9.0.0/24 gateway=10.9.0.1/24 mac=0a:58:0a:09:00:01"),
        "{text}"
    );
    let out = run(&["create", "blue", "10.9.0.0/24", "10.9.0.1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("virtual network blue already exists"));
    let out = run(&["update", "blue", "10.8.0.0/24", "10.8.0.254"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("gateway=10.8.0.254/24"));
    let out = run(&["list"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    assert!(run(&["delete", "blue"]).status.success());
    let out = run(&["query", "blue"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("virtual network blue does not exist"));
}

/// The seed's network definition, verbatim (stray spaces and all), and two more: one
/// with two subnets, one of another plugin's.
const ONAP: &str = r#"
apiVersion: v1
kind: onapNetwork
metadata:
  name: ovn-ls-24
spec:
  config: '{
      "cnitype" : "ovn",
      "name": " ovn-ls-24",
      "subnet": " 172.16.24.0/24",
      "gateway": " 172.16.24.1"
}'
---
apiVersion: v1
kind: onapNetwork
metadata: {name: ovn-ls-25}
spec:
  config: '{"name": "ovn-ls-25", "subnet": ["172.16.25.0/24", "172.16.26.0/24"], "gateway": ["172.16.25.1"]}'
---
apiVersion: v1
kind: onapNetwork
metadata: {name: flannel-net}
spec:
  config: '{"cnitype": "flannel", "name": "flannel-net", "subnet": "10.244.0.0/16"}'
"#;

fn names(sb: &Sandbox, table: &str) -> Vec<String> {
    let mut v: Vec<String> = sb
        .nbctl(&["--bare", "--columns=name", "list", table])
        .unwrap()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    v.sort();
    v
}

/// The distributed router's port per subnet of the two onapNetworks of [`ONAP`], the
/// switch's subnet.
fn assert_router_ports_per_subnet(sb: &Sandbox) {
    let ports = sb.nbctl(&["lrp-list", "ovn_cluster_router"]).unwrap();
    for p in [
        "rtos-ovn-ls-24-172.16.24.0",
        "rtos-ovn-ls-25-172.16.25.0",
        "rtos-ovn-ls-25-172.16.26.0",
    ] {
        assert!(ports.contains(p), "{p}: {ports}");
    }
    assert_eq!(
        sb.nbctl(&[
            "get",
            "logical_router_port",
            "rtos-ovn-ls-25-172.16.26.0",
            "networks"
        ])
        .unwrap()
        .trim(),
        "[\"172.16.26.1/24\"]",
        "the subnet's first address without a gateway"
    );
    assert_eq!(
        sb.nbctl(&["get", "logical_switch", "ovn-ls-24", "other_config:subnet"])
            .unwrap()
            .trim(),
        "\"172.16.24.0/24\""
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn onap_networks_in_the_manifests_are_kept_as_declared() {
    use integration_tests::udn;
    use netconnect::status::dir::State;
    let sb = sandbox();
    let (r, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    // A virtual network made by hand (CreateVL): not netconnectd's.
    sb.nbctl(&["lr-add", "k8smaster"]).unwrap();
    let cache = cache(&sb.nb.unix_remote()).await;
    let by_hand = Plugin {
        router: "k8smaster".into(),
        gateway_router: None,
        join_next_hop: None,
        external_ip: None,
        wait: Duration::from_secs(10),
    };
    vl::create(&cache, &by_hand, "by-hand", "172.16.99.0/24", "172.16.99.1")
        .await
        .unwrap();

    // The site's router missing: each virtual network's key says so, nothing is made.
    let world = udn::world(ONAP, &State::default(), None);
    assert_eq!(
        world.inventory.virtual_networks.keys().collect::<Vec<_>>(),
        ["ovn-ls-24", "ovn-ls-25"],
        "flannel's is another plugin's"
    );
    let out = udn::outcomes(&r, &world, 1).await;
    let failed: Vec<String> = out
        .iter()
        .filter_map(|o| o.result.as_ref().err().map(|e| format!("{}: {e}", o.key)))
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(
        failed
            .iter()
            .all(|f| f.contains("Logical_Router ovn_cluster_router does not exist")),
        "{failed:?}"
    );
    assert_eq!(names(&sb, "Logical_Switch"), ["by-hand"]);

    // The router there: the switches, a router port per subnet.
    sb.nbctl(&["lr-add", "ovn_cluster_router"]).unwrap();
    udn::apply(&r, &world).await;
    assert_eq!(
        names(&sb, "Logical_Switch"),
        ["by-hand", "ovn-ls-24", "ovn-ls-25"]
    );
    assert_router_ports_per_subnet(&sb);
    // northd takes them.
    sb.sync().unwrap();
    let again = udn::apply(&r, &world).await;
    assert!(again.iter().all(|o| o
        .result
        .as_ref()
        .is_ok_and(netconnect::reconcile::Plan::is_empty)));

    // ovn-ls-25 loses its second subnet: that subnet's ports go, the first's stay.
    let updated = ONAP.replace(
        r#""subnet": ["172.16.25.0/24", "172.16.26.0/24"]"#,
        r#""subnet": ["172.16.25.0/24"]"#,
    );
    let world = udn::world(&updated, &State::default(), None);
    udn::apply(&r, &world).await;
    let ports = sb.nbctl(&["lrp-list", "ovn_cluster_router"]).unwrap();
    assert!(!ports.contains("rtos-ovn-ls-25-172.16.26.0"), "{ports}");
    assert!(ports.contains("rtos-ovn-ls-25-172.16.25.0"), "{ports}");
    assert!(!names(&sb, "Logical_Switch_Port").contains(&"stor-ovn-ls-25-172.16.26.0".to_owned()));

    // ovn-ls-24 leaves the manifests: its rows go; the one made by hand stays.
    let without = &updated[updated.find("---").unwrap()..];
    let world = udn::world(without, &State::default(), None);
    udn::apply(&r, &world).await;
    assert_eq!(names(&sb, "Logical_Switch"), ["by-hand", "ovn-ls-25"]);
    let ports = sb.nbctl(&["lrp-list", "ovn_cluster_router"]).unwrap();
    assert!(!ports.contains("ovn-ls-24"), "{ports}");
    assert!(vl::query(&cache.snapshot(), &by_hand, "by-hand")
        .unwrap()
        .is_some());
}

/// Pod `name` in namespace `vnf` with annotation `key` set to `value` (single-quoted).
fn vnf_pod(name: &str, key: &str, value: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: vnf\n  annotations:\n    kubernetes.v1.cni.cncf.io/networks: '[{{\"name\": \"ovn-network\"}}]'\n    {key}: '{value}'\nspec: {{containers: [{{name: c, image: busybox}}]}}\n"
    )
}

#[allow(clippy::too_many_lines)] // a test: one story, start to end
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_get_their_interfaces_and_ping_across_virtual_networks() {
    use integration_tests::udn;
    use netconnect::status::dir::State;
    let sb = sandbox();
    let mut chassis = ovn_sandbox::Chassis::start(&sb, "chassis-1").unwrap();
    sb.nbctl(&["lr-add", "ovn_cluster_router"]).unwrap();
    let (r, _) = udn::reconciler(&sb.nb.unix_remote()).await;
    // pod-a in the seed's one-object form, a static address on ovn-ls-24; pod-b in the
    // list form, dynamic addresses on ovn-ls-25 and ovn-ls-24.
    let a = r#"{"ovnNetwork": [{"name": "ovn-ls-24", "interface": "net0", "defaultGateway": "true", "ip_address": "172.16.24.55/24", "mac_address": "0a:00:00:00:00:4e"}], "ovnNetworkRoutes": [{"dst": "172.16.29.0/24", "gw": "172.16.24.1"}]}"#;
    let b = r#"[{"name": "ovn-ls-25", "interface": "net0"}, {"name": "ovn-ls-24", "interface": "net1"}]"#;
    let yaml = ONAP.to_owned()
        + &vnf_pod("pod-a", "onapnetworks", a)
        + &vnf_pod("pod-b", "ovnNetwork", b)
        + &vnf_pod("plain", "ovn", "{}");
    let world = udn::world(&yaml, &State::default(), None);
    let mut keys: Vec<String> = world.keys().iter().map(ToString::to_string).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "cluster",
            "pod vnf/pod-a",
            "pod vnf/pod-b",
            "virtual network ovn-ls-24",
            "virtual network ovn-ls-25"
        ],
        "a pod without ovnNetwork is not netconnectd's"
    );
    udn::apply(&r, &world).await;

    // The answer to the CNI, in the status directory: a file per pod.
    let dir = tempfile::tempdir().unwrap();
    world.state(&State::default()).save(dir.path()).unwrap();
    let file = |pod: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(dir.path().join(format!("Pod/vnf/{pod}.yaml"))).unwrap();
        serde_yaml_ng::from_str(&text).unwrap()
    };
    let list = |pod: &str| -> serde_json::Value {
        let annotations = &file(pod)["metadata"]["annotations"];
        serde_json::from_str(annotations["ovnIfaceList"].as_str().unwrap()).unwrap()
    };
    assert_eq!(
        list("pod-a"),
        serde_json::json!([{"ip_address": "172.16.24.55/24", "mac_address": "0a:00:00:00:00:4e",
            "gateway_ip": "172.16.24.1", "interface": "net0", "defaultGateway": "true"}])
    );
    assert_eq!(
        file("pod-a")["metadata"]["annotations"]["ovnNetworkRoutes"],
        r#"[{"dst":"172.16.29.0/24","gw":"172.16.24.1"}]"#
    );
    let b_list = list("pod-b");
    assert_eq!(b_list[0]["ip_address"], "172.16.25.2/24");
    assert_eq!(b_list[0]["gateway_ip"], "172.16.25.1");
    assert_eq!(b_list[1]["ip_address"], "172.16.24.2/24");
    assert!(!dir.path().join("Pod/vnf/plain.yaml").exists());

    // The ports, on their networks' switches.
    let ports = |switch: &str| sb.nbctl(&["lsp-list", switch]).unwrap();
    assert!(ports("ovn-ls-24").contains("vnf_pod-a_net0"));
    assert!(ports("ovn-ls-24").contains("vnf_pod-b_net1"));
    assert!(ports("ovn-ls-25").contains("vnf_pod-b_net0"));
    assert_eq!(
        sb.nbctl(&["get", "Logical_Switch_Port", "vnf_pod-a_net0", "addresses"])
            .unwrap()
            .trim(),
        "[\"0a:00:00:00:00:4e 172.16.24.55\"]"
    );

    // The CNI's part, as the answer says: pod-a's net0 and pod-b's net0, on two virtual
    // networks, ping each other through the distributed router.
    let plug = |chassis: &mut ovn_sandbox::Chassis, port: &str, entry: &serde_json::Value| {
        let ip: ipnet::IpNet = entry["ip_address"].as_str().unwrap().parse().unwrap();
        let gw: std::net::IpAddr = entry["gateway_ip"].as_str().unwrap().parse().unwrap();
        let p = chassis
            .add_pod(port, entry["mac_address"].as_str().unwrap(), &[ip], &[gw])
            .unwrap();
        (p, ip.addr())
    };
    let (pa, a_ip) = plug(&mut chassis, "vnf_pod-a_net0", &list("pod-a")[0]);
    let (pb, b_ip) = plug(&mut chassis, "vnf_pod-b_net0", &b_list[0]);
    sb.sync_hv().unwrap();
    assert!(
        chassis.ping(&pa, b_ip, 3).unwrap(),
        "static to dynamic, ovn-ls-24 to ovn-ls-25"
    );
    assert!(chassis.ping(&pb, a_ip, 3).unwrap(), "dynamic to static");

    // pod-b gone: its ports go, pod-a's stay.
    let without_b = ONAP.to_owned() + &vnf_pod("pod-a", "onapnetworks", a);
    let world = udn::world(&without_b, &State::default(), None);
    udn::apply(&r, &world).await;
    let all = sb
        .nbctl(&["--bare", "--columns=name", "list", "Logical_Switch_Port"])
        .unwrap();
    assert!(!all.contains("vnf_pod-b"), "{all}");
    assert!(all.contains("vnf_pod-a_net0"), "{all}");
}
