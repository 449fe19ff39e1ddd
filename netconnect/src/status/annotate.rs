//! The next status directory: each object of the inventory as the API server would
//! show it once OVN-Kubernetes' cluster manager handled it, its allocations written as
//! annotations and its conditions set ([`State::next`]).

use crate::api::meta::{same_but_annotations, Meta};
use std::borrow::Cow;
use std::ops::Bound;
use std::sync::Arc;

use crate::alloc::Allocations;
use crate::api::annotations::{self, *};
use crate::api::load::{Object, Problem};
use crate::api::objects::{ClusterNetworkConnect, NetworkStatus, Node};
use crate::api::validate::{cudn_network, udn_network};
use crate::api::{pod, ConnectInfo, Inventory, NetworkInfo, NodeInfo};

use super::dir::{key, State};
use super::network::{self, Verdict, NETWORK_ALLOCATION_SUCCEEDED, NETWORK_CREATED};

impl State {
    /// `inv` with its allocations written as annotations, networks and connects with the
    /// definition in force, connects with their `Accepted` condition and networks with
    /// theirs ([`super::network`]) as of `now`; refused networks as they were read, with
    /// conditions saying why. `allocation_problems` are the allocations that failed.
    pub fn next(
        inv: &Inventory,
        alloc: &Allocations,
        allocation_problems: &[Problem],
        previous: &State,
        now: &str,
    ) -> State {
        State::next_after(inv, alloc, allocation_problems, previous, None, now)
    }

    /// [`State::next`], where `previous` is the state worked out for `basis` (an
    /// inventory and its allocations): a node whose host subnets changed in few
    /// networks since (a network added gives every node one entry more) has those
    /// networks' entries spliced into the text it had in `previous`
    /// ([`splice_node_subnets`]) instead of its every network's written again (250k
    /// CIDRs at 500 x 500). The state is the one [`State::next`] gives.
    pub(crate) fn next_after(
        inv: &Inventory,
        alloc: &Allocations,
        allocation_problems: &[Problem],
        previous: &State,
        basis: Option<(&Inventory, &Allocations)>,
        now: &str,
    ) -> State {
        let mut out = State::default();
        for (name, info) in &inv.connects {
            let o =
                Object::ClusterNetworkConnect(Box::new(connect(name, info, alloc, previous, now)));
            out.objects.insert(key(&o), shared(o, previous));
        }
        // Each node, whether it keeps the text it was read with (it does when annotated
        // with exactly what it has), and the object it was in `previous`.
        let nodes: Vec<(&String, &NodeInfo, bool, Option<&Arc<Object>>)> = inv
            .nodes
            .iter()
            .map(|(name, info)| {
                let kept = alloc.annotated_exactly(name, &info.subnets)
                    && !info
                        .object
                        .metadata
                        .annotations()
                        .contains_key(NODE_SUBNETS);
                let had = previous.objects.get(&("Node".to_owned(), name.clone()));
                (name, info, kept, had)
            })
            .collect();
        let splice = basis.and_then(|(inv_before, before)| {
            let changed = changed_host_subnets(alloc, before)?;
            Some((inv_before, changed))
        });
        // A network added to hundreds of nodes changes every node's host subnets
        // (250k of them at 500 x 500): the nodes are written a share per thread.
        let written = super::in_shares(&nodes, |share| {
            // Each node's text when it is known without writing every entry: the text
            // read (kept), or the text before with what changed spliced in.
            let texts: Vec<Option<Option<Cow<str>>>> = share
                .iter()
                .map(|&(name, info, kept, had)| match kept {
                    true => info.read.get(NODE_SUBNETS).map(|t| Some(Cow::from(t))),
                    false => splice.as_ref().and_then(|(inv_before, changed)| {
                        let had = previous_node(had)?;
                        let spliced = spliced(name, info, inv_before, had, changed, alloc);
                        spliced.map(|t| t.map(Cow::from))
                    }),
                })
                .collect();
            let gathered: Vec<_> = share
                .iter()
                .zip(&texts)
                .map(|(&(name, info, _, _), text)| (name, info, text.is_some()))
                .collect();
            let by_node = host_subnets_by_node(&gathered, alloc);
            let each = share.iter().zip(by_node).zip(texts);
            each.map(|((&(name, info, _, had), subnets), text)| {
                let why = reasons(allocation_problems, &format!("Node {name}"));
                let mine = Allocated {
                    alloc,
                    subnets,
                    text,
                };
                node(name, info, inv, mine, had, &why, now)
            })
            .collect()
        });
        for o in written {
            out.objects.insert(key(&o), o);
        }
        for (name, info) in &inv.networks {
            let verdict = in_force(inv, alloc, allocation_problems, name, info);
            if let Some(o) = network_in_force(name, info, alloc, previous, &verdict, now) {
                out.objects.insert(key(&o), shared(o, previous));
            }
        }
        for o in pods(inv, alloc) {
            out.objects.insert(key(&o), shared(o, previous));
        }
        for object in &inv.refused_networks {
            let label = format!("{} {}", object.kind(), object.name());
            let verdict = Verdict::Refused(reasons(&inv.problems, &label));
            if let Some(o) = with_network_status(object.clone(), previous, &verdict, now) {
                out.objects.entry(key(&o)).or_insert(shared(o, previous));
            }
        }
        out
    }
}

