//! The rows of the fixture, family by family, each from the function of
//! OVN-Kubernetes' tests that expects it (see the test file's head).

use std::collections::BTreeMap;

use nb_model::*;
use ovsdb_proto::model::{Ref, Table};
use ovsdb_proto::Operation;

/// Rows to insert in one transaction, referring to each other by named uuid.
#[derive(Default)]
pub(crate) struct Fixture {
    pub(crate) ops: Vec<Operation>,
}

impl Fixture {
    /// Adds `row`; a reference to it for the rows added after.
    pub(crate) fn add<T: Table>(&mut self, row: T) -> Ref<T> {
        let name = format!("row{}", self.ops.len());
        self.ops
            .push(Operation::insert_named(T::NAME, row.to_row(), name.clone()));
        Ref::named(name)
    }
}

pub(crate) fn map<const N: usize>(pairs: [(&str, &str); N]) -> BTreeMap<String, String> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// `HashForOVN`: `a` and the decimal FNV-1a 64 of `id`.
pub(crate) fn hash_for_ovn(id: &str) -> String {
    let h = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    format!("a{h}")
}

/// A switch's port to router port `router_port`: type `router`, address `router`.
pub(crate) fn router_lsp(name: String, router_port: &str) -> LogicalSwitchPort {
    LogicalSwitchPort {
        name,
        type_: "router".into(),
        addresses: ["router".to_owned()].into(),
        options: map([("router-port", router_port)]),
        ..Default::default()
    }
}

/// `IPAddrToHWAddr`: `0a:58` and the IPv4 address's four bytes.
pub(crate) fn mac(ip: &str) -> String {
    let ip: std::net::Ipv4Addr = ip.parse().unwrap();
    let o = ip.octets();
    format!("0a:58:{:02x}:{:02x}:{:02x}:{:02x}", o[0], o[1], o[2], o[3])
}

