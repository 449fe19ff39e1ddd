//! What joins a network's zone to the other zones (OVN interconnection, docs/ovn-kubernetes.md §2.4
//! and §3): Layer3's transit switch `<p>transit_switch` with the local node's
//! `tstor-`/`rtots-` pair and a `type=remote` port per remote node, and the routes to
//! a remote node's host subnets and gateway router through it; Layer2's remote
//! transit router ports, bound to their node's chassis, and the routes to the remote
//! gateway routers.

use ipnet::IpNet;
use nb_model::keys::{lrp_options, lsp_external_ids, lsp_options};
use nb_model::{LogicalRouter, LogicalSwitch, LogicalSwitchPort};

use super::builder::NetworkBuilder;
use super::rows::{add_route, map, port_addresses, route, router_port, same_family};
use super::NodeView;
use crate::alloc::BASE_TRANSIT_SWITCH_TUNNEL_KEY;
use crate::ovnk::addr::{nth, with_len};
use crate::ovnk::mac;
use nb_model::keys::ovn_k8s::{NETWORK, NODE};

/// Layer3's transit switch, its tunnel key `BASE_TRANSIT_SWITCH_TUNNEL_KEY + id`.
pub(crate) fn transit_switch(b: &NetworkBuilder) -> LogicalSwitch {
    b.interconnect_switch(
        b.names.transit_switch(),
        BASE_TRANSIT_SWITCH_TUNNEL_KEY + b.id,
    )
}

/// The local node's pair on the transit switch: `rtots-` on the cluster router `cr`
/// with the node's transit addresses, `tstor-` on `ts` with the node id as its key.
pub(crate) fn local_pair(
    b: &mut NetworkBuilder,
    node: &NodeView,
    cr: &mut LogicalRouter,
    ts: &mut LogicalSwitch,
) {
    let n = node.name;
    let mut rtots = router_port(&b.names.rtots(n), node.transit);
    rtots
        .options
        .insert(lrp_options::MCAST_FLOOD.into(), "true".into());
    cr.ports.insert(b.d.add(b.names.rtots(n), rtots));
    let mut tstor = LogicalSwitchPort::to_router(b.names.tstor(n), b.names.rtots(n));
    tstor
        .options
        .insert(lsp_options::REQUESTED_TNL_KEY.into(), node.id.to_string());
    tstor
        .external_ids
        .insert(lsp_external_ids::NODE.into(), n.to_owned());
    ts.ports.insert(b.d.add(b.names.tstor(n), tstor));
}

/// What [`remote_node`] takes of the network besides the node and its host subnets:
/// the network's name (in the rows' names and external ids) and the join subnets in
/// use (the routes to the node's gateway router). A remote node's rows are built again
/// only when these change: a cluster subnet appended to the network changes none.
pub(crate) fn remote_node_inputs(b: &NetworkBuilder) -> u64 {
    let net = b.net;
    crate::ovnk::fingerprint(("layer3 remote", net.name(), net.join_subnets_in_use()))
}

/// A remote Layer3 node: its `type=remote` port on the transit switch `ts`, bound to
/// its chassis, and the cluster router's routes to its host subnets `subnets` and its
/// gateway router's join addresses through its transit address. Nothing while the
/// node has no chassis (OVN-Kubernetes waits for the annotation).
pub(crate) fn remote_node(
    b: &mut NetworkBuilder,
    node: &NodeView,
    subnets: &[IpNet],
    cr: &mut LogicalRouter,
    ts: &mut LogicalSwitch,
) {
    let n = node.name;
    let Some(chassis) = node.chassis else {
        return;
    };
    let addresses = port_addresses(
        &mac::from_ip(node.transit[0].addr()),
        node.transit.iter().map(IpNet::to_string),
    );
    let port = LogicalSwitchPort {
        name: b.names.tstor(n),
        type_: "remote".into(),
        addresses: [addresses].into(),
        options: map([
            (lsp_options::REQUESTED_TNL_KEY, node.id.to_string().as_str()),
            (lsp_options::REQUESTED_CHASSIS, chassis),
        ]),
        external_ids: map([(lsp_external_ids::NODE, n)]),
        ..Default::default()
    };
    ts.ports.insert(b.d.add(b.names.tstor(n), port));
    let ids = map([("ic-node", n), (NETWORK, b.net.name().as_str())]);
    let cr_name = b.names.cluster_router();
    let via = |ipv4: bool| same_family(node.transit, ipv4);
    for s in subnets {
        if let Some(via) = via(s.addr().is_ipv4()) {
            add_route(
                b.d,
                &mut cr.static_routes,
                &cr_name,
                route(s, via, ids.clone()),
            );
        }
    }
    for j in b.net.join_subnets_in_use() {
        let ipv4 = j.addr().is_ipv4();
        let (Some(gr_ip), Some(via)) = (nth(&j, node.id as u128), via(ipv4)) else {
            continue;
        };
        let host = with_len(gr_ip, if ipv4 { 32 } else { 128 });
        add_route(
            b.d,
            &mut cr.static_routes,
            &cr_name,
            route(host, via, ids.clone()),
        );
    }
}

/// A remote Layer2 node: its `trtor-` port `trtor` on the transit router `tr`, bound
/// to its chassis, and the routes to its gateway router's join addresses via the
/// gateway router's transit addresses `gr_side`.
pub(crate) fn remote_transit_router_port(
    b: &mut NetworkBuilder,
    node: &NodeView,
    chassis: &str,
    mut trtor: nb_model::LogicalRouterPort,
    gr_side: &[IpNet],
    tr: &mut LogicalRouter,
) {
    let n = node.name;
    trtor
        .options
        .insert(lrp_options::REQUESTED_CHASSIS.into(), chassis.to_owned());
    trtor.external_ids.insert(NODE.into(), n.to_owned());
    tr.ports.insert(b.d.add(b.names.trtor(n), trtor));
    let tr_name = b.names.transit_router();
    for j in b.gateway_join(node.id) {
        if let Some(via) = same_family(gr_side, j.addr().is_ipv4()) {
            let mut ids = b.ids();
            ids.insert(NODE.into(), n.to_owned());
            add_route(
                b.d,
                &mut tr.static_routes,
                &tr_name,
                route(j.addr(), via, ids),
            );
        }
    }
}
