//! The cluster key: the rows every network refers to (the default COPP and its
//! meters). Its rows carry the default network controller's stamp; another party's
//! COPP or meter changing wakes every key, since keys refer to them by name.

use ovsdb_proto::Datum;

use super::{Key, Kind, RowEvent, Wake};
use crate::ovnk::ownership::Owner;
use crate::topology::{self, Desired};
use crate::world::World;

/// The cluster rows come first: the networks refer to them.
pub(super) const PHASE: usize = 0;

/// The cluster kind.
pub(super) struct Cluster;

impl Kind for Cluster {
    fn owns(&self, owner: &Owner) -> bool {
        *owner == topology::cluster::owner()
    }

    fn keys(&self, _world: &World) -> Vec<Key> {
        vec![Key::Cluster]
    }

    fn owners(&self, _world: &World) -> Vec<Owner> {
        vec![topology::cluster::owner()]
    }

    fn key_of(&self, _world: &World, owner: &Owner, _ids: Option<&Datum>) -> Option<Key> {
        (*owner == topology::cluster::owner()).then_some(Key::Cluster)
    }

    fn woken(&self, world: &World, event: &RowEvent) -> Vec<Wake> {
        match (event.owner, event.table) {
            (None, "Copp" | "Meter") => world.keys().into_iter().map(Wake::Look).collect(),
            _ => Vec::new(),
        }
    }
}

/// What the cluster key wants.
pub(super) fn desired() -> Desired {
    topology::cluster::build()
}
