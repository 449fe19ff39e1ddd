//! A ClusterNetworkConnect's conditions as OKEP-5224 describes them (and
//! OVN-Kubernetes only half writes): `Accepted` from the cluster manager's checks,
//! `Ready-In-Zone-<zone>` from each zone's reconcile, and `status.status`, `Success`
//! when every condition is `True`, `Failure` otherwise. A condition's
//! `lastTransitionTime` changes only when its `status` flips.

use crate::alloc::admission::Refusal;
use crate::api::objects::ClusterNetworkConnectStatus;
use crate::api::Condition;

/// The cluster manager's condition.
pub(crate) const ACCEPTED: &str = "Accepted";
/// `Accepted`'s reason when every check passed.
pub(crate) const VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
/// `Ready-In-Zone-<zone>`'s reason when the zone holds every row.
pub(crate) const OVN_SETUP_SUCCEEDED: &str = "OVNSetupSucceeded";
/// `Ready-In-Zone-<zone>`'s reason when it does not.
pub(crate) const OVN_SETUP_FAILED: &str = "OVNSetupFailed";
/// The zone name used when one NB serves the whole cluster (OVN-Kubernetes' default).
pub(crate) const GLOBAL_ZONE: &str = "global";

/// The condition type of zone `zone`.
pub(crate) fn ready_type(zone: &str) -> String {
    format!("Ready-In-Zone-{zone}")
}

/// The current time as Kubernetes writes it (RFC 3339, seconds, UTC).
pub fn now() -> String {
    let t = time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or_else(|_| time::OffsetDateTime::now_utc());
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// The `Accepted` condition for the cluster manager's decision.
pub fn accepted(decision: &Result<(), Refusal>) -> Condition {
    match decision {
        Ok(()) => Condition {
            type_: ACCEPTED.into(),
            status: "True".into(),
            reason: VALIDATION_SUCCEEDED.into(),
            message: "All validation checks passed successfully".into(),
            last_transition_time: String::new(),
            observed_generation: None,
        },
        Err(r) => Condition {
            type_: ACCEPTED.into(),
            status: "False".into(),
            reason: r.reason.to_string(),
            message: r.message.clone(),
            last_transition_time: String::new(),
            observed_generation: None,
        },
    }
}

/// The `Ready-In-Zone-<zone>` condition for the outcome of reconciling the CNC in the
/// zone: `Ok` with what could not be built (nothing, when complete), or the error.
pub fn ready(zone: &str, outcome: &Result<Vec<String>, String>) -> Condition {
    let (status, reason, message) = match outcome {
        Ok(missing) if missing.is_empty() => (
            "True",
            OVN_SETUP_SUCCEEDED,
            "Connect router and all ports created successfully".to_owned(),
        ),
        Ok(missing) => (
            "False",
            OVN_SETUP_FAILED,
            format!("Incomplete: {}", missing.join("; ")),
        ),
        Err(e) => ("False", OVN_SETUP_FAILED, e.clone()),
    };
    Condition {
        type_: ready_type(zone),
        status: status.into(),
        reason: reason.into(),
        message,
        last_transition_time: String::new(),
        observed_generation: None,
    }
}

/// A zone's `Ready-In-Zone-<zone>` condition for a connect whose `Accepted` is False:
/// a refused connect connects nothing new, but what its last accepted definition
/// programmed stays, so the message says so and names the networks still connected
/// (`held`, from the connect's `k8s.ovn.org/network-connect-subnet` annotation), lest
/// `Ready: True` beside `Accepted: False` read as "the refused change is in force".
pub(crate) fn ready_while_refused(condition: &mut Condition, held: &[String]) {
    let what = if held.is_empty() {
        "nothing is programmed (no definition was ever accepted)".to_owned()
    } else {
        format!(
            "what is programmed is the last accepted definition, connecting {}",
            held.join(", ")
        )
    };
    condition.message = format!(
        "{}; the connect is not accepted, so its current definition is not programmed: {what}",
        condition.message
    );
}

/// Puts `condition` into `status`, replacing the one of its type; its
/// `lastTransitionTime` is `now` if its status flipped (or it is new), else the
/// previous one. `status.status` is recomputed. True when anything changed.
pub fn set(status: &mut ClusterNetworkConnectStatus, condition: Condition, now: &str) -> bool {
    let before = status.clone();
    put(&mut status.conditions, condition, now);
    summarize(status);
    *status != before
}

/// Puts `condition` into `conditions`, replacing the one of its type; its
/// `lastTransitionTime` is `now` if its status flipped (or it is new), else the
/// previous one.
pub fn put(conditions: &mut Vec<Condition>, mut condition: Condition, now: &str) {
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(old) => {
            condition.last_transition_time = if old.status == condition.status {
                old.last_transition_time.clone()
            } else {
                now.to_owned()
            };
            *old = condition;
        }
        None => {
            condition.last_transition_time = now.to_owned();
            conditions.push(condition);
        }
    }
}

