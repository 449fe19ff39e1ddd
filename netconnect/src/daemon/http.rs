//! netconnectd's HTTP endpoints (`--listen`):
//!
//! - `/healthz`: 200 while the process serves;
//! - `/readyz`: 200 once the NB cache is synced and the first pass over every key is
//!   done, while the cache is connected (503 again while it is not) (a replica standing by: once synced; the body says `ready (active)` or
//!   `ready (standby)`), 503 before;
//! - `/status`: JSON: readiness, the replica's role (`single`, `starting`, `active`,
//!   `standby`), each key's last outcome, the input problems, each
//!   ClusterNetworkConnect's acceptance;
//! - `/metrics`: [`super::metrics`], Prometheus text format.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::metrics::Metrics;
use crate::controller::Reports;
use crate::reconcile::Reconciler;
use crate::world::World;

/// What the endpoints read.
pub struct Shared {
    /// Set once the first pass is done.
    pub ready: AtomicBool,
    /// Each key's last outcome.
    pub reports: Reports,
    /// The current inputs.
    pub world: watch::Receiver<Arc<World>>,
    /// The reconciler (its counters, its cache).
    pub reconciler: Arc<Reconciler>,
    /// The metrics.
    pub metrics: Metrics,
    /// The controller's queue (its depth, its oldest reconcile in flight).
    pub(crate) queue: Arc<crate::controller::KeyQueue>,
    /// When and why the NB was last found restored from a backup.
    pub(crate) restored: crate::controller::Restored,
    /// What this replica is, when it is one of several (`--lock`).
    pub(crate) role: Option<watch::Receiver<super::replica::Role>>,
}

impl Shared {
    /// Ready: the first pass done (or standing by), and the cache synced over a live
    /// connection now (cut off from the NB, the daemon writes nothing: not ready until
    /// it is back).
    fn is_ready(&self) -> bool {
        let cache = self.reconciler.cache();
        self.ready.load(Ordering::Relaxed) && cache.client().is_some_and(|c| !c.is_closed())
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(s): State<Arc<Shared>>) -> impl IntoResponse {
    let role = s.role.as_ref().map(|r| *r.borrow());
    match (s.is_ready(), role) {
        (true, None) => (StatusCode::OK, "ready\n".to_owned()),
        (true, Some(r)) => (StatusCode::OK, format!("ready ({})\n", r.as_str())),
        (false, _) => (StatusCode::SERVICE_UNAVAILABLE, "not ready\n".to_owned()),
    }
}

async fn status(State(s): State<Arc<Shared>>) -> impl IntoResponse {
    let world = s.world.borrow().clone();
    // The keys of the inputs now, and the removals still failing: a network deleted
    // is no longer listed once its rows are gone.
    let current: std::collections::HashSet<crate::keys::Key> = world.keys().into_iter().collect();
    let keys: Vec<serde_json::Value> = {
        let reports = s.reports.lock().unwrap_or_else(|e| e.into_inner());
        reports
            .iter()
            .filter(|(k, r)| current.contains(*k) || r.result.is_err())
            .map(|(k, r)| {
                serde_json::json!({
                    "key": k.to_string(),
                    "ok": r.result.is_ok(),
                    "result": match &r.result { Ok(v) | Err(v) => v },
                    "failures": r.failures,
                    "transactions": r.transactions,
                    "lastReconcile": r.at,
                    "tookSeconds": r.took.as_secs_f64(),
                })
            })
            .collect()
    };
    let connects: serde_json::Map<String, serde_json::Value> = world
        .allocations
        .connects
        .iter()
        .map(|(name, c)| {
            let (accepted, reason, message) = match &c.accepted {
                Ok(()) => (true, String::new(), String::new()),
                Err(r) => (false, r.reason.to_string(), r.message.clone()),
            };
            (
                name.clone(),
                serde_json::json!({
                    "accepted": accepted,
                    "reason": reason,
                    "message": message,
                    "tunnelKey": c.tunnel_key,
                    "networks": c.networks.values().collect::<Vec<_>>(),
                }),
            )
        })
        .collect();
    let body = serde_json::json!({
        "ready": s.is_ready(),
        "role": s.role.as_ref().map_or("single", |r| r.borrow().as_str()),
        "zone": world.zone_name(),
        "keys": keys,
        "problems": world.problems.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "connects": connects,
        "nbBehind": s.restored.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        "transactions": s.reconciler.transactions(),
        "rowsWritten": s.reconciler.rows_written(),
    });
    axum::Json(body)
}

async fn metrics(State(s): State<Arc<Shared>>) -> impl IntoResponse {
    let world = s.world.borrow().clone();
    let text = s.metrics.render(&world, &s.reconciler, s.queue.depth());
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
}

/// Serves the endpoints on `listener` until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/status", get(status))
        .route("/metrics", get(metrics))
        .with_state(shared);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}
