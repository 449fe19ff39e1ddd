//! The networking plugin's virtual networks, declared by `onapNetwork` objects (its
//! seed's "ONAP Network Definition"): `spec.config` is JSON with `cnitype` (absent:
//! `ovn`; another plugin's, `flannel` say, is left alone), `name`, `subnet` and
//! `gateway`. The seed's values carry stray spaces (`" 172.16.24.0/24"`): every value
//! is trimmed.
//!
//! Several subnets (the seed's design comment): `subnet` may list them, as a JSON
//! array or comma-separated; `gateway` then lists their gateways in the same order,
//! the same way, and may be shorter or absent (a subnet without one gets its first
//! address). The name is `config.name`, else the object's.

use ipnet::IpNet;
use serde_json::Value;

use super::objects::OnapNetwork;
use crate::ovnk::addr::subnet_and_gateway;

/// A virtual network as declared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VirtualNetworkDef {
    /// Its name (its switch's).
    pub name: String,
    /// Each subnet with its gateway (the gateway carrying the subnet's prefix length),
    /// in the order declared.
    pub subnets: Vec<(IpNet, IpNet)>,
}

/// What was wrong with a field of an `onapNetwork`: the field, and why.
pub(crate) type OnapProblem = (String, String);

/// The virtual network `o` declares; `None` when it is another plugin's.
pub(crate) fn virtual_network(o: &OnapNetwork) -> Result<Option<VirtualNetworkDef>, OnapProblem> {
    let field = "spec.config".to_owned();
    let config: Value = serde_json::from_str(&o.spec.config)
        .map_err(|e| (field.clone(), format!("not JSON: {e}")))?;
    let Some(config) = config.as_object() else {
        return Err((field, "not a JSON object".into()));
    };
    let text = |key: &str| -> Result<Option<String>, OnapProblem> {
        match config.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim().to_owned())),
            Some(other) => Err((format!("{field}.{key}"), format!("{other} is not a string"))),
        }
    };
    let cnitype = text("cnitype")?.unwrap_or_else(|| "ovn".into());
    if !cnitype.eq_ignore_ascii_case("ovn") {
        return Ok(None);
    }
    let name = match text("name")? {
        Some(n) if !n.is_empty() => n,
        _ => o.metadata.name.clone().unwrap_or_default(),
    };
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() || !name.chars().all(valid) {
        return Err((
            format!("{field}.name"),
            format!("{name:?} is not a switch name (letters, digits, '-', '_', '.')"),
        ));
    }
    let subnets = list(config.get("subnet"), &format!("{field}.subnet"))?;
    if subnets.is_empty() {
        return Err((format!("{field}.subnet"), "missing".into()));
    }
    let gateways = list(config.get("gateway"), &format!("{field}.gateway"))?;
    if gateways.len() > subnets.len() {
        return Err((
            format!("{field}.gateway"),
            format!("{} gateways for {} subnets", gateways.len(), subnets.len()),
        ));
    }
    let mut out: Vec<(IpNet, IpNet)> = Vec::new();
    for (i, subnet) in subnets.iter().enumerate() {
        let at = |what: &str| match subnets.len() {
            1 => format!("{field}.{what}"),
            _ => format!("{field}.{what}[{i}]"),
        };
        let first = subnet
            .parse::<IpNet>()
            .ok()
            .and_then(|s| crate::ovnk::addr::nth(&s, 1))
            .map(|a| a.to_string());
        let gateway = gateways.get(i).cloned().or(first).unwrap_or_default();
        let (s, g) = subnet_and_gateway(subnet, &gateway).map_err(|e| {
            let what = if gateways.get(i).is_some() && e.starts_with("gateway") {
                "gateway"
            } else {
                "subnet"
            };
            (at(what), e)
        })?;
        if let Some((other, _)) = out.iter().find(|(o, _)| o.contains(&s) || s.contains(o)) {
            return Err((at("subnet"), format!("{s} overlaps {other}")));
        }
        out.push((s, g));
    }
    Ok(Some(VirtualNetworkDef { name, subnets: out }))
}