/// The default COPP every gateway and cluster router refers to (`copp.go`
/// `EnsureDefaultCOPP`: one band, drop at 25 packets a second, shared by a fair meter
/// per protocol) and the ACL logging meter (`ovn.go` `createACLLoggingMeter`, rate 20).
pub(crate) fn cluster_rows(f: &mut Fixture) -> Ref<Copp> {
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

/// One primary network on the zone's node: what OVN-Kubernetes' vectors say of it,
/// generalised.
pub(crate) struct Net {
    /// The network's name, `cluster_udn_<cudn>`.
    pub(crate) net: String,
    /// `layer3` or `layer2`, as `k8s.ovn.org/topology` says.
    pub(crate) topology: &'static str,
    /// A Layer2 network's tunnel keys: its switch's, its transit router's.
    pub(crate) keys: [u32; 2],
    /// Its id (masquerade addresses, the transit switch's tunnel key).
    pub(crate) id: u32,
    /// The cluster subnet.
    pub(crate) cluster: &'static str,
    /// The node's host subnet, a /24 (its `.1` the router's, its `.2` the management
    /// port's); a Layer2 network's whole subnet.
    pub(crate) host: &'static str,
    /// The zone's node: name, id, address, next hop, bridge MAC.
    pub(crate) node: &'static Node,
}

/// The zone's node as its annotations say.
pub(crate) struct Node {
    pub(crate) name: &'static str,
    pub(crate) id: u32,
    pub(crate) chassis: &'static str,
    pub(crate) ip: &'static str,
    pub(crate) next_hop: &'static str,
}

pub(crate) const NODE: Node = Node {
    name: "node-a",
    id: 4,
    chassis: "chassis-1",
    ip: "192.168.126.202/24",
    next_hop: "192.168.126.1",
};

impl Net {
    /// `<network>_`, what OVN-Kubernetes' network-scoped names start with.
    pub(crate) fn p(&self) -> String {
        format!("{}_", self.net)
    }

    /// `standardNonDefaultNetworkExtIDs`.
    pub(crate) fn ids(&self) -> BTreeMap<String, String> {
        map([
            ("k8s.ovn.org/topology", self.topology),
            ("k8s.ovn.org/network", &self.net),
        ])
    }

    /// `standardNonDefaultNetworkExtIDsForLogicalSwitch` / `GenerateExternalIDsForSwitchOrRouter`.
    pub(crate) fn switch_ids(&self) -> BTreeMap<String, String> {
        let mut ids = self.ids();
        ids.insert("k8s.ovn.org/role".into(), "primary".into());
        ids
    }

    /// `udn.AllocateV4MasqueradeIPs`: the gateway router's (`gateway`) or the
    /// management port's masquerade address, `169.254.0.<10 + 2 id - 1>` and the next
    /// one (the default masquerade subnet 169.254.0.0/17).
    pub(crate) fn masquerade(&self, gateway: bool) -> String {
        format!("169.254.0.{}", 10 + 2 * self.id - u32::from(gateway))
    }

    /// The host subnet's `n`th address.
    pub(crate) fn host_ip(&self, n: u8) -> String {
        let base = self.host.split('/').next().unwrap();
        let (net, _) = base.rsplit_once('.').unwrap();
        format!("{net}.{n}")
    }

    /// The gateway router's join address, `100.65.0.<node id>`.
    pub(crate) fn gr_join(&self) -> String {
        format!("100.65.0.{}", self.node.id)
    }

    /// A Layer2 network's transit router address pair for the node
    /// (`getTransitRouterInfo`: the `/31` at twice the node's id in the transit subnet,
    /// 100.88.0.0/16): the transit router's, the gateway router's.
    pub(crate) fn transit_pair(&self) -> (String, String) {
        let k = 2 * self.node.id;
        (format!("100.88.0.{k}"), format!("100.88.0.{}", k + 1))
    }

    /// `expectedGRStaticRoute`: a route with the network's ids.
    pub(crate) fn route(
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
    pub(crate) fn snat(&self, external: String, logical: String) -> Nat {
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
    pub(crate) fn port(
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
pub(crate) fn lb_groups(f: &mut Fixture, n: &Net) -> [Ref<LoadBalancerGroup>; 3] {
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
/// On a Layer2 network, the network's one switch: its port to the transit router
/// (`stotr-`, the network's ids), the multicast and interconnect settings of
/// `getExpectedDataPodsSwitchesPortGroup`'s Layer2 case.
pub(crate) fn node_switch(f: &mut Fixture, n: &Net, lbg: &[Ref<LoadBalancerGroup>; 3]) {
    let (p, node) = (n.p(), n.node.name);
    let layer2 = n.topology == "layer2";
    let switch = match layer2 {
        true => format!("{p}ovn_layer2_switch"),
        false => format!("{p}{node}"),
    };
    let mgmt_ip = n.host_ip(2);
    let mgmt = f.add(LogicalSwitchPort {
        name: format!("k8s-{p}{node}"),
        addresses: [format!("{} {mgmt_ip}", mac(&mgmt_ip))].into(),
        ..Default::default()
    });
    let (to_router, router_port) = match layer2 {
        true => (format!("stotr-{switch}"), format!("trtos-{switch}")),
        false => (format!("stor-{switch}"), format!("rtos-{switch}")),
    };
    let mut stor = router_lsp(to_router, &router_port);
    if layer2 {
        stor.external_ids = n.ids();
    }
    let stor = f.add(stor);
    let mut other_config = map([("subnet", n.host)]);
    if layer2 {
        other_config.extend(map([
            ("mcast_snoop", "true"),
            ("mcast_flood_unregistered", "true"),
            ("mcast_querier", "false"),
            ("requested-tnl-key", &n.keys[0].to_string()),
            ("interconn-ts", &switch),
        ]));
    }
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
        other_config,
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
pub(crate) fn cluster_router(f: &mut Fixture, n: &Net, copp: &Ref<Copp>) {
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
    let mut tstor = router_lsp(format!("{p}tstor-{node}"), &rtots.name);
    let key = n.node.id.to_string();
    tstor.options.insert("requested-tnl-key".into(), key);
    tstor.external_ids = map([("node", node)]);
    let tstor = f.add(tstor);
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
pub(crate) fn gateway(
    f: &mut Fixture,
    n: &Net,
    copp: &Ref<Copp>,
    lbg: &[Ref<LoadBalancerGroup>; 3],
) {
    let (p, node) = (n.p(), n.node.name);
    let gr = format!("GR_{p}{node}");
    let layer2 = n.topology == "layer2";
    let (tr_ip, gr_ip) = n.transit_pair();
    // Toward the cluster: the join switch (Layer3), the transit router (Layer2,
    // `expectedGRToTransitRouterLRPLayer2`: the join address and the pair's second).
    let mut rtoj = match layer2 {
        false => n.port(
            format!("rtoj-{gr}"),
            &[format!("{}/16", n.gr_join())],
            map([("gateway_mtu", "1400")]),
        ),
        true => n.port(
            format!("rtotr-{gr}"),
            &[format!("{}/16", n.gr_join()), format!("{gr_ip}/31")],
            map([("gateway_mtu", "1400")]),
        ),
    };
    if layer2 {
        rtoj.peer = Some(format!("trtor-{gr}"));
    }
    let (cluster_hop, cluster_port) = match layer2 {
        false => ("100.65.0.1".to_owned(), None),
        true => (tr_ip, Some(format!("rtotr-{gr}"))),
    };
    let rtoe_name = format!("rtoe-{gr}");
    let rtoe = n.port(
        rtoe_name.clone(),
        &[n.node.ip.into(), format!("{}/32", n.masquerade(true))],
        BTreeMap::new(),
    );
    let ports = [f.add(rtoj), f.add(rtoe)];
    let routes = [
        f.add(n.route(n.cluster, &cluster_hop, false, cluster_port)),
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
    let gr_join = n.gr_join();
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
            (
                "lb_force_snat_ip",
                if layer2 { &gr_join } else { "router_ip" },
            ),
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

/// The external switch with its localnet and router ports, and (Layer3) the join
/// switch with the gateway router's and the cluster router's ports
/// (`expectedExternalSwitchAndLSPs`, `expectedJoinSwitchAndLSPs`).
pub(crate) fn outside_and_join(f: &mut Fixture, n: &Net, gr: &str) {
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
        addresses: [mac(node_ip)].into(),
        external_ids: n.ids(),
        ..router_lsp(format!("etor-{gr}"), &format!("rtoe-{gr}"))
    });
    f.add(LogicalSwitch {
        name: format!("ext_{p}{node}"),
        ports: [localnet, etor].into(),
        external_ids: n.switch_ids(),
        ..Default::default()
    });
    if n.topology == "layer2" {
        return;
    }
    let to_gr = f.add(LogicalSwitchPort {
        external_ids: n.ids(),
        ..router_lsp(format!("jtor-{gr}"), &format!("rtoj-{gr}"))
    });
    let cr = format!("{p}ovn_cluster_router");
    let to_cr = f.add(router_lsp(format!("jtor-{cr}"), &format!("rtoj-{cr}")));
    f.add(LogicalSwitch {
        name: format!("{p}join"),
        ports: [to_gr, to_cr].into(),
        external_ids: n.ids(),
        ..Default::default()
    });
}

/// Every row of Layer3 network `n` on the zone's node.
pub(crate) fn layer3(f: &mut Fixture, n: &Net, copp: &Ref<Copp>) {
    let lbg = lb_groups(f, n);
    node_switch(f, n, &lbg);
    cluster_router(f, n, copp);
    gateway(f, n, copp, &lbg);
}
