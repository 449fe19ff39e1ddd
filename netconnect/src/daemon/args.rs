//! netconnectd's command line (every flag also a `NETCONNECTD_*` variable), and the
//! settings it gives the world.

use std::path::PathBuf;

use clap::Parser;

use crate::world::Settings;

/// Programs OVN_Northbound with OVN-Kubernetes' user-defined network topologies.
/// Every option may also be given in the environment (`NETCONNECTD_NB`, …; a flag on
/// the command line wins).
#[derive(Parser, Debug)]
#[command(name = "netconnectd", version)]
pub struct Args {
    /// The Northbound database: `tcp:IP:PORT`, `ssl:IP:PORT` or `unix:PATH`, several
    /// separated by commas (a raft cluster: only its leader is written to).
    #[arg(long, value_name = "REMOTE[,REMOTE…]", env = "NETCONNECTD_NB")]
    pub nb: String,
    /// The directory of YAML manifests (Nodes, Namespaces, UserDefinedNetworks,
    /// ClusterUserDefinedNetworks, ClusterNetworkConnects).
    #[arg(long, value_name = "DIR", env = "NETCONNECTD_MANIFESTS")]
    pub manifests: PathBuf,
    /// The zone whose nodes are local; without it every node is (one NB for the
    /// cluster).
    #[arg(long, value_name = "NAME", env = "NETCONNECTD_ZONE")]
    pub zone: Option<String>,
    /// The status files: each network, node and connect as annotated, with its status
    /// (also where allocations are kept between runs).
    #[arg(long, value_name = "DIR", env = "NETCONNECTD_STATUS_DIR")]
    pub status_dir: Option<PathBuf>,
    /// Reconcile everything once, then exit: 0 when every key converged and every
    /// object was valid, 1 otherwise.
    #[arg(long)]
    pub once: bool,
    /// Print what would be written, per key, and write nothing.
    #[arg(long)]
    pub plan: bool,
    /// The CA certificate for `ssl:` remotes.
    #[arg(long, value_name = "FILE", env = "NETCONNECTD_CA_CERT")]
    pub ca_cert: Option<PathBuf>,
    /// This client's certificate for `ssl:` remotes.
    #[arg(long, value_name = "FILE", env = "NETCONNECTD_CERTIFICATE")]
    pub certificate: Option<PathBuf>,
    /// This client's private key for `ssl:` remotes.
    #[arg(long, value_name = "FILE", env = "NETCONNECTD_PRIVATE_KEY")]
    pub private_key: Option<PathBuf>,
    /// Service CIDRs of the cluster (networks must stay out of them).
    #[arg(
        long = "service-cidr",
        value_name = "CIDR",
        env = "NETCONNECTD_SERVICE_CIDRS",
        value_delimiter = ','
    )]
    pub service_cidrs: Vec<ipnet::IpNet>,
    /// Serve `/healthz`, `/readyz`, `/status` and `/metrics` on this address (e.g.
    /// `127.0.0.1:9476`).
    #[arg(long, value_name = "ADDR", env = "NETCONNECTD_LISTEN")]
    pub listen: Option<std::net::SocketAddr>,
    /// How long `--once` waits for the NB before giving up, in seconds.
    #[arg(long, default_value_t = 30, env = "NETCONNECTD_TIMEOUT")]
    pub timeout: u64,
}

impl Args {
    /// The world's settings these arguments give.
    pub fn settings(&self) -> Settings {
        let mut s = Settings {
            zone: self.zone.clone(),
            ..Default::default()
        };
        if !self.service_cidrs.is_empty() {
            s.set_service_cidrs(self.service_cidrs.clone());
        }
        s
    }

    /// The log filter when `RUST_LOG` gives none: quieter for a single pass.
    pub fn default_log_level(&self) -> &'static str {
        if self.once || self.plan {
            "warn"
        } else {
            "info"
        }
    }
}
