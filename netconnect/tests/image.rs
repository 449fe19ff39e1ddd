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

#[test]
fn the_image_built_by_the_engine_programs_the_nb_as_its_user_and_stops_cleanly() {
    let install = Installation::recent().unwrap_or_else(|e| panic!("{e}"));
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let base = ovn_sandbox::base_image(&install).unwrap();
    let rust = ovn_sandbox::rust_image(&install).unwrap();
    let image = ovn_sandbox::build_from_directory(
        "ovsdb-rs/netconnectd",
        &repo,
        "Dockerfile",
        &[("RUST_IMAGE", &rust), ("BASE", &base)],
    )
    .unwrap_or_else(|e| panic!("{e}"));
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
    let status = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(status.path(), Some(USER), Some(USER)).unwrap();
    let daemon = ovn_sandbox::Container::start(
        &[(nb.client_network(), 100)],
        ContainerSpec {
            image: &image,
            name: "netconnectd",
            env: vec![format!("NETCONNECTD_NB={}", nb.tcp_remote(0))],
            binds: vec![
                format!(
                    "{}:/etc/netconnect/manifests:ro",
                    manifests.path().display()
                ),
                format!("{}:/var/lib/netconnect", status.path().display()),
            ],
            ..Default::default()
        },
    )
    .unwrap();

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
