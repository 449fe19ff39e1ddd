//! The rules, each with the message a user reads.

use super::*;
use crate::api::load::{parse_file, Object};
use std::path::Path;

fn udn(spec_yaml: &str) -> UserDefinedNetwork {
    let text = format!(
        "apiVersion: k8s.ovn.org/v1\nkind: UserDefinedNetwork\nmetadata: {{name: net1, namespace: red}}\nspec:\n{spec_yaml}"
    );
    let f = parse_file(Path::new("udn.yaml"), &text);
    assert!(f.problems.is_empty(), "{:?}", f.problems);
    match f.objects.into_iter().next().map(|o| o.1) {
        Some(Object::UserDefinedNetwork(u)) => *u,
        other => panic!("{other:?}"),
    }
}

fn l3(subnets: &str) -> Result<Network, FieldError> {
    udn_network(&udn(&format!(
        "  topology: Layer3\n  layer3:\n    role: Primary\n    subnets: {subnets}\n"
    )))
}

#[test]
fn a_layer3_network_gets_defaults_and_keeps_subnet_order() {
    let n = l3("[{cidr: 10.10.0.0/16, hostSubnet: 17}, {cidr: \"fd00:10::/48\"}, {cidr: 10.11.0.0/16, hostSubnet: 17}]").unwrap();
    assert_eq!(n.name(), "red_net1");
    assert_eq!(n.mtu, 1400);
    assert_eq!(n.subnets[1].host_len, 64);
    assert_eq!(n.subnets[2].cidr.to_string(), "10.11.0.0/16");
    assert_eq!(
        n.join_subnets
            .iter()
            .map(|j| j.to_string())
            .collect::<Vec<_>>(),
        ["100.65.0.0/16", "fd99::/64"]
    );
}

#[test]
fn layer3_subnet_rules_name_the_entry() {
    let e = l3("[{cidr: 10.1.0.0/17}, {cidr: 10.1.0.0/16}]").unwrap_err();
    assert_eq!(e.field, "spec.layer3.subnets[1]");
    assert!(
        e.message.contains("10.1.0.0/16 overlaps 10.1.0.0/17"),
        "{e}"
    );
    let e = l3("[{cidr: 10.1.0.0/16}, {cidr: 10.1.0.0/16}]").unwrap_err();
    assert!(e.message.contains("same CIDR"), "{e}");
    let e = l3("[{cidr: 10.1.0.0/16, hostSubnet: 24}, {cidr: 10.2.0.0/16, hostSubnet: 25}]")
        .unwrap_err();
    assert_eq!(e.field, "spec.layer3.subnets[1].hostSubnet");
    assert!(e.message.contains("same hostSubnet"), "{e}");
    let e = l3("[{cidr: 10.1.0.0/16, hostSubnet: 16}]").unwrap_err();
    assert!(e.message.contains("must be smaller than CIDR"), "{e}");
    let e = l3("[{cidr: 10.1.0.0/16, hostSubnet: 32}]").unwrap_err();
    assert!(e.message.contains("< 32"), "{e}");
    let e = l3("[{cidr: nonsense}]").unwrap_err();
    assert_eq!(e.field, "spec.layer3.subnets[0].cidr");
    let e = l3("[]").unwrap_err();
    assert!(e.message.contains("at least one"), "{e}");
    let many: Vec<String> = (0..401)
        .map(|i| format!("{{cidr: 10.{}.{}.0/24, hostSubnet: 28}}", i / 256, i % 256))
        .collect();
    let e = l3(&format!("[{}]", many.join(", "))).unwrap_err();
    assert!(e.message.contains("at most 400"), "{e}");
    let ok: Vec<String> = (0..400)
        .map(|i| format!("{{cidr: 10.{}.{}.0/24, hostSubnet: 28}}", i / 256, i % 256))
        .collect();
    assert_eq!(
        l3(&format!("[{}]", ok.join(", "))).unwrap().subnets.len(),
        400
    );
}

