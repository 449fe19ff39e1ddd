//! A real chassis: an Open_vSwitch ovsdb-server, ovs-vswitchd with the userspace
//! datapath (`--disable-system`, `datapath_type=netdev` on the integration bridge) and
//! ovn-controller bound to a sandbox's Southbound database; and "pods", network
//! namespaces each with a veth whose other end is a port of the integration bridge
//! named by `external_ids:iface-id`.
//!
//! When the sandbox runs in containers, the chassis is a container of the OVN image on
//! the sandbox's network whose network namespace is the node's (see
//! [`Chassis::start_at`]). Otherwise the daemons run in the installation's root
//! filesystem under `chroot`, each in its own mount namespace (`unshare --mount`) where `/dev`, `/sys` and `/proc` are mounted
//! into the root (ovs-vswitchd needs `/dev/net/tun` for its internal ports): the mounts
//! vanish with the process. ovs-vswitchd runs in the chassis' own network namespace,
//! which holds its tap devices and the pods' host-side veths, so that chassis of tests
//! running side by side do not meet. Everything is undone on drop, panics included:
//! daemons killed, namespaces and veths deleted. Needs root.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use ipnet::IpNet;

use super::{
    fail, path_str, wait_until, Container, ContainerSpec, Daemon, Installation, Place, Result,
    Sandbox, SandboxError, WorkDir,
};

/// Prefix of every network namespace and veth a chassis creates, for leak checks.
pub const NETNS_PREFIX: &str = "ovsrs";

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A pod: a network namespace with one interface on the integration bridge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pod {
    /// The network namespace.
    pub netns: String,
    /// The logical switch port it is bound to (`external_ids:iface-id`).
    pub iface_id: String,
    /// The veth end in the chassis' network namespace (a port of the integration
    /// bridge).
    pub host_veth: String,
    /// The MAC.
    pub mac: String,
    /// The addresses.
    pub ips: Vec<IpNet>,
}

/// A network namespace deleted on drop.
#[derive(Debug)]
struct Netns(String);

impl Netns {
    fn add(name: String) -> Result<Netns> {
        ip(&["netns", "add", &name])?;
        let ns = Netns(name);
        ip(&["-n", &ns.0, "link", "set", "lo", "up"])?;
        Ok(ns)
    }
}

impl Netns {
    /// Names on the host the network namespace of process `pid` (a container's).
    fn attach(name: String, pid: u32) -> Result<Netns> {
        ip(&["netns", "attach", &name, &pid.to_string()])?;
        Ok(Netns(name))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Its veths and the datapath's tap devices go with it.
        let _ = ip(&["netns", "delete", &self.0]);
    }
}

/// One running chassis.
#[derive(Debug)]
pub struct Chassis {
    install: Installation,
    system_id: String,
    /// The tunnel endpoint (`ovn-encap-ip`).
    encap_ip: IpAddr,
    controller: Daemon,
    vswitchd: Daemon,
    ovsdb: Daemon,
    db_inner: PathBuf,
    run_inner: PathBuf,
    pods: Vec<Pod>,
    servers: Vec<std::process::Child>,
    tag: String,
    bridge: String,
    /// Management ports added so far (their interfaces are numbered).
    management_ports: u32,
    /// The gateway bridge and its port to the external host, once added.
    gateway: Option<(String, String)>,
    /// Flow files written so far (they are numbered).
    flow_files: AtomicU32,
    /// The chassis' container, when the sandbox runs in containers: its network
    /// namespace is the node's.
    container: Option<Container>,
    /// The node's network namespace, where ovs-vswitchd and the pods' host veths live
    /// (the userspace datapath's tap devices are named alike in every chassis): a
    /// namespace of its own, or the container's, named on the host.
    node: Netns,
    // Last, so the directory goes after the daemons.
    dir: WorkDir,
}

/// The environment that gives OVS and OVN daemons their own run directory `rundir`.
fn run_env(rundir: &str) -> [String; 4] {
    ["OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVN_RUNDIR"].map(|v| format!("{v}={rundir}"))
}

/// Starts `program args…` of the root filesystem `root` under chroot, in a private
/// mount namespace with `/dev`, `/sys` and `/proc` mounted into the root and its own OVS
/// run directory `rundir`; in network namespace `netns` if given.
fn spawn_chrooted(
    root: &str,
    rundir: &str,
    name: &str,
    program: &str,
    args: &[String],
    netns: Option<&str>,
) -> Result<Daemon> {
    let env = run_env(rundir).join(" ");
    let script = format!(
        "set -e; mount --bind /dev {root}/dev; mount --bind /sys {root}/sys; \
         mount -t proc proc {root}/proc; \
         export {env}; \
         exec chroot {root} {program} \"$@\""
    );
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "unshare"]);
            c
        }
        None => Command::new("unshare"),
    };
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        &script,
        name,
    ])
    .args(args);
    Daemon::spawn(cmd, name)
}

fn run(cmd: &mut Command, what: &str) -> Result<Output> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| SandboxError(format!("cannot run {what}: {e}")))?;
    if !out.status.success() {
        return fail(format!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out)
}

/// The `ovs-vsctl` arguments adding bridge `name` on the userspace datapath, its
/// flows left to its controller (OVN or the test).
fn add_bridge(name: &str) -> [String; 9] {
    [
        "add-br",
        name,
        "--",
        "set",
        "bridge",
        name,
        "datapath_type=netdev",
        "fail-mode=secure",
        "other_config:disable-in-band=true",
    ]
    .map(str::to_owned)
}

