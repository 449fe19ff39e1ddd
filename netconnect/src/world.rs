//! Everything derived from the inputs at one moment: the validated objects, the
//! allocations, what is wrong, and from them the reconcile keys and their desired rows.

use std::collections::BTreeSet;

use crate::alloc::admission::admit;
use crate::alloc::{allocate_after, Allocations, ClusterConfig};
use crate::api::load::{FileObjects, Problem};
use crate::api::validate::Reserved;
use crate::api::{Context, Inventory};
use crate::reconcile::NbIndexes;
use crate::status::dir::State;
use crate::topology::connect::{self, services};
use crate::topology::desired::{IdForm, Owner, Scope};
use crate::topology::{self, BuildError, Desired, Inputs, TopologyConfig};
use ovsdb_proto::cache::Snapshot;

/// Settings that are not in the manifests.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// The zone served; `None` serves every node (one NB for the whole cluster).
    pub zone: Option<String>,
    /// Ranges networks must stay out of.
    pub reserved: Reserved,
    /// Cluster-wide allocation settings.
    pub cluster: ClusterConfig,
    /// Cluster-wide topology settings.
    pub topology: TopologyConfig,
}

pub use crate::controller::key::Key;

impl Settings {
    /// Sets the cluster's service CIDRs everywhere they are used: the ranges networks
    /// must stay out of, and what service-only connects let through.
    pub fn set_service_cidrs(&mut self, cidrs: Vec<ipnet::IpNet>) {
        self.reserved.service_cidrs = cidrs.clone();
        self.topology.service_cidrs = cidrs;
    }

    /// Sets the masquerade subnets everywhere they are used: the ranges networks must
    /// stay out of, and the masquerade addresses of gateway routers, management ports
    /// and service hairpins.
    pub fn set_masquerade_subnets(&mut self, subnets: Vec<ipnet::IpNet>) {
        self.reserved.masquerade = subnets.clone();
        self.topology.masquerade_subnets = subnets;
    }
}

/// The inputs, validated and allocated.
#[derive(Clone, Debug)]
pub struct World {
    /// The objects.
    pub inventory: Inventory,
    /// The allocations.
    pub allocations: Allocations,
    /// Objects skipped or partly refused, and allocations that failed.
    pub problems: Vec<Problem>,
    /// The settings used.
    pub settings: Settings,
    /// What the builders read of each node beside its object ([`Inputs::prepared`]),
    /// worked out when the world is built: its fields are to be read, and a world
    /// changed is built anew.
    prepared_nodes: Vec<Option<crate::topology::PreparedNode>>,
    /// Open once what this world allocated is saved ([`World::saved`]); none: open.
    saved: Option<tokio::sync::watch::Receiver<bool>>,
    /// [`World::owners`], worked out the first time it is asked for (a world is
    /// compared with the one after it as well as with the one before).
    owners: std::sync::OnceLock<std::collections::HashSet<Owner>>,
}

/// Held while a world's allocations are being saved ([`World::saving`]): dropping it,
/// whether the save succeeded or not, lets the world's rows be written.
#[derive(Debug)]
pub struct Saving(tokio::sync::watch::Sender<bool>);

impl Drop for Saving {
    fn drop(&mut self) {
        self.0.send_replace(true);
    }
}

impl World {
    /// Validates and allocates the objects of `files`, completed by what `state`
    /// remembers.
    pub fn build(files: &[FileObjects], state: &State, settings: Settings) -> World {
        World::build_after(files, state, settings, None)
    }

    /// [`World::build`], taking what it can of `previous` as it was (the nodes whose
    /// objects and annotations are the same are not read again): the same world,
    /// sooner.
    pub fn build_after(
        files: &[FileObjects],
        state: &State,
        settings: Settings,
        previous: Option<&World>,
    ) -> World {
        let context = state.context(settings.reserved.clone());
        World::build_in(files, &context, settings, previous)
    }