#[test]
fn topology_sections_and_roles_are_consistent() {
    let e = udn_network(&udn(
        "  topology: Layer3\n  layer2: {role: Primary, subnets: [10.0.0.0/16]}\n",
    ))
    .unwrap_err();
    assert_eq!(e.field, "spec.layer3");
    let e = udn_network(&udn(
        "  topology: Layer2\n  layer2: {role: Secondary, subnets: [10.0.0.0/16], joinSubnets: [100.66.0.0/16]}\n",
    ))
    .unwrap_err();
    assert_eq!(
        e.message,
        "JoinSubnets is only supported for Primary network"
    );
    let e = udn_network(&udn(
        "  topology: Layer2\n  layer2: {role: Primary, subnets: [10.0.0.0/16, 10.1.0.0/16]}\n",
    ))
    .unwrap_err();
    assert!(e.message.contains("different IP families"), "{e}");
    let e = udn_network(&udn(
        "  topology: Layer2\n  layer2: {role: Primary, subnets: [10.0.0.0/16, \"fd00::/64\"], mtu: 1200}\n",
    ))
    .unwrap_err();
    assert!(e.message.contains("1280"), "{e}");
    let e = udn_network(&udn(
        "  topology: Layer2\n  layer2: {role: Primary, subnets: [10.0.0.0/16], defaultGatewayIPs: [10.1.0.1]}\n",
    ))
    .unwrap_err();
    assert_eq!(e.field, "spec.layer2.defaultGatewayIPs[0]");
}

#[test]
fn updates_may_only_append_layer3_subnets() {
    let old = l3("[{cidr: 10.1.0.0/16}]").unwrap();
    let grown = l3("[{cidr: 10.1.0.0/16}, {cidr: 10.2.0.0/16}]").unwrap();
    check_update(&old, &grown, "spec").unwrap();
    let e = check_update(&grown, &old, "spec").unwrap_err();
    assert!(
        e.message
            .contains("Removing existing subnets is not allowed: 10.2.0.0/16"),
        "{e}"
    );
    let changed = l3("[{cidr: 10.1.0.0/16, hostSubnet: 25}]").unwrap();
    let e = check_update(&old, &changed, "spec").unwrap_err();
    assert!(e.message.starts_with("hostSubnet is immutable"), "{e}");
    let l2a = udn_network(&udn(
        "  topology: Layer2\n  layer2: {role: Primary, subnets: [10.0.0.0/16]}\n",
    ))
    .unwrap();
    let l2b = udn_network(&udn(
        "  topology: Layer2\n  layer2: {role: Primary, subnets: [10.0.0.0/16], mtu: 1500}\n",
    ))
    .unwrap();
    assert!(check_update(&l2a, &l2b, "spec")
        .unwrap_err()
        .message
        .contains("mtu is immutable"));
    let e = check_update(&old, &l2a, "spec").unwrap_err();
    assert!(e.message.contains("Topology is immutable"), "{e}");
}

#[test]
fn reserved_ranges_and_join_subnets_are_kept_out() {
    let r = Reserved::default();
    let e = check_reserved(&l3("[{cidr: 10.96.0.0/12}]").unwrap(), &r, "spec").unwrap_err();
    assert_eq!(e.field, "spec.layer3.subnets[0].cidr");
    assert!(e.message.contains("service CIDR 10.96.0.0/16"), "{e}");
    let e = check_reserved(&l3("[{cidr: 100.65.0.0/20}]").unwrap(), &r, "spec").unwrap_err();
    assert!(e.message.contains("join subnet"), "{e}");
    let e = check_reserved(&l3("[{cidr: 169.254.0.0/20}]").unwrap(), &r, "spec").unwrap_err();
    assert!(e.message.contains("masquerade"), "{e}");
    // OKEP-5377: the default network's subnets too.
    let e = check_reserved(&l3("[{cidr: 10.130.0.0/16}]").unwrap(), &r, "spec").unwrap_err();
    assert_eq!(
        e.message,
        "10.130.0.0/16 overlaps the default network's cluster subnet 10.128.0.0/14"
    );
    let e = check_reserved(&l3("[{cidr: 100.64.0.0/20}]").unwrap(), &r, "spec").unwrap_err();
    assert_eq!(
        e.message,
        "100.64.0.0/20 overlaps the default network's join subnet 100.64.0.0/16"
    );
    check_reserved(&l3("[{cidr: 10.1.0.0/16}]").unwrap(), &r, "spec").unwrap();
}

