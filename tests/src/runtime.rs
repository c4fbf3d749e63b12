//! The two runtime adapters behind one interface, so that an end-to-end scenario is written
//! once and run on every runtime and on the cross pairs (a smol client against a tokio
//! server and the reverse), and so that the binaries take `--runtime`.
//!
//! The tokio adapter must be called from inside a tokio runtime (it spawns there). The smol
//! adapter spawns its tasks on smol's global executor and its sockets use smol's reactor,
//! whoever awaits its futures: a test body run by `#[tokio::test]` drives a smol server and
//! client that run on smol.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use mcp_proto::client::ClientConfig;
use mcp_proto::server::ServerConfig;
use mcp_proto::service::Server;
use mcp_proto::service::client::{Client as ServiceClient, ClientBuilder, RequestError};

/// A runtime adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// `mcp-tokio`: tokio + hyper 1.
    Tokio,
    /// `mcp-smol`: smol + async-h1.
    Smol,
}

impl Runtime {
    /// Every runtime.
    pub const ALL: [Runtime; 2] = [Runtime::Tokio, Runtime::Smol];

    /// Its name on the command line (`--runtime NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Tokio => "tokio",
            Runtime::Smol => "smol",
        }
    }
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Runtime {
    type Err = String;

    fn from_str(s: &str) -> Result<Runtime, String> {
        match s {
            "tokio" => Ok(Runtime::Tokio),
            "smol" => Ok(Runtime::Smol),
            other => Err(format!("unknown runtime {other:?} (tokio or smol)")),
        }
    }
}

/// A running server of either adapter.
#[derive(Debug)]
pub enum Serving {
    /// On tokio.
    Tokio(mcp_tokio::Serving),
    /// On smol.
    Smol(mcp_smol::Serving),
}

/// Starts the shutdown of a [`Serving`] from anywhere.
#[derive(Debug, Clone)]
pub enum ShutdownHandle {
    /// On tokio.
    Tokio(mcp_tokio::ShutdownHandle),
    /// On smol.
    Smol(mcp_smol::ShutdownHandle),
}

impl ShutdownHandle {
    /// Starts the shutdown.
    pub fn shutdown(&self) {
        match self {
            ShutdownHandle::Tokio(h) => h.shutdown(),
            ShutdownHandle::Smol(h) => h.shutdown(),
        }
    }
}

impl Serving {
    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        match self {
            Serving::Tokio(s) => s.local_addr(),
            Serving::Smol(s) => s.local_addr(),
        }
    }

    /// The MCP endpoint's URL.
    pub fn url(&self) -> &str {
        match self {
            Serving::Tokio(s) => s.url(),
            Serving::Smol(s) => s.url(),
        }
    }

    /// A handle that starts the shutdown from elsewhere.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        match self {
            Serving::Tokio(s) => ShutdownHandle::Tokio(s.shutdown_handle()),
            Serving::Smol(s) => ShutdownHandle::Smol(s.shutdown_handle()),
        }
    }

    /// Waits until the server has shut down.
    pub async fn wait(self) {
        match self {
            Serving::Tokio(s) => s.wait().await,
            Serving::Smol(s) => s.wait().await,
        }
    }

    /// Shuts down and waits for the connections to finish.
    pub async fn shutdown(self) {
        match self {
            Serving::Tokio(s) => s.shutdown().await,
            Serving::Smol(s) => s.shutdown().await,
        }
    }
}

/// Why a client could not connect (either adapter's error, flattened).
#[derive(Debug)]
pub enum ConnectError {
    /// The URL is not an absolute `http://` URL.
    InvalidUrl(String),
    /// `initialize` failed.
    Initialize(RequestError),
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::InvalidUrl(why) => write!(f, "invalid URL: {why}"),
            ConnectError::Initialize(e) => write!(f, "initialize failed: {e}"),
        }
    }
}

impl std::error::Error for ConnectError {}

impl From<mcp_tokio::ConnectError> for ConnectError {
    fn from(e: mcp_tokio::ConnectError) -> Self {
        match e {
            mcp_tokio::ConnectError::InvalidUrl(u) => ConnectError::InvalidUrl(u),
            mcp_tokio::ConnectError::Initialize(e) => ConnectError::Initialize(e),
            other => ConnectError::InvalidUrl(other.to_string()),
        }
    }
}

impl From<mcp_smol::ConnectError> for ConnectError {
    fn from(e: mcp_smol::ConnectError) -> Self {
        match e {
            mcp_smol::ConnectError::InvalidUrl(u) => ConnectError::InvalidUrl(u),
            mcp_smol::ConnectError::Initialize(e) => ConnectError::Initialize(e),
            other => ConnectError::InvalidUrl(other.to_string()),
        }
    }
}

