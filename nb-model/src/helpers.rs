//! Conveniences every consumer needs: rows built from their essentials, with the
//! addresses checked.

use std::collections::BTreeSet;

use crate::{keys, LogicalRouter, LogicalRouterPort, LogicalSwitch, LogicalSwitchPort};

/// An address that is not what the column expects: which one and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidAddress {
    /// The text given.
    pub value: String,
    /// Why it was refused.
    pub reason: &'static str,
}

impl std::fmt::Display for InvalidAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid address \"{}\": {}", self.value, self.reason)
    }
}

impl std::error::Error for InvalidAddress {}

fn check_mac(mac: &str) -> Result<(), InvalidAddress> {
    let parts: Vec<&str> = mac.split(':').collect();
    let ok = parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()));
    if ok {
        Ok(())
    } else {
        Err(InvalidAddress {
            value: mac.to_owned(),
            reason: "expected a MAC address such as 0a:58:0a:f4:00:01",
        })
    }
}

impl LogicalRouterPort {
    /// A router port named `name` with MAC `mac` and `networks` (addresses with their
    /// prefix length, IPv4 or IPv6, e.g. `10.244.0.1/24`).
    pub fn with_networks<S: AsRef<str>>(
        name: impl Into<String>,
        mac: &str,
        networks: impl IntoIterator<Item = S>,
    ) -> Result<LogicalRouterPort, InvalidAddress> {
        check_mac(mac)?;
        let mut set = BTreeSet::new();
        for n in networks {
            let n = n.as_ref();
            if n.parse::<ipnet::IpNet>().is_err() {
                return Err(InvalidAddress {
                    value: n.to_owned(),
                    reason: "expected an address with a prefix length, such as 10.0.0.1/24 or fd00::1/64",
                });
            }
            set.insert(n.to_owned());
        }
        if set.is_empty() {
            return Err(InvalidAddress {
                value: String::new(),
                reason: "a router port needs at least one network",
            });
        }
        Ok(LogicalRouterPort {
            name: name.into(),
            mac: mac.to_ascii_lowercase(),
            networks: set,
            ..Default::default()
        })
    }
}

impl LogicalSwitchPort {
    /// A switch port of type `router` connected to the router port `router_port`,
    /// answering for the router's addresses.
    pub fn to_router(name: impl Into<String>, router_port: impl Into<String>) -> LogicalSwitchPort {
        let mut lsp = LogicalSwitchPort {
            name: name.into(),
            type_: "router".into(),
            addresses: ["router".to_string()].into(),
            ..Default::default()
        };
        lsp.options
            .insert(keys::lsp_options::ROUTER_PORT.into(), router_port.into());
        lsp
    }
}

impl LogicalSwitch {
    /// An empty switch named `name`.
    pub fn named(name: impl Into<String>) -> LogicalSwitch {
        LogicalSwitch {
            name: name.into(),
            ..Default::default()
        }
    }
}

impl LogicalRouter {
    /// An empty router named `name`.
    pub fn named(name: impl Into<String>) -> LogicalRouter {
        LogicalRouter {
            name: name.into(),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn router_ports_check_mac_and_networks() {
        let p = LogicalRouterPort::with_networks(
            "p",
            "0A:58:0A:F4:00:01",
            ["10.0.0.1/24", "fd00::1/64"],
        )
        .unwrap();
        assert_eq!(p.mac, "0a:58:0a:f4:00:01");
        assert_eq!(p.networks.len(), 2);
        let e = LogicalRouterPort::with_networks("p", "0a:58", ["10.0.0.1/24"]).unwrap_err();
        assert!(e.to_string().contains("\"0a:58\""), "{e}");
        let e =
            LogicalRouterPort::with_networks("p", "0a:58:0a:f4:00:01", ["10.0.0.1"]).unwrap_err();
        assert!(e.to_string().contains("prefix length"), "{e}");
        assert!(LogicalRouterPort::with_networks::<&str>("p", "0a:58:0a:f4:00:01", []).is_err());
    }

    #[test]
    fn a_router_type_switch_port_names_its_router_port() {
        let lsp = LogicalSwitchPort::to_router("stor-sw0", "rtos-sw0");
        assert_eq!(lsp.type_, "router");
        assert_eq!(lsp.options["router-port"], "rtos-sw0");
        assert!(lsp.addresses.contains("router"));
    }
}
