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

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::Ipv4Addr;
use std::sync::{Mutex, OnceLock};

use bollard::models::{
    ContainerCreateBody, DeviceMapping, EndpointIpamConfig, EndpointSettings, HostConfig, Ipam,
    IpamConfig, NetworkConnectRequest, NetworkCreateRequest, NetworkDisconnectRequest,
    NetworkingConfig,
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
/// The Rust toolchain image's Dockerfile.
const RUST_DOCKERFILE: &str = include_str!("../image/rust.Dockerfile");

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
                    .map_err(|e| format!("cannot reach the Docker engine: {e}"))?
                    // An image build (a release cargo build inside) takes minutes.
                    .with_timeout(std::time::Duration::from_secs(3600));
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

/// The containers (all, running or not) and networks carrying `label` (`KEY` or
/// `KEY=VALUE`).
async fn with_label(
    docker: &Docker,
    label: &str,
) -> Result<(
    Vec<bollard::models::ContainerSummary>,
    Vec<bollard::models::Network>,
)> {
    let filter = HashMap::from([("label", vec![label])]);
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
    Ok((containers, networks))
}

/// Removes the containers and networks of processes that no longer run.
async fn reap_orphans(docker: &Docker) {
    let dead = |labels: Option<&HashMap<String, String>>| {
        labels
            .and_then(|l| l.get(LABEL_PID))
            .and_then(|p| p.parse::<u32>().ok())
            .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
    };
    let Ok((containers, networks)) = with_label(docker, LABEL_PID).await else {
        return;
    };
    for c in containers {
        if let (true, Some(id)) = (dead(c.labels.as_ref()), c.id.as_deref()) {
            let _ = docker.remove_container(id, Some(force_remove())).await;
        }
    }
    for n in networks {
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
    let (containers, networks) = block(async move { with_label(&docker, &label).await })??;
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

/// Label of a Dockerfile's build stage (`LABEL org.ovsdb-rs.stage=build`): its image,
/// left dangling by a multi-stage build, is removed after the build.
const LABEL_STAGE: &str = "org.ovsdb-rs.stage";

/// After `tag` was built: removes the other tags of its repository (the builds of
/// older contents, and the layers only they used) and the dangling images of build
/// stages, so that rebuilds do not fill the disk. Failures are ignored: the image is
/// there.
async fn drop_older_builds(docker: &Docker, tag: &str) {
    let repo = tag.split_once(':').map_or(tag, |(r, _)| r);
    let filter = HashMap::from([("reference", vec![repo])]);
    let options = bollard::query_parameters::ListImagesOptionsBuilder::default()
        .filters(&filter)
        .build();
    for image in docker.list_images(Some(options)).await.unwrap_or_default() {
        for old in image.repo_tags.iter().filter(|t| *t != tag) {
            let _ = docker
                .remove_image(
                    old,
                    None::<bollard::query_parameters::RemoveImageOptions>,
                    None,
                )
                .await;
        }
    }
    let label = format!("{LABEL_STAGE}=build");
    let filter = HashMap::from([("dangling", vec!["true"]), ("label", vec![label.as_str()])]);
    let options = bollard::query_parameters::PruneImagesOptionsBuilder::default()
        .filters(&filter)
        .build();
    let _ = docker.prune_images(Some(options)).await;
}

/// Builds an image once per process (`key` names it among the others), reused across
/// processes and runs by its content-addressed tag: `make` says the tag and builds it
/// if the engine lacks it.
fn once(key: &str, make: impl FnOnce() -> Result<String>) -> Result<String> {
    type Slot = std::sync::Arc<Mutex<Option<String>>>;
    static BUILT: Mutex<BTreeMap<String, Slot>> = Mutex::new(BTreeMap::new());
    // The map only long enough to find the image's slot: one image's build may need
    // another's (the Rust image needs the base).
    let slot = BUILT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(key.to_owned())
        .or_default()
        .clone();
    let mut tag = slot.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(tag) = tag.as_ref() {
        return Ok(tag.clone());
    }
    let made = make()?;
    *tag = Some(made.clone());
    Ok(made)
}

/// The base image: `install`'s root filesystem (the debootstrap of Debian sid that
/// `scripts/setup-ovn.sh` makes) imported as `ovsdb-rs/sid-base:<hash of its package
/// list and apt configuration>`, standing in for `debian:sid` where nothing can be pulled. Its tag.
pub fn base_image(install: &Installation) -> Result<String> {
    once("base", || {
        let root = install.root().ok_or_else(|| {
            SandboxError(
                "the images are built from the sandbox's root filesystem: run scripts/setup-ovn.sh"
                    .into(),
            )
        })?;
        let status_file = root.join("var/lib/dpkg/status");
        let status = fs::read(&status_file)
            .map_err(|e| SandboxError(format!("cannot read {}: {e}", status_file.display())))?;
        // Its packages and its apt configuration (scripts/setup-ovn.sh adds to it).
        let mut apt_conf = Vec::new();
        if let Ok(dir) = fs::read_dir(root.join("etc/apt/apt.conf.d")) {
            let mut entries: Vec<PathBuf> = dir.flatten().map(|e| e.path()).collect();
            entries.sort();
            for path in entries {
                apt_conf.extend(path.to_string_lossy().as_bytes());
                apt_conf.extend(fs::read(&path).unwrap_or_default());
            }
        }
        let tag = format!("ovsdb-rs/sid-base:{}", content_hash(&[&status, &apt_conf]));
        let docker = docker()?;
        let (root, t) = (root.to_path_buf(), tag.clone());
        block(async move {
            if !image_exists(&docker, &t).await {
                import_root(&docker, &root, &t).await?;
            }
            Ok::<_, SandboxError>(())
        })??;
        Ok(tag)
    })
}

/// Builds `dockerfile` (its text; the build context holds it and `files`) on the base
/// image as `BASE`, tagged `<repo>:<hash of the text, the files and the base>`.
fn image_on_base(
    install: &Installation,
    repo: &str,
    dockerfile: &'static str,
    files: Vec<(String, Vec<u8>)>,
) -> Result<String> {
    once(repo, || {
        let base = base_image(install)?;
        let mut parts = vec![dockerfile.as_bytes(), base.as_bytes()];
        for (name, bytes) in &files {
            parts.push(name.as_bytes());
            parts.push(bytes);
        }
        let tag = format!("{repo}:{}", content_hash(&parts));
        let docker = docker()?;
        let mut files = files;
        files.push(("Dockerfile".to_owned(), dockerfile.as_bytes().to_vec()));
        let t = tag.clone();
        block(async move {
            if !image_exists(&docker, &t).await {
                let context = tar_of(&files)?;
                build_image(&docker, context, "Dockerfile", &[("BASE", &base)], &t).await?;
            }
            Ok::<_, SandboxError>(())
        })??;
        Ok(tag)
    })
}

/// The OVN image (`ovn-sandbox/image/Dockerfile` on [`base_image`]), built on first
/// use. Its tag.
pub fn ovn_image(install: &Installation) -> Result<String> {
    image_on_base(install, "ovsdb-rs/ovn", DOCKERFILE, Vec::new())
}

/// A Rust toolchain image (`ovn-sandbox/image/rust.Dockerfile`: Debian's cargo and
/// rustc on [`base_image`]), standing in for the `rust` image in a Dockerfile's build
/// stage where nothing can be pulled. Cargo in it trusts the certificate authorities
/// this machine trusts (its `SSL_CERT_FILE`, or Debian's bundle): a machine whose
/// traffic to crates.io goes through a TLS proxy gets the proxy's authority too. Its
/// tag.
pub fn rust_image(install: &Installation) -> Result<String> {
    let bundle = std::env::var_os("SSL_CERT_FILE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/ssl/certs/ca-certificates.crt"));
    let authorities = fs::read(&bundle).map_err(|e| {
        SandboxError(format!(
            "cannot read the certificate authorities {}: {e}",
            bundle.display()
        ))
    })?;
    image_on_base(
        install,
        "ovsdb-rs/rust",
        RUST_DOCKERFILE,
        vec![("host-ca-certificates.crt".into(), authorities)],
    )
}

/// Builds the image of `dockerfile` (a path inside `dir`) with `dir` as the build
/// context (the files git lists there: tracked, and untracked but not ignored), with
/// build arguments `args`, tagged `<repo>:<hash of the context and the arguments>`: a
/// change to any file builds a new image. Its tag.
pub fn build_from_directory(
    repo: &str,
    dir: &Path,
    dockerfile: &str,
    args: &[(&str, &str)],
) -> Result<String> {
    let key = format!("{repo} {} {dockerfile}", dir.display());
    once(&key, || {
        let listed = Command::new("git")
            .args([
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ])
            .current_dir(dir)
            .output()
            .map_err(|e| SandboxError(format!("cannot run git in {}: {e}", dir.display())))?;
        crate::install::check_output("git", &["ls-files"], listed.clone())?;
        let mut files = Vec::new();
        for path in listed.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()) {
            let path = String::from_utf8_lossy(path).into_owned();
            // Listed but deleted in the work tree: not in the context.
            match fs::read(dir.join(&path)) {
                Ok(bytes) => files.push((path, bytes)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return fail(format!("cannot read {path}: {e}")),
            }
        }
        files.sort();
        let mut parts: Vec<&[u8]> = Vec::new();
        for (path, bytes) in &files {
            parts.push(path.as_bytes());
            parts.push(bytes);
        }
        let arg_text: Vec<String> = args.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let arg_text = arg_text.join("\n");
        parts.push(arg_text.as_bytes());
        let tag = format!("{repo}:{}", content_hash(&parts));
        let docker = docker()?;
        let (t, dockerfile) = (tag.clone(), dockerfile.to_owned());
        let args: Vec<(String, String)> = args
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        block(async move {
            if !image_exists(&docker, &t).await {
                // The repository's files as a context only when the engine lacks the image.
                let context = tar_of(&files)?;
                let args: Vec<(&str, &str)> =
                    args.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                build_image(&docker, context, &dockerfile, &args, &t).await?;
            }
            Ok::<_, SandboxError>(())
        })??;
        Ok(tag)
    })
}

/// A tar archive of `files` (path, contents), for a build context.
fn tar_of(files: &[(String, Vec<u8>)]) -> Result<Vec<u8>> {
    let mut archive = tar::Builder::new(Vec::new());
    for (path, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        archive
            .append_data(&mut header, path, bytes.as_slice())
            .map_err(|e| SandboxError(format!("cannot add {path} to a build context: {e}")))?;
    }
    archive
        .into_inner()
        .map_err(|e| SandboxError(format!("cannot make a build context: {e}")))
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

/// `docker build` of `context` (a tar archive) with the Dockerfile at `dockerfile` in
/// it and build arguments `args`, tagged `tag`.
async fn build_image(
    docker: &Docker,
    context: Vec<u8>,
    dockerfile: &str,
    args: &[(&str, &str)],
    tag: &str,
) -> Result<()> {
    let args: HashMap<&str, &str> = args.iter().copied().collect();
    let options = BuildImageOptionsBuilder::default()
        .t(tag)
        .dockerfile(dockerfile)
        .buildargs(&args)
        .rm(true)
        .forcerm(true)
        .build();
    let mut log = String::new();
    let mut steps = docker.build_image(options, None, Some(bollard::body_full(context.into())));
    let failed = |error: String, log: &str| {
        let tail: Vec<&str> = log.lines().rev().take(25).collect();
        fail(format!(
            "docker build of {tag} failed: {error}; the last lines:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ))
    };
    loop {
        match steps.try_next().await {
            Ok(Some(step)) => {
                if let Some(line) = step.stream {
                    log.push_str(&line);
                }
                if let Some(error) = step.error_detail.and_then(|d| d.message) {
                    return failed(error, &log);
                }
            }
            Ok(None) => break,
            Err(e) => return failed(e.to_string(), &log),
        }
    }
    if !image_exists(docker, tag).await {
        return fail(format!("docker build of {tag} ended without the image"));
    }
    drop_older_builds(docker, tag).await;
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
    /// Environment variables, `NAME=value`.
    pub env: Vec<String>,
    /// Host directories mounted in, `HOST:CONTAINER[:ro]`.
    pub binds: Vec<String>,
    /// Host devices given to it, at the same path (`/dev/net/tun`).
    pub devices: Vec<String>,
    /// Namespaced kernel settings, `(name, value)`.
    pub sysctls: Vec<(String, String)>,
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
            cmd: (!spec.cmd.is_empty()).then_some(spec.cmd),
            env: (!spec.env.is_empty()).then_some(spec.env),
            hostname: Some(spec.name.to_owned()),
            labels: Some(labels()),
            host_config: Some(HostConfig {
                network_mode: Some(networks[0].0.clone()),
                cap_add: (!spec.cap_add.is_empty()).then_some(spec.cap_add),
                binds: (!spec.binds.is_empty()).then_some(spec.binds),
                devices: (!spec.devices.is_empty()).then(|| {
                    spec.devices
                        .iter()
                        .map(|d| DeviceMapping {
                            path_on_host: Some(d.clone()),
                            path_in_container: Some(d.clone()),
                            cgroup_permissions: Some("rwm".into()),
                        })
                        .collect()
                }),
                sysctls: (!spec.sysctls.is_empty()).then(|| spec.sysctls.into_iter().collect()),
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

    /// `docker stop`: SIGTERM (the image's stop signal), then SIGKILL after `grace`.
    /// The exit code, and how long the stop took.
    pub fn stop(&self, grace: std::time::Duration) -> Result<(i64, std::time::Duration)> {
        let docker = docker()?;
        let name = self.name.clone();
        let started = std::time::Instant::now();
        block(async move {
            let options = bollard::query_parameters::StopContainerOptionsBuilder::default()
                .t(grace.as_secs().try_into().unwrap_or(i32::MAX))
                .build();
            docker.stop_container(&name, Some(options)).await?;
            let took = started.elapsed();
            let state = docker.inspect_container(&name, None).await?.state;
            let code = state.and_then(|s| s.exit_code).unwrap_or(-1);
            Ok::<_, bollard::errors::Error>((code, took))
        })?
        .map_err(|e| engine_error(&format!("docker stop {}", self.name), e))
    }

    /// What the container's command wrote (`docker logs`), standard output and error
    /// interleaved, for a failing test's message.
    pub fn logs(&self) -> Result<String> {
        let docker = docker()?;
        let name = self.name.clone();
        block(async move {
            let options = bollard::query_parameters::LogsOptionsBuilder::default()
                .stdout(true)
                .stderr(true)
                .build();
            let chunks: Vec<_> = docker.logs(&name, Some(options)).try_collect().await?;
            let text: Vec<u8> = chunks.into_iter().flat_map(|c| c.into_bytes()).collect();
            Ok::<_, bollard::errors::Error>(String::from_utf8_lossy(&text).into_owned())
        })?
        .map_err(|e| engine_error(&format!("docker logs {}", self.name), e))
    }

    /// The host's pid of the container's first process (the engine's init) while the
    /// container runs; `None` when it has stopped.
    pub fn pid(&self) -> Result<Option<u32>> {
        let docker = docker()?;
        let name = self.name.clone();
        let state = block(async move { docker.inspect_container(&name, None).await })?
            .map_err(|e| engine_error(&format!("docker inspect {}", self.name), e))?
            .state
            .unwrap_or_default();
        Ok(match (state.running, state.pid) {
            (Some(true), Some(pid)) if pid > 0 => u32::try_from(pid).ok(),
            _ => None,
        })
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
