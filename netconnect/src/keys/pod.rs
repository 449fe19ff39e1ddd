//! A pod's key: one logical switch port per interface it asks for on the networking
//! plugin's virtual networks (`ovnNetwork`), on the network's switch, with the address
//! and MAC handed out for it ([`crate::alloc::pods`]) as its addresses and port
//! security; stamped `networking-plugin:Pod:<namespace/name>`. The port is called
//! `<namespace>_<pod>_<interface>`: the CNI plugs the interface with that `iface-id`.
//! A pod refused has no key; a pod gone, its ports go.

use nb_model::{LogicalSwitch, LogicalSwitchPort};
use ovsdb_proto::Datum;

use super::{Key, Kind, RowEvent, Wake};
use crate::ovnk::ownership::{pod_owner, Owner, VL_CONTROLLER, VL_POD_KIND};
use crate::topology::{BuildError, Desired};
use crate::world::World;

/// The pods come after the virtual networks, whose switches hold their ports.
pub(super) const PHASE: usize = 2;

/// The pod kind.
pub(super) struct Pods;

impl Kind for Pods {
    fn owns(&self, owner: &Owner) -> bool {
        owner.controller == VL_CONTROLLER && owner.kind == VL_POD_KIND
    }

    fn keys(&self, world: &World) -> Vec<Key> {
        world
            .allocations
            .pods
            .keys()
            .map(|p| Key::Pod(p.clone()))
            .collect()
    }

    fn owners(&self, world: &World) -> Vec<Owner> {
        world
            .allocations
            .pods
            .keys()
            .map(|p| pod_owner(p))
            .collect()
    }

    fn key_of(&self, world: &World, owner: &Owner, _ids: Option<&Datum>) -> Option<Key> {
        if !self.owns(owner) {
            return None;
        }
        Some(match world.allocations.pods.contains_key(&owner.name) {
            true => Key::Pod(owner.name.clone()),
            false => Key::Gone(owner.clone()),
        })
    }

    fn woken(&self, world: &World, event: &RowEvent) -> Vec<Wake> {
        // A virtual network's switch (re)written: the pods on it look again.
        match event.key {
            Some(Key::VirtualNetwork(vn)) if event.table == "Logical_Switch" => world
                .allocations
                .pods
                .iter()
                .filter(|(_, a)| a.interfaces.iter().any(|i| i.network == *vn))
                .map(|(p, _)| Wake::Look(Key::Pod(p.clone())))
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// The name of the port of interface `interface` of pod `key` (`namespace/name`).
pub fn port_name(key: &str, interface: &str) -> String {
    format!("{}_{interface}", key.replace('/', "_"))
}

/// What pod `key`'s key wants.
pub(super) fn desired(world: &World, key: &str) -> Result<Desired, BuildError> {
    let addresses = world
        .allocations
        .pods
        .get(key)
        .ok_or_else(|| BuildError::Unknown(key.to_owned()))?;
    let mut d = Desired::new(pod_owner(key));
    for i in &addresses.interfaces {
        let name = port_name(key, &i.interface);
        let address = format!("{} {}", i.mac, i.ip.addr());
        let mut lsp = LogicalSwitchPort {
            name: name.clone(),
            addresses: [address.clone()].into(),
            port_security: [address].into(),
            ..Default::default()
        };
        lsp.external_ids
            .insert("interface".into(), i.interface.clone());
        let port = d.add(name, lsp);
        d.attach::<LogicalSwitch, _>(&i.network, "ports", &port);
    }
    Ok(d)
}
