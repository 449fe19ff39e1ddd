//! libFuzzer entry point: see [`ovsdb_fuzz::datum`] for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ovsdb_fuzz::datum::check(data));
