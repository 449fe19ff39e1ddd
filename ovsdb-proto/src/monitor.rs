//! Monitor requests and the table updates the server sends back (RFC 7047 §4.1.5–4.1.7,
//! and the `update2`/`update3` forms of the OVS extensions).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::datum::Row;

/// Which kinds of change a monitor reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MonitorSelect {
    /// The rows present when the monitor starts.
    pub initial: bool,
    /// Inserted rows.
    pub insert: bool,
    /// Deleted rows.
    pub delete: bool,
    /// Modified rows.
    pub modify: bool,
}

impl Default for MonitorSelect {
    fn default() -> Self {
        MonitorSelect {
            initial: true,
            insert: true,
            delete: true,
            modify: true,
        }
    }
}

/// What to monitor in one table.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MonitorRequest {
    /// The columns; every column when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub columns: Option<Vec<String>>,
    /// Which changes; all of them when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub select: Option<MonitorSelect>,
    /// For `monitor_cond` and `monitor_cond_since`: only rows meeting every condition
    /// are reported (all rows when `None`). Plain `monitor` takes none.
    #[serde(rename = "where", skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<crate::ops::Condition>>,
}

impl MonitorRequest {
    /// All columns, all changes.
    pub fn all() -> MonitorRequest {
        MonitorRequest::default()
    }

    /// The given columns, all changes.
    pub fn columns<S: Into<String>>(columns: impl IntoIterator<Item = S>) -> MonitorRequest {
        MonitorRequest {
            columns: Some(columns.into_iter().map(Into::into).collect()),
            ..Default::default()
        }
    }

    /// Only rows meeting every one of `conditions` (for `monitor_cond`).
    pub fn matching(mut self, conditions: Vec<crate::ops::Condition>) -> MonitorRequest {
        self.conditions = Some(conditions);
        self
    }
}

/// One row's change in an `update` notification or `monitor` reply.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct RowUpdate {
    /// The row before the change (the changed columns, for a modification); absent for
    /// an insert.
    #[serde(default)]
    pub old: Option<Row>,
    /// The row after the change; absent for a delete.
    #[serde(default)]
    pub new: Option<Row>,
}

/// Changes to one table, by row uuid.
pub type TableUpdate = HashMap<Uuid, RowUpdate>;

/// Changes to every monitored table, by table name.
pub type TableUpdates = BTreeMap<String, TableUpdate>;

/// One row's change in the `update2` form.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RowUpdate2 {
    /// A row present when the monitor started.
    Initial(Row),
    /// A new row.
    Insert(Row),
    /// A modification: for each changed column, for a set the elements to add or remove
    /// (symmetric difference), for a map the pairs to set or the keys to remove, for a
    /// scalar the new value.
    Modify(Row),
    /// A deleted row.
    Delete,
}

/// Changes to one table in the `update2` form.
pub type TableUpdate2 = HashMap<Uuid, RowUpdate2>;

/// Changes to every monitored table in the `update2` form.
pub type TableUpdates2 = BTreeMap<String, TableUpdate2>;

/// The reply to `monitor_cond_since`.
#[derive(Clone, Debug, PartialEq)]
pub struct MonitorSince {
    /// True when the server still had the transaction given, so `updates` holds only
    /// the changes after it; false when `updates` is the whole initial contents.
    pub found: bool,
    /// The id of the last transaction the reply includes.
    pub last_txn_id: Uuid,
    /// The changes (or initial contents).
    pub updates: TableUpdates2,
}

/// A notification as it came: its method and the JSON text of its params, decoded
/// when asked ([`RawNotification::decode`]), so that a reader with its own decoder (the
/// cache, straight into its rows) reads the params once.
#[derive(Clone, Debug, PartialEq)]
pub struct RawNotification {
    /// The method, e.g. `update3`.
    pub method: String,
    /// The params array as JSON text.
    pub params: bytes::Bytes,
}

impl RawNotification {
    /// The notification decoded; a malformed one is an error naming the method.
    pub fn decode(&self) -> Result<Notification, NotificationError> {
        Notification::decode(&self.method, &self.params)
    }
}

/// A notification whose params do not decode as its method's.
#[derive(Debug, thiserror::Error)]
#[error("malformed {method} notification: {source}")]
pub struct NotificationError {
    /// The notification's method.
    pub method: String,
    /// What the JSON decoder said.
    #[source]
    pub source: serde_json::Error,
}

