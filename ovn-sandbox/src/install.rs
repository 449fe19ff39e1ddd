//! Where the OVS and OVN programs come from: a root filesystem run under chroot, or
//! the host; and whether the central's daemons run as containers of the OVN image.

use super::*;

/// The environment variable that chooses how [`Installation::recent`] runs the
/// central's daemons: `containers` or `processes`; unset, containers when the
/// machine's Docker Engine answers.
pub const BACKEND_VAR: &str = "OVN_SANDBOX_BACKEND";

/// A set of OVS and OVN programs: inside a chroot, or on the host; and, when it has an
/// image, the same programs in containers.
#[derive(Clone, Debug)]
pub struct Installation {
    pub(crate) root: Option<PathBuf>,
    pub(crate) ovn_version: String,
    pub(crate) ovs_version: String,
    /// The OVN image ([`ovn_image`], built from `root`) that servers and ovn-northd run
    /// in as containers, each with an address of its own; `None`: they run as
    /// processes. The tools (ovn-nbctl, ovsdb-tool, …) run as processes either way.
    pub(crate) image: Option<String>,
}

impl Installation {
    /// OVN 25.03 or newer, as [`Installation::local`] finds it, with its daemons in
    /// containers ([`Installation::in_containers`]) when the machine has a Docker
    /// Engine and the root filesystem to build the image from. [`BACKEND_VAR`] set to
    /// `processes` or `containers` decides instead (`containers` fails where they
    /// cannot run).
    pub fn recent() -> Result<Installation> {
        let local = Installation::local()?;
        match std::env::var(BACKEND_VAR).as_deref() {
            Ok("processes") => Ok(local),
            Ok("containers") => local.in_containers(),
            Ok(other) if !other.is_empty() => fail(format!(
                "{BACKEND_VAR}={other}: expected `containers` or `processes`"
            )),
            _ if local.root.is_some() && engine_available() => local.in_containers(),
            _ => Ok(local),
        }
    }

    /// This installation with its servers and ovn-northd run as containers of the OVN
    /// image (built from its root filesystem on first use).
    pub fn in_containers(mut self) -> Result<Installation> {
        self.image = Some(ovn_image(&self)?);
        Ok(self)
    }

    /// The OVN image its daemons run in, when they run in containers.
    pub fn image(&self) -> Option<&str> {
        self.image.as_deref()
    }

    /// OVN 25.03 or newer run as processes of this machine: the root filesystem at
    /// `$OVN_SANDBOX_ROOT` (or [`DEFAULT_ROOT`]) under chroot, else the programs on
    /// `PATH` if they are recent enough.
    pub fn local() -> Result<Installation> {
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

    pub(crate) fn probe(root: Option<PathBuf>) -> Result<Installation> {
        let mut i = Installation {
            root,
            ovn_version: String::new(),
            ovs_version: String::new(),
            image: None,
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

    pub(crate) fn ovn_at_least(&self, (major, minor): (u32, u32)) -> bool {
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

    pub(crate) fn workdir(&self) -> Result<WorkDir> {
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

pub(crate) fn check_output(program: &str, args: &[&str], out: Output) -> Result<String> {
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

pub(crate) fn first_version(text: &str) -> Option<String> {
    text.split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
        .map(str::to_owned)
}
