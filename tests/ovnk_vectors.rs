//! An NB written from OVN-Kubernetes' own test vectors, not from netconnect's rows: the
//! rows ovnkube-controller 1.3 writes for primary Layer3 ClusterUserDefinedNetworks on
//! a node of its zone (shared gateway, one node per zone, EgressIP and multicast off),
//! each family transcribed from the function of OVN-Kubernetes' tests that expects it
//! (`go-controller/pkg/ovn/layer3_user_defined_network_controller_test.go`,
//! `multihoming_test.go`, `master_test.go`, commit 8871cd9) and generalised from their
//! one network and node to any. Where a vector holds a test's stand-in rather than
//! what the controller writes, the controller's function is followed and named.
//!
//! netconnectd taking those networks over (`--adopt ovn-kubernetes`) must find every
//! row where the vectors put it: adopted in place (uuid kept), nothing planned but its
//! owner keys, nothing deleted; a second pass writes nothing.

use std::collections::BTreeMap;

use integration_tests::{sandbox, udn};
use nb_model::*;
use netconnect::status::dir::State;
use netconnect::world::Settings;
use ovsdb_proto::model::{Ref, Table};
use ovsdb_proto::Operation;

/// Rows to insert in one transaction, referring to each other by named uuid.
#[derive(Default)]
struct Fixture {
    ops: Vec<Operation>,
}

impl Fixture {
    /// Adds `row`; a reference to it for the rows added after.
    fn add<T: Table>(&mut self, row: T) -> Ref<T> {
        let name = format!("row{}", self.ops.len());
        self.ops
            .push(Operation::insert_named(T::NAME, row.to_row(), name.clone()));
        Ref::named(name)
    }
}

fn map<const N: usize>(pairs: [(&str, &str); N]) -> BTreeMap<String, String> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// `HashForOVN`: `a` and the decimal FNV-1a 64 of `id`.
fn hash_for_ovn(id: &str) -> String {
    let h = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    format!("a{h}")
}

/// `IPAddrToHWAddr`: `0a:58` and the IPv4 address's four bytes.
fn mac(ip: &str) -> String {
    let ip: std::net::Ipv4Addr = ip.parse().unwrap();
    let o = ip.octets();
    format!("0a:58:{:02x}:{:02x}:{:02x}:{:02x}", o[0], o[1], o[2], o[3])
}

/// The default COPP every gateway and cluster router refers to (`copp.go`
/// `EnsureDefaultCOPP`: one band, drop at 25 packets a second, shared by a fair meter
/// per protocol) and the ACL logging meter (`ovn.go` `createACLLoggingMeter`, rate 20).
fn cluster_rows(f: &mut Fixture) -> Ref<Copp> {
    let band = f.add(MeterBand {
        action: MeterBandAction::Drop,
        rate: 25,
        ..Default::default()
    });
    let mut meters = BTreeMap::new();
    for proto in [
        "arp",
        "arp-resolve",
        "bfd",
        "event-elb",
        "icmp4-error",
        "icmp6-error",
        "reject",
        "tcp-reset",
        "svc-monitor",
    ] {
        let name = format!("{proto}-rate-limiter");
        f.add(Meter {
            name: name.clone(),
            fair: Some(true),
            unit: MeterUnit::Pktps,
            bands: [band.clone()].into(),
            ..Default::default()
        });
        meters.insert(proto.to_owned(), name);
    }
    let logging = f.add(MeterBand {
        action: MeterBandAction::Drop,
        rate: 20,
        ..Default::default()
    });
    f.add(Meter {
        name: "acl-logging".into(),
        fair: Some(true),
        unit: MeterUnit::Pktps,
        bands: [logging].into(),
        ..Default::default()
    });
    f.add(Copp {
        name: "ovnkube-default".into(),
        meters,
        ..Default::default()
    })
}

