//! RFC 7047 OVSDB from scratch: the data model, schemas, a streaming JSON-RPC codec and
//! an async client over `tcp:`, `unix:` and `ssl:` remotes.
//!
//! ```no_run
//! # async fn example() -> Result<(), ovsdb_proto::Error> {
//! use ovsdb_proto::{connect, Datum, Operation, Row};
//!
//! let (client, _notifications) = connect("unix:/var/run/ovn/ovnnb_db.sock").await?;
//! let mut row = Row::new();
//! row.insert("name".into(), Datum::scalar("sw0"));
//! let results = client
//!     .transact("OVN_Northbound", &[Operation::insert("Logical_Switch", row)])
//!     .await?;
//! println!("new switch {}", results[0].uuid().unwrap());
//! # Ok(()) }
//! ```
//!
//! The layers, from the bottom: [`datum`] and [`schema`] (no I/O), [`codec`] (framing as
//! a tokio-util codec), [`ops`] and [`monitor`] (the messages), then [`client`].

#![warn(missing_docs)]

// The modules in layer order, bottom up.
// Values and schemas: no I/O.
pub mod datum;
mod diff;
pub mod schema;

// The wire: framing, replies decoded while they arrive, transports.
pub mod codec;
mod cut;
pub mod remote;
mod tap;
pub mod transport;

// The messages and what the server answers.
pub mod error;
pub mod monitor;
pub mod ops;
pub mod reply;

// One connection, and the client over it.
pub mod client;
pub mod config;
pub mod connect;
mod connection;
mod writer;

// Typed models and transactions, the cache, locks.
pub mod model;
pub mod typed;

pub mod cache;
pub mod lock;

pub use client::{Client, Notifications, RequestId};
pub use config::ConnectOptions;
pub use connect::{connect, connect_with};
pub use datum::{Atom, AtomicType, CompactString, Datum, Row};
pub use error::{Error, ErrorKind};
pub use monitor::{
    MonitorRequest, MonitorSelect, Notification, RawNotification, RowUpdate, RowUpdate2,
    TableUpdates, TableUpdates2,
};
pub use ops::{Condition, Function, Mutation, Mutator, Operation, OperationResult, WaitUntil};
pub use remote::Remote;
pub use reply::{ServerError, TransactionError};
pub use schema::{ColumnSchema, ColumnType, DatabaseSchema, DatumError, TableSchema};
pub use transport::TlsConfig;
pub use uuid::Uuid;

/// Crates the derives' generated code uses; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use serde;
}