    /// [`World::build_after`] in the `context` of a state worked out beforehand
    /// ([`State::context`] with the settings' reserved ranges: netconnectd works it
    /// out once per state, after saving it, instead of on each reload).
    pub fn build_in(
        files: &[FileObjects],
        context: &Context,
        settings: Settings,
        previous: Option<&World>,
    ) -> World {
        let started = std::time::Instant::now();
        let inventory = Inventory::build_after(files, context, previous.map(|p| &p.inventory));
        let read = started.elapsed();
        let before = previous.map(|p| (&p.inventory, &p.allocations));
        let (mut allocations, mut problems) = allocate_after(&inventory, &settings.cluster, before);
        let allocated = started.elapsed();
        let (connects, mut refused) = admit(
            &inventory,
            &allocations,
            &settings.reserved,
            &settings.cluster,
            settings.topology.max_port_tunnel_key,
        );
        allocations.connects = connects;
        tracing::debug!(
            ?read,
            allocated = ?allocated - read,
            admitted = ?started.elapsed() - allocated,
            "world built"
        );
        let mut all = inventory.problems.clone();
        all.append(&mut problems);
        all.append(&mut refused);
        let mut world = World {
            inventory,
            allocations,
            problems: all,
            settings,
            prepared_nodes: Vec::new(),
            saved: None,
            owners: std::sync::OnceLock::new(),
        };
        world.prepared_nodes = world.inputs().prepare_nodes();
        world
    }

    /// This world, its rows held back until the [`Saving`] returned is dropped:
    /// netconnectd serves a world while it saves the world's allocations in its status
    /// directory, so that the rows are built meanwhile, and writes none before they
    /// are saved (OVN-Kubernetes' order: the annotations in the API server, then the
    /// rows that use them).
    pub fn saving(mut self) -> (World, Saving) {
        let (tx, rx) = tokio::sync::watch::channel(false);
        self.saved = Some(rx);
        (self, Saving(tx))
    }

    /// Waits until the rows of this world may be written: at once unless it was built
    /// [`World::saving`] and its [`Saving`] is not dropped yet.
    pub async fn saved(&self) {
        if let Some(rx) = &self.saved {
            // An error is a sender gone: it was dropped, which opens the gate too.
            let _ = rx.clone().wait_for(|saved| *saved).await;
        }
    }

