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

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(args.default_log_level())),
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
    match runtime.block_on(netconnect::daemon::run::run(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("netconnectd: {e}");
            ExitCode::FAILURE
        }
    }
}
