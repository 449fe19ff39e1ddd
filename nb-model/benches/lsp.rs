//! Decoding Logical_Switch_Port rows from wire JSON into `nb_model::LogicalSwitchPort`
//! and encoding them back, in rows per second, with the bytes allocated per row
//! (counted by a wrapping global allocator and printed before the timings).
//!
//! `cargo bench -p nb-model --bench lsp`

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use nb_model::LogicalSwitchPort;
use ovsdb_proto::model::Table;
use ovsdb_proto::{Row, Uuid};

/// Counts the bytes and calls of every allocation.
struct Counting;

static BYTES: AtomicU64 = AtomicU64::new(0);
static CALLS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counters are
// plain atomics and allocate nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        CALLS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        CALLS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const N: usize = 10_000;

/// The rows of a `select` of N pod ports, as ovsdb-server sends them.
fn wire_rows() -> Vec<u8> {
    let rows: Vec<serde_json::Value> = (0..N)
        .map(|i| {
            let (a, b) = (i / 250, i % 250);
            serde_json::json!({
                "_uuid": ["uuid", Uuid::from_u128(i as u128 + 1).to_string()],
                "name": format!("namespace-{a}_pod-{i}"),
                "addresses": format!("0a:58:0a:f4:{a:02x}:{b:02x} 10.244.{a}.{b}"),
                "port_security": format!("0a:58:0a:f4:{a:02x}:{b:02x} 10.244.{a}.{b}"),
                "external_ids": ["map", [["namespace", format!("namespace-{a}")], ["pod", "true"]]],
                "options": ["map", [["requested-chassis", format!("node-{a}")], ["iface-id-ver", format!("{i}")]]],
                "type": "", "enabled": ["set", []], "up": true, "tag_request": ["set", []],
                "dynamic_addresses": ["set", []], "ha_chassis_group": ["set", []],
                "dhcpv4_options": ["set", []], "dhcpv6_options": ["set", []], "parent_name": ["set", []],
                "tag": ["set", []], "mirror_rules": ["set", []], "peer": ["set", []], "health_checks": ["set", []]
            })
        })
        .collect();
    serde_json::to_vec(&rows).unwrap()
}

/// Straight from JSON into the model (the derive's `Deserialize`).
fn decode(bytes: &[u8]) -> Vec<LogicalSwitchPort> {
    serde_json::from_slice(bytes).unwrap()
}

/// Through the untyped `Row` first, then `Table::from_row`.
fn decode_via_row(bytes: &[u8]) -> Vec<LogicalSwitchPort> {
    let rows: Vec<Row> = serde_json::from_slice(bytes).unwrap();
    rows.iter()
        .map(|r| {
            let uuid = ovsdb_proto::model::__row_uuid(r).unwrap();
            LogicalSwitchPort::from_row(uuid, r).unwrap()
        })
        .collect()
}

fn encode(ports: &[LogicalSwitchPort]) -> Vec<u8> {
    let rows: Vec<Row> = ports.iter().map(Table::to_row).collect();
    serde_json::to_vec(&rows).unwrap()
}

fn measure<T>(f: impl FnOnce() -> T) -> (T, u64, u64) {
    let (b0, c0) = (BYTES.load(Ordering::Relaxed), CALLS.load(Ordering::Relaxed));
    let out = f();
    (
        out,
        BYTES.load(Ordering::Relaxed) - b0,
        CALLS.load(Ordering::Relaxed) - c0,
    )
}

fn bench(c: &mut Criterion) {
    let bytes = wire_rows();
    let (ports, dec_bytes, dec_calls) = measure(|| decode(&bytes));
    let (via_row, row_bytes, row_calls) = measure(|| decode_via_row(&bytes));
    assert_eq!(ports, via_row);
    let (_, enc_bytes, enc_calls) = measure(|| encode(&ports));
    println!(
        "{N} Logical_Switch_Port rows, {} bytes of JSON ({} per row)\n\
         decode: {} bytes in {} allocations per row\n\
         decode through Row: {} bytes in {} allocations per row\n\
         encode: {} bytes in {} allocations per row",
        bytes.len(),
        bytes.len() / N,
        dec_bytes / N as u64,
        dec_calls / N as u64,
        row_bytes / N as u64,
        row_calls / N as u64,
        enc_bytes / N as u64,
        enc_calls / N as u64
    );
    let mut g = c.benchmark_group("logical_switch_port_10k");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(20);
    g.bench_function("decode_from_wire_json", |b| {
        b.iter_with_large_drop(|| decode(black_box(&bytes)))
    });
    g.bench_function("decode_through_row", |b| {
        b.iter_with_large_drop(|| decode_via_row(black_box(&bytes)))
    });
    g.bench_function("encode_to_wire_json", |b| {
        b.iter(|| encode(black_box(&ports)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