/// One primary Layer3 network on the zone's node: what OVN-Kubernetes' vectors say of
/// it, generalised.
struct Layer3 {
    /// The network's name, `cluster_udn_<cudn>`.
    net: String,
    /// Its id (masquerade addresses, the transit switch's tunnel key).
    id: u32,
    /// The cluster subnet.
    cluster: &'static str,
    /// The node's host subnet, a /24 (its `.1` the router's, its `.2` the management
    /// port's).
    host: &'static str,
    /// The zone's node: name, id, address, next hop, bridge MAC.
    node: &'static Node,
}

/// The zone's node as its annotations say.
struct Node {
    name: &'static str,
    id: u32,
    chassis: &'static str,
    ip: &'static str,
    next_hop: &'static str,
}

const NODE: Node = Node {
    name: "node-a",
    id: 4,
    chassis: "chassis-1",
    ip: "192.168.126.202/24",
    next_hop: "192.168.126.1",
};

impl Layer3 {
    /// `<network>_`, what OVN-Kubernetes' network-scoped names start with.
    fn p(&self) -> String {
        format!("{}_", self.net)
    }

    /// `standardNonDefaultNetworkExtIDs`.
    fn ids(&self) -> BTreeMap<String, String> {
        map([
            ("k8s.ovn.org/topology", "layer3"),
            ("k8s.ovn.org/network", &self.net),
        ])
    }

    /// `standardNonDefaultNetworkExtIDsForLogicalSwitch` / `GenerateExternalIDsForSwitchOrRouter`.
    fn switch_ids(&self) -> BTreeMap<String, String> {
        let mut ids = self.ids();
        ids.insert("k8s.ovn.org/role".into(), "primary".into());
        ids
    }

    /// `udn.AllocateV4MasqueradeIPs`: the gateway router's (`gateway`) or the
    /// management port's masquerade address, `169.254.0.<10 + 2 id - 1>` and the next
    /// one (the default masquerade subnet 169.254.0.0/17).
    fn masquerade(&self, gateway: bool) -> String {
        format!("169.254.0.{}", 10 + 2 * self.id - u32::from(gateway))
    }

    /// The host subnet's `n`th address.
    fn host_ip(&self, n: u8) -> String {
        let base = self.host.split('/').next().unwrap();
        let (net, _) = base.rsplit_once('.').unwrap();
        format!("{net}.{n}")
    }

    /// The gateway router's join address, `100.65.0.<node id>`.
    fn gr_join(&self) -> String {
        format!("100.65.0.{}", self.node.id)
    }

    /// `expectedStaticMACBindings` route's route and NAT helpers: `expectedGRStaticRoute`.
    fn route(
        &self,
        prefix: &str,
        hop: &str,
        src: bool,
        out: Option<String>,
    ) -> LogicalRouterStaticRoute {
        LogicalRouterStaticRoute {
            ip_prefix: prefix.into(),
            nexthop: hop.into(),
            policy: src.then_some(LogicalRouterStaticRoutePolicy::SrcIp),
            output_port: out,
            external_ids: self.ids(),
            ..Default::default()
        }
    }

    /// `newNATEntry`: an SNAT, stateful. The vector leaves out the source port range
    /// the controller sets on every NAT while a gateway is configured (`router.go`
    /// `buildNAT`: `config.Gateway.EphemeralPortRange`, the node's ephemeral range,
    /// 32768-60999 by default).
    fn snat(&self, external: String, logical: String) -> Nat {
        Nat {
            type_: NatType::Snat,
            external_port_range: "32768-60999".into(),
            external_ip: external,
            logical_ip: logical,
            options: map([("stateless", "false")]),
            external_ids: self.ids(),
            ..Default::default()
        }
    }

    /// `expectedLogicalRouterPort`: networks, the MAC of the first, the network's ids.
    fn port(
        &self,
        name: String,
        networks: &[String],
        options: BTreeMap<String, String>,
    ) -> LogicalRouterPort {
        let first = networks[0].split('/').next().unwrap();
        LogicalRouterPort {
            name,
            mac: mac(first),
            networks: networks.iter().cloned().collect(),
            options,
            external_ids: self.ids(),
            ..Default::default()
        }
    }
}

