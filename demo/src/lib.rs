//! The demo servers shared by the runtime adapters' examples (`cargo run -p mcp-tokio
//! --example users`, `-p mcp-smol --example smol_users`) and the tests (`mcp_tests::users`
//! re-exports [`users`]; `tests/jwt_access_tokens.rs` runs `protected`), the runtime-neutral
//! half of the example clients ([`cli`]), the options that make a server one instance of
//! several ([`scale`]), the `--bind` option they share ([`bind`]) and their logging
//! ([`logging`]). A separate package so that an adapter's examples can use them without
//! depending on the tests.
//!
//! Its own examples are the ones with heavier dependencies, kept out of the adapters' so that
//! building the users example builds neither: `axum` (the MCP endpoint in an axum `Router`)
//! and, with the feature `protected`, `protected` (the users server behind JWT access
//! tokens; the module `protected` is behind the same feature).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bind;
pub mod cli;
pub mod logging;
#[cfg(feature = "protected")]
pub mod protected;
pub mod scale;
pub mod users;

// The README's Rust blocks, compiled (and, unless marked `no_run`, run) as doctests of this
// package, whose dev-dependencies are what they use: its sections on writing a server, a
// client, mounting in axum and driving your own runtime cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
