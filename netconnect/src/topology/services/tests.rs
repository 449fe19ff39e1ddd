//! Cluster-wide service load balancers pinned with OVN-Kubernetes' own vectors
//! (`go-controller/pkg/ovn/controller/services/services_controller_test.go`,
//! `TestSyncServices`, the Layer3 user-defined network `net_layer3`): service
//! `testns/foo`, cluster IPs 192.168.1.1 and fd00::7777:0:0:1 port 80, endpoints on
//! port 3456, masquerade subnets 169.254.169.0/29 and fd69::/125.

use nb_model::{LoadBalancer, LoadBalancerProtocol, LoadBalancerSelectionFields};

use super::*;
use crate::api::service::{endpoints_of, EndpointSlice, Service};
use crate::api::validate::service::service;

const NET: &str = "net_layer3";

fn config() -> TopologyConfig {
    TopologyConfig {
        masquerade_subnets: vec![
            "169.254.169.0/29".parse().unwrap(),
            "fd69::/125".parse().unwrap(),
        ],
        ..TopologyConfig::default()
    }
}

fn svc(yaml: &str) -> ServiceInfo {
    let s: Service = serde_yaml_ng::from_str(yaml).unwrap();
    let cidrs: [ipnet::IpNet; 2] = [
        "192.168.0.0/16".parse().unwrap(),
        "fd00::7777:0:0:0/96".parse().unwrap(),
    ];
    service(&s, &cidrs).unwrap().unwrap()
}

fn slice(yaml: &str) -> EndpointSlice {
    serde_yaml_ng::from_str(yaml).unwrap()
}

const FOO: &str = "
metadata: {name: foo, namespace: testns}
spec:
  clusterIP: 192.168.1.1
  clusterIPs: [192.168.1.1]
  ports: [{port: 80, protocol: TCP, targetPort: 3456}]
";

const FOO_DUAL: &str = "
metadata: {name: foo, namespace: testns}
spec:
  type: NodePort
  clusterIP: 192.168.1.1
  clusterIPs: [192.168.1.1, 'fd00::7777:0:0:1']
  ports: [{port: 80, protocol: TCP, targetPort: 3456, nodePort: 30123}]
";

/// OVN-Kubernetes' `servicesOptions()`.
fn services_options() -> std::collections::BTreeMap<String, String> {
    map([
        ("event", "false"),
        ("reject", "true"),
        ("skip_snat", "false"),
        ("neighbor_responder", "none"),
        ("hairpin_snat_ip", "169.254.169.5 fd69::5"),
    ])
}

/// OVN-Kubernetes' `loadBalancerExternalIDsForNetwork("testns/foo", "net_layer3")`.
fn external_ids() -> std::collections::BTreeMap<String, String> {
    map([
        ("k8s.ovn.org/kind", "Service"),
        ("k8s.ovn.org/owner", "testns/foo"),
        ("k8s.ovn.org/network", NET),
        ("k8s.ovn.org/role", "primary"),
    ])
}

#[test]
fn a_service_without_endpoints_has_its_vip_and_no_backend() {
    // "create service from Single Stack Service without endpoints".
    let lbs = cluster_lbs(&svc(FOO), &endpoints_of(&svc(FOO), &[]));
    assert_eq!(
        lbs,
        [LoadBalancer {
            name: "net_layer3_Service_testns/foo_TCP_cluster".into(),
            protocol: Some(LoadBalancerProtocol::Tcp),
            vips: map([("192.168.1.1:80", "")]),
            options: services_options(),
            external_ids: external_ids(),
            ..Default::default()
        }]
    );
}

#[test]
fn a_dual_stack_service_has_one_vip_per_family_with_that_familys_endpoints() {
    // "NodePort service, multiple IP addresses, ETP=cluster": the cluster-wide load
    // balancer (the node port's are not written yet).
    let v4 = slice(
        "
metadata: {name: fooipv4, namespace: testns}
addressType: IPv4
ports: [{protocol: TCP, port: 3456}]
endpoints:
- {addresses: [192.168.200.2], conditions: {ready: true}, nodeName: node-a}
- {addresses: [192.168.200.3], conditions: {ready: true}, nodeName: node-a}
",
    );
    let v6 = slice(
        "
metadata: {name: fooipv6, namespace: testns}
addressType: IPv6
ports: [{protocol: TCP, port: 3456}]
endpoints:
- {addresses: ['2001:db8::2'], conditions: {ready: true}, nodeName: node-a}
- {addresses: ['2001:db8::3'], conditions: {ready: true}, nodeName: node-a}
",
    );
    let s = svc(FOO_DUAL);
    let lbs = cluster_lbs(&s, &endpoints_of(&s, &[&v4, &v6]));
    assert_eq!(lbs.len(), 1);
    assert_eq!(
        lbs[0].vips,
        map([
            ("192.168.1.1:80", "192.168.200.2:3456,192.168.200.3:3456"),
            (
                "[fd00::7777:0:0:1]:80",
                "[2001:db8::2]:3456,[2001:db8::3]:3456"
            ),
        ])
    );
    assert_eq!(lbs[0].options, services_options());
    assert_eq!(lbs[0].external_ids, external_ids());
}

