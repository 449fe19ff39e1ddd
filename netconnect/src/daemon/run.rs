//! What netconnectd does once its arguments are parsed: connect the NB cache, read the
//! manifests and the status directory, then print a plan (`--plan`), reconcile every key
//! once (`--once`), or run the controller until SIGTERM (serving `--listen`, following
//! the manifests).

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ovsdb_proto::cache::{CacheConfig, CacheEvents};
use ovsdb_proto::{ConnectOptions, Remote, TlsConfig};
use tokio_util::sync::CancellationToken;

use super::args::Args;
use super::http;
use super::metrics::Metrics;
use super::replica::{self, Role};
use super::seams::{ManifestSource, NoSink, Sink, Source, StatusDir};
use crate::api::load::{FileObjects, Object};
use crate::controller::{self, Backoff, Controller, ReadyTracker};
use crate::reconcile::dry_run::DryRun;
use crate::reconcile::Reconciler;
use crate::status;
use crate::status::dir::State;
use crate::world::{numbers, Manage, NumbersInNb, World};

/// Runs netconnectd with `args`; the exit code, or why it could not run.
pub async fn run(mut args: Args) -> Result<ExitCode, String> {
    if args.settings().ignore_connects && args.settings().manage == Manage::Connects {
        return Err(
            "--manage connects with --enable-network-connect=false: nothing to manage".into(),
        );
    }
    let (events, reconciler) = connect(&args)?;
    if args.once || args.plan {
        // A single pass needs the NB now; the daemon waits for it while it serves.
        reconciler.ready(Duration::from_secs(args.timeout)).await?;
        args.numbers_in_nb = Some(Arc::new(numbers::read(&reconciler.cache().snapshot())));
    }
    let mut source: Box<dyn Source> = Box::new(ManifestSource::new(&args.manifests));
    let sink: Arc<dyn Sink> = match &args.status_dir {
        Some(dir) => Arc::new(StatusDir::new(dir)),
        None => Arc::new(NoSink),
    };
    let (world, state) = load(&args, source.as_mut(), sink.as_ref())?;
    // A single pass prints them as its output; the daemon logs them.
    let single = args.once || args.plan;
    for p in &world.problems {
        match single {
            true => eprintln!("{p}"),
            false => tracing::warn!(problem = %p, "input"),
        }
    }
    for w in &world.warnings {
        match single {
            true => eprintln!("warning: {w}"),
            false => tracing::warn!(field = %w, "input: unknown field, ignored"),
        }
    }
    if args.plan {
        drop(events);
        return Ok(plan(&world, &reconciler));
    }
    let state = world.state(&state);
    // A replica (--lock) writes its status directory only once active.
    if args.lock.is_none() || single {
        sink.save(&state, None)
            .map_err(|e| format!("cannot write {}: {e}", sink.describe()))?;
    }
    if args.once {
        // Nothing reads the cache's events in a single pass; a kept stream would stop
        // the cache once its buffer is full.
        drop(events);
        return Ok(once(&args, &world, &reconciler, sink.as_ref()).await);
    }
    // The world served is read beside the state just saved, as every later reload is:
    // each node then carries the allocations it was given (read once here, the start's
    // world's allocations kept whole), and a later reload finds each node as it was
    // instead of reading every node's allocations again on the first change.
    let context = state.context(args.settings().reserved);
    let files = read_inputs(source.as_mut())?;
    let world = World::build_in(&files, &context, args.settings(), Some(&world));
    let current = Current {
        state: Arc::new(state),
        saved: true,
        of: None,
        context: Arc::new(context),
    };
    let seams = (source, sink);
    serve(args, world, current, seams, events, reconciler).await
}

