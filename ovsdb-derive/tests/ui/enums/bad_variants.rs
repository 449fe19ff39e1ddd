#[derive(Clone, Default, PartialEq, ovsdb_derive::Enum)]
enum Action {
    #[default]
    #[ovsdb(rename = "allow")]
    Allow,
    #[ovsdb(rename = "allow")]
    AllowAgain,
    Drop(i64),
    #[ovsdb(other)]
    Other(u8),
}

fn main() {}