fn cnc(spec_yaml: &str) -> Result<ConnectSpec, FieldError> {
    let text = format!("apiVersion: k8s.ovn.org/v1\nkind: ClusterNetworkConnect\nmetadata: {{name: c}}\nspec:\n{spec_yaml}");
    let f = parse_file(Path::new("cnc.yaml"), &text);
    assert!(f.problems.is_empty(), "{:?}", f.problems);
    match &f.objects[0].1 {
        Object::ClusterNetworkConnect(c) => connect_spec(c),
        other => panic!("{other:?}"),
    }
}

const SEL: &str = "  networkSelectors:\n  - networkSelectionType: PrimaryUserDefinedNetworks\n    primaryUserDefinedNetworkSelector:\n      namespaceSelector: {matchLabels: {a: b}}\n";

#[test]
fn connect_specs_follow_the_crd_rules() {
    let ok = cnc(&format!("{SEL}  connectSubnets: [{{cidr: \"fd01::/64\", networkPrefix: 120}}, {{cidr: 192.168.0.0/16, networkPrefix: 24}}]\n  connectivity: [PodNetwork, ServiceNetwork]\n")).unwrap();
    assert_eq!(
        ok.connect_subnets[0].0.to_string(),
        "192.168.0.0/16",
        "IPv4 first"
    );
    assert!(ok.pod_network && ok.service_network);
    let okep = cnc(&format!("{SEL}  connectSubnets: [{{cidr: 192.168.0.0/16, networkPrefix: 24}}]\n  connectivityEnabled: [ClusterIPServiceNetwork]\n")).unwrap();
    assert!(okep.service_network && !okep.pod_network);
    let cases = [
        (
            "[{cidr: 192.168.0.0/16, networkPrefix: 24}, {cidr: 10.0.0.0/16, networkPrefix: 24}]",
            "[PodNetwork]",
            "different IP families",
        ),
        (
            "[{cidr: 192.168.0.0/16, networkPrefix: 24}, {cidr: \"fd01::/64\", networkPrefix: 96}]",
            "[PodNetwork]",
            "matching host bits",
        ),
        (
            "[{cidr: 192.168.0.1/16, networkPrefix: 24}]",
            "[PodNetwork]",
            "valid network address",
        ),
        (
            "[{cidr: 192.168.0.0/16, networkPrefix: 16}]",
            "[PodNetwork]",
            "must be longer than the CIDR prefix",
        ),
        (
            "[{cidr: 192.168.0.0/16, networkPrefix: 32}]",
            "[PodNetwork]",
            "must < 32",
        ),
        (
            "[{cidr: 192.168.0.0/16, networkPrefix: 24}]",
            "[PodNetwork, PodNetwork]",
            "duplicate",
        ),
        (
            "[{cidr: 192.168.0.0/16, networkPrefix: 24}]",
            "[Everything]",
            "unsupported value",
        ),
        ("[]", "[PodNetwork]", "1 or 2 entries"),
    ];
    for (subnets, conn, want) in cases {
        let e = cnc(&format!(
            "{SEL}  connectSubnets: {subnets}\n  connectivity: {conn}\n"
        ))
        .unwrap_err();
        assert!(e.message.contains(want), "{subnets} {conn}: {e}");
    }
    let e = cnc("  networkSelectors: [{networkSelectionType: SecondaryUserDefinedNetworks}]\n  connectSubnets: [{cidr: 192.168.0.0/16, networkPrefix: 24}]\n  connectivity: [PodNetwork]\n").unwrap_err();
    assert_eq!(e.field, "spec.networkSelectors[0].networkSelectionType");
}