/// No duplicate address detection on `dev` in namespace `ns`: the test's addresses
/// are its own, and tests should not wait for DAD.
fn no_dad(ns: &str, dev: &str) -> Result<()> {
    let key = format!("net.ipv6.conf.{dev}.accept_dad=0");
    run(
        Command::new("ip").args(["netns", "exec", ns, "sysctl", "-qw", &key]),
        "sysctl accept_dad",
    )
    .map(|_| ())
}

/// Transmit checksum offload off on `dev` in namespace `ns`: the userspace datapath
/// does not complete checksums a device left to offload (TCP would fail where ping
/// works).
fn no_tx_offload(ns: &str, dev: &str) -> Result<()> {
    run(
        Command::new("ip").args(["netns", "exec", ns, "ethtool", "-K", dev, "tx", "off"]),
        "ethtool -K tx off",
    )
    .map(|_| ())
}

fn ip(args: &[&str]) -> Result<()> {
    run(
        Command::new("ip").args(args),
        &format!("ip {}", args.join(" ")),
    )
    .map(|_| ())
}

/// What starting a chassis' daemons needs: its installation and directory, the root
/// filesystem and run directory as the programs see them, its database's socket.
struct Launch<'a> {
    install: &'a Installation,
    dir: &'a WorkDir,
    root: String,
    rundir: String,
    sock: PathBuf,
}

impl Launch<'_> {
    /// The chassis' ovsdb-server, ready, with a new Open_vSwitch database: the program
    /// of a container at `place` (whose network namespace is then the node's), or a
    /// process in a namespace of its own; with the container and the node.
    fn database(
        &self,
        place: Option<&Place>,
        tag: &str,
    ) -> Result<(Option<Container>, Daemon, Netns)> {
        let dir = self.dir;
        let db = dir.inner("conf.db");
        self.install.output(
            "ovsdb-tool",
            &[
                "create",
                path_str(&db)?,
                "/usr/share/openvswitch/vswitch.ovsschema",
            ],
        )?;
        let ovsdb_args = vec![
            path_str(&db)?.into(),
            format!("--remote=punix:{}", self.sock.display()),
            format!("--unixctl={}", dir.inner("ovsdb.ctl").display()),
            format!("--log-file={}", dir.inner("ovsdb.log").display()),
            "-vconsole:off".into(),
        ];
        let (container, mut ovsdb, node) = match place {
            Some(place) => {
                let container = place.start(
                    dir,
                    [vec!["ovsdb-server".to_owned()], ovsdb_args].concat(),
                    ContainerSpec {
                        // The userspace datapath's internal ports are tap devices.
                        cap_add: vec!["NET_ADMIN".into()],
                        devices: vec!["/dev/net/tun".into()],
                        // The engine turns IPv6 off in containers; pods and nodes are
                        // dual-stack.
                        sysctls: ["all", "default"]
                            .map(|c| (format!("net.ipv6.conf.{c}.disable_ipv6"), "0".into()))
                            .into(),
                        ..Default::default()
                    },
                )?;
                let pid = container
                    .pid()?
                    .ok_or_else(|| SandboxError(format!("the chassis {tag} stopped")))?;
                let node = Netns::attach(format!("{tag}n"), pid)?;
                (
                    Some(container),
                    Daemon::detached("ovsdb-server (chassis)"),
                    node,
                )
            }
            None => {
                let node = Netns::add(format!("{tag}n"))?;
                let ovsdb = spawn_chrooted(
                    &self.root,
                    &self.rundir,
                    "ovsdb-server (chassis)",
                    "ovsdb-server",
                    &ovsdb_args,
                    None,
                )?;
                (None, ovsdb, node)
            }
        };
        let host_sock = dir.host("db.sock");
        let log = dir.host("ovsdb.log");
        wait_until("the chassis ovsdb-server", || {
            ovsdb.check_running(&log)?;
            Ok(std::os::unix::net::UnixStream::connect(&host_sock)
                .is_ok()
                .then_some(()))
        })?;
        self.vsctl(&["--no-wait", "init"])?;
        Ok((container, ovsdb, node))
    }

    /// `ovs-vsctl` against the chassis' database.
    fn vsctl(&self, args: &[&str]) -> Result<String> {
        let db = format!("--db=unix:{}", self.sock.display());
        let mut all = vec![db.as_str()];
        all.extend_from_slice(args);
        self.install.output("ovs-vsctl", &all)
    }

    /// Starts `program` as daemon `name`: detached in `container` (the program returns
    /// once the daemon is ready), else a process, in the node's namespace if `in_node`.
    fn spawn(
        &self,
        container: Option<&Container>,
        node: &Netns,
        (name, program): (&str, &str),
        args: Vec<String>,
        in_node: bool,
    ) -> Result<Daemon> {
        match container {
            Some(c) => {
                let cmd: Vec<String> = ["env".to_owned()]
                    .into_iter()
                    .chain(run_env(&self.rundir))
                    .chain([
                        program.to_owned(),
                        "--detach".into(),
                        "--no-chdir".into(),
                        format!("--pidfile={}/{program}.pid", self.rundir),
                    ])
                    .chain(args)
                    .collect();
                c.exec(&cmd.iter().map(String::as_str).collect::<Vec<_>>())?;
                Ok(Daemon::detached(name))
            }
            None => {
                let netns = in_node.then_some(node.0.as_str());
                spawn_chrooted(&self.root, &self.rundir, name, program, &args, netns)
            }
        }
    }

    /// ovs-vswitchd with the userspace datapath, in the node's namespace, ready.
    fn vswitchd(&self, container: Option<&Container>, node: &Netns) -> Result<Daemon> {
        let dir = self.dir;
        let args = vec![
            format!("unix:{}", self.sock.display()),
            "--disable-system".into(),
            format!("--unixctl={}", dir.inner("vswitchd.ctl").display()),
            format!("--log-file={}", dir.inner("vswitchd.log").display()),
            "-vconsole:off".into(),
        ];
        let names = ("ovs-vswitchd", "ovs-vswitchd");
        let mut vswitchd = self.spawn(container, node, names, args, true)?;
        let vlog = dir.host("vswitchd.log");
        wait_until("ovs-vswitchd", || {
            vswitchd.check_running(&vlog)?;
            let text = std::fs::read_to_string(&vlog).unwrap_or_default();
            Ok(text.contains("ovs-vswitchd (Open vSwitch)").then_some(()))
        })?;
        Ok(vswitchd)
    }

    /// ovn-controller, once it registered chassis `system_id` in `sandbox`'s
    /// Southbound database.
    fn controller(
        &self,
        sandbox: &Sandbox,
        container: Option<&Container>,
        node: &Netns,
        system_id: &str,
    ) -> Result<Daemon> {
        let dir = self.dir;
        let args = vec![
            format!("unix:{}", self.sock.display()),
            format!("--unixctl={}", dir.inner("ovn-controller.ctl").display()),
            format!("--log-file={}", dir.inner("ovn-controller.log").display()),
            "-vconsole:off".into(),
        ];
        let names = ("ovn-controller", "ovn-controller");
        let mut controller = self.spawn(container, node, names, args, false)?;
        let clog = dir.host("ovn-controller.log");
        wait_until("ovn-controller to register its chassis", || {
            controller.check_running(&clog)?;
            Ok(sandbox
                .sbctl(&[
                    "--bare",
                    "--columns=name",
                    "find",
                    "Chassis",
                    &format!("name={system_id}"),
                ])
                .ok()
                .filter(|o| o.trim() == system_id)
                .map(|_| ()))
        })?;
        Ok(controller)
    }
}

