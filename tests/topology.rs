//! Primary UDN topologies written by netconnect's reconciler into a real NB, checked
//! by ovn-northd and ovn-nbctl.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use netconnect::alloc::{allocate, ClusterConfig};
use netconnect::api::load::parse_file;
use netconnect::api::{Context, Inventory};
use netconnect::reconcile::{NbIndexes, Reconciler};
use netconnect::topology::{self, Inputs, TopologyConfig};
use ovsdb_proto::cache::{Cache, CacheConfig};

use integration_tests::sandbox;

const MANIFESTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: blue, labels: {tenant: blue}}
---
apiVersion: k8s.ovn.org/v1
kind: ClusterUserDefinedNetwork
metadata: {name: blue}
spec:
  namespaceSelector: {matchLabels: {tenant: blue}}
  network:
    topology: Layer3
    layer3:
      role: Primary
      subnets: [{cidr: 10.10.0.0/16, hostSubnet: 24}, {cidr: 10.11.0.0/16, hostSubnet: 24}, {cidr: "fd10::/48"}]
---
apiVersion: k8s.ovn.org/v1
kind: UserDefinedNetwork
metadata: {name: net, namespace: yellow}
spec:
  topology: Layer2
  layer2: {role: Primary, subnets: [10.20.0.0/16, "fd20::/64"]}
"#;

fn nodes() -> String {
    let mut s = String::new();
    for (i, n) in ["node-a", "node-b", "node-c"].iter().enumerate() {
        s.push_str(&format!(
            "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: {n}\n  annotations:\n    k8s.ovn.org/node-chassis-id: chassis-{i}\n"
        ));
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layer3_and_layer2_networks_are_accepted_by_northd_and_idempotent() {
    let sb = sandbox();
    let files = [parse_file(
        Path::new("m.yaml"),
        &(MANIFESTS.to_string() + &nodes()),
    )];
    let inv = Inventory::build(&files, &Context::default());
    assert!(inv.problems.is_empty(), "{:?}", inv.problems);
    let (alloc, problems) = allocate(&inv, &ClusterConfig::default());
    assert!(problems.is_empty(), "{problems:?}");
    let config = TopologyConfig::default();
    let inputs = Inputs {
        inventory: &inv,
        allocations: &alloc,
        zone: None,
        config: &config,
    };

    let mut cc = CacheConfig::new(
        vec![sb.nb.unix_remote().parse().unwrap()],
        "OVN_Northbound",
        &[],
    );
    let nb = NbIndexes::register(&mut cc);
    let (cache, _events) = Cache::start(cc);
    let cache = Arc::new(cache);
    tokio::time::timeout(Duration::from_secs(10), cache.wait_until_ready())
        .await
        .unwrap();
    let r = Reconciler::new(cache.clone(), nb);

    let mut keys = vec![topology::cluster::build()];
    for name in inv.networks.keys() {
        keys.push(topology::network(&inputs, name).unwrap());
    }
    for d in &keys {
        let plan = r
            .apply(d)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", d.owner));
        println!("{plan}");
    }
    let first = r.transactions();
    assert_eq!(first, keys.len() as u64);
    for d in &keys {
        let plan = r.apply(d).await.unwrap();
        assert!(plan.is_empty(), "second pass wants to write:\n{plan}");
    }
    assert_eq!(r.transactions(), first, "no transaction on a second pass");
    sb.sync().unwrap();
    let log = std::fs::read_to_string(sb.northd_log()).unwrap();
    let bad: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("|WARN|") || l.contains("|ERR|"))
        .collect();
    assert!(bad.is_empty(), "northd complained:\n{}", bad.join("\n"));
    println!("{}", sb.nbctl(&["show"]).unwrap());
}
