//! One-row inserts against a real ovsdb-server, one at a time and many in flight on one
//! connection, beside a raw socket writing the same JSON (the server's ceiling).
//! Each measurement gets a fresh server so database size does not favour either side.
//!
//! `cargo bench -p integration-tests --bench transact [-- SEQUENTIAL PIPELINED]`
//!
//! `RAW_DELAY_NS=N` delays each of the raw client's sequential requests by N ns after
//! the reply before it (what a client's own reaction time costs the server's round
//! trip; see docs/benchmarks.md). `ONLY=ours|tokio-raw|tokio-json|raw` runs that client's
//! sequential inserts once and nothing else, for a profiler (`tokio-json`: the raw task
//! parsing each reply as JSON, the floor for a client that reads what it is answered;
//! `tokio-json-multi` and `tokio-json-multi-main` the same floor where `ours-multi` and
//! `ours-multi-main` run); `ONLY=ours-spawned` and
//! `ours-multi` run ours as a spawned task on the current-thread and the multi-thread
//! runtime (a reply then wakes a task, not `block_on`'s future), `ours-multi-main` in
//! the multi-thread runtime's `block_on` future, as `#[tokio::main]` runs `main`: on a
//! thread outside the pool, so that each reply crosses threads.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ovn_sandbox::{Installation, OvsdbServer, ServerOptions};
use ovsdb_proto::{Datum, Operation, Row};

/// What the benches share (the median of runs).
mod common;

