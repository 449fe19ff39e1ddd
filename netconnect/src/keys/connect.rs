//! A ClusterNetworkConnect's keys: its own rows in the zone (its router, its service
//! group, its ACLs), and its rows for each network it connects (ports, policies and
//! routes on both routers, in fragments), stamped `ovnkube-network-connect-controller`
//! and told apart by the network's id (a partition). A connected network's routers and
//! switches changing, or a load balancer of its services, wakes them.

use ovsdb_proto::cache::Snapshot;
use ovsdb_proto::{Atom, Datum};

use super::{Key, Kind, RowEvent, Wake};
use crate::ovnk::ownership::{connect_owner, partition_of, IdForm, Owner, Scope};
use crate::topology::connect::{self, services};
use crate::topology::desired::Fragments;
use crate::topology::{BuildError, Desired};
use crate::world::{Manage, World};

/// A connect's own rows come after the networks and services they refer to.
pub(super) const PHASE: usize = 3;
/// Its rows for each network go on both its router and the network's.
pub(super) const NETWORK_PHASE: usize = 4;

/// The ClusterNetworkConnect kind.
pub(super) struct Connects;

impl Kind for Connects {
    fn managed_in(&self, _manage: Manage) -> bool {
        true
    }

    fn owns(&self, owner: &Owner) -> bool {
        *owner == connect_owner(&owner.name)
    }

    fn keys(&self, world: &World) -> Vec<Key> {
        let mut keys: Vec<Key> = world
            .inventory
            .connects
            .keys()
            .cloned()
            .map(Key::Connect)
            .collect();
        for (cnc, c) in &world.allocations.connects {
            if c.tunnel_key.is_some() && world.inventory.connects.contains_key(cnc) {
                for net in c.networks.values() {
                    keys.push(Key::ConnectNetwork(cnc.clone(), net.clone()));
                }
            }
        }
        keys
    }

    fn owners(&self, world: &World) -> Vec<Owner> {
        world
            .inventory
            .connects
            .keys()
            .map(|name| connect_owner(name))
            .collect()
    }

    fn key_of(&self, world: &World, owner: &Owner, ids: Option<&Datum>) -> Option<Key> {
        if *owner != connect_owner(&owner.name)
            || !world.inventory.connects.contains_key(&owner.name)
        {
            return None;
        }
        let cnc = &owner.name;
        // A row for a network the connect connects now is that network's key's.
        let part = ids.and_then(partition_of);
        let net = part.and_then(|part| {
            world.allocations.connects.get(cnc).and_then(|c| {
                c.networks.values().find(|n| {
                    world.allocations.network_ids.get(*n).map(u32::to_string) == Some(part.clone())
                })
            })
        });
        Some(match net {
            Some(net) => Key::ConnectNetwork(cnc.clone(), net.clone()),
            None => Key::Connect(cnc.clone()),
        })
    }

    fn woken(&self, world: &World, event: &RowEvent) -> Vec<Wake> {
        let named = || {
            event
                .row
                .get("external_ids")
                .and_then(|d| d.get_str(nb_model::keys::ovn_k8s::NETWORK))
                .and_then(Atom::as_str)
        };
        let network = match (event.key, event.owner, event.table) {
            // A network's router or switch: the connects put their rows on them.
            (Some(Key::Network(net)), _, "Logical_Router" | "Logical_Switch") => Some(net.as_str()),
            // OVN-Kubernetes' (beside it): named by its network.
            (_, None, "Logical_Router" | "Logical_Switch") => named(),
            // A service's load balancer: the connects of its network group them.
            (_, Some(owner), "Load_Balancer") => {
                owner.controller.strip_suffix("-network-controller")
            }
            // Another party's (OVN-Kubernetes' services controller) naming its network.
            (_, None, "Load_Balancer") => named(),
            _ => None,
        };
        network
            .map(|net| {
                connects_of(world, net)
                    .into_iter()
                    .map(Wake::Look)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn unstamped_owners(&self, snap: &Snapshot) -> Vec<Owner> {
        snap.table("Load_Balancer_Group")
            .iter()
            .filter_map(|(_, row)| {
                let name = row.get("name")?.as_scalar()?.as_str()?;
                Some(connect_owner(name.strip_prefix("cnc_svc_")?))
            })
            .collect()
    }

    fn gone(&self, owner: &Owner) -> Option<Desired> {
        if *owner != connect_owner(&owner.name) {
            return None;
        }
        let mut d = Desired::with_id_form(owner.clone(), IdForm::ObjectIds);
        d.claim::<nb_model::LoadBalancerGroup>(&services::lb_group_name(&owner.name));
        Some(d)
    }
}

/// The keys of the ClusterNetworkConnects that connect network `net` now: each one's
/// own and the one for `net`.
pub(crate) fn connects_of(world: &World, net: &str) -> Vec<Key> {
    let mut out = Vec::new();
    for (name, c) in &world.allocations.connects {
        if c.networks.values().any(|n| n == net) {
            out.push(Key::Connect(name.clone()));
            out.push(Key::ConnectNetwork(name.clone(), net.to_owned()));
        }
    }
    out
}

/// A connect's rows for one network are fragments, in the network's partition.
pub(super) fn fragment_scope(world: &World, cnc: &str, net: &str) -> Option<(Owner, Scope)> {
    let id = world.allocations.network_ids.get(net)?;
    Some((connect_owner(cnc), Scope::Part(id.to_string())))
}

/// What connect `name`'s own key wants.
pub(super) fn desired(world: &World, name: &str) -> Result<Desired, BuildError> {
    connect::build(&world.inputs(), name)
}

/// What connect `name`'s key for network `net` wants, but the fragments `known` holds.
pub(super) fn desired_network(
    world: &World,
    name: &str,
    net: &str,
    known: &dyn Fragments,
) -> Result<Desired, BuildError> {
    connect::build_network(&world.inputs(), name, net, known)
}

impl World {
    /// For a ClusterNetworkConnect key whose CNC has a connect router to set up, its
    /// name and the outcome its `Ready-In-Zone-<zone>` condition reports: what could
    /// not be built (nothing when complete), or why the reconcile failed.
    pub(crate) fn ready_outcome<'a>(
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
}
