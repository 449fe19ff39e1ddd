//! Real OVN central daemons for tests and for trying things out: ovsdb-server with
//! OVN_Northbound and OVN_Southbound, ovn-northd between them, raft clusters, and
//! standalone servers of any schema.
//!
//! Every [`Sandbox`], [`OvsdbServer`] and [`Cluster`] gets its own directory, sockets
//! and ports, so tests run in parallel; its processes are killed when it is dropped
//! (also on panic), and each process is asked by the kernel to die with the thread that
//! started it, so a test process that is killed leaves nothing behind either.
//!
//! The daemons come from an [`Installation`]: a Debian sid root filesystem with OVN
//! 26.03 (built once by `scripts/setup-ovn.sh`, found at `$OVN_SANDBOX_ROOT`, by default
//! `/var/cache/ovsdb-rs/sid-root`), whose programs run under `chroot`; a recent enough
//! OVN on `PATH`; or, for compatibility tests, the host's older OVN ([`Installation::host`]).

#![warn(missing_docs)]

mod chassis;

pub use chassis::{leftovers, Chassis, Pod, NETNS_PREFIX};

use std::fs;
use std::io::Read;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Where the root filesystem is looked for when `OVN_SANDBOX_ROOT` is not set.
pub const DEFAULT_ROOT: &str = "/var/cache/ovsdb-rs/sid-root";

/// The oldest OVN release the main sandbox accepts (transit routers need it).
pub const MIN_OVN: (u32, u32) = (25, 3);

/// Marker in every directory this crate creates, so leftover processes can be found.
pub const DIR_PREFIX: &str = "ovsdb-rs-sbx-";

const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Something went wrong starting or driving the daemons.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SandboxError(String);

type Result<T> = std::result::Result<T, SandboxError>;

fn fail<T>(msg: impl Into<String>) -> Result<T> {
    Err(SandboxError(msg.into()))
}

/// A set of OVS and OVN programs: inside a chroot, or on the host.
#[derive(Clone, Debug)]
pub struct Installation {
    root: Option<PathBuf>,
    ovn_version: String,
    ovs_version: String,
}

