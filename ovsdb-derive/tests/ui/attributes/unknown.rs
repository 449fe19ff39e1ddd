use ovsdb_proto::Uuid;

#[derive(Clone, Default, PartialEq, ovsdb_derive::Table)]
#[ovsdb(tabel = "Logical_Switch")]
struct Switch {
    #[ovsdb(uuid)]
    uuid: Uuid,
    #[ovsdb(colum = "name")]
    name: String,
}

fn main() {}