/// The verdict of network `name` in force: the namespaces a CUDN selects, what was
/// refused of it or said of it (a moved transit subnet), the allocations that failed.
fn in_force(
    inv: &Inventory,
    alloc: &Allocations,
    allocation_problems: &[Problem],
    name: &str,
    info: &NetworkInfo,
) -> Verdict {
    let owner = info.network.owner.to_string();
    Verdict::InForce {
        namespaces: info.namespace_selector.as_ref().map(|sel| {
            inv.selected_namespaces(sel)
                .into_iter()
                .map(String::from)
                .collect()
        }),
        notes: reasons(&inv.problems, &owner)
            .into_iter()
            .chain(alloc.transit_moved.get(name).cloned())
            .collect(),
        allocation: reasons(allocation_problems, &owner),
    }
}

/// The pods with interfaces on virtual networks, with their answer to the CNI
/// (`ovnIfaceList`, `ovnNetworkRoutes`) as annotations.
fn pods<'a>(inv: &'a Inventory, alloc: &'a Allocations) -> impl Iterator<Item = Object> + 'a {
    alloc.pods.iter().filter_map(|(name, addresses)| {
        let mut pod = inv.pods.get(name)?.object.clone();
        let a = pod.metadata.annotations.get_or_insert_default();
        a.insert(pod::OVN_IFACE_LIST.into(), addresses.iface_list());
        a.insert(pod::OVN_NETWORK_ROUTES.into(), addresses.routes_text());
        Some(Object::Pod(Box::new(pod)))
    })
}

/// A ClusterNetworkConnect as written: the connect subnets accepted first, its
/// allocations, its `Accepted` condition; the zones' conditions written before are kept
/// (saving merges the newer ones on disk back).
fn connect(
    name: &str,
    info: &ConnectInfo,
    alloc: &Allocations,
    previous: &State,
    now: &str,
) -> ClusterNetworkConnect {
    let mut object = info.object.clone();
    let prev = match previous
        .objects
        .get(&("ClusterNetworkConnect".to_owned(), name.to_owned()))
        .map(|o| &**o)
    {
        Some(Object::ClusterNetworkConnect(p)) => Some(p),
        _ => None,
    };
    if let Some(p) = prev {
        // The connect subnets in force are those accepted first.
        let accepted_now = crate::api::validate::connect_spec(&object)
            .map(|s| s.connect_subnets == info.spec.connect_subnets)
            .unwrap_or(false);
        if !accepted_now {
            object.spec = p.spec.clone();
        }
        let mut status = p.status.clone().unwrap_or_default();
        status.conditions.retain(|c| c.type_ == super::ACCEPTED);
        object.status = Some(status);
    } else {
        object.status = None;
    }
    let a = object.metadata.annotations_mut();
    if let Some(c) = alloc.connects.get(name) {
        match c.tunnel_key {
            Some(k) => {
                a.insert(CONNECT_ROUTER_TUNNEL_KEY.into(), k.to_string());
            }
            None => {
                a.remove(CONNECT_ROUTER_TUNNEL_KEY);
            }
        }
        if c.subnets.is_empty() {
            a.remove(NETWORK_CONNECT_SUBNET);
        } else {
            a.insert(
                NETWORK_CONNECT_SUBNET.into(),
                annotations::format_connect_subnets(&c.subnets),
            );
        }
        let status = object.status.get_or_insert_with(Default::default);
        super::set(status, super::accepted(&c.accepted), now);
    }
    object
}