/// A message the server sent without being asked.
#[derive(Clone, Debug, PartialEq)]
pub enum Notification {
    /// `update`: changes seen by a `monitor`.
    Update {
        /// The id the monitor was created with.
        monitor_id: serde_json::Value,
        /// The changes.
        updates: TableUpdates,
    },
    /// `update2`: changes seen by a `monitor_cond`.
    Update2 {
        /// The id the monitor was created with.
        monitor_id: serde_json::Value,
        /// The changes.
        updates: TableUpdates2,
    },
    /// `update3`: changes seen by a `monitor_cond_since`, with the transaction id after them.
    Update3 {
        /// The id the monitor was created with.
        monitor_id: serde_json::Value,
        /// The id of the last transaction these changes include.
        last_txn_id: Uuid,
        /// The changes.
        updates: TableUpdates2,
    },
    /// `locked`: a lock this client waited for is now held.
    Locked(String),
    /// `stolen`: another client stole a lock this client held.
    Stolen(String),
    /// `monitor_canceled`: the server ended a monitor (e.g. the database was converted).
    MonitorCanceled(serde_json::Value),
    /// Any other notification, passed through as received.
    Other {
        /// The method name.
        method: String,
        /// The params.
        params: serde_json::Value,
    },
}

impl Notification {
    /// Decodes a notification's params by its method name.
    pub fn decode(method: &str, params: &[u8]) -> Result<Notification, NotificationError> {
        let bad = |source: serde_json::Error| NotificationError {
            method: method.to_owned(),
            source,
        };
        Ok(match method {
            "update" => {
                let (monitor_id, updates): (serde_json::Value, TableUpdates) =
                    serde_json::from_slice(params).map_err(bad)?;
                Notification::Update {
                    monitor_id,
                    updates,
                }
            }
            "update2" => {
                let (monitor_id, updates): (serde_json::Value, TableUpdates2) =
                    serde_json::from_slice(params).map_err(bad)?;
                Notification::Update2 {
                    monitor_id,
                    updates,
                }
            }
            "update3" => {
                let (monitor_id, last_txn_id, updates): (serde_json::Value, Uuid, TableUpdates2) =
                    serde_json::from_slice(params).map_err(bad)?;
                Notification::Update3 {
                    monitor_id,
                    last_txn_id,
                    updates,
                }
            }
            "locked" | "stolen" => {
                let (name,): (String,) = serde_json::from_slice(params).map_err(bad)?;
                if method == "locked" {
                    Notification::Locked(name)
                } else {
                    Notification::Stolen(name)
                }
            }
            "monitor_canceled" => {
                let (id,): (serde_json::Value,) = serde_json::from_slice(params).map_err(bad)?;
                Notification::MonitorCanceled(id)
            }
            _ => Notification::Other {
                method: method.to_owned(),
                params: serde_json::from_slice(params).map_err(bad)?,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datum::Datum;

    #[test]
    fn update_notifications_decode_every_row_change() {
        let params = br#"["m1",{"Logical_Switch":{
            "005fc7ab-9549-4df1-aaf9-5d907d5e2675":{"new":{"name":"a"}},
            "9122c6b9-1625-4ec4-9104-ec76ef5efc17":{"old":{"name":"b"}},
            "54ba6785-0e66-4d1b-9a26-e252dddaeae3":{"old":{"name":"c"},"new":{"name":"d"}}}}]"#;
        let Notification::Update {
            monitor_id,
            updates,
        } = Notification::decode("update", params).unwrap()
        else {
            panic!("not an update")
        };
        assert_eq!(monitor_id, serde_json::json!("m1"));
        let ls = &updates["Logical_Switch"];
        assert_eq!(ls.len(), 3);
        let ins = &ls[&"005fc7ab-9549-4df1-aaf9-5d907d5e2675"
            .parse::<Uuid>()
            .unwrap()];
        assert!(ins.old.is_none());
        assert_eq!(ins.new.as_ref().unwrap()["name"], Datum::scalar("a"));
    }

    #[test]
    fn update2_and_update3_decode() {
        let p = br#"[null,{"T":{"005fc7ab-9549-4df1-aaf9-5d907d5e2675":{"modify":{"s":["set",[1,2]]}},"9122c6b9-1625-4ec4-9104-ec76ef5efc17":{"delete":null}}}]"#;
        let Notification::Update2 { updates, .. } = Notification::decode("update2", p).unwrap()
        else {
            panic!()
        };
        assert_eq!(updates["T"].len(), 2);
        assert!(updates["T"].values().any(|u| *u == RowUpdate2::Delete));
        let p = br#"["m","9122c6b9-1625-4ec4-9104-ec76ef5efc17",{"T":{"005fc7ab-9549-4df1-aaf9-5d907d5e2675":{"insert":{"a":1}}}}]"#;
        let Notification::Update3 { last_txn_id, .. } = Notification::decode("update3", p).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            last_txn_id.to_string(),
            "9122c6b9-1625-4ec4-9104-ec76ef5efc17"
        );
    }

    #[test]
    fn lock_notifications_and_malformed_params() {
        assert_eq!(
            Notification::decode("locked", br#"["l"]"#).unwrap(),
            Notification::Locked("l".into())
        );
        assert_eq!(
            Notification::decode("stolen", br#"["l"]"#).unwrap(),
            Notification::Stolen("l".into())
        );
        let e = Notification::decode("update", br#"["m",{"T":{"nope":{}}}]"#).unwrap_err();
        assert_eq!(e.method, "update");
        assert!(
            e.to_string().contains("malformed update notification"),
            "{e}"
        );
    }
}