    /// The builders' view.
    pub fn inputs(&self) -> Inputs<'_> {
        Inputs {
            inventory: &self.inventory,
            allocations: &self.allocations,
            zone: self.settings.zone.as_deref(),
            config: &self.settings.topology,
            prepared: Some(&self.prepared_nodes),
        }
    }

    /// The state to persist after this world.
    pub fn state(&self, previous: &State) -> State {
        self.state_after(previous, None)
    }

    /// [`World::state`], where `previous` is the state of the world `from` (so that
    /// what changed since is all that is worked out again: [`State::next_after`]).
    pub fn state_after(&self, previous: &State, from: Option<&World>) -> State {
        // The problems after the inventory's are the allocations' (and the connects').
        State::next_after(
            &self.inventory,
            &self.allocations,
            &self.problems[self.inventory.problems.len()..],
            previous,
            from.map(|w| (&w.inventory, &w.allocations)),
            &crate::status::now(),
        )
    }

    /// The keys the inputs define: the cluster rows, then each network in name order,
    /// then each ClusterNetworkConnect (whose rows go on the networks'), then each
    /// connected network of each.
    pub fn keys(&self) -> Vec<Key> {
        let mut keys = vec![Key::Cluster];
        keys.extend(self.inventory.networks.keys().cloned().map(Key::Network));
        keys.extend(self.service_keys());
        keys.extend(self.inventory.connects.keys().cloned().map(Key::Connect));
        for (cnc, c) in &self.allocations.connects {
            if c.tunnel_key.is_some() && self.inventory.connects.contains_key(cnc) {
                for net in c.networks.values() {
                    keys.push(Key::ConnectNetwork(cnc.clone(), net.clone()));
                }
            }
        }
        keys
    }

    /// The keys of this world that may write something other than what they wrote
    /// against `previous`: every key but the services and the networks whose inputs
    /// are the same ([`topology::services::unchanged`],
    /// [`topology::unchanged_networks`]). (A key whose rows someone else changed is
    /// woken by the change itself.)
    pub fn changed_since(&self, previous: &World) -> Vec<Key> {
        let (a, b) = (previous.inputs(), self.inputs());
        let services = topology::services::unchanged(&a, &b);
        let networks = topology::unchanged_networks(&a, &b);
        self.keys()
            .into_iter()
            .filter(|k| match k {
                Key::Service(s) => !services.contains(s),
                Key::Network(n) => !networks.contains(n),
                _ => true,
            })
            .collect()
    }

    /// The keys of the services programmed on network `net`: their per-node load
    /// balancers sit on its switches and gateway routers.
    pub fn services_of(&self, net: &str) -> Vec<Key> {
        let inv = &self.inventory;
        inv.services
            .values()
            .filter(|s| inv.network_of_service(s) == Some(net))
            .map(|s| Key::Service(s.key()))
            .collect()
    }

    /// The keys of the services programmed on a primary user-defined network.
    fn service_keys(&self) -> impl Iterator<Item = Key> + '_ {
        let inv = &self.inventory;
        inv.services
            .values()
            .filter(|s| inv.network_of_service(s).is_some())
            .map(|s| Key::Service(s.key()))
    }

    /// The network whose gateway router port `port` is (`rtoe-GR_<prefix><node>` of
    /// a node the world knows), if any.
    pub fn network_of_gateway_port(&self, port: &str) -> Option<String> {
        let rest = port.strip_prefix("rtoe-GR_")?;
        self.inventory.networks.keys().find_map(|net| {
            let node = rest.strip_prefix(&topology::names::prefix(net))?;
            self.inventory.nodes.contains_key(node).then(|| net.clone())
        })
    }

    /// The keys of the ClusterNetworkConnects that connect network `net` now: each
    /// one's own and the one for `net`.
    pub fn connects_of(&self, net: &str) -> Vec<Key> {
        let mut out = Vec::new();
        for (name, c) in &self.allocations.connects {
            if c.networks.values().any(|n| n == net) {
                out.push(Key::Connect(name.clone()));
                out.push(Key::ConnectNetwork(name.clone(), net.to_owned()));
            }
        }
        out
    }

    /// The key of a row of `owner` whose `external_ids` are `ids`: [`World::key_of`],
    /// except that a ClusterNetworkConnect's row for a network it connects now is that
    /// network's key's.
    pub fn key_of_row(&self, owner: &Owner, ids: &ovsdb_proto::Datum) -> Key {
        let key = self.key_of(owner);
        if let (Key::Connect(cnc), Some(part)) = (&key, crate::reconcile::nb::partition_of(ids)) {
            let net = self.allocations.connects.get(cnc).and_then(|c| {
                c.networks.values().find(|n| {
                    self.allocations.network_ids.get(*n).map(u32::to_string) == Some(part.clone())
                })
            });
            if let Some(net) = net {
                return Key::ConnectNetwork(cnc.clone(), net.clone());
            }
        }
        key
    }

    /// The key whose rows carry `owner`: one of [`World::keys`], or [`Key::Gone`] when
    /// the inputs no longer define it.
    pub fn key_of(&self, owner: &Owner) -> Key {
        if *owner == topology::cluster::owner() {
            return Key::Cluster;
        }
        if *owner == connect::owner(&owner.name)
            && self.inventory.connects.contains_key(&owner.name)
        {
            return Key::Connect(owner.name.clone());
        }
        if owner.kind == topology::services::OWNER_TYPE {
            let net = owner.controller.strip_suffix("-network-controller");
            let svc = self.inventory.services.get(&owner.name);
            if let (Some(net), Some(svc)) = (net, svc) {
                if self.inventory.network_of_service(svc) == Some(net) {
                    return Key::Service(owner.name.clone());
                }
            }
            return Key::Gone(owner.clone());
        }
        if let Some(net) = owner.controller.strip_suffix("-network-controller") {
            if let Some(info) = self.inventory.networks.get(net) {
                if topology::network_owner(&info.network) == *owner {
                    return Key::Network(net.to_owned());
                }
            }
        }
        Key::Gone(owner.clone())
    }

    /// Every owner whose rows a key of this world writes: exactly the owners
    /// [`World::key_of`] gives a key that is not [`Key::Gone`].
    pub fn owners(&self) -> &std::collections::HashSet<Owner> {
        self.owners.get_or_init(|| self.find_owners())
    }

    /// [`World::owners`], worked out.
    fn find_owners(&self) -> std::collections::HashSet<Owner> {
        let inv = &self.inventory;
        let cluster = std::iter::once(topology::cluster::owner());
        let networks = inv
            .networks
            .values()
            .map(|info| topology::network_owner(&info.network));
        let services = inv.services.iter().filter_map(|(key, svc)| {
            let net = inv.network_of_service(svc)?;
            Some(topology::services::owner(key, net))
        });
        let connects = inv.connects.keys().map(|name| connect::owner(name));
        cluster
            .chain(networks)
            .chain(services)
            .chain(connects)
            .filter(|o| !matches!(self.key_of(o), Key::Gone(_)))
            .collect()
    }

    /// True when an owner `previous` wrote rows under is no key's in this world: only
    /// then can this world leave owners gone that `previous` did not ([`World::gone_in`]
    /// need not look again otherwise: what it found after `previous` was queued then,
    /// and rows written since under an owner gone wake its key themselves).
    pub fn lost_owners_of(&self, previous: &World) -> bool {
        let now = self.owners();
        previous.owners().iter().any(|o| !now.contains(o))
    }

    /// The keys that own rows in the NB but are no longer defined, from the owners
    /// found there.
    pub fn gone<'a>(&self, owners: impl IntoIterator<Item = &'a Owner>) -> BTreeSet<Key> {
        owners
            .into_iter()
            .filter(|o| is_ours(o))
            .map(|o| self.key_of(o))
            .filter(|k| matches!(k, Key::Gone(_)))
            .collect()
    }

    /// The keys with rows in the NB of `snap` that the inputs no longer define: owners
    /// found by their stamps, and ClusterNetworkConnects whose load balancer group
    /// (a table without owner stamps) is left.
    pub fn gone_in(&self, snap: &Snapshot, nb: &NbIndexes) -> BTreeSet<Key> {
        let mut gone = self.gone(nb.owners(snap));
        for (_, row) in snap.table("Load_Balancer_Group").iter() {
            let name = row
                .get("name")
                .and_then(|d| d.as_scalar())
                .and_then(|a| a.as_str());
            if let Some(cnc) = name.and_then(|n| n.strip_prefix("cnc_svc_")) {
                gone.extend(self.gone([&connect::owner(cnc)]));
            }
        }
        gone
    }

    /// The zone's name in `Ready-In-Zone-<zone>` conditions.
    pub fn zone_name(&self) -> &str {
        self.settings
            .zone
            .as_deref()
            .unwrap_or(crate::status::GLOBAL_ZONE)
    }

    /// For a ClusterNetworkConnect key whose CNC has a connect router to set up, its
    /// name and the outcome its `Ready-In-Zone-<zone>` condition reports: what could
    /// not be built (nothing when complete), or why the reconcile failed.
    pub fn ready_outcome<'a>(
        &self,
        key: &'a Key,
        result: &Result<crate::reconcile::Plan, crate::reconcile::ReconcileError>,
    ) -> Option<(&'a str, Result<Vec<String>, String>)> {
        let (Key::Connect(name) | Key::ConnectNetwork(name, _)) = key else {
            return None;
        };
        self.allocations.connects.get(name)?.tunnel_key?;
        let outcome = match result {
            Ok(plan) => Ok(plan.incomplete.clone()),
            Err(e) => Err(format!(
                "Failed to set up {}: {e}",
                connect::router_name(name)
            )),
        };
        Some((name.as_str(), outcome))
    }

    /// The owner and scope of a key whose rows come in fragments (a connect's rows for
    /// one network, a primary Layer3 or Layer2 network's), known before its rows are
    /// built.
    pub fn fragment_scope(&self, key: &Key) -> Option<(Owner, Scope)> {
        match key {
            Key::ConnectNetwork(cnc, net) => {
                let id = self.allocations.network_ids.get(net)?;
                Some((connect::owner(cnc), Scope::Part(id.to_string())))
            }
            // A primary network's rows for each node.
            Key::Network(name) => {
                let net = &self.inventory.networks.get(name)?.network;
                let fragmented = net.role == crate::api::Role::Primary
                    && matches!(
                        net.topology,
                        crate::api::Topology::Layer3 | crate::api::Topology::Layer2
                    );
                fragmented.then(|| (topology::network_owner(net), Scope::All))
            }
            _ => None,
        }
    }

    /// What `key` wants in the NB.
    pub fn desired(&self, key: &Key) -> Result<Desired, BuildError> {
        self.desired_with(key, &crate::topology::desired::NoFragments)
    }

    /// What `key` wants in the NB, leaving out the fragments `known` says are in the
    /// NB as built before.
    pub fn desired_with(
        &self,
        key: &Key,
        known: &dyn crate::topology::desired::Fragments,
    ) -> Result<Desired, BuildError> {
        match key {
            Key::Cluster => Ok(topology::cluster::build()),
            Key::Network(name) => topology::network_with(&self.inputs(), name, known),
            Key::Connect(name) => connect::build(&self.inputs(), name),
            Key::ConnectNetwork(name, net) => {
                connect::build_network(&self.inputs(), name, net, known)
            }
            Key::Gone(owner) if *owner == connect::owner(&owner.name) => {
                let mut d = Desired::with_id_form(owner.clone(), IdForm::ObjectIds);
                d.claim::<nb_model::LoadBalancerGroup>(&services::lb_group_name(&owner.name));
                Ok(d)
            }
            Key::Service(name) => topology::services::build(&self.inputs(), name),
            Key::Gone(owner) => {
                let mut d = Desired::new(owner.clone());
                // A network's rows claim its load balancer groups (a table without
                // owner stamps), so that they go with it.
                if let Some(net) = crate::ownership::network_of_owner(owner) {
                    topology::rows::claim_lb_groups(&mut d, net);
                }
                Ok(d)
            }
        }
    }
}

