//! A `v1 Service` checked as the API server checks it, for what its load balancers
//! need: the rules of `ValidateService`, `validateServicePort` and `isHeadlessService`
//! in Kubernetes' `pkg/apis/core/validation/validation.go`, with the defaults its
//! defaulting fills in (`type: ClusterIP`, `protocol: TCP`, `sessionAffinity: None`)
//! taken when a field is absent. Besides, each cluster IP must be inside a service CIDR
//! (what the API server's IP allocator enforces).
//!
//! - type: `ClusterIP`, `NodePort`, `LoadBalancer` or `ExternalName`.
//! - headless: `clusterIPs` is exactly `["None"]` (or, when `clusterIPs` is absent,
//!   `clusterIP: None`); only a `ClusterIP` service may be headless, and it may have no
//!   port. netconnect programs no load balancer for it.
//! - `ExternalName`: no cluster IP, an `externalName` that is a DNS-1123 subdomain (a
//!   trailing dot allowed), ports optional; netconnect programs nothing for it.
//! - otherwise at least one port.
//! - ports: a name when there are several, a DNS-1123 label each, unique; port numbers
//!   1–65535; protocol TCP, UDP or SCTP; no two ports with the same port and protocol,
//!   nor the same node port and protocol; no node port on a `ClusterIP` service.
//! - cluster IPs: the first equal to `clusterIP`, at most two, of different families.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;
use k8s_openapi::api::core::v1::ServiceSpec;

use super::{err, FieldError};
use crate::api::meta::{is_dns_label, is_dns_subdomain, Meta};
use crate::api::service::{
    PortInfo, Protocol, Service, ServiceInfo, DEFAULT_AFFINITY_TIMEOUT, MAX_AFFINITY_TIMEOUT,
};

/// Checks `svc` against the service CIDRs `service_cidrs`. `Ok(None)` for a service
/// netconnect does not program (`ExternalName`).
pub fn service(svc: &Service, service_cidrs: &[IpNet]) -> Result<Option<ServiceInfo>, FieldError> {
    let none = ServiceSpec::default();
    let spec = svc.spec.as_ref().unwrap_or(&none);
    let type_ = spec.type_.as_deref().unwrap_or("ClusterIP");
    match type_ {
        "ClusterIP" | "NodePort" | "LoadBalancer" => {}
        "ExternalName" => return external_name(spec).map(|()| None),
        other => {
            return err(
                "spec.type",
                format!(
                "unsupported value {other:?}: ClusterIP, NodePort, LoadBalancer or ExternalName"
            ),
            )
        }
    }
    let listed = listed_cluster_ips(spec);
    let headless = listed == ["None"];
    if headless && type_ != "ClusterIP" {
        return err(
            "spec.clusterIPs[0]",
            format!("may not be set to 'None' for {type_} services"),
        );
    }
    let cluster_ips = if headless {
        Vec::new()
    } else {
        cluster_ips(spec, &listed, service_cidrs)?
    };
    let ports = ports(spec, type_, headless)?;
    let mut external_ips = Vec::new();
    for (i, e) in spec.external_ips.iter().flatten().enumerate() {
        let ip: IpAddr = e.parse().or_else(|_| {
            err(
                format!("spec.externalIPs[{i}]"),
                format!("{e:?} is not an IP address"),
            )
        })?;
        external_ips.push(ip);
    }
    // A load balancer's ingress addresses, for a `LoadBalancer` service only
    // (OVN-Kubernetes' `GetExternalAndLBIPs`).
    let ingress = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .filter(|_| type_ == "LoadBalancer");
    for ingress in ingress.into_iter().flatten() {
        if let Some(ip) = ingress.ip.as_deref().and_then(|i| i.parse().ok()) {
            external_ips.push(ip);
        }
    }
    Ok(Some(ServiceInfo {
        namespace: svc.metadata.namespace().unwrap_or_default().to_owned(),
        name: svc.metadata.name().to_owned(),
        cluster_ips,
        external_ips,
        ports,
        affinity_timeout: affinity(spec)?,
        external_local: policy(
            spec.external_traffic_policy.as_deref(),
            "externalTrafficPolicy",
        )?,
        internal_local: policy(
            spec.internal_traffic_policy.as_deref(),
            "internalTrafficPolicy",
        )?,
        publish_not_ready: spec.publish_not_ready_addresses.unwrap_or(false),
    }))
}

