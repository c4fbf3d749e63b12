//! # mcp-tokio: the tokio + hyper 1 adapter of `mcp-proto`
//!
//! A thin adapter: the per-turn logic, the queues, shutdown and the client's options are
//! [`mcp_proto::driver`]'s, shared with every adapter. This crate gives the driver tokio's
//! timers and tasks and moves bytes through hyper. It holds no protocol logic (no status
//! codes, no header meanings, no durations).
//!
//! # Server
//!
//! ```no_run
//! # async fn run(server: mcp_proto::service::Server) -> std::io::Result<()> {
//! use mcp_proto::server::ServerConfig;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! let serving = mcp_tokio::serve(listener, server, ServerConfig::default())?;
//! println!("{}", serving.url());
//! // ... later
//! serving.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! [`serve`] runs an accept loop of hyper connections (HTTP/1.1, `TCP_NODELAY`) over
//! [`McpService`], a hyper service whose clones feed one driver task
//! ([`ServerHandle`](mcp_proto::driver::ServerHandle)). A response body dropped before its
//! end (the client left) is a disconnect; a body the core cut ends with an error, so hyper
//! aborts the connection. [`Serving::shutdown_within`] drains: new requests get the core's
//! 503, GET streams end cleanly, requests in flight finish, then it stops.
//!
//! # Client
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = mcp_tokio::Client::connect("http://127.0.0.1:8080/mcp").await?;
//! for tool in client.list_tools().await? {
//!     println!("{}", tool.name);
//! }
//! let result = client.call_tool("get_user", serde_json::json!({"user_id": "user_1"})).await?;
//! client.close().await;
//! # let _ = result; Ok(()) }
//! ```
//!
//! [`Client`] is the driver's client on [`Http`], hyper-util's client (`TCP_NODELAY`): each
//! HTTP intent becomes a task that streams the response head, body chunks and end (or a
//! classified failure) back to the driver; an abort aborts that task. [`Client::builder`]
//! sets mcp-go's options (continuous listening, static headers, a header callback, a preset
//! session, a bearer-token provider, timeouts); [`Connect::http`] replaces the HTTP client or
//! its connector (TLS, proxies).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod client;
mod server;

pub use client::{Client, ConnectBuilder, Http, HttpOptions};
pub use mcp_proto as proto;
#[cfg(feature = "tls")]
pub use mcp_proto::driver::tls::rustls;
#[cfg(feature = "tls")]
pub use mcp_proto::driver::{ClientTls, ServerTls};
pub use mcp_proto::driver::{
    Connect, ConnectError, DriverGone, Limits, RandomSessionIds, ResponseAborted, ServerHandle,
    Serving, ShutdownHandle,
};
pub use server::{McpService, ResponseBody, Tokio, serve, serve_with};
#[cfg(feature = "tls")]
pub use server::{serve_tls, serve_tls_with};
