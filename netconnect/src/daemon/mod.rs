//! What `netconnectd` adds around the library: its command line ([`args`]), what it
//! does with it (`--plan`, `--once`, or serving: [`run`]), its seams with the outside
//! (where inputs come from and where statuses go: [`seams`]), the manifest directory
//! read and watched ([`manifests`]), the HTTP endpoints ([`http`]), the metrics
//! ([`metrics`]) and the replicas' lock ([`replica`]). The binary only parses the arguments and starts [`run::run`].

pub mod args;
pub mod http;
pub mod manifests;
pub mod metrics;
pub mod replica;
pub mod run;
pub mod seams;
