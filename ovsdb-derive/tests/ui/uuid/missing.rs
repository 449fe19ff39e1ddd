#[derive(Clone, Default, PartialEq, ovsdb_derive::Table)]
struct Switch {
    name: String,
}

fn main() {}
