use ovsdb_proto::Uuid;

#[derive(Clone, Default, PartialEq, ovsdb_derive::Table)]
struct Switch {
    _uuid: Uuid,
    name: String,
    #[ovsdb(column = "name")]
    other_name: String,
    #[ovsdb(column = "_hidden")]
    hidden: String,
}

fn main() {}
