//! A UserDefinedNetwork's or ClusterUserDefinedNetwork's status, with the condition
//! types OVN-Kubernetes writes, so that whatever waits on them works unchanged:
//!
//! - `NetworkCreated`: `True` while the network is in force (a refused update leaves
//!   the accepted definition in force, and says so in the message), `False` with
//!   reason `SyncError` and every reason when the object was refused.
//! - `NetworkAllocationSucceeded`: `True` once the network got its ids and every node
//!   its subnets, `False` with what failed; absent on a refused network.
//!
//! OVN-Kubernetes' cluster manager reports `NetworkCreated` once it has written the
//! network's NetworkAttachmentDefinitions (reason `NetworkAttachmentDefinitionCreated`).
//! netconnectd writes none (it programs OVN directly), so its reason is
//! `NetworkAccepted`; a ClusterUserDefinedNetwork's message lists the namespaces it
//! selects, as OVN-Kubernetes' does.

use crate::api::objects::NetworkStatus;
use crate::api::Condition;

/// The condition telling whether the network is in force.
pub(crate) const NETWORK_CREATED: &str = "NetworkCreated";
/// The condition telling whether every allocation of the network succeeded.
pub(crate) const NETWORK_ALLOCATION_SUCCEEDED: &str = "NetworkAllocationSucceeded";
/// `NetworkCreated`'s reason for a network in force.
pub(crate) const NETWORK_ACCEPTED: &str = "NetworkAccepted";
/// `NetworkCreated`'s reason for a refused network (OVN-Kubernetes' reason too).
pub(crate) const SYNC_ERROR: &str = "SyncError";
/// `NetworkAllocationSucceeded`'s reason when some allocation failed.
pub(crate) const ALLOCATION_FAILED: &str = "NetworkAllocationFailed";

/// What became of a network object.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Its definition (or the one accepted before) is in force.
    InForce {
        /// For a ClusterUserDefinedNetwork, the namespaces it selects.
        namespaces: Option<Vec<String>>,
        /// What was refused of it without refusing it (an update the rules forbid).
        notes: Vec<String>,
        /// The allocations that failed (a node without a host subnet, …).
        allocation: Vec<String>,
    },
    /// It was refused, for these reasons.
    Refused(Vec<String>),
}

fn condition(type_: &str, ok: bool, reason: &str, message: String) -> Condition {
    Condition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
        last_transition_time: String::new(),
        observed_generation: None,
    }
}

/// The conditions of a network with `verdict`.
pub fn conditions(verdict: &Verdict) -> Vec<Condition> {
    match verdict {
        Verdict::Refused(why) => vec![condition(
            NETWORK_CREATED,
            false,
            SYNC_ERROR,
            why.join("; "),
        )],
        Verdict::InForce {
            namespaces,
            notes,
            allocation,
        } => {
            let mut message = match namespaces {
                Some(ns) => format!(
                    "Network accepted for the selected namespaces: [{}]",
                    ns.join(", ")
                ),
                None => "Network accepted".to_owned(),
            };
            for n in notes {
                message.push_str("; ");
                message.push_str(n);
            }
            let allocated = if allocation.is_empty() {
                condition(
                    NETWORK_ALLOCATION_SUCCEEDED,
                    true,
                    NETWORK_ALLOCATION_SUCCEEDED,
                    "Network allocation succeeded for all synced nodes.".into(),
                )
            } else {
                condition(
                    NETWORK_ALLOCATION_SUCCEEDED,
                    false,
                    ALLOCATION_FAILED,
                    allocation.join("; "),
                )
            };
            vec![
                condition(NETWORK_CREATED, true, NETWORK_ACCEPTED, message),
                allocated,
            ]
        }
    }
}

/// `status` with the conditions of `verdict` as of `now`: each condition's
/// `lastTransitionTime` moves only when its status flips; conditions of other types
/// (written by someone else) stay; `NetworkAllocationSucceeded` goes when the network
/// is refused.
pub fn apply(status: &NetworkStatus, verdict: &Verdict, now: &str) -> NetworkStatus {
    let mut out = status.clone();
    let new = conditions(verdict);
    out.conditions.retain(|c| {
        c.type_ != NETWORK_ALLOCATION_SUCCEEDED || new.iter().any(|n| n.type_ == c.type_)
    });
    for c in new {
        super::put(&mut out.conditions, c, now);
    }
    out
}

/// True when a status says its network was refused (`NetworkCreated` is `False`): the
/// definition it carries was never in force.
pub(crate) fn is_refused(status: Option<&NetworkStatus>) -> bool {
    status
        .iter()
        .flat_map(|s| &s.conditions)
        .any(|c| c.type_ == NETWORK_CREATED && c.status == "False")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_force(allocation: &[&str]) -> Verdict {
        Verdict::InForce {
            namespaces: Some(vec!["a".into(), "b".into()]),
            notes: vec![],
            allocation: allocation.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_network_in_force_and_allocated_is_created_and_allocated() {
        let s = apply(&NetworkStatus::default(), &in_force(&[]), "t1");
        let c: Vec<(&str, &str, &str)> = s
            .conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
            .collect();
        assert_eq!(
            c,
            [
                ("NetworkCreated", "True", "NetworkAccepted"),
                (
                    "NetworkAllocationSucceeded",
                    "True",
                    "NetworkAllocationSucceeded"
                )
            ]
        );
        assert_eq!(
            s.conditions[0].message,
            "Network accepted for the selected namespaces: [a, b]"
        );
        assert!(s.conditions.iter().all(|c| c.last_transition_time == "t1"));
        assert!(!is_refused(Some(&s)));
    }

    #[test]
    fn times_move_only_on_a_flip_and_a_refusal_drops_the_allocation_condition() {
        let s = apply(&NetworkStatus::default(), &in_force(&[]), "t1");
        let s = apply(
            &s,
            &in_force(&["no IPv4 host subnet for node n9: full"]),
            "t2",
        );
        assert_eq!(s.conditions[0].last_transition_time, "t1");
        assert_eq!(s.conditions[1].status, "False");
        assert_eq!(s.conditions[1].reason, ALLOCATION_FAILED);
        assert_eq!(s.conditions[1].last_transition_time, "t2");
        let s = apply(&s, &Verdict::Refused(vec!["x".into(), "y".into()]), "t3");
        assert_eq!(s.conditions.len(), 1);
        assert_eq!(s.conditions[0].status, "False");
        assert_eq!(s.conditions[0].reason, SYNC_ERROR);
        assert_eq!(s.conditions[0].message, "x; y");
        assert_eq!(s.conditions[0].last_transition_time, "t3");
        assert!(is_refused(Some(&s)));
    }

    #[test]
    fn conditions_written_by_others_stay() {
        let mut s = NetworkStatus::default();
        s.conditions
            .push(condition("TransportAccepted", true, "Ok", "m".into()));
        let s = apply(&s, &Verdict::Refused(vec!["x".into()]), "t1");
        assert!(s.conditions.iter().any(|c| c.type_ == "TransportAccepted"));
    }
}
