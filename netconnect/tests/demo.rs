//! The README's main job (`scripts/demo.sh` runs the `demo` example): its output shows
//! the connect's status, the connect router, and the pings and service requests as
//! they should go; with central, chassis and netconnectd in containers.

use std::process::Command;

#[test]
fn the_demo_connects_blue_to_yellow_and_its_service_never_to_red_and_disconnects() {
    // Built by `cargo test` beside this test's binary, with netconnectd.
    let exe = std::env::current_exe().unwrap();
    let demo = exe
        .parent()
        .and_then(|d| d.parent())
        .unwrap()
        .join("examples/demo");
    assert!(demo.exists(), "{} is missing", demo.display());
    let _ = env!("CARGO_BIN_EXE_netconnectd");
    let out = Command::new(&demo).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for want in [
        "reason: ValidationSucceeded",
        "reason: OVNSetupSucceeded",
        "port crtor-colored-enterprise_yellow_yellow-network",
        "$ ping 105.105.0.10 (yellow, connected): answered",
        "$ ping 106.106.2.5 (red, not connected): no answer",
        "$ curl 10.96.0.50:80 (yellow's service, connected): yellow-web",
        "$ curl 10.96.0.60:80 (red's service, not connected): no answer",
        "$ ping 105.105.0.10 (yellow, no longer connected): no answer",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
    // Where the engine answers (the suite's machines), central, chassis and netconnectd
    // run as containers, netconnectd built from the repository's Dockerfile and
    // stopped as the engine stops it.
    if std::env::var(ovn_sandbox::BACKEND_VAR).as_deref() != Ok("processes") {
        for want in [
            "$ docker run --network ovsrs-",
            "NETCONNECTD_NB=tcp:10.213.",
            "== docker stop netconnectd\nexit code 0 after ",
        ] {
            assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
        }
    }
    // netconnectd logs at `warn` in the demo: a clean start reconciles keys in the order
    // they depend on each other, so nothing fails on the way (it printed five
    // "reconcile failed ... does not exist (yet)" warnings when connects could run
    // before their networks' routers existed).
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("WARN")).collect();
    assert!(
        warnings.is_empty(),
        "warnings on a clean start:\n{}",
        warnings.join("\n")
    );
}
