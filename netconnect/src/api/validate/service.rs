//! A `v1 Service` checked as the API server checks it, for what its load balancers
//! need: its type, cluster IPs (at most one per family, inside a service CIDR), ports
//! (unique name and protocol, numbers in range, node ports for `NodePort` and
//! `LoadBalancer` services), external IPs, session affinity and traffic policies.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;

use super::{err, FieldError};
use crate::api::service::{
    PortInfo, Protocol, Service, ServiceInfo, DEFAULT_AFFINITY_TIMEOUT, MAX_AFFINITY_TIMEOUT,
};

/// Checks `svc` against the service CIDRs `service_cidrs`. `Ok(None)` for a service
/// netconnect does not program (`ExternalName`).
pub fn service(svc: &Service, service_cidrs: &[IpNet]) -> Result<Option<ServiceInfo>, FieldError> {
    let spec = &svc.spec;
    let type_ = spec.type_.as_deref().unwrap_or("ClusterIP");
    match type_ {
        "ClusterIP" | "NodePort" | "LoadBalancer" => {}
        "ExternalName" => return Ok(None),
        other => {
            return err(
                "spec.type",
                format!(
                "unsupported value {other:?}: ClusterIP, NodePort, LoadBalancer or ExternalName"
            ),
            )
        }
    }
    let cluster_ips = cluster_ips(svc, service_cidrs)?;
    let ports = ports(svc, type_)?;
    let mut external_ips = Vec::new();
    for (i, e) in spec.external_ips.iter().enumerate() {
        let ip: IpAddr = e.parse().or_else(|_| {
            err(
                format!("spec.externalIPs[{i}]"),
                format!("{e:?} is not an IP address"),
            )
        })?;
        external_ips.push(ip);
    }
    for ingress in &svc.status.load_balancer.ingress {
        if let Some(ip) = ingress.ip.as_deref().and_then(|i| i.parse().ok()) {
            external_ips.push(ip);
        }
    }
    Ok(Some(ServiceInfo {
        namespace: svc.metadata.namespace.clone().unwrap_or_default(),
        name: svc.metadata.name.clone(),
        cluster_ips,
        external_ips,
        ports,
        affinity_timeout: affinity(svc)?,
        external_local: policy(
            spec.external_traffic_policy.as_deref(),
            "externalTrafficPolicy",
        )?,
        internal_local: policy(
            spec.internal_traffic_policy.as_deref(),
            "internalTrafficPolicy",
        )?,
        publish_not_ready: spec.publish_not_ready_addresses,
    }))
}

/// `clusterIPs` (or `clusterIP`): `None`/empty for headless, else addresses of
/// different families, the first equal to `clusterIP`, each inside a service CIDR.
fn cluster_ips(svc: &Service, service_cidrs: &[IpNet]) -> Result<Vec<IpAddr>, FieldError> {
    let spec = &svc.spec;
    let listed: Vec<&str> = if spec.cluster_ips.is_empty() {
        spec.cluster_ip.iter().map(String::as_str).collect()
    } else {
        spec.cluster_ips.iter().map(String::as_str).collect()
    };
    if listed
        .first()
        .is_none_or(|ip| ip.is_empty() || *ip == "None")
    {
        return Ok(Vec::new());
    }
    if let (Some(first), Some(one)) = (listed.first(), spec.cluster_ip.as_deref()) {
        if *first != one {
            return err(
                "spec.clusterIPs[0]",
                format!("must match spec.clusterIP {one:?}, is {first:?}"),
            );
        }
    }
    if listed.len() > 2 {
        return err("spec.clusterIPs", "at most two addresses, one per family");
    }
    let mut ips = Vec::new();
    for (i, text) in listed.iter().enumerate() {
        let field = format!("spec.clusterIPs[{i}]");
        let ip: IpAddr = text
            .parse()
            .or_else(|_| err(&field, format!("{text:?} is not an IP address")))?;
        if ips.iter().any(|o: &IpAddr| o.is_ipv4() == ip.is_ipv4()) {
            return err(field, "two addresses of one family");
        }
        if !service_cidrs.is_empty() && !service_cidrs.iter().any(|c| c.contains(&ip)) {
            let cidrs: Vec<String> = service_cidrs.iter().map(IpNet::to_string).collect();
            return err(
                field,
                format!("{ip} is not in the service CIDRs {}", cidrs.join(", ")),
            );
        }
        ips.push(ip);
    }
    Ok(ips)
}

