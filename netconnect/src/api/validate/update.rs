//! The rules an update of a network must keep (OKEP-5377: subnets are only appended).

use super::*;

/// The update rules between the last accepted definition of a network and a new one:
/// topology, role, MTU, join subnets and Layer2 subnets are immutable; Layer3 subnets
/// may only be appended, each keeping its hostSubnet (OKEP-5377), and only for primary
/// networks.
pub(crate) fn check_update(old: &Network, new: &Network, at: &str) -> Result<(), FieldError> {
    if old.topology != new.topology {
        return err(
            format!("{at}.topology"),
            format!("Topology is immutable (was {})", old.topology),
        );
    }
    let layer = match new.topology {
        Topology::Layer3 => "layer3",
        Topology::Layer2 => "layer2",
        Topology::Localnet => "localnet",
    };
    let l = format!("{at}.{layer}");
    if old.role != new.role {
        return err(
            format!("{l}.role"),
            format!("role is immutable (was {})", old.role),
        );
    }
    if old.mtu != new.mtu {
        return err(
            format!("{l}.mtu"),
            format!("mtu is immutable (was {})", old.mtu),
        );
    }
    if old.join_subnets != new.join_subnets {
        return err(format!("{l}.joinSubnets"), "joinSubnets is immutable");
    }
    if new.topology != Topology::Layer3 {
        if old.subnets != new.subnets || old.default_gateway_ips != new.default_gateway_ips {
            return err(l, format!("{layer} is immutable"));
        }
        return Ok(());
    }
    for o in &old.subnets {
        match new.subnets.iter().find(|n| n.cidr == o.cidr) {
            None => {
                return err(
                    format!("{l}.subnets"),
                    format!(
                        "Removing existing subnets is not allowed: {} is gone",
                        o.cidr
                    ),
                )
            }
            Some(n) if n.host_len != o.host_len => {
                return err(
                    format!("{l}.subnets"),
                    format!(
                        "hostSubnet is immutable: {} was /{}, now /{}",
                        o.cidr, o.host_len, n.host_len
                    ),
                )
            }
            Some(_) => {}
        }
    }
    if new.role == Role::Secondary && old.subnets.len() != new.subnets.len() {
        return err(
            format!("{l}.subnets"),
            "Subnets is immutable for Secondary role",
        );
    }
    Ok(())
}
