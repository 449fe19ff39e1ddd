//! The Southbound and Open_vSwitch models through their examples, against a central
//! and a chassis with a pod bound: `sb_chassis` (sb-model) finds the chassis, its
//! tunnel endpoint and the pod's port bound on it; `ovs_interfaces` (ovs-model) reads
//! the chassis' own database: the settings ovn-controller takes and the pod's
//! interface on the integration bridge with its `iface-id`.

use std::process::Command;

use integration_tests::{example, sandbox};

fn run(name: &str, remote: &str) -> String {
    let out = Command::new(example(name)).arg(remote).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name}: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn the_southbound_and_a_chassis_database_read_through_their_models() {
    let sb = sandbox();
    let mut chassis = ovn_sandbox::Chassis::start(&sb, "chassis-1").unwrap();
    sb.nbctl(&["ls-add", "sw0"]).unwrap();
    sb.nbctl(&["lsp-add", "sw0", "pod-a"]).unwrap();
    sb.nbctl(&["lsp-set-addresses", "pod-a", "0a:00:00:00:00:05 10.0.0.5"])
        .unwrap();
    let pod = chassis
        .add_pod(
            "pod-a",
            "0a:00:00:00:00:05",
            &["10.0.0.5/24".parse().unwrap()],
            &[],
        )
        .unwrap();
    sb.sync_hv().unwrap();
    let bound = sb.port_binding("pod-a", "chassis").unwrap();
    assert!(!bound.trim().is_empty() && bound.trim() != "[]", "{bound}");
    let encap_ip = chassis
        .vsctl(&["get", "Open_vSwitch", ".", "external_ids:ovn-encap-ip"])
        .unwrap();
    let encap_ip = encap_ip.trim().trim_matches('"');

    let south = run("sb_chassis", &sb.sb.unix_remote());
    let lines: Vec<&str> = south.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("chassis chassis-1 (")
                && l.ends_with(&format!("geneve {encap_ip}"))),
        "{south}"
    );
    let datapath = sb.datapath_key("sw0").unwrap();
    assert!(
        lines.contains(
            &format!(
                "port pod-a (vif, datapath {}, key 1) on chassis-1",
                datapath.trim()
            )
            .as_str()
        ),
        "{south}"
    );

    let local = run("ovs_interfaces", &chassis.ovsdb_remote());
    let lines: Vec<&str> = local.lines().collect();
    // The sandbox names each chassis' integration bridge (`ovn-bridge`).
    let bridge = chassis
        .vsctl(&["get", "Open_vSwitch", ".", "external_ids:ovn-bridge"])
        .unwrap();
    let bridge = bridge.trim().trim_matches('"');
    for want in [
        "system-id chassis-1".to_owned(),
        format!("ovn-encap-ip {encap_ip}"),
        "ovn-encap-type geneve".to_owned(),
        format!("ovn-bridge {bridge}"),
        format!("bridge {bridge} (netdev)"),
    ] {
        assert!(lines.contains(&want.as_str()), "{want}: {local}");
    }
    assert!(
        lines.iter().any(|l| l
            .starts_with(&format!("  interface {} (system, ofport ", pod.host_veth))
            && l.ends_with(" iface-id pod-a")),
        "{local}"
    );
}