/// The NB cache's events and the reconciler over the cache, started (not synced yet).
fn connect(args: &Args) -> Result<(CacheEvents, Arc<Reconciler>), String> {
    let remotes = Remote::parse_list(&args.nb).map_err(|e| format!("--nb {}: {e}", args.nb))?;
    if args.ca_cert.is_none() {
        if let Some(r) = remotes.iter().find(|r| matches!(r, Remote::Ssl { .. })) {
            return Err(format!(
                "--nb {r}: an ssl: remote needs --ca-cert (the CA that signed the server's \
                 certificate; with --certificate and --private-key when the server asks for \
                 a client's)"
            ));
        }
    }
    let mut config = CacheConfig::new(remotes, "OVN_Northbound", &[]);
    config.leader_only = true;
    config.connect = connect_options(args);
    // A database restored from a backup (every server behind what the cache saw): by
    // default the cache takes what the servers have, and the keys put their rows back.
    config.reset_when_behind = !args.keep_stale_cache;
    config.behind_limit = Duration::from_secs(args.behind_limit.max(1));
    let (reconciler, events) = Reconciler::start(config);
    Ok((events, Arc::new(reconciler)))
}

/// How netconnectd's connections to the NB are made (the cache's, the lock's).
fn connect_options(args: &Args) -> ConnectOptions {
    ConnectOptions {
        tls: args.ca_cert.as_ref().map(|ca| TlsConfig {
            ca_cert: ca.clone(),
            certificate: args.certificate.clone(),
            private_key: args.private_key.clone(),
        }),
        ..ConnectOptions::default()
    }
}

/// Reads the inputs and the state, and builds the world.
fn load(args: &Args, source: &mut dyn Source, sink: &dyn Sink) -> Result<(World, State), String> {
    let (state, state_problems) = sink
        .load()
        .map_err(|e| format!("cannot read {}: {e}", sink.describe()))?;
    for p in state_problems {
        eprintln!("netconnectd: status dir: {p}");
    }
    // The status directory is read once, at the start: later worlds are completed by
    // the states the daemon works out.
    let files = read_inputs(source)?;
    Ok((
        World::build_after(&files, &state, args.settings(), None),
        state,
    ))
}

/// Reads the inputs.
fn read_inputs(source: &mut dyn Source) -> Result<Vec<FileObjects>, String> {
    let started = std::time::Instant::now();
    let files = source
        .read()
        .map_err(|e| format!("cannot read {}: {e}", source.describe()))?;
    tracing::debug!(took = ?started.elapsed(), "manifests read");
    Ok(files)
}

