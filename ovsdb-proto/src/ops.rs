//! Transaction operations (RFC 7047 §5.2) and their results.

use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::Serialize;
use uuid::Uuid;

use crate::datum::{Datum, Row};

/// A condition function of a `where` clause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Function {
    /// `<`, on integers and reals.
    Lt,
    /// `<=`.
    Le,
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `>=`.
    Ge,
    /// `>`.
    Gt,
    /// `includes`: the column holds every element of the value.
    Includes,
    /// `excludes`: the column holds no element of the value.
    Excludes,
}

impl Function {
    /// The function as written on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Function::Lt => "<",
            Function::Le => "<=",
            Function::Eq => "==",
            Function::Ne => "!=",
            Function::Ge => ">=",
            Function::Gt => ">",
            Function::Includes => "includes",
            Function::Excludes => "excludes",
        }
    }
}

/// One `[column, function, value]` condition.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    /// The column tested (may be `_uuid`).
    pub column: String,
    /// The test.
    pub function: Function,
    /// The value tested against.
    pub value: Datum,
}

impl Condition {
    /// A condition from its three parts.
    pub fn new(column: impl Into<String>, function: Function, value: impl Into<Datum>) -> Self {
        Condition {
            column: column.into(),
            function,
            value: value.into(),
        }
    }

    /// `column == value`.
    pub fn eq(column: impl Into<String>, value: impl Into<Datum>) -> Self {
        Condition::new(column, Function::Eq, value)
    }

    /// `_uuid == uuid`.
    pub fn uuid(uuid: Uuid) -> Self {
        Condition::new("_uuid", Function::Eq, Datum::uuid(uuid))
    }
}

impl Serialize for Condition {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(3))?;
        seq.serialize_element(&self.column)?;
        seq.serialize_element(self.function.as_str())?;
        seq.serialize_element(&self.value)?;
        seq.end()
    }
}

/// A mutator of a `mutate` operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutator {
    /// `+=`.
    Add,
    /// `-=`.
    Sub,
    /// `*=`.
    Mul,
    /// `/=`.
    Div,
    /// `%=`.
    Mod,
    /// `insert`: add elements to a set, or pairs whose key is absent to a map.
    Insert,
    /// `delete`: remove elements from a set, or keys (given as a set) or pairs from a map.
    Delete,
}

impl Mutator {
    /// The mutator as written on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Mutator::Add => "+=",
            Mutator::Sub => "-=",
            Mutator::Mul => "*=",
            Mutator::Div => "/=",
            Mutator::Mod => "%=",
            Mutator::Insert => "insert",
            Mutator::Delete => "delete",
        }
    }
}

/// One `[column, mutator, value]` mutation.
#[derive(Clone, Debug, PartialEq)]
pub struct Mutation {
    /// The column changed.
    pub column: String,
    /// How.
    pub mutator: Mutator,
    /// The operand.
    pub value: Datum,
}

impl Mutation {
    /// A mutation from its three parts.
    pub fn new(column: impl Into<String>, mutator: Mutator, value: impl Into<Datum>) -> Self {
        Mutation {
            column: column.into(),
            mutator,
            value: value.into(),
        }
    }
}

impl Serialize for Mutation {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(3))?;
        seq.serialize_element(&self.column)?;
        seq.serialize_element(self.mutator.as_str())?;
        seq.serialize_element(&self.value)?;
        seq.end()
    }
}

/// The `until` of a `wait` operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitUntil {
    /// Wait until the selected rows equal the given rows.
    Equal,
    /// Wait until they differ.
    NotEqual,
}

