//! OVN in containers on the machine's Docker Engine (through bollard): the OVN image,
//! user-defined networks with their own subnets, containers with their own addresses,
//! and the faults only containers can make (a member cut off its network, paused,
//! killed and started again).
//!
//! Everything made here is labelled [`LABEL_TEST`] (the test's name, the thread's name
//! under libtest) and [`LABEL_PID`] (the process that made it), and removed when its
//! handle is dropped, panics included. What a killed test process left behind is
//! removed by the next process that uses the engine (its pid is gone); the suite's
//! leak check lists whatever still carries the label.

use std::collections::HashMap;
use std::future::Future;
use std::net::Ipv4Addr;
use std::sync::{Mutex, OnceLock};

use bollard::models::{
    ContainerCreateBody, EndpointIpamConfig, EndpointSettings, HostConfig, Ipam, IpamConfig,
    NetworkConnectRequest, NetworkCreateRequest, NetworkDisconnectRequest, NetworkingConfig,
};
use bollard::query_parameters::{
    BuildImageOptionsBuilder, CreateContainerOptionsBuilder, CreateImageOptionsBuilder,
    KillContainerOptionsBuilder, ListContainersOptionsBuilder, ListNetworksOptionsBuilder,
    RemoveContainerOptionsBuilder,
};
use bollard::Docker;
use futures_util::TryStreamExt;

use super::*;

/// Label on every container and network: the name of the test that made it.
pub const LABEL_TEST: &str = "org.ovsdb-rs.test";
/// Label on every container and network: the pid of the process that made it.
pub const LABEL_PID: &str = "org.ovsdb-rs.pid";

/// The OVN image's Dockerfile; the image's tag is a hash of it and of its base.
const DOCKERFILE: &str = include_str!("../image/Dockerfile");

/// The runtime the engine's requests run on: its own, so that the blocking calls here
/// work from plain threads and from inside a test's runtime alike.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ovn-sandbox-engine")
            .enable_all()
            .build()
            .expect("a tokio runtime for the Docker engine's requests")
    })
}

/// Runs `f` on the engine's runtime and waits for it.
fn block<T: Send + 'static>(f: impl Future<Output = T> + Send + 'static) -> Result<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    runtime().spawn(async move {
        let _ = tx.send(f.await);
    });
    rx.recv()
        .map_err(|_| SandboxError("a Docker engine request panicked".into()))
}

/// The engine, connected once per process (the API version agreed with the daemon).
/// The first connection also removes what killed test processes left behind.
fn docker() -> Result<Docker> {
    static DOCKER: OnceLock<std::result::Result<Docker, String>> = OnceLock::new();
    let docker = DOCKER
        .get_or_init(|| {
            let docker = block(async {
                let docker = Docker::connect_with_local_defaults()
                    .map_err(|e| format!("cannot reach the Docker engine: {e}"))?;
                let docker = docker
                    .negotiate_version()
                    .await
                    .map_err(|e| format!("cannot reach the Docker engine: {e}"))?;
                reap_orphans(&docker).await;
                Ok(docker)
            })
            .map_err(|e| e.0)
            .and_then(|r| r);
            docker
        })
        .clone();
    docker.map_err(SandboxError)
}

/// True when the machine's Docker engine answers.
pub fn engine_available() -> bool {
    docker().is_ok()
}

fn engine_error(what: &str, e: bollard::errors::Error) -> SandboxError {
    SandboxError(format!("{what}: {e}"))
}

/// The labels of what this process makes now.
fn labels() -> HashMap<String, String> {
    let test = std::thread::current()
        .name()
        .unwrap_or("ovn-sandbox")
        .to_owned();
    HashMap::from([
        (LABEL_TEST.to_owned(), test),
        (LABEL_PID.to_owned(), std::process::id().to_string()),
    ])
}

/// Removes the containers and networks of processes that no longer run.
async fn reap_orphans(docker: &Docker) {
    let dead = |labels: Option<&HashMap<String, String>>| {
        labels
            .and_then(|l| l.get(LABEL_PID))
            .and_then(|p| p.parse::<u32>().ok())
            .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
    };
    let filter = HashMap::from([("label", vec![LABEL_PID])]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filter)
        .build();
    for c in docker
        .list_containers(Some(options))
        .await
        .unwrap_or_default()
    {
        if let (true, Some(id)) = (dead(c.labels.as_ref()), c.id.as_deref()) {
            let _ = docker.remove_container(id, Some(force_remove())).await;
        }
    }
    let options = ListNetworksOptionsBuilder::default()
        .filters(&filter)
        .build();
    for n in docker
        .list_networks(Some(options))
        .await
        .unwrap_or_default()
    {
        if let (true, Some(id)) = (dead(n.labels.as_ref()), n.id.as_deref()) {
            let _ = docker.remove_network(id).await;
        }
    }
}