/// The network's load balancer groups (`newLoadBalancerGroup`): cluster, switch, router.
fn lb_groups(f: &mut Fixture, n: &Layer3) -> [Ref<LoadBalancerGroup>; 3] {
    [
        "clusterLBGroup",
        "clusterSwitchLBGroup",
        "clusterRouterLBGroup",
    ]
    .map(|g| {
        f.add(LoadBalancerGroup {
            name: format!("{}{g}", n.p()),
            ..Default::default()
        })
    })
}

/// The node switch, its router port and management port, the allow-from-node ACL
/// (`multihoming_test.go` `getExpectedDataPodsSwitchesPortGroup` for a primary
/// Layer3 network, `allowAllFromMgmtPort`, `expectedManagementPort`), and the
/// cluster port groups (`newNetworkClusterPortGroup`, `newNetworkRouterPortGroup`).
fn node_switch(f: &mut Fixture, n: &Layer3, lbg: &[Ref<LoadBalancerGroup>; 3]) {
    let (p, node) = (n.p(), n.node.name);
    let switch = format!("{p}{node}");
    let mgmt_ip = n.host_ip(2);
    let mgmt = f.add(LogicalSwitchPort {
        name: format!("k8s-{switch}"),
        addresses: [format!("{} {mgmt_ip}", mac(&mgmt_ip))].into(),
        ..Default::default()
    });
    let stor = f.add(LogicalSwitchPort {
        name: format!("stor-{switch}"),
        type_: "router".into(),
        addresses: ["router".to_owned()].into(),
        options: map([("router-port", &format!("rtos-{switch}"))]),
        ..Default::default()
    });
    let ctrl = format!("{}-network-controller", n.net);
    let acl = f.add(Acl {
        action: AclAction::AllowRelated,
        direction: AclDirection::ToLport,
        match_: format!("ip4.src=={mgmt_ip}"),
        meter: Some("acl-logging".into()),
        priority: 1001,
        tier: 2,
        external_ids: map([
            ("k8s.ovn.org/name", &switch),
            ("ip", &mgmt_ip),
            (
                "k8s.ovn.org/id",
                &format!("{ctrl}:NetpolNode:{switch}:{mgmt_ip}"),
            ),
            ("k8s.ovn.org/owner-controller", &ctrl),
            ("k8s.ovn.org/owner-type", "NetpolNode"),
        ]),
        ..Default::default()
    });
    f.add(LogicalSwitch {
        name: switch,
        ports: [mgmt.clone(), stor].into(),
        acls: [acl].into(),
        external_ids: n.switch_ids(),
        other_config: map([("subnet", n.host)]),
        load_balancer_group: [lbg[0].clone(), lbg[1].clone()].into(),
        ..Default::default()
    });
    for (name, ports) in [
        ("clusterPortGroup", vec![mgmt]),
        ("clusterRtrPortGroup", vec![]),
    ] {
        let id = format!("{ctrl}:Cluster:{name}");
        f.add(PortGroup {
            name: hash_for_ovn(&id),
            ports: ports.into_iter().collect(),
            external_ids: map([
                ("k8s.ovn.org/owner-controller", &ctrl),
                ("k8s.ovn.org/owner-type", "Cluster"),
                ("k8s.ovn.org/name", name),
                ("k8s.ovn.org/id", &id),
            ]),
            ..Default::default()
        });
    }
}