/// A service read from a file with `spec`, checked against 10.96.0.0/16.
fn svc(spec_yaml: &str) -> Result<Option<crate::api::service::ServiceInfo>, FieldError> {
    let text = format!("apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: blue}}\nspec:\n{spec_yaml}");
    let f = parse_file(Path::new("svc.yaml"), &text);
    assert!(f.problems.is_empty(), "{:?}", f.problems);
    match &f.objects[0].1 {
        Object::Service(s) => service::service(s, &["10.96.0.0/16".parse().unwrap()]),
        other => panic!("{other:?}"),
    }
}

#[allow(clippy::too_many_lines)] // a test: one story, start to end
#[test]
fn services_follow_the_api_servers_rules() {
    let ok = svc("  clusterIP: 10.96.0.10\n  ports: [{port: 80, targetPort: 8080}]\n")
        .unwrap()
        .unwrap();
    assert_eq!(ok.key(), "blue/web");
    assert_eq!(ok.cluster_ips, ["10.96.0.10".parse::<IpAddr>().unwrap()]);
    assert_eq!(ok.ports[0].protocol, crate::api::service::Protocol::Tcp);
    // ExternalName services and headless ones, ports or not, are valid; netconnect
    // programs nothing for the first and no load balancer for the second.
    assert!(
        svc("  type: ExternalName\n  externalName: db.example.com.\n  ports: null\n")
            .unwrap()
            .is_none()
    );
    let headless = svc("  clusterIP: None\n  clusterIPs: [None]\n  ports: null\n")
        .unwrap()
        .unwrap();
    assert!(headless.cluster_ips.is_empty() && headless.ports.is_empty());
    let headless = svc("  clusterIP: None\n  ports: [{port: 5432}]\n")
        .unwrap()
        .unwrap();
    assert!(headless.cluster_ips.is_empty() && headless.ports.len() == 1);
    let cases = [
        (
            "  clusterIP: 10.97.0.10\n  ports: [{port: 80}]\n",
            "spec.clusterIPs[0]",
            "10.97.0.10 is not in the service CIDRs 10.96.0.0/16",
        ),
        (
            "  clusterIP: 10.96.0.10\n  clusterIPs: [10.96.0.10, 10.96.0.11]\n  ports: [{port: 80}]\n",
            "spec.clusterIPs[1]",
            "two addresses of one family",
        ),
        (
            "  clusterIP: 10.96.0.10\n  ports: [{port: 80, name: a}, {port: 81}]\n",
            "spec.ports[1].name",
            "required when the service has several ports",
        ),
        (
            "  clusterIP: 10.96.0.10\n  ports: [{port: 80, name: a}, {port: 81, name: a, protocol: UDP}]\n",
            "spec.ports[1].name",
            "\"a\" is listed twice",
        ),
        (
            "  clusterIP: 10.96.0.10\n  ports: [{port: 80, name: Web}]\n",
            "spec.ports[0].name",
            "\"Web\" is not a DNS-1123 label",
        ),
        (
            "  clusterIP: 10.96.0.10\n  ports: [{port: 80, name: a}, {port: 80, name: b}]\n",
            "spec.ports[1]",
            "port 80 with TCP is listed twice",
        ),
        (
            "  type: NodePort\n  clusterIP: 10.96.0.10\n  ports: [{port: 80, name: a, nodePort: 30080}, {port: 81, name: b, nodePort: 30080}]\n",
            "spec.ports[1].nodePort",
            "node port 30080 with TCP is listed twice",
        ),
        (
            "  type: NodePort\n  clusterIP: None\n  ports: [{port: 80}]\n",
            "spec.clusterIPs[0]",
            "may not be set to 'None' for NodePort services",
        ),
        (
            "  type: ExternalName\n  ports: []\n",
            "spec.externalName",
            "required for ExternalName services",
        ),
        (
            "  type: ExternalName\n  externalName: db\n  clusterIP: 10.96.0.10\n",
            "spec.clusterIPs",
            "may not be set for ExternalName services",
        ),
        (
            "  clusterIP: 10.96.0.10\n  ports: [{port: 80, protocol: ICMP}]\n",
            "spec.ports[0].protocol",
            "unsupported value \"ICMP\": TCP, UDP or SCTP",
        ),
        (
            "  clusterIP: 10.96.0.10\n  ports: [{port: 70000}]\n",
            "spec.ports[0].port",
            "70000 is not between 1 and 65535",
        ),
        (
            "  clusterIP: 10.96.0.10\n  ports: [{port: 80, nodePort: 30080}]\n",
            "spec.ports[0].nodePort",
            "may not be used when `type` is 'ClusterIP'",
        ),
        (
            "  clusterIP: 10.96.0.10\n  ports: [{port: 80}]\n  sessionAffinity: ClientIP\n  sessionAffinityConfig: {clientIP: {timeoutSeconds: 90000}}\n",
            "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
            "90000 is not between 1 and 86400",
        ),
        (
            "  clusterIP: 10.96.0.10\n  ports: [{port: 80}]\n  externalTrafficPolicy: Sometimes\n",
            "spec.externalTrafficPolicy",
            "unsupported value \"Sometimes\": Cluster or Local",
        ),
        ("  ports: []\n", "spec.ports", "at least one port is required"),
        (
            "  clusterIP: 10.96.0.10\n  ports: null\n",
            "spec.ports",
            "at least one port is required",
        ),
    ];
    for (spec, field, message) in cases {
        let e = svc(spec).unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            (field, message),
            "{spec}"
        );
    }
}

