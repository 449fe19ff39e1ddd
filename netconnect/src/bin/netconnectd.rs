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

use std::process::ExitCode;

use clap::Parser;

use netconnect::daemon::args::Args;

/// How long netconnectd keeps memory it freed before giving it back to the system,
/// in milliseconds (mimalloc's `purge_delay`; its default is 1 s). A change comes in
/// a burst: a network added at 500 × 500 writes 10 MB of node texts into a new state
/// and builds 1500 rows, on memory the states and rows of the change before freed
/// more than a second earlier. Given back, every page of it faulted in again, zeroed
/// (the state of a network added took several times longer than with purging off).
/// Memory
/// freed is still given back once the daemon has been quiet this long.
/// `MIMALLOC_PURGE_DELAY` in the environment, which mimalloc reads itself, wins.
const PURGE_DELAY_MS: std::ffi::c_long = 10_000;

/// mimalloc's option number of `purge_delay` (`mi_option_purge_delay` in its
/// `mimalloc.h`, v2 and v3 alike; `libmimalloc-sys` names no constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() -> ExitCode {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets an allocator option before any thread is started; mimalloc
        // reads its options atomically and allows them to change at any time.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    }
    let args = Args::parse();
    // Colours only for a terminal: a log file or a journal gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(args.default_log_level()));
    let log = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    // One JSON object per line for a log collector, or text.
    match args.log_format.as_str() {
        "json" => log.json().init(),
        _ => log.with_ansi(ansi).init(),
    }
    // SAFETY: reads an allocator option.
    let purge_delay = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
    tracing::debug!(purge_delay_ms = purge_delay, "allocator");
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
    match runtime.block_on(netconnect::daemon::run::run(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("netconnectd: {e}");
            ExitCode::FAILURE
        }
    }
}
