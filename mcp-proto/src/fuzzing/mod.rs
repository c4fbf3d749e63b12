//! Bodies of the cargo-fuzz targets (`fuzz/fuzz_targets/*.rs` call them in one line), compiled
//! with the normal build so that `tests/` replays the committed seeds on every `cargo test`.
//! Not part of the stable API.

pub mod client;
