//! What netconnect reports, as the API server would show it: the status directory
//! (`--status-dir`, [`dir`], with its [`journal`]), the objects written there with their allocations as
//! annotations ([`annotate`]), a ClusterNetworkConnect's conditions ([`connect`]) and a
//! network's ([`network`]).

pub mod annotate;
pub mod connect;
pub mod dir;
pub mod journal;
pub mod network;

pub use connect::*;
