//! The main job, end to end on this machine: a real OVN central and a chassis (from the
//! sandbox), the OKEP-5224 example objects written as manifests, `netconnectd`
//! programming the NB from them, and packets between pods.
//!
//! `cargo run -p netconnect --example demo` (as root; `scripts/demo.sh` installs what it
//! needs and builds `netconnectd` first). Everything it starts is stopped at the end.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ovn_sandbox::{Chassis, Container, ContainerSpec, Pod, Sandbox};

const NAMESPACES: &str = "\
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Namespace, metadata: {name: blue, labels: {kubernetes.io/metadata.name: blue}}}
- {apiVersion: v1, kind: Namespace, metadata: {name: green, labels: {kubernetes.io/metadata.name: green}}}
- {apiVersion: v1, kind: Namespace, metadata: {name: yellow, labels: {kubernetes.io/metadata.name: yellow}}}
- {apiVersion: v1, kind: Namespace, metadata: {name: red, labels: {kubernetes.io/metadata.name: red}}}
";

/// The kind cluster's three nodes on the demo's one chassis, each with the gateway
/// ovnkube-node would annotate (`k8s.ovn.org/l3-gateway-config`, its address on kind's
/// 172.18.0.0/16): OVN-Kubernetes builds a node's gateway router, and its pods' routes
/// out, only from it.
fn nodes() -> String {
    let mut y = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for (name, n) in [
        ("ovn-control-plane", 2),
        ("ovn-worker", 3),
        ("ovn-worker2", 4),
    ] {
        let gw = format!(
            r#"{{"default":{{"mode":"shared","bridge-id":"breth0","mac-address":"02:42:ac:12:00:{n:02x}","ip-addresses":["172.18.0.{n}/16"],"next-hops":["172.18.0.1"],"node-port-enable":"true"}}}}"#
        );
        y.push_str(&format!(
            "- apiVersion: v1\n  kind: Node\n  metadata:\n    name: {name}\n    annotations:\n      \
             k8s.ovn.org/node-chassis-id: demo-chassis\n      k8s.ovn.org/l3-gateway-config: '{gw}'\n"
        ));
    }
    y
}

const NETWORKS: &str = "\
apiVersion: k8s.ovn.org/v1
kind: ClusterUserDefinedNetwork
metadata: {name: blue-network, labels: {connect: colored}}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: blue}}
  network: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 103.103.0.0/16, hostSubnet: 24}]}}
---
apiVersion: k8s.ovn.org/v1
kind: ClusterUserDefinedNetwork
metadata: {name: green-network, labels: {connect: colored}}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: green}}
  network: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 104.104.0.0/16, hostSubnet: 24}]}}
---
apiVersion: k8s.ovn.org/v1
kind: UserDefinedNetwork
metadata: {name: yellow-network, namespace: yellow}
spec: {topology: Layer2, layer2: {role: Primary, subnets: [105.105.0.0/16]}}
---
apiVersion: k8s.ovn.org/v1
kind: UserDefinedNetwork
metadata: {name: red-network, namespace: red}
spec: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 106.106.0.0/16, hostSubnet: 24}]}}
";

const CONNECT: &str = "\
apiVersion: k8s.ovn.org/v1
kind: ClusterNetworkConnect
metadata: {name: colored-enterprise}
spec:
  networkSelectors:
  - networkSelectionType: ClusterUserDefinedNetworks
    clusterUserDefinedNetworkSelector: {networkSelector: {matchLabels: {connect: colored}}}
  - networkSelectionType: PrimaryUserDefinedNetworks
    primaryUserDefinedNetworkSelector: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: yellow}}}
  connectSubnets: [{cidr: 192.168.0.0/16, networkPrefix: 24}]
  connectivity: [PodNetwork, ServiceNetwork]
";

