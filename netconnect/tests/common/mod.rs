//! What netconnect's process-level tests share: the daemon's binary, a daemon
//! serving its endpoints, an HTTP GET for them, a polling wait, and a child process
//! killed on drop or stopped as a container engine stops one.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The daemon's binary, which cargo builds for this package's integration tests.
pub fn netconnectd() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_netconnectd"))
}

/// `GET path` on `addr` (HTTP/1.1, connection closed after): status code and body;
/// `None` when nothing answers.
pub fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let code = out.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, out.split_once("\r\n\r\n")?.1.to_owned()))
}

/// Polls `f` every 50 ms until it holds; panics naming `what` after `secs` seconds.
pub fn wait_until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out after {secs}s waiting for {what}");
}

/// A child process killed on drop, so that a failing test leaves nothing running.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Killed {
    /// Sends SIGTERM, as a container engine stops a container, and waits up to `secs`
    /// seconds for the exit.
    pub fn terminate(&mut self, secs: u64) -> ExitStatus {
        let pid = self.0.id();
        assert!(Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap()
            .success());
        let mut status = None;
        wait_until("the process to exit after SIGTERM", secs, || {
            status = self.0.try_wait().unwrap();
            status.is_some()
        });
        status.unwrap()
    }
}

/// A running netconnectd serving its endpoints on a free local port, killed on drop.
pub struct Daemon {
    /// The process.
    pub process: Killed,
    /// Where it serves `/readyz`, `/status`, `/metrics`.
    pub addr: String,
}

impl Daemon {
    /// Starts netconnectd on NB `nb` with its manifests and status directories and
    /// `extra` arguments; its output is discarded.
    pub fn start(nb: &str, manifests: &Path, status: &Path, extra: &[&str]) -> Daemon {
        Daemon::start_logging(nb, manifests, status, extra, None)
    }

    /// [`Daemon::start`], its log at debug level written to `log` when given.
    pub fn start_logging(
        nb: &str,
        manifests: &Path,
        status: &Path,
        extra: &[&str],
        log: Option<&Path>,
    ) -> Daemon {
        let port = ovn_sandbox::free_port().unwrap();
        let addr = format!("127.0.0.1:{port}");
        let mut cmd = Command::new(netconnectd());
        cmd.args(["--nb", nb, "--manifests"])
            .arg(manifests)
            .arg("--status-dir")
            .arg(status)
            .args(["--listen", &addr])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(log) = log {
            cmd.env("RUST_LOG", "netconnect=debug,info")
                .stderr(std::fs::File::create(log).unwrap());
        }
        let child = cmd.spawn().unwrap();
        Daemon {
            process: Killed(child),
            addr,
        }
    }

    /// Waits until every key of the current inputs reconciled without error and the
    /// queue is quiet (`/status` ready with every key ok, three times in a row).
    pub fn wait_converged(&self, secs: u64) {
        let mut good = 0;
        wait_until("the daemon to converge", secs, || {
            let ok = get(&self.addr, "/status").is_some_and(|(_, b)| {
                let v: serde_json::Value = serde_json::from_str(&b).unwrap_or_default();
                v["ready"] == true
                    && v["keys"]
                        .as_array()
                        .is_some_and(|k| !k.is_empty() && k.iter().all(|k| k["ok"] == true))
            });
            good = if ok { good + 1 } else { 0 };
            good >= 3
        });
    }

    /// Kills it now.
    pub fn kill(&mut self) {
        let _ = self.process.0.kill();
        let _ = self.process.0.wait();
    }
}
