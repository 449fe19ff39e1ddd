//! Building inputs from YAML text, for unit tests.

use std::path::Path;

use crate::alloc::{allocate, Allocations, ClusterConfig};
use crate::api::load::parse_file;
use crate::api::{Context, Inventory};

/// The inventory and allocations of the objects in `yaml`; panics on any problem.
pub(crate) fn cluster(yaml: &str) -> (Inventory, Allocations) {
    cluster_in(yaml, &Context::default())
}

/// [`cluster`] with `context` (its reserved ranges, say).
pub(crate) fn cluster_in(yaml: &str, context: &Context) -> (Inventory, Allocations) {
    let files = [parse_file(Path::new("test.yaml"), yaml)];
    let inv = Inventory::build(&files, context);
    assert!(inv.problems.is_empty(), "{:#?}", inv.problems);
    let (alloc, problems) = allocate(&inv, &ClusterConfig::default());
    assert!(problems.is_empty(), "{problems:#?}");
    (inv, alloc)
}

/// A node document.
pub(crate) fn node(name: &str, annotations: &[(&str, &str)]) -> String {
    let mut s =
        format!("---\napiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  annotations:\n");
    for (k, v) in annotations {
        s.push_str(&format!("    {k}: '{v}'\n"));
    }
    if annotations.is_empty() {
        s.push_str("    {}\n");
    }
    s
}

/// A ClusterIP service document on TCP port 80 with `cluster_ips` (the first is
/// `clusterIP`).
pub(crate) fn service(namespace: &str, name: &str, cluster_ips: &[&str]) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {namespace}}}\n\
         spec: {{clusterIP: '{}', clusterIPs: [{}], ports: [{{port: 80}}]}}\n",
        cluster_ips[0],
        cluster_ips
            .iter()
            .map(|ip| format!("'{ip}'"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Random numbers from `seed` (xorshift): each call of the result gives one below its
/// argument. Randomized tests draw their cases from a fixed seed, so that a failure
/// repeats.
pub(crate) fn random(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}