/// An `ExternalName` service: no cluster IP, and a name to answer with.
fn external_name(spec: &ServiceSpec) -> Result<(), FieldError> {
    let listed = listed_cluster_ips(spec);
    if !listed.is_empty() {
        return err(
            "spec.clusterIPs",
            "may not be set for ExternalName services",
        );
    }
    let name = spec.external_name.as_deref().unwrap_or_default();
    let cname = name.strip_suffix('.').unwrap_or(name);
    if cname.is_empty() {
        return err("spec.externalName", "required for ExternalName services");
    }
    if !is_dns_subdomain(cname) {
        return err(
            "spec.externalName",
            format!("{name:?} is not a DNS-1123 subdomain"),
        );
    }
    Ok(())
}

/// `clusterIPs`, else `clusterIP` (a manifest written by hand may give only that), an
/// empty address left out.
fn listed_cluster_ips(spec: &ServiceSpec) -> Vec<&str> {
    match spec.cluster_ips.as_deref() {
        Some(ips) if !ips.is_empty() => ips.iter().map(String::as_str).collect(),
        _ => spec
            .cluster_ip
            .iter()
            .map(String::as_str)
            .filter(|ip| !ip.is_empty())
            .collect(),
    }
}

/// The cluster IPs of a service that is not headless: none when not allocated yet,
/// else addresses of different families, the first equal to `clusterIP`, each inside a
/// service CIDR.
fn cluster_ips(
    spec: &ServiceSpec,
    listed: &[&str],
    service_cidrs: &[IpNet],
) -> Result<Vec<IpAddr>, FieldError> {
    if let (Some(first), Some(one)) = (listed.first(), spec.cluster_ip.as_deref()) {
        if *first != one && !one.is_empty() {
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

/// The ports, as `ValidateService` and `validateServicePort` check them.
fn ports(spec: &ServiceSpec, type_: &str, headless: bool) -> Result<Vec<PortInfo>, FieldError> {
    let listed = spec.ports.as_deref().unwrap_or_default();
    if listed.is_empty() && !headless {
        return err("spec.ports", "at least one port is required");
    }
    let mut names = BTreeSet::new();
    let mut numbers = BTreeSet::new();
    let mut node_ports = BTreeSet::new();
    let mut out = Vec::new();
    for (i, p) in listed.iter().enumerate() {
        let f = format!("spec.ports[{i}]");
        let name = p.name.clone().unwrap_or_default();
        if name.is_empty() && listed.len() > 1 {
            return err(
                format!("{f}.name"),
                "required when the service has several ports",
            );
        }
        if !name.is_empty() && !is_dns_label(&name) {
            return err(
                format!("{f}.name"),
                format!("{name:?} is not a DNS-1123 label"),
            );
        }
        if !name.is_empty() && !names.insert(name.clone()) {
            return err(format!("{f}.name"), format!("{name:?} is listed twice"));
        }
        let protocol = Protocol::parse(p.protocol.as_deref()).ok_or_else(|| FieldError {
            field: format!("{f}.protocol"),
            message: format!(
                "unsupported value {:?}: TCP, UDP or SCTP",
                p.protocol.as_deref().unwrap_or_default()
            ),
        })?;
        let port = port_number(&format!("{f}.port"), p.port)?;
        if !numbers.insert((port, protocol)) {
            return err(
                f,
                format!("port {port} with {} is listed twice", protocol.as_str()),
            );
        }
        let node_port = match p.node_port {
            None | Some(0) => None,
            Some(_) if type_ == "ClusterIP" => {
                return err(
                    format!("{f}.nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                )
            }
            Some(n) => Some(port_number(&format!("{f}.nodePort"), n)?),
        };
        if let Some(n) = node_port {
            if !node_ports.insert((n, protocol)) {
                return err(
                    format!("{f}.nodePort"),
                    format!("node port {n} with {} is listed twice", protocol.as_str()),
                );
            }
        }
        out.push(PortInfo {
            name,
            protocol,
            port,
            node_port,
        });
    }
    Ok(out)
}

fn port_number(field: &str, n: i32) -> Result<u16, FieldError> {
    match u16::try_from(n) {
        Ok(p) if p > 0 => Ok(p),
        _ => err(field, format!("{n} is not between 1 and 65535")),
    }
}

/// `sessionAffinity`: `None` or `ClientIP` (its timeout, 1 to 86400 seconds, three
/// hours when not given).
fn affinity(spec: &ServiceSpec) -> Result<Option<i32>, FieldError> {
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
                Some(t) if (1..=MAX_AFFINITY_TIMEOUT).contains(&t) => Ok(Some(t)),
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