/// ClusterIP service `web` of namespace `ns` on `vip:80`, and the endpoint slice
/// OVN-Kubernetes mirrors for it on network `net`: the pod `endpoint`, port 8080.
fn service(ns: &str, vip: &str, net: &str, endpoint: &str) -> String {
    format!(
        "---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: {ns}}}
spec: {{clusterIP: {vip}, ports: [{{port: 80, targetPort: 8080}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-{ns}
  namespace: {ns}
  labels: {{endpointslice.kubernetes.io/managed-by: endpointslice-mirror-controller.k8s.ovn.org, k8s.ovn.org/service-name: web}}
  annotations: {{k8s.ovn.org/endpointslice-network: {net}}}
addressType: IPv4
ports: [{{port: 8080, protocol: TCP}}]
endpoints: [{{addresses: [{endpoint}], conditions: {{ready: true}}}}]
"
    )
}

/// The netconnectd process, stopped on drop.
/// netconnectd as the demo runs it: a container of the repository's image on the
/// central's Docker network when the sandbox runs in containers, a process otherwise.
/// Stopped when dropped.
enum Netconnectd {
    Container(Container),
    Process(Child),
}

/// The user and group the image runs netconnectd as.
const IMAGE_USER: u32 = 65532;

/// Starts netconnectd on `manifests`, writing into `status`, against `sb`'s
/// Northbound server: built and run by the engine where the sandbox is in containers.
fn start_netconnectd(sb: &Sandbox, manifests: &Path, status: &Path) -> Result<Netconnectd, String> {
    let Some(network) = sb.network() else {
        let bin = netconnectd()?;
        step("netconnectd --nb ... --manifests ... --status-dir ... --listen 127.0.0.1:PORT");
        let port = ovn_sandbox::free_port().map_err(|e| e.to_string())?;
        let child = Command::new(&bin)
            .args(["--nb", &sb.nb.unix_remote(), "--manifests"])
            .arg(manifests)
            .arg("--status-dir")
            .arg(status)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .env("RUST_LOG", "warn")
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        return Ok(Netconnectd::Process(child));
    };
    step("the netconnectd image: the repository's Dockerfile, built by the Docker Engine (minutes the first time; nothing is pulled)");
    let install = sb.nb.installation();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let base = ovn_sandbox::base_image(install).map_err(|e| e.to_string())?;
    let rust = ovn_sandbox::rust_image(install).map_err(|e| e.to_string())?;
    let image = ovn_sandbox::build_from_directory(
        "ovsdb-rs/netconnectd",
        &repo,
        "Dockerfile",
        &[("RUST_IMAGE", &rust), ("BASE", &base)],
    )
    .map_err(|e| e.to_string())?;
    println!("{image}");
    step("netconnectd as a container on the central's network, against the northbound server's address");
    std::fs::create_dir_all(status).map_err(|e| format!("{}: {e}", status.display()))?;
    std::os::unix::fs::chown(status, Some(IMAGE_USER), Some(IMAGE_USER))
        .map_err(|e| format!("cannot give {} to the image's user: {e}", status.display()))?;
    let nb = sb.nb.tcp_remote();
    let container = Container::start(
        &[(network, 30)],
        ContainerSpec {
            image: &image,
            name: "netconnectd",
            env: vec![format!("NETCONNECTD_NB={nb}"), "RUST_LOG=warn".into()],
            binds: vec![
                format!("{}:/etc/netconnect/manifests:ro", manifests.display()),
                format!("{}:/var/lib/netconnect", status.display()),
            ],
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())?;
    println!(
        "$ docker run --network {} --ip {} -e NETCONNECTD_NB={nb} -v MANIFESTS:/etc/netconnect/manifests:ro -v STATUS:/var/lib/netconnect {image}",
        network.name(),
        container.ip()
    );
    Ok(Netconnectd::Container(container))
}

impl Netconnectd {
    /// Stops it (SIGTERM); a container's log goes to standard error, as a process's
    /// does.
    fn stop(&self) -> Result<(), String> {
        match self {
            Netconnectd::Container(c) => {
                let (code, took) = c.stop(Duration::from_secs(10)).map_err(|e| e.to_string())?;
                eprint!("{}", c.logs().unwrap_or_default());
                step("docker stop netconnectd");
                println!("exit code {code} after {:.1} s", took.as_secs_f64());
                Ok(())
            }
            Netconnectd::Process(_) => Ok(()),
        }
    }
}

impl Drop for Netconnectd {
    fn drop(&mut self) {
        if let Netconnectd::Process(child) = self {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }
}

fn step(text: &str) {
    println!("\n== {text}");
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) -> Result<(), String> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if f() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!("timed out waiting for {what}"))
}

fn netconnectd() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let path = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("netconnectd"))
        .ok_or("no target directory")?;
    if path.exists() {
        Ok(path)
    } else {
        Err(format!(
            "{} is missing: build it first (cargo build -p netconnect --bins)",
            path.display()
        ))
    }
}

/// A pod on the chassis with its logical port on `switch`.
fn pod(
    sb: &Sandbox,
    chassis: &mut Chassis,
    switch: &str,
    name: &str,
    ip: &str,
    prefix: u8,
    gateway: &str,
) -> Result<(ovn_sandbox::Pod, IpAddr), String> {
    let addr: IpAddr = ip.parse().map_err(|e| format!("{ip}: {e}"))?;
    let mac = netconnect::ovnk::mac::from_ip(addr);
    let addresses = format!("{mac} {ip}");
    sb.nbctl(&[
        "lsp-add",
        switch,
        name,
        "--",
        "lsp-set-addresses",
        name,
        &addresses,
    ])
    .map_err(|e| e.to_string())?;
    let net = format!("{ip}/{prefix}")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let gw = gateway.parse().map_err(|e| format!("{gateway}: {e}"))?;
    let p = chassis
        .add_pod(name, &mac, &[net], &[gw])
        .map_err(|e| e.to_string())?;
    Ok((p, addr))
}

fn ping(
    chassis: &Chassis,
    from: &ovn_sandbox::Pod,
    name: &str,
    to: IpAddr,
) -> Result<bool, String> {
    let ok = chassis.ping(from, to, 3).map_err(|e| e.to_string())?;
    print_ping(name, to, ok);
    Ok(ok)
}

/// [`ping`] for a path just cut: the chassis has its new flows once `--wait=hv`
/// returns, but its datapath may still hold the flow earlier pings went by until its
/// revalidator runs, so a ping may pass a moment longer. Pinged every 200 ms for up to
/// 5 s: whether the last one was answered.
fn ping_until_silent(
    chassis: &Chassis,
    from: &ovn_sandbox::Pod,
    name: &str,
    to: IpAddr,
) -> Result<bool, String> {
    let asked = Instant::now();
    let ok = loop {
        let ok = chassis.ping(from, to, 1).map_err(|e| e.to_string())?;
        if !ok || asked.elapsed() > Duration::from_secs(5) {
            break ok;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    print_ping(name, to, ok);
    Ok(ok)
}

/// The line a ping prints.
fn print_ping(name: &str, to: IpAddr, answered: bool) {
    println!(
        "$ ping {to} ({name}): {}",
        if answered { "answered" } else { "no answer" }
    );
}

/// A TCP request from `from` to port 80 of ClusterIP `vip`: the reply, if any.
fn request(
    chassis: &Chassis,
    from: &ovn_sandbox::Pod,
    name: &str,
    vip: &str,
) -> Result<Option<String>, String> {
    let to: IpAddr = vip.parse().map_err(|e| format!("{vip}: {e}"))?;
    let reply = chassis
        .tcp_request(from, to, 80, Duration::from_secs(2))
        .map_err(|e| e.to_string())?;
    println!(
        "$ curl {to}:80 ({name}): {}",
        reply.as_deref().unwrap_or("no answer")
    );
    Ok(reply)
}

fn run() -> Result<(), String> {
    step("starting a real OVN central and a chassis");
    let sb = Sandbox::start().map_err(|e| e.to_string())?;
    let mut chassis = Chassis::start(&sb, "demo-chassis").map_err(|e| e.to_string())?;
    let install = sb.nb.installation();
    println!(
        "OVN {} with Open vSwitch {}; northbound at {}",
        install.ovn_version(),
        install.ovs_version(),
        sb.nb.tcp_remote()
    );

    step("the OKEP-5224 example as manifests: blue and green (Layer3), yellow (Layer2), red (Layer3, not connected)");
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let manifests = dir.path().join("manifests");
    let status = dir.path().join("status");
    write_manifests(&manifests)?;
    let daemon = start_netconnectd(&sb, &manifests, &status)?;
    let status_file = status.join("ClusterNetworkConnect/colored-enterprise.yaml");
    wait_until("the connect to be ready", || {
        std::fs::read_to_string(&status_file).is_ok_and(|t| t.contains("OVNSetupSucceeded"))
    })?;
    show_connect(&sb, &status_file)?;

    step("pods: blue on ovn-worker, yellow (Layer2) and red, each of the last two serving its network's ClusterIP service");
    let (blue, yellow_ip, red_ip) = pods(&sb, &mut chassis)?;
    let connected = ping(&chassis, &blue, "yellow, connected", yellow_ip)?;
    let unconnected = ping(&chassis, &blue, "red, not connected", red_ip)?;
    let yellow_web = request(&chassis, &blue, "yellow's service, connected", "10.96.0.50")?;
    let red_web = request(
        &chassis,
        &blue,
        "red's service, not connected",
        "10.96.0.60",
    )?;

    step("the ClusterNetworkConnect deleted");
    std::fs::remove_file(manifests.join("connect.yaml")).map_err(|e| e.to_string())?;
    wait_until("the connect router to go", || {
        sb.nbctl(&["--bare", "--columns=name", "list", "Logical_Router"])
            .is_ok_and(|o| !o.contains("connect_router"))
    })?;
    println!("the connect router and its ports, routes and policies are gone");
    sb.sync_hv().map_err(|e| e.to_string())?;
    let after = ping_until_silent(&chassis, &blue, "yellow, no longer connected", yellow_ip)?;

    daemon.stop()?;

    let services = yellow_web.as_deref() == Some("yellow-web") && red_web.is_none();
    if connected && !unconnected && !after && services {
        println!("\nas expected: blue reached yellow and its service while connected, never red or its service, and not yellow once disconnected");
        Ok(())
    } else {
        Err("the pings did not go as expected".into())
    }
}

/// The OKEP-5224 example's objects and two ClusterIP services, written into
/// `manifests`.
fn write_manifests(manifests: &Path) -> Result<(), String> {
    std::fs::create_dir_all(manifests).map_err(|e| e.to_string())?;
    for (file, text) in [
        ("namespaces.yaml", NAMESPACES),
        ("nodes.yaml", &nodes()),
        ("networks.yaml", NETWORKS),
        ("connect.yaml", CONNECT),
    ] {
        std::fs::write(manifests.join(file), text).map_err(|e| e.to_string())?;
    }
    // A ClusterIP service in yellow and one in red, served by the pods made below.
    let services = service(
        "yellow",
        "10.96.0.50",
        "yellow_yellow-network",
        "105.105.0.10",
    ) + &service("red", "10.96.0.60", "red_red-network", "106.106.2.5");
    std::fs::write(manifests.join("services.yaml"), services).map_err(|e| e.to_string())?;
    print!("{CONNECT}");
    Ok(())
}

/// What netconnectd wrote: the connect's status file and its router.
fn show_connect(sb: &Sandbox, status_file: &Path) -> Result<(), String> {
    step("the ClusterNetworkConnect as netconnectd wrote it back (annotations and status)");
    print!(
        "{}",
        std::fs::read_to_string(status_file).map_err(|e| e.to_string())?
    );
    step("ovn-nbctl show connect_router_colored-enterprise");
    print!(
        "{}",
        sb.nbctl(&["show", "connect_router_colored-enterprise"])
            .map_err(|e| e.to_string())?
    );
    Ok(())
}

/// A blue pod, and a yellow and a red one serving their networks' services; the blue
/// pod and the others' addresses.
fn pods(sb: &Sandbox, chassis: &mut Chassis) -> Result<(Pod, IpAddr, IpAddr), String> {
    let (blue, _) = pod(
        sb,
        chassis,
        "cluster_udn_blue.network_ovn-worker",
        "blue-pod",
        "103.103.1.5",
        24,
        "103.103.1.1",
    )?;
    let (yellow, yellow_ip) = pod(
        sb,
        chassis,
        "yellow_yellow.network_ovn_layer2_switch",
        "yellow-pod",
        "105.105.0.10",
        16,
        "105.105.0.1",
    )?;
    let (red, red_ip) = pod(
        sb,
        chassis,
        "red_red.network_ovn-worker2",
        "red-pod",
        "106.106.2.5",
        24,
        "106.106.2.1",
    )?;
    for (p, reply) in [(&yellow, "yellow-web"), (&red, "red-web")] {
        chassis
            .serve_tcp(p, 8080, reply)
            .map_err(|e| e.to_string())?;
    }
    sb.sync_hv().map_err(|e| e.to_string())?;
    Ok((blue, yellow_ip, red_ip))
}

fn main() {
    if let Err(e) = run() {
        eprintln!("demo: {e}");
        std::process::exit(1);
    }
}
