//! Bodies of the cargo-fuzz targets (`fuzz/fuzz_targets/*.rs` call one function each), built
//! with `--cfg fuzzing` or the `fuzzing` feature so that plain tests can replay the committed
//! seeds (`mcp_tests::replay_fuzz_target`). Not part of the stable API.

pub mod jsonrpc;
pub mod router;
