//! Kubernetes label selectors (`metav1.LabelSelector`) and how they match labels.
//!
//! Semantics follow Kubernetes: every `matchLabels` pair and every `matchExpressions`
//! requirement must hold; an empty selector matches everything. `In` and `NotIn` need at
//! least one value, `Exists` and `DoesNotExist` none; `NotIn` and `DoesNotExist` match an
//! object that lacks the key.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::meta::null_as_empty;

/// A label selector as it appears in a spec.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LabelSelector {
    /// Labels that must be present with exactly these values.
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub(crate) match_labels: BTreeMap<String, String>,
    /// Requirements that must all hold.
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub(crate) match_expressions: Vec<LabelSelectorRequirement>,
}

/// One `matchExpressions` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LabelSelectorRequirement {
    /// The label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// The values for `In` and `NotIn`.
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub values: Vec<String>,
}

impl LabelSelector {
    /// Why the selector is invalid, as the API server would refuse it; `field` is the
    /// selector's path, used in the message.
    pub(crate) fn validate(&self, field: &str) -> Result<(), (String, String)> {
        for (i, r) in self.match_expressions.iter().enumerate() {
            let at = format!("{field}.matchExpressions[{i}]");
            if r.key.is_empty() {
                return Err((format!("{at}.key"), "must not be empty".into()));
            }
            match r.operator.as_str() {
                "In" | "NotIn" if r.values.is_empty() => {
                    return Err((
                        format!("{at}.values"),
                        format!("must be non-empty for operator {}", r.operator),
                    ))
                }
                "Exists" | "DoesNotExist" if !r.values.is_empty() => {
                    return Err((
                        format!("{at}.values"),
                        format!("must be empty for operator {}", r.operator),
                    ))
                }
                "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
                other => {
                    return Err((
                        format!("{at}.operator"),
                        format!(
                            "\"{other}\" is not a valid operator (In, NotIn, Exists, DoesNotExist)"
                        ),
                    ))
                }
            }
        }
        Ok(())
    }

    /// True when `labels` satisfy the selector. An invalid requirement matches nothing
    /// (validation reports it first).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }

    #[cfg(test)]
    /// True when the selector has no requirement at all (it then selects everything).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }
}

impl LabelSelectorRequirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator.as_str() {
            "In" => value.is_some_and(|v| self.values.contains(v)),
            "NotIn" => value.is_none_or(|v| !self.values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    fn expr(r: LabelSelectorRequirement) -> LabelSelector {
        LabelSelector {
            match_expressions: vec![r],
            ..Default::default()
        }
    }

    #[test]
    fn an_empty_selector_selects_everything() {
        let s = LabelSelector::default();
        assert!(s.is_empty());
        assert!(s.matches(&labels(&[])));
        assert!(s.matches(&labels(&[("a", "b")])));
    }

    #[test]
    fn match_labels_need_every_pair_with_its_value() {
        let s = LabelSelector {
            match_labels: labels(&[("team", "blue"), ("env", "prod")]),
            ..Default::default()
        };
        assert!(s.matches(&labels(&[("team", "blue"), ("env", "prod"), ("x", "y")])));
        assert!(!s.matches(&labels(&[("team", "blue")])));
        assert!(!s.matches(&labels(&[("team", "blue"), ("env", "dev")])));
    }

    #[test]
    fn in_and_not_in_follow_kubernetes_for_missing_keys() {
        let in_ = expr(req("color", "In", &["blue", "green"]));
        assert!(in_.matches(&labels(&[("color", "green")])));
        assert!(!in_.matches(&labels(&[("color", "red")])));
        assert!(!in_.matches(&labels(&[])), "In needs the key");
        let not_in = expr(req("color", "NotIn", &["blue"]));
        assert!(not_in.matches(&labels(&[("color", "red")])));
        assert!(!not_in.matches(&labels(&[("color", "blue")])));
        assert!(not_in.matches(&labels(&[])), "NotIn matches a missing key");
    }

    #[test]
    fn exists_and_does_not_exist_look_at_the_key_only() {
        let e = expr(req("tier", "Exists", &[]));
        assert!(e.matches(&labels(&[("tier", "")])));
        assert!(!e.matches(&labels(&[])));
        let d = expr(req("tier", "DoesNotExist", &[]));
        assert!(d.matches(&labels(&[])));
        assert!(!d.matches(&labels(&[("tier", "x")])));
    }

    #[test]
    fn labels_and_expressions_must_all_hold() {
        let s = LabelSelector {
            match_labels: labels(&[("team", "blue")]),
            match_expressions: vec![req("env", "NotIn", &["dev"]), req("tier", "Exists", &[])],
        };
        assert!(s.matches(&labels(&[("team", "blue"), ("tier", "1")])));
        assert!(!s.matches(&labels(&[("team", "blue"), ("tier", "1"), ("env", "dev")])));
        assert!(!s.matches(&labels(&[("team", "blue")])));
    }

    #[test]
    fn invalid_requirements_are_refused_with_their_field() {
        let e = expr(req("k", "In", &[])).validate("spec.sel").unwrap_err();
        assert_eq!(e.0, "spec.sel.matchExpressions[0].values");
        let e = expr(req("k", "Exists", &["v"])).validate("s").unwrap_err();
        assert!(e.1.contains("must be empty"), "{e:?}");
        let e = expr(req("k", "Equals", &["v"])).validate("s").unwrap_err();
        assert_eq!(e.0, "s.matchExpressions[0].operator");
        assert!(!expr(req("k", "Equals", &["v"])).matches(&labels(&[("k", "v")])));
        let e = expr(req("", "Exists", &[])).validate("s").unwrap_err();
        assert_eq!(e.0, "s.matchExpressions[0].key");
    }
}
