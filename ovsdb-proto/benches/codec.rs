//! Decoding a large monitor reply: framing alone, and framing plus decoding into the
//! data model, beside `serde_json::from_slice::<IgnoredAny>` on the same bytes (the
//! floor: JSON validation with no allocation at all).
//!
//! `cargo bench -p ovsdb-proto --bench codec`
//!
//! Runs with mimalloc, the allocator netconnectd uses: decoding is allocation-bound,
//! and the system allocator would measure glibc as much as the decoder.

use std::hint::black_box;

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ovsdb_proto::codec::JsonRpcCodec;
use ovsdb_proto::TableUpdates;
use tokio_util::codec::Decoder;

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A `monitor` reply holding `n` Logical_Switch_Port rows shaped like OVN-Kubernetes
/// pod ports.
fn monitor_reply(n: usize) -> Vec<u8> {
    let mut s = String::from(r#"{"id":1,"result":{"Logical_Switch_Port":{"#);
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        let (a, b) = (i / 250, i % 250);
        s.push_str(&format!(
            r#""{:08x}-1c2f-4b6a-9e18-{:012x}":{{"new":{{"name":"namespace-{a}_pod-{i}","addresses":"0a:58:0a:f4:{a:02x}:{b:02x} 10.244.{a}.{b}","port_security":"0a:58:0a:f4:{a:02x}:{b:02x} 10.244.{a}.{b}","external_ids":["map",[["namespace","namespace-{a}"],["pod","true"],["k8s.ovn.org/nad","default"]]],"options":["map",[["requested-chassis","node-{a}"],["iface-id-ver","{:08x}-aaaa-bbbb-cccc-{:012x}"]]],"type":"","enabled":["set",[]],"up":true,"tag_request":["set",[]],"dynamic_addresses":["set",[]],"ha_chassis_group":["set",[]],"dhcpv4_options":["uuid","{:08x}-0000-4000-8000-000000000001"],"parent_name":["set",[]],"tag":["set",[]],"mirror_rules":["set",[]],"peer":["set",[]]}}}}"#,
            i, i, i, i, a
        ));
    }
    s.push_str(r#"}},"error":null}"#);
    s.into_bytes()
}

fn decode(c: &mut Criterion) {
    let bytes = monitor_reply(20_000);
    let mut group = c.benchmark_group("monitor_reply_20k_rows");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.sample_size(20);

    group.bench_function("floor_serde_json_ignored_any", |b| {
        b.iter(|| {
            let v: serde::de::IgnoredAny = serde_json::from_slice(black_box(&bytes)).unwrap();
            black_box(v)
        })
    });

    // Bytes arrive in 64 KiB reads, as from a socket.
    let frame = |bytes: &[u8]| {
        let mut codec = JsonRpcCodec::default();
        let mut buf = BytesMut::with_capacity(64 * 1024);
        for chunk in bytes.chunks(64 * 1024) {
            buf.extend_from_slice(chunk);
            if let Some(m) = codec.decode(&mut buf).unwrap() {
                return m;
            }
        }
        panic!("no message")
    };

    group.bench_function("codec_framing_only", |b| {
        b.iter_with_large_drop(|| frame(black_box(&bytes)))
    });

    group.bench_function("serde_json_value", |b| {
        b.iter_with_large_drop(|| {
            serde_json::from_slice::<serde_json::Value>(black_box(&bytes)).unwrap()
        })
    });

    // The cache's decoder: straight into compact rows, every value checked against
    // its column. The result member alone, as the cache's tap hands it over.
    let schema = ovsdb_proto::DatabaseSchema::from_json(&serde_json::json!({
        "name": "OVN_Northbound", "version": "7.18.0", "tables": {"Logical_Switch_Port": {"columns": {
            "name": {"type": "string"},
            "addresses": {"type": {"key": "string", "min": 0, "max": "unlimited"}},
            "port_security": {"type": {"key": "string", "min": 0, "max": "unlimited"}},
            "external_ids": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}},
            "options": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}},
            "type": {"type": "string"},
            "enabled": {"type": {"key": "boolean", "min": 0, "max": 1}},
            "up": {"type": {"key": "boolean", "min": 0, "max": 1}},
            "tag_request": {"type": {"key": {"type": "integer", "minInteger": 0, "maxInteger": 4095}, "min": 0, "max": 1}},
            "dynamic_addresses": {"type": {"key": "string", "min": 0, "max": 1}},
            "ha_chassis_group": {"type": {"key": {"type": "uuid", "refTable": "HA_Chassis_Group", "refType": "weak"}, "min": 0, "max": 1}},
            "dhcpv4_options": {"type": {"key": {"type": "uuid", "refTable": "DHCP_Options", "refType": "weak"}, "min": 0, "max": 1}},
            "parent_name": {"type": {"key": "string", "min": 0, "max": 1}},
            "tag": {"type": {"key": {"type": "integer", "minInteger": 1, "maxInteger": 4095}, "min": 0, "max": 1}},
            "mirror_rules": {"type": {"key": {"type": "uuid", "refTable": "Mirror", "refType": "weak"}, "min": 0, "max": "unlimited"}},
            "peer": {"type": {"key": "string", "min": 0, "max": 1}}
        }},
        "HA_Chassis_Group": {"columns": {"name": {"type": "string"}}},
        "DHCP_Options": {"columns": {"cidr": {"type": "string"}}},
        "Mirror": {"columns": {"name": {"type": "string"}}}}
    }))
    .unwrap();
    let result = frame(&bytes).member("result").unwrap();
    group.bench_function("cache_decoder_result_only", |b| {
        b.iter_with_large_drop(|| {
            let rows =
                ovsdb_proto::cache::__decode_updates(&schema, black_box(&result), true).unwrap();
            assert_eq!(rows.len(), 20_000);
            rows
        })
    });

    // The whole reply as the cache receives it: in 64 KiB pieces handed from the
    // connection's thread to the decoder's (dropping the rows included).
    group.bench_function("cache_whole_reply_in_pieces", |b| {
        b.iter(|| {
            let n = ovsdb_proto::cache::__decode_reply(&schema, black_box(&bytes), 65536, true)
                .unwrap()
                .len();
            assert_eq!(n, 20_000);
        })
    });

    // Dropping the decoded rows is left out of the timing: a cache keeps them.
    group.bench_function("codec_and_data_model", |b| {
        b.iter_with_large_drop(|| {
            let m = frame(black_box(&bytes));
            let result = m.member("result").unwrap();
            let updates: TableUpdates = serde_json::from_slice(&result).unwrap();
            assert_eq!(updates["Logical_Switch_Port"].len(), 20_000);
            updates
        })
    });
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
