//! `netconnectd`: programs an OVN Northbound database with the user-defined networks
//! described by Kubernetes objects in a directory of YAML files.
//!
//! ```text
//! netconnectd --nb REMOTE[,REMOTE…] --manifests DIR [--zone NAME] [--status-dir DIR]
//!             [--once] [--plan]
//! ```
//!
//! See `netconnect/README.md` for every flag.

// A faster allocator for the cache's many small rows (the benches use it too).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use std::sync::atomic::{AtomicBool, Ordering};

use netconnect::controller::{self, Backoff, Controller, ReadyTracker};
use netconnect::daemon::http;
use netconnect::daemon::manifests::{self, ManifestDir};
use netconnect::daemon::metrics::Metrics;
use netconnect::reconcile::{NbIndexes, Reconciler};
use netconnect::status;
use netconnect::status::dir::{record_ready, State};
use netconnect::world::{Settings, World};
use ovsdb_proto::cache::{Cache, CacheConfig};
use ovsdb_proto::{Remote, TlsConfig};
use tokio_util::sync::CancellationToken;

/// Programs OVN_Northbound with OVN-Kubernetes' user-defined network topologies.
/// Every option may also be given in the environment (`NETCONNECTD_NB`, …; a flag on
/// the command line wins).
#[derive(Parser, Debug)]
#[command(name = "netconnectd", version)]
struct Args {
    /// The Northbound database: `tcp:IP:PORT`, `ssl:IP:PORT` or `unix:PATH`, several
    /// separated by commas (a raft cluster: only its leader is written to).
    #[arg(long, value_name = "REMOTE[,REMOTE…]", env = "NETCONNECTD_NB")]
    nb: String,
    /// The directory of YAML manifests (Nodes, Namespaces, UserDefinedNetworks,
    /// ClusterUserDefinedNetworks, ClusterNetworkConnects).
    #[arg(long, value_name = "DIR", env = "NETCONNECTD_MANIFESTS")]
    manifests: PathBuf,
    /// The zone whose nodes are local; without it every node is (one NB for the
    /// cluster).
    #[arg(long, value_name = "NAME", env = "NETCONNECTD_ZONE")]
    zone: Option<String>,
    /// The status files: each network, node and connect as annotated, with its status
    /// (also where allocations are kept between runs).
    #[arg(long, value_name = "DIR", env = "NETCONNECTD_STATUS_DIR")]
    status_dir: Option<PathBuf>,
    /// Reconcile everything once, then exit: 0 when every key converged and every
    /// object was valid, 1 otherwise.
    #[arg(long)]
    once: bool,
    /// Print what would be written, per key, and write nothing.
    #[arg(long)]
    plan: bool,
    /// The CA certificate for `ssl:` remotes.
    #[arg(long, value_name = "FILE", env = "NETCONNECTD_CA_CERT")]
    ca_cert: Option<PathBuf>,
    /// This client's certificate for `ssl:` remotes.
    #[arg(long, value_name = "FILE", env = "NETCONNECTD_CERTIFICATE")]
    certificate: Option<PathBuf>,
    /// This client's private key for `ssl:` remotes.
    #[arg(long, value_name = "FILE", env = "NETCONNECTD_PRIVATE_KEY")]
    private_key: Option<PathBuf>,
    /// Service CIDRs of the cluster (networks must stay out of them).
    #[arg(
        long = "service-cidr",
        value_name = "CIDR",
        env = "NETCONNECTD_SERVICE_CIDRS",
        value_delimiter = ','
    )]
    service_cidrs: Vec<ipnet::IpNet>,
    /// Serve `/healthz`, `/readyz`, `/status` and `/metrics` on this address (e.g.
    /// `127.0.0.1:9476`).
    #[arg(long, value_name = "ADDR", env = "NETCONNECTD_LISTEN")]
    listen: Option<std::net::SocketAddr>,
    /// How long `--once` waits for the NB before giving up, in seconds.
    #[arg(long, default_value_t = 30, env = "NETCONNECTD_TIMEOUT")]
    timeout: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new(if args.once || args.plan {
                    "warn"
                } else {
                    "info"
                })
            }),
        )
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("netconnectd: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("netconnectd: {e}");
            ExitCode::FAILURE
        }
    }
}

