//! netconnectd's metrics, in the Prometheus text format:
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `netconnect_reconciles_total` | counter | `kind` (cluster, network, virtual_network, pod, service, connect, connect_network, gone), `result` (written, unchanged, error) |
//! | `netconnect_reconcile_duration_seconds` | histogram | `kind` |
//! | `netconnect_transactions_total` | counter | |
//! | `netconnect_rows_written_total` (rows of committed transactions) | counter | |
//! | `netconnect_cache_connections_total` | counter | |
//! | `netconnect_cache_resyncs_total` | counter | |
//! | `netconnect_objects` | gauge | `kind` (valid objects read) |
//! | `netconnect_problems` | gauge | `kind` (of the object refused, partly refused or not allocated; `file` for a file that cannot be read) |
//! | `netconnect_connects` | gauge | `accepted` (true, false), `reason` |
//! | `netconnect_nb_connected` | gauge | (1 while the NB cache is synced with a server) |
//! | `netconnect_queue_waiting`, `netconnect_queue_running` | gauge | (keys waiting, keys being reconciled) |
//! | `netconnect_oldest_running_seconds` | gauge | (how long the longest reconcile in flight has run: a stall, while it lasts) |
//! | `netconnect_build_info` | gauge | `version` (always 1) |

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::keys::Key;
use crate::world::World;

type Labels = Vec<(String, String)>;

/// The kinds `netconnect_problems` always reports (0 when nothing of them is wrong).
const PROBLEM_KINDS: &[&str] = &[
    "file",
    "Node",
    "Namespace",
    "UserDefinedNetwork",
    "ClusterUserDefinedNetwork",
    "ClusterNetworkConnect",
    "Service",
    "EndpointSlice",
    "NetworkAttachmentDefinition",
    "onapNetwork",
    "Pod",
];

/// The registry and its metrics.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<Labels, Counter>,
    duration: Family<Labels, Histogram, fn() -> Histogram>,
    transactions: Counter,
    rows_written: Counter,
    cache_connections: Counter,
    cache_resyncs: Counter,
    objects: Family<Labels, Gauge>,
    problems: Family<Labels, Gauge>,
    connects: Family<Labels, Gauge>,
    nb_connected: Gauge,
    queue_waiting: Gauge,
    queue_running: Gauge,
    oldest_running: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// Serializes scrapes (counters fed from totals are brought up to date then).
    scrape: Mutex<()>,
}

