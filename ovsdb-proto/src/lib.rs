//! RFC 7047 OVSDB from scratch, for OVN controllers and tools: a monitor-driven cache,
//! typed models and transactions, and under them the data model, schemas, a streaming
//! JSON-RPC codec and an async client over `tcp:`, `unix:` and `ssl:` remotes.
//!
//! Where to start:
//! - [`cache`]: what most tools want. [`cache::Cache`] keeps chosen tables in memory
//!   across reconnects and raft failovers, typed and indexed if asked, with ordered
//!   event streams; writes go through it and wait until it shows them
//!   (`cache.db::<D>()`, `cache.commit_and_wait`).
//! - [`model`] and [`typed`]: rows as Rust structs (`#[derive(Table)]` from
//!   `ovsdb-derive`; the `nb-model` crate has OVN_Northbound generated), typed
//!   conditions, references and transactions ([`typed::Db`]).
//! - [`client`]: one connection, untyped: [`connect`](fn@connect), [`Client::transact`], monitors.
//! - [`lock`]: OVSDB locks, held, stolen and lost.
//!
//! A cache of switches indexed by an external id, its events, and a typed handle for
//! writes (with `nb-model`: `cache.db::<nb_model::OvnNorthbound>()`):
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use std::collections::BTreeMap;
//! use std::time::Duration;
//! use ovsdb_proto::cache::{Cache, CacheConfig, Change, TypedEvent};
//! use ovsdb_proto::{Remote, Uuid};
//!
//! // One table's row; nb-model has every OVN_Northbound table generated this way.
//! #[derive(Clone, Debug, Default, PartialEq, ovsdb_derive::Table)]
//! #[ovsdb(table = "Logical_Switch")]
//! struct LogicalSwitch {
//!     #[ovsdb(uuid)]
//!     uuid: Uuid,
//!     name: String,
//!     external_ids: BTreeMap<String, String>,
//! }
//!
//! let remotes = Remote::parse_list("tcp:10.0.0.1:6641,tcp:10.0.0.2:6641")?;
//! let mut config = CacheConfig::new(remotes, "OVN_Northbound", &[]);
//! config.leader_only = true;
//! let by_owner = config.typed_index("owner", |s: &LogicalSwitch| {
//!     s.external_ids.get("owner").cloned()
//! });
//! let mut switches = config.subscribe::<LogicalSwitch>(); // keep it read
//! let (cache, _every_table) = Cache::start(config);
//! cache.ready(Duration::from_secs(10)).await?; // or: which servers, and why not
//! for s in cache.snapshot().lookup(&by_owner, "me")? {
//!     println!("mine: {}", s.name);
//! }
//! while let Some(event) = switches.recv().await {
//!     if let TypedEvent::Change { change: Change::Insert { new }, .. } = event {
//!         println!("+ {}", new.name);
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! The untyped client:
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
//! a tokio-util codec), [`ops`] and [`monitor`] (the messages), then [`client`], then
//! [`model`], [`cache`] and [`lock`].

#![warn(missing_docs)]

// The modules in layer order, bottom up.
// Values and schemas: no I/O.
pub mod datum;
mod diff;
pub mod schema;
#[cfg(test)]
mod test_rng;

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
mod reader;
mod writer;

// Typed models and transactions, the cache, locks.
pub mod model;
pub mod typed;

pub mod cache;
pub mod lock;

pub use client::{Client, Notifications, Prepared, RequestId};
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
