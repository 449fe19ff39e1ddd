//! Every seed of `corpus/` and every input fuzzing found (`regressions/`) through its
//! target's check, on the stable toolchain: what the fuzzers start from must pass, and
//! what they found must stay fixed.

use std::path::Path;

fn each_input(target: &str, check: fn(&[u8])) {
    let mut seen = 0;
    for dir in ["corpus", "regressions"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir).join(target);
        // A target nothing was found for has no regressions directory (git keeps no
        // empty one); every target has seeds.
        if dir == "regressions" && !path.exists() {
            continue;
        }
        let mut files: Vec<_> = std::fs::read_dir(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for file in files {
            let data = std::fs::read(&file).unwrap();
            let run = std::panic::catch_unwind(|| check(&data));
            assert!(run.is_ok(), "{} fails its check", file.display());
            seen += 1;
        }
    }
    assert!(seen >= 2, "{target}: only {seen} inputs");
}

#[test]
fn the_codec_seeds_and_regressions_pass() {
    each_input("codec", ovsdb_fuzz::codec::check);
}

#[test]
fn the_schema_seeds_and_regressions_pass() {
    each_input("schema", ovsdb_fuzz::schema::check);
}

#[test]
fn the_datum_seeds_and_regressions_pass() {
    each_input("datum", ovsdb_fuzz::datum::check);
}

#[test]
fn the_monitor_reply_seeds_and_regressions_pass() {
    each_input("monitor_reply", ovsdb_fuzz::monitor_reply::check);
}

#[test]
fn the_manifest_seeds_and_regressions_pass() {
    each_input("manifest", ovsdb_fuzz::manifest::check);
}

#[test]
fn the_kubectl_dumps_pass_the_manifest_check() {
    // The dumps of real clusters netconnect's own tests read (`kubectl get -o yaml`, in
    // netconnect/tests/data/kubectl): seeds for the manifest target too.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../netconnect/tests/data/kubectl");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let file = entry.unwrap().path();
        let data = std::fs::read(&file).unwrap();
        let run = std::panic::catch_unwind(|| ovsdb_fuzz::manifest::check(&data));
        assert!(run.is_ok(), "{} fails its check", file.display());
        seen += 1;
    }
    assert!(seen >= 1, "no dump in {}", dir.display());
}

#[test]
fn the_client_seeds_and_regressions_pass() {
    each_input("client", ovsdb_fuzz::client::check);
}

#[test]
fn a_real_that_did_not_survive_its_round_trip_does_in_every_real_column() {
    // Found by the datum target: serde_json without exact float parsing read its own
    // shortest form of this number back 1 ulp off.
    let columns = ovsdb_fuzz::datum::columns();
    let mut reals = 0;
    for (i, (name, _)) in columns.iter().enumerate() {
        if !name.starts_with("Fuzz.") {
            continue;
        }
        let value: &[u8] = if name == "Fuzz.weights" {
            br#"["map",[["w",-9.733022326854775e18]]]"#
        } else {
            b"-9.733022326854775e18"
        };
        // The check returns early on a value its column refuses: these must be taken.
        let datum: ovsdb_proto::Datum = serde_json::from_slice(value).unwrap();
        assert_eq!(columns[i].1.check(&datum), Ok(()), "{name}");
        let mut input = (i as u16).to_le_bytes().to_vec();
        input.extend_from_slice(value);
        ovsdb_fuzz::datum::check(&input);
        reals += 1;
    }
    assert_eq!(reals, 3);
}
