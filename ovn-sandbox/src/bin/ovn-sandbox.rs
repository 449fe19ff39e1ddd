//! `ovn-sandbox [--cluster N] -- COMMAND [ARG…]`: starts a real OVN central (northbound
//! and southbound ovsdb-servers and ovn-northd), runs COMMAND with the remotes in its
//! environment, then stops every daemon and exits with COMMAND's status.
//!
//! With `--cluster N` it starts instead a raft-clustered northbound database of N
//! members (no southbound database, no ovn-northd): the shape to try a client's
//! failover against (kill a member by its pid from `OVN_NB_PIDS`).
//!
//! Environment given to COMMAND:
//! - `OVN_NB_DB`, `OVN_SB_DB`: `unix:` remotes for programs on the host (a cluster's:
//!   every member's, comma-separated); programs in the OVN root filesystem (under
//!   chroot) or elsewhere use the `tcp:` ones;
//! - `OVN_NB_TCP`, `OVN_SB_TCP`: `tcp:ADDRESS:PORT` remotes: the servers' containers'
//!   own addresses when they run in containers (the default where a Docker Engine
//!   answers; see `OVN_SANDBOX_BACKEND`), `127.0.0.1` when they are processes (a
//!   cluster's, always processes: comma-separated);
//! - `OVN_NB_PIDS`: with `--cluster`, the members' process ids, in member order;
//! - `OVN_VERSION`, `OVS_VERSION`: the versions running.

use std::process::{exit, Command};

const USAGE: &str = "usage: ovn-sandbox [--cluster N] -- COMMAND [ARG...]";

fn fail(message: &str) -> ! {
    eprintln!("ovn-sandbox: {message}");
    exit(2);
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut members = None;
    if args.first().map(String::as_str) == Some("--cluster") {
        let n = args
            .get(1)
            .unwrap_or_else(|| fail("--cluster needs a member count"));
        let n: usize = n
            .parse()
            .ok()
            .filter(|n| (1..=7).contains(n))
            .unwrap_or_else(|| fail(&format!("--cluster {n}: a member count from 1 to 7")));
        members = Some(n);
        args.drain(..2);
    }
    let cmd = match args.first().map(String::as_str) {
        Some("--") => &args[1..],
        Some("-h" | "--help") | None => {
            eprintln!("{USAGE}");
            exit(2);
        }
        Some(_) => &args[..],
    };
    if cmd.is_empty() {
        fail("no command given");
    }
    let mut command = Command::new(&cmd[0]);
    command.args(&cmd[1..]);
    // Kept alive while the command runs; dropping them stops every daemon.
    let _running: Box<dyn std::any::Any> = match members {
        None => {
            let sandbox = ovn_sandbox::Sandbox::start().unwrap_or_else(|e| fail(&e.to_string()));
            let install = sandbox.nb.installation();
            command
                .env("OVN_NB_DB", sandbox.nb.unix_remote())
                .env("OVN_SB_DB", sandbox.sb.unix_remote())
                .env("OVN_NB_TCP", sandbox.nb.tcp_remote())
                .env("OVN_SB_TCP", sandbox.sb.tcp_remote())
                .env("OVN_VERSION", install.ovn_version())
                .env("OVS_VERSION", install.ovs_version());
            Box::new(sandbox)
        }
        Some(n) => {
            let install =
                ovn_sandbox::Installation::recent().unwrap_or_else(|e| fail(&e.to_string()));
            let cluster = ovn_sandbox::Cluster::start(&install, n, None)
                .unwrap_or_else(|e| fail(&e.to_string()));
            let joined = |f: fn(&ovn_sandbox::OvsdbServer) -> String| {
                cluster.members.iter().map(f).collect::<Vec<_>>().join(",")
            };
            let pids: Vec<String> = cluster
                .members
                .iter()
                .filter_map(|m| m.pid().map(|p| p.to_string()))
                .collect();
            command
                .env("OVN_NB_DB", joined(ovn_sandbox::OvsdbServer::unix_remote))
                .env("OVN_NB_TCP", cluster.remotes())
                .env("OVN_NB_PIDS", pids.join(" "))
                .env("OVN_VERSION", install.ovn_version())
                .env("OVS_VERSION", install.ovs_version());
            Box::new(cluster)
        }
    };
    let status = command.status();
    drop(_running);
    match status {
        Ok(s) => exit(s.code().unwrap_or(1)),
        Err(e) => {
            eprintln!("ovn-sandbox: cannot run {}: {e}", cmd[0]);
            exit(1);
        }
    }
}
