//! Service-only connectivity (docs/ovn-kubernetes.md §5.8): with `ServiceNetwork` but not
//! `PodNetwork`, the routing of [`super`] is still programmed, and three
//! tier-0 ACLs on each connected switch of the zone keep pods of different networks
//! from reaching each other directly:
//!
//! - `pass-service` (500): traffic to a service CIDR passes on to the other tiers;
//! - `pass-same-network-<id>` (475): traffic to the switch's own network passes;
//! - `drop-pod` (450): a new connection to any connected network's subnet is dropped.
//!
//! The connected networks' subnets are address sets named like OVN-Kubernetes names
//! them (`a<FNV-1a 64>` of the set's id), one per family.

use std::collections::BTreeMap;

use nb_model::{Acl, AclAction, AclDirection, AddressSet, LogicalSwitch};
use ovsdb_proto::model::Ref;

use super::{family, Connected};
use crate::ovnk::names::hash_name;
use crate::ovnk::ownership::{CONNECT_CONTROLLER, CONNECT_OWNER_TYPE, IP_FAMILY};
use crate::topology::desired::Desired;
use crate::topology::rows::{ip_match_family, map};
use crate::topology::{cluster, Inputs};

/// The priority of `pass-service`.
pub(crate) const PASS_SERVICE_PRIORITY: i64 = 500;
/// The priority of `pass-same-network-<id>`.
pub(crate) const PASS_SAME_NETWORK_PRIORITY: i64 = 475;
/// The priority of `drop-pod`.
pub(crate) const DROP_POD_PRIORITY: i64 = 450;

/// `external_ids` key: the ACL's type.
pub(crate) const TYPE: &str = "type";

/// The name of CNC `cnc`'s address set of the connected subnets of one family.
pub fn address_set_name(cnc: &str, ipv4: bool) -> String {
    hash_name(&format!(
        "{CONNECT_CONTROLLER}:{CONNECT_OWNER_TYPE}:{cnc}:{}",
        family(ipv4)
    ))
}

fn acl(priority: i64, action: AclAction, m: String, kind: &str) -> Acl {
    Acl {
        priority,
        action,
        direction: AclDirection::FromLport,
        match_: m,
        tier: 0,
        meter: Some(cluster::ACL_LOGGING_METER.into()),
        log: false,
        external_ids: map([(TYPE, kind)]),
        ..Default::default()
    }
}

/// Adds the address sets, the ACLs and their attachments to `d`.
pub(crate) fn build(d: &mut Desired, inputs: &Inputs, cnc: &str, nets: &[Connected]) {
    // Without a switch in the zone, an ACL would have nothing to hold it.
    if nets.iter().all(|c| c.local_switches.is_empty()) {
        return;
    }
    let mut sets: BTreeMap<bool, String> = BTreeMap::new();
    for ipv4 in [true, false] {
        let addresses: Vec<String> = nets
            .iter()
            .flat_map(|c| c.net.subnets_of(ipv4).map(|s| s.cidr.to_string()))
            .collect();
        if addresses.is_empty() {
            continue;
        }
        let name = address_set_name(cnc, ipv4);
        let set = AddressSet {
            name: name.clone(),
            addresses: addresses.into_iter().collect(),
            external_ids: map([(IP_FAMILY, family(ipv4))]),
            ..Default::default()
        };
        d.add(family(ipv4), set);
        sets.insert(ipv4, name);
    }
    let mut shared: Vec<Ref<Acl>> = Vec::new();
    let services: Vec<String> = inputs
        .config
        .service_cidrs
        .iter()
        .map(|s| format!("{}.dst == {s}", ip_match_family(s.addr().is_ipv4())))
        .collect();
    if !services.is_empty() {
        let m = format!("({})", services.join(" || "));
        shared.push(d.add(
            "pass-service",
            acl(PASS_SERVICE_PRIORITY, AclAction::Pass, m, "pass-service"),
        ));
    }
    let dsts: Vec<String> = sets
        .iter()
        .rev()
        .map(|(ipv4, name)| format!("{}.dst == ${name}", ip_match_family(*ipv4)))
        .collect();
    if !dsts.is_empty() {
        let m = if dsts.len() == 1 {
            format!("{} && ct.new", dsts[0])
        } else {
            format!("({}) && ct.new", dsts.join(" || "))
        };
        shared.push(d.add(
            "drop-pod",
            acl(DROP_POD_PRIORITY, AclAction::Drop, m, "drop-pod"),
        ));
    }
    for c in nets.iter().filter(|c| !c.local_switches.is_empty()) {
        let own: Vec<String> = [true, false]
            .iter()
            .flat_map(|ipv4| {
                c.net
                    .subnets_of(*ipv4)
                    .map(move |s| format!("{}.dst == {}", ip_match_family(*ipv4), s.cidr))
            })
            .collect();
        let kind = format!("pass-same-network-{}", c.id);
        let same = d.add(
            kind.clone(),
            acl(
                PASS_SAME_NETWORK_PRIORITY,
                AclAction::Pass,
                own.join(" || "),
                &kind,
            ),
        );
        for switch in &c.local_switches {
            for a in shared.iter().chain([&same]) {
                d.attach::<LogicalSwitch, _>(switch, "acls", a);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_set_names_are_ovn_kubernetes_hashes() {
        // docs/ovn-kubernetes.md §1.3.
        assert_eq!(
            address_set_name("partial-cnc", true),
            "a8754569580458222878"
        );
        assert_eq!(
            address_set_name("partial-cnc", false),
            "a8754567381434966456"
        );
        assert_eq!(address_set_name("test-cnc", true), "a703533884389692937");
    }
}
