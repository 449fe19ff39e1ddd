//! Real OVN central daemons for tests and for trying things out: ovsdb-server with
//! OVN_Northbound and OVN_Southbound, ovn-northd between them, raft clusters, and
//! standalone servers of any schema.
//!
//! Every [`Sandbox`], [`OvsdbServer`] and [`Cluster`] gets its own directory, sockets
//! and ports, so tests run in parallel; its processes are killed when it is dropped
//! (also on panic), and each process is asked by the kernel to die with the thread that
//! started it, so a test process that is killed leaves nothing behind either.
//!
//! The daemons come from an [`Installation`]: a Debian sid root filesystem with OVN
//! 26.03 (built once by `scripts/setup-ovn.sh`, found at `$OVN_SANDBOX_ROOT`, by default
//! `/var/cache/ovsdb-rs/sid-root`), whose programs run under `chroot`; a recent enough
//! OVN on `PATH`; or, for compatibility tests, the host's older OVN ([`Installation::host`]).
//! Where the machine's Docker Engine answers, [`Installation::recent`] runs a
//! [`Sandbox`]'s servers and ovn-northd, its standalone [`OvsdbServer`]s and its
//! [`Chassis`] as containers of the OVN image instead, each with an address of its own
//! on the sandbox's Docker network ([`BACKEND_VAR`] chooses).
//!
//! On a machine with a Docker Engine, [`ContainerCluster`] runs a raft cluster's
//! members as containers of the OVN image ([`ovn_image`]: the same root filesystem
//! imported as the base of `ovn-sandbox/image/Dockerfile`), each with its own address
//! on a network of its own, so that a member can be cut off ([`Container::disconnect`]),
//! paused or killed.

#![warn(missing_docs)]

mod chassis;
mod cluster;
mod container;
mod container_cluster;
mod daemon;
mod install;
mod ports;
mod sandbox;
mod server;

pub use chassis::{leftovers, Answer, Chassis, Pod, Transport, NETNS_PREFIX};
pub use cluster::Cluster;
pub use container::{
    base_image, build_from_directory, engine_available, labelled, ovn_image, rust_image, Container,
    ContainerSpec, DockerNetwork, LABEL_PID, LABEL_TEST,
};
pub use container_cluster::{ContainerCluster, CLIENT_PORT, RAFT_PORT};
use daemon::{wait_until, Daemon, Place, WorkDir};
pub use install::{Installation, BACKEND_VAR};
pub use ports::{free_port, free_ports};
pub use sandbox::Sandbox;
use server::path_str;
pub use server::{OvsdbServer, ServerOptions, SslFiles, SSL_PORT};

use std::fs;
use std::io::Read;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Where the root filesystem is looked for when `OVN_SANDBOX_ROOT` is not set.
pub const DEFAULT_ROOT: &str = "/var/cache/ovsdb-rs/sid-root";

/// The oldest OVN release the main sandbox accepts (transit routers need it).
pub const MIN_OVN: (u32, u32) = (25, 3);

/// Marker in every directory this crate creates, so leftover processes can be found.
pub const DIR_PREFIX: &str = "ovsdb-rs-sbx-";

const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Something went wrong starting or driving the daemons.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SandboxError(String);

type Result<T> = std::result::Result<T, SandboxError>;

fn fail<T>(msg: impl Into<String>) -> Result<T> {
    Err(SandboxError(msg.into()))
}
