//! `ovs-interfaces`: what a chassis' Open vSwitch holds for OVN. Reads the local
//! Open_vSwitch database through a typed cache and prints the settings ovn-controller
//! takes from it (`system-id`, `ovn-remote`, `ovn-encap-type`, `ovn-encap-ip`, and
//! `ovn-bridge`, the integration bridge when it is not `br-int`), then each
//! bridge with its ports' interfaces, their type, OpenFlow port and, for those bound
//! to a logical port, its name (`external_ids:iface-id`).
//!
//! ```text
//! cargo run -p ovs-model --example ovs_interfaces -- [unix:/var/run/openvswitch/db.sock]
//! ```

use std::time::Duration;

use ovs_model::{Bridge, Interface, OpenVSwitch, OpenVSwitchDatabase, Port};
use ovsdb_proto::cache::{Cache, CacheConfig, TypedTable};
use ovsdb_proto::Remote;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let remote = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "unix:/var/run/openvswitch/db.sock".into());
    let mut config = CacheConfig::for_model::<OpenVSwitchDatabase>(Remote::parse_list(&remote)?);
    // One server, not clustered: nothing to ask it about leadership.
    config.leader_only = false;
    config.typed(TypedTable::<OpenVSwitch>::new());
    config.typed(TypedTable::<Bridge>::new());
    config.typed(TypedTable::<Port>::new());
    config.typed(TypedTable::<Interface>::new());
    let (cache, _) = Cache::start(config);
    cache.ready(Duration::from_secs(10)).await?;
    let snap = cache.snapshot();

    for root in snap.all::<OpenVSwitch>()? {
        for key in [
            "system-id",
            "ovn-remote",
            "ovn-encap-type",
            "ovn-encap-ip",
            "ovn-bridge",
        ] {
            let value = root.external_ids.get(key).map_or("(unset)", String::as_str);
            println!("{key} {value}");
        }
    }
    let mut bridges = snap.all::<Bridge>()?;
    bridges.sort_by(|a, b| a.name.cmp(&b.name));
    for b in &bridges {
        println!("bridge {} ({})", b.name, b.datapath_type);
        let mut lines = Vec::new();
        for port in b
            .ports
            .iter()
            .filter_map(|p| snap.get_typed::<Port>(&p.uuid()?))
        {
            for i in port
                .interfaces
                .iter()
                .filter_map(|i| snap.get_typed::<Interface>(&i.uuid()?))
            {
                let ofport = i.ofport.map_or_else(|| "-".to_owned(), |n| n.to_string());
                let bound = i
                    .external_ids
                    .get("iface-id")
                    .map_or_else(String::new, |id| format!(" iface-id {id}"));
                let kind = if i.type_.is_empty() {
                    "system"
                } else {
                    &i.type_
                };
                lines.push(format!(
                    "  interface {} ({kind}, ofport {ofport}){bound}",
                    i.name
                ));
            }
        }
        lines.sort();
        for l in lines {
            println!("{l}");
        }
    }
    Ok(())
}
