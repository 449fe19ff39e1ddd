//! `ovn-sandbox -- COMMAND [ARG…]`: starts a real OVN central (northbound and
//! southbound ovsdb-servers and ovn-northd), runs COMMAND with the remotes in its
//! environment, then stops every daemon and exits with COMMAND's status.
//!
//! Environment given to COMMAND:
//! - `OVN_NB_DB`, `OVN_SB_DB`: `unix:` remotes for programs on the host;
//! - `OVN_NB_TCP`, `OVN_SB_TCP`: `tcp:127.0.0.1:PORT` remotes;
//! - `OVN_VERSION`, `OVS_VERSION`: the versions running.

use std::process::{exit, Command};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cmd = match args.first().map(String::as_str) {
        Some("--") => &args[1..],
        Some("-h" | "--help") | None => {
            eprintln!("usage: ovn-sandbox -- COMMAND [ARG...]");
            exit(2);
        }
        Some(_) => &args[..],
    };
    if cmd.is_empty() {
        eprintln!("ovn-sandbox: no command given");
        exit(2);
    }
    let sandbox = match ovn_sandbox::Sandbox::start() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ovn-sandbox: {e}");
            exit(1);
        }
    };
    let install = sandbox.nb.installation();
    let status = Command::new(&cmd[0])
        .args(&cmd[1..])
        .env("OVN_NB_DB", sandbox.nb.unix_remote())
        .env("OVN_SB_DB", sandbox.sb.unix_remote())
        .env("OVN_NB_TCP", sandbox.nb.tcp_remote())
        .env("OVN_SB_TCP", sandbox.sb.tcp_remote())
        .env("OVN_VERSION", install.ovn_version())
        .env("OVS_VERSION", install.ovs_version())
        .status();
    drop(sandbox);
    match status {
        Ok(s) => exit(s.code().unwrap_or(1)),
        Err(e) => {
            eprintln!("ovn-sandbox: cannot run {}: {e}", cmd[0]);
            exit(1);
        }
    }
}
