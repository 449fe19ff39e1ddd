//! A ClusterNetworkConnect's events, where its status goes: each time one of its
//! conditions (`Accepted`, `Ready-In-Zone-<zone>`) changes status, reason or message,
//! an event is recorded in `Event/ClusterNetworkConnect/<name>.yaml` of the status
//! directory, as `kubectl get events -o yaml` prints `v1 Event`s (a `kind: List`):
//! `type` (`Normal` for a condition that holds, `Warning` for one that does not),
//! `reason`, `message`, `count`, `firstTimestamp`, `lastTimestamp` and the object it
//! is about, what `kubectl describe` lists. The same event again counts up and moves
//! its last time; the newest [`KEPT`] are kept. There is no API server here to send
//! them to; a watcher that has one would post these.

use std::io;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::Condition;

/// How many events of one connect are kept.
pub const KEPT: usize = 20;

/// The file of connect `cnc`'s events in `dir`.
pub(crate) fn path(dir: &Path, cnc: &str) -> PathBuf {
    dir.join("Event")
        .join("ClusterNetworkConnect")
        .join(format!("{cnc}.yaml"))
}

/// The events of connect `cnc` in `dir`, oldest first (none when there is no file or
/// it cannot be read).
pub fn read(dir: &Path, cnc: &str) -> Vec<Event> {
    let Ok(text) = std::fs::read_to_string(path(dir, cnc)) else {
        return Vec::new();
    };
    let list: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap_or_default();
    list.get("items")
        .and_then(|i| serde_json::from_value(i.clone()).ok())
        .unwrap_or_default()
}

/// Records the events of connect `cnc` whose conditions went from `before` to `after`
/// (of the types in `after`) as of `now` (RFC 3339). The caller holds the directory's
/// lock.
pub(crate) fn record(
    dir: &Path,
    cnc: &str,
    before: &[Condition],
    after: &[Condition],
    now: &str,
) -> io::Result<()> {
    let changed: Vec<&Condition> = after
        .iter()
        .filter(|c| {
            !before.iter().any(|b| {
                b.type_ == c.type_
                    && b.status == c.status
                    && b.reason == c.reason
                    && b.message == c.message
            })
        })
        .collect();
    if changed.is_empty() {
        return Ok(());
    }
    let mut events = read(dir, cnc);
    let time = || now.parse::<k8s_openapi::jiff::Timestamp>().ok().map(Time);
    for c in changed {
        let kind = if c.status == "True" {
            "Normal"
        } else {
            "Warning"
        };
        let message = format!("{}: {}", c.type_, c.message);
        let same = events.iter_mut().find(|e| {
            e.type_.as_deref() == Some(kind)
                && e.reason.as_deref() == Some(c.reason.as_str())
                && e.message.as_deref() == Some(message.as_str())
        });
        match same {
            Some(e) => {
                e.count = Some(e.count.unwrap_or(1) + 1);
                e.last_timestamp = time();
            }
            None => events.push(Event {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: Some(format!("{cnc}.{}", events.len() + 1)),
                    namespace: Some("default".into()),
                    ..Default::default()
                },
                involved_object: ObjectReference {
                    api_version: Some("k8s.ovn.org/v1".into()),
                    kind: Some("ClusterNetworkConnect".into()),
                    name: Some(cnc.into()),
                    ..Default::default()
                },
                type_: Some(kind.into()),
                reason: Some(c.reason.clone()),
                message: Some(message),
                count: Some(1),
                first_timestamp: time(),
                last_timestamp: time(),
                source: Some(EventSource {
                    component: Some("netconnectd".into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        }
    }
    // The ones touched last stay.
    events.sort_by(|a, b| a.last_timestamp.cmp(&b.last_timestamp));
    if events.len() > KEPT {
        events.drain(..events.len() - KEPT);
    }
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": events});
    let text = serde_yaml_ng::to_string(&list).map_err(io::Error::other)?;
    super::write_atomically(&path(dir, cnc), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: String::new(),
            observed_generation: None,
        }
    }

    #[test]
    fn a_condition_that_changes_is_an_event_and_the_same_again_counts_up() {
        let dir = tempfile::tempdir().unwrap();
        let ok = condition("Ready-In-Zone-a", "True", "OVNSetupSucceeded", "done");
        let bad = condition(
            "Ready-In-Zone-a",
            "False",
            "OVNSetupFailed",
            "router missing",
        );
        let one = std::slice::from_ref;
        record(dir.path(), "c", &[], one(&bad), "2026-11-28T10:00:00Z").unwrap();
        record(dir.path(), "c", one(&bad), one(&ok), "2026-11-28T10:01:00Z").unwrap();
        // Unchanged: nothing recorded.
        record(dir.path(), "c", one(&ok), one(&ok), "2026-11-28T10:02:00Z").unwrap();
        record(dir.path(), "c", one(&ok), one(&bad), "2026-11-28T10:03:00Z").unwrap();
        let events = read(dir.path(), "c");
        let seen: Vec<(String, String, i32)> = events
            .iter()
            .map(|e| {
                (
                    e.type_.clone().unwrap(),
                    e.reason.clone().unwrap(),
                    e.count.unwrap(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("Normal".into(), "OVNSetupSucceeded".into(), 1),
                ("Warning".into(), "OVNSetupFailed".into(), 2),
            ]
        );
        let failed = &events[1];
        assert_eq!(
            failed.message.as_deref(),
            Some("Ready-In-Zone-a: router missing")
        );
        assert_eq!(
            failed.first_timestamp.as_ref().unwrap().0.to_string(),
            "2026-11-28T10:00:00Z"
        );
        assert_eq!(
            failed.last_timestamp.as_ref().unwrap().0.to_string(),
            "2026-11-28T10:03:00Z"
        );
        assert_eq!(failed.involved_object.name.as_deref(), Some("c"));
    }
}