/// Orders the conditions (`Accepted` first, then the zones by name) and sets
/// `status.status` from them.
pub(crate) fn summarize(status: &mut ClusterNetworkConnectStatus) {
    status
        .conditions
        .sort_by(|a, b| (a.type_ != ACCEPTED, &a.type_).cmp(&(b.type_ != ACCEPTED, &b.type_)));
    let ok = !status.conditions.is_empty() && status.conditions.iter().all(|c| c.status == "True");
    status.status = Some(if ok { "Success" } else { "Failure" }.into());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::admission::Reason;

    #[test]
    fn transition_times_change_only_on_a_flip_and_status_follows_every_condition() {
        let mut s = ClusterNetworkConnectStatus::default();
        assert!(set(&mut s, accepted(&Ok(())), "t1"));
        assert_eq!(s.status.as_deref(), Some("Success"));
        assert!(set(&mut s, ready("node-b", &Ok(vec![])), "t1"));
        assert!(set(
            &mut s,
            ready("node-a", &Err("waiting for Logical_Router x".into())),
            "t2"
        ));
        assert_eq!(s.status.as_deref(), Some("Failure"));
        let types: Vec<&str> = s.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(
            types,
            ["Accepted", "Ready-In-Zone-node-a", "Ready-In-Zone-node-b"]
        );
        // The same status again: no change, times kept.
        assert!(!set(&mut s, accepted(&Ok(())), "t3"));
        assert_eq!(s.conditions[0].last_transition_time, "t1");
        // A flip moves the time.
        assert!(set(&mut s, ready("node-a", &Ok(vec![])), "t4"));
        assert_eq!(s.conditions[1].last_transition_time, "t4");
        assert_eq!(s.conditions[1].reason, OVN_SETUP_SUCCEEDED);
        assert_eq!(s.status.as_deref(), Some("Success"));
        let refused = Refusal {
            reason: Reason::InsufficientNetworks,
            message: "Only 1 network".into(),
        };
        assert!(set(&mut s, accepted(&Err(refused)), "t5"));
        assert_eq!(s.conditions[0].reason, "InsufficientNetworks");
        assert_eq!(s.conditions[0].last_transition_time, "t5");
        assert_eq!(s.status.as_deref(), Some("Failure"));
        // A message change without a flip keeps the time.
        let other = Refusal {
            reason: Reason::ConnectSubnetOverlap,
            message: "other".into(),
        };
        assert!(set(&mut s, accepted(&Err(other)), "t6"));
        assert_eq!(s.conditions[0].last_transition_time, "t5");
    }

    #[test]
    fn a_zone_of_a_refused_connect_says_it_holds_the_last_accepted_definition() {
        let mut c = ready("node-a", &Ok(vec![]));
        ready_while_refused(
            &mut c,
            &["cluster_udn_blue".into(), "cluster_udn_red".into()],
        );
        assert_eq!(c.status, "True");
        assert_eq!(
            c.message,
            "Connect router and all ports created successfully; the connect is not accepted, so its current definition is not programmed: what is programmed is the last accepted definition, connecting cluster_udn_blue, cluster_udn_red"
        );
        let mut c = ready("node-a", &Ok(vec![]));
        ready_while_refused(&mut c, &[]);
        assert!(
            c.message
                .ends_with("nothing is programmed (no definition was ever accepted)"),
            "{}",
            c.message
        );
    }

    #[test]
    fn now_is_rfc3339_in_seconds() {
        let t = now();
        assert_eq!(t.len(), "2026-11-22T21:00:00Z".len(), "{t}");
        assert!(t.ends_with('Z'), "{t}");
    }
}
