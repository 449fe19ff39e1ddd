//! ClusterIP services across connected networks (docs/ovn-kubernetes.md §5.7): a load balancer
//! group `cnc_svc_<cnc>` holding every connected network's ClusterIP load balancers, on
//! each connected network's switches in the zone.
//!
//! The load balancers are OVN-Kubernetes' services controller's; they are found in the
//! NB by their `external_ids` (`k8s.ovn.org/kind=Service`,
//! `k8s.ovn.org/network=<network>`) and their name's `_cluster` ending, when the key is
//! reconciled, and the group follows them as they come and go.

use nb_model::{LoadBalancer, LoadBalancerGroup, LogicalSwitch};

use super::Connected;
use crate::topology::desired::{Desired, Selection};

/// `cnc_svc_<cnc>`.
pub(crate) fn lb_group_name(cnc: &str) -> String {
    format!("cnc_svc_{cnc}")
}

/// The ClusterIP load balancers of network `net`.
pub(crate) fn cluster_ip_load_balancers(net: &str) -> Selection {
    Selection {
        table: "Load_Balancer",
        external_ids: vec![
            ("k8s.ovn.org/kind".into(), "Service".into()),
            (nb_model::keys::ovn_k8s::NETWORK.into(), net.into()),
        ],
        name_suffix: "_cluster".into(),
    }
}

/// Adds the group and its attachments to `d`.
pub(crate) fn build(d: &mut Desired, cnc: &str, nets: &[Connected]) {
    let name = lb_group_name(cnc);
    let mut group = LoadBalancerGroup {
        name: name.clone(),
        ..Default::default()
    };
    for c in nets {
        group
            .load_balancer
            .insert(d.select::<LoadBalancer>(cluster_ip_load_balancers(&c.name)));
    }
    let r = d.add_exclusive(name, group);
    for c in nets {
        for switch in &c.local_switches {
            d.attach::<LogicalSwitch, _>(switch, "load_balancer_group", &r);
        }
    }
}
