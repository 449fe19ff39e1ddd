//! Remote strings as `ovn-nbctl --db` and `ovsdb-client` take them: `tcp:HOST:PORT`,
//! `ssl:HOST:PORT`, `unix:PATH`, IPv6 literals in brackets, several separated by commas.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// The port used when a `tcp:` or `ssl:` remote gives none (IANA's port for OVSDB).
pub const DEFAULT_PORT: u16 = 6640;

/// A remote that could not be parsed, with the text and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid remote \"{text}\": {reason}")]
pub struct RemoteError {
    /// The remote as given.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Where to connect.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Remote {
    /// `tcp:HOST:PORT`.
    Tcp {
        /// A host name or an IP address (without brackets).
        host: String,
        /// The port.
        port: u16,
    },
    /// `ssl:HOST:PORT`: TLS over TCP.
    Ssl {
        /// A host name or an IP address (without brackets).
        host: String,
        /// The port.
        port: u16,
    },
    /// `unix:PATH`.
    Unix(PathBuf),
}

impl Remote {
    /// Parses one remote.
    pub fn parse(text: &str) -> Result<Remote, RemoteError> {
        let fail = |reason: &str| RemoteError {
            text: text.to_owned(),
            reason: reason.to_owned(),
        };
        let (scheme, rest) = text
            .split_once(':')
            .ok_or_else(|| fail("expected tcp:HOST:PORT, ssl:HOST:PORT or unix:PATH"))?;
        match scheme {
            "unix" => {
                if rest.is_empty() {
                    return Err(fail("unix: needs a socket path"));
                }
                Ok(Remote::Unix(PathBuf::from(rest)))
            }
            "tcp" | "ssl" => {
                let (host, port) = split_host_port(rest).map_err(|r| fail(&r))?;
                Ok(if scheme == "tcp" {
                    Remote::Tcp { host, port }
                } else {
                    Remote::Ssl { host, port }
                })
            }
            "ptcp" | "pssl" | "punix" => Err(fail(
                "passive remotes are for servers to listen on; a client needs tcp:, ssl: or unix:",
            )),
            _ => Err(fail(
                "unknown scheme: expected tcp:HOST:PORT, ssl:HOST:PORT or unix:PATH",
            )),
        }
    }

    /// Parses a comma-separated list of remotes, as `--db` accepts.
    pub fn parse_list(text: &str) -> Result<Vec<Remote>, RemoteError> {
        let list: Vec<Remote> = text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(Remote::parse)
            .collect::<Result<_, _>>()?;
        if list.is_empty() {
            return Err(RemoteError {
                text: text.to_owned(),
                reason: "no remote given".into(),
            });
        }
        Ok(list)
    }
}

fn split_host_port(rest: &str) -> Result<(String, u16), String> {
    let (host, port) = if let Some(after) = rest.strip_prefix('[') {
        let (host, tail) = after
            .split_once(']')
            .ok_or("an IPv6 address opened with '[' is not closed with ']'")?;
        let port = match tail {
            "" => None,
            t => Some(t.strip_prefix(':').ok_or("expected ':' after ']'")?),
        };
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("\"{host}\" is not an IPv6 address"));
        }
        (host, port)
    } else {
        match rest.split_once(':') {
            Some((h, p)) if !p.contains(':') => (h, Some(p)),
            Some(_) => {
                return Err("an IPv6 address must be written in brackets, as [::1]:6641".into())
            }
            None => (rest, None),
        }
    };
    if host.is_empty() {
        return Err("missing host".into());
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("\"{p}\" is not a port number (1-65535)"))?,
    };
    Ok((host.to_owned(), port))
}

impl FromStr for Remote {
    type Err = RemoteError;
    fn from_str(s: &str) -> Result<Remote, RemoteError> {
        Remote::parse(s)
    }
}

impl fmt::Display for Remote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host_port = |f: &mut fmt::Formatter<'_>, scheme: &str, host: &str, port: u16| {
            if host.contains(':') {
                write!(f, "{scheme}:[{host}]:{port}")
            } else {
                write!(f, "{scheme}:{host}:{port}")
            }
        };
        match self {
            Remote::Tcp { host, port } => host_port(f, "tcp", host, *port),
            Remote::Ssl { host, port } => host_port(f, "ssl", host, *port),
            Remote::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_ovn_nbctl_accepts() {
        assert_eq!(
            Remote::parse("tcp:127.0.0.1:6641").unwrap(),
            Remote::Tcp {
                host: "127.0.0.1".into(),
                port: 6641
            }
        );
        assert_eq!(
            Remote::parse("ssl:[fd00::1]:6641").unwrap(),
            Remote::Ssl {
                host: "fd00::1".into(),
                port: 6641
            }
        );
        assert_eq!(
            Remote::parse("tcp:[::1]").unwrap(),
            Remote::Tcp {
                host: "::1".into(),
                port: DEFAULT_PORT
            }
        );
        assert_eq!(
            Remote::parse("tcp:ovn-central").unwrap(),
            Remote::Tcp {
                host: "ovn-central".into(),
                port: 6640
            }
        );
        assert_eq!(
            Remote::parse("unix:/var/run/ovn/ovnnb_db.sock").unwrap(),
            Remote::Unix("/var/run/ovn/ovnnb_db.sock".into())
        );
        let list =
            Remote::parse_list("tcp:10.0.0.1:6641,tcp:10.0.0.2:6641, tcp:[::1]:6641").unwrap();
        assert_eq!(list.len(), 3);
        assert_eq!(list[2].to_string(), "tcp:[::1]:6641");
    }

    #[test]
    fn display_round_trips() {
        for t in [
            "tcp:1.2.3.4:5",
            "ssl:[::1]:6641",
            "unix:/x/y.sock",
            "tcp:host:6640",
        ] {
            assert_eq!(Remote::parse(t).unwrap().to_string(), t);
        }
    }

    #[test]
    fn bad_remotes_say_why() {
        let cases = [
            ("6641", "expected tcp:HOST:PORT"),
            ("http:x:1", "unknown scheme"),
            ("ptcp:6641", "passive remotes"),
            ("tcp::6641", "missing host"),
            ("tcp:h:99999", "not a port number"),
            ("tcp:h:0", "not a port number"),
            ("tcp:::1:6641", "must be written in brackets"),
            ("tcp:[::1:6641", "not closed"),
            ("tcp:[zz]:1", "not an IPv6 address"),
            ("unix:", "needs a socket path"),
            ("", "expected tcp:HOST:PORT"),
        ];
        for (text, needle) in cases {
            let e = Remote::parse(text).unwrap_err();
            assert!(e.to_string().contains(needle), "{text}: {e}");
            assert!(e.to_string().contains(&format!("\"{text}\"")), "{e}");
        }
        assert!(Remote::parse_list(" , ")
            .unwrap_err()
            .to_string()
            .contains("no remote"));
    }
}