/// The cluster router and what it holds for the zone's node
/// (`expectedLayer3EgressEntities`): `rtos-` on the node's chassis, `rtots-`, `rtoj-`,
/// the pods' source route to the gateway router and the route to its join address,
/// the two 1004 reroutes to the management port, and the management port's
/// masquerade SNAT. The transit switch with the node's port
/// (`getExpectedDataPodsSwitchesPortGroup`), and the join switch
/// (`expectedJoinSwitchAndLSPs`).
fn cluster_router(f: &mut Fixture, n: &Layer3, copp: &Ref<Copp>) {
    let (p, node) = (n.p(), n.node.name);
    let cr = format!("{p}ovn_cluster_router");
    let gc = f.add(GatewayChassis {
        name: format!("rtos-{p}{node}-{}", n.node.chassis),
        chassis_name: n.node.chassis.into(),
        priority: 1,
        ..Default::default()
    });
    let mut rtos = n.port(
        format!("rtos-{p}{node}"),
        &[format!("{}/24", n.host_ip(1))],
        map([("gateway_mtu", "1400")]),
    );
    rtos.external_ids.clear();
    rtos.gateway_chassis = [gc].into();
    let transit = format!("100.88.0.{}/16", n.node.id);
    let mut rtots = n.port(
        format!("{p}rtots-{node}"),
        &[transit],
        map([("mcast_flood", "true")]),
    );
    rtots.external_ids.clear();
    let rtoj = n.port(
        format!("rtoj-{cr}"),
        &["100.65.0.1/16".into()],
        BTreeMap::new(),
    );
    let ports = [f.add(rtos), f.add(rtots.clone()), f.add(rtoj)];
    let routes = [
        f.add(n.route(n.host, &n.gr_join(), true, None)),
        f.add(n.route(&n.gr_join(), &n.gr_join(), false, None)),
    ];
    let node_ip = n.node.ip.split('/').next().unwrap();
    let policies = [node_ip.to_owned(), n.masquerade(true)].map(|dst| {
        f.add(LogicalRouterPolicy {
            priority: 1004,
            action: LogicalRouterPolicyAction::Reroute,
            match_: format!("inport == \"rtos-{p}{node}\" && ip4.dst == {dst} /* {p}{node} */"),
            nexthops: [n.host_ip(2)].into(),
            external_ids: n.ids(),
            ..Default::default()
        })
    });
    let mut masq = n.snat(n.masquerade(false), n.host.into());
    masq.logical_port = Some(format!("rtos-{p}{node}"));
    masq.match_ = format!("eth.dst == {}", mac(&n.host_ip(2)));
    let mut ids = n.ids();
    ids.insert("k8s-cluster-router".into(), "yes".into());
    let masq = f.add(masq);
    f.add(LogicalRouter {
        name: cr.clone(),
        ports: ports.into(),
        static_routes: routes.into(),
        policies: policies.into(),
        nat: [masq].into(),
        copp: Some(copp.clone()),
        options: map([("always_learn_from_arp_request", "false")]),
        external_ids: ids,
        ..Default::default()
    });
    let tstor = f.add(LogicalSwitchPort {
        name: format!("{p}tstor-{node}"),
        type_: "router".into(),
        addresses: ["router".to_owned()].into(),
        options: map([
            ("router-port", &rtots.name),
            ("requested-tnl-key", &n.node.id.to_string()),
        ]),
        external_ids: map([("node", node)]),
        ..Default::default()
    });
    f.add(LogicalSwitch {
        name: format!("{p}transit_switch"),
        ports: [tstor].into(),
        other_config: map([
            ("mcast_querier", "false"),
            ("mcast_flood_unregistered", "true"),
            ("interconn-ts", &format!("{p}transit_switch")),
            ("requested-tnl-key", &(16_711_683 + n.id).to_string()),
            ("mcast_snoop", "true"),
        ]),
        external_ids: n.switch_ids(),
        ..Default::default()
    });
}

