//! How to connect: [`ConnectOptions`], read by [`crate::connect`] and by the connection
//! it opens.

use std::time::Duration;

use crate::codec::DEFAULT_MAX_MESSAGE_SIZE;
use crate::transport::TlsConfig;

/// How to connect.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// TLS files, required for `ssl:` remotes.
    pub tls: Option<TlsConfig>,
    /// The largest incoming message accepted, in bytes.
    pub max_message_size: usize,
    /// How many notifications may wait unread before the connection stops reading
    /// (backpressure: none is dropped).
    pub notification_capacity: usize,
    /// After this long without a message from the server, send it an `echo`; if that
    /// long passes again without a message, the connection is declared dead (a peer
    /// that vanished without closing TCP). `None` turns the probe off.
    pub inactivity_probe: Option<Duration>,
    /// The most bytes that may wait unsent because the server does not read (requests,
    /// and the replies to its `echo` requests); past it the connection fails with an
    /// error saying so, instead of buffering without bound.
    pub max_unsent: usize,
    /// How long a request waits for its reply before it fails with an unknown outcome
    /// (the connection stays up; a late reply is dropped). `None` (the default, as in
    /// OVS) waits as long as the connection lives.
    pub request_timeout: Option<Duration>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            tls: None,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            notification_capacity: 1024,
            inactivity_probe: Some(Duration::from_secs(5)),
            max_unsent: 64 << 20,
            request_timeout: None,
        }
    }
}