impl Chassis {
    /// Starts a chassis named `system_id` whose ovn-controller follows `sandbox`'s
    /// Southbound database.
    pub fn start(sandbox: &Sandbox, system_id: &str) -> Result<Chassis> {
        Chassis::start_at(sandbox, system_id, "127.0.0.1".parse().expect("constant"))
    }

    /// [`Chassis::start`] with tunnel endpoint `encap_ip` (`ovn-encap-ip`): chassis of
    /// one sandbox need distinct ones; [`Chassis::link`] puts them on an underlay.
    pub fn start_at(sandbox: &Sandbox, system_id: &str, encap_ip: IpAddr) -> Result<Chassis> {
        let install = sandbox.nb.installation().clone();
        let root = install.root().map(|r| r.to_path_buf()).ok_or_else(|| {
            SandboxError("a chassis needs the sandbox root filesystem (OVN_SANDBOX_ROOT)".into())
        })?;
        // SAFETY: geteuid(2) takes no arguments, touches no memory and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return fail("a chassis needs root (network namespaces, mounts)");
        }
        let dir = install.workdir()?;
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{}{:x}{}", NETNS_PREFIX, std::process::id() % 0xfff, n);
        std::fs::create_dir_all(root.join("run/openvswitch"))
            .map_err(|e| SandboxError(format!("cannot create run/openvswitch: {e}")))?;
        let sock = dir.inner("db.sock");
        let rundir = dir.inner("");
        let launch = Launch {
            install: &install,
            dir: &dir,
            root: path_str(&root)?.to_owned(),
            rundir: path_str(&rundir)?.trim_end_matches('/').to_owned(),
            sock: sock.clone(),
        };
        // With the sandbox in containers, the chassis is one too, on the sandbox's
        // network: its database server is the container's program, ovs-vswitchd and
        // ovn-controller are started in it detached, and its network namespace is the
        // node's (named on the host, so that pods and the tools reach it as they reach
        // a namespace of their own). Its directory is mounted at the path the tools see
        // it by, so they reach the daemons' sockets from the host either way.
        let place = match (&install.image, &sandbox.nb.place) {
            (Some(image), Some(central)) => Some(Place {
                image: image.clone(),
                network: central.network.clone(),
                host: 20 + (n % 230) as u8,
                name: tag.clone(),
            }),
            _ => None,
        };
        let (container, ovsdb, node) = launch.database(place.as_ref(), &tag)?;
        let vswitchd = launch.vswitchd(container.as_ref(), &node)?;
        // The integration bridge is named after the chassis: with the userspace datapath
        // its internal port is a tap device of the host, so two chassis (tests running
        // side by side) cannot both call it br-int.
        let bridge = format!("{tag}b");
        // A chassis container reaches the Southbound server at its address.
        let sb_remote = match &container {
            Some(_) => sandbox.sb.tcp_remote(),
            None => sandbox.sb.tool_unix_remote(),
        };
        launch.vsctl(&add_bridge(&bridge).each_ref().map(String::as_str))?;
        launch.vsctl(&[
            "set",
            "open",
            ".",
            &format!("external_ids:system-id={system_id}"),
            &format!("external_ids:ovn-remote={sb_remote}"),
            "external_ids:ovn-encap-type=geneve",
            &format!("external_ids:ovn-encap-ip={encap_ip}"),
            "external_ids:ovn-bridge-datapath-type=netdev",
            &format!("external_ids:ovn-bridge={bridge}"),
            &format!("external_ids:hostname={system_id}"),
        ])?;
        let controller = launch.controller(sandbox, container.as_ref(), &node, system_id)?;
        Ok(Chassis {
            install,
            system_id: system_id.to_owned(),
            encap_ip,
            controller,
            vswitchd,
            ovsdb,
            container,
            db_inner: sock,
            run_inner: rundir,
            pods: Vec::new(),
            servers: Vec::new(),
            tag,
            bridge,
            management_ports: 0,
            gateway: None,
            flow_files: AtomicU32::new(0),
            node,
            dir,
        })
    }

    /// The chassis' container, when it runs in one (the sandbox's central does).
    pub fn container(&self) -> Option<&Container> {
        self.container.as_ref()
    }

    /// The chassis name (OVS `system-id`).
    pub fn system_id(&self) -> &str {
        &self.system_id
    }

    /// `unix:PATH` of the chassis' Open_vSwitch database, for a client on this host
    /// (the database ovn-controller and ovs-vswitchd read).
    pub fn ovsdb_remote(&self) -> String {
        format!("unix:{}", self.dir.host("db.sock").display())
    }

    /// Runs `ovs-vsctl` against this chassis.
    pub fn vsctl(&self, args: &[&str]) -> Result<String> {
        let db = format!("--db=unix:{}", self.db_inner.display());
        let mut all = vec![db.as_str()];
        all.extend_from_slice(args);
        self.install.output("ovs-vsctl", &all)
    }

    /// Runs `ovs-appctl -t ovs-vswitchd args…`.
    pub fn vswitchd_appctl(&self, args: &[&str]) -> Result<String> {
        let target = format!("--target={}", self.run_inner.join("vswitchd.ctl").display());
        let mut all = vec![target.as_str()];
        all.extend_from_slice(args);
        self.install.output("ovs-appctl", &all)
    }

    /// Creates a pod bound to logical switch port `iface_id`: a namespace with an
    /// interface `eth0` of MAC `mac` and addresses `ips`, default routes via
    /// `gateways`, and the veth's other end on the integration bridge.
    pub fn add_pod(
        &mut self,
        iface_id: &str,
        mac: &str,
        ips: &[IpNet],
        gateways: &[IpAddr],
    ) -> Result<Pod> {
        let i = self.pods.len();
        let pod = Pod {
            netns: format!("{}p{i}", self.tag),
            iface_id: iface_id.to_owned(),
            host_veth: format!("{}h{i}", self.tag),
            mac: mac.to_owned(),
            ips: ips.to_vec(),
        };
        self.add_namespace(&pod, &format!("{}c{i}", self.tag), gateways)?;
        self.vsctl(&[
            "add-port",
            &self.bridge,
            &pod.host_veth,
            "--",
            "set",
            "interface",
            &pod.host_veth,
            &format!("external_ids:iface-id={iface_id}"),
        ])?;
        Ok(pod)
    }

    /// Creates `pod`'s namespace with its `eth0` (the MAC and addresses of `pod`,
    /// default routes via `gateways`), one end of a veth whose other end,
    /// `pod.host_veth`, is in the chassis' namespace (`peer` names it until it moves).
    /// The namespace is recorded first, so that drop removes it whatever fails.
    fn add_namespace(&mut self, pod: &Pod, peer: &str, gateways: &[IpAddr]) -> Result<()> {
        let (netns, host) = (pod.netns.as_str(), pod.host_veth.as_str());
        ip(&["netns", "add", netns])?;
        self.pods.push(pod.clone());
        ip(&["link", "add", host, "type", "veth", "peer", "name", peer])?;
        ip(&["link", "set", host, "netns", &self.node.0])?;
        ip(&["link", "set", peer, "netns", netns])?;
        ip(&["-n", netns, "link", "set", peer, "name", "eth0"])?;
        if !pod.mac.is_empty() {
            ip(&["-n", netns, "link", "set", "eth0", "address", &pod.mac])?;
        }
        no_dad(netns, "eth0")?;
        for a in &pod.ips {
            ip(&["-n", netns, "addr", "add", &a.to_string(), "dev", "eth0"])?;
        }
        no_tx_offload(netns, "eth0")?;
        no_tx_offload(&self.node.0, host)?;
        ip(&["-n", netns, "link", "set", "eth0", "up"])?;
        ip(&["-n", netns, "link", "set", "lo", "up"])?;
        for g in gateways {
            let family = if g.is_ipv4() { "-4" } else { "-6" };
            ip(&[
                family,
                "-n",
                netns,
                "route",
                "add",
                "default",
                "via",
                &g.to_string(),
            ])?;
        }
        ip(&["-n", &self.node.0, "link", "set", host, "up"])
    }

    /// Adds the node's end of a management port: an OVS internal port bound to
    /// logical switch port `iface_id`, living in the chassis' own network namespace
    /// (the node's host, as `ovn-k8s-mpX` lives on a real node), with MAC `mac` and
    /// addresses `ips`. The returned [`Pod`] runs commands in that namespace (the
    /// host): `host_veth` names the interface. It goes with the chassis.
    pub fn add_management_port(&mut self, iface_id: &str, mac: &str, ips: &[IpNet]) -> Result<Pod> {
        let name = format!("{}m{}", self.tag, self.management_ports);
        self.management_ports += 1;
        self.vsctl(&[
            "add-port",
            &self.bridge,
            &name,
            "--",
            "set",
            "interface",
            &name,
            "type=internal",
            &format!("mac=\"{mac}\""),
            &format!("external_ids:iface-id={iface_id}"),
        ])?;
        let node = self.node.0.clone();
        wait_until(&format!("the management port {name}"), || {
            Ok(ip(&["-n", &node, "link", "show", &name]).ok())
        })?;
        ip(&["-n", &node, "link", "set", &name, "address", mac])?;
        no_dad(&node, &name)?;
        for a in ips {
            ip(&["-n", &node, "addr", "add", &a.to_string(), "dev", &name])?;
        }
        no_tx_offload(&node, &name)?;
        ip(&["-n", &node, "link", "set", &name, "up"])?;
        Ok(Pod {
            netns: node,
            iface_id: iface_id.to_owned(),
            host_veth: name,
            mac: mac.to_owned(),
            ips: ips.to_vec(),
        })
    }

    /// Adds the node's gateway bridge and the network beyond it, as ovnkube-node sets
    /// them up in shared gateway mode: an OVS bridge (userspace datapath) mapped to
    /// `physnet` (so the gateway routers' localnet ports land on it), with a veth to
    /// an "external" host, a namespace of its own with addresses `external` and
    /// default routes via `routes`. The bridge forwards as a learning switch; add the
    /// node's SNAT with [`Chassis::snat_to_node`]. The returned [`Pod`] is the
    /// external host; it goes with the chassis.
    pub fn add_gateway_bridge(
        &mut self,
        physnet: &str,
        external: &[IpNet],
        routes: &[IpAddr],
    ) -> Result<Pod> {
        let bridge = format!("{}x", self.tag);
        self.vsctl(&add_bridge(&bridge).each_ref().map(String::as_str))?;
        self.vsctl(&[
            "set",
            "open",
            ".",
            &format!("external_ids:ovn-bridge-mappings={physnet}:{bridge}"),
        ])?;
        let pod = Pod {
            netns: format!("{}xe", self.tag),
            iface_id: String::new(),
            host_veth: format!("{}xh", self.tag),
            mac: String::new(),
            ips: external.to_vec(),
        };
        self.add_namespace(&pod, &format!("{}xc", self.tag), routes)?;
        let host = pod.host_veth.clone();
        self.vsctl(&["add-port", &bridge, &host])?;
        let ofport = self.vsctl(&["get", "interface", &host, "ofport"])?;
        // Every gateway router of the node has the node's MAC: the external host's ARP
        // and neighbor replies go to all of them, not to the one a learning switch
        // last saw it behind.
        let ofport = ofport.trim().to_owned();
        self.add_flows(
            &bridge,
            &format!(
                "table=0,priority=60,in_port={ofport},arp,actions=FLOOD\n\
                 table=0,priority=60,in_port={ofport},icmp6,icmp_type=136,actions=FLOOD\n\
                 table=0,priority=0,actions=NORMAL\ntable=1,priority=0,actions=NORMAL\n"
            ),
        )?;
        self.gateway = Some((bridge, ofport));
        Ok(pod)
    }

    /// On the gateway bridge, the SNAT ovnkube-node gives a user-defined network's
    /// traffic in shared gateway mode: what leaves the gateway router (behind
    /// `localnet_port`) from the network's masquerade address `masquerade` goes out to
    /// the external host from the node's address `node_ip` (conntrack zone 64000), and
    /// the replies are un-NATed and sent back to that gateway router.
    pub fn snat_to_node(
        &self,
        localnet_port: &str,
        masquerade: IpAddr,
        node_ip: IpAddr,
    ) -> Result<()> {
        let Some((bridge, phys)) = &self.gateway else {
            return fail("snat_to_node needs add_gateway_bridge first");
        };
        let patch = self.patch_port(localnet_port)?;
        let ip = if masquerade.is_ipv4() { "ip" } else { "ipv6" };
        let (src, dst) = if masquerade.is_ipv4() {
            ("nw_src", "nw_dst")
        } else {
            ("ipv6_src", "ipv6_dst")
        };
        let flows = format!(
            "table=0,priority=100,{ip},{src}={masquerade},actions=ct(commit,zone=64000,nat(src={node_ip})),output:{phys}\n\
             table=0,priority=50,in_port={phys},{ip},{dst}={node_ip},actions=ct(zone=64000,nat,table=1)\n\
             table=1,priority=100,{ip},{dst}={masquerade},actions=output:{patch}\n"
        );
        self.add_flows(bridge, &flows)
    }

    /// The OpenFlow port of ovn-controller's patch port for `localnet_port` on the
    /// gateway bridge (`patch-<port>-to-<integration bridge>`), once it exists.
    fn patch_port(&self, localnet_port: &str) -> Result<String> {
        let patch = format!("patch-{localnet_port}-to-{}", self.bridge);
        wait_until(&format!("the patch port {patch}"), || {
            Ok(self
                .vsctl(&["get", "interface", &patch, "ofport"])
                .ok()
                .map(|p| p.trim().to_owned())
                .filter(|p| !p.is_empty() && p != "[]" && p != "-1"))
        })
    }

    /// On the gateway bridge, what ovnkube-node does for a user-defined network's
    /// node port in shared gateway mode: what the external host sends to `node_ip`:
    /// `port` (TCP) goes to the gateway router behind `localnet_port`.
    pub fn steer_node_port(&self, localnet_port: &str, node_ip: IpAddr, port: u16) -> Result<()> {
        let Some((bridge, phys)) = &self.gateway else {
            return fail("steer_node_port needs add_gateway_bridge first");
        };
        let patch = self.patch_port(localnet_port)?;
        let (ip, dst) = if node_ip.is_ipv4() {
            ("tcp", "nw_dst")
        } else {
            ("tcp6", "ipv6_dst")
        };
        self.add_flows(
            bridge,
            &format!(
                "table=0,priority=110,in_port={phys},{ip},{dst}={node_ip},tp_dst={port},actions=output:{patch}\n"
            ),
        )
    }

    /// Local gateway mode, as ovnkube-node sets the node up: the node's addresses
    /// `node_ips` live on the gateway bridge's own interface (in the node's namespace,
    /// with the node's MAC `mac`), the host forwards and masquerades to them what it
    /// routes out there, and what the external host sends to them (and its ARP and
    /// neighbor solicitations for them) goes to the host, not to the gateway routers.
    pub fn route_via_host(&self, node_ips: &[IpNet], mac: &str) -> Result<()> {
        let Some((bridge, phys)) = &self.gateway else {
            return fail("route_via_host needs add_gateway_bridge first");
        };
        let node = self.node.0.as_str();
        ip(&["-n", node, "link", "set", bridge, "address", mac])?;
        no_dad(node, bridge)?;
        for a in node_ips {
            ip(&["-n", node, "addr", "add", &a.to_string(), "dev", bridge])?;
        }
        no_tx_offload(node, bridge)?;
        ip(&["-n", node, "link", "set", bridge, "up"])?;
        let mut flows = String::new();
        for a in node_ips {
            let addr = a.addr();
            let (sysctl, table, to_host) = if addr.is_ipv4() {
                (
                    "net.ipv4.ip_forward=1",
                    "iptables",
                    [format!("arp,arp_tpa={addr}"), format!("ip,nw_dst={addr}")],
                )
            } else {
                (
                    "net.ipv6.conf.all.forwarding=1",
                    "ip6tables",
                    [
                        format!("icmp6,icmp_type=135,nd_target={addr}"),
                        format!("ipv6,ipv6_dst={addr}"),
                    ],
                )
            };
            for m in to_host {
                flows.push_str(&format!(
                    "table=0,priority=70,in_port={phys},{m},actions=LOCAL\n"
                ));
            }
            for cmd in [
                vec!["sysctl", "-qw", sysctl],
                vec![
                    table,
                    "-t",
                    "nat",
                    "-A",
                    "POSTROUTING",
                    "-o",
                    bridge,
                    "-j",
                    "MASQUERADE",
                ],
            ] {
                run(
                    Command::new("ip").args(["netns", "exec", node]).args(&cmd),
                    &cmd.join(" "),
                )?;
            }
        }
        self.add_flows(bridge, &flows)
    }

    /// The packets the host's masquerading rules of family `ipv4` have sent out.
    pub fn host_masqueraded(&self, ipv4: bool) -> Result<u64> {
        let table = if ipv4 { "iptables" } else { "ip6tables" };
        let out = run(
            Command::new("ip").args([
                "netns",
                "exec",
                &self.node.0,
                table,
                "-t",
                "nat",
                "-L",
                "POSTROUTING",
                "-v",
                "-x",
                "-n",
            ]),
            "iptables -L",
        )?;
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("MASQUERADE"))
            .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
            .sum())
    }

    /// Adds `flows` (one per line) to `bridge` with `ovs-ofctl add-flows`.
    fn add_flows(&self, bridge: &str, flows: &str) -> Result<()> {
        let name = format!("flows-{}", self.flow_files.fetch_add(1, Ordering::Relaxed));
        let file = self.dir.host(&name);
        std::fs::write(&file, flows)
            .map_err(|e| SandboxError(format!("cannot write {}: {e}", file.display())))?;
        let target = format!(
            "unix:{}",
            self.run_inner.join(format!("{bridge}.mgmt")).display()
        );
        self.install
            .output(
                "ovs-ofctl",
                &["add-flows", &target, path_str(&self.dir.inner(&name))?],
            )
            .map(|_| ())
    }

    /// Joins chassis `a` and `b` by an underlay, so that their tunnels carry packets
    /// between them: a veth between their namespaces, each end on a userspace bridge
    /// (`<tag>u`) whose own interface has the chassis' tunnel address (given to
    /// [`Chassis::start_at`]) with prefix length `len` (OVS's native tunneling: the
    /// geneve packets leave and arrive through that bridge). It goes with the chassis.
    pub fn link(a: &Chassis, b: &Chassis, len: u8) -> Result<()> {
        let (ea, eb) = (format!("{}l", a.tag), format!("{}l", b.tag));
        ip(&["link", "add", &ea, "type", "veth", "peer", "name", &eb])?;
        ip(&["link", "set", &ea, "netns", &a.node.0])?;
        ip(&["link", "set", &eb, "netns", &b.node.0])?;
        for (c, end) in [(a, &ea), (b, &eb)] {
            let addr = IpNet::new(c.encap_ip, len)
                .map_err(|e| SandboxError(format!("{}/{len}: {e}", c.encap_ip)))?;
            c.underlay(end, addr)?;
        }
        Ok(())
    }

    /// This chassis' side of [`Chassis::link`]: `end` on the underlay bridge, the
    /// bridge's interface at `addr`.
    fn underlay(&self, end: &str, addr: IpNet) -> Result<()> {
        let bridge = format!("{}u", self.tag);
        let node = self.node.0.as_str();
        let mut args = add_bridge(&bridge).to_vec();
        // A learning switch: ARP and the tunnel packets flow by NORMAL.
        args.retain(|a| a != "fail-mode=secure");
        self.vsctl(&args.iter().map(String::as_str).collect::<Vec<_>>())?;
        ip(&["-n", node, "link", "set", end, "up"])?;
        no_tx_offload(node, end)?;
        self.vsctl(&["add-port", &bridge, end])?;
        wait_until(&format!("the underlay bridge {bridge}"), || {
            Ok(ip(&["-n", node, "link", "show", &bridge]).ok())
        })?;
        ip(&["-n", node, "addr", "add", &addr.to_string(), "dev", &bridge])?;
        ip(&["-n", node, "link", "set", &bridge, "up"])
    }

    /// Runs `ip args…` in the chassis' own network namespace (the node's host): to
    /// give the host an address or a route.
    pub fn host_ip(&self, args: &[&str]) -> Result<()> {
        let mut all = vec!["-n", self.node.0.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// Runs `command` in `pod`'s namespace.
    pub fn exec(&self, pod: &Pod, command: &[&str]) -> Result<Output> {
        Command::new("ip")
            .args(["netns", "exec", &pod.netns])
            .args(command)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| SandboxError(format!("cannot run in {}: {e}", pod.netns)))
    }

    /// True when any of `count` pings from `pod` to `to` gets an answer (ping's exit
    /// status).
    pub fn ping(&self, pod: &Pod, to: IpAddr, count: u32) -> Result<bool> {
        let out = self.exec(
            pod,
            &[
                "ping",
                "-c",
                &count.to_string(),
                "-i",
                "0.2",
                "-W",
                "1",
                &to.to_string(),
            ],
        )?;
        Ok(out.status.success())
    }
}

