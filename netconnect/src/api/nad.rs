//! NetworkAttachmentDefinitions (`k8s.cni.cncf.io/v1`). OVN-Kubernetes renders one for
//! each UserDefinedNetwork (same name and namespace) and one in each namespace a
//! ClusterUserDefinedNetwork selects (the CUDN's name), its `spec.config` the CNI
//! configuration naming the network (`"name": "cluster_udn_blue"`). Its cluster manager
//! keeps each network's id (`k8s.ovn.org/network-id`) and, for a primary Layer2
//! network, its tunnel keys (`k8s.ovn.org/tunnel-keys`) on these, not on the UDN or
//! CUDN (`clustermanager/userdefinednetwork/template/net-attach-def-template.go`,
//! `networkmanager/nad_controller.go`).
//!
//! Read beside the networks, they give the ids OVN-Kubernetes numbered the networks
//! with: a network whose NADs carry its id keeps it instead of being numbered anew
//! (which would change its tunnel keys and masquerade addresses, and cut its traffic
//! when netconnect takes over). A network's own annotation, where it has one, must
//! agree; when it does not, the NADs' id is used and the disagreement reported.

use serde::Deserialize;

use super::annotations::{parse_id, parse_tunnel_keys, NETWORK_ID, TUNNEL_KEYS};
use super::load::{Origin, Problem};
use super::meta::Meta;
use super::objects::NetworkAttachmentDefinition;
use super::Inventory;

/// The CNI plugin type of OVN-Kubernetes' NADs.
pub const OVN_K8S_CNI_OVERLAY: &str = "ovn-k8s-cni-overlay";

/// What one of OVN-Kubernetes' NADs says of its network.
#[derive(Clone, Debug, PartialEq)]
pub struct NadInfo {
    /// Where it was read.
    pub origin: Origin,
    /// `namespace/name`.
    pub name: String,
    /// `k8s.ovn.org/network-id`, if annotated.
    pub network_id: Option<u32>,
    /// `k8s.ovn.org/tunnel-keys`, if annotated.
    pub tunnel_keys: Option<Vec<u32>>,
}

/// The CNI configuration's fields read here.
#[derive(Deserialize)]
struct CniConfig {
    #[serde(default, rename = "type")]
    type_: String,
    #[serde(default)]
    name: String,
}

/// The network `nad` is for, and what it says of it; `Ok(None)` for a NAD of another
/// CNI plugin (left alone). An error names the field.
pub(crate) fn nad_info(
    origin: &Origin,
    nad: &NetworkAttachmentDefinition,
) -> Result<Option<(String, NadInfo)>, (String, String)> {
    let config: CniConfig = serde_json::from_str(&nad.spec.config).map_err(|e| {
        (
            "spec.config".to_owned(),
            format!("not a CNI configuration: {e}"),
        )
    })?;
    if config.type_ != OVN_K8S_CNI_OVERLAY {
        return Ok(None);
    }
    if config.name.is_empty() {
        return Err(("spec.config".into(), "names no network (\"name\")".into()));
    }
    let a = nad.metadata.annotations();
    let field = |key: &str| format!("metadata.annotations[{key}]");
    let network_id = a
        .get(NETWORK_ID)
        .map(|v| parse_id(NETWORK_ID, v))
        .transpose()
        .map_err(|e| (field(NETWORK_ID), format!("{:?}: {}", e.value, e.reason)))?;
    let tunnel_keys = a
        .get(TUNNEL_KEYS)
        .map(|v| parse_tunnel_keys(v))
        .transpose()
        .map_err(|e| (field(TUNNEL_KEYS), format!("{:?}: {}", e.value, e.reason)))?;
    let info = NadInfo {
        origin: origin.clone(),
        name: nad.metadata.qualified_name(),
        network_id,
        tunnel_keys,
    };
    Ok(Some((config.name, info)))
}