#[test]
fn a_bad_service_is_reported_where_it_is_and_the_others_are_kept() {
    let text = "apiVersion: v1\nkind: Service\nmetadata: {name: good, namespace: blue}\nspec: {clusterIP: 10.96.0.10, ports: [{port: 80}]}\n\
                ---\napiVersion: v1\nkind: Service\nmetadata: {name: bad, namespace: blue}\nspec: {clusterIP: 10.96.0.11, ports: [{port: 0}]}\n\
                ---\napiVersion: v1\nkind: Service\nmetadata: {name: nowhere}\nspec: {ports: [{port: 80}]}\n";
    let files = [parse_file(Path::new("svc.yaml"), text)];
    let inv = crate::api::Inventory::build(&files, &crate::api::Context::default());
    assert_eq!(inv.services.keys().collect::<Vec<_>>(), ["blue/good"]);
    let mut problems: Vec<String> = inv.problems.iter().map(ToString::to_string).collect();
    problems.sort();
    assert_eq!(
        problems,
        [
            "svc.yaml doc 2: Service blue/bad: spec.ports[0].port: 0 is not between 1 and 65535",
            "svc.yaml doc 3: Service nowhere: metadata.namespace: Service is namespaced and needs one",
        ]
    );
}

#[test]
fn only_a_load_balancer_service_takes_its_ingress_addresses() {
    let status = "status:\n  loadBalancer:\n    ingress: [{ip: 172.18.0.100}]\n";
    let lb = svc(&format!(
        "  type: LoadBalancer\n  clusterIP: 10.96.0.10\n  ports: [{{port: 80, nodePort: 30080}}]\n{status}"
    ))
    .unwrap()
    .unwrap();
    assert_eq!(lb.external_ips, ["172.18.0.100".parse::<IpAddr>().unwrap()]);
    // A ClusterIP service left with a status from when it was a LoadBalancer one.
    let was_lb = svc(&format!(
        "  clusterIP: 10.96.0.10\n  ports: [{{port: 80}}]\n{status}"
    ))
    .unwrap()
    .unwrap();
    assert!(was_lb.external_ips.is_empty(), "{:?}", was_lb.external_ips);
}
