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

/// A child process that is killed when dropped.
#[derive(Debug)]
pub(crate) struct Daemon {
    pub(crate) name: String,
    pub(crate) child: Option<Child>,
}

impl Daemon {
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
        Ok(Daemon {
            name: name.to_owned(),
            child: Some(child),
        })
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Returns an error with the daemon's stderr if it has exited.
    pub(crate) fn check_running(&mut self, log: &Path) -> Result<()> {
        let Some(child) = self.child.as_mut() else {
            return fail(format!("{} is stopped", self.name));
        };
        if let Ok(Some(status)) = child.try_wait() {
            let mut stderr = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut stderr);
            }
            let log_text = fs::read_to_string(log).unwrap_or_default();
            let tail: Vec<&str> = log_text.lines().rev().take(10).collect();
            self.child = None;
            return fail(format!(
                "{} exited ({status}): {} {}",
                self.name,
                stderr.trim(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ));
        }
        Ok(())
    }

    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Asks the daemon to exit (SIGTERM) and waits for it, killing it after a while.
    pub(crate) fn terminate(&mut self) {
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
        self.kill();
    }
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