/// A client of either adapter; derefs to the service client.
#[derive(Debug)]
pub enum Client {
    /// On tokio.
    Tokio(mcp_tokio::Client),
    /// On smol.
    Smol(mcp_smol::Client),
}

impl std::ops::Deref for Client {
    type Target = ServiceClient;

    fn deref(&self) -> &ServiceClient {
        match self {
            Client::Tokio(c) => c,
            Client::Smol(c) => c,
        }
    }
}

impl Client {
    /// The service client (cheap to clone).
    pub fn client(&self) -> &ServiceClient {
        self
    }

    /// Closes the session and waits for the driver to finish.
    pub async fn close(self) {
        match self {
            Client::Tokio(c) => c.close().await,
            Client::Smol(c) => c.close().await,
        }
    }
}

impl Runtime {
    /// Runs `future` to completion on this runtime: a multi-threaded tokio runtime, or
    /// `smol::block_on` (smol's global executor runs what the adapter spawns).
    ///
    /// # Panics
    ///
    /// When the tokio runtime cannot be built.
    pub fn block_on<F: Future>(self, future: F) -> F::Output {
        match self {
            Runtime::Tokio => tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime")
                .block_on(future),
            Runtime::Smol => smol::block_on(future),
        }
    }

    /// `future`'s output, or `None` after `limit`, timed by this runtime's timer.
    pub async fn timeout<F: Future>(self, limit: Duration, future: F) -> Option<F::Output> {
        match self {
            Runtime::Tokio => tokio::time::timeout(limit, future).await.ok(),
            Runtime::Smol => {
                use smol::future::FutureExt;
                async { Some(future.await) }
                    .or(async {
                        smol::Timer::after(limit).await;
                        None
                    })
                    .await
            }
        }
    }

    /// Resolves at the first Ctrl-C (SIGINT).
    ///
    /// # Errors
    ///
    /// When the signal cannot be watched.
    pub async fn ctrl_c(self) -> io::Result<()> {
        match self {
            Runtime::Tokio => tokio::signal::ctrl_c().await,
            Runtime::Smol => {
                use smol::stream::StreamExt;
                let mut signals = async_signal::Signals::new([async_signal::Signal::Int])?;
                signals.next().await;
                Ok(())
            }
        }
    }

    /// Serves `server` on `addr` with this runtime's adapter.
    ///
    /// # Errors
    ///
    /// When the address cannot be bound.
    pub async fn serve_on(
        self,
        addr: SocketAddr,
        server: Server,
        config: ServerConfig,
    ) -> io::Result<Serving> {
        Ok(match self {
            Runtime::Tokio => {
                let listener = tokio::net::TcpListener::bind(addr).await?;
                Serving::Tokio(mcp_tokio::serve(listener, server, config)?)
            }
            Runtime::Smol => {
                let listener = smol::net::TcpListener::bind(addr).await?;
                Serving::Smol(mcp_smol::serve(listener, server, config)?)
            }
        })
    }

    /// Serves `server` on a free loopback port.
    ///
    /// # Errors
    ///
    /// When no loopback port can be bound.
    pub async fn serve(self, server: Server, config: ServerConfig) -> io::Result<Serving> {
        self.serve_on(SocketAddr::from(([127, 0, 0, 1], 0)), server, config)
            .await
    }

    /// Connects with this runtime's client and initializes the session.
    ///
    /// # Errors
    ///
    /// As the adapters' `connect_with`.
    pub async fn connect_with(
        self,
        url: &str,
        builder: ClientBuilder,
        config: ClientConfig,
    ) -> Result<Client, ConnectError> {
        Ok(match self {
            Runtime::Tokio => {
                Client::Tokio(mcp_tokio::Client::connect_with(url, builder, config).await?)
            }
            Runtime::Smol => {
                Client::Smol(mcp_smol::Client::connect_with(url, builder, config).await?)
            }
        })
    }

    /// Connects as the adapter's default client (`Client::connect`).
    ///
    /// # Errors
    ///
    /// As the adapters' `connect`.
    pub async fn connect(self, url: &str) -> Result<Client, ConnectError> {
        Ok(match self {
            Runtime::Tokio => Client::Tokio(mcp_tokio::Client::connect(url).await?),
            Runtime::Smol => Client::Smol(mcp_smol::Client::connect(url).await?),
        })
    }

    /// Starts a client without initializing.
    ///
    /// # Errors
    ///
    /// A URL that is not absolute `http://`.
    pub fn start(
        self,
        url: &str,
        builder: ClientBuilder,
        config: ClientConfig,
    ) -> Result<Client, ConnectError> {
        Ok(match self {
            Runtime::Tokio => Client::Tokio(mcp_tokio::Client::start(url, builder, config)?),
            Runtime::Smol => Client::Smol(mcp_smol::Client::start(
                url,
                builder,
                config,
                mcp_smol::ClientOptions::default(),
            )?),
        })
    }
}
