//! What building one network's rows needs at hand: the inputs, the network, its names
//! and load balancer groups, and the [`Desired`] the rows go into. The topologies
//! ([`super::layer3`], [`super::layer2`]) and the pieces they share
//! ([`super::gateway`], [`super::interconnect`]) are methods and functions over it.

use std::collections::BTreeMap;

use ipnet::IpNet;
use nb_model::{Copp, LogicalRouter, LogicalSwitch};
use ovsdb_proto::model::Ref;

use super::desired::Desired;
use super::rows::{lb_groups, map, route, LbGroups};
use super::{GatewayMode, Inputs, TopologyConfig};
use crate::api::Network;
use crate::ovnk::addr::nth_in;
use crate::ovnk::names::Names;
use nb_model::keys::ls_other_config;
use nb_model::keys::ovn_k8s::{NETWORK, ROLE, TOPOLOGY};

/// One network's rows being built.
pub(crate) struct NetworkBuilder<'a> {
    /// The cluster-wide settings.
    pub cfg: &'a TopologyConfig,
    /// The network.
    pub net: &'a Network,
    /// Its network id.
    pub id: u32,
    /// Its objects' names.
    pub names: Names,
    /// `layer3` or `layer2`, as written in `k8s.ovn.org/topology`.
    pub topology: &'static str,
    /// Its load balancer groups.
    pub(crate) lb_groups: LbGroups,
    /// Where the rows go.
    pub d: &'a mut Desired,
    /// The management ports built so far, for the cluster port group.
    pub(crate) management_ports: Vec<Ref<nb_model::LogicalSwitchPort>>,
}

impl<'a> NetworkBuilder<'a> {
    /// Starts network `net` (id `id`): adds its load balancer groups to `d`.
    pub fn new(
        inputs: &'a Inputs<'a>,
        net: &'a Network,
        id: u32,
        topology: &'static str,
        d: &'a mut Desired,
    ) -> Self {
        let names = Names::new(&net.name());
        let lb_groups = lb_groups(d, &names);
        NetworkBuilder {
            cfg: inputs.config,
            net,
            id,
            names,
            topology,
            lb_groups,
            d,
            management_ports: Vec::new(),
        }
    }

    /// `{network, topology}`, the external ids of most of a network's rows.
    pub fn ids(&self) -> BTreeMap<String, String> {
        map([
            (NETWORK, self.net.name().as_str()),
            (TOPOLOGY, self.topology),
        ])
    }

    /// `{network, role, topology}`, on switches and routers.
    pub(crate) fn switch_ids(&self) -> BTreeMap<String, String> {
        map([
            (NETWORK, self.net.name().as_str()),
            (ROLE, "primary"),
            (TOPOLOGY, self.topology),
        ])
    }

    /// A reference to the default COPP.
    pub(crate) fn copp(&mut self) -> Ref<Copp> {
        self.d.refer::<Copp>(crate::ovnk::ownership::DEFAULT_COPP)
    }

    /// The network's router (Layer3's cluster router, Layer2's transit router): the
    /// default COPP, `k8s-cluster-router`, and `ct-commit-all` in local gateway mode.
    pub(crate) fn network_router(
        &mut self,
        name: String,
        options: BTreeMap<String, String>,
    ) -> LogicalRouter {
        let mut router = LogicalRouter {
            name,
            copp: Some(self.copp()),
            external_ids: self.ids(),
            options,
            ..Default::default()
        };
        router
            .external_ids
            .insert("k8s-cluster-router".into(), "yes".into());
        if self.cfg.gateway_mode == GatewayMode::Local {
            router.options.insert("ct-commit-all".into(), "true".into());
        }
        router
    }

    /// A switch stretched over zones (Layer3's transit switch, Layer2's switch): its
    /// interconnect name, tunnel key and multicast settings in `other_config`.
    pub(crate) fn interconnect_switch(&self, name: String, tunnel_key: u32) -> LogicalSwitch {
        let mut switch = LogicalSwitch {
            other_config: map([
                (ls_other_config::INTERCONN_TS, name.as_str()),
                (ls_other_config::REQUESTED_TNL_KEY, &tunnel_key.to_string()),
                (ls_other_config::MCAST_SNOOP, "true"),
                (ls_other_config::MCAST_QUERIER, "false"),
                (ls_other_config::MCAST_FLOOD_UNREGISTERED, "true"),
            ]),
            external_ids: self.switch_ids(),
            ..Default::default()
        };
        switch.name = name;
        switch
    }

    /// A destination route to `prefix` via `nexthop`, with the network's ids.
    pub fn route(
        &self,
        prefix: impl ToString,
        nexthop: impl ToString,
    ) -> nb_model::LogicalRouterStaticRoute {
        route(prefix, nexthop, self.ids())
    }

    /// A source route: what comes from `prefix` goes via `nexthop`, with the network's
    /// ids.
    pub(crate) fn source_route(
        &self,
        prefix: impl ToString,
        nexthop: impl ToString,
    ) -> nb_model::LogicalRouterStaticRoute {
        let mut r = self.route(prefix, nexthop);
        r.policy = Some(nb_model::LogicalRouterStaticRoutePolicy::SrcIp);
        r
    }

    /// The gateway router's join addresses of node `node_id`: its id-th address in
    /// each join subnet in use.
    pub(crate) fn gateway_join(&self, node_id: u32) -> Vec<IpNet> {
        self.net
            .join_subnets_in_use()
            .iter()
            .filter_map(|j| nth_in(j, node_id as u128))
            .collect()
    }
}
