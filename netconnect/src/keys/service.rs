//! A service's key: the load balancers of one Service on its namespace's primary
//! user-defined network, stamped with the network's controller and `owner-type:
//! Service`. It is unchanged when its inputs are; its network's routers and switches
//! changing wake it (its per-node load balancers sit on them).

use ovsdb_proto::Datum;

use super::{Key, Kind, RowEvent, Wake};
use crate::ovnk::ownership::{service_owner, Owner, SERVICE_OWNER_TYPE};
use crate::topology::{self, BuildError, Desired};
use crate::world::World;

/// The services come after the networks, whose groups hold their load balancers.
pub(super) const PHASE: usize = 2;

/// The service kind.
pub(super) struct Services;

impl Kind for Services {
    fn owns(&self, owner: &Owner) -> bool {
        owner.kind == SERVICE_OWNER_TYPE && owner.controller.ends_with("-network-controller")
    }

    fn keys(&self, world: &World) -> Vec<Key> {
        let inv = &world.inventory;
        inv.services
            .values()
            .filter(|s| inv.network_of_service(s).is_some())
            .map(|s| Key::Service(s.key()))
            .collect()
    }

    fn changed(&self, previous: &World, now: &World) -> Vec<Key> {
        let unchanged = topology::services::unchanged(&previous.inputs(), &now.inputs());
        self.keys(now)
            .into_iter()
            .filter(|k| !matches!(k, Key::Service(s) if unchanged.contains(s)))
            .collect()
    }

    fn owners(&self, world: &World) -> Vec<Owner> {
        let inv = &world.inventory;
        inv.services
            .iter()
            .filter_map(|(key, svc)| Some(service_owner(key, inv.network_of_service(svc)?)))
            .collect()
    }

    fn key_of(&self, world: &World, owner: &Owner, _ids: Option<&Datum>) -> Option<Key> {
        if owner.kind != SERVICE_OWNER_TYPE {
            return None;
        }
        let net = owner.controller.strip_suffix("-network-controller");
        let svc = world.inventory.services.get(&owner.name);
        if let (Some(net), Some(svc)) = (net, svc) {
            if world.inventory.network_of_service(svc) == Some(net) {
                return Some(Key::Service(owner.name.clone()));
            }
        }
        Some(Key::Gone(owner.clone()))
    }

    fn woken(&self, world: &World, event: &RowEvent) -> Vec<Wake> {
        match event.key {
            Some(Key::Network(net))
                if matches!(event.table, "Logical_Router" | "Logical_Switch") =>
            {
                services_of(world, net).map(Wake::Look).collect()
            }
            _ => Vec::new(),
        }
    }
}

/// The keys of the services programmed on network `net`.
fn services_of<'a>(world: &'a World, net: &'a str) -> impl Iterator<Item = Key> + 'a {
    let inv = &world.inventory;
    inv.services
        .values()
        .filter(move |s| inv.network_of_service(s) == Some(net))
        .map(|s| Key::Service(s.key()))
}

/// What service `name`'s key wants.
pub(super) fn desired(world: &World, name: &str) -> Result<Desired, BuildError> {
    topology::services::build(&world.inputs(), name)
}
