//! # mcp-tokio: the tokio + hyper 1 adapter of `mcp-proto`
//!
//! A thin adapter: the per-turn logic, the queues, shutdown and the client's options are
//! [`mcp_driver`]'s, shared with every adapter. This crate gives the driver tokio's
//! timers and tasks and moves bytes through hyper. It holds no protocol logic (no status
//! codes, no header meanings, no durations).
//!
//! # Server
//!
//! ```no_run
//! # async fn run(server: mcp_service::Server) -> std::io::Result<()> {
//! use mcp_proto::server::ServerConfig;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! let serving = mcp_tokio::serve(listener, server).start()?;
//! println!("{}", serving.url());
//! // ... later
//! serving.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! [`serve`] runs an accept loop of hyper connections (HTTP/1.1, and HTTP/2 with prior
//! knowledge, told apart by the client's first bytes; `TCP_NODELAY`) over [`McpService`], a hyper and tower service (axum's
//! `Router::route_service` mounts it) whose clones feed one driver task ([`ServerHandle`]).
//! A response body dropped before its end (the client left) is a disconnect; a body the core cut ends with an error, so hyper
//! aborts the connection. [`Serving::shutdown_within`] drains: new requests get the core's
//! 503, GET streams end cleanly, requests in flight finish, then it stops.
//!
//! # HTTPS (feature `tls`, on by default)
//!
//! `serve(..).tls(..)` terminates TLS with rustls (`ring` provider) and speaks HTTP/2 or HTTP/1.1 as
//! ALPN chose. Each handshake runs in its connection's own task under
//! `ServerTls::handshake_timeout` (default 10 s): a peer that fails it or stalls is dropped
//! and disturbs no one. The client dials `https://` with hyper-rustls, offers `h2` and
//! `http/1.1`, and with HTTP/2 carries its GET stream and every POST on one connection; it
//! trusts Mozilla's roots unless [`HttpOptions::tls`] says otherwise (`ClientTls::roots`,
//! `ClientTls::native_roots` with the feature `native-roots`, `ClientTls::config`). A
//! refused certificate fails `connect` with [`ConnectError::Tls`] naming the host.
//!
//! ```no_run
//! # #[cfg(feature = "tls")]
//! # async fn run(server: mcp_service::Server) -> Result<(), Box<dyn std::error::Error>> {
//! use mcp_proto::server::ServerConfig;
//! use mcp_tokio::rustls::pki_types::pem::PemObject;
//! use mcp_tokio::rustls::pki_types::{CertificateDer, PrivateKeyDer};
//! use mcp_tokio::{ClientTls, ServerTls};
//!
//! let chain = CertificateDer::pem_file_iter("cert.pem")?.collect::<Result<Vec<_>, _>>()?;
//! let key = PrivateKeyDer::from_pem_file("key.pem")?;
//! let tls = ServerTls::single_cert(chain, key)?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8443").await?;
//! let serving = mcp_tokio::serve(listener, server).tls(tls).start()?;
//!
//! let mut roots = mcp_tokio::rustls::RootCertStore::empty();
//! for ca in CertificateDer::pem_file_iter("ca.pem")? {
//!     roots.add(ca?)?;
//! }
//! let client = mcp_tokio::Client::builder(serving.url())
//!     .http(|h| h.tls(ClientTls::roots(roots)))
//!     .connect()
//!     .await?;
//! # let _ = client; Ok(()) }
//! ```
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
//! session, a bearer-token provider, timeouts); [`Connect::http`] sets what `https://`
//! trusts, or replaces the HTTP client or its connector (proxies, Unix sockets).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod client;
mod first;
#[cfg(feature = "redis")]
mod redis;
mod server;

pub use client::{Client, ConnectBuilder, Http, HttpOptions};
/// The run loops this adapter drives (`mcp-driver`), for what the re-exports below leave out.
pub use mcp_driver as driver;
#[cfg(feature = "tls")]
pub use mcp_driver::tls::rustls;
pub use mcp_driver::{
    Adapter, AsyncAuthenticator, ClusterBackend, Connect, ConnectError, DriverConfig, DriverGone,
    EraCache, PeerAddr, RandomSessionIds, ResponseAborted, Serve, ServerHandle, Serving,
};
#[cfg(feature = "tls")]
pub use mcp_driver::{ClientTls, ServerTls};
/// The sans-IO core (`mcp-proto`): the transport machines, their configurations and errors.
pub use mcp_proto as proto;
pub use mcp_proto::client::ClientConfig;
pub use mcp_proto::server::ServerConfig;
#[cfg(feature = "redis")]
pub use mcp_redis::{RedisConfig, RedisUrlError};
/// The typed API (`mcp-service`): `Server`, tools, resources, prompts, `RequestContext`, the
/// typed `Client` and the MCP schema types.
pub use mcp_service as service;
#[cfg(feature = "redis")]
pub use redis::redis_backend;
pub use server::{McpService, ResponseBody, Tokio, serve};
