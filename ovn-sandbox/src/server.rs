//! One standalone ovsdb-server of any schema, on a unix socket and TCP or SSL: a
//! process listening on 127.0.0.1 (SSL on 127.0.0.2), or a container with an address
//! of its own on a Docker network, listening there on [`CLIENT_PORT`] (SSL on
//! [`SSL_PORT`]).

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
    /// Also listen for SSL (on 127.0.0.2 for a process, on [`SSL_PORT`] of its
    /// address for a container).
    pub ssl: Option<SslFiles>,
}

/// The port a server in a container listens on for SSL.
pub const SSL_PORT: u16 = 6643;

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
    /// Where it runs as a container; `None`: a process. After the daemon, so that the
    /// network goes after the container.
    pub(crate) place: Option<Place>,
    // Last, so the directory goes after the daemon.
    pub(crate) dir: Option<WorkDir>,
}

impl OvsdbServer {
    /// Starts a standalone server with a fresh database in its own directory (in a
    /// container on a network of its own when `install` has an image).
    pub fn start(install: &Installation, options: &ServerOptions) -> Result<OvsdbServer> {
        let place = match &install.image {
            Some(image) => Some(Place {
                image: image.clone(),
                network: std::sync::Arc::new(DockerNetwork::create()?),
                host: 10,
                name: "ovsdb".into(),
            }),
            None => None,
        };
        OvsdbServer::start_at(install, options, place)
    }

    /// [`OvsdbServer::start`] at `place` (a container), or as a process.
    pub(crate) fn start_at(
        install: &Installation,
        options: &ServerOptions,
        place: Option<Place>,
    ) -> Result<OvsdbServer> {
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
        let mut server =
            OvsdbServer::launch(install, "ovsdb-server", dir, "", vec![db], extra, place)?;
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
        place: Option<Place>,
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
            daemon: Daemon::idle(name),
            unix_host: dir.host(&format!("{tag}db.sock")),
            unix_inner,
            ctl_inner,
            log_host: dir.host(&format!("{tag}db.log")),
            tcp_port: 0,
            ssl_port: None,
            place,
            dir: Some(dir),
        };
        server.run()?;
        Ok(server)
    }

    pub(crate) fn run(&mut self) -> Result<()> {
        let _ = fs::remove_file(&self.unix_host);
        let log_len = fs::metadata(&self.log_host).map(|m| m.len()).unwrap_or(0) as usize;
        let wants_ssl = self.args.iter().any(|a| a.starts_with("--remote=pssl"));
        if let Some(place) = &self.place {
            // A container listens on its own address, on known ports; started again,
            // it is the same container with the same command.
            if self.daemon.container.is_some() {
                self.daemon.start_again()?;
            } else {
                let args: Vec<String> = self
                    .args
                    .iter()
                    .map(|a| match a.as_str() {
                        "--remote=ptcp:0:127.0.0.1" => format!("--remote=ptcp:{CLIENT_PORT}"),
                        "--remote=pssl:0:127.0.0.2" => format!("--remote=pssl:{SSL_PORT}"),
                        _ => a.clone(),
                    })
                    .collect();
                let dir = self
                    .dir
                    .as_ref()
                    .ok_or_else(|| SandboxError("no directory".into()))?;
                self.daemon = Daemon::in_container(place, dir, "ovsdb-server", &args)?;
            }
            self.tcp_port = CLIENT_PORT;
            self.ssl_port = wants_ssl.then_some(SSL_PORT);
        } else {
            let mut cmd = self.install.command("ovsdb-server");
            // After the first start, keep the TCP port so clients can reconnect to it.
            let tcp_arg = format!("--remote=ptcp:{}:127.0.0.1", self.tcp_port);
            let ssl_arg = format!("--remote=pssl:{}:127.0.0.2", self.ssl_port.unwrap_or(0));
            cmd.args(self.args.iter().map(|a| match a.as_str() {
                "--remote=ptcp:0:127.0.0.1" => &tcp_arg,
                "--remote=pssl:0:127.0.0.2" => &ssl_arg,
                _ => a,
            }));
            self.daemon = Daemon::spawn(cmd, &self.name)?;
        }
        // ovsdb-server logs the port only when it chose it; a known port is probed.
        let known = (self.tcp_port, self.ssl_port);
        let (tcp_host, ssl_host) = (self.tcp_host(), self.ssl_host());
        let log = self.log_host.clone();
        let unix = self.unix_host.clone();
        let daemon = &mut self.daemon;
        let (tcp, ssl) = wait_until(&format!("{} to listen", self.name), || {
            daemon.check_running(&log)?;
            let text = fs::read_to_string(&log).unwrap_or_default();
            let text = text.get(log_len..).unwrap_or("");
            let tcp = match known.0 {
                0 => listening_port(text, &tcp_host),
                p => accepts((tcp_host.as_str(), p)).then_some(p),
            };
            let ssl = match known.1 {
                None => listening_port(text, &ssl_host),
                Some(p) => accepts((ssl_host.as_str(), p)).then_some(p),
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

    /// The address clients reach it at: the container's, or for a process `local`
    /// (127.0.0.1 for TCP, 127.0.0.2 for SSL).
    fn client_host(&self, local: &str) -> String {
        match &self.place {
            Some(place) => place.ip().to_string(),
            None => local.to_owned(),
        }
    }

    fn tcp_host(&self) -> String {
        self.client_host("127.0.0.1")
    }

    fn ssl_host(&self) -> String {
        self.client_host("127.0.0.2")
    }

    /// The container it runs in, when it runs in one: for the faults only a container
    /// can have (cut off its network, paused).
    pub fn container(&self) -> Option<&Container> {
        self.daemon.container.as_ref()
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

    /// `tcp:ADDRESS:PORT`: `127.0.0.1` for a process, the container's own address for
    /// a container.
    pub fn tcp_remote(&self) -> String {
        format!("tcp:{}:{}", self.tcp_host(), self.tcp_port)
    }

    /// `ssl:ADDRESS:PORT` (`127.0.0.2` for a process, the container's own address for a
    /// container), when started with SSL files.
    pub fn ssl_remote(&self) -> Option<String> {
        self.ssl_port
            .map(|p| format!("ssl:{}:{p}", self.ssl_host()))
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
