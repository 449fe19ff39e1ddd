//! The networking-plugin seed's virtual networks: `CreateVL`, `DeleteVL`, `QueryVL`
//! and `UpdateVL` on an OVN cluster whose distributed router (and, for north-south,
//! gateway router) already exist.
//!
//! A virtual network `NAME` with subnet `S` and gateway `G` (e.g. `172.16.24.1/24`) is:
//! the logical switch `NAME` with `other_config:subnet=S` and
//! `external_ids:gateway_ip=G`; the router port `rtos-NAME` on the distributed router
//! with address `G` and a MAC derived from it; the switch's `stor-NAME` port of type
//! `router` facing it; and, with a gateway router, the route `S` via the join
//! network's next hop and the SNAT of `S` to the external address. Each call is one
//! transaction over the cache's connection; a create of an existing name fails in that
//! transaction (an OVSDB `wait`), so two creators cannot both succeed. Rows carry
//! owner keys (`k8s.ovn.org/owner-controller=networking-plugin`,
//! `owner-type=VirtualNetwork`, `name=NAME`): only they are changed or deleted.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;
use nb_model::{
    LogicalRouter, LogicalRouterPort, LogicalRouterStaticRoute, LogicalSwitch, LogicalSwitchPort,
    Nat, NatType, OvnNorthbound,
};
use ovsdb_proto::cache::{Cache, Snapshot};
use ovsdb_proto::model::{Ref, Table};
use ovsdb_proto::{Atom, Condition, Datum, Operation, WaitUntil};

use crate::ovnk::mac;
use crate::ovnk::ownership::{virtual_network_owner, OWNER_CONTROLLER, OWNER_NAME, OWNER_TYPE};
use crate::topology::Desired;

/// The owner controller of virtual network rows.
pub(crate) const CONTROLLER: &str = crate::ovnk::ownership::VL_CONTROLLER;
/// Their owner type.
pub(crate) const KIND: &str = "VirtualNetwork";

/// Where virtual networks attach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plugin {
    /// The distributed router every virtual network's switch connects to.
    pub router: String,
    /// The gateway router for north-south traffic, if any.
    pub gateway_router: Option<String>,
    /// The next hop, on the join network, of the gateway router's route back to the
    /// switch (the seed's `100.64.1.1`).
    pub join_next_hop: Option<IpAddr>,
    /// The external address the switch's traffic is SNATed to.
    pub external_ip: Option<IpAddr>,
    /// How long to wait for the cache to show a transaction.
    pub wait: Duration,
}

