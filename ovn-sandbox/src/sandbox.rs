//! A real OVN central: the Northbound and Southbound servers and ovn-northd.

use super::*;

/// A real OVN central: OVN_Northbound and OVN_Southbound servers and ovn-northd; as
/// processes, or as three containers on a Docker network of their own (when the
/// installation has an image), ovn-northd reaching the servers over TCP there.
#[derive(Debug)]
pub struct Sandbox {
    pub(crate) northd: Daemon,
    /// The OVN_Northbound server.
    pub nb: OvsdbServer,
    /// The OVN_Southbound server.
    pub sb: OvsdbServer,
    pub(crate) northd_ctl: PathBuf,
    pub(crate) northd_log: PathBuf,
    pub(crate) install: Installation,
}

impl Sandbox {
    /// Starts a sandbox from [`Installation::recent`].
    pub fn start() -> Result<Sandbox> {
        Sandbox::start_with(&Installation::recent()?)
    }

    /// Starts a sandbox from the given installation.
    pub fn start_with(install: &Installation) -> Result<Sandbox> {
        let network = match &install.image {
            Some(_) => Some(std::sync::Arc::new(DockerNetwork::create()?)),
            None => None,
        };
        let place = |host: u8, name: &str| {
            Some(Place {
                image: install.image.clone()?,
                network: network.clone()?,
                host,
                name: name.to_owned(),
            })
        };
        let nb = OvsdbServer::start_at(install, &ServerOptions::default(), place(10, "nb"))?;
        let sb = OvsdbServer::start_at(
            install,
            &ServerOptions {
                schema: Some(install.schema("ovn-sb")),
                ..Default::default()
            },
            place(11, "sb"),
        )?;
        let dir = nb
            .dir
            .as_ref()
            .ok_or_else(|| SandboxError("no directory".into()))?;
        let ctl = dir.inner("northd.ctl");
        let log_inner = dir.inner("northd.log");
        let log_host = dir.host("northd.log");
        let args = |nb: String, sb: String| {
            vec![
                format!("--ovnnb-db={nb}"),
                format!("--ovnsb-db={sb}"),
                format!("--unixctl={}", ctl.display()),
                format!("--log-file={}", log_inner.display()),
                "-vconsole:off".to_owned(),
            ]
        };
        let mut northd = match place(12, "northd") {
            Some(place) => Daemon::in_container(
                &place,
                dir,
                "ovn-northd",
                &args(nb.tcp_remote(), sb.tcp_remote()),
            )?,
            None => {
                let mut cmd = install.command("ovn-northd");
                cmd.args(args(nb.tool_unix_remote(), sb.tool_unix_remote()));
                Daemon::spawn(cmd, "ovn-northd")?
            }
        };
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

    /// Column `column` of the port binding of logical port `port`, as `ovn-sbctl --bare`
    /// prints it (empty when there is no such binding).
    pub fn port_binding(&self, port: &str, column: &str) -> Result<String> {
        let condition = format!("logical_port={port}");
        self.sb_find("Port_Binding", column, &condition)
    }

    /// The tunnel key northd gave the datapath of logical switch or router `name`
    /// (empty when there is none).
    pub fn datapath_key(&self, name: &str) -> Result<String> {
        let condition = format!("external_ids:name={name}");
        self.sb_find("Datapath_Binding", "tunnel_key", &condition)
    }

    fn sb_find(&self, table: &str, column: &str, condition: &str) -> Result<String> {
        let columns = format!("--columns={column}");
        let out = self.sbctl(&["--bare", &columns, "find", table, condition])?;
        Ok(out.trim().to_owned())
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

    /// The Docker network the central's containers are on, when they are containers.
    pub fn network(&self) -> Option<&DockerNetwork> {
        self.nb.place.as_ref().map(|p| &*p.network)
    }

    /// ovn-northd's container, when it runs in one.
    pub fn northd_container(&self) -> Option<&Container> {
        self.northd.container.as_ref()
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
