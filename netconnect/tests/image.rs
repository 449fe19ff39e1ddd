//! The netconnectd image, built by the machine's Docker Engine from the repository's
//! `Dockerfile` (its build and final stages on images made from Debian's packages:
//! nothing is pulled) and run as a user runs it: against a northbound database in a
//! container, manifests and status directory mounted in, as the image's user, `/readyz`
//! over the container's address, `docker stop` ending it with 0 within its grace period.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use ovn_sandbox::{ContainerCluster, ContainerSpec, Installation};

mod common;
use common::{get, wait_until};

/// The image's user and group.
const USER: u32 = 65532;

/// The image, built once per run of this file's tests (the build is shared: the tag
/// is a hash of the files git lists and the bases).
fn image(install: &Installation) -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let base = ovn_sandbox::base_image(install).unwrap();
    let rust = ovn_sandbox::rust_image(install).unwrap();
    ovn_sandbox::build_from_directory(
        "ovsdb-rs/netconnectd",
        &repo,
        "Dockerfile",
        &[("RUST_IMAGE", &rust), ("BASE", &base)],
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The image run as its README shows: on the NB's network (and `more`), the NB's
/// address in its environment, manifests and status directory mounted in.
fn start(
    image: &str,
    nb: &ContainerCluster,
    more: &[(&ovn_sandbox::DockerNetwork, u8)],
    manifests: &Path,
    status: &Path,
) -> ovn_sandbox::Container {
    let mut networks = vec![(nb.client_network(), 100)];
    networks.extend_from_slice(more);
    let spec = ContainerSpec {
        image,
        name: "netconnectd",
        env: vec![format!("NETCONNECTD_NB={}", nb.tcp_remote(0))],
        binds: vec![
            format!("{}:/etc/netconnect/manifests:ro", manifests.display()),
            format!("{}:/var/lib/netconnect", status.display()),
        ],
        ..Default::default()
    };
    ovn_sandbox::Container::start(&networks, spec).unwrap()
}

/// A status directory the image's user owns.
fn status_dir() -> tempfile::TempDir {
    let status = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(status.path(), Some(USER), Some(USER)).unwrap();
    status
}

#[test]
fn the_image_built_by_the_engine_programs_the_nb_as_its_user_and_stops_cleanly() {
    let install = Installation::recent().unwrap_or_else(|e| panic!("{e}"));
    let image = image(&install);
    let nb = ContainerCluster::start(&install, 1).unwrap();

    // The operator's part: a manifest directory, a status directory the image's user
    // owns, the NB's address.
    let manifests = tempfile::tempdir().unwrap();
    std::fs::write(
        manifests.path().join("net.yaml"),
        "apiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {name: blue}\n\
         spec:\n  namespaceSelector: {}\n  network: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 10.10.0.0/16}]}}\n\
         ---\napiVersion: v1\nkind: Node\nmetadata: {name: n1, annotations: {k8s.ovn.org/node-chassis-id: c1}}\n",
    )
    .unwrap();
    let status = status_dir();
    let daemon = start(&image, &nb, &[], manifests.path(), status.path());

    let addr = format!("{}:9476", daemon.ip());
    wait_until("/readyz over the container's address", 60, || {
        get(&addr, "/readyz").is_some_and(|(c, _)| c == 200)
    });
    assert_eq!(daemon.exec(&["id", "-u"]).unwrap().trim(), USER.to_string());
    let switches = nb.members()[0]
        .exec(&["ovn-nbctl", "--db=tcp:127.0.0.1:6641", "ls-list"])
        .unwrap();
    assert!(
        switches.contains("cluster_udn_blue_n1"),
        "{switches}\n{}",
        daemon.logs().unwrap_or_default()
    );
    // The status directory holds the allocations, written by the image's user.
    let file = status.path().join("ClusterUserDefinedNetwork/blue.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("k8s.ovn.org/network-id: '1'"), "{text}");
    assert_eq!(std::fs::metadata(&file).unwrap().uid(), USER);

    // Stopped as the engine stops it: SIGTERM, exit 0, well within the grace period.
    let grace = Duration::from_secs(10);
    let (code, took) = daemon.stop(grace).unwrap();
    assert_eq!(code, 0, "{}", daemon.logs().unwrap_or_default());
    assert!(took < grace, "stopping took {took:?}");
}

/// A primary Layer3 CUDN `name` on `cidr`, as a manifest.
fn network(name: &str, cidr: &str) -> String {
    format!(
        "apiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {{name: {name}}}\n\
         spec:\n  namespaceSelector: {{}}\n  network: {{topology: Layer3, layer3: {{role: Primary, subnets: [{{cidr: {cidr}}}]}}}}\n"
    )
}

#[test]
fn cut_off_from_its_nb_for_30s_it_is_not_ready_and_converges_once_back() {
    // netconnectd in its container, on the NB's network and on one the test reaches it
    // by; taken off the NB's network for 30 s while a network is added and another
    // deleted in its manifests. Cut off it says 503; back, it converges: the added
    // network's rows written once, the deleted one's gone, no row twice.
    let install = Installation::recent().unwrap_or_else(|e| panic!("{e}"));
    let image = image(&install);
    let nb = ContainerCluster::start(&install, 1).unwrap();
    let reach = ovn_sandbox::DockerNetwork::create().unwrap();
    let manifests = tempfile::tempdir().unwrap();
    let m = |name: &str| manifests.path().join(name);
    std::fs::write(
        m("nodes.yaml"),
        "apiVersion: v1\nkind: List\nitems:\n\
         - {apiVersion: v1, kind: Node, metadata: {name: n1, annotations: {k8s.ovn.org/node-chassis-id: c1}}}\n\
         - {apiVersion: v1, kind: Node, metadata: {name: n2, annotations: {k8s.ovn.org/node-chassis-id: c2}}}\n",
    )
    .unwrap();
    std::fs::write(m("blue.yaml"), network("blue", "10.10.0.0/16")).unwrap();
    std::fs::write(m("green.yaml"), network("green", "10.20.0.0/16")).unwrap();
    let status = status_dir();
    let daemon = start(
        &image,
        &nb,
        &[(&reach, 10)],
        manifests.path(),
        status.path(),
    );
    let addr = format!("{}:9476", daemon.ip_on(&reach).unwrap());
    let ready = || get(&addr, "/readyz").map(|(c, _)| c);
    wait_until("/readyz", 60, || ready() == Some(200));
    let names = |table: &str| names(&nb, table);
    assert!(names("Logical_Switch").contains(&"cluster_udn_green_n1".to_owned()));

    daemon.disconnect(Some(nb.client_network())).unwrap();
    let cut = std::time::Instant::now();
    wait_until("not ready while cut off", 30, || ready() == Some(503));
    std::fs::remove_file(m("green.yaml")).unwrap();
    std::fs::write(m("red.yaml"), network("red", "10.30.0.0/16")).unwrap();
    std::thread::sleep(Duration::from_secs(30).saturating_sub(cut.elapsed()));
    assert_eq!(ready(), Some(503), "{}", daemon.logs().unwrap_or_default());
    let switches = names("Logical_Switch");
    assert!(
        switches.contains(&"cluster_udn_green_n1".to_owned()),
        "{switches:?}"
    );
    assert!(!switches.iter().any(|s| s.contains("red")), "{switches:?}");

    daemon.reconnect(Some(nb.client_network())).unwrap();
    let mut good = 0;
    wait_until("converged once back", 90, || {
        let status: serde_json::Value = get(&addr, "/status")
            .and_then(|(_, b)| serde_json::from_str(&b).ok())
            .unwrap_or_default();
        let converged = status["ready"] == true
            && status["keys"]
                .as_array()
                .is_some_and(|k| k.iter().all(|k| k["ok"] == true))
            && names("Logical_Switch").contains(&"cluster_udn_red_n2".to_owned());
        good = if converged { good + 1 } else { 0 };
        good >= 3
    });
    after_the_cut(&nb, &addr);
}

/// The names of the rows of `table` in the NB of `nb`.
fn names(nb: &ContainerCluster, table: &str) -> Vec<String> {
    let db = "--db=tcp:127.0.0.1:6641";
    let args = ["ovn-nbctl", db, "--bare", "--columns=name", "list", table];
    let out = nb.members()[0].exec(&args).unwrap();
    out.split_whitespace().map(str::to_owned).collect()
}

/// What the NB of `nb` and the daemon serving `addr` hold once converged after the
/// cut: no row twice, the deleted network's rows gone, the added one's written once.
fn after_the_cut(nb: &ContainerCluster, addr: &str) {
    let names = |table: &str| names(nb, table);
    for table in [
        "Logical_Switch",
        "Logical_Router",
        "Logical_Switch_Port",
        "Logical_Router_Port",
    ] {
        let all = names(table);
        let unique: std::collections::BTreeSet<&String> = all.iter().collect();
        assert_eq!(
            unique.len(),
            all.len(),
            "{table} holds a row twice: {all:?}"
        );
        assert!(!all.iter().any(|n| n.contains("green")), "{table}: {all:?}");
    }
    let switches = names("Logical_Switch");
    for want in [
        "cluster_udn_blue_n1",
        "cluster_udn_red_n1",
        "cluster_udn_red_n2",
    ] {
        assert!(switches.contains(&want.to_owned()), "{want}: {switches:?}");
    }
    let status: serde_json::Value = serde_json::from_str(&get(addr, "/status").unwrap().1).unwrap();
    let red = status["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["key"] == "network cluster_udn_red")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        red["transactions"], 1,
        "red written more than once: {status}"
    );
}
