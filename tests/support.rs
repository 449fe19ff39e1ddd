//! Helpers shared by the integration tests: a sandbox per test and a connected client.

use std::time::Duration;

use ovsdb_proto::{Client, Notifications};

pub use ovn_sandbox::{Installation, OvsdbServer, Sandbox, ServerOptions};

/// The northbound database name.
pub const NB: &str = "OVN_Northbound";

/// A fresh sandbox from the recent installation; panics with the sandbox's own message
/// (which says what to install) when there is none, so a missing OVN fails the test
/// rather than skipping it.
pub fn sandbox() -> Sandbox {
    Sandbox::start().unwrap_or_else(|e| panic!("cannot start the OVN sandbox: {e}"))
}

/// A standalone OVN_Northbound server from the recent installation.
pub fn nb_server() -> OvsdbServer {
    let install = Installation::recent().unwrap_or_else(|e| panic!("{e}"));
    OvsdbServer::start(&install, &ServerOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// Connects to `remote`, failing the test on error.
pub async fn client(remote: &str) -> (Client, Notifications) {
    ovsdb_proto::connect(remote)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {remote}: {e}"))
}

/// Waits for the next notification, failing the test after `secs` seconds.
pub async fn next_notification(n: &mut Notifications, secs: u64) -> ovsdb_proto::Notification {
    tokio::time::timeout(Duration::from_secs(secs), n.recv())
        .await
        .expect("timed out waiting for a notification")
        .expect("notifications ended")
}
