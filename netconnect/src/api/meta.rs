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

/// Whether `s` is a DNS-1123 label, as namespace names must be: at most 63 lowercase
/// letters, digits and `-`, starting and ending with a letter or digit.
pub fn is_dns_label(s: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && edge(s.chars().next())
        && edge(s.chars().last())
}

/// Whether `s` is a DNS-1123 subdomain, as most object names must be: at most 253
/// characters, labels joined by `.`.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// Parses `namespace/name`, naming what is wrong with it.
pub fn parse_namespaced_name(s: &str) -> Result<(&str, &str), String> {
    let Some((namespace, name)) = s.split_once('/') else {
        return Err(format!("{s:?} is not namespace/name"));
    };
    if !is_dns_label(namespace) {
        return Err(format!(
            "{s:?}: the namespace {namespace:?} is not a DNS-1123 label"
        ));
    }
    if !is_dns_subdomain(name) {
        return Err(format!(
            "{s:?}: the name {name:?} is not a DNS-1123 subdomain"
        ));
    }
    Ok((namespace, name))
}

#[cfg(test)]
mod name_tests {
    use super::*;

    #[test]
    fn namespaced_names_are_checked_as_the_api_server_checks_them() {
        assert_eq!(
            parse_namespaced_name("kube-system/kube-dns"),
            Ok(("kube-system", "kube-dns"))
        );
        assert_eq!(parse_namespaced_name("a/b.c"), Ok(("a", "b.c")));
        for (bad, says) in [
            ("kube-dns", "not namespace/name"),
            ("/kube-dns", "namespace \"\""),
            ("Kube/x", "namespace \"Kube\""),
            ("a-/x", "namespace \"a-\""),
            ("a/", "name \"\""),
            ("a/b/c", "name \"b/c\""),
            ("a/b..c", "name \"b..c\""),
        ] {
            let e = parse_namespaced_name(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert!(is_dns_label(&"a".repeat(63)));
        assert!(!is_dns_label(&"a".repeat(64)));
    }
}
