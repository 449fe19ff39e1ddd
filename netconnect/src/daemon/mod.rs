//! What `netconnectd` adds around the library: the manifest directory read and
//! watched ([`manifests`]), the HTTP endpoints ([`http`]) and the metrics
//! ([`metrics`]).

pub mod http;
pub mod manifests;
pub mod metrics;
