//! The server: [`serve`] (a TCP accept loop of hyper `http1` connections) on
//! [`McpService`] (the hyper service and its driver task).

mod driver;
mod service;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use mcp_proto::server::{DEFAULT_SHUTDOWN_GRACE, ServerConfig, SessionIdGenerator};
use mcp_proto::service::Server;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

pub use driver::Limits;
pub use service::{DriverGone, McpService, ResponseAborted, ResponseBody};

/// Session ids from the operating system's CSPRNG: 16 random bytes as 32 lowercase hex
/// characters (S-SESS-2).
#[derive(Debug, Default, Clone, Copy)]
pub struct RandomSessionIds;

impl SessionIdGenerator for RandomSessionIds {
    fn generate(&mut self) -> String {
        let mut bytes = [0u8; 16];
        if let Err(e) = getrandom::fill(&mut bytes) {
            // An empty id is invalid: the router refuses to send it, so the session fails
            // closed rather than get a guessable id.
            tracing::error!(error = %e, "no random source for a session id");
            return String::new();
        }
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// A running server (from [`serve`]). Dropping it detaches the server (it keeps serving
/// until the runtime ends); [`Serving::shutdown`] stops it.
#[derive(Debug)]
pub struct Serving {
    local_addr: SocketAddr,
    url: String,
    trigger: ShutdownHandle,
    accept: JoinHandle<()>,
}

/// Starts the shutdown of a [`Serving`] from anywhere (a signal handler, another task).
#[derive(Debug, Clone)]
pub struct ShutdownHandle {
    service: McpService,
    stop: Arc<watch::Sender<bool>>,
}

impl ShutdownHandle {
    /// Starts a draining shutdown with the core's default grace period
    /// ([`DEFAULT_SHUTDOWN_GRACE`]); see [`Serving::shutdown_within`]. [`Serving::wait`]
    /// sees it end.
    pub fn shutdown(&self) {
        self.shutdown_within(DEFAULT_SHUTDOWN_GRACE);
    }

    /// Starts a draining shutdown bounded by `grace` (see [`Serving::shutdown_within`]).
    pub fn shutdown_within(&self, grace: Duration) {
        let _ = self.stop.send(true);
        self.service.shutdown_within(grace);
    }
}

impl Serving {
    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The MCP endpoint's URL, e.g. `http://127.0.0.1:8080/mcp`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The service (to stop its driver separately, or to serve more connections).
    pub fn service(&self) -> &McpService {
        &self.trigger.service
    }

    /// A handle that starts the shutdown from elsewhere.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.trigger.clone()
    }

    /// Waits until the server has shut down (started by a [`ShutdownHandle`]).
    pub async fn wait(self) {
        let _ = self.accept.await;
    }

    /// [`shutdown_within`](Serving::shutdown_within) the core's default grace period
    /// ([`DEFAULT_SHUTDOWN_GRACE`]).
    pub async fn shutdown(self) {
        self.shutdown_within(DEFAULT_SHUTDOWN_GRACE).await;
    }

    /// Shuts down, draining: stops accepting connections; on the open ones, new requests
    /// are refused (the core answers 503 with a JSON-RPC error), GET streams end cleanly,
    /// and requests in flight finish and have their responses written. When nothing is in
    /// flight, or after `grace` (then what is left is cancelled and answered 503 where no
    /// response started), the driver stops, every connection closes after its response in
    /// progress, and this resolves. A client that does not read its response can hold its
    /// connection open past `grace`: wrap the call in a timeout to bound that.
    pub async fn shutdown_within(self, grace: Duration) {
        self.trigger.shutdown_within(grace);
        self.wait().await;
    }
}

/// Serves `server` on `listener` (HTTP/1.1, `TCP_NODELAY` on every connection) until
/// [`Serving::shutdown`].
///
/// `config` is adjusted as every adapter must: session ids from [`RandomSessionIds`] unless
/// it has a generator, and [`ServerConfig::bound_to`] the listener's address (loopback
/// `Host` validation for a loopback bind).
///
/// # Errors
///
/// When the listener's local address cannot be read.
///
/// # Panics
///
/// Outside a tokio runtime.
pub fn serve(listener: TcpListener, server: Server, config: ServerConfig) -> io::Result<Serving> {
    serve_with(listener, server, config, Limits::default())
}

/// [`serve`] with explicit adapter queue bounds ([`Limits`]).
///
/// # Errors
///
/// When the listener's local address cannot be read.
///
/// # Panics
///
/// Outside a tokio runtime.
pub fn serve_with(
    listener: TcpListener,
    server: Server,
    config: ServerConfig,
    limits: Limits,
) -> io::Result<Serving> {
    let local_addr = listener.local_addr()?;
    let url = format!("http://{local_addr}{}", config.endpoint_path);
    let config = config.bound_to(local_addr.ip());
    let service = McpService::with_limits(server, config, limits);
    let (stop, stop_rx) = watch::channel(false);
    let accept = tokio::spawn(accept_loop(listener, service.clone(), stop_rx));
    tracing::info!(%url, "serving MCP");
    Ok(Serving {
        local_addr,
        url,
        trigger: ShutdownHandle {
            service,
            stop: Arc::new(stop),
        },
        accept,
    })
}

async fn accept_loop(listener: TcpListener, service: McpService, mut stop: watch::Receiver<bool>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            biased;
            _ = stop.changed() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => {
                    if let Err(e) = tcp.set_nodelay(true) {
                        tracing::debug!(%peer, error = %e, "TCP_NODELAY");
                    }
                    connections.spawn(connection(tcp, peer, service.clone()));
                }
                // Per-connection failures (resets, fd limits) must not end the server.
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::task::yield_now().await;
                }
            },
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

/// Serves one connection until it ends or the driver stopped (the end of a drain: the
/// connection then closes after its response in progress).
async fn connection(tcp: tokio::net::TcpStream, peer: SocketAddr, service: McpService) {
    let stopped = service.clone();
    // hyper's timer: its own defaults (the header read timeout) then apply, so a client that
    // never finishes a request head cannot hold the connection forever.
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .serve_connection(TokioIo::new(tcp), service);
    let mut conn = std::pin::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = stopped.stopped() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection ended");
    }
}
