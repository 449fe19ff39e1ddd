//! OVN-Kubernetes' network logic for OVN_Northbound, on top of `nb-model`: the primary
//! user-defined network topologies (Layer3 with several subnets per OKEP-5377, Layer2
//! with a transit router per OKEP-5094), ClusterNetworkConnect (OKEP-5224), and the
//! `netconnectd` daemon that applies them to a real OVN.
//!
//! The data flows one way, pure before I/O:
//!
//! 1. [`api`]: objects read from YAML files as `kubectl get -o yaml` prints them
//!    (Nodes, Namespaces, UserDefinedNetworks, ClusterUserDefinedNetworks,
//!    ClusterNetworkConnects), validated by the CRDs' rules into an
//!    [`api::Inventory`];
//! 2. [`alloc`]: what OVN-Kubernetes' cluster manager allocates (node ids, network
//!    ids, host subnets, transit subnets, tunnel keys), deterministically, persisted as
//!    the same annotations ([`status::dir`]);
//! 3. [`topology`]: pure functions from inputs and allocations to the NB rows each
//!    reconcile key wants;
//! 4. [`reconcile`]: the difference between those rows and a snapshot of the NB, as
//!    one minimal transaction per key, touching only what the key owns;
//! 5. [`controller`]: the level-driven loop that feeds keys to the reconciler from
//!    input changes and NB events, with retries and backoff.

#![warn(missing_docs)]

pub mod alloc;
pub mod api;
pub mod controller;
pub mod daemon;
pub mod keys;
pub mod ovnk;
pub mod reconcile;
pub mod status;
pub mod topology;
pub mod virtual_networks;
pub mod world;

#[cfg(test)]
mod testing;