/// A `subnet` or `gateway` value: one string (comma-separated for several), or an
/// array of strings; trimmed, empty entries dropped.
fn list(value: Option<&Value>, field: &str) -> Result<Vec<String>, OnapProblem> {
    let strings: Vec<String> = match value {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => s.split(',').map(str::to_owned).collect(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err((format!("{field}[{i}]"), format!("{other} is not a string"))),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err((
                field.to_owned(),
                format!("{other} is neither a string nor a list of strings"),
            ))
        }
    };
    Ok(strings
        .into_iter()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn onap(config: &str) -> OnapNetwork {
        let mut o = OnapNetwork::default();
        o.metadata.name = Some("meta-name".into());
        o.spec.config = config.into();
        o
    }

    fn def(config: &str) -> Result<Option<VirtualNetworkDef>, OnapProblem> {
        virtual_network(&onap(config))
    }

    fn pairs(d: &VirtualNetworkDef) -> Vec<(String, String)> {
        d.subnets
            .iter()
            .map(|(s, g)| (s.to_string(), g.to_string()))
            .collect()
    }

    #[test]
    fn the_seeds_definition_with_its_stray_spaces_reads() {
        let d = def(r#"{ "cnitype" : "ovn", "name": " ovn-ls-24", "subnet": " 172.16.24.0/24", "gateway": " 172.16.24.1" }"#)
            .unwrap()
            .unwrap();
        assert_eq!(d.name, "ovn-ls-24");
        assert_eq!(
            pairs(&d),
            [("172.16.24.0/24".into(), "172.16.24.1/24".into())]
        );
    }

    #[test]
    fn cnitype_absent_is_ovn_and_another_plugins_is_left_alone() {
        let d = def(r#"{"subnet": "10.1.0.0/24"}"#).unwrap().unwrap();
        assert_eq!(d.name, "meta-name", "the object's name without config.name");
        assert_eq!(pairs(&d), [("10.1.0.0/24".into(), "10.1.0.1/24".into())]);
        assert_eq!(
            def(r#"{"cnitype": "flannel", "subnet": "x"}"#).unwrap(),
            None
        );
        assert!(def(r#"{"cnitype": "OVN", "subnet": "10.1.0.0/24"}"#)
            .unwrap()
            .is_some());
    }

    #[test]
    fn several_subnets_as_a_list_or_comma_separated_gateways_by_position() {
        let a = def(r#"{"name": "n", "subnet": ["10.1.0.0/24", "10.2.0.0/24", "fd00:1::/64"], "gateway": ["10.1.0.254"]}"#)
            .unwrap()
            .unwrap();
        assert_eq!(
            pairs(&a),
            [
                ("10.1.0.0/24".into(), "10.1.0.254/24".into()),
                ("10.2.0.0/24".into(), "10.2.0.1/24".into()),
                ("fd00:1::/64".into(), "fd00:1::1/64".into()),
            ]
        );
        let b = def(r#"{"name": "n", "subnet": "10.1.0.0/24, 10.2.0.0/24", "gateway": "10.1.0.254,10.2.0.9"}"#)
            .unwrap()
            .unwrap();
        assert_eq!(b.subnets[1].1.to_string(), "10.2.0.9/24");
    }

    #[test]
    fn bad_definitions_name_the_field() {
        let cases = [
            ("nope", "spec.config", "not JSON"),
            ("[1]", "spec.config", "not a JSON object"),
            (r#"{"name": "n"}"#, "spec.config.subnet", "missing"),
            (
                r#"{"name": "a b", "subnet": "10.1.0.0/24"}"#,
                "spec.config.name",
                "not a switch name",
            ),
            (
                r#"{"subnet": "10.1.0.1/24"}"#,
                "spec.config.subnet",
                "not a network address",
            ),
            (
                r#"{"subnet": "10.1.0.0/24", "gateway": "10.9.0.1"}"#,
                "spec.config.gateway",
                "not a host address",
            ),
            (
                r#"{"subnet": ["10.1.0.0/16", "10.1.2.0/24"]}"#,
                "spec.config.subnet[1]",
                "overlaps 10.1.0.0/16",
            ),
            (
                r#"{"subnet": "10.1.0.0/24", "gateway": "10.1.0.1,10.1.0.2"}"#,
                "spec.config.gateway",
                "2 gateways for 1 subnets",
            ),
            (
                r#"{"subnet": [7]}"#,
                "spec.config.subnet[0]",
                "not a string",
            ),
            (
                r#"{"name": 3, "subnet": "10.1.0.0/24"}"#,
                "spec.config.name",
                "not a string",
            ),
        ];
        for (config, field, message) in cases {
            let (f, m) = def(config).unwrap_err();
            assert_eq!(f, field, "{config}: {m}");
            assert!(m.contains(message), "{config}: {m}");
        }
    }
}
