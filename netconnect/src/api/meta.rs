//! The parts every Kubernetes object shares: `metadata` and status conditions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `metadata` as `kubectl get -o yaml` shows it. The fields netconnect reads are typed;
/// everything else (uid, resourceVersion, managedFields, …) is kept as it came, so an
/// object written back looks like the one read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// The object's name.
    #[serde(default)]
    pub name: String,
    /// Its namespace, for namespaced kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Labels, matched by selectors.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations; OVN-Kubernetes keeps its allocations here (`k8s.ovn.org/…`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Every other field, untouched.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

impl ObjectMeta {
    /// `namespace/name` for a namespaced object, `name` otherwise.
    pub fn qualified_name(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

/// A status condition (`metav1.Condition`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// What the condition is about, e.g. `Accepted`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A CamelCase reason.
    #[serde(default)]
    pub reason: String,
    /// What a person should read.
    #[serde(default)]
    pub message: String,
    /// When `status` last changed (RFC 3339).
    #[serde(default)]
    pub last_transition_time: String,
}
