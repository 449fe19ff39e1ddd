//! The CRDs' validation rules (their CEL `XValidation`s, enums and bounds), checked on
//! objects read from files since no API server checked them, plus the checks
//! OVN-Kubernetes' cluster manager makes after admission. Each failure names the field.
//!
//! By object and rule: a (Cluster)UserDefinedNetwork's spec (`network.rs`), the rules an
//! update must keep (`update.rs`), the ranges networks must stay out of (`reserved.rs`),
//! a ClusterNetworkConnect's spec (`connect.rs`); the field helpers they share are here.

use std::net::IpAddr;

use ipnet::IpNet;

use super::network::{
    ClusterSubnet, Network, NetworkOwner, DEFAULT_JOIN_V4, DEFAULT_JOIN_V6, DEFAULT_MTU,
};
use super::objects::{
    ClusterNetworkConnect, ClusterUserDefinedNetwork, Layer2Config, Layer3Config, NetworkSpec,
    Role, Topology, UserDefinedNetwork,
};

/// The most subnets a Layer3 network may list (OKEP-5377's CEL cost bound).
pub(crate) const MAX_LAYER3_SUBNETS: usize = 400;

/// A field and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field's path, e.g. `spec.layer3.subnets[1]`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

fn err<T>(field: impl Into<String>, message: impl Into<String>) -> Result<T, FieldError> {
    Err(FieldError {
        field: field.into(),
        message: message.into(),
    })
}

/// Parses a CIDR; `masked` requires it to be a network address (no host bits).
fn cidr(field: &str, text: &str, masked: bool) -> Result<IpNet, FieldError> {
    let n: IpNet = match text.trim().parse() {
        Ok(n) => n,
        Err(_) => return err(field, format!("{text:?} is not a CIDR")),
    };
    if masked && n.trunc() != n {
        return err(
            field,
            format!(
                "{text} is not a network address (did you mean {}?)",
                n.trunc()
            ),
        );
    }
    Ok(n.trunc())
}

fn family(n: &IpNet) -> &'static str {
    if n.addr().is_ipv4() {
        "IPv4"
    } else {
        "IPv6"
    }
}

/// True when one of `a`, `b` contains the other (CIDRs overlap exactly then).
pub fn overlaps(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// Checks a dual-stack list: at most two entries, of different families.
fn dual_stack(field: &str, list: &[String]) -> Result<Vec<IpNet>, FieldError> {
    if list.len() > 2 {
        return err(field, format!("at most 2 entries, got {}", list.len()));
    }
    let parsed = list
        .iter()
        .enumerate()
        .map(|(i, s)| cidr(&format!("{field}[{i}]"), s, false))
        .collect::<Result<Vec<_>, _>>()?;
    if parsed.len() == 2 && family(&parsed[0]) == family(&parsed[1]) {
        return err(
            field,
            "When 2 CIDRs are set, they must be from different IP families",
        );
    }
    Ok(parsed)
}

mod connect;
mod network;
mod reserved;
pub mod service;
mod update;

pub(crate) use connect::{connect_spec, ConnectSpec};
pub(crate) use network::{cudn_network, udn_network};
pub(crate) use reserved::check_reserved;
pub use reserved::Reserved;
pub(crate) use update::check_update;

#[cfg(test)]
mod tests;
