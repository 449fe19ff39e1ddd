//! A sandbox's directory and its processes, killed when dropped; waiting for one to
//! be ready.

use super::*;

/// A directory private to one sandbox, removed when dropped.
#[derive(Debug)]
pub(crate) struct WorkDir {
    pub(crate) dir: tempfile::TempDir,
    /// The same directory as the installation's programs see it.
    pub(crate) inner: PathBuf,
}

impl WorkDir {
    pub(crate) fn inner(&self, name: &str) -> PathBuf {
        self.inner.join(name)
    }

    pub(crate) fn host(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// A daemon: a child process, or the one program of a container; killed when dropped.
#[derive(Debug)]
pub(crate) struct Daemon {
    pub(crate) name: String,
    pub(crate) child: Option<Child>,
    /// The container the daemon runs in, if it runs in one. It is kept when the daemon
    /// is killed, so that [`Daemon::start_again`] brings it back at the same address,
    /// and removed when the daemon is dropped.
    pub(crate) container: Option<Container>,
    /// Started detached in a container, which owns it.
    pub(crate) detached: bool,
}

/// Where a daemon runs as a container: the image, the network and its host number
/// there, the container's name on that network.
#[derive(Clone, Debug)]
pub(crate) struct Place {
    pub(crate) image: String,
    pub(crate) network: std::sync::Arc<DockerNetwork>,
    pub(crate) host: u8,
    pub(crate) name: String,
}

impl Place {
    /// The container's address.
    pub(crate) fn ip(&self) -> std::net::Ipv4Addr {
        self.network.address(self.host)
    }

    /// Starts a container here running `cmd`, with the directory `dir` mounted at the
    /// path the installation's tools see it by, so that its sockets, logs and
    /// databases are where they would be for a process; `more` adds to the spec.
    pub(crate) fn start(
        &self,
        dir: &WorkDir,
        cmd: Vec<String>,
        more: ContainerSpec<'_>,
    ) -> Result<Container> {
        let bind = format!("{}:{}", dir.dir.path().display(), dir.inner.display());
        Container::start(
            &[(&self.network, self.host)],
            ContainerSpec {
                image: &self.image,
                name: &self.name,
                cmd,
                binds: vec![bind],
                ..more
            },
        )
    }
}

impl Daemon {
    /// A daemon not started yet.
    pub(crate) fn idle(name: &str) -> Daemon {
        Daemon {
            name: name.to_owned(),
            child: None,
            container: None,
            detached: false,
        }
    }

    /// A daemon that detached itself in a container (OVS's `--detach`, which returns
    /// once the daemon is ready): it goes with the container.
    pub(crate) fn detached(name: &str) -> Daemon {
        let mut daemon = Daemon::idle(name);
        daemon.detached = true;
        daemon
    }

    /// Runs `program args…` as the one program of a container at `place` ([`Place::start`]).
    pub(crate) fn in_container(
        place: &Place,
        dir: &WorkDir,
        program: &str,
        args: &[String],
    ) -> Result<Daemon> {
        let mut cmd = vec![program.to_owned()];
        cmd.extend_from_slice(args);
        let container = place.start(dir, cmd, ContainerSpec::default())?;
        let mut daemon = Daemon::idle(program);
        daemon.container = Some(container);
        Ok(daemon)
    }

    /// Starts a killed container daemon again (`docker start`): same command, files and
    /// address.
    pub(crate) fn start_again(&mut self) -> Result<()> {
        match &self.container {
            Some(c) => c.restart(),
            None => fail(format!("{} does not run in a container", self.name)),
        }
    }

    pub(crate) fn spawn(mut cmd: Command, name: &str) -> Result<Daemon> {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no memory of
        // the parent; it is the only thing done between fork and exec. It makes the
        // kernel kill the daemon if the thread that started it dies first (a test
        // process killed on timeout), so no daemon outlives its test.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| SandboxError(format!("cannot start {name}: {e}")))?;
        let mut daemon = Daemon::idle(name);
        daemon.child = Some(child);
        Ok(daemon)
    }

    /// The process id (on the host), while running.
    pub(crate) fn pid(&self) -> Option<u32> {
        match &self.container {
            Some(c) => c.pid().ok().flatten(),
            None => self.child.as_ref().map(Child::id),
        }
    }

    /// Returns an error with the daemon's stderr if it has exited.
    pub(crate) fn check_running(&mut self, log: &Path) -> Result<()> {
        if let Some(c) = &self.container {
            if c.pid()?.is_some() {
                return Ok(());
            }
            return fail(format!(
                "{} ({}) exited: {}\n{}",
                self.name,
                c.name(),
                c.logs().unwrap_or_default().trim(),
                log_tail(log)
            ));
        }
        let Some(child) = self.child.as_mut() else {
            if self.detached {
                return Ok(());
            }
            return fail(format!("{} is stopped", self.name));
        };
        if let Ok(Some(status)) = child.try_wait() {
            let mut stderr = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut stderr);
            }
            self.child = None;
            return fail(format!(
                "{} exited ({status}): {} {}",
                self.name,
                stderr.trim(),
                log_tail(log)
            ));
        }
        Ok(())
    }

    /// Kills the daemon (SIGKILL); a container stays, stopped.
    pub(crate) fn kill(&mut self) {
        if let Some(c) = &self.container {
            if c.pid().ok().flatten().is_some() {
                let _ = c.kill();
            }
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Asks the daemon to exit (SIGTERM) and waits for it, killing it after a while.
    pub(crate) fn terminate(&mut self) {
        if let Some(c) = &self.container {
            let _ = c.stop(Duration::from_secs(5));
        }
        if let Some(mut child) = self.child.take() {
            // SAFETY: kill(2) on a pid we own and have not yet reaped.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // A container goes with its handle (removed by force, which kills it).
        self.container = None;
        self.kill();
    }
}

/// The last ten lines of log file `log`.
fn log_tail(log: &Path) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(10).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

pub(crate) fn wait_until<T>(what: &str, mut check: impl FnMut() -> Result<Option<T>>) -> Result<T> {
    let deadline = Instant::now() + READY_TIMEOUT;
    let mut delay = Duration::from_millis(5);
    loop {
        if let Some(v) = check()? {
            return Ok(v);
        }
        if Instant::now() > deadline {
            return fail(format!(
                "timed out after {READY_TIMEOUT:?} waiting for {what}"
            ));
        }
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_millis(100));
    }
}
