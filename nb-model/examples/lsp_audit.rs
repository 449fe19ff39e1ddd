//! `lsp-audit`, the usual shape of an OVN tool: one cache for reads and writes, a typed
//! table with an index, a typed transaction, a typed event stream, cleanup.
//!
//! It caches the switches (decoded, indexed by their `owner` external id) and follows
//! the port table's typed events; makes a switch with three ports in one transaction;
//! lists the switches it owns from the index; prints every port event for SECONDS
//! (try `ovn-nbctl lsp-add audit-sw p9` meanwhile); deletes what it made.
//!
//! ```text
//! cargo run -p nb-model --example lsp_audit -- REMOTE[,REMOTE…] [SECONDS]
//! ```

use std::time::Duration;

use nb_model::{LogicalSwitch, LogicalSwitchPort, OvnNorthbound};
use ovsdb_proto::cache::{Cache, CacheConfig, Change, TypedEvent, TypedTable};
use ovsdb_proto::model::Table;
use ovsdb_proto::Remote;

/// The `owner` external id of what this tool makes.
const OWNER: &str = "lsp-audit";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let remotes = args
        .next()
        .unwrap_or_else(|| "unix:/var/run/ovn/ovnnb_db.sock".into());
    let seconds: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(10);

    // What to cache: switches decoded and indexed by owner; the ports' own stream.
    let mut config = CacheConfig::for_model::<OvnNorthbound>(Remote::parse_list(&remotes)?);
    config.leader_only = true;
    let mut switches = TypedTable::<LogicalSwitch>::new();
    let by_owner = switches.index("owner", |s| s.external_ids.get("owner").cloned());
    config.typed(switches);
    let mut ports = config.subscribe::<LogicalSwitchPort>();
    let (cache, _) = Cache::start(config);
    // Says which servers were tried and why, if none could be used.
    cache.ready(Duration::from_secs(10)).await?;

    // A switch and its three ports, in one typed transaction.
    let db = cache.db::<OvnNorthbound>()?;
    let mut txn = db.transaction();
    let mut switch = LogicalSwitch::named("audit-sw");
    switch.external_ids.insert("owner".into(), OWNER.into());
    for i in 1..=3 {
        let port = LogicalSwitchPort {
            name: format!("audit-p{i}"),
            addresses: [format!("0a:00:00:00:00:0{i}")].into(),
            ..Default::default()
        };
        switch.ports.insert(txn.insert(&port));
    }
    let made = txn.insert(&switch);
    let result = cache.commit_and_wait(txn, Duration::from_secs(5)).await?;
    println!("made audit-sw {}", result.uuid(&made).expect("inserted"));

    // Read-your-writes: the index already has it.
    for s in cache.snapshot().lookup(&by_owner, OWNER)? {
        println!("owned: {} with {} ports", s.name, s.ports.len());
    }

    // Every port event (our own three first: they are in the stream already).
    println!("watching for {seconds}s");
    let watch = async {
        while let Some(event) = ports.recv().await {
            match event {
                TypedEvent::Change { change, .. } => match change {
                    Change::Insert { new } => println!("+ {}", new.name),
                    Change::Modify { old, new } => println!("~ {} (was {:?})", new.name, old.up),
                    Change::Delete { old } => println!("- {}", old.name),
                },
                TypedEvent::Ready => println!("ready"),
                other => println!("{other:?}"),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(seconds), watch).await;

    // What it made goes; its ports with it (ports are kept only by their switch).
    let mut txn = db.transaction();
    let deleted = txn.delete([LogicalSwitch::COLUMNS.name.eq("audit-sw")]);
    // Long enough for a cluster to elect a new leader if the old one just went.
    let result = cache.commit_and_wait(txn, Duration::from_secs(15)).await?;
    println!(
        "deleted {} switch; {} owned",
        result.count(deleted).unwrap_or(0),
        cache.snapshot().lookup(&by_owner, OWNER)?.len()
    );
    Ok(())
}
