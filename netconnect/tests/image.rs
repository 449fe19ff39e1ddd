//! The container image's contents, without a container engine (this machine has none):
//! `scripts/image-rootfs.py` builds the root filesystem of the Dockerfile's final stage
//! (Debian minbase of its suite, its RUN steps, this build's netconnectd), and the test
//! runs it as an engine would, chrooted, as the image's user, in its working
//! directory, with only the image's environment and an NB address, against a real NB.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ovn_sandbox::Sandbox;

mod common;
use common::{get, wait_until, Killed};

fn build_root(dir: &Path) -> (PathBuf, serde_json::Value) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/image-rootfs.py");
    let root = dir.join("root");
    let out = Command::new("python3")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_netconnectd"))
        .arg(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config = std::fs::read_to_string(dir.join("root.json")).unwrap();
    (root, serde_json::from_str(&config).unwrap())
}

#[test]
fn the_image_runs_as_its_user_from_its_environment_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (root, config) = build_root(dir.path());
    let sb = Sandbox::start().unwrap();

    // What the image says.
    assert_eq!(
        config["entrypoint"],
        serde_json::json!(["/usr/bin/netconnectd"])
    );
    assert_eq!(config["user"], "65532:65532");
    assert_eq!(config["expose"], serde_json::json!(["9476"]));
    let env = config["env"].as_object().unwrap();
    let manifests = env["NETCONNECTD_MANIFESTS"].as_str().unwrap();
    let status = env["NETCONNECTD_STATUS_DIR"].as_str().unwrap();
    assert_eq!(env["NETCONNECTD_LISTEN"], "0.0.0.0:9476");
    assert!(config["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v == status));

    // The operator's part: manifests mounted in, the NB's address.
    let m = root.join(manifests.trim_start_matches('/'));
    std::fs::write(
        m.join("net.yaml"),
        "apiVersion: k8s.ovn.org/v1\nkind: ClusterUserDefinedNetwork\nmetadata: {name: blue}\n\
         spec:\n  namespaceSelector: {}\n  network: {topology: Layer3, layer3: {role: Primary, subnets: [{cidr: 10.10.0.0/16}]}}\n\
         ---\napiVersion: v1\nkind: Node\nmetadata: {name: n1, annotations: {k8s.ovn.org/node-chassis-id: c1}}\n",
    )
    .unwrap();
    let mut cmd = Command::new("chroot");
    cmd.arg(format!("--userspec={}", config["user"].as_str().unwrap()))
        .arg(&root)
        .args(["/usr/bin/env", "-i"])
        .arg(format!("--chdir={}", config["workdir"].as_str().unwrap()))
        .arg("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    for (k, v) in env {
        cmd.arg(format!("{k}={}", v.as_str().unwrap()));
    }
    cmd.arg(format!("NETCONNECTD_NB={}", sb.nb.tcp_remote()));
    for a in config["entrypoint"].as_array().unwrap() {
        cmd.arg(a.as_str().unwrap());
    }
    let mut d = Killed(
        cmd.stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );

    let addr = "127.0.0.1:9476";
    wait_until("/readyz", 30, || {
        get(addr, "/readyz").is_some_and(|(c, _)| c == 200)
    });
    assert!(sb
        .nbctl(&["ls-list"])
        .unwrap()
        .contains("cluster_udn_blue_n1"));
    // The status directory, a volume owned by the image's user, holds the allocations.
    let file = root
        .join(status.trim_start_matches('/'))
        .join("ClusterUserDefinedNetwork/blue.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("k8s.ovn.org/network-id: '1'"), "{text}");
    {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&file).unwrap().uid(), 65532);
    }

    // Stopped as an engine stops a container: SIGTERM, exit 0.
    let code = d.terminate(10);
    let mut err = String::new();
    use std::io::Read;
    let _ = d.0.stderr.take().unwrap().read_to_string(&mut err);
    assert!(code.success(), "{code:?}: {err}");
}
