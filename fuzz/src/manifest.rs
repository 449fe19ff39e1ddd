//! netconnect's manifest loader and world build against any text.
//!
//! Checked: no panic; building the world from the same text twice gives the same keys,
//! problems and desired rows for every key (the build is deterministic).

use std::path::Path;

use netconnect::api::load::parse_file;
use netconnect::status::dir::State;
use netconnect::world::{Settings, World};

/// Everything a build decides, as text.
fn built(text: &str) -> Vec<String> {
    let files = [parse_file(Path::new("m.yaml"), text)];
    let world = World::build(&files, &State::default(), Settings::default());
    let mut out: Vec<String> = world.problems.iter().map(ToString::to_string).collect();
    for key in world.keys() {
        match world.desired(&key) {
            Ok(desired) => {
                out.push(format!("{key:?}"));
                out.extend(desired.rows().map(|r| format!("{r:?}")));
                out.extend(desired.claims().map(|c| format!("{c:?}")));
            }
            Err(e) => out.push(format!("{key:?}: {e}")),
        }
    }
    out
}

/// The check; see the module docs.
pub fn check(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    assert_eq!(
        built(&text),
        built(&text),
        "two builds of the same text differ"
    );
}
