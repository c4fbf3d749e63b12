//! # mcp-smol: the smol + async-h1 adapter of `mcp-proto`
//!
//! A thin driver of the sans-IO core: it moves bytes between async-h1 on smol sockets and
//! the state machines of [`mcp_proto`] and sleeps until their deadlines. It holds no protocol
//! logic (no status codes, no header meanings, no durations). The public API has the shape of
//! `mcp-tokio`'s.
//!
//! # Server
//!
//! ```no_run
//! # async fn run(server: mcp_proto::service::Server) -> std::io::Result<()> {
//! use mcp_proto::server::ServerConfig;
//! let listener = smol::net::TcpListener::bind("127.0.0.1:8080").await?;
//! let serving = mcp_smol::serve(listener, server, ServerConfig::default())?;
//! println!("{}", serving.url());
//! // ... later
//! serving.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! [`serve`] runs an accept loop of async-h1 connections whose exchanges feed one driver
//! task. The driver owns the [`Router`](mcp_proto::server::Router) and the
//! [`ServerBinding`](mcp_proto::service::bind::ServerBinding): each turn it applies what the
//! handlers queued, drains the router's outputs (response heads and chunks go to the
//! exchange's channels, handler futures are spawned on smol, events become `tracing`
//! records), then sleeps until the router's deadline, the next exchange message or a
//! handler's wake-up, and feeds what fired with `Instant::now()`.
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
//! [`Client`] derefs to the service [`Client`](mcp_proto::service::client::Client). A driver
//! task owns the [`ClientSession`](mcp_proto::client::ClientSession) and the
//! [`ClientBinding`](mcp_proto::service::bind::ClientBinding): each HTTP intent becomes a
//! task that takes a connection from a small keep-alive pool (`TCP_NODELAY`), writes the
//! request with async-h1, and streams the response head, body chunks and end (or a
//! classified failure) back to the driver; an abort drops that task and its connection.
//!
//! # async-h1's limits, and what this crate does about them
//!
//! - No connection pool: [`Client`] keeps idle connections (at most
//!   [`ClientOptions::max_idle_connections`]) and reuses one only after the previous response
//!   body was read to its end, and only if the server did not close it meanwhile; concurrent
//!   requests use separate connections.
//! - Its own `http-types`: converted to `http` 1.x by hand (absolute URLs on the client; a
//!   status code http-types does not know is an error, never a substitute).
//! - A server that notices a departed client only when a write fails: the server watches
//!   each socket for EOF while its response is pending or streaming, and turns the core's
//!   SSE heartbeats on ([`ServerConfig::with_heartbeats_required`](mcp_proto::server::ServerConfig::with_heartbeats_required)).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod body;
mod client;
mod convert;
mod server;

pub use client::{Client, ClientOptions, ConnectError};
pub use mcp_proto as proto;
pub use server::{RandomSessionIds, Serving, ShutdownHandle, serve};