/// The host subnets of each of `nodes` (in name order, as the inventory holds them),
/// network by network in name order, but for the nodes that keep their text (their
/// third field; none, then): a look-up per network and node when few nodes are wanted,
/// else one walk through each network's map from the first of `nodes`.
fn host_subnets_by_node<'a>(
    nodes: &[(&String, &NodeInfo, bool)],
    alloc: &'a Allocations,
) -> Vec<Vec<(&'a str, &'a [ipnet::IpNet])>> {
    let mut out = vec![Vec::new(); nodes.len()];
    let few = nodes.iter().filter(|(_, _, kept)| !kept).count() * 8 < nodes.len();
    let Some((first, _, _)) = nodes.first() else {
        return out;
    };
    let from: (Bound<&str>, Bound<&str>) = (Bound::Included(first.as_str()), Bound::Unbounded);
    for (net, by_node) in &alloc.host_subnets {
        let mut given = by_node.range::<_, str>(from).peekable();
        let wanted = nodes.iter().zip(out.iter_mut());
        for ((name, _, _), mine) in wanted.filter(|((_, _, kept), _)| !kept) {
            let s = match few {
                true => by_node.get(name.as_str()),
                false => crate::ovnk::in_step(&mut given, name),
            };
            if let Some(s) = s {
                mine.push((net.as_str(), &**s));
            }
        }
    }
    out
}

/// The networks whose host subnets differ between `alloc` and `before` (not the same
/// map, or in one only), in name order; `None` when they are more than a quarter of
/// them and more than 4 (a node added gives each network's map one entry more: each
/// node's entries are then as cheap to write as to splice).
pub(super) fn changed_host_subnets<'a>(
    alloc: &'a Allocations,
    before: &'a Allocations,
) -> Option<Vec<&'a str>> {
    let (now, then) = (&alloc.host_subnets, &before.host_subnets);
    let most = (now.len().max(then.len()) / 4).max(4);
    let mut changed = Vec::new();
    let gone = then.keys().filter(|net| !now.contains_key(*net));
    for net in gone.map(String::as_str) {
        changed.push(net);
    }
    for (net, map) in now {
        if !then.get(net).is_some_and(|m| m.ptr_eq(map)) {
            changed.push(net.as_str());
        }
        if changed.len() > most {
            return None;
        }
    }
    changed.sort_unstable();
    (changed.len() <= most).then_some(changed)
}

/// Node `name`'s host subnets annotation (`None` for none) as the text it had in
/// the previous state (`had`) with the entries of the networks `changed` set to what `alloc` gives
/// it, when that is the text [`node`] would write: the node was in `inv_before` (the
/// inventory the previous state was worked out for) and neither then nor now
/// annotated with host subnets of its own (entries of networks not managed here,
/// which `node` keeps). A state's texts are as [`write_node_subnets`] writes them
/// ([`State::load`] writes again those it reads).
fn spliced(
    name: &str,
    info: &NodeInfo,
    inv_before: &Inventory,
    had: &Node,
    changed: &[&str],
    alloc: &Allocations,
) -> Option<Option<String>> {
    let then = inv_before.nodes.get(name)?;
    let own = |i: &NodeInfo| i.object.metadata.annotations().contains_key(NODE_SUBNETS);
    if own(info) || own(then) {
        return None;
    }
    let text = had.metadata.annotations().get(NODE_SUBNETS);
    let asked: Vec<(&str, Option<&[ipnet::IpNet]>)> = changed
        .iter()
        .map(|net| {
            let given = alloc.host_subnets.get(*net).and_then(|m| m.get(name));
            (*net, given.map(|s| &**s))
        })
        .collect();
    let text = annotations::splice_node_subnets(text.map_or("{}", String::as_str), &asked)?;
    Some((text != "{}").then_some(text))
}

/// What was allocated, with one node's host subnets picked out.
struct Allocated<'a> {
    alloc: &'a Allocations,
    /// The node's host subnets by network, in name order (gathered only when `text`
    /// is not known).
    subnets: Vec<(&'a str, &'a [ipnet::IpNet])>,
    /// The node's host subnets annotation (`None` for none) when known without
    /// writing it from `subnets`: the text the node was read with, when it says
    /// exactly what the node has, or the text written before with what changed
    /// spliced in ([`spliced`]).
    text: Option<Option<Cow<'a, str>>>,
}

/// `o`, shared with `previous` when it holds `o` alike: states share the objects that
/// did not change.
fn shared(o: Object, previous: &State) -> Arc<Object> {
    let had = previous.objects.get(&key(&o));
    reused(o, had)
}

/// `o`, or `had` (the object of its key in the state before) when that is alike.
fn reused(o: Object, had: Option<&Arc<Object>>) -> Arc<Object> {
    match had {
        Some(had) if **had == o => had.clone(),
        _ => Arc::new(o),
    }
}

/// The node `had` holds, if any.
fn previous_node(had: Option<&Arc<Object>>) -> Option<&Node> {
    match &**had? {
        Object::Node(n) => Some(n),
        _ => None,
    }
}

