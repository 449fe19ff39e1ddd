//! Opening a connection: [`connect`] / [`connect_with`], which spawn the connection's
//! tasks on the current tokio runtime and return a cloneable [`Client`] plus the
//! [`Notifications`] stream.

use crate::client::Client;
use crate::config::ConnectOptions;
use crate::connection::Notifications;
use crate::error::Error;
use crate::remote::Remote;
use crate::transport;

/// Connects to a remote given as `tcp:HOST:PORT`, `unix:PATH` (or `ssl:…` through
/// [`connect_with`]), with default options.
pub async fn connect(remote: &str) -> Result<(Client, Notifications), Error> {
    let remote = Remote::parse(remote)?;
    connect_with(&remote, &ConnectOptions::default()).await
}

/// Connects to `remote` with the given options.
pub async fn connect_with(
    remote: &Remote,
    options: &ConnectOptions,
) -> Result<(Client, Notifications), Error> {
    let open = transport::open(remote, options.tls.as_ref());
    let stream = match options.connect_timeout {
        Some(limit) => tokio::time::timeout(limit, open).await.map_err(|_| {
            Error::io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("{remote}: not connected within {limit:?}"),
            ))
        })??,
        None => open.await?,
    };
    Ok(Client::from_transport(stream, options))
}
