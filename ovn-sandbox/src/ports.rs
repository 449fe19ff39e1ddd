//! Free ports on 127.0.0.1, chosen before a server that must know its address starts.

use super::*;

/// A port on 127.0.0.1 that was free a moment ago (for raft addresses, which must be
/// known before the server starts).
pub fn free_port() -> Result<u16> {
    Ok(free_ports(1)?[0])
}

/// `n` distinct ports on 127.0.0.1 that were free a moment ago. The listeners are held
/// until all `n` are chosen, so the kernel cannot hand out one port twice (as separate
/// calls to [`free_port`] can).
pub fn free_ports(n: usize) -> Result<Vec<u16>> {
    let mut listeners = Vec::with_capacity(n);
    let mut ports = Vec::with_capacity(n);
    for _ in 0..n {
        let l = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| SandboxError(format!("cannot bind: {e}")))?;
        ports.push(
            l.local_addr()
                .map_err(|e| SandboxError(e.to_string()))?
                .port(),
        );
        listeners.push(l);
    }
    Ok(ports)
}
