//! What netconnect's process-level tests and benches share: an HTTP GET for the
//! daemon's endpoints, a polling wait, and a child process killed on drop.

#![allow(dead_code)]

use std::process::Child;
use std::time::{Duration, Instant};

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
