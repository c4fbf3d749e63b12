//! # mcp-tokio: the tokio + hyper 1 adapter of `mcp-proto`
//!
//! A thin driver of the sans-IO core: it moves bytes between hyper and the state machines of
//! [`mcp_proto`] and sleeps until their deadlines. It holds no protocol logic (no status codes,
//! no header meanings, no durations).
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
//! [`serve`] runs an accept loop of hyper `http1` connections over [`McpService`], a hyper
//! service whose clones feed one driver task. The driver owns the
//! [`Router`](mcp_proto::server::Router) and the
//! [`ServerBinding`](mcp_proto::service::bind::ServerBinding): each turn it applies what the
//! handlers queued, drains the router's outputs (response heads and chunks go to the
//! exchange's channel, handler futures are spawned on tokio, events become `tracing`
//! records), then sleeps until the router's deadline, the next connection message or a
//! handler's wake-up, and feeds what fired with `Instant::now()`. A response body dropped
//! before its end (the client left) becomes `handle_disconnect`.
//!
//! Every queue is bounded ([`Limits`], given to [`serve_with`]): connections wait when the
//! driver's inbound queue is full, and an exchange whose reply queue fills (a client that
//! stopped reading) is cut as a disconnect. [`Serving::shutdown_within`] drains: new requests
//! get the core's 503, GET streams end cleanly, requests in flight finish, then it stops.
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
//! [`Client`] derefs to the service [`Client`](mcp_proto::service::client::Client). A driver
//! task owns the [`ClientSession`](mcp_proto::client::ClientSession) and the
//! [`ClientBinding`](mcp_proto::service::bind::ClientBinding): each HTTP intent becomes a
//! task on hyper-util's client (`TCP_NODELAY`) that streams the response head, body chunks
//! and end (or a classified failure) back to the driver; an abort aborts that task.
//! [`Client::builder`] sets the seed's options (continuous listening, static headers, a
//! header callback, a preset session, a bearer-token provider, timeouts) and can replace the
//! HTTP client or its connector (TLS, proxies). Dropping the [`Client`] closes the session
//! as [`Client::close`] does, without waiting.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod client;
mod server;

pub use client::{Client, ConnectBuilder, ConnectError};
pub use mcp_proto as proto;
pub use server::{
    DriverGone, Limits, McpService, RandomSessionIds, ResponseAborted, ResponseBody, Serving,
    ShutdownHandle, serve, serve_with,
};
