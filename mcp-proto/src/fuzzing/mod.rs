//! Bodies of the cargo-fuzz targets (`fuzz/fuzz_targets/*.rs` are one-line calls into these).
//!
//! They live in the library so that they compile with the normal build and so that plain
//! `cargo test` can replay the committed seeds (`fuzz/seeds/<target>/`) through
//! `mcp_tests::replay_fuzz_target`. Compiled only with `--cfg fuzzing` or the `fuzzing`
//! feature. Not a stable API.

pub mod client;
pub mod jsonrpc;
pub mod rng;
pub mod router;
pub mod sse;
