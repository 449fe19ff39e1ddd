use ovsdb_proto::Uuid;

#[derive(Clone, Default, PartialEq, ovsdb_derive::Table)]
struct Switch {
    _uuid: Uuid,
    #[ovsdb(uuid)]
    id: String,
}

fn main() {}
