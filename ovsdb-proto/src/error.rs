//! The one error type of this crate, with queries that tell its kinds apart.

use std::fmt;
use std::sync::Arc;

use crate::codec::CodecError;

pub use crate::reply::{ServerError, TransactionError};

/// The broad kind of an [`Error`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The connection is closed (by either side, or after an earlier failure).
    Closed,
    /// Reading from or writing to the transport failed, or connecting did.
    Io,
    /// The peer broke the protocol: malformed JSON, a reply to no request, a message
    /// over the size limit, a reply of the wrong shape.
    Protocol,
    /// The server answered a request with an error.
    Server,
    /// The server refused a transaction.
    Transaction,
    /// A remote string, a TLS setting or another argument given by the caller is invalid.
    Config,
    /// A datum does not fit its column.
    Datum,
    /// No usable connection: the request was not sent and may be retried.
    Unavailable,
    /// The connection ended after the request was sent: it may or may not have taken
    /// effect.
    OutcomeUnknown,
    /// The cache is held back by a lossless event stream whose reader is behind, so
    /// it shows nothing new (the message names the stream).
    HeldBack,
}

#[derive(Debug)]
enum Repr {
    Closed(Option<Arc<str>>),
    /// Closed by the inactivity probe: nothing came for this long after a probe.
    Silent(std::time::Duration),
    Io(std::io::Error),
    Protocol(String),
    Server {
        method: String,
        error: ServerError,
    },
    Transaction(TransactionError),
    Config(String),
    Datum(crate::schema::DatumError),
    Unavailable(Error),
    OutcomeUnknown(Error),
    HeldBack(String),
    NotReady(String),
}

/// The error of every fallible operation in this crate.
pub struct Error(Box<Repr>);

impl Error {
    pub(crate) fn closed(reason: Option<Arc<str>>) -> Error {
        Error(Box::new(Repr::Closed(reason)))
    }

    /// The connection closed by the inactivity probe: no message for `period` after
    /// a probe.
    pub(crate) fn silent(period: std::time::Duration) -> Error {
        Error(Box::new(Repr::Silent(period)))
    }

    /// True when the connection this error comes from was closed by the inactivity
    /// probe (the server sent nothing for two probe intervals): a dead server, or one
    /// too busy to answer, such as one composing the reply to a monitor of a big
    /// database.
    pub fn is_inactivity_timeout(&self) -> bool {
        match &*self.0 {
            Repr::Silent(_) => true,
            Repr::Unavailable(c) | Repr::OutcomeUnknown(c) => c.is_inactivity_timeout(),
            _ => false,
        }
    }

    pub(crate) fn io(e: std::io::Error) -> Error {
        Error(Box::new(Repr::Io(e)))
    }

    pub(crate) fn protocol(msg: impl std::fmt::Display) -> Error {
        Error(Box::new(Repr::Protocol(msg.to_string())))
    }

    pub(crate) fn server(method: &str, error: ServerError) -> Error {
        Error(Box::new(Repr::Server {
            method: method.to_owned(),
            error,
        }))
    }

    pub(crate) fn transaction(e: TransactionError) -> Error {
        Error(Box::new(Repr::Transaction(e)))
    }

    /// The request was not sent because the connection is down (for `cause`).
    pub(crate) fn unavailable(cause: Error) -> Error {
        match *cause.0 {
            Repr::Unavailable(_) => cause,
            _ => Error(Box::new(Repr::Unavailable(cause))),
        }
    }

    pub(crate) fn outcome_unknown(cause: Error) -> Error {
        match *cause.0 {
            Repr::OutcomeUnknown(_) => cause,
            _ => Error(Box::new(Repr::OutcomeUnknown(cause))),
        }
    }

    /// A request not sent because the cache has no usable server now.
    pub(crate) fn cache_not_connected() -> Error {
        Error::unavailable(Error::closed(Some(
            "the cache is not connected to a usable server".into(),
        )))
    }

    /// A cache that did not sync in time (an [`ErrorKind::Unavailable`]).
    pub(crate) fn not_ready(msg: String) -> Error {
        Error(Box::new(Repr::NotReady(msg)))
    }

    pub(crate) fn held_back(msg: String) -> Error {
        Error(Box::new(Repr::HeldBack(msg)))
    }

    pub(crate) fn config(msg: impl Into<String>) -> Error {
        Error(Box::new(Repr::Config(msg.into())))
    }

    /// What kind of error this is.
    pub fn kind(&self) -> ErrorKind {
        match &*self.0 {
            Repr::Closed(_) | Repr::Silent(_) => ErrorKind::Closed,
            Repr::Io(_) => ErrorKind::Io,
            Repr::Protocol(_) => ErrorKind::Protocol,
            Repr::Server { .. } => ErrorKind::Server,
            Repr::Transaction(_) => ErrorKind::Transaction,
            Repr::Config(_) => ErrorKind::Config,
            Repr::Datum(_) => ErrorKind::Datum,
            Repr::Unavailable(_) => ErrorKind::Unavailable,
            Repr::OutcomeUnknown(_) => ErrorKind::OutcomeUnknown,
            Repr::HeldBack(_) => ErrorKind::HeldBack,
            Repr::NotReady(_) => ErrorKind::Unavailable,
        }
    }

    /// The error behind an [`ErrorKind::OutcomeUnknown`], or this error itself.
    fn cause(&self) -> &Error {
        match &*self.0 {
            Repr::OutcomeUnknown(c) | Repr::Unavailable(c) => c,
            _ => self,
        }
    }

