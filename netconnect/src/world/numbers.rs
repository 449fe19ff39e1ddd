//! The numbers a network's rows already carry in the NB: its id and, for a primary
//! Layer2 network, its tunnel keys, read off the rows OVN-Kubernetes (or an earlier
//! netconnect) wrote. OVN-Kubernetes keeps a network's id on the
//! NetworkAttachmentDefinition it renders, not on the UDN or CUDN: a cluster dumped
//! without those definitions, or a status directory lost, would otherwise have
//! netconnect number the networks its own way, and a takeover would renumber them
//! under their pods (masquerade addresses, tunnel keys).
//!
//! The id is the transit switch's tunnel key less `16711683` (OVN-Kubernetes'
//! `BaseTransitSwitchTunnelKey`: `zone_ic_handler.go` keys a Layer3 network's transit
//! switch so; a Layer2 network's switch takes the first of its tunnel keys, which
//! `TunnelKeysAllocator.AllocateKeys` reserves as the same sum); a primary Layer2
//! network's second tunnel key is its transit router's.

use std::collections::BTreeMap;

use ovsdb_proto::cache::{CachedRow, Snapshot};
use ovsdb_proto::Atom;

use crate::alloc::{BASE_TRANSIT_SWITCH_TUNNEL_KEY, MAX_NETWORKS};
use crate::api::annotations::{NETWORK_ID, TUNNEL_KEYS};
use crate::api::meta::Meta;
use crate::api::{Inventory, Topology};
use crate::ovnk::names::prefix;

/// The numbers read off the NB's rows, by network name ([`read`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NumbersInNb {
    /// Each network's id.
    pub ids: BTreeMap<String, u32>,
    /// A primary Layer2 network's tunnel keys: its switch's, its transit router's.
    pub tunnel_keys: BTreeMap<String, Vec<u32>>,
}

/// The external id OVN-Kubernetes names a network's rows with.
const NETWORK: &str = "k8s.ovn.org/network";

/// Reads the numbers the networks' rows carry in `snap`: a network's switch named as
/// OVN-Kubernetes names it (`<prefix>transit_switch` for Layer3,
/// `<prefix>ovn_layer2_switch` for Layer2) and carrying the network's name in
/// `external_ids`, keyed in the networks' range; a Layer2 network's transit router
/// (`<prefix>transit_router`) for its second key. A network two rows number
/// differently is left out (its id is then not known from the NB).
pub fn read(snap: &Snapshot) -> NumbersInNb {
    let mut out = NumbersInNb::default();
    let mut clashes = Vec::new();
    for (_, row) in snap.table("Logical_Switch").iter() {
        let Some((net, name, key)) = numbered(row, "other_config") else {
            continue;
        };
        let p = prefix(net);
        let is_transit = name == format!("{p}transit_switch");
        if !(is_transit || name == format!("{p}ovn_layer2_switch")) {
            continue;
        }
        let Some(id) = key
            .checked_sub(BASE_TRANSIT_SWITCH_TUNNEL_KEY)
            .filter(|id| (1..MAX_NETWORKS).contains(id))
        else {
            continue;
        };
        if out.ids.insert(net.to_owned(), id).is_some_and(|o| o != id) {
            clashes.push(net.to_owned());
        }
    }
    for (_, row) in snap.table("Logical_Router").iter() {
        let Some((net, name, key)) = numbered(row, "options") else {
            continue;
        };
        let Some(&id) = out.ids.get(net) else {
            continue;
        };
        if name == format!("{}transit_router", prefix(net)) {
            let keys = vec![BASE_TRANSIT_SWITCH_TUNNEL_KEY + id, key];
            let old = out.tunnel_keys.insert(net.to_owned(), keys.clone());
            if old.is_some_and(|o| o != keys) {
                clashes.push(net.to_owned());
            }
        }
    }
    for net in clashes {
        tracing::warn!(network = %net, "the NB numbers network {net} twice: its id is not read from it");
        out.ids.remove(&net);
        out.tunnel_keys.remove(&net);
    }
    out
}

/// The network `row` is of, its name and its `requested-tnl-key` in `column`.
fn numbered<'a>(row: &'a CachedRow, column: &str) -> Option<(&'a str, &'a str, u32)> {
    let text = |column: &str, key: &str| {
        row.get(column)
            .and_then(|d| d.get_str(key))
            .and_then(Atom::as_str)
    };
    let net = text("external_ids", NETWORK).filter(|n| !n.is_empty())?;
    let name = row.get("name")?.as_scalar()?.as_str()?;
    let key = text(column, "requested-tnl-key")?.parse().ok()?;
    Some((net, name, key))
}

/// Numbers the networks of `inv` whose objects and NetworkAttachmentDefinitions do
/// not say their numbers with those their rows carry in the NB: the NB's win over
/// what a status directory remembers (the rows are what the pods use).
pub(crate) fn take(inv: &mut Inventory, nb: &NumbersInNb) {
    let nads = &inv.nads;
    for (name, info) in inv.networks.iter_mut() {
        let Some(&id) = nb.ids.get(name) else {
            continue;
        };
        let own = info.object.metadata().annotations();
        let theirs = nads.get(name).map(Vec::as_slice).unwrap_or_default();
        if own.contains_key(NETWORK_ID) || theirs.iter().any(|n| n.network_id.is_some()) {
            continue;
        }
        let keys_declared =
            own.contains_key(TUNNEL_KEYS) || theirs.iter().any(|n| n.tunnel_keys.is_some());
        info.network_id = Some(id);
        if info.network.topology == Topology::Layer2 && !keys_declared {
            if let Some(keys) = nb.tunnel_keys.get(name) {
                info.tunnel_keys = Some(keys.clone());
            }
        }
    }
}