#[test]
fn endpoints_count_when_ready_else_when_serving_and_terminating() {
    let s = svc(FOO);
    let endpoints = |yaml: &str| {
        let sl = slice(yaml);
        let lbs = cluster_lbs(&s, &endpoints_of(&s, &[&sl]));
        lbs[0].vips["192.168.1.1:80"].clone()
    };
    // One ready, one not ready, one with unknown readiness (counts as ready); the
    // addresses in the order of their text, as OVN-Kubernetes sorts them.
    assert_eq!(
        endpoints(
            "
addressType: IPv4
ports: [{port: 3456}]
endpoints:
- {addresses: [10.0.0.9], conditions: {ready: true}}
- {addresses: [10.0.0.7], conditions: {ready: false}}
- {addresses: [10.0.0.10]}
"
        ),
        "10.0.0.10:3456,10.0.0.9:3456"
    );
    // None ready: the serving and terminating ones (KEP-1669).
    assert_eq!(
        endpoints(
            "
addressType: IPv4
ports: [{port: 3456}]
endpoints:
- {addresses: [10.0.0.7], conditions: {ready: false, serving: true, terminating: true}}
- {addresses: [10.0.0.8], conditions: {ready: false, serving: false, terminating: true}}
"
        ),
        "10.0.0.7:3456"
    );
    // A slice port of another name or protocol is another service port's.
    assert_eq!(
        endpoints(
            "
addressType: IPv4
ports: [{port: 3456, name: other}, {port: 53, protocol: UDP}]
endpoints:
- {addresses: [10.0.0.7]}
"
        ),
        ""
    );
}