    /// True when the request was certainly not carried out and can be sent again (the
    /// connection was down, or closed before the request went out).
    pub fn is_retryable(&self) -> bool {
        self.kind() == ErrorKind::Unavailable
    }

    /// True when the connection ended after the request was sent, so whether it took
    /// effect is unknown.
    pub fn is_outcome_unknown(&self) -> bool {
        self.kind() == ErrorKind::OutcomeUnknown
    }

    /// True when the connection is closed (also when that left a request's outcome
    /// unknown).
    pub fn is_closed(&self) -> bool {
        self.cause().kind() == ErrorKind::Closed
    }

    /// True when the peer broke the protocol (also when that left a request's outcome
    /// unknown).
    pub fn is_protocol(&self) -> bool {
        self.cause().kind() == ErrorKind::Protocol
    }

    /// The server's error, for an error reply to a request.
    pub fn as_server_error(&self) -> Option<&ServerError> {
        match &*self.0 {
            Repr::Server { error, .. } => Some(error),
            Repr::Transaction(t) => Some(&t.error),
            _ => None,
        }
    }

    /// The refused transaction, for a transaction error.
    pub fn as_transaction_error(&self) -> Option<&TransactionError> {
        match &*self.0 {
            Repr::Transaction(t) => Some(t),
            _ => None,
        }
    }

    /// The datum error, for a value that does not fit its column.
    pub fn as_datum_error(&self) -> Option<&crate::schema::DatumError> {
        match &*self.0 {
            Repr::Datum(d) => Some(d),
            _ => None,
        }
    }

    /// A copy good enough to hand to every request that a failure ends: the kind and the
    /// message are kept, an I/O error's source becomes text.
    pub(crate) fn duplicate(&self) -> Error {
        Error(Box::new(match &*self.0 {
            Repr::Closed(r) => Repr::Closed(r.clone()),
            Repr::Silent(p) => Repr::Silent(*p),
            Repr::Io(e) => Repr::Io(std::io::Error::new(e.kind(), e.to_string())),
            Repr::Protocol(m) => Repr::Protocol(m.clone()),
            Repr::Server { method, error } => Repr::Server {
                method: method.clone(),
                error: error.clone(),
            },
            Repr::Transaction(t) => Repr::Transaction(t.clone()),
            Repr::Config(m) => Repr::Config(m.clone()),
            Repr::Datum(d) => Repr::Datum(d.clone()),
            Repr::Unavailable(c) => Repr::Unavailable(c.duplicate()),
            Repr::OutcomeUnknown(c) => Repr::OutcomeUnknown(c.duplicate()),
            Repr::HeldBack(m) => Repr::HeldBack(m.clone()),
            Repr::NotReady(m) => Repr::NotReady(m.clone()),
        }))
    }
}

/// `{:?}` is the kind and the message on one short line (what `main() -> Result<_,
/// Error>` prints); `{:#?}` is the whole structure (a refused transaction's results,
/// the server's error and details as fields).
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            f.debug_tuple("Error").field(&self.0).finish()
        } else {
            write!(f, "Error({:?}: {self})", self.kind())
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0 {
            Repr::Closed(None) => f.write_str("connection closed"),
            Repr::Closed(Some(r)) => write!(f, "connection closed: {r}"),
            Repr::Silent(p) => write!(
                f,
                "connection closed: no message from the server for {p:?} after an inactivity probe"
            ),
            Repr::Io(e) => write!(f, "i/o error: {e}"),
            Repr::Protocol(m) => write!(f, "protocol error: {m}"),
            Repr::Server { method, error } => write!(f, "{method} failed: {error}"),
            Repr::Transaction(t) => t.fmt(f),
            Repr::Config(m) => f.write_str(m),
            Repr::Datum(d) => d.fmt(f),
            Repr::Unavailable(c) => write!(f, "not sent, no usable connection: {c}"),
            Repr::OutcomeUnknown(c) => write!(
                f,
                "outcome unknown, the connection ended after the request was sent: {c}"
            ),
            Repr::HeldBack(m) | Repr::NotReady(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &*self.0 {
            Repr::Io(e) => Some(e),
            Repr::Datum(d) => Some(d),
            Repr::OutcomeUnknown(c) | Repr::Unavailable(c) => Some(c),
            _ => None,
        }
    }
}

impl From<CodecError> for Error {
    fn from(e: CodecError) -> Error {
        match e {
            CodecError::Io(io) => Error::io(io),
            other => Error::protocol(other.to_string()),
        }
    }
}

impl From<crate::schema::DatumError> for Error {
    fn from(e: crate::schema::DatumError) -> Error {
        Error(Box::new(Repr::Datum(e)))
    }
}

impl From<crate::remote::RemoteError> for Error {
    fn from(e: crate::remote::RemoteError) -> Error {
        Error::config(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_is_one_short_line_and_the_alternate_form_has_the_structure() {
        let details =
            "cannot delete Logical_Switch_Port row 0b1c… because of 1 remaining reference(s)";
        let raw =
            serde_json::json!({"error": "referential integrity violation", "details": details});
        let e = Error::transaction(TransactionError {
            operation: None,
            operations: 4,
            error: ServerError::from_json(raw),
            results: vec![crate::ops::OperationResult::Count(1); 4],
        });
        let short = format!("{e:?}");
        assert_eq!(
            short,
            format!("Error(Transaction: transaction failed at commit: referential integrity violation: {details})")
        );
        assert_eq!(short.matches(details).count(), 1, "the details once");
        let long = format!("{e:#?}");
        assert!(
            long.contains("results") && long.lines().count() > 10,
            "{long}"
        );
    }
}