/// The gateway router (`expectedGWRouterPlusNATAndStaticRoutes`, `gwRouterOptions`,
/// `gwRouterExternalIDs`), its ports (`expectedGRToJoinSwitchLRP`,
/// `expectedGRToExternalSwitchLRP`), its static MAC bindings
/// (`expectedStaticMACBindings`), the external switch (`expectedExternalSwitchAndLSPs`)
/// and the join switch (`expectedJoinSwitchAndLSPs`). The vectors' one stand-in: they
/// route the cluster subnet to a fake join address (`dummyJoinIPs`); the controller
/// routes it to the cluster router's join address (`gateway.go`
/// `updateGWRouterStaticRoutes` over `GetNetworkScopedClusterRouterJoinIPs`).
fn gateway(f: &mut Fixture, n: &Layer3, copp: &Ref<Copp>, lbg: &[Ref<LoadBalancerGroup>; 3]) {
    let (p, node) = (n.p(), n.node.name);
    let gr = format!("GR_{p}{node}");
    let rtoj = n.port(
        format!("rtoj-{gr}"),
        &[format!("{}/16", n.gr_join())],
        map([("gateway_mtu", "1400")]),
    );
    let rtoe_name = format!("rtoe-{gr}");
    let rtoe = n.port(
        rtoe_name.clone(),
        &[n.node.ip.into(), format!("{}/32", n.masquerade(true))],
        BTreeMap::new(),
    );
    let ports = [f.add(rtoj), f.add(rtoe)];
    let routes = [
        f.add(n.route(n.cluster, "100.65.0.1", false, None)),
        f.add(n.route("0.0.0.0/0", n.node.next_hop, false, Some(rtoe_name.clone()))),
        f.add(n.route(
            "169.254.0.0/17",
            "169.254.0.4",
            false,
            Some(rtoe_name.clone()),
        )),
    ];
    let nat = [
        f.add(n.snat(n.masquerade(true), n.gr_join())),
        f.add(n.snat(n.masquerade(true), n.cluster.into())),
    ];
    for ip in ["169.254.0.4", "169.254.0.2"] {
        f.add(StaticMacBinding {
            ip: ip.into(),
            logical_port: rtoe_name.clone(),
            mac: mac(ip),
            override_dynamic_mac: true,
            ..Default::default()
        });
    }
    let node_ip = n.node.ip.split('/').next().unwrap();
    let physical_ips = format!("{node_ip},{}", n.masquerade(true));
    let mut ids = n.switch_ids();
    ids.extend(map([
        ("physical_ip", node_ip),
        ("physical_ips", &physical_ips),
    ]));
    f.add(LogicalRouter {
        name: gr.clone(),
        ports: ports.into(),
        static_routes: routes.into(),
        nat: nat.into(),
        copp: Some(copp.clone()),
        load_balancer_group: [lbg[0].clone(), lbg[2].clone()].into(),
        options: map([
            ("lb_force_snat_ip", "router_ip"),
            ("mac_binding_age_threshold", "300"),
            ("chassis", n.node.chassis),
            ("always_learn_from_arp_request", "false"),
            ("dynamic_neigh_routers", "false"),
            ("disable_garp_rarp", "true"),
        ]),
        external_ids: ids,
        ..Default::default()
    });
    outside_and_join(f, n, &gr);
}

/// The external switch with its localnet and router ports, and the join switch with
/// the gateway router's and the cluster router's ports (`expectedExternalSwitchAndLSPs`,
/// `expectedJoinSwitchAndLSPs`).
fn outside_and_join(f: &mut Fixture, n: &Layer3, gr: &str) {
    let (p, node) = (n.p(), n.node.name);
    let localnet = f.add(LogicalSwitchPort {
        name: format!("breth0_{p}{node}"),
        type_: "localnet".into(),
        addresses: ["unknown".to_owned()].into(),
        options: map([("network_name", "physnet")]),
        external_ids: n.ids(),
        ..Default::default()
    });
    let node_ip = n.node.ip.split('/').next().unwrap();
    let etor = f.add(LogicalSwitchPort {
        name: format!("etor-{gr}"),
        type_: "router".into(),
        addresses: [mac(node_ip)].into(),
        options: map([("router-port", &format!("rtoe-{gr}"))]),
        external_ids: n.ids(),
        ..Default::default()
    });
    f.add(LogicalSwitch {
        name: format!("ext_{p}{node}"),
        ports: [localnet, etor].into(),
        external_ids: n.switch_ids(),
        ..Default::default()
    });
    let to_gr = f.add(LogicalSwitchPort {
        name: format!("jtor-{gr}"),
        type_: "router".into(),
        addresses: ["router".to_owned()].into(),
        options: map([("router-port", &format!("rtoj-{gr}"))]),
        external_ids: n.ids(),
        ..Default::default()
    });
    let to_cr = f.add(LogicalSwitchPort {
        name: format!("jtor-{p}ovn_cluster_router"),
        type_: "router".into(),
        addresses: ["router".to_owned()].into(),
        options: map([("router-port", &format!("rtoj-{p}ovn_cluster_router"))]),
        ..Default::default()
    });
    f.add(LogicalSwitch {
        name: format!("{p}join"),
        ports: [to_gr, to_cr].into(),
        external_ids: n.ids(),
        ..Default::default()
    });
}