pub use crate::ownership::is_ours;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::load::parse_file;

    /// The objects of the owner tests, each a YAML document: a namespace with its
    /// primary network and a service on it, two cluster networks a connect selects, a
    /// third, two nodes.
    const WEB: &str = "apiVersion: v1\nkind: Namespace\nmetadata: {name: web}\n";
    const WEB_NET: &str = "apiVersion: k8s.ovn.org/v1\nkind: UserDefinedNetwork\nmetadata: {name: net, namespace: web}\n\
        spec: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 10.30.0.0/16, hostSubnet: 24}]}}\n";
    const SERVICE: &str = "apiVersion: v1\nkind: Service\nmetadata: {name: s1, namespace: web}\n\
        spec: {clusterIP: 10.96.0.11, clusterIPs: [10.96.0.11], ports: [{port: 80, protocol: TCP, targetPort: 8080}]}\n";
    const BLUE: &str = "apiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {name: blue, labels: {connect: c}}\n\
        spec:\n  namespaceSelector: {matchLabels: {team: blue}}\n  network: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 10.1.0.0/16}]}}\n";
    const GREEN: &str = "apiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {name: green, labels: {connect: c}}\n\
        spec:\n  namespaceSelector: {matchLabels: {team: green}}\n  network: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 10.2.0.0/16}]}}\n";
    const RED: &str = "apiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {name: red}\n\
        spec:\n  namespaceSelector: {matchLabels: {team: red}}\n  network: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 10.3.0.0/16}]}}\n";
    const CONNECT: &str = "apiVersion: k8s.ovn.org/v1\nkind: ClusterNetworkConnect\nmetadata: {name: c}\n\
        spec:\n  networkSelectors:\n  - networkSelectionType: ClusterUserDefinedNetworks\n    clusterUserDefinedNetworkSelector: {networkSelector: {matchLabels: {connect: c}}}\n\
        \x20 connectSubnets: [{cidr: 192.168.0.0/16, networkPrefix: 24}]\n  connectivity: [PodNetwork, ServiceNetwork]\n";
    const NODE_A: &str = "apiVersion: v1\nkind: Node\nmetadata: {name: a, annotations: {k8s.ovn.org/node-chassis-id: ca}}\n";
    const NODE_B: &str = "apiVersion: v1\nkind: Node\nmetadata: {name: b, annotations: {k8s.ovn.org/node-chassis-id: cb}}\n";
    const ALL: [&str; 7] = [WEB, WEB_NET, SERVICE, BLUE, GREEN, CONNECT, NODE_A];

    /// The world of `docs` (some refused, in the worlds that take an object away).
    fn world(docs: &[&str]) -> World {
        let yaml: String = docs.iter().map(|d| format!("---\n{d}")).collect();
        World::build(
            &[parse_file(std::path::Path::new("m.yaml"), &yaml)],
            &State::default(),
            Settings::default(),
        )
    }

    /// The world of [`ALL`] but `gone`.
    fn without(gone: &str) -> World {
        world(&ALL.into_iter().filter(|d| *d != gone).collect::<Vec<_>>())
    }

    /// The world of [`ALL`] with a network and a node more.
    fn more() -> World {
        let mut docs = ALL.to_vec();
        docs.extend([RED, NODE_B]);
        world(&docs)
    }

    #[test]
    fn a_worlds_owners_are_the_owners_its_keys_write_under() {
        let base = world(&ALL);
        assert!(base.problems.is_empty(), "{:?}", base.problems);
        let owners = base.owners();
        // The cluster, three networks, the service, the connect.
        assert_eq!(owners.len(), 6, "{owners:?}");
        for w in [
            without(SERVICE),
            without(CONNECT),
            without(BLUE),
            without(WEB_NET),
            more(),
        ] {
            let mine = w.owners();
            for o in owners.iter().chain(mine) {
                let gone = matches!(w.key_of(o), Key::Gone(_));
                assert_eq!(mine.contains(o), !gone, "{o:?}");
            }
        }
    }

    #[test]
    fn only_a_world_that_lost_an_owner_can_leave_owners_gone() {
        let base = world(&ALL);
        for gone in [SERVICE, CONNECT, BLUE, WEB_NET] {
            assert!(without(gone).lost_owners_of(&base), "{gone}");
        }
        // A node is no owner; the namespace gone takes its network and service along.
        assert!(!without(NODE_A).lost_owners_of(&base));
        assert!(without(WEB).lost_owners_of(&base));
        assert!(!more().lost_owners_of(&base));
        assert!(!base.lost_owners_of(&base));
        assert!(!more().lost_owners_of(&world(&[RED, NODE_B])));
        assert!(world(&[RED, NODE_B]).lost_owners_of(&more()));
    }
}