/// A TCP server: accepts every connection, sends its reply, closes (argv: port,
/// reply; `{peer}` in the reply becomes the client's address). Binds `::` with IPv4
/// mapped, so one server answers both families.
const TCP_SERVER: &str = concat!(
    "import socket,sys\n",
    "s=socket.socket(socket.AF_INET6)\n",
    "s.setsockopt(socket.IPPROTO_IPV6,socket.IPV6_V6ONLY,0)\n",
    "s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n",
    "s.bind(('::',int(sys.argv[1])))\n",
    "s.listen(64)\n",
    "while True:\n",
    "    c,a=s.accept()\n",
    "    p=a[0][7:] if a[0].startswith('::ffff:') else a[0]\n",
    "    c.sendall(sys.argv[2].replace('{peer}',p).encode())\n",
    "    c.close()\n",
);

/// A UDP server: answers every datagram with its reply (argv: port, reply; `{peer}`
/// in the reply becomes the sender's address). Both families, as [`TCP_SERVER`]. The
/// reply leaves from the address the datagram was sent to (`IPV6_PKTINFO`, which
/// Linux gives for IPv4-mapped datagrams too), as a DNS server's does: on a host with
/// several addresses the kernel would otherwise pick the route's source address.
const UDP_SERVER: &str = concat!(
    "import socket,sys\n",
    "s=socket.socket(socket.AF_INET6,socket.SOCK_DGRAM)\n",
    "s.setsockopt(socket.IPPROTO_IPV6,socket.IPV6_V6ONLY,0)\n",
    "s.setsockopt(socket.IPPROTO_IPV6,socket.IPV6_RECVPKTINFO,1)\n",
    "s.bind(('::',int(sys.argv[1])))\n",
    "while True:\n",
    "    d,anc,f,a=s.recvmsg(2000,100)\n",
    "    p=a[0][7:] if a[0].startswith('::ffff:') else a[0]\n",
    "    r=sys.argv[2].replace('{peer}',p).encode()\n",
    "    to=[c[:16] for l,t,c in anc if l==socket.IPPROTO_IPV6 and t==socket.IPV6_PKTINFO]\n",
    "    cm=[(socket.IPPROTO_IPV6,socket.IPV6_PKTINFO,to[0]+bytes(4))] if to else []\n",
    "    s.sendmsg([r],cm,0,a)\n",
);

