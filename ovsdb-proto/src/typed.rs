//! The typed entry points, where users look for them: a model's database on a server
//! ([`Db`], [`Transaction`], defined in [`crate::model`]) and how the server's schema
//! differs from the model's ([`SchemaSkew`]). Committing a transaction and waiting for a
//! cache to show it is [`Cache::commit_and_wait`](crate::cache::Cache::commit_and_wait).

pub use crate::model::db::*;
pub use crate::model::skew::SchemaSkew;
