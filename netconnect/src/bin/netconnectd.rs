//! `netconnectd`: programs an OVN Northbound database with the user-defined networks
//! described by Kubernetes objects in a directory of YAML files.
//!
//! ```text
//! netconnectd --nb REMOTE[,REMOTE…] --manifests DIR [--zone NAME] [--status-dir DIR]
//!             [--once] [--plan]
//! ```
//!
//! See the README's netconnectd section for every flag.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use netconnect::api::load::read_dir;
use netconnect::controller::{self, Backoff, Controller, ReadyTracker};
use netconnect::reconcile::{NbIndexes, Reconciler};
use netconnect::state::{record_ready, State};
use netconnect::status;
use netconnect::world::{Settings, World};
use ovsdb_proto::cache::{Cache, CacheConfig};
use ovsdb_proto::{Remote, TlsConfig};

/// Programs OVN_Northbound with OVN-Kubernetes' user-defined network topologies.
#[derive(Parser, Debug)]
#[command(name = "netconnectd", version)]
struct Args {
    /// The Northbound database: `tcp:IP:PORT`, `ssl:IP:PORT` or `unix:PATH`, several
    /// separated by commas (a raft cluster: only its leader is written to).
    #[arg(long, value_name = "REMOTE[,REMOTE…]")]
    nb: String,
    /// The directory of YAML manifests (Nodes, Namespaces, UserDefinedNetworks,
    /// ClusterUserDefinedNetworks, ClusterNetworkConnects).
    #[arg(long, value_name = "DIR")]
    manifests: PathBuf,
    /// The zone whose nodes are local; without it every node is (one NB for the
    /// cluster).
    #[arg(long, value_name = "NAME")]
    zone: Option<String>,
    /// Where allocations are kept between runs, as annotated objects.
    #[arg(long, value_name = "DIR")]
    status_dir: Option<PathBuf>,
    /// Reconcile everything once, then exit: 0 when every key converged and every
    /// object was valid, 1 otherwise.
    #[arg(long)]
    once: bool,
    /// Print what would be written, per key, and write nothing.
    #[arg(long)]
    plan: bool,
    /// The CA certificate for `ssl:` remotes.
    #[arg(long, value_name = "FILE")]
    ca_cert: Option<PathBuf>,
    /// This client's certificate for `ssl:` remotes.
    #[arg(long, value_name = "FILE")]
    certificate: Option<PathBuf>,
    /// This client's private key for `ssl:` remotes.
    #[arg(long, value_name = "FILE")]
    private_key: Option<PathBuf>,
    /// Service CIDRs of the cluster (networks must stay out of them).
    #[arg(long = "service-cidr", value_name = "CIDR")]
    service_cidrs: Vec<ipnet::IpNet>,
    /// How long `--once` waits for the NB before giving up, in seconds.
    #[arg(long, default_value_t = 30)]
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
fn load(args: &Args) -> Result<(World, State), String> {
    let files = read_dir(&args.manifests)
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
    let (world, state) = load(&args)?;
    for p in &world.problems {
        eprintln!("{p}");
    }

    if args.plan {
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
    let mut controller = Controller::new(reconciler, rx, Backoff::default());
    if let Some(dir) = args.status_dir.clone() {
        let tracker = ReadyTracker::default();
        controller = controller.with_hook(Arc::new(move |world, key, result| {
            if let Some((cnc, outcome)) = tracker.record(world, key, result) {
                let zone = world.zone_name();
                if let Err(e) = record_ready(&dir, &cnc, zone, &outcome, &status::now()) {
                    tracing::error!(%cnc, error = %e, "cannot write the connect's status");
                }
            }
        }));
    }
    let run = tokio::spawn(controller.run(events, 2));
    let mut last = fingerprint(&args.manifests);
    let mut state = state;
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        let now = fingerprint(&args.manifests);
        if now == last {
            continue;
        }
        last = now;
        match load(&args) {
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
    run.abort();
    Ok(ExitCode::SUCCESS)
}

/// The names, sizes and modification times of the manifest files.
fn fingerprint(dir: &std::path::Path) -> Vec<(PathBuf, u64, Option<std::time::SystemTime>)> {
    netconnect::api::load::manifest_files(dir)
        .unwrap_or_default()
        .into_iter()
        .map(|p| {
            let m = std::fs::metadata(&p).ok();
            let len = m.as_ref().map(|m| m.len()).unwrap_or(0);
            let modified = m.and_then(|m| m.modified().ok());
            (p, len, modified)
        })
        .collect()
}
