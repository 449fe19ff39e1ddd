//! One standalone ovsdb-server of any schema, on a unix socket and TCP or SSL.

use super::*;

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
    pub(crate) install: Installation,
    pub(crate) name: String,
    pub(crate) db_inner: PathBuf,
    /// The schema a standalone database was created from.
    pub(crate) schema_inner: Option<PathBuf>,
    pub(crate) args: Vec<String>,
    pub(crate) daemon: Daemon,
    pub(crate) unix_host: PathBuf,
    pub(crate) unix_inner: PathBuf,
    pub(crate) ctl_inner: PathBuf,
    pub(crate) log_host: PathBuf,
    pub(crate) tcp_port: u16,
    pub(crate) ssl_port: Option<u16>,
    // Last, so the directory goes after the daemon.
    pub(crate) dir: Option<WorkDir>,
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

    pub(crate) fn launch(
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

    pub(crate) fn run(&mut self) -> Result<()> {
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

pub(crate) fn accepts(addr: (&str, u16)) -> bool {
    std::net::TcpStream::connect(addr).is_ok()
}

pub(crate) fn listening_port(log: &str, addr: &str) -> Option<u16> {
    let needle = format!(":{addr}: listening on port ");
    log.lines().rev().find_map(|l| {
        l.split_once(&needle)
            .and_then(|(_, p)| p.trim().parse().ok())
    })
}

pub(crate) fn path_str(p: &Path) -> Result<&str> {
    p.to_str()
        .ok_or_else(|| SandboxError(format!("path {} is not UTF-8", p.display())))
}