impl Installation {
    /// OVN 25.03 or newer: the root filesystem at `$OVN_SANDBOX_ROOT` (or
    /// [`DEFAULT_ROOT`]), else the programs on `PATH` if they are recent enough.
    pub fn recent() -> Result<Installation> {
        let root = std::env::var_os("OVN_SANDBOX_ROOT")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_ROOT));
        let mut tried = Vec::new();
        if root.join("usr/bin/ovn-northd").exists() {
            match Installation::probe(Some(root.clone())) {
                Ok(i) if i.ovn_at_least(MIN_OVN) => return Ok(i),
                Ok(i) => tried.push(format!("{} has OVN {}", root.display(), i.ovn_version)),
                Err(e) => tried.push(format!("{}: {e}", root.display())),
            }
        } else {
            tried.push(format!("no root filesystem at {}", root.display()));
        }
        match Installation::probe(None) {
            Ok(i) if i.ovn_at_least(MIN_OVN) => return Ok(i),
            Ok(i) => tried.push(format!("PATH has OVN {}", i.ovn_version)),
            Err(e) => tried.push(format!("PATH: {e}")),
        }
        fail(format!(
            "no OVN {}.{:02} or newer found ({}). Run `sudo scripts/setup-ovn.sh` to build the \
             Debian sid root filesystem with OVN 26.03, or point OVN_SANDBOX_ROOT at one.",
            MIN_OVN.0,
            MIN_OVN.1,
            tried.join("; ")
        ))
    }

    /// The host's own OVN (Debian bookworm's 23.03 with the 7.0.0 schema), for
    /// compatibility tests with older servers.
    pub fn host() -> Result<Installation> {
        Installation::probe(None).map_err(|e| {
            SandboxError(format!(
                "{e}. Run `sudo scripts/setup-ovn.sh`, which installs the host's ovn-central."
            ))
        })
    }

    fn probe(root: Option<PathBuf>) -> Result<Installation> {
        let mut i = Installation {
            root,
            ovn_version: String::new(),
            ovs_version: String::new(),
        };
        let northd = i.output("ovn-northd", &["--version"])?;
        i.ovn_version = first_version(&northd).ok_or_else(|| {
            SandboxError(format!("cannot read ovn-northd's version from {northd:?}"))
        })?;
        let server = i.output("ovsdb-server", &["--version"])?;
        i.ovs_version = first_version(&server).ok_or_else(|| {
            SandboxError(format!(
                "cannot read ovsdb-server's version from {server:?}"
            ))
        })?;
        Ok(i)
    }

    /// The OVN release, e.g. `26.03.1`.
    pub fn ovn_version(&self) -> &str {
        &self.ovn_version
    }

    /// The Open vSwitch release of ovsdb-server, e.g. `4.0.0`.
    pub fn ovs_version(&self) -> &str {
        &self.ovs_version
    }

    /// The root filesystem the programs run in, if any.
    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    fn ovn_at_least(&self, (major, minor): (u32, u32)) -> bool {
        let mut parts = self
            .ovn_version
            .split('.')
            .map(|p| p.parse::<u32>().unwrap_or(0));
        let v = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        v >= (major, minor)
    }

    /// A command that runs `program` of this installation.
    pub fn command(&self, program: &str) -> Command {
        match &self.root {
            Some(root) => {
                let mut c = Command::new("chroot");
                c.arg(root).arg(program);
                c
            }
            None => Command::new(program),
        }
    }

    /// Runs `program` with `args` and returns its standard output; an error carries
    /// its standard error.
    pub fn output(&self, program: &str, args: &[&str]) -> Result<String> {
        let out = self
            .command(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| SandboxError(format!("cannot run {program}: {e}")))?;
        check_output(program, args, out)
    }

    /// Where a path inside the installation is on the host.
    pub fn host_path(&self, inner: &Path) -> PathBuf {
        match &self.root {
            Some(root) => root.join(inner.strip_prefix("/").unwrap_or(inner)),
            None => inner.to_path_buf(),
        }
    }

    /// The path, inside the installation, of a schema file it ships: `ovn-nb`,
    /// `ovn-sb` (OVN) or `vswitch` (Open vSwitch).
    pub fn schema(&self, name: &str) -> PathBuf {
        match name {
            "vswitch" => PathBuf::from("/usr/share/openvswitch/vswitch.ovsschema"),
            other => PathBuf::from(format!("/usr/share/ovn/{other}.ovsschema")),
        }
    }

    fn workdir(&self) -> Result<WorkDir> {
        let base = self.host_path(Path::new("/tmp"));
        let dir = tempfile::Builder::new()
            .prefix(DIR_PREFIX)
            .tempdir_in(&base)
            .map_err(|e| {
                SandboxError(format!(
                    "cannot create a directory in {}: {e}",
                    base.display()
                ))
            })?;
        let inner = match &self.root {
            Some(root) => Path::new("/").join(dir.path().strip_prefix(root).unwrap_or(dir.path())),
            None => dir.path().to_path_buf(),
        };
        Ok(WorkDir { dir, inner })
    }
}

