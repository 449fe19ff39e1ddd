//! The client's own cost per transaction, one at a time: against a peer that answers
//! every `transact` at once with a canned reply (a thread on a unix socket, no
//! database), `Client::transact` beside a raw socket writing the same request and
//! reading the reply. The server's time is taken out of both, so the difference is the
//! library's: encoding the operations, the request's registration, reading and
//! framing the reply, decoding it.
//!
//! `cargo bench -p ovsdb-proto --bench round_trip [-- COUNT]`
//!
//! `ONLY=ours|tokio-raw|tokio-json|raw` runs one client once and nothing else, for a
//! profiler (`tokio-json`: the raw task parsing each reply as JSON, the floor for a
//! client that reads what it is answered):
//! under `valgrind --tool=callgrind --separate-threads=yes`, the main thread's
//! instructions of two counts, subtracted, give the client's instructions per
//! transaction, a figure that moves by about 1% between runs where times can move 2x.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

use ovsdb_proto::{Datum, Operation, Row};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Answers each line-free JSON request on `s` (the client sends one object per
/// request, no newline) with a canned insert reply carrying its id; `echo` requests
/// get their params back.
fn answer(s: UnixStream) {
    let mut reader = BufReader::new(s.try_clone().unwrap());
    let mut out = s;
    let mut pending = Vec::new();
    loop {
        let buf = match reader.fill_buf() {
            Ok([]) | Err(_) => return,
            Ok(b) => b.to_vec(),
        };
        reader.consume(buf.len());
        pending.extend_from_slice(&buf);
        // Each complete object: from `{` to its matching `}` (no string here holds a
        // brace).
        loop {
            let mut depth = 0usize;
            let mut end = None;
            for (i, b) in pending.iter().enumerate() {
                match b {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(i + 1);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let Some(end) = end else { break };
            let msg: Vec<u8> = pending.drain(..end).collect();
            let v: serde_json::Value = serde_json::from_slice(&msg).unwrap();
            // Written as ovsdb-server orders it, `error` last.
            let reply = match v["method"].as_str() {
                Some("transact") => format!(
                    r#"{{"id":{},"result":[{{"uuid":["uuid","36bd8a88-2b8f-4b4c-8e18-1c2f2b6a1f00"]}}],"error":null}}"#,
                    v["id"]
                ),
                Some("echo") => format!(
                    r#"{{"id":{},"result":{},"error":null}}"#,
                    v["id"], v["params"]
                ),
                _ => continue,
            };
            if out.write_all(reply.as_bytes()).is_err() {
                return;
            }
        }
    }
}

/// A peer on a fresh socket path, answering every connection.
fn peer(dir: &std::path::Path) -> String {
    let path = dir.join("peer.sock");
    let listener = UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            std::thread::spawn(move || answer(s));
        }
    });
    path.display().to_string()
}

fn request(id: usize) -> Vec<u8> {
    format!(
        r#"{{"id":{id},"method":"transact","params":["OVN_Northbound",{{"op":"insert","table":"Logical_Switch","row":{{"name":"ls{id}"}}}}]}}"#
    )
    .into_bytes()
}

fn raw(path: &str, n: usize) -> Duration {
    let mut s = UnixStream::connect(path).unwrap();
    let mut buf = vec![0u8; 4096];
    let start = Instant::now();
    for i in 0..n {
        s.write_all(&request(i)).unwrap();
        // One reply, read whole (it ends with `null}`).
        let mut got = Vec::new();
        while !got.ends_with(b"null}") {
            let r = s.read(&mut buf).unwrap();
            got.extend_from_slice(&buf[..r]);
        }
    }
    start.elapsed()
}

/// The raw client as a task on the tokio runtime: the floor for a client that runs
/// there. With `parse`, each reply is read as a client must read it: parsed as JSON,
/// its id checked and the new row's uuid taken out (`tokio-json`, the floor for any
/// client that reads what the server answers).
async fn tokio_raw(path: &str, n: usize, parse: bool) -> Duration {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::UnixStream::connect(path).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let start = Instant::now();
    for i in 0..n {
        s.write_all(&request(i)).await.unwrap();
        let mut got = Vec::new();
        while !got.ends_with(b"null}") {
            let r = s.read(&mut buf).await.unwrap();
            got.extend_from_slice(&buf[..r]);
        }
        if parse {
            let reply: serde_json::Value = serde_json::from_slice(&got).unwrap();
            assert_eq!(reply["id"].as_u64(), Some(i as u64));
            let uuid = reply["result"][0]["uuid"][1].as_str().unwrap();
            std::hint::black_box(uuid.parse::<uuid::Uuid>().unwrap());
        }
    }
    start.elapsed()
}

async fn ours(path: &str, n: usize) -> Duration {
    let (c, _) = ovsdb_proto::connect(&format!("unix:{path}")).await.unwrap();
    let start = Instant::now();
    for i in 0..n {
        let row: Row = [("name".to_string(), Datum::scalar(format!("ls{i}")))]
            .into_iter()
            .collect();
        c.transact(
            "OVN_Northbound",
            &[Operation::insert("Logical_Switch", row)],
        )
        .await
        .unwrap();
    }
    start.elapsed()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20_000);
    let dir = tempfile::tempdir().unwrap();
    let path = peer(dir.path());
    let single = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let multi = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let per = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
    if let Ok(which) = std::env::var("ONLY") {
        // One run of one client, for a profiler (`valgrind --tool=callgrind`).
        let d = match which.as_str() {
            "ours" => single.block_on(ours(&path, n)),
            "tokio-raw" => single.block_on(tokio_raw(&path, n, false)),
            "tokio-json" => single.block_on(tokio_raw(&path, n, true)),
            "raw" => raw(&path, n),
            other => panic!("ONLY={other}: ours, tokio-raw, tokio-json or raw"),
        };
        println!("{which}: {n} in {d:?}, {:.1} µs each", per(d));
        return;
    }
    let (mut r, mut s, mut m) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        r.push(per(raw(&path, n)));
        s.push(per(single.block_on(ours(&path, n))));
        let p = path.clone();
        m.push(per(multi.block_on(async move {
            tokio::spawn(async move { ours(&p, n).await })
                .await
                .unwrap()
        })));
    }
    let (r, s, m) = (median(r), median(s), median(m));
    println!("{n} transactions one at a time against an instant peer, median of 5, µs each:");
    println!("  raw socket                          {r:>6.1}");
    println!(
        "  ovsdb-proto, current-thread runtime {s:>6.1}  (+{:.1})",
        s - r
    );
    println!(
        "  ovsdb-proto, multi-thread runtime   {m:>6.1}  (+{:.1})",
        m - r
    );
}
