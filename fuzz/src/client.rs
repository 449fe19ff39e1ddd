//! The client over an in-memory server that says anything.
//!
//! Input: byte 0 picks the call (`list_dbs`, `get_schema`, `transact`, `echo`,
//! `monitor` and `monitor_cond_since` decoded while they arrive), the rest is every
//! byte the server sends once it has read the client's first request, before it
//! closes the connection. Checked:
//! - the call ends (with a result or an error) within a bound after the server closed,
//!   and so does the connection;
//! - everything the client wrote is a sequence of JSON values.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::time::Duration;

use ovsdb_proto::{Client, ConnectOptions, MonitorRequest, Operation};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a call may take after the server closed the connection.
pub const BOUND: Duration = Duration::from_secs(10);

/// The calls the target can make.
const CALLS: u8 = 6;

async fn call(client: &Client, which: u8) {
    let requests: BTreeMap<String, MonitorRequest> =
        [("T".to_string(), MonitorRequest::default())].into();
    let value = PhantomData::<serde_json::Value>;
    let _ = match which % CALLS {
        0 => client.list_dbs().await.map(drop),
        1 => client.get_schema("D").await.map(drop),
        2 => client
            .transact("D", &[Operation::select("T", vec![])])
            .await
            .map(drop),
        3 => client.echo(&serde_json::json!(["fuzz"])).await.map(drop),
        4 => client
            .monitor_with("D", serde_json::Value::Null, &requests, value)
            .await
            .map(drop),
        _ => client
            .monitor_cond_since_with("D", serde_json::Value::Null, &requests, None, value)
            .await
            .map(drop),
    };
}

/// The check; see the module docs.
pub fn check(data: &[u8]) {
    let [which, said @ ..] = data else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let written = runtime.block_on(async {
        let (ours, mut theirs) = tokio::io::duplex(1 << 16);
        let options = ConnectOptions {
            request_timeout: None,
            ..ConnectOptions::default()
        };
        let (client, notifications) = Client::from_transport(ours, &options);
        let said = said.to_vec();
        // The server: waits for the first request, says its piece, stops writing, and
        // keeps what the client wrote until the client leaves.
        let server = tokio::spawn(async move {
            let mut written = Vec::new();
            let mut chunk = [0u8; 4096];
            let n = theirs.read(&mut chunk).await.unwrap_or(0);
            written.extend_from_slice(&chunk[..n]);
            let _ = theirs.write_all(&said).await;
            let _ = theirs.shutdown().await;
            let _ = theirs.read_to_end(&mut written).await;
            written
        });
        tokio::time::timeout(BOUND, call(&client, *which))
            .await
            .expect("the call outlived its connection");
        tokio::time::timeout(BOUND, client.closed())
            .await
            .expect("the connection outlived the server");
        drop((client, notifications));
        tokio::time::timeout(BOUND, server)
            .await
            .expect("the client did not let go of the connection")
            .expect("the server task")
    });
    for value in serde_json::Deserializer::from_slice(&written).into_iter::<serde_json::Value>() {
        if let Err(e) = value {
            panic!(
                "the client wrote something that is not JSON ({e}): {}",
                String::from_utf8_lossy(&written)
            );
        }
    }
}
