use ovsdb_proto::Uuid;

#[derive(Clone, Default, PartialEq)]
struct NotAnAtom;

#[derive(Clone, Default, PartialEq, ovsdb_derive::Table)]
struct Port {
    _uuid: Uuid,
    weird: NotAnAtom,
}

fn main() {}