fn check_output(program: &str, args: &[&str], out: Output) -> Result<String> {
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        fail(format!(
            "{program} {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn first_version(text: &str) -> Option<String> {
    text.split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
        .map(str::to_owned)
}

/// A directory private to one sandbox, removed when dropped.
#[derive(Debug)]
struct WorkDir {
    dir: tempfile::TempDir,
    /// The same directory as the installation's programs see it.
    inner: PathBuf,
}

impl WorkDir {
    fn inner(&self, name: &str) -> PathBuf {
        self.inner.join(name)
    }

    fn host(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// A child process that is killed when dropped.
#[derive(Debug)]
struct Daemon {
    name: String,
    child: Option<Child>,
}

impl Daemon {
    fn spawn(mut cmd: Command, name: &str) -> Result<Daemon> {
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

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Returns an error with the daemon's stderr if it has exited.
    fn check_running(&mut self, log: &Path) -> Result<()> {
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

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Asks the daemon to exit (SIGTERM) and waits for it, killing it after a while.
    fn terminate(&mut self) {
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

fn wait_until<T>(what: &str, mut check: impl FnMut() -> Result<Option<T>>) -> Result<T> {
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

/// PEM files for an ovsdb-server SSL remote (host paths; they are copied into the
/// server's directory).
#[derive(Clone, Debug)]
pub struct SslFiles {
    /// The server's private key.
    pub private_key: PathBuf,
    /// The server's certificate.
    pub certificate: PathBuf,
    /// The CA that client certificates must chain to.
    pub ca_cert: PathBuf,
}

/// How to start a standalone [`OvsdbServer`].
#[derive(Clone, Debug, Default)]
pub struct ServerOptions {
    /// Schema file inside the installation; by default OVN_Northbound's.
    pub schema: Option<PathBuf>,
    /// A schema file on the host, copied into the server's directory (for schemas the
    /// installation does not ship, such as a made-up newer version); wins over `schema`.
    pub schema_file: Option<PathBuf>,
    /// Also listen for SSL on 127.0.0.2.
    pub ssl: Option<SslFiles>,
}

/// One running ovsdb-server.
#[derive(Debug)]
pub struct OvsdbServer {
    install: Installation,
    name: String,
    db_inner: PathBuf,
    /// The schema a standalone database was created from.
    schema_inner: Option<PathBuf>,
    args: Vec<String>,
    daemon: Daemon,
    unix_host: PathBuf,
    unix_inner: PathBuf,
    ctl_inner: PathBuf,
    log_host: PathBuf,
    tcp_port: u16,
    ssl_port: Option<u16>,
    // Last, so the directory goes after the daemon.
    dir: Option<WorkDir>,
}

impl OvsdbServer {
    /// Starts a standalone server with a fresh database in its own directory.
    pub fn start(install: &Installation, options: &ServerOptions) -> Result<OvsdbServer> {
        let dir = install.workdir()?;
        let mut schema = options
            .schema
            .clone()
            .unwrap_or_else(|| install.schema("ovn-nb"));
        if let Some(file) = &options.schema_file {
            fs::copy(file, dir.host("schema.ovsschema"))
                .map_err(|e| SandboxError(format!("cannot copy {}: {e}", file.display())))?;
            schema = dir.inner("schema.ovsschema");
        }
        let db = dir.inner("db.db");
        install.output(
            "ovsdb-tool",
            &["create", path_str(&db)?, path_str(&schema)?],
        )?;
        let mut extra = Vec::new();
        if let Some(ssl) = &options.ssl {
            for (src, name, flag) in [
                (&ssl.private_key, "key.pem", "--private-key"),
                (&ssl.certificate, "cert.pem", "--certificate"),
                (&ssl.ca_cert, "ca.pem", "--ca-cert"),
            ] {
                fs::copy(src, dir.host(name))
                    .map_err(|e| SandboxError(format!("cannot copy {}: {e}", src.display())))?;
                extra.push(format!("{flag}={}", dir.inner(name).display()));
            }
            extra.push("--remote=pssl:0:127.0.0.2".into());
        }
        let mut server = OvsdbServer::launch(install, "ovsdb-server", dir, "", vec![db], extra)?;
        server.schema_inner = Some(schema);
        Ok(server)
    }

    fn launch(
        install: &Installation,
        name: &str,
        dir: WorkDir,
        tag: &str,
        dbs: Vec<PathBuf>,
        extra: Vec<String>,
    ) -> Result<OvsdbServer> {
        let unix_inner = dir.inner(&format!("{tag}db.sock"));
        let ctl_inner = dir.inner(&format!("{tag}db.ctl"));
        let log_inner = dir.inner(&format!("{tag}db.log"));
        let mut args: Vec<String> = dbs.iter().map(|d| d.display().to_string()).collect();
        args.extend([
            format!("--remote=punix:{}", unix_inner.display()),
            "--remote=ptcp:0:127.0.0.1".into(),
            format!("--unixctl={}", ctl_inner.display()),
            format!("--log-file={}", log_inner.display()),
            "-vconsole:off".into(),
            "-vfile:info".into(),
        ]);
        args.extend(extra);
        let mut server = OvsdbServer {
            install: install.clone(),
            name: name.to_owned(),
            db_inner: dbs[0].clone(),
            schema_inner: None,
            args,
            daemon: Daemon {
                name: name.to_owned(),
                child: None,
            },
            unix_host: dir.host(&format!("{tag}db.sock")),
            unix_inner,
            ctl_inner,
            log_host: dir.host(&format!("{tag}db.log")),
            tcp_port: 0,
            ssl_port: None,
            dir: Some(dir),
        };
        server.run()?;
        Ok(server)
    }

    fn run(&mut self) -> Result<()> {
        let _ = fs::remove_file(&self.unix_host);
        let log_len = fs::metadata(&self.log_host).map(|m| m.len()).unwrap_or(0) as usize;
        let mut cmd = self.install.command("ovsdb-server");
        // After the first start, keep the TCP port so clients can reconnect to it.
        let tcp_arg = format!("--remote=ptcp:{}:127.0.0.1", self.tcp_port);
        let ssl_arg = format!("--remote=pssl:{}:127.0.0.2", self.ssl_port.unwrap_or(0));
        cmd.args(self.args.iter().map(|a| match a.as_str() {
            "--remote=ptcp:0:127.0.0.1" => &tcp_arg,
            "--remote=pssl:0:127.0.0.2" => &ssl_arg,
            _ => a,
        }));
        // ovsdb-server logs the port only when it chose it; a known port is probed.
        let known = (self.tcp_port, self.ssl_port);
        self.daemon = Daemon::spawn(cmd, &self.name)?;
        let wants_ssl = self.args.iter().any(|a| a.starts_with("--remote=pssl"));
        let log = self.log_host.clone();
        let unix = self.unix_host.clone();
        let daemon = &mut self.daemon;
        let (tcp, ssl) = wait_until(&format!("{} to listen", self.name), || {
            daemon.check_running(&log)?;
            let text = fs::read_to_string(&log).unwrap_or_default();
            let text = text.get(log_len..).unwrap_or("");
            let tcp = match known.0 {
                0 => listening_port(text, "127.0.0.1"),
                p => accepts(("127.0.0.1", p)).then_some(p),
            };
            let ssl = match known.1 {
                None => listening_port(text, "127.0.0.2"),
                Some(p) => accepts(("127.0.0.2", p)).then_some(p),
            };
            Ok((std::os::unix::net::UnixStream::connect(&unix).is_ok()
                && tcp.is_some()
                && (ssl.is_some() || !wants_ssl))
                .then_some((tcp, ssl)))
        })?;
        self.tcp_port = tcp.unwrap_or(self.tcp_port);
        self.ssl_port = ssl;
        Ok(())
    }

    /// `unix:PATH` for clients on the host (this crate's client).
    pub fn unix_remote(&self) -> String {
        format!("unix:{}", self.unix_host.display())
    }

    /// `unix:PATH` for the installation's own tools (ovn-nbctl, ovsdb-client), which may
    /// run in a chroot.
    pub fn tool_unix_remote(&self) -> String {
        format!("unix:{}", self.unix_inner.display())
    }

    /// `tcp:127.0.0.1:PORT`.
    pub fn tcp_remote(&self) -> String {
        format!("tcp:127.0.0.1:{}", self.tcp_port)
    }

    /// `ssl:127.0.0.2:PORT`, when started with SSL files.
    pub fn ssl_remote(&self) -> Option<String> {
        self.ssl_port.map(|p| format!("ssl:127.0.0.2:{p}"))
    }

    /// The installation the server runs from.
    pub fn installation(&self) -> &Installation {
        &self.install
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.daemon.pid()
    }

    /// The database file, as the installation's tools see it.
    pub fn db_path(&self) -> &Path {
        &self.db_inner
    }

    /// Runs `ovs-appctl -t SERVER args…` and returns its output.
    pub fn appctl(&self, args: &[&str]) -> Result<String> {
        let target = format!("--target={}", self.ctl_inner.display());
        let mut all = vec![target.as_str()];
        all.extend_from_slice(args);
        self.install.output("ovs-appctl", &all)
    }

    /// Runs one of the installation's programs (ovsdb-client, ovn-nbctl, …).
    pub fn tool(&self, program: &str, args: &[&str]) -> Result<String> {
        self.install.output(program, args)
    }

    /// Kills the server (SIGKILL), keeping its database.
    pub fn kill(&mut self) {
        self.daemon.kill();
    }

    /// Stops the server cleanly (SIGTERM), keeping its database.
    pub fn stop(&mut self) {
        self.daemon.terminate();
    }

    /// Converts the live database to the schema in `schema_file` (a host path) with
    /// `ovsdb-client convert`, as an upgrade does; clients that asked to be told
    /// (`set_db_change_aware`) get `monitor_canceled`.
    pub fn convert(&self, schema_file: &Path) -> Result<()> {
        let dir = self
            .dir
            .as_ref()
            .ok_or_else(|| SandboxError("the server has no directory".into()))?;
        let name = "converted.ovsschema";
        fs::copy(schema_file, dir.host(name))
            .map_err(|e| SandboxError(format!("cannot copy {}: {e}", schema_file.display())))?;
        let remote = self.tool_unix_remote();
        self.install
            .output(
                "ovsdb-client",
                &["convert", &remote, path_str(&dir.inner(name))?],
            )
            .map(|_| ())
    }

    /// Stops a standalone server, replaces its database with a new empty one, and starts
    /// it again on the same port.
    pub fn replace_database(&mut self) -> Result<()> {
        let schema = self.schema_inner.clone().ok_or_else(|| {
            SandboxError("only a standalone server's database can be replaced".into())
        })?;
        self.daemon.kill();
        let host_db = self.install.host_path(&self.db_inner);
        fs::remove_file(&host_db)
            .map_err(|e| SandboxError(format!("cannot remove {}: {e}", host_db.display())))?;
        self.install.output(
            "ovsdb-tool",
            &["create", path_str(&self.db_inner)?, path_str(&schema)?],
        )?;
        self.run()
    }

    /// Starts the server again on the same database and TCP port.
    pub fn restart(&mut self) -> Result<()> {
        self.daemon.kill();
        self.run()
    }
}

fn accepts(addr: (&str, u16)) -> bool {
    std::net::TcpStream::connect(addr).is_ok()
}

fn listening_port(log: &str, addr: &str) -> Option<u16> {
    let needle = format!(":{addr}: listening on port ");
    log.lines().rev().find_map(|l| {
        l.split_once(&needle)
            .and_then(|(_, p)| p.trim().parse().ok())
    })
}

fn path_str(p: &Path) -> Result<&str> {
    p.to_str()
        .ok_or_else(|| SandboxError(format!("path {} is not UTF-8", p.display())))
}

/// A real OVN central: OVN_Northbound and OVN_Southbound servers and ovn-northd.
#[derive(Debug)]
pub struct Sandbox {
    northd: Daemon,
    /// The OVN_Northbound server.
    pub nb: OvsdbServer,
    /// The OVN_Southbound server.
    pub sb: OvsdbServer,
    northd_ctl: PathBuf,
    northd_log: PathBuf,
    install: Installation,
}

impl Sandbox {
    /// Starts a sandbox from [`Installation::recent`].
    pub fn start() -> Result<Sandbox> {
        Sandbox::start_with(&Installation::recent()?)
    }

    /// Starts a sandbox from the given installation.
    pub fn start_with(install: &Installation) -> Result<Sandbox> {
        let nb = OvsdbServer::start(install, &ServerOptions::default())?;
        let sb = OvsdbServer::start(
            install,
            &ServerOptions {
                schema: Some(install.schema("ovn-sb")),
                ..Default::default()
            },
        )?;
        let dir = nb
            .dir
            .as_ref()
            .ok_or_else(|| SandboxError("no directory".into()))?;
        let ctl = dir.inner("northd.ctl");
        let log_inner = dir.inner("northd.log");
        let log_host = dir.host("northd.log");
        let mut cmd = install.command("ovn-northd");
        cmd.arg(format!("--ovnnb-db={}", nb.tool_unix_remote()))
            .arg(format!("--ovnsb-db={}", sb.tool_unix_remote()))
            .arg(format!("--unixctl={}", ctl.display()))
            .arg(format!("--log-file={}", log_inner.display()))
            .arg("-vconsole:off");
        let mut northd = Daemon::spawn(cmd, "ovn-northd")?;
        let target = format!("--target={}", ctl.display());
        wait_until("ovn-northd to become active", || {
            northd.check_running(&log_host)?;
            Ok(install
                .output("ovn-appctl", &[&target, "status"])
                .ok()
                .filter(|s| s.contains("active"))
                .map(|_| ()))
        })?;
        Ok(Sandbox {
            northd,
            nb,
            sb,
            northd_ctl: ctl,
            northd_log: log_host,
            install: install.clone(),
        })
    }

    /// Runs `ovn-nbctl` against this sandbox's northbound database.
    pub fn nbctl(&self, args: &[&str]) -> Result<String> {
        let db = format!("--db={}", self.nb.tool_unix_remote());
        let mut all = vec![db.as_str()];
        all.extend_from_slice(args);
        self.install.output("ovn-nbctl", &all)
    }

    /// Runs `ovn-sbctl` against this sandbox's southbound database.
    pub fn sbctl(&self, args: &[&str]) -> Result<String> {
        let db = format!("--db={}", self.sb.tool_unix_remote());
        let mut all = vec![db.as_str()];
        all.extend_from_slice(args);
        self.install.output("ovn-sbctl", &all)
    }

    /// Runs `ovn-trace` against this sandbox's southbound database.
    pub fn trace(&self, args: &[&str]) -> Result<String> {
        let db = format!("--db={}", self.sb.tool_unix_remote());
        let mut all = vec![db.as_str()];
        all.extend_from_slice(args);
        self.install.output("ovn-trace", &all)
    }

    /// Registers a chassis of another zone in the Southbound database, as
    /// OVN-Kubernetes' interconnect handler does: `other_config:is-remote=true`, so that
    /// ports bound to it with `requested-chassis` become `remote` port bindings.
    pub fn register_remote_chassis(&self, name: &str, encap_ip: &str) -> Result<()> {
        self.sbctl(&["chassis-add", name, "geneve", encap_ip])?;
        self.sbctl(&["set", "chassis", name, "other_config:is-remote=true"])?;
        Ok(())
    }

    /// Waits until ovn-northd has processed every northbound change and every chassis
    /// has installed the flows for it (`ovn-nbctl --wait=hv sync`).
    pub fn sync_hv(&self) -> Result<()> {
        self.nbctl(&["--timeout=30", "--wait=hv", "sync"])
            .map(|_| ())
    }

    /// Waits until ovn-northd has processed every northbound change made so far.
    pub fn sync(&self) -> Result<()> {
        self.nbctl(&["--wait=sb", "sync"]).map(|_| ())
    }

    /// ovn-northd's log file (a host path).
    pub fn northd_log(&self) -> &Path {
        &self.northd_log
    }

    /// The pid of ovn-northd.
    pub fn northd_pid(&self) -> Option<u32> {
        self.northd.pid()
    }

    /// Runs `ovn-appctl -t ovn-northd args…`.
    pub fn northd_appctl(&self, args: &[&str]) -> Result<String> {
        let target = format!("--target={}", self.northd_ctl.display());
        let mut all = vec![target.as_str()];
        all.extend_from_slice(args);
        self.install.output("ovn-appctl", &all)
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // ovn-northd first, so it does not log reconnection attempts to dead servers.
        self.northd.kill();
    }
}

/// Creates member `i`'s database file `db`: member 0 creates the cluster, the others
/// join the members before them.
fn create_member(
    install: &Installation,
    db: &Path,
    schema: &Path,
    database: &str,
    raft: &[String],
    i: usize,
) -> Result<()> {
    if i == 0 {
        install.output(
            "ovsdb-tool",
            &["create-cluster", path_str(db)?, path_str(schema)?, &raft[0]],
        )?;
    } else {
        let mut args = vec!["join-cluster", path_str(db)?, database, raft[i].as_str()];
        args.extend(raft[..i].iter().map(String::as_str));
        install.output("ovsdb-tool", &args)?;
    }
    Ok(())
}

/// A raft-clustered database of `n` members, each its own ovsdb-server.
#[derive(Debug)]
pub struct Cluster {
    /// The members; member 0 created the cluster.
    pub members: Vec<OvsdbServer>,
    /// The database name.
    pub database: String,
    /// The members' raft addresses, in member order.
    raft: Vec<String>,
    /// The schema file inside the installation.
    schema: PathBuf,
}

impl Cluster {
    /// Starts a cluster of `n` members serving the schema at `schema` (inside the
    /// installation), by default OVN_Northbound's.
    pub fn start(install: &Installation, n: usize, schema: Option<&Path>) -> Result<Cluster> {
        if n == 0 {
            return fail("a cluster needs at least one member");
        }
        let schema = schema
            .map(Path::to_path_buf)
            .unwrap_or_else(|| install.schema("ovn-nb"));
        let schema_text = fs::read(install.host_path(&schema))
            .map_err(|e| SandboxError(format!("cannot read {}: {e}", schema.display())))?;
        let database = serde_json::from_slice::<serde_json::Value>(&schema_text)
            .ok()
            .and_then(|v| v.get("name").and_then(|n| n.as_str()).map(str::to_owned))
            .ok_or_else(|| SandboxError(format!("{} has no database name", schema.display())))?;
        let raft: Vec<String> = free_ports(n)?
            .into_iter()
            .map(|p| format!("tcp:127.0.0.1:{p}"))
            .collect();
        let mut members = Vec::new();
        for i in 0..raft.len() {
            let dir = install.workdir()?;
            let db = dir.inner("db.db");
            create_member(install, &db, &schema, &database, &raft, i)?;
            members.push(OvsdbServer::launch(
                install,
                &format!("ovsdb-server (raft member {i})"),
                dir,
                "",
                vec![db],
                vec![],
            )?);
        }
        let cluster = Cluster {
            members,
            database,
            raft,
            schema,
        };
        cluster.wait_connected()?;
        Ok(cluster)
    }

    /// Stops every member, replaces the cluster with a new, empty one (a new cluster
    /// id, the raft log started over) on the same raft addresses, and starts the
    /// members again on the same client ports: a cluster rebuilt from scratch.
    pub fn recreate(&mut self) -> Result<()> {
        for m in &mut self.members {
            m.daemon.kill();
        }
        for (i, m) in self.members.iter().enumerate() {
            let host_db = m.install.host_path(&m.db_inner);
            fs::remove_file(&host_db)
                .map_err(|e| SandboxError(format!("cannot remove {}: {e}", host_db.display())))?;
            create_member(
                &m.install,
                &m.db_inner,
                &self.schema,
                &self.database,
                &self.raft,
                i,
            )?;
        }
        for m in &mut self.members {
            m.run()?;
        }
        self.wait_connected()
    }

    /// Waits until every running member reports itself connected to the cluster.
    pub fn wait_connected(&self) -> Result<()> {
        for m in &self.members {
            if m.pid().is_none() {
                continue;
            }
            wait_until("raft members to connect", || {
                let s = m
                    .appctl(&["cluster/status", &self.database])
                    .unwrap_or_default();
                Ok(s.lines()
                    .any(|l| l.trim() == "Status: cluster member")
                    .then_some(()))
            })?;
        }
        Ok(())
    }

    /// Index of the member that is leader now, if any.
    pub fn leader(&self) -> Option<usize> {
        self.members.iter().position(|m| {
            m.pid().is_some()
                && m.appctl(&["cluster/status", &self.database])
                    .is_ok_and(|s| s.lines().any(|l| l.trim() == "Role: leader"))
        })
    }

    /// Every member's TCP remote, comma-separated, as `--db` takes them.
    pub fn remotes(&self) -> String {
        self.members
            .iter()
            .map(OvsdbServer::tcp_remote)
            .collect::<Vec<_>>()
            .join(",")
    }
}