/// `--plan`: prints what each key would write, each key planned against the NB as the
/// keys before it would leave it ([`DryRun`]); writes nothing. Exits 0 when the NB
/// holds what every key wants, 2 when some key would write, 1 when a key cannot be
/// planned or an object was invalid (the codes of `terraform plan -detailed-exitcode`).
fn plan(world: &World, reconciler: &Reconciler) -> ExitCode {
    let snap = reconciler.cache().snapshot();
    let dry = reconciler
        .cache()
        .schema()
        .ok_or_else(|| "not connected".to_owned())
        .and_then(|schema| DryRun::of(&snap, schema).map_err(|e| e.to_string()));
    let mut dry = match dry {
        Ok(d) => d,
        Err(e) => {
            println!("cannot plan: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (mut failed, mut differs) = (false, false);
    for key in controller::all_keys(world, reconciler) {
        let plan = world
            .desired(&key)
            .map_err(|e| e.to_string())
            .and_then(|d| dry.plan(&d).map_err(|e| e.to_string()));
        match plan {
            Ok(p) => {
                differs |= !p.is_empty();
                match (p.is_empty(), p.theirs.len()) {
                    (true, 0) => println!("{key}: unchanged"),
                    (true, n) => println!("{key}: unchanged (not written: {n})"),
                    (false, _) => println!("{key}: {}", p.summary()),
                }
                // The account of the plan, but for its first line (the owner's).
                let text = p.to_string();
                let skip = usize::from(p.owner.is_some());
                for line in text.lines().skip(skip) {
                    println!("{line}");
                }
            }
            Err(e) => {
                failed = true;
                println!("{key}: cannot plan: {e}");
            }
        }
    }
    if failed || !world.problems.is_empty() {
        ExitCode::FAILURE
    } else if differs {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

/// `--once`: reconciles every key once, records the connects' zone conditions, prints
/// each key's outcome; fails when a key did not converge or an object was invalid.
async fn once(args: &Args, world: &World, reconciler: &Reconciler, sink: &dyn Sink) -> ExitCode {
    let outcomes = controller::once(
        reconciler,
        world,
        5,
        Backoff::default(),
        args.workers.into(),
    )
    .await;
    let mut failed = false;
    {
        let tracker = ReadyTracker::default();
        let mut ready = std::collections::BTreeMap::new();
        for o in &outcomes {
            if let Some((cnc, outcome)) = tracker.record(world, &o.key, &o.result) {
                ready.insert(cnc, outcome);
            }
        }
        for (cnc, outcome) in ready {
            let zone = world.zone_name();
            if let Err(e) = sink.record_ready(&cnc, zone, &outcome, &status::now()) {
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
    exit_code(failed || !world.problems.is_empty())
}

fn exit_code(failed: bool) -> ExitCode {
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The daemon: reconciles continuously, re-reads the manifests when they change,
/// serves `--listen`; on SIGTERM or SIGINT takes no new key, lets the reconciles in
/// flight finish, and exits 0.
async fn serve(
    args: Args,
    world: World,
    current: Current,
    (source, sink): (Box<dyn Source>, Arc<dyn Sink>),
    events: CacheEvents,
    reconciler: Arc<Reconciler>,
) -> Result<ExitCode, String> {
    let current_warnings = world.warnings.iter().map(ToString::to_string).collect();
    let (tx, rx) = tokio::sync::watch::channel(Arc::new(world));
    let shutdown = CancellationToken::new();
    let (numbers_tx, mut numbers) = tokio::sync::mpsc::channel(1);
    let (replica, sink) = Replica::of(&args, sink);
    let mut role = replica.as_ref().map(|r| r.tell.role.subscribe());
    let seams = (
        sink.clone(),
        numbers_tx,
        replica.as_ref().map(|r| r.tell.clone()),
    );
    let run = start_controller(&args, rx, events, reconciler, seams, &shutdown).await?;
    let (changed_tx, mut changed) = tokio::sync::mpsc::channel(1);
    let _watch = source
        .watch(changed_tx)
        .map_err(|e| format!("cannot watch {}: {e}", source.describe()))?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot handle SIGTERM: {e}"))?;
    // SIGHUP, a terminal's hang-up or an operator's "read your configuration again",
    // reads the manifests again (they are watched anyway); it does not stop the daemon.
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|e| format!("cannot handle SIGHUP: {e}"))?;
    let mut serving = Serving {
        warned: current_warnings,
        args,
        tx,
        current,
        source,
        sink,
        quiet: Quiet::default(),
        files: Arc::new(Vec::new()),
        read_beside: None,
        saving: None,
        replica,
    };
    loop {
        let at = serving.quiet.at;
        let quiet_due = async {
            match at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let saving = serving.saving.as_mut();
        let saved_now = async {
            match saving {
                Some(task) => task.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = terminate.recv() => break,
            _ = hangup.recv() => {
                tracing::info!("SIGHUP: reading the manifests again");
                serving.reload().await;
            }
            done = saved_now => {
                serving.saving = None;
                serving.settle(done);
            }
            () = quiet_due => serving.when_quiet(&|| changed.is_empty()),
            Some(now) = role_change(role.as_mut()) => {
                if now == Role::Active {
                    serving.take_over().await;
                }
            }
            Some(read) = numbers.recv() => {
                // The NB read once synced: the world is built again with what its
                // rows number, before any key is written.
                serving.args.numbers_in_nb = Some(Arc::new(read));
                serving.reload().await;
            }
            Some(()) = changed.recv() => serving.reload().await,
        }
    }
    serving.finish().await;
    // Stop taking keys; let the reconciles in flight finish their transactions.
    tracing::info!("stopping: finishing the reconciles in flight");
    shutdown.cancel();
    let _ = run.await;
    Ok(ExitCode::SUCCESS)
}

/// Starts the controller over the worlds `rx` serves, the `--listen` server, and what
/// marks the daemon ready once the first pass is through (the queue idle for a
/// moment); the controller's task.
async fn start_controller(
    args: &Args,
    rx: tokio::sync::watch::Receiver<Arc<World>>,
    events: CacheEvents,
    reconciler: Arc<Reconciler>,
    (sink, numbers, tell): (
        Arc<dyn Sink>,
        tokio::sync::mpsc::Sender<NumbersInNb>,
        Option<replica::Tell>,
    ),
    shutdown: &CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let mut numbered = rx.clone();
    let (started_tx, started) = tokio::sync::oneshot::channel::<()>();
    let mut controller = Controller::new(reconciler.clone(), rx.clone(), Backoff::default());
    let mut role = None;
    if let (Some(name), Some(tell)) = (args.lock.clone(), tell) {
        controller = controller.with_gate(tell.may_write.subscribe());
        reconciler.gate_writes(tell.may_write.subscribe());
        role = Some(tell.role.subscribe());
        let options = connect_options(args);
        let (r, stop) = (reconciler.clone(), shutdown.clone());
        tokio::spawn(replica::hold(r, options, name, tell, stop));
    }
    let queue = controller.queue();
    let shared = Arc::new(http::Shared {
        ready: AtomicBool::new(false),
        reports: controller.reports(),
        world: rx,
        reconciler,
        metrics: Metrics::new(),
        queue: queue.clone(),
        restored: controller.restored(),
        role: role.clone(),
    });
    let controller = controller.with_hook(outcome_hook(shared.clone(), sink));
    // The endpoints first: /healthz answers while the NB is not there yet.
    if let Some(addr) = args.listen {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("--listen {addr}: {e}"))?;
        tracing::info!(%addr, "serving /healthz, /readyz, /status, /metrics");
        tokio::spawn(http::serve(listener, shared.clone(), shutdown.clone()));
    }
    let (workers, stop, every) = (
        args.workers.into(),
        shutdown.clone(),
        Duration::from_secs(args.timeout.max(1)),
    );
    let reconciler = shared.reconciler.clone();
    let run = tokio::spawn(async move {
        // The cache keeps trying every server with backoff; each --timeout without
        // one says why.
        loop {
            tokio::select! {
                r = reconciler.ready(every) => match r {
                    Ok(()) => break,
                    Err(e) => tracing::warn!("{e}; still trying"),
                },
                () = stop.cancelled() => return,
            }
        }
        tracing::info!(remote = ?reconciler.cache().remote().map(|r| r.to_string()), "NB synced");
        // No key before the world numbers the networks as their rows in the NB do.
        let read = numbers::read(&reconciler.cache().snapshot());
        if numbers.send(read).await.is_err() {
            return;
        }
        tokio::select! {
            _ = numbered.wait_for(|w| w.settings.numbers_in_nb.is_some()) => {}
            () = stop.cancelled() => return,
        }
        // run_until queues every key before it first waits.
        let _ = started_tx.send(());
        controller.run_until(events, workers, stop).await;
    });
    tokio::spawn(mark_ready(started, role, queue, shared));
    Ok(run)
}

/// Marks the daemon ready once the controller `started` and its first pass is done
/// (its `queue` idle a moment), or, for a replica (`role`), as soon as it stands by.
async fn mark_ready(
    started: tokio::sync::oneshot::Receiver<()>,
    role: Option<tokio::sync::watch::Receiver<Role>>,
    queue: Arc<controller::KeyQueue>,
    shared: Arc<http::Shared>,
) {
    if started.await.is_err() {
        return;
    }
    let standby = async {
        match role {
            Some(mut r) => {
                let _ = r.wait_for(|r| *r == Role::Standby).await;
            }
            None => std::future::pending().await,
        }
    };
    let settled = async {
        let (quiet, most) = (Duration::from_millis(200), Duration::from_secs(3600));
        while !controller::settle(&queue, quiet, most).await {}
    };
    let how = tokio::select! {
        () = settled => "first pass done: ready",
        () = standby => "synced, standing by: ready",
    };
    shared.ready.store(true, Ordering::Relaxed);
    tracing::info!("{how}");
}

/// The daemon's state between manifest reloads.
struct Serving {
    args: Args,
    /// The unknown fields told so far (of the manifests as last read).
    warned: std::collections::BTreeSet<String>,
    /// The world served to the controller.
    tx: tokio::sync::watch::Sender<Arc<World>>,
    /// The state last worked out.
    current: Current,
    /// Where the inputs come from.
    source: Box<dyn Source>,
    /// Where the states go.
    sink: Arc<dyn Sink>,
    /// What waits until the manifests have been quiet a moment after a reload.
    quiet: Quiet,
    /// The files the world served was built from.
    files: Arc<Vec<FileObjects>>,
    /// That world read again beside the state saved after it (when the Nodes'
    /// annotations changed: the next reload then finds each node as it reads it,
    /// instead of reading every node's host subnets again on the next change).
    read_beside: Option<tokio::task::JoinHandle<World>>,
    /// The state of the world served, being worked out and saved beside its
    /// reconciles.
    saving: Option<tokio::task::JoinHandle<Saved>>,
    /// When this is one replica of several (`--lock`).
    replica: Option<Replica>,
}

/// One replica of several: what it tells, and its status directory itself (the
/// served one is written only while it may write).
struct Replica {
    tell: replica::Tell,
    sink: Arc<dyn Sink>,
}

impl Replica {
    /// With `--lock`, one replica of several, and its status directory written only
    /// while it is active; else none, and the status directory as it is.
    fn of(args: &Args, sink: Arc<dyn Sink>) -> (Option<Replica>, Arc<dyn Sink>) {
        if args.lock.is_none() {
            return (None, sink);
        }
        let tell = replica::Tell::new();
        let gated = Arc::new(replica::GatedSink {
            inner: sink.clone(),
            may_write: tell.may_write.subscribe(),
        });
        (Some(Replica { tell, sink }), gated)
    }
}

/// The next role `rx` tells; never, without one.
async fn role_change(rx: Option<&mut tokio::sync::watch::Receiver<Role>>) -> Option<Role> {
    match rx {
        Some(rx) => {
            rx.changed().await.ok()?;
            let now = *rx.borrow_and_update();
            Some(now)
        }
        None => std::future::pending().await,
    }
}

impl Serving {
    /// Takes what a save left.
    fn settle(&mut self, done: Result<Saved, tokio::task::JoinError>) {
        let before = self.current.clone();
        self.current = settle(done, before, &mut self.quiet);
    }

    /// The manifests have been quiet since the last reload: the world is read again
    /// beside the state saved, and the journal folded, each unless a change came
    /// meanwhile (`quiet` says there is none), whose reload then comes first (and arms
    /// the quiet again for what is left).
    fn when_quiet(&mut self, quiet: &dyn Fn() -> bool) {
        self.quiet.at = None;
        if std::mem::take(&mut self.quiet.read_again) && quiet() {
            // On a thread of its own: a change come meanwhile does not wait for it (its
            // reload takes the world served instead).
            let (files, context) = (self.files.clone(), self.current.context.clone());
            let (served, settings) = (self.tx.borrow().clone(), self.args.settings());
            self.read_beside = Some(tokio::task::spawn_blocking(move || {
                let started = std::time::Instant::now();
                let world = World::build_in(&files, &context, settings, Some(&served));
                tracing::debug!(took = ?started.elapsed(), "world read beside the state saved");
                world
            }));
        }
        if self.quiet.fold && quiet() {
            (self.current.saved, self.quiet.fold) =
                fold(self.sink.as_ref(), &self.current.state, quiet);
        }
    }

    /// The manifests changed: they are read again, and the world they give served at
    /// once, its state saved beside its reconciles (read beside the state saved last).
    async fn reload(&mut self) {
        if let Some(task) = self.saving.take() {
            self.settle(task.await);
        }
        let served = self.tx.borrow().clone();
        let previous = match self.read_beside.take() {
            Some(task) if task.is_finished() => task.await.ok(),
            _ => None,
        };
        let started = std::time::Instant::now();
        let read = read_inputs(self.source.as_mut()).map(|f| {
            let world = World::build_in(
                &f,
                &self.current.context,
                self.args.settings(),
                Some(previous.as_ref().unwrap_or(&served)),
            );
            (f, world)
        });
        drop(previous);
        let (read_files, world) = match read {
            Ok(read) => read,
            Err(e) => return tracing::error!(error = %e, "manifests not reloaded"),
        };
        self.files = Arc::new(read_files);
        for p in &world.problems {
            tracing::warn!(problem = %p, "input");
        }
        // An unknown field is told once, when it first appears.
        let warned: std::collections::BTreeSet<String> =
            world.warnings.iter().map(ToString::to_string).collect();
        for w in warned.difference(&self.warned) {
            tracing::warn!(field = %w, "input: unknown field, ignored");
        }
        self.warned = warned;
        tracing::debug!(built = ?started.elapsed(), "manifests reloaded");
        // Served at once: its rows are built while its state is saved, and written
        // after ([`World::saving`]).
        let (world, gate) = world.saving();
        let world = Arc::new(world);
        self.tx.send_replace(world.clone());
        // What waits for quiet waits for this save too (it arms the quiet again).
        self.quiet.at = None;
        let since = Current {
            of: self.current.of.take(),
            ..self.current.clone()
        };
        let (sink, reserved) = (self.sink.clone(), self.args.settings().reserved);
        self.saving = Some(tokio::task::spawn_blocking(move || {
            save_state(world, since, sink.as_ref(), reserved, gate)
        }));
    }

    /// This replica turned active: the status directory is read again (the replica
    /// active before wrote it meanwhile), the world rebuilt on it and its state saved,
    /// then the keys are let through.
    async fn take_over(&mut self) {
        let Some(r) = &self.replica else { return };
        let (tell, inner) = (r.tell.clone(), r.sink.clone());
        if let Some(task) = self.saving.take() {
            self.settle(task.await);
        }
        match inner.load() {
            Ok((state, problems)) => {
                for p in problems {
                    tracing::warn!(problem = %p, "status dir");
                }
                let context = Arc::new(state.context(self.args.settings().reserved));
                self.current = Current {
                    state: Arc::new(state),
                    saved: true,
                    of: None,
                    context,
                };
            }
            Err(e) => tracing::error!(error = %e, "cannot read {} again", inner.describe()),
        }
        // This reload's state is saved whatever the gate says (it is not open yet).
        let gated = std::mem::replace(&mut self.sink, inner);
        self.reload().await;
        self.sink = gated;
        if tell.open() {
            tracing::info!("took over: writing");
        }
    }

    /// Before stopping: the save under way finished, the journal folded.
    async fn finish(mut self) {
        if let Some(task) = self.saving.take() {
            self.settle(task.await);
        }
        if self.quiet.fold {
            fold(self.sink.as_ref(), &self.current.state, &|| true);
        }
    }
}

/// How long the manifests stay unchanged after a reload before what waits for quiet
/// ([`Quiet`]) is done.
const QUIET: Duration = Duration::from_secs(1);

/// What netconnectd does once the manifests have been quiet for [`QUIET`] after a
/// reload, off the path from a change to its rows.
#[derive(Default)]
struct Quiet {
    /// When.
    at: Option<tokio::time::Instant>,
    /// The status directory's journal holds edits to write into the Nodes' files.
    fold: bool,
    /// The Nodes' annotations in the state changed: the world is read again beside
    /// it.
    read_again: bool,
}

/// The state last worked out, and what goes with it.
#[derive(Clone)]
struct Current {
    state: Arc<State>,
    /// Whether the status directory holds it (then a new state writes only what
    /// changed).
    saved: bool,
    /// The world it was worked out from, when known (not at the start, nor after a
    /// save that failed): the next state works out what changed since.
    of: Option<Arc<World>>,
    /// Its context ([`State::context`]), which each reload builds its world in: worked
    /// out once per state, after the state is saved.
    context: Arc<crate::api::Context>,
}

/// A world's state, worked out and saved ([`save_state`]).
struct Saved {
    current: Current,
    /// Its journal holds edits to fold.
    fold: bool,
    /// The Nodes' annotations changed.
    nodes_changed: bool,
}

impl Saved {
    /// The state with what goes with it; `quiet` told what waits for quiet, and armed
    /// when something does.
    fn settle(self, quiet: &mut Quiet) -> Current {
        quiet.fold |= self.fold;
        quiet.read_again = self.nodes_changed;
        if quiet.fold || quiet.read_again {
            quiet.at = Some(tokio::time::Instant::now() + QUIET);
        }
        self.current
    }
}

/// What a save left ([`Saved::settle`]); a save that did not finish (it panicked)
/// leaves `before`, not held, of no world known: the next save writes the whole
/// directory, and works out the whole state.
fn settle(
    done: Result<Saved, tokio::task::JoinError>,
    before: Current,
    quiet: &mut Quiet,
) -> Current {
    match done {
        Ok(done) => done.settle(quiet),
        Err(e) => {
            tracing::error!(error = %e, "saving the status dir failed");
            Current {
                saved: false,
                of: None,
                ..before
            }
        }
    }
}

/// The state after `world`, worked out after `since` (the state before, with the world
/// it is of when known), saved in `dir` (only what changed when the directory holds
/// `since`'s state); `gate` dropped once it is written (or could not be). Its context
/// (with `reserved`) is worked out after.
fn save_state(
    world: Arc<World>,
    since: Current,
    sink: &dyn Sink,
    reserved: crate::api::validate::Reserved,
    gate: crate::world::Saving,
) -> Saved {
    let started = std::time::Instant::now();
    let next = world.state_after(&since.state, since.of.as_deref());
    let stated = started.elapsed();
    let written = sink.save(&next, since.saved.then_some(&*since.state));
    if let Err(e) = &written {
        tracing::error!(error = %e, "cannot write the status dir");
    }
    let (saved, fold) = (written.is_ok(), matches!(written, Ok(true)));
    drop(gate);
    tracing::debug!(
        state = ?stated,
        saved = ?started.elapsed() - stated,
        "status saved"
    );
    let nodes_changed = nodes_changed(&since.state, &next);
    let context = Arc::new(next.context(reserved));
    Saved {
        current: Current {
            state: Arc::new(next),
            saved,
            of: Some(world),
            context,
        },
        fold,
        nodes_changed,
    }
}

/// True when a Node of `after` is not as in `before`, or one is gone.
fn nodes_changed(before: &State, after: &State) -> bool {
    fn nodes(s: &State) -> impl Iterator<Item = (&(String, String), &Arc<Object>)> {
        s.objects.iter().filter(|((kind, _), _)| kind == "Node")
    }
    nodes(before).count() != nodes(after).count()
        || nodes(after).any(|(k, o)| !before.holds_alike(k, o))
}

/// Writes the edits the status directory's journal holds into the Nodes' files
/// ([`State::fold_while`]) while `go_on()` holds: whether the directory holds `state`
/// (false when it could not be written: the next save is then a full one), and
/// whether the fold is left to do.
fn fold(sink: &dyn Sink, state: &State, go_on: &dyn Fn() -> bool) -> (bool, bool) {
    let started = std::time::Instant::now();
    match sink.fold(state, go_on) {
        Ok(done) => {
            tracing::debug!(took = ?started.elapsed(), done, "status journal folded");
            (true, !done)
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot fold the status dir's journal");
            (false, false)
        }
    }
}

/// After each reconcile: the metrics, and a connect's `Ready-In-Zone-<zone>` condition
/// in the status directory when its outcome changed.
fn outcome_hook(shared: Arc<http::Shared>, sink: Arc<dyn Sink>) -> controller::OutcomeHook {
    let tracker = ReadyTracker::default();
    Arc::new(move |world, key, result, took| {
        shared
            .metrics
            .reconciled(key, result.as_ref().ok().map(|p| !p.is_empty()), took);
        if let Some((cnc, outcome)) = tracker.record(world, key, result) {
            let zone = world.zone_name();
            if let Err(e) = sink.record_ready(&cnc, zone, &outcome, &status::now()) {
                tracing::error!(%cnc, error = %e, "cannot write the connect's status");
            }
        }
    })
}
