// S-NEW-7/8.
//! # mcp-proto: the sans-IO core of MCP's Streamable HTTP transport
//!
//! This crate holds every protocol decision of the Model Context Protocol's Streamable HTTP
//! transport and none of the I/O. It reads no clock, opens no socket and spawns nothing: bytes
//! and events go in, HTTP intents, JSON-RPC messages and timer deadlines come out, and time is
//! passed in as an [`std::time::Instant`]. Runtime adapters (`mcp-tokio`, `mcp-smol`) move the
//! bytes and sleep; they never decide what a status code or a header means.
//!
//! The reference is the [MCP specification](https://modelcontextprotocol.io/specification)
//! (revisions 2025-03-26, 2025-06-18, 2025-11-25 and 2026-07-28), chiefly its "Transports ›
//! Streamable HTTP" section, and, for the event stream, the WHATWG HTML standard's
//! "Server-sent events".
//!
//! ## Modules
//!
//! - [`sse`]: the WHATWG `text/event-stream` decoder and encoder, incremental over arbitrary
//!   chunk boundaries, bounded, and linear in the bytes fed.
//! - [`jsonrpc`]: JSON-RPC 2.0 envelopes (request, notification, response, error, the
//!   2025-03-26 batch) with `params`/`result` kept as raw JSON, so the transport never
//!   re-parses what it only forwards.
//! - [`client`]: `ClientSession`, the whole client side of the transport as one state machine
//!   (POST replies as JSON or SSE, the GET listening stream with bounded jittered reconnects,
//!   session expiry and re-initialization, resumption with `Last-Event-ID`, cancel and close).
//! - [`server`]: the [`server::Router`], the server half of the transport: sessions, POST /
//!   GET / DELETE answers, SSE streams with resumability, heartbeats, idle eviction, `Host`
//!   and `Origin` validation, CORS, RFC 9728 metadata.
//! - [`auth`]: OAuth 2.1 for the client as the MCP authorization specification describes it
//!   (discovery, client registration, PKCE, refresh, step-up), sans-IO like the session.
//! - [`http`]: header names, media types, and the header grammars the transport reads.
//! - [`mirror`]: the 2026-07-28 header mirroring rules (`Mcp-Method`, `Mcp-Name`,
//!   `Mcp-Param-*`, the Base64 sentinel) and the server's header/body check.
//! - [`version`]: the protocol revisions and the behaviours each one selects.
//!
//! ## The crates around it
//!
//! This crate is the protocol alone: no lock, channel, clock read, spawn, socket, TLS or
//! Redis anywhere in it or its dependency tree, with any feature. Around it, each in its own
//! crate: `mcp-service` (the typed API: `Server`, tools, resources, prompts, async handlers,
//! the typed `Client`, and the MCP schema types), `mcp-driver` (the run loops every adapter
//! shares, the asynchronous plug-ins: authentication, the cluster store), `mcp-redis` (the
//! cluster store on Redis), and the adapters `mcp-tokio` and `mcp-smol`, each of which
//! re-exports what an application needs.
//!
//! ## Features
//!
//! - `oauth` (default): [`auth::OAuthClient`], the OAuth 2.1 client machine. Without it,
//!   [`auth`] keeps only the error types the session reports, and `url` leaves the tree.
//!
//! ## The run loop (for the state machines built on these pieces)
//!
//! **After any command or input, call `poll_output` until it returns `None`, then sleep until
//! `poll_timeout` or the next input.** An early `handle_timeout` is a harmless no-op.
#![forbid(unsafe_code)]
#![cfg_attr(not(fuzzing), warn(missing_docs))]

// The transport core: no runtime, no lock, no channel.
pub mod client;
pub mod dpop;
pub mod http;
pub mod jsonrpc;
pub mod mirror;
pub mod server;
pub mod sse;
pub mod version;

// OAuth 2.1 for the client (the MCP authorization specification): a sans-IO machine beside
// the session, driven by the same driver (feature `oauth`; without it, only the error types
// the session reports).
pub mod auth;

#[cfg(any(fuzzing, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;

pub use version::{Era, ProtocolVersion};

/// A map keyed by the handles and counters this crate mints (session handles, stream ids,
/// request handles, tickets), never by what a peer chose: a fast seeded hash (foldhash)
/// instead of SipHash, whose resistance to chosen keys only peer-chosen keys need (session
/// ids and request ids keep `std`'s). A call crosses a few dozen such lookups.
pub type HandleMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