#[test]
fn each_protocol_has_its_own_load_balancer_and_two_target_ports_share_a_vip() {
    let s = svc("
metadata: {name: dns, namespace: testns}
spec:
  clusterIP: 192.168.1.10
  ports: [{name: dns, port: 53, protocol: UDP}, {name: dns-tcp, port: 53, protocol: TCP}]
");
    // A rolling update: the TCP port's endpoints on two target ports.
    let sl = slice(
        "
addressType: IPv4
ports: [{name: dns, protocol: UDP, port: 5353}, {name: dns-tcp, protocol: TCP, port: 5353}]
endpoints: [{addresses: [10.0.0.7]}]
",
    );
    let sl2 = slice(
        "
addressType: IPv4
ports: [{name: dns-tcp, protocol: TCP, port: 6363}]
endpoints: [{addresses: [10.0.0.8]}]
",
    );
    let lbs = cluster_lbs(&s, &endpoints_of(&s, &[&sl, &sl2]));
    let got: Vec<(&str, Option<LoadBalancerProtocol>, &str)> = lbs
        .iter()
        .map(|lb| {
            (
                lb.name.as_str(),
                lb.protocol.clone(),
                lb.vips["192.168.1.10:53"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "net_layer3_Service_testns/dns_TCP_cluster",
                Some(LoadBalancerProtocol::Tcp),
                "10.0.0.7:5353,10.0.0.8:6363"
            ),
            (
                "net_layer3_Service_testns/dns_UDP_cluster",
                Some(LoadBalancerProtocol::Udp),
                "10.0.0.7:5353"
            ),
        ]
    );
}

#[test]
fn client_ip_affinity_sets_the_timeout_or_at_one_day_the_selection_fields() {
    let with = |timeout: &str| {
        let s = svc(&format!(
            "{FOO}  sessionAffinity: ClientIP\n  sessionAffinityConfig: {{clientIP: {{timeoutSeconds: {timeout}}}}}\n"
        ));
        cluster_lbs(&s, &[]).remove(0)
    };
    // OVN-Kubernetes' servicesOptionsWithAffinityTimeout(): the default three hours.
    let lb = with("10800");
    assert_eq!(lb.options["affinity_timeout"], "10800");
    assert!(lb.selection_fields.is_empty());
    let lb = with("86400");
    assert!(!lb.options.contains_key("affinity_timeout"));
    assert_eq!(
        lb.selection_fields,
        [
            LoadBalancerSelectionFields::IpSrc,
            LoadBalancerSelectionFields::IpDst
        ]
        .into_iter()
        .collect::<std::collections::BTreeSet<_>>()
    );
}

#[test]
fn headless_and_internal_local_services_have_no_cluster_load_balancer() {
    let headless = svc("
metadata: {name: h, namespace: testns}
spec: {clusterIP: None, ports: [{port: 80}]}
");
    assert!(cluster_lbs(&headless, &[]).is_empty());
    let local = svc(&format!("{FOO}  internalTrafficPolicy: Local\n"));
    assert!(cluster_lbs(&local, &[]).is_empty());
}

#[test]
fn external_ips_join_the_cluster_vips_unless_external_traffic_is_local() {
    let s = svc(&format!("{FOO}  externalIPs: [172.18.0.100]\n"));
    let lbs = cluster_lbs(&s, &[]);
    assert_eq!(
        lbs[0].vips,
        map([("172.18.0.100:80", ""), ("192.168.1.1:80", "")])
    );
    let s = svc(&format!(
        "{FOO}  externalIPs: [172.18.0.100]\n  externalTrafficPolicy: Local\n  type: LoadBalancer\n"
    ));
    let lbs = cluster_lbs(&s, &[]);
    assert_eq!(lbs[0].vips, map([("192.168.1.1:80", "")]));
}

/// The cluster-wide load balancers of `s` on `NET` from `endpoints`, as [`build`]
/// makes them: the ports whose cluster IPs are per node left out (every endpoint of
/// these tests is a pod of the network, none on a host's network).
fn cluster_lbs(s: &ServiceInfo, endpoints: &[PortEndpoints]) -> Vec<LoadBalancer> {
    let pods: Vec<ipnet::IpNet> = vec!["0.0.0.0/0".parse().unwrap(), "::/0".parse().unwrap()];
    let (_, cluster_wide) = node::configs(s, endpoints, &pods);
    cluster_load_balancers(&config(), NET, s, endpoints, &cluster_wide)
}

/// A world with network `web_net`, node `n1` (host addresses `host_cidrs`) and
/// services `s1`, `s2`, each with one endpoint (`s1`'s is `e1`).
fn world(e1: &str, host_cidrs: &str) -> crate::world::World {
    let yaml = format!(
        "---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: web}}\n\
         ---\napiVersion: k8s.ovn.org/v1\nkind: UserDefinedNetwork\nmetadata: {{name: net, namespace: web}}\n\
         spec: {{topology: Layer3, layer3: {{role: Primary, subnets: [{{cidr: 10.30.0.0/16, hostSubnet: 24}}]}}}}\n\
         ---\napiVersion: v1\nkind: Node\nmetadata: {{name: n1, annotations: {{k8s.ovn.org/node-chassis-id: c1, k8s.ovn.org/host-cidrs: '{host_cidrs}'}}}}\n"
    );
    let mut y = yaml;
    for (name, ip, e) in [("s1", "10.96.0.11", e1), ("s2", "10.96.0.12", "10.30.0.6")] {
        y.push_str(&format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: web}}\n\
             spec: {{clusterIP: {ip}, clusterIPs: [{ip}], ports: [{{port: 80, protocol: TCP, targetPort: 8080}}]}}\n\
             ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
             metadata: {{name: {name}-m, namespace: web, labels: {{endpointslice.kubernetes.io/managed-by: endpointslice-mirror-controller.k8s.ovn.org, k8s.ovn.org/service-name: {name}}}, annotations: {{k8s.ovn.org/endpointslice-network: web_net}}}}\n\
             addressType: IPv4\nports: [{{port: 8080, protocol: TCP}}]\nendpoints: [{{addresses: [{e}], conditions: {{ready: true}}}}]\n"
        ));
    }
    let files = [crate::api::load::parse_file(
        std::path::Path::new("m.yaml"),
        &y,
    )];
    let w = crate::world::World::build(&files, &Default::default(), Default::default());
    assert!(w.problems.is_empty(), "{:?}", w.problems);
    w
}

#[test]
fn a_world_change_looks_again_only_at_the_services_whose_inputs_changed() {
    use crate::keys::Key;
    let changed = |a: &crate::world::World, b: &crate::world::World| -> Vec<String> {
        b.changed_since(a)
            .into_iter()
            .filter(|k| matches!(k, Key::Service(_)))
            .map(|k| k.to_string())
            .collect()
    };
    let before = world("10.30.0.5", "[\"192.168.126.10/24\"]");
    assert!(changed(&before, &before).is_empty());
    // One endpoint of s1 moved: s1 only, and building it again gives other rows.
    let moved = world("10.30.0.7", "[\"192.168.126.10/24\"]");
    assert_eq!(changed(&before, &moved), ["service web/s1"]);
    let s1 = Key::Service("web/s1".into());
    assert_ne!(before.desired(&s1).unwrap(), moved.desired(&s1).unwrap());
    let s2 = Key::Service("web/s2".into());
    assert_eq!(before.desired(&s2).unwrap(), moved.desired(&s2).unwrap());
    // The node's host addresses (where node ports answer) changed: every service of
    // the network looks again.
    let renumbered = world("10.30.0.5", "[\"192.168.126.11/24\"]");
    assert_eq!(
        changed(&before, &renumbered),
        ["service web/s1", "service web/s2"]
    );
    // The network is looked at again when its inputs changed (the node's host
    // addresses), not when an endpoint moved; the cluster's rows always are.
    let net = Key::Network("web_net".into());
    assert!(!moved.changed_since(&before).contains(&net));
    assert!(renumbered.changed_since(&before).contains(&net));
    assert!(moved.changed_since(&before).contains(&Key::Cluster));
}