/// The names of the containers and networks labelled with test `test` (all of this
/// machine's when `None`): what a test left behind.
pub fn labelled(test: Option<&str>) -> Result<Vec<String>> {
    let docker = docker()?;
    let label = match test {
        Some(t) => format!("{LABEL_TEST}={t}"),
        None => LABEL_TEST.to_owned(),
    };
    block(async move {
        let filter = HashMap::from([("label", vec![label.as_str()])]);
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filter)
            .build();
        let containers = docker
            .list_containers(Some(options))
            .await
            .map_err(|e| engine_error("docker ps", e))?;
        let options = ListNetworksOptionsBuilder::default()
            .filters(&filter)
            .build();
        let networks = docker
            .list_networks(Some(options))
            .await
            .map_err(|e| engine_error("docker network ls", e))?;
        let mut names: Vec<String> = containers
            .into_iter()
            .flat_map(|c| c.names.unwrap_or_default())
            .map(|n| format!("container {}", n.trim_start_matches('/')))
            .collect();
        names.extend(
            networks
                .into_iter()
                .filter_map(|n| n.name)
                .map(|n| format!("network {n}")),
        );
        Ok(names)
    })?
}

fn force_remove() -> bollard::query_parameters::RemoveContainerOptions {
    RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build()
}

/// A short hash of `parts`, for content-addressed tags.
fn content_hash(parts: &[&[u8]]) -> String {
    // FNV-1a, 64 bits: enough to tell a changed Dockerfile or root from the last one.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.iter().chain(&[0u8]) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

async fn image_exists(docker: &Docker, tag: &str) -> bool {
    docker.inspect_image(tag).await.is_ok()
}

/// The OVN image, built on first use (once per process; reused across processes and
/// runs by its content-addressed tag): the base imported from `install`'s root
/// filesystem, then the repository's Dockerfile (`ovn-sandbox/image/Dockerfile`) on
/// top. Its tag.
pub fn ovn_image(install: &Installation) -> Result<String> {
    static BUILT: Mutex<Option<String>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(tag) = built.as_ref() {
        return Ok(tag.clone());
    }
    let root = install.root().ok_or_else(|| {
        SandboxError(
            "the OVN image is built from the sandbox's root filesystem: run scripts/setup-ovn.sh"
                .into(),
        )
    })?;
    let status_file = root.join("var/lib/dpkg/status");
    let status = fs::read(&status_file)
        .map_err(|e| SandboxError(format!("cannot read {}: {e}", status_file.display())))?;
    let base = format!("ovsdb-rs/sid-base:{}", content_hash(&[&status]));
    let tag = format!(
        "ovsdb-rs/ovn:{}",
        content_hash(&[DOCKERFILE.as_bytes(), base.as_bytes()])
    );
    let docker = docker()?;
    let root = root.to_path_buf();
    let (b, t) = (base.clone(), tag.clone());
    block(async move {
        if !image_exists(&docker, &b).await {
            import_root(&docker, &root, &b).await?;
        }
        if !image_exists(&docker, &t).await {
            build_image(&docker, DOCKERFILE, &[("BASE", &b)], &t).await?;
        }
        Ok::<_, SandboxError>(())
    })??;
    *built = Some(tag.clone());
    Ok(tag)
}

/// `docker import` of `root` as `tag`: the directory's files as one layer, streamed
/// from `tar` (the sandboxes' working directories, mounts, device nodes and apt's
/// downloaded packages left out).
async fn import_root(docker: &Docker, root: &Path, tag: &str) -> Result<()> {
    let mut tar = tokio::process::Command::new("tar")
        .args(["-c", "--numeric-owner", "--one-file-system"])
        .args([
            "--exclude=./tmp/*",
            "--exclude=./proc/*",
            "--exclude=./sys/*",
        ])
        .args([
            "--exclude=./dev/*",
            "--exclude=./run/*",
            "--exclude=./var/cache/apt/*",
        ])
        .arg("-C")
        .arg(root)
        .arg(".")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| SandboxError(format!("cannot run tar: {e}")))?;
    let stdout = tar.stdout.take().expect("piped");
    let (repo, version) = tag.split_once(':').unwrap_or((tag, "latest"));
    let options = CreateImageOptionsBuilder::default()
        .from_src("-")
        .repo(repo)
        .tag(version)
        .build();
    let body = bollard::body_try_stream(tokio_util::io::ReaderStream::new(stdout));
    let imported: std::result::Result<Vec<_>, _> = docker
        .create_image(Some(options), Some(body), None)
        .try_collect()
        .await;
    let out = tar
        .wait_with_output()
        .await
        .map_err(|e| SandboxError(format!("tar: {e}")))?;
    if !out.status.success() {
        return fail(format!(
            "tar of {} failed ({}): {}",
            root.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    imported.map_err(|e| engine_error(&format!("docker import of {}", root.display()), e))?;
    Ok(())
}

/// `docker build` of a context holding only `dockerfile`, with `args`, tagged `tag`.
async fn build_image(
    docker: &Docker,
    dockerfile: &str,
    args: &[(&str, &str)],
    tag: &str,
) -> Result<()> {
    let mut context = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(dockerfile.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    context
        .append_data(&mut header, "Dockerfile", dockerfile.as_bytes())
        .and_then(|()| context.finish())
        .map_err(|e| SandboxError(format!("cannot make the build context: {e}")))?;
    let context = context
        .into_inner()
        .map_err(|e| SandboxError(format!("cannot make the build context: {e}")))?;
    let args: HashMap<&str, &str> = args.iter().copied().collect();
    let options = BuildImageOptionsBuilder::default()
        .t(tag)
        .buildargs(&args)
        .rm(true)
        .forcerm(true)
        .build();
    let mut log = String::new();
    let mut steps = docker.build_image(options, None, Some(bollard::body_full(context.into())));
    while let Some(step) = steps
        .try_next()
        .await
        .map_err(|e| engine_error(&format!("docker build of {tag}"), e))?
    {
        if let Some(line) = step.stream {
            log.push_str(&line);
        }
        if let Some(error) = step.error_detail.and_then(|d| d.message) {
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            return fail(format!(
                "docker build of {tag} failed: {error}; the last lines:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ));
        }
    }
    if !image_exists(docker, tag).await {
        return fail(format!("docker build of {tag} ended without the image"));
    }
    Ok(())
}

/// A user-defined bridge network with a /24 of its own, removed when dropped (after
/// the containers on it: drop those first).
#[derive(Debug)]
pub struct DockerNetwork {
    name: String,
    subnet: ipnet::Ipv4Net,
}

impl DockerNetwork {
    /// Makes a network named after this process with the first free /24 in
    /// 10.213.0.0/16.
    pub fn create() -> Result<DockerNetwork> {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let docker = docker()?;
        let name = format!(
            "ovsrs-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let labels = labels();
        let n = name.clone();
        let subnet = block(async move {
            let mut last = String::new();
            for third in 0..=255u8 {
                let subnet =
                    ipnet::Ipv4Net::new(Ipv4Addr::new(10, 213, third, 0), 24).expect("a /24");
                let request = NetworkCreateRequest {
                    name: n.clone(),
                    driver: Some("bridge".into()),
                    labels: Some(labels.clone()),
                    ipam: Some(Ipam {
                        config: Some(vec![IpamConfig {
                            subnet: Some(subnet.to_string()),
                            gateway: Some(subnet.hosts().next().expect("hosts").to_string()),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                match docker.create_network(request).await {
                    Ok(_) => return Ok(subnet),
                    // Another network (another test's) has it: the next one.
                    Err(e) if e.to_string().contains("overlap") => last = e.to_string(),
                    Err(e) => return Err(engine_error(&format!("docker network create {n}"), e)),
                }
            }
            fail(format!("no free /24 in 10.213.0.0/16 for {n}: {last}"))
        })??;
        Ok(DockerNetwork { name, subnet })
    }

    /// The network's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Host number `i` of the subnet (1 is the gateway, the host's side).
    pub fn address(&self, i: u8) -> Ipv4Addr {
        let base = u32::from(self.subnet.network());
        Ipv4Addr::from(base + u32::from(i))
    }
}

impl Drop for DockerNetwork {
    fn drop(&mut self) {
        if let Ok(docker) = docker() {
            let name = self.name.clone();
            let _ = block(async move { docker.remove_network(&name).await });
        }
    }
}

/// A container on one or more [`DockerNetwork`]s, with a fixed address on each,
/// removed (with its anonymous volumes) when dropped.
#[derive(Debug)]
pub struct Container {
    name: String,
    /// Its networks' names and its address on each, and whether it is on it now.
    networks: Vec<(String, Ipv4Addr, std::sync::atomic::AtomicBool)>,
}

/// What a container runs and how.
#[derive(Debug, Default)]
pub struct ContainerSpec<'a> {
    /// The image.
    pub image: &'a str,
    /// The container's name suffix (the name is `<first network>-<name>`).
    pub name: &'a str,
    /// The command (the image's entry point's arguments, or the program).
    pub cmd: Vec<String>,
    /// Linux capabilities to add (`NET_ADMIN` for a chassis).
    pub cap_add: Vec<String>,
}

impl Container {
    /// Creates a container on each of `networks` at the given host number of each (at
    /// least one), and starts it.
    pub fn start(networks: &[(&DockerNetwork, u8)], spec: ContainerSpec<'_>) -> Result<Container> {
        let docker = docker()?;
        let Some((first, _)) = networks.first() else {
            return fail("a container needs a network");
        };
        let name = format!("{}-{}", first.name, spec.name);
        let networks: Vec<(String, Ipv4Addr)> = networks
            .iter()
            .map(|(n, host)| (n.name.clone(), n.address(*host)))
            .collect();
        let config = ContainerCreateBody {
            image: Some(spec.image.to_owned()),
            cmd: Some(spec.cmd),
            hostname: Some(spec.name.to_owned()),
            labels: Some(labels()),
            host_config: Some(HostConfig {
                network_mode: Some(networks[0].0.clone()),
                cap_add: (!spec.cap_add.is_empty()).then_some(spec.cap_add),
                init: Some(true),
                ..Default::default()
            }),
            networking_config: Some(NetworkingConfig {
                endpoints_config: Some(HashMap::from([(
                    networks[0].0.clone(),
                    endpoint(networks[0].1),
                )])),
            }),
            ..Default::default()
        };
        let container = Container {
            name: name.clone(),
            networks: networks
                .iter()
                .map(|(n, ip)| (n.clone(), *ip, true.into()))
                .collect(),
        };
        block(async move {
            let options = CreateContainerOptionsBuilder::default().name(&name).build();
            docker
                .create_container(Some(options), config)
                .await
                .map_err(|e| engine_error(&format!("docker create {name}"), e))?;
            // The engine takes one network at creation; the others before the start.
            for (network, ip) in &networks[1..] {
                let request = NetworkConnectRequest {
                    container: name.clone(),
                    endpoint_config: Some(endpoint(*ip)),
                };
                docker
                    .connect_network(network, request)
                    .await
                    .map_err(|e| {
                        engine_error(&format!("docker network connect {network} {name}"), e)
                    })?;
            }
            docker
                .start_container(&name, None)
                .await
                .map_err(|e| engine_error(&format!("docker start {name}"), e))?;
            Ok::<_, SandboxError>(())
        })??;
        Ok(container)
    }

    /// The container's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The container's address on its first network.
    pub fn ip(&self) -> Ipv4Addr {
        self.networks[0].1
    }

    /// The container's address on `network`, if it was made on it.
    pub fn ip_on(&self, network: &DockerNetwork) -> Option<Ipv4Addr> {
        self.networks
            .iter()
            .find(|(n, _, _)| *n == network.name)
            .map(|(_, ip, _)| *ip)
    }

    /// Runs `cmd` in the container and returns its standard output; an error carries
    /// its exit code and standard error.
    pub fn exec(&self, cmd: &[&str]) -> Result<String> {
        use bollard::exec::{CreateExecOptions, StartExecResults};
        let docker = docker()?;
        let name = self.name.clone();
        let cmd: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
        let shown = cmd.join(" ");
        let (code, stdout, stderr) = block(async move {
            let exec = docker
                .create_exec(
                    &name,
                    CreateExecOptions {
                        cmd: Some(cmd),
                        attach_stdout: Some(true),
                        attach_stderr: Some(true),
                        ..Default::default()
                    },
                )
                .await?;
            let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
            if let StartExecResults::Attached { mut output, .. } =
                docker.start_exec(&exec.id, None).await?
            {
                while let Some(chunk) = output.try_next().await? {
                    match chunk {
                        bollard::container::LogOutput::StdErr { message } => {
                            stderr.extend_from_slice(&message)
                        }
                        other => stdout.extend_from_slice(&other.into_bytes()),
                    }
                }
            }
            let code = docker.inspect_exec(&exec.id).await?.exit_code;
            Ok::<_, bollard::errors::Error>((code, stdout, stderr))
        })?
        .map_err(|e| engine_error(&format!("docker exec {} {shown}", self.name), e))?;
        if code == Some(0) {
            Ok(String::from_utf8_lossy(&stdout).into_owned())
        } else {
            fail(format!(
                "{shown} in {} failed (exit code {code:?}): {}",
                self.name,
                String::from_utf8_lossy(&stderr).trim()
            ))
        }
    }

    /// Cuts the container off `network` (`docker network disconnect`), or off every
    /// network when `None`: nothing reaches it or leaves it there until
    /// [`reconnect`](Self::reconnect).
    pub fn disconnect(&self, network: Option<&DockerNetwork>) -> Result<()> {
        self.set_connected(network, false)
    }

    /// Puts the container back on `network` (every network it was cut off when
    /// `None`), at the same address.
    pub fn reconnect(&self, network: Option<&DockerNetwork>) -> Result<()> {
        self.set_connected(network, true)
    }

    fn set_connected(&self, network: Option<&DockerNetwork>, on: bool) -> Result<()> {
        use std::sync::atomic::Ordering::SeqCst;
        let docker = docker()?;
        for (net, ip, connected) in &self.networks {
            if network.is_some_and(|n| n.name != *net) || connected.load(SeqCst) == on {
                continue;
            }
            let (d, net2, name, ip) = (docker.clone(), net.clone(), self.name.clone(), *ip);
            block(async move {
                if on {
                    let request = NetworkConnectRequest {
                        container: name,
                        endpoint_config: Some(endpoint(ip)),
                    };
                    d.connect_network(&net2, request).await
                } else {
                    let request = NetworkDisconnectRequest {
                        container: name,
                        force: Some(true),
                    };
                    d.disconnect_network(&net2, request).await
                }
            })?
            .map_err(|e| {
                let verb = if on { "connect" } else { "disconnect" };
                engine_error(&format!("docker network {verb} {net} {}", self.name), e)
            })?;
            connected.store(on, SeqCst);
        }
        Ok(())
    }

    /// `docker pause`: every process in the container frozen.
    pub fn pause(&self) -> Result<()> {
        let docker = docker()?;
        let name = self.name.clone();
        block(async move { docker.pause_container(&name).await })?
            .map_err(|e| engine_error(&format!("docker pause {}", self.name), e))
    }

    /// `docker unpause`.
    pub fn unpause(&self) -> Result<()> {
        let docker = docker()?;
        let name = self.name.clone();
        block(async move { docker.unpause_container(&name).await })?
            .map_err(|e| engine_error(&format!("docker unpause {}", self.name), e))
    }

    /// `docker kill`: the container stops at once; its files stay for
    /// [`restart`](Self::restart).
    pub fn kill(&self) -> Result<()> {
        let docker = docker()?;
        let name = self.name.clone();
        block(async move {
            let options = KillContainerOptionsBuilder::default()
                .signal("SIGKILL")
                .build();
            docker.kill_container(&name, Some(options)).await
        })?
        .map_err(|e| engine_error(&format!("docker kill {}", self.name), e))
    }

    /// `docker start` of a stopped container: its command again, with its files.
    pub fn restart(&self) -> Result<()> {
        let docker = docker()?;
        let name = self.name.clone();
        block(async move { docker.start_container(&name, None).await })?
            .map(|_| ())
            .map_err(|e| engine_error(&format!("docker start {}", self.name), e))
    }
}

fn endpoint(ip: Ipv4Addr) -> EndpointSettings {
    EndpointSettings {
        ipam_config: Some(EndpointIpamConfig {
            ipv4_address: Some(ip.to_string()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if let Ok(docker) = docker() {
            let name = self.name.clone();
            let _ =
                block(async move { docker.remove_container(&name, Some(force_remove())).await });
        }
    }
}
