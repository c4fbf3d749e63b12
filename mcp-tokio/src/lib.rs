//! # mcp-tokio: the tokio + hyper 1 adapter of `mcp-proto`
//!
//! A thin driver of the sans-IO core: it moves bytes between hyper and the state machines of
//! [`mcp_proto`] and sleeps until their deadlines. It holds no protocol logic (no status codes,
//! no header meanings, no durations).
//!
//! The client driver and the server service arrive with the issue that builds them; until then
//! this crate only re-exports the core, so that downstream code can depend on its final name.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use mcp_proto as proto;
