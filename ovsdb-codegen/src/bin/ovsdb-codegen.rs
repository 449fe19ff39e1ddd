//! `ovsdb-codegen SCHEMA [--docs FILE] [--out FILE] [--check]`
//!
//! Writes the Rust model for SCHEMA to FILE (or standard output). With `--check`,
//! writes nothing and exits 1 if FILE differs from what would be generated.

use std::process::ExitCode;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ovsdb-codegen: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<ExitCode, String> {
    let mut args = std::env::args().skip(1);
    let (mut schema, mut docs, mut out, mut check) = (None, None, None, false);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--docs" => docs = Some(args.next().ok_or("--docs needs a file")?),
            "--out" => out = Some(args.next().ok_or("--out needs a file")?),
            "--check" => check = true,
            "-h" | "--help" => {
                println!("usage: ovsdb-codegen SCHEMA [--docs FILE] [--out FILE] [--check]");
                return Ok(ExitCode::SUCCESS);
            }
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            s => schema = Some(s.to_owned()),
        }
    }
    let schema =
        schema.ok_or("usage: ovsdb-codegen SCHEMA [--docs FILE] [--out FILE] [--check]")?;
    let bytes = std::fs::read(&schema).map_err(|e| format!("cannot read {schema}: {e}"))?;
    let docs_text = docs
        .as_ref()
        .map(|d| std::fs::read_to_string(d).map_err(|e| format!("cannot read {d}: {e}")))
        .transpose()?;
    let code = ovsdb_codegen::generate(&bytes, docs_text.as_deref(), &schema)
        .map_err(|e| e.to_string())?;
    match (out, check) {
        (Some(path), true) => {
            let current = std::fs::read_to_string(&path).unwrap_or_default();
            if current != code {
                eprintln!("ovsdb-codegen: {path} is stale; regenerate it without --check");
                return Ok(ExitCode::FAILURE);
            }
        }
        (Some(path), false) => {
            std::fs::write(&path, code).map_err(|e| format!("cannot write {path}: {e}"))?
        }
        (None, true) => return Err("--check needs --out FILE".into()),
        (None, false) => print!("{code}"),
    }
    Ok(ExitCode::SUCCESS)
}
