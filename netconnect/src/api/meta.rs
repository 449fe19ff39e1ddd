//! The parts every Kubernetes object shares: `metadata` (k8s-openapi's `ObjectMeta`,
//! read through `Meta`), status conditions, and the rule that a list or map Go
//! writes without `omitempty` may arrive as `null` (`null_as_empty`).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// No labels or annotations.
static EMPTY: BTreeMap<String, String> = BTreeMap::new();

/// What netconnect reads of an object's `metadata`, each absent field as empty: the API
/// server omits an empty map, and a client may write one as `null`.
pub(crate) trait Meta {
    /// The object's name (empty when absent).
    fn name(&self) -> &str;
    /// Its namespace, for namespaced kinds.
    fn namespace(&self) -> Option<&str>;
    /// Its labels.
    fn labels(&self) -> &BTreeMap<String, String>;
    /// Its annotations; OVN-Kubernetes keeps its allocations here (`k8s.ovn.org/…`).
    fn annotations(&self) -> &BTreeMap<String, String>;
    /// Its annotations, to change them (made when absent).
    fn annotations_mut(&mut self) -> &mut BTreeMap<String, String>;
    /// `namespace/name` for a namespaced object, `name` otherwise.
    fn qualified_name(&self) -> String {
        match self.namespace() {
            Some(ns) => format!("{ns}/{}", self.name()),
            None => self.name().to_owned(),
        }
    }
}

impl Meta for ObjectMeta {
    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }

    fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    fn labels(&self) -> &BTreeMap<String, String> {
        self.labels.as_ref().unwrap_or(&EMPTY)
    }

    fn annotations(&self) -> &BTreeMap<String, String> {
        self.annotations.as_ref().unwrap_or(&EMPTY)
    }

    fn annotations_mut(&mut self) -> &mut BTreeMap<String, String> {
        self.annotations.get_or_insert_with(BTreeMap::new)
    }
}

/// True when `a` and `b` are the same but for their annotations. Every field is named,
/// so that a field k8s-openapi adds must be compared here.
pub(crate) fn same_but_annotations(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    let ObjectMeta {
        annotations: _,
        creation_timestamp,
        deletion_grace_period_seconds,
        deletion_timestamp,
        finalizers,
        generate_name,
        generation,
        labels,
        managed_fields,
        name,
        namespace,
        owner_references,
        resource_version,
        self_link,
        uid,
    } = a;
    *creation_timestamp == b.creation_timestamp
        && *deletion_grace_period_seconds == b.deletion_grace_period_seconds
        && *deletion_timestamp == b.deletion_timestamp
        && *finalizers == b.finalizers
        && *generate_name == b.generate_name
        && *generation == b.generation
        && *labels == b.labels
        && *managed_fields == b.managed_fields
        && *name == b.name
        && *namespace == b.namespace
        && *owner_references == b.owner_references
        && *resource_version == b.resource_version
        && *self_link == b.self_link
        && *uid == b.uid
}

/// Reads a list or map field that may be `null` as empty (`#[serde(default,
/// deserialize_with = "null_as_empty")]`): Go writes a nil slice or map without
/// `omitempty` as `null`, and the API server prints what it stored.
pub(crate) fn null_as_empty<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A status condition (`metav1.Condition`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// What the condition is about, e.g. `Accepted`.
    #[serde(rename = "type")]
    pub(crate) type_: String,
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
    pub(crate) last_transition_time: String,
    /// The object's `metadata.generation` the condition was set for, when its writer
    /// says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) observed_generation: Option<i64>,
}

/// Whether `s` is a DNS-1123 label, as namespace names must be: at most 63 lowercase
/// letters, digits and `-`, starting and ending with a letter or digit.
pub(crate) fn is_dns_label(s: &str) -> bool {
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
pub(crate) fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// Parses `namespace/name`, naming what is wrong with it.
pub(crate) fn parse_namespaced_name(s: &str) -> Result<(&str, &str), String> {
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
