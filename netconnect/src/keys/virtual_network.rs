//! A virtual network's key (the networking plugin's, declared by an `onapNetwork`):
//! its switch and, per subnet, a port on the site's distributed router
//! ([`crate::virtual_networks::declared`]), stamped `networking-plugin:onapNetwork:<name>`.
//! The router is the site's (`--vl-router`): referred to by name, never created; its
//! absence is the key's error until it exists. Nothing in the NB but its own rows
//! wakes it.

use ovsdb_proto::Datum;

use super::{Key, Kind};
use crate::ovnk::ownership::{virtual_network_owner, Owner, VL_CONTROLLER, VL_DECLARED_KIND};
use crate::topology::{BuildError, Desired};
use crate::world::World;

/// The virtual networks come with the networks: they refer only to the site's router.
pub(super) const PHASE: usize = 1;

/// The virtual network kind.
pub(super) struct VirtualNetworks;

impl Kind for VirtualNetworks {
    fn owns(&self, owner: &Owner) -> bool {
        owner.controller == VL_CONTROLLER && owner.kind == VL_DECLARED_KIND
    }

    fn keys(&self, world: &World) -> Vec<Key> {
        world
            .inventory
            .virtual_networks
            .keys()
            .map(|n| Key::VirtualNetwork(n.clone()))
            .collect()
    }

    fn owners(&self, world: &World) -> Vec<Owner> {
        world
            .inventory
            .virtual_networks
            .keys()
            .map(|n| virtual_network_owner(n))
            .collect()
    }

    fn key_of(&self, world: &World, owner: &Owner, _ids: Option<&Datum>) -> Option<Key> {
        if !self.owns(owner) {
            return None;
        }
        Some(
            match world.inventory.virtual_networks.contains_key(&owner.name) {
                true => Key::VirtualNetwork(owner.name.clone()),
                false => Key::Gone(owner.clone()),
            },
        )
    }
}

/// What virtual network `name`'s key wants.
pub(super) fn desired(world: &World, name: &str) -> Result<Desired, BuildError> {
    let def = world
        .inventory
        .virtual_networks
        .get(name)
        .ok_or_else(|| BuildError::Unknown(name.to_owned()))?;
    Ok(crate::virtual_networks::declared(
        name,
        &def.subnets,
        world.settings.vl_router(),
    ))
}