fn settings(args: &Args) -> Settings {
    let mut s = Settings {
        zone: args.zone.clone(),
        ..Default::default()
    };
    if !args.service_cidrs.is_empty() {
        s.reserved.service_cidrs = args.service_cidrs.clone();
        s.topology.service_cidrs = args.service_cidrs.clone();
    }
    s
}

/// Reads the manifests and the state, and builds the world.
fn load(args: &Args, manifests: &mut ManifestDir) -> Result<(World, State), String> {
    let files = manifests
        .read()
        .map_err(|e| format!("cannot read {}: {e}", args.manifests.display()))?;
    let (state, state_problems) = match &args.status_dir {
        Some(dir) => State::load(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?,
        None => (State::default(), Vec::new()),
    };
    for p in state_problems {
        eprintln!("netconnectd: status dir: {p}");
    }
    Ok((World::build(&files, &state, settings(args)), state))
}

async fn run(args: Args) -> Result<ExitCode, String> {
    let remotes = Remote::parse_list(&args.nb).map_err(|e| format!("--nb {}: {e}", args.nb))?;
    let mut config = CacheConfig::new(remotes, "OVN_Northbound", &[]);
    config.leader_only = true;
    if let Some(ca) = &args.ca_cert {
        config.connect.tls = Some(TlsConfig {
            ca_cert: ca.clone(),
            certificate: args.certificate.clone(),
            private_key: args.private_key.clone(),
        });
    }
    let nb = NbIndexes::register(&mut config);
    let (cache, events) = Cache::start(config);
    let cache = Arc::new(cache);
    let wait = Duration::from_secs(args.timeout);
    if tokio::time::timeout(wait, cache.wait_until_ready())
        .await
        .is_err()
    {
        return Err(format!(
            "no usable Northbound server at {} within {wait:?}",
            args.nb
        ));
    }
    let reconciler = Arc::new(Reconciler::new(cache.clone(), nb));
    let mut manifests = ManifestDir::new(&args.manifests);
    let (world, state) = load(&args, &mut manifests)?;
    for p in &world.problems {
        eprintln!("{p}");
    }

    if args.plan {
        drop(events);
        let snap = cache.snapshot();
        let mut keys = world.keys();
        keys.extend(world.gone_in(&snap, reconciler.indexes()));
        let mut failed = false;
        for key in keys {
            let plan = world
                .desired(&key)
                .map_err(|e| e.to_string())
                .and_then(|d| reconciler.plan(&d).map_err(|e| e.to_string()));
            match plan {
                Ok(p) if p.is_empty() => println!("{key}: unchanged"),
                Ok(p) => {
                    println!("{key}: {}", p.summary());
                    for line in p.to_string().lines().skip(1) {
                        println!("{line}");
                    }
                }
                Err(e) => {
                    failed = true;
                    println!("{key}: cannot plan: {e}");
                }
            }
        }
        return Ok(if failed || !world.problems.is_empty() {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        });
    }

    if let Some(dir) = &args.status_dir {
        world
            .state(&state)
            .save(dir)
            .map_err(|e| format!("cannot write {}: {e}", dir.display()))?;
    }

    if args.once {
        // Nothing reads the cache's events in a single pass; a kept stream would stop
        // the cache once its buffer is full.
        drop(events);
        let outcomes = controller::once(&reconciler, &world, 5, Backoff::default(), 4).await;
        let mut failed = false;
        if let Some(dir) = &args.status_dir {
            let tracker = ReadyTracker::default();
            let mut ready = std::collections::BTreeMap::new();
            for o in &outcomes {
                if let Some((cnc, outcome)) = tracker.record(&world, &o.key, &o.result) {
                    ready.insert(cnc, outcome);
                }
            }
            for (cnc, outcome) in ready {
                let zone = world.zone_name();
                if let Err(e) = record_ready(dir, &cnc, zone, &outcome, &status::now()) {
                    eprintln!("netconnectd: cannot write the status of {cnc}: {e}");
                }
            }
        }
        for o in outcomes {
            match o.result {
                Ok(p) if p.is_empty() => println!("{}: unchanged", o.key),
                Ok(p) => println!("{}: {}", o.key, p.summary()),
                Err(e) => {
                    failed = true;
                    println!("{}: FAILED after {} attempts: {e}", o.key, o.attempts);
                }
            }
        }
        return Ok(if failed || !world.problems.is_empty() {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        });
    }

    // The daemon: reconcile continuously; re-read the manifests when they change.
    let (tx, rx) = tokio::sync::watch::channel(Arc::new(world));
    let mut controller = Controller::new(reconciler.clone(), rx.clone(), Backoff::default());
    let shared = Arc::new(http::Shared {
        ready: AtomicBool::new(false),
        reports: controller.reports(),
        world: rx,
        reconciler: reconciler.clone(),
        metrics: Metrics::new(),
    });
    let tracker = ReadyTracker::default();
    let status_dir = args.status_dir.clone();
    let hook_shared = shared.clone();
    controller = controller.with_hook(Arc::new(move |world, key, result, took| {
        hook_shared
            .metrics
            .reconciled(key, result.as_ref().ok().map(|p| !p.is_empty()), took);
        let Some(dir) = &status_dir else { return };
        if let Some((cnc, outcome)) = tracker.record(world, key, result) {
            let zone = world.zone_name();
            if let Err(e) = record_ready(dir, &cnc, zone, &outcome, &status::now()) {
                tracing::error!(%cnc, error = %e, "cannot write the connect's status");
            }
        }
    }));
    let queue = controller.queue();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(controller.run_until(events, 2, shutdown.clone()));
    if let Some(addr) = args.listen {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("--listen {addr}: {e}"))?;
        tracing::info!(%addr, "serving /healthz, /readyz, /status, /metrics");
        tokio::spawn(http::serve(listener, shared.clone(), shutdown.clone()));
    }
    // Ready once the first pass is through: the queue idle for a moment.
    {
        let shared = shared.clone();
        let queue = queue.clone();
        tokio::spawn(async move {
            while !controller::settle(
                &queue,
                Duration::from_millis(200),
                Duration::from_secs(3600),
            )
            .await
            {}
            shared.ready.store(true, Ordering::Relaxed);
            tracing::info!("first pass done: ready");
        });
    }
    let (changed_tx, mut changed) = tokio::sync::mpsc::channel(1);
    let _watcher = manifests::watch(&args.manifests, Duration::from_millis(100), changed_tx)
        .map_err(|e| format!("cannot watch {}: {e}", args.manifests.display()))?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot handle SIGTERM: {e}"))?;
    let mut state = state;
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = terminate.recv() => break,
            Some(()) = changed.recv() => {}
        }
        match load(&args, &mut manifests) {
            Ok((world, _)) => {
                for p in &world.problems {
                    tracing::warn!(problem = %p, "input");
                }
                if let Some(dir) = &args.status_dir {
                    let next = world.state(&state);
                    if let Err(e) = next.save(dir) {
                        tracing::error!(error = %e, "cannot write the status dir");
                    }
                    state = next;
                }
                tx.send_replace(Arc::new(world));
            }
            Err(e) => tracing::error!(error = %e, "manifests not reloaded"),
        }
    }
    // Stop taking keys; let the reconciles in flight finish their transactions.
    tracing::info!("stopping: finishing the reconciles in flight");
    shutdown.cancel();
    let _ = run.await;
    Ok(ExitCode::SUCCESS)
}
