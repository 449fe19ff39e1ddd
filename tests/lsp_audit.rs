//! The `lsp_audit` example (nb-model/examples): the shape of an OVN tool (a cache with
//! a typed, indexed table and a typed event stream, a typed transaction, cleanup) run
//! against a real NB while `ovn-nbctl` adds and deletes a port under it.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use integration_tests::sandbox;

/// The example binary, built by `cargo test --workspace` (which builds examples).
fn example() -> PathBuf {
    integration_tests::example("lsp_audit")
}

#[test]
fn lsp_audit_writes_lists_watches_and_cleans_up() {
    let sb = sandbox();
    let mut child = Command::new(example())
        .args([&sb.nb.unix_remote(), "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    // Killed if the test fails before it exits.
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let stdout = child.stdout.take().unwrap();
    let mut child = Kill(child);
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let next = || {
        lines
            .recv_timeout(Duration::from_secs(15))
            .expect("lsp_audit said nothing more")
    };
    let mut seen = Vec::new();
    loop {
        let line = next();
        seen.push(line.clone());
        if line.starts_with("watching") {
            break;
        }
    }
    assert!(seen[0].starts_with("made audit-sw "), "{seen:?}");
    assert!(
        seen.contains(&"owned: audit-sw with 3 ports".to_string()),
        "{seen:?}"
    );

    // Someone else's port on the tool's switch, then gone: both seen as typed events.
    sb.nbctl(&["lsp-add", "audit-sw", "from-nbctl"]).unwrap();
    sb.nbctl(&["lsp-del", "from-nbctl"]).unwrap();
    loop {
        let line = next();
        seen.push(line.clone());
        if line.starts_with("deleted") {
            break;
        }
    }
    for want in [
        "+ audit-p1",
        "+ audit-p2",
        "+ audit-p3",
        "+ from-nbctl",
        "- from-nbctl",
    ] {
        assert!(seen.iter().any(|l| l == want), "{want}: {seen:?}");
    }
    assert_eq!(seen.last().unwrap(), "deleted 1 switch; 0 owned");
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{status}");
    // Nothing left behind in the NB.
    let left = sb
        .nbctl(&["--bare", "--columns=name", "list", "Logical_Switch_Port"])
        .unwrap();
    assert_eq!(left.trim(), "", "ports left: {left}");
    assert_eq!(sb.nbctl(&["ls-list"]).unwrap().trim(), "");
}

/// `ovn-sandbox`, built beside the example.
fn sandbox_command() -> PathBuf {
    let path = example()
        .parent()
        .and_then(|d| d.parent())
        .unwrap()
        .join("ovn-sandbox");
    assert!(
        path.exists(),
        "{} is missing: run the suite with scripts/test.sh, which builds every binary",
        path.display()
    );
    path
}

#[test]
fn lsp_audit_runs_against_a_three_member_cluster_with_a_member_killed_mid_watch() {
    // `ovn-sandbox --cluster 3` gives the members' remotes and pids; the member that
    // created the cluster is killed while the tool watches, and the tool's last write
    // (the cleanup) goes through whichever member leads then.
    let script = format!(
        "{} \"$OVN_NB_DB\" 3 & tool=$!; sleep 1.5; kill ${{OVN_NB_PIDS%% *}}; \
         wait $tool; s=$?; echo \"pids $OVN_NB_PIDS\"; echo \"tcp $OVN_NB_TCP\"; exit $s",
        example().display()
    );
    let out = Command::new(sandbox_command())
        .args(["--cluster", "3", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("owned: audit-sw with 3 ports"), "{stdout}");
    assert!(stdout.contains("deleted 1 switch; 0 owned"), "{stdout}");
    let line = |p: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(p))
            .unwrap_or_else(|| panic!("no {p}: {stdout}"))
            .to_owned()
    };
    let pids: Vec<u32> = line("pids ")
        .split(' ')
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 3);
    assert_eq!(line("tcp ").split(',').count(), 3);
    // Every member is stopped once the command is done.
    for pid in pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "member {pid} is still running"
        );
    }
}
