//! The cluster as Kubernetes describes it: objects read from YAML files
//! ([`load`]), their label selectors ([`selector`]), the CRDs' validation rules
//! ([`validate`]), OVN-Kubernetes' annotations ([`annotations`]), and the
//! [`Inventory`]: every valid object, indexed, with the problems of the others.
//!
//! A bad object is skipped and reported ([`Problem`]); it never stops the good ones.

pub mod annotations;
pub mod load;
pub mod meta;
pub mod nad;
pub mod network;
pub mod objects;
pub mod onap;
pub mod pod;
pub mod selector;
pub mod service;
pub mod validate;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ipnet::IpNet;

pub use load::Object;
pub(crate) use load::{FileObjects, Origin, Problem};
pub(crate) use meta::Meta;
pub use meta::{Condition, ObjectMeta};
pub use network::Network;
pub(crate) use network::NetworkOwner;

pub(crate) use objects::{ClusterNetworkConnect, Role, Topology};
pub use objects::{Namespace, Node};
pub(crate) use selector::LabelSelector;

use annotations::{BadAnnotation, L3GatewayConfig};

/// Where an endpoint slice is kept: namespace, service, network, slice name.
pub(crate) type SliceKey = (String, String, String, String);

/// A node with OVN-Kubernetes' annotations read.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeInfo {
    /// Where it was read.
    pub(crate) origin: Origin,
    /// The object as read.
    pub object: Node,
    /// `k8s.ovn.org/node-id`, if annotated.
    pub(crate) node_id: Option<u32>,
    /// `k8s.ovn.org/zone-name`, else the node's name.
    pub zone: String,
    /// `k8s.ovn.org/node-chassis-id`, if annotated.
    pub(crate) chassis_id: Option<String>,
    /// `k8s.ovn.org/node-subnets`: host subnets by network name.
    pub subnets: Arc<BTreeMap<String, Vec<IpNet>>>,
    /// `k8s.ovn.org/node-transit-switch-port-ifaddr`, if annotated.
    pub(crate) transit_ifaddr: Option<Vec<IpNet>>,
    /// `k8s.ovn.org/l3-gateway-config`, unless absent or disabled.
    pub gateway: Option<L3GatewayConfig>,
    /// `k8s.ovn.org/host-cidrs`: the host's addresses, in the order of their text.
    pub(crate) host_addresses: Vec<std::net::IpAddr>,
    /// `k8s.ovn.org/gateway-mtu-support` is not `false`.
    pub(crate) gateway_mtu: bool,
    /// The annotations this was read from: the node's own, completed by those
    /// remembered ([`Context::annotations`]).
    pub read: Arc<BTreeMap<String, String>>,
    /// A hash of what the topology builders read of the node besides its name and
    /// allocations (its chassis, gateway config, host addresses and MTU support),
    /// taken once as it is read: every network's key fingerprints every node's inputs
    /// ([`crate::topology::NodeView`]): hashing the gateway config that often showed
    /// in a node added's profile (`docs/benchmarks.md`).
    pub(crate) facts: u64,
}

impl NodeInfo {
    /// The node's name.
    pub fn name(&self) -> &str {
        self.object.metadata.name()
    }
}

/// A valid network with its annotations read.
#[derive(Clone, Debug, PartialEq)]
pub struct NetworkInfo {
    /// Where its object was read.
    pub(crate) origin: Origin,
    /// The object as read (a UserDefinedNetwork or ClusterUserDefinedNetwork).
    pub object: Object,
    /// The definition in force: the object's, or the last accepted one when the
    /// object's is an update the rules refuse.
    pub network: Network,
    /// The object's labels (CUDNs are selected by them).
    pub labels: BTreeMap<String, String>,
    /// A CUDN's namespace selector.
    pub(crate) namespace_selector: Option<LabelSelector>,
    /// `k8s.ovn.org/network-id`, if annotated.
    pub(crate) network_id: Option<u32>,
    /// `k8s.ovn.org/tunnel-keys`, if annotated.
    pub tunnel_keys: Option<Vec<u32>>,
}

/// A ClusterNetworkConnect with its CRD rules checked and its annotations read.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnectInfo {
    /// Where it was read.
    pub(crate) origin: Origin,
    /// The object as read.
    pub object: ClusterNetworkConnect,
    /// The spec in force: the object's, with the connect subnets accepted first (they
    /// are immutable).
    pub spec: validate::ConnectSpec,
    /// `k8s.ovn.org/connect-router-tunnel-key`, if annotated.
    pub tunnel_key: Option<u32>,
    /// `k8s.ovn.org/network-connect-subnet`, if annotated.
    pub subnets: Option<BTreeMap<String, Vec<IpNet>>>,
}

/// Every object read, validated and indexed by name; with the problems of those that
/// were skipped.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inventory {
    /// Nodes by name.
    pub nodes: BTreeMap<String, NodeInfo>,
    /// Namespaces by name.
    pub namespaces: BTreeMap<String, Namespace>,
    /// Networks by network name (`red_net1`, `cluster_udn_blue`).
    pub networks: BTreeMap<String, NetworkInfo>,
    /// ClusterNetworkConnects by name.
    pub connects: BTreeMap<String, ConnectInfo>,
    /// Services by `namespace/name`.
    pub services: BTreeMap<String, service::ServiceInfo>,
    /// Each namespace's primary user-defined network, by namespace: its primary
    /// UserDefinedNetwork, else the first primary ClusterUserDefinedNetwork by name
    /// that selects it (resolved once, when the inventory is built).
    pub(crate) primary_networks: BTreeMap<String, String>,
    /// The endpoint slices mirrored for user-defined networks, by namespace, service,
    /// network and slice name (the default network's slices are not kept).
    pub(crate) endpoint_slices: BTreeMap<SliceKey, service::EndpointSlice>,
    /// Objects skipped or partly refused, with why.
    pub problems: Vec<Problem>,
    /// OVN-Kubernetes' NetworkAttachmentDefinitions, by the network they are for.
    pub nads: BTreeMap<String, Vec<nad::NadInfo>>,
    /// Network objects refused as a whole (their reasons are among the problems).
    pub(crate) refused_networks: Vec<Object>,
    /// The networking plugin's virtual networks (`onapNetwork` objects), by name.
    pub virtual_networks: BTreeMap<String, onap::VirtualNetworkDef>,
    /// The pods asking for interfaces on them, by `namespace/name`.
    pub pods: BTreeMap<String, pod::PodInfo>,
}

