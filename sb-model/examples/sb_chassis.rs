//! `sb-chassis`: where each logical port lives. Reads a (clustered) Southbound through
//! a typed cache and prints every chassis with its tunnel endpoints, then every port
//! binding with the chassis that binds it and its datapath's tunnel key, in name order.
//!
//! ```text
//! cargo run -p sb-model --example sb_chassis -- REMOTE[,REMOTE…]
//! ```

use std::time::Duration;

use ovsdb_proto::cache::{Cache, CacheConfig, TypedTable};
use ovsdb_proto::Remote;
use sb_model::{Chassis, DatapathBinding, Encap, OvnSouthbound, PortBinding};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let remotes = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "unix:/var/run/ovn/ovnsb_db.sock".into());
    let mut config = CacheConfig::for_model::<OvnSouthbound>(Remote::parse_list(&remotes)?);
    // Any member serves reads; a follower is as good as the leader here.
    config.leader_only = false;
    config.typed(TypedTable::<Chassis>::new());
    config.typed(TypedTable::<Encap>::new());
    config.typed(TypedTable::<PortBinding>::new());
    config.typed(TypedTable::<DatapathBinding>::new());
    let (cache, _) = Cache::start(config);
    cache.ready(Duration::from_secs(10)).await?;
    let snap = cache.snapshot();

    let mut chassis = snap.all::<Chassis>()?;
    chassis.sort_by(|a, b| a.name.cmp(&b.name));
    for c in &chassis {
        let mut encaps: Vec<String> = c
            .encaps
            .iter()
            .filter_map(|e| snap.get_typed::<Encap>(&e.uuid()?))
            .map(|e| format!("{} {}", e.type_, e.ip))
            .collect();
        encaps.sort();
        println!("chassis {} ({}): {}", c.name, c.hostname, encaps.join(", "));
    }
    let mut ports = snap.all::<PortBinding>()?;
    ports.sort_by(|a, b| a.logical_port.cmp(&b.logical_port));
    for p in &ports {
        let on = p
            .chassis
            .as_ref()
            .and_then(|c| snap.get_typed::<Chassis>(&c.uuid()?))
            .map_or_else(|| "unbound".to_owned(), |c| format!("on {}", c.name));
        let datapath = p
            .datapath
            .uuid()
            .and_then(|d| snap.get_typed::<DatapathBinding>(&d))
            .map_or(0, |d| d.tunnel_key);
        let kind = if p.type_.is_empty() { "vif" } else { &p.type_ };
        println!(
            "port {} ({kind}, datapath {datapath}, key {}) {on}",
            p.logical_port, p.tunnel_key
        );
    }
    Ok(())
}
