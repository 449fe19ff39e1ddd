//! A network's key: the topology of one user-defined network (Layer3 or Layer2, its
//! routers, switches, ports and routes), stamped `<network>-network-controller`. Its
//! rows for each node are fragments; it is unchanged when its inputs are; a static
//! MAC binding on one of its gateway routers' ports (a table without owner stamps) is
//! its own row.

use ovsdb_proto::cache::CachedRow;
use ovsdb_proto::{Atom, Datum};

use super::{Key, Kind, RowEvent, Wake};
use crate::api::annotations::NETWORK_ID;
use crate::api::{Role, Topology};
use crate::ovnk::ownership::{network_of_owner, Owner, Scope};
use crate::topology::desired::Fragments;
use crate::topology::{self, BuildError, Desired};
use crate::world::World;

/// The networks come after the cluster rows, which they refer to.
pub(super) const PHASE: usize = 1;

/// The network kind.
pub(super) struct Networks;

impl Kind for Networks {
    fn owns(&self, owner: &Owner) -> bool {
        network_of_owner(owner).is_some()
    }

    fn keys(&self, world: &World) -> Vec<Key> {
        world
            .inventory
            .networks
            .keys()
            .cloned()
            .map(Key::Network)
            .collect()
    }

    fn changed(&self, previous: &World, now: &World) -> Vec<Key> {
        let unchanged = topology::unchanged_networks(&previous.inputs(), &now.inputs());
        self.keys(now)
            .into_iter()
            .filter(|k| !matches!(k, Key::Network(n) if unchanged.contains(n)))
            .collect()
    }

    fn owners(&self, world: &World) -> Vec<Owner> {
        world
            .inventory
            .networks
            .values()
            .map(|info| topology::network_owner(&info.network))
            .collect()
    }

    fn key_of(&self, world: &World, owner: &Owner, _ids: Option<&Datum>) -> Option<Key> {
        let net = owner.controller.strip_suffix("-network-controller")?;
        let info = world.inventory.networks.get(net)?;
        (topology::network_owner(&info.network) == *owner).then(|| Key::Network(net.to_owned()))
    }

    fn woken(&self, world: &World, event: &RowEvent) -> Vec<Wake> {
        if event.owner.is_some() || event.table != "Static_MAC_Binding" {
            return Vec::new();
        }
        binding_port(event.row)
            .and_then(|port| network_of_gateway_port(world, port))
            .map(|net| vec![Wake::Own(Key::Network(net))])
            .unwrap_or_default()
    }

    fn gone(&self, owner: &Owner) -> Option<Desired> {
        // A network's rows claim its load balancer groups (a table without owner
        // stamps), so that they go with it.
        let net = network_of_owner(owner)?;
        let mut d = Desired::new(owner.clone());
        topology::rows::claim_lb_groups(&mut d, net);
        Some(d)
    }
}

/// The port a static MAC binding is on.
fn binding_port(row: &CachedRow) -> Option<&str> {
    row.get("logical_port")
        .and_then(|d| d.as_scalar())
        .and_then(Atom::as_str)
}

/// The network whose gateway router port `port` is (`rtoe-GR_<prefix><node>` of a
/// node the world knows), if any.
fn network_of_gateway_port(world: &World, port: &str) -> Option<String> {
    let rest = port.strip_prefix("rtoe-GR_")?;
    world.inventory.networks.keys().find_map(|net| {
        let node = rest.strip_prefix(&crate::ovnk::names::prefix(net))?;
        world
            .inventory
            .nodes
            .contains_key(node)
            .then(|| net.clone())
    })
}

/// A primary network's rows for each node are fragments, under its owner.
pub(super) fn fragment_scope(world: &World, name: &str) -> Option<(Owner, Scope)> {
    let net = &world.inventory.networks.get(name)?.network;
    let fragmented =
        net.role == Role::Primary && matches!(net.topology, Topology::Layer3 | Topology::Layer2);
    fragmented.then(|| (topology::network_owner(net), Scope::All))
}

/// What network `name`'s key wants, but the fragments `known` holds as built.
pub(super) fn desired(
    world: &World,
    name: &str,
    known: &dyn Fragments,
) -> Result<Desired, BuildError> {
    let mut d = topology::network_with(&world.inputs(), name, known)?;
    // OVN-Kubernetes numbered its networks; the masquerade addresses and tunnel keys
    // of a network's rows follow from its number. Adopting rows of a network whose
    // number netconnect made up would renumber it under its pods.
    let info = world.inventory.networks.get(name);
    if world.settings.adopt && info.is_some_and(|i| i.network_id.is_none()) {
        d.adopt_refused = Some(format!(
            "network {name}'s id is not known (no NetworkAttachmentDefinition annotated \
             {NETWORK_ID} for it, nor the network itself): adopting would renumber it"
        ));
    }
    Ok(d)
}
