//! # mcp-smol: the smol + async-h1 adapter of `mcp-proto`
//!
//! A thin adapter: the per-turn logic, the queues, draining shutdown and the client's
//! options are [`mcp_driver`]'s, shared with every adapter. This crate gives the
//! driver smol's timers and tasks and moves bytes through async-h1 on smol sockets. It holds
//! no protocol logic (no status codes, no header meanings, no durations). The public API is
//! `mcp-tokio`'s.
//!
//! # Server
//!
//! ```no_run
//! # async fn run(server: mcp_service::Server) -> std::io::Result<()> {
//! use mcp_proto::server::ServerConfig;
//! let listener = smol::net::TcpListener::bind("127.0.0.1:8080").await?;
//! let serving = mcp_smol::serve(listener, server).start()?;
//! println!("{}", serving.url());
//! // ... later
//! serving.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! # Client
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = mcp_smol::Client::connect("http://127.0.0.1:8080/mcp").await?;
//! for tool in client.list_tools().await? {
//!     println!("{}", tool.name);
//! }
//! let result = client.call_tool("get_user", serde_json::json!({"user_id": "user_1"})).await?;
//! client.close().await;
//! # let _ = result; Ok(()) }
//! ```
//!
//! # HTTPS (feature `tls`, on by default)
//!
//! `serve(..).tls(..)` terminates TLS with rustls (`ring` provider) through futures-rustls (this
//! crate's `conn` module secures each connection, both ways). The
//! server stays HTTP/1.1 (async-h1 has no HTTP/2): it offers only `http/1.1` by ALPN. Each
//! handshake runs in its connection's own task under `ServerTls::handshake_timeout` (default
//! 10 s): a peer that fails it or stalls is dropped and disturbs no one. The client dials
//! `https://` over its pool, trusting Mozilla's roots unless [`ClientOptions::tls`] says
//! otherwise (`ClientTls::roots`, `ClientTls::native_roots` with the feature
//! `native-roots`, `ClientTls::config`). A refused certificate fails `connect` with
//! [`ConnectError::Tls`] naming the host.
//!
//! ```no_run
//! # #[cfg(feature = "tls")]
//! # async fn run(
//! #     server: mcp_service::Server,
//! #     tls: mcp_smol::ServerTls,
//! #     roots: mcp_smol::rustls::RootCertStore,
//! # ) -> Result<(), Box<dyn std::error::Error>> {
//! let listener = smol::net::TcpListener::bind("127.0.0.1:8443").await?;
//! let serving = mcp_smol::serve(listener, server).tls(tls).start()?;
//! let client = mcp_smol::Client::builder(serving.url())
//!     .http(|h| h.tls(mcp_smol::ClientTls::roots(roots)))
//!     .connect()
//!     .await?;
//! # let _ = client; Ok(()) }
//! ```
//!
//! # async-h1's limits, and what this crate does about them
//!
//! - No connection pool: [`Client`] keeps idle connections (as many as requests were ever
//!   in flight at once, at most [`ClientOptions::max_idle_connections`]) and reuses one only
//!   after the previous response
//!   body was read to its end, and only if the server did not close it meanwhile; concurrent
//!   requests use separate connections.
//! - Its own `http-types`: converted to `http` 1.x by hand (the `h1` module;
//!   absolute URLs on the client; a status code http-types does not know is an error, never
//!   a substitute).
//! - A server that notices a departed client only when a write fails: the server watches
//!   each socket for EOF while its response is pending or streaming, and turns the core's
//!   SSE heartbeats on ([`ServerConfig::with_heartbeats_required`](mcp_proto::server::ServerConfig::with_heartbeats_required)).
//! - A timer per request head on async-io 1.x, a second reactor whose thread each request
//!   woke twice (a context switch each on a busy core): the server reads each head with
//!   async-h1's decoder itself, under one timer per connection
//!   (`conn::KeepAlive`, `DriverConfig::keep_alive_timeout` of quiet between
//!   two requests, 60 s by default), and writes the response with async-h1's encoder
//!   (`h1::respond`), so async-h1's own per-request timer and buffers
//!   never come into play.
//! - One write per piece of a response (head, chunk, terminator: three TCP segments for a
//!   JSON answer): what a poll writes goes out in one send (`conn::Corked`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod client;
mod conn;
mod h1;
#[cfg(feature = "redis")]
mod redis;
mod server;

pub use client::{Client, ClientOptions, ConnectBuilder, Http};
/// The run loops this adapter drives (`mcp-driver`), for what the re-exports below leave out.
pub use mcp_driver as driver;
#[cfg(feature = "tls")]
pub use mcp_driver::tls::rustls;
pub use mcp_driver::{
    Adapter, AsyncAuthenticator, ClusterBackend, Connect, ConnectError, DriverConfig, EraCache,
    PeerAddr, RandomSessionIds, Serve, ServerHandle, Serving,
};
#[cfg(feature = "tls")]
pub use mcp_driver::{ClientTls, ServerTls};
/// The sans-IO core (`mcp-proto`): the transport machines, their configurations and errors.
pub use mcp_proto as proto;
pub use mcp_proto::client::ClientConfig;
pub use mcp_proto::server::ServerConfig;
/// The typed API (`mcp-service`): `Server`, tools, resources, prompts, `RequestContext`, the
/// typed `Client` and the MCP schema types.
pub use mcp_service as service;
#[cfg(feature = "redis")]
pub use redis::{RedisConfig, RedisUrlError, redis_backend};
pub use server::{Smol, serve};