impl Inventory {
    /// Gives each network the id and tunnel keys its NADs carry (see the module's
    /// comment), reporting NADs that disagree among themselves or with the network.
    pub(crate) fn take_nad_ids(&mut self) {
        let mut found = Vec::new();
        for (name, info) in self.networks.iter_mut() {
            let Some(nads) = self.nads.get(name) else {
                continue;
            };
            let object = info.network.owner.to_string();
            let origin = info.origin.clone();
            let mut take = |what: &str, theirs: Vec<(&NadInfo, String)>, own: Option<String>| {
                let (first, value) = theirs.first()?;
                for (nad, other) in &theirs[1..] {
                    if other != value {
                        found.push(Problem {
                            origin: nad.origin.clone(),
                            object: Some(format!("NetworkAttachmentDefinition {}", nad.name)),
                            field: None,
                            message: format!(
                                "its {what} {other} differs from {value} of {}, network {name}'s other NetworkAttachmentDefinition: {value} is used",
                                first.name
                            ),
                        });
                    }
                }
                if let Some(own) = own.filter(|own| own != value) {
                    found.push(Problem {
                        origin: origin.clone(),
                        object: Some(object.clone()),
                        field: None,
                        message: format!(
                            "its {what} {own} differs from {value} on its NetworkAttachmentDefinition {}: {value} is used",
                            first.name
                        ),
                    });
                }
                Some(value.clone())
            };
            let ids: Vec<(&NadInfo, String)> = nads
                .iter()
                .filter_map(|n| Some((n, n.network_id?.to_string())))
                .collect();
            let own = info.network_id.map(|i| i.to_string());
            if let Some(id) = take("network id", ids, own) {
                info.network_id = id.parse().ok();
            }
            let keys: Vec<(&NadInfo, String)> = nads
                .iter()
                .filter_map(|n| Some((n, format!("{:?}", n.tunnel_keys.as_ref()?))))
                .collect();
            let own = info.tunnel_keys.as_ref().map(|k| format!("{k:?}"));
            if take("tunnel keys", keys, own).is_some() {
                info.tunnel_keys = nads.iter().find_map(|n| n.tunnel_keys.clone());
            }
        }
        self.problems.extend(found);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::api::load::parse_file;
    use crate::api::{Context, Inventory};

    const CUDN: &str = "apiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {name: blue}\n\
        spec:\n  namespaceSelector: {matchLabels: {team: blue}}\n  network: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 10.1.0.0/16}]}}\n";

    fn nad(ns: &str, network: &str, annotations: &str) -> String {
        format!(
            "---\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\n\
             metadata: {{name: blue, namespace: {ns}, annotations: {{{annotations}}}}}\n\
             spec:\n  config: '{{\"cniVersion\":\"1.0.0\",\"name\":\"{network}\",\"netAttachDefName\":\"{ns}/blue\",\"topology\":\"layer3\",\"type\":\"ovn-k8s-cni-overlay\"}}'\n"
        )
    }

    fn inventory(yaml: &str) -> Inventory {
        Inventory::build(
            &[parse_file(Path::new("m.yaml"), yaml)],
            &Context::default(),
        )
    }

    #[test]
    fn a_network_takes_the_id_its_attachment_definitions_carry() {
        let id = "k8s.ovn.org/network-id: '7'";
        let inv = inventory(&format!(
            "{CUDN}{}{}",
            nad("a", "cluster_udn_blue", id),
            nad("b", "cluster_udn_blue", id)
        ));
        assert!(inv.problems.is_empty(), "{:?}", inv.problems);
        assert_eq!(inv.networks["cluster_udn_blue"].network_id, Some(7));
        // Without one, the network has none (it is allocated one).
        let inv = inventory(&format!("{CUDN}{}", nad("a", "cluster_udn_blue", "")));
        assert_eq!(inv.networks["cluster_udn_blue"].network_id, None);
        // Another network's attachment, or another plugin's, changes nothing.
        let other = "---\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\n\
             metadata: {name: m, namespace: a, annotations: {k8s.ovn.org/network-id: '9'}}\n\
             spec: {config: '{\"cniVersion\":\"0.3.1\",\"name\":\"cluster_udn_blue\",\"type\":\"macvlan\"}'}\n";
        let inv = inventory(&format!(
            "{CUDN}{}{other}",
            nad("a", "cluster_udn_other", id)
        ));
        assert!(inv.problems.is_empty(), "{:?}", inv.problems);
        assert_eq!(inv.networks["cluster_udn_blue"].network_id, None);
    }

    #[test]
    fn attachment_definitions_that_disagree_are_reported_and_theirs_wins() {
        let nads = nad("a", "cluster_udn_blue", "k8s.ovn.org/network-id: '7'")
            + &nad("b", "cluster_udn_blue", "k8s.ovn.org/network-id: '8'");
        let inv = inventory(&format!("{CUDN}{nads}"));
        assert_eq!(inv.networks["cluster_udn_blue"].network_id, Some(7));
        let p: Vec<String> = inv.problems.iter().map(ToString::to_string).collect();
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].contains(
                "NetworkAttachmentDefinition b/blue: its network id 8 differs from 7 of a/blue"
            ),
            "{p:?}"
        );
        // The network's own annotation disagreeing: the attachment's id is used.
        let own = CUDN.replace(
            "metadata: {name: blue}",
            "metadata: {name: blue, annotations: {k8s.ovn.org/network-id: '5'}}",
        );
        let inv = inventory(&format!(
            "{own}{}",
            nad("a", "cluster_udn_blue", "k8s.ovn.org/network-id: '7'")
        ));
        assert_eq!(inv.networks["cluster_udn_blue"].network_id, Some(7));
        let p = inv.problems[0].to_string();
        assert!(p.contains("ClusterUserDefinedNetwork blue: its network id 5 differs from 7 on its NetworkAttachmentDefinition a/blue: 7 is used"), "{p}");
        // A configuration that is not JSON is reported where it is.
        let bad = "---\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\n\
             metadata: {name: x, namespace: a}\nspec: {config: 'nope'}\n";
        let inv = inventory(&format!("{CUDN}{bad}"));
        let p = inv.problems[0].to_string();
        assert!(
            p.contains("NetworkAttachmentDefinition a/x: spec.config: not a CNI configuration"),
            "{p}"
        );
    }
}