/// A node as written: its node id, transit addresses and host subnets (its entries for
/// networks netconnect does not manage kept), and a condition naming an annotation
/// replaced by an allocation (`why`); `had`, the node's object in the previous state,
/// when it is that.
fn node(
    name: &str,
    info: &NodeInfo,
    inv: &Inventory,
    mine: Allocated,
    had: Option<&Arc<Object>>,
    why: &[String],
    now: &str,
) -> Arc<Object> {
    let mut object = info.object.clone();
    let a = object.metadata.annotations_mut();
    if let Some(id) = mine.alloc.node_ids.get(name) {
        a.insert(NODE_ID.into(), id.to_string());
    }
    if let Some(t) = mine.alloc.node_transit.get(name).filter(|t| !t.is_empty()) {
        a.insert(
            NODE_TRANSIT_SWITCH_PORT_IFADDR.into(),
            format_transit_ifaddr(t),
        );
    }
    if let Some(text) = mine.text {
        match text {
            // The text the node was read with (its own annotations lack it): compared
            // with the one written before, not copied, while the node is as it was (a
            // node's text lists every network's subnets).
            Some(Cow::Borrowed(text)) => {
                let mut object = finish(object, had, why, now);
                if let Some(had) = had {
                    if matches!(&**had, Object::Node(n) if is_with_text(&object, text, n)) {
                        return had.clone();
                    }
                }
                let a = object.metadata.annotations_mut();
                a.insert(NODE_SUBNETS.into(), text.to_owned());
                return Arc::new(Object::Node(Box::new(object)));
            }
            Some(text) => a.insert(NODE_SUBNETS.into(), text.into_owned()),
            None => a.remove(NODE_SUBNETS),
        };
        return reused(Object::Node(Box::new(finish(object, had, why, now))), had);
    }
    let own = a
        .get(NODE_SUBNETS)
        .and_then(|v| annotations::parse_node_subnets(v).ok())
        .unwrap_or_default();
    let mut subnets: Vec<(&str, &[ipnet::IpNet])> = own
        .iter()
        .filter(|(net, _)| !inv.networks.contains_key(*net))
        .map(|(net, s)| (net.as_str(), s.as_slice()))
        .collect();
    let foreign = !subnets.is_empty();
    subnets.extend(mine.subnets.iter().filter(|(_, s)| !s.is_empty()));
    if foreign {
        subnets.sort_by(|x, y| x.0.cmp(y.0));
    }
    if subnets.is_empty() {
        a.remove(NODE_SUBNETS);
    } else {
        let text = annotations::write_node_subnets(&subnets);
        a.insert(NODE_SUBNETS.into(), text);
    }
    reused(Object::Node(Box::new(finish(object, had, why, now))), had)
}

/// Whether `had` is `built` with host subnets annotation `text`, which `built` lacks.
/// Every field is named: a field added to [`Node`] (or to its metadata, see
/// [`same_but_annotations`]) must be compared.
fn is_with_text(built: &Node, text: &str, had: &Node) -> bool {
    let Node {
        metadata,
        spec,
        status,
    } = had;
    let b = &built.metadata;
    let (annotations, built_annotations) = (metadata.annotations(), b.annotations());
    *spec == built.spec
        && *status == built.status
        && same_but_annotations(metadata, b)
        && !built_annotations.contains_key(NODE_SUBNETS)
        && annotations.len() == built_annotations.len() + 1
        && annotations.get(NODE_SUBNETS).is_some_and(|t| t == text)
        && built_annotations
            .iter()
            .all(|(k, v)| annotations.get(k) == Some(v))
}

/// Node `object` with its annotations' condition set (`had`: its object in the
/// previous state).
fn finish(mut object: Node, had: Option<&Arc<Object>>, why: &[String], now: &str) -> Node {
    node_annotations_condition(&mut object, previous_node(had), why, now);
    object
}