/// The ports: at least one, names required with several and unique with their
/// protocol, numbers 1–65535, node ports only on `NodePort`/`LoadBalancer` services.
fn ports(svc: &Service, type_: &str) -> Result<Vec<PortInfo>, FieldError> {
    let spec = &svc.spec;
    if spec.ports.is_empty() {
        return err("spec.ports", "at least one port is required");
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (i, p) in spec.ports.iter().enumerate() {
        let f = format!("spec.ports[{i}]");
        let name = p.name.clone().unwrap_or_default();
        if spec.ports.len() > 1 && name.is_empty() {
            return err(
                format!("{f}.name"),
                "required when the service has several ports",
            );
        }
        let protocol = Protocol::parse(p.protocol.as_deref()).ok_or_else(|| FieldError {
            field: format!("{f}.protocol"),
            message: format!(
                "unsupported value {:?}: TCP, UDP or SCTP",
                p.protocol.as_deref().unwrap_or_default()
            ),
        })?;
        if !seen.insert((name.clone(), protocol)) {
            return err(
                format!("{f}.name"),
                format!("{name:?} with {} is listed twice", protocol.as_str()),
            );
        }
        let port = port_number(&format!("{f}.port"), p.port)?;
        let node_port = match p.node_port {
            None | Some(0) => None,
            Some(_) if type_ == "ClusterIP" => {
                return err(
                    format!("{f}.nodePort"),
                    "may not be set for a ClusterIP service",
                )
            }
            Some(n) => Some(port_number(&format!("{f}.nodePort"), n)?),
        };
        out.push(PortInfo {
            name,
            protocol,
            port,
            node_port,
        });
    }
    Ok(out)
}

fn port_number(field: &str, n: i64) -> Result<u16, FieldError> {
    match u16::try_from(n) {
        Ok(p) if p > 0 => Ok(p),
        _ => err(field, format!("{n} is not between 1 and 65535")),
    }
}

/// `sessionAffinity`: `None` or `ClientIP` (its timeout, 1 to 86400 seconds, three
/// hours when not given).
fn affinity(svc: &Service) -> Result<Option<i32>, FieldError> {
    let spec = &svc.spec;
    match spec.session_affinity.as_deref().unwrap_or("None") {
        "None" => Ok(None),
        "ClientIP" => {
            let timeout = spec
                .session_affinity_config
                .as_ref()
                .and_then(|c| c.client_ip.as_ref())
                .and_then(|c| c.timeout_seconds);
            match timeout {
                None => Ok(Some(DEFAULT_AFFINITY_TIMEOUT)),
                Some(t) if (1..=i64::from(MAX_AFFINITY_TIMEOUT)).contains(&t) => Ok(Some(t as i32)),
                Some(t) => err(
                    "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                    format!("{t} is not between 1 and {MAX_AFFINITY_TIMEOUT}"),
                ),
            }
        }
        other => err(
            "spec.sessionAffinity",
            format!("unsupported value {other:?}: None or ClientIP"),
        ),
    }
}

/// A traffic policy: true for `Local`.
fn policy(value: Option<&str>, field: &str) -> Result<bool, FieldError> {
    match value.unwrap_or("Cluster") {
        "Cluster" => Ok(false),
        "Local" => Ok(true),
        other => err(
            format!("spec.{field}"),
            format!("unsupported value {other:?}: Cluster or Local"),
        ),
    }
}
