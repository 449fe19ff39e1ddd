//! The inputs at one moment: the validated objects, the allocations, what is wrong
//! ([`World`]), the settings that are not in the manifests, and the state to persist
//! after them. The reconcile keys a world defines, and what each wants, are
//! [`crate::keys`]'.

use crate::alloc::admission::admit;
use crate::alloc::{allocate_after, Allocations, ClusterConfig};
use crate::api::load::{FileObjects, Object, Problem};
use crate::api::validate::Reserved;
use crate::api::{Context, Inventory};
use crate::ovnk::ownership::Owner;
use crate::status::dir::State;
use crate::topology::{Inputs, TopologyConfig};

pub mod numbers;
pub use numbers::NumbersInNb;

/// Which rows netconnect writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Manage {
    /// Everything it knows: the cluster rows, the networks, their services, the
    /// ClusterNetworkConnects (an NB it alone writes).
    #[default]
    All,
    /// The ClusterNetworkConnects only, beside OVN-Kubernetes, which writes the
    /// networks and services: their rows are found by their names, never written; a
    /// connect adds only its own rows and its own elements of their sets; the rows of
    /// a connect not in the manifests are reported, never removed.
    Connects,
}

/// Settings that are not in the manifests.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// The zone served; `None` serves every node (one NB for the whole cluster).
    pub zone: Option<String>,
    /// Which rows are written.
    pub manage: Manage,
    /// Rows OVN-Kubernetes wrote that a key wants are taken over in place
    /// (`--adopt ovn-kubernetes`; [`crate::topology::Desired::adopt`]).
    pub adopt: bool,
    /// ClusterNetworkConnects are not acted on (`--enable-network-connect=false`,
    /// OVN-Kubernetes' switch): read as if absent from the manifests.
    pub ignore_connects: bool,
    /// The site's distributed router the virtual networks attach to (`--vl-router`);
    /// `None`: `ovn_cluster_router`.
    pub vl_router: Option<String>,
    /// Ranges networks must stay out of.
    pub reserved: Reserved,
    /// Cluster-wide allocation settings.
    pub cluster: ClusterConfig,
    /// Cluster-wide topology settings.
    pub topology: TopologyConfig,
    /// The numbers the networks' rows carry in the NB, which number the networks
    /// their objects do not ([`numbers`]); `None`: not read (yet).
    pub numbers_in_nb: Option<std::sync::Arc<NumbersInNb>>,
}

impl Settings {
    /// The distributed router the virtual networks attach to.
    pub fn vl_router(&self) -> &str {
        self.vl_router.as_deref().unwrap_or("ovn_cluster_router")
    }

    /// Sets the cluster's service CIDRs everywhere they are used: the ranges networks
    /// must stay out of, and what service-only connects let through.
    pub fn set_service_cidrs(&mut self, cidrs: Vec<ipnet::IpNet>) {
        self.reserved.service_cidrs = cidrs.clone();
        self.topology.service_cidrs = cidrs;
    }

    /// Sets the default network's join subnets everywhere they are used: the ranges
    /// networks must stay out of, and what the EgressIP no-reroute policies match.
    pub fn set_default_join(&mut self, subnets: Vec<ipnet::IpNet>) {
        self.reserved.default_join = subnets.clone();
        self.topology.default_join = subnets;
    }

    /// Enables EgressIP's no-reroute policies (priority 102) on the networks' routers,
    /// as OVN-Kubernetes writes them with `--enable-egress-ip`.
    pub fn set_egress_ip(&mut self, on: bool) {
        self.topology.egress_ip = on;
    }

    /// Takes Layer2 networks' gateway and management addresses from their
    /// `defaultGatewayIPs` and `infrastructureSubnets`, as OVN-Kubernetes does with
    /// `--enable-preconfigured-udn-addresses`.
    pub fn set_preconfigured_udn_addresses(&mut self, on: bool) {
        self.topology.preconfigured_udn_addresses = on;
    }

    /// Sets the masquerade subnets everywhere they are used: the ranges networks must
    /// stay out of, and the masquerade addresses of gateway routers, management ports
    /// and service hairpins.
    pub(crate) fn set_masquerade_subnets(&mut self, subnets: Vec<ipnet::IpNet>) {
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
    /// Fields of the objects read that netconnectd does not know and ignored.
    pub warnings: Vec<Problem>,
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
    pub(crate) fn build_in(
        files: &[FileObjects],
        context: &Context,
        settings: Settings,
        previous: Option<&World>,
    ) -> World {
        let started = std::time::Instant::now();
        let mut inventory = Inventory::build_after(files, context, previous.map(|p| &p.inventory));
        if settings.ignore_connects {
            inventory.ignore_connects();
        }
        if let Some(nb) = &settings.numbers_in_nb {
            numbers::take(&mut inventory, nb);
        }
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
        let warnings = files.iter().flat_map(|f| f.warnings.clone()).collect();
        let mut all = inventory.problems.clone();
        all.append(&mut problems);
        all.append(&mut refused);
        let mut world = World {
            inventory,
            allocations,
            problems: all,
            warnings,
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
    pub(crate) fn state_after(&self, previous: &State, from: Option<&World>) -> State {
        // The problems after the inventory's are the allocations' (and the connects').
        let mut state = State::next_after(
            &self.inventory,
            &self.allocations,
            &self.problems[self.inventory.problems.len()..],
            previous,
            from.map(|w| (&w.inventory, &w.allocations)),
            &crate::status::now(),
        );
        if self.settings.manage == Manage::Connects {
            self.keep_networks_status_as_read(&mut state);
        }
        state
    }

    /// Beside OVN-Kubernetes ([`Manage::Connects`]) netconnectd writes no network: a
    /// network's status is OVN-Kubernetes' cluster manager's, kept as it was read (its
    /// annotations, the ids netconnectd uses, are still saved).
    fn keep_networks_status_as_read(&self, state: &mut State) {
        for info in self.inventory.networks.values() {
            let read = match &info.object {
                Object::UserDefinedNetwork(u) => &u.status,
                Object::ClusterUserDefinedNetwork(c) => &c.status,
                _ => continue,
            };
            let key = crate::status::dir::key(&info.object);
            let Some(saved) = state.objects.get_mut(&key) else {
                continue;
            };
            let mut object = (**saved).clone();
            match &mut object {
                Object::UserDefinedNetwork(u) => u.status.clone_from(read),
                Object::ClusterUserDefinedNetwork(c) => c.status.clone_from(read),
                _ => continue,
            }
            *saved = std::sync::Arc::new(object);
        }
    }

    /// The zone's name in `Ready-In-Zone-<zone>` conditions.
    pub(crate) fn zone_name(&self) -> &str {
        self.settings
            .zone
            .as_deref()
            .unwrap_or(crate::status::GLOBAL_ZONE)
    }

    /// [`World::owners`], once worked out (the first time it is asked for: a world is
    /// compared with the one after it as well as with the one before).
    pub(crate) fn owners_once(&self) -> &std::sync::OnceLock<std::collections::HashSet<Owner>> {
        &self.owners
    }
}

#[cfg(test)]
mod tests;
