//! libFuzzer entry point: see [`ovsdb_fuzz::client`] for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ovsdb_fuzz::client::check(data));