/// What the inventory is built against: the definitions accepted before (for the
/// update rules) and the ranges networks must stay out of.
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// Each network's last accepted definition, by network name.
    pub accepted: BTreeMap<String, Network>,
    /// Each ClusterNetworkConnect's last accepted spec, by name.
    pub(crate) accepted_connects: BTreeMap<String, validate::ConnectSpec>,
    /// Reserved ranges.
    pub(crate) reserved: validate::Reserved,
    /// Annotations remembered from an earlier run (the allocations persisted), by
    /// kind and `namespace/name`; an object's own annotations win over them.
    pub remembered: BTreeMap<(String, String), Remembered>,
}

/// The annotations remembered of one object ([`Context::remembered`]).
#[derive(Clone)]
pub enum Remembered {
    /// These annotations.
    Annotations(Arc<BTreeMap<String, String>>),
    /// The allocation annotations ([`annotations::ALLOCATIONS`]) of this object as it
    /// was saved, read where the saved state holds it: a context is worked out for
    /// each state, and a node's host subnets list every network's (20 KB a node at
    /// 500 networks, 10 MB copied for each state when they were copied).
    Of(Arc<Object>),
}

impl Remembered {
    /// The annotations and whether only the allocations among them are remembered.
    fn map(&self) -> (&BTreeMap<String, String>, bool) {
        match self {
            Remembered::Annotations(m) => (m, false),
            Remembered::Of(o) => (o.metadata().annotations(), true),
        }
    }

    /// The annotations remembered, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        let (map, allocations) = self.map();
        map.iter()
            .filter(move |(k, _)| !allocations || annotations::ALLOCATIONS.contains(&k.as_str()))
    }

    /// The annotation `key`, if remembered.
    pub fn get(&self, key: &str) -> Option<&String> {
        let (map, allocations) = self.map();
        map.get(key)
            .filter(|_| !allocations || annotations::ALLOCATIONS.contains(&key))
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }
}

impl std::fmt::Debug for Remembered {
    /// As the map of what is remembered, however it is held.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Context {
    /// The annotations of an object: its own, completed by those remembered for it.
    /// `k8s.ovn.org/node-subnets` is merged network by network.
    pub fn annotations(&self, kind: &str, meta: &ObjectMeta) -> BTreeMap<String, String> {
        let mut out = meta.annotations().clone();
        let Some(old) = self
            .remembered
            .get(&(kind.to_owned(), meta.qualified_name()))
        else {
            return out;
        };
        for (k, v) in old.iter() {
            if k == annotations::NODE_SUBNETS {
                if let Some(mine) = out.get(k) {
                    let merged = annotations::parse_node_subnets(mine)
                        .and_then(|m| Ok((m, annotations::parse_node_subnets(v)?)))
                        .map(|(mine, mut old)| {
                            old.extend(mine);
                            annotations::format_node_subnets(&old)
                        });
                    if let Ok(merged) = merged {
                        out.insert(k.clone(), merged);
                    }
                    continue;
                }
            }
            out.entry(k.clone()).or_insert_with(|| v.clone());
        }
        out
    }

    /// Whether [`Context::annotations`] of the object is `read`, told without copying
    /// them when the object and what is remembered for it do not both have
    /// `k8s.ovn.org/node-subnets` (a node's lists every network's: 20 MB copied to
    /// be compared at 500 networks × 500 nodes).
    pub(crate) fn annotations_are(
        &self,
        kind: &str,
        meta: &ObjectMeta,
        read: &BTreeMap<String, String>,
    ) -> bool {
        let own = meta.annotations();
        let Some(old) = self
            .remembered
            .get(&(kind.to_owned(), meta.qualified_name()))
        else {
            return own == read;
        };
        if own.contains_key(annotations::NODE_SUBNETS)
            && old.get(annotations::NODE_SUBNETS).is_some()
        {
            return self.annotations(kind, meta) == *read;
        }
        let remembered = old.iter().filter(|(k, _)| !own.contains_key(*k));
        let mut count = 0;
        for (k, v) in own.iter().chain(remembered) {
            if read.get(k) != Some(v) {
                return false;
            }
            count += 1;
        }
        count == read.len()
    }
}

impl Inventory {
    /// Builds the inventory from what the files held (in the order given; a duplicate
    /// object is reported where it appears second).
    pub fn build(files: &[FileObjects], context: &Context) -> Inventory {
        Inventory::build_after(files, context, None)
    }