/// Every row of network `n` on the zone's node.
fn layer3(f: &mut Fixture, n: &Layer3, copp: &Ref<Copp>) {
    let lbg = lb_groups(f, n);
    node_switch(f, n, &lbg);
    cluster_router(f, n, copp);
    gateway(f, n, copp, &lbg);
}

/// The networks of the fixture: two primary Layer3 CUDNs on node-a.
const BLUE: Layer3 = Layer3 {
    net: String::new(),
    id: 2,
    cluster: "103.103.0.0/16",
    host: "103.103.4.0/24",
    node: &NODE,
};

fn networks() -> [Layer3; 2] {
    [
        Layer3 {
            net: "cluster_udn_blue".into(),
            ..BLUE
        },
        Layer3 {
            net: "cluster_udn_green".into(),
            id: 3,
            cluster: "104.104.0.0/16",
            host: "104.104.4.0/24",
            ..BLUE
        },
    ]
}

/// The manifests OVN-Kubernetes would have had for [`networks`]: the CUDNs, the
/// NetworkAttachmentDefinitions its cluster manager renders (with the networks' ids),
/// node-a annotated as its cluster manager and node agent annotate it.
fn manifests() -> String {
    let mut s = String::new();
    let mut subnets = Vec::new();
    for n in networks() {
        let cudn = n.net.strip_prefix("cluster_udn_").unwrap();
        s += &format!(
            "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {{name: {cudn}}}\n\
             spec:\n  namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: {cudn}}}}}\n  network: {{topology: Layer3, layer3: {{role: Primary, subnets: [{{cidr: {}, hostSubnet: 24}}]}}}}\n",
            n.cluster
        );
        s += &format!(
            "---\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\n\
             metadata: {{name: {cudn}, namespace: {cudn}, annotations: {{k8s.ovn.org/network-id: '{}'}}}}\n\
             spec:\n  config: '{{\"cniVersion\":\"1.0.0\",\"name\":\"{}\",\"netAttachDefName\":\"{cudn}/{cudn}\",\"topology\":\"layer3\",\"type\":\"ovn-k8s-cni-overlay\"}}'\n",
            n.id, n.net
        );
        s += &format!("---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {cudn}, labels: {{kubernetes.io/metadata.name: {cudn}}}}}\n");
        subnets.push(format!("\"{}\":[\"{}\"]", n.net, n.host));
    }
    let gw = udn::gateway_config(&[NODE.ip], &[NODE.next_hop]);
    let node_subnets = format!("{{{}}}", subnets.join(","));
    let transit = format!("{{\"ipv4\":\"100.88.0.{}/16\"}}", NODE.id);
    s + &udn::node(
        NODE.name,
        NODE.chassis,
        &[
            ("k8s.ovn.org/node-id", &NODE.id.to_string()),
            ("k8s.ovn.org/l3-gateway-config", &gw),
            ("k8s.ovn.org/node-subnets", &node_subnets),
            ("k8s.ovn.org/node-transit-switch-port-ifaddr", &transit),
        ],
    )
}

/// Every row of every table, by table and uuid.
fn all_rows(r: &netconnect::reconcile::Reconciler) -> BTreeMap<(String, String), ovsdb_proto::Row> {
    let snap = r.cache().snapshot();
    let mut out = BTreeMap::new();
    for t in netconnect::reconcile::nb::TABLES {
        for (uuid, row) in snap.table(t).iter() {
            out.insert((t.to_string(), uuid.to_string()), row.to_row());
        }
    }
    out
}

