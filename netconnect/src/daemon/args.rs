//! netconnectd's command line (every flag also a `NETCONNECTD_*` variable), and the
//! settings it gives the world.

use std::path::PathBuf;

use clap::Parser;

use crate::topology::GatewayMode;
use crate::world::{Manage, Settings};

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
    pub(crate) status_dir: Option<PathBuf>,
    /// What to write: `all` (the cluster rows, networks, services and connects: an NB
    /// netconnectd alone writes), or `connects` (only the ClusterNetworkConnects,
    /// beside OVN-Kubernetes, whose networks and services it never writes).
    #[arg(long, value_name = "all|connects", default_value = "all", value_parser = ["all", "connects"], env = "NETCONNECTD_MANAGE")]
    pub manage: String,
    /// Take over the rows OVN-Kubernetes wrote for the networks and services in the
    /// manifests, in place (their uuids kept): a row that matches one netconnectd wants
    /// by name (a route, policy or NAT rule: by its router and what it matches) gets
    /// netconnectd's owner keys and any column fixed in the key's one transaction.
    /// Run it only with OVN-Kubernetes' controller for those networks stopped.
    #[arg(long, value_name = "ovn-kubernetes", value_parser = ["ovn-kubernetes"], env = "NETCONNECTD_ADOPT")]
    pub adopt: Option<String>,
    /// Act on ClusterNetworkConnects (OVN-Kubernetes' `--enable-network-connect`, off by
    /// default there; on by default here, netconnectd's reason to be). Off, they are
    /// read as if absent: no connect is written, and the rows of connects written
    /// before go.
    #[arg(long, value_name = "BOOL", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set, env = "NETCONNECTD_ENABLE_NETWORK_CONNECT")]
    pub enable_network_connect: bool,
    /// The site's distributed router the networking plugin's virtual networks
    /// (`onapNetwork` objects) attach to; it must exist (it is never created).
    #[arg(
        long,
        value_name = "NAME",
        default_value = "ovn_cluster_router",
        env = "NETCONNECTD_VL_ROUTER"
    )]
    pub vl_router: String,
    /// The numbers the networks' rows carry in the NB, once read
    /// ([`Settings::numbers_in_nb`]).
    #[arg(skip)]
    pub numbers_in_nb: Option<std::sync::Arc<crate::world::NumbersInNb>>,
    /// When every NB server is behind what netconnectd saw (a database restored from a
    /// backup) for `--behind-limit` seconds: keep the cache as it was, refusing them,
    /// instead of taking what they have and putting netconnectd's rows back (the
    /// default). Either way it is logged and shown on `/status` (`nbBehind`).
    #[arg(long, env = "NETCONNECTD_KEEP_STALE_CACHE")]
    pub keep_stale_cache: bool,
    /// Run as one of several replicas: only the replica holding OVSDB lock NAME on the
    /// server it writes to (a raft cluster's leader) writes; the others stand by,
    /// synced and ready, and one of them takes over when the active one's connection
    /// ends. Every replica is given the same NAME. Without it, this process writes.
    #[arg(long, value_name = "NAME", env = "NETCONNECTD_LOCK")]
    pub lock: Option<String>,
    /// How long every NB server may be behind before that is reported (and, unless
    /// `--keep-stale-cache`, the cache takes what they have), in seconds.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 30,
        env = "NETCONNECTD_BEHIND_LIMIT"
    )]
    pub behind_limit: u64,
    /// How log lines are written: `text` (time, level, target, message and fields) or
    /// `json` (one object per line: `timestamp`, `level`, `fields`, `target`).
    #[arg(long, value_name = "text|json", default_value = "text", value_parser = ["text", "json"], env = "NETCONNECTD_LOG_FORMAT")]
    pub log_format: String,
    /// EgressIP is enabled in the cluster (OVN-Kubernetes' `--enable-egress-ip`): the
    /// networks' routers get EgressIP's no-reroute policies (priority 102).
    #[arg(long, env = "NETCONNECTD_ENABLE_EGRESS_IP")]
    pub enable_egress_ip: bool,
    /// Layer2 networks' gateway and management addresses come from their
    /// `defaultGatewayIPs` and `infrastructureSubnets` (OVN-Kubernetes'
    /// `--enable-preconfigured-udn-addresses`); without it they are `.1` and `.2`.
    #[arg(long, env = "NETCONNECTD_ENABLE_PRECONFIGURED_UDN_ADDRESSES")]
    pub enable_preconfigured_udn_addresses: bool,
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
    pub(crate) service_cidrs: Vec<ipnet::IpNet>,
    /// The default network's cluster subnets, which networks and connect subnets must
    /// stay out of (default `10.128.0.0/14`).
    #[arg(
        long = "cluster-subnet",
        value_name = "CIDR",
        env = "NETCONNECTD_CLUSTER_SUBNETS",
        value_delimiter = ','
    )]
    pub(crate) cluster_subnets: Vec<ipnet::IpNet>,
    /// The default network's join subnets (default `100.64.0.0/16,fd98::/64`).
    #[arg(
        long = "default-join-subnet",
        value_name = "CIDR",
        env = "NETCONNECTD_DEFAULT_JOIN_SUBNETS",
        value_delimiter = ','
    )]
    pub(crate) default_join_subnets: Vec<ipnet::IpNet>,
    /// The masquerade subnets, one per family (default `169.254.0.0/17,fd69::/112`).
    #[arg(
        long = "masquerade-subnet",
        value_name = "CIDR",
        env = "NETCONNECTD_MASQUERADE_SUBNETS",
        value_delimiter = ','
    )]
    pub(crate) masquerade_subnets: Vec<ipnet::IpNet>,
    /// The transit switch subnets, one per family, also the default Layer2 transit
    /// subnets (default `100.88.0.0/16,fd97::/64`).
    #[arg(
        long = "transit-subnet",
        value_name = "CIDR",
        env = "NETCONNECTD_TRANSIT_SUBNETS",
        value_delimiter = ','
    )]
    pub(crate) transit_subnets: Vec<ipnet::IpNet>,
    /// How pods' traffic leaves the cluster: `shared` (through the gateway router) or
    /// `local` (through the node's host).
    #[arg(
        long,
        value_name = "MODE",
        default_value = "shared",
        env = "NETCONNECTD_GATEWAY_MODE",
        value_parser = ["shared", "local"]
    )]
    pub gateway_mode: String,
    /// The default network's services (`namespace/name`) that pods of primary
    /// networks reach through their node's host in shared gateway mode (default
    /// `default/kubernetes,kube-system/kube-dns`; an empty value for none).
    #[arg(
        long = "udn-allowed-default-services",
        value_name = "NAMESPACE/NAME",
        env = "NETCONNECTD_UDN_ALLOWED_DEFAULT_SERVICES",
        value_delimiter = ',',
        value_parser = allowed_service
    )]
    pub(crate) udn_allowed_default_services: Option<Vec<String>>,
    /// The cluster MTU, written as `gateway_mtu` on gateway-facing router ports.
    #[arg(long, value_name = "BYTES", default_value_t = crate::api::network::DEFAULT_MTU, env = "NETCONNECTD_MTU")]
    pub(crate) mtu: u32,
    /// Serve `/healthz`, `/readyz`, `/status` and `/metrics` on this address (e.g.
    /// `127.0.0.1:9476`).
    #[arg(long, value_name = "ADDR", env = "NETCONNECTD_LISTEN")]
    pub listen: Option<std::net::SocketAddr>,
    /// How many keys are reconciled at once (each its own transaction): more hide
    /// the NB's round trips better, up to what the NB server keeps up with.
    #[arg(
        long,
        value_name = "N",
        default_value_t = DEFAULT_WORKERS,
        env = "NETCONNECTD_WORKERS",
        value_parser = clap::value_parser!(u16).range(1..=256)
    )]
    pub workers: u16,
    /// How long `--once` waits for the NB before giving up, in seconds.
    #[arg(long, default_value_t = 30, env = "NETCONNECTD_TIMEOUT")]
    pub timeout: u64,
}