    /// [`Inventory::build`], taking the nodes of `before` whose objects and annotations
    /// are the same as they were, not read again (a node's `k8s.ovn.org/node-subnets`
    /// lists every network's subnets: reading every node's showed in a reload's
    /// profile at 500 networks).
    pub fn build_after(
        files: &[FileObjects],
        context: &Context,
        before: Option<&Inventory>,
    ) -> Inventory {
        let mut inv = Inventory::default();
        let mut seen: BTreeSet<(&'static str, String)> = BTreeSet::new();
        let mut prefixes: BTreeMap<String, String> = BTreeMap::new();
        for file in files {
            inv.problems.extend(file.problems.iter().cloned());
            if let Some(why) = &file.unreadable {
                inv.problems.push(Problem {
                    origin: Origin {
                        file: file.file.clone(),
                        doc: 0,
                        item: None,
                    },
                    object: None,
                    field: None,
                    message: why.clone(),
                });
            }
            for (origin, object) in &file.objects {
                if !seen.insert((object.kind(), object.name())) {
                    inv.problems.push(Problem {
                        origin: origin.clone(),
                        object: Some(format!("{} {}", object.kind(), object.name())),
                        field: None,
                        message: "defined more than once; the first definition is used".into(),
                    });
                    continue;
                }
                inv.add(origin, object, context, before, &mut prefixes);
            }
        }
        inv.take_nad_ids();
        inv.assign_primary_networks();
        inv
    }

    /// Drops the ClusterNetworkConnects and what was found wrong with them, as if the
    /// manifests held none (network connect switched off).
    pub(crate) fn ignore_connects(&mut self) {
        if !self.connects.is_empty() {
            tracing::debug!(
                connects = self.connects.len(),
                "ClusterNetworkConnects ignored: network connect is off"
            );
        }
        self.connects.clear();
        self.problems.retain(|p| {
            !p.object
                .as_deref()
                .is_some_and(|o| o.starts_with("ClusterNetworkConnect "))
        });
    }

    /// Adds one object, or the problems that keep it (or part of it) out. `prefixes`
    /// holds the OVN name prefix of each network added so far; a node unchanged since
    /// the inventory `before` is taken from it.
    fn add(
        &mut self,
        origin: &Origin,
        object: &Object,
        context: &Context,
        before: Option<&Inventory>,
        prefixes: &mut BTreeMap<String, String>,
    ) {
        let label = format!("{} {}", object.kind(), object.name());
        let problem = |field: Option<String>, message: String| Problem {
            origin: origin.clone(),
            object: Some(label.clone()),
            field,
            message,
        };
        match object {
            Object::Node(node) => match node_info(
                origin,
                node,
                context,
                before.and_then(|b| b.nodes.get(node.metadata.name())),
            ) {
                Ok(info) => {
                    self.nodes.insert(node.metadata.name().to_owned(), info);
                }
                Err(e) => self.problems.push(problem(
                    Some(format!("metadata.annotations[{}]", e.key)),
                    format!("{:?}: {}", e.value, e.reason),
                )),
            },
            Object::Namespace(ns) => {
                self.namespaces
                    .insert(ns.metadata.name().to_owned(), (**ns).clone());
            }
            Object::UserDefinedNetwork(_) | Object::ClusterUserDefinedNetwork(_) => {
                match network_info(origin, object, context) {
                    Ok((info, refused)) => {
                        if let Some(e) = refused {
                            self.problems.push(problem(
                                Some(e.field),
                                format!("{}; the accepted definition stays in force", e.message),
                            ));
                        }
                        if let Err(message) = self.add_network(info, prefixes) {
                            self.problems.push(problem(None, message));
                            self.refused_networks.push(object.clone());
                        }
                    }
                    Err(p) => {
                        self.problems.push(problem(p.0, p.1));
                        self.refused_networks.push(object.clone());
                    }
                }
            }
            Object::Service(svc) => {
                match validate::service::service(svc, &context.reserved.service_cidrs) {
                    Ok(Some(info)) => {
                        self.services.insert(info.key(), info);
                    }
                    Ok(None) => {}
                    Err(e) => self.problems.push(problem(Some(e.field), e.message)),
                }
            }
            Object::EndpointSlice(slice) => {
                if let Some((svc, net)) = service::mirrored_for(slice) {
                    let m = &slice.metadata;
                    let key = (
                        m.namespace().unwrap_or_default().to_owned(),
                        svc.to_owned(),
                        net.to_owned(),
                        m.name().to_owned(),
                    );
                    self.endpoint_slices.insert(key, (**slice).clone());
                }
            }
            Object::NetworkAttachmentDefinition(nad) => match nad::nad_info(origin, nad) {
                Ok(Some((network, info))) => self.nads.entry(network).or_default().push(info),
                Ok(None) => {}
                Err((field, message)) => self.problems.push(problem(Some(field), message)),
            },
            Object::Pod(_) | Object::OnapNetwork(_) => {
                if let Err((field, message)) = self.add_plugin_object(origin, object, context) {
                    self.problems.push(problem(field, message));
                }
            }
            Object::ClusterNetworkConnect(cnc) => match connect_info(origin, cnc, context) {
                Ok((info, refused)) => {
                    if let Some(e) = refused {
                        self.problems.push(problem(Some(e.field), e.message));
                    }
                    self.connects.insert(cnc.metadata.name().to_owned(), info);
                }
                Err(p) => self.problems.push(problem(p.0, p.1)),
            },
        }
    }

    /// Adds a pod that asks for interfaces on virtual networks (none else); an error
    /// names the annotation and why the pod is refused.
    fn add_pod(
        &mut self,
        origin: &Origin,
        p: &objects::Pod,
        context: &Context,
    ) -> Result<(), pod::PodProblem> {
        let Some((annotation, spec)) = pod::pod_spec(p.metadata.annotations())
            .map_err(|(f, m)| (f, format!("{m}; nothing of the pod is written")))?
        else {
            return Ok(());
        };
        let key = p.metadata.qualified_name();
        let remembered = context.annotations("Pod", &p.metadata);
        let info = pod::PodInfo {
            origin: origin.clone(),
            key: key.clone(),
            annotation,
            object: p.clone(),
            spec,
            answered: pod::answered(&remembered),
        };
        self.pods.insert(key, info);
        Ok(())
    }

    /// Adds an object of the networking plugin's (a pod asking for interfaces, an
    /// `onapNetwork`); an error names the field (if any) and why it was refused.
    fn add_plugin_object(
        &mut self,
        origin: &Origin,
        object: &Object,
        context: &Context,
    ) -> Result<(), (Option<String>, String)> {
        match object {
            Object::Pod(p) => self
                .add_pod(origin, p, context)
                .map_err(|(f, m)| (Some(f), m)),
            Object::OnapNetwork(o) => self.add_onap_network(o),
            _ => Ok(()),
        }
    }

    /// Adds the virtual network `o` declares, if it is ovn's; an error names the field
    /// (none for a clash with another virtual network) and why it was refused.
    fn add_onap_network(
        &mut self,
        o: &objects::OnapNetwork,
    ) -> Result<(), (Option<String>, String)> {
        match onap::virtual_network(o).map_err(|(f, m)| (Some(f), m))? {
            Some(def) => self.add_virtual_network(def).map_err(|m| (None, m)),
            None => Ok(()),
        }
    }

    /// Adds a virtual network unless its name is taken or a subnet overlaps another
    /// virtual network's (they all hang from one router).
    fn add_virtual_network(&mut self, def: onap::VirtualNetworkDef) -> Result<(), String> {
        if self.virtual_networks.contains_key(&def.name) {
            return Err(format!(
                "virtual network {} is declared twice; the first one read is kept",
                def.name
            ));
        }
        for other in self.virtual_networks.values() {
            for (s, _) in &def.subnets {
                if let Some((o, _)) = other
                    .subnets
                    .iter()
                    .find(|(o, _)| o.contains(s) || s.contains(o))
                {
                    return Err(format!(
                        "subnet {s} overlaps {o} of virtual network {} (both on one router)",
                        other.name
                    ));
                }
            }
        }
        self.virtual_networks.insert(def.name.clone(), def);
        Ok(())
    }

    /// Adds a network unless its name, or its OVN name prefix, is taken.
    fn add_network(
        &mut self,
        info: NetworkInfo,
        prefixes: &mut BTreeMap<String, String>,
    ) -> Result<(), String> {
        let name = info.network.name();
        let prefix = crate::ovnk::names::prefix(&name);
        if let Some(other) = prefixes.get(&prefix) {
            return Err(format!(
                "network {name} would share the OVN name prefix {prefix} with network {other}"
            ));
        }
        if self.networks.contains_key(&name) {
            return Err(format!(
                "network name {name} is already taken by another object"
            ));
        }
        prefixes.insert(prefix, name.clone());
        self.networks.insert(name, info);
        Ok(())
    }

    /// The nodes whose zone is `zone`; every node when `zone` is `None` (one NB for the
    /// whole cluster).
    pub(crate) fn is_local(&self, node: &NodeInfo, zone: Option<&str>) -> bool {
        zone.is_none_or(|z| node.zone == z)
    }

    /// The network service `svc` is programmed on: its namespace's primary
    /// user-defined network (`None` for the default network's services).
    pub(crate) fn network_of_service(&self, svc: &service::ServiceInfo) -> Option<&str> {
        self.primary_network_of(&svc.namespace)
    }

    /// The endpoint slices of `svc` mirrored for network `net`.
    pub(crate) fn slices_of(
        &self,
        svc: &service::ServiceInfo,
        net: &str,
    ) -> Vec<&service::EndpointSlice> {
        let first = (
            svc.namespace.clone(),
            svc.name.clone(),
            net.to_owned(),
            String::new(),
        );
        self.endpoint_slices
            .range(first..)
            .take_while(|((ns, name, n, _), _)| {
                *ns == svc.namespace && *name == svc.name && n == net
            })
            .map(|(_, slice)| slice)
            .collect()
    }

    /// The primary network of namespace `ns` ([`Inventory::primary_networks`]). A
    /// namespace has at most one; when several claim it, this one is used and the
    /// others are reported ([`Inventory::build`]).
    pub(crate) fn primary_network_of(&self, ns: &str) -> Option<&str> {
        self.primary_networks.get(ns).map(String::as_str)
    }

    /// Every primary network that claims namespace `ns`, the one in force first: its
    /// primary UserDefinedNetworks, then the primary ClusterUserDefinedNetworks that
    /// select it, each in name order.
    pub(crate) fn primary_networks_of(&self, ns: &str) -> Vec<&str> {
        let Some(namespace) = self.namespaces.get(ns) else {
            return Vec::new();
        };
        let labels = namespace.metadata.labels();
        let primary = self
            .networks
            .iter()
            .filter(|(_, n)| n.network.role == Role::Primary);
        let own = primary.clone().filter(|(_, n)| {
            matches!(&n.network.owner, NetworkOwner::UserDefinedNetwork { namespace, .. } if namespace == ns)
        });
        let selecting = primary.filter(|(_, n)| {
            n.namespace_selector
                .as_ref()
                .is_some_and(|sel| sel.matches(labels))
        });
        own.chain(selecting).map(|(k, _)| k.as_str()).collect()
    }

    /// Gives each namespace its primary network, and reports each namespace claimed
    /// by several on each of them.
    fn assign_primary_networks(&mut self) {
        let mut found = Vec::new();
        let mut assigned = BTreeMap::new();
        for ns in self.namespaces.keys() {
            let claims = self.primary_networks_of(ns);
            if let Some(first) = claims.first() {
                assigned.insert(ns.clone(), (*first).to_owned());
            }
            if claims.len() < 2 {
                continue;
            }
            let message = format!(
                "namespace {ns} is selected by several primary networks ({}); a namespace has at most one: it is given {}",
                claims.join(", "),
                claims[0]
            );
            for net in claims {
                let info = &self.networks[net];
                found.push(Problem {
                    origin: info.origin.clone(),
                    object: Some(info.network.owner.to_string()),
                    field: None,
                    message: message.clone(),
                });
            }
        }
        self.problems.extend(found);
        self.primary_networks = assigned;
    }

    /// The networks a ClusterNetworkConnect's selectors select, by name, each once:
    /// ClusterUserDefinedNetworks by their labels (whatever their role and topology, so
    /// that an unsupported one can be refused), and the primary network of each
    /// namespace a namespace selector selects.
    pub(crate) fn selected_networks(&self, cnc: &ClusterNetworkConnect) -> Vec<&str> {
        let mut out = BTreeSet::new();
        for sel in &cnc.spec.network_selectors {
            if let Some(c) = &sel.cluster_user_defined_network_selector {
                for (name, n) in &self.networks {
                    if matches!(
                        n.network.owner,
                        NetworkOwner::ClusterUserDefinedNetwork { .. }
                    ) && c.network_selector.matches(&n.labels)
                    {
                        out.insert(name.as_str());
                    }
                }
            }
            if let Some(p) = &sel.primary_user_defined_network_selector {
                for ns in self.selected_namespaces(&p.namespace_selector) {
                    if let Some(net) = self.primary_network_of(ns) {
                        out.insert(net);
                    }
                }
            }
        }
        out.into_iter().collect()
    }

    /// The namespaces a CUDN selects.
    pub(crate) fn selected_namespaces(&self, selector: &LabelSelector) -> Vec<&str> {
        self.namespaces
            .values()
            .filter(|ns| selector.matches(ns.metadata.labels()))
            .map(|ns| ns.metadata.name())
            .collect()
    }
}

/// Node `node` with its annotations read; `before` (the node as read before) when its
/// object and annotations are the same.
fn node_info(
    origin: &Origin,
    node: &Node,
    context: &Context,
    before: Option<&NodeInfo>,
) -> Result<NodeInfo, BadAnnotation> {
    use annotations::*;
    let before = before.filter(|b| b.object == *node);
    if let Some(before) = before {
        if context.annotations_are("Node", &node.metadata, &before.read) {
            return Ok(NodeInfo {
                origin: origin.clone(),
                ..before.clone()
            });
        }
    }
    let a = context.annotations("Node", &node.metadata);
    if let Some(before) = before {
        // Only allocations differ (the daemon saved what it allocated, a network came
        // or went): every other reading stands, and a node's own allocations alone
        // are read again (a node read whole costs several times its host subnets
        // alone); a node reads no other allocation.
        if same_but(&before.read, &a, ALLOCATIONS) {
            let (node_id, subnets, transit_ifaddr) = allocated(&a)?;
            return Ok(NodeInfo {
                origin: origin.clone(),
                node_id,
                subnets,
                transit_ifaddr,
                read: Arc::new(a),
                ..before.clone()
            });
        }
    }
    let a = Arc::new(a);
    let (node_id, subnets, transit_ifaddr) = allocated(&a)?;
    let gateway = a
        .get(L3_GATEWAY_CONFIG)
        .map(|v| parse_l3_gateway_config(v))
        .transpose()?
        .flatten();
    let host_addresses = a
        .get(HOST_CIDRS)
        .map(|v| parse_host_cidrs(v))
        .transpose()?
        .unwrap_or_default();
    let zone = a
        .get(ZONE_NAME)
        .filter(|z| !z.is_empty())
        .cloned()
        .unwrap_or_else(|| node.metadata.name().to_owned());
    let chassis_id = a.get(NODE_CHASSIS_ID).filter(|c| !c.is_empty()).cloned();
    let gateway_mtu = a.get(GATEWAY_MTU_SUPPORT).is_none_or(|v| v != "false");
    let facts = crate::ovnk::fingerprint((&chassis_id, &gateway, &host_addresses, gateway_mtu));
    Ok(NodeInfo {
        origin: origin.clone(),
        object: node.clone(),
        node_id,
        zone,
        chassis_id,
        subnets,
        transit_ifaddr,
        gateway,
        host_addresses,
        gateway_mtu,
        read: a,
        facts,
    })
}

/// A node's id, host subnets by network name, and transit switch port addresses.
type Allocated = (
    Option<u32>,
    Arc<BTreeMap<String, Vec<IpNet>>>,
    Option<Vec<IpNet>>,
);

/// A node's id, host subnets and transit switch port addresses, from annotations `a`.
/// (An id the allocator cannot keep, 0 and 1 are reserved, is replaced there, not
/// refused here: the node stays.)
fn allocated(a: &BTreeMap<String, String>) -> Result<Allocated, BadAnnotation> {
    use annotations::*;
    let node_id = a.get(NODE_ID).map(|v| parse_id(NODE_ID, v)).transpose()?;
    let subnets = a
        .get(NODE_SUBNETS)
        .map(|v| parse_node_subnets(v))
        .transpose()?
        .unwrap_or_default()
        .into();
    let transit_ifaddr = a
        .get(NODE_TRANSIT_SWITCH_PORT_IFADDR)
        .map(|v| parse_transit_ifaddr(v))
        .transpose()?;
    Ok((node_id, subnets, transit_ifaddr))
}

/// True when maps `a` and `b` hold the same entries but for the keys of `except`.
fn same_but(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>, except: &[&str]) -> bool {
    let kept = |(k, _): &(&String, &String)| !except.contains(&k.as_str());
    a.iter().filter(kept).eq(b.iter().filter(kept))
}

type FieldProblem = (Option<String>, String);

/// A ClusterNetworkConnect's spec and annotations. A spec the CRD's rules refuse leaves
/// the one accepted before in force (returned second); so do changed connect subnets.
fn connect_info(
    origin: &Origin,
    cnc: &ClusterNetworkConnect,
    context: &Context,
) -> Result<(ConnectInfo, Option<validate::FieldError>), FieldProblem> {
    let accepted = context.accepted_connects.get(cnc.metadata.name());
    let (spec, refused) = match (validate::connect_spec(cnc), accepted) {
        (Ok(spec), Some(old)) if spec.connect_subnets != old.connect_subnets => (
            validate::ConnectSpec {
                connect_subnets: old.connect_subnets.clone(),
                ..spec
            },
            Some(validate::FieldError {
                field: "spec.connectSubnets".into(),
                message: "connectSubnets is immutable; the accepted ones stay in force".into(),
            }),
        ),
        (Ok(spec), _) => (spec, None),
        (Err(e), Some(old)) => (
            old.clone(),
            Some(validate::FieldError {
                message: format!("{}; the accepted spec stays in force", e.message),
                ..e
            }),
        ),
        (Err(e), None) => return Err((Some(e.field), e.message)),
    };
    use annotations::*;
    let a = &context.annotations("ClusterNetworkConnect", &cnc.metadata);
    let bad = |e: BadAnnotation| {
        (
            Some(format!("metadata.annotations[{}]", e.key)),
            format!("{:?}: {}", e.value, e.reason),
        )
    };
    let tunnel_key = a
        .get(CONNECT_ROUTER_TUNNEL_KEY)
        .map(|v| parse_id(CONNECT_ROUTER_TUNNEL_KEY, v))
        .transpose()
        .map_err(bad)?;
    let subnets = a
        .get(NETWORK_CONNECT_SUBNET)
        .map(|v| parse_connect_subnets(v))
        .transpose()
        .map_err(bad)?;
    Ok((
        ConnectInfo {
            origin: origin.clone(),
            object: cnc.clone(),
            spec,
            tunnel_key,
            subnets,
        },
        refused,
    ))
}

/// The network of a UDN or CUDN. A definition that breaks the update rules against the
/// accepted one is refused (returned second) and the accepted one kept in force.
fn network_info(
    origin: &Origin,
    object: &Object,
    context: &Context,
) -> Result<(NetworkInfo, Option<validate::FieldError>), FieldProblem> {
    let (meta, parsed, at, selector) = match object {
        Object::UserDefinedNetwork(u) => (&u.metadata, validate::udn_network(u), "spec", None),
        Object::ClusterUserDefinedNetwork(c) => (
            &c.metadata,
            validate::cudn_network(c),
            "spec.network",
            Some(c.spec.namespace_selector.clone()),
        ),
        _ => unreachable!("only network kinds are passed"),
    };
    let as_problem = |e: validate::FieldError| (Some(e.field), e.message);
    let owner = match object {
        Object::UserDefinedNetwork(u) => NetworkOwner::UserDefinedNetwork {
            namespace: u.metadata.namespace().unwrap_or_default().to_owned(),
            name: u.metadata.name().to_owned(),
        },
        _ => NetworkOwner::ClusterUserDefinedNetwork {
            name: meta.name().to_owned(),
        },
    };
    let accepted = context.accepted.get(&owner.network_name());
    // A definition the rules refuse (invalid, or an update they forbid) leaves the one
    // accepted before in force, as the API server would have kept the old object.
    let checked = parsed.and_then(|n| {
        if n.topology != Topology::Localnet {
            validate::check_reserved(&n, &context.reserved, at)?;
        }
        if let Some(old) = accepted {
            validate::check_update(old, &n, at)?;
        }
        Ok(n)
    });
    let (network, refused) = match (checked, accepted) {
        (Ok(n), _) => (n, None),
        (Err(e), Some(old)) => (old.clone(), Some(e)),
        (Err(e), None) => return Err(as_problem(e)),
    };
    use annotations::*;
    let a = &context.annotations(object.kind(), meta);
    let bad = |e: BadAnnotation| {
        (
            Some(format!("metadata.annotations[{}]", e.key)),
            format!("{:?}: {}", e.value, e.reason),
        )
    };
    let network_id = a
        .get(NETWORK_ID)
        .map(|v| parse_id(NETWORK_ID, v))
        .transpose()
        .map_err(bad)?;
    if network_id == Some(0) {
        return Err((
            Some(format!("metadata.annotations[{NETWORK_ID}]")),
            "network id 0 is the default network's".into(),
        ));
    }
    let tunnel_keys = a
        .get(TUNNEL_KEYS)
        .map(|v| parse_tunnel_keys(v))
        .transpose()
        .map_err(bad)?;
    Ok((
        NetworkInfo {
            origin: origin.clone(),
            object: object.clone(),
            network,
            labels: meta.labels().clone(),
            namespace_selector: selector,
            network_id,
            tunnel_keys,
        },
        refused,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn problems(yaml: &str) -> Vec<String> {
        let inv = Inventory::build(
            &[load::parse_file(Path::new("in.yaml"), yaml)],
            &Context::default(),
        );
        inv.problems.iter().map(ToString::to_string).collect()
    }

    fn udn(spec: &str) -> String {
        format!("apiVersion: k8s.ovn.org/v1\nkind: UserDefinedNetwork\nmetadata: {{name: net1, namespace: red}}\nspec: {spec}\n")
    }

    #[test]
    fn a_namespace_claimed_by_two_primary_networks_is_reported_on_both() {
        // Seed 002: at most one primary network per namespace. The namespace's own
        // UserDefinedNetwork is its primary network; both objects are told.
        let yaml = "apiVersion: v1\nkind: Namespace\nmetadata: {name: red, labels: {team: a}}\n---\n".to_string()
            + &udn("{topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 10.1.0.0/16}]}}")
            + "---\napiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {name: wide}\n\
               spec:\n  namespaceSelector: {matchLabels: {team: a}}\n  network: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 10.2.0.0/16}]}}\n";
        let inv = Inventory::build(
            &[load::parse_file(Path::new("in.yaml"), &yaml)],
            &Context::default(),
        );
        assert_eq!(inv.primary_network_of("red"), Some("red_net1"));
        assert_eq!(
            inv.primary_networks_of("red"),
            ["red_net1", "cluster_udn_wide"]
        );
        let message = "namespace red is selected by several primary networks (red_net1, cluster_udn_wide); a namespace has at most one: it is given red_net1";
        let got: Vec<String> = inv.problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            [
                format!("in.yaml doc 2: UserDefinedNetwork red/net1: {message}"),
                format!("in.yaml doc 3: ClusterUserDefinedNetwork wide: {message}"),
            ]
        );
        // Both networks stay in force (the message is a note on their status).
        assert_eq!(inv.networks.len(), 2);
    }

    /// A node's facts hash stands for what the builders read of it besides its name
    /// and allocations: it moves with each of those, and with nothing else.
    #[test]
    fn a_nodes_facts_move_with_what_the_builders_read_of_it_and_nothing_else() {
        let gw = |ip: &str| {
            format!(
                r#"{{"default":{{"mode":"shared","mac-address":"0a:58:c0:a8:7e:ca","ip-addresses":["{ip}/24"],"next-hops":["192.168.126.1"]}}}}"#
            )
        };
        let facts = |annotations: &[(&str, &str)]| {
            let list: Vec<String> = annotations
                .iter()
                .map(|(k, v)| format!("{k}: '{v}'"))
                .collect();
            let yaml = format!(
                "apiVersion: v1\nkind: Node\nmetadata: {{name: n, annotations: {{{}}}}}\n",
                list.join(", ")
            );
            let inv = Inventory::build(
                &[load::parse_file(Path::new("in.yaml"), &yaml)],
                &Context::default(),
            );
            assert!(inv.problems.is_empty(), "{:?}", inv.problems);
            inv.nodes["n"].facts
        };
        let gw1 = gw("192.168.126.202");
        let base = [
            ("k8s.ovn.org/node-chassis-id", "c1"),
            ("k8s.ovn.org/l3-gateway-config", gw1.as_str()),
            ("k8s.ovn.org/host-cidrs", r#"["192.168.126.202/24"]"#),
            ("k8s.ovn.org/gateway-mtu-support", "true"),
            ("k8s.ovn.org/node-id", "4"),
        ];
        let with = |key: &str, value: &str| {
            let mut a = base.to_vec();
            a.iter_mut().find(|(k, _)| *k == key).unwrap().1 = value;
            facts(&a)
        };
        let gw2 = gw("192.168.126.203");
        let moved = [
            ("chassis", with("k8s.ovn.org/node-chassis-id", "c2")),
            ("gateway", with("k8s.ovn.org/l3-gateway-config", &gw2)),
            (
                "host addresses",
                with("k8s.ovn.org/host-cidrs", r#"["192.168.126.203/24"]"#),
            ),
            (
                "MTU support",
                with("k8s.ovn.org/gateway-mtu-support", "false"),
            ),
        ];
        for (what, f) in moved {
            assert_ne!(f, facts(&base), "{what} changed");
        }
        // The node id is an allocation's input, hashed apart; the same text reads the
        // same facts.
        assert_eq!(with("k8s.ovn.org/node-id", "5"), facts(&base));
        assert_eq!(facts(&base), facts(&base));
    }

    #[test]
    fn annotations_told_alike_without_a_copy_are_alike_as_copied() {
        // Every pair of an object's annotations, what is remembered for it and what
        // it was read with, from a few of each: `annotations_are` answers as comparing
        // `annotations` does.
        let subnets = annotations::NODE_SUBNETS;
        let maps: Vec<BTreeMap<String, String>> = [
            vec![],
            vec![("a", "1")],
            vec![("a", "2")],
            vec![("a", "1"), ("b", "1")],
            vec![(subnets, r#"{"x":["10.1.0.0/24"]}"#)],
            vec![(subnets, r#"{"y":["10.2.0.0/24"]}"#), ("a", "1")],
            vec![
                (subnets, r#"{"x":["10.1.0.0/24"],"y":["10.2.0.0/24"]}"#),
                ("a", "1"),
            ],
        ]
        .into_iter()
        .map(|m| {
            m.into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
        .collect();
        let mut alike = 0;
        for own in &maps {
            let meta = ObjectMeta {
                name: Some("n".into()),
                annotations: Some(own.clone()),
                ..Default::default()
            };
            for remembered in [None, Some(0), Some(1), Some(2), Some(3), Some(4), Some(5)] {
                let mut c = Context::default();
                if let Some(r) = remembered {
                    c.remembered.insert(
                        ("Node".into(), "n".into()),
                        Remembered::Annotations(Arc::new(maps[r].clone())),
                    );
                }
                let merged = c.annotations("Node", &meta);
                let mut candidates = maps.clone();
                candidates.push(merged.clone());
                for read in &candidates {
                    let want = merged == *read;
                    assert_eq!(
                        c.annotations_are("Node", &meta, read),
                        want,
                        "own {own:?}, remembered {remembered:?}, read {read:?}"
                    );
                    alike += usize::from(want);
                }
            }
        }
        assert!(alike >= 49, "{alike}");
    }

    /// A node read again with other allocations remembered for it (the daemon saved
    /// those it allocated) reads as it does cold, though only those annotations are
    /// read again; a node whose other annotations changed is read whole.
    #[test]
    fn a_node_read_again_with_new_allocations_reads_as_it_does_cold() {
        let yaml = "apiVersion: v1\nkind: Node\nmetadata: {name: n, annotations: {k8s.ovn.org/node-chassis-id: c1, k8s.ovn.org/host-cidrs: '[\"192.168.1.2/24\"]'}}\n";
        let files = [load::parse_file(Path::new("in.yaml"), yaml)];
        let remembering = |annotations: &[(&str, &str)]| {
            let mut c = Context::default();
            c.remembered.insert(
                ("Node".into(), "n".into()),
                Remembered::Annotations(Arc::new(
                    annotations
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                )),
            );
            c
        };
        let first = Inventory::build(&files, &Context::default());
        let steps = [
            remembering(&[("k8s.ovn.org/node-subnets", r#"{"net1":["10.1.1.0/24"]}"#)]),
            remembering(&[(
                "k8s.ovn.org/node-subnets",
                r#"{"net1":["10.1.1.0/24"],"net2":["10.2.3.0/24"]}"#,
            )]),
            remembering(&[
                ("k8s.ovn.org/node-subnets", r#"{"net2":["10.2.3.0/24"]}"#),
                (
                    "k8s.ovn.org/node-chassis-id",
                    "ignored: the node's own wins",
                ),
                ("k8s.ovn.org/node-id", "7"),
                (
                    "k8s.ovn.org/node-transit-switch-port-ifaddr",
                    r#"{"ipv4":"100.88.0.7/16"}"#,
                ),
            ]),
            remembering(&[("k8s.ovn.org/zone-name", "z1")]),
            Context::default(),
        ];
        let mut previous = first;
        for (i, context) in steps.iter().enumerate() {
            let again = Inventory::build_after(&files, context, Some(&previous));
            let cold = Inventory::build(&files, context);
            assert_eq!(again.nodes, cold.nodes, "step {i}");
            assert!(again.problems.is_empty() && cold.problems.is_empty());
            previous = again;
        }
        assert_eq!(previous.nodes["n"].node_id, None);
        let third = Inventory::build(&files, &steps[2]);
        assert_eq!(third.nodes["n"].node_id, Some(7));
        assert_eq!(third.nodes["n"].subnets.len(), 1);
        assert_eq!(
            third.nodes["n"].transit_ifaddr.as_ref().map(Vec::len),
            Some(1)
        );
        let fourth = Inventory::build(&files, &steps[3]);
        assert_eq!(fourth.nodes["n"].zone, "z1");
    }

    /// Every rule, with the message it gives: each object on its own is refused with
    /// a message naming file, document, object and field.
    #[test]
    fn every_rule_refuses_with_its_message() {
        let l3 = |s: &str| {
            udn(&format!(
                "{{topology: Layer3, layer3: {{role: Primary, subnets: {s}}}}}"
            ))
        };
        let l2 = |rest: &str| {
            udn(&format!(
                "{{topology: Layer2, layer2: {{role: Primary, {rest}}}}}"
            ))
        };
        let cases: Vec<(String, &str)> = vec![
            (l3("[{cidr: 10.1.0.0/17}, {cidr: 10.1.0.0/16}]"), "in.yaml doc 1: UserDefinedNetwork red/net1: spec.layer3.subnets[1]: Subnets must not overlap or contain each other: 10.1.0.0/16 overlaps 10.1.0.0/17"),
            (l3("[{cidr: 10.1.0.0/16}, {cidr: 10.1.0.0/16}]"), "spec.layer3.subnets[1]: Subnets with same CIDR are not allowed"),
            (l3("[{cidr: 10.1.0.0/16, hostSubnet: 24}, {cidr: 10.2.0.0/16, hostSubnet: 26}]"), "spec.layer3.subnets[1].hostSubnet: Subnets from the same IP family must use the same hostSubnet value"),
            (l3("[{cidr: 10.1.0.0/16, hostSubnet: 8}]"), "spec.layer3.subnets[0].hostSubnet: HostSubnet must be smaller than CIDR subnet"),
            (l3("[{cidr: 10.1.0.0/16, hostSubnet: 32}]"), "spec.layer3.subnets[0].hostSubnet: HostSubnet must < 32 for ipv4 CIDR"),
            (l3("[{cidr: 10.1.0.0/16, hostSubnet: 200}]"), "spec.layer3.subnets[0].hostSubnet: 200 is not between 1 and 127"),
            (l3("[{cidr: 10.1.0/16}]"), "spec.layer3.subnets[0].cidr: \"10.1.0/16\" is not a CIDR"),
            (l3("[]"), "spec.layer3.subnets: at least one subnet is required"),
            (l3("[{cidr: 10.96.0.0/12}]"), "spec.layer3.subnets[0].cidr: 10.96.0.0/12 overlaps the service CIDR 10.96.0.0/16"),
            (l3("[{cidr: 169.254.0.0/20}]"), "overlaps the masquerade subnet 169.254.0.0/17"),
            (l3("[{cidr: 100.65.0.0/20}]"), "overlaps the join subnet 100.65.0.0/16"),
            (l3("[{cidr: 10.1.0.0/24}]"), "the default host subnet /24 is not smaller than 10.1.0.0/24; set hostSubnet"),
            (udn("{topology: Layer3, layer3: {role: Secondary, subnets: [{cidr: 10.1.0.0/16}, {cidr: 10.2.0.0/16}]}}"), "When 2 CIDRs are set for Secondary networks, they must be from different IP families"),
            (udn("{topology: Layer3, layer3: {role: Primary, mtu: 100, subnets: [{cidr: 10.1.0.0/16}]}}"), "spec.layer3.mtu: 100 is not between 576 and 65536"),
            (udn("{topology: Layer3, layer3: {role: Primary, mtu: 1000, subnets: [{cidr: \"fd00::/48\"}]}}"), "MTU should be greater than or equal to 1280 when IPv6 subnet is used"),
            (udn("{topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 10.1.0.0/16}], joinSubnets: [100.70.0.0/16, 100.71.0.0/16]}}"), "spec.layer3.joinSubnets: When 2 CIDRs are set, they must be from different IP families"),
            (udn("{topology: Layer3, layer2: {role: Primary, subnets: [10.1.0.0/16]}}"), "spec.layer3: spec.layer3 is required when topology is Layer3 and forbidden otherwise"),
            (udn("{topology: Layer3}"), "spec.layer3: spec.layer3 is required"),
            (udn("{topology: Localnet, localnet: {}}"), "spec.topology: Localnet is only available to ClusterUserDefinedNetworks"),
            (udn("{topology: Layer5}"), "spec.topology: unknown variant `Layer5`"),
            (l2("subnets: [10.1.0.0/16, 10.2.0.0/16]"), "spec.layer2.subnets: When 2 CIDRs are set, they must be from different IP families"),
            (l2("subnets: []"), "spec.layer2.subnets: Subnets is required with ipam.mode is Enabled or unset"),
            (l2("subnets: [10.1.0.0/16], defaultGatewayIPs: [10.2.0.1]"), "spec.layer2.defaultGatewayIPs[0]: defaultGatewayIPs must belong to one of the subnets"),
            (l2("subnets: [10.1.0.0/16, \"fd00::/64\"], defaultGatewayIPs: [10.1.0.1]"), "defaultGatewayIPs must be specified for all IP families"),
            (l2("subnets: [10.1.0.0/16], reservedSubnets: [10.2.0.0/24]"), "spec.layer2.reservedSubnets[0]: reservedSubnets must be subnetworks of the networks specified in the subnets field"),
            (l2("subnets: [10.1.0.0/16], reservedSubnets: [10.1.0.1/24]"), "spec.layer2.reservedSubnets[0]: 10.1.0.1/24 is not a network address"),
            (l2("subnets: [10.1.0.0/16], reservedSubnets: [10.1.0.0/24], infrastructureSubnets: [10.1.0.0/25]"), "infrastructureSubnets and reservedSubnets must not overlap"),
            (l2("subnets: [10.1.0.0/16], infrastructureSubnets: [10.1.1.0/24], defaultGatewayIPs: [10.1.0.1]"), "defaultGatewayIPs have to belong to infrastructureSubnets"),
            (udn("{topology: Layer2, layer2: {role: Secondary, subnets: [10.1.0.0/16], defaultGatewayIPs: [10.1.0.1]}}"), "defaultGatewayIPs is only supported for Primary network"),
            (udn("{topology: Layer2, layer2: {role: Primary, ipam: {mode: Disabled}}}"), "spec.layer2.ipam.mode: Disabled ipam.mode is only supported for Secondary network"),
            (udn("{topology: Layer2, layer2: {role: Secondary, ipam: {mode: Disabled}, subnets: [10.0.0.0/16]}}"), "Subnets must be unset when ipam.mode is Disabled"),
            ("apiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {name: c}\nspec: {namespaceSelector: {matchExpressions: [{key: a, operator: In}]}, network: {topology: Layer2, layer2: {role: Primary, subnets: [10.0.0.0/16]}}}\n".to_string(), "spec.namespaceSelector.matchExpressions[0].values: must be non-empty for operator In"),
            ("apiVersion: v1\nkind: Node\nmetadata: {name: n, annotations: {k8s.ovn.org/node-id: 'one'}}\n".to_string(), "in.yaml doc 1: Node n: metadata.annotations[k8s.ovn.org/node-id]: \"one\""),
            ("apiVersion: v1\nkind: Node\nmetadata: {name: n, annotations: {k8s.ovn.org/node-subnets: 'nope'}}\n".to_string(), "Node n: metadata.annotations[k8s.ovn.org/node-subnets]"),
            ("apiVersion: v1\nkind: Node\nmetadata: {name: n, annotations: {k8s.ovn.org/l3-gateway-config: '{\"default\":{\"mode\":\"shared\",\"mac-address\":\"zz\"}}'}}\n".to_string(), "mac-address \"zz\" is not a MAC address"),
            (udn("{topology: Layer2, layer2: {role: Primary, subnets: [10.0.0.0/16]}}").replace("name: net1,", "name: net1, annotations: {k8s.ovn.org/network-id: '0'},"), "network id 0 is the default network's"),
        ];
        for (yaml, want) in cases {
            let p = problems(&yaml);
            assert_eq!(p.len(), 1, "{yaml}: {p:?}");
            assert!(p[0].contains(want), "{yaml}\nwant: {want}\ngot:  {}", p[0]);
        }
    }

    #[test]
    fn duplicates_and_colliding_prefixes_are_refused_where_they_appear_second() {
        let a = udn("{topology: Layer2, layer2: {role: Primary, subnets: [10.0.0.0/16]}}");
        let p = problems(&format!("{a}---\n{a}"));
        assert_eq!(p.len(), 1);
        assert!(
            p[0].starts_with("in.yaml doc 2: UserDefinedNetwork red/net1: defined more than once"),
            "{}",
            p[0]
        );
        // red/a-b and red/a.b would both be named red_a.b_ in the NB.
        let dash = a.replace("name: net1", "name: a-b");
        let dot = a.replace("name: net1", "name: a.b");
        let p = problems(&format!("{dash}---\n{dot}"));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].contains("would share the OVN name prefix red_a.b_ with network red_a-b"),
            "{}",
            p[0]
        );
    }
}
