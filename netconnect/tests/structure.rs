//! The structure rules the crate keeps, checked on its source: imports only go down (no
//! cycle among netconnect's modules, a module and its parent or child aside), no file
//! of `src/` holds more than 800 lines of code outside its tests, and the workspace's
//! README stays a front door (150 lines at most), every crate meant for crates.io carries
//! its registry metadata and is packaged by the suite, and no function of the workspace's
//! libraries and programs is over 100 lines as it stands (clippy's `too_many_lines`,
//! on for the workspace, counts code lines only).
//!
//! A module depends on another when its code (not its comments, not its tests) names
//! a path into it: `crate::a::b`, `super::…`, `self::…`, in `use` items or anywhere
//! else. At every level of the module tree, the modules under one parent are the
//! nodes, and a dependency between anything under two of them is an edge between
//! those two: the edges must form no cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module: its path from the crate root (`["topology", "services", "node"]`).
type ModPath = Vec<String>;

/// The crate's source files, each with its module path.
fn modules(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap();
            let mut parts: ModPath = rel
                .with_extension("")
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            if parts.first().is_some_and(|p| p == "bin") {
                continue;
            }
            if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
                parts.pop();
            }
            // A test module of its own file (`foo/tests.rs`) is test code.
            if parts.last().is_some_and(|p| p == "tests") {
                continue;
            }
            out.insert(parts, path);
        }
    }
    out
}

/// The code of `text`: without comments, and without the tests at its end (from a
/// `#[cfg(test)]` item on).
fn code(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_block = false;
    for (n, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            break;
        }
        if in_block {
            if let Some(end) = line.find("*/") {
                in_block = false;
                out.push((n + 1, line[end + 2..].to_owned()));
            }
            continue;
        }
        if t.starts_with("/*") {
            in_block = !t.contains("*/");
            continue;
        }
        if t.starts_with("//") {
            continue;
        }
        out.push((n + 1, line.to_owned()));
    }
    out
}

/// The module paths a piece of code names, made absolute from module `at`: every
/// `crate::`, `super::` and `self::` path, with `use` groups (`{a, b::c}`) expanded.
fn paths_named(at: &ModPath, code: &str) -> Vec<ModPath> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < bytes.len() {
        // A path starts at `crate`, `super` or `self`, not inside another word.
        let start = ["crate::", "super::", "self::"]
            .iter()
            .find(|p| bytes[i..].starts_with(p.as_bytes()))
            .filter(|_| i == 0 || !ident(bytes[i - 1]) && bytes[i - 1] != b':');
        let Some(_) = start else {
            i += 1;
            continue;
        };
        let (prefix, rest_at) = read_path(code, i);
        i = rest_at;
        let base = absolute(at, &prefix);
        let Some(base) = base else { continue };
        // A group after `::{`.
        if code[i..].starts_with("::{") || code[i..].starts_with('{') {
            let open = i + code[i..].find('{').unwrap();
            let (group, end) = group(code, open);
            i = end;
            for member in split_group(&group) {
                let (p, _) = read_path(&member, 0);
                let mut full = base.clone();
                full.extend(p.into_iter().filter(|s| s != "self"));
                out.push(full);
            }
        } else {
            out.push(base);
        }
    }
    out
}

/// The segments of the path starting at `i` (`a::b::c`), and where it ends.
fn read_path(code: &str, mut i: usize) -> (Vec<String>, usize) {
    let bytes = code.as_bytes();
    let mut segments = Vec::new();
    loop {
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        if i == start {
            break;
        }
        segments.push(code[start..i].to_owned());
        if code[i..].starts_with("::") && !code[i + 2..].starts_with('{') {
            i += 2;
        } else {
            break;
        }
    }
    (segments, i)
}

/// The text of the braces opened at `open`, and where they close.
fn group(code: &str, open: usize) -> (String, usize) {
    let mut depth = 0;
    for (j, c) in code[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return (code[open + 1..open + j].to_owned(), open + j + 1);
                }
            }
            _ => {}
        }
    }
    (code[open + 1..].to_owned(), code.len())
}

