//! What each fuzz target checks, as plain functions of the fuzzer's input. The
//! libFuzzer entry points in `fuzz_targets/` only call them (built by `cargo fuzz` on a
//! nightly toolchain); the tests run every seed of `corpus/` and every input fuzzing
//! found through them on the stable toolchain, as part of the normal suite.
//!
//! Each check panics when the code under test breaks a promise: a panic, a hang (the
//! client target bounds its calls in time), or two ways of doing the same thing that
//! disagree.

#![warn(missing_docs)]

pub mod client;
pub mod codec;
pub mod datum;
pub mod manifest;
pub mod monitor_reply;
pub mod schema;

/// The OVN_Northbound schema the model is generated from: the datum target checks
/// values against its columns.
pub const NB_SCHEMA: &str = include_str!("../../schemas/ovn-nb.ovsschema");
