//! Writing what a key wants: diff its desired rows against a snapshot of the NB
//! ([`diff::plan`], pure) and send the result as one transaction over the cache's
//! connection, waiting until the cache shows it so that the key's next reconcile reads
//! its own writes.

pub mod diff;
pub mod nb;
pub mod plan;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ovsdb_proto::cache::Cache;
use ovsdb_proto::Operation;

pub use diff::PlanError;
pub use nb::NbIndexes;
pub use plan::Plan;

use crate::topology::Desired;

/// Why a key was not reconciled.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The cache is not synced with a usable server.
    #[error("the NB cache is not connected")]
    NotConnected,
    /// The key's rows cannot be built from the inputs.
    #[error(transparent)]
    Build(#[from] crate::topology::BuildError),
    /// The key's rows cannot be planned (a conflict, a missing dependency, …).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The transaction failed, or its outcome is unknown.
    #[error("transaction failed: {0}")]
    Nb(#[from] ovsdb_proto::Error),
}

impl ReconcileError {
    /// True when trying again later may succeed without any input changing.
    pub fn is_transient(&self) -> bool {
        match self {
            ReconcileError::NotConnected => true,
            ReconcileError::Build(_) => false,
            ReconcileError::Plan(PlanError::MissingDependency { .. }) => true,
            ReconcileError::Plan(_) => false,
            ReconcileError::Nb(_) => true,
        }
    }
}

/// Applies desired rows to the NB through a cache.
pub struct Reconciler {
    cache: Arc<Cache>,
    nb: NbIndexes,
    /// How long to wait for the cache to show a transaction.
    pub wait: Duration,
    transactions: AtomicU64,
    rows_written: AtomicU64,
    /// The planner for the schema last seen.
    planner: std::sync::Mutex<Option<Arc<diff::Planner>>>,
}

impl Reconciler {
    /// A reconciler over `cache`, whose config had `nb` registered.
    pub fn new(cache: Arc<Cache>, nb: NbIndexes) -> Reconciler {
        Reconciler {
            cache,
            nb,
            wait: Duration::from_secs(30),
            transactions: AtomicU64::new(0),
            rows_written: AtomicU64::new(0),
            planner: std::sync::Mutex::new(None),
        }
    }

    /// The cache.
    pub fn cache(&self) -> &Arc<Cache> {
        &self.cache
    }

    /// The cache's indexes.
    pub fn indexes(&self) -> &NbIndexes {
        &self.nb
    }

    /// What reconciling `desired` would write now.
    pub fn plan(&self, desired: &Desired) -> Result<Plan, ReconcileError> {
        let schema = self.cache.schema().ok_or(ReconcileError::NotConnected)?;
        let planner = {
            let mut p = self.planner.lock().unwrap_or_else(|e| e.into_inner());
            match &*p {
                Some(pl) if Arc::ptr_eq(pl.schema(), &schema) || **pl.schema() == *schema => {
                    pl.clone()
                }
                _ => {
                    let pl = Arc::new(diff::Planner::new(schema));
                    *p = Some(pl.clone());
                    pl
                }
            }
        };
        let snap = self.cache.snapshot();
        let mut plan = planner.plan(desired, &snap, &self.nb)?;
        plan.incomplete = desired.incomplete.clone();
        Ok(plan)
    }

    /// Writes what `desired` needs, in one transaction (none when nothing differs), and
    /// waits until the cache shows it.
    pub async fn apply(&self, desired: &Desired) -> Result<Plan, ReconcileError> {
        let plan = self.plan(desired)?;
        if plan.is_empty() {
            return Ok(plan);
        }
        let mut ops = plan.operations.clone();
        ops.push(Operation::Comment(format!("netconnect: {}", desired.owner)));
        self.transactions.fetch_add(1, Ordering::Relaxed);
        self.rows_written.fetch_add(
            (plan.inserted.len() + plan.updated.len() + plan.deleted.len()) as u64,
            Ordering::Relaxed,
        );
        self.cache.transact_and_wait(&ops, self.wait).await?;
        Ok(plan)
    }

    /// Transactions sent so far.
    pub fn transactions(&self) -> u64 {
        self.transactions.load(Ordering::Relaxed)
    }

    /// Rows inserted, updated or deleted so far.
    pub fn rows_written(&self) -> u64 {
        self.rows_written.load(Ordering::Relaxed)
    }
}