/// A network in force as written: the accepted spec (a refused update keeps the one
/// accepted before), its allocations, its conditions for `verdict`.
fn network_in_force(
    name: &str,
    info: &NetworkInfo,
    alloc: &Allocations,
    previous: &State,
    verdict: &Verdict,
    now: &str,
) -> Option<Object> {
    let mut object = info.object.clone();
    if let Some(prev) = previous.objects.get(&key(&object)).map(|o| &**o) {
        let accepted_now = match &object {
            Object::UserDefinedNetwork(u) => udn_network(u).ok(),
            Object::ClusterUserDefinedNetwork(c) => cudn_network(c).ok(),
            _ => None,
        };
        if accepted_now.as_ref() != Some(&info.network) {
            match (&mut object, prev) {
                (Object::UserDefinedNetwork(u), Object::UserDefinedNetwork(p)) => {
                    u.spec = p.spec.clone()
                }
                (Object::ClusterUserDefinedNetwork(c), Object::ClusterUserDefinedNetwork(p)) => {
                    c.spec.network = p.spec.network.clone()
                }
                _ => {}
            }
        }
    }
    let mut object = with_network_status(object, previous, verdict, now)?;
    let meta = match &mut object {
        Object::UserDefinedNetwork(u) => &mut u.metadata,
        Object::ClusterUserDefinedNetwork(c) => &mut c.metadata,
        _ => return None,
    };
    if let Some(id) = alloc.network_ids.get(name) {
        meta.annotations_mut()
            .insert(NETWORK_ID.into(), id.to_string());
    }
    if let Some(keys) = alloc.tunnel_keys.get(name) {
        meta.annotations_mut()
            .insert(TUNNEL_KEYS.into(), format_tunnel_keys(keys));
    }
    Some(object)
}

/// A network object with its status set for `verdict`; `None` for an object that is
/// not a network.
fn with_network_status(
    mut object: Object,
    previous: &State,
    verdict: &Verdict,
    now: &str,
) -> Option<Object> {
    let prev = previous.objects.get(&key(&object)).map(|o| &**o);
    let status = match &mut object {
        Object::UserDefinedNetwork(u) => &mut u.status,
        Object::ClusterUserDefinedNetwork(c) => &mut c.status,
        _ => return None,
    };
    let read = status.take().unwrap_or_default();
    *status = Some(network_status(&read, prev, verdict, now));
    Some(object)
}

/// The condition a node's status carries while an annotation of it is replaced by an
/// allocation (a reserved or duplicate `k8s.ovn.org/node-id`): the node keeps its rows
/// with the new value, and the status says which annotation was not used and why.
pub(crate) const NODE_ANNOTATIONS_ACCEPTED: &str = "OVNAnnotationsAccepted";

/// Puts [`NODE_ANNOTATIONS_ACCEPTED`] (False, with `why`) into `node`'s status, or takes
/// it out when `why` is empty; the transition time is kept from `previous`, else `now`
/// (RFC 3339; a node condition's time is a timestamp, left out when `now` is none).
fn node_annotations_condition(node: &mut Node, previous: Option<&Node>, why: &[String], now: &str) {
    use k8s_openapi::api::core::v1::NodeCondition;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let ours = |c: &NodeCondition| c.type_ == NODE_ANNOTATIONS_ACCEPTED;
    let had = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(ours));
    if why.is_empty() && !had {
        return;
    }
    let old = previous
        .and_then(|n| n.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| ours(c)))
        .cloned();
    let conditions = node
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    conditions.retain(|c| !ours(c));
    if !why.is_empty() {
        let since = match old {
            Some(old) if old.status == "False" => old.last_transition_time,
            _ => now.parse().ok().map(Time),
        };
        conditions.push(NodeCondition {
            type_: NODE_ANNOTATIONS_ACCEPTED.into(),
            status: "False".into(),
            reason: Some("AnnotationReplaced".into()),
            message: Some(why.join("; ")),
            last_transition_time: since,
            last_heartbeat_time: None,
        });
    }
}

/// The messages of `problems` about the object labelled `label` (`Kind name`).
fn reasons(problems: &[Problem], label: &str) -> Vec<String> {
    problems
        .iter()
        .filter(|p| p.object.as_deref() == Some(label))
        .map(|p| match &p.field {
            Some(f) => format!("{f}: {}", p.message),
            None => p.message.clone(),
        })
        .collect()
}

/// A network's status with `verdict`'s conditions: built on the status the object was
/// read with, and the transition times of the status written last (`previous`).
fn network_status(
    read: &NetworkStatus,
    previous: Option<&Object>,
    verdict: &Verdict,
    now: &str,
) -> NetworkStatus {
    let mut base = read.clone();
    let before = match previous {
        Some(Object::UserDefinedNetwork(u)) => u.status.as_ref(),
        Some(Object::ClusterUserDefinedNetwork(c)) => c.status.as_ref(),
        _ => None,
    };
    for c in before.into_iter().flat_map(|s| &s.conditions) {
        if [NETWORK_CREATED, NETWORK_ALLOCATION_SUCCEEDED].contains(&c.type_.as_str()) {
            super::put(&mut base.conditions, c.clone(), &c.last_transition_time);
        }
    }
    network::apply(&base, verdict, now)
}

#[cfg(test)]
mod tests;