fn histogram() -> Histogram {
    // 1 ms to about 65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// The `kind` label of a key.
pub fn kind(key: &Key) -> &'static str {
    key.kind()
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric, registered.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("netconnect");
        let reconciles = Family::<Labels, Counter>::default();
        registry.register(
            "reconciles",
            "Reconciles of keys, by kind and result",
            reconciles.clone(),
        );
        let duration = Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(
            histogram as fn() -> Histogram,
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time to reconcile a key (build, plan, transaction, cache showing it)",
            duration.clone(),
        );
        let transactions = Counter::default();
        registry.register("transactions", "NB transactions sent", transactions.clone());
        let rows_written = Counter::default();
        registry.register(
            "rows_written",
            "Rows inserted, updated or deleted by committed transactions",
            rows_written.clone(),
        );
        let cache_connections = Counter::default();
        registry.register(
            "cache_connections",
            "Connections on which the NB cache started monitoring",
            cache_connections.clone(),
        );
        let cache_resyncs = Counter::default();
        registry.register(
            "cache_resyncs",
            "Times the NB cache read the whole database",
            cache_resyncs.clone(),
        );
        let objects = Family::<Labels, Gauge>::default();
        registry.register("objects", "Valid objects read, by kind", objects.clone());
        let problems = Family::<Labels, Gauge>::default();
        registry.register(
            "problems",
            "Objects skipped or refused, and allocations that failed, by object kind",
            problems.clone(),
        );
        let connects = Family::<Labels, Gauge>::default();
        registry.register(
            "connects",
            "ClusterNetworkConnects by acceptance and reason",
            connects.clone(),
        );
        let nb_connected = Gauge::default();
        registry.register(
            "nb_connected",
            "1 while the NB cache is synced with a server",
            nb_connected.clone(),
        );
        let queue_waiting = Gauge::default();
        registry.register(
            "queue_waiting",
            "Keys waiting to be reconciled",
            queue_waiting.clone(),
        );
        let queue_running = Gauge::default();
        registry.register(
            "queue_running",
            "Keys being reconciled",
            queue_running.clone(),
        );
        let oldest_running = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        registry.register(
            "oldest_running_seconds",
            "How long the longest reconcile in flight has run",
            oldest_running.clone(),
        );
        let build = Family::<Labels, Gauge>::default();
        registry.register("build_info", "netconnectd's version", build.clone());
        build
            .get_or_create(&vec![(
                "version".to_owned(),
                env!("CARGO_PKG_VERSION").to_owned(),
            )])
            .set(1);
        Metrics {
            nb_connected,
            queue_waiting,
            queue_running,
            oldest_running,
            registry,
            reconciles,
            duration,
            transactions,
            rows_written,
            cache_connections,
            cache_resyncs,
            objects,
            problems,
            connects,
            scrape: Mutex::new(()),
        }
    }

    /// Records one reconcile of `key`.
    pub fn reconciled(&self, key: &Key, written: Option<bool>, took: Duration) {
        let result = match written {
            Some(true) => "written",
            Some(false) => "unchanged",
            None => "error",
        };
        self.reconciles
            .get_or_create(&vec![
                ("kind".to_owned(), kind(key).to_owned()),
                ("result".to_owned(), result.to_owned()),
            ])
            .inc();
        self.duration
            .get_or_create(&vec![("kind".to_owned(), kind(key).to_owned())])
            .observe(took.as_secs_f64());
    }

    /// The text exposition, with the totals kept elsewhere brought up to date.
    pub(crate) fn render(
        &self,
        world: &World,
        reconciler: &crate::reconcile::Reconciler,
        (waiting, running, oldest): (usize, usize, Duration),
    ) -> String {
        let (transactions, rows_written) = (reconciler.transactions(), reconciler.rows_written());
        let cache = reconciler.cache().stats();
        let _one = self.scrape.lock().unwrap_or_else(|e| e.into_inner());
        self.nb_connected.set(i64::from(
            reconciler.cache().client().is_some_and(|c| !c.is_closed()),
        ));
        self.queue_waiting.set(waiting as i64);
        self.queue_running.set(running as i64);
        self.oldest_running.set(oldest.as_secs_f64());
        let up = |c: &Counter, total: u64| {
            let now = c.get();
            if total > now {
                c.inc_by(total - now);
            }
        };
        up(&self.transactions, transactions);
        up(&self.rows_written, rows_written);
        up(&self.cache_connections, cache.connections());
        up(&self.cache_resyncs, cache.resyncs());
        self.objects.clear();
        let inv = &world.inventory;
        for (k, n) in [
            ("Node", inv.nodes.len()),
            ("Namespace", inv.namespaces.len()),
            ("Network", inv.networks.len()),
            ("ClusterNetworkConnect", inv.connects.len()),
            ("Service", inv.services.len()),
            ("VirtualNetwork", inv.virtual_networks.len()),
            ("Pod", inv.pods.len()),
        ] {
            self.objects
                .get_or_create(&vec![("kind".to_owned(), k.to_owned())])
                .set(n as i64);
        }
        self.problems.clear();
        // Every kind is there, at 0 when nothing of it is wrong.
        for k in PROBLEM_KINDS {
            self.problems
                .get_or_create(&vec![("kind".to_owned(), (*k).to_owned())])
                .set(0);
        }
        for p in &world.problems {
            let kind = p
                .object
                .as_deref()
                .and_then(|o| o.split_once(' '))
                .map_or("file", |(k, _)| k);
            self.problems
                .get_or_create(&vec![("kind".to_owned(), kind.to_owned())])
                .inc();
        }
        self.connects.clear();
        for c in world.allocations.connects.values() {
            let (accepted, reason) = match &c.accepted {
                Ok(()) => ("true", String::new()),
                Err(r) => ("false", r.reason.to_string()),
            };
            self.connects
                .get_or_create(&vec![
                    ("accepted".to_owned(), accepted.to_owned()),
                    ("reason".to_owned(), reason),
                ])
                .inc();
        }
        let mut out = String::new();
        // Writing to a String does not fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}