/// The default `--workers`: small keys (many services) gain from 8 in flight over 4,
/// big ones (networks at 500 × 500) gain nothing past 2 and pay peak memory for each
/// key in flight; 8 is between (the figures: `docs/benchmarks.md`).
pub const DEFAULT_WORKERS: u16 = 8;

impl Args {
    /// The world's settings these arguments give.
    pub fn settings(&self) -> Settings {
        let mut s = Settings {
            zone: self.zone.clone(),
            manage: match self.manage.as_str() {
                "connects" => Manage::Connects,
                _ => Manage::All,
            },
            ..Default::default()
        };
        if !self.service_cidrs.is_empty() {
            s.set_service_cidrs(self.service_cidrs.clone());
        }
        if !self.masquerade_subnets.is_empty() {
            s.set_masquerade_subnets(self.masquerade_subnets.clone());
        }
        if !self.cluster_subnets.is_empty() {
            s.reserved.cluster_subnets = self.cluster_subnets.clone();
        }
        if !self.default_join_subnets.is_empty() {
            s.set_default_join(self.default_join_subnets.clone());
        }
        s.set_egress_ip(self.enable_egress_ip);
        s.adopt = self.adopt.is_some();
        s.ignore_connects = !self.enable_network_connect;
        s.vl_router = Some(self.vl_router.clone());
        s.numbers_in_nb = self.numbers_in_nb.clone();
        s.set_preconfigured_udn_addresses(self.enable_preconfigured_udn_addresses);
        if !self.transit_subnets.is_empty() {
            s.cluster.transit_subnets = self.transit_subnets.clone();
        }
        s.topology.gateway_mode = match self.gateway_mode.as_str() {
            "local" => GatewayMode::Local,
            _ => GatewayMode::Shared,
        };
        s.topology.mtu = self.mtu;
        if let Some(services) = &self.udn_allowed_default_services {
            s.topology.allowed_default_services =
                services.iter().filter(|s| !s.is_empty()).cloned().collect();
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

/// One of `--udn-allowed-default-services`: `namespace/name`, or nothing (the empty
/// value that gives none).
fn allowed_service(s: &str) -> Result<String, String> {
    let s = s.trim();
    if !s.is_empty() {
        crate::api::meta::parse_namespaced_name(s)?;
    }
    Ok(s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cluster_setting_is_a_flag_and_reaches_the_settings() {
        let args = Args::try_parse_from([
            "netconnectd",
            "--nb",
            "unix:/nb",
            "--manifests",
            "/m",
            "--service-cidr",
            "172.30.0.0/16",
            "--cluster-subnet",
            "10.244.0.0/16,fd00:10:244::/48",
            "--default-join-subnet",
            "100.62.0.0/16",
            "--masquerade-subnet",
            "169.254.169.0/29,fd69::/125",
            "--transit-subnet",
            "100.90.0.0/16",
            "--gateway-mode",
            "local",
            "--mtu",
            "8900",
            "--workers",
            "3",
            "--udn-allowed-default-services",
            "kube-system/coredns, monitoring/prometheus",
        ])
        .unwrap();
        let s = args.settings();
        let nets =
            |v: &[&str]| -> Vec<ipnet::IpNet> { v.iter().map(|c| c.parse().unwrap()).collect() };
        assert_eq!(s.reserved.service_cidrs, nets(&["172.30.0.0/16"]));
        assert_eq!(s.topology.service_cidrs, nets(&["172.30.0.0/16"]));
        assert_eq!(
            s.reserved.cluster_subnets,
            nets(&["10.244.0.0/16", "fd00:10:244::/48"])
        );
        assert_eq!(s.reserved.default_join, nets(&["100.62.0.0/16"]));
        assert_eq!(
            s.reserved.masquerade,
            nets(&["169.254.169.0/29", "fd69::/125"])
        );
        assert_eq!(s.topology.masquerade_subnets, s.reserved.masquerade);
        assert_eq!(s.cluster.transit_subnets, nets(&["100.90.0.0/16"]));
        assert_eq!(s.topology.gateway_mode, GatewayMode::Local);
        assert_eq!(s.topology.mtu, 8900);
        assert_eq!(args.workers, 3);
        assert_eq!(
            s.topology.allowed_default_services,
            ["kube-system/coredns", "monitoring/prometheus"]
        );

        // Without them, the defaults.
        let s = Args::try_parse_from(["netconnectd", "--nb", "unix:/nb", "--manifests", "/m"])
            .unwrap()
            .settings();
        assert_eq!(s.topology.gateway_mode, GatewayMode::Shared);
        assert_eq!(s.topology.mtu, 1400);
        assert_eq!(s.reserved, crate::api::validate::Reserved::default());
        assert_eq!(
            s.topology.allowed_default_services,
            ["default/kubernetes", "kube-system/kube-dns"]
        );
        let none = |v: &str| {
            Args::try_parse_from(["netconnectd", "--nb", "x", "--manifests", "/m", v])
                .map(|a| a.settings().topology.allowed_default_services)
        };
        assert!(none("--udn-allowed-default-services=").unwrap().is_empty());
        let e = none("--udn-allowed-default-services=kube-dns").unwrap_err();
        assert!(
            e.to_string().contains("\"kube-dns\" is not namespace/name"),
            "{e}"
        );
        let bad = Args::try_parse_from([
            "netconnectd",
            "--nb",
            "x",
            "--manifests",
            "/m",
            "--gateway-mode",
            "remote",
        ]);
        assert!(bad.is_err());
        let none = Args::try_parse_from([
            "netconnectd",
            "--nb",
            "x",
            "--manifests",
            "/m",
            "--workers",
            "0",
        ]);
        assert!(none.is_err());
    }
    #[test]
    fn network_connect_is_on_by_default_and_takes_a_boolean() {
        let connects = |v: &[&str]| {
            let mut argv = vec!["netconnectd", "--nb", "x", "--manifests", "/m"];
            argv.extend(v);
            Args::try_parse_from(argv).map(|a| !a.settings().ignore_connects)
        };
        assert!(connects(&[]).unwrap(), "on by default");
        assert!(connects(&["--enable-network-connect"]).unwrap());
        assert!(connects(&["--enable-network-connect=true"]).unwrap());
        assert!(!connects(&["--enable-network-connect=false"]).unwrap());
        assert!(!connects(&["--enable-network-connect", "false"]).unwrap());
        assert!(connects(&["--enable-network-connect=maybe"]).is_err());
    }
}
