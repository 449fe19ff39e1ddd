//! A switch with two ports through the typed model: rows linked by typed references
//! (named-uuids on the wire), read back with a condition checked by the compiler.
//!
//! ```text
//! cargo run -p nb-model --example typed_transact -- unix:/var/run/ovn/ovnnb_db.sock
//! ```

use nb_model::{LogicalSwitch, LogicalSwitchPort, OvnNorthbound};
use ovsdb_proto::model::Table;
use ovsdb_proto::typed::Db;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), ovsdb_proto::Error> {
    let remote = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "unix:/var/run/ovn/ovnnb_db.sock".into());
    let (client, _notifications) = ovsdb_proto::connect(&remote).await?;
    // Compares the server's schema with the model's; differences are in db.skew().
    let db = Db::<OvnNorthbound>::connect(client).await?;

    let mut txn = db.transaction();
    let mut ports = Vec::new();
    for (name, mac) in [
        ("sw1-p1", "0a:00:00:00:01:01"),
        ("sw1-p2", "0a:00:00:00:01:02"),
    ] {
        let port = LogicalSwitchPort {
            name: name.into(),
            addresses: [mac.to_string()].into(),
            ..Default::default()
        };
        ports.push(txn.insert(&port));
    }
    let mut switch = LogicalSwitch::named("sw1");
    switch.ports = ports.into_iter().collect();
    let sw = txn.insert(&switch);
    let result = txn.commit().await?;
    println!(
        "Logical_Switch sw1: {}",
        result.uuid(&sw).expect("inserted")
    );

    for s in db.select([LogicalSwitch::COLUMNS.name.eq("sw1")]).await? {
        println!("  {} has {} ports", s.name, s.ports.len());
    }
    Ok(())
}
