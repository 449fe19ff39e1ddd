//! OVN-Kubernetes network logic on top of `nb-model`: primary user-defined network
//! topologies, the Layer2 transit-router topology (OKEP-5094), multiple Layer3 subnets
//! (OKEP-5377) and ClusterNetworkConnect (OKEP-5224), applied by the `netconnectd` daemon.
//!
//! This crate is a placeholder: nothing is implemented yet.

#![warn(missing_docs)]