/// A client (argv: tcp|udp, address, port, timeout): prints `reply:` and what it
/// read, `refused` when the destination refused (a TCP reset, an ICMP unreachable),
/// `timeout` when nothing came back in time.
const CLIENT: &str = concat!(
    "import socket,sys\n",
    "kind,host,port,t=sys.argv[1],sys.argv[2],int(sys.argv[3]),float(sys.argv[4])\n",
    "try:\n",
    "    if kind=='tcp':\n",
    "        c=socket.create_connection((host,port),timeout=t)\n",
    "        c.settimeout(t)\n",
    "        r=c.recv(1000)\n",
    "    else:\n",
    "        fam=socket.AF_INET6 if ':' in host else socket.AF_INET\n",
    "        c=socket.socket(fam,socket.SOCK_DGRAM)\n",
    "        c.settimeout(t)\n",
    "        c.connect((host,port))\n",
    "        c.send(b'?')\n",
    "        r=c.recv(2000)\n",
    "    sys.stdout.write('reply:'+r.decode())\n",
    "except ConnectionRefusedError:\n",
    "    sys.stdout.write('refused')\n",
    "except (socket.timeout,TimeoutError):\n",
    "    sys.stdout.write('timeout')\n",
);

/// What a request from a pod got back.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Answer {
    /// A reply, its text.
    Reply(String),
    /// The destination refused: a TCP reset or an ICMP unreachable.
    Refused,
    /// Nothing within the timeout.
    Silence,
}