/// `row` without netconnect's owner keys where OVN-Kubernetes stamps none (the rows
/// not of its `DbObjectIDs`), and without the columns OVN's daemons write.
fn stamps_off(row: &ovsdb_proto::Row) -> ovsdb_proto::Row {
    let mut row = row.clone();
    for c in netconnect::reconcile::left::WRITTEN_BY_OVN {
        row.remove(*c);
    }
    if let Some(ovsdb_proto::Datum::Map(ids)) = row.get("external_ids") {
        let of_ovn_k = ids.iter().any(|(k, v)| {
            k.as_str() == Some("k8s.ovn.org/owner-type")
                && matches!(v.as_str(), Some("Cluster" | "NetpolNode"))
        });
        if !of_ovn_k {
            let kept: Vec<_> = ids
                .iter()
                .filter(|(k, _)| {
                    !k.as_str().is_some_and(|k| {
                        ["owner-controller", "owner-type", "name", "id"]
                            .iter()
                            .any(|s| k == format!("k8s.ovn.org/{s}"))
                    })
                })
                .cloned()
                .collect();
            row.insert("external_ids".into(), ovsdb_proto::Datum::map(kept));
        }
    }
    row
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_nb_written_from_ovn_kubernetes_vectors_is_adopted_in_place_column_for_column() {
    use netconnect::reconcile::dry_run::DryRun;
    let sb = sandbox();
    let (r, _events) = udn::reconciler(&sb.nb.unix_remote()).await;
    let mut f = Fixture::default();
    let copp = cluster_rows(&mut f);
    for n in networks() {
        layer3(&mut f, &n, &copp);
    }
    let count = f.ops.len();
    r.cache().transact(&f.ops).await.unwrap();
    r.cache()
        .wait_for(std::time::Duration::from_secs(10), |s| {
            netconnect::reconcile::nb::TABLES
                .iter()
                .map(|t| s.table(t).len())
                .sum::<usize>()
                >= count
        })
        .await;
    let theirs = all_rows(&r);

    // The audit: every row adopted, nothing but the owner keys to change.
    let settings = Settings {
        adopt: true,
        zone: Some(NODE.name.into()),
        ..Default::default()
    };
    let world = udn::world_in(&manifests(), &State::default(), settings);
    assert!(world.problems.is_empty(), "{:#?}", world.problems);
    let snap = r.cache().snapshot();
    let mut dry = DryRun::of(&snap, r.cache().schema().unwrap()).unwrap();
    let mut lines = Vec::new();
    for key in netconnect::controller::all_keys(&world, &r) {
        let plan = dry.plan(&world.desired(&key).unwrap()).unwrap();
        lines.extend(plan.inserted.iter().map(|r| format!("insert {r}")));
        lines.extend(plan.deleted.iter().map(|r| format!("delete {r}")));
        lines.extend(plan.theirs.iter().map(|r| format!("not written {r}")));
        for (row, columns) in &plan.updated {
            if columns != &["external_ids"] {
                lines.push(format!("update {row}: {}", columns.join(", ")));
            }
        }
    }
    assert_eq!(
        lines,
        Vec::<String>::new(),
        "what differs from OVN-Kubernetes' rows"
    );

    // The takeover: every row where it was, a second pass quiet.
    udn::apply(&r, &world).await;
    let after = all_rows(&r);
    for (key, before) in &theirs {
        let now = after
            .get(key)
            .unwrap_or_else(|| panic!("{key:?} deleted or recreated"));
        assert_eq!(
            stamps_off(now),
            stamps_off(before),
            "{key:?} changed beyond its owner keys"
        );
    }
    assert_eq!(after.len(), theirs.len(), "no row inserted");
    for o in udn::apply(&r, &world).await {
        let plan = o.result.as_ref().unwrap();
        assert!(plan.is_empty(), "{}: {}", o.key, plan);
    }
}
