//! Creates a Logical_Switch holding two new Logical_Switch_Ports in one transaction:
//! the ports are inserted with `uuid-name`s and the switch refers to them as
//! named-uuids, so all three rows commit together or not at all.
//!
//! ```text
//! cargo run -p ovsdb-proto --example transact -- unix:/var/run/ovn/ovnnb_db.sock
//! ```

use ovsdb_proto::{Condition, Datum, Operation, Row};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), ovsdb_proto::Error> {
    let remote = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "unix:/var/run/ovn/ovnnb_db.sock".into());
    let (client, _notifications) = ovsdb_proto::connect(&remote).await?;

    let port = |name: &str, mac: &str| {
        let mut row = Row::new();
        row.insert("name".into(), Datum::scalar(name));
        row.insert("addresses".into(), Datum::set([mac]));
        row
    };
    let mut switch = Row::new();
    switch.insert("name".into(), Datum::scalar("sw0"));
    switch.insert(
        "ports".into(),
        Datum::set([
            ovsdb_proto::Atom::NamedUuid("p1".into()),
            ovsdb_proto::Atom::NamedUuid("p2".into()),
        ]),
    );

    let results = client
        .transact(
            "OVN_Northbound",
            &[
                Operation::insert_named(
                    "Logical_Switch_Port",
                    port("sw0-p1", "0a:00:00:00:00:01"),
                    "p1",
                ),
                Operation::insert_named(
                    "Logical_Switch_Port",
                    port("sw0-p2", "0a:00:00:00:00:02"),
                    "p2",
                ),
                Operation::insert_named("Logical_Switch", switch, "sw"),
                Operation::Select {
                    table: "Logical_Switch".into(),
                    conditions: vec![Condition::eq("name", "sw0")],
                    columns: Some(vec!["_uuid".into(), "ports".into()]),
                },
            ],
        )
        .await?;

    let switch_uuid = results[2].uuid().expect("an insert returns a uuid");
    println!("Logical_Switch sw0: {switch_uuid}");
    println!(
        "  port sw0-p1: {}",
        results[0].uuid().expect("an insert returns a uuid")
    );
    println!(
        "  port sw0-p2: {}",
        results[1].uuid().expect("an insert returns a uuid")
    );
    if let Some(rows) = results[3].rows() {
        println!("  ports column as read back: {}", rows[0]["ports"]);
    }
    Ok(())
}