/// A virtual network as it is in the NB.
#[derive(Clone, Debug, PartialEq)]
pub struct VirtualNetwork {
    /// Its name.
    pub name: String,
    /// Its subnet.
    pub subnet: IpNet,
    /// Its gateway address with the subnet's prefix length.
    pub gateway: IpNet,
    /// The switch.
    pub switch: LogicalSwitch,
    /// The distributed router's port.
    pub router_port: LogicalRouterPort,
    /// The switch's port facing the router.
    pub(crate) switch_port: LogicalSwitchPort,
    /// The gateway router's route to the subnet.
    pub route: Option<LogicalRouterStaticRoute>,
    /// The gateway router's SNAT of the subnet.
    pub snat: Option<Nat>,
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum VlError {
    /// The name is taken.
    #[error("virtual network {0} already exists")]
    Exists(String),
    /// No such network.
    #[error("virtual network {0} does not exist")]
    NotFound(String),
    /// A router the plugin attaches to is missing.
    #[error("logical router {0} does not exist")]
    NoRouter(String),
    /// Bad subnet or gateway.
    #[error("{0}")]
    Invalid(String),
    /// The NB refused or could not be reached.
    #[error(transparent)]
    Nb(#[from] ovsdb_proto::Error),
}

fn owner_ids(name: &str) -> BTreeMap<String, String> {
    [
        (OWNER_CONTROLLER, CONTROLLER),
        (OWNER_TYPE, KIND),
        (OWNER_NAME, name),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

fn owned_by(ids: &BTreeMap<String, String>, name: &str) -> bool {
    ids.get(OWNER_CONTROLLER).map(String::as_str) == Some(CONTROLLER)
        && ids.get(OWNER_TYPE).map(String::as_str) == Some(KIND)
        && ids.get(OWNER_NAME).map(String::as_str) == Some(name)
}

/// Checks a subnet and a gateway inside it; returns them normalized.
pub fn check(subnet: &str, gateway: &str) -> Result<(IpNet, IpNet), VlError> {
    crate::ovnk::addr::subnet_and_gateway(subnet, gateway).map_err(VlError::Invalid)
}

fn rows(plugin: &Plugin, name: &str, subnet: IpNet, gateway: IpNet) -> VirtualNetwork {
    let mac = mac::from_ip(gateway.addr());
    let mut switch = LogicalSwitch::named(name);
    switch
        .other_config
        .insert("subnet".into(), subnet.to_string());
    switch.external_ids = owner_ids(name);
    switch
        .external_ids
        .insert("gateway_ip".into(), gateway.to_string());
    let mut router_port = LogicalRouterPort {
        name: format!("rtos-{name}"),
        mac: mac.clone(),
        networks: [gateway.to_string()].into(),
        ..Default::default()
    };
    router_port.external_ids = owner_ids(name);
    let mut switch_port =
        LogicalSwitchPort::to_router(format!("stor-{name}"), format!("rtos-{name}"));
    switch_port.addresses = [mac].into();
    switch_port.external_ids = owner_ids(name);
    let north_south = plugin.gateway_router.is_some();
    let route = (north_south)
        .then_some(plugin.join_next_hop)
        .flatten()
        .map(|hop| LogicalRouterStaticRoute {
            ip_prefix: subnet.to_string(),
            nexthop: hop.to_string(),
            external_ids: owner_ids(name),
            ..Default::default()
        });
    let snat = (north_south)
        .then_some(plugin.external_ip)
        .flatten()
        .map(|ip| Nat {
            type_: NatType::Snat,
            external_ip: ip.to_string(),
            logical_ip: subnet.to_string(),
            external_ids: owner_ids(name),
            ..Default::default()
        });
    VirtualNetwork {
        name: name.to_owned(),
        subnet,
        gateway,
        switch,
        router_port,
        switch_port,
        route,
        snat,
    }
}

/// Row `actual` with what this plugin writes changed from `before` (what it wrote) to
/// `want`: the columns either sets (to other than the column's default) and, in map
/// columns, only the keys either has. Everything else is someone else's and is kept.
fn ours<T: Table + Default>(actual: &T, before: &T, want: &T) -> Result<T, VlError> {
    let blank = T::default().to_row();
    let before = before.to_row();
    let mut row = actual.to_row();
    for (column, value) in want.to_row() {
        let default = blank.get(&column);
        if default == Some(&value) && default == before.get(&column) {
            continue; // neither sets it
        }
        let merged = match (row.get(&column), before.get(&column), &value) {
            (Some(Datum::Map(now)), Some(Datum::Map(had)), Datum::Map(wanted)) => {
                let mine = |k: &Atom| had.iter().chain(wanted.iter()).any(|(m, _)| m == k);
                Datum::map(
                    now.iter()
                        .filter(|(k, _)| !mine(k))
                        .chain(wanted.iter())
                        .cloned(),
                )
            }
            _ => value,
        };
        row.insert(column, merged);
    }
    T::from_row(actual.uuid(), &row).map_err(|e| VlError::Invalid(e.to_string()))
}

fn router(snap: &Snapshot, name: &str) -> Result<LogicalRouter, VlError> {
    snap.table(LogicalRouter::NAME)
        .iter()
        .find(|(_, r)| {
            r.get("name")
                .and_then(|d| d.as_scalar())
                .and_then(|a| a.as_str())
                == Some(name)
        })
        .and_then(|(u, r)| LogicalRouter::from_row(*u, &**r).ok())
        .ok_or_else(|| VlError::NoRouter(name.to_owned()))
}

/// `CreateVL`: makes virtual network `name`; fails if the name is taken.
pub async fn create(
    cache: &Cache,
    plugin: &Plugin,
    name: &str,
    subnet: &str,
    gateway: &str,
) -> Result<VirtualNetwork, VlError> {
    let (subnet, gateway) = check(subnet, gateway)?;
    let snap = cache.snapshot();
    if query(&snap, plugin, name)?.is_some()
        || snap.table(LogicalSwitch::NAME).values().any(|r| {
            r.get("name")
                .and_then(|d| d.as_scalar())
                .and_then(|a| a.as_str())
                == Some(name)
        })
    {
        return Err(VlError::Exists(name.to_owned()));
    }
    let dr = router(&snap, &plugin.router)?;
    let gr = match &plugin.gateway_router {
        Some(g) => Some(router(&snap, g)?),
        None => None,
    };
    let vn = rows(plugin, name, subnet, gateway);
    let db = cache.db::<OvnNorthbound>()?;
    let mut txn = db.transaction();
    // Fails the whole transaction if a switch of that name appeared meanwhile.
    txn.raw(Operation::Wait {
        table: LogicalSwitch::NAME.into(),
        timeout: Some(0),
        conditions: vec![Condition::eq("name", name)],
        columns: vec!["name".into()],
        until: WaitUntil::Equal,
        rows: vec![],
    });
    let lsp = txn.insert(&vn.switch_port);
    let mut switch = vn.switch.clone();
    switch.ports.insert(lsp);
    txn.insert(&switch);
    let lrp = txn.insert(&vn.router_port);
    txn.mutate(
        [LogicalRouter::COLUMNS.uuid.eq(dr.uuid)],
        [LogicalRouter::COLUMNS.ports.insert([lrp])],
    );
    if let Some(gr) = &gr {
        let mut muts = Vec::new();
        if let Some(route) = &vn.route {
            let r: Ref<LogicalRouterStaticRoute> = txn.insert(route);
            muts.push(LogicalRouter::COLUMNS.static_routes.insert([r]));
        }
        if let Some(snat) = &vn.snat {
            let n: Ref<Nat> = txn.insert(snat);
            muts.push(LogicalRouter::COLUMNS.nat.insert([n]));
        }
        if !muts.is_empty() {
            txn.mutate([LogicalRouter::COLUMNS.uuid.eq(gr.uuid)], muts);
        }
    }
    match cache.commit_and_wait(txn, plugin.wait).await {
        Ok(_) => {}
        Err(e)
            if e.as_transaction_error()
                .is_some_and(|t| t.error.error == "timed out") =>
        {
            return Err(VlError::Exists(name.to_owned()))
        }
        Err(e) => return Err(e.into()),
    }
    query(&cache.snapshot(), plugin, name)?.ok_or_else(|| VlError::NotFound(name.to_owned()))
}

/// `QueryVL`: virtual network `name` as the snapshot has it.
pub fn query(
    snap: &Snapshot,
    plugin: &Plugin,
    name: &str,
) -> Result<Option<VirtualNetwork>, VlError> {
    let owned = |ids: &BTreeMap<String, String>| owned_by(ids, name);
    let Some(switch) = snap
        .table(LogicalSwitch::NAME)
        .iter()
        .filter_map(|(u, r)| LogicalSwitch::from_row(*u, &**r).ok())
        .find(|s| s.name == name && owned(&s.external_ids))
    else {
        return Ok(None);
    };
    let decode = |e: ovsdb_proto::model::DecodeError| VlError::Invalid(e.to_string());
    let find_lrp = snap
        .table(LogicalRouterPort::NAME)
        .iter()
        .map(|(u, r)| LogicalRouterPort::from_row(*u, &**r))
        .collect::<Result<Vec<_>, _>>()
        .map_err(decode)?
        .into_iter()
        .find(|p| p.name == format!("rtos-{name}") && owned(&p.external_ids));
    let find_lsp = switch
        .ports
        .iter()
        .filter_map(|r| r.uuid())
        .filter_map(|u| snap.get(LogicalSwitchPort::NAME, &u).map(|r| (u, r)))
        .filter_map(|(u, r)| LogicalSwitchPort::from_row(u, &*r).ok())
        .find(|p| p.name == format!("stor-{name}"));
    let (Some(router_port), Some(switch_port)) = (find_lrp, find_lsp) else {
        return Err(VlError::Invalid(format!(
            "virtual network {name} is incomplete in the NB (router or switch port missing)"
        )));
    };
    let subnet: IpNet = switch
        .other_config
        .get("subnet")
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| VlError::Invalid(format!("switch {name} has no other_config:subnet")))?;
    let gateway: IpNet = switch
        .external_ids
        .get("gateway_ip")
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| VlError::Invalid(format!("switch {name} has no external_ids:gateway_ip")))?;
    let mut route = None;
    let mut snat = None;
    if let Some(g) = &plugin.gateway_router {
        if let Ok(gr) = router(snap, g) {
            route = gr
                .static_routes
                .iter()
                .filter_map(|r| r.uuid())
                .filter_map(|u| snap.get(LogicalRouterStaticRoute::NAME, &u).map(|r| (u, r)))
                .filter_map(|(u, r)| LogicalRouterStaticRoute::from_row(u, &*r).ok())
                .find(|r| owned(&r.external_ids));
            snat = gr
                .nat
                .iter()
                .filter_map(|r| r.uuid())
                .filter_map(|u| snap.get(Nat::NAME, &u).map(|r| (u, r)))
                .filter_map(|(u, r)| Nat::from_row(u, &*r).ok())
                .find(|n| owned(&n.external_ids));
        }
    }
    Ok(Some(VirtualNetwork {
        name: name.to_owned(),
        subnet,
        gateway,
        switch,
        router_port,
        switch_port,
        route,
        snat,
    }))
}

/// Every virtual network of the snapshot, by name.
pub fn list(snap: &Snapshot, plugin: &Plugin) -> Result<Vec<VirtualNetwork>, VlError> {
    let mut names: Vec<String> = snap
        .table(LogicalSwitch::NAME)
        .iter()
        .filter_map(|(u, r)| LogicalSwitch::from_row(*u, &**r).ok())
        .filter(|s| {
            s.external_ids.get(OWNER_CONTROLLER).map(String::as_str) == Some(CONTROLLER)
                && s.external_ids.get(OWNER_TYPE).map(String::as_str) == Some(KIND)
        })
        .map(|s| s.name)
        .collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|n| query(snap, plugin, &n).transpose())
        .collect()
}

/// `UpdateVL`: gives virtual network `name` a new subnet and gateway, in one
/// transaction (its switch, router port, route and SNAT change together).
pub async fn update(
    cache: &Cache,
    plugin: &Plugin,
    name: &str,
    subnet: &str,
    gateway: &str,
) -> Result<VirtualNetwork, VlError> {
    let (subnet, gateway) = check(subnet, gateway)?;
    let snap = cache.snapshot();
    let old = query(&snap, plugin, name)?.ok_or_else(|| VlError::NotFound(name.to_owned()))?;
    // What this plugin wrote for the old subnet and writes for the new one: only those
    // columns and map keys change; the rest of each row (the `up` ovn-northd sets on
    // the switch port, keys another controller added) stays as it is.
    let before = rows(plugin, name, old.subnet, old.gateway);
    let want = rows(plugin, name, subnet, gateway);
    let db = cache.db::<OvnNorthbound>()?;
    let mut txn = db.transaction();
    txn.update(
        &old.switch,
        &ours(&old.switch, &before.switch, &want.switch)?,
    );
    txn.update(
        &old.router_port,
        &ours(&old.router_port, &before.router_port, &want.router_port)?,
    );
    txn.update(
        &old.switch_port,
        &ours(&old.switch_port, &before.switch_port, &want.switch_port)?,
    );
    if let (Some(o), Some(b), Some(w)) = (&old.route, &before.route, &want.route) {
        txn.update(o, &ours(o, b, w)?);
    }
    if let (Some(o), Some(b), Some(w)) = (&old.snat, &before.snat, &want.snat) {
        txn.update(o, &ours(o, b, w)?);
    }
    cache.commit_and_wait(txn, plugin.wait).await?;
    query(&cache.snapshot(), plugin, name)?.ok_or_else(|| VlError::NotFound(name.to_owned()))
}

/// `DeleteVL`: removes virtual network `name` (its switch, its router port, and its
/// gateway route and SNAT), in one transaction.
pub async fn delete(cache: &Cache, plugin: &Plugin, name: &str) -> Result<(), VlError> {
    let snap = cache.snapshot();
    let old = query(&snap, plugin, name)?.ok_or_else(|| VlError::NotFound(name.to_owned()))?;
    let dr = router(&snap, &plugin.router)?;
    let db = cache.db::<OvnNorthbound>()?;
    let mut txn = db.transaction();
    txn.delete([LogicalSwitch::COLUMNS.uuid.eq(old.switch.uuid)]);
    txn.mutate(
        [LogicalRouter::COLUMNS.uuid.eq(dr.uuid)],
        [LogicalRouter::COLUMNS
            .ports
            .delete([Ref::new(old.router_port.uuid)])],
    );
    if let Some(g) = &plugin.gateway_router {
        let gr = router(&snap, g)?;
        let mut muts = Vec::new();
        if let Some(r) = &old.route {
            muts.push(
                LogicalRouter::COLUMNS
                    .static_routes
                    .delete([Ref::new(r.uuid)]),
            );
        }
        if let Some(n) = &old.snat {
            muts.push(LogicalRouter::COLUMNS.nat.delete([Ref::new(n.uuid)]));
        }
        if !muts.is_empty() {
            txn.mutate([LogicalRouter::COLUMNS.uuid.eq(gr.uuid)], muts);
        }
    }
    cache.commit_and_wait(txn, plugin.wait).await?;
    Ok(())
}

/// The router port and switch port names of one subnet of virtual network `name`:
/// `rtos-<name>-<subnet address>` and `stor-<name>-<subnet address>`, so that a subnet
/// keeps its ports whatever else is declared.
pub fn subnet_port_names(name: &str, subnet: &IpNet) -> (String, String) {
    let at = subnet.network();
    (format!("rtos-{name}-{at}"), format!("stor-{name}-{at}"))
}

/// The rows of virtual network `name` with `subnets` (each with its gateway), declared
/// by an `onapNetwork`, on distributed router `router` (the site's: referred to, never
/// written but for its ports): the switch (`other_config:subnet` its first IPv4
/// subnet, `external_ids:gateway_ip` its first gateway, as [`create`] writes them) and,
/// per subnet, a router port with the gateway address and a MAC derived from it and
/// the switch's port of type `router` facing it.
pub(crate) fn declared(name: &str, subnets: &[(IpNet, IpNet)], router: &str) -> Desired {
    let mut d = Desired::new(virtual_network_owner(name));
    let mut switch = LogicalSwitch::named(name);
    if let Some((s, _)) = subnets.iter().find(|(s, _)| s.addr().is_ipv4()) {
        switch.other_config.insert("subnet".into(), s.to_string());
    }
    if let Some((_, g)) = subnets.first() {
        switch
            .external_ids
            .insert("gateway_ip".into(), g.to_string());
    }
    for (subnet, gateway) in subnets {
        let (rtos, stor) = subnet_port_names(name, subnet);
        let mac = mac::from_ip(gateway.addr());
        let lrp = LogicalRouterPort {
            name: rtos.clone(),
            mac: mac.clone(),
            networks: [gateway.to_string()].into(),
            ..Default::default()
        };
        let lrp = d.add(rtos.clone(), lrp);
        d.attach::<LogicalRouter, _>(router, "ports", &lrp);
        let mut lsp = LogicalSwitchPort::to_router(stor.clone(), rtos);
        lsp.addresses = [mac].into();
        switch.ports.insert(d.add(stor, lsp));
    }
    d.add(name, switch);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_network_has_a_router_port_and_a_switch_port_per_subnet() {
        let subnets = [
            check("172.16.24.0/24", "172.16.24.1").unwrap(),
            check("fd00:24::/64", "fd00:24::1").unwrap(),
        ];
        let d = declared("ovn-ls-24", &subnets, "ovn_cluster_router");
        let lrps = d.all::<LogicalRouterPort>();
        let names: Vec<&String> = lrps.keys().collect();
        assert_eq!(
            names,
            ["rtos-ovn-ls-24-172.16.24.0", "rtos-ovn-ls-24-fd00:24::"]
        );
        let v4 = &lrps["rtos-ovn-ls-24-172.16.24.0"];
        assert_eq!(v4.mac, "0a:58:ac:10:18:01");
        assert_eq!(v4.networks.iter().collect::<Vec<_>>(), ["172.16.24.1/24"]);
        let lsps = d.all::<LogicalSwitchPort>();
        let stor = &lsps["stor-ovn-ls-24-fd00:24::"];
        assert_eq!(stor.options["router-port"], "rtos-ovn-ls-24-fd00:24::");
        let switch = &d.all::<LogicalSwitch>()["ovn-ls-24"];
        assert_eq!(switch.other_config["subnet"], "172.16.24.0/24");
        assert_eq!(switch.external_ids["gateway_ip"], "172.16.24.1/24");
        assert_eq!(switch.ports.len(), 2);
        assert_eq!(
            d.foreign().collect::<Vec<_>>(),
            [("Logical_Router", "ovn_cluster_router")]
        );
    }

    #[test]
    fn an_update_changes_only_what_the_plugin_writes() {
        let mut before = LogicalSwitch::named("n");
        before.other_config = [("subnet".into(), "a".into()), ("old".into(), "x".into())].into();
        let mut want = LogicalSwitch::named("n");
        want.other_config = [("subnet".into(), "b".into())].into();
        let mut actual = before.clone();
        actual
            .other_config
            .insert("mcast_snoop".into(), "true".into());
        actual.external_ids.insert("site".into(), "a".into());
        actual.ports = [Ref::new(ovsdb_proto::Uuid::from_u128(7))].into();
        let got = ours(&actual, &before, &want).unwrap();
        // Its keys follow `want` (one dropped), another writer's key and columns stay.
        assert_eq!(
            got.other_config,
            [
                ("mcast_snoop".to_string(), "true".to_string()),
                ("subnet".into(), "b".into())
            ]
            .into()
        );
        assert_eq!(got.external_ids, actual.external_ids);
        assert_eq!(got.ports, actual.ports);
        assert_eq!(got.name, "n");
    }

    #[test]
    fn subnets_and_gateways_are_checked() {
        let (s, g) = check("172.16.24.0/24", "172.16.24.1").unwrap();
        assert_eq!(
            (s.to_string(), g.to_string()),
            ("172.16.24.0/24".into(), "172.16.24.1/24".into())
        );
        let (_, g) = check("172.16.24.0/24", "172.16.24.1/24").unwrap();
        assert_eq!(g.to_string(), "172.16.24.1/24");
        assert!(check("172.16.24.1/24", "172.16.24.1")
            .unwrap_err()
            .to_string()
            .contains("not a network address"));
        assert!(check("172.16.24.0/24", "172.16.25.1")
            .unwrap_err()
            .to_string()
            .contains("not a host address"));
        assert!(check("172.16.24.0/24", "172.16.24.0").is_err());
        assert!(check("nope", "1.1.1.1")
            .unwrap_err()
            .to_string()
            .contains("not a CIDR"));
    }

    #[test]
    fn rows_follow_the_seed() {
        let plugin = Plugin {
            router: "k8smaster".into(),
            gateway_router: Some("GR_k8smaster".into()),
            join_next_hop: Some("100.64.1.1".parse().unwrap()),
            external_ip: Some("192.168.121.19".parse().unwrap()),
            wait: Duration::from_secs(1),
        };
        let (s, g) = check("172.16.24.0/24", "172.16.24.1/24").unwrap();
        let vn = rows(&plugin, "ovn-ls-24", s, g);
        assert_eq!(vn.switch.other_config["subnet"], "172.16.24.0/24");
        assert_eq!(vn.switch.external_ids["gateway_ip"], "172.16.24.1/24");
        assert_eq!(vn.router_port.name, "rtos-ovn-ls-24");
        assert_eq!(vn.router_port.mac, "0a:58:ac:10:18:01");
        assert_eq!(vn.switch_port.options["router-port"], "rtos-ovn-ls-24");
        assert_eq!(
            vn.switch_port.addresses.iter().collect::<Vec<_>>(),
            ["0a:58:ac:10:18:01"]
        );
        let r = vn.route.unwrap();
        assert_eq!(
            (r.ip_prefix.as_str(), r.nexthop.as_str()),
            ("172.16.24.0/24", "100.64.1.1")
        );
        let n = vn.snat.unwrap();
        assert_eq!(
            (n.external_ip.as_str(), n.logical_ip.as_str()),
            ("192.168.121.19", "172.16.24.0/24")
        );
    }
}
