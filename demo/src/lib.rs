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

// mcp-proto/README.md: your own runtime (run), client authorization.
#[cfg(doctest)]
#[doc = include_str!("../../mcp-proto/README.md")]
pub struct ProtoReadmeDoctests;

// mcp-proto/service/README.md: a client with typed results and notifications.
#[cfg(doctest)]
#[doc = include_str!("../../mcp-proto/service/README.md")]
pub struct ServiceReadmeDoctests;

// mcp-proto/redis/README.md: several instances (the in-memory cluster store, run).
#[cfg(doctest)]
#[doc = include_str!("../../mcp-proto/redis/README.md")]
pub struct RedisReadmeDoctests;

// mcp-tokio/README.md: mount in axum, HTTPS, logs and traces.
#[cfg(doctest)]
#[doc = include_str!("../../mcp-tokio/README.md")]
pub struct TokioReadmeDoctests;

// mcp-smol/README.md: the same API on both runtimes.
#[cfg(doctest)]
#[doc = include_str!("../../mcp-smol/README.md")]
pub struct SmolReadmeDoctests;

// demo/README.md: protecting a server.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct DemoReadmeDoctests;