/// A group's members, split at its top-level commas; a nested group is expanded.
fn split_group(members: &str) -> Vec<String> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
    for (j, c) in members.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(members[start..j].trim().to_owned());
                start = j + 1;
            }
            _ => {}
        }
    }
    out.push(members[start..].trim().to_owned());
    let mut expanded = Vec::new();
    for m in out.into_iter().filter(|m| !m.is_empty()) {
        match m.find("::{") {
            Some(at) => {
                let (inner, _) = group(&m, at + 2);
                for sub in split_group(&inner) {
                    expanded.push(format!("{}::{sub}", &m[..at]));
                }
            }
            None => expanded.push(m),
        }
    }
    expanded
}

/// `path` (starting with `crate`, `super` or `self`) from module `at`, absolute.
fn absolute(at: &ModPath, path: &[String]) -> Option<ModPath> {
    let mut base: ModPath = at.clone();
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &path[1..];
        }
        Some("self") => rest = &path[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The deepest module `path` names (a module, then items in it).
fn resolve(modules: &BTreeMap<ModPath, PathBuf>, path: &ModPath) -> ModPath {
    let mut best = Vec::new();
    for n in 1..=path.len() {
        if modules.contains_key(&path[..n]) {
            best = path[..n].to_vec();
        }
    }
    best
}

/// Where a dependency was seen: file and line.
type Seen = (PathBuf, usize);

/// Every dependency between two modules neither of which holds the other, by the
/// modules under their closest common parent: (parent, from, to) → where seen.
fn edges(src: &Path) -> BTreeMap<(ModPath, String, String), Seen> {
    let modules = modules(src);
    let mut out = BTreeMap::new();
    for (at, file) in &modules {
        let text = std::fs::read_to_string(file).unwrap();
        for (line, code) in code(&text) {
            for named in paths_named(at, &code) {
                let to = resolve(&modules, &named);
                let common = at.iter().zip(&to).take_while(|(a, b)| a == b).count();
                // The same module, or one holding the other.
                if common == at.len() || common == to.len() {
                    continue;
                }
                let key = (
                    at[..common].to_vec(),
                    at[common].clone(),
                    to[common].clone(),
                );
                out.entry(key).or_insert_with(|| (file.clone(), line));
            }
        }
    }
    out
}

/// The cycles of a directed graph: its strongly connected components of more than
/// one node (Tarjan's algorithm).
fn cycles(nodes: &BTreeSet<String>, next: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        next: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        stack: Vec<String>,
        on: BTreeSet<String>,
        out: Vec<Vec<String>>,
    }
    impl Walk<'_> {
        fn visit(&mut self, v: &str) {
            let n = self.index.len();
            self.index.insert(v.to_owned(), n);
            self.low.insert(v.to_owned(), n);
            self.stack.push(v.to_owned());
            self.on.insert(v.to_owned());
            let next = self.next.get(v).cloned().unwrap_or_default();
            for w in &next {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v.to_owned(), low);
                } else if self.on.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v.to_owned(), low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(&w);
                    let done = w == v;
                    component.push(w);
                    if done {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.out.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        next,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in nodes {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.out
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn imports_only_go_down_no_cycle_among_the_modules() {
    let edges = edges(&src());
    assert!(edges.len() > 50, "only {} dependencies found", edges.len());
    let mut levels: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (parent, from, to) in edges.keys() {
        levels
            .entry(parent.clone())
            .or_default()
            .entry(from.clone())
            .or_default()
            .insert(to.clone());
    }
    let mut found = Vec::new();
    for (parent, next) in &levels {
        let nodes: BTreeSet<String> = next
            .iter()
            .flat_map(|(f, t)| std::iter::once(f.clone()).chain(t.iter().cloned()))
            .collect();
        for cycle in cycles(&nodes, next) {
            let members: BTreeSet<&String> = cycle.iter().collect();
            let seen: Vec<String> = edges
                .iter()
                .filter(|((p, f, t), _)| p == parent && members.contains(f) && members.contains(t))
                .map(|((_, f, t), (file, line))| {
                    let file = file.strip_prefix(src()).unwrap_or(file).display();
                    format!("    {f} -> {t} ({file}:{line})")
                })
                .collect();
            found.push(format!(
                "under crate::{}: {}\n{}",
                parent.join("::"),
                cycle.join(", "),
                seen.join("\n")
            ));
        }
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn the_cycle_check_finds_a_cycle_and_reads_groups_and_relative_paths() {
    // The checker itself: a made-up crate with one cycle under `a` and one at the root.
    let dir = tempfile::tempdir().unwrap();
    let files = [
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a/mod.rs", "pub mod x;\npub mod y;\nuse crate::b::Thing;\n"),
        ("a/x.rs", "use super::y::{One, deep::Two};\n"),
        (
            "a/y.rs",
            "// use super::x::Nothing;\npub fn f() { super::x::g() }\n",
        ),
        (
            "b.rs",
            "use crate::{a::x::G, a::y};\n#[cfg(test)]\nmod tests { use crate::nothing; }\n",
        ),
    ];
    for (file, text) in files {
        let path = dir.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let found: BTreeSet<(String, String, String)> = edges(dir.path())
        .into_keys()
        .map(|(p, f, t)| (p.join("::"), f, t))
        .collect();
    let want = [
        ("", "a", "b"),
        ("", "b", "a"),
        ("a", "x", "y"),
        ("a", "y", "x"),
    ];
    let want: BTreeSet<(String, String, String)> = want
        .iter()
        .map(|(p, f, t)| ((*p).to_owned(), (*f).to_owned(), (*t).to_owned()))
        .collect();
    assert_eq!(found, want);
}

#[test]
fn no_file_of_src_holds_more_than_800_lines_of_code() {
    let mut over = Vec::new();
    for file in modules(&src()).into_values() {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines = code(&text)
            .iter()
            .filter(|(_, l)| !l.trim().is_empty())
            .count();
        if lines > 800 {
            over.push(format!("{}: {lines}", file.display()));
        }
    }
    assert!(over.is_empty(), "files over 800 lines of code: {over:#?}");
}

#[test]
fn the_readme_stays_a_front_door() {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let lines = std::fs::read_to_string(readme).unwrap().lines().count();
    assert!(lines <= 150, "README.md has {lines} lines; 150 at most");
}

/// Every crate of the workspace meant for crates.io (not `publish = false`) says what it
/// is as a registry shows it: a description, the license (which the workspace's
/// `LICENSE` file is), a README that exists, keywords, categories and where its docs
/// are; and `scripts/test.sh` packages it, so that it builds from its packaged sources.
/// (`repository` stays unset until the project has a public home to point at.)
#[test]
fn every_crate_meant_for_crates_io_carries_its_metadata_and_is_packaged() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let license = std::fs::read_to_string(root.join("LICENSE")).unwrap();
    let test_sh = std::fs::read_to_string(root.join("scripts/test.sh")).unwrap();
    let packaged = packaged_crates(&test_sh);
    let mut wrong = Vec::new();
    let mut published = 0;
    for p in meta["packages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        if p["publish"].as_array().is_some_and(|r| r.is_empty()) {
            continue;
        }
        published += 1;
        let dir = Path::new(p["manifest_path"].as_str().unwrap())
            .parent()
            .unwrap();
        for field in ["description", "license", "readme", "documentation"] {
            if p[field].as_str().is_none_or(|v| v.trim().is_empty()) {
                wrong.push(format!("{name}: no {field}"));
            }
        }
        for field in ["keywords", "categories"] {
            if p[field].as_array().is_none_or(|v| v.is_empty()) {
                wrong.push(format!("{name}: no {field}"));
            }
        }
        if let Some(readme) = p["readme"].as_str() {
            if !dir.join(readme).is_file() {
                wrong.push(format!("{name}: its readme {readme} is not a file"));
            }
        }
        // The one license the workspace declares; another would need its own text here.
        let is_apache = license.contains("Apache License") && license.contains("Version 2.0");
        match p["license"].as_str() {
            Some("Apache-2.0") if is_apache => {}
            declared => wrong.push(format!(
                "{name}: declares {declared:?}, which is not what LICENSE holds (Apache-2.0: {is_apache})"
            )),
        }
        if !packaged.contains(name) {
            wrong.push(format!("{name}: not in scripts/test.sh's cargo package"));
        }
    }
    assert!(
        published >= 6,
        "only {published} crates meant for crates.io found"
    );
    assert!(wrong.is_empty(), "crates.io metadata: {wrong:#?}");
}

/// The crates `script`'s `cargo package` command names (`-p NAME`, over continued lines).
fn packaged_crates(script: &str) -> BTreeSet<&str> {
    let mut words = Vec::new();
    let lines = script
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("cargo package"));
    for line in lines {
        let line = line.trim();
        words.extend(line.trim_end_matches('\\').split_whitespace());
        if !line.ends_with('\\') {
            break;
        }
    }
    words
        .windows(2)
        .filter(|w| w[0] == "-p")
        .map(|w| w[1])
        .collect()
}

/// The functions of `text` (rustfmt's layout: an item's closing brace at its own
/// indent), each with its first line (1-based) and its length in lines, comments and
/// blank lines included; the tests at its end (from a `#[cfg(test)]` item on) left out.
fn function_lengths(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let line = lines[at];
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let head = [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "const ",
            "async ",
            "unsafe ",
        ]
        .iter()
        .fold(trimmed, |t, p| t.strip_prefix(p).unwrap_or(t));
        let one_line = trimmed.ends_with('}') || trimmed.ends_with(';');
        if let Some(rest) = head.strip_prefix("fn ").filter(|_| !one_line) {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let close = format!("{indent}}}");
            let end = (at..lines.len())
                .find(|&e| lines[e] == close)
                .unwrap_or(lines.len() - 1);
            out.push((name, at + 1, end - at + 1));
            at = end;
        }
        at += 1;
    }
    out
}

/// The rule a resolved issue set: no function of the workspace's libraries and
/// programs is over 100 lines, counted as they stand (clippy's `too_many_lines`, also
/// on, counts code lines only). Generated models and tests aside.
#[test]
fn no_function_of_the_workspace_is_over_100_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut over = Vec::new();
    for krate in [
        "netconnect",
        "ovsdb-proto",
        "ovsdb-derive",
        "ovsdb-codegen",
        "ovn-sandbox",
        "nb-model",
        "sb-model",
        "ovs-model",
    ] {
        let mut stack = vec![root.join(krate).join("src")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if path.is_dir() {
                    stack.push(path);
                } else if name.ends_with(".rs") && name != "tests.rs" && name != "generated.rs" {
                    let text = std::fs::read_to_string(&path).unwrap();
                    for (f, line, len) in function_lengths(&text) {
                        if len > 100 {
                            over.push(format!("{}:{line} {f}: {len} lines", path.display()));
                        }
                    }
                }
            }
        }
    }
    assert!(over.is_empty(), "functions over 100 lines: {over:#?}");
}

#[test]
fn function_lengths_count_from_the_head_to_the_closing_brace() {
    let text = "fn a() {\n    x();\n}\n\npub(crate) async fn b(\n    y: u8,\n) {\n    if y {\n    }\n}\nfn c() {}\n";
    assert_eq!(
        function_lengths(text),
        [("a".to_owned(), 1, 3), ("b".to_owned(), 5, 6)]
    );
}
