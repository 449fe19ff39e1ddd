//! A cache of the northbound Logical_Switch_Ports, kept decoded and indexed by the
//! namespace OVN-Kubernetes writes in `external_ids`; prints each change, then the
//! ports of one namespace.
//!
//! ```text
//! cargo run -p nb-model --example nb_monitor -- tcp:10.0.0.1:6641,tcp:10.0.0.2:6641 [SECONDS]
//! ```

use std::time::Duration;

use nb_model::{LogicalSwitchPort, OvnNorthbound};
use ovsdb_proto::cache::{Cache, CacheConfig, Change, TypedEvent, TypedTable};
use ovsdb_proto::Remote;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), ovsdb_proto::Error> {
    let mut args = std::env::args().skip(1);
    let remotes = args
        .next()
        .unwrap_or_else(|| "unix:/var/run/ovn/ovnnb_db.sock".into());
    let seconds: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10);

    let mut config = CacheConfig::for_model::<OvnNorthbound>(Remote::parse_list(&remotes)?);
    config.leader_only = true;
    let mut table = TypedTable::<LogicalSwitchPort>::new();
    let by_namespace = table.index("namespace", |p| p.external_ids.get("namespace").cloned());
    config.typed(table);
    // The port table's own stream of changes, decoded into the model.
    let mut ports = config.subscribe::<LogicalSwitchPort>();
    // The stream of every table's changes is not needed here: dropped, it is not fed.
    let (cache, _) = Cache::start(config);

    let follow = async {
        while let Some(event) = ports.recv().await {
            match event {
                TypedEvent::Ready => println!("ready: {} ports", cache.snapshot().len()),
                TypedEvent::Change { change, .. } => match change {
                    Change::Insert { new } => println!("+ {}", new.name),
                    Change::Modify { new, .. } => println!("~ {}", new.name),
                    Change::Delete { old } => println!("- {}", old.name),
                },
                TypedEvent::Undecodable { uuid, error } => {
                    eprintln!("row {uuid} does not decode: {error}")
                }
                // Only a bounded stream (`subscribe_with`) misses events.
                _ => {}
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(seconds), follow).await;

    let blue = cache.snapshot().lookup(&by_namespace, "blue")?;
    println!("namespace blue: {} ports", blue.len());
    Ok(())
}
