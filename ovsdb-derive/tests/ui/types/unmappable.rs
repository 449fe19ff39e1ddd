use std::collections::HashMap;

use ovsdb_proto::Uuid;

#[derive(Clone, Default, PartialEq, ovsdb_derive::Table)]
struct Port {
    _uuid: Uuid,
    tag: u32,
    addresses: Vec<String>,
    options: HashMap<String, String>,
    nested: Option<Option<i64>>,
}

fn main() {}