/// One operation of a transaction.
#[derive(Clone, Debug, PartialEq)]
pub enum Operation {
    /// Insert a row; `uuid_name` lets later operations refer to it as a named-uuid.
    Insert {
        /// The table.
        table: String,
        /// Column values; columns left out get their defaults.
        row: Row,
        /// The name later operations use in `["named-uuid", NAME]`.
        uuid_name: Option<String>,
    },
    /// Read rows.
    Select {
        /// The table.
        table: String,
        /// Conditions, all of which a row must meet.
        conditions: Vec<Condition>,
        /// Columns to return; all of them when `None`.
        columns: Option<Vec<String>>,
    },
    /// Set columns in every matching row.
    Update {
        /// The table.
        table: String,
        /// Conditions.
        conditions: Vec<Condition>,
        /// New values.
        row: Row,
    },
    /// Change columns in place in every matching row.
    Mutate {
        /// The table.
        table: String,
        /// Conditions.
        conditions: Vec<Condition>,
        /// Mutations, applied in order.
        mutations: Vec<Mutation>,
    },
    /// Delete every matching row.
    Delete {
        /// The table.
        table: String,
        /// Conditions.
        conditions: Vec<Condition>,
    },
    /// Wait until (or check that) the matching rows' columns equal (or differ from) `rows`.
    Wait {
        /// The table.
        table: String,
        /// How long to wait in milliseconds; `Some(0)` checks without waiting.
        timeout: Option<u64>,
        /// Conditions.
        conditions: Vec<Condition>,
        /// Columns compared.
        columns: Vec<String>,
        /// Equal or not equal.
        until: WaitUntil,
        /// The rows to compare with.
        rows: Vec<Row>,
    },
    /// Ask for the commit to be durable (on disk) before the reply.
    Commit {
        /// Durable or not.
        durable: bool,
    },
    /// Abort the transaction; it fails with `aborted`.
    Abort,
    /// A comment recorded in the database log.
    Comment(String),
    /// Fail unless this client holds the named lock.
    Assert {
        /// The lock name.
        lock: String,
    },
}

impl Operation {
    /// An insert without a named-uuid.
    pub fn insert(table: impl Into<String>, row: Row) -> Operation {
        Operation::Insert {
            table: table.into(),
            row,
            uuid_name: None,
        }
    }

    /// An insert that later operations can refer to as `["named-uuid", name]`.
    pub fn insert_named(table: impl Into<String>, row: Row, name: impl Into<String>) -> Operation {
        Operation::Insert {
            table: table.into(),
            row,
            uuid_name: Some(name.into()),
        }
    }

    /// A select of all columns.
    pub fn select(table: impl Into<String>, conditions: Vec<Condition>) -> Operation {
        Operation::Select {
            table: table.into(),
            conditions,
            columns: None,
        }
    }

    /// The operation's name on the wire (`insert`, `select`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Operation::Insert { .. } => "insert",
            Operation::Select { .. } => "select",
            Operation::Update { .. } => "update",
            Operation::Mutate { .. } => "mutate",
            Operation::Delete { .. } => "delete",
            Operation::Wait { .. } => "wait",
            Operation::Commit { .. } => "commit",
            Operation::Abort => "abort",
            Operation::Comment(_) => "comment",
            Operation::Assert { .. } => "assert",
        }
    }
}

