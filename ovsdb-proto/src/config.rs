//! How to connect: [`ConnectOptions`], read by [`crate::connect`](fn@crate::connect)
//! and by the connection it opens.

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
    /// that vanished without closing TCP). `None` turns the probe off. A cache doubles
    /// it (up to 64 times) after each connection the probe ended before the cache
    /// synced, since ovsdb-server answers nothing while it composes a big monitor
    /// reply; it is back to this once a connection syncs.
    pub inactivity_probe: Option<Duration>,
    /// The most bytes that may wait unsent because the server does not read (requests,
    /// and the replies to its `echo` requests); past it the connection fails with an
    /// error saying so, instead of buffering without bound.
    pub max_unsent: usize,
    /// The slowest a message may arrive, in bytes per second: at each inactivity-probe
    /// interval in which bytes came but no message completed, fewer than this rate's
    /// worth is a strike, and two in a row end the connection (a server trickling a
    /// reply byte by byte would otherwise hold a request for ever, every byte counting
    /// as life for the probe). Idle time between messages never counts; a healthy
    /// reply of any size arrives far faster. `None` turns the rule off; it is checked
    /// only while the inactivity probe is on. Default 1024.
    pub min_receive_rate: Option<u64>,
    /// How long opening the connection may take (the TCP handshake, and TLS's for
    /// `ssl:`): an address whose packets vanish would otherwise hold a connect for the
    /// kernel's SYN retries, about two minutes. `None` waits as long as the kernel
    /// does. Default 10 s.
    pub connect_timeout: Option<Duration>,
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
            connect_timeout: Some(Duration::from_secs(10)),
            min_receive_rate: Some(1024),
        }
    }
}