fn server() -> OvsdbServer {
    let install = Installation::recent().unwrap_or_else(|e| panic!("{e}"));
    OvsdbServer::start(&install, &ServerOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn request(id: usize) -> Vec<u8> {
    format!(
        r#"{{"id":{id},"method":"transact","params":["OVN_Northbound",{{"op":"insert","table":"Logical_Switch","row":{{"name":"ls{id}"}}}}]}}"#
    )
    .into_bytes()
}

/// Counts complete replies in what has been read (each ends with `"error":null}`).
#[derive(Default)]
struct ReplyCounter {
    tail: Vec<u8>,
    count: usize,
}

impl ReplyCounter {
    fn feed(&mut self, bytes: &[u8]) {
        const END: &[u8] = b"\"error\":null}";
        self.tail.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(pos) = memfind(&self.tail[start..], END) {
            self.count += 1;
            start += pos + END.len();
        }
        self.tail.drain(..start);
    }
}

fn memfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn raw_path(server: &OvsdbServer) -> String {
    server.unix_remote().trim_start_matches("unix:").to_owned()
}

fn raw_sequential(n: usize) -> Duration {
    let server = server();
    let mut s = UnixStream::connect(raw_path(&server)).unwrap();
    let mut counter = ReplyCounter::default();
    let mut buf = vec![0u8; 65536];
    let delay: u64 = std::env::var("RAW_DELAY_NS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let start = Instant::now();
    for i in 0..n {
        if delay > 0 {
            // RAW_DELAY_NS: the raw client answers that much later (a busy wait),
            // to see what a client's reaction time costs the server's round trip.
            let t = Instant::now();
            while (t.elapsed().as_nanos() as u64) < delay {}
        }
        s.write_all(&request(i)).unwrap();
        while counter.count <= i {
            let r = s.read(&mut buf).unwrap();
            counter.feed(&buf[..r]);
        }
    }
    start.elapsed()
}

/// The raw client again, but as a task on a current-thread tokio runtime: what the
/// runtime's own wake path (epoll, then the task) costs beside a blocking read, so
/// that what is left of the gap is the library's. With `parse`, each reply is read as
/// a client must read it: parsed as JSON (one `read` brings a whole reply here), its
/// id checked and the new row's uuid taken out (`tokio-json`, the floor for a client
/// that reads what the server answers).
async fn tokio_raw_sequential(n: usize, parse: bool) -> Duration {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = server();
    let mut s = tokio::net::UnixStream::connect(raw_path(&server))
        .await
        .unwrap();
    let mut buf = vec![0u8; 65536];
    let start = Instant::now();
    for i in 0..n {
        s.write_all(&request(i)).await.unwrap();
        let mut got = Vec::new();
        while !got.ends_with(b"\"error\":null}") {
            let r = s.read(&mut buf).await.unwrap();
            got.extend_from_slice(&buf[..r]);
        }
        if parse {
            let reply: serde_json::Value = serde_json::from_slice(&got).unwrap();
            assert_eq!(reply["id"].as_u64(), Some(i as u64));
            let uuid = reply["result"][0]["uuid"][1].as_str().unwrap();
            std::hint::black_box(uuid.parse::<ovsdb_proto::Uuid>().unwrap());
        }
    }
    start.elapsed()
}

fn raw_pipelined(n: usize) -> Duration {
    let server = server();
    let mut s = UnixStream::connect(raw_path(&server)).unwrap();
    let mut reader = s.try_clone().unwrap();
    let start = Instant::now();
    let writer = std::thread::spawn(move || {
        let mut batch = Vec::new();
        for i in 0..n {
            batch.extend_from_slice(&request(i));
            if batch.len() > 64 * 1024 {
                s.write_all(&batch).unwrap();
                batch.clear();
            }
        }
        s.write_all(&batch).unwrap();
        s
    });
    let mut counter = ReplyCounter::default();
    let mut buf = vec![0u8; 1 << 20];
    while counter.count < n {
        let r = reader.read(&mut buf).unwrap();
        counter.feed(&buf[..r]);
    }
    let elapsed = start.elapsed();
    drop(writer.join().unwrap());
    elapsed
}

fn row(i: usize) -> Row {
    [("name".to_string(), Datum::scalar(format!("ls{i}")))]
        .into_iter()
        .collect()
}

async fn ours_sequential(n: usize) -> Duration {
    let server = server();
    let (c, _) = ovsdb_proto::connect(&server.unix_remote()).await.unwrap();
    let start = Instant::now();
    for i in 0..n {
        c.transact(
            "OVN_Northbound",
            &[Operation::insert("Logical_Switch", row(i))],
        )
        .await
        .unwrap();
    }
    start.elapsed()
}

async fn ours_pipelined(n: usize, in_flight: usize) -> Duration {
    let server = server();
    let (c, _) = ovsdb_proto::connect(&server.unix_remote()).await.unwrap();
    let start = Instant::now();
    let done = futures_util::stream::iter(0..n)
        .map(|i| {
            let c = c.clone();
            async move {
                c.transact(
                    "OVN_Northbound",
                    &[Operation::insert("Logical_Switch", row(i))],
                )
                .await
            }
        })
        .buffer_unordered(in_flight)
        .fold(0usize, |acc, r| async move {
            r.unwrap();
            acc + 1
        })
        .await;
    assert_eq!(done, n);
    start.elapsed()
}

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

fn main() {
    // `cargo bench` passes --bench; numbers given after `--` set the counts.
    let counts: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let seq = counts.first().copied().unwrap_or(5_000);
    let pipe = counts.get(1).copied().unwrap_or(50_000);
    let multi = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let single = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    let install = Installation::recent().unwrap_or_else(|e| panic!("{e}"));
    println!(
        "ovsdb-server {} (OVN {}), unix socket, {seq} sequential and {pipe} pipelined inserts",
        install.ovs_version(),
        install.ovn_version()
    );
    if let Ok(which) = std::env::var("ONLY") {
        // One sequential run of one client, for a profiler (`perf stat`, `perf record`).
        let d = match which.as_str() {
            "ours" => single.block_on(ours_sequential(seq)),
            "ours-spawned" => {
                single.block_on(async { tokio::spawn(ours_sequential(seq)).await.unwrap() })
            }
            "ours-multi-main" => multi.block_on(ours_sequential(seq)),
            "ours-multi" => {
                multi.block_on(async { tokio::spawn(ours_sequential(seq)).await.unwrap() })
            }
            "tokio-raw" => single.block_on(tokio_raw_sequential(seq, false)),
            "tokio-json" => single.block_on(tokio_raw_sequential(seq, true)),
            "tokio-json-multi" => multi.block_on(async {
                tokio::spawn(tokio_raw_sequential(seq, true))
                    .await
                    .unwrap()
            }),
            "tokio-json-multi-main" => multi.block_on(tokio_raw_sequential(seq, true)),
            "raw" => raw_sequential(seq),
            other => panic!(
                "ONLY={other}: ours, ours-spawned, ours-multi, ours-multi-main, tokio-raw, tokio-json, \
                 tokio-json-multi, tokio-json-multi-main or raw"
            ),
        };
        println!("{which}: {seq} in {d:?}");
        return;
    }
    let mut runs: [Vec<f64>; 8] = Default::default();
    for _ in 0..5 {
        runs[0].push(rate(seq, raw_sequential(seq)));
        runs[1].push(rate(seq, single.block_on(ours_sequential(seq))));
        let d = multi.block_on(async { tokio::spawn(ours_sequential(seq)).await.unwrap() });
        runs[2].push(rate(seq, d));
        runs[3].push(rate(pipe, raw_pipelined(pipe)));
        let d = multi.block_on(async { tokio::spawn(ours_pipelined(pipe, 1024)).await.unwrap() });
        runs[4].push(rate(pipe, d));
        runs[5].push(rate(seq, single.block_on(tokio_raw_sequential(seq, false))));
        runs[6].push(rate(seq, multi.block_on(ours_sequential(seq))));
        runs[7].push(rate(seq, single.block_on(tokio_raw_sequential(seq, true))));
    }
    let m: Vec<f64> = runs.iter().map(|r| common::median(r)).collect();
    println!("median of 5 runs, transactions per second:");
    println!(
        "  one at a time, raw socket                     {:>8.0}",
        m[0]
    );
    println!(
        "  one at a time, raw socket from a tokio task   {:>8.0}  ratio {:.2}",
        m[5],
        m[5] / m[0]
    );
    println!(
        "  ... from a tokio task parsing each reply      {:>8.0}  ratio {:.2}",
        m[7],
        m[7] / m[0]
    );
    println!(
        "  one at a time, ovsdb-proto, current-thread rt {:>8.0}  ratio {:.2}",
        m[1],
        m[1] / m[0]
    );
    println!(
        "  one at a time, ovsdb-proto, multi-thread rt   {:>8.0}  ratio {:.2}",
        m[2],
        m[2] / m[0]
    );
    println!(
        "  ... multi-thread rt, in block_on's future     {:>8.0}  ratio {:.2}",
        m[6],
        m[6] / m[0]
    );
    println!(
        "  pipelined, raw socket                         {:>8.0}",
        m[3]
    );
    println!(
        "  pipelined, ovsdb-proto (1024 in flight)       {:>8.0}  ratio {:.2}",
        m[4],
        m[4] / m[3]
    );
}