impl Operation {
    /// Writes the operation as JSON into `out`, byte for byte as its `Serialize`
    /// implementation writes it, with the member names around the values of the
    /// operations that writes are made of (insert, update, mutate, delete) written
    /// whole instead of as strings escaped one by one: a transaction is encoded on the
    /// way to the server, between one reply and the next request.
    pub(crate) fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        fn member<T: Serialize + ?Sized>(
            out: &mut Vec<u8>,
            before: &[u8],
            value: &T,
        ) -> serde_json::Result<()> {
            out.extend_from_slice(before);
            serde_json::to_writer(&mut *out, value)
        }
        match self {
            Operation::Insert {
                table,
                row,
                uuid_name,
            } => {
                member(out, br#"{"op":"insert","table":"#, table)?;
                member(out, br#","row":"#, row)?;
                if let Some(n) = uuid_name {
                    member(out, br#","uuid-name":"#, n)?;
                }
            }
            Operation::Update {
                table,
                conditions,
                row,
            } => {
                member(out, br#"{"op":"update","table":"#, table)?;
                member(out, br#","where":"#, conditions)?;
                member(out, br#","row":"#, row)?;
            }
            Operation::Mutate {
                table,
                conditions,
                mutations,
            } => {
                member(out, br#"{"op":"mutate","table":"#, table)?;
                member(out, br#","where":"#, conditions)?;
                member(out, br#","mutations":"#, mutations)?;
            }
            Operation::Delete { table, conditions } => {
                member(out, br#"{"op":"delete","table":"#, table)?;
                member(out, br#","where":"#, conditions)?;
            }
            other => return serde_json::to_writer(out, other),
        }
        out.push(b'}');
        Ok(())
    }
}

impl Serialize for Operation {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("op", self.name())?;
        match self {
            Operation::Insert {
                table,
                row,
                uuid_name,
            } => {
                m.serialize_entry("table", table)?;
                m.serialize_entry("row", row)?;
                if let Some(n) = uuid_name {
                    m.serialize_entry("uuid-name", n)?;
                }
            }
            Operation::Select {
                table,
                conditions,
                columns,
            } => {
                m.serialize_entry("table", table)?;
                m.serialize_entry("where", conditions)?;
                if let Some(c) = columns {
                    m.serialize_entry("columns", c)?;
                }
            }
            Operation::Update {
                table,
                conditions,
                row,
            } => {
                m.serialize_entry("table", table)?;
                m.serialize_entry("where", conditions)?;
                m.serialize_entry("row", row)?;
            }
            Operation::Mutate {
                table,
                conditions,
                mutations,
            } => {
                m.serialize_entry("table", table)?;
                m.serialize_entry("where", conditions)?;
                m.serialize_entry("mutations", mutations)?;
            }
            Operation::Delete { table, conditions } => {
                m.serialize_entry("table", table)?;
                m.serialize_entry("where", conditions)?;
            }
            Operation::Wait {
                table,
                timeout,
                conditions,
                columns,
                until,
                rows,
            } => {
                m.serialize_entry("table", table)?;
                if let Some(t) = timeout {
                    m.serialize_entry("timeout", t)?;
                }
                m.serialize_entry("where", conditions)?;
                m.serialize_entry("columns", columns)?;
                m.serialize_entry(
                    "until",
                    match until {
                        WaitUntil::Equal => "==",
                        WaitUntil::NotEqual => "!=",
                    },
                )?;
                m.serialize_entry("rows", rows)?;
            }
            Operation::Commit { durable } => m.serialize_entry("durable", durable)?,
            Operation::Abort => {}
            Operation::Comment(c) => m.serialize_entry("comment", c)?,
            Operation::Assert { lock } => m.serialize_entry("lock", lock)?,
        }
        m.end()
    }
}

/// The result of one successful operation.
#[derive(Clone, Debug, PartialEq)]
pub enum OperationResult {
    /// An insert: the new row's uuid.
    Insert {
        /// The uuid the server gave the row.
        uuid: Uuid,
    },
    /// A select: the rows found, with the columns asked for.
    Select {
        /// The rows.
        rows: Vec<Row>,
    },
    /// An update, mutate or delete: how many rows matched.
    Count(u64),
    /// Any other operation, which returns `{}`.
    Empty,
}

impl OperationResult {
    /// The uuid of an insert.
    pub fn uuid(&self) -> Option<Uuid> {
        match self {
            OperationResult::Insert { uuid } => Some(*uuid),
            _ => None,
        }
    }

    /// The rows of a select.
    pub fn rows(&self) -> Option<&[Row]> {
        match self {
            OperationResult::Select { rows } => Some(rows),
            _ => None,
        }
    }

    /// The count of an update, mutate or delete.
    pub fn count(&self) -> Option<u64> {
        match self {
            OperationResult::Count(c) => Some(*c),
            _ => None,
        }
    }

    /// What this result is, in RFC 7047's words (§5.2).
    pub fn shape(&self) -> &'static str {
        match self {
            OperationResult::Insert { .. } => "an insert's uuid",
            OperationResult::Select { .. } => "a select's rows",
            OperationResult::Count(_) => "a count",
            OperationResult::Empty => "an empty result",
        }
    }
}

/// The shape of result RFC 7047 §5.2 gives an operation: a uuid for an insert, rows for
/// a select, a count for an update, mutate or delete, nothing for the others.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ResultShape {
    operation: &'static str,
    expected: fn(&OperationResult) -> bool,
}

impl ResultShape {
    /// The shape of `operation`'s result.
    pub(crate) fn of(operation: &Operation) -> ResultShape {
        let expected: fn(&OperationResult) -> bool = match operation {
            Operation::Insert { .. } => |r| matches!(r, OperationResult::Insert { .. }),
            Operation::Select { .. } => |r| matches!(r, OperationResult::Select { .. }),
            Operation::Update { .. } | Operation::Mutate { .. } | Operation::Delete { .. } => {
                |r| matches!(r, OperationResult::Count(_))
            }
            _ => |r| matches!(r, OperationResult::Empty),
        };
        ResultShape {
            operation: operation.name(),
            expected,
        }
    }

    /// Checks each of `results` against the shape of the operation that asked for it;
    /// the error names the first operation answered with another's kind of result.
    pub(crate) fn check(shapes: &[ResultShape], results: &[OperationResult]) -> Result<(), String> {
        for (i, (shape, r)) in shapes.iter().zip(results).enumerate() {
            if !(shape.expected)(r) {
                return Err(format!(
                    "transact reply: operation {i} ({}) was answered with {}",
                    shape.operation,
                    r.shape()
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// One operation of each kind, inserting `row`.
    fn every_kind(row: &Row) -> Vec<Operation> {
        vec![
            Operation::insert_named("Logical_Switch", row.clone(), "sw"),
            Operation::Select {
                table: "Logical_Switch".into(),
                conditions: vec![Condition::eq("name", "sw0")],
                columns: Some(vec!["ports".into()]),
            },
            Operation::Mutate {
                table: "Logical_Switch".into(),
                conditions: vec![Condition::new("name", Function::Ne, "x")],
                mutations: vec![Mutation::new(
                    "external_ids",
                    Mutator::Insert,
                    Datum::map([("k", "v")]),
                )],
            },
            Operation::Wait {
                table: "T".into(),
                timeout: Some(0),
                conditions: vec![],
                columns: vec!["name".into()],
                until: WaitUntil::NotEqual,
                rows: vec![],
            },
            Operation::Commit { durable: false },
            Operation::Abort,
            Operation::Comment("hi".into()),
            Operation::Assert { lock: "l".into() },
            Operation::Delete {
                table: "T".into(),
                conditions: vec![],
            },
        ]
    }

    #[test]
    fn operations_written_whole_are_byte_for_byte_what_serde_writes() {
        // Strings that need escaping, a named insert and one without a name, an update.
        let mut row = Row::new();
        row.insert("name".into(), Datum::scalar("sw\"0\u{1}é"));
        row.insert("ports".into(), Datum::named_uuid("p0"));
        let mut ops = every_kind(&row);
        ops.push(Operation::insert("Logical\\Switch", row.clone()));
        ops.push(Operation::Update {
            table: "Logical_Switch".into(),
            conditions: vec![Condition::eq("_uuid", Datum::named_uuid("n"))],
            row,
        });
        for op in &ops {
            let mut whole = Vec::new();
            op.write_json(&mut whole).unwrap();
            let serde = serde_json::to_vec(op).unwrap();
            assert_eq!(
                String::from_utf8(whole).unwrap(),
                String::from_utf8(serde).unwrap(),
                "{op:?}"
            );
        }
    }

    #[test]
    fn operations_serialize_as_rfc_7047_objects() {
        let mut row = Row::new();
        row.insert("name".into(), Datum::scalar("sw0"));
        row.insert("ports".into(), Datum::named_uuid("p0"));
        let ops = every_kind(&row);
        assert_eq!(
            serde_json::to_value(&ops).unwrap(),
            json!([
                {"op": "insert", "table": "Logical_Switch", "uuid-name": "sw",
                 "row": {"name": "sw0", "ports": ["named-uuid", "p0"]}},
                {"op": "select", "table": "Logical_Switch", "where": [["name", "==", "sw0"]], "columns": ["ports"]},
                {"op": "mutate", "table": "Logical_Switch", "where": [["name", "!=", "x"]],
                 "mutations": [["external_ids", "insert", ["map", [["k", "v"]]]]]},
                {"op": "wait", "table": "T", "timeout": 0, "where": [], "columns": ["name"], "until": "!=", "rows": []},
                {"op": "commit", "durable": false},
                {"op": "abort"},
                {"op": "comment", "comment": "hi"},
                {"op": "assert", "lock": "l"},
                {"op": "delete", "table": "T", "where": []},
            ])
        );
    }
}
