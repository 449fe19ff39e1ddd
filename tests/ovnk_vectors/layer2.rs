//! A primary Layer2 network with its transit router (OKEP-5094), on the zone's node:
//! `layer2_user_defined_network_controller_test.go`'s `expectedLayer2EgressEntities`
//! and `expectedGWEntitiesLayer2`, with the switch of `multihoming_test.go`.

use crate::rows::*;
use nb_model::*;
use ovsdb_proto::model::Ref;

/// The transit router (`expectedLayer2EgressEntities`): its port to the switch on the
/// node's chassis (`trtos-`, tunnel key 1), its port to the node's gateway router
/// (`trtor-`, tunnel key 10 + the node's id, `getTransitRouterPortTunnelKey`), the
/// pods' source route and the route to the gateway router's join address through
/// the gateway router's transit address, the 1004 reroute of the node's address to
/// the management port, the management port's masquerade SNAT.
fn transit_router(f: &mut Fixture, n: &Net, copp: &Ref<Copp>) {
    let p = n.p();
    let switch = format!("{p}ovn_layer2_switch");
    let gr = format!("GR_{p}{}", n.node.name);
    let (tr_ip, gr_ip) = n.transit_pair();
    let trtos_name = format!("trtos-{switch}");
    let gc = f.add(GatewayChassis {
        name: format!("{trtos_name}-{}", n.node.chassis),
        chassis_name: n.node.chassis.into(),
        priority: 1,
        ..Default::default()
    });
    let mut trtos = n.port(
        trtos_name.clone(),
        &[format!("{}/16", n.host_ip(1))],
        map([("gateway_mtu", "1400"), ("requested-tnl-key", "1")]),
    );
    trtos.external_ids.clear();
    trtos.gateway_chassis = [gc].into();
    let mut trtor = n.port(
        format!("trtor-{gr}"),
        &[format!("{tr_ip}/31")],
        map([("requested-tnl-key", &(10 + n.node.id).to_string())]),
    );
    trtor.peer = Some(format!("rtotr-{gr}"));
    let ports = [f.add(trtos), f.add(trtor)];
    let routes = [
        f.add(n.route(n.host, &gr_ip, true, None)),
        f.add(n.route(&n.gr_join(), &gr_ip, false, None)),
    ];
    let node_ip = n.node.ip.split('/').next().unwrap();
    let policy = f.add(LogicalRouterPolicy {
        priority: 1004,
        action: LogicalRouterPolicyAction::Reroute,
        match_: format!("inport == \"{trtos_name}\" && ip4.dst == {node_ip} /* {switch} */"),
        nexthops: [n.host_ip(2)].into(),
        external_ids: n.ids(),
        ..Default::default()
    });
    let mut masq = n.snat(n.masquerade(false), n.host.into());
    masq.logical_port = Some(trtos_name);
    masq.match_ = format!("eth.dst == {}", mac(&n.host_ip(2)));
    let masq = f.add(masq);
    let mut ids = n.ids();
    ids.insert("k8s-cluster-router".into(), "yes".into());
    f.add(LogicalRouter {
        name: format!("{p}transit_router"),
        ports: ports.into(),
        static_routes: routes.into(),
        policies: [policy].into(),
        nat: [masq].into(),
        copp: Some(copp.clone()),
        options: map([("requested-tnl-key", &n.keys[1].to_string())]),
        external_ids: ids,
        ..Default::default()
    });
}

/// Every row of Layer2 network `n` on the zone's node.
pub(crate) fn layer2(f: &mut Fixture, n: &Net, copp: &Ref<Copp>) {
    let lbg = lb_groups(f, n);
    node_switch(f, n, &lbg);
    transit_router(f, n, copp);
    gateway(f, n, copp, &lbg);
}