/// A transport protocol a test server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

impl Chassis {
    /// Starts a TCP server in `pod` listening on `port` (both families) that answers
    /// every connection with `reply`, where `{peer}` stands for the address the
    /// connection came from; it runs until the chassis is dropped.
    pub fn serve_tcp(&mut self, pod: &Pod, port: u16, reply: &str) -> Result<()> {
        self.serve(pod, Transport::Tcp, port, reply)
    }

    /// Starts a server of `transport` in `pod` on `port`, as [`Chassis::serve_tcp`].
    pub fn serve(&mut self, pod: &Pod, transport: Transport, port: u16, reply: &str) -> Result<()> {
        let script = match transport {
            Transport::Tcp => TCP_SERVER,
            Transport::Udp => UDP_SERVER,
        };
        let child = Command::new("ip")
            .args(["netns", "exec", &pod.netns, "python3", "-c", script])
            .arg(port.to_string())
            .arg(reply)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                SandboxError(format!("cannot start a TCP server in {}: {e}", pod.netns))
            })?;
        self.servers.push(child);
        let local: IpAddr = "127.0.0.1".parse().expect("constant");
        wait_until(
            &format!("the {transport:?} server in {}", pod.netns),
            || {
                self.request(
                    pod,
                    transport,
                    local,
                    port,
                    std::time::Duration::from_millis(200),
                )
                .map(|a| matches!(a, Answer::Reply(_)).then_some(()))
            },
        )
    }

    /// Sends a request of `transport` from `pod` to `to`:`port` (a connection for TCP,
    /// a datagram for UDP) and tells what came back within `timeout`.
    pub fn request(
        &self,
        pod: &Pod,
        transport: Transport,
        to: IpAddr,
        port: u16,
        timeout: std::time::Duration,
    ) -> Result<Answer> {
        let kind = match transport {
            Transport::Tcp => "tcp",
            Transport::Udp => "udp",
        };
        let out = self.exec(
            pod,
            &[
                "python3",
                "-c",
                CLIENT,
                kind,
                &to.to_string(),
                &port.to_string(),
                &format!("{:.3}", timeout.as_secs_f64()),
            ],
        )?;
        let text = String::from_utf8_lossy(&out.stdout);
        Ok(match text.strip_prefix("reply:") {
            Some(reply) => Answer::Reply(reply.to_owned()),
            None if text == "refused" => Answer::Refused,
            // Another error (no route to the host, say) is as good as silence.
            None => Answer::Silence,
        })
    }

    /// Connects from `pod` to `to`:`port` and reads the reply: `Some(reply)` when a
    /// connection was made and answered within `timeout`, `None` otherwise.
    pub fn tcp_request(
        &self,
        pod: &Pod,
        to: IpAddr,
        port: u16,
        timeout: std::time::Duration,
    ) -> Result<Option<String>> {
        Ok(
            match self.request(pod, Transport::Tcp, to, port, timeout)? {
                Answer::Reply(r) => Some(r),
                Answer::Refused | Answer::Silence => None,
            },
        )
    }
}

impl Drop for Chassis {
    fn drop(&mut self) {
        for s in &mut self.servers {
            let _ = s.kill();
            let _ = s.wait();
        }
        self.controller.kill();
        self.vswitchd.kill();
        self.ovsdb.kill();
        for p in &self.pods {
            let _ = ip(&["netns", "delete", &p.netns]);
        }
        // The node's namespace (with the pods' host veths) goes with its field.
        let _ = &self.dir;
    }
}

/// The network namespaces and links left by chassis of this crate (for leak checks).
pub fn leftovers() -> Vec<String> {
    let mut out = Vec::new();
    for args in [["netns", "list"], ["-o", "link"]] {
        if let Ok(o) = Command::new("ip").args(args).output() {
            for line in String::from_utf8_lossy(&o.stdout).lines() {
                if line.contains(NETNS_PREFIX) {
                    out.push(line.trim().to_owned());
                }
            }
        }
    }
    out
}
